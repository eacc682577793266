// SPDX-License-Identifier: GPL-2.0
/*
 * Extended attributes: the xattr key type and get/set/list/remove
 * (fs/fs.h), as a hash table per inode in the xattrs btree
 * (fs/str_hash.h), a value longer than one key split over chunks of its
 * slot (fs_format.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/posix.h"
#include "fs/str_hash.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

static const char *const xattr_prefix[] = {
	[TFS_XATTR_user] = "user.",
	[TFS_XATTR_trusted] = "trusted.",
	[TFS_XATTR_security] = "security.",
	[TFS_XATTR_posix_acl_access] = "system.posix_acl_access",
	[TFS_XATTR_posix_acl_default] = "system.posix_acl_default",
};

static const char *const xattr_type_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_XATTR_TYPES(x)
#undef x
};

static bool type_has_name(unsigned type)
{
	return type == TFS_XATTR_user || type == TFS_XATTR_trusted || type == TFS_XATTR_security;
}

/* --- the xattr key --- */

static int xattr_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_xattr *x = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k);
	unsigned chunk = le64_to_cpu(k->offset) & (TFS_XATTR_MAX_CHUNKS - 1);
	unsigned chunk_len, value_len;

	if (bytes < sizeof(*x)) {
		prt_printf(err, "value of %zu bytes < %zu", bytes, sizeof(*x));
		return -TFS_ERR_bkey_invalid;
	}
	if (!le64_to_cpu(k->inode) ||
	    (le64_to_cpu(k->offset) >> TFS_XATTR_CHUNK_BITS) > TFS_XATTR_SLOT_MAX) {
		prt_str(err, "position out of range");
		return -TFS_ERR_bkey_invalid;
	}
	chunk_len = le16_to_cpu(x->chunk_len);
	value_len = le32_to_cpu(x->value_len);
	if (x->type >= TFS_XATTR_TYPE_NR ||
	    (chunk ? x->type != TFS_XATTR_cont : x->type == TFS_XATTR_cont)) {
		prt_printf(err, "type %u in chunk %u", x->type, chunk);
		return -TFS_ERR_bkey_invalid;
	}
	if (x->type == TFS_XATTR_whiteout) {
		if (x->name_len || chunk_len || value_len || bytes != sizeof(*x)) {
			prt_str(err, "whiteout with contents");
			return -TFS_ERR_bkey_invalid;
		}
		return 0;
	}
	if (type_has_name(x->type) ? !x->name_len : x->name_len) {
		prt_printf(err, "name length %u for type %s", x->name_len,
			   xattr_type_names[x->type]);
		return -TFS_ERR_bkey_invalid;
	}
	if (chunk && (value_len || !chunk_len)) {
		prt_str(err, "continuation with a value length or nothing in it");
		return -TFS_ERR_bkey_invalid;
	}
	if (!chunk && (value_len > TFS_XATTR_SIZE_MAX || chunk_len > value_len)) {
		prt_printf(err, "value length %u, %u in this chunk", value_len, chunk_len);
		return -TFS_ERR_bkey_invalid;
	}
	if (x->name_len + chunk_len > TFS_XATTR_CHUNK_BYTES ||
	    bytes != tfs_xattr_val_bytes(x->name_len, chunk_len)) {
		prt_printf(err, "value of %zu bytes for name %u and chunk %u", bytes, x->name_len,
			   chunk_len);
		return -TFS_ERR_bkey_invalid;
	}
	if (memchr(x->data, 0, x->name_len)) {
		prt_str(err, "NUL in name");
		return -TFS_ERR_bkey_invalid;
	}
	for (size_t i = sizeof(*x) + x->name_len + chunk_len; i < bytes; i++)
		if (((const u8 *)x)[i]) {
			prt_str(err, "padding not zero");
			return -TFS_ERR_bkey_invalid;
		}
	return 0;
}

static void xattr_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_xattr *x = tfs_bkey_val(k);

	if (tfs_bkey_val_bytes(k) < sizeof(*x) + x->name_len || x->type >= TFS_XATTR_TYPE_NR) {
		prt_str(out, "(bad)");
		return;
	}
	prt_str(out, xattr_type_names[x->type]);
	if (x->name_len) {
		prt_char(out, ' ');
		prt_strn(out, (const char *)x->data, x->name_len);
	}
	prt_printf(out, " chunk %u", le16_to_cpu(x->chunk_len));
	if (x->value_len)
		prt_printf(out, " of %u", le32_to_cpu(x->value_len));
}

