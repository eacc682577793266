// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for journal/journal.c: reservations and the reason each one cannot
 * proceed, waits that are not errors, halt and err_seq, flush_seq (sync and
 * async), journal_to_text.  Faults come from journal_io and faultdev tests
 * (test_journal_io.c); these run on plain image files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "journal_test.h"

#define MAX_U64S(t) (((t)->opts.max_entry_size - sizeof(struct jset)) / 8 - 3)

struct waiter {
	struct tfs_journal *j;
	unsigned u64s, flags;
	int ret;
	struct tfs_journal_res res;
	pthread_t thread;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;

	w->ret = tfs_journal_res_get(w->j, &w->res, w->u64s, w->flags);
	if (!w->ret)
		tfs_journal_res_put(w->j, &w->res);
	return NULL;
}

static void waiter_start(struct waiter *w, struct tfs_journal *j, unsigned u64s)
{
	*w = (struct waiter){ .j = j, .u64s = u64s, .ret = 1 };
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_fn, w), 0);
}

/* Until reason was met at least `nr` times (the waiter is asleep on it). */
static void wait_count(struct tfs_journal *j, enum tfs_journal_cur_err reason, u64 nr)
{
	while (tfs_journal_cur_err_count(j, reason) < nr)
		usleep(1000);
}

static void test_commit_flush_replay(void **state)
{
	struct jt t;
	struct tfs_journal_read *r;
	struct jt_model m = { 0 };
	struct printbuf err = PRINTBUF;
	s64 seq = 0;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	for (unsigned i = 0; i < 40; i++) {
		seq = jt_commit(t.j, i % 10, 1000 + i, 0);
		assert_true(seq > 0);
		jt_pin_log(&t, seq);
		if (i % 7 == 0)
			usleep(3000); /* let some entries close on age */
	}
	assert_int_equal(tfs_journal_flush_seq(t.j, seq), 0);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) >= (u64)seq);
	assert_true(tfs_journal_seq_ondisk(t.j) >= (u64)seq);
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	/* A seq never handed out is a caller bug. */
	assert_int_equal(tfs_journal_flush_seq(t.j, tfs_journal_cur_seq(t.j) + 5),
			 -TFS_ERR_invalid_argument);
	jt_stop(&t);

	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(tfs_journal_read(t.devs, 1, &t.opts, &r, &err), 0);
	assert_true(r->newest_seq >= (u64)seq);
	assert_int_equal(r->last_seq, 1);
	assert_int_equal(r->nr_gaps, 0);
	assert_int_equal(r->nr_corrupt, 0);
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	assert_false(m.out_of_order);
	assert_int_equal(m.nr_keys, 40);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(m.val[i], 1000 + 30 + i);

	/* Another filesystem's uuid: nothing validates. */
	struct tfs_journal_opts other = t.opts;
	struct tfs_journal_read *r2;

	other.uuid[3] ^= 1;
	assert_int_equal(tfs_journal_read(t.devs, 1, &other, &r2, &err), -TFS_ERR_journal_empty);
	assert_int_equal(r2->nr, 0);
	tfs_journal_read_free(r2);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/* Four entries held open by reservations: the fifth waits for one of them. */
static void test_reason_blocked_in_flight(void **state)
{
	struct jt t;
	struct tfs_journal_res res[TFS_JOURNAL_BUF_NR], r5;
	struct waiter w;

	jt_images(&t, 1, 16, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	for (unsigned i = 0; i < TFS_JOURNAL_BUF_NR; i++) {
		assert_int_equal(tfs_journal_res_get(t.j, &res[i], MAX_U64S(&t), 0), 0);
		assert_int_equal(res[i].seq, i + 1);
	}
	assert_int_equal(tfs_journal_res_get(t.j, &r5, MAX_U64S(&t), TFS_JOURNAL_RES_NONBLOCK),
			 -TFS_ERR_journal_max_in_flight);
	assert_true(
		tfs_err_matches(-TFS_ERR_journal_max_in_flight, TFS_ERR_journal_res_get_blocked));
	assert_int_equal(tfs_journal_cur_entry_error(t.j), TFS_JOURNAL_CUR_blocked);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_blocked), 1);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_full), 0);

	/* A blocking caller waits and never sees it. */
	waiter_start(&w, t.j, MAX_U64S(&t));
	wait_count(t.j, TFS_JOURNAL_CUR_blocked, 2);
	assert_int_equal(w.ret, 1);
	for (unsigned i = 0; i < TFS_JOURNAL_BUF_NR; i++)
		tfs_journal_res_put(t.j, &res[i]);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(w.res.seq, TFS_JOURNAL_BUF_NR + 1);
	assert_int_equal(tfs_journal_flush(t.j), 0);
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	jt_cleanup(&t);
}

static void test_reason_blocked_explicit(void **state)
{
	struct jt t;
	struct tfs_journal_res res;
	struct waiter w;
	struct printbuf out = PRINTBUF;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	assert_true(jt_commit(t.j, 1, 1, 0) > 0);
	tfs_journal_block(t.j);
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3, TFS_JOURNAL_RES_NONBLOCK),
			 -TFS_ERR_journal_blocked);
	tfs_journal_to_text(&out, t.j);
	assert_non_null(strstr(printbuf_str(&out), "current entry error:    blocked"));
	waiter_start(&w, t.j, 3);
	wait_count(t.j, TFS_JOURNAL_CUR_blocked, 2);
	assert_int_equal(w.ret, 1);
	tfs_journal_unblock(t.j);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(tfs_journal_cur_entry_error(t.j), TFS_JOURNAL_CUR_ok);
	printbuf_exit(&out);
	jt_cleanup(&t);
}

static int drop_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	tfs_journal_pin_drop(j, pin);
	return 0;
}

/*
 * Four buckets, one entry each, one in reserve: the fourth entry finds the
 * journal full while seq 1 is pinned.
 */
