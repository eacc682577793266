// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/str_hash.c: SipHash-2-4 against the reference vectors, and
 * the probing rules on a tiny slot range (so runs wrap around and fill
 * up): a name is found past taken slots and whiteouts, an insert reuses
 * the first whiteout, a removal leaves a whiteout only when the next slot
 * is taken and clears trailing whiteouts otherwise, a full table says
 * ENOSPC, and the transaction's own queued updates are seen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs/str_hash.h"
#include "posix_test.h"

static void test_siphash_vectors(void **state)
{
	/* From the SipHash paper's reference code: key 00..0f, message 00..len-1. */
	static const struct {
		size_t len;
		u64 want;
	} v[] = {
		{ 0, 0x726fdb47dd0e0e31ULL },
		{ 1, 0x74f839c593dc67fdULL },
		{ 8, 0x93f5f5799a932462ULL },
		{ 15, 0xa129ca6149be45e5ULL },
	};
	u8 msg[64];

	for (unsigned i = 0; i < sizeof(msg); i++)
		msg[i] = (u8)i;
	for (unsigned i = 0; i < ARRAY_SIZE(v); i++)
		assert_true(tfs_siphash(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, msg,
					v[i].len) == v[i].want);
	/* The seed matters; so does every byte. */
	assert_true(tfs_name_hash_default(1, "abc", 3) != tfs_name_hash_default(2, "abc", 3));
	assert_true(tfs_name_hash_default(1, "abc", 3) != tfs_name_hash_default(1, "abd", 3));
}

/* --- probing on slots 2..5 of a directory --- */

static struct pt T;
static struct tfs_hash_desc D;
#define DIR 777

static int setup(void **state)
{
	struct pt_geometry g = { 0 };

	D = tfs_dirent_hash_desc;
	D.slot_min = 2;
	D.slot_max = 5;
	return pt_mkfs(&T, &g);
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

struct name {
	const char *name;
	size_t len;
};

static void put(struct tfs_btree_trans *trans, u64 slot, const char *name)
{
	struct tfs_bkey_buf kb;
	struct tfs_dirent *d = tfs_bkey_init(&kb, TFS_BKEY_dirent, TFS_POS(DIR, slot),
					     tfs_dirent_val_bytes(strlen(name)));

	d->ino = cpu_to_le64(100 + slot);
	d->d_type = S_IFREG >> 12;
	d->name_len = (u8)strlen(name);
	memcpy(d->name, name, strlen(name));
	assert_int_equal(tfs_trans_update(trans, TFS_BTREE_dirents, &kb.k), 0);
}

/* Inserts name probing from start; returns its slot. */
static u64 insert(u64 start, const char *name)
{
	struct tfs_btree_trans trans;
	struct name n = { name, strlen(name) };
	u64 slot, free_slot;

	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_hash_lookup(&trans, &D, DIR, start, &n, &slot, &free_slot, NULL),
			 -ENOENT);
	put(&trans, free_slot, name);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	return free_slot;
}

static int find(u64 start, const char *name, u64 *slot)
{
	struct tfs_btree_trans trans;
	struct name n = { name, strlen(name) };
	int ret;

	tfs_trans_init(&trans, T.fs);
	ret = tfs_hash_lookup(&trans, &D, DIR, start, &n, slot, NULL, NULL);
	tfs_trans_exit(&trans);
	return ret;
}

static void remove_slot(u64 slot)
{
	struct tfs_btree_trans trans;

	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_hash_remove(&trans, &D, DIR, slot), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
}

/* What is at slot: 0 empty, 1 a whiteout, 2 a live entry. */
static int at(u64 slot)
{
	struct tfs_bkey_buf kb;
	int ret = tfs_btree_lookup(T.fs, TFS_BTREE_dirents, TFS_POS(DIR, slot), &kb);

	if (ret == -ENOENT)
		return 0;
	assert_int_equal(ret, 0);
	return ((struct tfs_dirent *)tfs_bkey_val(&kb.k))->ino ? 2 : 1;
}

