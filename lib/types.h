/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_TYPES_H
#define TFS_LIB_TYPES_H

/*
 * Basic integer types and helpers shared by every layer.
 *
 * On-disk structures use __le16/__le32/__le64 (bit-identical to the native
 * types on little-endian hosts, but typed so reviews can see which fields are
 * on-disk) and are converted with le*_to_cpu()/cpu_to_le*().
 */

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

/*
 * The kernel's own __le16/32/64: <sys/stat.h> (statx) and liburing include
 * <linux/types.h>, so defining them here too would not compile next to them.
 */
#include <linux/types.h>

static inline u16 le16_to_cpu(__le16 v)
{
	return le16toh(v);
}
static inline u32 le32_to_cpu(__le32 v)
{
	return le32toh(v);
}
static inline u64 le64_to_cpu(__le64 v)
{
	return le64toh(v);
}
static inline __le16 cpu_to_le16(u16 v)
{
	return htole16(v);
}
static inline __le32 cpu_to_le32(u32 v)
{
	return htole32(v);
}
static inline __le64 cpu_to_le64(u64 v)
{
	return htole64(v);
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define min_t(type, a, b)              \
	({                             \
		type __a = (a);        \
		type __b = (b);        \
		__a < __b ? __a : __b; \
	})
#define max_t(type, a, b)              \
	({                             \
		type __a = (a);        \
		type __b = (b);        \
		__a > __b ? __a : __b; \
	})

#define DIV_ROUND_UP(n, d) (((n) + (d)-1) / (d))
#define round_up(x, y) ((((x) + (y)-1) / (y)) * (y))
#define round_down(x, y) (((x) / (y)) * (y))
#define IS_POWER_OF_2(n) ((n) != 0 && (((n) & ((n)-1)) == 0))

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#endif /* TFS_LIB_TYPES_H */
