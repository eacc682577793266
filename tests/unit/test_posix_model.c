// SPDX-License-Identifier: GPL-2.0
/*
 * A model-based random test of the whole POSIX layer (fs/fs.h): seeded
 * sequences of every operation (mknod of every type, mkdir, symlink,
 * link, unlink, rmdir, rename with its flags, setattr's chmod, chown,
 * utimens and truncate, open with O_TRUNC, create, release, read, write,
 * fallocate's modes, SEEK_DATA/SEEK_HOLE, xattrs, fsync, lookup, bad
 * names) run against an in-memory model of a POSIX tree.  Every call's
 * return code is predicted by the model and compared; the touched inodes
 * are compared after each step, the whole tree (listings, attributes,
 * contents, xattrs) every few steps and after every close/reopen (which
 * drops open files: the model forgets unlinked ones, the filesystem's
 * orphan recovery must too), with the test fsck after each reopen.
 *
 * Thousands of steps by default; TFS_LONG=1 runs millions (several seeds,
 * fewer full comparisons).  TFS_MODEL_SEED=N runs one seed (with
 * TFS_MODEL_COLLIDE=1, every name hashing to one of four slots).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <linux/falloc.h>

#include "posix_test.h"

#define MAXN 64		 /* model nodes (inodes) */
#define MAXE 160	 /* model dirents */
#define MAXF 12		 /* open files */
#define MAXX 6		 /* xattrs per node */
#define MAXSZ (96 << 10) /* file size limit of the model */
#define BS 4096
#define XVAL_MAX 6000

enum {
	B_HOLE,
	B_UNWRITTEN,
	B_DATA
};

struct mxattr {
	bool used;
	char name[32];
	u16 len;
	u8 *val;
};

struct mnode {
	bool used;
	tfs_ino_t ino;
	u32 mode, uid, gid, nlink;
	u64 rdev, size;
	int parent; /* directories */
	u8 *data;   /* regular files: MAXSZ bytes */
	u8 bst[MAXSZ / BS];
	char *target;
	unsigned open;
	bool atime_known, mtime_known;
	s64 atime, mtime;
	struct mxattr x[MAXX];
};

struct mdirent {
	bool used;
	int dir, node;
	u8 len;
	char name[256];
};

struct mfile {
	struct tfs_file *f;
	int node;
};

static struct {
	struct mnode n[MAXN];
	struct mdirent e[MAXE];
	struct mfile f[MAXF];
} M;

static struct pt T;
static u64 rng;
static tfs_name_hash_fn hash_fn;
static unsigned step_nr;
static bool verbose;

static u64 rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static u64 rn(u64 n)
{
	return n ? rnd() % n : 0;
}

#define CHECK(cond, ...)                                       \
	do {                                                   \
		if (!(cond)) {                                 \
			fprintf(stderr, "step %u: ", step_nr); \
			fprintf(stderr, __VA_ARGS__);          \
			fprintf(stderr, "\n");                 \
			fail();                                \
		}                                              \
	} while (0)

/* Calls and successes per operation, printed at the end of a run: coverage at a glance. */
static struct {
	const char *what;
	unsigned long calls, ok;
} stats[32];

static void count(const char *what, long got)
{
	for (unsigned i = 0; i < ARRAY_SIZE(stats); i++) {
		if (!stats[i].what)
			stats[i].what = what;
		if (!strcmp(stats[i].what, what)) {
			stats[i].calls++;
			stats[i].ok += got >= 0;
			return;
		}
	}
}

/* got is evaluated once (it is the call under test). */
#define EXPECT(got, want, what)                                                         \
	do {                                                                            \
		long _got = (long)(got), _want = (long)(want);                          \
                                                                                        \
		count(what, _got);                                                      \
		CHECK(_got == _want, "%s: got %ld (%s), expected %ld (%s)", what, _got, \
		      tfs_err_str((int)_got), _want, tfs_err_str((int)_want));          \
	} while (0)

/* --- names --- */

static const char *const base_names[] = { "a", "b", "c", "dd", "e.f", "...", " ", "Z" };

/* A name: mostly from a small set (so they collide), sometimes long or odd bytes. */
static size_t pick_name(char *buf)
{
	unsigned r = (unsigned)rn(100);

	if (r < 80) {
		const char *s = base_names[rn(ARRAY_SIZE(base_names))];

		memcpy(buf, s, strlen(s));
		return strlen(s);
	}
	if (r < 88) {
		size_t len = 250 + rn(6); /* up to 255 */

		memset(buf, 'L', len);
		buf[len - 1] = (char)('0' + rn(3));
		return len;
	}
	size_t len = 1 + rn(12);

	for (size_t i = 0; i < len; i++) {
		int c;

		do
			c = (int)(1 + rn(255));
		while (c == '/');
		buf[i] = (char)(c % 3 ? 'a' + c % 3 : c);
	}
	return len;
}

/* A bad name now and then: its expected error. */
static int bad_name(char *buf, size_t *len)
{
	switch (rn(3)) {
	case 0:
		*len = 0;
		return -EINVAL;
	case 1:
		memcpy(buf, "x/y", 3);
		*len = 3;
		return -EINVAL;
	default:
		memset(buf, 'n', 256);
		*len = 256;
		return -ENAMETOOLONG;
	}
}

/* --- the model's helpers --- */

