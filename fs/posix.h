/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_POSIX_H
#define TFS_FS_POSIX_H

/*
 * The POSIX layer's internal API: its life inside a filesystem (called by
 * fs/fs.c), and what its files (inode.c, dirent.c, xattr.c, extents.c,
 * io.c, namei.c, posix.c) share.  The public API is fs/fs.h.
 *
 * Every operation of fs/fs.h is one transaction (tfs_trans_commit()), or,
 * when its keys cannot fit one journal entry (a large truncate, removing a
 * large file), a first transaction that records what remains in the
 * orphans btree and later ones that finish it, so a crash leaves the old
 * or the new state and open finishes what was recorded.
 */

#include <stdbool.h>

#include "fs/alloc_types.h"
#include "fs/bkey.h"
#include "fs/btree.h"
#include "fs/fs.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "fs/posix_types.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "super/super_format.h"

struct printbuf;

/* --- life (fs/fs.c calls these) --- */

/*
 * After the journal is replayed and started: sets up the inode table,
 * finds the next inode number, and (unless read-only) finishes the cleanups
 * the orphans btree records.  0 or a code (printed).
 */
int tfs_posix_init(struct tfs_fs *fs);

/* Before write-back at stop: drops open files and the inode table. */
void tfs_posix_exit(struct tfs_fs *fs);

/* mkfs: creates the root directory (TFS_ROOT_INO, 0755, owned by root). */
int tfs_posix_format(struct tfs_fs *fs);

/* The table, counters and inode numbers. */
void tfs_posix_to_text(struct printbuf *out, struct tfs_fs *fs);

/* Tests: the name hash every later lookup and insert uses (NULL: the default). */
void tfs_posix_set_name_hash(struct tfs_fs *fs, tfs_name_hash_fn fn);

/* --- the engine, as this layer uses it --- */

static inline struct tfs_posix *tfs_posix(struct tfs_fs *fs)
{
	return fs->posix;
}

static inline struct tfs_journal *tfs_posix_journal(struct tfs_fs *fs)
{
	return fs->j;
}

static inline u32 tfs_posix_block_size(struct tfs_fs *fs)
{
	return fs->block_size;
}

/* The member's device, or NULL when it is missing. */
static inline struct tfs_bdev *tfs_posix_bdev(struct tfs_fs *fs, unsigned dev)
{
	return dev < fs->nr_devices && fs->devs[dev].present ? fs->devs[dev].bdev : NULL;
}

/* A present member's superblock (the options are the same on all). */
static inline const struct tfs_sb *tfs_posix_sb(struct tfs_fs *fs)
{
	for (unsigned i = 0; i < fs->nr_devices; i++)
		if (fs->devs[i].present && fs->devs[i].sb.sb)
			return fs->devs[i].sb.sb;
	return NULL;
}

/* Members the allocator may put data on (present, read-write). */
static inline unsigned tfs_posix_nr_data_devs(struct tfs_fs *fs)
{
	unsigned nr = 0;

	for (unsigned i = 0; i < fs->nr_devices; i++)
		nr += fs->alloc.devs[i].present;
	return nr;
}

static inline unsigned tfs_posix_data_replicas(struct tfs_fs *fs)
{
	const struct tfs_sb *sb = tfs_posix_sb(fs);

	return sb && sb->data_replicas ? sb->data_replicas : 1;
}

static inline unsigned tfs_posix_data_replicas_required(struct tfs_fs *fs)
{
	const struct tfs_sb *sb = tfs_posix_sb(fs);

	return sb && sb->data_replicas_required ? sb->data_replicas_required : 1;
}

static inline int tfs_posix_error_action(struct tfs_fs *fs)
{
	const struct tfs_sb *sb = tfs_posix_sb(fs);

	if (fs->opts.error_action >= 0)
		return fs->opts.error_action;
	return sb ? sb->error_action : TFS_ON_ERROR_continue;
}

static inline bool tfs_posix_read_only(struct tfs_fs *fs)
{
	return fs->read_only;
}

static inline bool tfs_posix_fsync_noop(struct tfs_fs *fs)
{
	return fs->opts.fsync_noop;
}

static inline const u8 *tfs_posix_uuid(struct tfs_fs *fs)
{
	return fs->uuid;
}

/*
 * 0 when changes can be made; -TFS_ERR_fs_read_only (EROFS class) when the
 * filesystem was opened read-only or its journal stopped (an error, or
 * errors=ro).  The data paths ask before writing anything; metadata-only
 * operations learn it from the commit.
 */
static inline int tfs_posix_writable(struct tfs_fs *fs)
{
	if (fs->read_only || !fs->j || tfs_journal_err_seq(fs->j))
		return -TFS_ERR_fs_read_only;
	return 0;
}

