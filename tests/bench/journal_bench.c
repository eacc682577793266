// SPDX-License-Identifier: GPL-2.0
/*
 * journal_bench: journal commit throughput and flush latency, beside what
 * the disk does for a plain program.  Built, never run by `meson test`
 * (figures, not pass/fail).
 *
 *	journal_bench [-d DIR] [-s SECONDS] [-n RUNS] [-b] [-v]
 *
 * For one and two members (metadata_replicas = members) and 1, 2 and 4
 * committing threads, RUNS times (default 3) SECONDS (default 2) of each of:
 *  - sync: every commit is followed by flush_seq() of its seq (like fsync);
 *    commits/s, and the flush latency median and p99 over every run;
 *  - async: commits only (entries close on size and age, NO_FLUSH);
 *    commits/s.
 * Right before each sync run, SECONDS of the raw figure: one thread doing a
 * 4 KiB pwrite then fdatasync(), in a loop, over a file like the journal's
 * (same directory, same size, written once first, O_DIRECT unless -b),
 * sequentially through it as the journal goes through its ring.  Printed:
 * the medians, and the ratio of the medians (journal / raw).  The machine
 * this runs on may be shared: medians of paired runs are what to compare.
 *
 * Image files go in DIR (default /tmp; use a directory on the disk you want
 * to measure).  -b opens them buffered instead of trying O_DIRECT; -v
 * prints the journal's to_text after each run.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

#define NR_BUCKETS 64
#define BUCKET_SIZE (256u << 10)
#define FILE_SIZE ((u64)(NR_BUCKETS + 2) * BUCKET_SIZE)
#define MAX_RUNS 15

static bool verbose;

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Creates path at FILE_SIZE, every byte written once (no holes, no unwritten extents). */
static int make_file(const char *path)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	size_t chunk = 1 << 20;
	char *zero = calloc(1, chunk);
	int ret = 0;

	if (fd < 0 || !zero) {
		perror(path);
		free(zero);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (u64 off = 0; off < FILE_SIZE && !ret; off += chunk)
		if (pwrite(fd, zero, chunk, off) != (ssize_t)chunk) {
			perror(path);
			ret = -1;
		}
	if (!ret && fsync(fd)) {
		perror(path);
		ret = -1;
	}
	free(zero);
	close(fd);
	return ret;
}

/*
 * The raw figure: 4 KiB pwrite + fdatasync per iteration, one thread,
 * sequentially through the ring area of a file like the journal's.
 * Returns writes/s, or a negative number on error.
 */
static double raw_run(const char *dir, double secs, bool buffered, bool *direct)
{
	char path[256];
	void *buf = NULL;
	int fd = -1;
	u64 n = 0, off = BUCKET_SIZE;
	double rate = -1;

	snprintf(path, sizeof(path), "%s/journal_bench.%d.raw", dir, (int)getpid());
	if (make_file(path))
		return -1;
	*direct = false;
	if (!buffered) {
		fd = open(path, O_RDWR | O_DIRECT);
		*direct = fd >= 0;
	}
	if (fd < 0)
		fd = open(path, O_RDWR);
	if (fd < 0 || posix_memalign(&buf, 4096, 4096)) {
		perror(path);
		goto out;
	}
	memset(buf, 0x5a, 4096);
	u64 start = now_ns(), deadline = start + (u64)(secs * 1e9);

	while (now_ns() < deadline) {
		if (pwrite(fd, buf, 4096, off) != 4096 || fdatasync(fd)) {
			perror(path);
			goto out;
		}
		n++;
		off += 4096;
		if (off >= (u64)(NR_BUCKETS + 1) * BUCKET_SIZE)
			off = BUCKET_SIZE;
	}
	rate = n / ((now_ns() - start) / 1e9);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return rate;
}

struct thread {
	struct tfs_journal *j;
	bool sync;
	u64 deadline, commits;
	u64 *lat;
	size_t nr_lat, size_lat;
	int ret;
	pthread_t t;
};

