// SPDX-License-Identifier: GPL-2.0
/*
 * stress: many processes changing one tree at once, each logging what it
 * did; then a check that the tree is exactly what the logs say.
 *
 *	stress [-v] [-k] [-p PROCS] [-t SECONDS] [-n OPS] [-S SEED] DIRECTORY
 *	stress -c DIRECTORY/stress.PID   (check again, e.g. after a remount)
 *
 * In DIRECTORY/stress.PID, PROCS processes (default 4) work for SECONDS
 * (default 3; at most OPS operations each when given) in one tree: eight
 * shared directories d0..d7 that all of them create in, plus directories of
 * their own.  Each process only ever names entries "pN_..." of its own, so
 * what the tree must hold follows from the logs alone, while the directories
 * and a shared file (each process writes its own stripes of it) are changed
 * by all at once.  Operations: create a file with seeded content, overwrite or
 * append a range, truncate, rename (also over another of its files, and
 * directories with what they hold), hard-link, unlink, symlink, chmod, set
 * an extended attribute, mkdir, rmdir, fsync, pwrite a stripe of the shared
 * file, and reads: a file read back against
 * what it must hold, a shared directory listed while the others change it.
 *
 * Each process logs every operation once it has succeeded to logs/pN.log
 * and applies the same line to its model (one parser for both).  An error
 * that should not happen stops that process with FAIL.  Then the checker
 * replays every log and walks the tree: every name the logs leave exists
 * with its type, size, content (read whole), mode, xattr, symlink target,
 * link count and inode shared by its hard links; no other name exists; every directory lists each entry
 * once and has 2 + subdirectories links; the shared file holds every stripe.
 * Output ends with "N passed, N failed" (each entry and directory checked is
 * one check).  The tree and logs are kept when something failed (or with -k),
 * and -c checks a kept one again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "posix_util.h"

#define NSHARED 8
#define MAXNAMES 400
#define MAXSIZE (96 * 1024)
#define STRIPE 4096
#define STRIPES 16 /* per process in the shared file */

static int nprocs = 4;
static double seconds = 3;
static long maxops = -1;
static uint64_t seed;
static bool verbose, keep;
static char base[PATH_MAX], tree[PATH_MAX + 16], logs[PATH_MAX + 16];
static long npass, nfail;

