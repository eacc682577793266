// SPDX-License-Identifier: GPL-2.0
/*
 * Alloc and accounting keys (fs/fs_format.h, fs/alloc.h "Alloc keys"): their
 * validation and text, the commit trigger that keeps them in step with the
 * extents and inodes btrees, and the open's load of the allocator from them.
 *
 * The trigger runs inside tfs_trans_commit() with the transaction's btrees
 * (and the alloc btree) intent-locked, before the journal reservation:
 * it compares each final update of the extents and inodes btrees with the
 * key the leaf holds now, and queues the alloc and accounting keys that
 * change in the same transaction.  Holding the alloc btree's lock from the
 * read of an alloc key to the apply of its new version is what keeps two
 * commits that touch one bucket from losing each other's bits; the journal
 * entry holding both the extents and the alloc keys is what keeps them in
 * agreement at every durable point.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/alloc.h"
#include "fs/alloc_types.h"
#include "fs/btree_internal.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super_format.h"

/* --- validation and text --- */

static unsigned words_popcount(const __le64 *w, unsigned nr)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nr; i++)
		n += (unsigned)__builtin_popcountll(le64_to_cpu(w[i]));
	return n;
}

bool tfs_alloc_pos_decode(u64 inode, unsigned *type, unsigned *dev)
{
	if (inode < TFS_MAX_DEVICES) {
		*type = TFS_ALLOC_DATA_user;
		*dev = (unsigned)inode;
		return true;
	}
	if (inode >= TFS_ALLOC_BTREE_INODE && inode < TFS_ALLOC_BTREE_INODE + TFS_MAX_DEVICES) {
		*type = TFS_ALLOC_DATA_btree;
		*dev = (unsigned)(inode - TFS_ALLOC_BTREE_INODE);
		return true;
	}
	return false;
}

static int alloc_key_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_alloc_key *a = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k);
	unsigned nr, words, type, dev;

	if (bytes < sizeof(*a)) {
		prt_printf(err, "value of %zu bytes < %zu", bytes, sizeof(*a));
		return -TFS_ERR_bkey_invalid;
	}
	if (!tfs_alloc_pos_decode(le64_to_cpu(k->inode), &type, &dev)) {
		prt_printf(err, "position %llu is no member's (0..%u, or %llu + member)",
			   (unsigned long long)le64_to_cpu(k->inode), TFS_MAX_DEVICES - 1,
			   TFS_ALLOC_BTREE_INODE);
		return -TFS_ERR_bkey_invalid;
	}
	if (a->data_type != type) {
		prt_printf(err, "data type %u at a position of data type %u", a->data_type, type);
		return -TFS_ERR_bkey_invalid;
	}
	if (a->pad0 || a->pad1 || a->pad2) {
		prt_str(err, "pad not zero");
		return -TFS_ERR_bkey_invalid;
	}
	nr = le32_to_cpu(a->nr_blocks);
	if (!nr || nr > TFS_ALLOC_MAX_BUCKET_BLOCKS) {
		prt_printf(err, "nr_blocks %u not in 1..%u", nr, TFS_ALLOC_MAX_BUCKET_BLOCKS);
		return -TFS_ERR_bkey_invalid;
	}
	if (bytes != tfs_alloc_key_val_bytes(nr)) {
		prt_printf(err, "value of %zu bytes for %u blocks (%zu expected)", bytes, nr,
			   tfs_alloc_key_val_bytes(nr));
		return -TFS_ERR_bkey_invalid;
	}
	words = DIV_ROUND_UP(nr, 64);
	if (nr % 64 && le64_to_cpu(a->bits[words - 1]) >> (nr % 64)) {
		prt_printf(err, "bits set past block %u", nr);
		return -TFS_ERR_bkey_invalid;
	}
	if (!a->used || le32_to_cpu(a->used) != words_popcount(a->bits, words)) {
		prt_printf(err, "used %u but %u bits set", le32_to_cpu(a->used),
			   words_popcount(a->bits, words));
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static const char *const alloc_data_type_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_ALLOC_DATA_TYPES(x)
#undef x
};

