// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for lib/shrinker.c: the registry asks the caches for memory when
 * they pass the budget, in proportion to their size and inversely to their
 * seeks; it never loops on a shrinker that freed nothing; unregister waits
 * for a scan in progress and nothing touches the shrinker after it; the PSI
 * trigger is armed where the kernel has one, and its events cause scans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/printbuf.h"
#include "lib/shrinker.h"

#define KiB 1024UL
#define MiB (1024UL * 1024)

/* A cache of nr objects of obj_size bytes, nr_dirty of them unfreeable. */
struct fake {
	struct tfs_shrinker s;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long nr, nr_dirty;
	size_t obj_size;
	bool accounts;		    /* tfs_shrinker_account() instead of bytes() */
	bool stuck;		    /* scan frees nothing */
	unsigned long max_per_scan; /* frees at most this many per scan (0: no limit) */
	/* Blocking scans, for the unregister test. */
	bool block, in_scan, release, scan_done;
};

static unsigned long fake_count(struct tfs_shrinker *s)
{
	struct fake *f = s->private;

	pthread_mutex_lock(&f->lock);
	unsigned long n = f->nr - f->nr_dirty;

	pthread_mutex_unlock(&f->lock);
	return n;
}

static size_t fake_bytes(struct tfs_shrinker *s)
{
	struct fake *f = s->private;

	pthread_mutex_lock(&f->lock);
	size_t b = f->nr * f->obj_size;

	pthread_mutex_unlock(&f->lock);
	return b;
}

static unsigned long fake_scan(struct tfs_shrinker *s, unsigned long nr_to_scan)
{
	struct fake *f = s->private;
	unsigned long n = 0;

	pthread_mutex_lock(&f->lock);
	if (f->block) {
		f->in_scan = true;
		pthread_cond_broadcast(&f->cond);
		while (!f->release)
			pthread_cond_wait(&f->cond, &f->lock);
	}
	if (!f->stuck) {
		n = min_t(unsigned long, nr_to_scan, f->nr - f->nr_dirty);
		if (f->max_per_scan)
			n = min_t(unsigned long, n, f->max_per_scan);
		f->nr -= n;
	}
	if (f->block)
		f->scan_done = true;
	pthread_mutex_unlock(&f->lock);
	if (f->accounts && n)
		tfs_shrinker_account(s, -(long)(n * f->obj_size));
	return n;
}

static void fake_init(struct fake *f, const char *name, size_t obj_size, unsigned seeks,
		      bool accounts)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->obj_size = obj_size;
	f->accounts = accounts;
	f->s.name = name;
	f->s.count = fake_count;
	f->s.scan = fake_scan;
	f->s.bytes = accounts ? NULL : fake_bytes;
	f->s.seeks = seeks;
	f->s.private = f;
}

static void fake_add(struct fake *f, unsigned long n)
{
	pthread_mutex_lock(&f->lock);
	f->nr += n;
	pthread_mutex_unlock(&f->lock);
	if (f->accounts)
		tfs_shrinker_account(&f->s, (long)(n * f->obj_size));
	else if (f->s.registry)
		tfs_shrinkers_kick(f->s.registry);
}

static unsigned long fake_nr(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	unsigned long n = f->nr;

	pthread_mutex_unlock(&f->lock);
	return n;
}

