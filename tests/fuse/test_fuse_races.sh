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
need_python3

fresh_image 256M
mount_or_finish mount "$img" "$mnt"
python3 "$src/races.py" "$mnt/r" "$rounds" || fail "races.py"
sum1=$(md5sum <"$mnt/r/shared")
tfs_umount "$mnt"
fsck_clean "$img"
mount_or_finish "mount again" "$img" "$mnt"
[ "$(md5sum <"$mnt/r/shared")" = "$sum1" ] || fail "the shared file differs after a new mount"
tfs_umount "$mnt"
finish
