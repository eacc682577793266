// SPDX-License-Identifier: GPL-2.0
/*
 * fsx: random file operations checked against an in-memory model, in the
 * manner of fsx.
 *
 *	fsx [-v] [-k] [-N OPS] [-S SEED] [-l MAXLEN] [-o MAXOP] [-p PROCS] [-f FILES]
 *	    [-x OP[,OP...]] DIRECTORY
 *
 * Each of PROCS processes (default 1) works on FILES files of its own
 * (default 1) in DIRECTORY/fsx.PID, with the seed SEED + its number, and does
 * OPS random operations (default 2000) among: write at any offset (unaligned
 * or block-aligned, inside the file or beyond its end), read (every byte
 * checked against the model), ftruncate up and down, fallocate (allocate,
 * KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE with and without KEEP_SIZE,
 * COLLAPSE_RANGE, INSERT_RANGE), copy_file_range (within a file and between
 * two), O_DIRECT reads and writes (block-aligned, through a second descriptor
 * of the same file, mixed with the buffered ones), reads and writes through
 * a shared mapping (as fsx's mapread/mapwrite: a mapwrite past the end
 * extends the file with ftruncate first, then msync(MS_SYNC)), fsync and fdatasync,
 * close and reopen, SEEK_DATA/SEEK_HOLE (the
 * answers must agree with the model: a hole reads as zeros), fstat's size
 * after every operation, and now and then a read of the whole file.  At the
 * end every file is read whole once more, and again through a new descriptor.
 *
 * The model is the file's bytes and size; bytes past the size are kept zero.
 * Operations the filesystem does not support (EOPNOTSUPP when probed first)
 * are not exercised; a note names them.  -x leaves out operations by name
 * (e.g. -x zero-range,zero-keep), to look past one known failure.
 *
 * A process stops at its first mismatch and prints FAIL with the seed, the
 * operation, the first differing byte (expected and found), and the last
 * operations it did.  Output ends with "N passed, N failed": passed counts the
 * checks made (reads, sizes, seeks), failed the processes that found a
 * mismatch or an unexpected error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
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
#include <time.h>
#include <unistd.h>

#include "posix_util.h"

#define BLOCK 4096
#define LOGN 64

enum op {
	OP_READ,
	OP_WRITE,
	OP_TRUNCATE,
	OP_FALLOC,
	OP_KEEP_SIZE,
	OP_PUNCH,
	OP_ZERO,
	OP_ZERO_KEEP,
	OP_COLLAPSE,
	OP_INSERT,
	OP_COPY,
	OP_FSYNC,
	OP_REOPEN,
	OP_SEEK,
	OP_VERIFY,
	OP_DREAD,
	OP_DWRITE,
	OP_MREAD,
	OP_MWRITE,
	OP_NR,
};

static const char *const op_names[] = {
	"read",	      "write",	    "truncate",	 "fallocate", "falloc-keep",
	"punch-hole", "zero-range", "zero-keep", "collapse",  "insert",
	"copy-range", "fsync",	    "reopen",	 "seek",      "verify",
	"dio-read",   "dio-write",  "map-read",	 "map-write",
};

/* How often each is chosen, out of the sum. */
static const int weights[OP_NR] = { 20, 25, 6, 3, 3, 5, 4, 3, 2, 2, 6, 3, 3, 5, 1, 4, 4, 4, 4 };
static bool supported[OP_NR];

static long nops = 2000, maxlen = 256 * 1024, maxop = 64 * 1024;
static int nprocs = 1, nfiles = 1;
static uint64_t seed;
static bool verbose, keep;
static char dir[PATH_MAX];

/* Shared with the parent: what each process found. */
struct result {
	long checks;
	long ops;
	long count[OP_NR]; /* operations done, by kind */
	int failed;
};
static struct result *results;

struct file {
	char path[PATH_MAX + 32];
	int fd;
	int dfd; /* the same file opened O_DIRECT, or -1 */
	unsigned char *model;
	off_t size;
};

struct logent {
	long opno;
	enum op op;
	int file, file2;
	off_t off, len, off2;
	off_t size_before, size_after;
	long long ret;
};

struct fsx {
	int id;
	uint64_t rng, seed;
	struct file *files;
	long opno;
	unsigned char *buf;
	struct logent log[LOGN];
	long nlog;
	struct result *res;
};

