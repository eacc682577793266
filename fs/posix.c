// SPDX-License-Identifier: GPL-2.0
/*
 * The POSIX layer's life inside a filesystem (init with orphan recovery,
 * exit, mkfs's root directory), attributes (setattr), open files, fsync
 * and its error sequences, statfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/alloc.h"
#include "fs/posix.h"
#include "fs/str_hash.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

int tfs_create_locked(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
		      size_t len, u32 mode, struct tfs_stat *st, struct tfs_inode_mem **im,
		      tfs_ino_t *existing);

int tfs_posix_commit(struct tfs_btree_trans *trans, u64 *seq)
{
	u64 s = 0;
	int ret = tfs_trans_commit(trans, 0, &s);

	if (seq)
		*seq = s;
	return ret;
}

int tfs_posix_delete_inode_keys(struct tfs_fs *fs, enum tfs_btree_id id, tfs_ino_t ino)
{
	unsigned nr;
	int ret;

	do {
		struct tfs_btree_trans trans;
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;

		nr = 0;
		tfs_posix_trans_init(&trans, fs);
		tfs_btree_iter_init(&iter, fs, id, TFS_POS(ino, 0), TFS_POS(ino, UINT64_MAX));
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k && nr < 128;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			ret = tfs_trans_delete(&trans, id, tfs_bkey_pos(k));
			if (ret)
				break;
			nr++;
		}
		tfs_btree_iter_exit(&iter);
		if (!ret && nr)
			ret = tfs_posix_commit(&trans, NULL);
		tfs_trans_exit(&trans);
	} while (!ret && nr == 128);
	return ret;
}

void tfs_posix_set_name_hash(struct tfs_fs *fs, tfs_name_hash_fn fn)
{
	tfs_posix(fs)->name_hash = fn ?: tfs_name_hash_default;
}

/* --- attributes --- */

/* S_ISUID always, S_ISGID when group-executable (else it means mandatory locking). */
static u32 kill_suidgid(u32 mode)
{
	mode &= ~(u32)S_ISUID;
	if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		mode &= ~(u32)S_ISGID;
	return mode;
}

/*
 * The set-ID rules by the caller's identity (ctx), for the changes where
 * FUSE's kernel side leaves them to us (fuse/fuse.c): decided here, from
 * the mode under the inode's lock, by setattr and O_TRUNC alike.  The
 * callbacks may read /proc: each is asked only where its answer decides.
 */
static bool ctx_has_fsetid(const struct tfs_ctx *ctx)
{
	return ctx->has_fsetid && ctx->has_fsetid(ctx->keeps_sgid_arg);
}

/*
 * setattr_should_drop_sgid() (Linux 6.2+): S_ISGID without group exec goes
 * when ctx is outside the group gid and lacks CAP_FSETID (keeps_sgid()
 * answers both).
 */
static u32 caller_kill_sgid(const struct tfs_ctx *ctx, u32 mode, u32 gid)
{
	if ((mode & (S_ISGID | S_IXGRP)) != S_ISGID || ctx->gid == gid ||
	    (ctx->keeps_sgid && ctx->keeps_sgid(ctx->keeps_sgid_arg, gid)))
		return mode;
	return mode & ~(u32)S_ISGID;
}

/* should_remove_suid(): kill_suidgid() of a regular file, unless ctx has CAP_FSETID. */
static u32 caller_kill_priv(const struct tfs_ctx *ctx, u32 mode)
{
	if (!S_ISREG(mode) || !(mode & (S_ISUID | S_ISGID)) || ctx_has_fsetid(ctx))
		return mode;
	return kill_suidgid(mode);
}

/*
 * tfs_setattr_as()'s rules (TFS_SETATTR_CALLER_SGID, TFS_SETATTR_KILLPRIV)
 * on mode, the one the change leaves so far; gid is the group before it
 * (the kernel asks about the inode's group before a chown).
 */
static u32 caller_setattr_mode(const struct tfs_ctx *ctx, unsigned v, u32 mode, u32 gid)
{
	unsigned change = v & ~(unsigned)(TFS_SETATTR_CALLER_SGID | TFS_SETATTR_KILLPRIV);

	if ((v & TFS_SETATTR_KILLPRIV) && !(v & TFS_SETATTR_MODE) &&
	    (!change || (change & TFS_SETATTR_SIZE)))
		mode = caller_kill_priv(ctx, mode);
	if ((v & TFS_SETATTR_CALLER_SGID) && !S_ISDIR(mode) &&
	    (!change ||
	     (change & (TFS_SETATTR_SIZE | TFS_SETATTR_UID | TFS_SETATTR_GID | TFS_SETATTR_MODE))))
		mode = caller_kill_sgid(ctx, mode, gid);
	return mode;
}

