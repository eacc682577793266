#!/usr/bin/env bash
# Polling of /dev/fuse (fuse/loop.c, -o poll_us): the reading thread finds
# a synchronous caller's next request while it polls, without sleeping, and
# with poll_us=0 it never polls.  Either way every request is answered and
# the unmount ends the loop (a thread polling or asleep in poll(2) must see
# the connection end).  A wrong value is refused.
#   test_fuse_poll.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 256M

# creates: 300 files created, stat'ed and removed one after another.
creates() {
	python3 - "$mnt/d" <<'PY' || fail "creates on $1"
import os, sys
d = sys.argv[1]
os.mkdir(d)
for i in range(300):
    p = os.path.join(d, "f%d" % i)
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    os.stat(p)
for i in range(300):
    os.unlink(os.path.join(d, "f%d" % i))
os.rmdir(d)
PY
}

poll_line() { "$tinyfs" stats "$mnt" fuse | grep '^poll of /dev/fuse:'; }

mount_or_finish mount -o "log=$tmp/daemon.log" "$img" "$mnt"
creates default
line=$(poll_line)
# "N requests found polling, S sleeps (C with the CPUs busy), ..."
hits=$(echo "$line" | awk '{ print $4 }')
busy=$(echo "$line" | sed -n 's/.*(\([0-9]*\) with the CPUs busy).*/\1/p')
# About 1500 requests came one after another: some were found polling, or
# (a loaded machine: threads waiting for CPUs) the poller chose not to poll.
# A poller that never runs (a blocking descriptor) shows neither.
[ "${hits:-0}" -gt 0 ] 2>/dev/null || [ "${busy:-0}" -gt 0 ] 2>/dev/null ||
	fail "no request found polling, and no poll declined: '$line'"
echo "# $line"
echo "$line" | grep -q '(max 200 us)$' || fail "default poll_us not 200: '$line'"

# Reads of data not in the page cache are handed to a follower, and the
# reader sleeps meanwhile; the follower, once it has answered, polls for the
# caller's next read itself ("N by a follower").
if [ "$(id -u)" = 0 ]; then
	head -c 4M /dev/urandom >"$mnt/r"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	python3 - "$mnt/r" <<'PY' || fail "reads"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
for i in range(300):
    os.pread(fd, 4096, (i * 7919 % 1024) * 4096)
PY
	line=$(poll_line)
	by_follower=$(echo "$line" | sed -n 's/.*(\([0-9]*\) by a follower).*/\1/p')
	busy_reads=$(($(echo "$line" | sed -n 's/.*(\([0-9]*\) with the CPUs busy).*/\1/p') - busy))
	# (A loaded machine: most of the 300 followers' polls were declined.)
	[ "${by_follower:-0}" -gt 0 ] 2>/dev/null || [ "$busy_reads" -gt 150 ] 2>/dev/null ||
		fail "no read found polling by a follower, and no poll declined: '$line'"
	echo "# after the reads: $line"
fi
tfs_umount "$mnt" || finish

mount_or_finish "poll_us=0" -o "log=$tmp/daemon.log,poll_us=0" "$img" "$mnt"
creates poll_us=0
line=$(poll_line)
echo "$line" | grep -q 'off$' || fail "poll_us=0 still polls: '$line'"
tfs_umount "$mnt" || finish

out=$("$tinyfs" mount -o poll_us=x "$img" "$mnt" 2>&1) && fail "poll_us=x accepted"
echo "$out" | grep -q 'poll_us' || fail "poll_us=x: message does not name the option: $out"
fsck_clean "$img" fsck
finish
