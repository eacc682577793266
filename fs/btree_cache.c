// SPDX-License-Identifier: GPL-2.0
/*
 * The node cache: node memory, a reserve of spare nodes for splits, and
 * (below) the scan that frees clean nodes when the cache is over budget.
 *
 * The scan frees the oldest clean node first: every node allocated for a
 * tree is on one LRU list (under c->lock) in the order it entered the
 * cache, read from disk or made by a split.  A lookup that uses a node
 * again only sets its accessed bit (an atomic store under the tree's shared
 * lock, no list move on the read path); the scan, from the oldest, clears
 * the bit and moves the node to the back (a second chance: it goes only if
 * it is not used again before the scan comes round to it), and frees a
 * clean node whose bit is clear.  What it never frees: the root, a node
 * with children in memory (its parent pointer is the only way to them),
 * dirty nodes and nodes being written, nodes of a tree whose lock it could
 * not take, and the spare nodes (not on the list).
 *
 * A node's memory is one block: the struct, its heap (the on-disk
 * capacity) and its offsets; an interior node also has a child array
 * (allocated the first time the block serves an interior node, kept with
 * it).  Spare nodes sit on the free list; the first `reserve` of them are
 * never given back to malloc, so a split in a commit finds memory even
 * when malloc fails after a shrink.
 *
 * One budget for both caches: once the filesystem runs (fs->shrinkers
 * set), the node cache and the key cache share opts.cache_budget through
 * the shrinker registry.  Before it mallocs a node (or a child array), the
 * node cache reserves the bytes with the registry (tfs_shrinkers_reserve):
 * when the two caches together would pass the budget, the allocating
 * thread runs both shrinkers first, each asked in proportion to what it
 * holds.  What the registry counts for the node cache is budget_bytes():
 * its nodes, the checkpoints' copies, and a copy to come for every dirty
 * node.  The check after each read and commit (check_budget) holds the
 * same shared total to the budget and, when clean memory is not enough,
 * writes back the tree with the most dirty nodes.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "lib/trace.h"

#define BTREE_CACHE_RESERVE 16
#define BTREE_CACHE_DEFAULT_BUDGET (256ULL << 20)

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

static struct tfs_bnode *bnode_alloc(struct tfs_fs *fs, struct tfs_btree *b, unsigned level);

int tfs_btree_cache_init(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;
	unsigned cap = tfs_btree_node_capacity_u64s(fs->node_size);

	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->scan_lock, NULL);
	c->max_keys = cap / TFS_BKEY_U64s + 1;
	c->max_children = cap / (TFS_BKEY_U64s + sizeof(struct tfs_btree_ptr) / 8 + 2) + 1;
	c->node_bytes = align8(sizeof(struct tfs_bnode)) + (size_t)cap * 8 +
			align8(c->max_keys * sizeof(u16));
	c->child_bytes = c->max_children * sizeof(struct tfs_bnode *);
	c->reserve = BTREE_CACHE_RESERVE;
	/* fs.h: 0 means a default. */
	c->budget = fs->opts.cache_budget ?: BTREE_CACHE_DEFAULT_BUDGET;
	for (unsigned i = 0; i < c->reserve; i++) {
		struct tfs_bnode *n = bnode_alloc(fs, NULL, 0);

		if (!n)
			return -ENOMEM;
		tfs_bnode_free(fs, n);
	}
	return 0;
}

static void bnode_release(struct tfs_btree_cache *c, struct tfs_bnode *n)
{
	if (n->child)
		__atomic_sub_fetch(&c->nr_child_arrays, 1, __ATOMIC_RELAXED);
	free(n->child);
	free(n);
	__atomic_sub_fetch(&c->nr_nodes, 1, __ATOMIC_RELAXED);
}

/* --- the LRU (c->lock held) --- */

static void lru_add_tail(struct tfs_btree_cache *c, struct tfs_btree *b, struct tfs_bnode *n)
{
	n->tree = b;
	n->lru_next = NULL;
	n->lru_prev = c->lru_tail;
	if (c->lru_tail)
		c->lru_tail->lru_next = n;
	else
		c->lru_head = n;
	c->lru_tail = n;
	c->nr_lru++;
}

