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

/* --- inodes (btree inodes, type inode) --- */

/*
 * Position {ino, 0}.  Times are nanoseconds since the epoch (signed).
 * blocks counts file blocks with space behind them (written or unwritten,
 * once, whatever the replicas).  hash_seed seeds the name hashes of the
 * inode's dirents (a directory) and xattrs.  parent is a directory's
 * parent (the root's is itself), what ".." names; 0 for the rest.  A
 * symlink's target is an inline_data key {ino, 0} in the extents btree
 * (size bytes, no NUL, zero-padded to a word), committed with the inode.
 */
/* clang-format off */
#define TFS_INODE_FLAGS(x)	/* none defined yet: flags must be zero */
/* clang-format on */

/* Longest symlink target (PATH_MAX less the NUL). */
#define TFS_SYMLINK_MAX 4095
/* Most links to one inode (-EMLINK past it). */
#define TFS_LINK_MAX 65000

struct tfs_inode {
	__le32 mode; /* S_IFMT type and permission bits, as st_mode */
	__le32 nlink;
	__le32 uid;
	__le32 gid;
	__le64 size;
	__le64 blocks;
	__le64 rdev;
	__le64 generation;
	__le64 atime;
	__le64 mtime;
	__le64 ctime;
	__le64 btime;
	__le64 hash_seed;
	__le64 parent;
	__le32 flags; /* zero (TFS_INODE_FLAGS) */
	__le32 pad;   /* zero */
};
static_assert(sizeof(struct tfs_inode) == 104, "inode value");

/* --- dirents (btree dirents, type dirent) --- */

/*
 * Position {directory ino, offset}: offset is the name's slot, a seeded
 * 62-bit hash of the name (the directory's hash_seed) moved up by linear
 * probing past slots already taken; it is also the entry's readdir
 * position, so an entry keeps its position while it exists.  Offsets 0 and
 * 1 are "." and ".." and never stored.  A whiteout (ino 0, no name) keeps
 * a slot taken after its entry was removed while a later slot of the same
 * probe run is in use, so lookups keep probing past it.
 */
#define TFS_DIRENT_OFFSET_MIN 2
#define TFS_DIRENT_OFFSET_MAX ((1ULL << 62) - 1)

struct tfs_dirent {
	__le64 ino;  /* the target; 0: a whiteout */
	u8 d_type;   /* DT_REG, DT_DIR, ... of the target (0 for a whiteout) */
	u8 name_len; /* 1..255 (0 for a whiteout) */
	__le16 pad0; /* zero */
	__le32 pad1; /* zero */
	u8 name[];   /* name_len bytes, no '/' or NUL, zero-padded to a word */
};
static_assert(sizeof(struct tfs_dirent) == 16, "dirent value");

static inline size_t tfs_dirent_val_bytes(unsigned name_len)
{
	return (sizeof(struct tfs_dirent) + name_len + 7) & ~(size_t)7;
}

/* --- xattrs (btree xattrs, type xattr) --- */

/*
 * Position {ino, slot << TFS_XATTR_CHUNK_BITS | chunk}: the slot is a
 * seeded 58-bit hash of (type, name) with linear probing, as for dirents;
 * a value longer than one key holds is split over chunks 1, 2, ... of the
 * same slot.  Chunk 0 names the attribute (type and the name after its
 * namespace prefix) and carries value_len, the whole value's length;
 * every chunk holds chunk_len value bytes after the name.  A whiteout is
 * a chunk 0 of type whiteout with nothing else.  The system namespace
 * holds only the two POSIX ACL names, stored by type with no name.
 */
/* clang-format off */
#define TFS_XATTR_TYPES(x)		\
	x(whiteout,		0)	\
	x(user,			1)	\
	x(trusted,		2)	\
	x(security,		3)	\
	x(posix_acl_access,	4)	\
	x(posix_acl_default,	5)	\
	x(cont,			6)
/* clang-format on */

enum tfs_xattr_type {
#define x(n, nr) TFS_XATTR_##n = nr,
	TFS_XATTR_TYPES(x)
#undef x
	TFS_XATTR_TYPE_NR
};

