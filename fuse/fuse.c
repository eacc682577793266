// SPDX-License-Identifier: GPL-2.0
/*
 * The lowlevel operations: each handler decodes the request, calls one
 * fs/fs.h function and replies once (libfuse's example/passthrough_ll.c is
 * the model).  Codes become errnos here and nowhere else.
 *
 * Kernel caching, and why it is safe: the daemon is the only writer of the
 * filesystem, so entries, attributes, negative lookups and page contents
 * are cached by the kernel for a long time (entry/attr/negative timeouts,
 * keep_cache), and every change made through the mount invalidates what it
 * touches in the kernel.  With the writeback cache the kernel owns mtime,
 * ctime and the size of regular files and sends them back with setattr.
 *
 * Set-user-ID and set-group-ID bits: HANDLE_KILLPRIV is turned off by
 * default.  With it (protocol v1, all libfuse 3.14 offers) the kernel
 * leaves clearing the bits to the daemon, but a write through the
 * writeback cache reaches the daemon later, from the flusher, without the
 * writer's identity or capabilities: the daemon cannot tell a write by root
 * (bits kept) from one by another user (bits cleared), and fstat right
 * after write(2) would still show them.  Without it the kernel decides as
 * it does for ext4 (should_remove_suid(): not for CAP_FSETID) and sends a
 * setattr with the new mode, which fs/ applies; where FUSE's kernel side
 * falls short of ext4 (S_ISGID without group exec, open with O_TRUNC) the
 * daemon finishes it (op_setattr()'s tfs_setattr_as() with
 * TFS_SETATTR_CALLER_SGID, op_open()'s tfs_open_as()).
 * `-o killpriv` restores the v1 behaviour: then the daemon clears the bits
 * itself at a chown, truncate or write's setattr, by the caller's identity
 * (TFS_SETATTR_KILLPRIV).  fs/ decides both from the mode under the
 * inode's lock, in the change's own commit.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fuse/cpulat.h"
#include "fuse/tfs_fuse.h"
#include "lib/errcode.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

static const char *const tfs_fuse_op_names[] = {
#define x(n) #n,
	TFS_FUSE_OPS(x)
#undef x
};

/* One open file: the fh the kernel holds. */
struct tfs_fuse_file {
	struct tfs_file *f;
	/* Atomic: tfs_file_blocks_changes() + 1 at op_fsync()'s last invalidation (0: none). */
	u64 blocks_inval;
	struct tfs_fuse_file *prev, *next;
};

static inline struct tfs_fuse *tf_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct tfs_fuse_file *ff_of(const struct fuse_file_info *fi)
{
	return (struct tfs_fuse_file *)(uintptr_t)fi->fh;
}

static inline void count(struct tfs_fuse *tf, enum tfs_fuse_op op)
{
	atomic_fetch_add_explicit(&tf->nr_ops[op], 1, memory_order_relaxed);
}

/*
 * A handler's service time, from its start to its return (the reply sent):
 * `tinyfs stats MNT fuse` shows the mean and the longest, so a request
 * that waits in the daemon (a lock, the journal, the device) shows up
 * apart from the kernel's round trip and the scheduler.
 */
struct op_clock {
	struct tfs_fuse *tf;
	enum tfs_fuse_op op;
	u64 start;
};

static u64 clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000 + (u64)ts.tv_nsec;
}

