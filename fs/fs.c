// SPDX-License-Identifier: GPL-2.0
/*
 * Opening and stopping a filesystem (fs/fs.h, docs/engine.md "Open and
 * stop").
 *
 * Open, in order, each step printing what failed where it failed:
 *  1. open every member and read its superblock; check they belong together
 *     (uuid, member count, distinct indexes) and, without `degraded`, that
 *     none is missing;
 *  2. read the journal of every member;
 *  3. find the roots: the newest btree_root entries of the replay range,
 *     else the clean section;
 *  4. read the roots (and interior nodes), replay every key from last_seq on
 *     into the trees (replay is idempotent: applying a key the tree already
 *     holds changes nothing), rebuild the allocator from node pointers
 *     and alloc keys (no extents leaf is read);
 *  5. (read-write) clear the clean flag, start the journal after what was
 *     read, pin the replayed seqs in their trees, log the roots, and only
 *     then tell the journal replay is done.
 * Nothing is written before step 5, so a failed open changes nothing on
 * disk; a crash during or after step 5 replays again from the same range.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fs/alloc_types.h"
#include "fs/btree_internal.h"
#include "fs/btree_io.h"
#include "fs/fs_format.h"
#include "fs/fs.h"
#include "fs/fs_types.h"
#include "fs/fsck.h"
#include "fs/posix.h"
#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/super.h"

void tfs_fs_opts_default(struct tfs_fs_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->error_action = -1;
}

u32 tfs_fs_node_size(const struct tfs_sb *sb)
{
	return tfs_sb_btree_node_size(sb);
}

/* --- members --- */

static int fs_lock_dev(struct tfs_fs *fs, struct tfs_fs_dev *d, const char *path)
{
	d->lock_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->lock_fd < 0) {
		int e = errno;

		fprintf(stderr, "%s: %s\n", path, strerror(e));
		return -e;
	}
	/* One open filesystem per member: a second open (even by another process) is refused. */
	if (flock(d->lock_fd, (fs->read_only ? LOCK_SH : LOCK_EX) | LOCK_NB)) {
		int e = errno;

		if (e == EWOULDBLOCK)
			e = EBUSY;
		fprintf(stderr, "%s: in use by another open filesystem (%s)\n", path, strerror(e));
		close(d->lock_fd);
		d->lock_fd = -1;
		return -e;
	}
	return 0;
}

static int fs_open_devs(struct tfs_fs *fs, const char *const *paths, unsigned nr)
{
	struct printbuf err = PRINTBUF;
	struct tfs_fs_dev tmp;
	const struct tfs_sb *ref = NULL;
	int ret = 0;

	if (!nr || nr > TFS_MAX_DEVICES) {
		fprintf(stderr, "filesystem open: %u devices given (1..%u)\n", nr, TFS_MAX_DEVICES);
		return -TFS_ERR_invalid_argument;
	}
	for (unsigned i = 0; i < nr; i++) {
		memset(&tmp, 0, sizeof(tmp));
		tmp.lock_fd = -1;
		ret = fs_lock_dev(fs, &tmp, paths[i]);
		if (ret)
			break;
		ret = tfs_sb_open(paths[i],
				  fs->read_only		   ? TFS_BDEV_RDONLY
				  : fs->opts.no_host_cache ? TFS_BDEV_EXCL
							   : TFS_BDEV_EXCL | TFS_BDEV_HOST_CACHE,
				  &tmp.sb, &err);
		if (ret) {
			fprintf(stderr, "%s\n", printbuf_str(&err));
			close(tmp.lock_fd);
			tfs_sb_exit(&tmp.sb);
			break;
		}
		const struct tfs_sb *sb = tmp.sb.sb;
		unsigned idx = sb->dev_idx;

		if (ref && (memcmp(sb->uuid, ref->uuid, 16) || sb->nr_devices != ref->nr_devices)) {
			fprintf(stderr, "%s and %s belong to different filesystems\n", paths[0],
				paths[i]);
			ret = -TFS_ERR_fs_members;
		} else if (fs->devs[idx].present) {
			fprintf(stderr, "%s and %s are both member %u\n", fs->devs[idx].path,
				paths[i], idx);
			ret = -TFS_ERR_fs_members;
		}
		if (ret) {
			close(tmp.lock_fd);
			tfs_sb_exit(&tmp.sb);
			break;
		}
		tmp.present = true;
		tmp.bdev = tmp.sb.bdev;
		tmp.path = strdup(paths[i]);
		fs->devs[idx] = tmp;
		if (!fs->devs[idx].path) {
			ret = -ENOMEM;
			break;
		}
		if (!ref)
			ref = fs->devs[idx].sb.sb;
	}
	printbuf_exit(&err);
	if (ret)
		return ret;

	fs->nr_devices = ref->nr_devices;
	memcpy(fs->uuid, ref->uuid, 16);
	fs->block_size = le32_to_cpu(ref->block_size);
	for (unsigned i = 0; i < fs->nr_devices; i++) {
		const struct tfs_member *m = tfs_sb_member(ref, i);

		if (fs->devs[i].present || m->state == TFS_MEMBER_failed ||
		    m->state == TFS_MEMBER_spare)
			continue;
		struct printbuf u = PRINTBUF;

		prt_uuid(&u, m->uuid);
		if (m->label[0]) {
			prt_str(&u, ", label \"");
			prt_bytes(&u, m->label, tfs_strnlen_field(m->label, sizeof(m->label)));
			prt_char(&u, '"');
		}
		/* The ways out, for whoever opens: every member, or degraded. */
		fprintf(stderr, "member %u (uuid %s) is missing%s\n", i, printbuf_str(&u),
			fs->opts.degraded ? "; opening degraded"
					  : ": give every member, or open degraded (mount -o "
					    "degraded, fsck --degraded) where replicas allow");
		printbuf_exit(&u);
		if (!fs->opts.degraded)
			ret = -TFS_ERR_fs_members;
	}
	return ret;
}

static int fs_geometry(struct tfs_fs *fs)
{
	const struct tfs_sb *sb = NULL;
	unsigned present = 0;

	fs->node_size = 0;
	for (unsigned i = 0; i < fs->nr_devices; i++) {
		struct tfs_fs_dev *d = &fs->devs[i];
		u32 ns;

		if (!d->present)
			continue;
		sb = d->sb.sb;
		present++;
		ns = tfs_fs_node_size(sb);
		if (!fs->node_size || ns < fs->node_size)
			fs->node_size = ns;
	}
	if (fs->node_size < TFS_BTREE_NODE_SIZE_MIN || fs->node_size > TFS_BTREE_NODE_SIZE_MAX ||
	    !IS_POWER_OF_2(fs->node_size) || fs->node_size % fs->block_size) {
		fprintf(stderr,
			"btree node size %u not usable (a power of two, %u..%u, of whole blocks): "
			"bucket size too small?\n",
			fs->node_size, TFS_BTREE_NODE_SIZE_MIN, TFS_BTREE_NODE_SIZE_MAX);
		return -TFS_ERR_invalid_sb_options;
	}
	fs->btree_ptr_replicas =
		min_t(unsigned, sb->metadata_replicas ?: 1, TFS_BTREE_PTR_MAX_REPLICAS);
	fs->metadata_replicas = min_t(unsigned, fs->btree_ptr_replicas, present);
	fs->metadata_replicas_required =
		min_t(unsigned, sb->metadata_replicas_required ?: 1, fs->metadata_replicas);
	fs->node_magic = tfs_btree_node_magic(fs->uuid);
	return 0;
}

