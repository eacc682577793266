// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "btree_node": one on-disk btree node through
 * tfs_btree_node_validate() (which runs tfs_bkey_validate() on every key),
 * and, when it is valid, every key through tfs_bkey_to_text().
 *
 * Input: a mode byte, an expect byte, then the node (struct tfs_btree_node
 * and its keys; zero up to the node size).
 *	mode bit 0	FUZZ_FIX: the magic of fuzz_uuid, u64s cut to the
 *			capacity and the input, checksum
 *	mode bit 1	what the parent's pointer says: the node's own seq and
 *			checksum (after FUZZ_FIX), checked (else not checked)
 *	mode bit 2	what the parent says the node is (btree, level, range):
 *			the node's own header (else from the expect byte:
 *			btree (e & 7) % TFS_BTREE_NR, level (e >> 3) & 7,
 *			range POS_MIN..POS_MAX)
 *	mode bits 3-4	node size 16 KiB << s
 *
 * What must hold: a failure names its reason; a valid node's keys lie in
 * its u64s, strictly increasing, inside the expected range, of the kind its
 * level holds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_io.h"
#include "fs/fs_types.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "tests/fuzz/fuzz.h"

/* What validation reads of the filesystem: node size, magic and pointers per key. */
static struct tfs_fs *fuzz_fs(u32 node_size)
{
	static struct tfs_fs *fs;

	if (!fs) {
		fs = calloc(1, sizeof(*fs));
		if (!fs)
			abort();
		memcpy(fs->uuid, fuzz_uuid, sizeof(fs->uuid));
		fs->node_magic = tfs_btree_node_magic(fuzz_uuid);
		fs->nr_devices = 1;
		fs->btree_ptr_replicas = TFS_BTREE_PTR_MAX_REPLICAS;
	}
	fs->node_size = node_size;
	return fs;
}

static void check_valid(const struct tfs_btree_node *n, const struct tfs_btree_node_expect *e,
			u32 node_size)
{
	const __le64 *p = n->_data, *end = n->_data + le32_to_cpu(n->u64s);
	struct printbuf out = PRINTBUF;
	struct tfs_bpos prev = TFS_POS_MIN;

	fuzz_check(sizeof(*n) + (size_t)le32_to_cpu(n->u64s) * 8 <= node_size,
		   "a valid node's keys run past the node");
	for (u32 i = 0; i < le32_to_cpu(n->nr_keys); i++) {
		const struct tfs_bkey *k = (const void *)p;
		struct tfs_bpos pos = tfs_bkey_pos(k);

		fuzz_check(tfs_bkey_u64s(k) >= TFS_BKEY_U64s && p + tfs_bkey_u64s(k) <= end,
			   "a key of a valid node runs past its keys");
		fuzz_check(!i || tfs_bpos_cmp(prev, pos) < 0, "keys of a valid node out of order");
		fuzz_check(tfs_bpos_cmp(pos, e->min_key) >= 0 && tfs_bpos_cmp(pos, e->max_key) <= 0,
			   "a key of a valid node outside its range");
		fuzz_check((k->type == TFS_BKEY_btree_ptr) == (n->level > 0),
			   "a key of the wrong kind for the node's level");
		tfs_bkey_to_text(&out, k);
		prt_newline(&out);
		prev = pos;
		p += tfs_bkey_u64s(k);
	}
	fuzz_check(p == end, "a valid node's keys do not add up to its u64s");
	fuzz_check_printbuf(&out);
	printbuf_exit(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;

	unsigned mode = data[0], eb = data[1];
	u32 node_size = TFS_BTREE_NODE_SIZE_MIN << ((mode >> 3) & 3);
	struct tfs_fs *fs = fuzz_fs(node_size);
	size_t len = min_t(size_t, size - 2, node_size);
	struct tfs_btree_node *n = calloc(1, node_size);
	struct printbuf err = PRINTBUF;
	struct tfs_btree_node_expect e;
	int ret;

	if (!n)
		abort();
	memcpy(n, data + 2, len);
	if (mode & FUZZ_FIX)
		fuzz_fix_btree_node(n, len, node_size, fs->node_magic);
	if (mode & 4)
		e = (struct tfs_btree_node_expect){
			/* A caller's btree id is always a real one. */
			.btree_id = n->btree_id % TFS_BTREE_NR,
			.level = n->level,
			.min_key = tfs_btree_node_min(n),
			.max_key = tfs_btree_node_max(n),
		};
	else
		e = (struct tfs_btree_node_expect){
			.btree_id = (eb & 7) % TFS_BTREE_NR,
			.level = (eb >> 3) & 7,
			.min_key = TFS_POS_MIN,
			.max_key = TFS_POS_MAX,
		};
	if (mode & 2) {
		e.check_ptr = true;
		e.seq = le64_to_cpu(n->seq);
		e.csum = (u32)le64_to_cpu(n->csum);
	}
	ret = tfs_btree_node_validate(fs, n, &e, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	if (!ret)
		check_valid(n, &e, node_size);
	printbuf_exit(&err);
	free(n);
	return 0;
}
