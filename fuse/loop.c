// SPDX-License-Identifier: GPL-2.0
/*
 * The session loop: leader and followers.
 *
 * libfuse's multithreaded loop keeps several threads asleep in read() on
 * /dev/fuse; the kernel wakes the one that has waited longest, so a single
 * process creating files one after another is served by a different
 * thread for each request: every round trip wakes a cold thread, often on
 * the other CPU.  Measured on the 2-core VM (2000 files, medians of 6):
 * create 185 -> 123 us/file, unlink 153 -> 66 with one thread.
 *
 * Here one thread at a time (the leader) reads.  A request that only
 * touches memory and the btrees (lookup, getattr, create, unlink, ...) is
 * served by the leader itself, which then reads the next one: a sequence
 * of such requests stays on one hot thread.  Before a request that may
 * wait for the device or for the kernel (read, write, fsync, lseek's page
 * flush, a truncating setattr, ...) the leader hands the reading to a
 * follower (waking or starting one, up to max_threads) and serves the
 * request in parallel with the others, as libfuse's loop would.  A small
 * read is served by the leader until it would wait for the device (data
 * not in the host's page cache, a btree node to read, an inode a writer
 * holds): only there it hands the reading off (read_tried()), so a read
 * the host's cache answers costs no thread's wake-up.
 *
 * Polling.  On an idle machine, and above all in a VM, a thread asleep in
 * read() is woken through an idle CPU: the kernel queues the request, the
 * scheduler wakes the reader on the CPU it last ran on, which has halted,
 * and waking a halted virtual CPU costs tens of microseconds (a pipe
 * round trip between two processes on the 2-core VM: 77 us, 3 us on one
 * CPU).  A create is three such round trips.  So the reading thread, with
 * the descriptor non-blocking, first polls for the next request for up to
 * a budget; only then it sleeps in poll(2).  The budget adapts as the
 * kernel's halt polling does (cpuidle-haltpoll): it grows, up to max_us,
 * when a request came soon after the thread went to sleep, and shrinks
 * when the thread slept longer than max_us, so sparse requests cost little
 * polling.  The poll yields the CPU at each try, so runnable threads (the
 * caller, our own followers) are not kept waiting by it.
 *
 * Why a request served inline cannot deadlock: fuse/ holds no lock of its
 * own while it calls into the kernel, and fs/'s locks are held only while
 * waiting for the device or for other fs/ work, never for a request the
 * kernel still has to send.  So the leader may wait (for a lock held by a
 * parallel write, for a btree node read) but whatever it waits for makes
 * progress without a new request being read.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuse/cpulat.h"
#include "fuse/tfs_fuse.h"
#include "lib/bdev.h"

struct loop {
	struct fuse_session *se;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool reading;	  /* a leader holds the reading role */
	bool done;	  /* the session ended: every thread leaves */
	unsigned threads; /* started, not yet ended */
	unsigned waiting; /* followers waiting for the role */
	unsigned max;	  /* at most this many threads */
	int error;	  /* the first failure of a read, negative errno */
	bool (*busy)(void *arg, u64 ino);
	bool (*queues)(void *arg, u64 fh, u64 off, u32 len); /* a write goes behind */
	void *arg;
	pthread_cond_t ended;	     /* threads reached 0 */
	int fd;			     /* the session's, non-blocking when polling */
	struct tfs_fuse_poll *poll;  /* settings and counters */
	_Atomic u64 budget_ns;	     /* how long the reader polls now (only it changes it) */
	_Atomic unsigned handed_off; /* requests handed off, not yet answered */
	_Atomic bool leader_asleep;  /* the reader sleeps in poll(2) */
	int psi_fd;		     /* /proc/pressure/cpu, or -1 */
	u64 psi_at, psi_total;	     /* when read, its "some" total then (us); the reader's */
	_Atomic bool psi_free;	     /* no thread waited for a CPU then */
};

/* Where the budget starts growing from (as haltpoll's grow_start). */
#define POLL_GROW_START_NS 10000ull
/* How often cpus_free() reads the CPU pressure, and the most it lets poll. */
#define POLL_PSI_NS 10000000ull
#define POLL_PSI_PERCENT 25