static int m_lookup(int dir, const char *name, size_t len)
{
	for (int i = 0; i < MAXE; i++)
		if (M.e[i].used && M.e[i].dir == dir && M.e[i].len == len &&
		    !memcmp(M.e[i].name, name, len))
			return i;
	return -1;
}

static bool is_dir(int n)
{
	return S_ISDIR(M.n[n].mode);
}

static unsigned m_nr_entries(int dir)
{
	unsigned nr = 0;

	for (int i = 0; i < MAXE; i++)
		nr += M.e[i].used && M.e[i].dir == dir;
	return nr;
}

static int m_add_entry(int dir, const char *name, size_t len, int node)
{
	for (int i = 0; i < MAXE; i++)
		if (!M.e[i].used) {
			M.e[i] = (struct mdirent){ .used = true, .dir = dir, .node = node };
			M.e[i].len = (u8)len;
			memcpy(M.e[i].name, name, len);
			return i;
		}
	return -1;
}

static int m_free_node_slot(void)
{
	for (int i = 0; i < MAXN; i++)
		if (!M.n[i].used)
			return i;
	return -1;
}

static void m_free_node(int n)
{
	struct mnode *x = &M.n[n];

	free(x->data);
	free(x->target);
	for (int i = 0; i < MAXX; i++)
		free(x->x[i].val);
	memset(x, 0, sizeof(*x));
}

/* A node lost a name (or an open file): it goes when neither is left. */
static void m_maybe_free(int n)
{
	if (!M.n[n].nlink && !M.n[n].open)
		m_free_node(n);
}

static int pick_node(bool (*want)(int))
{
	int cand[MAXN], nr = 0;

	for (int i = 0; i < MAXN; i++)
		if (M.n[i].used && (!want || want(i)))
			cand[nr++] = i;
	return nr ? cand[rn((u64)nr)] : -1;
}

static bool want_dir(int n)
{
	return is_dir(n) && M.n[n].nlink;
}

static bool want_reg(int n)
{
	return S_ISREG(M.n[n].mode) && M.n[n].nlink;
}

static bool named(int n)
{
	return M.n[n].nlink > 0;
}

/* A directory, usually; sometimes any inode (ENOTDIR). */
static int pick_dir(void)
{
	int n = rn(20) ? pick_node(want_dir) : pick_node(named);

	return n < 0 ? 0 : n;
}

/* An existing name in some directory, or a fresh one. */
static int pick_entry_name(int dir, char *name, size_t *len)
{
	if (rn(4)) {
		int cand[MAXE], nr = 0;

		for (int i = 0; i < MAXE; i++)
			if (M.e[i].used && M.e[i].dir == dir)
				cand[nr++] = i;
		if (nr) {
			int e = cand[rn((u64)nr)];

			memcpy(name, M.e[e].name, M.e[e].len);
			*len = M.e[e].len;
			return 0;
		}
	}
	*len = pick_name(name);
	return 0;
}

static bool m_is_under(int dir, int anc)
{
	for (unsigned depth = 0; depth < 1000; depth++) {
		if (dir == anc)
			return true;
		if (dir == 0)
			return false;
		dir = M.n[dir].parent;
	}
	abort();
}