static void op_clock_end(struct op_clock *c)
{
	u64 d = clock_ns() - c->start;
	u64 max = atomic_load_explicit(&c->tf->op_max_ns[c->op], memory_order_relaxed);

	atomic_fetch_add_explicit(&c->tf->op_ns[c->op], d, memory_order_relaxed);
	while (d > max &&
	       !atomic_compare_exchange_weak_explicit(&c->tf->op_max_ns[c->op], &max, d,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* count(), and the handler is timed until it returns. */
#define count_timed(tf, op)                                                          \
	struct op_clock op_clock                                                     \
		__attribute__((cleanup(op_clock_end))) = { (tf), (op), clock_ns() }; \
	count((tf), (op))

/* The errno a code stands for (positive), counting the failure. */
static int err_of(struct tfs_fuse *tf, enum tfs_fuse_op op, long ret)
{
	if (!ret)
		return 0;
	atomic_fetch_add_explicit(&tf->nr_errors[op], 1, memory_order_relaxed);
	return -tfs_err_class((int)ret);
}

static void reply_err(fuse_req_t req, enum tfs_fuse_op op, long ret)
{
	fuse_reply_err(req, err_of(tf_of(req), op, ret));
}

/*
 * A directory's st_blksize: the size of each listing request.  glibc's
 * opendir() sizes its getdents64() buffer by it (32 KiB up to 1 MiB), and
 * since 6.16 the kernel asks READDIR(PLUS) for that much (up to max_pages,
 * 1 MiB here) instead of one page.  Each readdirplus entry of a short name
 * takes 160 bytes: 204 per request at 32 KiB, 1638 at 256 KiB, so a listing
 * of 10k names makes 7 round trips instead of 50.  Not more: the kernel
 * allocates the whole buffer for every call, and from 512 KiB up that
 * showed in a walk of small directories (docs/design-notes.md, readdir).
 */
#define TFS_FUSE_DIR_BLKSIZE (256U << 10)

static void stat_of(const struct tfs_stat *t, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = t->ino;
	st->st_mode = t->mode;
	st->st_nlink = t->nlink;
	st->st_uid = t->uid;
	st->st_gid = t->gid;
	st->st_rdev = t->rdev;
	st->st_size = (off_t)t->size;
	st->st_blocks = (blkcnt_t)t->blocks;
	st->st_blksize = S_ISDIR(t->mode) ? TFS_FUSE_DIR_BLKSIZE : t->blksize;
	st->st_atim = t->atime;
	st->st_mtim = t->mtime;
	st->st_ctim = t->ctime;
}

static void entry_of(struct tfs_fuse *tf, const struct tfs_stat *t, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = t->ino;
	e->generation = t->generation;
	e->entry_timeout = tf->opts->entry_timeout;
	e->attr_timeout = tf->opts->attr_timeout;
	stat_of(t, &e->attr);
}

/*
 * The caller, and for creates (mknod, mkdir, create: the requests that
 * carry one) its umask, which fs/ applies when the directory has no
 * default ACL (FUSE_POSIX_ACL, see op_init()).
 */
static struct tfs_ctx ctx_of(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);

	return (struct tfs_ctx){ .uid = c->uid,
				 .gid = c->gid,
				 .pid = (u32)c->pid,
				 .umask = c->umask,
				 .posix_acl = tf_of(req)->posix_acl };
}

static bool caller_keeps_sgid(void *arg, u32 gid);
static bool req_has_fsetid(void *arg);

/*
 * ctx_of() with the callbacks fs/ asks where a set-ID rule depends on the
 * caller's groups or CAP_FSETID (read from /proc, only when asked).
 */
static struct tfs_ctx caller_ctx(fuse_req_t req)
{
	struct tfs_ctx ctx = ctx_of(req);

	ctx.keeps_sgid = caller_keeps_sgid;
	ctx.has_fsetid = req_has_fsetid;
	ctx.keeps_sgid_arg = req;
	return ctx;
}

/*
 * Replies with a new entry and counts the kernel's lookup of it.  The count
 * is taken before the reply (a forget may follow the reply at once) and
 * given back if the reply did not reach the kernel.
 */
static void reply_entry(fuse_req_t req, const struct tfs_stat *t)
{
	struct tfs_fuse *tf = tf_of(req);
	struct fuse_entry_param e;

	entry_of(tf, t, &e);
	tfs_nlookup_get(tf->nlookup, t->ino, 1);
	if (fuse_reply_entry(req, &e))
		tfs_nlookup_put(tf->nlookup, t->ino, 1);
}

/* Open flags as fs/ should see them. */
static int open_flags(struct tfs_fuse *tf, int flags)
{
	/*
	 * With the writeback cache the kernel may read pages of a file opened
	 * write-only (to fill a partly written page) through this handle, and
	 * it positions O_APPEND writes itself (libfuse's writeback_cache docs).
	 */
	if (tf->writeback) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

static struct tfs_fuse_file *file_add(struct tfs_fuse *tf, struct tfs_file *f)
{
	struct tfs_fuse_file *ff = calloc(1, sizeof(*ff));

	if (!ff)
		return NULL;
	ff->f = f;
	pthread_mutex_lock(&tf->files_lock);
	ff->next = tf->files;
	if (tf->files)
		tf->files->prev = ff;
	tf->files = ff;
	tf->nr_files++;
	pthread_mutex_unlock(&tf->files_lock);
	return ff;
}

static void file_del(struct tfs_fuse *tf, struct tfs_fuse_file *ff)
{
	pthread_mutex_lock(&tf->files_lock);
	if (ff->prev)
		ff->prev->next = ff->next;
	else
		tf->files = ff->next;
	if (ff->next)
		ff->next->prev = ff->prev;
	tf->nr_files--;
	pthread_mutex_unlock(&tf->files_lock);
}

static void fill_open(struct tfs_fuse *tf, struct fuse_file_info *fi, struct tfs_fuse_file *ff)
{
	fi->fh = (uintptr_t)ff;
	/* Only this daemon changes files: what the kernel cached is current. */
	fi->keep_cache = 1;
}

/* --- session --- */

/*
 * The kernel reads ahead at most the backing device info's read_ahead_kb,
 * 128 KiB for a FUSE mount, whatever max_readahead the daemon answers (it
 * takes the smaller).  Raised here through sysfs (root only; the mount's
 * bdi is "0:N", its st_dev, found in mountinfo: a stat of the mountpoint
 * would wait for this very INIT): read-ahead then comes in requests as
 * large as max_readahead, read from the device in one I/O each.  Best
 * effort: without it reads work, in smaller requests.
 */
static void set_read_ahead(struct tfs_fuse *tf, unsigned bytes)
{
	char line[4096];
	struct printbuf path = PRINTBUF;
	unsigned maj = 0, min = 0;
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": the last mount on ours is this one. */
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX];
		unsigned a, b;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mnt) == 3 &&
		    !strcmp(mnt, tf->opts->mountpoint) && strstr(line, " - fuse")) {
			maj = a;
			min = b;
			found = true;
		}
	}
	fclose(f);
	if (!found)
		return;
	prt_printf(&path, "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	f = fopen(printbuf_str(&path), "we");
	printbuf_exit(&path);
	if (!f)
		return;
	fprintf(f, "%u\n", bytes >> 10);
	fclose(f);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct tfs_fuse *tf = userdata;
	const struct tfs_mount_opts *o = tf->opts;

	count(tf, TFS_FUSE_OP_init);
	if (o->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/*
	 * Cached targets reach the daemon once: enough for relatime (the read
	 * it counts is the first after a change), not for strictatime, where
	 * every follow and readlink is a read (as on ext4).
	 */
	if ((conn->capable & FUSE_CAP_CACHE_SYMLINKS) && !o->strictatime)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/*
	 * POSIX ACLs as on ext4: the kernel enforces them (it reads
	 * system.posix_acl_access through getxattr, and caches it) and stops
	 * applying the umask; with DONT_MASK it passes the mode unmasked and
	 * the umask apart, and fs/ does posix_acl_create() at creates and
	 * posix_acl_chmod() at chmod.  Only both together: with POSIX_ACL
	 * alone the kernel masks the mode before the default ACL could.
	 */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* Nobody else changes files: mtime changes need not drop cached pages. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* See the top of this file. */
	if (!o->killpriv)
		conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* Splice only when asked: measured slower than copying here (README). */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->max_write = 1U << 20;
	conn->max_readahead = 1U << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	/* -o max_write=, splice_read, readdirplus=, ... override the above. */
	if (tf->conn_opts)
		fuse_apply_conn_info_opts(tf->conn_opts, conn);
	set_read_ahead(tf, conn->max_readahead);
	/* Under files_lock: tinyfs stats may read them while the session starts. */
	pthread_mutex_lock(&tf->files_lock);
	tf->writeback = conn->want & FUSE_CAP_WRITEBACK_CACHE;
	tf->killpriv = conn->want & FUSE_CAP_HANDLE_KILLPRIV;
	/* With DONT_MASK the umask is ours to apply, whatever else was agreed. */
	tf->posix_acl = conn->want & FUSE_CAP_DONT_MASK;
	tf->max_write = conn->max_write;
	pthread_mutex_unlock(&tf->files_lock);
}

static void op_destroy(void *userdata)
{
	count(userdata, TFS_FUSE_OP_destroy);
}

/* --- names --- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_stat st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_lookup);
	ret = tfs_lookup(tf->fs, parent, name, strlen(name), &st);
	/*
	 * Writes of it still behind: the kernel may make a new inode from
	 * these attributes, and with the writeback cache it never takes a
	 * size from us again (the file would read as short as it was).
	 */
	if (!ret && S_ISREG(st.mode) && tfs_wbehind_busy(tf->wbehind, st.ino)) {
		tfs_wbehind_wait(tf->wbehind, st.ino, false);
		ret = tfs_getattr(tf->fs, st.ino, &st);
	}
	if (ret == -ENOENT && tf->opts->negative_timeout > 0) {
		/* A negative entry the kernel caches (ino 0). */
		struct fuse_entry_param e = { .entry_timeout = tf->opts->negative_timeout };

		fuse_reply_entry(req, &e);
		return;
	}
	if (ret)
		reply_err(req, TFS_FUSE_OP_lookup, ret);
	else
		reply_entry(req, &st);
}