static u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

/*
 * Did no thread wait for a CPU lately?  Polling pays only with a CPU to
 * spare: measured under a load average of 6-8, it made a create 60 -> 147
 * us (the poller one more thread taking turns with the caller; yielding
 * does not make way for it reliably).  The kernel's pressure stall
 * information says whether some thread waited for a CPU: its total is read
 * every POLL_PSI_NS; polling stops while that grew by more than
 * POLL_PSI_PERCENT of the time.  Measured: 1% on the idle VM, 9-13% while a
 * create loop runs on it (our own threads wake one another), 70-90% under
 * a load average of 8.  Our own poller makes such waits when it takes a
 * caller's CPU, so that stops it too.  Without PSI, no polling.
 */
static bool cpus_free(struct loop *l, u64 now)
{
	char buf[256], *p;
	u64 total;
	ssize_t n;

	if (l->psi_fd < 0)
		return false;
	if (l->psi_at && now - l->psi_at < POLL_PSI_NS)
		return l->psi_free;
	n = pread(l->psi_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456" (us) */
	p = strstr(buf, "total=");
	if (!p)
		return false;
	total = strtoull(p + 6, NULL, 10);
	l->psi_free = l->psi_at &&
		      (total - l->psi_total) * 1000 * 100 < (now - l->psi_at) * POLL_PSI_PERCENT;
	l->psi_total = total;
	l->psi_at = now;
	return l->psi_free;
}

/*
 * The descriptor had no request: poll again (returns true) while the
 * budget lasts since *since (set on the first empty read), else sleep
 * until one is there and adapt the budget (false: *since is reset).
 */
static bool poll_again(struct loop *l, u64 *since)
{
	u64 max = (u64)l->poll->max_us * 1000, now = mono_ns(), slept;
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
	unsigned busy;

	if (!*since)
		*since = now;
	/*
	 * While a handed-off request is served, its completion needs this CPU
	 * more than the next request does (io_uring workers, the host's
	 * direct-I/O completion kworkers, our completion thread): measured, a
	 * poll here delayed such a kworker by its whole budget, as sched_yield()
	 * does not give way to it.  A synchronous caller sends nothing before
	 * that reply anyway.
	 */
	busy = atomic_load(&l->handed_off);
	if (now - *since < l->budget_ns && !busy) {
		if (cpus_free(l, now)) {
			sched_yield();
			return true;
		}
		atomic_fetch_add(&l->poll->contended, 1);
		busy = 1;
	}
	atomic_fetch_add(&l->poll->poll_ns, now - *since);
	atomic_fetch_add(&l->poll->sleeps, 1);
	*since = 0;
	/* An error or a hang-up shows in the next read (ENODEV: unmounted). */
	atomic_store(&l->leader_asleep, true);
	poll(&pfd, 1, -1);
	atomic_store(&l->leader_asleep, false);
	slept = mono_ns() - now;
	if (busy)
		return false; /* the budget did not run out: nothing learnt */
	if (slept > max)
		l->budget_ns /= 2;
	else if (l->budget_ns < max)
		l->budget_ns = l->budget_ns * 2 < POLL_GROW_START_NS ? POLL_GROW_START_NS
			       : l->budget_ns * 2 > max		     ? max
								     : l->budget_ns * 2;
	if (l->budget_ns < POLL_GROW_START_NS && slept > max)
		l->budget_ns = 0;
	return false;
}

/* The most a read the leader tries to serve itself asks for. */
#define READ_TRY_MAX (64u << 10)

/*
 * A small FUSE_READ: the leader serves it itself until it would wait for
 * the device (tfs_bdev_set_wait_hook(): a btree node or data not in the
 * host's page cache), where it hands the reading off (read_waits()) and
 * goes on as a follower.  A read of the host's page cache is a copy: the
 * hand-off before it woke a follower for nothing, through a halted CPU on
 * the VM.  Bigger reads (the kernel's readahead, 128 KiB and more) go
 * straight to a follower: they read the device direct, and their
 * parallelism is the sequential stream's speed.
 */
static bool read_tried(struct loop *l, const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;
	const struct fuse_read_in *r = (const void *)(in + 1);

	return !(buf->flags & FUSE_BUF_IS_FD) && buf->size >= sizeof(*in) + sizeof(*r) &&
	       in->opcode == FUSE_READ && r->size <= READ_TRY_MAX &&
	       (!l->busy || !l->busy(l->arg, in->nodeid));
}

/*
 * May the leader serve this request itself?  Those that can wait for the
 * device or the kernel are handed to a follower instead.  Unknown: no.
 * (A small read is tried first: read_tried().)
 */
static bool served_inline(struct loop *l, const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;

	if ((buf->flags & FUSE_BUF_IS_FD) || buf->size < sizeof(*in))
		return false;
	switch (in->opcode) {
	case FUSE_GETATTR:
	case FUSE_OPEN:
		/*
		 * These wait for the inode's writes behind (st_blocks, O_TRUNC).
		 * Others on such an inode (a chown, an ACL, its times: a tree
		 * copy's) do not: at most they wait for the short commit.
		 */
		return !l->busy || !l->busy(l->arg, in->nodeid);
	case FUSE_LOOKUP:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_READLINK:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_SYMLINK:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_LINK:
	case FUSE_CREATE:
	case FUSE_RELEASE:
	case FUSE_FLUSH:
	case FUSE_OPENDIR:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_RELEASEDIR:
	case FUSE_GETXATTR:
	case FUSE_LISTXATTR:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
	case FUSE_ACCESS:
	case FUSE_STATFS:
	case FUSE_INTERRUPT:
		return true;
	case FUSE_WRITE: {
		/* The kernel's small write-back: queued behind (fuse/wbehind.c). */
		const struct fuse_write_in *w = (const void *)(in + 1);

		return buf->size >= sizeof(*in) + sizeof(*w) &&
		       (w->write_flags & FUSE_WRITE_CACHE) && l->queues &&
		       l->queues(l->arg, w->fh, w->offset, w->size) &&
		       (!l->busy || !l->busy(l->arg, in->nodeid));
	}
	case FUSE_SETATTR: {
		/* A size change frees or zeroes data: handed off. */
		const struct fuse_setattr_in *a = (const void *)(in + 1);

		return buf->size >= sizeof(*in) + sizeof(*a) && !(a->valid & FATTR_SIZE);
	}
	default:
		return false;
	}
}

static void *loop_thread(void *p);

/*
 * A follower has answered a handed-off request and none is left, while the
 * reader sleeps in poll(2) (it does not poll while such a request is
 * served, see poll_again()).  The caller of that request, answered now, is
 * likely to send its next one at once (a write then its fsync's setattr, a
 * read then the next read), and it would wake the reader through a halted
 * CPU.  So this thread, awake and hot, polls for it instead, for the
 * reader's budget, and serves what it reads; the reader, woken too by the
 * request, finds nothing and polls in turn.  Serving here needs no reading
 * role: a request that may wait is served by this thread as a follower's.
 */
static void copoll(struct loop *l, struct fuse_buf *buf)
{
	u64 start = mono_ns(), now = start;
	int ret;

	if (!atomic_load(&l->psi_free)) {
		atomic_fetch_add(&l->poll->contended, 1);
		return;
	}
	while (now - start < atomic_load(&l->budget_ns) && atomic_load(&l->leader_asleep) &&
	       !fuse_session_exited(l->se)) {
		ret = fuse_session_receive_buf(l->se, buf);
		if (ret > 0) {
			bool inline_ok = served_inline(l, buf);

			atomic_fetch_add(&l->poll->poll_ns, mono_ns() - start);
			atomic_fetch_add(&l->poll->hits, 1);
			atomic_fetch_add(&l->poll->copoll_hits, 1);
			tfs_cpulat_touch(l->poll->cpulat);
			if (!inline_ok)
				atomic_fetch_add(&l->handed_off, 1);
			fuse_session_process_buf(l->se, buf);
			if (!inline_ok)
				atomic_fetch_sub(&l->handed_off, 1);
			start = now = mono_ns();
			continue;
		}
		if (ret != -EAGAIN && ret != -EINTR)
			break; /* the end of the session: the reader sees it too */
		sched_yield();
		now = mono_ns();
	}
}

/* Under l->lock: start a thread if none waits and fewer than max run. */
static void loop_spawn_locked(struct loop *l)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;

	if (l->waiting || l->threads >= l->max || l->done)
		return;
	/* The new thread takes no signal (sig_thread in mount.c takes them). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!pthread_create(&tid, &attr, loop_thread, l))
		l->threads++;
	/* Else the running threads go on: the request waits for one of them. */
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Gives up the reading role (to a waiting follower or a new thread). */
static void loop_hand_off(struct loop *l)
{
	pthread_mutex_lock(&l->lock);
	l->reading = false;
	if (l->waiting)
		pthread_cond_signal(&l->cond);
	else
		loop_spawn_locked(l);
	pthread_mutex_unlock(&l->lock);
}

/*
 * The leader is about to serve a request that may wait: it gives up the
 * reading role, and the request counts as handed off until
 * handed_off_done().
 */
static void loop_hand_off_request(struct loop *l)
{
	atomic_fetch_add(&l->handed_off, 1);
	atomic_fetch_add(&l->poll->handed_off, 1);
	loop_hand_off(l);
}

/* A handed-off request is answered: the thread of the last one copolls. */
static void handed_off_done(struct loop *l, struct fuse_buf *buf)
{
	if (atomic_fetch_sub(&l->handed_off, 1) == 1 && l->poll->max_us)
		copoll(l, buf);
}

/* The loop the calling thread serves, if any (tfs_fuse_loop_kernel_wait()). */
static __thread struct loop *thread_loop;

void tfs_fuse_loop_kernel_wait(bool begin)
{
	struct loop *l = thread_loop;

	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	if (begin) {
		/*
		 * This thread's slot is lent: with max_threads 1 it was the
		 * only thread, and no one read the requests it waits for.
		 */
		l->max++;
		if (!l->reading)
			loop_spawn_locked(l);
	} else {
		l->max--;
	}
	pthread_mutex_unlock(&l->lock);
}

/* A read the leader serves itself (read_tried()). */
struct read_try {
	struct loop *l;
	bool waited; /* it handed the reading off */
};

/* The wait hook of a tried read: the read waits for the device, the reading goes on. */
static void read_waits(void *arg)
{
	struct read_try *t = arg;

	t->waited = true;
	atomic_fetch_add(&t->l->poll->reads_waited, 1);
	loop_hand_off_request(t->l);
}

/*
 * Serves a tried read as the leader; returns whether the thread is still
 * the leader (false: it handed the reading off and is a follower now).
 */
static bool loop_try_read(struct loop *l, struct fuse_buf *buf)
{
	struct read_try t = { .l = l };

	atomic_fetch_add(&l->poll->reads_tried, 1);
	tfs_bdev_set_wait_hook(read_waits, &t);
	fuse_session_process_buf(l->se, buf);
	tfs_bdev_set_wait_hook(NULL, NULL);
	if (!t.waited)
		return true;
	handed_off_done(l, buf);
	return false;
}

static void *loop_thread(void *p)
{
	struct loop *l = p;
	struct fuse_buf buf = { .mem = NULL };
	bool leader = false;
	u64 since = 0; /* polling since (ns), 0: not polling */
	int ret;

	thread_loop = l;
	for (;;) {
		if (!leader) {
			pthread_mutex_lock(&l->lock);
			l->waiting++;
			while (l->reading && !l->done)
				pthread_cond_wait(&l->cond, &l->lock);
			l->waiting--;
			if (l->done) {
				pthread_mutex_unlock(&l->lock);
				break;
			}
			l->reading = true;
			leader = true;
			pthread_mutex_unlock(&l->lock);
		}
		if (fuse_session_exited(l->se))
			ret = 0;
		else
			ret = fuse_session_receive_buf(l->se, &buf);
		if (ret == -EAGAIN && l->poll->max_us) {
			poll_again(l, &since);
			continue;
		}
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (since) {
			atomic_fetch_add(&l->poll->poll_ns, mono_ns() - since);
			atomic_fetch_add(&l->poll->hits, 1);
			since = 0;
		}
		if (ret <= 0) {
			/* ENODEV (unmounted) comes back as 0 with the session exited. */
			pthread_mutex_lock(&l->lock);
			if (ret < 0 && !l->error)
				l->error = ret;
			l->done = true;
			l->reading = false;
			pthread_cond_broadcast(&l->cond);
			pthread_mutex_unlock(&l->lock);
			fuse_session_exit(l->se);
			break;
		}
		tfs_cpulat_touch(l->poll->cpulat);
		if (read_tried(l, &buf)) {
			leader = loop_try_read(l, &buf);
			continue;
		}
		if (!served_inline(l, &buf)) {
			loop_hand_off_request(l);
			leader = false;
			fuse_session_process_buf(l->se, &buf);
			handed_off_done(l, &buf);
			continue;
		}
		fuse_session_process_buf(l->se, &buf);
	}
	free(buf.mem);
	pthread_mutex_lock(&l->lock);
	if (!--l->threads)
		pthread_cond_signal(&l->ended);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

void tfs_fuse_poll_to_text(struct printbuf *out, struct tfs_fuse_poll *p)
{
	prt_printf(out, "requests handed to a follower:\t%llu\n",
		   (unsigned long long)atomic_load(&p->handed_off));
	prt_printf(
		out,
		"small reads served by the reader:\t%llu tried, %llu handed off at a device wait\n",
		(unsigned long long)atomic_load(&p->reads_tried),
		(unsigned long long)atomic_load(&p->reads_waited));
	prt_printf(out, "poll of /dev/fuse:\t");
	if (!p->max_us) {
		prt_printf(out, "off\n");
		return;
	}
	prt_printf(
		out,
		"%llu requests found polling (%llu by a follower), %llu sleeps (%llu with the CPUs "
		"busy), %llu ms polled (max %u us)\n",
		(unsigned long long)atomic_load(&p->hits),
		(unsigned long long)atomic_load(&p->copoll_hits),
		(unsigned long long)atomic_load(&p->sleeps),
		(unsigned long long)atomic_load(&p->contended),
		(unsigned long long)(atomic_load(&p->poll_ns) / 1000000), p->max_us);
}

int tfs_fuse_loop(struct fuse_session *se, unsigned max_threads, bool (*busy)(void *arg, u64 ino),
		  bool (*queues)(void *arg, u64 fh, u64 off, u32 len), void *arg,
		  struct tfs_fuse_poll *poll)
{
	struct loop l = {
		.se = se,
		.busy = busy,
		.queues = queues,
		.arg = arg,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
		.ended = PTHREAD_COND_INITIALIZER,
		.max = max_threads ?: 1,
		.fd = fuse_session_fd(se),
		.poll = poll,
		.budget_ns = (u64)poll->max_us * 1000,
	};
	int ret, fl;

	l.psi_fd = poll->max_us ? open("/proc/pressure/cpu", O_RDONLY | O_CLOEXEC) : -1;

	/* Polling reads return EAGAIN instead of sleeping. */
	if (poll->max_us) {
		fl = fcntl(l.fd, F_GETFL);
		if (fl < 0 || fcntl(l.fd, F_SETFL, fl | O_NONBLOCK) < 0)
			poll->max_us = 0;
	}

	pthread_mutex_lock(&l.lock);
	loop_spawn_locked(&l);
	if (!l.threads) {
		pthread_mutex_unlock(&l.lock);
		return -EAGAIN;
	}
	while (l.threads)
		pthread_cond_wait(&l.ended, &l.lock);
	pthread_mutex_unlock(&l.lock);
	ret = l.error;
	if (l.psi_fd >= 0)
		close(l.psi_fd);
	fuse_session_reset(se);
	return ret;
}
