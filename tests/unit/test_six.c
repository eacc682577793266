// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for lib/six.c, the rules lib/six.h states: which modes may be held
 * together (read shares with read and intent, intent excludes intent, write
 * excludes everything and is taken by the intent holder); seq moves on
 * every write lock and unlock and a relock succeeds only with the seq
 * unchanged; intent upgrades to write and write downgrades to intent;
 * trylocks fail without side effects; a writer waiting keeps new readers
 * out; and under several threads taking random modes, no two holders ever
 * overlap in a way the table forbids (checked with counters and with plain
 * data a broken lock would tear; run under TSan too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lib/printbuf.h"
#include "lib/six.h"

/* Holds `mode` (write: intent then write) on l. */
static void hold(struct tfs_six_lock *l, enum tfs_six_lock_mode mode)
{
	if (mode == TFS_SIX_LOCK_write) {
		assert_true(tfs_six_trylock_intent(l));
		assert_true(tfs_six_trylock_write(l));
	} else {
		assert_true(tfs_six_trylock(l, mode));
	}
}

static void release(struct tfs_six_lock *l, enum tfs_six_lock_mode mode)
{
	if (mode == TFS_SIX_LOCK_write) {
		tfs_six_unlock_write(l);
		tfs_six_unlock_intent(l);
	} else {
		tfs_six_unlock(l, mode);
	}
}

/*
 * Held (row) against wanted (column), by another holder: read and intent
 * are tried directly; write is tried as its taker would, with intent.
 */
static void test_compat_table(void **state)
{
	static const bool ok[TFS_SIX_LOCK_NR][TFS_SIX_LOCK_NR] = {
		/*		 read	intent	write */
		[TFS_SIX_LOCK_read] = { true, true, false },
		[TFS_SIX_LOCK_intent] = { true, false, false },
		[TFS_SIX_LOCK_write] = { false, false, false },
	};
	struct tfs_six_lock l;

	tfs_six_lock_init(&l);
	for (unsigned held = 0; held < TFS_SIX_LOCK_NR; held++)
		for (unsigned want = 0; want < TFS_SIX_LOCK_NR; want++) {
			bool got;

			hold(&l, held);
			if (want == TFS_SIX_LOCK_write) {
				got = tfs_six_trylock_intent(&l) && tfs_six_trylock_write(&l);
				if (got)
					release(&l, TFS_SIX_LOCK_write);
				else if (held == TFS_SIX_LOCK_read)
					tfs_six_unlock_intent(&l); /* intent was had, write not */
			} else {
				got = tfs_six_trylock(&l, want);
				if (got)
					release(&l, want);
			}
			assert_int_equal(got, ok[held][want]);
			release(&l, held);
			/* Nothing left behind by a failed try. */
			assert_int_equal(tfs_six_lock_readers(&l), 0);
			assert_false(tfs_six_lock_intent_held(&l));
			assert_false(tfs_six_lock_write_held(&l));
		}
	/* Readers share among themselves. */
	for (unsigned i = 0; i < 5; i++)
		assert_true(tfs_six_trylock_read(&l));
	assert_int_equal(tfs_six_lock_readers(&l), 5);
	for (unsigned i = 0; i < 5; i++)
		tfs_six_unlock_read(&l);
	tfs_six_lock_exit(&l);
}

static void test_seq_rules(void **state)
{
	struct tfs_six_lock l;
	u32 seq;

	tfs_six_lock_init(&l);
	seq = tfs_six_lock_seq(&l);
	/* Read and intent alone do not move seq. */
	tfs_six_lock_read(&l);
	tfs_six_unlock_read(&l);
	tfs_six_lock_intent(&l);
	tfs_six_unlock_intent(&l);
	assert_int_equal(tfs_six_lock_seq(&l), seq);
	assert_true(tfs_six_relock_read(&l, seq));
	tfs_six_unlock_read(&l);
	assert_true(tfs_six_relock_intent(&l, seq));

	/* Write: odd while held, one more on release. */
	tfs_six_lock_write(&l);
	assert_int_equal(tfs_six_lock_seq(&l), seq + 1);
	assert_true(tfs_six_lock_seq(&l) & 1);
	assert_false(tfs_six_relock_read(&l, seq + 1)); /* write held */
	tfs_six_unlock_write(&l);
	assert_int_equal(tfs_six_lock_seq(&l), seq + 2);
	tfs_six_unlock_intent(&l);

	/* A relock with the old seq fails and holds nothing. */
	assert_false(tfs_six_relock_read(&l, seq));
	assert_false(tfs_six_relock_intent(&l, seq));
	assert_int_equal(tfs_six_lock_readers(&l), 0);
	assert_false(tfs_six_lock_intent_held(&l));
	/* With the new one it succeeds. */
	assert_true(tfs_six_relock_read(&l, seq + 2));
	/* Intent is compatible with read, so relock_intent works beside a reader. */
	assert_true(tfs_six_relock_intent(&l, seq + 2));
	/* But not when intent is held already. */
	assert_false(tfs_six_relock_intent(&l, seq + 2));
	tfs_six_unlock_intent(&l);
	tfs_six_unlock_read(&l);
	/* A failed write trylock does not move seq. */
	tfs_six_lock_read(&l);
	tfs_six_lock_intent(&l);
	assert_false(tfs_six_trylock_write(&l));
	assert_int_equal(tfs_six_lock_seq(&l), seq + 2);
	tfs_six_unlock_intent(&l);
	tfs_six_unlock_read(&l);
	tfs_six_lock_exit(&l);
}

static void test_upgrade_downgrade(void **state)
{
	struct tfs_six_lock l;

	tfs_six_lock_init(&l);
	tfs_six_lock_intent(&l);
	assert_true(tfs_six_trylock_read(&l)); /* readers still welcome */
	tfs_six_unlock_read(&l);
	tfs_six_lock_write(&l); /* upgrade */
	assert_true(tfs_six_lock_write_held(&l));
	assert_false(tfs_six_trylock_read(&l));
	tfs_six_unlock_write(&l); /* downgrade: intent still held */
	assert_true(tfs_six_lock_intent_held(&l));
	assert_false(tfs_six_lock_write_held(&l));
	assert_false(tfs_six_trylock_intent(&l));
	assert_true(tfs_six_trylock_read(&l));
	tfs_six_unlock_read(&l);
	/* Upgrade again, by trylock this time. */
	assert_true(tfs_six_trylock_write(&l));
	tfs_six_unlock_write(&l);
	tfs_six_unlock_intent(&l);
	assert_true(tfs_six_trylock_intent(&l));
	tfs_six_unlock_intent(&l);
	tfs_six_lock_exit(&l);
}

struct waiter {
	struct tfs_six_lock *l;
	enum tfs_six_lock_mode mode;
	int done; /* atomic */
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;

	if (w->mode == TFS_SIX_LOCK_write)
		tfs_six_lock_intent(w->l);
	tfs_six_lock(w->l, w->mode);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	release(w->l, w->mode);
	return NULL;
}

/* Polls until l counted a wait in mode (the waiter is in its slow path) or w finished. */
static void wait_for_sleeper(struct tfs_six_lock *l, enum tfs_six_lock_mode mode, u64 before,
			     struct waiter *w)
{
	while (__atomic_load_n(&l->waits[mode], __ATOMIC_RELAXED) == before &&
	       !__atomic_load_n(&w->done, __ATOMIC_ACQUIRE))
		sched_yield();
}

/*
 * A writer waiting for a reader keeps new readers (and intent) out, and
 * gets the lock once the reader leaves; the wait is counted.
 */
static void test_writer_waits_for_readers(void **state)
{
	struct tfs_six_lock l;
	struct waiter w = { .l = &l, .mode = TFS_SIX_LOCK_write };
	pthread_t t;

	tfs_six_lock_init(&l);
	tfs_six_lock_read(&l);
	assert_int_equal(pthread_create(&t, NULL, waiter_fn, &w), 0);
	wait_for_sleeper(&l, TFS_SIX_LOCK_write, 0, &w);
	assert_false(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));
	/* Writer preference: a new reader is refused while the writer waits. */
	assert_false(tfs_six_trylock_read(&l));
	assert_false(tfs_six_trylock_intent(&l));
	assert_int_equal(tfs_six_lock_readers(&l), 1);
	tfs_six_unlock_read(&l);
	pthread_join(t, NULL);
	assert_true(w.done);
	assert_int_equal(l.waits[TFS_SIX_LOCK_write], 1);
	assert_int_equal(tfs_six_lock_seq(&l), 2);
	/* Free again. */
	assert_true(tfs_six_trylock_read(&l));
	tfs_six_unlock_read(&l);
	tfs_six_lock_exit(&l);
}

