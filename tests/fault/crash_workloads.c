// SPDX-License-Identifier: GPL-2.0
/*
 * Crash consistency over enumerated workloads (FAULTS.md check 1, issue 13
 * item 2): every workload of length 1 and 2 over the operation set of
 * crash_model.h (from the fixed setup tree), a seeded sample of length 3
 * and seeded random longer runs; each recorded once, then every write and
 * flush index under every cut policy checked (crash_harness.h).
 *
 * Bounded forms (meson test), scaled so the fault suite stays near two
 * minutes per build:
 *  - plain: every length-1 workload, every cut, every policy; a
 *    deterministic sample of length 2 (1 pair in 30, every first op once,
 *    every cut, every policy); 2 of length 3; one random run (every 3rd
 *    cut);
 *  - ASan/TSan (3-10x slower): every length-1 workload, every 3rd cut
 *    (TSan: 5th), the policies in turn per cut (each policy on a quarter
 *    of them); 1 pair in 200 (TSan: 300) of length 2 (every cut, policies
 *    in turn); one of length 3; one random run (every 8th cut).
 * TFS_LONG=1: every length-2 workload, 200 of length 3, 40 random runs,
 * everything under every policy.  TFS_CRASH_SCALE=N multiplies the samples.
 * TFS_CRASH_ONLY=NAME (a workload name, "op+op") runs that one workload.
 *
 * Regressions: workloads that found bugs run in every form, by name.
 */
#include "crash_harness.h"

static struct ch H;
CH_GROUP_FIXTURES(H)

static unsigned scale(void)
{
	const char *s = getenv("TFS_CRASH_SCALE");

	return s && atoi(s) > 0 ? (unsigned)atoi(s) : 1;
}

/* The bounded forms check a policy per cut, in turn, under a sanitizer. */
static void set_policies(void)
{
	H.rotate_policies = ch_sanitized() && !ch_long();
}

/*
 * Known failures: workloads the harness shows failing whose fix did not
 * fit (each described in docs/design-notes.md).  The test requires them
 * to still fail: a fixed one must move to the regressions.
 */
static const char *const known_failures[] = {
	NULL,
};

static bool known_failure(const unsigned *ops, unsigned nr)
{
	char name[512];

	ch_name(name, sizeof(name), ops, nr);
	for (unsigned i = 0; known_failures[i]; i++)
		if (!strcmp(known_failures[i], name))
			return true;
	return false;
}

static u64 known_seen, known_failed;

/* One workload; a known failure counts apart (and must still fail). */
static u64 workload(const char *class, const unsigned *ops, unsigned nr, u64 seed)
{
	if (known_failure(ops, nr)) {
		u64 f;

		H.quiet_failures = true;
		f = ch_workload(&H, "known", ops, nr, seed);
		H.quiet_failures = false;
		known_seen++;
		known_failed += f != 0;
		return 0;
	}
	return ch_workload(&H, class, ops, nr, seed);
}

static bool only(void)
{
	return getenv("TFS_CRASH_ONLY") != NULL;
}

static void test_only(void **state)
{
	unsigned ops[CM_MAXOPS], nr;

	if (!only())
		skip();
	nr = ch_parse_workload(getenv("TFS_CRASH_ONLY"), ops, CM_MAXOPS);
	if (!nr)
		fail_msg("TFS_CRASH_ONLY: unknown operation in %s", getenv("TFS_CRASH_ONLY"));
	H.rotate_policies = false;
	assert_int_equal(ch_workload(&H, "only", ops, nr, 1), 0);
}

static void test_length1(void **state)
{
	u64 failed = 0;

	if (only())
		skip();
	set_policies();
	/* Sanitizers: every 3rd cut (TSan 5th; the no-cut image always), policies in turn. */
	H.cut_stride = ch_long() ? 1 : ch_tsan() ? 5 : ch_sanitized() ? 3 : 1;
	for (unsigned i = 0; i < CM_NR_OPS; i++)
		failed += workload("len1", &i, 1, i);
	H.cut_stride = 1;
	assert_int_equal(failed, 0);
	/* The cuts land before and after the operations, not only at one end. */
	struct ch_class *cl = ch_class(&H, "len1");

	fprintf(stderr, "length 1: %llu cuts showed the last state, %llu an older one\n",
		(unsigned long long)cl->newest, (unsigned long long)cl->older);
	assert_true(cl->newest > 0 && cl->older > 0);
}

