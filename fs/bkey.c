// SPDX-License-Identifier: GPL-2.0
/*
 * Keys: names, positions, validation and text (fs/bkey.h).
 *
 * The per-type operations live in one table indexed by type.  The engine's
 * own types (deleted, btree_ptr) are defined here; the filesystem's types
 * (inode, dirent, extent, xattr, alloc, orphan, inline_data, accounting)
 * have their ops in the file that owns the type, which defines `const
 * struct tfs_bkey_ops tfs_bkey_ops_<type>`.  The table below registers
 * them by strong reference: any program that links bkey.o (every program
 * that validates a key) pulls in the ops of every type from libtinyfs.a,
 * so no program gets weaker validation than another.  (They were weak
 * references once: a program that did not pull in the POSIX objects
 * itself validated inodes by size only.)  Only `cookie` is opaque by
 * design: the generic checks and hex.
 */
#include "fs/bkey.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_format.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* --- names --- */

static const char *const btree_id_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_BTREE_IDS(x)
#undef x
};

static const char *const bkey_type_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_BKEY_TYPES(x)
#undef x
};

const char *tfs_btree_id_str(unsigned id)
{
	return id < ARRAY_SIZE(btree_id_names) ? btree_id_names[id] : NULL;
}

const char *tfs_bkey_type_str(unsigned type)
{
	return type < ARRAY_SIZE(bkey_type_names) ? bkey_type_names[type] : NULL;
}

int tfs_btree_id_parse(const char *name)
{
	for (unsigned i = 0; i < ARRAY_SIZE(btree_id_names); i++)
		if (btree_id_names[i] && !strcmp(name, btree_id_names[i]))
			return (int)i;
	return -1;
}

/* --- positions --- */

void tfs_bpos_to_text(struct printbuf *out, struct tfs_bpos pos)
{
	if (tfs_bpos_eq(pos, TFS_POS_MAX))
		prt_str(out, "POS_MAX");
	else
		prt_printf(out, "%llu:%llu", (unsigned long long)pos.inode,
			   (unsigned long long)pos.offset);
}

/* A decimal u64, nothing else (no sign, no spaces, no base prefix). */
static int parse_u64_dec(const char *s, size_t len, u64 *v)
{
	u64 r = 0;

	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (r > (UINT64_MAX - d) / 10)
			return -EINVAL;
		r = r * 10 + d;
	}
	*v = r;
	return 0;
}

int tfs_bpos_parse(const char *s, struct tfs_bpos *pos)
{
	const char *colon;
	u64 a, b = 0;

	if (!s)
		return -EINVAL;
	if (!strcmp(s, "POS_MIN")) {
		*pos = TFS_POS_MIN;
		return 0;
	}
	if (!strcmp(s, "POS_MAX")) {
		*pos = TFS_POS_MAX;
		return 0;
	}
	colon = strchr(s, ':');
	if (colon) {
		if (parse_u64_dec(s, colon - s, &a) ||
		    parse_u64_dec(colon + 1, strlen(colon + 1), &b))
			return -EINVAL;
	} else if (parse_u64_dec(s, strlen(s), &a)) {
		return -EINVAL;
	}
	*pos = TFS_POS(a, b);
	return 0;
}

/* --- building keys --- */

void *tfs_bkey_init(struct tfs_bkey_buf *buf, enum tfs_bkey_type type, struct tfs_bpos pos,
		    size_t val_bytes)
{
	size_t words = DIV_ROUND_UP(val_bytes, 8);

	if (val_bytes > TFS_BKEY_MAX_VAL_BYTES)
		return NULL;
	memset(buf, 0, sizeof(struct tfs_bkey) + words * 8);
	buf->k.u64s = cpu_to_le16((u16)(TFS_BKEY_U64s + words));
	buf->k.type = (u8)type;
	tfs_bkey_set_pos(&buf->k, pos);
	return tfs_bkey_val(&buf->k);
}

/* --- the engine's types --- */

static int deleted_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	if (tfs_bkey_val_bytes(k)) {
		prt_printf(err, "value of %zu bytes (none allowed)", tfs_bkey_val_bytes(k));
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static void deleted_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
}

static const struct tfs_bkey_ops bkey_ops_deleted = {
	.validate = deleted_validate,
	.val_to_text = deleted_val_to_text,
};

