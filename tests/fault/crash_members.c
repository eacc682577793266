// SPDX-License-Identifier: GPL-2.0
/*
 * Several members cut at one instant (FAULTS.md check 6): replicas 1 and 2
 * over 1 to 3 members.  A workload is recorded once with every member
 * tracing; the traces' stamps order every op over every member (an op
 * submitted after another completed has a larger stamp), so "every op with
 * a stamp below T, on every member" is what a power cut at one instant
 * leaves.  Cuts at every write and flush index of any member (the bounded
 * form: every k-th) and at random moments (a random stamp: between any two
 * ops, reads and marks included), each member's cache keeping what its own
 * seeded policy keeps (mixed: one member may keep all, another none, a
 * third tear its last write).  The check is crash_harness.h's: what was
 * acknowledged replays, the metadata is a prefix of history, fsck is clean,
 * open twice, life goes on.
 */
#include "crash_harness.h"

static const char *const member_workload[] = {
	"create_c",	  "write_c",   "fsync_c", "append_a",	  "fdatasync_a", "link_a_d_l",
	"exchange_a_d_b", "fsync_d_b", "mkdir_f", "rename_d_b_h", "setxattr_a",	 "syncfs",
	"truncdown_a",	  "punch_a",   "fsync_a", "unlink_a",	  "rmdir_e",	 "fsyncdir_d",
};

static int op_by_name(const char *name)
{
	for (unsigned i = 0; i < CM_NR_OPS; i++)
		if (!strcmp(cm_ops[i].name, name))
			return (int)i;
	return -1;
}

static u64 total_lost, total_findings;

static void one_config(unsigned nr, unsigned replicas)
{
	static struct ch h;
	unsigned ops[ARRAY_SIZE(member_workload)], n = 0;
	char class[32];
	u64 *cuts, failed = 0, max_stamp = 0;
	/* Bounded: every 4th cut (ASan: 24th, TSan: 40th), a dozen random moments (2, 1). */
	unsigned nr_cuts, stride = ch_long() ? 1 : ch_tsan() ? 40 : ch_sanitized() ? 24 : 4;
	unsigned moments = ch_long() ? 60 : ch_tsan() ? 1 : ch_sanitized() ? 2 : 12;

	for (unsigned i = 0; i < ARRAY_SIZE(member_workload); i++) {
		int o = op_by_name(member_workload[i]);

		assert_true(o >= 0);
		ops[n++] = (unsigned)o;
	}
	ch_init(&h, nr, replicas, replicas);
	snprintf(class, sizeof(class), "members%u_replicas%u", nr, replicas);
	struct ch_class *cl = ch_class(&h, class);

	ch_record(&h, ops, n);
	nr_cuts = ch_cut_points(&h, &cuts);
	for (unsigned m = 0; m < nr; m++)
		for (unsigned i = 0; i < h.tr[m].nr; i++)
			max_stamp = max_t(u64, max_stamp, h.tr[m].e[i].stamp);
	/* At write and flush indexes (of any member), every member at once, mixed policies. */
	for (unsigned c = 0; c < nr_cuts; c++) {
		if (c % stride && c != nr_cuts - 1)
			continue;
		failed += !ch_check_cut(&h, cl, class, cuts[c], CH_POLICIES,
					ch_mix(nr * 100 + replicas * 10 + c));
	}
	/* At random moments. */
	for (unsigned i = 0; i < moments; i++) {
		u64 x = ch_mix(nr * 1000 + replicas * 100 + i + 77);

		failed += !ch_check_cut(&h, cl, class, 1 + x % max_stamp, CH_POLICIES, x);
	}
	/* The same cuts with one policy on every member. */
	for (unsigned p = 0; p < CH_POLICIES; p++)
		for (unsigned c = p; c < nr_cuts; c += stride * 2)
			failed += !ch_check_cut(&h, cl, class, cuts[c], p,
						ch_mix(nr * 100 + replicas * 10 + c + p * 7));
	free(cuts);
	fprintf(stderr, "%u members, replicas %u: %u cut points, %llu failed\n", nr, replicas,
		nr_cuts, (unsigned long long)failed);
	for (unsigned p = 0; p < CH_POLICIES; p++)
		printf("figure crash workload=%s policy=%s states=%llu images=%llu failed=%llu\n",
		       class, tfs_powercut_policy_names[p], (unsigned long long)cl->states[p],
		       (unsigned long long)cl->images[p], (unsigned long long)cl->failed[p]);
	total_lost += h.bytes_lost;
	total_findings += h.fsck_findings;
	ch_exit(&h);
	assert_int_equal(failed, 0);
}

static void test_1_member(void **state)
{
	one_config(1, 1);
}

static void test_2_members_replicas_1(void **state)
{
	one_config(2, 1);
}

static void test_2_members_replicas_2(void **state)
{
	one_config(2, 2);
}

static void test_3_members_replicas_1(void **state)
{
	one_config(3, 1);
}

static void test_3_members_replicas_2(void **state)
{
	one_config(3, 2);
}

static int teardown(void **state)
{
	printf("figure crash_fsynced_bytes_lost bytes=%llu\n", (unsigned long long)total_lost);
	printf("figure crash_fsck_findings findings=%llu\n", (unsigned long long)total_findings);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_1_member),
		cmocka_unit_test(test_2_members_replicas_1),
		cmocka_unit_test(test_2_members_replicas_2),
		cmocka_unit_test(test_3_members_replicas_1),
		cmocka_unit_test(test_3_members_replicas_2),
	};

	/* TFS_TEST_FILTER=NAME runs only the tests matching it. */
	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, teardown);
}