const struct tfs_bkey_ops tfs_bkey_ops_xattr = {
	.validate = xattr_validate,
	.val_to_text = xattr_val_to_text,
};

/* --- names --- */

struct xattr_name {
	unsigned type;
	const char *name; /* after the prefix */
	size_t len;
};

/* Splits a full name; -ERANGE (empty or too long), -EOPNOTSUPP, -EINVAL (no name). */
static int xattr_name_parse(const char *full, struct xattr_name *n)
{
	size_t len = strlen(full);

	if (!len || len > 255)
		return -ERANGE;
	for (unsigned t = TFS_XATTR_user; t < TFS_XATTR_cont; t++) {
		size_t plen = strlen(xattr_prefix[t]);

		if (type_has_name(t)) {
			if (strncmp(full, xattr_prefix[t], plen))
				continue;
			if (len == plen)
				return -EINVAL;
			*n = (struct xattr_name){ t, full + plen, len - plen };
			return 0;
		}
		if (!strcmp(full, xattr_prefix[t])) {
			*n = (struct xattr_name){ t, "", 0 };
			return 0;
		}
	}
	return -EOPNOTSUPP;
}

static enum tfs_hash_match xattr_match(const struct tfs_bkey *k, const void *_n)
{
	const struct tfs_xattr *x = tfs_bkey_val(k);
	const struct xattr_name *n = _n;

	if (k->type != TFS_BKEY_xattr || tfs_bkey_val_bytes(k) < sizeof(*x))
		return TFS_HASH_OTHER;
	if (x->type == TFS_XATTR_whiteout)
		return TFS_HASH_WHITEOUT;
	if (n && x->type == n->type && x->name_len == n->len &&
	    sizeof(*x) + n->len <= tfs_bkey_val_bytes(k) && !memcmp(x->data, n->name, n->len))
		return TFS_HASH_MATCH;
	return TFS_HASH_OTHER;
}

static void xattr_whiteout(struct tfs_bkey_buf *buf, struct tfs_bpos pos)
{
	tfs_bkey_init(buf, TFS_BKEY_xattr, pos, sizeof(struct tfs_xattr));
}

static const struct tfs_hash_desc xattr_hash_desc = {
	.btree = TFS_BTREE_xattrs,
	.shift = TFS_XATTR_CHUNK_BITS,
	.slot_min = 0,
	.slot_max = TFS_XATTR_SLOT_MAX,
	.match = xattr_match,
	.whiteout = xattr_whiteout,
};

static u64 xattr_start(struct tfs_fs *fs, u64 hash_seed, const struct xattr_name *n)
{
	u8 buf[1 + 255];

	buf[0] = (u8)n->type;
	memcpy(buf + 1, n->name, n->len);
	return tfs_hash_slot(&xattr_hash_desc,
			     tfs_posix(fs)->name_hash(hash_seed, buf, 1 + n->len));
}

/* Chunk 0 of n of inode ino (hash_seed), checked: 0 with *slot, or -ENODATA. */
static int xattr_find_at(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 hash_seed,
			 const struct xattr_name *n, u64 *slot, u64 *free_slot,
			 struct tfs_bkey_buf *out)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_hash_lookup(trans, &xattr_hash_desc, ino,
				  xattr_start(trans->fs, hash_seed, n), n, slot, free_slot, out);

	if (ret == -ENOENT)
		return -ENODATA;
	if (!ret && xattr_validate(&out->k, &err)) {
		struct printbuf msg = PRINTBUF;

		prt_str(&msg, "xattr ");
		tfs_bpos_to_text(&msg, tfs_bkey_pos(&out->k));
		prt_str(&msg, ": ");
		prt_str(&msg, printbuf_str(&err));
		tfs_posix_inconsistent(trans->fs, printbuf_str(&msg));
		printbuf_exit(&msg);
		ret = -TFS_ERR_xattr_invalid;
	}
	printbuf_exit(&err);
	return ret;
}

static int xattr_find(struct tfs_btree_trans *trans, struct tfs_inode_mem *im,
		      const struct xattr_name *n, u64 *slot, u64 *free_slot,
		      struct tfs_bkey_buf *out)
{
	return xattr_find_at(trans, im->ino, im->ui.hash_seed, n, slot, free_slot, out);
}

