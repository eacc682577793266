// SPDX-License-Identifier: GPL-2.0
/*
 * difftest: a differential tester.  The same seeded random sequence of
 * system calls runs on two directories (kernel ext4 and a tinyfs mount, say)
 * and every result is compared; the first difference stops it.
 *
 *	difftest [-v] [-u] [-T] [-a] [-b] [-k] [-S] [-L] [-E] [-s SEED] [-n OPS] [-c EVERY] DIR_A DIR_B
 *	difftest -w KEPT_A KEPT_B
 *
 * Each side gets a scratch directory DIR/difftest.PID/work; every call works
 * relative to it (names from a pool of five, up to three components, never
 * "..", symlink targets likewise: nothing resolves outside it), so calls
 * collide: ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, ELOOP, EINVAL, EBADF,
 * EACCES... Calls: open (O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY,
 * O_NOFOLLOW, O_PATH), read, pread, write, pwrite (also past EOF),
 * ftruncate, truncate, fallocate (the modes both sides support), lseek
 * (SEEK_END, SEEK_DATA, SEEK_HOLE), mkdir, rmdir, unlink, renameat2
 * (NOREPLACE, EXCHANGE), link, symlink, readlink, chmod, fchmod, chown,
 * fchown, utimensat and futimens (fixed times, UTIME_NOW, UTIME_OMIT), the
 * four xattr calls on user.* (XATTR_CREATE/REPLACE, values up to 1 KiB; -b:
 * to 64 KiB, for an ext4 made with ea_inode), mknod, mkfifo, faccessat,
 * fstatat, statx, getdents, fsync, fdatasync, copy_file_range, close, dup;
 * names of 255 and 256 bytes now and then; with -u also, a quarter of the time, the call made by another
 * user (a forked child after setgroups/setresgid/setresuid) over the tree's
 * random modes and owners.  Descriptors live in slots, the same slot on both
 * sides.
 *
 * Compared: the return value or errno; of a stat, the type, mode, nlink,
 * uid, gid, size (not of a directory: ext4 grows them, tinyfs reports 4096)
 * and rdev, and each timestamp as the operation that set it (the clock is
 * let tick between operations, so a time names one operation on both
 * sides; a time set explicitly is compared exactly); bytes read; directory
 * listings and xattr lists as sets; xattr values; SEEK_DATA/SEEK_HOLE
 * checked (in range, only zeros skipped), not compared.  Not compared:
 * inode numbers, devices, blocks, blksize.  After every EVERY operations
 * (default 50; 1 finds where trees first part) and at the end both trees
 * are walked and compared whole.
 *
 * On the first difference it prints the seed, the operation's index, both
 * results and the last 30 operations, and exits 1; 0 when all agreed, 2 on
 * bad usage, 77 when it cannot run (not root, a directory unusable).  -T
 * leaves out timestamps (and the clock ticks: about 4x faster).  -a adds
 * atime (tinyfs counts an open for reading as the read: it differs at
 * once).  -v prints every operation.  -k keeps the scratch directories
 * (named at the end); -w compares two kept ones again, without times
 * (after a remount of one side).  -S: a swarm run (set_weights()).  -L:
 * offsets past 4 GiB too, to 2^41.  -E: stop (exit 0) at the first ENOSPC
 * on either side (for nearly full filesystems).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "posix_util.h"

#define NSLOT 6
#define MAXIO (64 << 10)
#define RES_MAX 16384 /* one result as text */
#define HIST 30

/* ---- random numbers: splitmix64, one stream per run ---- */

static uint64_t rng;

static uint64_t rnd64(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned rnd(unsigned n)
{
	return n ? rnd64() % n : 0;
}

static bool chance(unsigned percent)
{
	return rnd(100) < percent;
}

/* ---- one operation ---- */

enum kind {
	K_OPEN,
	K_CLOSE,
	K_DUP,
	K_READ,
	K_PREAD,
	K_WRITE,
	K_PWRITE,
	K_FTRUNCATE,
	K_TRUNCATE,
	K_FALLOCATE,
	K_LSEEK,
	K_MKDIR,
	K_RMDIR,
	K_UNLINK,
	K_RENAME,
	K_LINK,
	K_SYMLINK,
	K_READLINK,
	K_CHMOD,
	K_FCHMOD,
	K_CHOWN,
	K_FCHOWN,
	K_UTIMENSAT,
	K_FUTIMENS,
	K_SETXATTR,
	K_FSETXATTR,
	K_GETXATTR,
	K_LISTXATTR,
	K_REMOVEXATTR,
	K_MKNOD,
	K_ACCESS,
	K_STAT,
	K_FSTAT,
	K_STATX,
	K_GETDENTS,
	K_FSYNC,
	K_COPY,
	K_CHECK,
	K_NKINDS
};

static const char *const kind_names[] = {
	"open",	     "close",		"dup",	      "read",	     "pread",
	"write",     "pwrite",		"ftruncate",  "truncate",    "fallocate",
	"lseek",     "mkdir",		"rmdir",      "unlink",	     "renameat2",
	"linkat",    "symlink",		"readlink",   "fchmodat",    "fchmod",
	"fchownat",  "fchown",		"utimensat",  "futimens",    "setxattr",
	"fsetxattr", "getxattr",	"listxattr",  "removexattr", "mknod",
	"faccessat", "fstatat",		"fstat",      "statx",	     "getdents",
	"fsync",     "copy_file_range", "check-tree",
};

/* How often each kind is drawn (per mille-ish weights). */
static const unsigned kind_weight[K_NKINDS] = {
	[K_OPEN] = 90,	     [K_CLOSE] = 25,	 [K_DUP] = 8,	     [K_READ] = 25,
	[K_PREAD] = 30,	     [K_WRITE] = 30,	 [K_PWRITE] = 35,    [K_FTRUNCATE] = 15,
	[K_TRUNCATE] = 12,   [K_FALLOCATE] = 20, [K_LSEEK] = 25,     [K_MKDIR] = 40,
	[K_RMDIR] = 20,	     [K_UNLINK] = 25,	 [K_RENAME] = 40,    [K_LINK] = 20,
	[K_SYMLINK] = 25,    [K_READLINK] = 8,	 [K_CHMOD] = 25,     [K_FCHMOD] = 8,
	[K_CHOWN] = 15,	     [K_FCHOWN] = 6,	 [K_UTIMENSAT] = 15, [K_FUTIMENS] = 6,
	[K_SETXATTR] = 20,   [K_FSETXATTR] = 6,	 [K_GETXATTR] = 12,  [K_LISTXATTR] = 8,
	[K_REMOVEXATTR] = 8, [K_MKNOD] = 15,	 [K_ACCESS] = 12,    [K_STAT] = 40,
	[K_FSTAT] = 15,	     [K_STATX] = 15,	 [K_GETDENTS] = 15,  [K_FSYNC] = 8,
	[K_COPY] = 10,	     [K_CHECK] = 0,
};

struct op {
	enum kind k;
	char p1[600], p2[600];
	int slot, slot2;
	int flags;   /* open flags, AT_* flags, rename flags, xattr flags, fallocate mode */
	mode_t mode; /* also access(2)'s mode */
	long long off, len;
	int whence;
	uid_t uid;
	gid_t gid;
	dev_t rdev;
	struct timespec ts[2];
	int xname;
	bool user;    /* run by another user in a child */
	uid_t as_uid; /* the user */
	gid_t as_gid;
	gid_t as_sup;	/* a supplementary group, or 0 */
	uint64_t dseed; /* what write/setxattr write */
};

/* The result on one side, as text (compared whole) and the bytes read. */
struct res {
	char txt[RES_MAX];
	size_t n;
	unsigned char data[MAXIO];
	long dlen;
};

struct side {
	const char *dir;    /* the directory given */
	char top[PATH_MAX]; /* DIR/difftest.PID */
	int dfd;	    /* DIR/difftest.PID/work */
	int fd[NSLOT];
	char name;
};

static struct side sides[2];
static bool verbose, with_user, no_times, with_atime, big_xattrs, keep, walk_only, swarm;
static bool stop_enospc; /* -E */
static long nops = 1000, check_every = 50;
static uint64_t seed;
static int fl_modes[8], nfl_modes; /* fallocate modes both sides take */
static long xattr_max = 64000;	   /* -b: the largest value drawn */

/* The coarse time at which each operation started (index nops: the end). */
static struct timespec *op_start;
static long cur_op;

static __attribute__((format(printf, 2, 3))) void out(struct res *r, const char *fmt, ...)
{
	va_list ap;

	if (r->n >= sizeof(r->txt) - 1)
		return;
	va_start(ap, fmt);
	r->n += vsnprintf(r->txt + r->n, sizeof(r->txt) - r->n, fmt, ap);
	va_end(ap);
	if (r->n > sizeof(r->txt) - 1)
		r->n = sizeof(r->txt) - 1;
}

static const char *errname(int e)
{
	const char *s = e ? strerrorname_np(e) : "ok";

	return s ? s : "E?";
}

/* ret: a call's return value (-1: its errno). */
static void out_ret(struct res *r, long long ret)
{
	if (ret < 0)
		out(r, "%s", errname(errno));
	else
		out(r, "%lld", ret);
}

/* ---- timestamps as the operation that set them ---- */

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}

