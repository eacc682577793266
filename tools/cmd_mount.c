// SPDX-License-Identifier: GPL-2.0
/* tinyfs mount: mount a filesystem through the FUSE daemon (fuse/). */
#include <getopt.h>
#include <stdio.h>

#include "fuse/tfs_fuse.h"
#include "lib/fault_point.h"
#include "tools/cmd.h"
#include "tools/util.h"

#define USAGE "[-f] [-v] [-o OPTIONS] DEV[:DEV...] MOUNTPOINT"

static void mount_usage(FILE *f)
{
	fprintf(f, "usage: tinyfs mount " USAGE "\n"
		   "Mounts the tinyfs filesystem on DEV (image files or block devices; every\n"
		   "member, colon-separated) at MOUNTPOINT.  Returns once the mount is ready,\n"
		   "leaving the daemon in the background; unmount with `umount MOUNTPOINT`\n"
		   "(or `fusermount3 -u MOUNTPOINT`), which writes everything back.\n"
		   "\n"
		   "  -o, --options OPTS  mount options, comma-separated (may repeat)\n"
		   "  -f, --foreground    serve in the foreground until unmounted\n"
		   "  -v, --verbose       say what open, mount and stop do\n"
		   "      --fault SPEC    arm fault rules in the daemon (see TFS_FAULTS)\n"
		   "  -h, --help          this text\n"
		   "\n");
	tfs_mount_options_help(f);
	fprintf(f, "\nExit status: 0 mounted, 1 failure (reason printed), 2 usage.\n");
}

static int cmd_mount(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "options", required_argument, NULL, 'o' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "fault", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *prog = "tinyfs mount";
	struct tfs_mount_opts o;
	int c, ret = TFS_EXIT_USAGE;

	tfs_mount_opts_init(&o);
	while ((c = getopt_long(argc, argv, "o:fvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (tfs_mount_opts_parse(&o, prog, optarg))
				goto out;
			break;
		case 'f':
			o.foreground = true;
			break;
		case 'v':
			o.fs.verbose = true;
			break;
		case 'F':
			if (tfs_faults_from_opt(prog, optarg))
				goto out;
			break;
		case 'h':
			mount_usage(stdout);
			ret = TFS_EXIT_OK;
			goto out;
		default:
			mount_usage(stderr);
			goto out;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "%s: expected DEV[:DEV...] and MOUNTPOINT\n", prog);
		mount_usage(stderr);
		goto out;
	}
	ret = TFS_EXIT_FAILURE;
	if (tfs_mount_opts_targets(&o, prog, argv[optind], argv[optind + 1]))
		goto out;
	ret = tfs_mount_run(&o, prog);
out:
	tfs_mount_opts_exit(&o);
	return ret;
}

TFS_CMD(mount, "mount", USAGE, "mount a filesystem (FUSE)", cmd_mount);
