// SPDX-License-Identifier: GPL-2.0
/*
 * Journal I/O: writing entries (space, bios, completion in seq order) and
 * reading them back (scan, validate, find the newest, check continuity,
 * replay).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "journal/journal_internal.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/trace.h"
#include "lib/printbuf.h"

static const char *const jset_entry_type_names[] = {
#define x(n, v) [v] = #n,
	TFS_JSET_ENTRY_TYPES(x)
#undef x
};

u64 tfs_jset_csum(const struct jset *j)
{
	size_t bytes = tfs_jset_bytes(le32_to_cpu(j->u64s));

	return tfs_crc32c(0, (const u8 *)j + offsetof(struct jset, magic),
			  bytes - offsetof(struct jset, magic));
}

/* --- writing ---
 *
 * Entries are given their place and written in seq order (each member's
 * ring holds them in seq order; the read relies on it), to members picked
 * when they are written, from those writable then.  A NO_FLUSH entry goes
 * out as soon as its reservations are put.  A flush entry waits until every
 * older entry completed, and is written only once every older entry since
 * the newest durable flush entry is durable on some member:
 *
 *  - if each member it goes to holds every such entry, a PREFLUSH on its
 *    own write does it (on the members that have unflushed writes; none
 *    on the others), ordered before the write on the same device;
 *  - else the members holding them are flushed first, and only once those
 *    flushes completed is the entry written (FUA): a flush merely sent
 *    along with the write may lose the race with a power cut while the
 *    write wins it, leaving a durable flush entry after a lost older one.
 *
 * A flush entry somebody waits on may instead be a post-flush entry: written
 * with no flush before it and made durable by one flush after its write
 * (one host sync, not two), when journal_post_flush_ok() finds that a power
 * cut during that flush cannot leave it durable with anything *replay
 * cannot check* missing: see there, and tfs_journal_read_verify_tail().
 *
 * A member counts for an entry only when its write (and preflush)
 * succeeded; a failed separate flush costs nothing as long as every older
 * entry is durable elsewhere.  The entry fails only when fewer than
 * metadata_replicas_required members made it, or when an older entry
 * cannot be made durable anywhere.
 */

/* The members holding entries written since the newest durable flush entry, before seq. */
static void journal_pending_devs(struct tfs_journal *j, u64 seq, u32 *all, u32 *any)
{
	u32 a = ~0u, o = 0;

	for (u64 s = journal_durable_base(j) + 1; s < seq; s++) {
		u32 m = *journal_seq_pending_devs(j, s);

		a &= m;
		o |= m;
	}
	*all = a;
	*any = o;
}

/* Picks b's members: writable, room for it, most free buckets first. */
static unsigned journal_pick_devs_locked(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	unsigned cand[TFS_JOURNAL_MAX_DEVS], nr = 0;

	for (unsigned i = 0; i < j->nr_devs; i++)
		if (j->devs[i].writable && tfs_journal_dev_fits(j, &j->devs[i], b))
			cand[nr++] = i;
	/* Most free buckets first, then device order (insertion sort: nr is tiny). */
	for (unsigned i = 1; i < nr; i++)
		for (unsigned k = i; k > 0; k--) {
			unsigned a = tfs_journal_dev_free_buckets(&j->devs[cand[k - 1]]);
			unsigned c = tfs_journal_dev_free_buckets(&j->devs[cand[k]]);

			if (c <= a)
				break;
			unsigned t = cand[k];
			cand[k] = cand[k - 1];
			cand[k - 1] = t;
		}
	b->nr_devs = min_t(unsigned, j->opts.metadata_replicas, nr);
	memcpy(b->devs, cand, b->nr_devs * sizeof(cand[0]));
	return b->nr_devs;
}

/* Gives b the next place in each of its members' rings. */
static void journal_alloc_locked(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	for (unsigned i = 0; i < b->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[b->devs[i]];

		if (d->bucket_size - d->cur_offset < b->bytes) {
			/* tfs_journal_dev_fits() checked there is a free bucket. */
			d->cur_idx = (d->cur_idx + 1) % d->nr_buckets;
			d->nr_dirty++;
			d->cur_offset = 0;
		}
		b->offsets[i] = d->buckets[d->cur_idx] * d->bucket_size + d->cur_offset;
		d->cur_offset += b->bytes;
		d->bucket_seq[d->cur_idx] = b->seq;
	}
	j->seq_allocated = b->seq;
}

static void journal_write_fill_header(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	struct jset *js = b->data;
	u32 u64s = b->u64s_used;

	/* Still-untrusted seqs of the last run stay void until reclaimed. */
	if (j->start_seq > j->trusted_seq && j->last_seq_ondisk <= j->start_seq) {
		struct jset_entry *e = (struct jset_entry *)(js->_data + u64s);
		struct jset_blacklist *bl = (struct jset_blacklist *)e->_data;

		memset(e, 0, sizeof(*e) + sizeof(*bl));
		e->type = TFS_JSET_ENTRY_blacklist;
		e->u64s = cpu_to_le16(sizeof(*bl) / 8);
		bl->start = cpu_to_le64(j->trusted_seq + 1);
		bl->end = cpu_to_le64(j->start_seq);
		u64s += tfs_jset_entry_u64s(sizeof(*bl) / 8);
	}
	/* b->last_seq was set when the entry closed (tfs_journal_entry_close_locked()). */
	js->magic = cpu_to_le64(j->magic);
	js->seq = cpu_to_le64(b->seq);
	js->last_seq = cpu_to_le64(b->last_seq);
	js->version = cpu_to_le32(TFS_JSET_VERSION);
	js->flags = cpu_to_le32(b->post_flush	? TFS_JSET_post_flush
				: b->must_flush ? 0
						: TFS_JSET_no_flush);
	js->u64s = cpu_to_le32(u64s);
	js->pad = 0;
	js->csum = cpu_to_le64(tfs_jset_csum(js));
	/* The padding up to the block: zeroes, not what the buffer held before. */
	memset((u8 *)js + tfs_jset_bytes(u64s), 0, b->bytes - tfs_jset_bytes(u64s));
}

static void journal_write_error_msg(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	struct printbuf msg = PRINTBUF;

	if (b->lost_older) {
		prt_printf(&msg,
			   "journal: flush entry seq %llu cannot be written: an older entry has "
			   "no durable copy (",
			   (unsigned long long)b->seq);
	} else {
		prt_printf(&msg, "journal: write of seq %llu reached %u of %u required replicas (",
			   (unsigned long long)b->seq, (unsigned)__builtin_popcount(b->ok_devs),
			   j->opts.metadata_replicas_required);
	}
	for (unsigned i = 0; i < b->nr_bios; i++) {
		struct tfs_journal_device *d = &j->devs[b->bio_dev[i]];

		prt_printf(&msg, "%sdev %u %s %s: %s", i ? ", " : "", d->dev_idx, d->bdev->path,
			   tfs_bio_op_names[b->bios[i].op], tfs_err_str(b->bios[i].result));
	}
	prt_str(&msg, "): journal halted, read-only");
	fprintf(stderr, "%s\n", printbuf_str(&msg));
	printbuf_exit(&msg);
}

