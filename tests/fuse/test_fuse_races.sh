#!/usr/bin/env bash
# Races between processes through the mount (races.py: O_CREAT|O_EXCL
# winners, listings during creates and unlinks, crossing directory renames,
# stripes of one file by write(2), mmap and O_DIRECT), then unmount, fsck -n
# clean, and the stripes read back after a new mount.  A few seconds
# (TFS_LONG=1: 10 times the rounds).
#   test_fuse_races.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
rounds=100
[ "${TFS_LONG:-0}" = 1 ] && rounds=1000
command -v python3 >/dev/null || skip "python3 is absent"

img=$tmp/a.img mnt=$tmp/mnt
new_image "$img" 256M || finish
tfs_mount "$img" "$mnt" || { fail "mount"; finish; }
python3 "$src/races.py" "$mnt/r" "$rounds" || fail "races.py"
sum1=$(md5sum <"$mnt/r/shared")
tfs_umount "$mnt"
"$tinyfs" fsck -n "$img" >"$tmp/fsck" 2>&1 || fail "fsck -n: $(head -5 "$tmp/fsck")"
tfs_mount "$img" "$mnt" || { fail "mount again"; finish; }
[ "$(md5sum <"$mnt/r/shared")" = "$sum1" ] || fail "the shared file differs after a new mount"
tfs_umount "$mnt"
finish
