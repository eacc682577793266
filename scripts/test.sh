#!/usr/bin/env bash
# Installs what is missing, builds three configurations (plain optimised,
# AddressSanitizer + UBSan, ThreadSanitizer) and runs every test in each.
# Exit 0 only if all pass.  This is what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

# meson test's own timeouts bound each test; this bounds a whole run.
: "${TFS_TEST_TIMEOUT_MULTIPLIER:=1}"

configure() {
	local dir=$1; shift
	if [ -d "$dir" ] && [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		rm -rf "$dir"
		meson setup "$dir" "$@" >/dev/null
	fi
}

status=0
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# meson test's summary ("Ok: N", "Fail: N", ...) is added up over both
# configurations into one closing "N passed, N failed" line.
count() {
	local k v
	while read -r k v; do
		case $k in
		Ok:) passed=$((passed + v)) ;;
				Fail: | Timeout:) failed=$((failed + v)) ;;
		Unexpected) failed=$((failed + ${v##* })) ;; # "Unexpected Pass: N"
		Skipped:) skipped=$((skipped + v)) ;;
		esac
		done < <(grep -E '^(Ok|Fail|Timeout|Skipped|Unexpected Pass):' "$log")
}
run() {
	local name=$1 dir=$2; shift 2
		echo "== $name: configure and build ($dir)"
	# A broken build fails this configuration but still lets the other run.
	if ! configure "$dir" "$@" || ! ninja -C "$dir"; then
		echo "== $name: BUILD FAILED"
		status=1
		failed=$((failed + 1))
		return 0
	fi
	echo "== $name: meson test"
	if ! meson test -C "$dir" --print-errorlogs -t "${mult:-$TFS_TEST_TIMEOUT_MULTIPLIER}" \
		--num-processes "$(nproc)" 2>&1 | tee "$log"; then
		echo "== $name: FAILED"
		status=1
	fi
	# A run that could not even start counts as a failure.
	grep -qE '^Ok:' "$log" || failed=$((failed + 1))
	count
}

run plain build --buildtype=release -Db_ndebug=false
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	run asan build-asan --buildtype=debug -Db_sanitize=address,undefined \
	-Db_lundef=false -Dc_args=-fno-sanitize-recover=all
# ThreadSanitizer: the completion threads, the journal's write and reclaim
# threads and the fault device's worker; any report fails the test.
# TSan runs 5-15x slower than the plain build and is hit hardest by a busy
# machine: its timeouts are three times longer (a hang still ends the test).
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
	mult=$((TFS_TEST_TIMEOUT_MULTIPLIER * 3)) run tsan build-tsan --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false

[ $status = 0 ] && [ $failed = 0 ] && echo "== all tests passed in every configuration"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ] || status=1
exit $status