static uint64_t rnd(struct fsx *x)
{
	/* xorshift64* */
	x->rng ^= x->rng >> 12;
	x->rng ^= x->rng << 25;
	x->rng ^= x->rng >> 27;
	return x->rng * 2685821657736338717ULL;
}

static off_t rnd_below(struct fsx *x, off_t n)
{
	return n > 0 ? (off_t)(rnd(x) % (uint64_t)n) : 0;
}

static void log_op(struct fsx *x, const struct logent *e)
{
	x->res->count[e->op]++;
	x->log[x->nlog++ % LOGN] = *e;
}

static void print_log(struct fsx *x)
{
	long from = x->nlog > LOGN ? x->nlog - LOGN : 0;

	printf("[p%d] last %ld operations (of %ld):\n", x->id, x->nlog - from, x->opno);
	for (long i = from; i < x->nlog; i++) {
		const struct logent *e = &x->log[i % LOGN];

		printf("[p%d]   #%-6ld %-11s file %d", x->id, e->opno, op_names[e->op], e->file);
		if (e->op == OP_COPY)
			printf(" from file %d at 0x%llx", e->file2, (long long)e->off2);
		printf(" 0x%llx+0x%llx size 0x%llx -> 0x%llx ret %lld\n", (long long)e->off,
		       (long long)e->len, (long long)e->size_before, (long long)e->size_after,
		       e->ret);
	}
}

/* The process's first failure: says what and where, shows the log, and stops it. */
__attribute__((format(printf, 2, 3), noreturn)) static void fail(struct fsx *x, const char *fmt,
								 ...)
{
	va_list ap;

	printf("FAIL fsx[p%d seed %" PRIu64 "] op #%ld: ", x->id, x->seed, x->opno);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	print_log(x);
	printf("[p%d] reproduce with: fsx -S %" PRIu64 " -N %ld -l %ld -o %ld -f %d DIR\n", x->id,
	       x->seed, nops, maxlen, maxop, nfiles);
	fflush(stdout);
	x->res->failed = 1;
	_exit(1);
}

static void ok(struct fsx *x)
{
	x->res->checks++;
}

/* Compares got with the model of f at off; fails at the first differing byte. */
static void compare(struct fsx *x, struct file *f, int fi, off_t off, const unsigned char *got,
		    size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++) {
		if (got[i] == f->model[off + i])
			continue;
		size_t from = i > 8 ? i - 8 : 0, to = i + 8 < len ? i + 8 : len;

		printf("[p%d] file %d at 0x%llx: expected", x->id, fi, (long long)(off + from));
		for (size_t j = from; j < to; j++)
			printf(" %02x", f->model[off + j]);
		printf("\n[p%d] file %d at 0x%llx: found   ", x->id, fi, (long long)(off + from));
		for (size_t j = from; j < to; j++)
			printf(" %02x", got[j]);
		putchar('\n');
		fail(x, "%s: file %d byte 0x%llx is 0x%02x, expected 0x%02x (size 0x%llx)", what,
		     fi, (long long)(off + i), got[i], f->model[off + i], (long long)f->size);
	}
	ok(x);
}

