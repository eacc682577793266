/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TOOLS_UTIL_H
#define TFS_TOOLS_UTIL_H

/*
 * Helpers shared by the command-line tools: size parsing,
 * and the exit statuses every tool uses (0 ok, 1 failure, 2 usage).
 */

#include <stdbool.h>

#include "lib/types.h"

#define TFS_EXIT_OK 0
#define TFS_EXIT_FAILURE 1
#define TFS_EXIT_USAGE 2

/*
 * Parses a size: a decimal number with an optional unit, matched without
 * regard to case: k/KiB = 1024, M/MiB, G/GiB, T/TiB, P/PiB, E/EiB (powers of
 * 1024), kB/MB/GB/TB/PB/EB (powers of 1000), B.  Returns 0, -ERANGE when the
 * value does not fit in 64 bits, or -EINVAL for anything else.
 */
int tfs_parse_size(const char *s, u64 *ret);

/*
 * Prints why option --opt's value val was refused: "too large (at most
 * MAX)" when err is -ERANGE or 0 (parsed, but above max), else "not a size"
 * with the accepted forms.  Returns TFS_EXIT_USAGE.
 */
int tfs_size_opt_err(const char *prog, const char *opt, const char *val, int err, u64 max);

struct printbuf;

/*
 * Prints the message in err on stderr, every line prefixed "prog: ";
 * nothing when err is empty (the failure was reported where it happened).
 */
void tfs_print_err(const char *prog, const struct printbuf *err);

/*
 * Writes out's text to stdout, whole or not at all: when building it ran out
 * of memory nothing is written and "out of memory" is said instead.  Returns
 * 0, -ENOMEM, or -EIO when writing failed (said too).
 */
int tfs_print_out(const char *prog, const struct printbuf *out);

/* Prints "PROG VERSION (format version N)" on stdout: --version. */
void tfs_print_version(const char *prog);

/* Parses a decimal unsigned number in [min, max].  0 or -EINVAL. */
int tfs_parse_uint(const char *s, u64 min, u64 max, u64 *ret);

#endif /* TFS_TOOLS_UTIL_H */
