#!/usr/bin/env bash
# Checks the committed images byte for byte:
#   1. show-super on each committed image prints exactly NAME.expected;
#   2. regenerating every image (mkfs with the fixed uuid and time, then the
#      same patches) gives exactly the committed bytes.
#   check.sh SRCDIR/images BUILD_DIR
set -euo pipefail
here=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
mkfs=$build/tools/mkfs.tinyfs tinyfs=$build/tools/tinyfs
. "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/committed" "$tmp/regen"
fail=0
cd "$tmp/committed"
for n in $IMAGES; do
	gzip -dc "$here/$n.img.gz" >"$n.img"
	if ! diff -u "$here/$n.expected" <(expected "$n"); then
		echo "FAIL: show-super output of $n differs from $n.expected"
		fail=1
	fi
done
make_images "$tmp/regen" "$here/patch.py"
for n in $IMAGES; do
	if ! cmp "$tmp/committed/$n.img" "$tmp/regen/$n.img"; then
		echo "FAIL: regenerated $n.img differs from the committed one"
		fail=1
	fi
done
[ $fail = 0 ] && echo "all images match"
exit $fail