/* Readers wait while write is held, intent waits while intent is held. */
static void test_blocking_waits(void **state)
{
	struct tfs_six_lock l;

	tfs_six_lock_init(&l);
	for (unsigned m = 0; m < 2; m++) {
		enum tfs_six_lock_mode held = m ? TFS_SIX_LOCK_intent : TFS_SIX_LOCK_write;
		enum tfs_six_lock_mode want = m ? TFS_SIX_LOCK_intent : TFS_SIX_LOCK_read;
		struct waiter w = { .l = &l, .mode = want };
		u64 before = l.waits[want];
		pthread_t t;

		hold(&l, held);
		assert_int_equal(pthread_create(&t, NULL, waiter_fn, &w), 0);
		wait_for_sleeper(&l, want, before, &w);
		assert_false(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));
		release(&l, held);
		pthread_join(t, NULL);
		assert_true(w.done);
		assert_int_equal(l.waits[want], before + 1);
	}

	struct printbuf buf = PRINTBUF;

	tfs_six_lock_to_text(&buf, &l);
	assert_non_null(strstr(printbuf_str(&buf), "read 1 ("));
	assert_non_null(strstr(printbuf_str(&buf), "intent 1 ("));
	assert_non_null(strstr(printbuf_str(&buf), "write 0 ("));
	printbuf_exit(&buf);
	tfs_six_lock_exit(&l);
}

