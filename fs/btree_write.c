// SPDX-License-Identifier: GPL-2.0
/*
 * Roots and write-back.
 *
 * Roots: every root entry logs the root of every btree, under roots_lock,
 * so entries hold root sets in the order they were taken and the newest
 * root entry in the replay range is always the current one.  roots_pin
 * holds that entry's seq; when reclaim wants the seq, the pin's flush
 * callback logs the roots again in a new entry, so a root entry is always
 * in the replay range.
 *
 * A root key is a btree_ptr at POS_MAX (the root's level in the sub-entry
 * and the pointer), or a `deleted` key for a tree that has no node on disk
 * yet (an empty tree, as mkfs leaves it).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "fs/btree_io.h"
#include "fs/alloc.h"
#include "fs/fs_format.h"
#include "lib/bdev.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

/* Words of a root entry, sized for the largest root keys (they may change before the lock). */
unsigned tfs_btree_roots_u64s(void)
{
	return TFS_BTREE_NR *
	       tfs_jset_entry_u64s(TFS_BKEY_U64s +
				   tfs_btree_ptr_val_bytes(TFS_BTREE_PTR_MAX_REPLICAS) / 8);
}

void tfs_btree_roots_fill_locked(struct tfs_fs *fs, struct tfs_journal_res *res,
				 struct tfs_btree *b, const struct tfs_bkey *new_root)
{
	if (new_root) {
		/*
		 * Under roots_lock only: readers of the root key take it
		 * (tfs_btree_node_locations(), tfs_btree_to_text()), some
		 * while holding the tree's lock, so the tree's lock must not
		 * be taken here (lock order: a tree's lock, then roots_lock).
		 */
		b->root_key.k.u64s = 0;
		tfs_bkey_copy(&b->root_key, new_root);
		b->have_root_key = true;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		const struct tfs_bkey *k = &fs->btrees[id].root_key.k;
		unsigned level = 0;

		if (k->type == TFS_BKEY_btree_ptr)
			level = ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level;
		__le64 *dst = tfs_journal_res_add_entry(fs->j, res, TFS_JSET_ENTRY_btree_root, id,
							level, tfs_bkey_u64s(k));

		memcpy(dst, k, tfs_bkey_bytes(k));
	}
	/* The pin moves to this entry before it can be written: never a range without roots. */
	tfs_journal_pin_update(fs->j, res->seq, &fs->roots_pin, tfs_btree_roots_pin_flush);
	fs->roots_seq = res->seq;
}

/*
 * Logs every root in one entry.  The newest root entry must hold the newest
 * roots, so an entry is filled (under roots_lock) only when its seq is not
 * older than the last one filled; a reservation that lost that race is
 * released unfilled (zeros: skipped by replay) and taken again.  The wait
 * for a reservation happens without roots_lock: a checkpoint in the reclaim
 * thread may need the lock for reclaim to make progress.
 *
 * With new_root (and b), b's root key is set under the same lock, just
 * before the entry is filled.  Root entries are reclaim's own work: they use
 * the journal's reserve.
 */
static int log_roots(struct tfs_fs *fs, struct tfs_btree *b, const struct tfs_bkey *new_root,
		     u64 *seq, unsigned res_flags)
{
	struct tfs_journal_res res;
	int ret;

	while (1) {
		ret = tfs_journal_res_get(fs->j, &res, tfs_btree_roots_u64s(), res_flags);
		if (ret)
			return ret;
		pthread_mutex_lock(&fs->roots_lock);
		if (res.seq >= fs->roots_seq)
			break;
		pthread_mutex_unlock(&fs->roots_lock);
		tfs_journal_res_put(fs->j, &res);
	}
	tfs_btree_roots_fill_locked(fs, &res, b, new_root);
	pthread_mutex_unlock(&fs->roots_lock);
	tfs_journal_res_put(fs->j, &res);
	if (seq)
		*seq = res.seq;
	return 0;
}

int tfs_btree_log_roots(struct tfs_fs *fs, unsigned trans_flags, u64 *seq)
{
	return log_roots(fs, NULL, NULL, seq,
			 trans_flags & TFS_TRANS_RESERVED ? TFS_JOURNAL_RES_RESERVED : 0);
}

int tfs_btree_roots_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct tfs_fs *fs = container_of(pin, struct tfs_fs, roots_pin);

	return tfs_btree_log_roots(fs, TFS_TRANS_RESERVED, NULL);
}

/* --- checkpoints --- */

