/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_JOURNAL_JOURNAL_H
#define TFS_JOURNAL_JOURNAL_H

/*
 * The journal: a totally ordered log of metadata updates, written as
 * checksummed entries (jsets, journal_format.h) to a ring of buckets on each
 * member device and replicated to metadata_replicas members.
 *
 * Invariants:
 *  - Every update belongs to exactly one entry, identified by its seq.  Seqs
 *    are handed out in order, one entry open at a time.
 *  - seq_ondisk, flushed_seq_ondisk and last_seq_ondisk advance only for
 *    writes that succeeded, and never past an unfinished or failed seq:
 *    writes may complete out of order (S+1 before S), seq_ondisk moves in
 *    seq order.  flushed_seq_ondisk <= seq_ondisk.
 *  - err_seq is the lowest seq whose write failed, or, when the journal was
 *    halted without a failure, the seq current at the halt.  A later failure
 *    of a higher seq and a halt never raise it.  Once set, flush_seq(s)
 *    fails for every s >= err_seq, forever; seqs that were durable before
 *    keep succeeding.
 *  - An entry's members are picked when it is written, from the members
 *    writable then (most free space first).  A write counts on a member only
 *    when its data (and its preflush) succeeded there; one that reaches
 *    metadata_replicas_required members is a success even if some member
 *    failed (a failed member stops taking journal writes).  Fewer halts the
 *    journal: it is read-only from then on, and says so once, naming the seq
 *    and the devices.  Fewer *writable* members than required (one set
 *    read-only, no I/O error) is not a failure: unwritten entries wait for
 *    a member to come back, and reservations and flush_seq answer
 *    insufficient_devices meanwhile.
 *  - A reservation that cannot proceed says exactly why (enum
 *    tfs_journal_cur_err): blocked, journal_full and journal_pin_full are
 *    waits (a blocking caller sleeps until reclaim or a write makes
 *    progress; it never sees them); insufficient_devices and a halted
 *    journal are errors (EROFS class).  Every reason has a counter.
 *  - Entries close when full, when older than write_delay_ms, or on demand
 *    (flush_seq).  An entry nobody waits on is written NO_FLUSH; one a flush
 *    waits on (or the first after flush_delay_ms) is a flush entry, and
 *    when none follows NO_FLUSH ones (the commits stopped) the write thread
 *    adds an empty one flush_delay_ms after the last.  A flush entry is
 *    written (FUA) only after every older entry completed *and is durable on
 *    some member* -- by a PREFLUSH on its own write when each member it goes
 *    to holds every older unflushed entry (no PREFLUSH on a member with
 *    nothing unflushed), else by flushing the members holding them first
 *    and writing only once those flushes completed.  So on disk a durable
 *    flush entry always has every older entry durable before it, whatever
 *    order the devices persist things in.  Concurrent flush_seq callers
 *    share one flush entry (group commit).
 *  - Liveness: journal space is handed out in classes (enum
 *    tfs_journal_space_class); the last block of each member is kept for
 *    the entry recording progress (a newer last_seq, freeing buckets) and
 *    the one before it for a flush entry making NO_FLUSH entries durable, so
 *    write-back of pinned objects and reuse of buckets never wait for space
 *    only they could free.  Waiters sleep until something changes (a write
 *    completes, a pin goes, space is freed) and are woken only then.
 *  - Replay (tfs_journal_read()) trusts entries up to the newest flush
 *    entry; NO_FLUSH entries after it were never durable in order and are
 *    blacklisted by the next run (struct jset_blacklist).  A restarted
 *    journal never calls an untrusted seq durable.
 *
 * The journal knows devices only as struct tfs_journal_dev descriptors; it
 * never reads the superblock (tools and fs/ build the descriptors).
 *
 * Locking: every function may be called from any thread.  Pin flush
 * callbacks and async flush callbacks run without the journal lock, from
 * the reclaim thread and the device completion thread respectively.
 */

#include <stdbool.h>

#include "journal/journal_types.h"

struct printbuf;

/* One member as the journal sees it. */
struct tfs_journal_dev {
	struct tfs_bdev *bdev;
	unsigned dev_idx;
	u32 bucket_size; /* bytes */
	const u64 *buckets;
	unsigned nr_buckets;
	bool writable;
};

