/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_TYPES_H
#define TFS_FS_BTREE_TYPES_H

/*
 * In-memory btrees: nodes, trees and the node cache.  The API is
 * fs/btree.h; the node format fs/btree_format.h.
 *
 * Locking: every field of a tree and of its nodes is protected by the
 * tree's six lock (struct tfs_btree.lock, lib/six.h; docs/engine.md
 * "Locking"): readers (lookups, iterators) hold read; a commit holds
 * intent while it plans, checks that every update fits and takes its
 * journal reservation, and write only while it changes nodes (a split
 * during the fit, the apply); write-back's snapshot holds intent and write,
 * and the cache scan intent on one node's tree, write only to free the node.
 * So a field changes only under write, and intent holders and readers may
 * read it at the same time.  Exceptions say so: `accessed` is set by
 * readers (atomically), a child pointer that was NULL (not in memory) is
 * filled by a reader or an intent holder with a compare-and-swap (both
 * may read the same node), and mod_seq is read without the lock by
 * iterators.
 */

#include <pthread.h>
#include <stdbool.h>

#include "fs/bkey.h"
#include "fs/btree_format.h"
#include "journal/journal_types.h"
#include "lib/six.h"
#include "lib/types.h"

struct tfs_fs;
struct tfs_btree;

/* Where a node's copies are: one location per replica. */
struct tfs_btree_loc {
	unsigned nr; /* 0: nowhere (never written) */
	struct {
		u32 dev;
		u64 offset;
	} ptrs[TFS_BTREE_PTR_MAX_REPLICAS];
};

/*
 * A node in memory.  Keys live unsorted in `heap` (appended; overwritten or
 * deleted keys leave garbage until a compaction), and `offs` lists them in
 * position order as word offsets into the heap: an insert appends the key
 * and moves two-byte offsets, never key bytes.  live_u64s counts the words
 * of the keys listed, which is what the on-disk node needs (so "fits" means
 * live_u64s + new <= cap).  An interior node's `child` runs parallel to
 * offs: the child in memory, or NULL when it is only on disk (its btree_ptr
 * says where).
 *
 * An interior node's btree_ptr keys always have room for btree_ptr_replicas
 * pointers, the superblock's metadata replicas (nr_ptrs says how many are
 * set; 0 for a child never written), so writing a node back never changes
 * the size of its parent's keys, and a degraded open keeps the pointers to
 * the missing members.
 */
struct tfs_bnode {
	/*
	 * The node cache's LRU (btree_cache.c; under the cache's lock, not the
	 * tree's): tree is set while the node is on it, from the allocation
	 * for a tree to the free, and lru_prev/lru_next link it in the order
	 * nodes entered the cache (a second chance moves a node to the back).
	 */
	struct tfs_btree *tree;
	struct tfs_bnode *lru_prev, *lru_next;
	u8 level;
	bool dirty;    /* changed since it was last serialized */
	bool writing;  /* serialized into a checkpoint that is not durable yet */
	bool dead;     /* freed from the tree while writing; freed when that ends */
	bool degraded; /* its last write-back left fewer good copies than it wrote */
	u8 accessed;   /* set by readers (atomic); cleared by the cache scan */
	struct tfs_bpos min_key, max_key;
	u64 journal_seq;	       /* newest journal seq whose keys it holds */
	struct tfs_btree_loc disk;     /* the copy the durable tree refers to */
	struct tfs_btree_loc new_disk; /* the copy being written (when writing) */
	u64 disk_seq, new_seq;	       /* node seqs of those copies */
	u32 disk_csum, new_csum;       /* and their checksums */

	u32 cap; /* words of keys it may hold (the on-disk capacity) */
	u32 heap_used, live_u64s, nr_keys;
	u16 *offs;		  /* [nr_keys] word offsets into heap, sorted by position */
	struct tfs_bnode **child; /* level > 0: [nr_keys] */
	__le64 *heap;		  /* cap words */
	struct tfs_bnode *next;	  /* the cache's free list / dead list */
};

static inline struct tfs_bkey *tfs_bnode_key(const struct tfs_bnode *n, unsigned i)
{
	return (struct tfs_bkey *)(n->heap + n->offs[i]);
}

/* Locations waiting for the next durable checkpoint to be freed. */
struct tfs_btree_free_list {
	struct tfs_btree_loc *locs;
	unsigned nr, size;
};

