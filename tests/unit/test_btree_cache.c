// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/btree_cache.c: the node cache.
 *
 *  - A working set ten times the memory budget (writes, then reads all over
 *    it): the cache never holds more than the budget plus a stated slack
 *    (the split reserve and one path per tree: what a single operation may
 *    add before the check after it runs), and every key reads back.  The
 *    checkpoints' node copies count (their high-water mark too): a write
 *    back for memory copies every dirty node of its tree at once, so dirty
 *    nodes are charged for their copies before it starts.
 *  - The scan's rules, each with a test that fails if the rule is broken:
 *    the oldest clean node goes first (the order nodes entered the cache,
 *    not tree order); a node used since the last scan gets a second chance
 *    (it goes to the back, freed by a later scan, not this one); dirty
 *    nodes are never freed, however old; a tree whose lock is held is
 *    skipped, and a scan locks no tree but the one of the node it considers; every reason is counted; asked for pages, the scan frees
 *    whole nodes and reports pages.
 *  - One budget for both caches: the node cache and the key cache each
 *    filled past the budget on their own; the total the shrinker registry
 *    counts for them together never passes the budget (checked after every
 *    operation, and the highest total any allocation was let through).
 *  - Dirty nodes spread evenly over two trees, piled up while another
 *    thread held the check: the next check writes them back to the budget.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "fs/btree_internal.h"
#include "fs_test.h"

static void key_at(struct tfs_bkey_buf *buf, unsigned k)
{
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(5, k), 1000);

	for (unsigned i = 0; i < 1000; i++)
		v[i] = (u8)(k * 3 + i);
}

static void fill(struct tfs_fs *fs, unsigned n)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;

	tfs_trans_init(&trans, fs);
	for (unsigned k = 0; k < n; k++) {
		key_at(&buf, k);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
		if (k % 8 == 7 || k + 1 == n)
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	}
	tfs_trans_exit(&trans);
}

static void check_key(struct tfs_fs *fs, unsigned k)
{
	struct tfs_bkey_buf buf, want;

	assert_int_equal(tfs_btree_lookup(fs, TFS_BTREE_xattrs, TFS_POS(5, k), &buf), 0);
	key_at(&want, k);
	assert_memory_equal(&buf.k, &want.k, tfs_bkey_bytes(&want.k));
}

static struct ft_geometry geo = {
	.nr_devs = 1,
	.size = 64 << 20,
	.bucket_size = 16 << 10,
	.journal_size = 4 << 20,
	.shm = true,
};

static void test_budget_10x(void **state)
{
	struct ft t;
	const size_t budget = 1 << 20;
	unsigned n = 5000; /* 5 MB of keys: about 10 MB of half-full 16 KiB nodes */
	u64 x = 1;

	assert_int_equal(ft_mkfs(&t, &geo), 0);
	t.opts.cache_budget = budget;
	assert_int_equal(ft_open(&t), 0);
	struct tfs_btree_cache *c = &t.fs->cache;
	/* The stated slack: the split reserve plus one path of every tree. */
	size_t slack =
		(c->reserve + TFS_BTREE_NR * 3) * c->node_bytes + TFS_BTREE_NR * 2 * c->child_bytes;

	fill(t.fs, n);
	for (unsigned i = 0; i < 3 * n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		check_key(t.fs, (unsigned)(x % n));
		assert_true(tfs_btree_cache_bytes(t.fs) <= budget + slack);
	}
	/* The tree is ten times the budget; the cache stayed within it. */
	u64 nodes = 0;

	for (unsigned l = 0; l < TFS_BTREE_MAX_DEPTH; l++)
		nodes += t.fs->btrees[TFS_BTREE_xattrs].nr_nodes[l];
	printf("budget %zu + slack %zu; max %llu; %llu nodes in the tree now; %llu evicted, %llu "
	       "read, %llu write-backs for memory\n",
	       budget, slack, (unsigned long long)c->max_bytes, (unsigned long long)nodes,
	       (unsigned long long)c->nr_scan_freed,
	       (unsigned long long)ft_btree_counter_sum(t.fs, nodes_read),
	       (unsigned long long)c->nr_writeback_for_memory);
	assert_true(c->max_bytes <= budget + slack);
	assert_true(c->nr_scan_freed * c->node_bytes >= 9 * budget);
	assert_true(c->nr_writeback_for_memory > 0);
	/* Everything is there after a reopen too. */
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	for (unsigned k = 0; k < n; k += 7)
		check_key(t.fs, k);
	ft_cleanup(&t);
}

