// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/btree_key_cache.c, over a real journal and a model btree
 * (an array of keys under a rwlock, committed the way fs/btree_update.c
 * commits: prep under the write lock, journal every key, apply each to the
 * cache or the leaf).  What they check:
 *  - second chance: an entry accessed since the last scan survives it (its
 *    bit cleared) and is evicted by the next; clean entries go oldest first;
 *  - grace period: a freed entry is neither freed nor reused while a reader
 *    that started before its removal is still in its read-side section,
 *    and the scan stops at the first such entry (older ones are freed);
 *  - dirty entries survive every scan, pin their journal seq, and become
 *    clean (and evictable) only when reclaim flushed them into the btree;
 *  - a flush that raced an update is retried, so replaying the journal ends
 *    with the newest key;
 *  - memory stays within the budget (+25%) for a working set 10x the budget;
 *  - several threads of lookups, updates, scans and reclaim (TSan);
 *  - and under the btree API of a real filesystem: lookups fill it, updates
 *    of cached inodes keys stay out of the leaves until reclaim, iterators
 *    see the cached keys, deletes remove them, a clean stop writes them
 *    back and a crash replays them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "fs/btree_internal.h"
#include "fs/btree_key_cache.h"
#include "fs_test.h"
#include "journal_test.h"
#include "lib/fault_point.h"
#include "lib/faultdev.h"
#include "lib/rcu.h"
#include "lib/shrinker.h"

#define VAL_WORDS 8
#define MAX_KEYS 20000

/* --- a model btree --- */

struct mkey {
	bool present;
	__le64 w[TFS_BKEY_U64s + VAL_WORDS];
};

struct model {
	struct jt jt;
	struct tfs_journal *j;
	struct tfs_shrinkers *shrinkers;
	struct tfs_btree_key_cache *kc;
	pthread_rwlock_t lock; /* the "btree lock" */
	struct mkey *keys;     /* by inode number */
	unsigned nr;
	/* Test hook: run before a flush commits (once). */
	void (*before_flush)(struct model *m, const struct tfs_bkey *k);
	u64 leaf_applies, flush_calls;
};

/* A key at (ino, 0) with words value words (1..VAL_WORDS), the first = val. */
static void mk_key_n(struct tfs_bkey_buf *b, u64 ino, u64 val, unsigned words)
{
	memset(b, 0, sizeof(struct tfs_bkey) + words * 8);
	b->k.u64s = cpu_to_le16(TFS_BKEY_U64s + words);
	b->k.type = TFS_BKEY_inode;
	tfs_bkey_set_pos(&b->k, TFS_POS(ino, 0));
	for (unsigned i = 0; i < words; i++)
		b->k._data[i] = cpu_to_le64(val ^ ((u64)i << 40));
}

static void mk_key(struct tfs_bkey_buf *b, u64 ino, u64 val)
{
	mk_key_n(b, ino, val, VAL_WORDS);
}

static u64 key_val(const struct tfs_bkey *k)
{
	return le64_to_cpu(k->_data[0]);
}

/* Applies k to the leaf (the model's array); the write lock is held. */
static void leaf_apply(struct model *m, const struct tfs_bkey *k)
{
	struct mkey *mk = &m->keys[tfs_bkey_pos(k).inode];

	if (k->type == TFS_BKEY_deleted) {
		mk->present = false;
	} else {
		mk->present = true;
		memcpy(mk->w, k, tfs_bkey_bytes(k));
	}
	m->leaf_applies++;
}

/* A commit of nr keys (distinct positions), as fs/btree_update.c does it. */
static int model_commit(struct model *m, const struct tfs_bkey *const *keys, unsigned nr,
			unsigned flags, u64 *seq)
{
	struct tfs_trans_update ups[16];
	struct tfs_key_cache_commit c = { 0 };
	struct tfs_journal_res res;
	unsigned u64s = 0;
	int ret;

	assert_true(nr <= ARRAY_SIZE(ups));
	for (unsigned i = 0; i < nr; i++) {
		ups[i] = (struct tfs_trans_update){ .id = TFS_BTREE_inodes,
						    .k = (struct tfs_bkey *)keys[i] };
		u64s += tfs_bkey_u64s(keys[i]);
	}
	/* The reservation first here (the engine waits with no lock held, then retries). */
	ret = tfs_journal_res_get(m->j, &res, tfs_jset_entry_u64s(u64s),
				  flags & TFS_TRANS_RESERVED ? TFS_JOURNAL_RES_RESERVED : 0);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&m->lock);
	ret = tfs_btree_key_cache_commit_prep(m->kc, &c, ups, nr, flags);
	if (ret) {
		pthread_rwlock_unlock(&m->lock);
		tfs_journal_res_put(m->j, &res); /* unfilled: zeros, empty to replay */
		tfs_btree_key_cache_commit_done(m->kc, &c);
		return ret;
	}
	__le64 *dst = tfs_journal_res_add_entry(m->j, &res, TFS_JSET_ENTRY_btree_keys,
						TFS_BTREE_inodes, 0, u64s);

	assert_non_null(dst);
	for (unsigned i = 0; i < nr; i++) {
		memcpy(dst, keys[i], tfs_bkey_bytes(keys[i]));
		dst += tfs_bkey_u64s(keys[i]);
	}
	for (unsigned i = 0; i < nr; i++)
		if (!tfs_btree_key_cache_commit_apply(m->kc, &c, TFS_BTREE_inodes, keys[i],
						      res.seq))
			leaf_apply(m, keys[i]);
	pthread_rwlock_unlock(&m->lock);
	tfs_journal_res_put(m->j, &res);
	tfs_btree_key_cache_commit_done(m->kc, &c);
	if (seq)
		*seq = res.seq;
	return 0;
}

