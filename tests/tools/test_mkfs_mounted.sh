#!/usr/bin/env bash
# mkfs.tinyfs refuses, even with --force, a target that is in use: a mounted
# block device, an image file behind a loop device that is mounted or held,
# and an image file that is itself the source of a mount (a FUSE filesystem
# records its image so).  Needs root, losetup, mount and mkfs.ext4; skips (77)
# with the reason otherwise.  Cleans up every mount and loop device.
#   test_mkfs_mounted.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

loops=() mnts=()
cleanup() {
	for m in "${mnts[@]}"; do umount "$m" 2>/dev/null; done
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
skip() { echo "skip: $*"; exit 77; }
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"
command -v losetup >/dev/null || skip "no losetup"
# attach FILE: $loop becomes a loop device over FILE, remembered for cleanup
# (not in a subshell, or the cleanup would never see it).
attach() { loop=$(losetup -f --show "$1" 2>/dev/null) || return 1; loops+=("$loop"); }

truncate -s 64M m.img
mkfs.ext4 -q -F m.img >/dev/null 2>&1 || skip "mkfs.ext4 failed"
attach m.img || skip "losetup cannot attach a loop device here"
mkdir mnt
# Read-only: a read-write ext4 writes to its image by itself (lazy inode
# table init, journal commits), which the checksum below would blame on mkfs.
mount -o ro "$loop" mnt 2>/dev/null || skip "cannot mount a loop device here"
mnts+=("$tmp/mnt")
sum() { sha256sum <"$1"; }

# 1. The image file behind a mounted loop device: refused, even forced,
#    naming the loop device and the mount point; nothing written.
before=$(sum m.img)
run 1 "$mkfs" -f m.img && has err "m.img" && has err "$loop" && has err "mounted on $tmp/mnt" &&
	has err "will not make a filesystem here"
run 1 "$mkfs" -f --size 128M m.img
run 1 "$mkfs" -f ok.img --size 8M m.img
[ "$(sum m.img)" = "$before" ] || fail "mkfs changed the image of a mounted loop device"
[ "$(stat -c %s m.img)" = 67108864 ] || fail "mkfs resized the image of a mounted loop device"
[ -e ok.img ] && fail "a refused mkfs left ok.img behind"
# Under another name (a symlink) it is the same file.
ln -s m.img link.img
run 1 "$mkfs" -f link.img && has err "$loop"
# 2. The mounted block device itself.
run 1 "$mkfs" -f "$loop" && has err "mounted on $tmp/mnt"

# 3. Unmounted, the loop device still attached but unused: mkfs goes ahead.
umount mnt && mnts=()
run 0 "$mkfs" -q -f m.img
# Held open exclusively (as a mount, md or another mkfs would): refused.
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL)
open(sys.argv[2], "w").close()
time.sleep(30)' "$loop" held &
holder=$!
for _ in $(seq 100); do [ -e held ] && break; sleep 0.05; done
if [ -e held ]; then
	run 1 "$mkfs" -f m.img && has err "$loop" && has err "in use"
else
	fail "could not hold $loop exclusively"
fi
kill $holder; wait $holder 2>/dev/null

# 4. An image file that is the source of a mount (as a FUSE daemon's is):
#    simulated with a tmpfs whose source is the image's path.
truncate -s 8M f.img
mkdir fmnt
if mount -t tmpfs "$tmp/f.img" fmnt 2>/dev/null; then
	mnts+=("$tmp/fmnt")
	run 1 "$mkfs" -f f.img && has err "f.img" && has err "mounted on $tmp/fmnt" &&
		has err "tmpfs"
	[ "$(sum f.img)" = "$(head -c 8M /dev/zero | sha256sum)" ] || fail "mkfs wrote f.img"
	umount fmnt && mnts=()
	run 0 "$mkfs" -q f.img
else
	echo "note: cannot mount a tmpfs here, mount-source case skipped"
fi

[ "$fails" = 0 ] && echo "all mounted-target checks passed"
exit $((fails > 0))
