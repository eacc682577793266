// SPDX-License-Identifier: GPL-2.0
/*
 * tinyfs fsck: checks a filesystem (fs/fsck.h) and, with -y, repairs it.
 * Exit codes as e2fsck's, not the other subcommands' (fsck(8) reads them).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/fsck.h"
#include "fuse/ctl.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super_format.h"
#include "tools/cmd.h"

#define USAGE "[-n|-y] [-v] [--degraded|-o degraded] [--no-salvage] DEV..."

#define FSCK_EXIT_CLEAN TFS_FSCK_EXIT_CLEAN
#define FSCK_EXIT_OPERATIONAL TFS_FSCK_EXIT_OPERATIONAL
#define FSCK_EXIT_USAGE TFS_FSCK_EXIT_USAGE

/*
 * umount returns before the daemon has written everything back and let go
 * of the members; meanwhile its lock file in the run directory says
 * "stopping PID ..." (fuse/mount.c).  fsck right after an unmount waits for
 * that daemon, as a mount does, instead of failing on the exclusive open.
 *
 * A daemon still serving ("serving PID MOUNTPOINT") is not waited for: a
 * mounted filesystem is neither checked nor repaired, as e2fsck refuses to
 * repair one.  Its daemon writes it meanwhile (a repair computed from what
 * fsck read could undo a write-back that ran after the read), and it holds
 * the members exclusively anyway.  False, said, for a mounted member.
 */
