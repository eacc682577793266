/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_JOURNAL_JOURNAL_FORMAT_H
#define TFS_JOURNAL_JOURNAL_FORMAT_H

/*
 * On-disk format of journal entries.
 *
 * Each member device holds a ring of journal buckets (their numbers come from
 * the superblock's "journal" field; the journal itself only sees byte
 * offsets).  A bucket holds jsets back to back, each padded to the journal
 * block size; an entry never crosses a bucket boundary.
 *
 * A jset is a header followed by u64s words of sub-entries (struct
 * jset_entry), each an 8-byte header and a payload.  All integers are little
 * endian.  The checksum (crc32c, in the low 32 bits of csum) covers every
 * byte from magic to the end of the sub-entries; padding is not covered.
 *
 * The magic is TFS_JSET_MAGIC xor two chained crc32c of the filesystem's
 * uuid (tfs_jset_magic()), so an entry left behind by another filesystem on the
 * same device never validates as ours.
 *
 * Flags: no_flush: written without making anything durable; replay trusts
 * only entries up to the newest entry without it (a flush entry).
 * post_flush (a flush entry): written with no flush before it, made durable
 * by one flush after its write, together with every older entry and the
 * file data its commits refer to -- so a power cut during that flush may
 * leave it on disk without them.  Replay trusts such an entry only when
 * every entry since the previous flush entry is there and the data of
 * every extent they insert matches its checksums
 * (tfs_journal_read_verify_tail()); else it stops at the previous flush
 * entry.  An old reader sees unknown flags and skips it as corrupt.
 *
 * A btree_keys sub-entry's flags (enum tfs_jset_entry_flags): old_data:
 * every key in it refers only to file data an older committed key already
 * referred to (a piece of an existing extent re-keyed by a cut, nothing
 * written for it), so the post-flush check skips it: that data was durable
 * before the window, or is checked with the key of the window that wrote it.
 * Writers before this flag zeroed the byte (reservations are zeroed): their
 * entries read as "check every key", as they were checked then; a reader
 * before it ignores the byte and checks every key.  Other types: zero.
 *
 * A zero-filled hole in the sub-entries (a reservation its owner did not
 * fill) reads as empty btree_keys sub-entries of one word each, which replay
 * skips: that is why btree_keys is type 0.
 */

#include <assert.h>
#include <string.h>

#include "lib/checksum.h"
#include "lib/types.h"

#define TFS_JSET_MAGIC 0x6c6e726a73667474ULL /* "ttfsjrnl" */
#define TFS_JSET_VERSION 1

/* clang-format off */
#define TFS_JSET_FLAGS(x)	\
	x(no_flush, 0)		\
	x(post_flush, 1)

/*
 * btree_keys: a run of keys for (btree_id, level).  Each key starts with a
 *	__le16 holding its size in u64s, that word included (>= 1); the rest of
 *	the key belongs to the btree layer.
 * btree_root: one key, the root of btree_id at level (same key rule).
 * usage: struct jset_usage.
 * blacklist: struct jset_blacklist: seqs found after the newest flush entry
 *	at the last start; they were never durable in order and must never be
 *	replayed, even though valid copies of them may remain on disk.
 */
#define TFS_JSET_ENTRY_FLAGS(x)	\
	x(old_data, 0)

#define TFS_JSET_ENTRY_TYPES(x)	\
	x(btree_keys, 0)	\
	x(btree_root, 1)	\
	x(usage, 2)		\
	x(blacklist, 3)
/* clang-format on */

enum tfs_jset_flags {
#define x(n, b) TFS_JSET_##n = 1U << (b),
	TFS_JSET_FLAGS(x)
#undef x
};

enum tfs_jset_entry_flags {
#define x(n, b) TFS_JSET_KEYS_##n = 1U << (b),
	TFS_JSET_ENTRY_FLAGS(x)
#undef x
};

enum tfs_jset_entry_type {
#define x(n, v) TFS_JSET_ENTRY_##n = v,
	TFS_JSET_ENTRY_TYPES(x)
#undef x
	TFS_JSET_ENTRY_NR
};

