/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_FAULT_CRASH_MODEL_H
#define TFS_TESTS_FAULT_CRASH_MODEL_H

/*
 * The crash-consistency harness's common part (FAULTS.md checks 1 and 6):
 * an in-memory model of a small tree (names, directories, files' bytes,
 * sizes, one xattr, explicitly set mtimes), the operations over it, a
 * workload recorder, a crash-image builder over the recorded trace and the
 * checks after recovery.
 *
 * Recording.  A workload runs ONCE on a copy of a template image, every
 * member through a tracing fault device (lib/faultdev.h) that saves its
 * trace at close (tracefile=); after each operation returns, a mark "e<i>"
 * goes into every member's trace.  The run ends with a clean stop, so the
 * trace also holds open's and stop's writes.
 *
 * Crash images.  A cut at trace position T (an op's stamp: see
 * tfs_fault_trace_entry.stamp, one order over every member) keeps, on each
 * member, the ops whose stamp is below T: exactly what the fault device's
 * power cut keeps when it fires at that op (the same semantics as
 * build_crash_image() in lib/faultdev.c, rebuilt here from the trace so
 * one recording serves every cut): the durable image (every write before
 * the last completed flush or PREFLUSH write, and FUA writes) plus, of the
 * writes completed since, what the policy keeps: none; a prefix in
 * completion order; a seeded random subset; all with the last torn (a
 * seeded subset of its aligned 512-byte sectors, never all).
 *
 * The promise checked (fs/fs.h, "Durability"):
 *  - the metadata is a prefix of history: the recovered tree equals one of
 *    the model's states (state i: after operation i; state 0: the setup);
 *  - the state is at or after the last persistence point acknowledged
 *    before the cut: fsync(f) covers every operation that changed f (its
 *    data, size, xattrs, times, its names: create, link, unlink and rename
 *    change the inodes they name); fdatasync(f) covers the same except an
 *    operation that only set f's times (utimes), which it may lose;
 *    fsyncdir(d) covers every operation that changed d's entries or d;
 *    syncfs covers everything;
 *  - and at most one operation after the last acknowledged one (the one in
 *    progress): nothing from the future.
 * So "every fsync/fdatasync/syncfs-acknowledged byte, size and name is
 * there" follows; the check also counts, on a failure, the acknowledged
 * bytes missing (crash_fsynced_bytes_lost).
 *
 * After recovery: fsck finds nothing; stopped and opened again the tree
 * is the same state; a short workload runs and fsck still finds nothing.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <linux/falloc.h>

#include "posix_test.h"

/* --- the model --- */

#define CM_MAXI 12	   /* inodes; 0 is the root */
#define CM_MAXN 16	   /* names */
#define CM_SIZE (56 << 10) /* largest file the operations make */
#define CM_XV 12	   /* user.k's value */
#define CM_MAXOPS 24
#define CM_MAXSTATES (CM_MAXOPS + 1)

enum {
	CM_FREE,
	CM_FILE,
	CM_DIR
};

struct cm_inode {
	u8 kind;
	bool has_x;
	bool mtime_known; /* set by utimes, not changed since */
	u8 xlen;
	char xval[CM_XV];
	s64 mtime;
	u64 size;
	/* The last state that changed the inode; the last but times-only changes. */
	unsigned touch, dtouch;
	u8 data[CM_SIZE];
};

struct cm_name {
	bool used;
	u8 parent, ino;
	char name[8];
};

struct cm_state {
	struct cm_inode i[CM_MAXI];
	struct cm_name n[CM_MAXN];
};

/* clang-format off */
#define CM_KINDS(x)	\
	x(create)	\
	x(write)	\
	x(truncate)	\
	x(punch)	\
	x(mkdir)	\
	x(rmdir)	\
	x(link)		\
	x(unlink)	\
	x(rename)	\
	x(exchange)	\
	x(setxattr)	\
	x(removexattr)	\
	x(utimes)	\
	x(fsync)	\
	x(fdatasync)	\
	x(fsyncdir)	\
	x(syncfs)
/* clang-format on */

enum cm_kind {
#define x(n) CM_##n,
	CM_KINDS(x)
#undef x
};

#define CM_APPEND UINT64_MAX

