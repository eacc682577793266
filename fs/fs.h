/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FS_FS_H
#define TFS_FS_FS_H

/*
 * The filesystem as a library: open and stop a filesystem over its member
 * devices, and every POSIX operation by inode number, so the FUSE daemon
 * (fuse/) maps fuse_lowlevel_ops onto it one to one and every rule about
 * files is tested here, without a mount.
 *
 * Conventions:
 *  - Every function returns 0 (or a byte count) or a negative code
 *    (lib/errcode.h).  Plain errnos mean what POSIX says (-ENOENT,
 *    -EEXIST, -ENOTEMPTY, -ENOTDIR, -EISDIR, -ENAMETOOLONG, -EINVAL,
 *    -ENODATA, -ERANGE, ...); tinyfs codes map to an errno with
 *    tfs_err_class() (the FUSE boundary does that, nothing else).
 *  - Inodes are named by number (tfs_ino_t); TFS_ROOT_INO is the root
 *    directory, made by mkfs.  Inode numbers are never reused while the
 *    filesystem is open, and each inode has a generation.
 *  - Names are byte strings with an explicit length: 1..255 bytes, any byte
 *    but '/' and NUL (-EINVAL for those, -ENAMETOOLONG past 255).
 *  - Permissions: the kernel checks them (FUSE default_permissions); this
 *    layer applies ownership rules that are the filesystem's: a new inode
 *    gets ctx's uid and gid (or the directory's gid when the directory is
 *    set-group-ID, and a new directory then inherits S_ISGID), and
 *    setattr clears S_ISUID/S_ISGID on chown and on a size change
 *    (tfs_setattr's TFS_SETATTR_KILL_SUIDGID), and by the caller's
 *    identity where the kernel leaves that to us (tfs_setattr_as(),
 *    tfs_open_as()).
 *  - Durability (the persistence model): changes are durable once the
 *    journal seq they were committed in is flushed.  tfs_fsync() of a file
 *    makes its data, size and name durable; tfs_syncfs() everything.  After
 *    a crash the metadata is a prefix of history that holds at least
 *    everything an fsync/fdatasync/syncfs that returned 0 covered; rename
 *    is atomic; no crash exposes data that was never written.
 *  - Threads: every function may be called from any thread at once.
 */

#include <stdbool.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include "lib/types.h"

struct printbuf;
struct tfs_fs;
struct tfs_file;

typedef u64 tfs_ino_t;
#define TFS_ROOT_INO 1
#define TFS_NAME_MAX 255
/* Largest file size and offset (2^63 - 1, as the VFS allows). */
#define TFS_MAX_FILE_SIZE ((u64)INT64_MAX)
/* Largest xattr value, and all names of one inode together (VFS limits). */
#define TFS_XATTR_SIZE_MAX 65536
#define TFS_XATTR_LIST_MAX 65536

/* --- opening and stopping --- */

struct tfs_fs_opts {
	bool read_only;	  /* no writes at all (no replay writes either) */
	bool degraded;	  /* open with members missing, if replicas allow */
	int error_action; /* enum tfs_error_action, or -1: the superblock's */
	u64 cache_budget; /* bytes for the node and key caches; 0: a default (256 MiB) */
	bool fsync_noop;  /* fsync only commits, never flushes (unsafe; benchmarks) */
	/* Every flush entry flushes before its write (journal_io.c, "post-flush"). */
	bool no_post_flush;
	/*
	 * Small data and journal writes to image files go through O_DIRECT
	 * too, not the host's page cache (lib/bdev.h TFS_BDEV_HOST_CACHE).
	 */
	bool no_host_cache;
	bool verbose; /* print what open and stop do */
	/*
	 * fsck only: when a step of the open (reading a root leaf, replay, the
	 * inode count, orphans) fails on a leaf no copy of which reads or
	 * verifies, every such leaf is replaced by an empty one and the step
	 * runs again, so the open gets past it and keys replayed into its
	 * range go into the new leaf; an interior node the open's read of
	 * every interior node cannot read is replaced by an empty subtree of
	 * its height (an interior root: the tree by an empty root leaf), its
	 * whole range lost; the replacements are recorded
	 * (fs->lost_leaves) for fsck to report and write back.  The alloc
	 * btree, which the open loads whole, is walked for lost leaves before
	 * its load (a lost interior node of it: the whole tree is replaced by
	 * an empty root leaf); when one was lost, the allocator also marks
	 * every block the extents and every tree's nodes use
	 * (fs_alloc_rebuild()), before anything can be allocated.  Without it
	 * such an open fails; an undamaged open reads no more (the alloc btree
	 * is read whole anyway).
	 */
	bool replace_lost_leaves;
	/*
	 * mkfs only: the filesystem was just formatted (no roots anywhere);
	 * open creates its empty trees and records them.  Refused when roots
	 * exist.  Without it, a filesystem with no roots is "not initialized".
	 */
	bool format;
};

