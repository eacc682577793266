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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_commits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
