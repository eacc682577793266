// SPDX-License-Identifier: GPL-2.0
/* Making a new filesystem: plan every member's superblock, then write. */
#include "super/format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/super.h"

typedef unsigned long long ull;

#define BUCKET_SIZE_MIN (16 * 1024)
#define BUCKET_SIZE_DEFAULT_MAX (256 * 1024)
#define JOURNAL_DEFAULT_MAX (1ULL << 30)
#define ZERO_CHUNK (1024 * 1024)

static u64 rounddown_pow2(u64 v)
{
	return v ? 1ULL << (63 - __builtin_clzll(v)) : 0;
}

u32 tfs_format_default_bucket_size(u64 size, u32 block_size)
{
	u64 lo = max_t(u64, block_size, BUCKET_SIZE_MIN);
	u64 bs = rounddown_pow2(size / 512);

	u64 hi = max_t(u64, lo, BUCKET_SIZE_DEFAULT_MAX);

	bs = max_t(u64, bs, lo);
	return (u32)min_t(u64, bs, hi);
}

/* Where buckets may start: past every superblock copy. */
static u64 sb_area_end(const struct tfs_sb_layout *l)
{
	return le64_to_cpu(l->sb_offset[l->nr_superblocks - 1]) + le32_to_cpu(l->sb_max_size);
}

/* The device's path when the caller gave one, else "device N". */
static const char *dev_name(const struct tfs_format_dev *d, unsigned i, char name[32])
{
	if (d->name)
		return d->name;
	snprintf(name, 32, "device %u", i);
	return name;
}

static int plan_geometry(unsigned i, const struct tfs_format_dev *d, u32 block_size,
			 const struct tfs_sb_layout *l, unsigned nr, struct tfs_member *m,
			 u64 *journal_nr, struct printbuf *err)
{
	u64 jmax = TFS_JOURNAL_MAX_BUCKETS;
	u32 bs = d->bucket_size ?: tfs_format_default_bucket_size(d->size, block_size);
	u64 first, nbuckets, usable, jb;
	char name[32];

	if (!IS_POWER_OF_2(bs) || bs < block_size || bs > TFS_BUCKET_SIZE_MAX) {
		prt_printf(err,
			   "%s: bucket size %u must be a power of two from the block size %u to %u",
			   dev_name(d, i, name), bs, block_size, TFS_BUCKET_SIZE_MAX);
		return -TFS_ERR_invalid_option;
	}
	first = DIV_ROUND_UP(sb_area_end(l), bs);
	nbuckets = d->size / bs;
	if (nbuckets < first + TFS_MIN_BUCKETS) {
		prt_printf(err, "%s: ", dev_name(d, i, name));
		prt_units_u64_vs(err, d->size, (first + TFS_MIN_BUCKETS) * bs);
		prt_printf(err, " is too small: %llu buckets of ", (ull)nbuckets);
		prt_units_u64(err, bs);
		prt_printf(err, ", need at least %llu (", (ull)(first + TFS_MIN_BUCKETS));
		prt_units_u64_vs(err, (first + TFS_MIN_BUCKETS) * bs, d->size);
		prt_printf(err, ")");
		return -TFS_ERR_device_too_small;
	}
	usable = nbuckets - first;

	if (d->journal_size) {
		/* Checked before anything is allocated for it. */
		jb = DIV_ROUND_UP(d->journal_size, bs);
		if (jb > jmax) {
			prt_printf(err, "%s: journal size ", dev_name(d, i, name));
			prt_units_u64(err, d->journal_size);
			prt_printf(err, " is %llu buckets of ", (ull)jb);
			prt_units_u64(err, bs);
			prt_printf(err, "; a journal has at most %llu buckets (use larger buckets)",
				   (ull)jmax);
			return -TFS_ERR_invalid_option;
		}
		if (jb < TFS_JOURNAL_MIN_BUCKETS || jb > usable / 2) {
			prt_printf(err, "%s: journal size ", dev_name(d, i, name));
			prt_units_u64(err, d->journal_size);
			prt_printf(err, " is %llu buckets of ", (ull)jb);
			prt_units_u64(err, bs);
			prt_printf(err, "; it must be %u to %llu buckets (half the device)",
				   TFS_JOURNAL_MIN_BUCKETS, (ull)(usable / 2));
			return -TFS_ERR_invalid_option;
		}
	} else {
		u64 bytes = min_t(u64, d->size / 64, JOURNAL_DEFAULT_MAX);

		jb = max_t(u64, DIV_ROUND_UP(bytes, bs), TFS_JOURNAL_MIN_BUCKETS);
		jb = min_t(u64, jb, usable / 2);
		jb = min_t(u64, jb, TFS_FORMAT_JOURNAL_DEFAULT_MAX_BUCKETS);
	}

	memcpy(m->uuid, d->uuid, 16);
	m->nbuckets = cpu_to_le64(nbuckets);
	m->first_bucket = cpu_to_le64(first);
	m->bucket_size = cpu_to_le32(bs);
	m->state = TFS_MEMBER_rw;
	m->durability = d->durability_set ? d->durability : 1;
	m->discard = d->discard;
	if (d->durability_set && d->durability > TFS_MAX_DURABILITY) {
		prt_printf(err, "%s: durability %u > %u", dev_name(d, i, name), d->durability,
			   TFS_MAX_DURABILITY);
		return -TFS_ERR_invalid_option;
	}
	if (d->label && tfs_strpad(m->label, d->label, sizeof(m->label)) < 0) {
		prt_printf(err, "%s: label \"%s\" is longer than %u bytes", dev_name(d, i, name),
			   d->label, TFS_LABEL_SIZE);
		return -TFS_ERR_invalid_option;
	}
	*journal_nr = jb;
	return 0;
}

