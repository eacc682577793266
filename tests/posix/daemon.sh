# Sourced by test_posix.sh and test_difftest.sh, which set tinyfs (the
# tool), mnt (the mountpoint) and pid (the daemon's, from daemon_pid).
# daemon_pid: the PID of the daemon serving $mnt (tinyfs stats).
daemon_pid() { "$tinyfs" stats "$mnt" fuse 2>/dev/null | awk '$1 == "pid:" { print $2 }'; }

# wait_daemon: the daemon writes back after umount returns; wait (30 s) for it.
wait_daemon() {
	for _ in $(seq 300); do
		[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
