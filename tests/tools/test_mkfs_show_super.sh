#!/usr/bin/env bash
# mkfs.tinyfs and tinyfs show-super, run as a user would.
#   test_mkfs_show_super.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

uuid=0f4e6c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b

# 1. mkfs then show-super.
run 0 "$mkfs" --size 64M -L demo a.img && has out "a.img: member 0 of 1, 64.0 MiB"
run 0 "$tinyfs" show-super a.img && has out "Label:                    demo" && has out "Members (1):"
run 0 "$tinyfs" show-super -f all -l a.img && has out "Journal:" && has out "Copy 1:"

# 2. --json is valid JSON with the right values.
run 0 "$tinyfs" show-super --json -f all -l a.img
python3 -m json.tool out >/dev/null || fail "show-super --json is not valid JSON (python3)"
if command -v jq >/dev/null; then
	[ "$(jq -r .label out)" = demo ] || fail "jq: label"
	[ "$(jq -r '.members[0].bucket_size' out)" = 131072 ] || fail "jq: bucket_size"
	[ "$(jq -r '.journal_nr_buckets' out)" = 8 ] || fail "jq: journal buckets"
fi

# 3. Reproducible with --uuid and SOURCE_DATE_EPOCH.
SOURCE_DATE_EPOCH=1234567890 run 0 "$mkfs" -q --size 8M -U $uuid r1.img
SOURCE_DATE_EPOCH=1234567890 run 0 "$mkfs" -q --size 8M -U $uuid r2.img
cmp -s r1.img r2.img || fail "two mkfs with the same uuid and time differ"
[ ! -s out ] || fail "-q printed something"

# 4. An ext4 image: refused without --force (naming ext4), wiped with it.
if command -v mkfs.ext4 >/dev/null; then
	truncate -s 8M e.img
	mkfs.ext4 -q -F -L extlabel e.img >/dev/null 2>&1
	before=$(sha256sum <e.img)
	run 1 "$mkfs" e.img && has err "contains an existing ext4 filesystem (label \"extlabel\", uuid " &&
		has err "use --force"
	[ "$(sha256sum <e.img)" = "$before" ] || fail "a refused mkfs changed the ext4 image"
	run 0 "$mkfs" --force e.img && has out "wiped the ext4 signature"
	blkid -p e.img 2>/dev/null | grep -q ext4 && fail "ext4 signature still there after --force"
	run 0 "$tinyfs" show-super e.img
else
	echo "note: no mkfs.ext4, ext4 case skipped"
fi

# 5. A tinyfs is refused too, naming it.
run 1 "$mkfs" a.img && has err "contains an existing tinyfs filesystem (label \"demo\""

# 6. Several members with per-device options.
run 0 "$mkfs" -L multi --metadata-replicas 2 --size 16M --durability 2 --dev-label fast m0.img \
	--dev-label slow --durability 1 --discard m1.img m2.img
for i in 0 1 2; do
	run 0 "$tinyfs" show-super --json m$i.img
	[ "$(jq -r .dev_idx out)" = $i ] || fail "m$i.img: dev_idx"
	[ "$(jq -r .nr_devices out)" = 3 ] || fail "m$i.img: nr_devices"
	[ "$(jq -r '[.members[].durability] | join(",")' out)" = 2,1,1 ] || fail "m$i: durability"
	[ "$(jq -r '[.members[].label] | join(",")' out)" = fast,slow,slow ] || fail "m$i: labels"
	[ "$(jq -r '.members[1].discard' out)" = true ] || fail "m$i: discard"
	[ "$(jq -r .metadata_replicas out)" = 2 ] || fail "m$i: replicas"
done

# 7. Bad options: exit 2 with a message.
run 2 "$mkfs" --bogus x.img && has err "unrecognized option"
run 2 "$mkfs" && has err "no device or image given"
run 2 "$mkfs" --size 12Q x.img && has err "--size \"12Q\": not a size"
run 2 "$mkfs" --size 8M --block-size 3000 x.img && has err "block size 3000 must be a power of two"
run 2 "$mkfs" --size 8M --durability 9 x.img && has err "--durability \"9\": must be 0 to 4"
run 2 "$mkfs" --size 8M --metadata-replicas 2 x.img && has err "metadata replicas 2: must be 1 to 1"
run 2 "$mkfs" x.img --durability 1 && has err "device options after the last device"
run 2 "$mkfs" -U not-a-uuid --size 8M x.img && has err "not a uuid"
run 2 "$mkfs" --size 8M --journal-size 7M x.img && has err "journal size 7.0 MiB is 448 buckets of 16.0 KiB; it must be 8 to 253"
[ -e x.img ] && fail "a failed mkfs left x.img behind"
run 1 "$mkfs" --size 256K x.img && has err "x.img: 256.0 KiB is too small"
run 2 "$mkfs" --size 8M --block-size 0 x.img && has err "--block-size \"0\": must not be 0"
run 2 "$mkfs" --size 8M a0.img --size 4T --bucket-size 4k --journal-size 1T huge.img &&
	has err "huge.img: journal size"
