// SPDX-License-Identifier: GPL-2.0
/*
 * File data: read, write, truncate, fallocate, SEEK_DATA/SEEK_HOLE.
 *
 * Every write is copy-on-write: the new bytes of a block go to newly
 * allocated space (a partial block is read, merged and written whole),
 * the data is written (and flushed when the journal's flush does not
 * cover its member), and only then the extent is committed, with the old
 * space freed after that commit.  The one exception is space an unwritten
 * extent holds (fallocate): it was never readable (it reads as zeros), so
 * it is written in place and becomes readable with the commit that marks
 * it written.  A crash before that commit leaves it unwritten.
 */
#include <errno.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/alloc.h"
#include "fs/extents.h"
#include "fs/posix.h"
#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/errseq.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

/* Old extents one transaction handles at most (keeps it far below a journal entry). */
#define IO_BATCH_KEYS 128

/* --- bios --- */

struct io_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending;
};

static void io_end(struct tfs_bio *bio)
{
	struct io_wait *w = bio->private;

	pthread_mutex_lock(&w->lock);
	if (!--w->pending)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/*
 * Submits every bio and waits for all of them; each one's result is in
 * bio->result.  A bio without a device (a missing member) fails at once.
 */
static void submit_wait(struct tfs_bio *bios, unsigned nr)
{
	struct io_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1 };

	/* One bio (one replica): in this thread where the device can (tfs_bio_submit_wait()). */
	if (nr == 1 && bios[0].bdev) {
		bios[0].result = tfs_bio_submit_wait(&bios[0]);
		return;
	}
	for (unsigned i = 0; i < nr; i++) {
		if (!bios[i].bdev) {
			bios[i].result = -TFS_ERR_bdev_vanished;
			continue;
		}
		bios[i].private = &w;
		bios[i].end_io = io_end;
		pthread_mutex_lock(&w.lock);
		w.pending++;
		pthread_mutex_unlock(&w.lock);
		tfs_bio_submit(&bios[i]);
	}
	tfs_bdev_will_wait();
	pthread_mutex_lock(&w.lock);
	w.pending--;
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_lock(&w.lock);
	while (w.pending)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

static const char *dev_name(struct tfs_fs *fs, unsigned dev)
{
	struct tfs_bdev *b = tfs_posix_bdev(fs, dev);

	return b && b->path ? b->path : "(missing)";
}

/* --- allocation --- */

/*
 * The most one tfs_alloc() call can return: a run never crosses a bucket
 * boundary, so asking for more than the smallest member bucket only makes
 * the allocator look, in vain, for a longer run (a scan of the member's
 * whole bitmap per call: measured, 3/4 of the daemon's CPU time in a
 * sequential write).  Bucket sizes are fixed while open.
 */
static u64 data_alloc_max(struct tfs_fs *fs)
{
	const struct tfs_alloc *a = &fs->alloc;
	u64 max = UINT64_MAX;

	for (unsigned i = 0; i < a->nr_devs; i++)
		if (a->devs[i].bits && a->devs[i].bucket_size)
			max = min_t(u64, max, a->devs[i].bucket_size);
	return max;
}

/*
 * Allocates up to len bytes of data space (at least one block) on the
 * data replicas wanted (or, when that many members cannot take it, the
 * required number).  When space is short but freed space waits for a
 * journal flush, flushes once and tries again: deleting frees space.
 */
static s64 data_alloc(struct tfs_fs *fs, u64 len, struct tfs_alloc_run *runs, unsigned *nr)
{
	struct tfs_posix *p = tfs_posix(fs);
	unsigned want = tfs_posix_data_replicas(fs), need = tfs_posix_data_replicas_required(fs);
	u64 cap = max_t(u64, round_down(data_alloc_max(fs), p->block_size), p->block_size);
	bool flushed = false;
	s64 ret = -TFS_ERR_alloc_no_space;

	len = min_t(u64, len, cap);
	/* Fewer members than the data must be on: no change can be made (EROFS class). */
	if (tfs_posix_nr_data_devs(fs) < need)
		return -TFS_ERR_insufficient_devices;
	for (;;) {
		struct tfs_alloc_usage u;
		u64 headroom = tfs_posix_wb_headroom(fs);

		unsigned flags = 0;

		/*
		 * Leave write-back what it needs (tfs_posix_wb_headroom()): as
		 * many blocks, and as many whole free node runs (when few are
		 * left, data takes only space that is fragmented already).
		 */
		tfs_alloc_usage(fs, &u);
		if (u.free_node_runs * fs->node_size < headroom + len * want)
			flags |= TFS_ALLOC_SPARE_NODE_RUNS;
		for (unsigned r = want; r >= need && r; r--) {
			u64 room = u.free > headroom ? (u.free - headroom) / r : 0;

			if (room < p->block_size) {
				ret = -TFS_ERR_alloc_no_space;
				continue;
			}
			ret = tfs_alloc(fs, min_t(u64, len, round_down(room, p->block_size)),
					p->block_size, r, flags, runs);
			if (ret >= 0) {
				*nr = r;
				return ret;
			}
			if (!tfs_err_matches((int)ret, TFS_ERR_alloc_no_space))
				return ret;
		}
		if (flushed)
			return ret;
		tfs_alloc_usage(fs, &u);
		if (!u.waiting)
			return ret;
		/* Space freed by commits not yet durable: make them durable, once. */
		__atomic_fetch_add(&p->c.enospc_flush_retries, 1, __ATOMIC_RELAXED);
		int err = tfs_posix_journal(fs) ? tfs_journal_flush(tfs_posix_journal(fs)) : 0;

		if (err)
			return err;
		flushed = true;
	}
}

/* --- reading --- */

/*
 * Reads e's blocks [from, to) into dst (aligned) and checks every block's
 * checksum.  A replica that cannot be read or fails a checksum is reported
 * (inode, file offset, member) and the next one tried; a good copy found
 * after bad ones is written back over them.
 */
static int read_ext_blocks(struct tfs_fs *fs, tfs_ino_t ino, const struct tfs_ext *e, u64 from,
			   u64 to, u8 *dst)
{
	struct tfs_posix *p = tfs_posix(fs);
	u32 bs = p->block_size;
	size_t len = (to - from) * bs;
	bool bad[TFS_DATA_MAX_REPLICAS] = { false };
	int ret = -TFS_ERR_data_read;

	for (unsigned i = 0; i < e->nr_ptrs; i++) {
		struct tfs_bdev *bdev = tfs_posix_bdev(fs, e->ptrs[i].dev);
		u64 dev_off = e->ptrs[i].offset + (from - e->start) * bs;
		struct tfs_bio bio = {
			.bdev = bdev,
			.op = TFS_OP_read,
			.flags = TFS_BIO_QUIET,
			.tag = TFS_TAG_data,
			.offset = dev_off,
			.buf = dst,
			.len = len,
		};
		int err;

		if (!bdev) {
			fprintf(stderr, "inode %llu offset %llu: member %u is missing%s\n",
				(unsigned long long)ino, (unsigned long long)from * bs,
				e->ptrs[i].dev,
				i + 1 < e->nr_ptrs ? ", trying another replica" : "");
			continue;
		}
		err = tfs_bio_submit_wait(&bio);
		if (err) {
			__atomic_fetch_add(&p->c.data_read_errors, 1, __ATOMIC_RELAXED);
			fprintf(stderr,
				"inode %llu offset %llu length %zu: read error on member %u (%s) at "
				"byte %llu: %s%s\n",
				(unsigned long long)ino, (unsigned long long)from * bs, len,
				e->ptrs[i].dev, dev_name(fs, e->ptrs[i].dev),
				(unsigned long long)dev_off, tfs_err_str(err),
				i + 1 < e->nr_ptrs ? "; trying another replica" : "");
			ret = -TFS_ERR_data_read;
			continue;
		}
		for (u64 b = from; b < to; b++) {
			const u8 *blk = dst + (b - from) * bs;
			u32 want = le32_to_cpu(e->csums[b - e->start]);
			u32 got = tfs_crc32c(0, blk, bs);

			if (got == want)
				continue;
			__atomic_fetch_add(&p->c.data_csum_errors, 1, __ATOMIC_RELAXED);
			fprintf(stderr,
				"inode %llu offset %llu: data checksum mismatch on member %u (%s) "
				"at byte %llu: crc32c %08x, expected %08x%s\n",
				(unsigned long long)ino, (unsigned long long)b * bs, e->ptrs[i].dev,
				dev_name(fs, e->ptrs[i].dev),
				(unsigned long long)(e->ptrs[i].offset + (b - e->start) * bs), got,
				want, i + 1 < e->nr_ptrs ? "; trying another replica" : "");
			bad[i] = true;
			ret = -TFS_ERR_data_checksum;
			break;
		}
		if (bad[i])
			continue;
		if (i) {
			__atomic_fetch_add(&p->c.data_replica_fallbacks, 1, __ATOMIC_RELAXED);
			fprintf(stderr,
				"inode %llu offset %llu: read from the replica on member %u (%s)\n",
				(unsigned long long)ino, (unsigned long long)from * bs,
				e->ptrs[i].dev, dev_name(fs, e->ptrs[i].dev));
		}
		/*
		 * Repair: the bad copies get the good bytes, in place.  They are
		 * the bytes that belong there, so a torn repair is no worse than
		 * what was there (still caught by the checksum).
		 */
		for (unsigned j = 0; j < i; j++) {
			struct tfs_bio fix = {
				.bdev = tfs_posix_bdev(fs, e->ptrs[j].dev),
				.op = TFS_OP_write,
				.flags = TFS_BIO_QUIET,
				.tag = TFS_TAG_data,
				.offset = e->ptrs[j].offset + (from - e->start) * bs,
				.buf = dst,
				.len = len,
			};

			if (bad[j] && fix.bdev && !tfs_bio_submit_wait(&fix))
				fprintf(stderr,
					"inode %llu offset %llu: repaired the copy on member %u\n",
					(unsigned long long)ino, (unsigned long long)from * bs,
					e->ptrs[j].dev);
		}
		return 0;
	}
	return ret;
}

/* An aligned buffer for O_DIRECT, not cleared (every byte used is read into it first). */
static u8 *aligned_buf(size_t len)
{
	void *buf;

	return posix_memalign(&buf, 4096, len ?: 1) ? NULL : buf;
}

/* Block b of ino as a reader sees it (zeros for a hole or unwritten space). */
static int read_block(struct tfs_fs *fs, tfs_ino_t ino, u64 b, u8 *dst)
{
	struct tfs_bkey_buf buf;
	struct tfs_ext e;
	int ret = tfs_ext_find(fs, ino, b, b + 1, &buf, &e);

	if (ret == -ENOENT || (!ret && (e.start > b || e.unwritten))) {
		memset(dst, 0, tfs_posix(fs)->block_size);
		return 0;
	}
	return ret ?: read_ext_blocks(fs, ino, &e, b, b + 1, dst);
}

ssize_t tfs_read(struct tfs_fs *fs, struct tfs_file *f, void *buf, size_t len, u64 off)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	u32 bs = p->block_size;
	u8 *bounce = NULL;
	u64 pos, end = off;
	int ret;

	if (off > (u64)INT64_MAX)
		return -EINVAL;
	ret = tfs_ilock(fs, im, false);
	if (ret)
		return ret;
	if (S_ISDIR(im->ui.mode)) {
		ret = -EISDIR;
		goto out;
	}
	if (off >= im->ui.size || !len)
		goto out;
	end = off + min_t(u64, len, im->ui.size - off);
	/*
	 * The blocks of one extent segment of this range at most: sized to
	 * the request, not to an extent (a 4 KiB read cleared 1 MiB before).
	 */
	bounce = aligned_buf(min_t(u64, ((end - 1) >> p->block_bits) - (off >> p->block_bits) + 1,
				   TFS_EXTENT_MAX_BLOCKS) *
			     bs);
	if (!bounce) {
		ret = -ENOMEM;
		goto out;
	}
	for (pos = off; pos < end;) {
		struct tfs_bkey_buf kb;
		struct tfs_ext e;
		u64 b = pos >> p->block_bits, seg_end;

		ret = tfs_ext_find(fs, im->ino, b, ((end - 1) >> p->block_bits) + 1, &kb, &e);
		if (ret == -ENOENT) {
			memset((u8 *)buf + (pos - off), 0, end - pos);
			ret = 0;
			break;
		}
		if (ret)
			break;
		if (e.start > b) {
			seg_end = min_t(u64, end, e.start << p->block_bits);
			memset((u8 *)buf + (pos - off), 0, seg_end - pos);
			pos = seg_end;
			continue;
		}
		seg_end = min_t(u64, end, tfs_ext_end(&e) << p->block_bits);
		if (e.unwritten) {
			memset((u8 *)buf + (pos - off), 0, seg_end - pos);
		} else {
			u64 last = ((seg_end - 1) >> p->block_bits) + 1;

			ret = read_ext_blocks(fs, im->ino, &e, b, last, bounce);
			if (ret)
				break;
			memcpy((u8 *)buf + (pos - off), bounce + (pos - (b << p->block_bits)),
			       seg_end - pos);
		}
		pos = seg_end;
	}
	if (!ret)
		__atomic_fetch_add(&p->c.data_bytes_read, end - off, __ATOMIC_RELAXED);
out:
	tfs_iunlock(im);
	free(bounce);
	return ret ?: (ssize_t)(end - off);
}

