/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_BTREE_IO_H
#define TFS_FS_BTREE_IO_H

/*
 * Node I/O (fs/btree_io.c): the on-disk form of a node, its validation and
 * reading.  For the engine, fsck and tools (the fuzzers validate nodes
 * through tfs_btree_node_validate()).
 */

#include <stdbool.h>

#include "fs/bkey.h"
#include "fs/btree_format.h"
#include "lib/types.h"

struct printbuf;
struct tfs_fs;
struct tfs_btree;
struct tfs_bnode;
struct tfs_btree_loc;

/* What a node read through a pointer must be. */
struct tfs_btree_node_expect {
	enum tfs_btree_id btree_id;
	unsigned level;
	struct tfs_bpos min_key, max_key;
	u64 seq; /* with check_ptr: the pointer's seq and csum */
	u32 csum;
	bool check_ptr;
};

/*
 * Checks a node of the filesystem's node size: magic, checksum, the
 * pointer's seq and checksum, btree id, level, version, range, and every key
 * (valid, of the right kind for the level, inside the range, strictly
 * increasing, the sizes adding up; an interior node's last key at its
 * max_key).  0 or -TFS_ERR_btree_node_invalid with the first bad thing in
 * err ("key 17 (4096:77) < previous key (4096:80)"; the caller names the
 * node).
 */
int tfs_btree_node_validate(struct tfs_fs *fs, const struct tfs_btree_node *n,
			    const struct tfs_btree_node_expect *e, struct printbuf *err);

/*
 * Writes n (a node of tree b) into out (node_size bytes) as node seq: keys
 * packed, pointers trimmed to their nr_ptrs, the rest zeroed, checksummed.
 * Returns the checksum.
 */
u32 tfs_btree_node_serialize(struct tfs_fs *fs, const struct tfs_btree *b,
			     const struct tfs_bnode *n, u64 seq, struct tfs_btree_node *out);

/*
 * Reads the node ptr_key points to (covering min_key .. the key's position),
 * trying each replica; each bad one is reported once, naming it.  0 with a
 * new in-memory node in *ret, -TFS_ERR_btree_node_read (no replica could
 * be read), -TFS_ERR_btree_node_invalid (one was read and was wrong) or
 * -ENOMEM.
 */
int tfs_btree_read_node(struct tfs_btree *b, const struct tfs_bkey *ptr_key,
			struct tfs_bpos min_key, struct tfs_bnode **ret);

/* Sets the value of a btree_ptr key (room for every replica) to loc, seq, csum. */
void tfs_btree_ptr_key_set(struct tfs_fs *fs, struct tfs_bkey *k, const struct tfs_btree_loc *loc,
			   u64 seq, u32 csum, unsigned level);
/* The locations a btree_ptr key holds. */
void tfs_btree_ptr_key_loc(const struct tfs_bkey *k, struct tfs_btree_loc *loc);

#endif /* TFS_FS_BTREE_IO_H */
