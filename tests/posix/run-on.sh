#!/usr/bin/env bash
# Runs the three POSIX proxies (conform, fsx, stress) on any mounted
# filesystem and prints each one's result and the totals, so that ext4,
# fuse2fs and tinyfs can be compared in one go:
#
#	tests/posix/run-on.sh [-q] MOUNTPOINT
#
# Needs root (conform checks permissions as other users).  The programs are
# taken from $TFS_POSIX_BIN, else from a meson build next to the sources
# (build/tests/posix), else compiled from tests/posix/*.c with cc into a
# temporary directory.  TFS_LONG=1 runs the long forms (a minute of stress,
# 100k fsx operations per process).  Extra options per program:
# CONFORM_ARGS, FSX_ARGS, STRESS_ARGS (e.g. FSX_ARGS='-S 1234').  Each
# program's full output goes to $TFS_POSIX_OUT (default: a temporary
# directory, named at the end); -q prints only the summary.
#
# Exit 0 when everything passed, 1 otherwise.
set -u
quiet=0
[ "${1:-}" = -q ] && { quiet=1; shift; }
[ $# = 1 ] || { echo "usage: $0 [-q] MOUNTPOINT" >&2; exit 2; }
mnt=$(cd "$1" && pwd) || exit 2
src=$(cd "$(dirname "$0")" && pwd)
out=${TFS_POSIX_OUT:-$(mktemp -d /tmp/posix-run.XXXXXX)}
mkdir -p "$out"

bin=${TFS_POSIX_BIN:-}
if [ -z "$bin" ]; then
	for b in "$src/../../build/tests/posix" "$src"; do
		[ -x "$b/conform" ] && [ -x "$b/fsx" ] && [ -x "$b/stress" ] && { bin=$b; break; }
	done
fi
if [ -z "$bin" ]; then
	bin=$out/bin
	mkdir -p "$bin"
	for p in conform fsx stress; do
		cc -std=gnu11 -D_GNU_SOURCE -O2 -o "$bin/$p" "$src/$p.c" ||
			{ echo "cannot compile $p.c" >&2; exit 2; }
	done
fi

if [ "${TFS_LONG:-0}" = 1 ]; then
	fsx_n=100000 fsx_multi_n=30000 stress_t=60 stress_p=16
else
	fsx_n=5000 fsx_multi_n=3000 stress_t=5 stress_p=8
fi

tp=0 tf=0 status=0
# run NAME CMD...: runs one program, keeps its output, adds up its last line.
run() {
	local name=$1 line p f rc
	shift
	echo "== $name: $*" >"$out/$name.log"
	"$@" >>"$out/$name.log" 2>&1
	rc=$?
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/$name.log" | tail -1)
	if [ $rc = 77 ]; then
		printf '%-12s skipped: %s\n' "$name" "$(grep -m1 '^skip' "$out/$name.log")"
		return
	fi
	if [ -z "$line" ]; then
		# a crash or a hang is a failure, whatever it printed
		line="0 passed, 1 failed"
		echo "($name exited $rc without a summary)" >>"$out/$name.log"
	fi
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed*}
	[ "$f" = 0 ] && [ $rc = 0 ] || status=1
	[ $rc != 0 ] && [ "$f" = 0 ] && f=1
	tp=$((tp + p)) tf=$((tf + f))
	printf '%-12s %s\n' "$name" "$line"
	[ $quiet = 1 ] || grep -E '^(FAIL|note)' "$out/$name.log" | head -40 | sed 's/^/    /'
}

echo "posix proxies on $mnt ($(findmnt -no FSTYPE,SOURCE --target "$mnt" 2>/dev/null | head -1))"
# shellcheck disable=SC2086
run conform "$bin/conform" ${CONFORM_ARGS:-} "$mnt"
# shellcheck disable=SC2086
run fsx "$bin/fsx" -N $fsx_n -l 1048576 ${FSX_ARGS:-} "$mnt"
# shellcheck disable=SC2086
run fsx-multi "$bin/fsx" -N $fsx_multi_n -p 4 -f 3 ${FSX_ARGS:-} "$mnt"
# shellcheck disable=SC2086
run stress "$bin/stress" -p $stress_p -t $stress_t ${STRESS_ARGS:-} "$mnt"

# The whole mount after all that: every directory readable, and its link
# count 2 + its subdirectories (as find sees them).
tree_check() {
	local bad=0 n nl dir line
	if ! ls -R "$mnt" >/dev/null 2>"$out/ls-R.err"; then
		echo "FAIL ls -R: $(head -3 "$out/ls-R.err")"
		bad=$((bad + 1))
	fi
	declare -A subs
	while IFS= read -r -d '' dir; do
		subs[$dir]=$((${subs[$dir]:-0} + 1))
	done < <(find "$mnt" -xdev -mindepth 1 -type d -printf '%h\0' 2>/dev/null)
	n=0
	while IFS= read -r -d '' line; do
		nl=${line%% *}
		dir=${line#* }
		n=$((n + 1))
		if [ "$nl" != $((2 + ${subs[$dir]:-0})) ]; then
			echo "FAIL $dir: nlink $nl with ${subs[$dir]:-0} subdirectories"
			bad=$((bad + 1))
		fi
	done < <(find "$mnt" -xdev -type d -printf '%n %p\0' 2>/dev/null)
	echo "$((n - bad < 0 ? 0 : n - bad)) passed, $bad failed"
	[ $bad = 0 ]
}
run tree tree_check

echo "total: $tp passed, $tf failed (logs in $out)"
exit $status
