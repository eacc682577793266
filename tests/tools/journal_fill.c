// SPDX-License-Identifier: GPL-2.0
/*
 * journal_fill: writes journal entries onto a mkfs'ed filesystem so the
 * tools' tests have a journal to list (there is no filesystem writing one
 * yet).
 *
 *	journal_fill COMMITS TAIL DEV...
 *
 * Continues after what is on disk, commits COMMITS keys (id and value = the
 * commit number, a flush every 5 commits and at the end; the first commit
 * also carries a btree_root and a usage sub-entry), then TAIL more keys
 * that are written NO_FLUSH and never flushed before the journal is halted,
 * so they are left untrusted on disk.  Prints the last flushed seq.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "tools/journal_devs.h"

static s64 commit(struct tfs_journal *j, u64 i, bool extras)
{
	struct tfs_journal_res res;
	unsigned u64s = tfs_jset_entry_u64s(2) + (extras ? 2 * tfs_jset_entry_u64s(2) : 0);
	int ret = tfs_journal_res_get(j, &res, u64s, 0);

	if (ret)
		return ret;
	__le64 *k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 2);

	k[0] = cpu_to_le64(2 | (i << 32));
	k[1] = cpu_to_le64(i);
	if (extras) {
		k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_root, 2, 1, 2);
		k[0] = cpu_to_le64(2);
		k[1] = cpu_to_le64(0x1234);
		struct jset_usage *u = (void *)tfs_journal_res_add_entry(
			j, &res, TFS_JSET_ENTRY_usage, 0, 0, sizeof(struct jset_usage) / 8);

		u->kind = cpu_to_le32(1);
		u->dev = 0;
		u->value = cpu_to_le64(4096);
	}
	tfs_journal_res_put(j, &res);
	return (s64)res.seq;
}

int main(int argc, char **argv)
{
	struct tfs_tool_journal t;
	struct tfs_journal *j = NULL;
	struct tfs_journal_read *r = NULL;
	struct tfs_journal_entry_pin pin;
	struct printbuf err = PRINTBUF;
	s64 s = 0, flushed = 0;
	int ret;

	if (argc < 4) {
		fprintf(stderr, "usage: journal_fill COMMITS TAIL DEV...\n");
		return 2;
	}
	unsigned commits = atoi(argv[1]), tail = atoi(argv[2]);

	ret = tfs_tool_journal_open(&t, argv + 3, argc - 3, true, &err);
	if (ret)
		goto out;
	t.opts.flush_delay_ms = 1000000;
	t.opts.write_delay_ms = 1;
	ret = tfs_journal_read(t.devs, t.nr, &t.opts, &r, &err);
	if (ret && ret != -TFS_ERR_journal_empty)
		goto out;
	printbuf_reset(&err);
	ret = tfs_journal_init(&j, t.devs, t.nr, &t.opts, &err) ?: tfs_journal_start(j, r);
	if (ret)
		goto out;
	tfs_journal_pin_init(&pin);
	for (unsigned i = 0; i < commits && s >= 0; i++) {
		s = commit(j, i, !i);
		if (s > 0)
			tfs_journal_pin_add(j, s, &pin, NULL); /* keep it all replayable */
		if (s > 0 && (i % 5 == 4 || i == commits - 1)) {
			ret = tfs_journal_flush_seq(j, s);
			if (ret)
				goto out;
			flushed = s;
		}
	}
	for (unsigned i = 0; i < tail && s >= 0; i++) {
		s = commit(j, 1000 + i, false);
		while (s > 0 && tfs_journal_seq_ondisk(j) < (u64)s)
			usleep(500);
	}
	if (s < 0) {
		ret = (int)s;
		goto out;
	}
	if (tail)
		tfs_journal_halt(j); /* the tail stays NO_FLUSH */
	ret = tfs_journal_stop(j);
	if (tail && ret == -TFS_ERR_journal_halted)
		ret = 0;
	printf("%lld\n", (long long)flushed);
out:
	if (ret)
		fprintf(stderr, "journal_fill: %s: %s\n", tfs_err_str(ret), printbuf_str(&err));
	tfs_journal_exit(j);
	tfs_journal_read_free(r);
	tfs_tool_journal_close(&t);
	printbuf_exit(&err);
	return ret ? 1 : 0;
}
