// SPDX-License-Identifier: GPL-2.0
/*
 * Nodes in memory and the tree's shape: searching a node, inserting and
 * removing keys, compaction, walking from the root, splits (growing the
 * tree a level at the root), merges (shrinking it).
 *
 * Everything here runs under the tree's lock held for write, except
 * tfs_btree_walk() (any mode: readers, and a commit's fit under intent).
 * A split or a merge never changes what the tree holds, only how it is
 * cut into nodes, so commits may split before they take their journal
 * reservation and merge after applying (see btree_update.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/btree_internal.h"
#include "fs/btree_io.h"
#include "lib/errcode.h"

unsigned tfs_bnode_lower_bound(const struct tfs_bnode *n, struct tfs_bpos pos)
{
	unsigned lo = 0, hi = n->nr_keys;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (tfs_bpos_cmp(tfs_bkey_pos(tfs_bnode_key(n, mid)), pos) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void tfs_bnode_set_dirty(struct tfs_btree *b, struct tfs_bnode *n)
{
	if (!n->dirty) {
		n->dirty = true;
		__atomic_add_fetch(&b->nr_dirty, 1, __ATOMIC_RELAXED);
	}
}

/* Rewrites the heap with only the listed keys, in order (no garbage left). */
static void bnode_compact(struct tfs_btree *b, struct tfs_bnode *n)
{
	u32 used = 0;

	for (unsigned i = 0; i < n->nr_keys; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(n, i);
		unsigned u64s = tfs_bkey_u64s(k);

		memcpy(b->scratch + used, k, (size_t)u64s * 8);
		n->offs[i] = (u16)used;
		used += u64s;
	}
	memcpy(n->heap, b->scratch, (size_t)used * 8);
	n->heap_used = used;
	n->live_u64s = used;
	b->c.compactions++;
}

/* Room for u64s more words at the end of the heap (the caller checked the fit). */
static void bnode_make_room(struct tfs_btree *b, struct tfs_bnode *n, unsigned u64s)
{
	if (n->heap_used + u64s > n->cap)
		bnode_compact(b, n);
}

void tfs_bnode_insert(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
		      const struct tfs_bkey *k, struct tfs_bnode *child)
{
	unsigned u64s = tfs_bkey_u64s(k);

	bnode_make_room(b, n, u64s);
	memcpy(n->heap + n->heap_used, k, (size_t)u64s * 8);
	memmove(n->offs + idx + 1, n->offs + idx, (n->nr_keys - idx) * sizeof(n->offs[0]));
	n->offs[idx] = (u16)n->heap_used;
	if (n->level) {
		memmove(n->child + idx + 1, n->child + idx,
			(n->nr_keys - idx) * sizeof(n->child[0]));
		n->child[idx] = child;
	}
	n->heap_used += u64s;
	n->live_u64s += u64s;
	n->nr_keys++;
}

void tfs_bnode_remove(struct tfs_bnode *n, unsigned idx)
{
	n->live_u64s -= tfs_bkey_u64s(tfs_bnode_key(n, idx));
	memmove(n->offs + idx, n->offs + idx + 1, (n->nr_keys - idx - 1) * sizeof(n->offs[0]));
	if (n->level)
		memmove(n->child + idx, n->child + idx + 1,
			(n->nr_keys - idx - 1) * sizeof(n->child[0]));
	n->nr_keys--;
	if (!n->nr_keys)
		n->heap_used = 0;
}

void tfs_bnode_replace(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
		       const struct tfs_bkey *k)
{
	struct tfs_bkey *old = tfs_bnode_key(n, idx);
	struct tfs_bnode *child = n->level ? n->child[idx] : NULL;

	if (tfs_bkey_u64s(old) == tfs_bkey_u64s(k)) {
		memcpy(old, k, tfs_bkey_bytes(k));
		return;
	}
	/* Out first, so a compaction does not keep the old key's words. */
	tfs_bnode_remove(n, idx);
	tfs_bnode_insert(b, n, idx, k, child);
}

void tfs_bnode_reset(struct tfs_bnode *n)
{
	n->nr_keys = 0;
	n->heap_used = 0;
	n->live_u64s = 0;
}

struct tfs_bnode *tfs_btree_new_root_leaf(struct tfs_btree *b)
{
	struct tfs_bnode *n = tfs_bnode_alloc(b, 0);