#define TFS_XATTR_CHUNK_BITS 5
#define TFS_XATTR_MAX_CHUNKS (1U << TFS_XATTR_CHUNK_BITS)
#define TFS_XATTR_SLOT_MAX ((1ULL << 58) - 1)
/* Value bytes plus name bytes one key holds. */
#define TFS_XATTR_CHUNK_BYTES 4088

struct tfs_xattr {
	u8 type;	  /* enum tfs_xattr_type */
	u8 name_len;	  /* chunk 0: bytes of name after the prefix; else 0 */
	__le16 chunk_len; /* value bytes in this key */
	__le32 value_len; /* chunk 0: the whole value's length; else 0 */
	u8 data[];	  /* name, then chunk_len value bytes, zero-padded */
};
static_assert(sizeof(struct tfs_xattr) == 8, "xattr value");

static inline size_t tfs_xattr_val_bytes(unsigned name_len, unsigned chunk_len)
{
	return (sizeof(struct tfs_xattr) + name_len + chunk_len + 7) & ~(size_t)7;
}

/* --- orphans (btree orphans, type orphan) --- */

/*
 * Position {ino, 0}: an inode whose cleanup a crash may interrupt.  Open
 * finishes it: an inode with nlink 0 (unlinked while open, or whose
 * removal did not finish) is removed with its extents and xattrs; with
 * TFS_ORPHAN_TRUNCATE, extents past its size are removed.  The key goes in
 * the commit that makes the cleanup necessary and leaves in the commit that
 * finishes it.
 */
/* clang-format off */
#define TFS_ORPHAN_FLAGS(x)	\
	x(unlinked,	0)	\
	x(truncate,	1)
/* clang-format on */

enum tfs_orphan_flags {
#define x(n, b) TFS_ORPHAN_##n = 1U << b,
	TFS_ORPHAN_FLAGS(x)
#undef x
};

struct tfs_orphan {
	__le64 flags; /* enum tfs_orphan_flags, at least one */
};
static_assert(sizeof(struct tfs_orphan) == 8, "orphan value");

/* --- alloc (btree alloc: types alloc and accounting) --- */

/*
 * Alloc keys: which blocks of one bucket are in use, per owner.
 *  - {member, bucket} (data type user): the blocks file data (extents)
 *    references;
 *  - {TFS_ALLOC_BTREE_INODE + member, bucket} (data type btree): the
 *    blocks btree nodes of the durable trees take, every tree but the alloc
 *    btree itself (see below).
 * (bucket = byte offset / the member's bucket size.)  A bucket with no
 * such blocks has no key; one bucket may have both keys (nodes and data
 * share buckets), never a block set in both.
 *
 * User keys are changed only by the commit trigger (fs/alloc_keys.c), in
 * the same transaction, so in the same journal entry, as the extent keys
 * that take or release the space.  Btree keys are changed only by a
 * checkpoint, in the journal entry that holds its root entry: the new
 * copies it wrote set, the copies the new tree no longer refers to clear.
 * So at every durable point both agree with what the durable extents and
 * trees use.  The alloc btree's own nodes are not recorded (a checkpoint of
 * it would change the keys it just wrote back, without end): open reads
 * the whole alloc btree anyway to load the keys and marks its nodes from
 * that walk.
 *
 * bits: bit i (of word i / 64, LSB first) is block i of the bucket;
 * nr_blocks = bucket size / block size, bits past it are zero; used is the
 * number of bits set (at least 1).
 */
/* clang-format off */
#define TFS_ALLOC_DATA_TYPES(x)	\
	x(free,		0)	\
	x(user,		1)	\
	x(btree,	2)
/* clang-format on */

enum tfs_alloc_data_type {
#define x(n, nr) TFS_ALLOC_DATA_##n = nr,
	TFS_ALLOC_DATA_TYPES(x)
#undef x
	TFS_ALLOC_DATA_NR
};

/* The first position (inode) of btree node alloc keys: + member. */
#define TFS_ALLOC_BTREE_INODE 0x100ULL