void tfs_fs_opts_default(struct tfs_fs_opts *opts);

/*
 * Opens the filesystem on devs[0..nr) (paths of its member devices): reads
 * every member's superblock, checks they belong together (and, without
 * degraded, that none is missing), reads the journal, replays it into the
 * btrees, starts the journal and background threads.  Prints what failed
 * where it failed (device, field, seq) and returns a code; nothing on disk
 * is changed by a failed open.  Every member is opened exclusively (a second
 * open of the same filesystem fails with -EBUSY, naming the device).
 */
int tfs_fs_open(const char *const *devs, unsigned nr, const struct tfs_fs_opts *opts,
		struct tfs_fs **ret);

/*
 * Writes everything back (dirty nodes, key cache), writes the superblocks'
 * clean section, stops the threads, closes the devices and frees fs.
 * Returns the first error met (fs is freed either way).
 */
int tfs_fs_stop(struct tfs_fs *fs);

/* Journal flush up to seq (0 or the journal error); see journal.h. */
int tfs_fs_flush_seq(struct tfs_fs *fs, u64 seq);

/* Everything about the running filesystem: journal, caches, allocator, devices. */
void tfs_fs_to_text(struct printbuf *out, struct tfs_fs *fs);

/*
 * Every thread that calls into a filesystem should call this first (the
 * FUSE daemon, at the start of each worker thread): registers it with RCU
 * (lib/rcu.h; idempotent, undone at thread exit).  The caches register a
 * thread themselves when it first touches them, so forgetting is not a
 * bug, only a first call that costs a little more.
 */
void tfs_fs_thread_init(void);

/* --- inodes --- */

struct tfs_stat {
	tfs_ino_t ino;
	u64 generation;
	u32 mode; /* type and permission bits, as st_mode */
	u32 nlink;
	u32 uid, gid;
	u64 rdev;
	u64 size;
	u64 blocks; /* 512-byte units allocated */
	u32 blksize;
	struct timespec atime, mtime, ctime, btime;
	/*
	 * tfs_getattr() only: a removed name (unlink, rename over it) left
	 * this non-directory with other names since the daemon cached it.
	 * The kernel's FUSE drops its cached link count itself after an unlink
	 * or a rename over a name; an nlink it did not ask for (readdirplus)
	 * computed after our removal but applied before that drop takes it one
	 * too low, to 0 for a file with one name left, and link(2) of that
	 * name then fails with ENOENT in the VFS (fuse/fuse.c readdir_fill()).
	 */
	bool links_dropped;
};

/*
 * Who asks: for the ownership of new inodes.  posix_acl: the caller left
 * the umask and the directory's default ACL to fs/ (FUSE_POSIX_ACL): a new
 * inode's mode and ACLs follow the default ACL, or lose the umask bits if
 * there is none (as ext4's posix_acl_create()).  Without it the mode is
 * taken as given.
 */
struct tfs_ctx {
	u32 uid, gid;
	u32 pid;
	u32 umask;
	bool posix_acl;
	/*
	 * tfs_setxattr_as(), tfs_setattr_as() and tfs_open_as(), asked where
	 * the caller's groups decide whether an access ACL or a change keeps
	 * S_ISGID (a file with S_ISGID whose group is not the caller's
	 * fsgid; for a change, S_ISGID without group exec): is the caller in
	 * group gid, or has it CAP_FSETID?  NULL: no other group, no CAP_FSETID.  Asking may be
	 * slow (the daemon reads /proc); it is called under the inode's lock.
	 */
	bool (*keeps_sgid)(void *arg, u32 gid);
	/*
	 * tfs_open_as() and tfs_setattr_as() (TFS_SETATTR_KILLPRIV) only,
	 * asked (under the inode's lock) where O_TRUNC or a setattr meets a
	 * set-ID bit: has the caller CAP_FSETID?  Its argument is
	 * keeps_sgid_arg.  NULL: no CAP_FSETID (tfs_open_as(): no set-ID bit
	 * goes).
	 */
	bool (*has_fsetid)(void *arg);
	void *keeps_sgid_arg;
};

int tfs_getattr(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_stat *st);