struct cm_op {
	const char *name;
	enum cm_kind kind;
	const char *p1, *p2;
	u64 off, len;
};

/*
 * The operation set, over the setup tree /a (12000 bytes), /d/b (3000
 * bytes), /x (100 bytes, user.k set), empty directories /d and /e: each
 * operation has a fixed target, and one whose target is not there (or
 * wrong) in the current state is skipped (the model says so; the
 * filesystem is not asked).
 */
static const struct cm_op cm_ops[] = {
	{ "create_c", CM_create, "c" },
	{ "create_d_c", CM_create, "d/c" },
	{ "append_a", CM_write, "a", NULL, CM_APPEND, 5000 },
	{ "overwrite_a", CM_write, "a", NULL, 1000, 3000 },
	{ "sparse_a", CM_write, "a", NULL, 40000, 2000 },
	{ "write_c", CM_write, "c", NULL, 0, 6000 },
	{ "overwrite_d_b", CM_write, "d/b", NULL, 0, 4096 },
	{ "truncdown_a", CM_truncate, "a", NULL, 2500 },
	{ "truncup_a", CM_truncate, "a", NULL, 20000 },
	{ "punch_a", CM_punch, "a", NULL, 4096, 4096 },
	{ "mkdir_f", CM_mkdir, "f" },
	{ "rmdir_e", CM_rmdir, "e" },
	{ "link_a_d_l", CM_link, "a", "d/l" },
	{ "unlink_a", CM_unlink, "a" },
	{ "unlink_d_b", CM_unlink, "d/b" },
	{ "rename_a_g", CM_rename, "a", "g" },
	{ "rename_a_over_d_b", CM_rename, "a", "d/b" },
	{ "rename_d_b_h", CM_rename, "d/b", "h" },
	{ "rename_e_d_e2", CM_rename, "e", "d/e2" },
	{ "exchange_a_d_b", CM_exchange, "a", "d/b" },
	{ "setxattr_a", CM_setxattr, "a" },
	{ "removexattr_x", CM_removexattr, "x" },
	{ "utimes_a", CM_utimes, "a" },
	{ "fsync_a", CM_fsync, "a" },
	{ "fdatasync_a", CM_fdatasync, "a" },
	{ "fsync_c", CM_fsync, "c" },
	{ "fsync_d_b", CM_fsync, "d/b" },
	{ "fsyncdir_d", CM_fsyncdir, "d" },
	{ "syncfs", CM_syncfs },
};

#define CM_NR_OPS ARRAY_SIZE(cm_ops)

/* The model's run of one workload: its states and what was acknowledged when. */
struct cm_run {
	struct cm_state cur;
	struct cm_state *states; /* [CM_MAXSTATES] */
	unsigned nr_states;
	unsigned durable;	       /* the state every acknowledged persistence point covers */
	unsigned dur_after[CM_MAXOPS]; /* durable once operation i returned */
	unsigned nr_ops;
	u64 skipped;
};

/* Finds the name for path ("a", "d/b") in s: index, or -1. */
static inline int cm_find(const struct cm_state *s, const char *path)
{
	unsigned parent = 0;
	const char *p = path;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		int found = -1;

		for (int i = 0; i < CM_MAXN; i++)
			if (s->n[i].used && s->n[i].parent == parent &&
			    strlen(s->n[i].name) == len && !memcmp(s->n[i].name, p, len))
				found = i;
		if (found < 0 || !slash)
			return found;
		if (s->i[s->n[found].ino].kind != CM_DIR)
			return -1;
		parent = s->n[found].ino;
		p = slash + 1;
	}
}

/* The directory path's last component goes into (-1: the parent is missing). */
static inline int cm_parent(const struct cm_state *s, const char *path, const char **last)
{
	const char *slash = strrchr(path, '/');
	char dir[16];
	int n;

	*last = slash ? slash + 1 : path;
	if (!slash)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	n = cm_find(s, dir);
	return n >= 0 && s->i[s->n[n].ino].kind == CM_DIR ? s->n[n].ino : -1;
}

static inline unsigned cm_nlink(const struct cm_state *s, unsigned ino)
{
	unsigned n = 0;

	for (int i = 0; i < CM_MAXN; i++)
		n += s->n[i].used && s->n[i].ino == ino;
	return n;
}

