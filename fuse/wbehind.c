// SPDX-License-Identifier: GPL-2.0
/*
 * Write-behind of the kernel's small write-back requests (see tfs_fuse.h).
 *
 * With the writeback cache, close(2) writes the file's dirty pages back
 * and waits for the daemon's replies, and tfs_write() replies once the data
 * is on the device (an O_DIRECT write, then the extent's commit): a tree
 * copy of small files waited for one device write per file.  Here a small
 * write-back request is copied, answered at once, and written by one of a
 * few threads; close returns while the device works.
 *
 * Why nothing is weakened:
 *  - The kernel has handed those pages over: before, they were dirty in the
 *    page cache, not durable either.  Only fsync promises durability, and
 *    fsync (and fsyncdir's callers do not matter: data only) first waits
 *    for every queued write of the inode, then runs tfs_fsync(), which
 *    flushes the journal up to the inode's seq: the data commits are in.
 *  - Each inode's writes run in the order they came (one queue per inode,
 *    chosen by its number), and every request that reads or changes what
 *    they write (read, getattr for st_blocks, setattr, open with O_TRUNC,
 *    fallocate, lseek, an unqueued write) waits for them first.
 *  - Errors: an I/O error is recorded by fs/ in the inode's error sequence,
 *    as for a write-back request answered with it (see do_write() in
 *    fuse.c); any other (ENOSPC) is kept and returned by the inode's next
 *    fsync.  Writes are queued only while the filesystem has far more free
 *    space than the queue may hold, so ENOSPC stays the synchronous path's.
 *  - A release waiting behind queued writes is queued after them: the file
 *    stays open in fs/ until its writes are done.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "fuse/tfs_fuse.h"
#include "lib/bdev.h"
#include "lib/errcode.h"

#define WB_QUEUES 4
#define WB_HASH 256
/* Free space needed to queue at all, on top of the queue's own bytes. */
#define WB_SPACE_MARGIN (256ULL << 20)

struct wb_job {
	struct wb_job *next;
	u64 ino;
	struct tfs_file *f;
	void *release; /* a release job: tfs_release(f), then free(release) */
	void *data;
	size_t len;
	u64 off;
};

struct wb_inode {
	struct wb_inode *next;
	u64 ino;
	unsigned pending; /* jobs queued or running */
	int err;	  /* a failure other than EIO, for the next fsync */
	unsigned fsyncs;  /* fsyncs waiting for pending to reach 0 */
	bool datasync;	  /* ... all of them fdatasync */
};

struct wb_queue {
	struct tfs_wbehind *wb;
	struct wb_job *head, **tail;
	pthread_cond_t cond;
	pthread_t tid;
	bool started;
};

struct tfs_wbehind {
	struct tfs_fs *fs;
	_Atomic u64 *eio_count; /* tf->nr_wb_errors_deferred */
	pthread_mutex_t lock;
	pthread_cond_t done; /* an inode's pending reached 0 */
	struct wb_inode *hash[WB_HASH];
	struct wb_queue q[WB_QUEUES];
	u64 bytes, max_bytes;
	/*
	 * Jobs queued or running, all inodes: changed under lock, read without
	 * it by tfs_wbehind_busy() (the common case: nothing behind at all).
	 */
	u64 nr_pending;
	u32 block_size; /* the filesystem's (0: appends are not queued) */
	bool stopping;
	u64 space_checked_ns;
	bool space_ok;
	u64 nr_queued, nr_waits;
	u64 nr_fsync_starts; /* journal flushes started for a waiting fsync */
};

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000 + (u64)ts.tv_nsec;
}

