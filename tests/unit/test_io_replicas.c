// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for the replica paths of fs/io.c, on two members with
 * data_replicas 2: every extent has a copy on each member; a checksum
 * error on one copy is read from the other and repaired (and says so); a
 * member failing or vanishing during writes loses nothing and reads keep
 * working, before and after a degraded reopen; with data_replicas_required
 * 2, a member gone makes writes fail EROFS-class while reads work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs/extents.h"
#include "posix_test.h"

#define BS 4096
#define LEN (16 * BS)

static struct pt T;

static int setup_required(unsigned required)
{
	struct pt_geometry g = {
		.nr_devs = 2,
		.size = 64ULL << 20,
		.metadata_replicas = 2,
		.data_replicas = 2,
		.data_replicas_required = required,
	};

	return pt_mkfs(&T, &g);
}

static int setup(void **state)
{
	return setup_required(1);
}

static int setup_two_required(void **state)
{
	return setup_required(2);
}

static int teardown(void **state)
{
	T.opts.degraded = false;
	pt_cleanup(&T);
	return 0;
}

static void write_file(const char *name, u64 seed, struct tfs_stat *st)
{
	static u8 buf[LEN];
	struct tfs_file *f;

	assert_int_equal(pt_create(&T, 1, name, &f), 0);
	pt_fill(buf, LEN, seed, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, LEN, 0), LEN);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), st), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

