#!/usr/bin/env bash
# fsync errors through the mount (xfstests generic/484, fsync-err.c): a data
# write fails in the device under the daemon (TFS_FAULTS), and each of N
# descriptors open on the file gets EIO from fsync exactly once, then 0.
#   test_fuse_fsync_eio.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 128M
mkdir -p "$mnt/../ok"
# Every data write fails once the rule is armed; the first one is the test's.
TFS_FAULTS="dev $img tag=data write nth=1 fail=EIO" tfs_mount -o "log=$tmp/daemon.log" "$img" "$mnt" ||
	{ fail "mount with TFS_FAULTS"; finish; }
mkdir "$mnt/e" && "$fuse_ops" fsync-eio 4 "$mnt/e" || fail "fsync-eio: every descriptor's EIO once, then 0"
grep -q "fail" "$tmp/daemon.log" || fail "the fault never fired (daemon log: $(head -3 "$tmp/daemon.log"))"
# Later writes work again and stay.
echo after >"$mnt/after" && sync && [ "$(cat "$mnt/after")" = after ] || fail "write after the error"
tfs_umount "$mnt"
finish
