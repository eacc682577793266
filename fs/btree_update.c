// SPDX-License-Identifier: GPL-2.0
/*
 * Transactions and commit: the path from queued updates to keys in the
 * journal and in the trees, readable top to bottom in tfs_trans_commit().
 *
 * The order (docs/engine.md, "Commit"):
 *  1. Plan: the updates sorted by (btree, position); for each position only
 *     the last update is applied in memory (every one is journaled, in
 *     queue order, so replay ends in the same state).
 *  2. Take intent on the trees touched in btree id order (lib/six.h):
 *     the first waited for, the others tried; a failed trylock drops them
 *     all, waits for the busy one unlocked, and starts again (a restart,
 *     counted by reason in tfs_btree_to_text).  Intent keeps other commits
 *     out, not readers: lookups go on through steps 3 and 4.
 *  3. Fit: find every update's leaf and check the leaf has room for what
 *     the updates add; if not, split it now, under write for the split
 *     alone.  A split changes how keys are cut into nodes, never what the
 *     tree holds, so splitting before the journal reservation is safe, and
 *     its memory and reads are the only things that can fail: they fail
 *     here, before anything is reserved.
 *  4. Take the journal reservation without waiting.  If the journal would
 *     make us wait, drop the locks, wait for a reservation, and go back to
 *     2 holding it (a journal wait never happens under a tree lock).
 *  5. Upgrade to write on the trees that change (readers drain, new ones
 *     wait), copy the keys into the reservation, apply them to the leaves
 *     (they fit: nothing can fail), pin the seq in each tree, merge small
 *     leaves, unlock, release the reservation.
 * Nothing after 4 can fail.  If step 3 fails on the second pass (a node read
 * failing after a wait), the reservation is released unfilled: its words
 * stay zero, which the journal reads as empty sub-entries, so nothing was
 * applied or journaled.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/alloc.h"
#include "fs/btree_internal.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

/* --- building transactions --- */

void tfs_trans_init(struct tfs_btree_trans *trans, struct tfs_fs *fs)
{
	memset(trans, 0, sizeof(*trans));
	trans->fs = fs;
}

void tfs_trans_exit(struct tfs_btree_trans *trans)
{
	free(trans->updates);
	free(trans->mem);
	memset(trans, 0, sizeof(*trans));
}

void tfs_trans_reset(struct tfs_btree_trans *trans)
{
	trans->nr_updates = 0;
	trans->mem_used = 0;
}

/* Room for one more update of u64s words; pointers into mem follow a move. */
static int trans_grow(struct tfs_btree_trans *trans, unsigned u64s)
{
	if (trans->nr_updates == trans->size_updates) {
		unsigned size = trans->size_updates ? trans->size_updates * 2 : 8;
		struct tfs_trans_update *u;

		if (tfs_fault("alloc:trans"))
			return -TFS_ERR_ENOMEM_fault_injected;
		u = realloc(trans->updates, size * sizeof(*u));
		if (!u)
			return -ENOMEM;
		trans->updates = u;
		trans->size_updates = size;
	}
	if (trans->mem_used + u64s > trans->mem_size) {
		size_t size = trans->mem_size ? trans->mem_size * 2 : 256;
		__le64 *mem;

		while (size < trans->mem_used + u64s)
			size *= 2;
		/* Offsets first: the old block may be gone after realloc. */
		for (unsigned i = 0; i < trans->nr_updates; i++)
			trans->updates[i].k =
				(struct tfs_bkey *)(uintptr_t)((__le64 *)trans->updates[i].k -
							       trans->mem);
		mem = realloc(trans->mem, size * 8);
		for (unsigned i = 0; i < trans->nr_updates; i++)
			trans->updates[i].k = (struct tfs_bkey *)((mem ?: trans->mem) +
								  (uintptr_t)trans->updates[i].k);
		if (!mem)
			return -ENOMEM;
		trans->mem = mem;
		trans->mem_size = size;
	}
	return 0;
}

static int trans_add(struct tfs_btree_trans *trans, enum tfs_btree_id id, const struct tfs_bkey *k,
		     bool old_data)
{
	unsigned u64s = tfs_bkey_u64s(k);
	int ret = trans_grow(trans, u64s);

	if (ret)
		return ret;
	struct tfs_bkey *dst = (struct tfs_bkey *)(trans->mem + trans->mem_used);

	memcpy(dst, k, (size_t)u64s * 8);
	trans->mem_used += u64s;
	trans->updates[trans->nr_updates++] =
		(struct tfs_trans_update){ .id = id, .k = dst, .old_data = old_data };
	return 0;
}

