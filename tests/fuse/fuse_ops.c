// SPDX-License-Identifier: GPL-2.0
/*
 * fuse_ops: system calls through a mounted tinyfs that a shell cannot make
 * (or cannot check closely).  `fuse_ops CASE DIR` runs one case in DIR (a
 * directory on the mount) and exits 0 pass, 1 fail (each failed check
 * printed with its line), 77 skip.
 *
 * Cases and the semantics each checks:
 *  rename    renameat2: NOREPLACE fails with EEXIST and changes nothing;
 *            EXCHANGE swaps two names (files and a file with a directory);
 *            any other flag is EINVAL; a plain rename replaces.
 *  xattr     set/get/list/remove; XATTR_CREATE on an existing name EEXIST,
 *            XATTR_REPLACE on a missing one ENODATA; a short buffer ERANGE;
 *            size 0 returns the length; an unknown namespace EOPNOTSUPP.
 *  fallocate mode 0 extends the size and reads zeros; KEEP_SIZE does not
 *            change the size; PUNCH_HOLE zeroes the range and keeps the size;
 *            ZERO_RANGE zeroes.
 *  seek      SEEK_DATA/SEEK_HOLE on a file with data, a hole and data
 *            (fsynced): every answer is one POSIX allows (a hole may be
 *            reported as data), ENXIO at and past EOF; then data written and
 *            not yet fsynced is never reported as a hole.
 *  fsync     fsync and fdatasync of a file and fsync of a directory return 0.
 *  fsync-eio N descriptors open on one file, data written and failing in the
 *            device (the caller arms TFS_FAULTS in the daemon): each fsync
 *            returns EIO exactly once, then 0 (xfstests' fsync-err.c).
 *  posix     names: ENAMETOOLONG past 255 bytes, 255 works; O_APPEND writes
 *            at the end; a write-only descriptor writing part of a page keeps
 *            the rest; unlinked-but-open files stay readable; link counts;
 *            rmdir of a non-empty directory ENOTEMPTY; utimensat sets times;
 *            mkfifo; statfs names 255; a write by another user clears
 *            set-user-ID and set-group-ID (chmod/12 of pjdfstest); truncate
 *            by another user clears them too; chown clears them.
 *  readdir   a directory of 3000 names listed through readdir(3) (listing
 *            requests of its st_blksize): every name once, no other; seekdir
 *            to a telldir position taken every 97 entries resumes at the
 *            entry that followed it; names created and removed during a
 *            listing do not make another name missing or repeated.  And
 *            a chmod between two getdents64() calls of a listing, of a name
 *            the second returns (its batch of readdirplus entries read ahead
 *            by the daemon meanwhile): stat then shows the new mode, not
 *            the one the batch had before the chmod.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                                           \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "FAIL %s:%d: %s (errno %d %s)\n", __func__, __LINE__, \
				#cond, errno, strerror(errno));                               \
			failures++;                                                           \
		}                                                                             \
	} while (0)

/* ret == -1 with errno e */
#define CHECK_ERR(call, e)                                                                      \
	do {                                                                                    \
		errno = 0;                                                                      \
		long r_ = (long)(call);                                                         \
		if (r_ != -1 || errno != (e)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s returned %ld errno %d (%s), want %s\n", \
				__func__, __LINE__, #call, r_, errno, strerror(errno), #e);     \
			failures++;                                                             \
		}                                                                               \
	} while (0)

static void put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	CHECK(write(fd, s, strlen(s)) == (ssize_t)strlen(s));
	CHECK(close(fd) == 0);
}

static bool has(const char *path, const char *s)
{
	char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return !strcmp(buf, s);
}

static int case_rename(void)
{
	struct stat st;

	put("a", "A");
	put("b", "B");
	CHECK_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE), EEXIST);
	CHECK(has("a", "A") && has("b", "B"));
	CHECK(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", RENAME_NOREPLACE) == 0);
	CHECK(has("c", "A") && access("a", F_OK) == -1);
	CHECK(renameat2(AT_FDCWD, "c", AT_FDCWD, "b", RENAME_EXCHANGE) == 0);
	CHECK(has("c", "B") && has("b", "A"));
	CHECK(mkdir("d", 0755) == 0);
	put("d/in", "I");
	CHECK(renameat2(AT_FDCWD, "d", AT_FDCWD, "c", RENAME_EXCHANGE) == 0);
	CHECK(stat("c", &st) == 0 && S_ISDIR(st.st_mode) && has("c/in", "I") && has("d", "B"));
	CHECK_ERR(renameat2(AT_FDCWD, "b", AT_FDCWD, "nothere", RENAME_EXCHANGE), ENOENT);
	/* RENAME_WHITEOUT: the old name becomes a character device 0:0. */
	CHECK(renameat2(AT_FDCWD, "b", AT_FDCWD, "e", RENAME_WHITEOUT) == 0);
	CHECK(has("e", "A") && lstat("b", &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == 0);
	CHECK_ERR(renameat2(AT_FDCWD, "e", AT_FDCWD, "d", RENAME_WHITEOUT | RENAME_EXCHANGE),
		  EINVAL);
	CHECK(unlink("b") == 0 && rename("e", "b") == 0);
	CHECK_ERR(renameat2(AT_FDCWD, "b", AT_FDCWD, "d", 1U << 7), EINVAL);
	CHECK(rename("b", "d") == 0);
	CHECK(has("d", "A") && access("b", F_OK) == -1);
	CHECK_ERR(rename("c", "c/in/x"), ENOTDIR);
	CHECK_ERR(rename("c", "c/sub"), EINVAL);
	return 0;
}

static int case_xattr(void)
{
	char buf[256];
	ssize_t n;

	put("x", "");
	CHECK(setxattr("x", "user.one", "1", 1, 0) == 0);
	CHECK(setxattr("x", "user.two", "22", 2, XATTR_CREATE) == 0);
	CHECK_ERR(setxattr("x", "user.two", "2", 1, XATTR_CREATE), EEXIST);
	CHECK_ERR(setxattr("x", "user.three", "3", 1, XATTR_REPLACE), ENODATA);
	CHECK(setxattr("x", "user.two", "222", 3, XATTR_REPLACE) == 0);
	CHECK(getxattr("x", "user.two", NULL, 0) == 3);
	n = getxattr("x", "user.two", buf, sizeof(buf));
	CHECK(n == 3 && !memcmp(buf, "222", 3));
	CHECK_ERR(getxattr("x", "user.two", buf, 1), ERANGE);
	CHECK_ERR(getxattr("x", "user.none", buf, sizeof(buf)), ENODATA);
	n = listxattr("x", buf, sizeof(buf));
	CHECK(n == (ssize_t)sizeof("user.one") + (ssize_t)sizeof("user.two"));
	CHECK(listxattr("x", NULL, 0) == n);
	CHECK_ERR(listxattr("x", buf, 3), ERANGE);
	CHECK(n > 0 && memmem(buf, (size_t)n, "user.one", 9) &&
	      memmem(buf, (size_t)n, "user.two", 9));
	CHECK(removexattr("x", "user.one") == 0);
	CHECK_ERR(removexattr("x", "user.one"), ENODATA);
	CHECK_ERR(getxattr("x", "user.one", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(setxattr("x", "bogus.ns", "1", 1, 0), EOPNOTSUPP);
	CHECK(setxattr("x", "user.empty", "", 0, 0) == 0);
	CHECK(getxattr("x", "user.empty", buf, sizeof(buf)) == 0);
	return 0;
}

static bool all_zero(int fd, off_t off, size_t len)
{
	char buf[65536];

	while (len) {
		size_t chunk = len < sizeof(buf) ? len : sizeof(buf);
		ssize_t n = pread(fd, buf, chunk, off);

		if (n != (ssize_t)chunk)
			return false;
		for (size_t i = 0; i < chunk; i++)
			if (buf[i])
				return false;
		off += (off_t)chunk;
		len -= chunk;
	}
	return true;
}

static int case_fallocate(void)
{
	char buf[8192];
	struct stat st;
	int fd = open("f", O_RDWR | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	CHECK(fallocate(fd, 0, 0, 1 << 20) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 1 << 20);
	CHECK(all_zero(fd, 0, 1 << 20));
	CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 1 << 20);
	memset(buf, 'x', sizeof(buf));
	CHECK(pwrite(fd, buf, sizeof(buf), 4096) == (ssize_t)sizeof(buf));
	CHECK(fsync(fd) == 0);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 1 << 20);
	CHECK(all_zero(fd, 4096, 4096));
	CHECK(pread(fd, buf, 4096, 8192) == 4096 && buf[0] == 'x' && buf[4095] == 'x');
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 8192, 4096) == 0);
	CHECK(all_zero(fd, 8192, 4096));

	/* lsattr/chattr: no inode flags, and none can be set (but clearing them all). */
	int fl = -1, dfd;
	struct fsxattr fa;

	CHECK(ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0 && fl == 0);
	fl = 0;
	CHECK(ioctl(fd, FS_IOC_SETFLAGS, &fl) == 0);
	fl = FS_IMMUTABLE_FL;
	CHECK_ERR(ioctl(fd, FS_IOC_SETFLAGS, &fl), EOPNOTSUPP);
	memset(&fa, 0xff, sizeof(fa));
	CHECK(ioctl(fd, FS_IOC_FSGETXATTR, &fa) == 0 && fa.fsx_xflags == 0 && fa.fsx_projid == 0);
	CHECK(ioctl(fd, FS_IOC_FSSETXATTR, &fa) == 0);
	fa.fsx_xflags = FS_XFLAG_APPEND;
	CHECK_ERR(ioctl(fd, FS_IOC_FSSETXATTR, &fa), EOPNOTSUPP);
	dfd = open(".", O_RDONLY | O_DIRECTORY);
	fl = -1;
	CHECK(dfd >= 0 && ioctl(dfd, FS_IOC_GETFLAGS, &fl) == 0 && fl == 0);
	close(dfd);
	CHECK(close(fd) == 0);
	return 0;
}