/* Fixed times utimensat sets lie before 2002: those are compared exactly. */
#define FIXED_LIMIT 1000000000LL

static void out_time(struct res *r, char c, const struct timespec *t)
{
	long lo = 0, hi = cur_op;

	if (t->tv_sec < FIXED_LIMIT) {
		out(r, " %c=%lld.%09ld", c, (long long)t->tv_sec, t->tv_nsec);
		return;
	}
	if (ts_cmp(t, &op_start[0]) < 0) {
		out(r, " %c@setup", c);
		return;
	}
	/* the last operation that started at or before t */
	while (lo < hi) {
		long mid = (lo + hi + 1) / 2;

		if (ts_cmp(&op_start[mid], t) <= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	out(r, " %c@%ld", c, lo);
}

static void out_stat(struct res *r, const struct stat *st)
{
	static const char *const types = "?pc?d?b?-?l?s???";

	out(r, " %c%04o n%lu u%u g%u", types[(st->st_mode >> 12) & 15],
	    (unsigned)(st->st_mode & 07777), (unsigned long)st->st_nlink, st->st_uid, st->st_gid);
	if (!S_ISDIR(st->st_mode))
		out(r, " s%lld", (long long)st->st_size);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		out(r, " r%u:%u", major(st->st_rdev), minor(st->st_rdev));
	/*
	 * A fifo's mtime and ctime: the pipe's writes update them on ext4, but
	 * the FUSE kernel marks its non-regular inodes S_NOCMTIME (the times
	 * are the daemon's, which never sees the pipe): not compared.
	 */
	if (!no_times && !S_ISFIFO(st->st_mode)) {
		if (with_atime)
			out_time(r, 'a', &st->st_atim);
		out_time(r, 'm', &st->st_mtim);
		out_time(r, 'c', &st->st_ctim);
	}
}

static void out_statx(struct res *r, const struct statx *sx)
{
	struct stat st = {
		.st_mode = sx->stx_mode,
		.st_nlink = sx->stx_nlink,
		.st_uid = sx->stx_uid,
		.st_gid = sx->stx_gid,
		.st_size = sx->stx_size,
		.st_rdev = makedev(sx->stx_rdev_major, sx->stx_rdev_minor),
		.st_atim = { sx->stx_atime.tv_sec, sx->stx_atime.tv_nsec },
		.st_mtim = { sx->stx_mtime.tv_sec, sx->stx_mtime.tv_nsec },
		.st_ctim = { sx->stx_ctime.tv_sec, sx->stx_ctime.tv_nsec },
	};

	out_stat(r, &st);
}

/* ---- helpers ---- */

static void fill(unsigned char *b, size_t n, uint64_t s)
{
	for (size_t i = 0; i < n; i++) {
		if (!(i & 7)) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		}
		b[i] = s >> (8 * (i & 7));
	}
}

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's entries (not . and ..) with their d_type, sorted, into r. */
static void out_dir(struct res *r, int dfd)
{
	char *names[512];
	int n = 0, dup_fd = dup(dfd);
	struct dirent *e;
	DIR *d;

	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		out(r, " opendir:%s", errname(errno));
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	rewinddir(d);
	while ((e = readdir(d)) && n < 512) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (asprintf(&names[n], "%s:%d", e->d_name, e->d_type) < 0)
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	out(r, " [");
	for (int i = 0; i < n; i++) {
		out(r, "%s%s", i ? " " : "", names[i]);
		free(names[i]);
	}
	out(r, "]");
}

/* An xattr name list (NUL-separated), sorted into names (64) and r; returns how many. */
static int out_xlist(struct res *r, char *buf, ssize_t len, char **names)
{
	int n = 0;

	for (char *p = buf; p < buf + len && n < 64; p += strlen(p) + 1)
		names[n++] = p;
	qsort(names, n, sizeof(*names), cmp_str);
	out(r, " {");
	for (int i = 0; i < n; i++)
		out(r, "%s%s", i ? " " : "", names[i]);
	out(r, "}");
	return n;
}

/*
 * chown(-1, -1) by a caller who neither owns st nor is in its group, of a
 * regular file with S_ISGID without group exec: ext4 (Linux 6.2+) turns
 * the dropping of S_ISGID (setattr_should_drop_sgid()) into a mode change,
 * which a non-owner may not make: EPERM.  FUSE's fuse_setattr() decides
 * again with the older rule (only when group-executable), so no mode
 * change and no EPERM reach a FUSE daemon, which sees a setattr of nothing
 * it cannot tell from a write's (README, "Where the mount differs").
 * Root (CAP_FOWNER) and the owner are not concerned.
 */
static bool chown_keeps_nogx_sgid(const struct stat *st)
{
	gid_t groups[64];
	int n;

	if (!S_ISREG(st->st_mode) || (st->st_mode & (S_ISGID | S_IXGRP)) != S_ISGID || !geteuid() ||
	    geteuid() == st->st_uid || getegid() == st->st_gid)
		return false;
	n = getgroups(64, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == st->st_gid)
			return false;
	return true;
}

/*
 * Whether the bytes [from, to) of fd read as zeros (or cannot be read: not
 * known).  The first 16 MiB only: a hole to 2^41 (-L) is not read whole.
 */
static bool zeros(int fd, off_t from, off_t to)
{
	static unsigned char b[MAXIO];

	if (to - from > (16 << 20))
		to = from + (16 << 20);

	while (from < to) {
		ssize_t n = pread(fd, b, to - from < MAXIO ? to - from : MAXIO, from);

		if (n <= 0)
			return true;
		if (!all_zero(b, n))
			return false;
		from += n;
	}
	return true;
}

/*
 * lseek(SEEK_DATA or SEEK_HOLE): where holes are is the filesystem's own
 * (ext4 counts an unwritten extent as data while its pages are cached, and
 * rounds to blocks; tmpfs to pages), so the result is checked, not
 * compared: past EOF ENXIO; else what SEEK_DATA skips must read as zeros,
 * and what either finds must lie between the offset and EOF (a hole at EOF
 * at the latest).  The file position is put back, so the runs go on alike.
 */
static void seek_data_hole(struct res *r, int fd, off_t off, int whence)
{
	off_t pos = lseek(fd, 0, SEEK_CUR), at;
	struct stat st;

	if (fstat(fd, &st)) {
		out(r, "fstat:%s", errname(errno));
		return;
	}
	if (!S_ISREG(st.st_mode) || off < 0 || off >= st.st_size) {
		at = lseek(fd, off, whence);
		out_ret(r, at);
		if (pos >= 0)
			lseek(fd, pos, SEEK_SET);
		return;
	}
	at = lseek(fd, off, whence);
	if (at < 0 && errno != ENXIO)
		out(r, "%s", errname(errno));
	else if (whence == SEEK_DATA && at < 0)
		out(r, "%s", zeros(fd, off, st.st_size) ? "inside: ok" : "ENXIO before data");
	else if (at < off || at > st.st_size || (whence == SEEK_DATA && at == st.st_size))
		out(r, "%lld: out of range", (long long)at);
	else if (whence == SEEK_DATA && !zeros(fd, off, at))
		out(r, "%lld: skips data", (long long)at);
	else
		out(r, "inside: ok");
	if (pos >= 0)
		lseek(fd, pos, SEEK_SET);
}

/* ---- the tree, walked whole ---- */

/*
 * A file's bytes as a hash of its non-zero bytes and their offsets, read
 * from the data SEEK_DATA/SEEK_HOLE find: the same for the same contents
 * whatever each side counts as hole, and quick for a file sparse to 2^41
 * (-L).  Data a side hides in a "hole" shows as a difference.
 */
static const char *hash_content(int f, off_t size)
{
	static unsigned char b[MAXIO];
	static char res[64];
	uint64_t h = 0xcbf29ce484222325ULL;
	off_t pos = 0, d, e;
	ssize_t n = 0;

	while (pos < size) {
		d = lseek(f, pos, SEEK_DATA);
		if (d < 0)
			break; /* ENXIO: a hole to the end */
		e = lseek(f, d, SEEK_HOLE);
		if (e < 0 || e > size)
			e = size;
		for (; d < e; d += n) {
			n = pread(f, b, e - d < MAXIO ? e - d : MAXIO, d);
			if (n <= 0)
				break;
			for (ssize_t j = 0; j < n; j++)
				if (b[j])
					h = (h ^ b[j] ^ (uint64_t)(d + j) << 8) * 0x100000001b3ULL;
		}
		if (n < 0) {
			snprintf(res, sizeof(res), "read-error %s", errname(errno));
			return res;
		}
		if (n == 0 && d < e)
			break; /* EOF before the size said */
		pos = e;
	}
	snprintf(res, sizeof(res), "%016" PRIx64, h);
	return res;
}

static void walk(struct res *r, int dfd, const char *path)
{
	char *names[512];
	int n = 0, fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		out(r, "\n%s: opendir %s", path, errname(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)) && n < 512)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX], buf[4096];
		struct stat st;
		ssize_t l;

		snprintf(p, sizeof(p), "%s/%s", path, names[i]);
		out(r, "\n%s:", p);
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW)) {
			out(r, " stat %s", errname(errno));
			free(names[i]);
			continue;
		}
		out_stat(r, &st);
		if (S_ISLNK(st.st_mode)) {
			l = readlinkat(dfd, names[i], buf, sizeof(buf));
			out(r, " -> %.*s", (int)(l > 0 ? l : 0), buf);
		}
		if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			char pp[PATH_MAX];

			/* by /proc/self/fd: llistxattr on a name follows no symlink */
			int xfd = openat(dfd, names[i], O_PATH | O_NOFOLLOW);

			snprintf(pp, sizeof(pp), "/proc/self/fd/%d", xfd);
			char *xn[64];
			int nx = 0;

			l = xfd < 0 ? -1 : listxattr(pp, buf, sizeof(buf));
			if (l < 0)
				out(r, " xattrs:%s", errname(errno));
			else
				nx = out_xlist(r, buf, l, xn);
			for (int x = 0; x < nx; x++) {
				static char v[65536];
				ssize_t vl = getxattr(pp, xn[x], v, sizeof(v));

				out(r, " %s=%zd:%016" PRIx64, xn[x], vl, vl > 0 ? fnv(v, vl) : 0);
			}
			if (xfd >= 0)
				close(xfd);
		}
		if (S_ISREG(st.st_mode)) {
			int f = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);

			if (f < 0) {
				out(r, " open %s", errname(errno));
			} else {
				out(r, " data:%s", hash_content(f, st.st_size));
				close(f);
			}
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (sub < 0) {
				out(r, " open %s", errname(errno));
			} else {
				walk(r, sub, p);
				close(sub);
			}
		}
		free(names[i]);
	}
}

