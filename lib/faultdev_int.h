/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULTDEV_INT_H
#define TFS_LIB_FAULTDEV_INT_H

/*
 * The fault device's insides, shared by the files that implement it and
 * by nothing else (callers use lib/faultdev.h):
 *
 *	lib/faultdev.c		the device: settings, rules, the worker that
 *				runs every op, completion, close
 *	lib/faultdev_crash.c	the volatile-cache log and the crash image
 *	lib/fault_trace.c	the trace: recording, reading, replay, files
 *	lib/fault_registry.c	the "dev" entries tfs_bdev_open() applies
 *	lib/fault_rule.c	rules as spec words
 *
 * Locking.  d->lock guards every field of struct fault_dev that more than
 * the worker touches.  Only the worker thread runs ops, so only it changes
 * the log (under the lock, since others read it) and only it reads the log
 * without the lock.  Trace entries are filled privately and published
 * complete (faultdev_trace_publish()); a published entry never changes.
 */

#include <pthread.h>
#include <stdbool.h>

#include "lib/fault_point.h"
#include "lib/faultdev.h"
#include "lib/types.h"

/*
 * A completed write not yet durable: the volatile cache, in execution order
 * (which the undo chain of `old` needs); `acked` gives the completion order
 * the power-cut policies follow.
 */
struct log_entry {
	u64 offset, len;
	void *old;    /* the lower's contents before */
	void *new;    /* what landed; NULL: zeroes */
	bool durable; /* FUA: survives any power cut */
	u64 write_index;
	u64 op_index; /* the op's index: ascending along the log */
	u64 acked;    /* when its end_io was delivered (d->acks); 0: not yet */
};

struct fault_dev {
	struct tfs_bdev bdev;
	struct tfs_bdev *lower;
	bool own_lower;

	pthread_mutex_t lock;
	pthread_cond_t wake; /* the worker: work, unpause, drain, stop */
	pthread_cond_t idle; /* waiters: in_flight dropped */
	struct tfs_bio *queue, **queue_tail;
	unsigned in_flight; /* submitted, end_io not yet returned */
	unsigned draining;
	bool paused, stop;
	pthread_t thread;
	bool thread_started;

	u64 seed, rng;
	unsigned sector;
	bool trace_on;
	char *trace_file; /* saved there at close */

	struct rule_state *rules;
	unsigned nr_rules;
	u64 nr_injected;

	u64 op_index, write_index, completions;
	u64 acks;	/* end_io deliveries of logged writes, for log_entry.acked */
	int frozen_err; /* 0, or vanished / powercut */
	unsigned frozen_printed;

	struct log_entry *log;
	unsigned nr_log, log_size;

	struct tfs_fault_trace_entry **trace;
	unsigned nr_trace, trace_size;

	struct held *held;
	unsigned nr_held, held_size;

	/* The last power cut. */
	struct tfs_faultdev_crash crash;
	bool *crash_kept, *crash_torn_sectors;
	u64 *crash_write_index;
};

/* The fault device of bdev (which must be one: tfs_bdev_is_faultdev()). */
static inline struct fault_dev *to_fd(struct tfs_bdev *bdev)
{
	return bdev->private;
}

/*
 * The value of expr, read under d->lock: what the getters of fields the
 * worker changes return (a snapshot: it may change once the lock is gone).
 */
#define fd_locked_read(d, expr)                              \
	({                                                   \
		pthread_mutex_lock(&(d)->lock);              \
		__typeof__(expr) fd_locked_read_v_ = (expr); \
		pthread_mutex_unlock(&(d)->lock);            \
		fd_locked_read_v_;                           \
	})

/*
 * Makes room for element nr of the array *p of *size elements of elem
 * bytes, doubling it (from 16).  False (the array untouched) when it cannot.
 */
bool faultdev_grow(void **p, unsigned *size, unsigned nr, size_t elem);

/* ---- sectors ---- */

/*
 * The sector is the unit of atomicity, counted from the device's start, not
 * from a bio's: a bio is cut into pieces at aligned sector boundaries,
 * [round_down(off), round_up(off + len)) clipped to the bio, and every fault
 * (tear, short, a torn power cut) keeps or loses whole pieces, so no aligned
 * sector ever holds part of a write.
 */
static inline unsigned nr_pieces(u64 off, u64 len, unsigned sector)
{
	return (unsigned)((round_up(off + len, sector) - round_down(off, sector)) / sector);
}

/* Piece s of [off, off + len), as [*start, *end) relative to off. */
static inline void piece(u64 off, u64 len, unsigned sector, unsigned s, u64 *start, u64 *end)
{
	u64 base = round_down(off, sector) + (u64)s * sector;

	*start = max_t(u64, base, off) - off;
	*end = min_t(u64, base + sector, off + len) - off;
}

/* ---- the volatile cache and the crash image (lib/faultdev_crash.c) ---- */

/* Empties the log, freeing its data; the caller holds d->lock or is closing. */
void faultdev_log_clear(struct fault_dev *d);
/* The same, taking d->lock (a flush made every logged write durable). */
void faultdev_log_clear_locked(struct fault_dev *d);
/*
 * Appends an entry owning old and new; -ENOMEM (nothing taken) if the log
 * cannot grow, so the caller refuses the write rather than let it count as
 * durable.
 */
int faultdev_log_add(struct fault_dev *d, u64 offset, u64 len, void *old, void *new, bool durable,
		     u64 write_index, u64 op_index);
/* Locked.  The logged write of op index (if still in the cache) was acknowledged. */
void faultdev_log_ack(struct fault_dev *d, u64 index);
/*
 * Worker only.  Rewrites the lower device to the crash image the policy
 * chooses from the log (keep: writes kept for prefix; 0: seeded), records
 * what it kept for tfs_faultdev_crash_info(), empties the log and freezes
 * the device (-TFS_ERR_bdev_powercut), even when writing the image failed;
 * returns that failure (printed).
 */
int faultdev_build_crash_image(struct fault_dev *d, enum tfs_powercut_policy policy, u64 keep);

/* ---- recording the trace (lib/fault_trace.c) ---- */

/*
 * A new private entry (rule -1, stamped now), or NULL when tracing is off
 * or memory is short: the other trace calls take NULL and do nothing.
 */
struct tfs_fault_trace_entry *faultdev_trace_new(struct fault_dev *d);
/* Records that [offset, offset + len) reached the lower with data (NULL: zeroes). */
void faultdev_trace_piece(struct tfs_fault_trace_entry *e, u64 offset, u64 len, const void *data);
/* Appends e to d's trace, after which it never changes (or frees it, out of memory). */
void faultdev_trace_publish(struct fault_dev *d, struct tfs_fault_trace_entry *e);
/* Frees an entry from faultdev_trace_new(). */
void faultdev_trace_entry_free(struct tfs_fault_trace_entry *e);

#endif /* TFS_LIB_FAULTDEV_INT_H */
