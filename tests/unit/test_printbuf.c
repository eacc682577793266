// SPDX-License-Identifier: GPL-2.0
/* Tests for lib/printbuf.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

static void test_empty_is_valid_string(void **state)
{
	struct printbuf out = PRINTBUF;

	assert_string_equal(printbuf_str(&out), "");
	assert_int_equal(out.pos, 0);
	printbuf_exit(&out);
	printbuf_exit(&out); /* safe to repeat */
}

static void test_basic_output(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_str(&out, "abc");
	prt_char(&out, '-');
	prt_printf(&out, "%d/%s", 42, "x");
	prt_u64(&out, UINT64_MAX);
	prt_s64(&out, INT64_MIN);
	assert_string_equal(printbuf_str(&out), "abc-42/x18446744073709551615-9223372036854775808");
	assert_int_equal(out.pos, strlen(out.buf));
	assert_false(out.allocation_failure);
	printbuf_exit(&out);
}

static void test_million_appends(void **state)
{
	struct printbuf out = PRINTBUF;

	for (unsigned i = 0; i < 1000000; i++)
		prt_char(&out, 'a' + i % 26);
	assert_false(out.allocation_failure);
	assert_int_equal(out.pos, 1000000);
	assert_int_equal(strlen(out.buf), 1000000);
	for (unsigned i = 0; i < 1000000; i += 9973)
		assert_int_equal(out.buf[i], 'a' + i % 26);
	/* Geometric growth: never more than twice what is needed. */
	assert_true(out.size <= 2 * 1048576);
	printbuf_exit(&out);
}

static void test_long_printf_grows(void **state)
{
	struct printbuf out = PRINTBUF;
	char big[5000];

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	prt_printf(&out, "<%s>", big);
	assert_int_equal(out.pos, 5001);
	assert_int_equal(out.buf[0], '<');
	assert_int_equal(out.buf[5000], '>');
	assert_int_equal(out.buf[5001], '\0');
	printbuf_exit(&out);
}

static void test_tabstops(void **state)
{
	struct printbuf out = PRINTBUF;

	printbuf_tabstop_push(&out, 8);
	printbuf_tabstop_push(&out, 10);
	prt_str(&out, "ab\tcd\r|\n");
	prt_str(&out, "abcdef\t1234\r|\n");
	assert_string_equal(printbuf_str(&out), "ab              cd|\n"
						"abcdef        1234|\n");
	printbuf_exit(&out);
}

static void test_tabstop_narrower_than_text(void **state)
{
	struct printbuf out = PRINTBUF;

	printbuf_tabstop_push(&out, 4);
	printbuf_tabstop_push(&out, 4);
	/* Exactly at the stop and past it: one space separates the fields. */
	prt_str(&out, "abcd\tx\n");
	prt_str(&out, "abcdefgh\tx\n");
	prt_str(&out, "ab\tx\n");
	assert_string_equal(printbuf_str(&out), "abcd x\n"
						"abcdefgh x\n"
						"ab  x\n");
	printbuf_exit(&out);
}

static void test_rjust_overflow(void **state)
{
	struct printbuf out = PRINTBUF;

	printbuf_tabstop_push(&out, 4);
	printbuf_tabstop_push(&out, 6);
	/* Field wider than the stop: kept whole, no padding, next stop next. */
	prt_str(&out, "123456789\r");
	prt_str(&out, "ab\r.\n");
	assert_string_equal(printbuf_str(&out), "123456789ab.\n");
	/* Exact fit: no padding either. */
	prt_str(&out, "1234\r");
	prt_str(&out, "x\r\n");
	assert_string_equal(printbuf_str(&out), "123456789ab.\n1234     x\n");
	printbuf_exit(&out);
}

static void test_tab_without_stops(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_str(&out, "a\tb\rc");
	assert_string_equal(printbuf_str(&out), "a bc");
	printbuf_exit(&out);
}

static void test_indent_across_newlines(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_str(&out, "top\n");
	printbuf_indent_add(&out, 2);
	prt_str(&out, "a\nb\n\nc");
	prt_newline(&out);
	printbuf_indent_add(&out, 2);
	prt_printf(&out, "d\ne\n");
	printbuf_indent_sub(&out, 4);
	prt_str(&out, "end\n");
	assert_string_equal(printbuf_str(&out), "top\n"
						"  a\n"
						"  b\n"
						"  \n"
						"  c\n"
						"    d\n"
						"    e\n"
						"end\n");
	printbuf_indent_sub(&out, 100); /* never below zero */
	assert_int_equal(out.indent, 0);
	printbuf_exit(&out);
}

