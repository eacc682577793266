// SPDX-License-Identifier: GPL-2.0
/*
 * The allocator (fs/alloc.h): per member, a bitmap of blocks from the
 * first bucket on; journal buckets are set at init and never handed out.
 * Runs freed by a commit wait on a list until the journal says that
 * commit is durable and settled (settled_seq_ondisk), and are released
 * lazily by the next call that looks.  A reserve of blocks per member is kept for
 * metadata, so node write-back never fails for space data took.
 *
 * Small allocations reuse space released lately before taking new space at
 * the cursor.  On an image file, a block never written is a hole of the
 * host's file: writing it makes the host allocate, and the fdatasync that
 * makes it durable then commits the host's journal too (about 220 us against
 * 135 us for a block written before, on this VM's ext4).  A copy-on-write
 * overwrite (an append to a file's last block, a 4 KiB random write) frees
 * the block it replaces, so the next one can land there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/alloc.h"
#include "fs/fs_format.h"
#include "fs/fs_types.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"

static bool bit_test(const u64 *bits, u64 i)
{
	return bits[i / 64] & (1ULL << (i % 64));
}

static void bits_set(u64 *bits, u64 start, u64 nr, bool v)
{
	for (u64 i = start; i < start + nr; i++) {
		if (v)
			bits[i / 64] |= 1ULL << (i % 64);
		else
			bits[i / 64] &= ~(1ULL << (i % 64));
	}
}

/* Number of set bits in [start, start + nr). */
static u64 bits_count(const u64 *bits, u64 start, u64 nr)
{
	u64 n = 0;

	for (u64 i = start; i < start + nr; i++)
		n += bit_test(bits, i);
	return n;
}

/*
 * Free node runs: node-size chunks of blocks, aligned from the member's
 * start, every block free (not used, not waiting).  A node copy needs a
 * contiguous run of node_size; data taken a block at a time can leave
 * plenty of free blocks and no such run, so write-back could find no room
 * although the block reserve was whole.  d->free_chunks counts them,
 * updated by dev_set(); data allocations asked to spare them
 * (TFS_ALLOC_SPARE_NODE_RUNS) take no block of one.
 */
static bool chunk_free(const struct tfs_alloc *a, const struct tfs_alloc_dev *d, u64 c)
{
	u64 cb = a->chunk_blocks;

	return (c + 1) * cb <= d->nr_blocks && !bits_count(d->bits, c * cb, cb);
}

static u64 chunks_free(const struct tfs_alloc *a, const struct tfs_alloc_dev *d, u64 c0, u64 c1)
{
	u64 n = 0;

	for (u64 c = c0; c <= c1; c++)
		n += chunk_free(a, d, c);
	return n;
}

/* bits_set() on a member's bitmap, keeping its count of free node runs. */
static void dev_set(struct tfs_alloc *a, struct tfs_alloc_dev *d, u64 start, u64 nr, bool v)
{
	u64 c0 = start / a->chunk_blocks, c1 = (start + nr - 1) / a->chunk_blocks;
	u64 before = chunks_free(a, d, c0, c1);

	bits_set(d->bits, start, nr, v);
	d->free_chunks = d->free_chunks - before + chunks_free(a, d, c0, c1);
}