/* One node of a checkpoint. */
struct ckpt_node {
	struct tfs_bnode *n;
	struct tfs_bnode *parent; /* NULL: the root */
	unsigned pidx;
	struct tfs_btree_node *buf;
	struct tfs_alloc_run runs[TFS_BTREE_PTR_MAX_REPLICAS];
	unsigned nr_runs;
	struct tfs_btree_loc old; /* the copy the durable tree refers to */
	bool degraded;		  /* some copies failed (enough did not) */
};

struct ckpt {
	struct tfs_btree *b;
	struct ckpt_node *nodes;
	unsigned nr, size;
	struct tfs_btree_free_list frees; /* taken from the tree: freed when this is durable */
	struct tfs_bkey_buf root_key;
	u64 max_seq;
	bool sets_committed, keep_old; /* ckpt_commit() split its keys */
	/* The writes. */
	pthread_mutex_t lock;
	pthread_cond_t done;
	unsigned pending;
};

/* Post-order: every node that changed, and every ancestor of one (its pointer changes). */
static int ckpt_collect(struct ckpt *c, struct tfs_bnode *n, struct tfs_bnode *parent,
			unsigned pidx, bool *need)
{
	bool any = n->dirty;

	for (unsigned i = 0; n->level && i < n->nr_keys; i++) {
		bool child_need = false;
		int ret;

		if (!n->child[i])
			continue;
		ret = ckpt_collect(c, n->child[i], n, i, &child_need);
		if (ret)
			return ret;
		any |= child_need;
	}
	*need = any;
	if (!any)
		return 0;
	if (c->nr == c->size) {
		unsigned size = c->size ? c->size * 2 : 16;
		struct ckpt_node *p = realloc(c->nodes, size * sizeof(*p));

		if (!p)
			return -ENOMEM;
		c->nodes = p;
		c->size = size;
	}
	c->nodes[c->nr++] = (struct ckpt_node){ .n = n, .parent = parent, .pidx = pidx };
	return 0;
}

/* The node copies: counted in the node cache's memory while they exist. */
static void ckpt_free_bufs(struct ckpt *c)
{
	struct tfs_fs *fs = c->b->fs;
	bool any = false;

	for (unsigned i = 0; i < c->nr; i++)
		if (c->nodes[i].buf) {
			free(c->nodes[i].buf);
			c->nodes[i].buf = NULL;
			__atomic_sub_fetch(&fs->cache.ckpt_bytes, fs->node_size, __ATOMIC_RELAXED);
			any = true;
		}
	/* Back to the system, not only to the heap (see tfs_btree_cache_scan()). */
	if (any)
		malloc_trim(0);
}

static void ckpt_free(struct ckpt *c)
{
	ckpt_free_bufs(c);
	free(c->nodes);
	free(c->frees.locs);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done);
}

static void loc_from_runs(struct tfs_btree_loc *loc, const struct tfs_alloc_run *runs, unsigned nr)
{
	loc->nr = nr;
	for (unsigned r = 0; r < nr; r++) {
		loc->ptrs[r].dev = runs[r].dev;
		loc->ptrs[r].offset = runs[r].offset;
	}
}

static void loc_free_after(struct tfs_fs *fs, const struct tfs_btree_loc *loc, u64 seq)
{
	for (unsigned r = 0; r < loc->nr; r++) {
		struct tfs_alloc_run run = {
			.dev = loc->ptrs[r].dev,
			.offset = loc->ptrs[r].offset,
			.len = fs->node_size,
		};

		tfs_alloc_free_after(fs, &run, seq);
	}
}

/*
 * Step 1 (under the tree's lock): which nodes, where they go, their bytes.
 * Allocation comes first, so a failure leaves nothing changed.
 */
