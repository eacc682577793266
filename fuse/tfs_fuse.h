/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FUSE_TFS_FUSE_H
#define TFS_FUSE_TFS_FUSE_H

/*
 * The FUSE front end: a libfuse lowlevel daemon over fs/fs.h, and the
 * mount command that starts it (`tinyfs mount`, `mount.tinyfs`).
 *
 * Invariants:
 *  - fuse/ only maps requests: every handler decodes its arguments, calls
 *    one fs/ function, and replies exactly once.  Every rule about files
 *    (permissions on ownership, times, names, errors) lives in fs/.
 *  - errno appears only here: codes from fs/ become errnos with
 *    tfs_err_class() when a reply is sent.
 *  - Node ids are inode numbers (fs/ never reuses one while open), with the
 *    generation fs/ reports; the kernel's lookup counts are kept per inode
 *    (struct tfs_nlookup) and must balance at unmount.
 *  - The daemon forks (unless foreground) before fs/ starts any thread:
 *    tfs_fs_open() runs in the child, and a pipe tells the parent whether
 *    the mount is ready, so the parent's exit status is the mount's.
 *  - Unmount ends the session loop; then every file still open is released
 *    and tfs_fs_stop() writes everything back.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "fs/fs.h"
#include "lib/printbuf.h"

struct fuse_session;
struct fuse_conn_info_opts;

/* --- mount options --- */

/* -o readdir_ahead (fuse/rdahead.c) */
enum tfs_rdahead_mode {
	TFS_RDAHEAD_off,
	TFS_RDAHEAD_free_cpus, /* only while threads rarely wait for a CPU (the default) */
	TFS_RDAHEAD_always,    /* every batch, and requests wait for it (tests) */
};

struct tfs_mount_opts {
	char **devs; /* canonical paths of the members */
	unsigned nr_devs;
	char *source;	  /* "DEV[:DEV...]" as mountinfo will show it */
	char *mountpoint; /* canonical */
	struct tfs_fs_opts fs;

	bool foreground;
	bool debug;	    /* libfuse's request trace on stderr */
	bool allow_other;   /* default: on when root mounts */
	bool suid_dev;	    /* default: suid,dev when root mounts (as mount(8)) */
	bool writeback;	    /* kernel writeback cache (default on) */
	bool killpriv;	    /* FUSE_CAP_HANDLE_KILLPRIV (default off, see fuse.c) */
	bool kernel_lseek;  /* SEEK_DATA/HOLE answered by the kernel (default off) */
	bool cache_readdir; /* let the kernel cache directory listings */

	/*
	 * Reads never update atime (of directories): noatime, nodiratime;
	 * always (not only per relatime): strictatime.
	 */
	bool noatime, nodiratime, strictatime;
	double entry_timeout, attr_timeout, negative_timeout;
	unsigned max_threads, max_idle_threads;
	bool clone_fd;
	bool libfuse_loop; /* libfuse's multithreaded loop, not tfs_fuse_loop() */
	unsigned poll_us;  /* tfs_fuse_loop(): most time polling /dev/fuse; 0: none */
	/* tfs_fuse_loop(): CPU latency request held until N ms after a request; 0: none */
	unsigned low_latency_ms;
	bool write_behind; /* small write-back requests answered early (default on) */
	char *log;	   /* the daemon's stderr once detached (default /dev/null) */
	/* The next readdirplus batch read ahead (default: while CPUs are free). */
	enum tfs_rdahead_mode readdir_ahead;

	/* -o options for fuse_session_new() ("-o" "a,b,c"), conn options included. */
	struct printbuf fuse_opts;
};

void tfs_mount_opts_init(struct tfs_mount_opts *o);
void tfs_mount_opts_exit(struct tfs_mount_opts *o);

/*
 * Parses one -o list (comma-separated) into o.  Unknown options are a
 * usage error, printed to stderr with prog; returns 0 or -EINVAL.
 */
int tfs_mount_opts_parse(struct tfs_mount_opts *o, const char *prog, const char *list);

