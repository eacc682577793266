/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_KEY_CACHE_H
#define TFS_FS_BTREE_KEY_CACHE_H

/*
 * The key cache: hot keys of some btrees (the inodes btree) in an RCU hash
 * table (liburcu's cds_lfht), so that lookups of them take no btree lock
 * and updates to them do not dirty btree nodes (seeds 628a3ad2c2df and
 * 125907203cc9; bcachefs's btree_key_cache.c).
 *
 * An entry is one key of one btree, in one of three lists (under the
 * cache's lock):
 *  - clean: the key equals the btree's; in the hash table.
 *  - dirty: a newer key than the btree's, committed through the journal;
 *    the entry's journal pin holds the oldest seq of an update it holds
 *    that the btree does not, so reclaim cannot pass it before the key
 *    reaches the btree.  Dirty entries are never evicted or freed.
 *  - freed: out of the hash table, waiting for an RCU grace period (a
 *    reader may still be copying its key) before its memory is freed or
 *    reused.  Each is stamped with the grace-period sequence it waits for.
 *
 * Invariants:
 *  - An entry exists only for a position the btree holds a key at (a fill
 *    copies the btree's key; a delete of the position removes the entry in
 *    the same commit).  So the cache never holds a key the btree lacks, and
 *    iterating the btree with each key overlaid by its cached version sees
 *    every key (tfs_btree_key_cache_overlay()).
 *  - Updates are journaled like any other (the commit puts every key in its
 *    journal entry); an update of a cached key changes the entry instead of
 *    the leaf and pins its seq in the entry.
 *  - Reclaim (the pin's flush callback) writes a dirty entry's key into the
 *    btree with a TFS_TRANS_RESERVED | TFS_TRANS_KEY_CACHE_FLUSH commit.
 *    That commit journals the key again and marks the entry clean in the
 *    same btree-locked section that applies the key to the leaf; if an
 *    update changed the entry since the flush copied it, the commit fails
 *    (-TFS_ERR_key_cache_flush_raced, before its journal reservation) and
 *    the flush copies again.  So a flush never journals a key older than
 *    one already journaled after it, and replay ends with the newest key.
 *  - Readers (lookups, overlays) hold tfs_rcu_read_lock() while they touch
 *    entries, and a removed entry is freed or reused only after a grace
 *    period that started after its removal ended: the shrinker frees
 *    `freed` oldest first and stops at the first entry whose grace period
 *    has not passed (liburcu 0.13 has no poll API: a call_rcu per grace
 *    period advances the sequence the stamps are compared with).  A new
 *    entry reuses the oldest freed entry whose grace period passed before
 *    it allocates.
 *  - The shrinker scans `clean` oldest first with a second chance: an entry
 *    accessed since the last pass has its accessed bit cleared and goes to
 *    the back; one not accessed is evicted (moved to freed).
 *  - Every entry point registers the calling thread with liburcu
 *    (lib/rcu.h), so journal threads and FUSE workers are registered
 *    whenever they touch the cache; the daemon should still call
 *    tfs_rcu_thread_register() at the start of each worker thread.
 *
 * Locking order: btree locks, then the cache's lock, then the journal's.
 * Callers of lookup, overlay and flush_all hold no cache lock; fill and
 * the commit hooks are called under btree locks (see each).
 */

#include <stdbool.h>
#include <stddef.h>

#include "fs/bkey.h"
#include "fs/btree.h"
#include "lib/types.h"

struct printbuf;
struct tfs_journal;
struct tfs_shrinkers;
struct tfs_btree_key_cache;
struct kc_key;
struct kc_pin;

struct tfs_btree_key_cache_ops {
	/*
	 * Writes k into btree id (reclaim): a commit of k with
	 * TFS_TRANS_RESERVED | TFS_TRANS_KEY_CACHE_FLUSH.  0, the commit's
	 * -TFS_ERR_key_cache_flush_raced (the cache copies again), or an error.
	 */
	int (*flush)(void *ctx, enum tfs_btree_id id, const struct tfs_bkey *k);
	void *ctx;
};

