// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "sb": one superblock copy through tfs_sb_validate() (which
 * runs tfs_sb_layout_validate() on the embedded layout), and, when it is
 * valid, through everything that trusts a valid copy: the accessors, the
 * clean entries, tfs_sb_to_text(), tfs_sb_to_json() and the field editing
 * of a handle.
 *
 * Input: a mode byte, then the copy (struct tfs_sb and its fields).
 *	bit 0		FUZZ_FIX: magics, u64s and checksums repaired
 *	bits 1-3	the device size s: 0 unknown, else 2^(15 + 3s) bytes
 *			(256 KiB .. 64 GiB)
 *
 * What must hold: a failure names its reason; a valid copy has this
 * device's member, its journal buckets inside the member's bucket range,
 * text and valid JSON; and removing the clean field or rewriting the
 * journal field with the same buckets leaves it valid.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tests/fuzz/fuzz.h"

/* The promises a valid copy keeps (super.h, "Invariants"). */
static void check_valid(const struct tfs_sb *sb)
{
	const struct tfs_member *m = tfs_sb_this_member(sb);
	unsigned nr = 0;
	u64 *jb = NULL;

	if (tfs_sb_journal_buckets(sb, &jb, &nr))
		abort(); /* only -ENOMEM */
	fuzz_check(m, "a valid copy without this device's member");
	fuzz_check(tfs_sb_bucket_size(sb), "a valid copy with bucket size 0");
	for (unsigned i = 0; i < sb->nr_devices; i++)
		fuzz_check(tfs_sb_member(sb, i), "a member of a valid copy missing");
	for (unsigned i = 0; jb && i < nr; i++)
		fuzz_check(jb[i] >= le64_to_cpu(m->first_bucket) &&
				   jb[i] < le64_to_cpu(m->nbuckets),
			   "a journal bucket outside the member");
	free(jb);

	struct tfs_sb_field_clean *c = tfs_sb_clean(sb);
	const struct tfs_clean_entry *e;
	unsigned n = 0;

	if (c)
		for_each_clean_entry(c, e) n += e->type;
	(void)n;

	struct tfs_sb_to_text_opts opts = { .layout = true };
	struct printbuf out = PRINTBUF;

	tfs_sb_to_text(&out, sb, &opts);
	fuzz_check_printbuf(&out);
	fuzz_check(out.pos, "no text for a valid copy");
	printbuf_reset(&out);
	tfs_sb_to_json(&out, sb, &opts);
	fuzz_check_printbuf(&out);
	fuzz_check(out.allocation_failure || fuzz_json_valid(printbuf_str(&out)),
		   "tfs_sb_to_json() is not valid JSON");
	printbuf_exit(&out);
}

/* Edits that keep a copy valid must keep it valid (tfs_sb_field_resize()'s moves). */
static void check_edits(const struct tfs_sb *sb, size_t bytes, u64 dev_size)
{
	struct tfs_sb_handle h = { 0 };
	struct printbuf err = PRINTBUF;
	unsigned nr = 0;
	u64 *buckets = NULL;
	int ret;

	h.sb_bytes = le32_to_cpu(sb->layout.sb_max_size);
	h.sb = calloc(1, h.sb_bytes);
	if (!h.sb)
		abort();
	memcpy(h.sb, sb, tfs_sb_bytes(sb));

	if (tfs_sb_journal_buckets(sb, &buckets, &nr))
		abort(); /* only -ENOMEM */
	if (buckets) {
		ret = tfs_sb_set_journal_buckets(&h, buckets, nr);
		fuzz_check(!ret, "rewriting the journal field with its own buckets failed");
	}
	tfs_sb_clear_clean(&h);
	h.sb->csum = cpu_to_le32(tfs_sb_csum(h.sb));
	ret = tfs_sb_validate(h.sb, h.sb_bytes, dev_size, &err);
	if (ret)
		fuzz_fail(__FILE__, __LINE__, printbuf_str(&err),
			  "invalid after removing the clean field and rewriting the journal");
	fuzz_check(!tfs_sb_clean(h.sb), "the clean field survived tfs_sb_clear_clean()");
	(void)bytes;
	free(buckets);
	printbuf_exit(&err);
	tfs_sb_exit(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;

	unsigned mode = data[0], s = (mode >> 1) & 7;
	u64 dev_size = s ? 1ULL << (15 + 3 * s) : 0;
	size_t bytes = size - 1;
	struct tfs_sb *sb = fuzz_dup(data + 1, bytes);
	struct printbuf err = PRINTBUF;
	int ret;

	if (mode & FUZZ_FIX)
		fuzz_fix_sb(sb, bytes);
	ret = tfs_sb_validate(sb, bytes, dev_size, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	if (!ret) {
		check_valid(sb);
		check_edits(sb, bytes, dev_size);
	}
	printbuf_exit(&err);
	free(sb);
	return 0;
}
