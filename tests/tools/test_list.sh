#!/usr/bin/env bash
# tinyfs list, run as a user would, on trees btree_fill wrote.
#   test_list.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
fill=$build/tests/tools/btree_fill

# 1. A fresh filesystem: every btree, empty but for the root directory mkfs made
#    (and in the alloc btree the inode counter, 1, and the space of the five
#    other trees' root nodes: five btree alloc keys and their counter).
run 0 "$mkfs" -q --size 32M a.img
run 0 "$tinyfs" list a.img && has out "btree inodes:" && has out "btree orphans:"
has out "inode 1:0 " || fail "no root directory: $(cat out)"
has out "inodes: 1" || fail "no inode counter: $(cat out)"
has out "btree_blocks member 0: " || fail "no btree blocks counter: $(cat out)"
[ "$(grep -c ': btree used ' out)" = 5 ] || fail "not five btree alloc keys: $(cat out)"
[ "$(wc -l <out)" = 14 ] || fail "a fresh filesystem lists keys: $(cat out)"

# 2. Keys, in order, with their text; filters.
run 0 "$fill" extents 300 a.img
run 0 "$tinyfs" list --btree extents a.img
[ "$(wc -l <out)" = 300 ] || fail "expected 300 keys, got $(wc -l <out)"
has out "cookie 1:0 u64s 4: 0001020304050607" && has out "cookie 1:299 u64s 4: 2b2c2d2e2f303132"
hasnt out "btree extents:"
run 0 "$tinyfs" list --btree extents --start 1:10 --end 1:12 a.img
[ "$(cat out)" = "cookie 1:10 u64s 4: 0a0b0c0d0e0f1011
cookie 1:11 u64s 4: 0b0c0d0e0f101112
cookie 1:12 u64s 4: 0c0d0e0f10111213" ] || fail "range 1:10..1:12: $(cat out)"
run 0 "$tinyfs" list --btree dirents a.img && [ ! -s out ] || fail "dirents not empty"
run 0 "$tinyfs" list --start 1:298 a.img && has out "btree inodes:" && has out "cookie 1:299"
hasnt out "cookie 1:297"

# 3. Keys only in the journal (no clean stop): replayed in memory; nothing written.
run 0 "$fill" xattrs 25 nostop a.img
sum=$(md5sum a.img)
run 0 "$tinyfs" list --btree xattrs a.img
[ "$(wc -l <out)" = 25 ] || fail "expected 25 replayed keys, got $(wc -l <out)"
[ "$(md5sum a.img)" = "$sum" ] || fail "list changed the image"

# 4. Large values: a tree taller than one node, read back from disk.
run 0 "$fill" inodes 200 2000 a.img
run 0 "$tinyfs" list --btree inodes --start 1:199 a.img && has out "cookie 1:199 u64s 253: c7c8c9"

# 5. Usage errors.
run 2 "$tinyfs" list
run 2 "$tinyfs" list --btree nope a.img && has err "unknown btree"
run 2 "$tinyfs" list --start x a.img && has err "bad --start"
run 2 "$tinyfs" list --start 5 --end 4 a.img && has err "after --end"

# 6. Bad images: a clear message, exit 1, never a crash.
run 1 "$tinyfs" list nonexistent.img
run 0 "$mkfs" -q --size 32M m0.img m1.img
run 1 "$tinyfs" list m0.img && has err "member 1" && has err "missing"
run 0 "$tinyfs" list m0.img m1.img
: >empty.img
run 1 "$tinyfs" list empty.img
# A node that fails its checksum: named, exit 1.  Old copies of the last
# inodes leaf stay on disk (copy-on-write): corrupt every one, so the current one is.
cp a.img c.img
n=$(python3 - c.img <<'PY'
import struct, sys
f = open(sys.argv[1], 'r+b')
d = f.read()
n = 0
for o in range(0, len(d) - 96, 4096):
    if d[o + 24] == 0 and d[o + 25] == 0 and struct.unpack_from('<H', d, o + 26)[0] == 1 \
       and struct.unpack_from('<QQ', d, o + 56) == (2**64 - 1, 2**64 - 1) \
       and struct.unpack_from('<I', d, o + 28)[0] > 0:
        f.seek(o + 200)
        f.write(bytes([d[o + 200] ^ 0x5a]))
        n += 1
print(n)
PY
)
[ "$n" -gt 0 ] || fail "no inodes leaf found in c.img"
run 1 "$tinyfs" list --btree inodes c.img
has err "btree inodes level 0 node at 0x" && has err "bad checksum"
run 1 "$tinyfs" list --fault "dev * read tag=btree every=1 fail=EIO" --btree inodes a.img
has err "read failed"

[ "$fails" = 0 ] && echo "all list checks passed"
exit $((fails > 0))