static void journal_advance_locked(struct tfs_journal *j)
{
	u64 now = tfs_journal_now_ns();

	while (j->seq_done < j->cur_seq) {
		u64 s = j->seq_done + 1;
		struct tfs_journal_buf *b = journal_seq_buf(j, s);
		/* After a restart the untrusted seqs of the last run are skipped. */
		bool prev_ok = j->seq_ondisk == s - 1 ||
			       (s - 1 == j->start_seq && j->seq_ondisk == j->trusted_seq);

		if (b->state != TFS_JBUF_DONE)
			break;
		/*
		 * In seq order only: a success after a failure (or after
		 * err_seq) proves nothing about the failed seq, so the
		 * *_ondisk seqs stop at the first seq that did not make it.
		 */
		if (b->write_ok && prev_ok && (!j->err_seq || s < j->err_seq)) {
			j->seq_ondisk = s;
			if (b->must_flush) {
				u64 lat = now - b->submit_ns;

				/*
				 * A post-flush entry may yet be dropped by replay (its
				 * data failing the check); the flush entry before it
				 * never can be now: this one is durable after it.
				 */
				j->settled_seq_ondisk = b->post_flush ? j->flushed_seq_ondisk : s;
				j->flushed_seq_ondisk = s;
				j->last_seq_ondisk = max_t(u64, j->last_seq_ondisk, b->last_seq);
				/*
				 * Group commit: the committers just answered come
				 * back; with those already waiting on the entry
				 * gathering behind this one, that is everyone.
				 */
				if (b->nr_flush_waiters) {
					struct tfs_journal_buf *n = journal_seq_buf(j, j->cur_seq);

					j->group_expect = b->nr_flush_waiters;
					if (j->cur_open && n->must_flush)
						j->group_expect += n->nr_flush_waiters;
				}
				j->flush_lat_ns =
					j->flush_lat_ns ? (7 * j->flush_lat_ns + lat) / 8 : lat;
			}
		}
		journal_seq_pins(j, s)->count--; /* the entry's own reference */
		b->state = TFS_JBUF_FREE;
		j->seq_done = s;
	}
	/* An open entry held past its age for a free buffer may close now. */
	if (j->cur_open)
		tfs_journal_write_kick_locked(j);
	tfs_journal_reclaim_fast_locked(j);
	tfs_journal_space_update_locked(j);
	pthread_cond_broadcast(&j->wait);
	/*
	 * A flush entry gathering behind the one just done may go now (the
	 * completion calling us writes what is ready; the write thread times
	 * the gathering in case only async waiters wait on it).
	 */
	tfs_journal_flush_entry_maybe_close_locked(j, true);
	if (j->nr_space_waiters)
		tfs_journal_progress_locked(j);
}

static void journal_write_done_locked(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	b->state = TFS_JBUF_DONE;
	b->write_ok =
		!b->cancelled && !b->lost_older &&
		(unsigned)__builtin_popcount(b->ok_devs) >= j->opts.metadata_replicas_required;
	/* What a later flush entry has to make durable first. */
	if (b->write_ok)
		*journal_seq_pending_devs(j, b->seq) = b->ok_devs;

	if (!b->cancelled && !b->write_ok) {
		/* The lowest failed seq wins, whatever order failures arrive in. */
		if (!j->err_seq || b->seq < j->err_seq)
			j->err_seq = b->seq;
		tfs_trace(journal_write_error, b->seq, (unsigned)__builtin_popcount(b->ok_devs),
			  j->opts.metadata_replicas_required);
		if (!j->err)
			j->err = -TFS_ERR_journal_write;
		if (!j->halted) {
			journal_write_error_msg(j, b);
			tfs_journal_halt_locked(j, -TFS_ERR_journal_write);
		}
	}
	journal_advance_locked(j);
}

/* The bdev's completed meta writes, read before a flush of it is issued. */
static u64 journal_meta_done(struct tfs_journal_device *d)
{
	return __atomic_load_n(&d->bdev->meta_writes_done, __ATOMIC_SEQ_CST);
}

/* A flush of member dev issued for b succeeded: meta writes done before it are durable. */
static void journal_flushed_meta(struct tfs_journal *j, struct tfs_journal_buf *b, unsigned dev)
{
	struct tfs_journal_device *d = &j->devs[dev];

	d->meta_flushed = max_t(u64, d->meta_flushed, b->meta_snap[dev]);
}

static void journal_bio_init(struct tfs_journal_buf *b, struct tfs_journal_device *d, unsigned dev,
			     enum tfs_bio_op op, unsigned flags, u64 offset);

static void journal_write_endio(struct tfs_bio *bio)
{
	struct tfs_journal_buf *b = bio->private;
	struct tfs_journal *j = b->j;
	unsigned i = bio - b->bios;
	unsigned dev = b->bio_dev[i];
	struct tfs_journal_device *d = &j->devs[dev];

	pthread_mutex_lock(&j->lock);
	/* Submitting below drops the lock: stop waits for us to finish. */
	j->nr_in_endio++;
	if (bio->op == TFS_OP_write) {
		d->nr_writes++;
		if (!bio->result) {
			b->ok_devs |= 1u << dev;
			d->bytes_written += bio->len;
			if (bio->flags & TFS_BIO_PREFLUSH)
				journal_flushed_meta(j, b, dev);
		}
		/* Not durable yet (a failed write may have landed partly too). */
		if (bio->result || !(bio->flags & TFS_BIO_FUA))
			d->unflushed = true;
	} else if (!bio->result) {
		b->flush_ok |= 1u << dev;
		journal_flushed_meta(j, b, dev);
	} else {
		/* What it took may still be (only) in its cache. */
		d->unflushed = true;
		/* No post-flush entry until a flush succeeds here (the data count is lost). */
		d->data_unflushed_bytes = UINT64_MAX;
		d->nr_flush_errors++;
		/* A post-flush entry is written only once its flush succeeded. */
		if (b->post_flush)
			b->ok_devs &= ~(1u << dev);
	}
	if (bio->result) {
		if (bio->op == TFS_OP_write)
			d->nr_write_errors++;
		if (!b->err)
			b->err = bio->result;
		if (d->writable)
			fprintf(stderr,
				"journal: %s error on dev %u (%s) at offset %llu, seq %llu: %s; "
				"no more journal writes go to it\n",
				tfs_bio_op_names[bio->op], d->dev_idx, d->bdev->path,
				(unsigned long long)bio->offset, (unsigned long long)b->seq,
				tfs_err_str(bio->result));
		d->writable = false;
	}
	if (!--b->bios_pending) {
		if (b->state == TFS_JBUF_WRITING && b->post_flush && !b->post_flush_sent &&
		    !b->err) {
			/*
			 * Written: now the one flush that makes it durable, with
			 * every older entry and the data they refer to (all on
			 * this member: journal_post_flush_ok()).  Completion
			 * threads may submit; not under the lock.
			 */
			unsigned t = b->devs[0];
			struct tfs_journal_device *td = &j->devs[t];
			struct tfs_bio *fb;

			b->post_flush_sent = true;
			b->nr_bios = 0;
			journal_bio_init(b, td, t, TFS_OP_flush, 0, 0);
			b->meta_snap[t] = journal_meta_done(td);
			td->unflushed = false;
			td->foreign_unflushed = false;
			td->data_unflushed_bytes = 0;
			td->nr_postflushes++;
			b->bios_pending = 1;
			fb = &b->bios[0];
			pthread_mutex_unlock(&j->lock);
			if (b->inline_io)
				tfs_bio_submit_inline(fb); /* completes b: not used after */
			else
				tfs_bio_submit(fb);
			pthread_mutex_lock(&j->lock);
		} else if (b->state == TFS_JBUF_FLUSHING) {
			/* The separate flushes are done: now it can be written. */
			b->flushes_done = true;
			b->state = TFS_JBUF_CLOSED;
		} else {
			journal_write_done_locked(j, b);
		}
		/*
		 * Write what this made ready (a flush entry waiting for this
		 * one) from here: a hand-off to the write thread costs a
		 * wake-up on every flush.  Submitting to another device may
		 * wait for room in its queue, never for this one.
		 */
		tfs_journal_write_ready_locked(j);
	}
	if (!--j->nr_in_endio)
		pthread_cond_broadcast(&j->wait);
	tfs_journal_unlock(j);
}

static void journal_bio_init(struct tfs_journal_buf *b, struct tfs_journal_device *d, unsigned dev,
			     enum tfs_bio_op op, unsigned flags, u64 offset)
{
	struct tfs_bio *bio = &b->bios[b->nr_bios];

	memset(bio, 0, sizeof(*bio));
	bio->bdev = d->bdev;
	bio->op = op;
	/* Failures are reported here, in terms of the journal (seq, member). */
	bio->flags = flags | TFS_BIO_QUIET;
	bio->tag = TFS_TAG_journal;
	bio->offset = offset;
	if (op == TFS_OP_write) {
		bio->buf = b->data;
		bio->len = b->bytes;
	}
	bio->end_io = journal_write_endio;
	bio->private = b;
	b->bio_dev[b->nr_bios++] = dev;
}

