// SPDX-License-Identifier: GPL-2.0
/*
 * conform: POSIX conformance checks for a mounted filesystem, in the manner of
 * pjdfstest, as Linux (kernel ext4) behaves.
 *
 *	conform [-v] [-k] [-t TICK_MS] [-o AREA[,AREA...]] [-X FILE] DIRECTORY
 *
 * Makes a scratch directory DIRECTORY/conform.PID and runs several hundred
 * small named checks in it, one area (open, mkdir, rename, ...) after the
 * other.  Each check states one rule: a call's result (0 or the errno it
 * must fail with), a mode, owner, link count, size or content afterwards, or
 * which timestamps the call must change and which it must leave alone.  Calls
 * "as" another user run in a forked child that switches to that user with
 * setgroups/setresgid/setresuid, so permission rules (search and write
 * permission, the sticky bit, S_ISGID inheritance and clearing, who may
 * chmod/chown/utimensat) are checked as the kernel applies them.  Needs root.
 *
 * Where POSIX leaves a choice, the check follows what Linux does on ext4
 * (unlink of a directory is EISDIR, rmdir of a non-empty one ENOTEMPTY,
 * rename updates the moved inode's ctime, chown clears S_ISUID even as root).
 *
 * Timestamps: before every call whose timestamps are checked the program
 * sleeps TICK_MS (default 20) so that a changed time differs from the old one
 * on a filesystem with a fine clock; a filesystem that keeps whole seconds
 * needs -t 1100.
 *
 * Output: one "FAIL area/check: what happened" line per failed check (-v also
 * prints the passed ones), then "N passed, N failed".  -X FILE names checks
 * known to fail on the filesystem under test (one "area/check" a line, as
 * FAIL prints it; # starts a comment): those print XFAIL and are counted
 * apart, and one that passes is pointed out, so the list only shrinks.  Exit 0 when all passed,
 * 1 when some failed, 77 when it cannot run (not root, DIRECTORY unusable).
 * The scratch directory is removed at the end (-k keeps it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "posix_util.h"

/* The users the permission checks run as: U3 is also in U1's group. */
#define U1_ID 65534
#define U2_ID 65533
#define U3_ID 65532
#define G4_ID 65531 /* a group nobody here belongs to */

struct cred {
	uid_t uid;
	gid_t gid;
	gid_t sup;	/* a supplementary group, or 0 */
	bool no_fsetid; /* without CAP_FSETID (for root) */
};

static const struct cred u1 = { U1_ID, U1_ID, 0 };
static const struct cred u2 = { U2_ID, U2_ID, 0 };
static const struct cred u3 = { U3_ID, U3_ID, U1_ID };
static const struct cred root_nofsetid = { 0, 0, 0, true };
#define ROOT NULL
#define U1 (&u1)
#define U2 (&u2)
#define U3 (&u3)

static int npass, nfail, nxfail;
static char **known; /* -X: checks known to fail here */
static int nknown;
static bool verbose;
static const char *area_name = "setup";
static char scratch[PATH_MAX];
static long tick_ms = 20;
static bool mnt_nodev, mnt_noatime;

/* ---- reporting ---- */

static const char *errname(int e)
{
	const char *s;

	if (e == 0)
		return "success";
	if (e < 0)
		return "child failed to run";
	s = strerrorname_np(e);
	return s ? s : "unknown errno";
}

static bool vresult(bool ok, const char *name, const char *fmt, va_list ap)
{
	int e = errno; /* for %m: the errno of the call that failed */

	if (ok) {
		npass++;
		if (verbose)
			printf("ok   %s/%s\n", area_name, name);
		return true;
	}
	for (int i = 0; i < nknown; i++) {
		size_t l = strlen(area_name);

		if (!strncmp(known[i], area_name, l) && known[i][l] == '/' &&
		    !strcmp(known[i] + l + 1, name)) {
			nxfail++;
			printf("XFAIL %s/%s (known): ", area_name, name);
			errno = e;
			vprintf(fmt, ap);
			putchar('\n');
			known[i][0] = 0; /* seen failing */
			return false;
		}
	}
	nfail++;
	printf("FAIL %s/%s: ", area_name, name);
	errno = e;
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	return false;
}

/* CHECK: one named check; the message says what was seen when it fails. */
__attribute__((format(printf, 3, 4))) static bool check(bool ok, const char *name, const char *fmt,
							...)
{
	va_list ap;
	bool r;

	va_start(ap, fmt);
	r = vresult(ok, name, fmt, ap);
	va_end(ap);
	return r;
}

/* A name built from a format, for checks made in loops. */
__attribute__((format(printf, 1, 2))) static const char *nm(const char *fmt, ...)
{
	static char bufs[16][1024];
	static int i;
	char *b = bufs[i++ & 15];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b, sizeof(bufs[0]), fmt, ap);
	va_end(ap);
	return b;
}

/* A setup step that must work for the checks after it to mean anything. */
static bool setup(int ret, const char *what)
{
	if (ret == 0)
		return true;
	return check(false, nm("setup %s", what), "%m");
}

/* ---- operations, run as root or as another user ---- */

enum op_kind {
	OP_OPEN,   /* open(a, flags, mode), close */
	OP_WRITE,  /* open(a, O_WRONLY | flags), write one byte */
	OP_READ,   /* open(a, O_RDONLY), read one byte */
	OP_CWRITE, /* open(a, O_CREAT | O_RDWR | flags, mode), write 3 bytes on that fd */
	OP_MKDIR,
	OP_RMDIR,
	OP_UNLINK,
	OP_LINK,     /* linkat(a, b, flags) */
	OP_SYMLINK,  /* symlink(a -> b) */
	OP_RENAME,   /* renameat2(a, b, flags) */
	OP_CHMOD,    /* chmod(a, mode) */
	OP_CHOWN,    /* chown(a, n, m) */
	OP_LCHOWN,   /* lchown(a, n, m) */
	OP_TRUNCATE, /* truncate(a, n) */
	OP_FTRUNC,   /* open(a, O_WRONLY), ftruncate(n) */
	OP_MKFIFO,
	OP_MKNOD,  /* mknod(a, mode, n) */
	OP_UTIMES, /* utimensat(a, ts, flags) */
	OP_STAT,
	OP_LSTAT,
	OP_READLINK,
	OP_OPENDIR,  /* opendir(a), readdir */
	OP_SETXATTR, /* setxattr(a, b, val, len, flags) */
	OP_LSETXATTR,
	OP_GETXATTR,
	OP_LISTXATTR,
	OP_REMOVEXATTR,
	OP_FALLOC, /* open(a, O_WRONLY), posix_fallocate(0, n) */
	OP_BIND,   /* bind a unix socket at a */
	OP_CHDIR,
	OP_SETACL, /* set_acl(a, mode's user, group, other bits, named uid n or -1) */
};

static const char *const op_names[] = {
	"open",	     "write",	 "read",      "open+write", "mkdir",	 "rmdir",	"unlink",
	"link",	     "symlink",	 "rename",    "chmod",	    "chown",	 "lchown",	"truncate",
	"ftruncate", "mkfifo",	 "mknod",     "utimensat",  "stat",	 "lstat",	"readlink",
	"opendir",   "setxattr", "lsetxattr", "getxattr",   "listxattr", "removexattr", "fallocate",
	"bind",	     "chdir",	 "setacl",
};

struct op {
	enum op_kind k;
	const char *a, *b;
	int flags;
	mode_t mode;
	long long n, m;
	const struct timespec *ts;
	const char *val;
};

/*
 * Sets p's access ACL: user::user, [user:named_uid:rwx,] group::group,
 * [mask::group,] other::other (named_uid < 0: no named entry).  The value
 * is built here (no libacl).  Returns 0 or the errno.
 */
static int set_acl(const char *p, unsigned user, unsigned group, unsigned other, long named_uid)
{
	unsigned char v[4 + 8 * 5], *e = v + 4;
	const unsigned undef = 0xffffffffU;
	/* tag, perm, id: ACL_USER_OBJ, [ACL_USER], ACL_GROUP_OBJ, [ACL_MASK], ACL_OTHER */
	unsigned ent[5][3], n = 0;

	ent[n][0] = 0x01, ent[n][1] = user, ent[n++][2] = undef;
	if (named_uid >= 0)
		ent[n][0] = 0x02, ent[n][1] = 7, ent[n++][2] = (unsigned)named_uid;
	ent[n][0] = 0x04, ent[n][1] = group, ent[n++][2] = undef;
	if (named_uid >= 0)
		ent[n][0] = 0x10, ent[n][1] = group, ent[n++][2] = undef;
	ent[n][0] = 0x20, ent[n][1] = other, ent[n++][2] = undef;
	v[0] = 2, v[1] = v[2] = v[3] = 0;
	for (unsigned i = 0; i < n; i++, e += 8) {
		e[0] = ent[i][0], e[1] = 0;
		e[2] = ent[i][1], e[3] = 0;
		e[4] = ent[i][2] & 0xff, e[5] = ent[i][2] >> 8 & 0xff;
		e[6] = ent[i][2] >> 16 & 0xff, e[7] = ent[i][2] >> 24;
	}
	return setxattr(p, "system.posix_acl_access", v, 4 + 8 * n, 0) ? errno : 0;
}

static int do_op(const struct op *o)
{
	char buf[PATH_MAX];
	int fd, r = 0;

	switch (o->k) {
	case OP_OPEN:
		fd = open(o->a, o->flags, o->mode);
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	case OP_WRITE:
		fd = open(o->a, O_WRONLY | o->flags);
		if (fd < 0)
			return errno;
		r = write(fd, "x", 1) == 1 ? 0 : errno;
		close(fd);
		return r;
	case OP_READ:
		fd = open(o->a, O_RDONLY | o->flags);
		if (fd < 0)
			return errno;
		r = read(fd, buf, 1) >= 0 ? 0 : errno;
		close(fd);
		return r;
	case OP_CWRITE:
		fd = open(o->a, O_CREAT | O_RDWR | o->flags, o->mode);
		if (fd < 0)
			return errno;
		r = write(fd, "abc", 3) == 3 ? 0 : errno;
		close(fd);
		return r;
	case OP_MKDIR:
		r = mkdir(o->a, o->mode);
		break;
	case OP_RMDIR:
		r = rmdir(o->a);
		break;
	case OP_UNLINK:
		r = unlink(o->a);
		break;
	case OP_LINK:
		r = linkat(AT_FDCWD, o->a, AT_FDCWD, o->b, o->flags);
		break;
	case OP_SYMLINK:
		r = symlink(o->a, o->b);
		break;
	case OP_RENAME:
		r = renameat2(AT_FDCWD, o->a, AT_FDCWD, o->b, o->flags);
		break;
	case OP_CHMOD:
		r = chmod(o->a, o->mode);
		break;
	case OP_CHOWN:
		r = chown(o->a, o->n, o->m);
		break;
	case OP_LCHOWN:
		r = lchown(o->a, o->n, o->m);
		break;
	case OP_TRUNCATE:
		r = truncate(o->a, o->n);
		break;
	case OP_FTRUNC:
		/* O_RDONLY | O_CLOEXEC for read-only; O_CREAT takes o->mode */
		fd = open(o->a, o->flags ? o->flags : O_WRONLY, o->mode);
		if (fd < 0)
			return errno;
		r = ftruncate(fd, o->n) ? errno : 0;
		close(fd);
		return r;
	case OP_MKFIFO:
		r = mkfifo(o->a, o->mode);
		break;
	case OP_MKNOD:
		r = mknod(o->a, o->mode, o->n);
		break;
	case OP_UTIMES:
		r = utimensat(AT_FDCWD, o->a, o->ts, o->flags);
		break;
	case OP_STAT: {
		struct stat s;

		r = stat(o->a, &s);
		break;
	}
	case OP_LSTAT: {
		struct stat s;

		r = lstat(o->a, &s);
		break;
	}
	case OP_READLINK:
		r = readlink(o->a, buf, sizeof(buf)) < 0 ? -1 : 0;
		break;
	case OP_OPENDIR: {
		DIR *d = opendir(o->a);

		if (!d)
			return errno;
		errno = 0;
		r = readdir(d) || !errno ? 0 : errno;
		closedir(d);
		return r;
	}
	case OP_SETXATTR:
		r = setxattr(o->a, o->b, o->val, o->val ? strlen(o->val) : 0, o->flags);
		break;
	case OP_LSETXATTR:
		r = lsetxattr(o->a, o->b, o->val, o->val ? strlen(o->val) : 0, o->flags);
		break;
	case OP_GETXATTR:
		r = getxattr(o->a, o->b, buf, o->n ? o->n : (long long)sizeof(buf)) < 0 ? -1 : 0;
		break;
	case OP_LISTXATTR:
		r = listxattr(o->a, buf, o->n ? o->n : (long long)sizeof(buf)) < 0 ? -1 : 0;
		break;
	case OP_REMOVEXATTR:
		r = removexattr(o->a, o->b);
		break;
	case OP_FALLOC: /* O_CREAT takes o->mode */
		fd = open(o->a, o->flags ? o->flags : O_WRONLY, o->mode);
		if (fd < 0)
			return errno;
		r = posix_fallocate(fd, 0, o->n);
		close(fd);
		return r;
	case OP_BIND: {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		if (s < 0)
			return errno;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", o->a);
		r = bind(s, (struct sockaddr *)&sun, sizeof(sun)) ? errno : 0;
		close(s);
		return r;
	}
	case OP_CHDIR:
		r = chdir(o->a);
		break;
	case OP_SETACL:
		return set_acl(o->a, o->mode >> 6 & 7, o->mode >> 3 & 7, o->mode & 7, o->n);
	}
	return r ? errno : 0;
}

/* Drops CAP_FSETID from this process's effective set (no libcap here). */
static int drop_fsetid(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_FSETID / 32].effective &= ~(1U << (CAP_FSETID % 32));
	return syscall(SYS_capset, &h, d) ? -1 : 0;
}

/* Runs o as c (root, in this process, when c is NULL); returns its errno or 0. */
static int run(const struct cred *c, const struct op *o)
{
	pid_t pid;
	int st;

	if (!c)
		return do_op(o);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		gid_t groups[2] = { c->gid, c->sup };

		if (setgroups(c->sup ? 2 : 1, groups) || setresgid(c->gid, c->gid, c->gid) ||
		    setresuid(c->uid, c->uid, c->uid) || (c->no_fsetid && drop_fsetid()))
			_exit(255);
		_exit(do_op(o));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) == 255)
		return -1;
	return WEXITSTATUS(st);
}

static const char *who(const struct cred *c)
{
	return !c ? "root" : nm("uid %u", (unsigned)c->uid);
}

static bool expect(const char *name, const struct cred *c, int want, const struct op *o)
{
	int got = run(c, o);

	return check(got == want, name, "%s(%.60s%s%.60s) as %s: %s, expected %s", op_names[o->k],
		     o->a ? o->a : "", o->b ? ", " : "", o->b ? o->b : "", who(c), errname(got),
		     errname(want));
}

/* EXPECT(name, cred, errno or 0, OP_KIND, a, ...designated fields of struct op) */
#define EXPECT(name, c, want, ...) expect(name, c, want, &(struct op){ __VA_ARGS__ })

/* ---- files and their attributes ---- */

static struct stat lst(const char *p)
{
	struct stat s;

	if (lstat(p, &s))
		memset(&s, 0, sizeof(s));
	return s;
}

static bool exists(const char *p)
{
	struct stat s;

	return lstat(p, &s) == 0;
}

static int put(const char *p, mode_t mode, const void *data, size_t len)
{
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, mode);
	int r;

	if (fd < 0)
		return -1;
	r = len && write(fd, data, len) != (ssize_t)len ? -1 : 0;
	if (close(fd))
		r = -1;
	return r;
}

/* The whole content of p, NUL-terminated, in buf (up to n - 1 bytes); its length or -1. */
static ssize_t get(const char *p, char *buf, size_t n)
{
	int fd = open(p, O_RDONLY);
	ssize_t got = 0, r;

	if (fd < 0)
		return -1;
	while (got < (ssize_t)n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0)
		got += r;
	close(fd);
	buf[got] = 0;
	return got;
}

/* Creates a node of the given type ("reg", "dir", "fifo", "chr", "blk", "sock", "lnk"). */
static int mknode(const char *type, const char *p, mode_t mode)
{
	if (!strcmp(type, "reg"))
		return put(p, mode, NULL, 0) ? -1 : chmod(p, mode);
	if (!strcmp(type, "dir"))
		return mkdir(p, mode) ? -1 : chmod(p, mode);
	if (!strcmp(type, "fifo"))
		return mkfifo(p, mode) ? -1 : chmod(p, mode);
	if (!strcmp(type, "chr"))
		return mknod(p, S_IFCHR | mode, makedev(1, 3)) ? -1 : chmod(p, mode);
	if (!strcmp(type, "blk"))
		return mknod(p, S_IFBLK | mode, makedev(7, 250)) ? -1 : chmod(p, mode);
	if (!strcmp(type, "sock")) {
		int r = do_op(&(struct op){ OP_BIND, p });

		errno = r;
		return r ? -1 : chmod(p, mode);
	}
	if (!strcmp(type, "lnk"))
		return symlink("target-of-link", p);
	errno = EINVAL;
	return -1;
}

static int rmnode(const char *p)
{
	struct stat s = lst(p);

	return S_ISDIR(s.st_mode) ? rmdir(p) : unlink(p);
}

static const char *const types[] = { "reg", "dir", "fifo", "chr", "blk", "sock", "lnk" };
#define NTYPES (sizeof(types) / sizeof(types[0]))

static mode_t type_bits(const char *type)
{
	static const mode_t bits[] = { S_IFREG, S_IFDIR,  S_IFIFO, S_IFCHR,
				       S_IFBLK, S_IFSOCK, S_IFLNK };

	for (size_t i = 0; i < NTYPES; i++)
		if (!strcmp(types[i], type))
			return bits[i];
	return 0;
}

/* ---- timestamps ---- */

static int tscmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}

static const char *tsstr(struct timespec t)
{
	return nm("%lld.%09ld", (long long)t.tv_sec, t.tv_nsec);
}

/* Sleeps long enough for the filesystem's clock to move. */
static void tick(void)
{
	struct timespec t = { tick_ms / 1000, (tick_ms % 1000) * 1000000 };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

static struct timespec *tsof(struct stat *s, char which)
{
	return which == 'a' ? &s->st_atim : which == 'm' ? &s->st_mtim : &s->st_ctim;
}

/*
 * TIMES(name, before, path, "mc", "a"): the times named in the first string
 * must have moved forward since before (an lstat of path), those in the second
 * must be unchanged.  One check per letter.
 */
static void times(const char *name, const struct stat *before, const char *path,
		  const char *changed, const char *same)
{
	struct stat b = *before, a = lst(path);

	for (const char *c = changed; *c; c++)
		check(tscmp(*tsof(&a, *c), *tsof(&b, *c)) > 0, nm("%s: %ctime updated", name, *c),
		      "%s: %ctime %s, was %s", path, *c, tsstr(*tsof(&a, *c)),
		      tsstr(*tsof(&b, *c)));
	for (const char *c = same; *c; c++) {
		if (*c == 'a' && mnt_noatime)
			continue;
		check(tscmp(*tsof(&a, *c), *tsof(&b, *c)) == 0,
		      nm("%s: %ctime unchanged", name, *c), "%s: %ctime %s, was %s", path, *c,
		      tsstr(*tsof(&a, *c)), tsstr(*tsof(&b, *c)));
	}
}

static struct timespec coarse_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME_COARSE, &t);
	return t;
}

static struct timespec fine_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

/* The times in which must lie in [from, to] (to plus a second for a clock's rounding). */
static void times_within(const char *name, const char *path, const char *which,
			 struct timespec from, struct timespec to)
{
	struct stat s = lst(path);

	to.tv_sec++;
	from.tv_nsec = 0; /* a filesystem may keep whole seconds */
	for (const char *c = which; *c; c++) {
		struct timespec t = *tsof(&s, *c);

		check(tscmp(t, from) >= 0 && tscmp(t, to) <= 0, nm("%s: %ctime is now", name, *c),
		      "%s: %ctime %s, not within %s..%s", path, *c, tsstr(t), tsstr(from),
		      tsstr(to));
	}
}

/* ---- modes, owners, links ---- */

static void mode_is(const char *name, const char *path, mode_t want)
{
	struct stat s;

	if (lstat(path, &s)) {
		check(false, name, "lstat(%s): %s", path, strerror(errno));
		return;
	}
	check(s.st_mode == want, name, "%s: mode %06o, expected %06o", path, (unsigned)s.st_mode,
	      (unsigned)want);
}

static void owner_is(const char *name, const char *path, uid_t uid, gid_t gid)
{
	struct stat s = lst(path);

	check(s.st_uid == uid && s.st_gid == gid, name, "%s: owner %u:%u, expected %u:%u", path,
	      (unsigned)s.st_uid, (unsigned)s.st_gid, (unsigned)uid, (unsigned)gid);
}

static void nlink_is(const char *name, const char *path, nlink_t want)
{
	struct stat s = lst(path);

	check(s.st_nlink == want, name, "%s: nlink %lu, expected %lu", path,
	      (unsigned long)s.st_nlink, (unsigned long)want);
}

static void size_is(const char *name, const char *path, off_t want)
{
	struct stat s = lst(path);

	check(s.st_size == want, name, "%s: size %lld, expected %lld", path, (long long)s.st_size,
	      (long long)want);
}

static void content_is(const char *name, const char *path, const char *want)
{
	char buf[4096];
	ssize_t n = get(path, buf, sizeof(buf));

	check(n == (ssize_t)strlen(want) && !memcmp(buf, want, n), name,
	      "%s: content \"%.40s\" (%zd bytes), expected \"%.40s\"", path, n < 0 ? "" : buf, n,
	      want);
}

static void gone(const char *name, const char *path)
{
	struct stat s;
	int r = lstat(path, &s);

	check(r && errno == ENOENT, name, "%s: lstat %s, expected ENOENT", path,
	      r ? errname(errno) : "found it");
}

/* ---- areas: each runs in its own directory under the scratch directory ---- */

static void area(const char *name)
{
	area_name = name;
	umask(022);
	if (chdir(scratch) || (mkdir(name, 0777) && errno != EEXIST) || chmod(name, 0777) ||
	    chdir(name)) {
		check(false, "enter", "cannot make and enter %s/%s: %s", scratch, name,
		      strerror(errno));
		exit(1);
	}
}

static char *longname(size_t len, char c)
{
	static char bufs[4][NAME_MAX + 64];
	static int i;
	char *b = bufs[i++ & 3];

	memset(b, c, len);
	b[len] = 0;
	return b;
}

/* ---- open ---- */

