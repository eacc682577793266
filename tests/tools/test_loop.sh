#!/usr/bin/env bash
# mkfs.tinyfs and show-super on a loop device; skips (77) where losetup
# cannot attach one.
#   test_loop.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/test_loop.XXXXXX)
loop=
cleanup() { [ -n "$loop" ] && losetup -d "$loop"; rm -rf "$tmp"; }
trap cleanup EXIT
truncate -s 32M "$tmp/backing.img"
if ! loop=$(losetup -f --show "$tmp/backing.img" 2>/dev/null); then
	loop=
	echo "skip: losetup cannot attach a loop device here"
	exit 77
fi
st=0
"$build/tools/mkfs.tinyfs" -q -L loopfs "$loop" || { echo "FAIL: mkfs on $loop"; st=1; }
out=$("$build/tools/tinyfs" show-super "$loop") || { echo "FAIL: show-super $loop"; st=1; }
grep -q "Label: *loopfs" <<<"$out" || { echo "FAIL: label on $loop"; st=1; }
grep -q "Size: *32.0 MiB" <<<"$out" || { echo "FAIL: size on $loop"; st=1; }
[ $st = 0 ] && echo "loop device ok"
exit $st
