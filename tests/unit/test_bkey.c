// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/bkey.c: names and their parsers, positions (text, parse,
 * successor and predecessor at the edges), key building, validation (each
 * rule names what is wrong and returns -TFS_ERR_bkey_invalid) and text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/bkey.h"
#include "fs/btree_format.h"
#include "fs/fs_format.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

static void test_names(void **state)
{
	assert_string_equal(tfs_btree_id_str(TFS_BTREE_extents), "extents");
	assert_string_equal(tfs_bkey_type_str(TFS_BKEY_dirent), "dirent");
	assert_null(tfs_btree_id_str(TFS_BTREE_NR));
	assert_null(tfs_bkey_type_str(200));
	assert_int_equal(tfs_btree_id_parse("alloc"), TFS_BTREE_alloc);
	assert_int_equal(tfs_btree_id_parse("nope"), -1);
	for (unsigned i = 0; i < TFS_BTREE_NR; i++)
		assert_int_equal(tfs_btree_id_parse(tfs_btree_id_str(i)), (int)i);
}

static void pos_text(struct tfs_bpos p, const char *want)
{
	struct printbuf out = PRINTBUF;

	tfs_bpos_to_text(&out, p);
	assert_string_equal(printbuf_str(&out), want);
	printbuf_exit(&out);
}

static void test_pos(void **state)
{
	struct tfs_bpos p;

	pos_text(TFS_POS(4096, 77), "4096:77");
	pos_text(TFS_POS_MAX, "POS_MAX");
	pos_text(TFS_POS_MIN, "0:0");
	assert_int_equal(tfs_bpos_parse("12:34", &p), 0);
	assert_true(tfs_bpos_eq(p, TFS_POS(12, 34)));
	assert_int_equal(tfs_bpos_parse("12", &p), 0);
	assert_true(tfs_bpos_eq(p, TFS_POS(12, 0)));
	assert_int_equal(tfs_bpos_parse("POS_MAX", &p), 0);
	assert_true(tfs_bpos_eq(p, TFS_POS_MAX));
	assert_int_equal(tfs_bpos_parse("POS_MIN", &p), 0);
	assert_true(tfs_bpos_eq(p, TFS_POS_MIN));
	assert_int_equal(tfs_bpos_parse("18446744073709551615:18446744073709551615", &p), 0);
	assert_true(tfs_bpos_eq(p, TFS_POS_MAX));
	const char *bad[] = { "",     ":",  "1:", ":1", "-1", "1:2:3", "18446744073709551616",
			      "0x10", " 1", "1 ", "a" };

	for (unsigned i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(tfs_bpos_parse(bad[i], &p), -EINVAL);
	assert_true(tfs_bpos_eq(tfs_bpos_successor(TFS_POS(1, UINT64_MAX)), TFS_POS(2, 0)));
	assert_true(tfs_bpos_eq(tfs_bpos_successor(TFS_POS_MAX), TFS_POS_MAX));
	assert_true(tfs_bpos_eq(tfs_bpos_predecessor(TFS_POS(2, 0)), TFS_POS(1, UINT64_MAX)));
	assert_true(tfs_bpos_eq(tfs_bpos_predecessor(TFS_POS_MIN), TFS_POS_MIN));
}

/* Validates k and checks the code and that the message contains want. */
static void expect_invalid(const struct tfs_bkey *k, size_t max, enum tfs_btree_id id, bool del_ok,
			   const char *want)
{
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_bkey_validate(k, max, id, del_ok, &err), -TFS_ERR_bkey_invalid);
	if (!strstr(printbuf_str(&err), want))
		fail_msg("message \"%s\" lacks \"%s\"", printbuf_str(&err), want);
	printbuf_exit(&err);
}

static void expect_valid(const struct tfs_bkey *k, enum tfs_btree_id id, bool del_ok)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_bkey_validate(k, tfs_bkey_bytes(k), id, del_ok, &err);

	if (ret)
		fail_msg("unexpected: %s", printbuf_str(&err));
	printbuf_exit(&err);
}