static void lru_del(struct tfs_btree_cache *c, struct tfs_bnode *n)
{
	if (n->lru_prev)
		n->lru_prev->lru_next = n->lru_next;
	else
		c->lru_head = n->lru_next;
	if (n->lru_next)
		n->lru_next->lru_prev = n->lru_prev;
	else
		c->lru_tail = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
	n->tree = NULL;
	c->nr_lru--;
}

void tfs_btree_cache_exit(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;

	/* Every tree's nodes were freed (tfs_btree_free_nodes()). */
	if (c->lru_head)
		abort();

	while (c->free) {
		struct tfs_bnode *n = c->free;

		c->free = n->next;
		bnode_release(c, n);
	}
	c->nr_free = 0;
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->scan_lock);
}

static size_t cache_bytes(struct tfs_btree_cache *c)
{
	return __atomic_load_n(&c->nr_nodes, __ATOMIC_RELAXED) * c->node_bytes +
	       __atomic_load_n(&c->nr_child_arrays, __ATOMIC_RELAXED) * c->child_bytes +
	       __atomic_load_n(&c->ckpt_bytes, __ATOMIC_RELAXED);
}

/*
 * What the budget is held against: the memory the cache holds, and for
 * each dirty node the write buffer its checkpoint will take (a checkpoint
 * copies every dirty node of its tree at once).  Charged before, so a write
 * back for memory starts while the copies still fit in the budget.
 */
static size_t budget_bytes(struct tfs_fs *fs)
{
	u64 dirty = 0;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		dirty += __atomic_load_n(&fs->btrees[id].nr_dirty, __ATOMIC_RELAXED);
	return cache_bytes(&fs->cache) + dirty * fs->node_size;
}

/*
 * The registry and the key cache are set once the journal runs
 * (tfs_fs_key_cache_init()), while journal reclaim may already run
 * checkpoints that reach here: read them once, published with release.
 */
static struct tfs_shrinkers *fs_shrinkers(struct tfs_fs *fs)
{
	return __atomic_load_n(&fs->shrinkers, __ATOMIC_ACQUIRE);
}

/*
 * About to malloc bytes for the node cache: make room under the shared
 * budget first (a no-op before the registry exists: open, read-only).
 * Callers may hold tree locks (the scan only trylocks trees), never c->lock.
 */
static void node_reserve(struct tfs_fs *fs, size_t bytes)
{
	struct tfs_shrinkers *s = fs_shrinkers(fs);

	if (s)
		tfs_shrinkers_reserve(s, bytes);
}

/* The high-water mark (c->lock held). */
static void cache_note_bytes(struct tfs_btree_cache *c)
{
	u64 bytes = cache_bytes(c);

	if (bytes > c->max_bytes)
		c->max_bytes = bytes;
}

/* b NULL: a spare node for the reserve, not on the LRU. */
static struct tfs_bnode *bnode_alloc(struct tfs_fs *fs, struct tfs_btree *b, unsigned level)
{
	struct tfs_btree_cache *c = &fs->cache;
	unsigned cap = tfs_btree_node_capacity_u64s(fs->node_size);
	struct tfs_bnode *n;

	pthread_mutex_lock(&c->lock);
	n = c->free;
	if (n) {
		c->free = n->next;
		c->nr_free--;
	}
	pthread_mutex_unlock(&c->lock);
	bool from_free_list = n;

	if (!n) {
		node_reserve(fs, c->node_bytes + (level ? c->child_bytes : 0));
		char *p = tfs_fault("alloc:btree_node") ? NULL : malloc(c->node_bytes);

		if (!p)
			return NULL;
		n = (struct tfs_bnode *)p;
		memset(n, 0, sizeof(*n));
		n->heap = (__le64 *)(p + align8(sizeof(struct tfs_bnode)));
		n->offs = (u16 *)(p + align8(sizeof(struct tfs_bnode)) + (size_t)cap * 8);
		__atomic_add_fetch(&c->nr_nodes, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&c->lock);
		cache_note_bytes(c);
		pthread_mutex_unlock(&c->lock);
	}
	if (level && !n->child) {
		if (from_free_list)
			node_reserve(fs, c->child_bytes);
		n->child = calloc(c->max_children, sizeof(n->child[0]));
		if (!n->child) {
			tfs_bnode_free(fs, n);
			return NULL;
		}
		__atomic_add_fetch(&c->nr_child_arrays, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&c->lock);
		cache_note_bytes(c);
		pthread_mutex_unlock(&c->lock);
	}