/* --- writing blocks --- */

struct wpiece {
	u64 fstart;
	u32 len;
	bool inplace; /* unwritten space, written in place */
	unsigned nr_ptrs;
	struct {
		u32 dev;
		u64 offset;
	} ptrs[TFS_DATA_MAX_REPLICAS];
};

struct wblocks {
	struct wpiece *pieces;
	unsigned nr, size;
	struct tfs_run_list new_space; /* allocated here: given back if not committed */
	struct tfs_run_list inplace;   /* unwritten space that becomes written */
};

static void wblocks_exit(struct wblocks *w)
{
	free(w->pieces);
	tfs_run_list_exit(&w->new_space);
	tfs_run_list_exit(&w->inplace);
	memset(w, 0, sizeof(*w));
}

static struct wpiece *wpiece_add(struct wblocks *w)
{
	if (w->nr == w->size) {
		unsigned size = w->size ? w->size * 2 : 4;
		struct wpiece *n = realloc(w->pieces, size * sizeof(*n));

		if (!n)
			return NULL;
		w->pieces = n;
		w->size = size;
	}
	memset(&w->pieces[w->nr], 0, sizeof(w->pieces[0]));
	return &w->pieces[w->nr++];
}

/* Allocates new space for file blocks [b, b + nb) as pieces of w. */
static int wblocks_alloc(struct tfs_fs *fs, struct wblocks *w, u64 b, u64 nb)
{
	u32 bs = tfs_posix(fs)->block_size;

	while (nb) {
		struct tfs_alloc_run runs[TFS_DATA_MAX_REPLICAS];
		unsigned nr;
		s64 got = data_alloc(fs, min_t(u64, nb, TFS_EXTENT_MAX_BLOCKS) * bs, runs, &nr);
		struct wpiece *pc;

		if (got < 0)
			return (int)got;
		for (unsigned i = 0; i < nr; i++) {
			runs[i].len = (u64)got;
			if (tfs_run_list_add(&w->new_space, runs[i].dev, runs[i].offset,
					     (u64)got)) {
				for (unsigned j = i; j < nr; j++)
					tfs_alloc_free_now(fs, &runs[j]);
				return -ENOMEM;
			}
		}
		pc = wpiece_add(w);
		if (!pc)
			return -ENOMEM;
		pc->fstart = b;
		pc->len = (u32)((u64)got / bs);
		pc->nr_ptrs = nr;
		for (unsigned i = 0; i < nr; i++) {
			pc->ptrs[i].dev = runs[i].dev;
			pc->ptrs[i].offset = runs[i].offset;
		}
		b += pc->len;
		nb -= pc->len;
	}
	return 0;
}