static void test_reason_journal_full(void **state)
{
	struct jt t;
	struct tfs_journal_entry_pin pin;
	struct tfs_journal_res res;
	struct waiter w;

	jt_images(&t, 1, 4, 16 << 10);
	assert_int_equal(jt_start(&t), 0);
	tfs_journal_pin_init(&pin);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(tfs_journal_res_get(t.j, &res, MAX_U64S(&t), 0), 0);
		if (!i)
			tfs_journal_pin_add(t.j, res.seq, &pin, NULL);
		tfs_journal_res_put(t.j, &res);
	}
	assert_int_equal(tfs_journal_res_get(t.j, &res, MAX_U64S(&t), TFS_JOURNAL_RES_NONBLOCK),
			 -TFS_ERR_journal_full);
	assert_int_equal(tfs_journal_cur_entry_error(t.j), TFS_JOURNAL_CUR_journal_full);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_full), 1);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_pin_full), 0);
	assert_int_equal(tfs_journal_last_seq(t.j), 1);

	/* Waits (no error) until the pin goes and reclaim frees a bucket. */
	waiter_start(&w, t.j, MAX_U64S(&t));
	wait_count(t.j, TFS_JOURNAL_CUR_journal_full, 2);
	assert_int_equal(w.ret, 1);
	tfs_journal_pin_drop(t.j, &pin);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.ret, 0);
	assert_true(tfs_journal_last_seq_ondisk(t.j) > 1);
	assert_int_equal(tfs_journal_flush(t.j), 0);

	/* With a flush callback, reclaim frees the space by itself. */
	for (unsigned i = 0; i < 12; i++) {
		assert_int_equal(tfs_journal_res_get(t.j, &res, MAX_U64S(&t), 0), 0);
		if (!tfs_journal_pin_active(&pin))
			tfs_journal_pin_add(t.j, res.seq, &pin, drop_pin_flush);
		tfs_journal_res_put(t.j, &res);
	}
	assert_int_equal(tfs_journal_flush(t.j), 0);
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	jt_cleanup(&t);
}

static void test_reason_pin_full(void **state)
{
	struct jt t;
	struct tfs_journal_entry_pin pin;
	struct tfs_journal_res res;
	struct waiter w;
	s64 seq;

	jt_images(&t, 1, 16, 64 << 10);
	t.opts.pin_fifo_size = 16; /* 12 usable: 4 are the reserve */
	/*
	 * Entries close only on demand: with the default 2 ms an entry could
	 * close on age between res_put and flush_seq (a loaded machine), and
	 * flush_seq then wrote an extra empty flush entry, shifting every seq.
	 */
	t.opts.write_delay_ms = 100000;
	assert_int_equal(jt_start(&t), 0);
	tfs_journal_pin_init(&pin);
	for (unsigned i = 0; i < 12; i++) {
		seq = jt_commit(t.j, i, i, 0);
		assert_int_equal(seq, i + 1);
		if (!i)
			tfs_journal_pin_add(t.j, seq, &pin, NULL);
		assert_int_equal(tfs_journal_flush_seq(t.j, seq), 0);
	}
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3, TFS_JOURNAL_RES_NONBLOCK),
			 -TFS_ERR_journal_pin_full);
	assert_int_equal(tfs_journal_cur_entry_error(t.j), TFS_JOURNAL_CUR_journal_pin_full);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_pin_full), 1);
	/* Not journal_full: there is plenty of space. */
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_full), 0);

	/* RESERVED callers (reclaim's own updates) may use the reserve. */
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3,
					     TFS_JOURNAL_RES_NONBLOCK | TFS_JOURNAL_RES_RESERVED),
			 0);
	tfs_journal_res_put(t.j, &res);
	assert_int_equal(tfs_journal_flush_seq(t.j, res.seq), 0);

	/* A blocking caller waits until reclaim flushes the pin. */
	waiter_start(&w, t.j, 3);
	wait_count(t.j, TFS_JOURNAL_CUR_journal_pin_full, 2);
	assert_int_equal(w.ret, 1);
	tfs_journal_pin_update(t.j, 1, &pin, drop_pin_flush); /* same seq: now flushable */
	tfs_journal_reclaim_kick(t.j);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.ret, 0);
	assert_false(tfs_journal_pin_active(&pin));
	assert_true(tfs_journal_last_seq(t.j) > 1);
	jt_cleanup(&t);
}

static void test_reason_insufficient_devices(void **state)
{
	struct jt t;
	struct tfs_journal_res res;

	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 2;
	assert_int_equal(jt_start(&t), 0);
	assert_true(jt_commit(t.j, 1, 1, 0) > 0);
	assert_int_equal(tfs_journal_flush(t.j), 0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 1, false), 0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 9, false), -ENOENT);
	/* Not a wait: even a blocking caller gets EROFS at once. */
	int ret = tfs_journal_res_get(t.j, &res, 3, 0);

	assert_int_equal(ret, -TFS_ERR_insufficient_devices);
	assert_int_equal(tfs_err_class(ret), -EROFS);
	assert_int_equal(tfs_journal_cur_entry_error(t.j), TFS_JOURNAL_CUR_insufficient_devices);
	assert_int_equal(tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_insufficient_devices), 1);
	/* The journal did not fail: nothing lost, back when the member is. */
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 1, true), 0);
	assert_true(jt_commit(t.j, 1, 2, 0) > 0);
	assert_int_equal(tfs_journal_flush(t.j), 0);

	/* Degraded but enough: 2 wanted, 1 required, 1 writable. */
	jt_stop(&t);
	t.opts.metadata_replicas_required = 1;
	assert_int_equal(jt_start(&t), 0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, false), 0);
	s64 seq = jt_commit(t.j, 1, 3, 0);

	assert_true(seq > 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, seq), 0);
	jt_cleanup(&t);
}

