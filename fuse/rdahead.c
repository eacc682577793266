// SPDX-License-Identifier: GPL-2.0
/*
 * Listing readahead: the next readdirplus batch, read while the caller
 * digests the last one.
 *
 * A cold listing alternates between two parties that never overlap: the
 * daemon fills a reply (about 0.5 us per entry: the dirent scan and each
 * entry's attributes), then the caller's kernel makes a dentry and an inode
 * for every entry (about 1.4 us) before it asks for the next batch.  After
 * a full reply, this thread reads the next batch (names and attributes) in
 * that time, and the request for it, when it comes, only encodes them.
 *
 * Why the batch is still right when it is taken: it is taken only if no
 * inode of the process committed a change since the thread started reading
 * (tfs_inode_changes(): that covers attributes, and a directory's entries,
 * whose changes commit the directory) and the daemon saw no change in the
 * directory (its dir_changes slot).  Both counters move before the reply to
 * the request that changed something, so a change the kernel knows of when
 * it sends the request always voids the batch; a change whose reply comes
 * later races with the listing exactly as it would with a listing read
 * when the request came.  Anything else voids the batch too: another
 * directory, position or size asked, an error while reading (the request
 * then reads for itself and reports it).
 *
 * One batch at a time: two processes listing large directories at once
 * take turns voiding each other's, and each request then reads for itself.
 *
 * Only with a CPU to spare: the batch is read in parallel with the caller,
 * or it only adds a thread that takes turns with the caller (measured on 2
 * CPUs with threads waiting for one 90% of the time: a cold listing of 10k
 * 3.1 -> 4.0 us per entry; at 25-45% still 2.79 -> 2.50).  As the session
 * loop's polling (fuse/loop.c), it reads the CPU pressure
 * (/proc/pressure/cpu, "some") at most every 10 ms and queues nothing while
 * threads waited for a CPU more than half the time (threshold 25%: 2.63
 * in the run above, most batches not read); and a request whose batch has
 * not started yet reads it itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse/tfs_fuse.h"

enum rda_state {
	RDA_idle,
	RDA_queued,
	RDA_running,
	RDA_ready
};

struct tfs_rdahead {
	struct tfs_fs *fs;
	_Atomic u64 *dir_changes; /* tfs_fuse.dir_changes */
	unsigned slots;
	bool always; /* TFS_RDAHEAD_always */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* a job queued, a job done, or stop */
	pthread_t thread;
	bool stop;

	/* The job and its batch, under lock (the batch: the thread's while running). */
	enum rda_state state;
	u64 dir, pos;
	size_t size;
	u64 changes, dir_changes_seen; /* the counters when reading started */
	struct tfs_rdahead_ent *ents;
	size_t nr, cap;
	char *names;
	size_t names_len, names_cap;
	size_t bytes; /* what the entries take in a reply */
	bool more;    /* entries remain after the batch */
	int err;

	/* CPU pressure (see the top), under lock: */
	int psi_fd;	       /* /proc/pressure/cpu, or -1: never read ahead */
	u64 psi_at, psi_total; /* when read (ns), its "some" total then (us) */
	bool psi_free;	       /* no thread waited for a CPU much then */

	_Atomic u64 nr_read, nr_taken, nr_voided, nr_busy;
};

#define RDA_PSI_NS 10000000ull
#define RDA_PSI_PERCENT 50

