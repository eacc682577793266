#!/usr/bin/env bash
# kill -9 of the daemon while it writes back the kernel's dirty pages of a
# file for SEEK_DATA (flush_kernel_pages(): sync_file_range() through its
# own mount, an uninterruptible wait for writes only the daemon answers):
# the daemon must still exit, so /dev/fuse is closed, the connection
# aborted and the processes on the mount released.  Data writes are held
# 3 s by the fault device so the kill lands inside that wait.  Before the
# fix the daemon stayed, a thread in folio_wait_bit, until umount -f.
#   test_fuse_kill_flush.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3
# Not root: no open_by_handle_at, the daemon answers lseek without the flush.
[ "$(id -u)" = 0 ] || skip "the page flush for SEEK_DATA needs root (open_by_handle_at)"

fresh_image 128M
TFS_FAULTS="dev $img write tag=data delay=3000" mount_or_finish "mount" "$img" "$mnt"
pid=$(daemon_pid "$mnt")
[ -n "$pid" ] || { fail "no daemon pid"; finish; }
python3 - "$mnt/f" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * (4 << 20))
try:
    os.lseek(fd, 0, os.SEEK_DATA)
except OSError:
    pass
PY
py=$!
# Wait until the daemon (a thread, or a child it made for it) is in sync_file_range.
in_flush() {
	local t k
	for t in /proc/"$pid"/task/*; do
		grep -q sync_file_range "$t/stack" 2>/dev/null && return 0
		for k in $(cat "$t/children" 2>/dev/null); do
			grep -q sync_file_range "/proc/$k/stack" 2>/dev/null && return 0
		done
	done
	return 1
}
for i in $(seq 300); do
	in_flush && break
	sleep 0.05
done
in_flush || skip "the daemon never waited in sync_file_range (cannot read /proc/PID/stack?)"
kill -9 "$pid"
for i in $(seq 100); do
	[ -e "/proc/$pid" ] || break
	sleep 0.1
done
if [ -e "/proc/$pid" ]; then
	fail "daemon $pid still there 10 s after kill -9; its threads wait in: $(cat /proc/"$pid"/task/*/wchan 2>/dev/null | tr '\0' ' ')"
	umount -f "$mnt" 2>/dev/null # aborts the connection: everyone is released
fi
kill -9 "$py" 2>/dev/null
wait "$py" 2>/dev/null
umount "$mnt" 2>/dev/null || umount -l "$mnt"
# What the replay makes of it is test_fuse_crash's; here: it mounts and reads.
mount_or_finish "mount after kill -9" "$img" "$mnt"
cat "$mnt/f" >/dev/null 2>&1 || [ ! -e "$mnt/f" ] || fail "reading f after the replay"
tfs_umount "$mnt"
fsck_clean "$img"
finish
