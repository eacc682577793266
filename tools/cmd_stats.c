// SPDX-License-Identifier: GPL-2.0
/*
 * tinyfs stats: a mounted filesystem's live statistics, from its daemon's
 * control socket (fuse/ctl.h says where it is and what it answers).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/ctl.h"
#include "lib/printbuf.h"
#include "tools/cmd.h"
#include "tools/util.h"

#define USAGE "MOUNTPOINT [journal|btree_cache|key_cache|shrinkers|alloc|devices|fuse|all] [--json]"

static void stats_usage(FILE *f)
{
	fprintf(f,
		"usage: tinyfs stats " USAGE "\n"
		"Prints the running filesystem's statistics, asked from the daemon that\n"
		"serves MOUNTPOINT (through its control socket, $TFS_RUN_DIR or /run/tinyfs).\n"
		"\n"
		"Sections: journal (state and why reservations waited), btree_cache,\n"
		"key_cache, shrinkers (scans), alloc (space per member), devices (I/O and\n"
		"errors per member), fuse (the daemon: requests, errors, lookups, open\n"
		"files), all (default: everything).\n"
		"\n"
		"      --json  one JSON object: {\"mountpoint\", \"source\", \"section\", \"stats\"}\n"
		"  -h, --help  this text\n"
		"\n"
		"Exit status: 0, 1 when MOUNTPOINT is no tinyfs mount or its daemon does\n"
		"not answer, 2 on usage errors.\n");
}

static int cmd_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *prog = "tinyfs stats", *section = "all";
	struct printbuf req = PRINTBUF, reply = PRINTBUF, err = PRINTBUF, out = PRINTBUF;
	struct tfs_mountinfo m = { 0 };
	bool json = false;
	char *path = NULL;
	int c, ret = TFS_EXIT_USAGE;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			stats_usage(stdout);
			return TFS_EXIT_OK;
		default:
			stats_usage(stderr);
			return TFS_EXIT_USAGE;
		}
	}
	if (optind == argc || argc - optind > 2) {
		fprintf(stderr, "%s: %s\n", prog,
			optind == argc ? "no mount point given" : "too many arguments");
		stats_usage(stderr);
		return TFS_EXIT_USAGE;
	}
	if (argc - optind == 2) {
		section = argv[optind + 1];
		if (tfs_ctl_section_parse(section) < 0) {
			fprintf(stderr, "%s: unknown section \"%s\"\n", prog, section);
			stats_usage(stderr);
			return TFS_EXIT_USAGE;
		}
	}

	ret = TFS_EXIT_FAILURE;
	path = realpath(argv[optind], NULL);
	if (!path) {
		fprintf(stderr, "%s: %s: %s%s\n", prog, argv[optind], strerror(errno),
			errno == ENOTCONN ? " (the daemon is gone)" : "");
		goto out;
	}
	c = tfs_mountinfo_at(path, &m);
	if (c < 0) {
		fprintf(stderr, "%s: reading /proc/self/mountinfo: %s\n", prog, strerror(-c));
		goto out;
	}
	if (!c) {
		fprintf(stderr, "%s: %s is not a mount point\n", prog, path);
		goto out;
	}
	if (strcmp(m.fstype, "fuse.tinyfs")) {
		fprintf(stderr, "%s: %s is not a tinyfs mount (%s from %s)\n", prog, path, m.fstype,
			m.source);
		goto out;
	}
	prt_printf(&req, "stats %s", section);
	if (tfs_ctl_request(m.dev, printbuf_str(&req), &reply, &err)) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, printbuf_str(&err));
		goto out;
	}
	if (json) {
		prt_str(&out, "{\"mountpoint\":");
		prt_json_str(&out, path);
		prt_str(&out, ",\"source\":");
		prt_json_str(&out, m.source);
		prt_str(&out, ",\"section\":");
		prt_json_str(&out, section);
		prt_str(&out, ",\"stats\":");
		tfs_text_to_json(&out, printbuf_str(&reply));
		prt_str(&out, "}\n");
	} else {
		prt_str(&out, printbuf_str(&reply));
	}
	if (out.allocation_failure) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	fputs(printbuf_str(&out), stdout);
	ret = fflush(stdout) ? TFS_EXIT_FAILURE : TFS_EXIT_OK;
out:
	free(path);
	tfs_mountinfo_exit(&m);
	printbuf_exit(&req);
	printbuf_exit(&reply);
	printbuf_exit(&err);
	printbuf_exit(&out);
	return ret;
}

TFS_CMD(stats, "stats", USAGE, "live statistics of a mounted filesystem", cmd_stats);
