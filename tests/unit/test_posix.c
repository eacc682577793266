// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/posix.c: open files, fsync and its error reporting, orphans,
 * statfs.
 *
 * fsync's error semantics (xfstests src/fsync-err.c): with N open file
 * descriptions of one file and a data write that fails, every description's
 * next fsync returns EIO, exactly once, and later ones 0; a description
 * opened after the error sees it too while nobody has seen it; a journal
 * write error reaches fsync even when the data write succeeded; both the
 * journal error and the writeback error are checked on every call.  An
 * fsync of a file whose last change is durable flushes nothing.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "fs/alloc.h"
#include "journal/journal_internal.h"
#include "posix_test.h"

static struct pt T;

static int setup(void **state)
{
	struct pt_geometry g = { 0 };

	return pt_mkfs(&T, &g);
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

#define NR_FILES 3

static void test_fsync_data_error(void **state)
{
	struct tfs_file *f[NR_FILES + 2];
	u8 buf[8192];
	ssize_t w;

	assert_int_equal(pt_create(&T, 1, "e", &f[0]), 0);
	for (unsigned i = 1; i < NR_FILES; i++)
		assert_int_equal(pt_open_file(&T, 1, "e", O_RDWR, &f[i]), 0);
	pt_fill(buf, sizeof(buf), 1, 0);
	assert_int_equal(tfs_write(T.fs, f[0], buf, sizeof(buf), 0), sizeof(buf));
	for (unsigned i = 0; i < NR_FILES; i++)
		assert_int_equal(tfs_fsync(T.fs, f[i], false), 0);

	/* The next data write fails on the device. */
	assert_true(pt_rule(&T, 0, "write tag=data nth=1 fail=EIO") >= 0);
	w = tfs_write(T.fs, f[1], buf, 100, 50);
	assert_true(tfs_err_matches((int)w, EIO));
	/* Nothing changed: the old bytes are there. */
	{
		u8 r[8192];

		assert_int_equal(tfs_read(T.fs, f[2], r, sizeof(r), 0), sizeof(r));
		assert_memory_equal(r, buf, sizeof(r));
	}
	/* An opener after the error, before anyone saw it, sees it too. */
	assert_int_equal(pt_open_file(&T, 1, "e", O_RDWR, &f[NR_FILES]), 0);
	for (unsigned i = 0; i <= NR_FILES; i++) {
		assert_int_equal(tfs_fsync(T.fs, f[i], false), -EIO);
		assert_int_equal(tfs_fsync(T.fs, f[i], false), 0);
		assert_int_equal(tfs_fsync(T.fs, f[i], true), 0);
	}
	/* Seen now: a later opener starts clean. */
	assert_int_equal(pt_open_file(&T, 1, "e", O_RDWR, &f[NR_FILES + 1]), 0);
	assert_int_equal(tfs_fsync(T.fs, f[NR_FILES + 1], false), 0);
	/* syncfs has its own sample of the filesystem-wide sequence: once too. */
	assert_int_equal(tfs_syncfs(T.fs), -EIO);
	assert_int_equal(tfs_syncfs(T.fs), 0);

	/* A second error after the first was seen is new to every description. */
	assert_true(pt_rule(&T, 0, "write tag=data nth=1 fail=EIO") >= 0);
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f[0], buf, 10, 0), EIO));
	for (unsigned i = 0; i <= NR_FILES + 1; i++) {
		assert_int_equal(tfs_fsync(T.fs, f[i], true), -EIO);
		assert_int_equal(tfs_fsync(T.fs, f[i], false), 0);
	}
	/* Writes work again afterwards. */
	assert_int_equal(tfs_write(T.fs, f[0], buf, 10, 0), 10);
	assert_int_equal(tfs_fsync(T.fs, f[0], false), 0);
	for (unsigned i = 0; i < NR_FILES + 2; i++)
		assert_int_equal(tfs_release(T.fs, f[i]), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* A journal write error: fsync reports it even though the data write succeeded. */
static void test_fsync_journal_error(void **state)
{
	struct tfs_file *f, *g;
	u8 buf[4096];

	assert_int_equal(pt_create(&T, 1, "j", &f), 0);
	assert_int_equal(pt_open_file(&T, 1, "j", O_RDWR, &g), 0);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_true(pt_rule(&T, 0, "write tag=journal nth=1 fail=EIO") >= 0);
	pt_fill(buf, sizeof(buf), 2, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), sizeof(buf));
	assert_true(tfs_err_matches(tfs_fsync(T.fs, f, false), EIO));
	/* Every later call on any description too: the journal is halted. */
	assert_true(tfs_err_matches(tfs_fsync(T.fs, f, false), EIO));
	assert_true(tfs_err_matches(tfs_fsync(T.fs, g, true), EIO));
	assert_true(tfs_err_matches(tfs_syncfs(T.fs), EIO));
	assert_true(tfs_err_matches(tfs_fsyncdir(T.fs, 1, false), EIO) ||
		    tfs_fsyncdir(T.fs, 1, false) == 0);
	/* Changes fail, EROFS-class; reads work. */
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f, buf, 10, 0), EROFS) ||
		    tfs_err_matches((int)tfs_write(T.fs, f, buf, 10, 0), EIO));
	assert_true(tfs_err_matches(pt_mkdir(&T, 1, "nope", NULL), EROFS));
	assert_int_equal(tfs_read(T.fs, f, buf, 10, 0), 10);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_release(T.fs, g), 0);
	/* Stop reports it; the next open finds everything acknowledged. */
	assert_true(pt_stop(&T) != 0);
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "j", NULL), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Both errors are checked on every call: the writeback error is consumed even when the
 * journal error wins. */
