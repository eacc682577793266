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
hasnt err "bdev_vanished:"
# Every line of a multi-line reason names the tool.
grep -v "^tinyfs: fault:" err | grep -qv "^tinyfs show-super: " && fail "an error line without the tool's name"
run 1 "$tinyfs" list-journal --fault 'dev * read tag=journal nth=2 fail=EIO' a.img
hasnt err "(journal_read)"

# 2. An allocation failing while the output is built: either the whole
#    output and exit 0, or no partial line, exit 1 and "out of memory".
#    Every printbuf allocation of a run is made to fail in turn.
export SOURCE_DATE_EPOCH=1700000000
uuid=0f4e6c2a-1b3d-4e5f-8a9b-0c1d2e3f4a5b
run 0 "$mkfs" --size 8M -L oom -U $uuid ref.img && cp out mkfs.ref
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

[ "$fails" = 0 ] && echo "all show-super checks passed"
exit $((fails > 0))
