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

[ "$fails" = 0 ] && echo "all show-super checks passed"
exit $((fails > 0))