/* Nodes of the xattrs tree in memory. */
static u64 xattrs_nodes(struct tfs_fs *fs)
{
	u64 n = 0;

	for (unsigned l = 0; l < TFS_BTREE_MAX_DEPTH; l++)
		n += fs->btrees[TFS_BTREE_xattrs].nr_nodes[l];
	return n;
}

/* Reads every key (every leaf in memory, each marked accessed). */
static void read_all(struct tfs_fs *fs, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		check_key(fs, k);
}

static void test_second_chance(void **state)
{
	struct ft t;
	unsigned n = 300;
	unsigned long pages_per_node;

	assert_int_equal(ft_mkfs(&t, &geo), 0);
	assert_int_equal(ft_open(&t), 0);
	fill(t.fs, n);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	struct tfs_btree_cache *c = &t.fs->cache;

	pages_per_node = DIV_ROUND_UP(c->node_bytes, 4096);
	read_all(t.fs, n);
	u64 in_mem = xattrs_nodes(t.fs), leaves = t.fs->btrees[TFS_BTREE_xattrs].nr_nodes[0];

	assert_true(leaves > 4);
	/* First scan: every leaf was used since: none freed, each counted once. */
	u64 accessed0 = c->not_freed_accessed;
	unsigned long ret = tfs_btree_cache_scan(t.fs, ~0UL / 2);

	assert_int_equal(ret, 0);
	assert_int_equal(xattrs_nodes(t.fs), in_mem);
	assert_true(c->not_freed_accessed - accessed0 >= leaves);
	/* Second scan: now they go (whole nodes; the pages reported). */
	ret = tfs_btree_cache_scan(t.fs, ~0UL / 2);
	assert_true(ret >= leaves * pages_per_node);
	assert_int_equal(ret % pages_per_node, 0);
	assert_int_equal(t.fs->btrees[TFS_BTREE_xattrs].nr_nodes[0], 0);
	/* Used again, and a scan asked for one page frees one node, not the used ones. */
	read_all(t.fs, n);
	u64 freed0 = c->nr_scan_freed;

	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), 0);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_int_equal(c->nr_scan_freed - freed0, 1);
	read_all(t.fs, n);
	assert_int_equal(tfs_btree_verify(t.fs, TFS_BTREE_xattrs), 0);
	ft_cleanup(&t);
}

/*
 * Reopened after a fill: only the xattrs tree's root (an interior node)
 * is in memory.  Returns it.
 */
static struct tfs_bnode *reopened_root(struct ft *t, unsigned n)
{
	assert_int_equal(ft_mkfs(t, &geo), 0);
	assert_int_equal(ft_open(t), 0);
	fill(t->fs, n);
	assert_int_equal(ft_stop(t), 0);
	assert_int_equal(ft_open(t), 0);

	struct tfs_bnode *r = t->fs->btrees[TFS_BTREE_xattrs].root;

	assert_int_equal(r->level, 1);
	assert_true(r->nr_keys > 8);
	assert_int_equal(t->fs->btrees[TFS_BTREE_xattrs].nr_nodes[0], 0);
	return r;
}

/* A lookup that walks to the root's child i: reads it (a miss) or uses it (a hit). */
static void touch_leaf(struct tfs_fs *fs, unsigned i)
{
	struct tfs_bnode *r = fs->btrees[TFS_BTREE_xattrs].root;
	struct tfs_bkey_buf buf;
	int ret = tfs_btree_lookup(fs, TFS_BTREE_xattrs, tfs_bkey_pos(tfs_bnode_key(r, i)), &buf);

	assert_true(ret == 0 || ret == -ENOENT);
	assert_non_null(r->child[i]);
}

/* Leaves A, B, C: the root's children 5, 1, 3 (tree order would be B, C, A). */
enum {
	LEAF_A = 5,
	LEAF_B = 1,
	LEAF_C = 3
};