/*
 * 0 when an operation that adds metadata (a new inode, name or xattr) may
 * go on; -TFS_ERR_alloc_no_space (ENOSPC class) when the space data may
 * use is below a few btree nodes.  Data allocations stop at the
 * allocator's reserve, but metadata has no allocation of its own until
 * write-back: without this check creates at ENOSPC grow the btrees into the
 * reserve that write-back needs to copy dirty nodes, a checkpoint then
 * finds no space and the filesystem stops writing.  Removals, truncates and
 * in-place updates are not gated (they free space).  When freed space waits
 * for a journal flush, flushes once and looks again.
 */
int tfs_posix_may_grow(struct tfs_fs *fs);

/*
 * The space write-back may need before anything it writes frees any: a
 * copy of every dirty node of every tree, and a little more per tree, in
 * every metadata replica.  The allocator's fixed reserve is a few buckets;
 * data allocations (io.c) and creates (tfs_posix_may_grow()) also leave
 * this much free, or 6 processes filling a small filesystem left more
 * dirty nodes than the reserve held: a checkpoint found no space for its
 * node copies and the filesystem went read-only.
 */
u64 tfs_posix_wb_headroom(struct tfs_fs *fs);

/* --- inodes (inode.c) --- */

/* Packs ui as the inode key of ino. */
void tfs_inode_pack(struct tfs_bkey_buf *buf, tfs_ino_t ino, const struct tfs_inode_unpacked *ui);
/*
 * Unpacks an inode key (validated first); -TFS_ERR_inode_invalid (printed)
 * when the key is not a valid inode.
 */
int tfs_inode_unpack(struct tfs_fs *fs, const struct tfs_bkey *k, struct tfs_inode_unpacked *ui);
/* The inline_data key holding a symlink's target. */
void tfs_symlink_pack(struct tfs_bkey_buf *buf, tfs_ino_t ino, const char *target, size_t len);

void tfs_inode_to_stat(struct tfs_fs *fs, tfs_ino_t ino, const struct tfs_inode_unpacked *ui,
		       struct tfs_stat *st);

/* The current time in ns. */
s64 tfs_now_ns(void);

/* A DT_ value for a mode's type. */
unsigned tfs_mode_to_dtype(u32 mode);

/*
 * The table entry of ino, referenced (not locked, maybe not loaded); only
 * -ENOMEM fails.  Put it with tfs_iput().
 */
int tfs_iget(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_inode_mem **ret);
void tfs_iput(struct tfs_fs *fs, struct tfs_inode_mem *im);

/* Locks im (exclusive or shared) and makes sure it is loaded; -ENOENT if it
 * does not exist (unlocked then). */
int tfs_ilock(struct tfs_fs *fs, struct tfs_inode_mem *im, bool excl);
void tfs_iunlock(struct tfs_inode_mem *im);

/* tfs_iget() then tfs_ilock(); on failure nothing is held. */
int tfs_iget_locked(struct tfs_fs *fs, tfs_ino_t ino, bool excl, struct tfs_inode_mem **ret);
/* tfs_iunlock() then tfs_iput(). */
void tfs_iput_unlock(struct tfs_fs *fs, struct tfs_inode_mem *im);

/*
 * A new entry for a new inode (not in the btree yet): referenced, locked,
 * loaded.  It starts known to have no xattr key (im->xattrs): the caller
 * sets TFS_INODE_XATTRS_some if its create put one in.
 */
int tfs_inew(struct tfs_fs *fs, tfs_ino_t ino, const struct tfs_inode_unpacked *ui,
	     const char *target, struct tfs_inode_mem **ret);

/* A new inode number (never reused while open). */
tfs_ino_t tfs_ino_alloc(struct tfs_fs *fs);

/*
 * ino is taken (a key put back after the open, fsck's salvage): the next
 * inode number is past it.
 */
void tfs_ino_alloc_past(struct tfs_fs *fs, tfs_ino_t ino);

/* Queues im's key with ui (and its target) in trans. */
int tfs_inode_update(struct tfs_btree_trans *trans, struct tfs_inode_mem *im,
		     const struct tfs_inode_unpacked *ui);

/*
 * After a commit at seq that changed im (to ui, when not NULL): the
 * cached attributes and last_seq (and last_data_seq unless times_only).
 */
void tfs_inode_committed(struct tfs_inode_mem *im, const struct tfs_inode_unpacked *ui, u64 seq,
			 bool times_only);

/* Locks the distinct entries of ims[0..nr) (NULLs skipped) in inode number order. */
int tfs_ilock_many(struct tfs_fs *fs, struct tfs_inode_mem **ims, unsigned nr);
void tfs_iunlock_many(struct tfs_inode_mem **ims, unsigned nr);

/* Orphan keys: queue the record / its removal. */
int tfs_orphan_add(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 flags);
int tfs_orphan_del(struct tfs_btree_trans *trans, tfs_ino_t ino);

