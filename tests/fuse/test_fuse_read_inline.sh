#!/usr/bin/env bash
# Small reads served by the reading thread itself (fuse/loop.c,
# read_tried()): it serves a small FUSE_READ until the read would wait for
# the device, and there hands the reading of requests to another thread.
#  - The bytes are right: random reads of 4 KiB to 64 KiB, cold (the host's
#    page cache of the image dropped: handed off at the device wait, some
#    after a part was copied), then with only the kernel's cache of the
#    file dropped (the image's pages cached: served whole by the reader),
#    and 64 KiB reads of which only the first page is in the host's cache.
#    The stats count both kinds.
#  - The reader does not wait for the device: with data reads held 3 s by
#    the fault device, a lookup sent meanwhile is answered at once; nor
#    for an inode a partial-block write holds while its data write is held.
#   test_fuse_read_inline.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3

fresh_image 256M
head -c 8M /dev/urandom >"$tmp/ref"

# "small reads served by the reader: T tried, W handed off at a device wait"
read_counts() {
	"$tinyfs" stats "$mnt" fuse |
		sed -n 's/^small reads served by the reader: *\([0-9]*\) tried, \([0-9]*\) handed off.*/\1 \2/p'
}

# check_reads WHAT SEED N: N random reads of the file, compared with the reference.
check_reads() {
	python3 - "$mnt/f" "$tmp/ref" "$2" "$3" <<'PY' || fail "$1: wrong bytes"
import os, random, sys
path, ref, seed, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = open(ref, "rb").read()
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
# The kernel's pages of the file go; the image's stay (the host's cache).
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
r = random.Random(seed)
bad = 0
for i in range(n):
    size = r.choice((4096, 8192, 60000, 65536))
    off = r.randrange(0, len(want) - size)
    if i % 2:
        off &= ~4095
    got = os.pread(fd, size, off)
    if got != want[off:off + size]:
        bad += 1
        if bad < 5:
            print("read of %d at %d: wrong bytes" % (size, off))
sys.exit(1 if bad else 0)
PY
}