static void forget_one(struct tfs_fuse *tf, fuse_ino_t ino, u64 nlookup)
{
	if (!tfs_nlookup_put(tf->nlookup, ino, nlookup))
		atomic_fetch_add_explicit(&tf->nr_forget_mismatch, 1, memory_order_relaxed);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct tfs_fuse *tf = tf_of(req);

	count_timed(tf, TFS_FUSE_OP_forget);
	forget_one(tf, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t nr, struct fuse_forget_data *forgets)
{
	struct tfs_fuse *tf = tf_of(req);

	count_timed(tf, TFS_FUSE_OP_forget_multi);
	for (size_t i = 0; i < nr; i++)
		forget_one(tf, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_stat st;
	struct stat s;
	int ret;

	count_timed(tf, TFS_FUSE_OP_getattr);
	tfs_wbehind_wait(tf->wbehind, ino, false); /* st_blocks */
	ret = tfs_getattr(tf->fs, ino, &st);
	if (ret) {
		reply_err(req, TFS_FUSE_OP_getattr, ret);
		return;
	}
	stat_of(&st, &s);
	fuse_reply_attr(req, &s, tf->opts->attr_timeout);
}

static void accessed(struct tfs_fuse *tf, fuse_ino_t ino, bool dir);

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_setattr sa = { 0 };
	struct tfs_ctx ctx;
	struct tfs_stat st;
	struct stat s;
	int ret;

	count_timed(tf, TFS_FUSE_OP_setattr);
	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= TFS_SETATTR_MODE;
		sa.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= TFS_SETATTR_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= TFS_SETATTR_GID;
		sa.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		sa.valid |= TFS_SETATTR_SIZE;
		sa.size = (u64)attr->st_size;
		/* After the queued writes (which leave times and modes alone). */
		tfs_wbehind_wait(tf->wbehind, ino, false);
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		sa.valid |= TFS_SETATTR_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= TFS_SETATTR_ATIME;
		sa.atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		sa.valid |= TFS_SETATTR_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= TFS_SETATTR_MTIME;
		sa.mtime = attr->st_mtim;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= TFS_SETATTR_CTIME;
		sa.ctime = attr->st_ctim;
	}
	/*
	 * The set-ID bits that FUSE's kernel side leaves on, dropped by fs/ by
	 * the caller's identity under the inode's lock.  CALLER_SGID: S_ISGID
	 * without S_IXGRP on a non-directory; the kernel (since 6.2,
	 * setattr_should_drop_sgid()) drops it on a write, truncate or chown
	 * by a caller outside the file's group without CAP_FSETID, as ext4
	 * shows, but FUSE's fuse_setattr() decides again with the older rule
	 * (only when group-executable) and sends no mode (with
	 * HANDLE_KILLPRIV, no mode at all).  What it sends is a setattr in the
	 * caller's context: with the size (truncate), the owner (chown), the
	 * mode without S_ISUID (a write, fallocate or chown of a set-user-ID
	 * file) or nothing at all (a write's file_remove_privs()).  A chmod by
	 * a non-member reaches here without S_ISGID already (setattr_prepare()).
	 * KILLPRIV (HANDLE_KILLPRIV v1, `-o killpriv`): fuse_setattr() drops the
	 * mode change the kernel computed for a truncate or a write's
	 * file_remove_privs(), and fs/ decides as should_remove_suid() does for
	 * ext4; a chown needs nothing more (fs/ drops S_ISUID and a
	 * group-executable S_ISGID of any non-directory).
	 */
	ctx = caller_ctx(req);
	sa.valid |= TFS_SETATTR_CALLER_SGID | (tf->killpriv ? TFS_SETATTR_KILLPRIV : 0);
	ret = tfs_setattr_as(tf->fs, &ctx, ino, fi && fi->fh ? ff_of(fi)->f : NULL, &sa, &st);
	if (ret && tfs_err_class(ret) == -ENOENT && !fi &&
	    !(sa.valid & ~(TFS_SETATTR_ATIME | TFS_SETATTR_MTIME | TFS_SETATTR_CTIME |
			   TFS_SETATTR_CALLER_SGID | TFS_SETATTR_KILLPRIV))) {
		/*
		 * The kernel writes back an inode's cached times (writeback
		 * cache) after its last close, and so after an unlink freed
		 * it: nobody can see those times any more.  An error here
		 * would land in the superblock's writeback error and fail the
		 * next syncfs() of an unrelated caller.  The kernel ignores
		 * this reply's attributes.
		 */
		memset(&s, 0, sizeof(s));
		s.st_ino = ino;
		s.st_mode = S_IFREG;
		s.st_atim = attr->st_atim;
		s.st_mtim = attr->st_mtim;
		s.st_ctim = attr->st_ctim;
		fuse_reply_attr(req, &s, 0);
		return;
	}
	if (ret) {
		reply_err(req, TFS_FUSE_OP_setattr, ret);
		return;
	}
	stat_of(&st, &s);
	fuse_reply_attr(req, &s, tf->opts->attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_fuse *tf = tf_of(req);
	char buf[PATH_MAX + 1];
	ssize_t n;

	count_timed(tf, TFS_FUSE_OP_readlink);
	n = tfs_readlink(tf->fs, ino, buf, sizeof(buf) - 1);
	if (n < 0) {
		reply_err(req, TFS_FUSE_OP_readlink, n);
		return;
	}
	buf[n] = '\0';
	/*
	 * Read: atime per relatime, as ext4 does on every follow and readlink.
	 * The kernel caches the target (CACHE_SYMLINKS) and asks again only
	 * after the symlink left its cache, but the read relatime counts is
	 * the first after a change, which always reaches here (strictatime
	 * mounts do not cache targets: op_init).
	 */
	accessed(tf, ino, false);
	fuse_reply_readlink(req, buf);
}

/*
 * dir's entries changed (or may have: called after the call whatever its
 * result, before the reply): the next opendir drops the kernel's cached
 * listing of it (op_opendir).
 */
static void dir_changed(struct tfs_fuse *tf, fuse_ino_t dir)
{
	atomic_fetch_add_explicit(&tf->dir_changes[dir % TFS_FUSE_RDC_SLOTS], 1,
				  memory_order_release);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_stat st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_mknod);
	ret = tfs_mknod(tf->fs, &ctx, parent, name, strlen(name), mode, rdev, &st);
	dir_changed(tf, parent);
	if (ret)
		reply_err(req, TFS_FUSE_OP_mknod, ret);
	else
		reply_entry(req, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_stat st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_mkdir);
	ret = tfs_mkdir(tf->fs, &ctx, parent, name, strlen(name), mode & 07777, &st);
	dir_changed(tf, parent);
	if (ret)
		reply_err(req, TFS_FUSE_OP_mkdir, ret);
	else
		reply_entry(req, &st);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_stat st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_symlink);
	ret = tfs_symlink(tf->fs, &ctx, parent, name, strlen(name), link, &st);
	dir_changed(tf, parent);
	if (ret)
		reply_err(req, TFS_FUSE_OP_symlink, ret);
	else
		reply_entry(req, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_stat st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_link);
	ret = tfs_link(tf->fs, ino, newparent, newname, strlen(newname), &st);
	dir_changed(tf, newparent);
	if (ret)
		reply_err(req, TFS_FUSE_OP_link, ret);
	else
		reply_entry(req, &st);
}

/*
 * Before a call that may remove name's last link: while the kernel counts
 * lookups of its inode, the inode is held open until the forget (a pin,
 * see fuse/nlookup.c), so that a GETATTR or OPEN of it meanwhile finds it
 * with nlink 0 instead of ENOENT, as ext4 keeps an inode the kernel still
 * references.  The unlink then leaves an orphan that the forget removes.
 * Best effort: without a pin the call still runs.
 */
