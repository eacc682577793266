// SPDX-License-Identifier: GPL-2.0
/*
 * The shrinker registry (lib/shrinker.h): a list of shrinkers, a thread
 * that waits on an eventfd (kicks) and a PSI trigger, and the run that
 * shares out what must be freed.
 *
 * Callbacks never run under r->lock: a shrinker is marked busy under the
 * lock, the lock is dropped, the callback runs, and busy is cleared under
 * the lock again.  A run holds shrinker pointers across those windows, so
 * before each callback it checks, under the lock, that the pointer is still
 * on the list (without dereferencing it first: an unregistered shrinker may
 * be freed memory).  Unregister takes the shrinker off the list, then waits
 * for busy to clear, so after it returns nothing touches the shrinker.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "lib/shrinker.h"
#include "lib/string.h"
#include "lib/trace.h"

#define PSI_DEFAULT_PATH "/proc/pressure/memory"

/* Tried in order; the second for processes without CAP_SYS_RESOURCE. */
static const char *const psi_triggers[] = {
	"some 150000 1000000",
	"some 300000 2000000",
};

enum shrink_reason {
	SHRINK_BUDGET,
	SHRINK_PSI,
	SHRINK_DEMAND
};

struct tfs_shrinkers {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* busy cleared, kick handled */
	struct tfs_shrinker *list;
	unsigned nr;
	size_t budget;

	pthread_t thread;
	bool thread_started;
	bool stopping; /* atomic */
	int event_fd;
	bool kick_pending; /* atomic: an eventfd write is outstanding */
	u64 kick_seq;	   /* atomic: kicks made */
	u64 kick_done;	   /* under lock: kicks the thread has handled */

	/* PSI: fd -1 when not armed; why in psi_msg. */
	int psi_fd;
	const char *psi_trigger;
	char psi_path[64];
	char psi_msg[160];

	size_t accounted; /* atomic: sum of the shrinkers' accounted bytes */

	/* Counters (atomic). */
	u64 runs_budget, runs_psi, runs_demand, psi_events, kicks;
	u64 reserves, runs_direct, over_budget, max_held;
	/*
	 * The reserves' estimate (atomic): the total last measured plus every
	 * reserve since, and how many reserves since.  Lets a reserve far
	 * below the budget skip measuring (the caches' bytes() take locks).
	 */
	size_t est;
	u64 est_nr;
};

/* A reserve measures the total at least this often (growth that reserves nothing: dirty nodes). */
#define RESERVE_MEASURE_EVERY 64

/* --- callbacks, guarded --- */

static bool shrinker_on_list(struct tfs_shrinkers *r, struct tfs_shrinker *s)
{
	for (struct tfs_shrinker *p = r->list; p; p = p->next)
		if (p == s)
			return true;
	return false;
}

/* Marks s busy if it is still registered; false otherwise. */
static bool shrinker_get(struct tfs_shrinkers *r, struct tfs_shrinker *s)
{
	pthread_mutex_lock(&r->lock);
	while (shrinker_on_list(r, s) && s->busy)
		pthread_cond_wait(&r->cond, &r->lock);
	bool ok = shrinker_on_list(r, s);

	if (ok)
		s->busy = true;
	pthread_mutex_unlock(&r->lock);
	return ok;
}