static void test_fsync_both_errors(void **state)
{
	struct tfs_file *f;
	u8 buf[4096];

	assert_int_equal(pt_create(&T, 1, "b", &f), 0);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_true(pt_rule(&T, 0, "write tag=data nth=1 fail=EIO") >= 0);
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f, buf, 10, 0), EIO));
	assert_true(pt_rule(&T, 0, "write tag=journal nth=1 fail=EIO") >= 0);
	assert_int_equal(tfs_write(T.fs, f, buf, 10, 0), 10);
	assert_true(tfs_err_matches(tfs_fsync(T.fs, f, false), EIO));
	assert_true(tfs_errseq_check(&f->im->wb_err, f->wb_err_since) == 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/* An fsync of a file whose last change is durable flushes nothing, whatever else is dirty. */
static void test_fsync_only_what_is_needed(void **state)
{
	struct tfs_file *a, *b;
	u8 buf[4096];
	u64 flushes;

	assert_int_equal(pt_create(&T, 1, "a", &a), 0);
	assert_int_equal(pt_create(&T, 1, "b", &b), 0);
	assert_int_equal(tfs_write(T.fs, a, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(tfs_fsync(T.fs, a, false), 0);
	assert_int_equal(tfs_write(T.fs, b, buf, sizeof(buf), 0), sizeof(buf));
	flushes = pt_bdev(&T, 0)->counters.ios[TFS_OP_flush] + pt_bdev(&T, 0)->counters.fua;
	u64 skipped = tfs_posix(T.fs)->c.fsync_skipped;

	assert_int_equal(tfs_fsync(T.fs, a, false), 0);
	assert_int_equal(tfs_fsync(T.fs, a, true), 0);
	assert_int_equal(tfs_posix(T.fs)->c.fsync_skipped, skipped + 2);
	assert_int_equal(pt_bdev(&T, 0)->counters.ios[TFS_OP_flush] + pt_bdev(&T, 0)->counters.fua,
			 flushes);
	/* b is not durable yet: its fsync flushes. */
	assert_int_equal(tfs_fsync(T.fs, b, false), 0);
	assert_true(tfs_journal_flushed_seq_ondisk(T.fs->j) >= b->im->last_seq);
	/* A times-only change does not make fdatasync flush. */
	struct tfs_setattr sa = { .valid = TFS_SETATTR_ATIME_NOW };

	assert_int_equal(tfs_setattr(T.fs, 0, b, &sa, NULL), 0);
	skipped = tfs_posix(T.fs)->c.fsync_skipped;
	assert_int_equal(tfs_fsync(T.fs, b, true), 0);
	assert_int_equal(tfs_posix(T.fs)->c.fsync_skipped, skipped + 1);
	assert_int_equal(tfs_release(T.fs, a), 0);
	assert_int_equal(tfs_release(T.fs, b), 0);
}

/*
 * An append and its fsync, nothing else dirty: one device flush, and
 * nothing else that syncs (a FUA write on an image file is a host sync
 * too).  The data write carries no flush; the journal's flush entry is a
 * post-flush entry: a plain write, then one flush that makes it, the data
 * and every older entry durable together (replay checks the data,
 * tfs_journal_read_verify_tail()).  Before post-flush entries it was a
 * PREFLUSH write with FUA: two host syncs, where a raw write + fdatasync
 * has one.  The measured shape of the README's append+fsync figures.
 */
static void test_fsync_append_one_flush(void **state)
{
	struct tfs_bdev *b = pt_bdev(&T, 0);
	struct tfs_journal_device *jd = &T.fs->j->devs[0];
	struct tfs_file *f;
	u8 rec[128];
	u64 preflushes, postflushes;

	memset(rec, 'r', sizeof(rec));
	assert_int_equal(pt_create(&T, 1, "log", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, rec, sizeof(rec), 0), sizeof(rec));
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	for (unsigned i = 1; i <= 40; i++) {
		u64 flush0 = __atomic_load_n(&b->counters.ios[TFS_OP_flush], __ATOMIC_RELAXED);
		u64 fua0 = __atomic_load_n(&b->counters.fua, __ATOMIC_RELAXED);
		u64 data0 = tfs_posix(T.fs)->c.data_bytes_written;
		u64 pre0, post0;

		pthread_mutex_lock(&T.fs->j->lock);
		pre0 = jd->nr_preflushes;
		post0 = jd->nr_postflushes;
		pthread_mutex_unlock(&T.fs->j->lock);
		assert_int_equal(tfs_write(T.fs, f, rec, sizeof(rec), i * sizeof(rec)),
				 sizeof(rec));
		assert_int_equal(tfs_fsync(T.fs, f, false), 0);
		/* One block written (copy-on-write of the last one), durable now. */
		assert_int_equal(tfs_posix(T.fs)->c.data_bytes_written - data0, 4096);
		assert_true(tfs_journal_flushed_seq_ondisk(T.fs->j) >= f->im->last_seq);
		assert_int_equal(__atomic_load_n(&b->counters.ios[TFS_OP_flush], __ATOMIC_RELAXED),
				 flush0 + 1);
		assert_int_equal(__atomic_load_n(&b->counters.fua, __ATOMIC_RELAXED), fua0);
		pthread_mutex_lock(&T.fs->j->lock);
		preflushes = jd->nr_preflushes - pre0;
		postflushes = jd->nr_postflushes - post0;
		pthread_mutex_unlock(&T.fs->j->lock);
		assert_int_equal(preflushes, 0);
		assert_int_equal(postflushes, 1);
	}
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/* --- orphans --- */

static u64 used_bytes(void)
{
	struct tfs_alloc_usage u;

	tfs_alloc_usage(T.fs, &u);
	return u.used;
}

static void test_unlink_open_file(void **state)
{
	static u8 buf[1 << 20], r[1 << 20];
	struct tfs_file *f;
	struct tfs_stat st;
	struct tfs_bkey_buf kb;
	u64 before = used_bytes();

	assert_int_equal(pt_create(&T, 1, "o", &f), 0);
	pt_fill(buf, sizeof(buf), 3, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), sizeof(buf));
	assert_true(used_bytes() >= before + sizeof(buf));
	assert_int_equal(tfs_unlink(T.fs, 1, "o", 1), 0);
	assert_int_equal(pt_lookup(&T, 1, "o", NULL), -ENOENT);
	/* Still readable and writable through the open file; an orphan on disk. */
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.nlink, 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(st.ino, 0), &kb), 0);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), sizeof(r));
	assert_memory_equal(r, buf, sizeof(r));
	assert_int_equal(tfs_write(T.fs, f, buf, 100, 0), 100);
	assert_int_equal(tfs_link(T.fs, st.ino, 1, "back", 4, NULL), -ENOENT);
	assert_int_equal(pt_fsck(T.fs), 0);
	/* The last release removes it. */
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), -ENOENT);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(st.ino, 0), &kb),
			 -ENOENT);
	assert_true(used_bytes() < before + sizeof(buf));
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* A crash while an unlinked file is open: the next open reclaims it. */
static void test_orphan_after_crash(void **state)
{
	static u8 buf[1 << 20];
	struct tfs_file *f, *keep;
	struct tfs_stat st;
	struct tfs_bkey_buf kb;
	struct tfs_alloc_usage u0, u1;

	assert_int_equal(pt_create(&T, 1, "keep", &keep), 0);
	assert_int_equal(tfs_write(T.fs, keep, "x", 1, 0), 1);
	assert_int_equal(tfs_fsync(T.fs, keep, false), 0);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	tfs_alloc_usage(T.fs, &u0);
	assert_int_equal(pt_create(&T, 1, "o", &f), 0);
	pt_fill(buf, sizeof(buf), 4, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "o", 1), 0);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	/* Power cut with the file still open. */
	assert_int_equal(tfs_faultdev_powercut(pt_bdev(&T, 0), TFS_POWERCUT_none, 0), 0);
	pt_stop(&T);
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), -ENOENT);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(st.ino, 0), &kb),
			 -ENOENT);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(st.ino, 0), &kb),
			 -ENOENT);
	assert_true(tfs_posix(T.fs)->c.orphans_reclaimed >= 1);
	assert_int_equal(pt_lookup(&T, 1, "keep", NULL), 0);
	/* Its space is free again (waiting at most for a flush). */
	tfs_alloc_usage(T.fs, &u1);
	assert_true(u1.used <= u0.used + (256 << 10));
	assert_int_equal(pt_fsck(T.fs), 0);
}