enum tfs_journal_res_flags {
	/* Return the reason (an EAGAIN-class code) instead of waiting. */
	TFS_JOURNAL_RES_NONBLOCK = 1 << 0,
	/*
	 * May use the reserved space and pin fifo slots (reclaim's own updates,
	 * from pin flush callbacks).  What such callbacks journal while the
	 * journal is full comes out of opts.reserved_buckets; see
	 * tfs_journal_res_get() for what happens when that runs out.
	 */
	TFS_JOURNAL_RES_RESERVED = 1 << 1,
};

/* --- lifetime --- */

/* Defaults for every option (replicas 1/1, 4 KiB blocks, 64 KiB entries, ...). */
void tfs_journal_opts_default(struct tfs_journal_opts *opts);

/*
 * Allocates a journal over nr member descriptors (copied; the bdevs stay the
 * caller's).  Checks the options against the devices and says what is wrong
 * in err.  The journal is not running until tfs_journal_start().
 */
int tfs_journal_init(struct tfs_journal **ret, const struct tfs_journal_dev *devs, unsigned nr,
		     const struct tfs_journal_opts *opts, struct printbuf *err);

struct tfs_journal_read;

/*
 * Starts the write and reclaim threads.  With r (from tfs_journal_read() on
 * the same devices) the journal continues after what was read: new seqs
 * follow the highest seq seen, writes continue after the newest entry on each
 * member, buckets replay still needs stay dirty, and seqs that were not
 * trusted are blacklisted (flush_seq() of them fails with
 * -TFS_ERR_journal_seq_untrusted).  Every member is flushed first: what was
 * read may still sit in a volatile cache, and new flush entries stand on it
 * (a member whose flush fails takes no journal writes).  Without r the
 * journal is fresh (first seq 1).
 */
int tfs_journal_start(struct tfs_journal *j, const struct tfs_journal_read *r);

/*
 * Drops the references tfs_journal_start() took on every replayed seq (from
 * the read's last_seq to its newest flush entry).  Call it once the replayed
 * updates are pinned by their own objects (or written back); until then
 * reclaim cannot advance last_seq past them, so a crash replays them again.
 */
void tfs_journal_replay_done(struct tfs_journal *j);

/*
 * Writes out the open entry (as a flush entry), waits for every write, and
 * stops the threads.  Entries that cannot be written (fewer writable members
 * than required) are dropped, and so is every entry after them.  Returns
 * the journal error if there is one, else flush_seq()'s answer (e.g.
 * -TFS_ERR_insufficient_devices).
 */
int tfs_journal_stop(struct tfs_journal *j);

/* Stops the journal if running and frees it; NULL is fine. */
void tfs_journal_exit(struct tfs_journal *j);

/* --- reservations --- */

/*
 * Reserves u64s words in the current entry (opening one if needed).  On
 * success res->seq is the entry's seq.  Blocked, full and pin-full wait
 * (or, with TFS_JOURNAL_RES_NONBLOCK, return -TFS_ERR_journal_blocked /
 * journal_max_in_flight / journal_full / journal_pin_full); fewer writable
 * devices than required returns -TFS_ERR_insufficient_devices, a halted
 * journal -TFS_ERR_journal_halted (both EROFS class); more than an entry
 * holds returns -TFS_ERR_journal_entry_too_big.  An entry opens with the
 * room there is (at most max_entry_size), so a small reservation fits a
 * nearly full journal.  On the reclaim thread (in a pin flush callback)
 * journal_full and journal_pin_full are returned, never waited for: only
 * reclaim ends those waits.  A callback that journals should then write its
 * object back instead (or return the error; reclaim retries later).
 */
int tfs_journal_res_get(struct tfs_journal *j, struct tfs_journal_res *res, unsigned u64s,
			unsigned flags);

/* Where the reservation's words live (zeroed; fill them before res_put). */
__le64 *tfs_journal_res_ptr(struct tfs_journal *j, struct tfs_journal_res *res);

/*
 * Appends a sub-entry of payload_u64s words to the reservation (consuming
 * tfs_jset_entry_u64s(payload_u64s) of it) and returns its payload to fill.
 * Returns NULL when the reservation is too small.
 */
__le64 *tfs_journal_res_add_entry(struct tfs_journal *j, struct tfs_journal_res *res,
				  enum tfs_jset_entry_type type, unsigned btree_id, unsigned level,
				  unsigned payload_u64s);

/* Releases the reservation; the last one out of a closed entry lets it be written. */
void tfs_journal_res_put(struct tfs_journal *j, struct tfs_journal_res *res);

/* --- flushing --- */

