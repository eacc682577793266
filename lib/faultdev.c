// SPDX-License-Identifier: GPL-2.0
/*
 * The fault device (see lib/faultdev.h): its settings and rules, the worker
 * that runs every op against the lower device and injects the faults, and
 * completion.  The volatile cache and the crash image are in
 * lib/faultdev_crash.c, the trace in lib/fault_trace.c, the "dev" entries
 * in lib/fault_registry.c (lib/faultdev_int.h lists them).
 */
#include "lib/faultdev.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/faultdev_int.h"
#include "lib/printbuf.h"

/* Held completions (reorder) are released after this even if nothing overtakes them,
 * so a synchronous caller never waits forever. */
#define REORDER_MAX_HOLD_MS 200
/* Errors on a frozen device printed before going quiet. */
#define FROZEN_ERRORS_PRINTED 8

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

/* A rule on this device, with its counters and its own seeded generator. */
struct rule_state {
	struct tfs_fault_rule rule;
	u64 matched, fired, rng;
};

struct held {
	struct tfs_bio *bio;
	u64 release_after; /* completions count */
	u64 deadline;	   /* now_ns() */
	bool delay;	   /* delay: the deadline always counts; reorder: only when idle */
};

/*
 * Internal ops, queued like bios so they happen in submission order.  They
 * are told apart by done_internal == FD_INTERNAL, which only the fault
 * device sets (fault_submit() clears it on every caller's bio), never by
 * the op: a caller's bad op must reach tfs_bio_check() and be refused.
 */
enum {
	FD_OP_MARK = TFS_OP_NR + 1,
	FD_OP_POWERCUT
};
#define FD_INTERNAL SIZE_MAX

struct powercut_req {
	enum tfs_powercut_policy policy;
	u64 keep;
	int ret;
};

static const struct tfs_bdev_ops fault_ops;

/*
 * Faults injected by every fault device of this process, closed ones
 * included: a harness that lets tfs_fs_stop() close the devices still
 * learns whether the stop met a fault.
 */
static u64 nr_injected_all;

bool tfs_bdev_is_faultdev(const struct tfs_bdev *bdev)
{
	return bdev && bdev->ops == &fault_ops;
}

struct tfs_bdev *tfs_faultdev_lower(struct tfs_bdev *bdev)
{
	return to_fd(bdev)->lower;
}

bool faultdev_grow(void **p, unsigned *size, unsigned nr, size_t elem)
{
	void *n;
	unsigned new_size;

	if (nr < *size)
		return true;
	new_size = *size ? *size * 2 : 16;
	n = realloc(*p, (size_t)new_size * elem);
	if (!n)
		return false;
	*p = n;
	*size = new_size;
	return true;
}

static void reseed_rule(struct fault_dev *d, unsigned i)
{
	d->rules[i].rng = d->seed ^ (0x9e3779b97f4a7c15ULL * (i + 1));
}

void tfs_faultdev_set_seed(struct tfs_bdev *bdev, u64 seed)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	d->seed = d->rng = seed;
	for (unsigned i = 0; i < d->nr_rules; i++)
		reseed_rule(d, i);
	pthread_mutex_unlock(&d->lock);
}

int tfs_faultdev_set_sector_size(struct tfs_bdev *bdev, unsigned size)
{
	struct fault_dev *d = to_fd(bdev);

	if (size != 512 && size != 4096)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	d->sector = size < bdev->logical_block_size ? bdev->logical_block_size : size;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void tfs_faultdev_set_trace(struct tfs_bdev *bdev, bool on)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	d->trace_on = on;
	pthread_mutex_unlock(&d->lock);
}

