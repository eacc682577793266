/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_FORMAT_H
#define TFS_FS_BTREE_FORMAT_H

/*
 * On-disk btree nodes.
 *
 * A node is node_size bytes (tfs_fs_node_size(): the superblock's choice,
 * 64 KiB by default, never more than a bucket), written whole at a
 * node_size-aligned offset inside one bucket: a struct tfs_btree_node
 * header, then nr_keys keys (struct tfs_bkey, fs/bkey.h) packed back to
 * back in strictly increasing position order, u64s words of them; the rest
 * of the node is zero.
 *
 * The checksum (crc32c, low 32 bits of csum; the upper bits zero) covers
 * the header from magic on and the keys, so zero padding needs no reading
 * on write and a node is checked by one pass over header and keys.  The
 * magic is TFS_BTREE_NODE_MAGIC xor a crc32c chain of the filesystem uuid
 * (tfs_btree_node_magic()), so a node left behind by another filesystem
 * never validates as ours.
 *
 * Invariants a valid node keeps (fs/btree_io.c checks every one and names
 * the first that fails):
 *  - min_key <= max_key; every key lies in [min_key, max_key], positions
 *    strictly increasing;
 *  - a leaf (level 0) holds no btree_ptr and no deleted key; an interior
 *    node (level > 0) holds only btree_ptr keys whose child level is
 *    level - 1, its last key is at max_key, and its keys' positions are
 *    the children's max_keys (child i covers (key[i-1], key[i]]);
 *  - the parent's btree_ptr for a node gives its seq and csum: a node read
 *    through a pointer must match both (a stale or misdirected copy never
 *    passes for the child).
 *
 * Append only: the node format version is TFS_BTREE_NODE_VERSION.
 */

#include <assert.h>
#include <stddef.h>

#include "fs/bkey.h"
#include "lib/checksum.h"
#include "lib/types.h"

#define TFS_BTREE_NODE_MAGIC 0x65657274627366ULL /* "fsbtree" */
#define TFS_BTREE_NODE_VERSION 1

/* Node sizes the engine accepts (bytes, powers of two). */
#define TFS_BTREE_NODE_SIZE_MIN (16 * 1024)
#define TFS_BTREE_NODE_SIZE_MAX (256 * 1024)
#define TFS_BTREE_NODE_SIZE_DEFAULT (64 * 1024)
/* Levels a tree may have (leaves are level 0). */
#define TFS_BTREE_MAX_DEPTH 8

struct tfs_btree_node {
	__le64 csum;  /* crc32c in the low 32 bits; upper bits zero */
	__le64 magic; /* tfs_btree_node_magic(uuid) */
	__le64 seq;   /* this copy's seq, unique per node write; the parent's pointer holds it */
	u8 btree_id;  /* enum tfs_btree_id */
	u8 level;     /* 0: leaf */
	__le16 version;
	__le32 nr_keys;
	__le32 u64s; /* words of keys after the header */
	__le32 pad0; /* zero */
	__le64 min_inode, min_offset;
	__le64 max_inode, max_offset;
	__le64 journal_seq; /* newest journal seq whose keys the node holds */
	__le64 reserved[2]; /* zero */
	__le64 _data[];	    /* the keys */
};
static_assert(sizeof(struct tfs_btree_node) == 96, "btree node header");
static_assert(offsetof(struct tfs_btree_node, magic) == 8, "node magic");
static_assert(offsetof(struct tfs_btree_node, seq) == 16, "node seq");
static_assert(offsetof(struct tfs_btree_node, btree_id) == 24, "node btree_id");
static_assert(offsetof(struct tfs_btree_node, level) == 25, "node level");
static_assert(offsetof(struct tfs_btree_node, nr_keys) == 28, "node nr_keys");
static_assert(offsetof(struct tfs_btree_node, u64s) == 32, "node u64s");
static_assert(offsetof(struct tfs_btree_node, min_inode) == 40, "node min_key");
static_assert(offsetof(struct tfs_btree_node, max_inode) == 56, "node max_key");
static_assert(offsetof(struct tfs_btree_node, journal_seq) == 72, "node journal_seq");
static_assert(offsetof(struct tfs_btree_node, _data) == 96, "node keys");

/* Words of keys a node of node_size bytes holds. */
static inline unsigned tfs_btree_node_capacity_u64s(unsigned node_size)
{
	return (node_size - sizeof(struct tfs_btree_node)) / 8;
}

/* The magic of this filesystem's nodes (see the top). */
static inline u64 tfs_btree_node_magic(const u8 uuid[16])
{
	u32 lo = tfs_crc32c(0x62747265, uuid, 16);
	u32 hi = tfs_crc32c(lo, uuid, 16);

	return TFS_BTREE_NODE_MAGIC ^ ((u64)hi << 32 | lo);
}

/* The checksum a node's csum field must hold (header from magic, then keys). */
static inline u32 tfs_btree_node_csum(const struct tfs_btree_node *n)
{
	size_t len = sizeof(*n) - offsetof(struct tfs_btree_node, magic) +
		     (size_t)le32_to_cpu(n->u64s) * 8;

	return tfs_crc32c(0, &n->magic, len);
}

static inline struct tfs_bpos tfs_btree_node_min(const struct tfs_btree_node *n)
{
	return TFS_POS(le64_to_cpu(n->min_inode), le64_to_cpu(n->min_offset));
}

static inline struct tfs_bpos tfs_btree_node_max(const struct tfs_btree_node *n)
{
	return TFS_POS(le64_to_cpu(n->max_inode), le64_to_cpu(n->max_offset));
}

/* Value bytes of a btree_ptr with nr_ptrs locations. */
static inline size_t tfs_btree_ptr_val_bytes(unsigned nr_ptrs)
{
	return sizeof(struct tfs_btree_ptr) + nr_ptrs * sizeof(struct tfs_btree_ptr_dev);
}

#endif /* TFS_FS_BTREE_FORMAT_H */
