// SPDX-License-Identifier: GPL-2.0
/*
 * The fault device's trace (see lib/fault_trace.h): recording it (for the
 * worker in lib/faultdev.c), reading it, replaying it, and its file.
 */
#include "lib/fault_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/faultdev_int.h"
#include "lib/printbuf.h"

/*
 * ---- recording ----
 *
 * The worker fills an entry privately (faultdev_trace_new(),
 * faultdev_trace_piece()) and publishes it complete
 * (faultdev_trace_publish()): readers get entries by pointer and read them
 * without the lock, so a published entry never changes.
 */

/* tfs_fault_trace_entry.stamp: one order over every fault device of the process. */
static u64 trace_stamp;

struct tfs_fault_trace_entry *faultdev_trace_new(struct fault_dev *d)
{
	struct tfs_fault_trace_entry *e;
	bool on;

	pthread_mutex_lock(&d->lock);
	on = d->trace_on;
	pthread_mutex_unlock(&d->lock);
	if (!on)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (e) {
		e->rule = -1;
		e->stamp = __atomic_add_fetch(&trace_stamp, 1, __ATOMIC_SEQ_CST);
	}
	return e;
}

void faultdev_trace_publish(struct fault_dev *d, struct tfs_fault_trace_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&d->lock);
	if (!faultdev_grow((void **)&d->trace, &d->trace_size, d->nr_trace, sizeof(*d->trace))) {
		pthread_mutex_unlock(&d->lock);
		faultdev_trace_entry_free(e);
		return;
	}
	d->trace[d->nr_trace++] = e;
	pthread_mutex_unlock(&d->lock);
}

void faultdev_trace_piece(struct tfs_fault_trace_entry *e, u64 offset, u64 len, const void *data)
{
	struct tfs_fault_trace_piece *p;

	if (!e)
		return;
	p = realloc(e->pieces, (e->nr_pieces + 1) * sizeof(*p));
	if (!p)
		return;
	e->pieces = p;
	p += e->nr_pieces++;
	p->offset = offset;
	p->len = len;
	p->data = NULL;
	if (data) {
		p->data = malloc(len);
		if (p->data)
			memcpy(p->data, data, len);
	}
}

/* Frees what e owns (its pieces, their data, its mark), not e. */
static void entry_release(struct tfs_fault_trace_entry *e)
{
	for (unsigned i = 0; i < e->nr_pieces; i++)
		free(e->pieces[i].data);
	free(e->pieces);
	free(e->mark);
}

void faultdev_trace_entry_free(struct tfs_fault_trace_entry *e)
{
	entry_release(e);
	free(e);
}
/* ---- reading, text, replay ---- */

unsigned tfs_faultdev_trace_nr(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	return fd_locked_read(d, d->nr_trace);
}

const struct tfs_fault_trace_entry *tfs_faultdev_trace_entry(struct tfs_bdev *bdev, unsigned i)
{
	struct fault_dev *d = to_fd(bdev);

	return fd_locked_read(d, i < d->nr_trace ? d->trace[i] : NULL);
}

u64 tfs_faultdev_nr_writes(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	return fd_locked_read(d, d->write_index);
}

void tfs_faultdev_trace_to_text(struct printbuf *out, struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->nr_trace; i++) {
		const struct tfs_fault_trace_entry *e = d->trace[i];

		if (e->mark) {
			prt_printf(out, "mark %s %s\n", bdev->path, e->mark);
			continue;
		}
		prt_printf(out, "#%llu", (unsigned long long)e->index);
		if (e->op == TFS_OP_write || e->op == TFS_OP_discard)
			prt_printf(out, " w%llu", (unsigned long long)e->write_index);
		prt_printf(out, " %s %s %llu+%llu", bdev->path,
			   e->op < TFS_OP_NR ? tfs_bio_op_names[e->op] : "bad-op",
			   (unsigned long long)e->offset, (unsigned long long)e->len);
		if (e->flags & TFS_BIO_FUA)
			prt_str(out, " fua");
		if (e->flags & TFS_BIO_PREFLUSH)
			prt_str(out, " preflush");
		prt_printf(out, " tag=%s csum=%08x result=%s",
			   tfs_bio_tag_names[e->tag < TFS_TAG_NR ? e->tag : 0], e->csum,
			   e->result ? tfs_err_str(e->result) : "0");
		if (e->rule >= 0)
			prt_printf(out, " fault=%s(rule %d)", tfs_fault_action_names[e->action],
				   e->rule);
		prt_newline(out);
	}
	pthread_mutex_unlock(&d->lock);
}

