#!/usr/bin/env bash
# Write-behind (fuse/wbehind.c): the kernel's small write-back requests are
# answered before the device write.  What a caller sees must not change:
# times set after the data (utime, as cp -a and tar do) stay set, st_blocks
# counts the data, a truncate right after a write wins, reads after a cache
# drop return the data, fsync and a remount find everything.  The image is
# large enough for the daemon to queue (it does not when space is short).
#   test_fuse_wbehind.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

fresh_image 1G
mount_or_finish mount -o "log=$tmp/daemon.log" "$img" "$mnt"

# files write|check: writes the 300 files through the mount (each truncated
# or not, its times set right after the data), or checks them: times, size,
# st_blocks, bytes.  Then an fsync.
files() {
	python3 - "$mnt" "$1" <<'PY'
import os, sys
mnt, what = sys.argv[1], sys.argv[2]
def data(i):
    d = bytes((i * 7 + j) % 251 for j in range((i * 997) % 20000 + 1))
    return (d + bytes(10))[:10] if i % 10 == 0 else d
bad = 0
for i in range(300):
    p = os.path.join(mnt, "f%d" % i)
    if what == "write":
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data(i))
        # The data reaches the daemon here (the kernel writes pages back
        # before a setattr): a truncate, then the times, right after it.
        if i % 10 == 0:
            os.ftruncate(fd, 10)
        os.utime(fd, ns=(1000000000 * (i + 1), 1000000000 * (i + 1)))
        os.close(fd)
    st = os.stat(p)
    want = data(i)
    if st.st_mtime_ns != 1000000000 * (i + 1):
        print("FAIL: f%d mtime %d, set to %d" % (i, st.st_mtime_ns, 1000000000 * (i + 1))); bad += 1
    if st.st_size != len(want) or st.st_blocks == 0:
        print("FAIL: f%d size %d blocks %d, want size %d" % (i, st.st_size, st.st_blocks, len(want))); bad += 1
    if open(p, "rb").read() != want:
        print("FAIL: f%d reads back other bytes" % i); bad += 1
    if bad > 10: break
fd = os.open(os.path.join(mnt, "f1"), os.O_RDONLY); os.fsync(fd); os.close(fd)
sys.exit(1 if bad else 0)
PY
}

files write || fail "after writing: see above"
queued=$("$tinyfs" stats "$mnt" fuse | awk '$1 == "write-behind:" { print $2 }')
[ "${queued:-0}" -gt 0 ] || fail "nothing was written behind ($("$tinyfs" stats "$mnt" fuse | grep write-behind))"
# The same after a cache drop (root) and after a remount.
if [ "$(id -u)" = 0 ]; then
	sync
	echo 3 >/proc/sys/vm/drop_caches
	files check || fail "after a cache drop"
fi
tfs_umount "$mnt" || finish
fsck_clean "$img" fsck
mount_or_finish "second mount" -o "log=$tmp/daemon.log" "$img" "$mnt"
files check || fail "after the remount"
tfs_umount "$mnt" || finish

# Appends (a log's write + fsync): the write-back of the file's last block
# goes behind too (tfs_wbehind_fits()).  Every data write is held 20 ms in
# the device, so a queued append is still running when the next request
# comes.  A read must see it: the first record is written back
# (sync_file_range), its page dropped from the kernel's cache and read
# through the daemon.  fsync must wait for it: kill -9 right after the last
# fsync, remount, every record is there.
# appends PATH start|check: the records (past the first page, so that their
# write-back starts at 4096, not 0), each fsynced; check: the file holds them.
appends() {
	python3 - "$1" "$2" <<'PY'
import ctypes, os, sys
path, what = sys.argv[1], sys.argv[2]
want = b"h" * 5000 + b"".join(b"%04d" % i + b"x" * 123 + b"\n" for i in range(40))
if what == "check":
    got = open(path, "rb").read()
    sys.exit(0 if got == want else "%s: %d bytes, want %d (first difference at %d)" % (
        path, len(got), len(want), next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, want[:5000]); os.fsync(fd)
os.write(fd, want[5000:5128])
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
if libc.sync_file_range(fd, 0, 0, 7):  # WAIT_BEFORE | WRITE | WAIT_AFTER: the kernel's write-back
    sys.exit("sync_file_range: %s" % os.strerror(ctypes.get_errno()))
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
with open(path, "rb") as r:
    got = r.read()
if got != want[:5128]:
    sys.exit("read after a queued append: %d bytes, want 5128; its last record %r" % (len(got), got[5000:]))
for i in range(5128, len(want), 128):
    os.write(fd, want[i:i + 128]); os.fsync(fd)
PY
}
# The write-behind counter of MNT ("N queued").
queued_of() { "$tinyfs" stats "$1" fuse | awk '$1 == "write-behind:" { print $2 }'; }

TFS_FAULTS="dev $img tag=data write always delay=20" \
	mount_or_finish "mount with slow data writes" -o "log=$tmp/daemon.log" "$img" "$mnt"
pid=$(daemon_pid "$mnt")
appends "$mnt/log" start || fail "appends"
queued=$(queued_of "$mnt")
[ "${queued:-0}" -ge 40 ] || fail "appends were not written behind: ${queued:-?} queued, want 40 or more"
# Each fsync came while its append was held: the write-behind thread started
# its journal flush (tfs_fsync_start()) before waking it.
started=$("$tinyfs" stats "$mnt" fuse | sed -n 's/^write-behind:.* \([0-9]*\) fsync flushes started$/\1/p')
[ "${started:-0}" -ge 30 ] || fail "fsync flushes started by write-behind: ${started:-?}, want 30 or more"
kill -9 "$pid"
wait_gone "$pid"
umount "$mnt" 2>/dev/null || umount -l "$mnt"
fsck_clean "$img" "fsck after kill -9"
mount_or_finish "mount after kill -9" -o "log=$tmp/daemon.log" "$img" "$mnt"
appends "$mnt/log" check || fail "fsynced appends after kill -9 and a remount"
tfs_umount "$mnt" || finish

# An I/O error of a queued append reaches fsync, once: the second data write
# of this mount (the first append's) fails.
TFS_FAULTS="dev $img tag=data write nth=2 fail=EIO" \
	mount_or_finish "mount with a failing append" -o "log=$tmp/daemon.log" "$img" "$mnt"
python3 - "$mnt/eio" <<'PY' || fail "EIO of a queued append: fsync reports it once"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"h" * 5000); os.fsync(fd)
os.write(fd, b"lost\n")
try:
    os.fsync(fd)
    sys.exit("the first fsync after the failed append returned 0")
