// SPDX-License-Identifier: GPL-2.0
/*
 * fs/fsck.c: a clean filesystem after a random workload is clean; each kind
 * of damage, written as a bad key with a btree transaction, is found with
 * its line by a read-only check that leaves the images byte-identical, is
 * fixed by a repairing check (exit 1, or left: exit 4, where fsck does not
 * repair it), and the next check is clean.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs/alloc.h"
#include "fs/btree_internal.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "fs/fsck.h"
#include "posix_test.h"

static struct pt T;

static int setup(void **state)
{
	struct pt_geometry g = { 0 };

	return pt_mkfs(&T, &g) ? -1 : 0;
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

/* --- stderr captured into a buffer --- */

static char captured[1 << 16];
/* fsck_capture() runs with tfs_fsck_opts.no_salvage. */
static bool no_salvage;

/* Runs tfs_fsck with stderr going to a file; its text in captured. */
static int fsck_capture(bool repair, struct tfs_fsck_result *res)
{
	struct tfs_fsck_opts o = { .repair = repair, .no_salvage = no_salvage };
	char path[160];
	int fd, saved, ret;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr", T.dir);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	ret = tfs_fsck(T.fs, &o, res);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, captured, sizeof(captured) - 1, 0);
	captured[n > 0 ? n : 0] = 0;
	close(fd);
	unlink(path);
	fprintf(stderr, "%s", captured); /* the log shows it */
	return ret;
}

/* A cheap hash of every image's bytes. */
static u64 images_hash(void)
{
	static char buf[1 << 16];
	u64 h = 14695981039346656037ULL;

	for (unsigned i = 0; i < T.nr; i++) {
		int fd = open(T.path[i], O_RDONLY);
		ssize_t n;

		assert_true(fd >= 0);
		/* Word by word (images are whole blocks): quick under the sanitizers too. */
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			for (ssize_t j = 0; j + 8 <= n; j += 8) {
				u64 w;

				memcpy(&w, buf + j, 8);
				h = (h ^ w) * 1099511628211ULL;
			}
		close(fd);
	}
	return h;
}

/*
 * The damage is committed: -n finds `line` and changes nothing, -y exits
 * `exit_y`, then -n exits what is left (0 when -y fixed everything).
 */
static void check_damage(const char *line, int exit_y)
{
	struct tfs_fsck_result res;
	u64 before;

	assert_int_equal(pt_stop(&T), 0);
	before = images_hash();
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	if (!strstr(captured, line))
		fprintf(stderr, "expected: %s\n", line);
	assert_non_null(strstr(captured, line));
	assert_true(res.found > 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), exit_y);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res),
			 exit_y == TFS_FSCK_EXIT_FIXED ? TFS_FSCK_EXIT_CLEAN : TFS_FSCK_EXIT_LEFT);
}

/* Commits k into btree id directly (no POSIX rule applies). */
static void put_key(enum tfs_btree_id id, const struct tfs_bkey *k)
{
	struct tfs_btree_trans trans;

	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_trans_update(&trans, id, k), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
}

static void del_key(enum tfs_btree_id id, struct tfs_bpos pos)
{
	struct tfs_btree_trans trans;

	tfs_trans_init(&trans, T.fs);
	assert_int_equal(tfs_trans_delete(&trans, id, pos), 0);
	assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
	tfs_trans_exit(&trans);
}

/* The inode key of ino with nlink set. */
static void set_nlink_raw(tfs_ino_t ino, u32 nlink)
{
	struct tfs_bkey_buf kb;
	struct tfs_inode *v;

	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes, TFS_POS(ino, 0), &kb), 0);
	v = tfs_bkey_val(&kb.k);
	v->nlink = cpu_to_le32(nlink);
	put_key(TFS_BTREE_inodes, &kb.k);
}

/* The slot of name's dirent in dir (by scanning: no hash needed). */
static u64 dirent_slot(tfs_ino_t dir, const char *name)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 slot = 0;
	int ret;

	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_dirents, TFS_POS(dir, 0),
			    TFS_POS(dir, UINT64_MAX));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_dirent *d = tfs_bkey_val(k);

		if (d->name_len == strlen(name) && !memcmp(d->name, name, d->name_len))
			slot = le64_to_cpu(k->offset);
	}
	tfs_btree_iter_exit(&iter);
	assert_true(slot);
	return slot;
}

static void write_file(const char *name, u64 seed, size_t len, struct tfs_stat *st)
{
	struct tfs_file *f;
	char buf[16384];

	assert_true(len <= sizeof(buf));
	pt_fill(buf, len, seed, 0);
	assert_int_equal(pt_create(&T, 1, name, &f), 0);
	assert_int_equal(tfs_write(T.fs, f, buf, len, 0), (ssize_t)len);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_lookup(&T, 1, name, st), 0);
}

/* --- tests --- */

static void test_clean_after_workload(void **state)
{
	struct tfs_fsck_result res;
	tfs_ino_t dirs[8] = { TFS_ROOT_INO };
	unsigned nr_dirs = 1;
	u64 x = 12345;

	for (unsigned i = 0; i < 300; i++) {
		char name[32], name2[32];
		tfs_ino_t d = dirs[(x >> 8) % nr_dirs];
		struct tfs_stat st;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		snprintf(name, sizeof(name), "n%llu", (unsigned long long)((x >> 33) % 40));
		snprintf(name2, sizeof(name2), "n%llu", (unsigned long long)((x >> 40) % 40));
		switch ((x >> 50) % 7) {
		case 0:
			if (nr_dirs < 8 && !pt_mkdir(&T, d, name, &st))
				dirs[nr_dirs++] = st.ino;
			break;
		case 1:
		case 2: {
			struct tfs_file *f;
			char buf[9000];

			if (tfs_create(T.fs, &pt_root_ctx, d, name, strlen(name), 0644,
				       O_CREAT | O_RDWR, &f, &st))
				break;
			pt_fill(buf, sizeof(buf), i, 0);
			assert_true(tfs_write(T.fs, f, buf, (x >> 20) % sizeof(buf),
					      (x >> 10) % 20000) >= 0);
			assert_int_equal(tfs_release(T.fs, f), 0);
			break;
		}
		case 3:
			if (!pt_lookup(&T, d, name, &st) && !S_ISDIR(st.mode))
				tfs_link(T.fs, st.ino, dirs[(x >> 4) % nr_dirs], name2,
					 strlen(name2), NULL);
			break;
		case 4:
			tfs_unlink(T.fs, d, name, strlen(name));
			break;
		case 5:
			tfs_rename(T.fs, d, name, strlen(name), dirs[(x >> 4) % nr_dirs], name2,
				   strlen(name2), 0);
			break;
		case 6: {
			struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE,
						  .size = (x >> 12) % 9000 };

			if (!pt_lookup(&T, d, name, &st) && S_ISREG(st.mode))
				assert_int_equal(tfs_setattr(T.fs, st.ino, NULL, &sa, &st), 0);
			break;
		}
		}
	}
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(res.found, 0);
	assert_true(res.inodes > 10);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
}

static void test_wrong_nlink(void **state)
{
	struct tfs_stat st;
	char line[128];

	assert_int_equal(pt_mknod(&T, 1, "f", S_IFREG | 0644, &st), 0);
	set_nlink_raw(st.ino, 2);
	snprintf(line, sizeof(line), "inode %llu: nlink 2, but 1 dirent(s) point to it",
		 (unsigned long long)st.ino);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), 0);
	assert_int_equal(st.nlink, 1);
}

static void test_wrong_dir_nlink(void **state)
{
	struct tfs_stat st;

	assert_int_equal(pt_mkdir(&T, 1, "d", &st), 0);
	assert_int_equal(pt_mkdir(&T, st.ino, "sub", NULL), 0);
	set_nlink_raw(st.ino, 2);
	check_damage("nlink 2, but 1 dirent(s) and 1 subdirectories make 3", TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
}

static void test_dangling_dirent(void **state)
{
	struct tfs_bkey_buf kb;
	struct tfs_dirent *d =
		tfs_bkey_init(&kb, TFS_BKEY_dirent, TFS_POS(1, 7777), tfs_dirent_val_bytes(5));
	struct tfs_stat st;

	d->ino = cpu_to_le64(999999);
	d->d_type = S_IFREG >> 12;
	d->name_len = 5;
	memcpy(d->name, "ghost", 5);
	put_key(TFS_BTREE_dirents, &kb.k);
	check_damage("dirent 1:7777 \"ghost\": points to inode 999999, which does not exist",
		     TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_dirents, TFS_POS(1, 7777), &kb) == 0 &&
				 ((struct tfs_dirent *)tfs_bkey_val(&kb.k))->ino,
			 0);
	assert_int_equal(pt_lookup(&T, 1, "ghost", &st), -ENOENT);
}

static void test_orphan_not_listed(void **state)
{
	struct tfs_stat st;
	char line[128];

	write_file("f", 1, 5000, &st);
	del_key(TFS_BTREE_dirents, TFS_POS(1, dirent_slot(1, "f")));
	set_nlink_raw(st.ino, 0);
	snprintf(line, sizeof(line), "inode %llu: nlink 0, no dirent, not on the orphan list",
		 (unsigned long long)st.ino);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st), -ENOENT);
}

static void test_unreachable_inode(void **state)
{
	struct tfs_stat st, lf;
	char line[128], name[32];

	write_file("f", 2, 3000, &st);
	del_key(TFS_BTREE_dirents, TFS_POS(1, dirent_slot(1, "f")));
	snprintf(line, sizeof(line), "inode %llu: nlink 1, but no dirent points to it (lost)",
		 (unsigned long long)st.ino);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	assert_int_equal(pt_lookup(&T, 1, "lost+found", &lf), 0);
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)st.ino);
	assert_int_equal(pt_ino(&T, lf.ino, name), st.ino);
}

static void test_overlapping_extents(void **state)
{
	struct tfs_stat a, b;
	struct tfs_bkey_buf ka, kb;
	struct tfs_extent *xa, *xb;
	char line[160];

	write_file("a", 3, 8192, &a);
	write_file("b", 4, 8192, &b);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(a.ino, 0), &ka), 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(b.ino, 0), &kb), 0);
	xa = tfs_bkey_val(&ka.k);
	xb = tfs_bkey_val(&kb.k);
	xb->ptrs[0] = xa->ptrs[0];
	put_key(TFS_BTREE_extents, &kb.k);
	snprintf(line, sizeof(line),
		 "extent %llu:0: device 0 bytes %llu..%llu overlap extent %llu:0",
		 (unsigned long long)b.ino, (unsigned long long)le64_to_cpu(xa->ptrs[0].offset),
		 (unsigned long long)le64_to_cpu(xa->ptrs[0].offset) + 8192,
		 (unsigned long long)a.ino);
	/* Which file's data is right is unknown: fsck leaves it (exit 4). */
	check_damage(line, TFS_FSCK_EXIT_LEFT);
}

static int first_node(void *ctx, const struct tfs_btree_ptr *ptr)
{
	if (ptr->nr_ptrs && !*(u64 *)ctx)
		*(u64 *)ctx = le64_to_cpu(ptr->ptrs[0].offset);
	return 0;
}

static void test_extent_over_node(void **state)
{
	struct tfs_stat a;
	struct tfs_bkey_buf ka;
	struct tfs_extent *xa;
	char line[160];
	u64 node = 0;

	write_file("a", 5, 4096, &a);
	assert_int_equal(tfs_btree_write_all(T.fs), 0); /* every node has its place */
	assert_int_equal(tfs_btree_node_locations(T.fs, TFS_BTREE_inodes, first_node, &node), 0);
	assert_true(node);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(a.ino, 0), &ka), 0);
	xa = tfs_bkey_val(&ka.k);
	xa->ptrs[0].offset = cpu_to_le64(node);
	put_key(TFS_BTREE_extents, &ka.k);
	/* Which of the two lines says it depends on the order of their starts. */
	check_damage("btree inodes node at 0x", TFS_FSCK_EXIT_LEFT);
	snprintf(line, sizeof(line), "extent %llu:0", (unsigned long long)a.ino);
	assert_non_null(strstr(captured, line));
	assert_non_null(strstr(captured, " overlap "));
}

