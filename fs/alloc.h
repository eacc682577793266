/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_ALLOC_H
#define TFS_FS_ALLOC_H

/*
 * Space allocation on the members, for btree nodes and file data alike.
 *
 * The unit is the filesystem block (the superblock's block_size).  Each
 * member's usable space is its buckets from first_bucket on, less its
 * journal buckets.  The allocator keeps, per member, which blocks are in
 * use, in memory; open builds it from what references space on disk (the
 * alloc keys, for file data and btree nodes, and the alloc btree's own node
 * pointers: see the end of this file), so no space is ever leaked by a crash.
 *
 * Invariants:
 *  - Space is handed out only if free and not waiting: blocks freed by a
 *    commit (an overwritten extent, an old copy of a node) become
 *    allocatable only once that commit's journal seq is durable
 *    (tfs_alloc_free_after()), so a crash never finds live data in space
 *    that was reused.
 *  - A run handed out lies within one member and within one bucket-aligned
 *    region of contiguous free blocks; runs never overlap.
 *  - The counters (free, used, waiting per member) are exact; statfs reads
 *    them.
 */

#include <stdbool.h>

#include "lib/types.h"

struct printbuf;
struct tfs_fs;

/* A run of blocks on one member; offset and length in bytes. */
struct tfs_alloc_run {
	unsigned dev;
	u64 offset;
	u64 len;
};

enum tfs_alloc_flags {
	/* Metadata (btree nodes): may use the reserve kept for write-back. */
	TFS_ALLOC_METADATA = 1 << 0,
	/*
	 * Data, when write-back may need every free node run left (node-size
	 * aligned chunks entirely free, tfs_alloc_usage().free_node_runs):
	 * takes no block of one, only space that is fragmented already.
	 */
	TFS_ALLOC_SPARE_NODE_RUNS = 1 << 1,
};

/*
 * Allocates up to len bytes (a multiple of the block size; at least min
 * bytes, contiguous) on nr_replicas distinct members, preferring members
 * with more free space; out[i] gets replica i.  Returns the length
 * allocated (the same for every replica), or -TFS_ERR_alloc_no_space
 * (ENOSPC class) when no run of min bytes is free on enough members.
 * Data allocations leave a reserve so that write-back of btree nodes can
 * always proceed.
 */
s64 tfs_alloc(struct tfs_fs *fs, u64 len, u64 min, unsigned nr_replicas, unsigned flags,
	      struct tfs_alloc_run *out);

/* Gives back a run that was never referenced by a commit (a failed write). */
void tfs_alloc_free_now(struct tfs_fs *fs, const struct tfs_alloc_run *run);

/*
 * The commit at journal seq stopped referring to run: it becomes
 * allocatable once seq is durable.
 */
void tfs_alloc_free_after(struct tfs_fs *fs, const struct tfs_alloc_run *run, u64 seq);

/* At open: run is referenced (a node or an extent found on disk or in replay). */
int tfs_alloc_mark_used(struct tfs_fs *fs, const struct tfs_alloc_run *run);

struct tfs_alloc_usage {
	u64 capacity; /* bytes usable for nodes and data, all members */
	u64 used;
	u64 waiting;	    /* freed, not yet reusable (commit not durable) */
	u64 free;	    /* allocatable for data now */
	u64 free_node_runs; /* aligned node-size runs entirely free (a count) */
};

void tfs_alloc_usage(struct tfs_fs *fs, struct tfs_alloc_usage *u);

/* Per member: capacity, used, waiting, free, reserve. */
void tfs_alloc_to_text(struct printbuf *out, struct tfs_fs *fs);

/* --- alloc and accounting keys (fs/alloc_keys.c; formats in fs/fs_format.h) --- */

/*
 * On disk, the alloc btree records which blocks file data uses and which
 * btree nodes use (one alloc key per bucket and owner: user data, btree
 * nodes), and the accounting counters (user and btree blocks per member,
 * inodes).  The alloc btree's own nodes are not recorded (fs/fs_format.h):
 * open marks them from the alloc btree it reads whole anyway.  The
 * in-memory allocator above is built at open from the journal buckets, the
 * alloc btree's nodes and the alloc keys: no other tree's nodes are walked,
 * no extents leaf is read.
 *
 * Invariant, at every durable point (every journal prefix replay can end
 * at): the user alloc keys hold exactly the blocks the extents reference,
 * the btree alloc keys exactly the blocks of the nodes of the durable trees
 * (but the alloc btree's), and the accounting keys the sums.  Kept by the
 * commit trigger below, which queues the alloc and accounting updates in
 * the transaction that changes the extents (or inodes), and by the node
 * trigger, in the checkpoint's commit that holds its root entry: in both
 * cases the same journal entry.  Space tfs_alloc() handed out but no
 * commit references is free on disk: a crash frees it.
 */

struct tfs_btree_trans;
enum tfs_acct_kind;

/*
 * The commit trigger's btrees: the alloc btree's bit when trans has updates
 * of the extents or inodes btree (and is not a key cache flush), else 0.
 * tfs_trans_commit() locks these with the transaction's own.
 */
unsigned tfs_alloc_trigger_btrees(const struct tfs_btree_trans *trans, unsigned flags);

/*
 * The commit trigger: called by tfs_trans_commit() with every btree of the
 * transaction and tfs_alloc_trigger_btrees() intent-locked, before its
 * journal reservation, with only the caller's updates queued.  Compares
 * each final extents and inodes update with the key the leaf holds and
 * queues (tfs_trans_update) the alloc and accounting keys that change.  0,
 * -ENOMEM or a node read error; the caller drops what it queued on failure.
 */
int tfs_alloc_trigger(struct tfs_btree_trans *trans, unsigned flags);

/*
 * The checkpoint's node trigger: called by tfs_trans_commit() for a
 * checkpoint's commit (trans->roots) with the alloc btree locked, after
 * tfs_alloc_trigger(): queues the btree alloc keys (and btree_blocks
 * counters) for the node copies the new tree takes and gives up, so they
 * share the journal entry of its root entry.  Nothing for the alloc btree's
 * own checkpoints.  0, -ENOMEM or a node read error; for fsck's guarded
 * repairs (trans->roots->guard), -TFS_ERR_fsck_raced_writeback when a
 * write-back ran since its compare (struct tfs_trans_roots).
 */
int tfs_alloc_nodes_trigger(struct tfs_btree_trans *trans);

/* An alloc key's position (inode): its data type and member; false if none. */
bool tfs_alloc_pos_decode(u64 inode, unsigned *type, unsigned *dev);

/* Open: marks the blocks of every alloc key used in the allocator. */
int tfs_alloc_keys_load(struct tfs_fs *fs);

/* An accounting counter (0 when it has no key).  0 or a read error. */
int tfs_acct_read(struct tfs_fs *fs, enum tfs_acct_kind kind, unsigned dev, u64 *v);
/* "user_blocks", "inodes", "btree_blocks"; NULL for an unknown kind. */
const char *tfs_acct_kind_str(unsigned kind);
/* The counters, one line each. */
void tfs_acct_to_text(struct printbuf *out, struct tfs_fs *fs);

#endif /* TFS_FS_ALLOC_H */
