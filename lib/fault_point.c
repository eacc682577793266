// SPDX-License-Identifier: GPL-2.0
#include "lib/fault_point.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/printbuf.h"

/* Bounds of the section every tfs_fault() site adds a pointer to. */
extern struct tfs_fault_point *__start_tfs_fault_points[] __attribute__((weak));
extern struct tfs_fault_point *__stop_tfs_fault_points[] __attribute__((weak));

bool tfs_fault_points_active;

/* Recursive: a hit can happen while the registry is being printed (the
 * printbuf it prints into has a fault point of its own). */
static pthread_mutex_t fault_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static bool counting;
static unsigned nr_armed;

#define for_each_fault_point(_p, _i)                                 \
	for (struct tfs_fault_point **_i = __start_tfs_fault_points; \
	     _i && _i < __stop_tfs_fault_points && ((_p) = *_i, 1); _i++)

static void update_active(void)
{
	__atomic_store_n(&tfs_fault_points_active, counting || nr_armed, __ATOMIC_RELEASE);
}

static void arm_to_text(struct printbuf *out, const struct tfs_fault_arm *a)
{
	switch (a->mode) {
	case TFS_FAULT_OFF:
		prt_str(out, "off");
		break;
	case TFS_FAULT_ONESHOT:
		prt_printf(out, "nth=%llu", (unsigned long long)(a->nth ?: 1));
		break;
	case TFS_FAULT_EVERY_NTH:
		prt_printf(out, "every=%llu", (unsigned long long)(a->nth ?: 1));
		break;
	case TFS_FAULT_PROBABILITY:
		prt_printf(out, "prob=%u.%06u seed=%llu", a->ppm / 1000000, a->ppm % 1000000,
			   (unsigned long long)a->seed);
		break;
	case TFS_FAULT_ALWAYS:
		prt_str(out, "always");
		if (a->nth > 1)
			prt_printf(out, " nth=%llu", (unsigned long long)a->nth);
		break;
	}
	if (a->times)
		prt_printf(out, " times=%llu", (unsigned long long)a->times);
}

static bool should_fire(struct tfs_fault_point *p)
{
	u64 n = p->arm.nth ?: 1;

	switch (p->arm.mode) {
	case TFS_FAULT_OFF:
		return false;
	case TFS_FAULT_ONESHOT:
		return p->hits_since_arm == n;
	case TFS_FAULT_EVERY_NTH:
		return !(p->hits_since_arm % n);
	case TFS_FAULT_PROBABILITY:
		return tfs_fault_rand(&p->rng) % 1000000 < p->arm.ppm;
	case TFS_FAULT_ALWAYS:
		/* From the nth hit on: a persistent failure that starts there. */
		return p->hits_since_arm >= n;
	}
	return false;
}

static void disarm_locked(struct tfs_fault_point *p)
{
	if (p->arm.mode != TFS_FAULT_OFF)
		nr_armed--;
	p->arm = (struct tfs_fault_arm){ .mode = TFS_FAULT_OFF };
}

bool tfs_fault_point_hit(struct tfs_fault_point *p)
{
	bool fire;

	pthread_mutex_lock(&fault_lock);
	p->hits++;
	p->hits_since_arm++;
	fire = should_fire(p);
	if (fire) {
		p->fired++;
		p->fired_ever++;

		PRINTBUF_ONSTACK(repro, 128);
		arm_to_text(&repro, &p->arm);
		fprintf(stderr,
			"tinyfs: fault point %s fired (hit %llu since armed) at %s:%u; reproduce with TFS_FAULTS='point %s %s'\n",
			p->name, (unsigned long long)p->hits_since_arm, p->file, p->line, p->name,
			printbuf_str(&repro));
		if (p->arm.mode == TFS_FAULT_ONESHOT || (p->arm.times && p->fired >= p->arm.times))
			disarm_locked(p);
		update_active();
	}
	pthread_mutex_unlock(&fault_lock);
	return fire;
}