static int btree_ptr_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_btree_ptr *p = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k);

	if (bytes < sizeof(*p)) {
		prt_printf(err, "value of %zu bytes < %zu", bytes, sizeof(*p));
		return -TFS_ERR_bkey_invalid;
	}
	if (!p->nr_ptrs || p->nr_ptrs > TFS_BTREE_PTR_MAX_REPLICAS) {
		prt_printf(err, "nr_ptrs %u not in 1..%u", p->nr_ptrs, TFS_BTREE_PTR_MAX_REPLICAS);
		return -TFS_ERR_bkey_invalid;
	}
	if (bytes != tfs_btree_ptr_val_bytes(p->nr_ptrs)) {
		prt_printf(err, "value of %zu bytes for %u pointers (%zu expected)", bytes,
			   p->nr_ptrs, tfs_btree_ptr_val_bytes(p->nr_ptrs));
		return -TFS_ERR_bkey_invalid;
	}
	if (p->pad) {
		prt_str(err, "pad not zero");
		return -TFS_ERR_bkey_invalid;
	}
	if (p->level >= TFS_BTREE_MAX_DEPTH - 1) {
		prt_printf(err, "child level %u >= %u", p->level, TFS_BTREE_MAX_DEPTH - 1);
		return -TFS_ERR_bkey_invalid;
	}
	for (unsigned i = 0; i < p->nr_ptrs; i++) {
		if (p->ptrs[i].pad) {
			prt_printf(err, "pointer %u: pad not zero", i);
			return -TFS_ERR_bkey_invalid;
		}
		for (unsigned j = 0; j < i; j++)
			if (p->ptrs[j].dev == p->ptrs[i].dev) {
				prt_printf(err, "pointers %u and %u on the same member %u", j, i,
					   le32_to_cpu(p->ptrs[i].dev));
				return -TFS_ERR_bkey_invalid;
			}
	}
	return 0;
}

static void btree_ptr_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_btree_ptr *p = tfs_bkey_val(k);

	if (tfs_bkey_val_bytes(k) < sizeof(*p)) {
		prt_str(out, "(short)");
		return;
	}
	prt_printf(out, "level %u seq %llx csum %08x", p->level,
		   (unsigned long long)le64_to_cpu(p->seq), le32_to_cpu(p->csum));
	for (unsigned i = 0; i < p->nr_ptrs && i < TFS_BTREE_PTR_MAX_REPLICAS &&
			     sizeof(*p) + (i + 1) * sizeof(p->ptrs[0]) <= tfs_bkey_val_bytes(k);
	     i++)
		prt_printf(out, " %s%u:0x%llx", i ? "" : "ptrs ", le32_to_cpu(p->ptrs[i].dev),
			   (unsigned long long)le64_to_cpu(p->ptrs[i].offset));
}

static const struct tfs_bkey_ops bkey_ops_btree_ptr = {
	.validate = btree_ptr_validate,
	.val_to_text = btree_ptr_val_to_text,
};

/* The filesystem's types: defined in the file owning each type (strong references). */
extern const struct tfs_bkey_ops tfs_bkey_ops_inode;
extern const struct tfs_bkey_ops tfs_bkey_ops_dirent;
extern const struct tfs_bkey_ops tfs_bkey_ops_extent;
extern const struct tfs_bkey_ops tfs_bkey_ops_xattr;
extern const struct tfs_bkey_ops tfs_bkey_ops_alloc;
extern const struct tfs_bkey_ops tfs_bkey_ops_orphan;
extern const struct tfs_bkey_ops tfs_bkey_ops_inline_data;
extern const struct tfs_bkey_ops tfs_bkey_ops_accounting;

/* Every key type's ops, by type; NULL only for the opaque cookie. */
static const struct tfs_bkey_ops *const bkey_ops_table[] = {
	[TFS_BKEY_deleted] = &bkey_ops_deleted,
	[TFS_BKEY_btree_ptr] = &bkey_ops_btree_ptr,
	[TFS_BKEY_inode] = &tfs_bkey_ops_inode,
	[TFS_BKEY_dirent] = &tfs_bkey_ops_dirent,
	[TFS_BKEY_extent] = &tfs_bkey_ops_extent,
	[TFS_BKEY_xattr] = &tfs_bkey_ops_xattr,
	[TFS_BKEY_alloc] = &tfs_bkey_ops_alloc,
	[TFS_BKEY_orphan] = &tfs_bkey_ops_orphan,
	[TFS_BKEY_inline_data] = &tfs_bkey_ops_inline_data,
	[TFS_BKEY_cookie] = NULL,
	[TFS_BKEY_accounting] = &tfs_bkey_ops_accounting,
};
_Static_assert(ARRAY_SIZE(bkey_ops_table) == TFS_BKEY_TYPE_NR,
	       "every key type needs an entry in bkey_ops_table");

static const struct tfs_bkey_ops *bkey_ops(unsigned type)
{
	return type < ARRAY_SIZE(bkey_ops_table) ? bkey_ops_table[type] : NULL;
}

bool tfs_bkey_type_has_ops(unsigned type)
{
	const struct tfs_bkey_ops *ops = bkey_ops(type);

	return ops && ops->validate && ops->val_to_text;
}