static void pin_victim(struct tfs_fuse *tf, fuse_ino_t dir, const char *name)
{
	struct tfs_stat st;
	struct tfs_file *f;

	if (tfs_lookup(tf->fs, dir, name, strlen(name), &st) ||
	    !tfs_nlookup_wants_pin(tf->nlookup, st.ino) || tfs_open(tf->fs, st.ino, O_RDONLY, &f))
		return;
	f = tfs_nlookup_pin(tf->nlookup, st.ino, f);
	if (f)
		tfs_release(tf->fs, f);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fuse *tf = tf_of(req);
	int ret;

	count_timed(tf, TFS_FUSE_OP_unlink);
	pin_victim(tf, parent, name);
	ret = tfs_unlink(tf->fs, parent, name, strlen(name));
	dir_changed(tf, parent);
	reply_err(req, TFS_FUSE_OP_unlink, ret);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fuse *tf = tf_of(req);
	int ret;

	count_timed(tf, TFS_FUSE_OP_rmdir);
	pin_victim(tf, parent, name);
	ret = tfs_rmdir(tf->fs, parent, name, strlen(name));
	dir_changed(tf, parent);
	reply_err(req, TFS_FUSE_OP_rmdir, ret);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	unsigned tflags = 0;
	int ret;

	count_timed(tf, TFS_FUSE_OP_rename);
	/* Anything newer than RENAME_WHITEOUT: not supported (fs/ checks the combinations). */
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		reply_err(req, TFS_FUSE_OP_rename, -EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		tflags |= TFS_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		tflags |= TFS_RENAME_EXCHANGE;
	/* The kernel checked CAP_MKNOD; the whiteout is the caller's. */
	if (flags & RENAME_WHITEOUT)
		tflags |= TFS_RENAME_WHITEOUT;
	/* A replaced name's inode may lose its last link. */
	if (!(tflags & (TFS_RENAME_NOREPLACE | TFS_RENAME_EXCHANGE)))
		pin_victim(tf, newparent, newname);
	ret = tfs_rename_as(tf->fs, &ctx, parent, name, strlen(name), newparent, newname,
			    strlen(newname), tflags);
	dir_changed(tf, parent);
	dir_changed(tf, newparent);
	reply_err(req, TFS_FUSE_OP_rename, ret);
}

/* --- files --- */

/*
 * ino is read: atime per relatime or strictatime (tfs_touch_atime()).  FUSE inodes are
 * S_NOATIME in the kernel, and reads of cached pages never reach the
 * daemon, so a file counts as read when it is opened read-only (and a
 * directory when listed from its start).  When atime moved, the kernel's
 * cached attributes are dropped (only those: offset -1).  Best effort:
 * a failure leaves atime as it was and fails nothing.
 */
static void accessed(struct tfs_fuse *tf, fuse_ino_t ino, bool dir)
{
	if (tf->opts->noatime || (dir && tf->opts->nodiratime))
		return;
	if (tfs_touch_atime(tf->fs, ino, tf->opts->strictatime) == 1)
		fuse_lowlevel_notify_inval_inode(tf->se, ino, -1, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	struct tfs_fuse_file *ff;
	struct tfs_file *f;
	int ret;

	count_timed(tf, TFS_FUSE_OP_open);
	if (fi->flags & O_TRUNC) {
		tfs_wbehind_wait(tf->wbehind, ino, false);
		/*
		 * The kernel's do_truncate() asks to clear the set-ID bits as
		 * truncate(2) does (should_remove_suid()), but with
		 * atomic_o_trunc FUSE leaves the truncation to this open and
		 * drops that request: fs/ drops them by the opener's identity,
		 * in the truncation's commit and only if the open succeeds.
		 */
		ctx = caller_ctx(req);
	}
	ret = tfs_open_as(tf->fs, &ctx, ino, open_flags(tf, fi->flags), &f);
	if (ret) {
		reply_err(req, TFS_FUSE_OP_open, ret);
		return;
	}
	ff = file_add(tf, f);
	if (!ff) {
		tfs_release(tf->fs, f);
		reply_err(req, TFS_FUSE_OP_open, -ENOMEM);
		return;
	}
	fill_open(tf, fi, ff);
	if ((fi->flags & O_ACCMODE) == O_RDONLY)
		accessed(tf, ino, false);
	if (fuse_reply_open(req, fi)) {
		/* The open was interrupted: the kernel will never release it. */
		file_del(tf, ff);
		tfs_release(tf->fs, f);
		free(ff);
	}
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_ctx ctx = ctx_of(req);
	struct fuse_entry_param e;
	struct tfs_fuse_file *ff;
	struct tfs_stat st;
	struct tfs_file *f;
	int ret;

	count_timed(tf, TFS_FUSE_OP_create);
	ret = tfs_create(tf->fs, &ctx, parent, name, strlen(name), mode & 07777,
			 open_flags(tf, fi->flags), &f, &st);
	dir_changed(tf, parent);
	if (ret) {
		reply_err(req, TFS_FUSE_OP_create, ret);
		return;
	}
	ff = file_add(tf, f);
	if (!ff) {
		tfs_release(tf->fs, f);
		reply_err(req, TFS_FUSE_OP_create, -ENOMEM);
		return;
	}
	fill_open(tf, fi, ff);
	entry_of(tf, &st, &e);
	tfs_nlookup_get(tf->nlookup, st.ino, 1);
	if (fuse_reply_create(req, &e, fi)) {
		tfs_nlookup_put(tf->nlookup, st.ino, 1);
		file_del(tf, ff);
		tfs_release(tf->fs, f);
		free(ff);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	ssize_t n;
	char *buf;

	count(tf, TFS_FUSE_OP_read);
	tfs_wbehind_wait(tf->wbehind, ino, false);
	buf = malloc(size ?: 1);
	if (!buf) {
		reply_err(req, TFS_FUSE_OP_read, -ENOMEM);
		return;
	}
	n = tfs_read(tf->fs, ff_of(fi)->f, buf, size, (u64)off);
	if (n < 0) {
		reply_err(req, TFS_FUSE_OP_read, n);
	} else {
		atomic_fetch_add_explicit(&tf->bytes_read, (u64)n, memory_order_relaxed);
		fuse_reply_buf(req, buf, (size_t)n);
	}
	free(buf);
}

/*
 * Writes data and replies.  A write the kernel's writeback cache sends
 * (writepage) that fails with an I/O error is acknowledged: fs/ recorded the
 * error in the inode's error sequence, so the next fsync of every open file
 * reports it once.  Failing the writepage instead would make the kernel
 * report it too, from its own error sequence, before asking the daemon: each
 * descriptor's fsync would then see the error twice.  Other errors (ENOSPC,
 * EFBIG, EROFS) are not in the sequence and go back to the kernel.
 */
static void do_write(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, const void *data,
		     size_t len, off_t off)
{
	struct tfs_fuse *tf = tf_of(req);
	ssize_t n;

	/* The kernel's write-back (it owns the times then): answered now, written behind. */
	if (fi->writepage &&
	    tfs_wbehind_write(tf->wbehind, ino, ff_of(fi)->f, data, len, (u64)off)) {
		atomic_fetch_add_explicit(&tf->bytes_written, (u64)len, memory_order_relaxed);
		fuse_reply_write(req, len);
		return;
	}
	/* Not queued: after the queued ones, in order. */
	tfs_wbehind_wait(tf->wbehind, ino, false);
	n = tfs_write(tf->fs, ff_of(fi)->f, data, len, (u64)off);
	if (n < 0 && fi->writepage && tfs_err_class((int)n) == -EIO) {
		err_of(tf, TFS_FUSE_OP_write, n);
		atomic_fetch_add_explicit(&tf->nr_wb_errors_deferred, 1, memory_order_relaxed);
		n = (ssize_t)len;
	}
	if (n < 0) {
		reply_err(req, TFS_FUSE_OP_write, n);
		return;
	}
	atomic_fetch_add_explicit(&tf->bytes_written, (u64)n, memory_order_relaxed);
	fuse_reply_write(req, (size_t)n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	count_timed(tf_of(req), TFS_FUSE_OP_write);
	do_write(req, ino, fi, buf, size, off);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
			 struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	size_t len = fuse_buf_size(bufv);

	count_timed(tf, TFS_FUSE_OP_write);
	if (bufv->count == 1 && bufv->idx == 0 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD)) {
		/* The common case: the data is in libfuse's request buffer already. */
		do_write(req, ino, fi, (const char *)bufv->buf[0].mem + bufv->off, len - bufv->off,
			 off);
		return;
	}
	/* Spliced from the device (-o splice_read): copy it out first. */
	{
		struct fuse_bufvec mem = FUSE_BUFVEC_INIT(len);
		ssize_t got;

		mem.buf[0].mem = malloc(len ?: 1);
		if (!mem.buf[0].mem) {
			reply_err(req, TFS_FUSE_OP_write, -ENOMEM);
			return;
		}
		got = fuse_buf_copy(&mem, bufv, 0);
		if (got < 0)
			reply_err(req, TFS_FUSE_OP_write, got);
		else
			do_write(req, ino, fi, mem.buf[0].mem, (size_t)got, off);
		free(mem.buf[0].mem);
	}
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/*
	 * close(2): the kernel has written its dirty pages before asking.
	 * Nothing to do: durability is fsync's, and reporting a writeback
	 * error here would use up the one report fsync owes each descriptor.
	 * ENOSYS tells the kernel so once (it sets no_flush and never asks
	 * again): every later close saves a round trip, and still writes its
	 * pages back and reports their errors as before (fuse_flush()).
	 */
	count(tf_of(req), TFS_FUSE_OP_flush);
	fuse_reply_err(req, ENOSYS);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_fuse_file *ff = ff_of(fi);
	int ret;

	count_timed(tf, TFS_FUSE_OP_release);
	file_del(tf, ff);
	/* Writes of it still queued: released after them, without waiting here. */
	if (tfs_wbehind_release(tf->wbehind, ino, ff->f, ff)) {
		fuse_reply_err(req, 0);
		return;
	}
	ret = tfs_release(tf->fs, ff->f);
	free(ff);
	reply_err(req, TFS_FUSE_OP_release, ret);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	int ret, werr;

	count_timed(tf, TFS_FUSE_OP_fsync);
	/* The queued writes first: then tfs_fsync() makes them durable. */
	werr = tfs_wbehind_wait_fsync(tf->wbehind, ino, datasync);
	ret = tfs_fsync(tf->fs, ff_of(fi)->f, datasync) ?: werr;
	/*
	 * The kernel's cached attributes predate the write-back (st_blocks
	 * 0 for data just written): drop them so the next stat asks.  Only
	 * the attributes (offset -1): no page cache, no inode lock taken.
	 * Only when st_blocks changed since this file's last invalidation
	 * here: what the kernel asked for after that is still right, and a
	 * dropped cache costs the next write(2) a GETATTR round trip (the
	 * writeback cache refreshes size and mode first): an append+fsync
	 * loop paid one per iteration.
	 */
	if (!ret) {
		struct tfs_fuse_file *ff = ff_of(fi);
		u64 c = tfs_file_blocks_changes(ff->f) + 1;

		if (__atomic_load_n(&ff->blocks_inval, __ATOMIC_RELAXED) != c) {
			fuse_lowlevel_notify_inval_inode(tf->se, ino, -1, 0);
			__atomic_store_n(&ff->blocks_inval, c, __ATOMIC_RELAXED);
		} else {
			atomic_fetch_add_explicit(&tf->nr_fsync_inval_skipped, 1,
						  memory_order_relaxed);
		}
	}
	reply_err(req, TFS_FUSE_OP_fsync, ret);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);

	count(tf, TFS_FUSE_OP_fallocate);
	tfs_wbehind_wait(tf->wbehind, ino, false);
	reply_err(req, TFS_FUSE_OP_fallocate,
		  tfs_fallocate(tf->fs, ff_of(fi)->f, mode, (u64)off, (u64)len));
}

/*
 * The kernel's dirty pages of ino, written back: SEEK_DATA/SEEK_HOLE must
 * count data the writeback cache still holds, and the kernel asks before
 * writing it (it holds the inode lock, so fsync is out).  The file is opened
 * through the mount by file handle (FUSE's encoding: node id high and low,
 * generation) and the range synced with sync_file_range(), which takes no
 * inode lock; the daemon's threads serve the writes it causes.
 *
 * In a child process holding no descriptor but those: the wait for
 * write-back is uninterruptible, so a daemon thread waiting there when the
 * daemon is killed (kill -9) kept the process from exiting, /dev/fuse open
 * and the connection alive, with no thread left to answer -- every process
 * on the mount hung until someone aborted it.  The child's wait ends once
 * the dead daemon's /dev/fuse is closed and the kernel aborts the writes.
 */
static int flush_kernel_pages(struct tfs_fuse *tf, fuse_ino_t ino, u64 generation)
{
	struct {
		struct file_handle h;
		u32 raw[3];
	} fh = { .h = { .handle_bytes = 12, .handle_type = 0x81 /* FILEID_INO64_GEN */ } };
	const char *mnt = tf->opts->mountpoint;
	int status;
	pid_t pid;

	fh.raw[0] = (u32)(ino >> 32);
	fh.raw[1] = (u32)ino;
	fh.raw[2] = (u32)generation;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		/* Only system calls here (a fork of a threaded process). */
		int mfd, fd;

		close_range(0, ~0U, 0);
		mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (mfd < 0)
			_exit(errno);
		fd = open_by_handle_at(mfd, &fh.h, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			_exit(errno);
		if (sync_file_range(fd, 0, 0,
				    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					    SYNC_FILE_RANGE_WAIT_AFTER))
			_exit(errno);
		_exit(0);
	}
	/* The child's open and write-back are requests other threads must serve. */
	tfs_fuse_loop_kernel_wait(true);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			int err = -errno;

			tfs_fuse_loop_kernel_wait(false);
			return err;
		}
	}
	tfs_fuse_loop_kernel_wait(false);
	if (!WIFEXITED(status))
		return -EIO;
	return -WEXITSTATUS(status);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);
	struct tfs_stat st;
	s64 ret;

	count(tf, TFS_FUSE_OP_lseek);
	/*
	 * Without the page flush (not root: no open_by_handle_at), or when
	 * asked: ENOSYS, and from then on the kernel answers itself (all data,
	 * no holes: always true, never sparse).
	 */
	if (tf->opts->kernel_lseek ||
	    (tf->writeback &&
	     (tfs_getattr(tf->fs, ino, &st) || flush_kernel_pages(tf, ino, st.generation)))) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	/* The pages just flushed may be queued behind: written first. */
	tfs_wbehind_wait(tf->wbehind, ino, false);
	ret = tfs_lseek(tf->fs, ff_of(fi)->f, (u64)off, whence);
	if (ret < 0)
		reply_err(req, TFS_FUSE_OP_lseek, ret);
	else
		fuse_reply_lseek(req, (off_t)ret);
}

