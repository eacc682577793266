// SPDX-License-Identifier: GPL-2.0
/*
 * Pins and reclaim.
 *
 * The pin fifo holds one pin list per seq from last_seq to cur_seq.  A list's
 * count is its pins plus one while its entry is unwritten; last_seq moves
 * past a seq only when its count is zero, so replay from last_seq always
 * finds every update that has not been written back elsewhere.
 *
 * Journal buckets are reused only once last_seq_ondisk -- the last_seq of
 * the newest *durable* flush entry -- has passed every seq in them: an
 * in-memory last_seq is not enough, since after a crash replay starts from
 * what is on disk.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "journal/journal_internal.h"
#include "lib/errcode.h"

/* --- lists --- */

static void jlist_init(struct tfs_journal_list *l)
{
	l->next = l->prev = l;
}

static bool jlist_empty(const struct tfs_journal_list *l)
{
	return l->next == l;
}

static void jlist_del_init(struct tfs_journal_list *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	jlist_init(l);
}

static void jlist_add_tail(struct tfs_journal_list *l, struct tfs_journal_list *head)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static bool jlist_contains(const struct tfs_journal_list *head, const struct tfs_journal_list *l)
{
	for (const struct tfs_journal_list *p = head->next; p != head; p = p->next)
		if (p == l)
			return true;
	return false;
}

int tfs_journal_pins_init(struct tfs_journal *j)
{
	j->pins = calloc(j->opts.pin_fifo_size, sizeof(*j->pins));
	if (!j->pins)
		return -ENOMEM;
	for (unsigned i = 0; i < j->opts.pin_fifo_size; i++) {
		jlist_init(&j->pins[i].list);
		jlist_init(&j->pins[i].flushed);
	}
	return 0;
}

/* --- space ---
 *
 * Each member's free space is its free buckets plus the room left in the
 * current one; an entry never crosses a bucket, so it goes in the current
 * bucket if it fits, else at the start of a free one.  Entries are given
 * their place when they are written, in seq order (so each member's ring
 * holds them in seq order, which the read relies on); an entry opens only
 * if, after every closed entry not yet placed (counted on every member, as
 * if each went everywhere), enough members still have room for it.
 *
 * Space is handed out in classes, each leaving a floor for the next:
 * normal entries leave reserved_buckets free buckets; reserved ones
 * (reclaim's own updates) leave two blocks; an empty flush entry that makes
 * entries already written NO_FLUSH durable leaves one block; and that last
 * block is for the entry recording progress -- a newer last_seq -- which
 * only takes it on a member where, once durable, it frees a bucket.
 *
 * Liveness: whatever else happened, a member always has room for a flush
 * entry if something is NO_FLUSH (the NO_FLUSH entry left two blocks), and
 * always room for a progress entry; so pins whose owners need their seqs
 * durable before they let go (write-back) can let go, last_seq advances,
 * and the progress entry gives buckets back.  A restart keeps the same
 * floors: it continues after the newest entry on each member.
 */

/* Someone waits for space or pin fifo slots. */
static bool journal_pressure(struct tfs_journal *j)
{
	return j->nr_space_waiters || j->cur_entry_error == TFS_JOURNAL_CUR_journal_full ||
	       j->cur_entry_error == TFS_JOURNAL_CUR_journal_pin_full;
}

struct journal_space {
	unsigned free; /* whole free buckets */
	u32 room;      /* bytes left in the current bucket */
};

unsigned tfs_journal_dev_free_buckets(struct tfs_journal_device *d)
{
	return d->nr_buckets - d->nr_dirty;
}

static struct journal_space dev_space(const struct tfs_journal_device *d)
{
	return (struct journal_space){ d->nr_buckets - d->nr_dirty,
				       d->bucket_size - d->cur_offset };
}

/* Places an entry of bytes as writing does: in the current bucket, else a new one. */
static bool space_place(struct journal_space *s, u32 bucket_size, u32 bytes)
{
	if (s->room >= bytes) {
		s->room -= bytes;
		return true;
	}
	if (!s->free || bytes > bucket_size)
		return false;
	s->free--;
	s->room = bucket_size - bytes;
	return true;
}

