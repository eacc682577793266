// SPDX-License-Identifier: GPL-2.0
/* Tests for super/super_validate.c: every check, with its exact message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/format.h"
#include "super/super.h"

#define DEV_SIZE (4ULL << 20)

/* A valid two-member superblock (device 0's), built in memory. */
static void make_sb(struct tfs_sb_handle hs[2])
{
	struct tfs_format_opts o = { .time = 1700000000, .error_action = TFS_ON_ERROR_ro };
	struct tfs_format_dev d[2] = { { .size = DEV_SIZE }, { .size = DEV_SIZE } };
	struct printbuf err = PRINTBUF;

	memset(o.uuid, 0x11, 16);
	memset(o.user_uuid, 0x22, 16);
	memset(d[0].uuid, 0x33, 16);
	memset(d[1].uuid, 0x44, 16);
	memset(hs, 0, 2 * sizeof(*hs));
	assert_int_equal(tfs_format_plan(&o, d, 2, hs, &err), 0);
	printbuf_exit(&err);
}

static void resum(struct tfs_sb *sb)
{
	sb->csum = cpu_to_le32(tfs_sb_csum(sb));
}

static void expect(struct tfs_sb_handle *h, int code, const char *msg)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_sb_validate(h->sb, h->sb_bytes, DEV_SIZE, &err);

	if (ret != code || strcmp(printbuf_str(&err), msg))
		print_error("got %s \"%s\", expected %s \"%s\"\n", tfs_err_str(ret),
			    printbuf_str(&err), tfs_err_str(code), msg);
	assert_int_equal(ret, code);
	assert_string_equal(printbuf_str(&err), msg);
	printbuf_exit(&err);
}