static void test_indent_with_tabstops(void **state)
{
	struct printbuf out = PRINTBUF;

	/* Stops count from the indent, so nested dumps align among themselves. */
	printbuf_tabstop_push(&out, 6);
	prt_str(&out, "k\tv\n");
	printbuf_indent_add(&out, 4);
	prt_str(&out, "k\tv\n");
	prt_str(&out, "kk\r|\n");
	assert_string_equal(printbuf_str(&out), "k     v\n"
						"    k     v\n"
						"        kk|\n"
						"    ");
	printbuf_exit(&out);
}

static void test_indent_change_mid_line(void **state)
{
	struct printbuf out = PRINTBUF;

	/* Text on the line is never mistaken for indent. */
	prt_str(&out, "ab");
	printbuf_indent_add(&out, 2);
	printbuf_indent_sub(&out, 2);
	assert_string_equal(printbuf_str(&out), "ab");
	printbuf_indent_add(&out, 2);
	printbuf_indent_add(&out, 2);
	prt_str(&out, "cd\nx");
	assert_string_equal(printbuf_str(&out), "abcd\n    x");
	/* After a reset the first line carries no indent; the next does. */
	printbuf_reset(&out);
	prt_str(&out, "y\nz");
	assert_string_equal(printbuf_str(&out), "y\n    z");
	printbuf_exit(&out);
}

static void test_append_own_text(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_str(&out, "abc");
	for (unsigned i = 0; i < 12; i++)
		prt_str(&out, out.buf); /* doubles; grows under its own source */
	assert_int_equal(out.pos, 3 << 12);
	for (unsigned i = 0; i < out.pos; i++)
		assert_int_equal(out.buf[i], "abc"[i % 3]);
	printbuf_exit(&out);
}

static void test_truncation_keeps_prefix(void **state)
{
	char buf[4];
	struct printbuf out = printbuf_extern(buf, sizeof(buf));

	/* Removing the '\r' frees a byte; later output must not land there. */
	prt_str(&out, "ab\rcdef");
	prt_str(&out, "X");
	assert_true(out.allocation_failure);
	assert_string_equal(buf, "ab"); /* a prefix of "abcdefX", without the X */
}

static void test_alloc_failure_is_sticky(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT, .nth = 3 };

	/* Let two growths succeed, fail the third, mid-series. */
	assert_int_equal(tfs_fault_point_arm("alloc:printbuf", &arm), 0);
	for (unsigned i = 0; i < 100000; i++)
		prt_str(&out, "0123456789");
	assert_true(out.allocation_failure);
	assert_int_equal(tfs_fault_point_fired("alloc:printbuf"), 1);
	/* What is there is a valid prefix, NUL-terminated. */
	assert_int_equal(strlen(printbuf_str(&out)), out.pos);
	assert_true(out.pos < 1000000);
	for (unsigned i = 0; i < out.pos; i++)
		assert_int_equal(out.buf[i], '0' + i % 10);
	printbuf_exit(&out);
	tfs_fault_points_reset();
}

static void test_alloc_failure_first_call(void **state)
{
	struct printbuf out = PRINTBUF;
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ALWAYS };

	assert_int_equal(tfs_fault_point_arm("alloc:printbuf", &arm), 0);
	prt_printf(&out, "%s", "hello");
	prt_str(&out, "x\ty\n");
	printbuf_indent_add(&out, 4);
	prt_units_u64(&out, 4096);
	assert_true(out.allocation_failure);
	assert_null(out.buf);
	assert_string_equal(printbuf_str(&out), "");
	tfs_fault_points_reset();
	printbuf_exit(&out);
}

static void test_fixed_exactly_full(void **state)
{
	char buf[6];
	struct printbuf out = printbuf_extern(buf, sizeof(buf));

	prt_str(&out, "hello");
	assert_false(out.allocation_failure);
	assert_string_equal(buf, "hello");

	printbuf_reset(&out);
	prt_printf(&out, "%s", "hello");
	assert_false(out.allocation_failure);
	assert_string_equal(buf, "hello");
}