/* Journal descriptors for every present member (as tools/journal_devs.c does). */
static int fs_journal_devs(struct tfs_fs *fs, struct tfs_journal_dev *jd, unsigned *nr)
{
	struct tfs_journal_opts *o = &fs->jopts;

	tfs_journal_opts_default(o);
	/*
	 * A seq per durable commit: with the journal's default of 1024, small
	 * durable commits (fsync) filled half the pin fifo every 512 commits,
	 * and each time reclaim wrote back whole trees -- most of what they
	 * wrote.  32k seqs (bcachefs's JOURNAL_PIN) leave reclaim to journal
	 * space and memory; the fifo costs 40 bytes a slot.
	 */
	o->pin_fifo_size = 32768;
	/*
	 * Post-flush entries: an fsync costs one device flush (after the
	 * journal write) instead of two; replay checks the data they cover
	 * (fs_verify_key()), up to this much.
	 */
	o->post_flush_max_bytes = fs->opts.no_post_flush ? 0 : 8 << 20;
	*nr = 0;
	for (unsigned i = 0; i < fs->nr_devices; i++) {
		struct tfs_fs_dev *d = &fs->devs[i];
		u64 *jb = NULL;
		unsigned jnr = 0;
		int ret;

		if (!d->present)
			continue;
		ret = tfs_sb_journal_buckets(d->sb.sb, &jb, &jnr);
		if (ret)
			return ret;
		if (!jb || !jnr) {
			free(jb);
			if (tfs_sb_this_member(d->sb.sb)->state == TFS_MEMBER_rw) {
				fprintf(stderr, "%s: no journal buckets\n", d->path);
				return -TFS_ERR_invalid_sb_journal;
			}
			continue;
		}
		if (*nr >= TFS_JOURNAL_MAX_DEVS) {
			free(jb);
			break;
		}
		d->journal_buckets = jb;
		d->nr_journal_buckets = jnr;
		jd[*nr] = (struct tfs_journal_dev){
			.bdev = d->bdev,
			.dev_idx = i,
			.bucket_size = tfs_sb_bucket_size(d->sb.sb),
			.buckets = d->journal_buckets,
			.nr_buckets = jnr,
			.writable = !fs->read_only &&
				    tfs_sb_this_member(d->sb.sb)->state == TFS_MEMBER_rw,
		};
		/*
		 * Entries of at most a quarter bucket (16 KiB at least, 64 KiB at
		 * most): an entry is opened only where max_entry_size fits, so
		 * bucket-sized entries would take a bucket each in a small journal.
		 */
		u32 es = max_t(u32, jd[*nr].bucket_size / 4, 16 << 10);

		es = min_t(u32, es, 64 << 10);
		es = min_t(u32, es, jd[*nr].bucket_size);
		if (es < o->max_entry_size)
			o->max_entry_size = es;
		(*nr)++;
	}
	memcpy(o->uuid, fs->uuid, 16);
	o->block_size = fs->block_size;
	/*
	 * Reclaim's checkpoints need a root entry (one for all the trees it
	 * writes back in a run: btree_write.c) and one more entry from the reserve.
	 */
	o->reserved_buckets = 2;
	/*
	 * mkfs: entries close only when asked to, never on age, so the same
	 * options give the same bytes however fast the machine (mkfs's
	 * reproducibility).
	 */
	if (fs->opts.format) {
		o->write_delay_ms = 1000000;
		o->flush_delay_ms = 1000000;
	}
	o->metadata_replicas = min_t(unsigned, fs->metadata_replicas, *nr);
	o->metadata_replicas_required =
		min_t(unsigned, fs->metadata_replicas_required, o->metadata_replicas);
	return 0;
}

/* --- roots --- */

struct replay_ctx {
	struct tfs_fs *fs;
	bool have_root[TFS_BTREE_NR];
	u64 root_seq;
	u64 min_seq[TFS_BTREE_NR]; /* oldest seq replayed into each tree */
	u64 max_seq[TFS_BTREE_NR];
	u64 nr_keys;
	int err;
};

/* Checks a root key (from the journal or the clean section) and keeps it. */
static int fs_take_root(struct tfs_fs *fs, unsigned id, unsigned level, const struct tfs_bkey *k,
			size_t max_bytes, const char *where, u64 seq)
{
	struct printbuf err = PRINTBUF;
	int ret;

	if (id >= TFS_BTREE_NR) {
		fprintf(stderr, "%s %llu: root of unknown btree %u\n", where,
			(unsigned long long)seq, id);
		return -TFS_ERR_btree_node_invalid;
	}
	ret = tfs_bkey_validate(k, max_bytes, id, true, &err);
	if (!ret && !((k->type == TFS_BKEY_deleted && !level) ||
		      (k->type == TFS_BKEY_btree_ptr &&
		       ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level == level))) {
		prt_printf(&err, "root key of type %s at level %u", tfs_bkey_type_str(k->type),
			   level);
		ret = -TFS_ERR_btree_node_invalid;
	}
	if (!ret && k->type == TFS_BKEY_btree_ptr) {
		const struct tfs_btree_ptr *p = tfs_bkey_val(k);

		for (unsigned i = 0; i < p->nr_ptrs && !ret; i++) {
			unsigned dev = le32_to_cpu(p->ptrs[i].dev);
			u64 off = le64_to_cpu(p->ptrs[i].offset);

			if (dev >= fs->nr_devices ||
			    (fs->devs[dev].present &&
			     (off % fs->block_size ||
			      off + fs->node_size > fs->devs[dev].bdev->size))) {
				prt_printf(&err, "root pointer %u:0x%llx outside the member", dev,
					   (unsigned long long)off);
				ret = -TFS_ERR_btree_node_invalid;
			}
		}
	}
	if (ret) {
		fprintf(stderr, "%s %llu: root of btree %s: %s\n", where, (unsigned long long)seq,
			tfs_btree_id_str(id), printbuf_str(&err));
		printbuf_exit(&err);
		return ret;
	}
	printbuf_exit(&err);
	tfs_bkey_copy(&fs->btrees[id].root_key, k);
	fs->btrees[id].have_root_key = true;
	return 0;
}

