#!/usr/bin/env bash
# mkfs.tinyfs options as a new user types them: sizes, limits, versions.
#   test_mkfs_options.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

# 1. Size units are case-insensitive; a bad one lists the accepted forms;
#    one that does not fit says so.
for s in 64M 64m 64MiB 64mib 65536k 65536K 65536KiB 65536kiB; do
	run 0 "$mkfs" -q --size "$s" s.img && [ "$(stat -c %s s.img)" = 67108864 ] ||
		fail "--size $s: not 64 MiB"
	rm -f s.img
done
run 0 "$mkfs" -q --size 1g s.img && [ "$(stat -c %s s.img)" = 1073741824 ] || fail "--size 1g"
rm -f s.img
run 0 "$mkfs" -q --size 64MB s.img && [ "$(stat -c %s s.img)" = 64000000 ] || fail "--size 64MB"
rm -f s.img
run 0 "$mkfs" -q --size 64mb s.img && [ "$(stat -c %s s.img)" = 64000000 ] || fail "--size 64mb"
rm -f s.img
run 2 "$mkfs" --size 12Q x.img && has err '--size "12Q": not a size' && has err "KiB" &&
	has err "case does not matter"
run 2 "$mkfs" --size 8E x.img && has err '--size "8E": too large'
run 2 "$mkfs" --size 20000000000000000000 x.img && has err "too large"
run 2 "$mkfs" --size 16E x.img && has err "too large"
run 2 "$mkfs" --size 8M --bucket-size 8g x.img && has err '--bucket-size "8g": too large'
[ -e x.img ] && fail "a refused mkfs left x.img behind"
# A size the file system holding the image cannot take: in units, not raw bytes.
if ! truncate -s 16T t.img 2>/dev/null; then
	run 1 "$mkfs" --size 16T x.img && has err "16.0 TiB" && hasnt err "17592186044416"
fi
rm -f t.img

# 2. --version on both tools; getopt's messages carry the tool's name, not its path.
run 0 "$mkfs" --version && has out "mkfs.tinyfs 0." && has out "format version"
run 0 "$mkfs" -V && has out "mkfs.tinyfs 0."
run 0 "$tinyfs" --version && has out "tinyfs 0." && has out "format version"
run 2 "$mkfs" --bogus x.img && grep -q "^mkfs.tinyfs: unrecognized option '--bogus'" err ||
	fail "mkfs getopt message: $(head -1 err)"
for cmd in show-super list-journal; do
	run 2 "$tinyfs" $cmd --bogus x.img &&
		grep -q "^tinyfs $cmd: unrecognized option '--bogus'" err ||
		fail "$cmd getopt message: $(head -1 err)"
done
run 2 "$mkfs" --size && grep -q "^mkfs.tinyfs: option '--size' requires an argument" err ||
	fail "mkfs missing argument: $(head -1 err)"

# 3. Replicas that can never be met: every member a cache (durability 0), or
#    less durability in all than the replicas required.  Refused, nothing made.
run 2 "$mkfs" --size 16M --durability 0 --metadata-replicas 2 --data-replicas 2 \
	--metadata-replicas-required 2 --data-replicas-required 2 d0.img d1.img &&
	has err "metadata replicas required 2" && has err "durability of every member adds up to 0"
run 2 "$mkfs" --size 16M --durability 0 d0.img && has err "replicas required 1"
run 2 "$mkfs" --size 16M --data-replicas 2 --data-replicas-required 2 --durability 1 d0.img \
	--durability 0 d1.img && has err "data replicas required 2" && has err "adds up to 1"
[ -e d0.img ] || [ -e d1.img ] && fail "a refused mkfs left d0.img or d1.img behind"
rm -f d0.img d1.img
# A durability-2 member alone can hold two replicas; a cache beside it is fine.
run 0 "$mkfs" -q --size 16M --metadata-replicas 2 --metadata-replicas-required 2 \
	--durability 2 d0.img --durability 0 d1.img
rm -f d0.img d1.img

# 4. Members: as many as the journal handles (16), no more; 16 format and
#    their journal lists.
devs17=$(for i in $(seq 0 16); do echo "m$i.img"; done)
run 2 "$mkfs" --size 1M $devs17 && has err "17 devices: must be 1 to 16"
[ -e m0.img ] && fail "a refused mkfs left m0.img behind"
run 0 "$mkfs" -q --size 1M $(echo "$devs17" | head -16)
run 0 "$tinyfs" list-journal $(echo "$devs17" | head -16) && has out "dev 15:"
rm -f m*.img

# 5. The btree node size: 64 KiB, or the smallest bucket when that is
#    smaller; --btree-node-size takes a power of two from 16 KiB to 256 KiB,
#    at least the block size, dividing every member's bucket size.
run 0 "$mkfs" -q --size 64M n.img && run 0 "$tinyfs" show-super n.img &&
	grep -q "^Btree node size: *64.0 KiB$" out || fail "default node size (128 KiB buckets)"
run 0 "$tinyfs" show-super --json n.img && [ "$(jq -r .btree_node_size out)" = 65536 ] ||
	fail "json btree_node_size"
run 0 "$mkfs" -q -f --size 8M n.img && run 0 "$tinyfs" show-super n.img &&
	grep -q "^Btree node size: *16.0 KiB$" out || fail "default node size (16 KiB buckets)"
run 0 "$mkfs" -f --size 64M --btree-node-size 128k n.img && has out "btree node size 128.0 KiB" &&
	run 0 "$tinyfs" show-super n.img &&
	grep -q "^Btree node size: *128.0 KiB$" out || fail "--btree-node-size 128k"
run 0 "$mkfs" -q -f --size 64M --btree-node-size 16k n.img
rm -f n.img
run 2 "$mkfs" --size 64M --btree-node-size 3000 x.img &&
	has err "btree node size 3000 must be a power of two from 16.0 KiB to 256.0 KiB"
run 2 "$mkfs" --size 64M --btree-node-size 2k x.img && has err "from 16.0 KiB to 256.0 KiB"
run 2 "$mkfs" --size 64M --btree-node-size 512k x.img && has err "too large"
run 2 "$mkfs" --size 64M --block-size 64k --btree-node-size 32k x.img &&
	has err "btree node size 32.0 KiB is smaller than the block size 64.0 KiB"
run 2 "$mkfs" --size 64M --btree-node-size 128k x.img --bucket-size 64k y.img &&
	has err "btree node size 128.0 KiB does not divide the bucket size 64.0 KiB of y.img"
run 2 "$mkfs" --size 64M --block-size 1k --bucket-size 2k x.img &&
	has err "the bucket size 2.0 KiB of x.img is below the smallest btree node size 16.0 KiB"
[ -e x.img ] || [ -e y.img ] && fail "a refused mkfs left x.img or y.img behind"

# 6. Journals of more than 2048 buckets (the journal field lists ranges).
run 0 "$mkfs" -q --size 96M --bucket-size 16k --journal-size 33M j.img
run 0 "$tinyfs" show-super --json -f journal j.img
[ "$(jq -r .journal_nr_buckets out)" = 2112 ] || fail "2112 journal buckets: $(jq -c .journal_ranges out)"
[ "$(jq -c .journal_ranges out)" = '[{"start":5,"nr":2112}]' ] || fail "journal ranges"
run 0 "$tinyfs" list-journal j.img && has out "entries:"
rm -f j.img

[ "$fails" = 0 ] && echo "all mkfs option checks passed"
exit $((fails > 0))
