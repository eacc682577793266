// SPDX-License-Identifier: GPL-2.0
/*
 * The io_uring block device, and the generic bdev helpers (submission,
 * synchronous wrappers, checks) every implementation shares.
 *
 * One ring per device.  Any thread submits, under dev->lock; one completion
 * thread per device reaps CQEs and calls end_io.  Every bio, even one refused
 * at submission, completes through the completion thread (a refused bio is
 * sent as a NOP carrying its error), so end_io always runs there.
 *
 * Queue depth bounds the bios in flight; a submitter blocks while the queue
 * is full, except the completion thread itself (an end_io that submits),
 * whose bios wait on dev->pending instead, so the only thread that can free
 * a slot never sleeps waiting for one.
 *
 * io_uring_enter can refuse a submission: EINTR, EAGAIN and EBUSY are
 * retried (dropping the lock, so the completion thread can reap), anything
 * else, or a transient error that lasts, fails the prepared bios.  Their
 * SQEs are taken back out of the ring (without SQPOLL the kernel reads the
 * SQ only inside io_uring_enter, and those are made under dev->lock or with
 * nothing to submit) and the bios handed to the completion thread through
 * dev->failed, woken by an eventfd it always has a read posted on: a plain
 * write(2) reaches it even when io_uring_enter does not work.
 */
#include <liburing.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/trace.h"
#include "lib/faultdev.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

const char *const tfs_bio_op_names[] = {
#define x(n) #n,
	TFS_BIO_OPS(x)
#undef x
		NULL
};

const char *const tfs_bio_tag_names[] = {
#define x(n) #n,
	TFS_BIO_TAGS(x)
#undef x
		NULL
};

/* ---- generic helpers ---- */

static void bio_count_meta(struct tfs_bio *bio)
{
	if (tfs_bio_is_meta_write(bio))
		__atomic_fetch_add(&bio->bdev->meta_writes_submitted, 1, __ATOMIC_SEQ_CST);
}

void tfs_bio_submit(struct tfs_bio *bio)
{
	bio_count_meta(bio);
	bio->bdev->ops->submit(bio->bdev, bio);
}

void tfs_bio_endio(struct tfs_bio *bio)
{
	if (tfs_bio_is_meta_write(bio))
		__atomic_fetch_add(&bio->bdev->meta_writes_done, 1, __ATOMIC_SEQ_CST);
	bio->end_io(bio);
}

void tfs_bio_submit_batch(struct tfs_bio **bios, unsigned nr)
{
	unsigned i = 0;

	while (i < nr) {
		struct tfs_bdev *bdev = bios[i]->bdev;
		unsigned j = i + 1;

		while (j < nr && bios[j]->bdev == bdev)
			j++;
		for (unsigned k = i; k < j; k++)
			bio_count_meta(bios[k]);
		if (bdev->ops->submit_batch)
			bdev->ops->submit_batch(bdev, bios + i, j - i);
		else
			for (unsigned k = i; k < j; k++)
				bdev->ops->submit(bdev, bios[k]);
		i = j;
	}
}

void tfs_bdev_drain(struct tfs_bdev *bdev)
{
	bdev->ops->drain(bdev);
}

void tfs_bdev_close(struct tfs_bdev *bdev)
{
	if (bdev)
		bdev->ops->close(bdev);
}

void tfs_bdev_to_text(struct printbuf *out, struct tfs_bdev *bdev)
{
	bdev->ops->to_text(out, bdev);
}

void tfs_bdev_counters_to_text(struct printbuf *out, const struct tfs_bdev_counters *c)
{
	prt_str(out, "op\tios\rbytes\rerrors\r\n");
	for (unsigned op = 0; op < TFS_OP_NR; op++) {
		prt_printf(out, "%s\t%llu\r", tfs_bio_op_names[op],
			   (unsigned long long)__atomic_load_n(&c->ios[op], __ATOMIC_RELAXED));
		prt_units_u64(out, __atomic_load_n(&c->bytes[op], __ATOMIC_RELAXED));
		prt_printf(out, "\r%llu\r\n",
			   (unsigned long long)__atomic_load_n(&c->errors[op], __ATOMIC_RELAXED));
	}
	prt_printf(out, "fua writes\t%llu\r\n",
		   (unsigned long long)__atomic_load_n(&c->fua, __ATOMIC_RELAXED));
}

void tfs_bdev_count_submit(struct tfs_bdev *bdev, const struct tfs_bio *bio)
{
	struct tfs_bdev_counters *c = &bdev->counters;

	if (bio->op >= TFS_OP_NR)
		return;
	__atomic_fetch_add(&c->ios[bio->op], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->bytes[bio->op], bio->len, __ATOMIC_RELAXED);
	if (bio->op == TFS_OP_write && (bio->flags & TFS_BIO_FUA))
		__atomic_fetch_add(&c->fua, 1, __ATOMIC_RELAXED);
}

void tfs_bdev_count_error(struct tfs_bdev *bdev, const struct tfs_bio *bio)
{
	if (bio->op < TFS_OP_NR)
		__atomic_fetch_add(&bdev->counters.errors[bio->op], 1, __ATOMIC_RELAXED);
}