int tfs_fault_point_arm(const char *name, const struct tfs_fault_arm *arm)
{
	struct tfs_fault_point *p;
	int ret = -TFS_ERR_fault_point_unknown;

	pthread_mutex_lock(&fault_lock);
	for_each_fault_point (p, i) {
		if (strcmp(p->name, name))
			continue;
		disarm_locked(p);
		p->arm = *arm;
		p->hits_since_arm = 0;
		p->fired = 0;
		p->rng = arm->seed;
		if (arm->mode != TFS_FAULT_OFF)
			nr_armed++;
		ret = 0;
	}
	update_active();
	pthread_mutex_unlock(&fault_lock);
	return ret;
}

int tfs_fault_point_disarm(const char *name)
{
	return tfs_fault_point_arm(name, &(struct tfs_fault_arm){ .mode = TFS_FAULT_OFF });
}

void tfs_fault_points_reset(void)
{
	struct tfs_fault_point *p;

	pthread_mutex_lock(&fault_lock);
	for_each_fault_point (p, i) {
		disarm_locked(p);
		p->hits = p->hits_since_arm = p->fired = p->fired_ever = 0;
	}
	update_active();
	pthread_mutex_unlock(&fault_lock);
}

void tfs_fault_points_count(bool on)
{
	pthread_mutex_lock(&fault_lock);
	counting = on;
	update_active();
	pthread_mutex_unlock(&fault_lock);
}

static s64 sum_by_name(const char *name, bool fired)
{
	struct tfs_fault_point *p;
	s64 sum = -1;

	pthread_mutex_lock(&fault_lock);
	for_each_fault_point (p, i)
		if (!strcmp(p->name, name))
			sum = (sum < 0 ? 0 : sum) + (s64)(fired ? p->fired : p->hits);
	pthread_mutex_unlock(&fault_lock);
	return sum;
}

s64 tfs_fault_point_fired(const char *name)
{
	return sum_by_name(name, true);
}

s64 tfs_fault_point_hits(const char *name)
{
	return sum_by_name(name, false);
}

unsigned tfs_fault_points_nr(void)
{
	if (!__start_tfs_fault_points)
		return 0;
	return (unsigned)(__stop_tfs_fault_points - __start_tfs_fault_points);
}

const struct tfs_fault_point *tfs_fault_point_nth(unsigned i)
{
	return i < tfs_fault_points_nr() ? __start_tfs_fault_points[i] : NULL;
}

void tfs_fault_points_to_text(struct printbuf *out)
{
	struct tfs_fault_point *p;

	printbuf_tabstops_reset(out);
	printbuf_tabstop_push(out, 24);
	printbuf_tabstop_push(out, 24);
	printbuf_tabstop_push(out, 12);
	printbuf_tabstop_push(out, 12);
	prt_str(out, "point\tarmed\thits\rfired\r  site\n");

	pthread_mutex_lock(&fault_lock);
	for_each_fault_point (p, i) {
		prt_printf(out, "%s\t", p->name);
		arm_to_text(out, &p->arm);
		prt_printf(out, "\t%llu\r%llu\r  %s:%u\n", (unsigned long long)p->hits,
			   (unsigned long long)p->fired, p->file, p->line);
	}
	pthread_mutex_unlock(&fault_lock);
}

unsigned tfs_fault_points_never(struct printbuf *out, bool by_hits)
{
	struct tfs_fault_point *p;
	unsigned nr = 0;

	pthread_mutex_lock(&fault_lock);
	for_each_fault_point (p, i) {
		struct tfs_fault_point *q;
		bool seen = false, first = true;

		/* A name counts as reached if any of its sites was. */
		for_each_fault_point (q, j) {
			if (strcmp(q->name, p->name))
				continue;
			if (j < i)
				first = false;
			/* fired_ever: re-arming zeroes fired, not whether it ever fired. */
			seen |= by_hits ? q->hits != 0 : q->fired_ever != 0;
		}
		if (!first || seen)
			continue;
		prt_printf(out, "%s\n", p->name);
		nr++;
	}
	pthread_mutex_unlock(&fault_lock);
	return nr;
}

/* ---- specs ---- */