/* The alloc key of the bucket holding ino's first block (member 0). */
static struct tfs_bpos alloc_pos_of(tfs_ino_t ino, struct tfs_bkey_buf *ak, u32 *blk)
{
	struct tfs_bkey_buf ek;
	const struct tfs_extent *x;
	u32 bsz = T.fs->alloc.devs[0].bucket_size;
	u64 off;

	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(ino, 0), &ek), 0);
	x = tfs_bkey_val(&ek.k);
	off = le64_to_cpu(x->ptrs[0].offset);
	*blk = (u32)(off % bsz / T.fs->block_size);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, TFS_POS(0, off / bsz), ak), 0);
	return TFS_POS(0, off / bsz);
}

/* Blocks marked used that no extent references: leaked, -y frees them. */
static void test_alloc_leaked(void **state)
{
	struct tfs_stat a;
	struct tfs_bkey_buf ak;
	struct tfs_alloc_key *v;
	struct tfs_bpos pos;
	char line[160];
	u32 blk, nr, free_blk;

	write_file("a", 7, 8192, &a);
	pos = alloc_pos_of(a.ino, &ak, &blk);
	v = tfs_bkey_val(&ak.k);
	nr = le32_to_cpu(v->nr_blocks);
	/* A block of the bucket no extent uses (the file has 2 blocks from blk). */
	free_blk = blk + 2 < nr ? blk + 2 : blk - 1;
	v->bits[free_blk / 64] |= cpu_to_le64(1ULL << (free_blk % 64));
	v->used = cpu_to_le32(le32_to_cpu(v->used) + 1);
	put_key(TFS_BTREE_alloc, &ak.k);
	snprintf(line, sizeof(line),
		 "alloc 0:%llu: blocks %u..%u marked used, but no extent references them (leaked)",
		 (unsigned long long)pos.offset, free_blk, free_blk);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	/* The accounting key was written with the bad bit by nobody: only the key was wrong. */
	assert_null(strstr(captured, "accounting"));
}

/* An extent's blocks not marked used (the allocator would hand them out again). */
static void test_alloc_missing(void **state)
{
	struct tfs_stat a, b;
	struct tfs_bkey_buf ak;
	struct tfs_alloc_key *v;
	struct tfs_bpos pos;
	char line[200];
	u32 blk;

	write_file("a", 8, 8192, &a);
	pos = alloc_pos_of(a.ino, &ak, &blk);
	v = tfs_bkey_val(&ak.k);
	v->bits[blk / 64] &= cpu_to_le64(~(1ULL << (blk % 64)));
	v->used = cpu_to_le32(le32_to_cpu(v->used) - 1);
	put_key(TFS_BTREE_alloc, &ak.k);
	snprintf(line, sizeof(line),
		 "alloc 0:%llu: blocks %u..%u used by extent %llu:0 are not marked used",
		 (unsigned long long)pos.offset, blk, blk, (unsigned long long)a.ino);
	check_damage(line, TFS_FSCK_EXIT_FIXED);

	/* No key at all for a bucket an extent uses. */
	write_file("b", 9, 4096, &b);
	pos = alloc_pos_of(b.ino, &ak, &blk);
	del_key(TFS_BTREE_alloc, pos);
	snprintf(line, sizeof(line), "alloc 0:%llu: no alloc key, but extent ",
		 (unsigned long long)pos.offset);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
}

/* The btree alloc key of the bucket of btree id's root node (member 0), and that node's block. */
static struct tfs_bpos node_alloc_pos(enum tfs_btree_id id, struct tfs_bkey_buf *ak, u32 *blk)
{
	u32 bsz = T.fs->alloc.devs[0].bucket_size;
	struct tfs_bpos pos;
	u64 node = 0;

	assert_int_equal(tfs_btree_write_all(T.fs), 0); /* every node has its place */
	assert_int_equal(tfs_btree_node_locations(T.fs, id, first_node, &node), 0);
	assert_true(node);
	*blk = (u32)(node % bsz / T.fs->block_size);
	pos = tfs_alloc_pos(TFS_ALLOC_DATA_btree, 0, node / bsz);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, pos, ak), 0);
	return pos;
}

/* A bucket no node uses marked as btree space: leaked, -y frees it. */
static void test_alloc_node_leaked(void **state)
{
	struct tfs_alloc_run run;
	struct tfs_bkey_buf kb;
	struct tfs_alloc_key *v;
	struct statvfs before, after;
	u32 bsz = T.fs->alloc.devs[0].bucket_size, nr = bsz / T.fs->block_size;
	char line[200];

	/* A whole free bucket (given back at once: nothing refers to it). */
	assert_int_equal(tfs_alloc(T.fs, bsz, bsz, 1, 0, &run), (s64)bsz);
	tfs_alloc_free_now(T.fs, &run);
	assert_int_equal(run.offset % bsz, 0);
	v = tfs_bkey_init(&kb, TFS_BKEY_alloc,
			  tfs_alloc_pos(TFS_ALLOC_DATA_btree, 0, run.offset / bsz),
			  tfs_alloc_key_val_bytes(nr));
	v->data_type = TFS_ALLOC_DATA_btree;
	v->nr_blocks = cpu_to_le32(nr);
	v->used = cpu_to_le32(nr);
	for (u32 i = 0; i < nr; i++)
		v->bits[i / 64] |= cpu_to_le64(1ULL << (i % 64));
	put_key(TFS_BTREE_alloc, &kb.k);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_statfs(T.fs, &before), 0);
	snprintf(line, sizeof(line),
		 "alloc btree 0:%llu: blocks 0..%u marked used, but no btree node uses them "
		 "(leaked)",
		 (unsigned long long)(run.offset / bsz), nr - 1);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	/* The bucket is free space again. */
	assert_int_equal(tfs_statfs(T.fs, &after), 0);
	assert_int_equal(after.f_bfree, before.f_bfree + nr);
}

/* A node's blocks also marked as file data: doubly used, -y keeps them the node's. */
static void test_alloc_node_doubly_used(void **state)
{
	struct tfs_bkey_buf nk, kb;
	struct tfs_alloc_key *v;
	struct tfs_bpos pos;
	u32 blk, nb = T.fs->node_size / T.fs->block_size;
	char line[200];

	pos = node_alloc_pos(TFS_BTREE_inodes, &nk, &blk);
	/* The user key of the same bucket, marking the node's blocks. */
	tfs_bkey_copy(&kb, &nk.k);
	kb.k.inode = cpu_to_le64(0);
	v = tfs_bkey_val(&kb.k);
	v->data_type = TFS_ALLOC_DATA_user;
	/* Only this node's blocks (another node may share the bucket). */
	memset(v->bits, 0, DIV_ROUND_UP(le32_to_cpu(v->nr_blocks), 64) * 8);
	for (u32 i = blk; i < blk + nb; i++)
		v->bits[i / 64] |= cpu_to_le64(1ULL << (i % 64));
	v->used = cpu_to_le32(nb);
	put_key(TFS_BTREE_alloc, &kb.k);
	snprintf(line, sizeof(line),
		 "alloc 0:%llu: blocks %u..%u marked used both by file data and by btree nodes "
		 "(doubly used)",
		 (unsigned long long)pos.offset, blk, blk + nb - 1);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	assert_null(strstr(captured, "doubly")); /* the last check is clean */
	/* The btree key is still there, the user one is gone. */
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, pos, &kb), 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, TFS_POS(0, pos.offset), &kb),
			 -ENOENT);
}

/* A node's blocks not marked: open would hand them out; -y marks them. */
static void test_alloc_node_missing(void **state)
{
	struct tfs_bkey_buf nk;
	struct tfs_bpos pos;
	u32 blk;
	char line[200];

	pos = node_alloc_pos(TFS_BTREE_dirents, &nk, &blk);
	del_key(TFS_BTREE_alloc, pos);
	snprintf(
		line, sizeof(line),
		"alloc btree 0:%llu: no alloc key, but a btree ", /* the first node of the bucket */
		(unsigned long long)pos.offset);
	check_damage(line, TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, pos, &nk), 0);
}

/* Counters that disagree with what they count. */
static void test_accounting_wrong(void **state)
{
	struct tfs_stat a;
	struct tfs_bkey_buf kb;
	struct tfs_accounting *v;
	u64 blocks, inodes;

	write_file("a", 10, 12288, &a);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_user_blocks, 0, &blocks), 0);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_inodes, 0, &inodes), 0);
	assert_int_equal(blocks, 3);
	assert_int_equal(inodes, 2); /* the root and a */
	v = tfs_bkey_init(&kb, TFS_BKEY_accounting, tfs_acct_pos(TFS_ACCT_user_blocks, 0),
			  sizeof(*v));
	v->value = cpu_to_le64(blocks + 5);
	put_key(TFS_BTREE_alloc, &kb.k);
	check_damage("accounting user_blocks member 0: 8 blocks, extents use 3",
		     TFS_FSCK_EXIT_FIXED);
	assert_int_equal(tfs_acct_read(T.fs, TFS_ACCT_user_blocks, 0, &blocks), 0);
	assert_int_equal(blocks, 3);
	assert_int_equal(pt_reopen(&T), 0);

	del_key(TFS_BTREE_alloc, tfs_acct_pos(TFS_ACCT_inodes, 0));
	check_damage("accounting inodes: 0, the inodes btree holds 2", TFS_FSCK_EXIT_FIXED);
}

/* An unclean filesystem (journal to replay): -n replays in memory only, writes nothing. */
static void test_readonly_unclean(void **state)
{
	struct tfs_fsck_result res;
	struct tfs_stat st;
	char crash[160];
	u64 before;

	write_file("f", 6, 4096, &st);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	snprintf(crash, sizeof(crash), "%s/crash", T.dir);
	pt_copy_file(T.path[0], crash); /* as the power cut would leave it */
	assert_int_equal(pt_stop(&T), 0);
	pt_copy_file(crash, T.path[0]);
	unlink(crash);
	before = images_hash();
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(pt_ino(&T, 1, "f"), st.ino); /* replayed, in memory */
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before);
	T.opts.read_only = false;
}

/* Two members, metadata on both, file data on one of them (data_replicas 1). */
static int setup_two(void **state)
{
	struct pt_geometry g = {
		.nr_devs = 2, .size = 48ULL << 20, .metadata_replicas = 2, .data_replicas = 1
	};

	return pt_mkfs(&T, &g) ? -1 : 0;
}

/* The extents whose every copy is on member dev. */
static unsigned extents_only_on(u32 dev)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	unsigned n = 0;
	int ret;

	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_extents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_extent *x = tfs_bkey_val(k);
		bool only = k->type == TFS_BKEY_extent && x->nr_ptrs;

		for (unsigned i = 0; only && i < x->nr_ptrs; i++)
			only = le32_to_cpu(x->ptrs[i].dev) == dev;
		n += only;
	}
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	return n;
}

/*
 * fsck with member 1 missing (fsck --degraded): -n finds the damage and
 * writes nothing, says member 1 was not checked and how many extents have
 * their only copy there; -y repairs it with member 0 alone; member 1 back,
 * the whole set is clean and every file reads as written.
 */
