#!/usr/bin/env bash
# Several processes creating, writing, renaming and deleting in one tree at
# once (each in a shared directory and in its own), each logging what it
# did; the tree must then be exactly what the logs add up to, with every
# file's content, and again after unmount and mount.
#   test_fuse_concurrency.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

nproc=4 nops=400
[ -n "${TFS_LONG:-}" ] && nops=5000
fresh_image 256M
mount_or_finish mount "$img" "$mnt"
mkdir "$mnt/shared" || fail mkdir

worker() {
	python3 - "$mnt" "$1" "$nops" "$tmp/expect.$1" <<'PY'
import os, sys, random
mnt, me, nops, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = random.Random(me)
own = os.path.join(mnt, "own%d" % me)
os.mkdir(own)
files = {}          # path -> content (bytes), what this worker owns now
for i in range(nops):
    op = r.choice("cccwwrrdm")
    d = r.choice([own, os.path.join(mnt, "shared")])
    if op == "c" or not files:
        p = os.path.join(d, "w%d_%d" % (me, i))
        data = os.urandom(r.randrange(0, 70000))
        with open(p, "wb") as f: f.write(data)
        files[p] = data
    elif op == "w":
        p = r.choice(sorted(files))
        extra = os.urandom(r.randrange(1, 9000))
        with open(p, "ab") as f: f.write(extra)
        files[p] += extra
    elif op == "r":
        p = r.choice(sorted(files))
        q = os.path.join(d, "w%d_r%d" % (me, i))
        os.rename(p, q)
        files[q] = files.pop(p)
    elif op == "d":
        p = r.choice(sorted(files))
        os.unlink(p)
        del files[p]
    elif op == "m":
        sub = os.path.join(own, "sub%d" % i)
        os.mkdir(sub)
        p = os.path.join(sub, "x")
        with open(p, "wb") as f: f.write(b"m%d" % i)
        files[p] = b"m%d" % i
with open(out, "w") as f:
    for p in sorted(files):
        f.write("%s %s\n" % (os.path.relpath(p, mnt), __import__("hashlib").md5(files[p]).hexdigest()))
PY
}

pids=()
for i in $(seq "$nproc"); do
	worker "$i" &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "worker $p failed"
done
sort "$tmp"/expect.* >"$tmp/expect"
check() {
	(cd "$mnt" && find . -type f -printf '%P\n' | sort | while read -r f; do
		echo "$f $(md5sum <"$f" | cut -d' ' -f1)"
	done) >"$tmp/actual"
	if ! cmp -s "$tmp/expect" "$tmp/actual"; then
		fail "$1: the tree differs from what the workers did"
		diff "$tmp/expect" "$tmp/actual" | head -20
	fi
}
check "mounted"
echo "$(wc -l <"$tmp/expect") files as expected"
tfs_umount "$mnt"
mount_or_finish "mount again" "$img" "$mnt"
check "after remount"
tfs_umount "$mnt"
finish
