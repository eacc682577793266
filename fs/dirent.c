// SPDX-License-Identifier: GPL-2.0
/*
 * Dirents: the dirent key type, names, and a directory's entries as a hash
 * table in the dirents btree (fs/str_hash.h): lookup, insert, remove.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/posix.h"
#include "fs/str_hash.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* --- the dirent key --- */

static bool dtype_valid(unsigned t)
{
	switch (t) {
	case S_IFREG >> 12:
	case S_IFDIR >> 12:
	case S_IFLNK >> 12:
	case S_IFCHR >> 12:
	case S_IFBLK >> 12:
	case S_IFIFO >> 12:
	case S_IFSOCK >> 12:
		return true;
	}
	return false;
}

static int dirent_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_dirent *d = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k);

	if (bytes < sizeof(*d)) {
		prt_printf(err, "value of %zu bytes < %zu", bytes, sizeof(*d));
		return -TFS_ERR_bkey_invalid;
	}
	if (le64_to_cpu(k->offset) < TFS_DIRENT_OFFSET_MIN ||
	    le64_to_cpu(k->offset) > TFS_DIRENT_OFFSET_MAX || !le64_to_cpu(k->inode)) {
		prt_str(err, "position out of range");
		return -TFS_ERR_bkey_invalid;
	}
	if (d->pad0 || d->pad1) {
		prt_str(err, "pad not zero");
		return -TFS_ERR_bkey_invalid;
	}
	if (!d->ino) {
		if (d->d_type || d->name_len || bytes != sizeof(*d)) {
			prt_str(err, "whiteout with a name or type");
			return -TFS_ERR_bkey_invalid;
		}
		return 0;
	}
	if (!dtype_valid(d->d_type)) {
		prt_printf(err, "bad d_type %u", d->d_type);
		return -TFS_ERR_bkey_invalid;
	}
	if (!d->name_len) {
		prt_str(err, "empty name");
		return -TFS_ERR_bkey_invalid;
	}
	if (bytes != tfs_dirent_val_bytes(d->name_len)) {
		prt_printf(err, "value of %zu bytes for a name of %u", bytes, d->name_len);
		return -TFS_ERR_bkey_invalid;
	}
	if (memchr(d->name, '/', d->name_len) || memchr(d->name, 0, d->name_len)) {
		prt_str(err, "name holds '/' or NUL");
		return -TFS_ERR_bkey_invalid;
	}
	for (size_t i = sizeof(*d) + d->name_len; i < bytes; i++)
		if (((const u8 *)d)[i]) {
			prt_str(err, "padding not zero");
			return -TFS_ERR_bkey_invalid;
		}
	if ((d->name_len == 1 && d->name[0] == '.') ||
	    (d->name_len == 2 && d->name[0] == '.' && d->name[1] == '.')) {
		prt_str(err, "name is . or ..");
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static void dirent_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_dirent *d = tfs_bkey_val(k);

	if (tfs_bkey_val_bytes(k) < sizeof(*d)) {
		prt_str(out, "(short)");
		return;
	}
	if (!d->ino) {
		prt_str(out, "whiteout");
		return;
	}
	prt_strn(out, (const char *)d->name,
		 min_t(size_t, d->name_len, tfs_bkey_val_bytes(k) - sizeof(*d)));
	prt_printf(out, " -> %llu type %u", (unsigned long long)le64_to_cpu(d->ino), d->d_type);
}

const struct tfs_bkey_ops tfs_bkey_ops_dirent = {
	.validate = dirent_validate,
	.val_to_text = dirent_val_to_text,
};

/* --- names --- */

int tfs_name_check(const char *name, size_t len)
{
	if (!len)
		return -EINVAL;
	if (len > TFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) || memchr(name, 0, len))
		return -EINVAL;
	return 0;
}

/* --- the hash table --- */

struct dirent_name {
	const char *name;
	size_t len;
};

static enum tfs_hash_match dirent_match(const struct tfs_bkey *k, const void *_n)
{
	const struct tfs_dirent *d = tfs_bkey_val(k);
	const struct dirent_name *n = _n;

	if (k->type != TFS_BKEY_dirent || tfs_bkey_val_bytes(k) < sizeof(*d))
		return TFS_HASH_OTHER;
	if (!d->ino)
		return TFS_HASH_WHITEOUT;
	if (n && d->name_len == n->len && sizeof(*d) + n->len <= tfs_bkey_val_bytes(k) &&
	    !memcmp(d->name, n->name, n->len))
		return TFS_HASH_MATCH;
	return TFS_HASH_OTHER;
}

static void dirent_whiteout(struct tfs_bkey_buf *buf, struct tfs_bpos pos)
{
	tfs_bkey_init(buf, TFS_BKEY_dirent, pos, sizeof(struct tfs_dirent));
}