static inline bool cm_dir_empty(const struct cm_state *s, unsigned ino)
{
	for (int i = 0; i < CM_MAXN; i++)
		if (s->n[i].used && s->n[i].parent == ino)
			return false;
	return true;
}

static inline int cm_new_inode(struct cm_state *s, u8 kind)
{
	for (int i = 1; i < CM_MAXI; i++)
		if (s->i[i].kind == CM_FREE) {
			memset(&s->i[i], 0, sizeof(s->i[i]));
			s->i[i].kind = kind;
			return i;
		}
	return -1;
}

static inline int cm_add_name(struct cm_state *s, unsigned parent, const char *name, unsigned ino)
{
	for (int i = 0; i < CM_MAXN; i++)
		if (!s->n[i].used) {
			s->n[i] = (struct cm_name){ true, (u8)parent, (u8)ino, "" };
			snprintf(s->n[i].name, sizeof(s->n[i].name), "%s", name);
			return i;
		}
	return -1;
}

/* Drops name n; its inode goes when it was the last name. */
static inline void cm_drop_name(struct cm_state *s, int n)
{
	unsigned ino = s->n[n].ino;

	s->n[n].used = false;
	if (!cm_nlink(s, ino))
		s->i[ino].kind = CM_FREE;
}

/* --- the filesystem side --- */

static inline int cm_fs_lookup(struct tfs_fs *fs, const char *path, tfs_ino_t *ino)
{
	tfs_ino_t cur = TFS_ROOT_INO;
	const char *p = path;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		struct tfs_stat st;
		int ret = tfs_lookup(fs, cur, p, len, &st);

		if (ret)
			return ret;
		cur = st.ino;
		if (!slash) {
			*ino = cur;
			return 0;
		}
		p = slash + 1;
	}
}

static inline int cm_fs_parent(struct tfs_fs *fs, const char *path, tfs_ino_t *dir,
			       const char **last)
{
	const char *slash = strrchr(path, '/');
	char d[16];

	*last = slash ? slash + 1 : path;
	if (!slash) {
		*dir = TFS_ROOT_INO;
		return 0;
	}
	snprintf(d, sizeof(d), "%.*s", (int)(slash - path), path);
	return cm_fs_lookup(fs, d, dir);
}

static inline int cm_fs_open(struct tfs_fs *fs, const char *path, struct tfs_file **f)
{
	tfs_ino_t ino;

	return cm_fs_lookup(fs, path, &ino) ?: tfs_open(fs, ino, O_RDWR, f);
}

/* The bytes operation `step` writes (a different pattern per step and operation). */
static inline u64 cm_seed(unsigned step, unsigned op)
{
	return 1000 + step * 64 + op;
}

/*
 * Whether op applies to state s (its targets exist and are of the right
 * kind): an operation that does not is skipped.
 */
static inline bool cm_valid(const struct cm_state *s, const struct cm_op *op)
{
	int a = op->p1 ? cm_find(s, op->p1) : -1, b = op->p2 ? cm_find(s, op->p2) : -1;
	const char *last;
	bool a_file = a >= 0 && s->i[s->n[a].ino].kind == CM_FILE;
	bool a_dir = a >= 0 && s->i[s->n[a].ino].kind == CM_DIR;

	switch (op->kind) {
	case CM_create:
	case CM_mkdir:
		return a < 0 && cm_parent(s, op->p1, &last) >= 0;
	case CM_write:
		return a_file &&
		       (op->off == CM_APPEND ? s->i[s->n[a].ino].size : op->off) + op->len <=
			       CM_SIZE;
	case CM_truncate:
	case CM_punch:
	case CM_setxattr:
	case CM_utimes:
	case CM_fsync:
	case CM_fdatasync:
	case CM_unlink:
		return a_file;
	case CM_removexattr:
		return a_file && s->i[s->n[a].ino].has_x;
	case CM_rmdir:
		return a_dir && cm_dir_empty(s, s->n[a].ino);
	case CM_link:
		return a_file && b < 0 && cm_parent(s, op->p2, &last) >= 0;
	case CM_rename: {
		int pb = cm_parent(s, op->p2, &last);

		if (a < 0 || pb < 0)
			return false;
		if (a_dir) /* a directory only to a new name, never under itself */
			return b < 0 && pb != s->n[a].ino;
		/* Over a file that is not the same inode (that rename does nothing). */
		return b < 0 || (s->i[s->n[b].ino].kind == CM_FILE && s->n[b].ino != s->n[a].ino);
	}
	case CM_exchange:
		return a >= 0 && b >= 0 && s->n[a].ino != s->n[b].ino;
	case CM_fsyncdir:
		return !op->p1 || a_dir;
	case CM_syncfs:
		return true;
	}
	return false;
}

