// SPDX-License-Identifier: GPL-2.0
/* Tests for lib/errcode.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "lib/errcode.h"

static void test_names(void **state)
{
	assert_string_equal(tfs_err_str(-TFS_ERR_journal_full), "journal_full");
	assert_string_equal(tfs_err_str(TFS_ERR_journal_full), "journal_full");
	assert_string_equal(tfs_err_str(-TFS_ERR_journal_blocked), "journal_blocked");
	assert_string_equal(tfs_err_str(-TFS_ERR_journal_pin_full), "journal_pin_full");
	assert_string_equal(tfs_err_str(-TFS_ERR_insufficient_devices), "insufficient_devices");
	assert_string_equal(tfs_err_str(-EIO), "Input/output error");
	assert_string_equal(tfs_err_str(0), "success");
	assert_string_equal(tfs_err_str(-(TFS_ERR_MAX + 5)), "unknown tinyfs error code");
	/* INT_MIN has no positive counterpart: no undefined behaviour. */
	assert_string_equal(tfs_err_str(INT_MIN), "unknown tinyfs error code");
	assert_int_equal(tfs_err_class(INT_MIN), -EIO);
	assert_true(tfs_err_matches(INT_MIN, EIO));
}

static void test_every_code_named_and_classed(void **state)
{
	/* Walk every code: a name, a chain that ends at a real errno. */
	for (int code = TFS_ERR_START; code < TFS_ERR_MAX; code++) {
		const char *name = tfs_err_str(-code);
		int class = tfs_err_class(-code);

		assert_non_null(name);
		assert_true(strlen(name) > 0);
		assert_true(class < 0 && -class < TFS_ERR_START);
		assert_true(tfs_err_matches(-code, code));
		assert_true(tfs_err_matches(-code, -class));
		/* Parents come first in the list, so chains cannot loop. */
		int parent = tfs_err_parent(code);
		assert_true(parent < code);
	}
}

static void test_values_above_errno_range(void **state)
{
	assert_true(TFS_ERR_ENOMEM_printbuf >= TFS_ERR_START);
	assert_true(TFS_ERR_START > 1024); /* above every errno Linux has */
}

static void test_classes(void **state)
{
	assert_int_equal(tfs_err_class(-TFS_ERR_journal_full), -EAGAIN);
	assert_int_equal(tfs_err_class(-TFS_ERR_insufficient_devices), -EROFS);
	assert_int_equal(tfs_err_class(-TFS_ERR_invalid_sb_magic), -EINVAL);
	assert_int_equal(tfs_err_class(-TFS_ERR_ENOMEM_printbuf), -ENOMEM);
	assert_int_equal(tfs_err_class(-TFS_ERR_journal_entry_too_big), -ENOSPC);
	assert_int_equal(tfs_err_class(-EIO), -EIO);
	assert_int_equal(tfs_err_class(EIO), -EIO);
	assert_int_equal(tfs_err_class(0), 0);
	assert_int_equal(tfs_err_class(-(TFS_ERR_MAX + 1)), -EIO);
	/* An unknown code is EIO for matches() too, as for class(). */
	assert_true(tfs_err_matches(-(TFS_ERR_MAX + 1), EIO));
	assert_false(tfs_err_matches(-(TFS_ERR_MAX + 1), EINVAL));
}

static void test_matches(void **state)
{
	int err = -TFS_ERR_journal_pin_full;

	assert_true(tfs_err_matches(err, TFS_ERR_journal_pin_full));
	assert_true(tfs_err_matches(err, TFS_ERR_journal_res_get_blocked));
	assert_true(tfs_err_matches(err, EAGAIN));
	assert_true(tfs_err_matches(err, -EAGAIN));
	assert_false(tfs_err_matches(err, TFS_ERR_journal_full));
	assert_false(tfs_err_matches(err, EROFS));
	/* The pin fifo being full is not "journal full". */
	assert_false(tfs_err_matches(-TFS_ERR_journal_full, TFS_ERR_journal_pin_full));

	assert_true(tfs_err_matches(-TFS_ERR_insufficient_devices, TFS_ERR_erofs_journal));
	assert_true(tfs_err_matches(-TFS_ERR_insufficient_devices, EROFS));
	assert_true(tfs_err_matches(-TFS_ERR_invalid_sb_csum, TFS_ERR_invalid_sb));
	assert_true(tfs_err_matches(-EIO, EIO));
	assert_false(tfs_err_matches(-EIO, TFS_ERR_bdev_io));
	assert_true(tfs_err_matches(0, 0));
	assert_false(tfs_err_matches(0, EIO));
	assert_false(tfs_err_matches(-EIO, 0));
}

static void test_parent(void **state)
{
	assert_int_equal(tfs_err_parent(-TFS_ERR_journal_full), TFS_ERR_journal_res_get_blocked);
	assert_int_equal(tfs_err_parent(-TFS_ERR_journal_res_get_blocked), EAGAIN);
	assert_int_equal(tfs_err_parent(-EIO), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_every_code_named_and_classed),
		cmocka_unit_test(test_values_above_errno_range),
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_matches),
		cmocka_unit_test(test_parent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
