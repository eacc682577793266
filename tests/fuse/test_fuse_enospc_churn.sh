#!/usr/bin/env bash
# ENOSPC with many processes at once (fsstress on a full filesystem): 6
# processes fill a 48 MiB image with files (some fsync'ed, some written
# through a mapping), directories with xattrs and long symlinks, and free
# some at each ENOSPC (enospc_churn.py).  Only ENOSPC may fail; the
# filesystem must never give up (before the fix, write-back found no space
# for its node copies -- data had taken all but the allocator's fixed
# reserve while more nodes were dirty than it held -- and the filesystem went
# read-only, 2 runs in 3); what was kept reads back; fsck is clean; a new
# mount is writable.  8 s (TFS_LONG=1: 60 s).
#   test_fuse_enospc_churn.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
secs=8
[ "${TFS_LONG:-0}" = 1 ] && secs=60
command -v python3 >/dev/null || skip "python3 is absent"

img=$tmp/a.img mnt=$tmp/mnt
new_image "$img" 48M || finish
tfs_mount -o "log=$tmp/daemon.log" "$img" "$mnt" || { fail "mount"; finish; }
python3 "$src/enospc_churn.py" "$mnt/churn" "$secs" 6 || fail "enospc_churn.py"
# A checkpoint may still fail now and then for want of a contiguous run for
# a node (free space fragmented by data: see the README's known issues); it
# is retried, but must not fail often enough for the filesystem to stop.
grep -q 'read-only' "$tmp/daemon.log" &&
	fail "the filesystem went read-only: $(grep -m2 'no space for\|read-only' "$tmp/daemon.log")"
rm -rf "$mnt/churn" || fail "rm -rf after the churn"
tfs_umount "$mnt"
"$tinyfs" fsck -n "$img" >"$tmp/fsck" 2>&1 || fail "fsck -n: $(head -5 "$tmp/fsck")"
tfs_mount "$img" "$mnt" || { fail "mount again"; finish; }
dd if=/dev/zero of="$mnt/after" bs=1M count=16 status=none || fail "16 MiB after the churn"
tfs_umount "$mnt"
"$tinyfs" fsck -n "$img" >"$tmp/fsck" 2>&1 || fail "fsck -n at the end: $(head -5 "$tmp/fsck")"
finish