static int wblocks_write(struct tfs_fs *fs, tfs_ino_t ino, u64 b0, u64 nb, u8 *data,
			 struct wblocks *w);

/*
 * Writes file blocks [b0, b0 + nb) of ino from data (aligned, nb blocks):
 * plans pieces (unwritten space in place, the rest newly allocated),
 * writes every replica, and flushes when the journal will not.  On
 * failure the new space is given back.  A piece whose replicas partly
 * failed keeps the ones written if they are enough.
 */
static int write_blocks(struct tfs_fs *fs, tfs_ino_t ino, u64 b0, u64 nb, u8 *data,
			struct wblocks *w)
{
	u32 bs = tfs_posix(fs)->block_size;
	u64 b = b0, end = b0 + nb;
	int ret = 0;

	memset(w, 0, sizeof(*w));
	while (b < end) {
		struct tfs_bkey_buf kb;
		struct tfs_ext e;
		u64 gap_end;

		ret = tfs_ext_find(fs, ino, b, end, &kb, &e);
		if (ret && ret != -ENOENT)
			goto err;
		if (!ret && e.start <= b && e.unwritten) {
			struct wpiece *pc = wpiece_add(w);
			u64 n = min_t(u64, tfs_ext_end(&e), end) - b;

			ret = -ENOMEM;
			if (!pc)
				goto err;
			pc->fstart = b;
			pc->len = (u32)n;
			pc->inplace = true;
			pc->nr_ptrs = e.nr_ptrs;
			for (unsigned i = 0; i < e.nr_ptrs; i++) {
				pc->ptrs[i].dev = e.ptrs[i].dev;
				pc->ptrs[i].offset = e.ptrs[i].offset + (b - e.start) * bs;
			}
			b += n;
			continue;
		}
		/* New space up to the next unwritten extent (holes and written alike). */
		gap_end = end;
		for (u64 c = b; c < end;) {
			ret = tfs_ext_find(fs, ino, c, end, &kb, &e);
			if (ret == -ENOENT)
				break;
			if (ret)
				goto err;
			if (e.unwritten) {
				gap_end = max_t(u64, e.start, b);
				break;
			}
			c = tfs_ext_end(&e);
		}
		ret = wblocks_alloc(fs, w, b, gap_end - b);
		if (ret)
			goto err;
		b = gap_end;
	}
	return wblocks_write(fs, ino, b0, nb, data, w);
err:
	tfs_run_list_free_now(fs, &w->new_space);
	wblocks_exit(w);
	return ret;
}

