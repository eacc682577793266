/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_SUPER_SUPER_TYPES_H
#define TFS_SUPER_SUPER_TYPES_H

/* In-memory superblock state (the API is super/super.h). */

#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"
#include "super/super_format.h"

struct tfs_bdev;

/* What tfs_sb_read() found at one copy the layout lists. */
struct tfs_sb_copy_status {
	u64 offset; /* bytes */
	u64 seq;    /* of a copy that validated; 0 otherwise */
	int code;   /* 0: valid and of this filesystem; else why it is not used */
	char *why;  /* malloc()ed reason when code != 0 (NULL when out of memory) */
};

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
	/*
	 * The layout sector was bad, or disagreed with the copies (whose
	 * layout is in use): the next successful write rewrites it.
	 */
	bool layout_stale;
	/* Every copy the layout in use lists, by tfs_sb_read() (even when it fails). */
	unsigned nr_copies;
	struct tfs_sb_copy_status copies[TFS_SB_LAYOUT_MAX_COPIES];
};

#endif /* TFS_SUPER_SUPER_TYPES_H */
