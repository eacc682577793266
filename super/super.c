// SPDX-License-Identifier: GPL-2.0
/*
 * The superblock: names, reading every copy, fields, writing every copy.
 * Validation is in super_validate.c, text in super_to_text.c.
 */
#include "super/super.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

/* --- names --- */

static const char *const member_state_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_MEMBER_STATES(x)
#undef x
};
static const char *const error_action_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_ERROR_ACTIONS(x)
#undef x
};
static const char *const sb_field_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_SB_FIELDS(x)
#undef x
};
static const char *const clean_entry_names[] = {
#define x(n, nr) [nr] = #n,
	TFS_CLEAN_ENTRY_TYPES(x)
#undef x
};

static const char *name_lookup(const char *const *names, unsigned nr, unsigned v)
{
	return v < nr ? names[v] : NULL;
}

static int name_parse(const char *const *names, unsigned nr, const char *name)
{
	for (unsigned i = 0; i < nr; i++)
		if (names[i] && !strcmp(names[i], name))
			return (int)i;
	return -1;
}

const char *tfs_member_state_str(unsigned v)
{
	return name_lookup(member_state_names, ARRAY_SIZE(member_state_names), v);
}
const char *tfs_error_action_str(unsigned v)
{
	return name_lookup(error_action_names, ARRAY_SIZE(error_action_names), v);
}
const char *tfs_sb_field_type_str(unsigned v)
{
	return name_lookup(sb_field_names, ARRAY_SIZE(sb_field_names), v);
}
const char *tfs_clean_entry_type_str(unsigned v)
{
	return name_lookup(clean_entry_names, ARRAY_SIZE(clean_entry_names), v);
}
int tfs_member_state_parse(const char *name)
{
	return name_parse(member_state_names, ARRAY_SIZE(member_state_names), name);
}
int tfs_error_action_parse(const char *name)
{
	return name_parse(error_action_names, ARRAY_SIZE(error_action_names), name);
}
int tfs_sb_field_type_parse(const char *name)
{
	return name_parse(sb_field_names, ARRAY_SIZE(sb_field_names), name);
}

/* --- checksums --- */

u32 tfs_sb_csum(const struct tfs_sb *sb)
{
	size_t start = offsetof(struct tfs_sb, magic);

	return tfs_crc32c(0, (const u8 *)sb + start, tfs_sb_bytes(sb) - start);
}

u32 tfs_sb_layout_csum(const struct tfs_sb_layout *l)
{
	size_t start = offsetof(struct tfs_sb_layout, magic);

	return tfs_crc32c(0, (const u8 *)l + start, sizeof(*l) - start);
}

/* --- fields --- */

static struct tfs_sb_field *sb_fields_end(const struct tfs_sb *sb)
{
	return (struct tfs_sb_field *)((__le64 *)sb->_data + le32_to_cpu(sb->u64s));
}

static struct tfs_sb_field *sb_field_next(const struct tfs_sb_field *f)
{
	return (struct tfs_sb_field *)((__le64 *)f + le32_to_cpu(f->u64s));
}

struct tfs_sb_field *tfs_sb_field_get(const struct tfs_sb *sb, enum tfs_sb_field_type type)
{
	struct tfs_sb_field *end = sb_fields_end(sb);

	/* Never past the fields, even in a copy shown although invalid. */
	for (struct tfs_sb_field *f = (struct tfs_sb_field *)sb->_data;
	     f < end && f->u64s && le32_to_cpu(f->u64s) <= (u64)((__le64 *)end - (__le64 *)f);
	     f = sb_field_next(f))
		if (le32_to_cpu(f->type) == type)
			return f;
	return NULL;
}

struct tfs_member *tfs_sb_member(const struct tfs_sb *sb, unsigned idx)
{
	struct tfs_sb_field_members *mf = (void *)tfs_sb_field_get(sb, TFS_SB_FIELD_members);
	size_t mb = mf ? le16_to_cpu(mf->member_bytes) : 0;

	/* Within the field too: a shown invalid copy may say anything. */
	if (!mf || idx >= sb->nr_devices || mb < sizeof(struct tfs_member) || mb % 8 ||
	    le32_to_cpu(mf->field.u64s) * 8ULL < sizeof(*mf) + (idx + 1) * mb)
		return NULL;
	return (struct tfs_member *)((u8 *)mf->members + (size_t)idx * mb);
}

u32 tfs_sb_bucket_size(const struct tfs_sb *sb)
{
	struct tfs_member *m = tfs_sb_this_member(sb);

	return m ? le32_to_cpu(m->bucket_size) : 0;
}

struct tfs_sb_field_journal *tfs_sb_journal(const struct tfs_sb *sb)
{
	return (void *)tfs_sb_field_get(sb, TFS_SB_FIELD_journal);
}

unsigned tfs_sb_journal_nr_ranges(const struct tfs_sb_field_journal *j)
{
	return j ? (le32_to_cpu(j->field.u64s) - 1) / 2 : 0;
}

