// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/btree_io.c: nodes read back from disk.
 *
 *  - A node read failing: lookups and iterators return
 *    -TFS_ERR_btree_node_read and the message names btree, level and node;
 *    never a wrong answer (-ENOENT, or a key missing from a scan); once the
 *    device reads again, the same calls succeed.
 *  - A node corrupt on read: -TFS_ERR_btree_node_invalid, the message names
 *    the node and what is wrong; with two replicas the good copy is used.
 *  - A corrupt node at open (a root): the open fails naming it; nothing on
 *    disk changes.
 *  - Validation names the first bad thing: each mutation of a good node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs/btree_internal.h"
#include "fs/btree_io.h"
#include "fault_test.h"
#include "fs_test.h"
#include "lib/fault_point.h"
#include "lib/faultdev.h"

#define NKEYS 120

static void key_at(struct tfs_bkey_buf *buf, unsigned k)
{
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(3, k), 1500);

	for (unsigned i = 0; i < 1500; i++)
		v[i] = (u8)(k + i);
}

/* A filesystem whose xattrs tree has many leaves (not extents: the open reads every extents leaf) (1500-byte values, 16 KiB nodes). */
static void make_fs(struct ft *t, unsigned nr)
{
	struct ft_geometry g = {
		.nr_devs = nr,
		.size = 16 << 20,
		.bucket_size = 16 << 10,
		.journal_size = 1 << 20,
		.replicas = nr,
		.shm = true,
	};
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;

	assert_int_equal(ft_mkfs(t, &g), 0);
	assert_int_equal(ft_open(t), 0);
	tfs_trans_init(&trans, t->fs);
	for (unsigned k = 0; k < NKEYS; k++) {
		key_at(&buf, k);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_xattrs, &buf.k), 0);
		if (k % 5 == 4)
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	}
	tfs_trans_exit(&trans);
	assert_int_equal(ft_stop(t), 0);
}

/* Opens t with a (rule-less) fault device over every member. */
static void open_faulty(struct ft *t)
{
	char spec[512] = "";

	tfs_faultdev_registry_reset();
	for (unsigned i = 0; i < t->nr; i++)
		snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "%sdev %s trace=off",
			 i ? "; " : "", t->path[i]);
	assert_int_equal(tfs_faults_from_opt("test_btree_io", spec), 0);
	assert_int_equal(ft_open(t), 0);
}

/* Adds a rule to b; it must parse. */
static void add_rule(struct tfs_bdev *b, const char *words)
{
	assert_true(fault_test_add_rule(b, words) >= 0);
}

/* Every key, by lookup and by a scan: 0 or the first error. */
static int check_all_keys(struct tfs_fs *fs)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct tfs_bkey_buf buf, want;
	unsigned n = 0;
	int ret;

	for (unsigned i = 0; i < NKEYS; i++) {
		ret = tfs_btree_lookup(fs, TFS_BTREE_xattrs, TFS_POS(3, i), &buf);
		/* Never "not there": either the key or the error. */
		assert_int_not_equal(ret, -ENOENT);
		if (ret)
			return ret;
		key_at(&want, i);
		assert_memory_equal(&buf.k, &want.k, tfs_bkey_bytes(&want.k));
	}
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_xattrs, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		key_at(&want, n++);
		assert_memory_equal(k, &want.k, tfs_bkey_bytes(&want.k));
	}
	tfs_btree_iter_exit(&iter);
	if (!ret)
		assert_int_equal(n, NKEYS);
	return ret;
}

/*
 * With rule on member 0 of the open t, reading every key fails with want,
 * and what is printed names the node ("btree xattrs level 0 node at 0x")
 * and why; once the rule is gone the same calls succeed (nothing was
 * poisoned).
 */
