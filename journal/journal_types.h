/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_JOURNAL_JOURNAL_TYPES_H
#define TFS_JOURNAL_JOURNAL_TYPES_H

/*
 * In-memory structures of the journal.  Everything here is protected by
 * tfs_journal.lock unless said otherwise; see journal.h for the API and the
 * invariants.
 */

#include <pthread.h>
#include <stdbool.h>

#include "journal/journal_format.h"
#include "lib/bdev.h"
#include "lib/types.h"
#include "super/super_format.h"

#define TFS_JOURNAL_BUF_NR 4		     /* entries open or in flight at once */
#define TFS_JOURNAL_MAX_DEVS TFS_MAX_DEVICES /* members the journal writes to */
/*
 * Entries written since the newest durable flush entry whose members the
 * journal remembers (a power of 2); an entry becomes a flush entry before
 * more pile up.
 */
#define TFS_JOURNAL_PENDING_NR 1024

/*
 * Why the current entry cannot be opened (or "ok" when it can).  The first
 * three are waits: a blocking caller sleeps until reclaim or a write
 * completion changes things; insufficient_devices is an error (EROFS).
 */
/* clang-format off */
#define TFS_JOURNAL_CUR_ERRS(x)	\
	x(ok)			\
	x(blocked)		\
	x(journal_full)		\
	x(journal_pin_full)	\
	x(insufficient_devices)
/* clang-format on */

enum tfs_journal_cur_err {
#define x(n) TFS_JOURNAL_CUR_##n,
	TFS_JOURNAL_CUR_ERRS(x)
#undef x
	TFS_JOURNAL_CUR_NR
};

extern const char *const tfs_journal_cur_err_names[];

/*
 * Which part of the journal's free space an entry may use; each leaves
 * room for the ones after it (journal_reclaim.c, "space"):
 *  - normal: every reservation; leaves reserved_buckets free buckets;
 *  - reserved: TFS_JOURNAL_RES_RESERVED (reclaim's own updates); leaves
 *    two blocks;
 *  - flush: an empty flush entry that makes entries already written
 *    NO_FLUSH durable (flush_seq); leaves one block;
 *  - progress: an empty flush entry recording a newer last_seq, so buckets
 *    can be reused; may take the last block of a member where it frees a
 *    bucket.
 */
/* clang-format off */
#define TFS_JOURNAL_SPACE_CLASSES(x)	\
	x(normal)			\
	x(reserved)			\
	x(flush)			\
	x(progress)
/* clang-format on */

enum tfs_journal_space_class {
#define x(n) TFS_JOURNAL_SPACE_##n,
	TFS_JOURNAL_SPACE_CLASSES(x)
#undef x
	TFS_JOURNAL_SPACE_NR
};

extern const char *const tfs_journal_space_class_names[];

/* Why a pin flush callback failed (by the class of its code); counted in to_text. */
/* clang-format off */
#define TFS_JOURNAL_PIN_FLUSH_ERRS(x)	\
	x(io)				\
	x(no_space)			\
	x(journal_full)			\
	x(read_only)			\
	x(other)
/* clang-format on */

enum tfs_journal_pin_flush_err {
#define x(n) TFS_JOURNAL_PIN_FLUSH_ERR_##n,
	TFS_JOURNAL_PIN_FLUSH_ERRS(x)
#undef x
	TFS_JOURNAL_PIN_FLUSH_ERR_NR
};

extern const char *const tfs_journal_pin_flush_err_names[];

/* Seqs start..end (inclusive). */
struct tfs_journal_seq_range {
	u64 start, end;
};

/* A minimal intrusive list (circular, with a head). */
struct tfs_journal_list {
	struct tfs_journal_list *next, *prev;
};

struct tfs_journal;
struct tfs_journal_entry_pin;
struct tfs_journal_flush_waiter;

/*
 * Called by reclaim, without the journal lock, to write back whatever pin
 * protects (it pins seq).  Returns 0 once the pin was dropped or moved to a
 * newer seq, or a negative code (reclaim then backs off).
 */
typedef int (*tfs_journal_pin_flush_fn)(struct tfs_journal *j, struct tfs_journal_entry_pin *pin,
					u64 seq);