/*
 * Inode times are signed 64-bit nanoseconds (1677..2262): a time outside is
 * clamped to the nearest one inside, as the kernel clamps to a filesystem's
 * s_time_min/max (FUSE cannot tell it ours), instead of wrapping around.
 */
static s64 ts_to_ns(struct timespec ts)
{
	s64 ns;

	if (__builtin_mul_overflow((s64)ts.tv_sec, (s64)1000000000, &ns) ||
	    __builtin_add_overflow(ns, (s64)ts.tv_nsec, &ns))
		return ts.tv_sec < 0 ? INT64_MIN : INT64_MAX;
	return ns;
}

int tfs_setattr(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_file *f, const struct tfs_setattr *sa,
		struct tfs_stat *st)
{
	return tfs_setattr_as(fs, NULL, ino, f, sa, st);
}

int tfs_setattr_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, struct tfs_file *f,
		   const struct tfs_setattr *sa, struct tfs_stat *st)
{
	struct tfs_inode_mem *im;
	struct tfs_inode_unpacked ui;
	unsigned v = sa->valid;
	bool mode_set = v & TFS_SETATTR_MODE;
	bool times_only = !(v & ~(TFS_SETATTR_ATIME | TFS_SETATTR_MTIME | TFS_SETATTR_ATIME_NOW |
				  TFS_SETATTR_MTIME_NOW | TFS_SETATTR_CTIME |
				  TFS_SETATTR_CALLER_SGID | TFS_SETATTR_KILLPRIV));
	s64 now = tfs_now_ns();
	u64 seq;
	int ret;

	if ((v & TFS_SETATTR_SIZE) && sa->size > TFS_MAX_FILE_SIZE)
		return -EFBIG;
	if (f)
		ino = tfs_file_ino(f);
	ret = tfs_posix_writable(fs) ?: tfs_iget_locked(fs, ino, true, &im);
	if (ret)
		return ret;
	ui = im->ui;
	if (v & TFS_SETATTR_SIZE) {
		if (S_ISDIR(ui.mode)) {
			ret = -EISDIR;
			goto out;
		}
		if (!S_ISREG(ui.mode)) {
			ret = -EINVAL;
			goto out;
		}
	}
	if (v & TFS_SETATTR_UID)
		ui.uid = sa->uid;
	if (v & TFS_SETATTR_GID)
		ui.gid = sa->gid;
	/* chown of a non-directory drops set-user-ID (and set-group-ID if group-executable). */
	if ((v & (TFS_SETATTR_UID | TFS_SETATTR_GID)) && !S_ISDIR(ui.mode))
		ui.mode = kill_suidgid(ui.mode);
	if ((v & TFS_SETATTR_KILL_SUIDGID) && !S_ISDIR(ui.mode))
		ui.mode = kill_suidgid(ui.mode);
	if (v & TFS_SETATTR_MODE)
		ui.mode = (ui.mode & S_IFMT) | (sa->mode & 07777);
	if (ctx && (v & (TFS_SETATTR_CALLER_SGID | TFS_SETATTR_KILLPRIV))) {
		u32 mode = caller_setattr_mode(ctx, v, ui.mode, im->ui.gid);

		/* A mode change like a chmod's (the access ACL follows, fdatasync covers it). */
		if (mode != ui.mode) {
			ui.mode = mode;
			mode_set = true;
			times_only = false;
		}
	}
	if (v & TFS_SETATTR_ATIME)
		ui.atime = ts_to_ns(sa->atime);
	else if (v & TFS_SETATTR_ATIME_NOW)
		ui.atime = now;
	if (v & TFS_SETATTR_MTIME)
		ui.mtime = ts_to_ns(sa->mtime);
	else if (v & (TFS_SETATTR_MTIME_NOW | TFS_SETATTR_SIZE))
		ui.mtime = now;
	ui.ctime = v & TFS_SETATTR_CTIME ? ts_to_ns(sa->ctime) : now;

	if (v & TFS_SETATTR_SIZE) {
		ui.size = sa->size;
		ret = tfs_data_truncate(fs, im, &ui, &seq);
	} else {
		struct tfs_btree_trans trans;

		tfs_posix_trans_init(&trans, fs);
		/* A chmod changes the access ACL in the same commit (posix_acl_chmod()). */
		if (mode_set && !S_ISLNK(ui.mode))
			ret = tfs_acl_chmod(&trans, im, ui.mode);
		ret = ret ?: tfs_inode_update(&trans, im, &ui) ?: tfs_posix_commit(&trans, &seq);
		tfs_trans_exit(&trans);
		if (!ret)
			tfs_inode_committed(im, &ui, seq, times_only);
	}
	if (!ret && st)
		tfs_inode_to_stat(fs, ino, &im->ui, st);
out:
	tfs_iput_unlock(fs, im);
	return ret;
}

