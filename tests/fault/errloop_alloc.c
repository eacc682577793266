// SPDX-License-Identifier: GPL-2.0
/*
 * The allocation-failure loop (FAULTS.md, issue 13 item 3): the same
 * operations and checks as errloop_io.c (errloop.h), but the failure is a
 * fault point's: for each operation and each point the operation hits, the
 * Nth hit fails for N = 1, 2, ... until the operation completes without
 * the point firing; once transient (only the Nth), once persistent (the Nth
 * and every later hit, "always nth=N").  Prints
 * "figure errloop_alloc op=OP kind=K iterations=N failed=F" and, at the end,
 * "figure fault_points registered=R fired=F never=N excluded=X".
 *
 * Every registered point must have fired in these loops
 * (tfs_fault_points_never()), except the ones listed in never_excluded[]
 * with the reason no operation here can reach them.
 */
#include "errloop.h"

/* Points these operations cannot reach, and why. */
static const struct {
	const char *name, *why;
} never_excluded[] = {
	{ "ckpt:split_flush_pieces",
	  "no failure, a test hook: flushes each piece of a split write-back, which only "
	  "ckpt:alloc_keys_too_big (armed alone here) or a huge write-back makes" },
	{ "fsck:after_lost_leaves",
	  "no failure, a test hook: fsck -y stops once its replaced leaves are written "
	  "(test_fsck's interrupted alloc rebuild); these operations run no fsck" },
	{ "fsck:node_space_race",
	  "no failure, a test hook: a write-back between fsck -y's compare and its repairs "
	  "(test_alloc_keys); these operations run no fsck" },
	{ NULL, NULL },
};

static bool excluded(const char *name)
{
	for (unsigned i = 0; never_excluded[i].name; i++)
		if (!strcmp(never_excluded[i].name, name))
			return true;
	return false;
}

/* The distinct point names, in registry order. */
static unsigned point_names(const char **names, unsigned max)
{
	unsigned nr = 0;

	for (unsigned i = 0; i < tfs_fault_points_nr(); i++) {
		const char *name = tfs_fault_point_nth(i)->name;
		bool seen = false;

		for (unsigned k = 0; k < nr; k++)
			seen |= !strcmp(names[k], name);
		if (!seen && nr < max)
			names[nr++] = name;
	}
	return nr;
}

static const char *names[256];
static unsigned nr_names;
static s64 hits[256];

/* Hits of each point while the operation runs (the probe iteration). */
static void count_window(struct el *e, bool end)
{
	for (unsigned i = 0; i < nr_names; i++) {
		s64 h = tfs_fault_point_hits(names[i]);

		hits[i] = end ? h - hits[i] : h;
	}
}

int main(void)
{
	struct el e;
	unsigned total_failed = 0, nr_never, nr_excluded = 0, fired;
	struct printbuf never = PRINTBUF;

	setvbuf(stdout, NULL, _IOLBF, 0);
	el_init(&e, NULL);
	tfs_fault_points_reset();
	nr_names = point_names(names, 256);
	for (unsigned op = 0; op < EL_OP_NR; op++) {
		unsigned iterations[2] = { 0 }, failed[2] = { 0 };
		struct el_fault probe = { .point = names[0], .n = UINT64_MAX };

		/* Which points does the operation hit? */
		tfs_fault_points_count(true);
		e.window = count_window;
		el_iteration(&e, op, &probe);
		e.window = NULL;
		tfs_fault_points_count(false);
		failed[0] += e.failed;
		for (unsigned i = 0; i < nr_names; i++)
			if (hits[i])
				printf("errloop_alloc op=%s point=%s hits=%lld\n", el_op_names[op],
				       names[i], (long long)hits[i]);

		for (unsigned i = 0; i < nr_names; i++) {
			if (!hits[i])
				continue;
			for (int persistent = 0; persistent < 2; persistent++) {
				struct el_fault f = { .point = names[i], .persistent = persistent };

				for (f.n = 1;; f.n++) {
					bool reached = el_iteration(&e, op, &f);

					iterations[persistent]++;
					failed[persistent] += e.failed;
					if (!reached)
						break;
					if (f.n > 100000) {
						fprintf(stderr, "errloop: %s never completes\n",
							e.what);
						failed[persistent]++;
						break;
					}
				}
			}
		}
		for (int persistent = 0; persistent < 2; persistent++) {
			printf("figure errloop_alloc op=%s kind=%s iterations=%u failed=%u\n",
			       el_op_names[op], persistent ? "persistent" : "transient",
			       iterations[persistent], failed[persistent]);
			total_failed += failed[persistent];
		}
	}

	nr_never = tfs_fault_points_never(&never, false);
	{
		char *s = never.buf ? never.buf : "", *line;

		while ((line = strsep(&s, "\n")) && *line) {
			if (excluded(line)) {
				nr_excluded++;
				continue;
			}
			fprintf(stderr, "errloop: fault point %s never fired\n", line);
			total_failed++;
		}
	}
	fired = nr_names - nr_never;
	printf("figure fault_points registered=%u fired=%u never=%u excluded=%u\n", nr_names, fired,
	       nr_never - nr_excluded, nr_excluded);
	for (unsigned i = 0; never_excluded[i].name; i++)
		printf("fault point %s excluded: %s\n", never_excluded[i].name,
		       never_excluded[i].why);
	printbuf_exit(&never);
	el_exit(&e);
	return total_failed ? 1 : 0;
}
