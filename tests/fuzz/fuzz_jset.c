// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "jset": one journal entry through tfs_jset_validate(), and,
 * when it is valid, through what trusts a valid entry: tfs_jset_to_text()
 * and tfs_journal_replay() (every key and sub-entry handed to callbacks).
 *
 * Input: a mode byte, then the entry (struct jset and its sub-entries), as
 * found at some offset of a bucket with len = the rest of the input.
 *	bit 0	FUZZ_FIX: the magic of fuzz_uuid, u64s cut to fit, checksum
 *
 * What must hold: a failure names its reason; in a valid entry every key
 * replay hands out lies inside the entry and has at least one word.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "tests/fuzz/fuzz.h"

struct replay_ctx {
	const struct jset *j;
	size_t len;
	u64 sum;
};

/* Reads every word of the key, so ASan sees one that runs out of the entry. */
static int replay_key(void *p, u64 seq, unsigned btree_id, unsigned level, const __le64 *key)
{
	struct replay_ctx *ctx = p;
	unsigned u64s = tfs_jkey_u64s(key);
	const u8 *start = (const u8 *)ctx->j, *k = (const u8 *)key;

	fuzz_check(u64s, "replay handed out a key of 0 words");
	fuzz_check(k >= start + sizeof(struct jset) && k + (size_t)u64s * 8 <= start + ctx->len,
		   "replay handed out a key outside the entry");
	for (unsigned i = 0; i < u64s; i++)
		ctx->sum += le64_to_cpu(key[i]);
	return 0;
}

static int replay_entry(void *p, u64 seq, const struct jset_entry *e)
{
	struct replay_ctx *ctx = p;
	const u8 *start = (const u8 *)ctx->j, *x = (const u8 *)e;
	size_t bytes = sizeof(*e) + (size_t)le16_to_cpu(e->u64s) * 8;

	fuzz_check(x >= start + sizeof(struct jset) && x + bytes <= start + ctx->len,
		   "replay handed out a sub-entry outside the entry");
	for (unsigned i = 0; i < le16_to_cpu(e->u64s); i++)
		ctx->sum += le64_to_cpu(e->_data[i]);
	return 0;
}

/* Replays the one entry as a journal read holding only it would. */
static void replay(const struct jset *j)
{
	struct tfs_journal_read_entry e = { .j = (struct jset *)j, .seq = le64_to_cpu(j->seq) };
	struct tfs_journal_read r = {
		.entries = &e,
		.nr = 1,
		.newest_seq = e.seq,
		.last_seq = le64_to_cpu(j->last_seq),
		.max_seq = e.seq,
	};
	struct replay_ctx ctx = { .j = j, .len = tfs_jset_bytes(le32_to_cpu(j->u64s)) };
	struct tfs_journal_replay_ops ops = { .key = replay_key, .entry = replay_entry };

	fuzz_check(!tfs_journal_replay(&r, &ops, &ctx), "replay failed with callbacks that cannot");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;

	unsigned mode = data[0];
	size_t len = size - 1;
	u64 magic = tfs_jset_magic(fuzz_uuid);
	struct jset *j = fuzz_dup(data + 1, len);
	struct printbuf err = PRINTBUF;
	int ret;

	if (mode & FUZZ_FIX)
		fuzz_fix_jset(j, len, magic);
	ret = tfs_jset_validate(j, len, magic, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	if (!ret) {
		struct printbuf out = PRINTBUF;

		fuzz_check(tfs_jset_bytes(le32_to_cpu(j->u64s)) <= len,
			   "a valid entry runs past len");
		tfs_jset_to_text(&out, j);
		fuzz_check_printbuf(&out);
		fuzz_check(out.pos, "no text for a valid entry");
		printbuf_exit(&out);
		replay(j);
	}
	printbuf_exit(&err);
	free(j);
	return 0;
}