static int model_update(struct model *m, u64 ino, u64 val, u64 *seq)
{
	struct tfs_bkey_buf b;
	const struct tfs_bkey *k = &b.k;

	mk_key(&b, ino, val);
	return model_commit(m, &k, 1, 0, seq);
}

static int model_delete(struct model *m, u64 ino)
{
	struct tfs_bkey_buf b;
	const struct tfs_bkey *k = &b.k;

	memset(&b, 0, sizeof(struct tfs_bkey));
	b.k.u64s = cpu_to_le16(TFS_BKEY_U64s);
	b.k.type = TFS_BKEY_deleted;
	tfs_bkey_set_pos(&b.k, TFS_POS(ino, 0));
	return model_commit(m, &k, 1, 0, NULL);
}

/* tfs_btree_lookup(): the cache first, else the leaf (filling the cache under the lock). */
static int model_lookup(struct model *m, u64 ino, struct tfs_bkey_buf *out)
{
	int ret = 0;

	if (tfs_btree_key_cache_lookup(m->kc, TFS_BTREE_inodes, TFS_POS(ino, 0), out))
		return 0;
	pthread_rwlock_rdlock(&m->lock);
	if (m->keys[ino].present) {
		const struct tfs_bkey *k = (const struct tfs_bkey *)m->keys[ino].w;

		tfs_bkey_copy(out, k);
		tfs_btree_key_cache_fill(m->kc, TFS_BTREE_inodes, k);
	} else {
		ret = -ENOENT;
	}
	pthread_rwlock_unlock(&m->lock);
	return ret;
}

static int model_flush(void *ctx, enum tfs_btree_id id, const struct tfs_bkey *k)
{
	struct model *m = ctx;

	assert_int_equal(id, TFS_BTREE_inodes);
	__atomic_add_fetch(&m->flush_calls, 1, __ATOMIC_RELAXED);
	if (m->before_flush) {
		void (*fn)(struct model *, const struct tfs_bkey *) = m->before_flush;

		m->before_flush = NULL;
		fn(m, k);
	}
	return model_commit(m, &k, 1, TFS_TRANS_RESERVED | TFS_TRANS_KEY_CACHE_FLUSH, NULL);
}

/* nr keys in the leaf (value = inode number), a journal, and a cache over them. */
static void model_init(struct model *m, unsigned nr, size_t budget)
{
	struct tfs_btree_key_cache_ops ops = { .flush = model_flush, .ctx = m };

	memset(m, 0, sizeof(*m));
	jt_images(&m->jt, 1, 64, 64 << 10);
	assert_int_equal(jt_start(&m->jt), 0);
	m->j = m->jt.j;
	pthread_rwlock_init(&m->lock, NULL);
	m->nr = nr;
	m->keys = calloc(nr, sizeof(*m->keys));
	assert_non_null(m->keys);
	for (unsigned i = 0; i < nr; i++) {
		struct tfs_bkey_buf b;

		mk_key(&b, i, i);
		leaf_apply(m, &b.k);
	}
	if (budget)
		assert_int_equal(tfs_shrinkers_init(&m->shrinkers, budget, false), 0);
	assert_int_equal(
		tfs_btree_key_cache_init(&m->kc, 1U << TFS_BTREE_inodes, m->j, m->shrinkers, &ops),
		0);
}

static void model_exit(struct model *m)
{
	assert_int_equal(tfs_btree_key_cache_flush_all(m->kc), 0);
	tfs_btree_key_cache_exit(m->kc);
	tfs_shrinkers_exit(m->shrinkers);
	jt_cleanup(&m->jt);
	pthread_rwlock_destroy(&m->lock);
	free(m->keys);
}

/* Keeps every seq from now on replayable (an uncached update opens the first entry). */
static void model_pin_log(struct model *m)
{
	u64 seq;

	assert_int_equal(model_update(m, m->nr - 1, m->nr - 1, &seq), 0);
	jt_pin_log(&m->jt, seq);
}

static u64 leaf_val(struct model *m, u64 ino)
{
	pthread_rwlock_rdlock(&m->lock);
	u64 v = m->keys[ino].present ? key_val((const struct tfs_bkey *)m->keys[ino].w) : ~0ULL;

	pthread_rwlock_unlock(&m->lock);
	return v;
}

static struct tfs_btree_key_cache_stats stats(struct model *m)
{
	struct tfs_btree_key_cache_stats st;

	tfs_btree_key_cache_stats(m->kc, &st);
	return st;
}

static void lookup_expect(struct model *m, u64 ino, u64 val)
{
	struct tfs_bkey_buf b;

	assert_int_equal(model_lookup(m, ino, &b), 0);
	assert_int_equal(key_val(&b.k), val);
}

/* --- basics --- */