static int ckpt_prepare_locked(struct ckpt *c)
{
	struct tfs_btree *b = c->b;
	struct tfs_fs *fs = b->fs;
	bool need;
	int ret;

	ret = ckpt_collect(c, b->root, NULL, 0, &need);
	if (ret)
		return ret;
	for (unsigned i = 0; i < c->nr; i++) {
		struct ckpt_node *cn = &c->nodes[i];
		unsigned want = fs->metadata_replicas;
		s64 got;

		cn->buf = tfs_bdev_alloc_buf(NULL, fs->node_size);
		if (!cn->buf) {
			ret = -ENOMEM;
			break;
		}
		__atomic_add_fetch(&fs->cache.ckpt_bytes, fs->node_size, __ATOMIC_RELAXED);
		got = tfs_alloc(fs, fs->node_size, fs->node_size, want, TFS_ALLOC_METADATA,
				cn->runs);
		while (got < 0 && --want >= fs->metadata_replicas_required && want)
			got = tfs_alloc(fs, fs->node_size, fs->node_size, want, TFS_ALLOC_METADATA,
					cn->runs);
		if (got < 0) {
			fprintf(stderr, "btree %s: no space for %u node copies of %u bytes\n",
				tfs_btree_id_str(b->id), fs->metadata_replicas, fs->node_size);
			ret = (int)got;
			break;
		}
		cn->nr_runs = want;
	}
	tfs_btree_cache_note_peak(fs);
	if (ret) {
		for (unsigned i = 0; i < c->nr; i++)
			for (unsigned r = 0; r < c->nodes[i].nr_runs; r++)
				tfs_alloc_free_now(fs, &c->nodes[i].runs[r]);
		return ret;
	}

	/* Children first: a parent's bytes carry its children's new pointers. */
	for (unsigned i = 0; i < c->nr; i++) {
		struct ckpt_node *cn = &c->nodes[i];
		struct tfs_bnode *n = cn->n;
		u64 seq = __atomic_fetch_add(&fs->next_node_seq, 1, __ATOMIC_RELAXED);
		struct tfs_btree_loc loc;
		u32 csum;

		loc_from_runs(&loc, cn->runs, cn->nr_runs);
		csum = tfs_btree_node_serialize(fs, b, n, seq, cn->buf);
		cn->old = n->disk;
		n->new_disk = loc;
		n->new_seq = seq;
		n->new_csum = csum;
		n->writing = true;
		if (n->dirty) {
			n->dirty = false;
			__atomic_sub_fetch(&b->nr_dirty, 1, __ATOMIC_RELAXED);
		}
		if (cn->parent) {
			tfs_btree_ptr_key_set(fs, tfs_bnode_key(cn->parent, cn->pidx), &loc, seq,
					      csum, n->level);
		} else {
			tfs_bkey_init(&c->root_key, TFS_BKEY_btree_ptr, TFS_POS_MAX,
				      tfs_btree_ptr_val_bytes(loc.nr));
			tfs_btree_ptr_key_set(fs, &c->root_key.k, &loc, seq, csum, n->level);
		}
	}
	c->max_seq = b->max_journal_seq;
	/* The keys in this snapshot stay pinned by the checkpoint; new commits pin afresh. */
	u64 pin_seq = __atomic_load_n(&b->pin.seq, __ATOMIC_ACQUIRE);

	if (pin_seq) {
		tfs_journal_pin_add(fs->j, pin_seq, &b->ckpt_pin, NULL);
		tfs_journal_pin_drop(fs->j, &b->pin);
	}
	c->frees = b->pending_free;
	memset(&b->pending_free, 0, sizeof(b->pending_free));
	return 0;
}

static void ckpt_write_endio(struct tfs_bio *bio)
{
	struct ckpt *c = bio->private;

	pthread_mutex_lock(&c->lock);
	if (!--c->pending)
		pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
}

