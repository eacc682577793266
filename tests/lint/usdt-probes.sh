#!/usr/bin/env bash
# Checks that BINARY carries every tinyfs USDT probe (lib/trace.h), so
# perf/bpftrace can attach to them.  Skips (77) when <sys/sdt.h> was absent.
#   usdt-probes.sh BINARY PROBE...
set -u
bin=$1; shift
command -v readelf >/dev/null || { echo "skip: no readelf"; exit 77; }
notes=$(readelf -n "$bin") || { echo "FAIL: readelf -n $bin"; exit 1; }
if ! grep -q 'Provider: tinyfs' <<<"$notes"; then
	[ -e /usr/include/x86_64-linux-gnu/sys/sdt.h ] || [ -e /usr/include/sys/sdt.h ] ||
		{ echo "skip: built without <sys/sdt.h> (systemtap-sdt-dev)"; exit 77; }
	echo "FAIL: $bin has no tinyfs probes"; exit 1
fi
st=0
for p in "$@"; do
	grep -qx "    Name: $p" <<<"$notes" || { echo "FAIL: probe tinyfs:$p missing from $bin"; st=1; }
done
[ $st = 0 ] && echo "all $# probes present in $(basename "$bin")"
exit $st