static unsigned nr_chunks(unsigned name_len, unsigned value_len)
{
	unsigned first = TFS_XATTR_CHUNK_BYTES - name_len;

	if (value_len <= first)
		return 1;
	return 1 + DIV_ROUND_UP(value_len - first, TFS_XATTR_CHUNK_BYTES);
}

/*
 * Whether im (locked, shared or exclusive) has some xattr key: 1 yes, 0 no,
 * or the code of the peek that would have found out.  Known (*known set)
 * from im->xattrs, or found out now with one peek at its range and
 * remembered.  A key added later goes in under the exclusive lock, which
 * first sets TFS_INODE_XATTRS_some (tfs_setxattr()): none never outlives a
 * key.
 */
static int xattrs_present(struct tfs_fs *fs, struct tfs_inode_mem *im, bool *known)
{
	u8 s = __atomic_load_n(&im->xattrs, __ATOMIC_ACQUIRE);
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k = NULL;
	int ret;

	*known = s != TFS_INODE_XATTRS_unknown;
	if (*known)
		return s == TFS_INODE_XATTRS_some;
	tfs_btree_iter_init(&iter, fs, TFS_BTREE_xattrs, TFS_POS(im->ino, 0),
			    TFS_POS(im->ino, UINT64_MAX));
	ret = tfs_btree_iter_peek(&iter, &k);
	s = k ? TFS_INODE_XATTRS_some : TFS_INODE_XATTRS_none;
	tfs_btree_iter_exit(&iter);
	/* An error: not remembered. */
	if (ret)
		return ret;
	__atomic_store_n(&im->xattrs, s, __ATOMIC_RELEASE);
	return s == TFS_INODE_XATTRS_some;
}

int tfs_xattrs_present(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	bool known;

	return xattrs_present(fs, im, &known);
}

/* No xattr key at all; an error counts as "some" (the lookup meets it and reports it). */
static bool xattrs_none(struct tfs_fs *fs, struct tfs_inode_mem *im, bool *known)
{
	return !xattrs_present(fs, im, known);
}

/*
 * Copies the value of the xattr at slot of ino, whose chunk 0 is in kb
 * (its buffer is reused), to buf (value_len bytes).
 */
static int read_value(struct tfs_fs *fs, tfs_ino_t ino, u64 slot, struct tfs_bkey_buf *kb,
		      void *buf)
{
	struct printbuf err = PRINTBUF;
	const struct tfs_xattr *x = tfs_bkey_val(&kb->k);
	size_t value_len = le32_to_cpu(x->value_len), done = le16_to_cpu(x->chunk_len);
	int ret = 0;

	memcpy(buf, x->data + x->name_len, done);
	for (unsigned c = 1; !ret && done < value_len; c++) {
		ret = tfs_btree_lookup(fs, TFS_BTREE_xattrs,
				       tfs_hash_pos(&xattr_hash_desc, ino, slot, c), kb);
		x = tfs_bkey_val(&kb->k);
		if (ret == -ENOENT ||
		    (!ret && (kb->k.type != TFS_BKEY_xattr || xattr_validate(&kb->k, &err) ||
			      le16_to_cpu(x->chunk_len) > value_len - done))) {
			struct printbuf msg = PRINTBUF;

			prt_printf(&msg, "xattr %llu:%llu chunk %u missing or bad: %s",
				   (unsigned long long)ino, (unsigned long long)slot, c,
				   printbuf_str(&err));
			tfs_posix_inconsistent(fs, printbuf_str(&msg));
			printbuf_exit(&msg);
			ret = -TFS_ERR_xattr_invalid;
		}
		if (ret)
			break;
		memcpy((u8 *)buf + done, x->data, le16_to_cpu(x->chunk_len));
		done += le16_to_cpu(x->chunk_len);
	}
	printbuf_exit(&err);
	return ret;
}

