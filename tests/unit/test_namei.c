// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/namei.c (and the dirent hash table of fs/dirent.c and
 * fs/str_hash.c under it): every operation on names, their error codes,
 * link counts and ownership, readdir's stable positions, rename's rules,
 * and all of it again with a hash that makes every name collide.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>

#include "posix_test.h"

static struct pt T;

/* Every name in one probe run: collisions, whiteouts and wrap-around all get used. */
static u64 collide_hash(u64 seed, const void *name, size_t len)
{
	return 7;
}

static int setup(void **state)
{
	struct pt_geometry g = { 0 };

	return pt_mkfs(&T, &g);
}

static int setup_collide(void **state)
{
	int ret = setup(state);

	if (!ret)
		tfs_posix_set_name_hash(T.fs, collide_hash);
	return ret;
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

/* Reopens (stop, open) keeping the hash the test runs with. */
static void reopen(void)
{
	bool collide = tfs_posix(T.fs)->name_hash == collide_hash;

	assert_int_equal(pt_reopen(&T), 0);
	if (collide)
		tfs_posix_set_name_hash(T.fs, collide_hash);
}

struct listing {
	unsigned nr;
	struct {
		char name[256];
		tfs_ino_t ino;
		unsigned dtype;
		u64 next;
	} e[512];
	unsigned stop_after; /* 0: never stop */
};

static int fill(void *ctx, const char *name, size_t len, tfs_ino_t ino, unsigned dtype,
		u64 next_pos)
{
	struct listing *l = ctx;

	if (l->stop_after && l->nr == l->stop_after)
		return 1;
	assert_true(l->nr < 512);
	memcpy(l->e[l->nr].name, name, len);
	l->e[l->nr].name[len] = 0;
	l->e[l->nr].ino = ino;
	l->e[l->nr].dtype = dtype;
	l->e[l->nr].next = next_pos;
	l->nr++;
	return 0;
}

static void list(tfs_ino_t dir, struct listing *l)
{
	memset(l, 0, sizeof(*l));
	assert_int_equal(tfs_readdir(T.fs, dir, 0, fill, l), 0);
}

static tfs_ino_t listing_find(const struct listing *l, const char *name)
{
	for (unsigned i = 0; i < l->nr; i++)
		if (!strcmp(l->e[i].name, name))
			return l->e[i].ino;
	return 0;
}

static void test_root(void **state)
{
	struct tfs_stat st;
	struct listing l;

	assert_int_equal(tfs_getattr(T.fs, TFS_ROOT_INO, &st), 0);
	assert_int_equal(st.mode, S_IFDIR | 0755);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(st.uid, 0);
	list(TFS_ROOT_INO, &l);
	assert_int_equal(l.nr, 2);
	assert_string_equal(l.e[0].name, ".");
	assert_string_equal(l.e[1].name, "..");
	assert_int_equal(l.e[1].ino, TFS_ROOT_INO);
	assert_int_equal(pt_lookup(&T, TFS_ROOT_INO, "..", &st), 0);
	assert_int_equal(st.ino, TFS_ROOT_INO);
	assert_int_equal(tfs_getattr(T.fs, 999999, &st), -ENOENT);
}

/*
 * A directory's st_size: one block, as an empty ext4 directory (tools and
 * tests take a directory of size 0 for a broken or empty one); st_blocks 0,
 * as its names live in the dirents btree, not in blocks of its own.  Files
 * keep their own size.
 */
static void test_dir_size(void **state)
{
	u32 bs = tfs_posix_block_size(T.fs);
	struct tfs_stat st, d;
	struct tfs_file *f;

	assert_int_equal(tfs_getattr(T.fs, TFS_ROOT_INO, &st), 0);
	assert_int_equal(st.size, bs);
	assert_int_equal(st.blocks, 0);
	assert_int_equal(pt_mkdir(&T, 1, "d", &d), 0);
	assert_int_equal(d.size, bs);
	assert_int_equal(d.blocks, 0);
	assert_int_equal(pt_create(&T, d.ino, "f", &f), 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, 0);
	assert_int_equal(st.blocks, 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	reopen();
	assert_int_equal(tfs_getattr(T.fs, d.ino, &st), 0);
	assert_int_equal(st.size, bs);
}

static void test_bad_names(void **state)
{
	char long_name[300];
	struct tfs_stat st;

	memset(long_name, 'n', sizeof(long_name));
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, "a/b", 3, 0755, &st), -EINVAL);
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, "", 0, 0755, &st), -EINVAL);
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, "a\0b", 3, 0755, &st), -EINVAL);
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, long_name, 256, 0755, &st),
			 -ENAMETOOLONG);
	assert_int_equal(tfs_lookup(T.fs, 1, long_name, 256, &st), -ENAMETOOLONG);
	assert_int_equal(tfs_unlink(T.fs, 1, "x/", 2), -EINVAL);
	assert_int_equal(tfs_rename(T.fs, 1, "a", 1, 1, "/", 1, 0), -EINVAL);
	/* 255 bytes of anything but '/' and NUL is a good name. */
	for (unsigned i = 0; i < 255; i++)
		long_name[i] = (char)(1 + i % 254 == '/' ? 'x' : 1 + i % 254);
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, long_name, 255, 0700, &st), 0);
	assert_int_equal(tfs_lookup(T.fs, 1, long_name, 255, &st), 0);
	assert_int_equal(tfs_rmdir(T.fs, 1, long_name, 255), 0);
	/* . and .. */
	assert_int_equal(pt_mkdir(&T, 1, ".", &st), -EEXIST);
	assert_int_equal(pt_mknod(&T, 1, "..", S_IFREG | 0644, &st), -EEXIST);
	assert_int_equal(tfs_rmdir(T.fs, 1, ".", 1), -EINVAL);
	assert_int_equal(tfs_rmdir(T.fs, 1, "..", 2), -ENOTEMPTY);
	assert_int_equal(tfs_unlink(T.fs, 1, ".", 1), -EISDIR);
	assert_int_equal(tfs_rename(T.fs, 1, ".", 1, 1, "z", 1, 0), -EBUSY);
}