static void test_length2(void **state)
{
	/* Of N*N pairs: all (long), 1 in 30 (plain), 1 in 200 (ASan), 300 (TSan), times the scale. */
	unsigned every = ch_long() ? 1 : ch_tsan() ? 300 : ch_sanitized() ? 200 : 30;
	u64 failed = 0, n = 0;

	if (only())
		skip();
	set_policies();
	every = max_t(unsigned, 1, every / scale());
	for (unsigned i = 0; i < CM_NR_OPS; i++)
		for (unsigned j = 0; j < CM_NR_OPS; j++) {
			unsigned ops[2] = { i, j };

			/* A deterministic sample that covers every first and every second op. */
			if ((i * 7 + j) % every)
				continue;
			failed += workload("len2", ops, 2, i * CM_NR_OPS + j);
			n++;
		}
	fprintf(stderr, "length 2: %llu workloads\n", (unsigned long long)n);
	assert_int_equal(failed, 0);
}

static void seeded_ops(u64 seed, unsigned *ops, unsigned nr)
{
	u64 x = seed;

	for (unsigned i = 0; i < nr; i++)
		ops[i] = (unsigned)((x = ch_mix(x)) % CM_NR_OPS);
}

static void test_length3(void **state)
{
	unsigned nr = (ch_long() ? 200 : ch_sanitized() ? 1 : 2) * scale();
	u64 failed = 0;

	if (only())
		skip();
	set_policies();
	for (unsigned s = 1; s <= nr; s++) {
		unsigned ops[3];

		seeded_ops(s * 1000003, ops, 3);
		failed += workload("len3", ops, 3, s);
	}
	assert_int_equal(failed, 0);
}

static void test_random(void **state)
{
	unsigned nr = (ch_long() ? 40 : 1) * scale();
	u64 failed = 0;

	if (only())
		skip();
	set_policies();
	/* Longer runs: fewer cuts each in the bounded forms. */
	H.cut_stride = ch_long() ? 1 : ch_sanitized() ? 8 : 3;
	for (unsigned s = 1; s <= nr; s++) {
		unsigned ops[16];
		u64 x = ch_mix(s * 7919);

		seeded_ops(x, ops, 8 + x % 9);
		failed += workload("random", ops, 8 + x % 9, s);
	}
	H.cut_stride = 1;
	assert_int_equal(failed, 0);
}

/*
 * Runs the named workloads of list (NULL-terminated; every name must parse)
 * under every policy; the failures, a known failure counting apart.
 */
static u64 run_named(const char *class, const char *const *list)
{
	u64 failed = 0;

	H.rotate_policies = false;
	for (unsigned i = 0; list[i]; i++) {
		unsigned ops[CM_MAXOPS], nr = ch_parse_workload(list[i], ops, CM_MAXOPS);

		assert_true(nr > 0);
		failed += workload(class, ops, nr, i);
	}
	return failed;
}

/* Workloads that found bugs (each with what it found): every form runs them. */
static const char *const regressions[] = {
	NULL,
};

static void test_regressions(void **state)
{
	if (only())
		skip();
	assert_int_equal(run_named("regress", regressions), 0);
}

/*
 * A second power cut during recovery (littlefs's rerun on the same disk):
 * a crash image is opened for real (replay onto the disk) and stopped,
 * recorded once; then every cut of that recovery (policies in turn) leaves
 * an image that still shows the same state, fsck-clean, and recovers.
 */
static const char *const recovery_workloads[] = {
	"append_a+fsync_a+rename_a_over_d_b",
	"create_c+write_c+fsync_c+unlink_a",
	"truncdown_a+link_a_d_l+syncfs+exchange_a_d_b",
};

static u64 recovery_cut(const char *wname, u64 expect, u64 cut, unsigned policy, u64 seed)
{
	struct ch_class *cl = ch_class(&H, "recovery");
	char where[96];
	u64 mask;
	bool ok;

	snprintf(where, sizeof(where), "recovery cut at stamp %llu, policy %s",
		 (unsigned long long)cut, tfs_powercut_policy_names[policy]);
	ch_build_all(&H, cut, policy, seed, true);
	cl->states[policy]++;
	cl->images[policy]++;
	/* Any state the first image showed (it showed exactly those). */
	mask = ch_check_image(&H, wname, 0, H.run.nr_states - 1, where);
	ok = !(mask & CH_BAD) && (mask & ~CH_BAD) == expect;
	if (!ok)
		fprintf(stderr, "%s %s: states %#llx, the first crash image showed %#llx\n", wname,
			where, (unsigned long long)mask, (unsigned long long)expect);
	cl->failed[policy] += !ok;
	return !ok;
}