u64 tfs_sb_journal_nr_buckets(const struct tfs_sb *sb)
{
	const struct tfs_sb_field_journal *j = tfs_sb_journal(sb);
	u64 nr = 0;

	for (unsigned i = 0; i < tfs_sb_journal_nr_ranges(j); i++)
		nr += le64_to_cpu(j->ranges[i].nr);
	return nr;
}

int tfs_sb_journal_buckets(const struct tfs_sb *sb, u64 **buckets, unsigned *nr)
{
	const struct tfs_sb_field_journal *j = tfs_sb_journal(sb);
	u64 total = tfs_sb_journal_nr_buckets(sb), k = 0;

	*buckets = NULL;
	*nr = 0;
	if (!total)
		return 0;
	/* Validation bounds it by TFS_JOURNAL_MAX_BUCKETS: this is a guard. */
	if (total > TFS_JOURNAL_MAX_BUCKETS)
		return -TFS_ERR_invalid_sb_journal;
	*buckets = malloc(total * sizeof(u64));
	if (!*buckets)
		return -ENOMEM;
	for (unsigned i = 0; i < tfs_sb_journal_nr_ranges(j); i++)
		for (u64 b = 0; b < le64_to_cpu(j->ranges[i].nr); b++)
			(*buckets)[k++] = le64_to_cpu(j->ranges[i].start) + b;
	*nr = (unsigned)total;
	return 0;
}

struct tfs_sb_field_clean *tfs_sb_clean(const struct tfs_sb *sb)
{
	return (void *)tfs_sb_field_get(sb, TFS_SB_FIELD_clean);
}

struct tfs_sb_field *tfs_sb_field_resize(struct tfs_sb_handle *h, enum tfs_sb_field_type type,
					 unsigned u64s, int *ret)
{
	struct tfs_sb *sb = h->sb;
	struct tfs_sb_field *f = tfs_sb_field_get(sb, type);
	__le64 *end = (__le64 *)sb_fields_end(sb);
	unsigned old = f ? le32_to_cpu(f->u64s) : 0;
	u64 total = le32_to_cpu(sb->u64s) - old + u64s;

	*ret = 0;
	if (!f && !u64s)
		return NULL;
	if (sizeof(*sb) + 8 * total > h->sb_bytes) {
		*ret = -TFS_ERR_invalid_sb_size;
		return NULL;
	}
	if (!f)
		f = (struct tfs_sb_field *)end;

	__le64 *p = (__le64 *)f;

	memmove(p + u64s, p + old, (size_t)(end - (p + old)) * 8);
	if (u64s > old)
		memset(p + old, 0, (size_t)(u64s - old) * 8);
	sb->u64s = cpu_to_le32((u32)total);
	/* Keep everything past the fields zero (super_types.h). */
	__le64 *new_end = (__le64 *)sb_fields_end(sb);

	if (new_end < end)
		memset(new_end, 0, (size_t)(end - new_end) * 8);
	if (!u64s)
		return NULL;
	f->u64s = cpu_to_le32(u64s);
	f->type = cpu_to_le32(type);
	return f;
}

/* Runs of consecutive buckets in buckets[0..nr), each a range. */
static unsigned bucket_runs(const u64 *buckets, unsigned nr, struct tfs_journal_bucket_range *r)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nr;) {
		unsigned j = i;

		while (j + 1 < nr && buckets[j + 1] == buckets[j] + 1)
			j++;
		if (r) {
			r[n].start = cpu_to_le64(buckets[i]);
			r[n].nr = cpu_to_le64(j - i + 1);
		}
		n++;
		i = j + 1;
	}
	return n;
}

int tfs_sb_set_journal_buckets(struct tfs_sb_handle *h, const u64 *buckets, unsigned nr)
{
	int ret;
	struct tfs_sb_field_journal *j;
	unsigned ranges = bucket_runs(buckets, nr, NULL);

	/* 1 + 2 * ranges must not wrap, nor the field outgrow the copy. */
	if (ranges >= h->sb_bytes / 16)
		return -TFS_ERR_invalid_sb_size;
	j = (void *)tfs_sb_field_resize(h, TFS_SB_FIELD_journal, ranges ? 1 + 2 * ranges : 0, &ret);
	if (j)
		bucket_runs(buckets, nr, j->ranges);
	return ret;
}

int tfs_sb_set_clean(struct tfs_sb_handle *h, u64 journal_seq, const void *entries,
		     unsigned entries_u64s)
{
	int ret;
	unsigned u64s = sizeof(struct tfs_sb_field_clean) / 8 + entries_u64s;
	struct tfs_sb_field_clean *c;

	/* More than the copy holds (and u64s must not wrap). */
	if (entries_u64s >= h->sb_bytes / 8)
		return -TFS_ERR_invalid_sb_size;
	c = (void *)tfs_sb_field_resize(h, TFS_SB_FIELD_clean, u64s, &ret);
	if (!c)
		return ret;
	c->flags = 0;
	c->pad0 = 0;
	c->journal_seq = cpu_to_le64(journal_seq);
	if (entries_u64s)
		memcpy(c->entries, entries, (size_t)entries_u64s * 8);
	h->sb->flags = cpu_to_le16(le16_to_cpu(h->sb->flags) | TFS_SB_FLAG_CLEAN);
	return 0;
}