static void t_open(void)
{
	struct stat b, pb;
	struct timespec t0, t1;
	char buf[64];
	int fd;

	area("open");
	pb = lst(".");
	tick();
	t0 = coarse_now();
	EXPECT("creat", ROOT, 0, OP_OPEN, "f", .flags = O_CREAT | O_WRONLY, .mode = 0644);
	t1 = fine_now();
	mode_is("creat mode minus umask 022", "f", S_IFREG | 0644);
	owner_is("creat owner is the caller", "f", 0, 0);
	nlink_is("creat nlink 1", "f", 1);
	size_is("creat size 0", "f", 0);
	times_within("creat", "f", "amc", t0, t1);
	times("creat parent", &pb, ".", "mc", "");

	umask(077);
	EXPECT("creat umask 077", ROOT, 0, OP_OPEN, "g", .flags = O_CREAT | O_WRONLY, .mode = 0666);
	umask(022);
	mode_is("creat umask 077 applied", "g", S_IFREG | 0600);
	EXPECT("creat 0 mode", ROOT, 0, OP_OPEN, "z", .flags = O_CREAT | O_WRONLY, .mode = 0);
	mode_is("creat 0 mode kept", "z", S_IFREG);
	EXPECT("creat all bits by root", ROOT, 0, OP_OPEN, "s", .flags = O_CREAT | O_WRONLY,
	       .mode = 07777);
	mode_is("creat keeps suid, sgid, sticky (minus umask)", "s", S_IFREG | 07755);

	setup(put("f", 0644, "abc", 3), "f");
	EXPECT("O_CREAT on existing", ROOT, 0, OP_OPEN, "f", .flags = O_CREAT | O_WRONLY,
	       .mode = 0600);
	content_is("O_CREAT on existing keeps content", "f", "abc");
	mode_is("O_CREAT on existing keeps mode", "f", S_IFREG | 0644);
	EXPECT("O_EXCL on existing file", ROOT, EEXIST, OP_OPEN, "f",
	       .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644);
	setup(mkdir("d", 0755), "d");
	EXPECT("O_EXCL on existing dir", ROOT, EEXIST, OP_OPEN, "d",
	       .flags = O_CREAT | O_EXCL | O_RDONLY, .mode = 0644);
	setup(symlink("f", "lf"), "lf");
	EXPECT("O_EXCL on symlink to file", ROOT, EEXIST, OP_OPEN, "lf",
	       .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644);
	setup(symlink("nothere", "dangling"), "dangling");
	EXPECT("O_EXCL on dangling symlink", ROOT, EEXIST, OP_OPEN, "dangling",
	       .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644);
	gone("O_EXCL on dangling symlink creates nothing", "nothere");
	EXPECT("O_CREAT through dangling symlink", ROOT, 0, OP_OPEN, "dangling",
	       .flags = O_CREAT | O_WRONLY, .mode = 0640);
	mode_is("O_CREAT through dangling symlink creates the target", "nothere", S_IFREG | 0640);
	mode_is("O_CREAT through dangling symlink keeps the link", "dangling", S_IFLNK | 0777);
	EXPECT("O_CREAT with trailing slash", ROOT, EISDIR, OP_OPEN, "new/",
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
	EXPECT("O_CREAT on dir", ROOT, EISDIR, OP_OPEN, "d", .flags = O_CREAT | O_WRONLY,
	       .mode = 0644);

	setup(put("t", 0644, "0123456789", 10), "t");
	b = lst("t");
	tick();
	EXPECT("O_TRUNC", ROOT, 0, OP_OPEN, "t", .flags = O_TRUNC | O_WRONLY);
	size_is("O_TRUNC empties", "t", 0);
	times("O_TRUNC", &b, "t", "mc", "");
	/* POSIX: O_TRUNC of an existing file marks both, empty or not (found by difftest) */
	setup(put("t0", 0644, NULL, 0), "t0");
	b = lst("t0");
	tick();
	EXPECT("O_TRUNC of an empty file", ROOT, 0, OP_OPEN, "t0", .flags = O_TRUNC | O_WRONLY);
	times("O_TRUNC of an empty file", &b, "t0", "mc", "");
	setup(put("t", 0644, "0123456789", 10), "t");
	EXPECT("O_TRUNC as other without write", U1, EACCES, OP_OPEN, "t",
	       .flags = O_TRUNC | O_WRONLY);
	size_is("failed O_TRUNC keeps size", "t", 10);
	b = lst("t");
	tick();
	EXPECT("open O_RDONLY", ROOT, 0, OP_OPEN, "t", .flags = O_RDONLY);
	times("open O_RDONLY", &b, "t", "", "mc");

	setup(put("ap", 0644, "ab", 2), "ap");
	fd = open("ap", O_WRONLY | O_APPEND);
	check(fd >= 0 && lseek(fd, 0, SEEK_SET) == 0 && write(fd, "cd", 2) == 2 &&
		      lseek(fd, 0, SEEK_CUR) == 4,
	      "O_APPEND writes at the end after lseek 0", "%m");
	if (fd >= 0)
		close(fd);
	content_is("O_APPEND content", "ap", "abcd");

	EXPECT("O_DIRECTORY on file", ROOT, ENOTDIR, OP_OPEN, "f", .flags = O_DIRECTORY);
	EXPECT("O_DIRECTORY on dir", ROOT, 0, OP_OPEN, "d", .flags = O_DIRECTORY);
	EXPECT("O_WRONLY on dir", ROOT, EISDIR, OP_OPEN, "d", .flags = O_WRONLY);
	EXPECT("O_RDWR on dir", ROOT, EISDIR, OP_OPEN, "d", .flags = O_RDWR);
	EXPECT("O_RDONLY on dir", ROOT, 0, OP_OPEN, "d", .flags = O_RDONLY);
	EXPECT("O_NOFOLLOW on symlink", ROOT, ELOOP, OP_OPEN, "lf", .flags = O_NOFOLLOW);
	EXPECT("O_NOFOLLOW on file", ROOT, 0, OP_OPEN, "f", .flags = O_NOFOLLOW);
	EXPECT("trailing slash on file", ROOT, ENOTDIR, OP_OPEN, "f/", .flags = O_RDONLY);
	EXPECT("missing file", ROOT, ENOENT, OP_OPEN, "nonexistent", .flags = O_RDONLY);
	EXPECT("O_CREAT in missing dir", ROOT, ENOENT, OP_OPEN, "nodir/x",
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);

	setup(mkfifo("fifo", 0666), "fifo");
	EXPECT("fifo O_WRONLY|O_NONBLOCK without reader", ROOT, ENXIO, OP_OPEN, "fifo",
	       .flags = O_WRONLY | O_NONBLOCK);
	EXPECT("fifo O_RDONLY|O_NONBLOCK", ROOT, 0, OP_OPEN, "fifo",
	       .flags = O_RDONLY | O_NONBLOCK);

	/* permissions: owner, group and other classes, each alone */
	setup(put("p644", 0644, "x", 1), "p644");
	EXPECT("other reads 0644", U1, 0, OP_OPEN, "p644", .flags = O_RDONLY);
	EXPECT("other cannot write 0644", U1, EACCES, OP_OPEN, "p644", .flags = O_WRONLY);
	EXPECT("other cannot O_RDWR 0644", U1, EACCES, OP_OPEN, "p644", .flags = O_RDWR);
	setup(put("p600", 0600, "x", 1), "p600");
	EXPECT("other cannot read 0600", U1, EACCES, OP_OPEN, "p600", .flags = O_RDONLY);
	setup(put("p640", 0640, "x", 1) ?: chown("p640", 0, U1_ID), "p640");
	EXPECT("group reads 0640", U1, 0, OP_OPEN, "p640", .flags = O_RDONLY);
	EXPECT("group cannot write 0640", U1, EACCES, OP_OPEN, "p640", .flags = O_WRONLY);
	EXPECT("supplementary group reads 0640", U3, 0, OP_OPEN, "p640", .flags = O_RDONLY);
	EXPECT("other cannot read 0640", U2, EACCES, OP_OPEN, "p640", .flags = O_RDONLY);
	setup(put("p604", 0604, "x", 1) ?: chown("p604", 0, U1_ID), "p604");
	EXPECT("group class without read: 0604", U1, EACCES, OP_OPEN, "p604", .flags = O_RDONLY);
	EXPECT("other class with read: 0604", U2, 0, OP_OPEN, "p604", .flags = O_RDONLY);
	setup(put("p066", 0066, "x", 1) ?: chown("p066", U1_ID, U1_ID), "p066");
	EXPECT("owner class without read: 0066", U1, EACCES, OP_OPEN, "p066", .flags = O_RDONLY);
	EXPECT("other of 0066 reads", U2, 0, OP_OPEN, "p066", .flags = O_RDONLY);
	setup(put("p000", 0000, "x", 1), "p000");
	EXPECT("root reads 0000", ROOT, 0, OP_OPEN, "p000", .flags = O_RDONLY);
	EXPECT("root writes 0000", ROOT, 0, OP_OPEN, "p000", .flags = O_WRONLY);

	EXPECT("other creates in 0777 dir", U1, 0, OP_OPEN, "byu1", .flags = O_CREAT | O_WRONLY,
	       .mode = 0644);
	owner_is("created file owned by creator", "byu1", U1_ID, U1_ID);
	setup(mkdir("ro", 0755), "ro");
	EXPECT("other creates in 0755 root dir", U1, EACCES, OP_OPEN, "ro/x",
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
	gone("failed create leaves nothing", "ro/x");
	EXPECT("O_CREAT mode 0: the fd still writes", U1, 0, OP_CWRITE, "cw", .mode = 0);
	size_is("O_CREAT mode 0 written", "cw", 3);
	mode_is("O_CREAT mode 0 kept", "cw", S_IFREG);

	/* read and write through one descriptor */
	fd = open("rw", O_CREAT | O_RDWR, 0644);
	check(fd >= 0 && pwrite(fd, "hello", 5, 0) == 5 && pread(fd, buf, 64, 0) == 5 &&
		      !memcmp(buf, "hello", 5),
	      "O_RDWR reads back what it wrote", "%m");
	check(fd >= 0 && pread(fd, buf, 64, 5) == 0, "read at EOF returns 0", "%m");
	check(fd >= 0 && pwrite(fd, "Z", 1, 10) == 1 && pread(fd, buf, 64, 0) == 11 &&
		      !memcmp(buf, "hello\0\0\0\0\0Z", 11),
	      "write beyond EOF leaves zeros between", "read back differs");
	check(fd >= 0 && write(fd, "x", 0) == 0, "zero-length write", "%m");
	if (fd >= 0)
		close(fd);
	fd = open("rw", O_RDONLY);
	check(fd >= 0 && write(fd, "x", 1) < 0 && errno == EBADF, "write on O_RDONLY fd EBADF",
	      "write succeeded or %m");
	if (fd >= 0)
		close(fd);
}

/* ---- mkdir, rmdir ---- */

static void t_mkdir(void)
{
	struct stat pb, b;
	struct timespec t0, t1;

	area("mkdir");
	pb = lst(".");
	tick();
	t0 = coarse_now();
	EXPECT("mkdir", ROOT, 0, OP_MKDIR, "d", .mode = 0755);
	t1 = fine_now();
	mode_is("mkdir mode", "d", S_IFDIR | 0755);
	owner_is("mkdir owner", "d", 0, 0);
	nlink_is("new dir nlink 2", "d", 2);
	nlink_is("parent nlink +1", ".", pb.st_nlink + 1);
	times_within("mkdir", "d", "amc", t0, t1);
	times("mkdir parent", &pb, ".", "mc", "");
	check(lst("d/..").st_ino == pb.st_ino, "new dir's .. is the parent", "ino %llu vs %llu",
	      (unsigned long long)lst("d/..").st_ino, (unsigned long long)pb.st_ino);
	check(lst("d/.").st_ino == lst("d").st_ino, "new dir's . is itself", "differs");
	EXPECT("mkdir with trailing slash", ROOT, 0, OP_MKDIR, "d2/", .mode = 0700);
	mode_is("mkdir with trailing slash mode", "d2", S_IFDIR | 0700);
	umask(077);
	EXPECT("mkdir under umask 077", ROOT, 0, OP_MKDIR, "d3", .mode = 0777);
	umask(022);
	mode_is("mkdir umask applied", "d3", S_IFDIR | 0700);
	EXPECT("mkdir sticky", ROOT, 0, OP_MKDIR, "d4", .mode = 01777);
	mode_is("mkdir keeps the sticky bit", "d4", S_IFDIR | 01755);
	EXPECT("mkdir 02755 in a plain dir", U1, 0, OP_MKDIR, "d5", .mode = 02755);
	mode_is("mkdir drops S_ISGID outside a setgid dir", "d5", S_IFDIR | 0755);
	owner_is("mkdir owner is the caller", "d5", U1_ID, U1_ID);

	setup(put("f", 0644, NULL, 0) ?: symlink("f", "l") ?: symlink("nowhere", "dl"), "f l dl");
	b = lst(".");
	tick();
	EXPECT("mkdir on existing dir", ROOT, EEXIST, OP_MKDIR, "d", .mode = 0755);
	EXPECT("mkdir on existing file", ROOT, EEXIST, OP_MKDIR, "f", .mode = 0755);
	EXPECT("mkdir on symlink", ROOT, EEXIST, OP_MKDIR, "l", .mode = 0755);
	EXPECT("mkdir on dangling symlink", ROOT, EEXIST, OP_MKDIR, "dl", .mode = 0755);
	gone("mkdir on dangling symlink creates no target", "nowhere");
	times("failed mkdir parent", &b, ".", "", "mc");
	nlink_is("failed mkdir parent nlink", ".", b.st_nlink);
	setup(mkdir("ro", 0755), "ro");
	EXPECT("mkdir in 0755 as other", U1, EACCES, OP_MKDIR, "ro/x", .mode = 0755);
	setup(mkdir("nx", 0666), "nx");
	EXPECT("mkdir in dir without search", U1, EACCES, OP_MKDIR, "nx/x", .mode = 0755);

	/* S_ISGID directories: new entries take the directory's group */
	setup(mkdir("sg", 0755) ?: chown("sg", 0, U2_ID) ?: chmod("sg", 02777), "sg");
	EXPECT("mkdir in setgid dir as root", ROOT, 0, OP_MKDIR, "sg/r", .mode = 0755);
	owner_is("setgid dir: subdir takes its group", "sg/r", 0, U2_ID);
	mode_is("setgid dir: subdir inherits S_ISGID", "sg/r", S_IFDIR | 02755);
	EXPECT("mkdir in setgid dir as non-member", U1, 0, OP_MKDIR, "sg/u", .mode = 0755);
	owner_is("setgid dir: non-member's subdir takes its group", "sg/u", U1_ID, U2_ID);
	mode_is("setgid dir: non-member's subdir inherits S_ISGID", "sg/u", S_IFDIR | 02755);
	EXPECT("mkdir in inherited setgid dir", U1, 0, OP_MKDIR, "sg/u/v", .mode = 0700);
	owner_is("setgid inherited two levels", "sg/u/v", U1_ID, U2_ID);
	EXPECT("create in setgid dir as non-member", U1, 0, OP_OPEN, "sg/f",
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
	owner_is("setgid dir: file takes its group", "sg/f", U1_ID, U2_ID);
	mode_is("setgid dir: file does not get S_ISGID", "sg/f", S_IFREG | 0644);
	EXPECT("create 02755 in setgid dir as non-member", U1, 0, OP_OPEN, "sg/x",
	       .flags = O_CREAT | O_WRONLY, .mode = 02755);
	mode_is("setgid dir: non-member's S_ISGID file is stripped", "sg/x", S_IFREG | 0755);
	EXPECT("create 02755 in setgid dir as root", ROOT, 0, OP_OPEN, "sg/y",
	       .flags = O_CREAT | O_WRONLY, .mode = 02755);
	mode_is("setgid dir: root keeps S_ISGID on a file", "sg/y", S_IFREG | 02755);
	EXPECT("mkfifo in setgid dir", U1, 0, OP_MKFIFO, "sg/p", .mode = 0644);
	owner_is("setgid dir: fifo takes its group", "sg/p", U1_ID, U2_ID);
	EXPECT("symlink in setgid dir", U1, 0, OP_SYMLINK, "f", "sg/l");
	owner_is("setgid dir: symlink takes its group", "sg/l", U1_ID, U2_ID);
	setup(mkdir("ng", 0777) ?: chown("ng", 0, U2_ID) ?: chmod("ng", 0777), "ng");
	EXPECT("create in plain dir of another group", U1, 0, OP_OPEN, "ng/f",
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
	owner_is("plain dir: file takes the caller's group", "ng/f", U1_ID, U1_ID);
	EXPECT("mkdir in plain dir of another group", U3, 0, OP_MKDIR, "ng/d", .mode = 0755);
	owner_is("plain dir: subdir takes the caller's group", "ng/d", U3_ID, U3_ID);
}

static void t_rmdir(void)
{
	struct stat pb, b;

	area("rmdir");
	setup(mkdir("d", 0755), "d");
	pb = lst(".");
	tick();
	EXPECT("rmdir", ROOT, 0, OP_RMDIR, "d");
	gone("rmdir removes", "d");
	nlink_is("rmdir parent nlink -1", ".", pb.st_nlink - 1);
	times("rmdir parent", &pb, ".", "mc", "");

	setup(mkdir("ne", 0755) ?: put("ne/f", 0644, NULL, 0), "ne/f");
	setup(mkdir("nd", 0755) ?: mkdir("nd/s", 0755), "nd/s");
	b = lst(".");
	tick();
	EXPECT("rmdir with a file in it", ROOT, ENOTEMPTY, OP_RMDIR, "ne");
	EXPECT("rmdir with a dir in it", ROOT, ENOTEMPTY, OP_RMDIR, "nd");
	times("failed rmdir parent", &b, ".", "", "mc");
	nlink_is("failed rmdir parent nlink", ".", b.st_nlink);
	setup(unlink("ne/f"), "unlink ne/f");
	EXPECT("rmdir once emptied", ROOT, 0, OP_RMDIR, "ne");
	setup(put("f", 0644, NULL, 0) ?: symlink("nd", "ld"), "f ld");
	EXPECT("rmdir on file", ROOT, ENOTDIR, OP_RMDIR, "f");
	EXPECT("rmdir on symlink to dir", ROOT, ENOTDIR, OP_RMDIR, "ld");
	EXPECT("rmdir on missing", ROOT, ENOENT, OP_RMDIR, "nothere");
	EXPECT("rmdir .", ROOT, EINVAL, OP_RMDIR, "nd/s/.");
	EXPECT("rmdir ..", ROOT, ENOTEMPTY, OP_RMDIR, "nd/s/..");
	EXPECT("rmdir with trailing slash", ROOT, 0, OP_RMDIR, "nd/s/");
	nlink_is("rmdir of subdir: nlink back to 2", "nd", 2);

	setup(mkdir("ro", 0777) ?: mkdir("ro/x", 0777) ?: chmod("ro", 0755), "ro/x");
	EXPECT("rmdir in 0755 as other", U1, EACCES, OP_RMDIR, "ro/x");
	setup(mkdir("nx", 0777) ?: mkdir("nx/x", 0777) ?: chmod("nx", 0666), "nx/x");
	EXPECT("rmdir in dir without search", U1, EACCES, OP_RMDIR, "nx/x");
	/* the sticky bit: only the entry's owner, the directory's owner or root */
	setup(mkdir("st", 0755) ?: chmod("st", 01777), "st");
	EXPECT("mkdir in sticky dir", U1, 0, OP_MKDIR, "st/a", .mode = 0777);
	EXPECT("sticky: other cannot rmdir", U2, EPERM, OP_RMDIR, "st/a");
	EXPECT("sticky: owner can rmdir", U1, 0, OP_RMDIR, "st/a");
	EXPECT("mkdir in sticky dir again", U1, 0, OP_MKDIR, "st/b", .mode = 0777);
	EXPECT("sticky: root can rmdir", ROOT, 0, OP_RMDIR, "st/b");
	setup(mkdir("st2", 0755) ?: chown("st2", U2_ID, U2_ID) ?: chmod("st2", 01777), "st2");
	EXPECT("mkdir in another's sticky dir", U1, 0, OP_MKDIR, "st2/a", .mode = 0777);
	EXPECT("sticky: dir owner can rmdir", U2, 0, OP_RMDIR, "st2/a");
	setup(mkdir("ns", 0777) ?: mkdir("ns/a", 0700) ?: chown("ns/a", U1_ID, U1_ID) ?:
				    chmod("ns", 0777),
	      "ns/a");
	EXPECT("no sticky: other can rmdir", U2, 0, OP_RMDIR, "ns/a");
}

/* ---- unlink, link ---- */

static void t_unlink(void)
{
	struct stat pb, b;
	char buf[8192], back[8192];
	int fd;

	area("unlink");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		if (!strcmp(t, "dir"))
			continue;
		setup(mknode(t, "n", 0644), t);
		pb = lst(".");
		tick();
		EXPECT(nm("unlink %s", t), ROOT, 0, OP_UNLINK, "n");
		gone(nm("unlink %s removes", t), "n");
		times(nm("unlink %s parent", t), &pb, ".", "mc", "");
	}
	setup(put("f", 0644, "data", 4) ?: link("f", "g"), "f g");
	b = lst("f");
	tick();
	EXPECT("unlink one of two links", ROOT, 0, OP_UNLINK, "g");
	nlink_is("unlink: other link's nlink 1", "f", 1);
	times("unlink: other link", &b, "f", "c", "m");
	content_is("unlink: other link's content", "f", "data");

	setup(mkdir("d", 0755), "d");
	EXPECT("unlink on dir", ROOT, EISDIR, OP_UNLINK, "d");
	EXPECT("unlink on missing", ROOT, ENOENT, OP_UNLINK, "nothere");
	EXPECT("unlink with trailing slash on file", ROOT, ENOTDIR, OP_UNLINK, "f/");
	setup(symlink("f", "l"), "l");
	EXPECT("unlink symlink", ROOT, 0, OP_UNLINK, "l");
	gone("unlink symlink removes the link", "l");
	check(exists("f"), "unlink symlink keeps the target", "f is gone");

	setup(mkdir("ro", 0777) ?: put("ro/f", 0666, NULL, 0) ?: chmod("ro", 0755), "ro/f");
	b = lst("ro");
	tick();
	EXPECT("unlink in 0755 as other", U1, EACCES, OP_UNLINK, "ro/f");
	times("failed unlink parent", &b, "ro", "", "mc");
	setup(mkdir("nx", 0777) ?: put("nx/f", 0666, NULL, 0) ?: chmod("nx", 0666), "nx/f");
	EXPECT("unlink in dir without search", U1, EACCES, OP_UNLINK, "nx/f");
	EXPECT("unlink file of another in 0777 dir", U2, 0, OP_UNLINK, "ro/../d/../f");
	setup(mkdir("st", 0755) ?: chmod("st", 01777), "st");
	EXPECT("create in sticky dir", U1, 0, OP_OPEN, "st/a", .flags = O_CREAT | O_WRONLY,
	       .mode = 0666);
	EXPECT("sticky: other cannot unlink", U2, EPERM, OP_UNLINK, "st/a");
	EXPECT("sticky: owner can unlink", U1, 0, OP_UNLINK, "st/a");
	EXPECT("create in sticky dir again", U1, 0, OP_OPEN, "st/b", .flags = O_CREAT | O_WRONLY,
	       .mode = 0666);
	EXPECT("sticky: root can unlink", ROOT, 0, OP_UNLINK, "st/b");
	setup(mkdir("st2", 0755) ?: chown("st2", U2_ID, U2_ID) ?: chmod("st2", 01777), "st2");
	EXPECT("create in another's sticky dir", U1, 0, OP_OPEN, "st2/a",
	       .flags = O_CREAT | O_WRONLY, .mode = 0666);
	EXPECT("sticky: dir owner can unlink", U2, 0, OP_UNLINK, "st2/a");
	EXPECT("mkfifo in sticky dir", U1, 0, OP_MKFIFO, "st/p", .mode = 0666);
	EXPECT("sticky: other cannot unlink a fifo", U2, EPERM, OP_UNLINK, "st/p");

	/* an open file outlives its last name */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	fd = open("open", O_CREAT | O_RDWR, 0644);
	setup(fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf) ? -1 : 0, "open file");
	EXPECT("unlink an open file", ROOT, 0, OP_UNLINK, "open");
	gone("unlinked open file has no name", "open");
	if (fd >= 0) {
		struct stat s;

		check(!fstat(fd, &s) && s.st_nlink == 0 && s.st_size == sizeof(buf),
		      "unlinked open file: fstat nlink 0, size kept", "nlink %lu size %lld",
		      (unsigned long)s.st_nlink, (long long)s.st_size);
		check(pread(fd, back, sizeof(back), 0) == sizeof(back) &&
			      !memcmp(buf, back, sizeof(buf)),
		      "unlinked open file: data readable", "read back differs");
		check(pwrite(fd, "tail", 4, sizeof(buf)) == 4 && !fstat(fd, &s) &&
			      s.st_size == sizeof(buf) + 4,
		      "unlinked open file: still writable", "%m");
		check(!ftruncate(fd, 100) && !fstat(fd, &s) && s.st_size == 100 &&
			      pread(fd, back, sizeof(back), 0) == 100 && !memcmp(buf, back, 100),
		      "unlinked open file: ftruncate", "%m");
		check(!fsync(fd), "unlinked open file: fsync", "%m");
		close(fd);
	}
	fd = open("open", O_CREAT | O_RDWR | O_EXCL, 0644);
	check(fd >= 0, "name of an unlinked open file is free again", "%m");
	if (fd >= 0)
		close(fd);
}

/*
 * A name removed while a process still reaches the inode some other way than
 * an open file (an O_PATH descriptor, a directory descriptor, the working
 * directory): the inode lives on with nlink 0 until that goes, as on ext4.
 * Through FUSE only the kernel's lookup count keeps it (a daemon that frees
 * it at once answers ENOENT).  Attributes are asked of the filesystem
 * (AT_STATX_FORCE_SYNC), and /proc/self/fd/N reopens the inode itself.
 */
static bool stat_fd_sync(int fd, struct statx *sx)
{
	memset(sx, 0, sizeof(*sx));
	return !statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, sx);
}

static void t_unlink_held(void)
{
	struct statx sx;
	char path[64], back[16];
	int fd, fd2, cwd;

	area("unlink");
	/* an unlinked file held by an O_PATH descriptor */
	fd = setup(put("held", 0644, "kept", 4), "held") ? open("held", O_PATH) : -1;
	EXPECT("unlink a file held by O_PATH", ROOT, 0, OP_UNLINK, "held");
	if (fd >= 0) {
		check(stat_fd_sync(fd, &sx) && sx.stx_nlink == 0 && sx.stx_size == 4,
		      "unlinked O_PATH file: statx nlink 0, size kept", "%m nlink %u",
		      sx.stx_nlink);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		fd2 = open(path, O_RDONLY);
		check(fd2 >= 0 && read(fd2, back, sizeof(back)) == 4 && !memcmp(back, "kept", 4),
		      "unlinked O_PATH file: reopened through /proc, content kept", "%m");
		if (fd2 >= 0)
			close(fd2);
		close(fd);
	}
	/* the old file of a rename that replaced it */
	fd = setup(put("old", 0644, "old", 3) ?: put("new", 0644, "new", 3), "old new")
		     ? open("old", O_PATH)
		     : -1;
	EXPECT("rename over a file held by O_PATH", ROOT, 0, OP_RENAME, "new", "old");
	if (fd >= 0) {
		check(stat_fd_sync(fd, &sx) && sx.stx_nlink == 0,
		      "replaced O_PATH file: statx nlink 0", "%m nlink %u", sx.stx_nlink);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		fd2 = open(path, O_RDONLY);
		check(fd2 >= 0 && read(fd2, back, sizeof(back)) == 3 && !memcmp(back, "old", 3),
		      "replaced O_PATH file: reopened through /proc, old content", "%m");
		if (fd2 >= 0)
			close(fd2);
		close(fd);
	}
	content_is("rename over a held file: the name has the new content", "old", "new");
	/* a removed directory still open, and a removed working directory */
	fd = setup(mkdir("rmd", 0755), "rmd") ? open("rmd", O_RDONLY | O_DIRECTORY) : -1;
	EXPECT("rmdir an open directory", ROOT, 0, OP_RMDIR, "rmd");
	if (fd >= 0) {
		DIR *d;
		struct dirent *e;
		int n = 0;

		check(stat_fd_sync(fd, &sx) && sx.stx_nlink == 0,
		      "removed open directory: statx nlink 0", "%m nlink %u", sx.stx_nlink);
		fd2 = dup(fd);
		d = fd2 >= 0 ? fdopendir(fd2) : NULL;
		errno = 0;
		while (d && (e = readdir(d)))
			n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
		check(d && !errno && n == 0, "removed open directory: lists empty",
		      "%m, %d entries", n);
		if (d)
			closedir(d);
		errno = 0;
		check(openat(fd, "x", O_CREAT | O_WRONLY, 0644) < 0 && errno == ENOENT,
		      "removed open directory: create in it ENOENT", "%m");
		close(fd);
	}
	cwd = open(".", O_RDONLY | O_DIRECTORY);
	if (setup(cwd < 0 || mkdir("rmcwd", 0755) || chdir("rmcwd") ? -1 : 0, "rmcwd")) {
		struct stat s;

		check(!rmdir("../rmcwd"), "rmdir of the working directory", "%m");
		check(!stat(".", &s) && s.st_nlink == 0 && S_ISDIR(s.st_mode),
		      "removed working directory: stat . nlink 0", "%m nlink %lu",
		      (unsigned long)s.st_nlink);
		errno = 0;
		check(mkdir("sub", 0755) < 0 && errno == ENOENT,
		      "removed working directory: mkdir in it ENOENT", "%m");
	}
	if (cwd >= 0) {
		check(!fchdir(cwd), "back from the removed working directory", "%m");
		close(cwd);
	}
}

static void t_link(void)
{
	struct stat pb, b, s;
	char buf[16];

	area("link");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		if (!strcmp(t, "dir"))
			continue;
		setup(mknode(t, "n", 0644), t);
		b = lst("n");
		pb = lst(".");
		tick();
		EXPECT(nm("link %s", t), ROOT, 0, OP_LINK, "n", "n2");
		s = lst("n2");
		check(s.st_ino == b.st_ino && (s.st_mode & S_IFMT) == type_bits(t),
		      nm("link %s: same inode and type", t), "ino %llu vs %llu, mode %o",
		      (unsigned long long)s.st_ino, (unsigned long long)b.st_ino,
		      (unsigned)s.st_mode);
		nlink_is(nm("link %s: nlink 2", t), "n", 2);
		nlink_is(nm("link %s: new name's nlink 2", t), "n2", 2);
		times(nm("link %s", t), &b, "n", "c", "m");
		times(nm("link %s parent", t), &pb, ".", "mc", "");
		EXPECT(nm("link %s onto existing name", t), ROOT, EEXIST, OP_LINK, "n", "n2");
		EXPECT(nm("unlink first name of %s", t), ROOT, 0, OP_UNLINK, "n");
		nlink_is(nm("link %s: nlink 1 after unlink", t), "n2", 1);
		setup(unlink("n2"), "unlink n2");
	}

	setup(put("f", 0644, "one", 3) ?: mkdir("d", 0755) ?: mkdir("d2", 0755), "f d d2");
	pb = lst("d");
	EXPECT("link into another dir", ROOT, 0, OP_LINK, "f", "d/f");
	nlink_is("link into another dir: dir nlink unchanged", "d", pb.st_nlink);
	setup(put("d/f", 0644, "two", 3), "write through the link");
	content_is("links share data", "f", "two");
	setup(chmod("d/f", 0600), "chmod through the link");
	mode_is("links share mode", "f", S_IFREG | 0600);
	for (int i = 0; i < 8; i++)
		setup(link("f", nm("many%d", i)), "many");
	nlink_is("ten links", "f", 10);
	for (int i = 0; i < 8; i++)
		setup(unlink(nm("many%d", i)), "unlink many");
	nlink_is("two links left", "f", 2);

	EXPECT("link a dir", ROOT, EPERM, OP_LINK, "d", "dl");
	EXPECT("link onto existing file", ROOT, EEXIST, OP_LINK, "f", "d/f");
	EXPECT("link onto existing dir", ROOT, EEXIST, OP_LINK, "f", "d2");
	setup(symlink("nowhere", "dang"), "dang");
	EXPECT("link onto dangling symlink", ROOT, EEXIST, OP_LINK, "f", "dang");
	EXPECT("link of missing", ROOT, ENOENT, OP_LINK, "nothere", "x");
	EXPECT("link into missing dir", ROOT, ENOENT, OP_LINK, "f", "nodir/x");
	EXPECT("link with trailing slash on new name", ROOT, ENOENT, OP_LINK, "f", "x/");

	setup(symlink("f", "sl"), "sl");
	EXPECT("link a symlink (no follow)", ROOT, 0, OP_LINK, "sl", "sl2");
	check(lst("sl2").st_ino == lst("sl").st_ino && S_ISLNK(lst("sl2").st_mode),
	      "linked symlink is the symlink", "mode %o", (unsigned)lst("sl2").st_mode);
	check(readlink("sl2", buf, sizeof(buf)) == 1 && buf[0] == 'f',
	      "linked symlink reads the same", "%m");
	EXPECT("link a symlink with AT_SYMLINK_FOLLOW", ROOT, 0, OP_LINK, "sl", "sl3",
	       .flags = AT_SYMLINK_FOLLOW);
	check(lst("sl3").st_ino == lst("f").st_ino, "AT_SYMLINK_FOLLOW links the target",
	      "ino %llu", (unsigned long long)lst("sl3").st_ino);
	EXPECT("AT_SYMLINK_FOLLOW on dangling symlink", ROOT, ENOENT, OP_LINK, "dang", "x",
	       .flags = AT_SYMLINK_FOLLOW);

	setup(mkdir("ro", 0755), "ro");
	setup(put("pub", 0666, NULL, 0) ?: chown("pub", U1_ID, U1_ID), "pub");
	EXPECT("link into 0755 as other", U1, EACCES, OP_LINK, "pub", "ro/x");
	EXPECT("link by the owner", U1, 0, OP_LINK, "pub", "pub2");
	b = lst("pub");
	tick();
	EXPECT("link into 0755 dir fails", U1, EACCES, OP_LINK, "pub", "ro/y");
	times("failed link", &b, "pub", "", "c");
	nlink_is("failed link nlink", "pub", b.st_nlink);
}