struct jset_entry {
	__le16 u64s; /* payload words, after this header */
	u8 btree_id;
	u8 level;
	u8 type;  /* enum tfs_jset_entry_type */
	u8 flags; /* btree_keys: enum tfs_jset_entry_flags; zero otherwise */
	u8 pad[2];
	__le64 _data[];
};

struct jset_usage {
	__le32 kind; /* owned by the allocator */
	__le32 dev;
	__le64 value;
};

struct jset_blacklist {
	__le64 start; /* first seq that must not be replayed */
	__le64 end;   /* last one, inclusive */
};

struct jset {
	__le64 csum; /* crc32c in the low 32 bits; upper bits zero */
	__le64 magic;
	__le64 seq;
	__le64 last_seq; /* oldest seq replay needs, when this is the newest */
	__le32 version;
	__le32 flags; /* enum tfs_jset_flags */
	__le32 u64s;  /* of sub-entries */
	__le32 pad;
	__le64 _data[];
};

static_assert(sizeof(struct jset_entry) == 8, "jset_entry size");
static_assert(offsetof(struct jset_entry, u64s) == 0, "jset_entry.u64s");
static_assert(offsetof(struct jset_entry, btree_id) == 2, "jset_entry.btree_id");
static_assert(offsetof(struct jset_entry, level) == 3, "jset_entry.level");
static_assert(offsetof(struct jset_entry, type) == 4, "jset_entry.type");
static_assert(offsetof(struct jset_entry, flags) == 5, "jset_entry.flags");
static_assert(offsetof(struct jset_entry, _data) == 8, "jset_entry._data");
static_assert(sizeof(struct jset_usage) == 16, "jset_usage size");
static_assert(offsetof(struct jset_usage, value) == 8, "jset_usage.value");
static_assert(sizeof(struct jset_blacklist) == 16, "jset_blacklist size");
static_assert(offsetof(struct jset_blacklist, end) == 8, "jset_blacklist.end");
static_assert(sizeof(struct jset) == 48, "jset size");
static_assert(offsetof(struct jset, csum) == 0, "jset.csum");
static_assert(offsetof(struct jset, magic) == 8, "jset.magic");
static_assert(offsetof(struct jset, seq) == 16, "jset.seq");
static_assert(offsetof(struct jset, last_seq) == 24, "jset.last_seq");
static_assert(offsetof(struct jset, version) == 32, "jset.version");
static_assert(offsetof(struct jset, flags) == 36, "jset.flags");
static_assert(offsetof(struct jset, u64s) == 40, "jset.u64s");
static_assert(offsetof(struct jset, _data) == 48, "jset._data");

/* The magic of this filesystem's entries. */
static inline u64 tfs_jset_magic(const u8 uuid[16])
{
	/*
	 * Two chained crc32c of all 16 bytes: order matters, so uuids with
	 * swapped or equal halves (all-zero included) get different magics.
	 */
	u32 lo = tfs_crc32c(0, uuid, 16);
	u32 hi = tfs_crc32c(lo, uuid, 16);

	return TFS_JSET_MAGIC ^ ((u64)hi << 32 | lo);
}

/* Bytes of a jset with u64s words of sub-entries, before padding. */
static inline size_t tfs_jset_bytes(u32 u64s)
{
	return sizeof(struct jset) + (size_t)u64s * 8;
}

/* Words a sub-entry with payload_u64s words of payload takes. */
static inline unsigned tfs_jset_entry_u64s(unsigned payload_u64s)
{
	return 1 + payload_u64s;
}

/* The sub-entry whose payload starts at data. */
static inline struct jset_entry *tfs_jset_entry_of(__le64 *data)
{
	return (struct jset_entry *)(data - 1);
}

static inline struct jset_entry *tfs_jset_entry_next(struct jset_entry *e)
{
	return (struct jset_entry *)((__le64 *)e + 1 + le16_to_cpu(e->u64s));
}

/* Size in u64s of the key at k (its first __le16). */
static inline unsigned tfs_jkey_u64s(const __le64 *k)
{
	__le16 v;

	memcpy(&v, k, sizeof(v));
	return le16_to_cpu(v);
}

#endif /* TFS_JOURNAL_JOURNAL_FORMAT_H */