/* "0-7,12,14-15": runs of set bits. */
static void bits_to_text(struct printbuf *out, const __le64 *w, unsigned nr)
{
	bool first = true;

	for (unsigned i = 0; i < nr;) {
		unsigned j;

		if (!(le64_to_cpu(w[i / 64]) & (1ULL << (i % 64)))) {
			i++;
			continue;
		}
		for (j = i + 1; j < nr && (le64_to_cpu(w[j / 64]) & (1ULL << (j % 64))); j++)
			;
		prt_printf(out, "%s%u", first ? "" : ",", i);
		if (j - 1 > i)
			prt_printf(out, "-%u", j - 1);
		first = false;
		i = j;
	}
}

static void alloc_key_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_alloc_key *a = tfs_bkey_val(k);
	unsigned nr;

	if (tfs_bkey_val_bytes(k) < sizeof(*a)) {
		prt_str(out, "(short)");
		return;
	}
	nr = le32_to_cpu(a->nr_blocks);
	if (a->data_type < TFS_ALLOC_DATA_NR)
		prt_str(out, alloc_data_type_names[a->data_type]);
	else
		prt_printf(out, "data type %u", a->data_type);
	prt_printf(out, " used %u/%u blocks ", le32_to_cpu(a->used), nr);
	bits_to_text(out, a->bits,
		     min_t(unsigned, nr, (unsigned)(tfs_bkey_val_bytes(k) - sizeof(*a)) * 8));
}

const struct tfs_bkey_ops tfs_bkey_ops_alloc = {
	.validate = alloc_key_validate,
	.val_to_text = alloc_key_val_to_text,
};

static const char *const acct_kind_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_ACCT_KINDS(x)
#undef x
};

static int accounting_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_accounting *a = tfs_bkey_val(k);
	u64 off = le64_to_cpu(k->offset);
	unsigned kind = (unsigned)(off >> 32), dev = (u32)off;

	if (tfs_bkey_val_bytes(k) != sizeof(*a)) {
		prt_printf(err, "value of %zu bytes (%zu expected)", tfs_bkey_val_bytes(k),
			   sizeof(*a));
		return -TFS_ERR_bkey_invalid;
	}
	if (le64_to_cpu(k->inode) != TFS_ACCT_INODE || !kind || kind >= TFS_ACCT_KIND_NR ||
	    dev >= TFS_MAX_DEVICES || (kind == TFS_ACCT_inodes && dev)) {
		prt_str(err, "not an accounting position");
		return -TFS_ERR_bkey_invalid;
	}
	if (!a->value) {
		prt_str(err, "counter at zero (a zero counter has no key)");
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static void accounting_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_accounting *a = tfs_bkey_val(k);
	u64 off = le64_to_cpu(k->offset);
	unsigned kind = (unsigned)(off >> 32);

	if (tfs_bkey_val_bytes(k) < sizeof(*a)) {
		prt_str(out, "(short)");
		return;
	}
	if (kind && kind < TFS_ACCT_KIND_NR)
		prt_str(out, acct_kind_names[kind]);
	else
		prt_printf(out, "kind %u", kind);
	if (kind != TFS_ACCT_inodes)
		prt_printf(out, " member %u", (u32)off);
	prt_printf(out, ": %llu", (unsigned long long)le64_to_cpu(a->value));
}

const struct tfs_bkey_ops tfs_bkey_ops_accounting = {
	.validate = accounting_validate,
	.val_to_text = accounting_val_to_text,
};

const char *tfs_acct_kind_str(unsigned kind)
{
	return kind && kind < TFS_ACCT_KIND_NR ? acct_kind_names[kind] : NULL;
}

/* --- the commit trigger --- */

/* The key at exactly pos in a btree the caller holds intent-locked; NULL if none. */
static int locked_lookup(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bpos pos,
			 const struct tfs_bkey **k)
{
	struct tfs_btree_path path;
	const struct tfs_bnode *leaf;
	unsigned idx;
	int ret = tfs_btree_walk(&fs->btrees[id], pos, 0, &path, true);

	*k = NULL;
	if (ret)
		return ret;
	leaf = path.n[0];
	idx = tfs_bnode_lower_bound(leaf, pos);
	if (idx < leaf->nr_keys && tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), pos))
		*k = tfs_bnode_key(leaf, idx);
	return 0;
}