static int case_seek(void)
{
	char buf[4096];
	int fd = open("s", O_RDWR | O_CREAT | O_TRUNC, 0644);
	off_t r;

	memset(buf, 'd', sizeof(buf));
	CHECK(fd >= 0);
	CHECK(pwrite(fd, buf, 4096, 0) == 4096);
	CHECK(pwrite(fd, buf, 4096, 1 << 20) == 4096);
	CHECK(fsync(fd) == 0);
	CHECK(lseek(fd, 0, SEEK_DATA) == 0);
	r = lseek(fd, 0, SEEK_HOLE);
	CHECK(r >= 4096 && r <= (1 << 20) + 4096);
	r = lseek(fd, 8192, SEEK_DATA);
	CHECK(r >= 8192 && r <= 1 << 20);
	CHECK(lseek(fd, (1 << 20) + 100, SEEK_DATA) == (1 << 20) + 100);
	CHECK(lseek(fd, (1 << 20) + 100, SEEK_HOLE) == (1 << 20) + 4096);
	CHECK_ERR(lseek(fd, (1 << 20) + 4096, SEEK_DATA), ENXIO);
	CHECK_ERR(lseek(fd, (1 << 20) + 4096, SEEK_HOLE), ENXIO);
	/* Written, not fsynced: still data, whatever the kernel has not written back. */
	CHECK(pwrite(fd, buf, 4096, 2 << 20) == 4096);
	CHECK(lseek(fd, 2 << 20, SEEK_DATA) == 2 << 20);
	r = lseek(fd, (1 << 20) + 4096, SEEK_DATA);
	CHECK(r >= (1 << 20) + 4096 && r <= 2 << 20);
	CHECK(lseek(fd, 2 << 20, SEEK_HOLE) == (2 << 20) + 4096);
	CHECK(close(fd) == 0);
	return 0;
}

