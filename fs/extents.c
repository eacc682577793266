// SPDX-License-Identifier: GPL-2.0
/*
 * Extents: the extent key type and the range operations every data path
 * shares (fs/extents.h).
 */
#include "fs/extents.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/posix.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* --- the extent key --- */

static int extent_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_extent *e = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k), want;
	unsigned nr_blocks;
	bool unwritten;

	if (bytes < sizeof(*e)) {
		prt_printf(err, "value of %zu bytes < %zu", bytes, sizeof(*e));
		return -TFS_ERR_bkey_invalid;
	}
	nr_blocks = le32_to_cpu(e->nr_blocks);
	unwritten = e->flags & TFS_EXTENT_UNWRITTEN;
	if (!nr_blocks || nr_blocks > TFS_EXTENT_MAX_BLOCKS) {
		prt_printf(err, "nr_blocks %u not in 1..%u", nr_blocks, TFS_EXTENT_MAX_BLOCKS);
		return -TFS_ERR_bkey_invalid;
	}
	if (!e->nr_ptrs || e->nr_ptrs > TFS_DATA_MAX_REPLICAS) {
		prt_printf(err, "nr_ptrs %u not in 1..%u", e->nr_ptrs, TFS_DATA_MAX_REPLICAS);
		return -TFS_ERR_bkey_invalid;
	}
	if ((e->flags & ~TFS_EXTENT_UNWRITTEN) || e->pad) {
		prt_printf(err, "unknown flags 0x%x or pad not zero", e->flags);
		return -TFS_ERR_bkey_invalid;
	}
	want = round_up(tfs_extent_val_bytes(e->nr_ptrs, nr_blocks, unwritten), 8);
	if (bytes != want) {
		prt_printf(err, "value of %zu bytes (%zu expected)", bytes, want);
		return -TFS_ERR_bkey_invalid;
	}
	if (!le64_to_cpu(k->inode) || le64_to_cpu(k->offset) + nr_blocks < le64_to_cpu(k->offset)) {
		prt_str(err, "position out of range");
		return -TFS_ERR_bkey_invalid;
	}
	for (unsigned i = 0; i < e->nr_ptrs; i++) {
		if (e->ptrs[i].pad) {
			prt_printf(err, "pointer %u: pad not zero", i);
			return -TFS_ERR_bkey_invalid;
		}
		for (unsigned j = 0; j < i; j++)
			if (e->ptrs[j].dev == e->ptrs[i].dev) {
				prt_printf(err, "pointers %u and %u on the same member", j, i);
				return -TFS_ERR_bkey_invalid;
			}
	}
	for (size_t i = tfs_extent_val_bytes(e->nr_ptrs, nr_blocks, unwritten); i < bytes; i++)
		if (((const u8 *)e)[i]) {
			prt_str(err, "padding not zero");
			return -TFS_ERR_bkey_invalid;
		}
	return 0;
}

static void extent_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_extent *e = tfs_bkey_val(k);

	if (tfs_bkey_val_bytes(k) < sizeof(*e) ||
	    tfs_bkey_val_bytes(k) < sizeof(*e) + e->nr_ptrs * sizeof(e->ptrs[0])) {
		prt_str(out, "(short)");
		return;
	}
	prt_printf(out, "blocks %u%s", le32_to_cpu(e->nr_blocks),
		   e->flags & TFS_EXTENT_UNWRITTEN ? " unwritten" : "");
	for (unsigned i = 0; i < e->nr_ptrs; i++)
		prt_printf(out, " %s%u:0x%llx", i ? "" : "ptrs ", le32_to_cpu(e->ptrs[i].dev),
			   (unsigned long long)le64_to_cpu(e->ptrs[i].offset));
	if (!(e->flags & TFS_EXTENT_UNWRITTEN) &&
	    tfs_bkey_val_bytes(k) >= tfs_extent_val_bytes(e->nr_ptrs, 1, false))
		prt_printf(out, " csum0 %08x", le32_to_cpu(tfs_extent_csums(e)[0]));
}

const struct tfs_bkey_ops tfs_bkey_ops_extent = {
	.validate = extent_validate,
	.val_to_text = extent_val_to_text,
};

int tfs_ext_unpack(struct tfs_fs *fs, const struct tfs_bkey *k, struct tfs_ext *e)
{
	const struct tfs_extent *v = tfs_bkey_val(k);
	struct printbuf err = PRINTBUF;

	if (k->type != TFS_BKEY_extent || extent_validate(k, &err)) {
		struct printbuf msg = PRINTBUF;

		prt_str(&msg, "extent ");
		tfs_bpos_to_text(&msg, tfs_bkey_pos(k));
		prt_str(&msg, ": ");
		prt_str(&msg, k->type != TFS_BKEY_extent ? "wrong key type" : printbuf_str(&err));
		tfs_posix_inconsistent(fs, printbuf_str(&msg));
		printbuf_exit(&msg);
		printbuf_exit(&err);
		return -TFS_ERR_extent_invalid;
	}
	printbuf_exit(&err);
	e->ino = le64_to_cpu(k->inode);
	e->start = le64_to_cpu(k->offset);
	e->len = le32_to_cpu(v->nr_blocks);
	e->unwritten = v->flags & TFS_EXTENT_UNWRITTEN;
	e->nr_ptrs = v->nr_ptrs;
	for (unsigned i = 0; i < e->nr_ptrs; i++) {
		e->ptrs[i].dev = le32_to_cpu(v->ptrs[i].dev);
		e->ptrs[i].offset = le64_to_cpu(v->ptrs[i].offset);
	}
	e->csums = e->unwritten ? NULL : tfs_extent_csums(v);
	return 0;
}

