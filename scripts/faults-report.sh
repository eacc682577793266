#!/usr/bin/env bash
# The fault harness's figures (FAULTS.md, issue 13): builds what is missing,
# runs every program of the fault suite (tests/fault/meson.build's
# fault_tests) and the fuzz targets (scripts/fuzz.sh, a few seconds each),
# collects the "figure NAME key=value ..." lines they print, adds them up
# and prints one table per figure.
#
#   scripts/faults-report.sh [--long] [--no-fuzz]
#
# --long     TFS_LONG=1 (the exhaustive forms of the fault programs) and
#            60 s of fuzzing per target instead of 5.
# --no-fuzz  skips the fuzz targets (they need clang and their own build).
#
# Figures (each program prints its own; see README.md, "Fault harness"):
#   crash workload=W policy=P states=N failed=F   crash states explored/failed
#   crash_fsynced_bytes_lost bytes=N              must be 0
#   crash_fsck_findings findings=N                fsck after recovery, must be 0
#   errloop op=O kind=K iterations=N failed=F     I/O-error loop
#   errloop_alloc op=O kind=K iterations=N failed=F   allocation-failure loop
#   fault_points registered=R fired=F never=N excluded=X
#   fuzz target=T execs=N crashes=C               scripts/fuzz.sh
# Lines with the same non-numeric keys are summed.  Failure: a nonzero
# failed, crashes, bytes, findings or never; a program that exits nonzero;
# a fuzz target that did not run.
#
# Exit: 0 all clean, 1 some failure, 2 build or usage error.
# Environment: TFS_BUILD (build directory, default build), TFS_FUZZ_SECONDS.
# Logs: $TFS_BUILD/faults-report/*.log.
set -uo pipefail
cd "$(dirname "$0")/.."

long=0 fuzz=1
for a in "$@"; do
	case $a in
	--long) long=1 ;;
	--no-fuzz) fuzz=0 ;;
	*)
		echo "usage: scripts/faults-report.sh [--long] [--no-fuzz]" >&2
		exit 2
		;;
	esac
done
build=${TFS_BUILD:-build}
fuzz_secs=${TFS_FUZZ_SECONDS:-$([ $long = 1 ] && echo 60 || echo 5)}

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" --buildtype=release -Db_ndebug=false >/dev/null || exit 2
fi
# Every program of tests/fault/meson.build's list.
mapfile -t progs < <(sed -n '/^fault_tests = \[/,/^\]/p' tests/fault/meson.build |
	sed -n "s/^[[:space:]]*'\([A-Za-z0-9_]*\)',\{0,1\}.*/\1/p")
if [ ${#progs[@]} -eq 0 ]; then
	echo "faults-report: no programs in tests/fault/meson.build" >&2
	exit 2
fi
ninja -C "$build" -j2 "${progs[@]/#/tests/fault/fault_}" >/dev/null || exit 2

logs=$build/faults-report
mkdir -p "$logs"
figures=$logs/figures
: >"$figures"
status=0
start=$SECONDS
for p in "${progs[@]}"; do
	t0=$SECONDS
	if [ $long = 1 ]; then
		TFS_LONG=1 "$build/tests/fault/fault_$p" >"$logs/$p.log" 2>"$logs/$p.err"
	else
		"$build/tests/fault/fault_$p" >"$logs/$p.log" 2>"$logs/$p.err"
	fi
	rc=$?
	echo "== $p: exit $rc, $((SECONDS - t0)) s (log $logs/$p.log, $logs/$p.err)"
	if [ $rc -ne 0 ]; then
		status=1
		grep -h -m 20 -E 'FAILED|never fired|never completes' "$logs/$p.err" "$logs/$p.log"
	fi
	grep '^figure ' "$logs/$p.log" >>"$figures"
done

if [ $fuzz = 1 ]; then
	t0=$SECONDS
	scripts/fuzz.sh "$fuzz_secs" >"$logs/fuzz.log" 2>&1
	rc=$?
	echo "== fuzz: exit $rc, $((SECONDS - t0)) s (log $logs/fuzz.log)"
	[ $rc -eq 2 ] && { tail -n 5 "$logs/fuzz.log"; status=1; }
	# fuzz.sh ends with "target execs crashes" and one line per target.
	sed -n '/^target execs crashes$/,$p' "$logs/fuzz.log" | tail -n +2 |
		while read -r t e c; do
			[[ $c =~ ^[0-9]+$ ]] || c="error"
			echo "figure fuzz target=$t execs=$e crashes=$c"
		done >>"$figures"
fi

echo
echo "fault harness figures ($((SECONDS - start)) s$([ $long = 1 ] && echo ", long form"))"
# One table per figure name; rows keyed by the non-numeric fields, numeric
# fields summed.  A nonzero failure field, or a non-numeric one (a fuzz
# target that did not run), is marked with "!" and fails the report.
awk '
function failure_field(k) {
	return k ~ /^(failed|crashes|bytes|findings|never)$/
}
function bad(k, v) {
	return failure_field(k) && (v !~ /^[0-9]+$/ || v + 0 != 0)
}
{
	name = $2; key = ""
	# Key fields: non-numeric values of fields that are not failure counts.
	for (i = 3; i <= NF; i++) {
		split($i, kv, "=")
		if (kv[2] !~ /^[0-9]+$/ && !failure_field(kv[1]))
			key = key (key == "" ? "" : " ") $i
	}
	if (!(name in seen)) { seen[name] = 1; names[++nn] = name }
	row = name SUBSEP key
	if (!(row in rowseen)) { rowseen[row] = 1; rows[name, ++nr[name]] = key }
	for (i = 3; i <= NF; i++) {
		split($i, kv, "=")
		f = kv[1]; v = kv[2]
		if (v !~ /^[0-9]+$/ && !failure_field(f))
			continue
		if (!((name, f) in fseen)) { fseen[name, f] = 1; fields[name, ++nf[name]] = f }
		# A non-numeric value (a target that did not run) sticks.
		had = (row, f) in val
		if (had && val[row, f] !~ /^[0-9]+$/)
			;
		else if (v !~ /^[0-9]+$/)
			val[row, f] = v
		else
			val[row, f] += v
		if (bad(f, v))
			failed = 1
	}
}
END {
	for (a = 1; a <= nn; a++) {
		name = names[a]
		printf "\n%s\n", name
		line = sprintf("  %-36s", "")
		for (b = 1; b <= nf[name]; b++)
			line = line sprintf(" %12s", fields[name, b])
		print line
		for (r = 1; r <= nr[name]; r++) {
			key = rows[name, r]; row = name SUBSEP key
			line = sprintf("  %-36s", key == "" ? "(all)" : key)
			for (b = 1; b <= nf[name]; b++) {
				f = fields[name, b]
				v = ((row, f) in val) ? val[row, f] : "-"
				line = line sprintf(" %12s", v (v != "-" && bad(f, v) ? "!" : ""))
			}
			print line
		}
	}
	exit failed
}' "$figures" || status=1

for must in crash_fsynced_bytes_lost crash_fsck_findings; do
	grep -q "^figure $must " "$figures" || echo "note: no $must figure (no crash program ran)"
done
echo
if [ $status -eq 0 ]; then
	echo "faults-report: clean"
else
	echo "faults-report: FAILURES (marked !, or a program failed; logs in $logs)"
fi
exit $status