/* The model's side of op (valid in r->cur) at step; the new state is r->nr_states. */
static inline void cm_model_apply(struct cm_run *r, const struct cm_op *op, unsigned step,
				  unsigned opi)
{
	struct cm_state *s = &r->cur;
	unsigned now = r->nr_states; /* the state this operation makes */
	int a = op->p1 ? cm_find(s, op->p1) : -1, b = op->p2 ? cm_find(s, op->p2) : -1;
	unsigned ai = a >= 0 ? s->n[a].ino : 0, bi = b >= 0 ? s->n[b].ino : 0;
	const char *last = "";
	int pa = op->p1 ? cm_parent(s, op->p1, &last) : -1;

#define TOUCH(ino) (s->i[ino].touch = s->i[ino].dtouch = now)
	switch (op->kind) {
	case CM_create:
	case CM_mkdir: {
		int ino = cm_new_inode(s, op->kind == CM_create ? CM_FILE : CM_DIR);

		assert_true(ino > 0);
		assert_true(cm_add_name(s, (unsigned)pa, last, (unsigned)ino) >= 0);
		TOUCH(ino);
		TOUCH(pa);
		break;
	}
	case CM_write: {
		struct cm_inode *in = &s->i[ai];
		u64 off = op->off == CM_APPEND ? in->size : op->off;

		pt_fill(in->data + off, op->len, cm_seed(step, opi), off);
		in->size = max_t(u64, in->size, off + op->len);
		in->mtime_known = false;
		TOUCH(ai);
		break;
	}
	case CM_truncate: {
		struct cm_inode *in = &s->i[ai];

		if (op->off < in->size)
			memset(in->data + op->off, 0, CM_SIZE - op->off);
		in->size = op->off;
		in->mtime_known = false;
		TOUCH(ai);
		break;
	}
	case CM_punch: {
		struct cm_inode *in = &s->i[ai];

		if (op->off < in->size)
			memset(in->data + op->off, 0, min_t(u64, op->len, in->size - op->off));
		in->mtime_known = false;
		TOUCH(ai);
		break;
	}
	case CM_link: {
		int pb = cm_parent(s, op->p2, &last);

		assert_true(cm_add_name(s, (unsigned)pb, last, ai) >= 0);
		TOUCH(ai);
		TOUCH(pb);
		break;
	}
	case CM_rmdir:
	case CM_unlink:
		cm_drop_name(s, a);
		TOUCH(ai);
		TOUCH(pa);
		break;
	case CM_rename: {
		int pb = cm_parent(s, op->p2, &last);

		TOUCH(ai);
		TOUCH(pa);
		TOUCH(pb);
		if (b >= 0) {
			TOUCH(bi);
			cm_drop_name(s, b);
		}
		s->n[a].parent = (u8)pb;
		snprintf(s->n[a].name, sizeof(s->n[a].name), "%s", last);
		break;
	}
	case CM_exchange: {
		int pb = cm_parent(s, op->p2, &last);

		s->n[a].ino = (u8)bi;
		s->n[b].ino = (u8)ai;
		TOUCH(ai);
		TOUCH(bi);
		TOUCH(pa);
		TOUCH(pb);
		break;
	}
	case CM_setxattr:
		s->i[ai].has_x = true;
		s->i[ai].xlen = (u8)snprintf(s->i[ai].xval, CM_XV, "v%u.%u", step, opi);
		TOUCH(ai);
		break;
	case CM_removexattr:
		s->i[ai].has_x = false;
		TOUCH(ai);
		break;
	case CM_utimes:
		s->i[ai].mtime_known = true;
		s->i[ai].mtime = 1000000 + step;
		s->i[ai].touch = now; /* times only: not dtouch */
		break;
	/* Persistence points change nothing: what they cover is now durable. */
	case CM_fsync:
		r->durable = max_t(unsigned, r->durable, s->i[ai].touch);
		break;
	case CM_fdatasync:
		r->durable = max_t(unsigned, r->durable, s->i[ai].dtouch);
		break;
	case CM_fsyncdir:
		r->durable = max_t(unsigned, r->durable, s->i[op->p1 ? ai : 0].touch);
		break;
	case CM_syncfs:
		r->durable = now;
		break;
	}
#undef TOUCH
}