/*
 * Why a commit dropped every lock it held and started again (counted on
 * the tree named: the one whose lock was busy, else the commit's first):
 *  lock_intent:   the intent lock of a later tree in its order was held
 *                 (a trylock failed; it waits for that lock, unlocked, first)
 *  journal_wait:  the journal reservation had to wait (never under a lock)
 *  trigger_grew:  the alloc trigger's keys outgrew the reservation taken
 *  journal_order: its reservation was older than one applied meanwhile
 *  roots_seq:     a checkpoint's root entry older than the last one filled
 */
#define TFS_BTREE_RESTART_REASONS() \
	x(lock_intent) x(journal_wait) x(trigger_grew) x(journal_order) x(roots_seq)

enum tfs_btree_restart_reason {
#define x(n) TFS_BTREE_RESTART_##n,
	TFS_BTREE_RESTART_REASONS()
#undef x
	TFS_BTREE_RESTART_NR
};

struct tfs_btree_counters {
	u64 commits; /* transactions that touched this tree */
	u64 keys_applied;
	u64 keys_replayed;
	u64 splits, merges;
	u64 height_grows, height_shrinks;
	u64 max_height; /* the tallest the tree was */
	u64 compactions;
	u64 lookups, iter_refills;
	u64 checkpoints, checkpoint_errors, nodes_written, nodes_read, node_read_errors;
	/* Commits that dropped their locks and started over, by reason (fs/btree_update.c). */
	u64 restarts[TFS_BTREE_RESTART_NR]; /* atomic */
};

struct tfs_btree {
	struct tfs_fs *fs;
	enum tfs_btree_id id;
	struct tfs_six_lock lock;
	struct tfs_bnode *root;
	u64 mod_seq;	    /* bumped by every change; read unlocked (atomic) */
	u64 nr_keys;	    /* keys in the tree, when nr_keys_known */
	bool nr_keys_known; /* false from an open until tfs_btree_verify() counted them */
	u64 nr_nodes[TFS_BTREE_MAX_DEPTH];
	u64 nr_dirty;	     /* nodes with dirty set */
	u64 max_journal_seq; /* newest seq applied (since the last snapshot: see write-back) */
	/* The reservation of the last commit applied: commits apply in journal order. */
	u64 last_res_seq;
	u32 last_res_offset;

	/*
	 * The journal must keep every seq whose keys are not in a durable
	 * checkpoint: `pin` holds the oldest seq applied since the last
	 * snapshot, `ckpt_pin` the seqs of the checkpoint in flight.
	 */
	struct tfs_journal_entry_pin pin;
	struct tfs_journal_entry_pin ckpt_pin;
	pthread_mutex_t ckpt_lock; /* one checkpoint at a time (never taken under lock) */
	/* The root pointer of the newest durable-ready checkpoint (what root entries log). */
	struct tfs_bkey_buf root_key;
	bool have_root_key;
	struct tfs_btree_free_list pending_free; /* freed after the next checkpoint */
	struct tfs_bnode *dead;			 /* freed while writing */
	unsigned ckpt_failures;			 /* checkpoints failed in a row */
	__le64 *scratch;			 /* node compaction (cap words) */
	struct tfs_btree_counters c;
};

/* The node cache: every node's memory comes from here. */
struct tfs_btree_cache {
	pthread_mutex_t lock;	/* the free list, the LRU and the counters below */
	struct tfs_bnode *free; /* spare nodes: the split reserve first */
	unsigned nr_free;
	/* Every node allocated for a tree (in it, dead or about to be installed), oldest first. */
	struct tfs_bnode *lru_head, *lru_tail;
	u64 nr_lru;
	unsigned reserve;    /* spare nodes kept for splits */
	u64 nr_nodes;	     /* allocated: in trees, dead and spare */
	u64 nr_child_arrays; /* interior nodes' child arrays allocated */
	size_t node_bytes;   /* memory per node */
	size_t child_bytes;  /* memory per child array */
	unsigned max_keys;   /* offs entries per node */
	unsigned max_children;
	u64 ckpt_bytes;		   /* checkpoints' write buffers allocated now */
	size_t budget;		   /* bytes; 0: no budget */
	pthread_mutex_t scan_lock; /* one budget check at a time */
	/* Counters. */
	u64 nr_allocs, nr_frees, nr_scans, nr_scan_freed, nr_writeback_for_memory;
	u64 not_freed_dirty, not_freed_locked, not_freed_accessed, not_freed_reserve;
	u64 not_freed_children;
	u64 max_bytes; /* high-water mark */
};

#endif /* TFS_FS_BTREE_TYPES_H */
