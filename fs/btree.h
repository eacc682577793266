/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_H
#define TFS_FS_BTREE_H

/*
 * Btrees and transactions: the storage engine under the filesystem.
 *
 * A filesystem (struct tfs_fs, fs/fs.h) has one btree per enum tfs_btree_id,
 * each an ordered map from struct tfs_bpos to one key (fs/bkey.h).  This is
 * the whole interface the rest of fs/ uses to read and change them.
 *
 * Reading: tfs_btree_lookup() and iterators hand out *copies* of keys, so
 * a key a caller holds never changes or goes away under it, whatever other
 * threads commit or the caches evict.  Every single read sees a committed
 * state: all of a transaction's updates or none of them.
 *
 * Changing: a transaction (struct tfs_btree_trans) queues updates (insert or
 * overwrite a key, or delete a position, in any btrees) and commits them
 * atomically: one journal reservation, every key journaled in one entry,
 * then applied to the in-memory btrees so that no reader sees some and not
 * others.  Updates apply in the order they were queued (a later update of
 * the same position wins).  Reads do not see the transaction's own queued
 * updates.  Commit returns the journal seq of the entry holding the
 * updates: the commit is durable once tfs_journal_flush_seq(seq) returned 0
 * (fs/fs.h: tfs_fs_flush_seq()).
 *
 * What a commit checks and in which order: everything that can fail (memory
 * for the updates and for node splits, the filesystem being writable) is
 * settled before the journal reservation is taken, so nothing can fail
 * after it: an update is never half applied.  Journal waits (blocked,
 * journal_full, pin_full) are waited out, never returned, unless the
 * caller asked for TFS_TRANS_NONBLOCK.
 *
 * Isolation: a commit does not check that what the transaction read is
 * unchanged.  Read-modify-write sequences that must not interleave (two
 * creates of one name, a rename against an unlink) are serialized by the
 * caller (fs/ holds its inode locks across read and commit).
 *
 * Durability rules the engine keeps (see fs/btree_write.c):
 *  - A node is written only once the journal is durable up to the newest
 *    seq whose keys it holds, so a replayed journal prefix never meets a
 *    node from its future.
 *  - Nodes are written copy-on-write to newly allocated space, never over
 *    the only copy; the space of an old copy is reused only after the
 *    commit that stopped referring to it is durable.
 *  - Replay (at open) applies every journaled key from last_seq on over the
 *    trees found on disk; applying a key twice is harmless, so a crash
 *    during replay replays again to the same state.
 *
 * Errors are codes: -TFS_ERR_erofs_journal class when the filesystem cannot
 * be changed, -ENOMEM, -TFS_ERR_btree_node_read / btree_node_invalid when a
 * node cannot be read or fails validation (the message names btree, level
 * and node location), journal errors as journal.h says.
 */

#include <stdbool.h>

#include "fs/bkey.h"
#include "lib/types.h"

struct printbuf;
struct tfs_fs;

/* --- reading --- */

/*
 * Copies the key at exactly pos of btree id into *out.  0, -ENOENT when
 * there is none, or an error reading a node.
 */
int tfs_btree_lookup(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bpos pos,
		     struct tfs_bkey_buf *out);

/*
 * An iterator over the keys of one btree with positions in [start, end]
 * (both inclusive).  Keys are copies, valid until the next call on the
 * iterator.  Between calls the iterator holds no lock: keys committed
 * meanwhile are seen or not depending on where they fall relative to the
 * iterator's position, and a key is never returned twice by next().
 */
struct tfs_btree_iter {
	struct tfs_fs *fs;
	enum tfs_btree_id id;
	struct tfs_bpos pos; /* where peek looks from */
	struct tfs_bpos start, end;
	struct tfs_bkey_buf k; /* the key last returned */
	/* The engine's: a batch of keys copied from one leaf, for next(). */
	void *batch;
	unsigned batch_nr, batch_idx, batch_size;
	u64 batch_cookie;
};

void tfs_btree_iter_init(struct tfs_btree_iter *iter, struct tfs_fs *fs, enum tfs_btree_id id,
			 struct tfs_bpos start, struct tfs_bpos end);
void tfs_btree_iter_exit(struct tfs_btree_iter *iter);

/*
 * The first key at or after iter->pos (and <= end): 0 with *k set, 0 with
 * *k NULL when there is none, or a negative code.  Does not move.
 */
int tfs_btree_iter_peek(struct tfs_btree_iter *iter, const struct tfs_bkey **k);

/* Moves past the key last returned (or iter->pos) and peeks. */
int tfs_btree_iter_next(struct tfs_btree_iter *iter, const struct tfs_bkey **k);

/* The last key before iter->pos (and >= start), and moves to it; *k NULL at the start. */
int tfs_btree_iter_prev(struct tfs_btree_iter *iter, const struct tfs_bkey **k);

/* Moves to pos (clamped to [start, end]). */
void tfs_btree_iter_set_pos(struct tfs_btree_iter *iter, struct tfs_bpos pos);

/* --- transactions --- */

enum tfs_trans_flags {
	/* Return the journal's EAGAIN-class reason instead of waiting. */
	TFS_TRANS_NONBLOCK = 1 << 0,
	/* Journal reclaim's own commits (node write-back, key cache flush): may use the
	 * journal's reserve and must never wait on reclaim. */
	TFS_TRANS_RESERVED = 1 << 1,
	/* The key cache's reclaim writing a dirty entry into the btree
	 * (fs/btree_key_cache.h): the key goes to the leaf, the entry becomes
	 * clean; fails with -TFS_ERR_key_cache_flush_raced if the entry changed. */
	TFS_TRANS_KEY_CACHE_FLUSH = 1 << 2,
};