int tfs_alloc_init(struct tfs_fs *fs)
{
	struct tfs_alloc *a = &fs->alloc;

	pthread_mutex_init(&a->lock, NULL);
	a->block_size = fs->block_size;
	a->chunk_blocks = max_t(u32, fs->node_size / fs->block_size, 1);
	a->nr_devs = fs->nr_devices;
	for (unsigned i = 0; i < fs->nr_devices; i++) {
		struct tfs_alloc_dev *d = &a->devs[i];
		struct tfs_fs_dev *fd = &fs->devs[i];
		const struct tfs_member *m;

		if (!fd->present) {
			/*
			 * A missing member (degraded): no bitmap, nothing allocated
			 * there, but its geometry from another member's superblock,
			 * so commits keep its alloc keys in step with the extents.
			 */
			for (unsigned k = 0; k < fs->nr_devices && !d->bucket_size; k++)
				if (fs->devs[k].present) {
					m = tfs_sb_member(fs->devs[k].sb.sb, i);
					d->bucket_size = le32_to_cpu(m->bucket_size);
					d->start = le64_to_cpu(m->first_bucket) * d->bucket_size;
					d->end = le64_to_cpu(m->nbuckets) * d->bucket_size;
				}
			if (d->bucket_size / a->block_size > TFS_ALLOC_MAX_BUCKET_BLOCKS)
				d->bucket_size = 0; /* refused when the member is present */
			continue;
		}
		m = tfs_sb_member(fd->sb.sb, i);
		d->bucket_size = le32_to_cpu(m->bucket_size);
		d->start = le64_to_cpu(m->first_bucket) * d->bucket_size;
		d->end = le64_to_cpu(m->nbuckets) * d->bucket_size;
		if (d->end > fd->bdev->size)
			d->end = round_down(fd->bdev->size, d->bucket_size);
		if (d->end <= d->start)
			continue;
		if (d->bucket_size / a->block_size > TFS_ALLOC_MAX_BUCKET_BLOCKS) {
			/* An alloc key's bitmap covers one bucket (fs/fs_format.h). */
			fprintf(stderr, "member %u: %u blocks per bucket (at most %u supported)\n",
				i, d->bucket_size / a->block_size, TFS_ALLOC_MAX_BUCKET_BLOCKS);
			return -TFS_ERR_invalid_sb_options;
		}
		d->nr_blocks = (d->end - d->start) / a->block_size;
		d->bits = calloc(DIV_ROUND_UP(d->nr_blocks, 64), sizeof(u64));
		if (!d->bits)
			return -ENOMEM;
		d->present = m->state == TFS_MEMBER_rw;
		d->capacity = d->nr_blocks;
		/* Journal buckets are never handed out. */
		for (unsigned b = 0; b < fd->nr_journal_buckets; b++) {
			u64 off = fd->journal_buckets[b] * d->bucket_size;

			if (off < d->start || off + d->bucket_size > d->end)
				continue;
			bits_set(d->bits, (off - d->start) / a->block_size,
				 d->bucket_size / a->block_size, true);
			d->capacity -= d->bucket_size / a->block_size;
		}
		d->free_chunks = chunks_free(a, d, 0, d->nr_blocks / a->chunk_blocks);
		/*
		 * A small reserve: 1/64 of the space or 8 buckets, whichever is
		 * smaller, but room for 64 nodes (at most 1/8 of the space): a
		 * write-back copies every dirty node while the old copies wait
		 * for its root entry, and each data write dirties two trees
		 * (extents and alloc): 8 nodes ran out in a 24 MiB image.
		 */
		u64 r = min_t(u64, d->capacity / 64, 8ULL * d->bucket_size / a->block_size);
		u64 r_nodes = min_t(u64, d->capacity / 8, 64ULL * fs->node_size / a->block_size);

		r = max_t(u64, r, r_nodes);

		if (r > a->reserve)
			a->reserve = r;
	}
	return 0;
}

void tfs_alloc_exit(struct tfs_fs *fs)
{
	struct tfs_alloc *a = &fs->alloc;

	for (unsigned i = 0; i < a->nr_devs; i++)
		free(a->devs[i].bits);
	free(a->waiting);
	pthread_mutex_destroy(&a->lock);
	memset(a, 0, sizeof(*a));
}

static u64 dev_free(const struct tfs_alloc_dev *d)
{
	return d->capacity - d->used - d->waiting;
}