/*
 * Sets devs/source from "DEV[:DEV...]" and mountpoint, canonicalised.
 * Prints what is wrong (missing device, missing or non-directory
 * mountpoint) and returns a negative errno.
 */
int tfs_mount_opts_targets(struct tfs_mount_opts *o, const char *prog, const char *devspec,
			   const char *mountpoint);

/* The whole option set, one per line (for -v and the stats `fuse` section). */
void tfs_mount_opts_to_text(struct printbuf *out, const struct tfs_mount_opts *o);

/*
 * Mounts and serves until unmounted: checks the targets are free, forks
 * unless foreground, opens the filesystem, mounts, and reports readiness.
 * In the parent (or in foreground mode at the end) returns the exit status
 * (0, 1 failure with the reason printed).  The daemon child never returns.
 */
int tfs_mount_run(struct tfs_mount_opts *o, const char *prog);

/* Usage text shared by `tinyfs mount` and `mount.tinyfs`. */
void tfs_mount_options_help(FILE *f);

/* --- the daemon --- */

// clang-format off
#define TFS_FUSE_OPS(x)							\
	x(init) x(destroy) x(lookup) x(forget) x(forget_multi) x(getattr)	\
	x(setattr) x(readlink) x(mknod) x(mkdir) x(unlink) x(rmdir)	\
	x(symlink) x(rename) x(link) x(open) x(read) x(write)		\
	x(flush) x(release) x(fsync) x(opendir) x(readdir)		\
	x(readdirplus) x(releasedir) x(fsyncdir) x(statfs) x(setxattr)	\
	x(getxattr) x(listxattr) x(removexattr) x(access) x(create)	\
	x(fallocate) x(lseek)
// clang-format on

enum tfs_fuse_op {
#define x(n) TFS_FUSE_OP_##n,
	TFS_FUSE_OPS(x)
#undef x
	TFS_FUSE_OP_NR
};

/* Kernel lookup counts per inode, sharded (see fuse/nlookup.c). */
struct tfs_nlookup;

/* fs: where the pins (below) are open. */
struct tfs_nlookup *tfs_nlookup_alloc(struct tfs_fs *fs);
/* Releases the pins left (before fs stops). */
void tfs_nlookup_free(struct tfs_nlookup *t);
void tfs_nlookup_get(struct tfs_nlookup *t, u64 ino, u64 n);
/*
 * Returns false when ino had fewer than n lookups (a kernel/daemon mismatch).
 * At zero the inode's pin, if any, is released.
 */
bool tfs_nlookup_put(struct tfs_nlookup *t, u64 ino, u64 n);
/*
 * Pins keep an inode whose last name goes while the kernel still counts
 * lookups of it (see fuse/nlookup.c).  wants_pin: ino has lookups and no
 * pin.  pin: f becomes ino's pin and NULL is returned, or f is returned
 * (no lookups left, or pinned meanwhile) for the caller to release.
 */
bool tfs_nlookup_wants_pin(struct tfs_nlookup *t, u64 ino);
struct tfs_file *tfs_nlookup_pin(struct tfs_nlookup *t, u64 ino, struct tfs_file *f);
/* Inodes with a nonzero count, and the sum of counts. */
void tfs_nlookup_totals(struct tfs_nlookup *t, u64 *inodes, u64 *lookups);

/*
 * Write-behind (fuse/wbehind.c): the kernel's small write-back requests are
 * answered at once and written by a few threads, so close(2) of a small
 * file does not wait for the device.  Each inode's writes run in order;
 * whatever reads or changes their range waits for them first
 * (tfs_wbehind_wait()), and so does fsync, which then makes them durable.
 */
#define TFS_WBEHIND_MAX_WRITE (128U << 10)  /* larger writes stay synchronous */
#define TFS_WBEHIND_MAX_BYTES (32ULL << 20) /* copied data waiting, at most */

struct tfs_wbehind;

