// SPDX-License-Identifier: GPL-2.0
/* tinyfs show-super: print a device's superblock. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tools/cmd.h"
#include "tools/util.h"

#define USAGE "[-f FIELDS|all] [-l] [--json] [--fault SPEC] DEV"

static void show_super_usage(FILE *f)
{
	fprintf(f, "usage: tinyfs show-super " USAGE "\n"
		   "Prints the superblock of DEV (an image file or a block device).\n"
		   "\n"
		   "  -f, --fields FIELDS  comma-separated fields to print: members, journal,\n"
		   "                       clean, or all (default: members)\n"
		   "  -l, --layout         also print the layout (where the copies are)\n"
		   "      --json           print one JSON object instead of text\n"
		   "      --fault SPEC     arm fault rules (see TFS_FAULTS in the README)\n"
		   "  -h, --help           this text\n"
		   "\n"
		   "Exit status: 0, 1 when DEV holds no valid superblock, 2 on usage errors.\n");
}

/* "members,journal" or "all" to a bitmask of field types. */
static int parse_fields(const char *s, unsigned *ret)
{
	char buf[256];
	char *save = NULL;

	if (!strcmp(s, "all")) {
		*ret = ~0U;
		return 0;
	}
	if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return -1;
	*ret = 0;
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int t = tfs_sb_field_type_parse(w);

		if (t < 0) {
			fprintf(stderr,
				"tinyfs show-super: unknown field \"%s\" (members, journal, clean, all)\n",
				w);
			return -1;
		}
		*ret |= 1U << t;
	}
	return *ret ? 0 : -1;
}

static int cmd_show_super(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "fields", required_argument, NULL, 'f' },
		{ "layout", no_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "fault", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tfs_sb_to_text_opts opts = { .fields = 1U << TFS_SB_FIELD_members };
	struct tfs_sb_handle h = { 0 };
	struct printbuf out = PRINTBUF, err = PRINTBUF;
	bool json = false;
	int c, ret;

	while ((c = getopt_long(argc, argv, "f:ljh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (parse_fields(optarg, &opts.fields)) {
				fprintf(stderr, "tinyfs show-super: bad -f \"%s\"\n", optarg);
				return TFS_EXIT_USAGE;
			}
			break;
		case 'l':
			opts.layout = true;
			break;
		case 'j':
			json = true;
			break;
		case 'F':
			if (tfs_faults_from_opt("tinyfs show-super", optarg))
				return TFS_EXIT_USAGE;
			break;
		case 'h':
			show_super_usage(stdout);
			return TFS_EXIT_OK;
		default:
			show_super_usage(stderr);
			return TFS_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "tinyfs show-super: %s\n",
			optind == argc ? "no device given" : "one device only");
		show_super_usage(stderr);
		return TFS_EXIT_USAGE;
	}

	ret = tfs_sb_open(argv[optind], TFS_BDEV_RDONLY, &h, &err);
	if (ret) {
		tfs_print_err("tinyfs show-super", &err);
		printbuf_exit(&err);
		return TFS_EXIT_FAILURE;
	}
	if (json)
		tfs_sb_to_json(&out, h.sb, &opts);
	else
		tfs_sb_to_text(&out, h.sb, &opts);
	ret = tfs_print_out("tinyfs show-super", &out);
	printbuf_exit(&out);
	printbuf_exit(&err);
	tfs_sb_exit(&h);
	return ret ? TFS_EXIT_FAILURE : TFS_EXIT_OK;
}

TFS_CMD(show_super, "show-super", USAGE, "print a device's superblock", cmd_show_super);