static int replay_root_entry(void *ctx, u64 seq, const struct jset_entry *e)
{
	struct replay_ctx *rc = ctx;
	const struct tfs_bkey *k = (const void *)e->_data;
	int ret;

	if (e->type != TFS_JSET_ENTRY_btree_root)
		return 0;
	ret = fs_take_root(rc->fs, e->btree_id, e->level, k, (size_t)le16_to_cpu(e->u64s) * 8,
			   "journal seq", seq);
	if (ret)
		return ret;
	rc->have_root[e->btree_id] = true;
	rc->root_seq = seq;
	return 0;
}

static int fs_find_roots(struct tfs_fs *fs, const struct tfs_journal_read *r, struct replay_ctx *rc)
{
	static const struct tfs_journal_replay_ops ops = { .entry = replay_root_entry };
	unsigned found = 0;
	int ret = 0;

	if (r && r->newest_seq) {
		ret = tfs_journal_replay(r, &ops, rc);
		if (ret)
			return ret;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		found += rc->have_root[id];

	/* The clean section: roots as of a clean stop (the journal's are newer if any). */
	for (unsigned i = 0; i < fs->nr_devices && found < TFS_BTREE_NR; i++) {
		const struct tfs_sb *sb = fs->devs[i].present ? fs->devs[i].sb.sb : NULL;
		struct tfs_sb_field_clean *clean;
		struct tfs_clean_entry *e;

		if (!sb || !(le16_to_cpu(sb->flags) & TFS_SB_FLAG_CLEAN) ||
		    !(clean = tfs_sb_clean(sb)))
			continue;
		for_each_clean_entry(clean, e)
		{
			if (e->type != TFS_CLEAN_btree_root || e->btree_id >= TFS_BTREE_NR ||
			    rc->have_root[e->btree_id])
				continue;
			ret = fs_take_root(fs, e->btree_id, e->level, (const void *)e->_data,
					   ((size_t)le16_to_cpu(e->u64s) - 1) * 8,
					   "clean section, journal seq",
					   le64_to_cpu(clean->journal_seq));
			if (ret)
				return ret;
			rc->have_root[e->btree_id] = true;
			found++;
		}
		break;
	}

	if (fs->opts.format) {
		if (found) {
			fprintf(stderr, "%s: already holds btrees (format refused)\n",
				fs->devs[0].path);
			return -TFS_ERR_invalid_argument;
		}
		/* Empty trees: a deleted root key, no node on disk until the first write-back. */
		for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
			tfs_bkey_init(&fs->btrees[id].root_key, TFS_BKEY_deleted, TFS_POS_MAX, 0);
			fs->btrees[id].have_root_key = true;
		}
		return 0;
	}
	if (found < TFS_BTREE_NR) {
		for (unsigned id = 0; id < TFS_BTREE_NR; id++)
			if (!rc->have_root[id])
				fprintf(stderr,
					"btree %s: no root in the journal or the clean section: "
					"filesystem not initialized (run mkfs.tinyfs)\n",
					tfs_btree_id_str(id));
		return -TFS_ERR_fs_not_initialized;
	}
	return 0;
}

/* Reads every interior node below n (leaves are read when first needed). */
static int fs_read_interior(struct tfs_btree *b, struct tfs_bnode *n)
{
	for (unsigned i = 0; n->level >= 2 && i < n->nr_keys; i++) {
		struct tfs_bnode *c = n->child[i];
		int ret = c ? 0 : tfs_btree_read_child(b, n, i, &c);

		if (!ret)
			ret = fs_read_interior(b, c);
		if (ret)
			return ret;
	}
	return 0;
}

static void fs_lost_leaf(void *ctx, const struct tfs_btree_lost_leaf *l);

/*
 * fsck's open (opts.replace_lost_leaves): a root that cannot be read or
 * trusted (err) becomes an empty root leaf, as any lost leaf
 * (tfs_btree_replace_bad_leaves()); an interior root too: the whole tree is
 * lost (its keys are below it), said as the lost node over the whole key
 * range; the old copies are freed by the first write-back.  True when
 * replaced.  The alloc btree's too (its keys are rebuilt: fs_alloc_rebuild()).
 */
static bool fs_lost_root(struct tfs_fs *fs, struct tfs_btree *b, int err)
{
	const struct tfs_btree_ptr *p = tfs_bkey_val(&b->root_key.k);
	struct tfs_btree_lost_leaf l = {
		.id = b->id,
		.level = p->level,
		.err = err,
		.min_key = TFS_POS_MIN,
		.max_key = TFS_POS_MAX,
	};

	if (!fs->opts.replace_lost_leaves || (!tfs_err_matches(err, TFS_ERR_btree_node_read) &&
					      !tfs_err_matches(err, TFS_ERR_btree_node_invalid)))
		return false;
	tfs_btree_ptr_key_loc(&b->root_key.k, &l.loc);
	if (tfs_btree_loc_on_missing(fs, &l.loc))
		return false; /* away, not lost */
	b->root = tfs_btree_new_root_leaf(b);
	if (!b->root)
		return false; /* the open fails with the read's error */
	if (l.loc.nr)
		tfs_btree_pending_free_add(b, &l.loc);
	b->nr_keys_known = false;
	fs_lost_leaf(fs, &l);
	return true;
}

/* Drops n and what is under it in memory; the copies the durable tree reaches wait. */
static void fs_drop_subtree(struct tfs_btree *b, struct tfs_bnode *n)
{
	for (unsigned i = 0; n->level && i < n->nr_keys; i++) {
		if (n->child[i]) {
			fs_drop_subtree(b, n->child[i]);
			n->child[i] = NULL;
		} else {
			struct tfs_btree_loc loc;

			tfs_btree_ptr_key_loc(tfs_bnode_key(n, i), &loc);
			if (loc.nr)
				tfs_btree_pending_free_add(b, &loc);
		}
	}
	tfs_bnode_drop_locked(b, n);
}

/*
 * The first interior child not read (fs_read_interior() stopped at it): its
 * parent and index.  False when every interior node is in memory.
 */
static bool fs_unread_child(struct tfs_bnode *n, struct tfs_bnode **parent, unsigned *idx)
{
	for (unsigned i = 0; n->level >= 2 && i < n->nr_keys; i++) {
		if (!n->child[i]) {
			*parent = n;
			*idx = i;
			return true;
		}
		if (fs_unread_child(n->child[i], parent, idx))
			return true;
	}
	return false;
}

/*
 * fsck's open (opts.replace_lost_leaves): an interior node of the alloc
 * btree below the root that no copy of reads or verifies (err).  Every
 * alloc key can be rebuilt (fs_alloc_rebuild_lost(), then fsck's
 * allocation check), so the whole alloc btree becomes one empty root leaf,
 * said as the lost node over the whole key range.  Every copy the durable
 * tree reaches and the open knows of (the nodes read, the pointers in
 * them, the lost node's) waits on pending_free, marked used until the new
 * tree is durable; the nodes under the lost one cannot be found, and
 * nothing reaches them once it is lost: handing them out is harmless.
 * True when replaced.
 */
