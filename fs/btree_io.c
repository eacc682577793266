// SPDX-License-Identifier: GPL-2.0
/*
 * Node I/O: serializing a node into its on-disk form, validating what was
 * read (naming the node and the first bad thing), and reading nodes that
 * are not in memory.
 *
 * A node is read through its parent's btree_ptr, which says where every
 * replica is and what the node must be: its seq and checksum.  A replica
 * that cannot be read, or that is not that node (stale, misdirected,
 * corrupt), is reported once and the next replica is tried; only when none
 * is good does the read fail: -TFS_ERR_btree_node_read when no replica
 * could be read, -TFS_ERR_btree_node_invalid when one was read and was
 * wrong.  Reading never writes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "fs/btree_io.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

void tfs_btree_node_loc_to_text(struct printbuf *out, struct tfs_fs *fs, enum tfs_btree_id id,
				unsigned level, const struct tfs_btree_loc *loc)
{
	prt_printf(out, "btree %s level %u node at ", tfs_btree_id_str(id), level);
	for (unsigned i = 0; i < loc->nr; i++) {
		if (i)
			prt_char(out, ',');
		if (fs->nr_devices > 1)
			prt_printf(out, "%u:", loc->ptrs[i].dev);
		prt_printf(out, "0x%llx", (unsigned long long)loc->ptrs[i].offset);
	}
	if (!loc->nr)
		prt_str(out, "(nowhere)");
}

/* --- serializing --- */

void tfs_btree_ptr_key_set(struct tfs_fs *fs, struct tfs_bkey *k, const struct tfs_btree_loc *loc,
			   u64 seq, u32 csum, unsigned level)
{
	struct tfs_btree_ptr *p = tfs_bkey_val(k);

	memset(p, 0, tfs_bkey_val_bytes(k));
	p->level = (u8)level;
	p->nr_ptrs = (u8)loc->nr;
	p->seq = cpu_to_le64(seq);
	p->csum = cpu_to_le32(csum);
	for (unsigned i = 0; i < loc->nr; i++) {
		p->ptrs[i].dev = cpu_to_le32(loc->ptrs[i].dev);
		p->ptrs[i].offset = cpu_to_le64(loc->ptrs[i].offset);
	}
}

void tfs_btree_ptr_key_loc(const struct tfs_bkey *k, struct tfs_btree_loc *loc)
{
	const struct tfs_btree_ptr *p = tfs_bkey_val(k);

	loc->nr = min_t(unsigned, p->nr_ptrs, TFS_BTREE_PTR_MAX_REPLICAS);
	for (unsigned i = 0; i < loc->nr; i++) {
		loc->ptrs[i].dev = le32_to_cpu(p->ptrs[i].dev);
		loc->ptrs[i].offset = le64_to_cpu(p->ptrs[i].offset);
	}
}

u32 tfs_btree_node_serialize(struct tfs_fs *fs, const struct tfs_btree *b,
			     const struct tfs_bnode *n, u64 seq, struct tfs_btree_node *out)
{
	__le64 *dst = out->_data;

	memset(out, 0, sizeof(*out));
	out->magic = cpu_to_le64(fs->node_magic);
	out->seq = cpu_to_le64(seq);
	out->btree_id = (u8)b->id;
	out->level = n->level;
	out->version = cpu_to_le16(TFS_BTREE_NODE_VERSION);
	out->nr_keys = cpu_to_le32(n->nr_keys);
	out->min_inode = cpu_to_le64(n->min_key.inode);
	out->min_offset = cpu_to_le64(n->min_key.offset);
	out->max_inode = cpu_to_le64(n->max_key.inode);
	out->max_offset = cpu_to_le64(n->max_key.offset);
	out->journal_seq = cpu_to_le64(n->journal_seq);
	for (unsigned i = 0; i < n->nr_keys; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(n, i);
		unsigned u64s = tfs_bkey_u64s(k);

		memcpy(dst, k, (size_t)u64s * 8);
		if (n->level) {
			/* On disk a pointer has exactly nr_ptrs locations. */
			const struct tfs_btree_ptr *p = tfs_bkey_val(k);

			u64s = TFS_BKEY_U64s + tfs_btree_ptr_val_bytes(p->nr_ptrs) / 8;
			((struct tfs_bkey *)dst)->u64s = cpu_to_le16((u16)u64s);
		}
		dst += u64s;
	}
	out->u64s = cpu_to_le32((u32)(dst - out->_data));
	/* The zero padding after the keys is not covered; the writer zeroes it. */
	memset(dst, 0, fs->node_size - sizeof(*out) - (size_t)(dst - out->_data) * 8);
	u32 csum = tfs_btree_node_csum(out);

	out->csum = cpu_to_le64(csum);
	return csum;
}