static void test_valid(void **state)
{
	struct tfs_sb_handle hs[2];

	make_sb(hs);
	for (unsigned i = 0; i < 2; i++)
		expect(&hs[i], 0, "");
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

struct vcase {
	const char *name;
	void (*mutate)(struct tfs_sb *sb);
	bool no_resum;
	int code;
	const char *msg;
};

static struct tfs_member *m0(struct tfs_sb *sb, unsigned i)
{
	return tfs_sb_member(sb, i);
}

#define MUT(n, body)                           \
	static void mut_##n(struct tfs_sb *sb) \
	{                                      \
		body;                          \
	}

MUT(magic, sb->magic = 0)
MUT(csum_type, sb->csum_type = 7)
MUT(csum, sb->csum ^= 1)
MUT(size, sb->u64s = cpu_to_le32(100000))
MUT(version, sb->version = 9)
MUT(version_1, sb->version = 1; sb->version_min = 1)
MUT(version_min, sb->version_min = 5)
MUT(features, sb->features = 4)
MUT(layout_nr, sb->layout.nr_superblocks = 0;
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_csum, sb->layout.nr_superblocks = 3)
MUT(layout_overlap, sb->layout.sb_offset[1] = cpu_to_le64(8192);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_max, sb->layout.sb_max_size = cpu_to_le32(5000);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_wrap, sb->layout.sb_offset[1] = cpu_to_le64(0ULL - 32768);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_past_dev, sb->layout.sb_offset[1] = cpu_to_le64(DEV_SIZE - 4096);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(uuid, memset(sb->uuid, 0, 16))
MUT(user_uuid, memset(sb->user_uuid, 0, 16))
MUT(label, sb->label[3] = '\n')
MUT(label_utf8, sb->label[0] = (char)0xff)
MUT(label_c1, sb->label[0] = (char)0xc2; sb->label[1] = (char)0x85)
MUT(label_trunc, sb->label[0] = 'a'; sb->label[1] = (char)0xc3)
MUT(block_size, sb->block_size = cpu_to_le32(3000))
MUT(nr_devices_0, sb->nr_devices = 0)
MUT(nr_devices, sb->nr_devices = 3)
MUT(nr_devices_17, sb->nr_devices = 17)
MUT(dev_idx, sb->dev_idx = 2)
MUT(meta_repl, sb->metadata_replicas = 5)
MUT(meta_req, sb->metadata_replicas_required = 2)
MUT(data_req, sb->data_replicas = 3; sb->data_replicas_required = 3)
MUT(csum_meta, sb->metadata_csum_type = 9)
MUT(error_action, sb->error_action = 3)
MUT(flags, sb->flags = cpu_to_le16(0x10))
MUT(field_zero, ((struct tfs_sb_field *)sb->_data)->u64s = 0)
MUT(field_past, ((struct tfs_sb_field *)sb->_data)->u64s = cpu_to_le32(1000))
MUT(field_dup, ((struct tfs_sb_field *)tfs_sb_field_get(sb, TFS_SB_FIELD_journal))->type =
		       cpu_to_le32(TFS_SB_FIELD_members))
MUT(no_members, tfs_sb_field_get(sb, TFS_SB_FIELD_members)->type = cpu_to_le32(77))
MUT(member_bytes, ((struct tfs_sb_field_members *)tfs_sb_field_get(sb, TFS_SB_FIELD_members))
			  ->member_bytes = cpu_to_le16(12))
MUT(member_uuid, memset(m0(sb, 1)->uuid, 0, 16))
MUT(member_uuid_dup, memcpy(m0(sb, 1)->uuid, m0(sb, 0)->uuid, 16))
MUT(bucket_pow2, m0(sb, 1)->bucket_size = cpu_to_le32(3 << 12))
MUT(bucket_small, m0(sb, 1)->bucket_size = cpu_to_le32(2048))
MUT(first_bucket, m0(sb, 1)->first_bucket = cpu_to_le64(9); m0(sb, 1)->nbuckets = cpu_to_le64(8))
MUT(few_buckets, m0(sb, 1)->nbuckets = cpu_to_le64(30))
MUT(state, m0(sb, 1)->state = 4)
MUT(durability, m0(sb, 1)->durability = 5)
MUT(discard, m0(sb, 1)->discard = 2)
MUT(member_label, m0(sb, 1)->label[0] = 1)
MUT(first_in_sb, m0(sb, 0)->first_bucket = cpu_to_le64(2))
MUT(dev_size, m0(sb, 0)->nbuckets = cpu_to_le64(512))
MUT(journal_low, tfs_sb_journal(sb)->ranges[0].start = cpu_to_le64(4))
MUT(journal_high, tfs_sb_journal(sb)->ranges[0].start = cpu_to_le64(250))
MUT(journal_empty, tfs_sb_journal(sb)->ranges[0].nr = 0)
MUT(node_pow2, sb->btree_node_size = cpu_to_le32(3000))
MUT(node_small, sb->btree_node_size = cpu_to_le32(2048))
MUT(node_big, sb->btree_node_size = cpu_to_le32(512 * 1024))
MUT(node_block, sb->btree_node_size = cpu_to_le32(16384); sb->block_size = cpu_to_le32(32768))
MUT(node_bucket, sb->btree_node_size = cpu_to_le32(32768))
MUT(sb_pad1, sb->pad1 = cpu_to_le32(0x5a))
MUT(layout_uuid, sb->layout.uuid[0] ^= 1;
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_uuid_zero, memset(sb->layout.uuid, 0, 16);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_version, sb->layout.version = 1;
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
/* Padding and reserved bytes: a later version may give them a meaning. */
MUT(sb_pad0, sb->pad0 = 0x5a)
MUT(sb_reserved, ((u8 *)sb->reserved)[3] = 0x5a)
MUT(sb_reserved_last, ((u8 *)sb->reserved)[31] = 1)
MUT(layout_pad0, sb->layout.pad0 = cpu_to_le32(0x100);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_pad1, sb->layout.pad1 = cpu_to_le16(7);
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(layout_pad2, sb->layout.pad2[407] = 0x80;
    sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout)))
MUT(members_pad0, ((struct tfs_sb_field_members *)tfs_sb_field_get(sb, TFS_SB_FIELD_members))
			  ->pad0 = cpu_to_le16(0x200))
MUT(members_pad1, ((struct tfs_sb_field_members *)tfs_sb_field_get(sb, TFS_SB_FIELD_members))
			  ->pad1 = cpu_to_le32(0x3000000))
MUT(member_pad0, m0(sb, 1)->pad0 = 0x5a)
MUT(journal_none, tfs_sb_field_get(sb, TFS_SB_FIELD_journal)->type = cpu_to_le32(77))
MUT(clean_flag, sb->flags = cpu_to_le16(TFS_SB_FLAG_CLEAN))

static const struct vcase cases[] = {
	{ "magic", mut_magic, false, -TFS_ERR_invalid_sb_magic,
	  "bad magic 0x0000000000000000 (expected 0x3142535346594e54)" },
	{ "csum_type", mut_csum_type, false, -TFS_ERR_invalid_sb_csum_type,
	  "csum_type 7: only crc32c (1) is used here" },
	{ "size", mut_size, true, -TFS_ERR_invalid_sb_size,
	  "u64s 100000: fields end at 800688, past the copy's 32768 bytes" },
	{ "version", mut_version, false, -TFS_ERR_invalid_sb_version,
	  "version 9: this build reads 4 to 4" },
	{ "version_1", mut_version_1, false, -TFS_ERR_invalid_sb_version,
	  "version 1: this build reads 4 to 4" },
	{ "version_min", mut_version_min, false, -TFS_ERR_invalid_sb_version,
	  "version_min 5 not in [4, version 4]" },
	{ "features", mut_features, false, -TFS_ERR_invalid_sb_version,
	  "unknown incompatible features 0x4" },
	{ "layout_nr", mut_layout_nr, false, -TFS_ERR_invalid_sb_layout,
	  "layout: nr_superblocks 0 not in [1, 8]" },
	{ "layout_csum", mut_layout_csum, false, -TFS_ERR_invalid_sb_layout, NULL },
	{ "layout_overlap", mut_layout_overlap, false, -TFS_ERR_invalid_sb_layout,
	  "layout: copy 1 at 8192 overlaps copy 0 at 4096 (max size 32768)" },
	{ "layout_max", mut_layout_max, false, -TFS_ERR_invalid_sb_layout,
	  "layout: sb_max_size 5000 is not a power of two in [4096, 1048576]" },
	{ "layout_wrap", mut_layout_wrap, false, -TFS_ERR_invalid_sb_layout,
	  "layout: copy 1 at 18446744073709518848 (max size 32768) ends past 2^64" },
	{ "layout_past_dev", mut_layout_past_dev, false, -TFS_ERR_invalid_sb_layout,
	  "layout: copy 1 at 4190208 (max size 32768) ends past the device (4194304 bytes)" },
	{ "uuid", mut_uuid, false, -TFS_ERR_invalid_sb_uuid, "uuid is zero" },
	{ "user_uuid", mut_user_uuid, false, -TFS_ERR_invalid_sb_uuid, "user_uuid is zero" },
	{ "label", mut_label, false, -TFS_ERR_invalid_sb_label, "label: bad byte 0x0a at 3" },
	{ "label_utf8", mut_label_utf8, false, -TFS_ERR_invalid_sb_label,
	  "label: bad byte 0xff at 0" },
	{ "label_c1", mut_label_c1, false, -TFS_ERR_invalid_sb_label, "label: bad byte 0xc2 at 0" },
	{ "label_trunc", mut_label_trunc, false, -TFS_ERR_invalid_sb_label,
	  "label: bad byte 0xc3 at 1" },
	{ "block_size", mut_block_size, false, -TFS_ERR_invalid_sb_block_size,
	  "block_size 3000 is not a power of two in [512, 65536]" },
	{ "nr_devices_0", mut_nr_devices_0, false, -TFS_ERR_invalid_sb_nr_devices,
	  "nr_devices 0 not in [1, 16]" },
	{ "nr_devices_17", mut_nr_devices_17, false, -TFS_ERR_invalid_sb_nr_devices,
	  "nr_devices 17 not in [1, 16]" },
	{ "dev_idx", mut_dev_idx, false, -TFS_ERR_invalid_sb_dev_idx, "dev_idx 2 >= nr_devices 2" },
	{ "meta_repl", mut_meta_repl, false, -TFS_ERR_invalid_sb_options,
	  "metadata_replicas 5 not in [1, 4]" },
	{ "meta_req", mut_meta_req, false, -TFS_ERR_invalid_sb_options,
	  "metadata_replicas_required 2 not in [1, metadata_replicas 1]" },
	{ "data_req", mut_data_req, false, -TFS_ERR_invalid_sb_options,
	  "data_replicas_required 3 > nr_devices 2" },
	{ "csum_meta", mut_csum_meta, false, -TFS_ERR_invalid_sb_options,
	  "metadata_csum_type 9 unknown" },
	{ "error_action", mut_error_action, false, -TFS_ERR_invalid_sb_options,
	  "error_action 3 unknown" },
	{ "flags", mut_flags, false, -TFS_ERR_invalid_sb_options, "unknown flags 0x10" },
	{ "field_zero", mut_field_zero, false, -TFS_ERR_invalid_sb_field, "field 0: u64s 0" },
	{ "field_past", mut_field_past, false, -TFS_ERR_invalid_sb_field,
	  "field 0 (members): 1000 u64s run past the end" },
	{ "field_dup", mut_field_dup, false, -TFS_ERR_invalid_sb_field,
	  "field 1: a second members field" },
	{ "no_members", mut_no_members, false, -TFS_ERR_invalid_sb_members, "no members field" },
	{ "member_bytes", mut_member_bytes, false, -TFS_ERR_invalid_sb_members,
	  "members: member_bytes 12 is not a multiple of 8 of at least 80" },
	{ "nr_devices", mut_nr_devices, false, -TFS_ERR_invalid_sb_members,
	  "members: 2 entries but nr_devices 3" },
	{ "member_uuid", mut_member_uuid, false, -TFS_ERR_invalid_sb_members,
	  "member 1: uuid is zero" },
	{ "member_uuid_dup", mut_member_uuid_dup, false, -TFS_ERR_invalid_sb_members,
	  "member 1: same uuid as member 0" },
	{ "bucket_pow2", mut_bucket_pow2, false, -TFS_ERR_invalid_sb_members,
	  "member 1: bucket_size 12288 is not a power of two up to 1073741824" },
	{ "bucket_small", mut_bucket_small, false, -TFS_ERR_invalid_sb_members,
	  "member 1: bucket_size 2048 < block_size 4096" },
	{ "first_bucket", mut_first_bucket, false, -TFS_ERR_invalid_sb_members,
	  "member 1: first_bucket 9 >= nbuckets 8" },
	{ "few_buckets", mut_few_buckets, false, -TFS_ERR_invalid_sb_members,
	  "member 1: 25 buckets after first_bucket, fewer than 32" },
	{ "state", mut_state, false, -TFS_ERR_invalid_sb_members, "member 1: state 4 unknown" },
	{ "durability", mut_durability, false, -TFS_ERR_invalid_sb_members,
	  "member 1: durability 5 > 4" },
	{ "discard", mut_discard, false, -TFS_ERR_invalid_sb_members,
	  "member 1: discard 2 is not 0 or 1" },
	{ "member_label", mut_member_label, false, -TFS_ERR_invalid_sb_members,
	  "member 1: label: bad byte 0x01 at 0" },
	{ "first_in_sb", mut_first_in_sb, false, -TFS_ERR_invalid_sb_members,
	  "member 0: first_bucket 2 starts at 32768, inside the superblock area (ends at 69632)" },
	{ "dev_size", mut_dev_size, false, -TFS_ERR_invalid_sb_device_size,
	  "member 0: 512 buckets of 16.0 KiB (8.0 MiB) do not fit in the device (4.0 MiB)" },
	{ "journal_low", mut_journal_low, false, -TFS_ERR_invalid_sb_journal,
	  "journal: range 0 (buckets 4..) starts below first_bucket 5" },
	{ "journal_high", mut_journal_high, false, -TFS_ERR_invalid_sb_journal,
	  "journal: range 0 (8 buckets at 250) ends past nbuckets 256" },
	{ "journal_empty", mut_journal_empty, false, -TFS_ERR_invalid_sb_journal,
	  "journal: range 0 (at bucket 5) is empty" },
	{ "node_pow2", mut_node_pow2, false, -TFS_ERR_invalid_sb_btree_node_size,
	  "btree_node_size 3000 is not a power of two in [16384, 262144]" },
	{ "node_small", mut_node_small, false, -TFS_ERR_invalid_sb_btree_node_size,
	  "btree_node_size 2048 is not a power of two in [16384, 262144]" },
	{ "node_big", mut_node_big, false, -TFS_ERR_invalid_sb_btree_node_size,
	  "btree_node_size 524288 is not a power of two in [16384, 262144]" },
	{ "node_block", mut_node_block, false, -TFS_ERR_invalid_sb_btree_node_size,
	  "btree_node_size 16384 < block_size 32768" },
	{ "node_bucket", mut_node_bucket, false, -TFS_ERR_invalid_sb_members,
	  "member 0: bucket_size 16384 is not a multiple of btree_node_size 32768" },
	{ "sb_pad1", mut_sb_pad1, false, -TFS_ERR_invalid_sb_btree_node_size,
	  "pad1 byte 0 (offset 140) is 0x5a, must be 0" },
	{ "layout_uuid", mut_layout_uuid, false, -TFS_ERR_invalid_sb_layout,
	  "layout: uuid 10111111-1111-1111-1111-111111111111 differs from the superblock's uuid "
	  "11111111-1111-1111-1111-111111111111" },
	{ "layout_uuid_zero", mut_layout_uuid_zero, false, -TFS_ERR_invalid_sb_layout,
	  "layout: uuid is zero" },
	{ "layout_version", mut_layout_version, false, -TFS_ERR_invalid_sb_layout,
	  "layout: version 1, expected 2" },
	{ "sb_pad0", mut_sb_pad0, false, -TFS_ERR_invalid_sb_options,
	  "pad0 byte 0 (offset 111) is 0x5a, must be 0" },
	{ "sb_reserved", mut_sb_reserved, false, -TFS_ERR_invalid_sb_version,
	  "reserved byte 3 (offset 147) is 0x5a, must be 0" },
	{ "sb_reserved_last", mut_sb_reserved_last, false, -TFS_ERR_invalid_sb_version,
	  "reserved byte 31 (offset 175) is 0x01, must be 0" },
	{ "layout_pad0", mut_layout_pad0, false, -TFS_ERR_invalid_sb_layout,
	  "layout: pad0 byte 1 (offset 5) is 0x01, must be 0" },
	{ "layout_pad1", mut_layout_pad1, false, -TFS_ERR_invalid_sb_layout,
	  "layout: pad1 byte 0 (offset 18) is 0x07, must be 0" },
	{ "layout_pad2", mut_layout_pad2, false, -TFS_ERR_invalid_sb_layout,
	  "layout: pad2 byte 407 (offset 511) is 0x80, must be 0" },
	{ "members_pad0", mut_members_pad0, false, -TFS_ERR_invalid_sb_members,
	  "members: pad0 byte 1 (offset 11) is 0x02, must be 0" },
	{ "members_pad1", mut_members_pad1, false, -TFS_ERR_invalid_sb_members,
	  "members: pad1 byte 3 (offset 15) is 0x03, must be 0" },
	{ "member_pad0", mut_member_pad0, false, -TFS_ERR_invalid_sb_members,
	  "member 1: pad0 byte 0 (offset 39) is 0x5a, must be 0" },
	{ "journal_none", mut_journal_none, false, -TFS_ERR_invalid_sb_journal,
	  "journal: no journal field, but member 0 is rw" },
	{ "clean_flag", mut_clean_flag, false, -TFS_ERR_invalid_sb_clean,
	  "flag clean set but no clean field" },
	/* The checksum itself: no resum after the change. */
	{ "csum", mut_csum, true, -TFS_ERR_invalid_sb_csum, NULL },
};

static void test_each_error(void **state)
{
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tfs_sb_handle hs[2];
		struct printbuf err = PRINTBUF;
		int ret;

		make_sb(hs);
		cases[i].mutate(hs[0].sb);
		if (!cases[i].no_resum)
			resum(hs[0].sb);
		ret = tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err);
		if (ret != cases[i].code ||
		    (cases[i].msg && strcmp(printbuf_str(&err), cases[i].msg)))
			print_error("case %s: got %s \"%s\"\n", cases[i].name, tfs_err_str(ret),
				    printbuf_str(&err));
		assert_int_equal(ret, cases[i].code);
		if (cases[i].msg)
			assert_string_equal(printbuf_str(&err), cases[i].msg);
		else
			assert_true(err.pos > 0);
		/* Every validation code is in the invalid_sb class (EINVAL). */
		assert_true(tfs_err_matches(ret, TFS_ERR_invalid_sb));
		printbuf_exit(&err);
		tfs_sb_exit(&hs[0]);
		tfs_sb_exit(&hs[1]);
	}
}