/* Queues the chunks of value (size bytes) as xattr n of ino at slot. */
static int queue_value(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 slot,
		       const struct xattr_name *n, const void *value, size_t size)
{
	struct tfs_bkey_buf kb;
	size_t done = 0;
	int ret = 0;

	for (unsigned c = 0; !ret && (c == 0 || done < size); c++) {
		unsigned nl = c ? 0 : (unsigned)n->len;
		size_t chunk = min_t(size_t, size - done, TFS_XATTR_CHUNK_BYTES - nl);
		struct tfs_xattr *x = tfs_bkey_init(&kb, TFS_BKEY_xattr,
						    tfs_hash_pos(&xattr_hash_desc, ino, slot, c),
						    tfs_xattr_val_bytes(nl, (unsigned)chunk));

		x->type = (u8)(c ? TFS_XATTR_cont : n->type);
		x->name_len = (u8)nl;
		x->chunk_len = cpu_to_le16((u16)chunk);
		x->value_len = cpu_to_le32(c ? 0 : (u32)size);
		memcpy(x->data, n->name, nl);
		memcpy(x->data + nl, (const u8 *)value + done, chunk);
		done += chunk;
		ret = tfs_trans_update(trans, TFS_BTREE_xattrs, &kb.k);
	}
	return ret;
}

/* --- operations --- */

ssize_t tfs_getxattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name, void *buf, size_t size)
{
	struct tfs_inode_mem *im;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf kb;
	struct xattr_name n;
	const struct tfs_xattr *x;
	u64 slot;
	size_t value_len = 0;
	bool known;
	int ret = xattr_name_parse(name, &n);

	if (ret)
		return ret;
	ret = tfs_iget_locked(fs, ino, false, &im);
	if (ret)
		return ret;
	/* Most files have none, and the kernel asks before every write. */
	if (xattrs_none(fs, im, &known)) {
		if (known)
			__atomic_fetch_add(&tfs_posix(fs)->c.xattr_lookups_skipped, 1,
					   __ATOMIC_RELAXED);
		tfs_iput_unlock(fs, im);
		return -ENODATA;
	}
	tfs_posix_trans_init(&trans, fs);
	ret = xattr_find(&trans, im, &n, &slot, NULL, &kb);
	if (ret)
		goto out;
	x = tfs_bkey_val(&kb.k);
	value_len = le32_to_cpu(x->value_len);
	if (!size)
		goto out;
	if (size < value_len) {
		ret = -ERANGE;
		goto out;
	}
	ret = read_value(fs, ino, slot, &kb, buf);
out:
	tfs_trans_exit(&trans);
	tfs_iput_unlock(fs, im);
	return ret ?: (ssize_t)value_len;
}

/* Total bytes listxattr() would return for im (locked). */
static ssize_t list_names(struct tfs_fs *fs, tfs_ino_t ino, char *buf, size_t size)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	size_t total = 0;
	int ret;

	tfs_btree_iter_init(&iter, fs, TFS_BTREE_xattrs, TFS_POS(ino, 0), TFS_POS(ino, UINT64_MAX));
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		const struct tfs_xattr *x = tfs_bkey_val(k);
		size_t plen, len;

		if (le64_to_cpu(k->offset) & (TFS_XATTR_MAX_CHUNKS - 1))
			continue;
		if (k->type != TFS_BKEY_xattr || tfs_bkey_val_bytes(k) < sizeof(*x) ||
		    x->type >= TFS_XATTR_cont || sizeof(*x) + x->name_len > tfs_bkey_val_bytes(k)) {
			tfs_posix_inconsistent(fs, "bad xattr key in a listing");
			ret = -TFS_ERR_xattr_invalid;
			break;
		}
		if (x->type == TFS_XATTR_whiteout)
			continue;
		plen = strlen(xattr_prefix[x->type]);
		len = plen + x->name_len + 1;
		if (buf && size) {
			if (total + len > size) {
				ret = -ERANGE;
				break;
			}
			memcpy(buf + total, xattr_prefix[x->type], plen);
			memcpy(buf + total + plen, x->data, x->name_len);
			buf[total + len - 1] = 0;
		}
		total += len;
	}
	tfs_btree_iter_exit(&iter);
	return ret ?: (ssize_t)total;
}

ssize_t tfs_listxattr(struct tfs_fs *fs, tfs_ino_t ino, char *buf, size_t size)
{
	struct tfs_inode_mem *im;
	ssize_t ret = tfs_iget_locked(fs, ino, false, &im);

	if (ret)
		return ret;
	ret = list_names(fs, ino, buf, size);
	tfs_iput_unlock(fs, im);
	return ret;
}