static bool fs_lost_alloc_tree(struct tfs_fs *fs, struct tfs_btree *b, int err)
{
	struct tfs_btree_lost_leaf l = {
		.id = b->id,
		.err = err,
		.min_key = TFS_POS_MIN,
		.max_key = TFS_POS_MAX,
	};
	struct tfs_bnode *root, *parent;
	unsigned idx;

	if (!fs->opts.replace_lost_leaves || b->id != TFS_BTREE_alloc ||
	    (!tfs_err_matches(err, TFS_ERR_btree_node_read) &&
	     !tfs_err_matches(err, TFS_ERR_btree_node_invalid)) ||
	    !fs_unread_child(b->root, &parent, &idx))
		return false;
	l.level = parent->level - 1;
	tfs_btree_ptr_key_loc(tfs_bnode_key(parent, idx), &l.loc);
	if (tfs_btree_loc_on_missing(fs, &l.loc))
		return false; /* a missing member: away */
	root = tfs_btree_new_root_leaf(b);
	if (!root)
		return false; /* the open fails with the read's error */
	tfs_btree_lock_exclusive(b);
	fs_drop_subtree(b, b->root);
	b->root = root;
	b->nr_keys_known = false;
	tfs_btree_unlock_exclusive(b);
	fs_lost_leaf(fs, &l);
	return true;
}

/*
 * fsck's open (opts.replace_lost_leaves): an interior node below the root
 * of another tree that no copy of reads or verifies (err; the first
 * fs_read_interior() did not read).  Its keys derive from nothing, so only
 * its range goes: it is replaced by an empty subtree of its height
 * (tfs_btree_replace_lost_child_locked(), as a lost leaf by an empty leaf),
 * said as the lost node over its range; the rest of the tree stays.  True
 * when replaced (the caller reads the interior nodes again).
 */
static bool fs_lost_interior(struct tfs_fs *fs, struct tfs_btree *b, int err)
{
	struct tfs_bnode *parent;
	struct tfs_btree_loc loc;
	unsigned idx;
	int ret;

	if (!fs->opts.replace_lost_leaves || b->id == TFS_BTREE_alloc ||
	    (!tfs_err_matches(err, TFS_ERR_btree_node_read) &&
	     !tfs_err_matches(err, TFS_ERR_btree_node_invalid)) ||
	    !fs_unread_child(b->root, &parent, &idx))
		return false;
	tfs_btree_ptr_key_loc(tfs_bnode_key(parent, idx), &loc);
	if (tfs_btree_loc_on_missing(fs, &loc))
		return false; /* away, not lost */
	tfs_btree_lock_exclusive(b);
	ret = tfs_btree_replace_lost_child_locked(b, parent, idx, err, fs_lost_leaf, fs);
	tfs_btree_unlock_exclusive(b);
	return !ret; /* ENOMEM: the open fails with the read's error */
}

/* Builds each tree from its root key: an empty root leaf, or the nodes on disk. */
static int fs_read_roots(struct tfs_fs *fs)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];
		int ret;

		if (b->root_key.k.type == TFS_BKEY_deleted) {
			b->root = tfs_btree_new_root_leaf(b);
			if (!b->root)
				return -ENOMEM;
			b->nr_keys_known = true;
			continue;
		}
		ret = tfs_btree_read_node(b, &b->root_key.k, TFS_POS_MIN, &b->root);
		for (unsigned t = 0;
		     ret && fs->opts.replace_lost_leaves && tfs_btree_read_again(b, ret, t); t++)
			ret = tfs_btree_read_node(b, &b->root_key.k, TFS_POS_MIN, &b->root);
		if (ret && fs_lost_root(fs, b, ret))
			continue;
		if (ret)
			return ret;
		__atomic_add_fetch(&b->nr_nodes[b->root->level], 1, __ATOMIC_RELAXED);
		/* Each lost interior node replaced, the walk goes on past it. */
		do {
			ret = fs_read_interior(b, b->root);
			for (unsigned t = 0;
			     ret && fs->opts.replace_lost_leaves && tfs_btree_read_again(b, ret, t);
			     t++)
				ret = fs_read_interior(b, b->root);
		} while (ret && fs_lost_interior(fs, b, ret));
		if (ret && fs_lost_alloc_tree(fs, b, ret))
			continue;
		if (ret)
			return ret;
	}
	return 0;
}

/* A node replaced at open: recorded for fsck (without memory it is said here only). */
static void fs_lost_leaf(void *ctx, const struct tfs_btree_lost_leaf *l)
{
	struct tfs_fs *fs = ctx;
	struct tfs_btree_lost_leaf *n =
		realloc(fs->lost_leaves, (fs->nr_lost_leaves + 1) * sizeof(*n));

	if (l->id == TFS_BTREE_alloc)
		fs->nr_lost_alloc_leaves++;
	if (n) {
		fs->lost_leaves = n;
		n[fs->nr_lost_leaves++] = *l;
	}
}

/*
 * fsck's open (opts.replace_lost_leaves): after a step of the open failed
 * on a leaf it could not read or trust (err: replay walking into it, the
 * inode scan reading the last inodes leaf, the orphans), every such leaf
 * of every tree is replaced by an empty one, and the step is run again
 * (replay is idempotent).  Only then: an undamaged open reads no more than
 * before (walking every tree here, with the journal still read into
 * memory, took 2.3 times the memory of fsck -n).  The alloc btree only
 * before the allocator is built (with_alloc: replay): once it is, a leaf
 * of it lost is no longer safe to replace (what it marked may be handed
 * out).  True when it replaced leaves and the step should run again; *ret
 * the error when the walk failed.
 */
static bool fs_replace_lost_leaves(struct tfs_fs *fs, int *ret, bool with_alloc)
{
	unsigned nr = 0;

	if (!fs->opts.replace_lost_leaves || (!tfs_err_matches(*ret, TFS_ERR_btree_node_read) &&
					      !tfs_err_matches(*ret, TFS_ERR_btree_node_invalid)))
		return false;
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		int r;

		if (id == TFS_BTREE_alloc && !with_alloc)
			continue;
		r = tfs_btree_replace_bad_leaves(fs, id, fs_lost_leaf, fs);
		if (r < 0) {
			*ret = r;
			return false;
		}
		nr += (unsigned)r;
	}
	if (nr)
		fprintf(stderr,
			"replaced %u lost btree node(s) with empty ones (fsck); opening again\n",
			nr);
	return nr > 0;
}

/* --- the allocator's rebuild --- */

