/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_INTERNAL_H
#define TFS_FS_BTREE_INTERNAL_H

/*
 * Shared between the engine's files (btree_node.c, btree_cache.c,
 * btree_iter.c, btree_update.c, btree_io.c, btree_write.c, fs.c); not for
 * users of fs/btree.h.  Functions named *_locked expect the tree's lock
 * held for write (intent and write) unless they say "shared" (read, or
 * intent: both only read the tree).
 */

#include "fs/btree.h"
#include "fs/btree_key_cache.h"
#include "fs/btree_types.h"
#include "fs/fs_types.h"

struct printbuf;

/*
 * A checkpoint's commit (btree_write.c; tfs_btree_trans.roots): with the
 * transaction's keys, in the same journal entry, the root entry that makes
 * b's new root durable (every root, root_key for b) and the btree alloc
 * keys for the node copies the new tree takes (set) and gives up (clear),
 * queued by tfs_alloc_nodes_trigger() under the alloc btree's lock.
 * fsck's repairs of node space use it too (b NULL, guard): the commit fails
 * with -TFS_ERR_fsck_raced_writeback, changing nothing, when a write-back
 * is running or started since fs->ckpt_started was ckpt_started.
 */
struct tfs_trans_roots {
	struct tfs_btree *b;
	const struct tfs_bkey *root_key; /* NULL: node space keys only, no root entry */
	const struct tfs_btree_loc *set, *clear;
	unsigned nr_set, nr_clear;
	bool guard;
	u64 ckpt_started;
};

/* Words a root entry takes in a reservation (every tree's root, largest keys). */
unsigned tfs_btree_roots_u64s(void);
/*
 * Fills a root entry into res, with roots_lock held and res.seq not older
 * than fs->roots_seq; with b, b's root key becomes new_root first.  Moves
 * the roots pin to res.seq.
 */
struct tfs_journal_res;
void tfs_btree_roots_fill_locked(struct tfs_fs *fs, struct tfs_journal_res *res,
				 struct tfs_btree *b, const struct tfs_bkey *new_root);

/* --- nodes (btree_node.c) --- */

/*
 * Words of an interior node's btree_ptr key in memory: room for every
 * replica (btree_ptr_replicas, not metadata_replicas: in a degraded open a
 * node read back has pointers to the missing members too).
 */
static inline unsigned tfs_btree_ptr_key_u64s(const struct tfs_fs *fs)
{
	return TFS_BKEY_U64s + tfs_btree_ptr_val_bytes(fs->btree_ptr_replicas) / 8;
}

/* Index of the first key >= pos (nr_keys when none). */
unsigned tfs_bnode_lower_bound(const struct tfs_bnode *n, struct tfs_bpos pos);
static inline bool tfs_bnode_fits(const struct tfs_bnode *n, unsigned u64s)
{
	return n->live_u64s + u64s <= n->cap;
}
/* Inserts k at index idx (the caller checked it fits and the order). */
void tfs_bnode_insert(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
		      const struct tfs_bkey *k, struct tfs_bnode *child);
/* Replaces the key at idx with k (same position; the caller checked it fits). */
void tfs_bnode_replace(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
		       const struct tfs_bkey *k);
void tfs_bnode_remove(struct tfs_bnode *n, unsigned idx);
/* Empties n (keys and children dropped). */
void tfs_bnode_reset(struct tfs_bnode *n);
/*
 * Where to split n so that its keys plus the incoming ones (sorted
 * positions, one each, in_u64s words each) divide about in half by size:
 * n->min_key <= result < n->max_key.
 */
struct tfs_bpos tfs_bnode_split_pos(const struct tfs_bnode *n, const struct tfs_bpos *in_pos,
				    const unsigned *in_u64s, unsigned nr_in);
/* A root leaf covering everything (counts it). */
struct tfs_bnode *tfs_btree_new_root_leaf(struct tfs_btree *b);

/* Marks n dirty (and counts it). */
void tfs_bnode_set_dirty(struct tfs_btree *b, struct tfs_bnode *n);

/* A path from the root down to a level: node and key index per level. */
struct tfs_btree_path {
	struct tfs_bnode *n[TFS_BTREE_MAX_DEPTH];
	unsigned idx[TFS_BTREE_MAX_DEPTH];
	unsigned root_level;
};

/*
 * Walks from the root to the node at `level` covering pos, reading nodes
 * that are not in memory.  Any mode of the tree's lock will do (write
 * says which the caller holds: false read, true intent or write); a child
 * read is installed with a compare-and-swap, since readers and the intent
 * holder may read the same one at once.  0 or a node read error (printed).
 */
int tfs_btree_walk(struct tfs_btree *b, struct tfs_bpos pos, unsigned level,
		   struct tfs_btree_path *path, bool write);

