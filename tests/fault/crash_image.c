// SPDX-License-Identifier: GPL-2.0
/*
 * crash_image: crash images from a trace saved by another process (a FUSE
 * daemon run with TFS_FAULTS='dev IMG tracefile=TRACE'), as
 * crash_harness.h builds them (the fault device's power-cut semantics).
 *
 *	crash_image cuts TRACE
 *		prints the cut points: the stamp of every write, discard and
 *		flush, one per line, in order
 *	crash_image build TRACE TEMPLATE OUT STAMP none|prefix|random|torn SEED
 *		writes OUT: TEMPLATE (the image before the traced run) plus what
 *		a power cut at STAMP under the policy leaves
 *
 * Used by test_fuse_crash_sample.sh.
 */
#include "crash_harness.h"

static int usage(void)
{
	fprintf(stderr, "usage: crash_image cuts TRACE\n"
			"       crash_image build TRACE TEMPLATE OUT STAMP POLICY SEED\n");
	return 8;
}

int main(int argc, char **argv)
{
	static struct ch h;
	int ret;

	if (argc < 3)
		return usage();
	ret = tfs_fault_trace_load(argv[2], &h.tr[0].e, &h.tr[0].nr);
	if (ret)
		return 1;
	h.t.nr = 1;
	if (!strcmp(argv[1], "cuts") && argc == 3) {
		for (unsigned i = 0; i < h.tr[0].nr; i++)
			if (ch_is_cut_point(&h.tr[0].e[i]))
				printf("%llu\n", (unsigned long long)h.tr[0].e[i].stamp);
	} else if (!strcmp(argv[1], "build") && argc == 8) {
		unsigned policy = TFS_POWERCUT_NR;
		u64 rng = strtoull(argv[7], NULL, 0);

		for (unsigned p = 0; p < TFS_POWERCUT_NR; p++)
			if (!strcmp(argv[6], tfs_powercut_policy_names[p]))
				policy = p;
		if (policy == TFS_POWERCUT_NR)
			return usage();
		snprintf(h.tmpl[0], sizeof(h.tmpl[0]), "%s", argv[3]);
		snprintf(h.t.path[0], sizeof(h.t.path[0]), "%s", argv[4]);
		ch_template_load(&h, 0);
		ch_build(&h, 0, strtoull(argv[5], NULL, 0), policy, &rng, true);
		free(h.tmpl_data[0]);
		free(h.tmpl_used[0]);
	} else {
		return usage();
	}
	tfs_fault_trace_free(h.tr[0].e, h.tr[0].nr);
	return 0;
}
