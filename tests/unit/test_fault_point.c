// SPDX-License-Identifier: GPL-2.0
/* Tests for lib/fault_point.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

static bool probe_a(void)
{
	return tfs_fault("test:a");
}

static bool probe_b(void)
{
	return tfs_fault("test:b");
}

/* Two sites with one name: arming the name arms both. */
static bool probe_twin(int which)
{
	if (which)
		return tfs_fault("test:twin");
	return tfs_fault("test:twin");
}

static int reset(void **state)
{
	tfs_fault_points_reset();
	tfs_fault_points_count(false);
	return 0;
}

static unsigned fires(bool (*f)(void), unsigned n)
{
	unsigned c = 0;

	for (unsigned i = 0; i < n; i++)
		c += f();
	return c;
}

/*
 * "always" with nth=2, in either order, fires from the 2nd hit of test:a
 * on; "always" with every= is refused.
 */
static void check_always_nth_spec(void)
{
	assert_int_equal(tfs_faults_from_opt("test", "point test:a nth=2 always"), 0);
	assert_false(probe_a());
	assert_true(probe_a());
	assert_true(probe_a());
	assert_int_equal(tfs_faults_from_opt("test", "point test:a always nth=2"), 0);
	assert_false(probe_a());
	assert_true(probe_a());
	assert_int_equal(tfs_faults_from_opt("test", "point test:a always every=2"),
			 -TFS_ERR_fault_spec_invalid);
}

static void test_registered_statically(void **state)
{
	bool seen_a = false, seen_b = false, seen_alloc = false;

	/* Known before ever being reached. */
	for (unsigned i = 0; i < tfs_fault_points_nr(); i++) {
		const struct tfs_fault_point *p = tfs_fault_point_nth(i);

		seen_a |= !strcmp(p->name, "test:a");
		seen_b |= !strcmp(p->name, "test:b");
		seen_alloc |= !strcmp(p->name, "alloc:printbuf");
	}
	assert_true(seen_a && seen_b && seen_alloc);
	assert_null(tfs_fault_point_nth(tfs_fault_points_nr()));
}

static void test_off_by_default(void **state)
{
	assert_int_equal(fires(probe_a, 100), 0);
	assert_false(tfs_fault_points_active);
	assert_int_equal(tfs_fault_point_hits("test:a"), 0); /* not counting */
}

static void test_oneshot_nth(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT, .nth = 3 };

	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	assert_false(probe_a());
	assert_false(probe_a());
	assert_true(probe_a());
	assert_int_equal(fires(probe_a, 50), 0);
	assert_int_equal(tfs_fault_point_fired("test:a"), 1);
	assert_int_equal(fires(probe_b, 10), 0); /* others untouched */
	assert_false(tfs_fault_points_active);	 /* disarmed itself */
}

static void test_every_nth_and_times(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_EVERY_NTH, .nth = 4 };

	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	assert_int_equal(fires(probe_a, 40), 10);

	arm.times = 3;
	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	assert_int_equal(fires(probe_a, 40), 3);
	assert_int_equal(tfs_fault_point_fired("test:a"), 3);
	/* The spec form, either order. */
	check_always_nth_spec();
}

static void test_probability_seeded(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_PROBABILITY, .ppm = 250000, .seed = 42 };
	bool first[1000];
	unsigned n = 0;

	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	for (unsigned i = 0; i < 1000; i++)
		n += first[i] = probe_a();
	assert_in_range(n, 180, 320);

	/* Same seed, same sequence. */
	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	for (unsigned i = 0; i < 1000; i++)
		assert_int_equal(probe_a(), first[i]);

	arm.seed = 43;
	assert_int_equal(tfs_fault_point_arm("test:a", &arm), 0);
	unsigned same = 0;
	for (unsigned i = 0; i < 1000; i++)
		same += probe_a() == first[i];
	assert_true(same < 1000);
}

static void test_always_and_twins(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };

	assert_int_equal(tfs_fault_point_arm("test:twin", &arm), 0);
	assert_true(probe_twin(0));
	assert_true(probe_twin(1));
	assert_int_equal(tfs_fault_point_fired("test:twin"), 2);
	assert_int_equal(tfs_fault_point_disarm("test:twin"), 0);
	assert_false(probe_twin(0));
}

static void test_unknown_name(void **state)
{
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };

	assert_int_equal(tfs_fault_point_arm("no:such", &arm), -TFS_ERR_fault_point_unknown);
	assert_int_equal(tfs_fault_point_fired("no:such"), -1);
	assert_false(tfs_fault_points_active);
}

static void test_counting(void **state)
{
	tfs_fault_points_count(true);
	fires(probe_a, 7);
	fires(probe_b, 2);
	assert_int_equal(tfs_fault_point_hits("test:a"), 7);
	assert_int_equal(tfs_fault_point_hits("test:b"), 2);
	assert_int_equal(tfs_fault_point_fired("test:a"), 0);

	struct printbuf out = PRINTBUF;
	tfs_fault_points_to_text(&out);
	assert_non_null(strstr(printbuf_str(&out), "test:a"));
	assert_non_null(strstr(printbuf_str(&out), "test_fault_point.c"));
	assert_false(out.allocation_failure);
	printbuf_exit(&out);
}