static struct wb_inode **wb_slot(struct tfs_wbehind *wb, u64 ino)
{
	struct wb_inode **p = &wb->hash[ino % WB_HASH];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Under lock: one job of ino done; the entry goes once idle and error-free. */
static void wb_put_locked(struct tfs_wbehind *wb, u64 ino, int err)
{
	struct wb_inode **p = wb_slot(wb, ino), *e = *p;

	if (err && !e->err)
		e->err = err;
	__atomic_fetch_sub(&wb->nr_pending, 1, __ATOMIC_RELEASE);
	if (--e->pending)
		return;
	/* Kept while it has an error to report or fsyncs counted on it. */
	if (!e->err && !e->fsyncs) {
		*p = e->next;
		free(e);
	}
	pthread_cond_broadcast(&wb->done);
}

static void wb_run(struct tfs_wbehind *wb, struct wb_job *j)
{
	int err = 0;

	if (j->release) {
		tfs_release(wb->fs, j->f);
		free(j->release);
	} else {
		ssize_t n = tfs_write_flags(wb->fs, j->f, j->data, j->len, j->off,
					    TFS_WRITE_KEEP_TIMES | TFS_WRITE_NO_OVERLAP);

		if (n >= 0 && (size_t)n < j->len)
			n = -ENOSPC;
		if (n < 0 && tfs_err_class((int)n) == -EIO)
			/* fs/ recorded it in the inode's error sequence: fsync reports it. */
			atomic_fetch_add_explicit(wb->eio_count, 1, memory_order_relaxed);
		else if (n < 0)
			err = tfs_err_class((int)n);
		free(j->data);
	}
	pthread_mutex_lock(&wb->lock);
	{
		/*
		 * The inode's last write, an fsync waiting: its journal write
		 * goes out from here, before that thread wakes (a wakeup on
		 * the fsync's path, tens of microseconds on an idle VM CPU).
		 */
		struct wb_inode *e = *wb_slot(wb, j->ino);
		bool start = !j->release && e->fsyncs && e->pending == 1;
		bool datasync = e->datasync;

		if (start) {
			wb->nr_fsync_starts++;
			pthread_mutex_unlock(&wb->lock);
			tfs_fsync_start(wb->fs, j->f, datasync);
			pthread_mutex_lock(&wb->lock);
		}
	}
	wb->bytes -= j->len;
	wb_put_locked(wb, j->ino, err);
	pthread_mutex_unlock(&wb->lock);
	free(j);
}

static void *wb_thread(void *p)
{
	struct wb_queue *q = p;
	struct tfs_wbehind *wb = q->wb;

	pthread_mutex_lock(&wb->lock);
	for (;;) {
		struct wb_job *j = q->head;

		if (!j) {
			if (wb->stopping)
				break;
			pthread_cond_wait(&q->cond, &wb->lock);
			continue;
		}
		q->head = j->next;
		if (!q->head)
			q->tail = &q->head;
		pthread_mutex_unlock(&wb->lock);
		wb_run(wb, j);
		pthread_mutex_lock(&wb->lock);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

struct tfs_wbehind *tfs_wbehind_start(struct tfs_fs *fs, _Atomic u64 *eio_count, u64 max_bytes)
{
	struct tfs_wbehind *wb = calloc(1, sizeof(*wb));
	sigset_t all, old;

	if (!wb)
		return NULL;
	wb->fs = fs;
	wb->eio_count = eio_count;
	wb->max_bytes = max_bytes;
	{
		struct statvfs st;

		if (!tfs_statfs(fs, &st) && st.f_frsize && !(st.f_frsize & (st.f_frsize - 1)))
			wb->block_size = (u32)st.f_frsize;
	}
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->done, NULL);
	/* The threads take no signal (mount.c's signal thread does). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < WB_QUEUES; i++) {
		struct wb_queue *q = &wb->q[i];

		q->wb = wb;
		q->tail = &q->head;
		pthread_cond_init(&q->cond, NULL);
		q->started = !pthread_create(&q->tid, NULL, wb_thread, q);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (unsigned i = 0; i < WB_QUEUES; i++)
		if (!wb->q[i].started) {
			/* Without every thread, nothing is queued: writes stay synchronous. */
			wb->max_bytes = 0;
			break;
		}
	return wb;
}

void tfs_wbehind_stop(struct tfs_wbehind *wb)
{
	if (!wb)
		return;
	pthread_mutex_lock(&wb->lock);
	wb->stopping = true;
	for (unsigned i = 0; i < WB_QUEUES; i++)
		pthread_cond_signal(&wb->q[i].cond);
	pthread_mutex_unlock(&wb->lock);
	/* Each thread runs what is queued before it ends. */
	for (unsigned i = 0; i < WB_QUEUES; i++)
		if (wb->q[i].started)
			pthread_join(wb->q[i].tid, NULL);
	for (unsigned i = 0; i < WB_HASH; i++)
		while (wb->hash[i]) {
			struct wb_inode *e = wb->hash[i];

			wb->hash[i] = e->next;
			free(e);
		}
	for (unsigned i = 0; i < WB_QUEUES; i++)
		pthread_cond_destroy(&wb->q[i].cond);
	pthread_cond_destroy(&wb->done);
	pthread_mutex_destroy(&wb->lock);
	free(wb);
}

/* Under lock: is there room on the filesystem to answer writes early? */
static bool wb_space_ok_locked(struct tfs_wbehind *wb)
{
	u64 now = now_ns();

	if (now - wb->space_checked_ns > 100 * 1000 * 1000) {
		struct statvfs st;

		wb->space_checked_ns = now;
		wb->space_ok =
			!tfs_statfs(wb->fs, &st) &&
			(u64)st.f_bavail * st.f_frsize >= WB_SPACE_MARGIN + 2 * wb->max_bytes;
	}
	return wb->space_ok;
}

/* Under lock: queues j, counting it as pending on its inode. */
static int wb_queue_locked(struct tfs_wbehind *wb, struct wb_job *j)
{
	struct wb_inode **p = wb_slot(wb, j->ino), *e = *p;
	struct wb_queue *q = &wb->q[j->ino % WB_QUEUES];

	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->ino = j->ino;
		*p = e;
	}
	e->pending++;
	__atomic_fetch_add(&wb->nr_pending, 1, __ATOMIC_RELEASE);
	wb->bytes += j->len;
	wb->nr_queued++;
	*q->tail = j;
	q->tail = &j->next;
	pthread_cond_signal(&q->cond);
	return 0;
}