/*
 * The I/O half of write_blocks(): writes every replica of w's pieces
 * (planned for blocks [b0, b0 + nb), data holding them all) and marks
 * their members for the journal's flush.  On failure the new space is
 * given back and w emptied.
 */
static int wblocks_write(struct tfs_fs *fs, tfs_ino_t ino, u64 b0, u64 nb, u8 *data,
			 struct wblocks *w)
{
	struct tfs_posix *p = tfs_posix(fs);
	u32 bs = p->block_size;
	struct tfs_bio *bios = NULL;
	unsigned nr_bios = 0, need = tfs_posix_data_replicas_required(fs);
	u64 written_bytes[TFS_MAX_DEVICES] = { 0 };
	int ret;

	ret = -ENOMEM;
	for (unsigned i = 0; i < w->nr; i++)
		nr_bios += w->pieces[i].nr_ptrs;
	bios = tfs_fault("alloc:write_bios") ? NULL : calloc(nr_bios, sizeof(*bios));
	if (!bios)
		goto err;
	nr_bios = 0;
	for (unsigned i = 0; i < w->nr; i++) {
		struct wpiece *pc = &w->pieces[i];

		for (unsigned r = 0; r < pc->nr_ptrs; r++) {
			bios[nr_bios++] = (struct tfs_bio){
				.bdev = tfs_posix_bdev(fs, pc->ptrs[r].dev),
				.op = TFS_OP_write,
				.flags = TFS_BIO_QUIET,
				.tag = TFS_TAG_data,
				.offset = pc->ptrs[r].offset,
				.buf = data + (pc->fstart - b0) * bs,
				.len = (size_t)pc->len * bs,
			};
			written_bytes[pc->ptrs[r].dev] += (u64)pc->len * bs;
		}
	}
	submit_wait(bios, nr_bios);

	/*
	 * The data must be durable before a commit referring to it can be: the
	 * journal flushes these members before its next flush entry.
	 */
	for (unsigned d = 0; d < TFS_MAX_DEVICES; d++)
		if (written_bytes[d] && fs->j)
			tfs_journal_dev_written(fs->j, d, written_bytes[d]);

	ret = 0;
	nr_bios = 0;
	for (unsigned i = 0; i < w->nr; i++) {
		struct wpiece *pc = &w->pieces[i];
		unsigned ok = 0, kept = 0, gone = 0;

		for (unsigned r = 0; r < pc->nr_ptrs; r++) {
			struct tfs_bio *bio = &bios[nr_bios++];
			int err = bio->result;

			if (err) {
				/* A member that is missing or vanished, not a failed write. */
				gone += tfs_err_matches(err, ENODEV);
				__atomic_fetch_add(&p->c.data_write_errors, 1, __ATOMIC_RELAXED);
				fprintf(stderr,
					"inode %llu offset %llu length %llu: write error on member %u "
					"(%s) at byte %llu: %s\n",
					(unsigned long long)ino,
					(unsigned long long)pc->fstart * bs,
					(unsigned long long)pc->len * bs, pc->ptrs[r].dev,
					dev_name(fs, pc->ptrs[r].dev),
					(unsigned long long)pc->ptrs[r].offset, tfs_err_str(err));
				continue;
			}
			ok++;
			pc->ptrs[kept++] = pc->ptrs[r];
		}
		if (ok < max_t(unsigned, need, 1)) {
			/*
			 * Too few copies: a write error (EIO), or, when members
			 * went away, too few members to write to (EROFS class).
			 */
			ret = ok + gone >= need && gone ? -TFS_ERR_insufficient_devices
							: -TFS_ERR_data_write;
		} else {
			pc->nr_ptrs = kept;
			if (pc->inplace)
				for (unsigned r = 0; r < kept && !ret; r++)
					ret = tfs_run_list_add(&w->inplace, pc->ptrs[r].dev,
							       pc->ptrs[r].offset,
							       (u64)pc->len * bs);
		}
	}
	free(bios);
	bios = NULL;
	if (ret)
		goto err;
	__atomic_fetch_add(&p->c.data_bytes_written, nb * bs, __ATOMIC_RELAXED);
	return 0;
err:
	free(bios);
	tfs_run_list_free_now(fs, &w->new_space);
	wblocks_exit(w);
	return ret;
}

/*
 * Queues what write_blocks() wrote: the old extents over [b0, b0 + nb)
 * go (their space into freed, but for the unwritten space written in
 * place), the pieces come in with data's checksums.  *dropped gets the
 * blocks that had space before.
 */
static int queue_blocks(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 b0, u64 nb,
			const u8 *data, struct wblocks *w, struct tfs_run_list *freed, u64 *dropped,
			bool drop)
{
	u32 bs = tfs_posix(trans->fs)->block_size;
	u32 *csums = malloc(TFS_EXTENT_MAX_BLOCKS * sizeof(u32));
	u64 next;
	int ret = 0;

	if (!csums)
		return -ENOMEM;
	if (drop)
		ret = tfs_ext_drop_range(trans, ino, b0, b0 + nb, UINT32_MAX, freed, dropped,
					 &next);
	for (unsigned i = 0; !ret && i < w->nr; i++) {
		const struct wpiece *pc = &w->pieces[i];
		struct tfs_bkey_buf kb;
		struct tfs_ext e = {
			.ino = ino,
			.start = pc->fstart,
			.len = pc->len,
			.nr_ptrs = pc->nr_ptrs,
		};

		for (unsigned r = 0; r < pc->nr_ptrs; r++) {
			e.ptrs[r].dev = pc->ptrs[r].dev;
			e.ptrs[r].offset = pc->ptrs[r].offset;
		}
		for (unsigned j = 0; j < pc->len; j++)
			csums[j] = tfs_crc32c(0, data + (pc->fstart - b0 + j) * bs, bs);
		tfs_ext_pack(&kb, &e, csums);
		ret = tfs_trans_update(trans, TFS_BTREE_extents, &kb.k);
	}
	free(csums);
	return ret ?: tfs_run_list_subtract(freed, &w->inplace);
}

/* A data write failure is the inode's and the filesystem's writeback error. */
static void record_wb_error(struct tfs_fs *fs, struct tfs_inode_mem *im, int err)
{
	if (!tfs_err_matches(err, EIO))
		return;
	tfs_errseq_set(&im->wb_err, -EIO);
	tfs_errseq_set(&tfs_posix(fs)->sb_err, -EIO);
}

