#!/usr/bin/env bash
# The main job: install what is missing, build, make an image file and show
# what it holds.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release -Db_ndebug=false >/dev/null
ninja -C build >/dev/null

img=${TFS_DEMO_IMAGE:-/tmp/tinyfs-demo.img}
rm -f "$img"
truncate -s 64M "$img"
echo "created $img:"
ls -ls "$img"