/*
 * Whether flush entry b (its member picked, need: the members to flush
 * before it is durable) may be a post-flush entry: written plain, then one
 * flush of its member.  A power cut during that flush may persist the
 * entry and lose anything else written since the member's last flush, so
 * only what replay can check may be in that window
 * (tfs_journal_read_verify_tail()): older journal entries since the last
 * flush entry (each must be present, or it drops b) and file data their
 * extents refer to (checksummed, copy-on-write to space no settled state
 * refers to).  So:
 *  - someone waits on it (an fsync), it is not stop's last entry, and the
 *    filesystem asked for it (post_flush_max_bytes);
 *  - it goes to one member, and that member holds every unflushed older
 *    entry and every unflushed data write: one flush covers them all, and
 *    replay reads the data where the entry is;
 *  - no btree node, superblock write or discard was issued to the member
 *    since a flush that succeeded there (its meta_writes counters): b's
 *    last_seq may rest on node writes replay cannot check;
 *  - at most post_flush_max_bytes of data written since: replay reads it.
 */
static bool journal_post_flush_ok(struct tfs_journal *j, struct tfs_journal_buf *b, u32 any,
				  u32 need)
{
	struct tfs_journal_device *d;
	u32 t;

	if (!j->opts.post_flush_max_bytes || !b->nr_flush_waiters || j->stop_flush || j->draining ||
	    !need || b->nr_devs != 1)
		return false;
	t = 1u << b->devs[0];
	if ((any | need) & ~t)
		return false;
	d = &j->devs[b->devs[0]];
	if (d->data_unflushed_bytes > j->opts.post_flush_max_bytes)
		return false;
	return __atomic_load_n(&d->bdev->meta_writes_submitted, __ATOMIC_SEQ_CST) ==
	       d->meta_flushed;
}

enum journal_prep {
	JOURNAL_PREP_SUBMIT, /* bios filled in: submit them */
	JOURNAL_PREP_DONE,   /* finished without I/O (failed, or cancelled) */
	JOURNAL_PREP_WAIT,   /* cannot go now: retried when something changes */
};

/* Fills in b's bios (flushes first, or its writes); the caller submits them unlocked. */
static enum journal_prep journal_write_prep_locked(struct tfs_journal *j, struct tfs_journal_buf *b)
{
	u32 all = ~0u, any = 0, preflush = 0;

	if (b->must_flush) {
		journal_pending_devs(j, b->seq, &all, &any);
		if (b->flushes_done) {
			/* Durable now: copies on members flushed, or that were not unflushed. */
			u32 durable = b->flush_ok | (any & ~b->flush_devs);

			for (u64 s = journal_durable_base(j) + 1; s < b->seq; s++)
				if (!(*journal_seq_pending_devs(j, s) & durable)) {
					b->lost_older = true;
					return JOURNAL_PREP_DONE;
				}
		}
	}
	if (journal_pick_devs_locked(j, b) < j->opts.metadata_replicas_required) {
		/*
		 * Too few members writable (one set read-only): not a failure.
		 * The entry waits for a member to come back; flush_seq answers
		 * insufficient_devices meanwhile.  Stopping cancels it, and
		 * everything after it.
		 */
		if (j->draining) {
			j->drain_cancel = true;
			b->cancelled = true;
			return JOURNAL_PREP_DONE;
		}
		if (!b->waiting_devs) {
			b->waiting_devs = true;
			j->nr_devs_waits++;
			pthread_cond_broadcast(&j->wait);
		}
		return JOURNAL_PREP_WAIT;
	}
	b->waiting_devs = false;
	b->nr_bios = 0;
	b->submit_ns = b->submit_ns ?: tfs_journal_now_ns();

	if (b->must_flush && !b->flushes_done) {
		u32 targets = 0, unflushed = 0, foreign = 0;

		for (unsigned i = 0; i < b->nr_devs; i++)
			targets |= 1u << b->devs[i];
		for (unsigned i = 0; i < j->nr_devs; i++) {
			if (j->devs[i].unflushed)
				unflushed |= 1u << i;
			if (j->devs[i].foreign_unflushed)
				foreign |= 1u << i;
		}
		/*
		 * Members holding older entries that may not be durable yet, and
		 * members with other writers' unflushed writes (file data a
		 * commit in this entry may refer to): all must be durable before
		 * this entry is.
		 */
		u32 need = (any & unflushed) | foreign;

		if (need && ((targets & all) != targets || (foreign & ~targets))) {
			/*
			 * Some member it goes to lacks an older entry: flush the
			 * members holding them first, and write it only once those
			 * flushes completed.  Read-only members too: what they took
			 * before may still be in their cache.
			 */
			for (unsigned i = 0; i < j->nr_devs; i++)
				if (need & (1u << i)) {
					journal_bio_init(b, &j->devs[i], i, TFS_OP_flush, 0, 0);
					b->meta_snap[i] = journal_meta_done(&j->devs[i]);
					j->devs[i].unflushed = false;
					j->devs[i].foreign_unflushed = false;
					j->devs[i].data_unflushed_bytes = 0;
					j->devs[i].nr_flushes++;
				}
			b->flush_devs = need;
			b->bios_pending = b->nr_bios;
			b->state = TFS_JBUF_FLUSHING;
			j->nr_separate_flushes++;
			return JOURNAL_PREP_SUBMIT;
		}
		/*
		 * Every member it goes to holds every older entry: a PREFLUSH
		 * on its own write makes them durable there first, and only
		 * where something is unflushed -- or one flush after the write
		 * does, when replay can tell if it did not complete.
		 */
		if (journal_post_flush_ok(j, b, any, need))
			b->post_flush = true;
		else
			preflush = targets & need;
		if (b->post_flush)
			j->nr_postflush_entries++;
		else if (preflush)
			j->nr_preflush_entries++;
		else
			j->nr_fua_only_entries++;
	}
	journal_alloc_locked(j, b);
	journal_write_fill_header(j, b);
	for (unsigned i = 0; i < b->nr_devs; i++) {
		struct tfs_journal_device *d = &j->devs[b->devs[i]];
		unsigned flags = 0;

		if (b->must_flush && !b->post_flush)
			flags |= TFS_BIO_FUA;
		if (preflush & (1u << b->devs[i])) {
			flags |= TFS_BIO_PREFLUSH;
			b->meta_snap[b->devs[i]] = journal_meta_done(d);
			d->unflushed = false;
			d->foreign_unflushed = false;
			d->data_unflushed_bytes = 0;
			d->nr_preflushes++;
		}
		journal_bio_init(b, d, b->devs[i], TFS_OP_write, flags, b->offsets[i]);
	}
	b->bios_pending = b->nr_bios;
	b->state = TFS_JBUF_WRITING;
	return JOURNAL_PREP_SUBMIT;
}

/* Set while this thread is in tfs_journal_write_ready_inline_locked(). */
static __thread bool journal_io_inline;

void tfs_journal_write_ready_inline_locked(struct tfs_journal *j)
{
	bool was = journal_io_inline;

	journal_io_inline = true;
	tfs_journal_write_ready_locked(j);
	journal_io_inline = was;
}

void tfs_journal_write_ready_locked(struct tfs_journal *j)
{
again:
	for (u64 s = j->seq_done + 1; s <= j->cur_seq; s++) {
		struct tfs_journal_buf *b = journal_seq_buf(j, s);

		if (b->state == TFS_JBUF_WRITING || b->state == TFS_JBUF_DONE)
			continue;
		/* Places are handed out in seq order: nothing after these goes first. */
		if (b->state == TFS_JBUF_OPEN || b->state == TFS_JBUF_FLUSHING)
			break;
		if (b->nr_res) {
			if (j->halted)
				continue;
			break;
		}
		if (j->halted || j->drain_cancel) {
			b->cancelled = true;
			journal_write_done_locked(j, b);
			goto again;
		}
		/* Ordering: a flush entry only after every older entry completed. */
		if (b->must_flush && j->seq_done != s - 1)
			break;
		switch (journal_write_prep_locked(j, b)) {
		case JOURNAL_PREP_WAIT:
			return;
		case JOURNAL_PREP_DONE:
			journal_write_done_locked(j, b);
			goto again;
		case JOURNAL_PREP_SUBMIT:
			break;
		}
		struct tfs_bio *bios[TFS_JOURNAL_MAX_DEVS];
		unsigned nr = b->nr_bios;

		for (unsigned i = 0; i < nr; i++)
			bios[i] = &b->bios[i];
		void (*hook)(struct tfs_journal *) = j->write_submit_hook;

		if (hook && !pthread_equal(pthread_self(), j->write_thread))
			hook = NULL;
		/* Only a post-flush entry: its one write and its flush need nothing else. */
		b->inline_io =
			journal_io_inline && b->post_flush && nr == 1 && tfs_bio_in_caller(bios[0]);
		j->nr_postflush_inline += b->inline_io;
		/* Submission may block on a full queue: never under the lock. */
		pthread_mutex_unlock(&j->lock);
		if (b->inline_io)
			tfs_bio_submit_inline(bios[0]); /* may complete b: not used after */
		else
			for (unsigned i = 0; i < nr; i++)
				tfs_bio_submit(bios[i]);
		if (hook)
			hook(j);
		pthread_mutex_lock(&j->lock);
		goto again;
	}
}

