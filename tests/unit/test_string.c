// SPDX-License-Identifier: GPL-2.0
/* Tests for lib/string.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "lib/string.h"

static void test_strscpy_fits(void **state)
{
	char buf[8];

	memset(buf, 'Q', sizeof(buf));
	assert_int_equal(tfs_strscpy(buf, "abc", sizeof(buf)), 3);
	assert_string_equal(buf, "abc");
	assert_int_equal(tfs_strscpy(buf, "", sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_strscpy_exactly_full(void **state)
{
	char buf[8];

	assert_int_equal(tfs_strscpy(buf, "1234567", sizeof(buf)), 7);
	assert_string_equal(buf, "1234567");
}

static void test_strscpy_one_past(void **state)
{
	char buf[9];

	memset(buf, 'Q', sizeof(buf));
	assert_int_equal(tfs_strscpy(buf, "12345678", 8), -E2BIG);
	assert_string_equal(buf, "1234567");
	assert_int_equal(buf[8], 'Q');
}

static void test_strscpy_zero_size(void **state)
{
	char c = 'Q';

	assert_int_equal(tfs_strscpy(&c, "x", 0), -E2BIG);
	assert_int_equal(c, 'Q');
}

static void test_strpad(void **state)
{
	char f[4];

	memset(f, 'Q', sizeof(f));
	assert_int_equal(tfs_strpad(f, "ab", sizeof(f)), 2);
	assert_memory_equal(f, "ab\0\0", 4);
	/* A text of exactly the field's width fills it, unterminated. */
	assert_int_equal(tfs_strpad(f, "wxyz", sizeof(f)), 4);
	assert_memory_equal(f, "wxyz", 4);
	assert_int_equal(tfs_strnlen_field(f, sizeof(f)), 4);
	/* Too long: nothing written. */
	assert_int_equal(tfs_strpad(f, "12345", sizeof(f)), -E2BIG);
	assert_memory_equal(f, "wxyz", 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strscpy_fits),
		cmocka_unit_test(test_strscpy_exactly_full),
		cmocka_unit_test(test_strscpy_one_past),
		cmocka_unit_test(test_strscpy_zero_size),
		cmocka_unit_test(test_strpad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
