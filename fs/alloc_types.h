/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_ALLOC_TYPES_H
#define TFS_FS_ALLOC_TYPES_H

/*
 * The allocator's in-memory state (the API is fs/alloc.h).  Everything is
 * protected by tfs_alloc.lock.
 */

#include <pthread.h>
#include <stdbool.h>

#include "fs/alloc.h"
#include "lib/types.h"
#include "super/super_format.h"

/*
 * Runs released lately on a member (alloc.c's reuse list): small
 * allocations take one of these before searching from the cursor.
 */
#define TFS_ALLOC_REUSE_SLOTS 128
/* Allocations of at most this many blocks look at the reuse list. */
#define TFS_ALLOC_REUSE_MAX_BLOCKS 32

struct tfs_alloc_reuse {
	u64 start; /* block */
	u64 nr;
};

/* One member: a bitmap of its blocks from `start` on. */
struct tfs_alloc_dev {
	bool present;	 /* a member the allocator may use */
	u32 bucket_size; /* bytes (also for a missing member: its alloc keys) */
	u64 start, end;	 /* bytes: first_bucket .. nbuckets */
	u64 nr_blocks;	 /* (end - start) / block_size */
	u64 *bits;	 /* 1: in use, waiting, or a journal bucket */
	u64 capacity;	 /* blocks usable for nodes and data */
	u64 used;	 /* blocks referenced */
	u64 waiting;	 /* blocks freed by a commit not durable yet */
	u64 cursor;	 /* next-fit: block to search from */
	u64 free_chunks; /* free node runs (alloc.c's dev_set()) */
	/* Released runs, oldest first; entries may have been taken since. */
	struct tfs_alloc_reuse reuse[TFS_ALLOC_REUSE_SLOTS];
	unsigned nr_reuse;
};

/* A run freed by the commit at seq: reusable once seq is durable. */
struct tfs_alloc_waiting {
	struct tfs_alloc_run run;
	u64 seq;
};

struct tfs_alloc {
	pthread_mutex_t lock;
	u32 block_size;
	unsigned nr_devs; /* member slots (sb nr_devices) */
	struct tfs_alloc_dev devs[TFS_MAX_DEVICES];
	struct tfs_alloc_waiting *waiting;
	size_t nr_waiting, size_waiting;
	u64 waiting_min_seq; /* the lowest seq in waiting (meaningless when empty) */
	u64 reserve;	     /* blocks per member only metadata may take */
	u32 chunk_blocks;    /* blocks per node: the unit of free_chunks */
	u64 nr_allocs, nr_alloc_fail, nr_freed_now, nr_freed_after, nr_released;
	u64 nr_scanned; /* blocks dev_find_run() looked at (tests bound the search) */
	u64 nr_reused;	/* allocations with a replica from a reuse list */
};

struct tfs_fs;
/* Open: every member's space free but its journal buckets; stop: frees it all. */
int tfs_alloc_init(struct tfs_fs *fs);
void tfs_alloc_exit(struct tfs_fs *fs);

#endif /* TFS_FS_ALLOC_TYPES_H */
