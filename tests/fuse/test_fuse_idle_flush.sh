#!/usr/bin/env bash
# Durability is bounded on an idle mount too: the journal entries of a
# burst of operations followed by nothing (no fsync, no umount) are made
# durable by a flush entry within about flush_delay_ms (1 s), as ext4's
# commit interval does.  On FUSE nothing else can: sync(2) and syncfs(2)
# send nothing to the daemon (no FUSE_SYNCFS outside virtiofs).  Before the
# fix the last entries stayed NO_FLUSH forever, and a kill -9 of the daemon
# minutes later still lost them (replay trusts entries up to the newest
# flush entry only).
#   test_fuse_idle_flush.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

# field MNT NAME: a number from `tinyfs stats MNT journal`.
field() { "$tinyfs" stats "$1" journal 2>/dev/null | awk -v n="$2:" '$1 == n { print $2 }'; }

fresh_image 128M
for round in 1 2; do
	mount_or_finish "mount (round $round)" "$img" "$mnt"
	pid=$(daemon_pid "$mnt")
	[ -n "$pid" ] || { fail "no daemon pid"; finish; }
	mkdir "$mnt/d$round" && echo "round $round" >"$mnt/d$round/f" && sync ||
		fail "writes of round $round"
	# The newest entry written once the writes went out (10 ms write delay).
	sleep 0.5
	want=$(field "$mnt" seq_ondisk)
	for i in $(seq 100); do
		[ "$(field "$mnt" flushed_seq_ondisk)" -ge "$want" ] 2>/dev/null && break
		sleep 0.1
	done
	flushed=$(field "$mnt" flushed_seq_ondisk)
	[ "$flushed" -ge "$want" ] 2>/dev/null ||
		fail "round $round: entries up to $want written, flushed_seq_ondisk still ${flushed:-?} 10 s later"
	kill -9 "$pid"
	for i in $(seq 100); do
		[ -e "/proc/$pid" ] || break
		sleep 0.1
	done
	umount "$mnt" 2>/dev/null || umount -l "$mnt"
	fsck_clean "$img" "fsck -n after kill -9 (round $round)"
	mount_or_finish "mount after kill -9 (round $round)" "$img" "$mnt"
	for r in $(seq "$round"); do
		[ "$(cat "$mnt/d$r/f" 2>/dev/null)" = "round $r" ] ||
			fail "round $round: d$r/f lost by kill -9 after the mount was idle"
	done
	tfs_umount "$mnt"
done
finish