const struct tfs_hash_desc tfs_dirent_hash_desc = {
	.btree = TFS_BTREE_dirents,
	.shift = 0,
	.slot_min = TFS_DIRENT_OFFSET_MIN,
	.slot_max = TFS_DIRENT_OFFSET_MAX,
	.match = dirent_match,
	.whiteout = dirent_whiteout,
};

static u64 dirent_start(struct tfs_fs *fs, struct tfs_inode_mem *dir, const char *name, size_t len)
{
	struct tfs_posix *p = tfs_posix(fs);

	return tfs_hash_slot(&tfs_dirent_hash_desc, p->name_hash(dir->ui.hash_seed, name, len));
}

/* A dirent key found where the hash table says must be a valid one. */
static int dirent_check(struct tfs_fs *fs, const struct tfs_bkey *k)
{
	struct printbuf err = PRINTBUF;
	int ret = 0;

	if (k->type != TFS_BKEY_dirent || dirent_validate(k, &err)) {
		struct printbuf msg = PRINTBUF;

		prt_str(&msg, "dirent ");
		tfs_bpos_to_text(&msg, tfs_bkey_pos(k));
		prt_str(&msg, ": ");
		prt_str(&msg, k->type != TFS_BKEY_dirent ? "wrong key type" : printbuf_str(&err));
		tfs_posix_inconsistent(fs, printbuf_str(&msg));
		printbuf_exit(&msg);
		ret = -TFS_ERR_dirent_invalid;
	}
	printbuf_exit(&err);
	return ret;
}

int tfs_dirent_lookup(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, const char *name,
		      size_t len, tfs_ino_t *ino, unsigned *dtype, u64 *slot)
{
	struct dirent_name n = { name, len };
	struct tfs_bkey_buf buf;
	const struct tfs_dirent *d;
	u64 s;
	int ret;

	ret = tfs_hash_lookup(trans, &tfs_dirent_hash_desc, dir->ino,
			      dirent_start(trans->fs, dir, name, len), &n, &s, NULL, &buf);
	if (ret)
		return ret;
	ret = dirent_check(trans->fs, &buf.k);
	if (ret)
		return ret;
	d = tfs_bkey_val(&buf.k);
	if (ino)
		*ino = le64_to_cpu(d->ino);
	if (dtype)
		*dtype = d->d_type;
	if (slot)
		*slot = s;
	return 0;
}

static int dirent_put(struct tfs_btree_trans *trans, tfs_ino_t dir, u64 slot, const char *name,
		      size_t len, tfs_ino_t ino, unsigned dtype)
{
	struct tfs_bkey_buf buf;
	struct tfs_dirent *d =
		tfs_bkey_init(&buf, TFS_BKEY_dirent, TFS_POS(dir, slot), tfs_dirent_val_bytes(len));

	d->ino = cpu_to_le64(ino);
	d->d_type = (u8)dtype;
	d->name_len = (u8)len;
	memcpy(d->name, name, len);
	return tfs_trans_update(trans, TFS_BTREE_dirents, &buf.k);
}

int tfs_dirent_insert(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, const char *name,
		      size_t len, tfs_ino_t ino, unsigned dtype, u64 *slot)
{
	struct dirent_name n = { name, len };
	u64 s, free_slot;
	int ret;

	ret = tfs_hash_lookup(trans, &tfs_dirent_hash_desc, dir->ino,
			      dirent_start(trans->fs, dir, name, len), &n, &s, &free_slot, NULL);
	if (!ret)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	if (slot)
		*slot = free_slot;
	return dirent_put(trans, dir->ino, free_slot, name, len, ino, dtype);
}

int tfs_dirent_remove(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, u64 slot)
{
	return tfs_hash_remove(trans, &tfs_dirent_hash_desc, dir->ino, slot);
}

int tfs_dirent_retarget(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, u64 slot,
			const char *name, size_t len, tfs_ino_t ino, unsigned dtype)
{
	return dirent_put(trans, dir->ino, slot, name, len, ino, dtype);
}

int tfs_dir_empty(struct tfs_fs *fs, tfs_ino_t dir, bool *whiteouts)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	if (whiteouts)
		*whiteouts = false;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_dirents, TFS_POS(dir, 0),
			    TFS_POS(dir, UINT64_MAX));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_dirent *d = tfs_bkey_val(k);

		if (k->type == TFS_BKEY_dirent && tfs_bkey_val_bytes(k) >= sizeof(*d) && !d->ino) {
			if (whiteouts)
				*whiteouts = true;
			continue; /* a whiteout */
		}
		ret = -ENOTEMPTY;
		break;
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

int tfs_dirents_remove_all(struct tfs_fs *fs, tfs_ino_t dir)
{
	return tfs_posix_delete_inode_keys(fs, TFS_BTREE_dirents, dir);
}