/* ---- rename ---- */

static void t_rename(void)
{
	struct stat pb, b, s, db, d2b, tb;
	int fd;
	char buf[16];

	area("rename");
	/* each type, in a directory that only root may write */
	setup(mkdir("types", 0755), "types");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		setup(mknode(t, "types/n", 0644), t);
		b = lst("types/n");
		pb = lst("types");
		tick();
		EXPECT(nm("rename %s", t), ROOT, 0, OP_RENAME, "types/n", "types/m");
		gone(nm("rename %s: old name gone", t), "types/n");
		s = lst("types/m");
		check(s.st_ino == b.st_ino && s.st_mode == b.st_mode && s.st_nlink == b.st_nlink,
		      nm("rename %s: same inode, mode, nlink", t), "ino %llu mode %o nlink %lu",
		      (unsigned long long)s.st_ino, (unsigned)s.st_mode, (unsigned long)s.st_nlink);
		times(nm("rename %s", t), &b, "types/m", "c", "m");
		times(nm("rename %s parent", t), &pb, "types", "mc", "");
		nlink_is(nm("rename %s: parent nlink", t), "types", pb.st_nlink);
		if (strcmp(t, "dir")) {
			setup(link("types/m", "types/h"), "hard link");
			EXPECT(nm("rename %s onto a hard link of itself", t), ROOT, 0, OP_RENAME,
			       "types/m", "types/h");
			check(exists("types/m") && exists("types/h"),
			      nm("rename %s onto its hard link keeps both names", t), "m %s, h %s",
			      exists("types/m") ? "kept" : "gone",
			      exists("types/h") ? "kept" : "gone");
			nlink_is(nm("rename %s onto its hard link: nlink 2", t), "types/h", 2);
			setup(unlink("types/h"), "unlink h");
		}
		b = lst("types/m");
		pb = lst("types");
		tick();
		EXPECT(nm("rename %s onto itself", t), ROOT, 0, OP_RENAME, "types/m", "types/m");
		check(lst("types/m").st_ino == b.st_ino, nm("rename %s onto itself keeps it", t),
		      "gone");
		times(nm("rename %s onto itself parent", t), &pb, "types", "", "mc");
		b = lst("types/m");
		tick();
		EXPECT(nm("rename %s as other, dir not writable", t), U1, EACCES, OP_RENAME,
		       "types/m", "types/x");
		times(nm("failed rename %s", t), &b, "types/m", "", "c");
		setup(rmnode("types/m"), "remove m");
	}

	/* across directories */
	setup(mkdir("a", 0755) ?: mkdir("b", 0755) ?: put("a/f", 0644, "fa", 2), "a b a/f");
	b = lst("a/f");
	db = lst("a");
	d2b = lst("b");
	tick();
	EXPECT("rename file across dirs", ROOT, 0, OP_RENAME, "a/f", "b/g");
	check(lst("b/g").st_ino == b.st_ino, "file across dirs: same inode", "differs");
	content_is("file across dirs: content", "b/g", "fa");
	times("file across dirs: source dir", &db, "a", "mc", "");
	times("file across dirs: target dir", &d2b, "b", "mc", "");
	nlink_is("file across dirs: source dir nlink", "a", db.st_nlink);
	nlink_is("file across dirs: target dir nlink", "b", d2b.st_nlink);
	setup(mkdir("a/sub", 0755) ?: put("a/sub/x", 0644, "x", 1), "a/sub/x");
	db = lst("a");
	d2b = lst("b");
	b = lst("a/sub");
	tick();
	EXPECT("rename dir across dirs", ROOT, 0, OP_RENAME, "a/sub", "b/sub2");
	nlink_is("dir across dirs: source parent nlink -1", "a", db.st_nlink - 1);
	nlink_is("dir across dirs: target parent nlink +1", "b", d2b.st_nlink + 1);
	check(lst("b/sub2/..").st_ino == d2b.st_ino, "dir across dirs: .. is the new parent",
	      "ino %llu, expected %llu", (unsigned long long)lst("b/sub2/..").st_ino,
	      (unsigned long long)d2b.st_ino);
	content_is("dir across dirs: its children follow", "b/sub2/x", "x");
	times("dir across dirs: source dir", &db, "a", "mc", "");
	times("dir across dirs: target dir", &d2b, "b", "mc", "");
	times("dir across dirs: moved dir", &b, "b/sub2", "c", "m");

	/* over an existing target */
	setup(put("s", 0644, "new", 3) ?: put("t", 0644, "old", 3) ?: link("t", "t2"), "s t t2");
	tb = lst("t");
	b = lst("s");
	tick();
	fd = open("t", O_RDONLY);
	EXPECT("rename file over file", ROOT, 0, OP_RENAME, "s", "t");
	gone("file over file: source name gone", "s");
	check(lst("t").st_ino == b.st_ino, "file over file: target is the source", "differs");
	content_is("file over file: content", "t", "new");
	nlink_is("file over file: replaced inode loses a link", "t2", 1);
	times("file over file: replaced inode", &tb, "t2", "c", "m");
	check(fd >= 0 && pread(fd, buf, sizeof(buf), 0) == 3 && !memcmp(buf, "old", 3),
	      "file over file: replaced file still readable when open", "read failed");
	if (fd >= 0)
		close(fd);
	setup(mkdir("e1", 0755) ?: mkdir("e2", 0755), "e1 e2");
	pb = lst(".");
	b = lst("e1");
	EXPECT("rename dir over empty dir", ROOT, 0, OP_RENAME, "e1", "e2");
	check(lst("e2").st_ino == b.st_ino, "dir over empty dir: target is the source", "not so");
	nlink_is("dir over empty dir: parent nlink -1", ".", pb.st_nlink - 1);
	setup(mkdir("full", 0755) ?: put("full/x", 0644, NULL, 0) ?: mkdir("e3", 0755), "full e3");
	EXPECT("rename dir over non-empty dir", ROOT, ENOTEMPTY, OP_RENAME, "e3", "full");
	check(exists("full/x") && exists("e3"), "failed rename keeps both", "not so");
	EXPECT("rename file over dir", ROOT, EISDIR, OP_RENAME, "t", "e3");
	EXPECT("rename dir over file", ROOT, ENOTDIR, OP_RENAME, "e3", "t");
	EXPECT("rename dir into itself", ROOT, EINVAL, OP_RENAME, "full", "full/y");
	setup(mkdir("full/deep", 0755), "full/deep");
	EXPECT("rename dir into its subtree", ROOT, EINVAL, OP_RENAME, "full", "full/deep/y");
	EXPECT("rename dir onto its parent", ROOT, ENOTEMPTY, OP_RENAME, "full/deep", "full");
	EXPECT("rename missing", ROOT, ENOENT, OP_RENAME, "nothere", "x");
	EXPECT("rename into missing dir", ROOT, ENOENT, OP_RENAME, "t", "nodir/x");
	EXPECT("rename file with trailing slash on target", ROOT, ENOTDIR, OP_RENAME, "t", "x/");
	EXPECT("rename dir with trailing slashes", ROOT, 0, OP_RENAME, "e3/", "e4/");
	EXPECT("rename .", ROOT, EBUSY, OP_RENAME, "full/.", "x");
	EXPECT("rename onto .", ROOT, EBUSY, OP_RENAME, "t", "full/.");
	EXPECT("rename ..", ROOT, EBUSY, OP_RENAME, "full/deep/..", "x");
	setup(symlink("t", "sl"), "sl");
	EXPECT("rename symlink", ROOT, 0, OP_RENAME, "sl", "sl2");
	check(S_ISLNK(lst("sl2").st_mode) && readlink("sl2", buf, sizeof(buf)) == 1,
	      "rename symlink moves the link", "not so");
	check(S_ISREG(lst("t").st_mode), "rename symlink leaves the target", "not so");
	EXPECT("rename file over symlink", ROOT, 0, OP_RENAME, "t", "sl2");
	check(S_ISREG(lst("sl2").st_mode), "file over symlink replaces the link", "not so");

	/* permissions */
	setup(mkdir("w", 0777) ?: chmod("w", 0777) ?: mkdir("w/rd", 0755) ?:
				   mkdir("w/o", 0777) ?: chmod("w/o", 0777),
	      "w");
	setup(mkdir("ro", 0755) ?: put("ro/f", 0666, NULL, 0), "ro");
	EXPECT("rename out of 0755 dir as other", U1, EACCES, OP_RENAME, "ro/f", "w/f");
	EXPECT("rename into 0755 dir as other", U1, EACCES, OP_RENAME, "w/o", "ro/o");
	EXPECT("rename another's dir within a writable dir", U1, 0, OP_RENAME, "w/rd", "w/rd2");
	EXPECT("move another's dir to a new parent", U1, EACCES, OP_RENAME, "w/rd2", "w/o/rd");
	setup(chmod("w/rd2", 0777), "chmod rd2");
	EXPECT("move a writable dir to a new parent", U1, 0, OP_RENAME, "w/rd2", "w/o/rd");
	setup(mkdir("st", 0755) ?: chmod("st", 01777), "st");
	EXPECT("create in sticky", U1, 0, OP_OPEN, "st/a", .flags = O_CREAT | O_WRONLY,
	       .mode = 0666);
	EXPECT("create in sticky by other", U2, 0, OP_OPEN, "st/b", .flags = O_CREAT | O_WRONLY,
	       .mode = 0666);
	EXPECT("sticky: other cannot rename", U2, EPERM, OP_RENAME, "st/a", "st/c");
	EXPECT("sticky: cannot replace another's file", U2, EPERM, OP_RENAME, "st/b", "st/a");
	EXPECT("sticky: owner renames", U1, 0, OP_RENAME, "st/a", "st/c");
	EXPECT("sticky: root renames", ROOT, 0, OP_RENAME, "st/c", "st/a");
	EXPECT("create another in sticky", U1, 0, OP_OPEN, "st/a2", .flags = O_CREAT | O_WRONLY,
	       .mode = 0666);
	EXPECT("sticky: owner replaces own file", U1, 0, OP_RENAME, "st/a", "st/a2");

	/* renameat2 flags */
	setup(put("x1", 0644, "x1", 2) ?: put("x2", 0644, "x2", 2), "x1 x2");
	EXPECT("RENAME_NOREPLACE onto existing", ROOT, EEXIST, OP_RENAME, "x1", "x2",
	       .flags = RENAME_NOREPLACE);
	content_is("RENAME_NOREPLACE failure keeps the target", "x2", "x2");
	content_is("RENAME_NOREPLACE failure keeps the source", "x1", "x1");
	EXPECT("RENAME_NOREPLACE onto free name", ROOT, 0, OP_RENAME, "x1", "x3",
	       .flags = RENAME_NOREPLACE);
	content_is("RENAME_NOREPLACE moved", "x3", "x1");
	b = lst("x2");
	tb = lst("x3");
	pb = lst(".");
	tick();
	EXPECT("RENAME_EXCHANGE two files", ROOT, 0, OP_RENAME, "x2", "x3",
	       .flags = RENAME_EXCHANGE);
	content_is("RENAME_EXCHANGE swapped (1)", "x2", "x1");
	content_is("RENAME_EXCHANGE swapped (2)", "x3", "x2");
	check(lst("x3").st_ino == b.st_ino && lst("x2").st_ino == tb.st_ino,
	      "RENAME_EXCHANGE swapped inodes", "not so");
	times("RENAME_EXCHANGE parent", &pb, ".", "mc", "");
	times("RENAME_EXCHANGE first inode", &b, "x3", "c", "m");
	times("RENAME_EXCHANGE second inode", &tb, "x2", "c", "m");
	EXPECT("RENAME_EXCHANGE with missing target", ROOT, ENOENT, OP_RENAME, "x2", "nothere",
	       .flags = RENAME_EXCHANGE);
	EXPECT("RENAME_EXCHANGE|RENAME_NOREPLACE", ROOT, EINVAL, OP_RENAME, "x2", "x3",
	       .flags = RENAME_EXCHANGE | RENAME_NOREPLACE);
	setup(mkdir("xa", 0755) ?: mkdir("xb", 0755) ?: put("xa/f", 0644, "f", 1) ?:
				    mkdir("xb/d", 0755) ?: put("xb/d/in", 0644, "in", 2),
	      "xa xb");
	db = lst("xa");
	d2b = lst("xb");
	EXPECT("RENAME_EXCHANGE file and dir across dirs", ROOT, 0, OP_RENAME, "xa/f", "xb/d",
	       .flags = RENAME_EXCHANGE);
	check(S_ISDIR(lst("xa/f").st_mode) && S_ISREG(lst("xb/d").st_mode),
	      "RENAME_EXCHANGE file and dir: types swapped", "not so");
	content_is("RENAME_EXCHANGE: the dir's children follow", "xa/f/in", "in");
	nlink_is("RENAME_EXCHANGE: dir's new parent nlink +1", "xa", db.st_nlink + 1);
	nlink_is("RENAME_EXCHANGE: dir's old parent nlink -1", "xb", d2b.st_nlink - 1);
	check(lst("xa/f/..").st_ino == db.st_ino, "RENAME_EXCHANGE: the dir's .. follows",
	      "not so");
	EXPECT("RENAME_EXCHANGE dir into its own subtree", ROOT, EINVAL, OP_RENAME, "xa", "xa/f/in",
	       .flags = RENAME_EXCHANGE);
	EXPECT("RENAME_EXCHANGE onto itself", ROOT, 0, OP_RENAME, "xa/f", "xa/f",
	       .flags = RENAME_EXCHANGE);
}

