// SPDX-License-Identifier: GPL-2.0
/*
 * fsck (fs/fsck.h): one pass over each btree collecting what the
 * cross-checks need (inodes, the dirent graph, extents), then the checks,
 * then the repairs, each its own transaction through the POSIX layer's
 * inode locks, so a repair is journaled like any change.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/alloc.h"
#include "fs/alloc_types.h"
#include "fs/btree_internal.h"
#include "fs/btree_salvage.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "fs/fsck.h"
#include "fs/posix.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

struct fsck_ino {
	tfs_ino_t ino;
	u32 mode, nlink;
	u64 blocks, parent;
	u32 links; /* dirents naming it, + subdirectories' ".." (directories) */
	u64 ext_blocks;
	u64 end; /* end of its last extent (file blocks): overlap check */
	bool orphan, orphan_unlinked, reachable;
};

struct fsck_edge {
	tfs_ino_t dir, ino;
};

struct fsck_phys {
	u32 dev;
	u64 start, end; /* bytes [start, end) */
	tfs_ino_t ino;	/* 0: a btree node */
	u64 off;	/* an extent's file block; a node's btree id */
};

struct fsck {
	struct tfs_fs *fs;
	unsigned node_btree; /* the btree whose nodes node_loc() records */
	const struct tfs_fsck_opts *opts;
	struct tfs_fsck_result *res;
	struct fsck_ino *inodes;
	size_t nr_inodes, size_inodes;
	struct fsck_edge *edges;
	size_t nr_edges, size_edges;
	struct fsck_phys *phys;
	size_t nr_phys, size_phys;
	/*
	 * Members missing (a degraded open), what lies on them: node copies,
	 * extents with a copy there, extents with no copy elsewhere (and
	 * their blocks).  Said at the end as not checked.
	 */
	struct {
		u64 nodes, extents, only, only_blocks;
	} missing[TFS_MAX_DEVICES];
	/* Leaves replaced by empty ones (check_btrees()), said again once written. */
	struct tfs_btree_lost_leaf *lost;
	size_t nr_lost, size_lost;
	/* Node space: fs->ckpt_started at the compare; a repair met a write-back since. */
	u64 ckpt_started;
	bool raced;
	/* The alloc rebuild marker (fs/fs_format.h) is in the alloc btree. */
	bool alloc_marker;
};

static int grow(void **v, size_t *size, size_t nr, size_t elem)
{
	void *n;

	if (nr < *size)
		return 0;
	n = realloc(*v, (*size ? *size * 2 : 256) * elem);
	if (!n)
		return -ENOMEM;
	*v = n;
	*size = *size ? *size * 2 : 256;
	return 0;
}

__attribute__((format(printf, 2, 3))) static void fsck_say(struct fsck *c, const char *fmt, ...)
{
	struct printbuf buf = PRINTBUF;
	va_list args;

	if (c->opts->quiet)
		return;
	va_start(args, fmt);
	prt_vprintf(&buf, fmt, args);
	va_end(args);
	fprintf(stderr, "fsck: %s\n", printbuf_str(&buf));
	printbuf_exit(&buf);
}

#define fsck_err(c, ...)                  \
	do {                              \
		(c)->res->found++;        \
		fsck_say(c, __VA_ARGS__); \
	} while (0)

/* A repair's outcome: fixed (said), or left with the reason. */
static void fsck_fixed(struct fsck *c, int ret, const char *what, tfs_ino_t ino)
{
	if (!ret) {
		c->res->fixed++;
		fsck_say(c, "fixed: inode %llu: %s", (unsigned long long)ino, what);
	} else {
		c->res->left++;
		fsck_say(c, "not fixed: inode %llu: %s: %s", (unsigned long long)ino, what,
			 tfs_err_str(ret));
	}
}

static struct fsck_ino *fsck_ino(struct fsck *c, tfs_ino_t ino)
{
	size_t l = 0, r = c->nr_inodes;

	while (l < r) {
		size_t m = l + (r - l) / 2;

		if (c->inodes[m].ino == ino)
			return &c->inodes[m];
		if (c->inodes[m].ino < ino)
			l = m + 1;
		else
			r = m;
	}
	return NULL;
}

static bool may_repair(struct fsck *c)
{
	return c->opts->repair && !tfs_posix_writable(c->fs);
}

/* --- pass 1: nodes and keys --- */

/* Removes the key at pos of btree id (a key of nothing: no POSIX rule to keep). */
static int fsck_delete_key(struct fsck *c, enum tfs_btree_id id, struct tfs_bpos pos)
{
	struct tfs_btree_trans trans;
	int ret;

	tfs_posix_trans_init(&trans, c->fs);
	ret = tfs_trans_delete(&trans, id, pos) ?: tfs_posix_commit(&trans, NULL);
	tfs_trans_exit(&trans);
	return ret;
}

static void lost_leaf_to_text(struct printbuf *out, struct fsck *c,
			      const struct tfs_btree_lost_leaf *l)
{
	tfs_btree_node_loc_to_text(out, c->fs, l->id, l->level, &l->loc);
}

/*
 * A node replaced by an empty one (tfs_btree_replace_bad_leaves(), the
 * open's): said, kept for later.  An interior node: every key under it.
 */
static void lost_leaf(void *ctx, const struct tfs_btree_lost_leaf *l)
{
	struct fsck *c = ctx;
	struct printbuf buf = PRINTBUF;

	lost_leaf_to_text(&buf, c, l);
	prt_str(&buf, ": unreadable, keys ");
	tfs_bpos_to_text(&buf, l->min_key);
	prt_str(&buf, "..");
	tfs_bpos_to_text(&buf, l->max_key);
	prt_printf(&buf, " lost (%s%s)", l->level ? "an interior node, its whole subtree: " : "",
		   tfs_err_str(l->err));
	if (l->kept)
		prt_printf(&buf, "; %u newer key(s) of the key cache kept", l->kept);
	fsck_err(c, "%s", printbuf_str(&buf));
	printbuf_exit(&buf);
	if (!grow((void **)&c->lost, &c->size_lost, c->nr_lost, sizeof(*c->lost)))
		c->lost[c->nr_lost++] = *l;
}

static int commit_one(struct fsck *c, bool guard, const struct tfs_bkey *k, struct tfs_bpos del,
		      u64 *seq);

/* Sets the alloc rebuild marker (fs/fs_format.h). */
static int alloc_marker_set(struct fsck *c)
{
	struct tfs_bkey_buf buf;
	u64 seq;

	tfs_bkey_init(&buf, TFS_BKEY_cookie, TFS_ALLOC_REBUILD_POS, 0);
	return commit_one(c, false, &buf.k, TFS_ALLOC_REBUILD_POS, &seq);
}

/* The salvage's keys, into transactions of about this many bytes (a journal entry holds more). */
#define SALVAGE_TRANS_BYTES 8192

struct salvage_ctx {
	struct fsck *c;
	struct tfs_btree_trans trans;
	size_t bytes;
};

static int replayed_pos_cmp(const void *a, const void *b)
{
	const struct tfs_replayed_pos *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return tfs_bpos_cmp(x->pos, y->pos);
}

/*
 * A key the salvage found (tfs_btree_salvage()): put back unless the tree
 * has one at its position (replayed into the new subtree: newer), or
 * replay deleted it there (fs->lost_replayed, sorted: the journal is newer
 * than the leaf).  With -y
 * through normal transactions; -n (read-only: nothing is written, no key
 * cache) puts it into the tree in memory, as replay does, so the checks
 * below see what -y would leave.
 */
static int salvage_key(void *ctx, enum tfs_btree_id id, const struct tfs_bkey *k)
{
	struct salvage_ctx *sc = ctx;
	struct tfs_fs *fs = sc->c->fs;
	struct tfs_bkey_buf kb;
	struct tfs_replayed_pos rp = { .id = id, .pos = tfs_bkey_pos(k) };
	int ret = tfs_btree_lookup(fs, id, tfs_bkey_pos(k), &kb);

	if (ret != -ENOENT)
		return ret;
	if (fs->nr_lost_replayed &&
	    bsearch(&rp, fs->lost_replayed, fs->nr_lost_replayed, sizeof(rp), replayed_pos_cmp))
		return 0;
	/*
	 * The open's next inode number is past the last inode (or orphan) it
	 * found: with the lost range at the end, inodes above it come back, and
	 * an inode fsck makes (/lost+found) must not take one's number.
	 */
	if (id == TFS_BTREE_inodes || id == TFS_BTREE_orphans)
		tfs_ino_alloc_past(fs, le64_to_cpu(k->inode));
	if (!may_repair(sc->c)) {
		struct tfs_btree *b = &fs->btrees[id];

		tfs_btree_lock_exclusive(b);
		ret = tfs_btree_insert_split_locked(b, k);
		tfs_btree_unlock_exclusive(b);
		return ret ?: 1;
	}
	ret = tfs_trans_update(&sc->trans, id, k);
	sc->bytes += tfs_bkey_bytes(k);
	if (!ret && sc->bytes >= SALVAGE_TRANS_BYTES) {
		ret = tfs_posix_commit(&sc->trans, NULL);
		sc->bytes = 0;
	}
	return ret ?: 1;
}

/*
 * Part of what a lost interior node took comes back: the leaves under it
 * are usually whole on the members, only nothing points to them.  The
 * members are scanned for them (tfs_btree_salvage(): newest leaf first, a
 * position only from the newest leaf covering it) and their keys put back
 * into the new subtree.  A lost leaf's own keys are not looked for: only
 * older copies of it could be found, a state the tree left behind.  Keys
 * that come back stale (a name whose file was removed since the leaf was
 * written) are made consistent by the checks after this one, as e2fsck's
 * passes do.  -n puts them back in memory (read-only only: a writable
 * open not repairing must not change its trees without a journal).
 */