static void test_truncated_copy(void **state)
{
	struct tfs_sb_handle hs[2];
	struct printbuf err = PRINTBUF;

	make_sb(hs);
	assert_int_equal(tfs_sb_validate(hs[0].sb, 100, DEV_SIZE, &err), -TFS_ERR_invalid_sb_size);
	assert_string_equal(printbuf_str(&err), "100 bytes, smaller than the fixed part (688)");
	printbuf_exit(&err);
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

static void test_clean_entries(void **state)
{
	struct tfs_sb_handle hs[2];
	struct printbuf err = PRINTBUF;
	__le64 entries[5] = { 0 };
	struct tfs_clean_entry *e = (void *)entries;

	make_sb(hs);
	e->u64s = cpu_to_le16(3);
	e->type = TFS_CLEAN_btree_root;
	e = (void *)(entries + 3);
	e->u64s = cpu_to_le16(2);
	e->type = TFS_CLEAN_btree_root;
	e->btree_id = 1;
	assert_int_equal(tfs_sb_set_clean(&hs[0], 42, entries, 5), 0);
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err), 0);

	unsigned n = 0;
	struct tfs_sb_field_clean *c = tfs_sb_clean(hs[0].sb);

	assert_non_null(c);
	assert_int_equal(le64_to_cpu(c->journal_seq), 42);
	for_each_clean_entry(c, e) n++;
	assert_int_equal(n, 2);

	/* An entry that runs past the field. */
	((struct tfs_clean_entry *)(c->entries))->u64s = cpu_to_le16(9);
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err),
			 -TFS_ERR_invalid_sb_clean);
	assert_string_equal(printbuf_str(&err), "clean: entry 0 (9 u64s) runs past the field");
	printbuf_reset(&err);
	/* The padding of the field and of an entry. */
	((struct tfs_clean_entry *)(c->entries))->u64s = cpu_to_le16(3);
	c->pad0 = cpu_to_le32(0x5a);
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err),
			 -TFS_ERR_invalid_sb_clean);
	assert_string_equal(printbuf_str(&err),
			    "clean: pad0 byte 0 (offset 12) is 0x5a, must be 0");
	printbuf_reset(&err);
	c->pad0 = 0;
	e = (void *)((__le64 *)c->entries + 3);
	e->pad[2] = 0x11;
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err),
			 -TFS_ERR_invalid_sb_clean);
	assert_string_equal(printbuf_str(&err),
			    "clean: entry 1: pad byte 2 (offset 7) is 0x11, must be 0");
	printbuf_reset(&err);
	e->pad[2] = 0;
	((struct tfs_clean_entry *)(c->entries))->u64s = 0;
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err),
			 -TFS_ERR_invalid_sb_clean);
	assert_string_equal(printbuf_str(&err), "clean: entry 0 has u64s 0");

	/* A length whose header-inclusive size wraps is refused, nothing copied. */
	assert_int_equal(tfs_sb_set_clean(&hs[0], 1, entries, UINT32_MAX - 1),
			 -TFS_ERR_invalid_sb_size);
	assert_int_equal(le64_to_cpu(tfs_sb_clean(hs[0].sb)->journal_seq), 42);

	tfs_sb_clear_clean(&hs[0]);
	assert_null(tfs_sb_clean(hs[0].sb));
	resum(hs[0].sb);
	printbuf_reset(&err);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE, &err), 0);
	printbuf_exit(&err);
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