static bool wait_for_stopping_daemons(char *const *devs, unsigned nr)
{
	struct printbuf dir = PRINTBUF;
	bool ok = true;

	tfs_ctl_run_dir(&dir);
	for (unsigned i = 0; i < nr && !dir.allocation_failure && ok; i++) {
		struct printbuf path = PRINTBUF;
		struct stat st;
		int fd = -1;

		if (stat(devs[i], &st))
			continue;
		prt_printf(&path, "%s/member-%llx-%llx.lock", printbuf_str(&dir),
			   (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
		if (!path.allocation_failure)
			fd = open(printbuf_str(&path), O_RDONLY | O_CLOEXEC);
		printbuf_exit(&path);
		if (fd < 0)
			continue;
		/* At most a minute: a daemon stuck writing back is then reported busy. */
		for (unsigned tries = 0; tries < 600; tries++) {
			char state[PATH_MAX + 64] = "";
			ssize_t n;

			if (!flock(fd, LOCK_SH | LOCK_NB)) {
				flock(fd, LOCK_UN);
				break;
			}
			if (errno != EWOULDBLOCK)
				break;
			n = pread(fd, state, sizeof(state) - 1, 0);
			state[n > 0 ? n : 0] = '\0';
			if (!strncmp(state, "serving ", 8)) {
				long pid = 0;
				int at = 0;

				state[strcspn(state, "\n")] = '\0';
				if (sscanf(state + 8, "%ld %n", &pid, &at) < 1)
					at = 0;
				fprintf(stderr,
					"tinyfs fsck: %s is mounted%s%s (tinyfs daemon %ld): a mounted "
					"filesystem is neither checked nor repaired; unmount it first\n",
					devs[i], at ? " on " : "", at ? state + 8 + at : "", pid);
				ok = false;
				break;
			}
			if (strncmp(state, "stopping ", 9))
				break;
			if (tries == 10)
				fprintf(stderr,
					"tinyfs fsck: waiting for the daemon that served %s to finish "
					"writing back\n",
					devs[i]);
			usleep(100 * 1000);
		}
		close(fd);
	}
	printbuf_exit(&dir);
	return ok;
}

/*
 * A node that cannot be read or trusted (named above, where it was read) is
 * an error of the filesystem, not of fsck: e2fsck's 4 (left uncorrected),
 * not 8.  A lost leaf never gets here (the open replaces it with an empty
 * one and the check reports it: tfs_fs_opts.replace_lost_leaves; a lost
 * interior node by an empty subtree, its range lost; any node of the alloc
 * btree too, its keys then rebuilt from the extents and nodes); what does
 * is a node fsck cannot replace that way (one whose copies are on a
 * missing member: away, not lost), so -y repairs nothing.  True, said,
 * when ret is such a failure.
 */
static bool damaged_node(int ret, const char *dev, bool repair, bool degraded, const char *what)
{
	if (!tfs_err_matches(ret, TFS_ERR_btree_node_invalid) &&
	    !tfs_err_matches(ret, TFS_ERR_btree_node_read))
		return false;
	fprintf(stderr,
		"tinyfs fsck: %s: a damaged btree node (above) %s; fsck cannot replace it%s "
		"(it replaces a lost node with an empty one, not a node with a copy on a "
		"missing member): mount read-only (-o ro) and copy out what reads%s\n",
		dev, what, repair ? ", nothing was repaired" : "",
		/* A node whose copies are all on missing members reads as unreadable. */
		degraded ? "; or, if its copies are on a missing member (above), give every member"
			 : "");
	return true;
}

static void fsck_usage(FILE *f)
{
	fprintf(f,
		"usage: tinyfs fsck " USAGE "\n"
		"Checks the filesystem on DEV... (all its members): every btree node and key,\n"
		"dirents, link counts, reachability, extents, orphans.  One line per problem.\n"
		"\n"
		"  -n  check only, change nothing (the default): the filesystem is opened\n"
		"      read-only; an unclean journal is replayed in memory only\n"
		"  -y  repair what can be repaired safely, each repair a journaled transaction\n"
		"  -a, -p  as -y (fsck(8)'s automatic mode)\n"
		"  -f  accepted (the check is always full)\n"
		"  -v  also print counts and pending orphans\n"
		"  --degraded, -o degraded\n"
		"      check (and with -y repair) with members missing, where replicas allow\n"
		"      (as mount -o degraded): every repair is of metadata the present members\n"
		"      hold; what is only on the missing ones (their copies of btree nodes, file\n"
		"      data) is not checked, and fsck says so per member.  Without it a\n"
		"      missing member is an operational error (8), named.  Through fsck(8)\n"
		"      use -o degraded (it passes -o on, not --degraded)\n"
		"\n"
		"A mounted filesystem is refused (as e2fsck refuses to repair one): unmount it.\n"
		"\n"
		"A btree node that cannot be read or fails its checksum is replaced by an\n"
		"empty one (-y; -n checks as if it were): a leaf by an empty leaf, an\n"
		"interior node by an empty subtree, its keys said lost (an alloc btree\n"
		"node: the alloc keys rebuilt); the checks after it repair what pointed\n"
		"into it.  A node with a copy on a missing member is away, not lost: it\n"
		"stops the check (4).  The keys of a lost interior node's range are then\n"
		"looked for on the members (every block read once): the leaves under it,\n"
		"newest first, give them back (-n: in memory); keys that come back stale\n"
		"are repaired by the checks after it.\n"
		"  --no-salvage  leave a lost interior node's range empty (no scan)\n"
		"\n"
		"Exit status (as e2fsck): 0 clean, 1 problems found and all fixed, 4\n"
		"problems left uncorrected (also a damaged btree node fsck cannot replace,\n"
		"which stops the check), 8 operational error (cannot open: mounted,\n"
		"missing, not tinyfs, unreadable), 16 usage error.\n");
}

/*
 * -o OPT[,OPT...]: mount options, as bcachefs fsck takes them; only
 * degraded means anything to a check.  False, said, for another.
 */
static bool parse_o(const char *arg, bool *degraded)
{
	const char *p = arg;

	do {
		size_t n = strcspn(p, ",");

		if (n == strlen("degraded") && !strncmp(p, "degraded", n)) {
			*degraded = true;
		} else {
			fprintf(stderr, "tinyfs fsck: -o %.*s: unknown option (only degraded)\n",
				(int)n, p);
			return false;
		}
		p += n;
	} while (*p++ == ',');
	return true;
}

static int cmd_fsck(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "degraded", no_argument, NULL, 'D' },
		{ "no-salvage", no_argument, NULL, 'S' },
		{ 0 },
	};
	struct tfs_fsck_opts o = { 0 };
	struct tfs_fsck_result res;
	struct tfs_fs_opts opts;
	struct tfs_fs *fs;
	bool no = false, degraded = false;
	int c, ret, ret2;

	while ((c = getopt_long(argc, argv, "nyapfvho:", longopts, NULL)) != -1) {
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
		case 'D':
			degraded = true;
			break;
		case 'S':
			o.no_salvage = true;
			break;
		case 'o':
			if (!parse_o(optarg, &degraded))
				return FSCK_EXIT_USAGE;
			break;
		case 'h':
			fsck_usage(stdout);
			return FSCK_EXIT_CLEAN;
		default:
			fsck_usage(stderr);
			return FSCK_EXIT_USAGE;
		}
	}
	if (no && o.repair) {
		fprintf(stderr, "tinyfs fsck: -n and -y together\n");
		return FSCK_EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "tinyfs fsck: no device\n");
		fsck_usage(stderr);
		return FSCK_EXIT_USAGE;
	}
	tfs_fs_opts_default(&opts);
	opts.read_only = !o.repair;
	opts.verbose = o.verbose;
	opts.degraded = degraded;
	/*
	 * fsck reports every damage itself: the superblock's errors= (mkfs's
	 * default ro halts the journal, panic aborts) is for a mount, and
	 * would stop the check or its repairs at the first damaged node.
	 */
	opts.error_action = TFS_ON_ERROR_continue;
	/* A lost leaf is replaced by an empty one as the open reads it: fsck reports it. */
	opts.replace_lost_leaves = true;
	if (!wait_for_stopping_daemons(argv + optind, (unsigned)(argc - optind)))
		return FSCK_EXIT_OPERATIONAL;
	/* A filesystem open elsewhere holds its members' locks: the open fails with EBUSY. */
	ret = tfs_fs_open((const char *const *)argv + optind, (unsigned)(argc - optind), &opts,
			  &fs);
	if (damaged_node(ret, argv[optind], o.repair, degraded,
			 "stops the filesystem from opening"))
		return TFS_FSCK_EXIT_LEFT;
	if (ret) {
		/* Open printed where it failed. */
		fprintf(stderr, "tinyfs fsck: %s: cannot open the filesystem: %s\n", argv[optind],
			tfs_err_str(ret));
		return FSCK_EXIT_OPERATIONAL;
	}
	ret = tfs_fsck(fs, &o, &res);
	ret2 = tfs_fs_stop(fs);
	if (damaged_node(ret, argv[optind], o.repair, degraded, "stopped the check"))
		return TFS_FSCK_EXIT_LEFT;
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
	else if (res.missing_members) /* clean, of what could be seen */
		fprintf(stderr,
			"tinyfs fsck: %s: clean (degraded: %u member(s) missing, not checked; "
			"said above)\n",
			argv[optind], res.missing_members);
	else /* always, as e2fsck: silence is no answer to a user who asked */
		fprintf(stderr, "tinyfs fsck: %s: clean\n", argv[optind]);
	return tfs_fsck_exit_code(&res);
}

TFS_CMD(fsck, "fsck", USAGE, "check (and with -y repair) a filesystem", cmd_fsck);