static void test_halt_without_error(void **state)
{
	struct jt t;
	struct tfs_journal_res res;
	s64 s1, s2;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	s1 = jt_commit(t.j, 1, 1, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
	s2 = jt_commit(t.j, 2, 2, 0);
	assert_true(s2 > s1);
	tfs_journal_halt(t.j);
	/* err_seq is the seq current at the halt. */
	assert_int_equal(tfs_journal_err_seq(t.j), tfs_journal_cur_seq(t.j));
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	int ret = tfs_journal_res_get(t.j, &res, 3, 0);

	assert_int_equal(ret, -TFS_ERR_journal_halted);
	assert_int_equal(tfs_err_class(ret), -EROFS);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, s2), -TFS_ERR_journal_halted);
	}
	/* A second halt changes nothing. */
	tfs_journal_halt(t.j);
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)s2);
	assert_int_equal(tfs_journal_stop(t.j), -TFS_ERR_journal_halted);
	jt_cleanup(&t);
}

/* Halted while an older entry is still closed and unwritten: it never becomes durable. */
static void test_halt_cancels_unwritten(void **state)
{
	struct jt t;
	struct tfs_journal_res res;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	assert_int_equal(tfs_journal_res_get(t.j, &res, MAX_U64S(&t), 0), 0);
	s64 s2 = jt_commit(t.j, 1, 1, 0); /* closes res's entry, which it holds */

	assert_int_equal(s2, res.seq + 1);
	tfs_journal_halt(t.j);
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	tfs_journal_res_put(t.j, &res);
	/* seq 1 < err_seq, but it was never written: still an error. */
	assert_int_equal(tfs_journal_flush_seq(t.j, res.seq), -TFS_ERR_journal_halted);
	assert_int_equal(tfs_journal_seq_ondisk(t.j), 0);
	jt_cleanup(&t);
}

struct async_ctx {
	struct tfs_journal_flush_waiter w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls;
};

static void async_done(struct tfs_journal_flush_waiter *w)
{
	struct async_ctx *c = container_of(w, struct async_ctx, w);

	pthread_mutex_lock(&c->lock);
	c->calls++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void test_flush_async(void **state)
{
	struct jt t;
	struct async_ctx c = { .w.fn = async_done };
	s64 seq;

	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 1000; /* only the flush request closes it */
	assert_int_equal(jt_start(&t), 0);
	seq = jt_commit(t.j, 1, 1, 0);
	if (!tfs_journal_flush_seq_async(t.j, seq, &c.w)) {
		pthread_mutex_lock(&c.lock);
		while (!c.calls)
			pthread_cond_wait(&c.cond, &c.lock);
		pthread_mutex_unlock(&c.lock);
	}
	assert_int_equal(c.w.ret, 0);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) >= (u64)seq);
	/* Already durable: answered at once, callback not called. */
	int calls = c.calls;

	assert_true(tfs_journal_flush_seq_async(t.j, seq, &c.w));
	assert_int_equal(c.w.ret, 0);
	assert_int_equal(c.calls, calls);
	jt_cleanup(&t);
}

/*
 * flush_seq_start() writes the flush entry without anyone waiting (no
 * timer: write_delay_ms is long), and the flush_seq() it announced joins
 * it as the one waiter it counted: group commit then expects one committer,
 * not two (which would hold the next flush entry open for a second).
 */
static void test_flush_seq_start(void **state)
{
	struct jt t;
	s64 seq;

	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 10000; /* only a flush request closes it */
	assert_int_equal(jt_start_fault(&t), 0);
	seq = jt_commit(t.j, 1, 1, 0);
	assert_true(seq > 0);
	tfs_journal_flush_seq_start(t.j, (u64)seq);
	for (int i = 0; i < 20000 && tfs_journal_flushed_seq_ondisk(t.j) < (u64)seq; i++)
		usleep(100);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) >= (u64)seq);
	assert_int_equal(tfs_journal_flush_seq(t.j, (u64)seq), 0);

	/* Its write held in the device: the flush_seq() joins it in flight. */
	assert_int_equal(jt_add_rule(t.bdev[0], "write always delay=100"), 0);
	seq = jt_commit(t.j, 2, 2, 0);
	tfs_journal_flush_seq_start(t.j, (u64)seq);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)seq);
	assert_int_equal(tfs_journal_flush_seq(t.j, (u64)seq), 0);
	pthread_mutex_lock(&t.j->lock);
	assert_int_equal(t.j->group_expect, 1);
	pthread_mutex_unlock(&t.j->lock);

	/* Durable already, or seq 0: nothing happens. */
	tfs_journal_flush_seq_start(t.j, (u64)seq);
	tfs_journal_flush_seq_start(t.j, 0);
	jt_cleanup(&t);
}

/* Commits nobody waits on go out NO_FLUSH; the flushed one does not. */
static void test_noflush_entries(void **state)
{
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	unsigned noflush = 0, flush = 0;
	s64 seq = 0;

	jt_images(&t, 1, 8, 64 << 10);
	t.opts.flush_delay_ms = 100000;
	t.opts.write_delay_ms = 1;
	assert_int_equal(jt_start(&t), 0);
	for (unsigned i = 0; i < 5; i++) {
		seq = jt_commit(t.j, i, i, 0);
		while (tfs_journal_seq_ondisk(t.j) < (u64)seq) /* closed on age */
			usleep(500);
	}
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)seq);
	seq = jt_commit(t.j, 9, 9, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, seq), 0);
	u64 cur = tfs_journal_cur_seq(t.j);

	tfs_journal_halt(t.j); /* so stop writes nothing more */
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(tfs_journal_read(t.devs, 1, &t.opts, &r, &err), 0);
	for (unsigned i = 0; i < r->nr; i++) {
		bool nf = le32_to_cpu(r->entries[i].j->flags) & TFS_JSET_no_flush;

		noflush += nf;
		flush += !nf;
	}
	assert_int_equal(r->nr, cur);
	assert_true(noflush >= 5);
	assert_int_equal(flush, 1);
	assert_int_equal(r->newest_seq, cur);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