	if (!n)
		return NULL;
	n->min_key = TFS_POS_MIN;
	n->max_key = TFS_POS_MAX;
	__atomic_add_fetch(&b->nr_nodes[0], 1, __ATOMIC_RELAXED);
	tfs_bnode_set_dirty(b, n);
	return n;
}

/*
 * The btree_ptr key an interior node holds for child c: its current copy,
 * or while a checkpoint writes c, the new one (as the keys the checkpoint
 * set): the old copy is freed when that checkpoint is durable, and a root
 * grown over c meanwhile kept pointing at it (fsck then found another
 * tree's node in the same place).  A failed checkpoint sets them back.
 */
static void bnode_ptr_key(struct tfs_fs *fs, struct tfs_bkey_buf *buf, const struct tfs_bnode *c)
{
	const struct tfs_btree_loc *loc = c->writing ? &c->new_disk : &c->disk;
	struct tfs_btree_ptr *p = tfs_bkey_init(buf, TFS_BKEY_btree_ptr, c->max_key,
						tfs_btree_ptr_val_bytes(fs->btree_ptr_replicas));

	p->level = c->level;
	p->nr_ptrs = (u8)loc->nr;
	p->seq = cpu_to_le64(c->writing ? c->new_seq : c->disk_seq);
	p->csum = cpu_to_le32(c->writing ? c->new_csum : c->disk_csum);
	for (unsigned i = 0; i < loc->nr; i++) {
		p->ptrs[i].dev = cpu_to_le32(loc->ptrs[i].dev);
		p->ptrs[i].offset = cpu_to_le64(loc->ptrs[i].offset);
	}
}

int tfs_btree_walk(struct tfs_btree *b, struct tfs_bpos pos, unsigned level,
		   struct tfs_btree_path *path, bool write)
{
	struct tfs_bnode *n = b->root;

	path->root_level = n->level;
	while (1) {
		unsigned idx = tfs_bnode_lower_bound(n, pos);
		struct tfs_bnode *child;
		int ret;

		path->n[n->level] = n;
		path->idx[n->level] = idx;
		if (n->level <= level)
			return 0;
		/* An interior node's last key is at its max_key, so idx < nr_keys. */
		if (idx >= n->nr_keys)
			abort();
		child = __atomic_load_n(&n->child[idx], __ATOMIC_ACQUIRE);
		if (!child) {
			/* Just read: it enters the cache's LRU at the back, not accessed. */
			ret = tfs_btree_read_child(b, n, idx, &child);
			if (ret)
				return ret;
		} else if (!__atomic_load_n(&child->accessed, __ATOMIC_RELAXED)) {
			/* A hit: the bit alone (the scan gives a second chance), no list move. */
			__atomic_store_n(&child->accessed, 1, __ATOMIC_RELAXED);
		}
		n = child;
	}
}

/* Index of the key of the node at `level` in its parent (the path's). */
static int btree_split_grow_root(struct tfs_btree *b, struct tfs_bnode *n)
{
	struct tfs_bkey_buf key;
	struct tfs_bnode *r;

	if (n->level + 1 >= TFS_BTREE_MAX_DEPTH)
		return -E2BIG;
	r = tfs_bnode_alloc(b, n->level + 1);
	if (!r)
		return -ENOMEM;
	r->min_key = TFS_POS_MIN;
	r->max_key = TFS_POS_MAX;
	bnode_ptr_key(b->fs, &key, n);
	tfs_bnode_insert(b, r, 0, &key.k, n);
	b->root = r;
	__atomic_add_fetch(&b->nr_nodes[r->level], 1, __ATOMIC_RELAXED);
	b->c.height_grows++;
	if (r->level + 1u > b->c.max_height)
		b->c.max_height = r->level + 1u;
	tfs_bnode_set_dirty(b, r);
	return 0;
}

int tfs_btree_split_locked(struct tfs_btree *b, struct tfs_bpos pos, unsigned level,
			   struct tfs_bpos split_pos)
{
	struct tfs_fs *fs = b->fs;
	unsigned ptr_u64s = tfs_btree_ptr_key_u64s(fs);
	struct tfs_btree_path path;
	struct tfs_bnode *n, *parent, *left;
	struct tfs_bkey_buf key;
	unsigned nr_left;
	int ret;