static void fake_exit(struct fake *f)
{
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

/* --- the budget --- */

/* Under the budget nothing is scanned; past it the thread scans to the low watermark. */
static void test_budget_triggers_scan(void **state)
{
	for (int accounts = 0; accounts < 2; accounts++) {
		struct tfs_shrinkers *r;
		struct tfs_shrinkers_stats st;
		struct fake f;

		assert_int_equal(tfs_shrinkers_init(&r, 1 * MiB, false), 0);
		fake_init(&f, "fake", 4 * KiB, 2, accounts);
		tfs_shrinker_register(r, &f.s);

		fake_add(&f, 200); /* 800 KiB: under */
		tfs_shrinkers_sync(r);
		assert_int_equal(f.s.nr_scans, 0);
		assert_int_equal(fake_nr(&f), 200);

		fake_add(&f, 200); /* 1.6 MiB: over */
		tfs_shrinkers_sync(r);
		tfs_shrinkers_stats(r, &st);
		assert_true(st.runs_budget >= 1);
		assert_true(f.s.nr_scans >= 1);
		assert_true(tfs_shrinkers_bytes(r) <= 1 * MiB - 1 * MiB / 8);
		/* Not more than needed: the low watermark is 224 objects. */
		assert_true(fake_nr(&f) >= 200);
		assert_int_equal(st.runs_demand, 0);

		tfs_shrinker_unregister(&f.s);
		tfs_shrinkers_exit(r);
		fake_exit(&f);
	}
}

/* Growing by small steps far past the budget stays near it. */
static void test_budget_many_small_steps(void **state)
{
	struct tfs_shrinkers *r;
	struct fake f;

	assert_int_equal(tfs_shrinkers_init(&r, 1 * MiB, false), 0);
	fake_init(&f, "fake", 1 * KiB, 2, true);
	tfs_shrinker_register(r, &f.s);
	for (unsigned i = 0; i < 10000; i++) {
		fake_add(&f, 1);
		if (i % 1000 == 999)
			tfs_shrinkers_sync(r);
	}
	tfs_shrinkers_sync(r);
	assert_true(tfs_shrinkers_bytes(r) <= 1 * MiB);
	assert_true(f.s.nr_freed >= 10000 - 1024);
	tfs_shrinker_unregister(&f.s);
	tfs_shrinkers_exit(r);
	fake_exit(&f);
}

struct kicker {
	struct tfs_shrinkers *r;
	unsigned n;
};

static void *kick_thread(void *arg)
{
	struct kicker *k = arg;

	for (unsigned i = 0; i < k->n; i++) {
		tfs_shrinkers_kick(k->r);
		if (i % 3 == 0)
			tfs_shrinkers_sync(k->r);
	}
	return NULL;
}

/*
 * Kicks and syncs from several threads: every sync returns (a lost wake-up
 * of the thread hangs here; it once did when the thread cleared its
 * "write outstanding" flag before reading the eventfd).
 */
static void test_kick_sync_threads(void **state)
{
	struct tfs_shrinkers *r;
	struct kicker k;
	pthread_t th[4];

	assert_int_equal(tfs_shrinkers_init(&r, 1 * MiB, false), 0);
	k = (struct kicker){ .r = r, .n = getenv("TFS_LONG") ? 200000 : 20000 };
	for (unsigned i = 0; i < ARRAY_SIZE(th); i++)
		assert_int_equal(pthread_create(&th[i], NULL, kick_thread, &k), 0);
	for (unsigned i = 0; i < ARRAY_SIZE(th); i++)
		pthread_join(th[i], NULL);
	tfs_shrinkers_exit(r);
}

/* --- proportional asks --- */

static void test_proportional_size(void **state)
{
	struct tfs_shrinkers *r;
	struct fake a, b;

	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(&a, "a", 1 * KiB, 2, false);
	fake_init(&b, "b", 1 * KiB, 2, false);
	tfs_shrinker_register(r, &a.s);
	tfs_shrinker_register(r, &b.s);
	fake_add(&a, 3000);
	fake_add(&b, 1000);

	/* 4000 KiB held, 2000 KiB to free: a holds 3/4, so it is asked for 3/4. */
	assert_int_equal(tfs_shrinkers_run(r, 2000 * KiB), 2000 * KiB);
	assert_int_equal(a.s.nr_scans, 1);
	assert_int_equal(b.s.nr_scans, 1);
	assert_int_equal(a.s.last_asked, 1500);
	assert_int_equal(b.s.last_asked, 500);

	tfs_shrinker_unregister(&a.s);
	tfs_shrinker_unregister(&b.s);
	tfs_shrinkers_exit(r);
	fake_exit(&a);
	fake_exit(&b);
}

static void test_proportional_seeks(void **state)
{
	struct tfs_shrinkers *r;
	struct fake a, b;

	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(&a, "cheap", 1 * KiB, 2, true);
	fake_init(&b, "costly", 1 * KiB, 8, true);
	tfs_shrinker_register(r, &a.s);
	tfs_shrinker_register(r, &b.s);
	fake_add(&a, 2000);
	fake_add(&b, 2000);

	/* Same size, b four times as costly to recreate: a is asked four times as much. */
	assert_int_equal(tfs_shrinkers_run(r, 3000 * KiB), 1000 * KiB);
	assert_int_equal(a.s.last_asked, 800);
	assert_int_equal(b.s.last_asked, 200);

	tfs_shrinker_unregister(&a.s);
	tfs_shrinker_unregister(&b.s);
	tfs_shrinkers_exit(r);
	fake_exit(&a);
	fake_exit(&b);
}

/* Dirty objects count in bytes but cannot be freed: later rounds ask more. */
static void test_rounds_reach_target(void **state)
{
	struct tfs_shrinkers *r;
	struct fake f;

	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(&f, "half-dirty", 1 * KiB, 2, false);
	tfs_shrinker_register(r, &f.s);
	fake_add(&f, 1000);
	f.nr_dirty = 500;

	tfs_shrinkers_run(r, 600 * KiB);
	assert_true(tfs_shrinkers_bytes(r) <= 600 * KiB);
	assert_true(f.s.nr_scans > 1);
	assert_true(f.s.nr_scans <= TFS_SHRINKER_MAX_ROUNDS);

	/* Target 0 frees every clean object and nothing dirty. */
	tfs_shrinkers_run(r, 0);
	assert_int_equal(fake_nr(&f), 500);

	tfs_shrinker_unregister(&f.s);
	tfs_shrinkers_exit(r);
	fake_exit(&f);
}

/*
 * One cache full of dirty objects beside a clean one: the clean one gives
 * at most its share of the excess, not everything it holds (without the
 * cap the rounds doubled its asks until it was empty).
 */
static void test_dirty_not_taken_from_others(void **state)
{
	struct tfs_shrinkers *r;
	struct fake dirty, clean;

	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(&dirty, "dirty", 1 * KiB, 2, false);
	fake_init(&clean, "clean", 1 * KiB, 2, false);
	tfs_shrinker_register(r, &dirty.s);
	tfs_shrinker_register(r, &clean.s);
	fake_add(&dirty, 1000);
	dirty.nr_dirty = 990;
	fake_add(&clean, 400);

	/* Excess 400 KiB: clean's share is 400 * 400 / 1400, about 114 KiB. */
	tfs_shrinkers_run(r, 1000 * KiB);
	assert_int_equal(fake_nr(&dirty), 990);
	assert_true(fake_nr(&clean) >= 400 - 115);
	assert_true(tfs_shrinkers_bytes(r) > 1000 * KiB);
	/* Target 0 still frees every clean object. */
	tfs_shrinkers_run(r, 0);
	assert_int_equal(fake_nr(&clean), 0);

	tfs_shrinker_unregister(&dirty.s);
	tfs_shrinker_unregister(&clean.s);
	tfs_shrinkers_exit(r);
	fake_exit(&dirty);
	fake_exit(&clean);
}

/*
 * Two caches growing in turn, each reserving before it grows: together they
 * never hold more than the budget (counted bytes), and each takes memory
 * from the other when the budget is full.
 */
static void test_reserve_shared_budget(void **state)
{
	struct tfs_shrinkers *r;
	struct tfs_shrinkers_stats st;
	struct fake a, b;

	assert_int_equal(tfs_shrinkers_init(&r, 1 * MiB, false), 0);
	fake_init(&a, "a", 1 * KiB, 2, false);
	fake_init(&b, "b", 4 * KiB, 4, false);
	tfs_shrinker_register(r, &a.s);
	tfs_shrinker_register(r, &b.s);
	for (unsigned i = 0; i < 4000; i++) {
		struct fake *f = i % 3 ? &a : &b;

		assert_true(tfs_shrinkers_reserve(r, f->obj_size));
		fake_add(f, 1);
		assert_true(tfs_shrinkers_bytes(r) <= 1 * MiB);
	}
	tfs_shrinkers_stats(r, &st);
	assert_true(st.runs_direct > 0);
	assert_int_equal(st.over_budget, 0);
	assert_true(st.max_held <= 1 * MiB);
	assert_true(a.s.nr_freed > 0 && b.s.nr_freed > 0);
	assert_true(fake_nr(&a) > 0 && fake_nr(&b) > 0);

	/*
	 * Nothing to free, after growth that reserved nothing: within 64
	 * reserves one measures, says so and counts it.
	 */
	a.stuck = b.stuck = true;
	fake_add(&a, 2000);
	bool all_ok = true;

	for (unsigned i = 0; i < 64; i++)
		all_ok &= tfs_shrinkers_reserve(r, 1 * KiB);
	assert_false(all_ok);
	tfs_shrinkers_stats(r, &st);
	assert_true(st.over_budget >= 1);

	tfs_shrinker_unregister(&a.s);
	tfs_shrinker_unregister(&b.s);
	tfs_shrinkers_exit(r);
	fake_exit(&a);
	fake_exit(&b);
}

/* --- no progress --- */

static void test_no_progress_no_spin(void **state)
{
	struct tfs_shrinkers *r;
	struct tfs_shrinkers_stats st;
	struct fake stuck, good;

	assert_int_equal(tfs_shrinkers_init(&r, 1 * MiB, false), 0);
	fake_init(&stuck, "stuck", 4 * KiB, 2, true);
	fake_init(&good, "good", 1 * KiB, 2, true);
	stuck.stuck = true;
	tfs_shrinker_register(r, &stuck.s);
	tfs_shrinker_register(r, &good.s);
	fake_add(&good, 1000);

	/* On demand, to 0: the good one is asked until empty, the stuck one once. */
	tfs_shrinkers_run(r, 0);
	assert_int_equal(fake_nr(&good), 0);
	assert_int_equal(stuck.s.nr_scans, 0); /* empty: count 0, not asked */
	fake_add(&stuck, 1000);		       /* 4 MiB the stuck one cannot free */
	tfs_shrinkers_sync(r);
	tfs_shrinkers_stats(r, &st);
	/* Each budget run asked the stuck shrinker exactly once. */
	assert_true(st.runs_budget >= 1);
	assert_int_equal(stuck.s.nr_scans, st.runs_budget);
	assert_int_equal(stuck.s.nr_no_progress, stuck.s.nr_scans);

	u64 before = stuck.s.nr_scans;

	tfs_shrinkers_run(r, 0);
	assert_int_equal(stuck.s.nr_scans, before + 1);

	/* Many kicks: still at most one scan per run. */
	for (unsigned i = 0; i < 20; i++)
		tfs_shrinkers_kick(r);
	tfs_shrinkers_sync(r);
	tfs_shrinkers_stats(r, &st);
	/* Every run but the first on-demand one (stuck was empty then). */
	assert_int_equal(stuck.s.nr_scans, st.runs_budget + st.runs_demand - 1);

	tfs_shrinker_unregister(&stuck.s);
	tfs_shrinker_unregister(&good.s);
	tfs_shrinkers_exit(r);
	fake_exit(&stuck);
	fake_exit(&good);
}

/*
 * Beside a shrinker that needs several rounds (it frees 100 per scan), a
 * stuck one is asked only once in the run.
 */
static void test_no_progress_among_rounds(void **state)
{
	struct tfs_shrinkers *r;
	struct fake stuck, good;

	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(&stuck, "stuck", 4 * KiB, 2, true);
	fake_init(&good, "good", 1 * KiB, 2, true);
	stuck.stuck = true;
	good.max_per_scan = 100;
	tfs_shrinker_register(r, &stuck.s);
	tfs_shrinker_register(r, &good.s);
	fake_add(&stuck, 100);
	fake_add(&good, 1000);

	tfs_shrinkers_run(r, 0);
	assert_true(good.s.nr_scans >= 3);
	assert_int_equal(stuck.s.nr_scans, 1);
	assert_int_equal(stuck.s.nr_no_progress, 1);

	tfs_shrinker_unregister(&stuck.s);
	tfs_shrinker_unregister(&good.s);
	tfs_shrinkers_exit(r);
	fake_exit(&stuck);
	fake_exit(&good);
}

/* --- unregister during a scan --- */

struct unreg_ctx {
	struct tfs_shrinkers *r;
	struct fake *f;
	bool scan_done_at_return;
};

static void *run_thread(void *arg)
{
	struct unreg_ctx *c = arg;

	tfs_shrinkers_run(c->r, 0);
	return NULL;
}

static void *unregister_thread(void *arg)
{
	struct unreg_ctx *c = arg;

	tfs_shrinker_unregister(&c->f->s);
	pthread_mutex_lock(&c->f->lock);
	c->scan_done_at_return = c->f->scan_done;
	pthread_mutex_unlock(&c->f->lock);
	return NULL;
}

static void test_unregister_during_scan(void **state)
{
	struct tfs_shrinkers *r;
	struct fake *f = malloc(sizeof(*f)), other;
	struct unreg_ctx c;
	pthread_t runner, unreg;

	assert_non_null(f);
	assert_int_equal(tfs_shrinkers_init(&r, 0, false), 0);
	fake_init(f, "blocking", 1 * KiB, 2, false);
	fake_init(&other, "other", 1 * KiB, 2, false);
	tfs_shrinker_register(r, &other.s);
	tfs_shrinker_register(r, &f->s);
	fake_add(f, 100);
	fake_add(&other, 100);
	f->block = true;
	c = (struct unreg_ctx){ .r = r, .f = f };

	assert_int_equal(pthread_create(&runner, NULL, run_thread, &c), 0);
	pthread_mutex_lock(&f->lock);
	while (!f->in_scan)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);

	assert_int_equal(pthread_create(&unreg, NULL, unregister_thread, &c), 0);
	/* Give unregister time to reach its wait (not needed for correctness). */
	usleep(50 * 1000);
	pthread_mutex_lock(&f->lock);
	f->release = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);

	pthread_join(unreg, NULL);
	/* Unregister returned only after the scan had finished. */
	assert_true(c.scan_done_at_return);
	/* Freed now: the run still going must never touch it again (ASan). */
	fake_exit(f);
	memset(f, 0x5a, sizeof(*f));
	free(f);
	pthread_join(runner, NULL);

	/* The other shrinker was still scanned to empty. */
	assert_int_equal(fake_nr(&other), 0);
	/* And a later run sees only it. */
	fake_add(&other, 10);
	tfs_shrinkers_run(r, 0);
	assert_int_equal(fake_nr(&other), 0);

	tfs_shrinker_unregister(&other.s);
	tfs_shrinker_unregister(&other.s); /* twice is harmless */
	tfs_shrinkers_exit(r);
	fake_exit(&other);
}

