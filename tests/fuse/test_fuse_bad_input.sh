#!/usr/bin/env bash
# Bad input to `tinyfs mount` and mount.tinyfs: a missing or busy mount
# point, a missing device, a non-tinyfs image (named by what it holds), a
# corrupt image, a second mount of a mounted filesystem, unknown options;
# fsck of a mounted filesystem.
# Each: a clear message, a non-zero exit, no mount left, and no byte of the
# image written.
#   test_fuse_bad_input.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 64M
mkdir -p "$mnt"

# Only this test's mounts: other tests and users mount and unmount meanwhile.
nr_mounts() { grep -c "^[^ ]* $tmp/[^ ]* fuse.tinyfs " /proc/self/mounts; }

# refused WANT_STATUS TEXT CMD...: CMD exits WANT_STATUS, stderr has TEXT,
# no new mount is left.
refused() {
	local want=$1 text=$2 st=0 before
	shift 2
	before=$(nr_mounts)
	"$@" >"$tmp/out" 2>"$tmp/err" || st=$?
	if [ "$st" != "$want" ]; then
		fail "'$*' exited $st, expected $want"
		sed 's/^/  stderr: /' "$tmp/err"
	elif ! grep -qiF -- "$text" "$tmp/err"; then
		fail "'$*': stderr lacks '$text'"
		sed 's/^/  stderr: /' "$tmp/err"
	fi
	if [ "$(nr_mounts)" != "$before" ]; then
		fail "'$*' left a mount"
		mounts+=("${*: -1}")
	fi
}

sum=$(md5sum <"$img")
refused 1 "No such file or directory" "$tinyfs" mount "$img" "$tmp/nowhere"
refused 1 "not a directory" "$tinyfs" mount "$img" "$img"
refused 1 "No such file or directory" "$tinyfs" mount "$tmp/none.img" "$mnt"
refused 2 "unknown option" "$tinyfs" mount -o frobnicate "$img" "$mnt"
refused 2 "expected continue, ro (remount-ro) or panic" "$tinyfs" mount -o errors=maybe "$img" "$mnt"
refused 2 "expected" "$tinyfs" mount "$img"
refused 2 "unknown option" "$mount_helper" "$img" "$mnt" -o frobnicate
# What that message points to: --help (and -h) print the usage, exit 0.
for h in --help -h; do
	"$mount_helper" $h >"$tmp/out" 2>&1 || fail "mount.tinyfs $h exited $?"
	grep -q "^usage: mount.tinyfs" "$tmp/out" || fail "mount.tinyfs $h: $(head -2 "$tmp/out")"
done
[ "$(md5sum <"$img")" = "$sum" ] || fail "a refused mount wrote to the image"
# ext4's spelling of errors=ro (an fstab line copied from ext4) mounts, as errors=ro.
if tfs_mount -o verbose,errors=remount-ro "$img" "$mnt" 2>"$tmp/err"; then
	grep -Eq "^errors: +ro$" "$tmp/err" || fail "-o errors=remount-ro: $(grep errors: "$tmp/err")"
	tfs_umount "$mnt"
	sum=$(md5sum <"$img") # what the refusals below must leave
else
	fail "-o errors=remount-ro: $(head -1 "$tmp/err")"
fi

# A busy mount point: something else is mounted there.
mkdir -p "$tmp/busy"
if mount -t tmpfs none "$tmp/busy" 2>/dev/null; then
	refused 1 "busy" "$tinyfs" mount "$img" "$tmp/busy"
	umount "$tmp/busy"
fi

# Not tinyfs: an ext4 image is named as such.
if command -v mkfs.ext4 >/dev/null; then
	truncate -s 32M "$tmp/ext4.img"
	mkfs.ext4 -q -F -L extlabel "$tmp/ext4.img"
	esum=$(md5sum <"$tmp/ext4.img")
	refused 1 "ext4" "$tinyfs" mount "$tmp/ext4.img" "$mnt"
	[ "$(md5sum <"$tmp/ext4.img")" = "$esum" ] || fail "mounting ext4 wrote to it"
fi
# Zeros: no filesystem at all.
truncate -s 32M "$tmp/zero.img"
refused 1 "$tmp/zero.img" "$tinyfs" mount "$tmp/zero.img" "$mnt"
cmp -s "$tmp/zero.img" <(head -c 32M /dev/zero) || fail "mounting zeros wrote to it"