/*
 * Durability is bounded when commits stop too.  Closing an entry makes it
 * a flush entry once flush_delay_ms passed since the last one, but the
 * entries of a burst that then stops went out NO_FLUSH with none after
 * them to carry the flush, and replay trusts nothing past the newest flush
 * entry: they stayed undurable until the next fsync or unmount, however
 * long the mount sat idle.  So once flush_delay_ms passed since the last
 * flush entry, the newest closed entry gets one after it (an empty one, or
 * the open empty entry made a flush entry), as ext4's commit interval
 * does; on FUSE nothing else would (sync(2) and syncfs(2) reach no daemon).
 * Returns the time until that is due, UINT64_MAX when there is nothing to do.
 */
static u64 journal_idle_flush_locked(struct tfs_journal *j, u64 now)
{
	struct tfs_journal_buf *b = j->cur_open ? journal_seq_buf(j, j->cur_seq) : NULL;
	/* An open entry with keys closes on its own, as a flush entry when due. */
	u64 newest = b ? j->cur_seq - 1 : j->cur_seq;
	u64 due = j->last_flush_ns + (u64)j->opts.flush_delay_ms * 1000000;

	if (j->halted || j->stopping || newest <= journal_durable_base(j) ||
	    (b && (b->u64s_used || b->must_flush)) ||
	    tfs_journal_nr_writable(j) < j->opts.metadata_replicas_required)
		return UINT64_MAX;
	/* One on its way covers what is older; what follows it is looked at after. */
	if (tfs_journal_flush_in_flight_locked(j, j->cur_seq + 1))
		return UINT64_MAX;
	if (now < due)
		return due - now;
	tfs_journal_want_flush_locked(j, newest, 0, false);
	return UINT64_MAX;
}

void *tfs_journal_write_thread(void *arg)
{
	struct tfs_journal *j = arg;

	pthread_mutex_lock(&j->lock);
	while (!j->stopping) {
		u64 now = tfs_journal_now_ns();
		u64 timeout = 50 * 1000000ULL;
		u64 kicks = j->write_kicks;

		if (j->cur_open) {
			struct tfs_journal_buf *b = journal_seq_buf(j, j->cur_seq);
			u64 deadline = b->opened_ns + (u64)j->opts.write_delay_ms * 1000000;

			/* Closes on age (an empty entry waits for something to carry),
			 * or as a flush entry once group commit lets it go. */
			/*
			 * Not on age while reclaim's callbacks run, nor, under
			 * space pressure, once it holds RESERVED reservations
			 * past the normal room: reclaim's updates then share
			 * one entry instead of taking a block each of the little
			 * space they may use.  A flush (a write-back) or the
			 * progress entry closes it -- the latter exactly when
			 * the pins it took over free a bucket.
			 */
			bool hold = j->reclaim_flushing ||
				    (b->u64s_used > b->u64s_normal && j->nr_space_waiters);
			/*
			 * Nor while the buffer the entry after it needs is
			 * still in flight: closed, it would leave no entry to
			 * reserve in until that write completes, and every
			 * commit meanwhile would wait for the device
			 * (journal_max_in_flight).  Open, it takes them; the
			 * completion wakes us (journal_advance_locked()).
			 */
			bool pipeline_full =
				journal_seq_buf(j, j->cur_seq + 1)->state != TFS_JBUF_FREE;

			if (b->u64s_used && now >= deadline && !hold && !pipeline_full) {
				tfs_journal_entry_close_locked(j);
			} else if (b->must_flush &&
				   !tfs_journal_flush_in_flight_locked(j, b->seq)) {
				tfs_journal_flush_entry_maybe_close_locked(j, false);
				if (j->cur_open && b->gather_until_ns > now)
					timeout = min_t(u64, timeout, b->gather_until_ns - now);
			} else if (b->u64s_used) {
				/* (Past the deadline: reclaim signals when its run ends.) */
				timeout = min_t(u64, timeout,
						deadline > now ? deadline - now : timeout);
			} else {
				timeout =
					min_t(u64, timeout, (u64)j->opts.write_delay_ms * 1000000);
			}
		}
		timeout = min_t(u64, timeout, journal_idle_flush_locked(j, now));
		tfs_journal_write_ready_locked(j);
		/*
		 * Woken while awake (write_ready drops the lock to submit): the
		 * timeout above may be stale -- an entry opened, a flush was
		 * asked for -- so look again instead of sleeping it out.
		 */
		if (j->write_kicks != kicks)
			continue;

		struct timespec ts;

		/* Entries opening with an earlier deadline wake us (entry_open). */
		j->writer_wake_ns = tfs_journal_now_ns() + timeout;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		timeout += ts.tv_nsec;
		ts.tv_sec += timeout / 1000000000;
		ts.tv_nsec = timeout % 1000000000;
		j->writer_sleeps++;
		pthread_cond_timedwait(&j->write_wait, &j->lock, &ts);
		j->writer_wake_ns = 0;
	}
	tfs_journal_unlock(j);
	return NULL;
}

/* --- validation --- */

#define JSET_FLAGS_KNOWN (TFS_JSET_no_flush | TFS_JSET_post_flush)
#define JSET_KEYS_FLAGS_KNOWN TFS_JSET_KEYS_old_data