	while (1) {
		ret = tfs_btree_walk(b, pos, level, &path, true);
		if (ret)
			return ret;
		n = path.n[level];
		if (tfs_bpos_cmp(split_pos, n->min_key) < 0 ||
		    tfs_bpos_cmp(split_pos, n->max_key) >= 0)
			abort(); /* the caller's bug */
		if (level == path.root_level) {
			ret = btree_split_grow_root(b, n);
			if (ret)
				return ret;
			continue;
		}
		parent = path.n[level + 1];
		if (tfs_bnode_fits(parent, ptr_u64s))
			break;
		/* Room in the parent first: split it at its middle key. */
		unsigned m = (parent->nr_keys - 1) / 2;

		ret = tfs_btree_split_locked(b, pos, level + 1,
					     tfs_bkey_pos(tfs_bnode_key(parent, m)));
		if (ret)
			return ret;
	}

	left = tfs_bnode_alloc(b, level);
	if (!left)
		return -ENOMEM;
	nr_left = tfs_bnode_lower_bound(n, tfs_bpos_successor(split_pos));
	for (unsigned i = 0; i < nr_left; i++)
		tfs_bnode_insert(b, left, i, tfs_bnode_key(n, i), level ? n->child[i] : NULL);
	/* Drop the moved keys from n: offsets shift down, their words become garbage. */
	n->live_u64s -= left->live_u64s;
	memmove(n->offs, n->offs + nr_left, (n->nr_keys - nr_left) * sizeof(n->offs[0]));
	if (level)
		memmove(n->child, n->child + nr_left, (n->nr_keys - nr_left) * sizeof(n->child[0]));
	n->nr_keys -= nr_left;
	if (!n->nr_keys)
		n->heap_used = 0;

	left->min_key = n->min_key;
	left->max_key = split_pos;
	left->journal_seq = n->journal_seq;
	n->min_key = tfs_bpos_successor(split_pos);

	bnode_ptr_key(fs, &key, left);
	tfs_bnode_insert(b, parent, path.idx[level + 1], &key.k, left);
	tfs_bnode_set_dirty(b, left);
	tfs_bnode_set_dirty(b, n);
	tfs_bnode_set_dirty(b, parent);
	__atomic_add_fetch(&b->nr_nodes[level], 1, __ATOMIC_RELAXED);
	b->c.splits++;
	__atomic_add_fetch(&b->mod_seq, 1, __ATOMIC_RELEASE);
	return 0;
}

void tfs_btree_pending_free_add(struct tfs_btree *b, const struct tfs_btree_loc *loc)
{
	struct tfs_btree_free_list *fl = &b->pending_free;

	if (fl->nr == fl->size) {
		unsigned size = fl->size ? fl->size * 2 : 16;
		struct tfs_btree_loc *l = realloc(fl->locs, size * sizeof(*l));

		if (l) {
			fl->locs = l;
			fl->size = size;
		}
	}
	/* Without memory the space leaks until the next open's rebuild: never unsafe. */
	if (fl->nr < fl->size)
		fl->locs[fl->nr++] = *loc;
}

void tfs_bnode_drop_locked(struct tfs_btree *b, struct tfs_bnode *n)
{

	if (n->dirty) {
		n->dirty = false;
		__atomic_sub_fetch(&b->nr_dirty, 1, __ATOMIC_RELAXED);
	}
	__atomic_sub_fetch(&b->nr_nodes[n->level], 1, __ATOMIC_RELAXED);
	if (n->writing) {
		/*
		 * Its checkpoint frees the old copy once that checkpoint is durable
		 * and hands the new one to the next (btree_write.c).
		 */
		n->dead = true;
		n->next = b->dead;
		b->dead = n;
		return;
	}
	if (n->disk.nr) {
		/* The durable tree still refers to it: freed once a newer tree is durable. */
		tfs_btree_pending_free_add(b, &n->disk);
		n->disk.nr = 0;
	}
	tfs_bnode_free(b->fs, n);
}

/* Moves every key of l (the left sibling) to the front of r; drops l. */
static void bnode_merge_into(struct tfs_btree *b, struct tfs_bnode *parent, unsigned lidx,
			     struct tfs_bnode *l, struct tfs_bnode *r)
{
	unsigned nl = l->nr_keys;