/* Step 3: every copy of every node, then a flush of every member written. */
static int ckpt_write(struct ckpt *c)
{
	struct tfs_btree *b = c->b;
	struct tfs_fs *fs = b->fs;
	unsigned nr_bios = 0;
	bool written[TFS_MAX_DEVICES] = { false };
	struct tfs_bio *bios;
	int ret = 0;

	for (unsigned i = 0; i < c->nr; i++)
		nr_bios += c->nodes[i].nr_runs;
	bios = tfs_fault("alloc:node_write_bios") ? NULL : calloc(nr_bios ?: 1, sizeof(*bios));
	if (!bios)
		return -ENOMEM;
	struct tfs_bio **list = calloc(nr_bios ?: 1, sizeof(*list));

	if (!list) {
		free(bios);
		return -ENOMEM;
	}
	nr_bios = 0;
	for (unsigned i = 0; i < c->nr; i++)
		for (unsigned r = 0; r < c->nodes[i].nr_runs; r++) {
			struct tfs_bio *bio = &bios[nr_bios];

			*bio = (struct tfs_bio){
				.bdev = fs->devs[c->nodes[i].runs[r].dev].bdev,
				.op = TFS_OP_write,
				.flags = TFS_BIO_QUIET,
				.tag = TFS_TAG_btree,
				.offset = c->nodes[i].runs[r].offset,
				.buf = c->nodes[i].buf,
				.len = fs->node_size,
				.end_io = ckpt_write_endio,
				.private = c,
			};
			written[c->nodes[i].runs[r].dev] = true;
			list[nr_bios++] = bio;
		}
	c->pending = nr_bios;
	tfs_bio_submit_batch(list, nr_bios);
	pthread_mutex_lock(&c->lock);
	while (c->pending)
		pthread_cond_wait(&c->done, &c->lock);
	pthread_mutex_unlock(&c->lock);
	/* Written (or failed: a retry serializes again): the copies go now. */
	ckpt_free_bufs(c);

	/*
	 * A copy counts once its write and the flush of its member after it
	 * both succeeded: durable before the root entry that refers to it is
	 * written.  A member whose every write failed is not flushed.
	 */
	bool flush_failed[TFS_MAX_DEVICES] = { false };

	memset(written, 0, sizeof(written));
	for (unsigned i = 0, k = 0; i < c->nr; i++)
		for (unsigned r = 0; r < c->nodes[i].nr_runs; r++, k++)
			if (!bios[k].result)
				written[c->nodes[i].runs[r].dev] = true;
	for (unsigned d = 0; d < TFS_MAX_DEVICES; d++)
		if (written[d]) {
			int r = tfs_bdev_flush(fs->devs[d].bdev);

			if (r) {
				fprintf(stderr, "%s: flush after btree %s node writes failed: %s\n",
					fs->devs[d].path, tfs_btree_id_str(b->id), tfs_err_str(r));
				flush_failed[d] = true;
			}
		}

	/*
	 * A node is written when at least metadata_replicas_required of its
	 * copies are (FAULTS.md: one of two members failing is no error).  The
	 * failed copies stay in its pointer: a read that meets one fails its
	 * checksum and takes the next copy, and the next write-back of the
	 * node puts every copy down again.  Failing every node write instead
	 * made a member's failure stop the whole filesystem (read-only after a
	 * few checkpoints) although the other member held every node.
	 */
	for (unsigned i = 0, k = 0; i < c->nr; i++) {
		unsigned good = 0, need = max_t(unsigned, fs->metadata_replicas_required, 1);

		for (unsigned r = 0; r < c->nodes[i].nr_runs; r++, k++) {
			unsigned dev = c->nodes[i].runs[r].dev;

			if (!bios[k].result && !flush_failed[dev]) {
				good++;
				continue;
			}
			if (!bios[k].result)
				continue; /* its flush failure was said above */

			struct printbuf name = PRINTBUF;
			struct tfs_btree_loc one = { .nr = 1 };

			one.ptrs[0].dev = dev;
			one.ptrs[0].offset = c->nodes[i].runs[r].offset;
			tfs_btree_node_loc_to_text(&name, fs, b->id, c->nodes[i].n->level, &one);
			fprintf(stderr, "%s: write failed: %s\n", printbuf_str(&name),
				tfs_err_str(bios[k].result));
			printbuf_exit(&name);
		}
		if (good < min_t(unsigned, need, c->nodes[i].nr_runs) || !good)
			ret = -TFS_ERR_btree_node_write;
		c->nodes[i].degraded = good < c->nodes[i].nr_runs;
	}
	free(list);
	free(bios);
	return ret;
}

/* Step 5: the new tree is durable; old copies freed after root_seq. */
static void ckpt_done_locked(struct ckpt *c, u64 root_seq, bool free_old)
{
	struct tfs_btree *b = c->b;
	struct tfs_fs *fs = b->fs;

	for (unsigned i = 0; i < c->nr; i++) {
		struct ckpt_node *cn = &c->nodes[i];
		struct tfs_bnode *n = cn->n;

		if (free_old)
			loc_free_after(fs, &cn->old, root_seq);
		n->writing = false;
		n->disk = n->new_disk;
		n->disk_seq = n->new_seq;
		n->disk_csum = n->new_csum;
		/*
		 * Written with fewer good copies than wanted: written again,
		 * every copy, at the tree's next write-back (dirty, though no
		 * key changed), so a member that failed once does not leave it
		 * with one copy until it changes.  Not again when this write was
		 * already that retry: the member still fails, and the node's
		 * next change rewrites it anyway.
		 */
		if (cn->degraded && !n->degraded && !n->dead)
			tfs_bnode_set_dirty(b, n);
		n->degraded = cn->degraded;
		if (n->dead) {
			/* Dropped meanwhile: the next checkpoint's tree no longer has it. */
			tfs_btree_pending_free_add(b, &n->disk);
			tfs_bnode_free(fs, n);
		}
	}
	b->dead = NULL;
	for (unsigned i = 0; free_old && i < c->frees.nr; i++)
		loc_free_after(fs, &c->frees.locs[i], root_seq);
	b->c.checkpoints++;
	b->c.nodes_written += c->nr;
	b->ckpt_failures = 0;
}

/*
 * The pointers to this checkpoint's nodes (still writing), which step 1 or
 * a root grown meanwhile set to their new copies, back to their durable
 * copies: the new ones are given back.  A walk, not ckpt_node.pidx:
 * commits may have split or merged since step 1.
 */