	__le64 *heap = n->heap;
	u16 *offs = n->offs;
	struct tfs_bnode **child = n->child;

	memset(n, 0, sizeof(*n));
	n->heap = heap;
	n->offs = offs;
	n->child = child;
	n->level = (u8)level;
	n->cap = cap;
	pthread_mutex_lock(&c->lock);
	c->nr_allocs++;
	/* The newest: at the back of the LRU. */
	if (b)
		lru_add_tail(c, b, n);
	pthread_mutex_unlock(&c->lock);
	return n;
}

struct tfs_bnode *tfs_bnode_alloc(struct tfs_btree *b, unsigned level)
{
	return bnode_alloc(b->fs, b, level);
}

/* Off the LRU, to the spare list (the reserve first) or back to malloc; c->lock held. */
static void bnode_free_locked(struct tfs_btree_cache *c, struct tfs_bnode *n)
{
	c->nr_frees++;
	if (n->tree)
		lru_del(c, n);
	if (c->nr_free < c->reserve) {
		n->next = c->free;
		c->free = n;
		c->nr_free++;
	} else {
		bnode_release(c, n);
	}
}

void tfs_bnode_free(struct tfs_fs *fs, struct tfs_bnode *n)
{
	struct tfs_btree_cache *c = &fs->cache;

	pthread_mutex_lock(&c->lock);
	bnode_free_locked(c, n);
	pthread_mutex_unlock(&c->lock);
}

static void bnode_free_subtree(struct tfs_btree *b, struct tfs_bnode *n)
{
	if (n->level)
		for (unsigned i = 0; i < n->nr_keys; i++)
			if (n->child[i])
				bnode_free_subtree(b, n->child[i]);
	tfs_bnode_free(b->fs, n);
}

void tfs_btree_free_nodes(struct tfs_btree *b)
{
	if (b->root)
		bnode_free_subtree(b, b->root);
	b->root = NULL;
	while (b->dead) {
		struct tfs_bnode *n = b->dead;

		b->dead = n->next;
		tfs_bnode_free(b->fs, n);
	}
}

void tfs_btree_cache_note_peak(struct tfs_fs *fs)
{
	pthread_mutex_lock(&fs->cache.lock);
	cache_note_bytes(&fs->cache);
	pthread_mutex_unlock(&fs->cache.lock);
}

size_t tfs_btree_cache_bytes(struct tfs_fs *fs)
{
	return budget_bytes(fs);
}

/* --- the scan --- */

struct scan_stats {
	unsigned long freed, dirty, locked, accessed, reserve, children;
};

/*
 * Whether a child of n is in memory.  Atomic loads: under the tree's intent
 * lock a reader may fill a NULL child pointer (a compare-and-swap,
 * btree_io.c) while the scan looks.
 */
static bool bnode_has_children(const struct tfs_bnode *n)
{
	for (unsigned i = 0; n->level && i < n->nr_keys; i++)
		if (__atomic_load_n(&n->child[i], __ATOMIC_RELAXED))
			return true;
	return false;
}

/*
 * n's parent and n's index in it, found from the root through the nodes in
 * memory (a node has no parent pointer: splits, merges and height changes
 * would have to keep it); NULL when n is the root or not (yet, or any
 * longer) in the tree.  The tree's write lock held.
 */
static struct tfs_bnode *bnode_parent(struct tfs_btree *b, const struct tfs_bnode *n, unsigned *idx)
{
	struct tfs_bnode *p = b->root;

	while (p && p->level > n->level) {
		unsigned i = tfs_bnode_lower_bound(p, n->min_key);

		if (i >= p->nr_keys)
			return NULL;
		if (p->level == n->level + 1) {
			if (p->child[i] != n)
				return NULL;
			*idx = i;
			return p;
		}
		p = p->child[i];
	}
	return NULL;
}