void tfs_sb_clear_clean(struct tfs_sb_handle *h)
{
	int ret;

	tfs_sb_field_resize(h, TFS_SB_FIELD_clean, 0, &ret);
	h->sb->flags = cpu_to_le16(le16_to_cpu(h->sb->flags) & ~TFS_SB_FLAG_CLEAN);
}

/* --- reading --- */

void tfs_sb_exit(struct tfs_sb_handle *h)
{
	for (unsigned i = 0; i < TFS_SB_LAYOUT_MAX_COPIES; i++)
		free(h->copies[i].why);
	free(h->sb);
	if (h->owns_bdev && h->bdev)
		tfs_bdev_close(h->bdev);
	memset(h, 0, sizeof(*h));
}

static unsigned bdev_lbs(const struct tfs_bdev *bdev)
{
	return bdev->logical_block_size ?: 512;
}

/*
 * Also the layout read falls back to when the layout sector is bad: whatever
 * destroyed it (a GPT over the first 17 KiB) may have taken the primary too,
 * and the backup must still be found.
 */
void tfs_sb_layout_init_default(struct tfs_sb_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->magic = cpu_to_le64(TFS_SB_LAYOUT_MAGIC);
	l->version = TFS_SB_LAYOUT_VERSION;
	l->nr_superblocks = 2;
	l->sb_max_size = cpu_to_le32(TFS_SB_MAX_SIZE_DEFAULT);
	l->sb_offset[0] = cpu_to_le64(TFS_SB_OFFSET);
	l->sb_offset[1] = cpu_to_le64(TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT);
	l->csum = cpu_to_le32(tfs_sb_layout_csum(l));
}

/*
 * Superblock I/O, synchronous and TFS_BIO_QUIET: a failure is reported once,
 * by the caller, in terms of the superblock (which copy, which offset).
 */
static int sb_io(struct tfs_bdev *bdev, enum tfs_bio_op op, void *buf, size_t len, u64 off)
{
	struct tfs_bio bio = {
		.bdev = bdev,
		.op = op,
		.flags = TFS_BIO_QUIET,
		.tag = TFS_TAG_sb,
		.offset = off,
		.buf = buf,
		.len = len,
	};

	return tfs_bio_submit_wait(&bio);
}

/* Reads [off, off + len) into a fresh aligned buffer. */
static int read_range(struct tfs_bdev *bdev, u64 off, size_t len, void **ret)
{
	void *buf = tfs_bdev_alloc_buf(bdev, len);
	int r;

	*ret = NULL;
	if (!buf)
		return -ENOMEM;
	r = sb_io(bdev, TFS_OP_read, buf, len, off);
	if (r) {
		free(buf);
		return r;
	}
	*ret = buf;
	return 0;
}

/*
 * Reads the copy at off into *ret (max_size bytes, zero past the copy's
 * end) and validates it.  The reason for a failure goes into err.
 */
static int read_copy(struct tfs_bdev *bdev, u64 off, u32 max_size, struct tfs_sb **ret,
		     struct printbuf *err)
{
	unsigned lbs = bdev_lbs(bdev);
	void *buf = NULL;
	int r;

	*ret = NULL;
	if (off >= bdev->size || bdev->size - off < sizeof(struct tfs_sb)) {
		prt_printf(err, "beyond the end of the device (");
		prt_units_u64(err, bdev->size);
		prt_printf(err, ")");
		return -TFS_ERR_sb_read;
	}
	size_t len = round_down(min_t(u64, max_size, bdev->size - off), lbs);

	if (len < sizeof(struct tfs_sb))
		len = round_up(sizeof(struct tfs_sb), lbs);
	r = read_range(bdev, off, len, &buf);
	if (r) {
		prt_str(err, "read failed: ");
		prt_err_desc(err, r);
		return r == -ENOMEM ? r : -TFS_ERR_sb_read;
	}

	struct tfs_sb *sb = calloc(1, max_size);

	if (!sb) {
		free(buf);
		return -ENOMEM;
	}
	memcpy(sb, buf, min_t(size_t, len, max_size));
	free(buf);

	r = tfs_sb_validate(sb, min_t(size_t, len, max_size), bdev->size, err);
	if (r) {
		free(sb);
		return r;
	}
	/* Zero past the copy, as the handle's invariant says. */
	memset((u8 *)sb + tfs_sb_bytes(sb), 0, max_size - tfs_sb_bytes(sb));
	*ret = sb;
	return 0;
}

/*
 * Which valid copy to use, or -1.  Seq only orders copies of one
 * filesystem: a copy left by an older mkfs on the same device may carry any
 * seq.  Copies of another internal uuid were ruled out by the layout's uuid
 * already (tfs_sb_read()); the user_uuid is in the copies only, so the
 * reference for it is the primary when it is valid (every write rewrites
 * it first), else the valid copy with the highest seq.  A valid copy whose
 * uuid or user_uuid differs from the reference's is turned into a bad one
 * (code and reason set, freed); the newest of the rest wins.
 */
static int pick_copy(const struct tfs_sb_layout *layout, struct tfs_sb **copies, int *codes,
		     struct printbuf *why)
{
	int ref = -1, best = -1;

