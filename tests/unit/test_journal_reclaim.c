// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for journal/journal_reclaim.c: the pin API (add keeps the older
 * seq, update moves to a newer one, drop), flush_pins and its errors, and
 * reclaim keeping a long workload (single and multi-threaded) running in a
 * small journal, with the written-back state plus replay equal to the live
 * state at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "journal_test.h"

/* An object with a journal pin, like a dirty btree node or key-cache entry. */
struct obj {
	struct tfs_journal_entry_pin pin;
	u64 mem, disk; /* live value; value "written back" by the flush callback */
	int flush_ret; /* what the flush callback returns */
	unsigned flushes;
};

#define NR_OBJS 16
static struct obj objs[NR_OBJS];
static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;

static int obj_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct obj *o = container_of(pin, struct obj, pin);
	int ret;

	pthread_mutex_lock(&objs_lock);
	ret = o->flush_ret;
	if (!ret) {
		o->disk = o->mem;
		o->flushes++;
		tfs_journal_pin_drop(j, pin);
	}
	pthread_mutex_unlock(&objs_lock);
	return ret;
}

static void objs_reset(void)
{
	memset(objs, 0, sizeof(objs));
	for (unsigned i = 0; i < NR_OBJS; i++)
		tfs_journal_pin_init(&objs[i].pin);
}

/* A commit that dirties object id: journal the key, then pin its seq. */
static s64 obj_commit(struct tfs_journal *j, unsigned id, u64 value, unsigned pad)
{
	struct tfs_journal_res res;
	int ret = tfs_journal_res_get(j, &res, tfs_jset_entry_u64s(2 + pad), 0);

	if (ret)
		return ret;
	__le64 *k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 2 + pad);

	k[0] = cpu_to_le64((2 + pad) | ((u64)id << 32));
	k[1] = cpu_to_le64(value);
	pthread_mutex_lock(&objs_lock);
	objs[id].mem = value;
	tfs_journal_pin_update(j, res.seq, &objs[id].pin, obj_flush);
	pthread_mutex_unlock(&objs_lock);
	tfs_journal_res_put(j, &res);
	return (s64)res.seq;
}

static void test_pin_api(void **state)
{
	struct jt t;
	struct tfs_journal_entry_pin a;
	s64 s1, s2, s3;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	tfs_journal_pin_init(&a);
	assert_false(tfs_journal_pin_active(&a));
	s1 = jt_commit(t.j, 1, 1, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
	s2 = jt_commit(t.j, 2, 2, 0);
	tfs_journal_pin_add(t.j, s2, &a, NULL);
	assert_int_equal(tfs_journal_flush_seq(t.j, s2), 0);
	s3 = jt_commit(t.j, 3, 3, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s3), 0);
	assert_true(s3 > s2 && s2 > s1);

	/* seq 1 is written and unpinned: last_seq moved past it, not past s2. */
	assert_int_equal(tfs_journal_last_seq(t.j), s2);
	tfs_journal_pin_add(t.j, s3, &a, NULL); /* keeps the older seq */
	assert_int_equal(a.seq, s2);
	tfs_journal_pin_update(t.j, s1 + 0, &a, NULL); /* never moves back */
	assert_int_equal(a.seq, s2);
	tfs_journal_pin_update(t.j, s3, &a, NULL);
	assert_int_equal(a.seq, s3);
	assert_int_equal(tfs_journal_last_seq(t.j), s3);
	tfs_journal_pin_drop(t.j, &a);
	assert_false(tfs_journal_pin_active(&a));
	assert_int_equal(tfs_journal_last_seq(t.j), s3 + 1);
	tfs_journal_pin_drop(t.j, &a); /* unused: nothing */
	jt_cleanup(&t);
}

static void test_flush_pins(void **state)
{
	struct jt t;
	s64 s = 0;

	objs_reset();
	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start(&t), 0);
	for (unsigned i = 0; i < 20; i++)
		s = obj_commit(t.j, i % 4, 100 + i, 0);
	assert_int_equal(tfs_journal_flush_pins(t.j, s), 0);
	assert_true(tfs_journal_last_seq(t.j) > (u64)s);
	assert_true(tfs_journal_last_seq_ondisk(t.j) > (u64)s);
	for (unsigned i = 0; i < 4; i++) {
		assert_false(tfs_journal_pin_active(&objs[i].pin));
		assert_int_equal(objs[i].disk, 100 + 16 + i);
	}

	/* A failing write-back is returned, and its pin stays. */
	s = obj_commit(t.j, 5, 7, 0);
	objs[5].flush_ret = -EIO;
	assert_int_equal(tfs_journal_flush_pins(t.j, s), -EIO);
	assert_true(tfs_journal_pin_active(&objs[5].pin));
	assert_int_equal(objs[5].pin.seq, s);
	assert_true(tfs_journal_last_seq(t.j) <= (u64)s);
	objs[5].flush_ret = 0;
	assert_int_equal(tfs_journal_flush_pins(t.j, s), 0);
	assert_int_equal(objs[5].disk, 7);
	jt_cleanup(&t);
}