static int salvage_lost(struct fsck *c)
{
	struct tfs_btree_salvage_range *r = calloc(c->nr_lost, sizeof(*r));
	struct tfs_btree_salvage_stats st;
	struct salvage_ctx sc = { .c = c };
	unsigned nr = 0;
	int ret;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < c->nr_lost; i++)
		if (c->lost[i].level && c->lost[i].id != TFS_BTREE_alloc)
			r[nr++] = (struct tfs_btree_salvage_range){ .id = c->lost[i].id,
								    .min_key = c->lost[i].min_key,
								    .max_key = c->lost[i].max_key };
	if (!nr || c->opts->no_salvage || (!may_repair(c) && !c->fs->read_only)) {
		free(r);
		return 0;
	}
	if (c->fs->nr_lost_replayed)
		qsort(c->fs->lost_replayed, c->fs->nr_lost_replayed, sizeof(*c->fs->lost_replayed),
		      replayed_pos_cmp);
	tfs_posix_trans_init(&sc.trans, c->fs);
	ret = tfs_btree_salvage(c->fs, r, nr, salvage_key, &sc, &st);
	if (!ret && may_repair(c))
		ret = tfs_posix_commit(&sc.trans, NULL);
	tfs_trans_exit(&sc.trans);
	for (unsigned i = 0; i < nr; i++) {
		struct printbuf buf = PRINTBUF;

		prt_printf(&buf, "btree %s: keys ", tfs_btree_id_str(r[i].id));
		tfs_bpos_to_text(&buf, r[i].min_key);
		prt_str(&buf, "..");
		tfs_bpos_to_text(&buf, r[i].max_key);
		fsck_say(c, "%s: %llu key(s) salvaged from leaves found on the members%s",
			 printbuf_str(&buf), (unsigned long long)r[i].keys,
			 may_repair(c) ? "" : " (in memory: -y puts them back)");
		printbuf_exit(&buf);
	}
	fsck_say(c,
		 "salvage: %llu MiB scanned, %llu leaf copies of the lost ranges found, %llu "
		 "gave keys, %llu key(s) back%s%s",
		 (unsigned long long)(st.bytes_scanned >> 20), (unsigned long long)st.leaves_found,
		 (unsigned long long)st.leaves_used, (unsigned long long)st.keys,
		 ret ? ": stopped: " : "", ret ? tfs_err_str(ret) : "");
	c->res->salvaged += st.keys;
	free(r);
	return ret;
}

/*
 * Nodes that no copy of reads or verifies: each is replaced by an empty
 * leaf of its range (an interior node, which the open replaces: an empty
 * subtree of its height), in memory (-n checks the rest as -y leaves it), and
 * with -y written back before any other repair: a repair journaled into
 * that range must never be replayed over the old tree, whose leaf cannot
 * be read.  The passes after this one repair what pointed into the keys
 * lost (dirents, link counts, extents, alloc keys, counters).
 */
static int replace_lost_leaves(struct fsck *c)
{
	int ret = 0;

	/* Those the open replaced (tfs_fs_opts.replace_lost_leaves), then any left. */
	for (unsigned i = 0; i < c->fs->nr_lost_leaves; i++)
		lost_leaf(c, &c->fs->lost_leaves[i]);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		/*
		 * Alloc leaves only at the open (replace_lost_leaves), before the
		 * allocator is built: what a lost one marked is then marked from the
		 * extents and nodes (fs_alloc_rebuild()).  Here it is built.
		 */
		if (id == TFS_BTREE_alloc)
			continue;
		ret = tfs_btree_replace_bad_leaves(c->fs, id, lost_leaf, c);
		if (ret < 0) {
			fsck_say(c, "btree %s: cannot be read: %s", tfs_btree_id_str(id),
				 tfs_err_str(ret));
			return ret;
		}
	}
	if (c->fs->alloc_rebuild_pending) {
		fsck_err(c,
			 "alloc: the repair of lost alloc leaves was not finished (rebuild "
			 "marker): the alloc keys are checked against the extents and nodes below");
		c->alloc_marker = true;
	}
	if (!c->nr_lost)
		return 0;
	/*
	 * Lost alloc keys: the marker goes in first, so no durable state has the
	 * empty alloc leaf without it (a crash before the keys are rewritten).
	 */
	if (may_repair(c) && c->fs->nr_lost_alloc_leaves && !c->alloc_marker) {
		ret = alloc_marker_set(c);
		c->alloc_marker = !ret;
	}
	ret = ret ?: may_repair(c) ? tfs_btree_write_all(c->fs) : 0;
	/* Tests: fsck -y stops (a crash) once the replacements are on disk. */
	if (!ret && may_repair(c) && tfs_fault("fsck:after_lost_leaves"))
		return -TFS_ERR_fault_injected;
	for (size_t i = 0; i < c->nr_lost; i++) {
		struct printbuf buf = PRINTBUF;

		lost_leaf_to_text(&buf, c, &c->lost[i]);
		if (!may_repair(c)) {
			c->res->left++;
			fsck_say(c, "not fixed: %s: checked as an empty node (-y replaces it)",
				 printbuf_str(&buf));
		} else if (!ret) {
			c->res->fixed++;
			fsck_say(c, "fixed: %s: replaced with an empty node", printbuf_str(&buf));
		} else {
			c->res->left++;
			fsck_say(c, "not fixed: %s: writing its replacement: %s",
				 printbuf_str(&buf), tfs_err_str(ret));
		}
		printbuf_exit(&buf);
	}
	/*
	 * The replacements are durable first: what comes back is journaled into
	 * them.  A salvage that stopped (said) leaves the rest to the checks.
	 */
	if (!ret)
		salvage_lost(c);
	return 0;
}

static int check_btrees(struct fsck *c)
{
	struct printbuf err = PRINTBUF;
	int ret = replace_lost_leaves(c);

	if (ret)
		return ret;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;

		if (tfs_btree_verify(c->fs, id)) {
			fsck_err(c, "btree %s: a node does not verify (see above)",
				 tfs_btree_id_str(id));
			c->res->left++;
			continue;
		}
		tfs_btree_iter_init(&iter, c->fs, id, TFS_POS_MIN, TFS_POS_MAX);
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			printbuf_reset(&err);
			if (tfs_bkey_validate(k, tfs_bkey_bytes(k), id, false, &err)) {
				fsck_err(c, "btree %s: invalid key: %s", tfs_btree_id_str(id),
					 printbuf_str(&err));
				c->res->left++;
			}
		}
		tfs_btree_iter_exit(&iter);
		if (ret) {
			fsck_say(c, "btree %s: cannot be read: %s", tfs_btree_id_str(id),
				 tfs_err_str(ret));
			break;
		}
	}
	printbuf_exit(&err);
	return ret;
}

/* --- pass 2: collect --- */

static int collect_inodes(struct fsck *c)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, c->fs, TFS_BTREE_inodes, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_inode *v = tfs_bkey_val(k);
		struct fsck_ino *e;

		if (k->type != TFS_BKEY_inode || tfs_bkey_val_bytes(k) < sizeof(*v))
			continue; /* reported by check_btrees */
		ret = grow((void **)&c->inodes, &c->size_inodes, c->nr_inodes, sizeof(*e));
		if (ret)
			break;
		e = &c->inodes[c->nr_inodes++];
		*e = (struct fsck_ino){
			.ino = le64_to_cpu(k->inode),
			.mode = le32_to_cpu(v->mode),
			.nlink = le32_to_cpu(v->nlink),
			.blocks = le64_to_cpu(v->blocks),
			.parent = le64_to_cpu(v->parent),
		};
	}
	tfs_btree_iter_exit(&iter);
	c->res->inodes = c->nr_inodes;
	if (!ret && !fsck_ino(c, TFS_ROOT_INO)) {
		/* A lost inodes leaf can take it: nothing here makes a new root (nor /lost+found). */
		fsck_err(c,
			 "root directory (inode %llu) does not exist: fsck cannot make a new one",
			 (unsigned long long)TFS_ROOT_INO);
		c->res->left++;
	}
	return ret;
}

/*
 * A symlink whose target (its inline_data key in the extents btree) is gone,
 * with a lost extents node: it cannot be loaded (tfs_iget() fails on it),
 * so nothing could remove it.  As e2fsck clears an invalid symlink, its
 * inode key goes; the passes below then remove its names (dangling
 * dirents), xattrs and orphan key.  Checked as -y leaves it only with -y.
 */
static int check_symlinks(struct fsck *c)
{
	for (size_t i = 0; i < c->nr_inodes; i++) {
		struct fsck_ino *e = &c->inodes[i];
		unsigned long long ino = e->ino;
		struct tfs_bkey_buf kb;
		int ret;

		if (!S_ISLNK(e->mode))
			continue;
		ret = tfs_btree_lookup(c->fs, TFS_BTREE_extents, TFS_POS(e->ino, 0), &kb);
		if (ret && ret != -ENOENT)
			return ret;
		if (!ret && kb.k.type == TFS_BKEY_inline_data)
			continue;
		fsck_err(c, "symlink %llu: its target is gone", ino);
		if (!may_repair(c)) {
			c->res->left++;
			continue;
		}
		ret = fsck_delete_key(c, TFS_BTREE_inodes, TFS_POS(e->ino, 0));
		fsck_fixed(c, ret, "symlink without a target removed", e->ino);
		if (!ret) {
			memmove(e, e + 1, (c->nr_inodes - i - 1) * sizeof(*e));
			c->nr_inodes--;
			c->res->inodes--;
			i--;
		}
	}
	return 0;
}