/* ---- symlink ---- */

static void t_symlink(void)
{
	static char target[PATH_MAX + 8];
	char buf[PATH_MAX + 8];
	struct stat pb, s;
	struct timespec t0, t1;
	ssize_t n;

	area("symlink");
	setup(put("f", 0644, "file", 4) ?: mkdir("d", 0755) ?: put("d/in", 0644, "in", 2), "f d");
	pb = lst(".");
	tick();
	t0 = coarse_now();
	EXPECT("symlink", ROOT, 0, OP_SYMLINK, "f", "l");
	t1 = fine_now();
	s = lst("l");
	check(S_ISLNK(s.st_mode), "symlink type", "mode %o", (unsigned)s.st_mode);
	check((s.st_mode & 07777) == 0777, "symlink mode 0777", "mode %o", (unsigned)s.st_mode);
	check(s.st_size == 1, "symlink size is the target's length", "size %lld",
	      (long long)s.st_size);
	nlink_is("symlink nlink 1", "l", 1);
	times_within("symlink", "l", "amc", t0, t1);
	times("symlink parent", &pb, ".", "mc", "");
	s = lst("l");
	tick();
	n = readlink("l", buf, sizeof(buf));
	check(n == 1 && buf[0] == 'f', "readlink", "%zd", n);
	/* relatime: the first read of a new symlink sets its atime (found by difftest) */
	times("readlink of a new symlink (relatime)", &s, "l", mnt_noatime ? "" : "a", "mc");
	content_is("open follows the symlink", "l", "file");
	check(stat("l", &s) == 0 && S_ISREG(s.st_mode) && s.st_ino == lst("f").st_ino,
	      "stat follows the symlink", "not so");
	EXPECT("symlink as other", U1, 0, OP_SYMLINK, "d", "ul");
	owner_is("symlink owner is the caller", "ul", U1_ID, U1_ID);
	content_is("path through a symlink to a dir", "ul/in", "in");
	setup(mkdir("sub", 0755) ?: symlink("../f", "sub/up"), "sub/up");
	content_is("relative symlink resolves from its own dir", "sub/up", "file");

	EXPECT("dangling symlink", ROOT, 0, OP_SYMLINK, "nowhere", "dl");
	EXPECT("stat of dangling symlink", ROOT, ENOENT, OP_STAT, "dl");
	EXPECT("lstat of dangling symlink", ROOT, 0, OP_LSTAT, "dl");
	EXPECT("symlink onto existing file", ROOT, EEXIST, OP_SYMLINK, "x", "f");
	EXPECT("symlink onto existing dir", ROOT, EEXIST, OP_SYMLINK, "x", "d");
	EXPECT("symlink onto existing symlink", ROOT, EEXIST, OP_SYMLINK, "x", "dl");
	EXPECT("symlink with empty target", ROOT, ENOENT, OP_SYMLINK, "", "empty");
	setup(mkdir("ro", 0755), "ro");
	EXPECT("symlink in 0755 as other", U1, EACCES, OP_SYMLINK, "x", "ro/x");
	EXPECT("readlink of a file", ROOT, EINVAL, OP_READLINK, "f");
	EXPECT("readlink of a dir", ROOT, EINVAL, OP_READLINK, "d");
	check(readlink("dl", buf, 3) == 3 && !memcmp(buf, "now", 3),
	      "readlink truncates to the buffer", "not so");

	/* long targets: up to PATH_MAX - 1 bytes */
	for (size_t len = 1; len < PATH_MAX; len = len * 2 + 1) {
		for (size_t i = 0; i < len; i++)
			target[i] = 'a' + i % 26;
		target[len] = 0;
		EXPECT(nm("symlink target of %zu bytes", len), ROOT, 0, OP_SYMLINK, target, "long");
		n = readlink("long", buf, sizeof(buf));
		check(n == (ssize_t)len && !memcmp(buf, target, len),
		      nm("readlink target of %zu bytes", len), "read %zd bytes", n);
		size_is(nm("symlink size %zu", len), "long", len);
		setup(unlink("long"), "unlink long");
	}
	memset(target, 'b', PATH_MAX - 1);
	target[PATH_MAX - 1] = 0;
	EXPECT("symlink target of PATH_MAX - 1 bytes", ROOT, 0, OP_SYMLINK, target, "long");
	n = readlink("long", buf, sizeof(buf));
	check(n == PATH_MAX - 1 && !memcmp(buf, target, n), "readlink target of PATH_MAX - 1",
	      "read %zd", n);
	target[PATH_MAX - 1] = 'b';
	target[PATH_MAX] = 0;
	EXPECT("symlink target of PATH_MAX bytes", ROOT, ENAMETOOLONG, OP_SYMLINK, target, "l2");

	/* loops and the follow limit (40 on Linux) */
	setup(symlink("loop2", "loop1") ?: symlink("loop1", "loop2") ?: symlink("self", "self"),
	      "loops");
	EXPECT("stat of a two-link loop", ROOT, ELOOP, OP_STAT, "loop1");
	EXPECT("open of a two-link loop", ROOT, ELOOP, OP_OPEN, "loop1", .flags = O_RDONLY);
	EXPECT("open O_CREAT of a loop", ROOT, ELOOP, OP_OPEN, "loop1", .flags = O_CREAT | O_WRONLY,
	       .mode = 0644);
	EXPECT("stat of a self loop", ROOT, ELOOP, OP_STAT, "self");
	EXPECT("lstat of a loop", ROOT, 0, OP_LSTAT, "self");
	EXPECT("path through a loop", ROOT, ELOOP, OP_STAT, "loop1/x");
	EXPECT("unlink a loop", ROOT, 0, OP_UNLINK, "self");
	for (int i = 0; i < 40; i++)
		setup(symlink(i == 39 ? "f" : nm("c%d", i + 1), nm("c%d", i)), "chain");
	EXPECT("chain of 40 symlinks", ROOT, 0, OP_STAT, "c0");
	setup(symlink("c0", "c-1"), "c-1");
	EXPECT("chain of 41 symlinks", ROOT, ELOOP, OP_STAT, "c-1");

	/* lchown and times of the link itself */
	setup(symlink("f", "own"), "own");
	EXPECT("lchown a symlink", ROOT, 0, OP_LCHOWN, "own", .n = U1_ID, .m = U2_ID);
	owner_is("lchown changes the link", "own", U1_ID, U2_ID);
	owner_is("lchown leaves the target", "f", 0, 0);
	{
		struct timespec ts[2] = { { 1000000000, 1 }, { 1000000000, 2 } };

		EXPECT("utimensat AT_SYMLINK_NOFOLLOW", ROOT, 0, OP_UTIMES, "own", .ts = ts,
		       .flags = AT_SYMLINK_NOFOLLOW);
		s = lst("own");
		check(s.st_mtim.tv_sec == 1000000000 && s.st_mtim.tv_nsec == 2,
		      "utimensat AT_SYMLINK_NOFOLLOW sets the link's mtime", "%s",
		      tsstr(s.st_mtim));
		check(lst("f").st_mtim.tv_sec != 1000000000,
		      "utimensat AT_SYMLINK_NOFOLLOW leaves the target", "not so");
	}
}

/* ---- chmod, chown ---- */

static void t_chmod(void)
{
	struct stat b;
	int fd;

	area("chmod");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		if (!strcmp(t, "lnk"))
			continue;
		setup(mknode(t, "n", 0644), t);
		b = lst("n");
		tick();
		EXPECT(nm("chmod %s", t), ROOT, 0, OP_CHMOD, "n", .mode = 0751);
		mode_is(nm("chmod %s mode", t), "n", type_bits(t) | 0751);
		times(nm("chmod %s", t), &b, "n", "c", "m");
		EXPECT(nm("chmod %s by non-owner", t), U1, EPERM, OP_CHMOD, "n", .mode = 0777);
		mode_is(nm("failed chmod %s keeps mode", t), "n", type_bits(t) | 0751);
		setup(rmnode("n"), "rm n");
	}
	setup(put("f", 0644, NULL, 0), "f");
	EXPECT("chmod all bits", ROOT, 0, OP_CHMOD, "f", .mode = 07777);
	mode_is("chmod all bits mode", "f", S_IFREG | 07777);
	EXPECT("chmod 0", ROOT, 0, OP_CHMOD, "f", .mode = 0);
	mode_is("chmod 0 mode", "f", S_IFREG);
	setup(symlink("f", "l"), "l");
	EXPECT("chmod through a symlink", ROOT, 0, OP_CHMOD, "l", .mode = 0604);
	mode_is("chmod through a symlink changes the target", "f", S_IFREG | 0604);
	mode_is("chmod through a symlink leaves the link", "l", S_IFLNK | 0777);
	fd = open("f", O_RDONLY);
	check(fd >= 0 && !fchmod(fd, 0640), "fchmod", "%m");
	if (fd >= 0)
		close(fd);
	mode_is("fchmod mode", "f", S_IFREG | 0640);

	setup(put("u", 0644, NULL, 0) ?: chown("u", U1_ID, U1_ID), "u");
	EXPECT("owner chmods", U1, 0, OP_CHMOD, "u", .mode = 0600);
	EXPECT("other cannot chmod", U2, EPERM, OP_CHMOD, "u", .mode = 0666);
	EXPECT("group member cannot chmod", U3, EPERM, OP_CHMOD, "u", .mode = 0666);
	EXPECT("owner sets S_ISUID", U1, 0, OP_CHMOD, "u", .mode = 04755);
	mode_is("owner's S_ISUID kept", "u", S_IFREG | 04755);
	EXPECT("owner sets S_ISGID, own group", U1, 0, OP_CHMOD, "u", .mode = 02755);
	mode_is("owner's S_ISGID kept in own group", "u", S_IFREG | 02755);
	setup(chown("u", U1_ID, U2_ID), "chgrp u");
	EXPECT("owner sets S_ISGID, foreign group", U1, 0, OP_CHMOD, "u", .mode = 02755);
	mode_is("S_ISGID silently cleared in a foreign group", "u", S_IFREG | 0755);
	EXPECT("root sets S_ISGID, foreign group", ROOT, 0, OP_CHMOD, "u", .mode = 02755);
	mode_is("root's S_ISGID kept", "u", S_IFREG | 02755);
	setup(mkdir("ud", 0755) ?: chown("ud", U1_ID, U1_ID), "ud");
	EXPECT("owner sets the sticky bit on a dir", U1, 0, OP_CHMOD, "ud", .mode = 01777);
	mode_is("sticky bit on a dir", "ud", S_IFDIR | 01777);
	setup(put("ro", 0444, NULL, 0), "ro");
	EXPECT("root chmods a 0444 file", ROOT, 0, OP_CHMOD, "ro", .mode = 0);
	EXPECT("chmod of missing", ROOT, ENOENT, OP_CHMOD, "nothere", .mode = 0644);
}

static void t_chown(void)
{
	struct stat b;
	int fd;

	area("chown");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		setup(mknode(t, "n", 0644), t);
		b = lst("n");
		tick();
		EXPECT(nm("lchown %s", t), ROOT, 0, OP_LCHOWN, "n", .n = U1_ID, .m = U2_ID);
		owner_is(nm("lchown %s owner", t), "n", U1_ID, U2_ID);
		times(nm("lchown %s", t), &b, "n", "c", "m");
		EXPECT(nm("lchown %s to another uid by owner", t), U1, EPERM, OP_LCHOWN, "n",
		       .n = U2_ID, .m = -1);
		EXPECT(nm("lchown %s by other", t), U2, EPERM, OP_LCHOWN, "n", .n = -1, .m = U2_ID);
		EXPECT(nm("lchown %s to own group by owner", t), U1, 0, OP_LCHOWN, "n", .n = -1,
		       .m = U1_ID);
		owner_is(nm("lchown %s group by owner", t), "n", U1_ID, U1_ID);
		setup(rmnode("n"), "rm n");
	}
	setup(put("f", 0644, NULL, 0), "f");
	EXPECT("chown", ROOT, 0, OP_CHOWN, "f", .n = U1_ID, .m = U1_ID);
	EXPECT("chown -1 -1", ROOT, 0, OP_CHOWN, "f", .n = -1, .m = -1);
	owner_is("chown -1 -1 changes nothing", "f", U1_ID, U1_ID);
	EXPECT("chown uid only", ROOT, 0, OP_CHOWN, "f", .n = U2_ID, .m = -1);
	owner_is("chown uid only owner", "f", U2_ID, U1_ID);
	EXPECT("chown gid only", ROOT, 0, OP_CHOWN, "f", .n = -1, .m = U3_ID);
	owner_is("chown gid only owner", "f", U2_ID, U3_ID);
	EXPECT("chown to large ids", ROOT, 0, OP_CHOWN, "f", .n = 3000000000LL, .m = 3000000001LL);
	owner_is("chown to large ids owner", "f", 3000000000U, 3000000001U);
	setup(chown("f", U3_ID, U3_ID), "chown f");
	EXPECT("owner chgrps to a supplementary group", U3, 0, OP_CHOWN, "f", .n = -1, .m = U1_ID);
	owner_is("chgrp to supplementary group", "f", U3_ID, U1_ID);
	EXPECT("owner chgrps to a group not its own", U3, EPERM, OP_CHOWN, "f", .n = -1,
	       .m = G4_ID);
	EXPECT("owner chowns to itself", U3, 0, OP_CHOWN, "f", .n = U3_ID, .m = -1);
	EXPECT("owner gives the file away", U3, EPERM, OP_CHOWN, "f", .n = U1_ID, .m = -1);
	EXPECT("group member chgrps", U1, EPERM, OP_CHOWN, "f", .n = -1, .m = U1_ID);
	setup(symlink("f", "l"), "l");
	EXPECT("chown through a symlink", ROOT, 0, OP_CHOWN, "l", .n = U2_ID, .m = U2_ID);
	owner_is("chown through a symlink changes the target", "f", U2_ID, U2_ID);
	owner_is("chown through a symlink leaves the link", "l", 0, 0);
	fd = open("f", O_RDONLY);
	check(fd >= 0 && !fchown(fd, U1_ID, U2_ID), "fchown", "%m");
	if (fd >= 0)
		close(fd);
	owner_is("fchown owner", "f", U1_ID, U2_ID);

	/* set-id bits go when the owner changes */
	setup(chmod("f", 06755), "chmod 06755");
	EXPECT("owner chgrps a set-id file", U1, 0, OP_CHOWN, "f", .n = -1, .m = U1_ID);
	mode_is("chgrp by owner clears S_ISUID and S_ISGID", "f", S_IFREG | 0755);
	setup(chmod("f", 06755), "chmod 06755");
	EXPECT("root chowns a set-id file", ROOT, 0, OP_CHOWN, "f", .n = U2_ID, .m = U2_ID);
	mode_is("chown by root clears S_ISUID and S_ISGID", "f", S_IFREG | 0755);
	setup(chmod("f", 02745), "chmod 02745");
	EXPECT("root chowns an S_ISGID file without group exec", ROOT, 0, OP_CHOWN, "f", .n = U1_ID,
	       .m = -1);
	mode_is("S_ISGID without group exec is kept (mandatory locking bit)", "f", S_IFREG | 02745);
	setup(mkdir("d", 0755) ?: chmod("d", 06755), "d");
	EXPECT("root chowns a set-id dir", ROOT, 0, OP_CHOWN, "d", .n = U1_ID, .m = U1_ID);
	mode_is("chown of a dir keeps S_ISGID and S_ISUID", "d", S_IFDIR | 06755);
	EXPECT("chown of missing", ROOT, ENOENT, OP_CHOWN, "nothere", .n = 0, .m = 0);
}

/* ---- truncate, write, read ---- */

static void t_truncate(void)
{
	static char buf[65536];
	struct stat b, s;
	int fd;

	area("truncate");
	setup(put("f", 0644, "0123456789", 10), "f");
	b = lst("f");
	tick();
	EXPECT("truncate up", ROOT, 0, OP_TRUNCATE, "f", .n = 20000);
	size_is("truncate up size", "f", 20000);
	times("truncate up", &b, "f", "mc", "");
	check(get("f", buf, sizeof(buf)) == 20000 && !memcmp(buf, "0123456789", 10) &&
		      all_zero(buf + 10, 19990),
	      "truncate up: old data kept, zeros after", "content differs");
	b = lst("f");
	tick();
	EXPECT("truncate down", ROOT, 0, OP_TRUNCATE, "f", .n = 5);
	size_is("truncate down size", "f", 5);
	times("truncate down", &b, "f", "mc", "");
	content_is("truncate down content", "f", "01234");
	EXPECT("truncate up again", ROOT, 0, OP_TRUNCATE, "f", .n = 10);
	check(get("f", buf, sizeof(buf)) == 10 && !memcmp(buf, "01234\0\0\0\0\0", 10),
	      "truncate down then up: no stale data", "\"%.10s\"", buf);
	/* the same within a block that has been written out */
	memset(buf, 'q', sizeof(buf));
	setup(put("g", 0644, buf, sizeof(buf)), "g");
	fd = open("g", O_RDWR);
	check(fd >= 0 && !fsync(fd) && !ftruncate(fd, 1000) && !ftruncate(fd, 65536) &&
		      pread(fd, buf, sizeof(buf), 0) == 65536,
	      "ftruncate down and up", "%m");
	check(all_zero(buf + 1000, 64536), "ftruncate down and up after fsync: zeros past the cut",
	      "stale data");
	check(fd >= 0 && !ftruncate(fd, 0) && !fstat(fd, &s) && s.st_size == 0, "ftruncate to 0",
	      "%m");
	if (fd >= 0)
		close(fd);
	EXPECT("ftruncate", ROOT, 0, OP_FTRUNC, "f", .n = 3);
	size_is("ftruncate size", "f", 3);
	EXPECT("ftruncate on O_RDONLY fd", ROOT, EINVAL, OP_FTRUNC, "f", .n = 0,
	       .flags = O_RDONLY | O_CLOEXEC);
	EXPECT("truncate to 1 TiB (sparse)", ROOT, 0, OP_TRUNCATE, "f", .n = 1LL << 40);
	s = lst("f");
	check(s.st_size == 1LL << 40 && s.st_blocks < 1024, "1 TiB sparse file: size, few blocks",
	      "size %lld blocks %lld", (long long)s.st_size, (long long)s.st_blocks);
	EXPECT("truncate back to 0", ROOT, 0, OP_TRUNCATE, "f", .n = 0);
	EXPECT("truncate negative", ROOT, EINVAL, OP_TRUNCATE, "f", .n = -1);
	setup(mkdir("d", 0755), "d");
	EXPECT("truncate a dir", ROOT, EISDIR, OP_TRUNCATE, "d", .n = 0);
	EXPECT("truncate missing", ROOT, ENOENT, OP_TRUNCATE, "nothere", .n = 0);
	setup(put("p", 0644, "abc", 3), "p");
	EXPECT("truncate without write permission", U1, EACCES, OP_TRUNCATE, "p", .n = 0);
	size_is("failed truncate keeps size", "p", 3);
	setup(chmod("p", 0666), "chmod p");
	EXPECT("truncate with write permission", U1, 0, OP_TRUNCATE, "p", .n = 1);
	setup(chmod("p", 04777), "chmod p 04777");
	EXPECT("truncate of an S_ISUID file by other", U1, 0, OP_TRUNCATE, "p", .n = 2);
	mode_is("truncate by other clears S_ISUID", "p", S_IFREG | 0777);
	setup(chmod("p", 06777), "chmod p 06777");
	EXPECT("truncate of a set-id file by root", ROOT, 0, OP_TRUNCATE, "p", .n = 3);
	mode_is("truncate by root keeps set-id bits", "p", S_IFREG | 06777);
}