/* The filesystem's side of op: 0 or its error. */
static inline int cm_fs_apply(struct tfs_fs *fs, const struct cm_op *op, unsigned step,
			      unsigned opi)
{
	static u8 buf[CM_SIZE];
	struct tfs_file *f = NULL;
	struct tfs_stat st;
	tfs_ino_t dir, dir2, ino;
	const char *last, *last2;
	int ret = 0;

	switch (op->kind) {
	case CM_create:
		ret = cm_fs_parent(fs, op->p1, &dir, &last)
			      ?: tfs_create(fs, &pt_root_ctx, dir, last, strlen(last), 0644,
					    O_CREAT | O_EXCL | O_RDWR, &f, &st);
		break;
	case CM_mkdir:
		ret = cm_fs_parent(fs, op->p1, &dir, &last)
			      ?: tfs_mkdir(fs, &pt_root_ctx, dir, last, strlen(last), 0755, &st);
		break;
	case CM_write:
	case CM_truncate:
	case CM_punch:
	case CM_fsync:
	case CM_fdatasync:
		ret = cm_fs_open(fs, op->p1, &f);
		if (ret)
			break;
		if (op->kind == CM_write) {
			u64 off = op->off;

			if (off == CM_APPEND) {
				ret = tfs_getattr(fs, tfs_file_ino(f), &st);
				off = st.size;
			}
			pt_fill(buf, op->len, cm_seed(step, opi), off);
			if (!ret) {
				ssize_t n = tfs_write(fs, f, buf, op->len, off);

				ret = n < 0 ? (int)n : n == (ssize_t)op->len ? 0 : -EIO;
			}
		} else if (op->kind == CM_truncate) {
			struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE, .size = op->off };

			ret = tfs_setattr(fs, tfs_file_ino(f), f, &sa, NULL);
		} else if (op->kind == CM_punch) {
			ret = tfs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					    op->off, op->len);
		} else {
			ret = tfs_fsync(fs, f, op->kind == CM_fdatasync);
		}
		break;
	case CM_rmdir:
		ret = cm_fs_parent(fs, op->p1, &dir, &last)
			      ?: tfs_rmdir(fs, dir, last, strlen(last));
		break;
	case CM_unlink:
		ret = cm_fs_parent(fs, op->p1, &dir, &last)
			      ?: tfs_unlink(fs, dir, last, strlen(last));
		break;
	case CM_link:
		ret = cm_fs_lookup(fs, op->p1, &ino) ?: cm_fs_parent(fs, op->p2, &dir, &last) ?:
			tfs_link(fs, ino, dir, last, strlen(last), &st);
		break;
	case CM_rename:
	case CM_exchange:
		ret = cm_fs_parent(fs, op->p1, &dir, &last) ?:
			cm_fs_parent(fs, op->p2, &dir2, &last2) ?:
			tfs_rename(fs, dir, last, strlen(last), dir2, last2, strlen(last2),
				   op->kind == CM_exchange ? TFS_RENAME_EXCHANGE : 0);
		break;
	case CM_setxattr: {
		char v[CM_XV];
		int len = snprintf(v, sizeof(v), "v%u.%u", step, opi);

		ret = cm_fs_lookup(fs, op->p1, &ino)
			      ?: tfs_setxattr(fs, ino, "user.k", v, (size_t)len, 0);
		break;
	}
	case CM_removexattr:
		ret = cm_fs_lookup(fs, op->p1, &ino) ?: tfs_removexattr(fs, ino, "user.k");
		break;
	case CM_utimes: {
		struct tfs_setattr sa = { .valid = TFS_SETATTR_MTIME,
					  .mtime = { .tv_sec = 1000000 + step } };

		ret = cm_fs_lookup(fs, op->p1, &ino) ?: tfs_setattr(fs, ino, NULL, &sa, NULL);
		break;
	}
	case CM_fsyncdir:
		ino = TFS_ROOT_INO;
		ret = (op->p1 ? cm_fs_lookup(fs, op->p1, &ino) : 0) ?: tfs_fsyncdir(fs, ino, false);
		break;
	case CM_syncfs:
		ret = tfs_syncfs(fs);
		break;
	}
	if (f) {
		int r2 = tfs_release(fs, f);

		ret = ret ?: r2;
	}
	return ret;
}