static void m_kill_suidgid(struct mnode *x)
{
	x->mode &= ~(u32)S_ISUID;
	if ((x->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		x->mode &= ~(u32)S_ISGID;
}

static u64 m_blocks(const struct mnode *x)
{
	u64 n = 0;

	if (!S_ISREG(x->mode))
		return 0;
	for (unsigned b = 0; b < MAXSZ / BS; b++)
		n += x->bst[b] != B_HOLE;
	return n;
}

/* --- comparing --- */

static void check_node(int n)
{
	struct mnode *x = &M.n[n];
	struct tfs_stat st;

	EXPECT(tfs_getattr(T.fs, x->ino, &st), 0, "getattr");
	CHECK(st.mode == x->mode, "inode %llu: mode 0%o, expected 0%o", (unsigned long long)x->ino,
	      st.mode, x->mode);
	CHECK(st.nlink == x->nlink, "inode %llu: nlink %u, expected %u", (unsigned long long)x->ino,
	      st.nlink, x->nlink);
	CHECK(st.uid == x->uid && st.gid == x->gid, "inode %llu: owner %u:%u, expected %u:%u",
	      (unsigned long long)x->ino, st.uid, st.gid, x->uid, x->gid);
	CHECK(st.rdev == x->rdev, "inode %llu: rdev", (unsigned long long)x->ino);
	if (!is_dir(n))
		CHECK(st.size == x->size, "inode %llu: size %llu, expected %llu",
		      (unsigned long long)x->ino, (unsigned long long)st.size,
		      (unsigned long long)x->size);
	CHECK(st.blocks == m_blocks(x) * (BS / 512), "inode %llu: blocks %llu, expected %llu",
	      (unsigned long long)x->ino, (unsigned long long)st.blocks,
	      (unsigned long long)m_blocks(x) * (BS / 512));
	if (x->mtime_known)
		CHECK((s64)st.mtime.tv_sec * 1000000000 + st.mtime.tv_nsec == x->mtime,
		      "inode %llu: mtime", (unsigned long long)x->ino);
	if (x->atime_known)
		CHECK((s64)st.atime.tv_sec * 1000000000 + st.atime.tv_nsec == x->atime,
		      "inode %llu: atime", (unsigned long long)x->ino);
	if (S_ISLNK(x->mode)) {
		static char buf[TFS_SYMLINK_MAX + 1];

		EXPECT(tfs_readlink(T.fs, x->ino, buf, sizeof(buf)), x->size, "readlink");
		CHECK(!memcmp(buf, x->target, x->size), "symlink %llu target",
		      (unsigned long long)x->ino);
	}
}

static void check_data(int n)
{
	static u8 buf[MAXSZ + 1];
	struct mnode *x = &M.n[n];
	struct tfs_file *f;

	if (!S_ISREG(x->mode))
		return;
	EXPECT(tfs_open(T.fs, x->ino, O_RDONLY, &f), 0, "open for check");
	EXPECT(tfs_read(T.fs, f, buf, sizeof(buf), 0), x->size, "read all");
	for (u64 i = 0; i < x->size; i++)
		CHECK(buf[i] == x->data[i], "inode %llu byte %llu: 0x%02x, expected 0x%02x",
		      (unsigned long long)x->ino, (unsigned long long)i, buf[i], x->data[i]);
	EXPECT(tfs_release(T.fs, f), 0, "release");
}

static void check_xattrs(int n)
{
	static char list[8192];
	static u8 val[XVAL_MAX];
	struct mnode *x = &M.n[n];
	ssize_t len = tfs_listxattr(T.fs, x->ino, list, sizeof(list));
	unsigned nr = 0, want = 0;

	CHECK(len >= 0, "listxattr: %s", tfs_err_str((int)len));
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		bool found = false;

		nr++;
		for (int i = 0; i < MAXX; i++)
			if (x->x[i].used && !strcmp(x->x[i].name, p)) {
				found = true;
				EXPECT(tfs_getxattr(T.fs, x->ino, p, val, sizeof(val)), x->x[i].len,
				       "getxattr");
				CHECK(!memcmp(val, x->x[i].val, x->x[i].len), "xattr %s value", p);
			}
		CHECK(found, "inode %llu: unexpected xattr %s", (unsigned long long)x->ino, p);
	}
	for (int i = 0; i < MAXX; i++)
		want += x->x[i].used;
	CHECK(nr == want, "inode %llu: %u xattrs, expected %u", (unsigned long long)x->ino, nr,
	      want);
}

struct rd {
	unsigned nr;
	struct {
		char name[256];
		u8 len;
		tfs_ino_t ino;
		unsigned dtype;
	} e[MAXE + 2];
};

static int rd_fill(void *ctx, const char *name, size_t len, tfs_ino_t ino, unsigned dtype, u64 next)
{
	struct rd *r = ctx;

	if (r->nr == MAXE + 2)
		return 1;
	memcpy(r->e[r->nr].name, name, len);
	r->e[r->nr].len = (u8)len;
	r->e[r->nr].ino = ino;
	r->e[r->nr].dtype = dtype;
	r->nr++;
	return 0;
}

static void check_dir(int d)
{
	static struct rd r;
	struct mnode *x = &M.n[d];

	r.nr = 0;
	EXPECT(tfs_readdir(T.fs, x->ino, 0, rd_fill, &r), 0, "readdir");
	CHECK(r.nr == m_nr_entries(d) + 2, "dir %llu: %u entries, expected %u",
	      (unsigned long long)x->ino, r.nr, m_nr_entries(d) + 2);
	CHECK(r.e[0].len == 1 && r.e[0].ino == x->ino, "dir %llu: .", (unsigned long long)x->ino);
	CHECK(r.e[1].len == 2 && r.e[1].ino == M.n[x->parent].ino, "dir %llu: .. is %llu",
	      (unsigned long long)x->ino, (unsigned long long)r.e[1].ino);
	for (unsigned i = 2; i < r.nr; i++) {
		int e = m_lookup(d, r.e[i].name, r.e[i].len);

		CHECK(e >= 0, "dir %llu: unexpected entry %.*s", (unsigned long long)x->ino,
		      r.e[i].len, r.e[i].name);
		CHECK(r.e[i].ino == M.n[M.e[e].node].ino, "dir %llu: entry %.*s -> %llu",
		      (unsigned long long)x->ino, r.e[i].len, r.e[i].name,
		      (unsigned long long)r.e[i].ino);
		CHECK(r.e[i].dtype == (M.n[M.e[e].node].mode & S_IFMT) >> 12, "dtype");
		for (unsigned j = 2; j < i; j++)
			CHECK(r.e[j].len != r.e[i].len ||
				      memcmp(r.e[j].name, r.e[i].name, r.e[i].len),
			      "dir %llu: an entry listed twice", (unsigned long long)x->ino);
	}
}

static void check_all(void)
{
	for (int n = 0; n < MAXN; n++) {
		if (!M.n[n].used)
			continue;
		check_node(n);
		check_data(n);
		check_xattrs(n);
		if (is_dir(n))
			check_dir(n);
	}
}

/* --- operations --- */

static const struct tfs_ctx ctxs[] = { { 0, 0, 1 }, { 1000, 100, 2 }, { 1000, 50, 3 } };

static int new_node(u32 mode, int dir, const struct tfs_ctx *ctx)
{
	int n = m_free_node_slot();
	struct mnode *x = &M.n[n];

	memset(x, 0, sizeof(*x));
	x->used = true;
	x->mode = mode;
	x->uid = ctx->uid;
	x->gid = ctx->gid;
	if (M.n[dir].mode & S_ISGID) {
		x->gid = M.n[dir].gid;
		if (S_ISDIR(mode))
			x->mode |= S_ISGID;
	}
	x->nlink = S_ISDIR(mode) ? 2 : 1;
	x->parent = dir;
	if (S_ISREG(mode))
		x->data = calloc(1, MAXSZ);
	return n;
}

static void op_create(void)
{
	static const u32 types[] = { S_IFREG, S_IFREG,	S_IFDIR, S_IFDIR, S_IFLNK,
				     S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK, 0 };
	const struct tfs_ctx *ctx = &ctxs[rn(ARRAY_SIZE(ctxs))];
	u32 type = types[rn(ARRAY_SIZE(types))], perm = (u32)rn(01000);
	int dir = pick_dir(), want = 0, e, n;
	char name[300];
	size_t len = pick_name(name);
	u64 rdev = (type == S_IFCHR || type == S_IFBLK) ? rn(1 << 20) : 0;
	static char target[TFS_SYMLINK_MAX + 2];
	size_t tlen = 0;
	struct tfs_stat st;
	struct tfs_file *f = NULL;
	bool use_create = type == S_IFREG && rn(2);
	int ret;

	if (m_free_node_slot() < 0 || M.n[0].used == false)
		return;
	if (!rn(30))
		want = bad_name(name, &len);
	if (type == S_IFLNK) {
		tlen = rn(10) ? 1 + rn(64) : rn(3) ? TFS_SYMLINK_MAX - rn(3) : 0;
		for (size_t i = 0; i < tlen; i++)
			target[i] = (char)('a' + rn(26));
		target[tlen] = 0;
		if (!tlen)
			want = -ENOENT; /* an empty target, checked first */
	}
	if (!want && !is_dir(dir))
		want = -ENOTDIR;
	if (!want && type == S_IFDIR && M.n[dir].nlink >= TFS_LINK_MAX)
		want = -EMLINK;
	if (!want && m_lookup(dir, name, len) >= 0)
		want = -EEXIST;
	if (!want && m_add_entry(dir, name, len, -1) < 0)
		return; /* the model is full */
	if (!want)
		M.e[m_lookup(dir, name, len)].used = false;

	switch (type) {
	case S_IFDIR:
		ret = tfs_mkdir(T.fs, ctx, M.n[dir].ino, name, len, perm, &st);
		break;
	case S_IFLNK:
		ret = tfs_symlink(T.fs, ctx, M.n[dir].ino, name, len, target, &st);
		break;
	case S_IFREG:
		if (use_create) {
			ret = tfs_create(T.fs, ctx, M.n[dir].ino, name, len, perm,
					 O_CREAT | O_EXCL | O_RDWR, &f, &st);
			break;
		}
		/* fallthrough */
	default:
		ret = tfs_mknod(T.fs, ctx, M.n[dir].ino, name, len, type | perm, rdev, &st);
	}
	if (verbose)
		fprintf(stderr, "step %u: create 0%o %.*s in %llu: %d\n", step_nr, type,
			(int)min_t(size_t, len, 20), name, (unsigned long long)M.n[dir].ino, ret);
	EXPECT(ret, want, "create");
	if (ret)
		return;
	n = new_node((type ?: S_IFREG) | perm, dir, ctx);
	M.n[n].ino = st.ino;
	if (S_ISCHR(type) || S_ISBLK(type))
		M.n[n].rdev = rdev;
	if (type == S_IFLNK) {
		M.n[n].mode = S_IFLNK | 0777;
		M.n[n].target = strdup(target);
		M.n[n].size = tlen;
	}
	if (type == S_IFDIR)
		M.n[dir].nlink++;
	e = m_add_entry(dir, name, len, n);
	assert_true(e >= 0);
	M.n[dir].mtime_known = false;
	if (f) {
		for (int i = 0; i < MAXF; i++)
			if (!M.f[i].f) {
				M.f[i] = (struct mfile){ f, n };
				M.n[n].open++;
				f = NULL;
				break;
			}
		if (f)
			EXPECT(tfs_release(T.fs, f), 0, "release");
	}
	check_node(n);
	check_node(dir);
}

static void op_link(void)
{
	int src = pick_node(named), dir = pick_dir(), want = 0;
	char name[300];
	size_t len = pick_name(name);

	if (src < 0)
		return;
	if (!rn(30))
		want = bad_name(name, &len);
	if (!want && is_dir(src))
		want = -EPERM;
	if (!want && !is_dir(dir))
		want = -ENOTDIR;
	if (!want && m_lookup(dir, name, len) >= 0)
		want = -EEXIST;
	if (!want && m_add_entry(dir, name, len, src) < 0)
		return;
	EXPECT(tfs_link(T.fs, M.n[src].ino, M.n[dir].ino, name, len, NULL), want, "link");
	if (want) {
		return;
	}
	M.n[src].nlink++;
	M.n[dir].mtime_known = false;
	check_node(src);
}

static void op_remove(bool rmdir)
{
	int dir = pick_dir(), want = 0, e = -1, n = -1;
	char name[300];
	size_t len;

	pick_entry_name(dir, name, &len);
	if (!rn(30))
		want = bad_name(name, &len);
	if (!want && !is_dir(dir))
		want = -ENOTDIR;
	if (!want) {
		e = m_lookup(dir, name, len);
		if (e < 0)
			want = -ENOENT;
	}
	if (!want) {
		n = M.e[e].node;
		if (rmdir && !is_dir(n))
			want = -ENOTDIR;
		else if (!rmdir && is_dir(n))
			want = -EISDIR;
		else if (rmdir && m_nr_entries(n))
			want = -ENOTEMPTY;
	}
	if (rmdir)
		EXPECT(tfs_rmdir(T.fs, M.n[dir].ino, name, len), want, "rmdir");
	else
		EXPECT(tfs_unlink(T.fs, M.n[dir].ino, name, len), want, "unlink");
	if (want)
		return;
	M.e[e].used = false;
	M.n[dir].mtime_known = false;
	if (rmdir) {
		M.n[dir].nlink--;
		M.n[n].nlink = 0;
	} else {
		M.n[n].nlink--;
	}
	tfs_ino_t ino = M.n[n].ino;

	m_maybe_free(n);
	if (!M.n[n].used) {
		struct tfs_stat st;

		EXPECT(tfs_getattr(T.fs, ino, &st), -ENOENT, "getattr of a removed inode");
	} else {
		check_node(n);
	}
	check_node(dir);
}

static void op_rename(void)
{
	static const unsigned flag_set[] = { 0, 0, 0, TFS_RENAME_NOREPLACE, TFS_RENAME_EXCHANGE };
	unsigned flags = flag_set[rn(ARRAY_SIZE(flag_set))];
	int od = pick_dir(), nd = rn(2) ? od : pick_dir(), want = 0, se = -1, de = -1, s = -1,
	    d = -1;
	char on[300], nn[300];
	size_t ol, nl;
	bool cross = od != nd;

	pick_entry_name(od, on, &ol);
	pick_entry_name(nd, nn, &nl);
	if (!rn(40))
		want = bad_name(nn, &nl);
	if (!want && (!is_dir(od) || !is_dir(nd)))
		want = -ENOTDIR;
	if (!want) {
		se = m_lookup(od, on, ol);
		de = m_lookup(nd, nn, nl);
		if (se < 0)
			want = -ENOENT;
		else if ((flags & TFS_RENAME_EXCHANGE) && de < 0)
			want = -ENOENT;
		else if ((flags & TFS_RENAME_NOREPLACE) && de >= 0)
			want = -EEXIST;
	}
	if (!want) {
		s = M.e[se].node;
		d = de >= 0 ? M.e[de].node : -1;
	}
	if (!want && s == d) {
		/* Two names of one inode: nothing happens. */
		EXPECT(tfs_rename(T.fs, M.n[od].ino, on, ol, M.n[nd].ino, nn, nl, flags), 0,
		       "rename to itself");
		return;
	}
	if (!want && cross && is_dir(s) && m_is_under(nd, s))
		want = -EINVAL;
	if (!want && cross && (flags & TFS_RENAME_EXCHANGE) && is_dir(d) && m_is_under(od, d))
		want = -EINVAL;
	if (!want && d >= 0 && !(flags & TFS_RENAME_EXCHANGE)) {
		if (is_dir(d) && !is_dir(s))
			want = -EISDIR;
		else if (!is_dir(d) && is_dir(s))
			want = -ENOTDIR;
		else if (is_dir(d) && m_nr_entries(d))
			want = -ENOTEMPTY;
	}
	if (!want && de < 0 && m_add_entry(nd, nn, nl, s) < 0)
		return;
	if (!want && de < 0)
		M.e[m_lookup(nd, nn, nl)].used = false;
	EXPECT(tfs_rename(T.fs, M.n[od].ino, on, ol, M.n[nd].ino, nn, nl, flags), want, "rename");
	if (want)
		return;
	M.n[od].mtime_known = M.n[nd].mtime_known = false;
	if (flags & TFS_RENAME_EXCHANGE) {
		M.e[se].node = d;
		M.e[de].node = s;
		if (cross && is_dir(s)) {
			M.n[s].parent = nd;
			M.n[od].nlink--;
			M.n[nd].nlink++;
		}
		if (cross && is_dir(d)) {
			M.n[d].parent = od;
			M.n[nd].nlink--;
			M.n[od].nlink++;
		}
	} else {
		if (d >= 0) {
			M.e[de].used = false;
			if (is_dir(d)) {
				M.n[d].nlink = 0;
				M.n[nd].nlink--;
			} else {
				M.n[d].nlink--;
			}
			m_maybe_free(d);
		}
		M.e[se].used = false;
		m_add_entry(nd, nn, nl, s);
		if (cross && is_dir(s)) {
			M.n[s].parent = nd;
			M.n[od].nlink--;
			M.n[nd].nlink++;
		}
	}
	check_node(s);
	check_node(od);
	check_node(nd);
	if (is_dir(od))
		check_dir(od);
	if (nd != od)
		check_dir(nd);
}

static void op_setattr(void)
{
	int n = pick_node(named), want = 0;
	struct tfs_setattr sa = { 0 };
	struct mnode *x;
	struct tfs_stat st;
	unsigned r = (unsigned)rn(5);

	if (n < 0)
		return;
	x = &M.n[n];
	switch (r) {
	case 0:
		sa.valid = TFS_SETATTR_MODE;
		sa.mode = (u32)rn(010000);
		break;
	case 1:
		sa.valid = (rn(2) ? TFS_SETATTR_UID : 0) | TFS_SETATTR_GID |
			   (rn(4) ? 0 : TFS_SETATTR_KILL_SUIDGID);
		sa.uid = (u32)rn(3) * 500;
		sa.gid = (u32)rn(3) * 50;
		break;
	case 2:
		sa.valid = TFS_SETATTR_SIZE;
		sa.size = rn(4) ? rn(MAXSZ) : rn(3) * BS;
		if (is_dir(n))
			want = -EISDIR;
		else if (!S_ISREG(x->mode))
			want = -EINVAL;
		break;
	default:
		sa.valid = (rn(2) ? TFS_SETATTR_ATIME : TFS_SETATTR_ATIME_NOW) |
			   (rn(2) ? TFS_SETATTR_MTIME : TFS_SETATTR_MTIME_NOW);
		sa.atime = (struct timespec){ (time_t)rn(2000000000), (long)rn(1000000000) };
		sa.mtime = (struct timespec){ (time_t)rn(2000000000), (long)rn(1000000000) };
		break;
	}
	EXPECT(tfs_setattr(T.fs, x->ino, NULL, &sa, &st), want, "setattr");
	if (want)
		return;
	if (sa.valid & TFS_SETATTR_UID)
		x->uid = sa.uid;
	if (sa.valid & TFS_SETATTR_GID)
		x->gid = sa.gid;
	if ((sa.valid & (TFS_SETATTR_UID | TFS_SETATTR_GID)) && !is_dir(n))
		m_kill_suidgid(x);
	if ((sa.valid & TFS_SETATTR_KILL_SUIDGID) && !is_dir(n))
		m_kill_suidgid(x);
	if (sa.valid & TFS_SETATTR_MODE)
		x->mode = (x->mode & S_IFMT) | (sa.mode & 07777);
	if (sa.valid & TFS_SETATTR_SIZE) {
		if (sa.size < x->size) {
			memset(x->data + sa.size, 0, MAXSZ - sa.size);
			for (u64 b = DIV_ROUND_UP(sa.size, BS); b < MAXSZ / BS; b++)
				x->bst[b] = B_HOLE;
		}
		x->size = sa.size;
		x->mtime_known = false;
	}
	x->atime_known = !!(sa.valid & TFS_SETATTR_ATIME);
	x->atime = (s64)sa.atime.tv_sec * 1000000000 + sa.atime.tv_nsec;
	if (sa.valid & TFS_SETATTR_MTIME) {
		x->mtime_known = true;
		x->mtime = (s64)sa.mtime.tv_sec * 1000000000 + sa.mtime.tv_nsec;
	} else if (sa.valid & TFS_SETATTR_MTIME_NOW) {
		x->mtime_known = false;
	}
	check_node(n);
}

/* --- open files --- */

static int pick_open(void)
{
	int cand[MAXF], nr = 0;

	for (int i = 0; i < MAXF; i++)
		if (M.f[i].f)
			cand[nr++] = i;
	return nr ? cand[rn((u64)nr)] : -1;
}

static void op_open(void)
{
	int n = pick_node(want_reg), slot = -1;
	bool trunc = !rn(8);

	for (int i = 0; i < MAXF; i++)
		if (!M.f[i].f)
			slot = i;
	if (n < 0 || slot < 0)
		return;
	EXPECT(tfs_open(T.fs, M.n[n].ino, O_RDWR | (trunc ? O_TRUNC : 0), &M.f[slot].f), 0, "open");
	M.f[slot].node = n;
	M.n[n].open++;
	if (trunc && M.n[n].size) {
		memset(M.n[n].data, 0, MAXSZ);
		memset(M.n[n].bst, 0, sizeof(M.n[n].bst));
		M.n[n].size = 0;
		M.n[n].mtime_known = false;
	}
	check_node(n);
}

static void op_release(void)
{
	int i = pick_open(), n;
	tfs_ino_t ino;

	if (i < 0)
		return;
	n = M.f[i].node;
	ino = M.n[n].ino;
	EXPECT(tfs_release(T.fs, M.f[i].f), 0, "release");
	M.f[i].f = NULL;
	M.n[n].open--;
	m_maybe_free(n);
	if (!M.n[n].used) {
		struct tfs_stat st;

		EXPECT(tfs_getattr(T.fs, ino, &st), -ENOENT, "getattr after the last release");
	}
}

/* An offset up to max, often at a block edge or one byte off it. */
static u64 pick_off(u64 max)
{
	u64 v;

	if (rn(3))
		return rn(max + 1);
	v = min_t(u64, max, rn(max / BS + 1) * BS + rn(2));
	return v && rn(2) ? v - 1 : v;
}

static void op_write(void)
{
	static u8 buf[MAXSZ];
	int i = pick_open();
	struct mnode *x;
	u64 off, len;

	if (i < 0)
		return;
	x = &M.n[M.f[i].node];
	off = pick_off(MAXSZ - 1);
	len = 1 + rn(rn(4) ? 2 * BS : MAXSZ / 3);
	if (off + len > MAXSZ)
		len = MAXSZ - off;
	pt_fill(buf, len, rnd(), 0);
	EXPECT(tfs_write(T.fs, M.f[i].f, buf, len, off), len, "write");
	memcpy(x->data + off, buf, len);
	for (u64 b = off / BS; b < DIV_ROUND_UP(off + len, BS); b++)
		x->bst[b] = B_DATA;
	x->size = max_t(u64, x->size, off + len);
	x->mtime_known = false;
	check_node(M.f[i].node);
}

static void op_read(void)
{
	static u8 buf[MAXSZ];
	int i = pick_open();
	struct mnode *x;
	u64 off, len, want;

	if (i < 0)
		return;
	x = &M.n[M.f[i].node];
	off = pick_off(x->size + BS);
	len = rn(MAXSZ / 2);
	want = off >= x->size ? 0 : min_t(u64, len, x->size - off);
	EXPECT(tfs_read(T.fs, M.f[i].f, buf, len, off), want, "read");
	CHECK(!memcmp(buf, x->data + off, want), "read at %llu: wrong bytes",
	      (unsigned long long)off);
}

static void op_fallocate(void)
{
	static const int modes[] = { 0, FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_ZERO_RANGE,
				     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE };
	int i = pick_open(), mode = modes[rn(ARRAY_SIZE(modes))];
	struct mnode *x;
	u64 off, len, end;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;

	if (i < 0)
		return;
	x = &M.n[M.f[i].node];
	off = pick_off(MAXSZ - 2);
	len = 1 + rn(MAXSZ / 3);
	if (off + len > MAXSZ)
		len = MAXSZ - off;
	end = off + len;
	EXPECT(tfs_fallocate(T.fs, M.f[i].f, mode, off, len), 0, "fallocate");
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		memset(x->data + off, 0, len);
		for (u64 b = DIV_ROUND_UP(off, BS); (b + 1) * BS <= end; b++)
			x->bst[b] = mode & FALLOC_FL_ZERO_RANGE ? B_UNWRITTEN : B_HOLE;
	} else {
		for (u64 b = off / BS; b < DIV_ROUND_UP(end, BS); b++)
			if (x->bst[b] == B_HOLE)
				x->bst[b] = B_UNWRITTEN;
	}
	if (!keep && !(mode & FALLOC_FL_PUNCH_HOLE) && end > x->size)
		x->size = end;
	/* Every fallocate that succeeds sets mtime and ctime (as ext4's) */
	x->mtime_known = false;
	check_node(M.f[i].node);
}

