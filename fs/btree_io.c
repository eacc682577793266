// SPDX-License-Identifier: GPL-2.0
/*
 * Node I/O: reading nodes back.  (Serialization and validation come with
 * write-back.)
 */
#include <errno.h>
#include <stdio.h>

#include "fs/btree_internal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"

void tfs_btree_node_loc_to_text(struct printbuf *out, struct tfs_fs *fs, enum tfs_btree_id id,
				unsigned level, const struct tfs_btree_loc *loc)
{
	prt_printf(out, "btree %s level %u node at ", tfs_btree_id_str(id), level);
	for (unsigned i = 0; i < loc->nr; i++) {
		if (i)
			prt_char(out, ',');
		if (fs->nr_devices > 1)
			prt_printf(out, "%u:", loc->ptrs[i].dev);
		prt_printf(out, "0x%llx", (unsigned long long)loc->ptrs[i].offset);
	}
	if (!loc->nr)
		prt_str(out, "(nowhere)");
}

int tfs_btree_read_child(struct tfs_btree *b, struct tfs_bnode *n, unsigned idx,
			 struct tfs_bnode **ret)
{
	fprintf(stderr, "btree %s: child %u of a level %u node is not in memory\n",
		tfs_btree_id_str(b->id), idx, n->level);
	return -TFS_ERR_btree_node_read;
}