static void test_lookup_fill_hit(void **state)
{
	struct model m;
	struct tfs_bkey_buf b;

	model_init(&m, 100, 0);
	lookup_expect(&m, 5, 5);
	assert_int_equal(stats(&m).fills, 1);
	assert_int_equal(stats(&m).hits, 0);
	lookup_expect(&m, 5, 5);
	assert_int_equal(stats(&m).hits, 1);
	assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(5, 0)), 0);
	/* Not cached btrees and absent keys: no entry. */
	assert_false(tfs_btree_key_cache_lookup(m.kc, TFS_BTREE_dirents, TFS_POS(5, 0), &b));
	m.keys[7].present = false;
	assert_int_equal(model_lookup(&m, 7, &b), -ENOENT);
	assert_int_equal(stats(&m).nr_keys, 1);
	model_exit(&m);
}

/* --- second chance --- */

static void test_second_chance(void **state)
{
	struct model m;
	struct tfs_bkey_buf b;

	model_init(&m, 100, 0);
	for (u64 i = 0; i < 100; i++)
		lookup_expect(&m, i, i); /* fills: not accessed yet */
	for (u64 i = 0; i < 100; i += 10)
		lookup_expect(&m, i, i); /* hits: accessed */

	/* First pass: every unaccessed entry goes, the accessed ones get a second chance. */
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 100), 90);
	for (u64 i = 0; i < 100; i++)
		assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(i, 0)),
				 i % 10 ? -ENOENT : 0);
	assert_int_equal(stats(&m).second_chances, 10);

	/*
	 * The 90 evicted entries wait on the freed list for a grace period that
	 * passes in the background, and a scan looks at freed entries first: so
	 * whether they count in the next scan depends on timing.  Let it pass
	 * and release them, so the next pass sees only the clean list.
	 */
	tfs_btree_key_cache_wait_gp(m.kc);
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 90), 90);
	assert_int_equal(stats(&m).nr_freed, 0);
	assert_int_equal(stats(&m).nr_keys, 10);

	/* Their bits were cleared: the next pass evicts them. */
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 10), 10);
	assert_int_equal(stats(&m).nr_keys, 0);
	assert_false(tfs_btree_key_cache_lookup(m.kc, TFS_BTREE_inodes, TFS_POS(0, 0), &b));
	model_exit(&m);
}

static void test_clean_oldest_first(void **state)
{
	struct model m;

	model_init(&m, 100, 0);
	for (u64 i = 0; i < 100; i++)
		lookup_expect(&m, i, i);
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 10), 10);
	for (u64 i = 0; i < 100; i++)
		assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(i, 0)),
				 i < 10 ? -ENOENT : 0);
	model_exit(&m);
}

/* --- grace periods --- */

struct reader {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool inside, release;
};

static void *reader_thread(void *arg)
{
	struct reader *r = arg;

	tfs_rcu_thread_register();
	tfs_rcu_read_lock();
	pthread_mutex_lock(&r->lock);
	r->inside = true;
	pthread_cond_broadcast(&r->cond);
	while (!r->release)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	tfs_rcu_read_unlock();
	return NULL;
}

/* A thread inside a read-side section until reader_stop(). */
static void reader_start(struct reader *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	assert_int_equal(pthread_create(&r->thread, NULL, reader_thread, r), 0);
	pthread_mutex_lock(&r->lock);
	while (!r->inside)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

static void reader_stop(struct reader *r)
{
	pthread_mutex_lock(&r->lock);
	r->release = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
}

static void test_grace_period(void **state)
{
	struct model m;
	struct reader r;
	struct tfs_btree_key_cache_stats st;
	size_t bytes;

	model_init(&m, 100, 0);
	for (u64 i = 0; i < 50; i++)
		lookup_expect(&m, i, i);
	/* Batch 1 (the 20 oldest): evicted, and its grace period passes. */
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 20), 20);
	tfs_btree_key_cache_wait_gp(m.kc);

	/*
	 * Batch 2: removed (deleted: a scan would free batch 1 first) while a
	 * reader that started before is still reading.
	 */
	reader_start(&r);
	for (u64 i = 20; i < 50; i++)
		assert_int_equal(model_delete(&m, i), 0);
	assert_int_equal(stats(&m).nr_freed, 50);
	bytes = tfs_btree_key_cache_bytes(m.kc);

	/* The scan frees batch 1 and stops at the first entry of batch 2. */
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 1000), 20);
	st = stats(&m);
	assert_int_equal(st.nr_freed, 30);
	assert_int_equal(st.freed, 20);
	assert_true(tfs_btree_key_cache_bytes(m.kc) < bytes);
	bytes = tfs_btree_key_cache_bytes(m.kc);
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 1000), 0);
	assert_int_equal(stats(&m).nr_freed, 30);
	assert_int_equal(tfs_btree_key_cache_bytes(m.kc), bytes);

	/* A new entry cannot reuse one of batch 2 yet: it is new memory. */
	lookup_expect(&m, 60, 60);
	st = stats(&m);
	assert_int_equal(st.reused, 0);
	assert_int_equal(st.nr_freed, 30);

	/* The reader leaves: the grace period passes; allocation reuses, the scan frees. */
	reader_stop(&r);
	tfs_btree_key_cache_wait_gp(m.kc);
	lookup_expect(&m, 61, 61);
	st = stats(&m);
	assert_int_equal(st.reused, 1);
	assert_int_equal(st.nr_freed, 29);
	assert_int_equal(tfs_btree_key_cache_scan(m.kc, 29), 29);
	assert_int_equal(stats(&m).nr_freed, 0);
	model_exit(&m);
}

/* --- dirty entries --- */

