#!/usr/bin/env bash
# ENOSPC with many processes at once (fsstress on a full filesystem): 6
# processes fill a 48 MiB image with files (some fsync'ed, some written
# through a mapping), directories with xattrs and long symlinks, and free
# some at each ENOSPC (enospc_churn.py).  Only ENOSPC may fail, and
# write-back must never lack room for a node copy: before the fixes it did
# (data took all but the allocator's fixed block reserve while more nodes
# were dirty than it held; and free space fragmented by data had no
# contiguous node-size run left) and the filesystem went read-only, 3 runs
# in 3 (and in the 60 s form with only the first fix).  What was kept reads
# back; fsck is clean; a new mount is writable.  8 s (TFS_LONG=1: 60 s).
#   test_fuse_enospc_churn.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
secs=8
[ "${TFS_LONG:-0}" = 1 ] && secs=60
need_python3

fresh_image 48M
mount_or_finish mount -o "log=$tmp/daemon.log" "$img" "$mnt"
python3 "$src/enospc_churn.py" "$mnt/churn" "$secs" 6 || fail "enospc_churn.py"
# Write-back must never lack room for a node copy (not even once).
grep -q 'read-only\|no space for' "$tmp/daemon.log" &&
	fail "write-back ran out of space: $(grep -m2 'no space for\|read-only' "$tmp/daemon.log")"
rm -rf "$mnt/churn" || fail "rm -rf after the churn"
tfs_umount "$mnt"
fsck_clean "$img"
mount_or_finish "mount again" "$img" "$mnt"
dd if=/dev/zero of="$mnt/after" bs=1M count=16 status=none || fail "16 MiB after the churn"
tfs_umount "$mnt"
fsck_clean "$img" "fsck -n at the end"
finish
