// SPDX-License-Identifier: GPL-2.0
/*
 * fs/alloc_keys.c: the alloc and accounting keys follow the extents and
 * inodes through writes, overwrites, punches, truncates and unlinks (fsck
 * compares them block by block); open builds the allocator from them
 * without reading a single extents leaf; filling the filesystem and
 * deleting everything leaves no alloc key and no space used by data.
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
#include "fs/btree_types.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
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

/* Alloc keys (not accounting) in the alloc btree, and the sum of their used. */
static unsigned alloc_keys(u64 *used)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	unsigned nr = 0;
	int ret;

	*used = 0;
	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_alloc, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		if (k->type == TFS_BKEY_alloc) {
			nr++;
			*used += le32_to_cpu(((const struct tfs_alloc_key *)tfs_bkey_val(k))->used);
		}
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	return nr;
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keys_follow_extents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_reads_no_extents_leaf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fill_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_degraded_delete, setup_two, teardown),
	};

	return pt_run_tests(tests);
}
