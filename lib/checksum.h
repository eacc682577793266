/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_CHECKSUM_H
#define TFS_LIB_CHECKSUM_H

/*
 * Checksums for metadata (and data).  crc32c (Castagnoli) is the one on-disk
 * checksum today; the type is recorded on disk so more can be added.
 *
 * tfs_crc32c() has zlib-style chaining: start with 0, feed each piece with
 * the previous result; tfs_crc32c(0, "123456789", 9) == 0xe3069283.  It uses
 * ISA-L's crc32_iscsi (SSE4.2/PCLMUL) when built with libisal, and the
 * portable table implementation otherwise; both give identical results.
 */

#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"

/* Names are x-macros so the enum and the strings stay in step. */
// clang-format off
#define TFS_CSUM_TYPES(x)		\
	x(none, 0)			\
	x(crc32c, 1)
// clang-format on

enum tfs_csum_type {
#define x(name, nr) TFS_CSUM_##name = nr,
	TFS_CSUM_TYPES(x)
#undef x
	TFS_CSUM_NR
};

/* "crc32c", or NULL for an unknown type. */
const char *tfs_csum_type_str(unsigned type);
/* Type by name; -1 when unknown. */
int tfs_csum_type_parse(const char *name);

u32 tfs_crc32c(u32 crc, const void *buf, size_t len);

/* The portable implementation, always built (tests compare both). */
u32 tfs_crc32c_portable(u32 crc, const void *buf, size_t len);

/* True when tfs_crc32c() runs on ISA-L rather than the portable code. */
bool tfs_crc32c_accelerated(void);

/* Checksum of type over buf; 0 for TFS_CSUM_none. */
u64 tfs_csum(enum tfs_csum_type type, const void *buf, size_t len);

#endif /* TFS_LIB_CHECKSUM_H */
