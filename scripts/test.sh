#!/usr/bin/env bash
# Installs what is missing, builds both configurations (plain optimised, and
# AddressSanitizer + UBSan) and runs every test in each.  Exit 0 only if both
# pass.  This is what .ci/run calls.
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
run() {
	local name=$1 dir=$2; shift 2
	echo "== $name: configure and build ($dir)"
	configure "$dir" "$@"
	ninja -C "$dir"
	echo "== $name: meson test"
	if ! meson test -C "$dir" --print-errorlogs -t "$TFS_TEST_TIMEOUT_MULTIPLIER" \
		--num-processes "$(nproc)"; then
		echo "== $name: FAILED"
		status=1
	fi
}

run plain build --buildtype=release -Db_ndebug=false
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	run asan build-asan --buildtype=debug -Db_sanitize=address,undefined \
	-Db_lundef=false -Dc_args=-fno-sanitize-recover=all

if [ $status = 0 ]; then
	echo "== all tests passed in both configurations"
fi
exit $status
