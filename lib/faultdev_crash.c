// SPDX-License-Identifier: GPL-2.0
/*
 * The fault device's volatile cache (see lib/faultdev.h): the log of
 * completed writes that are not durable yet, and the crash image a power
 * cut builds from it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/errcode.h"
#include "lib/faultdev_int.h"
#include "lib/printbuf.h"

void faultdev_log_clear(struct fault_dev *d)
{
	for (unsigned i = 0; i < d->nr_log; i++) {
		free(d->log[i].old);
		free(d->log[i].new);
	}
	d->nr_log = 0;
}

/*
 * The log is changed by the worker only, but read by others under the lock
 * (tfs_faultdev_nr_unflushed(), to_text), so every change takes the lock;
 * the worker itself reads it without.
 */
void faultdev_log_clear_locked(struct fault_dev *d)
{
	pthread_mutex_lock(&d->lock);
	faultdev_log_clear(d);
	pthread_mutex_unlock(&d->lock);
}

int faultdev_log_add(struct fault_dev *d, u64 offset, u64 len, void *old, void *new, bool durable,
		     u64 write_index, u64 op_index)
{
	pthread_mutex_lock(&d->lock);
	if (!faultdev_grow((void **)&d->log, &d->log_size, d->nr_log, sizeof(*d->log))) {
		pthread_mutex_unlock(&d->lock);
		return -ENOMEM;
	}
	d->log[d->nr_log++] = (struct log_entry){
		.offset = offset,
		.len = len,
		.old = old,
		.new = new,
		.durable = durable,
		.write_index = write_index,
		.op_index = op_index,
	};
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* Writes data (NULL: zeroes) to the lower device, synchronously. */
static int lower_write(struct fault_dev *d, const void *data, u64 len, u64 offset, unsigned flags,
		       enum tfs_bio_tag tag)
{
	void *zero = NULL;
	int ret;

	if (!data) {
		zero = tfs_bdev_alloc_buf(d->lower, len);
		if (!zero)
			return -ENOMEM;
	}
	ret = tfs_bdev_write(d->lower, data ?: zero, len, offset, flags, tag);
	free(zero);
	return ret;
}

/*
 * Builds the crash image on the lower device: revert every logged write,
 * newest first, to the durable image (each entry's old contents are the
 * image after the entries before it, because the worker runs ops one at a
 * time), then apply again, oldest first, the durable (FUA) entries and the
 * ones the policy keeps; the torn one only for some of its sectors.
 */
int faultdev_build_crash_image(struct fault_dev *d, enum tfs_powercut_policy policy, u64 keep)
{
	unsigned n = d->nr_log, sector = d->sector;
	bool *kept = calloc(n ?: 1, sizeof(bool));
	u64 *widx = calloc(n ?: 1, sizeof(u64));
	unsigned *order = calloc(n ?: 1, sizeof(unsigned));
	bool *torn_sectors = NULL;
	unsigned nr_torn_sectors = 0;
	int torn = -1, ret = 0;

	if (!kept || !widx || !order) {
		free(kept);
		free(widx);
		free(order);
		return -ENOMEM;
	}
	/*
	 * The policies choose in completion order (FAULTS.md: "a prefix in
	 * completion order"): the order end_io was delivered in, which a
	 * delay or reorder makes differ from execution order; writes whose
	 * end_io is still held come last, in execution order.  The image is
	 * still built in execution order, the order the data reached the lower.
	 */
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0; j--) {
			u64 a = d->log[order[j - 1]].acked ?: UINT64_MAX;
			u64 b = d->log[order[j]].acked ?: UINT64_MAX;
			unsigned t = order[j];

			if (a < b || (a == b && order[j - 1] < order[j]))
				break;
			order[j] = order[j - 1];
			order[j - 1] = t;
		}

	switch (policy) {
	case TFS_POWERCUT_none:
		break;
	case TFS_POWERCUT_prefix: {
		u64 k = keep ? (keep < n ? keep : n) : tfs_fault_rand(&d->rng) % (n + 1);

		for (unsigned i = 0; i < k; i++)
			kept[order[i]] = true;
		break;
	}
	case TFS_POWERCUT_random:
		for (unsigned i = 0; i < n; i++)
			kept[i] = tfs_fault_rand(&d->rng) & 1;
		break;
	case TFS_POWERCUT_torn:
		for (unsigned i = 0; i < n; i++) {
			kept[order[i]] = true;
			if (!d->log[order[i]].durable)
				torn = (int)order[i];
		}
		break;
	default:
		break;
	}
	for (unsigned i = 0; i < n; i++) {
		kept[i] |= d->log[i].durable;
		widx[i] = d->log[i].write_index;
	}
	if (torn >= 0) {
		nr_torn_sectors = nr_pieces(d->log[torn].offset, d->log[torn].len, sector);
		torn_sectors = calloc(nr_torn_sectors, sizeof(bool));
		if (!torn_sectors) {
			ret = -ENOMEM;
			goto out;
		}
		for (unsigned s = 0; s < nr_torn_sectors; s++)
			torn_sectors[s] = tfs_fault_rand(&d->rng) & 1;
		/* Torn means not whole: at least one sector stays old. */
		torn_sectors[tfs_fault_rand(&d->rng) % nr_torn_sectors] = false;
	}

	for (unsigned i = n; i-- > 0;) {
		struct log_entry *l = &d->log[i];

		ret = lower_write(d, l->old, l->len, l->offset, 0, TFS_TAG_none);
		if (ret)
			goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		struct log_entry *l = &d->log[i];

		if (!kept[i] && (int)i != torn)
			continue;
		if ((int)i != torn) {
			ret = lower_write(d, l->new, l->len, l->offset, 0, TFS_TAG_none);
			if (ret)
				goto out;
			continue;
		}
		for (unsigned s = 0; s < nr_torn_sectors; s++) {
			u64 off, end;

			if (!torn_sectors[s])
				continue;
			piece(l->offset, l->len, sector, s, &off, &end);
			ret = lower_write(d, l->new ? (char *)l->new + off : NULL, end - off,
					  l->offset + off, 0, TFS_TAG_none);
			if (ret)
				goto out;
		}
	}
	ret = tfs_bdev_flush(d->lower);
out:
	if (ret)
		fprintf(stderr, "tinyfs: fault: %s: writing the crash image failed: %s\n",
			d->bdev.path, tfs_err_str(ret));
	if (torn >= 0)
		kept[torn] = false;
	free(order);

	pthread_mutex_lock(&d->lock);
	free(d->crash_kept);
	free(d->crash_write_index);
	free(d->crash_torn_sectors);
	d->crash_kept = kept;
	d->crash_write_index = widx;
	d->crash_torn_sectors = torn_sectors;
	d->crash = (struct tfs_faultdev_crash){
		.happened = true,
		.policy = policy,
		.nr_unflushed = n,
		.kept = kept,
		.write_index = widx,
		.torn = torn,
		.torn_sectors = torn_sectors,
		.nr_torn_sectors = nr_torn_sectors,
	};
	faultdev_log_clear(d);
	__atomic_store_n(&d->frozen_err, -TFS_ERR_bdev_powercut, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&d->lock);

	{
		struct printbuf out = PRINTBUF;

		prt_printf(
			&out,
			"power cut (policy %s, seed %llu, sector %u): %u writes in the cache, kept",
			tfs_powercut_policy_names[policy], (unsigned long long)d->seed, sector, n);
		for (unsigned i = 0; i < n; i++)
			if (kept[i])
				prt_printf(&out, " w%llu", (unsigned long long)widx[i]);
		if (torn >= 0) {
			prt_printf(&out, ", torn w%llu (sectors", (unsigned long long)widx[torn]);
			for (unsigned s = 0; s < nr_torn_sectors; s++)
				if (torn_sectors[s])
					prt_printf(&out, " %u", s);
			prt_char(&out, ')');
		}
		fprintf(stderr, "tinyfs: fault: %s: %s\n", d->bdev.path, printbuf_str(&out));
		printbuf_exit(&out);
	}
	return ret;
}
void faultdev_log_ack(struct fault_dev *d, u64 index)
{
	unsigned lo = 0, hi = d->nr_log;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (d->log[mid].op_index < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < d->nr_log && d->log[lo].op_index == index)
		d->log[lo].acked = ++d->acks;
}
unsigned tfs_faultdev_nr_unflushed(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);
	unsigned n = 0;

	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->nr_log; i++)
		n += !d->log[i].durable;
	pthread_mutex_unlock(&d->lock);
	return n;
}

void tfs_faultdev_crash_info(struct tfs_bdev *bdev, struct tfs_faultdev_crash *info)
{
	struct fault_dev *d = to_fd(bdev);

	*info = fd_locked_read(d, d->crash);
}
