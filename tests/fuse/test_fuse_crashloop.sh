#!/usr/bin/env bash
# Crash loops on the mounted filesystem: each round makes a new filesystem,
# mounts it, runs stress (several processes), fsx and fsync writers that
# record what each acknowledged fsync made durable (the record is outside
# the mount), then crashes the daemon in the middle, in one of three ways:
#   kill      kill -9 of the daemon at a random moment;
#   powercut  a power cut inside the daemon (TFS_FAULTS powercut=POLICY at a
#             random write index, policies in turn): the device keeps a
#             crash image, every later op fails, then the mount is taken down;
#   degraded  two members, replicas=2, kill -9, and one member missing at the
#             remount (-o degraded).
# After the crash: `tinyfs fsck -n` exits 0, the remount replays, every
# fsynced file holds what its last acknowledged fsync wrote (bytes written
# after it may or may not be there, nothing else), the whole tree can be
# walked and read, a new stress run passes its own check (stress -c again
# after a remount), and fsck stays clean after the clean unmount.
#
#   test_fuse_crashloop.sh BUILD_DIR [MODE...]
# MODE: kill, powercut, degraded (default: all three).  Rounds per mode: 1,
# TFS_LONG=1: 10, TFS_CRASHLOOP_ROUNDS=N: N.  TFS_CRASHLOOP_SEED: first seed.
# TFS_CRASHLOOP_LOAD=writers: no stress and fsx, only the fsync writers.
# TFS_CRASHLOOP_CUTMAX=N: power cuts at writes 1..N (default 3000).
# TFS_CRASHLOOP_CUTSEQ=K: round r cuts at write K+r-1, policies in turn.
# TFS_CRASHLOOP_CUTOP=write|flush|any: which ops the cut counts (default write);
# TFS_CRASHLOOP_POLICY=P: always that policy.
# TFS_CRASHLOOP_TWICE=1 (powercut): a second early cut after the first recovery.
# TFS_CRASHLOOP_MKFS="OPTS": more mkfs.tinyfs options (one member; e.g. a small journal).
# TFS_CRASHLOOP_MOUNTOPTS=OPTS: options of the mounts that crash.
# TFS_CRASHLOOP_DEGRADED=1 (powercut): a replicas=2 pair, mounted -o degraded
# with its second member away throughout.
# TFS_CRASHLOOP_STOP=FILE: stop before the next round once FILE exists.
. "$(dirname "$0")/lib.sh"
need_python3

stress=$build/tests/posix/stress
fsx=$build/tests/posix/fsx
[ -x "$stress" ] && [ -x "$fsx" ] || skip "tests/posix/stress or fsx not built"
shift
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(kill powercut degraded)
rounds=1
[ -n "${TFS_LONG:-}" ] && rounds=10
rounds=${TFS_CRASHLOOP_ROUNDS:-$rounds}
seed=${TFS_CRASHLOOP_SEED:-$(date +%s)}
echo "first seed $seed (TFS_CRASHLOOP_SEED=$seed reproduces)"
mnt=$tmp/mnt