/* Used since it entered or since the last pass: clears the bit, moves n to the back. */
static bool second_chance(struct tfs_btree_cache *c, struct tfs_bnode *n, struct scan_stats *st)
{
	if (!__atomic_load_n(&n->accessed, __ATOMIC_RELAXED))
		return false;
	struct tfs_btree *b = n->tree; /* lru_del() clears it */

	__atomic_store_n(&n->accessed, 0, __ATOMIC_RELAXED);
	lru_del(c, n);
	lru_add_tail(c, b, n);
	st->accessed++;
	return true;
}

/*
 * Frees n if it may go: true when freed.  Only n's tree is locked, and
 * only by trylock (c->lock is held: waiting here would stall every
 * allocation): intent, which lets the tree's readers go on, to look at the
 * node (its fields change only under write), then write, which waits for
 * no reader, only to unlink and free it.  Readers may have used n or read
 * a child of it between the two: both are checked again under write.
 */
static bool scan_node(struct tfs_btree_cache *c, struct tfs_bnode *n, struct scan_stats *st)
{
	struct tfs_btree *b = n->tree;
	struct tfs_bnode *parent;
	unsigned idx;
	bool freed = false;

	if (!tfs_six_trylock_intent(&b->lock)) {
		st->locked++;
		return false;
	}
	if (n == b->root || n->dead)
		goto out;
	if (bnode_has_children(n)) {
		st->children++;
		goto out;
	}
	if (n->dirty || n->writing) {
		st->dirty++;
		goto out;
	}
	if (second_chance(c, n, st))
		goto out;
	if (!tfs_six_trylock_write(&b->lock)) {
		st->locked++; /* readers in the tree */
		goto out;
	}
	if (bnode_has_children(n))
		st->children++;
	else if (second_chance(c, n, st))
		;
	else if ((parent = bnode_parent(b, n, &idx))) {
		parent->child[idx] = NULL;
		__atomic_sub_fetch(&b->nr_nodes[n->level], 1, __ATOMIC_RELAXED);
		/* Kept as a spare for splits rather than given back: counted, not freed. */
		if (c->nr_free < c->reserve)
			st->reserve++;
		bnode_free_locked(c, n);
		freed = true;
	}
	/* (No parent: allocated, not in the tree yet; its owner frees it.) */
	tfs_six_unlock_write(&b->lock);
out:
	tfs_six_unlock_intent(&b->lock);
	return freed;
}

/*
 * Walks the LRU from the oldest node, each node at most once, until nr
 * nodes are freed, locking one tree at a time for one node (scan_node()):
 * a scan never holds a tree while it looks at another tree's nodes, so
 * lookups and commits in every other tree go on.  c->lock held.
 */
static void scan_lru(struct tfs_btree_cache *c, unsigned long nr, struct scan_stats *st)
{
	/* A second chance moves a node behind every node this walk has yet to see. */
	u64 nr_walk = c->nr_lru;
	struct tfs_bnode *n, *next;

	for (n = c->lru_head; n && nr_walk && st->freed < nr; n = next, nr_walk--) {
		/* Read first: n may be freed, or moved to the back. */
		next = n->lru_next;
		if (scan_node(c, n, st))
			st->freed++;
	}
}

unsigned long tfs_btree_cache_count(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;
	u64 in_trees = 0, dirty = 0;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		for (unsigned l = 0; l < TFS_BTREE_MAX_DEPTH; l++)
			in_trees += __atomic_load_n(&b->nr_nodes[l], __ATOMIC_RELAXED);
		dirty += __atomic_load_n(&b->nr_dirty, __ATOMIC_RELAXED);
	}
	/* Roots stay; dirty nodes wait for write-back. */
	u64 can = in_trees > dirty + TFS_BTREE_NR ? in_trees - dirty - TFS_BTREE_NR : 0;

	return (unsigned long)(can * DIV_ROUND_UP(c->node_bytes, 4096));
}