/* --- PSI --- */

static bool psi_writable(const char *path, char *why, size_t len)
{
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return false;
	}
	close(fd);
	return true;
}

static void test_psi_memory(void **state)
{
	struct tfs_shrinkers *r;
	struct printbuf out = PRINTBUF;
	char why[128];

	if (!psi_writable("/proc/pressure/memory", why, sizeof(why))) {
		printf("skip: no PSI trigger possible (%s)\n", why);
		skip();
	}
	assert_int_equal(tfs_shrinkers_init(&r, 0, true), 0);
	tfs_shrinkers_to_text(&out, r);
	if (!tfs_shrinkers_psi_active(r))
		fail_msg("PSI file writable but no trigger armed:\n%s", printbuf_str(&out));
	assert_non_null(strstr(printbuf_str(&out), "psi:"));
	assert_non_null(strstr(printbuf_str(&out), "/proc/pressure/memory: \"some "));
	printbuf_exit(&out);
	tfs_shrinkers_exit(r);
}

/* Where the PSI file is absent: said once in to_text, the budget still works. */
static void test_psi_absent(void **state)
{
	struct tfs_shrinkers_opts opts = {
		.budget = 64 * KiB,
		.use_psi = true,
		.psi_path = "/nonexistent/pressure/memory",
	};
	struct tfs_shrinkers *r;
	struct printbuf out = PRINTBUF;
	struct fake f;
	const char *p;

	assert_int_equal(tfs_shrinkers_init_opts(&r, &opts), 0);
	assert_false(tfs_shrinkers_psi_active(r));
	fake_init(&f, "fake", 1 * KiB, 2, true);
	tfs_shrinker_register(r, &f.s);
	fake_add(&f, 100);
	tfs_shrinkers_sync(r);
	assert_true(tfs_shrinkers_bytes(r) <= 64 * KiB);

	tfs_shrinkers_to_text(&out, r);
	p = strstr(printbuf_str(&out), "unavailable (/nonexistent/pressure/memory:");
	assert_non_null(p);
	assert_null(strstr(p + 1, "unavailable"));
	assert_non_null(strstr(printbuf_str(&out), "only the budget triggers scans"));
	printbuf_exit(&out);
	tfs_shrinker_unregister(&f.s);
	tfs_shrinkers_exit(r);
	fake_exit(&f);
}