/* a leaves at least as much as b (a free bucket holds more than any room). */
static bool space_ge(struct journal_space a, struct journal_space b)
{
	return a.free > b.free || (a.free == b.free && a.room >= b.room);
}

/* Whether an entry recording last_seq frees a bucket of d once it is durable. */
static bool dev_frees(const struct tfs_journal_device *d, u64 last_seq)
{
	return d->nr_dirty > 1 && d->bucket_seq[d->dirty_idx] < last_seq;
}

/* What an entry of class must leave on a member. */
static struct journal_space space_floor(struct tfs_journal *j, enum tfs_journal_space_class class,
					bool frees)
{
	u32 blk = journal_min_entry_bytes(j);

	switch (class) {
	case TFS_JOURNAL_SPACE_normal:
		/* A free bucket holds the two blocks below (buckets are >= 2 blocks). */
		if (j->opts.reserved_buckets)
			return (struct journal_space){ j->opts.reserved_buckets, 0 };
		return (struct journal_space){ 0, 2 * blk };
	case TFS_JOURNAL_SPACE_reserved:
		return (struct journal_space){ 0, 2 * blk };
	case TFS_JOURNAL_SPACE_flush:
		return (struct journal_space){ 0, blk };
	default:
		return (struct journal_space){ 0, frees ? 0 : blk };
	}
}

/*
 * The largest entry that fits in s and leaves f.  Any smaller one fits too:
 * the new-bucket case only counts when there is a bucket to spare beyond f.
 */
static u32 space_max_entry(struct journal_space s, u32 bucket_size, struct journal_space f)
{
	u32 x = 0;

	if (s.free > f.free)
		x = s.room;
	else if (s.free == f.free && s.room >= f.room)
		x = s.room - f.room;
	if (s.free >= 1) {
		unsigned nf = s.free - 1;

		if (nf > f.free)
			x = max_t(u32, x, bucket_size);
		else if (nf == f.free && bucket_size >= f.room)
			x = max_t(u32, x, bucket_size - f.room);
	}
	return x;
}

u32 tfs_journal_entry_capacity(struct tfs_journal *j, enum tfs_journal_space_class class,
			       u64 last_seq)
{
	unsigned want = min_t(unsigned, j->opts.metadata_replicas, tfs_journal_nr_writable(j));
	u32 caps[TFS_JOURNAL_MAX_DEVS], cap;
	unsigned n = 0;

	if (!want)
		return 0;
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];
		struct journal_space sp = dev_space(d);
		bool ok = true;

		if (!d->writable)
			continue;
		/* Closed entries not placed yet: as if each went to this member. */
		for (u64 s = j->seq_allocated + 1; s <= j->cur_seq && ok; s++) {
			struct tfs_journal_buf *b = journal_seq_buf(j, s);

			if (b->state == TFS_JBUF_CLOSED || b->state == TFS_JBUF_FLUSHING)
				ok = b->cancelled || space_place(&sp, d->bucket_size, b->bytes);
		}
		caps[n++] = ok ? space_max_entry(sp, d->bucket_size,
						 space_floor(j, class, dev_frees(d, last_seq)))
			       : 0;
	}
	if (n < want)
		return 0;
	/* The want-th largest (n is tiny). */
	for (unsigned i = 1; i < n; i++)
		for (unsigned k = i; k > 0 && caps[k] > caps[k - 1]; k--) {
			u32 t = caps[k];

			caps[k] = caps[k - 1];
			caps[k - 1] = t;
		}
	cap = min_t(u32, caps[want - 1], j->opts.max_entry_size);
	return round_down(cap, j->opts.block_size);
}

bool tfs_journal_dev_fits(struct tfs_journal *j, struct tfs_journal_device *d,
			  const struct tfs_journal_buf *b)
{
	struct journal_space sp = dev_space(d);

	return space_place(&sp, d->bucket_size, b->bytes) &&
	       space_ge(sp, space_floor(j, b->space_class, dev_frees(d, b->last_seq)));
}