static s64 ts_ns(struct timespec ts)
{
	return (s64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ino is gone from the btrees: no inode key, no orphan key. */
static void assert_inode_gone(tfs_ino_t ino)
{
	struct tfs_bkey_buf kb;
	struct tfs_stat st;

	assert_int_equal(tfs_getattr(T.fs, ino, &st), -ENOENT);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes, TFS_POS(ino, 0), &kb), -ENOENT);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(ino, 0), &kb), -ENOENT);
}

/* Creates an empty file name in dir and closes it: its inode number. */
static tfs_ino_t create_empty(tfs_ino_t dir, const char *name)
{
	struct tfs_file *f;
	tfs_ino_t ino;

	assert_int_equal(pt_create(&T, dir, name, &f), 0);
	ino = tfs_file_ino(f);
	assert_int_equal(tfs_release(T.fs, f), 0);
	return ino;
}

/* Iterator refills (each peek of a fresh iterator is one) of btree id. */
static u64 refills(enum tfs_btree_id id)
{
	return __atomic_load_n(&T.fs->btrees[id].c.iter_refills, __ATOMIC_RELAXED);
}

/*
 * The last name of an inode nobody has open that owns nothing else (an
 * empty file, a symlink, a device node, an empty directory) goes with its
 * inode in one transaction, without an orphan key; one with data or xattrs,
 * or still open, takes the orphan path.  Link counts, the directory's
 * times and the inode count are right either way.
 */
static void test_unlink_at_once(void **state)
{
	struct tfs_posix_counters *c = &tfs_posix(T.fs)->c;
	struct tfs_stat d0, d1, st;
	struct tfs_file *f, *open;
	tfs_ino_t ino[7];
	u64 added, at_once, inodes0, inodes1;
	const char *names[] = { "e", "s", "p", "dd", "w", "x", "o" };

	assert_int_equal(pt_mkdir(&T, 1, "d", &d0), 0);
	create_empty(d0.ino, "e");
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, d0.ino, "s", 1, "target/of/s", &st), 0);
	assert_int_equal(pt_mknod(&T, d0.ino, "p", S_IFIFO | 0644, NULL), 0);
	assert_int_equal(pt_mkdir(&T, d0.ino, "dd", NULL), 0);
	assert_int_equal(pt_create(&T, d0.ino, "w", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, "data", 4, 0), 4);
	assert_int_equal(tfs_release(T.fs, f), 0);
	create_empty(d0.ino, "x");
	assert_int_equal(tfs_setxattr(T.fs, pt_ino(&T, d0.ino, "x"), "user.a", "1", 1, 0), 0);
	assert_int_equal(pt_create(&T, d0.ino, "o", &open), 0);
	for (unsigned i = 0; i < 7; i++)
		assert_int_not_equal(ino[i] = pt_ino(&T, d0.ino, names[i]), 0);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_inodes, 0, &inodes0), 0);
	assert_int_equal(tfs_getattr(T.fs, d0.ino, &d0), 0);
	assert_int_equal(d0.nlink, 3);

	added = c->orphans_added;
	at_once = c->removed_at_once;
	/*
	 * What the inode already says is not asked of a btree: an empty file
	 * has no extent; only a regular file may have an orphan key (with a
	 * name left); rmdir's emptiness check saw the directory's dirents.
	 */
	u64 ext0 = refills(TFS_BTREE_extents), orph0 = refills(TFS_BTREE_orphans);

	assert_int_equal(tfs_unlink(T.fs, d0.ino, "e", 1), 0);
	assert_int_equal(refills(TFS_BTREE_extents), ext0);
	assert_int_equal(refills(TFS_BTREE_orphans), orph0 + 1);
	assert_int_equal(tfs_unlink(T.fs, d0.ino, "s", 1), 0);
	assert_int_equal(tfs_unlink(T.fs, d0.ino, "p", 1), 0);
	u64 dir0 = refills(TFS_BTREE_dirents);

	assert_int_equal(tfs_rmdir(T.fs, d0.ino, "dd", 2), 0);
	assert_int_equal(refills(TFS_BTREE_dirents), dir0 + 1);
	assert_int_equal(refills(TFS_BTREE_extents), ext0);
	assert_int_equal(refills(TFS_BTREE_orphans), orph0 + 1);
	/* One transaction each: no orphan key was ever written. */
	assert_int_equal(c->orphans_added, added);
	assert_int_equal(c->removed_at_once, at_once + 4);
	for (unsigned i = 0; i < 4; i++)
		assert_inode_gone(ino[i]);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(ino[1], 0),
					  &(struct tfs_bkey_buf){ 0 }),
			 -ENOENT);
	/* The directory: one link less (dd's ".."), new mtime and ctime. */
	assert_int_equal(tfs_getattr(T.fs, d0.ino, &d1), 0);
	assert_int_equal(d1.nlink, 2);
	assert_true(ts_ns(d1.mtime) > ts_ns(d0.mtime));
	assert_true(ts_ns(d1.ctime) == ts_ns(d1.mtime));

	/* Data, an xattr, an open file: the orphan path, as before. */
	assert_int_equal(tfs_unlink(T.fs, d0.ino, "w", 1), 0);
	assert_int_equal(tfs_unlink(T.fs, d0.ino, "x", 1), 0);
	assert_int_equal(tfs_unlink(T.fs, d0.ino, "o", 1), 0);
	assert_int_equal(c->orphans_added, added + 3);
	assert_int_equal(c->removed_at_once, at_once + 4);
	assert_inode_gone(ino[4]);
	assert_inode_gone(ino[5]);
	assert_int_equal(tfs_getattr(T.fs, ino[6], &st), 0);
	assert_int_equal(st.nlink, 0);
	assert_int_equal(tfs_release(T.fs, open), 0);
	assert_inode_gone(ino[6]);

	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_inodes, 0, &inodes1), 0);
	assert_int_equal(inodes1, inodes0 - 7);
	assert_int_equal(tfs_rmdir(T.fs, 1, "d", 1), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	/* And after a remount: the same, nothing for open to reclaim. */
	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 0; i < 7; i++)
		assert_inode_gone(ino[i]);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * An empty file that still has an orphan key (left by a truncate that
 * failed after its last extent went): its unlink takes the orphan path,
 * which drops the key with the inode, instead of deleting the inode in
 * one commit and leaving the key behind.
 */