	if (r->heap_used + l->live_u64s > r->cap)
		bnode_compact(b, r);
	memmove(r->offs + nl, r->offs, r->nr_keys * sizeof(r->offs[0]));
	if (r->level)
		memmove(r->child + nl, r->child, r->nr_keys * sizeof(r->child[0]));
	for (unsigned i = 0; i < nl; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(l, i);
		unsigned u64s = tfs_bkey_u64s(k);

		memcpy(r->heap + r->heap_used, k, (size_t)u64s * 8);
		r->offs[i] = (u16)r->heap_used;
		if (r->level)
			r->child[i] = l->child[i];
		r->heap_used += u64s;
		r->live_u64s += u64s;
	}
	r->nr_keys += nl;
	r->min_key = l->min_key;
	if (l->journal_seq > r->journal_seq)
		r->journal_seq = l->journal_seq;
	tfs_bnode_remove(parent, lidx);
	tfs_bnode_set_dirty(b, r);
	tfs_bnode_set_dirty(b, parent);
	tfs_bnode_drop_locked(b, l);
	b->c.merges++;
}

void tfs_btree_maybe_merge_locked(struct tfs_btree *b, struct tfs_bpos pos)
{
	struct tfs_btree_path path;

	for (unsigned level = 0;; level++) {
		struct tfs_bnode *n, *parent, *s;
		unsigned pidx;
		bool merged = false;

		if (tfs_btree_walk(b, pos, level, &path, true) || level >= path.root_level)
			break;
		n = path.n[level];
		parent = path.n[level + 1];
		pidx = path.idx[level + 1];
		/* Only a node down to a third is worth a merge (and a sibling read). */
		if (n->live_u64s * 3 > n->cap)
			break;
		/* Right sibling, then left: together within 2/3 of a node. */
		for (int d = 1; d >= -1 && !merged; d -= 2) {
			unsigned sidx = pidx + d;

			if ((d < 0 && !pidx) || sidx >= parent->nr_keys)
				continue;
			s = parent->child[sidx];
			/* Merging is optional: a sibling that cannot be read is left alone. */
			if (!s && tfs_btree_read_child(b, parent, sidx, &s))
				continue;
			if ((n->live_u64s + s->live_u64s) * 3 > n->cap * 2)
				continue;
			if (d > 0)
				bnode_merge_into(b, parent, pidx, n, s);
			else
				bnode_merge_into(b, parent, sidx, s, n);
			merged = true;
		}
		if (!merged)
			break;
	}
	/* An interior root with one child: the child becomes the root. */
	while (b->root->level && b->root->nr_keys == 1) {
		struct tfs_bnode *old = b->root, *c = old->child[0];

		if (!c && tfs_btree_read_child(b, old, 0, &c))
			break;

		c->min_key = TFS_POS_MIN;
		c->max_key = TFS_POS_MAX;
		tfs_bnode_set_dirty(b, c);
		b->root = c;
		old->nr_keys = 0;
		tfs_bnode_drop_locked(b, old);
		b->c.height_shrinks++;
	}
	__atomic_add_fetch(&b->mod_seq, 1, __ATOMIC_RELEASE);
}

/*
 * Where to split leaf n so that n's keys plus the incoming ones (sorted by
 * position, in[i] words each, one per position) divide about in half by size.
 * Returns a position p with n->min_key <= p < n->max_key.
 */
struct tfs_bpos tfs_bnode_split_pos(const struct tfs_bnode *n, const struct tfs_bpos *in_pos,
				    const unsigned *in_u64s, unsigned nr_in)
{
	u64 total = n->live_u64s, acc = 0;
	unsigned i = 0, j = 0;
	struct tfs_bpos prev = n->min_key, cur;
	bool have_prev = false;

	for (unsigned k = 0; k < nr_in; k++)
		total += in_u64s[k];
	while (i < n->nr_keys || j < nr_in) {
		bool take_key = j >= nr_in ||
				(i < n->nr_keys &&
				 tfs_bpos_cmp(tfs_bkey_pos(tfs_bnode_key(n, i)), in_pos[j]) <= 0);

		if (take_key) {
			cur = tfs_bkey_pos(tfs_bnode_key(n, i));
			acc += tfs_bkey_u64s(tfs_bnode_key(n, i));
			i++;
		} else {
			cur = in_pos[j];
			acc += in_u64s[j];
			j++;
		}
		if (acc * 2 >= total && tfs_bpos_cmp(cur, n->max_key) < 0)
			return cur;
		if (tfs_bpos_cmp(cur, n->max_key) >= 0)
			break;
		prev = cur;
		have_prev = true;
	}
	/* Everything sat at the end: split just before the last position. */
	if (have_prev)
		return prev;
	return n->min_key;
}

