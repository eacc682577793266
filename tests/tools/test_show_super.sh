#!/usr/bin/env bash
# tinyfs show-super (and the other tools' error paths) as a user meets them.
#   test_show_super.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

run 0 "$mkfs" -q --size 8M -L demo a.img

# 1. Open and I/O failures are printed once, without internal code names.
run 1 "$tinyfs" show-super "$tmp"
[ "$(wc -l <err)" = 1 ] || fail "show-super DIR: $(wc -l <err) lines of errors"
has err "not a block device or regular file" && hasnt err "invalid_argument"
run 1 "$tinyfs" show-super nosuch.img
[ "$(wc -l <err)" = 1 ] || fail "show-super nosuch.img: $(wc -l <err) lines of errors"
has err "nosuch.img: cannot open: No such file or directory"
run 1 "$tinyfs" list-journal "$tmp"
[ "$(wc -l <err)" = 1 ] || fail "list-journal DIR: $(wc -l <err) lines of errors"
hasnt err "invalid_argument"
# The device vanishes at the primary's read: the backup's read fails too,
# and each failure is one line (the fault device's own line aside).
run 1 "$tinyfs" show-super --fault 'dev * read nth=2 vanish' a.img
[ "$(grep -c 36864 err)" = 1 ] || fail "the backup's read failure is printed $(grep -c 36864 err) times"
[ "$(grep -c 'superblock at 4096' err)" = 1 ] || fail "the primary's read failure is not printed once"
hasnt err "bdev_vanished:" && has err "superblock at 36864: read failed: No such device (bdev_vanished)"
# Every line of a multi-line reason names the tool.
grep -v "^tinyfs: fault:" err | grep -qv "^tinyfs show-super: " && fail "an error line without the tool's name"
run 1 "$tinyfs" list-journal --fault 'dev * read tag=journal nth=2 fail=EIO' a.img
hasnt err "(journal_read)"

# 2. An allocation failing while the output is built: either the whole
#    output and exit 0, or no partial line, exit 1 and "out of memory".
#    Every printbuf allocation of a run is made to fail in turn.
export SOURCE_DATE_EPOCH=1700000000
uuid=0f4e6c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b
# Made as o.img, the name every run below uses, so the summaries compare.
run 0 "$mkfs" --size 8M -L oom -U $uuid o.img && cp out mkfs.ref && mv o.img ref.img
run 0 "$tinyfs" show-super -f all -l ref.img && cp out show.ref
for tool in mkfs show; do
	for n in $(seq 1 200); do
		rm -f o.img
		if [ $tool = mkfs ]; then
			"$mkfs" --fault "point alloc:printbuf nth=$n" --size 8M -L oom -U $uuid o.img \
				>out 2>err
		else
			"$tinyfs" show-super --fault "point alloc:printbuf nth=$n" -f all -l ref.img \
				>out 2>err
		fi
		st=$?
		grep -q "fault point alloc:printbuf fired" err || break
		if [ $st = 0 ]; then
			cmp -s out $tool.ref || fail "$tool, allocation $n failing: exit 0 with other output"
		else
			[ $tool = show ] && [ -s out ] && fail "show-super, allocation $n failing: partial output"
			{ ! cmp -s out <(head -c "$(stat -c %s out)" $tool.ref) || [ -n "$(tail -c1 out)" ]; } &&
				fail "$tool, allocation $n failing: a cut line"
			has err "out of memory"
		fi
	done
	[ "$n" -gt 1 ] || fail "$tool: no allocation was made to fail"
done
unset SOURCE_DATE_EPOCH

# 3. What show-super shows: the device, magic, features, the fields present;
#    with -l each copy's state; every value in one column, however nested.
run 0 "$tinyfs" show-super a.img
has out "Device:" && grep -q "^Device: *a.img$" out || fail "no Device: a.img line"
grep -q "^Magic: *0x3142535346594e54$" out || fail "no Magic line"
grep -q "^Features: *none$" out || fail "no Features line"
grep -q "^Fields: *members (.* u64s), journal (.* u64s), clean (.* u64s)$" out || fail "no Fields line"
run 0 "$tinyfs" show-super -f all -l a.img
grep -q "^  Copy 0: .*at 4096 (4.0 KiB), primary: valid, seq 2, in use$" out || fail "copy 0 state"
grep -q "^  Copy 1: .*at 36864 (36.0 KiB): valid, seq 2$" out || fail "copy 1 state"
cols=$(grep -E '^ *[A-Z][A-Za-z0-9 ]*: +[^ ]' out | awk '{ match($0, /: +/); print RSTART + RLENGTH }' | sort -u)
[ "$(echo "$cols" | wc -l)" = 1 ] || { fail "values in several columns: $(echo $cols)"; cat out; }
run 0 "$tinyfs" show-super --json -f all -l a.img
python3 - out <<'PY' || fail "show-super --json lacks device, magic, features, fields or copies"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "a.img" and d["magic"] == "0x3142535346594e54" and d["features"] == 0
assert [f["type"] for f in d["fields"]] == ["members", "journal", "clean"]
c = d["layout"]["copies"]
assert c[0] == {"offset": 4096, "valid": True, "seq": 2, "in_use": True}, c
assert c[1]["valid"] and c[1]["seq"] == 2 and not c[1]["in_use"], c
PY

# 4. A bad copy: its state with -l; --copy N (--backup) shows one copy; with
#    --force a copy that fails validation is shown after the reason (exit 1).
cp a.img b.img
printf '\xff' | dd of=b.img bs=1 seek=$((4096 + 70)) conv=notrunc status=none
run 0 "$tinyfs" show-super -l b.img
grep -q "^  Copy 0: .*primary: bad: checksum 0x.*, computed 0x" out || fail "copy 0 bad state"
grep -q "^  Copy 1: .*: valid, seq 2, in use$" out || fail "copy 1 in use"
run 0 "$tinyfs" show-super --backup b.img && grep -q "^Label: *demo$" out || fail "--backup"
run 0 "$tinyfs" show-super --copy 1 b.img && grep -q "^Label: *demo$" out || fail "--copy 1"
run 1 "$tinyfs" show-super --copy 0 b.img && has err "superblock at 4096: checksum" && [ ! -s out ] ||
	fail "--copy 0 of a bad copy printed something"
run 1 "$tinyfs" show-super --copy 0 --force b.img && has err "superblock at 4096: checksum" &&
	grep -q "^Label: *demo$" out || fail "--copy 0 --force"
run 1 "$tinyfs" show-super --copy 2 b.img && has err "copy 2: the layout lists 2 copies (0 and 1)"
run 2 "$tinyfs" show-super --copy x b.img
# No valid copy: refused; --force shows the primary anyway, after the reasons.
printf '\xff' | dd of=b.img bs=1 seek=$((36864 + 70)) conv=notrunc status=none
run 1 "$tinyfs" show-super b.img && [ ! -s out ] || fail "no valid copy: output"
run 1 "$tinyfs" show-super -F -f all -l b.img && has err "superblock at 4096: checksum" &&
	has err "superblock at 36864: checksum" && has out "Members (1):" &&
	grep -q "^Label: *demo$" out || fail "-F with no valid copy"
grep -q "^  Copy 0: .*primary: bad: checksum.*shown$" out || fail "-F: the copy shown"

[ "$fails" = 0 ] && echo "all show-super checks passed"
exit $((fails > 0))
