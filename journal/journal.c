// SPDX-License-Identifier: GPL-2.0
/*
 * The journal's core: options and lifetime, the current entry's state
 * machine, reservations, flush_seq, halt, and journal_to_text.
 */
#include "journal/journal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "journal/journal_internal.h"
#include "lib/errcode.h"
#include "lib/trace.h"
#include "lib/printbuf.h"

const char *const tfs_journal_cur_err_names[] = {
#define x(n) #n,
	TFS_JOURNAL_CUR_ERRS(x)
#undef x
		NULL
};

const char *const tfs_journal_space_class_names[] = {
#define x(n) #n,
	TFS_JOURNAL_SPACE_CLASSES(x)
#undef x
		NULL
};

u64 tfs_journal_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void tfs_journal_opts_default(struct tfs_journal_opts *opts)
{
	*opts = (struct tfs_journal_opts){
		.metadata_replicas = 1,
		.metadata_replicas_required = 1,
		.block_size = 4096,
		.max_entry_size = 64 << 10,
		.pin_fifo_size = 1024,
		.write_delay_ms = 10,
		.flush_delay_ms = 1000,
		.reserved_pins = 4,
		.reserved_buckets = 1,
	};
}

static int journal_check_opts(const struct tfs_journal_dev *devs, unsigned nr,
			      const struct tfs_journal_opts *o, struct printbuf *err)
{
	if (!nr || nr > TFS_JOURNAL_MAX_DEVS) {
		prt_printf(err, "journal: %u devices (1..%u)", nr, TFS_JOURNAL_MAX_DEVS);
		return -TFS_ERR_invalid_argument;
	}
	if (!o->metadata_replicas || !o->metadata_replicas_required ||
	    o->metadata_replicas_required > o->metadata_replicas) {
		prt_printf(err, "journal: metadata_replicas %u, required %u", o->metadata_replicas,
			   o->metadata_replicas_required);
		return -TFS_ERR_invalid_option;
	}
	if (!o->block_size || !IS_POWER_OF_2(o->block_size) || !o->max_entry_size ||
	    o->max_entry_size % o->block_size || o->max_entry_size < 2 * o->block_size) {
		prt_printf(err, "journal: block size %u, max entry size %u", o->block_size,
			   o->max_entry_size);
		return -TFS_ERR_invalid_option;
	}
	if (!IS_POWER_OF_2(o->pin_fifo_size) ||
	    o->pin_fifo_size < 2 * TFS_JOURNAL_BUF_NR + o->reserved_pins) {
		prt_printf(err, "journal: pin fifo size %u (a power of 2 >= %u)", o->pin_fifo_size,
			   2 * TFS_JOURNAL_BUF_NR + o->reserved_pins);
		return -TFS_ERR_invalid_option;
	}
	for (unsigned i = 0; i < nr; i++) {
		const struct tfs_journal_dev *d = &devs[i];

		if (!d->bdev) {
			prt_printf(err, "journal: device %u has no bdev", d->dev_idx);
			return -TFS_ERR_invalid_argument;
		}
		if (o->block_size % d->bdev->logical_block_size || d->bucket_size % o->block_size ||
		    d->bucket_size < o->max_entry_size) {
			prt_printf(err,
				   "journal: device %u (%s): bucket size %u, block size %u "
				   "(device %u), max entry %u",
				   d->dev_idx, d->bdev->path, d->bucket_size, o->block_size,
				   d->bdev->logical_block_size, o->max_entry_size);
			return -TFS_ERR_invalid_option;
		}
		if (d->nr_buckets < o->reserved_buckets + 2) {
			prt_printf(err, "journal: device %u (%s): %u journal buckets (need %u)",
				   d->dev_idx, d->bdev->path, d->nr_buckets,
				   o->reserved_buckets + 2);
			return -TFS_ERR_invalid_option;
		}
		for (unsigned b = 0; b < d->nr_buckets; b++)
			if ((d->buckets[b] + 1) * d->bucket_size > d->bdev->size) {
				prt_printf(err,
					   "journal: device %u (%s): bucket %llu past the end "
					   "(%llu bytes)",
					   d->dev_idx, d->bdev->path,
					   (unsigned long long)d->buckets[b],
					   (unsigned long long)d->bdev->size);
				return -TFS_ERR_invalid_option;
			}
	}
	return 0;
}

static int journal_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t a;
	int ret;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	ret = -pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
	return ret;
}

int tfs_journal_init(struct tfs_journal **ret, const struct tfs_journal_dev *devs, unsigned nr,
		     const struct tfs_journal_opts *opts, struct printbuf *err)
{
	struct tfs_journal *j;
	size_t align = 4096;
	int r;

	*ret = NULL;
	r = journal_check_opts(devs, nr, opts, err);
	if (r)
		return r;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->opts = *opts;
	j->magic = tfs_jset_magic(opts->uuid);
	j->nr_devs = nr;
	pthread_mutex_init(&j->lock, NULL);
	r = journal_cond_init(&j->wait) ?: journal_cond_init(&j->write_wait)
						  ?: journal_cond_init(&j->reclaim_wait);
	if (r)
		goto err;

	for (unsigned i = 0; i < nr; i++) {
		struct tfs_journal_device *d = &j->devs[i];

		d->bdev = devs[i].bdev;
		d->dev_idx = devs[i].dev_idx;
		d->bucket_size = devs[i].bucket_size;
		d->nr_buckets = devs[i].nr_buckets;
		d->writable = devs[i].writable;
		d->nr_dirty = 1;
		d->buckets = calloc(d->nr_buckets, sizeof(u64));
		d->bucket_seq = calloc(d->nr_buckets, sizeof(u64));
		if (!d->buckets || !d->bucket_seq) {
			r = -ENOMEM;
			goto err;
		}
		memcpy(d->buckets, devs[i].buckets, d->nr_buckets * sizeof(u64));
		if (d->bdev->logical_block_size > align)
			align = d->bdev->logical_block_size;
	}

	for (unsigned i = 0; i < TFS_JOURNAL_BUF_NR; i++) {
		void *p;

		j->buf[i].j = j;
		/*
		 * Not aligned_alloc(): C11 wants its size a multiple of the
		 * alignment, and max_entry_size need only be two blocks.
		 */
		if (posix_memalign(&p, align, opts->max_entry_size)) {
			r = -ENOMEM;
			goto err;
		}
		j->buf[i].data = p;
	}
	r = tfs_journal_pins_init(j);
	if (r)
		goto err;
	j->pending_devs = calloc(TFS_JOURNAL_PENDING_NR, sizeof(*j->pending_devs));
	if (!j->pending_devs) {
		r = -ENOMEM;
		goto err;
	}
	j->last_seq = 1;
	*ret = j;
	return 0;
err:
	prt_printf(err, "journal: init: %s", tfs_err_str(r));
	tfs_journal_exit(j);
	return r;
}

