// SPDX-License-Identifier: GPL-2.0
#include "lib/checksum.h"

#include <string.h>

#ifdef TFS_HAVE_ISAL
#include <isa-l/crc.h>
#endif

static const char *const csum_type_names[] = {
#define x(name, nr) [nr] = #name,
	TFS_CSUM_TYPES(x)
#undef x
};

const char *tfs_csum_type_str(unsigned type)
{
	return type < TFS_CSUM_NR ? csum_type_names[type] : NULL;
}

int tfs_csum_type_parse(const char *name)
{
	for (unsigned i = 0; i < TFS_CSUM_NR; i++)
		if (csum_type_names[i] && !strcmp(csum_type_names[i], name))
			return (int)i;
	return -1;
}

/* Slice-by-8 tables for the reflected Castagnoli polynomial 0x82f63b78. */
static u32 crc_table[8][256];

__attribute__((constructor)) static void crc32c_init_tables(void)
{
	for (u32 i = 0; i < 256; i++) {
		u32 c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1;
		crc_table[0][i] = c;
	}
	for (u32 i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

u32 tfs_crc32c_portable(u32 crc, const void *buf, size_t len)
{
	const u8 *p = buf;

	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		u64 v;

		memcpy(&v, p, 8);
		v = le64_to_cpu(v) ^ crc;
		crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
		      crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
		      crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

u32 tfs_crc32c(u32 crc, const void *buf, size_t len)
{
#ifdef TFS_HAVE_ISAL
	const unsigned char *p = buf;

	/* crc32_iscsi takes and returns the un-inverted register, and an int
	 * length: feed it at most 1 GiB at a time. */
	crc = ~crc;
	while (len) {
		size_t n = len < (1u << 30) ? len : (1u << 30);

		crc = crc32_iscsi((unsigned char *)p, (int)n, crc);
		p += n;
		len -= n;
	}
	return ~crc;
#else
	return tfs_crc32c_portable(crc, buf, len);
#endif
}

bool tfs_crc32c_accelerated(void)
{
#ifdef TFS_HAVE_ISAL
	return true;
#else
	return false;
#endif
}

u64 tfs_csum(enum tfs_csum_type type, const void *buf, size_t len)
{
	switch (type) {
	case TFS_CSUM_crc32c:
		return tfs_crc32c(0, buf, len);
	default:
		return 0;
	}
}