static void test_validate(void **state)
{
	struct tfs_bkey_buf b;
	struct tfs_btree_ptr *p;

	assert_non_null(tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(1, 2), 5));
	assert_int_equal(tfs_bkey_u64s(&b.k), 4);
	expect_valid(&b.k, TFS_BTREE_dirents, false);
	assert_null(tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(1, 2), TFS_BKEY_MAX_VAL_BYTES + 1));

	/* Sizes. */
	tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(1, 2), 8);
	expect_invalid(&b.k, 16, TFS_BTREE_inodes, false, "cut short");
	expect_invalid(&b.k, 24, TFS_BTREE_inodes, false, "u64s 4 not in 3..3");
	b.k.u64s = cpu_to_le16(2);
	expect_invalid(&b.k, 64, TFS_BTREE_inodes, false, "u64s 2");
	tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(1, 2), 8);
	b.k.pad1 = cpu_to_le32(1);
	expect_invalid(&b.k, 64, TFS_BTREE_inodes, false, "pad");

	/* Types. */
	tfs_bkey_init(&b, TFS_BKEY_deleted, TFS_POS(3, 4), 0);
	expect_valid(&b.k, TFS_BTREE_extents, true);
	expect_invalid(&b.k, 64, TFS_BTREE_extents, false, "deleted 3:4: type not allowed");
	tfs_bkey_init(&b, TFS_BKEY_deleted, TFS_POS(3, 4), 8);
	expect_invalid(&b.k, 64, TFS_BTREE_extents, true, "value of 8 bytes");
	tfs_bkey_init(&b, TFS_BKEY_dirent, TFS_POS(3, 4), 8);
	expect_invalid(&b.k, 64, TFS_BTREE_inodes, false, "not allowed in btree inodes");
	tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(3, 4), 8);
	b.k.type = 99;
	expect_invalid(&b.k, 64, TFS_BTREE_inodes, false, "unknown key type");

	/* btree_ptr. */
	p = tfs_bkey_init(&b, TFS_BKEY_btree_ptr, TFS_POS_MAX, tfs_btree_ptr_val_bytes(2));
	p->nr_ptrs = 2;
	p->level = 1;
	p->ptrs[0].dev = cpu_to_le32(0);
	p->ptrs[1].dev = cpu_to_le32(1);
	expect_valid(&b.k, TFS_BTREE_xattrs, false);
	p->ptrs[1].dev = cpu_to_le32(0);
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "same member 0");
	p->ptrs[1].dev = cpu_to_le32(1);
	p->nr_ptrs = 1;
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "for 1 pointers");
	p->nr_ptrs = 0;
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "nr_ptrs 0");
	p->nr_ptrs = 2;
	p->pad = cpu_to_le16(1);
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "btree_ptr POS_MAX: pad");
	p->pad = 0;
	p->ptrs[1].pad = cpu_to_le32(1);
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "pointer 1: pad");
	p->ptrs[1].pad = 0;
	p->level = TFS_BTREE_MAX_DEPTH;
	expect_invalid(&b.k, 128, TFS_BTREE_xattrs, false, "child level");
}

/*
 * This program calls nothing of the POSIX layer (fs/inode.c and friends):
 * when the key type ops were weak references, none of them was linked in
 * and an inode with a bad field passed as "inode of the right size".  Every
 * type's own checks must run here as in the daemon.
 */
static void test_validate_fs_types_without_posix(void **state)
{
	struct tfs_bkey_buf b;
	struct tfs_inode *v;

	for (unsigned t = 0; t < TFS_BKEY_TYPE_NR; t++)
		if (t != TFS_BKEY_cookie && !tfs_bkey_type_has_ops(t))
			fail_msg("key type %s has no ops in this program", tfs_bkey_type_str(t));
	assert_false(tfs_bkey_type_has_ops(TFS_BKEY_cookie));

	v = tfs_bkey_init(&b, TFS_BKEY_inode, TFS_POS(4096, 0), sizeof(*v));
	v->mode = cpu_to_le32(S_IFREG | 0644);
	v->nlink = cpu_to_le32(1);
	expect_valid(&b.k, TFS_BTREE_inodes, false);
	v->nlink = cpu_to_le32(TFS_LINK_MAX + 1);
	expect_invalid(&b.k, 256, TFS_BTREE_inodes, false, "inode 4096:0: nlink 65001 > 65000");
	v->nlink = cpu_to_le32(1);
	v->parent = cpu_to_le64(7);
	expect_invalid(&b.k, 256, TFS_BTREE_inodes, false, "parent set on a non-directory");

	/* Its text is the inode's, not hex. */
	v->parent = 0;
	struct printbuf out = PRINTBUF;

	tfs_bkey_to_text(&out, &b.k);
	assert_non_null(strstr(printbuf_str(&out), "mode 0100644 nlink 1"));
	printbuf_exit(&out);
}

static void key_text(const struct tfs_bkey *k, const char *want)
{
	struct printbuf out = PRINTBUF;

	tfs_bkey_to_text(&out, k);
	assert_string_equal(printbuf_str(&out), want);
	printbuf_exit(&out);
}

static void test_to_text(void **state)
{
	struct tfs_bkey_buf b;
	struct tfs_btree_ptr *p;
	u8 *v;

	tfs_bkey_init(&b, TFS_BKEY_deleted, TFS_POS(5, 6), 0);
	key_text(&b.k, "deleted 5:6 u64s 3");
	v = tfs_bkey_init(&b, TFS_BKEY_cookie, TFS_POS(5, 6), 9);
	for (unsigned i = 0; i < 9; i++)
		v[i] = (u8)(0xa0 + i);
	key_text(&b.k, "cookie 5:6 u64s 5: a0a1a2a3a4a5a6a7 a800000000000000");
	p = tfs_bkey_init(&b, TFS_BKEY_btree_ptr, TFS_POS_MAX, tfs_btree_ptr_val_bytes(1));
	p->nr_ptrs = 1;
	p->level = 2;
	p->seq = cpu_to_le64(0xabc);
	p->csum = cpu_to_le32(0x1234);
	p->ptrs[0].offset = cpu_to_le64(0x4a000);
	key_text(&b.k, "btree_ptr POS_MAX u64s 7: level 2 seq abc csum 00001234 ptrs 0:0x4a000");
	b.k.u64s = cpu_to_le16(1);
	key_text(&b.k, "btree_ptr POS_MAX u64s 1 (too small)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_pos),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_validate_fs_types_without_posix),
		cmocka_unit_test(test_to_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