/*
 * Splits the node at `level` covering pos so that keys <= split_pos go to a
 * new left node (the parent gets room first, the root grows a level when
 * needed).  Needs n->min_key <= split_pos < n->max_key.  0 or -ENOMEM or a
 * read error; the tree's contents are unchanged either way.
 */
int tfs_btree_split_locked(struct tfs_btree *b, struct tfs_bpos pos, unsigned level,
			   struct tfs_bpos split_pos);

/*
 * After keys were removed around pos: merges the leaf there with a sibling
 * when both fit in two thirds of a node, up the tree, and shrinks the root.
 * Never fails (siblings not in memory are simply not merged).
 */
void tfs_btree_maybe_merge_locked(struct tfs_btree *b, struct tfs_bpos pos);

/*
 * Puts k (type deleted removes) into its leaf, splitting as needed: for
 * replay at open, not for commits (which check the fit first).
 */
int tfs_btree_insert_split_locked(struct tfs_btree *b, const struct tfs_bkey *k);

/* loc is freed after the next durable checkpoint. */
void tfs_btree_pending_free_add(struct tfs_btree *b, const struct tfs_btree_loc *loc);
/* A node no longer in the tree: its disk copy is freed after the next checkpoint. */
void tfs_bnode_drop_locked(struct tfs_btree *b, struct tfs_bnode *n);

/*
 * fsck: a node no copy of which reads or verifies (-TFS_ERR_btree_node_read
 * or btree_node_invalid) replaced by an empty one of the same range (an
 * interior node: an empty subtree of its height); the old pointer's
 * locations, the range and the read's error as said to fn.
 */
struct tfs_btree_lost_leaf {
	enum tfs_btree_id id;
	/*
	 * The lost node's: 0 a leaf; above, an interior node (its whole subtree
	 * lost; the alloc btree's: the whole tree replaced, fs/fs.c).
	 */
	unsigned level;
	struct tfs_btree_loc loc;
	struct tfs_bpos min_key, max_key;
	int err;
	unsigned kept; /* the key cache's dirty keys of its range, put back in */
};
typedef void (*tfs_btree_lost_leaf_fn)(void *ctx, const struct tfs_btree_lost_leaf *l);

/*
 * Replaces child idx of interior node n of b (it cannot be read or trusted:
 * err) with an empty subtree of the child's height over the range n gives
 * it: a leaf for a leaf; for an interior child one node per level down to
 * an empty leaf, each with the one key of the node below, so every leaf
 * stays at the same depth.  The new nodes and n are dirty, never written
 * (nr_ptrs 0, as a split's new node); the old copies wait on pending_free
 * (the durable tree reaches them); the nodes under a lost interior child
 * cannot be found and nothing reaches them any more (fsck clears their
 * btree alloc keys).  The key cache forgets the range (a dirty entry's key
 * goes into the new leaf).  Said to fn before anything else is tried.
 * b's lock held exclusive.  0 or -ENOMEM (nothing changed).
 */
int tfs_btree_replace_lost_child_locked(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
					int err, tfs_btree_lost_leaf_fn fn, void *ctx);

/*
 * Reads every node of btree id (as tfs_btree_verify()) and replaces each
 * node that cannot be read or trusted with an empty one covering its
 * range (e2fsck's "clear the block, let the passes repair the rest";
 * bcachefs's topology repair drops such a node the same way): the keys it
 * held are lost, the tree is whole again (tfs_btree_replace_lost_child_locked();
 * a leaf by an empty leaf, an interior node by an empty subtree).  A
 * read-only filesystem keeps the replacement in memory, so fsck -n checks
 * the rest as -y would leave it.  The tree's key count is unknown again
 * (verify recounts).  The open reads every interior node (and fsck's open
 * replaces a lost one there), so the nodes met here are leaves, unless an
 * interior node was evicted and then failed.
 * A node with a copy on a missing member is not replaced (its read error
 * is returned: it is away, not lost).
 * Each replacement is said to fn (before any other is tried).  Returns the
 * number of nodes replaced, or a negative code (another error, printed).
 */
int tfs_btree_replace_bad_leaves(struct tfs_fs *fs, enum tfs_btree_id id, tfs_btree_lost_leaf_fn fn,
				 void *ctx);

/*
 * Before a node is given up: whether a read of a node of b that failed
 * with err (a read error or a node failing its checks) is worth another
 * try, the attempt-th (from 0).  A read error may pass (a loose cable, a
 * busy member); the first two tries wait 50 then 200 ms, then it is lost.
 * Says so on stderr.
 */
bool tfs_btree_read_again(struct tfs_btree *b, int err, unsigned attempt);

/*
 * Whether a copy of loc is on a member that is missing (a degraded open):
 * such a node is away, not lost, and never replaced.
 */