static void op_seek(void)
{
	int i = pick_open(), whence = rn(2) ? SEEK_DATA : SEEK_HOLE;
	struct mnode *x;
	u64 off;
	s64 want = 0;

	if (i < 0)
		return;
	x = &M.n[M.f[i].node];
	off = pick_off(x->size + BS);
	if (off >= x->size) {
		want = -ENXIO;
	} else {
		u64 b;

		for (b = off / BS; b < DIV_ROUND_UP(x->size, BS); b++)
			if ((x->bst[b] == B_DATA) == (whence == SEEK_DATA))
				break;
		if (b < DIV_ROUND_UP(x->size, BS))
			want = (s64)max_t(u64, off, b * BS);
		else
			want = whence == SEEK_DATA ? -ENXIO : (s64)x->size;
	}
	EXPECT(tfs_lseek(T.fs, M.f[i].f, off, whence), want, "lseek");
}

static void op_fsync(void)
{
	int i = pick_open();

	switch (rn(3)) {
	case 0:
		if (i >= 0)
			EXPECT(tfs_fsync(T.fs, M.f[i].f, rn(2)), 0, "fsync");
		break;
	case 1:
		EXPECT(tfs_fsyncdir(T.fs, M.n[pick_dir()].ino, rn(2)), 0, "fsyncdir");
		break;
	default:
		if (!rn(8))
			EXPECT(tfs_syncfs(T.fs), 0, "syncfs");
	}
}