/*
 * relatime (fs/namespace.c's relatime_need_update()): atime <= mtime or
 * ctime, or a day old; strict: any atime but now.
 */
static bool atime_needs_update(const struct tfs_inode_unpacked *ui, s64 now, bool strict)
{
	if (strict)
		return ui->atime != now;
	return ui->atime <= ui->mtime || ui->atime <= ui->ctime ||
	       now - ui->atime >= 24LL * 3600 * 1000000000;
}

int tfs_touch_atime(struct tfs_fs *fs, tfs_ino_t ino, bool strict)
{
	struct tfs_inode_mem *im;
	struct tfs_inode_unpacked ui;
	struct tfs_btree_trans trans;
	bool need;
	u64 seq;
	int ret;

	if (tfs_posix_writable(fs))
		return 0;
	/* The common case under a shared lock: nothing to do. */
	ret = tfs_iget_locked(fs, ino, false, &im);
	if (ret)
		return ret;
	need = atime_needs_update(&im->ui, tfs_now_ns(), strict);
	tfs_iunlock(im);
	if (!need) {
		tfs_iput(fs, im);
		return 0;
	}
	ret = tfs_ilock(fs, im, true);
	if (ret) {
		tfs_iput(fs, im);
		return ret;
	}
	ui = im->ui;
	ui.atime = tfs_now_ns();
	if (atime_needs_update(&im->ui, ui.atime, strict)) {
		/* Times only: fdatasync need not cover it. */
		tfs_posix_trans_init(&trans, fs);
		ret = tfs_inode_update(&trans, im, &ui) ?: tfs_posix_commit(&trans, &seq);
		tfs_trans_exit(&trans);
		if (!ret) {
			tfs_inode_committed(im, &ui, seq, true);
			ret = 1;
		}
	}
	tfs_iput_unlock(fs, im);
	return ret;
}

/* --- open files --- */

tfs_ino_t tfs_file_ino(const struct tfs_file *f)
{
	return f->im->ino;
}

u64 tfs_file_blocks_changes(const struct tfs_file *f)
{
	return __atomic_load_n(&f->im->blocks_changes, __ATOMIC_ACQUIRE);
}

bool tfs_file_size_now(struct tfs_file *f, u64 *size)
{
	struct tfs_inode_mem *im = f->im;
	bool ok;

	/* Never waits: a writer may hold the lock across a device write. */
	if (pthread_rwlock_tryrdlock(&im->lock))
		return false;
	ok = im->loaded && !im->deleted;
	if (ok)
		*size = im->ui.size;
	pthread_rwlock_unlock(&im->lock);
	return ok;
}

/* A file for file_link(): allocated before tfs_open() changes anything. */
static struct tfs_file *file_alloc(void)
{
	return tfs_fault("alloc:file") ? NULL : calloc(1, sizeof(struct tfs_file));
}

/* Makes f (file_alloc()) an open file of im (locked, referenced: the reference becomes f's). */
static void file_link(struct tfs_fs *fs, struct tfs_inode_mem *im, int flags, struct tfs_file *f)
{
	struct tfs_posix *p = tfs_posix(fs);

	f->im = im;
	f->flags = flags;
	f->wb_err_since = tfs_errseq_sample(&im->wb_err);
	pthread_mutex_lock(&p->table_lock);
	im->open_count++;
	f->next = p->files.next;
	f->prev = &p->files;
	p->files.next->prev = f;
	p->files.next = f;
	pthread_mutex_unlock(&p->table_lock);
}

