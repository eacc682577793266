// SPDX-License-Identifier: GPL-2.0
/*
 * The node cache: node memory, a reserve of spare nodes for splits, and
 * (below) the scan that frees clean nodes when the cache is over budget.
 *
 * A node's memory is one block: the struct, its heap (the on-disk
 * capacity) and its offsets; an interior node also has a child array
 * (allocated the first time the block serves an interior node, kept with
 * it).  Spare nodes sit on the free list; the first `reserve` of them are
 * never given back to malloc, so a split in a commit finds memory even
 * when malloc fails after a shrink.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

#define BTREE_CACHE_RESERVE 16

static size_t align8(size_t v)
{
	return (v + 7) & ~(size_t)7;
}

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
	c->budget = fs->opts.cache_budget;
	for (unsigned i = 0; i < c->reserve; i++) {
		struct tfs_bnode *n = tfs_bnode_alloc(fs, 0);

		if (!n)
			return -ENOMEM;
		tfs_bnode_free(fs, n);
	}
	return 0;
}

static void bnode_release(struct tfs_btree_cache *c, struct tfs_bnode *n)
{
	if (n->child)
		c->nr_child_arrays--;
	free(n->child);
	free(n);
	c->nr_nodes--;
}

void tfs_btree_cache_exit(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;

	while (c->free) {
		struct tfs_bnode *n = c->free;

		c->free = n->next;
		bnode_release(c, n);
	}
	c->nr_free = 0;
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->scan_lock);
}

static void cache_note_bytes(struct tfs_btree_cache *c)
{
	u64 bytes = c->nr_nodes * c->node_bytes + c->nr_child_arrays * c->child_bytes;

	if (bytes > c->max_bytes)
		c->max_bytes = bytes;
}

struct tfs_bnode *tfs_bnode_alloc(struct tfs_fs *fs, unsigned level)
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

	if (!n) {
		char *p = malloc(c->node_bytes);

		if (!p)
			return NULL;
		n = (struct tfs_bnode *)p;
		memset(n, 0, sizeof(*n));
		n->heap = (__le64 *)(p + align8(sizeof(struct tfs_bnode)));
		n->offs = (u16 *)(p + align8(sizeof(struct tfs_bnode)) + (size_t)cap * 8);
		pthread_mutex_lock(&c->lock);
		c->nr_nodes++;
		cache_note_bytes(c);
		pthread_mutex_unlock(&c->lock);
	}
	if (level && !n->child) {
		n->child = calloc(c->max_children, sizeof(n->child[0]));
		if (!n->child) {
			tfs_bnode_free(fs, n);
			return NULL;
		}
		pthread_mutex_lock(&c->lock);
		c->nr_child_arrays++;
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
	pthread_mutex_unlock(&c->lock);
	return n;
}

void tfs_bnode_free(struct tfs_fs *fs, struct tfs_bnode *n)
{
	struct tfs_btree_cache *c = &fs->cache;

	pthread_mutex_lock(&c->lock);
	c->nr_frees++;
	if (c->nr_free < c->reserve) {
		n->next = c->free;
		c->free = n;
		c->nr_free++;
		n = NULL;
	} else {
		bnode_release(c, n);
	}
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

size_t tfs_btree_cache_bytes(struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;
	size_t bytes;

	pthread_mutex_lock(&c->lock);
	bytes = c->nr_nodes * c->node_bytes + c->nr_child_arrays * c->child_bytes;
	pthread_mutex_unlock(&c->lock);
	return bytes;
}

void tfs_btree_cache_check_budget(struct tfs_fs *fs)
{
}

void tfs_btree_cache_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	struct tfs_btree_cache *c = &fs->cache;

	pthread_mutex_lock(&c->lock);
	prt_printf(out, "node cache:\n");
	printbuf_indent_add(out, 2);
	prt_printf(out, "nodes:\t%llu (%u spare, reserve %u)\n", (unsigned long long)c->nr_nodes,
		   c->nr_free, c->reserve);
	prt_str(out, "memory:\t");
	prt_units_u64(out, c->nr_nodes * c->node_bytes + c->nr_child_arrays * c->child_bytes);
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
	prt_printf(out, "scans:\t%llu (freed %llu nodes; write-backs for memory %llu)\n",
		   (unsigned long long)c->nr_scans, (unsigned long long)c->nr_scan_freed,
		   (unsigned long long)c->nr_writeback_for_memory);
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
