# Shared helpers for the mounted tests; source with $1 = BUILD_DIR.
# Skips (77) with the reason where FUSE cannot mount here.  Every mount made
# through tfs_mount is unmounted at exit, whatever happened, and the daemon
# waited for; the temporary directory is removed.
#
# Sets: build, mkfs, tinyfs, fuse_ops, tmp (a temporary directory), fails.
# Binaries may be overridden (TFS_TEST_TINYFS, TFS_TEST_MOUNT_HELPER, ...).
set -u
build=$(cd "$1" && pwd)
mkfs=${TFS_TEST_MKFS:-$build/tools/mkfs.tinyfs}
tinyfs=${TFS_TEST_TINYFS:-$build/tools/tinyfs}
mount_helper=${TFS_TEST_MOUNT_HELPER:-$build/fuse/mount.tinyfs}
fuse_ops=${TFS_TEST_FUSE_OPS:-$build/tests/fuse/fuse_ops}
fails=0
mounts=()

skip() { echo "skip: $*"; exit 77; }
[ -c /dev/fuse ] || skip "/dev/fuse is absent (no FUSE in this kernel or container)"
command -v fusermount3 >/dev/null || skip "fusermount3 is absent (Debian package fuse3)"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by uid $(id -u)"

tmp=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
# The control sockets of these mounts stay in the test's directory.
export TFS_RUN_DIR=$tmp/run

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# daemon_pid MNT: the pid serving MNT (from its stats), or nothing.
daemon_pid() { "$tinyfs" stats "$1" fuse 2>/dev/null | awk '$1 == "pid:" { print $2 }'; }

# wait_gone PID: waits (up to 30 s) for a daemon to finish writing back.
wait_gone() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	fail "daemon $pid still running 30 s after unmount"
	return 1
}

# tfs_mount [OPTS...] DEV MNT: mounts with `tinyfs mount`, remembers MNT.
tfs_mount() {
	local mnt=${*: -1}
	mkdir -p "$mnt"
	if "$tinyfs" mount "$@"; then
		mounts+=("$mnt")
		return 0
	fi
	return 1
}

. "$(dirname "${BASH_SOURCE[0]}")/umount_retry.sh"

# tfs_umount MNT: unmounts and waits for the daemon to have stopped the fs.
tfs_umount() {
	local mnt=$1 pid
	pid=$(daemon_pid "$mnt")
	if ! umount_busy_retry "$mnt"; then
		fail "cannot unmount $mnt"
		return 1
	fi
	wait_gone "$pid"
}

cleanup() {
	local m pid
	cd /
	for m in "${mounts[@]}"; do
		if grep -q " $m fuse" /proc/self/mounts; then
			pid=$(daemon_pid "$m")
			umount "$m" 2>/dev/null || fusermount3 -u "$m" 2>/dev/null ||
				umount -l "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null
			[ -n "$pid" ] && wait_gone "$pid"
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# new_image PATH [SIZE] [MKFS OPTIONS...]: a fresh filesystem in an image file.
new_image() {
	local img=$1 size=${2:-128M}
	shift 2 || shift $#
	rm -f "$img"
	"$mkfs" -q "$@" --size "$size" "$img" || { fail "mkfs.tinyfs $img"; return 1; }
}

# need_python3: the test is skipped where python3 is absent.
need_python3() { command -v python3 >/dev/null || skip "python3 is absent"; }

# fresh_image SIZE [MKFS OPTIONS...]: img=$tmp/a.img, a new filesystem, and
# mnt=$tmp/mnt, where to mount it; the test fails and finishes if mkfs fails.
fresh_image() {
	img=$tmp/a.img mnt=$tmp/mnt
	new_image "$img" "$@" || finish
}

# mount_or_finish WHAT [OPTS...] DEV MNT: tfs_mount, or the test fails (WHAT) and finishes.
mount_or_finish() {
	local what=$1
	shift
	tfs_mount "$@" || { fail "$what"; finish; }
}

# fsck_clean IMG [WHAT]: `tinyfs fsck -n IMG` finds nothing, else a failure
# (WHAT, default "fsck -n") with the first lines it printed.
fsck_clean() {
	"$tinyfs" fsck -n "$1" >"$tmp/fsck.out" 2>&1 ||
		fail "${2:-fsck -n}: $(head -5 "$tmp/fsck.out")"
}

finish() {
	if [ "$fails" = 0 ]; then
		echo "ok"
		exit 0
	fi
	echo "$fails failure(s)"
	exit 1
}