/* --- comparing a filesystem with a state --- */

struct cm_list {
	unsigned nr;
	char name[CM_MAXN][8];
	tfs_ino_t ino[CM_MAXN];
	bool overflow;
};

static inline int cm_fill(void *ctx, const char *name, size_t len, tfs_ino_t ino, unsigned dtype,
			  u64 next)
{
	struct cm_list *l = ctx;

	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (l->nr == CM_MAXN || len >= 8) {
		l->overflow = true;
		return 1;
	}
	memcpy(l->name[l->nr], name, len);
	l->name[l->nr][len] = 0;
	l->ino[l->nr++] = ino;
	return 0;
}

struct cm_cmp {
	tfs_ino_t map[CM_MAXI]; /* model inode -> filesystem inode */
	char why[160];		/* the first difference */
};

static inline bool cm_file_matches(struct tfs_fs *fs, tfs_ino_t ino, const struct cm_state *s,
				   unsigned mi, struct cm_cmp *c)
{
	static u8 buf[CM_SIZE + 1];
	const struct cm_inode *in = &s->i[mi];
	struct tfs_file *h;
	struct tfs_stat st;
	char x[CM_XV + 4];
	ssize_t n;
	bool ok;

	if (tfs_getattr(fs, ino, &st) || !S_ISREG(st.mode)) {
		snprintf(c->why, sizeof(c->why), "inode %llu: not a file", (unsigned long long)ino);
		return false;
	}
	if (st.size != in->size || st.nlink != cm_nlink(s, mi)) {
		snprintf(c->why, sizeof(c->why), "inode %llu: size %llu nlink %u, want %llu %u",
			 (unsigned long long)ino, (unsigned long long)st.size, st.nlink,
			 (unsigned long long)in->size, cm_nlink(s, mi));
		return false;
	}
	if (in->mtime_known && st.mtime.tv_sec != in->mtime) {
		snprintf(c->why, sizeof(c->why), "inode %llu: mtime %lld, want %lld",
			 (unsigned long long)ino, (long long)st.mtime.tv_sec, (long long)in->mtime);
		return false;
	}
	n = tfs_getxattr(fs, ino, "user.k", x, sizeof(x));
	if (in->has_x ? n != in->xlen || memcmp(x, in->xval, in->xlen) : n != -ENODATA) {
		snprintf(c->why, sizeof(c->why), "inode %llu: user.k %zd, want %s",
			 (unsigned long long)ino, n, in->has_x ? in->xval : "none");
		return false;
	}
	if (tfs_open(fs, ino, O_RDONLY, &h))
		return false;
	n = tfs_read(fs, h, buf, sizeof(buf), 0);
	ok = n == (ssize_t)in->size && !memcmp(buf, in->data, in->size);
	tfs_release(fs, h);
	if (!ok)
		snprintf(c->why, sizeof(c->why), "inode %llu: data differs",
			 (unsigned long long)ino);
	return ok;
}