struct worker {
	struct tfs_journal *j;
	unsigned first_obj, nr_objs, commits;
	int ret;
	pthread_t thread;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; i < w->commits; i++) {
		/* Object k is dirtied every 2^k commits: old pins only reclaim can flush. */
		unsigned id = w->first_obj + min_t(unsigned, __builtin_ctz(i + 1), w->nr_objs - 1);
		s64 s = obj_commit(w->j, id, ((u64)id << 32) | i, 40 + i % 200);

		if (s < 0) {
			w->ret = (int)s;
			return NULL;
		}
		if (i % 97 == 0 && (w->ret = tfs_journal_flush_seq(w->j, s)))
			return NULL;
	}
	return NULL;
}

struct final_state {
	u64 val[NR_OBJS];
};

static int final_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *k)
{
	struct final_state *f = ctx;

	f->val[(le64_to_cpu(k[0]) >> 32) % NR_OBJS] = le64_to_cpu(k[1]);
	return 0;
}

/*
 * A small journal (6 x 32 KiB buckets on each member) and thousands of
 * commits: only reclaim (flushing pins, advancing last_seq, reusing buckets)
 * keeps it going.  Afterwards, the written-back values plus replay from
 * last_seq must equal the live values.
 */
static void long_workload(unsigned nr_devs, unsigned nr_threads, unsigned commits)
{
	struct jt t;
	struct worker w[4];
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	struct final_state f;
	const struct tfs_journal_replay_ops ops = { .key = final_key };
	u64 journal_bytes = 6 * (32 << 10);

	objs_reset();
	jt_images(&t, nr_devs, 6, 32 << 10);
	t.opts.metadata_replicas = nr_devs;
	t.opts.pin_fifo_size = 64;
	assert_int_equal(jt_start(&t), 0);
	for (unsigned i = 0; i < nr_threads; i++) {
		w[i] = (struct worker){
			.j = t.j,
			.first_obj = i * (NR_OBJS / nr_threads),
			.nr_objs = NR_OBJS / nr_threads,
			.commits = commits,
		};
		assert_int_equal(pthread_create(&w[i].thread, NULL, worker_fn, &w[i]), 0);
	}
	for (unsigned i = 0; i < nr_threads; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].ret, 0);
	}
	assert_int_equal(tfs_journal_flush(t.j), 0);
	assert_int_equal(tfs_journal_stop(t.j), 0);

	struct tfs_journal *j = t.j;
	struct printbuf out = PRINTBUF;

	tfs_journal_to_text(&out, j);
	printf("%u dev(s), %u thread(s), %u commits each:\n%s", nr_devs, nr_threads, commits,
	       printbuf_str(&out));
	printbuf_exit(&out);
	assert_int_equal(j->err_seq, 0);
	assert_true(j->pins_flushed > 0);
	assert_true(j->last_seq_ondisk > 1);
	/* The ring went round several times. */
	assert_true(j->devs[0].bytes_written > 3 * journal_bytes);
	jt_stop(&t);

	/* Written back + replayed == live. */
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	for (unsigned i = 0; i < NR_OBJS; i++)
		f.val[i] = objs[i].disk;
	assert_int_equal(tfs_journal_replay(r, &ops, &f), 0);
	for (unsigned i = 0; i < NR_OBJS; i++)
		assert_int_equal(f.val[i], objs[i].mem);
	/* Nothing older than last_seq was needed, and it was reclaimed. */
	assert_true(r->last_seq > 1);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

static void test_long_workload_one_thread(void **state)
{
	long_workload(1, 1, 3000);
}

static void test_long_workload_threads_two_devs(void **state)
{
	long_workload(2, 4, 1500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pin_api),
		cmocka_unit_test(test_flush_pins),
		cmocka_unit_test(test_long_workload_one_thread),
		cmocka_unit_test(test_long_workload_threads_two_devs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