static void test_degraded_repair(void **state)
{
	struct tfs_fsck_result res;
	struct tfs_stat st[8];
	char line[160], buf[16384], want[16384];
	unsigned only;
	u64 before;

	for (unsigned i = 0; i < 8; i++) {
		char name[8];

		snprintf(name, sizeof(name), "f%u", i);
		write_file(name, 20 + i, sizeof(buf), &st[i]);
	}
	only = extents_only_on(1);
	assert_true(only > 0); /* the allocator spreads files over both members */
	set_nlink_raw(st[0].ino, 2);
	assert_int_equal(pt_stop(&T), 0);

	before = images_hash();
	T.opts.degraded = true;
	T.opts.read_only = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0); /* member 1 missing */
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	snprintf(line, sizeof(line), "inode %llu: nlink 2, but 1 dirent(s) point to it",
		 (unsigned long long)st[0].ino);
	assert_non_null(strstr(captured, line));
	assert_non_null(strstr(captured, "member 1 is missing: not checked"));
	snprintf(line, sizeof(line), "%u extent(s)", only);
	assert_non_null(strstr(captured, line));
	assert_non_null(strstr(captured, "no copy elsewhere"));
	assert_int_equal(res.missing_members, 1);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */

	T.opts.read_only = false;
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	assert_non_null(strstr(captured, "member 1 is missing: not checked"));
	assert_int_equal(pt_stop(&T), 0);

	T.opts.degraded = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_null(strstr(captured, "missing"));
	assert_int_equal(res.missing_members, 0);
	for (unsigned i = 0; i < 8; i++) {
		struct tfs_file *f;

		assert_int_equal(tfs_open(T.fs, st[i].ino, O_RDONLY, &f), 0);
		assert_int_equal(tfs_read(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		assert_int_equal(tfs_release(T.fs, f), 0);
		pt_fill(want, sizeof(want), 20 + i, 0);
		assert_memory_equal(buf, want, sizeof(buf));
	}
	assert_int_equal(tfs_getattr(T.fs, st[0].ino, &st[0]), 0);
	assert_int_equal(st[0].nlink, 1);
}

/* Files f<from>..f<to - 1> in the root directory (mknod: keys, no data). */
static void make_files(unsigned from, unsigned to)
{
	for (unsigned i = from; i < to; i++) {
		char name[48];

		snprintf(name, sizeof(name), "file-with-a-longish-name-%06u", i);
		assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 0644, NULL), 0);
	}
}

/*
 * A degraded open of trees with interior nodes, written by the full set
 * (two pointers each), after a crash (a journal to replay): the check is
 * clean -- an interior key read from disk keeps both its pointers in
 * memory, the missing member's too, where it once had room for the
 * present members' only (fsck: "bad pointer"; a degraded write-back then
 * wrote a second pointer 0:0, and the whole set no longer opened).  A
 * degraded write-back, then the whole set, checks clean too.
 */
static void test_degraded_interior_after_crash(void **state)
{
	struct tfs_fsck_result res;
	char crash[2][160];
	unsigned n = 0;

	/* Interior nodes in the inodes and dirents trees, on disk (a clean stop). */
	while (n < 40000 && (T.fs->btrees[TFS_BTREE_inodes].root->level < 1 ||
			     T.fs->btrees[TFS_BTREE_dirents].root->level < 1)) {
		make_files(n, n + 500);
		n += 500;
	}
	assert_true(T.fs->btrees[TFS_BTREE_inodes].root->level >= 1);
	assert_true(T.fs->btrees[TFS_BTREE_dirents].root->level >= 1);
	assert_int_equal(pt_reopen(&T), 0);

	/* More, durable in the journal only: the images a crash would leave. */
	make_files(n, n + 200);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	for (unsigned i = 0; i < 2; i++) {
		snprintf(crash[i], sizeof(crash[i]), "%s/crash%u", T.dir, i);
		pt_copy_file(T.path[i], crash[i]);
	}
	assert_int_equal(pt_stop(&T), 0);
	for (unsigned i = 0; i < 2; i++) {
		pt_copy_file(crash[i], T.path[i]);
		unlink(crash[i]);
	}

	/* Member 1 missing: fsck -n, then a degraded write-back. */
	T.opts.degraded = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0);
	assert_true(pt_ino(&T, 1, "file-with-a-longish-name-000000") != 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_null(strstr(captured, "bad pointer"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(res.missing_members, 1);
	make_files(n + 200, n + 1200);
	assert_int_equal(pt_stop(&T), 0);

	/* Degraded again (the write-back's nodes read back), then the whole set. */
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.degraded = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(res.missing_members, 0);
	assert_true(pt_ino(&T, 1, "file-with-a-longish-name-000000") != 0);
}

/* --- a damaged leaf --- */

/*
 * LEAF_FILES files in the root directory with 16 KiB nodes: each has 4 KiB
 * of data and an xattr, so the inodes, dirents, extents and xattrs trees
 * all have several leaves.
 */
#define LEAF_FILES 500

static int setup_small_nodes(void **state)
{
	struct pt_geometry g = { .node_size = TFS_BTREE_NODE_SIZE_MIN };

	return pt_mkfs(&T, &g) ? -1 : 0;
}

static void leaf_name(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "a-file-whose-leaf-may-be-lost-%04u", i);
}

static void leaf_files(tfs_ino_t *inos)
{
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char name[64], buf[4096];
		struct tfs_file *f;

		leaf_name(name, sizeof(name), i);
		pt_fill(buf, sizeof(buf), 1000 + i, 0);
		assert_int_equal(pt_create(&T, 1, name, &f), 0);
		assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		inos[i] = tfs_file_ino(f);
		assert_int_equal(tfs_release(T.fs, f), 0);
		assert_int_equal(tfs_setxattr(T.fs, inos[i], "user.n", name, strlen(name), 0), 0);
	}
}

/* The position of the middle key of btree id. */
static struct tfs_bpos middle_pos(enum tfs_btree_id id)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct tfs_bpos pos[LEAF_FILES * 2];
	unsigned n = 0;
	int ret;

	tfs_btree_iter_init(&iter, T.fs, id, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		if (n < LEAF_FILES * 2)
			pos[n++] = tfs_bkey_pos(k);
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	assert_true(n > 0);
	return pos[n / 2];
}

/* Where the leaf of btree id covering pos is (read from disk: after a reopen), its range. */
static void find_leaf(enum tfs_btree_id id, struct tfs_bpos pos, struct tfs_btree_loc *loc,
		      struct tfs_bpos *min, struct tfs_bpos *max)
{
	struct tfs_btree *b = &T.fs->btrees[id];
	struct tfs_btree_path path;

	tfs_six_lock_read(&b->lock);
	assert_int_equal(tfs_btree_walk(b, pos, 0, &path, false), 0);
	assert_true(path.root_level >= 1); /* a leaf, not the root */
	*loc = path.n[0]->disk;
	*min = path.n[0]->min_key;
	*max = path.n[0]->max_key;
	tfs_six_unlock_read(&b->lock);
	assert_true(loc->nr > 0);
}

/* Flips a byte of the first key of every copy of the node at loc: its checksum fails. */
static void damage_node(const struct tfs_btree_loc *loc)
{
	for (unsigned r = 0; r < loc->nr; r++) {
		int fd = open(T.path[loc->ptrs[r].dev], O_RDWR);
		off_t at = (off_t)(loc->ptrs[r].offset + sizeof(struct tfs_btree_node) + 8);
		u8 c;

		assert_true(fd >= 0);
		assert_int_equal(pread(fd, &c, 1, at), 1);
		c ^= 0xff;
		assert_int_equal(pwrite(fd, &c, 1, at), 1);
		close(fd);
	}
}

/*
 * Damages the leaf of btree id holding its middle key, on disk (every
 * copy), the journal clean.  fsck -n says which node and which keys are
 * lost, checks the rest as if the leaf were empty, exits 4 and writes
 * nothing; fsck -y replaces it with an empty node and repairs what
 * pointed into it (exit 1); the next fsck -n is clean.  The range lost in
 * *min..*max; the filesystem open afterwards.
 */
static void damaged_leaf(enum tfs_btree_id id, struct tfs_bpos *min, struct tfs_bpos *max)
{
	struct tfs_fsck_result res;
	struct tfs_btree_loc loc;
	struct printbuf line = PRINTBUF;
	u64 before;

	assert_int_equal(pt_reopen(&T), 0); /* every node on disk, the journal clean */
	find_leaf(id, middle_pos(id), &loc, min, max);
	tfs_btree_node_loc_to_text(&line, T.fs, id, 0, &loc);
	prt_str(&line, ": unreadable, keys ");
	tfs_bpos_to_text(&line, *min);
	prt_str(&line, "..");
	tfs_bpos_to_text(&line, *max);
	prt_str(&line, " lost");
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	/* As tinyfs fsck opens: it reports every damage itself. */
	T.opts.error_action = TFS_ON_ERROR_continue;
	before = images_hash();
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	if (!strstr(captured, printbuf_str(&line)))
		fprintf(stderr, "expected: %s\n", printbuf_str(&line));
	assert_non_null(strstr(captured, printbuf_str(&line)));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */

	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, printbuf_str(&line)));
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
	printbuf_exit(&line);
}

/*
 * The filesystem (closed, a leaf lost) checked as tinyfs fsck opens it
 * (replace_lost_leaves): fsck -n names the lost leaf (finding), exits 4;
 * fsck -y replaces it and exits 1.  Left open, read-write, and
 * replace_lost_leaves on.
 */
static void lost_leaf_check_then_repair(const char *finding)
{
	struct tfs_fsck_result res;

	T.opts.replace_lost_leaves = true;
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_non_null(strstr(captured, finding));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, finding));
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
}

static bool pos_in(struct tfs_bpos p, struct tfs_bpos min, struct tfs_bpos max)
{
	return tfs_bpos_cmp(p, min) >= 0 && tfs_bpos_cmp(p, max) <= 0;
}

/* File i (inode ino) reads back as written, 4 KiB; its xattr too unless xattr_lost. */
static void leaf_file_intact(unsigned i, tfs_ino_t ino, bool xattr_lost)
{
	char buf[4096], want[4096], name[64], x[64];
	struct tfs_file *f;
	ssize_t n;

	assert_int_equal(tfs_open(T.fs, ino, O_RDONLY, &f), 0);
	assert_int_equal(tfs_read(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_int_equal(tfs_release(T.fs, f), 0);
	pt_fill(want, sizeof(want), 1000 + i, 0);
	assert_memory_equal(buf, want, sizeof(buf));
	leaf_name(name, sizeof(name), i);
	n = tfs_getxattr(T.fs, ino, "user.n", x, sizeof(x));
	if (xattr_lost) {
		assert_int_equal(n, -ENODATA);
	} else {
		assert_int_equal(n, (ssize_t)strlen(name));
		assert_memory_equal(x, name, strlen(name));
	}
}

/*
 * A lost dirents leaf: the files it named are in /lost+found as #INO,
 * whole; every other file keeps its name.
 */
static void test_damaged_leaf_dirents(void **state)
{
	tfs_ino_t inos[LEAF_FILES], lf;
	struct tfs_bpos min, max;
	unsigned named = 0, found = 0;

	leaf_files(inos);
	damaged_leaf(TFS_BTREE_dirents, &min, &max);
	lf = pt_ino(&T, 1, "lost+found");
	assert_true(lf != 0);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char name[64];

		leaf_name(name, sizeof(name), i);
		if (pt_ino(&T, 1, name) == inos[i]) {
			named++;
		} else {
			snprintf(name, sizeof(name), "#%llu", (unsigned long long)inos[i]);
			assert_int_equal(pt_ino(&T, lf, name), inos[i]);
			found++;
		}
		leaf_file_intact(i, inos[i], false);
	}
	assert_true(named > 0 && found > 0);
	fprintf(stderr, "dirents leaf lost: %u names kept, %u files in /lost+found\n", named,
		found);
}

/*
 * A lost inodes leaf: its inodes are gone with their names, extents
 * (their space free again) and xattrs; every other file is whole.
 */
static void test_damaged_leaf_inodes(void **state)
{
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_bpos min, max;
	unsigned lost = 0;

	leaf_files(inos);
	damaged_leaf(TFS_BTREE_inodes, &min, &max);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char name[64];

		leaf_name(name, sizeof(name), i);
		if (pos_in(TFS_POS(inos[i], 0), min, max)) {
			struct tfs_bkey_buf kb;

			assert_int_equal(pt_ino(&T, 1, name), 0);
			assert_int_equal(
				tfs_btree_lookup(T.fs, TFS_BTREE_extents, TFS_POS(inos[i], 0), &kb),
				-ENOENT);
			lost++;
			continue;
		}
		assert_int_equal(pt_ino(&T, 1, name), inos[i]);
		leaf_file_intact(i, inos[i], false);
	}
	assert_true(lost > 0 && lost < LEAF_FILES);
	fprintf(stderr, "inodes leaf lost: %u files gone\n", lost);
}

