/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TOOLS_CMD_H
#define TFS_TOOLS_CMD_H

/*
 * Subcommands of `tinyfs`.  Each lives in its own tools/cmd_NAME.c and
 * registers itself with TFS_CMD(); tools/tinyfs.c finds every registered
 * command through the "tfs_cmds" linker section, so adding one is a new file
 * and one line in tools/meson.build (tinyfs_cmd_sources), nothing else.
 *
 * fn gets argv with argv[0] the subcommand's name and returns the exit
 * status: 0, 1 (failure, reason printed), 2 (usage, message printed).
 */

struct tfs_cmd {
	const char *name;  /* "show-super" */
	const char *usage; /* "[-f FIELDS|all] [-l] [--json] DEV" */
	const char *help;  /* one line */
	int (*fn)(int argc, char **argv);
};

#define TFS_CMD(_id, _name, _usage, _help, _fn)        \
	static const struct tfs_cmd tfs_cmd_##_id = {  \
		.name = _name,                         \
		.usage = _usage,                       \
		.help = _help,                         \
		.fn = _fn,                             \
	};                                             \
	static const struct tfs_cmd *tfs_cmd_ptr_##_id \
		__attribute__((section("tfs_cmds"), used)) = &tfs_cmd_##_id

#endif /* TFS_TOOLS_CMD_H */
