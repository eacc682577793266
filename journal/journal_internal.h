/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_JOURNAL_JOURNAL_INTERNAL_H
#define TFS_JOURNAL_JOURNAL_INTERNAL_H

/*
 * Shared between journal.c, journal_reclaim.c and journal_io.c; not for
 * users of the journal.  Functions named *_locked expect tfs_journal.lock.
 */

#include "journal/journal.h"

static inline struct tfs_journal_buf *journal_seq_buf(struct tfs_journal *j, u64 seq)
{
	return &j->buf[seq % TFS_JOURNAL_BUF_NR];
}

static inline struct tfs_journal_entry_pin_list *journal_seq_pins(struct tfs_journal *j, u64 seq)
{
	return &j->pins[seq & (j->opts.pin_fifo_size - 1)];
}

static inline u32 *journal_seq_pending_devs(struct tfs_journal *j, u64 seq)
{
	return &j->pending_devs[seq & (TFS_JOURNAL_PENDING_NR - 1)];
}

/* Seqs > this may not be durable yet: written since the newest durable flush entry. */
static inline u64 journal_durable_base(struct tfs_journal *j)
{
	return max_t(u64, j->flushed_seq_ondisk, j->start_seq);
}

/* Words kept back in every entry for the blacklist sub-entry. */
#define JOURNAL_ENTRY_RESERVED_U64S (1 + sizeof(struct jset_blacklist) / 8)

/* Bytes an empty entry takes on disk (a progress or flush-only entry). */
static inline u32 journal_min_entry_bytes(struct tfs_journal *j)
{
	return round_up(tfs_jset_bytes(JOURNAL_ENTRY_RESERVED_U64S), j->opts.block_size);
}

u64 tfs_journal_now_ns(void);

/*
 * Wakes the write thread.  Counted, so a wake-up that comes while it is
 * awake (submitting, the lock dropped) is not lost: it goes round again
 * instead of sleeping out a timeout computed before (an entry opened
 * meanwhile waited up to 50 ms).
 */
static inline void tfs_journal_write_kick_locked(struct tfs_journal *j)
{
	j->write_kicks++;
	pthread_cond_signal(&j->write_wait);
}

/* journal.c */
/*
 * Opens the next entry for the space class, with room for at least
 * min_bytes on disk; the reason when it cannot be opened now.
 */
enum tfs_journal_cur_err tfs_journal_entry_open_locked(struct tfs_journal *j,
						       enum tfs_journal_space_class class,
						       u32 min_bytes, int *code);
void tfs_journal_entry_close_locked(struct tfs_journal *j);
void tfs_journal_halt_locked(struct tfs_journal *j, int err);
unsigned tfs_journal_nr_writable(struct tfs_journal *j);
/* True when a flush entry older than seq is closed but not done. */
bool tfs_journal_flush_in_flight_locked(struct tfs_journal *j, u64 seq);
/*
 * Makes sure some flush entry >= seq is or will be written, counting
 * waiters flush_seq callers on it (group commit); false: no room for one
 * now (retry when something changes).  kick as below.
 */
bool tfs_journal_want_flush_locked(struct tfs_journal *j, u64 seq, unsigned waiters, bool kick);
/*
 * Group commit: closes the open flush entry once it may and should go.
 * kick: wake the write thread to write it (else the caller writes what is
 * ready itself, tfs_journal_write_ready_locked()).
 */
void tfs_journal_flush_entry_maybe_close_locked(struct tfs_journal *j, bool kick);
/* Unlocks, then runs the async flush waiters that are now resolved. */
void tfs_journal_unlock(struct tfs_journal *j);

/* journal_reclaim.c */
int tfs_journal_pins_init(struct tfs_journal *j);
void tfs_journal_reclaim_fast_locked(struct tfs_journal *j);
void tfs_journal_space_update_locked(struct tfs_journal *j);
unsigned tfs_journal_dev_free_buckets(struct tfs_journal_device *d);
/*
 * The largest entry (bytes) of class the journal can take now on enough
 * members (min(metadata_replicas, writable)), after the entries closed but
 * not yet given their place; 0 when none.  last_seq: what a progress entry
 * would record.
 */
u32 tfs_journal_entry_capacity(struct tfs_journal *j, enum tfs_journal_space_class class,
			       u64 last_seq);
/* Whether entry b (the next to be placed) fits on member d, leaving its class's floor. */
bool tfs_journal_dev_fits(struct tfs_journal *j, struct tfs_journal_device *d,
			  const struct tfs_journal_buf *b);
/*
 * Writes an entry recording the current last_seq when that would free a
 * bucket a member is short of, and no flush entry in flight does so already.
 */
void tfs_journal_progress_locked(struct tfs_journal *j);
void *tfs_journal_reclaim_thread(void *arg);
/* The journal whose reclaim thread this is (NULL on other threads). */
extern __thread struct tfs_journal *tfs_journal_reclaim_current;

/* journal_io.c */
void *tfs_journal_write_thread(void *arg);
/* Submits what is ready, in seq order (unlocks around submission). */
void tfs_journal_write_ready_locked(struct tfs_journal *j);
/*
 * As tfs_journal_write_ready_locked(), for a thread that holds no lock but
 * j's and waits for a flush entry anyway (flush_seq_inline()): a
 * post-flush entry it writes has its write and flush run in this thread,
 * completions included (tfs_bio_submit_inline()).  Through the device's
 * completion thread, each of the two woke that thread and the flush
 * went to an io_uring worker: three wake-ups on an fsync's path.
 */
void tfs_journal_write_ready_inline_locked(struct tfs_journal *j);

#endif /* TFS_JOURNAL_JOURNAL_INTERNAL_H */