/* --- xattrs --- */

/*
 * Values are random bytes: system.posix_acl_access is not among the names
 * (an access ACL must be valid and sets the mode: test_xattr covers it).
 */
static const char *const xnames[] = { "user.a",	   "user.b",	 "user.long.name.here",
				      "trusted.t", "security.s", "system.posix_acl_default" };

static void op_xattr(void)
{
	static u8 val[XVAL_MAX], got[XVAL_MAX];
	int n = pick_node(NULL), slot = -1, free_slot = -1, want = 0;
	const char *name = xnames[rn(ARRAY_SIZE(xnames))];
	struct mnode *x;
	unsigned op = (unsigned)rn(4);

	if (n < 0)
		return;
	x = &M.n[n];
	for (int i = 0; i < MAXX; i++) {
		if (x->x[i].used && !strcmp(x->x[i].name, name))
			slot = i;
		if (!x->x[i].used)
			free_slot = i;
	}
	if (op == 0) {
		unsigned flags = (unsigned)rn(3);
		size_t len = rn(8) ? rn(100) : rn(XVAL_MAX);

		if (flags == TFS_XATTR_CREATE && slot >= 0)
			want = -EEXIST;
		if (flags == TFS_XATTR_REPLACE && slot < 0)
			want = -ENODATA;
		pt_fill(val, len, rnd(), 0);
		EXPECT(tfs_setxattr(T.fs, x->ino, name, val, len, flags), want, "setxattr");
		if (want)
			return;
		if (slot < 0)
			slot = free_slot;
		free(x->x[slot].val);
		x->x[slot].used = true;
		snprintf(x->x[slot].name, sizeof(x->x[slot].name), "%s", name);
		x->x[slot].val = malloc(len + 1);
		memcpy(x->x[slot].val, val, len);
		x->x[slot].len = (u16)len;
	} else if (op == 1) {
		/* Removing an absent ACL is no error (as on ext4: tfs_removexattr()). */
		bool acl = !strncmp(name, "system.posix_acl_", 17);

		EXPECT(tfs_removexattr(T.fs, x->ino, name), slot < 0 && !acl ? -ENODATA : 0,
		       "removexattr");
		if (slot >= 0) {
			free(x->x[slot].val);
			memset(&x->x[slot], 0, sizeof(x->x[slot]));
		}
	} else if (op == 2) {
		ssize_t want_len = slot < 0 ? -ENODATA : x->x[slot].len;

		EXPECT(tfs_getxattr(T.fs, x->ino, name, got, sizeof(got)), want_len, "getxattr");
		if (slot >= 0)
			CHECK(!memcmp(got, x->x[slot].val, x->x[slot].len), "getxattr value");
	} else {
		check_xattrs(n);
	}
}