/* A lost extents leaf: its files read zeros (blocks 0, size kept); the others are whole. */
static void test_damaged_leaf_extents(void **state)
{
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_bpos min, max;
	unsigned lost = 0;

	leaf_files(inos);
	damaged_leaf(TFS_BTREE_extents, &min, &max);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char buf[4096], zero[4096] = { 0 };
		struct tfs_file *f;
		struct tfs_stat st;

		if (!pos_in(TFS_POS(inos[i], 0), min, max)) {
			leaf_file_intact(i, inos[i], false);
			continue;
		}
		assert_int_equal(tfs_getattr(T.fs, inos[i], &st), 0);
		assert_int_equal(st.size, 4096);
		assert_int_equal(st.blocks, 0);
		assert_int_equal(tfs_open(T.fs, inos[i], O_RDONLY, &f), 0);
		assert_int_equal(tfs_read(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		assert_int_equal(tfs_release(T.fs, f), 0);
		assert_memory_equal(buf, zero, sizeof(buf));
		lost++;
	}
	assert_true(lost > 0 && lost < LEAF_FILES);
	fprintf(stderr, "extents leaf lost: %u files' data gone\n", lost);
}

/* A lost xattrs leaf: those xattrs are gone, the files and the other xattrs are whole. */
static void test_damaged_leaf_xattrs(void **state)
{
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_bpos min, max, at[LEAF_FILES];
	unsigned lost = 0;

	leaf_files(inos);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;

		tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_xattrs, TFS_POS(inos[i], 0),
				    TFS_POS(inos[i], UINT64_MAX));
		assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
		assert_non_null(k);
		at[i] = tfs_bkey_pos(k);
		tfs_btree_iter_exit(&iter);
	}
	damaged_leaf(TFS_BTREE_xattrs, &min, &max);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		bool gone = pos_in(at[i], min, max);

		leaf_file_intact(i, inos[i], gone);
		lost += gone;
	}
	assert_true(lost > 0 && lost < LEAF_FILES);
}

/*
 * A lost inodes leaf whose range the journal still changes (a crash after
 * chmods of half its inodes): an open replaying into it fails; fsck's open
 * (replace_lost_leaves, as tinyfs fsck opens) replaces it first and replay
 * puts the newer keys into the new leaf, so the files changed since keep
 * their inodes; -y repairs the rest, and the next check is clean.
 */
static void test_damaged_leaf_replay(void **state)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_MODE, .mode = S_IFREG | 0600 };
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES];
	bool kept[LEAF_FILES] = { false };
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;
	unsigned nr_in = 0, nr_kept = 0;
	char crash[160];

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_inodes, middle_pos(TFS_BTREE_inodes), &loc, &min, &max);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		struct tfs_stat st;

		if (!pos_in(TFS_POS(inos[i], 0), min, max) || nr_in++ % 2)
			continue;
		assert_int_equal(tfs_setattr(T.fs, inos[i], NULL, &sa, &st), 0);
		kept[i] = true;
		nr_kept++;
	}
	assert_true(nr_kept > 0 && nr_kept < nr_in);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	snprintf(crash, sizeof(crash), "%s/crash", T.dir);
	pt_copy_file(T.path[0], crash); /* as the power cut would leave it */
	assert_int_equal(pt_stop(&T), 0);
	pt_copy_file(crash, T.path[0]);
	unlink(crash);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.read_only = true;
	/* Replay walks into the lost leaf. */
	assert_true(tfs_err_matches(pt_open(&T), TFS_ERR_btree_node_invalid));
	lost_leaf_check_then_repair(": unreadable, keys ");
	assert_non_null(strstr(captured, "btree inodes level 0 node at"));
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char name[64];
		struct tfs_stat st;

		leaf_name(name, sizeof(name), i);
		if (pos_in(TFS_POS(inos[i], 0), min, max) && !kept[i]) {
			assert_int_equal(pt_ino(&T, 1, name), 0);
			continue;
		}
		assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
		assert_int_equal(st.ino, inos[i]);
		assert_int_equal(st.mode & 07777, kept[i] ? 0600 : 0644);
		leaf_file_intact(i, inos[i], false);
	}
}

/*
 * A lost inodes leaf holding directories: their names go, the names in
 * them too, and the files those named (whose inodes are kept) go to
 * /lost+found, whole.
 */
static void test_damaged_leaf_directories(void **state)
{
	enum {
		NR = LEAF_FILES / 2
	};
	tfs_ino_t dirs[NR], files[NR], lf;
	struct tfs_bpos min, max;
	unsigned lost_dirs = 0, found = 0;

	for (unsigned i = 0; i < NR; i++) {
		char name[64], buf[4096];
		struct tfs_file *f;
		struct tfs_stat st;

		leaf_name(name, sizeof(name), i);
		assert_int_equal(pt_mkdir(&T, 1, name, &st), 0);
		dirs[i] = st.ino;
		pt_fill(buf, sizeof(buf), 1000 + i, 0);
		assert_int_equal(pt_create(&T, dirs[i], name, &f), 0);
		assert_int_equal(tfs_write(T.fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
		files[i] = tfs_file_ino(f);
		assert_int_equal(tfs_release(T.fs, f), 0);
		assert_int_equal(tfs_setxattr(T.fs, files[i], "user.n", name, strlen(name), 0), 0);
	}
	damaged_leaf(TFS_BTREE_inodes, &min, &max);
	lf = pt_ino(&T, 1, "lost+found");
	for (unsigned i = 0; i < NR; i++) {
		char name[64];
		bool dir_lost = pos_in(TFS_POS(dirs[i], 0), min, max);
		bool file_lost = pos_in(TFS_POS(files[i], 0), min, max);

		leaf_name(name, sizeof(name), i);
		assert_int_equal(pt_ino(&T, 1, name), dir_lost ? 0 : dirs[i]);
		if (!dir_lost)
			assert_int_equal(pt_ino(&T, dirs[i], name), file_lost ? 0 : files[i]);
		if (dir_lost && !file_lost) {
			snprintf(name, sizeof(name), "#%llu", (unsigned long long)files[i]);
			assert_int_equal(pt_ino(&T, lf, name), files[i]);
			found++;
		}
		if (!file_lost)
			leaf_file_intact(i, files[i], false);
		lost_dirs += dir_lost;
	}
	assert_true(lost_dirs > 0 && found > 0);
}

/*
 * The inodes leaf holding the root directory's inode lost: fsck cannot
 * make a new root, says so and exits 4 (-y too), as e2fsck without a root
 * it could rebuild.
 */
static void test_damaged_leaf_root_inode(void **state)
{
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_inodes, TFS_POS(TFS_ROOT_INO, 0), &loc, &min, &max);
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);
	T.opts.error_action = TFS_ON_ERROR_continue;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_non_null(strstr(captured, "root directory (inode 1) does not exist: fsck cannot "
					 "make a new one"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	T.opts.error_action = -1;
}

/*
 * Degraded, a leaf whose copy on the present member is damaged and whose
 * other copy is on the missing member: it is away, not lost, so fsck
 * --degraded -y stops at it (as at any node it cannot read) and replaces
 * nothing; with the member back the leaf reads from there, every file whole.
 */
static void test_damaged_leaf_degraded(void **state)
{
	struct pt_geometry g = { .nr_devs = 2,
				 .size = 48ULL << 20,
				 .metadata_replicas = 2,
				 .data_replicas = 1,
				 .node_size = TFS_BTREE_NODE_SIZE_MIN };
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_btree_loc loc, on0 = { 0 };
	struct tfs_bpos min, max;
	int ret;

	pt_cleanup(&T);
	assert_int_equal(pt_mkfs(&T, &g), 0);
	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_dirents, middle_pos(TFS_BTREE_dirents), &loc, &min, &max);
	assert_int_equal(loc.nr, 2);
	for (unsigned r = 0; r < loc.nr; r++)
		if (!loc.ptrs[r].dev)
			on0.ptrs[on0.nr++] = loc.ptrs[r];
	assert_int_equal(on0.nr, 1);
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&on0);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.degraded = true;
	pt_register_faultdevs(&T);
	assert_int_equal(tfs_fs_open(T.paths, 1, &T.opts, &T.fs), 0); /* member 1 missing */
	ret = fsck_capture(true, &res);
	assert_true(tfs_err_matches(ret, TFS_ERR_btree_node_invalid) ||
		    tfs_err_matches(ret, TFS_ERR_btree_node_read));
	assert_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(pt_stop(&T), 0);

	T.opts.degraded = false;
	assert_int_equal(pt_open(&T), 0);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		char name[64];

		leaf_name(name, sizeof(name), i);
		assert_int_equal(pt_ino(&T, 1, name), inos[i]);
		leaf_file_intact(i, inos[i], false);
	}
	T.opts.error_action = -1;
}

/*
 * Every read of the node at loc (one copy) fails with EIO as `when` says
 * (a fault rule's words: "always", "times=1"), from the next open on;
 * the filesystem is closed.
 */
static void node_reads_fail(const struct tfs_btree_loc *loc, const char *when)
{
	assert_int_equal(loc->nr, 1);
	snprintf(T.rule[0], sizeof(T.rule[0]), "read range=%llu-%llu %s fail=EIO",
		 (unsigned long long)loc->ptrs[0].offset,
		 (unsigned long long)(loc->ptrs[0].offset + T.fs->node_size), when);
	assert_int_equal(pt_stop(&T), 0);
}

/*
 * A leaf no copy of which can be read (EIO from the device, every read):
 * lost as a damaged one is, "unreadable ... (btree_node_read)"; -y
 * replaces it, and with the device reading again everything else is whole.
 */
static void test_damaged_leaf_eio(void **state)
{
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;
	unsigned lost = 0;

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_extents, middle_pos(TFS_BTREE_extents), &loc, &min, &max);
	node_reads_fail(&loc, "always");

	T.opts.error_action = TFS_ON_ERROR_continue;
	lost_leaf_check_then_repair("lost (btree_node_read)");
	assert_non_null(strstr(captured, "btree extents level 0 node at"));
	assert_int_equal(pt_stop(&T), 0);
	T.rule[0][0] = 0;
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		struct tfs_stat st;

		if (!pos_in(TFS_POS(inos[i], 0), min, max)) {
			leaf_file_intact(i, inos[i], false);
			continue;
		}
		assert_int_equal(tfs_getattr(T.fs, inos[i], &st), 0);
		assert_int_equal(st.blocks, 0);
		lost++;
	}
	assert_true(lost > 0 && lost < LEAF_FILES);
	T.opts.error_action = -1;
}

