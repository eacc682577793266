// SPDX-License-Identifier: GPL-2.0
/*
 * Post-flush entries against power cuts (journal_io.c, "post-flush"; the
 * design is in docs/design-notes.md, "One flush per fsync").  An fsync's
 * flush entry is written with no flush before it and made durable by one
 * flush after it, so a power cut during that flush may keep the journal
 * write and lose the file data it commits.  Replay must then notice (the
 * data fails its checksums, tfs_journal_read_verify_tail()) and end at the
 * flush entry before it: that fsync was never acknowledged.
 *
 * Workloads of append+fsync and overwrite+fsync, recorded once; a power
 * cut at every write and flush, under every policy, each time also losing
 * every unflushed data write while the journal writes the policy keeps
 * survive (crash_harness.h, drop_tags).  After replay every acknowledged
 * fsync's data is there, nothing reads garbage (a checksum error fails the
 * model's comparison), fsck is clean.  Then the same cuts with the replay
 * check disabled (the fault point replay:skip_data_check) must fail: the
 * test shows it guards something.
 */
#include "crash_harness.h"

static struct ch H;
CH_GROUP_FIXTURES(H)

static const char *const workloads[] = {
	"append_a+fsync_a+append_a+fsync_a+append_a+fdatasync_a",
	"overwrite_a+fsync_a+overwrite_d_b+fsync_d_b+overwrite_a+fdatasync_a",
	"create_c+write_c+fsync_c+append_a+fdatasync_a+overwrite_a+fsync_a",
	NULL,
};

/* Every workload, every cut, every policy, unflushed data lost; the failed cuts. */
static u64 run_all(const char *class)
{
	u64 failed = 0;

	H.rotate_policies = ch_sanitized() && !ch_long();
	H.drop_tags = 1u << TFS_TAG_data;
	for (unsigned i = 0; workloads[i]; i++) {
		unsigned ops[CM_MAXOPS], nr = ch_parse_workload(workloads[i], ops, CM_MAXOPS);

		assert_true(nr > 0);
		failed += ch_workload(&H, class, ops, nr, i);
	}
	H.drop_tags = 0;
	return failed;
}

static void test_data_lost_journal_kept(void **state)
{
	u64 dropped = H.post_flush_dropped, verified = H.post_flush_verified;

	assert_int_equal(run_all("postflush"), 0);
	fprintf(stderr, "post-flush entries: %llu images dropped one, %llu checked one\n",
		(unsigned long long)(H.post_flush_dropped - dropped),
		(unsigned long long)(H.post_flush_verified - verified));
	/* Not vacuous: cuts kept a post-flush entry without its data, and with it. */
	assert_true(H.post_flush_dropped > dropped);
	assert_true(H.post_flush_verified > verified);
}

static void test_without_the_check_it_fails(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };
	u64 failed;

	assert_int_equal(tfs_fault_point_arm("replay:skip_data_check", &arm), 0);
	H.quiet_failures = true;
	failed = run_all("unchecked");
	H.quiet_failures = false;
	assert_int_equal(tfs_fault_point_disarm("replay:skip_data_check"), 0);
	fprintf(stderr, "without the replay check: %llu failed cuts\n", (unsigned long long)failed);
	assert_true(failed > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_lost_journal_kept),
		cmocka_unit_test(test_without_the_check_it_fails),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, ch_group_setup, ch_group_teardown);
}