/* Makes a new open file of im (locked, referenced: the reference becomes the file's). */
static int file_new(struct tfs_fs *fs, struct tfs_inode_mem *im, int flags, struct tfs_file **ret)
{
	struct tfs_file *f = file_alloc();

	if (!f)
		return -ENOMEM;
	file_link(fs, im, flags, f);
	*ret = f;
	return 0;
}

/*
 * O_TRUNC's truncation, in one commit with the set-ID bits it drops for
 * ctx (see tfs_open_as()).
 */
static int open_trunc(struct tfs_fs *fs, const struct tfs_ctx *ctx, struct tfs_inode_mem *im)
{
	struct tfs_inode_unpacked ui = im->ui;
	u64 seq;

	/* An empty file too: O_TRUNC marks mtime and ctime (POSIX) */
	if (!S_ISREG(ui.mode))
		return 0;
	ui.size = 0;
	ui.mtime = ui.ctime = tfs_now_ns();
	/* As tfs_setattr_as()'s size change with both rules; CAP_FSETID keeps every bit. */
	if (ctx && ctx->has_fsetid && (ui.mode & (S_ISUID | S_ISGID)) && !ctx_has_fsetid(ctx))
		ui.mode = caller_kill_sgid(ctx, kill_suidgid(ui.mode), ui.gid);
	return tfs_data_truncate(fs, im, &ui, &seq);
}

int tfs_open(struct tfs_fs *fs, tfs_ino_t ino, int flags, struct tfs_file **f)
{
	return tfs_open_as(fs, NULL, ino, flags, f);
}

int tfs_open_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, int flags,
		struct tfs_file **f)
{
	struct tfs_inode_mem *im;
	/* O_TRUNC truncates whatever the access mode, as open(2) on Linux does */
	bool trunc = flags & O_TRUNC;
	/* Allocated first: an open that fails leaves the file as it was (Linux truncates last) */
	struct tfs_file *nf = file_alloc();
	int ret = nf ? tfs_iget_locked(fs, ino, trunc, &im) : -ENOMEM;

	if (ret) {
		free(nf);
		return ret;
	}
	if (S_ISDIR(im->ui.mode) && (flags & O_ACCMODE) != O_RDONLY)
		ret = -EISDIR;
	if (!ret && trunc)
		ret = open_trunc(fs, ctx, im);
	if (!ret) {
		file_link(fs, im, flags, nf);
		*f = nf;
	}
	tfs_iunlock(im);
	if (ret) {
		free(nf);
		tfs_iput(fs, im);
	}
	return ret;
}

int tfs_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	       size_t len, u32 mode, int flags, struct tfs_file **f, struct tfs_stat *st)
{
	struct tfs_inode_mem *im;
	tfs_ino_t existing;
	int ret = tfs_create_locked(fs, ctx, dir, name, len, mode, st, &im, &existing);

	if (ret == -EEXIST && !(flags & O_EXCL)) {
		/* It exists: an open of what is there (a create race lost). */
		ret = tfs_open(fs, existing, flags & ~O_CREAT, f);
		if (!ret && st)
			ret = tfs_getattr(fs, existing, st);
		return ret;
	}
	if (ret)
		return ret;
	ret = file_new(fs, im, flags, f);
	tfs_iunlock(im);
	if (ret)
		tfs_iput(fs, im);
	return ret;
}

int tfs_release(struct tfs_fs *fs, struct tfs_file *f)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	unsigned left;
	int ret;

	/*
	 * Under the inode's lock, so an open racing with the last release
	 * either counts before the check or finds the inode removed.
	 */
	pthread_rwlock_wrlock(&im->lock);
	pthread_mutex_lock(&p->table_lock);
	left = --im->open_count;
	f->prev->next = f->next;
	f->next->prev = f->prev;
	pthread_mutex_unlock(&p->table_lock);
	ret = 0;
	/* The last release of an unlinked inode removes it (read-only: the next open will). */
	if (!left && im->loaded && !im->deleted && !im->ui.nlink && !tfs_posix_writable(fs)) {
		ret = tfs_inode_remove(fs, im);
		if (ret)
			fprintf(stderr,
				"inode %llu: removing it at its last release failed (%s); the next "
				"open will finish it\n",
				(unsigned long long)im->ino, tfs_err_str(ret));
	}
	pthread_rwlock_unlock(&im->lock);
	tfs_iput(fs, im);
	free(f);
	return ret;
}

