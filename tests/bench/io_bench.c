// SPDX-License-Identifier: GPL-2.0
/*
 * io_bench: the daemon-side cost of 4 KiB random writes and reads on one
 * file, without FUSE (built, never run by meson test).
 *
 *   io_bench [-s MiB] [-w WRITES] [-r READS] [-f FSYNC_EVERY]
 *
 * Writes the file sequentially (-s MiB, 1 MiB at a time), then overwrites
 * random 4 KiB blocks (-w, fsync every -f), then reads random 4 KiB blocks
 * (-r); prints microseconds per operation of each phase, elapsed and CPU
 * (all threads: user and system).  Not under valgrind: it has no io_uring.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <time.h>

#include "../unit/posix_test.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU time of the whole process (every thread), us: less noisy than wall time. */
static double cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

static u64 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

__attribute__((noinline)) static int phase_write(struct pt *t, struct tfs_file *f, u64 blocks,
						 unsigned n, unsigned every, u8 *buf)
{
	u64 s = 88172645463325252ULL;

	for (unsigned i = 0; i < n; i++) {
		u64 b = rnd(&s) % blocks;

		pt_fill(buf, 4096, i + 7, b * 4096);
		if (tfs_write(t->fs, f, buf, 4096, b * 4096) != 4096)
			return -1;
		if (every && (i + 1) % every == 0 && tfs_fsync(t->fs, f, false))
			return -1;
	}
	return 0;
}

__attribute__((noinline)) static int phase_read(struct pt *t, struct tfs_file *f, u64 blocks,
						unsigned n, u8 *buf)
{
	u64 s = 1442695040888963407ULL;

	for (unsigned i = 0; i < n; i++)
		if (tfs_read(t->fs, f, buf, 4096, (rnd(&s) % blocks) * 4096) != 4096)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct pt_geometry g = { .size = 0 };
	unsigned mib = 64, writes = 4000, reads = 4000, every = 32;
	struct pt t;
	struct tfs_file *f;
	u8 *buf;
	double t0, t1, t2, c0, c1, c2;
	int opt;

	while ((opt = getopt(argc, argv, "s:w:r:f:")) != -1) {
		switch (opt) {
		case 's':
			mib = (unsigned)atoi(optarg);
			break;
		case 'w':
			writes = (unsigned)atoi(optarg);
			break;
		case 'r':
			reads = (unsigned)atoi(optarg);
			break;
		case 'f':
			every = (unsigned)atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: io_bench [-s MiB] [-w WRITES] [-r READS] [-f FSYNC_EVERY]\n");
			return 2;
		}
	}
	g.size = ((u64)mib * 3 + 64) << 20;
	if (pt_mkfs(&t, &g) || pt_create(&t, TFS_ROOT_INO, "f", &f))
		return 1;
	buf = tfs_bdev_alloc_buf(NULL, 1 << 20);
	for (unsigned i = 0; i < mib; i++) {
		pt_fill(buf, 1 << 20, 1, (u64)i << 20);
		if (tfs_write(t.fs, f, buf, 1 << 20, (u64)i << 20) != 1 << 20)
			return 1;
	}
	if (tfs_fsync(t.fs, f, false))
		return 1;
	t0 = now_us();
	c0 = cpu_us();
	if (phase_write(&t, f, (u64)mib << 8, writes, every, buf))
		return 1;
	t1 = now_us();
	c1 = cpu_us();
	if (phase_read(&t, f, (u64)mib << 8, reads, buf))
		return 1;
	t2 = now_us();
	c2 = cpu_us();
	printf("random 4k write (fsync every %u): %.1f us/op, cpu %.1f us/op\n", every,
	       (t1 - t0) / (writes ?: 1), (c1 - c0) / (writes ?: 1));
	printf("random 4k read: %.1f us/op, cpu %.1f us/op\n", (t2 - t1) / (reads ?: 1),
	       (c2 - c1) / (reads ?: 1));
	tfs_release(t.fs, f);
	free(buf);
	pt_cleanup(&t);
	return 0;
}
