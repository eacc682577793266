// SPDX-License-Identifier: GPL-2.0
/* tinyfs list-journal: print the journal entries on a filesystem's members. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "tools/cmd.h"
#include "tools/journal_devs.h"
#include "tools/util.h"

#define USAGE "[--seq FROM..TO] [--fault SPEC] DEV..."

static void list_journal_usage(FILE *f)
{
	fprintf(f,
		"usage: tinyfs list-journal " USAGE "\n"
		"Reads the journal buckets of every member DEV given, validates each entry\n"
		"and prints them in seq order (seq, flags, sizes, sub-entries), after a\n"
		"summary: the range replay would use, untrusted and missing seqs.\n"
		"\n"
		"      --seq FROM..TO   only entries with FROM <= seq <= TO; FROM.. has no upper\n"
		"                       bound, ..TO no lower one, N alone is seq N; seqs start\n"
		"                       at 1, so 0 and an empty range are usage errors\n"
		"      --fault SPEC     arm fault rules (see TFS_FAULTS in the README)\n"
		"  -h, --help           this text\n"
		"\n"
		"Exit status: 0; 1 when a device cannot be read, a member of the filesystem\n"
		"that may hold entries is not given, or the journal has corrupt entries or\n"
		"gaps (still printed); 2 on usage errors.\n");
}

/* "A..B", "A..", "..B" or "A" (just A). */
static int parse_seq_range(const char *s, u64 *from, u64 *to)
{
	const char *dots = strstr(s, "..");
	char a[32] = "", b[32] = "";

	if (!dots) {
		/* Seqs start at 1; 0 would mean "no limit" below. */
		if (tfs_parse_uint(s, 1, UINT64_MAX, from))
			return -EINVAL;
		*to = *from;
		return 0;
	}
	if ((size_t)(dots - s) >= sizeof(a) || strlen(dots + 2) >= sizeof(b))
		return -EINVAL;
	memcpy(a, s, dots - s);
	memcpy(b, dots + 2, strlen(dots + 2));
	*from = 0;
	*to = 0;
	if ((*a && tfs_parse_uint(a, 0, UINT64_MAX, from)) ||
	    (*b && tfs_parse_uint(b, 1, UINT64_MAX, to)) || (!*a && !*b))
		return -EINVAL;
	return *to && *from > *to ? -EINVAL : 0;
}

static int cmd_list_journal(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seq", required_argument, NULL, 's' },
		{ "fault", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tfs_tool_journal t;
	struct tfs_journal_read *r = NULL;
	struct printbuf out = PRINTBUF, err = PRINTBUF;
	u64 from = 0, to = 0;
	int c, ret, status = TFS_EXIT_OK;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_seq_range(optarg, &from, &to)) {
				fprintf(stderr,
					"tinyfs list-journal: bad --seq \"%s\" (FROM..TO, FROM.. or "
					"..TO)\n",
					optarg);
				return TFS_EXIT_USAGE;
			}
			break;
		case 'F':
			if (tfs_faults_from_opt("tinyfs list-journal", optarg))
				return TFS_EXIT_USAGE;
			break;
		case 'h':
			list_journal_usage(stdout);
			return TFS_EXIT_OK;
		default:
			list_journal_usage(stderr);
			return TFS_EXIT_USAGE;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "tinyfs list-journal: no device given\n");
		list_journal_usage(stderr);
		return TFS_EXIT_USAGE;
	}

	ret = tfs_tool_journal_open(&t, argv + optind, argc - optind, false, &err);
	if (ret) {
		tfs_print_err("tinyfs list-journal", &err);
		status = TFS_EXIT_FAILURE;
		goto out;
	}
	/* What the given members hold is still shown: a partial journal, said so. */
	if (tfs_tool_journal_missing(&t, &err)) {
		prt_str(&err, " not given: the journal shown may be incomplete");
		tfs_print_err("tinyfs list-journal", &err);
		printbuf_reset(&err);
		status = TFS_EXIT_FAILURE;
	}
	ret = tfs_journal_read(t.devs, t.nr, &t.opts, &r, &err);
	if (ret && ret != -TFS_ERR_journal_empty && !r) {
		tfs_print_err("tinyfs list-journal", &err);
		status = TFS_EXIT_FAILURE;
		goto out;
	}
	if (ret == -TFS_ERR_journal_gap) {
		tfs_print_err("tinyfs list-journal", &err);
		status = TFS_EXIT_FAILURE;
	}
	if (r->nr_corrupt)
		status = TFS_EXIT_FAILURE;
	tfs_journal_read_to_text(&out, r, from, to);
	if (tfs_print_out("tinyfs list-journal", &out))
		status = TFS_EXIT_FAILURE;
out:
	tfs_journal_read_free(r);
	tfs_tool_journal_close(&t);
	printbuf_exit(&out);
	printbuf_exit(&err);
	return status;
}

TFS_CMD(list_journal, "list-journal", USAGE, "print the journal entries of a filesystem",
	cmd_list_journal);