static void test_unlink_at_once_orphan_key(void **state)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf kb;
	tfs_ino_t ino;
	u64 seq;

	ino = create_empty(1, "t");
	tfs_posix_trans_init(&trans, T.fs);
	assert_int_equal(tfs_orphan_add(&trans, ino, TFS_ORPHAN_truncate), 0);
	assert_int_equal(tfs_posix_commit(&trans, &seq), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(tfs_unlink(T.fs, 1, "t", 1), 0);
	assert_inode_gone(ino);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(ino, 0), &kb), -ENOENT);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * A crash between a big truncate's first transaction (new size, orphan key)
 * and its last: open drops the extents past EOF and the key.  The state is
 * made by hand: the first transaction alone, then a power cut.
 */
static void test_orphan_truncate_after_crash(void **state)
{
	struct tfs_inode_mem *im;
	struct tfs_btree_trans trans;
	struct tfs_inode_unpacked ui;
	struct tfs_bkey_buf kb;
	struct tfs_file *f;
	struct tfs_stat st;
	u8 buf[4096];
	u64 seq;

	assert_int_equal(pt_create(&T, 1, "t", &f), 0);
	for (unsigned i = 0; i < 200; i++) {
		pt_fill(buf, sizeof(buf), i, 0);
		assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 2ULL * i * 4096),
				 sizeof(buf));
	}
	st.ino = tfs_file_ino(f);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_iget_locked(T.fs, st.ino, true, &im), 0);
	ui = im->ui;
	ui.size = 4096 + 10;
	tfs_posix_trans_init(&trans, T.fs);
	assert_int_equal(tfs_inode_update(&trans, im, &ui), 0);
	assert_int_equal(tfs_orphan_add(&trans, st.ino, TFS_ORPHAN_truncate), 0);
	assert_int_equal(tfs_posix_commit(&trans, &seq), 0);
	tfs_trans_exit(&trans);
	tfs_iput_unlock(T.fs, im);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	assert_int_equal(tfs_faultdev_powercut(pt_bdev(&T, 0), TFS_POWERCUT_none, 0), 0);
	pt_stop(&T);
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), 0);
	assert_int_equal(st.size, 4096 + 10);
	assert_int_equal(st.blocks, 8); /* block 0 only */
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(st.ino, 0), &kb),
			 -ENOENT);
	assert_int_equal(tfs_open(T.fs, st.ino, O_RDONLY, &f), 0);
	assert_int_equal(tfs_read(T.fs, f, buf, sizeof(buf), 0), sizeof(buf));
	{
		u8 want[4096];

		pt_fill(want, sizeof(want), 0, 0);
		assert_memory_equal(buf, want, sizeof(buf));
	}
	assert_int_equal(tfs_read(T.fs, f, buf, sizeof(buf), 4096), 10);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(buf[i], 0); /* block 1 was a hole */
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* A stop with an unlinked file still open leaves an orphan the next open reclaims. */
static void test_orphan_at_stop(void **state)
{
	struct tfs_file *f;
	struct tfs_stat st;

	assert_int_equal(pt_create(&T, 1, "o", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, "abc", 3, 0), 3);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "o", 1), 0);
	assert_int_equal(pt_reopen(&T), 0); /* f is dropped by the stop */
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), -ENOENT);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* rmdir of a directory, and rename over a file, while it is open. */
static void test_rename_over_open(void **state)
{
	struct tfs_file *f;
	struct tfs_stat st;
	u8 r[3];

	assert_int_equal(pt_create(&T, 1, "victim", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, "old", 3, 0), 3);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(pt_mknod(&T, 1, "new", S_IFREG | 0644, NULL), 0);
	assert_int_equal(tfs_rename(T.fs, 1, "new", 3, 1, "victim", 6, 0), 0);
	assert_int_equal(tfs_read(T.fs, f, r, 3, 0), 3);
	assert_memory_equal(r, "old", 3);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), -ENOENT);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * An unlink or a rename over one of a file's names that leaves it other
 * names marks it links_dropped (its nlink is then not volunteered in
 * readdirplus: the kernel drops its cached nlink itself, and a late reply
 * would take it to 0 and fail link(2) with ENOENT); a file that never lost
 * a name, and a directory, are not marked.
 */
