#!/usr/bin/env bash
# Regenerates the committed images (gzip -n of each) and their expected
# show-super output:   images/gen.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: gen.sh BUILD_DIR}" && pwd)
mkfs=$build/tools/mkfs.tinyfs tinyfs=$build/tools/tinyfs
. "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make_images "$tmp" "$here/patch.py"
cd "$tmp"
for n in $IMAGES; do
	gzip -9n -c "$n.img" >"$here/$n.img.gz"
	expected "$n" >"$here/$n.expected"
done
echo "regenerated: $IMAGES"
