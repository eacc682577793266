// SPDX-License-Identifier: GPL-2.0
/*
 * tinyfs: the multi-command tool.  Subcommands register themselves (see
 * tools/cmd.h); this file only finds and runs them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fault_point.h"
#include "tools/cmd.h"
#include "tools/util.h"

extern const struct tfs_cmd *__start_tfs_cmds[] __attribute__((weak));
extern const struct tfs_cmd *__stop_tfs_cmds[] __attribute__((weak));

static int cmd_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct tfs_cmd *const *)a)->name,
		      (*(const struct tfs_cmd *const *)b)->name);
}

static void usage(FILE *f)
{
	size_t nr = (size_t)(__stop_tfs_cmds - __start_tfs_cmds);
	const struct tfs_cmd **cmds = calloc(nr ?: 1, sizeof(*cmds));

	fprintf(f, "usage: tinyfs COMMAND [OPTIONS] [ARGS]\n"
		   "       tinyfs --version\n\ncommands:\n");
	if (cmds) {
		memcpy(cmds, __start_tfs_cmds, nr * sizeof(*cmds));
		qsort(cmds, nr, sizeof(*cmds), cmd_cmp);
		for (size_t i = 0; i < nr; i++)
			fprintf(f, "  %-14s %s\n      tinyfs %s %s\n", cmds[i]->name, cmds[i]->help,
				cmds[i]->name, cmds[i]->usage);
	}
	free(cmds);
	fprintf(f, "\n`tinyfs COMMAND --help` describes a command's options.\n"
		   "Fault rules come from $TFS_FAULTS and each command's --fault SPEC.\n");
}

int main(int argc, char **argv)
{
	if (tfs_faults_from_env())
		return TFS_EXIT_USAGE;
	if (argc < 2) {
		usage(stderr);
		return TFS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return TFS_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		tfs_print_version("tinyfs");
		return TFS_EXIT_OK;
	}
	for (const struct tfs_cmd **c = __start_tfs_cmds; c < __stop_tfs_cmds; c++)
		if (!strcmp((*c)->name, argv[1])) {
			static char name[64];

			/* getopt's messages name argv[0]: "tinyfs show-super: ...". */
			snprintf(name, sizeof(name), "tinyfs %s", (*c)->name);
			argv[1] = name;
			return (*c)->fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "tinyfs: unknown command \"%s\"; `tinyfs --help` lists them\n", argv[1]);
	return TFS_EXIT_USAGE;
}
