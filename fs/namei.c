// SPDX-License-Identifier: GPL-2.0
/*
 * Names: lookup, the operations that create and remove names (mknod,
 * mkdir, symlink, link, unlink, rmdir, rename), readlink and readdir.
 *
 * Each is one transaction over the directory entries and the inodes
 * involved (a removed inode's data follows in later ones, the orphan key
 * committed with the name's removal covering a crash).  The inode locks
 * of everything involved are held across lookup and commit; several are
 * taken in inode number order, so an operation that must find a child
 * before locking it looks up under the directory lock, drops it, locks
 * all of them in order and checks the name still leads to the same child.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/posix.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

static bool is_dot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

/* A directory that can take new names: -ENOTDIR, -ENOENT (removed). */
static int dir_check(struct tfs_inode_mem *dir)
{
	if (!S_ISDIR(dir->ui.mode))
		return -ENOTDIR;
	if (!dir->ui.nlink)
		return -ENOENT;
	return 0;
}

/*
 * The inode an entry named was not found: was the entry changed meanwhile
 * (0: look again), or does it name an inode that does not exist (a corrupt
 * dirent: reported, -TFS_ERR_dirent_invalid)?
 */
static int dirent_dangling(struct tfs_fs *fs, struct tfs_inode_mem *dir, const char *name,
			   size_t len, tfs_ino_t ino)
{
	struct tfs_btree_trans trans;
	tfs_ino_t again;
	int ret = tfs_ilock(fs, dir, false);

	if (ret)
		return ret;
	tfs_posix_trans_init(&trans, fs);
	ret = tfs_dirent_lookup(&trans, dir, name, len, &again, NULL, NULL);
	tfs_trans_exit(&trans);
	tfs_iunlock(dir);
	if (ret == -ENOENT)
		return 0;
	if (!ret && again == ino) {
		struct printbuf msg = PRINTBUF;

		prt_printf(&msg, "directory %llu: entry ", (unsigned long long)dir->ino);
		prt_strn(&msg, name, len);
		prt_printf(&msg, " points to inode %llu, which does not exist",
			   (unsigned long long)ino);
		tfs_posix_inconsistent(fs, printbuf_str(&msg));
		printbuf_exit(&msg);
		ret = -TFS_ERR_dirent_invalid;
	}
	return ret;
}

int tfs_getattr(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_stat *st)
{
	struct tfs_inode_mem *im;
	int ret = tfs_iget_locked(fs, ino, false, &im);

	if (ret)
		return ret;
	tfs_inode_to_stat(fs, ino, &im->ui, st);
	st->links_dropped = im->links_dropped;
	tfs_iput_unlock(fs, im);
	return 0;
}

/* The inode a dirent names, with a dirent that leads nowhere reported as corrupt. */
static int dirent_target_stat(struct tfs_fs *fs, struct tfs_inode_mem *dir, const char *name,
			      size_t len, tfs_ino_t ino, struct tfs_stat *st)
{
	int ret = tfs_getattr(fs, ino, st);

	/* Unlinked meanwhile (-ENOENT), or a dirent pointing at nothing? */
	if (ret == -ENOENT)
		ret = dirent_dangling(fs, dir, name, len, ino) ?: -ENOENT;
	return ret;
}

int tfs_lookup(struct tfs_fs *fs, tfs_ino_t dirino, const char *name, size_t len,
	       struct tfs_stat *st)
{
	struct tfs_inode_mem *dir;
	struct tfs_btree_trans trans;
	tfs_ino_t ino;
	int ret;

	if (!is_dot(name, len)) {
		ret = tfs_name_check(name, len);
		if (ret)
			return ret;
	}
	ret = tfs_iget_locked(fs, dirino, false, &dir);
	if (ret)
		return ret;
	if (!S_ISDIR(dir->ui.mode)) {
		ret = -ENOTDIR;
	} else if (len == 1 && name[0] == '.') {
		tfs_inode_to_stat(fs, dirino, &dir->ui, st);
		tfs_iput_unlock(fs, dir);
		return 0;
	} else if (is_dot(name, len)) {
		ino = dir->ui.parent;
	} else {
		tfs_posix_trans_init(&trans, fs);
		ret = tfs_dirent_lookup(&trans, dir, name, len, &ino, NULL, NULL);
		tfs_trans_exit(&trans);
	}
	/* The child is looked at without the directory's lock (locks go in inode order). */
	tfs_iunlock(dir);
	if (!ret)
		ret = dirent_target_stat(fs, dir, name, len, ino, st);
	tfs_iput(fs, dir);
	return ret;
}

/* --- creating --- */