void tfs_journal_space_update_locked(struct tfs_journal *j)
{
	bool freed = false;

	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		while (d->nr_dirty > 1 && d->bucket_seq[d->dirty_idx] < j->last_seq_ondisk) {
			d->dirty_idx = (d->dirty_idx + 1) % d->nr_buckets;
			d->nr_dirty--;
			freed = true;
		}
	}
	/*
	 * Space changed: waiters re-check, an entry waiting for room may go,
	 * and under pressure reclaim aims at the buckets now oldest.
	 */
	if (freed) {
		pthread_cond_broadcast(&j->wait);
		tfs_journal_write_kick_locked(j);
		if (journal_pressure(j)) {
			j->reclaim_kicked = true;
			pthread_cond_signal(&j->reclaim_wait);
		}
	}
}

/* Short of space: someone waits for it, or it runs low. */
static bool journal_dev_short(struct tfs_journal *j, struct tfs_journal_device *d, bool urgent)
{
	unsigned free_b = tfs_journal_dev_free_buckets(d);

	if (j->nr_space_waiters || j->cur_entry_error == TFS_JOURNAL_CUR_journal_full)
		return true;
	return !urgent && (free_b <= j->opts.reserved_buckets + 1 || free_b * 2 < d->nr_buckets);
}

static void journal_progress(struct tfs_journal *j, bool urgent)
{
	bool want = false;
	int code;

	if (j->halted || j->stopping || j->draining || j->blocked ||
	    j->last_seq <= j->last_seq_ondisk)
		return;
	/* A flush entry on its way records a last_seq already: see once it is done. */
	for (u64 s = j->seq_done + 1; s <= j->cur_seq; s++) {
		struct tfs_journal_buf *b = journal_seq_buf(j, s);

		if (b->must_flush && b->state != TFS_JBUF_OPEN && !b->cancelled)
			return;
	}
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		want |= d->writable && journal_dev_short(j, d, urgent) && dev_frees(d, j->last_seq);
	}
	if (!want)
		return;
	if (j->cur_open) {
		/* The open entry records last_seq when it closes. */
		journal_seq_buf(j, j->cur_seq)->must_flush = true;
		tfs_journal_entry_close_locked(j);
		tfs_journal_write_kick_locked(j);
		return;
	}
	if (tfs_journal_entry_open_locked(j, TFS_JOURNAL_SPACE_progress, journal_min_entry_bytes(j),
					  &code) == TFS_JOURNAL_CUR_ok) {
		journal_seq_buf(j, j->cur_seq)->must_flush = true;
		tfs_journal_entry_close_locked(j);
		tfs_journal_write_kick_locked(j);
	}
}

void tfs_journal_progress_locked(struct tfs_journal *j)
{
	journal_progress(j, true);
}

/* --- pins --- */

void tfs_journal_reclaim_fast_locked(struct tfs_journal *j)
{
	bool popped = false;

	while (j->last_seq <= j->cur_seq && !journal_seq_pins(j, j->last_seq)->count) {
		j->last_seq++;
		popped = true;
	}
	/*
	 * last_seq moved: pin fifo waiters re-check; under pressure the pins
	 * now oldest may need reclaim, and space waiters a progress entry.
	 */
	if (popped) {
		pthread_cond_broadcast(&j->wait);
		if (journal_pressure(j)) {
			j->reclaim_kicked = true;
			pthread_cond_signal(&j->reclaim_wait);
		}
		if (j->nr_space_waiters)
			tfs_journal_progress_locked(j);
	}
}

void tfs_journal_pin_init(struct tfs_journal_entry_pin *pin)
{
	jlist_init(&pin->list);
	__atomic_store_n(&pin->seq, 0,
			 __ATOMIC_RELEASE); /* read unlocked by tfs_journal_pin_active() */
	pin->flush = NULL;
}

static void journal_pin_drop_locked(struct tfs_journal *j, struct tfs_journal_entry_pin *pin)
{
	struct tfs_journal_entry_pin_list *pl;

	if (!pin->seq)
		return;
	pl = journal_seq_pins(j, pin->seq);
	jlist_del_init(&pin->list);
	__atomic_store_n(&pin->seq, 0,
			 __ATOMIC_RELEASE); /* read unlocked by tfs_journal_pin_active() */
	pl->count--;
}