static void test_create_lookup_unlink(void **state)
{
	struct tfs_stat st, st2, dst;
	struct listing l;

	assert_int_equal(pt_mkdir(&T, 1, "dir", &dst), 0);
	assert_int_equal(dst.nlink, 2);
	assert_int_equal(tfs_getattr(T.fs, 1, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(pt_mknod(&T, dst.ino, "file", S_IFREG | 0640, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 0640);
	assert_int_equal(st.nlink, 1);
	assert_int_equal(st.size, 0);
	assert_int_equal(pt_mknod(&T, dst.ino, "file", S_IFREG | 0640, &st2), -EEXIST);
	assert_int_equal(pt_lookup(&T, dst.ino, "file", &st2), 0);
	assert_int_equal(st2.ino, st.ino);
	assert_int_equal(pt_lookup(&T, dst.ino, "nope", &st2), -ENOENT);
	assert_int_equal(pt_lookup(&T, st.ino, "x", &st2), -ENOTDIR);
	assert_int_equal(pt_mknod(&T, st.ino, "x", S_IFREG | 0640, &st2), -ENOTDIR);

	/* Special files. */
	assert_int_equal(tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "fifo", 4, S_IFIFO | 0600, 0, &st2),
			 0);
	assert_int_equal(st2.mode, S_IFIFO | 0600);
	assert_int_equal(
		tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "sock", 4, S_IFSOCK | 0600, 0, &st2), 0);
	assert_int_equal(
		tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "chr", 3, S_IFCHR | 0600, 0x0501, &st2), 0);
	assert_int_equal(st2.rdev, 0x0501);
	assert_int_equal(
		tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "blk", 3, S_IFBLK | 0600, 0x0802, &st2), 0);
	assert_int_equal(tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "d", 1, S_IFDIR | 0600, 0, &st2),
			 -EINVAL);
	assert_int_equal(tfs_mknod(T.fs, &pt_root_ctx, dst.ino, "plain", 5, 0644, 0, &st2), 0);
	assert_int_equal(st2.mode, S_IFREG | 0644);

	list(dst.ino, &l);
	assert_int_equal(l.nr, 8);
	assert_int_equal(listing_find(&l, "file"), st.ino);
	for (unsigned i = 0; i < l.nr; i++) {
		struct tfs_stat s;

		if (!strcmp(l.e[i].name, ".") || !strcmp(l.e[i].name, ".."))
			continue;
		assert_int_equal(tfs_getattr(T.fs, l.e[i].ino, &s), 0);
		assert_int_equal(l.e[i].dtype, (s.mode & S_IFMT) >> 12);
	}
	assert_int_equal(listing_find(&l, ".."), 1);
	assert_int_equal(listing_find(&l, "."), dst.ino);

	reopen();
	list(dst.ino, &l);
	assert_int_equal(l.nr, 8);
	assert_int_equal(tfs_getattr(T.fs, listing_find(&l, "chr"), &st2), 0);
	assert_int_equal(st2.rdev, 0x0501);

	/* unlink / rmdir */
	assert_int_equal(tfs_rmdir(T.fs, 1, "dir", 3), -ENOTEMPTY);
	assert_int_equal(tfs_unlink(T.fs, 1, "dir", 3), -EISDIR);
	assert_int_equal(tfs_rmdir(T.fs, dst.ino, "file", 4), -ENOTDIR);
	const char *names[] = { "file", "fifo", "sock", "chr", "blk", "plain" };

	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(tfs_unlink(T.fs, dst.ino, names[i], strlen(names[i])), 0);
		assert_int_equal(tfs_unlink(T.fs, dst.ino, names[i], strlen(names[i])), -ENOENT);
	}
	assert_int_equal(tfs_getattr(T.fs, st.ino, &st2), -ENOENT);
	assert_int_equal(tfs_rmdir(T.fs, 1, "dir", 3), 0);
	assert_int_equal(tfs_getattr(T.fs, 1, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(tfs_getattr(T.fs, dst.ino, &st2), -ENOENT);
	/* A removed directory takes nothing new. */
	assert_int_equal(pt_mkdir(&T, dst.ino, "x", &st2), -ENOENT);
	list(1, &l);
	assert_int_equal(l.nr, 2);
}

static void test_symlink(void **state)
{
	char target[TFS_SYMLINK_MAX + 2], buf[TFS_SYMLINK_MAX + 10];
	struct tfs_stat st;

	memset(target, 't', sizeof(target));
	target[TFS_SYMLINK_MAX + 1] = 0;
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, "long", 4, target, &st), -ENAMETOOLONG);
	target[TFS_SYMLINK_MAX] = 0;
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, "long", 4, target, &st), 0);
	assert_int_equal(st.size, TFS_SYMLINK_MAX);
	assert_int_equal(st.mode, S_IFLNK | 0777);
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, "empty", 5, "", &st), -ENOENT);
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, "s", 1, "../a/b", &st), 0);
	assert_int_equal(tfs_readlink(T.fs, st.ino, buf, sizeof(buf)), 6);
	assert_memory_equal(buf, "../a/b", 6);
	assert_int_equal(tfs_readlink(T.fs, st.ino, buf, 3), 3);
	assert_int_equal(tfs_readlink(T.fs, 1, buf, 3), -EINVAL);
	reopen();
	assert_int_equal(pt_lookup(&T, 1, "long", &st), 0);
	assert_int_equal(tfs_readlink(T.fs, st.ino, buf, sizeof(buf)), TFS_SYMLINK_MAX);
	assert_memory_equal(buf, target, TFS_SYMLINK_MAX);
	assert_int_equal(tfs_unlink(T.fs, 1, "long", 4), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "s", 1), 0);
}