static void test_parse_spec(void **state)
{
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_faults_parse("point test:a nth=2; point test:b every=3 times=1", &err),
			 0);
	assert_false(probe_a());
	assert_true(probe_a());
	assert_false(probe_b());
	assert_false(probe_b());
	assert_true(probe_b());
	assert_int_equal(fires(probe_b, 9), 0);

	/* Decimal only: 010 is ten, not eight. */
	assert_int_equal(tfs_faults_parse("point test:a nth=010", &err), 0);
	assert_int_equal(fires(probe_a, 9), 0);
	assert_true(probe_a());

	assert_int_equal(tfs_faults_parse("point test:a prob=1 seed=9", &err), 0);
	assert_true(probe_a());
	assert_int_equal(tfs_faults_parse("point test:a", &err), 0); /* bare: oneshot */
	assert_true(probe_a());
	assert_false(probe_a());
	printbuf_exit(&err);
}

static void spec_fails(const char *spec, int want, const char *msg)
{
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_faults_parse(spec, &err), want);
	if (!strstr(printbuf_str(&err), msg))
		fail_msg("spec '%s': message '%s' lacks '%s'", spec, printbuf_str(&err), msg);
	printbuf_exit(&err);
}

static void test_parse_errors_arm_nothing(void **state)
{
	/* The good first entry must not be armed when a later one is bad. */
	spec_fails("point test:a always; point no:such", -TFS_ERR_fault_point_unknown,
		   "no fault point named 'no:such'");
	assert_false(probe_a());
	spec_fails("point test:a nth=0", -TFS_ERR_fault_spec_invalid, "bad word 'nth=0'");
	spec_fails("point test:a prob=2", -TFS_ERR_fault_spec_invalid, "prob=2");
	spec_fails("point test:a frobnicate", -TFS_ERR_fault_spec_invalid, "frobnicate");
	spec_fails("point", -TFS_ERR_fault_spec_invalid, "needs a fault point name");
	spec_fails("point test:a prob=", -TFS_ERR_fault_spec_invalid, "'prob=' needs a value");
	spec_fails("point test:a every=3 oneshot", -TFS_ERR_fault_spec_invalid,
		   "more than one mode");
	spec_fails("point test:a nth=0x10", -TFS_ERR_fault_spec_invalid, "bad word 'nth=0x10'");
	spec_fails("bogus x", -TFS_ERR_fault_spec_invalid, "unknown fault entry kind 'bogus'");
	assert_false(tfs_fault_points_active);
}

static int kind_calls, kind_applied;
static int parse_test_kind(char **w, unsigned nr, bool apply, struct printbuf *err)
{
	kind_calls++;
	if (nr != 1 || strcmp(w[0], "ok")) {
		prt_str(err, "want 'ok'");
		return -TFS_ERR_fault_spec_invalid;
	}
	kind_applied += apply;
	return 0;
}

static void test_registered_kind(void **state)
{
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_fault_register_kind("thing", parse_test_kind), 0);
	assert_int_equal(tfs_faults_parse("thing ok; thing ok", &err), 0);
	assert_int_equal(kind_applied, 2);
	assert_int_equal(tfs_faults_parse("thing ok; thing bad", &err),
			 -TFS_ERR_fault_spec_invalid);
	assert_int_equal(kind_applied, 2); /* checked first, nothing applied */
	printbuf_exit(&err);
}

static void test_env(void **state)
{
	setenv("TFS_FAULTS", "point test:b always", 1);
	assert_int_equal(tfs_faults_from_env(), 0);
	assert_true(probe_b());
	setenv("TFS_FAULTS", "point test:b sometimes", 1);
	assert_int_equal(tfs_faults_from_env(), -TFS_ERR_fault_spec_invalid);
	unsetenv("TFS_FAULTS");
	assert_int_equal(tfs_faults_from_env(), 0);
}

static void test_never_fired(void **state)
{
	struct printbuf out = PRINTBUF;
	unsigned total, left;

	tfs_fault_points_count(true);
	total = tfs_fault_points_never(&out, true);
	assert_non_null(strstr(printbuf_str(&out), "test:a\n"));
	assert_non_null(strstr(printbuf_str(&out), "test:twin\n"));
	/* A name with two sites is listed once. */
	{
		const char *first = strstr(printbuf_str(&out), "test:twin\n");

		assert_null(strstr(first + 1, "test:twin\n"));
	}
	printbuf_reset(&out);
	probe_a();
	probe_twin(1); /* one of its two sites */
	left = tfs_fault_points_never(&out, true);
	assert_int_equal(left, total - 2);
	assert_null(strstr(printbuf_str(&out), "test:a\n"));
	assert_null(strstr(printbuf_str(&out), "test:twin\n"));
	assert_non_null(strstr(printbuf_str(&out), "test:b\n"));

	/* Fired, not just hit. */
	printbuf_reset(&out);
	assert_int_equal(
		tfs_fault_point_arm("test:b", &(struct tfs_fault_arm){ .mode = TFS_FAULT_ALWAYS }),
		0);
	assert_true(tfs_fault_points_never(&out, false) >= 3);
	assert_non_null(strstr(printbuf_str(&out), "test:b\n"));
	printbuf_reset(&out);
	assert_true(probe_b());
	tfs_fault_points_never(&out, false);
	assert_null(strstr(printbuf_str(&out), "test:b\n"));
	assert_non_null(strstr(printbuf_str(&out), "test:a\n"));
	printbuf_exit(&out);
}

