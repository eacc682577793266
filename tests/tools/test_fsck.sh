#!/usr/bin/env bash
# tinyfs fsck and fsck.tinyfs as a user runs them: exit codes as e2fsck's
# (0 clean, 4 left uncorrected, 8 operational error, 16 usage), -n writes
# nothing, a filesystem in use (its members locked, as the daemon holds
# them) is refused, a corrupt node is named.  Damage of the POSIX keys and
# its repair is tests/unit/test_fsck.c's.
#   test_fsck.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
sum() { sha256sum <"$1"; }

truncate -s 64M a.img
run 0 "$mkfs" -q a.img
before=$(sum a.img)
run 0 "$tinyfs" fsck -n a.img && has err "a.img: clean" # e2fsck says so too
run 0 "$tinyfs" fsck a.img
run 0 "$tinyfs" fsck -n -v a.img && has err "clean"
[ "$(sum a.img)" = "$before" ] || fail "fsck -n changed the image"
run 0 "$tinyfs" fsck -y a.img

# fsck.tinyfs, and fsck -t tinyfs when fsck(8) is here.
run 0 env TINYFS="$tinyfs" "$build/tools/fsck.tinyfs" -n a.img
# Run from the build tree as the README shows, nothing installed: the
# tinyfs beside it.
run 0 env -u TINYFS "$build/tools/fsck.tinyfs" -n a.img
if command -v fsck >/dev/null; then
	mkdir bin && ln -s "$build/tools/fsck.tinyfs" bin/fsck.tinyfs
	# An absolute path: fsck(8) 2.38 runs no checker for a relative one (exit 0, silent).
	run 0 env TINYFS="$tinyfs" PATH="$tmp/bin:$PATH" fsck -t tinyfs -n "$tmp/a.img" &&
		has err "a.img: clean"
fi

# In use: the daemon holds an exclusive lock on every member.
exec 9<a.img
flock -x 9 || fail "cannot lock a.img"
run 8 "$tinyfs" fsck -n a.img && has err "a.img" && has err "in use"
run 8 "$tinyfs" fsck -y a.img && has err "in use"
exec 9<&-
run 0 "$tinyfs" fsck -n a.img

# Usage errors (16, as e2fsck: fsck(8) tells them from a failed check) and
# operational errors.
run 16 "$tinyfs" fsck
run 16 "$tinyfs" fsck -n -y a.img && has err "-n and -y"
run 16 "$tinyfs" fsck -q a.img
run 8 "$tinyfs" fsck -n missing.img && has err "missing.img"
truncate -s 8M zero.img
run 8 "$tinyfs" fsck -n zero.img && has err "zero.img"

# A corrupt btree node: every node's header byte 16 flipped (the nodes
# are found by their magic at node-size boundaries).
cp a.img b.img
python3 - b.img <<'PY'
import sys, collections
f = open(sys.argv[1], 'r+b'); data = f.read(); ns = 64 * 1024
c = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), ns)
                        if data[o + 8:o + 16] != bytes(8) and data[o + 4:o + 8] == bytes(4))
magic = c.most_common(1)[0][0]
for o in range(0, len(data), ns):
    if data[o + 8:o + 16] == magic:
        f.seek(o + 16); f.write(bytes([data[o + 16] ^ 0xff]))
PY
# A damaged node is an error of the filesystem, left uncorrected (4), not
# of fsck (8); -n writes nothing.  Each is a root leaf, replaced by an
# empty one (the alloc btree's too); -y still leaves the root directory's
# inode lost (4).
before=$(sum b.img)
run 4 "$tinyfs" fsck -n b.img
has err "node at 0x" && has err "checksum" && has err "btree alloc level 0 node at 0x"
[ "$(sum b.img)" = "$before" ] || fail "fsck -n of a corrupt node changed the image"
run 4 "$tinyfs" fsck -y b.img && has err "replaced with an empty node" &&
	has err "root directory (inode 1) does not exist"

# Flips byte 16 (the seq: the checksum fails) of every node of one btree
# (byte 24 the btree id), old copies included.
damage_btree() {
	python3 - "$1" "$2" <<'PY'
import sys, collections
f = open(sys.argv[1], 'r+b'); data = f.read(); ns = 64 * 1024; bid = int(sys.argv[2])
c = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), ns)
                        if data[o + 8:o + 16] != bytes(8) and data[o + 4:o + 8] == bytes(4))
magic = c.most_common(1)[0][0]
n = 0
for o in range(0, len(data), ns):
    if data[o + 8:o + 16] == magic and data[o + 24] == bid:
        f.seek(o + 16); f.write(bytes([data[o + 16] ^ 0xff])); n += 1
assert n, "no node of btree %d" % bid
PY
}