static u64 random_u64(struct tfs_fs *fs)
{
	/* splitmix64 over a counter: seeds and generations, not secrets. */
	static u64 counter;
	u64 z = __atomic_add_fetch(&counter, 0x9e3779b97f4a7c15ULL, __ATOMIC_RELAXED) ^
		(u64)tfs_now_ns() ^ (u64)(uintptr_t)fs;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The attributes of a new inode in dir made by ctx (tfs_fs.h's ownership rules). */
static void new_inode_attrs(struct tfs_fs *fs, const struct tfs_ctx *ctx,
			    const struct tfs_inode_unpacked *dir, u32 mode, u64 rdev,
			    struct tfs_inode_unpacked *ui)
{
	s64 now = tfs_now_ns();

	memset(ui, 0, sizeof(*ui));
	ui->mode = mode;
	ui->nlink = S_ISDIR(mode) ? 2 : 1;
	ui->uid = ctx->uid;
	ui->gid = ctx->gid;
	if (dir && (dir->mode & S_ISGID)) {
		ui->gid = dir->gid;
		if (S_ISDIR(mode))
			ui->mode |= S_ISGID;
	}
	ui->rdev = S_ISCHR(mode) || S_ISBLK(mode) ? rdev : 0;
	ui->generation = random_u64(fs);
	ui->hash_seed = random_u64(fs);
	ui->atime = ui->mtime = ui->ctime = ui->btime = now;
}

/*
 * Creates name in dirino: an inode of mode (type and permissions), rdev
 * for devices, target for symlinks.  With f, opens it too (a create).
 * *existing gets the inode the name already names (-EEXIST), when asked.
 */
static int create(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dirino, const char *name,
		  size_t len, u32 mode, u64 rdev, const char *target, struct tfs_stat *st,
		  struct tfs_inode_mem **ret_im, tfs_ino_t *existing)
{
	struct tfs_inode_mem *dir, *im;
	struct tfs_btree_trans trans;
	struct tfs_inode_unpacked ui, dui;
	struct tfs_bkey_buf kb;
	tfs_ino_t ino;
	bool acl_keys = false;
	u64 seq;
	int ret;

	if (is_dot(name, len))
		return -EEXIST;
	ret = tfs_name_check(name, len);
	if (ret)
		return ret;
	ret = tfs_iget_locked(fs, dirino, true, &dir);
	if (ret)
		return ret;
	ret = dir_check(dir);
	if (ret)
		goto out;
	if (S_ISDIR(mode) && dir->ui.nlink >= TFS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}
	tfs_posix_trans_init(&trans, fs);
	if (existing) {
		ret = tfs_dirent_lookup(&trans, dir, name, len, existing, NULL, NULL);
		if (!ret) {
			ret = -EEXIST;
			goto out_trans;
		}
		if (ret != -ENOENT)
			goto out_trans;
	}
	/* A new inode and name: ENOSPC before the reserve for write-back is eaten. */
	ret = tfs_posix_may_grow(fs);
	if (ret)
		goto out_trans;
	ino = tfs_ino_alloc(fs);
	new_inode_attrs(fs, ctx, &dir->ui, mode, rdev, &ui);
	/* Before the inode is packed: the default ACL may mask its mode. */
	if (ctx->posix_acl) {
		ret = tfs_acl_create(&trans, dir, ino, ui.hash_seed, &ui.mode, ctx->umask,
				     &acl_keys);
		if (ret)
			goto out_trans;
	}
	if (target)
		ui.size = strlen(target);
	if (S_ISDIR(mode))
		ui.parent = dirino;
	dui = dir->ui;
	dui.mtime = dui.ctime = ui.ctime;
	if (S_ISDIR(mode))
		dui.nlink++;
	tfs_inode_pack(&kb, ino, &ui);
	ret = tfs_dirent_insert(&trans, dir, name, len, ino, tfs_mode_to_dtype(mode), NULL)
		      ?: tfs_trans_update(&trans, TFS_BTREE_inodes, &kb.k);
	if (!ret && target) {
		tfs_symlink_pack(&kb, ino, target, ui.size);
		ret = tfs_trans_update(&trans, TFS_BTREE_extents, &kb.k);
	}
	ret = ret ?: tfs_inode_update(&trans, dir, &dui) ?: tfs_posix_commit(&trans, &seq);
	if (ret)
		goto out_trans;
	__atomic_fetch_add(&tfs_posix(fs)->nr_inodes, 1, __ATOMIC_RELAXED);
	tfs_inode_committed(dir, &dui, seq, false);
	ret = tfs_inew(fs, ino, &ui, target, &im);
	if (ret)
		goto out_trans; /* committed; only the table entry failed */
	if (acl_keys)
		__atomic_store_n(&im->xattrs, TFS_INODE_XATTRS_some, __ATOMIC_RELAXED);
	tfs_inode_committed(im, NULL, seq, false);
	if (st)
		tfs_inode_to_stat(fs, ino, &ui, st);
	if (ret_im)
		*ret_im = im; /* locked and referenced: the caller's */
	else
		tfs_iput_unlock(fs, im);
out_trans:
	tfs_trans_exit(&trans);
out:
	tfs_iput_unlock(fs, dir);
	return ret;
}

int tfs_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	      size_t len, u32 mode, u64 rdev, struct tfs_stat *st)
{
	switch (mode & S_IFMT) {
	case 0:
		mode |= S_IFREG;
		break;
	case S_IFREG:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		return -EINVAL;
	}
	return create(fs, ctx, dir, name, len, mode & (S_IFMT | 07777), rdev, NULL, st, NULL, NULL);
}

int tfs_mkdir(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	      size_t len, u32 mode, struct tfs_stat *st)
{
	return create(fs, ctx, dir, name, len, S_IFDIR | (mode & 07777), 0, NULL, st, NULL, NULL);
}

int tfs_symlink(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
		size_t len, const char *target, struct tfs_stat *st)
{
	size_t tlen = strnlen(target, TFS_SYMLINK_MAX + 1);

	if (!tlen)
		return -ENOENT;
	if (tlen > TFS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	return create(fs, ctx, dir, name, len, S_IFLNK | 0777, 0, target, st, NULL, NULL);
}

/* For tfs_create() (posix.c): the new inode stays locked and referenced. */
int tfs_create_locked(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
		      size_t len, u32 mode, struct tfs_stat *st, struct tfs_inode_mem **im,
		      tfs_ino_t *existing);

int tfs_create_locked(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
		      size_t len, u32 mode, struct tfs_stat *st, struct tfs_inode_mem **im,
		      tfs_ino_t *existing)
{
	return create(fs, ctx, dir, name, len, S_IFREG | (mode & 07777), 0, NULL, st, im, existing);
}

ssize_t tfs_readlink(struct tfs_fs *fs, tfs_ino_t ino, char *buf, size_t size)
{
	struct tfs_inode_mem *im;
	ssize_t ret = tfs_iget_locked(fs, ino, false, &im);

	if (ret)
		return ret;
	if (!S_ISLNK(im->ui.mode)) {
		ret = -EINVAL;
	} else {
		ret = (ssize_t)min_t(u64, size, im->ui.size);
		memcpy(buf, im->target, (size_t)ret);
	}
	tfs_iput_unlock(fs, im);
	return ret;
}

int tfs_link(struct tfs_fs *fs, tfs_ino_t ino, tfs_ino_t newdir, const char *newname, size_t newlen,
	     struct tfs_stat *st)
{
	struct tfs_inode_mem *ims[2] = { NULL, NULL };
	struct tfs_btree_trans trans;
	struct tfs_inode_unpacked ui, dui;
	u64 seq;
	int ret;

	if (is_dot(newname, newlen))
		return -EEXIST;
	ret = tfs_name_check(newname, newlen) ?: tfs_iget(fs, ino, &ims[0]);
	if (ret)
		return ret;
	ret = tfs_iget(fs, newdir, &ims[1]);
	if (ret) {
		tfs_iput(fs, ims[0]);
		return ret;
	}
	ret = tfs_ilock_many(fs, ims, 2);
	if (ret)
		goto out_put;
	if (S_ISDIR(ims[0]->ui.mode)) {
		ret = -EPERM;
		goto out;
	}
	ret = dir_check(ims[1]);
	if (ret)
		goto out;
	if (!ims[0]->ui.nlink) {
		ret = -ENOENT;
		goto out;
	}
	if (ims[0]->ui.nlink >= TFS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}
	/* A new name: see tfs_posix_may_grow(). */
	ret = tfs_posix_may_grow(fs);
	if (ret)
		goto out;
	ui = ims[0]->ui;
	dui = ims[1]->ui;
	ui.nlink++;
	ui.ctime = dui.mtime = dui.ctime = tfs_now_ns();
	tfs_posix_trans_init(&trans, fs);
	ret = tfs_dirent_insert(&trans, ims[1], newname, newlen, ino, tfs_mode_to_dtype(ui.mode),
				NULL) ?:
	      tfs_inode_update(&trans, ims[0], &ui) ?: tfs_inode_update(&trans, ims[1], &dui) ?:
	      tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (!ret) {
		tfs_inode_committed(ims[0], &ui, seq, false);
		tfs_inode_committed(ims[1], &dui, seq, false);
		if (st)
			tfs_inode_to_stat(fs, ino, &ui, st);
	}
out:
	tfs_iunlock_many(ims, 2);
out_put:
	tfs_iput(fs, ims[0]);
	tfs_iput(fs, ims[1]);
	return ret;
}

/* --- removing --- */

/* Whether im may be removed now: nlink 0 and nobody has it open. */
static bool inode_unused(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	struct tfs_posix *p = tfs_posix(fs);
	bool ret;

	pthread_mutex_lock(&p->table_lock);
	ret = !im->ui.nlink && !im->open_count;
	pthread_mutex_unlock(&p->table_lock);
	return ret;
}

/*
 * After the commit that dropped im's last link (im locked): removes it
 * now, or leaves it to the last release.  A failure leaves the orphan key
 * for the next open.
 */
static void maybe_remove(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	if (inode_unused(fs, im) && !tfs_posix_writable(fs)) {
		int ret = tfs_inode_remove(fs, im);

		if (ret)
			fprintf(stderr,
				"inode %llu: removing it failed (%s); the next open will finish it\n",
				(unsigned long long)im->ino, tfs_err_str(ret));
	}
}

/*
 * Whether btree id holds a key of ino: 1 yes, 0 no, or a negative code.
 */
static int owns_keys(struct tfs_fs *fs, enum tfs_btree_id id, tfs_ino_t ino)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, fs, id, TFS_POS(ino, 0), TFS_POS(ino, UINT64_MAX));
	ret = tfs_btree_iter_peek(&iter, &k);
	tfs_btree_iter_exit(&iter);
	return ret ?: k != NULL;
}