/* ---- running one operation on one side ---- */

static void slot_close(struct side *s, int i)
{
	if (s->fd[i] >= 0)
		close(s->fd[i]);
	s->fd[i] = -1;
}

static const char *xnames[] = { "user.a",    "user.b", "user.c", "user.long_attribute_name_d",
				"trusted.t", "user." };

static void exec_op(const struct op *o, struct side *s, struct res *r)
{
	/* One more byte: a setxattr of 64 KiB + 1 (E2BIG on both sides). */
	static unsigned char buf[MAXIO + 1];
	char lbuf[4096];
	int dfd = s->dfd, fd = s->fd[o->slot];
	long long ret = 0;
	struct stat st;

	r->n = 0;
	r->txt[0] = 0;
	r->dlen = -1;
	/* paths are relative to the working directory (truncate(2), the xattr calls) */
	if (fchdir(dfd)) {
		out(r, "fchdir:%s", errname(errno));
		return;
	}
	errno = 0;
	switch (o->k) {
	case K_OPEN:
		ret = openat(dfd, o->p1, o->flags, o->mode);
		if (ret >= 0) {
			slot_close(s, o->slot);
			s->fd[o->slot] = ret;
			out(r, "ok");
			if (!fstat(ret, &st))
				out_stat(r, &st);
			else
				out(r, " fstat:%s", errname(errno));
			return;
		}
		break;
	case K_CLOSE:
		if (fd < 0) {
			out(r, "empty");
			return;
		}
		ret = close(fd);
		s->fd[o->slot] = -1;
		break;
	case K_DUP:
		if (fd < 0) {
			out(r, "empty");
			return;
		}
		ret = dup(fd);
		if (ret >= 0) {
			slot_close(s, o->slot2);
			s->fd[o->slot2] = ret;
			out(r, "ok");
			return;
		}
		break;
	case K_READ:
	case K_PREAD:
		ret = o->k == K_READ ? read(fd, buf, o->len) : pread(fd, buf, o->len, o->off);
		/*
		 * A directory: EISDIR, but ext4's end-of-listing offset (htree:
		 * near 2^63) makes offset + count overflow first (EINVAL).
		 */
		if (ret < 0 && errno == EINVAL && !fstat(fd, &st) && S_ISDIR(st.st_mode))
			errno = EISDIR;
		if (ret > 0) {
			memcpy(r->data, buf, ret);
			r->dlen = ret;
			out(r, "%lld:%016" PRIx64, ret, fnv(buf, ret));
			return;
		}
		break;
	case K_WRITE:
	case K_PWRITE:
		fill(buf, o->len, o->dseed);
		ret = o->k == K_WRITE ? write(fd, buf, o->len) : pwrite(fd, buf, o->len, o->off);
		break;
	case K_FTRUNCATE:
	case K_TRUNCATE:
		/*
		 * To the size it has: ext4 sets mtime and ctime, tmpfs and
		 * FUSE do not (README, "Where the mount differs"): not made.
		 */
		if (!(o->k == K_FTRUNCATE ? fstat(fd, &st) : stat(o->p1, &st)) &&
		    S_ISREG(st.st_mode) && st.st_size == o->len) {
			out(r, "same size: not made");
			return;
		}
		ret = o->k == K_FTRUNCATE ? ftruncate(fd, o->len) : truncate(o->p1, o->len);
		break;
	case K_FALLOCATE:
		ret = fallocate(fd, o->flags, o->off, o->len);
		break;
	case K_LSEEK:
		/* a directory's offsets are the filesystem's own (ext4: hashes) */
		if (o->whence != SEEK_SET && !fstat(fd, &st) && S_ISDIR(st.st_mode)) {
			out(r, "directory");
			return;
		}
		if (o->whence == SEEK_DATA || o->whence == SEEK_HOLE) {
			seek_data_hole(r, fd, o->off, o->whence);
			return;
		}
		ret = lseek(fd, o->off, o->whence);
		break;
	case K_MKDIR:
		ret = mkdirat(dfd, o->p1, o->mode);
		break;
	case K_RMDIR:
		ret = unlinkat(dfd, o->p1, AT_REMOVEDIR);
		break;
	case K_UNLINK:
		ret = unlinkat(dfd, o->p1, 0);
		break;
	case K_RENAME:
		ret = renameat2(dfd, o->p1, dfd, o->p2, o->flags);
		break;
	case K_LINK:
		ret = linkat(dfd, o->p1, dfd, o->p2, o->flags);
		break;
	case K_SYMLINK:
		ret = symlinkat(o->p1, dfd, o->p2);
		break;
	case K_READLINK:
		ret = readlinkat(dfd, o->p1, lbuf, o->len);
		if (ret >= 0) {
			out(r, "%lld:%.*s", ret, (int)ret, lbuf);
			return;
		}
		break;
	case K_CHMOD:
		ret = fchmodat(dfd, o->p1, o->mode, 0);
		break;
	case K_FCHMOD:
		ret = fchmod(fd, o->mode);
		break;
	case K_CHOWN:
	case K_FCHOWN:
		if (o->uid == (uid_t)-1 && o->gid == (gid_t)-1 &&
		    !(o->k == K_CHOWN ? fstatat(dfd, o->p1, &st, o->flags & AT_SYMLINK_NOFOLLOW)
				      : fstat(fd, &st)) &&
		    chown_keeps_nogx_sgid(&st)) {
			out(r, "chown -1:-1 of a set-gid file by a non-owner: not made");
			return;
		}
		ret = o->k == K_CHOWN ? fchownat(dfd, o->p1, o->uid, o->gid, o->flags)
				      : fchown(fd, o->uid, o->gid);
		break;
	case K_UTIMENSAT:
		ret = utimensat(dfd, o->p1, o->ts, o->flags);
		break;
	case K_FUTIMENS:
		ret = futimens(fd, o->ts);
		break;
	case K_SETXATTR:
	case K_FSETXATTR: {
		static unsigned char old[MAXIO + 1];
		ssize_t l;

		fill(buf, o->len, o->dseed);
		/*
		 * The value it has already: ext4 changes nothing (not ctime),
		 * tmpfs and tinyfs set ctime: not made.
		 */
		if (o->k == K_FSETXATTR)
			l = fgetxattr(fd, xnames[o->xname], old, sizeof(old));
		else
			l = (o->mode ? lgetxattr : getxattr)(o->p1, xnames[o->xname], old,
							     sizeof(old));
		if (l == o->len && !memcmp(old, buf, l) && !(o->flags & XATTR_CREATE)) {
			out(r, "same value: not made");
			return;
		}
		if (o->k == K_FSETXATTR)
			ret = fsetxattr(fd, xnames[o->xname], buf, o->len, o->flags);
		else
			ret = (o->mode ? lsetxattr : setxattr)(o->p1, xnames[o->xname], buf, o->len,
							       o->flags);
		break;
	}
	case K_GETXATTR:
		if (o->slot2)
			ret = fgetxattr(fd, xnames[o->xname], buf, o->len);
		else
			ret = (o->mode ? lgetxattr : getxattr)(o->p1, xnames[o->xname], buf,
							       o->len);
		if (ret > 0 && o->len) {
			out(r, "%lld:%016" PRIx64, ret, fnv(buf, ret));
			return;
		}
		break;
	case K_LISTXATTR:
		if (o->slot2)
			ret = flistxattr(fd, (char *)buf, o->len);
		else
			ret = (o->mode ? llistxattr : listxattr)(o->p1, (char *)buf, o->len);
		if (ret > 0 && o->len) {
			char *xn[64];

			out(r, "%lld", ret);
			out_xlist(r, (char *)buf, ret, xn);
			return;
		}
		break;
	case K_REMOVEXATTR:
		if (o->slot2)
			ret = fremovexattr(fd, xnames[o->xname]);
		else
			ret = (o->mode ? lremovexattr : removexattr)(o->p1, xnames[o->xname]);
		break;
	case K_MKNOD:
		ret = mknodat(dfd, o->p1, o->mode, o->rdev);
		break;
	case K_ACCESS:
		ret = faccessat(dfd, o->p1, o->mode, o->flags);
		break;
	case K_STAT:
	case K_FSTAT:
		ret = o->k == K_STAT ? fstatat(dfd, o->p1, &st, o->flags) : fstat(fd, &st);
		if (!ret) {
			out(r, "ok");
			out_stat(r, &st);
			return;
		}
		break;
	case K_STATX: {
		struct statx sx;

		if (o->slot2)
			ret = statx(fd, "", AT_EMPTY_PATH | o->flags, STATX_BASIC_STATS, &sx);
		else
			ret = statx(dfd, o->p1, o->flags, STATX_BASIC_STATS, &sx);
		if (!ret) {
			out(r, "ok");
			out_statx(r, &sx);
			return;
		}
		break;
	}
	case K_GETDENTS: {
		int d = o->slot2 ? fd : openat(dfd, o->p1, O_RDONLY | O_DIRECTORY | o->flags);

		if (d < 0) {
			ret = -1;
			break;
		}
		out(r, "ok");
		out_dir(r, d);
		if (!o->slot2)
			close(d);
		return;
	}
	case K_FSYNC:
		ret = o->flags ? fdatasync(fd) : fsync(fd);
		break;
	case K_COPY: {
		/* from slot's file at off to slot2's at its position or at p2off (whence) */
		loff_t in = o->off, outpos = o->whence;

		ret = copy_file_range(fd, &in, s->fd[o->slot2], o->flags ? &outpos : NULL, o->len,
				      0);
		break;
	}
	case K_CHECK:
		out(r, "tree:");
		walk(r, dfd, ".");
		return;
	case K_NKINDS:
		break;
	}
	out_ret(r, ret);
}