void tfs_bio_err_msg(const struct tfs_bio *bio, int err, const char *why)
{
	const char *op = bio->op < TFS_OP_NR ? tfs_bio_op_names[bio->op] : "bad-op";

	tfs_trace(bdev_io_error, (int)bio->op, bio->offset, bio->len, err);
	if (bio->flags & TFS_BIO_QUIET)
		return;
	fprintf(stderr, "tinyfs: %s: %s%s%s at offset %llu length %zu failed: %s%s%s\n",
		bio->bdev->path, op, bio->flags & TFS_BIO_FUA ? "+fua" : "",
		bio->flags & TFS_BIO_PREFLUSH ? "+preflush" : "", (unsigned long long)bio->offset,
		bio->len, tfs_err_str(err), why ? ": " : "", why ?: "");
}

int tfs_bio_check(const struct tfs_bio *bio)
{
	const struct tfs_bdev *bdev = bio->bdev;
	unsigned bs = bdev->logical_block_size;
	PRINTBUF_ONSTACK(why, 160);
	int ret = 0;

	if (bio->op >= TFS_OP_NR) {
		prt_printf(&why, "unknown op %u", bio->op);
		ret = -TFS_ERR_invalid_argument;
	} else if (bio->op == TFS_OP_flush) {
		return 0;
	} else if (bio->op != TFS_OP_read && bdev->read_only) {
		prt_str(&why, "device is read-only");
		ret = -EROFS;
	} else if (bio->offset % bs || bio->len % bs ||
		   (bio->op != TFS_OP_discard && (uintptr_t)bio->buf % bs)) {
		prt_printf(&why, "offset, length and buffer (%p) must be aligned to %u", bio->buf,
			   bs);
		ret = -TFS_ERR_bdev_unaligned;
	} else if (!bio->len) {
		prt_str(&why, "zero length");
		ret = -TFS_ERR_invalid_argument;
	} else if (bio->offset > bdev->size || bio->len > bdev->size - bio->offset) {
		prt_printf(&why, "beyond the end of the device (%llu bytes)",
			   (unsigned long long)bdev->size);
		ret = -TFS_ERR_bdev_out_of_range;
	}
	if (ret)
		tfs_bio_err_msg(bio, ret, printbuf_str(&why));
	return ret;
}

/* ---- synchronous wrappers ---- */

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void sync_end_io(struct tfs_bio *bio)
{
	struct sync_wait *w = bio->private;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static __thread void (*wait_hook)(void *arg);
static __thread void *wait_hook_arg;

void tfs_bdev_set_wait_hook(void (*fn)(void *arg), void *arg)
{
	wait_hook = fn;
	wait_hook_arg = arg;
}

void tfs_bdev_will_wait(void)
{
	void (*fn)(void *arg) = wait_hook;

	if (fn) {
		wait_hook = NULL;
		fn(wait_hook_arg);
	}
}

int tfs_bio_submit_wait(struct tfs_bio *bio)
{
	struct sync_wait w = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};

	if (bio->bdev->ops->rw_wait && tfs_bio_in_caller(bio))
		return bio->bdev->ops->rw_wait(bio->bdev, bio);
	tfs_bdev_will_wait();
	bio->end_io = sync_end_io;
	bio->private = &w;
	tfs_bio_submit(bio);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	return bio->result;
}

void tfs_bio_submit_inline(struct tfs_bio *bio)
{
	void (*end_io)(struct tfs_bio *) = bio->end_io;
	void *private = bio->private;

	assert(tfs_bio_in_caller(bio));
	tfs_bio_submit_wait(bio);
	bio->end_io = end_io;
	bio->private = private;
	/* Not tfs_bio_endio(): no metadata write to count (tfs_bio_in_caller()). */
	end_io(bio);
}

int tfs_bdev_read(struct tfs_bdev *bdev, void *buf, size_t len, u64 offset, enum tfs_bio_tag tag)
{
	struct tfs_bio bio = {
		.bdev = bdev,
		.op = TFS_OP_read,
		.tag = tag,
		.offset = offset,
		.buf = buf,
		.len = len,
	};

	return tfs_bio_submit_wait(&bio);
}

int tfs_bdev_write(struct tfs_bdev *bdev, const void *buf, size_t len, u64 offset, unsigned flags,
		   enum tfs_bio_tag tag)
{
	struct tfs_bio bio = {
		.bdev = bdev,
		.op = TFS_OP_write,
		.flags = flags,
		.tag = tag,
		.offset = offset,
		.buf = (void *)buf, /* writes only read it */
		.len = len,
	};

	return tfs_bio_submit_wait(&bio);
}

int tfs_bdev_flush(struct tfs_bdev *bdev)
{
	struct tfs_bio bio = { .bdev = bdev, .op = TFS_OP_flush };

	return tfs_bio_submit_wait(&bio);
}

int tfs_bdev_discard(struct tfs_bdev *bdev, u64 offset, u64 len)
{
	struct tfs_bio bio = { .bdev = bdev, .op = TFS_OP_discard, .offset = offset, .len = len };

	return tfs_bio_submit_wait(&bio);
}

