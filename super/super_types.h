/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_SUPER_SUPER_TYPES_H
#define TFS_SUPER_SUPER_TYPES_H

/* In-memory superblock state (the API is super/super.h). */

#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"
#include "super/super_format.h"

struct tfs_bdev;

/*
 * One member device's superblock in memory.  sb points at sb_bytes bytes
 * (the layout's sb_max_size): the fixed part, then 8 * sb->u64s bytes of
 * fields; the rest is zero.
 */
struct tfs_sb_handle {
	struct tfs_bdev *bdev;
	bool owns_bdev;	     /* tfs_sb_exit() closes bdev */
	struct tfs_sb *sb;   /* malloc()ed, sb_bytes long */
	size_t sb_bytes;     /* == le32_to_cpu(sb->layout.sb_max_size) */
	u64 read_offset;     /* the copy that was read (0 when built in memory) */
	unsigned copies_bad; /* copies that failed to read or validate */
};

#endif /* TFS_SUPER_SUPER_TYPES_H */