#define MAX_KINDS 8
static struct {
	const char *kind;
	tfs_fault_entry_parser parse;
} kinds[MAX_KINDS];
static unsigned nr_kinds;

int tfs_fault_register_kind(const char *kind, tfs_fault_entry_parser parse)
{
	int ret = 0;

	pthread_mutex_lock(&fault_lock);
	for (unsigned i = 0; i < nr_kinds; i++)
		if (!strcmp(kinds[i].kind, kind)) {
			kinds[i].parse = parse;
			goto out;
		}
	if (nr_kinds == MAX_KINDS) {
		ret = -ENOSPC;
		goto out;
	}
	kinds[nr_kinds].kind = kind;
	kinds[nr_kinds].parse = parse;
	nr_kinds++;
out:
	pthread_mutex_unlock(&fault_lock);
	return ret;
}

static bool point_exists(const char *name)
{
	struct tfs_fault_point *p;

	for_each_fault_point (p, i)
		if (!strcmp(p->name, name))
			return true;
	return false;
}

static int parse_u64(const char *s, u64 *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || !*s || *end || *s == '-' ? -EINVAL : 0;
}

/* "point NAME [mode] [seed=S] [times=T]" */
static int parse_point_entry(char **w, unsigned nr, bool apply, struct printbuf *err)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT };

	if (!nr) {
		prt_str(err, "'point' needs a fault point name");
		return -TFS_ERR_fault_spec_invalid;
	}
	if (!point_exists(w[0])) {
		prt_printf(err, "no fault point named '%s'", w[0]);
		return -TFS_ERR_fault_point_unknown;
	}

	bool have_mode = false;

	for (unsigned i = 1; i < nr; i++) {
		char *val = strchr(w[i], '=');
		u64 v = 0;

		if (val)
			*val++ = '\0';
		bool mode_word = !strcmp(w[i], "oneshot") || !strcmp(w[i], "always") ||
				 !strcmp(w[i], "nth") || !strcmp(w[i], "every") ||
				 !strcmp(w[i], "prob");

		/* "always nth=N" (either order): every hit from the Nth on. */
		bool always_nth =
			have_mode &&
			((!strcmp(w[i], "nth") && arm.mode == TFS_FAULT_ALWAYS && !arm.nth) ||
			 (!strcmp(w[i], "always") && arm.mode == TFS_FAULT_ONESHOT && arm.nth));

		if (mode_word && have_mode && !always_nth) {
			prt_printf(err, "fault point %s: more than one mode ('%s' after another)",
				   w[0], w[i]);
			return -TFS_ERR_fault_spec_invalid;
		}
		have_mode |= mode_word;
		if (val && !*val) {
			prt_printf(err, "fault point %s: '%s=' needs a value", w[0], w[i]);
			return -TFS_ERR_fault_spec_invalid;
		}
		if (!strcmp(w[i], "oneshot") && !val) {
			arm.mode = TFS_FAULT_ONESHOT;
		} else if (!strcmp(w[i], "always") && !val) {
			arm.mode = TFS_FAULT_ALWAYS;
		} else if (!strcmp(w[i], "nth") && val && !parse_u64(val, &v) && v) {
			if (!always_nth)
				arm.mode = TFS_FAULT_ONESHOT;
			arm.nth = v;
		} else if (!strcmp(w[i], "every") && val && !parse_u64(val, &v) && v) {
			arm.mode = TFS_FAULT_EVERY_NTH;
			arm.nth = v;
		} else if (!strcmp(w[i], "prob") && val) {
			char *end;
			double pr = strtod(val, &end);

			if (*end || !(pr >= 0 && pr <= 1)) {
				prt_printf(err,
					   "fault point %s: prob=%s is not a number from 0 to 1",
					   w[0], val);
				return -TFS_ERR_fault_spec_invalid;
			}
			arm.mode = TFS_FAULT_PROBABILITY;
			arm.ppm = (u32)(pr * 1000000 + 0.5);
		} else if (!strcmp(w[i], "seed") && val && !parse_u64(val, &v)) {
			arm.seed = v;
		} else if (!strcmp(w[i], "times") && val && !parse_u64(val, &v)) {
			arm.times = v;
		} else {
			prt_printf(
				err,
				"fault point %s: bad word '%s%s%s' (want oneshot, always, nth=N, always nth=N, every=N, prob=P, seed=S, times=T)",
				w[0], w[i], val ? "=" : "", val ?: "");
			return -TFS_ERR_fault_spec_invalid;
		}
	}
	return apply ? tfs_fault_point_arm(w[0], &arm) : 0;
}