/* Did threads wait for a CPU less than RDA_PSI_PERCENT of the time lately? (ra locked) */
static bool rda_cpus_free(struct tfs_rdahead *ra)
{
	struct timespec ts;
	char buf[256], *p, *avg;
	u64 now, total;
	ssize_t n;

	if (ra->always)
		return true;
	if (ra->psi_fd < 0)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
	if (ra->psi_at && now - ra->psi_at < RDA_PSI_NS)
		return ra->psi_free;
	n = pread(ra->psi_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456" (us) */
	p = strstr(buf, "total=");
	avg = strstr(buf, "avg10=");
	if (!p || !avg)
		return false;
	total = strtoull(p + 6, NULL, 10);
	if (ra->psi_at && now - ra->psi_at < 100 * RDA_PSI_NS)
		ra->psi_free =
			(total - ra->psi_total) * 1000 * 100 < (now - ra->psi_at) * RDA_PSI_PERCENT;
	else /* no recent reading to compare with: the last 10 s's average */
		ra->psi_free = strtod(avg + 6, NULL) < RDA_PSI_PERCENT;
	ra->psi_total = total;
	ra->psi_at = now;
	return ra->psi_free;
}

int tfs_rdahead_ent_fill(struct tfs_fs *fs, const char *name, size_t len, tfs_ino_t ino,
			 unsigned dtype, u64 next_pos, struct tfs_rdahead_ent *e)
{
	bool dot = (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');

	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->next_pos = next_pos;
	e->len = (u8)len;
	e->dtype = (u8)dtype;
	if (dot)
		return 0; /* no node for "." and "..": the kernel has them */
	int ret = tfs_getattr(fs, ino, &e->st);

	if (ret == -ENOENT)
		return 1; /* removed since it was listed */
	if (ret)
		return ret;
	/*
	 * Its nlink is not volunteered (tfs_stat.links_dropped): a lookup or
	 * getattr asks for it (the name only).
	 */
	e->withheld = e->st.links_dropped && !S_ISDIR(e->st.mode);
	e->attrs = !e->withheld;
	return 0;
}

size_t tfs_rdahead_ent_bytes(size_t len)
{
	return FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + len);
}

static int rda_fill(void *p, const char *name, size_t len, tfs_ino_t ino, unsigned dtype,
		    u64 next_pos)
{
	struct tfs_rdahead *ra = p;
	struct tfs_rdahead_ent *e;
	int ret;

	if (len > TFS_NAME_MAX) {
		ra->err = -ENAMETOOLONG; /* the request reads for itself and reports it */
		return 1;
	}
	if (ra->bytes + tfs_rdahead_ent_bytes(len) > ra->size) {
		ra->more = true;
		return 1;
	}
	if (ra->nr == ra->cap) {
		size_t cap = ra->cap ? ra->cap * 2 : 256;
		struct tfs_rdahead_ent *n = realloc(ra->ents, cap * sizeof(*n));

		if (!n) {
			ra->err = -ENOMEM;
			return 1;
		}
		ra->ents = n;
		ra->cap = cap;
	}
	if (ra->names_len + len > ra->names_cap) {
		size_t cap = ra->names_cap ? ra->names_cap * 2 : 16384;
		char *n;

		while (cap < ra->names_len + len)
			cap *= 2;
		n = realloc(ra->names, cap);
		if (!n) {
			ra->err = -ENOMEM;
			return 1;
		}
		ra->names = n;
		ra->names_cap = cap;
	}
	e = &ra->ents[ra->nr];
	ret = tfs_rdahead_ent_fill(ra->fs, name, len, ino, dtype, next_pos, e);
	if (ret < 0) {
		ra->err = ret;
		return 1;
	}
	if (ret)
		return 0;
	/* An offset, not a pointer: names may move as it grows. */
	e->name = (const char *)(uintptr_t)ra->names_len;
	memcpy(ra->names + ra->names_len, name, len);
	ra->names_len += len;
	ra->bytes += tfs_rdahead_ent_bytes(len);
	ra->nr++;
	return 0;
}

static void *rda_thread(void *p)
{
	struct tfs_rdahead *ra = p;

	pthread_mutex_lock(&ra->lock);
	for (;;) {
		while (!ra->stop && ra->state != RDA_queued)
			pthread_cond_wait(&ra->cond, &ra->lock);
		if (ra->stop)
			break;
		ra->state = RDA_running;
		ra->nr = ra->names_len = ra->bytes = 0;
		ra->more = false;
		ra->err = 0;
		/* Before the first read: see the top of this file. */
		ra->changes = tfs_inode_changes();
		ra->dir_changes_seen = atomic_load_explicit(&ra->dir_changes[ra->dir % ra->slots],
							    memory_order_acquire);
		pthread_mutex_unlock(&ra->lock);

		int ret = tfs_readdir(ra->fs, ra->dir, ra->pos, rda_fill, ra);

		pthread_mutex_lock(&ra->lock);
		if (!ret)
			ret = ra->err;
		for (size_t i = 0; i < ra->nr; i++)
			ra->ents[i].name = ra->names + (uintptr_t)ra->ents[i].name;
		ra->state = ret ? RDA_idle : RDA_ready;
		atomic_fetch_add_explicit(&ra->nr_read, 1, memory_order_relaxed);
		pthread_cond_broadcast(&ra->cond);
	}
	pthread_mutex_unlock(&ra->lock);
	return NULL;
}

struct tfs_rdahead *tfs_rdahead_start(struct tfs_fs *fs, _Atomic u64 *dir_changes, unsigned slots,
				      enum tfs_rdahead_mode mode)
{
	struct tfs_rdahead *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return NULL;
	ra->fs = fs;
	ra->dir_changes = dir_changes;
	ra->slots = slots;
	ra->always = mode == TFS_RDAHEAD_always;
	ra->psi_fd = ra->always ? -1 : open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC);
	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->cond, NULL);
	if (pthread_create(&ra->thread, NULL, rda_thread, ra)) {
		if (ra->psi_fd >= 0)
			close(ra->psi_fd);
		pthread_cond_destroy(&ra->cond);
		pthread_mutex_destroy(&ra->lock);
		free(ra);
		return NULL;
	}
	return ra;
}