/*
 * The reviewer's layout: a backup at 2^64 - 32 KiB made the end of the
 * superblock area wrap to 0, so first_bucket 0 and journal buckets 0..7
 * (over the layout and both copies) were accepted.
 */
static void test_layout_overflow(void **state)
{
	struct tfs_sb_handle hs[2];
	struct printbuf err = PRINTBUF;
	struct tfs_sb *sb;
	u64 b[8];

	make_sb(hs);
	sb = hs[0].sb;
	sb->layout.sb_offset[1] = cpu_to_le64(0ULL - 32768);
	sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout));
	assert_int_equal(tfs_sb_layout_validate(&sb->layout, &err), -TFS_ERR_invalid_sb_layout);
	printbuf_reset(&err);
	tfs_sb_member(sb, 0)->first_bucket = 0;
	for (unsigned i = 0; i < 8; i++)
		b[i] = i;
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b, 8), 0);
	resum(sb);
	assert_int_equal(tfs_sb_validate(sb, hs[0].sb_bytes, 0, &err), -TFS_ERR_invalid_sb_layout);
	printbuf_reset(&err);

	/* A sane layout but first_bucket 0: inside the superblock area. */
	sb->layout = hs[1].sb->layout;
	resum(sb);
	assert_int_equal(tfs_sb_validate(sb, hs[0].sb_bytes, 0, &err), -TFS_ERR_invalid_sb_members);
	assert_string_equal(
		printbuf_str(&err),
		"member 0: first_bucket 0 starts at 0, inside the superblock area (ends at 69632)");
	printbuf_exit(&err);
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