/*
 * Creates a key cache caching the btrees in ids_mask (1 << id each), pinning
 * in journal j, and registers its shrinker with r (NULL: no shrinker).
 */
int tfs_btree_key_cache_init(struct tfs_btree_key_cache **ret, unsigned ids_mask,
			     struct tfs_journal *j, struct tfs_shrinkers *r,
			     const struct tfs_btree_key_cache_ops *ops);
/*
 * Unregisters the shrinker and frees everything.  Dirty entries must have
 * been flushed (tfs_btree_key_cache_flush_all()); any left have their pins
 * dropped and are counted in the message printed.  NULL is fine.
 */
void tfs_btree_key_cache_exit(struct tfs_btree_key_cache *kc);

/* Whether btree id goes through the cache. */
bool tfs_btree_key_cache_wants(struct tfs_btree_key_cache *kc, enum tfs_btree_id id);

/* --- reading --- */

/*
 * Copies the cached key at (id, pos) into *out and marks it accessed:
 * true on a hit.  Lock-free (an RCU read-side section).  First (one call
 * in 64), when the caches are an eighth over their shared budget, shrinks
 * them from this thread, and when the freed list holds more than a
 * sixteenth of the budget, waits for its grace period and frees it; so
 * call it with no lock held.
 */
bool tfs_btree_key_cache_lookup(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
				struct tfs_bpos pos, struct tfs_bkey_buf *out);

/*
 * Caches k, just read from btree id, as a clean entry.  The caller holds
 * the btree's lock (shared), so no commit changes the key meanwhile.  It
 * first reserves the entry's memory under the budget shared with the node
 * cache (tfs_shrinkers_reserve(): may shrink both caches from this thread;
 * hold no cache lock).  Out of memory or an entry already there: nothing
 * happens.
 */
void tfs_btree_key_cache_fill(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
			      const struct tfs_bkey *k);

/*
 * For iterators: if (id, pos of *k) is cached, replaces *k with the cached
 * key and returns true.  With the btree's lock held (any mode) pass
 * locked = true.  Without it, cookie is the btree's mod_seq when *k was
 * copied from it and mod_seq points at the btree's mod_seq now: when the
 * entry is gone and the btree changed since, the caller must re-read *k
 * under the lock (returns false with *stale set) -- a flush may have put a
 * newer key in the btree and an eviction removed the entry in between.
 */
bool tfs_btree_key_cache_overlay(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
				 struct tfs_bkey_buf *k, bool locked, u64 cookie,
				 const u64 *mod_seq, bool *stale);

/* Without touching the accessed bit: 0 clean, 1 dirty, -ENOENT not cached (tests). */
int tfs_btree_key_cache_state(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
			      struct tfs_bpos pos);

/* --- commit hooks (fs/btree_update.c) --- */

/* A commit's key-cache state: zero it before prep (the plan's memset does). */
struct tfs_key_cache_commit {
	bool flush;	     /* a TFS_TRANS_KEY_CACHE_FLUSH commit */
	struct kc_key *keys; /* preallocated key memory */
	struct kc_pin *pins; /* preallocated journal pins */
	unsigned nr_cached;  /* updates that went to the cache */
	u64 prep_gen;	     /* the cache's fill count when prep looked */
};

/*
 * Commit step 3 (after the fit, under the intent locks of every btree the
 * transaction touches, before the journal reservation): allocates what
 * applying the updates to cached entries needs, and for a flush commit
 * checks that each key is still its entry's (else
 * -TFS_ERR_key_cache_flush_raced).  Readers still run under intent and
 * may fill entries before the apply: those prep did not see are evicted by
 * the apply (they are clean) and the leaf takes the update.  0, -ENOMEM
 * or that code; may run again after a journal wait (it starts over).
 */
int tfs_btree_key_cache_commit_prep(struct tfs_btree_key_cache *kc, struct tfs_key_cache_commit *c,
				    const struct tfs_trans_update *updates, unsigned nr_updates,
				    unsigned trans_flags);

/*
 * Commit step 5, for each update applied (the last one of its position),
 * under the btree's write lock, with the journal reservation's seq: returns
 * true when the cache took the update (the caller must not apply it to the
 * leaf), false when the leaf must apply it: not cached, a delete (the entry
 * is removed), an entry filled since prep (evicted), or a flush commit
 * (the entry becomes clean, its pin dropped).  Never fails.
 */
