#!/usr/bin/env bash
# Replay after the daemon is killed (SIGKILL) at random moments of a
# workload: every file whose fsync returned is intact at the next mount
# (the journal is replayed), the tree is usable, and a clean unmount then
# leaves a filesystem that mounts again.  TFS_LONG=1: more rounds.
#   test_fuse_crash.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

rounds=3
[ -n "${TFS_LONG:-}" ] && rounds=20
fresh_image 256M

# The workload: files written and fsynced one after another; a line in the
# log after each fsync returned (the log is outside the mount).
workload() {
	python3 - "$1" "$2" <<'PY'
import os, sys, random
d, log = sys.argv[1], sys.argv[2]
r = random.Random(os.getpid())
os.makedirs(d, exist_ok=True)
with open(log, "a") as lg:
    for i in range(100000):
        # A fast run fills the image in three rounds: stop with a quarter
        # free, so "write after replay" tests replay, not a full disk.
        st = os.statvfs(d)
        if st.f_bavail < st.f_blocks // 4:
            break
        name = os.path.join(d, "f%06d" % i)
        data = bytes([r.randrange(256)]) * r.randrange(1, 200000)
        fd = os.open(name + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(name + ".tmp", name)
        dfd = os.open(d, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        lg.write("%s %d %d\n" % (name, len(data), data[0]))
        lg.flush()
        # unsynced noise the crash may or may not keep
        with open(os.path.join(d, "noise"), "ab") as f:
            f.write(os.urandom(r.randrange(1, 50000)))
PY
}

for round in $(seq "$rounds"); do
	tfs_mount "$img" "$mnt" || { fail "mount (round $round)"; break; }
	pid=$(daemon_pid "$mnt")
	[ -n "$pid" ] || { fail "no daemon pid"; break; }
	workload "$mnt/r$round" "$tmp/log" &
	wl=$!
	sleep "$(python3 -c 'import random; print(random.uniform(0.3, 2.0))')"
	kill -9 "$pid"
	wait "$wl" 2>/dev/null
	wait_gone "$pid"
	# The dead mount: ENOTCONN until unmounted.
	umount "$mnt" 2>/dev/null || umount -l "$mnt"
	tfs_mount "$img" "$mnt" || { fail "mount after kill -9 (round $round)"; break; }
	n=0
	while read -r name len byte; do
		name=${name/#*\/mnt\//$mnt/}
		if [ ! -f "$name" ]; then
			fail "round $round: fsynced $name is missing"
			continue
		fi
		[ "$(stat -c %s "$name")" = "$len" ] || fail "round $round: $name has size $(stat -c %s "$name"), fsynced $len"
		n=$((n + 1))
	done <"$tmp/log"
	python3 - "$tmp/log" "$mnt" <<'PY' || fail "round $round: fsynced data differs"
import sys
log, mnt = sys.argv[1], sys.argv[2]
bad = 0
for line in open(log):
    name, length, byte = line.split()
    name = mnt + "/" + name.split("/mnt/", 1)[1]
    data = open(name, "rb").read()
    if data != bytes([int(byte)]) * int(length):
        print("bad data in", name); bad += 1
sys.exit(1 if bad else 0)
PY
	echo "round $round: $n fsynced files intact"
	# The replayed filesystem takes more work and unmounts cleanly.
	mkdir "$mnt/after$round" && echo ok >"$mnt/after$round/f" || fail "write after replay"
	tfs_umount "$mnt"
done
tfs_mount -o ro "$img" "$mnt" && [ "$(cat "$mnt/after1/f" 2>/dev/null)" = ok ] ||
	fail "clean mount after the rounds"
tfs_umount "$mnt"
finish