/* The journal's length: mkfs's minimum is validation's; no field only when not rw. */
static void test_journal_min(void **state)
{
	struct tfs_sb_handle hs[2];
	u64 first, b[TFS_JOURNAL_MIN_BUCKETS];
	char msg[64];

	make_sb(hs);
	first = le64_to_cpu(tfs_sb_member(hs[0].sb, 0)->first_bucket);
	for (unsigned i = 0; i < TFS_JOURNAL_MIN_BUCKETS; i++)
		b[i] = first + TFS_JOURNAL_MIN_BUCKETS - 1 - i;
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b, TFS_JOURNAL_MIN_BUCKETS), 0);
	resum(hs[0].sb);
	expect(&hs[0], 0, "");
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b, TFS_JOURNAL_MIN_BUCKETS - 1), 0);
	resum(hs[0].sb);
	snprintf(msg, sizeof(msg), "journal: %u buckets, fewer than %u",
		 TFS_JOURNAL_MIN_BUCKETS - 1, TFS_JOURNAL_MIN_BUCKETS);
	expect(&hs[0], -TFS_ERR_invalid_sb_journal, msg);
	/* The minimum holds for any journal field, whatever the state. */
	tfs_sb_member(hs[0].sb, 0)->state = TFS_MEMBER_ro;
	resum(hs[0].sb);
	expect(&hs[0], -TFS_ERR_invalid_sb_journal, msg);
	/* No journal field: fine for ro, failed and spare, not for rw. */
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], NULL, 0), 0);
	for (unsigned st = 0; st < TFS_MEMBER_STATE_NR; st++) {
		tfs_sb_member(hs[0].sb, 0)->state = (u8)st;
		resum(hs[0].sb);
		expect(&hs[0], st == TFS_MEMBER_rw ? -TFS_ERR_invalid_sb_journal : 0,
		       st == TFS_MEMBER_rw ? "journal: no journal field, but member 0 is rw" : "");
	}
	/* Only this device's member counts: member 1's state says nothing here. */
	tfs_sb_member(hs[0].sb, 0)->state = TFS_MEMBER_spare;
	tfs_sb_member(hs[0].sb, 1)->state = TFS_MEMBER_rw;
	resum(hs[0].sb);
	expect(&hs[0], 0, "");
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

