// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the command-line tools. */
#include "tools/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/printbuf.h"
#include "super/super_format.h"

#ifndef TFS_VERSION
#define TFS_VERSION "unknown"
#endif

void tfs_print_version(const char *prog)
{
	printf("%s " TFS_VERSION " (format version %u)\n", prog, TFS_SB_VERSION_CURRENT);
}

void tfs_print_err(const char *prog, const struct printbuf *err)
{
	const char *p = printbuf_str(err);

	while (*p) {
		size_t len = strcspn(p, "\n");

		fprintf(stderr, "%s: %.*s\n", prog, (int)len, p);
		p += len + (p[len] == '\n');
	}
	if (err->allocation_failure)
		fprintf(stderr, "%s: (out of memory: the message above is cut short)\n", prog);
}

int tfs_print_out(const char *prog, const struct printbuf *out)
{
	if (out->allocation_failure) {
		fprintf(stderr, "%s: out of memory building the output\n", prog);
		return -ENOMEM;
	}
	if (fputs(printbuf_str(out), stdout) == EOF || fflush(stdout)) {
		fprintf(stderr, "%s: writing the output failed: %s\n", prog, strerror(errno));
		return -EIO;
	}
	return 0;
}

int tfs_parse_uint(const char *s, u64 min, u64 max, u64 *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

int tfs_parse_size(const char *s, u64 *ret)
{
	/* Matched without regard to case: "64m", "64M" and "64MiB" are one size. */
	static const struct {
		const char *suffix;
		u64 mult;
	} units[] = {
		{ "", 1 },
		{ "b", 1 },
		{ "k", 1ULL << 10 },
		{ "kib", 1ULL << 10 },
		{ "m", 1ULL << 20 },
		{ "mib", 1ULL << 20 },
		{ "g", 1ULL << 30 },
		{ "gib", 1ULL << 30 },
		{ "t", 1ULL << 40 },
		{ "tib", 1ULL << 40 },
		{ "p", 1ULL << 50 },
		{ "pib", 1ULL << 50 },
		{ "e", 1ULL << 60 },
		{ "eib", 1ULL << 60 },
		{ "kb", 1000ULL },
		{ "mb", 1000ULL * 1000 },
		{ "gb", 1000ULL * 1000 * 1000 },
		{ "tb", 1000ULL * 1000 * 1000 * 1000 },
		{ "pb", 1000ULL * 1000 * 1000 * 1000 * 1000 },
		{ "eb", 1000ULL * 1000 * 1000 * 1000 * 1000 * 1000 },
	};
	char *end;
	unsigned long long v;
	bool overflow;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	overflow = errno == ERANGE;
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(end, units[i].suffix)) {
			if (overflow || v > UINT64_MAX / units[i].mult)
				return -ERANGE;
			*ret = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}

int tfs_size_opt_err(const char *prog, const char *opt, const char *val, int err, u64 max)
{
	struct printbuf out = PRINTBUF;

	if (err == -ERANGE || !err) {
		prt_printf(&out, "%s: --%s \"%s\": too large (at most ", prog, opt, val);
		prt_units_u64(&out, max);
		prt_printf(&out, ", %llu bytes)\n", (unsigned long long)max);
	} else {
		prt_printf(&out,
			   "%s: --%s \"%s\": not a size: a number with an optional unit, "
			   "k, M, G, T, P, E or KiB ... EiB (powers of 1024), kB ... EB (powers of "
			   "1000) or B; case does not matter\n",
			   prog, opt, val);
	}
	fputs(out.allocation_failure ? "out of memory\n" : printbuf_str(&out), stderr);
	printbuf_exit(&out);
	return TFS_EXIT_USAGE;
}
