#!/usr/bin/env bash
# ENOSPC through the mount on a small image: fill it with file data, then
# every call that needs space fails with ENOSPC (never EROFS: before the fix,
# creates at ENOSPC ate the space write-back needs and the filesystem went
# read-only), deleting frees the space, fsck is clean and a new mount shows
# the same tree.
#   test_fuse_enospc.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 64M
mount_or_finish mount -o "log=$tmp/daemon.log" "$img" "$mnt"
mkdir "$mnt/fill" && echo keep >"$mnt/keep" || fail "first files"
i=0
while dd if=/dev/zero of="$mnt/fill/f$i" bs=1M count=4 status=none 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 100 ] || break
done
[ $i -gt 5 ] && [ $i -lt 100 ] || fail "filled with $i files of 4 MiB on a 64 MiB image"
# Empty files until one fails: the failure must be ENOSPC.
n=0
while err=$(touch "$mnt/fill/s$n" 2>&1); do
	n=$((n + 1))
	[ $n -lt 20000 ] || break
done
case $err in
*"No space left"*) ;;
*) fail "touch number $n at ENOSPC: '$err' (want No space left on device)" ;;
esac
for what in "mkdir $mnt/fill/d" "ln -s target $mnt/fill/sl" "ln $mnt/keep $mnt/fill/hl"; do
	err=$($what 2>&1) && fail "$what succeeded at ENOSPC"
	case $err in
	*"No space left"*) ;;
	*) fail "$what at ENOSPC: '$err'" ;;
	esac
done
grep -q 'read-only' "$tmp/daemon.log" && fail "the filesystem went read-only: $(grep -m1 'read-only' "$tmp/daemon.log")"
[ "$(cat "$mnt/keep")" = keep ] || fail "a file written before reads back"
# Deleting frees the space: as much fits again.
rm -rf "$mnt/fill" 2>"$tmp/rm.err" || fail "rm -rf at ENOSPC: $(head -2 "$tmp/rm.err")"
sync "$mnt"
mkdir "$mnt/again" && dd if=/dev/zero of="$mnt/again/big" bs=1M count=$((i * 4 - 8)) status=none ||
	fail "$((i * 4 - 8)) MiB after deleting $((i * 4)) MiB"
find "$mnt" | sort >"$tmp/tree1"
tfs_umount "$mnt"
fsck_clean "$img"
mount_or_finish "mount again" "$img" "$mnt"
find "$mnt" | sort >"$tmp/tree2"
cmp -s "$tmp/tree1" "$tmp/tree2" || fail "the tree after a new mount differs: $(diff "$tmp/tree1" "$tmp/tree2" | head -5)"
tfs_umount "$mnt"
finish
