// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "journal_read": the whole journal read, tfs_journal_read(),
 * over one or two members on memory devices, then what uses its result:
 * tfs_journal_read_to_text() and tfs_journal_replay().
 *
 * Input: a 4-byte header, then the bucket contents: member 0's buckets in
 * ring order, then member 1's (zero past the input's end).  Bucket i of a
 * member is device bucket i + 1 (bucket 0 stays zero, as a superblock
 * area would).
 *	h[0] bit 0	FUZZ_FIX: in every bucket, each block whose magic is
 *			within 8 bits of the right one gets the right magic, a
 *			u64s that fits the bucket and a right checksum, and the
 *			walk goes on after it as the reader's does
 *	h[0] bit 1	two members (else one)
 *	h[0] bit 2	member 1 holds member 0's bytes (a replica) instead of
 *			its own
 *	h[0] bit 3	reads of one bucket fail with EIO (h[3])
 *	h[1]		block size 512 << (h[1] & 3); bucket size block size
 *			<< ((h[1] >> 2) & 3); pin fifo size 2^(h[1] >> 4),
 *			the default (1024) for 0
 *	h[2]		buckets per member: 1 + h[2] % 8
 *	h[3]		the failing bucket: member (h[3] >> 4) & 1, index
 *			(h[3] & 15) % buckets
 *
 * What must hold: a failure names its reason; a result (also the one that
 * comes with journal_gap and journal_empty) lists each seq once, in order,
 * every entry valid; the newest flush entry is there and not blacklisted;
 * last_seq <= newest_seq <= max_seq; each member's next write position is
 * inside its buckets; to_text and replay go through it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "tests/fuzz/fuzz.h"

#define HDR 4
#define MAX_BUCKETS 8

struct geometry {
	u32 block_size, bucket_size;
	unsigned nr_devs, nr_buckets;
};

/* FUZZ_FIX over one bucket, walking it as journal_read_dev() does. */
static void fix_bucket(u8 *b, const struct geometry *g, u64 magic)
{
	for (u32 off = 0; off + sizeof(struct jset) <= g->bucket_size;) {
		struct jset *js = (void *)(b + off);

		if (__builtin_popcountll(le64_to_cpu(js->magic) ^ magic) > 8) {
			off += g->block_size;
			continue;
		}
		fuzz_fix_jset(js, g->bucket_size - off, magic);
		off += round_up(tfs_jset_bytes(le32_to_cpu(js->u64s)), g->block_size);
	}
}

static int replay_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *key)
{
	unsigned u64s = tfs_jkey_u64s(key);

	fuzz_check(u64s, "replay handed out a key of 0 words");
	for (unsigned i = 0; i < u64s; i++)
		*(u64 *)ctx += le64_to_cpu(key[i]);
	return 0;
}

static int replay_entry(void *ctx, u64 seq, const struct jset_entry *e)
{
	for (unsigned i = 0; i < le16_to_cpu(e->u64s); i++)
		*(u64 *)ctx += le64_to_cpu(e->_data[i]);
	return 0;
}

