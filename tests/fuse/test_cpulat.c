// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fuse/cpulat.c: the CPU latency request is taken once when
 * requests come, kept while they keep coming, dropped hold_ms after the
 * last one, and taken again by the next.  A regular file stands in for
 * /dev/cpu_dma_latency: each value written is appended to it, so the file
 * is the history of the request (0: held, -1: dropped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse/cpulat.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/tfs-cpulat-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000 + (u64)ts.tv_nsec / 1000000;
}

/* The values written so far, in order; returns how many. */
static size_t history(int32_t *v, size_t max)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	assert_non_null(f);
	n = fread(v, sizeof(*v), max, f);
	fclose(f);
	return n;
}

/* Waits up to 5 s for the request to be dropped; returns the ms waited. */
static u64 wait_dropped(struct tfs_cpulat *c)
{
	u64 start = now_ms();

	while (tfs_cpulat_held(c)) {
		assert_true(now_ms() - start < 5000);
		usleep(1000);
	}
	return now_ms() - start;
}

static void to_text(struct tfs_cpulat *c, struct printbuf *out)
{
	printbuf_reset(out);
	tfs_cpulat_to_text(out, c);
}

static void test_off_opens_nothing(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_cpulat *c = tfs_cpulat_start("/nonexistent/cpu_dma_latency", 0);

	(void)state;
	assert_non_null(c);
	tfs_cpulat_touch(c);
	assert_false(tfs_cpulat_held(c));
	to_text(c, &out);
	assert_non_null(strstr(printbuf_str(&out), "low wake-up latency:"));
	assert_non_null(strstr(printbuf_str(&out), "off\n"));
	tfs_cpulat_stop(c);
	tfs_cpulat_touch(NULL); /* a daemon without one */
	printbuf_exit(&out);
}

static void test_missing_device_says_why(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_cpulat *c = tfs_cpulat_start("/nonexistent/cpu_dma_latency", 20);

	(void)state;
	tfs_cpulat_touch(c);
	assert_false(tfs_cpulat_held(c));
	to_text(c, &out);
	assert_non_null(strstr(printbuf_str(&out),
			       "unavailable (/nonexistent/cpu_dma_latency: No such file"));
	tfs_cpulat_stop(c);
	printbuf_exit(&out);
}

/* A refused write (/dev/full: ENOSPC) stops it; nothing is held. */
static void test_refused_write_stops(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_cpulat *c = tfs_cpulat_start("/dev/full", 20);

	(void)state;
	tfs_cpulat_touch(c);
	tfs_cpulat_touch(c);
	assert_false(tfs_cpulat_held(c));
	to_text(c, &out);
	assert_non_null(strstr(printbuf_str(&out), "not held, taken 0 times"));
	assert_non_null(strstr(printbuf_str(&out), "stopped: writing /dev/full: No space"));
	tfs_cpulat_stop(c);
	printbuf_exit(&out);
}

static void *toucher(void *p)
{
	for (int i = 0; i < 20000; i++)
		tfs_cpulat_touch(p);
	return NULL;
}

/*
 * Touches from several threads take the request once per busy spell: the
 * history alternates 0, -1 (never taken twice, never dropped when not
 * held), and ends dropped once the touches stop.
 */
static void test_taken_once_dropped_after(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_cpulat *c = tfs_cpulat_start(path, 200);
	pthread_t t[4];
	int32_t v[64];
	size_t n;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, toucher, c), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	wait_dropped(c);
	n = history(v, 64);
	/* Each thread's touches took a moment: one spell, unless one was descheduled for 200 ms. */
	assert_true(n >= 2 && n % 2 == 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], i % 2 ? -1 : 0);
	to_text(c, &out);
	assert_non_null(strstr(printbuf_str(&out), "not held, taken"));

	/* The next burst takes it again (two touches within 1 ms, however loaded). */
	for (int i = 0; i < 1000 && !tfs_cpulat_held(c); i++)
		tfs_cpulat_touch(c);
	assert_true(tfs_cpulat_held(c));
	assert_int_equal(history(v, 64), n + 1);
	assert_int_equal(v[n], 0);
	to_text(c, &out);
	assert_non_null(strstr(printbuf_str(&out), "held, taken"));
	assert_null(strstr(printbuf_str(&out), "not held"));
	tfs_cpulat_stop(c);
	printbuf_exit(&out);
}

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

/*
 * Held while bursts come closer than hold_ms, however long that lasts,
 * and not dropped before hold_ms after the last one.  Each burst is two
 * touches back to back, the bursts 2 ms apart.
 */