int tfs_journal_start(struct tfs_journal *j, const struct tfs_journal_read *r)
{
	int ret;

	if (r && r->max_seq) {
		/*
		 * New seqs follow everything seen, so an untrusted entry left on
		 * disk can never be mistaken for a new one; the blacklist in our
		 * entries keeps it from being replayed until reclaim frees it.
		 * Only what the read trusted is durable: seqs up to its newest
		 * flush entry, outside every blacklist range.
		 */
		j->cur_seq = j->seq_done = j->seq_allocated = j->start_seq = r->max_seq;
		j->seq_ondisk = j->flushed_seq_ondisk = j->trusted_seq = r->newest_seq;
		/*
		 * What was read is settled -- unless replay ends at a post-flush
		 * entry it checked, or at the entry before one it dropped (which
		 * may itself be post-flush): only a durable flush entry after it
		 * stops the next replay from checking its window again, against
		 * space this run may reuse.  The opener writes one first
		 * (tfs_journal_flush()) when settled_seq_ondisk < newest_seq.
		 */
		j->settled_seq_ondisk = r->post_flush_verified || r->post_flush_dropped
						? r->prev_flush_seq
						: r->newest_seq;
		j->last_seq = r->max_seq + 1;
		j->last_seq_ondisk = r->last_seq;
		if (r->nr_blacklist) {
			j->blacklist = calloc(r->nr_blacklist, sizeof(*j->blacklist));
			if (!j->blacklist)
				return -ENOMEM;
			memcpy(j->blacklist, r->blacklist, r->nr_blacklist * sizeof(*j->blacklist));
			j->nr_blacklist = r->nr_blacklist;
		}
		/*
		 * What replay handed out stays pinned (one reference per seq)
		 * until tfs_journal_replay_done(): a crash before the replayed
		 * updates are written back replays them again.
		 */
		if (r->newest_seq && r->last_seq && r->last_seq <= r->newest_seq) {
			if (r->max_seq - r->last_seq + 1 + j->opts.reserved_pins >
			    j->opts.pin_fifo_size) {
				fprintf(stderr,
					"journal: seqs %llu..%llu to keep do not fit a pin fifo of %u\n",
					(unsigned long long)r->last_seq,
					(unsigned long long)r->max_seq, j->opts.pin_fifo_size);
				return -TFS_ERR_journal_pin_full;
			}
			j->last_seq = r->last_seq;
			for (u64 s = r->last_seq; s <= r->max_seq; s++) {
				struct tfs_journal_entry_pin_list *pl = journal_seq_pins(j, s);

				pl->count = s <= r->newest_seq;
			}
			j->replay_pinned_end = r->newest_seq;
			tfs_journal_reclaim_fast_locked(j);
		}
		for (unsigned i = 0; i < j->nr_devs; i++) {
			struct tfs_journal_device *d = &j->devs[i];

			for (unsigned k = 0; k < r->nr_devs; k++) {
				const struct tfs_journal_read_dev *rd = &r->devs[k];

				if (rd->dev_idx != d->dev_idx || rd->nr_buckets != d->nr_buckets)
					continue;
				memcpy(d->bucket_seq, rd->bucket_seq, d->nr_buckets * sizeof(u64));
				d->cur_idx = rd->cur_idx;
				d->cur_offset = rd->cur_offset;
				/*
				 * Buckets replay still needs are the ones before cur_idx
				 * (ring order) holding seqs >= last_seq.  A crash can
				 * leave holes among them (a lost NO_FLUSH write, an
				 * empty bucket), so never stop at the first one: keep
				 * everything from the oldest needed bucket to cur_idx.
				 */
				d->nr_dirty = 1;
				for (unsigned n = 1; n < d->nr_buckets; n++) {
					unsigned b =
						(d->cur_idx + d->nr_buckets - n) % d->nr_buckets;

					if (d->bucket_seq[b] && d->bucket_seq[b] >= r->last_seq)
						d->nr_dirty = n + 1;
				}
				d->dirty_idx = (d->cur_idx + d->nr_buckets - (d->nr_dirty - 1)) %
					       d->nr_buckets;
			}
		}
		/*
		 * What was read may still sit only in a volatile cache (the last
		 * run can have died with writes in flight, its flush entry among
		 * them), and the new flush entries stand on it: make it durable
		 * before anything new is written.  A member whose flush fails
		 * takes no journal writes, as after a failed write.
		 */
		for (unsigned i = 0; i < j->nr_devs; i++) {
			struct tfs_journal_device *d = &j->devs[i];
			/* Reported here, in the journal's terms (QUIET). */
			struct tfs_bio bio = {
				.bdev = d->bdev,
				.op = TFS_OP_flush,
				.flags = TFS_BIO_QUIET,
				.tag = TFS_TAG_journal,
			};
			int f = tfs_bio_submit_wait(&bio);

			d->nr_flushes++;
			if (f) {
				d->nr_flush_errors++;
				if (d->writable)
					fprintf(stderr,
						"journal: flush of dev %u (%s) at start failed: %s; "
						"no journal writes go to it\n",
						d->dev_idx, d->bdev->path, tfs_err_str(f));
				d->writable = false;
				d->unflushed = true;
			}
		}
	}
	j->last_flush_ns = tfs_journal_now_ns();

	ret = -pthread_create(&j->write_thread, NULL, tfs_journal_write_thread, j);
	if (ret)
		return ret;
	ret = -pthread_create(&j->reclaim_thread, NULL, tfs_journal_reclaim_thread, j);
	if (ret) {
		pthread_mutex_lock(&j->lock);
		j->stopping = true;
		tfs_journal_write_kick_locked(j);
		pthread_mutex_unlock(&j->lock);
		pthread_join(j->write_thread, NULL);
		return ret;
	}
	j->threads_started = true;
	return 0;
}

void tfs_journal_replay_done(struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	for (u64 s = j->last_seq; s <= j->replay_pinned_end; s++)
		journal_seq_pins(j, s)->count--;
	j->replay_pinned_end = 0;
	tfs_journal_reclaim_fast_locked(j);
	pthread_cond_signal(&j->reclaim_wait);
	pthread_mutex_unlock(&j->lock);
}

