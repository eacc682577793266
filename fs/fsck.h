/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_FSCK_H
#define TFS_FS_FSCK_H

/*
 * fsck: checks an open filesystem's btrees and the POSIX layer's
 * cross-references, and optionally repairs what can be repaired safely.
 * One implementation for `tinyfs fsck` and the tests (posix_test.h's
 * pt_fsck()).
 *
 * Invariants checked (each violation is one line on stderr, "fsck: ..."):
 *  - every btree node verifies (tfs_btree_verify: checksums, key order,
 *    bounds, child pointers) and every key validates (tfs_bkey_validate);
 *  - every dirent names a live inode whose type is the dirent's d_type; a
 *    directory's parent field is the directory that names it;
 *  - every inode's nlink equals the dirents naming it (directories: 2 +
 *    subdirectories); an inode nothing names is on the orphan list with
 *    nlink 0 (pending cleanup, not an error), else it is lost;
 *  - every directory is reachable from the root;
 *  - every symlink has its target (an inline_data key: "symlink INO: its
 *    target is gone", a lost extents node took it);
 *  - extents belong to existing regular files (inline data to symlinks),
 *    do not overlap within a file, hold the blocks the inode counts, lie
 *    inside their member device and overlap neither other files' extents
 *    nor btree nodes (tfs_btree_node_locations());
 *  - orphan keys name existing inodes; an "unlinked" orphan has nlink 0;
 *  - allocation (run last, after the repairs that remove extents): each user
 *    alloc key holds exactly the blocks of its bucket that extents use
 *    ("alloc 0:12: blocks 3..5 marked used, but no extent references them
 *    (leaked)", "blocks 8..8 used by extent INO:OFF are not marked used",
 *    "no alloc key, but extent ..."), each btree alloc key exactly the
 *    blocks nodes of every tree but the alloc btree take ("alloc btree
 *    0:12: ... no btree node uses them (leaked)", "... used by a btree
 *    dirents node are not marked used"), no block is in both ("... marked
 *    used both by file data and by btree nodes (doubly used)"); two owners
 *    of one block are the overlap lines above, naming both; the accounting
 *    keys equal the sums (user and btree blocks per member, inode keys).
 *
 * Lost leaves first: a leaf that no copy of reads or verifies (of any tree
 * but the alloc btree) is replaced by an empty leaf of its range
 * (tfs_btree_replace_bad_leaves(); "btree extents level 0 node at 0x...:
 * unreadable, keys X..Y lost"); a lost interior node of it (the open
 * replaces it, tfs_fs_opts.replace_lost_leaves) by an empty subtree of its
 * height, its whole range lost ("btree dirents level 1 node at 0x...:
 * unreadable, keys X..Y lost (an interior node, its whole subtree: ...)"),
 * in memory without repair (the rest is
 * checked as -y leaves it), written back with it before any other repair;
 * the checks below repair what pointed into it.  Those the open replaced
 * (tfs_fs_opts.replace_lost_leaves, as tinyfs fsck opens) are reported
 * the same way; alloc btree leaves are replaced there only (before the
 * allocator is built, which then marks what the extents and every tree's
 * nodes use; a lost interior alloc node: the whole alloc btree, "btree
 * alloc level 1 node at 0x...: unreadable, keys 0:0..POS_MAX lost"), and
 * the allocation check below rewrites their keys and
 * counters; -y sets the alloc rebuild marker (fs/fs_format.h) before the
 * replacement is written and removes it once that check left nothing (a
 * marker the open found, an fsck -y that did not finish, is a problem of
 * its own, fixed when removed).  A missing root directory inode is said
 * and left.
 *
 * Repairs (opts->repair), each through a normal transaction (journaled, so
 * a crash during repair leaves the old or the repaired state), each said
 * on stderr ("fsck: fixed: ..."):
 *  - dangling dirents are removed; a wrong d_type is rewritten;
 *  - nlink is set to the count of dirents;
 *  - inodes with nlink 0 that are neither named nor open are reclaimed
 *    (orphans, and lost inodes with nlink 0);
 *  - inodes with nlink > 0 that nothing names go into /lost+found (made
 *    when missing) as "#INO";
 *  - a symlink without its target is removed (its inode key; its names,
 *    xattrs and orphan key then go as those of a missing inode), as
 *    e2fsck clears an invalid symlink: it cannot be loaded, so nothing
 *    else could remove it;
 *  - orphan keys of missing inodes are removed; blocks is recounted;
 *    extents (and inline data), xattrs and dirents whose inode (directory)
 *    does not exist are removed;
 *  - a wrong alloc key is rewritten from the extents or nodes (or removed),
 *    a wrong counter set to the count, each its own transaction; the
 *    allocator in memory follows (leaked space reusable once the repair is
 *    durable); a doubly used block is fixed by those rewrites unless data
 *    and a node really both use it (left, with the overlap line).  Node
 *    space repairs commit only if no write-back ran since the compare
 *    (one may have moved the nodes meanwhile): else it is compared again.
 * Not repaired (counted as left): key corruption (a node that cannot be
 * read with a copy on a missing member stops the check: the code),
 * overlapping or out-of-device extents, unreachable directory cycles, a
 * missing root directory.
 *
 * A read-only filesystem (tfs_fs_opts.read_only) is only checked: open
 * replays the journal into memory, never onto the disk.
 *
 * A degraded filesystem (tfs_fs_opts.degraded, members missing) is checked
 * and repaired from the present members: every key is there (a node with
 * no present copy stops the check as a damaged one does) and every repair
 * is of keys, so none needs a missing member.  Not checked, said at the
 * end per missing member ("member 1 is missing: not checked: ..."): its
 * copies of the nodes and the file data on it; extents with no copy
 * elsewhere are counted (unreadable until it returns, not a problem).
 * Extents on it are bounded by its geometry from the present superblocks.
 */