/*
 * lsattr/chattr (FS_IOC_GETFLAGS/SETFLAGS, FS_IOC_FSGETXATTR/FSSETXATTR,
 * which the kernel sends for files and directories alike): tinyfs keeps no
 * inode flags, so it reports none and accepts only clearing them all;
 * setting one is EOPNOTSUPP, as on a filesystem without it.  Any other
 * ioctl: ENOTTY, as before there was a handler.
 */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	struct fsxattr fa;
	int fl = 0;

	switch (cmd) {
	case FS_IOC_GETFLAGS:
		if (out_bufsz < sizeof(fl))
			break;
		fuse_reply_ioctl(req, 0, &fl, sizeof(fl));
		return;
	case FS_IOC_SETFLAGS:
		if (in_bufsz < sizeof(fl))
			break;
		memcpy(&fl, in_buf, sizeof(fl));
		fuse_reply_ioctl(req, fl ? -EOPNOTSUPP : 0, NULL, 0);
		return;
	case FS_IOC_FSGETXATTR:
		if (out_bufsz < sizeof(fa))
			break;
		memset(&fa, 0, sizeof(fa));
		fuse_reply_ioctl(req, 0, &fa, sizeof(fa));
		return;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fa))
			break;
		memcpy(&fa, in_buf, sizeof(fa));
		fuse_reply_ioctl(req,
				 fa.fsx_xflags || fa.fsx_extsize || fa.fsx_projid ||
						 fa.fsx_cowextsize
					 ? -EOPNOTSUPP
					 : 0,
				 NULL, 0);
		return;
	}
	fuse_reply_err(req, ENOTTY);
}