/* Remembers a released run, dropping the oldest when the list is full. */
static void reuse_push_one(struct tfs_alloc_dev *d, u64 start, u64 nr)
{
	if (d->nr_reuse == TFS_ALLOC_REUSE_SLOTS) {
		memmove(d->reuse, d->reuse + 1, (TFS_ALLOC_REUSE_SLOTS - 1) * sizeof(d->reuse[0]));
		d->nr_reuse--;
	}
	d->reuse[d->nr_reuse++] = (struct tfs_alloc_reuse){ .start = start, .nr = nr };
}

/*
 * A released run may cross buckets (an extent written by several
 * allocations that happened to be contiguous), a run handed out must not:
 * one entry per bucket piece, the first few pieces only.
 */
static void reuse_push(struct tfs_alloc *a, struct tfs_alloc_dev *d, u64 start, u64 nr)
{
	u64 per_bucket = d->bucket_size / a->block_size;

	for (unsigned i = 0; nr && i < 4; i++) {
		u64 n = min_t(u64, nr, per_bucket - start % per_bucket); /* start: bucket-aligned */

		reuse_push_one(d, start, n);
		start += n;
		nr -= n;
	}
}

static void reuse_drop(struct tfs_alloc_dev *d, unsigned i)
{
	memmove(d->reuse + i, d->reuse + i + 1, (d->nr_reuse - i - 1) * sizeof(d->reuse[0]));
	d->nr_reuse--;
}

/*
 * The newest released run that still has want free blocks at its start:
 * its slot, or -1 if none.  Entries whose first block was taken since are
 * dropped (all newer than the slot returned).  With spare, a run inside a
 * free node run is left alone (dev_find_run()).  The entry is not taken
 * yet: the allocation may still fail, or shrink to what another replica
 * got (reuse_consume()).
 */
static int reuse_find(struct tfs_alloc *a, struct tfs_alloc_dev *d, u64 want, bool spare)
{
	for (unsigned i = d->nr_reuse; i-- > 0;) {
		struct tfs_alloc_reuse *r = &d->reuse[i];
		u64 n = 0, cb = a->chunk_blocks;

		while (n < r->nr && n < want && !bit_test(d->bits, r->start + n))
			n++;
		if (!n) {
			reuse_drop(d, i);
			continue;
		}
		if (n < want)
			continue;
		if (spare) {
			bool in_free_chunk = false;

			for (u64 c = r->start / cb; c <= (r->start + n - 1) / cb; c++)
				in_free_chunk |= chunk_free(a, d, c);
			if (in_free_chunk)
				continue;
		}
		return (int)i;
	}
	return -1;
}

/* The first nr blocks of reuse slot i were handed out: what is left of it stays. */
static void reuse_consume(struct tfs_alloc_dev *d, int i, u64 nr)
{
	struct tfs_alloc_reuse *r = &d->reuse[i];

	if (r->nr > nr) {
		r->start += nr;
		r->nr -= nr;
	} else {
		reuse_drop(d, (unsigned)i);
	}
}

/* Releases the waiting runs whose commit is durable now. */
static void alloc_release_locked(struct tfs_fs *fs)
{
	struct tfs_alloc *a = &fs->alloc;
	/*
	 * Settled, not merely flushed: a post-flush entry that replay may
	 * still drop (its data failing the check) must not find the space its
	 * older state refers to rewritten (journal.h).
	 */
	u64 durable = fs->j ? tfs_journal_settled_seq_ondisk(fs->j) : 0, min_seq = UINT64_MAX;
	size_t k = 0;

	/*
	 * Called on every allocation and free: while the journal has not
	 * settled the oldest waiting commit there is nothing to release, and
	 * the scan (thousands of runs during a tree copy) is skipped.
	 */
	if (!a->nr_waiting || durable < a->waiting_min_seq)
		return;
	for (size_t i = 0; i < a->nr_waiting; i++) {
		struct tfs_alloc_waiting *w = &a->waiting[i];

		if (w->seq <= durable) {
			struct tfs_alloc_dev *d = &a->devs[w->run.dev];
			u64 blk = (w->run.offset - d->start) / a->block_size;
			u64 nr = w->run.len / a->block_size;

			dev_set(a, d, blk, nr, false);
			d->waiting -= nr;
			a->nr_released++;
			reuse_push(a, d, blk, nr);
		} else {
			min_seq = min_t(u64, min_seq, w->seq);
			a->waiting[k++] = *w;
		}
	}
	a->nr_waiting = k;
	a->waiting_min_seq = min_seq;
}