struct tfs_journal_entry_pin {
	struct tfs_journal_list list;
	u64 seq; /* 0 when not pinning anything */
	tfs_journal_pin_flush_fn flush;
};

struct tfs_journal_entry_pin_list {
	struct tfs_journal_list list;	 /* pins waiting for reclaim */
	struct tfs_journal_list flushed; /* pins whose flush is running */
	unsigned count;			 /* pins, plus one while the entry is unwritten */
};

/* One member the journal writes to. */
struct tfs_journal_device {
	struct tfs_bdev *bdev;
	unsigned dev_idx;
	u32 bucket_size; /* bytes */
	u64 *buckets;	 /* bucket numbers; byte offset = nr * bucket_size */
	u64 *bucket_seq; /* newest seq written to each bucket */
	unsigned nr_buckets;
	bool writable;
	/*
	 * The ring: buckets dirty_idx .. cur_idx (nr_dirty of them, wrapping)
	 * hold entries replay may still need; the rest are free.  cur_offset
	 * is where the next entry goes in cur_idx.
	 */
	unsigned cur_idx, dirty_idx, nr_dirty;
	u32 cur_offset;
	/*
	 * A journal write (not FUA) completed since the last flush issued to
	 * it (a FLUSH, or a PREFLUSH write), or its last flush failed: what
	 * it holds may still be only in its volatile cache.
	 */
	bool unflushed;
	/*
	 * Another writer (file data) completed a write on it since its last
	 * flush (tfs_journal_dev_written()): the next flush entry flushes it
	 * first, whether or not the entry goes there.
	 */
	bool foreign_unflushed;
	/*
	 * Post-flush bookkeeping: bdev->meta_writes_done when the newest of
	 * the journal's flushes that succeeded here was issued (every btree
	 * node, superblock write or discard completed by then is durable), and
	 * the file data bytes written (tfs_journal_dev_written()) since the last
	 * flush issued to it.
	 */
	u64 meta_flushed;
	u64 data_unflushed_bytes;
	u64 nr_writes, nr_write_errors, bytes_written;
	u64 nr_flushes, nr_preflushes, nr_postflushes, nr_flush_errors;
};

enum tfs_journal_buf_state {
	TFS_JBUF_FREE,
	TFS_JBUF_OPEN,	   /* taking reservations */
	TFS_JBUF_CLOSED,   /* no new reservations; waiting for res_put / order / members */
	TFS_JBUF_FLUSHING, /* flush entry: members' separate flushes in flight, then written */
	TFS_JBUF_WRITING,  /* bios submitted */
	TFS_JBUF_DONE,	   /* every bio completed; waiting for older seqs */
};

struct tfs_journal_buf {
	struct tfs_journal *j;
	struct jset *data; /* max_entry_size bytes, aligned for I/O */
	enum tfs_journal_buf_state state;
	u64 seq;
	u64 last_seq;
	u32 u64s_used;	 /* handed out to reservations */
	u32 u64s_max;	 /* RESERVED reservations fill up to this */
	u32 u64s_normal; /* the others up to this (the entry's normal-class room) */
	enum tfs_journal_space_class space_class; /* what the entry was opened with */
	unsigned nr_res;			  /* reservations not yet put */
	bool must_flush;      /* someone waits: written after every older entry is durable, FUA */
	bool cancelled;	      /* never written: the journal halted (or stopped) first */
	bool waiting_devs;    /* closed, but fewer writable members than required */
	bool flushes_done;    /* flush entry: the separate member flushes completed */
	bool lost_older;      /* flush entry: an older entry could not be made durable */
	bool post_flush;      /* flush entry written plain, made durable by a flush after it */
	bool post_flush_sent; /* ... and that flush is in flight (or done) */
	bool inline_io;	      /* its I/O runs in the thread that submitted it */
	u64 opened_ns;
	u32 bytes; /* padded size on disk, set when it closes */
	unsigned nr_devs;
	unsigned devs[TFS_JOURNAL_MAX_DEVS]; /* indexes into tfs_journal.devs */
	u64 offsets[TFS_JOURNAL_MAX_DEVS];
	/* The separate flushes, or the writes (see journal_io.c). */
	struct tfs_bio bios[TFS_JOURNAL_MAX_DEVS];
	unsigned bio_dev[TFS_JOURNAL_MAX_DEVS];
	unsigned nr_bios, bios_pending;
	u32 flush_devs; /* members flushed separately (bit per index into devs) */
	u32 flush_ok;	/* ... whose flush succeeded */
	u32 ok_devs;	/* members whose write (with its preflush) succeeded */
	/* bdev->meta_writes_done of each member (index into devs) when flushed by this entry. */
	u64 meta_snap[TFS_JOURNAL_MAX_DEVS];
	bool write_ok;		   /* reached metadata_replicas_required members */
	int err;		   /* first bio error */
	unsigned nr_flush_waiters; /* flush_seq callers it answers (group commit) */
	unsigned nr_announced;	   /* ... counted ahead by flush_seq_start(), not joined yet */
	u64 gather_until_ns;	   /* group commit: a flush entry closes by then */
	u64 submit_ns;
};