static int commit_written(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b0, u64 nb,
			  const u8 *data, struct wblocks *w, struct tfs_inode_unpacked *ui,
			  u64 *seq);

/*
 * Rewrites blocks [b0, b0 + nb) with data and commits them with the inode
 * as ui (ui->blocks adjusted here), in one transaction.
 */
static int rewrite_commit(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b0, u64 nb, u8 *data,
			  struct tfs_inode_unpacked *ui, u64 *seq)
{
	struct wblocks w;
	int ret;

	ret = write_blocks(fs, im->ino, b0, nb, data, &w);
	if (ret) {
		record_wb_error(fs, im, ret);
		return ret;
	}
	return commit_written(fs, im, b0, nb, data, &w, ui, seq);
}

/*
 * Commits what wblocks_write() wrote over blocks [b0, b0 + nb) with the
 * inode as ui (ui->blocks adjusted here), in one transaction; im is
 * locked exclusively.  On failure the new space is given back.  w is
 * emptied either way.
 */
static int commit_written(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b0, u64 nb,
			  const u8 *data, struct wblocks *w, struct tfs_inode_unpacked *ui,
			  u64 *seq)
{
	struct tfs_btree_trans trans;
	struct tfs_run_list freed = { 0 };
	u64 dropped = 0;
	int ret;

	tfs_posix_trans_init(&trans, fs);
	ret = queue_blocks(&trans, im->ino, b0, nb, data, w, &freed, &dropped, true);
	if (!ret) {
		ui->blocks = ui->blocks + nb - dropped;
		ret = tfs_inode_update(&trans, im, ui) ?: tfs_posix_commit(&trans, seq);
	}
	tfs_trans_exit(&trans);
	if (ret) {
		tfs_run_list_free_now(fs, &w->new_space);
	} else {
		tfs_run_list_free_after(fs, &freed, *seq);
		tfs_inode_committed(im, ui, *seq, false);
	}
	tfs_run_list_exit(&freed);
	wblocks_exit(w);
	return ret;
}

/* 1 when ino has unwritten space among blocks [b, end), 0 when not, or an error. */
static int range_has_unwritten(struct tfs_fs *fs, tfs_ino_t ino, u64 b, u64 end)
{
	while (b < end) {
		struct tfs_bkey_buf kb;
		struct tfs_ext e;
		int ret = tfs_ext_find(fs, ino, b, end, &kb, &e);

		if (ret == -ENOENT)
			return 0;
		if (ret)
			return ret;
		if (e.unwritten)
			return 1;
		b = tfs_ext_end(&e);
	}
	return 0;
}

/*
 * Writes whole blocks [off, off + len) (at most TFS_EXTENT_MAX_BLOCKS)
 * without holding the inode lock over the data I/O, so that the write
 * requests the kernel sends in parallel (write-back) reach the device in
 * parallel: every block goes to new space (nothing there is read or
 * merged), which no one else can see before this commit, and the commit,
 * under the exclusive lock, replaces whatever the range holds then.  A
 * writer that commits later wins the whole range, as if it had run later.
 * Returns 1, having done nothing, when the range holds unwritten space
 * (written in place: that needs the lock throughout).
 *
 * With TFS_WRITE_NO_OVERLAP the source may end inside the last block
 * (src_len < len): its rest is written as zeros, which is what it holds
 * when it lies at or past EOF (checked; else 1 is returned), and the size
 * grows to off + src_len.  The caller promises that no other write of that
 * block runs meanwhile (the kernel's write-back: one request per page).
 */
static int write_whole_blocks(struct tfs_fs *fs, struct tfs_inode_mem *im, const void *src,
			      size_t src_len, size_t len, u64 off, unsigned flags)
{
	struct tfs_posix *p = tfs_posix(fs);
	u64 b0 = off >> p->block_bits, nb = len >> p->block_bits, seq;
	struct tfs_inode_unpacked ui;
	struct wblocks w;
	u8 *data;
	int ret = tfs_ilock(fs, im, false);

	if (ret)
		return ret;
	if (!S_ISREG(im->ui.mode))
		ret = S_ISDIR(im->ui.mode) ? -EISDIR : -EINVAL;
	else if (src_len < len && off + src_len < im->ui.size)
		ret = 1; /* the rest of the last block holds data: merged under the lock */
	else
		ret = range_has_unwritten(fs, im->ino, b0, b0 + nb);
	tfs_iunlock(im);
	if (ret)
		return ret;

	/* Not cleared first: every byte is set just below. */
	data = aligned_buf(len);
	if (!data)
		return -ENOMEM;
	memcpy(data, src, src_len);
	memset(data + src_len, 0, len - src_len);
	memset(&w, 0, sizeof(w));
	ret = wblocks_alloc(fs, &w, b0, nb);
	if (ret) {
		tfs_run_list_free_now(fs, &w.new_space);
		wblocks_exit(&w);
	} else {
		ret = wblocks_write(fs, im->ino, b0, nb, data, &w);
	}
	if (ret) {
		record_wb_error(fs, im, ret);
		free(data);
		return ret;
	}
	/* The data is on its new space: commit it over what the range holds now. */
	ret = tfs_ilock(fs, im, true);
	if (ret) {
		tfs_run_list_free_now(fs, &w.new_space);
		wblocks_exit(&w);
		free(data);
		return ret;
	}
	ui = im->ui;
	ui.size = max_t(u64, ui.size, off + src_len);
	if (!(flags & TFS_WRITE_KEEP_TIMES))
		ui.mtime = ui.ctime = tfs_now_ns();
	ret = commit_written(fs, im, b0, nb, data, &w, &ui, &seq);
	tfs_iunlock(im);
	free(data);
	return ret;
}