/*
 * fsck -y, opened as tinyfs fsck opens, over a read error that passes
 * (node_reads_fail(..., "times=1")): nothing replaced, the check clean,
 * and with the device reading again every file whole.
 */
static void transient_read_error_loses_nothing(const tfs_ino_t *inos)
{
	struct tfs_fsck_result res;

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_null(strstr(captured, "replaced with an empty node"));
	assert_null(strstr(captured, " lost ("));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(pt_stop(&T), 0);
	T.rule[0][0] = 0;
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	for (unsigned i = 0; i < LEAF_FILES; i++)
		leaf_file_intact(i, inos[i], false);
	T.opts.error_action = -1;
}

/*
 * A read error that passes (a flaky link, a member back): the first read
 * of the leaf fails, the next succeeds.  fsck -y reads it again before it
 * gives the leaf up: nothing is replaced, nothing lost.
 */
static void test_damaged_leaf_eio_once(void **state)
{
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_extents, middle_pos(TFS_BTREE_extents), &loc, &min, &max);
	node_reads_fail(&loc, "times=1");
	transient_read_error_loses_nothing(inos);
}

/*
 * The same at fsck's open, for a root that is a leaf (the xattrs tree of
 * a few files): read again, not replaced, nothing lost.
 */
static void test_damaged_root_leaf_eio_once(void **state)
{
	tfs_ino_t inos[LEAF_FILES];

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(T.fs->btrees[TFS_BTREE_xattrs].root->level, 0);
	node_reads_fail(&T.fs->btrees[TFS_BTREE_xattrs].root->disk, "times=1");
	transient_read_error_loses_nothing(inos);
}

/*
 * The last inodes leaf lost, the journal clean: the open reads it for the
 * next inode number and fails; fsck's open (replace_lost_leaves) replaces
 * it then and opens; -y repairs, the next check is clean and new files
 * get numbers no key of a lost inode still uses.
 */
static void test_damaged_leaf_last_inodes(void **state)
{
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES];
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;
	struct tfs_stat st;

	leaf_files(inos);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_inodes, TFS_POS(inos[LEAF_FILES - 1], 0), &loc, &min, &max);
	assert_true(tfs_bpos_eq(max, TFS_POS_MAX));
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.read_only = true;
	assert_true(tfs_err_matches(pt_open(&T), TFS_ERR_btree_node_invalid));
	lost_leaf_check_then_repair(": unreadable, keys ");
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(pt_mknod(&T, 1, "new-after-fsck", S_IFREG | 0644, &st), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	for (unsigned i = 0; i < LEAF_FILES; i++)
		if (!pos_in(TFS_POS(inos[i], 0), min, max))
			leaf_file_intact(i, inos[i], false);
	T.opts.error_action = -1;
}

/* Whether the leaf of btree id covering pos is in memory. */
static bool leaf_in_memory(enum tfs_btree_id id, struct tfs_bpos pos)
{
	struct tfs_btree *b = &T.fs->btrees[id];
	struct tfs_bnode *n;

	tfs_six_lock_read(&b->lock);
	n = b->root;
	while (n && n->level)
		n = n->child[tfs_bnode_lower_bound(n, pos)];
	tfs_six_unlock_read(&b->lock);
	return n != NULL;
}

/*
 * A leaf lost while the filesystem is open, whose inodes the key cache
 * holds (clean: looked up; dirty: one changed since): fsck -y in that same
 * session replaces it; the clean entries go with the leaf (no lookup finds
 * an inode the btree lost), the dirty one's key goes into the new leaf
 * (its file stays, whole).
 */
static void test_damaged_leaf_key_cache(void **state)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_MODE, .mode = S_IFREG | 0600 };
	struct tfs_fsck_result res;
	tfs_ino_t inos[LEAF_FILES], dirty = 0;
	unsigned dirty_i = 0, cached = 0;
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max, mid;
	struct tfs_bkey_buf kb;
	struct tfs_stat st;

	leaf_files(inos);
	T.opts.error_action = TFS_ON_ERROR_continue;
	assert_int_equal(pt_reopen(&T), 0);
	assert_non_null(T.fs->key_cache);
	mid = middle_pos(TFS_BTREE_inodes);
	find_leaf(TFS_BTREE_inodes, mid, &loc, &min, &max);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		struct tfs_bpos pos = TFS_POS(inos[i], 0);

		if (!pos_in(pos, min, max))
			continue;
		if (!dirty) {
			dirty = inos[i];
			dirty_i = i;
			assert_int_equal(tfs_setattr(T.fs, dirty, NULL, &sa, &st), 0);
			assert_int_equal(
				tfs_btree_key_cache_state(T.fs->key_cache, TFS_BTREE_inodes, pos),
				1);
			continue;
		}
		assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes, pos, &kb), 0);
		assert_int_equal(tfs_btree_key_cache_state(T.fs->key_cache, TFS_BTREE_inodes, pos),
				 0);
		cached++;
	}
	assert_true(dirty && cached > 0);
	/* The leaf leaves the node cache (twice: a second chance), and is damaged on disk. */
	for (unsigned i = 0; i < 3 && leaf_in_memory(TFS_BTREE_inodes, mid); i++)
		tfs_btree_cache_scan(T.fs, 1UL << 30);
	assert_false(leaf_in_memory(TFS_BTREE_inodes, mid));
	damage_node(&loc);

	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, "1 newer key(s) of the key cache kept"));
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	for (unsigned i = 0; i < LEAF_FILES; i++) {
		if (!pos_in(TFS_POS(inos[i], 0), min, max) || inos[i] == dirty)
			continue;
		assert_int_equal(tfs_btree_key_cache_state(T.fs->key_cache, TFS_BTREE_inodes,
							   TFS_POS(inos[i], 0)),
				 -ENOENT);
		assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes, TFS_POS(inos[i], 0), &kb),
				 -ENOENT);
	}
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	assert_int_equal(tfs_getattr(T.fs, dirty, &st), 0);
	assert_int_equal(st.mode & 07777, 0600);
	leaf_file_intact(dirty_i, dirty, false);
	T.opts.error_action = -1;
}

/* --- a lost alloc leaf --- */

/*
 * ALLOC_FILES files of ALLOC_FILE_BYTES, 16 KiB nodes and buckets: one
 * user alloc key per file, so the alloc btree has several leaves.
 */
#define ALLOC_FILES 600
#define ALLOC_FILE_BYTES 16384

static int setup_small_buckets(void **state)
{
	struct pt_geometry g = { .node_size = TFS_BTREE_NODE_SIZE_MIN,
				 .bucket_size = TFS_BTREE_NODE_SIZE_MIN };

	return pt_mkfs(&T, &g) ? -1 : 0;
}

/* Writes file "NAME-%04u" i of bytes bytes (data seeded by seed + i), synced. */
static tfs_ino_t alloc_file(const char *name, unsigned i, size_t bytes, u64 seed)
{
	static char buf[1 << 16];
	char n[64];
	struct tfs_file *f;
	tfs_ino_t ino;

	assert_true(bytes <= sizeof(buf));
	snprintf(n, sizeof(n), "%s-%04u", name, i);
	pt_fill(buf, bytes, seed + i, 0);
	assert_int_equal(pt_create(&T, 1, n, &f), 0);
	assert_int_equal(tfs_write(T.fs, f, buf, bytes, 0), (ssize_t)bytes);
	ino = tfs_file_ino(f);
	assert_int_equal(tfs_release(T.fs, f), 0);
	return ino;
}

/* File ino reads back bytes bytes seeded by seed. */
static void alloc_file_intact(tfs_ino_t ino, size_t bytes, u64 seed)
{
	static char buf[1 << 16], want[1 << 16];
	struct tfs_file *f;

	assert_int_equal(tfs_open(T.fs, ino, O_RDONLY, &f), 0);
	assert_int_equal(tfs_read(T.fs, f, buf, bytes, 0), (ssize_t)bytes);
	assert_int_equal(tfs_release(T.fs, f), 0);
	pt_fill(want, bytes, seed, 0);
	assert_memory_equal(buf, want, bytes);
}

static int count_free_node_blocks(void *ctx, const struct tfs_btree_ptr *ptr)
{
	u64 *nr_free = ctx;

	for (unsigned i = 0; i < ptr->nr_ptrs; i++)
		for (u64 b = 0; b < T.fs->node_size; b += T.fs->block_size) {
			struct tfs_alloc_run one = { .dev = le32_to_cpu(ptr->ptrs[i].dev),
						     .offset = le64_to_cpu(ptr->ptrs[i].offset) + b,
						     .len = T.fs->block_size };

			*nr_free += !tfs_alloc_mark_used(T.fs, &one);
		}
	return 0;
}

/*
 * The blocks of every extent and of every copy of every node that the
 * allocator would hand out (not marked used); each is marked as it is
 * looked at (tfs_alloc_mark_used() says whether it was free).
 */
static u64 blocks_in_use_but_free(void)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 nr_free = 0;
	int ret;

	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		assert_int_equal(
			tfs_btree_node_locations(T.fs, id, count_free_node_blocks, &nr_free), 0);
	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_extents, TFS_POS_MIN, TFS_POS_MAX);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_extent *x = tfs_bkey_val(k);

		for (unsigned i = 0; k->type == TFS_BKEY_extent && i < x->nr_ptrs; i++) {
			u64 off = le64_to_cpu(x->ptrs[i].offset);

			for (u32 b = 0; b < le32_to_cpu(x->nr_blocks); b++) {
				struct tfs_alloc_run one = { .dev = le32_to_cpu(x->ptrs[i].dev),
							     .offset = off +
								       (u64)b * T.fs->block_size,
							     .len = T.fs->block_size };

				nr_free += !tfs_alloc_mark_used(T.fs, &one);
			}
		}
	}
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	return nr_free;
}

/*
 * The alloc leaves (or node) lines[0..nr) name were damaged, every copy: a
 * read-only open fails on them; fsck's open replaces them (nothing in use
 * is free in the allocator it builds) and fsck -n names each (exit 4, in
 * *res; what it printed in captured).  Returns the images' hash, for the
 * caller to check -n wrote nothing once it stopped the filesystem.
 */
static u64 lost_alloc_fsck_n(const struct printbuf *lines, unsigned nr, struct tfs_fsck_result *res)
{
	u64 before;

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.read_only = true;
	/* The open reads the whole alloc btree (the allocator is built from it). */
	assert_true(tfs_err_matches(pt_open(&T), TFS_ERR_btree_node_invalid));
	before = images_hash();
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	/* Nothing in use is free in the allocator the open built. */
	assert_int_equal(blocks_in_use_but_free(), 0);
	assert_int_equal(fsck_capture(false, res), 0);
	for (unsigned l = 0; l < nr; l++)
		assert_non_null(strstr(captured, printbuf_str(&lines[l])));
	return before;
}

/*
 * Read back from the disk: every old file (alloc_file("old", ...)) and the
 * nr_new new ones of new_bytes intact, and fsck -n clean.
 */
static void alloc_files_intact_clean(const tfs_ino_t *inos, const tfs_ino_t *news, unsigned nr_new,
				     size_t new_bytes)
{
	struct tfs_fsck_result res;

	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 0; i < ALLOC_FILES; i++)
		alloc_file_intact(inos[i], ALLOC_FILE_BYTES, 7000 + i);
	for (unsigned i = 0; i < nr_new; i++)
		alloc_file_intact(news[i], new_bytes, 90000 + i);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
}