bool tfs_wbehind_fits_file(struct tfs_wbehind *wb, struct tfs_file *f, u64 off, size_t len)
{
	u64 size = 0;

	if (!wb || !wb->max_bytes || len > TFS_WBEHIND_MAX_WRITE)
		return false;
	/* The size only matters off 0; unknown (a writer has the inode): not queued. */
	if (off && !tfs_file_size_now(f, &size))
		return false;
	return tfs_wbehind_fits(off, len, size, wb->block_size);
}

bool tfs_wbehind_write(struct tfs_wbehind *wb, u64 ino, struct tfs_file *f, const void *data,
		       size_t len, u64 off)
{
	struct wb_job *j;
	bool queued = false;

	if (!tfs_wbehind_fits_file(wb, f, off, len))
		return false;
	j = calloc(1, sizeof(*j));
	if (!j)
		return false;
	j->data = malloc(len ?: 1);
	if (!j->data) {
		free(j);
		return false;
	}
	memcpy(j->data, data, len);
	j->ino = ino;
	j->f = f;
	j->len = len;
	j->off = off;
	pthread_mutex_lock(&wb->lock);
	if (!wb->stopping && wb->bytes + len <= wb->max_bytes && wb_space_ok_locked(wb))
		queued = !wb_queue_locked(wb, j);
	pthread_mutex_unlock(&wb->lock);
	if (!queued) {
		free(j->data);
		free(j);
	}
	return queued;
}

