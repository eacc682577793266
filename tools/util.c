// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the command-line tools. */
#include "tools/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fault_point.h"
#include "lib/printbuf.h"

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
	static const struct {
		const char *suffix;
		u64 mult;
	} units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "k", 1ULL << 10 },
		{ "K", 1ULL << 10 },
		{ "KiB", 1ULL << 10 },
		{ "M", 1ULL << 20 },
		{ "MiB", 1ULL << 20 },
		{ "G", 1ULL << 30 },
		{ "GiB", 1ULL << 30 },
		{ "T", 1ULL << 40 },
		{ "TiB", 1ULL << 40 },
		{ "kB", 1000ULL },
		{ "KB", 1000ULL },
		{ "MB", 1000ULL * 1000 },
		{ "GB", 1000ULL * 1000 * 1000 },
		{ "TB", 1000ULL * 1000 * 1000 * 1000 },
	};
	char *end;
	unsigned long long v;

	if (!s || !*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].suffix)) {
			if (v > UINT64_MAX / units[i].mult)
				return -EINVAL;
			*ret = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}

int tfs_tool_fault_opt(const char *prog, const char *spec)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_faults_parse(spec, &err);

	if (ret)
		fprintf(stderr, "%s: --fault: %s\n", prog, printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}