#include <stdbool.h>

#include "lib/types.h"

struct tfs_fs;

struct tfs_fsck_opts {
	bool repair;  /* fix what can be fixed (-y); needs a writable filesystem */
	bool verbose; /* also say what was checked, and pending orphans */
	bool quiet;   /* print nothing (the count is in the result) */
	/* A lost interior node's range stays empty: no salvage of its leaves (no scan). */
	bool no_salvage;
};

struct tfs_fsck_result {
	unsigned found; /* problems found */
	unsigned fixed; /* of which repaired */
	unsigned left;	/* of which not repaired */
	/* Members missing (a degraded open): what is only on them was not checked. */
	unsigned missing_members;
	u64 inodes, dirents, extents, orphans;
	/* Keys of lost interior nodes' ranges given back by the salvage (-n: would be). */
	u64 salvaged;
};

/*
 * Checks fs (and repairs with opts->repair).  Returns 0 when the check ran
 * to the end (res says what it found), or a negative code when it could
 * not (a btree unreadable, -ENOMEM; printed).  opts may be NULL.
 */
int tfs_fsck(struct tfs_fs *fs, const struct tfs_fsck_opts *opts, struct tfs_fsck_result *res);

/*
 * A writable open's repair of an interrupted split write-back (the split
 * markers, fs/fs_format.h): when the alloc btree holds a marker, every
 * btree alloc key and btree_blocks counter is rewritten from the nodes of
 * the durable trees (fsck -y's node space repair, which reads interior
 * nodes only), then the markers are removed in one more transaction.
 * Says on stderr what it did.  0 also when there is no marker or the
 * filesystem is read-only; a negative code when the check could not run.
 */
int tfs_fsck_split_writeback(struct tfs_fs *fs);

/* e2fsck's exit codes: what `tinyfs fsck` returns for a check that ran. */
enum tfs_fsck_exit {
	TFS_FSCK_EXIT_CLEAN = 0,
	TFS_FSCK_EXIT_FIXED = 1,
	TFS_FSCK_EXIT_LEFT = 4,
	TFS_FSCK_EXIT_OPERATIONAL = 8, /* cannot open, the check could not finish */
	TFS_FSCK_EXIT_USAGE = 16,
};

/* 0 nothing found, 1 all found fixed, 4 some left. */
static inline int tfs_fsck_exit_code(const struct tfs_fsck_result *res)
{
	return res->left    ? TFS_FSCK_EXIT_LEFT
	       : res->found ? TFS_FSCK_EXIT_FIXED
			    : TFS_FSCK_EXIT_CLEAN;
}

#endif /* TFS_FS_FSCK_H */