static void test_dirty_survives_scans(void **state)
{
	struct model m;
	u64 seq = 0, s;

	model_init(&m, 100, 0);
	model_pin_log(&m); /* reclaim must not move on behind the test's back */
	for (u64 i = 0; i < 100; i++)
		lookup_expect(&m, i, i);
	for (u64 i = 0; i < 100; i += 2) {
		assert_int_equal(model_update(&m, i, 1000 + i, &s), 0);
		seq = seq ?: s;
	}
	assert_int_equal(stats(&m).nr_dirty, 50);
	/* The leaf was not touched: the cache took the updates. */
	assert_int_equal(leaf_val(&m, 0), 0);

	for (unsigned pass = 0; pass < 4; pass++)
		tfs_btree_key_cache_scan(m.kc, 1000);
	for (u64 i = 0; i < 100; i++)
		assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(i, 0)),
				 i % 2 ? -ENOENT : 1);
	for (u64 i = 0; i < 100; i += 2)
		lookup_expect(&m, i, 1000 + i);
	assert_int_equal(stats(&m).nr_clean, 0);

	/* Reclaim flushes them into the leaf: clean, then evictable. */
	tfs_journal_pin_drop(m.j, &m.jt.log_pin);
	assert_int_equal(tfs_journal_flush_pins(m.j, tfs_journal_cur_seq(m.j)), 0);
	assert_true(tfs_journal_last_seq(m.j) > seq);
	assert_int_equal(stats(&m).nr_dirty, 0);
	assert_int_equal(stats(&m).flushes, 50);
	for (u64 i = 0; i < 100; i += 2)
		assert_int_equal(leaf_val(&m, i), 1000 + i);
	tfs_btree_key_cache_scan(m.kc, 1000); /* accessed by the lookups: second chance */
	tfs_btree_key_cache_scan(m.kc, 1000);
	assert_int_equal(stats(&m).nr_keys, 0);
	for (u64 i = 0; i < 100; i += 2)
		lookup_expect(&m, i, 1000 + i);
	model_exit(&m);
}

/* An update of a cached key pins its seq until the key reaches the leaf. */
static void test_dirty_pins_seq(void **state)
{
	struct model m;
	u64 seq, s2;

	model_init(&m, 10, 0);
	lookup_expect(&m, 3, 3);
	assert_int_equal(model_update(&m, 3, 33, &seq), 0);
	/* Updates of an uncached key go to the leaf. */
	assert_int_equal(model_update(&m, 4, 44, &s2), 0);
	assert_int_equal(leaf_val(&m, 4), 44);
	assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(4, 0)), -ENOENT);

	/* Everything else is durable and unpinned: last_seq still stops at seq. */
	assert_int_equal(tfs_journal_flush(m.j), 0);
	tfs_journal_reclaim_kick(m.j);
	assert_true(tfs_journal_last_seq(m.j) <= seq);
	assert_int_equal(leaf_val(&m, 3), 3);

	/* A second update keeps the older seq pinned. */
	assert_int_equal(model_update(&m, 3, 333, NULL), 0);
	assert_true(tfs_journal_last_seq(m.j) <= seq);

	assert_int_equal(tfs_journal_flush_pins(m.j, seq), 0);
	assert_int_equal(leaf_val(&m, 3), 333);
	assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(3, 0)), 0);
	assert_true(tfs_journal_last_seq(m.j) > seq);
	model_exit(&m);
}

/*
 * One commit updating several cached keys of different sizes, in an order
 * where the first needs less room than the second (each update's memory is
 * allocated before the journal reservation and must be matched to it).
 */
static void test_commit_sizes(void **state)
{
	struct tfs_bkey_buf b[4];
	const struct tfs_bkey *k[4];
	struct tfs_bkey_buf out;
	struct model m;
	static const unsigned words[] = { 1, 8, 3, 8 };

	model_init(&m, 10, 0);
	for (u64 i = 0; i < 4; i++) {
		lookup_expect(&m, i, i);
		mk_key_n(&b[i], i, 100 + i, words[i]);
		k[i] = &b[i].k;
	}
	assert_int_equal(model_commit(&m, k, 4, 0, NULL), 0);
	for (u64 i = 0; i < 4; i++) {
		assert_int_equal(model_lookup(&m, i, &out), 0);
		assert_int_equal(tfs_bkey_u64s(&out.k), TFS_BKEY_U64s + words[i]);
		assert_int_equal(key_val(&out.k), 100 + i);
	}
	assert_int_equal(stats(&m).nr_dirty, 4);
	assert_int_equal(tfs_btree_key_cache_flush_all(m.kc), 0);
	for (u64 i = 0; i < 4; i++)
		assert_int_equal(leaf_val(&m, i), 100 + i);
	model_exit(&m);
}

static void test_delete_cached(void **state)
{
	struct model m;
	struct tfs_bkey_buf b;
	u64 seq;

	model_init(&m, 10, 0);
	lookup_expect(&m, 3, 3);
	assert_int_equal(model_update(&m, 3, 33, &seq), 0);
	assert_int_equal(model_delete(&m, 3), 0);
	assert_int_equal(tfs_btree_key_cache_state(m.kc, TFS_BTREE_inodes, TFS_POS(3, 0)), -ENOENT);
	assert_int_equal(model_lookup(&m, 3, &b), -ENOENT);
	assert_int_equal(stats(&m).deletes, 1);
	assert_int_equal(stats(&m).nr_dirty, 0);
	/* Its pin went with it: reclaim passes seq without a flush. */
	assert_int_equal(tfs_journal_flush_pins(m.j, seq), 0);
	assert_int_equal(m.flush_calls, 0);
	model_exit(&m);
}

