#!/usr/bin/env bash
# tinyfs list-journal, run as a user would, on journals journal_fill wrote.
#   test_list_journal.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
fill=$build/tests/tools/journal_fill

# 1. A fresh filesystem: mkfs's own entries (its empty btrees' roots), nothing corrupt.
run 0 "$mkfs" -q --size 32M a.img
run 0 "$tinyfs" list-journal a.img && has out " (0 corrupt)" && has out "replay:"
base=$(sed -n 's/^highest seq: *//p' out)

# 2. Entries: seq, flags, sizes, sub-entries; the summary.
run 0 "$fill" 12 0 a.img && last=$(cat out)
run 0 "$tinyfs" list-journal a.img
has out "replay:             $base..$last"
has out "seq 1 last_seq 1 flags flush"
has out "btree_keys btree 1 level 0: 1 keys, 2 u64s"
has out "btree_root btree 2 level 1: 1 keys, 2 u64s"
has out "usage kind 1 dev 0: 4096"
has out "dev 0:"

# 3. --seq filters; bad ranges are usage errors.
run 0 "$tinyfs" list-journal --seq 2..3 a.img
has out "seq 2 last_seq" && has out "seq 3 last_seq" && hasnt out "seq 1 last_seq" && hasnt out "seq 4 last_seq"
run 0 "$tinyfs" list-journal --seq 3.. a.img && has out "seq $last last_seq" && hasnt out "seq 2 last_seq"
run 0 "$tinyfs" list-journal --seq ..1 a.img && has out "seq 1 last_seq" && hasnt out "seq 2 last_seq"
run 2 "$tinyfs" list-journal --seq 5..2 a.img && has err "bad --seq"
run 2 "$tinyfs" list-journal --seq x a.img
run 2 "$tinyfs" list-journal --seq 0 a.img && has err "bad --seq"
run 2 "$tinyfs" list-journal --seq ..0 a.img
run 0 "$tinyfs" list-journal --seq 2 a.img && has out "seq 2 last_seq" && hasnt out "seq 3 last_seq"
run 2 "$tinyfs" list-journal
run 1 "$tinyfs" list-journal nonexistent.img

# 4. A NO_FLUSH tail never flushed: listed, marked, not replayed; the next
#    run continues after it and blacklists it.
run 0 "$fill" 3 2 a.img
run 0 "$tinyfs" list-journal a.img
has out "[after the newest flush entry: not replayed]" && has out "not trusted:"
run 0 "$fill" 2 0 a.img
run 0 "$tinyfs" list-journal a.img && has out "[blacklisted]" && has out "blacklist "

# 5. Two members, two replicas: each entry on both.
run 0 "$mkfs" -q --size 32M --metadata-replicas 2 m0.img m1.img
run 0 "$tinyfs" list-journal m0.img m1.img && mbase=$(sed -n 's/^highest seq: *//p' out)
run 0 "$fill" 4 0 m0.img m1.img
run 0 "$tinyfs" list-journal m0.img m1.img && has out "dev 1:" && has out "on dev 0,1: seq $((mbase + 1)) "
run 1 "$tinyfs" list-journal m0.img m0.img && has err "both member 0"
run 0 "$tinyfs" list-journal m1.img && has out "on dev 1: seq $((mbase + 1)) "

# 6. A corrupt entry: reported with device, bucket and offset; exit 1.
run 0 "$mkfs" -q --size 32M c.img
run 0 "$tinyfs" list-journal c.img && cseq=$(( $(sed -n 's/^highest seq: *//p' out) + 2 ))
run 0 "$fill" 12 0 c.img
# Find seq $cseq (in the replay range): the first entry (seq 1, last_seq 1) gives the magic.
off=$(python3 - c.img $cseq <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
first = next(o for o in range(0, len(d), 4096) if struct.unpack_from('<QQ', d, o + 16) == (1, 1))
magic = d[first + 8:first + 16]
print(next(o + 24 for o in range(first + 4096, len(d), 4096)
           if d[o + 8:o + 16] == magic and struct.unpack_from('<Q', d, o + 16)[0] == int(sys.argv[2])))
PY
)
if [ -n "$off" ]; then
	printf '\x77' | dd of=c.img bs=1 seek="$off" conv=notrunc status=none
	run 1 "$tinyfs" list-journal c.img
	has err "corrupt entry: seq $cseq: bad checksum" && has err "bucket " && has err "offset "
	has err "seqs $cseq..$cseq missing"
else
	fail "could not find seq $cseq in c.img"
fi

# 7. --fault: a failing journal read is reported; a bad spec is a usage error.
run 1 "$tinyfs" list-journal --fault "dev * read tag=journal every=1 fail=EIO" a.img
has err "no device could be read"
# One unreadable bucket fails the read too (entries may be missing), naming it.
run 1 "$tinyfs" list-journal --fault "dev * read tag=journal nth=2 fail=EIO" a.img
has err "dev 0: bucket 1 unreadable" && hasnt out "replay:"
run 2 "$tinyfs" list-journal --fault "dev * bogus" a.img && has err "--fault"

[ "$fails" = 0 ] && echo "all list-journal checks passed"
exit $((fails > 0))