/*
 * A member a few bytes larger than the device: the rounded sizes read the
 * same, so the message gives both in bytes.
 */
static void test_device_size_exact(void **state)
{
	struct tfs_sb_handle hs[2];
	struct printbuf err = PRINTBUF;

	make_sb(hs);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, DEV_SIZE - 512, &err),
			 -TFS_ERR_invalid_sb_device_size);
	assert_string_equal(printbuf_str(&err),
			    "member 0: 256 buckets of 16.0 KiB (4194304 bytes) do not fit in the "
			    "device (4193792 bytes)");
	printbuf_exit(&err);
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

/* Appends a field of any type (even a second one of a type) after the others. */
static void append_field(struct tfs_sb_handle *h, unsigned type, unsigned u64s)
{
	struct tfs_sb *sb = h->sb;
	struct tfs_sb_field *f = (void *)(sb->_data + le32_to_cpu(sb->u64s));

	assert_true(tfs_sb_bytes(sb) + 8 * u64s <= h->sb_bytes);
	memset(f, 0, 8 * u64s);
	f->u64s = cpu_to_le32(u64s);
	f->type = cpu_to_le32(type);
	sb->u64s = cpu_to_le32(le32_to_cpu(sb->u64s) + u64s);
	resum(sb);
}

/*
 * One rule for fields (docs/on-disk-format.md): a reader skips every field
 * whose type it does not know, however many there are and whatever the
 * type's number; each known type appears at most once.
 */
