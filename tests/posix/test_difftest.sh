#!/usr/bin/env bash
# difftest for meson (suite `posix`): the same seeded random system calls on
# kernel ext4 (a loop device) and on a fresh filesystem, every result compared:
#   test_difftest.sh BUILD_DIR tinyfs|tmpfs
# tinyfs: a new image mounted with `tinyfs mount` (as test_posix.sh does);
# the last seed's trees are compared again after an unmount and a mount
# (-k, then -w), and it is unmounted after, the daemon waited for.  tmpfs:
# the program's own check (its normalisation must leave no difference
# between two kernel filesystems).  Seeds 1-4, 300 operations each, with
# other users' calls (-u) and xattr values to 64 KiB (-b): about 10 s.
# TFS_DIFFTEST_SEEDS="S ..." and TFS_DIFFTEST_OPS=N choose others;
# TFS_LONG=1 runs 40 seeds of 1000.  TFS_DIFFTEST_MOUNT_OPTS=OPTS mounts
# tinyfs with -o OPTS (killpriv, no_writeback_cache, ...; both mounts),
# TFS_DIFFTEST_MKFS_OPTS="..." adds mkfs.tinyfs options (--btree-node-size
# 16k, --block-size 1k, ...).  Skips (77) with the reason without
# root, loop devices, mkfs.ext4, or (tinyfs) FUSE.
set -u
build=$(cd "$1" && pwd)
target=$2
bin=$build/tests/posix/difftest
tinyfs=${TFS_TEST_TINYFS:-$build/tools/tinyfs}
mkfs=${TFS_TEST_MKFS:-$build/tools/mkfs.tinyfs}

skip() { echo "skip: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (loop devices, mounts, other users)"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is absent (Debian package e2fsprogs)"
command -v losetup >/dev/null || skip "losetup is absent (Debian package mount)"

if [ "${TFS_LONG:-0}" = 1 ]; then
	seeds=${TFS_DIFFTEST_SEEDS:-$(seq -s " " 1 40)} ops=${TFS_DIFFTEST_OPS:-1000}
else
	seeds=${TFS_DIFFTEST_SEEDS:-1 2 3 4} ops=${TFS_DIFFTEST_OPS:-300}
fi

mopts=()
[ -n "${TFS_DIFFTEST_MOUNT_OPTS:-}" ] && mopts=(-o "$TFS_DIFFTEST_MOUNT_OPTS")
tmp=$(mktemp -d "/tmp/posix-difftest-$target.XXXXXX")
export TFS_RUN_DIR=$tmp/run
mnt=$tmp/mnt ext4=$tmp/ext4
mkdir -p "$mnt" "$ext4"
loop= ext4_mounted=0 mounted=0 pid=
. "$(dirname "$0")/../fuse/umount_retry.sh"
. "$(dirname "$0")/daemon.sh"
cleanup() {
	cd /
	if [ $mounted = 1 ]; then
		umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null ||
			umount -l "$mnt" 2>/dev/null
	fi
	wait_daemon
	[ $ext4_mounted = 1 ] && { umount "$ext4" 2>/dev/null || umount -l "$ext4"; }
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$tmp"
}
trap cleanup EXIT

# ext4 on a loop device; no nodev or nosuid, as a tinyfs mount has neither;
# ea_inode: xattr values to 64 KiB, as tinyfs (difftest -b)
truncate -s 512M "$tmp/ext4.img"
mkfs.ext4 -q -F -O ea_inode "$tmp/ext4.img" >"$tmp/err" 2>&1 || { echo "FAIL: mkfs.ext4: $(cat "$tmp/err")"; exit 1; }
loop=$(losetup -f --show "$tmp/ext4.img" 2>"$tmp/err") ||
	skip "no loop device here: $(cat "$tmp/err")"
mount -t ext4 "$loop" "$ext4" 2>"$tmp/err" || skip "cannot mount ext4 here: $(cat "$tmp/err")"
ext4_mounted=1

case $target in
tmpfs)
	mount -t tmpfs -o size=512m tmpfs "$mnt" 2>"$tmp/err" ||
		skip "cannot mount a tmpfs here: $(cat "$tmp/err")"
	mounted=1
	;;
tinyfs)
	[ -c /dev/fuse ] || skip "/dev/fuse is absent (no FUSE in this kernel or container)"
	command -v fusermount3 >/dev/null || skip "fusermount3 is absent (Debian package fuse3)"
	"$tinyfs" mount --help >/dev/null 2>&1 || skip "this build has no FUSE daemon (\`tinyfs mount\`)"
	# shellcheck disable=SC2086 # options, split on purpose
	"$mkfs" -q ${TFS_DIFFTEST_MKFS_OPTS:-} --size 512M "$tmp/img" || { echo "FAIL: mkfs.tinyfs"; exit 1; }
	"$tinyfs" mount "${mopts[@]}" "$tmp/img" "$mnt" || { echo "FAIL: tinyfs mount"; exit 1; }
	mounted=1
	pid=$(daemon_pid)
	;;
*) echo "unknown target $target"; exit 2 ;;
esac

cd "$tmp" || exit 1
rc=0 kept=
for s in $seeds; do
	# the trees of the last seed are kept: on tinyfs compared again after a remount
	"$bin" -u -b -k -s "$s" -n "$ops" "$ext4" "$mnt" >"$tmp/out" 2>&1 || rc=1
	grep -v '^kept:' "$tmp/out"
	kept=$(awk '/^kept:/ { print $2, $3 }' "$tmp/out")
	[ "$s" = "${seeds##* }" ] || { [ -n "$kept" ] && rm -rf $kept; }
done
# umount_tinyfs: unmounts (all written back) and waits for the daemon
umount_tinyfs() {
	if umount_busy_retry "$mnt"; then
		mounted=0
		wait_daemon || { echo "FAIL: the daemon still runs 30 s after umount"; rc=1; }
	else
		echo "FAIL: cannot unmount $mnt"
		rc=1
	fi
}
if [ $mounted = 1 ] && [ "$target" = tinyfs ]; then
	umount_tinyfs
	if [ $mounted = 0 ] && [ -n "$kept" ]; then
		if "$tinyfs" mount "${mopts[@]}" "$tmp/img" "$mnt"; then
			mounted=1
			pid=$(daemon_pid)
			echo "== after unmount and mount again:"
			"$bin" -w $kept || rc=1
			umount_tinyfs
		else
			echo "FAIL: tinyfs mount again"
			rc=1
		fi
	fi
fi
exit $rc