static int trans_update(struct tfs_btree_trans *trans, enum tfs_btree_id id,
			const struct tfs_bkey *k, bool old_data)
{
	struct printbuf err = PRINTBUF;
	int ret;

	if ((unsigned)id >= TFS_BTREE_NR) {
		fprintf(stderr, "transaction update: unknown btree %u\n", id);
		return -TFS_ERR_invalid_argument;
	}
	ret = tfs_bkey_validate(k, TFS_BKEY_MAX_U64s * 8, id, false, &err);
	if (!ret && k->type == TFS_BKEY_btree_ptr) {
		prt_str(&err, "btree_ptr keys are the engine's");
		ret = -TFS_ERR_bkey_invalid;
	}
	if (ret)
		fprintf(stderr, "transaction update in btree %s: %s\n", tfs_btree_id_str(id),
			printbuf_str(&err));
	printbuf_exit(&err);
	return ret ?: trans_add(trans, id, k, old_data);
}

int tfs_trans_update(struct tfs_btree_trans *trans, enum tfs_btree_id id, const struct tfs_bkey *k)
{
	return trans_update(trans, id, k, false);
}

int tfs_trans_update_old_data(struct tfs_btree_trans *trans, enum tfs_btree_id id,
			      const struct tfs_bkey *k)
{
	return trans_update(trans, id, k, true);
}

int tfs_trans_delete(struct tfs_btree_trans *trans, enum tfs_btree_id id, struct tfs_bpos pos)
{
	struct tfs_bkey_buf buf;

	if ((unsigned)id >= TFS_BTREE_NR) {
		fprintf(stderr, "transaction delete: unknown btree %u\n", id);
		return -TFS_ERR_invalid_argument;
	}
	tfs_bkey_init(&buf, TFS_BKEY_deleted, pos, 0);
	return trans_add(trans, id, &buf.k, false);
}

/* --- commit --- */

/* One update in the plan: sorted by (btree, position, queue order). */
struct plan_item {
	unsigned idx;
	enum tfs_btree_id id;
	struct tfs_bpos pos;
	bool final; /* the last update of its position: the one applied in memory */
};

struct plan {
	struct plan_item *items;
	unsigned nr;
	unsigned start[TFS_BTREE_NR + 1];    /* items of btree i: start[i] .. start[i + 1] */
	unsigned journal_u64s[TFS_BTREE_NR]; /* key words */
	unsigned journal_runs[TFS_BTREE_NR]; /* sub-entries: runs of one old_data value */
	unsigned res_u64s;
	unsigned btrees;		/* bitmask */
	struct tfs_key_cache_commit kc; /* key cache hook state (fs/btree_key_cache.h) */
};

static int plan_item_cmp(const void *a, const void *b)
{
	const struct plan_item *x = a, *y = b;
	int c;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	c = tfs_bpos_cmp(x->pos, y->pos);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* (Re)builds p from the queued updates; the key cache state p->kc is kept. */
static int plan_build(struct tfs_btree_trans *trans, struct plan *p)
{
	struct tfs_key_cache_commit kc = p->kc;
	bool last_old_data[TFS_BTREE_NR] = { 0 };

	free(p->items);
	memset(p, 0, sizeof(*p));
	p->kc = kc;
	p->items = malloc((trans->nr_updates ?: 1) * sizeof(*p->items));
	if (!p->items)
		return -ENOMEM;
	p->nr = trans->nr_updates;
	for (unsigned i = 0; i < p->nr; i++) {
		const struct tfs_trans_update *u = &trans->updates[i];

		p->items[i] =
			(struct plan_item){ .idx = i, .id = u->id, .pos = tfs_bkey_pos(u->k) };
		p->journal_u64s[u->id] += tfs_bkey_u64s(u->k);
		/* Queue order: a new run where old_data differs from the tree's last update. */
		if (!(p->btrees & (1U << u->id)) || u->old_data != last_old_data[u->id])
			p->journal_runs[u->id]++;
		last_old_data[u->id] = u->old_data;
		p->btrees |= 1U << u->id;
	}
	qsort(p->items, p->nr, sizeof(*p->items), plan_item_cmp);
	for (unsigned i = 0; i < p->nr; i++)
		p->items[i].final = i + 1 == p->nr || p->items[i + 1].id != p->items[i].id ||
				    !tfs_bpos_eq(p->items[i + 1].pos, p->items[i].pos);
	for (unsigned id = 0, i = 0; id <= TFS_BTREE_NR; id++) {
		while (i < p->nr && p->items[i].id < id)
			i++;
		p->start[id] = i;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (p->btrees & (1U << id))
			p->res_u64s +=
				p->journal_u64s[id] + p->journal_runs[id] * tfs_jset_entry_u64s(0);
	return 0;
}

/*
 * Whether res comes after every reservation applied to the trees in mask
 * (by seq, then offset in the entry): what keeps each tree's order of
 * applied updates the journal's order.
 */
static bool res_after_applied(struct tfs_fs *fs, unsigned mask, const struct tfs_journal_res *res)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		const struct tfs_btree *b = &fs->btrees[id];

		if (!(mask & (1U << id)))
			continue;
		if (b->last_res_seq > res->seq ||
		    (b->last_res_seq == res->seq && b->last_res_offset >= res->offset))
			return false;
	}
	return true;
}

