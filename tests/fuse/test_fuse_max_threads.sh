#!/usr/bin/env bash
# The request loop with few threads (-o max_threads=N, fuse/loop.c): a
# request whose handler waits for the kernel to send other requests must
# not leave the mount with no thread to read them.  SEEK_DATA/SEEK_HOLE
# with the writeback cache (op_lseek): a child writes the file's dirty
# pages back through the mount (open, the writes) while the thread that
# serves the lseek waits for it.  With max_threads=1 that thread was the
# only one: nobody read the open, and every process on the mount hung.
#   test_fuse_max_threads.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3
[ "$(id -u)" = 0 ] || skip "lseek's page flush needs root (open_by_handle_at)"

fresh_image 64M

# seek_check THREADS PROCS: dirty pages in the kernel, then SEEK_DATA and
# SEEK_HOLE from PROCS processes at once; all must answer within 20 s.
seek_check() {
	local threads=$1 procs=$2 pid
	mount_or_finish "mount max_threads=$threads" -o "max_threads=$threads" "$img" "$mnt"
	pid=$(daemon_pid "$mnt")
	python3 - "$mnt" "$procs" <<'PY'
import os, sys, time
mnt, procs = sys.argv[1], int(sys.argv[2])
pids = []
for i in range(procs):
    pid = os.fork()
    if not pid:
        p = os.path.join(mnt, "f%d" % i)
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, b"x" * 8192, 1 << 20)  # dirty, not written back: a hole before
        d = os.lseek(fd, 0, os.SEEK_DATA)
        h = os.lseek(fd, d, os.SEEK_HOLE)
        os._exit(0 if (d, h) == (1 << 20, (1 << 20) + 8192) else 1)
    pids.append(pid)
end = time.monotonic() + 20
bad = 0
while pids and time.monotonic() < end:
    for pid in list(pids):
        w, status = os.waitpid(pid, os.WNOHANG)
        if w:
            pids.remove(pid)
            bad += status != 0
    time.sleep(0.05)
print("# %d wrong answers, %d still waiting after 20 s" % (bad, len(pids)))
sys.exit(1 if bad or pids else 0)
PY
	local ret=$?
	if [ $ret != 0 ]; then
		fail "max_threads=$threads, $procs lseeks: hung or wrong"
		# Free the waiters (a stat of the mount would hang too): the daemon goes.
		kill -9 "$pid" 2>/dev/null
		sleep 1
	fi
	tfs_umount "$mnt" || true
}

seek_check 1 1
seek_check 2 3
finish