/*
 * A point that fired stays "fired" for tfs_fault_points_never() when it is
 * armed again and does not fire then: an error loop arms every point many
 * times and asks at the end which never fired (arming used to zero it).
 */
static void test_never_fired_survives_rearm(void **state)
{
	struct printbuf out = PRINTBUF;

	assert_int_equal(
		tfs_fault_point_arm("test:b", &(struct tfs_fault_arm){ .mode = TFS_FAULT_ONESHOT }),
		0);
	assert_true(probe_b());
	assert_int_equal(tfs_fault_point_fired("test:b"), 1);
	assert_int_equal(
		tfs_fault_point_arm("test:b",
				    &(struct tfs_fault_arm){ .mode = TFS_FAULT_ONESHOT, .nth = 5 }),
		0);
	assert_false(probe_b());
	/* Since the arming: 0; over the process: once. */
	assert_int_equal(tfs_fault_point_fired("test:b"), 0);
	tfs_fault_points_never(&out, false);
	assert_null(strstr(printbuf_str(&out), "test:b\n"));
	assert_non_null(strstr(printbuf_str(&out), "test:a\n"));
	/* tfs_fault_points_reset() forgets it. */
	tfs_fault_points_reset();
	printbuf_reset(&out);
	tfs_fault_points_never(&out, false);
	assert_non_null(strstr(printbuf_str(&out), "test:b\n"));
	printbuf_exit(&out);
}

/* always with nth: every hit from the nth on (a persistent failure from there). */
static void test_always_from_nth(void **state)
{
	assert_int_equal(
		tfs_fault_point_arm("test:a",
				    &(struct tfs_fault_arm){ .mode = TFS_FAULT_ALWAYS, .nth = 3 }),
		0);
	assert_false(probe_a());
	assert_false(probe_a());
	assert_true(probe_a());
	assert_true(probe_a());
	assert_true(probe_a());
	assert_int_equal(tfs_fault_point_fired("test:a"), 3);
	/* The spec form, either order. */
	check_always_nth_spec();
}

static void test_from_opt(void **state)
{
	assert_int_equal(tfs_faults_from_opt("test", "point test:a nth=2"), 0);
	assert_false(probe_a());
	assert_true(probe_a());
	assert_int_equal(tfs_faults_from_opt("test", "point test:a bogus"),
			 -TFS_ERR_fault_spec_invalid);
	assert_int_equal(tfs_faults_from_opt("test", "point no:such"),
			 -TFS_ERR_fault_point_unknown);
	assert_false(probe_a());
}

/*
 * tfs_faults_from_env_once applies $TFS_FAULTS only if nothing did yet.  Runs
 * first (nothing has read the environment yet); the child sees that state.
 */
static void test_env_once(void **state)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (!pid) {
		setenv("TFS_FAULTS", "point test:a always", 1);
		if (tfs_faults_from_env_once() || !probe_a())
			_exit(1);
		tfs_fault_points_reset();
		/* Applied once already: the second call does nothing. */
		if (tfs_faults_from_env_once() || probe_a())
			_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_env_once, reset),
		cmocka_unit_test_setup(test_registered_statically, reset),
		cmocka_unit_test_setup(test_off_by_default, reset),
		cmocka_unit_test_setup(test_oneshot_nth, reset),
		cmocka_unit_test_setup(test_every_nth_and_times, reset),
		cmocka_unit_test_setup(test_probability_seeded, reset),
		cmocka_unit_test_setup(test_always_and_twins, reset),
		cmocka_unit_test_setup(test_unknown_name, reset),
		cmocka_unit_test_setup(test_counting, reset),
		cmocka_unit_test_setup(test_parse_spec, reset),
		cmocka_unit_test_setup(test_parse_errors_arm_nothing, reset),
		cmocka_unit_test_setup(test_registered_kind, reset),
		cmocka_unit_test_setup(test_env, reset),
		cmocka_unit_test_setup(test_never_fired, reset),
		cmocka_unit_test_setup(test_from_opt, reset),
		cmocka_unit_test_setup(test_never_fired_survives_rearm, reset),
		cmocka_unit_test_setup(test_always_from_nth, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