struct tfs_trans_roots;

struct tfs_trans_update {
	enum tfs_btree_id id;
	struct tfs_bkey *k; /* in the transaction's memory; type deleted removes */
	bool old_data;	    /* tfs_trans_update_old_data() */
};

struct tfs_btree_trans {
	struct tfs_fs *fs;
	struct tfs_trans_update *updates;
	unsigned nr_updates, size_updates;
	/* Key memory (u64 words), grown as needed. */
	__le64 *mem;
	size_t mem_used, mem_size;
	u64 seq; /* after a successful commit: the journal seq holding it */
	/* A checkpoint's commit only (fs/btree_internal.h); NULL otherwise. */
	const struct tfs_trans_roots *roots;
};

void tfs_trans_init(struct tfs_btree_trans *trans, struct tfs_fs *fs);
/* Frees the transaction's memory (queued updates are dropped). */
void tfs_trans_exit(struct tfs_btree_trans *trans);
/* Drops queued updates, keeps the memory. */
void tfs_trans_reset(struct tfs_btree_trans *trans);

/* Queues an insert or overwrite of k (copied) in btree id.  0 or -ENOMEM. */
int tfs_trans_update(struct tfs_btree_trans *trans, enum tfs_btree_id id, const struct tfs_bkey *k);

/*
 * As tfs_trans_update(), for a key whose value refers only to data an older
 * committed key already refers to, none written for it (a piece of an
 * existing extent, cut and re-keyed).  Journaled in a sub-entry flagged
 * old_data (journal_format.h), in queue order with the rest, so the check of
 * a post-flush window at replay does not read that data back.
 */
int tfs_trans_update_old_data(struct tfs_btree_trans *trans, enum tfs_btree_id id,
			      const struct tfs_bkey *k);

/* Queues the removal of whatever is at pos in btree id (nothing there is fine). */
int tfs_trans_delete(struct tfs_btree_trans *trans, enum tfs_btree_id id, struct tfs_bpos pos);

/*
 * Commits the queued updates atomically (see the top of this file) and
 * resets the transaction.  On success trans->seq (and *seq when not NULL)
 * is the journal seq holding them.  A transaction with nothing queued
 * commits nothing and returns 0 with seq 0.  On failure nothing was
 * applied and the updates stay queued.  A transaction's keys go into one
 * journal entry: more than an entry holds (a quarter bucket, 16..64 KiB)
 * is -TFS_ERR_journal_entry_too_big.  A read-only filesystem gives
 * -TFS_ERR_fs_read_only, a halted journal -TFS_ERR_journal_halted (both
 * EROFS class).
 */
int tfs_trans_commit(struct tfs_btree_trans *trans, unsigned flags, u64 *seq);

/* --- whole-tree operations --- */

/*
 * Writes back every dirty node of every btree (and the key cache), records
 * the new roots, and makes it durable.  What tfs_fs_stop() and syncfs use.
 */
int tfs_btree_write_all(struct tfs_fs *fs);

/*
 * Walks every node of btree id (reading those not in memory), validating
 * each (checksum, key order, bounds, child pointers agree with children).
 * For fsck and tests; 0 or the first error, printed where found.
 */
int tfs_btree_verify(struct tfs_fs *fs, enum tfs_btree_id id);

/*
 * Calls fn for the pointer (fs/bkey.h: struct tfs_btree_ptr, each replica's
 * location) of the root and of every node whose parent is in memory (all of
 * them after tfs_btree_verify()), and of the nodes dropped since the last
 * checkpoint (the durable tree still has them: their space is freed by the
 * next one); a pointer with nr_ptrs 0 is a node not written yet.  For fsck:
 * space used by nodes.  Stops at fn's nonzero return.
 */
typedef int (*tfs_btree_node_loc_fn)(void *ctx, const struct tfs_btree_ptr *ptr);
int tfs_btree_node_locations(struct tfs_fs *fs, enum tfs_btree_id id, tfs_btree_node_loc_fn fn,
			     void *ctx);

/* Per-btree counters (keys, nodes by level, height, splits, merges, ...). */
void tfs_btree_to_text(struct printbuf *out, struct tfs_fs *fs, enum tfs_btree_id id);

/*
 * The node cache: nodes and memory (with the high-water mark and the
 * budget), scans and what they freed, and per reason the nodes a scan could
 * not free (dirty, locked, accessed, reserve).
 */
void tfs_btree_cache_to_text(struct printbuf *out, struct tfs_fs *fs);

/*
 * The node cache's shrinker operations (lib/shrinker.h), in 4 KiB pages:
 * nodes are large, so a scan is asked for pages, frees whole nodes (at
 * least one), and reports pages freed; the USDT probe btree_cache_scan
 * (nr_to_scan_pages, nr_to_scan_nodes, can_free_nodes, ret) shows both.
 * Oldest first: nodes in the order they entered the cache; a node used
 * since it entered or since the last pass gets a second chance (the scan
 * clears its accessed bit and moves it to the back).  Only clean, unlocked
 * nodes without children in memory are freed (never a root).  Count: pages
 * that could be freed now (an estimate).  The cache also keeps itself
 * within opts.cache_budget after every read and commit, writing back the
 * tree with most dirty nodes when clean ones are not enough.
 */
unsigned long tfs_btree_cache_count(struct tfs_fs *fs);
unsigned long tfs_btree_cache_scan(struct tfs_fs *fs, unsigned long nr_to_scan_pages);

#endif /* TFS_FS_BTREE_H */