/* --- validating --- */

/*
 * Checks a node read from (loc, replica r) against what its parent says
 * (expect).  0, or -TFS_ERR_btree_node_invalid with one line in err
 * (without the node's name; the caller prefixes it).
 */
int tfs_btree_node_validate(struct tfs_fs *fs, const struct tfs_btree_node *n,
			    const struct tfs_btree_node_expect *e, struct printbuf *err)
{
	u32 u64s = le32_to_cpu(n->u64s), nr_keys = le32_to_cpu(n->nr_keys);
	unsigned cap = tfs_btree_node_capacity_u64s(fs->node_size);
	const __le64 *p = n->_data, *end;
	struct tfs_bpos prev = TFS_POS_MIN;

	if (le64_to_cpu(n->magic) != fs->node_magic) {
		prt_printf(err, "bad magic %llx (not a node of this filesystem)",
			   (unsigned long long)le64_to_cpu(n->magic));
		return -TFS_ERR_btree_node_invalid;
	}
	if (u64s > cap) {
		prt_printf(err, "u64s %u > capacity %u", u64s, cap);
		return -TFS_ERR_btree_node_invalid;
	}
	if (le64_to_cpu(n->csum) >> 32 || (u32)le64_to_cpu(n->csum) != tfs_btree_node_csum(n)) {
		prt_printf(err, "bad checksum %08x (computed %08x)", (u32)le64_to_cpu(n->csum),
			   tfs_btree_node_csum(n));
		return -TFS_ERR_btree_node_invalid;
	}
	if (e->check_ptr &&
	    (le64_to_cpu(n->seq) != e->seq || (u32)le64_to_cpu(n->csum) != e->csum)) {
		prt_printf(err,
			   "seq %llx csum %08x, the pointer wants seq %llx csum %08x (a stale "
			   "or misdirected node)",
			   (unsigned long long)le64_to_cpu(n->seq), (u32)le64_to_cpu(n->csum),
			   (unsigned long long)e->seq, e->csum);
		return -TFS_ERR_btree_node_invalid;
	}
	if (n->btree_id != e->btree_id || n->level != e->level) {
		prt_printf(err, "btree %u level %u, expected btree %s level %u", n->btree_id,
			   n->level, tfs_btree_id_str(e->btree_id), e->level);
		return -TFS_ERR_btree_node_invalid;
	}
	if (le16_to_cpu(n->version) != TFS_BTREE_NODE_VERSION || n->pad0 || n->reserved[0] ||
	    n->reserved[1]) {
		prt_printf(err, "version %u (or a reserved field) unknown",
			   le16_to_cpu(n->version));
		return -TFS_ERR_btree_node_invalid;
	}
	if (!tfs_bpos_eq(tfs_btree_node_min(n), e->min_key) ||
	    !tfs_bpos_eq(tfs_btree_node_max(n), e->max_key)) {
		prt_str(err, "range ");
		tfs_bpos_to_text(err, tfs_btree_node_min(n));
		prt_str(err, "..");
		tfs_bpos_to_text(err, tfs_btree_node_max(n));
		prt_str(err, ", the parent says ");
		tfs_bpos_to_text(err, e->min_key);
		prt_str(err, "..");
		tfs_bpos_to_text(err, e->max_key);
		return -TFS_ERR_btree_node_invalid;
	}
	end = p + u64s;
	for (u32 i = 0; i < nr_keys; i++) {
		const struct tfs_bkey *k = (const struct tfs_bkey *)p;
		struct printbuf why = PRINTBUF;
		struct tfs_bpos pos;
		int ret;

		if (p >= end) {
			prt_printf(err, "key %u past the end of the keys (nr_keys %u, u64s %u)", i,
				   nr_keys, u64s);
			printbuf_exit(&why);
			return -TFS_ERR_btree_node_invalid;
		}
		ret = tfs_bkey_validate(k, (size_t)(end - p) * 8, e->btree_id, false, &why);
		if (ret) {
			prt_printf(err, "key %u: %s", i, printbuf_str(&why));
			printbuf_exit(&why);
			return -TFS_ERR_btree_node_invalid;
		}
		printbuf_exit(&why);
		pos = tfs_bkey_pos(k);
		if ((k->type == TFS_BKEY_btree_ptr) != (n->level > 0)) {
			prt_printf(err, "key %u: type %s in a level %u node", i,
				   tfs_bkey_type_str(k->type), n->level);
			return -TFS_ERR_btree_node_invalid;
		}
		if (n->level &&
		    ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level + 1 != n->level) {
			prt_printf(err, "key %u: child level %u in a level %u node", i,
				   ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level,
				   n->level);
			return -TFS_ERR_btree_node_invalid;
		}
		/* No write makes more; in memory there is no room for more. */
		if (n->level && ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->nr_ptrs >
					fs->btree_ptr_replicas) {
			prt_printf(err, "key %u: %u pointers, more than the %u metadata replicas",
				   i, ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->nr_ptrs,
				   fs->btree_ptr_replicas);
			return -TFS_ERR_btree_node_invalid;
		}
		if (i && tfs_bpos_cmp(pos, prev) <= 0) {
			prt_printf(err, "key %u (", i);
			tfs_bpos_to_text(err, pos);
			prt_str(err, ") < previous key (");
			tfs_bpos_to_text(err, prev);
			prt_char(err, ')');
			return -TFS_ERR_btree_node_invalid;
		}
		if (tfs_bpos_cmp(pos, e->min_key) < 0 || tfs_bpos_cmp(pos, e->max_key) > 0) {
			prt_printf(err, "key %u (", i);
			tfs_bpos_to_text(err, pos);
			prt_str(err, ") outside the node's range");
			return -TFS_ERR_btree_node_invalid;
		}
		prev = pos;
		p += tfs_bkey_u64s(k);
	}
	if (p != end) {
		prt_printf(err, "%u keys take %zu words, the header says %u", nr_keys,
			   (size_t)(p - n->_data), u64s);
		return -TFS_ERR_btree_node_invalid;
	}
	if (n->level && (!nr_keys || !tfs_bpos_eq(prev, e->max_key))) {
		prt_str(err, "interior node whose last key is not at its max_key");
		return -TFS_ERR_btree_node_invalid;
	}
	return 0;
}