/* --- a flush racing an update --- */

static void update_before_flush(struct model *m, const struct tfs_bkey *k)
{
	assert_int_equal(model_update(m, tfs_bkey_pos(k).inode, 77777, NULL), 0);
}

struct replay_ctx {
	u64 vals[16];
};

static int replay_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *key)
{
	struct replay_ctx *r = ctx;
	const struct tfs_bkey *k = (const struct tfs_bkey *)key;

	if (!tfs_bkey_u64s(k)) /* an unfilled reservation */
		return 0;
	if (btree_id == TFS_BTREE_inodes && tfs_bkey_pos(k).inode < 16)
		r->vals[tfs_bkey_pos(k).inode] = key_val(k);
	return 0;
}

static void test_flush_race(void **state)
{
	struct tfs_journal_replay_ops ops = { .key = replay_key };
	struct tfs_journal_read *rd;
	struct printbuf err = PRINTBUF;
	struct replay_ctx r = { 0 };
	struct model m;
	u64 seq;

	model_init(&m, 10, 0);
	model_pin_log(&m); /* replay everything */
	lookup_expect(&m, 3, 3);
	assert_int_equal(model_update(&m, 3, 33, &seq), 0);

	/* The flush copies 33; an update to 77777 commits before the flush does. */
	m.before_flush = update_before_flush;
	assert_int_equal(tfs_btree_key_cache_flush_all(m.kc), 0);
	assert_int_equal(leaf_val(&m, 3), 77777);
	lookup_expect(&m, 3, 77777);
	assert_int_equal(stats(&m).nr_dirty, 0);
	assert_true(stats(&m).flush_races >= 1);

	/* The journal never has 33 after 77777. */
	assert_int_equal(tfs_journal_flush(m.j), 0);
	tfs_btree_key_cache_exit(m.kc);
	m.kc = NULL;
	jt_stop(&m.jt);
	assert_int_equal(jt_open_bdevs(&m.jt), 0);
	assert_int_equal(tfs_journal_read(m.jt.devs, m.jt.nr_devs, &m.jt.opts, &rd, &err), 0);
	assert_int_equal(tfs_journal_replay(rd, &ops, &r), 0);
	assert_int_equal(r.vals[3], 77777);
	tfs_journal_read_free(rd);
	printbuf_exit(&err);
	tfs_shrinkers_exit(m.shrinkers);
	jt_cleanup(&m.jt);
	pthread_rwlock_destroy(&m.lock);
	free(m.keys);
}

/* --- memory --- */

static void test_working_set_10x_budget(void **state)
{
	const size_t budget = 256 << 10;
	struct model m;
	size_t max = 0, per_entry;
	unsigned nr;
	u64 x = 88172645463325252ULL;

	/* Find what an entry costs, then make the working set ten budgets. */
	model_init(&m, 1, 0);
	lookup_expect(&m, 0, 0);
	per_entry = tfs_btree_key_cache_bytes(m.kc);
	model_exit(&m);
	nr = (unsigned)(10 * budget / per_entry);
	assert_true(nr <= MAX_KEYS);

	model_init(&m, nr, budget);
	for (unsigned i = 0; i < 5 * nr; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		u64 ino = x % nr;

		lookup_expect(&m, ino, ino);
		max = max_t(size_t, max, tfs_btree_key_cache_bytes(m.kc));
	}
	/* The stated bound: budget + 25%, plus the one entry a fill adds after the check. */
	assert_true(max <= budget + budget / 4 + per_entry);
	assert_true(stats(&m).hits > 0);
	assert_true(stats(&m).evicted > 0);
	assert_true(stats(&m).freed > 0);
	model_exit(&m);
}

/* --- threads --- */

#define T_THREADS 4
#define T_KEYS 256

struct tctx {
	struct model *m;
	unsigned idx;
	u64 last[T_KEYS]; /* this thread's keys: idx * T_KEYS + i */
	unsigned iters;
	bool stop; /* for the scanner */
};

static void *worker(void *arg)
{
	struct tctx *t = arg;
	u64 x = 0x9e3779b97f4a7c15ULL * (t->idx + 1);

	for (unsigned n = 0; n < t->iters; n++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned i = (unsigned)(x % T_KEYS);
		u64 ino = (u64)t->idx * T_KEYS + i;
		struct tfs_bkey_buf b;

		switch (x >> 61) {
		case 0:
		case 1: /* update one of ours */
			t->last[i] = (u64)n << 8 | t->idx;
			assert_int_equal(model_update(t->m, ino, t->last[i], NULL), 0);
			break;
		case 2: /* someone else's key: any version of it */
			assert_int_equal(model_lookup(t->m, x % (T_THREADS * T_KEYS), &b), 0);
			break;
		default: /* ours: exactly the last version written */
			assert_int_equal(model_lookup(t->m, ino, &b), 0);
			assert_int_equal(key_val(&b.k), t->last[i]);
		}
	}
	return NULL;
}