/*
 * Removes an inode with nlink 0 and everything it owns (extents, xattrs,
 * its orphan key), in as many transactions as needed, the inode key and
 * orphan last.  im locked exclusively.
 */
int tfs_inode_remove(struct tfs_fs *fs, struct tfs_inode_mem *im);

/* A metadata inconsistency found at pos: printed, the errors= action taken. */
void tfs_posix_inconsistent(struct tfs_fs *fs, const char *what);

/* Starts a transaction on fs. */
static inline void tfs_posix_trans_init(struct tfs_btree_trans *trans, struct tfs_fs *fs)
{
	tfs_trans_init(trans, fs);
}

/* Commits; the commit's seq in *seq. */
int tfs_posix_commit(struct tfs_btree_trans *trans, u64 *seq);

/*
 * Deletes every key of btree id at inode ino (offsets 0 .. UINT64_MAX), in
 * transactions of at most 128 deletes each (each one commits on its own: a
 * crash leaves a prefix of them done).  0 or the first error.
 */
int tfs_posix_delete_inode_keys(struct tfs_fs *fs, enum tfs_btree_id id, tfs_ino_t ino);

/* --- names (dirent.c) --- */

/* 0, -EINVAL (empty, '/', NUL), -ENAMETOOLONG. */
int tfs_name_check(const char *name, size_t len);

extern const struct tfs_hash_desc tfs_dirent_hash_desc;

/* The dirent of name in dir (locked): 0 with *ino, *dtype, *slot; -ENOENT. */
int tfs_dirent_lookup(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, const char *name,
		      size_t len, tfs_ino_t *ino, unsigned *dtype, u64 *slot);
/* Queues name -> ino in dir (name absent); the slot taken in *slot. */
int tfs_dirent_insert(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, const char *name,
		      size_t len, tfs_ino_t ino, unsigned dtype, u64 *slot);
/* Queues the removal of dir's dirent at slot. */
int tfs_dirent_remove(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, u64 slot);
/* Queues slot's dirent to point at ino (same name). */
int tfs_dirent_retarget(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, u64 slot,
			const char *name, size_t len, tfs_ino_t ino, unsigned dtype);
/*
 * Whether dir has any entry: 0 empty, -ENOTEMPTY, or an error.  With
 * whiteouts (may be NULL), also whether an empty dir still holds
 * whiteouts (keys tfs_dirents_remove_all() must drop).
 */
int tfs_dir_empty(struct tfs_fs *fs, tfs_ino_t dir, bool *whiteouts);

/* --- extents and data (extents.c, io.c) --- */

/*
 * Commits im (locked exclusively) with the attributes ui, whose size may
 * differ from the current one: past a smaller size the data goes (the EOF
 * block's bytes past it zeroed), in one transaction, or in several with
 * the orphan key recording a truncate until the last (see the top).
 * ui->blocks is kept up to date; *seq is the last commit's.
 */
int tfs_data_truncate(struct tfs_fs *fs, struct tfs_inode_mem *im, struct tfs_inode_unpacked *ui,
		      u64 *seq);

/* Removes every extent of im (locked), in batches each committing im's blocks. */
int tfs_data_remove_all(struct tfs_fs *fs, struct tfs_inode_mem *im);

/*
 * Whether im (locked) owns some xattr key: 1 yes, 0 no, or a negative code.
 * Answered from im->xattrs once known (getxattr's fast path keeps it),
 * otherwise by one peek, remembered.
 */
int tfs_xattrs_present(struct tfs_fs *fs, struct tfs_inode_mem *im);

/* Removes every xattr / dirent (whiteouts of a removed directory) of ino, in batches. */
int tfs_xattr_remove_all(struct tfs_fs *fs, tfs_ino_t ino);

/*
 * posix_acl_create() for a new inode ino (hash_seed) of *mode in dir
 * (locked exclusive): with a default ACL on dir, *mode's permission bits
 * are masked by it and the new inode's access ACL (when the mode cannot
 * say it all) and, for a directory, its default ACL are queued in trans;
 * without one, *mode loses the umask bits.  Symlinks: nothing.  *keys
 * says whether any xattr key was queued.
 */
int tfs_acl_create(struct tfs_btree_trans *trans, struct tfs_inode_mem *dir, tfs_ino_t ino,
		   u64 hash_seed, u32 *mode, u32 umask, bool *keys);

/*
 * posix_acl_chmod(): queues in trans im's (locked exclusive) access ACL,
 * if it has one, with its owner, mask (owning group if no mask) and other
 * entries set from mode's permission bits.
 */
int tfs_acl_chmod(struct tfs_btree_trans *trans, struct tfs_inode_mem *im, u32 mode);
int tfs_dirents_remove_all(struct tfs_fs *fs, tfs_ino_t dir);

#endif /* TFS_FS_POSIX_H */
