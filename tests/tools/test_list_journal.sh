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
# Only some members: what they hold is printed, the missing ones are named
# (the superblock knows them), exit 1.
run 1 "$tinyfs" list-journal m1.img && has out "on dev 1: seq $((mbase + 1)) " &&
	has err "member 0 (uuid " && has err "not given: the journal shown may be incomplete"
hasnt err "member 1 ("
run 0 "$mkfs" -q --size 32M --metadata-replicas 2 --dev-label x n0.img n1.img --dev-label y n2.img
run 1 "$tinyfs" list-journal n1.img && has err "members 0 (uuid " && has err "label \"x\")" &&
	has err "2 (uuid " && has err "label \"y\")"
run 1 "$tinyfs" list-journal n0.img n2.img && has err "member 1 (uuid " && hasnt err "member 0"

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
	# Messages name the bucket by its number and give its index in the ring
	# apart: the journal of a 32 MiB image starts at bucket 2 (64 KiB buckets).
	where="bucket $(((off - 24) / 65536)) (ring index $(((off - 24) / 65536 - 2))) offset $(((off - 24) % 65536))"
	cp c.img c0.img
	printf '\x77' | dd of=c.img bs=1 seek="$off" conv=notrunc status=none
	run 1 "$tinyfs" list-journal c.img
	has err "corrupt entry: seq $cseq: bad checksum" && has err "dev 0 (c.img) $where: corrupt entry"
	has err "seqs $cseq..$cseq missing"
	# A field out of range, checksum fixed: the message says which field, and
	# only that one.
	for f in "32 <I 9 seq $cseq: version 9, expected 1" "36 <I 16 seq $cseq: unknown flags 0x10" \
		"24 <Q $((cseq + 1)) seq $cseq: last_seq $((cseq + 1)) > seq $cseq" "16 <Q 0 seq 0: seqs start at 1"; do
		set -- $f
		cp c0.img c.img
		python3 - c.img "$((off - 24))" "$1" "$2" "$3" <<'PY'
import struct, sys
path, base, field, fmt, val = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
d = bytearray(open(path, 'rb').read())
struct.pack_into(fmt, d, base + field, val)
def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
(u64s,) = struct.unpack_from('<I', d, base + 40)
struct.pack_into('<Q', d, base, crc32c(d[base + 8:base + 48 + 8 * u64s]))
open(path, 'wb').write(d)
PY
		shift 3
		run 1 "$tinyfs" list-journal c.img && has err "corrupt entry: $*"
		case "$*" in version*) ;; *) hasnt err "version 1" ;; esac
		case "$*" in *flags*) ;; *) hasnt err "flags" ;; esac
	done
else
	fail "could not find seq $cseq in c.img"
fi

# 7. --fault: a failing journal read is reported; a bad spec is a usage error.
run 1 "$tinyfs" list-journal --fault "dev * read tag=journal every=1 fail=EIO" a.img
has err "no device could be read"
# One unreadable bucket fails the read too (entries may be missing), naming it.
run 1 "$tinyfs" list-journal --fault "dev * read tag=journal nth=2 fail=EIO" a.img
has err "reading bucket 3 (ring index 1) failed" && has err "dev 0: ring index 1 unreadable" &&
	hasnt out "replay:"
# Where the next entry goes: a ring index, said so.
run 0 "$tinyfs" list-journal a.img && has out "next write at ring index " && hasnt out "write bucket"
run 2 "$tinyfs" list-journal --fault "dev * bogus" a.img && has err "--fault"

[ "$fails" = 0 ] && echo "all list-journal checks passed"
exit $((fails > 0))