	for (unsigned i = 0; i < layout->nr_superblocks; i++)
		if (!codes[i] &&
		    (ref < 0 || le64_to_cpu(copies[i]->seq) > le64_to_cpu(copies[ref]->seq)))
			ref = (int)i;
	if (!codes[0])
		ref = 0;
	if (ref < 0)
		return -1;

	for (unsigned i = 0; i < layout->nr_superblocks; i++) {
		const struct tfs_sb *sb = copies[i], *rsb = copies[ref];
		bool internal;

		if (codes[i] || (int)i == ref)
			continue;
		internal = memcmp(sb->uuid, rsb->uuid, 16);
		if (internal || memcmp(sb->user_uuid, rsb->user_uuid, 16)) {
			const char *name = internal ? "uuid" : "user_uuid";

			prt_printf(&why[i], "%s ", name);
			prt_uuid(&why[i], internal ? sb->uuid : sb->user_uuid);
			prt_printf(&why[i], " (seq %llu) differs from %s ",
				   (unsigned long long)le64_to_cpu(sb->seq), name);
			prt_uuid(&why[i], internal ? rsb->uuid : rsb->user_uuid);
			prt_printf(&why[i],
				   " of the copy at %llu: another filesystem's copy, ignored",
				   (unsigned long long)le64_to_cpu(layout->sb_offset[ref]));
			codes[i] = -TFS_ERR_invalid_sb_uuid;
			free(copies[i]);
			copies[i] = NULL;
		}
	}
	for (unsigned i = 0; i < layout->nr_superblocks; i++)
		if (!codes[i] &&
		    (best < 0 || le64_to_cpu(copies[i]->seq) > le64_to_cpu(copies[best]->seq)))
			best = (int)i;
	return best;
}

/* Every copy's state into h (for show-super -l), whatever the outcome. */
static void record_copies(struct tfs_sb_handle *h, const struct tfs_sb_layout *l,
			  struct tfs_sb **copies, const int *codes, struct printbuf *why)
{
	h->nr_copies = min_t(unsigned, l->nr_superblocks, TFS_SB_LAYOUT_MAX_COPIES);
	for (unsigned i = 0; i < h->nr_copies; i++) {
		struct tfs_sb_copy_status *c = &h->copies[i];

		c->offset = le64_to_cpu(l->sb_offset[i]);
		c->code = codes[i];
		c->seq = codes[i] ? 0 : le64_to_cpu(copies[i]->seq);
		c->why = codes[i] ? strdup(printbuf_str(&why[i])) : NULL;
	}
}

/*
 * The first field where layouts a and b differ, as "FIELD A differs from
 * B".  Both passed tfs_sb_layout_validate(): pads are zero, so some named
 * field differs whenever the bytes do.
 */
static void layout_diff(struct printbuf *out, const struct tfs_sb_layout *a,
			const struct tfs_sb_layout *b)
{
	if (a->version != b->version)
		prt_printf(out, "version %u differs from %u", a->version, b->version);
	else if (a->nr_superblocks != b->nr_superblocks)
		prt_printf(out, "nr_superblocks %u differs from %u", a->nr_superblocks,
			   b->nr_superblocks);
	else if (a->sb_max_size != b->sb_max_size)
		prt_printf(out, "sb_max_size %u differs from %u", le32_to_cpu(a->sb_max_size),
			   le32_to_cpu(b->sb_max_size));
	else if (memcmp(a->uuid, b->uuid, 16)) {
		prt_str(out, "uuid ");
		prt_uuid(out, a->uuid);
		prt_str(out, " differs from ");
		prt_uuid(out, b->uuid);
	} else
		for (unsigned i = 0; i < TFS_SB_LAYOUT_MAX_COPIES; i++)
			if (a->sb_offset[i] != b->sb_offset[i]) {
				prt_printf(out, "sb_offset[%u] %llu differs from %llu", i,
					   (unsigned long long)le64_to_cpu(a->sb_offset[i]),
					   (unsigned long long)le64_to_cpu(b->sb_offset[i]));
				return;
			}
}

/* Reads and validates every copy l lists; -ENOMEM or 0 (codes[] say the rest). */
static int read_copies(struct tfs_bdev *bdev, const struct tfs_sb_layout *l, struct tfs_sb **copies,
		       int *codes, struct printbuf *why)
{
	for (unsigned i = 0; i < TFS_SB_LAYOUT_MAX_COPIES; i++) {
		free(copies[i]);
		copies[i] = NULL;
		codes[i] = 0;
		printbuf_exit(&why[i]);
		why[i] = PRINTBUF;
	}
	for (unsigned i = 0; i < l->nr_superblocks; i++) {
		codes[i] = read_copy(bdev, le64_to_cpu(l->sb_offset[i]),
				     le32_to_cpu(l->sb_max_size), &copies[i], &why[i]);
		if (codes[i] == -ENOMEM)
			return -ENOMEM;
	}
	return 0;
}

