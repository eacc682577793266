/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_BDEV_H
#define TFS_LIB_BDEV_H

/*
 * Block devices: every byte tinyfs reads or writes goes through a
 * struct tfs_bdev.
 *
 * A bdev is a table of operations (struct tfs_bdev_ops, after e2fsprogs'
 * io_manager) over some backing: the io_uring implementation over an image
 * file or a block device (tfs_bdev_open()), and the fault device
 * (lib/faultdev.h) stacked over another bdev.  Callers cannot tell them apart.
 *
 * I/O is asynchronous: fill a struct tfs_bio and tfs_bio_submit() it; its
 * end_io callback runs once, from the device's completion thread, with
 * bio->result set to 0 or a negative code.  Submission may block while the
 * device's queue is full (bounded queue depth); it never fails: errors are
 * delivered through end_io.  The synchronous helpers (tfs_bdev_read() ...)
 * submit and wait.  end_io may submit more bios (they are queued, never
 * blocking, when the queue is full) but must not wait for I/O on the same
 * device: it runs on the only thread that completes that device's bios.
 *
 * Durability: a completed write is readable but not durable until a FLUSH
 * completes (TFS_OP_FLUSH), or, for a write with TFS_BIO_FUA, when it
 * completes.  A write with TFS_BIO_PREFLUSH first makes every write completed
 * before it durable.  Code that depends on an order says so in a comment.
 *
 * Offsets and lengths are in bytes and must be multiples of
 * bdev->logical_block_size; buffers for I/O must be aligned to it
 * (tfs_bdev_alloc_buf()).  Errors are codes (lib/errcode.h); the message
 * naming device, op, offset and length is printed where the error is found.
 */

#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"

struct printbuf;
struct tfs_bdev;

/* clang-format off */
#define TFS_BIO_OPS(x)	\
	x(read)		\
	x(write)	\
	x(flush)	\
	x(discard)

/* What a bio carries, given by the submitter so fault rules can match it. */
#define TFS_BIO_TAGS(x)	\
	x(none)		\
	x(sb)		\
	x(journal)	\
	x(btree)	\
	x(data)
/* clang-format on */

enum tfs_bio_op {
#define x(n) TFS_OP_##n,
	TFS_BIO_OPS(x)
#undef x
	TFS_OP_NR
};

enum tfs_bio_tag {
#define x(n) TFS_TAG_##n,
	TFS_BIO_TAGS(x)
#undef x
	TFS_TAG_NR
};

extern const char *const tfs_bio_op_names[];
extern const char *const tfs_bio_tag_names[];

enum tfs_bio_flags {
	TFS_BIO_FUA = 1 << 0,	   /* write: durable when it completes */
	TFS_BIO_PREFLUSH = 1 << 1, /* write: flush earlier writes first */
	/* The submitter reports a failure itself (in terms of its own request):
	 * the device prints nothing; counters and the trace point still count it. */
	TFS_BIO_QUIET = 1 << 2,
};

struct tfs_bio {
	struct tfs_bdev *bdev;
	enum tfs_bio_op op;
	unsigned flags; /* enum tfs_bio_flags */
	enum tfs_bio_tag tag;
	u64 offset; /* bytes */
	void *buf;  /* read, write; aligned */
	size_t len; /* bytes; 0 for flush */
	int result; /* set before end_io: 0 or a negative code */
	void (*end_io)(struct tfs_bio *bio);
	void *private; /* the submitter's */
	/* Owned by the device while in flight. */
	struct tfs_bio *next_internal;
	size_t done_internal;
};

struct tfs_bdev_ops {
	const char *name; /* "uring", "fault" */
	void (*submit)(struct tfs_bdev *bdev, struct tfs_bio *bio);
	/* Waits for every submitted bio to complete. */
	void (*drain)(struct tfs_bdev *bdev);
	/* Drains, then frees the device (and, for a stacked one, not its lower). */
	void (*close)(struct tfs_bdev *bdev);
	void (*to_text)(struct printbuf *out, struct tfs_bdev *bdev);
	/* Optional: submits nr bios to this device at once (NULL: one by one). */
	void (*submit_batch)(struct tfs_bdev *bdev, struct tfs_bio **bios, unsigned nr);
	/*
	 * Optional: does bio, a read, a flush or a plain write
	 * (tfs_bio_in_caller()), in the calling thread and returns its result, without end_io (NULL:
	 * submit, then wait for end_io).
	 */
	int (*rw_wait)(struct tfs_bdev *bdev, struct tfs_bio *bio);
};

