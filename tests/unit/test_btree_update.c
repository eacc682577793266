// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/btree_update.c: transactions from several threads at once.
 *
 * Writers commit transactions touching shared keys (all threads, two
 * btrees at once) and their own keys, with deletes, while readers look up
 * and scan; the node cache is small and the journal short, so evictions,
 * reads back, write-backs for memory and reclaim's checkpoints all run
 * during the commits.  Checked: every key read is one some commit wrote
 * (never torn, never a mix of transactions: a transaction writes the same
 * stamp to both btrees and a reader sees both or neither), each thread's
 * own keys end with their last values, the trees validate, and after a stop
 * and reopen (replay) the trees are exactly what they were in memory.
 * Meant to run under ThreadSanitizer too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "fs_test.h"

#define NWRITERS 4
#define NREADERS 2
#define NSHARED 24
#define NOWN 300

static struct tfs_fs *g_fs;
static unsigned g_iters;
static bool g_stop;
static u64 own_last[NWRITERS][NOWN]; /* stamp of the last write; 0: deleted */

static u64 stamp(unsigned tid, unsigned i)
{
	return (u64)(tid + 1) << 32 | (i + 1);
}

/* A value: the stamp, then bytes derived from it and the position. */
static void make_key(struct tfs_bkey_buf *buf, struct tfs_bpos pos, u64 st)
{
	size_t len = 16 + (st * 37 + pos.offset) % 900;
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, pos, len);

	memcpy(v, &st, 8);
	for (size_t i = 8; i < len; i++)
		v[i] = (u8)(st + pos.offset + i);
}

/* The key is one make_key() made: returns its stamp (fails the test if not). */
static u64 key_stamp(const struct tfs_bkey *k)
{
	struct tfs_bkey_buf want;
	u64 st;

	assert_true(tfs_bkey_val_bytes(k) >= 8);
	memcpy(&st, tfs_bkey_val(k), 8);
	make_key(&want, tfs_bkey_pos(k), st);
	assert_int_equal(tfs_bkey_bytes(k), tfs_bkey_bytes(&want.k));
	assert_memory_equal(k, &want.k, tfs_bkey_bytes(k));
	return st;
}

static void *writer(void *arg)
{
	unsigned tid = (unsigned)(uintptr_t)arg;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	u64 x = tid * 7919 + 1, seq = 0;

	tfs_trans_init(&trans, g_fs);
	for (unsigned i = 0; i < g_iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		u64 st = stamp(tid, i);
		unsigned sk = (unsigned)(x % NSHARED), ok = (unsigned)((x >> 8) % NOWN);
		struct tfs_bpos spos = TFS_POS(1, sk), opos = TFS_POS(100 + tid, ok);

		/* A shared key in two btrees, same stamp: readers see both or neither. */
		if (x % 7 == 0) {
			assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_inodes, spos), 0);
			assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_dirents, spos), 0);
		} else {
			make_key(&buf, spos, st);
			assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_inodes, &buf.k), 0);
			assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k), 0);
		}
		if (x % 5 == 0) {
			assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_xattrs, opos), 0);
			own_last[tid][ok] = 0;
		} else {
			make_key(&buf, opos, st);
			assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
			own_last[tid][ok] = st;
		}
		int ret = tfs_trans_commit(&trans, 0, &seq);

		if (ret)
			fail_msg("writer %u: commit: %s", tid, tfs_err_str(ret));
		if (i % 64 == 63)
			assert_int_equal(tfs_fs_flush_seq(g_fs, seq), 0);
	}
	tfs_trans_exit(&trans);
	return NULL;
}

static void *reader(void *arg)
{
	unsigned n = 0;

	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;
		int ret;

		/* Every key is one some commit wrote. */
		tfs_btree_iter_init(&iter, g_fs, n % 2 ? TFS_BTREE_xattrs : TFS_BTREE_inodes,
				    TFS_POS_MIN, TFS_POS_MAX);
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k))
			key_stamp(k);
		assert_int_equal(ret, 0);
		tfs_btree_iter_exit(&iter);
		/* Shared keys: whatever a lookup of each btree finds is well formed. */
		for (unsigned sk = 0; sk < NSHARED; sk++) {
			struct tfs_bkey_buf a;

			ret = tfs_btree_lookup(g_fs, TFS_BTREE_dirents, TFS_POS(1, sk), &a);
			assert_true(ret == 0 || ret == -ENOENT);
			if (!ret)
				key_stamp(&a.k);
		}
		n++;
	}
	return NULL;
}