/*
 * Which writes are queued: a small file's data, which the kernel writes
 * back in one request from offset 0 (a tree copy, an untar); and an append,
 * the write-back of the file's last block (off within it, or at EOF) that
 * extends the file (a log's write + fsync: the reply no longer waits for the
 * device, whose write runs while the kernel sends its setattr, and fsync
 * waits for it).  Writes elsewhere (random writes, the body of a sequential
 * write-back) stay synchronous: the kernel sends a file's dirty pages in
 * parallel and they reach the device in parallel, which one queue per inode
 * would serialize.  At most one request of a write-back pass starts in the
 * last block and ends past EOF, so appends serialize nothing but themselves,
 * which the kernel sends one after another anyway (a page's next write after
 * its previous one's reply).  size: the file's size now (fs/'s), block_size
 * 0: appends are not queued.
 */
static inline bool tfs_wbehind_fits(u64 off, size_t len, u64 size, u32 block_size)
{
	if (len > TFS_WBEHIND_MAX_WRITE)
		return false;
	if (!off)
		return true;
	/* The last block starts here (the next one when size is a multiple). */
	u64 last = size & ~((u64)block_size - 1);

	if (last == size && size)
		last -= block_size;
	return block_size && off >= last && off <= size && off + len > size;
}

/* Starts the threads; NULL without memory (then nothing is queued). */
struct tfs_wbehind *tfs_wbehind_start(struct tfs_fs *fs, _Atomic u64 *eio_count, u64 max_bytes);
/* Runs everything queued, ends the threads, frees wb (NULL: nothing). */
void tfs_wbehind_stop(struct tfs_wbehind *wb);
/*
 * Queues a copy of a write of f (inode ino): true when queued (answer the
 * kernel now), false when the caller must write it itself (too large, the
 * queue full, free space low, no memory): then after tfs_wbehind_wait().
 */
bool tfs_wbehind_write(struct tfs_wbehind *wb, u64 ino, struct tfs_file *f, const void *data,
		       size_t len, u64 off);
/* Would tfs_wbehind_write() take this write of f (its size now), queue room aside? */
bool tfs_wbehind_fits_file(struct tfs_wbehind *wb, struct tfs_file *f, u64 off, size_t len);
/*
 * A release of f while writes of ino are queued: queued after them (then
 * tfs_release(f) and free(ff) run there) and true; false: release it now.
 */
bool tfs_wbehind_release(struct tfs_wbehind *wb, u64 ino, struct tfs_file *f, void *ff);
/*
 * Waits until no write of ino is queued or running.  With take_error, returns
 * (once) a failure of one of them other than EIO (fs/ keeps EIO for fsync).
 * Before it blocks it calls the thread's wait hook (tfs_bdev_will_wait()), as
 * a device wait does.
 */
int tfs_wbehind_wait(struct tfs_wbehind *wb, u64 ino, bool take_error);
/*
 * tfs_wbehind_wait(wb, ino, true) for an fsync (datasync: fdatasync) of ino:
 * the thread that finishes ino's last queued write then starts the journal
 * flush the fsync waits for (tfs_fsync_start()) before waking it.
 */
int tfs_wbehind_wait_fsync(struct tfs_wbehind *wb, u64 ino, bool datasync);
/* Are writes of ino queued or running (a request on it would wait)? */
bool tfs_wbehind_busy(struct tfs_wbehind *wb, u64 ino);
void tfs_wbehind_to_text(struct printbuf *out, struct tfs_wbehind *wb);

/*
 * Listing readahead (fuse/rdahead.c): after a full readdirplus reply, one
 * thread reads the next batch of the listing, which the request for it
 * takes if nothing changed meanwhile.
 */
struct tfs_rdahead;

/* One entry of a readdirplus reply, before encoding. */
struct tfs_rdahead_ent {
	u64 ino, next_pos;
	const char *name; /* len bytes, not NUL-terminated */
	u8 len, dtype;
	bool attrs;    /* st holds its attributes; else the name only (node 0) */
	bool withheld; /* no attributes because of st.links_dropped */
	struct tfs_stat st;
};

/*
 * The entry for a name tfs_readdir() listed: 0, 1 when the inode is gone
 * (skip it), or a negative error.  "." and ".." get no attributes.
 */
