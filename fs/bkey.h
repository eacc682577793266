/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BKEY_H
#define TFS_FS_BKEY_H

/*
 * Keys: what every btree stores, every journal btree_keys sub-entry carries
 * and every btree node holds, in one packed little-endian form.
 *
 * A key is a position (struct tfs_bpos: inode, offset, compared in that
 * order), a type and a value.  On disk, in the journal and in a node, a key
 * is a struct tfs_bkey header followed by its value, u64-aligned: u64s is
 * the whole key's size in u64 words, header included (the journal's rule:
 * a key starts with its __le16 size).  The value's meaning belongs to the
 * type; the btree code never looks inside a value except for btree_ptr.
 *
 * Invariants:
 *  - Positions are unique within a btree: inserting at an existing position
 *    overwrites.  A key of type `deleted` (no value) in a journal entry or
 *    a transaction means "remove what is at this position"; a node never
 *    holds one.
 *  - Every key type has a name, a validate function and a to_text function
 *    (fs/bkey.c: a type without its own uses the generic ones, which check
 *    only the size and print the value in hex).  Validation says what is
 *    wrong in one line and returns -TFS_ERR_bkey_invalid.
 *  - Append only: btree ids and key type numbers are on disk.
 */

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/types.h"

struct printbuf;

struct tfs_bpos {
	u64 inode;
	u64 offset;
};

#define TFS_POS(_inode, _offset) ((struct tfs_bpos){ .inode = (_inode), .offset = (_offset) })
#define TFS_POS_MIN TFS_POS(0, 0)
#define TFS_POS_MAX TFS_POS(UINT64_MAX, UINT64_MAX)

static inline int tfs_bpos_cmp(struct tfs_bpos a, struct tfs_bpos b)
{
	if (a.inode != b.inode)
		return a.inode < b.inode ? -1 : 1;
	if (a.offset != b.offset)
		return a.offset < b.offset ? -1 : 1;
	return 0;
}

static inline bool tfs_bpos_eq(struct tfs_bpos a, struct tfs_bpos b)
{
	return !tfs_bpos_cmp(a, b);
}

/* The next position (TFS_POS_MAX stays TFS_POS_MAX). */
static inline struct tfs_bpos tfs_bpos_successor(struct tfs_bpos p)
{
	if (++p.offset == 0 && ++p.inode == 0)
		return TFS_POS_MAX;
	return p;
}

/* The previous position (TFS_POS_MIN stays TFS_POS_MIN). */
static inline struct tfs_bpos tfs_bpos_predecessor(struct tfs_bpos p)
{
	if (p.offset-- == 0 && p.inode-- == 0)
		return TFS_POS_MIN;
	return p;
}

/* "inode:offset", both in decimal; TFS_POS_MAX prints as "POS_MAX". */
void tfs_bpos_to_text(struct printbuf *out, struct tfs_bpos pos);
/* Parses "inode:offset", "inode" (offset 0), "POS_MIN" or "POS_MAX"; 0 or -EINVAL. */
int tfs_bpos_parse(const char *s, struct tfs_bpos *pos);

/* clang-format off */
/* Btree ids: x(name, nr).  Append only (on disk). */
#define TFS_BTREE_IDS(x)	\
	x(inodes,	0)	\
	x(dirents,	1)	\
	x(extents,	2)	\
	x(xattrs,	3)	\
	x(alloc,	4)	\
	x(orphans,	5)

/*
 * Key types: x(name, nr).  Append only (on disk).  The value formats of the
 * filesystem's types (inode, dirent, extent, xattr, alloc, orphan) are in
 * fs/fs_format.h; btree_ptr's is below.  cookie (as in bcachefs) is an
 * opaque value allowed in every btree: for the engine's tests and
 * benchmarks, whose keys must not depend on the filesystem's value formats.
 */
#define TFS_BKEY_TYPES(x)	\
	x(deleted,	0)	\
	x(btree_ptr,	1)	\
	x(inode,	2)	\
	x(dirent,	3)	\
	x(extent,	4)	\
	x(xattr,	5)	\
	x(alloc,	6)	\
	x(orphan,	7)	\
	x(inline_data,	8)	\
	x(cookie,	9)	\
	x(accounting,	10)
/* clang-format on */

enum tfs_btree_id {
#define x(n, nr) TFS_BTREE_##n = nr,
	TFS_BTREE_IDS(x)
#undef x
	TFS_BTREE_NR
};

enum tfs_bkey_type {
#define x(n, nr) TFS_BKEY_##n = nr,
	TFS_BKEY_TYPES(x)
#undef x
	TFS_BKEY_TYPE_NR
};

/* Names ("extents", "dirent"); NULL for an unknown value.  Parse: value or -1. */
const char *tfs_btree_id_str(unsigned id);
const char *tfs_bkey_type_str(unsigned type);
int tfs_btree_id_parse(const char *name);

/* The packed key header (24 bytes), followed by the value. */
struct tfs_bkey {
	__le16 u64s; /* whole key, header included, in u64 words (>= 3) */
	u8 type;     /* enum tfs_bkey_type */
	u8 pad0;     /* zero */
	__le32 pad1; /* zero */
	__le64 inode;
	__le64 offset;
	__le64 _data[]; /* the value: (u64s - 3) words */
};
static_assert(sizeof(struct tfs_bkey) == 24, "bkey header");
static_assert(offsetof(struct tfs_bkey, u64s) == 0, "bkey u64s first (journal rule)");
static_assert(offsetof(struct tfs_bkey, inode) == 8, "bkey inode");
static_assert(offsetof(struct tfs_bkey, offset) == 16, "bkey offset");