/*
 * When no valid copy carries the sector's layout but every valid copy
 * carries the same other one, the copies are right and the sector stale
 * (it is written only by mkfs, the copies on every write): returns the index
 * of a copy with that layout and says in why what differs.  Else -1.  A
 * lone copy of another filesystem (uuid) never overrules the sector: it is
 * what a stale backup left by an older mkfs looks like when our primary is
 * unreadable.
 */
static int copies_overrule(const struct tfs_sb_layout *sector, struct tfs_sb **copies,
			   const int *codes, unsigned nr, struct printbuf *why)
{
	int first = -1;
	unsigned nr_valid = 0;

	for (unsigned i = 0; i < nr; i++) {
		if (codes[i])
			continue;
		if (!memcmp(&copies[i]->layout, sector, sizeof(*sector)))
			return -1;
		if (first >= 0 &&
		    memcmp(&copies[i]->layout, &copies[first]->layout, sizeof(*sector)))
			return -1;
		if (first < 0)
			first = (int)i;
		nr_valid++;
	}
	if (first < 0 || (nr_valid < 2 && memcmp(copies[first]->layout.uuid, sector->uuid, 16)))
		return -1;
	layout_diff(why, sector, &copies[first]->layout);
	prt_printf(why, " in the superblock cop%s at", nr_valid > 1 ? "ies" : "y");
	for (unsigned i = 0, k = 0; i < nr; i++)
		if (!codes[i])
			prt_printf(why, "%s%llu",
				   !k++		   ? " "
				   : k == nr_valid ? " and "
						   : ", ",
				   (unsigned long long)le64_to_cpu(sector->sb_offset[i]));
	return first;
}

/*
 * bdev's layout sector, as it is (not validated), into *l: 0, or
 * -TFS_ERR_device_too_small, -ENOMEM or -TFS_ERR_sb_read, said in err.
 */
static int layout_sector_read(struct tfs_bdev *bdev, struct tfs_sb_layout *l, struct printbuf *err)
{
	void *blk0 = NULL;
	int ret;

	if (bdev->size < TFS_SB_OFFSET + sizeof(struct tfs_sb)) {
		prt_printf(err, "%s: device is ", bdev->path);
		prt_units_u64(err, bdev->size);
		prt_printf(err, ", too small to hold a superblock");
		return -TFS_ERR_device_too_small;
	}
	ret = read_range(bdev, 0, round_up(TFS_SB_OFFSET, bdev_lbs(bdev)), &blk0);
	if (ret) {
		prt_printf(err, "%s: reading the layout sector failed: ", bdev->path);
		prt_err_desc(err, ret);
		return ret == -ENOMEM ? ret : -TFS_ERR_sb_read;
	}
	memcpy(l, (u8 *)blk0 + TFS_SB_LAYOUT_OFFSET, sizeof(*l));
	free(blk0);
	return 0;
}

