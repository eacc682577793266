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

/* --- space --- */

unsigned tfs_journal_dev_free_buckets(struct tfs_journal_device *d)
{
	return d->nr_buckets - d->nr_dirty;
}

bool tfs_journal_dev_has_space(struct tfs_journal *j, struct tfs_journal_device *d, u32 bytes,
			       bool reserved)
{
	unsigned free_b = tfs_journal_dev_free_buckets(d);
	unsigned need = reserved ? 0 : j->opts.reserved_buckets;

	if (d->bucket_size - d->cur_offset >= bytes)
		return free_b >= need;
	return free_b >= need + 1;
}

void tfs_journal_space_update_locked(struct tfs_journal *j)
{
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		while (d->nr_dirty > 1 && d->bucket_seq[d->dirty_idx] < j->last_seq_ondisk) {
			d->dirty_idx = (d->dirty_idx + 1) % d->nr_buckets;
			d->nr_dirty--;
		}
	}
}

/* --- pins --- */

void tfs_journal_reclaim_fast_locked(struct tfs_journal *j)
{
	bool popped = false;

	while (j->last_seq <= j->cur_seq && !journal_seq_pins(j, j->last_seq)->count) {
		j->last_seq++;
		popped = true;
	}
	if (popped)
		pthread_cond_broadcast(&j->wait);
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
	pthread_cond_signal(&j->reclaim_wait);
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
		if (j->cur_entry_error == TFS_JOURNAL_CUR_journal_full || journal_dev_low(j, d)) {
			/* Free the older half of the dirty buckets. */
			unsigned n = max_t(unsigned, 1, (d->nr_dirty - 1) / 2);
			unsigned b = (d->dirty_idx + n - 1) % d->nr_buckets;

			target = max_t(u64, target, d->bucket_seq[b]);
		}
	}
	return min_t(u64, target, j->cur_seq);
}

/*
 * True when a flush entry recording the current last_seq would free a
 * bucket on a member short of space.
 */
static bool journal_flush_frees_space(struct tfs_journal *j)
{
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		if (!d->writable || d->nr_dirty < 2)
			continue;
		if ((j->cur_entry_error == TFS_JOURNAL_CUR_journal_full || journal_dev_low(j, d)) &&
		    d->bucket_seq[d->dirty_idx] < j->last_seq &&
		    d->bucket_seq[d->dirty_idx] >= j->last_seq_ondisk)
			return true;
	}
	return false;
}

static void journal_reclaim_locked(struct tfs_journal *j)
{
	u64 target = journal_reclaim_target(j);

	j->reclaim_runs++;
	for (u64 seq = j->last_seq; seq <= target && !j->stopping;) {
		struct tfs_journal_entry_pin_list *pl = journal_seq_pins(j, seq);
		struct tfs_journal_entry_pin *pin;
		int ret;

		if (seq < j->last_seq) {
			seq = j->last_seq;
			continue;
		}
		if (jlist_empty(&pl->list)) {
			seq++;
			continue;
		}
		pin = container_of(pl->list.next, struct tfs_journal_entry_pin, list);
		/* Only its owner can release a pin without a flush callback. */
		if (!pin->flush)
			break;
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
			j->pin_flush_errors++;
			j->pin_flush_err = ret;
			break;
		}
		j->pins_flushed++;
		if (still)
			break; /* claimed success but kept the pin: back off */
	}
	tfs_journal_reclaim_fast_locked(j);
	if (j->pin_flush_target && j->last_seq > j->pin_flush_target)
		j->pin_flush_target = 0;
	if (!j->halted && journal_flush_frees_space(j))
		tfs_journal_want_flush_locked(j, j->cur_seq);
	pthread_cond_broadcast(&j->wait);
}

void *tfs_journal_reclaim_thread(void *arg)
{
	struct tfs_journal *j = arg;

	pthread_mutex_lock(&j->lock);
	while (!j->stopping) {
		if (!j->reclaim_kicked) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 50 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
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
			tfs_journal_want_flush_locked(j, j->cur_seq);
		j->pin_flush_target = max_t(u64, j->pin_flush_target, seq);
		j->reclaim_kicked = true;
		pthread_cond_signal(&j->reclaim_wait);
		pthread_cond_wait(&j->wait, &j->lock);
	}
	tfs_journal_unlock(j);
	return ret;
}