static void ptrs_reset_locked(struct tfs_fs *fs, struct tfs_bnode *n)
{
	for (unsigned i = 0; n->level && i < n->nr_keys; i++) {
		struct tfs_bnode *ch = n->child[i];

		if (!ch)
			continue;
		if (ch->writing)
			tfs_btree_ptr_key_set(fs, tfs_bnode_key(n, i), &ch->disk, ch->disk_seq,
					      ch->disk_csum, ch->level);
		ptrs_reset_locked(fs, ch);
	}
}

/*
 * Steps 2-4 failed: nothing durable refers to the new copies; everything is
 * dirty again.  io_error: a write failed (counted towards giving up), not
 * a lack of journal space.
 */
static void ckpt_fail_locked(struct ckpt *c, bool io_error)
{
	struct tfs_btree *b = c->b;
	struct tfs_fs *fs = b->fs;

	ptrs_reset_locked(fs, b->root);
	for (unsigned i = 0; i < c->nr; i++) {
		struct ckpt_node *cn = &c->nodes[i];
		struct tfs_bnode *n = cn->n;

		/* Btree alloc keys mark them (a split commit): they stay allocated. */
		for (unsigned r = 0; r < cn->nr_runs && !c->sets_committed; r++)
			tfs_alloc_free_now(fs, &cn->runs[r]);
		n->writing = false;
		if (n->dead) {
			if (n->disk.nr)
				tfs_btree_pending_free_add(b, &n->disk);
			tfs_bnode_free(fs, n);
		} else {
			tfs_bnode_set_dirty(b, n);
		}
	}
	b->dead = NULL;
	for (unsigned i = 0; i < c->frees.nr; i++)
		tfs_btree_pending_free_add(b, &c->frees.locs[i]);
	/* Its keys are not written back: pinned by the tree again. */
	u64 seq = __atomic_load_n(&b->ckpt_pin.seq, __ATOMIC_ACQUIRE);

	if (seq) {
		tfs_journal_pin_add(fs->j, seq, &b->pin, tfs_btree_pin_flush);
		tfs_journal_pin_drop(fs->j, &b->ckpt_pin);
	}
	b->c.checkpoint_errors++;
	b->ckpt_failures += io_error;
}

/* Space freed by commits not yet durable (a journal write makes it allocatable)? */
static bool space_waiting(struct tfs_fs *fs)
{
	struct tfs_alloc_usage u;

	tfs_alloc_usage(fs, &u);
	return u.waiting != 0;
}

/*
 * One commit of a checkpoint's node space (and root entry, with
 * r->root_key); with mark, the tree's split marker is set (or removed)
 * in the same transaction.
 */
static int ckpt_commit_one(struct tfs_fs *fs, const struct tfs_trans_roots *r, unsigned flags,
			   u64 *seq, int mark)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf m;
	struct tfs_bpos pos = TFS_POS(TFS_ALLOC_SPLIT_INODE, r->b->id);
	int ret = 0;

	tfs_trans_init(&trans, fs);
	trans.roots = r;
	if (mark > 0) {
		tfs_bkey_init(&m, TFS_BKEY_cookie, pos, 0);
		ret = tfs_trans_update(&trans, TFS_BTREE_alloc, &m.k);
	} else if (mark < 0) {
		ret = tfs_trans_delete(&trans, TFS_BTREE_alloc, pos);
	}
	ret = ret ?: tfs_trans_commit(&trans, flags, seq);
	tfs_trans_exit(&trans);
	/* Tests: each piece of a split write-back durable on its own (any prefix can remain). */
	if (!ret && !r->root_key && tfs_fault("ckpt:split_flush_pieces"))
		ret = tfs_journal_flush_seq(fs->j, *seq);
	return ret;
}

/*
 * Sets (or clears) the btree alloc keys of locs[0..nr), a few per
 * transaction; the first sets the split marker with mark > 0, the last
 * removes it with mark < 0.
 */
static int ckpt_commit_chunks(struct tfs_btree *b, const struct tfs_btree_loc *locs, unsigned nr,
			      bool set, int mark, unsigned flags, u64 *seq)
{
	unsigned i = 0, n;

	if (!nr && !mark)
		return 0;
	do {
		struct tfs_trans_roots r = { .b = b };
		int ret;

		n = min_t(unsigned, nr - i, 16);
		if (set) {
			r.set = locs + i;
			r.nr_set = n;
		} else {
			r.clear = locs + i;
			r.nr_clear = n;
		}
		ret = ckpt_commit_one(b->fs, &r, flags, seq,
				      mark > 0 && !i		? 1
				      : mark < 0 && i + n == nr ? -1
								: 0);
		if (ret)
			return ret;
		i += n;
	} while (i < nr);
	return 0;
}

