/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_POSIX_TYPES_H
#define TFS_FS_POSIX_TYPES_H

/*
 * The POSIX layer's in-memory state (fs/posix.h is its internal API,
 * fs/fs.h the public one): the inode table, open files, and the
 * filesystem-wide pieces (inode numbers, the rename lock, syncfs's error
 * sequence).
 *
 * Locking, outermost first:
 *  1. posix.rename_lock: cross-directory renames, so the tree's shape (a
 *     directory's parent) cannot change while one checks "not under itself";
 *  2. inode locks (tfs_inode_mem.lock, a rwlock), several at once only in
 *     increasing inode number order; held across the read-modify-write of
 *     everything the inode owns (its key, its dirents when a directory, its
 *     extents and xattrs) and across the data I/O of a write, so commits of
 *     one inode never interleave (the btree does not detect conflicts);
 *  3. posix.table_lock: the table's hash chains, LRU, reference and open
 *     counts; never held across I/O or while taking another lock.
 * An inode's cached attributes (ui, target) are read and written under its
 * lock; last_seq and last_data_seq are atomics, read by fsync unlocked.
 */

#include <pthread.h>
#include <stdbool.h>

#include "fs/fs.h"
#include "lib/errseq.h"
#include "lib/types.h"

/* An inode's attributes, unpacked from struct tfs_inode (fs_format.h). */
struct tfs_inode_unpacked {
	u32 mode, nlink, uid, gid;
	u64 size, blocks, rdev, generation;
	s64 atime, mtime, ctime, btime; /* ns */
	u64 hash_seed, parent;
	u32 flags;
};

struct tfs_inode_mem {
	tfs_ino_t ino;
	struct tfs_inode_mem *hnext;		   /* hash chain (table_lock) */
	struct tfs_inode_mem *lru_prev, *lru_next; /* unreferenced and cached (table_lock) */
	unsigned ref;				   /* table_lock */
	unsigned open_count;			   /* table_lock */
	pthread_rwlock_t lock;
	/* Under lock: */
	bool loaded;  /* ui (and target) hold the committed inode */
	bool deleted; /* gone from the btree (or never there): -ENOENT */
	/*
	 * A removed name (unlink, rename over it) left this non-directory
	 * with other names since it was cached: tfs_stat.links_dropped.
	 */
	bool links_dropped;
	struct tfs_inode_unpacked ui;
	char *target; /* symlinks: the target (ui.size bytes), malloc'ed */
	/* Atomics: the journal seq of the inode's last change, and of its last
	 * change fdatasync must cover (data, size, anything but times). */
	u64 last_seq, last_data_seq;
	/* Atomic: bumped whenever ui.blocks changes (tfs_file_blocks_changes()). */
	u64 blocks_changes;
	tfs_errseq_t wb_err; /* data write errors (lib/errseq.h) */
	/*
	 * enum tfs_inode_xattrs, atomic: set to none only under the shared
	 * lock (a lookup that found no key), to some under the exclusive lock
	 * before a key is added, so none is never set over a key.
	 */
	u8 xattrs;
};

/*
 * What is known of an inode's xattr keys (tfs_inode_mem.xattrs).  The
 * kernel asks getxattr("security.capability") before every write (FUSE's
 * HANDLE_KILLPRIV v1): for an inode known to have no key, that is answered
 * without a btree lookup.  In memory only: a loaded inode starts unknown, so
 * a remount or a crash can never leave it wrong.
 */
enum tfs_inode_xattrs {
	TFS_INODE_XATTRS_unknown, /* not looked at since the inode was loaded */
	TFS_INODE_XATTRS_none,	  /* no xattr key at all */
	TFS_INODE_XATTRS_some,	  /* some key (perhaps only whiteouts): look names up */
};

/* An open file description. */
struct tfs_file {
	struct tfs_inode_mem *im; /* holds a reference and an open count */
	int flags;
	tfs_errseq_t wb_err_since;
	struct tfs_file *prev, *next; /* posix.files (table_lock) */
};

/* Name hash, seeded per inode: what dirent and xattr slots start from. */
typedef u64 (*tfs_name_hash_fn)(u64 seed, const void *name, size_t len);

struct tfs_posix_counters {
	u64 inodes_loaded, inodes_evicted;
	u64 data_bytes_written, data_bytes_read, data_blocks_rmw;
	u64 data_write_errors, data_read_errors, data_csum_errors, data_replica_fallbacks;
	u64 fsyncs, fsync_flushes, fsync_skipped;
	u64 orphans_added, orphans_reclaimed;
	u64 removed_at_once; /* inodes deleted with their last name, no orphan key */
	u64 enospc_flush_retries;
	u64 hash_probes, whiteouts_written;
	u64 xattr_lookups_skipped; /* getxattr answered by tfs_inode_mem.xattrs */
};

struct tfs_posix {
	struct tfs_fs *fs;
	u32 block_size;
	unsigned block_bits;

	pthread_mutex_t table_lock;
	struct tfs_inode_mem **table; /* hash chains */
	size_t table_size;	      /* power of 2 */
	u64 nr_cached;		      /* entries in the table */
	struct tfs_inode_mem lru;     /* list head: unreferenced entries kept */
	u64 nr_lru;
	u64 lru_max;
	/* Highest last_seq of an entry evicted: what a reloaded inode assumes. */
	u64 evicted_seq;
	struct tfs_file files; /* list head: open files */

	u64 next_ino;  /* atomic */
	u64 nr_inodes; /* atomic: inodes in the btree */
	pthread_mutex_t rename_lock;

	tfs_errseq_t sb_err;	   /* every data write error */
	tfs_errseq_t syncfs_since; /* tfs_syncfs()'s sample */
	pthread_mutex_t syncfs_lock;

	tfs_name_hash_fn name_hash;  /* tests force collisions through it */
	struct tfs_posix_counters c; /* updated atomically */
};

#endif /* TFS_FS_POSIX_TYPES_H */
