// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "journal_restart": what a mount does with the journal it
 * found.  tfs_journal_read() over one or two members, then, when the read
 * is one a mount would continue from (success, or journal_empty),
 * tfs_journal_start() after it, one commit made durable with
 * tfs_journal_flush_seq(), tfs_journal_stop() -- without
 * tfs_journal_replay_done(), as if the machine stopped before the replayed
 * updates were written back -- and a second read.
 *
 * Input: as target journal_read (struct fuzz_journal, fuzz.h); the members
 * are writable.  Geometries the journal refuses (fewer than 3 buckets, a
 * bucket smaller than two blocks, a pin fifo below 16) end the run after
 * the first read.
 *
 * What must hold (journal.h, "Read and replay"):
 *  - start, the commit and stop succeed or say why (a full journal or pin
 *    fifo is a reason not to commit: the reservation does not wait);
 *  - the second read succeeds and replays everything the first one would
 *    have replayed, byte for byte, none of it blacklisted: replay pins kept
 *    it, so the journal did not overwrite it;
 *  - it never replays an entry the first read did not trust (after the
 *    newest flush entry, or blacklisted): new seqs follow every seq seen,
 *    and the blacklist voids the rest;
 *  - the commit is there, after every seq of the first read, with its key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "tests/fuzz/fuzz.h"

/* What a read would hand to replay (tfs_journal_replay()'s rule). */
static bool replayed(const struct tfs_journal_read *r, const struct tfs_journal_read_entry *e)
{
	return r->newest_seq && e->seq >= r->last_seq && e->seq <= r->newest_seq && !e->blacklisted;
}

static const struct tfs_journal_read_entry *find(const struct tfs_journal_read *r, u64 seq)
{
	for (unsigned i = 0; i < r->nr; i++)
		if (r->entries[i].seq == seq)
			return &r->entries[i];
	return NULL;
}

/* The marker key committed after the restart: 3 words, id 0xfeed. */
#define MARK_ID 0xfeedULL

static bool has_mark(const struct jset *js)
{
	const __le64 *end = js->_data + le32_to_cpu(js->u64s);

	for (const struct jset_entry *e = (const void *)js->_data; (const __le64 *)e < end;
	     e = tfs_jset_entry_next((struct jset_entry *)e))
		if (e->type == TFS_JSET_ENTRY_btree_keys && le16_to_cpu(e->u64s) == 3 &&
		    le64_to_cpu(e->_data[0]) == (3 | MARK_ID << 32))
			return true;
	return false;
}

/* Starts after r, commits once; the seq made durable, 0 when none was. */
static u64 restart(struct fuzz_journal *fj, const struct tfs_journal_read *r)
{
	struct tfs_journal *j = NULL;
	struct tfs_journal_res res;
	struct printbuf err = PRINTBUF;
	u64 seq = 0;
	int ret;

	ret = tfs_journal_init(&j, fj->devs, fj->nr_devs, &fj->opts, &err);
	fuzz_check(!ret, printbuf_str(&err));
	ret = tfs_journal_start(j, r);
	/* Replay's seqs must fit the pin fifo (start says so and refuses). */
	if (ret) {
		fuzz_check(ret == -TFS_ERR_journal_pin_full, tfs_err_str(ret));
		goto out;
	}
	ret = tfs_journal_res_get(j, &res, tfs_jset_entry_u64s(3), TFS_JOURNAL_RES_NONBLOCK);
	if (!ret) {
		__le64 *k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 3);

		k[0] = cpu_to_le64(3 | MARK_ID << 32);
		k[1] = cpu_to_le64(res.seq);
		k[2] = 0;
		tfs_journal_res_put(j, &res);
		ret = tfs_journal_flush_seq(j, res.seq);
		fuzz_check(!ret, tfs_err_str(ret));
		seq = res.seq;
	} else {
		/* The replayed seqs may fill the journal: a wait, never an error. */
		fuzz_check(tfs_err_matches(ret, EAGAIN), tfs_err_str(ret));
	}
	ret = tfs_journal_stop(j);
	fuzz_check(!ret, tfs_err_str(ret));
out:
	tfs_journal_exit(j);
	printbuf_exit(&err);
	return seq;
}

/* With TFS_FUZZ_VERBOSE, the read as list-journal shows it. */
static void show(const char *what, const struct tfs_journal_read *r)
{
	struct printbuf out = PRINTBUF;

	if (!r || !getenv("TFS_FUZZ_VERBOSE"))
		return;
	tfs_journal_read_to_text(&out, r, 0, 0);
	fprintf(stderr, "%s:\n%s\n", what, printbuf_str(&out));
	printbuf_exit(&out);
}

static void check_again(const struct tfs_journal_read *r, const struct tfs_journal_read *r2,
			u64 seq)
{
	for (unsigned i = 0; i < r->nr; i++) {
		const struct tfs_journal_read_entry *e = &r->entries[i], *e2 = find(r2, e->seq);

		if (replayed(r, e)) {
			fuzz_check(e2 && replayed(r2, e2), "an entry replay needs was lost");
			fuzz_check(!memcmp(e->j, e2->j, tfs_jset_bytes(le32_to_cpu(e->j->u64s))),
				   "an entry replay needs changed");
		} else if (e->seq > r->newest_seq || e->blacklisted) {
			fuzz_check(!e2 || !replayed(r2, e2), "an untrusted entry is replayed");
		}
	}
	if (seq) {
		const struct tfs_journal_read_entry *e2 = find(r2, seq);

		fuzz_check(seq > r->max_seq, "a new seq reuses a seq seen");
		fuzz_check(e2 && replayed(r2, e2) && has_mark(e2->j),
			   "the commit made durable is not replayed");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_journal fj;
	struct tfs_journal_read *r = NULL, *r2 = NULL;
	struct printbuf err = PRINTBUF;
	int ret;

	if (!fuzz_journal_build(&fj, data, size, true))
		return 0;
	fj.opts.max_entry_size = fj.bucket_size;
	fj.opts.write_delay_ms = 1;
	ret = tfs_journal_read(fj.devs, fj.nr_devs, &fj.opts, &r, &err);
	fuzz_report(ret, &err);
	if ((ret && ret != -TFS_ERR_journal_empty) || fj.nr_buckets < 3 ||
	    fj.bucket_size < 2 * fj.block_size || fj.opts.pin_fifo_size < 16)
		goto out;

	u64 seq = restart(&fj, r);

	/* The failing reads were the first mount's trouble; the next one reads all. */
	for (unsigned d = 0; d < fj.nr_devs; d++)
		fuzz_membdev_fail_reads(fj.bdevs[d], 0, 0, 0);
	printbuf_reset(&err);
	ret = tfs_journal_read(fj.devs, fj.nr_devs, &fj.opts, &r2, &err);
	fuzz_report(ret, &err);
	if (seq || r->newest_seq)
		fuzz_check(!ret, printbuf_str(&err));
	show("first read", r);
	show("after the restart", r2);
	if (r2)
		check_again(r, r2, seq);
out:
	tfs_journal_read_free(r);
	tfs_journal_read_free(r2);
	fuzz_journal_exit(&fj);
	printbuf_exit(&err);
	return 0;
}
