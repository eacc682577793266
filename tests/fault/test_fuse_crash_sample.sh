#!/usr/bin/env bash
# A mounted sample of the crash harness: a workload runs once through the
# FUSE daemon with its device tracing (TFS_FAULTS 'dev IMG tracefile=T');
# after the unmount, crash images at a handful of the trace's write and
# flush indexes (crash_image, the harness's builder; policies in turn) are
# checked mounted: `tinyfs fsck -n` is clean, the tree is one of the states
# the workload went through (the metadata is a prefix of history: names,
# sizes, bytes), mounted again it is the same, a new file can be written and
# fsck stays clean.  The image with no cut is the workload's last state.
#   test_fuse_crash_sample.sh BUILD_DIR
. "$(dirname "$0")/../fuse/lib.sh"

crash_image=$build/tests/fault/crash_image
img=$tmp/a.img tmpl=$tmp/template.img mnt=$tmp/mnt trace=$tmp/trace states=$tmp/states
work=$tmp/crash.img
cuts=4
[ -n "${TFS_LONG:-}" ] && cuts=40
new_image "$img" 64M || finish
cp --sparse=always "$img" "$tmpl"

# The tree as one line: every directory, every file's size and sha256.
cat >"$tmp/digest.py" <<'PY'
import hashlib, os, sys
def digest(root):
    out = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == "lost+found" or rel.startswith("lost+found/"):
            continue
        if rel != ".":
            out.append("D " + rel)
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                data = fh.read()
            out.append("F %s %d %s" % (os.path.relpath(p, root), len(data),
                                       hashlib.sha256(data).hexdigest()[:16]))
    return " | ".join(sorted(out))
if __name__ == "__main__":
    print(digest(sys.argv[1]))
PY

TFS_FAULTS="dev $img tracefile=$trace" tfs_mount "$img" "$mnt" || { fail "mount"; finish; }
# Each step, then the tree's digest: the states a crash may leave.
PYTHONPATH=$tmp python3 - "$mnt" "$states" <<'PY' || fail "workload"
import os, sys
from digest import digest
m, states = sys.argv[1], sys.argv[2]
def data(n, seed):
    return bytes((i * 31 + seed * 7) % 251 for i in range(n))
def wr(path, buf, off=None, sync=None):
    fd = os.open(os.path.join(m, path), os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, buf, off if off is not None else os.fstat(fd).st_size)
    if sync == "fsync":
        os.fsync(fd)
    elif sync == "fdatasync":
        os.fdatasync(fd)
    os.close(fd)
def fsyncdir(path):
    fd = os.open(os.path.join(m, path), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
def p(x):
    return os.path.join(m, x)
steps = [
    lambda: os.mkdir(p("d")),
    lambda: wr("a", data(20000, 1), 0, "fsync"),
    lambda: wr("d/b", data(7000, 2), 0, "fsync"),
    lambda: (os.rename(p("a"), p("d/a2")), fsyncdir("d")),
    lambda: wr("d/b", data(5000, 3), None, "fdatasync"),
    lambda: (os.truncate(p("d/a2"), 3000), wr("d/a2", b"", 0, "fsync")),
    lambda: wr("c", data(10000, 4), 0),
    lambda: (os.unlink(p("d/b")), fsyncdir("d")),
    lambda: wr("c", data(3000, 5), 40000, "fsync"),
]
with open(states, "w") as f:
    f.write(digest(m) + "\n")
    for s in steps:
        s()
        f.write(digest(m) + "\n")
PY
tfs_umount "$mnt"
[ -s "$trace" ] || { fail "no trace saved at $trace"; finish; }

mapfile -t stamps < <("$crash_image" cuts "$trace")
[ "${#stamps[@]}" -gt 0 ] || { fail "no cut points in the trace"; finish; }
policies=(none prefix random torn)
n=${#stamps[@]}
checked=0 failed=0
for i in $(seq 0 "$cuts"); do
	if [ "$i" = "$cuts" ]; then
		stamp=18446744073709551615 policy=none # no cut: the last state
	else
		stamp=${stamps[$((i * n / cuts))]} policy=${policies[$((i % 4))]}
	fi
	what="cut at stamp $stamp ($policy)"
	"$crash_image" build "$trace" "$tmpl" "$work" "$stamp" "$policy" "$i" ||
		{ fail "$what: building the image"; continue; }
	checked=$((checked + 1))
	bad=0
	"$tinyfs" fsck -n "$work" >"$tmp/fsck.out" 2>&1 ||
		{ fail "$what: fsck -n: $(tail -3 "$tmp/fsck.out")"; bad=1; }
	if tfs_mount "$work" "$mnt"; then
		got=$(PYTHONPATH=$tmp python3 "$tmp/digest.py" "$mnt")
		k=$(grep -nxF "$got" "$states" | tail -1 | cut -d: -f1)
		[ -n "$k" ] || { fail "$what: the tree is no state of the workload: $got"; bad=1; }
		echo "$what: state $((${k:-0} - 1)) of $(($(wc -l <"$states") - 1))"
		[ "$i" = "$cuts" ] && [ "$got" != "$(tail -1 "$states")" ] &&
			{ fail "no cut: not the last state"; bad=1; }
		tfs_umount "$mnt"
		tfs_mount "$work" "$mnt" || { fail "$what: second mount"; bad=1; continue; }
		again=$(PYTHONPATH=$tmp python3 "$tmp/digest.py" "$mnt")
		[ "$again" = "$got" ] || { fail "$what: mounted again, another tree"; bad=1; }
		echo after >"$mnt/after" && sync -f "$mnt/after" || { fail "$what: writing after recovery"; bad=1; }
		tfs_umount "$mnt"
		"$tinyfs" fsck -n "$work" >"$tmp/fsck.out" 2>&1 ||
			{ fail "$what: fsck -n after: $(tail -3 "$tmp/fsck.out")"; bad=1; }
	else
		fail "$what: mount"
		bad=1
	fi
	failed=$((failed + bad))
done
echo "figure crash workload=mounted policy=mixed states=$checked failed=$failed"
finish