static void t_rw(void)
{
	char buf[64];
	struct stat b;
	int fd;

	area("write");
	setup(put("f", 0666, "abc", 3), "f");
	b = lst("f");
	tick();
	EXPECT("write", ROOT, 0, OP_WRITE, "f");
	times("write", &b, "f", "mc", "a");
	b = lst("f"); /* atime <= mtime now: a read must update it, even under relatime */
	tick();
	fd = open("f", O_RDONLY);
	check(fd >= 0 && read(fd, buf, sizeof(buf)) == 3, "read", "%m");
	if (fd >= 0)
		close(fd);
	times("read", &b, "f", "", "mc");
	if (!mnt_noatime)
		times("read after a write (relatime)", &b, "f", "a", "");
	b = lst("f"); /* atime after mtime and ctime now: relatime leaves it */
	tick();
	fd = open("f", O_RDONLY);
	check(fd >= 0 && read(fd, buf, sizeof(buf)) == 3, "read again", "%m");
	if (fd >= 0)
		close(fd);
	times("read again (relatime)", &b, "f", "", "amc");
	content_is("write at offset 0", "f", "xbc");
	b = lst("f");
	tick();
	fd = open("f", O_WRONLY);
	check(fd >= 0 && write(fd, "", 0) == 0, "write of 0 bytes", "%m");
	if (fd >= 0)
		close(fd);
	times("write of 0 bytes", &b, "f", "", "m");
	setup(chmod("f", 06777), "chmod 06777");
	EXPECT("write to a set-id file by other", U1, 0, OP_WRITE, "f");
	mode_is("write by other clears S_ISUID and S_ISGID", "f", S_IFREG | 0777);
	setup(chmod("f", 06777), "chmod 06777");
	EXPECT("write to a set-id file by root", ROOT, 0, OP_WRITE, "f");
	mode_is("write by root keeps set-id bits", "f", S_IFREG | 06777);
	setup(chmod("f", 0644), "chmod 0644");
	EXPECT("write without permission", U1, EACCES, OP_WRITE, "f");
	EXPECT("read with permission", U1, 0, OP_READ, "f");
	setup(chmod("f", 0), "chmod 0");
	EXPECT("read without permission", U1, EACCES, OP_READ, "f");

	/*
	 * S_ISGID without group exec: Linux (setattr_should_drop_sgid(), 6.x)
	 * drops it too when the writer, truncater or chowner is outside the
	 * file's group and lacks CAP_FSETID (found by difftest against ext4).
	 */
	setup(chmod("f", 02666), "chmod 02666");
	EXPECT("write to S_ISGID without group exec by a non-member", U1, 0, OP_WRITE, "f");
	mode_is("write by a non-member clears S_ISGID without group exec", "f", S_IFREG | 0666);
	setup(chmod("f", 02666), "chmod 02666");
	EXPECT("truncate of S_ISGID without group exec by a non-member", U1, 0, OP_TRUNCATE, "f",
	       .n = 1);
	mode_is("truncate by a non-member clears S_ISGID without group exec", "f", S_IFREG | 0666);
	setup(chmod("f", 06666), "chmod 06666");
	EXPECT("write to S_ISUID and S_ISGID without group exec by a non-member", U1, 0, OP_WRITE,
	       "f");
	mode_is("write by a non-member clears S_ISUID and S_ISGID without group exec", "f",
		S_IFREG | 0666);
	setup(chown("f", 0, U1_ID) ?: chmod("f", 02666), "chgrp U1, chmod 02666");
	EXPECT("write to S_ISGID without group exec by a member", U3, 0, OP_WRITE, "f");
	mode_is("write by a group member keeps S_ISGID without group exec", "f", S_IFREG | 02666);
	setup(chown("f", U1_ID, G4_ID) ?: chmod("f", 02646), "chown U1:G4, chmod 02646");
	EXPECT("owner chgrps S_ISGID without group exec from a foreign group", U1, 0, OP_CHOWN, "f",
	       .n = -1, .m = U1_ID);
	mode_is("chgrp by a non-member owner clears S_ISGID without group exec", "f",
		S_IFREG | 0646);
	/* chown_common() asks setattr_should_drop_sgid() for every non-directory (review15) */
	setup(mkfifo("sgfifo", 0) ?: chown("sgfifo", U1_ID, G4_ID) ?: chmod("sgfifo", 02646),
	      "fifo U1:G4 02646");
	EXPECT("owner chgrps a S_ISGID fifo from a foreign group", U1, 0, OP_CHOWN, "sgfifo",
	       .n = -1, .m = U1_ID);
	mode_is("chgrp of a fifo by a non-member owner clears S_ISGID without group exec", "sgfifo",
		S_IFIFO | 0646);
	setup(mkdir("sgdir", 0) ?: chown("sgdir", U1_ID, G4_ID) ?: chmod("sgdir", 02757),
	      "dir U1:G4 02757");
	EXPECT("owner chgrps a S_ISGID directory from a foreign group", U1, 0, OP_CHOWN, "sgdir",
	       .n = -1, .m = U1_ID);
	mode_is("chgrp of a directory keeps S_ISGID", "sgdir", S_IFDIR | 02757);
	setup(chown("f", 0, 0) ?: chmod("f", 02666), "chown 0:0, chmod 02666");
	EXPECT("write to S_ISGID without group exec by root", ROOT, 0, OP_WRITE, "f");
	mode_is("write by root keeps S_ISGID without group exec", "f", S_IFREG | 02666);

	/* open(O_TRUNC) truncates as truncate(2) does: set-id bits go alike (found by difftest) */
	setup(chmod("f", 06777), "chmod 06777");
	EXPECT("O_WRONLY|O_TRUNC of a set-id file by other", U1, 0, OP_OPEN, "f",
	       .flags = O_WRONLY | O_TRUNC);
	mode_is("O_TRUNC by other clears S_ISUID and S_ISGID", "f", S_IFREG | 0777);
	setup(chmod("f", 06766), "chmod 06766");
	EXPECT("O_RDONLY|O_TRUNC of a set-id file by other", U1, 0, OP_OPEN, "f",
	       .flags = O_RDONLY | O_TRUNC);
	mode_is("O_RDONLY|O_TRUNC by other clears S_ISUID and S_ISGID without group exec", "f",
		S_IFREG | 0766);
	setup(chmod("f", 06777), "chmod 06777");
	EXPECT("O_WRONLY|O_TRUNC of a set-id file by root", ROOT, 0, OP_OPEN, "f",
	       .flags = O_WRONLY | O_TRUNC);
	mode_is("O_TRUNC by root keeps set-id bits", "f", S_IFREG | 06777);
}

/* ---- utimensat ---- */

static void t_utimes(void)
{
	struct timespec ts[2], t0, t1;
	struct stat b, s;
	int fd;

	area("utimensat");
	setup(put("f", 0644, NULL, 0), "f");
	ts[0] = (struct timespec){ 1000000000, 123456789 };
	ts[1] = (struct timespec){ 1100000000, 987654321 };
	b = lst("f");
	tick();
	t0 = coarse_now();
	EXPECT("set both times", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	t1 = fine_now();
	s = lst("f");
	check(!tscmp(s.st_atim, ts[0]), "atime set to the nanosecond", "%s", tsstr(s.st_atim));
	check(!tscmp(s.st_mtim, ts[1]), "mtime set to the nanosecond", "%s", tsstr(s.st_mtim));
	times("set both times", &b, "f", "c", "");
	times_within("set both times", "f", "c", t0, t1);
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1] = (struct timespec){ 1200000000, 5 };
	EXPECT("UTIME_OMIT atime", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	s = lst("f");
	check(s.st_atim.tv_sec == 1000000000 && s.st_atim.tv_nsec == 123456789,
	      "UTIME_OMIT keeps atime", "%s", tsstr(s.st_atim));
	check(s.st_mtim.tv_sec == 1200000000 && s.st_mtim.tv_nsec == 5,
	      "mtime set with atime omitted", "%s", tsstr(s.st_mtim));
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_nsec = UTIME_OMIT;
	b = lst("f");
	tick();
	EXPECT("UTIME_OMIT both", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	times("UTIME_OMIT both", &b, "f", "", "amc");
	ts[0].tv_nsec = UTIME_NOW;
	ts[1].tv_nsec = UTIME_NOW;
	t0 = coarse_now();
	EXPECT("UTIME_NOW both", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	t1 = fine_now();
	times_within("UTIME_NOW", "f", "amc", t0, t1);
	t0 = coarse_now();
	EXPECT("NULL times", ROOT, 0, OP_UTIMES, "f");
	t1 = fine_now();
	times_within("NULL times", "f", "amc", t0, t1);
	fd = open("f", O_RDONLY);
	ts[0] = (struct timespec){ 1300000000, 0 };
	ts[1] = (struct timespec){ 1300000001, 0 };
	check(fd >= 0 && !futimens(fd, ts) && lst("f").st_mtim.tv_sec == 1300000001, "futimens",
	      "%m");
	if (fd >= 0)
		close(fd);

	/* far from now */
	ts[0] = (struct timespec){ (1LL << 32) + 100, 7 };    /* 2106 */
	ts[1] = (struct timespec){ 4102444800LL, 999999999 }; /* 2100-01-01 */
	EXPECT("times after 2038", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	s = lst("f");
	check(!tscmp(s.st_atim, ts[0]) && !tscmp(s.st_mtim, ts[1]), "times after 2038 kept",
	      "atime %s mtime %s", tsstr(s.st_atim), tsstr(s.st_mtim));
	ts[0] = (struct timespec){ -1000000, 0 }; /* 1969 */
	ts[1] = (struct timespec){ 0, 0 };
	EXPECT("times before 1970", ROOT, 0, OP_UTIMES, "f", .ts = ts);
	s = lst("f");
	check(!tscmp(s.st_atim, ts[0]) && !tscmp(s.st_mtim, ts[1]), "times before 1970 kept",
	      "atime %s mtime %s", tsstr(s.st_atim), tsstr(s.st_mtim));
	ts[0].tv_nsec = 1000000000;
	EXPECT("tv_nsec out of range", ROOT, EINVAL, OP_UTIMES, "f", .ts = ts);

	/* who may: the owner sets any time; a writer only "now" */
	setup(chown("f", U1_ID, U1_ID) ?: chmod("f", 0666), "chown f");
	ts[0] = (struct timespec){ 1000000000, 0 };
	ts[1] = (struct timespec){ 1000000000, 0 };
	EXPECT("owner sets times", U1, 0, OP_UTIMES, "f", .ts = ts);
	EXPECT("writer sets explicit times", U2, EPERM, OP_UTIMES, "f", .ts = ts);
	EXPECT("writer sets NULL times", U2, 0, OP_UTIMES, "f");
	ts[0].tv_nsec = UTIME_NOW;
	ts[1].tv_nsec = UTIME_NOW;
	EXPECT("writer sets UTIME_NOW", U2, 0, OP_UTIMES, "f", .ts = ts);
	ts[1].tv_nsec = 0;
	EXPECT("writer sets UTIME_NOW and an explicit mtime", U2, EPERM, OP_UTIMES, "f", .ts = ts);
	setup(chmod("f", 0644), "chmod f");
	EXPECT("non-writer sets NULL times", U2, EACCES, OP_UTIMES, "f");
	EXPECT("non-writer sets explicit times", U2, EPERM, OP_UTIMES, "f", .ts = ts);
	EXPECT("owner without write sets NULL times", U1, 0, OP_UTIMES, "f");
	EXPECT("utimensat of missing", ROOT, ENOENT, OP_UTIMES, "nothere");
}

/* ---- fifos, sockets, device nodes ---- */

static void t_nodes(void)
{
	struct stat pb, s;
	char buf[8];
	int fd;

	area("mknod");
	pb = lst(".");
	tick();
	EXPECT("mkfifo", ROOT, 0, OP_MKFIFO, "fifo", .mode = 0640);
	mode_is("mkfifo mode", "fifo", S_IFIFO | 0640);
	times("mkfifo parent", &pb, ".", "mc", "");
	EXPECT("mkfifo on existing", ROOT, EEXIST, OP_MKFIFO, "fifo", .mode = 0640);
	EXPECT("mkfifo as other", U1, 0, OP_MKFIFO, "ufifo", .mode = 0666);
	owner_is("mkfifo owner", "ufifo", U1_ID, U1_ID);
	mode_is("mkfifo umask", "ufifo", S_IFIFO | 0644);
	fd = open("fifo", O_RDWR);
	check(fd >= 0 && write(fd, "pipe", 4) == 4 && read(fd, buf, sizeof(buf)) == 4 &&
		      !memcmp(buf, "pipe", 4),
	      "fifo carries data", "%m");
	if (fd >= 0)
		close(fd);
	size_is("fifo size stays 0", "fifo", 0);

	pb = lst(".");
	tick();
	EXPECT("mknod char", ROOT, 0, OP_MKNOD, "chr", .mode = S_IFCHR | 0644, .n = makedev(1, 3));
	s = lst("chr");
	check(S_ISCHR(s.st_mode) && major(s.st_rdev) == 1 && minor(s.st_rdev) == 3,
	      "char node type and rdev 1:3", "mode %o rdev %u:%u", (unsigned)s.st_mode,
	      major(s.st_rdev), minor(s.st_rdev));
	times("mknod parent", &pb, ".", "mc", "");
	EXPECT("mknod block", ROOT, 0, OP_MKNOD, "blk", .mode = S_IFBLK | 0600,
	       .n = makedev(7, 250));
	s = lst("blk");
	check(S_ISBLK(s.st_mode) && major(s.st_rdev) == 7 && minor(s.st_rdev) == 250,
	      "block node type and rdev 7:250", "mode %o rdev %u:%u", (unsigned)s.st_mode,
	      major(s.st_rdev), minor(s.st_rdev));
	EXPECT("mknod with a large rdev", ROOT, 0, OP_MKNOD, "big", .mode = S_IFCHR | 0600,
	       .n = makedev(4000, 1000000));
	s = lst("big");
	check(major(s.st_rdev) == 4000 && minor(s.st_rdev) == 1000000, "large rdev 4000:1000000",
	      "rdev %u:%u", major(s.st_rdev), minor(s.st_rdev));
	EXPECT("mknod regular", ROOT, 0, OP_MKNOD, "reg", .mode = S_IFREG | 0600);
	mode_is("mknod regular makes a file", "reg", S_IFREG | 0600);
	EXPECT("mknod without a type", ROOT, 0, OP_MKNOD, "reg0", .mode = 0600);
	mode_is("mknod without a type makes a file", "reg0", S_IFREG | 0600);
	EXPECT("mknod fifo", ROOT, 0, OP_MKNOD, "fifo2", .mode = S_IFIFO | 0600);
	mode_is("mknod fifo mode", "fifo2", S_IFIFO | 0600);
	EXPECT("mknod dir", ROOT, EPERM, OP_MKNOD, "dir", .mode = S_IFDIR | 0755);
	EXPECT("mknod char as other", U1, EPERM, OP_MKNOD, "uchr", .mode = S_IFCHR | 0644,
	       .n = makedev(1, 3));
	EXPECT("mknod on existing", ROOT, EEXIST, OP_MKNOD, "chr", .mode = S_IFCHR | 0644,
	       .n = makedev(1, 3));
	/* a device node opens the device unless the mount says nodev */
	EXPECT(mnt_nodev ? "open a device node on a nodev mount" : "open a device node", ROOT,
	       mnt_nodev ? EACCES : 0, OP_WRITE, "chr");

	EXPECT("bind a unix socket", ROOT, 0, OP_BIND, "sock");
	s = lst("sock");
	check(S_ISSOCK(s.st_mode), "socket type", "mode %o", (unsigned)s.st_mode);
	EXPECT("bind onto an existing socket", ROOT, EADDRINUSE, OP_BIND, "sock");
	{
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		int l = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(sun.sun_path, sizeof(sun.sun_path), "live");
		check(l >= 0 && c >= 0 && !bind(l, (struct sockaddr *)&sun, sizeof(sun)) &&
			      !listen(l, 1) && !connect(c, (struct sockaddr *)&sun, sizeof(sun)),
		      "connect through a socket node", "%m");
		if (l >= 0)
			close(l);
		if (c >= 0)
			close(c);
	}
	EXPECT("unlink a socket", ROOT, 0, OP_UNLINK, "sock");
	EXPECT("rename a fifo", ROOT, 0, OP_RENAME, "fifo", "fifo3");
	mode_is("renamed fifo keeps its type", "fifo3", S_IFIFO | 0640);
	EXPECT("rename a device", ROOT, 0, OP_RENAME, "blk", "blk2");
	s = lst("blk2");
	check(S_ISBLK(s.st_mode) && s.st_rdev == makedev(7, 250), "renamed device keeps rdev",
	      "not so");
}

/* ---- posix_fallocate ---- */

static void t_fallocate(void)
{
	static char buf[1 << 20];
	struct stat b, s;
	int fd;

	area("fallocate");
	setup(put("f", 0644, NULL, 0), "f");
	b = lst("f");
	tick();
	EXPECT("posix_fallocate 1 MiB", ROOT, 0, OP_FALLOC, "f", .n = 1 << 20);
	s = lst("f");
	check(s.st_size == 1 << 20, "posix_fallocate extends the size", "%lld",
	      (long long)s.st_size);
	check(s.st_blocks * 512 >= 1 << 20, "posix_fallocate allocates blocks", "%lld blocks",
	      (long long)s.st_blocks);
	times("posix_fallocate extending", &b, "f", "mc", "");
	check(get("f", buf, sizeof(buf)) == (1 << 20) - 1 && all_zero(buf, (1 << 20) - 1),
	      "posix_fallocate reads zeros", "not so");
	setup(put("g", 0644, "keep", 4), "g");
	fd = open("g", O_RDWR);
	check(fd >= 0 && !posix_fallocate(fd, 2, 100000), "posix_fallocate over data", "not so");
	if (fd >= 0)
		close(fd);
	size_is("posix_fallocate over data size", "g", 100002);
	check(get("g", buf, 5) == 4 && !memcmp(buf, "keep", 4), "posix_fallocate keeps data",
	      "not so");
	fd = open("g", O_RDWR);
	check(fd >= 0 && !posix_fallocate(fd, 0, 10) && lst("g").st_size == 100002,
	      "posix_fallocate inside the file keeps the size", "not so");
	if (fd >= 0) {
		s = lst("g");
		check(!fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20) &&
			      lst("g").st_size == 100002 && lst("g").st_blocks > s.st_blocks,
		      "fallocate KEEP_SIZE allocates without growing", "%m");
		close(fd);
	}
	EXPECT("posix_fallocate on O_RDONLY fd", ROOT, EBADF, OP_FALLOC, "g", .n = 10,
	       .flags = O_RDONLY | O_CLOEXEC);
	EXPECT("posix_fallocate of length 0", ROOT, EINVAL, OP_FALLOC, "g", .n = 0);
	setup(mkfifo("p", 0644), "p");
	EXPECT("posix_fallocate on a fifo", ROOT, ESPIPE, OP_FALLOC, "p", .n = 10, .flags = O_RDWR);
}

/* ---- extended attributes (user namespace) ---- */

static void t_xattr(void)
{
	char buf[8192], val[3001];
	struct stat b;
	ssize_t n;
	bool seen_a, seen_b;

	area("xattr");
	setup(put("f", 0644, NULL, 0), "f");
	b = lst("f");
	tick();
	EXPECT("setxattr", ROOT, 0, OP_SETXATTR, "f", "user.a", .val = "v1");
	times("setxattr", &b, "f", "c", "m");
	n = getxattr("f", "user.a", buf, sizeof(buf));
	check(n == 2 && !memcmp(buf, "v1", 2), "getxattr reads it back", "%zd", n);
	check(getxattr("f", "user.a", NULL, 0) == 2, "getxattr size query", "not so");
	n = getxattr("f", "user.a", buf, 1);
	check(n < 0 && errno == ERANGE, "getxattr small buffer ERANGE", "%zd %m", n);
	EXPECT("XATTR_CREATE on existing", ROOT, EEXIST, OP_SETXATTR, "f", "user.a", .val = "v2",
	       .flags = XATTR_CREATE);
	EXPECT("XATTR_REPLACE on missing", ROOT, ENODATA, OP_SETXATTR, "f", "user.b", .val = "v2",
	       .flags = XATTR_REPLACE);
	EXPECT("XATTR_CREATE on missing", ROOT, 0, OP_SETXATTR, "f", "user.b", .val = "bee",
	       .flags = XATTR_CREATE);
	EXPECT("XATTR_REPLACE on existing", ROOT, 0, OP_SETXATTR, "f", "user.a",
	       .val = "longer value", .flags = XATTR_REPLACE);
	n = getxattr("f", "user.a", buf, sizeof(buf));
	check(n == 12 && !memcmp(buf, "longer value", 12), "XATTR_REPLACE value", "%zd", n);
	/* Both flags: each applies (ext4, tmpfs), not EINVAL; nothing changes. */
	EXPECT("XATTR_CREATE|XATTR_REPLACE on existing", ROOT, EEXIST, OP_SETXATTR, "f", "user.a",
	       .val = "both", .flags = XATTR_CREATE | XATTR_REPLACE);
	EXPECT("XATTR_CREATE|XATTR_REPLACE on missing", ROOT, ENODATA, OP_SETXATTR, "f",
	       "user.none", .val = "both", .flags = XATTR_CREATE | XATTR_REPLACE);
	n = getxattr("f", "user.a", buf, sizeof(buf));
	check(n == 12 && !memcmp(buf, "longer value", 12),
	      "XATTR_CREATE|XATTR_REPLACE changes nothing", "%zd", n);
	EXPECT("getxattr missing", ROOT, ENODATA, OP_GETXATTR, "f", "user.none");
	n = listxattr("f", buf, sizeof(buf));
	seen_a = seen_b = false;
	for (ssize_t i = 0; n > 0 && i < n; i += strlen(buf + i) + 1) {
		seen_a |= !strcmp(buf + i, "user.a");
		seen_b |= !strcmp(buf + i, "user.b");
	}
	check(seen_a && seen_b, "listxattr lists both", "a %d b %d", seen_a, seen_b);
	check(listxattr("f", NULL, 0) == n, "listxattr size query", "not so");
	n = listxattr("f", buf, 3);
	check(n < 0 && errno == ERANGE, "listxattr small buffer ERANGE", "%zd", n);
	b = lst("f");
	tick();
	EXPECT("removexattr", ROOT, 0, OP_REMOVEXATTR, "f", "user.b");
	times("removexattr", &b, "f", "c", "m");
	EXPECT("getxattr after remove", ROOT, ENODATA, OP_GETXATTR, "f", "user.b");
	EXPECT("removexattr missing", ROOT, ENODATA, OP_REMOVEXATTR, "f", "user.b");
	/* The VFS makes it setting an empty ACL: no error when there is none (ext4, tmpfs). */
	EXPECT("removexattr of a missing ACL", ROOT, 0, OP_REMOVEXATTR, "f",
	       "system.posix_acl_access");
	EXPECT("empty value", ROOT, 0, OP_SETXATTR, "f", "user.empty", .val = "");
	check(getxattr("f", "user.empty", buf, sizeof(buf)) == 0, "empty value reads back empty",
	      "not so");
	memset(val, 'v', sizeof(val) - 1);
	val[sizeof(val) - 1] = 0;
	EXPECT("3000-byte value", ROOT, 0, OP_SETXATTR, "f", "user.big", .val = val);
	n = getxattr("f", "user.big", buf, sizeof(buf));
	check(n == 3000 && !memcmp(buf, val, 3000), "3000-byte value reads back", "%zd", n);
	setup(put("many", 0644, NULL, 0), "many");
	for (int i = 0; i < 40; i++)
		setup(setxattr("many", nm("user.attr%02d", i), nm("value%d", i),
			       strlen(nm("value%d", i)), 0),
		      "many xattrs");
	n = listxattr("many", buf, sizeof(buf));
	{
		int count = 0;

		for (ssize_t i = 0; n > 0 && i < n; i += strlen(buf + i) + 1)
			count += !strncmp(buf + i, "user.attr", 9);
		check(count == 40, "40 xattrs listed", "%d", count);
	}
	n = getxattr("many", "user.attr17", buf, sizeof(buf));
	check(n == 7 && !memcmp(buf, "value17", 7), "one of 40 xattrs reads back", "%zd", n);
	EXPECT("name of 255 bytes", ROOT, 0, OP_SETXATTR, "f", nm("user.%s", longname(250, 'n')),
	       .val = "x");
	EXPECT("name of 256 bytes", ROOT, ERANGE, OP_SETXATTR, "f",
	       nm("user.%s", longname(251, 'n')), .val = "x");
	EXPECT("unknown namespace", ROOT, EOPNOTSUPP, OP_SETXATTR, "f", "nonamespace.x",
	       .val = "x");

	setup(mkdir("d", 0755) ?: symlink("f", "l") ?: mkfifo("p", 0644), "d l p");
	EXPECT("user xattr on a dir", ROOT, 0, OP_SETXATTR, "d", "user.d", .val = "dir");
	EXPECT("user xattr on a symlink", ROOT, EPERM, OP_LSETXATTR, "l", "user.l", .val = "x");
	EXPECT("user xattr on a fifo", ROOT, EPERM, OP_SETXATTR, "p", "user.p", .val = "x");
	EXPECT("setxattr through a symlink", ROOT, 0, OP_SETXATTR, "l", "user.via", .val = "x");
	check(getxattr("f", "user.via", buf, sizeof(buf)) == 1,
	      "setxattr through a symlink sets the target's", "not so");
	EXPECT("setxattr without write permission", U1, EACCES, OP_SETXATTR, "f", "user.u",
	       .val = "x");
	EXPECT("getxattr with read permission", U1, 0, OP_GETXATTR, "f", "user.a");
	setup(chmod("f", 0600), "chmod f");
	EXPECT("getxattr without read permission", U1, EACCES, OP_GETXATTR, "f", "user.a");
	setup(chmod("f", 0666), "chmod f");
	EXPECT("setxattr with write permission", U1, 0, OP_SETXATTR, "f", "user.u", .val = "x");
	EXPECT("removexattr with write permission", U1, 0, OP_REMOVEXATTR, "f", "user.u");

	setup(link("f", "f2") ?: rename("f", "f3"), "link, rename");
	n = getxattr("f2", "user.a", buf, sizeof(buf));
	check(n == 12, "hard links share xattrs", "%zd", n);
	n = getxattr("f3", "user.big", buf, sizeof(buf));
	check(n == 3000, "xattrs survive rename", "%zd", n);
	setup(unlink("f3") ?: put("f4", 0644, NULL, 0), "recreate");
	n = getxattr("f2", "user.big", buf, sizeof(buf));
	check(n == 3000, "xattrs survive unlink of one link", "%zd", n);
	n = listxattr("f4", buf, sizeof(buf));
	{
		int count = 0;

		for (ssize_t i = 0; n > 0 && i < n; i += strlen(buf + i) + 1)
			count += !strncmp(buf + i, "user.", 5);
		check(n >= 0 && count == 0, "a new file has no user xattrs", "%zd, %d", n, count);
	}
}

/* ---- statvfs ---- */

static void t_statvfs(void)
{
	static char buf[1 << 20];
	struct statvfs v, w, x;
	int fd;

	area("statvfs");
	check(!statvfs(".", &v), "statvfs", "%m");
	check(v.f_bsize > 0 && v.f_frsize > 0, "block sizes positive", "bsize %lu frsize %lu",
	      v.f_bsize, v.f_frsize);
	check(v.f_blocks > 0 && v.f_bfree <= v.f_blocks && v.f_bavail <= v.f_bfree,
	      "blocks >= free >= available", "%llu %llu %llu", (unsigned long long)v.f_blocks,
	      (unsigned long long)v.f_bfree, (unsigned long long)v.f_bavail);
	check(v.f_ffree <= v.f_files, "files >= free files", "%llu %llu",
	      (unsigned long long)v.f_files, (unsigned long long)v.f_ffree);
	check(v.f_namemax >= 255, "name max at least 255", "%lu", v.f_namemax);
	fd = open(".", O_RDONLY | O_DIRECTORY);
	check(fd >= 0 && !fstatvfs(fd, &w) && w.f_blocks == v.f_blocks &&
		      w.f_namemax == v.f_namemax,
	      "fstatvfs agrees", "not so");
	if (fd >= 0)
		close(fd);
	/* 8 MiB written and synced are taken from the free blocks, and given back */
	memset(buf, 0x5a, sizeof(buf));
	fd = open("big", O_CREAT | O_WRONLY, 0644);
	for (int i = 0; fd >= 0 && i < 8; i++)
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			break;
	check(fd >= 0 && !fsync(fd) && !close(fd), "write 8 MiB", "%m");
	sync();
	statvfs(".", &w);
	check(((long long)v.f_bfree - (long long)w.f_bfree) * (long long)v.f_frsize >= 7 << 20,
	      "8 MiB written: free blocks drop by at least 7 MiB", "dropped by %lld bytes",
	      ((long long)v.f_bfree - (long long)w.f_bfree) * (long long)v.f_frsize);
	check(unlink("big") == 0, "unlink 8 MiB", "%m");
	sync();
	statvfs(".", &x);
	check(((long long)x.f_bfree - (long long)w.f_bfree) * (long long)v.f_frsize >= 7 << 20,
	      "8 MiB deleted: free blocks rise by at least 7 MiB", "rose by %lld bytes",
	      ((long long)x.f_bfree - (long long)w.f_bfree) * (long long)v.f_frsize);
	if (v.f_files) {
		check(!statvfs(".", &v), "statvfs again", "not so");
		for (int i = 0; i < 20; i++)
			setup(put(nm("i%d", i), 0644, NULL, 0), "files");
		statvfs(".", &w);
		check((long long)v.f_ffree - (long long)w.f_ffree >= 20,
		      "20 files created: free inodes drop by 20", "dropped by %lld",
		      (long long)v.f_ffree - (long long)w.f_ffree);
	}
}

/* ---- readdir ---- */

struct seen {
	char **names;
	int *count;
	int n;
};

static int seen_idx(struct seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name))
			return i;
	return -1;
}

/* Reads the whole of dir: every name and how often it came. */
static int read_all(const char *dir, struct seen *s, int cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	s->names = calloc(cap, sizeof(*s->names));
	s->count = calloc(cap, sizeof(*s->count));
	s->n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int i = seen_idx(s, e->d_name);

		if (i < 0 && s->n < cap) {
			i = s->n++;
			s->names[i] = strdup(e->d_name);
		}
		if (i >= 0)
			s->count[i]++;
	}
	closedir(d);
	return 0;
}

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s->count);
}