/* --- fsync --- */

/* The journal seq an fsync (or fdatasync) of im makes durable. */
static u64 fsync_seq(const struct tfs_inode_mem *im, bool datasync)
{
	return __atomic_load_n(datasync ? &im->last_data_seq : &im->last_seq, __ATOMIC_ACQUIRE);
}

/* Makes seq durable: nothing at all when it already is. */
static int flush_to(struct tfs_fs *fs, u64 seq)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_journal *j = tfs_posix_journal(fs);

	/* Read-only (no journal): nothing was changed, nothing to flush. */
	if (!seq || !j || tfs_posix_fsync_noop(fs) ||
	    (tfs_journal_flushed_seq_ondisk(j) >= seq && !tfs_journal_error(j))) {
		__atomic_fetch_add(&p->c.fsync_skipped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&p->c.fsync_flushes, 1, __ATOMIC_RELAXED);
	/* fsync and fsyncdir hold no lock here: the flush may run in this thread. */
	return tfs_journal_flush_seq_inline(j, seq);
}

int tfs_fsync(struct tfs_fs *fs, struct tfs_file *f, bool datasync)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	u64 seq = fsync_seq(im, datasync);
	int wb, jret;

	__atomic_fetch_add(&p->c.fsyncs, 1, __ATOMIC_RELAXED);
	/*
	 * Data is written before its extent commits (io.c): nothing is dirty
	 * here.  Both errors are checked on every call (seed 75812e70d934):
	 * the writeback error is consumed even when the journal's wins.
	 */
	wb = tfs_errseq_check_and_advance(&im->wb_err, &f->wb_err_since);
	jret = flush_to(fs, seq);
	return jret ?: wb;
}

void tfs_fsync_start(struct tfs_fs *fs, struct tfs_file *f, bool datasync)
{
	struct tfs_journal *j = tfs_posix_journal(fs);
	/* The seq tfs_fsync() will ask for: the flush it joins is this one. */
	u64 seq = fsync_seq(f->im, datasync);

	if (seq && j && !tfs_posix_fsync_noop(fs) && tfs_journal_flushed_seq_ondisk(j) < seq)
		tfs_journal_flush_seq_start(j, seq);
}

int tfs_fsyncdir(struct tfs_fs *fs, tfs_ino_t dir, bool datasync)
{
	struct tfs_inode_mem *im;
	int ret = tfs_iget_locked(fs, dir, false, &im);
	u64 seq;

	if (ret)
		return ret;
	seq = __atomic_load_n(datasync ? &im->last_data_seq : &im->last_seq, __ATOMIC_ACQUIRE);
	tfs_iput_unlock(fs, im);
	return flush_to(fs, seq);
}

int tfs_syncfs(struct tfs_fs *fs)
{
	struct tfs_posix *p = tfs_posix(fs);
	int wb, jret;

	pthread_mutex_lock(&p->syncfs_lock);
	wb = tfs_errseq_check_and_advance(&p->sb_err, &p->syncfs_since);
	pthread_mutex_unlock(&p->syncfs_lock);
	jret = tfs_posix_fsync_noop(fs) || !tfs_posix_journal(fs)
		       ? 0
		       : tfs_journal_flush(tfs_posix_journal(fs));
	return jret ?: wb;
}

/* --- statfs --- */

int tfs_statfs(struct tfs_fs *fs, struct statvfs *st)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_alloc_usage u;
	const u8 *uuid = tfs_posix_uuid(fs);
	u64 fsid = 0;

	tfs_alloc_usage(fs, &u);
	memset(st, 0, sizeof(*st));
	st->f_bsize = p->block_size;
	st->f_frsize = p->block_size;
	st->f_blocks = u.capacity >> p->block_bits;
	st->f_bfree = (u.capacity - u.used) >> p->block_bits;
	/* Waiting space is free once a journal flush lands (allocation does one). */
	st->f_bavail = (u.free + u.waiting) >> p->block_bits;
	/*
	 * Inodes have no table: each free block could hold one more.  Those in
	 * use are counted out, so creating one drops f_ffree by one (as
	 * programs expect from ext4) even when it takes no block.  The count
	 * is the accounting key (fs/alloc.h), exact with every commit.
	 */
	u64 nr_inodes;
	int ret = tfs_acct_read(fs, TFS_ACCT_inodes, 0, &nr_inodes);

	if (ret)
		return ret;

	st->f_ffree = st->f_bavail > nr_inodes ? st->f_bavail - nr_inodes : 0;
	st->f_favail = st->f_ffree;
	st->f_files = nr_inodes + st->f_ffree;
	for (unsigned i = 0; i < 16; i++)
		fsid = fsid << 8 ^ uuid[i] ^ (fsid >> 56);
	st->f_fsid = (unsigned long)fsid;
	st->f_namemax = TFS_NAME_MAX;
	st->f_flag = tfs_posix_read_only(fs) ? ST_RDONLY : 0;
	return 0;
}