int tfs_sb_read(struct tfs_bdev *bdev, struct tfs_sb_handle *h, struct printbuf *err)
{
	struct printbuf why[TFS_SB_LAYOUT_MAX_COPIES] = { 0 };
	struct printbuf layout_why = PRINTBUF;
	struct tfs_sb_layout layout;
	struct tfs_sb *copies[TFS_SB_LAYOUT_MAX_COPIES] = { 0 };
	int codes[TFS_SB_LAYOUT_MAX_COPIES] = { 0 };
	int best = -1, ret = 0;
	/* Where the layout in use comes from. */
	enum {
		FROM_SECTOR,
		FROM_DEFAULT,
		FROM_COPY,
		FROM_COPIES
	} from = FROM_SECTOR;
	u64 adopted_from = 0;

	memset(h, 0, sizeof(*h));
	h->bdev = bdev;
	ret = layout_sector_read(bdev, &layout, err);
	if (ret)
		return ret;

	if (tfs_sb_layout_validate(&layout, &layout_why)) {
		/*
		 * Fall back to the default layout; the first valid copy's
		 * embedded layout then tells us where the copies really are.
		 */
		from = FROM_DEFAULT;
		tfs_sb_layout_init_default(&layout);
	}

	ret = read_copies(bdev, &layout, copies, codes, why);
	if (ret)
		goto out;
	if (from == FROM_DEFAULT) {
		for (unsigned i = 0; i < layout.nr_superblocks; i++)
			if (!codes[i]) {
				/* Adopt this copy's layout (validated with it). */
				adopted_from = le64_to_cpu(layout.sb_offset[i]);
				layout = copies[i]->layout;
				from = FROM_COPY;
				break;
			}
	} else {
		int c = copies_overrule(&layout, copies, codes, layout.nr_superblocks, &layout_why);

		if (c >= 0) {
			layout = copies[c]->layout;
			from = FROM_COPIES;
		}
	}
	/* Read again every copy the adopted layout lists, at its sb_max_size. */
	if (from == FROM_COPY || from == FROM_COPIES) {
		ret = read_copies(bdev, &layout, copies, codes, why);
		if (ret)
			goto out;
	}

	/*
	 * Every copy must carry the layout in use: a copy that lists fewer
	 * copies would, once used, stop the others from ever being written
	 * again.
	 */
	for (unsigned i = 0; i < layout.nr_superblocks; i++)
		if (!codes[i] && memcmp(copies[i]->uuid, layout.uuid, 16)) {
			/*
			 * The layout names the filesystem: a copy of another
			 * one (an older mkfs's backup) is never used, whatever
			 * its seq, even when it is the only valid copy.
			 */
			prt_str(&why[i], "uuid ");
			prt_uuid(&why[i], copies[i]->uuid);
			prt_printf(&why[i], " (seq %llu) differs from uuid ",
				   (unsigned long long)le64_to_cpu(copies[i]->seq));
			prt_uuid(&why[i], layout.uuid);
			if (from == FROM_SECTOR)
				prt_printf(&why[i], " of the layout at %u", TFS_SB_LAYOUT_OFFSET);
			else
				prt_str(&why[i], " of the layout in use");
			prt_str(&why[i], ": another filesystem's copy, ignored");
			codes[i] = -TFS_ERR_invalid_sb_uuid;
			free(copies[i]);
			copies[i] = NULL;
		} else if (!codes[i] && memcmp(&copies[i]->layout, &layout, sizeof(layout))) {
			if (from == FROM_SECTOR)
				prt_printf(&why[i], "its layout disagrees with the layout at %u: ",
					   TFS_SB_LAYOUT_OFFSET);
			else
				prt_str(&why[i], "its layout disagrees with the one in use: ");
			layout_diff(&why[i], &copies[i]->layout, &layout);
			codes[i] = -TFS_ERR_invalid_sb_layout;
			free(copies[i]);
			copies[i] = NULL;
		}

	best = pick_copy(&layout, copies, codes, why);
	record_copies(h, &layout, copies, codes, why);

	if (best >= 0 && from == FROM_COPY)
		fprintf(stderr,
			"warning: %s: layout at %u: %s; using the copy in the superblock at %llu\n",
			bdev->path, TFS_SB_LAYOUT_OFFSET, printbuf_str(&layout_why),
			(unsigned long long)adopted_from);
	if (best >= 0 && from == FROM_COPIES)
		fprintf(stderr,
			"warning: %s: layout at %u: %s; using the layout of the superblock copies\n",
			bdev->path, TFS_SB_LAYOUT_OFFSET, printbuf_str(&layout_why));

	if (best < 0) {
		if (layout_why.pos)
			prt_printf(err, "%s: layout at %u: %s\n", bdev->path, TFS_SB_LAYOUT_OFFSET,
				   printbuf_str(&layout_why));
		for (unsigned i = 0; i < layout.nr_superblocks; i++) {
			if (i)
				prt_newline(err);
			prt_printf(err, "%s: superblock at %llu: %s", bdev->path,
				   (unsigned long long)le64_to_cpu(layout.sb_offset[i]),
				   printbuf_str(&why[i]));
		}
		ret = codes[0];
		goto out;
	}

	for (unsigned i = 0; i < layout.nr_superblocks; i++) {
		if ((int)i == best)
			continue;
		if (codes[i]) {
			h->copies_bad++;
			fprintf(stderr,
				"warning: %s: superblock at %llu: %s; using the copy at %llu (seq %llu)\n",
				bdev->path, (unsigned long long)le64_to_cpu(layout.sb_offset[i]),
				printbuf_str(&why[i]),
				(unsigned long long)le64_to_cpu(layout.sb_offset[best]),
				(unsigned long long)le64_to_cpu(copies[best]->seq));
		} else if (copies[i]->seq != copies[best]->seq) {
			fprintf(stderr,
				"warning: %s: superblock at %llu has seq %llu, older than seq %llu at %llu\n",
				bdev->path, (unsigned long long)le64_to_cpu(layout.sb_offset[i]),
				(unsigned long long)le64_to_cpu(copies[i]->seq),
				(unsigned long long)le64_to_cpu(copies[best]->seq),
				(unsigned long long)le64_to_cpu(layout.sb_offset[best]));
		}
	}

	h->layout_stale = from != FROM_SECTOR;
	h->sb = copies[best];
	copies[best] = NULL;
	h->sb_bytes = le32_to_cpu(layout.sb_max_size);
	h->read_offset = le64_to_cpu(layout.sb_offset[best]);
	ret = 0;
out:
	for (unsigned i = 0; i < TFS_SB_LAYOUT_MAX_COPIES; i++) {
		free(copies[i]);
		printbuf_exit(&why[i]);
	}
	printbuf_exit(&layout_why);
	return ret;
}

int tfs_sb_open(const char *path, unsigned bdev_flags, struct tfs_sb_handle *h,
		struct printbuf *err)
{
	struct tfs_bdev *bdev;
	int ret = tfs_bdev_open(path, bdev_flags, &bdev);

	memset(h, 0, sizeof(*h));
	/* tfs_bdev_open() said why: once is enough. */
	if (ret)
		return ret;
	ret = tfs_sb_read(bdev, h, err);
	h->owns_bdev = true;
	if (ret)
		tfs_sb_exit(h);
	return ret;
}

/*
 * A copy shown although it failed validation: its fields must stay inside
 * the buffer, so u64s is cut to what fits (and err says so).
 */