static void test_unknown_fields(void **state)
{
	static const unsigned types[] = { 4, 7, 31, 32, 50, 0xffffffff };

	for (unsigned i = 0; i < ARRAY_SIZE(types); i++) {
		struct tfs_sb_handle hs[2];

		make_sb(hs);
		append_field(&hs[0], types[i], 2);
		expect(&hs[0], 0, "");
		append_field(&hs[0], types[i], 3);
		expect(&hs[0], 0, "");
		tfs_sb_exit(&hs[0]);
		tfs_sb_exit(&hs[1]);
	}
	for (unsigned t = 1; t < TFS_SB_FIELD_NR; t++) {
		struct tfs_sb_handle hs[2];
		char msg[64];

		make_sb(hs);
		/* make_sb() has members and journal; a clean field is added first. */
		unsigned idx = 2, u64s = (unsigned)sizeof(struct tfs_sb_field_clean) / 8;

		if (!tfs_sb_field_get(hs[0].sb, t)) {
			append_field(&hs[0], t, u64s);
			expect(&hs[0], 0, "");
			idx++;
		}
		append_field(&hs[0], t, u64s);
		snprintf(msg, sizeof(msg), "field %u: a second %s field", idx,
			 tfs_sb_field_type_str(t));
		expect(&hs[0], -TFS_ERR_invalid_sb_field, msg);
		tfs_sb_exit(&hs[0]);
		tfs_sb_exit(&hs[1]);
	}
}

