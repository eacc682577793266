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

/* Words kept back in every entry for the blacklist sub-entry. */
#define JOURNAL_ENTRY_RESERVED_U64S (1 + sizeof(struct jset_blacklist) / 8)

u64 tfs_journal_now_ns(void);

/* journal.c */
enum tfs_journal_cur_err tfs_journal_entry_open_locked(struct tfs_journal *j, bool reserved,
						       int *code);
void tfs_journal_entry_close_locked(struct tfs_journal *j);
void tfs_journal_halt_locked(struct tfs_journal *j, int err);
/* True when a flush entry older than seq is closed but not done. */
bool tfs_journal_flush_in_flight_locked(struct tfs_journal *j, u64 seq);
/* Makes sure some flush entry >= seq is or will be written; false: retry later. */
bool tfs_journal_want_flush_locked(struct tfs_journal *j, u64 seq);
/* Unlocks, then runs the async flush waiters that are now resolved. */
void tfs_journal_unlock(struct tfs_journal *j);

/* journal_reclaim.c */
int tfs_journal_pins_init(struct tfs_journal *j);
void tfs_journal_reclaim_fast_locked(struct tfs_journal *j);
void tfs_journal_space_update_locked(struct tfs_journal *j);
/* Space for an entry of bytes on d (RESERVED opens may use the reserve). */
bool tfs_journal_dev_has_space(struct tfs_journal *j, struct tfs_journal_device *d, u32 bytes,
			       bool reserved);
unsigned tfs_journal_dev_free_buckets(struct tfs_journal_device *d);
void *tfs_journal_reclaim_thread(void *arg);

/* journal_io.c */
void *tfs_journal_write_thread(void *arg);
/* Assigns disk space to a closing entry (in seq order). */
void tfs_journal_buf_alloc_space_locked(struct tfs_journal *j, struct tfs_journal_buf *b);

#endif /* TFS_JOURNAL_JOURNAL_INTERNAL_H */
