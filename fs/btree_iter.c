// SPDX-License-Identifier: GPL-2.0
/*
 * Reading the trees: lookups, iterators, verification and text.
 *
 * Every read takes the tree's lock for read (lib/six.h: commits hold
 * intent while they prepare, so they keep readers out only while they
 * apply) for the in-memory work only and hands out copies.  An iterator
 * copies a batch of keys from one leaf and serves next() from it while
 * the tree's mod_seq is unchanged; any commit
 * to the tree makes the next call refill from the iterator's position, so
 * a batch never hides a committed change for longer than one call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* --- init --- */

int tfs_btrees_init(struct tfs_fs *fs)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		b->fs = fs;
		b->id = id;
		tfs_six_lock_init(&b->lock);
		pthread_mutex_init(&b->ckpt_lock, NULL);
		tfs_journal_pin_init(&b->pin);
		tfs_journal_pin_init(&b->ckpt_pin);
		b->scratch = malloc((size_t)tfs_btree_node_capacity_u64s(fs->node_size) * 8);
		if (!b->scratch)
			return -ENOMEM;
	}
	return 0;
}

void tfs_btrees_exit(struct tfs_fs *fs)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		if (!b->fs)
			continue;
		tfs_btree_free_nodes(b);
		free(b->scratch);
		free(b->pending_free.locs);
		tfs_six_lock_exit(&b->lock);
		pthread_mutex_destroy(&b->ckpt_lock);
		b->fs = NULL;
	}
}

/* --- lookup --- */

int tfs_btree_lookup(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bpos pos,
		     struct tfs_bkey_buf *out)
{
	struct tfs_btree *b = &fs->btrees[id];
	struct tfs_btree_path path;
	int ret;

	/* Key cache hook: cached btrees answer from the cache first, without a lock. */
	struct tfs_btree_key_cache *kc = __atomic_load_n(&fs->key_cache, __ATOMIC_ACQUIRE);

	if (tfs_btree_key_cache_lookup(kc, id, pos, out))
		return 0;
	tfs_btree_cache_make_room(fs, TFS_BTREE_READ_ROOM);
	tfs_six_lock_read(&b->lock);
	ret = tfs_btree_walk(b, pos, 0, &path, false);
	if (!ret) {
		struct tfs_bnode *leaf = path.n[0];
		unsigned idx = path.idx[0];

		if (idx < leaf->nr_keys &&
		    tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), pos)) {
			tfs_bkey_copy(out, tfs_bnode_key(leaf, idx));
			/* Key cache hook: cache what was read, under the lock. */
			tfs_btree_key_cache_fill(kc, id, tfs_bnode_key(leaf, idx));
		} else
			ret = -ENOENT;
	}
	tfs_six_unlock_read(&b->lock);
	__atomic_add_fetch(&b->c.lookups, 1, __ATOMIC_RELAXED);
	tfs_btree_cache_check_budget(fs);
	return ret;
}

/* --- iterators --- */

/* The engine's part of an iterator (iter->batch). */
struct iter_priv {
	bool have_last; /* iter->k holds the key last returned */
	bool exhausted; /* next() went past end: conceptually after it */
	bool batch_valid;
	struct tfs_bpos from, to; /* the batch holds every key in [from, to] */
	u32 *offs;		  /* [batch_nr] word offsets into keys */
	__le64 *keys;
	size_t keys_size; /* words */
	unsigned offs_size;
};

static struct iter_priv *iter_priv(struct tfs_btree_iter *iter)
{
	if (!iter->batch)
		iter->batch = calloc(1, sizeof(struct iter_priv));
	return iter->batch;
}

void tfs_btree_iter_init(struct tfs_btree_iter *iter, struct tfs_fs *fs, enum tfs_btree_id id,
			 struct tfs_bpos start, struct tfs_bpos end)
{
	memset(iter, 0, sizeof(*iter));
	iter->fs = fs;
	iter->id = id;
	iter->start = start;
	iter->end = end;
	iter->pos = start;
}

void tfs_btree_iter_exit(struct tfs_btree_iter *iter)
{
	struct iter_priv *p = iter->batch;

	if (p) {
		free(p->offs);
		free(p->keys);
		free(p);
	}
	iter->batch = NULL;
}