/* ---- drawing an operation ---- */

static const char *const pool[] = { "a", "b", "c", "d", "e" };
static char name255[256], name256[257]; /* the longest name, and one byte more */

static void gen_path(char *p, size_t size)
{
	int n = 1 + (chance(55) ? 0 : chance(70) ? 1 : 2);
	size_t l = 0;

	for (int i = 0; i < n; i++) {
		const char *c = chance(4) ? "." : pool[rnd(5)];

		if (chance(1))
			c = chance(50) ? name255 : name256;

		l += snprintf(p + l, size - l, "%s%s", i ? "/" : "", c);
	}
	if (chance(4))
		snprintf(p + l, size - l, "/");
}

static const mode_t modes[] = { 0644, 0755, 0600, 0700,	 0777,	0444,  0555,  0000, 0711,  0640,
				0620, 0222, 0111, 01777, 02755, 04755, 06777, 0666, 01755, 02775 };

static mode_t gen_mode(void)
{
	return chance(85) ? modes[rnd(sizeof(modes) / sizeof(*modes))] : rnd(010000);
}

static const uid_t ids[] = { 0, 65534, 65533, 65532 };

static bool large_offsets; /* -L */

static long long gen_off(void)
{
	switch (rnd(large_offsets ? 9 : 8)) {
	case 8: /* -L: past 4 GiB, to 2^41 (ext4 stops at 16 TiB) */
		return (1LL << (32 + rnd(10))) + rnd(1 << 20);
	case 0:
		return 0;
	case 1:
		return rnd(4096);
	case 2:
		return 4096 * rnd(64);
	case 3:
		return 4096 * rnd(64) + rnd(4096) - 2048;
	case 4:
		return rnd(1 << 20);
	case 5:
		return (1LL << 20) + rnd(1 << 16);
	default:
		return rnd(200000);
	}
}