struct tfs_journal_opts {
	u8 uuid[16];			     /* of the filesystem; mixed into the magic */
	unsigned metadata_replicas;	     /* wanted; default 1 */
	unsigned metadata_replicas_required; /* fewer devices: EROFS; default 1 */
	u32 block_size;			     /* entries are padded to it; default 4096 */
	u32 max_entry_size;		     /* bytes, <= every bucket; default 64 KiB */
	unsigned pin_fifo_size;		     /* power of 2; default 1024 */
	unsigned write_delay_ms;	     /* close a non-empty entry this old; default 10 */
	unsigned flush_delay_ms;	     /* a flush entry at least this often; 1000 */
	unsigned reserved_pins;		     /* fifo slots only RESERVED opens use; 4 */
	unsigned reserved_buckets;	     /* per device, normal entries leave free; 1 */
	/*
	 * Post-flush entries (journal_io.c): a flush entry a flush_seq caller
	 * waits on may be written with no flush before it and one after, when
	 * at most this many bytes of file data were written since the last
	 * flush (replay reads them back to check them).  0: never (the
	 * default; the filesystem turns it on, its replay checks the data).
	 */
	u64 post_flush_max_bytes;
};

struct tfs_journal {
	pthread_mutex_t lock;
	pthread_cond_t wait;	     /* any progress: waiters re-check */
	pthread_cond_t write_wait;   /* the write thread */
	pthread_cond_t reclaim_wait; /* the reclaim thread */
	pthread_t write_thread, reclaim_thread;
	u64 writer_wake_ns; /* when the sleeping write thread wakes; 0: awake */
	/*
	 * Wake-ups of the write thread (tfs_journal_write_kick_locked()): one
	 * that comes while it is awake -- submitting with the lock dropped --
	 * makes it go round again instead of sleeping on what it saw before.
	 */
	u64 write_kicks;
	u64 writer_sleeps; /* times the write thread went to sleep */
	/* Tests: called on the write thread, unlocked, after it submitted an entry's bios. */
	void (*write_submit_hook)(struct tfs_journal *j);
	bool threads_started, stopping;
	unsigned nr_in_endio; /* write completions running (they may submit, unlocked) */
	bool draining;	      /* stop: entries that cannot be written are cancelled */
	bool drain_cancel;    /* ... and one was: so is every later one */

	struct tfs_journal_opts opts;
	u64 magic;

	struct tfs_journal_device devs[TFS_JOURNAL_MAX_DEVS];
	unsigned nr_devs;