static void test_recovery_cut(void **state)
{
	unsigned stride = ch_long() ? 1 : ch_tsan() ? 8 : ch_sanitized() ? 4 : 1;
	char tmpl_path[sizeof(H.tmpl[0])], xpath[sizeof(H.tmpl[0])];
	u64 failed = 0;

	if (only())
		skip();
	snprintf(xpath, sizeof(xpath), "%s/first", H.t.dir);
	memcpy(tmpl_path, H.tmpl[0], sizeof(tmpl_path));
	for (unsigned w = 0; w < ARRAY_SIZE(recovery_workloads); w++) {
		unsigned ops[CM_MAXOPS],
			nr = ch_parse_workload(recovery_workloads[w], ops, CM_MAXOPS);
		u64 *cuts, *rcuts;
		unsigned nr_cuts;

		assert_true(nr > 0);
		ch_record(&H, ops, nr);
		nr_cuts = ch_cut_points(&H, &cuts);
		/* First cuts through the workload, policies in turn (sanitizers: one). */
		for (unsigned k = 1; k <= (ch_sanitized() && !ch_long() ? 1u : 3u); k++) {
			unsigned policy = (w + k) % CH_POLICIES, nr_rcuts;
			struct ch_trace saved = H.tr[0];
			u8 *saved_data = H.tmpl_data[0];
			bool *saved_used = H.tmpl_used[0];
			u64 expect;

			ch_build_all(&H, cuts[k * nr_cuts / 4], policy, ch_mix(w * 10 + k), true);
			pt_copy_file(H.t.path[0], xpath);
			/* The first recovery: what the image shows, then its replay recorded. */
			H.t.opts.read_only = true;
			assert_int_equal(pt_open(&H.t), 0);
			expect = ch_states_mask(&H);
			assert_int_equal(pt_stop(&H.t), 0);
			H.t.opts.read_only = false;
			assert_true(expect != 0);
			snprintf(H.t.rule[0], sizeof(H.t.rule[0]), "tracefile=%s", H.trace_path[0]);
			H.t.trace = true;
			assert_int_equal(pt_open(&H.t), 0);
			assert_int_equal(pt_stop(&H.t), 0);
			H.t.trace = false;
			H.t.rule[0][0] = 0;
			tfs_faultdev_registry_reset();
			/* Its cuts, on the first crash image as the template. */
			H.tr[0] = (struct ch_trace){ 0 };
			assert_int_equal(
				tfs_fault_trace_load(H.trace_path[0], &H.tr[0].e, &H.tr[0].nr), 0);
			memcpy(H.tmpl[0], xpath, sizeof(xpath));
			ch_template_load(&H, 0);
			nr_rcuts = ch_cut_points(&H, &rcuts);
			for (unsigned c = 0; c < nr_rcuts; c++)
				if (!(c % stride) || c == nr_rcuts - 1)
					failed += recovery_cut(recovery_workloads[w], expect,
							       rcuts[c], (c + k) % CH_POLICIES,
							       ch_mix(w * 1000 + k * 100 + c));
			free(rcuts);
			tfs_fault_trace_free(H.tr[0].e, H.tr[0].nr);
			free(H.tmpl_data[0]);
			free(H.tmpl_used[0]);
			H.tr[0] = saved;
			H.tmpl_data[0] = saved_data;
			H.tmpl_used[0] = saved_used;
			memcpy(H.tmpl[0], tmpl_path, sizeof(tmpl_path));
		}
		free(cuts);
	}
	unlink(xpath);
	assert_int_equal(failed, 0);
}

static void test_known_failures(void **state)
{
	if (only())
		skip();
	run_named("known", known_failures);
	fprintf(stderr, "known failures: %llu workloads, %llu still fail\n",
		(unsigned long long)known_seen, (unsigned long long)known_failed);
	/* Every one that ran still fails; one that passes is fixed: move it to regressions. */
	assert_int_equal(known_failed, known_seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only),	     cmocka_unit_test(test_regressions),
		cmocka_unit_test(test_length1),	     cmocka_unit_test(test_length2),
		cmocka_unit_test(test_length3),	     cmocka_unit_test(test_random),
		cmocka_unit_test(test_recovery_cut), cmocka_unit_test(test_known_failures),
	};

	/* TFS_TEST_FILTER=NAME runs only the tests matching it. */
	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, ch_group_setup, ch_group_teardown);
}