static void test_link(void **state)
{
	struct tfs_stat f, d, st;

	assert_int_equal(pt_mkdir(&T, 1, "ld", &d), 0);
	assert_int_equal(pt_mknod(&T, 1, "lf", S_IFREG | 0644, &f), 0);
	assert_int_equal(tfs_link(T.fs, f.ino, d.ino, "l2", 2, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(tfs_link(T.fs, f.ino, d.ino, "l2", 2, &st), -EEXIST);
	assert_int_equal(tfs_link(T.fs, d.ino, 1, "dl", 2, &st), -EPERM);
	assert_int_equal(tfs_link(T.fs, f.ino, f.ino, "x", 1, &st), -ENOTDIR);
	assert_int_equal(tfs_unlink(T.fs, 1, "lf", 2), 0);
	assert_int_equal(tfs_getattr(T.fs, f.ino, &st), 0);
	assert_int_equal(st.nlink, 1);
	reopen();
	assert_int_equal(pt_lookup(&T, d.ino, "l2", &st), 0);
	assert_int_equal(st.ino, f.ino);
	assert_int_equal(st.nlink, 1);
	assert_int_equal(tfs_unlink(T.fs, d.ino, "l2", 2), 0);
	assert_int_equal(tfs_getattr(T.fs, f.ino, &st), -ENOENT);
	assert_int_equal(tfs_rmdir(T.fs, 1, "ld", 2), 0);
}

static void test_ownership_sgid(void **state)
{
	struct tfs_ctx user = { .uid = 1000, .gid = 100 };
	struct tfs_setattr sa = { .valid = TFS_SETATTR_MODE | TFS_SETATTR_GID,
				  .mode = 02775,
				  .gid = 50 };
	struct tfs_stat d, st;

	assert_int_equal(tfs_mkdir(T.fs, &user, 1, "plain", 5, 0755, &st), 0);
	assert_int_equal(st.uid, 1000);
	assert_int_equal(st.gid, 100);
	assert_int_equal(st.mode & S_ISGID, 0);
	assert_int_equal(tfs_mkdir(T.fs, &user, 1, "sg", 2, 0775, &d), 0);
	assert_int_equal(tfs_setattr(T.fs, d.ino, NULL, &sa, &d), 0);
	assert_int_equal(d.mode, S_IFDIR | 02775);
	assert_int_equal(d.gid, 50);
	/* In a set-group-ID directory: its group, and directories inherit the bit. */
	assert_int_equal(tfs_mknod(T.fs, &user, d.ino, "f", 1, S_IFREG | 0644, 0, &st), 0);
	assert_int_equal(st.uid, 1000);
	assert_int_equal(st.gid, 50);
	assert_int_equal(st.mode, S_IFREG | 0644);
	assert_int_equal(tfs_mkdir(T.fs, &user, d.ino, "sub", 3, 0755, &st), 0);
	assert_int_equal(st.gid, 50);
	assert_int_equal(st.mode, S_IFDIR | 02755);
	assert_int_equal(tfs_symlink(T.fs, &user, d.ino, "s", 1, "x", &st), 0);
	assert_int_equal(st.gid, 50);
	/* chown of a file drops set-user-ID, and set-group-ID when group-executable. */
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_MODE, .mode = 06755 };
	assert_int_equal(pt_lookup(&T, d.ino, "f", &st), 0);
	assert_int_equal(tfs_setattr(T.fs, st.ino, NULL, &sa, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 06755);
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_UID, .uid = 7 };
	assert_int_equal(tfs_setattr(T.fs, st.ino, NULL, &sa, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 0755);
	assert_int_equal(st.uid, 7);
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_MODE, .mode = 02745 };
	assert_int_equal(tfs_setattr(T.fs, st.ino, NULL, &sa, &st), 0);
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_KILL_SUIDGID };
	assert_int_equal(tfs_setattr(T.fs, st.ino, NULL, &sa, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 02745); /* not group-executable: kept */
	/*
	 * A directory keeps both at a chown, also with KILL_SUIDGID (what
	 * `-o killpriv` sends with every chown): chown_common() leaves
	 * directories alone, or chown -R would end set-group-ID inheritance.
	 */
	sa = (struct tfs_setattr){ .valid = TFS_SETATTR_GID | TFS_SETATTR_KILL_SUIDGID, .gid = 51 };
	assert_int_equal(tfs_setattr(T.fs, d.ino, NULL, &sa, &d), 0);
	assert_int_equal(d.mode, S_IFDIR | 02775);
	assert_int_equal(d.gid, 51);
	reopen();
	assert_int_equal(pt_lookup(&T, d.ino, "sub", &st), 0);
	assert_int_equal(st.mode, S_IFDIR | 02755);
}

/*
 * RENAME_WHITEOUT (overlayfs): the old name becomes a whiteout, a character
 * device 0:0 owned by the caller, in the same commit as the move; over an
 * existing target, across directories, of a directory (link counts move as
 * for a plain rename); not with EXCHANGE.  Kept across a remount, fsck clean.
 */
static void test_rename_whiteout(void **state)
{
	const struct tfs_ctx user = { .uid = 1000, .gid = 100, .pid = 2 };
	struct tfs_stat a, c, d, e, st, w;
	struct listing l;

	assert_int_equal(pt_mknod(&T, 1, "a", S_IFREG | 0644, &a), 0);
	assert_int_equal(tfs_rename_as(T.fs, &user, 1, "a", 1, 1, "b", 1, TFS_RENAME_WHITEOUT), 0);
	assert_int_equal(pt_ino(&T, 1, "b"), a.ino);
	assert_int_equal(pt_lookup(&T, 1, "a", &w), 0);
	assert_int_not_equal(w.ino, a.ino);
	assert_int_equal(w.mode, S_IFCHR);
	assert_int_equal(w.rdev, 0);
	assert_int_equal(w.nlink, 1);
	assert_int_equal(w.uid, 1000);
	assert_int_equal(w.gid, 100);
	list(1, &l);
	for (unsigned i = 0; i < l.nr; i++)
		if (!strcmp(l.e[i].name, "a"))
			assert_int_equal(l.e[i].dtype, DT_CHR);
	/* Over an existing name: the target is replaced, the old name a whiteout. */
	assert_int_equal(pt_mknod(&T, 1, "c", S_IFREG | 0644, &c), 0);
	assert_int_equal(tfs_rename_as(T.fs, &user, 1, "b", 1, 1, "c", 1,
				       TFS_RENAME_WHITEOUT | TFS_RENAME_NOREPLACE),
			 -EEXIST);
	assert_int_equal(tfs_rename_as(T.fs, &user, 1, "b", 1, 1, "c", 1, TFS_RENAME_WHITEOUT), 0);
	assert_int_equal(pt_ino(&T, 1, "c"), a.ino);
	assert_int_equal(tfs_getattr(T.fs, c.ino, &st), -ENOENT);
	assert_int_equal(pt_lookup(&T, 1, "b", &st), 0);
	assert_int_equal(st.mode, S_IFCHR);
	/* A directory moved across directories. */
	assert_int_equal(pt_mkdir(&T, 1, "d", &d), 0);
	assert_int_equal(pt_mkdir(&T, 1, "e", &e), 0);
	assert_int_equal(tfs_rename_as(T.fs, &user, 1, "d", 1, e.ino, "d", 1, TFS_RENAME_WHITEOUT),
			 0);
	assert_int_equal(pt_ino(&T, e.ino, "d"), d.ino);
	assert_int_equal(pt_lookup(&T, 1, "d", &st), 0);
	assert_int_equal(st.mode, S_IFCHR);
	assert_int_equal(tfs_getattr(T.fs, 1, &st), 0);
	assert_int_equal(st.nlink, 3); /* root: ., .. and e */
	assert_int_equal(tfs_getattr(T.fs, e.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(tfs_rename_as(T.fs, &user, 1, "c", 1, 1, "b", 1,
				       TFS_RENAME_WHITEOUT | TFS_RENAME_EXCHANGE),
			 -EINVAL);
	reopen();
	assert_int_equal(pt_lookup(&T, 1, "a", &st), 0);
	assert_int_equal(st.mode, S_IFCHR);
	assert_int_equal(st.uid, 1000);
	assert_int_equal(pt_ino(&T, 1, "c"), a.ino);
	assert_int_equal(pt_fsck(T.fs), 0);
}

static void test_rename_basic(void **state)
{
	struct tfs_stat a, b, st, d1, d2;

	assert_int_equal(pt_mkdir(&T, 1, "r1", &d1), 0);
	assert_int_equal(pt_mkdir(&T, 1, "r2", &d2), 0);
	assert_int_equal(pt_mknod(&T, d1.ino, "a", S_IFREG | 0644, &a), 0);
	assert_int_equal(pt_mknod(&T, d1.ino, "b", S_IFREG | 0644, &b), 0);
	/* Plain move within and across directories. */
	assert_int_equal(tfs_rename(T.fs, d1.ino, "a", 1, d1.ino, "a2", 2, 0), 0);
	assert_int_equal(pt_lookup(&T, d1.ino, "a", &st), -ENOENT);
	assert_int_equal(pt_ino(&T, d1.ino, "a2"), a.ino);
	assert_int_equal(tfs_rename(T.fs, d1.ino, "a2", 2, d2.ino, "a", 1, 0), 0);
	assert_int_equal(pt_ino(&T, d2.ino, "a"), a.ino);
	assert_int_equal(tfs_rename(T.fs, d1.ino, "nope", 4, d2.ino, "x", 1, 0), -ENOENT);
	/* Replacing a file: the old target goes. */
	assert_int_equal(tfs_rename(T.fs, d2.ino, "a", 1, d1.ino, "b", 1, 0), 0);
	assert_int_equal(pt_ino(&T, d1.ino, "b"), a.ino);
	assert_int_equal(tfs_getattr(T.fs, b.ino, &st), -ENOENT);
	/* NOREPLACE and EXCHANGE. */
	assert_int_equal(pt_mknod(&T, d2.ino, "c", S_IFREG | 0644, &b), 0);
	assert_int_equal(tfs_rename(T.fs, d2.ino, "c", 1, d1.ino, "b", 1, TFS_RENAME_NOREPLACE),
			 -EEXIST);
	assert_int_equal(tfs_rename(T.fs, d2.ino, "c", 1, d1.ino, "new", 3, TFS_RENAME_EXCHANGE),
			 -ENOENT);
	assert_int_equal(tfs_rename(T.fs, d2.ino, "c", 1, d1.ino, "b", 1,
				    TFS_RENAME_EXCHANGE | TFS_RENAME_NOREPLACE),
			 -EINVAL);
	assert_int_equal(tfs_rename(T.fs, d2.ino, "c", 1, d1.ino, "b", 1, TFS_RENAME_EXCHANGE), 0);
	assert_int_equal(pt_ino(&T, d1.ino, "b"), b.ino);
	assert_int_equal(pt_ino(&T, d2.ino, "c"), a.ino);
	/* Two names of one inode: nothing happens. */
	assert_int_equal(tfs_link(T.fs, a.ino, d2.ino, "c2", 2, &st), 0);
	assert_int_equal(tfs_rename(T.fs, d2.ino, "c", 1, d2.ino, "c2", 2, 0), 0);
	assert_int_equal(pt_ino(&T, d2.ino, "c"), a.ino);
	assert_int_equal(pt_ino(&T, d2.ino, "c2"), a.ino);
	reopen();
	assert_int_equal(pt_ino(&T, d1.ino, "b"), b.ino);
	assert_int_equal(pt_ino(&T, d2.ino, "c"), a.ino);
	assert_int_equal(tfs_getattr(T.fs, a.ino, &st), 0);
	assert_int_equal(st.nlink, 2);
}

static void test_rename_dirs(void **state)
{
	struct tfs_stat top, a, b, c, f, st;
	struct listing l;

	assert_int_equal(pt_mkdir(&T, 1, "top", &top), 0);
	assert_int_equal(pt_mkdir(&T, top.ino, "a", &a), 0);
	assert_int_equal(pt_mkdir(&T, a.ino, "b", &b), 0);
	assert_int_equal(pt_mkdir(&T, top.ino, "c", &c), 0);
	assert_int_equal(pt_mknod(&T, top.ino, "f", S_IFREG | 0644, &f), 0);
	/* Under itself. */
	assert_int_equal(tfs_rename(T.fs, top.ino, "a", 1, b.ino, "x", 1, 0), -EINVAL);
	assert_int_equal(tfs_rename(T.fs, top.ino, "a", 1, a.ino, "x", 1, 0), -EINVAL);
	assert_int_equal(tfs_rename(T.fs, a.ino, "b", 1, b.ino, "x", 1, 0), -EINVAL);
	assert_int_equal(tfs_rename(T.fs, 1, "top", 3, b.ino, "x", 1, TFS_RENAME_EXCHANGE),
			 -ENOENT);
	/* Types. */
	assert_int_equal(tfs_rename(T.fs, top.ino, "f", 1, top.ino, "c", 1, 0), -EISDIR);
	assert_int_equal(tfs_rename(T.fs, top.ino, "c", 1, top.ino, "f", 1, 0), -ENOTDIR);
	/* A non-empty target directory. */
	assert_int_equal(tfs_rename(T.fs, top.ino, "c", 1, top.ino, "a", 1, 0), -ENOTEMPTY);
	/* Moving a directory: parents, link counts, "..". */
	assert_int_equal(tfs_rename(T.fs, a.ino, "b", 1, c.ino, "b", 1, 0), 0);
	assert_int_equal(tfs_getattr(T.fs, a.ino, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(tfs_getattr(T.fs, c.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(pt_lookup(&T, b.ino, "..", &st), 0);
	assert_int_equal(st.ino, c.ino);
	list(b.ino, &l);
	assert_int_equal(listing_find(&l, ".."), c.ino);
	/* Replacing an empty directory. */
	assert_int_equal(tfs_rename(T.fs, c.ino, "b", 1, top.ino, "a", 1, 0), 0);
	assert_int_equal(tfs_getattr(T.fs, a.ino, &st), -ENOENT);
	assert_int_equal(tfs_getattr(T.fs, c.ino, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(tfs_getattr(T.fs, top.ino, &st), 0);
	assert_int_equal(st.nlink, 4); /* c and a (b renamed) */
	/* Exchanging a directory with a file across directories. */
	assert_int_equal(tfs_rename(T.fs, top.ino, "a", 1, 1, "top", 3, TFS_RENAME_EXCHANGE),
			 -EINVAL);
	assert_int_equal(
		tfs_rename(T.fs, top.ino, "a", 1, c.ino, "nothing", 7, TFS_RENAME_EXCHANGE),
		-ENOENT);
	assert_int_equal(pt_mknod(&T, c.ino, "g", S_IFREG | 0644, &st), 0);
	assert_int_equal(tfs_rename(T.fs, top.ino, "a", 1, c.ino, "g", 1, TFS_RENAME_EXCHANGE), 0);
	assert_int_equal(tfs_getattr(T.fs, top.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(tfs_getattr(T.fs, c.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(pt_lookup(&T, b.ino, "..", &st), 0);
	assert_int_equal(st.ino, c.ino);
	reopen();
	assert_int_equal(pt_ino(&T, c.ino, "g"), b.ino);
	assert_int_equal(tfs_getattr(T.fs, c.ino, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(pt_lookup(&T, b.ino, "..", &st), 0);
	assert_int_equal(st.ino, c.ino);
}

/* Many names, removals in a scattered order, the rest found every time. */
static void test_many_names(void **state)
{
	enum {
		N = 300
	};
	struct tfs_stat d, st;
	struct listing l;
	char name[32];
	bool present[N];

	assert_int_equal(pt_mkdir(&T, 1, "many", &d), 0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		assert_int_equal(pt_mknod(&T, d.ino, name, S_IFREG | 0600, NULL), 0);
		present[i] = true;
	}
	for (unsigned round = 0; round < 3; round++) {
		for (unsigned i = round; i < N; i += 3 + round) {
			snprintf(name, sizeof(name), "n%u", i);
			assert_int_equal(tfs_unlink(T.fs, d.ino, name, strlen(name)),
					 present[i] ? 0 : -ENOENT);
			present[i] = false;
		}
		for (unsigned i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "n%u", i);
			assert_int_equal(pt_lookup(&T, d.ino, name, &st), present[i] ? 0 : -ENOENT);
		}
		if (round == 1)
			reopen();
	}
	/* Re-create some: whiteouts are reused, nothing is found twice. */
	for (unsigned i = 0; i < N; i += 7)
		if (!present[i]) {
			snprintf(name, sizeof(name), "n%u", i);
			assert_int_equal(pt_mknod(&T, d.ino, name, S_IFREG | 0600, NULL), 0);
			present[i] = true;
		}
	list(d.ino, &l);
	unsigned want = 2;

	for (unsigned i = 0; i < N; i++)
		want += present[i];
	assert_int_equal(l.nr, want);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		assert_int_equal(!!listing_find(&l, name), present[i]);
	}
	/* Empty it: rmdir works (whiteouts do not count). */
	for (unsigned i = 0; i < N; i++)
		if (present[i]) {
			snprintf(name, sizeof(name), "n%u", i);
			assert_int_equal(tfs_unlink(T.fs, d.ino, name, strlen(name)), 0);
		}
	assert_int_equal(tfs_rmdir(T.fs, 1, "many", 4), 0);
	/* No key of the directory is left behind. */
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;

	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_dirents, TFS_POS(d.ino, 0),
			    TFS_POS(d.ino, UINT64_MAX));
	assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
	assert_null(k);
	tfs_btree_iter_exit(&iter);
}

/*
 * readdir with changes between calls: every entry present throughout is
 * returned exactly once; positions resume where they left off.
 */
static void test_readdir_stable(void **state)
{
	enum {
		N = 120
	};
	struct tfs_stat d;
	char name[32];
	unsigned seen[N + 200];
	u64 pos = 0;

	assert_int_equal(pt_mkdir(&T, 1, "rd", &d), 0);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "e%u", i);
		assert_int_equal(pt_mknod(&T, d.ino, name, S_IFREG | 0600, NULL), 0);
	}
	memset(seen, 0, sizeof(seen));
	for (unsigned round = 0;; round++) {
		struct listing l;

		memset(&l, 0, sizeof(l));
		l.stop_after = 7;
		assert_int_equal(tfs_readdir(T.fs, d.ino, pos, fill, &l), 0);
		if (!l.nr)
			break;
		for (unsigned i = 0; i < l.nr; i++) {
			unsigned n;

			if (sscanf(l.e[i].name, "e%u", &n) == 1)
				seen[n]++;
			pos = l.e[i].next;
		}
		/* Churn: remove odd ones of the first half, add new ones. */
		if (round < 20) {
			unsigned victim = 2 * round + 1;

			snprintf(name, sizeof(name), "e%u", victim);
			tfs_unlink(T.fs, d.ino, name, strlen(name));
			snprintf(name, sizeof(name), "e%u", N + round);
			assert_int_equal(pt_mknod(&T, d.ino, name, S_IFREG | 0600, NULL), 0);
		}
		assert_true(round < 1000);
	}
	for (unsigned i = 0; i < N; i++) {
		bool removed = i % 2 == 1 && i < 40;

		if (!removed)
			assert_int_equal(seen[i], 1);
		else
			assert_true(seen[i] <= 1);
	}
	for (unsigned i = N; i < N + 20; i++)
		assert_true(seen[i] <= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_whiteout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_lookup_unlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ownership_sgid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_basic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir_stable, setup, teardown),
		/* The same with every name colliding. */
		cmocka_unit_test_setup_teardown(test_create_lookup_unlink, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_rename_basic, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_rename_dirs, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_many_names, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_readdir_stable, setup_collide, teardown),
	};

	return pt_run_tests(tests);
}