int tfs_jset_validate(const struct jset *j, size_t len, u64 magic, struct printbuf *err)
{
	u32 u64s;
	u64 seq;

	/* No header field is read before the header is known to be there. */
	if (len < sizeof(*j)) {
		prt_printf(err, "%zu bytes: too small for an entry", len);
		return -TFS_ERR_journal_entry_bad_size;
	}
	u64s = le32_to_cpu(j->u64s);
	seq = le64_to_cpu(j->seq);
	if (le64_to_cpu(j->magic) != magic) {
		prt_printf(err, "bad magic %016llx", (unsigned long long)le64_to_cpu(j->magic));
		return -TFS_ERR_journal_entry_bad_magic;
	}
	if (tfs_jset_bytes(u64s) > len) {
		prt_printf(err,
			   "seq %llu: %u u64s (%zu bytes) but only %zu bytes left in the bucket",
			   (unsigned long long)seq, u64s, tfs_jset_bytes(u64s), len);
		return -TFS_ERR_journal_entry_bad_size;
	}
	u64 want = tfs_jset_csum(j), got = le64_to_cpu(j->csum);

	if (want != got) {
		prt_printf(err, "seq %llu: bad checksum %08llx, computed %08llx",
			   (unsigned long long)seq, (unsigned long long)got,
			   (unsigned long long)want);
		return -TFS_ERR_journal_entry_bad_csum;
	}
	/*
	 * Seqs start at 1, and so does every last_seq a writer records: one
	 * of 0 would have replay start below what tfs_journal_start() pins.
	 */
	if (le32_to_cpu(j->version) != TFS_JSET_VERSION || !seq || !le64_to_cpu(j->last_seq) ||
	    le64_to_cpu(j->last_seq) > seq || (le32_to_cpu(j->flags) & ~JSET_FLAGS_KNOWN) ||
	    (le32_to_cpu(j->flags) & JSET_FLAGS_KNOWN) == JSET_FLAGS_KNOWN) {
		/* Name the one field that is wrong. */
		if (le32_to_cpu(j->version) != TFS_JSET_VERSION)
			prt_printf(err, "seq %llu: version %u, expected %u",
				   (unsigned long long)seq, le32_to_cpu(j->version),
				   TFS_JSET_VERSION);
		else if (!seq)
			prt_str(err, "seq 0: seqs start at 1");
		else if (!le64_to_cpu(j->last_seq))
			prt_printf(err, "seq %llu: last_seq 0 (last_seqs start at 1)",
				   (unsigned long long)seq);
		else if (le64_to_cpu(j->last_seq) > seq)
			prt_printf(err, "seq %llu: last_seq %llu > seq %llu",
				   (unsigned long long)seq,
				   (unsigned long long)le64_to_cpu(j->last_seq),
				   (unsigned long long)seq);
		else if (le32_to_cpu(j->flags) & ~JSET_FLAGS_KNOWN)
			prt_printf(err, "seq %llu: unknown flags 0x%x", (unsigned long long)seq,
				   le32_to_cpu(j->flags) & ~JSET_FLAGS_KNOWN);
		else
			prt_printf(err, "seq %llu: both no_flush and post_flush",
				   (unsigned long long)seq);
		return -TFS_ERR_journal_entry_invalid;
	}

	const __le64 *end = j->_data + u64s;

	for (const struct jset_entry *e = (const void *)j->_data; (const __le64 *)e < end;
	     e = tfs_jset_entry_next((struct jset_entry *)e)) {
		unsigned word = (const __le64 *)e - j->_data;
		unsigned n = le16_to_cpu(e->u64s);
		const __le64 *d = e->_data, *e_end = e->_data + n;

		if (e_end > end) {
			prt_printf(err, "seq %llu: sub-entry at word %u: %u u64s past the end (%u)",
				   (unsigned long long)seq, word, n, u64s);
			return -TFS_ERR_journal_entry_bad_subentry;
		}
		if (e->flags &
		    ~(e->type == TFS_JSET_ENTRY_btree_keys ? JSET_KEYS_FLAGS_KNOWN : 0)) {
			prt_printf(err, "seq %llu: sub-entry at word %u: unknown flags 0x%x",
				   (unsigned long long)seq, word, e->flags);
			return -TFS_ERR_journal_entry_bad_subentry;
		}
		switch (e->type) {
		case TFS_JSET_ENTRY_btree_keys:
		case TFS_JSET_ENTRY_btree_root:
			for (const __le64 *k = d; k < e_end; k += tfs_jkey_u64s(k)) {
				unsigned ku = tfs_jkey_u64s(k);

				if (!ku || k + ku > e_end) {
					prt_printf(err,
						   "seq %llu: %s at word %u: key at word %u of "
						   "%u u64s does not fit",
						   (unsigned long long)seq,
						   jset_entry_type_names[e->type], word,
						   (unsigned)(k - j->_data), ku);
					return -TFS_ERR_journal_entry_bad_subentry;
				}
			}
			if (e->type == TFS_JSET_ENTRY_btree_root && (!n || tfs_jkey_u64s(d) != n)) {
				prt_printf(err, "seq %llu: btree_root at word %u: not one key",
					   (unsigned long long)seq, word);
				return -TFS_ERR_journal_entry_bad_subentry;
			}
			break;
		case TFS_JSET_ENTRY_usage:
			if (n != sizeof(struct jset_usage) / 8) {
				prt_printf(err, "seq %llu: usage at word %u: %u u64s",
					   (unsigned long long)seq, word, n);
				return -TFS_ERR_journal_entry_bad_subentry;
			}
			break;
		case TFS_JSET_ENTRY_blacklist: {
			const struct jset_blacklist *bl = (const void *)d;

			if (n != sizeof(*bl) / 8 || le64_to_cpu(bl->start) > le64_to_cpu(bl->end) ||
			    le64_to_cpu(bl->end) >= seq) {
				prt_printf(err, "seq %llu: bad blacklist at word %u",
					   (unsigned long long)seq, word);
				return -TFS_ERR_journal_entry_bad_subentry;
			}
			break;
		}
		default:
			prt_printf(err, "seq %llu: sub-entry at word %u: unknown type %u",
				   (unsigned long long)seq, word, e->type);
			return -TFS_ERR_journal_entry_bad_subentry;
		}
	}
	return 0;
}

/* --- reading --- */

static int read_entry_cmp(const void *a, const void *b)
{
	const struct tfs_journal_read_entry *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct tfs_journal_read_entry *read_find(struct tfs_journal_read *r, u64 seq)
{
	/* Entries are appended unsorted while reading; nr is small. */
	for (unsigned i = 0; i < r->nr; i++)
		if (r->entries[i].seq == seq)
			return &r->entries[i];
	return NULL;
}

static int read_add(struct tfs_journal_read *r, const struct jset *js, unsigned dev_idx,
		    const struct tfs_journal_dev *d, unsigned bucket, u32 offset)
{
	u64 seq = le64_to_cpu(js->seq);
	struct tfs_journal_read_entry *e = read_find(r, seq);
	size_t bytes = tfs_jset_bytes(le32_to_cpu(js->u64s));

	if (e) {
		if (e->j->csum != js->csum) {
			fprintf(stderr,
				"journal: dev %u (%s) bucket %llu (ring index %u) offset %u: seq "
				"%llu differs from the copy on dev %u; keeping the first\n",
				dev_idx, d->bdev->path, (unsigned long long)d->buckets[bucket],
				bucket, offset, (unsigned long long)seq, e->devs[0]);
			return 0;
		}
		if (e->nr_devs < TFS_JOURNAL_MAX_DEVS)
			e->devs[e->nr_devs++] = dev_idx;
		return 0;
	}
	if (r->nr == r->size) {
		unsigned size = r->size ? 2 * r->size : 64;
		void *p = realloc(r->entries, size * sizeof(*r->entries));

		if (!p)
			return -ENOMEM;
		r->entries = p;
		r->size = size;
	}
	e = &r->entries[r->nr];
	memset(e, 0, sizeof(*e));
	e->j = malloc(bytes);
	if (!e->j)
		return -ENOMEM;
	memcpy(e->j, js, bytes);
	e->seq = seq;
	e->devs[e->nr_devs++] = dev_idx;
	r->nr++;
	return 0;
}

static int journal_read_dev(struct tfs_journal_read *r, struct tfs_journal_read_dev *rd,
			    const struct tfs_journal_dev *d, const struct tfs_journal_opts *opts,
			    u64 magic)
{
	void *buf = tfs_bdev_alloc_buf(d->bdev, d->bucket_size);
	u64 best = 0;
	int ret = 0, read_errs = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned b = 0; b < d->nr_buckets; b++) {
		u64 base = d->buckets[b] * d->bucket_size;

		/* Reported here, in the journal's terms (QUIET: the device prints nothing). */
		struct tfs_bio bio = {
			.bdev = d->bdev,
			.op = TFS_OP_read,
			.flags = TFS_BIO_QUIET,
			.tag = TFS_TAG_journal,
			.offset = base,
			.buf = buf,
			.len = d->bucket_size,
		};

		ret = tfs_bio_submit_wait(&bio);
		if (ret) {
			fprintf(stderr,
				"journal: dev %u (%s): reading bucket %llu (ring index %u) failed "
				"(offset %llu): %s\n",
				d->dev_idx, d->bdev->path, (unsigned long long)d->buckets[b], b,
				(unsigned long long)base, tfs_err_str(ret));
			if (!rd->nr_read_errors++) {
				rd->bad_bucket = b;
				rd->read_err = ret;
			}
			read_errs++;
			ret = 0;
			continue;
		}
		for (u32 off = 0; off + sizeof(struct jset) <= d->bucket_size;) {
			const struct jset *js = (const void *)((u8 *)buf + off);
			struct printbuf msg = PRINTBUF;

			/* Free space or someone else's data: look at the next block. */
			if (le64_to_cpu(js->magic) != magic) {
				off += opts->block_size;
				continue;
			}
			int v = tfs_jset_validate(js, d->bucket_size - off, magic, &msg);

			if (v) {
				fprintf(stderr,
					"journal: dev %u (%s) bucket %llu (ring index %u) offset "
					"%u: corrupt entry: %s (%s)\n",
					d->dev_idx, d->bdev->path,
					(unsigned long long)d->buckets[b], b, off,
					printbuf_str(&msg), tfs_err_str(v));
				printbuf_exit(&msg);
				r->nr_corrupt++;
				rd->nr_corrupt++;
				off += opts->block_size;
				continue;
			}
			u64 seq = le64_to_cpu(js->seq);

			/*
			 * A writer's entry never spans more seqs than its pin
			 * fifo holds (last_seq..seq are all in it); more is
			 * garbage that happens to checksum, and trusting it
			 * would make seq ranges absurd.
			 */
			if (opts->pin_fifo_size &&
			    seq - le64_to_cpu(js->last_seq) >= opts->pin_fifo_size) {
				fprintf(stderr,
					"journal: dev %u (%s) bucket %llu (ring index %u) offset "
					"%u: corrupt entry: seq %llu, last_seq %llu: spans more "
					"seqs than a pin fifo of %u holds (%s)\n",
					d->dev_idx, d->bdev->path,
					(unsigned long long)d->buckets[b], b, off,
					(unsigned long long)seq,
					(unsigned long long)le64_to_cpu(js->last_seq),
					opts->pin_fifo_size,
					tfs_err_str(-TFS_ERR_journal_entry_invalid));
				printbuf_exit(&msg);
				r->nr_corrupt++;
				rd->nr_corrupt++;
				off += opts->block_size;
				continue;
			}
			printbuf_exit(&msg);

			u32 bytes =
				round_up(tfs_jset_bytes(le32_to_cpu(js->u64s)), opts->block_size);

			ret = read_add(r, js, d->dev_idx, d, b, off);
			if (ret)
				goto out;
			rd->nr_entries++;
			rd->bucket_seq[b] = max_t(u64, rd->bucket_seq[b], seq);
			if (seq > best) {
				best = seq;
				rd->cur_idx = b;
				rd->cur_offset = min_t(u32, off + bytes, d->bucket_size);
			}
			off += bytes;
		}
	}
	if (read_errs == (int)d->nr_buckets)
		ret = -TFS_ERR_journal_read;
out:
	free(buf);
	return ret;
}