/* Queues the removal of chunks 1.. of the xattr at slot (chunk 0 is the caller's). */
static int delete_chunks(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 slot,
			 const struct tfs_xattr *x)
{
	unsigned n = nr_chunks(x->name_len, le32_to_cpu(x->value_len));
	int ret = 0;

	for (unsigned c = 1; !ret && c < n; c++)
		ret = tfs_trans_delete(trans, TFS_BTREE_xattrs,
				       tfs_hash_pos(&xattr_hash_desc, ino, slot, c));
	return ret;
}

/*
 * Commits trans with im's ctime moved, and its permission bits set to
 * perm when perm is not -1 (and S_ISGID cleared then if kill_sgid).
 */
static int commit_ctime_perm(struct tfs_btree_trans *trans, struct tfs_inode_mem *im, int perm,
			     bool kill_sgid)
{
	struct tfs_inode_unpacked ui = im->ui;
	u64 seq;
	int ret;

	ui.ctime = tfs_now_ns();
	if (perm >= 0)
		ui.mode = (ui.mode & ~0777U & ~(kill_sgid ? (u32)S_ISGID : 0U)) | (u32)perm;
	ret = tfs_inode_update(trans, im, &ui) ?: tfs_posix_commit(trans, &seq);
	/* The whole thing must fit one journal entry. */
	if (tfs_err_matches(ret, TFS_ERR_journal_entry_too_big))
		ret = -E2BIG;
	if (!ret)
		tfs_inode_committed(im, &ui, seq, false);
	return ret;
}

static int commit_ctime(struct tfs_btree_trans *trans, struct tfs_inode_mem *im)
{
	return commit_ctime_perm(trans, im, -1, false);
}

/*
 * POSIX ACLs, in the xattr format the kernel passes on (little-endian: a
 * u32 version 2, then entries of u16 tag, u16 perm, u32 id).  The kernel
 * does not interpret them for us (no FUSE_POSIX_ACL), so setting an
 * access ACL must do here what it does on ext4 (posix_acl_update_mode()):
 * the permission bits follow the ACL (owner, mask or group, other),
 * S_ISGID goes when the caller may not keep it (acl_kills_sgid()), and
 * an ACL a mode says all of (no named user or group, no mask) is not stored.
 * `cp -a` and `cp -p` set permissions this way, after creating the file
 * 0600.
 */
enum {
	ACL_USER_OBJ = 0x01,
	ACL_USER = 0x02,
	ACL_GROUP_OBJ = 0x04,
	ACL_GROUP = 0x08,
	ACL_MASK = 0x10,
	ACL_OTHER = 0x20,
};

/*
 * The permission bits of an access ACL in value (0 .. 0777) and whether
 * it says more than they do; -EINVAL if it is not a valid ACL (as
 * posix_acl_valid(): one owner, owning group and other entry, a mask
 * whenever there are named entries, perms within rwx).  -ENODATA for an
 * ACL with no entries: kept as it is.
 */
static int acl_perm(const void *value, size_t size, bool *extended)
{
	const u8 *v = value;
	unsigned counts[0x21] = { 0 }, user = 0, group = 0, other = 0, mask = 0;
	size_t nr;

	if (size < 4 || (size - 4) % 8 || v[0] != 2 || v[1] || v[2] || v[3])
		return -EINVAL;
	nr = (size - 4) / 8;
	if (!nr)
		return -ENODATA;
	for (size_t i = 0; i < nr; i++) {
		const u8 *e = v + 4 + i * 8;
		unsigned tag = e[0] | e[1] << 8, perm = e[2] | e[3] << 8;

		if (perm & ~7U)
			return -EINVAL;
		switch (tag) {
		case ACL_USER_OBJ:
			user = perm;
			break;
		case ACL_GROUP_OBJ:
			group = perm;
			break;
		case ACL_MASK:
			mask = perm;
			break;
		case ACL_OTHER:
			other = perm;
			break;
		case ACL_USER:
		case ACL_GROUP:
			break;
		default:
			return -EINVAL;
		}
		counts[tag]++;
	}
	if (counts[ACL_USER_OBJ] != 1 || counts[ACL_GROUP_OBJ] != 1 || counts[ACL_OTHER] != 1 ||
	    counts[ACL_MASK] > 1 || ((counts[ACL_USER] || counts[ACL_GROUP]) && !counts[ACL_MASK]))
		return -EINVAL;
	/* A mask alone says more than a mode too (posix_acl_equiv_mode()): kept. */
	*extended = counts[ACL_USER] || counts[ACL_GROUP] || counts[ACL_MASK];
	/* With a mask, the group bits show the mask (what named entries get at most). */
	return (int)(user << 6 | (counts[ACL_MASK] ? mask : group) << 3 | other);
}

