// SPDX-License-Identifier: GPL-2.0
/*
 * The fault device (see lib/faultdev.h): rules, the worker that runs every
 * op against the lower device, the volatile-cache log and the crash image,
 * the trace and its replay, and the registry of "dev" spec entries that
 * tfs_bdev_open() consults.
 */
#include "lib/faultdev.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

const char *const tfs_fault_action_names[] = {
#define x(n) #n,
	TFS_FAULT_ACTIONS(x)
#undef x
		NULL
};

const char *const tfs_powercut_policy_names[] = {
#define x(n) #n,
	TFS_POWERCUT_POLICIES(x)
#undef x
		NULL
};

/* Held completions (reorder) are released after this even if nothing overtakes them,
 * so a synchronous caller never waits forever. */
#define REORDER_MAX_HOLD_MS 200
/* Errors on a frozen device printed before going quiet. */
#define FROZEN_ERRORS_PRINTED 8

static u64 splitmix64(u64 *state)
{
	u64 z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

/* ---- rules: text ---- */

static const struct {
	const char *name;
	int err;
} errno_names[] = {
	{ "EIO", EIO },		{ "ENOSPC", ENOSPC },	      { "EROFS", EROFS },
	{ "ENOMEM", ENOMEM },	{ "EAGAIN", EAGAIN },	      { "EBUSY", EBUSY },
	{ "ENODEV", ENODEV },	{ "ENXIO", ENXIO },	      { "EINVAL", EINVAL },
	{ "EPERM", EPERM },	{ "EACCES", EACCES },	      { "ETIMEDOUT", ETIMEDOUT },
	{ "EBADMSG", EBADMSG }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EDQUOT", EDQUOT },
	{ "EFBIG", EFBIG },
};

static void prt_errno_name(struct printbuf *out, int err)
{
	for (unsigned i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (errno_names[i].err == err) {
			prt_str(out, errno_names[i].name);
			return;
		}
	prt_printf(out, "%d", err);
}

static const char *const match_op_names[] = { "read", "write", "flush", "discard", "fua" };

void tfs_fault_rule_to_text(struct printbuf *out, const struct tfs_fault_rule *r)
{
	bool first = true;

	for (unsigned i = 0; i < ARRAY_SIZE(match_op_names); i++)
		if (r->ops & (1u << i)) {
			prt_printf(out, "%s%s", first ? "" : ",", match_op_names[i]);
			first = false;
		}
	if (first)
		prt_str(out, "any");
	if (r->tags) {
		first = true;
		prt_str(out, " tag=");
		for (unsigned i = 0; i < TFS_TAG_NR; i++)
			if (r->tags & (1u << i)) {
				prt_printf(out, "%s%s", first ? "" : ",", tfs_bio_tag_names[i]);
				first = false;
			}
	}
	if (r->end)
		prt_printf(out, " range=%llu-%llu", (unsigned long long)r->start,
			   (unsigned long long)r->end);
	if (r->nth)
		prt_printf(out, " nth=%llu", (unsigned long long)r->nth);
	if (r->every)
		prt_printf(out, " every=%llu", (unsigned long long)r->every);
	if (r->ppm)
		prt_printf(out, " prob=%u.%06u", r->ppm / 1000000, r->ppm % 1000000);
	if (r->times)
		prt_printf(out, " times=%llu", (unsigned long long)r->times);
	prt_printf(out, " %s", tfs_fault_action_names[r->action]);
	switch (r->action) {
	case TFS_FAULT_ACT_fail:
		prt_char(out, '=');
		prt_errno_name(out, r->err ?: EIO);
		break;
	case TFS_FAULT_ACT_corrupt:
		if (r->arg)
			prt_printf(out, "=%llu", (unsigned long long)(r->arg - 1));
		break;
	case TFS_FAULT_ACT_tear:
	case TFS_FAULT_ACT_short:
	case TFS_FAULT_ACT_delay:
	case TFS_FAULT_ACT_reorder:
		if (r->arg)
			prt_printf(out, "=%llu", (unsigned long long)r->arg);
		break;
	case TFS_FAULT_ACT_powercut:
		prt_printf(out, "=%s", tfs_powercut_policy_names[r->policy]);
		if (r->policy == TFS_POWERCUT_prefix && r->arg)
			prt_printf(out, ":%llu", (unsigned long long)r->arg);
		break;
	default:
		break;
	}
}

static int parse_num(const char *s, u64 *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

static int parse_errno(const char *s, int *err)
{
	u64 v;

	for (unsigned i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (!strcasecmp(s, errno_names[i].name)) {
			*err = errno_names[i].err;
			return 0;
		}
	if (parse_num(s, &v) || !v || v >= 4096)
		return -EINVAL;
	*err = (int)v;
	return 0;
}

/* "read,fua": true and *mask set if every item is an op name. */
static bool parse_ops(const char *w, unsigned *mask)
{
	char *copy = strdup(w), *save = NULL;
	bool ok = copy != NULL;
	unsigned m = 0;

	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok;
	     t = strtok_r(NULL, ",", &save)) {
		unsigned i;

		if (!strcmp(t, "any"))
			continue;
		for (i = 0; i < ARRAY_SIZE(match_op_names); i++)
			if (!strcmp(t, match_op_names[i]))
				break;
		if (i == ARRAY_SIZE(match_op_names))
			ok = false;
		else
			m |= 1u << i;
	}
	free(copy);
	if (ok)
		*mask = m;
	return ok;
}

static bool parse_tags(const char *s, unsigned *mask)
{
	char *copy = strdup(s), *save = NULL;
	bool ok = copy != NULL;
	unsigned m = 0;

	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok;
	     t = strtok_r(NULL, ",", &save)) {
		unsigned i;

		for (i = 0; i < TFS_TAG_NR; i++)
			if (!strcmp(t, tfs_bio_tag_names[i]))
				break;
		if (i == TFS_TAG_NR)
			ok = false;
		else
			m |= 1u << i;
	}
	free(copy);
	if (ok)
		*mask = m;
	return ok && m;
}

static int parse_action(struct tfs_fault_rule *r, const char *name, const char *val,
			struct printbuf *err)
{
	u64 v = 0;
	unsigned i;

	for (i = 1; i < TFS_FAULT_ACT_NR; i++)
		if (!strcmp(name, tfs_fault_action_names[i]))
			break;
	if (i == TFS_FAULT_ACT_NR)
		return 1; /* not an action */
	if (r->action) {
		prt_printf(err, "two actions ('%s' and '%s')", tfs_fault_action_names[r->action],
			   name);
		return -TFS_ERR_fault_spec_invalid;
	}
	r->action = i;
	switch (r->action) {
	case TFS_FAULT_ACT_fail:
		r->err = EIO;
		if (val && parse_errno(val, &r->err))
			goto bad;
		return 0;
	case TFS_FAULT_ACT_drop:
	case TFS_FAULT_ACT_vanish:
		if (val)
			goto bad;
		return 0;
	case TFS_FAULT_ACT_corrupt:
		if (val && parse_num(val, &v))
			goto bad;
		r->arg = val ? v + 1 : 0;
		return 0;
	case TFS_FAULT_ACT_delay:
		if (!val || parse_num(val, &v) || !v)
			goto bad;
		r->arg = v;
		return 0;
	case TFS_FAULT_ACT_tear:
	case TFS_FAULT_ACT_short:
	case TFS_FAULT_ACT_reorder:
		if (val && parse_num(val, &v))
			goto bad;
		r->arg = v;
		return 0;
	case TFS_FAULT_ACT_powercut: {
		const char *colon = val ? strchr(val, ':') : NULL;
		size_t n = colon ? (size_t)(colon - val) : (val ? strlen(val) : 0);

		r->policy = TFS_POWERCUT_none;
		if (!val)
			return 0;
		for (i = 0; i < TFS_POWERCUT_NR; i++)
			if (strlen(tfs_powercut_policy_names[i]) == n &&
			    !strncmp(val, tfs_powercut_policy_names[i], n))
				break;
		if (i == TFS_POWERCUT_NR)
			goto bad;
		r->policy = i;
		if (colon && (i != TFS_POWERCUT_prefix || parse_num(colon + 1, &r->arg)))
			goto bad;
		return 0;
	}
	default:
		break;
	}
bad:
	prt_printf(err, "bad value for '%s': '%s'", name, val ?: "(none)");
	return -TFS_ERR_fault_spec_invalid;
}

static const char rule_words_help[] =
	"want OPS (read,write,flush,fua,discard,any), tag=T, range=A-B, nth=N, every=K, prob=P, times=T, always, "
	"and one action: fail[=ERRNO], drop, tear[=SECTORS], corrupt[=BYTE], short[=BYTES], delay=MS, "
	"reorder[=K], vanish, powercut[=none|prefix[:K]|random|torn]";

static int parse_rule_word(struct tfs_fault_rule *r, char *w, struct printbuf *err)
{
	char *val = strchr(w, '=');
	u64 v;
	int ret;

	if (!val && parse_ops(w, &r->ops))
		return 0;
	if (val)
		*val++ = '\0';
	ret = parse_action(r, w, val, err);
	if (ret <= 0)
		return ret;

	if (!strcmp(w, "always") && !val) {
		r->every = 1;
	} else if (!strcmp(w, "tag") && val && parse_tags(val, &r->tags)) {
	} else if (!strcmp(w, "nth") && !parse_num(val, &v) && v) {
		r->nth = v;
	} else if (!strcmp(w, "every") && !parse_num(val, &v) && v) {
		r->every = v;
	} else if (!strcmp(w, "times") && !parse_num(val, &v)) {
		r->times = v;
	} else if (!strcmp(w, "prob") && val) {
		char *end;
		double p = strtod(val, &end);

		if (*end || !(p > 0 && p <= 1)) {
			prt_printf(err, "prob=%s is not a number in (0, 1]", val);
			return -TFS_ERR_fault_spec_invalid;
		}
		r->ppm = (u32)(p * 1000000 + 0.5) ?: 1;
	} else if (!strcmp(w, "range") && val) {
		char *dash = strchr(val, '-');

		if (!dash)
			goto bad;
		*dash = '\0';
		if (parse_num(val, &r->start) || parse_num(dash + 1, &r->end) ||
		    r->end <= r->start) {
			*dash = '-';
			goto bad;
		}
	} else {
		goto bad;
	}
	return 0;
bad:
	prt_printf(err, "bad rule word '%s%s%s' (%s)", w, val ? "=" : "", val ?: "",
		   rule_words_help);
	return -TFS_ERR_fault_spec_invalid;
}

/* Ops an action can act on; a rule without ops gets these. */
static unsigned action_ops(enum tfs_fault_action a)
{
	switch (a) {
	case TFS_FAULT_ACT_tear:
		return 1u << TFS_OP_write | TFS_FAULT_MATCH_FUA;
	case TFS_FAULT_ACT_corrupt:
	case TFS_FAULT_ACT_short:
		return 1u << TFS_OP_read | 1u << TFS_OP_write | TFS_FAULT_MATCH_FUA;
	default:
		return ~0u;
	}
}

int tfs_fault_rule_parse(const char *words, struct tfs_fault_rule *rule, struct printbuf *err)
{
	struct tfs_fault_rule r = {};
	char *copy = strdup(words), *save = NULL;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, " \t\n", &save); t && !ret;
	     t = strtok_r(NULL, " \t\n", &save))
		ret = parse_rule_word(&r, t, err);
	free(copy);
	if (ret)
		return ret;
	if (!r.action) {
		prt_printf(err, "rule '%s' has no action (%s)", words, rule_words_help);
		return -TFS_ERR_fault_spec_invalid;
	}
	if (!r.ops && action_ops(r.action) != ~0u)
		r.ops = action_ops(r.action);
	if (r.ops & ~action_ops(r.action)) {
		prt_printf(err, "rule '%s': %s acts only on", words,
			   tfs_fault_action_names[r.action]);
		for (unsigned i = 0; i < ARRAY_SIZE(match_op_names); i++)
			if (action_ops(r.action) & (1u << i))
				prt_printf(err, " %s", match_op_names[i]);
		return -TFS_ERR_fault_spec_invalid;
	}
	if (r.end && r.ops & (1u << TFS_OP_flush)) {
		prt_printf(err, "rule '%s': a flush has no offset, so it cannot match a range",
			   words);
		return -TFS_ERR_fault_spec_invalid;
	}
	*rule = r;
	return 0;
}

