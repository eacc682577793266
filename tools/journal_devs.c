// SPDX-License-Identifier: GPL-2.0
/* Journal descriptors from superblocks, for the tools (see journal_devs.h). */
#include "tools/journal_devs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/super.h"

int tfs_tool_journal_open(struct tfs_tool_journal *t, char *const *paths, unsigned nr, bool rw,
			  struct printbuf *err)
{
	int ret;

	memset(t, 0, sizeof(*t));
	tfs_journal_opts_default(&t->opts);
	if (!nr || nr > TFS_JOURNAL_MAX_DEVS) {
		prt_printf(err, "%u devices given (1..%u)", nr, TFS_JOURNAL_MAX_DEVS);
		return -TFS_ERR_invalid_argument;
	}
	for (unsigned i = 0; i < nr; i++) {
		struct tfs_sb_handle *h = &t->h[i];
		unsigned jnr;

		ret = tfs_sb_open(paths[i], rw ? 0 : TFS_BDEV_RDONLY, h, err);
		t->nr = i + 1;
		if (ret)
			return ret;
		if (i && memcmp(h->sb->uuid, t->h[0].sb->uuid, 16)) {
			prt_printf(err, "%s and %s belong to different filesystems", paths[0],
				   paths[i]);
			return -TFS_ERR_invalid_argument;
		}
		for (unsigned k = 0; k < i; k++)
			if (t->h[k].sb->dev_idx == h->sb->dev_idx) {
				prt_printf(err, "%s and %s are both member %u", paths[k], paths[i],
					   h->sb->dev_idx);
				return -TFS_ERR_invalid_argument;
			}
		/* The superblock lists ranges; the journal takes every bucket. */
		ret = tfs_sb_journal_buckets(h->sb, &t->buckets[i], &jnr);
		if (ret) {
			prt_printf(err, "%s: listing the journal buckets: ", paths[i]);
			prt_err_desc(err, ret);
			return ret;
		}
		if (!jnr) {
			prt_printf(err, "%s: no journal buckets", paths[i]);
			return -TFS_ERR_invalid_sb_journal;
		}
		t->devs[i] = (struct tfs_journal_dev){
			.bdev = h->bdev,
			.dev_idx = h->sb->dev_idx,
			.bucket_size = tfs_sb_bucket_size(h->sb),
			.buckets = t->buckets[i],
			.nr_buckets = jnr,
			.writable = rw,
		};
		if (t->devs[i].bucket_size < t->opts.max_entry_size)
			t->opts.max_entry_size = t->devs[i].bucket_size;
	}
	const struct tfs_sb *sb = t->h[0].sb;

	memcpy(t->opts.uuid, sb->uuid, 16);
	t->opts.block_size = le32_to_cpu(sb->block_size);
	t->opts.metadata_replicas = min_t(unsigned, sb->metadata_replicas ?: 1, nr);
	t->opts.metadata_replicas_required =
		min_t(unsigned, sb->metadata_replicas_required ?: 1, t->opts.metadata_replicas);
	return 0;
}

void tfs_tool_journal_close(struct tfs_tool_journal *t)
{
	for (unsigned i = 0; i < t->nr; i++) {
		tfs_sb_exit(&t->h[i]);
		free(t->buckets[i]);
	}
	memset(t, 0, sizeof(*t));
}

unsigned tfs_tool_journal_missing(const struct tfs_tool_journal *t, struct printbuf *out)
{
	const struct tfs_sb *sb = t->nr ? t->h[0].sb : NULL;
	unsigned missing[TFS_MAX_DEVICES], nr = 0;

	for (unsigned i = 0; sb && i < sb->nr_devices; i++) {
		const struct tfs_member *m = tfs_sb_member(sb, i);
		bool given = false;

		for (unsigned k = 0; k < t->nr; k++)
			given |= t->h[k].sb->dev_idx == i;
		/* failed and spare members hold no journal anyone could read. */
		if (!given && (m->state == TFS_MEMBER_rw || m->state == TFS_MEMBER_ro))
			missing[nr++] = i;
	}
	for (unsigned k = 0; k < nr; k++) {
		const struct tfs_member *m = tfs_sb_member(sb, missing[k]);
		size_t len = tfs_strnlen_field(m->label, sizeof(m->label));

		if (!k)
			prt_str(out, nr > 1 ? "members " : "member ");
		else
			prt_str(out, k + 1 < nr ? ", " : " and ");
		prt_printf(out, "%u (uuid ", missing[k]);
		prt_uuid(out, m->uuid);
		if (len) {
			prt_str(out, ", label \"");
			prt_bytes(out, m->label, len);
			prt_char(out, '"');
		}
		prt_char(out, ')');
	}
	return nr;
}