int tfs_journal_stop(struct tfs_journal *j)
{
	int ret = 0;

	if (!j->threads_started)
		return 0;

	pthread_mutex_lock(&j->lock);
	bool need_flush = j->cur_seq && !j->halted && j->flushed_seq_ondisk < j->cur_seq;
	/* The last entry of a run needs no checking at the next start. */
	j->stop_flush = true;
	pthread_mutex_unlock(&j->lock);
	if (need_flush)
		ret = tfs_journal_flush_seq(j, tfs_journal_cur_seq(j));

	pthread_mutex_lock(&j->lock);
	/*
	 * Whatever is in flight finishes before we go; what cannot be written
	 * (too few writable members) is cancelled, and so is everything after
	 * it, so no entry lands on disk after a missing one.
	 */
	j->draining = true;
	tfs_journal_write_kick_locked(j);
	while (j->seq_done < j->cur_seq || j->nr_in_endio) {
		if (j->cur_open && !j->buf[j->cur_seq % TFS_JOURNAL_BUF_NR].nr_res)
			tfs_journal_entry_close_locked(j);
		tfs_journal_write_kick_locked(j);
		pthread_cond_wait(&j->wait, &j->lock);
	}
	j->stopping = true;
	tfs_journal_write_kick_locked(j);
	pthread_cond_broadcast(&j->reclaim_wait);
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->write_thread, NULL);
	pthread_join(j->reclaim_thread, NULL);
	j->threads_started = false;
	return ret ?: tfs_journal_error(j);
}