# Corrupt: both superblock copies damaged.
cp "$img" "$tmp/bad.img"
printf 'garbage!' | dd of="$tmp/bad.img" bs=1 seek=4200 conv=notrunc status=none
printf 'garbage!' | dd of="$tmp/bad.img" bs=1 seek=37000 conv=notrunc status=none
bsum=$(md5sum <"$tmp/bad.img")
refused 1 "$tmp/bad.img" "$tinyfs" mount "$tmp/bad.img" "$mnt"
[ "$(md5sum <"$tmp/bad.img")" = "$bsum" ] || fail "mounting a corrupt image wrote to it"

# A damaged btree leaf: the mount opens (leaves are read when needed), and
# what the leaf held fails as on ext4, EUCLEAN "Structure needs cleaning",
# not EINVAL; fsck -n says it is left uncorrected (4), fsck -y replaces it
# with an empty leaf and the rest mounts whole.  4000 names make the
# dirents btree two levels deep; every dirents leaf gets a flipped byte but
# the one holding the root's names (those sort first; "keepfile" finds it),
# so a change away from the damage can be tried.
new_image "$tmp/leaf.img" 64M || finish
mount_or_finish "mount leaf.img" "$tmp/leaf.img" "$mnt"
echo kept >"$mnt/keepfile" || fail "writing keepfile"
mkdir "$mnt/d" && python3 -c 'import os, sys
for i in range(4000): open(os.path.join(sys.argv[1], "file-with-a-longish-name-%05d" % i), "w").close()' "$mnt/d" ||
	fail "creating 4000 files"
tfs_umount "$mnt"
python3 - "$tmp/leaf.img" <<'PY' || fail "no dirents leaf found to damage"
import collections, sys
f = open(sys.argv[1], 'r+b'); data = f.read(); ns = 64 * 1024; bs = 4096; n = 0
# Nodes start at any block, not only at multiples of their size (the
# allocator gives a node copy any free run of its size), so every block is
# looked at.  The filesystem's node magic (bytes 8-16, per
# uuid) is the most common one among blocks that look like node headers
# (version 1 at 26, a level <= 8 at 25): the first block with btree 0,
# level 1 at 24, on a 64 KiB boundary, was sometimes a journal block whose
# bytes matched by chance, and sometimes no such node sat on a boundary.
magic = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), bs)
                            if data[o + 26:o + 28] == bytes([1, 0]) and data[o + 25] <= 8
                            and data[o + 8:o + 16] != bytes(8)).most_common(1)[0][0]
for o in range(0, len(data), bs):
    if data[o + 8:o + 16] == magic and data[o + 24] == 1 and data[o + 25] == 0 \
            and b"keepfile" not in data[o:o + ns]:
        f.seek(o + 200); f.write(bytes([data[o + 200] ^ 0xff])); n += 1
sys.exit(n == 0)
PY
# errors=continue: changes go on (away from the damaged leaves).
mount_or_finish "mount of an image with damaged leaves" -o errors=continue "$tmp/leaf.img" "$mnt"
ls "$mnt/d" >/dev/null 2>"$tmp/err" && fail "listing a directory whose leaves are damaged worked"
grep -q "Structure needs cleaning" "$tmp/err" || fail "listing damaged leaves: $(cat "$tmp/err")"
mkdir "$mnt/after" || fail "errors=continue: a mkdir after the damaged leaf failed"
echo more >>"$mnt/keepfile" || fail "errors=continue: a write after the damaged leaf failed"
tfs_umount "$mnt"
# errors=ro (mkfs's default), as ext4's errors=remount-ro: a damaged node read
# on demand stops every change, EROFS; what reads still reads.
mount_or_finish "mount of an image with damaged leaves" "$tmp/leaf.img" "$mnt"
ls "$mnt/d" >/dev/null 2>"$tmp/err" && fail "listing a directory whose leaves are damaged worked"
grep -q "Structure needs cleaning" "$tmp/err" || fail "listing damaged leaves: $(cat "$tmp/err")"
# (Changes the daemon sees at once: buffered writes fail at their write-back.)
mkdir "$mnt/after-ro" 2>"$tmp/err" && fail "errors=ro: a mkdir after the damaged leaf worked"
grep -q "Read-only file system" "$tmp/err" || fail "errors=ro: the mkdir after the damaged leaf: $(cat "$tmp/err")"
chmod 600 "$mnt/keepfile" 2>"$tmp/err" && fail "errors=ro: a chmod after the damaged leaf worked"
grep -q "Read-only file system" "$tmp/err" || fail "errors=ro: the chmod after the damaged leaf: $(cat "$tmp/err")"
[ -d "$mnt/after" ] || fail "errors=ro: the directory made under errors=continue is not there"
[ "$(cat "$mnt/keepfile")" = "$(printf 'kept\nmore')" ] || fail "errors=ro: keepfile reads $(cat "$mnt/keepfile")"
tfs_umount "$mnt"
st=0
"$tinyfs" fsck -n "$tmp/leaf.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 4 ] || fail "fsck -n of damaged leaves exited $st, expected 4"
grep -q "unreadable, keys" "$tmp/err" || fail "fsck -n does not say which keys are lost: $(cat "$tmp/err")"
# fsck -y replaces each damaged leaf with an empty one (1): the names they
# held are lost, their files go to /lost+found; then it is clean, it mounts,
# what was elsewhere is intact, and changes work under errors=ro.
st=0
"$tinyfs" fsck -y "$tmp/leaf.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] || fail "fsck -y of damaged leaves exited $st, expected 1: $(tail -3 "$tmp/err")"
grep -q "replaced with an empty node" "$tmp/err" || fail "fsck -y: $(tail -3 "$tmp/err")"
st=0
"$tinyfs" fsck -n "$tmp/leaf.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 0 ] || fail "fsck -n after fsck -y exited $st, expected 0: $(tail -3 "$tmp/err")"
mount_or_finish "mount after fsck -y" "$tmp/leaf.img" "$mnt"
[ "$(cat "$mnt/keepfile")" = "$(printf 'kept\nmore')" ] || fail "after fsck -y: keepfile reads $(cat "$mnt/keepfile")"
[ -d "$mnt/after" ] || fail "after fsck -y: the directory made under errors=continue is gone"
n=$(($(ls "$mnt/d" | wc -l) + $(ls "$mnt/lost+found" | wc -l)))
[ "$n" = 4000 ] || fail "after fsck -y: $n of the 4000 files in d or /lost+found"
mkdir "$mnt/after-fsck" || fail "after fsck -y: a mkdir failed"
tfs_umount "$mnt"
st=0
"$tinyfs" fsck -n "$tmp/leaf.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 0 ] || fail "fsck -n after the mount exited $st, expected 0: $(tail -3 "$tmp/err")"

