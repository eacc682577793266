/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_SUPER_SUPER_FORMAT_H
#define TFS_SUPER_SUPER_FORMAT_H

/*
 * The on-disk superblock.  Everything is little-endian; every size and
 * offset is pinned by a static_assert.  docs/on-disk-format.md has the byte
 * map.
 *
 * Every member device starts with:
 *
 *	[0, 3584)	untouched by reads; zeroed by mkfs
 *	[3584, 4096)	struct tfs_sb_layout: where the superblock copies are,
 *			and the uuid of the filesystem they belong to
 *	[4096, ...)	superblock copies at layout.sb_offset[], each at most
 *			layout.sb_max_size bytes (primary first, then backups)
 *	first_bucket	buckets: the journal's, then everything else
 *
 * A superblock copy is struct tfs_sb (fixed part) followed by u64s * 8 bytes
 * of variable fields, each a struct tfs_sb_field header {u64s, type} and a
 * payload; u64s counts the whole field including its header, so a reader
 * skips a field it does not know.  csum is a crc32c over the copy from
 * `magic` to the end of the fields.
 */

#include <assert.h>

#include "lib/types.h"

#define TFS_SB_MAGIC 0x3142535346594e54ULL	  /* "TNYFSSB1" little-endian */
#define TFS_SB_LAYOUT_MAGIC 0x31594c5346594e54ULL /* "TNYFSLY1" */

/* clang-format off */
/*
 * Format versions: x(name, nr).  2: the btree node size in the fixed part,
 * the filesystem uuid in the layout (layout version 2), the journal field
 * as bucket ranges.  3: the alloc btree records the blocks file data uses
 * and accounting keys the usage counters (fs/fs_format.h); open no longer
 * finds data space from the extents, so a version 2 filesystem (no alloc
 * keys) would open with its data space free.  4: the alloc btree also
 * records btree node space (alloc keys of data type btree, accounting
 * btree_blocks); open no longer derives it from the node pointers, so a
 * version 3 filesystem would open with its node space free.  Nothing older
 * was ever in use: this build reads version 4 only.
 */
#define TFS_SB_VERSIONS(x)	\
	x(initial, 1)		\
	x(btree_node_size, 2)	\
	x(alloc_keys, 3)	\
	x(alloc_nodes, 4)
/* clang-format on */

enum tfs_sb_version {
#define x(n, nr) TFS_SB_VERSION_##n = nr,
	TFS_SB_VERSIONS(x)
#undef x
	TFS_SB_VERSION_NR
};

#define TFS_SB_VERSION_CURRENT (TFS_SB_VERSION_NR - 1)
#define TFS_SB_VERSION_MIN TFS_SB_VERSION_alloc_nodes

#define TFS_SB_LAYOUT_OFFSET 3584 /* bytes: sector 7 */
#define TFS_SB_LAYOUT_SIZE 512
#define TFS_SB_OFFSET 4096 /* the primary copy */
#define TFS_SB_MAX_SIZE_DEFAULT (32 * 1024)
#define TFS_SB_MAX_SIZE_MIN 4096
#define TFS_SB_MAX_SIZE_MAX (1024 * 1024)
#define TFS_SB_LAYOUT_MAX_COPIES 8
#define TFS_SB_LAYOUT_VERSION 2 /* 2: the filesystem uuid in the layout */

/*
 * Members of one filesystem: the journal writes to at most this many
 * (journal/journal_types.h: TFS_JOURNAL_MAX_DEVS is this), so mkfs and
 * validation allow no more.
 */
#define TFS_MAX_DEVICES 16
#define TFS_MAX_REPLICAS 4
#define TFS_MAX_DURABILITY 4
#define TFS_LABEL_SIZE 32

#define TFS_BLOCK_SIZE_MIN 512
#define TFS_BLOCK_SIZE_MAX (64 * 1024)
#define TFS_BUCKET_SIZE_MAX (1U << 30)
/* A member has at least this many buckets past first_bucket. */
#define TFS_MIN_BUCKETS 32
/*
 * A journal field lists at least this many buckets: mkfs never makes fewer
 * and validation refuses fewer.  (The journal itself needs its reserve plus
 * two: journal/journal.c, tfs_journal_init().)
 */