static void fs_mark_loc(struct tfs_fs *fs, enum tfs_btree_id id, unsigned level,
			const struct tfs_btree_loc *loc)
{
	for (unsigned r = 0; r < loc->nr; r++) {
		struct tfs_alloc_run run = {
			.dev = loc->ptrs[r].dev,
			.offset = loc->ptrs[r].offset,
			.len = fs->node_size,
		};
		int ret;

		if (run.dev < fs->nr_devices && !fs->alloc.devs[run.dev].bits)
			continue; /* a missing member: nothing is allocated there */
		ret = tfs_alloc_mark_used(fs, &run);

		if (ret) {
			struct printbuf name = PRINTBUF;
			struct tfs_btree_loc one = { .nr = 1 };

			one.ptrs[0] = loc->ptrs[r];
			tfs_btree_node_loc_to_text(&name, fs, id, level, &one);
			fprintf(stderr, "%s: %s (space accounting)\n", printbuf_str(&name),
				ret == -EEXIST ? "space referenced twice" : "outside usable space");
			printbuf_exit(&name);
		}
	}
}

static void fs_mark_tree(struct tfs_fs *fs, struct tfs_btree *b, struct tfs_bnode *n)
{
	fs_mark_loc(fs, b->id, n->level, &n->disk);
	for (unsigned i = 0; n->level && i < n->nr_keys; i++) {
		if (n->child[i]) {
			fs_mark_tree(fs, b, n->child[i]);
		} else {
			struct tfs_btree_loc loc;

			tfs_btree_ptr_key_loc(tfs_bnode_key(n, i), &loc);
			fs_mark_loc(fs, b->id, n->level - 1, &loc);
		}
	}
}

/* Marks run used, also where some of its blocks already are (a union); outside: fsck's. */
static void fs_mark_union(struct tfs_fs *fs, unsigned dev, u64 offset, u64 len)
{
	struct tfs_alloc_run run = { .dev = dev, .offset = offset, .len = len };

	if (tfs_alloc_mark_used(fs, &run) != -EEXIST)
		return;
	for (u64 b = 0; b < len; b += fs->block_size) {
		struct tfs_alloc_run one = { .dev = dev,
					     .offset = offset + b,
					     .len = fs->block_size };

		tfs_alloc_mark_used(fs, &one); /* a block marked already stays so */
	}
}

static int fs_mark_node_union(void *ctx, const struct tfs_btree_ptr *ptr)
{
	struct tfs_fs *fs = ctx;

	for (unsigned i = 0; i < ptr->nr_ptrs; i++)
		fs_mark_union(fs, le32_to_cpu(ptr->ptrs[i].dev), le64_to_cpu(ptr->ptrs[i].offset),
			      fs->node_size);
	return 0;
}

/*
 * Alloc leaves were lost (replaced by empty ones): the alloc keys they held
 * marked file data and other trees' nodes the allocator would now hand out
 * again.  So everything that uses space is marked from the other trees, as
 * bcachefs's fsck rebuilds allocation info from them: every replica of
 * every extent (every extents leaf is read; a lost one is replaced, its
 * data then used by nothing) and every copy of every node of every tree
 * (open read their interior nodes; the nodes dropped since the durable
 * tree, replaced leaves' old copies, too).  The alloc btree's own nodes are
 * marked from its pointers already, the journal buckets by tfs_alloc_init();
 * the superblocks and their layout lie before first_bucket, outside the
 * allocator.  Marked as a union with the keys that survived: a block may be
 * marked by both.  fsck then rewrites the alloc keys and counters from the
 * same extents and nodes.
 */
static int fs_alloc_rebuild_lost(struct tfs_fs *fs)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 extents = 0;
	int ret = 0;

	if (fs->opts.replace_lost_leaves) {
		ret = tfs_btree_replace_bad_leaves(fs, TFS_BTREE_extents, fs_lost_leaf, fs);
		if (ret < 0)
			return ret;
		ret = 0;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR && !ret; id++)
		if (id != TFS_BTREE_alloc)
			ret = tfs_btree_node_locations(fs, id, fs_mark_node_union, fs);
	if (ret)
		return ret;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_extents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_extent *x = tfs_bkey_val(k);

		if (k->type != TFS_BKEY_extent)
			continue; /* inline data: no space */
		for (unsigned i = 0; i < x->nr_ptrs; i++)
			fs_mark_union(fs, le32_to_cpu(x->ptrs[i].dev),
				      le64_to_cpu(x->ptrs[i].offset),
				      (u64)le32_to_cpu(x->nr_blocks) * fs->block_size);
		extents++;
	}
	tfs_btree_iter_exit(&iter);
	if (fs->nr_lost_alloc_leaves)
		fprintf(stderr, "btree alloc: %u node(s) lost: ", fs->nr_lost_alloc_leaves);
	else
		fprintf(stderr, "btree alloc: the repair of lost leaves was not finished (rebuild "
				"marker): ");
	fprintf(stderr, "space in use marked from %llu extent(s) and every btree's nodes%s\n",
		(unsigned long long)extents,
		ret ? "; reading the extents failed (tinyfs fsck replaces a lost leaf)"
		    : " (tinyfs fsck -y rewrites the alloc keys)");
	return ret;
}

/*
 * Everything that references space, from the alloc btree alone (fs/alloc.h):
 * its own nodes (of the durable tree, and those replay dropped, which it
 * still refers to), from its node pointers, and the alloc keys, user (file
 * data) and btree (every other tree's nodes).  No other tree is walked and
 * no extents leaf is read, unless alloc leaves were lost (fsck's open,
 * opts.replace_lost_leaves: the alloc btree, read whole here anyway, is
 * first walked for them) or their repair was not finished (the rebuild
 * marker, fs/fs_format.h: a crash during fsck -y, or fsck left some alloc
 * key wrong): then fs_alloc_rebuild_lost().
 */
static int fs_alloc_rebuild(struct tfs_fs *fs)
{
	struct tfs_btree *b = &fs->btrees[TFS_BTREE_alloc];
	int ret;

	if (fs->opts.replace_lost_leaves) {
		ret = tfs_btree_replace_bad_leaves(fs, TFS_BTREE_alloc, fs_lost_leaf, fs);
		if (ret < 0)
			return ret;
	}
	fs_mark_tree(fs, b, b->root);
	for (unsigned i = 0; i < b->pending_free.nr; i++)
		fs_mark_loc(fs, TFS_BTREE_alloc, 0, &b->pending_free.locs[i]);
	ret = tfs_alloc_keys_load(fs);
	if (!ret && !fs->nr_lost_alloc_leaves) {
		struct tfs_bkey_buf kb;

		ret = tfs_btree_lookup(fs, TFS_BTREE_alloc, TFS_ALLOC_REBUILD_POS, &kb);
		fs->alloc_rebuild_pending = !ret;
		ret = ret == -ENOENT ? 0 : ret;
	}
	if (!ret && (fs->nr_lost_alloc_leaves || fs->alloc_rebuild_pending))
		ret = fs_alloc_rebuild_lost(fs);
	return ret;
}

