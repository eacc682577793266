// SPDX-License-Identifier: GPL-2.0
/*
 * bdev_bench: lib/bdev (io_uring) against plain pwrite/pread/fdatasync on
 * the same file, opened the same way (O_DIRECT when bdev gets it).  Prints
 * figures; it is not a test and asserts nothing about speed.
 *
 *	bdev_bench [-s MiB] [-q DEPTH] [-n RANDOM_WRITES] [-f FLUSHES] [FILE]
 *
 * Without FILE, a file in a mkdtemp() directory under /tmp is used and
 * removed.  Sequential I/O is in 1 MiB bios, DEPTH in flight (default 16);
 * random writes are 4 KiB, DEPTH in flight; flush latency is a 4 KiB write
 * then a flush, FLUSHES times.  The plain side does one call at a time, as a
 * program without io_uring would.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static u64 rng_state = 0x1234567;

static u64 rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Keeps `depth` bios in flight: a stack of free slots, refilled by end_io. */
struct pipe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned nr_free, errors;
	unsigned *free_slots;
	struct tfs_bio *bios;
};

static void pipe_end_io(struct tfs_bio *bio)
{
	struct pipe *p = bio->private;

	pthread_mutex_lock(&p->lock);
	p->free_slots[p->nr_free++] = (unsigned)(bio - p->bios);
	p->errors += bio->result != 0;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* n bios of len bytes at offsets[i]; returns seconds. */
static double bdev_run(struct tfs_bdev *b, enum tfs_bio_op op, const u64 *offsets, unsigned n,
		       size_t len, unsigned depth, u8 *bufs)
{
	struct pipe p = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
		.nr_free = depth,
		.free_slots = calloc(depth, sizeof(unsigned)),
		.bios = calloc(depth, sizeof(struct tfs_bio)),
	};
	double t = now();

	for (unsigned i = 0; i < depth; i++)
		p.free_slots[i] = i;
	for (unsigned i = 0; i < n; i++) {
		unsigned slot;

		pthread_mutex_lock(&p.lock);
		while (!p.nr_free)
			pthread_cond_wait(&p.cond, &p.lock);
		slot = p.free_slots[--p.nr_free];
		pthread_mutex_unlock(&p.lock);
		p.bios[slot] = (struct tfs_bio){
			.bdev = b,
			.op = op,
			.offset = offsets[i],
			.buf = bufs + (size_t)slot * len,
			.len = len,
			.end_io = pipe_end_io,
			.private = &p,
		};
		tfs_bio_submit(&p.bios[slot]);
	}
	tfs_bdev_drain(b);
	t = now() - t;
	if (p.errors)
		fprintf(stderr, "bdev_bench: %u errors\n", p.errors);
	free(p.free_slots);
	free(p.bios);
	return t;
}