static inline bool tfs_btree_loc_on_missing(const struct tfs_fs *fs,
					    const struct tfs_btree_loc *loc)
{
	for (unsigned r = 0; r < loc->nr; r++)
		if (loc->ptrs[r].dev < fs->nr_devices && !fs->devs[loc->ptrs[r].dev].present)
			return true;
	return false;
}

/* --- cache (btree_cache.c) --- */

int tfs_btree_cache_init(struct tfs_fs *fs);
void tfs_btree_cache_exit(struct tfs_fs *fs);
/*
 * A node's memory (empty) for tree b; NULL on ENOMEM.  May use the split
 * reserve.  The node enters the cache's LRU at the back (the newest): the
 * caller installs it in b under b's lock (held in either mode) or frees it.
 */
struct tfs_bnode *tfs_bnode_alloc(struct tfs_btree *b, unsigned level);
void tfs_bnode_free(struct tfs_fs *fs, struct tfs_bnode *n);
/* Frees every node of the tree (stop). */
void tfs_btree_free_nodes(struct tfs_btree *b);
/* Memory the cache holds now (bytes). */
size_t tfs_btree_cache_bytes(struct tfs_fs *fs);
/*
 * Before taking a tree lock for an operation that may read (or split) up to
 * nr_nodes nodes: makes room for them under the budget shared with the key
 * cache, so that the allocations under the lock, where the scan cannot free
 * that tree's nodes, find it.  Lock-free unless the caches are within
 * nr_nodes nodes of the budget.  No lock held.
 */
void tfs_btree_cache_make_room(struct tfs_fs *fs, unsigned nr_nodes);
/* Nodes a read makes room for (a path: deeper trees than this are not met in practice). */
#define TFS_BTREE_READ_ROOM 4
/* After a commit or a read: keeps the cache within its budget.  Never under a tree lock. */
void tfs_btree_cache_check_budget(struct tfs_fs *fs);
/* Takes the memory now (checkpoint copies included) into the high-water mark. */
void tfs_btree_cache_note_peak(struct tfs_fs *fs);

/* --- node I/O (btree_io.c) --- */

/*
 * Reads the child at index idx of interior node n (its btree_ptr says
 * where and what it must be), trying each replica; the caller holds the
 * tree's lock (any mode).  0 with *ret set, or
 * -TFS_ERR_btree_node_read / btree_node_invalid (printed, naming the node).
 */
int tfs_btree_read_child(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
			 struct tfs_bnode **ret);

/* "btree extents level 0 node at 0x4a000" (dev:offset when several members). */
void tfs_btree_node_loc_to_text(struct printbuf *out, struct tfs_fs *fs, enum tfs_btree_id id,
				unsigned level, const struct tfs_btree_loc *loc);

/* --- roots and write-back (btree_write.c) --- */

/* Logs every btree's root in one journal entry (under roots_lock); its seq in *seq. */
int tfs_btree_log_roots(struct tfs_fs *fs, unsigned trans_flags, u64 *seq);
/*
 * Writes back every changed node of b (a checkpoint, docs/engine.md
 * "Write-back"): 0 once the new tree is durable and its root logged, or the
 * error (printed; the nodes stay dirty and are retried; after a few
 * failures in a row the journal is halted: read-only).
 */
int tfs_btree_checkpoint(struct tfs_btree *b);
/* The btree's dirty pin's flush callback. */
int tfs_btree_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq);
int tfs_btree_roots_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq);

/* --- init (btree_iter.c) --- */
int tfs_btrees_init(struct tfs_fs *fs);
void tfs_btrees_exit(struct tfs_fs *fs);

/*
 * The tree lock (lib/six.h), per tree: read for lookups and iterators,
 * intent for a commit's plan and fit, write (taken by the intent holder)
 * for changing nodes.  Acquisitions that had to wait are counted by mode,
 * with the time waited, in the lock (tfs_btree_to_text's "lock waits").
 * Exclusive is intent then write: for write-back's snapshot, verification
 * and the like, which change nodes from the start.
 */
static inline void tfs_btree_lock_exclusive(struct tfs_btree *b)
{
	tfs_six_lock_intent(&b->lock);
	tfs_six_lock_write(&b->lock);
}

static inline void tfs_btree_unlock_exclusive(struct tfs_btree *b)
{
	tfs_six_unlock_write(&b->lock);
	tfs_six_unlock_intent(&b->lock);
}

/* Counts a commit's restart on b (atomic: several commits may count at once). */
static inline void tfs_btree_count_restart(struct tfs_btree *b, enum tfs_btree_restart_reason r)
{
	__atomic_add_fetch(&b->c.restarts[r], 1, __ATOMIC_RELAXED);
}

#endif /* TFS_FS_BTREE_INTERNAL_H */