/*
 * Alloc leaves lost (every copy): the middle one (alloc keys of file data)
 * and the one holding the first btree alloc key (node space, counters).
 * The open loads the alloc btree whole, so a plain open fails; fsck's open
 * (replace_lost_leaves) replaces them with empty leaves and marks every
 * block the extents and every tree's nodes use before anything can be
 * allocated.  fsck -n names the leaves, exits 4 and writes nothing; -y
 * rewrites the keys from the extents and nodes (exit 1); -n is clean.  Then
 * new data of most of the free space: every old file reads back intact (a
 * block in use handed out again would overwrite one), fsck still clean.
 */
static void test_damaged_leaf_alloc(void **state)
{
	enum {
		NEW_BYTES = 1 << 16
	};
	static tfs_ino_t inos[ALLOC_FILES], news[1024];
	struct tfs_btree_loc loc[2];
	struct tfs_bpos min[2], max[2];
	struct printbuf line[2] = { PRINTBUF, PRINTBUF };
	struct tfs_fsck_result res;
	struct tfs_alloc_usage u;
	unsigned nr_loc = 1, nr_new;
	u64 before;

	for (unsigned i = 0; i < ALLOC_FILES; i++)
		inos[i] = alloc_file("old", i, ALLOC_FILE_BYTES, 7000);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_alloc, middle_pos(TFS_BTREE_alloc), &loc[0], &min[0], &max[0]);
	find_leaf(TFS_BTREE_alloc, TFS_POS(TFS_ALLOC_BTREE_INODE, 0), &loc[1], &min[1], &max[1]);
	if (!tfs_bpos_eq(min[1], min[0]))
		nr_loc = 2;
	for (unsigned l = 0; l < nr_loc; l++) {
		tfs_btree_node_loc_to_text(&line[l], T.fs, TFS_BTREE_alloc, 0, &loc[l]);
		prt_str(&line[l], ": unreadable, keys ");
		tfs_bpos_to_text(&line[l], min[l]);
		prt_str(&line[l], "..");
		tfs_bpos_to_text(&line[l], max[l]);
		prt_str(&line[l], " lost");
	}
	assert_int_equal(pt_stop(&T), 0);
	for (unsigned l = 0; l < nr_loc; l++)
		damage_node(&loc[l]);

	before = lost_alloc_fsck_n(line, nr_loc, &res);
	assert_non_null(strstr(captured, "no alloc key, but extent "));
	assert_non_null(strstr(captured, "checked as an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */

	/*
	 * Writable, new data before the repair (anything may allocate once
	 * open returns): none may land on an old file's blocks, nor a node.
	 */
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	tfs_alloc_usage(T.fs, &u);
	nr_new = (unsigned)min_t(u64, u.free * 2 / 5 / NEW_BYTES, ARRAY_SIZE(news) / 2);
	fprintf(stderr, "alloc leaves lost: %u; %llu bytes free: %u new files, twice\n", nr_loc,
		(unsigned long long)u.free, nr_new);
	assert_true(nr_new > ALLOC_FILES / 4);
	for (unsigned i = 0; i < nr_new; i++)
		news[i] = alloc_file("new", i, NEW_BYTES, 90000);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	for (unsigned l = 0; l < nr_loc; l++)
		assert_non_null(strstr(captured, printbuf_str(&line[l])));
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_null(strstr(captured, "overlap"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);

	/* And after the repair, from the rewritten keys. */
	for (unsigned i = nr_new; i < 2 * nr_new; i++)
		news[i] = alloc_file("new", i, NEW_BYTES, 90000);
	alloc_files_intact_clean(inos, news, 2 * nr_new, NEW_BYTES);
	T.opts.error_action = -1;
	for (unsigned l = 0; l < nr_loc; l++)
		printbuf_exit(&line[l]);
}

/*
 * fsck -y stops (a crash) once its replacement of a lost alloc leaf is on
 * disk, before the alloc keys are rewritten: the alloc btree now reads
 * whole, without the keys the leaf held.  The rebuild marker fsck set
 * first makes the next open, a mount's, mark what the extents and nodes
 * use: nothing in use is free, new data leaves every old file intact.
 * fsck -n then says the repair was not finished (4); -y finishes it (1),
 * removes the marker; clean.
 */
static void test_damaged_leaf_alloc_interrupted(void **state)
{
	enum {
		NEW_BYTES = 1 << 16
	};
	static tfs_ino_t inos[ALLOC_FILES], news[512];
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT };
	struct tfs_btree_loc loc;
	struct tfs_bpos min, max;
	struct tfs_fsck_result res;
	struct tfs_alloc_usage u;
	struct tfs_bkey_buf kb;
	unsigned nr_new;

	for (unsigned i = 0; i < ALLOC_FILES; i++)
		inos[i] = alloc_file("old", i, ALLOC_FILE_BYTES, 7000);
	assert_int_equal(pt_reopen(&T), 0);
	find_leaf(TFS_BTREE_alloc, middle_pos(TFS_BTREE_alloc), &loc, &min, &max);
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_fault_point_arm("fsck:after_lost_leaves", &arm), 0);
	assert_int_equal(fsck_capture(true, &res), -TFS_ERR_fault_injected);
	tfs_fault_points_reset();
	assert_int_equal(pt_stop(&T), 0);

	/* As a mount opens. */
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, TFS_ALLOC_REBUILD_POS, &kb), 0);
	assert_int_equal(blocks_in_use_but_free(), 0);
	assert_int_equal(pt_reopen(&T), 0);
	tfs_alloc_usage(T.fs, &u);
	nr_new = (unsigned)min_t(u64, u.free * 3 / 5 / NEW_BYTES, ARRAY_SIZE(news));
	assert_true(nr_new > ALLOC_FILES / 4);
	for (unsigned i = 0; i < nr_new; i++)
		news[i] = alloc_file("new", i, NEW_BYTES, 90000);
	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 0; i < ALLOC_FILES; i++)
		alloc_file_intact(inos[i], ALLOC_FILE_BYTES, 7000 + i);
	for (unsigned i = 0; i < nr_new; i++)
		alloc_file_intact(news[i], NEW_BYTES, 90000 + i);

	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_non_null(strstr(captured, "repair of lost alloc leaves was not finished"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, "fixed: alloc: keys rewritten from the extents and nodes: "
					 "rebuild marker removed"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_alloc, TFS_ALLOC_REBUILD_POS, &kb),
			 -ENOENT);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
}

/*
 * The alloc btree's root, an interior node, lost (every copy): the open
 * reads every interior node and fails; fsck's open replaces the whole
 * alloc btree with an empty root leaf (every alloc key can be rebuilt) and
 * marks the space in use from the extents and nodes.  fsck -n says it and
 * writes nothing (4), -y rewrites every key (1), clean; new data leaves
 * every old file intact.
 */
static void test_damaged_interior_alloc(void **state)
{
	enum {
		NEW_BYTES = 1 << 16
	};
	static tfs_ino_t inos[ALLOC_FILES], news[512];
	struct tfs_btree *b;
	struct tfs_btree_loc loc;
	struct printbuf line = PRINTBUF;
	struct tfs_fsck_result res;
	struct tfs_alloc_usage u;
	unsigned nr_new;
	u64 before;

	for (unsigned i = 0; i < ALLOC_FILES; i++)
		inos[i] = alloc_file("old", i, ALLOC_FILE_BYTES, 7000);
	assert_int_equal(pt_reopen(&T), 0);
	b = &T.fs->btrees[TFS_BTREE_alloc];
	assert_true(b->root->level >= 1);
	loc = b->root->disk;
	assert_true(loc.nr > 0);
	tfs_btree_node_loc_to_text(&line, T.fs, TFS_BTREE_alloc, b->root->level, &loc);
	prt_str(&line, ": unreadable, keys 0:0..POS_MAX lost");
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	before = lost_alloc_fsck_n(&line, 1, &res);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */

	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);

	tfs_alloc_usage(T.fs, &u);
	nr_new = (unsigned)min_t(u64, u.free * 3 / 5 / NEW_BYTES, ARRAY_SIZE(news));
	assert_true(nr_new > ALLOC_FILES / 4);
	for (unsigned i = 0; i < nr_new; i++)
		news[i] = alloc_file("new", i, NEW_BYTES, 90000);
	alloc_files_intact_clean(inos, news, nr_new, NEW_BYTES);
	T.opts.error_action = -1;
	printbuf_exit(&line);
}

/* --- a lost interior node of the dirents, inodes or extents btree --- */

/* Names: dirents get long ones, so few files make a deep dirents tree. */
#define INTERIOR_MAX 40000
#define INTERIOR_TARGET 2000 /* symlink target bytes: few make a deep extents tree */

static tfs_ino_t interior_inos[INTERIOR_MAX];
/* With the symlinks, every 50th: a regular file of 4 KiB (an extent with a block). */
static tfs_ino_t interior_data_inos[INTERIOR_MAX / 50];

static void interior_name(char *buf, size_t len, enum tfs_btree_id id, unsigned i)
{
	if (id == TFS_BTREE_dirents)
		snprintf(buf, len, "%04u-%0200u", i, i);
	else
		snprintf(buf, len, "i%05u", i);
}

static void interior_target(char *buf, unsigned i)
{
	memset(buf, 'a' + i % 26, INTERIOR_TARGET);
	snprintf(buf, 16, "%u/", i);
	buf[strlen(buf)] = 'x';
	buf[INTERIOR_TARGET] = 0;
}

static unsigned root_level(enum tfs_btree_id id)
{
	struct tfs_btree *b = &T.fs->btrees[id];
	unsigned level;

	tfs_six_lock_read(&b->lock);
	level = b->root->level;
	tfs_six_unlock_read(&b->lock);
	return level;
}

/*
 * Names (regular files; for the extents btree symlinks with long targets,
 * and every 50th a regular file "dNNNNN" with 4 KiB of data) in the root
 * directory until btree id has a root at level 2 or more; how many in the
 * return.
 */
static unsigned interior_files(enum tfs_btree_id id)
{
	static char target[INTERIOR_TARGET + 1];
	unsigned n = 0;

	while (root_level(id) < 2) {
		for (unsigned end = n + 500; n < end; n++) {
			char name[256];
			struct tfs_stat st;

			assert_true(n < INTERIOR_MAX);
			interior_name(name, sizeof(name), id, n);
			if (id == TFS_BTREE_extents) {
				interior_target(target, n);
				assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, name,
							     strlen(name), target, &st),
						 0);
				if (n % 50 == 0) {
					struct tfs_stat dst;

					snprintf(name, sizeof(name), "d%05u", n);
					write_file(name, n, 4096, &dst);
					interior_data_inos[n / 50] = dst.ino;
				}
			} else {
				assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 0644, &st), 0);
			}
			interior_inos[n] = st.ino;
		}
		/* The inodes reach their btree through the key cache: write it back. */
		assert_int_equal(tfs_syncfs(T.fs), 0);
	}
	return n;
}

/*
 * Damages (every copy, the journal clean) the level 1 node of btree id
 * under the root's middle key: an open (the mount's) fails; fsck -n says
 * which node and which range is lost, as an interior node, checks the rest
 * as if its range were empty (salvage: with the keys found on the members,
 * in memory), exits 4 and writes nothing; fsck -y replaces it by an empty
 * subtree (salvage: puts back the keys found), repairs what pointed into
 * it (exit 1); the next fsck -n is clean and the tree takes new keys.  The
 * range lost in *min..*max; the filesystem left open; the keys -y
 * salvaged returned.
 */
static u64 damaged_interior(enum tfs_btree_id id, bool salvage, struct tfs_bpos *min,
			    struct tfs_bpos *max)
{
	struct tfs_btree *b;
	struct tfs_btree_path path;
	struct tfs_btree_loc loc;
	struct tfs_fsck_result res;
	struct printbuf line = PRINTBUF;
	struct tfs_bpos at;
	struct tfs_stat st;
	u64 before, salvaged;