static ssize_t full_pread(int fd, unsigned char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

static void check_read(struct fsx *x, int fi, int fd, off_t off, size_t len, const char *what)
{
	struct file *f = &x->files[fi];
	size_t want = off >= f->size		      ? 0
		      : (size_t)(f->size - off) < len ? (size_t)(f->size - off)
						      : len;
	ssize_t got = full_pread(fd, x->buf, len, off);

	if (got < 0)
		fail(x, "%s: pread file %d 0x%llx+0x%zx: %s", what, fi, (long long)off, len,
		     strerror(errno));
	if ((size_t)got != want)
		fail(x,
		     "%s: pread file %d 0x%llx+0x%zx returned 0x%zx bytes, expected 0x%zx (size 0x%llx)",
		     what, fi, (long long)off, len, (size_t)got, want, (long long)f->size);
	compare(x, f, fi, off, x->buf, got, what);
}

static void check_size(struct fsx *x, int fi)
{
	struct file *f = &x->files[fi];
	struct stat s;

	if (fstat(f->fd, &s))
		fail(x, "fstat file %d: %s", fi, strerror(errno));
	if (s.st_size != f->size)
		fail(x, "file %d: size 0x%llx, expected 0x%llx", fi, (long long)s.st_size,
		     (long long)f->size);
	ok(x);
}

static bool model_zero(struct file *f, off_t from, off_t to)
{
	for (off_t i = from; i < to; i++)
		if (f->model[i])
			return false;
	return true;
}

static void check_seek(struct fsx *x, int fi, off_t off)
{
	struct file *f = &x->files[fi];
	off_t d, h;

	errno = 0;
	d = lseek(f->fd, off, SEEK_DATA);
	if (off >= f->size) {
		if (d != -1 || errno != ENXIO)
			fail(x,
			     "SEEK_DATA file %d at 0x%llx past the end (size 0x%llx): %lld, expected ENXIO",
			     fi, (long long)off, (long long)f->size, (long long)d);
	} else if (d == -1) {
		if (errno != ENXIO)
			fail(x, "SEEK_DATA file %d at 0x%llx: %s", fi, (long long)off,
			     strerror(errno));
		if (!model_zero(f, off, f->size))
			fail(x,
			     "SEEK_DATA file %d at 0x%llx says no data, but the model has data before 0x%llx",
			     fi, (long long)off, (long long)f->size);
	} else if (d < off || d >= f->size || !model_zero(f, off, d)) {
		fail(x,
		     "SEEK_DATA file %d at 0x%llx: 0x%llx, but data lies before it or it is out of 0x%llx..0x%llx",
		     fi, (long long)off, (long long)d, (long long)off, (long long)f->size);
	}
	ok(x);
	errno = 0;
	h = lseek(f->fd, off, SEEK_HOLE);
	if (off >= f->size) {
		if (h != -1 || errno != ENXIO)
			fail(x,
			     "SEEK_HOLE file %d at 0x%llx past the end (size 0x%llx): %lld, expected ENXIO",
			     fi, (long long)off, (long long)f->size, (long long)h);
	} else if (h < off || h > f->size || (h < f->size && f->model[h])) {
		fail(x,
		     "SEEK_HOLE file %d at 0x%llx: 0x%llx, but the model has data there or it is out of 0x%llx..0x%llx",
		     fi, (long long)off, (long long)h, (long long)off, (long long)f->size);
	}
	ok(x);
}

/* ---- the operations, each on the file and on the model ---- */

static void fill(struct fsx *x, unsigned char *p, size_t len, off_t off)
{
	unsigned char k = (unsigned char)(x->opno * 37 + x->id * 101 + 1);

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((off + i) % 251) ^ k;
}

static void do_write(struct fsx *x, int fi, off_t off, off_t len)
{
	struct file *f = &x->files[fi];
	ssize_t r;

	fill(x, x->buf, len, off);
	r = pwrite(f->fd, x->buf, len, off);
	if (r != len)
		fail(x, "pwrite file %d 0x%llx+0x%llx: %zd (%s)", fi, (long long)off,
		     (long long)len, r, r < 0 ? strerror(errno) : "short");
	memcpy(f->model + off, x->buf, len);
	if (off + len > f->size)
		f->size = off + len;
}

static void do_truncate(struct fsx *x, int fi, off_t size)
{
	struct file *f = &x->files[fi];

	if (ftruncate(f->fd, size))
		fail(x, "ftruncate file %d to 0x%llx: %s", fi, (long long)size, strerror(errno));
	if (size < f->size)
		memset(f->model + size, 0, f->size - size);
	f->size = size;
}

static int falloc_mode(enum op op)
{
	switch (op) {
	case OP_KEEP_SIZE:
		return FALLOC_FL_KEEP_SIZE;
	case OP_PUNCH:
		return FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	case OP_ZERO:
		return FALLOC_FL_ZERO_RANGE;
	case OP_ZERO_KEEP:
		return FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	case OP_COLLAPSE:
		return FALLOC_FL_COLLAPSE_RANGE;
	case OP_INSERT:
		return FALLOC_FL_INSERT_RANGE;
	default:
		return 0;
	}
}

static void do_falloc(struct fsx *x, enum op op, int fi, off_t off, off_t len)
{
	struct file *f = &x->files[fi];
	off_t end = off + len;

	if (fallocate(f->fd, falloc_mode(op), off, len))
		fail(x, "fallocate %s file %d 0x%llx+0x%llx (size 0x%llx): %s", op_names[op], fi,
		     (long long)off, (long long)len, (long long)f->size, strerror(errno));
	switch (op) {
	case OP_FALLOC:
	case OP_ZERO:
		if (op == OP_ZERO)
			memset(f->model + off, 0, len);
		if (end > f->size)
			f->size = end;
		break;
	case OP_PUNCH:
	case OP_ZERO_KEEP:
		if (off < f->size)
			memset(f->model + off, 0, (end < f->size ? end : f->size) - off);
		break;
	case OP_COLLAPSE:
		memmove(f->model + off, f->model + end, f->size - end);
		memset(f->model + f->size - len, 0, len);
		f->size -= len;
		break;
	case OP_INSERT:
		memmove(f->model + end, f->model + off, f->size - off);
		memset(f->model + off, 0, len);
		f->size += len;
		break;
	default:
		break;
	}
}

static void do_copy(struct fsx *x, int from, off_t soff, int to, off_t doff, off_t len,
		    struct logent *e)
{
	struct file *s = &x->files[from], *d = &x->files[to];
	loff_t in = soff, out = doff;
	off_t done = 0;

	while (done < len) {
		ssize_t r = copy_file_range(s->fd, &in, d->fd, &out, len - done, 0);

		if (r < 0)
			fail(x, "copy_file_range file %d 0x%llx -> file %d 0x%llx +0x%llx: %s",
			     from, (long long)soff, to, (long long)doff, (long long)len,
			     strerror(errno));
		if (r == 0)
			break;
		done += r;
	}
	e->ret = done;
	if (done != len)
		fail(x, "copy_file_range copied 0x%llx of 0x%llx bytes inside the source",
		     (long long)done, (long long)len);
	memmove(d->model + doff, s->model + soff, len);
	if (doff + len > d->size)
		d->size = doff + len;
}

/* The mapping of [off, off + len) of f (page-aligned start), or NULL (failed). */
static unsigned char *map_range(struct fsx *x, int fi, off_t off, off_t len, int prot, off_t *pg)
{
	struct file *f = &x->files[fi];
	off_t page = sysconf(_SC_PAGESIZE);
	void *p;

	*pg = off % page;
	p = mmap(NULL, *pg + len, prot, MAP_SHARED, f->fd, off - *pg);
	if (p == MAP_FAILED)
		fail(x, "mmap file %d 0x%llx+0x%llx: %s", fi, (long long)(off - *pg),
		     (long long)(*pg + len), strerror(errno));
	return p;
}

static void do_mapread(struct fsx *x, int fi, off_t off, off_t len)
{
	off_t pg;
	unsigned char *p = map_range(x, fi, off, len, PROT_READ, &pg);

	compare(x, &x->files[fi], fi, off, p + pg, len, "map-read");
	munmap(p, pg + len);
}

static void do_mapwrite(struct fsx *x, int fi, off_t off, off_t len)
{
	struct file *f = &x->files[fi];
	unsigned char *p;
	off_t pg;

	/* A mapping cannot extend a file: fsx's domapwrite truncates up first. */
	if (off + len > f->size)
		do_truncate(x, fi, off + len);
	p = map_range(x, fi, off, len, PROT_READ | PROT_WRITE, &pg);
	fill(x, x->buf, len, off);
	memcpy(p + pg, x->buf, len);
	if (msync(p, pg + len, MS_SYNC))
		fail(x, "msync file %d 0x%llx+0x%llx: %s", fi, (long long)off, (long long)len,
		     strerror(errno));
	munmap(p, pg + len);
	memcpy(f->model + off, x->buf, len);
}

static void do_reopen(struct fsx *x, int fi)
{
	struct file *f = &x->files[fi];

	if (close(f->fd))
		fail(x, "close file %d: %s", fi, strerror(errno));
	f->fd = open(f->path, O_RDWR);
	if (f->fd < 0)
		fail(x, "reopen file %d (%s): %s", fi, f->path, strerror(errno));
	if (f->dfd >= 0) {
		close(f->dfd);
		f->dfd = open(f->path, O_RDWR | O_DIRECT);
		if (f->dfd < 0)
			fail(x, "reopen file %d O_DIRECT: %s", fi, strerror(errno));
	}
}

static enum op pick(struct fsx *x)
{
	int sum = 0, r;

	for (int i = 0; i < OP_NR; i++)
		sum += supported[i] ? weights[i] : 0;
	r = rnd_below(x, sum);
	for (int i = 0; i < OP_NR; i++) {
		if (!supported[i])
			continue;
		if (r < weights[i])
			return i;
		r -= weights[i];
	}
	return OP_READ;
}

/* An offset and length: one time in four block-aligned, else anywhere. */
static void range(struct fsx *x, off_t limit, off_t *off, off_t *len)
{
	*off = rnd_below(x, limit);
	if (*off >= maxlen)
		*off = maxlen - 1;
	*len = 1 + rnd_below(x, maxop);
	if (rnd(x) % 4 == 0) {
		*off &= ~(off_t)(BLOCK - 1);
		*len = (*len + BLOCK - 1) & ~(off_t)(BLOCK - 1);
	}
	if (*off + *len > maxlen)
		*len = maxlen - *off;
}

static void one_op(struct fsx *x)
{
	enum op op = pick(x);
	int fi = rnd_below(x, nfiles);
	struct file *f = &x->files[fi];
	struct logent e = {
		.opno = x->opno, .op = op, .file = fi, .size_before = f->size, .size_after = f->size
	};
	off_t off, len;

	switch (op) {
	case OP_READ:
		range(x, f->size + f->size / 8 + 1, &off, &len);
		e.off = off, e.len = len;
		log_op(x, &e);
		check_read(x, fi, f->fd, off, len, "read");
		return;
	case OP_WRITE:
		range(x, f->size + maxop < maxlen ? f->size + maxop : maxlen, &off, &len);
		if (len <= 0)
			return;
		e.off = off, e.len = len;
		log_op(x, &e);
		do_write(x, fi, off, len);
		break;
	case OP_TRUNCATE:
		off = rnd_below(x, maxlen + 1);
		if (rnd(x) % 4 == 0)
			off &= ~(off_t)(BLOCK - 1);
		e.off = off;
		log_op(x, &e);
		do_truncate(x, fi, off);
		break;
	case OP_FALLOC:
	case OP_KEEP_SIZE:
	case OP_PUNCH:
	case OP_ZERO:
	case OP_ZERO_KEEP:
		range(x, maxlen, &off, &len);
		if (len <= 0)
			return;
		e.off = off, e.len = len;
		log_op(x, &e);
		do_falloc(x, op, fi, off, len);
		break;
	case OP_COLLAPSE:
	case OP_INSERT:
		/* block-aligned; collapse keeps something after; insert stays below maxlen */
		if (f->size < 2 * BLOCK)
			return;
		off = rnd_below(x, f->size / BLOCK) * BLOCK;
		len = (1 + rnd_below(x, maxop / BLOCK)) * BLOCK;
		if (op == OP_COLLAPSE && off + len >= f->size)
			len = (f->size - 1 - off) / BLOCK * BLOCK;
		if (op == OP_INSERT && f->size + len > maxlen)
			len = (maxlen - f->size) / BLOCK * BLOCK;
		if (len <= 0 || off >= f->size)
			return;
		e.off = off, e.len = len;
		log_op(x, &e);
		do_falloc(x, op, fi, off, len);
		break;
	case OP_COPY: {
		int from = rnd_below(x, nfiles);
		struct file *s = &x->files[from];
		off_t soff;

		if (s->size == 0)
			return;
		soff = rnd_below(x, s->size);
		len = 1 + rnd_below(x, maxop);
		if (soff + len > s->size)
			len = s->size - soff;
		off = rnd_below(x, f->size + 1);
		if (off + len > maxlen)
			len = maxlen - off;
		/* within one file the ranges may not overlap */
		if (from == fi && off < soff + len && soff < off + len)
			return;
		if (len <= 0)
			return;
		e.off = off, e.len = len, e.file2 = from, e.off2 = soff;
		log_op(x, &e);
		do_copy(x, from, soff, fi, off, len, &x->log[(x->nlog - 1) % LOGN]);
		break;
	}
	case OP_FSYNC:
		log_op(x, &e);
		if (rnd(x) % 2 ? fsync(f->fd) : fdatasync(f->fd))
			fail(x, "fsync file %d: %s", fi, strerror(errno));
		break;
	case OP_REOPEN:
		log_op(x, &e);
		do_reopen(x, fi);
		break;
	case OP_SEEK:
		off = rnd_below(x, f->size + 2 * BLOCK);
		e.off = off;
		log_op(x, &e);
		check_seek(x, fi, off);
		return;
	case OP_DREAD:
	case OP_DWRITE:
		/* block-aligned offset and length, an aligned buffer */
		off = rnd_below(x, (op == OP_DREAD ? f->size + BLOCK : f->size + maxop) / BLOCK) *
		      BLOCK;
		len = (1 + rnd_below(x, maxop / BLOCK)) * BLOCK;
		if (off + len > maxlen)
			len = (maxlen - off) / BLOCK * BLOCK;
		if (len <= 0)
			return;
		e.off = off, e.len = len;
		log_op(x, &e);
		if (op == OP_DREAD) {
			check_read(x, fi, f->dfd, off, len, "O_DIRECT read");
			return;
		}
		fill(x, x->buf, len, off);
		if (pwrite(f->dfd, x->buf, len, off) != len)
			fail(x, "O_DIRECT pwrite file %d 0x%llx+0x%llx: %s", fi, (long long)off,
			     (long long)len, strerror(errno));
		memcpy(f->model + off, x->buf, len);
		if (off + len > f->size)
			f->size = off + len;
		break;
	case OP_MREAD:
		if (!f->size)
			return;
		range(x, f->size, &off, &len);
		if (off + len > f->size)
			len = f->size - off;
		e.off = off, e.len = len;
		log_op(x, &e);
		do_mapread(x, fi, off, len);
		return;
	case OP_MWRITE:
		range(x, f->size + maxop < maxlen ? f->size + maxop : maxlen, &off, &len);
		if (len <= 0)
			return;
		e.off = off, e.len = len;
		log_op(x, &e);
		do_mapwrite(x, fi, off, len);
		break;
	case OP_VERIFY:
		log_op(x, &e);
		check_read(x, fi, f->fd, 0, maxlen + BLOCK, "whole-file read");
		break;
	default:
		return;
	}
	x->log[(x->nlog - 1) % LOGN].size_after = f->size;
	check_size(x, fi);
}

static void worker(int id)
{
	struct fsx x = { .id = id, .seed = seed + id, .res = &results[id] };

	x.rng = x.seed * 0x9E3779B97F4A7C15ULL + 1;
	/* aligned for O_DIRECT */
	if (posix_memalign((void **)&x.buf, BLOCK, maxlen + 2 * BLOCK + maxop))
		x.buf = NULL;
	x.files = calloc(nfiles, sizeof(*x.files));
	if (!x.buf || !x.files)
		fail(&x, "out of memory");
	for (int i = 0; i < nfiles; i++) {
		struct file *f = &x.files[i];

		snprintf(f->path, sizeof(f->path), "%s/p%d.f%d", dir, id, i);
		f->model = calloc(1, maxlen + 2 * BLOCK + maxop);
		f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (!f->model || f->fd < 0)
			fail(&x, "create %s: %s", f->path, strerror(errno));
		f->dfd = -1;
		if (supported[OP_DREAD] || supported[OP_DWRITE]) {
			f->dfd = open(f->path, O_RDWR | O_DIRECT);
			if (f->dfd < 0)
				fail(&x, "open %s O_DIRECT: %s", f->path, strerror(errno));
		}
	}
	for (x.opno = 1; x.opno <= nops; x.opno++) {
		one_op(&x);
		x.res->ops++;
	}
	/* the end: each file whole, through its descriptor and through a new one */
	for (int i = 0; i < nfiles; i++) {
		struct file *f = &x.files[i];
		int fd;

		check_size(&x, i);
		check_read(&x, i, f->fd, 0, maxlen + BLOCK, "final read");
		if (f->dfd >= 0)
			close(f->dfd);
		if (close(f->fd))
			fail(&x, "close file %d: %s", i, strerror(errno));
		fd = open(f->path, O_RDONLY);
		if (fd < 0)
			fail(&x, "open %s: %s", f->path, strerror(errno));
		check_read(&x, i, fd, 0, maxlen + BLOCK, "final read after reopen");
		close(fd);
		if (!keep)
			unlink(f->path);
	}
	if (verbose)
		printf("[p%d] seed %" PRIu64 ": %ld operations, %ld checks, all good\n", id, x.seed,
		       nops, x.res->checks);
	_exit(0);
}

/* Which fallocate modes and copy_file_range the filesystem has. */
static void probe(void)
{
	char path[PATH_MAX + 16];
	static char blocks[3 * BLOCK];
	int fd;

	for (int i = 0; i < OP_NR; i++)
		supported[i] = true;
	snprintf(path, sizeof(path), "%s/probe", dir);
	for (int op = OP_FALLOC; op <= OP_INSERT; op++) {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || pwrite(fd, blocks, sizeof(blocks), 0) != sizeof(blocks))
			break;
		if (fallocate(fd, falloc_mode(op), BLOCK, BLOCK) &&
		    (errno == EOPNOTSUPP || errno == ENOSYS)) {
			supported[op] = false;
			printf("note: fallocate %s is not supported here (%s): not exercised\n",
			       op_names[op], strerrorname_np(errno));
		}
		close(fd);
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		supported[OP_DREAD] = supported[OP_DWRITE] = false;
		printf("note: O_DIRECT is not supported here (%s): not exercised\n",
		       strerrorname_np(errno));
	} else {
		close(fd);
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && pwrite(fd, blocks, 2, 0) == 2) {
		loff_t in = 0, out = 10;

		if (copy_file_range(fd, &in, fd, &out, 1, 0) < 0 &&
		    (errno == EOPNOTSUPP || errno == ENOSYS || errno == EXDEV)) {
			supported[OP_COPY] = false;
			printf("note: copy_file_range is not supported here (%s): not exercised\n",
			       strerrorname_np(errno));
		}
	}
	if (fd >= 0)
		close(fd);
	unlink(path);
}