/* --- directories --- */

/*
 * Whether an opendir of ino may keep the kernel's cached listing.  The
 * kernel checks the cache itself only for a listing from the start; one
 * resumed at a saved position (seekdir after a new opendir) is served from
 * the cache as it is, removed names included.  So the cache is kept only
 * when nothing changed in ino since an earlier opendir that dropped it
 * (keep_cache 0: the kernel empties it at the open, and what it caches
 * afterwards is at least as new as that count).
 */
static bool rdc_keep(struct tfs_fuse *tf, fuse_ino_t ino)
{
	unsigned slot = ino % TFS_FUSE_RDC_SLOTS;
	u64 changes = atomic_load_explicit(&tf->dir_changes[slot], memory_order_acquire);
	bool keep;

	pthread_mutex_lock(&tf->rdc_lock);
	keep = tf->rdc[slot].ino == ino && tf->rdc[slot].changes == changes;
	if (!keep) {
		tf->rdc[slot].ino = ino;
		tf->rdc[slot].changes = changes;
	}
	pthread_mutex_unlock(&tf->rdc_lock);
	return keep;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);

	count_timed(tf, TFS_FUSE_OP_opendir);
	/* Listings are by position (tfs_readdir), so a directory needs no handle. */
	fi->fh = 0;
	if (tf->opts->cache_readdir) {
		fi->cache_readdir = 1;
		fi->keep_cache = rdc_keep(tf, ino);
	}
	fuse_reply_open(req, fi);
}

struct readdir_ctx {
	fuse_req_t req;
	struct tfs_fuse *tf;
	bool plus;
	bool full; /* an entry did not fit: more remain */
	char *buf;
	size_t size, pos;
	u64 next; /* readdirplus: the position after the last entry added */
	/* Inodes whose lookup this reply counts (readdirplus). */
	u64 *inos;
	size_t nr_inos, size_inos;
	int err;
};

/* Adds e to the readdirplus reply: 0, or 1 when full (or out of memory). */
static int readdir_add_plus(struct readdir_ctx *c, const struct tfs_rdahead_ent *x)
{
	struct fuse_entry_param e = { 0 };
	char nm[TFS_NAME_MAX + 1];
	bool behind;
	size_t n;

	memcpy(nm, x->name, x->len);
	nm[x->len] = '\0';
	/*
	 * A file with writes behind: its size may be short, and a new kernel
	 * inode made from it would keep that size (see op_lookup()).  The
	 * name only: the kernel looks it up, and the lookup waits for them.
	 */
	behind = x->attrs && S_ISREG(x->st.mode) && tfs_wbehind_busy(c->tf->wbehind, x->ino);
	if (x->attrs && !behind) {
		entry_of(c->tf, &x->st, &e);
	} else {
		/* ino 0: the name only (".", "..", or see tfs_stat.links_dropped). */
		e.attr.st_ino = x->ino;
		e.attr.st_mode = (mode_t)x->dtype << 12;
	}
	if (c->nr_inos == c->size_inos && e.ino) {
		size_t sz = c->size_inos ? c->size_inos * 2 : 256;
		u64 *in = realloc(c->inos, sz * sizeof(*in));

		if (!in) {
			c->err = -ENOMEM;
			return 1;
		}
		c->inos = in;
		c->size_inos = sz;
	}
	n = fuse_add_direntry_plus(c->req, c->buf + c->pos, c->size - c->pos, nm, &e,
				   (off_t)x->next_pos);
	if (n > c->size - c->pos) {
		c->full = true;
		return 1;
	}
	if (x->withheld || behind)
		atomic_fetch_add_explicit(&c->tf->nr_plus_withheld, 1, memory_order_relaxed);
	if (e.ino) {
		c->inos[c->nr_inos++] = e.ino;
		tfs_nlookup_get(c->tf->nlookup, e.ino, 1);
	}
	c->pos += n;
	c->next = x->next_pos;
	return 0;
}

static int readdir_fill(void *p, const char *name, size_t len, tfs_ino_t ino, unsigned dtype,
			u64 next_pos)
{
	struct readdir_ctx *c = p;
	struct tfs_rdahead_ent x;
	int ret;

	if (len > TFS_NAME_MAX) {
		c->err = -ENAMETOOLONG;
		return 1;
	}
	if (!c->plus) {
		char nm[TFS_NAME_MAX + 1];
		struct stat st = { .st_ino = ino, .st_mode = (mode_t)dtype << 12 };
		size_t n;

		memcpy(nm, name, len);
		nm[len] = '\0';
		n = fuse_add_direntry(c->req, c->buf + c->pos, c->size - c->pos, nm, &st,
				      (off_t)next_pos);
		if (n > c->size - c->pos) {
			c->full = true;
			return 1;
		}
		c->pos += n;
		return 0;
	}
	/* Full already for a name this long: no attributes looked up in vain. */
	if (tfs_rdahead_ent_bytes(len) > c->size - c->pos) {
		c->full = true;
		return 1;
	}
	ret = tfs_rdahead_ent_fill(c->tf->fs, name, len, ino, dtype, next_pos, &x);
	if (ret < 0) {
		c->err = ret;
		return 1;
	}
	if (ret)
		return 0; /* removed since it was listed */
	x.name = name;
	return readdir_add_plus(c, &x);
}

/*
 * The batch read ahead for this request, if there is a valid one (see
 * fuse/rdahead.c): true when it made the reply (c->pos bytes, possibly
 * none: then the listing is at its end).
 */
static bool readdir_from_ahead(struct readdir_ctx *c, fuse_ino_t ino, off_t off)
{
	const struct tfs_rdahead_ent *ents;
	size_t nr;
	bool more;

	if (!tfs_rdahead_take(c->tf->rdahead, ino, (u64)off, c->size, &ents, &nr, &more))
		return false;
	for (size_t i = 0; i < nr; i++)
		if (readdir_add_plus(c, &ents[i]))
			break;
	tfs_rdahead_done(c->tf->rdahead);
	/* Entries left after the batch, or one that did not fit. */
	c->full |= more;
	return true;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	enum tfs_fuse_op op = plus ? TFS_FUSE_OP_readdirplus : TFS_FUSE_OP_readdir;
	struct readdir_ctx c = { .req = req, .tf = tf_of(req), .plus = plus, .size = size };
	int ret = 0;

	count_timed(c.tf, op);
	if (!off)
		accessed(c.tf, ino, true);
	c.buf = malloc(size ?: 1);
	if (!c.buf) {
		reply_err(req, op, -ENOMEM);
		return;
	}
	if (!plus || off < 2 || !readdir_from_ahead(&c, ino, off))
		ret = tfs_readdir(c.tf->fs, ino, (u64)off, readdir_fill, &c);
	if (!ret)
		ret = c.err;
	/* A partial listing is returned; the error comes back on the next call. */
	if (ret && !c.pos) {
		reply_err(req, op, ret);
	} else if (fuse_reply_buf(req, c.buf, c.pos)) {
		for (size_t i = 0; i < c.nr_inos; i++)
			tfs_nlookup_put(c.tf->nlookup, c.inos[i], 1);
	} else if (plus && c.full && !ret && c.next) {
		/* The caller will ask for what follows once it took these in. */
		tfs_rdahead_queue(c.tf->rdahead, ino, c.next, size);
	}
	free(c.inos);
	free(c.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	count(tf_of(req), TFS_FUSE_OP_releasedir);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct tfs_fuse *tf = tf_of(req);

	count_timed(tf, TFS_FUSE_OP_fsyncdir);
	reply_err(req, TFS_FUSE_OP_fsyncdir, tfs_fsyncdir(tf->fs, ino, datasync));
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_fuse *tf = tf_of(req);
	struct statvfs st;
	int ret;

	count_timed(tf, TFS_FUSE_OP_statfs);
	memset(&st, 0, sizeof(st));
	ret = tfs_statfs(tf->fs, &st);
	if (ret)
		reply_err(req, TFS_FUSE_OP_statfs, ret);
	else
		fuse_reply_statfs(req, &st);
}

/* --- extended attributes --- */

/* Whether the caller (its task's effective capabilities) has CAP_FSETID. */
static bool caller_has_fsetid(const struct fuse_ctx *c)
{
	char path[64], line[256];
	unsigned long long caps;
	bool found = false, ret = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%lu/status", (unsigned long)c->pid);
	f = c->pid > 0 ? fopen(path, "re") : NULL;
	if (!f)
		return c->uid == 0; /* not visible (another pid namespace): root has it */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			found = true;
			ret = caps & (1ULL << 4); /* CAP_FSETID */
			break;
		}
	fclose(f);
	return found ? ret : c->uid == 0;
}

