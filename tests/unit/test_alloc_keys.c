// SPDX-License-Identifier: GPL-2.0
/*
 * fs/alloc_keys.c: the alloc and accounting keys follow the extents and
 * inodes through writes, overwrites, punches, truncates and unlinks (fsck
 * compares them block by block); open builds the allocator from them
 * without reading a single extents leaf; filling the filesystem and
 * deleting everything leaves no alloc key and no space used by data.
 * Btree node space: every tree's nodes but the alloc btree's are in btree
 * alloc keys, which open reads instead of walking the nodes; a power cut at
 * any write of a write-back (node copies, flushes, the entry with the root
 * and the keys) leaves keys that fsck finds exact.  The inode count of
 * statfs is the accounting key; open reads one inodes leaf.
 * (Power cuts: test_posix_crash's fsck after every cut checks the alloc
 * keys against the extents too.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <linux/falloc.h>

#include "fs/alloc.h"
#include "fs/btree.h"
#include "fs/btree_types.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "fs/fsck.h"
#include "fault_test.h"
#include "lib/fault_point.h"
#include "posix_test.h"

static struct pt T;

static int setup(void **state)
{
	/* 16 KiB buckets: 16 KiB nodes, so a few thousand extents make several leaves. */
	struct pt_geometry g = { .size = 48ULL << 20, .bucket_size = 16384 };

	return pt_mkfs(&T, &g) ? -1 : 0;
}

static int setup_two(void **state)
{
	struct pt_geometry g = { .nr_devs = 2,
				 .size = 48ULL << 20,
				 .metadata_replicas = 2,
				 .data_replicas = 2,
				 .data_replicas_required = 1 };

	return pt_mkfs(&T, &g) ? -1 : 0;
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

static u64 acct_v(enum tfs_acct_kind kind)
{
	u64 v;

	assert_int_equal(tfs_acct_read(T.fs, kind, 0, &v), 0);
	return v;
}

/* Alloc keys of data type `type` in the alloc btree, and the sum of their used. */
static unsigned alloc_keys_of(enum tfs_alloc_data_type type, u64 *used)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	unsigned nr = 0;
	int ret;

	*used = 0;
	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_alloc, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		if (k->type == TFS_BKEY_alloc &&
		    ((const struct tfs_alloc_key *)tfs_bkey_val(k))->data_type == type) {
			nr++;
			*used += le32_to_cpu(((const struct tfs_alloc_key *)tfs_bkey_val(k))->used);
		}
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	return nr;
}

static unsigned alloc_keys(u64 *used)
{
	return alloc_keys_of(TFS_ALLOC_DATA_user, used);
}

static u64 file_blocks(const char *name)
{
	struct tfs_stat st;

	assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
	return st.blocks * 512 / T.fs->block_size;
}

static void test_keys_follow_extents(void **state)
{
	struct tfs_file *f;
	static u8 buf[256 << 10];
	u64 used, bs = T.fs->block_size;

	assert_int_equal(acct_v(TFS_ACCT_inodes), 1); /* mkfs's root */
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 0);
	assert_int_equal(pt_create(&T, 1, "a", &f), 0);
	assert_int_equal(acct_v(TFS_ACCT_inodes), 2);
	pt_fill(buf, sizeof(buf), 1, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), sizeof(buf) / bs);
	/* An overwrite in the middle: new blocks in, the old ones out, same count. */
	assert_int_equal(tfs_write(T.fs, f, buf, 3 * bs, 5 * bs), (ssize_t)(3 * bs));
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), sizeof(buf) / bs);
	/* A hole punched, a truncate down, a fallocate (unwritten space counts). */
	assert_int_equal(
		tfs_fallocate(T.fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * bs, 4 * bs),
		0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), sizeof(buf) / bs - 4);
	struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE, .size = 20 * bs + 100 };

	assert_int_equal(tfs_setattr(T.fs, f->im->ino, f, &sa, NULL), 0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 21 - 4);
	assert_int_equal(tfs_fallocate(T.fs, f, 0, 100 * bs, 8 * bs), 0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 21 - 4 + 8);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), file_blocks("a"));
	alloc_keys(&used);
	assert_int_equal(used, acct_v(TFS_ACCT_user_blocks));
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 21 - 4 + 8);
	/* Unlink: every alloc key goes, and the counters with them. */
	assert_int_equal(tfs_unlink(T.fs, 1, "a", 1), 0);
	assert_int_equal(alloc_keys(&used), 0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 0);
	assert_int_equal(acct_v(TFS_ACCT_inodes), 1);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Open builds the allocator from node pointers and alloc keys: no extents leaf is read. */