/* Writes [off, off + len), all within TFS_EXTENT_MAX_BLOCKS blocks. */
static int write_segment(struct tfs_fs *fs, struct tfs_inode_mem *im, const void *src, size_t len,
			 u64 off, unsigned flags)
{
	struct tfs_posix *p = tfs_posix(fs);
	u32 bs = p->block_size;
	u64 b0 = off >> p->block_bits, b1 = (off + len + bs - 1) >> p->block_bits, nb = b1 - b0;
	u32 head = off & (bs - 1), tail = (off + len) & (bs - 1);
	struct tfs_inode_unpacked ui = im->ui;
	u8 *data = tfs_bdev_alloc_buf(NULL, nb * bs);
	u64 seq;
	int ret = 0;

	if (!data)
		return -ENOMEM;
	/*
	 * Partial blocks: what is there now, merged with the new bytes.  Not
	 * read when every byte kept lies at or past EOF: those read as zeros
	 * (extents.h), and data is zeroed.  So an append (the kernel's
	 * write-back of the last page, from its start to EOF) reads nothing.
	 */
	bool read_head = head && (b0 << p->block_bits) < im->ui.size;
	bool read_tail = tail && (nb > 1 || !read_head) && off + len < im->ui.size;

	if (read_head)
		ret = read_block(fs, im->ino, b0, data);
	if (!ret && read_tail)
		ret = read_block(fs, im->ino, b1 - 1, data + (nb - 1) * bs);
	if (ret) {
		free(data);
		return ret;
	}
	if (read_head || read_tail)
		__atomic_fetch_add(&p->c.data_blocks_rmw, read_head + read_tail, __ATOMIC_RELAXED);
	memcpy(data + head, src, len);

	ui.size = max_t(u64, ui.size, off + len);
	if (!(flags & TFS_WRITE_KEEP_TIMES))
		ui.mtime = ui.ctime = tfs_now_ns();
	ret = rewrite_commit(fs, im, b0, nb, data, &ui, &seq);
	free(data);
	return ret;
}

ssize_t tfs_write(struct tfs_fs *fs, struct tfs_file *f, const void *buf, size_t len, u64 off)
{
	return tfs_write_flags(fs, f, buf, len, off, 0);
}