#define MAX_WORDS 32

/* Splits one entry into words, in place; returns the word count or -1. */
static int split_words(char *entry, char **w)
{
	int nr = 0;
	char *save = NULL;

	for (char *t = strtok_r(entry, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
		if (nr == MAX_WORDS)
			return -1;
		w[nr++] = t;
	}
	return nr;
}

static int parse_entry(const char *entry, bool apply, struct printbuf *err)
{
	char *copy = strdup(entry);
	char *w[MAX_WORDS];
	int ret, nr;

	if (!copy)
		return -ENOMEM;
	nr = split_words(copy, w);
	if (nr < 0) {
		prt_printf(err, "fault entry '%s' has more than %u words", entry, MAX_WORDS);
		ret = -TFS_ERR_fault_spec_invalid;
		goto out;
	}
	if (!nr) {
		ret = 0;
		goto out;
	}
	if (!strcmp(w[0], "point")) {
		ret = parse_point_entry(w + 1, nr - 1, apply, err);
		goto out;
	}
	tfs_fault_entry_parser parse = NULL;

	pthread_mutex_lock(&fault_lock);
	for (unsigned i = 0; i < nr_kinds; i++)
		if (!strcmp(kinds[i].kind, w[0]))
			parse = kinds[i].parse;
	pthread_mutex_unlock(&fault_lock);
	if (parse) {
		ret = parse(w + 1, nr - 1, apply, err);
		goto out;
	}
	prt_printf(err, "unknown fault entry kind '%s' (want point", w[0]);
	for (unsigned i = 0; i < nr_kinds; i++)
		prt_printf(err, ", %s", kinds[i].kind);
	prt_char(err, ')');
	ret = -TFS_ERR_fault_spec_invalid;
out:
	free(copy);
	return ret;
}

static int for_each_entry(const char *spec, bool apply, struct printbuf *err)
{
	char *copy = strdup(spec), *save = NULL;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *e = strtok_r(copy, ";", &save); e && !ret; e = strtok_r(NULL, ";", &save))
		ret = parse_entry(e, apply, err);
	free(copy);
	return ret;
}

int tfs_faults_parse(const char *spec, struct printbuf *err)
{
	/* Check everything first so a bad spec arms nothing. */
	return for_each_entry(spec, false, err) ?: for_each_entry(spec, true, err);
}

static bool env_applied;
/* What applying TFS_FAULTS returned: every later _once() call returns it too. */
static int env_err;

int tfs_faults_from_env(void)
{
	const char *spec = getenv("TFS_FAULTS");
	struct printbuf err = PRINTBUF;
	int ret;

	__atomic_store_n(&env_applied, true, __ATOMIC_RELEASE);
	if (!spec || !*spec)
		return 0;
	ret = tfs_faults_parse(spec, &err);
	if (ret)
		fprintf(stderr, "tinyfs: bad TFS_FAULTS: %s\n", printbuf_str(&err));
	printbuf_exit(&err);
	__atomic_store_n(&env_err, ret, __ATOMIC_RELEASE);
	return ret;
}

int tfs_faults_from_env_once(void)
{
	static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
	int ret = 0;

	pthread_mutex_lock(&once_lock);
	if (!__atomic_load_n(&env_applied, __ATOMIC_ACQUIRE))
		ret = tfs_faults_from_env();
	else
		ret = __atomic_load_n(&env_err, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&once_lock);
	return ret;
}

int tfs_faults_from_opt(const char *prog, const char *spec)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_faults_parse(spec, &err);

	if (ret)
		fprintf(stderr, "%s: --fault: %s\n", prog, printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}