static void test_links_dropped(void **state)
{
	struct tfs_stat st, st2;

	assert_int_equal(pt_mknod(&T, 1, "a", S_IFREG | 0644, &st), 0);
	assert_int_equal(tfs_link(T.fs, st.ino, 1, "b", 1, NULL), 0);
	assert_int_equal(tfs_link(T.fs, st.ino, 1, "c", 1, NULL), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_false(st.links_dropped);
	assert_int_equal(tfs_unlink(T.fs, 1, "a", 1), 0);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_true(st.links_dropped);

	/* A rename over one of its names. */
	assert_int_equal(pt_mknod(&T, 1, "d", S_IFREG | 0644, &st2), 0);
	assert_int_equal(tfs_link(T.fs, st2.ino, 1, "e", 1, NULL), 0);
	assert_int_equal(pt_mknod(&T, 1, "f", S_IFREG | 0644, NULL), 0);
	assert_int_equal(tfs_rename(T.fs, 1, "f", 1, 1, "e", 1, 0), 0);
	assert_int_equal(tfs_getattr(T.fs, st2.ino, &st2), 0);
	assert_int_equal(st2.nlink, 1);
	assert_true(st2.links_dropped);

	/* Renamed (no name lost), and a directory that lost a subdirectory. */
	assert_int_equal(pt_mknod(&T, 1, "g", S_IFREG | 0644, &st2), 0);
	assert_int_equal(tfs_rename(T.fs, 1, "g", 1, 1, "h", 1, 0), 0);
	assert_int_equal(tfs_getattr(T.fs, st2.ino, &st2), 0);
	assert_false(st2.links_dropped);
	assert_int_equal(pt_mkdir(&T, 1, "dir", &st2), 0);
	assert_int_equal(pt_mkdir(&T, st2.ino, "sub", NULL), 0);
	assert_int_equal(tfs_rmdir(T.fs, st2.ino, "sub", 3), 0);
	assert_int_equal(tfs_getattr(T.fs, st2.ino, &st2), 0);
	assert_false(st2.links_dropped);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* --- statfs --- */

static void test_statfs(void **state)
{
	struct statvfs a, b;
	struct tfs_alloc_usage u;
	static u8 buf[400 * 4096];
	struct tfs_file *f;

	assert_int_equal(tfs_statfs(T.fs, &a), 0);
	tfs_alloc_usage(T.fs, &u);
	assert_int_equal(a.f_bsize, 4096);
	assert_int_equal(a.f_blocks, u.capacity / 4096);
	assert_int_equal(a.f_bfree, (u.capacity - u.used) / 4096);
	assert_int_equal(a.f_bavail, (u.free + u.waiting) / 4096);
	assert_int_equal(a.f_namemax, 255);
	assert_int_equal(a.f_files - a.f_ffree, 1); /* the root */
	/*
	 * f_fsid: the filesystem's uuid folded to 64 bits, the same on every
	 * open.  (A FUSE mount's statfs(2) shows 0 whatever the daemon says:
	 * the protocol has no field for it, docs/design-notes.md.)
	 */
	assert_true(a.f_fsid != 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_statfs(T.fs, &b), 0);
	assert_int_equal(b.f_fsid, a.f_fsid);
	assert_int_equal(pt_create(&T, 1, "s", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), sizeof(buf));
	assert_int_equal(tfs_statfs(T.fs, &b), 0);
	assert_int_equal(b.f_files - b.f_ffree, 2);
	/* The data's blocks are gone from the free count (nodes may add a few). */
	assert_true(a.f_bfree - b.f_bfree >= 400);
	assert_true(a.f_bfree - b.f_bfree < 400 + 64);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "s", 1), 0);
	assert_int_equal(tfs_statfs(T.fs, &b), 0);
	assert_true(b.f_bavail + 64 >= a.f_bavail);
	assert_int_equal(b.f_files - b.f_ffree, 1);
}

/* Free inodes drop by one per inode created, as on ext4 (conform: statvfs). */
static void test_statfs_ffree(void **state)
{
	struct statvfs a, b;
	struct tfs_file *f;
	char name[8];

	assert_int_equal(tfs_statfs(T.fs, &a), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		assert_int_equal(pt_create(&T, 1, name, &f), 0);
		assert_int_equal(tfs_release(T.fs, f), 0);
	}
	assert_int_equal(tfs_statfs(T.fs, &b), 0);
	assert_int_equal(b.f_bavail, a.f_bavail); /* empty files take no blocks */
	assert_int_equal(a.f_ffree - b.f_ffree, 20);
	assert_int_equal(b.f_files - b.f_ffree, 21);
}

/* --- read-only --- */

static void test_read_only(void **state)
{
	struct tfs_file *f;
	u8 r[5];

	assert_int_equal(pt_create(&T, 1, "ro", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, "hello", 5, 0), 5);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(pt_open_file(&T, 1, "ro", O_RDONLY, &f), 0);
	assert_int_equal(tfs_read(T.fs, f, r, 5, 0), 5);
	assert_memory_equal(r, "hello", 5);
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f, "x", 1, 0), EROFS));
	assert_true(tfs_err_matches(pt_mkdir(&T, 1, "d", NULL), EROFS));
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
}

/*
 * tfs_touch_atime: relatime.  A read updates atime when it is not after
 * mtime/ctime (or is a day old), once; the next read commits nothing (but
 * strictatime updates it); the new atime survives a reopen; read-only
 * changes nothing.
 */