/*
 * A count of committed inode changes, of every filesystem in the process
 * (attributes, and a directory's entries: their changes commit the
 * directory too).  It moves once the change is what tfs_getattr() returns
 * and before the call that made it returns, so attributes read after the
 * count was seen at some value are current as long as it stays there.
 */
u64 tfs_inode_changes(void);

enum tfs_setattr_valid {
	TFS_SETATTR_MODE = 1 << 0,
	TFS_SETATTR_UID = 1 << 1,
	TFS_SETATTR_GID = 1 << 2,
	TFS_SETATTR_SIZE = 1 << 3,
	TFS_SETATTR_ATIME = 1 << 4,
	TFS_SETATTR_MTIME = 1 << 5,
	TFS_SETATTR_ATIME_NOW = 1 << 6,
	TFS_SETATTR_MTIME_NOW = 1 << 7,
	TFS_SETATTR_CTIME = 1 << 8,
	/*
	 * Clear S_ISUID, and S_ISGID when group-executable (write by a
	 * non-owner, chown); not of a directory (chown_common()).
	 */
	TFS_SETATTR_KILL_SUIDGID = 1 << 9,
	/*
	 * tfs_setattr_as() only, the rules by which ctx's change drops set-ID
	 * bits where FUSE's kernel side leaves them to the daemon (fuse/fuse.c),
	 * decided from the mode under the inode's lock, in the same commit:
	 * CALLER_SGID: at a size, owner or mode change, or a change of nothing
	 * (a write's file_remove_privs()), S_ISGID without group exec goes from
	 * a non-directory when ctx is outside the file's group (ctx->gid,
	 * ctx->keeps_sgid(); Linux 6.2+ setattr_should_drop_sgid()).
	 * KILLPRIV: at a size change or a change of nothing without a mode,
	 * S_ISUID, and S_ISGID when group-executable, go from a regular file
	 * unless ctx has CAP_FSETID (ctx->has_fsetid(); should_remove_suid()).
	 * Ignored without a ctx.
	 */
	TFS_SETATTR_CALLER_SGID = 1 << 10,
	TFS_SETATTR_KILLPRIV = 1 << 11,
};

struct tfs_setattr {
	unsigned valid; /* enum tfs_setattr_valid */
	u32 mode;	/* permission bits only; the type never changes */
	u32 uid, gid;
	u64 size;
	struct timespec atime, mtime, ctime;
};

/*
 * Applies sa to ino (a size change truncates or extends with a hole; ctime
 * moves on every change unless TFS_SETATTR_CTIME gives it) and returns the
 * new attributes in st.  f, when not NULL, is the open file it came through.
 */
int tfs_setattr(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_file *f, const struct tfs_setattr *sa,
		struct tfs_stat *st);
/*
 * tfs_setattr() by ctx: TFS_SETATTR_CALLER_SGID and TFS_SETATTR_KILLPRIV
 * in sa->valid drop set-ID bits by ctx's identity (see them).  ctx NULL:
 * as tfs_setattr().
 */
int tfs_setattr_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, struct tfs_file *f,
		   const struct tfs_setattr *sa, struct tfs_stat *st);

/*
 * A read of ino (file data, a directory listing): updates atime to now
 * under the relatime rule (ext4's default: only when atime is not after
 * mtime or ctime, or is 24 hours old), so most reads change nothing and
 * commit nothing; with strict (mount -o strictatime), whenever it is not
 * now already.  Returns 1 when atime changed (the caller's caches of the
 * attributes are stale), 0 when not (read-only filesystems never), or a
 * code.
 */
int tfs_touch_atime(struct tfs_fs *fs, tfs_ino_t ino, bool strict);

/* --- names --- */

/*
 * The inode dir's entry name points to: its attributes in st.  -ENOENT.
 * "." is dir itself, ".." its parent.
 */
int tfs_lookup(struct tfs_fs *fs, tfs_ino_t dir, const char *name, size_t len, struct tfs_stat *st);

/*
 * Creates name in dir: a regular file, fifo, socket, char or block device
 * (mode's type bits; rdev for devices).  -EEXIST when the name exists.
 */
int tfs_mknod(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	      size_t len, u32 mode, u64 rdev, struct tfs_stat *st);
int tfs_mkdir(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	      size_t len, u32 mode, struct tfs_stat *st);
int tfs_symlink(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
		size_t len, const char *target, struct tfs_stat *st);
/* Copies the target into buf (at most size bytes, no NUL); returns its length. */
ssize_t tfs_readlink(struct tfs_fs *fs, tfs_ino_t ino, char *buf, size_t size);
/* A new name for ino (not a directory: -EPERM). -EMLINK past the link limit. */
int tfs_link(struct tfs_fs *fs, tfs_ino_t ino, tfs_ino_t newdir, const char *newname, size_t newlen,
	     struct tfs_stat *st);
