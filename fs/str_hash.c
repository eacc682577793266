// SPDX-License-Identifier: GPL-2.0
/*
 * Names in btrees as hash tables with linear probing (fs/str_hash.h).
 */
#include "fs/str_hash.h"

#include <errno.h>
#include <string.h>

/* --- SipHash-2-4 (Aumasson and Bernstein), 64-bit output --- */

static inline u64 rotl64(u64 x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND(v0, v1, v2, v3)     \
	do {                         \
		v0 += v1;            \
		v1 = rotl64(v1, 13); \
		v1 ^= v0;            \
		v0 = rotl64(v0, 32); \
		v2 += v3;            \
		v3 = rotl64(v3, 16); \
		v3 ^= v2;            \
		v0 += v3;            \
		v3 = rotl64(v3, 21); \
		v3 ^= v0;            \
		v2 += v1;            \
		v1 = rotl64(v1, 17); \
		v1 ^= v2;            \
		v2 = rotl64(v2, 32); \
	} while (0)

u64 tfs_siphash(u64 k0, u64 k1, const void *data, size_t len)
{
	const u8 *p = data;
	u64 v0 = 0x736f6d6570736575ULL ^ k0;
	u64 v1 = 0x646f72616e646f6dULL ^ k1;
	u64 v2 = 0x6c7967656e657261ULL ^ k0;
	u64 v3 = 0x7465646279746573ULL ^ k1;
	u64 b = (u64)len << 56, m;
	size_t i, left = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, p + i, 8);
		m = le64toh(m);
		v3 ^= m;
		SIPROUND(v0, v1, v2, v3);
		SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (size_t j = 0; j < left; j++)
		b |= (u64)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	for (unsigned r = 0; r < 4; r++)
		SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

u64 tfs_name_hash_default(u64 seed, const void *name, size_t len)
{
	/* The second half of the key is a constant: the seed is per inode. */
	return tfs_siphash(seed, 0x74696e7966732121ULL /* "tinyfs!!" */, name, len);
}

/* --- probing --- */

u64 tfs_hash_slot(const struct tfs_hash_desc *d, u64 hash)
{
	u64 range = d->slot_max - d->slot_min + 1;

	return d->slot_min + hash % range;
}

static u64 slot_next(const struct tfs_hash_desc *d, u64 s)
{
	return s >= d->slot_max ? d->slot_min : s + 1;
}

static u64 slot_prev(const struct tfs_hash_desc *d, u64 s)
{
	return s <= d->slot_min ? d->slot_max : s - 1;
}

int tfs_trans_lookup(struct tfs_btree_trans *trans, enum tfs_btree_id id, struct tfs_bpos pos,
		     struct tfs_bkey_buf *out)
{
	for (unsigned i = trans->nr_updates; i--;) {
		const struct tfs_trans_update *u = &trans->updates[i];

		if (u->id != id || !tfs_bpos_eq(tfs_bkey_pos(u->k), pos))
			continue;
		if (u->k->type == TFS_BKEY_deleted)
			return -ENOENT;
		if (out)
			tfs_bkey_copy(out, u->k);
		return 0;
	}
	if (out)
		return tfs_btree_lookup(trans->fs, id, pos, out);

	struct tfs_bkey_buf tmp;

	return tfs_btree_lookup(trans->fs, id, pos, &tmp);
}

int tfs_hash_lookup(struct tfs_btree_trans *trans, const struct tfs_hash_desc *d, u64 inode,
		    u64 start, const void *name, u64 *slot, u64 *free_slot,
		    struct tfs_bkey_buf *out)
{
	struct tfs_bkey_buf buf;
	bool have_free = false;
	u64 s = start;
	int ret;

	do {
		ret = tfs_trans_lookup(trans, d->btree, tfs_hash_pos(d, inode, s, 0), &buf);
		if (ret == -ENOENT) {
			if (free_slot)
				*free_slot = have_free ? *free_slot : s;
			return -ENOENT;
		}
		if (ret)
			return ret;
		switch (d->match(&buf.k, name)) {
		case TFS_HASH_MATCH:
			*slot = s;
			if (out)
				tfs_bkey_copy(out, &buf.k);
			return 0;
		case TFS_HASH_WHITEOUT:
			if (!have_free && free_slot)
				*free_slot = s;
			have_free = true;
			break;
		case TFS_HASH_OTHER:
			break;
		}
		s = slot_next(d, s);
	} while (s != start);

	/*
	 * Every slot taken (not with 2^58 slots, but never loop): not found,
	 * and an insert has room only if a whiteout was seen.
	 */
	return free_slot && !have_free ? -ENOSPC : -ENOENT;
}

int tfs_hash_remove(struct tfs_btree_trans *trans, const struct tfs_hash_desc *d, u64 inode,
		    u64 slot)
{
	struct tfs_bkey_buf buf;
	u64 next = slot_next(d, slot), s;
	int ret;

	ret = tfs_trans_lookup(trans, d->btree, tfs_hash_pos(d, inode, next, 0), NULL);
	if (!ret) {
		/* A later entry may have probed past this slot: keep it taken. */
		d->whiteout(&buf, tfs_hash_pos(d, inode, slot, 0));
		return tfs_trans_update(trans, d->btree, &buf.k);
	}
	if (ret != -ENOENT)
		return ret;

	ret = tfs_trans_delete(trans, d->btree, tfs_hash_pos(d, inode, slot, 0));
	/*
	 * The run now ends here: nothing after this slot can have probed
	 * through the whiteouts right before it, so they go too.
	 */
	for (s = slot_prev(d, slot); !ret && s != slot; s = slot_prev(d, s)) {
		ret = tfs_trans_lookup(trans, d->btree, tfs_hash_pos(d, inode, s, 0), &buf);
		if (ret == -ENOENT) {
			ret = 0;
			break;
		}
		if (ret || d->match(&buf.k, NULL) != TFS_HASH_WHITEOUT)
			break;
		ret = tfs_trans_delete(trans, d->btree, tfs_hash_pos(d, inode, s, 0));
	}
	return ret;
}
