// SPDX-License-Identifier: GPL-2.0
/*
 * journal_bench: journal commit throughput and flush latency.  Built, never
 * run by `meson test` (figures, not pass/fail).
 *
 *	journal_bench [-d DIR] [-s SECONDS] [-b]
 *
 * For one and two members (metadata_replicas = members) and 1, 2 and 4
 * committing threads, runs SECONDS (default 2) of each of:
 *  - sync: every commit is followed by flush_seq() of its seq (like fsync);
 *    prints commits/s and the flush latency median and p99;
 *  - async: commits only (entries close on size and age, NO_FLUSH);
 *    prints commits/s.
 * Image files go in DIR (default /tmp; use a directory on the disk you want
 * to measure).  -b opens them buffered instead of trying O_DIRECT.
 */
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

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
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

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int run(const char *dir, unsigned nr_devs, unsigned nr_threads, bool sync, double secs,
	       unsigned open_flags)
{
	char path[TFS_JOURNAL_MAX_DEVS][256];
	struct tfs_bdev *bdev[TFS_JOURNAL_MAX_DEVS] = { 0 };
	struct tfs_journal_dev devs[TFS_JOURNAL_MAX_DEVS];
	u64 buckets[NR_BUCKETS];
	struct tfs_journal_opts opts;
	struct tfs_journal *j = NULL;
	struct thread th[4];
	struct printbuf err = PRINTBUF;
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
		int fd = open(path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);

		if (fd < 0 || ftruncate(fd, (off_t)(NR_BUCKETS + 2) * BUCKET_SIZE)) {
			perror(path[i]);
			return -1;
		}
		close(fd);
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
	ret = tfs_journal_init(&j, devs, nr_devs, &opts, &err) ?: tfs_journal_start(j, NULL);
	if (ret)
		goto out;

	u64 start = now_ns(), deadline = start + (u64)(secs * 1e9);

	for (unsigned i = 0; i < nr_threads; i++) {
		th[i] = (struct thread){ .j = j, .sync = sync, .deadline = deadline };
		pthread_create(&th[i].t, NULL, bench_thread, &th[i]);
	}
	u64 commits = 0, nr_lat = 0;

	for (unsigned i = 0; i < nr_threads; i++) {
		pthread_join(th[i].t, NULL);
		commits += th[i].commits;
		nr_lat += th[i].nr_lat;
		ret = ret ?: th[i].ret;
	}
	double elapsed = (now_ns() - start) / 1e9;
	u64 *lat = calloc(nr_lat + 1, sizeof(u64));
	size_t n = 0;

	for (unsigned i = 0; i < nr_threads; i++) {
		memcpy(lat + n, th[i].lat, th[i].nr_lat * sizeof(u64));
		n += th[i].nr_lat;
		free(th[i].lat);
	}
	qsort(lat, n, sizeof(u64), cmp_u64);
	printf("%-5s %u dev  %u thr  %10.0f commits/s", sync ? "sync" : "async", nr_devs,
	       nr_threads, commits / elapsed);
	if (n)
		printf("  flush median %7.1f us  p99 %7.1f us", lat[n / 2] / 1e3,
		       lat[(n * 99) / 100] / 1e3);
	printf("%s\n", bdev[0]->direct ? "" : "  (buffered)");
	free(lat);
out:
	if (ret)
		fprintf(stderr, "journal_bench: %s %s\n", tfs_err_str(ret), printbuf_str(&err));
	tfs_journal_exit(j);
	for (unsigned i = 0; i < nr_devs; i++) {
		if (bdev[i])
			tfs_bdev_close(bdev[i]);
		unlink(path[i]);
	}
	printbuf_exit(&err);
	return ret;
}

int main(int argc, char **argv)
{
	const char *dir = "/tmp";
	double secs = 2;
	unsigned flags = 0;
	int c;

	while ((c = getopt(argc, argv, "d:s:bh")) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 's':
			secs = atof(optarg);
			break;
		case 'b':
			flags |= TFS_BDEV_BUFFERED;
			break;
		default:
			fprintf(stderr, "usage: journal_bench [-d DIR] [-s SECONDS] [-b]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	for (unsigned devs = 1; devs <= 2; devs++)
		for (unsigned t = 1; t <= 4; t *= 2)
			for (int sync = 1; sync >= 0; sync--)
				if (run(dir, devs, t, sync, secs, flags))
					return 1;
	return 0;
}
