// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for lib/errseq.c: the rules fsync's error reporting stands on
 * (xfstests src/fsync-err.c): every reader that sampled before an error
 * sees it exactly once, then 0; a reader sampling after an error nobody
 * saw still sees it; a reader sampling after it was seen does not; a
 * second error after the first was seen is new to everyone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>

#include "lib/errseq.h"

static void test_no_error(void **state)
{
	tfs_errseq_t e = 0, s = tfs_errseq_sample(&e);

	assert_int_equal(tfs_errseq_check(&e, s), 0);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &s), 0);
	/* Recording 0 records nothing. */
	tfs_errseq_set(&e, 0);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &s), 0);
}

static void test_each_reader_once(void **state)
{
	tfs_errseq_t e = 0, s[4];

	for (unsigned i = 0; i < 4; i++)
		s[i] = tfs_errseq_sample(&e);
	tfs_errseq_set(&e, -EIO);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(tfs_errseq_check(&e, s[i]), -EIO);
		assert_int_equal(tfs_errseq_check_and_advance(&e, &s[i]), -EIO);
		assert_int_equal(tfs_errseq_check_and_advance(&e, &s[i]), 0);
	}
}

static void test_opener_after_unseen_error(void **state)
{
	tfs_errseq_t e = 0, late;

	tfs_errseq_set(&e, -EIO);
	late = tfs_errseq_sample(&e);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &late), -EIO);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &late), 0);
	/* Seen now: a later opener starts after it. */
	late = tfs_errseq_sample(&e);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &late), 0);
}

static void test_same_code_again_is_new(void **state)
{
	tfs_errseq_t e = 0, a = tfs_errseq_sample(&e), b = tfs_errseq_sample(&e);

	tfs_errseq_set(&e, -EIO);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &a), -EIO);
	tfs_errseq_set(&e, -EIO);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &a), -EIO);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &a), 0);
	/* b looked at neither: folded into one report of the latest. */
	assert_int_equal(tfs_errseq_check_and_advance(&e, &b), -EIO);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &b), 0);
}

static void test_latest_code_wins(void **state)
{
	tfs_errseq_t e = 0, a = tfs_errseq_sample(&e);

	tfs_errseq_set(&e, -EIO);
	tfs_errseq_set(&e, -ENOSPC);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &a), -ENOSPC);
	assert_int_equal(tfs_errseq_check_and_advance(&e, &a), 0);
}

#define NR_THREADS 4
#define NR_ROUNDS 2000

struct race {
	tfs_errseq_t e;
	tfs_errseq_t since[NR_THREADS];
	unsigned seen[NR_THREADS];
	unsigned round; /* errors recorded so far */
	pthread_barrier_t bar;
};

static struct race R;

/* Each round: one error is recorded, then every reader must see it exactly once. */
static void *race_reader(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;

	for (unsigned r = 0; r < NR_ROUNDS; r++) {
		pthread_barrier_wait(&R.bar);
		if (i == 0)
			tfs_errseq_set(&R.e, -EIO);
		pthread_barrier_wait(&R.bar);
		/* Two racing checks by the same reader must count once. */
		if (tfs_errseq_check_and_advance(&R.e, &R.since[i]))
			R.seen[i]++;
		if (tfs_errseq_check_and_advance(&R.e, &R.since[i]))
			R.seen[i]++;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	pthread_t t[NR_THREADS];

	R.e = 0;
	pthread_barrier_init(&R.bar, NULL, NR_THREADS);
	for (unsigned i = 0; i < NR_THREADS; i++) {
		R.since[i] = tfs_errseq_sample(&R.e);
		R.seen[i] = 0;
	}
	for (unsigned i = 0; i < NR_THREADS; i++)
		pthread_create(&t[i], NULL, race_reader, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < NR_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&R.bar);
	for (unsigned i = 0; i < NR_THREADS; i++)
		assert_int_equal(R.seen[i], NR_ROUNDS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_error),
		cmocka_unit_test(test_each_reader_once),
		cmocka_unit_test(test_opener_after_unseen_error),
		cmocka_unit_test(test_same_code_again_is_new),
		cmocka_unit_test(test_latest_code_wins),
		cmocka_unit_test(test_concurrent_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
