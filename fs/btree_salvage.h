/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_SALVAGE_H
#define TFS_FS_BTREE_SALVAGE_H

/*
 * Salvage (fs/btree_salvage.c), for fsck: the keys of a range a lost
 * interior node took (tfs_btree_replace_lost_child_locked()), found again in
 * the leaves under it, which nothing points to any more but which are
 * still on the members, each a whole node that verifies.
 *
 * Every block of every present member is looked at (a node may start at
 * any block: the allocator gives a copy any free run of its size) for a
 * leaf of the filesystem (its node magic) of a tree and range asked for,
 * which must then verify as a read through a pointer does (checksum,
 * version, every key valid, in order and inside the node's range).  The
 * leaves found are taken newest first (node seq: unique per node write,
 * increasing across opens); a key is given back only if no newer leaf
 * found covered its position (with that key or without it: a newer leaf
 * without it says it was removed), so each position comes from the newest
 * state of it on disk.  Nodes this open wrote (seq >= fs->node_seq_at_open:
 * fsck -y's own empty replacements) are not taken.  What comes back may
 * be stale (a leaf older than the lost tree's, whose range the lost tree
 * had split differently): the caller's checks make it consistent, as
 * e2fsck's passes do after its salvage.
 */

#include "fs/bkey.h"
#include "lib/types.h"

struct tfs_fs;

struct tfs_btree_salvage_range {
	enum tfs_btree_id id;
	struct tfs_bpos min_key, max_key;
	u64 keys; /* out: keys given back into it */
};

struct tfs_btree_salvage_stats {
	u64 bytes_scanned;
	u64 leaves_found; /* leaves of a range asked for that verify (every copy) */
	u64 leaves_used;  /* of those, leaves that gave a key */
	u64 keys;	  /* keys given back (fn took them) */
};

/*
 * Called with each key to give back (a copy, valid during the call), newest
 * leaf first: > 0 when it took the key, 0 when it did not (a key already at
 * that position, newer), < 0 to stop with that error.
 */
typedef int (*tfs_btree_salvage_fn)(void *ctx, enum tfs_btree_id id, const struct tfs_bkey *k);

/*
 * Scans the members for the leaves of ranges r[0..nr) (see above) and hands
 * their keys to fn; r[i].keys and *st count what fn took.  0, a read error
 * of a member (printed), -ENOMEM, or fn's error.
 */
int tfs_btree_salvage(struct tfs_fs *fs, struct tfs_btree_salvage_range *r, unsigned nr,
		      tfs_btree_salvage_fn fn, void *ctx, struct tfs_btree_salvage_stats *st);

#endif /* TFS_FS_BTREE_SALVAGE_H */