/*
 * Takes intent on every tree in mask, in btree id order.  The first is
 * waited for (nothing is held yet); each later one is only tried: when its
 * trylock fails, every lock taken is dropped, the restart is counted on the
 * busy tree, and we wait for that lock with nothing held (take it and let
 * it go) before starting over.  No thread ever waits for a lock while
 * holding one, so there is no cycle to detect.
 */
static void lock_btrees(struct tfs_fs *fs, unsigned mask)
{
	/* Room under the cache budget for a path and its splits in each tree, before the locks. */
	tfs_btree_cache_make_room(fs, (unsigned)__builtin_popcount(mask) * 2 * TFS_BTREE_READ_ROOM);
again:
	for (unsigned id = 0, held = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		if (!(mask & (1U << id)))
			continue;
		if (!held) {
			tfs_six_lock_intent(&b->lock);
		} else if (!tfs_six_trylock_intent(&b->lock)) {
			for (unsigned i = id; i-- > 0;)
				if (held & (1U << i))
					tfs_six_unlock_intent(&fs->btrees[i].lock);
			tfs_btree_count_restart(b, TFS_BTREE_RESTART_lock_intent);
			tfs_six_lock_intent(&b->lock);
			tfs_six_unlock_intent(&b->lock);
			goto again;
		}
		held |= 1U << id;
	}
}

static void unlock_btrees(struct tfs_fs *fs, unsigned mask)
{
	for (unsigned id = TFS_BTREE_NR; id-- > 0;)
		if (mask & (1U << id))
			tfs_six_unlock_intent(&fs->btrees[id].lock);
}

/*
 * Step 5's upgrade: write on the trees the commit changes (in id order,
 * with intent held on each, so no other commit is in the way: only readers,
 * who hold nothing else and leave).  New readers wait from here on.
 */
static void write_lock_btrees(struct tfs_fs *fs, unsigned mask)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (mask & (1U << id))
			tfs_six_lock_write(&fs->btrees[id].lock);
}

static void write_unlock_btrees(struct tfs_fs *fs, unsigned mask)
{
	for (unsigned id = TFS_BTREE_NR; id-- > 0;)
		if (mask & (1U << id))
			tfs_six_unlock_write(&fs->btrees[id].lock);
}

/* A restart for a reason other than a lock: counted on the commit's first tree. */
static void count_restart(struct tfs_fs *fs, unsigned mask, enum tfs_btree_restart_reason r)
{
	tfs_btree_count_restart(&fs->btrees[__builtin_ctz(mask)], r);
}

/*
 * The key cache a commit goes through: none for a checkpoint's (only alloc
 * keys, never cached), which may run in reclaim while open is still
 * creating the key cache (fs->key_cache is set after the journal starts).
 */
static struct tfs_btree_key_cache *trans_key_cache(const struct tfs_btree_trans *trans)
{
	return trans->roots ? NULL : trans->fs->key_cache;
}