static void *scanner(void *arg)
{
	struct tctx *t = arg;

	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		tfs_btree_key_cache_scan(t->m->kc, 64);
		assert_int_equal(tfs_journal_flush_pins(t->m->j, tfs_journal_cur_seq(t->m->j) / 2),
				 0);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct model m;
	struct tctx t[T_THREADS], s = { 0 };
	pthread_t th[T_THREADS], sc;
	unsigned iters = getenv("TFS_LONG") ? 100000 : 5000;

	model_init(&m, T_THREADS * T_KEYS, 64 << 10);
	for (unsigned i = 0; i < T_THREADS; i++) {
		t[i] = (struct tctx){ .m = &m, .idx = i, .iters = iters };
		for (unsigned k = 0; k < T_KEYS; k++)
			t[i].last[k] = i * T_KEYS + k;
		assert_int_equal(pthread_create(&th[i], NULL, worker, &t[i]), 0);
	}
	s.m = &m;
	assert_int_equal(pthread_create(&sc, NULL, scanner, &s), 0);
	for (unsigned i = 0; i < T_THREADS; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&s.stop, true, __ATOMIC_RELAXED);
	pthread_join(sc, NULL);

	/* Everything flushed: the leaf holds each thread's last version. */
	assert_int_equal(tfs_btree_key_cache_flush_all(m.kc), 0);
	for (unsigned i = 0; i < T_THREADS; i++)
		for (unsigned k = 0; k < T_KEYS; k++)
			assert_int_equal(leaf_val(&m, i * T_KEYS + k), t[i].last[k]);
	assert_true(stats(&m).updates > 0);
	assert_true(stats(&m).hits > 0);
	model_exit(&m);
}

/* --- text --- */

static void test_to_text(void **state)
{
	struct model m;
	struct printbuf out = PRINTBUF;
	const char *s;

	model_init(&m, 10, 0);
	for (u64 i = 0; i < 4; i++)
		lookup_expect(&m, i, i);
	assert_int_equal(model_update(&m, 1, 11, NULL), 0);
	tfs_btree_key_cache_scan(m.kc, 1); /* evicts 0 */
	tfs_btree_key_cache_to_text(&out, m.kc);
	s = printbuf_str(&out);
	assert_non_null(strstr(s, "nr_keys:"));
	assert_non_null(strstr(s, "3 (2 clean)"));
	assert_non_null(strstr(s, "nr_dirty:"));
	assert_non_null(strstr(s, "nr_freed:"));
	assert_non_null(strstr(s, "grace periods:"));
	printbuf_exit(&out);
	model_exit(&m);
}

/* --- under the btree API of a filesystem --- */

static void fs_key(struct tfs_bkey_buf *b, u64 ino, u64 val)
{
	u64 *v = tfs_bkey_init(b, TFS_BKEY_cookie, TFS_POS(ino, 0), 16);

	v[0] = cpu_to_le64(val);
	v[1] = cpu_to_le64(~val);
}

static u64 fs_commit(struct tfs_fs *fs, u64 ino, u64 val, bool del)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf b;
	u64 seq;

	tfs_trans_init(&trans, fs);
	if (del) {
		assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_inodes, TFS_POS(ino, 0)), 0);
	} else {
		fs_key(&b, ino, val);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_inodes, &b.k), 0);
	}
	assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
	tfs_trans_exit(&trans);
	return seq;
}

static u64 fs_val(const struct tfs_bkey *k)
{
	return le64_to_cpu(((const __le64 *)tfs_bkey_val(k))[0]);
}

/* tfs_btree_lookup's answer: the value, or ~0 for none. */
static u64 fs_lookup(struct tfs_fs *fs, u64 ino)
{
	struct tfs_bkey_buf b;
	int ret = tfs_btree_lookup(fs, TFS_BTREE_inodes, TFS_POS(ino, 0), &b);

	if (ret == -ENOENT)
		return ~0ULL;
	assert_int_equal(ret, 0);
	return fs_val(&b.k);
}

/* What the leaf itself holds (not the cache): the value, or ~0 for none. */
static u64 fs_leaf(struct tfs_fs *fs, u64 ino)
{
	struct tfs_btree *b = &fs->btrees[TFS_BTREE_inodes];
	struct tfs_btree_path path;
	u64 v = ~0ULL;

	tfs_six_lock_read(&b->lock);
	assert_int_equal(tfs_btree_walk(b, TFS_POS(ino, 0), 0, &path, false), 0);
	if (path.idx[0] < path.n[0]->nr_keys &&
	    tfs_bkey_pos(tfs_bnode_key(path.n[0], path.idx[0])).inode == ino)
		v = fs_val(tfs_bnode_key(path.n[0], path.idx[0]));
	tfs_six_unlock_read(&b->lock);
	return v;
}

static int fs_kc_state(struct tfs_fs *fs, u64 ino)
{
	return tfs_btree_key_cache_state(fs->key_cache, TFS_BTREE_inodes, TFS_POS(ino, 0));
}