static long long gen_len(void)
{
	switch (rnd(6)) {
	case 0:
		return rnd(16);
	case 1:
		return 4096;
	case 2:
		return rnd(8192);
	case 3:
		return rnd(MAXIO + 1);
	default:
		return rnd(3000);
	}
}

static struct timespec gen_ts(void)
{
	switch (rnd(6)) {
	case 0:
		return (struct timespec){ 0, UTIME_NOW };
	case 1:
		return (struct timespec){ 0, UTIME_OMIT };
	case 2:
		return (struct timespec){ rnd(1000), rnd(1000000000) };
	default:
		return (struct timespec){ 900000000 + rnd(1000000),
					  chance(50) ? 0 : rnd(1000000000) };
	}
}

static unsigned weight[K_NKINDS]; /* this run's: kind_weight, or a swarm's (-S) */

/*
 * -S, swarm testing: each kind of call is left out of the run with
 * probability 1/3 and the others weighted anew, so runs differ in their
 * mix (a bug that needs many of a few calls, and none of some other, shows).
 */
static void set_weights(bool on)
{
	for (int k = 0; k < K_NKINDS; k++)
		weight[k] = !on ? kind_weight[k] : rnd(3) ? kind_weight[k] * (1 + rnd(4)) : 0;
	if (on) /* always some opens and creates, or nothing happens */
		weight[K_OPEN] = weight[K_OPEN] ?: kind_weight[K_OPEN];
}

static enum kind gen_kind(void)
{
	static unsigned total;
	unsigned x;

	if (!total)
		for (int k = 0; k < K_NKINDS; k++)
			total += weight[k];
	x = rnd(total);
	for (int k = 0; k < K_NKINDS; k++) {
		if (x < weight[k])
			return k;
		x -= weight[k];
	}
	return K_STAT;
}

static void gen_op(struct op *o)
{
	memset(o, 0, sizeof(*o));
	o->k = gen_kind();
	gen_path(o->p1, sizeof(o->p1));
	gen_path(o->p2, sizeof(o->p2));
	o->slot = rnd(NSLOT);
	o->slot2 = rnd(NSLOT);
	o->mode = gen_mode();
	o->off = gen_off();
	o->len = gen_len();
	o->dseed = rnd64() | 1;
	o->uid = chance(20) ? (uid_t)-1 : ids[rnd(4)];
	o->gid = chance(20) ? (gid_t)-1 : ids[rnd(4)];
	o->xname = rnd(100) < 90 ? rnd(4) : 4 + rnd(2);
	o->ts[0] = gen_ts();
	o->ts[1] = gen_ts();
	switch (o->k) {
	case K_OPEN:
		if (chance(12)) {
			o->flags = O_PATH;
			if (chance(40))
				o->flags |= O_NOFOLLOW;
			if (chance(20))
				o->flags |= O_DIRECTORY;
		} else {
			static const int acc[] = { O_RDONLY, O_WRONLY, O_RDWR, O_RDWR };

			o->flags = acc[rnd(4)];
			if (chance(50))
				o->flags |= O_CREAT;
			if (chance(20))
				o->flags |= O_EXCL;
			if (chance(15))
				o->flags |= O_TRUNC;
			if (chance(20))
				o->flags |= O_APPEND;
			if (chance(10))
				o->flags |= O_DIRECTORY;
			if (chance(15))
				o->flags |= O_NOFOLLOW;
			/* fifos: an open must not wait for the other end */
			o->flags |= O_NONBLOCK;
		}
		o->flags |= O_CLOEXEC;
		break;
	case K_RENAME: {
		static const int rf[] = { 0,
					  0,
					  0,
					  RENAME_NOREPLACE,
					  RENAME_EXCHANGE,
					  RENAME_NOREPLACE | RENAME_EXCHANGE };

		o->flags = rf[rnd(6)];
		break;
	}
	case K_LINK:
		o->flags = chance(30) ? AT_SYMLINK_FOLLOW : 0;
		break;
	case K_SYMLINK:
		/* the target: a pool path (p1), sometimes a dangling or a long one */
		if (chance(5))
			snprintf(o->p1, sizeof(o->p1), "%s", "x/y/z/nowhere");
		break;
	case K_READLINK:
		o->len = chance(20) ? rnd(4) : 4096;
		break;
	case K_CHOWN:
		o->flags = chance(40) ? AT_SYMLINK_NOFOLLOW : 0;
		break;
	case K_UTIMENSAT:
		o->flags = chance(30) ? AT_SYMLINK_NOFOLLOW : 0;
		break;
	case K_SETXATTR:
	case K_FSETXATTR:
		o->flags = rnd(4) == 0 ? XATTR_CREATE : rnd(3) == 0 ? XATTR_REPLACE : 0;
		/*
		 * Values to 1 KiB: three of them stay within ext4's one block.
		 * -b: to 64 KiB and one byte more (E2BIG), for an ext4 made
		 * with ea_inode.
		 */
		o->len = chance(10) ? 0 : chance(30) ? rnd(1025) : rnd(64);
		/*
		 * tinyfs: a value must fit one journal entry, 64500 bytes with
		 * 64 KiB btree nodes (design-notes, "Xattrs"): E2BIG beyond;
		 * less on small images (probe_xattr_max()).
		 */
		if (big_xattrs && chance(30))
			o->len = chance(10) ? 65537 : rnd(xattr_max + 1);
		o->mode = chance(20); /* lsetxattr */
		break;
	case K_GETXATTR:
	case K_LISTXATTR:
	case K_REMOVEXATTR:
		o->len = chance(15) ? 0 : chance(10) ? rnd(8) : MAXIO;
		o->mode = chance(20);
		o->slot2 = chance(20); /* through the slot's descriptor */
		break;
	case K_MKNOD: {
		static const mode_t types[] = { S_IFIFO, S_IFIFO,  S_IFREG, S_IFCHR,
						S_IFBLK, S_IFSOCK, S_IFDIR };

		o->mode = types[rnd(7)] | (gen_mode() & 07777);
		/* devices safe to open (a FUSE mount here allows devices): null, zero,
		 * full, and block numbers nothing answers (ENXIO) */
		if (S_ISBLK(o->mode))
			o->rdev = makedev(240, rnd(3));
		else
			o->rdev = makedev(1, 3 + 2 * rnd(3));
		break;
	}
	case K_ACCESS: {
		static const int af[] = { 0, AT_EACCESS, AT_SYMLINK_NOFOLLOW };

		o->mode = rnd(8) ? rnd(8) : F_OK;
		o->flags = af[rnd(3)];
		break;
	}
	case K_STAT:
	case K_STATX:
		o->flags = chance(40) ? AT_SYMLINK_NOFOLLOW : 0;
		o->slot2 = o->k == K_STATX && chance(25);
		break;
	case K_GETDENTS:
		o->flags = chance(30) ? O_NOFOLLOW : 0;
		o->slot2 = chance(20);
		break;
	case K_FALLOCATE:
		o->flags = nfl_modes ? fl_modes[rnd(nfl_modes)] : 0;
		o->len = chance(10) ? 0 : gen_len() * (chance(30) ? 8 : 1);
		break;
	case K_LSEEK: {
		static const int wh[] = { SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE };

		o->whence = wh[rnd(5)];
		if (o->whence == SEEK_CUR || o->whence == SEEK_END)
			o->off = chance(50) ? -(long long)rnd(5000) : rnd(5000);
		break;
	}
	case K_TRUNCATE:
	case K_FTRUNCATE:
		o->len = chance(10) ? 0 : chance(10) ? -1 : gen_off();
		o->flags = chance(20) ? O_NOFOLLOW : 0;
		break;
	case K_FSYNC:
		o->flags = chance(50);
		break;
	case K_COPY:
		o->flags = chance(70); /* an output offset, else the descriptor's */
		o->whence = gen_off();
		break;
	default:
		break;
	}
	if (with_user && chance(25) && o->k != K_CHECK) {
		static const struct {
			uid_t u;
			gid_t g, sup;
		} users[] = { { 65534, 65534, 0 }, { 65533, 65533, 0 }, { 65532, 65532, 65534 } };
		int u = rnd(3);

		o->user = true;
		o->as_uid = users[u].u;
		o->as_gid = users[u].g;
		o->as_sup = users[u].sup;
	}
}