/*
 * Waits until seq is durable (closing its entry, or writing a newer flush
 * entry, when needed).  Returns 0, or the journal error when err_seq is set
 * and err_seq <= seq, or when the journal halted before seq became durable.
 * With fewer writable members than metadata_replicas_required and no entry
 * >= seq left that could still be written as a flush entry, it returns
 * -TFS_ERR_insufficient_devices (EROFS class; not a journal error: a member
 * coming back makes it work again) instead of waiting forever.
 * seq 0 and seqs durable before an error always return 0.  A seq the last
 * run left untrusted (after its newest flush entry, or blacklisted) was
 * never durable: -TFS_ERR_journal_seq_untrusted (EIO class), always.
 */
int tfs_journal_flush_seq(struct tfs_journal *j, u64 seq);

/*
 * As tfs_journal_flush_seq(), for a caller holding no lock (an fsync): when
 * this thread writes a post-flush entry, its write and flush run in this
 * thread, completions included, instead of through the device's completion
 * thread (three wake-ups fewer on an fsync's path; journal_io.c).
 */
int tfs_journal_flush_seq_inline(struct tfs_journal *j, u64 seq);

struct tfs_journal_flush_waiter {
	u64 seq;
	int ret;
	void (*fn)(struct tfs_journal_flush_waiter *w); /* called once, with ret set */
	struct tfs_journal_flush_waiter *next;
};

/*
 * Starts making w->seq durable without waiting.  Returns true when the
 * answer is known now (w->ret set, fn never called), false when fn will be
 * called once with w->ret set (from another thread).
 */
bool tfs_journal_flush_seq_async(struct tfs_journal *j, u64 seq,
				 struct tfs_journal_flush_waiter *w);

/*
 * Starts making seq durable as flush_seq() would (its flush entry closed and,
 * when ready, written from this thread), without waiting: for a caller that
 * knows a flush_seq(seq) is coming from another thread (an fsync waiting for
 * this thread's write), so the entry's write does not wait for that thread
 * to wake.  It counts as that waiter (the entry may be a post-flush one).
 * Does nothing when seq is durable or cannot be flushed now.
 */
void tfs_journal_flush_seq_start(struct tfs_journal *j, u64 seq);

/* Flushes everything reserved so far (flush_seq of the newest seq). */
int tfs_journal_flush(struct tfs_journal *j);

/*
 * Halts the journal: nothing more is written, reservations fail with
 * -TFS_ERR_journal_halted.  Sets err_seq to the current seq only if unset.
 */
void tfs_journal_halt(struct tfs_journal *j);

/* Blocks new entries (reservations report "blocked") until unblocked. */
void tfs_journal_block(struct tfs_journal *j);
void tfs_journal_unblock(struct tfs_journal *j);

/*
 * Another writer (file data) completed a write of bytes on member dev_idx:
 * the next flush entry makes that member durable first (a PREFLUSH on the
 * entry's own write there, or a separate flush before the entry is written),
 * so a commit referring to the write is never durable before the write is --
 * or, for a post-flush entry (with post_flush_max_bytes), in the same flush,
 * which replay checks.  Call it after the write completed and before the
 * commit that refers to it.
 */
void tfs_journal_dev_written(struct tfs_journal *j, unsigned dev_idx, u64 bytes);

/*
 * Marks a member (by dev_idx) writable or not; -ENOENT if unknown.  Entries
 * not yet written go to the members writable when they are written.  Making
 * one read-only closes the open entry, so later reservations are checked
 * against the members left (insufficient_devices when too few, and entries
 * waiting for a member until one comes back).
 */
int tfs_journal_dev_set_writable(struct tfs_journal *j, unsigned dev_idx, bool writable);

/* Snapshot accessors (under the lock). */
u64 tfs_journal_cur_seq(struct tfs_journal *j);
u64 tfs_journal_seq_ondisk(struct tfs_journal *j);
u64 tfs_journal_flushed_seq_ondisk(struct tfs_journal *j);
/*
 * The newest durable flush entry that no replay can drop (struct
 * tfs_journal.settled_seq_ondisk): space freed by commits up to it may be
 * reused.  <= flushed_seq_ondisk.
 */
u64 tfs_journal_settled_seq_ondisk(struct tfs_journal *j);
u64 tfs_journal_last_seq_ondisk(struct tfs_journal *j);
u64 tfs_journal_err_seq(struct tfs_journal *j);
u64 tfs_journal_last_seq(struct tfs_journal *j);
/* The error flush_seq returns at or past err_seq; 0 if none. */
int tfs_journal_error(struct tfs_journal *j);
/* Why the current entry could not be opened last time (ok when open). */
enum tfs_journal_cur_err tfs_journal_cur_entry_error(struct tfs_journal *j);
/* How often reservations met reason. */
u64 tfs_journal_cur_err_count(struct tfs_journal *j, enum tfs_journal_cur_err reason);