void tfs_rdahead_stop(struct tfs_rdahead *ra)
{
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->stop = true;
	pthread_cond_broadcast(&ra->cond);
	pthread_mutex_unlock(&ra->lock);
	pthread_join(ra->thread, NULL);
	pthread_cond_destroy(&ra->cond);
	pthread_mutex_destroy(&ra->lock);
	if (ra->psi_fd >= 0)
		close(ra->psi_fd);
	free(ra->ents);
	free(ra->names);
	free(ra);
}

void tfs_rdahead_queue(struct tfs_rdahead *ra, u64 dir, u64 pos, size_t size)
{
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	if (!rda_cpus_free(ra)) {
		atomic_fetch_add_explicit(&ra->nr_busy, 1, memory_order_relaxed);
		/* Nor one read earlier for another request. */
		if (ra->state != RDA_running)
			ra->state = RDA_idle;
	} else if (ra->state != RDA_running) {
		/* A batch being read is left alone; a read one nobody took is dropped. */
		ra->state = RDA_queued;
		ra->dir = dir;
		ra->pos = pos;
		ra->size = size;
		pthread_cond_broadcast(&ra->cond);
	}
	pthread_mutex_unlock(&ra->lock);
}

bool tfs_rdahead_take(struct tfs_rdahead *ra, u64 dir, u64 pos, size_t size,
		      const struct tfs_rdahead_ent **ents, size_t *nr, bool *more)
{
	bool mine;

	if (!ra)
		return false;
	pthread_mutex_lock(&ra->lock);
	for (;;) {
		mine = ra->state != RDA_idle && ra->dir == dir && ra->pos == pos &&
		       ra->size == size;
		if (!mine || ra->state == RDA_ready || ra->stop)
			break;
		if (ra->state == RDA_queued && !ra->always) {
			/* Not started (no CPU for it): the request reads it itself. */
			ra->state = RDA_idle;
			mine = false;
			break;
		}
		/* Being read: this request's own work, partly done. */
		pthread_cond_wait(&ra->cond, &ra->lock);
	}
	if (mine && ra->state == RDA_ready && tfs_inode_changes() == ra->changes &&
	    atomic_load_explicit(&ra->dir_changes[dir % ra->slots], memory_order_acquire) ==
		    ra->dir_changes_seen) {
		*ents = ra->ents;
		*nr = ra->nr;
		*more = ra->more;
		atomic_fetch_add_explicit(&ra->nr_taken, 1, memory_order_relaxed);
		return true; /* locked until tfs_rdahead_done() */
	}
	if (mine) {
		atomic_fetch_add_explicit(&ra->nr_voided, 1, memory_order_relaxed);
		if (ra->state == RDA_ready)
			ra->state = RDA_idle;
	}
	pthread_mutex_unlock(&ra->lock);
	return false;
}

void tfs_rdahead_done(struct tfs_rdahead *ra)
{
	ra->state = RDA_idle;
	pthread_mutex_unlock(&ra->lock);
}

void tfs_rdahead_to_text(struct printbuf *out, struct tfs_rdahead *ra)
{
	if (!ra) {
		prt_str(out, "listing readahead:\toff\n");
		return;
	}
	prt_printf(out,
		   "listing readahead:\t%llu batches read, %llu taken, %llu void, "
		   "%llu not read (CPUs busy)\n",
		   (unsigned long long)atomic_load(&ra->nr_read),
		   (unsigned long long)atomic_load(&ra->nr_taken),
		   (unsigned long long)atomic_load(&ra->nr_voided),
		   (unsigned long long)atomic_load(&ra->nr_busy));
}