# The fsync writers: each process appends to and overwrites files of its own,
# fsyncs, and only then logs what is durable.  Before each write it logs the
# write's intent ("W"), so the check knows which bytes may be newer.
cat >"$tmp/writer.py" <<'PY'
import hashlib, os, random, sys
d, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = random.Random(seed)
lg = open(log, "a", buffering=1)
def pat(gen, n):
    return bytes(((gen * 131 + i * 7) % 251) for i in range(256)) * (n // 256 + 1)
OW = 256 * 1024
try:
    os.makedirs(d, exist_ok=True)
    ow = []
    for i in range(100000):
        st = os.statvfs(d)
        if st.f_bavail < st.f_blocks // 4:
            break
        k = r.randrange(4)
        if k == 0 or not ow:
            # A new overwrite file: created, filled, fsynced, its dir fsynced.
            name = os.path.join(d, "o%05d" % i)
            lg.write("W %s %d 0 %d\n" % (name, i, OW))
            fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, pat(i, OW)[:OW])
            os.fsync(fd)
            os.close(fd)
            dfd = os.open(d, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            lg.write("S %s\n" % name)
            ow.append(name)
        elif k == 1:
            # Overwrite a block-aligned range in place, fsync (or fdatasync).
            name = r.choice(ow)
            off = r.randrange(OW // 4096) * 4096 + r.choice([0, 100])
            n = min(r.randrange(1, 64 * 1024), OW - off)
            lg.write("W %s %d %d %d\n" % (name, i, off, n))
            fd = os.open(name, os.O_WRONLY)
            os.pwrite(fd, pat(i, n)[:n], off)
            (os.fsync if r.randrange(2) else os.fdatasync)(fd)
            os.close(fd)
            lg.write("S %s\n" % name)
        else:
            # Append to a log file, fsync; the durable prefix is logged.
            name = os.path.join(d, "a%d" % r.randrange(3))
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            new = not os.fstat(fd).st_size
            os.write(fd, os.urandom(r.randrange(1, 100000)))
            os.fsync(fd)
            size = os.fstat(fd).st_size
            os.close(fd)
            if new:
                dfd = os.open(d, os.O_RDONLY)
                os.fsync(dfd)
                os.close(dfd)
            with open(name, "rb") as f:
                h = hashlib.sha256(f.read(size)).hexdigest()
            lg.write("A %s %d %s\n" % (name, size, h))
except OSError:
    pass # the crash
PY

# The check of what the writers logged, against the remounted tree.
cat >"$tmp/check.py" <<'PY'
import hashlib, os, sys
mnt = sys.argv[1]
OW = 256 * 1024
def pat(gen, n):
    return bytes(((gen * 131 + i * 7) % 251) for i in range(256)) * (n // 256 + 1)
bad = 0
def fail(msg):
    global bad
    bad += 1
    print("FAIL:", msg)
for log in sys.argv[2:]:
    model = {}      # overwrite file: its bytes at the last acknowledged fsync
    pending = {}    # overwrite file: writes since then, maybe on disk
    appended = {}   # append file: durable size, sha256
    for line in open(log):
        w = line.split()
        if not w or (w[0] == "A" and len(w) != 4):
            continue  # a line cut by the crash
        if w[0] == "W" and len(w) == 5:
            name, gen, off, n = w[1], int(w[2]), int(w[3]), int(w[4])
            pending.setdefault(name, []).append((gen, off, n))
        elif w[0] == "S":
            name = w[1]
            b = model.get(name, bytearray(OW))
            for gen, off, n in pending.pop(name, []):
                b[off:off + n] = pat(gen, n)[:n]
            model[name] = b
        elif w[0] == "A":
            appended[w[1]] = (int(w[2]), w[3])
    for name, b in model.items():
        try:
            got = open(name, "rb").read()
        except OSError as e:
            fail("%s (fsynced): %s" % (name, e)); continue
        if len(got) != OW:
            fail("%s: size %d, fsynced %d" % (name, len(got), OW)); continue
        # A byte may differ from the fsynced state only where an
        # unacknowledged later write put its own byte.
        diff = [i for i in range(OW) if got[i] != b[i]] if got != bytes(b) else []
        ok_at = set()
        for gen, off, n in pending.get(name, []):
            p = pat(gen, n)
            for i in diff:
                if off <= i < off + n and got[i] == p[i - off]:
                    ok_at.add(i)
        left = [i for i in diff if i not in ok_at]
        if left:
            fail("%s: %d bytes differ from the fsynced state (first at %d: %d, want %d)"
                 % (name, len(left), left[0], got[left[0]], b[left[0]]))
    for name, (size, h) in appended.items():
        try:
            got = open(name, "rb").read()
        except OSError as e:
            fail("%s (fsynced): %s" % (name, e)); continue
        if len(got) < size:
            fail("%s: size %d, fsynced %d" % (name, len(got), size))
        elif hashlib.sha256(got[:size]).hexdigest() != h:
            fail("%s: the fsynced prefix of %d bytes differs" % (name, size))
n = sum(1 for l in sys.argv[2:] for _ in open(l))
print("checked %d log lines, %d failures" % (n, bad))
sys.exit(1 if bad else 0)
PY

# Every name reachable, every file readable whole, stat agrees with read.
cat >"$tmp/walk.py" <<'PY'
import os, sys
bad = n = 0
for d, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(d, f)
        try:
            st = os.lstat(p)
            if os.path.islink(p):
                os.readlink(p)
            else:
                data = open(p, "rb").read()
                if len(data) != st.st_size:
                    print("FAIL: %s: read %d bytes, size %d" % (p, len(data), st.st_size)); bad += 1
            n += 1
        except OSError as e:
            print("FAIL: %s: %s" % (p, e)); bad += 1
print("walked %d files" % n)
sys.exit(1 if bad else 0)
PY

# cl_umount: tfs_umount, waiting up to 2 minutes while the mount is busy:
# on a shared machine stress-ng's io stressor holds every mount point open
# while it runs (umount_retry.sh gives up after 10 s).
cl_umount() {
	local pid i
	pid=$(daemon_pid "$mnt")
	for i in $(seq 120); do
		if umount "$mnt" 2>/dev/null; then
			wait_gone "$pid"
			return
		fi
		[ "$i" = 1 ] && echo "  $mnt busy at umount; waiting (holders: $(fuser -m "$mnt" 2>/dev/null))"
		sleep 1
	done
	fail "cannot unmount $mnt: busy for 2 minutes"
	return 1
}

policies=(random prefix torn none)
# TFS_CRASHLOOP_MOUNTOPTS=OPTS: the crashed mounts' options (-o OPTS), e.g.
# fsync=none to see the check catch fsyncs that were not durable.
xopts=()
[ -n "${TFS_CRASHLOOP_MOUNTOPTS:-}" ] && xopts=(-o "$TFS_CRASHLOOP_MOUNTOPTS")
[ -n "${TFS_CRASHLOOP_DEGRADED:-}" ] && xopts+=(-o degraded)
declare -A ran failed
round_fail=0

# crash_round MODE SEED: one round; fails (through fail) on any finding.
crash_round() {
	local mode=$1 s=$2 op src cut policy nw
	local a=$tmp/a.img b=$tmp/b.img
	rm -f "$a" "$b" "$tmp"/w*.log
	for nw in 0 1 2; do
		: >"$tmp/w$nw.log" # there even when the cut comes before the first line
	done
	if [ "$mode" = degraded ]; then
		"$mkfs" -q --metadata-replicas 2 --data-replicas 2 --size 256M "$a" "$b" ||
			{ fail "mkfs of two members"; return; }
		src=$a:$b
	elif [ -n "${TFS_CRASHLOOP_DEGRADED:-}" ]; then
		# powercut on a replicas=2 pair mounted with its second member away.
		rm -f "$b.away"
		"$mkfs" -q --metadata-replicas 2 --data-replicas 2 --size 256M "$a" "$b" ||
			{ fail "mkfs of two members"; return; }
		mv "$b" "$b.away"
		src=$a
	else
		# shellcheck disable=SC2086 # options, split on purpose
		new_image "$a" 256M ${TFS_CRASHLOOP_MKFS:-} || return
		src=$a
	fi
	if [ "$mode" = powercut ]; then
		# A cut at a random write among the first few thousand: early ones
		# land in the setup, late ones may never come (then kill -9).
		cut=$((1 + s % ${TFS_CRASHLOOP_CUTMAX:-3000})) policy=${policies[$((s % 4))]}
		# TFS_CRASHLOOP_CUTSEQ=K: round r cuts at write K + r - 1 (every write in turn).
		[ -n "${TFS_CRASHLOOP_CUTSEQ:-}" ] && cut=$((TFS_CRASHLOOP_CUTSEQ + $3 - 1)) policy=${policies[$(($3 % 4))]}
		policy=${TFS_CRASHLOOP_POLICY:-$policy} op=${TFS_CRASHLOOP_CUTOP:-write}
		echo "  powercut at $op $cut, policy $policy"
		# A cut during the mount may fail it: then only the recovery is checked.
		TFS_FAULTS="dev $a seed=$s $op nth=$cut powercut=$policy" tfs_mount "${xopts[@]}" "$src" "$mnt" ||
			{ echo "  the mount failed under the cut"; cut=mount; }
	else
		tfs_mount "${xopts[@]}" "$src" "$mnt" || { fail "mount"; return; }
	fi
	if [ "${cut:-}" != mount ]; then
		crash_workload "$mode" "$s" 0 || return
	fi
	# TFS_CRASHLOOP_TWICE=1 (powercut): the recovered filesystem is cut
	# again, early (at op 1..20 after its mount), before the check: a
	# replay that dropped entries must leave them dropped the next time.
	if [ "$mode" = powercut ] && [ -n "${TFS_CRASHLOOP_TWICE:-}" ]; then
		"$tinyfs" fsck -n "$a" >"$tmp/fsck.out" 2>&1 ||
			fail "fsck -n after the first crash: $(head -5 "$tmp/fsck.out")"
		cut=$((1 + (s / 7) % 20))
		echo "  second powercut at $op $cut, policy $policy"
		for nw in 3 4 5; do : >"$tmp/w$nw.log"; done
		if TFS_FAULTS="dev $a seed=$((s + 1)) $op nth=$cut powercut=$policy" tfs_mount "${xopts[@]}" "$src" "$mnt"; then
			crash_workload "$mode" "$s" 3 || return
		else
			echo "  the second mount failed under the cut"
		fi
	fi
	crash_check "$mode" "$s"
}

# daemon_alive PID: a thread of PID is still running (not gone, not a zombie
# waiting to be reaped).
daemon_alive() {
	local t
	for t in /proc/"$1"/task/*/status; do
		[ -e "$t" ] && ! grep -q '^State:.*Z' "$t" 2>/dev/null && return 0
	done
	return 1
}

# crash_workload MODE SEED: the load on $mnt, then the crash.
crash_workload() {
	local mode=$1 s=$2 w0=$3 pid nw wl=() i tries
	pid=$(daemon_pid "$mnt")
	[ -n "$pid" ] || { fail "no daemon pid"; return; }
	mkdir -p "$mnt/s$w0" "$mnt/x$w0"
	# TFS_CRASHLOOP_LOAD=writers: only the fsync writers (each fsync alone in its window).
	if [ "${TFS_CRASHLOOP_LOAD:-all}" = all ]; then
		"$stress" -p 3 -t 60 -S "$s" "$mnt/s$w0" >"$tmp/stress.out" 2>&1 &
		wl+=($!)
		"$fsx" -p 2 -f 2 -N 100000 -S "$s" "$mnt/x$w0" >"$tmp/fsx.out" 2>&1 &
		wl+=($!)
	fi
	for nw in $w0 $((w0 + 1)) $((w0 + 2)); do
		python3 "$tmp/writer.py" "$mnt/w$nw" "$tmp/w$nw.log" $((s * 10 + nw)) &
		wl+=($!)
	done
	if [ "$mode" = powercut ]; then
		# Wait for the cut (the daemon reports the frozen device), at most 8 s.
		for tries in $(seq 80); do
			"$tinyfs" stats "$mnt" devices 2>/dev/null | grep -q "power cut" && break
			sleep 0.1
		done
		"$tinyfs" stats "$mnt" devices 2>/dev/null | grep -q "power cut" ||
			echo "  (no cut within 8 s: kill -9)"
		sleep 0.3
	else
		sleep "$(python3 -c "import random; print(random.Random($s).uniform(0.5, 4.0))")"
	fi
	kill -9 "$pid"
	for i in "${wl[@]}"; do kill -9 "$i" 2>/dev/null; done
	# The daemon must be gone before the workload can be waited for: a
	# daemon thread stuck in the kernel on its own mount (as sync_file_range()
	# in flush_kernel_pages() was: test_fuse_kill_flush) keeps /dev/fuse
	# open, so the connection is never aborted and every process on the
	# mount hangs.  Then umount -f aborts it, and the round fails.
	for i in $(seq 300); do
		daemon_alive "$pid" || break
		sleep 0.1
	done
	if daemon_alive "$pid"; then
		fail "daemon $pid still there 30 s after kill -9; its threads wait in: $(cat /proc/"$pid"/task/*/wchan 2>/dev/null | tr '\0' ' ')"
		umount -f "$mnt" 2>/dev/null
	fi
	wait "${wl[@]}" 2>/dev/null
	wait_gone "$pid"
	umount "$mnt" 2>/dev/null || umount -l "$mnt"
}

# crash_check MODE SEED: fsck, remount, the fsynced data, the tree, new work.
crash_check() {
	local mode=$1 s=$2 a=$tmp/a.img b=$tmp/b.img devs=("$tmp/a.img") src=$tmp/a.img mopts=()
	[ "$mode" = degraded ] && { mv "$b" "$b.away"; devs=("$a"); src=$a mopts=(-o degraded); }
	# With the second member away, fsck checks what is there (-o degraded).
	[ -n "${TFS_CRASHLOOP_DEGRADED:-}" ] && mopts=(-o degraded)
	"$tinyfs" fsck -n "${mopts[@]}" "${devs[@]}" >"$tmp/fsck.out" 2>&1 ||
		fail "fsck -n ${mopts[*]} after the crash: $(head -5 "$tmp/fsck.out")"
	tfs_mount "${mopts[@]}" "$src" "$mnt" || { fail "remount after the crash"; return; }
	python3 "$tmp/check.py" "$mnt" "$tmp"/w*.log || fail "fsynced data"
	python3 "$tmp/walk.py" "$mnt" || fail "walking the tree"
	# The recovered filesystem takes a new stress run, which checks itself.
	mkdir -p "$mnt/after"
	"$stress" -p 3 -t 2 -S "$((s + 1))" -k "$mnt/after" >"$tmp/stress2.out" 2>&1 ||
		fail "stress after recovery: $(tail -3 "$tmp/stress2.out")"
	local kept
	kept=$(ls -d "$mnt"/after/stress.* 2>/dev/null | head -1)
	cl_umount || return
	if [ "$mode" = degraded ]; then
		mv "$b.away" "$b"
		# fsck of the member alone cannot see the whole set; check it degraded-mounted instead.
	elif [ -z "${TFS_CRASHLOOP_DEGRADED:-}" ]; then
		"$tinyfs" fsck -n "${devs[@]}" >"$tmp/fsck.out" 2>&1 ||
			fail "fsck -n after the clean unmount: $(head -5 "$tmp/fsck.out")"
	fi
	tfs_mount "${mopts[@]}" "$src" "$mnt" || { fail "second remount"; return; }
	if [ -n "$kept" ]; then
		"$stress" -c "$mnt/after/$(basename "$kept")" >"$tmp/stress3.out" 2>&1 ||
			fail "stress -c after a remount: $(tail -3 "$tmp/stress3.out")"
	fi
	python3 "$tmp/check.py" "$mnt" "$tmp"/w*.log >/dev/null || fail "fsynced data, second remount"
	cl_umount
}

for mode in "${modes[@]}"; do
	ran[$mode]=0 failed[$mode]=0
	for r in $(seq "$rounds"); do
		# A long run stops between rounds once this file exists.
		[ -n "${TFS_CRASHLOOP_STOP:-}" ] && [ -e "$TFS_CRASHLOOP_STOP" ] && break
		s=$((seed + r * 7919))
		before=$fails
		echo "== $mode round $r seed $s"
		crash_round "$mode" "$s" "$r"
		ran[$mode]=$((ran[$mode] + 1))
		[ "$fails" != "$before" ] && { failed[$mode]=$((failed[$mode] + 1)); echo "  round failed (seed $s)"; }
		grep -q " $mnt fuse" /proc/self/mounts && cl_umount
	done
	echo "figure crashloop mode=$mode rounds=${ran[$mode]} failed=${failed[$mode]}"
done
finish