/*
 * With a bucket unreadable anywhere, the read is trusted only if members
 * read without errors hold a good copy of every seq from `from` to max_seq.
 */
static int read_check_errors(const struct tfs_journal_read *r, u64 from, struct printbuf *err)
{
	bool clean[TFS_JOURNAL_MAX_DEVS] = { 0 }, any_err = false, any_clean_entry = false;
	u64 uncovered = 0;

	for (unsigned i = 0; i < r->nr_devs; i++) {
		clean[i] = !r->devs[i].nr_read_errors;
		any_err |= !clean[i];
	}
	if (!any_err)
		return 0;
	for (unsigned i = 0; i < r->nr; i++) {
		const struct tfs_journal_read_entry *e = &r->entries[i];
		bool ok = false;

		for (unsigned k = 0; k < e->nr_devs; k++)
			for (unsigned d = 0; d < r->nr_devs; d++)
				if (r->devs[d].dev_idx == e->devs[k] && clean[d])
					ok = true;
		any_clean_entry |= ok;
		if (e->seq >= from && !ok && !uncovered)
			uncovered = e->seq;
	}
	if (!uncovered && any_clean_entry)
		return 0;
	for (unsigned i = 0; i < r->nr_devs; i++) {
		const struct tfs_journal_read_dev *rd = &r->devs[i];

		if (!rd->nr_read_errors)
			continue;
		prt_printf(err, "%sjournal: dev %u: ring index %u unreadable (%s",
			   err->pos ? "; " : "", rd->dev_idx, rd->bad_bucket,
			   tfs_err_str(rd->read_err));
		if (rd->nr_read_errors > 1)
			prt_printf(err, ", %u buckets in all", rd->nr_read_errors);
		prt_str(err, ")");
	}
	if (uncovered)
		prt_printf(err, "; seq %llu has no copy on a member read without errors",
			   (unsigned long long)uncovered);
	else
		prt_str(err, "; no member read without errors holds any entry");
	prt_str(err, ": entries may be missing, not trusting the journal");
	return -TFS_ERR_journal_read;
}

#define read_bl tfs_journal_seq_range

/* Every blacklist range of every entry read (few: one per run). */
static int read_blacklist_collect(const struct tfs_journal_read *r, struct read_bl **ret,
				  unsigned *nr)
{
	struct read_bl *bl = NULL;
	unsigned n = 0, size = 0;

	for (unsigned i = 0; i < r->nr; i++) {
		const struct jset *js = r->entries[i].j;
		const __le64 *end = js->_data + le32_to_cpu(js->u64s);

		for (const struct jset_entry *e = (const void *)js->_data; (const __le64 *)e < end;
		     e = tfs_jset_entry_next((struct jset_entry *)e)) {
			const struct jset_blacklist *b = (const void *)e->_data;

			if (e->type != TFS_JSET_ENTRY_blacklist)
				continue;
			if (n == size) {
				size = size ? 2 * size : 8;
				void *p = realloc(bl, size * sizeof(*bl));

				if (!p) {
					free(bl);
					return -ENOMEM;
				}
				bl = p;
			}
			bl[n++] = (struct read_bl){ le64_to_cpu(b->start), le64_to_cpu(b->end) };
		}
	}
	*ret = bl;
	*nr = n;
	return 0;
}

/* The end of a blacklist range holding seq, or 0. */
static u64 read_blacklisted_to(const struct read_bl *bl, unsigned nr, u64 seq)
{
	u64 to = 0;

	for (unsigned i = 0; i < nr; i++)
		if (seq >= bl[i].start && seq <= bl[i].end)
			to = max_t(u64, to, bl[i].end);
	return to;
}

/*
 * Seqs lo..hi are not on any member: counts and reports the parts no
 * blacklist range voids, range by range (never seq by seq: a corrupt seq
 * can make the range huge).
 */
static void read_report_gap(struct tfs_journal_read *r, const struct read_bl *bl, unsigned nr,
			    u64 lo, u64 hi, struct printbuf *err)
{
	u64 s = lo;

	while (s <= hi) {
		u64 to = read_blacklisted_to(bl, nr, s);

		if (to) {
			if (to >= hi)
				break;
			s = to + 1;
			continue;
		}
		/* Up to the next blacklist range starting inside. */
		u64 end = hi;

		for (unsigned i = 0; i < nr; i++)
			if (bl[i].start > s && bl[i].start <= end)
				end = bl[i].start - 1;
		r->nr_gaps += end - s + 1;
		prt_printf(err, "%sjournal: seqs %llu..%llu missing (replay needs %llu..%llu)",
			   err->pos ? "; " : "", (unsigned long long)s, (unsigned long long)end,
			   (unsigned long long)r->last_seq, (unsigned long long)r->newest_seq);
		if (end >= hi)
			break;
		s = end + 1;
	}
}

/* Whether e is a post-flush entry (journal_format.h). */
static bool read_is_post_flush(const struct tfs_journal_read *r,
			       const struct tfs_journal_read_entry *e)
{
	return le32_to_cpu(e->j->flags) & TFS_JSET_post_flush;
}

/* Whether every seq in (from, to] is here (or void: blacklisted). */
static bool read_window_whole(const struct tfs_journal_read *r, u64 from, u64 to)
{
	u64 want = from + 1;

	for (unsigned i = 0; i < r->nr && r->entries[i].seq <= to; i++) {
		u64 seq = r->entries[i].seq;

		if (seq < want)
			continue;
		while (seq > want) {
			u64 bl = read_blacklisted_to(r->blacklist, r->nr_blacklist, want);

			if (!bl)
				return false;
			want = bl + 1;
		}
		want = seq + 1;
	}
	while (want <= to) {
		u64 bl = read_blacklisted_to(r->blacklist, r->nr_blacklist, want);

		if (!bl)
			return false;
		want = bl + 1;
	}
	return true;
}

/*
 * Makes newest the entry replay ends at: its last_seq, what is not trusted
 * after it, and the continuity of last_seq .. newest (-TFS_ERR_journal_gap,
 * reported in err) or -TFS_ERR_journal_read (read_check_errors()).
 */
static int read_set_newest(struct tfs_journal_read *r, const struct tfs_journal_read_entry *newest,
			   struct printbuf *err)
{
	int ret;

	r->newest_seq = newest->seq;
	r->last_seq = le64_to_cpu(newest->j->last_seq);
	ret = read_check_errors(r, r->last_seq, err);
	if (ret)
		return ret;
	r->blacklist_start = r->max_seq > r->newest_seq ? r->newest_seq + 1 : 0;
	for (unsigned i = 0; i < r->nr; i++)
		r->entries[i].after_flush =
			r->entries[i].seq > r->newest_seq && !r->entries[i].blacklisted;