/*
 * Whether ctx setting an access ACL on im (locked) loses S_ISGID: it is
 * set, and ctx is neither in the file's group nor has CAP_FSETID.
 */
static bool acl_kills_sgid(const struct tfs_ctx *ctx, const struct tfs_inode_mem *im)
{
	if (!ctx || !(im->ui.mode & S_ISGID) || ctx->gid == im->ui.gid)
		return false;
	return !ctx->keeps_sgid || !ctx->keeps_sgid(ctx->keeps_sgid_arg, im->ui.gid);
}

int tfs_setxattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name, const void *value, size_t size,
		 unsigned flags)
{
	return tfs_setxattr_as(fs, NULL, ino, name, value, size, flags);
}

int tfs_setxattr_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, const char *name,
		    const void *value, size_t size, unsigned flags)
{
	struct tfs_inode_mem *im;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf kb;
	struct xattr_name n;
	u64 slot, free_slot;
	bool extended = false;
	int perm = -1; /* the permission bits an access ACL sets, or -1 */
	bool kill_sgid;
	int ret = xattr_name_parse(name, &n);

	if (ret)
		return ret;
	if (size > TFS_XATTR_SIZE_MAX)
		return -E2BIG;
	/* Both CREATE and REPLACE: each applies, so it always fails (ext4, tmpfs). */
	if (flags & ~(TFS_XATTR_CREATE | TFS_XATTR_REPLACE))
		return -EINVAL;
	if (n.type == TFS_XATTR_posix_acl_access) {
		perm = acl_perm(value, size, &extended);
		if (perm == -ENODATA)
			perm = -1;
		else if (perm < 0)
			return perm;
	}
	ret = tfs_iget_locked(fs, ino, true, &im);
	if (ret)
		return ret;
	/* Under the lock, so that no chmod or chown falls between this and the commit. */
	kill_sgid = perm >= 0 && acl_kills_sgid(ctx, im);
	/* Before any key goes in (see xattrs_none()); kept if none does. */
	__atomic_store_n(&im->xattrs, TFS_INODE_XATTRS_some, __ATOMIC_RELEASE);
	tfs_posix_trans_init(&trans, fs);
	ret = xattr_find(&trans, im, &n, &slot, &free_slot, &kb);
	/*
	 * A new xattr or a bigger value needs space (tfs_posix_may_grow());
	 * one no bigger does not, even at ENOSPC (as on ext4).
	 */
	if ((ret == -ENODATA && !(flags & TFS_XATTR_REPLACE)) ||
	    (!ret && !(flags & TFS_XATTR_CREATE) &&
	     size > le32_to_cpu(((const struct tfs_xattr *)tfs_bkey_val(&kb.k))->value_len))) {
		int err = tfs_posix_may_grow(fs);

		if (err) {
			ret = err;
			goto out;
		}
	}
	if (!ret) {
		if (flags & TFS_XATTR_CREATE) {
			ret = -EEXIST;
			goto out;
		}
		ret = delete_chunks(&trans, ino, slot, tfs_bkey_val(&kb.k));
		/* Said by the mode alone: the stored one goes (its chunk 0 too). */
		if (!ret && perm >= 0 && !extended)
			ret = tfs_hash_remove(&trans, &xattr_hash_desc, ino, slot)
				      ?: commit_ctime_perm(&trans, im, perm, kill_sgid);
		if (ret || (perm >= 0 && !extended))
			goto out;
	} else if (ret == -ENODATA && perm >= 0 && !extended) {
		/* REPLACE of an ACL never stored: ext4 has none there either. */
		if (!(flags & TFS_XATTR_REPLACE))
			ret = commit_ctime_perm(&trans, im, perm, kill_sgid);
		goto out;
	} else if (ret == -ENODATA) {
		ssize_t total;

		if (flags & TFS_XATTR_REPLACE)
			goto out;
		/* listxattr must still fit its VFS limit with the new name. */
		total = list_names(fs, ino, NULL, 0);
		ret = total < 0 ? (int)total : 0;
		if (!ret && (size_t)total + strlen(name) + 1 > TFS_XATTR_LIST_MAX)
			ret = -ENOSPC;
		slot = free_slot;
	}
	if (!ret)
		ret = queue_value(&trans, ino, slot, &n, value, size);
	if (!ret)
		ret = commit_ctime_perm(&trans, im, perm, kill_sgid);
out:
	tfs_trans_exit(&trans);
	tfs_iput_unlock(fs, im);
	return ret;
}