/* --- space for metadata --- */

/* Nodes' worth of space (each in every metadata copy) creates leave to write-back. */
#define GROW_MARGIN_NODES 8
/* Per tree, nodes a checkpoint may need beyond those dirty now (a split, a new root). */
#define WB_SLACK_NODES 2

u64 tfs_posix_wb_headroom(struct tfs_fs *fs)
{
	u64 nodes = 0;

	for (unsigned i = 0; i < TFS_BTREE_NR; i++)
		nodes +=
			__atomic_load_n(&fs->btrees[i].nr_dirty, __ATOMIC_RELAXED) + WB_SLACK_NODES;
	return nodes * fs->node_size * fs->metadata_replicas;
}

int tfs_posix_may_grow(struct tfs_fs *fs)
{
	u64 margin = (u64)GROW_MARGIN_NODES * fs->node_size * fs->metadata_replicas +
		     tfs_posix_wb_headroom(fs);
	struct tfs_alloc_usage u;

	tfs_alloc_usage(fs, &u);
	if (u.free >= margin)
		return 0;
	if (u.waiting && tfs_posix_journal(fs)) {
		/* Space freed by commits not yet durable: make it reusable, once. */
		int ret = tfs_journal_flush(tfs_posix_journal(fs));

		if (ret)
			return ret;
		tfs_alloc_usage(fs, &u);
		if (u.free >= margin)
			return 0;
	}
	return -TFS_ERR_alloc_no_space;
}

/* --- errors --- */

void tfs_posix_inconsistent(struct tfs_fs *fs, const char *what)
{
	int action = tfs_posix_error_action(fs);

	fprintf(stderr, "tinyfs: filesystem inconsistency: %s\n", what);
	switch (action) {
	case TFS_ON_ERROR_panic:
		fprintf(stderr, "tinyfs: errors=panic: stopping\n");
		abort();
	case TFS_ON_ERROR_ro:
		fprintf(stderr, "tinyfs: errors=ro: no more changes\n");
		if (tfs_posix_journal(fs))
			tfs_journal_halt(tfs_posix_journal(fs));
		break;
	default:
		break;
	}
}

/* --- life --- */

/* Finishes the cleanup orphan key k records (see fs_format.h). */
static int orphan_finish(struct tfs_fs *fs, tfs_ino_t ino, u64 flags)
{
	struct tfs_inode_mem *im;
	struct tfs_btree_trans trans;
	int ret = tfs_iget_locked(fs, ino, true, &im);

	if (ret == -ENOENT) {
		/* Removals delete the inode and its orphan key together: a corrupt state. */
		fprintf(stderr, "inode %llu: orphan key without an inode; dropping the key\n",
			(unsigned long long)ino);
		tfs_posix_trans_init(&trans, fs);
		ret = tfs_orphan_del(&trans, ino) ?: tfs_posix_commit(&trans, NULL);
		tfs_trans_exit(&trans);
		return ret;
	}
	if (ret)
		return ret;
	if (!im->ui.nlink) {
		ret = tfs_inode_remove(fs, im);
	} else {
		if (flags & TFS_ORPHAN_truncate) {
			/* The size went down first: drop what lies past it. */
			struct tfs_inode_unpacked ui = im->ui;
			u64 seq;

			im->ui.size = UINT64_MAX;
			ret = tfs_data_truncate(fs, im, &ui, &seq);
			if (ret) {
				im->ui = ui;
				__atomic_fetch_add(&im->blocks_changes, 1, __ATOMIC_RELEASE);
			}
		}
		tfs_posix_trans_init(&trans, fs);
		ret = ret ?: tfs_orphan_del(&trans, ino) ?: tfs_posix_commit(&trans, NULL);
		tfs_trans_exit(&trans);
	}
	tfs_iput_unlock(fs, im);
	return ret;
}