static void test_open_reads_no_extents_leaf(void **state)
{
	struct tfs_file *f;
	struct statvfs before, after;
	u64 bs = T.fs->block_size, r0, r1;
	u8 blk[4096];
	unsigned nr = 3000;

	assert_true(bs <= sizeof(blk));
	assert_int_equal(pt_create(&T, 1, "sparse", &f), 0);
	/* Every other block: one extent each, several leaves of extents. */
	for (unsigned i = 0; i < nr; i++) {
		pt_fill(blk, bs, 2, i);
		assert_int_equal(tfs_write(T.fs, f, blk, bs, 2 * i * bs), (ssize_t)bs);
	}
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_btree_write_all(T.fs), 0); /* every node has its place */
	assert_int_equal(tfs_statfs(T.fs, &before), 0);
	assert_int_equal(pt_reopen(&T), 0);
	r0 = T.fs->btrees[TFS_BTREE_extents].c.nodes_read;
	assert_int_equal(tfs_statfs(T.fs, &after), 0);
	/* The same space in use as before the stop, to the block. */
	assert_int_equal(after.f_bfree, before.f_bfree);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), nr);
	/* Now read every extent: the leaves come in only now. */
	assert_int_equal(tfs_btree_verify(T.fs, TFS_BTREE_extents), 0);
	r1 = T.fs->btrees[TFS_BTREE_extents].c.nodes_read;
	fprintf(stderr, "extents nodes read: %llu at open, %llu after a full walk\n",
		(unsigned long long)r0, (unsigned long long)r1);
	assert_true(r1 >= r0 + 4); /* the leaves (several) */
	assert_true(r0 <= 1);	   /* the root (interior) only */
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Fill with files, delete them all: no alloc key left, the space back after a reopen. */
static void test_fill_delete(void **state)
{
	static u8 w[64 << 10];
	struct statvfs empty, full, again;
	char name[32];
	unsigned nr = 0;
	u64 used;
	ssize_t ret;

	assert_int_equal(tfs_statfs(T.fs, &empty), 0);
	pt_fill(w, sizeof(w), 3, 0);
	for (;; nr++) {
		struct tfs_file *f;

		snprintf(name, sizeof(name), "f%u", nr);
		if (pt_create(&T, 1, name, &f))
			break;
		ret = tfs_write(T.fs, f, w, sizeof(w), 0);
		assert_int_equal(tfs_release(T.fs, f), 0);
		if (ret != (ssize_t)sizeof(w))
			break;
	}
	assert_true(nr > 100);
	assert_int_equal(tfs_statfs(T.fs, &full), 0);
	assert_true(full.f_bfree < empty.f_bfree / 8);
	assert_int_equal(pt_fsck(T.fs), 0);
	alloc_keys(&used);
	assert_int_equal(used, acct_v(TFS_ACCT_user_blocks));
	for (unsigned i = 0; i <= nr; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		tfs_unlink(T.fs, 1, name, strlen(name));
	}
	assert_int_equal(alloc_keys(&used), 0);
	assert_int_equal(acct_v(TFS_ACCT_user_blocks), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(alloc_keys(&used), 0);
	assert_int_equal(tfs_statfs(T.fs, &again), 0);
	/* Data space is all back; nodes may sit elsewhere (+- a few nodes). */
	assert_true(again.f_bfree + 64 >= empty.f_bfree);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Deleting while a member is missing keeps its alloc keys in step too (no leak on return). */
static void test_degraded_delete(void **state)
{
	static u8 w[64 << 10];
	struct tfs_file *f;
	u64 v;

	pt_fill(w, sizeof(w), 4, 0);
	assert_int_equal(pt_create(&T, 1, "a", &f), 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), (ssize_t)sizeof(w));
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_user_blocks, 1, &v), 0);
	assert_int_equal(v, sizeof(w) / T.fs->block_size);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.degraded = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0); /* member 1 missing */
	assert_int_equal(tfs_unlink(T.fs, 1, "a", 1), 0);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_user_blocks, 1, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.degraded = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Btree alloc keys and the blocks they mark (member 0). */
static unsigned btree_keys(u64 *used)
{
	return alloc_keys_of(TFS_ALLOC_DATA_btree, used);
}

static int count_node(void *ctx, const struct tfs_btree_ptr *ptr)
{
	*(u64 *)ctx += ptr->nr_ptrs;
	return 0;
}

