#!/usr/bin/env bash
# fs_compare.sh [FSBENCH]: the file-system benchmark side by side on tinyfs,
# fuse2fs and kernel ext4 (on a loop device): images of the same size in the
# same directory (so on the same disk), fsbench.sh on each, then a
# metadata test at 1k, 10k and 100k files in one directory (create, readdir,
# stat, cold `ls -l`, unlink).  Prints a table
# with ratios.  Not run by `meson test`; run as root (loop devices, page
# cache drops).
#
#   FSBENCH  default ../shared/bench/fsbench.sh from the repository root
#   FSC_DIR=/var/tmp    where the images go (the disk measured)
#   FSC_SIZE=4G         size of each image
#   FSC_FS="ext4 fuse2fs tinyfs"   which to run
#   FSC_META="1000 10000 100000"   directory sizes of the metadata test
#   FSC_META_RUNS=K     runs of each size, median printed (default 5 at 1k or
#                       fewer files, 3 up to 10k, 1 above)
#   FSC_SKIP_FSBENCH=1  only the metadata test
#   FSC_TINYFS_OPTS=... -o options of the tinyfs mount (e.g. poll_us=0)
#   FSC_OUT=DIR         keep each filesystem's figures (DIR/FS.out, DIR/raw.out)
#   FSC_REUSE=DIR       take the figures of filesystems not run from DIR/FS.out
#   FSC_CPU_LATENCY=1   hold a 0 us CPU latency request (/dev/cpu_dma_latency)
#                       for the whole run, every filesystem alike: the tinyfs
#                       daemon takes one itself while requests come (-o
#                       low_latency_ms), ext4 and fuse2fs do not; this shows
#                       them under the same idle policy
#                       (a table of runs made at other times: say so with it)
#   FSB_* are passed to fsbench.sh (FSB_SEQ_MB, FSB_META_N, ...)
# Installs fio, fuse2fs and sqlite3 if missing (scripts/deps.sh --bench).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fsbench=${1:-$root/../shared/bench/fsbench.sh}
dir=${FSC_DIR:-/var/tmp}
size=${FSC_SIZE:-4G}
fslist=${FSC_FS:-ext4 fuse2fs tinyfs}
meta_sizes=${FSC_META:-1000 10000 100000}
build=$root/build
. "$root/tests/fuse/umount_retry.sh"

[ -f "$fsbench" ] || { echo "fs_compare: no benchmark at $fsbench" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "fs_compare: run as root (loop devices, mounts)" >&2; exit 2; }
"$root/scripts/deps.sh" --bench
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release -Db_ndebug=false >/dev/null
ninja -C "$build" >/dev/null

work=$(mktemp -d "$dir/fs_compare.XXXXXX")
mnt=$work/mnt
loop=
mkdir -p "$mnt"
latency_holder=
# hold_cpu_latency: a process holding a 0 us CPU latency request (killed at exit).
hold_cpu_latency() {
	python3 -c 'import os, struct, signal
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
os.write(fd, struct.pack("i", 0))
signal.pause()' &
	latency_holder=$!
	sleep 0.2
}
release_cpu_latency() {
	[ -n "$latency_holder" ] || return 0
	kill "$latency_holder" 2>/dev/null || true
	wait "$latency_holder" 2>/dev/null || true
	latency_holder=
}
cleanup() {
	cd /
	release_cpu_latency
	if grep -q " $mnt " /proc/self/mounts; then umount "$mnt" || umount -l "$mnt"; fi
	[ -n "$loop" ] && losetup -d "$loop"
	sleep 1
	rm -rf "$work"
}
trap cleanup EXIT

tinyfs_pid() { "$build/tools/tinyfs" stats "$mnt" fuse 2>/dev/null | awk '$1 == "pid:" { print $2 }'; }