/* Copies the keys of the leaf covering pos that lie in [pos, end] into the batch. */
static int iter_refill(struct tfs_btree_iter *iter, struct iter_priv *p, struct tfs_bpos pos)
{
	struct tfs_btree *b = &iter->fs->btrees[iter->id];
	struct tfs_btree_path path;
	int ret;

	p->batch_valid = false;
	tfs_btree_cache_make_room(iter->fs, TFS_BTREE_READ_ROOM);
	tfs_six_lock_read(&b->lock);
	ret = tfs_btree_walk(b, pos, 0, &path, false);
	if (ret)
		goto out;

	struct tfs_bnode *leaf = path.n[0];
	unsigned first = path.idx[0], nr = 0;
	size_t words = 0;

	if (p->offs_size < leaf->nr_keys) {
		u32 *o = realloc(p->offs, leaf->nr_keys * sizeof(*o));

		if (!o) {
			ret = -ENOMEM;
			goto out;
		}
		p->offs = o;
		p->offs_size = leaf->nr_keys;
	}
	if (p->keys_size < leaf->live_u64s) {
		__le64 *k = realloc(p->keys, (size_t)leaf->live_u64s * 8);

		if (!k) {
			ret = -ENOMEM;
			goto out;
		}
		p->keys = k;
		p->keys_size = leaf->live_u64s;
	}
	for (unsigned i = first; i < leaf->nr_keys; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(leaf, i);

		if (tfs_bpos_cmp(tfs_bkey_pos(k), iter->end) > 0)
			break;
		memcpy(p->keys + words, k, tfs_bkey_bytes(k));
		p->offs[nr++] = (u32)words;
		words += tfs_bkey_u64s(k);
	}
	iter->batch_nr = nr;
	iter->batch_idx = 0;
	iter->batch_size = p->offs_size;
	iter->batch_cookie = __atomic_load_n(&b->mod_seq, __ATOMIC_ACQUIRE);
	p->from = pos;
	p->to = tfs_bpos_cmp(leaf->max_key, iter->end) < 0 ? leaf->max_key : iter->end;
	p->batch_valid = true;
out:
	tfs_six_unlock_read(&b->lock);
	__atomic_add_fetch(&b->c.iter_refills, 1, __ATOMIC_RELAXED);
	tfs_btree_cache_check_budget(iter->fs);
	return ret;
}

static const struct tfs_bkey *batch_key(struct iter_priv *p, unsigned i)
{
	return (const struct tfs_bkey *)(p->keys + p->offs[i]);
}