/* ---- the device ---- */

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

static const struct tfs_bdev_ops fault_ops;

/*
 * Faults injected by every fault device of this process, closed ones
 * included: a harness that lets tfs_fs_stop() close the devices still
 * learns whether the stop met a fault.
 */
static u64 nr_injected_all;

static struct fault_dev *to_fd(struct tfs_bdev *bdev)
{
	return bdev->private;
}

bool tfs_bdev_is_faultdev(const struct tfs_bdev *bdev)
{
	return bdev && bdev->ops == &fault_ops;
}

struct tfs_bdev *tfs_faultdev_lower(struct tfs_bdev *bdev)
{
	return to_fd(bdev)->lower;
}

static bool grow(void **p, unsigned *size, unsigned nr, size_t elem)
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
	s64 v = -1;

	pthread_mutex_lock(&d->lock);
	if (i < d->nr_rules)
		v = (s64)(fired ? d->rules[i].fired : d->rules[i].matched);
	pthread_mutex_unlock(&d->lock);
	return v;
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

	pthread_mutex_lock(&d->lock);
	*info = d->crash;
	pthread_mutex_unlock(&d->lock);
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
		return splitmix64(&s->rng) % 1000000 < r->ppm;
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

/*
 * ---- the trace ----
 *
 * The worker fills an entry privately (trace_new(), trace_piece()) and
 * publishes it complete (trace_publish()): readers get entries by pointer
 * and read them without the lock, so a published entry never changes.
 */