# A lost alloc btree leaf (every copy; in a 64 MiB image the alloc btree is
# one root leaf): the mount is refused (the open builds the allocator from
# it); fsck -n says what is lost, writes nothing (4); fsck -y rebuilds the
# alloc keys and counters from the extents and every tree's nodes (1), then
# clean.  Mounted again, new files take most of the free space: every old
# file reads back as before (a block in use handed out again would
# overwrite one), and fsck stays clean.
new_image "$tmp/alloc.img" 64M || finish
mount_or_finish "mount alloc.img" "$tmp/alloc.img" "$mnt"
mkdir "$mnt/old" && python3 -c 'import os, sys
for i in range(300):
    with open(os.path.join(sys.argv[1], "f%03d" % i), "wb") as f: f.write(os.urandom(4096 * (1 + i % 16)))' "$mnt/old" ||
	fail "writing the old files"
(cd "$mnt/old" && md5sum f*) >"$tmp/alloc.sums"
tfs_umount "$mnt"
python3 - "$tmp/alloc.img" <<'PY' || fail "no alloc btree node found to damage"
import sys, collections
f = open(sys.argv[1], 'r+b'); data = f.read(); ns = 64 * 1024; n = 0
c = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), ns)
                        if data[o + 8:o + 16] != bytes(8) and data[o + 4:o + 8] == bytes(4))
magic = c.most_common(1)[0][0]
for o in range(0, len(data), ns):
    if data[o + 8:o + 16] == magic and data[o + 24] == 4:
        f.seek(o + 16); f.write(bytes([data[o + 16] ^ 0xff])); n += 1
sys.exit(n == 0)
PY
asum=$(md5sum <"$tmp/alloc.img")
refused 1 "btree alloc level 0 node at" "$tinyfs" mount "$tmp/alloc.img" "$mnt"
st=0
"$tinyfs" fsck -n "$tmp/alloc.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 4 ] || fail "fsck -n of a lost alloc leaf exited $st, expected 4: $(tail -3 "$tmp/err")"
grep -q "btree alloc level 0 node at 0x.*: unreadable, keys 0:0..POS_MAX lost" "$tmp/err" ||
	fail "fsck -n does not say the alloc keys are lost: $(cat "$tmp/err")"
