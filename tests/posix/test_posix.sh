#!/usr/bin/env bash
# Runs one POSIX proxy on a fresh filesystem for meson (suite `posix`):
#   test_posix.sh BUILD_DIR tinyfs|tmpfs conform|fsx|fsx-multi|stress
# tinyfs: a new image, mounted with `tinyfs mount`, unmounted after (the
# daemon waited for); skips (77) with the reason where there is no FUSE
# daemon in this build, no /dev/fuse or fusermount3, or no root.  On tinyfs,
# conform takes known-failures.tinyfs (-X), and stress's tree is checked
# again after an unmount and a new mount (what was written must persist).  tmpfs: the
# same program on a fresh tmpfs, so the proxies themselves stay right (they
# must pass there).  Bounded to seconds; TFS_LONG=1 runs the long forms.
set -u
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
target=$2 prog=$3
bin=$build/tests/posix
tinyfs=${TFS_TEST_TINYFS:-$build/tools/tinyfs}
mkfs=${TFS_TEST_MKFS:-$build/tools/mkfs.tinyfs}

skip() { echo "skip: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mounts, and checks as other users)"

if [ "${TFS_LONG:-0}" = 1 ]; then
	fsx_n=50000 multi_n=20000 stress_t=60
else
	fsx_n=2000 multi_n=1000 stress_t=2
fi
case $prog in
conform)
	cmd=("$bin/conform")
	[ "$target" = tinyfs ] && cmd+=(-X "$src/known-failures.tinyfs")
	;;
fsx) cmd=("$bin/fsx" -N $fsx_n -l 1048576) ;;
fsx-multi) cmd=("$bin/fsx" -N $multi_n -p 3 -f 2) ;;
stress)
	cmd=("$bin/stress" -p 6 -t $stress_t)
	[ "$target" = tinyfs ] && cmd+=(-k)
	;;
*) echo "unknown program $prog"; exit 2 ;;
esac

tmp=$(mktemp -d "/tmp/posix-$target-$prog.XXXXXX")
mnt=$tmp/mnt
# the daemon's control socket stays in the test's directory
export TFS_RUN_DIR=$tmp/run
mkdir -p "$mnt"
mounted=0 pid=
. "$(dirname "$0")/../fuse/umount_retry.sh"
. "$(dirname "$0")/daemon.sh"

cleanup() {
	cd /
	if [ $mounted = 1 ]; then
		umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null ||
			umount -l "$mnt" 2>/dev/null
	fi
	wait_daemon
	rm -rf "$tmp"
}
trap cleanup EXIT

case $target in
tmpfs)
	mount -t tmpfs -o size=1g tmpfs "$mnt" 2>"$tmp/err" ||
		skip "cannot mount a tmpfs here: $(cat "$tmp/err")"
	mounted=1
	;;
tinyfs)
	[ -c /dev/fuse ] || skip "/dev/fuse is absent (no FUSE in this kernel or container)"
	command -v fusermount3 >/dev/null || skip "fusermount3 is absent (Debian package fuse3)"
	"$tinyfs" mount --help >/dev/null 2>&1 ||
		skip "this build has no FUSE daemon (\`tinyfs mount\`): it comes with the fuse branch once fs/ builds the POSIX layer"
	"$mkfs" -q --size 512M "$tmp/img" || { echo "FAIL: mkfs.tinyfs"; exit 1; }
	"$tinyfs" mount "$tmp/img" "$mnt" || { echo "FAIL: tinyfs mount"; exit 1; }
	mounted=1
	pid=$(daemon_pid)
	;;
*) echo "unknown target $target"; exit 2 ;;
esac

cd "$tmp" || exit 1
"${cmd[@]}" "$mnt"
rc=$?
if [ $mounted = 1 ] && [ "$target" = tinyfs ]; then
	# unmounting writes everything back; a failure there fails the test
	if umount_busy_retry "$mnt"; then
		mounted=0
		wait_daemon || { echo "FAIL: the daemon still runs 30 s after umount"; rc=1; }
	else
		echo "FAIL: cannot unmount $mnt"
		rc=1
	fi
	if [ "$prog" = stress ] && [ $mounted = 0 ]; then
		# the same tree, read from the image by a new daemon
		if "$tinyfs" mount "$tmp/img" "$mnt"; then
			mounted=1
			pid=$(daemon_pid)
			echo "== after unmount and mount again:"
			"$bin/stress" -c "$mnt"/stress.* || rc=1
		else
			echo "FAIL: tinyfs mount again"
			rc=1
		fi
	fi
fi
exit $rc