/* Removes a non-directory's name; the inode lives on while open (an orphan). */
int tfs_unlink(struct tfs_fs *fs, tfs_ino_t dir, const char *name, size_t len);
/* Removes an empty directory (-ENOTEMPTY). */
int tfs_rmdir(struct tfs_fs *fs, tfs_ino_t dir, const char *name, size_t len);

enum tfs_rename_flags {
	TFS_RENAME_NOREPLACE = 1 << 0,
	TFS_RENAME_EXCHANGE = 1 << 1,
	TFS_RENAME_WHITEOUT =
		1 << 2, /* the old name becomes a whiteout (chr 0:0); not with EXCHANGE */
};

/*
 * Renames atomically (one commit: a crash leaves the old or the new state).
 * Replacing follows POSIX (a directory only by an empty directory, -EISDIR /
 * -ENOTDIR / -ENOTEMPTY); moving a directory under itself is -EINVAL.
 */
int tfs_rename(struct tfs_fs *fs, tfs_ino_t olddir, const char *oldname, size_t oldlen,
	       tfs_ino_t newdir, const char *newname, size_t newlen, unsigned flags);
/* tfs_rename() made by ctx: a whiteout is owned by ctx (tfs_rename(): by root). */
int tfs_rename_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t olddir,
		  const char *oldname, size_t oldlen, tfs_ino_t newdir, const char *newname,
		  size_t newlen, unsigned flags);

/* --- directories --- */

/*
 * Called for each entry from tfs_readdir(); returns nonzero to stop (the
 * entry was not taken).  next_pos is the position to resume after it.
 */
typedef int (*tfs_filldir_fn)(void *ctx, const char *name, size_t len, tfs_ino_t ino,
			      unsigned dtype, u64 next_pos);

/*
 * Lists dir from position pos (0: the start; "." and ".." come first), in
 * a stable order: an entry that exists throughout a listing is returned
 * exactly once even when other entries are added or removed meanwhile.
 */
int tfs_readdir(struct tfs_fs *fs, tfs_ino_t dir, u64 pos, tfs_filldir_fn fn, void *ctx);

/* --- open files --- */

/*
 * Opens ino (flags as open(2): O_TRUNC truncates, O_APPEND is the caller's).
 * The file holds the inode: an unlinked inode lives until its last release.
 * The file snapshots the inode's error sequence: tfs_fsync() on it reports
 * each writeback error that happened since, once.
 */
int tfs_open(struct tfs_fs *fs, tfs_ino_t ino, int flags, struct tfs_file **f);
/*
 * tfs_open() by ctx: O_TRUNC drops set-ID bits in its truncation's commit
 * as truncate(2) by ctx does (should_remove_suid()): unless ctx has
 * CAP_FSETID (ctx->has_fsetid()), S_ISUID, and S_ISGID when group-executable
 * or when ctx is outside the file's group (ctx->gid, ctx->keeps_sgid()).
 * An open that fails changes nothing (Linux truncates once the open
 * succeeded).  ctx NULL or without has_fsetid: as tfs_open().
 */
int tfs_open_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, int flags,
		struct tfs_file **f);
/* Creates and opens name (O_EXCL: -EEXIST if it exists). */
int tfs_create(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t dir, const char *name,
	       size_t len, u32 mode, int flags, struct tfs_file **f, struct tfs_stat *st);
int tfs_release(struct tfs_fs *fs, struct tfs_file *f);
tfs_ino_t tfs_file_ino(const struct tfs_file *f);
/*
 * How often the file's allocated blocks (st_blocks) changed so far: two
 * equal answers mean no change in between (a counter, not a size).
 */
u64 tfs_file_blocks_changes(const struct tfs_file *f);
/*
 * The file's size now, if it can be read without waiting: false when a
 * writer holds the inode's lock (or the inode is not loaded).  A hint: it
 * may change as soon as it is returned.
 */
bool tfs_file_size_now(struct tfs_file *f, u64 *size);

/* Reads up to len bytes at off (holes read as zeros); returns bytes read (0 at EOF). */
ssize_t tfs_read(struct tfs_fs *fs, struct tfs_file *f, void *buf, size_t len, u64 off);