static void read_fault_named(struct ft *t, const char *rule, int want, const char *why)
{
	struct stderr_capture cap;
	char *msg;
	int ret;

	add_rule(t->fs->devs[0].bdev, rule);
	stderr_capture_start(&cap);
	ret = check_all_keys(t->fs);
	msg = stderr_capture_end(&cap);
	assert_int_equal(ret, want);
	assert_non_null(strstr(msg, "btree xattrs level 0 node at 0x"));
	assert_non_null(strstr(msg, why));
	tfs_faultdev_clear_rules(t->fs->devs[0].bdev);
	assert_int_equal(check_all_keys(t->fs), 0);
}

static void test_read_fails(void **state)
{
	struct ft t;

	make_fs(&t, 1);
	open_faulty(&t);
	/* The interior nodes were read at open; the leaves are not in memory. */
	assert_true(t.fs->btrees[TFS_BTREE_xattrs].root->level >= 1);
	read_fault_named(&t, "read tag=btree every=1 fail=EIO", -TFS_ERR_btree_node_read,
			 "read failed");
	assert_int_equal(tfs_btree_verify(t.fs, TFS_BTREE_xattrs), 0);
	ft_cleanup(&t);
	tfs_faultdev_registry_reset();
}

static void test_read_corrupt(void **state)
{
	struct ft t;

	make_fs(&t, 1);
	open_faulty(&t);
	/* A byte of every node read is flipped (in the keys: the checksum catches it). */
	read_fault_named(&t, "read tag=btree every=1 corrupt=200", -TFS_ERR_btree_node_invalid,
			 "bad checksum");
	ft_cleanup(&t);
	tfs_faultdev_registry_reset();
}

/* Two replicas, one corrupt on read: the other copy is used. */
static void test_read_corrupt_replica(void **state)
{
	struct ft t;

	make_fs(&t, 2);
	open_faulty(&t);
	assert_int_equal(t.fs->metadata_replicas, 2);
	add_rule(t.fs->devs[0].bdev, "read tag=btree every=1 corrupt=200");
	add_rule(t.fs->devs[1].bdev, "read tag=btree every=1 corrupt=200");
	/* Both bad: the error. */
	assert_int_equal(check_all_keys(t.fs), -TFS_ERR_btree_node_invalid);
	/* One bad: every key, from the other copy. */
	tfs_faultdev_clear_rules(t.fs->devs[1].bdev);
	assert_int_equal(check_all_keys(t.fs), 0);
	ft_cleanup(&t);
	tfs_faultdev_registry_reset();
}

/* The root of extents corrupt on disk: the open fails naming it, and writes nothing. */
static void test_open_corrupt_root(void **state)
{
	struct ft t;
	struct stderr_capture cap;
	struct tfs_btree_loc loc;
	char *msg;
	int fd, ret;
	u8 c;

	make_fs(&t, 1);
	assert_int_equal(ft_open(&t), 0);
	tfs_btree_ptr_key_loc(&t.fs->btrees[TFS_BTREE_xattrs].root_key.k, &loc);
	assert_int_equal(ft_stop(&t), 0);
	/* The clean section holds the same root as the journal. */
	fd = open(t.path[0], O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, loc.ptrs[0].offset + 120), 1);
	c ^= 0x40;
	assert_int_equal(pwrite(fd, &c, 1, loc.ptrs[0].offset + 120), 1);
	close(fd);

	struct stat before, after;

	assert_int_equal(stat(t.path[0], &before), 0);
	stderr_capture_start(&cap);
	ret = tfs_fs_open(t.paths, t.nr, &t.opts, &t.fs);
	msg = stderr_capture_end(&cap);
	assert_int_equal(ret, -TFS_ERR_btree_node_invalid);
	assert_null(t.fs);
	assert_non_null(strstr(msg, "btree xattrs level 1 node at 0x"));
	assert_non_null(strstr(msg, "bad checksum"));
	assert_int_equal(stat(t.path[0], &after), 0);
	assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	ft_cleanup(&t);
}

/* --- validation, mutation by mutation --- */

static void expect_invalid(struct tfs_fs *fs, const struct tfs_btree_node *n,
			   const struct tfs_btree_node_expect *e, const char *want)
{
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_btree_node_validate(fs, n, e, &err), -TFS_ERR_btree_node_invalid);
	if (!strstr(printbuf_str(&err), want))
		fail_msg("message \"%s\" lacks \"%s\"", printbuf_str(&err), want);
	printbuf_exit(&err);
}