except OSError as e:
    if e.errno != errno.EIO:
        raise
os.fsync(fd)  # reported once: now 0
os.write(fd, b"more\n"); os.fsync(fd)
PY
queued=$(queued_of "$mnt")
[ "${queued:-0}" -ge 3 ] || fail "the failing append was not written behind: ${queued:-?} queued"
grep -q "fail" "$tmp/daemon.log" || fail "the fault never fired"
tfs_umount "$mnt"

# A file whose data is still written behind when the kernel forgets its
# inode (a cache drop right after the close): the kernel makes a new inode
# from the attributes of the next lookup or readdirplus, and with the
# writeback cache it never takes a size from the daemon again.  Before the
# fix neither waited for the queued writes: stat said 0 bytes and reads
# returned nothing, long after the writes were done.  The device holds
# every data write for 100 ms, so the queue is still full at the drop.
if [ "$(id -u)" = 0 ]; then
	TFS_FAULTS="dev $img tag=data write delay=100" tfs_mount -o "log=$tmp/daemon.log" "$img" "$mnt" ||
		{ fail "mount with slow data writes (forgotten inodes)"; finish; }
	python3 - "$mnt" <<'PY' || fail "sizes of files written behind, after their inodes were forgotten"
import os, sys
mnt = sys.argv[1]
bad = 0
for how in ("lookup", "listing"):
    bad_before = bad
    d = os.path.join(mnt, "forgot-" + how)
    os.mkdir(d)
    for i in range(40):
        with open(os.path.join(d, "f%d" % i), "wb") as f:
            f.write(b"w" * 20000)
    open("/proc/sys/vm/drop_caches", "w").write("3")
    if how == "listing":  # the attributes come with the names (readdirplus)
        os.listdir(d)
    for i in range(40):
        p = os.path.join(d, "f%d" % i)
        size, n = os.stat(p).st_size, len(open(p, "rb").read())
        if (size, n) != (20000, 20000):
            bad += 1
            if bad - bad_before <= 3:
                print("FAIL: %s (%s first): size %d, read %d bytes, want 20000" % (p, how, size, n))
    if bad > bad_before:
        print("FAIL: %d of 40 files wrong after a %s" % (bad - bad_before, how))
sys.exit(1 if bad else 0)
PY
	tfs_umount "$mnt" || finish
fi

# A tree copy's requests on a file whose data is still being written behind
# (cp -a: chown, chmod, an xattr, the times) do not wait for that write, so
# the reading thread serves them itself instead of handing them to a
# follower (fuse/loop.c).  The device holds every data write for 300 ms.
handed() { "$tinyfs" stats "$mnt" fuse | awk '/^requests handed to a follower:/ { print $NF }'; }
TFS_FAULTS="dev $img tag=data write delay=300" tfs_mount -o "log=$tmp/daemon.log" "$img" "$mnt" ||
	{ fail "mount with a delay on data writes"; finish; }
before=$(handed)
python3 - "$mnt" <<'PY' || fail "attributes after the data"
import os, sys
for i in range(20):
    p = os.path.join(sys.argv[1], "a%d" % i)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"x" * (1000 + i))
    os.fchown(fd, 1000 + i, 2000 + i)
    os.fchmod(fd, 0o640)
    os.setxattr(fd, "user.copied", b"%d" % i)
    os.utime(fd, ns=(7000000000 + i, 7000000000 + i))
    os.close(fd)
PY
after=$(handed)
# 80 such requests, 4 per file; each used to be handed off.
[ -n "$before" ] && [ -n "$after" ] && [ $((after - before)) -lt 20 ] ||
	fail "requests on files with writes behind were handed off: $before -> $after"
attrs() {
	python3 - "$mnt" <<'PY'
import os, sys
bad = 0
for i in range(20):
    p = os.path.join(sys.argv[1], "a%d" % i)
    st = os.stat(p)
    got = (st.st_uid, st.st_gid, st.st_mode & 0o7777, st.st_mtime_ns, st.st_size,
           os.getxattr(p, "user.copied"), open(p, "rb").read())
    want = (1000 + i, 2000 + i, 0o640, 7000000000 + i, 1000 + i, b"%d" % i, b"x" * (1000 + i))
    if got != want:
        print("FAIL: a%d %r, want %r" % (i, got[:6], want[:6])); bad += 1
sys.exit(1 if bad else 0)
PY
}
attrs || fail "attributes set while the data was written behind"
tfs_umount "$mnt" || finish
mount_or_finish "third mount" -o "log=$tmp/daemon.log" "$img" "$mnt"
attrs || fail "attributes set while the data was written behind, after a remount"
tfs_umount "$mnt"
finish