static void trace_free(struct tfs_fault_trace_entry *e);

/* tfs_fault_trace_entry.stamp: one order over every fault device of the process. */
static u64 trace_stamp;

static struct tfs_fault_trace_entry *trace_new(struct fault_dev *d)
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

static void trace_publish(struct fault_dev *d, struct tfs_fault_trace_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&d->lock);
	if (!grow((void **)&d->trace, &d->trace_size, d->nr_trace, sizeof(*d->trace))) {
		pthread_mutex_unlock(&d->lock);
		trace_free(e);
		return;
	}
	d->trace[d->nr_trace++] = e;
	pthread_mutex_unlock(&d->lock);
}

static void trace_piece(struct tfs_fault_trace_entry *e, u64 offset, u64 len, const void *data)
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

static void trace_free(struct tfs_fault_trace_entry *e)
{
	for (unsigned i = 0; i < e->nr_pieces; i++)
		free(e->pieces[i].data);
	free(e->pieces);
	free(e->mark);
	free(e);
}

/* ---- sectors ---- */

/*
 * The sector is the unit of atomicity, counted from the device's start, not
 * from a bio's: a bio is cut into pieces at aligned sector boundaries,
 * [round_down(off), round_up(off + len)) clipped to the bio, and every fault
 * (tear, short, a torn power cut) keeps or loses whole pieces, so no aligned
 * sector ever holds part of a write.
 */