/* --- replay --- */

/*
 * A key replayed at pos of btree id: recorded when pos is in the range of
 * a lost interior node (fs->lost_replayed).  Its deletion replayed into the
 * empty subtree removes nothing, and the salvage would find the key again
 * in the leaf the journal deleted it from.
 */
static int replayed_in_lost(struct tfs_fs *fs, unsigned id, struct tfs_bpos pos)
{
	for (unsigned i = 0; i < fs->nr_lost_leaves; i++) {
		const struct tfs_btree_lost_leaf *l = &fs->lost_leaves[i];

		if (!l->level || l->id != id || tfs_bpos_cmp(pos, l->min_key) < 0 ||
		    tfs_bpos_cmp(pos, l->max_key) > 0)
			continue;
		if (fs->nr_lost_replayed == fs->size_lost_replayed) {
			size_t size = fs->size_lost_replayed ? fs->size_lost_replayed * 2 : 256;
			struct tfs_replayed_pos *n = realloc(fs->lost_replayed, size * sizeof(*n));

			if (!n)
				return -ENOMEM;
			fs->lost_replayed = n;
			fs->size_lost_replayed = size;
		}
		fs->lost_replayed[fs->nr_lost_replayed++] =
			(struct tfs_replayed_pos){ .id = id, .pos = pos };
		break;
	}
	return 0;
}

static int replay_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *key)
{
	struct replay_ctx *rc = ctx;
	struct tfs_fs *fs = rc->fs;
	const struct tfs_bkey *k = (const void *)key;
	struct printbuf err = PRINTBUF;
	int ret;

	if (btree_id >= TFS_BTREE_NR || level) {
		fprintf(stderr,
			"journal seq %llu: keys for btree %u level %u (not a leaf of a "
			"known btree)\n",
			(unsigned long long)seq, btree_id, level);
		return -TFS_ERR_bkey_invalid;
	}
	ret = tfs_bkey_validate(k, (size_t)tfs_jkey_u64s(key) * 8, btree_id, true, &err);
	if (!ret && k->type == TFS_BKEY_btree_ptr) {
		prt_str(&err, "btree_ptr in a leaf");
		ret = -TFS_ERR_bkey_invalid;
	}
	if (ret) {
		fprintf(stderr, "journal seq %llu: btree %s: %s\n", (unsigned long long)seq,
			tfs_btree_id_str(btree_id), printbuf_str(&err));
		printbuf_exit(&err);
		return ret;
	}
	printbuf_exit(&err);

	struct tfs_btree *b = &fs->btrees[btree_id];

	ret = tfs_btree_insert_split_locked(b, k)
		      ?: replayed_in_lost(fs, btree_id, tfs_bkey_pos(k));
	if (ret)
		return ret;
	b->c.keys_replayed++;
	if (!rc->min_seq[btree_id])
		rc->min_seq[btree_id] = seq;
	if (seq > rc->max_seq[btree_id])
		rc->max_seq[btree_id] = seq;
	rc->nr_keys++;
	return 0;
}

/*
 * The check of a post-flush entry's window (tfs_journal_read_verify_tail()):
 * a written extent's data on every member here must match its checksums.
 * Data is written copy-on-write, before the commit inserting its extent,
 * to space no settled state refers to (fs/alloc.c), so when the entry's
 * flush completed every such block reads back as its key says; a block
 * that does not was lost with that flush.  A missing member is skipped: its
 * copy was flushed before the window (journal_post_flush_ok()).  A read
 * error proves nothing: it fails the open.
 */
static int fs_verify_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *key)
{
	struct tfs_fs *fs = ctx;
	const struct tfs_bkey *k = (const void *)key;
	struct printbuf err = PRINTBUF;
	const struct tfs_extent *v;
	const __le32 *csums;
	u32 bs = fs->block_size, nb;
	int ret = 0;

	if (btree_id != TFS_BTREE_extents || level)
		return 0;
	/* Tests: replay without the check (what a power cut then leaves). */
	if (tfs_fault("replay:skip_data_check"))
		return 0;
	/* An invalid key is replay's to report. */
	if (tfs_bkey_validate(k, (size_t)tfs_jkey_u64s(key) * 8, btree_id, true, &err) ||
	    k->type != TFS_BKEY_extent) {
		printbuf_exit(&err);
		return 0;
	}
	printbuf_exit(&err);
	v = tfs_bkey_val(k);
	if (v->flags & TFS_EXTENT_UNWRITTEN)
		return 0;
	nb = le32_to_cpu(v->nr_blocks);
	csums = tfs_extent_csums(v);
	for (unsigned i = 0; i < v->nr_ptrs && !ret; i++) {
		unsigned dev = le32_to_cpu(v->ptrs[i].dev);
		u64 off = le64_to_cpu(v->ptrs[i].offset);
		struct tfs_bdev *bdev;
		u8 *buf;

		if (dev >= fs->nr_devices || !fs->devs[dev].present)
			continue;
		bdev = fs->devs[dev].bdev;
		buf = tfs_bdev_alloc_buf(bdev, (size_t)nb * bs);
		if (!buf)
			return -ENOMEM;
		int r = tfs_bdev_read(bdev, buf, (size_t)nb * bs, off, TFS_TAG_data);

		fs->post_flush_check_bytes += (u64)nb * bs;
		if (r) {
			/* No evidence either way: the open fails, as for any read it needs. */
			fprintf(stderr,
				"journal seq %llu: reading the data of inode %llu block %llu on member "
				"%u to check a post-flush entry: %s\n",
				(unsigned long long)seq, (unsigned long long)le64_to_cpu(k->inode),
				(unsigned long long)le64_to_cpu(k->offset), dev, tfs_err_str(r));
			free(buf);
			return -TFS_ERR_data_read;
		}
		for (u32 b = 0; b < nb && !ret; b++)
			if (tfs_crc32c(0, buf + (size_t)b * bs, bs) != le32_to_cpu(csums[b])) {
				fprintf(stderr,
					"journal seq %llu: inode %llu block %llu on member %u does not "
					"match its checksum\n",
					(unsigned long long)seq,
					(unsigned long long)le64_to_cpu(k->inode),
					(unsigned long long)(le64_to_cpu(k->offset) + b), dev);
				ret = 1;
			}
		free(buf);
	}
	return ret;
}