static int fsck_dirent_fix(struct fsck *c, tfs_ino_t dirino, u64 slot, const char *name, size_t len,
			   tfs_ino_t ino, unsigned dtype, bool remove)
{
	struct tfs_inode_mem *dir;
	struct tfs_btree_trans trans;
	u64 seq;
	int ret = tfs_iget_locked(c->fs, dirino, true, &dir);

	if (ret)
		return ret;
	tfs_posix_trans_init(&trans, c->fs);
	ret = remove ? tfs_dirent_remove(&trans, dir, slot)
		     : tfs_dirent_retarget(&trans, dir, slot, name, len, ino, dtype);
	ret = ret ?: tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (!ret)
		tfs_inode_committed(dir, NULL, seq, false);
	tfs_iput_unlock(c->fs, dir);
	return ret;
}

static int check_dirents(struct fsck *c)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, c->fs, TFS_BTREE_dirents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_dirent *d = tfs_bkey_val(k);
		tfs_ino_t dirino = le64_to_cpu(k->inode), ino;
		u64 slot = le64_to_cpu(k->offset);
		struct fsck_ino *dir = fsck_ino(c, dirino), *t;
		char name[TFS_NAME_MAX + 1];

		if (k->type != TFS_BKEY_dirent || tfs_bkey_val_bytes(k) < sizeof(*d) || !d->ino)
			continue;
		c->res->dirents++;
		ino = le64_to_cpu(d->ino);
		memcpy(name, d->name, d->name_len);
		name[d->name_len] = 0;
		if (!dir && dirino != TFS_ROOT_INO) {
			/*
			 * Its directory is gone (a lost inodes leaf): the name goes, and
			 * what it named, named nowhere else, goes to /lost+found below.
			 */
			fsck_err(c, "dirent %llu:%llu \"%s\": in %llu, which does not exist",
				 (unsigned long long)dirino, (unsigned long long)slot, name,
				 (unsigned long long)dirino);
			if (may_repair(c))
				fsck_fixed(c,
					   fsck_delete_key(c, TFS_BTREE_dirents, tfs_bkey_pos(k)),
					   "dirent of a missing directory removed", dirino);
			else
				c->res->left++;
			continue;
		}
		if (!dir || !S_ISDIR(dir->mode)) {
			fsck_err(c, "dirent %llu:%llu \"%s\": in %llu, which is not a directory",
				 (unsigned long long)dirino, (unsigned long long)slot, name,
				 (unsigned long long)dirino);
			c->res->left++;
			continue;
		}
		t = fsck_ino(c, ino);
		if (!t) {
			fsck_err(
				c,
				"dirent %llu:%llu \"%s\": points to inode %llu, which does not exist",
				(unsigned long long)dirino, (unsigned long long)slot, name,
				(unsigned long long)ino);
			if (may_repair(c))
				fsck_fixed(c,
					   fsck_dirent_fix(c, dirino, slot, name, d->name_len, ino,
							   0, true),
					   "dangling dirent removed", dirino);
			else
				c->res->left++;
			continue;
		}
		if (d->d_type != tfs_mode_to_dtype(t->mode)) {
			fsck_err(c,
				 "dirent %llu:%llu \"%s\": d_type %u, but inode %llu has mode 0%o",
				 (unsigned long long)dirino, (unsigned long long)slot, name,
				 d->d_type, (unsigned long long)ino, t->mode);
			if (may_repair(c))
				fsck_fixed(c,
					   fsck_dirent_fix(c, dirino, slot, name, d->name_len, ino,
							   tfs_mode_to_dtype(t->mode), false),
					   "dirent d_type rewritten", dirino);
			else
				c->res->left++;
		}
		t->links++;
		if (S_ISDIR(t->mode)) {
			dir->links++; /* the subdirectory's ".." */
			if (t->parent != dirino) {
				fsck_err(
					c,
					"directory %llu: parent %llu, but dirent %llu:%llu names it",
					(unsigned long long)ino, (unsigned long long)t->parent,
					(unsigned long long)dirino, (unsigned long long)slot);
				c->res->left++;
			}
		}
		ret = grow((void **)&c->edges, &c->size_edges, c->nr_edges, sizeof(*c->edges));
		if (ret)
			break;
		c->edges[c->nr_edges++] = (struct fsck_edge){ .dir = dirino, .ino = ino };
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

static int check_orphans(struct fsck *c)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, c->fs, TFS_BTREE_orphans, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_orphan *o = tfs_bkey_val(k);
		tfs_ino_t ino = le64_to_cpu(k->inode);
		struct fsck_ino *e = fsck_ino(c, ino);

		if (k->type != TFS_BKEY_orphan || tfs_bkey_val_bytes(k) < sizeof(*o))
			continue;
		c->res->orphans++;
		if (!e) {
			fsck_err(c, "orphan %llu: no such inode", (unsigned long long)ino);
			if (may_repair(c)) {
				struct tfs_btree_trans trans;

				tfs_posix_trans_init(&trans, c->fs);
				ret = tfs_orphan_del(&trans, ino) ?: tfs_posix_commit(&trans, NULL);
				tfs_trans_exit(&trans);
				fsck_fixed(c, ret, "orphan key removed", ino);
				ret = 0;
			} else {
				c->res->left++;
			}
			continue;
		}
		e->orphan = true;
		e->orphan_unlinked = le64_to_cpu(o->flags) & TFS_ORPHAN_unlinked;
		if (e->orphan_unlinked && e->nlink)
			fsck_say(c, "inode %llu: on the orphan list as unlinked, nlink %u",
				 (unsigned long long)ino, e->nlink);
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

/* xattrs of no inode (a lost inodes leaf): removed. */
static int check_xattrs(struct fsck *c)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, c->fs, TFS_BTREE_xattrs, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		tfs_ino_t ino = le64_to_cpu(k->inode);

		if (fsck_ino(c, ino))
			continue;
		fsck_err(c, "xattr %llu:%llu: of no inode", (unsigned long long)ino,
			 (unsigned long long)le64_to_cpu(k->offset));
		if (may_repair(c))
			fsck_fixed(c, fsck_delete_key(c, TFS_BTREE_xattrs, tfs_bkey_pos(k)),
				   "xattr of no inode removed", ino);
		else
			c->res->left++;
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