void tfs_journal_exit(struct tfs_journal *j)
{
	if (!j)
		return;
	tfs_journal_stop(j);
	for (unsigned i = 0; i < TFS_JOURNAL_BUF_NR; i++)
		free(j->buf[i].data);
	for (unsigned i = 0; i < j->nr_devs; i++) {
		free(j->devs[i].buckets);
		free(j->devs[i].bucket_seq);
	}
	free(j->pins);
	free(j->pending_devs);
	free(j->blacklist);
	pthread_cond_destroy(&j->wait);
	pthread_cond_destroy(&j->write_wait);
	pthread_cond_destroy(&j->reclaim_wait);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

/* --- the current entry --- */

unsigned tfs_journal_nr_writable(struct tfs_journal *j)
{
	unsigned n = 0;

	for (unsigned i = 0; i < j->nr_devs; i++)
		n += j->devs[i].writable;
	return n;
}

static u32 journal_cap_u64s(u32 bytes)
{
	u32 fixed = sizeof(struct jset) + 8 * JOURNAL_ENTRY_RESERVED_U64S;

	return bytes > fixed ? (bytes - fixed) / 8 : 0;
}

/*
 * Sets the open entry's room from the space there is now: u64s_max for
 * RESERVED reservations, u64s_normal for the others.  Never below what is
 * handed out already.
 */
static void journal_entry_set_room(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	u32 res = journal_cap_u64s(tfs_journal_entry_capacity(j, TFS_JOURNAL_SPACE_reserved, 0));
	u32 nor = journal_cap_u64s(tfs_journal_entry_capacity(j, TFS_JOURNAL_SPACE_normal, 0));

	b->u64s_max = max_t(u32, b->u64s_max, res);
	nor = min_t(u32, nor, b->u64s_max);
	b->u64s_normal = max_t(u32, b->u64s_normal, nor);
}

enum tfs_journal_cur_err tfs_journal_entry_open_locked(struct tfs_journal *j,
						       enum tfs_journal_space_class class,
						       u32 min_bytes, int *code)
{
	u64 seq = j->cur_seq + 1;
	struct tfs_journal_buf *b = journal_seq_buf(j, seq);
	/*
	 * Pin fifo slots: normal entries leave reserved_pins, reserved ones
	 * the last slot, for the flush or progress entry that lets pins go.
	 */
	unsigned pin_limit =
		j->opts.pin_fifo_size - (class == TFS_JOURNAL_SPACE_normal ? j->opts.reserved_pins
					 : class == TFS_JOURNAL_SPACE_reserved ? 1
									       : 0);

	if (j->cur_open)
		return TFS_JOURNAL_CUR_ok;
	if (j->blocked) {
		*code = -TFS_ERR_journal_blocked;
		return TFS_JOURNAL_CUR_blocked;
	}
	/* An error, not a wait: first, so a full pipeline does not hide it. */
	if (tfs_journal_nr_writable(j) < j->opts.metadata_replicas_required) {
		*code = -TFS_ERR_insufficient_devices;
		return TFS_JOURNAL_CUR_insufficient_devices;
	}
	/*
	 * The buffer for seq still holds an entry in flight; or too many
	 * entries since the newest durable flush entry (one on its way).
	 */
	if (b->state != TFS_JBUF_FREE || seq - journal_durable_base(j) >= TFS_JOURNAL_PENDING_NR) {
		*code = -TFS_ERR_journal_max_in_flight;
		return TFS_JOURNAL_CUR_blocked;
	}
	/* The fifo holds last_seq .. seq after this open. */
	if (seq - j->last_seq + 1 > pin_limit) {
		*code = -TFS_ERR_journal_pin_full;
		return TFS_JOURNAL_CUR_journal_pin_full;
	}
	/* Never degrade replication for lack of space: wait for reclaim. */
	u32 cap = tfs_journal_entry_capacity(j, class, j->last_seq);

	if (cap < min_bytes) {
		*code = -TFS_ERR_journal_full;
		return TFS_JOURNAL_CUR_journal_full;
	}

	/* Not zeroed here (a sync commit opens an entry each time): each
	 * reservation is zeroed when handed out, the padding when written. */
	b->state = TFS_JBUF_OPEN;
	b->seq = seq;
	b->last_seq = 0;
	b->u64s_used = 0;
	b->u64s_max = b->u64s_normal = 0;
	b->space_class = class;
	/* Empty entries (flush, progress) close at once and take no reservations. */
	if (class == TFS_JOURNAL_SPACE_normal || class == TFS_JOURNAL_SPACE_reserved)
		journal_entry_set_room(j, b);
	b->nr_res = 0;
	b->must_flush = false;
	b->cancelled = false;
	b->waiting_devs = false;
	b->flushes_done = false;
	b->lost_older = false;
	b->post_flush = b->post_flush_sent = false;
	b->opened_ns = tfs_journal_now_ns();
	b->bytes = 0;
	b->nr_devs = 0;
	b->nr_bios = b->bios_pending = 0;
	b->flush_devs = b->flush_ok = b->ok_devs = 0;
	b->write_ok = false;
	b->err = 0;
	b->nr_flush_waiters = b->nr_announced = 0;
	b->gather_until_ns = 0;
	b->submit_ns = 0;

	struct tfs_journal_entry_pin_list *pl = journal_seq_pins(j, seq);

	pl->list.next = pl->list.prev = &pl->list;
	pl->flushed.next = pl->flushed.prev = &pl->flushed;
	pl->count = 1; /* the entry itself, until written */

	j->cur_seq = seq;
	j->cur_open = true;
	j->cur_entry_error = TFS_JOURNAL_CUR_ok;
	j->cur_entry_code = 0;
	j->nr_entries++;
	j->nr_class_entries[class]++;
	/*
	 * The write thread closes it on age: wake it if it sleeps past that,
	 * or if it is awake (0): its timeout may predate this entry.
	 */
	if (!j->writer_wake_ns ||
	    j->writer_wake_ns > b->opened_ns + (u64)j->opts.write_delay_ms * 1000000)
		tfs_journal_write_kick_locked(j);
	return TFS_JOURNAL_CUR_ok;
}

void tfs_journal_entry_close_locked(struct tfs_journal *j)
{
	struct tfs_journal_buf *b;
	u64 now = tfs_journal_now_ns();

	if (!j->cur_open)
		return;
	b = journal_seq_buf(j, j->cur_seq);
	j->cur_open = false;
	/* Durability is bounded: some entry is a flush entry every flush_delay_ms. */
	if (now - j->last_flush_ns >= (u64)j->opts.flush_delay_ms * 1000000)
		b->must_flush = true;
	/* The members of every entry since the last durable flush are remembered: not too many. */
	if (b->seq - journal_durable_base(j) >= TFS_JOURNAL_PENDING_NR / 2)
		b->must_flush = true;
	if (b->must_flush) {
		j->last_flush_ns = now;
		j->nr_flush_entries++;
	} else {
		j->nr_noflush_entries++;
	}
	/*
	 * Within the normal room it leaves the normal floor; RESERVED
	 * reservations past it need the reserved one.
	 */
	if (b->space_class == TFS_JOURNAL_SPACE_normal ||
	    b->space_class == TFS_JOURNAL_SPACE_reserved)
		b->space_class = b->u64s_used > b->u64s_normal ? TFS_JOURNAL_SPACE_reserved
							       : TFS_JOURNAL_SPACE_normal;
	b->bytes = round_up(tfs_jset_bytes(b->u64s_used + JOURNAL_ENTRY_RESERVED_U64S),
			    j->opts.block_size);
	/*
	 * last_seq is taken now, not when the write is prepared: once the
	 * entry is closed, newer updates go to newer entries, and a pin moved
	 * out of an older seq into one of them would let a later last_seq skip
	 * that older seq although its only newer copy is not on disk yet.  The
	 * entry's own pin keeps last_seq <= seq.
	 */
	b->last_seq = j->last_seq;
	b->state = TFS_JBUF_CLOSED;
	/* Whoever closes it sees that it gets written (the caller, or the write thread). */
}

/* --- reservations --- */

static bool journal_on_reclaim_thread(struct tfs_journal *j)
{
	return tfs_journal_reclaim_current == j;
}

int tfs_journal_res_get(struct tfs_journal *j, struct tfs_journal_res *res, unsigned u64s,
			unsigned flags)
{
	bool reserved = flags & TFS_JOURNAL_RES_RESERVED;
	enum tfs_journal_space_class class =
		reserved ? TFS_JOURNAL_SPACE_reserved : TFS_JOURNAL_SPACE_normal;
	enum tfs_journal_cur_err last = TFS_JOURNAL_CUR_ok;
	int ret;

	memset(res, 0, sizeof(*res));
	pthread_mutex_lock(&j->lock);
	j->nr_res_get++;
	j->nr_res_reserved += reserved;
	if (!u64s || u64s > (j->opts.max_entry_size - sizeof(struct jset)) / 8 -
				     JOURNAL_ENTRY_RESERVED_U64S) {
		ret = u64s ? -TFS_ERR_journal_entry_too_big : -TFS_ERR_invalid_argument;
		goto out;
	}
	u32 min_bytes =
		round_up(tfs_jset_bytes(u64s + JOURNAL_ENTRY_RESERVED_U64S), j->opts.block_size);

	while (1) {
		enum tfs_journal_cur_err e;
		int code = 0;

		if (j->halted) {
			ret = -TFS_ERR_journal_halted;
			break;
		}
		if (j->cur_open) {
			struct tfs_journal_buf *b = journal_seq_buf(j, j->cur_seq);
			u32 *limit = reserved ? &b->u64s_max : &b->u64s_normal;

			/* Its room may have grown since it opened (space freed). */
			if (b->u64s_used + u64s > *limit)
				journal_entry_set_room(j, b);
			if (b->u64s_used + u64s <= *limit) {
				res->ref = true;
				res->idx = j->cur_seq % TFS_JOURNAL_BUF_NR;
				res->seq = j->cur_seq;
				res->offset = b->u64s_used;
				res->u64s = u64s;
				memset(b->data->_data + res->offset, 0, u64s * sizeof(u64));
				b->u64s_used += u64s;
				b->nr_res++;
				ret = 0;
				break;
			}
			if (b->u64s_used && b->u64s_used + u64s > b->u64s_max) {
				/* Closes on size; the next one gets what room there is. */
				tfs_journal_entry_close_locked(j);
				tfs_journal_write_kick_locked(j);
				e = tfs_journal_entry_open_locked(j, class, min_bytes, &code);
			} else {
				/*
				 * No room of our class: wait until space is freed.  The
				 * entry stays open -- closing it would only waste a
				 * block of the space RESERVED reservations are filling.
				 */
				e = TFS_JOURNAL_CUR_journal_full;
				code = -TFS_ERR_journal_full;
			}
		} else {
			e = tfs_journal_entry_open_locked(j, class, min_bytes, &code);
		}
		if (e == TFS_JOURNAL_CUR_ok)
			continue;
		j->cur_entry_error = e;
		j->cur_entry_code = code;
		if (e != last) {
			j->cur_err_counts[e]++;
			tfs_trace(journal_res_wait, (int)e, j->cur_seq);
		}
		last = e;
		/*
		 * On the reclaim thread (a pin flush callback) space and pin
		 * fifo waits are answered, not waited for: only reclaim ends
		 * them, and it is waiting for us.
		 */
		if (e == TFS_JOURNAL_CUR_insufficient_devices ||
		    (flags & TFS_JOURNAL_RES_NONBLOCK) ||
		    ((e == TFS_JOURNAL_CUR_journal_full || e == TFS_JOURNAL_CUR_journal_pin_full) &&
		     journal_on_reclaim_thread(j))) {
			ret = code;
			break;
		}
		/*
		 * A wait, never an error.  We sleep until something changes
		 * (a write completes, a pin goes, space is freed, the journal
		 * is unblocked, a member comes back) and are woken only then;
		 * reclaim is asked once per wake-up, never in a loop.
		 */
		j->nr_res_waits++;
		if (e == TFS_JOURNAL_CUR_journal_full || e == TFS_JOURNAL_CUR_journal_pin_full) {
			j->reclaim_kicked = true;
			pthread_cond_signal(&j->reclaim_wait);
		}
		if (e == TFS_JOURNAL_CUR_journal_full) {
			j->nr_space_waiters++;
			tfs_journal_progress_locked(j);
			pthread_cond_wait(&j->wait, &j->lock);
			j->nr_space_waiters--;
		} else {
			pthread_cond_wait(&j->wait, &j->lock);
		}
	}
out:
	pthread_mutex_unlock(&j->lock);
	return ret;
}

__le64 *tfs_journal_res_ptr(struct tfs_journal *j, struct tfs_journal_res *res)
{
	return j->buf[res->idx].data->_data + res->offset;
}

__le64 *tfs_journal_res_add_entry(struct tfs_journal *j, struct tfs_journal_res *res,
				  enum tfs_jset_entry_type type, unsigned btree_id, unsigned level,
				  unsigned payload_u64s)
{
	unsigned n = tfs_jset_entry_u64s(payload_u64s);
	struct jset_entry *e;

	if (!res->ref || n > res->u64s || payload_u64s > 0xffff)
		return NULL;
	e = (struct jset_entry *)tfs_journal_res_ptr(j, res);
	e->u64s = cpu_to_le16(payload_u64s);
	e->btree_id = btree_id;
	e->level = level;
	e->type = type;
	res->offset += n;
	res->u64s -= n;
	return e->_data;
}

void tfs_journal_res_put(struct tfs_journal *j, struct tfs_journal_res *res)
{
	struct tfs_journal_buf *b;

	if (!res->ref)
		return;
	pthread_mutex_lock(&j->lock);
	b = &j->buf[res->idx];
	if (!--b->nr_res && b->state == TFS_JBUF_CLOSED)
		tfs_journal_write_kick_locked(j);
	pthread_mutex_unlock(&j->lock);
	res->ref = false;
}

/* --- flush_seq --- */

/* Not durable, ever: seqs of the last run that its read did not trust. */
static bool journal_seq_untrusted(struct tfs_journal *j, u64 seq)
{
	if (seq > j->trusted_seq && seq <= j->start_seq)
		return true;
	for (unsigned i = 0; i < j->nr_blacklist; i++)
		if (seq >= j->blacklist[i].start && seq <= j->blacklist[i].end)
			return true;
	return false;
}

/* Bios in flight (writes, or a flush entry's member flushes) that may still complete. */
static bool journal_io_in_flight(struct tfs_journal *j)
{
	for (u64 s = j->seq_done + 1; s <= j->cur_seq; s++) {
		enum tfs_journal_buf_state st = journal_seq_buf(j, s)->state;

		if (st == TFS_JBUF_WRITING || st == TFS_JBUF_FLUSHING)
			return true;
	}
	return false;
}

/* 1: durable, < 0: will never be, 0: not yet. */
static int journal_flush_seq_check(struct tfs_journal *j, u64 seq)
{
	if (journal_seq_untrusted(j, seq))
		return -TFS_ERR_journal_seq_untrusted;
	if (seq <= j->flushed_seq_ondisk)
		return 1;
	if (j->err_seq && seq >= j->err_seq)
		return j->err ?: -TFS_ERR_journal_halted;
	if (j->halted) {
		/* Only a flush entry >= seq already being written can still help. */
		for (u64 s = max_t(u64, seq, j->seq_done + 1); s <= j->cur_seq; s++) {
			struct tfs_journal_buf *b = journal_seq_buf(j, s);

			if (b->must_flush && !b->cancelled &&
			    (b->state == TFS_JBUF_WRITING || b->state == TFS_JBUF_DONE))
				return 0;
		}
		return j->err ?: -TFS_ERR_journal_halted;
	}
	/*
	 * Too few writable members: nothing unwritten can be written (it waits
	 * for a member), so once no I/O is in flight no flush entry >= seq will
	 * be written and waiting would never end.  I/O in flight is waited for
	 * first: a write failing halts the journal and that error is the
	 * answer.  Not a journal error itself: nothing failed, and flush_seq
	 * works again once a member is writable.
	 */
	if (tfs_journal_nr_writable(j) < j->opts.metadata_replicas_required &&
	    !journal_io_in_flight(j))
		return -TFS_ERR_insufficient_devices;
	return 0;
}

bool tfs_journal_flush_in_flight_locked(struct tfs_journal *j, u64 seq)
{
	for (u64 s = j->seq_done + 1; s < seq; s++) {
		struct tfs_journal_buf *b = journal_seq_buf(j, s);

		if (b->must_flush && !b->cancelled && b->state != TFS_JBUF_OPEN)
			return true;
	}
	return false;
}

/* How long a flush entry waits for the committers the last one answered. */
static u64 journal_gather_window_ns(struct tfs_journal *j)
{
	/*
	 * Half a flush: the answered committers wake one after another (on
	 * few CPUs), and waiting that long costs less than a flush of its own.
	 */
	u64 w = max_t(u64, j->flush_lat_ns / 2, 20 * 1000);

	return min_t(u64, w, 1000 * 1000);
}

/*
 * Group commit.  An open flush entry stays open while an older flush entry
 * is in flight (it could not be written before that one completes anyway).
 * Once it could go, it waits -- at most journal_gather_window_ns() -- until
 * as many flush_seq callers have joined as the last flush entry answered:
 * committers that were just answered come straight back, and one device
 * flush then serves all of them instead of every other one.
 */
void tfs_journal_flush_entry_maybe_close_locked(struct tfs_journal *j, bool kick)
{
	struct tfs_journal_buf *b;
	u64 now;

	if (!j->cur_open)
		return;
	b = journal_seq_buf(j, j->cur_seq);
	if (!b->must_flush || tfs_journal_flush_in_flight_locked(j, b->seq))
		return;
	now = tfs_journal_now_ns();
	if (!b->gather_until_ns)
		b->gather_until_ns = now + journal_gather_window_ns(j);
	if (!b->nr_flush_waiters || b->nr_flush_waiters >= j->group_expect ||
	    now >= b->gather_until_ns) {
		tfs_journal_entry_close_locked(j);
		if (kick)
			tfs_journal_write_kick_locked(j);
	} else if (kick) {
		/* Closes it at gather_until_ns (flush_seq callers time it themselves). */
		tfs_journal_write_kick_locked(j);
	}
}

/*
 * Counts waiters on b.  A flush_seq_start() counts its waiter ahead
 * (announce); the flush_seq() it announced, joining b, takes that count
 * instead of adding one, so group commit expects the real number.
 */
static void journal_buf_add_waiters(struct tfs_journal_buf *b, unsigned waiters, bool announce)
{
	if (announce) {
		b->nr_announced += waiters;
	} else {
		unsigned n = min_t(unsigned, waiters, b->nr_announced);

		b->nr_announced -= n;
		waiters -= n;
	}
	b->nr_flush_waiters += waiters;
}

static bool journal_want_flush_locked(struct tfs_journal *j, u64 seq, unsigned waiters, bool kick,
				      bool announce)
{
	int code;

	if (j->halted)
		return true;
	/* A flush entry >= seq not yet done makes seq durable. */
	for (u64 s = max_t(u64, seq, j->seq_done + 1); s <= j->cur_seq; s++) {
		struct tfs_journal_buf *b = journal_seq_buf(j, s);

		if (b->state == TFS_JBUF_OPEN) {
			/* Not closed yet: it becomes a flush entry (group commit decides when). */
			b->must_flush = true;
			journal_buf_add_waiters(b, waiters, announce);
			tfs_journal_flush_entry_maybe_close_locked(j, kick);
			return true;
		}
		if (b->must_flush) {
			journal_buf_add_waiters(b, waiters, announce);
			return true;
		}
		if (b->state == TFS_JBUF_CLOSED) {
			/* Closed, not submitted yet: promote it to a flush entry. */
			b->must_flush = true;
			journal_buf_add_waiters(b, waiters, announce);
			j->nr_flush_entries++;
			j->nr_noflush_entries--;
			j->last_flush_ns = tfs_journal_now_ns();
			if (kick)
				tfs_journal_write_kick_locked(j);
			return true;
		}
	}
	/*
	 * Everything >= seq went out NO_FLUSH: an empty flush entry makes it
	 * durable (the flush class: it may use space normal entries leave).
	 */
	if (tfs_journal_entry_open_locked(j, TFS_JOURNAL_SPACE_flush, journal_min_entry_bytes(j),
					  &code) != TFS_JOURNAL_CUR_ok)
		return false;
	struct tfs_journal_buf *b = journal_seq_buf(j, j->cur_seq);

	b->must_flush = true;
	journal_buf_add_waiters(b, waiters, announce);
	tfs_journal_entry_close_locked(j);
	if (kick)
		tfs_journal_write_kick_locked(j);
	return true;
}

bool tfs_journal_want_flush_locked(struct tfs_journal *j, u64 seq, unsigned waiters, bool kick)
{
	return journal_want_flush_locked(j, seq, waiters, kick, false);
}

static struct tfs_journal_flush_waiter *journal_pop_resolved(struct tfs_journal *j)
{
	struct tfs_journal_flush_waiter *done = NULL, **p = &j->flush_waiters;

	while (*p) {
		struct tfs_journal_flush_waiter *w = *p;
		int r = journal_flush_seq_check(j, w->seq);

		if (!r && !j->halted)
			tfs_journal_want_flush_locked(j, w->seq, 0, true);
		if (r) {
			w->ret = r < 0 ? r : 0;
			*p = w->next;
			w->next = done;
			done = w;
		} else {
			p = &w->next;
		}
	}
	return done;
}

void tfs_journal_unlock(struct tfs_journal *j)
{
	struct tfs_journal_flush_waiter *done = j->flush_waiters ? journal_pop_resolved(j) : NULL;

	pthread_mutex_unlock(&j->lock);
	while (done) {
		struct tfs_journal_flush_waiter *w = done;

		done = w->next;
		w->next = NULL;
		w->fn(w);
	}
}

bool tfs_journal_flush_seq_async(struct tfs_journal *j, u64 seq, struct tfs_journal_flush_waiter *w)
{
	int r;

	w->seq = seq;
	w->next = NULL;
	pthread_mutex_lock(&j->lock);
	if (seq > j->cur_seq) {
		w->ret = -TFS_ERR_invalid_argument;
		pthread_mutex_unlock(&j->lock);
		return true;
	}
	r = seq ? journal_flush_seq_check(j, seq) : 1;
	if (r) {
		w->ret = r < 0 ? r : 0;
		pthread_mutex_unlock(&j->lock);
		return true;
	}
	if (!tfs_journal_want_flush_locked(j, seq, 1, true)) {
		/* No room for an empty flush entry now: reclaim; retried as things change. */
		j->reclaim_kicked = true;
		pthread_cond_signal(&j->reclaim_wait);
	}
	w->next = j->flush_waiters;
	j->flush_waiters = w;
	tfs_journal_write_kick_locked(j);
	pthread_mutex_unlock(&j->lock);
	return false;
}

void tfs_journal_flush_seq_start(struct tfs_journal *j, u64 seq)
{
	if (!seq)
		return;
	pthread_mutex_lock(&j->lock);
	if (seq <= j->cur_seq && !journal_flush_seq_check(j, seq) &&
	    journal_want_flush_locked(j, seq, 1, false, true)) {
		/* Not inline: this thread (write-behind) has other inodes' writes to do. */
		tfs_journal_write_ready_locked(j);
		/* Still gathering committers: the write thread closes it in time. */
		if (j->cur_open && journal_seq_buf(j, j->cur_seq)->must_flush)
			tfs_journal_write_kick_locked(j);
	}
	tfs_journal_unlock(j);
}

static int journal_flush_seq(struct tfs_journal *j, u64 seq, bool inline_io)
{
	int r;

	if (!seq)
		return 0;
	pthread_mutex_lock(&j->lock);
	if (seq > j->cur_seq) {
		pthread_mutex_unlock(&j->lock);
		return -TFS_ERR_invalid_argument;
	}
	unsigned waiter = 1; /* counted once, on the entry that answers us */
	u64 timed = 0;	     /* the open entry whose group-commit gathering we time */

	while (!(r = journal_flush_seq_check(j, seq))) {
		u64 open_seq = j->cur_open ? j->cur_seq : 0;
		unsigned open_waiters =
			open_seq ? journal_seq_buf(j, open_seq)->nr_flush_waiters : 0;

		if (!tfs_journal_want_flush_locked(j, seq, waiter, false)) {
			/*
			 * No room even for an empty flush entry: reclaim first.
			 * Woken when something changes, never in a loop.
			 */
			j->reclaim_kicked = true;
			pthread_cond_signal(&j->reclaim_wait);
			j->nr_space_waiters++;
			tfs_journal_progress_locked(j);
			pthread_cond_wait(&j->wait, &j->lock);
			j->nr_space_waiters--;
			continue;
		}
		/*
		 * We joined the open entry as its first waiter and it gathers
		 * more: we close it at its deadline (one timer is enough; the
		 * other waiters would only wake in the middle of its write).
		 * It answers us, so want_flush() closes it once the deadline
		 * passed.
		 */
		if (waiter && open_seq && !open_waiters && j->cur_open && j->cur_seq == open_seq &&
		    journal_seq_buf(j, open_seq)->nr_flush_waiters == 1)
			timed = open_seq;
		waiter = 0;
		if (timed && j->cur_open && j->cur_seq == timed)
			tfs_journal_flush_entry_maybe_close_locked(j, false); /* when due */
		/* Our flush entry may be ready: write it from here, no hand-off. */
		if (inline_io)
			tfs_journal_write_ready_inline_locked(j);
		else
			tfs_journal_write_ready_locked(j);
		if ((r = journal_flush_seq_check(j, seq)))
			break;

		struct tfs_journal_buf *b = journal_seq_buf(j, j->cur_seq);

		/* Timed only while the deadline is ahead: never a loop of timeouts. */
		if (timed && j->cur_open && j->cur_seq == timed &&
		    b->gather_until_ns > tfs_journal_now_ns()) {
			struct timespec ts = { .tv_sec = b->gather_until_ns / 1000000000,
					       .tv_nsec = b->gather_until_ns % 1000000000 };

			pthread_cond_timedwait(&j->wait, &j->lock, &ts);
		} else {
			pthread_cond_wait(&j->wait, &j->lock);
		}
	}
	tfs_journal_unlock(j);
	return r < 0 ? r : 0;
}

int tfs_journal_flush_seq(struct tfs_journal *j, u64 seq)
{
	return journal_flush_seq(j, seq, false);
}

int tfs_journal_flush_seq_inline(struct tfs_journal *j, u64 seq)
{
	return journal_flush_seq(j, seq, true);
}

int tfs_journal_flush(struct tfs_journal *j)
{
	int ret = tfs_journal_flush_seq(j, tfs_journal_cur_seq(j));
	u64 target = 0;

	if (ret)
		return ret;
	/*
	 * Settle too: when the newest durable flush entry is a post-flush one,
	 * one more flush entry after it makes it (and the space its commits
	 * freed) trusted unconditionally.  Callers flush to get freed space
	 * back, which waits for that.
	 */
	pthread_mutex_lock(&j->lock);
	if (j->settled_seq_ondisk < j->flushed_seq_ondisk && !j->halted) {
		u64 want = j->flushed_seq_ondisk + 1;

		if (want <= j->cur_seq || tfs_journal_want_flush_locked(j, want, 0, true))
			target = j->cur_seq;
	}
	pthread_mutex_unlock(&j->lock);
	return target ? tfs_journal_flush_seq(j, target) : 0;
}

/* --- halt, block --- */

void tfs_journal_halt_locked(struct tfs_journal *j, int err)
{
	/* A halt never overwrites err_seq: the lowest failed seq stays. */
	if (!j->err_seq)
		j->err_seq = max_t(u64, j->cur_seq, 1);
	if (!j->err)
		j->err = err ?: -TFS_ERR_journal_halted;
	if (j->halted)
		return;
	j->halted = true;
	tfs_trace(journal_halt, j->err_seq, j->err);
	tfs_journal_entry_close_locked(j);
	tfs_journal_write_kick_locked(j);
	pthread_cond_broadcast(&j->wait);
}

void tfs_journal_halt(struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	tfs_journal_halt_locked(j, 0);
	tfs_journal_unlock(j);
}

void tfs_journal_block(struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	j->blocked++;
	tfs_journal_entry_close_locked(j);
	tfs_journal_write_kick_locked(j);
	pthread_mutex_unlock(&j->lock);
}

void tfs_journal_unblock(struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	if (j->blocked)
		j->blocked--;
	pthread_cond_broadcast(&j->wait);
	pthread_mutex_unlock(&j->lock);
}

void tfs_journal_dev_written(struct tfs_journal *j, unsigned dev_idx, u64 bytes)
{
	pthread_mutex_lock(&j->lock);
	for (unsigned i = 0; i < j->nr_devs; i++)
		if (j->devs[i].dev_idx == dev_idx) {
			j->devs[i].foreign_unflushed = true;
			j->devs[i].data_unflushed_bytes += bytes;
		}
	pthread_mutex_unlock(&j->lock);
}

int tfs_journal_dev_set_writable(struct tfs_journal *j, unsigned dev_idx, bool writable)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&j->lock);
	for (unsigned i = 0; i < j->nr_devs; i++)
		if (j->devs[i].dev_idx == dev_idx) {
			j->devs[i].writable = writable;
			ret = 0;
		}
	/*
	 * Entries get their members when they are written, from those
	 * writable then.  Going read-only closes the open entry anyway, so the
	 * next reservation meets the device check (insufficient_devices) at
	 * once instead of slipping into an entry that would have to wait for a
	 * member.  Coming back lets entries waiting for members go.
	 */
	if (!ret && !writable)
		tfs_journal_entry_close_locked(j);
	pthread_cond_broadcast(&j->wait);
	tfs_journal_write_kick_locked(j);
	tfs_journal_unlock(j);
	return ret;
}