int tfs_removexattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name)
{
	struct tfs_inode_mem *im;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf kb;
	struct xattr_name n;
	u64 slot;
	int ret = xattr_name_parse(name, &n);

	if (ret)
		return ret;
	ret = tfs_iget_locked(fs, ino, true, &im);
	if (ret)
		return ret;
	tfs_posix_trans_init(&trans, fs);
	ret = xattr_find(&trans, im, &n, &slot, NULL, &kb) ?:
	      delete_chunks(&trans, ino, slot, tfs_bkey_val(&kb.k)) ?:
	      tfs_hash_remove(&trans, &xattr_hash_desc, ino, slot) ?: commit_ctime(&trans, im);
	tfs_trans_exit(&trans);
	tfs_iput_unlock(fs, im);
	/*
	 * The kernel turns setting an empty ACL (setfacl -b, an ACL equal to
	 * the mode) into this removal: that there was none is no error (ext4
	 * and tmpfs return 0).
	 */
	if (ret == -ENODATA &&
	    (n.type == TFS_XATTR_posix_acl_access || n.type == TFS_XATTR_posix_acl_default))
		ret = 0;
	return ret;
}

int tfs_xattr_remove_all(struct tfs_fs *fs, tfs_ino_t ino)
{
	return tfs_posix_delete_inode_keys(fs, TFS_BTREE_xattrs, ino);
}

/*
 * --- POSIX ACLs for a mount with FUSE_POSIX_ACL ---
 *
 * The kernel then enforces ACLs and leaves two things to the filesystem
 * that ext4 does in its own code: a new inode's mode and ACLs from its
 * directory's default ACL (posix_acl_create()), and the access ACL
 * following a chmod (posix_acl_chmod()).  Both go into the transaction of
 * the create or the chmod: a crash never leaves the mode without its ACL.
 */

/*
 * The value of im's (locked) xattr n, malloc'ed, in *val and *size; 0, or
 * -ENODATA if it has none.
 */
static int xattr_read_alloc(struct tfs_btree_trans *trans, struct tfs_inode_mem *im,
			    const struct xattr_name *n, u8 **val, size_t *size)
{
	struct tfs_bkey_buf kb;
	bool known;
	u64 slot;
	int ret;

	if (xattrs_none(trans->fs, im, &known))
		return -ENODATA;
	ret = xattr_find(trans, im, n, &slot, NULL, &kb);
	if (ret)
		return ret;
	*size = le32_to_cpu(((const struct tfs_xattr *)tfs_bkey_val(&kb.k))->value_len);
	*val = malloc(*size ?: 1);
	if (!*val)
		return -ENOMEM;
	ret = read_value(trans->fs, im->ino, slot, &kb, *val);
	if (ret)
		free(*val);
	return ret;
}

static unsigned acl_nr(size_t size)
{
	return (unsigned)((size - 4) / 8);
}

static unsigned acl_tag(const u8 *acl, unsigned i)
{
	const u8 *e = acl + 4 + i * 8;

	return e[0] | e[1] << 8;
}

static u8 *acl_perm_p(u8 *acl, unsigned i)
{
	return acl + 4 + i * 8 + 2; /* u16 le: only its low byte is ever set */
}