#define TFS_JOURNAL_MIN_BUCKETS 8
/*
 * ... and at most this many: the journal keeps two u64s a bucket in memory
 * (16 MiB at this count) and counts buckets in an unsigned; it reads every
 * bucket when it opens.  The journal has no lower limit of its own: this is
 * the one limit, for mkfs and validation alike.
 */
#define TFS_JOURNAL_MAX_BUCKETS (1U << 20)

/*
 * Btree nodes: one size for the whole filesystem (struct
 * tfs_sb.btree_node_size), a power of two in [MIN, MAX], at least the
 * block size and dividing every member's bucket size (nodes never cross a
 * bucket).  mkfs's default: TFS_BTREE_NODE_SIZE_DEFAULT, or the smallest
 * bucket size when that is smaller.
 */
#define TFS_BTREE_NODE_SIZE_MIN (16 * 1024) /* a node holds several of the largest keys */
#define TFS_BTREE_NODE_SIZE_MAX (256 * 1024)
#define TFS_BTREE_NODE_SIZE_DEFAULT (64 * 1024)

/*
 * Where the superblock copies are.  The same 512 bytes sit at
 * TFS_SB_LAYOUT_OFFSET and inside every copy (struct tfs_sb.layout), so a
 * damaged layout sector is recovered from the primary copy.  uuid is the
 * filesystem's (struct tfs_sb.uuid): a copy of another filesystem left on
 * the device is told apart by it even when the primary is unreadable.
 */
struct tfs_sb_layout {
	__le32 csum;  /* crc32c of bytes [8, 512) */
	__le32 pad0;  /* zero */
	__le64 magic; /* TFS_SB_LAYOUT_MAGIC */
	u8 version;   /* TFS_SB_LAYOUT_VERSION */
	u8 nr_superblocks;
	__le16 pad1;
	__le32 sb_max_size;			    /* bytes; every copy fits in this */
	__le64 sb_offset[TFS_SB_LAYOUT_MAX_COPIES]; /* bytes; [0] is the primary */
	u8 uuid[16];				    /* the filesystem's internal uuid */
	u8 pad2[408];
};
static_assert(sizeof(struct tfs_sb_layout) == TFS_SB_LAYOUT_SIZE, "layout size");
static_assert(offsetof(struct tfs_sb_layout, magic) == 8, "layout magic");
static_assert(offsetof(struct tfs_sb_layout, version) == 16, "layout version");
static_assert(offsetof(struct tfs_sb_layout, nr_superblocks) == 17, "layout nr");
static_assert(offsetof(struct tfs_sb_layout, sb_max_size) == 20, "layout max size");
static_assert(offsetof(struct tfs_sb_layout, sb_offset) == 24, "layout offsets");
static_assert(offsetof(struct tfs_sb_layout, uuid) == 88, "layout uuid");
static_assert(offsetof(struct tfs_sb_layout, pad2) == 104, "layout pad");

/* clang-format off */
/* What to do on a metadata error: x(name, nr). */
#define TFS_ERROR_ACTIONS(x)	\
	x(continue, 0)		\
	x(ro, 1)		\
	x(panic, 2)

/* Member device states: x(name, nr). */
#define TFS_MEMBER_STATES(x)	\
	x(rw, 0)		\
	x(ro, 1)		\
	x(failed, 2)		\
	x(spare, 3)

/* Variable field types: x(name, nr).  Append only. */
#define TFS_SB_FIELDS(x)	\
	x(members, 1)		\
	x(journal, 2)		\
	x(clean, 3)

/* Entries of the clean field: x(name, nr).  Append only. */
#define TFS_CLEAN_ENTRY_TYPES(x)	\
	x(btree_root, 1)
/* clang-format on */

enum tfs_error_action {
#define x(n, nr) TFS_ON_ERROR_##n = nr,
	TFS_ERROR_ACTIONS(x)
#undef x
	TFS_ON_ERROR_NR
};