static struct tfs_extent *ext_pack_hdr(struct tfs_bkey_buf *buf, const struct tfs_ext *e)
{
	struct tfs_extent *v =
		tfs_bkey_init(buf, TFS_BKEY_extent, TFS_POS(e->ino, e->start),
			      tfs_extent_val_bytes(e->nr_ptrs, e->len, e->unwritten));

	v->nr_blocks = cpu_to_le32(e->len);
	v->nr_ptrs = (u8)e->nr_ptrs;
	v->flags = e->unwritten ? TFS_EXTENT_UNWRITTEN : 0;
	for (unsigned i = 0; i < e->nr_ptrs; i++) {
		v->ptrs[i].dev = cpu_to_le32(e->ptrs[i].dev);
		v->ptrs[i].offset = cpu_to_le64(e->ptrs[i].offset);
	}
	return v;
}

void tfs_ext_pack(struct tfs_bkey_buf *buf, const struct tfs_ext *e, const u32 *csums)
{
	struct tfs_extent *v = ext_pack_hdr(buf, e);

	if (!e->unwritten)
		for (unsigned i = 0; i < e->len; i++)
			tfs_extent_csums(v)[i] = cpu_to_le32(csums[i]);
}

void tfs_ext_cut(struct tfs_bkey_buf *buf, const struct tfs_ext *e, u64 from, u64 to,
		 u32 block_size)
{
	struct tfs_ext c = *e;
	struct tfs_extent *v;

	c.start = from;
	c.len = (u32)(to - from);
	for (unsigned i = 0; i < c.nr_ptrs; i++)
		c.ptrs[i].offset += (from - e->start) * block_size;
	v = ext_pack_hdr(buf, &c);
	/* csums may point into buf itself (a key cut in place): memmove. */
	if (!c.unwritten)
		memmove(tfs_extent_csums(v), e->csums + (from - e->start), c.len * sizeof(__le32));
}

/* --- run lists --- */

int tfs_run_list_add(struct tfs_run_list *l, unsigned dev, u64 offset, u64 len)
{
	if (!len)
		return 0;
	/* Merge with the last run when contiguous (the common case). */
	if (l->nr) {
		struct tfs_alloc_run *r = &l->runs[l->nr - 1];

		if (r->dev == dev && r->offset + r->len == offset) {
			r->len += len;
			return 0;
		}
	}
	if (l->nr == l->size) {
		unsigned size = l->size ? l->size * 2 : 8;
		struct tfs_alloc_run *n = realloc(l->runs, size * sizeof(*n));

		if (!n)
			return -ENOMEM;
		l->runs = n;
		l->size = size;
	}
	l->runs[l->nr++] = (struct tfs_alloc_run){ .dev = dev, .offset = offset, .len = len };
	return 0;
}

void tfs_run_list_exit(struct tfs_run_list *l)
{
	free(l->runs);
	memset(l, 0, sizeof(*l));
}

int tfs_run_list_subtract(struct tfs_run_list *l, const struct tfs_run_list *sub)
{
	for (unsigned s = 0; s < sub->nr; s++) {
		const struct tfs_alloc_run *x = &sub->runs[s];

		for (unsigned i = 0; i < l->nr; i++) {
			struct tfs_alloc_run *r = &l->runs[i];
			u64 a = max_t(u64, r->offset, x->offset);
			u64 b = min_t(u64, r->offset + r->len, x->offset + x->len);
			u64 r_end = r->offset + r->len;

			if (r->dev != x->dev || a >= b)
				continue;
			if (a == r->offset && b == r_end) {
				/* Whole run: drop it (the last one takes its place). */
				l->runs[i] = l->runs[--l->nr];
				i--;
			} else if (a == r->offset) {
				r->len = r_end - b;
				r->offset = b;
			} else if (b == r_end) {
				r->len = a - r->offset;
			} else {
				/* A hole in the middle: keep the head, add the tail. */
				unsigned dev = r->dev;

				r->len = a - r->offset;
				if (l->nr == l->size) {
					unsigned size = l->size * 2;
					struct tfs_alloc_run *n =
						realloc(l->runs, size * sizeof(*n));

					if (!n)
						return -ENOMEM;
					l->runs = n;
					l->size = size;
				}
				l->runs[l->nr++] = (struct tfs_alloc_run){ .dev = dev,
									   .offset = b,
									   .len = r_end - b };
			}
		}
	}
	return 0;
}