static int phys_cmp(const void *a, const void *b)
{
	const struct fsck_phys *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static bool dev_missing(struct fsck *c, u32 dev)
{
	return dev < c->fs->nr_devices && !c->fs->devs[dev].present;
}

/* An extent's copies on missing members (only what fsck cannot see there). */
static void missing_extent(struct fsck *c, const struct tfs_extent *x, u32 nr)
{
	bool only = x->nr_ptrs > 0;

	for (unsigned i = 0; i < x->nr_ptrs; i++) {
		u32 dev = le32_to_cpu(x->ptrs[i].dev);

		if (dev_missing(c, dev))
			c->missing[dev].extents++;
		else
			only = false;
	}
	if (only) {
		u32 dev = le32_to_cpu(x->ptrs[0].dev);

		c->missing[dev].only++;
		c->missing[dev].only_blocks += nr;
	}
}

/* A node's replicas, as node-size ranges among the extents' (ino 0). */
static int node_loc(void *ctx, const struct tfs_btree_ptr *ptr)
{
	struct fsck *c = ctx;

	for (unsigned i = 0; i < ptr->nr_ptrs; i++) {
		u64 start = le64_to_cpu(ptr->ptrs[i].offset);
		int ret = grow((void **)&c->phys, &c->size_phys, c->nr_phys, sizeof(*c->phys));

		if (ret)
			return ret;
		if (dev_missing(c, le32_to_cpu(ptr->ptrs[i].dev)))
			c->missing[le32_to_cpu(ptr->ptrs[i].dev)].nodes++;
		c->phys[c->nr_phys++] = (struct fsck_phys){ .dev = le32_to_cpu(ptr->ptrs[i].dev),
							    .start = start,
							    .end = start + c->fs->node_size,
							    .off = c->node_btree };
	}
	return 0;
}

static void phys_to_text(struct printbuf *out, const struct fsck_phys *p)
{
	if (p->ino)
		prt_printf(out, "extent %llu:%llu", (unsigned long long)p->ino,
			   (unsigned long long)p->off);
	else
		prt_printf(out, "btree %s node at 0x%llx", tfs_btree_id_str((unsigned)p->off),
			   (unsigned long long)p->start);
}

static int check_extents(struct fsck *c)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u32 bs = tfs_posix_block_size(c->fs);
	int ret;

	tfs_btree_iter_init(&iter, c->fs, TFS_BTREE_extents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		tfs_ino_t ino = le64_to_cpu(k->inode);
		u64 off = le64_to_cpu(k->offset);
		struct fsck_ino *e = fsck_ino(c, ino);
		const struct tfs_extent *x = tfs_bkey_val(k);
		u32 nr;

		if (!e) {
			/* Its inode is gone (a lost inodes leaf): the space goes back too. */
			fsck_err(c, "extents key %llu:%llu (%s): of no inode",
				 (unsigned long long)ino, (unsigned long long)off,
				 tfs_bkey_type_str(k->type));
			if (may_repair(c))
				fsck_fixed(c,
					   fsck_delete_key(c, TFS_BTREE_extents, tfs_bkey_pos(k)),
					   "extents key of no inode removed", ino);
			else
				c->res->left++;
			continue;
		}
		if (k->type != TFS_BKEY_extent) {
			if (k->type == TFS_BKEY_inline_data && e && S_ISLNK(e->mode))
				continue;
			fsck_err(c, "extents key %llu:%llu (%s): of no symlink",
				 (unsigned long long)ino, (unsigned long long)off,
				 tfs_bkey_type_str(k->type));
			c->res->left++;
			continue;
		}
		c->res->extents++;
		if (!e || !S_ISREG(e->mode)) {
			fsck_err(c, "extent %llu:%llu: of no regular file", (unsigned long long)ino,
				 (unsigned long long)off);
			c->res->left++;
			continue;
		}
		nr = le32_to_cpu(x->nr_blocks);
		if (off < e->end) {
			fsck_err(c, "inode %llu: extents overlap at file block %llu",
				 (unsigned long long)ino, (unsigned long long)off);
			c->res->left++;
		}
		e->end = off + nr;
		e->ext_blocks += nr;
		missing_extent(c, x, nr);
		for (unsigned i = 0; i < x->nr_ptrs; i++) {
			u32 dev = le32_to_cpu(x->ptrs[i].dev);
			u64 start = le64_to_cpu(x->ptrs[i].offset), len = (u64)nr * bs;
			struct tfs_bdev *b = tfs_posix_bdev(c->fs, dev);
			/* A missing member's end: its geometry, as another member records it. */
			u64 end = b			    ? b->size
				  : dev < c->fs->nr_devices ? c->fs->alloc.devs[dev].end
							    : 0;

			if (dev >= c->fs->nr_devices || (end && start + len > end)) {
				fsck_err(
					c,
					"extent %llu:%llu: bytes %llu..%llu of device %u, past its end",
					(unsigned long long)ino, (unsigned long long)off,
					(unsigned long long)start,
					(unsigned long long)(start + len), dev);
				c->res->left++;
				continue;
			}
			ret = grow((void **)&c->phys, &c->size_phys, c->nr_phys, sizeof(*c->phys));
			if (ret)
				goto out;
			c->phys[c->nr_phys++] = (struct fsck_phys){ .dev = dev,
								    .start = start,
								    .end = start + len,
								    .ino = ino,
								    .off = off };
		}
	}
out:
	tfs_btree_iter_exit(&iter);
	if (ret)
		return ret;
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		c->node_btree = id;
		ret = tfs_btree_node_locations(c->fs, id, node_loc, c);
		if (ret)
			return ret;
	}
	if (c->nr_phys)
		qsort(c->phys, c->nr_phys, sizeof(*c->phys), phys_cmp);
	for (size_t i = 1, last = 0; i < c->nr_phys; i++) {
		const struct fsck_phys *a = &c->phys[last], *b = &c->phys[i];

		/*
		 * The same node location twice: on a live filesystem both halves
		 * of a split not yet written back still carry their parent's old
		 * location; that is one node on disk, not an overlap.
		 */
		if (!a->ino && !b->ino && a->dev == b->dev && a->start == b->start &&
		    a->end == b->end && a->off == b->off)
			continue;
		if (b->dev == a->dev && b->start < a->end) {
			struct printbuf x = PRINTBUF, y = PRINTBUF;

			phys_to_text(&x, b);
			phys_to_text(&y, a);
			fsck_err(c, "%s: device %u bytes %llu..%llu overlap %s", printbuf_str(&x),
				 b->dev, (unsigned long long)b->start, (unsigned long long)b->end,
				 printbuf_str(&y));
			c->res->left++;
			printbuf_exit(&x);
			printbuf_exit(&y);
		}
		if (b->dev != a->dev || b->end > a->end)
			last = i;
	}
	return 0;
}

/* --- allocation: alloc keys and accounting against the extents and nodes --- */

/*
 * The two owners alloc keys record (fs/fs_format.h): index 0 file data
 * (user keys, from the extents), 1 btree nodes (btree keys, from every
 * tree's node pointers but the alloc btree's, whose nodes are not recorded).
 */
enum {
	FA_USER,
	FA_BTREE,
	FA_NR
};

static enum tfs_alloc_data_type fa_type(unsigned t)
{
	return t == FA_BTREE ? TFS_ALLOC_DATA_btree : TFS_ALLOC_DATA_user;
}

/* Blocks [first, first + nr) of one bucket that an extent or a node uses. */
struct fsck_blk {
	u32 dev;
	u32 first, nr;
	u64 bucket;
	tfs_ino_t ino; /* an extent's inode; 0: a node */
	u64 off;       /* an extent's file block; a node's btree id */
};

static int blk_cmp(const void *a, const void *b)
{
	const struct fsck_blk *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->bucket != y->bucket)
		return x->bucket < y->bucket ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* One alloc key, copied: its bitmap (nr_blocks bits, at most a bucket's). */
struct fsck_akey {
	u32 dev;
	u64 bucket;
	u32 nr_blocks;
	u64 *bits;
};

struct fsck_alloc {
	struct fsck *c;
	struct fsck_blk *blks[FA_NR];
	size_t nr[FA_NR], size[FA_NR];
	struct fsck_akey *keys[FA_NR];
	size_t nr_keys[FA_NR], size_keys[FA_NR];
	u64 blocks[FA_NR][TFS_MAX_DEVICES]; /* counted: user blocks, btree blocks */
	u64 inodes;
};

static void fa_keys_free(struct fsck_alloc *a, unsigned t)
{
	for (size_t i = 0; i < a->nr_keys[t]; i++)
		free(a->keys[t][i].bits);
	a->nr_keys[t] = 0;
}

/* Blocks [off, off + len) of member dev, bucket by bucket, as owned by (ino, off). */
static int fa_push(struct fsck_alloc *a, unsigned t, u32 dev, u64 off, u64 len, tfs_ino_t ino,
		   u64 owner_off)
{
	struct tfs_fs *fs = a->c->fs;
	u32 bsz;

	if (dev >= fs->nr_devices || !(bsz = fs->alloc.devs[dev].bucket_size))
		return 0; /* past the device: check_extents said so */
	while (len) {
		u64 in = off % bsz, n = min_t(u64, len, bsz - in);
		int ret = grow((void **)&a->blks[t], &a->size[t], a->nr[t], sizeof(*a->blks[t]));

		if (ret)
			return ret;
		a->blks[t][a->nr[t]++] = (struct fsck_blk){
			.dev = dev,
			.bucket = off / bsz,
			.first = (u32)(in / fs->block_size),
			.nr = (u32)(n / fs->block_size),
			.ino = ino,
			.off = owner_off,
		};
		off += n;
		len -= n;
	}
	return 0;
}

/* Every extent's blocks, bucket by bucket (what the user alloc keys must hold). */
static int alloc_collect(struct fsck *c, struct fsck_alloc *a)
{
	struct tfs_fs *fs = c->fs;
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_extents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_extent *x = tfs_bkey_val(k);

		if (k->type != TFS_BKEY_extent)
			continue;
		for (unsigned i = 0; i < x->nr_ptrs && !ret; i++)
			ret = fa_push(a, FA_USER, le32_to_cpu(x->ptrs[i].dev),
				      le64_to_cpu(x->ptrs[i].offset),
				      (u64)le32_to_cpu(x->nr_blocks) * fs->block_size,
				      le64_to_cpu(k->inode), le64_to_cpu(k->offset));
	}
	tfs_btree_iter_exit(&iter);
	if (ret)
		return ret;

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_inodes, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		a->inodes += k->type == TFS_BKEY_inode;
	tfs_btree_iter_exit(&iter);
	return ret;
}

static int fa_node_loc(void *ctx, const struct tfs_btree_ptr *ptr)
{
	struct fsck_alloc *a = ctx;
	int ret = 0;

	for (unsigned i = 0; i < ptr->nr_ptrs && !ret; i++)
		ret = fa_push(a, FA_BTREE, le32_to_cpu(ptr->ptrs[i].dev),
			      le64_to_cpu(ptr->ptrs[i].offset), a->c->fs->node_size, 0,
			      a->c->node_btree);
	return ret;
}

/* The alloc keys of owner t, copied, in position order (member, bucket). */
static int alloc_read_keys(struct fsck_alloc *a, unsigned t)
{
	struct tfs_fs *fs = a->c->fs;
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct tfs_bpos start = tfs_alloc_pos(fa_type(t), 0, 0);
	int ret;

	fa_keys_free(a, t);
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_alloc, start,
			    TFS_POS(start.inode + TFS_MAX_DEVICES - 1, UINT64_MAX));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_alloc_key *v = tfs_bkey_val(k);
		struct fsck_akey *e;
		u32 nr;

		if (k->type != TFS_BKEY_alloc)
			continue;
		ret = grow((void **)&a->keys[t], &a->size_keys[t], a->nr_keys[t],
			   sizeof(*a->keys[t]));
		if (ret)
			break;
		nr = le32_to_cpu(v->nr_blocks); /* validated: at most a bucket's */
		e = &a->keys[t][a->nr_keys[t]];
		*e = (struct fsck_akey){ .dev = (u32)(le64_to_cpu(k->inode) - start.inode),
					 .bucket = le64_to_cpu(k->offset),
					 .nr_blocks = nr,
					 .bits = calloc(DIV_ROUND_UP(nr, 64) ?: 1, 8) };
		if (!e->bits) {
			ret = -ENOMEM;
			break;
		}
		for (u32 w = 0; w < DIV_ROUND_UP(nr, 64); w++)
			e->bits[w] = le64_to_cpu(v->bits[w]);
		a->nr_keys[t]++;
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

