// SPDX-License-Identifier: GPL-2.0
/* Tests for lib/checksum.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/checksum.h"

/* Published crc32c vectors (RFC 3720 B.4 and the common check value). */
static void test_vectors(void **state)
{
	u8 zeros[32] = { 0 }, ones[32], inc[32], dec[32];

	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		inc[i] = (u8)i;
		dec[i] = (u8)(31 - i);
	}
	for (int impl = 0; impl < 2; impl++) {
		u32 (*f)(u32, const void *, size_t) = impl ? tfs_crc32c_portable : tfs_crc32c;

		assert_int_equal(f(0, "123456789", 9), 0xe3069283);
		assert_int_equal(f(0, zeros, 32), 0x8a9136aa);
		assert_int_equal(f(0, ones, 32), 0x62a8ab43);
		assert_int_equal(f(0, inc, 32), 0x46dd794e);
		assert_int_equal(f(0, dec, 32), 0x113fdb5c);
		assert_int_equal(f(0, "", 0), 0);
	}
}

static void test_chaining(void **state)
{
	const char *s = "The quick brown fox jumps over the lazy dog";
	size_t len = strlen(s);

	for (size_t split = 0; split <= len; split++) {
		u32 c = tfs_crc32c(0, s, split);

		c = tfs_crc32c(c, s + split, len - split);
		assert_int_equal(c, tfs_crc32c(0, s, len));
		assert_int_equal(c, 0x22620404);
	}
}

/* Both paths agree on every length and alignment. */
static void test_paths_agree(void **state)
{
	size_t n = 1 << 16;
	u8 *buf = malloc(n + 8);
	u64 x = 88172645463325252ULL;

	assert_non_null(buf);
	for (size_t i = 0; i < n + 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (u8)x;
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len < 300; len++)
			assert_int_equal(tfs_crc32c(0, buf + off, len),
					 tfs_crc32c_portable(0, buf + off, len));
	assert_int_equal(tfs_crc32c(0x12345678, buf, n), tfs_crc32c_portable(0x12345678, buf, n));
	free(buf);
}

static void test_types(void **state)
{
	assert_string_equal(tfs_csum_type_str(TFS_CSUM_crc32c), "crc32c");
	assert_string_equal(tfs_csum_type_str(TFS_CSUM_none), "none");
	assert_null(tfs_csum_type_str(TFS_CSUM_NR));
	assert_int_equal(tfs_csum_type_parse("crc32c"), TFS_CSUM_crc32c);
	assert_int_equal(tfs_csum_type_parse("md5"), -1);
	assert_int_equal(tfs_csum(TFS_CSUM_crc32c, "123456789", 9), 0xe3069283);
	assert_int_equal(tfs_csum(TFS_CSUM_none, "123456789", 9), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_chaining),
		cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_types),
	};

	print_message("crc32c: %s\n", tfs_crc32c_accelerated() ? "ISA-L" : "portable");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