void *tfs_bdev_alloc_buf(struct tfs_bdev *bdev, size_t len)
{
	size_t align = bdev ? bdev->logical_block_size : 4096;
	void *p;

	/* Page alignment suits every device, and is what O_DIRECT likes best. */
	if (align < 4096)
		align = 4096;
	if (posix_memalign(&p, align, len ?: 1))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* ---- the io_uring device ---- */

/* Kinds of CQE, in the low bits of user_data (bios are 8-byte aligned). */
enum {
	UD_MAIN = 0,	 /* the bio's read, write, fsync or fallocate */
	UD_PREFLUSH = 1, /* the fsync linked before a PREFLUSH write */
	UD_REFUSED = 2,	 /* a NOP carrying an error found at submission */
	UD_STOP = 3,	 /* user_data 3: tells the completion thread to exit */
	UD_MASK = 3,
	UD_WAKE = 7, /* user_data 7: the eventfd read (dev->failed has bios) */
};

/* io_uring_enter tries for one submission before its bios are failed. */
#define SUBMIT_TRIES 100

struct uring_dev {
	struct tfs_bdev bdev;
	int fd;
	int cached_fd; /* the image file without O_DIRECT (host_cached()); -1: none */
	u64 host_page; /* the host's page size: cached I/O covers whole pages */
	int flush_err; /* with cached_fd: the first failed flush's error (atomic) */
	u64 host_cached_writes, host_cached_reads; /* bios that went through cached_fd */
	struct io_uring ring;
	unsigned depth;

	pthread_mutex_t lock; /* the SQ, in_flight, pending */
	pthread_cond_t room;  /* in_flight dropped */
	unsigned in_flight;   /* bios accepted and not yet completed */
	unsigned sync_ios;    /* uring_rw_wait() calls running (drain waits for them) */
	u64 sync_ios_done;    /* reads and writes done in the caller's thread */
	struct tfs_bio *pending, **pending_tail;
	pthread_t thread;
	bool thread_started;
	u64 resubmits;	  /* short completions continued */
	u64 submit_calls; /* io_uring_submit() calls: batches */
	/* Bios whose submission failed, for the completion thread (bio->result set). */
	struct tfs_bio *failed, **failed_tail;
	bool stop_failed; /* the UD_STOP NOP itself could not be submitted */
	bool wake_lost;	  /* the eventfd read could not be posted: post it again */
	bool submit_err_printed;
	int efd; /* eventfd: wakes the completion thread for d->failed */
	u64 efd_val;
};

#define TFS_BDEV_QUEUE_DEPTH 64

static struct uring_dev *to_uring(struct tfs_bdev *bdev)
{
	return bdev->private;
}

/*
 * Whether bio goes through the image file's page cache (cached_fd) instead
 * of O_DIRECT:
 *  - a small write of file data or of a journal entry, without FUA or
 *    PREFLUSH.  On a sparse image file every copy-on-write data block is
 *    new space for the host filesystem: an O_DIRECT write of it waits for
 *    the host's allocation (and io_uring hands it to a worker thread), and
 *    the flush after it then commits the host's journal too.  Through the
 *    page cache the write is a copy; the flush that must follow anyway
 *    before the write counts as durable (fdatasync of the file, any
 *    descriptor) writes it back with the journal entry in one batch.
 *    Until that flush it is as volatile as a device's write cache, which
 *    is all a completed write promises (bdev.h).
 *  - a small read of file data: the host reads ahead around it, so the
 *    next random read nearby, or the next small file (written next to it),
 *    is a copy.  Big reads (sequential streams) stay direct: the host's
 *    readahead of the image is slower than reading them direct.
 * O_DIRECT reads and writes of the same range are coherent with the page
 * cache (the kernel writes dirty pages back before them and drops cached
 * ones after a direct write).  Metadata and FUA/PREFLUSH writes stay
 * direct.
 *
 * Only whole host pages: a cached write of part of a page reads the rest
 * first, and a direct write to that rest in flight meanwhile (blocks
 * smaller than a page: the next journal entry, a neighbouring extent)
 * leaves a dirty page the kernel cannot invalidate -- it fails the next
 * fsync (EIO, "collision with buffered I/O"), and its write-back may put
 * the old bytes over the direct write's.  Reads keep the same rule.
 */
static bool host_cached(const struct uring_dev *d, const struct tfs_bio *bio)
{
	if (d->cached_fd < 0 || bio->len > TFS_BDEV_HOST_CACHE_MAX || bio->offset % d->host_page ||
	    bio->len % d->host_page)
		return false;
	if (bio->op == TFS_OP_read)
		return bio->tag == TFS_TAG_data && bio->len <= TFS_BDEV_HOST_CACHE_READ_MAX;
	return bio->op == TFS_OP_write && !(bio->flags & (TFS_BIO_FUA | TFS_BIO_PREFLUSH)) &&
	       (bio->tag == TFS_TAG_data || bio->tag == TFS_TAG_journal);
}

/* The descriptor for bio's read or write, counting those that go through the cache. */
static int rw_fd(struct uring_dev *d, const struct tfs_bio *bio, bool count)
{
	if (!host_cached(d, bio))
		return d->fd;
	if (count)
		__atomic_fetch_add(bio->op == TFS_OP_read ? &d->host_cached_reads
							  : &d->host_cached_writes,
				   1, __ATOMIC_RELAXED);
	return d->cached_fd;
}

/*
 * The result of a flush (a preflush, a FUA write) of d, res.  A cached
 * write whose write-back failed is reported once per open file, by
 * whichever sync comes first (the kernel's errseq) -- a btree checkpoint's
 * flush, say -- and the page is dropped as if written: a later flush then
 * succeeds, and the journal would count as durable file data the host
 * lost.  So with cached writes the first failure sticks: every later
 * flush of d fails with it.
 */
static int uring_flush_result(struct uring_dev *d, int res)
{
	int none = 0;

	if (d->cached_fd < 0)
		return res;
	if (res < 0) {
		__atomic_compare_exchange_n(&d->flush_err, &none, res, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		return res;
	}
	return __atomic_load_n(&d->flush_err, __ATOMIC_SEQ_CST) ?: res;
}

/* Queues the SQEs for bio's remainder (from bio->done_internal). Locked. */
static void uring_prep(struct uring_dev *d, struct tfs_bio *bio, bool with_preflush)
{
	struct io_uring_sqe *sqe;
	size_t done = bio->done_internal;

	if (with_preflush) {
		/*
		 * PREFLUSH: the fsync is linked before the write, so the
		 * write starts only after every write completed before this
		 * bio is durable; a failed fsync cancels the write.
		 */
		sqe = io_uring_get_sqe(&d->ring);
		io_uring_prep_fsync(sqe, d->fd, IORING_FSYNC_DATASYNC);
		sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, (u64)(uintptr_t)bio | UD_PREFLUSH);
	}

	sqe = io_uring_get_sqe(&d->ring);
	switch (bio->op) {
	case TFS_OP_read:
		io_uring_prep_read(sqe, rw_fd(d, bio, !done), (char *)bio->buf + done,
				   bio->len - done, bio->offset + done);
		break;
	case TFS_OP_write:
		io_uring_prep_write(sqe, rw_fd(d, bio, !done), (char *)bio->buf + done,
				    bio->len - done, bio->offset + done);
		/* FUA: RWF_DSYNC makes this write's range durable when it completes. */
		if (bio->flags & TFS_BIO_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	case TFS_OP_flush:
		io_uring_prep_fsync(sqe, d->fd, IORING_FSYNC_DATASYNC);
		break;
	case TFS_OP_discard:
		/* Punching a hole reads back as zeroes on files and block devices. */
		io_uring_prep_fallocate(sqe, d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					bio->offset, bio->len);
		break;
	default:
		io_uring_prep_nop(sqe);
		break;
	}
	io_uring_sqe_set_data64(sqe, (u64)(uintptr_t)bio | UD_MAIN);
}

static void uring_prep_refused(struct uring_dev *d, struct tfs_bio *bio)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, (u64)(uintptr_t)bio | UD_REFUSED);
}

