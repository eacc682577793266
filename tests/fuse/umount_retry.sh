# umount_busy_retry MNT: umount, retried for up to 10 s while the mount is
# busy.  A process that holds the mount for a moment makes umount fail with
# EBUSY (seen on a loaded machine: stress-ng's io stressor keeps every mount
# point open while it runs); who held it is printed, and only a mount still
# busy after 10 s fails.  Sourced by tests/fuse/lib.sh and
# tests/posix/test_posix.sh.
umount_busy_retry() {
	local m=$1 i
	for ((i = 0; i < 100; i++)); do
		umount "$m" 2>/dev/null && return 0
		if ((i == 0)); then
			echo "note: $m busy at umount; holders:" >&2
			fuser -vm "$m" >&2 2>&1 || true
		fi
		sleep 0.1
	done
	fusermount3 -u "$m"
}