/*
 * Whether tree id's split marker is in the alloc btree: 1 yes, 0 no, -1 a
 * node could not be read.  A walk, not tfs_btree_lookup(): that may write
 * back a tree for memory, maybe the one whose checkpoint (and ckpt_lock)
 * the caller holds.
 */
static int split_marker_present(struct tfs_fs *fs, enum tfs_btree_id id)
{
	struct tfs_btree *a = &fs->btrees[TFS_BTREE_alloc];
	struct tfs_bpos pos = TFS_POS(TFS_ALLOC_SPLIT_INODE, id);
	struct tfs_btree_path path;
	int present = -1;

	tfs_six_lock_read(&a->lock);
	if (!tfs_btree_walk(a, pos, 0, &path, false)) {
		const struct tfs_bnode *leaf = path.n[0];
		unsigned idx = path.idx[0];

		present = idx < leaf->nr_keys &&
			  tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), pos);
	}
	tfs_six_unlock_read(&a->lock);
	return present;
}

/*
 * Step 4 of a tree but the alloc btree: one transaction whose journal entry
 * holds the root entry and the btree alloc keys (tfs_alloc_nodes_trigger()):
 * set for every copy written now, clear for every copy the durable tree
 * refers to and the new one does not (the changed nodes' old copies, the
 * nodes dropped since the last checkpoint).  The old copies stay allocated
 * in memory until that entry is durable (step 5): *free_seq.
 *
 * Keys for more copies than one journal entry holds: the sets first, then
 * the root entry, then the clears, each in entries of their own.  A block
 * is then never doubly used (the sets are durable before the root entry,
 * and the old copies are reused only once the clears are durable:
 * *free_seq is the last clear's seq), but a prefix of them would leak the
 * space of the new or the old copies.  So the first piece also sets the
 * tree's split marker (fs/fs_format.h) and the last one removes it: a
 * crash (or a failure) in between leaves the marker, and the next writable
 * open rewrites the btree alloc keys from the durable trees' nodes
 * (tfs_fsck_split_writeback()) before anything else runs.  Whatever
 * prefix survives, the keys are exact once open returns.  A marker left by
 * an earlier failed split stays (that open still has work to do).  After
 * a set was committed, the new copies stay allocated if the checkpoint
 * fails (c->sets_committed); if a clear fails, the old ones (c->keep_old).
 */
static int ckpt_commit(struct ckpt *c, bool reclaim, u64 *root_seq, u64 *free_seq)
{
	struct tfs_fs *fs = c->b->fs;
	struct tfs_btree_loc *set = calloc(c->nr ?: 1, sizeof(*set));
	struct tfs_btree_loc *clear = calloc(c->nr + c->frees.nr ?: 1, sizeof(*clear));
	struct tfs_trans_roots roots = { .b = c->b, .root_key = &c->root_key.k };
	unsigned flags = reclaim ? TFS_TRANS_RESERVED : TFS_TRANS_NONBLOCK;
	int ret = -ENOMEM;

	if (!set || !clear || tfs_fault("alloc:ckpt_commit"))
		goto out;
	for (unsigned i = 0; i < c->nr; i++) {
		loc_from_runs(&set[roots.nr_set++], c->nodes[i].runs, c->nodes[i].nr_runs);
		if (c->nodes[i].old.nr)
			clear[roots.nr_clear++] = c->nodes[i].old;
	}
	for (unsigned i = 0; i < c->frees.nr; i++)
		clear[roots.nr_clear++] = c->frees.locs[i];
	roots.set = set;
	roots.clear = clear;
	ret = tfs_fault("ckpt:alloc_keys_too_big")
		      ? -TFS_ERR_journal_entry_too_big
		      : ckpt_commit_one(fs, &roots, flags, root_seq, 0);
	*free_seq = *root_seq;
	if (ret != -TFS_ERR_journal_entry_too_big)
		goto out;

	unsigned nr_set = roots.nr_set, nr_clear = roots.nr_clear;
	/*
	 * A marker already there: an earlier split failed; its repair waits
	 * for the next open, so this one neither sets nor removes it.  Not
	 * known: set, never removed.
	 */
	int present = split_marker_present(fs, c->b->id);

	c->sets_committed = true; /* some may be, from here on */
	ret = ckpt_commit_chunks(c->b, set, nr_set, true, present != 1, flags, root_seq);
	if (ret)
		goto out;
	roots.nr_set = roots.nr_clear = 0;
	ret = ckpt_commit_one(fs, &roots, flags, root_seq, 0);
	if (ret)
		goto out;
	c->sets_committed = false; /* the root entry refers to them */
	*free_seq = *root_seq;
	/* Crash safety: the marker goes with the last clear, never before. */
	if (ckpt_commit_chunks(c->b, clear, nr_clear, false, present ? 0 : -1, flags, free_seq))
		c->keep_old = true;
out:
	free(set);
	free(clear);
	return ret;
}