/* Re-checksums n after a mutation, so validation reaches past the checksum. */
static void fix_csum(struct tfs_btree_node *n, struct tfs_btree_node_expect *e)
{
	n->csum = cpu_to_le64(tfs_btree_node_csum(n));
	e->csum = (u32)le64_to_cpu(n->csum);
}

static void test_validate_mutations(void **state)
{
	struct ft t;
	struct ft_geometry g = { .nr_devs = 1, .size = 16 << 20, .bucket_size = 16 << 10 };
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	struct tfs_btree_node *good, *n;
	struct tfs_btree_node_expect e0, e;
	struct tfs_btree *b;
	size_t size;

	assert_int_equal(ft_mkfs(&t, &g), 0);
	assert_int_equal(ft_open(&t), 0);
	tfs_trans_init(&trans, t.fs);
	for (unsigned k = 0; k < 5; k++) {
		u8 *v = tfs_bkey_init(&buf, TFS_BKEY_cookie, TFS_POS(9, k * 10), 16);

		memset(v, k, 16);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k), 0);
	}
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
	b = &t.fs->btrees[TFS_BTREE_dirents];
	size = t.fs->node_size;
	good = tfs_bdev_alloc_buf(NULL, size);
	n = tfs_bdev_alloc_buf(NULL, size);
	e0 = (struct tfs_btree_node_expect){
		.btree_id = TFS_BTREE_dirents,
		.level = 0,
		.min_key = TFS_POS_MIN,
		.max_key = TFS_POS_MAX,
		.seq = 77,
		.check_ptr = true,
	};
	e0.csum = tfs_btree_node_serialize(t.fs, b, b->root, 77, good);

	/* The good node passes. */
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_btree_node_validate(t.fs, good, &e0, &err), 0);
	printbuf_exit(&err);

	/* Each mutation, with the first thing it breaks named. */
	__le64 *k1 = good->_data + 5, *k2 = good->_data + 10; /* keys 1 and 2 (5 words each) */

#define MUTATE(code, want)                         \
	do {                                       \
		memcpy(n, good, size);             \
		e = e0;                            \
		code;                              \
		expect_invalid(t.fs, n, &e, want); \
	} while (0)

	MUTATE(n->magic ^= cpu_to_le64(1), "bad magic");
	MUTATE(n->_data[0] ^= cpu_to_le64(1 << 20), "bad checksum");
	MUTATE((n->seq = cpu_to_le64(78), fix_csum(n, &e), e.seq = 77), "stale or misdirected");
	MUTATE((n->level = 1, fix_csum(n, &e)), "expected btree dirents level 0");
	MUTATE((n->btree_id = 2, fix_csum(n, &e)), "btree 2 level 0");
	MUTATE((n->u64s = cpu_to_le32(1 << 20)), "u64s 1048576 > capacity");
	MUTATE((n->max_inode = cpu_to_le64(5), fix_csum(n, &e)), "the parent says 0:0..POS_MAX");
	/* Keys 1 and 2 swapped: out of order. */
	MUTATE(({
		       __le64 tmp[5];

		       memcpy(tmp, n->_data + 5, 40);
		       memcpy(n->_data + 5, n->_data + 10, 40);
		       memcpy(n->_data + 10, tmp, 40);
		       fix_csum(n, &e);
	       }),
	       "key 2 (9:10) < previous key (9:20)");
	MUTATE((n->nr_keys = cpu_to_le32(4), fix_csum(n, &e)),
	       "4 keys take 20 words, the header says 25");
	MUTATE((n->nr_keys = cpu_to_le32(6), fix_csum(n, &e)), "key 5 past the end");
	MUTATE((((struct tfs_bkey *)(n->_data + 5))->type = TFS_BKEY_btree_ptr, fix_csum(n, &e)),
	       "key 1: btree_ptr 9:10");
	MUTATE((((struct tfs_bkey *)(n->_data + 5))->type = TFS_BKEY_deleted, fix_csum(n, &e)),
	       "key 1: deleted 9:10");
	MUTATE((((struct tfs_bkey *)(n->_data + 5))->u64s = cpu_to_le16(2), fix_csum(n, &e)),
	       "key 1: cookie 9:10: u64s 2");
	MUTATE((e.min_key = TFS_POS(9, 5)), "range 0:0..POS_MAX, the parent says 9:5..POS_MAX");
	MUTATE((n->min_inode = cpu_to_le64(9), n->min_offset = cpu_to_le64(5), fix_csum(n, &e),
		e.min_key = TFS_POS(9, 5)),
	       "key 0 (9:0) outside the node's range");
	(void)k1;
	(void)k2;