/* A node's size in the pages a scan is asked for and reports. */
static unsigned long node_pages(struct tfs_fs *fs)
{
	return DIV_ROUND_UP(fs->cache.node_bytes, 4096);
}

/*
 * reopened_root(), then leaves A, B, C read in that order (entering the
 * cache's LRU in that order) and not used again.  Returns the root.
 */
static struct tfs_bnode *root_and_abc(struct ft *t)
{
	struct tfs_bnode *r = reopened_root(t, 300);

	touch_leaf(t->fs, LEAF_A);
	touch_leaf(t->fs, LEAF_B);
	touch_leaf(t->fs, LEAF_C);
	assert_int_equal(t->fs->btrees[TFS_BTREE_xattrs].nr_nodes[0], 3);
	return r;
}

/* Every key of root_and_abc()'s fill reads back and the tree verifies; then the images go. */
static void check_and_cleanup(struct ft *t)
{
	read_all(t->fs, 300);
	assert_int_equal(tfs_btree_verify(t->fs, TFS_BTREE_xattrs), 0);
	ft_cleanup(t);
}

static void test_oldest_first(void **state)
{
	struct ft t;
	/* A, B, C enter the cache in that order; none is used again. */
	struct tfs_bnode *r = root_and_abc(&t);
	unsigned long pages_per_node = node_pages(t.fs);

	/* One node asked for at a time: the oldest goes first. */
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_A]);
	assert_non_null(r->child[LEAF_B]);
	assert_non_null(r->child[LEAF_C]);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_B]);
	assert_non_null(r->child[LEAF_C]);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_C]);
	/* Read back after eviction: the newest now. */
	touch_leaf(t.fs, LEAF_B);
	touch_leaf(t.fs, LEAF_A);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_B]);
	assert_non_null(r->child[LEAF_A]);
	check_and_cleanup(&t);
}

static void test_second_chance_order(void **state)
{
	struct ft t;
	struct tfs_bnode *r = root_and_abc(&t);
	struct tfs_btree_cache *c = &t.fs->cache;
	unsigned long pages_per_node = node_pages(t.fs);

	/* A used again: the oldest, but it gets a second chance. */
	touch_leaf(t.fs, LEAF_A);
	u64 accessed0 = c->not_freed_accessed;

	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_non_null(r->child[LEAF_A]);
	assert_null(r->child[LEAF_B]);
	assert_non_null(r->child[LEAF_C]);
	assert_int_equal(c->not_freed_accessed - accessed0, 1);
	/* A went to the back, behind C: C goes next, then A. */
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_non_null(r->child[LEAF_A]);
	assert_null(r->child[LEAF_C]);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_A]);
	assert_int_equal(c->not_freed_accessed - accessed0, 1);
	check_and_cleanup(&t);
}

static void test_oldest_dirty_stays(void **state)
{
	struct ft t;
	struct tfs_bnode *r = reopened_root(&t, 300);
	struct tfs_btree_cache *c = &t.fs->cache;
	unsigned long pages_per_node = node_pages(t.fs);
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;

	touch_leaf(t.fs, LEAF_A);
	touch_leaf(t.fs, LEAF_B);
	/* A, the oldest, gets a key (dirty); B stays clean. */
	struct tfs_bnode *a = r->child[LEAF_A];
	u8 *v = tfs_bkey_init(&buf, TFS_BKEY_cookie, tfs_bkey_pos(tfs_bnode_key(a, 0)), 1000);

	memset(v, 0x5a, 1000);
	tfs_trans_init(&trans, t.fs);
	assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	assert_true(a->dirty);
	assert_ptr_equal(r->child[LEAF_A], a);

	u64 dirty0 = c->not_freed_dirty;

	/* B goes, though younger; A stays through every scan, counted each time. */
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	assert_null(r->child[LEAF_B]);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(tfs_btree_cache_scan(t.fs, ~0UL / 2), 0);
	assert_ptr_equal(r->child[LEAF_A], a);
	assert_true(c->not_freed_dirty - dirty0 >= 5);
	/* Written back: clean, and then it may go (after its second chance). */
	assert_int_equal(tfs_btree_write_all(t.fs), 0);
	tfs_btree_cache_scan(t.fs, ~0UL / 2);
	tfs_btree_cache_scan(t.fs, ~0UL / 2);
	assert_null(r->child[LEAF_A]);
	assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_xattrs, tfs_bkey_pos(&buf.k), &buf), 0);
	assert_int_equal(((u8 *)tfs_bkey_val(&buf.k))[999], 0x5a);
	ft_cleanup(&t);
}