static void usage(void)
{
	fprintf(stderr, "usage: fsx [-v] [-k] [-N OPS] [-S SEED] [-l MAXLEN] [-o MAXOP] [-p PROCS] "
			"[-f FILES] [-x OP,...] DIRECTORY\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long passed = 0, ops = 0;
	int opt, failed = 0;
	const char *exclude = "";

	seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	while ((opt = getopt(argc, argv, "vkN:S:l:o:p:f:x:")) != -1) {
		switch (opt) {
		case 'v':
			verbose = true;
			break;
		case 'k':
			keep = true;
			break;
		case 'N':
			nops = atol(optarg);
			break;
		case 'S':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			maxlen = atol(optarg);
			break;
		case 'o':
			maxop = atol(optarg);
			break;
		case 'p':
			nprocs = atoi(optarg);
			break;
		case 'f':
			nfiles = atoi(optarg);
			break;
		case 'x':
			exclude = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || nops < 0 || maxlen < 4 * BLOCK || maxop < 1 || nprocs < 1 ||
	    nfiles < 1)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "%s/fsx.%d", argv[optind], (int)getpid());
	if (mkdir(dir, 0755)) {
		printf("skip: cannot make %s: %s\n", dir, strerror(errno));
		return 77;
	}
	results = mmap(NULL, nprocs * sizeof(*results), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (results == MAP_FAILED)
		return 1;
	probe();
	for (int i = 0; i < OP_NR; i++) {
		if (name_in_list(exclude, op_names[i])) {
			supported[i] = false;
			printf("note: %s left out (-x)\n", op_names[i]);
		}
	}
	if (!supported[OP_READ] && !supported[OP_WRITE])
		usage();
	printf("fsx: seed %" PRIu64 ", %d process(es) x %d file(s), %ld ops each, maxlen %ld\n",
	       seed, nprocs, nfiles, nops, maxlen);
	for (int i = 0; i < nprocs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			printf("FAIL fsx: fork: %s\n", strerror(errno));
			return 1;
		}
		if (pid == 0)
			worker(i);
	}
	for (int i = 0; i < nprocs; i++) {
		int st;
		pid_t pid = wait(&st);

		if (pid < 0)
			break;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			/* a crash is a failure too, even before fail() could say so */
			if (WIFSIGNALED(st))
				printf("FAIL fsx: process %d killed by signal %d\n", (int)pid,
				       WTERMSIG(st));
			failed++;
		}
	}
	for (int i = 0; i < nprocs; i++) {
		passed += results[i].checks;
		ops += results[i].ops;
	}
	if (!keep && rmdir(dir) && !failed)
		printf("note: %s not empty at the end: %s\n", dir, strerror(errno));
	printf("fsx: %ld operations", ops);
	for (int k = 0; k < OP_NR; k++) {
		long n = 0;

		for (int i = 0; i < nprocs; i++)
			n += results[i].count[k];
		printf("%s %s %ld", k ? "," : ":", op_names[k], n);
	}
	putchar('\n');
	printf("%ld passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