static void journal_pin_add_locked(struct tfs_journal *j, u64 seq,
				   struct tfs_journal_entry_pin *pin,
				   tfs_journal_pin_flush_fn flush)
{
	struct tfs_journal_entry_pin_list *pl;

	if (!pin->list.next)
		jlist_init(&pin->list);
	/* A seq already reclaimed, or not handed out: the caller's bug. */
	if (seq < j->last_seq || seq > j->cur_seq)
		abort();
	pl = journal_seq_pins(j, seq);
	pl->count++;
	jlist_add_tail(&pin->list, &pl->list);
	__atomic_store_n(&pin->seq, seq, __ATOMIC_RELEASE);
	pin->flush = flush;
}

/* (Re)pins pin at seq, releasing the seq it held, if any. */
static void journal_pin_move_locked(struct tfs_journal *j, u64 seq,
				    struct tfs_journal_entry_pin *pin,
				    tfs_journal_pin_flush_fn flush)
{
	/* Add first, then drop: last_seq must not pass seq in between. */
	u64 old = pin->seq;

	if (old)
		jlist_del_init(&pin->list);
	journal_pin_add_locked(j, seq, pin, flush);
	if (old)
		journal_seq_pins(j, old)->count--;
	tfs_journal_reclaim_fast_locked(j);
}

void tfs_journal_pin_add(struct tfs_journal *j, u64 seq, struct tfs_journal_entry_pin *pin,
			 tfs_journal_pin_flush_fn flush)
{
	pthread_mutex_lock(&j->lock);
	if (pin->seq && pin->seq <= seq)
		pin->flush = flush;
	else
		journal_pin_move_locked(j, seq, pin, flush);
	pthread_mutex_unlock(&j->lock);
}

void tfs_journal_pin_update(struct tfs_journal *j, u64 seq, struct tfs_journal_entry_pin *pin,
			    tfs_journal_pin_flush_fn flush)
{
	pthread_mutex_lock(&j->lock);
	if (pin->seq == seq)
		pin->flush = flush;
	else if (!pin->seq || seq > pin->seq)
		journal_pin_move_locked(j, seq, pin, flush);
	pthread_mutex_unlock(&j->lock);
}

void tfs_journal_pin_drop(struct tfs_journal *j, struct tfs_journal_entry_pin *pin)
{
	pthread_mutex_lock(&j->lock);
	journal_pin_drop_locked(j, pin);
	tfs_journal_reclaim_fast_locked(j);
	pthread_mutex_unlock(&j->lock);
}

/* --- reclaim --- */

static bool journal_dev_low(struct tfs_journal *j, struct tfs_journal_device *d)
{
	unsigned free_b = tfs_journal_dev_free_buckets(d);

	return free_b <= j->opts.reserved_buckets + 1 || free_b * 2 < d->nr_buckets;
}

/* The newest seq whose pins reclaim should flush now. */
static u64 journal_reclaim_target(struct tfs_journal *j)
{
	u64 target = j->pin_flush_target;
	u64 used = j->cur_seq + 1 - j->last_seq;

	if (j->cur_entry_error == TFS_JOURNAL_CUR_journal_pin_full ||
	    used * 2 >= j->opts.pin_fifo_size)
		target = max_t(u64, target, j->last_seq + used / 2);

	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		if (!d->writable || d->nr_dirty < 2)
			continue;
		if (j->cur_entry_error == TFS_JOURNAL_CUR_journal_full || j->nr_space_waiters ||
		    journal_dev_low(j, d)) {
			/*
			 * Free the older half of the dirty buckets, not counting
			 * those last_seq passed already (a progress entry frees
			 * them; their pins are gone).
			 */
			unsigned skip = 0, n;

			while (skip < d->nr_dirty - 1 &&
			       d->bucket_seq[(d->dirty_idx + skip) % d->nr_buckets] < j->last_seq)
				skip++;
			n = max_t(unsigned, 1, (d->nr_dirty - 1 - skip) / 2);
			if (skip + n > d->nr_dirty - 1)
				continue;
			unsigned b = (d->dirty_idx + skip + n - 1) % d->nr_buckets;

			target = max_t(u64, target, d->bucket_seq[b]);
		}
	}
	return min_t(u64, target, j->cur_seq);
}