static void test_dirty_and_locked_stay(void **state)
{
	struct ft t;
	unsigned n = 300;

	assert_int_equal(ft_mkfs(&t, &geo), 0);
	assert_int_equal(ft_open(&t), 0);
	struct tfs_btree_cache *c = &t.fs->cache;

	/* Every node dirty (never written back): scans free none of them. */
	fill(t.fs, n);
	u64 in_mem = xattrs_nodes(t.fs), dirty0 = c->not_freed_dirty;

	assert_true(t.fs->btrees[TFS_BTREE_xattrs].nr_dirty == in_mem);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(tfs_btree_cache_scan(t.fs, ~0UL / 2), 0);
	assert_int_equal(xattrs_nodes(t.fs), in_mem);
	assert_true(c->not_freed_dirty - dirty0 >= 3 * (in_mem - 1));
	read_all(t.fs, n);

	/* Written back, clean: but a tree whose lock is held is skipped. */
	assert_int_equal(tfs_btree_write_all(t.fs), 0);
	struct tfs_btree *b = &t.fs->btrees[TFS_BTREE_xattrs];
	u64 locked0 = c->not_freed_locked;

	tfs_six_lock_read(&b->lock);
	for (unsigned i = 0; i < 2; i++)
		tfs_btree_cache_scan(t.fs, ~0UL / 2);
	tfs_six_unlock_read(&b->lock);
	assert_int_equal(xattrs_nodes(t.fs), in_mem);
	assert_true(c->not_freed_locked - locked0 >= 2);
	/* Unlocked: two scans (second chance) free the clean ones. */
	tfs_btree_cache_scan(t.fs, ~0UL / 2);
	tfs_btree_cache_scan(t.fs, ~0UL / 2);
	assert_int_equal(xattrs_nodes(t.fs), 1); /* the root stays */
	read_all(t.fs, n);

	struct printbuf out = PRINTBUF;

	tfs_btree_cache_to_text(&out, t.fs);
	assert_non_null(strstr(printbuf_str(&out), "not freed:"));
	assert_non_null(strstr(printbuf_str(&out), "dirty "));
	assert_non_null(strstr(printbuf_str(&out), "locked "));
	assert_non_null(strstr(printbuf_str(&out), "accessed "));
	assert_non_null(strstr(printbuf_str(&out), "reserve "));
	printbuf_exit(&out);
	ft_cleanup(&t);
}

struct scan_arg {
	struct tfs_fs *fs;
	bool started;
	unsigned long ret;
};

static void *scan_thread(void *p)
{
	struct scan_arg *a = p;

	__atomic_store_n(&a->started, true, __ATOMIC_RELEASE);
	a->ret = tfs_btree_cache_scan(a->fs, 1);
	return NULL;
}

/*
 * A scan locks only the tree of the node it considers.  With another tree
 * held (intent, then read) it still frees an old clean node of the xattrs
 * tree; and while a scan is under way (here stopped at the cache lock,
 * which the test holds) no tree is locked: a reader of any tree gets in at
 * once.  The scan that trylocked every tree for its whole walk failed the
 * second part.
 */