/* Consecutive failed checkpoints of one tree before the filesystem stops writing. */
#define CKPT_MAX_FAILURES 4

/*
 * reclaim: called by journal reclaim (the pin's flush callback): the root
 * entry may use the journal's reserve, and waits for it.  Other callers
 * (write_all, memory pressure) must not take reclaim's reserve, nor wait
 * for journal space while their checkpoint pins the journal (reclaim could
 * then never free any): when the journal has no room for the root entry
 * the checkpoint is undone and an EAGAIN-class code returned, to wait for
 * space holding nothing and try again.
 */
static int checkpoint(struct tfs_btree *b, bool reclaim)
{
	struct tfs_fs *fs = b->fs;
	struct ckpt c = { .b = b };
	u64 root_seq = 0, free_seq = 0;
	bool flushed = false;
	int ret;

	if (fs->read_only || !fs->j)
		return 0;
	/* A halted journal takes no root entry: do not write nodes for nothing. */
	ret = tfs_journal_error(fs->j);
	if (ret)
		return ret;
	if (!reclaim) {
		/*
		 * Room for the root entry now?  If not, do not write nodes only to
		 * undo the checkpoint when the entry is refused (the probe's words
		 * stay zero: an empty sub-entry).
		 */
		struct tfs_journal_res res;

		ret = tfs_journal_res_get(fs->j, &res, tfs_btree_roots_u64s(),
					  TFS_JOURNAL_RES_NONBLOCK);
		if (ret)
			return ret;
		tfs_journal_res_put(fs->j, &res);
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.done, NULL);
	pthread_mutex_lock(&b->ckpt_lock);
	/* fsck's seqcount (fs/fs_types.h): running first, then a new start. */
	__atomic_add_fetch(&fs->ckpt_running, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&fs->ckpt_started, 1, __ATOMIC_SEQ_CST);

	/* 1. Snapshot under the tree's lock. */
again:
	tfs_btree_lock_exclusive(b);
	if (!b->nr_dirty && b->root_key.k.type == TFS_BKEY_btree_ptr) {
		/* Nothing changed (a commit that deleted nothing still pinned its seq). */
		tfs_journal_pin_drop(fs->j, &b->pin);
		tfs_btree_unlock_exclusive(b);
		__atomic_sub_fetch(&fs->ckpt_running, 1, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&b->ckpt_lock);
		ckpt_free(&c);
		return 0;
	}
	ret = ckpt_prepare_locked(&c);
	tfs_btree_unlock_exclusive(b);
	if (ret && tfs_err_matches(ret, ENOSPC) && !flushed) {
		/*
		 * Old copies freed by checkpoints whose root entry is not
		 * durable yet (reclaim's are not flushed) wait for a flush:
		 * make them durable, once, with no tree locked, and redo the
		 * snapshot (prepare changed nothing).
		 */
		flushed = true;
		if (space_waiting(fs) && !tfs_journal_flush(fs->j)) {
			ckpt_free_bufs(&c);
			c.nr = 0;
			goto again;
		}
	}
	if (ret) {
		bool waiting = space_waiting(fs);

		tfs_btree_lock_exclusive(b);
		for (unsigned i = 0; i < c.nr; i++)
			c.nodes[i].nr_runs = 0; /* prepare gave them back */
		b->c.checkpoint_errors++;
		/*
		 * No space for metadata is not waited out: it counts towards
		 * giving up, unless space waits for a journal write to be freed.
		 */
		b->ckpt_failures += tfs_err_matches(ret, ENOSPC) && !waiting;
		tfs_btree_unlock_exclusive(b);
		goto out;
	}

	/* 2. A node is never on disk ahead of the journal. */
	ret = tfs_journal_flush_seq(fs->j, c.max_seq);
	/* 3. The new copies, all of them durable. */
	if (!ret)
		ret = ckpt_write(&c);
	if (ret) {
		tfs_btree_lock_exclusive(b);
		ckpt_fail_locked(&c, true);
		tfs_btree_unlock_exclusive(b);
		goto out;
	}

	/*
	 * 4. The root entry that makes the new tree the durable one, with
	 * the btree alloc keys of the copies it takes and gives up in the
	 * same journal entry (ckpt_commit()).  The alloc btree's own nodes
	 * are not recorded: a plain root entry.  Failing before the entry is
	 * filled (no journal room, no memory, an alloc node unreadable)
	 * leaves nothing durable referring to the new copies: undone.
	 */
	if (b->id == TFS_BTREE_alloc) {
		ret = log_roots(fs, b, &c.root_key.k, &root_seq,
				reclaim ? TFS_JOURNAL_RES_RESERVED : TFS_JOURNAL_RES_NONBLOCK);
		free_seq = root_seq;
	} else
		ret = ckpt_commit(&c, reclaim, &root_seq, &free_seq);
	if (ret && (tfs_err_matches(ret, EAGAIN) || b->id != TFS_BTREE_alloc)) {
		tfs_btree_lock_exclusive(b);
		ckpt_fail_locked(&c, !tfs_err_matches(ret, EAGAIN));
		tfs_btree_unlock_exclusive(b);
		goto out;
	}
	/*
	 * Others wait here until the new tree is durable.  Reclaim does not:
	 * it writes back every tree pinning the seqs it frees, one after the
	 * other, and their root entries must share one journal entry (still
	 * open while reclaim runs its callbacks) -- a flushed entry per tree
	 * would cost a block of the reserve per tree for every bucket freed,
	 * more than reserved_buckets holds with six trees in a small journal.
	 * Not waiting is safe: the old copies are freed only once root_seq
	 * is durable (tfs_alloc_free_after()), and no durable entry can
	 * record a last_seq past the keys written back here without the root
	 * entry (root_seq is older, or the same entry) being durable too.
	 */
	if (!ret && !reclaim)
		ret = tfs_journal_flush_seq(fs->j, root_seq);

	/*
	 * 5. Only now may the old copies be reused (after root_seq).  If the root entry failed
	 * the journal is dead: the new nodes are written and in memory the tree
	 * points at them, but the old ones stay allocated (the next open's
	 * rebuild frees what nothing refers to).
	 */
	tfs_btree_lock_exclusive(b);
	ckpt_done_locked(&c, free_seq, !ret && !c.keep_old);
	tfs_btree_unlock_exclusive(b);
	tfs_journal_pin_drop(fs->j, &b->ckpt_pin);
out:
	if (ret) {
		fs->first_error = fs->first_error ?: ret;
		if (b->ckpt_failures >= CKPT_MAX_FAILURES && !tfs_journal_error(fs->j)) {
			fprintf(stderr,
				"btree %s: %u write-backs in a row failed: the filesystem stops "
				"writing (read-only)\n",
				tfs_btree_id_str(b->id), b->ckpt_failures);
			tfs_journal_halt(fs->j);
		}
	}
	__atomic_sub_fetch(&fs->ckpt_running, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&b->ckpt_lock);
	ckpt_free(&c);
	return ret;
}