int tfs_faultdev_set_trace_file(struct tfs_bdev *bdev, const char *path)
{
	struct fault_dev *d = to_fd(bdev);
	char *p = path ? strdup(path) : NULL;

	if (path && !p)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	free(d->trace_file);
	d->trace_file = p;
	if (p)
		d->trace_on = true;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int tfs_faultdev_add_rule(struct tfs_bdev *bdev, const struct tfs_fault_rule *rule)
{
	struct fault_dev *d = to_fd(bdev);
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = d->nr_rules;
	if (!(d->nr_rules % 8)) {
		void *n = realloc(d->rules, (d->nr_rules + 8) * sizeof(*d->rules));

		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		d->rules = n;
	}
	d->rules[d->nr_rules] = (struct rule_state){ .rule = *rule };
	reseed_rule(d, d->nr_rules);
	d->nr_rules++;
out:
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int tfs_faultdev_add_rule_str(struct tfs_bdev *bdev, const char *words, struct printbuf *err)
{
	struct tfs_fault_rule r;

	return tfs_fault_rule_parse(words, &r, err) ?: tfs_faultdev_add_rule(bdev, &r);
}

void tfs_faultdev_clear_rules(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	d->nr_rules = 0;
	pthread_mutex_unlock(&d->lock);
}

static s64 rule_stat(struct tfs_bdev *bdev, unsigned i, bool fired)
{
	struct fault_dev *d = to_fd(bdev);

	return fd_locked_read(d, i >= d->nr_rules
					 ? (s64)-1
					 : (s64)(fired ? d->rules[i].fired : d->rules[i].matched));
}

s64 tfs_faultdev_rule_fired(struct tfs_bdev *bdev, unsigned i)
{
	return rule_stat(bdev, i, true);
}

s64 tfs_faultdev_rule_matched(struct tfs_bdev *bdev, unsigned i)
{
	return rule_stat(bdev, i, false);
}

u64 tfs_faultdev_nr_injected(struct tfs_bdev *bdev)
{
	return __atomic_load_n(&to_fd(bdev)->nr_injected, __ATOMIC_RELAXED);
}

u64 tfs_faultdev_nr_injected_all(void)
{
	return __atomic_load_n(&nr_injected_all, __ATOMIC_RELAXED);
}

bool tfs_faultdev_frozen(struct tfs_bdev *bdev)
{
	return __atomic_load_n(&to_fd(bdev)->frozen_err, __ATOMIC_ACQUIRE) != 0;
}

/* ---- rule matching (under d->lock) ---- */

static bool rule_matches(const struct tfs_fault_rule *r, const struct tfs_bio *bio)
{
	unsigned bits = 1u << bio->op;

	if (bio->op == TFS_OP_write && (bio->flags & TFS_BIO_FUA))
		bits |= TFS_FAULT_MATCH_FUA;
	if (r->ops && !(r->ops & bits))
		return false;
	if (r->tags && !(r->tags & (1u << bio->tag)))
		return false;
	if (r->end && (bio->op == TFS_OP_flush || bio->offset >= r->end ||
		       bio->offset + bio->len <= r->start))
		return false;
	return true;
}

static bool rule_fires(struct rule_state *s)
{
	const struct tfs_fault_rule *r = &s->rule;
	u64 n = ++s->matched, first = r->nth ?: (r->every ?: 1);

	if (r->times && s->fired >= r->times)
		return false;
	if (n < first)
		return false;
	if (r->ppm)
		return tfs_fault_rand(&s->rng) % 1000000 < r->ppm;
	if (r->every)
		return !((n - first) % r->every);
	return n == first;
}

/* Every rule counts the op; the first that fires acts.  Returns its index or -1. */
static int rules_eval(struct fault_dev *d, const struct tfs_bio *bio)
{
	int fired = -1;

	for (unsigned i = 0; i < d->nr_rules; i++) {
		struct rule_state *s = &d->rules[i];

		if (!rule_matches(&s->rule, bio))
			continue;
		if (rule_fires(s) && fired < 0) {
			s->fired++;
			fired = (int)i;
		}
	}
	return fired;
}

/*
 * What print_repro() needs, copied under the lock when the rule fired:
 * tfs_faultdev_add_rule() may realloc d->rules as soon as it is dropped.
 */
struct repro {
	struct tfs_fault_rule rule;
	u64 fired, seed;
	unsigned sector;
};

static void print_repro(struct fault_dev *d, const struct tfs_bio *bio, u64 index, int ri,
			const struct repro *s, const char *what)
{
	struct printbuf rule = PRINTBUF;

	tfs_fault_rule_to_text(&rule, &s->rule);
	fprintf(stderr,
		"tinyfs: fault: %s: op #%llu %s%s offset %llu length %zu tag %s: %s (rule %d, fire %llu); "
		"reproduce with TFS_FAULTS='dev %s seed=%llu sector=%u %s'\n",
		d->bdev.path, (unsigned long long)index, tfs_bio_op_names[bio->op],
		bio->flags & TFS_BIO_FUA ? "+fua" : "", (unsigned long long)bio->offset, bio->len,
		tfs_bio_tag_names[bio->tag < TFS_TAG_NR ? bio->tag : 0], what, ri,
		(unsigned long long)s->fired, d->bdev.path, (unsigned long long)s->seed, s->sector,
		printbuf_str(&rule));
	printbuf_exit(&rule);
}
/* ---- executing one op (worker thread) ---- */

/*
 * Bytes a short completion of [off, off + len) does: fewer than len, ending
 * on an aligned sector boundary (whole pieces).
 */
static u64 short_len(u64 off, u64 len, u64 arg, unsigned sector)
{
	u64 end = round_down(off + min_t(u64, arg ?: len / 2, len), sector);

	if (end >= off + len)
		end = round_down(off + len - 1, sector);
	return end > off ? end - off : 0;
}

struct exec {
	struct tfs_fault_trace_entry *e;
	int rule;
	struct tfs_fault_rule act; /* copy of the rule that fired */
	u64 index, write_index;
	bool hold;
};

/*
 * A write (or discard, data NULL) of bio's range where only the sectors in
 * `land` (NULL: all) reach the lower device.  Logs it in the volatile cache
 * and the trace.
 */
static int exec_write(struct fault_dev *d, struct tfs_bio *bio, struct exec *x, const void *data,
		      const bool *land, u64 land_len)
{
	unsigned sector = d->sector, nr = nr_pieces(bio->offset, bio->len, sector);
	bool discard = bio->op == TFS_OP_discard;
	bool fua = bio->op == TFS_OP_write && (bio->flags & TFS_BIO_FUA);
	void *old = tfs_bdev_alloc_buf(d->lower, bio->len);
	void *landed = discard ? NULL : tfs_bdev_alloc_buf(d->lower, bio->len);
	int ret;

	if (!old || (!discard && !landed)) {
		ret = -ENOMEM;
		goto err;
	}
	/* The pre-image: the crash image is built by undoing this write.  A
	 * failure here is the caller's write failing, reported once as such. */
	struct tfs_bio pre = {
		.bdev = d->lower,
		.op = TFS_OP_read,
		.flags = TFS_BIO_QUIET,
		.tag = bio->tag,
		.offset = bio->offset,
		.buf = old,
		.len = bio->len,
	};

	ret = tfs_bio_submit_wait(&pre);
	if (ret)
		goto err;
	if (landed)
		memcpy(landed, old, bio->len);
	/*
	 * The undo is logged before anything reaches the lower, and stays
	 * whatever the lower does: a write that fails or is short may have
	 * left some of its bytes there, and only the undo keeps them out of
	 * a crash image.  Not durable until it succeeded (FUA included).
	 */
	ret = faultdev_log_add(d, bio->offset, bio->len, old, landed, false, x->write_index,
			       x->index);
	if (ret)
		goto err;

	if (discard) {
		ret = tfs_bdev_discard(d->lower, bio->offset, bio->len);
		if (!ret)
			faultdev_trace_piece(x->e, bio->offset, bio->len, NULL);
		return ret;
	}

	for (unsigned s = 0; s < nr;) {
		unsigned e = s;
		u64 off, end, ps, pe, run;

		piece(bio->offset, bio->len, sector, s, &off, &end);
		if ((land && !land[s]) || off >= land_len) {
			s++;
			continue;
		}
		/* A run of landing pieces goes down as one write. */
		for (; e < nr; e++) {
			piece(bio->offset, bio->len, sector, e, &ps, &pe);
			if ((land && !land[e]) || ps >= land_len)
				break;
			end = pe;
		}
		run = end - off;
		/*
		 * Into the logged new contents first: if this run fails, any of
		 * it may be on the lower, so a power cut that keeps the write
		 * applies all of it (the runs after it never went down).
		 */
		memcpy((char *)landed + off, (const char *)data + off, run);
		ret = tfs_bdev_write(d->lower, (const char *)data + off, run, bio->offset + off,
				     fua ? TFS_BIO_FUA : 0, bio->tag);
		if (ret)
			return ret;
		faultdev_trace_piece(x->e, bio->offset + off, run, (const char *)data + off);
		s = e;
	}
	/* FUA: durable at completion, kept by every power cut. */
	if (fua) {
		pthread_mutex_lock(&d->lock);
		d->log[d->nr_log - 1].durable = true;
		pthread_mutex_unlock(&d->lock);
	}
	return 0;
err:
	free(old);
	free(landed);
	return ret;
}

static int exec_op(struct fault_dev *d, struct tfs_bio *bio, struct exec *x)
{
	enum tfs_fault_action a = x->rule >= 0 ? x->act.action : TFS_FAULT_ACT_none;
	unsigned sector = d->sector;
	int ret;

	switch (a) {
	case TFS_FAULT_ACT_fail:
		return -(x->act.err ?: EIO);
	case TFS_FAULT_ACT_drop:
		/* Reported done, never done: a flush leaves the cache as it is. */
		return 0;
	case TFS_FAULT_ACT_vanish:
		return -TFS_ERR_bdev_vanished;
	case TFS_FAULT_ACT_powercut:
		faultdev_build_crash_image(d, x->act.policy, x->act.arg);
		return -TFS_ERR_bdev_powercut;
	case TFS_FAULT_ACT_delay:
	case TFS_FAULT_ACT_reorder:
		x->hold = true;
		break;
	default:
		break;
	}

	/* PREFLUSH: everything completed before this write becomes durable first. */
	if (bio->op == TFS_OP_write && (bio->flags & TFS_BIO_PREFLUSH)) {
		ret = tfs_bdev_flush(d->lower);
		if (ret)
			return ret;
		faultdev_log_clear_locked(d);
	}

	switch (bio->op) {
	case TFS_OP_read: {
		size_t len = bio->len;

		if (a == TFS_FAULT_ACT_short)
			len = short_len(bio->offset, bio->len, x->act.arg, sector);
		ret = len ? tfs_bdev_read(d->lower, bio->buf, len, bio->offset, bio->tag) : 0;
		if (ret)
			return ret;
		if (a == TFS_FAULT_ACT_corrupt) {
			u64 at = x->act.arg ? (x->act.arg - 1) % bio->len
					    : tfs_fault_rand(&d->rng) % bio->len;

			((u8 *)bio->buf)[at] ^= 0xff;
		}
		return a == TFS_FAULT_ACT_short ? -TFS_ERR_bdev_short_io : 0;
	}
	case TFS_OP_write: {
		unsigned nr = nr_pieces(bio->offset, bio->len, sector);
		bool *land = NULL;
		void *copy = NULL;
		const void *data = bio->buf;
		u64 land_len = bio->len;

		if (a == TFS_FAULT_ACT_tear) {
			land = calloc(nr, sizeof(bool));
			if (!land)
				return -ENOMEM;
			if (x->act.arg) {
				for (unsigned s = 0; s < nr && s < x->act.arg; s++)
					land[s] = true;
			} else {
				for (unsigned s = 0; s < nr; s++)
					land[s] = tfs_fault_rand(&d->rng) & 1;
				land[tfs_fault_rand(&d->rng) % nr] = false;
			}
		} else if (a == TFS_FAULT_ACT_short) {
			land_len = short_len(bio->offset, bio->len, x->act.arg, sector);
		} else if (a == TFS_FAULT_ACT_corrupt) {
			u64 at = x->act.arg ? (x->act.arg - 1) % bio->len
					    : tfs_fault_rand(&d->rng) % bio->len;

			copy = tfs_bdev_alloc_buf(d->lower, bio->len);
			if (!copy)
				return -ENOMEM;
			memcpy(copy, bio->buf, bio->len);
			((u8 *)copy)[at] ^= 0xff;
			data = copy;
		}
		ret = exec_write(d, bio, x, data, land, land_len);
		free(land);
		free(copy);
		if (!ret && a == TFS_FAULT_ACT_short)
			ret = -TFS_ERR_bdev_short_io;
		return ret;
	}
	case TFS_OP_discard:
		return exec_write(d, bio, x, NULL, NULL, bio->len);
	case TFS_OP_flush:
		ret = tfs_bdev_flush(d->lower);
		/* Every write completed before the flush is now durable. */
		if (!ret)
			faultdev_log_clear_locked(d);
		return ret;
	default:
		return -TFS_ERR_invalid_argument;
	}
}

static const char *fail_why(struct fault_dev *d, int err)
{
	if (err == -TFS_ERR_bdev_powercut)
		return "the power was cut";
	if (err == -TFS_ERR_bdev_vanished)
		return "the device vanished";
	return NULL;
}

static void complete_bio(struct fault_dev *d, struct tfs_bio *bio)
{
	/* done_internal: the op index of a write or discard (run_bio), for the completion order. */
	if (bio->done_internal && bio->done_internal != FD_INTERNAL) {
		pthread_mutex_lock(&d->lock);
		faultdev_log_ack(d, bio->done_internal);
		pthread_mutex_unlock(&d->lock);
	}
	tfs_bio_endio(bio);
	pthread_mutex_lock(&d->lock);
	d->completions++;
	d->in_flight--;
	pthread_cond_broadcast(&d->idle);
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

static void run_internal(struct fault_dev *d, struct tfs_bio *bio)
{
	if (bio->op == (enum tfs_bio_op)FD_OP_MARK) {
		struct tfs_fault_trace_entry *e = faultdev_trace_new(d);

		if (e) {
			e->op = TFS_OP_NR;
			e->write_index = d->write_index;
			e->mark = strdup(bio->private);
		}
		faultdev_trace_publish(d, e);
		free(bio->private);
		free(bio);
		pthread_mutex_lock(&d->lock);
		d->in_flight--;
		pthread_cond_broadcast(&d->idle);
		pthread_mutex_unlock(&d->lock);
		return;
	} else {
		struct powercut_req *req = bio->buf;
		struct tfs_fault_trace_entry *e = faultdev_trace_new(d);

		if (e) {
			struct printbuf m = PRINTBUF;

			prt_printf(&m, "powercut=%s", tfs_powercut_policy_names[req->policy]);
			e->op = TFS_OP_NR;
			e->write_index = d->write_index;
			e->mark = printbuf_detach(&m);
		}
		faultdev_trace_publish(d, e);
		req->ret = tfs_faultdev_frozen(&d->bdev)
				   ? -TFS_ERR_bdev_powercut
				   : faultdev_build_crash_image(d, req->policy, req->keep);
		bio->result = req->ret;
		complete_bio(d, bio);
	}
}

static void run_bio(struct fault_dev *d, struct tfs_bio *bio)
{
	struct exec x = { .rule = -1 };
	struct repro repro;
	int frozen, ret;

	if (bio->done_internal == FD_INTERNAL)
		return run_internal(d, bio);

	pthread_mutex_lock(&d->lock);
	x.index = ++d->op_index;
	if (bio->op == TFS_OP_write || bio->op == TFS_OP_discard)
		x.write_index = ++d->write_index;
	frozen = d->frozen_err;
	pthread_mutex_unlock(&d->lock);

	x.e = faultdev_trace_new(d);
	if (x.e) {
		x.e->index = x.index;
		x.e->write_index = x.write_index;
		x.e->op = bio->op;
		x.e->flags = bio->flags;
		x.e->tag = bio->tag;
		x.e->offset = bio->offset;
		x.e->len = bio->len;
		if (bio->op == TFS_OP_write && bio->buf)
			x.e->csum = tfs_crc32c(0, bio->buf, bio->len);
	}

	if (frozen) {
		ret = frozen;
		if (d->frozen_printed++ < FROZEN_ERRORS_PRINTED)
			tfs_bio_err_msg(bio, ret, fail_why(d, ret));
		goto done;
	}
	ret = tfs_bio_check(bio);
	if (ret)
		goto done;

	pthread_mutex_lock(&d->lock);
	x.rule = rules_eval(d, bio);
	if (x.rule >= 0) {
		x.act = d->rules[x.rule].rule;
		repro = (struct repro){
			.rule = x.act,
			.fired = d->rules[x.rule].fired,
			.seed = d->seed,
			.sector = d->sector,
		};
		d->nr_injected++;
		__atomic_add_fetch(&nr_injected_all, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&d->lock);

	if (x.rule >= 0) {
		print_repro(d, bio, x.index, x.rule, &repro, tfs_fault_action_names[x.act.action]);
		if (x.e) {
			x.e->action = x.act.action;
			x.e->rule = x.rule;
		}
		if (x.act.action == TFS_FAULT_ACT_vanish) {
			__atomic_store_n(&d->frozen_err, -TFS_ERR_bdev_vanished, __ATOMIC_RELEASE);
			tfs_faultdev_mark_vanished(d->bdev.path);
		}
	}

	ret = exec_op(d, bio, &x);
	if (bio->op == TFS_OP_write || bio->op == TFS_OP_discard)
		bio->done_internal = x.index;
	if (ret && !(x.rule >= 0 && x.act.action != TFS_FAULT_ACT_none))
		tfs_bio_err_msg(bio, ret, NULL);
done:
	if (ret)
		tfs_bdev_count_error(&d->bdev, bio);
	bio->result = ret;
	if (x.e) {
		x.e->result = ret;
		if (bio->op == TFS_OP_read && !ret)
			x.e->csum = tfs_crc32c(0, bio->buf, bio->len);
	}
	faultdev_trace_publish(d, x.e);
	if (x.hold) {
		pthread_mutex_lock(&d->lock);
		if (faultdev_grow((void **)&d->held, &d->held_size, d->nr_held, sizeof(*d->held))) {
			bool delay = x.act.action == TFS_FAULT_ACT_delay;

			d->held[d->nr_held++] = (struct held){
				.bio = bio,
				.release_after =
					delay ? UINT64_MAX : d->completions + (x.act.arg ?: 1),
				.deadline = now_ns() +
					    (delay ? x.act.arg : REORDER_MAX_HOLD_MS) * 1000000ull,
				.delay = delay,
			};
			pthread_mutex_unlock(&d->lock);
			return;
		}
		pthread_mutex_unlock(&d->lock);
	}
	complete_bio(d, bio);
}

/*
 * Locked.  Takes out a held bio that is due (any, with all).  A reordered
 * bio's time limit counts only while no other work is queued, so what was
 * queued behind it always overtakes it, however slow the machine.
 */
static struct tfs_bio *take_due(struct fault_dev *d, bool all, bool idle, u64 *next_deadline)
{
	u64 now = now_ns();

	*next_deadline = UINT64_MAX;
	for (unsigned i = 0; i < d->nr_held; i++) {
		struct held *h = &d->held[i];

		if (all || d->completions >= h->release_after ||
		    (h->deadline <= now && (h->delay || idle))) {
			struct tfs_bio *bio = h->bio;

			memmove(h, h + 1, (d->nr_held - i - 1) * sizeof(*h));
			d->nr_held--;
			return bio;
		}
		if (h->deadline < *next_deadline && (h->delay || idle))
			*next_deadline = h->deadline;
	}
	return NULL;
}

static void *fault_worker(void *arg)
{
	struct fault_dev *d = arg;

	pthread_mutex_lock(&d->lock);
	while (1) {
		bool run = d->queue && (!d->paused || d->draining || d->stop);
		bool idle = !run;
		u64 deadline;
		struct tfs_bio *bio =
			take_due(d, idle && (d->draining || d->stop), idle, &deadline);

		if (bio) {
			int frozen = d->frozen_err;

			pthread_mutex_unlock(&d->lock);
			/*
			 * The power was cut before this completion was
			 * delivered: it was never acknowledged, so the caller
			 * must not take it as done (the crash image treated it
			 * as not acknowledged either).
			 */
			if (frozen == -TFS_ERR_bdev_powercut && !bio->result) {
				bio->result = frozen;
				tfs_bdev_count_error(&d->bdev, bio);
			}
			complete_bio(d, bio);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		if (run) {
			bio = d->queue;
			d->queue = bio->next_internal;
			if (!d->queue)
				d->queue_tail = &d->queue;
			pthread_mutex_unlock(&d->lock);
			run_bio(d, bio);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		if (d->stop && !d->queue && !d->nr_held)
			break;
		if (deadline == UINT64_MAX) {
			pthread_cond_wait(&d->wake, &d->lock);
		} else {
			struct timespec ts;

			/* The condvar's clock is CLOCK_MONOTONIC (set at create). */
			ts.tv_sec = (time_t)(deadline / 1000000000ull);
			ts.tv_nsec = (long)(deadline % 1000000000ull);
			pthread_cond_timedwait(&d->wake, &d->lock, &ts);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void enqueue(struct fault_dev *d, struct tfs_bio *bio)
{
	bio->next_internal = NULL;
	pthread_mutex_lock(&d->lock);
	d->in_flight++;
	*d->queue_tail = bio;
	d->queue_tail = &bio->next_internal;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

static void fault_submit(struct tfs_bdev *bdev, struct tfs_bio *bio)
{
	bio->bdev = bdev;
	bio->done_internal = 0;
	tfs_bdev_count_submit(bdev, bio);
	enqueue(to_fd(bdev), bio);
}

static void fault_drain(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	d->draining++;
	pthread_cond_broadcast(&d->wake);
	while (d->in_flight)
		pthread_cond_wait(&d->idle, &d->lock);
	d->draining--;
	pthread_mutex_unlock(&d->lock);
}

void tfs_faultdev_pause(struct tfs_bdev *bdev, bool paused)
{
	struct fault_dev *d = to_fd(bdev);

	pthread_mutex_lock(&d->lock);
	d->paused = paused;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

void tfs_faultdev_mark(struct tfs_bdev *bdev, const char *label)
{
	struct tfs_bio *bio = calloc(1, sizeof(*bio));

	if (!bio)
		return;
	bio->op = (enum tfs_bio_op)FD_OP_MARK;
	bio->done_internal = FD_INTERNAL;
	bio->private = strdup(label ?: "");
	if (!bio->private) {
		free(bio);
		return;
	}
	enqueue(to_fd(bdev), bio);
}

struct powercut_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void powercut_end_io(struct tfs_bio *bio)
{
	struct powercut_wait *w = bio->private;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int tfs_faultdev_powercut(struct tfs_bdev *bdev, enum tfs_powercut_policy policy, u64 keep)
{
	struct powercut_req req = { .policy = policy, .keep = keep };
	struct powercut_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };
	struct tfs_bio bio = {
		.bdev = bdev,
		.op = (enum tfs_bio_op)FD_OP_POWERCUT,
		.buf = &req,
		.done_internal = FD_INTERNAL,
		.end_io = powercut_end_io,
		.private = &w,
	};

	struct fault_dev *d = to_fd(bdev);

	if (policy >= TFS_POWERCUT_NR)
		return -TFS_ERR_invalid_argument;
	/* Like a drain, the cut runs even on a paused device (with what is queued before it). */
	pthread_mutex_lock(&d->lock);
	d->draining++;
	pthread_mutex_unlock(&d->lock);
	enqueue(d, &bio);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_lock(&d->lock);
	d->draining--;
	pthread_mutex_unlock(&d->lock);
	return req.ret;
}

static void fault_close(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	if (d->thread_started) {
		tfs_faultdev_pause(bdev, false);
		fault_drain(bdev);
		pthread_mutex_lock(&d->lock);
		d->stop = true;
		d->paused = false;
		pthread_cond_broadcast(&d->wake);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	if (d->trace_file)
		tfs_faultdev_trace_save(bdev, d->trace_file);
	free(d->trace_file);
	if (d->own_lower)
		tfs_bdev_close(d->lower);
	faultdev_log_clear(d);
	free(d->log);
	for (unsigned i = 0; i < d->nr_trace; i++)
		faultdev_trace_entry_free(d->trace[i]);
	free(d->trace);
	free(d->held);
	free(d->rules);
	free(d->crash_kept);
	free(d->crash_write_index);
	free(d->crash_torn_sectors);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	pthread_cond_destroy(&d->idle);
	free(d->bdev.path);
	free(d);
}

static void fault_to_text(struct printbuf *out, struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);

	printbuf_tabstops_reset(out);
	printbuf_tabstop_push(out, 20);
	printbuf_tabstop_push(out, 12);
	printbuf_tabstop_push(out, 12);
	printbuf_tabstop_push(out, 10);
	pthread_mutex_lock(&d->lock);
	prt_printf(out, "device\t%s\n", bdev->path);
	prt_printf(out, "implementation\tfault device over %s\n", d->lower->ops->name);
	prt_printf(out, "seed\t%llu\n", (unsigned long long)d->seed);
	prt_printf(out, "sector\t%u\n", d->sector);
	prt_printf(out, "state\t%s\n",
		   d->frozen_err == -TFS_ERR_bdev_powercut   ? "power cut"
		   : d->frozen_err == -TFS_ERR_bdev_vanished ? "vanished"
		   : d->paused				     ? "paused"
							     : "running");
	prt_printf(out, "ops\t%llu\n", (unsigned long long)d->op_index);
	prt_printf(out, "faults injected\t%llu\n", (unsigned long long)d->nr_injected);
	prt_printf(out, "unflushed writes\t%u\n", d->nr_log);
	prt_printf(out, "trace\t%s, %u entries\n", d->trace_on ? "on" : "off", d->nr_trace);
	for (unsigned i = 0; i < d->nr_rules; i++) {
		prt_printf(out, "rule %u\t", i);
		tfs_fault_rule_to_text(out, &d->rules[i].rule);
		prt_printf(out, " (matched %llu, fired %llu)\n",
			   (unsigned long long)d->rules[i].matched,
			   (unsigned long long)d->rules[i].fired);
	}
	pthread_mutex_unlock(&d->lock);
	tfs_bdev_counters_to_text(out, &bdev->counters);
	prt_str(out, "lower:\n");
	printbuf_indent_add(out, 2);
	tfs_bdev_to_text(out, d->lower);
	printbuf_indent_sub(out, 2);
}

static const struct tfs_bdev_ops fault_ops = {
	.name = "fault",
	.submit = fault_submit,
	.drain = fault_drain,
	.close = fault_close,
	.to_text = fault_to_text,
};

int tfs_faultdev_create(struct tfs_bdev *lower, bool own_lower, struct tfs_bdev **ret)
{
	struct fault_dev *d = calloc(1, sizeof(*d));
	pthread_condattr_t attr;
	int err;

	*ret = NULL;
	if (!d)
		return -ENOMEM;
	d->lower = lower;
	d->own_lower = own_lower;
	d->queue_tail = &d->queue;
	d->trace_on = true;
	d->sector = lower->logical_block_size > 512 ? lower->logical_block_size : 512;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wake, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&d->idle, NULL);

	d->bdev.ops = &fault_ops;
	d->bdev.private = d;
	d->bdev.path = strdup(lower->path);
	d->bdev.size = lower->size;
	d->bdev.logical_block_size = lower->logical_block_size;
	d->bdev.is_blockdev = lower->is_blockdev;
	d->bdev.direct = lower->direct;
	d->bdev.read_only = lower->read_only;
	if (!d->bdev.path) {
		err = -ENOMEM;
		goto err;
	}
	err = -pthread_create(&d->thread, NULL, fault_worker, d);
	if (err) {
		fprintf(stderr, "tinyfs: fault: %s: cannot start the worker: %s\n", lower->path,
			tfs_err_str(err));
		goto err;
	}
	d->thread_started = true;
	*ret = &d->bdev;
	return 0;
err:
	d->own_lower = false;
	fault_close(&d->bdev);
	return err;
}
