// SPDX-License-Identifier: GPL-2.0
/*
 * mount.tinyfs: the helper mount(8) runs for `mount -t tinyfs` (and, as
 * mount.fuse.tinyfs, for `mount -t fuse.tinyfs` and fstab lines of that
 * type).  mount(8) calls it as
 *
 *	mount.tinyfs DEV[:DEV...] MOUNTPOINT [-sfnv] [-o OPTIONS] [-t TYPE]
 *
 * It does what `tinyfs mount -o OPTIONS DEV MOUNTPOINT` does.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fuse/tfs_fuse.h"
#include "lib/fault_point.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mount.tinyfs DEV[:DEV...] MOUNTPOINT [-o OPTIONS] [-f] [-n] [-s] [-v] [-F]\n"
		"Mounts a tinyfs filesystem; run by mount(8) for -t tinyfs and -t fuse.tinyfs.\n"
		"  -o OPTIONS  mount options (below)\n"
		"  -f          fake: check the arguments, mount nothing\n"
		"  -n, -s      accepted for mount(8) (no mtab; sloppy)\n"
		"  -v          say what is mounted\n"
		"  -F          stay in the foreground (serve until unmounted)\n"
		"  -t TYPE     accepted (mount(8) passes fuse.tinyfs)\n"
		"  -h, --help  this text\n\n");
	tfs_mount_options_help(f);
}

int main(int argc, char **argv)
{
	const char *prog = "mount.tinyfs";
	struct tfs_mount_opts o;
	bool fake = false;
	int c, ret;

	if (tfs_faults_from_env())
		return 2;
	tfs_mount_opts_init(&o);
	/* mount(8) passes short options only; --help is for a user reading a message. */
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};

	while ((c = getopt_long(argc, argv, "o:snfvFt:N:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (tfs_mount_opts_parse(&o, prog, optarg)) {
				tfs_mount_opts_exit(&o);
				return 2;
			}
			break;
		case 'f':
			fake = true;
			break;
		case 'v':
			o.fs.verbose = true;
			break;
		case 'F':
			o.foreground = true;
			break;
		case 's':
		case 'n':
		case 't':
			break;
		case 'N':
			fprintf(stderr, "%s: -N (another mount namespace) is not supported\n",
				prog);
			tfs_mount_opts_exit(&o);
			return 2;
		case 'h':
			usage(stdout);
			tfs_mount_opts_exit(&o);
			return 0;
		default:
			usage(stderr);
			tfs_mount_opts_exit(&o);
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "%s: expected DEV and MOUNTPOINT\n", prog);
		usage(stderr);
		tfs_mount_opts_exit(&o);
		return 2;
	}
	if (tfs_mount_opts_targets(&o, prog, argv[optind], argv[optind + 1])) {
		tfs_mount_opts_exit(&o);
		return 1;
	}
	ret = fake ? 0 : tfs_mount_run(&o, prog);
	tfs_mount_opts_exit(&o);
	return ret;
}