static void test_to_text(void **state)
{
	struct jt t;
	struct printbuf out = PRINTBUF;
	const char *s;

	jt_images(&t, 2, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit(t.j, 1, 1, 0)), 0);
	tfs_journal_to_text(&out, t.j);
	s = printbuf_str(&out);
	assert_false(out.allocation_failure);
	for (unsigned i = 0; i < TFS_JOURNAL_CUR_NR; i++)
		assert_non_null(strstr(s, tfs_journal_cur_err_names[i]));
	assert_non_null(strstr(s, "seq_ondisk:"));
	assert_non_null(strstr(s, "flushed_seq_ondisk:"));
	assert_non_null(strstr(s, "last_seq_ondisk:"));
	assert_non_null(strstr(s, "err_seq:"));
	assert_non_null(strstr(s, "reservations:"));
	assert_non_null(strstr(s, "dev 0 ("));
	assert_non_null(strstr(s, "dev 1 ("));
	assert_non_null(strstr(s, "buckets free"));
	/* Where the next entry goes: a ring index, and the bucket it names. */
	const char *at = strstr(s, "), ring index ");
	unsigned idx;
	unsigned long long bucket;

	assert_non_null(at);
	assert_int_equal(sscanf(at, "), ring index %u (bucket %llu) offset", &idx, &bucket), 2);
	printbuf_exit(&out);
	jt_cleanup(&t);
}

static void test_bad_options(void **state)
{
	struct jt t;
	struct tfs_journal *j;
	struct printbuf err = PRINTBUF;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_open_bdevs(&t), 0);
	t.opts.max_entry_size = 128 << 10; /* bigger than a bucket */
	assert_int_equal(tfs_journal_init(&j, t.devs, 1, &t.opts, &err), -TFS_ERR_invalid_option);
	assert_null(j);
	assert_non_null(strstr(printbuf_str(&err), "bucket size 65536"));
	printbuf_reset(&err);
	jt_opts(&t.opts);
	t.opts.metadata_replicas_required = 2;
	assert_int_equal(tfs_journal_init(&j, t.devs, 1, &t.opts, &err), -TFS_ERR_invalid_option);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/* --- regressions (reviewer's reproducers) --- */

/* Kills the test program instead of letting a regression hang the suite. */
static void hang_guard(unsigned seconds)
{
	signal(SIGALRM, SIG_DFL);
	alarm(seconds);
}

struct lastseq_wait {
	struct tfs_journal_flush_waiter w;
	int done;
};

static void lastseq_done(struct tfs_journal_flush_waiter *w)
{
	struct lastseq_wait *c = container_of(w, struct lastseq_wait, w);

	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
}

/*
 * An entry's last_seq is the journal's last_seq when the entry closes: a pin
 * moved out of an older seq into a newer, unwritten entry after that must not
 * let the closed entry tell replay to skip the older seq.
 */
static void test_last_seq_at_close(void **state)
{
	struct jt t;
	struct tfs_journal_res r2, r3;
	struct lastseq_wait c = { .w.fn = lastseq_done };
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	struct jt_model m = { 0 };

	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 100000; /* close on demand only */
	t.opts.flush_delay_ms = 1000000;
	assert_int_equal(jt_start_fault(&t), 0);
	/* X=1 in seq 1, pinned by its object, flushed: acknowledged. */
	s64 s1 = jt_commit_pinned(&t, 1, 1, 0);

	assert_int_equal(s1, 1);
	assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
	/* A reservation in seq 2 is held while a flush of seq 2 closes it. */
	assert_int_equal(tfs_journal_res_get(t.j, &r2, 3, 0), 0);
	assert_int_equal(r2.seq, 2);
	__le64 *k = tfs_journal_res_add_entry(t.j, &r2, TFS_JSET_ENTRY_btree_keys, 1, 0, 2);

	k[0] = cpu_to_le64(2 | (9ULL << 32));
	k[1] = cpu_to_le64(9);
	assert_false(tfs_journal_flush_seq_async(t.j, 2, &c.w));
	/* X=2 goes into seq 3; the object's pin moves 1 -> 3. */
	assert_int_equal(tfs_journal_res_get(t.j, &r3, 3, 0), 0);
	assert_int_equal(r3.seq, 3);
	tfs_journal_pin_update(t.j, 3, &t.log_pin, NULL);
	k = tfs_journal_res_add_entry(t.j, &r3, TFS_JSET_ENTRY_btree_keys, 1, 0, 2);
	k[0] = cpu_to_le64(2 | (1ULL << 32));
	k[1] = cpu_to_le64(2);
	tfs_journal_res_put(t.j, &r3);
	tfs_journal_res_put(t.j, &r2); /* seq 2 is written, as a flush entry */
	while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE))
		usleep(100);
	assert_int_equal(c.w.ret, 0);
	/* Power cut: seq 3 never reached the disk. */
	assert_int_equal(tfs_faultdev_powercut(t.bdev[0], TFS_POWERCUT_none, 0), 0);
	tfs_journal_halt(t.j);
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);

	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	assert_int_equal(r->newest_seq, 2);
	assert_int_equal(r->last_seq, 1);
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	assert_int_equal(m.val[1], 1); /* acknowledged by flush_seq(1) */
	assert_int_equal(m.val[9], 9);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/*
 * Threads committing, moving pins and flushing while writes fail, are
 * delayed and reordered, then a power cut: every acknowledged value must come
 * back from replay or from the written-back "btree".  Seeded and bounded.
 */
#define ST_NT 4
#define ST_IDS_PER 4
#define ST_NIDS (ST_NT * ST_IDS_PER)

struct st_obj {
	pthread_mutex_t lock;
	struct tfs_journal_entry_pin pin;
	u64 value;
};