/* Every key of the inodes btree by iteration (next, then prev), as values by inode. */
static void fs_iter_vals(struct tfs_fs *fs, u64 *vals, unsigned nr, bool backwards)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 last = backwards ? ~0ULL : 0;
	bool first = true;

	for (unsigned i = 0; i < nr; i++)
		vals[i] = ~0ULL;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_inodes, TFS_POS_MIN, TFS_POS_MAX);
	if (backwards) {
		tfs_btree_iter_set_pos(&iter, TFS_POS_MAX);
		assert_int_equal(tfs_btree_iter_next(&iter, &k), 0); /* past the end */
		assert_null(k);
	}
	while (1) {
		int ret = backwards ? tfs_btree_iter_prev(&iter, &k)
				    : (first ? tfs_btree_iter_peek(&iter, &k)
					     : tfs_btree_iter_next(&iter, &k));

		assert_int_equal(ret, 0);
		first = false;
		if (!k)
			break;
		u64 ino = tfs_bkey_pos(k).inode;

		assert_true(backwards ? ino < last : (ino > last || last == 0));
		last = ino;
		if (ino < nr)
			vals[ino] = fs_val(k);
	}
	tfs_btree_iter_exit(&iter);
}

#define FS_KEYS 64

static void fs_setup(struct ft *t, size_t budget)
{
	struct ft_geometry g = { .nr_devs = 1, .size = 32 << 20, .shm = true };

	assert_int_equal(ft_mkfs(t, &g), 0);
	t->opts.cache_budget = budget;
	assert_int_equal(ft_open(t), 0);
	assert_non_null(t->fs->key_cache);
	assert_non_null(t->fs->shrinkers);
	for (u64 i = 1; i < FS_KEYS; i++)
		fs_commit(t->fs, i, i, false);
}

static void test_fs_cached_updates(void **state)
{
	struct ft t;
	u64 vals[FS_KEYS], seq;
	struct printbuf out = PRINTBUF;

	fs_setup(&t, 0);
	/* Keys committed before being looked up went to the leaves; lookups cache them. */
	assert_int_equal(fs_kc_state(t.fs, 3), -ENOENT);
	assert_int_equal(fs_lookup(t.fs, 3), 3);
	assert_int_equal(fs_kc_state(t.fs, 3), 0);
	assert_int_equal(fs_lookup(t.fs, 5), 5);

	/* An update of a cached key: the entry, not the leaf. */
	seq = fs_commit(t.fs, 3, 333, false);
	assert_int_equal(fs_kc_state(t.fs, 3), 1);
	assert_int_equal(fs_leaf(t.fs, 3), 3);
	assert_int_equal(fs_lookup(t.fs, 3), 333);
	fs_iter_vals(t.fs, vals, FS_KEYS, false);
	assert_int_equal(vals[3], 333);
	assert_int_equal(vals[4], 4);
	fs_iter_vals(t.fs, vals, FS_KEYS, true);
	assert_int_equal(vals[3], 333);
	assert_int_equal(vals[62], 62);

	/* Reclaim writes it into the leaf; the entry is clean again. */
	assert_int_equal(tfs_journal_flush_pins(t.fs->j, seq), 0);
	assert_int_equal(fs_leaf(t.fs, 3), 333);
	assert_int_equal(fs_kc_state(t.fs, 3), 0);

	/* A delete of a cached (dirty) key removes the entry and the key. */
	fs_commit(t.fs, 5, 555, false);
	assert_int_equal(fs_kc_state(t.fs, 5), 1);
	fs_commit(t.fs, 5, 0, true);
	assert_int_equal(fs_kc_state(t.fs, 5), -ENOENT);
	assert_int_equal(fs_lookup(t.fs, 5), ~0ULL);
	fs_iter_vals(t.fs, vals, FS_KEYS, false);
	assert_int_equal(vals[5], ~0ULL);

	/* Dirty at stop: written back, there after a reopen. */
	fs_lookup(t.fs, 7);
	fs_commit(t.fs, 7, 777, false);
	assert_int_equal(fs_kc_state(t.fs, 7), 1);
	tfs_fs_to_text(&out, t.fs);
	assert_non_null(strstr(printbuf_str(&out), "nr_dirty:"));
	printbuf_exit(&out);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	/* The stop wrote the entry back: nothing was left for replay. */
	assert_int_equal(ft_btree_counter_sum(t.fs, keys_replayed), 0);
	assert_int_equal(fs_leaf(t.fs, 7), 777);
	assert_int_equal(fs_lookup(t.fs, 3), 333);
	assert_int_equal(fs_lookup(t.fs, 5), ~0ULL);
	ft_cleanup(&t);
}

struct fs_commit_arg {
	struct tfs_fs *fs;
	u64 ino, val;
};

static void *fs_commit_fn(void *arg)
{
	struct fs_commit_arg *a = arg;

	fs_commit(a->fs, a->ino, a->val, false);
	return NULL;
}

/*
 * A lookup's fill while a commit of the same key is between its key cache
 * prep and its apply: the commit holds only intent there, so readers (and
 * their fills) run.  Here the reader is the test, holding read on the
 * inodes btree, so the commit stops at its upgrade to write, after prep,
 * and the test fills the entry.  prep prepared no key and no pin for it:
 * the apply, which cannot fail, aborted on it; now it evicts the clean
 * entry and the leaf takes the update.
 */
