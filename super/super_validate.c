// SPDX-License-Identifier: GPL-2.0
/*
 * Superblock validation: every field, in the order of the struct, with one
 * precise line for the first failure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/super.h"

#define fail(code, ...)                       \
	({                                    \
		prt_printf(err, __VA_ARGS__); \
		-TFS_ERR_##code;              \
	})

typedef unsigned long long ull;

/* Index of the first nonzero byte of p[0..len), or -1. */
static int first_nonzero(const u8 *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return (int)i;
	return -1;
}

/*
 * Fails with `code` when a byte of s->field is not zero: padding and
 * reserved bytes must be zero so a later version can give them a meaning
 * (an incompatible feature) that older readers refuse.  The offset is the
 * byte's within *s (the tables of docs/on-disk-format.md).
 */
#define check_zero(code, s, field, fmt, ...)                                                       \
	do {                                                                                       \
		size_t _off = offsetof(typeof(*(s)), field);                                       \
		int _i = first_nonzero((const u8 *)(s) + _off, sizeof((s)->field));                \
                                                                                                   \
		if (_i >= 0)                                                                       \
			return fail(code, fmt #field " byte %d (offset %zu) is 0x%02x, must be 0", \
				    ##__VA_ARGS__, _i, _off + _i, ((const u8 *)(s))[_off + _i]);   \
	} while (0)

static bool uuid_is_zero(const u8 *u)
{
	for (unsigned i = 0; i < 16; i++)
		if (u[i])
			return false;
	return true;
}

int tfs_label_bad_byte(const char *label, size_t len)
{
	const unsigned char *p = (const unsigned char *)label;

	for (size_t i = 0; i < len;) {
		unsigned c = p[i], n, cp;

		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return (int)i;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return (int)i;
		if (len - i <= n)
			return (int)i;
		for (unsigned k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return (int)i;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		/* Overlong, surrogates, past U+10FFFF, and the C1 controls. */
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
			return (int)i;
		i += n + 1;
	}
	return -1;
}

/* Index of the first bad byte in a label field, or -1. */
static int label_bad_char(const char *label, size_t size)
{
	size_t len = tfs_strnlen_field(label, size);
	int bad = tfs_label_bad_byte(label, len);

	if (bad >= 0)
		return bad;
	/* Bytes after the NUL must be zero too, so copies compare equal. */
	for (size_t i = len; i < size; i++)
		if (label[i])
			return (int)i;
	return -1;
}

int tfs_sb_layout_validate(const struct tfs_sb_layout *l, struct printbuf *err)
{
	if (le64_to_cpu(l->magic) != TFS_SB_LAYOUT_MAGIC)
		return fail(invalid_sb_layout, "layout: bad magic 0x%016llx (expected 0x%016llx)",
			    (ull)le64_to_cpu(l->magic), (ull)TFS_SB_LAYOUT_MAGIC);
	if (le32_to_cpu(l->csum) != tfs_sb_layout_csum(l))
		return fail(invalid_sb_layout, "layout: checksum 0x%08x, computed 0x%08x",
			    le32_to_cpu(l->csum), tfs_sb_layout_csum(l));
	check_zero(invalid_sb_layout, l, pad0, "layout: ");
	if (l->version != TFS_SB_LAYOUT_VERSION)
		return fail(invalid_sb_layout, "layout: version %u, expected %u", l->version,
			    TFS_SB_LAYOUT_VERSION);

	u32 max = le32_to_cpu(l->sb_max_size);

	if (!IS_POWER_OF_2(max) || max < TFS_SB_MAX_SIZE_MIN || max > TFS_SB_MAX_SIZE_MAX)
		return fail(invalid_sb_layout,
			    "layout: sb_max_size %u is not a power of two in [%u, %u]", max,
			    TFS_SB_MAX_SIZE_MIN, TFS_SB_MAX_SIZE_MAX);
	if (!l->nr_superblocks || l->nr_superblocks > TFS_SB_LAYOUT_MAX_COPIES)
		return fail(invalid_sb_layout, "layout: nr_superblocks %u not in [1, %u]",
			    l->nr_superblocks, TFS_SB_LAYOUT_MAX_COPIES);
	check_zero(invalid_sb_layout, l, pad1, "layout: ");
	if (le64_to_cpu(l->sb_offset[0]) != TFS_SB_OFFSET)
		return fail(invalid_sb_layout, "layout: primary at %llu, not %u",
			    (ull)le64_to_cpu(l->sb_offset[0]), TFS_SB_OFFSET);
	for (unsigned i = 1; i < l->nr_superblocks; i++) {
		u64 prev = le64_to_cpu(l->sb_offset[i - 1]), off = le64_to_cpu(l->sb_offset[i]);

		if (off % 4096)
			return fail(invalid_sb_layout,
				    "layout: copy %u at %llu is not 4 KiB aligned", i, (ull)off);
		/* No sum below wraps: every end of a copy is checked first. */
		if (off > UINT64_MAX - max)
			return fail(invalid_sb_layout,
				    "layout: copy %u at %llu (max size %u) ends past 2^64", i,
				    (ull)off, max);
		/* prev + max does not wrap: prev passed the check above. */
		if (off < prev + max)
			return fail(
				invalid_sb_layout,
				"layout: copy %u at %llu overlaps copy %u at %llu (max size %u)", i,
				(ull)off, i - 1, (ull)prev, max);
	}
	for (unsigned i = l->nr_superblocks; i < TFS_SB_LAYOUT_MAX_COPIES; i++)
		if (l->sb_offset[i])
			return fail(invalid_sb_layout, "layout: unused offset %u is %llu, not 0", i,
				    (ull)le64_to_cpu(l->sb_offset[i]));
	if (uuid_is_zero(l->uuid))
		return fail(invalid_sb_layout, "layout: uuid is zero");
	check_zero(invalid_sb_layout, l, pad2, "layout: ");
	return 0;
}

static int validate_members(const struct tfs_sb *sb, const struct tfs_sb_field *f, u64 dev_size,
			    struct printbuf *err)
{
	const struct tfs_sb_field_members *mf = (const void *)f;
	unsigned bytes = le32_to_cpu(f->u64s) * 8;
	unsigned mb = le16_to_cpu(mf->member_bytes);
	u32 block_size = le32_to_cpu(sb->block_size);
	u64 sb_end = le64_to_cpu(sb->layout.sb_offset[sb->layout.nr_superblocks - 1]) +
		     le32_to_cpu(sb->layout.sb_max_size);

	if (bytes < sizeof(*mf))
		return fail(invalid_sb_members,
			    "members: field of %u bytes, smaller than its header", bytes);
	if (mb < sizeof(struct tfs_member) || mb % 8)
		return fail(invalid_sb_members,
			    "members: member_bytes %u is not a multiple of 8 of at least %zu", mb,
			    sizeof(struct tfs_member));
	check_zero(invalid_sb_members, mf, pad0, "members: ");
	check_zero(invalid_sb_members, mf, pad1, "members: ");

	unsigned nr = (bytes - (unsigned)sizeof(*mf)) / mb;

	if (nr != sb->nr_devices)
		return fail(invalid_sb_members, "members: %u entries but nr_devices %u", nr,
			    sb->nr_devices);

	for (unsigned i = 0; i < nr; i++) {
		const struct tfs_member *m =
			(const void *)((const u8 *)mf->members + (size_t)i * mb);
		u64 nbuckets = le64_to_cpu(m->nbuckets), first = le64_to_cpu(m->first_bucket);
		u32 bs = le32_to_cpu(m->bucket_size);
		int bad;

		if (uuid_is_zero(m->uuid))
			return fail(invalid_sb_members, "member %u: uuid is zero", i);
		for (unsigned j = 0; j < i; j++) {
			const struct tfs_member *o =
				(const void *)((const u8 *)mf->members + (size_t)j * mb);

			if (!memcmp(o->uuid, m->uuid, 16))
				return fail(invalid_sb_members, "member %u: same uuid as member %u",
					    i, j);
		}
		if (!IS_POWER_OF_2(bs) || bs > TFS_BUCKET_SIZE_MAX)
			return fail(invalid_sb_members,
				    "member %u: bucket_size %u is not a power of two up to %u", i,
				    bs, TFS_BUCKET_SIZE_MAX);
		if (bs < block_size)
			return fail(invalid_sb_members, "member %u: bucket_size %u < block_size %u",
				    i, bs, block_size);
		/* Nodes never cross a bucket. */
		if (bs % le32_to_cpu(sb->btree_node_size))
			return fail(
				invalid_sb_members,
				"member %u: bucket_size %u is not a multiple of btree_node_size %u",
				i, bs, le32_to_cpu(sb->btree_node_size));
		if (first >= nbuckets)
			return fail(invalid_sb_members,
				    "member %u: first_bucket %llu >= nbuckets %llu", i, (ull)first,
				    (ull)nbuckets);
		if (nbuckets - first < TFS_MIN_BUCKETS)
			return fail(invalid_sb_members,
				    "member %u: %llu buckets after first_bucket, fewer than %u", i,
				    (ull)(nbuckets - first), TFS_MIN_BUCKETS);
		if (nbuckets > UINT64_MAX / bs)
			return fail(invalid_sb_members, "member %u: nbuckets %llu overflows", i,
				    (ull)nbuckets);
		if (m->state >= TFS_MEMBER_STATE_NR)
			return fail(invalid_sb_members, "member %u: state %u unknown", i, m->state);
		if (m->durability > TFS_MAX_DURABILITY)
			return fail(invalid_sb_members, "member %u: durability %u > %u", i,
				    m->durability, TFS_MAX_DURABILITY);
		if (m->discard > 1)
			return fail(invalid_sb_members, "member %u: discard %u is not 0 or 1", i,
				    m->discard);
		check_zero(invalid_sb_members, m, pad0, "member %u: ", i);
		bad = label_bad_char(m->label, sizeof(m->label));
		if (bad >= 0)
			return fail(invalid_sb_members, "member %u: label: bad byte 0x%02x at %d",
				    i, (u8)m->label[bad], bad);
		if (i != sb->dev_idx)
			continue;
		/* Only this device's layout is known here. */
		if (first * bs < sb_end)
			return fail(
				invalid_sb_members,
				"member %u: first_bucket %llu starts at %llu, inside the superblock area (ends at %llu)",
				i, (ull)first, (ull)(first * bs), (ull)sb_end);
		if (dev_size && nbuckets * bs > dev_size) {
			prt_printf(err, "member %u: %llu buckets of ", i, (ull)nbuckets);
			prt_units_u64(err, bs);
			prt_printf(err, " (");
			prt_units_u64_vs(err, nbuckets * bs, dev_size);
			prt_printf(err, ") do not fit in the device (");
			prt_units_u64_vs(err, dev_size, nbuckets * bs);
			prt_printf(err, ")");
			return -TFS_ERR_invalid_sb_device_size;
		}
	}
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	u64 x = le64_to_cpu(((const struct tfs_journal_bucket_range *)a)->start);
	u64 y = le64_to_cpu(((const struct tfs_journal_bucket_range *)b)->start);

	return x < y ? -1 : x > y;
}

static int validate_journal(const struct tfs_sb *sb, const struct tfs_sb_field *f,
			    struct printbuf *err)
{
	const struct tfs_sb_field_journal *j = (const void *)f;
	const struct tfs_member *m = tfs_sb_this_member(sb);
	unsigned u64s = le32_to_cpu(f->u64s), nr = tfs_sb_journal_nr_ranges(j);
	u64 first = le64_to_cpu(m->first_bucket), nbuckets = le64_to_cpu(m->nbuckets), total = 0;
	struct tfs_journal_bucket_range *sorted;
	int ret = 0;

	if (u64s < 3 || (u64s - 1) % 2)
		return fail(
			invalid_sb_journal,
			"journal: field of %u u64s is not a header and whole ranges (2 u64s each)",
			u64s);
	for (unsigned i = 0; i < nr; i++) {
		u64 start = le64_to_cpu(j->ranges[i].start), n = le64_to_cpu(j->ranges[i].nr);

		if (!n)
			return fail(invalid_sb_journal,
				    "journal: range %u (at bucket %llu) is empty", i, (ull)start);
		if (start < first)
			return fail(
				invalid_sb_journal,
				"journal: range %u (buckets %llu..) starts below first_bucket %llu",
				i, (ull)start, (ull)first);
		/* start < nbuckets first, so nbuckets - start does not wrap. */
		if (start >= nbuckets || n > nbuckets - start)
			return fail(
				invalid_sb_journal,
				"journal: range %u (%llu buckets at %llu) ends past nbuckets %llu",
				i, (ull)n, (ull)start, (ull)nbuckets);
		/* Each range fits in nbuckets: the sum cannot wrap before this. */
		total += n;
		if (total > TFS_JOURNAL_MAX_BUCKETS)
			return fail(invalid_sb_journal, "journal: more than %u buckets",
				    TFS_JOURNAL_MAX_BUCKETS);
	}
	/* The same minimum mkfs enforces (super/format.c). */
	if (total < TFS_JOURNAL_MIN_BUCKETS)
		return fail(invalid_sb_journal, "journal: %llu buckets, fewer than %u", (ull)total,
			    TFS_JOURNAL_MIN_BUCKETS);
	sorted = malloc(sizeof(*sorted) * nr);
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, j->ranges, sizeof(*sorted) * nr);
	qsort(sorted, nr, sizeof(*sorted), cmp_range);
	for (unsigned i = 1; i < nr; i++) {
		u64 prev_end = le64_to_cpu(sorted[i - 1].start) + le64_to_cpu(sorted[i - 1].nr);

		if (le64_to_cpu(sorted[i].start) < prev_end) {
			ret = fail(invalid_sb_journal, "journal: bucket %llu listed twice",
				   (ull)le64_to_cpu(sorted[i].start));
			break;
		}
	}
	free(sorted);
	return ret;
}

static int validate_clean(const struct tfs_sb *sb, const struct tfs_sb_field *f,
			  struct printbuf *err)
{
	const struct tfs_sb_field_clean *c = (const void *)f;
	unsigned u64s = le32_to_cpu(f->u64s);
	unsigned pos = sizeof(*c) / 8, idx = 0;

	if (u64s < sizeof(*c) / 8)
		return fail(invalid_sb_clean, "clean: field of %u bytes, smaller than its header",
			    u64s * 8);
	check_zero(invalid_sb_clean, c, pad0, "clean: ");
	while (pos < u64s) {
		const struct tfs_clean_entry *e = (const void *)((const __le64 *)c + pos);
		unsigned eu = le16_to_cpu(e->u64s);

		if (!eu)
			return fail(invalid_sb_clean, "clean: entry %u has u64s 0", idx);
		if (pos + eu > u64s)
			return fail(invalid_sb_clean,
				    "clean: entry %u (%u u64s) runs past the field", idx, eu);
		check_zero(invalid_sb_clean, e, pad, "clean: entry %u: ", idx);
		pos += eu;
		idx++;
	}
	return 0;
}

int tfs_sb_validate(const struct tfs_sb *sb, size_t bytes, u64 dev_size, struct printbuf *err)
{
	int bad, ret;

	if (bytes < sizeof(*sb))
		return fail(invalid_sb_size, "%zu bytes, smaller than the fixed part (%zu)", bytes,
			    sizeof(*sb));
	if (le64_to_cpu(sb->magic) != TFS_SB_MAGIC)
		return fail(invalid_sb_magic, "bad magic 0x%016llx (expected 0x%016llx)",
			    (ull)le64_to_cpu(sb->magic), (ull)TFS_SB_MAGIC);
	if (le32_to_cpu(sb->csum_type) != TFS_CSUM_crc32c)
		return fail(invalid_sb_csum_type, "csum_type %u: only crc32c (%u) is used here",
			    le32_to_cpu(sb->csum_type), TFS_CSUM_crc32c);
	if (tfs_sb_bytes(sb) > bytes)
		return fail(invalid_sb_size,
			    "u64s %u: fields end at %zu, past the copy's %zu bytes",
			    le32_to_cpu(sb->u64s), tfs_sb_bytes(sb), bytes);
	if (le32_to_cpu(sb->csum) != tfs_sb_csum(sb))
		return fail(invalid_sb_csum, "checksum 0x%08x, computed 0x%08x",
			    le32_to_cpu(sb->csum), tfs_sb_csum(sb));

	u16 version = le16_to_cpu(sb->version), version_min = le16_to_cpu(sb->version_min);

	if (version < TFS_SB_VERSION_MIN || version > TFS_SB_VERSION_CURRENT)
		return fail(invalid_sb_version, "version %u: this build reads %u to %u", version,
			    TFS_SB_VERSION_MIN, TFS_SB_VERSION_CURRENT);
	if (version_min > version || version_min < TFS_SB_VERSION_MIN)
		return fail(invalid_sb_version, "version_min %u not in [%u, version %u]",
			    version_min, TFS_SB_VERSION_MIN, version);
	if (sb->features)
		return fail(invalid_sb_version, "unknown incompatible features 0x%llx",
			    (ull)le64_to_cpu(sb->features));
	/* Like features: what a later version may use, refused until then. */
	check_zero(invalid_sb_version, sb, reserved, "");

	ret = tfs_sb_layout_validate(&sb->layout, err);
	if (ret)
		return ret;
	if (dev_size) {
		unsigned last = sb->layout.nr_superblocks - 1;
		u64 off = le64_to_cpu(sb->layout.sb_offset[last]);
		u32 max = le32_to_cpu(sb->layout.sb_max_size);

		if (off + max > dev_size)
			return fail(
				invalid_sb_layout,
				"layout: copy %u at %llu (max size %u) ends past the device (%llu bytes)",
				last, (ull)off, max, (ull)dev_size);
	}
	if (tfs_sb_bytes(sb) > le32_to_cpu(sb->layout.sb_max_size))
		return fail(invalid_sb_size, "%zu bytes, more than the layout's sb_max_size %u",
			    tfs_sb_bytes(sb), le32_to_cpu(sb->layout.sb_max_size));

	if (uuid_is_zero(sb->uuid))
		return fail(invalid_sb_uuid, "uuid is zero");
	if (uuid_is_zero(sb->user_uuid))
		return fail(invalid_sb_uuid, "user_uuid is zero");
	/* The layout names the filesystem its copies belong to: this one. */
	if (memcmp(sb->layout.uuid, sb->uuid, 16)) {
		prt_str(err, "layout: uuid ");
		prt_uuid(err, sb->layout.uuid);
		prt_str(err, " differs from the superblock's uuid ");
		prt_uuid(err, sb->uuid);
		return -TFS_ERR_invalid_sb_layout;
	}
	bad = label_bad_char(sb->label, sizeof(sb->label));
	if (bad >= 0)
		return fail(invalid_sb_label, "label: bad byte 0x%02x at %d", (u8)sb->label[bad],
			    bad);

	u32 block_size = le32_to_cpu(sb->block_size);

	if (!IS_POWER_OF_2(block_size) || block_size < TFS_BLOCK_SIZE_MIN ||
	    block_size > TFS_BLOCK_SIZE_MAX)
		return fail(invalid_sb_block_size,
			    "block_size %u is not a power of two in [%u, %u]", block_size,
			    TFS_BLOCK_SIZE_MIN, TFS_BLOCK_SIZE_MAX);

	u32 node = le32_to_cpu(sb->btree_node_size);

	if (!IS_POWER_OF_2(node) || node < TFS_BTREE_NODE_SIZE_MIN ||
	    node > TFS_BTREE_NODE_SIZE_MAX)
		return fail(invalid_sb_btree_node_size,
			    "btree_node_size %u is not a power of two in [%u, %u]", node,
			    TFS_BTREE_NODE_SIZE_MIN, TFS_BTREE_NODE_SIZE_MAX);
	if (node < block_size)
		return fail(invalid_sb_btree_node_size, "btree_node_size %u < block_size %u", node,
			    block_size);
	check_zero(invalid_sb_btree_node_size, sb, pad1, "");

	if (!sb->nr_devices || sb->nr_devices > TFS_MAX_DEVICES)
		return fail(invalid_sb_nr_devices, "nr_devices %u not in [1, %u]", sb->nr_devices,
			    TFS_MAX_DEVICES);
	if (sb->dev_idx >= sb->nr_devices)
		return fail(invalid_sb_dev_idx, "dev_idx %u >= nr_devices %u", sb->dev_idx,
			    sb->nr_devices);

	struct {
		const char *name;
		u8 want, req;
	} reps[] = {
		{ "metadata", sb->metadata_replicas, sb->metadata_replicas_required },
		{ "data", sb->data_replicas, sb->data_replicas_required },
	};

	for (unsigned i = 0; i < ARRAY_SIZE(reps); i++) {
		if (!reps[i].want || reps[i].want > TFS_MAX_REPLICAS)
			return fail(invalid_sb_options, "%s_replicas %u not in [1, %u]",
				    reps[i].name, reps[i].want, TFS_MAX_REPLICAS);
		if (!reps[i].req || reps[i].req > reps[i].want)
			return fail(invalid_sb_options,
				    "%s_replicas_required %u not in [1, %s_replicas %u]",
				    reps[i].name, reps[i].req, reps[i].name, reps[i].want);
		if (reps[i].req > sb->nr_devices)
			return fail(invalid_sb_options, "%s_replicas_required %u > nr_devices %u",
				    reps[i].name, reps[i].req, sb->nr_devices);
	}
	if (!tfs_csum_type_str(sb->metadata_csum_type))
		return fail(invalid_sb_options, "metadata_csum_type %u unknown",
			    sb->metadata_csum_type);
	if (!tfs_csum_type_str(sb->data_csum_type))
		return fail(invalid_sb_options, "data_csum_type %u unknown", sb->data_csum_type);
	if (sb->error_action >= TFS_ON_ERROR_NR)
		return fail(invalid_sb_options, "error_action %u unknown", sb->error_action);
	check_zero(invalid_sb_options, sb, pad0, "");
	if (le16_to_cpu(sb->flags) & ~TFS_SB_FLAG_CLEAN)
		return fail(invalid_sb_options, "unknown flags 0x%x", le16_to_cpu(sb->flags));

	/* Fields: well formed first, then each by type. */
	const __le64 *p = sb->_data, *end = sb->_data + le32_to_cpu(sb->u64s);
	unsigned seen = 0, idx = 0;

	while (p < end) {
		const struct tfs_sb_field *f = (const void *)p;
		unsigned u64s, type;

		if (end - p < 1)
			break;
		u64s = le32_to_cpu(f->u64s);
		type = le32_to_cpu(f->type);
		if (!u64s)
			return fail(invalid_sb_field, "field %u: u64s 0", idx);
		if (u64s > (size_t)(end - p))
			return fail(invalid_sb_field, "field %u (%s): %u u64s run past the end",
				    idx, tfs_sb_field_type_str(type) ?: "unknown", u64s);
		/*
		 * One rule: each known type at most once; fields of unknown
		 * types are skipped, any number of each (a later version
		 * says what they may repeat).
		 */
		if (tfs_sb_field_type_str(type)) {
			if (seen & (1U << type))
				return fail(invalid_sb_field, "field %u: a second %s field", idx,
					    tfs_sb_field_type_str(type));
			seen |= 1U << type;
		}
		p += u64s;
		idx++;
	}

	struct tfs_sb_field *f = tfs_sb_field_get(sb, TFS_SB_FIELD_members);

	if (!f)
		return fail(invalid_sb_members, "no members field");
	ret = validate_members(sb, f, dev_size, err);
	if (ret)
		return ret;

	f = tfs_sb_field_get(sb, TFS_SB_FIELD_journal);
	/*
	 * A rw member may be given metadata at any time, and metadata is
	 * journalled first: without a journal here there is nowhere to put it.
	 */
	if (!f && tfs_sb_this_member(sb)->state == TFS_MEMBER_rw)
		return fail(invalid_sb_journal, "journal: no journal field, but member %u is rw",
			    sb->dev_idx);
	if (f && (ret = validate_journal(sb, f, err)))
		return ret;

	f = tfs_sb_field_get(sb, TFS_SB_FIELD_clean);
	if (f && (ret = validate_clean(sb, f, err)))
		return ret;
	if ((le16_to_cpu(sb->flags) & TFS_SB_FLAG_CLEAN) && !f)
		return fail(invalid_sb_clean, "flag clean set but no clean field");
	return 0;
}