	no_salvage = !salvage;
	assert_int_equal(pt_reopen(&T), 0); /* every node on disk, the journal clean */
	b = &T.fs->btrees[id];
	tfs_six_lock_read(&b->lock);
	assert_true(b->root->level >= 2);
	at = tfs_bkey_pos(tfs_bnode_key(b->root, b->root->nr_keys / 2));
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	loc = path.n[1]->disk;
	*min = path.n[1]->min_key;
	*max = path.n[1]->max_key;
	tfs_six_unlock_read(&b->lock);
	assert_true(loc.nr > 0);
	tfs_btree_node_loc_to_text(&line, T.fs, id, 1, &loc);
	prt_str(&line, ": unreadable, keys ");
	tfs_bpos_to_text(&line, *min);
	prt_str(&line, "..");
	tfs_bpos_to_text(&line, *max);
	prt_str(&line, " lost (an interior node, its whole subtree: ");
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	before = images_hash();
	/* A mount (no replace_lost_leaves) refuses it: the node is named above. */
	T.opts.read_only = true;
	assert_true(tfs_err_matches(pt_open(&T), TFS_ERR_btree_node_invalid));
	assert_null(T.fs);
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	if (!strstr(captured, printbuf_str(&line)))
		fprintf(stderr, "expected: %s\n", printbuf_str(&line));
	assert_non_null(strstr(captured, printbuf_str(&line)));
	assert_non_null(strstr(captured, "checked as an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_LEFT);
	salvaged = res.salvaged;
	assert_true(salvage ? salvaged > 0 : !salvaged);
	if (salvage)
		assert_non_null(strstr(captured, "salvaged from leaves found on the members (in "
						 "memory: -y puts them back)"));
	assert_int_equal(pt_stop(&T), 0);
	assert_true(images_hash() == before); /* -n wrote nothing */

	T.opts.read_only = false;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_non_null(strstr(captured, printbuf_str(&line)));
	assert_non_null(strstr(captured, "replaced with an empty node"));
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	assert_true(res.salvaged == salvaged); /* -n checked what -y left */
	salvaged = res.salvaged;
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;

	/* The tree takes keys again, in the lost range too, and they read back after a reopen. */
	for (unsigned i = 0; i < 300; i++) {
		char name[32];

		snprintf(name, sizeof(name), "new-%u", i);
		if (id == TFS_BTREE_extents)
			assert_int_equal(
				tfs_symlink(T.fs, &pt_root_ctx, 1, name, strlen(name), name, &st),
				0);
		else
			assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 0644, &st), 0);
	}
	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 0; i < 300; i++) {
		char name[32], t[32];

		snprintf(name, sizeof(name), "new-%u", i);
		assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
		if (id == TFS_BTREE_extents) {
			assert_int_equal(tfs_readlink(T.fs, st.ino, t, sizeof(t)),
					 (ssize_t)strlen(name));
			assert_memory_equal(t, name, strlen(name));
		}
	}
	assert_int_equal(tfs_btree_verify(T.fs, id), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	printbuf_exit(&line);
	no_salvage = false;
	return salvaged;
}

/*
 * A lost interior dirents node, not salvaged (--no-salvage): the names
 * under it go, their files go to /lost+found as #INO; every other name
 * resolves.
 */
static void test_damaged_interior_dirents(void **state)
{
	unsigned n = interior_files(TFS_BTREE_dirents), named = 0, found = 0;
	struct tfs_bpos min, max;
	tfs_ino_t lf;

	damaged_interior(TFS_BTREE_dirents, false, &min, &max);
	lf = pt_ino(&T, 1, "lost+found");
	assert_true(lf != 0);
	for (unsigned i = 0; i < n; i++) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_dirents, i);
		if (pt_ino(&T, 1, name) == interior_inos[i]) {
			named++;
		} else {
			snprintf(name, sizeof(name), "#%llu", (unsigned long long)interior_inos[i]);
			assert_int_equal(pt_ino(&T, lf, name), interior_inos[i]);
			found++;
		}
	}
	assert_true(named > 0 && found > 0);
	fprintf(stderr, "dirents interior node lost: %u of %u names kept, %u in /lost+found\n",
		named, n, found);
}

/*
 * A lost interior inodes node, not salvaged: the files under it are gone
 * with their names; the others stay.
 */
static void test_damaged_interior_inodes(void **state)
{
	unsigned n = interior_files(TFS_BTREE_inodes), lost = 0;
	struct tfs_bpos min, max;

	damaged_interior(TFS_BTREE_inodes, false, &min, &max);
	for (unsigned i = 0; i < n; i++) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		if (pos_in(TFS_POS(interior_inos[i], 0), min, max)) {
			assert_int_equal(pt_ino(&T, 1, name), 0);
			lost++;
		} else {
			assert_int_equal(pt_ino(&T, 1, name), interior_inos[i]);
		}
	}
	assert_true(lost > 0 && lost < n);
	fprintf(stderr, "inodes interior node lost: %u of %u files gone\n", lost, n);
}

/*
 * A lost interior extents node, not salvaged: the symlinks whose targets
 * were under it are removed with their names (fsck: "its target is
 * gone"); every other target reads back.
 */
static void test_damaged_interior_extents(void **state)
{
	static char target[INTERIOR_TARGET + 1], got[INTERIOR_TARGET + 1];
	unsigned n = interior_files(TFS_BTREE_extents), lost = 0;
	struct tfs_bpos min, max;

	damaged_interior(TFS_BTREE_extents, false, &min, &max);
	for (unsigned i = 0; i < n; i++) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_extents, i);
		if (pos_in(TFS_POS(interior_inos[i], 0), min, max)) {
			struct tfs_stat st;

			assert_int_equal(pt_lookup(&T, 1, name, &st), -ENOENT);
			lost++;
			continue;
		}
		assert_int_equal(pt_ino(&T, 1, name), interior_inos[i]);
		interior_target(target, i);
		assert_int_equal(tfs_readlink(T.fs, interior_inos[i], got, sizeof(got)),
				 INTERIOR_TARGET);
		assert_memory_equal(got, target, INTERIOR_TARGET);
	}
	assert_true(lost > 0 && lost < n);
	fprintf(stderr, "extents interior node lost: %u of %u symlinks gone\n", lost, n);
}

/*
 * A lost interior node salvaged (fsck's default): the leaves under it are
 * whole on the member, so every key under it comes back (nothing was
 * removed since they were written: none is stale); every name resolves
 * to its file, nothing goes to /lost+found.
 */
static void test_salvage_interior_dirents(void **state)
{
	unsigned n = interior_files(TFS_BTREE_dirents), in = 0;
	struct tfs_bpos min, max;
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	u64 salvaged = damaged_interior(TFS_BTREE_dirents, true, &min, &max);
	int ret;

	for (unsigned i = 0; i < n; i++) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_dirents, i);
		assert_int_equal(pt_ino(&T, 1, name), interior_inos[i]);
	}
	/* The test's long names in the range lost (not the short ones made after the repair). */
	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_dirents, min, max);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k; ret = tfs_btree_iter_next(&iter, &k))
		in += ((const struct tfs_dirent *)tfs_bkey_val(k))->name_len > 200;
	tfs_btree_iter_exit(&iter);
	assert_int_equal(ret, 0);
	assert_true(in > 0);
	assert_int_equal(salvaged, in);
	assert_int_equal(pt_ino(&T, 1, "lost+found"), 0); /* nothing was lost */
	fprintf(stderr, "dirents interior node lost: %llu of %u names salvaged\n",
		(unsigned long long)salvaged, n);
}

/*
 * Salvaged: every inode under the lost node comes back, named and whole;
 * the files removed before the damage do not (their inode keys are in
 * older copies of the leaves, still on the member, but a newer leaf over
 * their position says they are gone): nothing goes to /lost+found.
 */
static void test_salvage_interior_inodes(void **state)
{
	unsigned n = interior_files(TFS_BTREE_inodes), in = 0, removed = 0;
	struct tfs_bpos min, max;
	u64 salvaged;

	/* Written whole first, so older copies of these leaves hold the inodes removed. */
	assert_int_equal(pt_reopen(&T), 0);
	for (unsigned i = 0; i < n; i += 7) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		assert_int_equal(tfs_unlink(T.fs, 1, name, strlen(name)), 0);
	}
	salvaged = damaged_interior(TFS_BTREE_inodes, true, &min, &max);
	for (unsigned i = 0; i < n; i++) {
		char name[256];
		struct tfs_stat st;
		bool lost = pos_in(TFS_POS(interior_inos[i], 0), min, max);
		struct tfs_bkey_buf kb;

		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		if (i % 7 == 0) {
			assert_int_equal(pt_lookup(&T, 1, name, &st), -ENOENT);
			assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes,
							  TFS_POS(interior_inos[i], 0), &kb),
					 -ENOENT);
			removed += lost;
			continue;
		}
		assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
		assert_int_equal(st.ino, interior_inos[i]);
		assert_int_equal(st.mode, S_IFREG | 0644);
		in += lost;
	}
	assert_true(in > 0 && removed > 0);
	assert_int_equal(salvaged, in);
	assert_int_equal(pt_ino(&T, 1, "lost+found"), 0); /* no inode came back unnamed */
	fprintf(stderr,
		"inodes interior node lost: %llu of %u inodes salvaged, %u removed stayed so\n",
		(unsigned long long)salvaged, n, removed);
}

/* Salvaged: every symlink target under the lost node comes back. */
static void test_salvage_interior_extents(void **state)
{
	static char target[INTERIOR_TARGET + 1], got[INTERIOR_TARGET + 1];
	unsigned n = interior_files(TFS_BTREE_extents), in = 0;
	struct tfs_bpos min, max;
	u64 salvaged = damaged_interior(TFS_BTREE_extents, true, &min, &max);
	unsigned data_in = 0;

	for (unsigned i = 0; i < n; i++) {
		char name[256];

		interior_name(name, sizeof(name), TFS_BTREE_extents, i);
		assert_int_equal(pt_ino(&T, 1, name), interior_inos[i]);
		interior_target(target, i);
		assert_int_equal(tfs_readlink(T.fs, interior_inos[i], got, sizeof(got)),
				 INTERIOR_TARGET);
		assert_memory_equal(got, target, INTERIOR_TARGET);
		in += pos_in(TFS_POS(interior_inos[i], 0), min, max);
		if (i % 50 == 0) {
			/* The file's extent (its block accounted again by the commit) reads back. */
			tfs_ino_t ino = interior_data_inos[i / 50];
			char want[4096], data[4096];
			struct tfs_file *f;
			struct tfs_stat st;

			assert_int_equal(tfs_getattr(T.fs, ino, &st), 0);
			assert_int_equal(st.blocks, 4096 / 512);
			assert_int_equal(tfs_open(T.fs, ino, O_RDONLY, &f), 0);
			assert_int_equal(tfs_read(T.fs, f, data, sizeof(data), 0), 4096);
			assert_int_equal(tfs_release(T.fs, f), 0);
			pt_fill(want, sizeof(want), i, 0);
			assert_memory_equal(data, want, sizeof(want));
			data_in += pos_in(TFS_POS(ino, 0), min, max);
		}
	}
	assert_true(in > 0 && data_in > 0);
	assert_int_equal(salvaged, in + data_in);
	fprintf(stderr, "extents interior node lost: %llu of %u targets and files salvaged\n",
		(unsigned long long)salvaged, n + (n + 49) / 50);
}

/*
 * The lost inodes node is the root's last child: the open's next inode
 * number (past the last inode key it found) falls inside the lost range.
 * The salvage puts the inodes above it back, and the first inode fsck
 * makes itself (/lost+found, for a file whose name went) must not take
 * the number of one of them: every file keeps its inode.
 */