int tfs_btree_iter_peek(struct tfs_btree_iter *iter, const struct tfs_bkey **k)
{
	struct tfs_btree *b = &iter->fs->btrees[iter->id];
	struct iter_priv *p = iter_priv(iter);
	struct tfs_bpos pos = iter->pos;
	bool fresh = false;
	int ret;

	*k = NULL;
	if (!p)
		return -ENOMEM;
	if (p->exhausted || tfs_bpos_cmp(pos, iter->end) > 0 ||
	    tfs_bpos_cmp(iter->start, iter->end) > 0)
		return 0;
	while (1) {
		if (!p->batch_valid || tfs_bpos_cmp(pos, p->from) < 0 ||
		    tfs_bpos_cmp(pos, p->to) > 0 ||
		    (!fresh &&
		     iter->batch_cookie != __atomic_load_n(&b->mod_seq, __ATOMIC_ACQUIRE))) {
			ret = iter_refill(iter, p, pos);
			if (ret)
				return ret;
			fresh = true;
		}
		/* The first batched key >= pos. */
		unsigned lo = 0, hi = iter->batch_nr;

		while (lo < hi) {
			unsigned mid = lo + (hi - lo) / 2;

			if (tfs_bpos_cmp(tfs_bkey_pos(batch_key(p, mid)), pos) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < iter->batch_nr) {
			iter->batch_idx = lo;
			tfs_bkey_copy(&iter->k, batch_key(p, lo));
			/* Key cache hook: a cached key's newer version. */
			tfs_fs_key_cache_iter_overlay(iter->fs, iter->id, &iter->k, false,
						      iter->batch_cookie);
			p->have_last = true;
			*k = &iter->k.k;
			return 0;
		}
		/* Nothing more in this leaf: the next one, unless the end was reached. */
		if (tfs_bpos_cmp(p->to, iter->end) >= 0 || tfs_bpos_eq(p->to, TFS_POS_MAX))
			return 0;
		pos = tfs_bpos_successor(p->to);
		p->batch_valid = false;
	}
}

int tfs_btree_iter_next(struct tfs_btree_iter *iter, const struct tfs_bkey **k)
{
	struct iter_priv *p = iter_priv(iter);
	struct tfs_bpos from;

	*k = NULL;
	if (!p)
		return -ENOMEM;
	if (p->exhausted)
		return 0;
	from = p->have_last ? tfs_bkey_pos(&iter->k.k) : iter->pos;
	p->have_last = false;
	if (tfs_bpos_eq(from, TFS_POS_MAX) || tfs_bpos_cmp(from, iter->end) >= 0) {
		/* Past the end: later calls return nothing either (prev() still works). */
		iter->pos = iter->end;
		p->exhausted = true;
		return 0;
	}
	iter->pos = tfs_bpos_successor(from);
	return tfs_btree_iter_peek(iter, k);
}

int tfs_btree_iter_prev(struct tfs_btree_iter *iter, const struct tfs_bkey **k)
{
	struct tfs_btree *b = &iter->fs->btrees[iter->id];
	struct iter_priv *p = iter_priv(iter);
	struct tfs_btree_path path;
	struct tfs_bpos search;
	int ret = 0;

	*k = NULL;
	if (!p)
		return -ENOMEM;
	if (p->exhausted) {
		/* After the end: the last key in range. */
		search = iter->end;
	} else {
		if (tfs_bpos_cmp(iter->pos, iter->start) <= 0 ||
		    tfs_bpos_eq(iter->pos, TFS_POS_MIN))
			return 0;
		search = tfs_bpos_predecessor(iter->pos);
		if (tfs_bpos_cmp(search, iter->end) > 0)
			search = iter->end;
	}
	if (tfs_bpos_cmp(search, iter->start) < 0)
		return 0;
	tfs_btree_cache_make_room(iter->fs, TFS_BTREE_READ_ROOM);
	tfs_six_lock_read(&b->lock);
	while (1) {
		struct tfs_bnode *leaf;
		unsigned idx;

		ret = tfs_btree_walk(b, search, 0, &path, false);
		if (ret)
			break;
		leaf = path.n[0];
		/* The last key <= search. */
		idx = tfs_bpos_eq(search, TFS_POS_MAX)
			      ? leaf->nr_keys
			      : tfs_bnode_lower_bound(leaf, tfs_bpos_successor(search));
		if (idx > 0) {
			const struct tfs_bkey *key = tfs_bnode_key(leaf, idx - 1);

			if (tfs_bpos_cmp(tfs_bkey_pos(key), iter->start) >= 0) {
				tfs_bkey_copy(&iter->k, key);
				/* Key cache hook: a cached key's newer version. */
				tfs_fs_key_cache_iter_overlay(iter->fs, iter->id, &iter->k, true,
							      0);
				iter->pos = tfs_bkey_pos(key);
				p->have_last = true;
				p->exhausted = false;
				*k = &iter->k.k;
			}
			break;
		}
		if (tfs_bpos_cmp(leaf->min_key, iter->start) <= 0 ||
		    tfs_bpos_eq(leaf->min_key, TFS_POS_MIN))
			break;
		search = tfs_bpos_predecessor(leaf->min_key);
	}
	tfs_six_unlock_read(&b->lock);
	tfs_btree_cache_check_budget(iter->fs);
	return ret;
}

void tfs_btree_iter_set_pos(struct tfs_btree_iter *iter, struct tfs_bpos pos)
{
	struct iter_priv *p = iter->batch;

	if (tfs_bpos_cmp(pos, iter->start) < 0)
		pos = iter->start;
	if (tfs_bpos_cmp(pos, iter->end) > 0)
		pos = iter->end;
	iter->pos = pos;
	if (p) {
		p->have_last = false;
		p->exhausted = false;
	}
}

/* --- verification --- */

static void bnode_name(struct printbuf *out, struct tfs_btree *b, const struct tfs_bnode *n)
{
	if (n->disk.nr && !n->dirty) {
		tfs_btree_node_loc_to_text(out, b->fs, b->id, n->level, &n->disk);
	} else {
		prt_printf(out, "btree %s level %u node ", tfs_btree_id_str(b->id), n->level);
		tfs_bpos_to_text(out, n->min_key);
		prt_str(out, "..");
		tfs_bpos_to_text(out, n->max_key);
		prt_str(out, " (in memory)");
	}
}

static int verify_fail(struct tfs_btree *b, const struct tfs_bnode *n, struct printbuf *why)
{
	struct printbuf msg = PRINTBUF;

	bnode_name(&msg, b, n);
	fprintf(stderr, "%s: %s\n", printbuf_str(&msg), printbuf_str(why));
	printbuf_exit(&msg);
	printbuf_exit(why);
	return -TFS_ERR_btree_node_invalid;
}

static int verify_node(struct tfs_btree *b, struct tfs_bnode *n, u64 *nr_keys)
{
	struct printbuf why = PRINTBUF;
	u32 live = 0;
	int ret;

	if (tfs_bpos_cmp(n->min_key, n->max_key) > 0) {
		prt_str(&why, "min_key > max_key");
		return verify_fail(b, n, &why);
	}
	if (n->level && !n->nr_keys) {
		prt_str(&why, "interior node without keys");
		return verify_fail(b, n, &why);
	}
	for (unsigned i = 0; i < n->nr_keys; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(n, i);
		struct tfs_bpos pos = tfs_bkey_pos(k);

		if (n->level) {
			/* In memory a pointer has room for every replica; nr_ptrs says how many are set. */
			const struct tfs_btree_ptr *ptr = tfs_bkey_val(k);

			ret = 0;
			if (k->type != TFS_BKEY_btree_ptr ||
			    tfs_bkey_u64s(k) != tfs_btree_ptr_key_u64s(b->fs) ||
			    ptr->nr_ptrs > b->fs->btree_ptr_replicas ||
			    (!ptr->nr_ptrs && !n->child[i])) {
				prt_str(&why, "bad pointer ");
				tfs_bkey_to_text(&why, k);
				ret = -TFS_ERR_btree_node_invalid;
			}
		} else {
			ret = tfs_bkey_validate(k, (size_t)n->cap * 8, b->id, false, &why);
		}
		if (ret) {
			prt_printf(&why, " (key %u)", i);
			return verify_fail(b, n, &why);
		}
		if ((k->type == TFS_BKEY_btree_ptr) != (n->level > 0)) {
			prt_printf(&why, "key %u: type %s at level %u", i,
				   tfs_bkey_type_str(k->type), n->level);
			return verify_fail(b, n, &why);
		}
		if (i && tfs_bpos_cmp(tfs_bkey_pos(tfs_bnode_key(n, i - 1)), pos) >= 0) {
			prt_printf(&why, "key %u ", i);
			tfs_bpos_to_text(&why, pos);
			prt_str(&why, " <= previous key");
			return verify_fail(b, n, &why);
		}
		if (tfs_bpos_cmp(pos, n->min_key) < 0 || tfs_bpos_cmp(pos, n->max_key) > 0) {
			prt_printf(&why, "key %u ", i);
			tfs_bpos_to_text(&why, pos);
			prt_str(&why, " outside the node's range");
			return verify_fail(b, n, &why);
		}
		live += tfs_bkey_u64s(k);
	}
	if (live != n->live_u64s || n->heap_used > n->cap) {
		prt_printf(&why, "accounting: %u live words counted, %u recorded", live,
			   n->live_u64s);
		return verify_fail(b, n, &why);
	}
	if (!n->level) {
		*nr_keys += n->nr_keys;
		return 0;
	}
	if (!tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(n, n->nr_keys - 1)), n->max_key)) {
		prt_str(&why, "last key is not at max_key");
		return verify_fail(b, n, &why);
	}
	struct tfs_bpos next_min = n->min_key;

	for (unsigned i = 0; i < n->nr_keys; i++) {
		const struct tfs_bkey *k = tfs_bnode_key(n, i);
		const struct tfs_btree_ptr *ptr = tfs_bkey_val(k);
		struct tfs_bnode *c = n->child[i];

		if (!c) {
			ret = tfs_btree_read_child(b, n, i, &c);
			if (ret)
				return ret;
		}
		if (c->level + 1 != n->level || ptr->level != c->level ||
		    !tfs_bpos_eq(c->min_key, next_min) ||
		    !tfs_bpos_eq(c->max_key, tfs_bkey_pos(k))) {
			prt_printf(&why, "child %u: level %u range ", i, c->level);
			tfs_bpos_to_text(&why, c->min_key);
			prt_str(&why, "..");
			tfs_bpos_to_text(&why, c->max_key);
			prt_str(&why, " does not match its pointer");
			return verify_fail(b, n, &why);
		}
		ret = verify_node(b, c, nr_keys);
		if (ret)
			return ret;
		next_min = tfs_bpos_successor(c->max_key);
	}
	return 0;
}