int tfs_faultdev_replay(struct tfs_bdev *bdev, struct tfs_bdev *target, u64 upto)
{
	unsigned n = tfs_faultdev_trace_nr(bdev);
	int ret = 0;

	for (unsigned i = 0; i < n && !ret; i++) {
		const struct tfs_fault_trace_entry *e = tfs_faultdev_trace_entry(bdev, i);

		if (e->mark || (e->op != TFS_OP_write && e->op != TFS_OP_discard))
			continue;
		if (e->write_index > upto)
			break;
		for (unsigned p = 0; p < e->nr_pieces && !ret; p++) {
			const struct tfs_fault_trace_piece *pc = &e->pieces[p];
			void *buf = tfs_bdev_alloc_buf(target, pc->len);

			if (!buf) {
				ret = -ENOMEM;
				break;
			}
			if (pc->data)
				memcpy(buf, pc->data, pc->len);
			ret = tfs_bdev_write(target, buf, pc->len, pc->offset, 0, e->tag);
			free(buf);
		}
	}
	return ret ?: tfs_bdev_flush(target);
}

/*
 * Trace files: TRACE_MAGIC, then per entry a struct trace_rec, the mark's
 * bytes, and per piece a struct trace_piece_rec and its data.  Native byte
 * order: a trace is replayed on the machine that recorded it.
 */
#define TRACE_MAGIC "TFSTRC02"

struct trace_rec {
	u64 index, write_index, offset, len;
	u32 op, flags, tag, csum;
	s32 result, rule;
	u32 action, nr_pieces, mark_len, pad;
	u64 stamp;
};

struct trace_piece_rec {
	u64 offset, len;
	u32 has_data, pad;
};