run 1 "$mkfs" nosuch.img && has err "no such file (give --size"
run 2 "$tinyfs" && has err "usage: tinyfs COMMAND"
run 2 "$tinyfs" frobnicate && has err "unknown command \"frobnicate\""
run 0 "$tinyfs" --help && has out "show-super"
run 0 "$mkfs" --help && has out "reusing a UUID gives identical ones"
run 2 "$tinyfs" show-super && has err "no device given"
run 2 "$tinyfs" show-super -f nope a.img && has err "unknown field \"nope\""
run 1 "$tinyfs" show-super nosuch.img && has err "nosuch.img"
run 2 "$mkfs" --fault "point nosuch:point oneshot" --size 8M x.img && has err "--fault"

# 8. A failed mkfs leaves an existing image's bytes untouched.
head -c 4194304 /dev/urandom >rand.img
before=$(sha256sum <rand.img)
run 2 "$mkfs" --journal-size 3M rand.img
run 1 "$mkfs" --bucket-size 1M rand.img
run 2 "$mkfs" --size 8M --block-size 1K --bucket-size 512 rand.img
[ "$(sha256sum <rand.img)" = "$before" ] || fail "a failed mkfs changed rand.img"
[ "$(stat -c %s rand.img)" = 4194304 ] || fail "a failed mkfs resized rand.img"

# 9. Faults reach the tools: the primary copy's write (the 2nd sb write there,
#    after zeroing) fails, it is reported with its offset, and the backup is
#    then not written either (a device whose primary failed keeps its old
#    backup; here there was none, so no copy is valid).
truncate -s 8M f.img
run 1 "$mkfs" --fault "dev * write tag=sb range=4096-8192 nth=2 fail=EIO" f.img &&
	has err "writing superblock copy 0 at 4096" && has err "reproduce with TFS_FAULTS="
run 1 "$tinyfs" show-super f.img && has err "superblock at 4096: bad magic" &&
	has err "superblock at 36864: bad magic"
TFS_FAULTS="dev * read tag=sb range=4096-8192 fail=EIO" run 0 "$tinyfs" show-super a.img &&
	has err "using the copy at 36864"

# 10. The same file under two names (path, ./path, symlink, hard link): exit 2
#     naming both, nothing written.
truncate -s 16M d.img
ln -s d.img d-sym.img
ln d.img d-hard.img
for other in ./d.img d-sym.img d-hard.img "$tmp/d.img"; do
	run 2 "$mkfs" d.img "$other" && has err "d.img" && has err "$other" && has err "same file"
	cmp -s d.img <(head -c 16M /dev/zero) || fail "mkfs d.img $other wrote d.img"
done
run 2 "$mkfs" --size 16M n.img ./n.img && has err "same file"
[ -e n.img ] && fail "a refused mkfs left n.img behind"

# 11. Large devices: a sparse 1 TiB image with the defaults, and journals
#     past the one limit (TFS_JOURNAL_MAX_BUCKETS) refused at once.
if truncate -s 1T big.img 2>/dev/null; then
	run 0 "$mkfs" big.img && has out "big.img: member 0 of 1, 1.0 TiB"
	run 0 "$tinyfs" show-super --json -f all big.img
	[ "$(jq -r '.members[0].bucket_size' out)" = 262144 ] || fail "1 TiB: bucket_size"
	[ "$(jq -r '.journal_nr_buckets' out)" = 1024 ] || fail "1 TiB: journal buckets"
	[ "$(jq -r '.members[0].nbuckets' out)" = 4194304 ] || fail "1 TiB: nbuckets"
	rm -f big.img
else
	echo "note: cannot make a sparse 1 TiB file here, large-device case skipped"
fi
run 2 "$mkfs" --size 4T --bucket-size 4k --journal-size 1T huge.img &&
	has err "a journal has at most 1048576 buckets"
[ -e huge.img ] && fail "a refused mkfs left huge.img behind"
run 2 "$mkfs" --size 64G --bucket-size 16k --journal-size 20G huge.img &&
	has err "journal size 20.0 GiB is 1310720 buckets of 16.0 KiB; a journal has at most"

# 12. Labels are UTF-8 without control characters: others exit 2 naming the
#     option; a valid non-ASCII label comes out as valid JSON.
run 2 "$mkfs" --size 8M -L $'\xff"q\\' x.img && has err "--label: byte 0 (0xff)"
run 2 "$mkfs" --size 8M -L $'a\tb' x.img && has err "--label: byte 1 (0x09)"
run 2 "$mkfs" --size 8M -L $'\xc2\x85' x.img && has err "--label"
run 2 "$mkfs" --size 8M --dev-label $'\xe9t\xe9' x.img && has err "--dev-label: byte 0 (0xe9)"
[ -e x.img ] && fail "a refused mkfs left x.img behind"
run 0 "$mkfs" -q --size 8M -L $'caf\xc3\xa9 "q"\\' --dev-label $'\xe2\x82\xac' u.img
run 0 "$tinyfs" show-super --json u.img
python3 -c 'import json,sys; d=json.load(open("out", encoding="utf-8", errors="strict")); sys.exit(d["label"] != "caf\u00e9 \"q\"\\" or d["members"][0]["label"] != "\u20ac")' ||
	fail "show-super --json: label not valid UTF-8 JSON or wrong"

[ $fails = 0 ] && echo "all tool tests passed"
exit $((fails > 0))