	/*
	 * Continuity: every seq replay needs must be here (void ones
	 * excepted).  Gaps are found between sorted neighbours, never by
	 * walking seqs one by one.
	 */
	u64 want = max_t(u64, r->last_seq, 1);

	r->nr_gaps = 0;
	for (unsigned i = 0; i < r->nr && r->entries[i].seq <= r->newest_seq; i++) {
		u64 seq = r->entries[i].seq;

		if (seq < want)
			continue;
		if (seq > want)
			read_report_gap(r, r->blacklist, r->nr_blacklist, want, seq - 1, err);
		want = seq + 1;
	}
	return r->nr_gaps ? -TFS_ERR_journal_gap : 0;
}

int tfs_journal_read(const struct tfs_journal_dev *devs, unsigned nr,
		     const struct tfs_journal_opts *opts, struct tfs_journal_read **ret,
		     struct printbuf *err)
{
	struct tfs_journal_read *r;
	u64 magic = tfs_jset_magic(opts->uuid);
	unsigned devs_ok = 0;
	int ret2 = 0;

	*ret = NULL;
	if (!nr || nr > TFS_JOURNAL_MAX_DEVS)
		return -TFS_ERR_invalid_argument;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->nr_devs = nr;
	for (unsigned i = 0; i < nr; i++) {
		struct tfs_journal_read_dev *rd = &r->devs[i];

		rd->dev_idx = devs[i].dev_idx;
		rd->nr_buckets = devs[i].nr_buckets;
		rd->bucket_seq = calloc(devs[i].nr_buckets, sizeof(u64));
		if (!rd->bucket_seq) {
			ret2 = -ENOMEM;
			goto err;
		}
		int v = journal_read_dev(r, rd, &devs[i], opts, magic);

		if (v == -ENOMEM) {
			ret2 = v;
			goto err;
		}
		devs_ok += !v;
	}
	if (!devs_ok) {
		prt_printf(err, "journal: no device could be read");
		ret2 = -TFS_ERR_journal_read;
		goto err;
	}
	if (r->nr)
		qsort(r->entries, r->nr, sizeof(*r->entries), read_entry_cmp);

	struct read_bl *bl = NULL;
	unsigned nr_bl = 0;

	ret2 = read_blacklist_collect(r, &bl, &nr_bl);
	if (ret2)
		goto err;
	/* Kept with the read: a restarted journal never calls those seqs durable. */
	r->blacklist = bl;
	r->nr_blacklist = nr_bl;

	const struct tfs_journal_read_entry *newest = NULL, *prev = NULL;

	for (unsigned i = 0; i < r->nr; i++) {
		struct tfs_journal_read_entry *e = &r->entries[i];

		r->max_seq = max_t(u64, r->max_seq, e->seq);
		e->blacklisted = read_blacklisted_to(bl, nr_bl, e->seq) != 0;
		if (!e->blacklisted && !(le32_to_cpu(e->j->flags) & TFS_JSET_no_flush)) {
			prev = newest;
			newest = e;
		}
	}
	if (!newest) {
		ret2 = read_check_errors(r, 0, err);
		if (ret2)
			goto err;
		/* Nothing durable in order: start after everything, trusting nothing. */
		r->blacklist_start = r->nr ? r->entries[0].seq : 0;
		for (unsigned i = 0; i < r->nr; i++)
			r->entries[i].after_flush = !r->entries[i].blacklisted;
		*ret = r;
		prt_printf(err, "journal: no flush entry found (%u entries, %llu corrupt)", r->nr,
			   (unsigned long long)r->nr_corrupt);
		return -TFS_ERR_journal_empty;
	}
	/*
	 * A post-flush newest entry whose window (the entries since the flush
	 * entry before it, from its last_seq on: older ones it does not need,
	 * and once it completed their buckets may be reused) is not all here:
	 * its flush did not complete, so it was never acknowledged -- replay
	 * ends at the flush entry before it.
	 */
	bool read_errors = false;

	for (unsigned i = 0; i < r->nr_devs; i++)
		read_errors |= r->devs[i].nr_read_errors != 0;
	/* (With a bucket unreadable, a missing entry proves nothing: read_check_errors().) */
	if (prev && !read_errors && read_is_post_flush(r, newest) &&
	    !read_window_whole(r, max_t(u64, prev->seq, le64_to_cpu(newest->j->last_seq) - 1),
			       newest->seq)) {
		fprintf(stderr,
			"journal: post-flush entry seq %llu not trusted: entries after flush entry "
			"%llu are missing (its flush did not complete); replay ends at seq %llu\n",
			(unsigned long long)newest->seq, (unsigned long long)prev->seq,
			(unsigned long long)prev->seq);
		r->post_flush_dropped = newest->seq;
		newest = prev;
	}
	r->prev_flush_seq = 0;
	for (unsigned i = 0; i < r->nr && r->entries[i].seq < newest->seq; i++)
		if (!r->entries[i].blacklisted &&
		    !(le32_to_cpu(r->entries[i].j->flags) & TFS_JSET_no_flush))
			r->prev_flush_seq = r->entries[i].seq;
	ret2 = read_set_newest(r, newest, err);
	if (ret2 && ret2 != -TFS_ERR_journal_gap)
		goto err;
	*ret = r;
	return ret2;
err:
	tfs_journal_read_free(r);
	return ret2;
}

static const struct tfs_journal_read_entry *read_entry_find(const struct tfs_journal_read *r,
							    u64 seq)
{
	for (unsigned i = 0; i < r->nr; i++)
		if (r->entries[i].seq == seq)
			return &r->entries[i];
	return NULL;
}

int tfs_journal_read_verify_tail(struct tfs_journal_read *r, tfs_journal_verify_key_fn check,
				 void *ctx, struct printbuf *err)
{
	const struct tfs_journal_read_entry *f, *p;
	u64 from, bad_seq = 0;
	int ret = 0;

	/*
	 * Already dropped one (its window incomplete): the flush entry before
	 * it completed before it was written, so it needs no check.
	 */
	if (!r || !r->newest_seq || r->post_flush_dropped)
		return 0;
	f = read_entry_find(r, r->newest_seq);
	if (!f || !read_is_post_flush(r, f))
		return 0;
	p = r->prev_flush_seq ? read_entry_find(r, r->prev_flush_seq) : NULL;
	/*
	 * The window: after the flush entry before it, and from its last_seq
	 * on (what it replays; a key of an older entry reaches its state only
	 * through a later entry or a node write, which would have ruled out
	 * post-flush).
	 */
	from = max_t(u64, p ? p->seq + 1 : 0, r->last_seq);
	for (unsigned i = 0; i < r->nr && !bad_seq; i++) {
		const struct tfs_journal_read_entry *re = &r->entries[i];
		const struct jset *js = re->j;
		const __le64 *end = js->_data + le32_to_cpu(js->u64s);

		if (re->seq < from || re->seq > r->newest_seq || re->blacklisted)
			continue;
		for (const struct jset_entry *e = (const void *)js->_data;
		     (const __le64 *)e < end && !bad_seq;
		     e = tfs_jset_entry_next((struct jset_entry *)e)) {
			const __le64 *e_end = e->_data + le16_to_cpu(e->u64s);

			if (e->type != TFS_JSET_ENTRY_btree_keys)
				continue;
			/*
			 * Re-keyed pieces of data written before: durable
			 * before the window, or checked with the key that
			 * wrote them in it.  Reading them would turn a bad
			 * old block into a dropped fsync, and cost reads
			 * post_flush_max_bytes does not bound.
			 */
			if (e->flags & TFS_JSET_KEYS_old_data) {
				for (const __le64 *k = e->_data; k < e_end; k += tfs_jkey_u64s(k))
					r->nr_old_data_keys++;
				continue;
			}
			for (const __le64 *k = e->_data; k < e_end; k += tfs_jkey_u64s(k)) {
				ret = check(ctx, re->seq, e->btree_id, e->level, k);
				if (ret < 0)
					return ret;
				r->nr_verified_keys++;
				if (ret) {
					bad_seq = re->seq;
					break;
				}
			}
		}
	}
	if (!bad_seq) {
		r->post_flush_verified = r->newest_seq;
		return 0;
	}
	if (!p) {
		/*
		 * No older flush entry is left on disk: buckets were reused
		 * after this one's flush completed, so it was durable -- what
		 * did not check out is damage, reported when read.
		 */
		fprintf(stderr,
			"journal: post-flush entry seq %llu: data of seq %llu does not match its "
			"checksums, but no older flush entry is left; trusting it\n",
			(unsigned long long)r->newest_seq, (unsigned long long)bad_seq);
		return 0;
	}
	fprintf(stderr,
		"journal: post-flush entry seq %llu not trusted: data written by seq %llu is not "
		"on disk (its flush did not complete); replay ends at seq %llu\n",
		(unsigned long long)r->newest_seq, (unsigned long long)bad_seq,
		(unsigned long long)p->seq);
	r->post_flush_dropped = r->newest_seq;
	r->prev_flush_seq = 0;
	for (unsigned i = 0; i < r->nr && r->entries[i].seq < p->seq; i++)
		if (!r->entries[i].blacklisted &&
		    !(le32_to_cpu(r->entries[i].j->flags) & TFS_JSET_no_flush))
			r->prev_flush_seq = r->entries[i].seq;
	return read_set_newest(r, p, err);
}