mount_fs() {
	local fs=$1 img=$work/$1.img
	rm -f "$img"
	truncate -s "$size" "$img"
	case $fs in
	ext4)
		mkfs.ext4 -q -F "$img"
		loop=$(losetup -f --show "$img")
		mount "$loop" "$mnt"
		;;
	fuse2fs)
		mkfs.ext4 -q -F "$img"
		fuse2fs -o allow_other "$img" "$mnt"
		;;
	tinyfs)
		"$build/tools/mkfs.tinyfs" -q -f --size "$size" "$img"
		"$build/tools/tinyfs" mount ${FSC_TINYFS_OPTS:+-o "$FSC_TINYFS_OPTS"} "$img" "$mnt"
		;;
	esac
	chmod 1777 "$mnt"
}

umount_fs() {
	local fs=$1 pid=
	[ "$fs" = tinyfs ] && pid=$(tinyfs_pid)
	umount_busy_retry "$mnt"
	while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	if [ -n "$loop" ]; then
		losetup -d "$loop"
		loop=
	fi
	# fuse2fs writes back after umount returns too: wait for ours (its image's
	# path is on its command line), not for other users' fuse2fs mounts.
	while pgrep -f -- "^fuse2fs .*$work/$fs.img" >/dev/null; do sleep 0.1; done
	rm -f "$work/$fs.img"
}