/*
 * The nodes of every tree but the alloc btree, and the btree alloc keys,
 * taken across a span no checkpoint ran in (fs->ckpt_started, a seqcount):
 * a checkpoint changes the pointers in memory before its commit changes
 * the keys.
 */
static int alloc_collect_nodes(struct fsck *c, struct fsck_alloc *a)
{
	struct tfs_fs *fs = c->fs;
	int ret = 0;

	for (unsigned tries = 0;; tries++) {
		unsigned running = __atomic_load_n(&fs->ckpt_running, __ATOMIC_SEQ_CST);
		u64 started = __atomic_load_n(&fs->ckpt_started, __ATOMIC_SEQ_CST);

		a->nr[FA_BTREE] = 0;
		if (!running) {
			for (unsigned id = 0; id < TFS_BTREE_NR && !ret; id++) {
				if (id == TFS_BTREE_alloc)
					continue; /* its nodes are not recorded */
				c->node_btree = id;
				ret = tfs_btree_node_locations(fs, id, fa_node_loc, a);
			}
			ret = ret ?: alloc_read_keys(a, FA_BTREE);
			if (ret)
				return ret;
			c->ckpt_started = started; /* what the repairs are guarded with */
			if (!__atomic_load_n(&fs->ckpt_running, __ATOMIC_SEQ_CST) &&
			    __atomic_load_n(&fs->ckpt_started, __ATOMIC_SEQ_CST) == started)
				break;
		}
		if (tries == 1000) {
			fsck_say(c, "alloc: checkpoints kept running; btree space compared anyway");
			break;
		}
		usleep(1000);
	}
	if (a->nr[FA_BTREE])
		qsort(a->blks[FA_BTREE], a->nr[FA_BTREE], sizeof(*a->blks[FA_BTREE]), blk_cmp);
	return 0;
}

static bool bit(const u64 *w, u32 i)
{
	return w[i / 64] & (1ULL << (i % 64));
}

static const char *fa_name(unsigned t)
{
	return t == FA_BTREE ? "alloc btree" : "alloc";
}

static void fa_owner_to_text(struct printbuf *out, const struct fsck_blk *b)
{
	if (b->ino)
		prt_printf(out, "extent %llu:%llu", (unsigned long long)b->ino,
			   (unsigned long long)b->off);
	else
		prt_printf(out, "a btree %s node", tfs_btree_id_str((unsigned)b->off));
}

/* The blocks of w (a bucket's difference) as "3..5" lines, with the owner when known. */
static void alloc_say_runs(struct fsck *c, unsigned t, u32 dev, u64 bucket, const u64 *w, u32 nr,
			   const struct fsck_blk *b, size_t nr_b, bool leaked)
{
	for (u32 i = 0, j; i < nr; i = j) {
		if (!bit(w, i)) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < nr && bit(w, j); j++)
			;
		if (leaked) {
			fsck_err(c,
				 "%s %u:%llu: blocks %u..%u marked used, but no %s them (leaked)",
				 fa_name(t), dev, (unsigned long long)bucket, i, j - 1,
				 t == FA_BTREE ? "btree node uses" : "extent references");
			continue;
		}
		for (size_t x = 0; x < nr_b; x++)
			if (b[x].first <= i && i < b[x].first + b[x].nr) {
				struct printbuf o = PRINTBUF;

				fa_owner_to_text(&o, &b[x]);
				fsck_err(c,
					 "%s %u:%llu: blocks %u..%u used by %s are not marked used",
					 fa_name(t), dev, (unsigned long long)bucket, i, j - 1,
					 printbuf_str(&o));
				printbuf_exit(&o);
				break;
			}
	}
}

/*
 * Gives the allocator in memory what a repaired bucket now says.  Its
 * bitmap is one for both owners: leaked blocks the other owner uses or
 * marks stay used (marked by the other's key at open), and missing blocks
 * are marked one by one (some may be marked already, by the other's key).
 */
static void alloc_mem_fix(struct fsck *c, u32 dev, u64 bucket, const u64 *w, u32 nr, bool leaked,
			  u64 seq)
{
	struct tfs_fs *fs = c->fs;

	for (u32 i = 0, j; i < nr; i = j) {
		struct tfs_alloc_run run;

		if (!bit(w, i)) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < nr && bit(w, j) && leaked; j++)
			;
		run = (struct tfs_alloc_run){
			.dev = dev,
			.offset =
				bucket * fs->alloc.devs[dev].bucket_size + (u64)i * fs->block_size,
			.len = (u64)(j - i) * fs->block_size,
		};
		if (leaked)
			tfs_alloc_free_after(fs, &run,
					     seq); /* reusable once the repair is durable */
		else
			tfs_alloc_mark_used(fs, &run); /* already used was said by open */
	}
}

/*
 * One repaired key (or its removal).  Node space (guard): committed only if
 * no write-back ran since the compare (struct tfs_trans_roots): one that
 * ran may have moved nodes and their keys meanwhile, and this key would
 * overwrite its change; c->raced then says to compare again.
 */
static int commit_one(struct fsck *c, bool guard, const struct tfs_bkey *k, struct tfs_bpos del,
		      u64 *seq)
{
	struct tfs_trans_roots r = { .guard = true, .ckpt_started = c->ckpt_started };
	struct tfs_btree_trans trans;
	int ret;

	tfs_trans_init(&trans, c->fs);
	if (guard)
		trans.roots = &r;
	ret = (k ? tfs_trans_update(&trans, TFS_BTREE_alloc, k)
		 : tfs_trans_delete(&trans, TFS_BTREE_alloc, del))
		      ?: tfs_trans_commit(&trans, 0, seq);
	tfs_trans_exit(&trans);
	if (ret == -TFS_ERR_fsck_raced_writeback)
		c->raced = true;
	return ret;
}

/* A bucket's usable blocks (0: no bucket of a present member). */
static u32 bucket_blocks(struct tfs_fs *fs, u32 dev, u64 bucket)
{
	u32 bsz = dev < fs->nr_devices ? fs->alloc.devs[dev].bucket_size : 0;

	if (!bsz || bucket * bsz < fs->alloc.devs[dev].start ||
	    (bucket + 1) * bsz > fs->alloc.devs[dev].end)
		return 0;
	return bsz / fs->block_size;
}

/* The bits the blocks b[0..nr_b) of one bucket set, in want (nr bits). */
static void blks_bits(u64 *want, u32 nr, const struct fsck_blk *b, size_t nr_b)
{
	for (size_t x = 0; x < nr_b; x++)
		for (u32 i = b[x].first; i < b[x].first + b[x].nr && i < nr; i++)
			want[i / 64] |= 1ULL << (i % 64);
}

static const struct fsck_akey *akey_find(const struct fsck_alloc *a, unsigned t, u32 dev,
					 u64 bucket);
static size_t blks_find(const struct fsck_alloc *a, unsigned t, u32 dev, u64 bucket, size_t *first);

/*
 * One bucket of owner t: the alloc key k (NULL: none) against the blocks
 * b[0..nr_b) extents (or nodes) use.  Each difference is a line; -y writes
 * the key they say (or deletes it), one transaction.
 */