static unsigned nr_pieces(u64 off, u64 len, unsigned sector)
{
	return (unsigned)((round_up(off + len, sector) - round_down(off, sector)) / sector);
}

/* Piece s of [off, off + len), as [*start, *end) relative to off. */
static void piece(u64 off, u64 len, unsigned sector, unsigned s, u64 *start, u64 *end)
{
	u64 base = round_down(off, sector) + (u64)s * sector;

	*start = max_t(u64, base, off) - off;
	*end = min_t(u64, base + sector, off + len) - off;
}

/* ---- the volatile cache ---- */

static void log_clear(struct fault_dev *d)
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
static void log_clear_locked(struct fault_dev *d)
{
	pthread_mutex_lock(&d->lock);
	log_clear(d);
	pthread_mutex_unlock(&d->lock);
}

/*
 * Appends an entry owning old and new; -ENOMEM (nothing taken) if the log
 * cannot grow, so the caller refuses the write rather than let it count as
 * durable.
 */
static int log_add(struct fault_dev *d, u64 offset, u64 len, void *old, void *new, bool durable,
		   u64 write_index, u64 op_index)
{
	pthread_mutex_lock(&d->lock);
	if (!grow((void **)&d->log, &d->log_size, d->nr_log, sizeof(*d->log))) {
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
static int build_crash_image(struct fault_dev *d, enum tfs_powercut_policy policy, u64 keep)
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
		u64 k = keep ? (keep < n ? keep : n) : splitmix64(&d->rng) % (n + 1);

		for (unsigned i = 0; i < k; i++)
			kept[order[i]] = true;
		break;
	}
	case TFS_POWERCUT_random:
		for (unsigned i = 0; i < n; i++)
			kept[i] = splitmix64(&d->rng) & 1;
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
			torn_sectors[s] = splitmix64(&d->rng) & 1;
		/* Torn means not whole: at least one sector stays old. */
		torn_sectors[splitmix64(&d->rng) % nr_torn_sectors] = false;
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
	log_clear(d);
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
	ret = log_add(d, bio->offset, bio->len, old, landed, false, x->write_index, x->index);
	if (ret)
		goto err;

	if (discard) {
		ret = tfs_bdev_discard(d->lower, bio->offset, bio->len);
		if (!ret)
			trace_piece(x->e, bio->offset, bio->len, NULL);
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
		trace_piece(x->e, bio->offset + off, run, (const char *)data + off);
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
		build_crash_image(d, x->act.policy, x->act.arg);
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
		log_clear_locked(d);
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
					    : splitmix64(&d->rng) % bio->len;

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
					land[s] = splitmix64(&d->rng) & 1;
				land[splitmix64(&d->rng) % nr] = false;
			}
		} else if (a == TFS_FAULT_ACT_short) {
			land_len = short_len(bio->offset, bio->len, x->act.arg, sector);
		} else if (a == TFS_FAULT_ACT_corrupt) {
			u64 at = x->act.arg ? (x->act.arg - 1) % bio->len
					    : splitmix64(&d->rng) % bio->len;

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
			log_clear_locked(d);
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

/* Locked.  The logged write of op index (if still in the cache) was acknowledged. */
static void log_ack(struct fault_dev *d, u64 index)
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

static void complete_bio(struct fault_dev *d, struct tfs_bio *bio)
{
	/* done_internal: the op index of a write or discard (run_bio), for the completion order. */
	if (bio->done_internal && bio->done_internal != FD_INTERNAL) {
		pthread_mutex_lock(&d->lock);
		log_ack(d, bio->done_internal);
		pthread_mutex_unlock(&d->lock);
	}
	bio->end_io(bio);
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
		struct tfs_fault_trace_entry *e = trace_new(d);

		if (e) {
			e->op = TFS_OP_NR;
			e->write_index = d->write_index;
			e->mark = strdup(bio->private);
		}
		trace_publish(d, e);
		free(bio->private);
		free(bio);
		pthread_mutex_lock(&d->lock);
		d->in_flight--;
		pthread_cond_broadcast(&d->idle);
		pthread_mutex_unlock(&d->lock);
		return;
	} else {
		struct powercut_req *req = bio->buf;
		struct tfs_fault_trace_entry *e = trace_new(d);

		if (e) {
			struct printbuf m = PRINTBUF;

			prt_printf(&m, "powercut=%s", tfs_powercut_policy_names[req->policy]);
			e->op = TFS_OP_NR;
			e->write_index = d->write_index;
			e->mark = printbuf_detach(&m);
		}
		trace_publish(d, e);
		req->ret = tfs_faultdev_frozen(&d->bdev)
				   ? -TFS_ERR_bdev_powercut
				   : build_crash_image(d, req->policy, req->keep);
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

	x.e = trace_new(d);
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
	trace_publish(d, x.e);
	if (x.hold) {
		pthread_mutex_lock(&d->lock);
		if (grow((void **)&d->held, &d->held_size, d->nr_held, sizeof(*d->held))) {
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
	log_clear(d);
	free(d->log);
	for (unsigned i = 0; i < d->nr_trace; i++)
		trace_free(d->trace[i]);
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

/* ---- trace: reading, text, replay ---- */

unsigned tfs_faultdev_trace_nr(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);
	unsigned n;

	pthread_mutex_lock(&d->lock);
	n = d->nr_trace;
	pthread_mutex_unlock(&d->lock);
	return n;
}

const struct tfs_fault_trace_entry *tfs_faultdev_trace_entry(struct tfs_bdev *bdev, unsigned i)
{
	struct fault_dev *d = to_fd(bdev);
	const struct tfs_fault_trace_entry *e = NULL;

	pthread_mutex_lock(&d->lock);
	if (i < d->nr_trace)
		e = d->trace[i];
	pthread_mutex_unlock(&d->lock);
	return e;
}

u64 tfs_faultdev_nr_writes(struct tfs_bdev *bdev)
{
	struct fault_dev *d = to_fd(bdev);
	u64 n;

	pthread_mutex_lock(&d->lock);
	n = d->write_index;
	pthread_mutex_unlock(&d->lock);
	return n;
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
 * Trace files: "TFSTRC01", then per entry a struct trace_rec, the mark's
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
	for (unsigned i = 0; i < nr; i++) {
		for (unsigned p = 0; p < entries[i].nr_pieces; p++)
			free(entries[i].pieces[p].data);
		free(entries[i].pieces);
		free(entries[i].mark);
	}
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
		if (!grow((void **)&v, &size, n, sizeof(*v))) {
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

/* ---- the registry of "dev" entries, and vanished paths ---- */

struct reg_entry {
	char *dev; /* path, "#N" or "*" */
	bool has_rule;
	struct tfs_fault_rule rule;
	bool seed_set;
	u64 seed;
	unsigned sector;
	int trace; /* -1: unset */
	char *trace_file;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg_entry *reg;
static unsigned nr_reg, reg_size;
static char **vanished;
static unsigned nr_vanished, vanished_size;
static unsigned nr_opened;

/* Same file: the same name, or the same inode (or the same block device). */
static bool same_dev(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!strcmp(a, b))
		return true;
	if (stat(a, &sa) || stat(b, &sb))
		return false;
	if (S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode))
		return sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool reg_matches(const struct reg_entry *r, const char *path, unsigned index)
{
	u64 n;

	if (!strcmp(r->dev, "*"))
		return true;
	if (r->dev[0] == '#')
		return !parse_num(r->dev + 1, &n) && n == index;
	return same_dev(r->dev, path);
}

int tfs_faultdev_parse_entry(char **w, unsigned nr, bool apply, struct printbuf *err)
{
	struct reg_entry e = { .trace = -1 };
	struct printbuf words = PRINTBUF;
	const char *tracefile = NULL;
	int ret = 0;
	u64 v;

	if (!nr) {
		prt_str(err, "'dev' needs a device (a path, #N or *)");
		return -TFS_ERR_fault_spec_invalid;
	}
	if (w[0][0] == '#' && parse_num(w[0] + 1, &v)) {
		prt_printf(err, "dev %s: want #N, a number after '#'", w[0]);
		return -TFS_ERR_fault_spec_invalid;
	}
	for (unsigned i = 1; i < nr; i++) {
		if (!strncmp(w[i], "seed=", 5)) {
			if (parse_num(w[i] + 5, &e.seed))
				goto bad;
			e.seed_set = true;
		} else if (!strncmp(w[i], "sector=", 7)) {
			if (parse_num(w[i] + 7, &v) || (v != 512 && v != 4096))
				goto bad;
			e.sector = (unsigned)v;
		} else if (!strcmp(w[i], "trace=on") || !strcmp(w[i], "trace=off")) {
			e.trace = !strcmp(w[i], "trace=on");
		} else if (!strncmp(w[i], "tracefile=", 10)) {
			if (!w[i][10])
				goto bad;
			tracefile = w[i] + 10;
		} else {
			prt_printf(&words, "%s ", w[i]);
		}
		continue;
	bad:
		prt_printf(
			err,
			"dev %s: bad '%s' (want seed=N, sector=512|4096, trace=on|off, tracefile=PATH)",
			w[0], w[i]);
		printbuf_exit(&words);
		return -TFS_ERR_fault_spec_invalid;
	}
	if (words.pos) {
		PRINTBUF_ONSTACK(why, 512);

		ret = tfs_fault_rule_parse(printbuf_str(&words), &e.rule, &why);
		if (ret)
			prt_printf(err, "dev %s: %s", w[0], printbuf_str(&why));
		e.has_rule = true;
	}
	printbuf_exit(&words);
	if (ret || !apply)
		return ret;

	e.dev = strdup(w[0]);
	e.trace_file = tracefile ? strdup(tracefile) : NULL;
	if (!e.dev || (tracefile && !e.trace_file)) {
		free(e.dev);
		free(e.trace_file);
		return -ENOMEM;
	}
	pthread_mutex_lock(&reg_lock);
	if (!grow((void **)&reg, &reg_size, nr_reg, sizeof(*reg))) {
		pthread_mutex_unlock(&reg_lock);
		free(e.dev);
		free(e.trace_file);
		return -ENOMEM;
	}
	reg[nr_reg++] = e;
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

__attribute__((constructor)) static void register_dev_kind(void)
{
	tfs_fault_register_kind("dev", tfs_faultdev_parse_entry);
}

void tfs_faultdev_mark_vanished(const char *path)
{
	pthread_mutex_lock(&reg_lock);
	if (grow((void **)&vanished, &vanished_size, nr_vanished, sizeof(*vanished))) {
		vanished[nr_vanished] = strdup(path);
		if (vanished[nr_vanished])
			nr_vanished++;
	}
	pthread_mutex_unlock(&reg_lock);
}

int tfs_faultdev_open_check(const char *path)
{
	bool gone = false;

	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < nr_vanished && !gone; i++)
		gone = same_dev(vanished[i], path);
	pthread_mutex_unlock(&reg_lock);
	if (!gone)
		return 0;
	fprintf(stderr, "tinyfs: %s: cannot open: the device vanished (fault injected)\n", path);
	return -TFS_ERR_bdev_vanished;
}

int tfs_faultdev_stack_registered(struct tfs_bdev *lower, struct tfs_bdev **ret)
{
	struct tfs_bdev *f = NULL;
	unsigned index;
	int err = 0;

	*ret = lower;
	pthread_mutex_lock(&reg_lock);
	index = nr_opened++;
	for (unsigned i = 0; i < nr_reg && !err; i++) {
		struct reg_entry *r = &reg[i];

		if (!reg_matches(r, lower->path, index))
			continue;
		if (!f) {
			err = tfs_faultdev_create(lower, true, &f);
			if (err)
				break;
		}
		if (r->seed_set)
			tfs_faultdev_set_seed(f, r->seed);
		if (r->sector)
			tfs_faultdev_set_sector_size(f, r->sector);
		if (r->trace >= 0)
			tfs_faultdev_set_trace(f, r->trace);
		if (r->trace_file)
			tfs_faultdev_set_trace_file(f, r->trace_file);
		if (r->has_rule) {
			int idx = tfs_faultdev_add_rule(f, &r->rule);

			err = idx < 0 ? idx : 0;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (err && f) {
		/* Do not close lower: the caller does. */
		to_fd(f)->own_lower = false;
		tfs_bdev_close(f);
		f = NULL;
	}
	if (f)
		*ret = f;
	return err;
}

void tfs_faultdev_registry_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < nr_reg; i++) {
		free(reg[i].dev);
		free(reg[i].trace_file);
	}
	nr_reg = 0;
	for (unsigned i = 0; i < nr_vanished; i++)
		free(vanished[i]);
	nr_vanished = 0;
	nr_opened = 0;
	pthread_mutex_unlock(&reg_lock);
}

void tfs_faultdev_registry_to_text(struct printbuf *out)
{
	pthread_mutex_lock(&reg_lock);
	for (unsigned i = 0; i < nr_reg; i++) {
		const struct reg_entry *r = &reg[i];

		prt_printf(out, "dev %s", r->dev);
		if (r->seed_set)
			prt_printf(out, " seed=%llu", (unsigned long long)r->seed);
		if (r->sector)
			prt_printf(out, " sector=%u", r->sector);
		if (r->trace >= 0)
			prt_printf(out, " trace=%s", r->trace ? "on" : "off");
		if (r->trace_file)
			prt_printf(out, " tracefile=%s", r->trace_file);
		if (r->has_rule) {
			prt_char(out, ' ');
			tfs_fault_rule_to_text(out, &r->rule);
		}
		prt_newline(out);
	}
	pthread_mutex_unlock(&reg_lock);
}