/* Leaf key types each btree holds (btree_ptr is allowed in interior nodes of any). */
static unsigned btree_allowed_types(enum tfs_btree_id id)
{
	switch (id) {
	case TFS_BTREE_inodes:
		return 1U << TFS_BKEY_inode;
	case TFS_BTREE_dirents:
		return 1U << TFS_BKEY_dirent;
	case TFS_BTREE_extents:
		return 1U << TFS_BKEY_extent | 1U << TFS_BKEY_inline_data;
	case TFS_BTREE_xattrs:
		return 1U << TFS_BKEY_xattr;
	case TFS_BTREE_alloc:
		return 1U << TFS_BKEY_alloc | 1U << TFS_BKEY_accounting;
	case TFS_BTREE_orphans:
		return 1U << TFS_BKEY_orphan;
	case TFS_BTREE_NR:
		return 0;
	}
	return 0;
}

/* "dirent 4096:77: " */
static void bkey_err_prefix(struct printbuf *err, const struct tfs_bkey *k)
{
	const char *t = tfs_bkey_type_str(k->type);

	if (t)
		prt_str(err, t);
	else
		prt_printf(err, "type %u", k->type);
	prt_char(err, ' ');
	tfs_bpos_to_text(err, tfs_bkey_pos(k));
	prt_str(err, ": ");
}

int tfs_bkey_validate(const struct tfs_bkey *k, size_t max_bytes, enum tfs_btree_id btree_id,
		      bool allowed_deleted, struct printbuf *err)
{
	const struct tfs_bkey_ops *ops;
	unsigned u64s;
	int ret;

	if (max_bytes < sizeof(struct tfs_bkey)) {
		prt_printf(err, "key header of %zu bytes cut short (%zu left)",
			   sizeof(struct tfs_bkey), max_bytes);
		return -TFS_ERR_bkey_invalid;
	}
	u64s = tfs_bkey_u64s(k);
	if (u64s < TFS_BKEY_U64s || (size_t)u64s * 8 > max_bytes || u64s > TFS_BKEY_MAX_U64s) {
		bkey_err_prefix(err, k);
		prt_printf(err, "u64s %u not in %zu..%zu", u64s, (size_t)TFS_BKEY_U64s,
			   min_t(size_t, max_bytes / 8, TFS_BKEY_MAX_U64s));
		return -TFS_ERR_bkey_invalid;
	}
	if (k->pad0 || k->pad1) {
		bkey_err_prefix(err, k);
		prt_str(err, "header pad not zero");
		return -TFS_ERR_bkey_invalid;
	}
	if (btree_id >= TFS_BTREE_NR) {
		bkey_err_prefix(err, k);
		prt_printf(err, "unknown btree %u", btree_id);
		return -TFS_ERR_bkey_invalid;
	}
	ops = bkey_ops(k->type);
	if (!tfs_bkey_type_str(k->type)) {
		bkey_err_prefix(err, k);
		prt_str(err, "unknown key type");
		return -TFS_ERR_bkey_invalid;
	}
	if (k->type == TFS_BKEY_deleted
		    ? !allowed_deleted
		    : k->type != TFS_BKEY_btree_ptr && k->type != TFS_BKEY_cookie &&
			      !(btree_allowed_types(btree_id) & (1U << k->type))) {
		bkey_err_prefix(err, k);
		prt_printf(err, "type not allowed in btree %s", tfs_btree_id_str(btree_id));
		return -TFS_ERR_bkey_invalid;
	}
	if (ops && ops->validate) {
		struct printbuf why = PRINTBUF;

		ret = ops->validate(k, &why);
		if (ret) {
			bkey_err_prefix(err, k);
			prt_str(err, printbuf_str(&why));
		}
		printbuf_exit(&why);
		return ret ? -TFS_ERR_bkey_invalid : 0;
	}
	return 0;
}

void tfs_bkey_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_bkey_ops *ops = bkey_ops(k->type);
	const char *t = tfs_bkey_type_str(k->type);

	if (t)
		prt_str(out, t);
	else
		prt_printf(out, "type %u", k->type);
	prt_char(out, ' ');
	tfs_bpos_to_text(out, tfs_bkey_pos(k));
	prt_printf(out, " u64s %u", tfs_bkey_u64s(k));
	if (tfs_bkey_u64s(k) < TFS_BKEY_U64s) {
		prt_str(out, " (too small)");
		return;
	}
	if (k->type == TFS_BKEY_deleted && !tfs_bkey_val_bytes(k))
		return;
	prt_str(out, ": ");
	if (ops && ops->val_to_text)
		ops->val_to_text(out, k);
	else
		prt_hex_bytes(out, tfs_bkey_val(k), tfs_bkey_val_bytes(k), 8, ' ');
}