static void test_fs_fill_beside_commit(void **state)
{
	struct ft t;
	struct fs_commit_arg a;
	struct tfs_btree *b;
	struct tfs_btree_path path;
	struct tfs_bkey_buf k;
	pthread_t th;
	u64 waits0;

	fs_setup(&t, 0);
	b = &t.fs->btrees[TFS_BTREE_inodes];
	a = (struct fs_commit_arg){ .fs = t.fs, .ino = 9, .val = 999 };
	assert_int_equal(fs_kc_state(t.fs, 9), -ENOENT);

	tfs_six_lock_read(&b->lock);
	waits0 = __atomic_load_n(&b->lock.waits[TFS_SIX_LOCK_write], __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&th, NULL, fs_commit_fn, &a), 0);
	/* Until the commit, past its prep, waits for us to leave. */
	while (__atomic_load_n(&b->lock.waits[TFS_SIX_LOCK_write], __ATOMIC_RELAXED) == waits0)
		sched_yield();
	/* What tfs_btree_lookup() does on a miss: the leaf's key into the cache. */
	assert_int_equal(tfs_btree_walk(b, TFS_POS(9, 0), 0, &path, false), 0);
	assert_true(path.idx[0] < path.n[0]->nr_keys);
	tfs_bkey_copy(&k, tfs_bnode_key(path.n[0], path.idx[0]));
	assert_int_equal(fs_val(&k.k), 9);
	tfs_btree_key_cache_fill(t.fs->key_cache, TFS_BTREE_inodes, &k.k);
	tfs_six_unlock_read(&b->lock);
	pthread_join(th, NULL);

	assert_int_equal(fs_lookup(t.fs, 9), 999);
	/* Fills work again once the commit is done. */
	assert_int_equal(fs_kc_state(t.fs, 9), 0);
	ft_cleanup(&t);
}

/* A cached key's update, durable in the journal only, survives a power cut. */
static void test_fs_crash_replays_cached(void **state)
{
	struct ft t;
	char spec[256];
	struct printbuf err = PRINTBUF;
	u64 seq;

	fs_setup(&t, 0);
	assert_int_equal(ft_stop(&t), 0);
	snprintf(spec, sizeof(spec), "dev %s trace=off", t.path[0]);
	assert_int_equal(tfs_faults_parse(spec, &err), 0);
	printbuf_exit(&err);
	assert_int_equal(ft_open(&t), 0);

	assert_int_equal(fs_lookup(t.fs, 9), 9);
	seq = fs_commit(t.fs, 9, 999, false);
	assert_int_equal(fs_kc_state(t.fs, 9), 1);
	assert_int_equal(tfs_fs_flush_seq(t.fs, seq), 0);
	assert_int_equal(tfs_faultdev_powercut(t.fs->devs[0].bdev, TFS_POWERCUT_none, 0), 0);
	assert_int_not_equal(ft_stop(&t), 0); /* the device is gone */
	tfs_faultdev_registry_reset();

	assert_int_equal(ft_open(&t), 0);
	assert_int_equal(fs_lookup(t.fs, 9), 999);
	assert_int_equal(fs_leaf(t.fs, 9), 999); /* replay puts keys in the leaves */
	ft_cleanup(&t);
}

struct fs_tctx {
	struct tfs_fs *fs;
	unsigned idx, iters;
	u64 last[16];
};

static void *fs_worker(void *arg)
{
	struct fs_tctx *c = arg;
	u64 x = 0x2545f4914f6cdd1dULL * (c->idx + 1);

	tfs_fs_thread_init();
	for (unsigned n = 0; n < c->iters; n++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned i = (unsigned)(x % 16);
		u64 ino = 1 + c->idx * 16 + i;
		u64 vals[FS_KEYS];

		switch (x >> 61) {
		case 0:
		case 1:
			c->last[i] = (u64)n << 8 | c->idx;
			fs_commit(c->fs, ino, c->last[i], false);
			break;
		case 2:
			fs_iter_vals(c->fs, vals, FS_KEYS, n & 1);
			assert_int_equal(vals[ino], c->last[i]);
			break;
		case 3:
			tfs_btree_key_cache_scan(c->fs->key_cache, 8);
			break;
		default:
			assert_int_equal(fs_lookup(c->fs, ino), c->last[i]);
		}
	}
	return NULL;
}

static void test_fs_threads(void **state)
{
	struct ft t;
	struct fs_tctx c[3];
	pthread_t th[3];
	unsigned iters = getenv("TFS_LONG") ? 20000 : 1500;

	fs_setup(&t, 64 << 10);
	for (unsigned i = 0; i < 3; i++) {
		c[i] = (struct fs_tctx){ .fs = t.fs, .idx = i, .iters = iters };
		for (unsigned k = 0; k < 16; k++)
			c[i].last[k] = 1 + i * 16 + k;
		assert_int_equal(pthread_create(&th[i], NULL, fs_worker, &c[i]), 0);
	}
	for (unsigned i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	for (unsigned i = 0; i < 3; i++)
		for (unsigned k = 0; k < 16; k++)
			assert_int_equal(fs_leaf(t.fs, 1 + i * 16 + k), c[i].last[k]);
	ft_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup_fill_hit),
		cmocka_unit_test(test_second_chance),
		cmocka_unit_test(test_clean_oldest_first),
		cmocka_unit_test(test_grace_period),
		cmocka_unit_test(test_dirty_survives_scans),
		cmocka_unit_test(test_dirty_pins_seq),
		cmocka_unit_test(test_commit_sizes),
		cmocka_unit_test(test_delete_cached),
		cmocka_unit_test(test_flush_race),
		cmocka_unit_test(test_working_set_10x_budget),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_to_text),
		cmocka_unit_test(test_fs_cached_updates),
		cmocka_unit_test(test_fs_crash_replays_cached),
		cmocka_unit_test(test_fs_fill_beside_commit),
		cmocka_unit_test(test_fs_threads),
	};

	tfs_rcu_thread_register();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
