// SPDX-License-Identifier: GPL-2.0
/*
 * Low CPU wake-up latency while the mount is busy: see fuse/cpulat.h.
 *
 * Measured on the 2-core VM (quiet, 1 GiB image, 1000 and 10000 files in
 * one directory, fs_compare.sh's metadata test): create 59 -> 18 us per
 * file, unlink 70 -> 17-21, `ls -l` cold 64 -> 22 with the request held
 * (by hand, a process holding /dev/cpu_dma_latency at 0).  Keeping the
 * CPUs awake with SCHED_IDLE spinning threads instead made a create slower
 * (114 us): they are not the kernel's polling idle state, whose wake-up
 * needs no interrupt.
 *
 * The write of the 0 us request (and of -1, PM_QOS_DEFAULT_VALUE, which
 * drops it back to no constraint) costs a system call and wakes the idle
 * CPUs once, so it is done only when the state changes: a touch while held
 * is a clock read and relaxed stores of the time.
 *
 * Only a burst takes or extends it: requests further apart than
 * CPULAT_BURST_NS gain one wake-up each at most, and holding it
 * low_latency_ms after each kept every idle CPU polling for a trickle (a
 * statfs every 10 ms: 100% of the idle time polled, 25 ms: 86%).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuse/cpulat.h"
#include "lib/types.h"

struct tfs_cpulat {
	unsigned hold_ms;
	int fd;		/* -1: inert */
	int open_error; /* errno of the failed open (inert), or 0 */
	char *path;

	pthread_mutex_t lock; /* held, stop, the writes and counters below */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool thread_started;
	bool stop;
	_Atomic bool held;
	_Atomic u64 prev_ns; /* the last touch (CLOCK_MONOTONIC) */
	_Atomic u64 last_ns; /* the last touch of a burst: the hold runs from it */
	u64 held_since_ns;
	u64 nr_holds;	 /* times the request was taken */
	u64 held_ns;	 /* total time held, spells ended */
	int write_error; /* errno of a failed write (then inert), or 0 */
};

/*
 * Requests at most this far apart are a burst.  A FUSE round trip's two
 * wake-ups cost 30-90 us here: a request 1 ms after the last one gains at
 * most that, while polling until it comes costs the idle CPUs the whole
 * gap.  Loops of file operations send theirs tens of us apart.
 */
#define CPULAT_BURST_NS 1000000ull

/* Fine enough to tell a burst's gaps (the vDSO: tens of ns). */
static u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

/* Under c->lock: writes the request's value (0 us, or -1: none). */
static bool cpulat_write(struct tfs_cpulat *c, int32_t us)
{
	if (write(c->fd, &us, sizeof(us)) == (ssize_t)sizeof(us))
		return true;
	/* The kernel refused it: nothing more is tried (the request stays as it was). */
	c->write_error = errno ?: EIO;
	return false;
}

static void *cpulat_thread(void *p)
{
	struct tfs_cpulat *c = p;
	u64 hold_ns = (u64)c->hold_ms * 1000000ull;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		if (!atomic_load(&c->held)) {
			pthread_cond_wait(&c->cond, &c->lock);
			continue;
		}
		u64 now = mono_ns(), deadline = atomic_load(&c->last_ns) + hold_ns;

		if (now >= deadline) {
			/*
			 * A touch racing with this sees held still true and
			 * does not take it again: its request pays one slow
			 * wake-up, the next one takes the request.
			 */
			atomic_store(&c->held, false);
			if (cpulat_write(c, -1))
				c->held_ns += now - c->held_since_ns;
			continue;
		}
		/* The condvar's clock is CLOCK_MONOTONIC, as the deadline's. */
		struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
				       .tv_nsec = (long)(deadline % 1000000000ull) };

		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

struct tfs_cpulat *tfs_cpulat_start(const char *path, unsigned hold_ms)
{
	struct tfs_cpulat *c = calloc(1, sizeof(*c));
	pthread_condattr_t attr;

	if (!c)
		return NULL;
	c->fd = -1;
	c->hold_ms = hold_ms;
	c->path = strdup(path);
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
	if (!hold_ms || !c->path)
		return c;
	c->fd = open(path, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		c->open_error = errno;
		return c;
	}
	if (pthread_create(&c->thread, NULL, cpulat_thread, c)) {
		close(c->fd);
		c->fd = -1;
		c->open_error = EAGAIN;
		return c;
	}
	c->thread_started = true;
	return c;
}

void tfs_cpulat_stop(struct tfs_cpulat *c)
{
	if (!c)
		return;
	if (c->thread_started) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
	}
	if (c->fd >= 0)
		close(c->fd); /* drops the request */
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->path);
	free(c);
}

void tfs_cpulat_touch(struct tfs_cpulat *c)
{
	u64 now, prev;

	if (!c || c->fd < 0)
		return;
	now = mono_ns();
	prev = atomic_load_explicit(&c->prev_ns, memory_order_relaxed);
	atomic_store_explicit(&c->prev_ns, now, memory_order_relaxed);
	/* Signed: another thread's later touch stored first, so the two came together. */
	if ((int64_t)(now - prev) > (int64_t)CPULAT_BURST_NS)
		return;
	atomic_store_explicit(&c->last_ns, now, memory_order_relaxed);
	if (atomic_load_explicit(&c->held, memory_order_relaxed))
		return;
	pthread_mutex_lock(&c->lock);
	if (!atomic_load(&c->held) && !c->write_error && !c->stop && cpulat_write(c, 0)) {
		/* The thread reads last_ns under the lock: this touch's, at least. */
		atomic_store(&c->last_ns, now);
		atomic_store(&c->held, true);
		c->held_since_ns = now;
		c->nr_holds++;
		pthread_cond_signal(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
}

bool tfs_cpulat_held(struct tfs_cpulat *c)
{
	return c && atomic_load(&c->held);
}

void tfs_cpulat_to_text(struct printbuf *out, struct tfs_cpulat *c)
{
	prt_printf(out, "low wake-up latency:\t");
	if (!c || !c->hold_ms) {
		prt_printf(out, "off\n");
		return;
	}
	if (c->fd < 0) {
		prt_printf(out, "unavailable (%s: ", c->path);
		prt_err_desc(out, -c->open_error);
		prt_printf(out, ")\n");
		return;
	}
	pthread_mutex_lock(&c->lock);
	u64 held_ns = c->held_ns;

	if (atomic_load(&c->held))
		held_ns += mono_ns() - c->held_since_ns;
	prt_printf(out, "%s, taken %llu times, held %llu ms in all (until %u ms after a request)",
		   atomic_load(&c->held) ? "held" : "not held", (unsigned long long)c->nr_holds,
		   (unsigned long long)(held_ns / 1000000), c->hold_ms);
	if (c->write_error) {
		prt_printf(out, "; stopped: writing %s: ", c->path);
		prt_err_desc(out, -c->write_error);
	}
	prt_printf(out, "\n");
	pthread_mutex_unlock(&c->lock);
}