/* Blocks [first, first + nr) of one bucket, taken (set) or released. */
struct blk_delta {
	u32 dev;
	bool set;
	u64 bucket;
	u32 first, nr;
};

struct trigger {
	struct tfs_fs *fs;
	struct blk_delta *d;
	unsigned nr, size;
	s64 inodes;
};

static int delta_push(struct trigger *t, struct blk_delta d)
{
	if (t->nr == t->size) {
		unsigned size = t->size ? t->size * 2 : 16;
		struct blk_delta *n = realloc(t->d, size * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->d = n;
		t->size = size;
	}
	t->d[t->nr++] = d;
	return 0;
}

/* The blocks an extent key's pointers cover, bucket by bucket. */
static int extent_deltas(struct trigger *t, const struct tfs_bkey *k, bool set)
{
	struct tfs_fs *fs = t->fs;
	const struct tfs_extent *e;
	u32 bs = fs->block_size;

	if (!k || k->type != TFS_BKEY_extent)
		return 0;
	e = tfs_bkey_val(k);
	/* Keys reaching a commit or a leaf were validated: the pointers are there. */
	for (unsigned p = 0; p < e->nr_ptrs; p++) {
		u32 dev = le32_to_cpu(e->ptrs[p].dev);
		u64 off = le64_to_cpu(e->ptrs[p].offset);
		u64 len = (u64)le32_to_cpu(e->nr_blocks) * bs;
		u32 bsz;

		if (dev >= fs->nr_devices || !(bsz = fs->alloc.devs[dev].bucket_size))
			continue; /* a member of unknown geometry: refused at open */
		while (len) {
			u64 in = off % bsz, n = min_t(u64, len, bsz - in);
			int ret = delta_push(t, (struct blk_delta){ .dev = dev,
								    .set = set,
								    .bucket = off / bsz,
								    .first = (u32)(in / bs),
								    .nr = (u32)(n / bs) });

			if (ret)
				return ret;
			off += n;
			len -= n;
		}
	}
	return 0;
}

static int delta_cmp(const void *a, const void *b)
{
	const struct blk_delta *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	return (int)x->set - (int)y->set; /* releases before takes */
}

/* A final update to look at: (btree, position) sorted, last in queue order wins. */
struct trig_item {
	unsigned idx;
	enum tfs_btree_id id;
	struct tfs_bpos pos;
};

static int trig_item_cmp(const void *a, const void *b)
{
	const struct trig_item *x = a, *y = b;
	int c;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	c = tfs_bpos_cmp(x->pos, y->pos);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void bits_update(__le64 *w, u32 first, u32 nr, bool set)
{
	for (u32 i = first; i < first + nr; i++) {
		u64 v = le64_to_cpu(w[i / 64]);

		v = set ? v | (1ULL << (i % 64)) : v & ~(1ULL << (i % 64));
		w[i / 64] = cpu_to_le64(v);
	}
}

/* Queues the accounting key (kind, dev) moved by delta. */
static int acct_update(struct tfs_btree_trans *trans, enum tfs_acct_kind kind, unsigned dev,
		       s64 delta)
{
	struct tfs_bpos pos = tfs_acct_pos(kind, dev);
	const struct tfs_bkey *old;
	struct tfs_bkey_buf buf;
	struct tfs_accounting *a;
	u64 v = 0;
	int ret;

	if (!delta)
		return 0;
	ret = locked_lookup(trans->fs, TFS_BTREE_alloc, pos, &old);
	if (ret)
		return ret;
	if (old && old->type == TFS_BKEY_accounting)
		v = le64_to_cpu(((const struct tfs_accounting *)tfs_bkey_val(old))->value);
	/* A counter never goes below zero; a wrong one is fsck's to report. */
	v = delta < 0 && (u64)-delta > v ? 0 : v + (u64)delta;
	if (!v)
		return tfs_trans_delete(trans, TFS_BTREE_alloc, pos);
	a = tfs_bkey_init(&buf, TFS_BKEY_accounting, pos, sizeof(*a));
	a->value = cpu_to_le64(v);
	return tfs_trans_update(trans, TFS_BTREE_alloc, &buf.k);
}

/* One bucket's deltas d[0..nr): its new alloc key queued when it changes. */
static int bucket_update(struct tfs_btree_trans *trans, enum tfs_alloc_data_type type,
			 const struct blk_delta *d, unsigned nr, s64 *used_delta)
{
	struct tfs_fs *fs = trans->fs;
	struct tfs_bpos pos = tfs_alloc_pos(type, d->dev, d->bucket);
	u32 nr_blocks = fs->alloc.devs[d->dev].bucket_size / fs->block_size;
	unsigned words = DIV_ROUND_UP(nr_blocks, 64), old_used = 0, used;
	const struct tfs_bkey *old;
	struct tfs_bkey_buf buf;
	struct tfs_alloc_key *a;
	int ret;

	ret = locked_lookup(fs, TFS_BTREE_alloc, pos, &old);
	if (ret)
		return ret;
	a = tfs_bkey_init(&buf, TFS_BKEY_alloc, pos, tfs_alloc_key_val_bytes(nr_blocks));
	a->data_type = type;
	a->nr_blocks = cpu_to_le32(nr_blocks);
	if (old && old->type == TFS_BKEY_alloc) {
		const struct tfs_alloc_key *o = tfs_bkey_val(old);

		if (le32_to_cpu(o->nr_blocks) == nr_blocks)
			memcpy(a->bits, o->bits, words * 8);
		old_used = words_popcount(o->bits, DIV_ROUND_UP(le32_to_cpu(o->nr_blocks), 64));
	}
	/* Sorted: releases first, so a cut extent that keeps blocks keeps them set. */
	for (unsigned i = 0; i < nr; i++)
		bits_update(a->bits, d[i].first, min_t(u32, d[i].nr, nr_blocks - d[i].first),
			    d[i].set);
	used = words_popcount(a->bits, words);
	*used_delta += (s64)used - (s64)old_used;
	if (!used)
		return old ? tfs_trans_delete(trans, TFS_BTREE_alloc, pos) : 0;
	a->used = cpu_to_le32(used);
	if (old && old->type == TFS_BKEY_alloc && tfs_bkey_bytes(old) == tfs_bkey_bytes(&buf.k) &&
	    !memcmp(tfs_bkey_val(old), a, tfs_bkey_val_bytes(old)))
		return 0; /* unchanged (an unwritten extent becoming written) */
	return tfs_trans_update(trans, TFS_BTREE_alloc, &buf.k);
}

unsigned tfs_alloc_trigger_btrees(const struct tfs_btree_trans *trans, unsigned flags)
{
	/* A key cache flush writes back a key the leaf holds: nothing to account. */
	if (flags & TFS_TRANS_KEY_CACHE_FLUSH)
		return 0;
	for (unsigned i = 0; i < trans->nr_updates; i++)
		if (trans->updates[i].id == TFS_BTREE_extents ||
		    trans->updates[i].id == TFS_BTREE_inodes)
			return 1U << TFS_BTREE_alloc;
	return 0;
}

/*
 * The block deltas of t, sorted: one new alloc key of type per bucket, then
 * the change of blocks used per member into its acct counter.
 */
static int deltas_apply(struct tfs_btree_trans *trans, struct trigger *t,
			enum tfs_alloc_data_type type, enum tfs_acct_kind acct)
{
	s64 used_delta[TFS_MAX_DEVICES] = { 0 };
	int ret = 0;

	if (t->nr)
		qsort(t->d, t->nr, sizeof(*t->d), delta_cmp);
	for (unsigned i = 0, j; !ret && i < t->nr; i = j) {
		for (j = i + 1;
		     j < t->nr && t->d[j].dev == t->d[i].dev && t->d[j].bucket == t->d[i].bucket;
		     j++)
			;
		ret = bucket_update(trans, type, &t->d[i], j - i, &used_delta[t->d[i].dev]);
	}
	for (unsigned dev = 0; !ret && dev < TFS_MAX_DEVICES; dev++)
		ret = acct_update(trans, acct, dev, used_delta[dev]);
	return ret;
}

int tfs_alloc_trigger(struct tfs_btree_trans *trans, unsigned flags)
{
	struct tfs_fs *fs = trans->fs;
	struct trigger t = { .fs = fs };
	struct trig_item stack[16], *items = stack;
	unsigned nr_items = 0, nr_updates = trans->nr_updates;
	int ret = 0;

	if (!tfs_alloc_trigger_btrees(trans, flags))
		return 0;
	if (nr_updates > ARRAY_SIZE(stack)) {
		items = malloc(nr_updates * sizeof(*items));
		if (!items)
			return -ENOMEM;
	}
	for (unsigned i = 0; i < nr_updates; i++) {
		const struct tfs_trans_update *u = &trans->updates[i];

		if (u->id == TFS_BTREE_extents || u->id == TFS_BTREE_inodes)
			items[nr_items++] = (struct trig_item){ .idx = i,
								.id = u->id,
								.pos = tfs_bkey_pos(u->k) };
	}
	qsort(items, nr_items, sizeof(*items), trig_item_cmp);

	/* What each final update changes, against the key the leaf holds now. */
	for (unsigned i = 0; i < nr_items && !ret; i++) {
		const struct trig_item *it = &items[i];
		const struct tfs_bkey *new = trans->updates[it->idx].k, *old;

		if (i + 1 < nr_items && items[i + 1].id == it->id &&
		    tfs_bpos_eq(items[i + 1].pos, it->pos))
			continue; /* not the final update of its position */
		ret = locked_lookup(fs, it->id, it->pos, &old);
		if (ret)
			break;
		if (it->id == TFS_BTREE_inodes) {
			t.inodes += (new->type == TFS_BKEY_inode) -
				    (old && old->type == TFS_BKEY_inode);
			continue;
		}
		ret = extent_deltas(&t, old, false) ?: extent_deltas(&t, new, true);
	}
	if (items != stack)
		free(items);

	/* Per bucket, the new alloc key. */
	if (!ret)
		ret = deltas_apply(trans, &t, TFS_ALLOC_DATA_user, TFS_ACCT_user_blocks);
	if (!ret)
		ret = acct_update(trans, TFS_ACCT_inodes, 0, t.inodes);
	free(t.d);
	return ret;
}

/* The blocks of a node's copies at loc (a node lies inside one bucket). */
static int loc_deltas(struct trigger *t, const struct tfs_btree_loc *loc, bool set)
{
	struct tfs_fs *fs = t->fs;

	for (unsigned r = 0; r < loc->nr; r++) {
		u32 dev = loc->ptrs[r].dev, bsz;
		u64 off = loc->ptrs[r].offset;
		int ret;

		if (dev >= fs->nr_devices || !(bsz = fs->alloc.devs[dev].bucket_size))
			continue; /* a member of unknown geometry: refused at open */
		ret = delta_push(t, (struct blk_delta){ .dev = dev,
							.set = set,
							.bucket = off / bsz,
							.first = (u32)(off % bsz / fs->block_size),
							.nr = fs->node_size / fs->block_size });
		if (ret)
			return ret;
	}
	return 0;
}

int tfs_alloc_nodes_trigger(struct tfs_btree_trans *trans)
{
	const struct tfs_trans_roots *r = trans->roots;
	struct trigger t = { .fs = trans->fs };
	int ret = 0;

	if (!r)
		return 0;
	/*
	 * fsck's repair: its keys were computed from nodes and keys taken
	 * with no write-back running; one started since may have changed
	 * both (its pointers before its keys).  Checked under the alloc
	 * btree's lock: a write-back starting after this reads the repaired
	 * keys in its own trigger.
	 */
	if (r->guard &&
	    (__atomic_load_n(&trans->fs->ckpt_running, __ATOMIC_SEQ_CST) ||
	     __atomic_load_n(&trans->fs->ckpt_started, __ATOMIC_SEQ_CST) != r->ckpt_started))
		return -TFS_ERR_fsck_raced_writeback;
	/* The alloc btree's own nodes are not recorded (fs/fs_format.h). */
	if (!r->b || r->b->id == TFS_BTREE_alloc)
		return 0;
	for (unsigned i = 0; i < r->nr_clear && !ret; i++)
		ret = loc_deltas(&t, &r->clear[i], false);
	for (unsigned i = 0; i < r->nr_set && !ret; i++)
		ret = loc_deltas(&t, &r->set[i], true);
	if (!ret)
		ret = deltas_apply(trans, &t, TFS_ALLOC_DATA_btree, TFS_ACCT_btree_blocks);
	free(t.d);
	return ret;
}

/* --- open: the allocator from the alloc keys --- */

int tfs_alloc_keys_load(struct tfs_fs *fs)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_alloc, TFS_POS_MIN,
			    TFS_POS(TFS_ALLOC_BTREE_INODE + TFS_MAX_DEVICES, 0));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_alloc_key *a = tfs_bkey_val(k);
		unsigned dev, type;
		u32 bsz, nr;
		u64 base;

		if (k->type != TFS_BKEY_alloc ||
		    !tfs_alloc_pos_decode(le64_to_cpu(k->inode), &type, &dev) ||
		    dev >= fs->nr_devices || !fs->alloc.devs[dev].bits ||
		    !(bsz = fs->alloc.devs[dev].bucket_size))
			continue; /* a missing member: nothing is allocated there */
		nr = min_t(u32, le32_to_cpu(a->nr_blocks), bsz / fs->block_size);
		base = le64_to_cpu(k->offset) * bsz;
		for (u32 i = 0, j; i < nr; i = j) {
			struct tfs_alloc_run run;

			if (!(le64_to_cpu(a->bits[i / 64]) & (1ULL << (i % 64)))) {
				j = i + 1;
				continue;
			}
			for (j = i + 1;
			     j < nr && (le64_to_cpu(a->bits[j / 64]) & (1ULL << (j % 64))); j++)
				;
			run = (struct tfs_alloc_run){ .dev = dev,
						      .offset = base + (u64)i * fs->block_size,
						      .len = (u64)(j - i) * fs->block_size };
			if (tfs_alloc_mark_used(fs, &run)) {
				struct printbuf t = PRINTBUF;

				/*
				 * Marked already (doubly used): the free ones of
				 * the run one by one, so the union stays used and
				 * nothing either key marks is handed out.
				 */
				for (u32 b = i; b < j; b++) {
					struct tfs_alloc_run one = {
						.dev = dev,
						.offset = base + (u64)b * fs->block_size,
						.len = fs->block_size,
					};

					tfs_alloc_mark_used(fs, &one);
				}

				tfs_bkey_to_text(&t, k);
				fprintf(stderr,
					"%s: blocks %u..%u: space already used (by another alloc key, "
					"an alloc btree node or a journal bucket) or outside usable "
					"space (fsck repairs it)\n",
					printbuf_str(&t), i, j - 1);
				printbuf_exit(&t);
			}
		}
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

int tfs_acct_read(struct tfs_fs *fs, enum tfs_acct_kind kind, unsigned dev, u64 *v)
{
	struct tfs_bkey_buf buf;
	int ret = tfs_btree_lookup(fs, TFS_BTREE_alloc, tfs_acct_pos(kind, dev), &buf);

	*v = 0;
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	if (buf.k.type == TFS_BKEY_accounting)
		*v = le64_to_cpu(((const struct tfs_accounting *)tfs_bkey_val(&buf.k))->value);
	return 0;
}

void tfs_acct_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	u64 v;

	prt_str(out, "accounting (alloc btree):\n");
	printbuf_indent_add(out, 2);
	for (unsigned dev = 0; dev < fs->nr_devices; dev++)
		if (!tfs_acct_read(fs, TFS_ACCT_user_blocks, dev, &v))
			prt_printf(out, "member %u user data:\t%llu blocks\n", dev,
				   (unsigned long long)v);
	for (unsigned dev = 0; dev < fs->nr_devices; dev++)
		if (!tfs_acct_read(fs, TFS_ACCT_btree_blocks, dev, &v))
			prt_printf(out, "member %u btree nodes:\t%llu blocks\n", dev,
				   (unsigned long long)v);
	if (!tfs_acct_read(fs, TFS_ACCT_inodes, 0, &v))
		prt_printf(out, "inodes:\t%llu\n", (unsigned long long)v);
	printbuf_indent_sub(out, 2);
}
