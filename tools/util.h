/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TOOLS_UTIL_H
#define TFS_TOOLS_UTIL_H

/*
 * Helpers shared by the command-line tools: size parsing, fault options,
 * and the exit statuses every tool uses (0 ok, 1 failure, 2 usage).
 */

#include <stdbool.h>

#include "lib/types.h"

#define TFS_EXIT_OK 0
#define TFS_EXIT_FAILURE 1
#define TFS_EXIT_USAGE 2

/*
 * Parses a size: a decimal number with an optional unit, k/K/KiB = 1024,
 * M/MiB, G/GiB, T/TiB (powers of 1024), kB/MB/GB/TB (powers of 1000), B.
 * Returns 0, or -EINVAL for anything else or an overflow.
 */
int tfs_parse_size(const char *s, u64 *ret);

/* Parses a decimal unsigned number in [min, max].  0 or -EINVAL. */
int tfs_parse_uint(const char *s, u64 min, u64 max, u64 *ret);

/*
 * Applies a --fault SPEC (lib/fault_point.h syntax); prints
 * "PROG: --fault: reason" and returns the code when the spec is bad.
 */
int tfs_tool_fault_opt(const char *prog, const char *spec);

#endif /* TFS_TOOLS_UTIL_H */