#define JOURNAL_GETTER(name, expr)                    \
	u64 tfs_journal_##name(struct tfs_journal *j) \
	{                                             \
		u64 v;                                \
		pthread_mutex_lock(&j->lock);         \
		v = (expr);                           \
		pthread_mutex_unlock(&j->lock);       \
		return v;                             \
	}

JOURNAL_GETTER(cur_seq, j->cur_seq)
JOURNAL_GETTER(seq_ondisk, j->seq_ondisk)
JOURNAL_GETTER(flushed_seq_ondisk, j->flushed_seq_ondisk)
JOURNAL_GETTER(settled_seq_ondisk, j->settled_seq_ondisk)
JOURNAL_GETTER(last_seq_ondisk, j->last_seq_ondisk)
JOURNAL_GETTER(err_seq, j->err_seq)
JOURNAL_GETTER(last_seq, j->last_seq)

int tfs_journal_error(struct tfs_journal *j)
{
	int v;

	pthread_mutex_lock(&j->lock);
	v = j->err_seq ? j->err : 0;
	pthread_mutex_unlock(&j->lock);
	return v;
}

enum tfs_journal_cur_err tfs_journal_cur_entry_error(struct tfs_journal *j)
{
	enum tfs_journal_cur_err e;

	pthread_mutex_lock(&j->lock);
	e = j->cur_entry_error;
	pthread_mutex_unlock(&j->lock);
	return e;
}