/*
 * A listing resumed at a position saved by telldir() in an earlier listing
 * (a new opendir, then seekdir) shows the directory as it is now: a name
 * removed since is not returned (ext4: the next name still there is).
 * Through FUSE with the kernel's listing cache, a new open that kept a
 * cache filled before the removals served the removed names from it.
 */
static void t_readdir_seek_removed(void)
{
	enum {
		N = 300
	};
	static long pos[N];
	static bool gone_[N];
	char name[32];
	struct dirent *e;
	DIR *d;
	int stale = 0, listed = 0;

	area("readdir");
	if (!setup(mkdir("sk", 0755), "sk"))
		return;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "sk/e%03d", i);
		if (!setup(put(name, 0644, NULL, 0), name))
			return;
	}
	d = opendir("sk");
	if (!setup(d ? 0 : -1, "opendir sk"))
		return;
	for (;;) {
		long p = telldir(d);

		if (!(e = readdir(d)))
			break;
		if (e->d_name[0] == 'e')
			pos[atoi(e->d_name + 1)] = p;
	}
	closedir(d);
	for (int i = 0; i < N; i += 2) {
		snprintf(name, sizeof(name), "sk/e%03d", i);
		gone_[i] = !unlink(name);
	}
	d = opendir("sk");
	if (!setup(d ? 0 : -1, "opendir sk again"))
		return;
	for (int i = 0; i < N; i += 2) {
		seekdir(d, pos[i]);
		e = readdir(d);
		listed += !!e;
		if (e && e->d_name[0] == 'e' && gone_[atoi(e->d_name + 1)])
			stale++;
	}
	closedir(d);
	check(!stale, "seekdir to a removed name's place in a new listing: no removed name",
	      "%d of %d resumed listings began with a removed name", stale, listed);
}

static void t_readdir(void)
{
	struct seen s;
	struct dirent *e;
	DIR *d;
	int bad, dups, missing;
	long pos;
	char first[NAME_MAX + 1];

	area("readdir");
	setup(mkdir("empty", 0755), "empty");
	{
		struct stat b = lst("empty"); /* atime == mtime: a listing updates it */

		tick();
		read_all("empty", &s, 8);
		seen_free(&s);
		if (!mnt_noatime)
			times("listing a new dir (relatime)", &b, "empty", "a", "mc");
		b = lst("empty");
		tick();
		read_all("empty", &s, 8);
		seen_free(&s);
		times("listing it again (relatime)", &b, "empty", "", "amc");
	}
	read_all("empty", &s, 8);
	check(s.n == 2 && seen_idx(&s, ".") >= 0 && seen_idx(&s, "..") >= 0,
	      "empty dir lists . and .. only", "%d names", s.n);
	seen_free(&s);
	d = opendir("empty");
	bad = 0;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") && e->d_ino != lst("empty").st_ino)
			bad++;
	}
	if (d)
		closedir(d);
	check(!bad, ". has the dir's inode number", "not so");

	/* every entry once, with its type */
	setup(mkdir("d", 0755), "d");
	for (int i = 0; i < 600; i++)
		setup(put(nm("d/file%03d", i), 0644, NULL, 0), "files");
	setup(mkdir("d/sub", 0755) ?: symlink("x", "d/link") ?: mkfifo("d/fifo", 0644), "others");
	read_all("d", &s, 1000);
	bad = dups = 0;
	for (int i = 0; i < 600; i++) {
		int k = seen_idx(&s, nm("file%03d", i));

		bad += k < 0;
		dups += k >= 0 && s.count[k] > 1;
	}
	check(!bad && !dups && s.n == 605, "600 files: each listed once",
	      "%d missing, %d twice, %d names", bad, dups, s.n);
	seen_free(&s);
	d = opendir("d");
	bad = 0;
	while (d && (e = readdir(d))) {
		struct stat st = lst(nm("d/%s", e->d_name));
		unsigned char want = S_ISDIR(st.st_mode)    ? DT_DIR
				     : S_ISLNK(st.st_mode)  ? DT_LNK
				     : S_ISFIFO(st.st_mode) ? DT_FIFO
							    : DT_REG;

		if (e->d_type != DT_UNKNOWN && e->d_type != want)
			bad++;
		if (strcmp(e->d_name, "..") && e->d_ino != st.st_ino)
			bad++;
	}
	if (d)
		closedir(d);
	check(!bad, "d_type and d_ino match lstat", "%d differ", bad);
	nlink_is("dir nlink is 2 + subdirs", "d", 3);

	/* telldir/seekdir come back to the same entry */
	d = opendir("d");
	for (int i = 0; d && i < 100; i++)
		readdir(d);
	pos = d ? telldir(d) : -1;
	e = d ? readdir(d) : NULL;
	snprintf(first, sizeof(first), "%s", e ? e->d_name : "");
	for (int i = 0; d && i < 50; i++)
		readdir(d);
	if (d)
		seekdir(d, pos);
	e = d ? readdir(d) : NULL;
	check(e && !strcmp(e->d_name, first), "seekdir to a telldir position", "%s vs %s",
	      e ? e->d_name : "(end)", first);
	/* rewinddir sees a new entry */
	setup(put("d/late", 0644, NULL, 0), "late");
	if (d)
		rewinddir(d);
	bad = 1;
	while (d && (e = readdir(d)))
		if (!strcmp(e->d_name, "late"))
			bad = 0;
	if (d)
		closedir(d);
	check(!bad, "rewinddir sees an entry added since opendir", "not so");

	/* deleting half: exactly the rest is listed */
	for (int i = 0; i < 600; i += 2)
		setup(unlink(nm("d/file%03d", i)), "unlink half");
	read_all("d", &s, 1000);
	bad = 0;
	for (int i = 0; i < 600; i++)
		bad += (seen_idx(&s, nm("file%03d", i)) >= 0) != (i % 2 == 1);
	check(!bad, "after deleting half: exactly the others listed", "%d wrong", bad);
	seen_free(&s);

	/* changing while reading: what was neither added nor removed comes exactly once */
	d = opendir("d");
	memset(&s, 0, sizeof(s));
	s.names = calloc(2000, sizeof(*s.names));
	s.count = calloc(2000, sizeof(*s.count));
	for (int i = 0; d && i < 120 && (e = readdir(d)); i++) {
		int k = seen_idx(&s, e->d_name);

		if (k < 0 && s.n < 2000) {
			k = s.n++;
			s.names[k] = strdup(e->d_name);
		}
		if (k >= 0)
			s.count[k]++;
	}
	for (int i = 1; i < 200; i += 4)
		setup(unlink(nm("d/file%03d", i)), "unlink while reading");
	for (int i = 0; i < 200; i++)
		setup(put(nm("d/new%03d", i), 0644, NULL, 0), "create while reading");
	while (d && (e = readdir(d))) {
		int k = seen_idx(&s, e->d_name);

		if (k < 0 && s.n < 2000) {
			k = s.n++;
			s.names[k] = strdup(e->d_name);
		}
		if (k >= 0)
			s.count[k]++;
	}
	if (d)
		closedir(d);
	dups = missing = bad = 0;
	for (int i = 1; i < 600; i += 2) {
		int k = seen_idx(&s, nm("file%03d", i));

		if (i < 200 && (i - 1) % 4 == 0)
			continue; /* removed while reading */
		missing += k < 0;
	}
	for (int i = 0; i < s.n; i++) {
		dups += s.count[i] > 1;
		bad += strncmp(s.names[i], "file", 4) && strncmp(s.names[i], "new", 3) &&
		       strcmp(s.names[i], ".") && strcmp(s.names[i], "..") &&
		       strcmp(s.names[i], "sub") && strcmp(s.names[i], "link") &&
		       strcmp(s.names[i], "fifo") && strcmp(s.names[i], "late");
	}
	check(!missing, "changing while reading: untouched entries all listed", "%d missing",
	      missing);
	check(!dups, "changing while reading: no entry listed twice", "%d twice", dups);
	check(!bad, "changing while reading: no unknown names", "%d unknown", bad);
	seen_free(&s);
	read_all("d", &s, 2000);
	bad = 0;
	for (int i = 0; i < 200; i++)
		bad += seen_idx(&s, nm("new%03d", i)) < 0;
	check(!bad, "after the change: new entries listed", "%d missing", bad);
	seen_free(&s);

	/* many subdirectories */
	setup(mkdir("m", 0755), "m");
	for (int i = 0; i < 50; i++)
		setup(mkdir(nm("m/s%d", i), 0755), "subdirs");
	nlink_is("50 subdirs: nlink 52", "m", 52);
	for (int i = 0; i < 50; i += 2)
		setup(rmdir(nm("m/s%d", i)), "rmdir subdirs");
	nlink_is("25 subdirs left: nlink 27", "m", 27);
	setup(chmod("m", 0711), "chmod m");
	EXPECT("opendir without read permission", U1, EACCES, OP_OPENDIR, "m");
	EXPECT("stat inside with search permission", U1, 0, OP_STAT, "m/s1");
	setup(chmod("m", 0744), "chmod m");
	EXPECT("opendir with read permission", U1, 0, OP_OPENDIR, "m");
	EXPECT("stat inside without search permission", U1, EACCES, OP_STAT, "m/s1");
	EXPECT("opendir a file", ROOT, ENOTDIR, OP_OPENDIR, "d/late");
}

/* ---- names: the error every path-taking call must give, long names, PATH_MAX ---- */

static struct op path_op(int i, const char *p)
{
	static const struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };

	switch (i) {
	case 0:
		return (struct op){ OP_OPEN, p, .flags = O_RDONLY };
	case 1:
		return (struct op){ OP_OPEN, p, .flags = O_CREAT | O_WRONLY, .mode = 0644 };
	case 2:
		return (struct op){ OP_MKDIR, p, .mode = 0755 };
	case 3:
		return (struct op){ OP_RMDIR, p };
	case 4:
		return (struct op){ OP_UNLINK, p };
	case 5:
		return (struct op){ OP_MKFIFO, p, .mode = 0644 };
	case 6:
		return (struct op){ OP_MKNOD, p, .mode = S_IFREG | 0644 };
	case 7:
		return (struct op){ OP_SYMLINK, "target", p };
	case 8:
		return (struct op){ OP_LINK, "file", p };
	case 9:
		return (struct op){ OP_LINK, p, "newname" };
	case 10:
		return (struct op){ OP_RENAME, p, "newname" };
	case 11:
		return (struct op){ OP_RENAME, "file", p };
	case 12:
		return (struct op){ OP_CHMOD, p, .mode = 0644 };
	case 13:
		return (struct op){ OP_CHOWN, p, .n = -1, .m = -1 };
	case 14:
		return (struct op){ OP_LCHOWN, p, .n = -1, .m = -1 };
	case 15:
		return (struct op){ OP_TRUNCATE, p, .n = 0 };
	case 16:
		return (struct op){ OP_UTIMES, p, .ts = now };
	case 17:
		return (struct op){ OP_STAT, p };
	case 18:
		return (struct op){ OP_LSTAT, p };
	case 19:
		return (struct op){ OP_READLINK, p };
	case 20:
		return (struct op){ OP_OPENDIR, p };
	case 21:
		return (struct op){ OP_SETXATTR, p, "user.x", .val = "v" };
	case 22:
		return (struct op){ OP_GETXATTR, p, "user.x" };
	case 23:
		return (struct op){ OP_CHDIR, p };
	default:
		return (struct op){ OP_OPEN, NULL };
	}
}
#define NPATH_OPS 24

static void t_names(void)
{
	static char path[PATH_MAX + 64];
	static char n255[NAME_MAX + 1], n256[NAME_MAX + 2];
	struct stat s;
	size_t len;
	struct {
		const char *what, *path;
		const struct cred *c;
		int err;
	} cases[] = {
		{ "name of 256 bytes", n256, ROOT, ENAMETOOLONG },
		{ "missing dir in path", "missing/x", ROOT, ENOENT },
		{ "file in path", "file/x", ROOT, ENOTDIR },
		{ "symlink loop in path", "loop/x", ROOT, ELOOP },
		{ "dir without search in path", "nosearch/x", U1, EACCES },
		{ "path of PATH_MAX bytes", path, ROOT, ENAMETOOLONG },
	};

	area("names");
	memset(n255, 'a', NAME_MAX);
	memset(n256, 'b', NAME_MAX + 1);
	setup(symlink("loop", "loop") ?: mkdir("nosearch", 0777) ?:
					 put("nosearch/x", 0666, NULL, 0) ?:
					 chmod("nosearch", 0666),
	      "names");
	memset(path, 'p', PATH_MAX);
	for (int i = 100; i < PATH_MAX; i += 100)
		path[i] = '/';
	path[PATH_MAX] = 0;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int i = 0; i < NPATH_OPS; i++) {
			struct op o = path_op(i, cases[c].path);

			/* a wrong success must not change what the next case finds */
			if (!exists("file"))
				setup(put("file", 0666, NULL, 0), "file");

			expect(nm("%s: %s%s", cases[c].what, op_names[o.k],
				  i == 1		? " O_CREAT"
				  : (i == 9 || i == 10) ? " from"
							: ""),
			       cases[c].c, cases[c].err, &o);
		}

	/* 255 bytes is a valid name everywhere */
	EXPECT("create a 255-byte name", ROOT, 0, OP_OPEN, n255, .flags = O_CREAT | O_WRONLY,
	       .mode = 0644);
	EXPECT("stat a 255-byte name", ROOT, 0, OP_STAT, n255);
	{
		struct seen sn;

		read_all(".", &sn, 4096);
		check(seen_idx(&sn, n255) >= 0, "readdir lists a 255-byte name", "not so");
		seen_free(&sn);
	}
	EXPECT("link to a 255-byte name", ROOT, 0, OP_LINK, n255, longname(255, 'c'));
	EXPECT("rename to a 255-byte name", ROOT, 0, OP_RENAME, longname(255, 'c'),
	       longname(255, 'd'));
	EXPECT("unlink a 255-byte name", ROOT, 0, OP_UNLINK, longname(255, 'd'));
	EXPECT("unlink the other 255-byte name", ROOT, 0, OP_UNLINK, n255);
	EXPECT("mkdir a 255-byte name", ROOT, 0, OP_MKDIR, n255, .mode = 0755);
	EXPECT("rmdir a 255-byte name", ROOT, 0, OP_RMDIR, n255);
	EXPECT("symlink a 255-byte name", ROOT, 0, OP_SYMLINK, "t", n255);
	EXPECT("unlink a 255-byte symlink", ROOT, 0, OP_UNLINK, n255);
	EXPECT("mkfifo a 255-byte name", ROOT, 0, OP_MKFIFO, n255, .mode = 0644);
	EXPECT("unlink a 255-byte fifo", ROOT, 0, OP_UNLINK, n255);
	EXPECT("rename to a 256-byte name", ROOT, ENAMETOOLONG, OP_RENAME, "file", n256);
	check(exists("file"), "failed rename to a long name keeps the file", "not so");

	/* any byte but '/' and NUL */
	{
		static const char *const odd[] = { "with space",
						   "new\nline",
						   "back\\slash",
						   "\xff\xfe\x80",
						   "caf\xc3\xa9",
						   "-dash",
						   "*?[]",
						   "..."
						   "x",
						   ".hidden" };

		for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
			struct seen sn;

			EXPECT(nm("odd name %zu: create", i), ROOT, 0, OP_OPEN, odd[i],
			       .flags = O_CREAT | O_WRONLY, .mode = 0644);
			read_all(".", &sn, 4096);
			check(seen_idx(&sn, odd[i]) >= 0, nm("odd name %zu: listed", i), "not so");
			seen_free(&sn);
			EXPECT(nm("odd name %zu: unlink", i), ROOT, 0, OP_UNLINK, odd[i]);
		}
		len = 0;
		for (int i = 0; i < 127; i++)
			len += snprintf(path + len, sizeof(path) - len, "\xc3\xa9");
		path[len++] = 'x';
		path[len] = 0;
		EXPECT("255-byte UTF-8 name", ROOT, 0, OP_OPEN, path, .flags = O_CREAT | O_WRONLY,
		       .mode = 0644);
		EXPECT("unlink 255-byte UTF-8 name", ROOT, 0, OP_UNLINK, path);
		check(!exists("caf\xc3\xa9") && !exists("cafe\xcc\x81"),
		      "names are bytes: no normalisation", "not so");
	}
	EXPECT("names are case-sensitive (1)", ROOT, 0, OP_OPEN, "Case",
	       .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644);
	EXPECT("names are case-sensitive (2)", ROOT, 0, OP_OPEN, "case",
	       .flags = O_CREAT | O_EXCL | O_WRONLY, .mode = 0644);

	/* a relative path of PATH_MAX - 1 bytes resolves */
	len = 0;
	for (int i = 0; i < 20; i++) {
		memset(path + len, 'A' + i, 200);
		path[len + 200] = 0;
		setup(mkdir(path, 0755) && errno != EEXIST ? -1 : 0, "deep dirs");
		path[len + 200] = '/';
		len += 201;
	}
	memset(path + len, 'z', PATH_MAX - 1 - len);
	path[PATH_MAX - 1] = 0;
	EXPECT("create at a path of PATH_MAX - 1 bytes", ROOT, 0, OP_OPEN, path,
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
	check(!lstat(path, &s) && S_ISREG(s.st_mode), "stat a path of PATH_MAX - 1 bytes", "%m");
	path[PATH_MAX - 1] = 'z';
	path[PATH_MAX] = 0;
	EXPECT("create at a path of PATH_MAX bytes", ROOT, ENAMETOOLONG, OP_OPEN, path,
	       .flags = O_CREAT | O_WRONLY, .mode = 0644);
}

