// SPDX-License-Identifier: GPL-2.0
/*
 * The registry of "dev" spec entries and vanished paths (see
 * lib/fault_registry.h), which tfs_bdev_open() consults for every device.
 */
#include "lib/fault_registry.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/faultdev_int.h"
#include "lib/printbuf.h"

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
		return !tfs_fault_parse_num(r->dev + 1, &n) && n == index;
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
	if (w[0][0] == '#' && tfs_fault_parse_num(w[0] + 1, &v)) {
		prt_printf(err, "dev %s: want #N, a number after '#'", w[0]);
		return -TFS_ERR_fault_spec_invalid;
	}
	for (unsigned i = 1; i < nr; i++) {
		if (!strncmp(w[i], "seed=", 5)) {
			if (tfs_fault_parse_num(w[i] + 5, &e.seed))
				goto bad;
			e.seed_set = true;
		} else if (!strncmp(w[i], "sector=", 7)) {
			if (tfs_fault_parse_num(w[i] + 7, &v) || (v != 512 && v != 4096))
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
	if (!faultdev_grow((void **)&reg, &reg_size, nr_reg, sizeof(*reg))) {
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
	if (faultdev_grow((void **)&vanished, &vanished_size, nr_vanished, sizeof(*vanished))) {
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