/*
 * The longest free run of at most want blocks (and at least min) on d,
 * next-fit from the cursor, never crossing a bucket boundary; a small one
 * comes from the reuse list if it can (*reuse_slot: its slot, which the
 * caller consumes once the run is handed out; else -1).  Returns its
 * length (0: none) and its first block in *start.
 */
static u64 dev_find_run(struct tfs_alloc *a, struct tfs_alloc_dev *d, u64 want, u64 min, bool spare,
			u64 *start, int *reuse_slot)
{
	u64 per_bucket = d->bucket_size / a->block_size, nb = d->nr_blocks;
	u64 best = 0, best_start = 0, run = 0, run_start = 0, s;

	/*
	 * No run is longer than a bucket: asking for more would never find
	 * "want" and so look at every block of the member on every call (a
	 * 1 MiB write or fallocate with 256 KiB buckets: seconds per GiB).
	 */
	want = min_t(u64, want, per_bucket);
	*reuse_slot = -1;
	if (want <= TFS_ALLOC_REUSE_MAX_BLOCKS && want >= min) {
		*reuse_slot = reuse_find(a, d, want, spare);
		if (*reuse_slot >= 0) {
			*start = d->reuse[*reuse_slot].start;
			return want;
		}
	}
	for (s = 0; s < nb; s++) {
		u64 i = (d->cursor + s) % nb;

		if (!i || !(i % per_bucket))
			run = 0; /* a run never crosses a bucket boundary (nor the wrap) */
		if (spare && (!s || !(i % a->chunk_blocks)) &&
		    chunk_free(a, d, i / a->chunk_blocks)) {
			/* A free node run: left whole for write-back. */
			run = 0;
			s += (i / a->chunk_blocks + 1) * a->chunk_blocks - i - 1;
			continue;
		}
		if (!(i % 64) && i + 64 <= nb && d->bits[i / 64] == ~0ULL) {
			run = 0;
			s += 63; /* a whole word in use */
			continue;
		}
		if (bit_test(d->bits, i)) {
			run = 0;
			continue;
		}
		if (!run)
			run_start = i;
		run++;
		if (run >= min && run > best) {
			best = run;
			best_start = run_start;
			if (best == want)
				break;
		}
	}
	a->nr_scanned += min_t(u64, s + 1, nb);
	*start = best_start;
	return best;
}

s64 tfs_alloc(struct tfs_fs *fs, u64 len, u64 min, unsigned nr_replicas, unsigned flags,
	      struct tfs_alloc_run *out)
{
	struct tfs_alloc *a = &fs->alloc;
	unsigned order[TFS_MAX_DEVICES], nr = 0;
	u64 want, min_b, got_start[TFS_MAX_DEVICES];
	u64 reserve = flags & TFS_ALLOC_METADATA ? 0 : a->reserve;

	if (!len || len % a->block_size || min % a->block_size || min > len || !nr_replicas ||
	    nr_replicas > TFS_MAX_REPLICAS)
		return -TFS_ERR_invalid_argument;
	want = len / a->block_size;
	min_b = max_t(u64, min / a->block_size, 1);

	pthread_mutex_lock(&a->lock);
	alloc_release_locked(fs);
	/* Members with room, most free first. */
	for (unsigned i = 0; i < a->nr_devs; i++)
		if (a->devs[i].present && a->devs[i].bits &&
		    dev_free(&a->devs[i]) >= min_b + reserve)
			order[nr++] = i;
	for (unsigned i = 1; i < nr; i++)
		for (unsigned k = i;
		     k > 0 && dev_free(&a->devs[order[k]]) > dev_free(&a->devs[order[k - 1]]);
		     k--) {
			unsigned t = order[k];

			order[k] = order[k - 1];
			order[k - 1] = t;
		}