static struct {
	struct st_obj objs[ST_NIDS];
	u64 btree[ST_NIDS]; /* written back by the pin flush: durable by assumption */
	u64 acked[ST_NIDS], committed[ST_NIDS], acked_seq_max;
	pthread_mutex_t lock;
	struct tfs_journal *j;
	int stop, failed;
	unsigned seed;
} st;

static int st_obj_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct st_obj *o = container_of(pin, struct st_obj, pin);

	if (pthread_mutex_trylock(&o->lock))
		return -EAGAIN;
	st.btree[o - st.objs] = o->value;
	tfs_journal_pin_drop(j, &o->pin);
	pthread_mutex_unlock(&o->lock);
	return 0;
}

static void st_fail(const char *what, int ret)
{
	fprintf(stderr, "stress seed %u: %s: %s\n", st.seed, what, tfs_err_str(ret));
	__atomic_store_n(&st.failed, 1, __ATOMIC_RELAXED);
}

static void *st_worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, rnd = st.seed * 131 + t * 7919 + 1;

	while (!__atomic_load_n(&st.stop, __ATOMIC_RELAXED)) {
		rnd = rnd * 1103515245 + 12345;
		unsigned id = t * ST_IDS_PER + (rnd >> 16) % ST_IDS_PER;
		struct st_obj *o = &st.objs[id];
		struct tfs_journal_res res;
		unsigned flags = (rnd >> 8) % 5 == 0 ? TFS_JOURNAL_RES_NONBLOCK : 0;
		unsigned pad = (rnd >> 4) % 64;

		pthread_mutex_lock(&o->lock);
		int r = tfs_journal_res_get(st.j, &res, tfs_jset_entry_u64s(2 + pad), flags);

		if (r) {
			pthread_mutex_unlock(&o->lock);
			if (tfs_err_class(r) == -EAGAIN) {
				if (!(flags & TFS_JOURNAL_RES_NONBLOCK))
					st_fail("a blocking reservation returned a wait", r);
				usleep(100);
				continue;
			}
			if (tfs_err_class(r) != -EROFS)
				st_fail("reservation", r);
			break;
		}
		u64 v = ++o->value;

		tfs_journal_pin_update(st.j, res.seq, &o->pin, st_obj_flush);
		__le64 *k = tfs_journal_res_add_entry(st.j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0,
						      2 + pad);

		k[0] = cpu_to_le64((2 + pad) | ((u64)id << 32));
		k[1] = cpu_to_le64(v);
		for (unsigned i = 0; i < pad; i++)
			k[2 + i] = cpu_to_le64(i);
		tfs_journal_res_put(st.j, &res);
		st.committed[id] = v;
		pthread_mutex_unlock(&o->lock);
		if ((rnd >> 12) % 4 == 0) {
			r = tfs_journal_flush_seq(st.j, res.seq);
			if (!r) {
				pthread_mutex_lock(&st.lock);
				if (v > st.acked[id])
					st.acked[id] = v;
				if (res.seq > st.acked_seq_max)
					st.acked_seq_max = res.seq;
				pthread_mutex_unlock(&st.lock);
			} else if (tfs_err_class(r) != -EIO && tfs_err_class(r) != -EROFS) {
				st_fail("flush_seq", r);
			}
		}
	}
	return NULL;
}

