/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_STR_HASH_H
#define TFS_FS_STR_HASH_H

/*
 * Names kept in a btree as a hash table: dirents (by directory and name)
 * and xattrs (by inode and name).  A name's slot is its seeded hash,
 * reduced to the table's slot range; a taken slot moves it to the next
 * one (linear probing, wrapping at the end of the range).  The key's
 * position is {inode, slot << shift | chunk}: dirents use shift 0, xattrs
 * keep 2^shift chunks per slot.
 *
 * Invariants (what lookups rely on):
 *  - A name lives at the first slot of its probe run (from its hash on)
 *    that was free when it was inserted, and never moves while it exists
 *    (a dirent's slot is its readdir position).
 *  - The slots from a name's hash to its slot are all taken, by live
 *    entries or whiteouts: a lookup stops at the first empty slot.
 *  - Removing an entry leaves a whiteout when the next slot is taken (some
 *    later entry may have probed past it); otherwise the slot is emptied,
 *    and whiteouts right before it are emptied too.
 * Callers hold the owning inode's lock across lookup and commit; lookups
 * see the transaction's own queued updates (tfs_trans_lookup()).
 */

#include <stdbool.h>

#include "fs/bkey.h"
#include "fs/btree.h"
#include "lib/types.h"

/* SipHash-2-4 of data with the 128-bit key (k0, k1). */
u64 tfs_siphash(u64 k0, u64 k1, const void *data, size_t len);

/* The default name hash: SipHash-2-4 keyed by the inode's seed. */
u64 tfs_name_hash_default(u64 seed, const void *name, size_t len);

/* What a slot's key is to the name looked up. */
enum tfs_hash_match {
	TFS_HASH_OTHER,	   /* a live entry for another name */
	TFS_HASH_MATCH,	   /* the name */
	TFS_HASH_WHITEOUT, /* a removed entry's placeholder */
};

struct tfs_hash_desc {
	enum tfs_btree_id btree;
	unsigned shift;		/* slot -> offset */
	u64 slot_min, slot_max; /* inclusive */
	enum tfs_hash_match (*match)(const struct tfs_bkey *k, const void *name);
	/* Builds the whiteout for pos in buf. */
	void (*whiteout)(struct tfs_bkey_buf *buf, struct tfs_bpos pos);
};

/* A hash value reduced to d's slot range (where probing starts). */
u64 tfs_hash_slot(const struct tfs_hash_desc *d, u64 hash);

/*
 * The key at pos as the transaction would leave it: its last queued
 * update of pos if any (-ENOENT for a deletion), else the btree's.
 */
int tfs_trans_lookup(struct tfs_btree_trans *trans, enum tfs_btree_id id, struct tfs_bpos pos,
		     struct tfs_bkey_buf *out);

/*
 * Probes from slot `start` for name.  Found: 0, *slot its slot and the key
 * in out (out may be NULL).  Not found: -ENOENT and, when free_slot is not
 * NULL, the slot an insert should take (the first whiteout or empty slot
 * of the run).  Other errors from reading the btree.
 */
int tfs_hash_lookup(struct tfs_btree_trans *trans, const struct tfs_hash_desc *d, u64 inode,
		    u64 start, const void *name, u64 *slot, u64 *free_slot,
		    struct tfs_bkey_buf *out);

/*
 * Queues the removal of the entry at slot (its chunk 0; other chunks are
 * the caller's): a whiteout if the next slot is taken, else a deletion and
 * the deletion of the whiteouts just before it.
 */
int tfs_hash_remove(struct tfs_btree_trans *trans, const struct tfs_hash_desc *d, u64 inode,
		    u64 slot);

static inline struct tfs_bpos tfs_hash_pos(const struct tfs_hash_desc *d, u64 inode, u64 slot,
					   unsigned chunk)
{
	return TFS_POS(inode, slot << d->shift | chunk);
}

#endif /* TFS_FS_STR_HASH_H */