bool tfs_wbehind_release(struct tfs_wbehind *wb, u64 ino, struct tfs_file *f, void *ff)
{
	struct wb_inode *e;
	struct wb_job *j;
	bool queued = false;

	if (!wb)
		return false;
	j = calloc(1, sizeof(*j));
	if (!j)
		return false;
	j->ino = ino;
	j->f = f;
	j->release = ff;
	pthread_mutex_lock(&wb->lock);
	e = *wb_slot(wb, ino);
	if (e && e->pending && !wb->stopping)
		queued = !wb_queue_locked(wb, j);
	pthread_mutex_unlock(&wb->lock);
	if (!queued)
		free(j);
	return queued;
}

/* fsync: 0 none, 1 fsync, 2 fdatasync (tfs_wbehind_wait_fsync()). */
static int wb_wait(struct tfs_wbehind *wb, u64 ino, bool take_error, int fsync)
{
	struct wb_inode **p, *e;
	bool counted = false, hooked = false;
	int err = 0;

	if (!wb)
		return 0;
	pthread_mutex_lock(&wb->lock);
	for (;;) {
		p = wb_slot(wb, ino);
		e = *p;
		if (!e || !e->pending)
			break;
		if (fsync && !counted) {
			/* Entries stay while pending or counted on: e is ours till then. */
			e->datasync = e->fsyncs ? e->datasync && fsync == 2 : fsync == 2;
			e->fsyncs++;
			counted = true;
		}
		if (!hooked) {
			/*
			 * The daemon's reader serving a read itself (fuse/loop.c)
			 * hands /dev/fuse off here, as before a device wait: a
			 * write queued after it found the inode idle would hold
			 * every other request for as long as the device takes.
			 * Unlocked: the hook takes the loop's lock.
			 */
			hooked = true;
			pthread_mutex_unlock(&wb->lock);
			tfs_bdev_will_wait();
			pthread_mutex_lock(&wb->lock);
			continue;
		}
		wb->nr_waits++;
		pthread_cond_wait(&wb->done, &wb->lock);
	}
	if (counted)
		e->fsyncs--;
	if (e && take_error) {
		err = e->err;
		e->err = 0;
		if (!e->pending && !e->fsyncs) {
			*p = e->next;
			free(e);
		}
	}
	pthread_mutex_unlock(&wb->lock);
	return err;
}

int tfs_wbehind_wait(struct tfs_wbehind *wb, u64 ino, bool take_error)
{
	return wb_wait(wb, ino, take_error, 0);
}

int tfs_wbehind_wait_fsync(struct tfs_wbehind *wb, u64 ino, bool datasync)
{
	return wb_wait(wb, ino, true, datasync ? 2 : 1);
}

bool tfs_wbehind_busy(struct tfs_wbehind *wb, u64 ino)
{
	struct wb_inode *e;
	bool busy;

	/*
	 * A job is counted before its request is answered, so any request
	 * the kernel sends after that answer sees it.
	 */
	if (!wb || !__atomic_load_n(&wb->nr_pending, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&wb->lock);
	e = *wb_slot(wb, ino);
	busy = e && e->pending;
	pthread_mutex_unlock(&wb->lock);
	return busy;
}

void tfs_wbehind_to_text(struct printbuf *out, struct tfs_wbehind *wb)
{
	u64 bytes = 0, max = 0, queued = 0, waits = 0, starts = 0;

	if (wb) {
		pthread_mutex_lock(&wb->lock);
		bytes = wb->bytes;
		max = wb->max_bytes;
		queued = wb->nr_queued;
		waits = wb->nr_waits;
		starts = wb->nr_fsync_starts;
		pthread_mutex_unlock(&wb->lock);
	}
	prt_printf(
		out,
		"write-behind:\t%llu queued (writes, releases), %llu waits, %llu of %llu bytes now, "
		"%llu fsync flushes started\n",
		(unsigned long long)queued, (unsigned long long)waits, (unsigned long long)bytes,
		(unsigned long long)max, (unsigned long long)starts);
}