static void test_fixed_one_past(void **state)
{
	char buf[8];
	memset(buf, 'Q', sizeof(buf));
	struct printbuf out = printbuf_extern(buf, 6);

	prt_str(&out, "hello!");
	assert_true(out.allocation_failure);
	assert_string_equal(buf, "hello");
	assert_int_equal(buf[6], 'Q'); /* nothing written past size */

	out = printbuf_extern(buf, 6);
	prt_printf(&out, "%s!", "hello");
	assert_true(out.allocation_failure);
	assert_string_equal(buf, "hello");
	assert_int_equal(buf[6], 'Q');

	/* Padding and indent that do not fit are dropped from the end. */
	out = printbuf_extern(buf, 6);
	printbuf_tabstop_push(&out, 20);
	prt_str(&out, "ab\t");
	assert_true(out.allocation_failure);
	assert_string_equal(buf, "ab   ");
	assert_int_equal(buf[6], 'Q');

	out = printbuf_extern(buf, 6);
	printbuf_tabstop_push(&out, 20);
	prt_str(&out, "abcd\r");
	assert_true(out.allocation_failure);
	assert_string_equal(buf, "     "); /* the first 5 bytes of 16 spaces + "abcd" */
	assert_int_equal(buf[6], 'Q');
}

static void test_fixed_zero_and_onstack(void **state)
{
	char c = 'Q';
	struct printbuf out = printbuf_extern(&c, 0);

	prt_str(&out, "x");
	assert_true(out.allocation_failure);
	assert_int_equal(c, 'Q');
	assert_string_equal(printbuf_str(&out), "");

	PRINTBUF_ONSTACK(s, 16);
	prt_printf(&s, "%u-%u", 1, 2);
	assert_string_equal(printbuf_str(&s), "1-2");
	assert_false(s.heap_allocated);
}

static void units(struct printbuf *out, u64 v, bool si, const char *want)
{
	printbuf_reset(out);
	out->si_units = si;
	prt_units_u64(out, v);
	assert_string_equal(printbuf_str(out), want);
}

static void test_units_boundaries(void **state)
{
	struct printbuf out = PRINTBUF;

	units(&out, 0, false, "0 B");
	units(&out, 1023, false, "1023 B");
	units(&out, 1024, false, "1.0 KiB");
	units(&out, 1536, false, "1.5 KiB");
	units(&out, 4 << 20, false, "4.0 MiB");
	units(&out, (1 << 20) - 1, false, "1.0 MiB"); /* rounding moves the unit */
	units(&out, (1ULL << 30) - (1ULL << 20), false, "1023.0 MiB");
	units(&out, 1ULL << 60, false, "1.0 EiB");
	units(&out, (1ULL << 60) - 1, false, "1.0 EiB");
	units(&out, UINT64_MAX, false, "16.0 EiB");
	units(&out, 999, true, "999 B");
	units(&out, 1000, true, "1.0 kB");
	units(&out, 1023, true, "1.0 kB");
	units(&out, 1024, true, "1.0 kB");
	units(&out, 999999, true, "1.0 MB");
	units(&out, 1000000000000000000ULL, true, "1.0 EB");
	units(&out, UINT64_MAX, true, "18.4 EB");

	printbuf_reset(&out);
	out.si_units = false;
	prt_units_s64(&out, -4096);
	prt_char(&out, ' ');
	prt_units_s64(&out, INT64_MIN);
	assert_string_equal(printbuf_str(&out), "-4.0 KiB -8.0 EiB");

	printbuf_reset(&out);
	out.raw_units = true;
	prt_units_u64(&out, 1ULL << 40);
	assert_string_equal(printbuf_str(&out), "1099511627776");
	printbuf_exit(&out);
}

static void test_hex_and_uuid(void **state)
{
	struct printbuf out = PRINTBUF;
	const u8 uuid[16] = { 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
			      0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };

	prt_uuid(&out, uuid);
	assert_string_equal(printbuf_str(&out), "12345678-9abc-def0-0123-456789abcdef");

	printbuf_reset(&out);
	prt_hex_bytes(&out, uuid, 5, 2, ' ');
	assert_string_equal(printbuf_str(&out), "1234 5678 9a");
	printbuf_reset(&out);
	prt_hex_bytes(&out, uuid, 3, 0, 0);
	assert_string_equal(printbuf_str(&out), "123456");
	printbuf_exit(&out);
}

static void test_bytes_verbatim(void **state)
{
	struct printbuf out = PRINTBUF;

	printbuf_indent_add(&out, 2);
	prt_bytes(&out, "a\tb\nc", 5);
	assert_int_equal(out.pos, 7);
	assert_memory_equal(out.buf, "  a\tb\nc", 7);
	printbuf_exit(&out);
}