/*
 * Whether the removal of im's last name can delete the inode in the same
 * transaction (1), or must leave an orphan key for tfs_inode_remove() (0):
 * nobody has it open and it owns nothing but its inode key (and a
 * symlink's target; no orphan key either), so the whole removal fits one
 * commit and a crash leaves either the name and the inode or neither.  im and its directory
 * locked exclusively (no open or write can start meanwhile).  whiteouts:
 * for a directory, whether tfs_dir_empty() just met whiteouts in it.
 *
 * A btree is peeked only where the inode does not already say: a file
 * with no blocks and size 0 has no extent (ui.blocks counts every extent's
 * blocks, fsck checks it); only a regular file has data or a truncate's
 * orphan key (an unlinked one needs nlink 0, and im still has a name).
 */
static int remove_at_once(struct tfs_fs *fs, struct tfs_inode_mem *im, bool whiteouts)
{
	struct tfs_posix *p = tfs_posix(fs);
	bool open;
	int ret;

	pthread_mutex_lock(&p->table_lock);
	open = im->open_count;
	pthread_mutex_unlock(&p->table_lock);
	if (open)
		return 0;
	/* Whiteouts left by a directory's removed names: tfs_inode_remove() drops them. */
	if (S_ISDIR(im->ui.mode) && whiteouts)
		return 0;
	if (S_ISREG(im->ui.mode)) {
		if (im->ui.blocks)
			return 0;
		/* A sparse file: size without blocks; the extents say. */
		ret = im->ui.size ? owns_keys(fs, TFS_BTREE_extents, im->ino) : 0;
		/* An orphan key (a truncate that failed half way) is tfs_inode_remove()'s to drop. */
		ret = ret ?: owns_keys(fs, TFS_BTREE_orphans, im->ino);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	ret = tfs_xattrs_present(fs, im);
	return ret ? (ret < 0 ? ret : 0) : 1;
}

/*
 * Locks dir and the inode its entry name leads to, in inode order, and
 * checks the entry still leads there.  0 with *child referenced and both
 * locked, *slot and *dtype of the entry.
 */
static int lock_dir_child(struct tfs_fs *fs, struct tfs_inode_mem *dir, const char *name,
			  size_t len, struct tfs_inode_mem **child, u64 *slot, unsigned *dtype)
{
	struct tfs_btree_trans trans;
	int ret;

	for (;;) {
		struct tfs_inode_mem *ims[2];
		tfs_ino_t ino, again;

		ret = tfs_ilock(fs, dir, false);
		if (ret)
			return ret;
		ret = S_ISDIR(dir->ui.mode) ? 0 : -ENOTDIR;
		tfs_posix_trans_init(&trans, fs);
		if (!ret)
			ret = tfs_dirent_lookup(&trans, dir, name, len, &ino, NULL, NULL);
		tfs_trans_exit(&trans);
		tfs_iunlock(dir);
		if (ret)
			return ret;
		ret = tfs_iget(fs, ino, child);
		if (ret)
			return ret;
		ims[0] = dir;
		ims[1] = *child;
		ret = tfs_ilock_many(fs, ims, 2);
		if (ret == -ENOENT) {
			/* The child went away meanwhile (or never existed). */
			tfs_iput(fs, *child);
			ret = dirent_dangling(fs, dir, name, len, ino);
			if (ret)
				return ret;
			continue;
		}
		if (ret) {
			tfs_iput(fs, *child);
			return ret;
		}
		tfs_posix_trans_init(&trans, fs);
		ret = tfs_dirent_lookup(&trans, dir, name, len, &again, dtype, slot);
		tfs_trans_exit(&trans);
		if (!ret && again == ino)
			return 0;
		tfs_iunlock_many(ims, 2);
		tfs_iput(fs, *child);
		if (ret)
			return ret;
	}
}

static int remove_name(struct tfs_fs *fs, tfs_ino_t dirino, const char *name, size_t len,
		       bool rmdir)
{
	struct tfs_inode_mem *dir, *im, *ims[2];
	struct tfs_btree_trans trans;
	struct tfs_inode_unpacked ui, dui;
	unsigned dtype;
	u64 slot, seq;
	bool at_once = false, whiteouts = false;
	int ret;

	if (len == 1 && name[0] == '.')
		return rmdir ? -EINVAL : -EISDIR;
	if (len == 2 && name[0] == '.' && name[1] == '.')
		return rmdir ? -ENOTEMPTY : -EISDIR;
	ret = tfs_name_check(name, len) ?: tfs_iget(fs, dirino, &dir);
	if (ret)
		return ret;
	ret = lock_dir_child(fs, dir, name, len, &im, &slot, &dtype);
	if (ret)
		goto out_put;
	ims[0] = dir;
	ims[1] = im;
	if (rmdir && !S_ISDIR(im->ui.mode)) {
		ret = -ENOTDIR;
		goto out;
	}
	if (!rmdir && S_ISDIR(im->ui.mode)) {
		ret = -EISDIR;
		goto out;
	}
	if (rmdir) {
		ret = tfs_dir_empty(fs, im->ino, &whiteouts);
		if (ret)
			goto out;
	}
	ui = im->ui;
	dui = dir->ui;
	ui.ctime = dui.mtime = dui.ctime = tfs_now_ns();
	if (rmdir) {
		ui.nlink = 0;
		dui.nlink--;
	} else {
		ui.nlink--;
	}
	if (!ui.nlink) {
		ret = remove_at_once(fs, im, whiteouts);
		if (ret < 0)
			goto out;
		at_once = ret;
	}
	tfs_posix_trans_init(&trans, fs);
	ret = tfs_dirent_remove(&trans, dir, slot) ?: tfs_inode_update(&trans, dir, &dui);
	if (!ret && at_once) {
		/*
		 * The name, the inode (and a symlink's target) in one commit:
		 * no orphan key, nothing left for a crash to find.
		 */
		ret = (S_ISLNK(ui.mode)
			       ? tfs_trans_delete(&trans, TFS_BTREE_extents, TFS_POS(im->ino, 0))
			       : 0)
			      ?: tfs_trans_delete(&trans, TFS_BTREE_inodes, TFS_POS(im->ino, 0));
	} else if (!ret) {
		ret = tfs_inode_update(&trans, im, &ui);
		/* The last name: the orphan key goes in with it (see tfs_inode_remove()). */
		if (!ret && !ui.nlink)
			ret = tfs_orphan_add(&trans, im->ino, TFS_ORPHAN_unlinked);
	}
	if (!ret)
		ret = tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (ret)
		goto out;
	tfs_inode_committed(im, &ui, seq, false);
	tfs_inode_committed(dir, &dui, seq, false);
	/* Other names remain: see tfs_stat.links_dropped. */
	if (!rmdir && ui.nlink)
		im->links_dropped = true;
	if (at_once) {
		im->deleted = true;
		__atomic_fetch_sub(&tfs_posix(fs)->nr_inodes, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&tfs_posix(fs)->c.removed_at_once, 1, __ATOMIC_RELAXED);
	} else if (!ui.nlink) {
		__atomic_fetch_add(&tfs_posix(fs)->c.orphans_added, 1, __ATOMIC_RELAXED);
	}
	tfs_iunlock(dir);
	if (!ui.nlink && !at_once)
		maybe_remove(fs, im);
	tfs_iunlock(im);
	tfs_iput(fs, im);
	tfs_iput(fs, dir);
	return 0;
out:
	tfs_iunlock_many(ims, 2);
	tfs_iput(fs, im);
out_put:
	tfs_iput(fs, dir);
	return ret;
}

int tfs_unlink(struct tfs_fs *fs, tfs_ino_t dir, const char *name, size_t len)
{
	return remove_name(fs, dir, name, len, false);
}

int tfs_rmdir(struct tfs_fs *fs, tfs_ino_t dir, const char *name, size_t len)
{
	return remove_name(fs, dir, name, len, true);
}

/* --- rename --- */

/*
 * Whether dir is anc or lies under it (rename_lock held: no directory's
 * parent changes meanwhile, so the committed parents are current).
 */
static int is_under(struct tfs_fs *fs, tfs_ino_t dir, tfs_ino_t anc)
{
	struct tfs_bkey_buf kb;
	struct tfs_inode_unpacked ui;
	unsigned depth = 0;

	while (dir != anc) {
		int ret;

		if (dir == TFS_ROOT_INO)
			return 0;
		ret = tfs_btree_lookup(fs, TFS_BTREE_inodes, TFS_POS(dir, 0), &kb)
			      ?: tfs_inode_unpack(fs, &kb.k, &ui);
		if (ret)
			return ret == -ENOENT ? -TFS_ERR_inode_invalid : ret;
		if (!S_ISDIR(ui.mode) || ++depth > (1U << 24)) {
			tfs_posix_inconsistent(fs, "directory parent chain broken or looping");
			return -TFS_ERR_inode_invalid;
		}
		dir = ui.parent;
	}
	return 1;
}

/* Distinct inodes of a rename and their new attributes. */
struct rename_set {
	struct tfs_inode_mem *im[4];
	struct tfs_inode_unpacked ui[4];
	unsigned nr;
};

static struct tfs_inode_unpacked *rs_ui(struct rename_set *rs, struct tfs_inode_mem *im)
{
	for (unsigned i = 0; i < rs->nr; i++)
		if (rs->im[i] == im)
			return &rs->ui[i];
	rs->im[rs->nr] = im;
	rs->ui[rs->nr] = im->ui;
	return &rs->ui[rs->nr++];
}

int tfs_rename(struct tfs_fs *fs, tfs_ino_t olddir, const char *oldname, size_t oldlen,
	       tfs_ino_t newdir, const char *newname, size_t newlen, unsigned flags)
{
	static const struct tfs_ctx root = { .uid = 0, .gid = 0, .pid = 0 };

	return tfs_rename_as(fs, &root, olddir, oldname, oldlen, newdir, newname, newlen, flags);
}

int tfs_rename_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t olddir,
		  const char *oldname, size_t oldlen, tfs_ino_t newdir, const char *newname,
		  size_t newlen, unsigned flags)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *od = NULL, *nd = NULL, *src = NULL, *dst = NULL, *ims[4];
	struct tfs_btree_trans trans;
	struct rename_set rs = { .nr = 0 };
	bool exchange = flags & TFS_RENAME_EXCHANGE, cross = olddir != newdir, locked = false;
	bool whiteout = flags & TFS_RENAME_WHITEOUT;
	struct tfs_inode_unpacked wui;
	struct tfs_bkey_buf wkb;
	tfs_ino_t src_ino, dst_ino, wino = 0;
	unsigned src_dt, dst_dt;
	u64 old_slot, new_slot, seq;
	s64 now;
	int ret;

	if (flags & ~(TFS_RENAME_NOREPLACE | TFS_RENAME_EXCHANGE | TFS_RENAME_WHITEOUT) ||
	    ((flags & (TFS_RENAME_NOREPLACE | TFS_RENAME_WHITEOUT)) && exchange))
		return -EINVAL;
	if (is_dot(oldname, oldlen) || is_dot(newname, newlen))
		return -EBUSY;
	ret = tfs_name_check(oldname, oldlen) ?: tfs_name_check(newname, newlen);
	if (ret)
		return ret;
	ret = tfs_iget(fs, olddir, &od) ?: tfs_iget(fs, newdir, &nd);
	if (ret)
		goto out_put;
	/* Directories change parents only under this lock (is_under()). */
	if (cross)
		pthread_mutex_lock(&p->rename_lock);
	for (;;) {
		tfs_ino_t s2, d2;
		int r2;

		ims[0] = od;
		ims[1] = nd;
		ret = tfs_ilock_many(fs, ims, 2);
		if (ret)
			goto out_unlock_rename;
		ret = dir_check(od) ?: dir_check(nd);
		tfs_posix_trans_init(&trans, fs);
		if (!ret)
			ret = tfs_dirent_lookup(&trans, od, oldname, oldlen, &src_ino, NULL, NULL);
		r2 = ret ? ret
			 : tfs_dirent_lookup(&trans, nd, newname, newlen, &dst_ino, NULL, NULL);
		tfs_trans_exit(&trans);
		tfs_iunlock_many(ims, 2);
		if (ret)
			goto out_unlock_rename;
		if (r2 && r2 != -ENOENT) {
			ret = r2;
			goto out_unlock_rename;
		}
		if (r2)
			dst_ino = 0;
		if (exchange && !dst_ino) {
			ret = -ENOENT;
			goto out_unlock_rename;
		}
		if (dst_ino && (flags & TFS_RENAME_NOREPLACE)) {
			ret = -EEXIST;
			goto out_unlock_rename;
		}
		if (dst_ino == src_ino) {
			/* Two names of one inode: rename does nothing (POSIX). */
			ret = 0;
			goto out_unlock_rename;
		}
		ret = tfs_iget(fs, src_ino, &src);
		if (!ret && dst_ino)
			ret = tfs_iget(fs, dst_ino, &dst);
		if (ret)
			goto out_unlock_rename;
		ims[2] = src;
		ims[3] = dst;
		ret = tfs_ilock_many(fs, ims, 4);
		if (!ret) {
			/* Still the same names for the same inodes? */
			tfs_posix_trans_init(&trans, fs);
			ret = dir_check(od) ?: dir_check(nd) ?:
			      tfs_dirent_lookup(&trans, od, oldname, oldlen, &s2, &src_dt, &old_slot);
			r2 = ret ? ret
				 : tfs_dirent_lookup(&trans, nd, newname, newlen, &d2, &dst_dt,
						     &new_slot);
			tfs_trans_exit(&trans);
			if (!ret && r2 == -ENOENT)
				d2 = 0;
			else if (!ret)
				ret = r2;
			if (!ret && s2 == src_ino && d2 == dst_ino) {
				locked = true;
				break;
			}
			tfs_iunlock_many(ims, 4);
		}
		/* A name leading to an inode that is not there: changed meanwhile, or corrupt. */
		if (ret == -ENOENT && src->deleted)
			ret = dirent_dangling(fs, od, oldname, oldlen, src_ino);
		else if (ret == -ENOENT && dst && dst->deleted)
			ret = dirent_dangling(fs, nd, newname, newlen, dst_ino);
		tfs_iput(fs, src);
		if (dst)
			tfs_iput(fs, dst);
		src = dst = NULL;
		if (ret && ret != -ENOENT)
			goto out_unlock_rename;
		/* Something moved meanwhile: look again. */
	}

	bool src_dir = S_ISDIR(src->ui.mode), dst_dir = dst && S_ISDIR(dst->ui.mode);

	/* A directory may not move under itself (checked first, as the VFS does). */
	if (cross && src_dir) {
		ret = is_under(fs, newdir, src_ino);
		if (ret) {
			ret = ret > 0 ? -EINVAL : ret;
			goto out;
		}
	}
	if (cross && exchange && dst_dir) {
		ret = is_under(fs, olddir, dst_ino);
		if (ret) {
			ret = ret > 0 ? -EINVAL : ret;
			goto out;
		}
	}
	if (dst && !exchange) {
		if (dst_dir && !src_dir) {
			ret = -EISDIR;
			goto out;
		}
		if (!dst_dir && src_dir) {
			ret = -ENOTDIR;
			goto out;
		}
		if (dst_dir) {
			ret = tfs_dir_empty(fs, dst_ino, NULL);
			if (ret)
				goto out;
		}
	}

	now = tfs_now_ns();
	{
		struct tfs_inode_unpacked *oui = rs_ui(&rs, od), *nui = rs_ui(&rs, nd);
		struct tfs_inode_unpacked *sui = rs_ui(&rs, src),
					  *dui = dst ? rs_ui(&rs, dst) : NULL;

		oui->mtime = oui->ctime = nui->mtime = nui->ctime = now;
		sui->ctime = now;
		if (dui)
			dui->ctime = now;
		if (cross && src_dir) {
			sui->parent = newdir;
			oui->nlink--;
			nui->nlink++;
		}
		if (exchange) {
			if (cross && dst_dir) {
				dui->parent = olddir;
				nui->nlink--;
				oui->nlink++;
			}
		} else if (dst) {
			if (dst_dir) {
				dui->nlink = 0;
				nui->nlink--;
			} else {
				dui->nlink--;
			}
		}
		if (nui->nlink > TFS_LINK_MAX || oui->nlink > TFS_LINK_MAX) {
			ret = -EMLINK;
			goto out;
		}
	}

	if (whiteout) {
		/* A new inode: ENOSPC before the reserve for write-back is eaten. */
		ret = tfs_posix_may_grow(fs);
		if (ret)
			goto out;
		wino = tfs_ino_alloc(fs);
		new_inode_attrs(fs, ctx, &od->ui, S_IFCHR, 0, &wui);
		tfs_inode_pack(&wkb, wino, &wui);
	}

	/* The whiteout, the moved name and the replaced one: one commit. */
	tfs_posix_trans_init(&trans, fs);
	if (exchange) {
		ret = tfs_dirent_retarget(&trans, od, old_slot, oldname, oldlen, dst_ino, dst_dt)
			      ?: tfs_dirent_retarget(&trans, nd, new_slot, newname, newlen, src_ino,
						     src_dt);
	} else if (whiteout) {
		/* The old name stays, pointing at the whiteout. */
		ret = tfs_dirent_retarget(&trans, od, old_slot, oldname, oldlen, wino,
					  tfs_mode_to_dtype(S_IFCHR))
			      ?: tfs_trans_update(&trans, TFS_BTREE_inodes, &wkb.k);
		if (!ret && dst)
			ret = tfs_dirent_retarget(&trans, nd, new_slot, newname, newlen, src_ino,
						  src_dt);
		else if (!ret)
			ret = tfs_dirent_insert(&trans, nd, newname, newlen, src_ino, src_dt, NULL);
	} else if (dst) {
		ret = tfs_dirent_retarget(&trans, nd, new_slot, newname, newlen, src_ino, src_dt)
			      ?: tfs_dirent_remove(&trans, od, old_slot);
	} else {
		/* Remove first: the new name may take the slot (both in one commit). */
		ret = tfs_dirent_remove(&trans, od, old_slot)
			      ?: tfs_dirent_insert(&trans, nd, newname, newlen, src_ino, src_dt,
						   NULL);
	}
	for (unsigned i = 0; !ret && i < rs.nr; i++)
		ret = tfs_inode_update(&trans, rs.im[i], &rs.ui[i]);
	if (!ret && dst && !exchange && !rs_ui(&rs, dst)->nlink)
		ret = tfs_orphan_add(&trans, dst_ino, TFS_ORPHAN_unlinked);
	if (!ret)
		ret = tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (ret)
		goto out;
	for (unsigned i = 0; i < rs.nr; i++)
		tfs_inode_committed(rs.im[i], &rs.ui[i], seq, false);
	/* The replaced name's file keeps other names: see tfs_stat.links_dropped. */
	if (dst && !exchange && !S_ISDIR(dst->ui.mode) && dst->ui.nlink)
		dst->links_dropped = true;
	if (dst && !exchange && !dst->ui.nlink) {
		__atomic_fetch_add(&p->c.orphans_added, 1, __ATOMIC_RELAXED);
		maybe_remove(fs, dst);
	}
	if (whiteout) {
		struct tfs_inode_mem *wim;

		__atomic_fetch_add(&p->nr_inodes, 1, __ATOMIC_RELAXED);
		ret = tfs_inew(fs, wino, &wui, NULL, &wim);
		if (!ret) { /* else committed; only the table entry failed */
			tfs_inode_committed(wim, NULL, seq, false);
			tfs_iput_unlock(fs, wim);
		}
	}