static void check_read(const struct tfs_journal_read *r, const struct geometry *g, u64 magic,
		       int ret)
{
	struct printbuf out = PRINTBUF;
	bool newest_found = !r->newest_seq;
	u64 sum = 0;

	for (unsigned i = 0; i < r->nr; i++) {
		const struct tfs_journal_read_entry *e = &r->entries[i];
		size_t bytes = tfs_jset_bytes(le32_to_cpu(e->j->u64s));

		fuzz_check(!i || r->entries[i - 1].seq < e->seq, "entries not in strict seq order");
		fuzz_check(e->seq == le64_to_cpu(e->j->seq), "an entry's seq is not its jset's");
		fuzz_check(e->seq <= r->max_seq, "an entry above max_seq");
		fuzz_check(e->nr_devs >= 1 && e->nr_devs <= TFS_JOURNAL_MAX_DEVS,
			   "an entry on no member");
		fuzz_check(!tfs_jset_validate(e->j, bytes, magic, &out),
			   "an entry read is invalid");
		if (e->seq == r->newest_seq) {
			newest_found = true;
			fuzz_check(!e->blacklisted &&
					   !(le32_to_cpu(e->j->flags) & TFS_JSET_no_flush),
				   "the newest flush entry is blacklisted or no_flush");
		}
	}
	fuzz_check(newest_found, "newest_seq is not an entry read");
	if (!ret)
		fuzz_check(r->last_seq <= r->newest_seq && r->newest_seq <= r->max_seq,
			   "last_seq, newest_seq and max_seq out of order");
	for (unsigned i = 0; i < r->nr_devs; i++) {
		const struct tfs_journal_read_dev *rd = &r->devs[i];

		fuzz_check(rd->nr_buckets == g->nr_buckets && rd->cur_idx < g->nr_buckets &&
				   rd->cur_offset <= g->bucket_size,
			   "a member's next write position is outside its buckets");
	}
	tfs_journal_read_to_text(&out, r, 0, 0);
	fuzz_check_printbuf(&out);
	printbuf_exit(&out);

	struct tfs_journal_replay_ops ops = { .key = replay_key, .entry = replay_entry };

	fuzz_check(!tfs_journal_replay(r, &ops, &sum), "replay failed with callbacks that cannot");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HDR)
		return 0;

	const u8 *h = data;
	struct geometry g = {
		.block_size = 512U << (h[1] & 3),
		.nr_devs = h[0] & 2 ? 2 : 1,
		.nr_buckets = 1 + h[2] % MAX_BUCKETS,
	};
	g.bucket_size = g.block_size << ((h[1] >> 2) & 3);

	u64 magic = tfs_jset_magic(fuzz_uuid);
	const u8 *in = data + HDR;
	size_t in_len = size - HDR, pos = 0;
	struct tfs_bdev *bdevs[2] = { 0 };
	u64 buckets[MAX_BUCKETS];
	struct tfs_journal_dev devs[2];
	struct tfs_journal_opts opts;
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	u8 *b = malloc(g.bucket_size);
	int ret;

	if (!b)
		abort();
	for (unsigned i = 0; i < g.nr_buckets; i++)
		buckets[i] = i + 1;
	for (unsigned d = 0; d < g.nr_devs; d++) {
		bdevs[d] = fuzz_membdev_create(d ? "fuzz-j1" : "fuzz-j0",
					       (u64)(g.nr_buckets + 1) * g.bucket_size, 512);
		devs[d] = (struct tfs_journal_dev){
			.bdev = bdevs[d],
			.dev_idx = d,
			.bucket_size = g.bucket_size,
			.buckets = buckets,
			.nr_buckets = g.nr_buckets,
		};
		if (d && (h[0] & 4))
			pos = 0; /* the replica: member 0's bytes again */
		for (unsigned i = 0; i < g.nr_buckets; i++) {
			size_t n = pos < in_len ? min_t(size_t, in_len - pos, g.bucket_size) : 0;

			memset(b, 0, g.bucket_size);
			memcpy(b, in + pos, n);
			pos += n;
			if (h[0] & FUZZ_FIX)
				fix_bucket(b, &g, magic);
			fuzz_membdev_put(bdevs[d], buckets[i] * g.bucket_size, b, g.bucket_size);
		}
	}
	if (h[0] & 8) {
		unsigned d = (h[3] >> 4) & 1, i = (h[3] & 15) % g.nr_buckets;

		if (d < g.nr_devs)
			fuzz_membdev_fail_reads(bdevs[d], buckets[i] * g.bucket_size, g.bucket_size,
						-EIO);
	}

	tfs_journal_opts_default(&opts);
	memcpy(opts.uuid, fuzz_uuid, sizeof(opts.uuid));
	opts.block_size = g.block_size;
	if (h[1] >> 4)
		opts.pin_fifo_size = 1U << (h[1] >> 4);

	ret = tfs_journal_read(devs, g.nr_devs, &opts, &r, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	fuzz_check(!r == (ret && ret != -TFS_ERR_journal_gap && ret != -TFS_ERR_journal_empty),
		   "a result with an error other than gap or empty, or none without one");
	if (r)
		check_read(r, &g, magic, ret);
	tfs_journal_read_free(r);
	for (unsigned d = 0; d < g.nr_devs; d++)
		tfs_bdev_close(bdevs[d]);
	printbuf_exit(&err);
	free(b);
	return 0;
}