static void *bench_thread(void *arg)
{
	struct thread *th = arg;

	while (now_ns() < th->deadline) {
		struct tfs_journal_res res;
		int ret = tfs_journal_res_get(th->j, &res, tfs_jset_entry_u64s(6), 0);

		if (ret) {
			th->ret = ret;
			return NULL;
		}
		__le64 *k =
			tfs_journal_res_add_entry(th->j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 6);

		k[0] = cpu_to_le64(6 | (th->commits << 32));
		for (unsigned i = 1; i < 6; i++)
			k[i] = cpu_to_le64(th->commits * i);
		tfs_journal_res_put(th->j, &res);
		th->commits++;
		if (!th->sync)
			continue;
		u64 t0 = now_ns();

		ret = tfs_journal_flush_seq(th->j, res.seq);
		if (ret) {
			th->ret = ret;
			return NULL;
		}
		if (th->nr_lat == th->size_lat) {
			th->size_lat = th->size_lat ? 2 * th->size_lat : 4096;
			th->lat = realloc(th->lat, th->size_lat * sizeof(u64));
			if (!th->lat)
				abort();
		}
		th->lat[th->nr_lat++] = now_ns() - t0;
	}
	return NULL;
}

/* Latencies of every run of a case, pooled. */
struct lat_pool {
	u64 *v;
	size_t nr;
};

/* One run of the journal; commits/s, or a negative number on error. */
static double journal_run(const char *dir, unsigned nr_devs, unsigned nr_threads, bool sync,
			  double secs, unsigned open_flags, struct lat_pool *pool, bool *direct)
{
	char path[TFS_JOURNAL_MAX_DEVS][256];
	struct tfs_bdev *bdev[TFS_JOURNAL_MAX_DEVS] = { 0 };
	struct tfs_journal_dev devs[TFS_JOURNAL_MAX_DEVS];
	u64 buckets[NR_BUCKETS];
	struct tfs_journal_opts opts;
	struct tfs_journal *j = NULL;
	struct thread th[4];
	struct printbuf err = PRINTBUF;
	double rate = -1;
	int ret = 0;

	for (unsigned b = 0; b < NR_BUCKETS; b++)
		buckets[b] = b + 1;
	tfs_journal_opts_default(&opts);
	for (unsigned i = 0; i < 16; i++)
		opts.uuid[i] = (u8)i;
	opts.metadata_replicas = nr_devs;
	opts.metadata_replicas_required = nr_devs;
	for (unsigned i = 0; i < nr_devs; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/journal_bench.%d.%u", dir, (int)getpid(), i);
		if (make_file(path[i])) {
			ret = -EIO;
			goto out;
		}
		ret = tfs_bdev_open(path[i], open_flags, &bdev[i]);
		if (ret)
			goto out;
		devs[i] = (struct tfs_journal_dev){ .bdev = bdev[i],
						    .dev_idx = i,
						    .bucket_size = BUCKET_SIZE,
						    .buckets = buckets,
						    .nr_buckets = NR_BUCKETS,
						    .writable = true };
	}
	*direct = bdev[0]->direct;
	ret = tfs_journal_init(&j, devs, nr_devs, &opts, &err) ?: tfs_journal_start(j, NULL);
	if (ret)
		goto out;

	u64 start = now_ns(), deadline = start + (u64)(secs * 1e9);

	for (unsigned i = 0; i < nr_threads; i++) {
		th[i] = (struct thread){ .j = j, .sync = sync, .deadline = deadline };
		pthread_create(&th[i].t, NULL, bench_thread, &th[i]);
	}
	u64 commits = 0;

	for (unsigned i = 0; i < nr_threads; i++) {
		pthread_join(th[i].t, NULL);
		commits += th[i].commits;
		ret = ret ?: th[i].ret;
	}
	rate = commits / ((now_ns() - start) / 1e9);
	for (unsigned i = 0; i < nr_threads; i++) {
		u64 *v = realloc(pool->v, (pool->nr + th[i].nr_lat + 1) * sizeof(u64));

		if (!v)
			abort();
		pool->v = v;
		memcpy(pool->v + pool->nr, th[i].lat, th[i].nr_lat * sizeof(u64));
		pool->nr += th[i].nr_lat;
		free(th[i].lat);
	}
	if (verbose) {
		struct printbuf out = PRINTBUF;

		tfs_journal_to_text(&out, j);
		printf("%s", printbuf_str(&out));
		printbuf_exit(&out);
	}
out:
	if (ret) {
		fprintf(stderr, "journal_bench: %s %s\n", tfs_err_str(ret), printbuf_str(&err));
		rate = -1;
	}
	tfs_journal_exit(j);
	for (unsigned i = 0; i < nr_devs; i++) {
		if (bdev[i])
			tfs_bdev_close(bdev[i]);
		unlink(path[i]);
	}
	printbuf_exit(&err);
	return rate;
}