static double plain_run(int fd, bool write, const u64 *offsets, unsigned n, size_t len, u8 *buf)
{
	double t = now();

	for (unsigned i = 0; i < n; i++) {
		ssize_t r = write ? pwrite(fd, buf, len, (off_t)offsets[i])
				  : pread(fd, buf, len, (off_t)offsets[i]);

		if (r != (ssize_t)len) {
			fprintf(stderr, "bdev_bench: %s: %s\n", write ? "pwrite" : "pread",
				strerror(errno));
			exit(1);
		}
	}
	return now() - t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void row(struct printbuf *out, const char *name, double bdev, double plain)
{
	prt_printf(out, "%s\t%.1f\r%.1f\r%.2f\r\n", name, bdev, plain, plain ? bdev / plain : 0);
}

int main(int argc, char **argv)
{
	unsigned mib = 128, depth = 16, nrand = 20000, nflush = 200;
	char dir[64] = "", path[128];
	const char *file = NULL;
	struct tfs_bdev *b;
	struct printbuf out = PRINTBUF;
	size_t seq = 1 << 20;
	u64 *offs;
	u8 *bufs;
	double *lat_b, *lat_p;
	double t_b, t_p;
	int opt, fd, ret;

	while ((opt = getopt(argc, argv, "s:q:n:f:")) != -1) {
		switch (opt) {
		case 's':
			mib = (unsigned)atoi(optarg);
			break;
		case 'q':
			depth = (unsigned)atoi(optarg);
			break;
		case 'n':
			nrand = (unsigned)atoi(optarg);
			break;
		case 'f':
			nflush = (unsigned)atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: %s [-s MiB] [-q DEPTH] [-n RANDOM_WRITES] [-f FLUSHES] [FILE]\n",
				argv[0]);
			return 2;
		}
	}
	if (!mib || !depth || !nrand || !nflush)
		return 2;
	if (optind < argc) {
		file = argv[optind];
	} else {
		snprintf(dir, sizeof(dir), "/tmp/tfs-bench-XXXXXX");
		if (!mkdtemp(dir))
			return 1;
		snprintf(path, sizeof(path), "%s/img", dir);
		file = path;
	}
	fd = open(file, O_CREAT | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)mib << 20)) {
		perror(file);
		return 1;
	}
	close(fd);

	ret = tfs_bdev_open(file, 0, &b);
	if (ret)
		return 1;
	fd = open(file, O_RDWR | (b->direct ? O_DIRECT : 0));
	if (fd < 0) {
		perror(file);
		return 1;
	}
	bufs = tfs_bdev_alloc_buf(b, (size_t)depth * seq);
	for (size_t i = 0; i < (size_t)depth * seq; i++)
		bufs[i] = (u8)rnd();
	offs = calloc(nrand > mib ? nrand : mib, sizeof(u64));
	lat_b = calloc(nflush, sizeof(double));
	lat_p = calloc(nflush, sizeof(double));

	printbuf_tabstop_push(&out, 24);
	printbuf_tabstop_push(&out, 12);
	printbuf_tabstop_push(&out, 12);
	printbuf_tabstop_push(&out, 12);
	prt_printf(&out, "file %s, %u MiB, %s, queue depth %u\n", file, mib,
		   b->direct ? "O_DIRECT" : "buffered", depth);
	prt_str(&out, "\tbdev\rplain\rbdev/plain\r\n");

	/* Sequential write, then read, 1 MiB at a time.  The file is written
	 * once first, untimed, so neither side pays for allocating blocks. */
	for (unsigned i = 0; i < mib; i++)
		offs[i] = (u64)i << 20;
	plain_run(fd, true, offs, mib, seq, bufs);
	fdatasync(fd);
	t_b = bdev_run(b, TFS_OP_write, offs, mib, seq, depth, bufs);
	tfs_bdev_flush(b);
	t_p = plain_run(fd, true, offs, mib, seq, bufs);
	fdatasync(fd);
	row(&out, "seq write MB/s", mib * 1.048576 / t_b, mib * 1.048576 / t_p);
	t_b = bdev_run(b, TFS_OP_read, offs, mib, seq, depth, bufs);
	t_p = plain_run(fd, false, offs, mib, seq, bufs);
	row(&out, "seq read MB/s", mib * 1.048576 / t_b, mib * 1.048576 / t_p);

	/* Random 4 KiB writes. */
	for (unsigned i = 0; i < nrand; i++)
		offs[i] = (rnd() % ((u64)mib << 8)) << 12;
	t_b = bdev_run(b, TFS_OP_write, offs, nrand, 4096, depth, bufs);
	tfs_bdev_flush(b);
	t_p = plain_run(fd, true, offs, nrand, 4096, bufs);
	fdatasync(fd);
	row(&out, "4k random write IOPS", nrand / t_b, nrand / t_p);

	/* Flush latency: a 4 KiB write, then a flush. */
	for (unsigned i = 0; i < nflush; i++) {
		u64 off = (rnd() % ((u64)mib << 8)) << 12;
		double t;

		tfs_bdev_write(b, bufs, 4096, off, 0, TFS_TAG_data);
		t = now();
		tfs_bdev_flush(b);
		lat_b[i] = (now() - t) * 1e6;
		if (pwrite(fd, bufs, 4096, (off_t)off) != 4096)
			return 1;
		t = now();
		fdatasync(fd);
		lat_p[i] = (now() - t) * 1e6;
	}
	qsort(lat_b, nflush, sizeof(double), cmp_double);
	qsort(lat_p, nflush, sizeof(double), cmp_double);
	row(&out, "flush median us", lat_b[nflush / 2], lat_p[nflush / 2]);
	row(&out, "flush p99 us", lat_b[nflush * 99 / 100], lat_p[nflush * 99 / 100]);

	fputs(printbuf_str(&out), stdout);
	printbuf_exit(&out);
	tfs_bdev_close(b);
	close(fd);
	free(bufs);
	free(offs);
	free(lat_b);
	free(lat_p);
	if (dir[0]) {
		unlink(path);
		rmdir(dir);
	}
	return 0;
}
