#!/usr/bin/env bash
# The main job: install what is missing, build, format an image file with
# mkfs.tinyfs and show its superblock.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release -Db_ndebug=false >/dev/null
ninja -C build >/dev/null

img=${TFS_DEMO_IMAGE:-/tmp/tinyfs-demo.img}
rm -f "$img"
echo "\$ mkfs.tinyfs --size 64M -L demo $img"
build/tools/mkfs.tinyfs --size 64M -L demo "$img"
echo
echo "\$ tinyfs show-super -f all -l $img"
build/tools/tinyfs show-super -f all -l "$img"