	unsigned chosen[TFS_MAX_REPLICAS], nr_chosen = 0;
	int reuse_slot[TFS_MAX_REPLICAS];

	for (unsigned i = 0; i < nr && nr_chosen < nr_replicas; i++) {
		struct tfs_alloc_dev *d = &a->devs[order[i]];
		u64 s, n = dev_find_run(a, d, min_t(u64, want, dev_free(d) - reserve), min_b,
					(flags & TFS_ALLOC_SPARE_NODE_RUNS) && a->chunk_blocks > 1,
					&s, &reuse_slot[nr_chosen]);

		if (!n)
			continue;
		want = n; /* every replica gets the same length: shrink to the smallest */
		got_start[nr_chosen] = s;
		chosen[nr_chosen++] = order[i];
	}
	if (nr_chosen < nr_replicas) {
		a->nr_alloc_fail++;
		pthread_mutex_unlock(&a->lock);
		return -TFS_ERR_alloc_no_space;
	}
	bool reused = false;

	for (unsigned r = 0; r < nr_replicas; r++) {
		struct tfs_alloc_dev *d = &a->devs[chosen[r]];

		dev_set(a, d, got_start[r], want, true);
		d->used += want;
		if (reuse_slot[r] >= 0) { /* the cursor stays where fresh space starts */
			reuse_consume(d, reuse_slot[r], want);
			reused = true;
		} else {
			d->cursor = (got_start[r] + want) % d->nr_blocks;
		}
		out[r] = (struct tfs_alloc_run){
			.dev = chosen[r],
			.offset = d->start + got_start[r] * a->block_size,
			.len = want * a->block_size,
		};
	}
	a->nr_allocs++;
	a->nr_reused += reused; /* allocations, as nr_allocs: not replicas */
	pthread_mutex_unlock(&a->lock);
	return (s64)(want * a->block_size);
}

static bool run_ok(struct tfs_alloc *a, const struct tfs_alloc_run *run)
{
	const struct tfs_alloc_dev *d;

	if (run->dev >= a->nr_devs)
		return false;
	d = &a->devs[run->dev];
	return d->bits && run->len && run->offset >= d->start && run->offset + run->len <= d->end &&
	       !(run->offset % a->block_size) && !(run->len % a->block_size);
}

void tfs_alloc_free_now(struct tfs_fs *fs, const struct tfs_alloc_run *run)
{
	struct tfs_alloc *a = &fs->alloc;

	pthread_mutex_lock(&a->lock);
	if (run_ok(a, run)) {
		struct tfs_alloc_dev *d = &a->devs[run->dev];
		u64 blk = (run->offset - d->start) / a->block_size, nr = run->len / a->block_size;

		dev_set(a, d, blk, nr, false);
		d->used -= nr;
		a->nr_freed_now++;
	}
	pthread_mutex_unlock(&a->lock);
}

void tfs_alloc_free_after(struct tfs_fs *fs, const struct tfs_alloc_run *run, u64 seq)
{
	struct tfs_alloc *a = &fs->alloc;

	pthread_mutex_lock(&a->lock);
	if (run_ok(a, run)) {
		struct tfs_alloc_dev *d = &a->devs[run->dev];
		u64 nr = run->len / a->block_size;

		if (a->nr_waiting == a->size_waiting) {
			size_t size = a->size_waiting ? a->size_waiting * 2 : 64;
			struct tfs_alloc_waiting *w = realloc(a->waiting, size * sizeof(*w));

			if (!w) {
				/* No memory to remember it: the space stays used until the next open. */
				pthread_mutex_unlock(&a->lock);
				return;
			}
			a->waiting = w;
			a->size_waiting = size;
		}
		if (!a->nr_waiting || seq < a->waiting_min_seq)
			a->waiting_min_seq = seq;
		a->waiting[a->nr_waiting++] = (struct tfs_alloc_waiting){ .run = *run, .seq = seq };
		d->used -= nr;
		d->waiting += nr;
		a->nr_freed_after++;
		alloc_release_locked(fs);
	}
	pthread_mutex_unlock(&a->lock);
}