/* Node copies on disk of every tree but the alloc btree (after a write-back). */
static u64 recorded_nodes(void)
{
	u64 nr = 0;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (id != TFS_BTREE_alloc)
			assert_int_equal(tfs_btree_node_locations(T.fs, id, count_node, &nr), 0);
	return nr;
}

static int first_node(void *ctx, const struct tfs_btree_ptr *ptr)
{
	if (ptr->nr_ptrs && !*(u64 *)ctx)
		*(u64 *)ctx = le64_to_cpu(ptr->ptrs[0].offset);
	return 0;
}

/* Files enough for several inodes and dirents leaves (16 KiB nodes). */
static void make_files(unsigned nr, unsigned seed)
{
	char name[32];

	for (unsigned i = 0; i < nr; i++) {
		struct tfs_file *f;
		u8 blk[512];

		snprintf(name, sizeof(name), "n%u_%u", seed, i);
		assert_int_equal(pt_create(&T, 1, name, &f), 0);
		pt_fill(blk, sizeof(blk), seed, i);
		assert_int_equal(tfs_write(T.fs, f, blk, sizeof(blk), 0), (ssize_t)sizeof(blk));
		assert_int_equal(tfs_release(T.fs, f), 0);
	}
}

/*
 * Node space is in the btree alloc keys, with its counter, and open takes
 * it from them: a node whose key is removed is free space after a reopen
 * (open walks no tree but the alloc btree).
 */
static void test_node_space_from_keys(void **state)
{
	struct statvfs before, after;
	struct tfs_bkey_buf ak;
	struct tfs_btree_trans trans;
	struct tfs_fsck_opts o = { .repair = true };
	struct tfs_fsck_result res;
	u64 used, node = 0, bs = T.fs->block_size, nb = T.fs->node_size / bs;
	u32 bsz = T.fs->alloc.devs[0].bucket_size;
	struct tfs_bpos pos;

	make_files(400, 1);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	btree_keys(&used);
	assert_int_equal(used, recorded_nodes() * nb);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_btree_blocks, 0, &node), 0);
	assert_int_equal(node, used);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);

	/* The dirents root's key goes (its bucket holds only that node: 16 KiB buckets). */
	node = 0;
	assert_int_equal(tfs_btree_node_locations(T.fs, TFS_BTREE_dirents, first_node, &node), 0);
	pos = tfs_alloc_pos(TFS_ALLOC_DATA_btree, 0, node / bsz);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, pos, &ak), 0);
	assert_int_equal(le32_to_cpu(((struct tfs_alloc_key *)tfs_bkey_val(&ak.k))->used), nb);
	assert_int_equal(tfs_statfs(T.fs, &before), 0);
	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_alloc, pos), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_statfs(T.fs, &after), 0);
	assert_int_equal(after.f_bfree, before.f_bfree + nb);
	/* fsck says so and puts it back. */
	assert_int_equal(tfs_fsck(T.fs, &o, &res), 0);
	assert_int_equal(res.found, 1);
	assert_int_equal(res.fixed, 1);
	assert_int_equal(tfs_statfs(T.fs, &after), 0);
	assert_int_equal(after.f_bfree, before.f_bfree);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* After a reopen: a write-back goes to the space the open found free, and fsck agrees. */
static void write_back_check_stop(void)
{
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_stop(&T), 0);
}

/*
 * A power cut at each write of a write-back that allocates nodes (splits
 * of the inodes and dirents trees, copies of every changed node): after
 * the reopen the btree alloc keys hold exactly the nodes of the durable
 * trees (fsck: nothing leaked, nothing unmarked) and the files are there.
 */