static int alloc_check_bucket(struct fsck *c, struct fsck_alloc *fa, unsigned t, u32 dev,
			      u64 bucket, const struct fsck_akey *k, const struct fsck_blk *b,
			      size_t nr_b)
{
	struct tfs_fs *fs = c->fs;
	struct tfs_bpos pos = tfs_alloc_pos(fa_type(t), dev, bucket);
	u32 nr = bucket_blocks(fs, dev, bucket), words = DIV_ROUND_UP(nr, 64);
	u64 want[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64] = { 0 },
					       have[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64] = { 0 };
	u64 leaked[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64], missing[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64];
	unsigned found = c->res->found, used = 0;
	struct tfs_bkey_buf buf;
	bool any_leaked = false, any_missing = false;
	u64 seq = 0;
	int ret;

	if (!nr) {
		fsck_err(c, "%s %u:%llu: no such bucket of a present member", fa_name(t), dev,
			 (unsigned long long)bucket);
		if (!may_repair(c)) {
			c->res->left++;
			return 0;
		}
		ret = commit_one(c, t == FA_BTREE, NULL, pos, &seq);
		if (ret == -TFS_ERR_fsck_raced_writeback)
			return 0; /* compared again */
		if (!ret) {
			c->res->fixed++;
			fsck_say(c, "fixed: %s %u:%llu removed", fa_name(t), dev,
				 (unsigned long long)bucket);
		} else {
			c->res->left++;
		}
		return 0;
	}
	blks_bits(want, nr, b, nr_b);
	if (k) {
		if (k->nr_blocks != nr)
			fsck_err(c, "%s %u:%llu: nr_blocks %u, the bucket has %u", fa_name(t), dev,
				 (unsigned long long)bucket, k->nr_blocks, nr);
		for (u32 i = 0; i < min_t(u32, nr, k->nr_blocks); i++)
			if (bit(k->bits, i))
				have[i / 64] |= 1ULL << (i % 64);
	}
	for (u32 w = 0; w < words; w++) {
		leaked[w] = have[w] & ~want[w];
		missing[w] = want[w] & ~have[w];
		any_leaked |= !!leaked[w];
		any_missing |= !!missing[w];
		used += (unsigned)__builtin_popcountll(want[w]);
	}
	fa->blocks[t][dev] += used; /* a block two owners use counts once */
	if (any_leaked)
		alloc_say_runs(c, t, dev, bucket, leaked, nr, b, nr_b, true);
	if (any_missing) {
		if (!k) {
			struct printbuf o = PRINTBUF;

			fa_owner_to_text(&o, &b[0]);
			fsck_err(c, "%s %u:%llu: no alloc key, but %s uses blocks of the bucket",
				 fa_name(t), dev, (unsigned long long)bucket, printbuf_str(&o));
			printbuf_exit(&o);
		} else {
			alloc_say_runs(c, t, dev, bucket, missing, nr, b, nr_b, false);
		}
	}
	if (c->res->found == found)
		return 0;
	if (!may_repair(c)) {
		c->res->left += c->res->found - found;
		return 0;
	}
	if (used) {
		struct tfs_alloc_key *a =
			tfs_bkey_init(&buf, TFS_BKEY_alloc, pos, tfs_alloc_key_val_bytes(nr));

		a->data_type = fa_type(t);
		a->nr_blocks = cpu_to_le32(nr);
		a->used = cpu_to_le32(used);
		for (u32 w = 0; w < words; w++)
			a->bits[w] = cpu_to_le64(want[w]);
	}
	ret = commit_one(c, t == FA_BTREE, used ? &buf.k : NULL, pos, &seq);
	if (ret == -TFS_ERR_fsck_raced_writeback)
		return 0; /* compared again */
	if (ret) {
		c->res->left += c->res->found - found;
		fsck_say(c, "not fixed: %s %u:%llu: %s", fa_name(t), dev,
			 (unsigned long long)bucket, tfs_err_str(ret));
		return 0;
	}
	c->res->fixed += c->res->found - found;
	fsck_say(c, "fixed: %s %u:%llu rewritten from the %s (%u blocks used)", fa_name(t), dev,
		 (unsigned long long)bucket, t == FA_BTREE ? "nodes" : "extents", used);
	{
		/* The other owner's blocks in this bucket, wanted or marked. */
		unsigned o = t == FA_USER ? FA_BTREE : FA_USER;
		const struct fsck_akey *ko = akey_find(fa, o, dev, bucket);
		size_t f, e = blks_find(fa, o, dev, bucket, &f);
		u64 other[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64] = { 0 };

		blks_bits(other, nr, &fa->blks[o][f], e - f);
		for (u32 i = 0; ko && i < min_t(u32, nr, ko->nr_blocks); i++)
			if (bit(ko->bits, i))
				other[i / 64] |= 1ULL << (i % 64);
		for (u32 w = 0; w < words; w++)
			leaked[w] &= ~other[w];
	}
	alloc_mem_fix(c, dev, bucket, leaked, nr, true, seq);
	alloc_mem_fix(c, dev, bucket, missing, nr, false, seq);
	return 0;
}

static int akey_cmp(const struct fsck_akey *k, u32 dev, u64 bucket)
{
	if (k->dev != dev)
		return k->dev < dev ? -1 : 1;
	return k->bucket < bucket ? -1 : k->bucket > bucket;
}

/* Owner t: its keys and the blocks its owners use, merged by (member, bucket). */
static int alloc_check_owner(struct fsck *c, struct fsck_alloc *a, unsigned t)
{
	const struct fsck_blk *b = a->blks[t];
	size_t i = 0, x = 0, nr_b = a->nr[t], nr_k = a->nr_keys[t];
	int ret = 0;

	while (!ret && (i < nr_b || x < nr_k)) {
		const struct fsck_akey *k = x < nr_k ? &a->keys[t][x] : NULL;
		u32 dev;
		u64 bucket;
		size_t j = i;

		if (k && (i == nr_b || akey_cmp(k, b[i].dev, b[i].bucket) <= 0)) {
			dev = k->dev;
			bucket = k->bucket;
			x++;
		} else {
			dev = b[i].dev;
			bucket = b[i].bucket;
			k = NULL;
		}
		while (j < nr_b && b[j].dev == dev && b[j].bucket == bucket)
			j++;
		ret = alloc_check_bucket(c, a, t, dev, bucket, k, &b[i], j - i);
		i = j;
	}
	return ret;
}

/* The key of owner t at (dev, bucket), or NULL. */
static const struct fsck_akey *akey_find(const struct fsck_alloc *a, unsigned t, u32 dev,
					 u64 bucket)
{
	size_t l = 0, r = a->nr_keys[t];

	while (l < r) {
		size_t m = l + (r - l) / 2;
		int cmp = akey_cmp(&a->keys[t][m], dev, bucket);

		if (!cmp)
			return &a->keys[t][m];
		if (cmp < 0)
			l = m + 1;
		else
			r = m;
	}
	return NULL;
}

/* The blocks of owner t in (dev, bucket): b[*first .. return). */
static size_t blks_find(const struct fsck_alloc *a, unsigned t, u32 dev, u64 bucket, size_t *first)
{
	const struct fsck_blk *b = a->blks[t];
	size_t l = 0, r = a->nr[t], e;

	while (l < r) {
		size_t m = l + (r - l) / 2;

		if (b[m].dev < dev || (b[m].dev == dev && b[m].bucket < bucket))
			l = m + 1;
		else
			r = m;
	}
	for (e = l; e < a->nr[t] && b[e].dev == dev && b[e].bucket == bucket; e++)
		;
	*first = l;
	return e;
}

/*
 * A block both a user and a btree alloc key mark (doubly used): said once
 * per run.  The per-owner rewrites repair it unless data and a node really
 * both use the block (check_extents()'s overlap line, not repaired).
 */
static void alloc_check_double(struct fsck *c, struct fsck_alloc *a)
{
	for (size_t x = 0; x < a->nr_keys[FA_BTREE]; x++) {
		const struct fsck_akey *kb = &a->keys[FA_BTREE][x];
		const struct fsck_akey *ku = akey_find(a, FA_USER, kb->dev, kb->bucket);
		u64 wu[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64] = { 0 },
						     wb[TFS_ALLOC_MAX_BUCKET_BLOCKS / 64] = { 0 };
		u32 nr = bucket_blocks(c->fs, kb->dev, kb->bucket);
		size_t f, e;

		if (!ku || !nr)
			continue;
		nr = min_t(u32, nr, kb->nr_blocks);
		nr = min_t(u32, nr, ku->nr_blocks);
		e = blks_find(a, FA_USER, kb->dev, kb->bucket, &f);
		blks_bits(wu, nr, &a->blks[FA_USER][f], e - f);
		e = blks_find(a, FA_BTREE, kb->dev, kb->bucket, &f);
		blks_bits(wb, nr, &a->blks[FA_BTREE][f], e - f);
		for (u32 i = 0, j; i < nr; i = j) {
			bool real = false;

			if (!bit(kb->bits, i) || !bit(ku->bits, i)) {
				j = i + 1;
				continue;
			}
			for (j = i; j < nr && bit(kb->bits, j) && bit(ku->bits, j); j++)
				real |= bit(wu, j) && bit(wb, j);
			fsck_err(
				c,
				"alloc %u:%llu: blocks %u..%u marked used both by file data and by "
				"btree nodes (doubly used)",
				kb->dev, (unsigned long long)kb->bucket, i, j - 1);
			if (may_repair(c) && !real)
				c->res->fixed++; /* by the rewrite of the key that is wrong */
			else
				c->res->left++;
		}
	}
}

/* One counter: its key against the value counted. */
static void acct_check(struct fsck *c, enum tfs_acct_kind kind, unsigned dev, u64 want)
{
	struct tfs_bkey_buf buf;
	u64 have, seq;
	int ret = tfs_acct_read(c->fs, kind, dev, &have);

	if (ret || have == want)
		return;
	if (kind == TFS_ACCT_inodes)
		fsck_err(c, "accounting inodes: %llu, the inodes btree holds %llu",
			 (unsigned long long)have, (unsigned long long)want);
	else
		fsck_err(c, "accounting %s member %u: %llu blocks, %s use %llu",
			 tfs_acct_kind_str(kind), dev, (unsigned long long)have,
			 kind == TFS_ACCT_btree_blocks ? "nodes" : "extents",
			 (unsigned long long)want);
	if (!may_repair(c)) {
		c->res->left++;
		return;
	}
	if (want) {
		struct tfs_accounting *a = tfs_bkey_init(&buf, TFS_BKEY_accounting,
							 tfs_acct_pos(kind, dev), sizeof(*a));

		a->value = cpu_to_le64(want);
	}
	ret = commit_one(c, kind == TFS_ACCT_btree_blocks, want ? &buf.k : NULL,
			 tfs_acct_pos(kind, dev), &seq);
	if (ret == -TFS_ERR_fsck_raced_writeback)
		return; /* compared again */
	if (ret) {
		c->res->left++;
		fsck_say(c, "not fixed: accounting %s: %s", tfs_acct_kind_str(kind),
			 tfs_err_str(ret));
		return;
	}
	c->res->fixed++;
	fsck_say(c, "fixed: accounting %s member %u set to %llu", tfs_acct_kind_str(kind), dev,
		 (unsigned long long)want);
}

/*
 * The user alloc keys hold exactly the blocks extents use, the btree alloc
 * keys exactly the blocks of the nodes (every tree but the alloc btree), no
 * block is in both, and the accounting keys are the sums.  Run after the
 * repairs that remove extents, from a fresh pass.  Two owners of one block
 * are check_extents()'s overlap lines.
 */