/* Words the key at pos in leaf takes now (0: none there). */
static unsigned leaf_key_u64s(const struct tfs_bnode *leaf, struct tfs_bpos pos)
{
	unsigned idx = tfs_bnode_lower_bound(leaf, pos);

	if (idx < leaf->nr_keys && tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), pos))
		return tfs_bkey_u64s(tfs_bnode_key(leaf, idx));
	return 0;
}

/*
 * Step 3 for one tree: every leaf gets room for what its updates add
 * (the sum of the growths, whatever the order), splitting where needed.
 */
static int fit_btree(struct tfs_btree_trans *trans, struct tfs_btree *b, struct plan *p)
{
	unsigned first = p->start[b->id], end = p->start[b->id + 1];
	struct tfs_bpos in_pos[64];
	unsigned in_u64s[64];
	unsigned i = first;
	int ret;

	while (i < end) {
		struct tfs_btree_path path;
		struct tfs_bnode *leaf;
		unsigned j, need = 0, nr_in = 0;

		if (!p->items[i].final) {
			i++;
			continue;
		}
		ret = tfs_btree_walk(b, p->items[i].pos, 0, &path, true);
		if (ret)
			return ret;
		leaf = path.n[0];
		for (j = i; j < end && tfs_bpos_cmp(p->items[j].pos, leaf->max_key) <= 0; j++) {
			const struct tfs_bkey *k = trans->updates[p->items[j].idx].k;
			unsigned new = k->type == TFS_BKEY_deleted ? 0 : tfs_bkey_u64s(k);
			unsigned old;

			if (!p->items[j].final)
				continue;
			old = leaf_key_u64s(leaf, p->items[j].pos);
			if (new > old) {
				need += new - old;
				/* Sampled for choosing a split point: every k-th of many is enough. */
				if (nr_in < ARRAY_SIZE(in_pos)) {
					in_pos[nr_in] = p->items[j].pos;
					in_u64s[nr_in++] = new - old;
				} else {
					in_u64s[nr_in - 1] += new - old;
				}
			}
		}
		if (tfs_bnode_fits(leaf, need)) {
			i = j;
			continue;
		}
		/* A split changes nodes readers walk: write, for the split only. */
		tfs_six_lock_write(&b->lock);
		ret = tfs_btree_split_locked(b, p->items[i].pos, 0,
					     tfs_bnode_split_pos(leaf, in_pos, in_u64s, nr_in));
		tfs_six_unlock_write(&b->lock);
		if (ret)
			return ret;
		/* Walk again from i: its keys may now go to either half. */
	}
	return 0;
}

/* Step 5 for one tree: journal its keys (queue order), apply the final ones. */
static void apply_btree(struct tfs_btree_trans *trans, struct tfs_btree *b, struct plan *p,
			struct tfs_journal_res *res)
{
	struct tfs_fs *fs = trans->fs;
	unsigned first = p->start[b->id], end = p->start[b->id + 1];
	bool deleted = false;

	/* Queue order, one sub-entry per run of updates with the same old_data. */
	for (unsigned i = 0; i < trans->nr_updates;) {
		const struct tfs_trans_update *u = &trans->updates[i];
		unsigned run_end, u64s = 0;
		__le64 *dst;

		if (u->id != b->id) {
			i++;
			continue;
		}
		for (run_end = i; run_end < trans->nr_updates; run_end++) {
			const struct tfs_trans_update *v = &trans->updates[run_end];

			if (v->id != b->id)
				continue;
			if (v->old_data != u->old_data)
				break;
			u64s += tfs_bkey_u64s(v->k);
		}
		dst = tfs_journal_res_add_entry(fs->j, res, TFS_JSET_ENTRY_btree_keys, b->id, 0,
						u64s);
		/* Sized by plan_build() from the same keys: never NULL. */
		if (!dst)
			abort();
		if (u->old_data)
			tfs_jset_entry_of(dst)->flags = TFS_JSET_KEYS_old_data;
		for (; i < run_end; i++) {
			const struct tfs_trans_update *v = &trans->updates[i];

			if (v->id != b->id)
				continue;
			memcpy(dst, v->k, tfs_bkey_bytes(v->k));
			dst += tfs_bkey_u64s(v->k);
		}
	}