static void uring_issue(struct uring_dev *d, struct tfs_bio *bio)
{
	if (bio->result)
		uring_prep_refused(d, bio);
	else
		uring_prep(d, bio, bio->op == TFS_OP_write && (bio->flags & TFS_BIO_PREFLUSH));
}

/* Locked.  Posts the read on the eventfd that wakes the completion thread. */
static void uring_prep_wake(struct uring_dev *d)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

	io_uring_prep_read(sqe, d->efd, &d->efd_val, sizeof(d->efd_val), 0);
	io_uring_sqe_set_data64(sqe, UD_WAKE);
}

/*
 * Locked.  io_uring_enter refused the SQEs for good: takes every prepared,
 * unsubmitted SQE back out of the ring and queues its bio on d->failed for
 * the completion thread (end_io runs only there).
 */
static void uring_fail_sq(struct uring_dev *d, int err)
{
	struct io_uring_sq *sq = &d->ring.sq;
	unsigned head = *sq->khead;
	bool any = false;

	if (!d->submit_err_printed) {
		d->submit_err_printed = true;
		fprintf(stderr, "tinyfs: %s: io_uring submission failed: %s; failing the bios\n",
			d->bdev.path, tfs_err_str(err));
	}
	for (unsigned i = head; i != sq->sqe_tail; i++) {
		u64 ud = sq->sqes[i & sq->ring_mask].user_data;
		struct tfs_bio *bio = (struct tfs_bio *)(uintptr_t)(ud & ~(u64)UD_MASK);

		if (ud == UD_STOP) {
			d->stop_failed = true;
			continue;
		}
		if (ud == UD_WAKE) {
			d->wake_lost = true;
			continue;
		}
		if ((ud & UD_MASK) == UD_PREFLUSH)
			continue; /* the main SQE of a PREFLUSH write follows */
		if ((ud & UD_MASK) == UD_MAIN)
			bio->result = err;
		else /* UD_REFUSED: printed and counted already; keeps its error */
			bio->done_internal = SIZE_MAX;
		bio->next_internal = NULL;
		*d->failed_tail = bio;
		d->failed_tail = &bio->next_internal;
		any = true;
	}
	__atomic_store_n(sq->ktail, head, __ATOMIC_RELEASE);
	sq->sqe_head = sq->sqe_tail = head;
	if (any || d->stop_failed || d->wake_lost) {
		u64 one = 1;

		/* From the completion thread itself this only wakes it once more. */
		if (write(d->efd, &one, sizeof(one)) != sizeof(one))
			fprintf(stderr, "tinyfs: %s: cannot wake the completion thread: %s\n",
				d->bdev.path, strerror(errno));
	}
}

/*
 * Locked (may drop it while retrying).  Submits the SQEs prepared so far:
 * one io_uring_enter for a batch, until none is left.
 */