enum tfs_member_state {
#define x(n, nr) TFS_MEMBER_##n = nr,
	TFS_MEMBER_STATES(x)
#undef x
	TFS_MEMBER_STATE_NR
};

enum tfs_sb_field_type {
#define x(n, nr) TFS_SB_FIELD_##n = nr,
	TFS_SB_FIELDS(x)
#undef x
	TFS_SB_FIELD_NR
};

enum tfs_clean_entry_type {
#define x(n, nr) TFS_CLEAN_##n = nr,
	TFS_CLEAN_ENTRY_TYPES(x)
#undef x
	TFS_CLEAN_ENTRY_NR
};

/* Superblock flags (struct tfs_sb.flags). */
enum tfs_sb_flags {
	TFS_SB_FLAG_CLEAN = 1 << 0, /* unmounted cleanly: the clean field is current */
};

/* The fixed part of a superblock copy. */
struct tfs_sb {
	__le32 csum;	  /* of bytes [offsetof(magic), 8 * u64s + sizeof(struct tfs_sb)) */
	__le32 csum_type; /* of this superblock: enum tfs_csum_type (crc32c) */
	__le64 magic;	  /* TFS_SB_MAGIC */
	__le16 version;
	__le16 version_min;	    /* oldest version whose readers can read this */
	__le32 u64s;		    /* of the variable fields after this struct */
	__le64 seq;		    /* bumped on every write; the newest valid copy wins */
	u8 uuid[16];		    /* internal: identifies the filesystem's members */
	u8 user_uuid[16];	    /* what blkid and users see; may be changed */
	char label[TFS_LABEL_SIZE]; /* NUL-padded; may fill the field */
	__le32 block_size;	    /* bytes */
	u8 dev_idx;		    /* this device's index in the members */
	u8 nr_devices;
	__le16 flags; /* enum tfs_sb_flags */
	u8 metadata_replicas;
	u8 metadata_replicas_required;
	u8 data_replicas;
	u8 data_replicas_required;
	u8 metadata_csum_type; /* enum tfs_csum_type for btree and journal */
	u8 data_csum_type;
	u8 error_action; /* enum tfs_error_action */
	u8 pad0;
	__le64 time_created;	/* seconds since the epoch */
	__le64 time_written;	/* of the last write, seconds */
	__le64 features;	/* incompatible features; none yet, must be 0 */
	__le32 btree_node_size; /* bytes; see TFS_BTREE_NODE_SIZE_MIN */
	__le32 pad1;
	__le64 reserved[4];
	struct tfs_sb_layout layout; /* a copy of the layout sector */
	__le64 _data[];		     /* the variable fields */
};
static_assert(offsetof(struct tfs_sb, magic) == 8, "sb magic");
static_assert(offsetof(struct tfs_sb, version) == 16, "sb version");
static_assert(offsetof(struct tfs_sb, u64s) == 20, "sb u64s");
static_assert(offsetof(struct tfs_sb, seq) == 24, "sb seq");
static_assert(offsetof(struct tfs_sb, uuid) == 32, "sb uuid");
static_assert(offsetof(struct tfs_sb, user_uuid) == 48, "sb user_uuid");
static_assert(offsetof(struct tfs_sb, label) == 64, "sb label");
static_assert(offsetof(struct tfs_sb, block_size) == 96, "sb block_size");
static_assert(offsetof(struct tfs_sb, dev_idx) == 100, "sb dev_idx");
static_assert(offsetof(struct tfs_sb, nr_devices) == 101, "sb nr_devices");
static_assert(offsetof(struct tfs_sb, flags) == 102, "sb flags");
static_assert(offsetof(struct tfs_sb, metadata_replicas) == 104, "sb options");
static_assert(offsetof(struct tfs_sb, error_action) == 110, "sb error_action");
static_assert(offsetof(struct tfs_sb, time_created) == 112, "sb time_created");
static_assert(offsetof(struct tfs_sb, time_written) == 120, "sb time_written");
static_assert(offsetof(struct tfs_sb, features) == 128, "sb features");
static_assert(offsetof(struct tfs_sb, btree_node_size) == 136, "sb btree_node_size");
static_assert(offsetof(struct tfs_sb, reserved) == 144, "sb reserved");
static_assert(offsetof(struct tfs_sb, layout) == 176, "sb layout");
static_assert(offsetof(struct tfs_sb, _data) == 688, "sb fields");
static_assert(sizeof(struct tfs_sb) == 688, "sb size");

