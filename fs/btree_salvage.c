// SPDX-License-Identifier: GPL-2.0
/*
 * Salvage: the leaves of a lost interior node's range, found by scanning the
 * members (API and rules: fs/btree_salvage.h).  Two passes: the scan reads
 * every member in large chunks and keeps where each verifying leaf of a
 * range asked for is; then those leaves, newest first, are read again one by
 * one and their keys handed out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree.h"
#include "fs/btree_format.h"
#include "fs/btree_io.h"
#include "fs/btree_salvage.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* Bytes read at once by the scan (plus a node's worth, for a node at the chunk's end). */
#define SALVAGE_CHUNK (1u << 20)

struct salvage_leaf {
	u32 dev;
	u64 offset, seq;
	enum tfs_btree_id id;
	struct tfs_bpos min_key, max_key;
};

/* Key ranges of one tree, disjoint, in order. */
struct salvage_span {
	enum tfs_btree_id id;
	struct tfs_bpos min, max;
};

struct salvage {
	struct tfs_fs *fs;
	struct tfs_btree_salvage_range *r;
	unsigned nr;
	struct salvage_leaf *leaves;
	size_t nr_leaves, size_leaves;
	/*
	 * What the leaves handed out so far cover (each newer than, or a twin
	 * of, the next): a key of the next leaf there is not its to give.  A
	 * sorted union, so a big tree's scan is not quadratic in its leaves.
	 */
	struct salvage_span *covered;
	size_t nr_covered, size_covered;
};

static bool pos_in(struct tfs_bpos p, struct tfs_bpos min, struct tfs_bpos max)
{
	return tfs_bpos_cmp(p, min) >= 0 && tfs_bpos_cmp(p, max) <= 0;
}

/* The range asked for holding pos of tree id; NULL for none. */
static struct tfs_btree_salvage_range *range_of(struct salvage *s, enum tfs_btree_id id,
						struct tfs_bpos pos)
{
	for (unsigned i = 0; i < s->nr; i++)
		if (s->r[i].id == id && pos_in(pos, s->r[i].min_key, s->r[i].max_key))
			return &s->r[i];
	return NULL;
}

/* Whether a leaf of tree id over [min, max] can hold a key of a range asked for. */
static bool leaf_wanted(struct salvage *s, unsigned id, struct tfs_bpos min, struct tfs_bpos max)
{
	for (unsigned i = 0; i < s->nr; i++)
		if (s->r[i].id == id && tfs_bpos_cmp(min, s->r[i].max_key) <= 0 &&
		    tfs_bpos_cmp(max, s->r[i].min_key) >= 0)
			return true;
	return false;
}

/*
 * Whether a block of the node_size bytes at offset on dev is file data: its
 * user alloc key marks it used.  A regular file may hold a node image that
 * verifies (a clone of this filesystem, the same uuid and magic, kept as a
 * file); its leaves must not be taken for ours.  A block the alloc btree
 * does not say (no key, a lookup error) is not ruled out.
 */
static bool in_file_data(struct tfs_fs *fs, u32 dev, u64 offset)
{
	u32 bsz = fs->alloc.devs[dev].bucket_size;

	if (!bsz)
		return false;
	for (u64 o = offset; o < offset + fs->node_size; o += fs->block_size) {
		struct tfs_bkey_buf kb;
		const struct tfs_alloc_key *a;
		u64 blk = o % bsz / fs->block_size;

		if (tfs_btree_lookup(fs, TFS_BTREE_alloc,
				     tfs_alloc_pos(TFS_ALLOC_DATA_user, dev, o / bsz), &kb) ||
		    kb.k.type != TFS_BKEY_alloc)
			continue;
		a = tfs_bkey_val(&kb.k);
		if (blk < le32_to_cpu(a->nr_blocks) &&
		    le64_to_cpu(a->bits[blk / 64]) & (1ULL << (blk % 64)))
			return true;
	}
	return false;
}