[ "$(md5sum <"$tmp/alloc.img")" = "$asum" ] || fail "fsck -n of a lost alloc leaf wrote to the image"
st=0
"$tinyfs" fsck -y "$tmp/alloc.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] || fail "fsck -y of a lost alloc leaf exited $st, expected 1: $(tail -3 "$tmp/err")"
fsck_clean "$tmp/alloc.img" "fsck -n after fsck -y of a lost alloc leaf"
mount_or_finish "mount after fsck -y of a lost alloc leaf" "$tmp/alloc.img" "$mnt"
free=$(df -B1 --output=avail "$mnt" | tail -1)
python3 -c 'import os, sys
d, n = sys.argv[1], int(sys.argv[2]) * 4 // 5 // (1 << 20)
os.mkdir(d)
for i in range(n):
    with open(os.path.join(d, "n%03d" % i), "wb") as f: f.write(bytes([i % 251]) * (1 << 20))' "$mnt/new" "$free" ||
	fail "writing new files after fsck -y"
tfs_umount "$mnt"
mount_or_finish "mount after the new files" "$tmp/alloc.img" "$mnt"
(cd "$mnt/old" && md5sum --quiet -c "$tmp/alloc.sums") >"$tmp/out" 2>&1 ||
	fail "old files changed after fsck -y of a lost alloc leaf: $(head -3 "$tmp/out")"
python3 -c 'import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    i = int(n[1:])
    if open(os.path.join(d, n), "rb").read() != bytes([i % 251]) * (1 << 20): sys.exit(n)' "$mnt/new" ||
	fail "a new file reads back wrong"
[ "$(ls "$mnt/new" | wc -l)" -gt 20 ] || fail "only $(ls "$mnt/new" | wc -l) new files"
tfs_umount "$mnt"
fsck_clean "$tmp/alloc.img" "fsck -n after the new files"

# A lost interior node: a dirents btree three levels deep (16 KiB nodes,
# 14000 names of 250 bytes), the middle child of its root (a level 1 node)
# damaged.  The mount is refused, naming the node and fsck; fsck -n says the range
# lost as an interior node and writes nothing (4); fsck -y replaces it by
# an empty subtree and salvages the names from the leaves under it, found
# on the member (1); then clean, it mounts, and every name is back in /.
new_image "$tmp/interior.img" 64M --btree-node-size 16K || finish
mount_or_finish "mount interior.img" "$tmp/interior.img" "$mnt"
echo kept >"$mnt/keepfile" || fail "writing keepfile"
python3 -c 'import os, sys
for i in range(14000): open(os.path.join(sys.argv[1], "%05d-" % i + "n" * 244), "w").close()' "$mnt" ||
	fail "creating 14000 files"
tfs_umount "$mnt"
python3 - "$tmp/interior.img" <<'PY' || fail "no level 2 dirents node found"
import collections, struct, sys
f = open(sys.argv[1], 'r+b'); data = f.read(); bs = 4096
magic = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), bs)
                            if data[o + 26:o + 28] == bytes([1, 0]) and data[o + 25] <= 8
                            and data[o + 8:o + 16] != bytes(8)).most_common(1)[0][0]
roots = [o for o in range(0, len(data), bs)
         if data[o + 8:o + 16] == magic and data[o + 24] == 1 and data[o + 25] == 2]
if not roots:
    sys.exit(1)
# The root: the newest copy (node seq at 16); its keys after the 96-byte
# header, a child's offset 48 bytes into its key.
root = max(roots, key=lambda o: struct.unpack_from('<Q', data, o + 16)[0])
at, keys = root + 96, []
for i in range(struct.unpack_from('<I', data, root + 28)[0]):
    keys.append(at)
    at += 8 * struct.unpack_from('<H', data, at)[0]