/* The position of the alloc key of (data type, member, bucket). */
static inline struct tfs_bpos tfs_alloc_pos(enum tfs_alloc_data_type type, unsigned dev, u64 bucket)
{
	return TFS_POS((type == TFS_ALLOC_DATA_btree ? TFS_ALLOC_BTREE_INODE : 0) + dev, bucket);
}

/* Most blocks per bucket an alloc key's bitmap covers (its value stays within a key). */
#define TFS_ALLOC_MAX_BUCKET_BLOCKS 32768

struct tfs_alloc_key {
	u8 data_type;	  /* enum tfs_alloc_data_type: user or btree, as the position */
	u8 pad0;	  /* zero */
	__le16 pad1;	  /* zero */
	__le32 nr_blocks; /* blocks per bucket: bits in the bitmap */
	__le32 used;	  /* bits set */
	__le32 pad2;	  /* zero */
	__le64 bits[];	  /* DIV_ROUND_UP(nr_blocks, 64) words */
};
static_assert(sizeof(struct tfs_alloc_key) == 16, "alloc value");

static inline size_t tfs_alloc_key_val_bytes(unsigned nr_blocks)
{
	return sizeof(struct tfs_alloc_key) + DIV_ROUND_UP(nr_blocks, 64) * 8;
}

/*
 * Split write-back markers: a `cookie` key with no value at
 * {TFS_ALLOC_SPLIT_INODE, btree id} in the alloc btree.  A write-back whose
 * btree alloc keys do not fit one journal entry commits them in several
 * (fs/btree_write.c): the first sets the marker, the last removes it.  A
 * writable open that finds one rewrites every btree alloc key (and the
 * btree_blocks counters) from the nodes of the durable trees, then removes
 * the markers (tfs_fsck_split_writeback()).  Cookie keys are valid in every
 * btree, so older versions read such an alloc btree (and leave the leak to
 * fsck -y, as they did).
 */
#define TFS_ALLOC_SPLIT_INODE 0x200ULL

/*
 * Alloc rebuild marker: a `cookie` key with no value at
 * TFS_ALLOC_REBUILD_POS in the alloc btree.  fsck -y replaced lost alloc
 * btree leaves and has not yet rewritten every alloc key and counter from
 * the extents and nodes: it sets the marker before the replacement can be
 * written back and removes it once its allocation check left nothing.  An
 * open that finds it builds the allocator from the extents and every
 * tree's nodes as well as the keys (fs/fs.c, fs_alloc_rebuild()), so a
 * crash during that fsck never lets a mount hand out space in use.  Older
 * versions ignore it (cookie keys are valid in every btree).
 */
#define TFS_ALLOC_REBUILD_INODE 0x201ULL
#define TFS_ALLOC_REBUILD_POS TFS_POS(TFS_ALLOC_REBUILD_INODE, 0)

/*
 * Accounting keys (type accounting, btree alloc), position
 * {TFS_ACCT_INODE, kind << 32 | member}: filesystem-wide counters, changed
 * by the same trigger in the same transaction as what they count, so they
 * are exact at every durable point and replay restores them with the keys.
 *   user_blocks: blocks of member `member` that extents reference (the sum
 *                of its alloc keys' used);
 *   inodes:      inode keys in the inodes btree (member 0);
 *   btree_blocks: blocks of member `member` that btree nodes take (the sum
 *                of its btree alloc keys' used), changed with them.
 * A counter at zero has no key.
 */
#define TFS_ACCT_INODE 0xffffffffULL

/* clang-format off */
#define TFS_ACCT_KINDS(x)	\
	x(user_blocks,	1)	\
	x(inodes,	2)	\
	x(btree_blocks,	3)
/* clang-format on */

enum tfs_acct_kind {
#define x(n, nr) TFS_ACCT_##n = nr,
	TFS_ACCT_KINDS(x)
#undef x
	TFS_ACCT_KIND_NR
};

static inline struct tfs_bpos tfs_acct_pos(enum tfs_acct_kind kind, unsigned dev)
{
	return TFS_POS(TFS_ACCT_INODE, (u64)kind << 32 | dev);
}

struct tfs_accounting {
	__le64 value;
};
static_assert(sizeof(struct tfs_accounting) == 8, "accounting value");

#endif /* TFS_FS_FS_FORMAT_H */
