#!/usr/bin/env bash
# Two members with replicas=2: written through the mount, then one member
# missing.  Without -o degraded the mount is refused, naming what is
# missing; with it the files are all there.
#   test_fuse_degraded.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

a=$tmp/a.img b=$tmp/b.img mnt=$tmp/mnt
"$mkfs" -q --metadata-replicas 2 --data-replicas 2 --size 128M "$a" --dev-label b "$b" ||
	{ fail "mkfs of two members"; finish; }
mount_or_finish "mount of two members" "$a:$b" "$mnt"
grep -q " $mnt fuse.tinyfs " /proc/self/mounts && grep -q "^$a:$b $mnt " /proc/self/mounts ||
	fail "mountinfo source is not $a:$b"
mkdir "$mnt/d" && head -c 1000000 /dev/urandom >"$mnt/d/data" && echo small >"$mnt/small" ||
	fail "writes"
sum=$(md5sum <"$mnt/d/data")
tfs_umount "$mnt"

mv "$b" "$tmp/b.away"
tfs_mount "$a" "$mnt" 2>"$tmp/err" && { fail "mount with a member missing worked without -o degraded"; tfs_umount "$mnt"; }
[ -s "$tmp/err" ] || fail "refused mount said nothing"
# Which member, and the two ways out.
grep -q "member 1 (uuid [0-9a-f-]*, label \"b\") is missing" "$tmp/err" ||
	fail "refused mount does not name the missing member: $(cat "$tmp/err")"
grep -qF -- "-o degraded" "$tmp/err" || fail "refused mount does not mention -o degraded"
cat "$tmp/err"
mount_or_finish "mount -o degraded" -o degraded "$a" "$mnt"
[ "$(md5sum <"$mnt/d/data")" = "$sum" ] || fail "data differs on the degraded mount"
[ "$(cat "$mnt/small")" = small ] || fail "small file on the degraded mount"
tfs_umount "$mnt"
finish
