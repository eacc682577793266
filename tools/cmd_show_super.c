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

#define USAGE "[-f FIELDS|all] [-l] [--json] [--copy N|--backup] [-F] [--fault SPEC] DEV"

static void show_super_usage(FILE *f)
{
	fprintf(f, "usage: tinyfs show-super " USAGE "\n"
		   "Prints the superblock of DEV (an image file or a block device): the newest\n"
		   "valid copy, or the copy asked for.\n"
		   "\n"
		   "  -f, --fields FIELDS  comma-separated fields to print: members, journal,\n"
		   "                       clean, or all (default: members)\n"
		   "  -l, --layout         also print the layout: where the copies are, and\n"
		   "                       whether each is valid (its seq) or why not\n"
		   "      --json           print one JSON object instead of text\n"
		   "      --copy N         print copy N of the layout (0: the primary)\n"
		   "      --backup         print the backup copy (--copy 1)\n"
		   "  -F, --force          print a copy that fails validation anyway, after the\n"
		   "                       reason (the primary when no copy is valid); exit 1\n"
		   "      --fault SPEC     arm fault rules (see TFS_FAULTS in the README)\n"
		   "  -h, --help           this text\n"
		   "\n"
		   "Exit status: 0, 1 when the copy shown is not valid (or none is), 2 on usage\n"
		   "errors.\n");
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

enum {
	OPT_FAULT = 256,
	OPT_COPY,
	OPT_BACKUP,
};

static int cmd_show_super(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "fields", required_argument, NULL, 'f' },
		{ "layout", no_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "copy", required_argument, NULL, OPT_COPY },
		{ "backup", no_argument, NULL, OPT_BACKUP },
		{ "force", no_argument, NULL, 'F' },
		{ "fault", required_argument, NULL, OPT_FAULT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tfs_sb_to_text_opts opts = { .fields = 1U << TFS_SB_FIELD_members };
	struct tfs_sb_handle h = { 0 }, forced = { 0 };
	struct tfs_bdev *bdev = NULL;
	const struct tfs_sb *shown = NULL;
	struct printbuf out = PRINTBUF, err = PRINTBUF;
	bool json = false, force = false;
	long copy = -1;
	int c, ret, status = TFS_EXIT_FAILURE;
	u64 v;

	while ((c = getopt_long(argc, argv, "f:ljFh", longopts, NULL)) != -1) {
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
		case OPT_COPY:
			if (tfs_parse_uint(optarg, 0, TFS_SB_LAYOUT_MAX_COPIES - 1, &v)) {
				fprintf(stderr,
					"tinyfs show-super: --copy \"%s\": a copy number, 0 to %u\n",
					optarg, TFS_SB_LAYOUT_MAX_COPIES - 1);
				return TFS_EXIT_USAGE;
			}
			copy = (long)v;
			break;
		case OPT_BACKUP:
			copy = 1;
			break;
		case 'F':
			force = true;
			break;
		case OPT_FAULT:
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

	/* tfs_bdev_open() says why it failed. */
	if (tfs_bdev_open(argv[optind], TFS_BDEV_RDONLY, &bdev))
		return TFS_EXIT_FAILURE;
	if (copy >= 0) {
		/* One copy, as it is: no choosing among copies, no statuses. */
		ret = tfs_sb_read_copy(bdev, (unsigned)copy, force, &h, &err);
		shown = h.sb;
		opts.shown_offset = h.read_offset;
	} else {
		ret = tfs_sb_read(bdev, &h, &err);
		opts.copies = h.copies;
		opts.nr_copies = h.nr_copies;
		shown = h.sb;
		opts.shown_offset = h.read_offset;
		if (ret && force && h.nr_copies) {
			/* No valid copy: the primary as it is, after every reason. */
			struct printbuf again = PRINTBUF;

			tfs_sb_read_copy(bdev, 0, true, &forced, &again);
			printbuf_exit(&again);
			shown = forced.sb;
			opts.shown_offset = forced.read_offset;
		}
	}
	tfs_print_err("tinyfs show-super", &err);
	if (shown) {
		opts.device = argv[optind];
		if (json)
			tfs_sb_to_json(&out, shown, &opts);
		else
			tfs_sb_to_text(&out, shown, &opts);
		if (!tfs_print_out("tinyfs show-super", &out) && !ret)
			status = TFS_EXIT_OK;
	}
	printbuf_exit(&out);
	printbuf_exit(&err);
	tfs_sb_exit(&forced);
	tfs_sb_exit(&h);
	tfs_bdev_close(bdev);
	return status;
}

TFS_CMD(show_super, "show-super", USAGE, "print a device's superblock", cmd_show_super);