ssize_t tfs_write_flags(struct tfs_fs *fs, struct tfs_file *f, const void *buf, size_t len, u64 off,
			unsigned flags)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	size_t done = 0;
	int ret;

	if (off > (u64)INT64_MAX)
		return -EINVAL;
	if (!len)
		return 0;
	if (off >= TFS_MAX_FILE_SIZE)
		return -EFBIG;
	if (len > TFS_MAX_FILE_SIZE - off)
		len = TFS_MAX_FILE_SIZE - off; /* a short write up to the limit, as write(2) */
	ret = tfs_posix_writable(fs);
	if (ret)
		return ret;
	/* Whole blocks, one extent's worth: the I/O runs without the lock. */
	if (!((off | len) & (p->block_size - 1)) &&
	    len <= (size_t)TFS_EXTENT_MAX_BLOCKS * p->block_size) {
		ret = write_whole_blocks(fs, im, buf, len, len, off, flags);
		if (ret <= 0)
			return ret ?: (ssize_t)len;
	}
	/* Up to EOF in its last block, no other writer there: as whole blocks. */
	if ((flags & TFS_WRITE_NO_OVERLAP) && !(off & (p->block_size - 1)) &&
	    len < (size_t)TFS_EXTENT_MAX_BLOCKS * p->block_size) {
		size_t whole = (len + p->block_size - 1) & ~((size_t)p->block_size - 1);

		ret = write_whole_blocks(fs, im, buf, len, whole, off, flags);
		if (ret <= 0)
			return ret ?: (ssize_t)len;
	}
	ret = tfs_ilock(fs, im, true);
	if (ret)
		return ret;
	if (!S_ISREG(im->ui.mode)) {
		ret = S_ISDIR(im->ui.mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	while (done < len) {
		u64 pos = off + done;
		u64 seg_end = ((pos >> p->block_bits) + TFS_EXTENT_MAX_BLOCKS) << p->block_bits;
		size_t n = (size_t)min_t(u64, len - done, seg_end - pos);

		ret = write_segment(fs, im, (const u8 *)buf + done, n, pos, flags);
		if (ret)
			break;
		done += n;
	}
out:
	tfs_iunlock(im);
	/* Space or the device ran out after some of it was committed: a short write. */
	return done ? (ssize_t)done : ret;
}

/* --- truncate, punch, fallocate --- */

/* A partial block at the edge of a punched range, rewritten with its part zeroed. */
struct edge {
	bool rewritten; /* it held written data: w and data are set */
	u64 b;
	u8 *data;
	struct wblocks w;
};

static void edge_exit(struct edge *e)
{
	free(e->data);
	wblocks_exit(&e->w);
}

/* Block b with bytes [from, to) zeroed, written copy-on-write if it holds written data. */
static int edge_prepare(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b, u32 from, u32 to,
			struct edge *edge)
{
	u32 bs = tfs_posix(fs)->block_size;
	struct tfs_bkey_buf kb;
	struct tfs_ext e;
	int ret = tfs_ext_find(fs, im->ino, b, b + 1, &kb, &e);

	memset(edge, 0, sizeof(*edge));
	edge->b = b;
	if (ret == -ENOENT || (!ret && (e.start > b || e.unwritten)))
		return 0; /* reads as zeros already */
	if (ret)
		return ret;
	edge->data = tfs_bdev_alloc_buf(NULL, bs);
	if (!edge->data)
		return -ENOMEM;
	ret = read_ext_blocks(fs, im->ino, &e, b, b + 1, edge->data);
	if (!ret) {
		memset(edge->data + from, 0, to - from);
		ret = write_blocks(fs, im->ino, b, 1, edge->data, &edge->w);
		if (ret)
			record_wb_error(fs, im, ret);
	}
	if (ret) {
		free(edge->data);
		edge->data = NULL;
		return ret;
	}
	edge->rewritten = true;
	return 0;
}

/*
 * Removes the extents over blocks [b0, b1) and puts in the rewritten edge
 * blocks (which lie inside it), committing the inode as ui (blocks
 * adjusted) with them.  One transaction unless more than IO_BATCH_KEYS
 * extents are involved; then each transaction handles that many, an edge
 * block going in with the transaction that removed its old extent.  With
 * orphan_flags, a removal needing several transactions is recorded in the
 * orphans btree by the first and cleared by the last (truncate: a crash
 * leaves open to finish it).  On failure, rewritten edges not yet
 * committed are given back.
 */
static int replace_range(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b0, u64 b1,
			 struct edge *edges, unsigned nr_edges, struct tfs_inode_unpacked *ui,
			 u64 orphan_flags, u64 *seq)
{
	bool orphan_added = false, first = true;
	int ret = 0;

	while (first || b0 < b1) {
		struct tfs_btree_trans trans;
		struct tfs_run_list freed = { 0 };
		u64 dropped = 0, next = b1;

		first = false;
		tfs_posix_trans_init(&trans, fs);
		if (b0 < b1)
			ret = tfs_ext_drop_range(&trans, im->ino, b0, b1, IO_BATCH_KEYS, &freed,
						 &dropped, &next);
		for (unsigned i = 0; !ret && i < nr_edges; i++) {
			struct edge *e = &edges[i];

			if (!e->rewritten || e->b >= next || !e->data)
				continue;
			ret = queue_blocks(&trans, im->ino, e->b, 1, e->data, &e->w, &freed,
					   &dropped, false);
			ui->blocks++;
		}
		if (!ret && orphan_flags) {
			if (next < b1 && !orphan_added)
				ret = tfs_orphan_add(&trans, im->ino, orphan_flags);
			else if (next >= b1 && orphan_added)
				ret = ui->nlink ? tfs_orphan_del(&trans, im->ino)
						: tfs_orphan_add(&trans, im->ino,
								 TFS_ORPHAN_unlinked);
		}
		if (!ret) {
			ui->blocks -= dropped;
			ret = tfs_inode_update(&trans, im, ui) ?: tfs_posix_commit(&trans, seq);
		}
		tfs_trans_exit(&trans);
		if (!ret) {
			tfs_run_list_free_after(fs, &freed, *seq);
			tfs_inode_committed(im, ui, *seq, false);
			orphan_added |= orphan_flags && next < b1;
			/* Committed edges: their space is the extent's now. */
			for (unsigned i = 0; i < nr_edges; i++)
				if (edges[i].rewritten && edges[i].b < next && edges[i].data) {
					free(edges[i].data);
					edges[i].data = NULL;
				}
		}
		tfs_run_list_exit(&freed);
		if (ret)
			break;
		b0 = next;
	}
	if (ret)
		for (unsigned i = 0; i < nr_edges; i++)
			if (edges[i].rewritten && edges[i].data)
				tfs_run_list_free_now(fs, &edges[i].w.new_space);
	return ret;
}

/*
 * Zeroes bytes [off, end) of im (end UINT64_MAX: everything from off): whole
 * blocks lose their extents, partial blocks holding written data are
 * rewritten, all committed with ui.
 */
static int punch(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 off, u64 end,
		 struct tfs_inode_unpacked *ui, u64 orphan_flags, u64 *seq)
{
	struct tfs_posix *p = tfs_posix(fs);
	u32 bs = p->block_size;
	u64 fb0 = DIV_ROUND_UP(off, bs);
	u64 fb1 = end == UINT64_MAX ? UINT64_MAX : end >> p->block_bits;
	struct edge edges[2];
	unsigned nr = 0;
	u64 lo = fb0, hi = fb1;
	int ret = 0;

	memset(edges, 0, sizeof(edges));
	if (fb0 > fb1) {
		/* Inside one block. */
		ret = edge_prepare(fs, im, fb1, off & (bs - 1), end & (bs - 1), &edges[nr++]);
		lo = fb1;
		hi = edges[0].rewritten ? fb1 + 1 : fb1;
	} else {
		if (off & (bs - 1)) {
			ret = edge_prepare(fs, im, fb0 - 1, off & (bs - 1), bs, &edges[nr++]);
			if (!ret && edges[0].rewritten)
				lo = fb0 - 1;
		}
		if (!ret && end != UINT64_MAX && (end & (bs - 1))) {
			struct edge *e = &edges[nr++];

			ret = edge_prepare(fs, im, fb1, 0, end & (bs - 1), e);
			if (!ret && e->rewritten)
				hi = fb1 + 1;
		}
	}
	if (!ret)
		ret = replace_range(fs, im, lo, hi, edges, nr, ui, orphan_flags, seq);
	else
		for (unsigned i = 0; i < nr; i++)
			if (edges[i].rewritten)
				tfs_run_list_free_now(fs, &edges[i].w.new_space);
	for (unsigned i = 0; i < nr; i++)
		edge_exit(&edges[i]);
	return ret;
}

/* Commits ui as im's inode, alone in its transaction. */
static int inode_commit(struct tfs_fs *fs, struct tfs_inode_mem *im, struct tfs_inode_unpacked *ui,
			u64 *seq)
{
	struct tfs_btree_trans trans;
	int ret;

	tfs_posix_trans_init(&trans, fs);
	ret = tfs_inode_update(&trans, im, ui) ?: tfs_posix_commit(&trans, seq);
	tfs_trans_exit(&trans);
	if (!ret)
		tfs_inode_committed(im, ui, *seq, false);
	return ret;
}

int tfs_data_truncate(struct tfs_fs *fs, struct tfs_inode_mem *im, struct tfs_inode_unpacked *ui,
		      u64 *seq)
{
	/* Past the old EOF there is nothing readable (see extents.h). */
	if (ui->size >= im->ui.size)
		return inode_commit(fs, im, ui, seq);
	/*
	 * The new EOF block's bytes past EOF are zeroed (a later extension
	 * must read zeros there), everything after it goes; the size changes
	 * in the first transaction, with the orphan key when more follow.
	 */
	return punch(fs, im, ui->size, UINT64_MAX, ui,
		     TFS_ORPHAN_truncate | (ui->nlink ? 0 : TFS_ORPHAN_unlinked), seq);
}

int tfs_data_remove_all(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	struct tfs_inode_unpacked ui = im->ui;
	u64 seq;

	return replace_range(fs, im, 0, UINT64_MAX, NULL, 0, &ui, 0, &seq);
}

/*
 * Gives the holes among blocks [b0, b1) unwritten space, in transactions
 * of at most IO_BATCH_KEYS new extents; the last one also sets the size
 * to new_size when that is larger.  Each commit sets mtime and ctime to now.
 */
static int falloc_blocks(struct tfs_fs *fs, struct tfs_inode_mem *im, u64 b0, u64 b1, u64 new_size,
			 s64 now, u64 *seq)
{
	struct tfs_inode_unpacked ui = im->ui;
	u32 bs = tfs_posix(fs)->block_size;
	u64 b = b0;
	int ret = 0;

	do {
		struct tfs_btree_trans trans;
		struct tfs_run_list space = { 0 };
		unsigned nr = 0;

		tfs_posix_trans_init(&trans, fs);
		while (b < b1 && nr < IO_BATCH_KEYS) {
			struct tfs_bkey_buf kb;
			struct tfs_alloc_run runs[TFS_DATA_MAX_REPLICAS];
			struct tfs_ext e;
			unsigned nr_r;
			u64 gap_end;
			s64 got;

			ret = tfs_ext_find(fs, im->ino, b, b1, &kb, &e);
			if (!ret && e.start <= b) {
				b = tfs_ext_end(&e);
				continue;
			}
			if (ret && ret != -ENOENT)
				break;
			gap_end = ret ? b1 : e.start;
			ret = 0;
			got = data_alloc(fs, min_t(u64, gap_end - b, TFS_EXTENT_MAX_BLOCKS) * bs,
					 runs, &nr_r);
			if (got < 0) {
				ret = (int)got;
				break;
			}
			e = (struct tfs_ext){
				.ino = im->ino,
				.start = b,
				.len = (u32)((u64)got / bs),
				.unwritten = true,
				.nr_ptrs = nr_r,
			};
			for (unsigned i = 0; i < nr_r; i++) {
				e.ptrs[i].dev = runs[i].dev;
				e.ptrs[i].offset = runs[i].offset;
				runs[i].len = (u64)got;
				if (!ret)
					ret = tfs_run_list_add(&space, runs[i].dev, runs[i].offset,
							       (u64)got);
				if (ret)
					tfs_alloc_free_now(fs, &runs[i]);
			}
			if (ret)
				break;
			tfs_ext_pack(&kb, &e, NULL);
			ret = tfs_trans_update(&trans, TFS_BTREE_extents, &kb.k);
			if (ret)
				break;
			ui.blocks += e.len;
			b += e.len;
			nr++;
		}
		/* What was allocated is committed even when the rest ran out of space. */
		int err = ret;

		if (b >= b1 && !err && new_size > ui.size)
			ui.size = new_size;
		if (nr || ui.size != im->ui.size) {
			ui.mtime = ui.ctime = now;
			ret = tfs_inode_update(&trans, im, &ui) ?: tfs_posix_commit(&trans, seq);
			if (ret)
				tfs_run_list_free_now(fs, &space);
			else
				tfs_inode_committed(im, &ui, *seq, false);
		}
		tfs_trans_exit(&trans);
		tfs_run_list_exit(&space);
		ret = err ?: ret;
	} while (!ret && b < b1);
	return ret;
}

int tfs_fallocate(struct tfs_fs *fs, struct tfs_file *f, int mode, u64 off, u64 len)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	u32 bs = p->block_size;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	u64 end, seq;
	s64 t0;
	int ret;

	if (off > (u64)INT64_MAX || !len || len > (u64)INT64_MAX)
		return -EINVAL;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return -EOPNOTSUPP;
	if (off + len > TFS_MAX_FILE_SIZE)
		return -EFBIG;
	end = off + len;
	ret = tfs_posix_writable(fs) ?: tfs_ilock(fs, im, true);
	if (ret)
		return ret;
	if (!S_ISREG(im->ui.mode)) {
		ret = S_ISDIR(im->ui.mode) ? -EISDIR : -ENODEV;
		goto out;
	}
	/*
	 * Every fallocate that succeeds sets mtime and ctime, as ext4's does:
	 * with the first commit that changes the file, or on their own below.
	 */
	t0 = tfs_now_ns();
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		u64 fb0 = DIV_ROUND_UP(off, bs), fb1 = end >> p->block_bits;
		struct tfs_inode_unpacked ui = im->ui;

		ui.mtime = ui.ctime = t0;
		ret = punch(fs, im, off, end, &ui, 0, &seq);
		/* Zero range: the whole blocks get unwritten space again. */
		if (!ret && (mode & FALLOC_FL_ZERO_RANGE) && fb0 < fb1)
			ret = falloc_blocks(fs, im, fb0, fb1, keep ? 0 : end, t0, &seq);
		if (!ret && (mode & FALLOC_FL_ZERO_RANGE) && !keep && end > im->ui.size) {
			ui = im->ui;
			ui.size = end;
			ui.mtime = ui.ctime = t0;
			ret = inode_commit(fs, im, &ui, &seq);
		}
	} else {
		ret = falloc_blocks(fs, im, off >> p->block_bits, DIV_ROUND_UP(end, bs),
				    keep ? 0 : end, t0, &seq);
	}
	if (!ret && (im->ui.mtime < t0 || im->ui.ctime < t0)) {
		struct tfs_inode_unpacked ui = im->ui;

		ui.mtime = ui.ctime = t0;
		ret = inode_commit(fs, im, &ui, &seq);
	}