static int check_replicas(const char *what, u8 *want, u8 *req, unsigned nr, struct printbuf *err)
{
	if (!*want)
		*want = 1;
	if (!*req)
		*req = 1;
	if (*want > TFS_MAX_REPLICAS || *want > nr) {
		prt_printf(err,
			   "%s replicas %u: must be 1 to %u (the number of devices, at most %u)",
			   what, *want, min_t(unsigned, nr, TFS_MAX_REPLICAS), TFS_MAX_REPLICAS);
		return -TFS_ERR_invalid_option;
	}
	if (*req > *want) {
		prt_printf(err, "%s replicas required %u > %s replicas %u", what, *req, what,
			   *want);
		return -TFS_ERR_invalid_option;
	}
	return 0;
}

/*
 * The btree node size: o->btree_node_size, or TFS_BTREE_NODE_SIZE_DEFAULT
 * cut to the smallest bucket; a power of two in [MIN, MAX], at least the
 * block size, dividing every bucket size (nodes never cross a bucket).
 */
static int plan_node_size(struct tfs_format_opts *o, const struct tfs_format_dev *devs,
			  const struct tfs_sb_field_members *mf, unsigned nr, u32 block_size,
			  struct printbuf *err)
{
	u32 node = o->btree_node_size, min_bucket = UINT32_MAX;
	unsigned smallest = 0;
	char name[32];