#undef MUTATE
	free(good);
	free(n);
	ft_cleanup(&t);
}

/*
 * An interior node whose pointer has more locations than the filesystem's
 * metadata replicas: in memory its key has room for that many only, so it
 * is invalid (it was cut short: nr_ptrs past the key's end).
 */
static void test_validate_too_many_pointers(void **state)
{
	struct ft t;
	struct ft_geometry g = { .nr_devs = 1, .size = 16 << 20, .bucket_size = 16 << 10 };
	struct tfs_btree_node *n;
	struct tfs_btree_node_expect e = {
		.btree_id = TFS_BTREE_dirents,
		.level = 1,
		.min_key = TFS_POS_MIN,
		.max_key = TFS_POS_MAX,
		.seq = 77,
		.check_ptr = true,
	};
	struct printbuf err = PRINTBUF;

	assert_int_equal(ft_mkfs(&t, &g), 0);
	assert_int_equal(ft_open(&t), 0);
	assert_int_equal(t.fs->btree_ptr_replicas, 1);
	n = tfs_bdev_alloc_buf(NULL, t.fs->node_size);
	for (unsigned nr = 1; nr <= 2; nr++) {
		struct tfs_bkey_buf buf;
		struct tfs_btree_ptr *p = tfs_bkey_init(&buf, TFS_BKEY_btree_ptr, TFS_POS_MAX,
							tfs_btree_ptr_val_bytes(nr));

		p->level = 0;
		p->nr_ptrs = (u8)nr;
		p->seq = cpu_to_le64(5);
		for (unsigned i = 0; i < nr; i++) {
			p->ptrs[i].dev = cpu_to_le32(i);
			p->ptrs[i].offset = cpu_to_le64((u64)(i + 4) * t.fs->node_size);
		}
		memset(n, 0, t.fs->node_size);
		n->magic = cpu_to_le64(t.fs->node_magic);
		n->seq = cpu_to_le64(77);
		n->btree_id = TFS_BTREE_dirents;
		n->level = 1;
		n->version = cpu_to_le16(TFS_BTREE_NODE_VERSION);
		n->nr_keys = cpu_to_le32(1);
		n->u64s = cpu_to_le32(tfs_bkey_u64s(&buf.k));
		n->max_inode = cpu_to_le64(UINT64_MAX);
		n->max_offset = cpu_to_le64(UINT64_MAX);
		memcpy(n->_data, &buf.k, tfs_bkey_bytes(&buf.k));
		n->csum = cpu_to_le64(tfs_btree_node_csum(n));
		e.csum = (u32)le64_to_cpu(n->csum);
		if (nr == 1) /* the same node with one pointer is valid */
			assert_int_equal(tfs_btree_node_validate(t.fs, n, &e, &err), 0);
		else
			expect_invalid(t.fs, n, &e,
				       "key 0: 2 pointers, more than the 1 metadata replicas");
	}
	printbuf_exit(&err);
	free(n);
	ft_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_fails),
		cmocka_unit_test(test_read_corrupt),
		cmocka_unit_test(test_read_corrupt_replica),
		cmocka_unit_test(test_open_corrupt_root),
		cmocka_unit_test(test_validate_mutations),
		cmocka_unit_test(test_validate_too_many_pointers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