static void test_scan_locks_one_tree(void **state)
{
	struct ft t;
	struct tfs_bnode *r = root_and_abc(&t);
	struct tfs_btree_cache *c = &t.fs->cache;
	unsigned long pages_per_node = node_pages(t.fs);
	struct tfs_btree *other = &t.fs->btrees[TFS_BTREE_dirents];

	tfs_six_lock_intent(&other->lock);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	tfs_six_unlock_intent(&other->lock);
	assert_null(r->child[LEAF_A]);
	tfs_six_lock_read(&other->lock);
	assert_int_equal(tfs_btree_cache_scan(t.fs, 1), pages_per_node);
	tfs_six_unlock_read(&other->lock);
	assert_null(r->child[LEAF_B]);

	struct scan_arg a = { .fs = t.fs };
	pthread_t th;
	unsigned busy = 0;

	pthread_mutex_lock(&c->lock);
	assert_int_equal(pthread_create(&th, NULL, scan_thread, &a), 0);
	while (!__atomic_load_n(&a.started, __ATOMIC_ACQUIRE))
		sched_yield();
	/* 100 ms of a scan in progress: every tree's read lock is free throughout. */
	for (unsigned i = 0; i < 100; i++) {
		for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
			struct tfs_six_lock *l = &t.fs->btrees[id].lock;

			if (tfs_six_trylock_read(l))
				tfs_six_unlock_read(l);
			else
				busy++;
		}
		usleep(1000);
	}
	pthread_mutex_unlock(&c->lock);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(busy, 0);
	assert_int_equal(a.ret, pages_per_node);
	assert_null(r->child[LEAF_C]);
	check_and_cleanup(&t);
}

/* A cookie key in the inodes btree (cached by the key cache): 8-byte value. */
static void small_key(struct tfs_bkey_buf *buf, unsigned k)
{
	u64 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(k + 1, 0), 8);

	*v = k * 7;
}

static size_t shared_total(struct tfs_fs *fs)
{
	return tfs_shrinkers_bytes(fs->shrinkers);
}

static void test_shared_budget(void **state)
{
	struct ft t;
	const size_t budget = 1 << 20;
	/* xattrs: about 5 MB of nodes; inodes: 30000 keys, about 4 MB of key cache entries. */
	unsigned n = 2500, ni = 30000;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf, got;
	size_t max_total = 0;
	u64 x = 1;

	assert_int_equal(ft_mkfs(&t, &geo), 0);
	t.opts.cache_budget = budget;
	assert_int_equal(ft_open(&t), 0);
	fill(t.fs, n);
	tfs_trans_init(&trans, t.fs);
	for (unsigned k = 0; k < ni; k++) {
		small_key(&buf, k);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_inodes, &buf.k), 0);
		if (k % 100 == 99)
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	}
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	/* Reopened: clean trees, empty caches, the registry's counters at 0. */
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);

	struct tfs_fs *fs = t.fs;
	struct tfs_btree_key_cache_stats kst;
	struct tfs_shrinkers_stats st;

	assert_non_null(fs->shrinkers);
	assert_int_equal(tfs_shrinkers_budget(fs->shrinkers), budget);
	/* Each cache alone gets past the budget: the key cache first, then the nodes too. */
	for (unsigned k = 0; k < ni; k++) {
		assert_int_equal(tfs_btree_lookup(fs, TFS_BTREE_inodes, TFS_POS(k + 1, 0), &got),
				 0);
		small_key(&buf, k);
		assert_memory_equal(&got.k, &buf.k, tfs_bkey_bytes(&buf.k));
		max_total = max_t(size_t, max_total, shared_total(fs));
		assert_true(shared_total(fs) <= budget);
	}
	for (unsigned i = 0; i < 4 * n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (i % 2) {
			check_key(fs, (unsigned)(x % n));
		} else {
			unsigned k = (unsigned)(x % ni);

			assert_int_equal(
				tfs_btree_lookup(fs, TFS_BTREE_inodes, TFS_POS(k + 1, 0), &got), 0);
			small_key(&buf, k);
			assert_memory_equal(&got.k, &buf.k, tfs_bkey_bytes(&buf.k));
		}
		max_total = max_t(size_t, max_total, shared_total(fs));
		assert_true(shared_total(fs) <= budget);
	}
	tfs_shrinkers_stats(fs->shrinkers, &st);
	tfs_btree_key_cache_stats(fs->key_cache, &kst);
	printf("budget %zu: max total seen %zu, max let through %llu; %llu reserves, %llu shrank "
	       "first, %llu over; key cache evicted %llu (holds %llu B), nodes evicted %llu\n",
	       budget, max_total, (unsigned long long)st.max_held, (unsigned long long)st.reserves,
	       (unsigned long long)st.runs_direct, (unsigned long long)st.over_budget,
	       (unsigned long long)kst.evicted, (unsigned long long)kst.bytes,
	       (unsigned long long)fs->cache.nr_scan_freed);
	/* Both caches went past the budget's worth of memory and were shrunk to share it. */
	assert_true((kst.evicted + kst.nr_keys) * 100 > budget);
	assert_true(kst.evicted > 0);
	assert_true(fs->cache.nr_scan_freed * fs->cache.node_bytes > budget);
	assert_true(st.runs_direct > 0);
	/* Never over the budget, as counted: not after an operation, not at any allocation. */
	assert_true(st.max_held <= budget);
	assert_int_equal(st.over_budget, 0);
	ft_cleanup(&t);
}