/* Every key of the three btrees, in order: (btree, pos, stamp). */
struct snap {
	u64 *v;
	size_t nr, size;
};

static void snapshot(struct tfs_fs *fs, struct snap *s)
{
	static const enum tfs_btree_id ids[] = { TFS_BTREE_inodes, TFS_BTREE_dirents,
						 TFS_BTREE_xattrs };

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < ARRAY_SIZE(ids); i++) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;
		int ret;

		tfs_btree_iter_init(&iter, fs, ids[i], TFS_POS_MIN, TFS_POS_MAX);
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			if (s->nr + 4 > s->size) {
				s->size = s->size ? s->size * 2 : 1024;
				s->v = realloc(s->v, s->size * sizeof(u64));
				assert_non_null(s->v);
			}
			s->v[s->nr++] = ids[i];
			s->v[s->nr++] = tfs_bkey_pos(k).inode;
			s->v[s->nr++] = tfs_bkey_pos(k).offset;
			s->v[s->nr++] = key_stamp(k);
		}
		assert_int_equal(ret, 0);
		tfs_btree_iter_exit(&iter);
		assert_int_equal(tfs_btree_verify(fs, ids[i]), 0);
	}
}

static void test_concurrent_commits(void **state)
{
	struct ft t;
	struct ft_geometry g = {
		.nr_devs = 1,
		.size = 32 << 20,
		.bucket_size = 16 << 10,
		.journal_size = 1 << 20, /* short: reclaim checkpoints all the time */
		.shm = true,
	};
	pthread_t w[NWRITERS], r[NREADERS];
	struct snap s1, s2;

	g_iters = getenv("TFS_LONG") ? 20000 : 1500;
	memset(own_last, 0, sizeof(own_last));
	assert_int_equal(ft_mkfs(&t, &g), 0);
	t.opts.cache_budget = 384 << 10; /* evictions and write-backs for memory */
	assert_int_equal(ft_open(&t), 0);
	g_fs = t.fs;
	g_stop = false;
	for (unsigned i = 0; i < NREADERS; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader, NULL), 0);
	for (unsigned i = 0; i < NWRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < NWRITERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&g_stop, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < NREADERS; i++)
		pthread_join(r[i], NULL);

	/* Each thread's own keys: their last values. */
	for (unsigned tid = 0; tid < NWRITERS; tid++)
		for (unsigned k = 0; k < NOWN; k++) {
			struct tfs_bkey_buf buf;
			int ret = tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(100 + tid, k),
						   &buf);

			if (own_last[tid][k]) {
				assert_int_equal(ret, 0);
				assert_int_equal(key_stamp(&buf.k), own_last[tid][k]);
			} else {
				assert_int_equal(ret, -ENOENT);
			}
		}
	/* Shared keys: the same stamp in both btrees (one transaction wrote both). */
	for (unsigned sk = 0; sk < NSHARED; sk++) {
		struct tfs_bkey_buf a, b;
		int ra = tfs_btree_lookup(t.fs, TFS_BTREE_inodes, TFS_POS(1, sk), &a);
		int rb = tfs_btree_lookup(t.fs, TFS_BTREE_dirents, TFS_POS(1, sk), &b);

		assert_int_equal(ra, rb);
		if (!ra)
			assert_int_equal(key_stamp(&a.k), key_stamp(&b.k));
	}
	snapshot(t.fs, &s1);
	u64 ckpts = ft_btree_counter_sum(t.fs, checkpoints);
	u64 evicted = t.fs->cache.nr_scan_freed;

	printf("%llu checkpoints, %llu nodes evicted, %llu write-backs for memory\n",
	       (unsigned long long)ckpts, (unsigned long long)evicted,
	       (unsigned long long)t.fs->cache.nr_writeback_for_memory);
	assert_true(ckpts > 0);
	assert_true(evicted > 0);
	/* A crash now (no write-back): replay must give exactly the same trees. */
	assert_int_equal(tfs_journal_flush(t.fs->j), 0);
	/* Halted, the journal takes nothing more and write-back writes nothing. */
	tfs_journal_halt(t.fs->j);
	assert_true(ft_stop(&t) < 0);
	assert_int_equal(ft_open(&t), 0);
	snapshot(t.fs, &s2);
	assert_int_equal(s1.nr, s2.nr);
	assert_memory_equal(s1.v, s2.v, s1.nr * sizeof(u64));
	free(s2.v);
	/* And after a clean stop too. */
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	snapshot(t.fs, &s2);
	assert_int_equal(s1.nr, s2.nr);
	assert_memory_equal(s1.v, s2.v, s1.nr * sizeof(u64));
	free(s1.v);
	free(s2.v);
	ft_cleanup(&t);
}