/* tfs_ctx's has_fsetid: arg is the request. */
static bool req_has_fsetid(void *arg)
{
	return caller_has_fsetid(fuse_req_ctx(arg));
}

/*
 * What the kernel's in_group_or_capable() asks of the caller before an
 * access ACL may keep S_ISGID (posix_acl_update_mode()): is it in the
 * file's group gid (its fsgid, checked by fs/, or a supplementary group),
 * or has it CAP_FSETID?  libfuse 3.14 does not pass the kernel's answer
 * (FUSE_SETXATTR_EXT), so this reads the caller's /proc entries: asked by
 * fs/ under the inode's lock, and only for a file with S_ISGID outside the
 * caller's fsgid (`cp -a` sets an ACL on every file it copies: two /proc
 * reads each, 30-40 us, when asked every time).
 */
static bool caller_keeps_sgid(void *arg, u32 gid)
{
	_Static_assert(sizeof(gid_t) == sizeof(u32), "gid_t is a u32");
	fuse_req_t req = arg;
	gid_t buf[64], *groups = buf;
	int n = fuse_req_getgroups(req, 64, buf);
	bool in = false;

	if (n > 64) {
		groups = malloc(sizeof(*groups) * (size_t)n);
		/* Out of memory: not known, as without /proc (then CAP_FSETID decides). */
		n = groups ? min_t(int, n, fuse_req_getgroups(req, n, groups)) : 0;
	}
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			in = true;
	if (groups != buf)
		free(groups);
	return in || caller_has_fsetid(fuse_req_ctx(req));
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct tfs_fuse *tf = tf_of(req);
	unsigned tflags = 0;
	int ret;

	count_timed(tf, TFS_FUSE_OP_setxattr);
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
		reply_err(req, TFS_FUSE_OP_setxattr, -EINVAL);
		return;
	}
	if (flags & XATTR_CREATE)
		tflags |= TFS_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		tflags |= TFS_XATTR_REPLACE;
	if (!strcmp(name, "system.posix_acl_access")) {
		struct tfs_ctx ctx = caller_ctx(req);

		ret = tfs_setxattr_as(tf->fs, &ctx, ino, name, value, size, tflags);
	} else {
		ret = tfs_setxattr(tf->fs, ino, name, value, size, tflags);
	}
	/*
	 * An access ACL set the permission bits (fs/xattr.c): the kernel's
	 * cached mode is stale, and with the writeback cache it would not ask
	 * again (it expects only ctime to change).  Only the attributes (-1).
	 */
	if (!ret && !strcmp(name, "system.posix_acl_access"))
		fuse_lowlevel_notify_inval_inode(tf->se, ino, -1, 0);
	reply_err(req, TFS_FUSE_OP_setxattr, ret);
}

/* getxattr and listxattr: size 0 asks for the length, else for the bytes. */
static void reply_xattr_bytes(fuse_req_t req, enum tfs_fuse_op op, size_t size, ssize_t n,
			      const char *buf)
{
	if (n < 0)
		reply_err(req, op, n);
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_fuse *tf = tf_of(req);
	char *buf = NULL;
	ssize_t n;

	count_timed(tf, TFS_FUSE_OP_getxattr);
	if (size && !(buf = malloc(size))) {
		reply_err(req, TFS_FUSE_OP_getxattr, -ENOMEM);
		return;
	}
	n = tfs_getxattr(tf->fs, ino, name, buf, size);
	reply_xattr_bytes(req, TFS_FUSE_OP_getxattr, size, n, buf);
	free(buf);
}

/*
 * Whether the caller may see trusted.* names: CAP_SYS_ADMIN, as ext4 asks.
 * The kernel hides their values itself but passes a FUSE listing through
 * whole.  Root is taken as capable; anyone else by CapEff in /proc.
 */
static bool caller_sees_trusted(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	char path[64], line[256];
	bool ret = false;
	FILE *f;

	if (!c->uid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long caps;

		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			ret = caps & (1ULL << 21); /* CAP_SYS_ADMIN */
			break;
		}
	}
	fclose(f);
	return ret;
}

/* listxattr without the trusted.* names (size 0: the length of what is left). */
static ssize_t listxattr_untrusted(struct tfs_fs *fs, fuse_ino_t ino, char *buf, size_t size)
{
	ssize_t n, len = 0;
	char *all = NULL;

	/* The list may grow between asking its length and reading it. */
	do {
		free(all);
		n = tfs_listxattr(fs, ino, NULL, 0);
		if (n <= 0)
			return n;
		all = malloc((size_t)n);
		if (!all)
			return -ENOMEM;
		n = tfs_listxattr(fs, ino, all, (size_t)n);
	} while (n == -ERANGE);
	for (ssize_t i = 0; n > 0 && i < n;) {
		size_t l = strnlen(all + i, (size_t)(n - i)) + 1;

		if (strncmp(all + i, "trusted.", 8)) {
			if (size && (size_t)len + l > size) {
				len = -ERANGE;
				break;
			}
			if (size)
				memcpy(buf + len, all + i, l);
			len += (ssize_t)l;
		}
		i += (ssize_t)l;
	}
	free(all);
	return n < 0 ? n : len;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_fuse *tf = tf_of(req);
	char *buf = NULL;
	ssize_t n;

	count_timed(tf, TFS_FUSE_OP_listxattr);
	if (size && !(buf = malloc(size))) {
		reply_err(req, TFS_FUSE_OP_listxattr, -ENOMEM);
		return;
	}
	if (caller_sees_trusted(req))
		n = tfs_listxattr(tf->fs, ino, buf, size);
	else
		n = listxattr_untrusted(tf->fs, ino, buf, size);
	reply_xattr_bytes(req, TFS_FUSE_OP_listxattr, size, n, buf);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct tfs_fuse *tf = tf_of(req);

	count_timed(tf, TFS_FUSE_OP_removexattr);
	reply_err(req, TFS_FUSE_OP_removexattr, tfs_removexattr(tf->fs, ino, name));
}