static void test_power_cut_node_alloc(void **state)
{
	static const char *const policies[] = { "none", "prefix", "random", "torn" };
	char template[160], rule[96];
	unsigned cuts = 0;
	bool lng = getenv("TFS_LONG"); /* more files: more splits, more writes to cut */

	make_files(100, 2);
	assert_int_equal(pt_stop(&T), 0);
	snprintf(template, sizeof(template), "%s/template", T.dir);
	pt_copy_file(T.path[0], template);
	for (u64 k = 1;; k++) {
		struct tfs_stat st;
		bool cut;
		int ret;

		pt_copy_file(template, T.path[0]);
		assert_int_equal(pt_open(&T), 0);
		make_files(lng ? 150 : 60, 3);
		assert_int_equal(tfs_syncfs(T.fs), 0); /* the files are durable: the journal */
		snprintf(rule, sizeof(rule), "write nth=%llu powercut=%s", (unsigned long long)k,
			 policies[k % 4]);
		tfs_faultdev_set_seed(pt_bdev(&T, 0), k);
		assert_true(pt_rule(&T, 0, rule) >= 0);
		ret = tfs_btree_write_all(T.fs);
		cut = tfs_faultdev_rule_fired(pt_bdev(&T, 0), 0) > 0;
		assert_true(cut || !ret);
		ret = pt_stop(&T); /* the cut may come in its writes too */
		cut |= ret != 0;
		assert_int_equal(pt_open(&T), 0);
		assert_int_equal(pt_fsck(T.fs), 0);
		assert_int_equal(pt_lookup(&T, 1, lng ? "n3_149" : "n3_59", &st), 0);
		assert_int_equal(pt_lookup(&T, 1, "n2_0", &st), 0);
		/* The space the reopen found free is free: more nodes go there. */
		make_files(10, 4);
		write_back_check_stop();
		if (!cut)
			break;
		cuts++;
	}
	unlink(template);
	fprintf(stderr, "node allocation: %u power cuts\n", cuts);
	assert_true(cuts > 5);
}

/*
 * Keys for more node copies than one journal entry holds (forced by a fault
 * point): sets, root entry and clears go in entries of their own, and the
 * keys are still exact after the write-back and after a reopen.
 */
static void test_split_node_keys(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };
	u64 used, v;

	make_files(300, 6);
	assert_int_equal(tfs_fault_point_arm("ckpt:alloc_keys_too_big", &arm), 0);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	make_files(100, 7);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	tfs_fault_points_reset();
	assert_int_equal(pt_fsck(T.fs), 0);
	btree_keys(&used);
	assert_int_equal(used, recorded_nodes() * (T.fs->node_size / T.fs->block_size));
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_btree_blocks, 0, &v), 0);
	assert_int_equal(v, used);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * fsck -y on a live filesystem: a write-back running between fsck's compare
 * and its repair of a node space key (forced by a fault point) moves the
 * node the repair is about.  The repair must not write what the compare
 * saw over the write-back's change: it is refused and compared again, and
 * the keys end exact.
 */
static void test_repair_races_writeback(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT };
	struct tfs_fsck_opts o = { .repair = true };
	struct tfs_fsck_result res;
	struct tfs_btree_trans trans;
	u64 node = 0;
	u32 bsz = T.fs->alloc.devs[0].bucket_size;

	make_files(400, 1);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	/* The dirents root's key goes: the repair will put it back. */
	assert_int_equal(tfs_btree_node_locations(T.fs, TFS_BTREE_dirents, first_node, &node), 0);
	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_alloc,
					  tfs_alloc_pos(TFS_ALLOC_DATA_btree, 0, node / bsz)),
			 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	/* Dirents changed: the write-back moves the root (and the leaf) elsewhere. */
	make_files(3, 2);
	assert_int_equal(tfs_fault_point_arm("fsck:node_space_race", &arm), 0);
	assert_int_equal(tfs_fsck(T.fs, &o, &res), 0);
	assert_true(tfs_fault_point_fired("fsck:node_space_race") > 0);
	tfs_fault_points_reset();
	assert_int_equal(res.left, 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* A big opaque key in the xattrs btree (fsck cross-checks nothing there): ~8 per node. */
static void split_key(struct tfs_bkey_buf *buf, unsigned i)
{
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(1, i), 1800);

	memset(v, (int)(i * 7 + 1), 1800);
}

/*
 * A write-back whose btree alloc keys do not fit one journal entry commits
 * them in several: the sets, the root entry, the clears (forced here by a
 * fault point; each piece flushed on its own, so every prefix of them is a
 * state a crash can leave).  A power cut at each journal write of it, under
 * every policy: after the reopen the keys hold exactly the nodes of the
 * durable trees (fsck finds nothing leaked, nothing missing), and the
 * reopen after a cut between the pieces said it repaired them.
 */