/* A path to print: the long names as <255> and <256>. */
static const char *show(const char *path)
{
	static char bufs[4][64 + 2 * 600];
	static int n;
	char *b = bufs[n++ & 3], *o = b;

	for (const char *p = path; *p;) {
		if (!strncmp(p, name256, 256)) {
			memcpy(o, "<256>", 5);
			o += 5;
			p += 256;
		} else if (!strncmp(p, name255, 255)) {
			memcpy(o, "<255>", 5);
			o += 5;
			p += 255;
		} else {
			*o++ = *p++;
		}
	}
	*o = 0;
	return b;
}

static void op_to_text(char *b, size_t size, const struct op *o)
{
	int l = snprintf(b, size, "%s", kind_names[o->k]);

#define P(...)                                 \
	(l = (size_t)l < size ? l : (int)size, \
	 l += snprintf(b + l, (size_t)l < size ? size - l : 0, __VA_ARGS__))
	switch (o->k) {
	case K_OPEN:
		P(" slot%d %s flags=%#o mode=%04o", o->slot, show(o->p1), o->flags, o->mode);
		break;
	case K_CLOSE:
	case K_FSYNC:
		P(" slot%d%s", o->slot, o->k == K_FSYNC && o->flags ? " (fdatasync)" : "");
		break;
	case K_DUP:
		P(" slot%d -> slot%d", o->slot, o->slot2);
		break;
	case K_COPY:
		P(" slot%d off=%lld -> slot%d", o->slot, o->off, o->slot2);
		if (o->flags)
			P(" off=%d", o->whence);
		P(" len=%lld", o->len);
		break;
	case K_READ:
	case K_WRITE:
		P(" slot%d len=%lld", o->slot, o->len);
		break;
	case K_PREAD:
	case K_PWRITE:
		P(" slot%d off=%lld len=%lld", o->slot, o->off, o->len);
		break;
	case K_FTRUNCATE:
		P(" slot%d %lld", o->slot, o->len);
		break;
	case K_TRUNCATE:
		P(" %s %lld%s", show(o->p1), o->len, o->flags ? " (nofollow)" : "");
		break;
	case K_FALLOCATE:
		P(" slot%d mode=%#x off=%lld len=%lld", o->slot, o->flags, o->off, o->len);
		break;
	case K_LSEEK:
		P(" slot%d %lld whence=%d", o->slot, o->off, o->whence);
		break;
	case K_MKDIR:
	case K_CHMOD:
		P(" %s %04o", show(o->p1), o->mode);
		break;
	case K_MKNOD:
		P(" %s %06o %u:%u", show(o->p1), o->mode, major(o->rdev), minor(o->rdev));
		break;
	case K_FCHMOD:
		P(" slot%d %04o", o->slot, o->mode);
		break;
	case K_RMDIR:
	case K_UNLINK:
		P(" %s", show(o->p1));
		break;
	case K_READLINK:
		P(" %s size=%lld", show(o->p1), o->len);
		break;
	case K_RENAME:
	case K_LINK:
		P(" %s %s flags=%#x", show(o->p1), show(o->p2), o->flags);
		break;
	case K_SYMLINK:
		P(" %s <- %s", show(o->p1), show(o->p2));
		break;
	case K_CHOWN:
		P(" %s %d:%d flags=%#x", show(o->p1), (int)o->uid, (int)o->gid, o->flags);
		break;
	case K_FCHOWN:
		P(" slot%d %d:%d", o->slot, (int)o->uid, (int)o->gid);
		break;
	case K_UTIMENSAT:
	case K_FUTIMENS:
		if (o->k == K_UTIMENSAT)
			P(" %s flags=%#x", show(o->p1), o->flags);
		else
			P(" slot%d", o->slot);
		for (int i = 0; i < 2; i++)
			P(" %lld.%ld", (long long)o->ts[i].tv_sec, o->ts[i].tv_nsec);
		break;
	case K_SETXATTR:
		P(" %s%s %s len=%lld flags=%d", show(o->p1), o->mode ? " (l)" : "",
		  xnames[o->xname], o->len, o->flags);
		break;
	case K_FSETXATTR:
		P(" slot%d %s len=%lld flags=%d", o->slot, xnames[o->xname], o->len, o->flags);
		break;
	case K_GETXATTR:
	case K_LISTXATTR:
	case K_REMOVEXATTR:
		if (o->slot2)
			P(" slot%d", o->slot);
		else
			P(" %s%s", show(o->p1), o->mode ? " (l)" : "");
		if (o->k != K_LISTXATTR)
			P(" %s", xnames[o->xname]);
		if (o->k != K_REMOVEXATTR)
			P(" size=%lld", o->len);
		break;
	case K_ACCESS:
		P(" %s mode=%o flags=%#x", show(o->p1), o->mode, o->flags);
		break;
	case K_STAT:
		P(" %s flags=%#x", show(o->p1), o->flags);
		break;
	case K_FSTAT:
		P(" slot%d", o->slot);
		break;
	case K_STATX:
		if (o->slot2)
			P(" slot%d", o->slot);
		else
			P(" %s flags=%#x", show(o->p1), o->flags);
		break;
	case K_GETDENTS:
		if (o->slot2)
			P(" slot%d", o->slot);
		else
			P(" %s flags=%#o", show(o->p1), o->flags);
		break;
	default:
		break;
	}
	if (o->user)
		P(" [as %u:%u%s]", o->as_uid, o->as_gid, o->as_sup ? " +sup" : "");
#undef P
}