/*
 * access(2).  With default_permissions (always on) the kernel checks
 * permissions itself and never asks; this answers as the kernel would
 * should a kernel ask anyway: owner, group (with supplementary groups),
 * other bits; root passes except X on a file with no execute bit.
 */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct tfs_fuse *tf = tf_of(req);
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct tfs_stat st;
	unsigned bits;
	int ret;

	count_timed(tf, TFS_FUSE_OP_access);
	ret = tfs_getattr(tf->fs, ino, &st);
	if (ret || mask == F_OK) {
		reply_err(req, TFS_FUSE_OP_access, ret);
		return;
	}
	if (c->uid == 0) {
		bool x_ok = S_ISDIR(st.mode) || (st.mode & 0111);

		reply_err(req, TFS_FUSE_OP_access, (mask & X_OK) && !x_ok ? -EACCES : 0);
		return;
	}
	if (c->uid == st.uid) {
		bits = (st.mode >> 6) & 7;
	} else {
		bool in_group = c->gid == st.gid;
		gid_t groups[64];
		int nr = fuse_req_getgroups(req, 64, groups);

		for (int i = 0; !in_group && i < nr && i < 64; i++)
			in_group = groups[i] == st.gid;
		bits = in_group ? (st.mode >> 3) & 7 : st.mode & 7;
	}
	reply_err(req, TFS_FUSE_OP_access, (unsigned)mask & ~bits & 7 ? -EACCES : 0);
}

const struct fuse_lowlevel_ops tfs_fuse_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.access = op_access,
	.create = op_create,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.ioctl = op_ioctl,
};

/* --- state --- */

void tfs_fuse_init_state(struct tfs_fuse *tf, struct tfs_fs *fs, const struct tfs_mount_opts *o)
{
	memset(tf, 0, sizeof(*tf));
	tf->fs = fs;
	tf->opts = o;
	pthread_mutex_init(&tf->files_lock, NULL);
	pthread_mutex_init(&tf->rdc_lock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &tf->started);
	tf->poll.max_us = o->libfuse_loop ? 0 : o->poll_us;
	/* Its thread starts here, after the fork, as write-behind's. */
	tf->poll.cpulat =
		tfs_cpulat_start("/dev/cpu_dma_latency", o->libfuse_loop ? 0 : o->low_latency_ms);
	/*
	 * Used only for the kernel's write-back requests (writeback cache: the
	 * kernel owns the times).  Started here, after the fork (mount.c).
	 */
	if (o->write_behind)
		tf->wbehind =
			tfs_wbehind_start(fs, &tf->nr_wb_errors_deferred, TFS_WBEHIND_MAX_BYTES);
	if (o->readdir_ahead != TFS_RDAHEAD_off)
		tf->rdahead = tfs_rdahead_start(fs, tf->dir_changes, TFS_FUSE_RDC_SLOTS,
						o->readdir_ahead);
}

void tfs_fuse_release_all(struct tfs_fuse *tf)
{
	/* The queued writes and releases first. */
	tfs_wbehind_stop(tf->wbehind);
	tf->wbehind = NULL;
	tfs_rdahead_stop(tf->rdahead);
	tf->rdahead = NULL;
	tfs_cpulat_stop(tf->poll.cpulat);
	tf->poll.cpulat = NULL;
	pthread_mutex_lock(&tf->files_lock);
	while (tf->files) {
		struct tfs_fuse_file *ff = tf->files;

		tf->files = ff->next;
		tf->nr_files--;
		tfs_release(tf->fs, ff->f);
		free(ff);
	}
	pthread_mutex_unlock(&tf->files_lock);
}

void tfs_fuse_exit_state(struct tfs_fuse *tf)
{
	pthread_mutex_destroy(&tf->files_lock);
	pthread_mutex_destroy(&tf->rdc_lock);
}

void tfs_fuse_to_text(struct printbuf *out, struct tfs_fuse *tf)
{
	struct timespec now;
	u64 inodes = 0, lookups = 0, nr_files;
	bool writeback, killpriv;
	unsigned max_write;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (tf->nlookup)
		tfs_nlookup_totals(tf->nlookup, &inodes, &lookups);
	pthread_mutex_lock(&tf->files_lock);
	nr_files = tf->nr_files;
	writeback = tf->writeback;
	killpriv = tf->killpriv;
	max_write = tf->max_write;
	pthread_mutex_unlock(&tf->files_lock);

	printbuf_tabstop_push(out, 28);
	prt_printf(out, "pid:\t%ld\n", (long)getpid());
	prt_printf(out, "source:\t%s\n", tf->opts->source);
	prt_printf(out, "mountpoint:\t%s\n", tf->opts->mountpoint);
	prt_printf(out, "uptime:\t%llds\n", (long long)(now.tv_sec - tf->started.tv_sec));
	prt_printf(out, "writeback cache:\t%s\n", writeback ? "on" : "off");
	prt_printf(out, "handle killpriv:\t%s\n", killpriv ? "on" : "off");
	prt_printf(out, "max write:\t%u\n", max_write);
	prt_printf(out, "inodes known to the kernel:\t%llu (%llu lookups)\n",
		   (unsigned long long)inodes, (unsigned long long)lookups);
	prt_printf(out, "open files:\t%llu\n", (unsigned long long)nr_files);
	prt_printf(out, "forget mismatches:\t%llu\n",
		   (unsigned long long)atomic_load(&tf->nr_forget_mismatch));
	prt_printf(out, "writeback errors to fsync:\t%llu\n",
		   (unsigned long long)atomic_load(&tf->nr_wb_errors_deferred));
	prt_printf(out, "fsyncs keeping the kernel's attributes:\t%llu\n",
		   (unsigned long long)atomic_load(&tf->nr_fsync_inval_skipped));
	prt_printf(out, "readdirplus entries without attributes:\t%llu\n",
		   (unsigned long long)atomic_load(&tf->nr_plus_withheld));
	tfs_wbehind_to_text(out, tf->wbehind);
	tfs_rdahead_to_text(out, tf->rdahead);
	tfs_fuse_poll_to_text(out, &tf->poll);
	tfs_cpulat_to_text(out, tf->poll.cpulat);
	prt_printf(out, "bytes read:\t%llu\n", (unsigned long long)atomic_load(&tf->bytes_read));
	prt_printf(out, "bytes written:\t%llu\n",
		   (unsigned long long)atomic_load(&tf->bytes_written));
	prt_printf(out, "requests:\n");
	printbuf_indent_add(out, 2);
	for (unsigned i = 0; i < TFS_FUSE_OP_NR; i++) {
		u64 n = atomic_load(&tf->nr_ops[i]), e = atomic_load(&tf->nr_errors[i]);

		prt_printf(out, "%s:\t%llu", tfs_fuse_op_names[i], (unsigned long long)n);
		if (e)
			prt_printf(out, " (%llu errors)", (unsigned long long)e);
		prt_newline(out);
	}
	printbuf_indent_sub(out, 2);
	/* Handler time, reply included: what the daemon adds to a round trip. */
	prt_printf(out, "service time:\n");
	printbuf_indent_add(out, 2);
	for (unsigned i = 0; i < TFS_FUSE_OP_NR; i++) {
		u64 n = atomic_load(&tf->nr_ops[i]), ns = atomic_load(&tf->op_ns[i]);

		if (n && ns)
			prt_printf(out, "%s:\t%llu us mean, %llu us max\n", tfs_fuse_op_names[i],
				   (unsigned long long)(ns / n / 1000),
				   (unsigned long long)(atomic_load(&tf->op_max_ns[i]) / 1000));
	}
	printbuf_indent_sub(out, 2);
	printbuf_tabstop_pop(out);
}

bool tfs_fuse_ino_busy(void *tf, u64 ino)
{
	return tfs_wbehind_busy(((struct tfs_fuse *)tf)->wbehind, ino);
}

bool tfs_fuse_write_queues(void *tf, u64 fh, u64 off, u32 len)
{
	struct tfs_fuse_file *ff = (struct tfs_fuse_file *)(uintptr_t)fh;

	/* fh is the kernel's open file of a write-back request: open until its reply. */
	return ff && tfs_wbehind_fits_file(((struct tfs_fuse *)tf)->wbehind, ff->f, off, len);
}