	struct tfs_journal_buf buf[TFS_JOURNAL_BUF_NR];
	/* cur_seq is the newest seq handed out; it is open when cur_open. */
	u64 cur_seq;
	bool cur_open;
	enum tfs_journal_cur_err cur_entry_error;
	int cur_entry_code;	/* the code behind cur_entry_error */
	unsigned blocked;	/* tfs_journal_block() nesting */
	u64 seq_done;		/* every seq <= this has completed or been cancelled */
	u64 seq_allocated;	/* every seq <= this has its place on disk (seq order) */
	u64 seq_ondisk;		/* every seq <= this was written successfully */
	u64 flushed_seq_ondisk; /* ... and is durable */
	u64 last_seq_ondisk;	/* last_seq of the newest durable entry */
	/*
	 * The newest durable flush entry replay trusts whatever it finds
	 * after it: one written with its older entries already durable, or
	 * one followed by a newer durable flush entry.  A post-flush entry is
	 * trusted only if its data checks out, so space its commits freed is
	 * reused only once it is settled too (fs/alloc.c).
	 */
	u64 settled_seq_ondisk;
	bool stop_flush; /* stop's last flush: no post-flush entry */
	u64 err_seq;	 /* lowest seq whose write failed, or the halt seq */
	int err;	 /* the code flush_seq returns for seq >= err_seq */
	bool halted;
	u64 last_flush_ns;				/* when the newest flush entry was closed */
	struct tfs_journal_flush_waiter *flush_waiters; /* async flush_seq */

	/*
	 * A restarted journal: seqs up to start_seq belong to the last run;
	 * of those, only seqs <= trusted_seq (its newest flush entry) outside
	 * the read's blacklist ranges are durable.
	 */
	u64 start_seq, trusted_seq;
	struct tfs_journal_seq_range *blacklist;
	unsigned nr_blacklist;

	/*
	 * Members holding each entry written since the newest durable flush
	 * entry (bit per index into devs), by seq modulo TFS_JOURNAL_PENDING_NR:
	 * a flush entry makes every one of them durable before it is written.
	 */
	u32 *pending_devs;

	/* Group commit: flush_seq callers the last flush entry answered. */
	unsigned group_expect;
	u64 flush_lat_ns; /* running average of flush entry writes */

	/* The pin fifo: seqs last_seq .. cur_seq. */
	struct tfs_journal_entry_pin_list *pins;
	u64 last_seq;	       /* front: oldest seq still pinned */
	u64 replay_pinned_end; /* seqs last_seq..this hold a replay reference */
	u64 pin_flush_target;  /* reclaim flushes pins of seqs <= this */
	int pin_flush_err;     /* last flush callback error */
	bool reclaim_kicked;
	bool reclaim_flushing;	   /* reclaim is calling pin flush callbacks */
	unsigned nr_space_waiters; /* reservations waiting on journal_full */
	u64 reclaim_runs, pins_flushed, pin_flush_errors;
	/*
	 * After a failed pin flush reclaim calls no flush callback until
	 * reclaim_backoff_until_ns (the wait doubles per failure in a row, from
	 * RECLAIM_BACKOFF_MIN_MS up to RECLAIM_BACKOFF_MAX_MS; a flush that
	 * succeeds ends it), and none at all once the journal is halted:
	 * waiters that wake and kick reclaim never make it retry in a loop.
	 */
	u64 reclaim_backoff_until_ns;
	unsigned reclaim_backoff_ms;
	u64 reclaim_backoff_runs; /* runs that called no callback: backing off */
	u64 reclaim_halted_runs;  /* ... the journal is halted */
	u64 pin_flush_err_counts[TFS_JOURNAL_PIN_FLUSH_ERR_NR]; /* failures by reason */

	/* Counters: each reason, counted where a reservation met it. */
	u64 cur_err_counts[TFS_JOURNAL_CUR_NR];
	u64 nr_res_get, nr_res_waits, nr_entries, nr_flush_entries, nr_noflush_entries;
	u64 nr_res_reserved;
	u64 nr_class_entries[TFS_JOURNAL_SPACE_NR]; /* entries opened per space class */
	u64 nr_separate_flushes;		    /* flush entries that flushed members first */
	u64 nr_preflush_entries;		    /* ... with a PREFLUSH on their own write */
	u64 nr_postflush_entries;		    /* ... with one flush after their write */
	u64 nr_postflush_inline;		    /* ... both run by a waiting thread */
	u64 nr_fua_only_entries;		    /* ... that flushed nothing else (FUA) */
	u64 nr_devs_waits; /* entries that waited for enough writable members */
};

/* A reservation: u64s words at offset in entry seq. */
struct tfs_journal_res {
	bool ref;
	unsigned idx; /* buf */
	u64 seq;
	u32 offset; /* u64s into jset._data */
	u32 u64s;
};

#endif /* TFS_JOURNAL_JOURNAL_TYPES_H */