/* --- lookups and reopen --- */

static void op_lookup(void)
{
	int dir = pick_dir(), want = 0, e = -1;
	char name[300];
	size_t len;
	struct tfs_stat st;

	pick_entry_name(dir, name, &len);
	if (!rn(20)) {
		memcpy(name, "..", 2);
		len = 2 - rn(2);
	}
	if (!rn(30))
		want = bad_name(name, &len);
	if (!want && !is_dir(dir))
		want = -ENOTDIR;
	if (!want && !(len <= 2 && !memcmp(name, "..", len))) {
		e = m_lookup(dir, name, len);
		if (e < 0)
			want = -ENOENT;
	}
	if (verbose)
		fprintf(stderr, "step %u: lookup %.*s (%zu) in %llu\n", step_nr,
			(int)min_t(size_t, len, 20), name, len, (unsigned long long)M.n[dir].ino);
	EXPECT(tfs_lookup(T.fs, M.n[dir].ino, name, len, &st), want, "lookup");
	if (want)
		return;
	if (e >= 0)
		CHECK(st.ino == M.n[M.e[e].node].ino, "lookup: ino");
	else if (len == 1)
		CHECK(st.ino == M.n[dir].ino, "lookup .");
	else
		CHECK(st.ino == M.n[M.n[dir].parent].ino, "lookup ..");
}