	for (unsigned i = 0; i < nr; i++)
		if (le32_to_cpu(mf->members[i].bucket_size) < min_bucket) {
			min_bucket = le32_to_cpu(mf->members[i].bucket_size);
			smallest = i;
		}
	if (!node && min_bucket < TFS_BTREE_NODE_SIZE_MIN) {
		prt_str(err, "the bucket size ");
		prt_units_u64(err, min_bucket);
		prt_printf(err, " of %s is below the smallest btree node size ",
			   dev_name(&devs[smallest], smallest, name));
		prt_units_u64(err, TFS_BTREE_NODE_SIZE_MIN);
		prt_str(err, " (use larger buckets)");
		return -TFS_ERR_invalid_option;
	}
	if (!node) {
		node = min_t(u32, TFS_BTREE_NODE_SIZE_DEFAULT, min_bucket);
		node = max_t(u32, node, block_size);
	}
	if (!IS_POWER_OF_2(node) || node < TFS_BTREE_NODE_SIZE_MIN ||
	    node > TFS_BTREE_NODE_SIZE_MAX) {
		prt_printf(err, "btree node size %u must be a power of two from ", node);
		prt_units_u64(err, TFS_BTREE_NODE_SIZE_MIN);
		prt_str(err, " to ");
		prt_units_u64(err, TFS_BTREE_NODE_SIZE_MAX);
		return -TFS_ERR_invalid_option;
	}
	if (node < block_size) {
		prt_str(err, "btree node size ");
		prt_units_u64(err, node);
		prt_str(err, " is smaller than the block size ");
		prt_units_u64(err, block_size);
		return -TFS_ERR_invalid_option;
	}
	for (unsigned i = 0; i < nr; i++) {
		u32 bs = le32_to_cpu(mf->members[i].bucket_size);

		if (bs % node) {
			prt_str(err, "btree node size ");
			prt_units_u64(err, node);
			prt_str(err, " does not divide the bucket size ");
			prt_units_u64(err, bs);
			prt_printf(err, " of %s (use larger buckets or smaller nodes)",
				   dev_name(&devs[i], i, name));
			return -TFS_ERR_invalid_option;
		}
	}
	o->btree_node_size = node;
	return 0;
}

static int check_durability(const char *what, unsigned req, unsigned durability,
			    struct printbuf *err)
{
	if (req <= durability)
		return 0;
	prt_printf(err,
		   "%s replicas required %u can never be met: the durability of every member adds "
		   "up to %u (durability 0 is a cache)",
		   what, req, durability);
	return -TFS_ERR_invalid_option;
}