/* posix_acl_create_masq(): whether acl says more than *mode, which it masks. */
static bool acl_create_masq(u8 *acl, size_t size, u32 *mode)
{
	u8 *group_obj = NULL, *mask_obj = NULL;
	bool not_equiv = false;

	for (unsigned i = 0; i < acl_nr(size); i++) {
		u8 *p = acl_perm_p(acl, i);

		switch (acl_tag(acl, i)) {
		case ACL_USER_OBJ:
			*p &= (*mode >> 6) & 7;
			*mode &= ((u32)*p << 6) | ~0700U;
			break;
		case ACL_USER:
		case ACL_GROUP:
			not_equiv = true;
			break;
		case ACL_GROUP_OBJ:
			group_obj = p;
			break;
		case ACL_OTHER:
			*p &= *mode & 7;
			*mode &= *p | ~07U;
			break;
		case ACL_MASK:
			mask_obj = p;
			not_equiv = true;
			break;
		}
	}
	/* acl_perm() checked there is an owning group entry. */
	if (mask_obj) {
		*mask_obj &= (*mode >> 3) & 7;
		*mode &= ((u32)*mask_obj << 3) | ~070U;
	} else {
		*group_obj &= (*mode >> 3) & 7;
		*mode &= ((u32)*group_obj << 3) | ~070U;
	}
	return not_equiv;
}

int tfs_acl_create(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, tfs_ino_t ino,
		   u64 hash_seed, u32 *mode, u32 umask, bool *keys)
{
	static const struct xattr_name access = { TFS_XATTR_posix_acl_access, "", 0 },
				       def = { TFS_XATTR_posix_acl_default, "", 0 };
	struct tfs_bkey_buf kb;
	bool extended;
	size_t size;
	u64 slot, free_slot;
	u8 *acl;
	int ret;

	*keys = false;
	if (S_ISLNK(*mode))
		return 0;
	ret = xattr_read_alloc(trans, dir, &def, &acl, &size);
	if (ret == -ENODATA) {
		*mode &= ~(umask & 0777);
		return 0;
	}
	if (ret)
		return ret;
	/*
	 * No entries, or not an ACL (the kernel checks what it passes on):
	 * as if none, the kernel's get_acl() gives NULL for an empty one.
	 */
	if (acl_perm(acl, size, &extended) < 0) {
		free(acl);
		*mode &= ~(umask & 0777);
		return 0;
	}
	/* A directory inherits the default ACL as it is. */
	if (S_ISDIR(*mode)) {
		ret = xattr_find_at(trans, ino, hash_seed, &def, &slot, &free_slot, &kb);
		if (ret == -ENODATA) {
			ret = queue_value(trans, ino, free_slot, &def, acl, size);
			*keys = true;
		} else if (!ret) {
			ret = -EEXIST; /* a new inode has no xattrs */
		}
	}
	if (!ret && acl_create_masq(acl, size, mode)) {
		ret = xattr_find_at(trans, ino, hash_seed, &access, &slot, &free_slot, &kb);
		if (ret == -ENODATA) {
			ret = queue_value(trans, ino, free_slot, &access, acl, size);
			*keys = true;
		} else if (!ret) {
			ret = -EEXIST;
		}
	}
	free(acl);
	return ret;
}

int tfs_acl_chmod(struct tfs_btree_trans *trans, struct tfs_inode_mem *im, u32 mode)
{
	static const struct xattr_name access = { TFS_XATTR_posix_acl_access, "", 0 };
	struct tfs_bkey_buf kb;
	u8 *acl, *group_obj = NULL, *mask_obj = NULL;
	bool extended;
	size_t size;
	u64 slot;
	int ret = xattr_read_alloc(trans, im, &access, &acl, &size);

	if (ret == -ENODATA)
		return 0;
	if (ret)
		return ret;
	/* Not an ACL (or an empty one): left as it is, as the kernel would. */
	if (acl_perm(acl, size, &extended) < 0)
		goto out;
	for (unsigned i = 0; i < acl_nr(size); i++) {
		u8 *p = acl_perm_p(acl, i);

		switch (acl_tag(acl, i)) {
		case ACL_USER_OBJ:
			*p = (mode >> 6) & 7;
			break;
		case ACL_GROUP_OBJ:
			group_obj = p;
			break;
		case ACL_MASK:
			mask_obj = p;
			break;
		case ACL_OTHER:
			*p = mode & 7;
			break;
		}
	}
	*(mask_obj ?: group_obj) = (mode >> 3) & 7;
	/* The same size: the same chunks at the same slot, rewritten. */
	ret = xattr_find(trans, im, &access, &slot, NULL, &kb)
		      ?: queue_value(trans, im->ino, slot, &access, acl, size);
out:
	free(acl);
	return ret;
}