void tfs_run_list_free_after(struct tfs_fs *fs, const struct tfs_run_list *l, u64 seq)
{
	for (unsigned i = 0; i < l->nr; i++)
		tfs_alloc_free_after(fs, &l->runs[i], seq);
}

void tfs_run_list_free_now(struct tfs_fs *fs, const struct tfs_run_list *l)
{
	for (unsigned i = 0; i < l->nr; i++)
		tfs_alloc_free_now(fs, &l->runs[i]);
}

/* --- finding and replacing --- */

/*
 * Where a scan for the extents of ino over blocks [b, ...) starts: the
 * start of the extent over b when one begins before b, else b.  Extents do
 * not overlap, so only the last one beginning before b can reach it: one
 * step back finds it.  Scanning forward from TFS_EXTENT_MAX_BLOCKS - 1
 * blocks before b instead read, unpacked and validated every extent
 * there: up to 255 in a file rewritten 4 KiB at a time at random, twice
 * per write (the lookup, then the commit's removal).
 */
static int ext_scan_from(struct tfs_fs *fs, u64 ino, u64 b, u64 *from)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	*from = b;
	if (!b)
		return 0;
	/* An extent over b starts at most TFS_EXTENT_MAX_BLOCKS - 1 blocks before it. */
	tfs_btree_iter_init(
		&iter, fs, TFS_BTREE_extents,
		TFS_POS(ino, b >= TFS_EXTENT_MAX_BLOCKS ? b - (TFS_EXTENT_MAX_BLOCKS - 1) : 0),
		TFS_POS(ino, b));
	tfs_btree_iter_set_pos(&iter, TFS_POS(ino, b));
	ret = tfs_btree_iter_prev(&iter, &k);
	if (!ret && k) {
		struct tfs_ext e;

		ret = tfs_ext_unpack(fs, k, &e);
		if (!ret && tfs_ext_end(&e) > b)
			*from = e.start;
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

int tfs_ext_find(struct tfs_fs *fs, u64 ino, u64 b, u64 limit, struct tfs_bkey_buf *out,
		 struct tfs_ext *e)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 from;
	int ret;

	if (limit <= b)
		return -ENOENT;
	ret = ext_scan_from(fs, ino, b, &from);
	if (ret)
		return ret;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_extents, TFS_POS(ino, from),
			    TFS_POS(ino, limit - 1));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		tfs_bkey_copy(out, k);
		ret = tfs_ext_unpack(fs, &out->k, e);
		if (ret)
			break;
		if (tfs_ext_end(e) > b)
			goto out;
	}
	if (!ret)
		ret = -ENOENT;
out:
	tfs_btree_iter_exit(&iter);
	return ret;
}

int tfs_ext_drop_range(struct tfs_btree_trans *trans, u64 ino, u64 start, u64 end,
		       unsigned max_keys, struct tfs_run_list *freed, u64 *blocks, u64 *next)
{
	struct tfs_fs *fs = trans->fs;
	u32 bs = tfs_posix(fs)->block_size;
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct tfs_bkey_buf buf, cut;
	u64 from;
	unsigned nr = 0;
	int ret;

	*next = end;
	if (end <= start)
		return 0;
	ret = ext_scan_from(fs, ino, start, &from);
	if (ret)
		return ret;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_extents, TFS_POS(ino, from),
			    TFS_POS(ino, end - 1));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		struct tfs_ext e;
		u64 a, b;

		tfs_bkey_copy(&buf, k);
		ret = tfs_ext_unpack(fs, &buf.k, &e);
		if (ret)
			break;
		if (tfs_ext_end(&e) <= start)
			continue;
		if (nr == max_keys) {
			*next = max_t(u64, e.start, start);
			break;
		}
		nr++;
		a = max_t(u64, e.start, start);
		b = min_t(u64, tfs_ext_end(&e), end);
		if (e.start < start) {
			/* Keep the head: the key at e.start becomes [e.start, start). */
			tfs_ext_cut(&cut, &e, e.start, start, bs);
			ret = tfs_trans_update_old_data(trans, TFS_BTREE_extents, &cut.k);
		} else {
			ret = tfs_trans_delete(trans, TFS_BTREE_extents, TFS_POS(ino, e.start));
		}
		if (!ret && tfs_ext_end(&e) > end) {
			tfs_ext_cut(&cut, &e, end, tfs_ext_end(&e), bs);
			ret = tfs_trans_update_old_data(trans, TFS_BTREE_extents, &cut.k);
		}
		for (unsigned i = 0; !ret && i < e.nr_ptrs; i++)
			ret = tfs_run_list_add(freed, e.ptrs[i].dev,
					       e.ptrs[i].offset + (a - e.start) * bs, (b - a) * bs);
		if (ret)
			break;
		*blocks += b - a;
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}