static void test_touch_atime(void **state)
{
	struct tfs_stat a, b;
	tfs_ino_t ino;
	u64 seq;

	ino = create_empty(1, "t");
	assert_int_equal(tfs_getattr(T.fs, ino, &a), 0);
	assert_int_equal(tfs_touch_atime(T.fs, ino, false), 1);
	assert_int_equal(tfs_getattr(T.fs, ino, &b), 0);
	assert_true(b.atime.tv_sec > a.atime.tv_sec ||
		    (b.atime.tv_sec == a.atime.tv_sec && b.atime.tv_nsec > a.atime.tv_nsec));
	assert_true(!memcmp(&a.mtime, &b.mtime, sizeof(a.mtime)) &&
		    !memcmp(&a.ctime, &b.ctime, sizeof(a.ctime)));
	/* atime is after mtime and ctime now: nothing to do, nothing committed. */
	seq = tfs_journal_cur_seq(T.fs->j);
	assert_int_equal(tfs_touch_atime(T.fs, ino, false), 0);
	assert_int_equal(tfs_journal_cur_seq(T.fs->j), seq);
	assert_int_equal(tfs_getattr(T.fs, ino, &a), 0);
	assert_memory_equal(&a.atime, &b.atime, sizeof(a.atime));
	/* strictatime: every read updates it. */
	assert_int_equal(tfs_touch_atime(T.fs, ino, true), 1);
	assert_int_equal(tfs_getattr(T.fs, ino, &b), 0);
	assert_true(b.atime.tv_sec > a.atime.tv_sec ||
		    (b.atime.tv_sec == a.atime.tv_sec && b.atime.tv_nsec > a.atime.tv_nsec));
	assert_int_equal(tfs_getattr(T.fs, ino, &a), 0);
	/* A day old: updated again. */
	struct tfs_setattr sa = { .valid = TFS_SETATTR_ATIME | TFS_SETATTR_CTIME };

	sa.atime.tv_sec = a.ctime.tv_sec - 2 * 86400;
	sa.ctime = a.ctime;
	assert_int_equal(tfs_setattr(T.fs, ino, NULL, &sa, NULL), 0);
	assert_int_equal(tfs_touch_atime(T.fs, ino, false), 1);
	assert_int_equal(tfs_getattr(T.fs, ino, &b), 0);
	assert_true(b.atime.tv_sec >= a.ctime.tv_sec);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_getattr(T.fs, ino, &a), 0);
	assert_memory_equal(&a.atime, &b.atime, sizeof(a.atime));
	assert_int_equal(tfs_touch_atime(T.fs, ino, false), 0);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
}

/*
 * utimensat with a time past what the inode's signed 64-bit nanoseconds hold
 * (2^40 s, or before 1678): clamped to the nearest time that fits, as ext4
 * clamps to its own range, kept across a remount.  It wrapped around (2^40 s
 * read back as 1738) and the multiplication overflowed (UBSan in the daemon).
 * Times that fit, before 1970 too, are kept to the nanosecond.
 */
static void test_setattr_time_range(void **state)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_ATIME | TFS_SETATTR_MTIME };
	struct tfs_stat st;
	tfs_ino_t ino;

	ino = create_empty(1, "t");

	sa.atime.tv_sec = 1LL << 32;
	sa.atime.tv_nsec = 7;
	sa.mtime.tv_sec = -2;
	sa.mtime.tv_nsec = 999999999;
	assert_int_equal(tfs_setattr(T.fs, ino, NULL, &sa, &st), 0);
	assert_int_equal(st.atime.tv_sec, 1LL << 32);
	assert_int_equal(st.atime.tv_nsec, 7);
	assert_int_equal(st.mtime.tv_sec, -2);
	assert_int_equal(st.mtime.tv_nsec, 999999999);

	sa.atime.tv_sec = 1LL << 40;
	sa.atime.tv_nsec = 5;
	sa.mtime.tv_sec = -(1LL << 40);
	sa.mtime.tv_nsec = 0;
	assert_int_equal(tfs_setattr(T.fs, ino, NULL, &sa, NULL), 0);
	assert_int_equal(pt_stop(&T), 0);
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_getattr(T.fs, ino, &st), 0);
	/* INT64_MAX ns: 2262-04-11T23:47:16.854775807 */
	assert_int_equal(st.atime.tv_sec, INT64_MAX / 1000000000);
	assert_int_equal(st.atime.tv_nsec, INT64_MAX % 1000000000);
	/* INT64_MIN ns: 1677-09-21T00:12:43.145224192 */
	assert_int_equal(st.mtime.tv_sec, INT64_MIN / 1000000000 - 1);
	assert_int_equal(st.mtime.tv_nsec, 1000000000 + INT64_MIN % 1000000000);
}

/* --- set-ID bits by the caller (tfs_setattr_as()) --- */

/* The daemon's callbacks, answered by the test and counted. */
struct caller {
	bool in_group, fsetid;
	unsigned keeps_asked, fsetid_asked;
};

static bool caller_keeps_sgid(void *arg, u32 gid)
{
	struct caller *c = arg;

	(void)gid;
	__atomic_add_fetch(&c->keeps_asked, 1, __ATOMIC_RELAXED);
	return c->in_group || c->fsetid;
}

static bool caller_has_fsetid(void *arg)
{
	struct caller *c = arg;

	__atomic_add_fetch(&c->fsetid_asked, 1, __ATOMIC_RELAXED);
	return c->fsetid;
}

/* uid 1000, gid 200, outside group 100 (the files' group) unless told. */
static struct tfs_ctx caller_ctx(struct caller *c)
{
	return (struct tfs_ctx){ .uid = 1000,
				 .gid = 200,
				 .keeps_sgid = caller_keeps_sgid,
				 .has_fsetid = caller_has_fsetid,
				 .keeps_sgid_arg = c };
}

/* Sets ino's mode and group 100 (as root: no rule applies). */
static void set_mode_gid(tfs_ino_t ino, u32 mode)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_GID, .gid = 100 };

	assert_int_equal(tfs_setattr(T.fs, ino, NULL, &sa, NULL), 0);
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_MODE, .mode = mode };
	assert_int_equal(tfs_setattr(T.fs, ino, NULL, &sa, NULL), 0);
}