static void reopen(void)
{
	for (int i = 0; i < MAXF; i++)
		if (M.f[i].f) {
			M.n[M.f[i].node].open--;
			M.f[i].f = NULL;
		}
	for (int n = 0; n < MAXN; n++)
		if (M.n[n].used)
			m_maybe_free(n);
	/* Stop drops the open files; open reclaims the unlinked ones. */
	assert_int_equal(pt_reopen(&T), 0);
	tfs_posix_set_name_hash(T.fs, hash_fn);
	CHECK(pt_fsck(T.fs) == 0, "fsck after reopen");
	check_all();
}

static void one_step(void)
{
	unsigned r = (unsigned)rn(1000);

	if (verbose)
		fprintf(stderr, "step %u: op %u\n", step_nr, r);
	if (r < 150)
		op_create();
	else if (r < 190)
		op_link();
	else if (r < 250)
		op_remove(false);
	else if (r < 280)
		op_remove(true);
	else if (r < 370)
		op_rename();
	else if (r < 430)
		op_setattr();
	else if (r < 490)
		op_open();
	else if (r < 540)
		op_release();
	else if (r < 670)
		op_write();
	else if (r < 720)
		op_read();
	else if (r < 770)
		op_fallocate();
	else if (r < 800)
		op_seek();
	else if (r < 830)
		op_fsync();
	else if (r < 900)
		op_xattr();
	else if (r < 998)
		op_lookup();
	else
		reopen();
}