static void fa_free(struct fsck_alloc *a)
{
	for (unsigned t = 0; t < FA_NR; t++) {
		fa_keys_free(a, t);
		free(a->keys[t]);
		free(a->blks[t]);
	}
}

/*
 * Node space: the btree alloc keys and the btree_blocks counters against
 * the nodes (a->blks[FA_BTREE] and a->keys[FA_BTREE] from
 * alloc_collect_nodes()).  A repair that met a write-back (c->raced)
 * changed nothing: everything is compared again from fresh nodes and keys
 * (what was said is said again if still wrong), a few times.
 */
static int check_node_space(struct fsck *c, struct fsck_alloc *a, bool collected)
{
	struct tfs_fsck_result before = *c->res;
	int ret = 0;

	for (unsigned tries = 0;; tries++) {
		c->raced = false;
		memset(a->blocks[FA_BTREE], 0, sizeof(a->blocks[FA_BTREE]));
		if (!collected || tries)
			ret = alloc_collect_nodes(c, a);
		/* Tests: a write-back between the compare and the repairs (another thread's). */
		if (!ret && !tries && tfs_fault("fsck:node_space_race"))
			ret = tfs_btree_write_all(c->fs);
		ret = ret ?: alloc_check_owner(c, a, FA_BTREE);
		if (ret)
			return ret;
		for (unsigned dev = 0; dev < c->fs->nr_devices; dev++)
			acct_check(c, TFS_ACCT_btree_blocks, dev, a->blocks[FA_BTREE][dev]);
		if (!c->raced)
			return 0;
		if (tries == 10) {
			fsck_say(c, "alloc: write-backs kept running; node space left unrepaired");
			c->res->left =
				c->res->found - c->res->fixed; /* repairs: the rest was fixed */
			return 0;
		}
		fsck_say(c, "alloc: a write-back ran during the node space repairs: again");
		*c->res = before;
	}
}

static int split_markers(struct tfs_fs *fs, unsigned *ids);

/*
 * The alloc rebuild marker, once the allocation check ran: removed when it
 * left no alloc problem (every key and counter is what the extents and
 * nodes say), else kept, so every open marks space from the extents and
 * nodes until a check leaves none.  A marker found at open is a problem
 * of its own (fixed when removed).
 */
static void alloc_marker_done(struct fsck *c, bool alloc_clean)
{
	bool found = c->fs->alloc_rebuild_pending;
	int ret = -TFS_ERR_fsck_errors_found;
	u64 seq;

	if (may_repair(c) && alloc_clean)
		ret = commit_one(c, false, NULL, TFS_ALLOC_REBUILD_POS, &seq);
	if (!ret) {
		c->alloc_marker = false;
		c->fs->alloc_rebuild_pending = false;
		c->res->fixed += found;
		fsck_say(c,
			 "%salloc: keys rewritten from the extents and nodes: rebuild marker "
			 "removed",
			 found ? "fixed: " : "");
		return;
	}
	c->res->left += found;
	if (may_repair(c))
		fsck_say(c,
			 "not fixed: alloc: rebuild marker kept (%s): every open marks the "
			 "space in use from the extents and nodes until fsck -y removes it",
			 alloc_clean ? tfs_err_str(ret) : "alloc problems left above");
}

static int check_alloc(struct fsck *c)
{
	struct fsck_alloc a = { .c = c };
	unsigned left = c->res->left;
	unsigned ids;
	int ret = alloc_collect(c, &a) ?: alloc_read_keys(&a, FA_USER)
					       ?: alloc_collect_nodes(c, &a) ?: split_markers(c->fs, &ids);

	if (ret)
		goto out;
	/* Not an error by itself: what it left wrong is said below. */
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (ids & (1U << id))
			fsck_say(c,
				 "btree %s: a write-back was interrupted (split marker): the next "
				 "writable open rewrites the btree alloc keys",
				 tfs_btree_id_str(id));
	if (a.nr[FA_USER])
		qsort(a.blks[FA_USER], a.nr[FA_USER], sizeof(*a.blks[FA_USER]), blk_cmp);
	alloc_check_double(c, &a);
	ret = alloc_check_owner(c, &a, FA_USER) ?: check_node_space(c, &a, true);
	if (ret)
		goto out;
	for (unsigned dev = 0; dev < c->fs->nr_devices; dev++)
		acct_check(c, TFS_ACCT_user_blocks, dev, a.blocks[FA_USER][dev]);
	acct_check(c, TFS_ACCT_inodes, 0, a.inodes);
	if (c->alloc_marker)
		alloc_marker_done(c, c->res->left == left);
out:
	fa_free(&a);
	return ret;
}

/* The trees whose split markers are in the alloc btree (bit per btree id). */
static int split_markers(struct tfs_fs *fs, unsigned *ids)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	*ids = 0;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_alloc, TFS_POS(TFS_ALLOC_SPLIT_INODE, 0),
			    TFS_POS(TFS_ALLOC_SPLIT_INODE, TFS_BTREE_NR - 1));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		*ids |= 1U << le64_to_cpu(k->offset);
	tfs_btree_iter_exit(&iter);
	return ret;
}

int tfs_fsck_split_writeback(struct tfs_fs *fs)
{
	static const struct tfs_fsck_opts o = { .repair = true, .quiet = true };
	struct tfs_fsck_result res = { 0 };
	struct fsck c = { .fs = fs, .opts = &o, .res = &res };
	struct fsck_alloc a = { .c = &c };
	struct tfs_btree_trans trans;
	struct printbuf names = PRINTBUF;
	unsigned ids;
	int ret = split_markers(fs, &ids);

	if (ret || !ids || tfs_posix_writable(fs))
		return ret;
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (ids & (1U << id))
			prt_printf(&names, "%s%s", names.pos ? ", " : "", tfs_btree_id_str(id));
	/* The user keys only say which blocks data marks (no extents leaf is read). */
	ret = alloc_read_keys(&a, FA_USER) ?: check_node_space(&c, &a, false);
	fa_free(&a);
	if (!ret && !res.left) {
		/* After the repairs: a crash before this commit repairs again. */
		tfs_trans_init(&trans, fs);
		for (unsigned id = 0; id < TFS_BTREE_NR && !ret; id++)
			if (ids & (1U << id))
				ret = tfs_trans_delete(&trans, TFS_BTREE_alloc,
						       TFS_POS(TFS_ALLOC_SPLIT_INODE, id));
		ret = ret ?: tfs_trans_commit(&trans, 0, NULL);
		tfs_trans_exit(&trans);
	}
	fprintf(stderr,
		"btree %s: interrupted write-back: btree alloc keys rewritten from the nodes "
		"(%u wrong, %u left)%s%s\n",
		printbuf_str(&names), res.found, res.left, ret ? ": " : "",
		ret ? tfs_err_str(ret) : "");
	printbuf_exit(&names);
	return ret;
}

/* --- reachability --- */

static int edge_cmp(const void *a, const void *b)
{
	const struct fsck_edge *x = a, *y = b;

	return x->dir < y->dir ? -1 : x->dir > y->dir;
}

static int mark_reachable(struct fsck *c)
{
	tfs_ino_t *stack = NULL;
	size_t nr = 0, size = 0;
	struct fsck_ino *root = fsck_ino(c, TFS_ROOT_INO);
	int ret = 0;

	if (!root) {
		fsck_err(c, "inode %d: the root directory does not exist", TFS_ROOT_INO);
		c->res->left++;
		return 0;
	}
	if (c->nr_edges)
		qsort(c->edges, c->nr_edges, sizeof(*c->edges), edge_cmp);
	root->reachable = true;
	ret = grow((void **)&stack, &size, nr, sizeof(*stack));
	if (ret)
		return ret;
	stack[nr++] = TFS_ROOT_INO;
	while (nr) {
		tfs_ino_t dir = stack[--nr];
		size_t l = 0, r = c->nr_edges;

		while (l < r) { /* first edge of dir */
			size_t m = l + (r - l) / 2;

			if (c->edges[m].dir < dir)
				l = m + 1;
			else
				r = m;
		}
		for (; l < c->nr_edges && c->edges[l].dir == dir; l++) {
			struct fsck_ino *t = fsck_ino(c, c->edges[l].ino);

			if (!t || t->reachable)
				continue;
			t->reachable = true;
			if (!S_ISDIR(t->mode))
				continue;
			ret = grow((void **)&stack, &size, nr, sizeof(*stack));
			if (ret)
				goto out;
			stack[nr++] = t->ino;
		}
	}
out:
	free(stack);
	return ret;
}

/* --- repairs of inodes --- */

/* Rewrites inode ino with edit(&ui, v) applied, in a transaction of its own. */
static int repair_inode(struct fsck *c, tfs_ino_t ino,
			void (*edit)(struct tfs_inode_unpacked *ui, u64 v), u64 v)
{
	struct tfs_inode_mem *im;
	struct tfs_inode_unpacked ui;
	struct tfs_btree_trans trans;
	u64 seq;
	int ret = tfs_iget_locked(c->fs, ino, true, &im);

	if (ret)
		return ret;
	ui = im->ui;
	edit(&ui, v);
	tfs_posix_trans_init(&trans, c->fs);
	ret = tfs_inode_update(&trans, im, &ui) ?: tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (!ret)
		tfs_inode_committed(im, &ui, seq, false);
	tfs_iput_unlock(c->fs, im);
	return ret;
}

static void edit_nlink(struct tfs_inode_unpacked *ui, u64 nlink)
{
	ui->nlink = (u32)nlink;
	ui->ctime = tfs_now_ns();
}