/*
 * Dirty nodes spread over several trees are written back for memory too.
 * In the daemon one thread does the check after a commit while the others
 * go on committing (the check's trylock), so dirty nodes can pile up in
 * several trees at once before a check sees them.  Here the test holds the
 * check's lock (it is that other thread) while it commits to two trees in
 * turn, about 4x the budget of dirty nodes, half in each; the next check
 * must bring the shared total back to the budget plus the usual slack.  It
 * wrote back only a tree holding half of the excess, so with two trees
 * sharing it evenly it wrote back none (a mount with cache_mb=1 held 40x
 * its budget until journal reclaim wrote the nodes).
 */
static void test_budget_dirty_many_trees(void **state)
{
	static const enum tfs_btree_id ids[] = { TFS_BTREE_xattrs, TFS_BTREE_dirents };
	struct ft t;
	const size_t budget = 1 << 20;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	struct ft_geometry big = geo;
	unsigned k = 0;

	big.journal_size = 16 << 20; /* journal reclaim leaves the dirty nodes alone */
	assert_int_equal(ft_mkfs(&t, &big), 0);
	t.opts.cache_budget = budget;
	assert_int_equal(ft_open(&t), 0);
	struct tfs_btree_cache *c = &t.fs->cache;
	size_t slack =
		(c->reserve + TFS_BTREE_NR * 3) * c->node_bytes + TFS_BTREE_NR * 2 * c->child_bytes;

	tfs_trans_init(&trans, t.fs);
	pthread_mutex_lock(&c->scan_lock);
	while (shared_total(t.fs) < 4 * budget) {
		for (unsigned i = 0; i < ARRAY_SIZE(ids); i++) {
			key_at(&buf, k);
			assert_int_equal(tfs_trans_update(&trans, ids[i], &buf.k), 0);
		}
		if (++k % 4 == 0)
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	}
	pthread_mutex_unlock(&c->scan_lock);
	size_t before = shared_total(t.fs);
	u64 dirty0 = t.fs->btrees[ids[0]].nr_dirty, dirty1 = t.fs->btrees[ids[1]].nr_dirty;

	key_at(&buf, k++);
	assert_int_equal(tfs_trans_update(&trans, ids[0], &buf.k), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	printf("budget %zu + slack %zu: %zu before the check (dirty nodes %llu and %llu), %zu "
	       "after; %llu write-backs for memory\n",
	       budget, slack, before, (unsigned long long)dirty0, (unsigned long long)dirty1,
	       shared_total(t.fs), (unsigned long long)c->nr_writeback_for_memory);
	assert_true(shared_total(t.fs) <= budget + slack);
	assert_true(c->nr_writeback_for_memory > 0);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	for (unsigned j = 0; j + 1 < k; j += 7)
		for (unsigned i = 0; i < ARRAY_SIZE(ids); i++) {
			struct tfs_bkey_buf got, want;

			assert_int_equal(tfs_btree_lookup(t.fs, ids[i], TFS_POS(5, j), &got), 0);
			key_at(&want, j);
			assert_memory_equal(&got.k, &want.k, tfs_bkey_bytes(&want.k));
		}
	ft_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget_10x),
		cmocka_unit_test(test_second_chance),
		cmocka_unit_test(test_oldest_first),
		cmocka_unit_test(test_second_chance_order),
		cmocka_unit_test(test_oldest_dirty_stays),
		cmocka_unit_test(test_dirty_and_locked_stay),
		cmocka_unit_test(test_scan_locks_one_tree),
		cmocka_unit_test(test_shared_budget),
		cmocka_unit_test(test_budget_dirty_many_trees),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