/* A node at n (node_size bytes readable) on dev at offset: kept when it is a leaf wanted. */
static int scan_node(struct salvage *s, const struct tfs_btree_node *n, u32 dev, u64 offset)
{
	struct tfs_fs *fs = s->fs;
	struct tfs_btree_node_expect e = { .level = 0 };
	struct printbuf err = PRINTBUF;
	int ret;

	/* The header first: most blocks are not nodes, and most nodes are of other ranges. */
	if (le64_to_cpu(n->magic) != fs->node_magic || n->level || n->btree_id >= TFS_BTREE_NR ||
	    le64_to_cpu(n->seq) >= fs->node_seq_at_open ||
	    !leaf_wanted(s, n->btree_id, tfs_btree_node_min(n), tfs_btree_node_max(n)))
		return 0;
	e.btree_id = n->btree_id;
	e.min_key = tfs_btree_node_min(n);
	e.max_key = tfs_btree_node_max(n);
	ret = tfs_btree_node_validate(fs, n, &e, &err);
	printbuf_exit(&err);
	if (ret)
		return 0; /* not a whole node: overwritten since, or torn */
	if (in_file_data(fs, dev, offset))
		return 0; /* a file's bytes */
	if (s->nr_leaves == s->size_leaves) {
		size_t size = s->size_leaves ? s->size_leaves * 2 : 64;
		struct salvage_leaf *l = realloc(s->leaves, size * sizeof(*l));

		if (!l)
			return -ENOMEM;
		s->leaves = l;
		s->size_leaves = size;
	}
	s->leaves[s->nr_leaves++] = (struct salvage_leaf){
		.dev = dev,
		.offset = offset,
		.seq = le64_to_cpu(n->seq),
		.id = n->btree_id,
		.min_key = e.min_key,
		.max_key = e.max_key,
	};
	return 0;
}