static void stress_one(unsigned seed, unsigned ms)
{
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	struct jt_model m = { 0 };
	pthread_t th[ST_NT];
	char rule[64];

	memset(&st, 0, sizeof(st));
	pthread_mutex_init(&st.lock, NULL);
	st.seed = seed;
	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 1;
	t.opts.pin_fifo_size = 64;
	t.opts.write_delay_ms = 1;
	t.opts.flush_delay_ms = 20;
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_wrap_faultdevs(&t), 0);
	for (unsigned i = 0; i < 2; i++)
		tfs_faultdev_set_seed(t.bdev[i], seed * 2 + i);
	snprintf(rule, sizeof(rule), "write tag=journal prob=0.00%u fail=EIO", seed % 3 ? 2 : 1);
	assert_int_equal(jt_add_rule(t.bdev[0], rule), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "write tag=journal prob=0.05 delay=2"), 0);
	assert_int_equal(jt_add_rule(t.bdev[1], "write tag=journal prob=0.05 reorder=2"), 0);
	assert_int_equal(jt_add_rule(t.bdev[1], "write tag=journal prob=0.03 delay=3"), 0);
	if (seed % 4 == 0)
		assert_int_equal(jt_add_rule(t.bdev[1], "any tag=journal prob=0.002 fail=EIO"), 0);
	assert_int_equal(jt_init_start(&t, NULL), 0);
	st.j = t.j;
	for (unsigned i = 0; i < ST_NIDS; i++) {
		pthread_mutex_init(&st.objs[i].lock, NULL);
		tfs_journal_pin_init(&st.objs[i].pin);
	}
	for (unsigned i = 0; i < ST_NT; i++)
		assert_int_equal(pthread_create(&th[i], NULL, st_worker, (void *)(uintptr_t)i), 0);
	usleep(ms * 1000);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(tfs_faultdev_powercut(t.bdev[i], TFS_POWERCUT_random, 0), 0);
	usleep(20 * 1000);
	__atomic_store_n(&st.stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ST_NT; i++)
		pthread_join(th[i], NULL);
	assert_false(st.failed);
	/* Acknowledged stays acknowledged. */
	assert_int_equal(tfs_journal_flush_seq(t.j, st.acked_seq_max), 0);
	tfs_journal_halt(t.j);
	for (unsigned i = 0; i < ST_NIDS; i++)
		tfs_journal_pin_drop(t.j, &st.objs[i].pin);
	jt_stop(&t);

	assert_int_equal(jt_open_bdevs(&t), 0);
	int ret = jt_read(&t, &r, &err);

	if (ret)
		printf("stress seed %u: read: %s: %s\n", seed, tfs_err_str(ret),
		       printbuf_str(&err));
	assert_true(!ret || (ret == -TFS_ERR_journal_empty && !st.acked_seq_max));
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	assert_false(m.out_of_order);
	assert_true(r->newest_seq >= st.acked_seq_max);
	unsigned bad = 0;

	for (unsigned i = 0; i < ST_NIDS; i++) {
		u64 v = max_t(u64, m.val[i], st.btree[i]);

		if (v < st.acked[i] || v > st.committed[i]) {
			printf("stress seed %u: id %u: recovered %llu (replay %llu, btree %llu), "
			       "acked %llu, committed %llu\n",
			       seed, i, (unsigned long long)v, (unsigned long long)m.val[i],
			       (unsigned long long)st.btree[i], (unsigned long long)st.acked[i],
			       (unsigned long long)st.committed[i]);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

static void test_stress_powercut(void **state)
{
	hang_guard(120);
	for (unsigned seed = 1; seed <= 20; seed++)
		stress_one(seed, 150);
	alarm(0);
}

/*
 * Restart after a crash that lost a NO_FLUSH bucket in front of a kept one:
 * the buckets holding replay's seqs stay dirty, whatever hole is in between.
 */
static void test_start_keeps_buckets_past_a_hole(void **state)
{
	enum {
		PAD = 1800
	}; /* one entry per 16 KiB bucket */
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	char z[16 << 10] = { 0 };
	int fd;

	jt_images(&t, 1, 8, 16 << 10);
	t.opts.max_entry_size = 16 << 10;
	t.opts.write_delay_ms = 1;
	t.opts.flush_delay_ms = 1000000;
	assert_int_equal(jt_start(&t), 0);
	/* seqs 1..3 flushed (buckets 0..2); 1 stays pinned: replay needs 1..3 */
	for (u64 k = 1; k <= 3; k++) {
		s64 s = k == 1 ? jt_commit_pinned(&t, k, k, PAD) : jt_commit_big(t.j, k, k, PAD, 0);

		assert_int_equal(s, k);
		assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	}
	/* 4, 5 NO_FLUSH (buckets 3, 4) */
	for (u64 k = 4; k <= 5; k++) {
		s64 s = jt_commit_big(t.j, k, k, PAD, 0);

		assert_int_equal(s, k);
		assert_true(jt_wait_ondisk(t.j, s));
	}
	tfs_journal_halt(t.j); /* no clean flush at exit: like a crash */
	jt_stop(&t);
	/* What a power cut may keep: seq 4's write lost, seq 5's kept. */
	fd = open(t.path[0], O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, z, sizeof(z), (off_t)t.buckets[3] * sizeof(z)), sizeof(z));
	close(fd);

	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	assert_int_equal(r->newest_seq, 3);
	assert_int_equal(r->last_seq, 1);
	assert_int_equal(jt_init_start(&t, r), 0);
	tfs_journal_read_free(r);
	/*
	 * Replay's seqs 1..3 are still needed (no replay_done): commits must
	 * meet journal_full rather than overwrite buckets 0..2.
	 */
	unsigned ok = 0;

	for (u64 k = 10; k < 20; k++) {
		s64 s = jt_commit_big(t.j, k, k, PAD, TFS_JOURNAL_RES_NONBLOCK);

		if (s < 0) {
			assert_int_equal(s, -TFS_ERR_journal_full);
			break;
		}
		ok++;
		assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	}
	assert_true(ok < 10);
	jt_stop(&t);

	printbuf_exit(&err);
	jt_reread_expect_ids(&t, 3);
	jt_cleanup(&t);
}

/*
 * flush_seq of a seq written NO_FLUSH once fewer members are writable than
 * required: an EROFS-class error, not a wait that never ends (stop too).
 */
static void test_flush_insufficient_devices(void **state)
{
	struct jt t;

	hang_guard(60);
	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 1;
	t.opts.flush_delay_ms = 1000000;
	assert_int_equal(jt_start(&t), 0);
	s64 s = jt_commit(t.j, 1, 1, 0);

	assert_true(jt_wait_ondisk(t.j, s)); /* written NO_FLUSH, not durable */
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)s);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, false), 0);
	int ret = tfs_journal_flush_seq(t.j, s);

	assert_int_equal(ret, -TFS_ERR_insufficient_devices);
	assert_int_equal(tfs_err_class(ret), -EROFS);
	/* Nothing failed: back when the member is. */
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, true), 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);

	/* Stop's own flush gives up the same way. */
	s = jt_commit(t.j, 2, 2, 0);
	assert_true(jt_wait_ondisk(t.j, s));
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)s);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, false), 0);
	assert_int_equal(tfs_journal_stop(t.j), -TFS_ERR_insufficient_devices);
	alarm(0);
	jt_cleanup(&t);
}
/*
 * A member going read-only closes the open entry: the next reservation
 * cannot slip into an entry opened with more members; it gets the EROFS
 * class, and what was flushed before reads back.
 */
static void test_set_unwritable_closes_entry(void **state)
{
	struct jt t;
	struct tfs_journal_res res;

	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 2;
	t.opts.write_delay_ms = 100000;
	assert_int_equal(jt_start(&t), 0);
	assert_int_equal(jt_commit_pinned(&t, 1, 1, 0), 1);
	assert_int_equal(tfs_journal_flush(t.j), 0);
	/* An open (empty) entry, opened with both members. */
	s64 s = jt_commit(t.j, 2, 2, 0);

	assert_true(s > 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3, 0), 0);
	tfs_journal_res_put(t.j, &res);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 1, false), 0);
	int ret = tfs_journal_res_get(t.j, &res, 3, 0);

	if (!ret)
		tfs_journal_res_put(t.j, &res);
	assert_int_equal(tfs_err_class(ret), -EROFS);
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);

	jt_reread_expect_ids(&t, 2);
	jt_cleanup(&t);
}