	for (unsigned i = first; i < end; i++) {
		const struct tfs_bkey *k = trans->updates[p->items[i].idx].k;
		struct tfs_btree_path path;
		struct tfs_bnode *leaf;
		unsigned idx;
		bool exists;

		if (!p->items[i].final)
			continue;
		/* Key cache hook: an update of a cached key goes to its entry, not the leaf. */
		if (tfs_btree_key_cache_commit_apply(trans_key_cache(trans), &p->kc, b->id, k,
						     res->seq))
			continue;
		/* Every node on the path was walked by fit_btree() under this lock: no I/O. */
		if (tfs_btree_walk(b, p->items[i].pos, 0, &path, true))
			abort();
		leaf = path.n[0];
		idx = path.idx[0];
		exists = idx < leaf->nr_keys &&
			 tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), p->items[i].pos);
		if (k->type == TFS_BKEY_deleted) {
			if (!exists)
				continue;
			tfs_bnode_remove(leaf, idx);
			b->nr_keys--;
			deleted = true;
		} else if (exists) {
			tfs_bnode_replace(b, leaf, idx, k);
		} else {
			tfs_bnode_insert(b, leaf, idx, k, NULL);
			b->nr_keys++;
		}
		tfs_bnode_set_dirty(b, leaf);
		if (res->seq > leaf->journal_seq)
			leaf->journal_seq = res->seq;
		b->c.keys_applied++;
	}
	b->c.commits++;
	if (res->seq > b->max_journal_seq)
		b->max_journal_seq = res->seq;
	b->last_res_seq = res->seq;
	b->last_res_offset = res->offset;
	/* Reclaim must not pass this seq until a checkpoint holds these keys. */
	tfs_journal_pin_add(fs->j, res->seq, &b->pin, tfs_btree_pin_flush);
	__atomic_add_fetch(&b->mod_seq, 1, __ATOMIC_RELEASE);

	/* Merges last: an earlier merge must not take room a later insert was promised. */
	if (deleted)
		for (unsigned i = first; i < end; i++) {
			const struct tfs_bkey *k = trans->updates[p->items[i].idx].k;

			if (p->items[i].final && k->type == TFS_BKEY_deleted)
				tfs_btree_maybe_merge_locked(b, p->items[i].pos);
		}
}