static void test_probing(void **state)
{
	struct tfs_btree_trans trans;
	struct name n = { "e", 1 };
	u64 slot, free_slot;

	/* Names (by their match, not their hash) all starting at slot 4: 4, 5, then wrap. */
	assert_int_equal(insert(4, "a"), 4);
	assert_int_equal(insert(4, "b"), 5);
	assert_int_equal(insert(4, "c"), 2);
	assert_int_equal(insert(4, "d"), 3);
	/* Full. */
	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_hash_lookup(&trans, &D, DIR, 4, &n, &slot, &free_slot, NULL), -ENOSPC);
	tfs_trans_exit(&trans);
	assert_int_equal(find(4, "c", &slot), 0);
	assert_int_equal(slot, 2);

	/* Removing b (5): the next slot (2) is taken, so a whiteout stays; c is still found. */
	remove_slot(5);
	assert_int_equal(at(5), 1);
	assert_int_equal(find(4, "c", &slot), 0);
	assert_int_equal(find(4, "b", &slot), -ENOENT);
	/* An insert takes the first whiteout of the run. */
	assert_int_equal(insert(4, "e"), 5);
	assert_int_equal(at(5), 2);
	remove_slot(5);

	/* Removing the run's tail from a non-full table clears the whiteouts before it. */
	remove_slot(3); /* d: the next slot (4) is taken: whiteout (the table wraps) */
	assert_int_equal(at(3), 1);
	remove_slot(2); /* c: next (3) is a whiteout but taken: whiteout */
	assert_int_equal(at(2), 1);
	remove_slot(4); /* a: next (5) is a whiteout: taken, so a whiteout */
	assert_int_equal(at(4), 1);
	/* Now nothing is live; an insert at 2 reuses the whiteout and finds it. */
	assert_int_equal(insert(2, "x"), 2);
	assert_int_equal(find(2, "x", &slot), 0);
}

/* A run that ends: removing its last entry clears it and the whiteouts right before it. */
static void test_trailing_whiteouts(void **state)
{
	D.slot_max = 100;
	assert_int_equal(insert(10, "a"), 10);
	assert_int_equal(insert(10, "b"), 11);
	assert_int_equal(insert(10, "c"), 12);
	remove_slot(11);
	assert_int_equal(at(11), 1); /* 12 is taken */
	remove_slot(10);
	assert_int_equal(at(10), 1); /* 11 (a whiteout) is taken */
	remove_slot(12);
	/* 13 is empty: 12 goes, and the whiteouts at 11 and 10 with it. */
	assert_int_equal(at(12), 0);
	assert_int_equal(at(11), 0);
	assert_int_equal(at(10), 0);
}

/* Lookups see the transaction's own queued updates (a rename's remove then insert). */
static void test_sees_own_updates(void **state)
{
	struct tfs_btree_trans trans;
	struct name a = { "a", 1 }, b = { "b", 1 };
	u64 slot, free_slot;

	D.slot_max = 100;
	assert_int_equal(insert(20, "a"), 20);
	assert_int_equal(insert(20, "b"), 21);
	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_hash_lookup(&trans, &D, DIR, 20, &a, &slot, NULL, NULL), 0);
	/* Remove a (21 is taken: a whiteout, queued), then insert a new name: it takes 20. */
	assert_int_equal(tfs_hash_remove(&trans, &D, DIR, slot), 0);
	assert_int_equal(tfs_hash_lookup(&trans, &D, DIR, 20, &a, &slot, &free_slot, NULL),
			 -ENOENT);
	assert_int_equal(free_slot, 20);
	put(&trans, free_slot, "z");
	assert_int_equal(tfs_hash_lookup(&trans, &D, DIR, 20, &b, &slot, NULL, NULL), 0);
	assert_int_equal(slot, 21);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(find(20, "z", &slot), 0);
	assert_int_equal(slot, 20);
	assert_int_equal(find(20, "a", &slot), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_siphash_vectors),
		cmocka_unit_test_setup_teardown(test_probing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trailing_whiteouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sees_own_updates, setup, teardown),
	};

	return pt_run_tests(tests);
}