static void edit_blocks(struct tfs_inode_unpacked *ui, u64 blocks)
{
	ui->blocks = blocks;
}

static int set_nlink(struct fsck *c, tfs_ino_t ino, u32 nlink)
{
	return repair_inode(c, ino, edit_nlink, nlink);
}

static int set_blocks(struct fsck *c, tfs_ino_t ino, u64 blocks)
{
	return repair_inode(c, ino, edit_blocks, blocks);
}

/* Removes an inode with nlink 0 nobody has open; -EBUSY when open. */
static int reclaim(struct fsck *c, tfs_ino_t ino)
{
	struct tfs_posix *p = tfs_posix(c->fs);
	struct tfs_inode_mem *im;
	bool open;
	int ret = tfs_iget_locked(c->fs, ino, true, &im);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->table_lock);
	open = im->open_count;
	pthread_mutex_unlock(&p->table_lock);
	if (open)
		ret = -EBUSY;
	else if (im->ui.nlink)
		ret = -EINVAL;
	else
		ret = tfs_inode_remove(c->fs, im);
	tfs_iput_unlock(c->fs, im);
	return ret;
}

/* /lost+found's inode, made when missing. */
static int lost_and_found(struct fsck *c, tfs_ino_t *ino)
{
	static const struct tfs_ctx root = { 0 };
	struct tfs_stat st;
	int ret = tfs_lookup(c->fs, TFS_ROOT_INO, "lost+found", 10, &st);

	if (ret == -ENOENT) {
		ret = tfs_mkdir(c->fs, &root, TFS_ROOT_INO, "lost+found", 10, 0700, &st);
		if (!ret)
			fsck_say(c, "made /lost+found (inode %llu)", (unsigned long long)st.ino);
	}
	if (!ret && !S_ISDIR(st.mode))
		ret = -ENOTDIR;
	*ino = st.ino;
	return ret;
}

/* Names a lost non-directory ino "#INO" in /lost+found, nlink 1. */
static int to_lost_and_found(struct fsck *c, tfs_ino_t ino)
{
	struct tfs_inode_mem *ims[2] = { NULL, NULL };
	struct tfs_inode_unpacked ui, dui;
	struct tfs_btree_trans trans;
	char name[32];
	tfs_ino_t lf;
	u64 seq;
	int ret = lost_and_found(c, &lf);

	if (ret)
		return ret;
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)ino);
	ret = tfs_iget(c->fs, ino, &ims[0]);
	if (ret)
		return ret;
	ret = tfs_iget(c->fs, lf, &ims[1]);
	if (ret) {
		tfs_iput(c->fs, ims[0]);
		return ret;
	}
	ret = tfs_ilock_many(c->fs, ims, 2);
	if (ret)
		goto out_put;
	ui = ims[0]->ui;
	dui = ims[1]->ui;
	ui.nlink = 1;
	if (S_ISDIR(ui.mode)) {
		ui.nlink = 2; /* its subdirectories are counted again by the next run */
		ui.parent = lf;
		dui.nlink++;
	}
	ui.ctime = dui.mtime = dui.ctime = tfs_now_ns();
	tfs_posix_trans_init(&trans, c->fs);
	ret = tfs_dirent_insert(&trans, ims[1], name, strlen(name), ino, tfs_mode_to_dtype(ui.mode),
				NULL) ?:
	      tfs_inode_update(&trans, ims[0], &ui) ?: tfs_inode_update(&trans, ims[1], &dui) ?:
	      (ui.nlink ? tfs_orphan_del(&trans, ino) : 0) ?: tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (!ret) {
		tfs_inode_committed(ims[0], &ui, seq, false);
		tfs_inode_committed(ims[1], &dui, seq, false);
	}
	tfs_iunlock_many(ims, 2);
out_put:
	tfs_iput(c->fs, ims[0]);
	tfs_iput(c->fs, ims[1]);
	return ret;
}

static void check_inodes(struct fsck *c)
{
	for (size_t i = 0; i < c->nr_inodes; i++) {
		struct fsck_ino *e = &c->inodes[i];
		unsigned long long ino = e->ino;
		bool dir = S_ISDIR(e->mode);
		u32 want = e->links + (dir && e->links ? 1 : 0);

		if (e->ino == TFS_ROOT_INO)
			want = e->links + 2; /* the root names itself ("." and "..") */
		if (S_ISREG(e->mode) && e->ext_blocks != e->blocks) {
			fsck_err(c, "inode %llu: blocks %llu, but its extents hold %llu", ino,
				 (unsigned long long)e->blocks, (unsigned long long)e->ext_blocks);
			if (may_repair(c))
				fsck_fixed(c, set_blocks(c, e->ino, e->ext_blocks),
					   "blocks recounted", e->ino);
			else
				c->res->left++;
		}
		if (!e->links && e->ino != TFS_ROOT_INO) {
			if (!e->nlink && e->orphan) {
				/* Pending cleanup: the next writable open (or this repair) finishes it. */
				if (c->opts->verbose)
					fsck_say(c,
						 "inode %llu: orphan with nlink 0, cleanup pending",
						 ino);
				if (may_repair(c)) {
					int ret = reclaim(c, e->ino);

					if (!ret)
						fsck_say(c, "inode %llu: orphan reclaimed", ino);
				}
				continue;
			}
			if (!e->nlink) {
				fsck_err(c,
					 "inode %llu: nlink 0, no dirent, not on the orphan list",
					 ino);
				if (may_repair(c))
					fsck_fixed(c, reclaim(c, e->ino), "reclaimed", e->ino);
				else
					c->res->left++;
				continue;
			}
			fsck_err(c, "inode %llu: nlink %u, but no dirent points to it (lost)", ino,
				 e->nlink);
			if (may_repair(c))
				fsck_fixed(c, to_lost_and_found(c, e->ino), "moved to /lost+found",
					   e->ino);
			else
				c->res->left++;
			continue;
		}
		if (e->nlink != want) {
			if (dir)
				fsck_err(
					c,
					"inode %llu: nlink %u, but %u dirent(s) and %u subdirectories "
					"make %u",
					ino, e->nlink, e->ino == TFS_ROOT_INO ? 0 : 1,
					e->links - (e->ino == TFS_ROOT_INO ? 0 : 1), want);
			else
				fsck_err(c, "inode %llu: nlink %u, but %u dirent(s) point to it",
					 ino, e->nlink, e->links);
			if (may_repair(c))
				fsck_fixed(c, set_nlink(c, e->ino, want), "nlink set", e->ino);
			else
				c->res->left++;
		}
		if (e->orphan_unlinked && e->links)
			fsck_say(c, "inode %llu: named, but on the orphan list as unlinked", ino);
		if (dir && !e->reachable) {
			fsck_err(c, "directory %llu: not reachable from the root", ino);
			c->res->left++;
		}
	}
}

/*
 * A degraded check: what it could not see, member by member.  Every key is
 * on the present members (a btree node none of whose copies is present
 * stops the check, as a damaged one), and every repair is of keys, so a
 * repair never needs the missing member; its copies of nodes and its file
 * data are not read (fsck reads no file data anyway), and an extent with
 * no copy elsewhere is unreadable until it returns (not a problem: the
 * member is missing, not the data lost).
 */
static void say_missing(struct fsck *c)
{
	for (unsigned dev = 0; dev < c->fs->nr_devices; dev++) {
		if (!dev_missing(c, dev))
			continue;
		c->res->missing_members++;
		fsck_say(c,
			 "member %u is missing: not checked: its copies of %llu btree node(s), "
			 "the file data of %llu extent(s) with a copy there",
			 dev, (unsigned long long)c->missing[dev].nodes,
			 (unsigned long long)c->missing[dev].extents);
		if (c->missing[dev].only)
			fsck_say(c,
				 "member %u is missing: %llu extent(s) (%llu blocks) have no copy "
				 "elsewhere: their data reads only once the member is back",
				 dev, (unsigned long long)c->missing[dev].only,
				 (unsigned long long)c->missing[dev].only_blocks);
	}
}

int tfs_fsck(struct tfs_fs *fs, const struct tfs_fsck_opts *opts, struct tfs_fsck_result *res)
{
	static const struct tfs_fsck_opts defaults = { 0 };
	struct tfs_fsck_result tmp;
	struct fsck c = { .fs = fs, .opts = opts ?: &defaults, .res = res ?: &tmp };
	int ret;

	memset(c.res, 0, sizeof(*c.res));
	if (c.opts->repair && tfs_posix_writable(fs))
		fsck_say(&c, "the filesystem is read-only: checking only");
	ret = check_btrees(&c) ?: collect_inodes(&c) ?: check_symlinks(&c) ?: check_orphans(&c) ?:
	      check_dirents(&c)
		?: check_xattrs(&c) ?: check_extents(&c) ?: mark_reachable(&c);
	if (!ret)
		check_inodes(&c);
	if (!ret)
		ret = check_alloc(&c); /* after the repairs that remove extents */
	if (!ret)
		say_missing(&c);
	if (!ret && c.opts->verbose)
		fsck_say(&c,
			 "%llu inodes, %llu dirents, %llu extents, %llu orphans: %u problems, "
			 "%u fixed",
			 (unsigned long long)c.res->inodes, (unsigned long long)c.res->dirents,
			 (unsigned long long)c.res->extents, (unsigned long long)c.res->orphans,
			 c.res->found, c.res->fixed);
	free(c.inodes);
	free(c.edges);
	free(c.phys);
	free(c.lost);
	return ret;
}