int tfs_format_plan(const struct tfs_format_opts *opts, const struct tfs_format_dev *devs,
		    unsigned nr, struct tfs_sb_handle *hs, struct printbuf *err)
{
	struct tfs_format_opts o = *opts;
	u32 block_size = o.block_size;
	u64 *journal_nr = NULL;
	struct tfs_sb *sb = NULL;
	char name[32];
	int ret = 0;

	if (!nr || nr > TFS_MAX_DEVICES) {
		prt_printf(err, "%u devices: must be 1 to %u", nr, TFS_MAX_DEVICES);
		return -TFS_ERR_invalid_option;
	}
	if (!block_size) {
		block_size = 4096;
		for (unsigned i = 0; i < nr; i++)
			block_size = max_t(u32, block_size, devs[i].logical_block_size);
	}
	if (!IS_POWER_OF_2(block_size) || block_size < TFS_BLOCK_SIZE_MIN ||
	    block_size > TFS_BLOCK_SIZE_MAX) {
		prt_printf(err, "block size %u must be a power of two from %u to %u", block_size,
			   TFS_BLOCK_SIZE_MIN, TFS_BLOCK_SIZE_MAX);
		return -TFS_ERR_invalid_option;
	}
	for (unsigned i = 0; i < nr; i++)
		if (devs[i].logical_block_size > block_size) {
			prt_printf(err, "block size %u < device %u's logical block size %u",
				   block_size, i, devs[i].logical_block_size);
			return -TFS_ERR_invalid_option;
		}
	ret = check_replicas("metadata", &o.metadata_replicas, &o.metadata_replicas_required, nr,
			     err)
		      ?: check_replicas("data", &o.data_replicas, &o.data_replicas_required, nr,
					err);
	if (ret)
		return ret;
	if (o.error_action >= TFS_ON_ERROR_NR) {
		prt_printf(err, "error action %u unknown", o.error_action);
		return -TFS_ERR_invalid_option;
	}

	sb = calloc(1, TFS_SB_MAX_SIZE_DEFAULT);
	journal_nr = calloc(nr, sizeof(*journal_nr));
	if (!sb || !journal_nr) {
		ret = -ENOMEM;
		goto err;
	}

	sb->csum_type = cpu_to_le32(TFS_CSUM_crc32c);
	sb->magic = cpu_to_le64(TFS_SB_MAGIC);
	sb->version = cpu_to_le16(TFS_SB_VERSION_CURRENT);
	sb->version_min = cpu_to_le16(TFS_SB_VERSION_MIN);
	memcpy(sb->uuid, o.uuid, 16);
	memcpy(sb->user_uuid, o.user_uuid, 16);
	if (o.label && tfs_strpad(sb->label, o.label, sizeof(sb->label)) < 0) {
		prt_printf(err, "label \"%s\" is longer than %u bytes", o.label, TFS_LABEL_SIZE);
		ret = -TFS_ERR_invalid_option;
		goto err;
	}
	sb->block_size = cpu_to_le32(block_size);
	sb->nr_devices = (u8)nr;
	sb->metadata_replicas = o.metadata_replicas;
	sb->metadata_replicas_required = o.metadata_replicas_required;
	sb->data_replicas = o.data_replicas;
	sb->data_replicas_required = o.data_replicas_required;
	sb->metadata_csum_type = TFS_CSUM_crc32c;
	sb->data_csum_type = TFS_CSUM_crc32c;
	sb->error_action = o.error_action;
	sb->time_created = cpu_to_le64(o.time);
	sb->time_written = cpu_to_le64(o.time);

	struct tfs_sb_layout *l = &sb->layout;

	tfs_sb_layout_init_default(l);
	/* So a copy of another filesystem is known for one even without our primary. */
	memcpy(l->uuid, o.uuid, 16);
	l->csum = cpu_to_le32(tfs_sb_layout_csum(l));

	struct tfs_sb_handle tmp = { .sb = sb, .sb_bytes = TFS_SB_MAX_SIZE_DEFAULT };
	unsigned mu64s =
		(unsigned)(sizeof(struct tfs_sb_field_members) + nr * sizeof(struct tfs_member)) /
		8;
	struct tfs_sb_field_members *mf =
		(void *)tfs_sb_field_resize(&tmp, TFS_SB_FIELD_members, mu64s, &ret);

	if (!mf)
		goto err;
	mf->member_bytes = cpu_to_le16(sizeof(struct tfs_member));
	for (unsigned i = 0; i < nr; i++) {
		ret = plan_geometry(i, &devs[i], block_size, l, nr, &mf->members[i], &journal_nr[i],
				    err);
		if (ret)
			goto err;
		for (unsigned j = 0; j < i; j++)
			if (!memcmp(mf->members[j].uuid, mf->members[i].uuid, 16)) {
				prt_printf(err, "device %u has the same uuid as device %u", i, j);
				ret = -TFS_ERR_invalid_option;
				goto err;
			}
	}

	ret = plan_node_size(&o, devs, mf, nr, block_size, err);
	if (ret)
		goto err;
	sb->btree_node_size = cpu_to_le32(o.btree_node_size);

	/*
	 * Copies go to distinct members, each counting for its durability: a
	 * requirement above the sum of them all can never be met (every write
	 * would fail), so such a filesystem is refused here.
	 */
	unsigned durability = 0;

	for (unsigned i = 0; i < nr; i++)
		durability += mf->members[i].durability;
	ret = check_durability("metadata", o.metadata_replicas_required, durability, err)
		      ?: check_durability("data", o.data_replicas_required, durability, err);
	if (ret)
		goto err;

	for (unsigned i = 0; i < nr; i++) {
		struct tfs_sb_handle *h = &hs[i];
		u64 first = le64_to_cpu(mf->members[i].first_bucket);

		h->sb = malloc(TFS_SB_MAX_SIZE_DEFAULT);
		if (!h->sb) {
			ret = -ENOMEM;
			goto err;
		}
		memcpy(h->sb, sb, TFS_SB_MAX_SIZE_DEFAULT);
		h->sb_bytes = TFS_SB_MAX_SIZE_DEFAULT;
		h->sb->dev_idx = (u8)i;

		/* The journal: one range, right after the superblock area. */
		struct tfs_sb_field_journal *j =
			(void *)tfs_sb_field_resize(h, TFS_SB_FIELD_journal, 3, &ret);

		if (j) {
			j->ranges[0].start = cpu_to_le64(first);
			j->ranges[0].nr = cpu_to_le64(journal_nr[i]);
		}
		if (ret) {
			prt_printf(err, "%s: the journal field does not fit in the superblock",
				   dev_name(&devs[i], i, name));
			goto err;
		}
		h->sb->csum = cpu_to_le32(tfs_sb_csum(h->sb));

		struct printbuf verr = PRINTBUF;

		ret = tfs_sb_validate(h->sb, h->sb_bytes, devs[i].size, &verr);
		if (ret)
			prt_printf(err, "%s: planned superblock is invalid: %s",
				   dev_name(&devs[i], i, name), printbuf_str(&verr));
		printbuf_exit(&verr);
		if (ret)
			goto err;
	}
	free(sb);
	free(journal_nr);
	return 0;
err:
	for (unsigned i = 0; i < nr; i++)
		tfs_sb_exit(&hs[i]);
	free(sb);
	free(journal_nr);
	return ret;
}