static void test_kept_while_touched(void **state)
{
	const unsigned hold_ms = 300;
	struct tfs_cpulat *c = tfs_cpulat_start(path, hold_ms);
	u64 start = now_ms(), last = start, max_gap = 0, max_pair_ns = 0;
	int32_t v[8];

	(void)state;
	while (now_ms() - start < 2 * hold_ms) {
		u64 t = now_ms(), t0 = now_ns();

		tfs_cpulat_touch(c);
		tfs_cpulat_touch(c);
		if (now_ns() - t0 > max_pair_ns)
			max_pair_ns = now_ns() - t0;
		if (t - last > max_gap)
			max_gap = t - last;
		last = t;
		usleep(2000);
	}
	last = now_ms();
	tfs_cpulat_touch(c);
	tfs_cpulat_touch(c);
	/*
	 * A machine so loaded that a 2 ms sleep took hold_ms, or that two
	 * calls in a row were 1 ms apart, cannot tell.
	 */
	if (max_gap < hold_ms / 2 && max_pair_ns < 1000000) {
		assert_true(tfs_cpulat_held(c));
		assert_int_equal(history(v, 8), 1);
	} else {
		print_message("# a burst came %llu ms after the one before, or took %llu us:"
			      " not judged\n",
			      (unsigned long long)max_gap, (unsigned long long)max_pair_ns / 1000);
	}
	wait_dropped(c);
	/* Its own clock: no slack needed but the ms rounding here. */
	assert_true(now_ms() - last >= hold_ms - 2);
	tfs_cpulat_stop(c);
}

struct race {
	struct tfs_cpulat *c;
	pthread_barrier_t *start;
};

static void *racer(void *p)
{
	struct race *r = p;

	pthread_barrier_wait(r->start);
	tfs_cpulat_touch(r->c);
	tfs_cpulat_touch(r->c);
	return NULL;
}

/*
 * Touches racing for a request not held take it once: in each round the
 * threads leave a barrier together, so several find it not held at once
 * (the lock-free check) and only the check under the lock keeps them from
 * writing 0 each.  The history must still alternate 0, -1.
 */
static void test_racing_touches_take_once(void **state)
{
	enum {
		THREADS = 4,
		ROUNDS = 30
	};
	struct tfs_cpulat *c = tfs_cpulat_start(path, 1);
	pthread_barrier_t start;
	struct race r = { .c = c, .start = &start };
	pthread_t t[THREADS];
	int32_t v[4 * ROUNDS];
	size_t n;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		pthread_barrier_init(&start, NULL, THREADS);
		for (int i = 0; i < THREADS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, racer, &r), 0);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		wait_dropped(c);
	}
	n = history(v, 4 * ROUNDS);
	/* A round whose threads ran more than 1 ms apart takes nothing. */
	assert_true(n >= 2);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], i % 2 ? -1 : 0);
	tfs_cpulat_stop(c);
}

/*
 * The descriptor holds the request for as long as it is open in any
 * process: it must not stay open in a program the daemon runs
 * (fusermount3 at a signal), or the request would outlive the daemon.
 */
static void test_descriptor_close_on_exec(void **state)
{
	struct tfs_cpulat *c = tfs_cpulat_start(path, 20);
	char link[PATH_MAX], fdpath[300];
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int found = 0;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d))) {
		ssize_t len;

		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%s", de->d_name);
		len = readlink(fdpath, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = 0;
		if (strcmp(link, path))
			continue;
		found++;
		assert_true(fcntl(atoi(de->d_name), F_GETFD) & FD_CLOEXEC);
	}
	closedir(d);
	assert_int_equal(found, 1);
	tfs_cpulat_stop(c);
}

/*
 * A request now and then (a monitor's statfs every few ms) gains one
 * wake-up each, while holding the request for low_latency_ms after each
 * keeps every idle CPU polling: requests 10 ms apart held it 100% of the
 * time with the default 20 ms.  Requests more than a burst's gap apart
 * take nothing; requests in a burst do.
 */
static void test_isolated_touches_take_nothing(void **state)
{
	struct tfs_cpulat *c = tfs_cpulat_start(path, 20);
	int32_t v[8];

	(void)state;
	for (int i = 0; i < 20; i++) {
		tfs_cpulat_touch(c);
		assert_false(tfs_cpulat_held(c));
		usleep(5000); /* at least 5 ms between touches, however loaded */
	}
	assert_int_equal(history(v, 8), 0);

	/* A burst: back to back, some two touches come within the gap. */
	for (int i = 0; i < 1000 && !tfs_cpulat_held(c); i++)
		tfs_cpulat_touch(c);
	assert_true(tfs_cpulat_held(c));
	assert_int_equal(history(v, 8), 1);
	assert_int_equal(v[0], 0);
	wait_dropped(c);
	tfs_cpulat_stop(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_opens_nothing),
		cmocka_unit_test(test_missing_device_says_why),
		cmocka_unit_test(test_refused_write_stops),
		cmocka_unit_test_setup_teardown(test_taken_once_dropped_after, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_while_touched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_racing_touches_take_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_descriptor_close_on_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolated_touches_take_nothing, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