static void check_file(const char *name, u64 seed)
{
	static u8 buf[LEN], want[LEN];
	struct tfs_file *f;

	assert_int_equal(pt_open_file(&T, 1, name, O_RDONLY, &f), 0);
	pt_fill(want, LEN, seed, 0);
	assert_int_equal(tfs_read(T.fs, f, buf, LEN, 0), LEN);
	assert_memory_equal(buf, want, LEN);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

static unsigned nr_copies(tfs_ino_t ino, u64 block, struct tfs_ext *e)
{
	struct tfs_bkey_buf kb;

	assert_int_equal(tfs_ext_find(T.fs, ino, block, block + 1, &kb, e), 0);
	return e->nr_ptrs;
}

static void test_two_copies_and_repair(void **state)
{
	struct tfs_stat st;
	struct tfs_ext e;
	u8 *blk = tfs_bdev_alloc_buf(NULL, BS), *good = tfs_bdev_alloc_buf(NULL, BS);
	u64 csum_errors, fallbacks;

	write_file("f", 1, &st);
	assert_int_equal(nr_copies(st.ino, 3, &e), 2);
	assert_true(e.ptrs[0].dev != e.ptrs[1].dev);
	check_file("f", 1);

	/* Flip a byte of block 3 in the first copy. */
	u64 off = e.ptrs[0].offset + (3 - e.start) * BS;
	struct tfs_bdev *b0 = pt_bdev(&T, e.ptrs[0].dev);

	assert_int_equal(tfs_bdev_read(b0, blk, BS, off, TFS_TAG_none), 0);
	memcpy(good, blk, BS);
	blk[77] ^= 1;
	assert_int_equal(tfs_bdev_write(b0, blk, BS, off, 0, TFS_TAG_none), 0);
	csum_errors = tfs_posix(T.fs)->c.data_csum_errors;
	fallbacks = tfs_posix(T.fs)->c.data_replica_fallbacks;
	check_file("f", 1); /* the right bytes, from the other copy */
	assert_int_equal(tfs_posix(T.fs)->c.data_csum_errors, csum_errors + 1);
	assert_int_equal(tfs_posix(T.fs)->c.data_replica_fallbacks, fallbacks + 1);
	/* Repaired: the first copy holds the good bytes again, no more errors. */
	assert_int_equal(tfs_bdev_read(b0, blk, BS, off, TFS_TAG_none), 0);
	assert_memory_equal(blk, good, BS);
	check_file("f", 1);
	assert_int_equal(tfs_posix(T.fs)->c.data_csum_errors, csum_errors + 1);
	/* Both copies bad: EIO, never wrong bytes. */
	for (unsigned r = 0; r < 2; r++) {
		struct tfs_bdev *b = pt_bdev(&T, e.ptrs[r].dev);
		u64 o = e.ptrs[r].offset + (5 - e.start) * BS;

		assert_int_equal(tfs_bdev_read(b, blk, BS, o, TFS_TAG_none), 0);
		blk[1] ^= 1;
		assert_int_equal(tfs_bdev_write(b, blk, BS, o, 0, TFS_TAG_none), 0);
	}
	{
		struct tfs_file *f;
		u8 buf[BS];

		assert_int_equal(pt_open_file(&T, 1, "f", O_RDONLY, &f), 0);
		assert_true(tfs_err_matches((int)tfs_read(T.fs, f, buf, BS, 5 * BS), EIO));
		assert_int_equal(tfs_read(T.fs, f, buf, BS, 4 * BS), BS);
		assert_int_equal(tfs_release(T.fs, f), 0);
	}
	free(blk);
	free(good);
}

/* A member whose data writes fail: writes go on with the other copy, no error. */
static void test_member_failing_writes(void **state)
{
	struct tfs_stat st;
	struct tfs_ext e;

	write_file("before", 2, &st);
	assert_true(pt_rule(&T, 1, "write tag=data every=1 fail=EIO") >= 0);
	write_file("during", 3, &st);
	assert_int_equal(nr_copies(st.ino, 0, &e), 1);
	assert_int_equal(e.ptrs[0].dev, 0);
	check_file("before", 2);
	check_file("during", 3);
	tfs_faultdev_clear_rules(pt_bdev(&T, 1));
	assert_int_equal(pt_reopen(&T), 0);
	check_file("before", 2);
	check_file("during", 3);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* A member that vanishes: nothing acknowledged is lost; a degraded reopen reads it all. */
static void test_member_vanishing(void **state)
{
	struct tfs_stat st;
	struct tfs_ext e;

	write_file("before", 4, &st);
	assert_true(pt_rule(&T, 1, "any vanish") >= 0);
	write_file("during", 5, &st);
	assert_int_equal(nr_copies(st.ino, 0, &e), 1);
	check_file("before", 4);
	check_file("during", 5);
	pt_stop(&T); /* may report the member */
	/* Open with the member missing (degraded). */
	T.opts.degraded = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0);
	check_file("before", 4);
	check_file("during", 5);
	assert_int_equal(pt_stop(&T), 0);
}

/*
 * With both members, an overwrite after a settled one lands in the blocks
 * it freed on each member, and counts as one allocation from space
 * released lately, as `tinyfs stats MNT alloc` lists it next to the
 * allocations (it counted one per replica: more than were made).
 */
static void test_overwrite_reuses_freed_space_on_each_member(void **state)
{
	struct tfs_file *f;
	struct tfs_ext e1, e2, e3;
	static u8 buf[BS];
	tfs_ino_t ino;
	u64 reused, allocs;

	assert_int_equal(pt_create(&T, 1, "tail", &f), 0);
	ino = tfs_file_ino(f);
	pt_fill(buf, BS, 8, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, BS, 0), BS);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(nr_copies(ino, 0, &e1), 2);
	assert_int_equal(tfs_write(T.fs, f, buf + 1, 100, 0), 100);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(nr_copies(ino, 0, &e2), 2);
	assert_int_equal(tfs_syncfs(T.fs), 0); /* e1's release is settled */
	reused = T.fs->alloc.nr_reused;
	allocs = T.fs->alloc.nr_allocs;
	assert_int_equal(tfs_write(T.fs, f, buf + 2, 100, 0), 100);
	assert_int_equal(nr_copies(ino, 0, &e3), 2);
	for (unsigned i = 0; i < 2; i++) {
		unsigned j = e1.ptrs[0].dev == e3.ptrs[i].dev ? 0 : 1;

		assert_int_equal(e3.ptrs[i].dev, e1.ptrs[j].dev);
		assert_int_equal(e3.ptrs[i].offset, e1.ptrs[j].offset);
	}
	assert_int_equal(T.fs->alloc.nr_allocs, allocs + 1);
	assert_int_equal(T.fs->alloc.nr_reused, reused + 1);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/*
 * Degraded (one member of two), an overwrite lands in the block the one
 * before it freed once that commit is settled, as with every member there
 * (fs/alloc.c).  Each data allocation asks for both replicas first, which
 * fails; that attempt used to take the released block off the reuse list,
 * so the retry with one replica went to fresh space.
 */
static void test_degraded_overwrite_reuses_freed_space(void **state)
{
	struct tfs_file *f;
	struct tfs_ext e1, e2, e3;
	static u8 buf[BS];
	tfs_ino_t ino;
	u64 reused;

	assert_int_equal(pt_stop(&T), 0);
	T.opts.degraded = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0);

	assert_int_equal(pt_create(&T, 1, "tail", &f), 0);
	ino = tfs_file_ino(f);
	pt_fill(buf, BS, 7, 0);
	assert_int_equal(tfs_write(T.fs, f, buf, BS, 0), BS);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(nr_copies(ino, 0, &e1), 1);
	assert_int_equal(tfs_write(T.fs, f, buf + 1, 100, 0), 100);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(nr_copies(ino, 0, &e2), 1);
	assert_true(e2.ptrs[0].offset != e1.ptrs[0].offset);
	assert_int_equal(tfs_syncfs(T.fs), 0); /* e1's release is settled */
	reused = T.fs->alloc.nr_reused;
	assert_int_equal(tfs_write(T.fs, f, buf + 2, 100, 0), 100);
	assert_int_equal(nr_copies(ino, 0, &e3), 1);
	assert_int_equal(e3.ptrs[0].dev, e1.ptrs[0].dev);
	assert_int_equal(e3.ptrs[0].offset, e1.ptrs[0].offset);
	assert_int_equal(T.fs->alloc.nr_reused, reused + 1);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_stop(&T), 0);
}

/* data_replicas_required 2 and a member gone: writes fail EROFS-class, reads work. */
static void test_too_few_members(void **state)
{
	struct tfs_stat st;
	struct tfs_file *f;
	u8 buf[BS];

	write_file("before", 6, &st);
	assert_true(pt_rule(&T, 1, "any vanish") >= 0);
	assert_int_equal(pt_open_file(&T, 1, "before", O_RDWR, &f), 0);
	int ret = (int)tfs_write(T.fs, f, buf, BS, 0);

	assert_true(tfs_err_matches(ret, EROFS));
	assert_int_equal(tfs_release(T.fs, f), 0);
	check_file("before", 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_two_copies_and_repair, setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_failing_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_vanishing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_few_members, setup_two_required, teardown),
		cmocka_unit_test_setup_teardown(test_overwrite_reuses_freed_space_on_each_member,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_degraded_overwrite_reuses_freed_space, setup,
						teardown),
	};

	return pt_run_tests(tests);
}