static void uring_flush_sq(struct uring_dev *d)
{
	unsigned tries = 0;

	while (io_uring_sq_ready(&d->ring)) {
		int ret = io_uring_submit(&d->ring);

		d->submit_calls++;
		if (ret > 0)
			continue;
		if ((ret == 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) &&
		    ++tries < SUBMIT_TRIES) {
			/*
			 * EAGAIN, EBUSY: the kernel is short of memory or its
			 * CQ is full; the completion thread reaps (it needs the
			 * lock) before we try again.
			 */
			struct timespec ts = { 0, ret == -EINTR ? 0 : 1000000 };

			pthread_mutex_unlock(&d->lock);
			nanosleep(&ts, NULL);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		uring_fail_sq(d, ret ?: -EAGAIN);
		break;
	}
}

/* Locked.  Issues queued bios while there is room. */
static void uring_issue_pending(struct uring_dev *d)
{
	bool any = false;

	while (d->pending && d->in_flight < d->depth) {
		struct tfs_bio *bio = d->pending;

		d->pending = bio->next_internal;
		if (!d->pending)
			d->pending_tail = &d->pending;
		d->in_flight++;
		uring_issue(d, bio);
		any = true;
	}
	if (any)
		uring_flush_sq(d);
}

/* Before the lock: take ownership, count, check. */
static void uring_accept(struct tfs_bdev *bdev, struct tfs_bio *bio)
{
	bio->bdev = bdev;
	bio->done_internal = 0;
	bio->next_internal = NULL;
	tfs_bdev_count_submit(bdev, bio);
	bio->result = tfs_bio_check(bio);
	if (bio->result)
		tfs_bdev_count_error(bdev, bio);
}

/*
 * Locked.  Prepares bio's SQEs once there is room; the completion thread
 * never waits (its bios join d->pending).  Whatever is prepared is submitted
 * before sleeping, or the bios it waits for would never start.
 */
static void uring_queue_locked(struct uring_dev *d, struct tfs_bio *bio)
{
	if (d->in_flight >= d->depth || d->pending) {
		if (d->thread_started && pthread_equal(pthread_self(), d->thread)) {
			*d->pending_tail = bio;
			d->pending_tail = &bio->next_internal;
			return;
		}
		uring_flush_sq(d);
		while (d->in_flight >= d->depth)
			pthread_cond_wait(&d->room, &d->lock);
		uring_issue_pending(d);
		while (d->in_flight >= d->depth)
			pthread_cond_wait(&d->room, &d->lock);
	}
	d->in_flight++;
	uring_issue(d, bio);
}

static void uring_submit(struct tfs_bdev *bdev, struct tfs_bio *bio)
{
	struct uring_dev *d = to_uring(bdev);

	uring_accept(bdev, bio);
	pthread_mutex_lock(&d->lock);
	uring_queue_locked(d, bio);
	uring_flush_sq(d);
	pthread_mutex_unlock(&d->lock);
}

static void uring_submit_batch(struct tfs_bdev *bdev, struct tfs_bio **bios, unsigned nr)
{
	struct uring_dev *d = to_uring(bdev);

	for (unsigned i = 0; i < nr; i++)
		uring_accept(bdev, bios[i]);
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < nr; i++)
		uring_queue_locked(d, bios[i]);
	uring_flush_sq(d);
	pthread_mutex_unlock(&d->lock);
}

/*
 * A synchronous read or plain write, in the calling thread: pread(2) or
 * pwrite(2) on the ring's descriptor.  Through the ring, the device's
 * completion woke the completion thread, which then woke the caller: two
 * wake-ups in a row per I/O, each costing tens of microseconds when it
 * lands on an idle virtual CPU (a 4 KiB random read through the mount
 * waited for both).  Short transfers are continued as the ring's are;
 * errors are reported and counted alike.
 */
static int uring_rw_wait(struct tfs_bdev *bdev, struct tfs_bio *bio)
{
	struct uring_dev *d = to_uring(bdev);
	const char *why = NULL;
	size_t done = 0;
	unsigned shorts = 0;
	int err = 0, fd;

	uring_accept(bdev, bio);
	if (bio->result)
		return bio->result; /* printed and counted by the check */
	pthread_mutex_lock(&d->lock);
	d->sync_ios++;
	pthread_mutex_unlock(&d->lock);
	fd = rw_fd(d, bio, true);
	/*
	 * With a wait hook (a read the FUSE leader serves itself): a read of
	 * the cached descriptor first takes what the page cache has, without
	 * waiting; anything else, or the rest, waits after the hook ran.
	 */
	if (wait_hook && (bio->op != TFS_OP_read || fd != d->cached_fd))
		tfs_bdev_will_wait();
	/* Every write completed before: the ring's and the page cache's (same file). */
	while (bio->op == TFS_OP_flush && fdatasync(d->fd)) {
		if (errno != EINTR) {
			err = -errno;
			break;
		}
	}
	if (bio->op == TFS_OP_flush)
		err = uring_flush_result(d, err);
	while (!err && done < bio->len) {
		struct iovec iov = { (char *)bio->buf + done, bio->len - done };
		ssize_t n;

		if (wait_hook && bio->op == TFS_OP_read) {
			n = preadv2(fd, &iov, 1, (off_t)(bio->offset + done), RWF_NOWAIT);
			if (n <= 0) {
				/* EAGAIN: not cached; any other error shows again below. */
				tfs_bdev_will_wait();
				continue;
			}
		} else {
			n = bio->op == TFS_OP_read ? pread(fd, iov.iov_base, iov.iov_len,
							   (off_t)(bio->offset + done))
						   : pwrite(fd, iov.iov_base, iov.iov_len,
							    (off_t)(bio->offset + done));
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
		} else if (!n) {
			err = -TFS_ERR_bdev_short_io;
			why = "no progress (end of file reached early?)";
		} else {
			done += (size_t)n;
			shorts += done < bio->len;
		}
	}
	if (err) {
		tfs_bio_err_msg(bio, err, why);
		tfs_bdev_count_error(bdev, bio);
	}
	bio->result = err;
	pthread_mutex_lock(&d->lock);
	d->sync_ios--;
	d->sync_ios_done++;
	d->resubmits += shorts;
	if (!d->sync_ios)
		pthread_cond_broadcast(&d->room);
	pthread_mutex_unlock(&d->lock);
	return err;
}

