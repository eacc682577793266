/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_FS_FORMAT_H
#define TFS_FS_FS_FORMAT_H

/*
 * On-disk values of the filesystem's key types (the key header and
 * positions are in fs/bkey.h).  All integers little endian; every struct
 * has a static_assert on its size.
 *
 * Extents (btree extents, type extent): position {inode, first file block};
 * the value maps nr_blocks file blocks to nr_ptrs replicas of the same
 * bytes, each contiguous on one member, with one crc32c per block (of the
 * block as written; verified on every read).  An unwritten extent
 * (fallocate) has pointers but reads as zeros and carries no checksums.
 * Extents of one inode never overlap.
 */

#include <assert.h>
#include <stddef.h>

#include "fs/bkey.h"
#include "lib/types.h"

/* Longest extent, in blocks (keeps the checksum array under 4 KiB). */
#define TFS_EXTENT_MAX_BLOCKS 256
#define TFS_DATA_MAX_REPLICAS 4

enum tfs_extent_flags {
	TFS_EXTENT_UNWRITTEN = 1 << 0,
};

struct tfs_extent_ptr {
	__le32 dev;    /* member index */
	__le32 pad;    /* zero */
	__le64 offset; /* bytes from the start of the device */
};
static_assert(sizeof(struct tfs_extent_ptr) == 16, "extent ptr");

struct tfs_extent {
	__le32 nr_blocks; /* 1..TFS_EXTENT_MAX_BLOCKS */
	u8 nr_ptrs;	  /* 1..TFS_DATA_MAX_REPLICAS */
	u8 flags;	  /* enum tfs_extent_flags */
	__le16 pad;	  /* zero */
	struct tfs_extent_ptr ptrs[];
	/* then, unless unwritten: __le32 csums[nr_blocks], zero-padded to a word */
};
static_assert(sizeof(struct tfs_extent) == 8, "extent header");

/* Value bytes of an extent with these counts. */
static inline size_t tfs_extent_val_bytes(unsigned nr_ptrs, unsigned nr_blocks, bool unwritten)
{
	return sizeof(struct tfs_extent) + nr_ptrs * sizeof(struct tfs_extent_ptr) +
	       (unwritten ? 0 : nr_blocks * sizeof(__le32));
}

/* The checksum array of a written extent. */
static inline __le32 *tfs_extent_csums(const struct tfs_extent *e)
{
	return (__le32 *)((char *)e + sizeof(*e) + e->nr_ptrs * sizeof(struct tfs_extent_ptr));
}

#endif /* TFS_FS_FS_FORMAT_H */