/* --- the tree locks (lib/six.h): restarts, and readers beside a commit --- */

struct one_commit {
	struct tfs_fs *fs;
	u64 stamp;
	int ret;
	int done; /* atomic */
};

/* One transaction: (1, 1) in dirents and in xattrs, with the same stamp. */
static void *commit_two_trees(void *arg)
{
	struct one_commit *c = arg;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;

	tfs_trans_init(&trans, c->fs);
	make_key(&buf, TFS_POS(1, 1), c->stamp);
	c->ret = tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k);
	if (!c->ret)
		c->ret = tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k);
	if (!c->ret)
		c->ret = tfs_trans_commit(&trans, 0, NULL);
	tfs_trans_exit(&trans);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void open_small(struct ft *t)
{
	struct ft_geometry g = {
		.nr_devs = 1, .size = 32 << 20, .bucket_size = 16 << 10, .shm = true
	};

	assert_int_equal(ft_mkfs(t, &g), 0);
	assert_int_equal(ft_open(t), 0);
}

/*
 * A commit over dirents and xattrs while another thread holds xattrs'
 * intent lock: the commit takes dirents, fails its trylock on xattrs,
 * drops dirents (a restart counted on xattrs) and waits for xattrs with
 * nothing held; released, it applies both keys at once.
 */
static void test_restart_on_busy_intent(void **state)
{
	struct ft t;
	struct tfs_btree *d, *x;
	struct one_commit c = { .stamp = stamp(7, 1) };
	struct tfs_bkey_buf buf;
	pthread_t th;
	u64 restarts0, waits0;

	open_small(&t);
	c.fs = t.fs;
	d = &t.fs->btrees[TFS_BTREE_dirents];
	x = &t.fs->btrees[TFS_BTREE_xattrs];
	restarts0 = x->c.restarts[TFS_BTREE_RESTART_lock_intent];

	tfs_six_lock_intent(&x->lock);
	waits0 = __atomic_load_n(&x->lock.waits[TFS_SIX_LOCK_intent], __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&th, NULL, commit_two_trees, &c), 0);
	/* Until the commit sleeps on xattrs' intent lock. */
	while (__atomic_load_n(&x->lock.waits[TFS_SIX_LOCK_intent], __ATOMIC_RELAXED) == waits0)
		sched_yield();
	assert_false(__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));
	/* It restarted, and holds nothing while it waits: dirents is free. */
	assert_int_equal(
		__atomic_load_n(&x->c.restarts[TFS_BTREE_RESTART_lock_intent], __ATOMIC_RELAXED),
		restarts0 + 1);
	assert_true(tfs_six_trylock_intent(&d->lock));
	tfs_six_unlock_intent(&d->lock);
	/* Nothing applied: a reader (read shares with our intent) sees neither key. */
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_dirents, TFS_POS(1, 1), &buf), -ENOENT);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 1), &buf), -ENOENT);

	tfs_six_unlock_intent(&x->lock);
	pthread_join(th, NULL);
	assert_int_equal(c.ret, 0);
	assert_true(x->c.restarts[TFS_BTREE_RESTART_lock_intent] >= restarts0 + 1);
	/* Both keys, one transaction's. */
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_dirents, TFS_POS(1, 1), &buf), 0);
	assert_int_equal(key_stamp(&buf.k), c.stamp);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 1), &buf), 0);
	assert_int_equal(key_stamp(&buf.k), c.stamp);

	struct printbuf out = PRINTBUF;

	tfs_btree_to_text(&out, t.fs, TFS_BTREE_xattrs);
	assert_non_null(strstr(printbuf_str(&out), "lock_intent 1"));
	printbuf_exit(&out);
	ft_cleanup(&t);
}

struct one_lookup {
	struct tfs_fs *fs;
	int ret;
	struct tfs_bkey_buf k;
	int done; /* atomic */
};