/*
 * Writes len bytes at off; returns len or a negative code (-EFBIG past
 * TFS_MAX_FILE_SIZE, -ENOSPC).  Data goes to newly allocated space, then its
 * extent is committed.  A failed data write is also recorded in the inode's
 * error sequence.  As write(2), fewer than len bytes are written when the
 * 2^63 - 1 limit or the space is reached after some were committed (a
 * write is one transaction per MiB).  off past 2^63 - 1 is -EINVAL.
 */
ssize_t tfs_write(struct tfs_fs *fs, struct tfs_file *f, const void *buf, size_t len, u64 off);

enum tfs_write_flags {
	/*
	 * mtime and ctime are left as they are: for a caller that owns the
	 * times (FUSE's writeback cache sends them with setattr) and may run
	 * the write after that setattr (fuse/wbehind.c).
	 */
	TFS_WRITE_KEEP_TIMES = 1 << 0,
	/*
	 * No other write of the blocks this one touches runs at the same
	 * time (FUSE's write-back: one request per page, each page's next
	 * after this one's reply): a write from a block's start up to EOF
	 * then goes to new space without the inode lock, as whole blocks do.
	 */
	TFS_WRITE_NO_OVERLAP = 1 << 1,
};

/* tfs_write() with tfs_write_flags. */
ssize_t tfs_write_flags(struct tfs_fs *fs, struct tfs_file *f, const void *buf, size_t len, u64 off,
			unsigned flags);

/*
 * Makes the file durable (data, size, name; datasync may skip times) and
 * reports errors: the journal error, else the first writeback error this
 * file has not seen yet (each open file sees each error once).  Flushes
 * the journal only up to the inode's last change, and not at all when
 * that is already durable.
 */
int tfs_fsync(struct tfs_fs *fs, struct tfs_file *f, bool datasync);
/*
 * Starts what tfs_fsync(f, datasync) will wait for (the journal's flush entry
 * up to the inode's last change), without waiting: for a thread whose write an fsync
 * of f in another thread waits for (fuse/wbehind.c), so the journal write
 * goes out at once instead of after that thread's wakeup.  Best effort.
 */
void tfs_fsync_start(struct tfs_fs *fs, struct tfs_file *f, bool datasync);
/* fsync of a directory by inode number (no error sequence). */
int tfs_fsyncdir(struct tfs_fs *fs, tfs_ino_t dir, bool datasync);
/* Everything durable; the filesystem-wide error sequence as for fsync. */
int tfs_syncfs(struct tfs_fs *fs);

/* mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|KEEP_SIZE, FALLOC_FL_ZERO_RANGE. */
int tfs_fallocate(struct tfs_fs *fs, struct tfs_file *f, int mode, u64 off, u64 len);

/* SEEK_DATA / SEEK_HOLE (and SEEK_SET/CUR/END are the caller's); -ENXIO past EOF. */
s64 tfs_lseek(struct tfs_fs *fs, struct tfs_file *f, u64 off, int whence);

int tfs_statfs(struct tfs_fs *fs, struct statvfs *st);

/* --- extended attributes --- */

enum tfs_xattr_flags {
	TFS_XATTR_CREATE = 1 << 0,  /* -EEXIST if present */
	TFS_XATTR_REPLACE = 1 << 1, /* -ENODATA if absent (both: one or the other) */
};

/*
 * name is the full name with its namespace ("user.foo"); unknown namespaces
 * -EOPNOTSUPP.  A value must also fit one journal entry (at least 16 KiB
 * less a little, by geometry): a larger one is -E2BIG, nothing changed.
 */
int tfs_setxattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name, const void *value, size_t size,
		 unsigned flags);
/*
 * tfs_setxattr() by ctx.  An access ACL sets the permission bits, and
 * clears S_ISGID unless ctx is in the file's group (gid or groups) or has
 * CAP_FSETID (ext4's posix_acl_update_mode()): decided on the group and
 * mode under the inode's lock, in the commit that sets the ACL.
 * tfs_setxattr() is a caller that keeps S_ISGID.
 */
int tfs_setxattr_as(struct tfs_fs *fs, const struct tfs_ctx *ctx, tfs_ino_t ino, const char *name,
		    const void *value, size_t size, unsigned flags);
/* Copies the value; size 0 returns its length; -ERANGE when size is too small; -ENODATA. */
ssize_t tfs_getxattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name, void *buf, size_t size);
/* NUL-separated names, as listxattr(2); size 0 returns the length needed. */
ssize_t tfs_listxattr(struct tfs_fs *fs, tfs_ino_t ino, char *buf, size_t size);
int tfs_removexattr(struct tfs_fs *fs, tfs_ino_t ino, const char *name);

#endif /* TFS_FS_FS_H */