/* --- pins (journal_reclaim.c) --- */

/* A pin starts zeroed or tfs_journal_pin_init()ed. */
void tfs_journal_pin_init(struct tfs_journal_entry_pin *pin);

/*
 * Pins seq (which must be >= last_seq and <= cur_seq: a held reservation's
 * seq always is; anything else aborts, a caller bug) until dropped: reclaim
 * will not advance last_seq past it, and calls flush when it wants the seq
 * freed.  A pin already pinning an older seq stays there.
 */
void tfs_journal_pin_add(struct tfs_journal *j, u64 seq, struct tfs_journal_entry_pin *pin,
			 tfs_journal_pin_flush_fn flush);

/* Moves pin to seq (newer than its current seq; an unused pin is added). */
void tfs_journal_pin_update(struct tfs_journal *j, u64 seq, struct tfs_journal_entry_pin *pin,
			    tfs_journal_pin_flush_fn flush);

/* Drops pin (no-op if unused). */
void tfs_journal_pin_drop(struct tfs_journal *j, struct tfs_journal_entry_pin *pin);

/* Whether pin holds a seq: a snapshot, safe without the journal lock (reclaim
 * may drop the pin right after). */
static inline bool tfs_journal_pin_active(const struct tfs_journal_entry_pin *pin)
{
	return __atomic_load_n(&pin->seq, __ATOMIC_ACQUIRE) != 0;
}

/*
 * Flushes every pin of seqs <= seq and waits until last_seq passes it and
 * that is durable.  Returns 0 or the first flush callback error / journal
 * error.  After a flush callback failed, reclaim calls none for a back-off
 * (10 ms, doubling per failure in a row, at most 1 s; a successful flush
 * ends it), so a call made meanwhile waits for it; a halted journal calls
 * none at all.  Failures are counted by reason in tfs_journal_to_text().
 */
int tfs_journal_flush_pins(struct tfs_journal *j, u64 seq);

/* Wakes the reclaim thread. */
void tfs_journal_reclaim_kick(struct tfs_journal *j);

/* --- text --- */

/*
 * Seqs (cur, last_seq, seq_ondisk, flushed_seq_ondisk, last_seq_ondisk,
 * err_seq), the current entry error by name, each reason's counter,
 * reservations, entries in flight, reclaim (pin flush failures by reason,
 * runs that backed off or found the journal halted) and each member's
 * space.
 */
void tfs_journal_to_text(struct printbuf *out, struct tfs_journal *j);

/* --- reading and replay (journal_io.c) --- */

struct tfs_journal_read_entry {
	struct jset *j; /* a malloc'ed copy, u64s valid */
	u64 seq;
	unsigned nr_devs; /* members holding a good copy */
	unsigned devs[TFS_JOURNAL_MAX_DEVS];
	bool blacklisted; /* listed by a newer entry's blacklist */
	bool after_flush; /* NO_FLUSH entry after the newest flush entry */
};

struct tfs_journal_read_dev {
	unsigned dev_idx;
	/* Where the next entry goes: after the highest-seq good entry. */
	unsigned cur_idx;
	u32 cur_offset;
	u64 *bucket_seq; /* newest good seq per bucket */
	unsigned nr_buckets;
	u64 nr_entries, nr_corrupt;
	unsigned nr_read_errors; /* buckets that could not be read */
	unsigned bad_bucket;	 /* the first of them */
	int read_err;		 /* and its error */
};

struct tfs_journal_read {
	struct tfs_journal_read_entry *entries; /* sorted by seq, one per seq */
	unsigned nr, size;
	u64 newest_seq;	     /* newest flush entry: where replay ends */
	u64 last_seq;	     /* its last_seq: where replay starts */
	u64 max_seq;	     /* highest seq of any good entry */
	u64 blacklist_start; /* not trusted: newest_seq+1 .. max_seq */
	u64 nr_corrupt;	     /* entries with good magic that did not validate */
	u64 nr_gaps;	     /* missing seqs in last_seq .. newest_seq */
	struct tfs_journal_read_dev devs[TFS_JOURNAL_MAX_DEVS];
	unsigned nr_devs;
	/* Every blacklist range the entries read carry (never durable: never replayed). */
	struct tfs_journal_seq_range *blacklist;
	unsigned nr_blacklist;
	u64 prev_flush_seq;	 /* the flush entry before newest_seq; 0: none */
	u64 post_flush_dropped;	 /* a post-flush entry replay does not trust; 0: none */
	u64 post_flush_verified; /* newest_seq, a post-flush entry whose data checked out */
	u64 nr_verified_keys;	 /* keys tfs_journal_read_verify_tail() checked */
	u64 nr_old_data_keys;	 /* ... and skipped: old_data sub-entries (journal_format.h) */
};