/* ---- sizes, blocks, offsets, inode numbers, sync ---- */

static void t_misc(void)
{
	static char buf[65536];
	struct stat s, t;
	char b5[8];
	int fd, bad;

	area("misc");
	memset(buf, 0x11, sizeof(buf));
	fd = open("f", O_CREAT | O_RDWR, 0644);
	check(fd >= 0 && write(fd, buf, sizeof(buf)) == sizeof(buf) && !fsync(fd) && !fstat(fd, &s),
	      "write 64 KiB and fsync", "%m");
	check(s.st_blocks * 512 >= 65536, "64 KiB written: st_blocks covers it", "%lld blocks",
	      (long long)s.st_blocks);
	check(s.st_blksize > 0, "st_blksize positive", "%ld", (long)s.st_blksize);
	check(fd >= 0 && !ftruncate(fd, 0) && !fsync(fd) && !fstat(fd, &s) && s.st_blocks == 0,
	      "truncated to 0: no blocks", "%lld blocks", (long long)s.st_blocks);
	check(fd >= 0 && pwrite(fd, "five", 4, 5LL << 30) == 4 && !fstat(fd, &s) &&
		      s.st_size == (5LL << 30) + 4,
	      "write at 5 GiB", "%m, size %lld", (long long)s.st_size);
	check(fd >= 0 && pread(fd, b5, 4, 5LL << 30) == 4 && !memcmp(b5, "five", 4),
	      "read at 5 GiB", "not so");
	check(fd >= 0 && pread(fd, b5, 4, 1LL << 32) == 4 && !memcmp(b5, "\0\0\0\0", 4),
	      "hole at 4 GiB reads zeros", "not so");
	check(s.st_blocks < 1024, "5 GiB sparse file: few blocks", "%lld blocks",
	      (long long)s.st_blocks);
	check(fd >= 0 && lseek(fd, 0, SEEK_END) == (5LL << 30) + 4, "SEEK_END", "not so");
	check(fd >= 0 && !fdatasync(fd), "fdatasync", "%m");
	if (fd >= 0)
		close(fd);
	fd = open(".", O_RDONLY | O_DIRECTORY);
	check(fd >= 0 && !fsync(fd), "fsync a directory", "%m");
	if (fd >= 0)
		close(fd);
	fd = open(".", O_RDONLY);
	{
		int r = syncfs(fd);

		check(r == 0, "syncfs", "%d, %m", r);
	}
	if (fd >= 0)
		close(fd);

	/* inode numbers: unique among live files, one device */
	bad = 0;
	setup(mkdir("i", 0755), "i");
	for (int i = 0; i < 100; i++)
		setup(put(nm("i/%d", i), 0644, NULL, 0), "files");
	for (int i = 0; i < 100; i++) {
		s = lst(nm("i/%d", i));
		for (int j = 0; j < i; j++) {
			t = lst(nm("i/%d", j));
			bad += s.st_ino == t.st_ino;
		}
		bad += s.st_dev != lst(".").st_dev;
	}
	check(!bad, "100 files: distinct inode numbers, one device", "%d clashes", bad);

	/* data survives close and reopen; a file reopened O_RDWR sees earlier writes */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 31 + i / 4096);
	setup(put("data", 0644, buf, sizeof(buf)), "data");
	{
		static char back[65536];

		check(get("data", back, sizeof(back)) == sizeof(back) - 1 &&
			      !memcmp(buf, back, sizeof(back) - 1),
		      "data survives close and reopen", "not so");
	}
}

/* ---- what each call must change, and what a failed call must not ---- */

static void t_stamps(void)
{
	struct stat b, pb, sb;
	char buf[64];
	int fd, fd2;
	loff_t in, out;
	static const struct timespec old[2] = { { 1, 0 }, { 1, 0 } };

	area("timestamps");
	setup(put("f", 0666, "0123456789", 10), "f");
	fd = open("f", O_RDWR);
	b = lst("f");
	tick();
	check(fd >= 0 && !ftruncate(fd, 5), "ftruncate", "%m");
	times("ftruncate", &b, "f", "mc", "a");
	b = lst("f");
	tick();
	check(fd >= 0 && pwrite(fd, "ab", 2, 1) == 2, "pwrite", "%m");
	times("pwrite", &b, "f", "mc", "a");
	b = lst("f");
	tick();
	check(fd >= 0 && fsync(fd) == 0, "fsync", "%m");
	times("fsync", &b, "f", "", "amc");
	b = lst("f");
	tick();
	check(fd >= 0 && pread(fd, buf, sizeof(buf), 0) == 5, "pread", "%m");
	times("pread", &b, "f", "", "mc");
	if (fd >= 0)
		close(fd);
	fd = open("f", O_WRONLY | O_APPEND);
	b = lst("f");
	tick();
	check(fd >= 0 && write(fd, "z", 1) == 1, "O_APPEND write", "%m");
	times("O_APPEND write", &b, "f", "mc", "");
	if (fd >= 0)
		close(fd);
	setup(put("src", 0644, "source data", 11), "src");
	fd = open("src", O_RDONLY);
	fd2 = open("f", O_WRONLY);
	in = 0;
	out = 2;
	b = lst("f");
	sb = lst("src");
	tick();
	check(fd >= 0 && fd2 >= 0 && copy_file_range(fd, &in, fd2, &out, 6, 0) == 6,
	      "copy_file_range", "%m");
	times("copy_file_range destination", &b, "f", "mc", "");
	times("copy_file_range source", &sb, "src", "", "mc");
	content_is("copy_file_range content", "f", "0asource");
	if (fd >= 0)
		close(fd);
	if (fd2 >= 0)
		close(fd2);

	/* two descriptors of one file see each other at once */
	fd = open("f", O_RDWR);
	fd2 = open("f", O_RDONLY);
	check(fd >= 0 && fd2 >= 0 && pwrite(fd, "XY", 2, 0) == 2 &&
		      pread(fd2, buf, sizeof(buf), 0) == 8 && !memcmp(buf, "XYsource", 8),
	      "a write is seen through another descriptor", "%m");
	check(fd >= 0 && fd2 >= 0 && !ftruncate(fd, 3) && pread(fd2, buf, sizeof(buf), 0) == 3,
	      "a truncate is seen through another descriptor", "%m");
	if (fd >= 0)
		close(fd);
	if (fd2 >= 0)
		close(fd2);

	/* reading a directory, a link, attributes: nothing changes */
	setup(mkdir("d", 0755) ?: put("d/x", 0644, NULL, 0) ?: symlink("f", "l"), "d l");
	b = lst("d");
	tick();
	EXPECT("opendir", ROOT, 0, OP_OPENDIR, "d");
	times("readdir", &b, "d", "", "mc");
	b = lst("l");
	tick();
	EXPECT("readlink", ROOT, 0, OP_READLINK, "l");
	times("readlink", &b, "l", "", "mc");
	b = lst("f");
	tick();
	EXPECT("stat", ROOT, 0, OP_STAT, "f");
	EXPECT("getxattr", ROOT, ENODATA, OP_GETXATTR, "f", "user.none");
	times("stat and getxattr", &b, "f", "", "amc");
	b = lst("d");
	tick();
	EXPECT("setxattr on a dir", ROOT, 0, OP_SETXATTR, "d", "user.x", .val = "1");
	times("setxattr on a dir", &b, "d", "c", "m");
	b = lst("d");
	tick();
	EXPECT("chmod a dir", ROOT, 0, OP_CHMOD, "d", .mode = 0700);
	times("chmod a dir", &b, "d", "c", "m");
	b = lst("d/x");
	pb = lst("d");
	tick();
	EXPECT("utimensat NULL", ROOT, 0, OP_UTIMES, "d/x");
	times("utimensat NULL", &b, "d/x", "amc", "");
	times("utimensat NULL: parent", &pb, "d", "", "mc");

	/* a call that fails changes nothing */
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i], *p = nm("n%s", t);

		setup(mknode(t, p, 0644), t);
		b = lst(p);
		tick();
		/* chmod follows the (dangling) symlink */
		EXPECT(nm("chmod %s as other", t), U1, strcmp(t, "lnk") ? EPERM : ENOENT, OP_CHMOD,
		       p, .mode = 0777);
		EXPECT(nm("lchown %s as other", t), U1, EPERM, OP_LCHOWN, p, .n = U1_ID, .m = -1);
		EXPECT(nm("utimensat %s as other", t), U1, EPERM, OP_UTIMES, p, .ts = old,
		       .flags = AT_SYMLINK_NOFOLLOW);
		times(nm("failed chmod, lchown, utimensat on %s", t), &b, p, "", "mc");
	}
	pb = lst(".");
	tick();
	EXPECT("O_EXCL on existing", ROOT, EEXIST, OP_OPEN, "f", .flags = O_CREAT | O_EXCL | O_RDWR,
	       .mode = 0644);
	times("failed O_EXCL create: parent", &pb, ".", "", "mc");
	EXPECT("setxattr", ROOT, 0, OP_SETXATTR, "f", "user.c", .val = "1");
	setup(chmod("f", 0644), "chmod f");
	b = lst("f");
	tick();
	EXPECT("XATTR_CREATE fails", ROOT, EEXIST, OP_SETXATTR, "f", "user.c", .val = "2",
	       .flags = XATTR_CREATE);
	EXPECT("write without permission", U2, EACCES, OP_WRITE, "f");
	EXPECT("truncate without permission", U2, EACCES, OP_TRUNCATE, "f", .n = 0);
	times("failed setxattr, write, truncate", &b, "f", "", "mc");
	EXPECT("O_CREAT|O_DIRECTORY", ROOT, EINVAL, OP_OPEN, "newdir",
	       .flags = O_CREAT | O_DIRECTORY | O_RDONLY, .mode = 0755);
	gone("O_CREAT|O_DIRECTORY creates nothing", "newdir");
}

/*
 * ---- what pjdfstest asks beyond the areas above ----
 *
 * Cases of pjdfstest's tests/<syscall>/NN.t the checks above leave out,
 * each in our own words and run in its area's directory: every file type
 * (pjdfstest loops over regular, dir, fifo, block, char, socket and
 * symlink), modes under several umasks, set-id bits through chown by root
 * and by the owner, owners' rights on special files, and creating a file
 * with mode 0 and then using the descriptor.
 */

/* The mode with S_ISUID and S_ISGID gone for any type but a directory (chown on Linux). */
static mode_t chown_drops_setid(const char *t, mode_t m)
{
	return strcmp(t, "dir") ? m & ~(mode_t)(S_ISUID | S_ISGID) : m;
}

static void t_chown_types(void)
{
	struct stat b;

	area("chown");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];
		mode_t m = type_bits(t);
		bool lnk = !strcmp(t, "lnk");

		/* chown -1 -1 changes nothing, so anyone may (both through a link and not) */
		setup(mknode(t, "q", 0644), t);
		EXPECT(nm("lchown -1 -1 by non-owner, %s", t), U1, 0, OP_LCHOWN, "q", .n = -1,
		       .m = -1);
		owner_is(nm("lchown -1 -1 by non-owner, %s: owner kept", t), "q", 0, 0);
		if (!lnk) {
			setup(symlink("q", "ql"), "ql");
			EXPECT(nm("chown -1 -1 by non-owner through a symlink, %s", t), U1, 0,
			       OP_CHOWN, "ql", .n = -1, .m = -1);
			owner_is(nm("chown -1 -1 through a symlink, %s: owner kept", t), "q", 0, 0);
			owner_is(nm("chown -1 -1 through a symlink, %s: link kept", t), "ql", 0, 0);
			setup(unlink("ql"), "unlink ql");
		}
		/* the owner may give the file to a group of its supplementary list */
		setup(lchown("q", U3_ID, U3_ID), "lchown q");
		b = lst("q");
		tick();
		EXPECT(nm("owner lchowns %s to itself and a supplementary group", t), U3, 0,
		       OP_LCHOWN, "q", .n = U3_ID, .m = U1_ID);
		owner_is(nm("owner lchowns %s: owner", t), "q", U3_ID, U1_ID);
		times(nm("owner lchowns %s", t), &b, "q", "c", "m");
		b = lst("q");
		tick();
		EXPECT(nm("owner lchowns %s to a group not its own", t), U3, EPERM, OP_LCHOWN, "q",
		       .n = -1, .m = G4_ID);
		EXPECT(nm("owner lchowns %s to another user", t), U3, EPERM, OP_LCHOWN, "q",
		       .n = U2_ID, .m = -1);
		times(nm("failed lchown of %s", t), &b, "q", "", "c");
		owner_is(nm("failed lchown of %s: owner kept", t), "q", U3_ID, U1_ID);
		setup(rmnode("q"), "rm q");
		if (lnk)
			continue;

		/* set-id bits: a chown clears them on anything but a directory */
		setup(mknode(t, "q", 0644) ?: chown("q", U3_ID, U3_ID) ?: chmod("q", 06555), t);
		EXPECT(nm("root chowns a set-id %s", t), ROOT, 0, OP_CHOWN, "q", .n = U2_ID,
		       .m = U2_ID);
		mode_is(nm("root's chown of a set-id %s: mode", t), "q",
			m | chown_drops_setid(t, 06555));
		setup(chown("q", U3_ID, U3_ID) ?: chmod("q", 06555), "chmod q");
		b = lst("q");
		tick();
		EXPECT(nm("owner chgrps a set-id %s", t), U3, 0, OP_CHOWN, "q", .n = -1,
		       .m = U1_ID);
		mode_is(nm("owner's chgrp of a set-id %s: mode", t), "q",
			m | chown_drops_setid(t, 06555));
		times(nm("owner's chgrp of a set-id %s", t), &b, "q", "c", "");
		setup(chmod("q", 06555), "chmod q");
		EXPECT(nm("owner chowns a set-id %s to itself and its group", t), U3, 0, OP_CHOWN,
		       "q", .n = U3_ID, .m = U3_ID);
		mode_is(nm("owner's chown of a set-id %s: mode", t), "q",
			m | chown_drops_setid(t, 06555));
		setup(rmnode("q"), "rm q");
	}
}

static void t_chmod_types(void)
{
	int fd;

	area("chmod");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];
		mode_t m = type_bits(t);

		if (!strcmp(t, "lnk"))
			continue;
		setup(mknode(t, "q", 0644) ?: symlink("q", "ql"), t);
		EXPECT(nm("chmod %s through a symlink", t), ROOT, 0, OP_CHMOD, "ql", .mode = 0222);
		mode_is(nm("chmod %s through a symlink: target", t), "q", m | 0222);
		mode_is(nm("chmod %s through a symlink: link", t), "ql", S_IFLNK | 0777);
		/* Linux lets the owner set the sticky bit on any type (FreeBSD: EFTYPE) */
		setup(chmod("q", 0640) ?: lchown("q", U1_ID, U1_ID), "chown q");
		EXPECT(nm("owner sets the sticky bit on a %s", t), U1, 0, OP_CHMOD, "q",
		       .mode = 01644);
		mode_is(nm("owner's sticky bit on a %s: mode", t), "q", m | 01644);
		EXPECT(nm("owner sets the sticky bit on a %s through a symlink", t), U1, 0,
		       OP_CHMOD, "ql", .mode = 01640);
		mode_is(nm("owner's sticky bit on a %s through a symlink: mode", t), "q",
			m | 01640);
		setup(unlink("ql") ?: rmnode("q"), "rm q");
	}

	/*
	 * A write by another user clears the set-id bits before write(2)
	 * returns: fstat on the writer's descriptor shows it (chmod/12.t).
	 * The child exits 0 when it did, 1 when not, 2 when it could not look.
	 */
	for (int i = 0; i < 3; i++) {
		static const mode_t modes[] = { 04777, 02777, 06777 };
		struct stat s;
		pid_t pid;
		int st = -1;

		setup(put("w", 0644, NULL, 0) ?: chmod("w", modes[i]), "w");
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			gid_t g = U1_ID;

			if (setgroups(1, &g) || setresgid(g, g, g) ||
			    setresuid(U1_ID, U1_ID, U1_ID))
				_exit(2);
			fd = open("w", i ? O_RDWR : O_WRONLY);
			if (fd < 0 || write(fd, "x", 1) != 1 || fstat(fd, &s))
				_exit(2);
			_exit((s.st_mode & 07777) == 0777 ? 0 : 1);
		}
		if (pid > 0)
			waitpid(pid, &st, 0);
		check(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      nm("write by other to a %04o file: fstat on its fd shows 0777",
			 (unsigned)modes[i]),
		      "child status %d", pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		mode_is(nm("write by other to a %04o file: mode", (unsigned)modes[i]), "w",
			S_IFREG | 0777);
		setup(unlink("w"), "unlink w");
	}
}

static void t_open_modes(void)
{
	static const struct {
		mode_t umask, mode, want;
	} um[] = { { 0, 0755, 0755 },
		   { 0, 0151, 0151 },
		   { 077, 0151, 0100 },
		   { 070, 0345, 0305 },
		   { 0501, 0345, 0244 } };
	static const int acc[] = { O_WRONLY, O_RDWR, O_RDONLY };
	static const char *const accn[] = { "O_WRONLY", "O_RDWR", "O_RDONLY" };

	area("open");
	for (size_t i = 0; i < sizeof(um) / sizeof(um[0]); i++) {
		const char *k =
			nm("umask %04o mode %04o", (unsigned)um[i].umask, (unsigned)um[i].mode);

		umask(um[i].umask);
		EXPECT(nm("creat, %s", k), ROOT, 0, OP_OPEN, "pm", .flags = O_CREAT | O_WRONLY,
		       .mode = um[i].mode);
		EXPECT(nm("mkdir, %s", k), ROOT, 0, OP_MKDIR, "pd", .mode = um[i].mode);
		EXPECT(nm("mkfifo, %s", k), ROOT, 0, OP_MKFIFO, "pf", .mode = um[i].mode);
		EXPECT(nm("mknod char, %s", k), ROOT, 0, OP_MKNOD, "pc",
		       .mode = S_IFCHR | um[i].mode, .n = makedev(1, 2));
		umask(022);
		mode_is(nm("creat, %s: mode", k), "pm", S_IFREG | um[i].want);
		mode_is(nm("mkdir, %s: mode", k), "pd", S_IFDIR | um[i].want);
		mode_is(nm("mkfifo, %s: mode", k), "pf", S_IFIFO | um[i].want);
		mode_is(nm("mknod char, %s: mode", k), "pc", S_IFCHR | um[i].want);
		setup(unlink("pm") ?: rmdir("pd") ?: unlink("pf") ?: unlink("pc"), "clean up");
	}

	/* the mode of a file being created does not limit the descriptor that creates it */
	setup(mkdir("pw", 0777) ?: chmod("pw", 0777), "pw");
	for (int i = 0; i < 3; i++)
		for (int u = 0; u < 2; u++) {
			const struct cred *c = u ? U1 : ROOT;

			EXPECT(nm("create mode 0 %s as %s", accn[i], who(c)), c, 0, OP_OPEN, "pw/z",
			       .flags = O_CREAT | acc[i], .mode = 0);
			mode_is(nm("create mode 0 %s as %s: mode", accn[i], who(c)), "pw/z",
				S_IFREG);
			setup(unlink("pw/z"), "unlink pw/z");
		}
	for (int u = 0; u < 2; u++) {
		const struct cred *c = u ? U1 : ROOT;

		EXPECT(nm("create mode 0 O_RDWR and ftruncate as %s", who(c)), c, 0, OP_FTRUNC,
		       "pw/z", .flags = O_CREAT | O_RDWR, .n = 1234);
		size_is(nm("create mode 0 O_RDWR and ftruncate as %s: size", who(c)), "pw/z", 1234);
		mode_is(nm("create mode 0 O_RDWR and ftruncate as %s: mode", who(c)), "pw/z",
			S_IFREG);
		EXPECT(nm("create mode 0 and write as %s", who(c)), c, 0, OP_CWRITE, "pw/y",
		       .mode = 0);
		size_is(nm("create mode 0 and write as %s: size", who(c)), "pw/y", 3);
		setup(unlink("pw/z") ?: unlink("pw/y"), "unlink pw/z pw/y");
	}

	/* O_NOFOLLOW on a symlink is ELOOP whatever the access mode, O_CREAT too */
	setup(symlink("pnone", "pl"), "pl");
	for (int i = 0; i < 3; i++)
		EXPECT(nm("O_NOFOLLOW|%s on a symlink", accn[i]), ROOT, ELOOP, OP_OPEN, "pl",
		       .flags = O_NOFOLLOW | acc[i]);
	EXPECT("O_NOFOLLOW|O_CREAT on a dangling symlink", ROOT, ELOOP, OP_OPEN, "pl",
	       .flags = O_NOFOLLOW | O_CREAT | O_RDONLY, .mode = 0644);
	gone("O_NOFOLLOW|O_CREAT creates no target", "pnone");
	setup(unlink("pl"), "unlink pl");

	/* O_CREAT|O_EXCL on every type of existing name */
	for (size_t i = 0; i < NTYPES; i++) {
		setup(mknode(types[i], "px", 0644), types[i]);
		EXPECT(nm("O_CREAT|O_EXCL on an existing %s", types[i]), ROOT, EEXIST, OP_OPEN,
		       "px", .flags = O_CREAT | O_EXCL | O_RDONLY, .mode = 0644);
		setup(rmnode("px"), "rm px");
	}
	setup(mkdir("pdir", 0755), "pdir");
	EXPECT("O_RDONLY|O_TRUNC on a dir", ROOT, EISDIR, OP_OPEN, "pdir",
	       .flags = O_RDONLY | O_TRUNC);

	/*
	 * O_RDONLY|O_TRUNC truncates (Linux: with write permission); the old
	 * bytes must be gone below the kernel's cache too: the hole before a
	 * later write reads as zeros, SEEK_DATA finds no data before it
	 * (found by difftest).
	 */
	setup(put("ptr", 0644, "0123456789abcdef", 16), "ptr");
	EXPECT("O_RDONLY|O_TRUNC on a file", ROOT, 0, OP_OPEN, "ptr", .flags = O_RDONLY | O_TRUNC);
	size_is("O_RDONLY|O_TRUNC truncates", "ptr", 0);
	{
		char b[32] = { 0 };
		int fd = open("ptr", O_RDWR);
		ssize_t n = -1;
		off_t d = -1;

		if (fd >= 0 && pwrite(fd, "y", 1, 8192) == 1) {
			n = pread(fd, b, sizeof(b), 0);
			d = lseek(fd, 0, SEEK_DATA);
		}
		check(n == sizeof(b) && all_zero(b, sizeof(b)), "O_RDONLY|O_TRUNC: old bytes gone",
		      "read %zd bytes: \"%.16s\"", n, b);
		check(d == 4096 || d == 8192, "O_RDONLY|O_TRUNC: SEEK_DATA skips the old bytes",
		      "SEEK_DATA at %lld", (long long)d);
		if (fd >= 0)
			close(fd);
	}
	EXPECT("O_RDONLY|O_TRUNC without write permission", U1, EACCES, OP_OPEN, "ptr",
	       .flags = O_RDONLY | O_TRUNC);
}