u64 tfs_journal_cur_err_count(struct tfs_journal *j, enum tfs_journal_cur_err reason)
{
	u64 v;

	pthread_mutex_lock(&j->lock);
	v = reason < TFS_JOURNAL_CUR_NR ? j->cur_err_counts[reason] : 0;
	pthread_mutex_unlock(&j->lock);
	return v;
}

/* --- text --- */

void tfs_journal_to_text(struct printbuf *out, struct tfs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	printbuf_tabstop_push(out, 24);
	prt_printf(out, "cur seq:\t%llu%s\n", (unsigned long long)j->cur_seq,
		   j->cur_open ? " (open)" : "");
	prt_printf(out, "last_seq:\t%llu\n", (unsigned long long)j->last_seq);
	prt_printf(out, "seq_ondisk:\t%llu\n", (unsigned long long)j->seq_ondisk);
	prt_printf(out, "flushed_seq_ondisk:\t%llu\n", (unsigned long long)j->flushed_seq_ondisk);
	prt_printf(out, "settled_seq_ondisk:\t%llu\n", (unsigned long long)j->settled_seq_ondisk);
	prt_printf(out, "last_seq_ondisk:\t%llu\n", (unsigned long long)j->last_seq_ondisk);
	prt_printf(out, "err_seq:\t%llu", (unsigned long long)j->err_seq);
	if (j->err_seq)
		prt_printf(out, " (%s)", tfs_err_str(j->err));
	prt_newline(out);
	prt_printf(out, "halted:\t%s\n", j->halted ? "yes (read-only)" : "no");
	prt_printf(out, "blocked:\t%u\n", j->blocked);
	prt_printf(out, "current entry error:\t%s", tfs_journal_cur_err_names[j->cur_entry_error]);
	if (j->cur_entry_code)
		prt_printf(out, " (%s)", tfs_err_str(j->cur_entry_code));
	prt_newline(out);
	for (unsigned i = 1; i < TFS_JOURNAL_CUR_NR; i++)
		prt_printf(out, "  %s:\t%llu\n", tfs_journal_cur_err_names[i],
			   (unsigned long long)j->cur_err_counts[i]);
	prt_printf(out, "reservations:\t%llu (%llu reserved, %llu waited)\n",
		   (unsigned long long)j->nr_res_get, (unsigned long long)j->nr_res_reserved,
		   (unsigned long long)j->nr_res_waits);
	if (j->cur_open) {
		struct tfs_journal_buf *b = journal_seq_buf(j, j->cur_seq);

		prt_printf(out, "current entry:\t%u/%u u64s, %u reservations held\n", b->u64s_used,
			   b->u64s_max, b->nr_res);
	}
	prt_printf(out, "entries:\t%llu (%llu flush, %llu no_flush)\n",
		   (unsigned long long)j->nr_entries, (unsigned long long)j->nr_flush_entries,
		   (unsigned long long)j->nr_noflush_entries);
	prt_str(out, "  opened as:\t");
	for (unsigned i = 0; i < TFS_JOURNAL_SPACE_NR; i++)
		prt_printf(out, "%s%llu %s", i ? ", " : "",
			   (unsigned long long)j->nr_class_entries[i],
			   tfs_journal_space_class_names[i]);
	prt_newline(out);
	prt_printf(out, "  flushed members first:\t%llu\n",
		   (unsigned long long)j->nr_separate_flushes);
	prt_printf(out,
		   "  flush entries by kind:\t%llu post-flush (%llu written by their waiter), %llu "
		   "preflush, %llu fua only\n",
		   (unsigned long long)j->nr_postflush_entries,
		   (unsigned long long)j->nr_postflush_inline,
		   (unsigned long long)j->nr_preflush_entries,
		   (unsigned long long)j->nr_fua_only_entries);
	prt_printf(out, "  waited for members:\t%llu\n", (unsigned long long)j->nr_devs_waits);
	prt_printf(out, "flush entries:\t%llu us to write (average), %u committers per flush\n",
		   (unsigned long long)j->flush_lat_ns / 1000, j->group_expect);
	prt_printf(out, "in flight:\t%llu\n", (unsigned long long)(j->cur_seq - j->seq_done));
	printbuf_indent_add(out, 2);
	for (u64 s = j->seq_done + 1; s <= j->cur_seq; s++) {
		static const char *const states[] = { "free",	  "open",    "closed",
						      "flushing", "writing", "done" };
		struct tfs_journal_buf *b = journal_seq_buf(j, s);

		prt_printf(out,
			   "seq %llu: %s%s, %s, %s, %u u64s, %u reservations, %u/%u bios done\n",
			   (unsigned long long)s, states[b->state],
			   b->waiting_devs ? " (waiting for members)" : "",
			   b->must_flush ? "flush" : "no_flush",
			   tfs_journal_space_class_names[b->space_class], b->u64s_used, b->nr_res,
			   b->nr_bios - b->bios_pending, b->nr_bios);
	}
	printbuf_indent_sub(out, 2);
	prt_printf(out, "pin fifo:\t%llu/%u\n", (unsigned long long)(j->cur_seq + 1 - j->last_seq),
		   j->opts.pin_fifo_size);
	prt_printf(out, "reclaim:\t%llu runs, %llu pins flushed, %llu flush errors\n",
		   (unsigned long long)j->reclaim_runs, (unsigned long long)j->pins_flushed,
		   (unsigned long long)j->pin_flush_errors);
	for (unsigned i = 0; i < TFS_JOURNAL_PIN_FLUSH_ERR_NR; i++)
		prt_printf(out, "  flush error %s:\t%llu\n", tfs_journal_pin_flush_err_names[i],
			   (unsigned long long)j->pin_flush_err_counts[i]);
	prt_printf(out, "  runs without flushes:\t%llu backing off (now %u ms), %llu halted\n",
		   (unsigned long long)j->reclaim_backoff_runs, j->reclaim_backoff_ms,
		   (unsigned long long)j->reclaim_halted_runs);
	if (j->pin_flush_errors)
		prt_printf(out, "  last flush error:\t%s\n", tfs_err_str(j->pin_flush_err));
	prt_printf(out, "replicas:\t%u wanted, %u required\n", j->opts.metadata_replicas,
		   j->opts.metadata_replicas_required);
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[i];
		unsigned free_b = tfs_journal_dev_free_buckets(d);

		prt_printf(out, "dev %u (%s):\t%s, %u/%u buckets free (", d->dev_idx, d->bdev->path,
			   d->writable ? "rw" : "ro", free_b, d->nr_buckets);
		prt_units_u64(out, (u64)free_b * d->bucket_size + (d->bucket_size - d->cur_offset));
		prt_printf(
			out,
			"), ring index %u (bucket %llu) offset %u, %llu writes, %llu errors, "
			"%llu flushes (%llu preflush, %llu post-flush), %llu failed%s\n",
			d->cur_idx, (unsigned long long)d->buckets[d->cur_idx], d->cur_offset,
			(unsigned long long)d->nr_writes, (unsigned long long)d->nr_write_errors,
			(unsigned long long)(d->nr_flushes + d->nr_preflushes + d->nr_postflushes),
			(unsigned long long)d->nr_preflushes, (unsigned long long)d->nr_postflushes,
			(unsigned long long)d->nr_flush_errors, d->unflushed ? ", unflushed" : "");
	}
	printbuf_tabstop_pop(out);
	pthread_mutex_unlock(&j->lock);
}