int tfs_rdahead_ent_fill(struct tfs_fs *fs, const char *name, size_t len, tfs_ino_t ino,
			 unsigned dtype, u64 next_pos, struct tfs_rdahead_ent *e);
/* What an entry with a name of len bytes takes in a readdirplus reply. */
size_t tfs_rdahead_ent_bytes(size_t len);
/*
 * Starts the thread; NULL on failure (then nothing is read ahead).
 * dir_changes[dir % slots] moves at each change in directory dir.
 */
struct tfs_rdahead *tfs_rdahead_start(struct tfs_fs *fs, _Atomic u64 *dir_changes, unsigned slots,
				      enum tfs_rdahead_mode mode);
/* Ends the thread and frees ra (NULL: nothing). */
void tfs_rdahead_stop(struct tfs_rdahead *ra);
/* Reads ahead the entries of dir from pos that fit in size bytes of reply. */
void tfs_rdahead_queue(struct tfs_rdahead *ra, u64 dir, u64 pos, size_t size);
/*
 * The batch read ahead for exactly (dir, pos, size), waiting while it is
 * being read, if nothing changed since: true, with its entries (more:
 * entries remain after them), valid and locked until tfs_rdahead_done().
 * false: read the listing as without readahead.
 */
bool tfs_rdahead_take(struct tfs_rdahead *ra, u64 dir, u64 pos, size_t size,
		      const struct tfs_rdahead_ent **ents, size_t *nr, bool *more);
void tfs_rdahead_done(struct tfs_rdahead *ra);
void tfs_rdahead_to_text(struct printbuf *out, struct tfs_rdahead *ra);

struct tfs_fuse_file;

/*
 * Polling of /dev/fuse by tfs_fuse_loop()'s reading thread: its settings
 * and counters (shown by `tinyfs stats MNT fuse`).
 */
struct tfs_fuse_poll {
	unsigned max_us;	   /* the most a thread polls before it sleeps; 0: never */
	_Atomic u64 hits;	   /* requests read while polling, with no wakeup */
	_Atomic u64 copoll_hits;   /* ... by a follower while the reader slept */
	_Atomic u64 sleeps;	   /* polls that ran out: the thread slept in poll(2) */
	_Atomic u64 contended;	   /* ... at once: threads waited for CPUs (PSI) */
	_Atomic u64 poll_ns;	   /* time spent polling */
	_Atomic u64 handed_off;	   /* requests served by a follower (see fuse/loop.c) */
	_Atomic u64 reads_tried;   /* small reads the leader began serving itself */
	_Atomic u64 reads_waited;  /* ... of which it handed the reading off at a device wait */
	struct tfs_cpulat *cpulat; /* touched per request read (fuse/cpulat.h); NULL: none */
};

void tfs_fuse_poll_to_text(struct printbuf *out, struct tfs_fuse_poll *p);

#define TFS_FUSE_RDC_SLOTS 1024

/* The daemon's state; the userdata of the session. */
struct tfs_fuse {
	struct tfs_fs *fs;
	struct fuse_session *se;
	const struct tfs_mount_opts *opts;
	struct tfs_nlookup *nlookup;
	struct tfs_wbehind *wbehind; /* started at init when the writeback cache is on */
	struct tfs_rdahead *rdahead; /* NULL: -o no_readdir_ahead */

	/* -o options for the connection (max_write=, splice_read, ...), or NULL. */
	struct fuse_conn_info_opts *conn_opts;
	bool writeback; /* as negotiated at init */
	bool killpriv;
	bool posix_acl; /* FUSE_CAP_DONT_MASK: fs/ applies the umask or default ACL */
	unsigned max_write;

	/* Files open through the kernel, released at the end if it never did. */
	pthread_mutex_t files_lock;
	struct tfs_fuse_file *files;
	u64 nr_files;

