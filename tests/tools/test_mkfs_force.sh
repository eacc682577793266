#!/usr/bin/env bash
# mkfs.tinyfs --force must not wipe anything unless the whole mkfs can go
# ahead: a failed mkfs leaves every existing image (and a mounted device)
# untouched.
#   test_mkfs_force.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

if ! command -v mkfs.ext4 >/dev/null; then
	echo "skip: no mkfs.ext4"
	exit 77
fi

# 1. A later target that cannot be created: the ext4 image keeps its magic.
truncate -s 8M e.img
mkfs.ext4 -q -F e.img >/dev/null 2>&1
before=$(sha256sum <e.img)
run 1 "$mkfs" --force e.img --size 64M /nonexistent/x.img && has err "/nonexistent/x.img"
[ "$(sha256sum <e.img)" = "$before" ] || fail "a failed mkfs --force wiped e.img"
blkid -p e.img 2>/dev/null | grep -q ext4 || fail "ext4 signature gone after a failed mkfs"

# 2. A later target that is refused at planning: e.img untouched too.
run 1 "$mkfs" --force e.img --size 256K small.img
[ "$(sha256sum <e.img)" = "$before" ] || fail "a refused plan wiped e.img"
[ -e small.img ] && fail "a failed mkfs left small.img behind"

# 3. A damaged tinyfs (no superblock copy validates; blkid knows no tinyfs)
# is still a filesystem someone may want to repair or copy out: refused
# without --force, naming it, untouched; with --force it is made anew.
"$mkfs" -q --size 64M -L hurt d.img || fail "mkfs d.img"
printf 'garbage!' | dd of=d.img bs=1 seek=4200 conv=notrunc status=none
printf 'garbage!' | dd of=d.img bs=1 seek=37000 conv=notrunc status=none
before=$(sha256sum <d.img)
run 1 "$mkfs" d.img && has err "d.img: contains a damaged tinyfs filesystem" &&
	has err "use --force"
[ "$(sha256sum <d.img)" = "$before" ] || fail "mkfs without --force overwrote a damaged tinyfs"
# Only the layout sector left (both copies zeroed): still refused.
dd if=/dev/zero of=d.img bs=4096 seek=1 count=16 conv=notrunc status=none
run 1 "$mkfs" d.img && has err "damaged tinyfs"
run 0 "$mkfs" -q --force d.img
run 0 "$tinyfs" show-super d.img

# 4. A mounted ext4 on a loop device: refused as busy, nothing wiped.
loop= mnt=
cleanup() {
	[ -n "$mnt" ] && umount "$mnt" 2>/dev/null
	[ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
truncate -s 32M l.img
mkfs.ext4 -q -F l.img >/dev/null 2>&1
if loop=$(losetup -f --show l.img 2>/dev/null) && mkdir m && mount "$loop" m 2>/dev/null; then
	mnt=$tmp/m
	before=$(dd if="$loop" bs=64k count=1 2>/dev/null | sha256sum)
	run 1 "$mkfs" --force "$loop" && has err "$loop" && has err "mounted on"
	[ "$(dd if="$loop" bs=64k count=1 2>/dev/null | sha256sum)" = "$before" ] ||
		fail "mkfs --force changed a mounted device"
	hasnt out "wiped"
else
	echo "note: cannot mount a loop device here, mounted case skipped"
fi

[ $fails = 0 ] && echo "all mkfs --force tests passed"
exit $((fails > 0))