/* --- stress --- */

#define STRESS_THREADS 4

struct stress {
	struct tfs_six_lock l;
	/* Who is in, by mode (atomic): checked against the table on every entry. */
	int readers, intents, writers;
	/* Protected by the lock: written only under write, a == b always. */
	u64 a, b;
	unsigned iters;
	int violations; /* atomic */
};

static void stress_check(struct stress *s, bool ok)
{
	if (!ok)
		__atomic_add_fetch(&s->violations, 1, __ATOMIC_RELAXED);
}

static void *stress_fn(void *arg)
{
	struct stress *s = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();

	for (unsigned i = 0; i < s->iters; i++) {
		unsigned r = (unsigned)rand_r(&seed) % 10;
		bool trylock = rand_r(&seed) & 1;

		if (r < 6) {
			/* Read (blocking or trylock), then a relock by seq. */
			if (trylock ? !tfs_six_trylock_read(&s->l) : (tfs_six_lock_read(&s->l), 0))
				continue;
			__atomic_add_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
			stress_check(s, !__atomic_load_n(&s->writers, __ATOMIC_SEQ_CST));
			u64 a = s->a, b = s->b;
			u32 seq = tfs_six_lock_seq(&s->l);

			stress_check(s, a == b && !(seq & 1));
			__atomic_sub_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
			tfs_six_unlock_read(&s->l);
			if (tfs_six_relock_read(&s->l, seq)) {
				/* Same seq: nothing was written in between. */
				stress_check(s, s->a == a);
				tfs_six_unlock_read(&s->l);
			}
			continue;
		}
		if (trylock ? !tfs_six_trylock_intent(&s->l) : (tfs_six_lock_intent(&s->l), 0))
			continue;
		stress_check(s, __atomic_add_fetch(&s->intents, 1, __ATOMIC_SEQ_CST) == 1);
		stress_check(s, s->a == s->b);
		if (r >= 8) {
			if (trylock ? tfs_six_trylock_write(&s->l)
				    : (tfs_six_lock_write(&s->l), true)) {
				__atomic_add_fetch(&s->writers, 1, __ATOMIC_SEQ_CST);
				stress_check(s, !__atomic_load_n(&s->readers, __ATOMIC_SEQ_CST));
				s->a++;
				sched_yield();
				s->b++;
				__atomic_sub_fetch(&s->writers, 1, __ATOMIC_SEQ_CST);
				tfs_six_unlock_write(&s->l);
			}
		}
		__atomic_sub_fetch(&s->intents, 1, __ATOMIC_SEQ_CST);
		tfs_six_unlock_intent(&s->l);
	}
	return NULL;
}

static void test_stress(void **state)
{
	struct stress *s = calloc(1, sizeof(*s));
	pthread_t t[STRESS_THREADS];

	assert_non_null(s);
	tfs_six_lock_init(&s->l);
	s->iters = getenv("TFS_LONG") ? 2000000 : 30000;
	for (unsigned i = 0; i < STRESS_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, stress_fn, s), 0);
	for (unsigned i = 0; i < STRESS_THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(s->violations, 0);
	assert_int_equal(s->a, s->b);
	/* Every write moved seq by two. */
	assert_int_equal(tfs_six_lock_seq(&s->l), (u32)(2 * s->a));
	assert_int_equal(tfs_six_lock_readers(&s->l), 0);
	assert_false(tfs_six_lock_intent_held(&s->l));
	tfs_six_lock_exit(&s->l);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compat_table),
		cmocka_unit_test(test_seq_rules),
		cmocka_unit_test(test_upgrade_downgrade),
		cmocka_unit_test(test_writer_waits_for_readers),
		cmocka_unit_test(test_blocking_waits),
		cmocka_unit_test(test_stress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