static void shrinker_put(struct tfs_shrinkers *r, struct tfs_shrinker *s)
{
	pthread_mutex_lock(&r->lock);
	s->busy = false;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* s's bytes; the caller holds it busy. */
static size_t shrinker_bytes_busy(struct tfs_shrinker *s)
{
	if (s->bytes)
		return s->bytes(s);
	return __atomic_load_n(&s->accounted, __ATOMIC_RELAXED);
}

/* Pointers to every registered shrinker (malloc'ed), or NULL when none / no memory. */
static struct tfs_shrinker **shrinkers_snapshot(struct tfs_shrinkers *r, unsigned *nr)
{
	struct tfs_shrinker **v = NULL;

	pthread_mutex_lock(&r->lock);
	*nr = r->nr;
	if (r->nr)
		v = malloc(r->nr * sizeof(*v));
	if (v) {
		unsigned i = 0;

		for (struct tfs_shrinker *p = r->list; p; p = p->next)
			v[i++] = p;
	} else {
		*nr = 0;
	}
	pthread_mutex_unlock(&r->lock);
	return v;
}

size_t tfs_shrinkers_bytes(struct tfs_shrinkers *r)
{
	unsigned nr;
	struct tfs_shrinker **v = shrinkers_snapshot(r, &nr);
	size_t total = 0;

	for (unsigned i = 0; i < nr; i++) {
		if (!shrinker_get(r, v[i]))
			continue;
		total += shrinker_bytes_busy(v[i]);
		shrinker_put(r, v[i]);
	}
	free(v);
	return total;
}

/* --- a run --- */

struct run_item {
	struct tfs_shrinker *s;
	bool stalled; /* freed nothing this run: not asked again */
	unsigned long count;
	size_t bytes;
	size_t start_bytes;  /* at the first round */
	size_t cap;	     /* the most it frees in this run: its first share (or all) */
	unsigned long freed; /* objects its scans freed in this run */
};

/* One scan of s for nr objects; returns what it freed (0 if s went away). */
static unsigned long shrinker_scan_one(struct tfs_shrinkers *r, struct tfs_shrinker *s,
				       unsigned long nr, bool *gone)
{
	unsigned long freed;

	if (!shrinker_get(r, s)) {
		*gone = true;
		return 0;
	}
	freed = s->scan(s, nr);
	tfs_trace(shrinker_scan, s->name, nr, freed);

	pthread_mutex_lock(&r->lock);
	s->nr_scans++;
	s->nr_asked += nr;
	s->nr_freed += freed;
	s->last_asked = nr;
	s->last_freed = freed;
	if (!freed)
		s->nr_no_progress++;
	s->busy = false;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return freed;
}

/*
 * Asks the shrinkers to free until the total is at most target (see the
 * top of shrinker.h for how much each is asked).  Returns bytes freed (as
 * the drop of the total: memory other threads add meanwhile counts
 * against it).
 */
static size_t shrinkers_run(struct tfs_shrinkers *r, size_t target, bool capped)
{
	unsigned nr;
	struct tfs_shrinker **v = shrinkers_snapshot(r, &nr);
	struct run_item *items = nr ? calloc(nr, sizeof(*items)) : NULL;
	size_t start = 0, total = 0;

	if (!items)
		goto out;
	for (unsigned i = 0; i < nr; i++)
		items[i].s = v[i];

	for (unsigned round = 0; round < TFS_SHRINKER_MAX_ROUNDS; round++) {
		double sumw = 0;
		bool progress = false;

		/* Measure: each shrinker's count and bytes, and the total. */
		total = 0;
		for (unsigned i = 0; i < nr; i++) {
			struct run_item *it = &items[i];

			it->count = 0;
			it->bytes = 0;
			if (!shrinker_get(r, it->s)) {
				it->stalled = true;
				continue;
			}
			it->bytes = shrinker_bytes_busy(it->s);
			if (!it->stalled)
				it->count = it->s->count(it->s);
			shrinker_put(r, it->s);
			total += it->bytes;
			if (!it->stalled && it->count && it->bytes)
				sumw += (double)it->bytes / (it->s->seeks ?: 2);
		}
		if (!round)
			start = total;
		if (total <= target || sumw == 0)
			break;

		double excess = (double)(total - target);

		for (unsigned i = 0; i < nr; i++) {
			struct run_item *it = &items[i];
			bool gone = false;

			if (it->stalled || !it->count || !it->bytes)
				continue;
			double share = excess * ((double)it->bytes / (it->s->seeks ?: 2)) / sumw;
			double want = (double)it->count * share / (double)it->bytes;

			want *= (double)(1UL << round);
			if (!round) {
				it->start_bytes = it->bytes;
				it->cap = capped && target ? (size_t)share + 1 : SIZE_MAX;
			}
			/*
			 * Later rounds make up for what a scan skipped (second
			 * chances), but only up to this one's own share: one
			 * cache's unfreeable memory (dirty) is not taken out of
			 * another's working set; that cache writes it back.
			 */
			size_t done = it->start_bytes > it->bytes ? it->start_bytes - it->bytes : 0;

			if (done >= it->cap)
				continue;
			/* What is left of the cap, in objects of the size its scans freed. */
			if (it->cap != SIZE_MAX && it->freed && done)
				want = min_t(double, want,
					     (double)(it->cap - done) * (double)it->freed /
						     (double)done);
			unsigned long ask =
				want >= (double)it->count ? it->count : (unsigned long)want;
			if ((double)ask < want)
				ask++; /* round up */
			ask = max_t(unsigned long, ask, 1);
			ask = min_t(unsigned long, ask, it->count);

			unsigned long freed = shrinker_scan_one(r, it->s, ask, &gone);

			it->freed += freed;
			if (freed)
				progress = true;
			else
				it->stalled = true;
		}
		if (!progress)
			break;
	}
	/* The total after the last round's scans. */
	total = 0;
	for (unsigned i = 0; i < nr; i++) {
		if (!shrinker_get(r, items[i].s))
			continue;
		total += shrinker_bytes_busy(items[i].s);
		shrinker_put(r, items[i].s);
	}
out:
	free(items);
	free(v);
	return start > total ? start - total : 0;
}

size_t tfs_shrinkers_run(struct tfs_shrinkers *r, size_t target)
{
	__atomic_add_fetch(&r->runs_demand, 1, __ATOMIC_RELAXED);
	return shrinkers_run(r, target, true);
}

/* --- the thread --- */

static size_t budget_low_watermark(size_t budget)
{
	return budget - budget / 8;
}

/* --- direct reclaim --- */

static void note_max_held(struct tfs_shrinkers *r, size_t held)
{
	u64 old = __atomic_load_n(&r->max_held, __ATOMIC_RELAXED);

	while (held > old && !__atomic_compare_exchange_n(&r->max_held, &old, held, true,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

bool tfs_shrinkers_reserve(struct tfs_shrinkers *r, size_t bytes)
{
	size_t total;

	if (!r || !r->budget)
		return true;
	__atomic_add_fetch(&r->reserves, 1, __ATOMIC_RELAXED);
	/* Fast: the estimate (an over-estimate but for growth without a reserve) fits. */
	size_t est = __atomic_add_fetch(&r->est, bytes, __ATOMIC_RELAXED);

	if (est <= r->budget &&
	    __atomic_add_fetch(&r->est_nr, 1, __ATOMIC_RELAXED) % RESERVE_MEASURE_EVERY) {
		note_max_held(r, est);
		return true;
	}
	total = tfs_shrinkers_bytes(r);
	if (total + bytes > r->budget) {
		size_t low = budget_low_watermark(r->budget);

		__atomic_add_fetch(&r->runs_direct, 1, __ATOMIC_RELAXED);
		shrinkers_run(r, low > bytes ? low - bytes : 0, true);
		total = tfs_shrinkers_bytes(r);
		/*
		 * A cache that could not give its share (dirty or locked
		 * objects): just this allocation's room from whoever can give
		 * it, so the total stays within the budget; the cache with dirty
		 * objects writes them back.
		 */
		if (total + bytes > r->budget) {
			shrinkers_run(r, r->budget > bytes ? r->budget - bytes : 0, false);
			total = tfs_shrinkers_bytes(r);
		}
	}
	note_max_held(r, total + bytes);
	__atomic_store_n(&r->est, total + bytes, __ATOMIC_RELAXED);
	if (total + bytes <= r->budget)
		return true;
	__atomic_add_fetch(&r->over_budget, 1, __ATOMIC_RELAXED);
	return false;
}

static void psi_disarm(struct tfs_shrinkers *r, const char *why)
{
	struct printbuf msg = printbuf_extern(r->psi_msg, sizeof(r->psi_msg));

	if (r->psi_fd >= 0)
		close(r->psi_fd);
	r->psi_fd = -1;
	prt_printf(&msg, "%s", why);
}

static void *shrinker_thread(void *arg)
{
	struct tfs_shrinkers *r = arg;

	while (!__atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd[2] = {
			{ .fd = r->event_fd, .events = POLLIN },
			{ .fd = r->psi_fd, .events = POLLPRI },
		};
		bool psi_event = false;
		u64 seq, v;

		if (poll(pfd, r->psi_fd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break; /* cannot happen with valid fds */
		}
		if (pfd[0].revents & POLLIN) {
			/*
			 * Read, then clear the flag: a kick that finds the flag
			 * still set is seen by the kick_seq load below, one
			 * after the clear writes again.  (Clearing first would
			 * let this read swallow the write of a kick that set
			 * the flag again, and every later kick would skip its
			 * write: a lost wake-up.)
			 */
			if (read(r->event_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: nothing was written; nothing to do. */
			}
			__atomic_store_n(&r->kick_pending, false, __ATOMIC_SEQ_CST);
		}
		if (r->psi_fd >= 0 && (pfd[1].revents & POLLPRI)) {
			psi_event = true;
			__atomic_add_fetch(&r->psi_events, 1, __ATOMIC_RELAXED);
		}
		if (r->psi_fd >= 0 && (pfd[1].revents & (POLLERR | POLLNVAL))) {
			/* The trigger's group went away (only on cgroup removal). */
			pthread_mutex_lock(&r->lock);
			psi_disarm(r, "trigger lost (POLLERR); only the budget triggers scans");
			pthread_mutex_unlock(&r->lock);
		}
		if (__atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE))
			break;

		seq = __atomic_load_n(&r->kick_seq, __ATOMIC_SEQ_CST);
		if (r->budget) {
			size_t total = tfs_shrinkers_bytes(r);

			if (total > r->budget) {
				__atomic_add_fetch(&r->runs_budget, 1, __ATOMIC_RELAXED);
				shrinkers_run(r, budget_low_watermark(r->budget), true);
			}
		}
		if (psi_event) {
			size_t total = tfs_shrinkers_bytes(r);

			__atomic_add_fetch(&r->runs_psi, 1, __ATOMIC_RELAXED);
			shrinkers_run(r, total - total / 8, true);
		}

		pthread_mutex_lock(&r->lock);
		if (seq > r->kick_done)
			r->kick_done = seq;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
	return NULL;
}

void tfs_shrinkers_kick(struct tfs_shrinkers *r)
{
	u64 one = 1;

	__atomic_add_fetch(&r->kicks, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->kick_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_exchange_n(&r->kick_pending, true, __ATOMIC_SEQ_CST))
		return; /* a write is outstanding: the thread will see this kick */
	if (write(r->event_fd, &one, sizeof(one)) < 0) {
		/* Only EAGAIN (counter saturated): the thread is awake anyway. */
	}
}

void tfs_shrinkers_sync(struct tfs_shrinkers *r)
{
	u64 seq;

	tfs_shrinkers_kick(r);
	seq = __atomic_load_n(&r->kick_seq, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&r->lock);
	while (r->kick_done < seq && r->thread_started)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

void tfs_shrinker_account(struct tfs_shrinker *s, long delta)
{
	struct tfs_shrinkers *r = s->registry;
	size_t total;

	__atomic_add_fetch(&s->accounted, (size_t)delta, __ATOMIC_RELAXED);
	if (!r)
		return;
	total = __atomic_add_fetch(&r->accounted, (size_t)delta, __ATOMIC_RELAXED);
	/* Shrinkers with a bytes() callback kick for themselves. */
	if (delta > 0 && r->budget && total > r->budget)
		tfs_shrinkers_kick(r);
}

/* --- PSI --- */

static void psi_arm(struct tfs_shrinkers *r, const char *path)
{
	struct printbuf msg = printbuf_extern(r->psi_msg, sizeof(r->psi_msg));
	int err = 0;

	tfs_strscpy(r->psi_path, path, sizeof(r->psi_path));
	r->psi_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (r->psi_fd < 0) {
		err = errno;
		goto fail;
	}
	for (unsigned i = 0; i < ARRAY_SIZE(psi_triggers); i++) {
		/* The kernel reads the trigger as a C string: send the NUL too. */
		if (write(r->psi_fd, psi_triggers[i], strlen(psi_triggers[i]) + 1) >= 0) {
			r->psi_trigger = psi_triggers[i];
			return;
		}
		err = errno;
		if (err != EINVAL && err != EPERM)
			break;
	}
	close(r->psi_fd);
	r->psi_fd = -1;
fail:
	prt_printf(&msg, "unavailable (%s: %s); only the budget triggers scans", path,
		   tfs_err_str(-err));
}

/* --- lifetime --- */

int tfs_shrinkers_init_opts(struct tfs_shrinkers **ret, const struct tfs_shrinkers_opts *opts)
{
	struct tfs_shrinkers *r = calloc(1, sizeof(*r));
	int err;

	*ret = NULL;
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->budget = opts->budget;
	r->psi_fd = -1;
	r->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->event_fd < 0) {
		err = -errno;
		goto err;
	}
	if (opts->use_psi) {
		psi_arm(r, opts->psi_path ?: PSI_DEFAULT_PATH);
	} else {
		struct printbuf msg = printbuf_extern(r->psi_msg, sizeof(r->psi_msg));

		prt_str(&msg, "not used");
	}
	err = -pthread_create(&r->thread, NULL, shrinker_thread, r);
	if (err)
		goto err;
	r->thread_started = true;
	*ret = r;
	return 0;
err:
	if (r->psi_fd >= 0)
		close(r->psi_fd);
	if (r->event_fd >= 0)
		close(r->event_fd);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return err;
}

int tfs_shrinkers_init(struct tfs_shrinkers **ret, size_t budget, bool use_psi)
{
	struct tfs_shrinkers_opts opts = { .budget = budget, .use_psi = use_psi };

	return tfs_shrinkers_init_opts(ret, &opts);
}

void tfs_shrinkers_exit(struct tfs_shrinkers *r)
{
	u64 one = 1;

	if (!r)
		return;
	__atomic_store_n(&r->stopping, true, __ATOMIC_RELEASE);
	if (write(r->event_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, so the thread is awake anyway. */
	}
	pthread_join(r->thread, NULL);
	pthread_mutex_lock(&r->lock);
	r->thread_started = false;
	pthread_cond_broadcast(&r->cond); /* syncs waiting on a stopped thread */
	pthread_mutex_unlock(&r->lock);
	if (r->psi_fd >= 0)
		close(r->psi_fd);
	close(r->event_fd);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void tfs_shrinker_register(struct tfs_shrinkers *r, struct tfs_shrinker *s)
{
	s->registry = r;
	s->nr_scans = s->nr_asked = s->nr_freed = s->nr_no_progress = 0;
	s->last_asked = s->last_freed = 0;
	s->busy = false;
	__atomic_store_n(&s->accounted, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&r->lock);
	s->next = r->list;
	r->list = s;
	r->nr++;
	pthread_mutex_unlock(&r->lock);
}

void tfs_shrinker_unregister(struct tfs_shrinker *s)
{
	struct tfs_shrinkers *r = s->registry;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	for (struct tfs_shrinker **p = &r->list; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			r->nr--;
			__atomic_sub_fetch(&r->accounted,
					   __atomic_load_n(&s->accounted, __ATOMIC_RELAXED),
					   __ATOMIC_RELAXED);
			break;
		}
	/* Off the list: no new callback starts; wait for one running. */
	while (s->busy)
		pthread_cond_wait(&r->cond, &r->lock);
	s->next = NULL;
	s->registry = NULL;
	pthread_mutex_unlock(&r->lock);
}

/* --- accessors and text --- */

size_t tfs_shrinkers_budget(struct tfs_shrinkers *r)
{
	return r->budget;
}

bool tfs_shrinkers_psi_active(struct tfs_shrinkers *r)
{
	pthread_mutex_lock(&r->lock);
	bool ret = r->psi_fd >= 0;

	pthread_mutex_unlock(&r->lock);
	return ret;
}

void tfs_shrinkers_stats(struct tfs_shrinkers *r, struct tfs_shrinkers_stats *st)
{
	st->runs_budget = __atomic_load_n(&r->runs_budget, __ATOMIC_RELAXED);
	st->runs_psi = __atomic_load_n(&r->runs_psi, __ATOMIC_RELAXED);
	st->runs_demand = __atomic_load_n(&r->runs_demand, __ATOMIC_RELAXED);
	st->psi_events = __atomic_load_n(&r->psi_events, __ATOMIC_RELAXED);
	st->kicks = __atomic_load_n(&r->kicks, __ATOMIC_RELAXED);
	st->reserves = __atomic_load_n(&r->reserves, __ATOMIC_RELAXED);
	st->runs_direct = __atomic_load_n(&r->runs_direct, __ATOMIC_RELAXED);
	st->over_budget = __atomic_load_n(&r->over_budget, __ATOMIC_RELAXED);
	st->max_held = __atomic_load_n(&r->max_held, __ATOMIC_RELAXED);
}

void tfs_shrinkers_to_text(struct printbuf *out, struct tfs_shrinkers *r)
{
	struct tfs_shrinkers_stats st;
	unsigned nr;
	struct tfs_shrinker **v = shrinkers_snapshot(r, &nr);

	tfs_shrinkers_stats(r, &st);
	printbuf_tabstop_push(out, 20);
	prt_str(out, "budget:\t");
	if (r->budget)
		prt_units_u64(out, r->budget);
	else
		prt_str(out, "none");
	prt_str(out, "\nheld:\t");
	prt_units_u64(out, tfs_shrinkers_bytes(r));
	pthread_mutex_lock(&r->lock);
	if (r->psi_fd >= 0)
		prt_printf(out, "\npsi:\t%s: \"%s\"", r->psi_path, r->psi_trigger);
	else
		prt_printf(out, "\npsi:\t%s", r->psi_msg);
	pthread_mutex_unlock(&r->lock);
	prt_printf(out, "\nruns:\t%llu budget, %llu psi (%llu events), %llu on demand\n",
		   (unsigned long long)st.runs_budget, (unsigned long long)st.runs_psi,
		   (unsigned long long)st.psi_events, (unsigned long long)st.runs_demand);
	prt_printf(out, "kicks:\t%llu\n", (unsigned long long)st.kicks);
	prt_printf(out, "reserves:\t%llu (%llu shrank first, %llu over budget)\n",
		   (unsigned long long)st.reserves, (unsigned long long)st.runs_direct,
		   (unsigned long long)st.over_budget);
	prt_str(out, "max held:\t");
	prt_units_u64(out, st.max_held);
	prt_newline(out);

	for (unsigned i = 0; i < nr; i++) {
		struct tfs_shrinker *s = v[i];
		unsigned long count;
		size_t bytes;

		if (!shrinker_get(r, s))
			continue;
		count = s->count(s);
		bytes = shrinker_bytes_busy(s);
		prt_printf(out, "%s:\n", s->name);
		printbuf_indent_add(out, 2);
		prt_printf(out, "can free:\t%lu objects\n", count);
		prt_str(out, "bytes:\t");
		prt_units_u64(out, bytes);
		prt_printf(out, "\nseeks:\t%u\n", s->seeks ?: 2);
		pthread_mutex_lock(&r->lock);
		prt_printf(out, "last scan:\tasked %lu, freed %lu\n", s->last_asked, s->last_freed);
		prt_printf(out,
			   "totals:\t%llu scans, asked %llu, freed %llu, %llu without progress\n",
			   (unsigned long long)s->nr_scans, (unsigned long long)s->nr_asked,
			   (unsigned long long)s->nr_freed, (unsigned long long)s->nr_no_progress);
		s->busy = false;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		printbuf_indent_sub(out, 2);
	}
	printbuf_tabstop_pop(out);
	free(v);
}