/* The bio is done: end_io, then free its slot (after end_io, so drain
 * returning means every end_io has returned). */
static void uring_complete(struct uring_dev *d, struct tfs_bio *bio)
{
	tfs_bio_endio(bio);

	pthread_mutex_lock(&d->lock);
	d->in_flight--;
	uring_issue_pending(d);
	pthread_cond_broadcast(&d->room);
	pthread_mutex_unlock(&d->lock);
}

static void uring_fail(struct uring_dev *d, struct tfs_bio *bio, int err, const char *why)
{
	tfs_bio_err_msg(bio, err, why);
	tfs_bdev_count_error(&d->bdev, bio);
	bio->result = err;
	uring_complete(d, bio);
}

static void uring_handle_cqe(struct uring_dev *d, u64 ud, int res)
{
	struct tfs_bio *bio = (struct tfs_bio *)(uintptr_t)(ud & ~(u64)UD_MASK);

	switch (ud & UD_MASK) {
	case UD_REFUSED:
		/* Printed and counted at submission. */
		uring_complete(d, bio);
		return;
	case UD_PREFLUSH:
		/* Its write follows (cancelled if this failed); remember why. */
		res = uring_flush_result(d, res);
		if (res < 0)
			bio->result = res;
		return;
	}
	if (bio->op == TFS_OP_flush || (bio->op == TFS_OP_write && (bio->flags & TFS_BIO_FUA)))
		res = uring_flush_result(d, res);

	if (bio->result) /* the preflush failed: the write was cancelled */
		return uring_fail(d, bio, bio->result, "preflush failed, write not issued");
	if (res < 0)
		return uring_fail(d, bio, res, NULL);
	if (bio->op != TFS_OP_read && bio->op != TFS_OP_write) {
		bio->result = 0;
		return uring_complete(d, bio);
	}
	if (!res)
		return uring_fail(d, bio, -TFS_ERR_bdev_short_io,
				  "no progress (end of file reached early?)");

	bio->done_internal += (size_t)res;
	if (bio->done_internal < bio->len) {
		/* Short completion: continue with the remainder in the same slot. */
		pthread_mutex_lock(&d->lock);
		d->resubmits++;
		uring_prep(d, bio, false);
		uring_flush_sq(d);
		pthread_mutex_unlock(&d->lock);
		return;
	}
	bio->result = 0;
	uring_complete(d, bio);
}

/*
 * Completion thread.  Completes the bios whose submission failed, posting
 * the eventfd read again if it was consumed (rearm) or lost.  Returns true
 * if the stop NOP was one of them.
 */
static bool uring_complete_failed(struct uring_dev *d, bool rearm)
{
	struct tfs_bio *bio;
	bool stop;

	pthread_mutex_lock(&d->lock);
	bio = d->failed;
	d->failed = NULL;
	d->failed_tail = &d->failed;
	stop = d->stop_failed;
	if (rearm || d->wake_lost) {
		d->wake_lost = false;
		uring_prep_wake(d);
		uring_flush_sq(d);
	}
	pthread_mutex_unlock(&d->lock);

	while (bio) {
		struct tfs_bio *next = bio->next_internal;

		if (bio->done_internal != SIZE_MAX) {
			tfs_bio_err_msg(bio, bio->result, "io_uring submission failed");
			tfs_bdev_count_error(&d->bdev, bio);
		}
		uring_complete(d, bio);
		bio = next;
	}
	return stop;
}

static bool uring_has_failed(struct uring_dev *d)
{
	bool ret;

	pthread_mutex_lock(&d->lock);
	ret = d->failed || d->wake_lost || d->stop_failed;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static void *uring_completion_thread(void *arg)
{
	struct uring_dev *d = arg;

	while (1) {
		struct io_uring_cqe *cqe;
		int ret;
		u64 ud;
		int res;

		/* Bios this thread's own submissions failed (its wake may have failed too). */
		if (uring_has_failed(d) && uring_complete_failed(d, false))
			break;
		ret = io_uring_wait_cqe(&d->ring, &cqe);

		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0) {
			fprintf(stderr, "tinyfs: %s: io_uring wait failed: %s\n", d->bdev.path,
				tfs_err_str(ret));
			abort();
		}
		ud = io_uring_cqe_get_data64(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&d->ring, cqe);
		/*
		 * The submitter prepared this SQE (and filled the bio and its
		 * buffer) under d->lock, and the kernel completed it after:
		 * taking the lock makes that order visible to the memory model
		 * (and to ThreadSanitizer, which cannot see it through the
		 * kernel).  Uncontended, it costs next to nothing.
		 */
		pthread_mutex_lock(&d->lock);
		pthread_mutex_unlock(&d->lock);
		if (ud == UD_STOP)
			break;
		if (ud == UD_WAKE) {
			if (uring_complete_failed(d, true))
				break;
			continue;
		}
		uring_handle_cqe(d, ud, res);
	}
	return NULL;
}

