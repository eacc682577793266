#!/usr/bin/env bash
# A daemon in the background without -o log=FILE sends its messages to
# syslog (fuse/mount.c detach_stdio()): mounted without -f and without log=,
# a data write fails under the daemon (TFS_FAULTS) and the fault's message
# must arrive, as "<27>tinyfs[PID]: ..." (LOG_DAEMON, LOG_ERR, the daemon's
# pid), at a datagram socket this test listens on.  TFS_TEST_SYSLOG=PATH
# points the daemon there instead of /dev/log (absent in most containers).
#   test_fuse_syslog.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3

fresh_image 128M
sock=$tmp/log.sock
# Each datagram a line of $tmp/syslog.txt; gives up after 60 s without one.
python3 - "$sock" "$tmp/syslog.txt" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[2], "a") as out:
    try:
        while True:
            out.write(s.recv(4096).decode(errors="replace") + "\n")
            out.flush()
    except socket.timeout:
        pass
PY
listener=$!
for i in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { fail "the test's syslog socket never appeared"; finish; }

TFS_TEST_SYSLOG=$sock TFS_FAULTS="dev $img tag=data write nth=1 fail=EIO" tfs_mount "$img" "$mnt" ||
	{ fail "mount with TFS_FAULTS"; kill "$listener"; finish; }
pid=$(daemon_pid "$mnt")
# The first data write fails: its fsync reports EIO, the daemon says why.
dd if=/dev/zero of="$mnt/f" bs=4k count=1 conv=fsync status=none 2>/dev/null &&
	fail "fsync after a failed data write succeeded"
for i in $(seq 100); do grep -q "fault:.*fail" "$tmp/syslog.txt" 2>/dev/null && break; sleep 0.1; done
grep -q "^<27>tinyfs\[$pid\]: .*fault:.*fail" "$tmp/syslog.txt" ||
	fail "no fault message from daemon $pid in syslog (got: $(head -3 "$tmp/syslog.txt" 2>/dev/null))"
tfs_umount "$mnt"
kill "$listener" 2>/dev/null
wait "$listener" 2>/dev/null
finish
