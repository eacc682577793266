// SPDX-License-Identifier: GPL-2.0
/* tinyfs list: print the keys of a filesystem's btrees (like `bcachefs list`). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree.h"
#include "fs/fs.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "tools/cmd.h"
#include "tools/util.h"

#define USAGE "[--btree ID] [--start POS] [--end POS] [--fault SPEC] DEV..."

static void list_usage(FILE *f)
{
	fprintf(f, "usage: tinyfs list " USAGE "\n"
		   "Opens the filesystem on its member devices DEV read-only (the journal is\n"
		   "replayed in memory; nothing is written) and prints every key of the btrees,\n"
		   "one per line, in order: type, position, size and value.\n"
		   "\n"
		   "      --btree ID       only this btree (inodes, dirents, extents, xattrs,\n"
		   "                       alloc, orphans); default: all, each under a heading\n"
		   "      --start POS      from POS (INODE:OFFSET, INODE, POS_MIN or POS_MAX)\n"
		   "      --end POS        up to POS, inclusive\n"
		   "      --fault SPEC     arm fault rules (see TFS_FAULTS in the README)\n"
		   "  -h, --help           this text\n"
		   "\n"
		   "Exit status: 0; 1 when the filesystem cannot be opened or a node cannot be\n"
		   "read (the reason is printed); 2 on usage errors.\n");
}

static int list_btree(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bpos start,
		      struct tfs_bpos end, struct printbuf *out)
{
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	int ret;

	tfs_btree_iter_init(&iter, fs, id, start, end);
	for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
	     ret = tfs_btree_iter_next(&iter, &k)) {
		tfs_bkey_to_text(out, k);
		prt_newline(out);
		/* Print as we go: a big tree is not held in memory as text. */
		if (out->pos > 1 << 16) {
			fputs(printbuf_str(out), stdout);
			printbuf_reset(out);
		}
	}
	tfs_btree_iter_exit(&iter);
	return ret;
}

static int cmd_list(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "btree", required_argument, NULL, 'b' },
		{ "start", required_argument, NULL, 's' },
		{ "end", required_argument, NULL, 'e' },
		{ "fault", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tfs_bpos start = TFS_POS_MIN, end = TFS_POS_MAX;
	struct printbuf out = PRINTBUF;
	struct tfs_fs_opts opts;
	struct tfs_fs *fs = NULL;
	int c, ret, btree = -1, status = TFS_EXIT_OK;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			btree = tfs_btree_id_parse(optarg);
			if (btree < 0) {
				fprintf(stderr, "tinyfs list: unknown btree \"%s\"\n", optarg);
				return TFS_EXIT_USAGE;
			}
			break;
		case 's':
		case 'e':
			if (tfs_bpos_parse(optarg, c == 's' ? &start : &end)) {
				fprintf(stderr,
					"tinyfs list: bad --%s \"%s\" (INODE:OFFSET, INODE, POS_MIN "
					"or POS_MAX)\n",
					c == 's' ? "start" : "end", optarg);
				return TFS_EXIT_USAGE;
			}
			break;
		case 'F':
			if (tfs_faults_from_opt("tinyfs list", optarg))
				return TFS_EXIT_USAGE;
			break;
		case 'h':
			list_usage(stdout);
			return TFS_EXIT_OK;
		default:
			list_usage(stderr);
			return TFS_EXIT_USAGE;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "tinyfs list: no device given\n");
		list_usage(stderr);
		return TFS_EXIT_USAGE;
	}
	if (tfs_bpos_cmp(start, end) > 0) {
		fprintf(stderr, "tinyfs list: --start is after --end\n");
		return TFS_EXIT_USAGE;
	}

	tfs_fs_opts_default(&opts);
	opts.read_only = true;
	ret = tfs_fs_open((const char *const *)argv + optind, argc - optind, &opts, &fs);
	if (ret) {
		/* Open printed where it failed. */
		fprintf(stderr, "tinyfs list: cannot open the filesystem: %s\n", tfs_err_str(ret));
		return TFS_EXIT_FAILURE;
	}
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		if (btree >= 0 && id != (unsigned)btree)
			continue;
		if (btree < 0)
			prt_printf(&out, "btree %s:\n", tfs_btree_id_str(id));
		ret = list_btree(fs, id, start, end, &out);
		if (ret) {
			fputs(printbuf_str(&out), stdout);
			printbuf_reset(&out);
			fprintf(stderr, "tinyfs list: btree %s: %s\n", tfs_btree_id_str(id),
				tfs_err_str(ret));
			status = TFS_EXIT_FAILURE;
		}
	}
	fputs(printbuf_str(&out), stdout);
	if (out.allocation_failure || fflush(stdout)) {
		fprintf(stderr, "tinyfs list: writing the output failed\n");
		status = TFS_EXIT_FAILURE;
	}
	ret = tfs_fs_stop(fs);
	if (ret && !status)
		status = TFS_EXIT_FAILURE;
	printbuf_exit(&out);
	return status;
}

TFS_CMD(list, "list", USAGE, "print the keys of a filesystem's btrees", cmd_list);