/* --- reading --- */

/* Builds the in-memory node from a validated on-disk one. */
static struct tfs_bnode *bnode_from_disk(struct tfs_btree *b, const struct tfs_btree_node *d)
{
	struct tfs_fs *fs = b->fs;
	struct tfs_bnode *n = tfs_bnode_alloc(b, d->level);
	const __le64 *p = d->_data;

	if (!n)
		return NULL;
	n->min_key = tfs_btree_node_min(d);
	n->max_key = tfs_btree_node_max(d);
	n->journal_seq = le64_to_cpu(d->journal_seq);
	for (u32 i = 0; i < le32_to_cpu(d->nr_keys); i++) {
		const struct tfs_bkey *k = (const struct tfs_bkey *)p;

		if (d->level) {
			/* In memory a pointer has room for every replica. */
			struct tfs_bkey_buf buf;

			memset(&buf, 0, sizeof(buf));
			memcpy(&buf, k, tfs_bkey_bytes(k));
			buf.k.u64s = cpu_to_le16((u16)tfs_btree_ptr_key_u64s(fs));
			tfs_bnode_insert(b, n, i, &buf.k, NULL);
		} else {
			tfs_bnode_insert(b, n, i, k, NULL);
		}
		p += tfs_bkey_u64s(k);
	}
	return n;
}

int tfs_btree_read_node(struct tfs_btree *b, const struct tfs_bkey *ptr_key,
			struct tfs_bpos min_key, struct tfs_bnode **out)
{
	struct tfs_fs *fs = b->fs;
	const struct tfs_btree_ptr *ptr = tfs_bkey_val(ptr_key);
	struct tfs_btree_node_expect e = {
		.btree_id = b->id,
		.level = ptr->level,
		.min_key = min_key,
		.max_key = tfs_bkey_pos(ptr_key),
		.seq = le64_to_cpu(ptr->seq),
		.csum = le32_to_cpu(ptr->csum),
		.check_ptr = true,
	};
	struct tfs_btree_loc loc;
	struct tfs_btree_node *buf = NULL;
	int err = -TFS_ERR_btree_node_read;

