#!/usr/bin/env bash
# tinyfs fsck of a filesystem with a member missing (replicas=2): refused
# without --degraded (exit 8, naming the member and the way out); with
# --degraded (or -o degraded, as bcachefs fsck takes mount options) checked
# and repaired with what is there, saying what could not be checked; the
# member back, the whole set is clean.  Damage found and repaired while
# degraded is tests/unit/test_fsck.c's test_degraded_repair.
#   test_fsck_degraded.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
sum() { sha256sum <"$1"; }

truncate -s 64M a.img b.img
run 0 "$mkfs" -q --metadata-replicas 2 --data-replicas 2 a.img --dev-label b b.img
run 0 "$tinyfs" fsck -n a.img b.img && has err "clean"
mv b.img b.away

# Without --degraded: today's clear refusal, exit 8, naming the member and the way out.
run 8 "$tinyfs" fsck -n a.img
has err 'member 1 (uuid ' && has err 'label "b") is missing'
has err "fsck --degraded"
run 8 "$tinyfs" fsck -y a.img && has err "fsck --degraded"

# -n --degraded: checked, nothing written, what was not checked said.
before=$(sum a.img)
run 0 "$tinyfs" fsck -n --degraded a.img
has err "member 1 is missing: not checked"
has err "clean (degraded"
[ "$(sum a.img)" = "$before" ] || fail "fsck -n --degraded changed the image"
run 0 "$tinyfs" fsck -n -o degraded a.img && has err "member 1 is missing: not checked"
run 0 env TINYFS="$tinyfs" "$build/tools/fsck.tinyfs" -n --degraded a.img
# fsck(8) passes -o degraded on (not --degraded, which it drops silently).
if command -v fsck >/dev/null; then
	mkdir bin && ln -s "$build/tools/fsck.tinyfs" bin/fsck.tinyfs
	run 0 env TINYFS="$tinyfs" PATH="$tmp/bin:$PATH" fsck -t tinyfs -n -o degraded "$tmp/a.img" &&
		has err "member 1 is missing: not checked"
fi
run 16 "$tinyfs" fsck -n -o bogus a.img && has err "bogus"
run 16 "$tinyfs" fsck -n -o a.img
# -y --degraded: repairs what it can (nothing here), writes only the present member.
run 0 "$tinyfs" fsck -y --degraded a.img && has err "member 1 is missing: not checked"
# Every member given: --degraded changes nothing and says nothing of missing members.
mv b.away b.img
run 0 "$tinyfs" fsck -n --degraded a.img b.img && hasnt err "missing"
run 0 "$tinyfs" fsck -n a.img b.img && has err "a.img: clean"

[ "$fails" = 0 ] && echo "all degraded fsck tool checks passed"
exit $((fails > 0))