__attribute__((format(printf, 1, 2))) static void failf(const char *fmt, ...)
{
	va_list ap;

	nfail++;
	printf("FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* ---- the model: names of one process, each a directory or an object ---- */

struct obj {
	unsigned char *data;
	size_t size;
	int refs; /* names pointing here */
	bool lnk; /* a symlink to target */
	char target[32];
	mode_t mode;
	bool has_x; /* user.s holds 32 bytes of gen(xseed) */
	uint64_t xseed;
};

struct name {
	char path[256]; /* relative to the tree */
	bool dir;
	int obj;
};

struct model {
	struct name names[MAXNAMES];
	int nnames;
	struct obj objs[MAXNAMES];
	int nobjs;
	unsigned char stripes[STRIPES][STRIPE]; /* this process's part of the shared file */
	bool stripe_written[STRIPES];
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* The content a log line's seed stands for: a byte per position. */
static void gen(unsigned char *p, uint64_t dseed, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)mix(dseed * 1000003 + (off + i) / 8) >> ((off + i) % 8);
}

static int find(struct model *m, const char *path)
{
	for (int i = 0; i < m->nnames; i++)
		if (!strcmp(m->names[i].path, path))
			return i;
	return -1;
}

static int new_obj(struct model *m)
{
	for (int i = 0; i < m->nobjs; i++)
		if (!m->objs[i].refs && !m->objs[i].data)
			return i;
	return m->nobjs < MAXNAMES ? m->nobjs++ : -1;
}

static void drop_name(struct model *m, int i)
{
	struct name *n = &m->names[i];

	if (!n->dir && --m->objs[n->obj].refs == 0) {
		free(m->objs[n->obj].data);
		m->objs[n->obj].data = NULL;
		m->objs[n->obj].size = 0;
	}
	m->names[i] = m->names[--m->nnames];
}

static void resize(struct obj *o, size_t size)
{
	o->data = realloc(o->data, size ? size : 1);
	if (size > o->size)
		memset(o->data + o->size, 0, size - o->size);
	o->size = size;
}

/*
 * Applies one log line to the model; 0, or -1 when the line does not fit it
 * (an unknown name, a malformed line).
 */
static int apply(struct model *m, const char *line)
{
	char a[256], b[256];
	unsigned long long x, y, z;
	int i, j;

	if (sscanf(line, "create %255s %llu %llu", a, &x, &y) == 3) {
		if (find(m, a) >= 0 || m->nnames >= MAXNAMES || (j = new_obj(m)) < 0)
			return -1;
		m->objs[j] = (struct obj){ .mode = 0644 };
		resize(&m->objs[j], x);
		gen(m->objs[j].data, y, 0, x);
		m->objs[j].refs = 1;
		m->names[m->nnames++] = (struct name){ .dir = false, .obj = j };
		snprintf(m->names[m->nnames - 1].path, 256, "%s", a);
		return 0;
	}
	if (sscanf(line, "symlink %255s %31s", a, b) == 2) {
		if (find(m, a) >= 0 || m->nnames >= MAXNAMES || (j = new_obj(m)) < 0)
			return -1;
		m->objs[j] = (struct obj){ .lnk = true, .refs = 1, .data = malloc(1) };
		if (strlen(b) >= sizeof(m->objs[j].target))
			return -1;
		memcpy(m->objs[j].target, b, strlen(b) + 1);
		m->names[m->nnames++] = (struct name){ .dir = false, .obj = j };
		snprintf(m->names[m->nnames - 1].path, 256, "%s", a);
		return 0;
	}
	if (sscanf(line, "chmod %255s %llo", a, &x) == 2) {
		if ((i = find(m, a)) < 0 || m->names[i].dir || m->objs[m->names[i].obj].lnk)
			return -1;
		m->objs[m->names[i].obj].mode = x;
		return 0;
	}
	if (sscanf(line, "xattr %255s %llu", a, &x) == 2) {
		if ((i = find(m, a)) < 0 || m->names[i].dir || m->objs[m->names[i].obj].lnk)
			return -1;
		m->objs[m->names[i].obj].has_x = true;
		m->objs[m->names[i].obj].xseed = x;
		return 0;
	}
	if (sscanf(line, "write %255s %llu %llu %llu", a, &x, &y, &z) == 4) {
		if ((i = find(m, a)) < 0 || m->names[i].dir || m->objs[m->names[i].obj].lnk)
			return -1;
		struct obj *o = &m->objs[m->names[i].obj];

		if (x + y > o->size)
			resize(o, x + y);
		gen(o->data + x, z, x, y);
		return 0;
	}
	if (sscanf(line, "truncate %255s %llu", a, &x) == 2) {
		if ((i = find(m, a)) < 0 || m->names[i].dir || m->objs[m->names[i].obj].lnk)
			return -1;
		resize(&m->objs[m->names[i].obj], x);
		return 0;
	}
	if (sscanf(line, "link %255s %255s", a, b) == 2) {
		if ((i = find(m, a)) < 0 || m->names[i].dir || find(m, b) >= 0 ||
		    m->nnames >= MAXNAMES)
			return -1;
		m->objs[m->names[i].obj].refs++;
		m->names[m->nnames] = m->names[i];
		snprintf(m->names[m->nnames++].path, 256, "%s", b);
		return 0;
	}
	if (sscanf(line, "unlink %255s", a) == 1 || sscanf(line, "rmdir %255s", a) == 1) {
		if ((i = find(m, a)) < 0 || m->names[i].dir != (line[0] == 'r'))
			return -1;
		drop_name(m, i);
		return 0;
	}
	if (sscanf(line, "mkdir %255s", a) == 1) {
		if (find(m, a) >= 0 || m->nnames >= MAXNAMES)
			return -1;
		m->names[m->nnames++] = (struct name){ .dir = true, .obj = -1 };
		snprintf(m->names[m->nnames - 1].path, 256, "%s", a);
		return 0;
	}
	if (sscanf(line, "rename %255s %255s", a, b) == 2) {
		size_t la = strlen(a);

		if ((i = find(m, a)) < 0)
			return -1;
		if ((j = find(m, b)) >= 0) {
			if (m->names[j].dir != m->names[i].dir)
				return -1;
			if (!m->names[i].dir && m->names[j].obj == m->names[i].obj)
				return 0; /* two links of one file: nothing happens */
			drop_name(m, j);
			i = find(m, a);
		}
		snprintf(m->names[i].path, 256, "%s", b);
		if (m->names[i].dir) {
			/* what the directory holds moves with it */
			for (int k = 0; k < m->nnames; k++) {
				char tmp[256];

				if (strncmp(m->names[k].path, a, la) || m->names[k].path[la] != '/')
					continue;
				snprintf(tmp, sizeof(tmp), "%s%s", b, m->names[k].path + la);
				snprintf(m->names[k].path, 256, "%s", tmp);
			}
		}
		return 0;
	}
	if (sscanf(line, "stripe %llu %llu", &x, &y) == 2) {
		if (x >= STRIPES)
			return -1;
		gen(m->stripes[x], y, 0, STRIPE);
		m->stripe_written[x] = true;
		return 0;
	}
	return -1;
}

/* ---- a worker ---- */

struct worker {
	int id;
	uint64_t rng;
	struct model *m;
	FILE *log;
	long ops, checks, seq;
	unsigned char buf[MAXSIZE + STRIPE];
};

static uint64_t rnd(struct worker *w)
{
	w->rng = mix(w->rng + 0x9E3779B97F4A7C15ULL);
	return w->rng;
}

static int rnd_below(struct worker *w, int n)
{
	return n > 0 ? (int)(rnd(w) % (uint64_t)n) : 0;
}

__attribute__((format(printf, 2, 3), noreturn)) static void wfail(struct worker *w, const char *fmt,
								  ...)
{
	va_list ap;

	printf("FAIL stress p%d after %ld ops: ", w->id, w->ops);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (log: %s/p%d.log)\n", logs, w->id);
	if (w->log)
		fclose(w->log);
	_exit(1);
}

/* Logs what succeeded and applies it to the model. */
__attribute__((format(printf, 2, 3))) static void done(struct worker *w, const char *fmt, ...)
{
	char line[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(w->log, "%s\n", line);
	if (apply(w->m, line))
		wfail(w, "the model refuses its own line: %s", line);
	w->ops++;
}

static const char *tpath(const char *rel)
{
	static char bufs[2][2 * PATH_MAX];
	static int i;
	char *b = bufs[i++ & 1];

	snprintf(b, sizeof(bufs[0]), "%s/%s", tree, rel);
	return b;
}

/*
 * A random name of ours: a regular file (want 0), a directory (1), anything
 * but a directory (2); -1 if none.
 */
static int pick_name(struct worker *w, int want)
{
	int n = w->m->nnames, start = rnd_below(w, n);

	for (int k = 0; k < n; k++) {
		int i = (start + k) % n;

		struct name *nm = &w->m->names[i];

		if (want == 1 ? nm->dir : !nm->dir && (want == 2 || !w->m->objs[nm->obj].lnk))
			return i;
	}
	return -1;
}

/* A fresh name of ours in a shared directory or in one of our directories. */
static void fresh(struct worker *w, char *out, size_t n, bool dir)
{
	int d = rnd_below(w, 3) ? -1 : pick_name(w, 1);

	if (d >= 0 && strlen(w->m->names[d].path) < 200)
		snprintf(out, n, "%s/p%d_%s%ld", w->m->names[d].path, w->id, dir ? "d" : "",
			 w->seq++);
	else
		snprintf(out, n, "d%d/p%d_%s%ld", rnd_below(w, NSHARED), w->id, dir ? "d" : "",
			 w->seq++);
}

static const char *nm_shared(int i)
{
	static char b[16];

	snprintf(b, sizeof(b), "d%d", i);
	return b;
}

static void check_file(struct worker *w, int i)
{
	struct name *nm = &w->m->names[i];
	struct obj *o = &w->m->objs[nm->obj];
	int fd = open(tpath(nm->path), O_RDONLY);
	ssize_t got;

	if (fd < 0)
		wfail(w, "open %s: %s", nm->path, strerror(errno));
	got = read(fd, w->buf, sizeof(w->buf));
	close(fd);
	if (got != (ssize_t)o->size || memcmp(w->buf, o->data, o->size))
		wfail(w, "read back %s: %zd bytes, expected %zu%s", nm->path, got, o->size,
		      got == (ssize_t)o->size ? ", content differs" : "");
	w->checks++;
}

static bool no_xattrs;

static void one_op(struct worker *w, int shared_fd)
{
	char a[256], b[300];
	int r = rnd_below(w, 110), i, fd;
	uint64_t ds = rnd(w) >> 16;

	if (r < 20) { /* create */
		size_t size = rnd_below(w, 4) ? rnd_below(w, 8192) : rnd_below(w, MAXSIZE);

		if (w->m->nnames >= MAXNAMES - 2)
			return;
		fresh(w, a, sizeof(a), false);
		gen(w->buf, ds, 0, size);
		fd = open(tpath(a), O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0 || write(fd, w->buf, size) != (ssize_t)size || close(fd))
			wfail(w, "create %s (%zu bytes): %s", a, size, strerror(errno));
		done(w, "create %s %zu %" PRIu64, a, size, ds);
	} else if (r < 32) { /* overwrite or append a range */
		if ((i = pick_name(w, 0)) < 0)
			return;
		size_t sz = w->m->objs[w->m->names[i].obj].size;
		size_t off = rnd_below(w, 3) ? (size_t)rnd_below(w, sz + 1) : sz;
		size_t len = 1 + rnd_below(w, 16384);

		if (off + len > MAXSIZE)
			return;
		gen(w->buf, ds, off, len);
		fd = open(tpath(w->m->names[i].path), O_WRONLY);
		if (fd < 0 || pwrite(fd, w->buf, len, off) != (ssize_t)len ||
		    (rnd_below(w, 8) == 0 && fsync(fd)) || close(fd))
			wfail(w, "write %s: %s", w->m->names[i].path, strerror(errno));
		done(w, "write %s %zu %zu %" PRIu64, w->m->names[i].path, off, len, ds);
	} else if (r < 38) { /* truncate */
		size_t size = rnd_below(w, MAXSIZE);

		if ((i = pick_name(w, 0)) < 0)
			return;
		if (truncate(tpath(w->m->names[i].path), size))
			wfail(w, "truncate %s: %s", w->m->names[i].path, strerror(errno));
		done(w, "truncate %s %zu", w->m->names[i].path, size);
	} else if (r < 52) { /* rename a file, sometimes over another of ours */
		int j = rnd_below(w, 4) ? -1 : pick_name(w, 2);

		if ((i = pick_name(w, 2)) < 0)
			return;
		snprintf(a, sizeof(a), "%s", w->m->names[i].path);
		if (j >= 0)
			snprintf(b, sizeof(b), "%s", w->m->names[j].path);
		else
			fresh(w, b, sizeof(b), false);
		if (rename(tpath(a), tpath(b)))
			wfail(w, "rename %s %s: %s", a, b, strerror(errno));
		done(w, "rename %s %s", a, b);
	} else if (r < 60) { /* hard link */
		if ((i = pick_name(w, 2)) < 0 || w->m->nnames >= MAXNAMES - 2)
			return;
		fresh(w, b, sizeof(b), false);
		if (link(tpath(w->m->names[i].path), tpath(b)))
			wfail(w, "link %s %s: %s", w->m->names[i].path, b, strerror(errno));
		done(w, "link %s %s", w->m->names[i].path, b);
	} else if (r < 72) { /* unlink */
		if ((i = pick_name(w, 2)) < 0)
			return;
		if (unlink(tpath(w->m->names[i].path)))
			wfail(w, "unlink %s: %s", w->m->names[i].path, strerror(errno));
		done(w, "unlink %s", w->m->names[i].path);
	} else if (r < 76) { /* mkdir */
		if (w->m->nnames >= MAXNAMES - 2)
			return;
		fresh(w, a, sizeof(a), true);
		if (mkdir(tpath(a), 0755))
			wfail(w, "mkdir %s: %s", a, strerror(errno));
		done(w, "mkdir %s", a);
	} else if (r < 80) { /* rmdir, or empty it first */
		size_t l;

		if ((i = pick_name(w, 1)) < 0)
			return;
		snprintf(a, sizeof(a), "%s", w->m->names[i].path);
		l = strlen(a);
		for (int k = 0; k < w->m->nnames; k++)
			if (!strncmp(w->m->names[k].path, a, l) && w->m->names[k].path[l] == '/')
				return; /* not empty: leave it */
		if (rmdir(tpath(a)))
			wfail(w, "rmdir %s: %s", a, strerror(errno));
		done(w, "rmdir %s", a);
	} else if (r < 84) { /* rename a directory into a shared one */
		if ((i = pick_name(w, 1)) < 0)
			return;
		snprintf(a, sizeof(a), "%s", w->m->names[i].path);
		snprintf(b, sizeof(b), "d%d/p%d_d%ld", rnd_below(w, NSHARED), w->id, w->seq++);
		for (int k = 0; k < w->m->nnames; k++)
			if (strlen(w->m->names[k].path) - strlen(a) + strlen(b) > 250)
				return;
		if (rename(tpath(a), tpath(b)))
			wfail(w, "rename dir %s %s: %s", a, b, strerror(errno));
		done(w, "rename %s %s", a, b);
	} else if (r < 90) { /* a stripe of the shared file */
		int s = rnd_below(w, STRIPES);

		gen(w->buf, ds, 0, STRIPE);
		if (pwrite(shared_fd, w->buf, STRIPE, ((off_t)s * nprocs + w->id) * STRIPE) !=
		    STRIPE)
			wfail(w, "pwrite shared stripe %d: %s", s, strerror(errno));
		done(w, "stripe %d %" PRIu64, s, ds);
	} else if (r < 95) { /* read a file back */
		if ((i = pick_name(w, 0)) >= 0)
			check_file(w, i);
	} else if (r < 100) { /* list a shared directory while the others change it */
		DIR *d = opendir(tpath(nm_shared(rnd_below(w, NSHARED))));
		struct dirent *e;

		if (!d)
			wfail(w, "opendir: %s", strerror(errno));
		errno = 0;
		while ((e = readdir(d)))
			;
		if (errno)
			wfail(w, "readdir: %s", strerror(errno));
		closedir(d);
		w->checks++;
	} else if (r < 104) { /* symlink */
		if (w->m->nnames >= MAXNAMES - 2)
			return;
		fresh(w, a, sizeof(a), false);
		snprintf(b, sizeof(b), "target-%" PRIu64, ds % 100000);
		if (symlink(b, tpath(a)))
			wfail(w, "symlink %s: %s", a, strerror(errno));
		done(w, "symlink %s %s", a, b);
	} else if (r < 107) { /* chmod */
		mode_t mode = 0400 | (rnd(w) & 0777);

		if ((i = pick_name(w, 0)) < 0)
			return;
		if (chmod(tpath(w->m->names[i].path), mode))
			wfail(w, "chmod %s: %s", w->m->names[i].path, strerror(errno));
		done(w, "chmod %s %o", w->m->names[i].path, (unsigned)mode);
	} else { /* an extended attribute */
		if (no_xattrs || (i = pick_name(w, 0)) < 0)
			return;
		gen(w->buf, ds, 0, 32);
		if (setxattr(tpath(w->m->names[i].path), "user.s", w->buf, 32, 0)) {
			if (errno == EOPNOTSUPP) {
				no_xattrs = true;
				return;
			}
			wfail(w, "setxattr %s: %s", w->m->names[i].path, strerror(errno));
		}
		done(w, "xattr %s %" PRIu64, w->m->names[i].path, ds);
	}
}

static long *shared_checks;

static void work(int id, double deadline)
{
	static struct model m;
	struct worker *w = calloc(1, sizeof(*w));
	char path[PATH_MAX + 64];
	int shared_fd;

	if (!w)
		_exit(1);
	w->id = id;
	w->m = &m;
	w->rng = mix(seed + id);
	snprintf(path, sizeof(path), "%s/p%d.log", logs, id);
	w->log = fopen(path, "w");
	shared_fd = open(tpath("shared"), O_WRONLY);
	if (!w->log || shared_fd < 0)
		wfail(w, "open %s or the shared file: %s", path, strerror(errno));
	for (;;) {
		struct timespec t;

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((maxops >= 0 && w->ops >= maxops) ||
		    (maxops < 0 && t.tv_sec + t.tv_nsec / 1e9 >= deadline))
			break;
		one_op(w, shared_fd);
	}
	if (fflush(w->log) || fsync(fileno(w->log)) || fclose(w->log))
		wfail(w, "writing the log: %s", strerror(errno));
	w->log = NULL;
	close(shared_fd);
	shared_checks[id] = w->checks;
	if (verbose)
		printf("p%d: %ld operations, %ld read checks\n", id, w->ops, w->checks);
	_exit(0);
}

/* ---- the checker ---- */

static struct model *models;
static bool (*found)[MAXNAMES];
static ino_t (*obj_ino)[MAXNAMES];
static unsigned char *rbuf;

static int replay(int id)
{
	char path[PATH_MAX + 64], line[700];
	FILE *f;
	long n = 0;

	snprintf(path, sizeof(path), "%s/p%d.log", logs, id);
	f = fopen(path, "r");
	if (!f) {
		failf("p%d: cannot read its log %s: %s", id, path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (apply(&models[id], line)) {
			failf("p%d: log line %ld does not replay: %s", id, n, line);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	if (verbose)
		printf("p%d: %ld log lines replayed, %d names\n", id, n, models[id].nnames);
	return 0;
}

static void check_entry(const char *rel, const struct stat *s)
{
	const char *base_name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	int id, i;
	struct name *nm;

	if (sscanf(base_name, "p%d_", &id) != 1 || id < 0 || id >= nprocs ||
	    (i = find(&models[id], rel)) < 0) {
		failf("%s: in the tree, not in any log", rel);
		return;
	}
	nm = &models[id].names[i];
	found[id][i] = true;
	if (nm->dir			   ? !S_ISDIR(s->st_mode)
	    : models[id].objs[nm->obj].lnk ? !S_ISLNK(s->st_mode)
					   : !S_ISREG(s->st_mode)) {
		failf("%s: mode %o, the log made a %s", rel, (unsigned)s->st_mode,
		      nm->dir			     ? "directory"
		      : models[id].objs[nm->obj].lnk ? "symlink"
						     : "file");
		return;
	}
	if (!nm->dir && models[id].objs[nm->obj].lnk) {
		struct obj *o = &models[id].objs[nm->obj];
		char t[64];
		ssize_t n = readlink(tpath(rel), t, sizeof(t));

		if (n != (ssize_t)strlen(o->target) || memcmp(t, o->target, n)) {
			failf("%s: symlink to \"%.*s\", the log says \"%s\"", rel,
			      n < 0 ? 0 : (int)n, t, o->target);
			return;
		}
	} else if (!nm->dir) {
		struct obj *o = &models[id].objs[nm->obj];
		unsigned char x[64], want[32];
		ssize_t n;

		if ((s->st_mode & 07777) != o->mode) {
			failf("%s: mode %o, the log says %o", rel, (unsigned)(s->st_mode & 07777),
			      (unsigned)o->mode);
			return;
		}
		n = getxattr(tpath(rel), "user.s", x, sizeof(x));
		gen(want, o->xseed, 0, 32);
		if (o->has_x ? n != 32 || memcmp(x, want, 32) : n >= 0) {
			failf("%s: xattr user.s of %zd bytes, the log says %s", rel, n,
			      o->has_x ? "32 bytes" : "none");
			return;
		}
	}
	if (!nm->dir) {
		struct obj *o = &models[id].objs[nm->obj];
		int fd = o->lnk ? -1 : open(tpath(rel), O_RDONLY);
		ssize_t got = fd < 0 ? -1 : read(fd, rbuf, MAXSIZE + 1);

		if (fd >= 0)
			close(fd);
		if (!o->lnk && (s->st_size != (off_t)o->size || got != (ssize_t)o->size ||
				memcmp(rbuf, o->data, o->size))) {
			failf("%s: size %lld (read %zd), the log says %zu%s", rel,
			      (long long)s->st_size, got, o->size,
			      got == (ssize_t)o->size ? ": content differs" : "");
			return;
		}
		if (s->st_nlink != (nlink_t)o->refs) {
			failf("%s: nlink %lu, the log leaves %d names", rel,
			      (unsigned long)s->st_nlink, o->refs);
			return;
		}
		if (!obj_ino[id][nm->obj])
			obj_ino[id][nm->obj] = s->st_ino;
		else if (obj_ino[id][nm->obj] != s->st_ino) {
			failf("%s: inode %llu, but another link of it has %llu", rel,
			      (unsigned long long)s->st_ino,
			      (unsigned long long)obj_ino[id][nm->obj]);
			return;
		}
	}
	npass++;
}

/* Walks a directory of the tree: each entry once, nlink = 2 + subdirectories. */
static void walk(const char *rel, bool top)
{
	DIR *d = opendir(rel[0] ? tpath(rel) : tree);
	struct dirent *e;
	char **names = NULL;
	int n = 0, cap = 0, subdirs = 0, bad = 0;
	struct stat ds;

	if (!d) {
		failf("%s: opendir: %s", rel[0] ? rel : "(tree)", strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (int i = 0; i < n; i++)
			if (!strcmp(names[i], e->d_name)) {
				failf("%s/%s: listed twice", rel, e->d_name);
				bad++;
			}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		char child[600];
		struct stat s;

		snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
		if (lstat(tpath(child), &s)) {
			failf("%s: listed, but lstat: %s", child, strerror(errno));
			bad++;
			continue;
		}
		subdirs += !!S_ISDIR(s.st_mode);
		if (top) {
			if ((strncmp(names[i], "d", 1) || !S_ISDIR(s.st_mode)) &&
			    strcmp(names[i], "shared")) {
				failf("%s: unexpected at the top of the tree", child);
				bad++;
			}
		} else {
			check_entry(child, &s);
		}
		if (S_ISDIR(s.st_mode))
			walk(child, false);
	}
	if (lstat(rel[0] ? tpath(rel) : tree, &ds) || ds.st_nlink != (nlink_t)(2 + subdirs)) {
		failf("%s: nlink %lu with %d subdirectories", rel[0] ? rel : "(tree)",
		      (unsigned long)ds.st_nlink, subdirs);
		bad++;
	}
	if (!bad)
		npass++;
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void check_shared(void)
{
	static unsigned char stripe[STRIPE];
	int fd = open(tpath("shared"), O_RDONLY);
	off_t end = 0;
	struct stat s;
	int bad = 0;

	for (int id = 0; id < nprocs; id++)
		for (int k = 0; k < STRIPES; k++)
			if (models[id].stripe_written[k] &&
			    ((off_t)k * nprocs + id + 1) * STRIPE > end)
				end = ((off_t)k * nprocs + id + 1) * STRIPE;
	if (fd < 0 || fstat(fd, &s)) {
		failf("shared: %s", strerror(errno));
		return;
	}
	if (s.st_size != end) {
		failf("shared: size %lld, the logs say %lld", (long long)s.st_size, (long long)end);
		bad++;
	}
	for (int id = 0; id < nprocs; id++)
		for (int k = 0; k < STRIPES; k++) {
			off_t off = ((off_t)k * nprocs + id) * STRIPE;
			ssize_t got;

			if (off >= end)
				continue;
			got = pread(fd, stripe, STRIPE, off);
			if (got != STRIPE ||
			    (models[id].stripe_written[k]
				     ? memcmp(stripe, models[id].stripes[k], STRIPE)
				     : !all_zero(stripe, STRIPE))) {
				failf("shared: stripe %d of p%d (offset %lld) differs from the log",
				      k, id, (long long)off);
				bad++;
			}
		}
	close(fd);
	if (!bad)
		npass++;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: stress [-v] [-k] [-p PROCS] [-t SECONDS] [-n OPS] [-S SEED] DIRECTORY\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool check_only = false;
	struct timespec t;
	int opt, fd;

	seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	while ((opt = getopt(argc, argv, "vkp:t:n:S:c")) != -1) {
		switch (opt) {
		case 'v':
			verbose = true;
			break;
		case 'k':
			keep = true;
			break;
		case 'p':
			nprocs = atoi(optarg);
			break;
		case 't':
			seconds = atof(optarg);
			break;
		case 'n':
			maxops = atol(optarg);
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			check_only = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || nprocs < 1 || nprocs > 64)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (check_only)
		snprintf(base, sizeof(base), "%s", argv[optind]);
	else
		snprintf(base, sizeof(base), "%s/stress.%d", argv[optind], (int)getpid());
	snprintf(tree, sizeof(tree), "%s/tree", base);
	snprintf(logs, sizeof(logs), "%s/logs", base);
	if (check_only) {
		char p[PATH_MAX + 64];

		for (nprocs = 0; nprocs < 64; nprocs++) {
			snprintf(p, sizeof(p), "%s/p%d.log", logs, nprocs);
			if (access(p, F_OK))
				break;
		}
		if (!nprocs) {
			printf("skip: no logs in %s\n", logs);
			return 77;
		}
		keep = true;
		goto check;
	}
	if (mkdir(base, 0755) || mkdir(tree, 0755) || mkdir(logs, 0755)) {
		printf("skip: cannot make %s: %s\n", base, strerror(errno));
		return 77;
	}
	for (int i = 0; i < NSHARED; i++)
		if (mkdir(tpath(nm_shared(i)), 0755)) {
			printf("FAIL setup: mkdir %s: %s\n", nm_shared(i), strerror(errno));
			return 1;
		}
	fd = open(tpath("shared"), O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || close(fd)) {
		printf("FAIL setup: create the shared file: %s\n", strerror(errno));
		return 1;
	}
	printf("stress: seed %" PRIu64 ", %d processes, %g%s in %s\n", seed, nprocs,
	       maxops >= 0 ? (double)maxops : seconds, maxops >= 0 ? " ops each" : " s", base);
	shared_checks = mmap(NULL, nprocs * sizeof(*shared_checks), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_checks == MAP_FAILED)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (int i = 0; i < nprocs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			printf("FAIL fork: %s\n", strerror(errno));
			return 1;
		}
		if (pid == 0)
			work(i, t.tv_sec + t.tv_nsec / 1e9 + seconds);
	}
	for (int i = 0; i < nprocs; i++) {
		int st;

		if (wait(&st) < 0)
			break;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			if (WIFSIGNALED(st))
				printf("FAIL stress: a worker was killed by signal %d\n",
				       WTERMSIG(st));
			nfail++;
		}
	}
	for (int i = 0; i < nprocs; i++)
		npass += shared_checks[i];

check:
	/* the check: replay every log, walk the tree */
	models = calloc(nprocs, sizeof(*models));
	found = calloc(nprocs, sizeof(*found));
	obj_ino = calloc(nprocs, sizeof(*obj_ino));
	rbuf = malloc(MAXSIZE + 1);
	if (!models || !found || !obj_ino || !rbuf)
		return 1;
	for (int id = 0; id < nprocs; id++)
		replay(id);
	walk("", true);
	for (int id = 0; id < nprocs; id++)
		for (int i = 0; i < models[id].nnames; i++) {
			if (found[id][i])
				continue;
			failf("%s: the log of p%d leaves it, the tree has no such entry",
			      models[id].names[i].path, id);
		}
	check_shared();
	if (nfail)
		printf("the tree and logs are kept in %s\n", base);
	else if (!keep && rm_tree(AT_FDCWD, base))
		failf("remove %s: %s", base, strerror(errno));
	printf("%ld passed, %ld failed\n", npass, nfail);
	return nfail ? 1 : 0;
}
