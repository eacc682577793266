/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_EXTENTS_H
#define TFS_FS_EXTENTS_H

/*
 * Extents (fs_format.h) as the POSIX layer handles them: unpacking,
 * building and cutting keys, finding the extent over a block, and
 * replacing the extents over a block range (the step every write, punch,
 * truncate and removal shares).
 *
 * Invariants kept by everything here and above:
 *  - Extents of one inode never overlap; each is 1..TFS_EXTENT_MAX_BLOCKS
 *    blocks.
 *  - Past the block holding EOF there are only unwritten extents (a
 *    fallocate KEEP_SIZE), and the bytes of the EOF block past EOF read as
 *    zeros, so growing a file never exposes old bytes.
 *  - A written extent's blocks were written (and, unless the journal's
 *    flush covers their member, flushed) before the commit that inserted
 *    it; space an extent stops referring to is freed with
 *    tfs_alloc_free_after() of that commit, never earlier.
 */

#include <stdbool.h>

#include "fs/alloc.h"
#include "fs/bkey.h"
#include "fs/btree.h"
#include "fs/fs_format.h"
#include "lib/types.h"

struct tfs_fs;

/* An extent's header, unpacked; csums points into the key it came from. */
struct tfs_ext {
	u64 ino;
	u64 start; /* first file block */
	u32 len;   /* blocks */
	bool unwritten;
	unsigned nr_ptrs;
	struct {
		u32 dev;
		u64 offset; /* bytes */
	} ptrs[TFS_DATA_MAX_REPLICAS];
	const __le32 *csums; /* [len]; NULL when unwritten */
};

static inline u64 tfs_ext_end(const struct tfs_ext *e)
{
	return e->start + e->len;
}

/* Unpacks k (an extent key, validated); -TFS_ERR_extent_invalid (printed) otherwise. */
int tfs_ext_unpack(struct tfs_fs *fs, const struct tfs_bkey *k, struct tfs_ext *e);

/*
 * Builds the extent key for e's fields in buf; csums (host order, [e->len])
 * is used when the extent is written.
 */
void tfs_ext_pack(struct tfs_bkey_buf *buf, const struct tfs_ext *e, const u32 *csums);

/* Builds the key of e's blocks [from, to) (a sub-range) in buf. */
void tfs_ext_cut(struct tfs_bkey_buf *buf, const struct tfs_ext *e, u64 from, u64 to,
		 u32 block_size);

/* A growable list of runs of space. */
struct tfs_run_list {
	struct tfs_alloc_run *runs;
	unsigned nr, size;
};

int tfs_run_list_add(struct tfs_run_list *l, unsigned dev, u64 offset, u64 len);
void tfs_run_list_exit(struct tfs_run_list *l);
/* Removes from l every byte also in sub (same member). */
int tfs_run_list_subtract(struct tfs_run_list *l, const struct tfs_run_list *sub);

/*
 * The extent of ino over block b, or else the first one after b that
 * starts before `limit`: 0 with the key in out (unpacked into e), or
 * -ENOENT.
 */
int tfs_ext_find(struct tfs_fs *fs, u64 ino, u64 b, u64 limit, struct tfs_bkey_buf *out,
		 struct tfs_ext *e);

/*
 * Queues in trans the removal of ino's extents over blocks [start, end):
 * extents inside go, extents across an edge are cut.  Every run they stop
 * referring to is added to freed, and the blocks that had space to
 * *blocks.  At most max_keys old extents are handled: *next gets the block
 * to continue from (end when everything was queued).
 */
int tfs_ext_drop_range(struct tfs_btree_trans *trans, u64 ino, u64 start, u64 end,
		       unsigned max_keys, struct tfs_run_list *freed, u64 *blocks, u64 *next);

/* Space freed by the commit at seq: reusable once seq is durable. */
void tfs_run_list_free_after(struct tfs_fs *fs, const struct tfs_run_list *l, u64 seq);
/* Space never referenced by a commit: back now. */
void tfs_run_list_free_now(struct tfs_fs *fs, const struct tfs_run_list *l);

#endif /* TFS_FS_EXTENTS_H */