out:
	if (locked)
		tfs_iunlock_many(ims, 4);
out_unlock_rename:
	if (cross)
		pthread_mutex_unlock(&p->rename_lock);
	if (src)
		tfs_iput(fs, src);
	if (dst)
		tfs_iput(fs, dst);
out_put:
	if (od)
		tfs_iput(fs, od);
	if (nd)
		tfs_iput(fs, nd);
	return ret;
}

/* --- readdir --- */

struct rd_entry {
	u64 pos; /* the entry's offset; next_pos is pos + 1 */
	tfs_ino_t ino;
	u8 dtype;
	u8 len;
	char name[TFS_NAME_MAX];
};

#define RD_BATCH 32

int tfs_readdir(struct tfs_fs *fs, tfs_ino_t dirino, u64 pos, tfs_filldir_fn fn, void *ctx)
{
	struct tfs_inode_mem *dir;
	struct rd_entry *batch = malloc(RD_BATCH * sizeof(*batch));
	int ret;

	if (!batch)
		return -ENOMEM;
	ret = tfs_iget(fs, dirino, &dir);
	if (ret)
		goto out_free;
	/*
	 * Entries are copied out a batch at a time under the directory's lock
	 * and handed to fn without it (fn may look them up).  Positions are
	 * the entries' slots, which never move: an entry present throughout
	 * is returned exactly once, whatever changes between batches.
	 */
	for (;;) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;
		unsigned nr = 0;
		bool more = false;

		ret = tfs_ilock(fs, dir, false);
		if (ret)
			break;
		if (!S_ISDIR(dir->ui.mode)) {
			tfs_iunlock(dir);
			ret = -ENOTDIR;
			break;
		}
		if (pos == 0)
			batch[nr++] = (struct rd_entry){ 0, dirino, DT_DIR, 1, "." };
		if (pos <= 1)
			batch[nr++] = (struct rd_entry){ 1, dir->ui.parent, DT_DIR, 2, ".." };
		tfs_btree_iter_init(&iter, fs, TFS_BTREE_dirents,
				    TFS_POS(dirino, max_t(u64, pos, TFS_DIRENT_OFFSET_MIN)),
				    TFS_POS(dirino, TFS_DIRENT_OFFSET_MAX));
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			const struct tfs_dirent *d = tfs_bkey_val(k);
			struct rd_entry *e;

			if (nr == RD_BATCH) {
				more = true;
				break;
			}
			if (k->type != TFS_BKEY_dirent || tfs_bkey_val_bytes(k) < sizeof(*d) ||
			    sizeof(*d) + d->name_len > tfs_bkey_val_bytes(k)) {
				tfs_posix_inconsistent(fs, "bad dirent key in a directory listing");
				ret = -TFS_ERR_dirent_invalid;
				break;
			}
			if (!d->ino)
				continue; /* whiteout */
			e = &batch[nr++];
			e->pos = le64_to_cpu(k->offset);
			e->ino = le64_to_cpu(d->ino);
			e->dtype = d->d_type;
			e->len = d->name_len;
			memcpy(e->name, d->name, d->name_len);
		}
		tfs_btree_iter_exit(&iter);
		tfs_iunlock(dir);
		if (ret)
			break;
		for (unsigned i = 0; i < nr; i++) {
			if (fn(ctx, batch[i].name, batch[i].len, batch[i].ino, batch[i].dtype,
			       batch[i].pos + 1)) {
				more = false;
				break;
			}
			pos = batch[i].pos + 1;
		}
		if (!more)
			break;
	}
	tfs_iput(fs, dir);
out_free:
	free(batch);
	return ret;
}
