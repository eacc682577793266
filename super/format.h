/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_SUPER_FORMAT_H
#define TFS_SUPER_FORMAT_H

/*
 * Making a new filesystem (what mkfs.tinyfs does, callable from tests).
 *
 * Two steps, so a caller can check everything before touching a device:
 * tfs_format_plan() builds every member's superblock in memory from the
 * options and the devices' sizes (no I/O; every refusal happens here), and
 * tfs_format_write() then writes them: optional discard, zeroed journal
 * buckets, the layout sector, and the superblock copies (seq 1).
 *
 * Geometry per device: the superblock copies at 4096 and 4096 + sb_max_size;
 * first_bucket is the first bucket past them; the journal takes the next
 * journal_size worth of buckets (default: 1/64 of the device, clamped to
 * [TFS_JOURNAL_MIN_BUCKETS buckets, 1 GiB], to half the usable buckets and
 * to TFS_FORMAT_JOURNAL_DEFAULT_MAX_BUCKETS), one range in the journal field;
 * an explicit journal_size may take up to half the usable buckets and at
 * most TFS_JOURNAL_MAX_BUCKETS.  The bucket size, not the journal length in
 * buckets, grows with the device (up to 256 KiB by default).  The btree node
 * size is the option's, or TFS_BTREE_NODE_SIZE_DEFAULT cut to the smallest
 * bucket size.
 * The output depends only on the options: given the same uuids and time it
 * is byte for byte the same.
 */

#include <stdbool.h>

#include "lib/types.h"
#include "super/super_types.h"

struct printbuf;

/* Journal buckets mkfs picks at most by default (256 MiB of 256 KiB buckets). */
#define TFS_FORMAT_JOURNAL_DEFAULT_MAX_BUCKETS 1024
/* Most journal buckets a member may get: the one limit (super_format.h). */
#define TFS_FORMAT_JOURNAL_MAX_BUCKETS TFS_JOURNAL_MAX_BUCKETS

struct tfs_format_opts {
	u8 uuid[16];	  /* internal; must not be zero */
	u8 user_uuid[16]; /* must not be zero */
	const char *label;
	u32 block_size; /* bytes; 0: 4096 (or the largest logical block size) */
	/* 0: 1.  Required may not exceed wanted. */
	u8 metadata_replicas, metadata_replicas_required;
	u8 data_replicas, data_replicas_required;
	u8 error_action; /* enum tfs_error_action */
	u64 time;	 /* time_created and time_written, seconds */
	/* bytes; 0: TFS_BTREE_NODE_SIZE_DEFAULT, or the smallest bucket size if smaller */
	u32 btree_node_size;
};

struct tfs_format_dev {
	const char *name;	     /* for messages (the path); NULL: "device N" */
	u64 size;		     /* bytes of the device to use */
	unsigned logical_block_size; /* of the device; 0: 512 */
	u8 uuid[16];		     /* the member's; must not be zero */
	const char *label;
	u32 bucket_size;  /* bytes; 0: chosen from the size */
	u64 journal_size; /* bytes; 0: the default above */
	bool durability_set;
	u8 durability; /* when durability_set; else 1 */
	bool discard;
};

/*
 * Builds hs[0..nr) (zeroed by the caller) for devices devs[0..nr): one
 * superblock per member, identical but for dev_idx and the journal field,
 * seq 0, passing tfs_sb_validate().  Returns 0, or -TFS_ERR_invalid_option
 * (a bad size or option, or metadata or data replicas required above the
 * members' durabilities added up: never met), -TFS_ERR_device_too_small, with the reason in err
 * naming the device (devs[i].name, or by index).  hs[i]->bdev is left NULL.
 */
int tfs_format_plan(const struct tfs_format_opts *opts, const struct tfs_format_dev *devs,
		    unsigned nr, struct tfs_sb_handle *hs, struct printbuf *err);

/*
 * Writes the planned filesystem: for each handle (its bdev set by the
 * caller), discard the whole device when the member says so, zero the
 * journal buckets, write the layout sector; then tfs_sb_write_all().
 * Returns 0 or the first error (the rest is still attempted), with err
 * naming device and offset.
 */
int tfs_format_write(struct tfs_sb_handle *const *hs, unsigned nr, struct printbuf *err);

/* Bucket size tfs_format_plan() picks for a device of `size` bytes. */
u32 tfs_format_default_bucket_size(u64 size, u32 block_size);

#endif /* TFS_SUPER_FORMAT_H */