static inline bool cm_dir_matches(struct tfs_fs *fs, tfs_ino_t dir, const struct cm_state *s,
				  unsigned md, struct cm_cmp *c)
{
	struct cm_list l;
	unsigned want = 0;

	memset(&l, 0, sizeof(l));
	if (tfs_readdir(fs, dir, 0, cm_fill, &l) || l.overflow) {
		snprintf(c->why, sizeof(c->why), "dir %llu: unreadable or too big",
			 (unsigned long long)dir);
		return false;
	}
	for (unsigned i = 0; i < CM_MAXN; i++) {
		const struct cm_name *n = &s->n[i];
		tfs_ino_t got = 0;

		if (!n->used || n->parent != md)
			continue;
		want++;
		for (unsigned j = 0; j < l.nr; j++)
			if (!strcmp(l.name[j], n->name))
				got = l.ino[j];
		if (!got) {
			snprintf(c->why, sizeof(c->why), "dir %llu: no %s", (unsigned long long)dir,
				 n->name);
			return false;
		}
		/* One model inode is one filesystem inode, and the other way round. */
		for (unsigned k = 0; k < CM_MAXI; k++)
			if (k == n->ino ? c->map[k] && c->map[k] != got : c->map[k] == got) {
				snprintf(c->why, sizeof(c->why),
					 "%s: inode %llu, not the one expected", n->name,
					 (unsigned long long)got);
				return false;
			}
		if (c->map[n->ino])
			continue; /* another name of a file already compared */
		c->map[n->ino] = got;
		if (s->i[n->ino].kind == CM_DIR) {
			struct tfs_stat st;

			if (tfs_getattr(fs, got, &st) || !S_ISDIR(st.mode)) {
				snprintf(c->why, sizeof(c->why), "%s: not a directory", n->name);
				return false;
			}
			if (!cm_dir_matches(fs, got, s, n->ino, c))
				return false;
		} else if (!cm_file_matches(fs, got, s, n->ino, c)) {
			return false;
		}
	}
	if (l.nr != want) {
		snprintf(c->why, sizeof(c->why), "dir %llu: %u entries, want %u",
			 (unsigned long long)dir, l.nr, want);
		return false;
	}
	return true;
}

/* Whether fs holds exactly state s (names, types, links, sizes, bytes, user.k, set mtimes). */
static inline bool cm_matches(struct tfs_fs *fs, const struct cm_state *s, struct cm_cmp *c)
{
	memset(c, 0, sizeof(*c));
	c->map[0] = TFS_ROOT_INO;
	return cm_dir_matches(fs, TFS_ROOT_INO, s, 0, c);
}

/*
 * Acknowledged bytes missing from fs: the bytes of every file of state `from`
 * that no operation up to state `to` changed (same name, same inode, same
 * bytes in every state between), compared at that name.
 */
static inline u64 cm_bytes_lost(struct tfs_fs *fs, const struct cm_state *states, unsigned from,
				unsigned to)
{
	static u8 buf[CM_SIZE + 1];
	const struct cm_state *s = &states[from];
	u64 lost = 0;

	for (unsigned i = 0; i < CM_MAXN; i++) {
		const struct cm_name *n = &s->n[i];
		const struct cm_inode *in = &s->i[n->ino];
		bool stable = n->used && in->kind == CM_FILE;
		char path[24];
		tfs_ino_t ino;
		struct tfs_file *h;

		for (unsigned j = from + 1; stable && j <= to; j++) {
			const struct cm_state *t = &states[j];

			stable = t->n[i].used && t->n[i].parent == n->parent &&
				 !strcmp(t->n[i].name, n->name) && t->n[i].ino == n->ino &&
				 t->i[n->ino].size == in->size &&
				 !memcmp(t->i[n->ino].data, in->data, in->size);
		}
		if (!stable)
			continue;
		if (n->parent)
			for (unsigned k = 0; k < CM_MAXN; k++)
				if (s->n[k].used && s->n[k].ino == n->parent)
					snprintf(path, sizeof(path), "%s/%s", s->n[k].name,
						 n->name);
		if (!n->parent)
			snprintf(path, sizeof(path), "%s", n->name);
		if (cm_fs_lookup(fs, path, &ino) || tfs_open(fs, ino, O_RDONLY, &h)) {
			lost += in->size;
			continue;
		}
		ssize_t got = tfs_read(fs, h, buf, sizeof(buf), 0);

		tfs_release(fs, h);
		for (u64 b = 0; b < in->size; b++)
			lost += got < 0 || b >= (u64)got || buf[b] != in->data[b];
	}
	return lost;
}

#endif /* TFS_TESTS_FAULT_CRASH_MODEL_H */