int tfs_btree_insert_split_locked(struct tfs_btree *b, const struct tfs_bkey *k)
{
	struct tfs_bpos pos = tfs_bkey_pos(k);
	struct tfs_btree_path path;
	int ret;

	while (1) {
		struct tfs_bnode *leaf;
		unsigned idx, old = 0;
		bool exists;

		ret = tfs_btree_walk(b, pos, 0, &path, true);
		if (ret)
			return ret;
		leaf = path.n[0];
		idx = path.idx[0];
		exists = idx < leaf->nr_keys &&
			 tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), pos);
		if (exists)
			old = tfs_bkey_u64s(tfs_bnode_key(leaf, idx));
		if (k->type == TFS_BKEY_deleted) {
			if (exists) {
				tfs_bnode_remove(leaf, idx);
				b->nr_keys--;
				tfs_bnode_set_dirty(b, leaf);
				tfs_btree_maybe_merge_locked(b, pos);
			}
			return 0;
		}
		if (tfs_bkey_u64s(k) <= old || tfs_bnode_fits(leaf, tfs_bkey_u64s(k) - old)) {
			if (exists) {
				tfs_bnode_replace(b, leaf, idx, k);
			} else {
				tfs_bnode_insert(b, leaf, idx, k, NULL);
				b->nr_keys++;
			}
			tfs_bnode_set_dirty(b, leaf);
			__atomic_add_fetch(&b->mod_seq, 1, __ATOMIC_RELEASE);
			return 0;
		}
		unsigned u64s = tfs_bkey_u64s(k);

		ret = tfs_btree_split_locked(b, pos, 0, tfs_bnode_split_pos(leaf, &pos, &u64s, 1));
		if (ret)
			return ret;
	}
}

/* --- fsck: lost leaves --- */

struct replace_ctx {
	struct tfs_btree *b;
	struct tfs_bnode *leaf;
	struct tfs_btree_lost_leaf l;
};

/* A dirty key cache entry's key of the lost range, back into the new leaf. */
static void replace_keep(void *ctx, const struct tfs_bkey *k)
{
	struct replace_ctx *rc = ctx;
	struct tfs_bnode *n = rc->leaf;
	unsigned idx = tfs_bnode_lower_bound(n, tfs_bkey_pos(k));

	/* One key per position; a leaf that held them all holds them again, unless they grew. */
	if ((idx < n->nr_keys &&
	     tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(n, idx)), tfs_bkey_pos(k))) ||
	    !tfs_bnode_fits(n, tfs_bkey_u64s(k)))
		return;
	tfs_bnode_insert(rc->b, n, idx, k, NULL);
	rc->l.kept++;
}

/*
 * An empty subtree of the given height over [min, max]: a leaf, and above it
 * one interior node per level, each with the one key (max) of the node
 * below, so every leaf stays at the same depth (a split or a merge later
 * gives them siblings).  Every node dirty, never written (nr_ptrs 0 in its
 * parent, as a split's new node).  *leaf is the bottom one; NULL on ENOMEM.
 */
static struct tfs_bnode *empty_subtree(struct tfs_btree *b, unsigned height, struct tfs_bpos min,
				       struct tfs_bpos max, struct tfs_bnode **leaf)
{
	struct tfs_bnode *below = NULL;

	for (unsigned level = 0; level <= height; level++) {
		struct tfs_bnode *n = tfs_bnode_alloc(b, level);

		if (!n) {
			while (below) {
				struct tfs_bnode *c = below->level ? below->child[0] : NULL;

				tfs_bnode_free(b->fs, below);
				below = c;
			}
			return NULL;
		}
		n->min_key = min;
		n->max_key = max;
		/* Written no earlier than what the tree holds is durable (kept keys' seqs too). */
		n->journal_seq = b->max_journal_seq;
		if (below) {
			struct tfs_bkey_buf key;

			bnode_ptr_key(b->fs, &key, below);
			tfs_bnode_insert(b, n, 0, &key.k, below);
		} else {
			*leaf = n;
		}
		below = n;
	}
	return below;
}

/* Dirty and counted: the nodes of an empty subtree once it is in the tree. */
static void empty_subtree_installed(struct tfs_btree *b, struct tfs_bnode *n)
{
	while (n) {
		__atomic_add_fetch(&b->nr_nodes[n->level], 1, __ATOMIC_RELAXED);
		tfs_bnode_set_dirty(b, n);
		n = n->level ? n->child[0] : NULL;
	}
}