static void uring_drain(struct tfs_bdev *bdev)
{
	struct uring_dev *d = to_uring(bdev);

	pthread_mutex_lock(&d->lock);
	while (d->in_flight || d->pending || d->sync_ios)
		pthread_cond_wait(&d->room, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

static void uring_free(struct uring_dev *d)
{
	if (d->thread_started) {
		struct io_uring_sqe *sqe;

		pthread_mutex_lock(&d->lock);
		sqe = io_uring_get_sqe(&d->ring);
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, UD_STOP);
		uring_flush_sq(d);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	if (d->ring.ring_fd > 0)
		io_uring_queue_exit(&d->ring);
	if (d->fd >= 0)
		close(d->fd);
	if (d->cached_fd >= 0)
		close(d->cached_fd);
	if (d->efd >= 0)
		close(d->efd);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->room);
	free(d->bdev.path);
	free(d);
}

static void uring_close(struct tfs_bdev *bdev)
{
	uring_drain(bdev);
	uring_free(to_uring(bdev));
}

static void uring_to_text(struct printbuf *out, struct tfs_bdev *bdev)
{
	struct uring_dev *d = to_uring(bdev);

	printbuf_tabstops_reset(out);
	printbuf_tabstop_push(out, 20);
	printbuf_tabstop_push(out, 12);
	printbuf_tabstop_push(out, 12);
	printbuf_tabstop_push(out, 10);
	prt_printf(out, "device\t%s\n", bdev->path);
	prt_printf(out, "implementation\tio_uring, queue depth %u\n", d->depth);
	prt_printf(out, "type\t%s\n", bdev->is_blockdev ? "block device" : "file");
	prt_str(out, "size\t");
	prt_units_u64(out, bdev->size);
	prt_printf(out, " (%llu bytes)\n", (unsigned long long)bdev->size);
	prt_printf(out, "logical block size\t%u\n", bdev->logical_block_size);
	prt_printf(out, "io\t%s\n",
		   bdev->direct ? "direct (O_DIRECT)" : "buffered (O_DIRECT not available)");
	prt_printf(out, "mode\t%s\n", bdev->read_only ? "read-only" : "read-write");
	if (d->cached_fd >= 0)
		prt_printf(
			out,
			"host page cache\tdata and journal writes up to %u KiB, data reads up to "
			"%u KiB\n",
			TFS_BDEV_HOST_CACHE_MAX >> 10, TFS_BDEV_HOST_CACHE_READ_MAX >> 10);
	pthread_mutex_lock(&d->lock);
	prt_printf(out, "in flight\t%u\n", d->in_flight);
	prt_printf(out, "short completions\t%llu\n", (unsigned long long)d->resubmits);
	prt_printf(out, "submissions\t%llu\n", (unsigned long long)d->submit_calls);
	prt_printf(out, "i/o in the caller\t%llu\n", (unsigned long long)d->sync_ios_done);
	if (d->cached_fd >= 0) {
		prt_printf(out, "host-cached writes\t%llu\n",
			   (unsigned long long)__atomic_load_n(&d->host_cached_writes,
							       __ATOMIC_RELAXED));
		prt_printf(out, "host-cached reads\t%llu\n",
			   (unsigned long long)__atomic_load_n(&d->host_cached_reads,
							       __ATOMIC_RELAXED));
	}
	pthread_mutex_unlock(&d->lock);
	tfs_bdev_counters_to_text(out, &bdev->counters);
}

static const struct tfs_bdev_ops uring_ops = {
	.name = "uring",
	.submit = uring_submit,
	.submit_batch = uring_submit_batch,
	.drain = uring_drain,
	.close = uring_close,
	.to_text = uring_to_text,
	.rw_wait = uring_rw_wait,
};

static int open_fd(struct uring_dev *d, const char *path, unsigned flags)
{
	int oflags = (flags & TFS_BDEV_RDONLY ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct stat st;

	if (stat(path, &st)) {
		int err = -errno; /* before fprintf can change it */

		fprintf(stderr, "tinyfs: %s: cannot open: %s\n", path, tfs_err_str(err));
		return err;
	}
	d->bdev.is_blockdev = S_ISBLK(st.st_mode);
	if (!d->bdev.is_blockdev && !S_ISREG(st.st_mode)) {
		fprintf(stderr, "tinyfs: %s: not a block device or regular file\n", path);
		return -TFS_ERR_invalid_argument;
	}
	if (d->bdev.is_blockdev && (flags & TFS_BDEV_EXCL))
		oflags |= O_EXCL;

	d->fd = -1;
	if (!(flags & TFS_BDEV_BUFFERED)) {
		d->fd = open(path, oflags | O_DIRECT);
		d->bdev.direct = d->fd >= 0;
		/* EINVAL: the filesystem has no O_DIRECT; anything else is real. */
		if (d->fd < 0 && errno != EINVAL) {
			int err = -errno; /* before fprintf can change it */

			fprintf(stderr, "tinyfs: %s: cannot open: %s\n", path, tfs_err_str(err));
			return err;
		}
	}
	if (d->fd < 0)
		d->fd = open(path, oflags);
	if (d->fd < 0) {
		int err = -errno; /* before fprintf can change it */

		fprintf(stderr, "tinyfs: %s: cannot open: %s\n", path, tfs_err_str(err));
		return err;
	}
	/* Only image files: a block device has no space to allocate (host_cached()). */
	if ((flags & TFS_BDEV_HOST_CACHE) && d->bdev.direct && !d->bdev.is_blockdev &&
	    !(flags & TFS_BDEV_RDONLY)) {
		long page = sysconf(_SC_PAGESIZE);

		d->host_page = page > 0 ? (u64)page : 4096;
		d->cached_fd = open(path, oflags);
		if (d->cached_fd < 0) {
			int err = -errno; /* before fprintf can change it */

			fprintf(stderr, "tinyfs: %s: cannot open: %s\n", path, tfs_err_str(err));
			return err;
		}
		/*
		 * A write-back error nobody saw is kept for the next opener's
		 * first sync (errseq): an earlier open's cached writes, never
		 * flushed (that sync would have seen it), so never counted
		 * durable.  Taken here, it cannot fail this open's first flush
		 * and, through uring_flush_result(), every later one.
		 */
		while (fdatasync(d->fd) && errno == EINTR)
			;
	}
	return 0;
}

static int probe_geometry(struct uring_dev *d)
{
	struct tfs_bdev *b = &d->bdev;

	if (b->is_blockdev) {
		u64 size;
		int ssz;

		if (ioctl(d->fd, BLKGETSIZE64, &size) || ioctl(d->fd, BLKSSZGET, &ssz)) {
			int err = -errno; /* before fprintf can change it */

			fprintf(stderr, "tinyfs: %s: cannot read device geometry: %s\n", b->path,
				tfs_err_str(err));
			return err;
		}
		b->size = size;
		b->logical_block_size = (unsigned)ssz;
	} else {
		struct statx stx;

		if (statx(d->fd, "", AT_EMPTY_PATH, STATX_SIZE | STATX_DIOALIGN, &stx)) {
			int err = -errno; /* before fprintf can change it */

			fprintf(stderr, "tinyfs: %s: cannot stat: %s\n", b->path, tfs_err_str(err));
			return err;
		}
		b->size = stx.stx_size;
		/*
		 * Files: O_DIRECT needs the alignment the filesystem reports
		 * (statx DIOALIGN); 512 otherwise, the smallest sector.
		 */
		b->logical_block_size = 512;
		if (b->direct && (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 512)
			b->logical_block_size = stx.stx_dio_offset_align;
	}
	if (!b->logical_block_size || b->logical_block_size & (b->logical_block_size - 1)) {
		fprintf(stderr, "tinyfs: %s: bad logical block size %u\n", b->path,
			b->logical_block_size);
		return -TFS_ERR_invalid_argument;
	}
	/* The last partial block cannot be addressed. */
	b->size -= b->size % b->logical_block_size;
	return 0;
}

static int start_ring(struct uring_dev *d)
{
	/* Two SQEs per bio at most (PREFLUSH) and the eventfd read; CQ room for all. */
	int ret = io_uring_queue_init(2 * d->depth + 1, &d->ring, 0);

	if (ret) {
		d->ring.ring_fd = -1;
		fprintf(stderr, "tinyfs: %s: io_uring setup failed: %s\n", d->bdev.path,
			tfs_err_str(ret));
		return -TFS_ERR_bdev_ring_setup;
	}
	d->efd = eventfd(0, EFD_CLOEXEC);
	if (d->efd < 0) {
		ret = -errno;
		fprintf(stderr, "tinyfs: %s: cannot create an eventfd: %s\n", d->bdev.path,
			tfs_err_str(ret));
		return ret;
	}
	uring_prep_wake(d);
	ret = io_uring_submit(&d->ring);
	if (ret != 1) {
		ret = ret < 0 ? ret : -EIO;
		fprintf(stderr, "tinyfs: %s: io_uring submission failed: %s\n", d->bdev.path,
			tfs_err_str(ret));
		return -TFS_ERR_bdev_ring_setup;
	}
	ret = -pthread_create(&d->thread, NULL, uring_completion_thread, d);
	if (ret) {
		fprintf(stderr, "tinyfs: %s: cannot start the completion thread: %s\n",
			d->bdev.path, tfs_err_str(ret));
		return ret;
	}
	d->thread_started = true;
	return 0;
}

int tfs_bdev_open_uring(const char *path, unsigned flags, struct tfs_bdev **ret)
{
	struct uring_dev *d = calloc(1, sizeof(*d));
	int err;

	*ret = NULL;
	if (!d)
		return -ENOMEM;
	d->fd = -1;
	d->cached_fd = -1;
	d->efd = -1;
	d->ring.ring_fd = -1;
	d->depth = TFS_BDEV_QUEUE_DEPTH;
	d->pending_tail = &d->pending;
	d->failed_tail = &d->failed;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->room, NULL);
	d->bdev.ops = &uring_ops;
	d->bdev.private = d;
	d->bdev.read_only = flags & TFS_BDEV_RDONLY;
	d->bdev.path = strdup(path);
	if (!d->bdev.path) {
		err = -ENOMEM;
		goto err;
	}

	err = open_fd(d, path, flags) ?: probe_geometry(d) ?: start_ring(d);
	if (err)
		goto err;
	*ret = &d->bdev;
	return 0;
err:
	uring_free(d);
	return err;
}

int tfs_bdev_open(const char *path, unsigned flags, struct tfs_bdev **ret)
{
	struct tfs_bdev *lower;
	int err;

	*ret = NULL;
	/* A vanished device stays absent; registered "dev" rules stack a fault device. */
	err = tfs_faults_from_env_once() ?: tfs_faultdev_open_check(path) ?:
					     tfs_bdev_open_uring(path, flags, &lower);
	if (err)
		return err;
	err = tfs_faultdev_stack_registered(lower, ret);
	if (err)
		tfs_bdev_close(lower);
	return err;
}