/*
 * Issue 8 case 3.  A member set read-only (no I/O error) while an open
 * entry holds a commit: the entry goes to the members writable when it is
 * written.  One replica over three members: it is written to another
 * member.  Two replicas, both required, over three: the two left.  Over two:
 * it waits, flush_seq answers insufficient_devices (EROFS class, no journal
 * error), and the member coming back writes it.  Before the fix the entry
 * kept the members it opened with and the journal halted for good ("reached
 * 0 of 1 required replicas (no writable device)", or an EIO-class halt).
 */
static void test_set_unwritable_repicks_members(void **state)
{
	static const struct {
		unsigned nr, replicas, required;
	} cfg[] = { { 3, 1, 1 }, { 3, 2, 2 }, { 2, 2, 2 } };

	hang_guard(60);
	for (unsigned c = 0; c < ARRAY_SIZE(cfg); c++) {
		struct jt t;

		jt_images(&t, cfg[c].nr, 8, 64 << 10);
		t.opts.metadata_replicas = cfg[c].replicas;
		t.opts.metadata_replicas_required = cfg[c].required;
		t.opts.write_delay_ms = 100000; /* stays open until asked */
		t.opts.flush_delay_ms = 1000000;
		assert_int_equal(jt_start(&t), 0);
		s64 s1 = jt_commit_pinned(&t, 1, 1, 0);

		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		s64 s2 = jt_commit(t.j, 2, 2, 0); /* open, holding a commit */

		assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, false), 0);
		int ret = tfs_journal_flush_seq(t.j, s2);

		if (cfg[c].nr - 1 >= cfg[c].required) {
			assert_int_equal(ret, 0);
		} else {
			assert_int_equal(ret, -TFS_ERR_insufficient_devices);
			assert_int_equal(tfs_err_class(ret), -EROFS);
			assert_int_equal(tfs_journal_error(t.j), 0);
			assert_int_equal(tfs_journal_err_seq(t.j), 0);
			/* Still so, asked again; then the member comes back. */
			assert_int_equal(tfs_journal_flush_seq(t.j, s2),
					 -TFS_ERR_insufficient_devices);
			assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, true), 0);
			assert_int_equal(tfs_journal_flush_seq(t.j, s2), 0);
		}
		assert_int_equal(tfs_journal_err_seq(t.j), 0);
		assert_true(tfs_journal_flushed_seq_ondisk(t.j) >= (u64)s2);
		s64 s3 = jt_commit(t.j, 3, 3, 0);

		assert_true(s3 > 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, s3), 0);
		tfs_journal_pin_drop(t.j, &t.log_pin);
		assert_int_equal(tfs_journal_stop(t.j), 0);
		jt_stop(&t);
		jt_reread_expect_ids(&t, 3);
		jt_cleanup(&t);
	}
	alarm(0);
}

static u64 jt_locked_u64(struct tfs_journal *j, const u64 *field)
{
	u64 v;

	pthread_mutex_lock(&j->lock);
	v = *field;
	pthread_mutex_unlock(&j->lock);
	return v;
}

struct cpu_waiter {
	struct tfs_journal *j;
	u64 cpu_ns;
	int ret;
	pthread_t thread;
};

static u64 thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void *cpu_waiter_fn(void *arg)
{
	struct cpu_waiter *w = arg;
	struct tfs_journal_res res;
	u64 t0 = thread_cpu_ns();

	w->ret = tfs_journal_res_get(w->j, &res, 3, 0);
	if (!w->ret)
		tfs_journal_res_put(w->j, &res);
	w->cpu_ns = thread_cpu_ns() - t0;
	return NULL;
}

static void *cpu_flush_pins_fn(void *arg)
{
	struct cpu_waiter *w = arg;
	u64 t0 = thread_cpu_ns();

	w->ret = tfs_journal_flush_pins(w->j, 1);
	w->cpu_ns = thread_cpu_ns() - t0;
	return NULL;
}

/*
 * Issue 8 case 5.  While journal_full persists (seq 1 pinned by a pin only
 * its owner drops), waiting reservations and a flush_pins() caller sleep:
 * over a stretch of waiting, the waiters go to sleep a bounded number of
 * times and reclaim runs a bounded number of times (its periodic runs), and
 * the waiting threads use next to no CPU.  Before the fix every reclaim run
 * woke every waiter, which kicked reclaim again: millions of runs.
 * Bounds are counts, never elapsed times.
 */