int tfs_btree_verify(struct tfs_fs *fs, enum tfs_btree_id id)
{
	struct tfs_btree *b = &fs->btrees[id];
	u64 nr_keys = 0;
	int ret;

	/* Exclusive: children read from disk are installed as they are checked. */
	tfs_btree_lock_exclusive(b);
	ret = verify_node(b, b->root, &nr_keys);
	if (!ret && !b->nr_keys_known) {
		/* Every leaf was just walked: the count is known from now on. */
		b->nr_keys = nr_keys;
		b->nr_keys_known = true;
	} else if (!ret && nr_keys != b->nr_keys) {
		fprintf(stderr, "btree %s: %llu keys found, %llu counted\n", tfs_btree_id_str(id),
			(unsigned long long)nr_keys, (unsigned long long)b->nr_keys);
		ret = -TFS_ERR_btree_node_invalid;
	}
	tfs_btree_unlock_exclusive(b);
	return ret;
}

static int node_locations(struct tfs_bnode *n, tfs_btree_node_loc_fn fn, void *ctx)
{
	int ret = 0;

	for (unsigned i = 0; n && n->level && !ret && i < n->nr_keys; i++)
		ret = fn(ctx, tfs_bkey_val(tfs_bnode_key(n, i)))
			      ?: node_locations(n->child[i], fn, ctx);
	return ret;
}