static int orphans_process(struct tfs_fs *fs)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct {
		tfs_ino_t ino;
		u64 flags;
	} *list = NULL;
	size_t nr = 0, size = 0;
	int ret;

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_orphans, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_orphan *o = tfs_bkey_val(k);

		/* Only orphan keys (the engine's tests put other types everywhere). */
		if (k->type != TFS_BKEY_orphan)
			continue;
		if (nr == size) {
			void *n = realloc(list, (size ? size * 2 : 16) * sizeof(*list));

			if (!n) {
				ret = -ENOMEM;
				break;
			}
			list = n;
			size = size ? size * 2 : 16;
		}
		list[nr].ino = le64_to_cpu(k->inode);
		list[nr].flags = tfs_bkey_val_bytes(k) >= sizeof(*o) ? le64_to_cpu(o->flags) : 0;
		nr++;
	}
	tfs_btree_iter_exit(&iter);
	for (size_t i = 0; !ret && i < nr; i++) {
		ret = orphan_finish(fs, list[i].ino, list[i].flags);
		if (ret)
			fprintf(stderr, "inode %llu: finishing its orphan cleanup failed: %s\n",
				(unsigned long long)list[i].ino, tfs_err_str(ret));
	}
	if (nr && !ret && tfs_posix(fs)->c.orphans_reclaimed)
		fprintf(stderr, "tinyfs: reclaimed %llu orphaned inodes\n",
			(unsigned long long)tfs_posix(fs)->c.orphans_reclaimed);
	free(list);
	return ret;
}

/*
 * The inode count (the accounting key: no scan) and the next free number:
 * past the last inode key (one leaf read, not the whole btree).
 */
static int inodes_scan(struct tfs_fs *fs)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 nr = 0, max = TFS_ROOT_INO;
	int ret = tfs_acct_read(fs, TFS_ACCT_inodes, 0, &nr);

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_inodes, TFS_POS_MIN, TFS_POS_MAX);
	tfs_btree_iter_set_pos(&iter, TFS_POS_MAX);
	ret = ret ?: tfs_btree_iter_prev(&iter, &k);
	if (!ret && k)
		max = max_t(u64, max, le64_to_cpu(k->inode));
	tfs_btree_iter_exit(&iter);
	/* Orphans may name inodes whose keys went (they are still reserved). */
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_orphans, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = ret ?: tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k))
		max = max_t(u64, max, le64_to_cpu(k->inode));
	tfs_btree_iter_exit(&iter);
	p->nr_inodes = nr;
	p->next_ino = max + 1;
	return ret;
}

static int posix_stop(struct tfs_fs *fs)
{
	tfs_posix_exit(fs);
	return 0;
}

int tfs_posix_init(struct tfs_fs *fs)
{
	struct tfs_posix *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return -ENOMEM;
	p->fs = fs;
	p->block_size = tfs_posix_block_size(fs);
	p->block_bits = (unsigned)__builtin_ctz(p->block_size);
	p->table_size = 1024;
	p->table = calloc(p->table_size, sizeof(*p->table));
	if (!p->table) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->table_lock, NULL);
	pthread_mutex_init(&p->rename_lock, NULL);
	pthread_mutex_init(&p->syncfs_lock, NULL);
	p->lru.lru_next = p->lru.lru_prev = &p->lru;
	/*
	 * Unused inodes kept (a few hundred bytes each: 128k is some 40 MiB at
	 * most).  A directory of 100k files listed with readdirplus, then
	 * stat'ed and removed, used to reload every inode twice from the
	 * btree with 4096.
	 */
	p->lru_max = 128 * 1024;
	p->files.next = p->files.prev = &p->files;
	p->name_hash = tfs_name_hash_default;
	fs->posix = p;
	fs->posix_stop = posix_stop;

	ret = inodes_scan(fs);
	if (!ret && !tfs_posix_read_only(fs))
		ret = orphans_process(fs);
	if (ret) {
		fprintf(stderr, "tinyfs: starting the filesystem layer failed: %s\n",
			tfs_err_str(ret));
		tfs_posix_exit(fs);
	}
	return ret;
}

