// SPDX-License-Identifier: GPL-2.0
/*
 * tinyfs fsck: checks a filesystem (fs/fsck.h) and, with -y, repairs it.
 * Exit codes as e2fsck's, not the other subcommands' (fsck(8) reads them).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fs/fs.h"
#include "fs/fsck.h"
#include "lib/errcode.h"
#include "tools/cmd.h"

#define USAGE "[-n|-y] [-v] DEV..."

#define FSCK_EXIT_CLEAN TFS_FSCK_EXIT_CLEAN
#define FSCK_EXIT_OPERATIONAL TFS_FSCK_EXIT_OPERATIONAL

static void fsck_usage(FILE *f)
{
	fprintf(f, "usage: tinyfs fsck " USAGE "\n"
		   "Checks the filesystem on DEV... (all its members): every btree node and key,\n"
		   "dirents, link counts, reachability, extents, orphans.  One line per problem.\n"
		   "\n"
		   "  -n  check only, change nothing (the default): the filesystem is opened\n"
		   "      read-only; an unclean journal is replayed in memory only\n"
		   "  -y  repair what can be repaired safely, each repair a journaled transaction\n"
		   "  -a, -p  as -y (fsck(8)'s automatic mode)\n"
		   "  -f  accepted (the check is always full)\n"
		   "  -v  also print counts and pending orphans\n"
		   "\n"
		   "Exit status: 0 clean, 1 problems found and all fixed, 4 problems left\n"
		   "uncorrected, 8 usage or operational error (cannot open: mounted, missing,\n"
		   "unreadable).\n");
}

static int cmd_fsck(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tfs_fsck_opts o = { 0 };
	struct tfs_fsck_result res;
	struct tfs_fs_opts opts;
	struct tfs_fs *fs;
	bool no = false;
	int c, ret, ret2;

	while ((c = getopt_long(argc, argv, "nyapfvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			no = true;
			break;
		case 'y':
		case 'a':
		case 'p':
			o.repair = true;
			break;
		case 'f':
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			fsck_usage(stdout);
			return FSCK_EXIT_CLEAN;
		default:
			fsck_usage(stderr);
			return FSCK_EXIT_OPERATIONAL;
		}
	}
	if (no && o.repair) {
		fprintf(stderr, "tinyfs fsck: -n and -y together\n");
		return FSCK_EXIT_OPERATIONAL;
	}
	if (optind >= argc) {
		fprintf(stderr, "tinyfs fsck: no device\n");
		fsck_usage(stderr);
		return FSCK_EXIT_OPERATIONAL;
	}
	tfs_fs_opts_default(&opts);
	opts.read_only = !o.repair;
	opts.verbose = o.verbose;
	/* A mounted filesystem holds its members' locks: the open fails with EBUSY. */
	ret = tfs_fs_open((const char *const *)argv + optind, (unsigned)(argc - optind), &opts,
			  &fs);
	if (ret) {
		/* Open printed where it failed. */
		fprintf(stderr, "tinyfs fsck: %s: cannot open the filesystem: %s\n", argv[optind],
			tfs_err_str(ret));
		return FSCK_EXIT_OPERATIONAL;
	}
	ret = tfs_fsck(fs, &o, &res);
	ret2 = tfs_fs_stop(fs);
	if (ret) {
		fprintf(stderr, "tinyfs fsck: %s: the check could not finish: %s\n", argv[optind],
			tfs_err_str(ret));
		return FSCK_EXIT_OPERATIONAL;
	}
	if (ret2) {
		fprintf(stderr, "tinyfs fsck: %s: closing the filesystem: %s\n", argv[optind],
			tfs_err_str(ret2));
		return FSCK_EXIT_OPERATIONAL;
	}
	if (res.left)
		fprintf(stderr, "tinyfs fsck: %s: %u problem(s), %u left uncorrected\n",
			argv[optind], res.found, res.left);
	else if (res.found)
		fprintf(stderr, "tinyfs fsck: %s: %u problem(s), all fixed\n", argv[optind],
			res.found);
	else if (o.verbose)
		fprintf(stderr, "tinyfs fsck: %s: clean\n", argv[optind]);
	return tfs_fsck_exit_code(&res);
}

TFS_CMD(fsck, "fsck", USAGE, "check (and with -y repair) a filesystem", cmd_fsck);