out:
	tfs_iunlock(im);
	return ret;
}

s64 tfs_lseek(struct tfs_fs *fs, struct tfs_file *f, u64 off, int whence)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im = f->im;
	u64 size, b, nb;
	s64 ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = tfs_ilock(fs, im, false);
	if (ret)
		return ret;
	size = im->ui.size;
	if (off >= size) {
		ret = -ENXIO;
		goto out;
	}
	b = off >> p->block_bits;
	nb = DIV_ROUND_UP(size, p->block_size);
	while (b < nb) {
		struct tfs_bkey_buf kb;
		struct tfs_ext e;
		int err = tfs_ext_find(fs, im->ino, b, nb, &kb, &e);

		if (err && err != -ENOENT) {
			ret = err;
			goto out;
		}
		if (whence == SEEK_DATA) {
			if (err)
				break;
			if (!e.unwritten) {
				ret = (s64)max_t(u64, off, e.start << p->block_bits);
				goto out;
			}
			b = tfs_ext_end(&e);
		} else {
			if (err || e.start > b || e.unwritten) {
				ret = (s64)max_t(u64, off, b << p->block_bits);
				goto out;
			}
			b = tfs_ext_end(&e);
		}
	}
	/* SEEK_DATA: no data before EOF.  SEEK_HOLE: the hole at EOF. */
	ret = whence == SEEK_DATA ? -ENXIO : (s64)size;
out:
	tfs_iunlock(im);
	return ret;
}