#define TFS_BKEY_U64s (sizeof(struct tfs_bkey) / 8)
/* The largest key: header plus a value of at most 4 KiB + 64 bytes. */
#define TFS_BKEY_MAX_U64s (TFS_BKEY_U64s + (4096 + 64) / 8)
#define TFS_BKEY_MAX_VAL_BYTES ((TFS_BKEY_MAX_U64s - TFS_BKEY_U64s) * 8)

static inline struct tfs_bpos tfs_bkey_pos(const struct tfs_bkey *k)
{
	return TFS_POS(le64_to_cpu(k->inode), le64_to_cpu(k->offset));
}

static inline void tfs_bkey_set_pos(struct tfs_bkey *k, struct tfs_bpos pos)
{
	k->inode = cpu_to_le64(pos.inode);
	k->offset = cpu_to_le64(pos.offset);
}

static inline unsigned tfs_bkey_u64s(const struct tfs_bkey *k)
{
	return le16_to_cpu(k->u64s);
}

static inline size_t tfs_bkey_bytes(const struct tfs_bkey *k)
{
	return (size_t)tfs_bkey_u64s(k) * 8;
}

static inline size_t tfs_bkey_val_bytes(const struct tfs_bkey *k)
{
	return tfs_bkey_bytes(k) - sizeof(struct tfs_bkey);
}

static inline void *tfs_bkey_val(const struct tfs_bkey *k)
{
	return (void *)k->_data;
}

/*
 * A key with room for any value: for building a key on the stack and for
 * copies handed out by lookups and iterators.  Always u64-aligned.
 */
struct tfs_bkey_buf {
	union {
		struct tfs_bkey k;
		__le64 _u64s[TFS_BKEY_MAX_U64s];
	};
};

/*
 * Starts a key in buf: position, type and a zeroed value of val_bytes
 * (rounded up to whole words; at most TFS_BKEY_MAX_VAL_BYTES, else NULL).
 * Returns the value to fill.
 */
void *tfs_bkey_init(struct tfs_bkey_buf *buf, enum tfs_bkey_type type, struct tfs_bpos pos,
		    size_t val_bytes);

/* Copies k (whole) into buf. */
static inline void tfs_bkey_copy(struct tfs_bkey_buf *buf, const struct tfs_bkey *k)
{
	memcpy(buf->_u64s, k, tfs_bkey_bytes(k));
}

/* --- btree_ptr: the value of a key in an interior node --- */

#define TFS_BTREE_PTR_MAX_REPLICAS 4

struct tfs_btree_ptr_dev {
	__le32 dev;    /* member index */
	__le32 pad;    /* zero */
	__le64 offset; /* bytes from the start of the device */
};

/*
 * An interior node's key: its position is the child's max_key; the value
 * says where the child is (one location per replica) and what it must be
 * (seq and checksum, checked when the child is read, so a stale or
 * misdirected node is never taken for the child).
 */
struct tfs_btree_ptr {
	__le64 seq;  /* the child's tfs_btree_node.seq */
	__le32 csum; /* the child's checksum */
	u8 level;    /* the child's level */
	u8 nr_ptrs;  /* 1..TFS_BTREE_PTR_MAX_REPLICAS */
	__le16 pad;  /* zero */
	struct tfs_btree_ptr_dev ptrs[];
};
static_assert(sizeof(struct tfs_btree_ptr) == 16, "btree_ptr header");
static_assert(sizeof(struct tfs_btree_ptr_dev) == 16, "btree_ptr dev");

/* --- validation and text (fs/bkey.c) --- */

/*
 * Checks one key of at most max_bytes bytes as found in btree `btree_id`:
 * size (u64s >= 3 and within max_bytes), pad bytes zero, a known type
 * allowed in that btree (deleted only where allowed_deleted), then the
 * type's own value checks.  0 or -TFS_ERR_bkey_invalid with one line in err
 * ("dirent 4096:77: name length 300 > 255").
 */
int tfs_bkey_validate(const struct tfs_bkey *k, size_t max_bytes, enum tfs_btree_id btree_id,
		      bool allowed_deleted, struct printbuf *err);

/* "type inode:offset u64s N: <the type's value text>". */
void tfs_bkey_to_text(struct printbuf *out, const struct tfs_bkey *k);

/*
 * Per-type operations; fs/bkey.c has the table, indexed by type, holding
 * every type's ops by strong reference (a new type must be added there: a
 * static assertion checks the table's size), so every program linking
 * libtinyfs validates every type fully, whatever else it links.
 */
struct tfs_bkey_ops {
	/* Value checks (the header was checked); 0 or -TFS_ERR_bkey_invalid. */
	int (*validate)(const struct tfs_bkey *k, struct printbuf *err);
	void (*val_to_text)(struct printbuf *out, const struct tfs_bkey *k);
};

/* Whether type has its own validate and val_to_text (all but cookie: opaque). */
bool tfs_bkey_type_has_ops(unsigned type);

#endif /* TFS_FS_BKEY_H */