static void test_salvage_interior_last_inodes(void **state)
{
	unsigned n = interior_files(TFS_BTREE_inodes), in = 0;
	struct tfs_btree *b;
	struct tfs_btree_path path;
	struct tfs_btree_loc loc;
	struct tfs_fsck_result res;
	struct tfs_bpos min, max, at;
	char name[256];
	tfs_ino_t lf;

	/* File 0 (not under the lost node) loses its name: fsck makes /lost+found. */
	interior_name(name, sizeof(name), TFS_BTREE_inodes, 0);
	del_key(TFS_BTREE_dirents, TFS_POS(1, dirent_slot(1, name)));
	assert_int_equal(pt_reopen(&T), 0); /* every node on disk, the journal clean */
	b = &T.fs->btrees[TFS_BTREE_inodes];
	tfs_six_lock_read(&b->lock);
	at = tfs_bkey_pos(tfs_bnode_key(b->root, b->root->nr_keys - 1));
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	loc = path.n[1]->disk;
	min = path.n[1]->min_key;
	max = path.n[1]->max_key;
	tfs_six_unlock_read(&b->lock);
	assert_true(!pos_in(TFS_POS(interior_inos[0], 0), min, max));
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	assert_true(res.salvaged > 0);
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
	lf = pt_ino(&T, 1, "lost+found");
	assert_true(lf != 0);
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)interior_inos[0]);
	assert_int_equal(pt_ino(&T, lf, name), interior_inos[0]);
	for (unsigned i = 1; i < n; i++) {
		struct tfs_stat st;

		assert_true(interior_inos[i] != lf);
		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
		assert_int_equal(st.ino, interior_inos[i]);
		assert_int_equal(st.mode, S_IFREG | 0644);
		in += pos_in(TFS_POS(interior_inos[i], 0), min, max);
	}
	assert_true(in > 0);
}

/*
 * A clone of the filesystem (same uuid: the same node magic) that went on
 * without it, its nodes kept in a regular file of the filesystem (an image
 * backup, a VM disk): its leaves verify, and those newer than the live
 * leaves of the lost range (the clone changed modes after the copy) would
 * win the salvage.  Blocks the user alloc keys mark used are file data, not
 * nodes: every file keeps its own mode, 0644, not the clone's 0600.
 */
static void test_salvage_interior_clone_in_file(void **state)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_MODE, .mode = S_IFREG | 0600 };
	unsigned n = interior_files(TFS_BTREE_inodes), in = 0;
	struct tfs_btree *b;
	struct tfs_btree_path path;
	struct tfs_btree_loc loc;
	struct tfs_fsck_result res;
	struct tfs_bpos min, max, at;
	static char node[1 << 16];
	char saved[160], clone[160];
	struct tfs_file *f;
	u64 clone_seq;
	int fd;

	snprintf(saved, sizeof(saved), "%s/saved", T.dir);
	snprintf(clone, sizeof(clone), "%s/clone", T.dir);
	assert_int_equal(pt_reopen(&T), 0); /* every node on disk, the journal clean */
	b = &T.fs->btrees[TFS_BTREE_inodes];
	tfs_six_lock_read(&b->lock);
	at = tfs_bkey_pos(tfs_bnode_key(b->root, b->root->nr_keys / 2));
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	min = path.n[1]->min_key;
	max = path.n[1]->max_key;
	tfs_six_unlock_read(&b->lock);
	assert_int_equal(pt_stop(&T), 0);
	pt_copy_file(T.path[0], saved);

	/* The clone: every file of the range 0600, written back. */
	assert_int_equal(pt_open(&T), 0);
	for (unsigned i = 0; i < n; i++) {
		struct tfs_stat st;

		if (pos_in(TFS_POS(interior_inos[i], 0), min, max))
			assert_int_equal(tfs_setattr(T.fs, interior_inos[i], NULL, &sa, &st), 0);
		if (i % 500 == 499)
			assert_int_equal(tfs_syncfs(T.fs), 0);
	}
	assert_int_equal(pt_reopen(&T), 0);
	clone_seq = T.fs->next_node_seq;
	assert_int_equal(pt_stop(&T), 0);
	pt_copy_file(T.path[0], clone);
	pt_copy_file(saved, T.path[0]);
	unlink(saved);

	/* The original goes further (not in that range), then keeps the clone's nodes in a file. */
	assert_int_equal(pt_open(&T), 0);
	for (unsigned round = 0; round % 2 || T.fs->next_node_seq >> 20 <= clone_seq >> 20;
	     round++) {
		assert_true(round < 1000);
		sa.mode = S_IFREG | (round % 2 ? 0644 : 0640);
		for (unsigned i = 0; i < n; i += 10) {
			struct tfs_stat st;

			if (!pos_in(TFS_POS(interior_inos[i], 0), min, max))
				assert_int_equal(
					tfs_setattr(T.fs, interior_inos[i], NULL, &sa, &st), 0);
		}
		assert_int_equal(tfs_syncfs(T.fs), 0);
		assert_int_equal(pt_reopen(&T), 0); /* a new open: node seqs from its journal seq */
	}
	assert_int_equal(pt_create(&T, 1, "clone.img", &f), 0);
	fd = open(clone, O_RDONLY);
	assert_true(fd >= 0);
	for (off_t o = 0; pread(fd, node, T.fs->node_size, o) == (ssize_t)T.fs->node_size;
	     o += T.fs->block_size) {
		const struct tfs_btree_node *h = (const void *)node;

		if (le64_to_cpu(h->magic) == T.fs->node_magic && h->btree_id == TFS_BTREE_inodes &&
		    !h->level)
			assert_int_equal(tfs_write(T.fs, f, node, T.fs->node_size, o),
					 (ssize_t)T.fs->node_size);
	}
	close(fd);
	unlink(clone);
	assert_int_equal(tfs_release(T.fs, f), 0);

	/* The same node of the original (the clone's tree has the same shape) lost. */
	assert_int_equal(pt_reopen(&T), 0);
	b = &T.fs->btrees[TFS_BTREE_inodes];
	tfs_six_lock_read(&b->lock);
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	loc = path.n[1]->disk;
	assert_true(!tfs_bpos_cmp(path.n[1]->min_key, min) &&
		    !tfs_bpos_cmp(path.n[1]->max_key, max));
	tfs_six_unlock_read(&b->lock);
	assert_int_equal(pt_stop(&T), 0);
	damage_node(&loc);
	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
	for (unsigned i = 0; i < n; i++) {
		char name[256];
		struct tfs_stat st;

		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		assert_int_equal(pt_lookup(&T, 1, name, &st), 0);
		assert_int_equal(st.ino, interior_inos[i]);
		assert_int_equal(st.mode, S_IFREG | 0644);
		in += pos_in(TFS_POS(interior_inos[i], 0), min, max);
	}
	assert_true(in > 0);
}

/*
 * Files unlinked after the lost node's leaves were written, the unlinks
 * durable in the journal only (a crash): replay's deletions of their inode
 * keys fall into the lost range (the empty subtree holds nothing to
 * delete); the salvage then finds those keys in the leaves on disk, older
 * than the journal.  A position the journal wrote (a key or its deletion)
 * is newer than any leaf: they must stay removed, not come back nameless
 * into /lost+found.
 */
static void test_salvage_interior_replayed_unlink(void **state)
{
	unsigned n = interior_files(TFS_BTREE_inodes), removed = 0, in = 0;
	struct tfs_btree *b;
	struct tfs_btree_path path;
	struct tfs_btree_loc loc;
	struct tfs_fsck_result res;
	struct tfs_bpos min, max, at;
	char crash[160];

	assert_int_equal(pt_reopen(&T), 0); /* every node on disk, the journal clean */
	b = &T.fs->btrees[TFS_BTREE_inodes];
	tfs_six_lock_read(&b->lock);
	at = tfs_bkey_pos(tfs_bnode_key(b->root, b->root->nr_keys / 2));
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	min = path.n[1]->min_key;
	max = path.n[1]->max_key;
	tfs_six_unlock_read(&b->lock);
	for (unsigned i = 0; i < n; i++) {
		char name[256];

		if (!pos_in(TFS_POS(interior_inos[i], 0), min, max) || i % 5)
			continue;
		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		assert_int_equal(tfs_unlink(T.fs, 1, name, strlen(name)), 0);
		removed++;
	}
	assert_true(removed > 0);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	/*
	 * The node the crash image's tree points to, taken now: a slow run
	 * (TSan) may have written it back since, at a new place, and damaging
	 * the old one would then leave nothing lost.  Its range is the same.
	 */
	tfs_six_lock_read(&b->lock);
	assert_int_equal(tfs_btree_walk(b, at, 1, &path, false), 0);
	loc = path.n[1]->disk;
	assert_true(!tfs_bpos_cmp(path.n[1]->min_key, min) &&
		    !tfs_bpos_cmp(path.n[1]->max_key, max));
	tfs_six_unlock_read(&b->lock);
	snprintf(crash, sizeof(crash), "%s/crash", T.dir);
	pt_copy_file(T.path[0], crash); /* as the power cut would leave it */
	assert_int_equal(pt_stop(&T), 0);
	pt_copy_file(crash, T.path[0]);
	unlink(crash);
	damage_node(&loc);

	T.opts.error_action = TFS_ON_ERROR_continue;
	T.opts.replace_lost_leaves = true;
	assert_int_equal(pt_open(&T), 0);
	assert_int_equal(fsck_capture(true, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_FIXED);
	T.opts.replace_lost_leaves = false;
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(fsck_capture(false, &res), 0);
	assert_int_equal(tfs_fsck_exit_code(&res), TFS_FSCK_EXIT_CLEAN);
	T.opts.error_action = -1;
	for (unsigned i = 0; i < n; i++) {
		char name[256];
		struct tfs_bkey_buf kb;
		bool lost = pos_in(TFS_POS(interior_inos[i], 0), min, max);

		interior_name(name, sizeof(name), TFS_BTREE_inodes, i);
		if (lost && i % 5 == 0) {
			assert_int_equal(pt_ino(&T, 1, name), 0);
			assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_inodes,
							  TFS_POS(interior_inos[i], 0), &kb),
					 -ENOENT);
			continue;
		}
		assert_int_equal(pt_ino(&T, 1, name), interior_inos[i]);
		in += lost;
	}
	assert_true(in > 0);
	assert_int_equal(pt_ino(&T, 1, "lost+found"), 0); /* nothing removed came back */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean_after_workload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_nlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_dir_nlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dangling_dirent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_not_listed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreachable_inode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlapping_extents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extent_over_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readonly_unclean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_leaked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_node_leaked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_node_doubly_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_node_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_accounting_wrong, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_dirents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_inodes, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_extents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_xattrs, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_directories, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_root_inode, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_degraded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_eio, setup_small_nodes, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_eio_once, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_root_leaf_eio_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_last_inodes, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_replay, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_key_cache, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_alloc, setup_small_buckets,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_leaf_alloc_interrupted,
						setup_small_buckets, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_interior_dirents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_interior_inodes, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_interior_extents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_dirents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_inodes, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_extents, setup_small_nodes,
						teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_last_inodes,
						setup_small_nodes, teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_clone_in_file,
						setup_small_nodes, teardown),
		cmocka_unit_test_setup_teardown(test_salvage_interior_replayed_unlink,
						setup_small_nodes, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_interior_alloc, setup_small_buckets,
						teardown),
		cmocka_unit_test_setup_teardown(test_degraded_repair, setup_two, teardown),
		cmocka_unit_test_setup_teardown(test_degraded_interior_after_crash, setup_two,
						teardown),
	};

	return pt_run_tests(tests);
}