const char *const tfs_journal_pin_flush_err_names[] = {
#define x(n) #n,
	TFS_JOURNAL_PIN_FLUSH_ERRS(x)
#undef x
};

#define RECLAIM_BACKOFF_MIN_MS 10
#define RECLAIM_BACKOFF_MAX_MS 1000

static enum tfs_journal_pin_flush_err pin_flush_err_reason(int ret)
{
	if (tfs_err_matches(ret, EIO))
		return TFS_JOURNAL_PIN_FLUSH_ERR_io;
	if (tfs_err_matches(ret, ENOSPC))
		return TFS_JOURNAL_PIN_FLUSH_ERR_no_space;
	if (tfs_err_matches(ret, EAGAIN))
		return TFS_JOURNAL_PIN_FLUSH_ERR_journal_full;
	if (tfs_err_matches(ret, EROFS))
		return TFS_JOURNAL_PIN_FLUSH_ERR_read_only;
	return TFS_JOURNAL_PIN_FLUSH_ERR_other;
}

/*
 * A pin flush failed: no callback runs again before the back-off passes.
 * Whatever failed (a node write on a failing member, no room for a root
 * entry) fails the same way if retried at once, and every retry of a
 * write-back rewrites the tree's nodes: before this, each failure woke the
 * reservations waiting for space, each of them kicked reclaim, and reclaim
 * retried about 1,600 times a second.
 */
static void reclaim_backoff_locked(struct tfs_journal *j, int ret)
{
	j->pin_flush_errors++;
	j->pin_flush_err = ret;
	j->pin_flush_err_counts[pin_flush_err_reason(ret)]++;
	j->reclaim_backoff_ms = j->reclaim_backoff_ms ? min_t(unsigned, j->reclaim_backoff_ms * 2,
							      RECLAIM_BACKOFF_MAX_MS)
						      : RECLAIM_BACKOFF_MIN_MS;
	j->reclaim_backoff_until_ns = tfs_journal_now_ns() + (u64)j->reclaim_backoff_ms * 1000000;
}

/* Whether reclaim may call flush callbacks now (else it says why in the counters). */
static bool reclaim_may_flush_locked(struct tfs_journal *j)
{
	/* Halted: nothing a callback writes back could be recorded; never retried. */
	if (j->halted) {
		j->reclaim_halted_runs++;
		return false;
	}
	if (j->reclaim_backoff_until_ns > tfs_journal_now_ns()) {
		j->reclaim_backoff_runs++;
		return false;
	}
	return true;
}

static void journal_reclaim_locked(struct tfs_journal *j)
{
	u64 target = journal_reclaim_target(j);
	u64 last_seq = j->last_seq;

	j->reclaim_runs++;
	if (!reclaim_may_flush_locked(j))
		target = 0; /* the rest of the run (last_seq, progress) still goes */
	/* While callbacks run, the open entry does not close on age (journal_io.c). */
	j->reclaim_flushing = true;
	for (u64 seq = j->last_seq; target && seq <= target && !j->stopping;) {
		struct tfs_journal_entry_pin_list *pl = journal_seq_pins(j, seq);
		struct tfs_journal_entry_pin *pin;
		int ret;

		if (seq < j->last_seq) {
			seq = j->last_seq;
			continue;
		}
		/*
		 * The first pin with a flush callback: only its owner can
		 * release one without, so those are passed over (the others
		 * still go, and last_seq follows once the owner lets go).
		 */
		pin = NULL;
		for (struct tfs_journal_list *l = jlist_empty(&pl->list) ? &pl->list
									 : pl->list.next;
		     l != &pl->list; l = l->next) {
			struct tfs_journal_entry_pin *p =
				container_of(l, struct tfs_journal_entry_pin, list);

			if (p->flush) {
				pin = p;
				break;
			}
		}
		if (!pin) {
			seq++;
			continue;
		}
		tfs_journal_pin_flush_fn fn = pin->flush;

		jlist_del_init(&pin->list);
		jlist_add_tail(&pin->list, &pl->flushed);
		pthread_mutex_unlock(&j->lock);
		ret = fn(j, pin, seq);
		pthread_mutex_lock(&j->lock);
		/*
		 * The owner may have dropped and freed the pin: only look at it
		 * if it is still on the flushed list.
		 */
		bool still = jlist_contains(&pl->flushed, &pin->list);

		if (still) {
			jlist_del_init(&pin->list);
			jlist_add_tail(&pin->list, &pl->list);
		}
		if (ret) {
			reclaim_backoff_locked(j, ret);
			/* flush_pins() callers report it. */
			pthread_cond_broadcast(&j->wait);
			break;
		}
		j->pins_flushed++;
		j->reclaim_backoff_ms = 0;
		if (still)
			break; /* claimed success but kept the pin: back off */
	}
	j->reclaim_flushing = false;
	tfs_journal_write_kick_locked(j);
	tfs_journal_reclaim_fast_locked(j);
	if (j->pin_flush_target && j->last_seq > j->pin_flush_target)
		j->pin_flush_target = 0;
	/*
	 * Moved last_seq and still wanted: again, with a target from the
	 * new state (bounded: last_seq only grows, up to cur_seq).
	 */
	if (j->last_seq > last_seq && (journal_pressure(j) || j->pin_flush_target))
		j->reclaim_kicked = true;
	/*
	 * A newer last_seq on disk gives buckets back.  No broadcast here: a
	 * run that changed nothing must not wake the waiters (they would kick
	 * reclaim again, and spin); whatever did change woke them already.
	 */
	journal_progress(j, false);
}