# meta N: per-file microseconds for create, readdir, stat, a cold `ls -l`,
# unlink in one directory: the median of several runs where one run is short
# (5 of 1k files, 3 of 10k, 1 of 100k; FSC_META_RUNS=K sets it).  A run of 1k
# files takes 20-100 ms, which one wake-up of a halted CPU or another process
# moves by 10-30%; every run's figures go to stderr.
meta() {
	python3 - "$mnt/meta$1" "$1" "${FSC_META_RUNS:-}" <<'PY'
import os, statistics, subprocess, sys, time
base, n = sys.argv[1], int(sys.argv[2])
runs = int(sys.argv[3]) if sys.argv[3] else (5 if n <= 1000 else 3 if n <= 10000 else 1)
def one(d):
    os.mkdir(d)
    names = [os.path.join(d, "f%07d" % i) for i in range(n)]
    def t(f):
        a = time.perf_counter(); f(); return (time.perf_counter() - a) / n * 1e6
    def create():
        for x in names: os.close(os.open(x, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    def readdir():
        assert sum(1 for _ in os.scandir(d)) == n
    def stat():
        for x in names: os.stat(x)
    def lsl():
        # `ls -l` with cold caches: listing, lstat and the two xattr probes per
        # file.  After the drop, one `ls -l /` (another filesystem) loads ls, its
        # libraries, the locale and the user and group files back: that is the
        # same ~11 ms for every filesystem, not the directory's cost.
        os.sync(); open("/proc/sys/vm/drop_caches", "w").write("3\n")
        subprocess.run(["ls", "-l", "/"], stdout=subprocess.DEVNULL, check=True)
        a = time.perf_counter()
        subprocess.run(["ls", "-l", d], stdout=subprocess.DEVNULL, check=True)
        return (time.perf_counter() - a) / n * 1e6
    def unlink():
        for x in names: os.unlink(x)
    res = [(name, lsl() if f is lsl else t(f)) for name, f in
           (("create", create), ("readdir", readdir), ("stat", stat), ("ls_l_cold", lsl), ("unlink", unlink))]
    os.rmdir(d)
    return res
all_runs = [one("%s.%d" % (base, r)) for r in range(runs)]
for i, (name, _) in enumerate(all_runs[0]):
    v = [r[i][1] for r in all_runs]
    if runs > 1:
        print("# meta%d_%s runs: %s" % (n, name, " ".join("%.2f" % x for x in v)), file=sys.stderr)
    print("meta%d_%s_us_per_file %.2f us" % (n, name, statistics.median(v)))
PY
}

# The raw disk: a 4 KiB write + fdatasync on a file in $dir, median (NAME SUFFIX).
raw_fsync() {
	python3 - "$work/raw.dat" "${1:-}" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
buf = os.urandom(4096); lat = []
for i in range(500):
    a = time.perf_counter_ns(); os.write(fd, buf); os.fdatasync(fd); lat.append((time.perf_counter_ns() - a) / 1e3)
os.close(fd); os.unlink(sys.argv[1]); lat.sort()
print("raw_4k_write_fdatasync_p50%s %.0f us" % (sys.argv[2], lat[len(lat) // 2]))
PY
}

[ -z "${FSC_CPU_LATENCY:-}" ] || hold_cpu_latency

for fs in $fslist; do
	if [ -n "${FSC_REUSE:-}" ] && [ -f "$FSC_REUSE/$fs.out" ]; then
		echo "== $fs: figures from $FSC_REUSE/$fs.out" >&2
		cp "$FSC_REUSE/$fs.out" "$work/$fs.out"
		continue
	fi
	echo "== $fs" >&2
	mount_fs "$fs"
	{
		[ -n "${FSC_SKIP_FSBENCH:-}" ] || bash "$fsbench" "$mnt"
		for n in $meta_sizes; do meta "$n"; done
	} >"$work/$fs.out"
	umount_fs "$fs"
done
raw_fsync >"$work/raw.out"
# The raw write under a 0 us CPU latency request too: what tinyfs's fsync
# runs under (its own request), for append+fsync's comparison.
if [ -z "$latency_holder" ]; then
	hold_cpu_latency
	raw_fsync _lowlat >>"$work/raw.out"
	release_cpu_latency
fi
if [ -n "${FSC_OUT:-}" ]; then
	mkdir -p "$FSC_OUT"
	cp "$work"/*.out "$FSC_OUT/"
fi

# The table: one row per figure, a column per filesystem, then tinyfs's
# ratios (> 1: tinyfs better; for times the ratio is other/tinyfs).
python3 - "$work" $fslist <<'PY'
import sys, os, platform, datetime
work, fss = sys.argv[1], sys.argv[2:]
vals, units, order = {}, {}, []
for fs in fss:
    for line in open(os.path.join(work, fs + ".out")):
        p = line.split()
        if len(p) != 3: continue
        name, v, u = p
        if name not in units: order.append(name)
        units[name] = u
        vals[(fs, name)] = float(v)
raw = [l.split() for l in open(os.path.join(work, "raw.out")) if l.strip()]
lower_better = {"s", "us", "ms"}
others = [f for f in fss if f != "tinyfs"]
hdr = "%-34s %-8s" % ("figure", "unit") + "".join("%12s" % f for f in fss)
if "tinyfs" in fss: hdr += "".join("%14s" % ("tfs/" + o if True else "") for o in others)
print("# %s, %s, %s cores, %s" % (datetime.date.today(), platform.node(), os.cpu_count(), platform.release()))
if os.environ.get("FSC_CPU_LATENCY"):
    print("# a 0 us CPU latency request held for every filesystem (FSC_CPU_LATENCY=1)")
print(hdr)
for name in order:
    row = "%-34s %-8s" % (name, units[name])
    for fs in fss:
        v = vals.get((fs, name))
        row += "%12s" % ("-" if v is None else ("%.2f" % v if v < 100 else "%.0f" % v))
    if "tinyfs" in fss:
        t = vals.get(("tinyfs", name))
        for o in others:
            v = vals.get((o, name))
            if t is None or v is None or t == 0 or v == 0: row += "%14s" % "-"
            elif units[name] in lower_better: row += "%14.2f" % (v / t)
            else: row += "%14.2f" % (t / v)
    print(row)
for r in raw:
    print("%-34s %-8s %12s" % (r[0], r[2], r[1]))
for fs in fss:
    for op in ("create", "unlink"):
        a = vals.get((fs, "meta1000_%s_us_per_file" % op))
        b = vals.get((fs, "meta100000_%s_us_per_file" % op))
        if a and b: print("%s: %s per file at 100k / at 1k: %.2f" % (fs, op, b / a))
PY