/* ---- running an operation on both sides ---- */

static struct res *res_shared; /* [2], shared with the child of a user op */

static void run_both(const struct op *o)
{
	pid_t pid;
	int status;

	if (!o->user) {
		exec_op(o, &sides[0], &res_shared[0]);
		exec_op(o, &sides[1], &res_shared[1]);
		return;
	}
	/* another user: a child switches, runs it on both sides, and exits */
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (!pid) {
		gid_t groups[2] = { o->as_gid, o->as_sup };

		if (setgroups(o->as_sup ? 2 : 1, groups) ||
		    setresgid(o->as_gid, o->as_gid, o->as_gid) ||
		    setresuid(o->as_uid, o->as_uid, o->as_uid))
			_exit(3);
		exec_op(o, &sides[0], &res_shared[0]);
		exec_op(o, &sides[1], &res_shared[1]);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "difftest: the child of a user op failed (status %#x)\n", status);
		exit(2);
	}
}

/* Waits until the coarse clock has passed every time the last op can have set. */
static void tick(struct timespec *start)
{
	struct timespec fine, c;

	clock_gettime(CLOCK_REALTIME, &fine);
	do {
		clock_gettime(CLOCK_REALTIME_COARSE, &c);
		if (ts_cmp(&c, &fine) > 0)
			break;
		struct timespec d = { 0, 500000 };

		nanosleep(&d, NULL);
	} while (1);
	*start = c;
}

static char hist[HIST][RES_MAX / 8];

static void report(long i, const struct op *o)
{
	const struct res *a = &res_shared[0], *b = &res_shared[1];

	char t[512];

	op_to_text(t, sizeof(t), o);
	printf("DIFFERENCE seed %" PRIu64 " op %ld: %s%s\n", seed, i, t,
	       o->k == K_CHECK ? " (after the operation)" : "");
	/* a tree: only the lines that differ */
	if (o->k == K_CHECK) {
		char *sa = strdup(a->txt), *sb = strdup(b->txt), *ea, *eb;
		char *la = strtok_r(sa, "\n", &ea), *lb = strtok_r(sb, "\n", &eb);

		while (la || lb) {
			if (!la || !lb || strcmp(la, lb)) {
				printf("  %c: %s\n  %c: %s\n", sides[0].name, la ? la : "(end)",
				       sides[1].name, lb ? lb : "(end)");
				break;
			}
			la = strtok_r(NULL, "\n", &ea);
			lb = strtok_r(NULL, "\n", &eb);
		}
		free(sa);
		free(sb);
	} else {
		printf("  %c (%s): %s\n  %c (%s): %s\n", sides[0].name, sides[0].dir, a->txt,
		       sides[1].name, sides[1].dir, b->txt);
	}
	if (a->dlen > 0 && b->dlen > 0 && a->dlen == b->dlen) {
		for (long j = 0; j < a->dlen; j++)
			if (a->data[j] != b->data[j]) {
				printf("  bytes differ first at %ld of the read: %02x vs %02x\n", j,
				       a->data[j], b->data[j]);
				break;
			}
	}
	printf("the last operations (result on %c):\n", sides[0].name);
	if (o->k == K_CHECK) /* the check after op i: that one too */
		i++;
	for (long j = i > HIST ? i - HIST : 0; j < i; j++)
		printf("  %5ld %s\n", j, hist[j % HIST]);
	printf("rerun: difftest%s%s%s%s%s%s%s -s %" PRIu64 " -n %ld A B (-c 1: trees after each)\n",
	       with_user ? " -u" : "", no_times ? " -T" : "", with_atime ? " -a" : "",
	       big_xattrs ? " -b" : "", swarm ? " -S" : "", large_offsets ? " -L" : "",
	       stop_enospc ? " -E" : "", seed, o->k == K_CHECK ? i : i + 1);
}

/*
 * Runs o (op i, or the tree check after it) on both sides; 1 when they
 * differ, 2 when -E stops the run at the first ENOSPC on either side.
 */
static int step(long i, const struct op *o)
{
	char t[512];

	run_both(o);
	if (verbose) {
		op_to_text(t, sizeof(t), o);
		printf("%5ld %s = %.300s\n", i, t, res_shared[0].txt);
	}
	/*
	 * -E (a nearly full filesystem): where each side runs out differs (ext4
	 * reserves at write(2), tinyfs's writeback cache fails the write-back,
	 * metadata runs out on each at its own point), so from the first ENOSPC
	 * on either side nothing more is compared.
	 */
	if (stop_enospc) {
		bool a = strstr(res_shared[0].txt, "ENOSPC"),
		     b = strstr(res_shared[1].txt, "ENOSPC");

		if (a || b) {
			const char *on = "both";

			if (!b)
				on = "A";
			else if (!a)
				on = "B";
			op_to_text(t, sizeof(t), o);
			printf("difftest seed %" PRIu64 ": stopped at op %ld, ENOSPC on %s: %s\n",
			       seed, i, on, t);
			return 2;
		}
	}
	if (strcmp(res_shared[0].txt, res_shared[1].txt) ||
	    res_shared[0].dlen != res_shared[1].dlen ||
	    (res_shared[0].dlen > 0 &&
	     memcmp(res_shared[0].data, res_shared[1].data, res_shared[0].dlen))) {
		report(i, o);
		return 1;
	}
	if (o->k != K_CHECK) {
		char *h = hist[i % HIST];
		int l;

		op_to_text(h, sizeof(hist[0]), o);
		l = strlen(h);
		snprintf(h + l, sizeof(hist[0]) - l, " = %.200s", res_shared[0].txt);
	}
	return 0;
}

/* ---- setup ---- */

static int setup_side(struct side *s)
{
	char p[PATH_MAX + 8];

	snprintf(s->top, sizeof(s->top), "%s/difftest.%d", s->dir, (int)getpid());
	rm_tree(AT_FDCWD, s->top);
	if (mkdir(s->top, 0755)) {
		fprintf(stderr, "difftest: mkdir %s: %m\n", s->top);
		return -1;
	}
	snprintf(p, sizeof(p), "%s/work", s->top);
	if (mkdir(p, 0777) || chmod(p, 0777) || (s->dfd = open(p, O_RDONLY | O_DIRECTORY)) < 0) {
		fprintf(stderr, "difftest: %s: %m\n", p);
		return -1;
	}
	for (int i = 0; i < NSLOT; i++)
		s->fd[i] = -1;
	return 0;
}