/* ino's permission bits after setattr sa by c (with the CALLER_SGID rule, and flags). */
static u32 mode_after(tfs_ino_t ino, struct caller *c, unsigned valid, unsigned flags)
{
	struct tfs_ctx ctx = caller_ctx(c);
	struct tfs_setattr sa = { .valid = valid | TFS_SETATTR_CALLER_SGID | flags, .gid = 100 };
	struct tfs_stat st;

	assert_int_equal(tfs_setattr_as(T.fs, &ctx, ino, NULL, &sa, &st), 0);
	return st.mode & 07777;
}

/*
 * The rules the daemon applied before each setattr (fuse/fuse.c's
 * kill_sgid_nogx() and killpriv_mode(), found by difftest against ext4),
 * now fs/'s under the inode's lock: S_ISGID without group exec goes at a
 * non-member's truncate, chown, mode change or empty setattr (a write), not
 * for a member, nor with CAP_FSETID, nor from a directory; under KILLPRIV
 * a truncate or write drops S_ISUID and a group-executable S_ISGID unless
 * CAP_FSETID.  The callbacks (the daemon's /proc reads) are asked only where
 * the answer decides.
 */
static void test_setattr_caller_sgid(void **state)
{
	struct caller c = { 0 };
	tfs_ino_t ino = create_empty(1, "f"), dir;
	struct tfs_stat st;

	/* Nothing set-ID: nothing asked. */
	set_mode_gid(ino, 0644);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 0644);
	assert_int_equal(mode_after(ino, &c, 0, TFS_SETATTR_KILLPRIV), 0644);
	assert_int_equal(c.keeps_asked + c.fsetid_asked, 0);

	/* Non-member: a truncate, a write (nothing), a chgrp, a chmod lose it. */
	set_mode_gid(ino, 02644);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, 0), 0644);
	assert_int_equal(c.keeps_asked, 1);
	set_mode_gid(ino, 02644);
	assert_int_equal(mode_after(ino, &c, 0, 0), 0644);
	set_mode_gid(ino, 02644);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_GID, 0), 0644);
	/* Times alone (utimensat) keep it. */
	set_mode_gid(ino, 02644);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_MTIME_NOW, 0), 02644);
	/* Without the rule: kept. */
	{
		struct tfs_ctx ctx = caller_ctx(&c);
		struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE };

		assert_int_equal(tfs_setattr_as(T.fs, &ctx, ino, NULL, &sa, &st), 0);
		assert_int_equal(st.mode & 07777, 02644);
	}
	/* A member (fsgid, or the callback) or CAP_FSETID keeps it. */
	c.in_group = true;
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, 0), 02644);
	c.in_group = false;
	c.fsetid = true;
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 02644);
	c.fsetid = false;
	{
		struct tfs_ctx ctx = caller_ctx(&c);
		struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE | TFS_SETATTR_CALLER_SGID };
		unsigned asked = c.keeps_asked;

		ctx.gid = 100;
		assert_int_equal(tfs_setattr_as(T.fs, &ctx, ino, NULL, &sa, &st), 0);
		assert_int_equal(st.mode & 07777, 02644);
		assert_int_equal(c.keeps_asked, asked); /* the fsgid decides */
	}
	/* A directory keeps it (set-group-ID inheritance). */
	assert_int_equal(pt_mkdir(&T, 1, "d", &st), 0);
	dir = st.ino;
	set_mode_gid(dir, 02755 & ~(u32)S_IXGRP);
	assert_int_equal(mode_after(dir, &c, TFS_SETATTR_GID, TFS_SETATTR_KILLPRIV), 02745);

	/* KILLPRIV: S_ISUID and a group-executable S_ISGID at a truncate or write. */
	set_mode_gid(ino, 06755);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 0755);
	set_mode_gid(ino, 06755);
	assert_int_equal(mode_after(ino, &c, 0, TFS_SETATTR_KILLPRIV), 0755);
	/* ... both rules: S_ISUID, and S_ISGID from outside the group. */
	set_mode_gid(ino, 06745);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 0745);
	c.in_group = true;
	set_mode_gid(ino, 06745);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 02745);
	c.in_group = false;
	/* ... not without it, not with CAP_FSETID, not at a chmod (the kernel's mode). */
	set_mode_gid(ino, 06755);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, 0), 06755);
	c.fsetid = true;
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_SIZE, TFS_SETATTR_KILLPRIV), 06755);
	c.fsetid = false;
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_MODE, TFS_SETATTR_KILLPRIV), 0);
	/*
	 * A chgrp by a non-member owner under -o killpriv (no mode from the
	 * kernel): S_ISUID goes (chown) and S_ISGID without group exec (the
	 * caller rule), 0700 as on ext4.
	 */
	set_mode_gid(ino, 06700);
	assert_int_equal(mode_after(ino, &c, TFS_SETATTR_GID, TFS_SETATTR_KILLPRIV), 0700);
	/* The rule's mode change is durable with the rest. */
	assert_int_equal(pt_stop(&T), 0);
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_getattr(T.fs, ino, &st), 0);
	assert_int_equal(st.mode & 07777, 0700);
}

struct race {
	pthread_barrier_t start;
	tfs_ino_t ino;
	struct caller c;
};

/* A non-member's truncate, as the daemon's op_setattr() sends it. */
static void *race_truncate(void *arg)
{
	struct race *r = arg;
	struct tfs_ctx ctx = caller_ctx(&r->c);
	struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE | TFS_SETATTR_CALLER_SGID };
	struct tfs_stat st;

	pthread_barrier_wait(&r->start);
	assert_int_equal(tfs_setattr_as(T.fs, &ctx, r->ino, NULL, &sa, &st), 0);
	return NULL;
}

/*
 * A chmod at the same time as a non-member's truncate of a file with
 * S_ISGID without group exec: whichever comes first, the chmod's mode
 * stays (the truncate drops S_ISGID from 02644, or finds 0750 without it).
 * The daemon read the mode (tfs_getattr()) before the setattr that wrote
 * the mode it computed from it, outside the inode's lock: a chmod between
 * the two was undone (0644 left).
 */