static int zero_range(struct tfs_bdev *bdev, u64 off, u64 len, enum tfs_bio_tag tag,
		      struct printbuf *err)
{
	size_t chunk = (size_t)min_t(u64, len, ZERO_CHUNK);
	void *buf = tfs_bdev_alloc_buf(bdev, chunk ?: 1);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (len) {
		size_t n = (size_t)min_t(u64, len, chunk);

		/* Quiet: the failure is reported below, once, as the zeroing's. */
		ret = tfs_bdev_write(bdev, buf, n, off, TFS_BIO_QUIET, tag);
		if (ret) {
			if (err->pos)
				prt_newline(err);
			prt_printf(err, "%s: zeroing %zu bytes at %llu failed: ", bdev->path, n,
				   (ull)off);
			prt_err_desc(err, ret);
			break;
		}
		off += n;
		len -= n;
	}
	free(buf);
	return ret;
}

static int format_one(struct tfs_sb_handle *h, struct printbuf *err)
{
	struct tfs_bdev *bdev = h->bdev;
	const struct tfs_member *m = tfs_sb_this_member(h->sb);
	u64 bs = le32_to_cpu(m->bucket_size);
	u64 end = le64_to_cpu(m->nbuckets) * bs;
	const struct tfs_sb_field_journal *j = tfs_sb_journal(h->sb);
	int ret;

	if (bdev->size < end) {
		prt_printf(err, "%s: device is ", bdev->path);
		prt_units_u64_vs(err, bdev->size, end);
		prt_printf(err, ", smaller than the planned ");
		prt_units_u64_vs(err, end, bdev->size);
		return -TFS_ERR_device_too_small;
	}
	if (m->discard) {
		struct tfs_bio bio = {
			.bdev = bdev,
			.op = TFS_OP_discard,
			.flags = TFS_BIO_QUIET,
			.offset = 0,
			.len = end,
		};

		ret = tfs_bio_submit_wait(&bio);
		/* A device without discard still gets a correct filesystem. */
		if (ret && !tfs_err_matches(ret, EOPNOTSUPP)) {
			prt_printf(err, "%s: discard failed: ", bdev->path);
			prt_err_desc(err, ret);
			return ret;
		}
	}
	/*
	 * Zero the superblock area and the journal so that nothing from an
	 * earlier filesystem is mistaken for ours (and the image is the same
	 * bytes every time).
	 */
	ret = zero_range(bdev, TFS_SB_OFFSET, le64_to_cpu(m->first_bucket) * bs - TFS_SB_OFFSET,
			 TFS_TAG_sb, err);
	for (unsigned i = 0; !ret && i < tfs_sb_journal_nr_ranges(j); i++)
		ret = zero_range(bdev, le64_to_cpu(j->ranges[i].start) * bs,
				 le64_to_cpu(j->ranges[i].nr) * bs, TFS_TAG_journal, err);
	return ret ?: tfs_sb_write_layout(h, err);
}

int tfs_format_write(struct tfs_sb_handle *const *hs, unsigned nr, struct printbuf *err)
{
	int ret = 0;

	for (unsigned i = 0; i < nr; i++) {
		int r = format_one(hs[i], err);

		ret = ret ?: r;
	}
	/*
	 * The superblocks go last: until they are written the device holds
	 * no valid tinyfs, never a half-made one.
	 */
	if (!ret)
		ret = tfs_sb_write_all(hs, nr, err);
	return ret;
}
