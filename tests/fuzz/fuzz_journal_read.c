// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "journal_read": the whole journal read, tfs_journal_read(),
 * over one or two members on memory devices, then what uses its result:
 * tfs_journal_read_to_text() and tfs_journal_replay().
 *
 * Input: members described as struct fuzz_journal says (fuzz.h): a 4-byte
 * header (members, block and bucket size, buckets, pin fifo, a bucket whose
 * reads fail, FUZZ_FIX), then the buckets' contents.
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

static void check_read(const struct tfs_journal_read *r, const struct fuzz_journal *g, u64 magic,
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
	struct fuzz_journal fj;
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	int ret;

	if (!fuzz_journal_build(&fj, data, size, false))
		return 0;
	ret = tfs_journal_read(fj.devs, fj.nr_devs, &fj.opts, &r, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	fuzz_check(!r == (ret && ret != -TFS_ERR_journal_gap && ret != -TFS_ERR_journal_empty),
		   "a result with an error other than gap or empty, or none without one");
	if (r)
		check_read(r, &fj, fj.magic, ret);
	tfs_journal_read_free(r);
	fuzz_journal_exit(&fj);
	printbuf_exit(&err);
	return 0;
}