static void test_setattr_caller_race(void **state)
{
	struct race r = { .ino = create_empty(1, "f") };
	struct tfs_setattr chmod = { .valid = TFS_SETATTR_MODE, .mode = 0750 };
	unsigned lost = 0;

	pthread_barrier_init(&r.start, NULL, 2);
	for (int i = 0; i < 2000; i++) {
		struct tfs_stat st;
		pthread_t t;

		set_mode_gid(r.ino, 02644);
		assert_int_equal(pthread_create(&t, NULL, race_truncate, &r), 0);
		pthread_barrier_wait(&r.start);
		assert_int_equal(tfs_setattr(T.fs, r.ino, NULL, &chmod, NULL), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(tfs_getattr(T.fs, r.ino, &st), 0);
		lost += (st.mode & 07777) != 0750;
	}
	pthread_barrier_destroy(&r.start);
	assert_int_equal(lost, 0);
}

/*
 * A live fsck after a tree lost a level: the new root's own copy is reached
 * on disk only through the old root until the next checkpoint, and no key
 * in memory points at it.  fsck's node walk missed it and called its blocks
 * leaked (seen in test_enospc_metadata, 5 runs in 6).
 */
static void test_fsck_after_height_shrink(void **state)
{
	char name[64];
	unsigned nr = 1500;

	for (unsigned i = 0; i < nr; i++) {
		snprintf(name, sizeof(name), "%055u", i);
		assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 0644, NULL), 0);
	}
	/* On disk with an interior root. */
	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 1; i < nr; i++) {
		snprintf(name, sizeof(name), "%055u", i);
		assert_int_equal(tfs_unlink(T.fs, 1, name, strlen(name)), 0);
	}
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

static int setup_small(void **state)
{
	struct pt_geometry g = { .size = 24ULL << 20 };

	return pt_mkfs(&T, &g);
}

/*
 * Names, inodes and xattrs at ENOSPC.  Data stops at the allocator's
 * reserve; before the fix, creates went on and their btree nodes ate the
 * reserve that write-back needs to copy dirty nodes, so the next
 * checkpoint found no space and the filesystem went read-only (seen on a
 * mount: fill with dd, then touch files).  Now they fail with ENOSPC,
 * deleting still works and frees space, and everything survives a reopen.
 */
static void test_enospc_metadata(void **state)
{
	static u8 w[1 << 20];
	struct tfs_file *f;
	char name[64];
	unsigned nr = 0;
	u64 off = 0;
	ssize_t n;
	int ret;

	/* Names enough for many dirty nodes when they go at ENOSPC. */
	for (; nr < 1500; nr++) {
		snprintf(name, sizeof(name), "%055u", nr);
		assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 0644, NULL), 0);
	}
	assert_int_equal(tfs_setxattr(T.fs, pt_ino(&T, 1, name), "user.r", w, 200, 0), 0);
	assert_int_equal(pt_create(&T, 1, "big", &f), 0);
	pt_fill(w, sizeof(w), 3, 0);
	while ((n = tfs_write(T.fs, f, w, sizeof(w), off)) > 0)
		off += (u64)n;
	assert_true(tfs_err_matches((int)n, ENOSPC));
	assert_int_equal(tfs_release(T.fs, f), 0);
	/* More, with an xattr each, until one fails. */
	for (;; nr++) {
		snprintf(name, sizeof(name), "%055u", nr);
		ret = pt_mknod(&T, 1, name, S_IFREG | 0644, NULL);
		if (!ret)
			ret = tfs_setxattr(T.fs, pt_ino(&T, 1, name), "user.x", w, 200, 0);
		if (ret)
			break;
		assert_true(nr < 1000000);
	}
	assert_true(tfs_err_matches(ret, ENOSPC));
	/*
	 * A mkdir fails too.  Space is not monotone here: a write-back that
	 * ends in the background gives back the headroom its dirty nodes held
	 * (tfs_posix_wb_headroom()), so a mkdir may then succeed (seen under
	 * TSan): those directories take that space until one fails.
	 */
	for (unsigned extra = 0;; extra++) {
		char dname[32];

		assert_true(extra < 1000);
		snprintf(dname, sizeof(dname), "e%u", extra);
		ret = pt_mkdir(&T, 1, dname, NULL);
		if (tfs_err_matches(ret, ENOSPC))
			break;
		assert_int_equal(ret, 0);
	}
	/* An xattr replaced by one no bigger needs no space (as on ext4); a bigger one does. */
	snprintf(name, sizeof(name), "%055u", 1499);
	assert_int_equal(
		tfs_setxattr(T.fs, pt_ino(&T, 1, name), "user.r", w, 200, TFS_XATTR_REPLACE), 0);
	assert_int_equal(tfs_setxattr(T.fs, pt_ino(&T, 1, name), "user.r", w, 100, 0), 0);
	assert_true(tfs_err_matches(tfs_setxattr(T.fs, pt_ino(&T, 1, name), "user.r", w, 4000, 0),
				    ENOSPC));
	/* Still writable: no write-back failed (that would make it EROFS). */
	assert_int_equal(tfs_posix_writable(T.fs), 0);
	/* Every name made is there; deleting them works and frees space. */
	for (unsigned i = 0; i < nr; i++) {
		snprintf(name, sizeof(name), "%055u", i);
		ret = tfs_unlink(T.fs, 1, name, strlen(name));
		if (ret == -ENOENT && i == nr - 1)
			break; /* the last one may have failed at the xattr */
		assert_int_equal(ret, 0);
	}
	assert_int_equal(tfs_unlink(T.fs, 1, "big", 3), 0);
	assert_int_equal(pt_mkdir(&T, 1, "d", NULL), 0);
	assert_int_equal(pt_create(&T, 1, "again", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "again", NULL), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fsync_data_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_journal_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_both_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_only_what_is_needed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_append_one_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_open_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_at_once_orphan_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_after_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_truncate_after_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_at_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_over_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_statfs_ffree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_touch_atime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsck_after_height_shrink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr_time_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr_caller_sgid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr_caller_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc_metadata, setup_small, teardown),
	};

	return pt_run_tests(tests);
}