int tfs_alloc_mark_used(struct tfs_fs *fs, const struct tfs_alloc_run *run)
{
	struct tfs_alloc *a = &fs->alloc;
	int ret = 0;

	pthread_mutex_lock(&a->lock);
	if (!run_ok(a, run)) {
		ret = -TFS_ERR_invalid_argument;
	} else {
		struct tfs_alloc_dev *d = &a->devs[run->dev];
		u64 blk = (run->offset - d->start) / a->block_size, nr = run->len / a->block_size;
		u64 already = bits_count(d->bits, blk, nr);

		if (already) {
			/* Two references to one block (or a journal bucket): a corrupt image. */
			ret = -EEXIST;
		} else {
			dev_set(a, d, blk, nr, true);
			d->used += nr;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void tfs_alloc_usage(struct tfs_fs *fs, struct tfs_alloc_usage *u)
{
	struct tfs_alloc *a = &fs->alloc;

	memset(u, 0, sizeof(*u));
	pthread_mutex_lock(&a->lock);
	alloc_release_locked(fs);
	for (unsigned i = 0; i < a->nr_devs; i++) {
		const struct tfs_alloc_dev *d = &a->devs[i];

		if (!d->bits)
			continue;
		u->capacity += d->capacity * a->block_size;
		u->used += d->used * a->block_size;
		u->waiting += d->waiting * a->block_size;
		if (d->present && dev_free(d) > a->reserve)
			u->free += (dev_free(d) - a->reserve) * a->block_size;
		if (d->present)
			u->free_node_runs += d->free_chunks;
	}
	pthread_mutex_unlock(&a->lock);
}

void tfs_alloc_to_text(struct printbuf *out, struct tfs_fs *fs)
{
	struct tfs_alloc *a = &fs->alloc;

	pthread_mutex_lock(&a->lock);
	alloc_release_locked(fs);
	prt_printf(out, "allocator:\n");
	printbuf_indent_add(out, 2);
	for (unsigned i = 0; i < a->nr_devs; i++) {
		const struct tfs_alloc_dev *d = &a->devs[i];

		if (!d->bits)
			continue;
		prt_printf(out, "member %u:\tcapacity ", i);
		prt_units_u64(out, d->capacity * a->block_size);
		prt_str(out, ", used ");
		prt_units_u64(out, d->used * a->block_size);
		prt_str(out, ", waiting ");
		prt_units_u64(out, d->waiting * a->block_size);
		prt_str(out, ", free ");
		prt_units_u64(out, dev_free(d) * a->block_size);
		prt_str(out, ", reserve ");
		prt_units_u64(out, a->reserve * a->block_size);
		prt_str(out, d->present ? "\n" : " (not allocating)\n");
	}
	prt_printf(out,
		   "allocs:\t%llu (%llu failed); freed now %llu, after a commit %llu "
		   "(%llu released, %zu waiting); %llu from space released lately\n",
		   (unsigned long long)a->nr_allocs, (unsigned long long)a->nr_alloc_fail,
		   (unsigned long long)a->nr_freed_now, (unsigned long long)a->nr_freed_after,
		   (unsigned long long)a->nr_released, a->nr_waiting,
		   (unsigned long long)a->nr_reused);
	pthread_mutex_unlock(&a->lock);
	/* The on-disk counters: btree lookups, so not under the allocator's lock. */
	tfs_acct_to_text(out, fs);
	printbuf_indent_sub(out, 2);
}