child = struct.unpack_from('<Q', data, keys[len(keys) // 2] + 48)[0]
if data[child + 24] != 1 or data[child + 25] != 1:
    sys.exit(1)
f.seek(child + 16); f.write(bytes([data[child + 16] ^ 0xff]))
PY
isum=$(md5sum <"$tmp/interior.img")
refused 1 "btree dirents level 1 node at" "$tinyfs" mount "$tmp/interior.img" "$mnt"
refused 1 "tinyfs fsck -y replaces it" "$tinyfs" mount "$tmp/interior.img" "$mnt"
st=0
"$tinyfs" fsck -n "$tmp/interior.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 4 ] || fail "fsck -n of a lost interior node exited $st, expected 4: $(tail -3 "$tmp/err")"
grep -q "btree dirents level 1 node at 0x.*: unreadable, keys .* lost (an interior node" "$tmp/err" ||
	fail "fsck -n does not say the interior node's keys are lost: $(grep -v dirent "$tmp/err" | head -5)"
[ "$(md5sum <"$tmp/interior.img")" = "$isum" ] || fail "fsck -n of a lost interior node wrote to the image"
st=0
"$tinyfs" fsck -y "$tmp/interior.img" >"$tmp/out" 2>"$tmp/err" || st=$?
[ "$st" = 1 ] || fail "fsck -y of a lost interior node exited $st, expected 1: $(tail -3 "$tmp/err")"
grep -q "replaced with an empty node" "$tmp/err" || fail "fsck -y: $(tail -3 "$tmp/err")"
salvaged=$(sed -n 's/.*: \([0-9]*\) key(s) salvaged from leaves found on the members$/\1/p' "$tmp/err")
[ "${salvaged:-0}" -gt 0 ] || fail "fsck -y salvaged no name: $(grep salvage "$tmp/err")"
fsck_clean "$tmp/interior.img" "fsck -n after fsck -y of a lost interior node"
mount_or_finish "mount after fsck -y of a lost interior node" "$tmp/interior.img" "$mnt"
named=$(ls "$mnt" | wc -l)
[ "$named" = 14001 ] && [ ! -e "$mnt/lost+found" ] ||
	fail "after fsck -y: $named names in / (want 14001), /lost+found: $(ls "$mnt/lost+found" 2>&1 | wc -l)"
[ "$(cat "$mnt/keepfile")" = kept ] || fail "after fsck -y: keepfile reads $(cat "$mnt/keepfile")"
mkdir "$mnt/after-fsck" || fail "after fsck -y of a lost interior node: a mkdir failed"
tfs_umount "$mnt"
fsck_clean "$tmp/interior.img" "fsck -n after the mount"
echo "lost interior dirents node: $salvaged names salvaged, $named in /"

# A member of another filesystem given with ours.
new_image "$tmp/other.img" 64M || finish
osum=$(md5sum <"$tmp/other.img")
refused 1 "" "$tinyfs" mount "$img:$tmp/other.img" "$mnt"
[ "$(md5sum <"$tmp/other.img")" = "$osum" ] || fail "a refused member was written"
[ "$(md5sum <"$img")" = "$sum" ] || fail "a refused mount with a foreign member wrote to the image"

# One member named twice (here also through a symlink): said at once, not
# after a minute waiting for its own lock.
ln -s "$img" "$tmp/twice.img"
SECONDS=0
refused 1 "given twice" "$tinyfs" mount "$img:$tmp/twice.img" "$mnt"
[ "$SECONDS" -lt 10 ] || fail "a member named twice took ${SECONDS}s to refuse"
[ "$(md5sum <"$img")" = "$sum" ] || fail "a member named twice wrote to the image"

# A second mount of a mounted filesystem, elsewhere; and over a live mount.
mount_or_finish mount "$img" "$mnt"
mkdir -p "$tmp/mnt2"
refused 1 "already mounted at $mnt" "$tinyfs" mount "$img" "$tmp/mnt2"
ln -s "$img" "$tmp/alias.img"
refused 1 "already mounted" "$tinyfs" mount "$tmp/alias.img" "$tmp/mnt2"
new_image "$tmp/c.img" 64M || finish
refused 1 "busy" "$tinyfs" mount "$tmp/c.img" "$mnt"
# fsck of a mounted filesystem: refused, saying so (as e2fsck), repair or not.
refused 8 "is mounted on $mnt" "$tinyfs" fsck -y "$img"
refused 8 "unmount it first" "$tinyfs" fsck -n "$img"
refused 8 "is mounted" "$tinyfs" fsck -y "$tmp/alias.img"
tfs_umount "$mnt"

# mount.tinyfs as mount(8) runs it: -f (fake) mounts nothing; a real one works.
"$mount_helper" "$img" "$mnt" -f -o rw || fail "mount.tinyfs -f"
grep -q " $mnt fuse" /proc/self/mounts && fail "mount.tinyfs -f mounted"
"$mount_helper" "$img" "$mnt" -o rw,noatime,defaults,_netdev && mounts+=("$mnt") || fail "mount.tinyfs"
grep -q " $mnt fuse.tinyfs " /proc/self/mounts || fail "mount.tinyfs did not mount"
tfs_umount "$mnt"

# A mount whose daemon was killed: the kernel still answers stat(2) of its
# root from the attributes it caches (for a day), so the mount looks alive;
# both refusals say the daemon is gone and what to do.
mount_or_finish mount "$img" "$mnt"
ls -l "$mnt" >/dev/null # what a user did: the root's attributes are cached
pid=$(daemon_pid "$mnt")
kill -9 "$pid"
wait_gone "$pid"
refused 1 "its daemon is gone" "$tinyfs" mount "$img" "$tmp/mnt2"
refused 1 "its daemon is gone" "$tinyfs" mount "$tmp/c.img" "$mnt"
umount "$mnt" || fail "umount of the dead mount"
mount_or_finish mount "$img" "$mnt"
tfs_umount "$mnt"
finish