static void clamp_for_display(struct tfs_sb *sb, u32 max_size, struct printbuf *err)
{
	u32 fit = (u32)((max_size - sizeof(*sb)) / 8);

	if (le32_to_cpu(sb->u64s) > fit) {
		prt_printf(err, " (u64s %u runs past the copy's %u bytes: fields shown up to them)",
			   le32_to_cpu(sb->u64s), max_size);
		sb->u64s = cpu_to_le32(fit);
	}
}

int tfs_sb_read_copy(struct tfs_bdev *bdev, unsigned idx, bool force, struct tfs_sb_handle *h,
		     struct printbuf *err)
{
	struct tfs_sb_layout l;
	void *buf = NULL;
	u64 off;
	u32 max;
	size_t len;
	int ret;

	memset(h, 0, sizeof(*h));
	h->bdev = bdev;
	ret = layout_sector_read(bdev, &l, err);
	if (ret)
		return ret;
	PRINTBUF_ONSTACK(ignored, 256);

	/* A bad sector: the standard places, as tfs_sb_read() starts from. */
	if (tfs_sb_layout_validate(&l, &ignored))
		tfs_sb_layout_init_default(&l);
	if (idx >= l.nr_superblocks) {
		prt_printf(err, "%s: copy %u: the layout lists %u copies", bdev->path, idx,
			   l.nr_superblocks);
		if (l.nr_superblocks > 1)
			prt_printf(err, " (0 %s %u)", l.nr_superblocks == 2 ? "and" : "to",
				   l.nr_superblocks - 1);
		return -TFS_ERR_invalid_argument;
	}
	off = le64_to_cpu(l.sb_offset[idx]);
	max = le32_to_cpu(l.sb_max_size);
	prt_printf(err, "%s: superblock at %llu: ", bdev->path, (unsigned long long)off);
	ret = read_copy(bdev, off, max, &h->sb, err);
	if (ret && force && tfs_err_matches(ret, TFS_ERR_invalid_sb) &&
	    bdev->size - off >= sizeof(struct tfs_sb)) {
		/* Read it again, without validation, to be shown anyway. */
		len = round_down(min_t(u64, max, bdev->size - off), bdev_lbs(bdev));
		if (len < sizeof(struct tfs_sb))
			len = round_up(sizeof(struct tfs_sb), bdev_lbs(bdev));
		h->sb = calloc(1, max_t(size_t, max, len));
		if (!h->sb || read_range(bdev, off, len, &buf)) {
			free(h->sb);
			h->sb = NULL;
		} else {
			memcpy(h->sb, buf, min_t(size_t, len, max));
			clamp_for_display(h->sb, max, err);
		}
		free(buf);
	}
	if (h->sb) {
		h->sb_bytes = max;
		h->read_offset = off;
	}
	if (!ret)
		printbuf_reset(err);
	return ret;
}

/* --- writing --- */

static int write_copy(struct tfs_sb_handle *h, unsigned copy, struct printbuf *err)
{
	struct tfs_bdev *bdev = h->bdev;
	u64 off = le64_to_cpu(h->sb->layout.sb_offset[copy]);
	size_t len = round_up(tfs_sb_bytes(h->sb), bdev_lbs(bdev));
	void *buf = tfs_bdev_alloc_buf(bdev, len);
	int ret;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, h->sb, min_t(size_t, len, h->sb_bytes));
	ret = sb_io(bdev, TFS_OP_write, buf, len, off);
	free(buf);
	if (ret) {
		if (err->pos)
			prt_newline(err);
		prt_printf(err, "%s: writing superblock copy %u at %llu (%zu bytes) failed: ",
			   bdev->path, copy, (unsigned long long)off, len);
		prt_err_desc(err, ret);
	}
	return ret;
}

/* Flushes device i; a failure goes into err.  0 or the code. */
static int flush_one(struct tfs_sb_handle *h, const char *what, struct printbuf *err)
{
	int r = sb_io(h->bdev, TFS_OP_flush, NULL, 0, 0);

	if (r) {
		if (err->pos)
			prt_newline(err);
		prt_printf(err, "%s: flush after writing the %s superblock failed: ", h->bdev->path,
			   what);
		prt_err_desc(err, r);
	}
	return r;
}

/*
 * Writes h->sb->layout at TFS_SB_LAYOUT_OFFSET, read-modify-write of the
 * block holding it: the rest of that block is not ours to change.
 */
static int rewrite_layout_sector(struct tfs_sb_handle *h, struct printbuf *err)
{
	struct tfs_bdev *bdev = h->bdev;
	unsigned lbs = bdev_lbs(bdev);
	u64 off = round_down(TFS_SB_LAYOUT_OFFSET, lbs);
	size_t len = round_up(TFS_SB_LAYOUT_OFFSET + sizeof(h->sb->layout), lbs) - off;
	void *buf;
	int ret = read_range(bdev, off, len, &buf);

	if (!ret) {
		memcpy((u8 *)buf + (TFS_SB_LAYOUT_OFFSET - off), &h->sb->layout,
		       sizeof(h->sb->layout));
		ret = sb_io(bdev, TFS_OP_write, buf, len, off);
		free(buf);
	}
	if (ret) {
		if (err->pos)
			prt_newline(err);
		prt_printf(err, "%s: rewriting the stale layout at %u failed: ", bdev->path,
			   TFS_SB_LAYOUT_OFFSET);
		prt_err_desc(err, ret);
	}
	return ret;
}

