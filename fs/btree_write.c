// SPDX-License-Identifier: GPL-2.0
/*
 * Roots and write-back.
 *
 * Roots: every root entry logs the root of every btree, under roots_lock,
 * so entries hold root sets in the order they were taken and the newest
 * root entry in the replay range is always the current one.  roots_pin
 * holds that entry's seq; when reclaim wants the seq, the pin's flush
 * callback logs the roots again in a new entry, so a root entry is always
 * in the replay range.
 *
 * A root key is a btree_ptr at POS_MAX (the root's level in the sub-entry
 * and the pointer), or a `deleted` key for a tree that has no node on disk
 * yet (an empty tree, as mkfs leaves it).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/btree_internal.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

int tfs_btree_log_roots(struct tfs_fs *fs, unsigned trans_flags, u64 *seq)
{
	struct tfs_journal_res res;
	unsigned u64s = 0;
	int ret;

	pthread_mutex_lock(&fs->roots_lock);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		u64s += tfs_jset_entry_u64s(tfs_bkey_u64s(&fs->btrees[id].root_key.k));
	ret = tfs_journal_res_get(fs->j, &res, u64s,
				  trans_flags & TFS_TRANS_RESERVED ? TFS_JOURNAL_RES_RESERVED : 0);
	if (ret)
		goto out;
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		const struct tfs_bkey *k = &fs->btrees[id].root_key.k;
		unsigned level = 0;

		if (k->type == TFS_BKEY_btree_ptr)
			level = ((const struct tfs_btree_ptr *)tfs_bkey_val(k))->level;
		__le64 *dst = tfs_journal_res_add_entry(fs->j, &res, TFS_JSET_ENTRY_btree_root, id,
							level, tfs_bkey_u64s(k));

		memcpy(dst, k, tfs_bkey_bytes(k));
	}
	/* The pin moves to this entry before it can be written: no gap without a root entry. */
	tfs_journal_pin_update(fs->j, res.seq, &fs->roots_pin, tfs_btree_roots_pin_flush);
	fs->roots_seq = res.seq;
	tfs_journal_res_put(fs->j, &res);
	if (seq)
		*seq = res.seq;
out:
	pthread_mutex_unlock(&fs->roots_lock);
	return ret;
}

int tfs_btree_roots_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct tfs_fs *fs = container_of(pin, struct tfs_fs, roots_pin);

	return tfs_btree_log_roots(fs, TFS_TRANS_RESERVED, NULL);
}

int tfs_btree_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	/* Write-back is not there yet: reclaim backs off. */
	return -EAGAIN;
}

int tfs_btree_write_all(struct tfs_fs *fs)
{
	if (fs->read_only || !fs->j)
		return 0;
	return tfs_journal_flush(fs->j);
}