/* Is loc where the root key points (reported already)? */
static bool loc_is_root(const struct tfs_btree_loc *loc, bool have_root,
			const struct tfs_bkey_buf *root)
{
	const struct tfs_btree_ptr *p = have_root ? tfs_bkey_val(&root->k) : NULL;

	return p && p->nr_ptrs && le32_to_cpu(p->ptrs[0].dev) == loc->ptrs[0].dev &&
	       le64_to_cpu(p->ptrs[0].offset) == loc->ptrs[0].offset;
}

/* fn on a location held outside any key (as a pointer value). */
static int loc_locations(const struct tfs_btree_loc *loc, tfs_btree_node_loc_fn fn, void *ctx)
{
	struct {
		struct tfs_btree_ptr p;
		struct tfs_btree_ptr_dev d[TFS_BTREE_PTR_MAX_REPLICAS];
	} v = { .p.nr_ptrs = (u8)loc->nr };

	for (unsigned r = 0; r < loc->nr; r++) {
		v.d[r].dev = cpu_to_le32(loc->ptrs[r].dev);
		v.d[r].offset = cpu_to_le64(loc->ptrs[r].offset);
	}
	return fn(ctx, &v.p);
}

int tfs_btree_node_locations(struct tfs_fs *fs, enum tfs_btree_id id, tfs_btree_node_loc_fn fn,
			     void *ctx)
{
	struct tfs_btree *b = &fs->btrees[id];
	struct tfs_bkey_buf root;
	bool have_root;
	int ret = 0;

	/*
	 * The root key is set by log_roots() under roots_lock, not the tree's
	 * lock (it must not wait for the tree lock while it holds roots_lock
	 * and a journal reservation): read it under roots_lock.  Reading it
	 * under b->lock raced with a checkpoint (TSan saw it from fsck).
	 */
	pthread_mutex_lock(&fs->roots_lock);
	have_root = b->have_root_key && b->root_key.k.type == TFS_BKEY_btree_ptr;
	if (have_root)
		tfs_bkey_copy(&root, &b->root_key.k);
	pthread_mutex_unlock(&fs->roots_lock);

	tfs_six_lock_read(&b->lock);
	if (have_root)
		ret = fn(ctx, tfs_bkey_val(&root.k));
	/*
	 * The root's own copy: no key in memory points at it when it is not
	 * the durable root (a shrink made a child the root; the durable tree
	 * reaches it through the old root until the next checkpoint).
	 */
	if (!ret && b->root && b->root->disk.nr && !loc_is_root(&b->root->disk, have_root, &root))
		ret = loc_locations(&b->root->disk, fn, ctx);
	ret = ret ?: node_locations(b->root, fn, ctx);
	/* Nodes dropped since the last checkpoint: the durable tree still has them. */
	for (size_t i = 0; !ret && i < b->pending_free.nr; i++)
		ret = loc_locations(&b->pending_free.locs[i], fn, ctx);
	tfs_six_unlock_read(&b->lock);
	return ret;
}