/*
 * The journal field is ranges: overlapping ones, a count past the one
 * limit, and a field that is not whole ranges are refused; many buckets
 * take one range.
 */
static void test_journal_ranges(void **state)
{
	struct tfs_sb_handle hs[2];
	struct tfs_sb_field_journal *j;
	struct tfs_member *m;
	u64 b[9] = { 5, 6, 7, 8, 9, 10, 11, 12, 8 };
	char msg[96];
	int ret;

	make_sb(hs);
	/* 5-12 and 8 again: stored as two ranges, which overlap. */
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b, 9), 0);
	assert_int_equal(tfs_sb_journal_nr_ranges(tfs_sb_journal(hs[0].sb)), 2);
	resum(hs[0].sb);
	expect(&hs[0], -TFS_ERR_invalid_sb_journal, "journal: bucket 8 listed twice");
	/* Two ranges that do not overlap, the later one first: fine. */
	u64 b2[8] = { 9, 10, 11, 12, 5, 6, 7, 8 };

	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b2, 8), 0);
	assert_int_equal(tfs_sb_journal_nr_ranges(tfs_sb_journal(hs[0].sb)), 2);
	resum(hs[0].sb);
	expect(&hs[0], 0, "");

	/* A member large enough for the limit: one range of exactly it is fine. */
	m = tfs_sb_member(hs[0].sb, 0);
	m->nbuckets = cpu_to_le64(1ULL << 30);
	assert_int_equal(tfs_sb_set_journal_buckets(&hs[0], b, 8), 0);
	j = tfs_sb_journal(hs[0].sb);
	j->ranges[0].start = cpu_to_le64(5);
	j->ranges[0].nr = cpu_to_le64(TFS_JOURNAL_MAX_BUCKETS);
	resum(hs[0].sb);
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, 0, &err), 0);
	j->ranges[0].nr = cpu_to_le64(TFS_JOURNAL_MAX_BUCKETS + 1ULL);
	resum(hs[0].sb);
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, 0, &err),
			 -TFS_ERR_invalid_sb_journal);
	snprintf(msg, sizeof(msg), "journal: more than %u buckets", TFS_JOURNAL_MAX_BUCKETS);
	assert_string_equal(printbuf_str(&err), msg);
	printbuf_exit(&err);

	/* A field of a header and one and a half ranges. */
	assert_non_null(tfs_sb_field_resize(&hs[0], TFS_SB_FIELD_journal, 4, &ret));
	resum(hs[0].sb);
	err = PRINTBUF;
	assert_int_equal(tfs_sb_validate(hs[0].sb, hs[0].sb_bytes, 0, &err),
			 -TFS_ERR_invalid_sb_journal);
	assert_string_equal(
		printbuf_str(&err),
		"journal: field of 4 u64s is not a header and whole ranges (2 u64s each)");
	printbuf_exit(&err);
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

static void test_label_utf8_ok(void **state)
{
	struct tfs_sb_handle hs[2];

	make_sb(hs);
	memcpy(hs[0].sb->label, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14);
	resum(hs[0].sb);
	expect(&hs[0], 0, "");
	tfs_sb_exit(&hs[0]);
	tfs_sb_exit(&hs[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_each_error),
		cmocka_unit_test(test_truncated_copy),
		cmocka_unit_test(test_clean_entries),
		cmocka_unit_test(test_layout_overflow),
		cmocka_unit_test(test_label_utf8_ok),
		cmocka_unit_test(test_journal_min),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_device_size_exact),
		cmocka_unit_test(test_journal_ranges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