	*out = NULL;
	tfs_btree_ptr_key_loc(ptr_key, &loc);
	for (unsigned r = 0; r < loc.nr; r++) {
		unsigned dev = loc.ptrs[r].dev;
		u64 off = loc.ptrs[r].offset;
		struct printbuf why = PRINTBUF, name = PRINTBUF;
		struct tfs_btree_loc one = { .nr = 1 };
		int ret;

		one.ptrs[0] = loc.ptrs[r];
		tfs_btree_node_loc_to_text(&name, fs, b->id, e.level, &one);
		if (dev >= fs->nr_devices || !fs->devs[dev].present) {
			fprintf(stderr, "%s: member %u is missing\n", printbuf_str(&name), dev);
			printbuf_exit(&name);
			continue;
		}
		if (!buf) {
			buf = tfs_bdev_alloc_buf(NULL, fs->node_size);
			if (!buf) {
				printbuf_exit(&name);
				return -ENOMEM;
			}
		}
		struct tfs_bio bio = {
			.bdev = fs->devs[dev].bdev,
			.op = TFS_OP_read,
			.flags = TFS_BIO_QUIET,
			.tag = TFS_TAG_btree,
			.offset = off,
			.buf = buf,
			.len = fs->node_size,
		};

		if (off % fs->block_size || off + fs->node_size > fs->devs[dev].bdev->size) {
			ret = -TFS_ERR_bdev_out_of_range;
			prt_str(&why, "outside the member");
		} else {
			ret = tfs_bio_submit_wait(&bio);
			if (ret)
				prt_printf(&why, "read failed: %s", tfs_err_str(ret));
		}
		if (ret) {
			err = err == -TFS_ERR_btree_node_invalid ? err : -TFS_ERR_btree_node_read;
		} else {
			ret = tfs_btree_node_validate(fs, buf, &e, &why);
			if (ret)
				err = -TFS_ERR_btree_node_invalid;
		}
		__atomic_add_fetch(&b->c.nodes_read, 1, __ATOMIC_RELAXED);
		if (ret) {
			__atomic_add_fetch(&b->c.node_read_errors, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "%s: %s%s\n", printbuf_str(&name), printbuf_str(&why),
				r + 1 < loc.nr ? " (trying the next replica)" : "");
			printbuf_exit(&why);
			printbuf_exit(&name);
			continue;
		}
		printbuf_exit(&why);
		printbuf_exit(&name);
		struct tfs_bnode *n = bnode_from_disk(b, buf);

		free(buf);
		if (!n)
			return -ENOMEM;
		n->disk = loc;
		n->disk_seq = e.seq;
		n->disk_csum = e.csum;
		*out = n;
		return 0;
	}
	if (!loc.nr) {
		struct printbuf name = PRINTBUF;

		tfs_btree_node_loc_to_text(&name, fs, b->id, e.level, &loc);
		fprintf(stderr, "%s: pointer without locations\n", printbuf_str(&name));
		printbuf_exit(&name);
	}
	free(buf);
	if (err == -TFS_ERR_btree_node_invalid) {
		/*
		 * A copy read, and it is not the node: damage on disk that no
		 * retry undoes (an unreadable copy may read again: EIO, no
		 * policy).  As bcachefs, an inconsistency: errors= decides.
		 */
		struct printbuf what = PRINTBUF;

		tfs_btree_node_loc_to_text(&what, fs, b->id, e.level, &loc);
		prt_str(&what, ": no copy is the node its parent points to (said above)");
		tfs_fs_node_inconsistent(fs, printbuf_str(&what));
		printbuf_exit(&what);
	}
	return err;
}

int tfs_btree_read_child(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
			 struct tfs_bnode **ret)
{
	struct tfs_bpos min_key =
		idx ? tfs_bpos_successor(tfs_bkey_pos(tfs_bnode_key(n, idx - 1))) : n->min_key;
	struct tfs_bnode *c, *expected = NULL;
	int err;

	/*
	 * Several readers may read the same child at once (the tree's lock is
	 * shared): the first to install its copy wins, the others drop theirs.
	 */
	err = tfs_btree_read_node(b, tfs_bnode_key(n, idx), min_key, &c);
	if (err)
		return err;
	if (!__atomic_compare_exchange_n(&n->child[idx], &expected, c, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		tfs_bnode_free(b->fs, c);
		c = expected;
	} else {
		__atomic_add_fetch(&b->nr_nodes[c->level], 1, __ATOMIC_RELAXED);
	}
	*ret = c;
	return 0;
}