# A lost leaf (the xattrs btree's only node, here its root): -n names it
# and the keys lost, writes nothing, exits 4; -y replaces it with an empty
# node (1); the next check is clean, the other trees intact.
cp a.img x.img
"$build/tests/tools/btree_fill" xattrs 20 x.img >/dev/null || fail "btree_fill"
damage_btree x.img 3
before=$(sum x.img)
run 4 "$tinyfs" fsck -n x.img && has err "btree xattrs level 0 node at 0x" &&
	has err ": unreadable, keys 0:0..POS_MAX lost" && has err "checked as an empty node"
[ "$(sum x.img)" = "$before" ] || fail "fsck -n of a lost leaf changed the image"
run 1 "$tinyfs" fsck -y x.img && has err "replaced with an empty node" &&
	has err "all fixed"
run 0 "$tinyfs" fsck -n x.img && has err "x.img: clean"
run 0 "$tinyfs" list --btree xattrs x.img
[ -z "$(cat out)" ] || fail "keys left in the replaced leaf: $(cat out)"

# A lost alloc btree leaf (here its root, every copy): -n names it, marks
# the space in use from the extents and nodes, writes nothing, exits 4; -y
# replaces it and rewrites the alloc keys and counters (1); then clean.
# (Data written after the repair: tests/unit/test_fsck.c
# test_damaged_leaf_alloc, tests/fuse/test_fuse_bad_input.sh.)
cp a.img y.img
damage_btree y.img 4
before=$(sum y.img)
run 4 "$tinyfs" fsck -n y.img && has err "btree alloc level 0 node at 0x" &&
	has err ": unreadable, keys 0:0..POS_MAX lost" && has err "checked as an empty node" &&
	has err "btree alloc: 1 node(s) lost: space in use marked from"
[ "$(sum y.img)" = "$before" ] || fail "fsck -n of a lost alloc leaf changed the image"
run 1 "$tinyfs" fsck -y y.img && has err "replaced with an empty node" &&
	has err "rewritten from the nodes" && has err "all fixed"
run 0 "$tinyfs" fsck -n y.img && has err "y.img: clean"

# A leaf with a good copy on the other member is never replaced.  A lost
# interior node (the root of an xattrs tree of many 16 KiB leaves, both
# copies), even with keys to replay: -n names it as an interior node and
# writes nothing (4); -y --no-salvage replaces it (here the whole tree: an
# empty root leaf) (1), then clean; without --no-salvage (k.img, the same
# damage) the leaves under it give every key back (3000 positions).
truncate -s 64M i.img i2.img
run 0 "$mkfs" -q --btree-node-size 16K --metadata-replicas 2 i.img i2.img
"$build/tests/tools/btree_fill" xattrs 3000 100 i.img i2.img >/dev/null || fail "btree_fill"
"$build/tests/tools/btree_fill" xattrs 20 100 nostop i.img i2.img >/dev/null || fail "btree_fill"
cp i.img j.img
# damage_level IMG BTREE LEVEL: every node of that btree and level on IMG (16 KiB nodes).
damage_level() {
	python3 - "$@" <<'PY2'
import sys, collections
f = open(sys.argv[1], 'r+b'); data = f.read(); ns = 16 * 1024
bid, lvl = int(sys.argv[2]), int(sys.argv[3])
c = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), ns)
                        if data[o + 8:o + 16] != bytes(8) and data[o + 4:o + 8] == bytes(4))
magic = c.most_common(1)[0][0]
n = 0
for o in range(0, len(data), ns):
    if data[o + 8:o + 16] == magic and data[o + 24] == bid and data[o + 25] == lvl:
        f.seek(o + 16); f.write(bytes([data[o + 16] ^ 0xff])); n += 1
assert n, "no node of btree %d level %d" % (bid, lvl)
PY2
}
damage_level j.img 3 0 # every xattrs leaf, one copy: the other member's reads
run 0 "$tinyfs" fsck -y j.img i2.img && has err "trying the next replica"
hasnt err "replaced"
run 0 "$tinyfs" list --btree xattrs j.img i2.img
[ "$(wc -l <out)" = 3000 ] || fail "xattrs keys after fsck -y of one bad copy: $(wc -l <out), want 3000"
damage_level i.img 3 1
damage_level i2.img 3 1
cp i.img k.img
cp i2.img k2.img
before=$(sum i.img)$(sum i2.img)
run 4 "$tinyfs" fsck -n i.img i2.img && has err "btree xattrs level 1 node at" &&
	has err ": unreadable, keys 0:0..POS_MAX lost (an interior node, its whole subtree" &&
	has err "checked as an empty node"
[ "$(sum i.img)$(sum i2.img)" = "$before" ] || fail "fsck -n of a damaged interior node changed the image"
run 1 "$tinyfs" fsck -y --no-salvage i.img i2.img && has err "replaced with an empty node" &&
	has err "all fixed" && hasnt err "salvage"