int tfs_btree_replace_lost_child_locked(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
					int err, tfs_btree_lost_leaf_fn fn, void *ctx)
{
	struct replace_ctx rc = { .b = b };
	struct tfs_bnode *top;
	struct tfs_bkey_buf key;

	rc.l.id = b->id;
	rc.l.level = n->level - 1;
	rc.l.err = err;
	rc.l.min_key =
		idx ? tfs_bpos_successor(tfs_bkey_pos(tfs_bnode_key(n, idx - 1))) : n->min_key;
	rc.l.max_key = tfs_bkey_pos(tfs_bnode_key(n, idx));
	tfs_btree_ptr_key_loc(tfs_bnode_key(n, idx), &rc.l.loc);
	top = empty_subtree(b, rc.l.level, rc.l.min_key, rc.l.max_key, &rc.leaf);
	if (!top)
		return -ENOMEM;
	tfs_btree_key_cache_drop_range(b->fs->key_cache, b->id, rc.l.min_key, rc.l.max_key,
				       replace_keep, &rc);
	fn(ctx, &rc.l);

	/* The parent's pointer: a node never written, until the write-back writes it. */
	bnode_ptr_key(b->fs, &key, top);
	tfs_bnode_replace(b, n, idx, &key.k);
	n->child[idx] = top;
	/* The durable tree still reaches the old copies: freed by the next write-back. */
	if (rc.l.loc.nr)
		tfs_btree_pending_free_add(b, &rc.l.loc);
	empty_subtree_installed(b, top);
	tfs_bnode_set_dirty(b, n);
	b->nr_keys_known = false;
	__atomic_add_fetch(&b->mod_seq, 1, __ATOMIC_RELEASE);
	return 0;
}

static bool ptr_on_missing(const struct tfs_fs *fs, const struct tfs_bkey *k)
{
	struct tfs_btree_loc loc;

	tfs_btree_ptr_key_loc(k, &loc);
	return tfs_btree_loc_on_missing(fs, &loc);
}

#define LOST_LEAF_REREADS 2
#define LOST_LEAF_REREAD_PAUSE_US 50000u

bool tfs_btree_read_again(struct tfs_btree *b, int err, unsigned attempt)
{
	if (attempt >= LOST_LEAF_REREADS || (!tfs_err_matches(err, TFS_ERR_btree_node_read) &&
					     !tfs_err_matches(err, TFS_ERR_btree_node_invalid)))
		return false;
	fprintf(stderr, "btree %s: reading the node again (%u of %u)\n", tfs_btree_id_str(b->id),
		attempt + 1, LOST_LEAF_REREADS);
	usleep(LOST_LEAF_REREAD_PAUSE_US << (2 * attempt));
	return true;
}

static int replace_bad_leaves(struct tfs_btree *b, struct tfs_bnode *n, tfs_btree_lost_leaf_fn fn,
			      void *ctx, unsigned *nr)
{
	for (unsigned i = 0; n->level && i < n->nr_keys; i++) {
		struct tfs_bnode *c = n->child[i];
		int ret = 0;

		if (!c)
			ret = tfs_btree_read_child(b, n, i, &c);
		/* A read error may pass: read again before the keys of a leaf go. */
		for (unsigned t = 0; ret && tfs_btree_read_again(b, ret, t); t++)
			ret = tfs_btree_read_child(b, n, i, &c);
		if (ret &&
		    (tfs_err_matches(ret, TFS_ERR_btree_node_read) ||
		     tfs_err_matches(ret, TFS_ERR_btree_node_invalid)) &&
		    !ptr_on_missing(b->fs, tfs_bnode_key(n, i))) {
			ret = tfs_btree_replace_lost_child_locked(b, n, i, ret, fn, ctx);
			if (ret)
				return ret;
			(*nr)++;
			continue;
		}
		if (ret)
			return ret;
		if (c->level) {
			ret = replace_bad_leaves(b, c, fn, ctx, nr);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int tfs_btree_replace_bad_leaves(struct tfs_fs *fs, enum tfs_btree_id id, tfs_btree_lost_leaf_fn fn,
				 void *ctx)
{
	struct tfs_btree *b = &fs->btrees[id];
	unsigned nr = 0;
	int ret;

	if (!b->root)
		return 0; /* not read (a failed open) */
	/* Exclusive: children read are installed, a replacement changes nodes. */
	tfs_btree_lock_exclusive(b);
	ret = replace_bad_leaves(b, b->root, fn, ctx, &nr);
	tfs_btree_unlock_exclusive(b);
	return ret ?: (int)nr;
}