static int fs_replay(struct tfs_fs *fs, const struct tfs_journal_read *r, struct replay_ctx *rc)
{
	static const struct tfs_journal_replay_ops ops = { .key = replay_key };
	int ret;

	if (!r || !r->newest_seq)
		return 0;
	ret = tfs_journal_replay(r, &ops, rc);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree *b = &fs->btrees[id];

		b->max_journal_seq = rc->max_seq[id];
		if (b->root)
			b->root->journal_seq = max_t(u64, b->root->journal_seq, rc->max_seq[id]);
	}
	fs->journal_seq_at_open = r->newest_seq;
	if (fs->opts.verbose)
		printf("replayed %llu keys from journal seqs %llu..%llu\n",
		       (unsigned long long)rc->nr_keys, (unsigned long long)r->last_seq,
		       (unsigned long long)r->newest_seq);
	return ret;
}

/* --- starting --- */

static int fs_clear_clean(struct tfs_fs *fs)
{
	struct tfs_sb_handle *hs[TFS_MAX_DEVICES];
	struct printbuf err = PRINTBUF;
	unsigned nr = 0;
	bool clean = false;
	int ret;

	for (unsigned i = 0; i < fs->nr_devices; i++)
		if (fs->devs[i].present) {
			hs[nr++] = &fs->devs[i].sb;
			clean |= !!(le16_to_cpu(fs->devs[i].sb.sb->flags) & TFS_SB_FLAG_CLEAN);
		}
	if (!clean)
		return 0;
	/* Before the first journal write: a clean section must never be older than the journal. */
	for (unsigned i = 0; i < nr; i++)
		tfs_sb_clear_clean(hs[i]);
	ret = tfs_sb_write_all(hs, nr, &err);
	if (ret)
		fprintf(stderr, "clearing the clean flag: %s\n", printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}

static int fs_start_journal(struct tfs_fs *fs, struct tfs_journal_dev *jd, unsigned nr,
			    const struct tfs_journal_read *r, struct replay_ctx *rc)
{
	struct printbuf err = PRINTBUF;
	int ret;

	ret = tfs_journal_init(&fs->j, jd, nr, &fs->jopts, &err);
	if (ret) {
		fprintf(stderr, "%s\n", printbuf_str(&err));
		printbuf_exit(&err);
		return ret;
	}
	printbuf_exit(&err);
	ret = tfs_journal_start(fs->j, r);
	if (ret)
		return ret;
	/* The replayed keys are pinned by their trees before replay's own references go. */
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (rc->min_seq[id])
			tfs_journal_pin_add(fs->j, rc->min_seq[id], &fs->btrees[id].pin,
					    tfs_btree_pin_flush);
	/*
	 * The roots' pin: at the newest root entry of the replay range, where
	 * there is one (after a crash the journal may have room only for
	 * reclaim's own entries: nothing is written before replay is done);
	 * else (format, roots from the clean section) a new root entry.
	 */
	if (rc->root_seq && r && rc->root_seq >= r->last_seq) {
		tfs_journal_pin_add(fs->j, rc->root_seq, &fs->roots_pin, tfs_btree_roots_pin_flush);
		fs->roots_seq = rc->root_seq;
	} else {
		ret = tfs_btree_log_roots(fs, TFS_TRANS_RESERVED, NULL);
		if (ret)
			return ret;
	}
	tfs_journal_replay_done(fs->j);
	if (fs->opts.format)
		return tfs_journal_flush(fs->j);
	/*
	 * A replay that ended at an unsettled (post-flush) entry settles it
	 * before anything can reuse the space its window freed: else a crash
	 * now could make the next replay drop it, an acknowledged fsync.  The
	 * seqs up to the newest read are not ours to flush (some untrusted):
	 * a new roots entry is the flush entry after it.
	 */
	if (r && tfs_journal_settled_seq_ondisk(fs->j) < r->newest_seq)
		ret = tfs_btree_log_roots(fs, TFS_TRANS_RESERVED, NULL) ?: tfs_journal_flush(fs->j);
	return ret;
}

static void fs_free(struct tfs_fs *fs)
{
	tfs_fs_key_cache_exit(fs); /* key cache hook: its pins go before the journal */
	if (fs->j) {
		for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
			tfs_journal_pin_drop(fs->j, &fs->btrees[id].pin);
			tfs_journal_pin_drop(fs->j, &fs->btrees[id].ckpt_pin);
		}
		tfs_journal_pin_drop(fs->j, &fs->roots_pin);
	}
	tfs_journal_exit(fs->j);
	fs->j = NULL;
	tfs_btrees_exit(fs);
	if (fs->cache.node_bytes)
		tfs_btree_cache_exit(fs);
	if (fs->alloc.block_size)
		tfs_alloc_exit(fs);
	for (unsigned i = 0; i < TFS_MAX_DEVICES; i++) {
		struct tfs_fs_dev *d = &fs->devs[i];

		tfs_sb_exit(&d->sb);
		if (d->lock_fd >= 0)
			close(d->lock_fd);
		free(d->path);
		free(d->journal_buckets);
	}
	pthread_mutex_destroy(&fs->roots_lock);
	free(fs->lost_leaves);
	free(fs->lost_replayed);
	free(fs);
}

int tfs_fs_open(const char *const *devs, unsigned nr, const struct tfs_fs_opts *opts,
		struct tfs_fs **ret_fs)
{
	struct tfs_journal_dev jd[TFS_JOURNAL_MAX_DEVS];
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	struct replay_ctx rc = { 0 };
	struct tfs_fs *fs;
	unsigned nr_jd = 0;
	int ret;

	*ret_fs = NULL;
	if (tfs_fault("init:fs_alloc"))
		return -TFS_ERR_ENOMEM_fault_injected;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	if (opts)
		fs->opts = *opts;
	else
		tfs_fs_opts_default(&fs->opts);
	fs->read_only = fs->opts.read_only;
	pthread_mutex_init(&fs->roots_lock, NULL);
	tfs_journal_pin_init(&fs->roots_pin);
	for (unsigned i = 0; i < TFS_MAX_DEVICES; i++)
		fs->devs[i].lock_fd = -1;
	rc.fs = fs;