/* --- text --- */

static const char *const restart_reason_names[] = {
#define x(n) #n,
	TFS_BTREE_RESTART_REASONS()
#undef x
};

void tfs_btree_to_text(struct printbuf *out, struct tfs_fs *fs, enum tfs_btree_id id)
{
	struct tfs_btree *b = &fs->btrees[id];
	const struct tfs_btree_counters *c = &b->c;

	tfs_six_lock_read(&b->lock);
	prt_printf(out, "btree %s:\n", tfs_btree_id_str(id));
	printbuf_indent_add(out, 2);
	if (b->nr_keys_known)
		prt_printf(out, "keys:\t%llu\n", (unsigned long long)b->nr_keys);
	else
		prt_str(out, "keys:\tnot counted since open\n");
	prt_printf(out, "height:\t%u (tallest %llu)\n", b->root ? b->root->level + 1 : 0,
		   (unsigned long long)c->max_height);
	prt_str(out, "nodes by level:\t");
	for (unsigned l = 0; b->root && l <= b->root->level; l++)
		prt_printf(out, "%s%llu", l ? " " : "", (unsigned long long)b->nr_nodes[l]);
	prt_newline(out);
	prt_printf(out, "dirty nodes:\t%llu\n", (unsigned long long)b->nr_dirty);
	prt_printf(out, "commits:\t%llu (%llu keys; %llu replayed)\n",
		   (unsigned long long)c->commits, (unsigned long long)c->keys_applied,
		   (unsigned long long)c->keys_replayed);
	prt_printf(out, "splits, merges:\t%llu, %llu\n", (unsigned long long)c->splits,
		   (unsigned long long)c->merges);
	prt_printf(out, "height grows, shrinks:\t%llu, %llu\n", (unsigned long long)c->height_grows,
		   (unsigned long long)c->height_shrinks);
	prt_printf(out, "compactions:\t%llu\n", (unsigned long long)c->compactions);
	/* Counted under the read lock (atomically), as this runs: read them so. */
	prt_printf(out, "lookups, iterator refills:\t%llu, %llu\n",
		   (unsigned long long)__atomic_load_n(&c->lookups, __ATOMIC_RELAXED),
		   (unsigned long long)__atomic_load_n(&c->iter_refills, __ATOMIC_RELAXED));
	prt_printf(out, "checkpoints:\t%llu (%llu failed; %llu nodes written)\n",
		   (unsigned long long)c->checkpoints, (unsigned long long)c->checkpoint_errors,
		   (unsigned long long)c->nodes_written);
	prt_printf(out, "nodes read:\t%llu (%llu failed)\n",
		   (unsigned long long)__atomic_load_n(&c->nodes_read, __ATOMIC_RELAXED),
		   (unsigned long long)__atomic_load_n(&c->node_read_errors, __ATOMIC_RELAXED));
	prt_str(out, "lock waits:\t");
	tfs_six_lock_to_text(out, &b->lock);
	prt_str(out, "\ncommit restarts:\t");
	for (unsigned r = 0; r < TFS_BTREE_RESTART_NR; r++)
		prt_printf(out, "%s%s %llu", r ? ", " : "", restart_reason_names[r],
			   (unsigned long long)__atomic_load_n(&c->restarts[r], __ATOMIC_RELAXED));
	prt_newline(out);
	/* Under roots_lock, as in tfs_btree_node_locations(). */
	pthread_mutex_lock(&b->fs->roots_lock);
	if (b->have_root_key) {
		prt_str(out, "root:\t");
		tfs_bkey_to_text(out, &b->root_key.k);
		prt_newline(out);
	}
	pthread_mutex_unlock(&b->fs->roots_lock);
	printbuf_indent_sub(out, 2);
	tfs_six_unlock_read(&b->lock);
}