void tfs_posix_exit(struct tfs_fs *fs)
{
	struct tfs_posix *p = tfs_posix(fs);

	if (!p)
		return;
	/* Files still open: dropped (an unlinked one stays an orphan for the next open). */
	while (p->files.next != &p->files) {
		struct tfs_file *f = p->files.next;

		f->prev->next = f->next;
		f->next->prev = f->prev;
		free(f);
	}
	for (size_t i = 0; i < p->table_size; i++)
		for (struct tfs_inode_mem *im = p->table[i], *next; im; im = next) {
			next = im->hnext;
			pthread_rwlock_destroy(&im->lock);
			free(im->target);
			free(im);
		}
	free(p->table);
	pthread_mutex_destroy(&p->table_lock);
	pthread_mutex_destroy(&p->rename_lock);
	pthread_mutex_destroy(&p->syncfs_lock);
	free(p);
	fs->posix = NULL;
	fs->posix_stop = NULL;
}

int tfs_posix_format(struct tfs_fs *fs)
{
	struct tfs_btree_trans trans;
	struct tfs_inode_unpacked ui;
	struct tfs_bkey_buf kb;
	const struct tfs_sb *sb = tfs_posix_sb(fs);
	const u8 *uuid = tfs_posix_uuid(fs);
	/* From the superblock only: mkfs with a fixed uuid and time makes the same bytes. */
	s64 t = sb ? (s64)le64_to_cpu(sb->time_created) * 1000000000 : tfs_now_ns();
	int ret;

	memset(&ui, 0, sizeof(ui));
	ui.mode = S_IFDIR | 0755;
	ui.nlink = 2;
	ui.parent = TFS_ROOT_INO;
	ui.generation = 1;
	ui.hash_seed = tfs_siphash(0x726f6f74ULL /* "root" */, 0, uuid, 16);
	ui.atime = ui.mtime = ui.ctime = ui.btime = t;
	tfs_inode_pack(&kb, TFS_ROOT_INO, &ui);
	tfs_posix_trans_init(&trans, fs);
	ret = tfs_trans_update(&trans, TFS_BTREE_inodes, &kb.k) ?: tfs_posix_commit(&trans, NULL);
	tfs_trans_exit(&trans);
	if (!ret) {
		tfs_posix(fs)->nr_inodes = 1;
		tfs_posix(fs)->next_ino = TFS_ROOT_INO + 1;
	}
	return ret;
}

void tfs_posix_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	struct tfs_posix *p = tfs_posix(fs);
	const struct tfs_posix_counters *c;
	u64 nr_cached, nr_lru;

	if (!p)
		return;
	c = &p->c;
	/* The table's counts under its lock; the counters are updated atomically. */
	pthread_mutex_lock(&p->table_lock);
	nr_cached = p->nr_cached;
	nr_lru = p->nr_lru;
	pthread_mutex_unlock(&p->table_lock);
#define LD(x) ((unsigned long long)__atomic_load_n(&(x), __ATOMIC_RELAXED))
	prt_printf(out, "inodes %llu next_ino %llu cached %llu (lru %llu)\n", LD(p->nr_inodes),
		   LD(p->next_ino), (unsigned long long)nr_cached, (unsigned long long)nr_lru);
	prt_printf(out, "inodes loaded %llu evicted %llu\n", LD(c->inodes_loaded),
		   LD(c->inodes_evicted));
	prt_printf(out, "data written %llu read %llu rmw blocks %llu\n", LD(c->data_bytes_written),
		   LD(c->data_bytes_read), LD(c->data_blocks_rmw));
	prt_printf(out, "data errors: write %llu read %llu checksum %llu replica fallbacks %llu\n",
		   LD(c->data_write_errors), LD(c->data_read_errors), LD(c->data_csum_errors),
		   LD(c->data_replica_fallbacks));
	prt_printf(out, "fsyncs %llu flushed %llu already durable %llu\n", LD(c->fsyncs),
		   LD(c->fsync_flushes), LD(c->fsync_skipped));
	prt_printf(out,
		   "orphans added %llu reclaimed %llu; removed with their name %llu; enospc flush "
		   "retries %llu\n",
		   LD(c->orphans_added), LD(c->orphans_reclaimed), LD(c->removed_at_once),
		   LD(c->enospc_flush_retries));
	prt_printf(out, "getxattr lookups skipped (inode without xattrs) %llu\n",
		   LD(c->xattr_lookups_skipped));
#undef LD
}