struct tfs_bdev_counters {
	u64 ios[TFS_OP_NR]; /* submitted, per op */
	u64 bytes[TFS_OP_NR];
	u64 errors[TFS_OP_NR];
	u64 fua;
};

struct tfs_bdev {
	const struct tfs_bdev_ops *ops;
	char *path; /* as opened; owned */
	u64 size;   /* bytes */
	unsigned logical_block_size;
	bool is_blockdev;
	bool direct; /* O_DIRECT in use */
	bool read_only;
	struct tfs_bdev_counters counters; /* updated atomically */
	/*
	 * Writes and discards other than file data and journal entries
	 * (tfs_bio_is_meta_write()): submitted, and completed (counted before
	 * end_io).  The journal compares them with what its last flush covered
	 * to know whether only data went to the device since
	 * (journal_io.c, "post-flush").  Atomic.
	 */
	u64 meta_writes_submitted, meta_writes_done;
	void *private; /* the implementation's */
};

/*
 * A bio the journal's post-flush entries must not race with: a write of
 * anything but file data or a journal entry (btree nodes, superblocks), or
 * a discard of anything.
 */
static inline bool tfs_bio_is_meta_write(const struct tfs_bio *bio)
{
	return (bio->op == TFS_OP_write && bio->tag != TFS_TAG_data &&
		bio->tag != TFS_TAG_journal) ||
	       bio->op == TFS_OP_discard;
}

/*
 * A bio tfs_bio_submit_wait() may hand to the device's rw_wait: a read, a
 * flush, or a write without FUA or PREFLUSH that is not a metadata write
 * (those are counted around end_io for the journal, and the flags need the
 * ring's linked flush).
 */
static inline bool tfs_bio_in_caller(const struct tfs_bio *bio)
{
	return bio->op == TFS_OP_read || bio->op == TFS_OP_flush ||
	       (bio->op == TFS_OP_write && !(bio->flags & (TFS_BIO_FUA | TFS_BIO_PREFLUSH)) &&
		!tfs_bio_is_meta_write(bio));
}

/* For device implementations: completes bio (counts it, then calls end_io). */
void tfs_bio_endio(struct tfs_bio *bio);

enum tfs_bdev_open_flags {
	TFS_BDEV_RDONLY = 1 << 0,
	TFS_BDEV_BUFFERED = 1 << 1, /* do not try O_DIRECT */
	TFS_BDEV_EXCL = 1 << 2,	    /* O_EXCL on block devices */
	/*
	 * Image files opened O_DIRECT: small writes of file data and journal
	 * entries without FUA or PREFLUSH (up to TFS_BDEV_HOST_CACHE_MAX), and
	 * small reads of file data (TFS_BDEV_HOST_CACHE_READ_MAX), whole host
	 * pages only, go through the host's page cache instead (lib/bdev.c,
	 * host_cached()).
	 */
	TFS_BDEV_HOST_CACHE = 1 << 3,
};

#define TFS_BDEV_HOST_CACHE_MAX (128u << 10)
#define TFS_BDEV_HOST_CACHE_READ_MAX (64u << 10)

/*
 * Opens an image file or a block device on io_uring, with O_DIRECT where the
 * device allows it (falling back to buffered I/O, which to_text reports).
 * The size and logical block size are probed (ioctl for block devices, stat
 * for files).  When registered "dev" fault entries match path (from
 * tfs_faults_parse(), a tool's --fault, or TFS_FAULTS, which the first open
 * in a process applies if nothing did yet), the returned bdev is a fault
 * device (lib/faultdev.h) stacked over the real one; a path whose fault
 * device vanished fails with -TFS_ERR_bdev_vanished.  Prints why and
 * returns a code when the open fails.
 */
int tfs_bdev_open(const char *path, unsigned flags, struct tfs_bdev **ret);

/* Drains and frees bdev (and the devices below it that it opened). */
void tfs_bdev_close(struct tfs_bdev *bdev);