int tfs_trans_commit(struct tfs_btree_trans *trans, unsigned flags, u64 *seq)
{
	struct tfs_fs *fs = trans->fs;
	struct tfs_journal_res res = { 0 };
	unsigned res_flags = (flags & TFS_TRANS_RESERVED ? TFS_JOURNAL_RES_RESERVED : 0);
	bool have_res = false;
	struct plan p = { 0 };
	/* What the caller queued: the alloc trigger's updates come after (see below). */
	unsigned nr_base = trans->nr_updates, mask = 0;
	size_t mem_base = trans->mem_used;
	int ret = 0;

	trans->seq = 0;
	if (seq)
		*seq = 0;
	if (!trans->nr_updates && !trans->roots)
		return 0;
	if (fs->read_only || !fs->j)
		return -TFS_ERR_fs_read_only;
	for (unsigned i = 0; i < trans->nr_updates; i++)
		mask |= 1U << trans->updates[i].id;
	mask |= tfs_alloc_trigger_btrees(trans, flags); /* alloc hook */
	if (trans->roots)
		mask |= 1U << TFS_BTREE_alloc; /* the node trigger's */
retry:
	lock_btrees(fs, mask);
	/*
	 * Alloc hook (fs/alloc.h, "alloc and accounting keys"): with the trees
	 * locked, queue the alloc and accounting keys the caller's extents and
	 * inodes updates change, so they go in this journal entry.  Each pass
	 * recomputes them from the trees as they are now.
	 */
	trans->nr_updates = nr_base;
	trans->mem_used = mem_base;
	ret = tfs_alloc_trigger(trans, flags) ?: tfs_alloc_nodes_trigger(trans)
							 ?: plan_build(trans, &p);
	if (!ret && trans->roots && trans->roots->root_key)
		p.res_u64s += tfs_btree_roots_u64s();
	if (!ret && have_res && res.u64s < p.res_u64s) {
		/* The trigger's keys grew since the reservation was sized: again, without it. */
		unlock_btrees(fs, mask);
		tfs_journal_res_put(fs->j, &res);
		have_res = false;
		count_restart(fs, mask, TFS_BTREE_RESTART_trigger_grew);
		goto retry;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR && !ret; id++)
		if (p.btrees & (1U << id))
			ret = fit_btree(trans, &fs->btrees[id], &p);
	/* Key cache hook: memory for cached updates; a raced key cache flush fails here. */
	if (!ret)
		ret = tfs_btree_key_cache_commit_prep(trans_key_cache(trans), &p.kc, trans->updates,
						      trans->nr_updates, flags);
	if (ret) {
		unlock_btrees(fs, mask);
		if (have_res)
			tfs_journal_res_put(fs->j, &res); /* unfilled: zeros, skipped by replay */
		goto out;
	}
	if (have_res && !res_after_applied(fs, p.btrees, &res)) {
		/*
		 * Taken without the locks, our reservation is older than one a
		 * commit applied to one of our trees meanwhile: applying ours now
		 * would order the tree unlike the journal (replay would end
		 * differently).  Released unfilled; again, from the top.
		 */
		unlock_btrees(fs, mask);
		tfs_journal_res_put(fs->j, &res);
		have_res = false;
		count_restart(fs, mask, TFS_BTREE_RESTART_journal_order);
		goto retry;
	}
	if (!have_res) {
		ret = tfs_journal_res_get(fs->j, &res, p.res_u64s,
					  res_flags | TFS_JOURNAL_RES_NONBLOCK);
		if (ret && tfs_err_matches(ret, EAGAIN) && !(flags & TFS_TRANS_NONBLOCK)) {
			/* Wait for the journal with no tree locked, then redo the fit. */
			unlock_btrees(fs, mask);
			ret = tfs_journal_res_get(fs->j, &res, p.res_u64s, res_flags);
			if (ret)
				goto out;
			have_res = true;
			count_restart(fs, mask, TFS_BTREE_RESTART_journal_wait);
			goto retry;
		}
		if (ret) {
			unlock_btrees(fs, mask);
			goto out;
		}
		have_res = true;
	}

	/*
	 * Write on the trees that change: from here until the unlock readers
	 * wait, so they see all of this commit or none of it.  Before
	 * roots_lock: a reader may hold its tree's read lock while it waits
	 * for roots_lock (tfs_btree_to_text()).
	 */
	if (p.btrees & ~mask)
		abort(); /* a tree changed that was not locked: the trigger's mask is wrong */
	write_lock_btrees(fs, p.btrees);
	if (trans->roots && trans->roots->root_key) {
		/*
		 * A checkpoint's root entry: the newest root entry must hold
		 * the newest roots (log_roots()), so ours must not be older
		 * than the last one filled.  roots_lock is held from the check
		 * to the fill (lock order: the trees' locks, then roots_lock).
		 */
		pthread_mutex_lock(&fs->roots_lock);
		if (res.seq < fs->roots_seq) {
			pthread_mutex_unlock(&fs->roots_lock);
			write_unlock_btrees(fs, p.btrees);
			unlock_btrees(fs, mask);
			tfs_journal_res_put(fs->j, &res);
			have_res = false;
			count_restart(fs, mask, TFS_BTREE_RESTART_roots_seq);
			goto retry;
		}
	}

	/* From here on nothing fails. */
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (p.btrees & (1U << id))
			apply_btree(trans, &fs->btrees[id], &p, &res);
	if (trans->roots && trans->roots->root_key) {
		/*
		 * Crash safety: the root entry and the btree alloc keys for
		 * its nodes are in this one journal entry, so no durable
		 * prefix has the new tree without its space marked, or the old
		 * copies cleared while a durable root still reaches them.
		 */
		tfs_btree_roots_fill_locked(fs, &res, trans->roots->b, trans->roots->root_key);
		pthread_mutex_unlock(&fs->roots_lock);
	}
	write_unlock_btrees(fs, p.btrees);
	unlock_btrees(fs, mask);
	tfs_journal_res_put(fs->j, &res);

	trans->seq = res.seq;
	if (seq)
		*seq = res.seq;
	tfs_trans_reset(trans);
	/* Not from a checkpoint: the budget's write-back could want the tree it holds. */
	if (!trans->roots)
		tfs_btree_cache_check_budget(fs);
out:
	if (ret) {
		/* Only the caller's updates stay queued. */
		trans->nr_updates = nr_base;
		trans->mem_used = mem_base;
	}
	tfs_btree_key_cache_commit_done(trans_key_cache(trans), &p.kc); /* key cache hook */
	free(p.items);
	return ret;
}
