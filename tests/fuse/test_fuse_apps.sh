#!/usr/bin/env bash
# Real applications' durability patterns across a kill -9 of the daemon:
# git (objects and refs written through lock files renamed into place, with
# core.fsync=all) and SQLite in WAL mode (a shared mmap of the -shm file, an
# fsync per commit) run at once; the daemon is killed at a random moment.
# At the next mount (replay) `fsck -n` is clean, `git fsck --full` finds no
# error, every commit logged after a later fsync is on the branch, and the
# database passes integrity_check with every logged transaction.  See
# docs/design-notes.md, "Real applications".
#   test_fuse_apps.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3
command -v git >/dev/null || skip "git is absent"
# core.fsync's "reference" component (refs fsynced before their rename) is 2.37's.
gv=$(git --version | awk '{ print $3 }')
[ "$(printf '2.37\n%s\n' "$gv" | sort -V | head -1)" = 2.37 ] || skip "git $gv is older than 2.37"
python3 -c 'import sqlite3' 2>/dev/null || skip "python3 has no sqlite3 module"

fresh_image 256M
export GIT_CONFIG_NOSYSTEM=1 HOME=$tmp GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t

# A small repository outside the mount, cloned onto it.
src=$tmp/src
git init -q "$src" && (
	cd "$src" || exit 1
	for c in 1 2 3; do
		for f in $(seq 20); do seq "$c$f" >"f$f"; done
		git add -A && git commit -qm "c$c" || exit 1
	done
) || { fail "source repository"; finish; }

mount_or_finish "first mount" "$img" "$mnt"
git clone -q --no-hardlinks "$src" "$mnt/repo" || { fail "git clone onto the mount"; finish; }
[ "$(git -C "$mnt/repo" log -p | md5sum)" = "$(git -C "$src" log -p | md5sum)" ] ||
	fail "git log -p of the clone differs from the source's"
git -C "$mnt/repo" config core.fsync all
git -C "$mnt/repo" config core.fsyncMethod fsync
sync -f "$mnt/repo"

# git: a commit per round, logged once a later fsync (of another file)
# returned: git fsyncs the ref's lock file before renaming it and never the
# directory, so only a later fsync (or the 1 s flush) makes the rename durable.
git_work() {
	cd "$mnt/repo" || return
	local i
	for i in $(seq 1000); do
		echo "$1 $i" >>log.txt && git add log.txt && git commit -qm "r$1 $i" || return
		local h
		h=$(git rev-parse HEAD) && python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.fsync(fd)' "$mnt/marker" && echo "$h" >>"$tmp/git.log" || return
	done
}

# SQLite, WAL: a counter in the database, logged after each commit returned.
sqlite_work() {
	python3 - "$mnt/db.sqlite" "$tmp/sql.log" <<'PY'
import os, sqlite3, sys
db, log = sys.argv[1], sys.argv[2]
c = sqlite3.connect(db, isolation_level=None)
c.execute("pragma journal_mode=wal")
c.execute("pragma synchronous=full")
c.execute("create table if not exists t(id integer primary key, v blob)")
c.execute("create table if not exists n(n integer)")
if c.execute("select count(*) from n").fetchone()[0] == 0:
    c.execute("insert into n values(0)")
with open(log, "a") as lg:
    for i in range(100000):
        c.execute("begin")
        c.execute("insert into t(v) values(?)", (os.urandom(100 + i % 3000),))
        if i % 5 == 0:
            c.execute("delete from t where id in (select id from t order by random() limit 2)")
        c.execute("update n set n = n + 1")
        n = c.execute("select n from n").fetchone()[0]
        c.execute("commit")
        lg.write("%d\n" % n)
        lg.flush()
PY
}

for round in 1 2; do
	pid=$(daemon_pid "$mnt")
	[ -n "$pid" ] || { fail "no daemon pid"; break; }
	git_work "$round" >/dev/null 2>&1 &
	gw=$!
	sqlite_work >/dev/null 2>&1 &
	sw=$!
	sleep "$(python3 -c 'import random; print(random.uniform(0.8, 1.8))')"
	kill -9 "$pid"
	wait "$gw" "$sw" 2>/dev/null
	wait_gone "$pid"
	umount "$mnt" 2>/dev/null || umount -l "$mnt"
	fsck_clean "$img" "round $round: fsck -n after kill -9"
	mount_or_finish "mount after kill -9 (round $round)" "$img" "$mnt"

	cd "$mnt/repo" || { fail "round $round: no repository"; break; }
	out=$(git fsck --full 2>&1 | grep -v '^dangling ')
	[ -z "$out" ] || fail "round $round: git fsck --full: $(echo "$out" | head -3)"
	last=$(tail -1 "$tmp/git.log" 2>/dev/null)
	if [ -n "$last" ] && ! git merge-base --is-ancestor "$last" HEAD 2>/dev/null; then
		fail "round $round: logged commit $last is not on the branch (HEAD $(git rev-parse HEAD))"
	fi
	ncommits=$(wc -l <"$tmp/git.log" 2>/dev/null || echo 0)
	# What a crash leaves to the user, as on any filesystem: git's lock files.
	find .git -name '*.lock' -delete
	git reset -q --hard || fail "round $round: git reset --hard"
	cd /

	logged=$(tail -1 "$tmp/sql.log" 2>/dev/null)
	python3 - "$mnt/db.sqlite" "${logged:-0}" <<'PY' || fail "round $round: sqlite"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
ic = c.execute("pragma integrity_check").fetchone()[0]
n = c.execute("select n from n").fetchone()[0]
logged = int(sys.argv[2])
print("integrity_check %s, counter %d, logged %d" % (ic, n, logged))
sys.exit(0 if ic == "ok" and logged <= n <= logged + 1 else 1)
PY
	echo "round $round: $ncommits commits logged, sqlite counter ${logged:-0} logged"
done
tfs_umount "$mnt"
fsck_clean "$img" "fsck -n after the clean unmount"
finish