int tfs_faultdev_trace_save(struct tfs_bdev *bdev, const char *path)
{
	struct fault_dev *d = to_fd(bdev);
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f) {
		int err = -errno; /* before fprintf can change it */

		fprintf(stderr, "tinyfs: fault: %s: cannot write the trace to %s: %s\n", bdev->path,
			path, tfs_err_str(err));
		return err;
	}
	pthread_mutex_lock(&d->lock);
	ok = fwrite(TRACE_MAGIC, 8, 1, f) == 1;
	for (unsigned i = 0; i < d->nr_trace && ok; i++) {
		const struct tfs_fault_trace_entry *e = d->trace[i];
		struct trace_rec r = {
			.index = e->index,
			.write_index = e->write_index,
			.offset = e->offset,
			.len = e->len,
			.op = e->op,
			.flags = e->flags,
			.tag = e->tag,
			.csum = e->csum,
			.result = e->result,
			.rule = e->rule,
			.action = e->action,
			.nr_pieces = e->nr_pieces,
			.mark_len = e->mark ? (u32)strlen(e->mark) : 0,
			.stamp = e->stamp,
		};

		ok = fwrite(&r, sizeof(r), 1, f) == 1 &&
		     (!r.mark_len || fwrite(e->mark, r.mark_len, 1, f) == 1);
		for (unsigned p = 0; p < e->nr_pieces && ok; p++) {
			const struct tfs_fault_trace_piece *pc = &e->pieces[p];
			struct trace_piece_rec pr = {
				.offset = pc->offset,
				.len = pc->len,
				.has_data = pc->data != NULL,
			};

			ok = fwrite(&pr, sizeof(pr), 1, f) == 1 &&
			     (!pc->data || fwrite(pc->data, pc->len, 1, f) == 1);
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (fclose(f))
		ok = false;
	if (!ok) {
		fprintf(stderr, "tinyfs: fault: %s: writing the trace to %s failed\n", bdev->path,
			path);
		return -EIO;
	}
	return 0;
}

/* Opens a saved trace and checks its magic; 0 or a code (printed). */
static int trace_file_open(const char *path, FILE **fp)
{
	FILE *f = fopen(path, "r");
	char magic[8];

	if (!f) {
		int err = -errno; /* before fprintf can change it */

		fprintf(stderr, "tinyfs: fault: cannot read the trace %s: %s\n", path,
			tfs_err_str(err));
		return err;
	}
	if (fread(magic, 8, 1, f) != 1 || memcmp(magic, TRACE_MAGIC, 8)) {
		fprintf(stderr, "tinyfs: fault: %s is not a tinyfs trace\n", path);
		fclose(f);
		return -TFS_ERR_invalid_argument;
	}
	*fp = f;
	return 0;
}

int tfs_fault_trace_replay_file(const char *path, struct tfs_bdev *target, u64 upto)
{
	FILE *f;
	struct trace_rec r;
	int ret = trace_file_open(path, &f);

	if (ret)
		return ret;
	while (!ret) {
		size_t got = fread(&r, 1, sizeof(r), f);
		bool apply;

		if (!got && feof(f))
			break; /* between records: the end */
		if (got != sizeof(r)) {
			ret = -EIO;
			break;
		}
		apply = (r.op == TFS_OP_write || r.op == TFS_OP_discard) && !r.mark_len &&
			r.write_index <= upto;

		if (r.mark_len && fseek(f, r.mark_len, SEEK_CUR))
			ret = -EIO;
		for (unsigned p = 0; p < r.nr_pieces && !ret; p++) {
			struct trace_piece_rec pr;
			void *buf;

			if (fread(&pr, sizeof(pr), 1, f) != 1 || pr.len > target->size) {
				ret = -EIO;
				break;
			}
			buf = tfs_bdev_alloc_buf(target, pr.len);
			if (!buf) {
				ret = -ENOMEM;
				break;
			}
			if (pr.has_data && fread(buf, pr.len, 1, f) != 1)
				ret = -EIO;
			if (!ret && apply)
				ret = tfs_bdev_write(target, buf, pr.len, pr.offset, 0, r.tag);
			free(buf);
		}
	}
	if (ret == -EIO)
		fprintf(stderr, "tinyfs: fault: the trace %s is truncated or damaged\n", path);
	fclose(f);
	return ret ?: tfs_bdev_flush(target);
}

void tfs_fault_trace_free(struct tfs_fault_trace_entry *entries, unsigned nr)
{
	if (!entries)
		return;
	for (unsigned i = 0; i < nr; i++)
		entry_release(&entries[i]);
	free(entries);
}

int tfs_fault_trace_load(const char *path, struct tfs_fault_trace_entry **entries, unsigned *nr)
{
	FILE *f;
	struct tfs_fault_trace_entry *v = NULL;
	unsigned n = 0, size = 0;
	struct trace_rec r;
	int ret = trace_file_open(path, &f);

	*entries = NULL;
	*nr = 0;
	if (ret)
		return ret;
	while (!ret) {
		size_t got = fread(&r, 1, sizeof(r), f);
		struct tfs_fault_trace_entry *e;

		if (!got && feof(f))
			break; /* between records: the end */
		if (got != sizeof(r)) {
			ret = -EIO;
			break;
		}
		if (!faultdev_grow((void **)&v, &size, n, sizeof(*v))) {
			ret = -ENOMEM;
			break;
		}
		e = &v[n++];
		*e = (struct tfs_fault_trace_entry){
			.index = r.index,
			.write_index = r.write_index,
			.op = r.op,
			.flags = r.flags,
			.tag = r.tag,
			.offset = r.offset,
			.len = r.len,
			.csum = r.csum,
			.result = r.result,
			.action = r.action,
			.rule = r.rule,
			.stamp = r.stamp,
		};
		if (r.mark_len) {
			e->mark = calloc(1, r.mark_len + 1);
			if (!e->mark)
				ret = -ENOMEM;
			else if (fread(e->mark, r.mark_len, 1, f) != 1)
				ret = -EIO;
		}
		if (!ret && r.nr_pieces) {
			e->pieces = calloc(r.nr_pieces, sizeof(*e->pieces));
			if (!e->pieces)
				ret = -ENOMEM;
		}
		for (unsigned p = 0; p < r.nr_pieces && !ret; p++) {
			struct trace_piece_rec pr;
			struct tfs_fault_trace_piece *pc = &e->pieces[p];

			if (fread(&pr, sizeof(pr), 1, f) != 1 || pr.len > (1ULL << 32)) {
				ret = -EIO;
				break;
			}
			e->nr_pieces++;
			pc->offset = pr.offset;
			pc->len = pr.len;
			if (pr.has_data) {
				pc->data = malloc(pr.len ?: 1);
				if (!pc->data)
					ret = -ENOMEM;
				else if (fread(pc->data, pr.len, 1, f) != 1)
					ret = -EIO;
			}
		}
	}
	fclose(f);
	if (ret) {
		if (ret == -EIO)
			fprintf(stderr, "tinyfs: fault: the trace %s is truncated or damaged\n",
				path);
		tfs_fault_trace_free(v, n);
		return ret;
	}
	*entries = v;
	*nr = n;
	return 0;
}
