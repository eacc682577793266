#!/usr/bin/env bash
# Fuzzes tinyfs: builds the clang fuzz configuration (build-fuzz: -Dfuzz=true,
# ASan+UBSan, libFuzzer) and runs every fuzz target of tests/fuzz/ for
# SECONDS each (default 60), one target at a time, on one core.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Ends with one "TARGET EXECS CRASHES" line per target (CRASHES counts every
# failing input: crashes, sanitizer reports, leaks, timeouts, out-of-memory).
# Each target runs in libFuzzer's fork mode and goes on after a failure, so
# the figure covers the whole time.  Starts from the seeds and the regression
# corpus (tests/fuzz/seeds/TARGET, tests/fuzz/regress/TARGET) and keeps what
# it finds in build-fuzz/fuzz/corpus/TARGET, so a later run continues.
# Failing inputs land in build-fuzz/fuzz/crashes/TARGET/; reproduce one with
#   build-fuzz/tests/fuzz/fuzz_TARGET FILE
# and, once fixed, add it to tests/fuzz/regress/TARGET/ (meson test replays it).
#
# Exit: 0 no failures, 1 some target had failing inputs, 2 usage or build error.
# Environment: TFS_FUZZ_BUILD (build directory, default build-fuzz),
# TFS_FUZZ_JOBS (libFuzzer -fork jobs per target, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
if [ $# -gt 0 ]; then shift; fi
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -eq 0 ]; then
	echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
	exit 2
fi
# Every target tests/fuzz/meson.build lists, unless named.
mapfile -t all < <(sed -n "s/^fuzz_targets = \[\(.*\)\]/\1/p" tests/fuzz/meson.build |
	tr -d "' " | tr ',' '\n')
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
	if ! printf '%s\n' "${all[@]}" | grep -qx "$t"; then
		echo "fuzz: unknown target $t (targets: ${all[*]})" >&2
		exit 2
	fi
done

scripts/deps.sh fuzz
build=${TFS_FUZZ_BUILD:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
	rm -rf "$build"
	CC=clang meson setup "$build" --buildtype=debugoptimized -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all >/dev/null || exit 2
fi
ninja -C "$build" "${targets[@]/#/tests/fuzz/fuzz_}" >/dev/null || exit 2

# Largest input worth trying: a superblock copy with its fields, one entry,
# two members of up to 8 buckets (journal_read's header caps the rest).
max_len() {
	case $1 in
	jset) echo 8192 ;;
	journal_read) echo 65536 ;;
	*) echo 16384 ;;
	esac
}

work=$build/fuzz
status=0
results=()
for t in "${targets[@]}"; do
	corpus=$work/corpus/$t crashes=$work/crashes/$t log=$work/$t.log
	mkdir -p "$corpus" "$crashes"
	echo "== fuzz $t: ${secs}s (log $log)"
	# -close_fd_mask=3: the targets' own messages (every corrupt entry is
	# reported) would drown libFuzzer's; sanitizer reports still go to the log.
	"$build/tests/fuzz/fuzz_$t" -fork="${TFS_FUZZ_JOBS:-1}" -ignore_crashes=1 \
		-ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -max_len="$(max_len "$t")" -close_fd_mask=3 \
		-artifact_prefix="$crashes/" "$corpus" "tests/fuzz/seeds/$t" \
		"tests/fuzz/regress/$t" >"$log" 2>&1 || true
	# Fork mode's status lines: "#EXECS: cov: ... oom/timeout/crash: O/T/C ...".
	last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
	if [ -z "$last" ]; then
		echo "fuzz: $t did not run; see $log" >&2
		tail -n 20 "$log" >&2
		results+=("$t 0 error")
		status=1
		continue
	fi
	execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
	read -r oom timeout crash < <(sed -E 's|.*oom/timeout/crash: ([0-9]+)/([0-9]+)/([0-9]+).*|\1 \2 \3|' <<<"$last")
	failures=$((oom + timeout + crash))
	results+=("$t $execs $failures")
	if [ "$failures" -gt 0 ]; then
		status=1
		echo "== $t: $crash crashes, $timeout timeouts, $oom out of memory; inputs in $crashes/"
		# Fork mode keeps only the first line of each report: rerun the
		# inputs (a few) to say where they fail, most frequent first.
		find "$crashes" -type f -name 'crash-*' | head -n 50 | while read -r f; do
			"$build/tests/fuzz/fuzz_$t" "$f" 2>&1 |
				grep -m1 -E '^SUMMARY: |fuzz check failed' || true
		done | sed -E 's/ \(BuildId: [0-9a-f]+\)//' | sort | uniq -c | sort -rn
	fi
done

echo "target execs crashes"
printf '%s\n' "${results[@]}"
exit $status