/*
 * open's permission check (pjdfstest's open/06.t): read, write or both,
 * by the owner, a member of the file's group and another user, for each
 * set of bits the class may have (the other classes get all of them: only
 * the caller's own class counts), on a file, a fifo and a directory.
 */
static void t_open_access(void)
{
	static const struct {
		const char *name;
		const struct cred *c;
		int shift;
	} classes[] = { { "owner", U1, 6 }, { "group member", U3, 3 }, { "other", U2, 0 } };
	static const unsigned bits[] = { 6, 4, 2, 1, 0 };

	area("open");
	setup(mkdir("acc", 0755) ?: chown("acc", U1_ID, U1_ID) ?: put("acc/f", 0644, NULL, 0) ?:
				    mkfifo("acc/p", 0644) ?: mkdir("acc/d", 0755) ?:
				    lchown("acc/f", U1_ID, U1_ID) ?: lchown("acc/p", U1_ID, U1_ID) ?:
				    lchown("acc/d", U1_ID, U1_ID),
	      "acc");
	for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++)
		for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
			unsigned b = bits[i];
			mode_t m = (0777 & ~(7U << classes[c].shift)) | b << classes[c].shift;
			const struct cred *u = classes[c].c;
			const char *k = nm("%s, mode %04o", classes[c].name, (unsigned)m);
			int r = b & 4 ? 0 : EACCES, w = b & 2 ? 0 : EACCES,
			    rw = (b & 6) == 6 ? 0 : EACCES;

			setup(chmod("acc/f", m) ?: chmod("acc/p", m) ?: chmod("acc/d", m), "chmod");
			EXPECT(nm("file O_RDONLY by %s", k), u, r, OP_OPEN, "acc/f",
			       .flags = O_RDONLY);
			EXPECT(nm("file O_WRONLY by %s", k), u, w, OP_OPEN, "acc/f",
			       .flags = O_WRONLY);
			EXPECT(nm("file O_RDWR by %s", k), u, rw, OP_OPEN, "acc/f",
			       .flags = O_RDWR);
			/* a write-only descriptor writes, whatever the daemon opens (writeback cache) */
			if (b == 2)
				EXPECT(nm("file write by %s", k), u, 0, OP_WRITE, "acc/f");
			EXPECT(nm("fifo O_RDONLY|O_NONBLOCK by %s", k), u, r, OP_OPEN, "acc/p",
			       .flags = O_RDONLY | O_NONBLOCK);
			/* allowed, it finds no reader */
			EXPECT(nm("fifo O_WRONLY|O_NONBLOCK by %s", k), u, w ? EACCES : ENXIO,
			       OP_OPEN, "acc/p", .flags = O_WRONLY | O_NONBLOCK);
			EXPECT(nm("fifo O_RDWR by %s", k), u, rw, OP_OPEN, "acc/p",
			       .flags = O_RDWR);
			EXPECT(nm("dir O_RDONLY by %s", k), u, r, OP_OPEN, "acc/d",
			       .flags = O_RDONLY | O_DIRECTORY);
		}
	size_is("writes through write-only descriptors", "acc/f", 1);
}

static void t_utimes_types(void)
{
	struct timespec ts[2] = { { 1900000000, 0 }, { 1950000000, 0 } };
	struct stat s;

	area("utimensat");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];

		if (!strcmp(t, "lnk"))
			continue;
		setup(mknode(t, "q", 0644), t);
		EXPECT(nm("set times of a %s", t), ROOT, 0, OP_UTIMES, "q", .ts = ts);
		s = lst("q");
		check(!tscmp(s.st_atim, ts[0]) && !tscmp(s.st_mtim, ts[1]),
		      nm("set times of a %s: kept", t), "atime %s mtime %s", tsstr(s.st_atim),
		      tsstr(s.st_mtim));
		setup(lchown("q", U1_ID, U1_ID), "chown q");
		EXPECT(nm("owner sets times of a %s", t), U1, 0, OP_UTIMES, "q", .ts = ts);
		EXPECT(nm("non-owner sets times of a %s", t), U2, EPERM, OP_UTIMES, "q", .ts = ts);
		setup(rmnode("q"), "rm q");
	}
	/* 0.1 s steps and the 2038 and 2106 boundaries */
	setup(put("q", 0644, NULL, 0), "q");
	ts[0] = (struct timespec){ 100000000, 100000000 };
	ts[1] = (struct timespec){ 200000000, 200000000 };
	EXPECT("set times with tenths of a second", ROOT, 0, OP_UTIMES, "q", .ts = ts);
	s = lst("q");
	check(s.st_atim.tv_nsec == 100000000 && s.st_mtim.tv_nsec == 200000000,
	      "tenths of a second kept", "atime %s mtime %s", tsstr(s.st_atim), tsstr(s.st_mtim));
	ts[0] = (struct timespec){ 2147483648LL, 0 };
	ts[1] = (struct timespec){ 4294967296LL, 0 };
	EXPECT("set times 2^31 and 2^32", ROOT, 0, OP_UTIMES, "q", .ts = ts);
	s = lst("q");
	check(s.st_atim.tv_sec == 2147483648LL && s.st_mtim.tv_sec == 4294967296LL,
	      "times 2^31 and 2^32 kept", "atime %s mtime %s", tsstr(s.st_atim), tsstr(s.st_mtim));
	/* the owner without write permission: UTIME_NOW and explicit times */
	setup(chown("q", U1_ID, U1_ID) ?: chmod("q", 0444), "chown q");
	ts[0].tv_nsec = ts[1].tv_nsec = UTIME_NOW;
	EXPECT("owner of a 0444 file sets UTIME_NOW", U1, 0, OP_UTIMES, "q", .ts = ts);
	ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
	EXPECT("non-owner without write sets UTIME_OMIT", U2, 0, OP_UTIMES, "q", .ts = ts);
	ts[0].tv_nsec = 0;
	EXPECT("non-owner sets atime, UTIME_OMIT mtime", U2, EPERM, OP_UTIMES, "q", .ts = ts);
	/* write permission would not do either: only both UTIME_NOW (or NULL) is a touch */
	ts[0].tv_nsec = UTIME_NOW;
	EXPECT("non-owner sets UTIME_NOW atime, UTIME_OMIT mtime", U2, EPERM, OP_UTIMES, "q",
	       .ts = ts);
}

static void t_link_types(void)
{
	area("link");
	for (size_t i = 0; i < NTYPES; i++) {
		const char *t = types[i];
		mode_t m = type_bits(t);

		if (!strcmp(t, "dir") || !strcmp(t, "lnk"))
			continue;
		setup(mknode(t, "q0", 0644), t);
		EXPECT(nm("link %s twice (1)", t), ROOT, 0, OP_LINK, "q0", "q1");
		EXPECT(nm("link %s twice (2)", t), ROOT, 0, OP_LINK, "q1", "q2");
		nlink_is(nm("link %s twice: nlink 3", t), "q0", 3);
		setup(chmod("q1", 0201) ?: chown("q1", U1_ID, U2_ID), "chmod chown q1");
		for (int n = 0; n < 3; n++) {
			const char *p = nm("q%d", n);

			mode_is(nm("link %s: chmod seen by name %d", t, n), p, m | 0201);
			owner_is(nm("link %s: chown seen by name %d", t, n), p, U1_ID, U2_ID);
		}
		EXPECT(nm("unlink one of three names of %s", t), ROOT, 0, OP_UNLINK, "q0");
		nlink_is(nm("link %s: nlink 2 after an unlink", t), "q2", 2);
		mode_is(nm("link %s: mode kept after an unlink", t), "q2", m | 0201);
		setup(unlink("q1") ?: unlink("q2"), "unlink q1 q2");
	}
}

static void t_fallocate_more(void)
{
	static const char *const accn[] = { "O_RDWR", "O_WRONLY" };
	struct stat b;
	int fd;

	area("fallocate");
	/* like ftruncate: the new file's mode 0 does not matter, the open's flags do */
	setup(mkdir("pw", 0777) ?: chmod("pw", 0777), "pw");
	for (int i = 0; i < 2; i++)
		for (int u = 0; u < 2; u++) {
			const struct cred *c = u ? U1 : ROOT;

			EXPECT(nm("create mode 0 %s and posix_fallocate as %s", accn[i], who(c)), c,
			       0, OP_FALLOC, "pw/z", .flags = O_CREAT | (i ? O_WRONLY : O_RDWR),
			       .mode = 0, .n = 100);
			size_is(nm("create mode 0 %s and posix_fallocate as %s: size", accn[i],
				   who(c)),
				"pw/z", 100);
			setup(unlink("pw/z"), "unlink pw/z");
		}
	setup(put("q", 0644, "0123456789", 10), "q");
	fd = open("q", O_RDWR);
	check(fd >= 0 && !posix_fallocate(fd, 20000, 3456), "posix_fallocate past EOF", "%m");
	size_is("posix_fallocate past EOF: size is offset + length", "q", 23456);
	b = lst("q");
	tick();
	check(fd >= 0 && !posix_fallocate(fd, 0, 100), "posix_fallocate inside the file", "%m");
	times("posix_fallocate inside the file", &b, "q", "c", "");
	b = lst("q");
	tick();
	check(fd >= 0 && posix_fallocate(fd, 0, 0) == EINVAL, "posix_fallocate of length 0 EINVAL",
	      "not so");
	check(fd >= 0 && posix_fallocate(fd, -1, 1) == EINVAL,
	      "posix_fallocate at a negative offset EINVAL", "not so");
	times("failed posix_fallocate", &b, "q", "", "mc");
	if (fd >= 0)
		close(fd);
	setup(chmod("q", 06777), "chmod q");
	EXPECT("posix_fallocate of a set-id file by other", U1, 0, OP_FALLOC, "q", .flags = O_RDWR,
	       .n = 30000);
	mode_is("posix_fallocate by other clears S_ISUID and S_ISGID", "q", S_IFREG | 0777);
}

/*
 * The sticky bit as pjdfstest's rename/09.t and 10.t try it: who may move
 * a name out of a sticky directory, and who may replace one in it.
 */
static void t_rename_sticky(void)
{
	static const uid_t ids[] = { U1_ID, 0, U2_ID };
	static const char *const kinds[] = { "reg", "fifo", "lnk", "dir" };

	area("rename");
	setup(mkdir("sa", 0755) ?: chmod("sa", 01777) ?: mkdir("sb", 0755) ?:
				    chown("sb", U1_ID, U1_ID),
	      "sa sb");
	/* moving out of sticky sa into sb (U1's) as U1 */
	for (size_t k = 0; k < 4; k++)
		for (size_t d = 0; d < 3; d++)
			for (size_t f = 0; f < 3; f++) {
				bool dir = !strcmp(kinds[k], "dir");
				/*
				 * The sticky bit wants one owner (EPERM); then a dir
				 * moving to a new parent its own write permission (EACCES).
				 */
				int want = ids[d] != U1_ID && ids[f] != U1_ID ? EPERM
					   : dir && ids[f] != U1_ID	      ? EACCES
									      : 0;
				const char *k2 = nm("out of a sticky dir of uid %u: %s of uid %u",
						    (unsigned)ids[d], kinds[k], (unsigned)ids[f]);

				setup(chown("sa", ids[d], ids[d]) ?: mknode(kinds[k], "sa/n", 0755) ?:
					      lchown("sa/n", ids[f], ids[f]),
				      "sa/n");
				EXPECT(nm("rename %s", k2), U1, want, OP_RENAME, "sa/n", "sb/m");
				if (!want)
					setup(rename("sb/m", "sa/n"), "rename back");
				check(lst("sa/n").st_uid == ids[f],
				      nm("rename %s: source kept", k2), "not so");
				if (dir) {
					EXPECT(nm("rename within the dir %s", k2), U1,
					       ids[d] == U1_ID || ids[f] == U1_ID ? 0 : EPERM,
					       OP_RENAME, "sa/n", "sa/o");
					if (exists("sa/o"))
						setup(rename("sa/o", "sa/n"), "rename back");
				}
				setup(rmnode("sa/n"), "rm sa/n");
			}
	/* replacing in sticky sa as U1, from sb */
	for (size_t k = 0; k < 4; k++)
		for (size_t d = 0; d < 3; d++)
			for (size_t f = 0; f < 3; f++) {
				bool dir = !strcmp(kinds[k], "dir");
				bool ok = ids[d] == U1_ID || ids[f] == U1_ID;
				const char *k2 = nm("over a %s of uid %u in a sticky dir of uid %u",
						    kinds[k], (unsigned)ids[f], (unsigned)ids[d]);

				setup(chown("sa", ids[d], ids[d]) ?: mknode(kinds[k], "sa/t", 0755) ?:
					      lchown("sa/t", ids[f], ids[f]) ?:
					      mknode(dir ? "dir" : "reg", "sb/s", 0755) ?:
					      lchown("sb/s", U1_ID, U1_ID),
				      "sa/t sb/s");
				EXPECT(nm("rename %s", k2), U1, ok ? 0 : EPERM, OP_RENAME, "sb/s",
				       "sa/t");
				check(lst("sa/t").st_uid == (ok ? U1_ID : ids[f]),
				      nm("rename %s: target's owner", k2), "uid %u",
				      (unsigned)lst("sa/t").st_uid);
				setup(rmnode("sa/t") ?: (exists("sb/s") ? rmnode("sb/s") : 0),
				      "rm sa/t sb/s");
			}
}

/*
 * Setting an access ACL changes the permission bits (posix_acl_update_mode())
 * and drops S_ISGID unless the caller is in the file's group or has
 * CAP_FSETID.
 */
static void t_acl_sgid(void)
{
	static const struct {
		const char *who;
		const struct cred *c;
		gid_t group;
		bool kept;
	} cases[] = {
		{ "owner outside the file's group", U1, G4_ID, false },
		{ "owner in the file's group (its own)", U1, U1_ID, true },
		{ "owner with the file's group as a supplementary group", U3, U1_ID, true },
		{ "root outside the file's group", ROOT, G4_ID, true },
		{ "root without CAP_FSETID outside the file's group", &root_nofsetid, G4_ID,
		  false },
	};
	int r;

	area("xattr");
	setup(put("acl", 0644, NULL, 0), "acl");
	r = set_acl("acl", 6, 4, 4, -1);
	if (r == EOPNOTSUPP) {
		printf("note xattr: no POSIX ACLs here (EOPNOTSUPP): S_ISGID checks left out\n");
		return;
	}
	check(r == 0, "set an access ACL", "%s", errname(r));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int named = 0; named < 2; named++)
			for (int dir = 0; dir < 2; dir++) {
				const char *p = dir ? "acld" : "aclf";
				const char *k = nm("ACL%s on a setgid %s by %s",
						   named ? " with a named user" : "",
						   dir ? "dir" : "file", cases[i].who);
				uid_t owner =
					cases[i].c && cases[i].c->uid ? cases[i].c->uid : U1_ID;
				mode_t want = (dir ? S_IFDIR : S_IFREG) | 0750 |
					      (cases[i].kept ? S_ISGID : 0);

				setup(mknode(dir ? "dir" : "reg", p, 02775) ?:
					      chown(p, owner, cases[i].group) ?: chmod(p, 02775),
				      p);
				EXPECT(k, cases[i].c, 0, OP_SETACL, p, .mode = 0750,
				       .n = named ? U2_ID : -1);
				mode_is(nm("%s: mode", k), p, want);
				setup(rmnode(p), "rm");
			}
}

/*
 * An access ACL with a mask entry but no named user or group says more
 * than a mode (posix_acl_equiv_mode()): ext4 and tmpfs keep it (setfacl
 * -x of the last named entry leaves user::, group::, mask::, other::),
 * and the group bits show the mask.
 */
static void t_acl_mask_only(void)
{
	/* user::rw-, group::r--, mask::---, other::r-- (tag, perm, id: none) */
	/* clang-format off */
	static const unsigned char acl[4 + 4 * 8] = {
		2, 0, 0, 0,
		0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	};
	/* clang-format on */
	unsigned char buf[256];
	ssize_t n;

	area("xattr");
	setup(put("maskonly", 0644, NULL, 0), "maskonly");
	if (setxattr("maskonly", "system.posix_acl_access", acl, sizeof(acl), 0)) {
		check(errno == EOPNOTSUPP, "ACL with a mask and no named entry", "%s",
		      errname(errno));
		return;
	}
	mode_is("ACL with a mask and no named entry: mode", "maskonly", S_IFREG | 0604);
	n = getxattr("maskonly", "system.posix_acl_access", buf, sizeof(buf));
	check(n == (ssize_t)sizeof(acl) && !memcmp(buf, acl, sizeof(acl)),
	      "ACL with a mask and no named entry is kept", "%zd bytes%s", n,
	      n < 0 ? nm(" (%s)", errname(errno)) : "");
}

/* ---- main ---- */

static const struct {
	const char *name;
	void (*fn)(void);
} areas[] = {
	{ "open", t_open },
	{ "open", t_open_modes },
	{ "open", t_open_access },
	{ "mkdir", t_mkdir },
	{ "rmdir", t_rmdir },
	{ "unlink", t_unlink },
	{ "unlink", t_unlink_held },
	{ "link", t_link },
	{ "link", t_link_types },
	{ "rename", t_rename },
	{ "rename", t_rename_sticky },
	{ "symlink", t_symlink },
	{ "chmod", t_chmod },
	{ "chmod", t_chmod_types },
	{ "chown", t_chown },
	{ "chown", t_chown_types },
	{ "truncate", t_truncate },
	{ "write", t_rw },
	{ "utimensat", t_utimes },
	{ "utimensat", t_utimes_types },
	{ "mknod", t_nodes },
	{ "fallocate", t_fallocate },
	{ "fallocate", t_fallocate_more },
	{ "xattr", t_xattr },
	{ "xattr", t_acl_sgid },
	{ "xattr", t_acl_mask_only },
	{ "statvfs", t_statvfs },
	{ "readdir", t_readdir },
	{ "readdir", t_readdir_seek_removed },
	{ "names", t_names },
	{ "misc", t_misc },
	{ "timestamps", t_stamps },
};

/* Whether new files get times in whole seconds (three in a row with no nanoseconds). */
static bool seconds_only(void)
{
	bool whole = true;

	for (int i = 0; i < 3; i++) {
		const char *p = nm("%s/probe%d", scratch, i);
		struct stat s;

		if (put(p, 0644, NULL, 0) || lstat(p, &s))
			return false;
		whole &= s.st_mtim.tv_nsec == 0 && s.st_ctim.tv_nsec == 0;
		unlink(p);
		tick();
	}
	return whole;
}

static void read_known(const char *file)
{
	char line[512];
	FILE *f = fopen(file, "r");

	if (!f) {
		printf("FAIL known failures %s: %s\n", file, strerror(errno));
		nfail++;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0] || line[0] == '#')
			continue;
		known = realloc(known, (nknown + 1) * sizeof(*known));
		known[nknown++] = strdup(line);
	}
	fclose(f);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: conform [-v] [-k] [-t TICK_MS] [-o AREA,...] [-X FILE] DIRECTORY\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	bool keep = false, tick_set = false;
	struct statvfs v;
	int opt;

	while ((opt = getopt(argc, argv, "vkt:o:X:")) != -1) {
		switch (opt) {
		case 'v':
			verbose = true;
			break;
		case 'k':
			keep = true;
			break;
		case 't':
			tick_ms = atol(optarg);
			tick_set = true;
			break;
		case 'o':
			only = optarg;
			break;
		case 'X':
			read_known(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("skip: conform needs root (it checks permissions as other users)\n");
		return 77;
	}
	snprintf(scratch, sizeof(scratch), "%s/conform.%d", argv[optind], (int)getpid());
	if (mkdir(scratch, 0755) || chmod(scratch, 0755) || statvfs(scratch, &v)) {
		printf("skip: cannot make %s: %s\n", scratch, strerror(errno));
		return 77;
	}
	mnt_nodev = v.f_flag & ST_NODEV;
	if (!tick_set && seconds_only()) {
		printf("note: %s keeps timestamps in whole seconds: ticks of 1.1 s\n",
		       argv[optind]);
		tick_ms = 1100;
	}
	mnt_noatime = v.f_flag & ST_NOATIME;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(areas) / sizeof(areas[0]); i++) {
		if (only && !name_in_list(only, areas[i].name))
			continue;
		areas[i].fn();
	}
	area_name = "cleanup";
	if (chdir("/"))
		return 1;
	if (!keep)
		check(!rm_tree(AT_FDCWD, scratch), "remove scratch dir", "%s: %m", scratch);
	for (int i = 0; i < nknown; i++)
		if (known[i][0] && !only)
			printf("note: %s is listed as a known failure but passed: take it off the list\n",
			       known[i]);
	if (nknown)
		printf("%d known failures (XFAIL)\n", nxfail);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}
