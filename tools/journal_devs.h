/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TOOLS_JOURNAL_DEVS_H
#define TFS_TOOLS_JOURNAL_DEVS_H

/*
 * Tools' bridge from superblocks to the journal: opens each member, reads
 * its superblock, and builds the struct tfs_journal_dev descriptors and the
 * journal options (uuid, block size, replicas) the journal takes.  The
 * journal itself never reads a superblock.
 */

#include <stdbool.h>

#include "journal/journal.h"
#include "super/super_types.h"

struct printbuf;

struct tfs_tool_journal {
	struct tfs_sb_handle h[TFS_JOURNAL_MAX_DEVS];
	u64 *buckets[TFS_JOURNAL_MAX_DEVS];
	struct tfs_journal_dev devs[TFS_JOURNAL_MAX_DEVS];
	unsigned nr;
	struct tfs_journal_opts opts;
};

/*
 * Opens nr member devices (read-only unless rw) and fills t.  Fails with a
 * code and a message in err when a superblock cannot be read, the members
 * belong to different filesystems, a member is given twice, or one has no
 * journal.  t is zeroed first; tfs_tool_journal_close() it in every case.
 */
int tfs_tool_journal_open(struct tfs_tool_journal *t, char *const *paths, unsigned nr, bool rw,
			  struct printbuf *err);

void tfs_tool_journal_close(struct tfs_tool_journal *t);

/*
 * The members of t's filesystem that may hold journal entries (state rw or
 * ro) but were not opened: "member 1 (uuid U, label "L")", or "members 0
 * (...) and 2 (...)", appended to out.  Returns how many (0: out untouched).
 */
unsigned tfs_tool_journal_missing(const struct tfs_tool_journal *t, struct printbuf *out);

#endif /* TFS_TOOLS_JOURNAL_DEVS_H */