	_Atomic u64 nr_ops[TFS_FUSE_OP_NR];
	_Atomic u64 nr_errors[TFS_FUSE_OP_NR];
	/* Time spent in the handlers that are timed (the metadata ones), in ns. */
	_Atomic u64 op_ns[TFS_FUSE_OP_NR];
	_Atomic u64 op_max_ns[TFS_FUSE_OP_NR];
	_Atomic u64 nr_forget_mismatch;
	_Atomic u64 nr_wb_errors_deferred;  /* writeback EIO left to fsync (see write) */
	_Atomic u64 nr_fsync_inval_skipped; /* st_blocks unchanged: cache kept (op_fsync) */
	_Atomic u64 nr_plus_withheld;	    /* readdirplus entries sent without attributes */
	_Atomic u64 bytes_read, bytes_written;
	struct timespec started;
	struct tfs_fuse_poll poll;

	/*
	 * The kernel's listing cache (cache_readdir): a change count per
	 * directory (hashed: a collision only drops a cache), and per slot the
	 * directory and count an opendir last let the kernel keep its cache
	 * for (see op_opendir).
	 */
	_Atomic u64 dir_changes[TFS_FUSE_RDC_SLOTS];
	pthread_mutex_t rdc_lock;
	struct {
		u64 ino, changes;
	} rdc[TFS_FUSE_RDC_SLOTS];
};

/* The lowlevel operations table. */
extern const struct fuse_lowlevel_ops tfs_fuse_ops;

void tfs_fuse_init_state(struct tfs_fuse *tf, struct tfs_fs *fs, const struct tfs_mount_opts *o);
/* Releases the files the kernel never released; then tfs_fs_stop() may run. */
void tfs_fuse_release_all(struct tfs_fuse *tf);
void tfs_fuse_exit_state(struct tfs_fuse *tf);

/* The daemon's own counters (ops, errors, lookups, open files, options). */
void tfs_fuse_to_text(struct printbuf *out, struct tfs_fuse *tf);

/*
 * Serves se until the kernel ends the connection (fuse/loop.c): one thread
 * reads at a time and serves requests that cannot wait for the device
 * itself, unless busy(arg, node id) says it would wait for writes behind
 * (then it is handed off too); the others go to up to max_threads threads.
 * The reading thread polls /dev/fuse for up to poll->max_us (adapted to how
 * soon requests come) before it sleeps, and counts in *poll.
 * Returns 0, or the
 * negative errno of a failed read.  Threads start with every signal blocked.
 */
int tfs_fuse_loop(struct fuse_session *se, unsigned max_threads, bool (*busy)(void *arg, u64 ino),
		  bool (*queues)(void *arg, u64 fh, u64 off, u32 len), void *arg,
		  struct tfs_fuse_poll *poll);
/*
 * The calling thread, serving a request of tfs_fuse_loop(), begins (true)
 * or ends (false) a wait for the kernel to send other requests and have
 * them answered (lseek's page flush): meanwhile it does not count against
 * max_threads, so a thread is left (started if need be) to read and serve
 * them.  No-op in any other thread.
 */
void tfs_fuse_loop_kernel_wait(bool begin);
/* For tfs_fuse_loop(): tf (a struct tfs_fuse) has writes of ino behind. */
bool tfs_fuse_ino_busy(void *tf, u64 ino);
/*
 * For tfs_fuse_loop(): would tf write the kernel's write-back of len bytes
 * at off of the open file fh behind (answered without waiting)?
 */
bool tfs_fuse_write_queues(void *tf, u64 fh, u64 off, u32 len);

/* --- the control channel (fuse/ctl.c, fuse/ctl_path.c) --- */

struct tfs_ctl;

/*
 * Listens on the control socket of the mount whose device number is dev
 * (see tfs_ctl_socket_path()), answering `tinyfs stats` requests from a
 * thread of its own.  0 or a negative errno (printed).
 */
int tfs_ctl_start(struct tfs_ctl **ret, struct tfs_fuse *tf, dev_t dev);
/* Stops the thread and removes the socket. */
void tfs_ctl_stop(struct tfs_ctl *c);

#endif /* TFS_FUSE_TFS_FUSE_H */