bool tfs_btree_key_cache_commit_apply(struct tfs_btree_key_cache *kc,
				      struct tfs_key_cache_commit *c, enum tfs_btree_id id,
				      const struct tfs_bkey *k, u64 seq);

/* After the commit (success or not), with no btree lock: frees what prep left. */
void tfs_btree_key_cache_commit_done(struct tfs_btree_key_cache *kc,
				     struct tfs_key_cache_commit *c);

/* --- write-back --- */

/*
 * Flushes every dirty entry into its btree (tfs_btree_write_all(), stop).
 * 0 or the first flush error.  No lock held.
 */
int tfs_btree_key_cache_flush_all(struct tfs_btree_key_cache *kc);

/*
 * fsck's replacement of a lost leaf of btree id (tfs_btree_replace_bad_leaves()):
 * the btree no longer holds keys at positions in [min, max], so the clean
 * entries there are evicted (the cache never holds a key the btree lacks).
 * A dirty entry there holds a committed key newer than the lost one: keep()
 * gets a copy of each, to put it into the new leaf (the entry stays dirty,
 * pinned, and flushes as before).  Called under the btree's write lock; the
 * clean entries evicted are returned.
 */
unsigned long tfs_btree_key_cache_drop_range(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
					     struct tfs_bpos min, struct tfs_bpos max,
					     void (*keep)(void *ctx, const struct tfs_bkey *k),
					     void *ctx);

/* --- memory --- */

/* Runs the shrinker's scan directly (tests): returns what it freed or evicted. */
unsigned long tfs_btree_key_cache_scan(struct tfs_btree_key_cache *kc, unsigned long nr_to_scan);

/* Bytes held (entries and keys, freed ones included). */
size_t tfs_btree_key_cache_bytes(struct tfs_btree_key_cache *kc);

/*
 * Waits until every entry freed so far has passed its grace period (tests,
 * and direct reclaim).  Never from inside a read-side section.
 */
void tfs_btree_key_cache_wait_gp(struct tfs_btree_key_cache *kc);

struct tfs_btree_key_cache_stats {
	u64 nr_keys, nr_clean, nr_dirty, nr_freed;
	u64 lookups, hits, fills, updates, deletes;
	u64 flushes, flush_races, evicted, second_chances, freed, reused, allocated;
	u64 gp_seq, gp_completed;
	size_t bytes;
};
void tfs_btree_key_cache_stats(struct tfs_btree_key_cache *kc,
			       struct tfs_btree_key_cache_stats *st);

/* nr_keys, nr_dirty, nr_freed, memory, hits, flushes, scans and grace periods. */
void tfs_btree_key_cache_to_text(struct printbuf *out, struct tfs_btree_key_cache *kc);

#endif /* TFS_FS_BTREE_KEY_CACHE_H */

/* --- the filesystem's hooks (fs/fs.c, fs/btree_iter.c, fs/btree_update.c, fs/btree_write.c) --- */

struct tfs_fs;

/*
 * At open, once the journal runs (not read-only): the shrinker registry
 * (fs->shrinkers, budget opts.cache_budget, PSI where the kernel has it)
 * with the node cache's shrinker (fs/btree.h's count and scan, in pages;
 * seeks 4), and the key cache for the inodes btree (fs->key_cache, seeks
 * 2), whose reclaim commits with TFS_TRANS_RESERVED |
 * TFS_TRANS_KEY_CACHE_FLUSH.
 */
int tfs_fs_key_cache_init(struct tfs_fs *fs);
/* Before the journal is freed; NULLs are fine. */
void tfs_fs_key_cache_exit(struct tfs_fs *fs);

/*
 * Iterator hook: overlays *k (just copied from btree id) with its cached
 * version.  locked: the caller holds the btree's lock; else cookie is the
 * btree mod_seq the key was copied at, and a key that may be stale is read
 * again under the lock.
 */
void tfs_fs_key_cache_iter_overlay(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bkey_buf *k,
				   bool locked, u64 cookie);