static volatile bool spin_stop;

static void *spinner(void *arg)
{
	while (!__atomic_load_n(&spin_stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

/*
 * A PSI event causes a scan.  Memory stalls cannot be made on demand, CPU
 * stalls can: the same trigger on /proc/pressure/cpu, with more spinning
 * threads than CPUs, fires within a window (2 s at most).
 */
static void test_psi_event_scans(void **state)
{
	struct tfs_shrinkers_opts opts = { .use_psi = true, .psi_path = "/proc/pressure/cpu" };
	struct tfs_shrinkers *r;
	struct tfs_shrinkers_stats st;
	struct fake f;
	char why[128];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nspin = (unsigned)(ncpu > 0 ? ncpu : 1) + 2;
	pthread_t th[64];
	time_t deadline;

	if (!psi_writable("/proc/pressure/cpu", why, sizeof(why))) {
		printf("skip: no PSI trigger possible (%s)\n", why);
		skip();
	}
	nspin = min_t(unsigned, nspin, ARRAY_SIZE(th));
	assert_int_equal(tfs_shrinkers_init_opts(&r, &opts), 0);
	if (!tfs_shrinkers_psi_active(r)) {
		printf("skip: /proc/pressure/cpu takes no trigger here\n");
		tfs_shrinkers_exit(r);
		skip();
	}
	fake_init(&f, "fake", 1 * KiB, 2, true);
	tfs_shrinker_register(r, &f.s);
	fake_add(&f, 1000);

	spin_stop = false;
	for (unsigned i = 0; i < nspin; i++)
		assert_int_equal(pthread_create(&th[i], NULL, spinner, NULL), 0);
	/* A guard against hanging forever, not a timing assertion. */
	deadline = time(NULL) + 60;
	do {
		usleep(20 * 1000);
		tfs_shrinkers_stats(r, &st);
	} while (!st.runs_psi && time(NULL) < deadline);
	__atomic_store_n(&spin_stop, true, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < nspin; i++)
		pthread_join(th[i], NULL);
	tfs_shrinkers_sync(r);

	assert_true(st.psi_events >= 1);
	assert_true(st.runs_psi >= 1);
	/* Each PSI run frees an eighth: 125 of 1000 the first time. */
	assert_true(f.s.nr_scans >= 1);
	assert_true(f.s.nr_freed >= 125);
	tfs_shrinker_unregister(&f.s);
	tfs_shrinkers_exit(r);
	fake_exit(&f);
}

/* --- text --- */

static void test_to_text(void **state)
{
	struct tfs_shrinkers *r;
	struct printbuf out = PRINTBUF;
	struct fake f;
	const char *s;

	assert_int_equal(tfs_shrinkers_init(&r, 4 * MiB, false), 0);
	fake_init(&f, "nodes", 4 * KiB, 4, true);
	tfs_shrinker_register(r, &f.s);
	fake_add(&f, 10);
	f.nr_dirty = 5;
	tfs_shrinkers_run(r, 0);
	tfs_shrinkers_run(r, 0); /* nothing left to free: not asked */
	tfs_shrinkers_to_text(&out, r);
	s = printbuf_str(&out);
	assert_false(out.allocation_failure);
	assert_non_null(strstr(s, "budget:"));
	assert_non_null(strstr(s, "4.0 MiB"));
	assert_non_null(strstr(s, "psi:"));
	assert_non_null(strstr(s, "not used"));
	assert_non_null(strstr(s, "0 budget, 0 psi (0 events), 2 on demand"));
	assert_non_null(strstr(s, "nodes:\n"));
	assert_non_null(strstr(s, "can free:"));
	assert_non_null(strstr(s, "seeks:"));
	assert_non_null(strstr(s, "asked 5, freed 5"));
	assert_non_null(strstr(s, "1 scans, asked 5, freed 5, 0 without progress"));
	printbuf_exit(&out);
	tfs_shrinker_unregister(&f.s);
	tfs_shrinkers_exit(r);
	fake_exit(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget_triggers_scan),
		cmocka_unit_test(test_budget_many_small_steps),
		cmocka_unit_test(test_kick_sync_threads),
		cmocka_unit_test(test_proportional_size),
		cmocka_unit_test(test_proportional_seeks),
		cmocka_unit_test(test_rounds_reach_target),
		cmocka_unit_test(test_dirty_not_taken_from_others),
		cmocka_unit_test(test_reserve_shared_budget),
		cmocka_unit_test(test_no_progress_no_spin),
		cmocka_unit_test(test_no_progress_among_rounds),
		cmocka_unit_test(test_unregister_during_scan),
		cmocka_unit_test(test_psi_memory),
		cmocka_unit_test(test_psi_absent),
		cmocka_unit_test(test_psi_event_scans),
		cmocka_unit_test(test_to_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