/* Submits bio to bio->bdev; end_io reports the result. */
void tfs_bio_submit(struct tfs_bio *bio);

/*
 * Submits nr bios at once (in order; each to its own bio->bdev): the io_uring
 * device queues them all and enters the kernel once per batch.
 */
void tfs_bio_submit_batch(struct tfs_bio **bios, unsigned nr);

/* Waits for every bio submitted to bdev so far to complete. */
void tfs_bdev_drain(struct tfs_bdev *bdev);

/*
 * Submits a filled-in bio (end_io and private are overwritten), waits for it
 * and returns its result.  On the io_uring device a read or a plain write
 * (tfs_bio_in_caller()) runs in the calling thread (a blocking pread or
 * pwrite of the descriptor, an fdatasync for a flush): it needs no
 * completion thread, so the caller is woken once, by the device, not
 * through that thread.
 */
int tfs_bio_submit_wait(struct tfs_bio *bio);

/*
 * The calling thread's wait hook: fn(arg) is called once, then cleared,
 * before the thread first waits for a device -- a bio that is not a read
 * the host's page cache has whole (tried with RWF_NOWAIT on the io_uring
 * device's cached descriptor; a partial hit waits for the rest) -- or for
 * an inode a writer holds (tfs_ilock()).  The FUSE
 * session's leader serving a read itself hands the reading of requests to
 * another thread there (fuse/loop.c).  NULL clears it.  Thread-local.
 */
void tfs_bdev_set_wait_hook(void (*fn)(void *arg), void *arg);
/* The caller is about to wait for a device: runs the thread's hook, if any. */
void tfs_bdev_will_wait(void);

/*
 * Runs bio, a tfs_bio_in_caller() one, and then its own end_io, both in the
 * calling thread (where the device allows; else it waits for the
 * completion thread): for a caller that would only wait for it anyway, and
 * holds no lock end_io takes.  Saves the completion thread's wake-up and
 * the caller's.
 */
void tfs_bio_submit_inline(struct tfs_bio *bio);

/* Synchronous I/O: submit, wait, return the bio's result. */
int tfs_bdev_read(struct tfs_bdev *bdev, void *buf, size_t len, u64 offset, enum tfs_bio_tag tag);
int tfs_bdev_write(struct tfs_bdev *bdev, const void *buf, size_t len, u64 offset, unsigned flags,
		   enum tfs_bio_tag tag);
int tfs_bdev_flush(struct tfs_bdev *bdev);
int tfs_bdev_discard(struct tfs_bdev *bdev, u64 offset, u64 len);

/* A zeroed buffer aligned for I/O on bdev (NULL: on any device); free() it. NULL on ENOMEM. */
void *tfs_bdev_alloc_buf(struct tfs_bdev *bdev, size_t len);

/* Path, implementation, size, block size, direct or buffered, counters. */
void tfs_bdev_to_text(struct printbuf *out, struct tfs_bdev *bdev);

/*
 * Opens path on io_uring only, never stacking a fault device (the fault
 * device uses it for the device below; tests use it for a known-plain one).
 */
int tfs_bdev_open_uring(const char *path, unsigned flags, struct tfs_bdev **ret);

/* The counters as a table: op, ios, bytes, errors (every to_text uses it). */
void tfs_bdev_counters_to_text(struct printbuf *out, const struct tfs_bdev_counters *c);

/* --- for implementations of struct tfs_bdev_ops --- */

/*
 * Checks bio against its device: a known op, aligned offset, length and
 * buffer (-TFS_ERR_bdev_unaligned), within the device
 * (-TFS_ERR_bdev_out_of_range), not zero-length, no write or discard on a
 * read-only device (-EROFS).  Prints the message and returns the code.
 */
int tfs_bio_check(const struct tfs_bio *bio);
/* Prints "PATH: OP at offset O length L failed: ERR[: why]". */
void tfs_bio_err_msg(const struct tfs_bio *bio, int err, const char *why);
/* Counter updates (atomic): a submitted bio, a failed one. */
void tfs_bdev_count_submit(struct tfs_bdev *bdev, const struct tfs_bio *bio);
void tfs_bdev_count_error(struct tfs_bdev *bdev, const struct tfs_bio *bio);

#endif /* TFS_LIB_BDEV_H */