int tfs_btree_checkpoint(struct tfs_btree *b)
{
	return checkpoint(b, false);
}

int tfs_btree_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct tfs_btree *b = container_of(pin, struct tfs_btree, pin);

	return checkpoint(b, true);
}

/* Waits, holding nothing, until the journal takes an entry (released unfilled). */
static int wait_journal_space(struct tfs_fs *fs)
{
	struct tfs_journal_res res;
	int ret = tfs_journal_res_get(fs->j, &res, 1, 0);

	if (!ret)
		tfs_journal_res_put(fs->j, &res);
	return ret;
}

int tfs_btree_write_all(struct tfs_fs *fs)
{
	int ret;

	if (fs->read_only || !fs->j)
		return 0;
	/* Key cache hook: its dirty keys into the trees first, then the trees to disk. */
	ret = tfs_btree_key_cache_flush_all(fs->key_cache);
	/*
	 * The alloc btree last: every other tree's checkpoint changes its
	 * btree alloc keys, its own changes none (fs/fs_format.h).
	 */
	for (unsigned i = 0; i < TFS_BTREE_NR; i++) {
		unsigned id = i < TFS_BTREE_alloc    ? i
			      : i + 1 < TFS_BTREE_NR ? i + 1
						     : TFS_BTREE_alloc;
		struct tfs_btree *b = &fs->btrees[id];
		int r;

		/* A failed write is retried at new locations, a few times. */
		while (1) {
			r = checkpoint(b, false);
			if (r && tfs_err_matches(r, EAGAIN)) {
				r = wait_journal_space(fs);
				if (!r)
					continue;
			}
			if (!r || !b->ckpt_failures || b->ckpt_failures >= CKPT_MAX_FAILURES ||
			    tfs_journal_error(fs->j))
				break;
		}
		ret = ret ?: r;
	}
	/*
	 * A root entry's last_seq was taken while its checkpoint still pinned
	 * the keys it wrote back; one more entry, flushed, records the
	 * last_seq they no longer hold, so the next open replays nothing that
	 * the trees on disk already have.
	 */
	if (!ret)
		ret = tfs_btree_log_roots(fs, 0, NULL) ?: tfs_journal_flush(fs->j);
	return ret;
}