static void run(u64 seed, unsigned steps, unsigned full_every, tfs_name_hash_fn hash)
{
	struct pt_geometry g = { .size = 64ULL << 20 };

	memset(&M, 0, sizeof(M));
	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	hash_fn = hash;
	assert_int_equal(pt_mkfs(&T, &g), 0);
	tfs_posix_set_name_hash(T.fs, hash);
	M.n[0] = (struct mnode){
		.used = true, .ino = TFS_ROOT_INO, .mode = S_IFDIR | 0755, .nlink = 2, .parent = 0
	};
	check_all();
	for (step_nr = 0; step_nr < steps; step_nr++) {
		one_step();
		if (step_nr % full_every == full_every - 1)
			check_all();
	}
	reopen();
	fprintf(stderr, "seed %llu, %u steps:", (unsigned long long)seed, steps);
	for (unsigned i = 0; i < ARRAY_SIZE(stats) && stats[i].what; i++)
		fprintf(stderr, " %s %lu/%lu", stats[i].what, stats[i].ok, stats[i].calls);
	fprintf(stderr, "\n");
	memset(stats, 0, sizeof(stats));
	for (int i = 0; i < MAXF; i++)
		assert_null(M.f[i].f);
	for (int n = 0; n < MAXN; n++)
		if (M.n[n].used)
			m_free_node(n);
	pt_cleanup(&T);
}

static u64 collide_hash(u64 seed, const void *name, size_t len)
{
	/* Four probe runs: collisions, whiteouts, and distinct runs meeting. */
	return len & 3;
}

static void test_model(void **state)
{
	bool lng = getenv("TFS_LONG") != NULL;
	const char *one = getenv("TFS_MODEL_SEED");

	verbose = getenv("TFS_MODEL_VERBOSE") != NULL;
	if (one) {
		run(strtoull(one, NULL, 0), lng ? 1000000 : 5000, 10,
		    getenv("TFS_MODEL_COLLIDE") ? collide_hash : NULL);
		return;
	}
	if (lng) {
		for (u64 seed = 1; seed <= 8; seed++)
			run(seed, 250000, 200, seed % 2 ? NULL : collide_hash);
		return;
	}
	run(1, 2500, 20, NULL);
	run(2, 1500, 20, collide_hash);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
	};

	return pt_run_tests(tests);
}