run 0 "$tinyfs" fsck -n i.img i2.img && has err "clean"
run 0 "$tinyfs" list --btree xattrs i.img i2.img
[ -z "$(cat out)" ] || fail "keys left under the replaced interior root: $(head -3 out)"
run 1 "$tinyfs" fsck -y k.img k2.img && has err "replaced with an empty node" &&
	has err "keys 0:0..POS_MAX: 3000 key(s) salvaged from leaves found on the members"
run 0 "$tinyfs" fsck -n k.img k2.img && has err "clean"
run 0 "$tinyfs" list --btree xattrs k.img k2.img
[ "$(wc -l <out)" = 3000 ] || fail "xattrs keys after the salvage: $(wc -l <out), want 3000"

# A lost level 1 node under a level 2 root (16 KiB nodes, 2000-byte keys):
# the mount-like open (tinyfs list) refuses it; fsck -n names its range
# (4, nothing written); fsck -y --no-salvage replaces it by an empty
# subtree (1): only its range goes, then clean; without --no-salvage (m.img)
# its leaves give every key back.
truncate -s 64M l.img
run 0 "$mkfs" -q --btree-node-size 16K l.img
"$build/tests/tools/btree_fill" xattrs 1500 2000 l.img >/dev/null || fail "btree_fill"
# The newest level 2 xattrs node (the root): its middle child's node gets a flipped byte.
python3 - l.img >range <<'PY' || fail "no level 2 xattrs node"
import sys, struct, collections
f = open(sys.argv[1], 'r+b'); data = f.read(); bs = 4096
magic = collections.Counter(data[o + 8:o + 16] for o in range(0, len(data), bs)
                            if data[o + 26:o + 28] == bytes([1, 0]) and data[o + 25] <= 8
                            and data[o + 8:o + 16] != bytes(8)).most_common(1)[0][0]
roots = [o for o in range(0, len(data), bs)
         if data[o + 8:o + 16] == magic and data[o + 24] == 3 and data[o + 25] == 2]
if not roots:
    sys.exit(1)
root = max(roots, key=lambda o: struct.unpack_from('<Q', data, o + 16)[0])
nr = struct.unpack_from('<I', data, root + 28)[0]
at, keys = root + 96, []
for i in range(nr):
    keys.append(at)
    at += 8 * struct.unpack_from('<H', data, at)[0]
k = keys[nr // 2]
child = struct.unpack_from('<Q', data, k + 48)[0]
assert data[child + 24] == 3 and data[child + 25] == 1
f.seek(child + 16); f.write(bytes([data[child + 16] ^ 0xff]))
pos = lambda p: "POS_MAX" if p == (2**64 - 1, 2**64 - 1) else "%d:%d" % p
lo = struct.unpack_from('<QQ', data, keys[nr // 2 - 1] + 8)
lo = (lo[0], lo[1] + 1)
hi = struct.unpack_from('<QQ', data, k + 8)
lost = sum(1 for i in range(1500) if lo <= (1, i) <= hi)
print("%s..%s %d" % (pos(lo), pos(hi), lost))
PY
read -r range lost <range
echo "lost level 1 xattrs node: keys $range ($lost of 1500)"
cp l.img m.img
run 1 "$tinyfs" list --btree xattrs l.img && has err "btree xattrs level 1 node at"
before=$(sum l.img)
run 4 "$tinyfs" fsck -n l.img && has err "unreadable, keys $range lost (an interior node" &&
	has err "keys $range: $lost key(s) salvaged from leaves found on the members (in memory"
[ "$(sum l.img)" = "$before" ] || fail "fsck -n of a lost level 1 node changed the image"
run 1 "$tinyfs" fsck -y --no-salvage l.img && has err "replaced with an empty node" &&
	has err "all fixed"
run 0 "$tinyfs" fsck -n l.img && has err "l.img: clean"
run 0 "$tinyfs" list --btree xattrs l.img
[ "$lost" -gt 0 ] && [ "$(wc -l <out)" = $((1500 - lost)) ] ||
	fail "xattrs keys after the repair: $(wc -l <out), want 1500 - $lost"
run 1 "$tinyfs" fsck -y m.img && has err "keys $range: $lost key(s) salvaged"
run 0 "$tinyfs" fsck -n m.img && has err "m.img: clean"
run 0 "$tinyfs" list --btree xattrs m.img
[ "$(wc -l <out)" = 1500 ] || fail "xattrs keys after the salvage: $(wc -l <out), want 1500"
"$build/tests/tools/btree_fill" xattrs 1500 2000 m.img >/dev/null || fail "btree_fill after the salvage"
run 0 "$tinyfs" fsck -n m.img && has err "m.img: clean"

[ "$fails" = 0 ] && echo "all fsck tool checks passed"
exit $((fails > 0))