/* The fallocate modes both sides take on a plain file (tmpfs has no ZERO_RANGE). */
static void probe_fallocate(void)
{
	static const int cand[] = { 0, FALLOC_FL_KEEP_SIZE,
				    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				    FALLOC_FL_ZERO_RANGE,
				    FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
				    /* invalid: EOPNOTSUPP on both */
				    FALLOC_FL_PUNCH_HOLE };

	for (unsigned c = 0; c < sizeof(cand) / sizeof(*cand); c++) {
		int r[2];

		for (int i = 0; i < 2; i++) {
			int fd = openat(sides[i].dfd, "probe", O_RDWR | O_CREAT | O_TRUNC, 0600);

			r[i] = fd < 0 ? -1 : fallocate(fd, cand[c], 0, 8192) ? errno : 0;
			if (fd >= 0)
				close(fd);
			unlinkat(sides[i].dfd, "probe", 0);
		}
		if (r[0] == r[1] && r[0] >= 0)
			fl_modes[nfl_modes++] = cand[c];
		else if (verbose)
			printf("fallocate mode %#x left out: %s on A, %s on B\n", cand[c],
			       errname(r[0]), errname(r[1]));
	}
}

/*
 * -b: the largest xattr value (to 64000 bytes) both sides take.  tinyfs
 * keeps a value in one journal entry, whose size follows the geometry (a
 * 64 MiB image: 32127 bytes), and says E2BIG
 * beyond (README, "Where the mount differs"): not drawn, not compared.
 */
static void probe_xattr_max(void)
{
	static char v[64000];
	long lo = 1024, hi = xattr_max;

	while (lo < hi) {
		long mid = (lo + hi + 1) / 2;
		bool ok = true;

		for (int i = 0; i < 2; i++) {
			int fd = openat(sides[i].dfd, "probe", O_RDWR | O_CREAT | O_TRUNC, 0600);

			if (fd < 0 || fsetxattr(fd, "user.p", v, mid, 0))
				ok = false;
			if (fd >= 0)
				close(fd);
			unlinkat(sides[i].dfd, "probe", 0);
		}
		if (ok)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo < xattr_max)
		printf("xattr values to %ld bytes only (the largest both take)\n", lo);
	xattr_max = lo;
}

static void cleanup(void)
{
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < NSLOT; j++)
			slot_close(&sides[i], j);
		if (sides[i].dfd > 0)
			close(sides[i].dfd);
		if (!keep && sides[i].top[0])
			rm_tree(AT_FDCWD, sides[i].top);
	}
}

/*
 * -w: the trees two runs kept (-k) compared again, as DIR_A/work and
 * DIR_B/work, without times (after a remount of one side, say: what was
 * done must have stayed done).
 */
static int compare_kept(void)
{
	static struct res r[2];

	for (int i = 0; i < 2; i++) {
		char p[PATH_MAX + 8];

		snprintf(p, sizeof(p), "%s/work", sides[i].dir);
		sides[i].dfd = open(p, O_RDONLY | O_DIRECTORY);
		if (sides[i].dfd < 0) {
			printf("skip: %s: %m\n", p);
			return 77;
		}
		if (fchdir(sides[i].dfd))
			return 2;
		out(&r[i], "tree:");
		walk(&r[i], sides[i].dfd, ".");
		close(sides[i].dfd);
	}
	if (strcmp(r[0].txt, r[1].txt)) {
		char *sa = r[0].txt, *sb = r[1].txt, *ea, *eb;
		char *la = strtok_r(sa, "\n", &ea), *lb = strtok_r(sb, "\n", &eb);

		printf("DIFFERENCE between the kept trees %s and %s\n", sides[0].dir, sides[1].dir);
		while (la || lb) {
			if (!la || !lb || strcmp(la, lb)) {
				printf("  A: %s\n  B: %s\n", la ? la : "(end)", lb ? lb : "(end)");
				break;
			}
			la = strtok_r(NULL, "\n", &ea);
			lb = strtok_r(NULL, "\n", &eb);
		}
		return 1;
	}
	printf("kept trees %s and %s: no difference\n", sides[0].dir, sides[1].dir);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: difftest [-v] [-u] [-T] [-a] [-b] [-k] [-S] [-L] [-E] [-s SEED] [-n OPS] [-c EVERY] "
		"DIR_A "
		"DIR_B\n"
		"       difftest -w KEPT_A KEPT_B (the trees of a -k run again, no times)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct op o;
	int c, rc = 0;
	bool seeded = false;

	while ((c = getopt(argc, argv, "vuTabkwSLEs:n:c:")) != -1) {
		switch (c) {
		case 'v':
			verbose = true;
			break;
		case 'u':
			with_user = true;
			break;
		case 'T':
			no_times = true;
			break;
		case 'a':
			with_atime = true;
			break;
		case 'b':
			big_xattrs = true;
			break;
		case 'w':
			walk_only = no_times = true;
			break;
		case 'S':
			swarm = true;
			break;
		case 'L':
			large_offsets = true;
			break;
		case 'k':
			keep = true;
			break;
		case 'E':
			stop_enospc = true;
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			seeded = true;
			break;
		case 'n':
			nops = atol(optarg);
			break;
		case 'c':
			check_every = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2 || nops < 0)
		usage();
	if (!seeded) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		seed = (uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec << 20 ^ getpid();
	}
	if (geteuid()) {
		printf("skip: difftest needs root (chown, mknod, other users)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN); /* a fifo without a reader: EPIPE */
	memset(name255, 'n', 255);
	memset(name256, 'n', 256);
	rng = seed;
	/* absolute: the operations fchdir() into the scratch directories */
	sides[0].dir = realpath(argv[optind], NULL);
	sides[1].dir = realpath(argv[optind + 1], NULL);
	if (!sides[0].dir || !sides[1].dir) {
		printf("skip: %s: %m\n", argv[optind + !!sides[0].dir]);
		return 77;
	}
	sides[0].name = 'A';
	sides[1].name = 'B';
	/* one umask for the run, drawn */
	{
		static const mode_t um[] = { 022, 0, 077, 027, 002 };

		umask(um[rnd(5)]);
	}
	if (walk_only)
		return compare_kept();
	if (setup_side(&sides[0]) || setup_side(&sides[1])) {
		cleanup();
		return 77;
	}
	probe_fallocate();
	if (big_xattrs)
		probe_xattr_max();
	set_weights(swarm);
	res_shared = mmap(NULL, 2 * sizeof(struct res), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	op_start = calloc(nops + 2, sizeof(*op_start));
	if (res_shared == MAP_FAILED || !op_start) {
		perror("difftest: memory");
		cleanup();
		return 2;
	}
	printf("difftest seed %" PRIu64 ": %ld operations, A=%s B=%s%s%s\n", seed, nops,
	       sides[0].dir, sides[1].dir, with_user ? ", also as other users" : "",
	       no_times ? ", no times" : "");
	for (long i = 0; i < nops && !rc; i++) {
		gen_op(&o);
		if (!no_times)
			tick(&op_start[i]);
		cur_op = i;
		rc = step(i, &o);
		/* the whole trees, after this operation (in its time slot) */
		if (!rc && ((check_every && (i + 1) % check_every == 0) || i + 1 == nops)) {
			memset(&o, 0, sizeof(o));
			o.k = K_CHECK;
			rc = step(i, &o);
		}
	}
	if (rc == 2) /* -E: stopped at an ENOSPC, no difference before it */
		rc = 0;
	else if (!rc)
		printf("difftest seed %" PRIu64 ": %ld operations, no difference\n", seed, nops);
	if (keep)
		printf("kept: %s %s\n", sides[0].top, sides[1].top);
	cleanup();
	return rc;
}
