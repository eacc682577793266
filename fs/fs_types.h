/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_FS_TYPES_H
#define TFS_FS_FS_TYPES_H

/*
 * struct tfs_fs: a running filesystem (the API is fs/fs.h, fs/btree.h,
 * fs/alloc.h).  Members, their superblocks, the journal, the btrees, the
 * node cache and the allocator, then the POSIX layer's state.
 *
 * Fixed after tfs_fs_open() returns (read without locks): opts, uuid,
 * geometry, devs[] (but for sb contents, which only open and stop change),
 * j, read_only.  Everything else names its lock.
 */

#include <pthread.h>
#include <stdbool.h>

#include "fs/alloc_types.h"
#include "fs/btree_types.h"
#include "fs/fs.h"
#include "journal/journal.h"
#include "lib/shrinker.h"
#include "super/super_types.h"

/* One member device. */
struct tfs_fs_dev {
	bool present;		 /* opened (false: missing, degraded open) */
	char *path;		 /* as given to open */
	int lock_fd;		 /* flock()ed: one open filesystem per member */
	struct tfs_sb_handle sb; /* owns the bdev */
	struct tfs_bdev *bdev;	 /* sb.bdev */
	u64 *journal_buckets;	 /* for the journal descriptor */
	unsigned nr_journal_buckets;
};

struct tfs_fs {
	struct tfs_fs_opts opts;
	u8 uuid[16];
	u32 block_size;
	u32 node_size; /* tfs_fs_node_size() of the superblock */
	unsigned metadata_replicas, metadata_replicas_required;
	/*
	 * Pointers an interior node's btree_ptr key has room for in memory:
	 * the superblock's metadata replicas, whichever members are present.
	 * metadata_replicas is what new writes get (fewer in a degraded open),
	 * but a node read back keeps every pointer it was written with, the
	 * missing members' too.
	 */
	unsigned btree_ptr_replicas;
	u64 node_magic;
	bool read_only; /* opts.read_only: nothing is written, commits fail */

	/* Members by index (sb dev_idx); nr_devices of them. */
	struct tfs_fs_dev devs[TFS_MAX_DEVICES];
	unsigned nr_devices;

	struct tfs_journal *j; /* NULL while opening read-only without a journal */
	struct tfs_journal_opts jopts;
	u64 journal_seq_at_open; /* newest replayed seq */
	/* The open's post-flush entry (tfs_journal_read_verify_tail()): dropped, or checked. */
	u64 post_flush_dropped, post_flush_verified;
	u64 post_flush_check_bytes; /* data read back for that check, every member */
	/* Leaves replaced at open (opts.replace_lost_leaves), for fsck to report. */
	struct tfs_btree_lost_leaf *lost_leaves;
	unsigned nr_lost_leaves;
	/* Of those, alloc btree leaves (counted even when no memory recorded them). */
	unsigned nr_lost_alloc_leaves;
	/*
	 * Positions replay wrote (a key or its deletion) inside the range of a
	 * lost interior node replaced at open: the journal is newer than every
	 * leaf fsck's salvage finds there, so those stay as replay left them.
	 */
	struct tfs_replayed_pos {
		u32 id;
		struct tfs_bpos pos;
	} * lost_replayed;
	size_t nr_lost_replayed, size_lost_replayed;
	/* The open found the alloc rebuild marker (fs/fs_format.h): an unfinished repair. */
	bool alloc_rebuild_pending;

	struct tfs_btree btrees[TFS_BTREE_NR];
	struct tfs_btree_cache cache;
	struct tfs_alloc alloc;
	/*
	 * The shrinker registry (budget opts.cache_budget), the node cache's
	 * shrinker in it, and the key cache (inodes); NULL when read-only.
	 */
	struct tfs_shrinkers *shrinkers;
	struct tfs_shrinker node_shrinker;
	struct tfs_btree_key_cache *key_cache;

	/*
	 * Roots: every root entry logs the root of every btree (under
	 * roots_lock, so entries are ordered as their contents were taken);
	 * roots_pin holds the seq of the newest one, relogged by its flush.
	 */
	pthread_mutex_t roots_lock;
	struct tfs_journal_entry_pin roots_pin;
	u64 roots_seq;	   /* seq of the newest root entry */
	u64 next_node_seq; /* node seqs (atomic) */
	/* The first node seq this open gives: every older node was on disk before it (salvage). */
	u64 node_seq_at_open;
	/*
	 * Checkpoints started and running (atomic): from its snapshot to its
	 * end a checkpoint's pointers in memory and the btree alloc keys may
	 * disagree, so fsck compares them only across a span no checkpoint
	 * ran in (a seqcount).
	 */
	u64 ckpt_started;
	unsigned ckpt_running;
	bool write_back_error; /* a checkpoint failed: stop must report it */
	int first_error;
	/*
	 * tfs_fs_open() returned (atomic): from then on a damaged node a read
	 * meets is an inconsistency of the filesystem, the errors= policy's
	 * (before, the open fails, naming it).  node_inconsistent: one was
	 * reported (atomic; the policy is taken once).
	 */
	bool opened;
	bool node_inconsistent;

	/* POSIX layer (fs/inode.c, dirents, extents, xattrs ...): its own state. */
	void *posix;
	/* Called by tfs_fs_stop() before the btrees are written back (may be NULL). */
	int (*posix_stop)(struct tfs_fs *fs);
};

/*
 * Btree node size of a member's superblock: the superblock's field once the
 * format has one; until then 64 KiB, or the bucket size when smaller.  The
 * one place that reads it.
 */
u32 tfs_fs_node_size(const struct tfs_sb *sb);

/*
 * A node that no copy of reads as the node its parent points to (checksum,
 * header, keys: -TFS_ERR_btree_node_invalid), met by a read once the
 * filesystem is open: said as an inconsistency ("tinyfs: filesystem
 * inconsistency: WHAT") and the errors= action taken (ro halts the journal,
 * panic aborts; tfs_posix_inconsistent()), the first time only.  Not for a
 * node that could not be read at all (EIO: the device may read again).
 */
void tfs_fs_node_inconsistent(struct tfs_fs *fs, const char *what);

static inline struct tfs_btree *tfs_fs_btree(struct tfs_fs *fs, enum tfs_btree_id id)
{
	return &fs->btrees[id];
}

#endif /* TFS_FS_FS_TYPES_H */
