#!/usr/bin/env bash
# The host's page cache under an image file (-o host_cache, the default;
# lib/bdev.c host_cached()): small data and journal writes go through it,
# small data reads too, and an fsync writes and flushes its own journal
# entry (journal stats "written by their waiter").  What went through the
# cache is there after a kill -9 of the daemon (the fsynced files, byte for
# byte) and after a clean remount; fsck finds nothing.  -o no_host_cache
# writes everything direct.
#   test_fuse_host_cache.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3

fresh_image 256M

# small_fsyncs DIR N: N files of 1..20000 random bytes, each fsynced, and
# a log of appends + fsync.
small_fsyncs() {
	python3 - "$1" "$2" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
r = random.Random(7)
log = os.open(os.path.join(d, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(n):
    data = os.urandom(r.randrange(1, 20000))
    p = os.path.join(d, "f%d" % i)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.write(log, b"x" * 127 + b"\n")
    os.fsync(log)
os.close(log)
PY
}

# sums DIR: "name md5" of every file in DIR, read through the mount.
sums() {
	python3 - "$1" <<'PY'
import hashlib, os, sys
d = sys.argv[1]
for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), "rb") as f:
        print(name, hashlib.md5(f.read()).hexdigest())
PY
}

# field MNT KIND NAME: the number after NAME in `tinyfs stats MNT KIND`.
field() {
	"$tinyfs" stats "$1" "$2" | sed -n "s/.*$3[[:space:]]*\([0-9][0-9]*\).*/\1/p" | head -1
}

mount_or_finish mount "$img" "$mnt"
"$tinyfs" stats "$mnt" devices | grep -q "host page cache" ||
	fail "no host page cache on an image file by default"
small_fsyncs "$mnt/a" 200 || fail "small files with fsync"
sums "$mnt/a" >"$tmp/a.sums"
cw=$(field "$mnt" devices "host-cached writes")
[ "${cw:-0}" -ge 200 ] || fail "host-cached writes: '${cw:-}' after 200 small fsynced files"
inl=$("$tinyfs" stats "$mnt" journal | sed -n 's/.*post-flush (\([0-9]*\) written by their waiter).*/\1/p')
[ "${inl:-0}" -gt 0 ] || fail "no post-flush entry written by its fsync: '${inl:-}'"
echo "# $cw host-cached writes, $inl post-flush entries written by their fsync"

# Killed right after: what was fsynced (through the host's cache) is there.
pid=$(daemon_pid "$mnt")
kill -9 "$pid"
wait_gone "$pid"
umount "$mnt" 2>/dev/null || umount -l "$mnt"
mount_or_finish "mount after kill -9" "$img" "$mnt"
sums "$mnt/a" >"$tmp/a.after"
cmp -s "$tmp/a.sums" "$tmp/a.after" || fail "fsynced files differ after kill -9: $(diff "$tmp/a.sums" "$tmp/a.after" | head -4)"

# Small reads of data not in the kernel's cache go through the host's.
if [ "$(id -u)" = 0 ]; then
	before=$(field "$mnt" devices "host-cached reads")
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sums "$mnt/a" >"$tmp/a.cold"
	cmp -s "$tmp/a.sums" "$tmp/a.cold" || fail "files read cold differ"
	after=$(field "$mnt" devices "host-cached reads")
	[ "${after:-0}" -gt "${before:-0}" ] || fail "no host-cached read: ${before:-} -> ${after:-}"
fi
tfs_umount "$mnt"
fsck_clean "$img" "fsck -n after host-cached writes"

# no_host_cache: every write direct, and the files are the same.
mount_or_finish "mount -o no_host_cache" -o no_host_cache "$img" "$mnt"
! "$tinyfs" stats "$mnt" devices | grep -q "host page cache" ||
	fail "no_host_cache still has a host page cache"
small_fsyncs "$mnt/b" 20 || fail "small files with fsync, no_host_cache"
sums "$mnt/b" >"$tmp/b.sums"
sums "$mnt/a" >"$tmp/a.after2"
cmp -s "$tmp/a.sums" "$tmp/a.after2" || fail "files differ under no_host_cache"
tfs_umount "$mnt"
mount_or_finish "remount" "$img" "$mnt"
sums "$mnt/b" >"$tmp/b.after"
cmp -s "$tmp/b.sums" "$tmp/b.after" || fail "no_host_cache files differ after remount"
tfs_umount "$mnt"
fsck_clean "$img" "fsck -n at the end"
finish