# check_partial: cold pages only, 60 times: a 4 KiB read brings one page
# of the image into the host's cache, then a 64 KiB read from there (the
# kernel's cache of the file dropped) copies that page and waits for the
# rest.
check_partial() {
	python3 - "$mnt/f" "$tmp/ref" <<'PY' || fail "partly cached reads: wrong bytes"
import os, random, sys
path, ref = sys.argv[1], sys.argv[2]
want = open(ref, "rb").read()
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
# Far apart and out of order: the host sees no stream to read ahead.
offs = [i * 131072 for i in range(len(want) // 131072 - 1)]
random.Random(3).shuffle(offs)
bad = 0
for off in offs[:60]:
    os.pread(fd, 4096, off)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = os.pread(fd, 65536, off)
    if got != want[off:off + 65536]:
        bad += 1
        if bad < 5:
            print("read of 65536 at %d: wrong bytes" % off)
sys.exit(1 if bad else 0)
PY
}

mount_or_finish "mount" -o "log=$tmp/daemon.log" "$img" "$mnt"
# fsync: the file's writes behind are done (reads of a file with writes
# behind wait for them: handed off, not tried).
cp "$tmp/ref" "$mnt/f" && sync "$mnt/f" || fail "copy"
[ -n "$(read_counts)" ] || { fail "no small-read counters in the stats"; finish; }
if [ "$(id -u)" = 0 ]; then
	echo 3 >/proc/sys/vm/drop_caches
	read -r t0 w0 <<<"$(read_counts)"
	check_partial
	read -r t1 w1 <<<"$(read_counts)"
	echo "# partly cached: $((t1 - t0)) tried, $((w1 - w0)) handed off"
	[ $((w1 - w0)) -ge 30 ] || fail "partly cached reads: $((w1 - w0)) handed off at a device wait"
	echo 3 >/proc/sys/vm/drop_caches
	read -r t0 w0 <<<"$(read_counts)"
	check_reads cold 1 300
	read -r t1 w1 <<<"$(read_counts)"
	echo "# cold: $((t1 - t0)) tried, $((w1 - w0)) handed off"
	# The image's pages were dropped: the first reads waited for the device.
	[ $((w1 - w0)) -gt 0 ] || fail "cold reads: none handed off at a device wait ($t0 $w0 -> $t1 $w1)"
else
	echo "# not root: no cold pass (drop_caches)"
	check_reads first 1 300
	read -r t1 w1 <<<"$(read_counts)"
fi
# Now in the host's page cache: read whole by the reader (most of them; a
# page the host dropped meanwhile waits).
check_reads warm 1 300
read -r t2 w2 <<<"$(read_counts)"
echo "# warm: $((t2 - t1)) tried, $((w2 - w1)) handed off"
[ $((t2 - t1)) -ge 150 ] || fail "warm reads: $((t2 - t1)) tried of 300"
[ $((t2 - t1 - (w2 - w1))) -ge 150 ] ||
	fail "warm reads: $((w2 - w1)) of $((t2 - t1)) waited for the device"
check_reads other 2 300
tfs_umount "$mnt" || finish
# A wrong copy fails the block's checksum: the kernel would retry page by
# page and get the bytes right, but the daemon says so.
! grep -E "checksum mismatch|read error" "$tmp/daemon.log" | head -3 | grep . ||
	fail "reads saw checksum or read errors (above)"

# Data reads held 3 s: the read's wait is handed off, and a lookup sent
# while it waits is answered by the new reader.
TFS_FAULTS="dev $img read tag=data delay=3000" \
	mount_or_finish "mount with delayed reads" -o "log=$tmp/daemon.log" "$img" "$mnt"
python3 - "$mnt" <<'PY' || fail "a lookup waited for a delayed read"
import os, sys, threading, time
mnt = sys.argv[1]
fd = os.open(os.path.join(mnt, "f"), os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one 4 KiB FUSE_READ
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
t = threading.Thread(target=os.pread, args=(fd, 4096, 1 << 20))
start = time.monotonic()
t.start()
time.sleep(0.5)  # the read is at the device by now
a = time.monotonic()
try:
    os.stat(os.path.join(mnt, "absent"))
except FileNotFoundError:
    pass
took = time.monotonic() - a
t.join()
total = time.monotonic() - start
print("# lookup %.3f s during a read of %.3f s" % (took, total))
sys.exit(0 if total >= 2.5 and took < 1.5 else 1)
PY
tfs_umount "$mnt" || finish

# Data writes held 3 s: a write of part of a block holds the file's inode
# meanwhile (without the writeback cache it comes as it is), and a read of
# that file waits for it -- handed off first, so a lookup sent while the
# read waits is answered by the new reader.
TFS_FAULTS="dev $img write tag=data delay=3000" \
	mount_or_finish "mount with delayed writes" -o "log=$tmp/daemon.log,no_writeback_cache" \
	"$img" "$mnt"
python3 - "$mnt" <<'PY' || fail "a lookup waited for a read behind a writer"
import os, sys, threading, time
mnt = sys.argv[1]
path = os.path.join(mnt, "f")
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one 4 KiB FUSE_READ
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
wfd = os.open(path, os.O_WRONLY)
w = threading.Thread(target=os.pwrite, args=(wfd, b"y" * 100, 10))
r = threading.Thread(target=os.pread, args=(fd, 4096, 2 << 20))
start = time.monotonic()
w.start()
time.sleep(0.5)  # the write holds the inode at the device by now
r.start()
time.sleep(0.5)  # the read waits for the inode
a = time.monotonic()
try:
    os.stat(os.path.join(mnt, "absent2"))
except FileNotFoundError:
    pass
took = time.monotonic() - a
r.join()
w.join()
total = time.monotonic() - start
print("# lookup %.3f s during a write and read of %.3f s" % (took, total))
sys.exit(0 if total >= 2.5 and took < 1.5 else 1)
PY
tfs_umount "$mnt" || finish
fsck_clean "$img" fsck
finish