unsigned long tfs_btree_cache_scan(struct tfs_fs *fs, unsigned long nr_to_scan_pages)
{
	struct tfs_btree_cache *c = &fs->cache;
	unsigned long pages_per_node = DIV_ROUND_UP(c->node_bytes, 4096);
	/* Asked for pages, frees whole nodes: at least one. */
	unsigned long nr_nodes = DIV_ROUND_UP(nr_to_scan_pages, pages_per_node);
	unsigned long can_free = tfs_btree_cache_count(fs) / pages_per_node;
	struct scan_stats st = { 0 };

	/* Never waits for a tree: a busy tree's nodes are skipped (counted), keeping their place. */
	pthread_mutex_lock(&c->lock);
	scan_lru(c, nr_nodes, &st);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&c->lock);
	c->nr_scans++;
	c->nr_scan_freed += st.freed;
	c->not_freed_dirty += st.dirty;
	c->not_freed_locked += st.locked;
	c->not_freed_accessed += st.accessed;
	c->not_freed_reserve += st.reserve;
	c->not_freed_children += st.children;
	pthread_mutex_unlock(&c->lock);

	unsigned long ret = st.freed * pages_per_node;

	/*
	 * Give the nodes' memory back to the system: free() keeps it in the
	 * heap, where a checkpoint's aligned copies may not fit, and the
	 * process would hold both.
	 */
	if (st.freed)
		malloc_trim(0);
	tfs_trace(btree_cache_scan, nr_to_scan_pages, nr_nodes, can_free, ret);
	return ret;
}

/*
 * Both caches' memory, lock-free: over-estimates the registry's count (the
 * key cache's freed list included), so a check that finds it within the
 * budget need not measure.
 */
static size_t approx_bytes(struct tfs_fs *fs)
{
	struct tfs_btree_key_cache *kc = __atomic_load_n(&fs->key_cache, __ATOMIC_ACQUIRE);

	return budget_bytes(fs) + (kc ? tfs_btree_key_cache_bytes(kc) : 0);
}

void tfs_btree_cache_make_room(struct tfs_fs *fs, unsigned nr_nodes)
{
	struct tfs_btree_cache *c = &fs->cache;
	size_t want = nr_nodes * (c->node_bytes + c->child_bytes);
	struct tfs_shrinkers *s = fs_shrinkers(fs);

	if (!s || !c->budget || approx_bytes(fs) + want <= c->budget)
		return;
	tfs_shrinkers_reserve(s, want);
}

/*
 * What the budget is held against: with the registry, both caches together
 * (its bytes(): budget_bytes() here plus the key cache's); before it, the
 * node cache alone.
 */
static size_t shared_bytes(struct tfs_fs *fs)
{
	struct tfs_shrinkers *s = fs_shrinkers(fs);

	return s ? tfs_shrinkers_bytes(s) : budget_bytes(fs);
}

/* Frees clean memory down to target: both caches through the registry, or the nodes alone. */
static void shrink_to(struct tfs_fs *fs, size_t bytes, size_t target)
{
	struct tfs_shrinkers *s = fs_shrinkers(fs);

	if (s)
		tfs_shrinkers_run(s, target);
	else
		tfs_btree_cache_scan(fs, DIV_ROUND_UP(bytes - target, 4096));
}

/* What dirty nodes hold: each node and the checkpoint copy it is charged for. */
static size_t dirty_bytes(struct tfs_fs *fs)
{
	u64 dirty = 0;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		dirty += __atomic_load_n(&fs->btrees[id].nr_dirty, __ATOMIC_RELAXED);
	return dirty * (fs->cache.node_bytes + fs->node_size);
}

/* The tree with most dirty nodes, or NULL. */
static struct tfs_btree *most_dirty_tree(struct tfs_fs *fs)
{
	struct tfs_btree *worst = NULL;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		if (__atomic_load_n(&b->nr_dirty, __ATOMIC_RELAXED) &&
		    (!worst || __atomic_load_n(&b->nr_dirty, __ATOMIC_RELAXED) >
				       __atomic_load_n(&worst->nr_dirty, __ATOMIC_RELAXED)))
			worst = b;
	}
	return worst;
}