/* Header of every variable field. */
struct tfs_sb_field {
	__le32 u64s; /* of the whole field, this header included */
	__le32 type; /* enum tfs_sb_field_type */
	__le64 _data[];
};
static_assert(sizeof(struct tfs_sb_field) == 8, "field header");

/* One member device, as every member's superblock records it. */
struct tfs_member {
	u8 uuid[16];
	__le64 nbuckets;     /* buckets on the device, first_bucket included */
	__le64 first_bucket; /* first bucket past the superblock copies */
	__le32 bucket_size;  /* bytes */
	u8 state;	     /* enum tfs_member_state */
	u8 durability;	     /* replicas one copy here counts for; 0: cache */
	u8 discard;	     /* issue discards for freed buckets */
	u8 pad0;
	__le64 last_mount; /* seconds since the epoch; 0: never */
	char label[TFS_LABEL_SIZE];
};
static_assert(sizeof(struct tfs_member) == 80, "member size");
static_assert(offsetof(struct tfs_member, nbuckets) == 16, "member nbuckets");
static_assert(offsetof(struct tfs_member, first_bucket) == 24, "member first_bucket");
static_assert(offsetof(struct tfs_member, bucket_size) == 32, "member bucket_size");
static_assert(offsetof(struct tfs_member, state) == 36, "member state");
static_assert(offsetof(struct tfs_member, last_mount) == 40, "member last_mount");
static_assert(offsetof(struct tfs_member, label) == 48, "member label");

/*
 * Every member, indexed by device index.  member_bytes lets a later version
 * grow struct tfs_member: readers use the first sizeof(struct tfs_member)
 * bytes of each entry.
 */
struct tfs_sb_field_members {
	struct tfs_sb_field field;
	__le16 member_bytes;
	__le16 pad0;
	__le32 pad1;
	struct tfs_member members[];
};
static_assert(sizeof(struct tfs_sb_field_members) == 16, "members header");

/* A run of journal buckets: start, start + 1, ..., start + nr - 1. */
struct tfs_journal_bucket_range {
	__le64 start;
	__le64 nr; /* >= 1 */
};
static_assert(sizeof(struct tfs_journal_bucket_range) == 16, "journal range");

/*
 * This device's journal buckets, in ring order: the ranges one after the
 * other ((u64s - 1) / 2 of them), so the field's size does not grow with
 * the journal.
 */
struct tfs_sb_field_journal {
	struct tfs_sb_field field;
	struct tfs_journal_bucket_range ranges[];
};
static_assert(sizeof(struct tfs_sb_field_journal) == 8, "journal header");

/*
 * One entry of the clean field: u64s counts the whole entry, header
 * included, so entries can grow and unknown types are skipped.
 * btree_root: _data holds the root's key (the btree's own format).
 */
struct tfs_clean_entry {
	__le16 u64s;
	u8 type; /* enum tfs_clean_entry_type */
	u8 btree_id;
	u8 level;
	u8 pad[3];
	__le64 _data[];
};
static_assert(sizeof(struct tfs_clean_entry) == 8, "clean entry header");

/*
 * Written at a clean unmount (with TFS_SB_FLAG_CLEAN): the journal seq to
 * resume at and the btree roots, so mount need not replay.
 */
struct tfs_sb_field_clean {
	struct tfs_sb_field field;
	__le32 flags;
	__le32 pad0;
	__le64 journal_seq;
	struct tfs_clean_entry entries[];
};
static_assert(sizeof(struct tfs_sb_field_clean) == 24, "clean header");
static_assert(offsetof(struct tfs_sb_field_clean, journal_seq) == 16, "clean journal_seq");

#endif /* TFS_SUPER_SUPER_FORMAT_H */