__thread struct tfs_journal *tfs_journal_reclaim_current;

void *tfs_journal_reclaim_thread(void *arg)
{
	struct tfs_journal *j = arg;

	tfs_journal_reclaim_current = j;

	pthread_mutex_lock(&j->lock);
	while (!j->stopping) {
		if (!j->reclaim_kicked) {
			u64 timeout = 50 * 1000000ULL, now = tfs_journal_now_ns();
			struct timespec ts;

			/* Retry a failed flush when its back-off ends (flush_pins() waits for it). */
			if (j->reclaim_backoff_until_ns > now)
				timeout = min_t(u64, timeout, j->reclaim_backoff_until_ns - now);
			clock_gettime(CLOCK_MONOTONIC, &ts);
			timeout += (u64)ts.tv_nsec;
			ts.tv_sec += (time_t)(timeout / 1000000000);
			ts.tv_nsec = (long)(timeout % 1000000000);
			pthread_cond_timedwait(&j->reclaim_wait, &j->lock, &ts);
		}
		if (j->stopping)
			break;
		j->reclaim_kicked = false;
		journal_reclaim_locked(j);
	}
	tfs_journal_unlock(j);
	return NULL;
}

void tfs_journal_reclaim_kick(struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	j->reclaim_kicked = true;
	pthread_cond_signal(&j->reclaim_wait);
	pthread_mutex_unlock(&j->lock);
}

int tfs_journal_flush_pins(struct tfs_journal *j, u64 seq)
{
	u64 errs;
	int ret;

	if (!seq)
		return 0;
	pthread_mutex_lock(&j->lock);
	seq = min_t(u64, seq, j->cur_seq);
	errs = j->pin_flush_errors;
	j->pin_flush_target = max_t(u64, j->pin_flush_target, seq);
	while (1) {
		if (j->last_seq > seq && j->last_seq_ondisk > seq) {
			ret = 0;
			break;
		}
		if (j->halted) {
			ret = j->err ?: -TFS_ERR_journal_halted;
			break;
		}
		if (j->pin_flush_errors != errs) {
			ret = j->pin_flush_err;
			break;
		}
		/* Pins are gone: a flush entry records the new last_seq. */
		if (j->last_seq > seq)
			tfs_journal_want_flush_locked(j, j->cur_seq, 0, true);
		j->pin_flush_target = max_t(u64, j->pin_flush_target, seq);
		j->reclaim_kicked = true;
		pthread_cond_signal(&j->reclaim_wait);
		/* Woken by progress only (a pin dropped, a write done, an error). */
		pthread_cond_wait(&j->wait, &j->lock);
	}
	tfs_journal_unlock(j);
	return ret;
}