static void *lookup_fn(void *arg)
{
	struct one_lookup *l = arg;

	l->ret = tfs_btree_lookup(l->fs, TFS_BTREE_dirents, TFS_POS(1, 1), &l->k);
	__atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static u64 lock_waits(struct tfs_btree *b)
{
	u64 sum = 0;

	for (unsigned m = 0; m < TFS_SIX_LOCK_NR; m++)
		sum += __atomic_load_n(&b->lock.waits[m], __ATOMIC_RELAXED);
	return sum;
}

/* Starts a lookup in a thread; returns once it finished or sleeps on the tree's lock. */
static void start_lookup(struct one_lookup *l, struct tfs_btree *b, pthread_t *th)
{
	u64 waits0 = lock_waits(b);

	assert_int_equal(pthread_create(th, NULL, lookup_fn, l), 0);
	while (!__atomic_load_n(&l->done, __ATOMIC_ACQUIRE) && lock_waits(b) == waits0)
		sched_yield();
}

/*
 * What a commit's steps hold, held by hand: intent (plan, fit, journal
 * reservation) lets a lookup through; write (the apply) keeps it waiting
 * until released.
 */
static void test_reader_beside_intent(void **state)
{
	struct ft t;
	struct one_commit c = { .stamp = stamp(9, 1) };
	struct one_lookup l1 = { 0 }, l2 = { 0 };
	struct tfs_btree *d;
	pthread_t th;

	open_small(&t);
	c.fs = l1.fs = l2.fs = t.fs;
	d = &t.fs->btrees[TFS_BTREE_dirents];
	commit_two_trees(&c);
	assert_int_equal(c.ret, 0);

	tfs_six_lock_intent(&d->lock);
	start_lookup(&l1, d, &th);
	/* Finished while intent is held, without waiting. */
	assert_true(__atomic_load_n(&l1.done, __ATOMIC_ACQUIRE));
	pthread_join(th, NULL);
	assert_int_equal(l1.ret, 0);
	assert_int_equal(key_stamp(&l1.k.k), c.stamp);

	tfs_six_lock_write(&d->lock);
	start_lookup(&l2, d, &th);
	/* Sleeping: write keeps readers out. */
	assert_false(__atomic_load_n(&l2.done, __ATOMIC_ACQUIRE));
	tfs_six_unlock_write(&d->lock);
	pthread_join(th, NULL);
	assert_int_equal(l2.ret, 0);
	assert_int_equal(key_stamp(&l2.k.k), c.stamp);
	tfs_six_unlock_intent(&d->lock);
	ft_cleanup(&t);
}

/*
 * Updates queued with tfs_trans_update_old_data() go to their own journal
 * sub-entries (flagged old_data), but in queue order with the rest: a later
 * update of the same position wins, in memory and at replay.
 */
static void test_old_data_keeps_queue_order(void **state)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf, a;
	struct ft t;
	u64 seq;

	(void)state;
	open_small(&t);
	tfs_trans_init(&trans, t.fs);
	make_key(&buf, TFS_POS(1, 1), 1);
	assert_int_equal(tfs_trans_update_old_data(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	make_key(&buf, TFS_POS(1, 1), 2);
	assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	make_key(&buf, TFS_POS(1, 1), 3);
	assert_int_equal(tfs_trans_update_old_data(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	make_key(&buf, TFS_POS(1, 2), 4);
	assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	make_key(&buf, TFS_POS(1, 3), 5);
	assert_int_equal(tfs_trans_update_old_data(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_xattrs, TFS_POS(1, 3)), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 1), &a), 0);
	assert_int_equal(key_stamp(&a.k), 3);
	/* A crash (no write-back): replay applies the sub-entries in order. */
	assert_int_equal(tfs_fs_flush_seq(t.fs, seq), 0);
	tfs_journal_halt(t.fs->j);
	assert_true(ft_stop(&t) < 0);
	assert_int_equal(ft_open(&t), 0);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 1), &a), 0);
	assert_int_equal(key_stamp(&a.k), 3);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 2), &a), 0);
	assert_int_equal(key_stamp(&a.k), 4);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, TFS_POS(1, 3), &a), -ENOENT);
	ft_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_commits),
		cmocka_unit_test(test_restart_on_busy_intent),
		cmocka_unit_test(test_reader_beside_intent),
		cmocka_unit_test(test_old_data_keeps_queue_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