static int bench_case(const char *dir, unsigned nr_devs, unsigned nr_threads, bool sync,
		      double secs, unsigned runs, unsigned open_flags)
{
	double rates[MAX_RUNS], raws[MAX_RUNS];
	struct lat_pool pool = { 0 };
	bool direct = false, raw_direct = false;

	for (unsigned r = 0; r < runs; r++) {
		/* Paired: the raw figure right before, under the same conditions. */
		if (sync) {
			raws[r] = raw_run(dir, secs, open_flags & TFS_BDEV_BUFFERED, &raw_direct);
			if (raws[r] < 0)
				return -1;
		}
		rates[r] = journal_run(dir, nr_devs, nr_threads, sync, secs, open_flags, &pool,
				       &direct);
		if (rates[r] < 0)
			return -1;
	}
	double rate = median(rates, runs);

	printf("%-5s %u dev  %u thr  %10.0f commits/s", sync ? "sync" : "async", nr_devs,
	       nr_threads, rate);
	if (sync) {
		double raw = median(raws, runs);

		qsort(pool.v, pool.nr, sizeof(u64), cmp_u64);
		printf("  raw %6.0f/s  x%.2f", raw, rate / raw);
		if (pool.nr)
			printf("  flush median %7.1f us  p99 %7.1f us", pool.v[pool.nr / 2] / 1e3,
			       pool.v[(pool.nr * 99) / 100] / 1e3);
		if (raw_direct != direct)
			printf("  (raw %s)", raw_direct ? "O_DIRECT" : "buffered");
	}
	printf("%s\n", direct ? "" : "  (buffered)");
	fflush(stdout);
	free(pool.v);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = "/tmp";
	double secs = 2;
	unsigned runs = 3, flags = 0;
	int c;

	while ((c = getopt(argc, argv, "d:s:n:bvh")) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 's':
			secs = atof(optarg);
			break;
		case 'n':
			runs = atoi(optarg);
			break;
		case 'b':
			flags |= TFS_BDEV_BUFFERED;
			break;
		case 'v':
			verbose = true;
			break;
		default:
			fprintf(stderr, "usage: journal_bench [-d DIR] [-s SECONDS] [-n RUNS] [-b] "
					"[-v]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!runs || runs > MAX_RUNS || secs <= 0) {
		fprintf(stderr, "journal_bench: -n 1..%u, -s > 0\n", MAX_RUNS);
		return 2;
	}
	printf("%s, %.1f s per run, medians of %u runs; raw: 4 KiB pwrite + fdatasync, one "
	       "thread, run right before each sync run; x: journal / raw\n",
	       dir, secs, runs);
	for (unsigned devs = 1; devs <= 2; devs++)
		for (unsigned t = 1; t <= 4; t *= 2)
			for (int sync = 1; sync >= 0; sync--)
				if (bench_case(dir, devs, t, sync, secs, runs, flags))
					return 1;
	return 0;
}