/*
 * Dirty nodes are written back for memory when the caches are over the
 * budget and clean memory is not enough, and also when they are near it
 * (past the low watermark) with dirty nodes holding a quarter of it: a
 * reserve takes only its share from the key cache, and this is what gives
 * the rest back (otherwise every fill would evict an entry while dirty
 * nodes wait for journal reclaim).
 */
static bool dirty_over(struct tfs_fs *fs, size_t bytes)
{
	size_t budget = fs->cache.budget;

	return fs_shrinkers(fs) && bytes > budget - budget / 8 && dirty_bytes(fs) > budget / 4;
}

void tfs_btree_cache_check_budget(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;
	size_t bytes;

	if (!c->budget)
		return;
	/* Lock-free first: this runs after every read and commit. */
	bytes = approx_bytes(fs);
	if (bytes <= c->budget && !dirty_over(fs, bytes))
		return;
	bytes = shared_bytes(fs);
	if (bytes <= c->budget && !dirty_over(fs, bytes))
		return;
	/* One thread works on it; the others go on (the budget has slack for that). */
	if (pthread_mutex_trylock(&c->scan_lock))
		return;
	for (unsigned pass = 0; pass < 4; pass++) {
		bytes = shared_bytes(fs);
		if (bytes <= c->budget && !dirty_over(fs, bytes))
			break;
		/* Down to 7/8 of the budget, so that every read does not scan. */
		size_t target = c->budget / 8 * 7, over = bytes > target ? bytes - target : 0;

		if (bytes > c->budget) {
			shrink_to(fs, bytes, target);
			bytes = shared_bytes(fs);
			if (bytes <= c->budget && !dirty_over(fs, bytes))
				break;
		}
		/*
		 * Clean memory is not enough: write back the tree with most
		 * dirty nodes, when dirty nodes (of all trees: spread over
		 * several, no one tree holds most of them) are half the excess;
		 * the next pass frees them and writes back the next tree.
		 */
		struct tfs_btree *worst = most_dirty_tree(fs);

		if (!worst || dirty_bytes(fs) < over / 2)
			continue; /* mostly accessed objects: the next pass evicts them */
		__atomic_add_fetch(&c->nr_writeback_for_memory, 1, __ATOMIC_RELAXED);
		tfs_btree_checkpoint(worst);
	}
	pthread_mutex_unlock(&c->scan_lock);
}

void tfs_btree_cache_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;

	pthread_mutex_lock(&c->lock);
	prt_printf(out, "node cache:\n");
	printbuf_indent_add(out, 2);
	prt_printf(out, "nodes:\t%llu (%llu on the LRU, %u spare, reserve %u, %zu bytes each)\n",
		   (unsigned long long)__atomic_load_n(&c->nr_nodes, __ATOMIC_RELAXED),
		   (unsigned long long)c->nr_lru, c->nr_free, c->reserve, c->node_bytes);
	prt_str(out, "memory:\t");
	prt_units_u64(out, cache_bytes(c));
	prt_str(out, " (max ");
	prt_units_u64(out, c->max_bytes);
	prt_str(out, ", budget ");
	if (c->budget)
		prt_units_u64(out, c->budget);
	else
		prt_str(out, "none");
	prt_str(out, ")\n");
	prt_printf(out, "allocs, frees:\t%llu, %llu\n", (unsigned long long)c->nr_allocs,
		   (unsigned long long)c->nr_frees);
	prt_printf(
		out, "scans:\t%llu (freed %llu nodes; write-backs for memory %llu)\n",
		(unsigned long long)c->nr_scans, (unsigned long long)c->nr_scan_freed,
		(unsigned long long)__atomic_load_n(&c->nr_writeback_for_memory, __ATOMIC_RELAXED));
	prt_printf(out,
		   "not freed:\tdirty %llu, locked %llu, accessed %llu, reserve %llu, "
		   "children %llu\n",
		   (unsigned long long)c->not_freed_dirty, (unsigned long long)c->not_freed_locked,
		   (unsigned long long)c->not_freed_accessed,
		   (unsigned long long)c->not_freed_reserve,
		   (unsigned long long)c->not_freed_children);
	printbuf_indent_sub(out, 2);
	pthread_mutex_unlock(&c->lock);
}