	ret = fs_open_devs(fs, devs, nr) ?: fs_geometry(fs) ?: fs_journal_devs(fs, jd, &nr_jd);
	if (ret)
		goto err;
	if (!nr_jd) {
		fprintf(stderr, "%s: no member has a journal\n", fs->devs[0].path);
		ret = -TFS_ERR_invalid_sb_journal;
		goto err;
	}
	ret = tfs_journal_read(jd, nr_jd, &fs->jopts, &r, &err);
	/* A post-flush newest entry counts only if its window's data is on disk. */
	if (!ret)
		ret = tfs_journal_read_verify_tail(r, fs_verify_key, fs, &err);
	if (r) {
		fs->post_flush_dropped = r->post_flush_dropped;
		fs->post_flush_verified = r->post_flush_verified;
	}
	if (ret == -TFS_ERR_journal_empty) {
		ret = 0;
	} else if (ret) {
		fprintf(stderr, "reading the journal: %s%s%s\n", tfs_err_str(ret),
			err.pos ? ": " : "", printbuf_str(&err));
		goto err;
	}
	fs->next_node_seq = (r ? r->max_seq : 0) << 20 | 1;
	fs->node_seq_at_open = fs->next_node_seq;
	ret = tfs_btrees_init(fs) ?: tfs_btree_cache_init(fs) ?: tfs_alloc_init(fs)
		?: fs_find_roots(fs, r, &rc) ?: fs_read_roots(fs);
	if (!ret) {
		/* Every root is read: a lost leaf met now can be replaced. */
		ret = fs_replay(fs, r, &rc);
		if (fs_replace_lost_leaves(fs, &ret, true))
			ret = fs_replay(fs, r, &rc);
	}
	ret = ret ?: fs_alloc_rebuild(fs);
	if (ret)
		goto err;
	if (!fs->read_only) {
		/* Before the first write: a failed open changes nothing on disk. */
		ret = tfs_fault("init:fs_start") ? -TFS_ERR_fault_injected : 0;
		ret = ret ?: fs_clear_clean(fs) ?: fs_start_journal(fs, jd, nr_jd, r, &rc)
			?: tfs_fs_key_cache_init(fs) /* key cache hook */
			?: tfs_fsck_split_writeback(fs); /* node space a crash left wrong */
		if (ret)
			goto err;
	}
	/* The POSIX layer: its inode table, crash leftovers (orphans); mkfs's root directory. */
	ret = tfs_posix_init(fs);
	if (fs_replace_lost_leaves(fs, &ret, false))
		ret = tfs_posix_init(fs);
	if (!ret && fs->opts.format) {
		ret = tfs_posix_format(fs);
		if (ret)
			tfs_posix_exit(fs);
	}
	if (ret)
		goto err;
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	__atomic_store_n(&fs->opened, true, __ATOMIC_RELEASE);
	*ret_fs = fs;
	return 0;
err:
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	fs_free(fs);
	return ret;
}

void tfs_fs_node_inconsistent(struct tfs_fs *fs, const char *what)
{
	/* During open the open fails instead (its caller says so), and may not halt yet. */
	if (!__atomic_load_n(&fs->opened, __ATOMIC_ACQUIRE))
		return;
	if (__atomic_exchange_n(&fs->node_inconsistent, true, __ATOMIC_ACQ_REL))
		return;
	tfs_posix_inconsistent(fs, what);
}

/*
 * The clean section: the roots (all durable: write-back just ran) and the
 * journal seq, on every member, written after the journal stopped.
 */
static int fs_write_clean(struct tfs_fs *fs)
{
	struct tfs_sb_handle *hs[TFS_MAX_DEVICES];
	struct printbuf err = PRINTBUF;
	__le64 entries[TFS_BTREE_NR * (1 + TFS_BKEY_U64s + 2 + 2 * TFS_BTREE_PTR_MAX_REPLICAS)];
	unsigned u64s = 0, nr = 0;
	int ret = 0;

	memset(entries, 0, sizeof(entries));
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		const struct tfs_bkey *k = &fs->btrees[id].root_key.k;
		struct tfs_clean_entry *e = (struct tfs_clean_entry *)(entries + u64s);

		e->u64s = cpu_to_le16((u16)(1 + tfs_bkey_u64s(k)));
		e->type = TFS_CLEAN_btree_root;
		e->btree_id = (u8)id;
		e->level = k->type == TFS_BKEY_btree_ptr
				   ? ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level
				   : 0;
		memcpy(e->_data, k, tfs_bkey_bytes(k));
		u64s += 1 + tfs_bkey_u64s(k);
	}
	for (unsigned i = 0; i < fs->nr_devices && !ret; i++)
		if (fs->devs[i].present) {
			hs[nr++] = &fs->devs[i].sb;
			ret = tfs_sb_set_clean(&fs->devs[i].sb, tfs_journal_cur_seq(fs->j), entries,
					       u64s);
		}
	/*
	 * Enough members with the clean section is a clean stop: a member
	 * whose write failed keeps its superblock without the clean flag
	 * (cleared at open, before the first journal write), so the next open
	 * replays the journal there -- never an old clean section.
	 */
	struct tfs_sb_write_res res = { .nr_written = 0 };

	if (!ret)
		ret = tfs_sb_write_members(hs, nr, fs->metadata_replicas_required, &res, &err);
	if (ret)
		fprintf(stderr, "writing the clean section: %s%s%s\n", tfs_err_str(ret),
			err.pos ? ": " : "", printbuf_str(&err));
	else if (err.pos)
		fprintf(stderr,
			"warning: writing the clean section: on %u of %u members (%u required): "
			"%s\n",
			res.nr_written, nr, fs->metadata_replicas_required, printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}

int tfs_fs_stop(struct tfs_fs *fs)
{
	int ret = 0, r;

	if (!fs)
		return 0;
	if (fs->posix_stop)
		ret = fs->posix_stop(fs);
	if (!fs->read_only && fs->j) {
		r = tfs_btree_write_all(fs);
		ret = ret ?: r;
		r = tfs_journal_stop(fs->j);
		ret = ret ?: r;
		/* Only a stop that wrote everything back is clean. */
		if (!ret)
			ret = fs_write_clean(fs);
	}
	fs_free(fs);
	return ret;
}

int tfs_fs_flush_seq(struct tfs_fs *fs, u64 seq)
{
	if (!seq)
		return 0;
	if (!fs->j)
		return -TFS_ERR_fs_read_only;
	return tfs_journal_flush_seq(fs->j, seq);
}

void tfs_fs_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	prt_str(out, "filesystem ");
	prt_uuid(out, fs->uuid);
	prt_printf(out, "%s\n", fs->read_only ? " (read-only)" : "");
	printbuf_indent_add(out, 2);
	prt_printf(out, "block size:\t%u\n", fs->block_size);
	prt_printf(out, "node size:\t%u\n", fs->node_size);
	prt_printf(out, "metadata replicas:\t%u (required %u)\n", fs->metadata_replicas,
		   fs->metadata_replicas_required);
	for (unsigned i = 0; i < fs->nr_devices; i++) {
		prt_printf(out, "member %u:\t", i);
		if (fs->devs[i].present)
			tfs_bdev_to_text(out, fs->devs[i].bdev);
		else
			prt_str(out, "missing");
		prt_newline(out);
	}
	if (fs->j)
		tfs_journal_to_text(out, fs->j);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		tfs_btree_to_text(out, fs, id);
	tfs_btree_cache_to_text(out, fs);
	if (fs->key_cache) /* key cache hook */
		tfs_btree_key_cache_to_text(out, fs->key_cache);
	tfs_alloc_to_text(out, fs);
	if (fs->posix)
		tfs_posix_to_text(out, fs);
	printbuf_indent_sub(out, 2);
}