/* Invalid UTF-8 becomes U+FFFD, one per bad byte; valid sequences pass. */
static void test_json_str_invalid_utf8(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_json_str(&out, "\xff\"q\\");
	assert_string_equal(printbuf_str(&out), "\"\\ufffd\\\"q\\\\\"");
	printbuf_reset(&out);
	/* Truncated, overlong, surrogate, beyond U+10FFFF; then valid 2, 3, 4 bytes. */
	prt_json_str(
		&out,
		"a\xc3\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	assert_string_equal(
		printbuf_str(&out),
		"\"a\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd|"
		"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
	printbuf_exit(&out);
}

static void test_json_str(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_json_str(&out, "a\"b\\c\n\t\x01 \xc3\xa9");
	assert_string_equal(printbuf_str(&out), "\"a\\\"b\\\\c\\n\\t\\u0001 \xc3\xa9\"");
	printbuf_exit(&out);
}

static void test_detach_and_errcode(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_errcode(&out, -TFS_ERR_journal_full);
	prt_char(&out, ' ');
	prt_errcode(&out, -EIO);
	char *s = printbuf_detach(&out);

	assert_string_equal(s, "journal_full Input/output error");
	assert_null(out.buf);
	assert_int_equal(out.pos, 0);
	free(s);

	s = printbuf_detach(&out); /* empty: still a string */
	assert_string_equal(s, "");
	free(s);
}

/* Two sizes in a message: units, unless they would read the same. */
static void test_units_vs(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_units_u64_vs(&out, 67108865, 67108864);
	prt_char(&out, ' ');
	prt_units_u64_vs(&out, 67108864, 67108865);
	prt_char(&out, ' ');
	prt_units_u64_vs(&out, 8 << 20, 4 << 20);
	prt_char(&out, ' ');
	prt_units_u64_vs(&out, 4096, 4096);
	prt_char(&out, ' ');
	prt_units_u64_vs(&out, 100, 101);
	assert_string_equal(printbuf_str(&out),
			    "67108865 bytes 67108864 bytes 8.0 MiB 4.0 KiB 100 B");
	printbuf_exit(&out);
}

/* An error for a user: the errno's text, a tinyfs code's name after it. */
static void test_err_desc(void **state)
{
	struct printbuf out = PRINTBUF;

	prt_err_desc(&out, -EIO);
	prt_str(&out, "; ");
	prt_err_desc(&out, -TFS_ERR_bdev_vanished);
	prt_str(&out, "; ");
	prt_err_desc(&out, -TFS_ERR_journal_full);
	assert_string_equal(printbuf_str(&out),
			    "Input/output error; No such device (bdev_vanished); Resource "
			    "temporarily unavailable (journal_full)");
	printbuf_exit(&out);
}

static void test_tabstop_limit(void **state)
{
	struct printbuf out = PRINTBUF;

	for (unsigned i = 0; i < PRINTBUF_MAX_TABSTOPS; i++)
		assert_int_equal(printbuf_tabstop_push(&out, 1), 0);
	assert_int_equal(printbuf_tabstop_push(&out, 1), -EINVAL);
	printbuf_tabstop_pop(&out);
	assert_int_equal(out.nr_tabstops, PRINTBUF_MAX_TABSTOPS - 1);
	printbuf_tabstops_reset(&out);
	assert_int_equal(out.nr_tabstops, 0);
	printbuf_exit(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_is_valid_string),
		cmocka_unit_test(test_basic_output),
		cmocka_unit_test(test_million_appends),
		cmocka_unit_test(test_long_printf_grows),
		cmocka_unit_test(test_tabstops),
		cmocka_unit_test(test_tabstop_narrower_than_text),
		cmocka_unit_test(test_rjust_overflow),
		cmocka_unit_test(test_tab_without_stops),
		cmocka_unit_test(test_indent_across_newlines),
		cmocka_unit_test(test_indent_with_tabstops),
		cmocka_unit_test(test_indent_change_mid_line),
		cmocka_unit_test(test_append_own_text),
		cmocka_unit_test(test_truncation_keeps_prefix),
		cmocka_unit_test(test_alloc_failure_is_sticky),
		cmocka_unit_test(test_alloc_failure_first_call),
		cmocka_unit_test(test_fixed_exactly_full),
		cmocka_unit_test(test_fixed_one_past),
		cmocka_unit_test(test_fixed_zero_and_onstack),
		cmocka_unit_test(test_units_boundaries),
		cmocka_unit_test(test_hex_and_uuid),
		cmocka_unit_test(test_bytes_verbatim),
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_json_str_invalid_utf8),
		cmocka_unit_test(test_detach_and_errcode),
		cmocka_unit_test(test_tabstop_limit),
		cmocka_unit_test(test_units_vs),
		cmocka_unit_test(test_err_desc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