/* Every block of member dev; buf holds a chunk and a node. */
static int scan_member(struct salvage *s, u32 dev, u8 *buf, struct tfs_btree_salvage_stats *st)
{
	struct tfs_fs *fs = s->fs;
	struct tfs_bdev *bdev = fs->devs[dev].bdev;
	u64 size = bdev->size / fs->block_size * fs->block_size;

	for (u64 pos = 0; pos + fs->node_size <= size; pos += SALVAGE_CHUNK) {
		u64 len = min_t(u64, SALVAGE_CHUNK + fs->node_size, size - pos);
		int ret = tfs_bdev_read(bdev, buf, len, pos, TFS_TAG_btree);

		if (ret) {
			fprintf(stderr, "salvage: reading member %u at 0x%llx: %s\n", dev,
				(unsigned long long)pos, tfs_err_str(ret));
			return ret;
		}
		st->bytes_scanned += min_t(u64, len, SALVAGE_CHUNK);
		for (u64 o = 0; o < SALVAGE_CHUNK && o + fs->node_size <= len;
		     o += fs->block_size) {
			ret = scan_node(s, (const struct tfs_btree_node *)(buf + o), dev, pos + o);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Newest first; a copy's twins (same seq) by place, so the order is the same every time. */
static int leaf_cmp(const void *a, const void *b)
{
	const struct salvage_leaf *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? 1 : -1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* (id, pos) against span x: < 0 before it, 0 in it, > 0 after it. */
static int span_cmp(const struct salvage_span *x, enum tfs_btree_id id, struct tfs_bpos pos)
{
	if (id != x->id)
		return id < x->id ? -1 : 1;
	if (tfs_bpos_cmp(pos, x->min) < 0)
		return -1;
	return tfs_bpos_cmp(pos, x->max) > 0;
}

/* The first span not wholly before (id, pos). */
static size_t span_search(const struct salvage *s, enum tfs_btree_id id, struct tfs_bpos pos)
{
	size_t lo = 0, hi = s->nr_covered;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (span_cmp(&s->covered[mid], id, pos) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether a leaf handed out before (newer, or a twin) covers pos of tree id. */
static bool covered_by_newer(const struct salvage *s, enum tfs_btree_id id, struct tfs_bpos pos)
{
	size_t i = span_search(s, id, pos);

	return i < s->nr_covered && !span_cmp(&s->covered[i], id, pos);
}

/* Adds leaf l's range to the covered union, merging the spans it overlaps. */
static int cover(struct salvage *s, const struct salvage_leaf *l)
{
	size_t first = span_search(s, l->id, l->min_key), last = first;
	struct salvage_span n = { .id = l->id, .min = l->min_key, .max = l->max_key };

	while (last < s->nr_covered && s->covered[last].id == l->id &&
	       tfs_bpos_cmp(s->covered[last].min, l->max_key) <= 0) {
		if (tfs_bpos_cmp(s->covered[last].min, n.min) < 0)
			n.min = s->covered[last].min;
		if (tfs_bpos_cmp(s->covered[last].max, n.max) > 0)
			n.max = s->covered[last].max;
		last++;
	}
	if (first == last && s->nr_covered == s->size_covered) {
		size_t size = s->size_covered ? s->size_covered * 2 : 64;
		struct salvage_span *c = realloc(s->covered, size * sizeof(*c));

		if (!c)
			return -ENOMEM;
		s->covered = c;
		s->size_covered = size;
	}
	/* [first, last) merge into one span: close the gap, or open one. */
	memmove(&s->covered[first + 1], &s->covered[last],
		(s->nr_covered - last) * sizeof(*s->covered));
	s->nr_covered = s->nr_covered - (last - first) + 1;
	s->covered[first] = n;
	return 0;
}

/* The keys of leaves[i] (read again into n) in a range asked for, to fn. */
static int give_back(struct salvage *s, size_t i, struct tfs_btree_node *n, tfs_btree_salvage_fn fn,
		     void *ctx, struct tfs_btree_salvage_stats *st)
{
	const struct salvage_leaf *l = &s->leaves[i];
	struct tfs_btree_node_expect e = { .level = 0 };
	struct printbuf err = PRINTBUF;
	const __le64 *p = n->_data;
	u64 before = st->keys;
	int ret = tfs_bdev_read(s->fs->devs[l->dev].bdev, n, s->fs->node_size, l->offset,
				TFS_TAG_btree);

	if (ret) {
		fprintf(stderr, "salvage: reading member %u at 0x%llx: %s\n", l->dev,
			(unsigned long long)l->offset, tfs_err_str(ret));
		printbuf_exit(&err);
		return ret;
	}
	/* Verified again: the fsck's own writes since the scan may have taken the place. */
	e.btree_id = l->id;
	e.min_key = l->min_key;
	e.max_key = l->max_key;
	ret = tfs_btree_node_validate(s->fs, n, &e, &err);
	printbuf_exit(&err);
	/*
	 * Changed since the scan: not ours to trust, but the range stays
	 * covered, as the newest state of it was this leaf, not an older one.
	 */
	if (ret || le64_to_cpu(n->seq) != l->seq)
		return cover(s, l);
	for (u32 k = 0; k < le32_to_cpu(n->nr_keys); k++) {
		const struct tfs_bkey *key = (const struct tfs_bkey *)p;
		struct tfs_btree_salvage_range *r = range_of(s, l->id, tfs_bkey_pos(key));

		p += tfs_bkey_u64s(key);
		if (!r || covered_by_newer(s, l->id, tfs_bkey_pos(key)))
			continue;
		ret = fn(ctx, l->id, key);
		if (ret < 0)
			return ret;
		if (ret) {
			r->keys++;
			st->keys++;
		}
	}
	st->leaves_used += st->keys > before;
	return cover(s, l);
}

int tfs_btree_salvage(struct tfs_fs *fs, struct tfs_btree_salvage_range *r, unsigned nr,
		      tfs_btree_salvage_fn fn, void *ctx, struct tfs_btree_salvage_stats *st)
{
	struct salvage s = { .fs = fs, .r = r, .nr = nr };
	u8 *buf = tfs_bdev_alloc_buf(NULL, SALVAGE_CHUNK + fs->node_size);
	int ret = buf ? 0 : -ENOMEM;

	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < nr; i++)
		r[i].keys = 0;
	for (u32 dev = 0; dev < fs->nr_devices && !ret; dev++)
		if (fs->devs[dev].present)
			ret = scan_member(&s, dev, buf, st);
	st->leaves_found = s.nr_leaves;
	if (!ret && s.nr_leaves)
		qsort(s.leaves, s.nr_leaves, sizeof(*s.leaves), leaf_cmp);
	for (size_t i = 0; i < s.nr_leaves && !ret; i++)
		ret = give_back(&s, i, (struct tfs_btree_node *)buf, fn, ctx, st);
	free(s.leaves);
	free(s.covered);
	free(buf);
	return ret;
}