/*
 * Reads every member's journal buckets and validates each entry (magic,
 * checksum, sizes, sub-entries), printing every corrupt entry once with
 * device, bucket, offset and seq.  Finds the newest flush entry and checks
 * that every seq from its last_seq is present: a missing one is reported with
 * its range and -TFS_ERR_journal_gap returned (*ret is still filled so the
 * caller can print it).  -TFS_ERR_journal_empty when nothing valid was
 * found (*ret filled too: a fresh journal).  A bucket that cannot be read
 * fails the read with -TFS_ERR_journal_read (*ret NULL, err naming the
 * device and bucket) unless a member read without errors holds a good copy
 * of every seq from the replay start to the highest seq seen: what the
 * bucket held is unknown, and replaying or continuing without it could lose
 * acknowledged entries and reuse their seqs.  An entry spanning more seqs
 * (seq - last_seq) than opts->pin_fifo_size is corrupt.  opts gives uuid,
 * block size and pin fifo size.
 */
int tfs_journal_read(const struct tfs_journal_dev *devs, unsigned nr,
		     const struct tfs_journal_opts *opts, struct tfs_journal_read **ret,
		     struct printbuf *err);

void tfs_journal_read_free(struct tfs_journal_read *r);

/*
 * Checks one key of a post-flush window: 0 when what it refers to is on
 * disk as the key says (or it refers to nothing replay can check), 1 when
 * not, a negative code to give up.
 */
typedef int (*tfs_journal_verify_key_fn)(void *ctx, u64 seq, unsigned btree_id, unsigned level,
					 const __le64 *key);

/*
 * When the newest flush entry r ends at is a post-flush entry
 * (journal_format.h), hands check every key of the entries since the
 * flush entry before it (its window), but those of old_data sub-entries
 * (re-keyed data written before: not re-read).  All present and good: r is left as
 * is (post_flush_verified).  One is not: the entry's flush never completed,
 * so it was never acknowledged; r then ends at the flush entry before it
 * (post_flush_dropped; the dropped seqs are untrusted like NO_FLUSH tails),
 * and the answer is that of tfs_journal_read() for it (0, or
 * -TFS_ERR_journal_gap).  tfs_journal_read() itself already drops such an
 * entry when an entry of its window is missing.  Call it before replay.
 */
int tfs_journal_read_verify_tail(struct tfs_journal_read *r, tfs_journal_verify_key_fn check,
				 void *ctx, struct printbuf *err);

struct tfs_journal_replay_ops {
	/* Every key of every btree_keys sub-entry, in seq then entry order. */
	int (*key)(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *key);
	/* Every other sub-entry (btree_root, usage). */
	int (*entry)(void *ctx, u64 seq, const struct jset_entry *entry);
};

/*
 * Hands the keys of last_seq .. newest_seq to ops in order; stops at and
 * returns the first callback error.  Reads nothing and changes nothing, so
 * replaying twice gives the callbacks the same sequence.
 */
int tfs_journal_replay(const struct tfs_journal_read *r, const struct tfs_journal_replay_ops *ops,
		       void *ctx);

/* One entry: seq, last_seq, flags, sizes, then each sub-entry. */
void tfs_jset_to_text(struct printbuf *out, const struct jset *j);

/* Summary, then every entry with seq in from..to (to 0: no limit). */
void tfs_journal_read_to_text(struct printbuf *out, const struct tfs_journal_read *r, u64 from,
			      u64 to);

/*
 * Validates one entry of at most len bytes found at (dev, offset); 0 or a
 * journal_entry_* code with the reason in err.
 */
int tfs_jset_validate(const struct jset *j, size_t len, u64 magic, struct printbuf *err);

/* Computes the checksum the entry should carry. */
u64 tfs_jset_csum(const struct jset *j);

#endif /* TFS_JOURNAL_JOURNAL_H */