static void test_waiters_sleep(void **state)
{
	enum {
		NR_WAITERS = 4
	};
	struct jt t;
	struct tfs_journal_entry_pin pin;
	struct tfs_journal_res res;
	struct cpu_waiter w[NR_WAITERS + 1];

	hang_guard(60);
	jt_images(&t, 1, 4, 16 << 10);
	t.opts.max_entry_size = 16 << 10;
	assert_int_equal(jt_start(&t), 0);
	tfs_journal_pin_init(&pin);
	/* Fill the journal behind a pin on seq 1 until a reservation meets journal_full. */
	for (unsigned i = 0;; i++) {
		assert_true(i < 64);
		int ret = tfs_journal_res_get(t.j, &res, MAX_U64S(&t), TFS_JOURNAL_RES_NONBLOCK);

		if (ret) {
			assert_int_equal(ret, -TFS_ERR_journal_full);
			break;
		}
		if (!i)
			tfs_journal_pin_add(t.j, res.seq, &pin, NULL);
		tfs_journal_res_put(t.j, &res);
		assert_int_equal(tfs_journal_flush_seq(t.j, res.seq), 0);
	}
	u64 full0 = tfs_journal_cur_err_count(t.j, TFS_JOURNAL_CUR_journal_full);

	for (unsigned i = 0; i < NR_WAITERS; i++) {
		w[i] = (struct cpu_waiter){ .j = t.j, .ret = 1 };
		assert_int_equal(pthread_create(&w[i].thread, NULL, cpu_waiter_fn, &w[i]), 0);
	}
	w[NR_WAITERS] = (struct cpu_waiter){ .j = t.j, .ret = 1 };
	assert_int_equal(
		pthread_create(&w[NR_WAITERS].thread, NULL, cpu_flush_pins_fn, &w[NR_WAITERS]), 0);
	wait_count(t.j, TFS_JOURNAL_CUR_journal_full, full0 + NR_WAITERS);
	usleep(20000);
	u64 waits0 = jt_locked_u64(t.j, &t.j->nr_res_waits);
	u64 runs0 = jt_locked_u64(t.j, &t.j->reclaim_runs);

	usleep(300000); /* a stretch of waiting: nothing changes */
	u64 waits = jt_locked_u64(t.j, &t.j->nr_res_waits) - waits0;
	u64 runs = jt_locked_u64(t.j, &t.j->reclaim_runs) - runs0;

	printf("while waiting: %llu more sleeps of %u waiters, %llu reclaim runs\n",
	       (unsigned long long)waits, NR_WAITERS, (unsigned long long)runs);
	for (unsigned i = 0; i <= NR_WAITERS; i++)
		assert_int_equal(w[i].ret, 1); /* still waiting */
	assert_true(waits <= 2 * NR_WAITERS);
	assert_true(runs <= 40); /* periodic runs only (every 50 ms) */

	tfs_journal_pin_drop(t.j, &pin);
	u64 cpu = 0;

	for (unsigned i = 0; i <= NR_WAITERS; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].ret, 0);
		cpu += w[i].cpu_ns;
	}
	printf("waiting threads' CPU time: %llu us\n", (unsigned long long)cpu / 1000);
	/* Asleep: a spinning waiter burns a good part of the 300 ms. */
	assert_true(cpu < 100 * 1000000ULL);
	assert_int_equal(tfs_journal_flush(t.j), 0);
	jt_cleanup(&t);
	alarm(0);
}

/* --- the write thread's wake-ups --- */

static struct {
	pthread_mutex_t lock;
	unsigned calls;
	u64 sleeps[2]; /* the write thread's sleeps at its first and second submission */
	s64 seq;       /* the entry opened during the first */
} wsh = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* On the write thread, unlocked, after it submitted an entry. */
static void open_during_submit(struct tfs_journal *j)
{
	unsigned call;
	u64 sleeps;

	pthread_mutex_lock(&j->lock);
	sleeps = j->writer_sleeps;
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_lock(&wsh.lock);
	call = wsh.calls++;
	if (call < 2)
		wsh.sleeps[call] = sleeps;
	pthread_mutex_unlock(&wsh.lock);
	if (call == 0) {
		s64 s = jt_commit(j, 1, 1, TFS_JOURNAL_RES_NONBLOCK);

		pthread_mutex_lock(&wsh.lock);
		wsh.seq = s;
		pthread_mutex_unlock(&wsh.lock);
	}
}

/*
 * An entry that opens while the write thread submits (the lock dropped) is
 * written by its next pass: with write_delay_ms 0 it is due at once, so the
 * thread must not go to sleep between the two submissions.  Before the fix
 * the thread slept out the timeout it had computed before the entry opened
 * (up to 50 ms): the open saw it awake and did not wake it, and a wake-up
 * while it is awake was lost anyway.
 */
static void test_writer_sees_entry_opened_during_submit(void **state)
{
	struct jt t;
	s64 s0, s1;
	unsigned calls = 0;

	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 0;
	t.opts.flush_delay_ms = 100000;
	assert_int_equal(jt_start(&t), 0);
	wsh.calls = 0;
	wsh.seq = 0;
	pthread_mutex_lock(&t.j->lock);
	t.j->write_submit_hook = open_during_submit;
	pthread_mutex_unlock(&t.j->lock);
	s0 = jt_commit(t.j, 0, 0, 0);
	assert_true(s0 > 0);
	for (unsigned i = 0; i < 100000 && calls < 2; i++) {
		usleep(100);
		pthread_mutex_lock(&wsh.lock);
		calls = wsh.calls;
		pthread_mutex_unlock(&wsh.lock);
	}
	assert_true(calls >= 2);
	pthread_mutex_lock(&wsh.lock);
	s1 = wsh.seq;
	pthread_mutex_unlock(&wsh.lock);
	assert_int_equal(s1, s0 + 1);
	assert_true(jt_wait_ondisk(t.j, (u64)s1));
	printf("write thread sleeps: %llu at seq %lld's submission, %llu at seq %lld's\n",
	       (unsigned long long)wsh.sleeps[0], (long long)s0, (unsigned long long)wsh.sleeps[1],
	       (long long)s1);
	assert_int_equal(wsh.sleeps[1], wsh.sleeps[0]);
	pthread_mutex_lock(&t.j->lock);
	t.j->write_submit_hook = NULL;
	pthread_mutex_unlock(&t.j->lock);
	jt_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_flush_replay),
		cmocka_unit_test(test_reason_blocked_in_flight),
		cmocka_unit_test(test_reason_blocked_explicit),
		cmocka_unit_test(test_reason_journal_full),
		cmocka_unit_test(test_reason_pin_full),
		cmocka_unit_test(test_reason_insufficient_devices),
		cmocka_unit_test(test_halt_without_error),
		cmocka_unit_test(test_halt_cancels_unwritten),
		cmocka_unit_test(test_flush_async),
		cmocka_unit_test(test_flush_seq_start),
		cmocka_unit_test(test_noflush_entries),
		cmocka_unit_test(test_to_text),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_last_seq_at_close),
		cmocka_unit_test(test_stress_powercut),
		cmocka_unit_test(test_start_keeps_buckets_past_a_hole),
		cmocka_unit_test(test_flush_insufficient_devices),
		cmocka_unit_test(test_set_unwritable_closes_entry),
		cmocka_unit_test(test_set_unwritable_repicks_members),
		cmocka_unit_test(test_waiters_sleep),
		cmocka_unit_test(test_writer_sees_entry_opened_during_submit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
