#!/usr/bin/env bash
# The CPU latency request (fuse/cpulat.c, -o low_latency_ms): requests on
# the mount take it (the kernel's CPU latency target becomes 0 us), it stays
# while they come, is dropped low_latency_ms after the last one and taken
# again by the next burst (a trickle of single requests does not take it);
# low_latency_ms=0 and libfuse_loop never take it; a wrong value is refused.
# Where /dev/cpu_dma_latency cannot be opened (not root, a container without
# it) the daemon goes without, and its stats say so.
#   test_fuse_low_latency.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 128M

# creates N: N files created, stat'ed and removed one after another.
creates() {
	python3 - "$mnt" "$1" <<'PY' || fail "creates"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    p = os.path.join(d, "f%d" % i)
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    os.stat(p)
    os.unlink(p)
PY
}

lat_line() { "$tinyfs" stats "$mnt" fuse | grep '^low wake-up latency:'; }
taken() { lat_line | sed -n 's/.* taken \([0-9]*\) times.*/\1/p'; }
now_ms() { date +%s%3N; }

# The kernel's CPU latency target now (us; 2000000000: no constraint).
kernel_target() {
	python3 -c 'import struct; print(struct.unpack("i", open("/dev/cpu_dma_latency", "rb").read(4))[0])'
}

# Processes other than $1 holding a CPU latency request.
other_holders() {
	local fd pid
	for fd in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = /dev/cpu_dma_latency ] || continue
		pid=${fd#/proc/}
		pid=${pid%%/*}
		[ "$pid" = "$1" ] || echo "$pid"
	done | sort -u
}

# Not root, or a container without the device: the daemon goes without,
# and says why.
if ! python3 -c 'open("/dev/cpu_dma_latency", "r+b")' 2>/dev/null; then
	echo "# /dev/cpu_dma_latency cannot be opened by uid $(id -u): only the stats are checked"
	mount_or_finish mount -o "log=$tmp/daemon.log" "$img" "$mnt"
	ls -la "$mnt" >/dev/null || fail "ls"
	lat_line | grep -q 'unavailable (/dev/cpu_dma_latency: ' || fail "no device: '$(lat_line)'"
	tfs_umount "$mnt" || finish
	finish
fi

hold_ms=2000
mount_or_finish "mount" -o "log=$tmp/daemon.log,low_latency_ms=$hold_ms" "$img" "$mnt"
pid=$(daemon_pid "$mnt")
creates 300
last=$(now_ms)
line=$(lat_line)
echo "# after the creates: $line"
echo "$line" | grep -q ': *held, taken [1-9][0-9]* times' || fail "not held after requests: '$line'"
target=$(kernel_target)
[ "$target" = 0 ] || fail "held, but the kernel's CPU latency target is $target us, not 0"
n1=$(taken)

# Dropped hold_ms after the last request, not before.
while lat_line | grep -q ': *held,'; do
	[ $(($(now_ms) - last)) -lt 15000 ] || { fail "still held 15 s after the last request"; break; }
	sleep 0.1
done
elapsed=$(($(now_ms) - last))
[ "$elapsed" -ge $((hold_ms - 50)) ] || fail "dropped $elapsed ms after the last request, hold $hold_ms"
echo "# dropped after $elapsed ms: $(lat_line)"
others=$(other_holders "$pid")
if [ -z "$others" ]; then
	target=$(kernel_target)
	[ "$target" = 2000000000 ] || fail "dropped, but the kernel's target is still $target us"
else
	echo "# other processes hold CPU latency requests ($others): the kernel's target not checked"
fi

# A request now and then (a monitor's statfs every 10 ms) takes nothing:
# each gains one wake-up, and the hold after each kept the CPUs polling.
python3 - "$mnt" <<'PY' || fail "statfs trickle"
import os, sys, time
for i in range(50):
    os.statvfs(sys.argv[1])
    time.sleep(0.01)
PY
line=$(lat_line)
echo "$line" | grep -q ': *not held, taken '"$n1"' times' || fail "taken by a trickle of requests: '$line'"

# The next burst takes it again.
creates 5
lat_line | grep -q ': *held,' || fail "not taken again: '$(lat_line)'"
n2=$(taken)
[ "${n2:-0}" -gt "${n1:-0}" ] 2>/dev/null || fail "taken count $n1 -> $n2"
tfs_umount "$mnt" || finish

for opts in low_latency_ms=0 libfuse_loop; do
	mount_or_finish "$opts" -o "log=$tmp/daemon.log,$opts" "$img" "$mnt"
	creates 50
	lat_line | grep -q 'off$' || fail "$opts: '$(lat_line)'"
	tfs_umount "$mnt" || finish
done

for bad in low_latency_ms=x low_latency_ms=60001 low_latency_ms; do
	out=$("$tinyfs" mount -o "$bad" "$img" "$mnt" 2>&1) && fail "$bad accepted"
	echo "$out" | grep -q 'low_latency_ms' || fail "$bad: message does not name the option: $out"
done
fsck_clean "$img" fsck
finish
