#!/usr/bin/env bash
# Set-ID bits and a failed open(O_TRUNC): Linux truncates, and drops the
# bits as truncate(2) does, only once the open succeeded (do_open():
# handle_truncate() after vfs_open()), in one change.  Here the open of a
# 06777 file by another user fails in the daemon (TFS_FAULTS alloc:file):
# the mode and the bytes must be as before; the next open clears both.
#   test_fuse_setid.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (opens as another user)"
command -v setpriv >/dev/null || skip "setpriv is absent (util-linux)"
# as_nobody CMD...: runs CMD as uid/gid 65534 without other groups or capabilities.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

fresh_image 64M
mount_or_finish "mount" "$img" "$mnt"
printf ab >"$mnt/f" && chmod 06777 "$mnt/f" || fail "set up f"
tfs_umount "$mnt"

# oneshot: the next struct tfs_file allocation, that of the open below.
TFS_FAULTS="point alloc:file oneshot" mount_or_finish "mount with TFS_FAULTS" \
	-o "log=$tmp/daemon.log" "$img" "$mnt"
(cd "$mnt" && as_nobody sh -c ': >f') 2>/dev/null && fail "open(O_TRUNC) succeeded with the fault armed"
grep -q "alloc:file" "$tmp/daemon.log" || fail "the fault never fired (daemon log: $(head -3 "$tmp/daemon.log"))"
# What the daemon keeps, not what the kernel cached: after a remount.
tfs_umount "$mnt"
mount_or_finish "mount again" "$img" "$mnt"
st=$(stat -c "%a %s" "$mnt/f")
[ "$st" = "6777 2" ] || fail "a failed open(O_TRUNC) changed the file: mode and size $st, expected 6777 2"

# The same open without the fault: truncated, S_ISUID and S_ISGID (group-executable) gone.
(cd "$mnt" && as_nobody sh -c ': >f') || fail "open(O_TRUNC) as nobody"
st=$(stat -c "%a %s" "$mnt/f")
[ "$st" = "777 0" ] || fail "open(O_TRUNC) by another user: mode and size $st, expected 777 0"
tfs_umount "$mnt"
fsck_clean "$img"
finish