void tfs_journal_read_free(struct tfs_journal_read *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->nr; i++)
		free(r->entries[i].j);
	free(r->entries);
	for (unsigned i = 0; i < r->nr_devs; i++)
		free(r->devs[i].bucket_seq);
	free(r->blacklist);
	free(r);
}

int tfs_journal_replay(const struct tfs_journal_read *r, const struct tfs_journal_replay_ops *ops,
		       void *ctx)
{
	for (unsigned i = 0; i < r->nr; i++) {
		const struct tfs_journal_read_entry *re = &r->entries[i];
		const struct jset *js = re->j;
		const __le64 *end = js->_data + le32_to_cpu(js->u64s);

		if (re->seq < r->last_seq || re->seq > r->newest_seq || re->blacklisted)
			continue;
		for (const struct jset_entry *e = (const void *)js->_data; (const __le64 *)e < end;
		     e = tfs_jset_entry_next((struct jset_entry *)e)) {
			const __le64 *e_end = e->_data + le16_to_cpu(e->u64s);
			int ret = 0;

			if (e->type == TFS_JSET_ENTRY_blacklist)
				continue;
			if (e->type == TFS_JSET_ENTRY_btree_keys) {
				if (!ops->key)
					continue;
				for (const __le64 *k = e->_data; k < e_end && !ret;
				     k += tfs_jkey_u64s(k))
					ret = ops->key(ctx, re->seq, e->btree_id, e->level, k);
			} else if (ops->entry) {
				ret = ops->entry(ctx, re->seq, e);
			}
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* --- text --- */

void tfs_jset_to_text(struct printbuf *out, const struct jset *js)
{
	u32 u64s = le32_to_cpu(js->u64s);
	u32 flags = le32_to_cpu(js->flags);
	const __le64 *end = js->_data + u64s;

	prt_printf(out, "seq %llu last_seq %llu flags %s u64s %u (",
		   (unsigned long long)le64_to_cpu(js->seq),
		   (unsigned long long)le64_to_cpu(js->last_seq),
		   flags & TFS_JSET_no_flush	 ? "no_flush"
		   : flags & TFS_JSET_post_flush ? "post_flush"
						 : "flush",
		   u64s);
	prt_units_u64(out, tfs_jset_bytes(u64s));
	prt_printf(out, ") csum %08llx\n", (unsigned long long)le64_to_cpu(js->csum));
	printbuf_indent_add(out, 2);
	for (const struct jset_entry *e = (const void *)js->_data; (const __le64 *)e < end;
	     e = tfs_jset_entry_next((struct jset_entry *)e)) {
		unsigned n = le16_to_cpu(e->u64s);
		const __le64 *e_end = e->_data + n;

		/* Zero-filled holes of unused reservations. */
		if (e->type == TFS_JSET_ENTRY_btree_keys && !n)
			continue;
		prt_printf(out, "%s",
			   e->type < TFS_JSET_ENTRY_NR ? jset_entry_type_names[e->type]
						       : "unknown");
		switch (e->type) {
		case TFS_JSET_ENTRY_btree_keys:
		case TFS_JSET_ENTRY_btree_root: {
			unsigned nr = 0;

			for (const __le64 *k = e->_data; k < e_end; k += tfs_jkey_u64s(k))
				nr++;
			prt_printf(out, " btree %u level %u: %u keys, %u u64s%s\n", e->btree_id,
				   e->level, nr, n,
				   e->flags & TFS_JSET_KEYS_old_data ? " (old data)" : "");
			printbuf_indent_add(out, 2);
			for (const __le64 *k = e->_data; k < e_end; k += tfs_jkey_u64s(k)) {
				unsigned ku = tfs_jkey_u64s(k);

				prt_printf(out, "key %u u64s: ", ku);
				prt_hex_bytes(out, k, min_t(unsigned, ku, 4) * 8, 8, ' ');
				prt_str(out, ku > 4 ? " ...\n" : "\n");
			}
			printbuf_indent_sub(out, 2);
			break;
		}
		case TFS_JSET_ENTRY_usage: {
			const struct jset_usage *u = (const void *)e->_data;

			prt_printf(out, " kind %u dev %u: %llu\n", le32_to_cpu(u->kind),
				   le32_to_cpu(u->dev), (unsigned long long)le64_to_cpu(u->value));
			break;
		}
		case TFS_JSET_ENTRY_blacklist: {
			const struct jset_blacklist *bl = (const void *)e->_data;

			prt_printf(out, " %llu..%llu\n", (unsigned long long)le64_to_cpu(bl->start),
				   (unsigned long long)le64_to_cpu(bl->end));
			break;
		}
		default:
			prt_printf(out, " type %u, %u u64s\n", e->type, n);
		}
	}
	printbuf_indent_sub(out, 2);
}

void tfs_journal_read_to_text(struct printbuf *out, const struct tfs_journal_read *r, u64 from,
			      u64 to)
{
	printbuf_tabstop_push(out, 20);
	prt_printf(out, "entries:\t%u (%llu corrupt)\n", r->nr, (unsigned long long)r->nr_corrupt);
	prt_printf(out, "replay:\t%llu..%llu\n", (unsigned long long)r->last_seq,
		   (unsigned long long)r->newest_seq);
	prt_printf(out, "highest seq:\t%llu\n", (unsigned long long)r->max_seq);
	if (r->blacklist_start)
		prt_printf(out, "not trusted:\t%llu..%llu (after the newest flush entry)\n",
			   (unsigned long long)r->blacklist_start, (unsigned long long)r->max_seq);
	prt_printf(out, "missing:\t%llu\n", (unsigned long long)r->nr_gaps);
	if (r->post_flush_dropped)
		prt_printf(out, "dropped:\t%llu (post-flush entry whose flush did not complete)\n",
			   (unsigned long long)r->post_flush_dropped);
	if (r->post_flush_verified)
		prt_printf(out,
			   "verified:\t%llu (post-flush entry, %llu keys checked, %llu of old data "
			   "not)\n",
			   (unsigned long long)r->post_flush_verified,
			   (unsigned long long)r->nr_verified_keys,
			   (unsigned long long)r->nr_old_data_keys);
	for (unsigned i = 0; i < r->nr_devs; i++) {
		const struct tfs_journal_read_dev *rd = &r->devs[i];

		prt_printf(
			out,
			"dev %u:\t%llu entries, %llu corrupt, next write at ring index %u offset %u\n",
			rd->dev_idx, (unsigned long long)rd->nr_entries,
			(unsigned long long)rd->nr_corrupt, rd->cur_idx, rd->cur_offset);
	}
	printbuf_tabstop_pop(out);
	for (unsigned i = 0; i < r->nr; i++) {
		const struct tfs_journal_read_entry *e = &r->entries[i];

		if (e->seq < from || (to && e->seq > to))
			continue;
		prt_printf(out, "\non dev");
		for (unsigned k = 0; k < e->nr_devs; k++)
			prt_printf(out, "%s%u", k ? "," : " ", e->devs[k]);
		if (e->blacklisted)
			prt_str(out, " [blacklisted]");
		else if (e->after_flush)
			prt_str(out, " [after the newest flush entry: not replayed]");
		else if (e->seq < r->last_seq)
			prt_str(out, " [before last_seq: not replayed]");
		prt_str(out, ": ");
		tfs_jset_to_text(out, e->j);
	}
}