/* Records member i's first failure. */
static void member_failed(struct tfs_sb_write_res *res, unsigned i, int r)
{
	if (!res->ret[i])
		res->ret[i] = r;
}

int tfs_sb_write_members(struct tfs_sb_handle *const *hs, unsigned nr, unsigned required,
			 struct tfs_sb_write_res *res, struct printbuf *err)
{
	bool primary_ok[TFS_MAX_DEVICES] = { false };
	bool any_backup = false;
	u64 seq = 0;
	int ret = 0, r;

	memset(res, 0, sizeof(*res));
	if (nr > TFS_MAX_DEVICES)
		return -TFS_ERR_invalid_argument;
	for (unsigned i = 0; i < nr; i++)
		seq = max_t(u64, seq, le64_to_cpu(hs[i]->sb->seq));
	seq++;
	for (unsigned i = 0; i < nr; i++) {
		struct tfs_sb *sb = hs[i]->sb;

		sb->seq = cpu_to_le64(seq);
		sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout));
		sb->csum = cpu_to_le32(tfs_sb_csum(sb));
	}

	/*
	 * The rule: at every moment each device holds at least one valid
	 * copy.  Primaries first, then a flush; while they are written the
	 * backups still hold the previous superblock.  A device's backups
	 * are written only when its primary write and the flush after it
	 * both succeeded: then the primary is durable and valid, so a torn
	 * backup cannot leave the device without a copy.  If either failed,
	 * the primary may be torn or lost, the backup is the only copy known
	 * good, and it is not touched (the error is returned).
	 */
	for (unsigned i = 0; i < nr; i++) {
		r = write_copy(hs[i], 0, err);
		primary_ok[i] = !r;
		if (r)
			member_failed(res, i, r);
	}
	for (unsigned i = 0; i < nr; i++)
		if ((r = flush_one(hs[i], "primary", err))) {
			primary_ok[i] = false;
			member_failed(res, i, r);
		}

	for (unsigned i = 0; i < nr; i++) {
		if (!primary_ok[i])
			continue;
		for (unsigned c = 1; c < hs[i]->sb->layout.nr_superblocks; c++) {
			any_backup = true;
			if ((r = write_copy(hs[i], c, err)))
				member_failed(res, i, r);
		}
	}
	for (unsigned i = 0; any_backup && i < nr; i++)
		if (primary_ok[i] && hs[i]->sb->layout.nr_superblocks > 1 &&
		    (r = flush_one(hs[i], "backup", err)))
			member_failed(res, i, r);
	/*
	 * A stale or damaged layout sector is rewritten last, only once every
	 * copy carrying the layout in use is durable on that member: a torn
	 * sector write leaves a bad sector, and the read then finds the
	 * layout in the copies again (as it did this time).
	 */
	for (unsigned i = 0; i < nr; i++)
		if (!res->ret[i] && hs[i]->layout_stale) {
			if ((r = rewrite_layout_sector(hs[i], err)) ||
			    (r = flush_one(hs[i], "layout", err)))
				member_failed(res, i, r);
			else
				hs[i]->layout_stale = false;
		}
	/* A member whose primary is durable holds the new superblock (its backup may be old). */
	for (unsigned i = 0; i < nr; i++)
		res->nr_written += primary_ok[i];
	if (!required)
		required = 1;
	required = min_t(unsigned, required, nr ?: 1);
	if (res->nr_written < required)
		ret = -TFS_ERR_sb_write;
	return ret;
}

int tfs_sb_write_all(struct tfs_sb_handle *const *hs, unsigned nr, struct printbuf *err)
{
	struct tfs_sb_write_res res;
	int ret = tfs_sb_write_members(hs, nr, nr, &res, err);

	for (unsigned i = 0; !ret && i < nr; i++)
		if (res.ret[i])
			ret = -TFS_ERR_sb_write;
	return ret;
}

int tfs_sb_write(struct tfs_sb_handle *h, struct printbuf *err)
{
	return tfs_sb_write_all(&h, 1, err);
}

int tfs_sb_write_layout(struct tfs_sb_handle *h, struct printbuf *err)
{
	struct tfs_bdev *bdev = h->bdev;
	size_t len = round_up(TFS_SB_OFFSET, bdev_lbs(bdev));
	u8 *buf = tfs_bdev_alloc_buf(bdev, len);
	int ret;

	if (!buf)
		return -ENOMEM;
	h->sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&h->sb->layout));
	memcpy(buf + TFS_SB_LAYOUT_OFFSET, &h->sb->layout, sizeof(h->sb->layout));
	ret = sb_io(bdev, TFS_OP_write, buf, len, 0);
	free(buf);
	if (ret) {
		if (err->pos)
			prt_newline(err);
		prt_printf(err, "%s: writing the layout at %u failed: ", bdev->path,
			   TFS_SB_LAYOUT_OFFSET);
		prt_err_desc(err, ret);
		return -TFS_ERR_sb_write;
	}
	return 0;
}