static int case_fsync(void)
{
	int fd = open("y", O_RDWR | O_CREAT | O_TRUNC, 0644), dfd = open(".", O_RDONLY);

	CHECK(fd >= 0 && dfd >= 0);
	CHECK(write(fd, "data", 4) == 4);
	CHECK(fsync(fd) == 0);
	CHECK(write(fd, "more", 4) == 4);
	CHECK(fdatasync(fd) == 0);
	CHECK(fsync(dfd) == 0);
	CHECK(close(fd) == 0 && close(dfd) == 0);
	return 0;
}

static int case_fsync_eio(int nr)
{
	int fds[16];
	char buf[4096];

	if (nr < 1 || nr > 16)
		nr = 4;
	for (int i = 0; i < nr; i++) {
		fds[i] = open("e", O_RDWR | O_CREAT, 0644);
		CHECK(fds[i] >= 0);
	}
	memset(buf, 'e', sizeof(buf));
	CHECK(pwrite(fds[0], buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	for (int i = 0; i < nr; i++)
		CHECK_ERR(fsync(fds[i]), EIO);
	for (int i = 0; i < nr; i++)
		CHECK(fsync(fds[i]) == 0);
	for (int i = 0; i < nr; i++)
		CHECK(close(fds[i]) == 0);
	return 0;
}

/* Runs fn as uid/gid 65534 in a child; its failures count here. */
static void as_nobody(void (*fn)(void))
{
	pid_t pid = fork();
	int ws;

	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(2);
		failures = 0;
		fn();
		_exit(failures ? 1 : 0);
	}
	CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

static void nobody_writes(void)
{
	int fd = open("suid", O_WRONLY);

	CHECK(fd >= 0 && write(fd, "x", 1) == 1);
	struct stat st;

	CHECK(fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0777);
	close(fd);
}

/* trusted.* names are listed only to CAP_SYS_ADMIN, as ext4 lists them. */
static void nobody_lists(void)
{
	char buf[256];
	ssize_t n = listxattr("tx", buf, sizeof(buf));

	CHECK(n == (ssize_t)sizeof("user.u") && !memcmp(buf, "user.u", sizeof("user.u")));
	CHECK(listxattr("tx", NULL, 0) == (ssize_t)sizeof("user.u"));
	CHECK_ERR(listxattr("tx", buf, 3), ERANGE);
	CHECK_ERR(getxattr("tx", "trusted.t", buf, sizeof(buf)), ENODATA);
}

static void nobody_truncates(void)
{
	CHECK(truncate("suid", 10) == 0);
}

static int case_posix(void)
{
	char name[300];
	struct statvfs sv;
	struct stat st;
	struct timespec ts[2] = { { .tv_sec = 1000000000, .tv_nsec = 5 },
				  { .tv_sec = 1200000000, .tv_nsec = 7 } };
	int fd;

	memset(name, 'n', sizeof(name));
	name[255] = '\0';
	put(name, "long");
	CHECK(has(name, "long"));
	name[255] = 'n';
	name[256] = '\0';
	CHECK_ERR(open(name, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	CHECK_ERR(mkdir(name, 0755), ENAMETOOLONG);
	CHECK_ERR(stat(name, &st), ENAMETOOLONG);

	put("app", "one");
	fd = open("app", O_WRONLY | O_APPEND);
	CHECK(fd >= 0 && lseek(fd, 0, SEEK_SET) == 0 && write(fd, "two", 3) == 3);
	close(fd);
	CHECK(has("app", "onetwo"));

	put("wo", "0123456789");
	fd = open("wo", O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, "ab", 2, 3) == 2);
	close(fd);
	CHECK(has("wo", "012ab56789"));

	put("gone", "still here");
	fd = open("gone", O_RDONLY);
	CHECK(fd >= 0 && unlink("gone") == 0 && access("gone", F_OK) == -1);
	{
		char buf[32] = { 0 };

		CHECK(read(fd, buf, sizeof(buf)) == 10 && !strcmp(buf, "still here"));
		CHECK(fstat(fd, &st) == 0 && st.st_nlink == 0);
	}
	close(fd);

	put("l1", "L");
	CHECK(link("l1", "l2") == 0 && stat("l1", &st) == 0 && st.st_nlink == 2);
	CHECK(unlink("l2") == 0 && stat("l1", &st) == 0 && st.st_nlink == 1);
	CHECK_ERR(link("l1", "l1"), EEXIST);

	CHECK(mkdir("full", 0755) == 0);
	put("full/f", "");
	CHECK_ERR(rmdir("full"), ENOTEMPTY);
	CHECK(stat(".", &st) == 0);
	CHECK(unlink("full/f") == 0 && rmdir("full") == 0);

	CHECK(utimensat(AT_FDCWD, "l1", ts, 0) == 0);
	CHECK(stat("l1", &st) == 0 && st.st_atim.tv_sec == ts[0].tv_sec &&
	      st.st_atim.tv_nsec == ts[0].tv_nsec && st.st_mtim.tv_sec == ts[1].tv_sec &&
	      st.st_mtim.tv_nsec == ts[1].tv_nsec);

	CHECK(mkfifo("fifo", 0600) == 0 && stat("fifo", &st) == 0 && S_ISFIFO(st.st_mode));
	CHECK(statvfs(".", &sv) == 0 && sv.f_namemax == 255);

	/* Set-ID bits: cleared by another user's write and truncate, and by chown. */
	if (geteuid() == 0) {
		CHECK(chmod(".", 0777) == 0);
		put("suid", "");
		CHECK(chmod("suid", 06777) == 0);
		as_nobody(nobody_writes);
		put("tx", "");
		CHECK(setxattr("tx", "trusted.t", "1", 1, 0) == 0 &&
		      setxattr("tx", "user.u", "2", 1, 0) == 0);
		as_nobody(nobody_lists);
		CHECK(listxattr("tx", NULL, 0) ==
		      (ssize_t)(sizeof("trusted.t") + sizeof("user.u")));
		CHECK(stat("suid", &st) == 0 && (st.st_mode & 07777) == 0777);
		CHECK(chmod("suid", 06777) == 0);
		as_nobody(nobody_truncates);
		CHECK(stat("suid", &st) == 0 && (st.st_mode & 07777) == 0777 && st.st_size == 10);
		CHECK(chmod("suid", 06777) == 0);
		CHECK(chown("suid", 65534, 65534) == 0);
		CHECK(stat("suid", &st) == 0 && (st.st_mode & 07777) == 0777);
		/* root's own write keeps them (CAP_FSETID), as on ext4 */
		CHECK(chmod("suid", 06777) == 0);
		fd = open("suid", O_WRONLY);
		CHECK(fd >= 0 && write(fd, "r", 1) == 1 && fsync(fd) == 0);
		close(fd);
		CHECK(stat("suid", &st) == 0 && (st.st_mode & 07777) == 06777);
	}
	return 0;
}

#define RD_NAMES 3000

/* The index of a name "nNNNNN" made by case_readdir(), or -1. */
static int rd_index(const char *name)
{
	char *end;
	long i;

	if (name[0] != 'n' || !name[1])
		return -1;
	i = strtol(name + 1, &end, 10);
	return *end || i < 0 || i >= RD_NAMES ? -1 : (int)i;
}

/*
 * Lists "." once, counting each name of rd_index() in seen[]; with churn,
 * creates and removes other names ("x...") while it lists.  Returns the
 * number of entries read that were neither ours, ".", "..", "stale" nor
 * "x...".
 */
static int rd_list(unsigned char *seen, bool churn)
{
	DIR *d = opendir(".");
	struct dirent *e;
	int strays = 0, n = 0;
	char nm[32];

	CHECK(d != NULL);
	if (!d)
		return 1;
	memset(seen, 0, RD_NAMES);
	while ((errno = 0, e = readdir(d))) {
		int i = rd_index(e->d_name);

		if (i >= 0)
			seen[i]++;
		else if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && e->d_name[0] != 'x' &&
			 strcmp(e->d_name, "stale"))
			strays++;
		if (churn && ++n % 50 == 0) {
			snprintf(nm, sizeof(nm), "x%d", n);
			put(nm, "");
			snprintf(nm, sizeof(nm), "x%d", n - 100);
			unlink(nm); /* may not exist */
		}
	}
	CHECK(errno == 0);
	closedir(d);
	return strays;
}

/* A getdents64() record. */
struct rd_dirent64 {
	unsigned long long d_ino;
	long long d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/*
 * The chmod between two getdents64() calls (see the top).  Runs in a fresh
 * directory, so the kernel has no cached
 * listing and no dentry of any of its names yet.
 */
static void rd_chmod_between_batches(void)
{
	static unsigned char seen[RD_NAMES];
	static char buf[256 << 10];
	char nm[32];
	struct stat st;
	int fd, victims = 0, stale = 0;
	long n;

	CHECK(mkdir("stale", 0755) == 0);
	for (int i = 0; i < RD_NAMES; i++) {
		snprintf(nm, sizeof(nm), "stale/n%05d", i);
		int f = open(nm, O_WRONLY | O_CREAT | O_EXCL, 0644);

		CHECK(f >= 0);
		if (f >= 0)
			close(f);
	}
	fd = open("stale", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	/* One READDIRPLUS of up to the buffer's size (kernel 6.16+; else a page). */
	memset(seen, 0, sizeof(seen));
	n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
	CHECK(n > 0);
	for (long p = 0; p < n; p += ((struct rd_dirent64 *)(buf + p))->d_reclen) {
		int i = rd_index(((struct rd_dirent64 *)(buf + p))->d_name);

		if (i >= 0)
			seen[i] = 1;
	}
	/* Every name still to come: the daemon reads the next batch meanwhile. */
	for (int i = 0; i < RD_NAMES; i++) {
		if (seen[i])
			continue;
		snprintf(nm, sizeof(nm), "stale/n%05d", i);
		CHECK(chmod(nm, 0600) == 0);
		victims++;
	}
	CHECK(victims > 0);
	/* The rest of the listing, which names them. */
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		;
	CHECK(n == 0);
	close(fd);
	for (int i = 0; i < RD_NAMES; i++) {
		if (seen[i])
			continue;
		snprintf(nm, sizeof(nm), "stale/n%05d", i);
		CHECK(stat(nm, &st) == 0);
		if ((st.st_mode & 07777) != 0600 && stale++ < 3)
			fprintf(stderr,
				"FAIL %s: %s has mode %o after chmod 600 during the listing\n",
				__func__, nm, (unsigned)(st.st_mode & 07777));
	}
	CHECK(stale == 0);
}

static int case_readdir(void)
{
	static unsigned char seen[RD_NAMES];
	enum {
		STEP = 97,
		MARKS = RD_NAMES / STEP + 2
	};
	long pos[MARKS];
	char next[MARKS][32], nm[32];
	int marks = 0, bad = 0;
	struct dirent *e;
	DIR *d;

	rd_chmod_between_batches();
	for (int i = 0; i < RD_NAMES; i++) {
		snprintf(nm, sizeof(nm), "n%05d", i);
		int fd = open(nm, O_WRONLY | O_CREAT | O_EXCL, 0644);

		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
	}
	for (int pass = 0; pass < 2; pass++) {
		CHECK(rd_list(seen, pass == 1) == 0);
		for (int i = 0; i < RD_NAMES; i++)
			if (seen[i] != 1 && bad++ < 5)
				fprintf(stderr, "FAIL %s: n%05d listed %u times (pass %d)\n",
					__func__, i, seen[i], pass);
	}
	CHECK(bad == 0);

	/* telldir every STEP entries, then seekdir back to each. */
	d = opendir(".");
	CHECK(d != NULL);
	if (!d)
		return 1;
	for (int n = 0;; n++) {
		long p = n % STEP == 0 ? telldir(d) : -1;

		errno = 0;
		e = readdir(d);
		if (!e)
			break;
		if (p != -1 && marks < MARKS) {
			pos[marks] = p;
			snprintf(next[marks], sizeof(next[0]), "%.31s", e->d_name);
			marks++;
		}
	}
	CHECK(errno == 0);
	CHECK(marks >= RD_NAMES / STEP);
	/* Backwards, so each seek goes somewhere other than where the last left off. */
	for (int m = marks - 1; m >= 0; m--) {
		seekdir(d, pos[m]);
		errno = 0;
		e = readdir(d);
		CHECK(e != NULL);
		if (e && strcmp(e->d_name, next[m]))
			fprintf(stderr, "FAIL %s: seekdir to mark %d read %s, want %s\n", __func__,
				m, e->d_name, next[m]),
				failures++;
	}
	closedir(d);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
			"usage: fuse_ops rename|xattr|fallocate|seek|fsync|fsync-eio N|posix|readdir DIR\n");
		return 2;
	}
	const char *c = argv[1], *dir = argv[argc - 1];

	if (chdir(dir)) {
		fprintf(stderr, "fuse_ops: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if (!strcmp(c, "rename"))
		case_rename();
	else if (!strcmp(c, "xattr"))
		case_xattr();
	else if (!strcmp(c, "fallocate"))
		case_fallocate();
	else if (!strcmp(c, "seek"))
		case_seek();
	else if (!strcmp(c, "fsync"))
		case_fsync();
	else if (!strcmp(c, "fsync-eio"))
		case_fsync_eio(argc > 3 ? atoi(argv[2]) : 4);
	else if (!strcmp(c, "posix"))
		case_posix();
	else if (!strcmp(c, "readdir"))
		case_readdir();
	else {
		fprintf(stderr, "fuse_ops: unknown case %s\n", c);
		return 2;
	}
	if (failures)
		fprintf(stderr, "fuse_ops %s: %d checks failed\n", c, failures);
	return failures ? 1 : 0;
}