static void test_power_cut_split_node_keys(void **state)
{
	static const char *const policies[] = { "none", "prefix", "random", "torn" };
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf kb;
	char template[160], rule[96];
	unsigned nr = 480, cuts = 0, repaired = 0;

	/* A tree of some 60 leaves, all written back. */
	tfs_trans_init(&trans, T.fs);
	for (unsigned i = 0; i < nr; i++) {
		split_key(&kb, i);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &kb.k), 0);
		if (i % 8 == 7)
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	}
	tfs_trans_exit(&trans);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	assert_int_equal(pt_stop(&T), 0);
	snprintf(template, sizeof(template), "%s/template", T.dir);
	pt_copy_file(T.path[0], template);
	for (u64 k = 1;; k++) {
		struct stderr_capture cap;
		struct tfs_bkey_buf got;
		bool cut;
		int ret;

		pt_copy_file(template, T.path[0]);
		assert_int_equal(pt_open(&T), 0);
		/* One small delete per leaf: every leaf changes. */
		tfs_trans_init(&trans, T.fs);
		for (unsigned i = 0; i < nr; i += 8)
			assert_int_equal(tfs_trans_delete(&trans, TFS_BTREE_xattrs, TFS_POS(1, i)),
					 0);
		assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
		tfs_trans_exit(&trans);
		assert_int_equal(tfs_syncfs(T.fs), 0); /* the deletes are durable: the journal */
		snprintf(rule, sizeof(rule), "write tag=journal nth=%llu powercut=%s",
			 (unsigned long long)k, policies[k % 4]);
		tfs_faultdev_set_seed(pt_bdev(&T, 0), k);
		assert_true(pt_rule(&T, 0, rule) >= 0);
		assert_int_equal(tfs_fault_point_arm("ckpt:alloc_keys_too_big", &arm), 0);
		assert_int_equal(tfs_fault_point_arm("ckpt:split_flush_pieces", &arm), 0);
		ret = tfs_btree_write_all(T.fs);
		cut = tfs_faultdev_rule_fired(pt_bdev(&T, 0), 0) > 0;
		assert_true(cut || !ret);
		ret = pt_stop(&T); /* the cut may come in its writes too */
		tfs_fault_points_reset();
		cut |= ret != 0;
		stderr_capture_start(&cap);
		ret = pt_open(&T);
		repaired += !!strstr(stderr_capture_end(&cap), "interrupted write-back");
		assert_int_equal(ret, 0);
		assert_int_equal(pt_fsck(T.fs), 0);
		assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_xattrs, TFS_POS(1, 1), &got), 0);
		assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_xattrs, TFS_POS(1, 8), &got),
				 -ENOENT);
		/* The space the reopen found free is free: the next write-back goes there. */
		split_key(&kb, 8);
		tfs_trans_init(&trans, T.fs);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &kb.k), 0);
		assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
		tfs_trans_exit(&trans);
		write_back_check_stop();
		if (!cut)
			break;
		cuts++;
	}
	unlink(template);
	fprintf(stderr, "split node keys: %u power cuts, %u repaired at open\n", cuts, repaired);
	assert_true(cuts > 5);
	assert_true(repaired > 0); /* some cut fell between the pieces */
}

/* statfs's inode count is the accounting key; open reads one inodes leaf, not all. */
static void test_inode_count(void **state)
{
	struct statvfs st;
	struct tfs_bkey_buf kb;
	struct tfs_accounting *v;
	struct tfs_btree_trans trans;
	u64 r0, r1;

	make_files(600, 5);
	assert_int_equal(tfs_statfs(T.fs, &st), 0);
	assert_int_equal(st.f_files - st.f_ffree, 601);
	assert_int_equal(tfs_btree_write_all(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	r0 = T.fs->btrees[TFS_BTREE_inodes].c.nodes_read;
	assert_int_equal(tfs_statfs(T.fs, &st), 0);
	assert_int_equal(st.f_files - st.f_ffree, 601);
	assert_int_equal(tfs_btree_verify(T.fs, TFS_BTREE_inodes), 0);
	r1 = T.fs->btrees[TFS_BTREE_inodes].c.nodes_read;
	fprintf(stderr, "inodes nodes read: %llu at open, %llu after a full walk\n",
		(unsigned long long)r0, (unsigned long long)r1);
	assert_true(r1 >= r0 + 4); /* the other leaves */
	assert_true(r0 <= 2);	   /* the root and the last leaf */
	/* The count is the key's: a wrong key shows (fsck repairs it). */
	v = tfs_bkey_init(&kb, TFS_BKEY_accounting, tfs_acct_pos(TFS_ACCT_inodes, 0), sizeof(*v));
	v->value = cpu_to_le64(1000);
	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_alloc, &kb.k), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(tfs_statfs(T.fs, &st), 0);
	assert_int_equal(st.f_files - st.f_ffree, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keys_follow_extents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_reads_no_extents_leaf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fill_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_degraded_delete, setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_node_space_from_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_power_cut_node_alloc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_split_node_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_power_cut_split_node_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_repair_races_writeback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inode_count, setup, teardown),
	};

	return pt_run_tests(tests);
}
