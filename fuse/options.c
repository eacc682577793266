// SPDX-License-Identifier: GPL-2.0
/*
 * Mount options: what `tinyfs mount -o`, `mount.tinyfs -o` and an fstab
 * line may say.  tinyfs's own options set struct tfs_mount_opts; libfuse's
 * mount and connection options are checked against a list here (so a typo
 * is a usage error before anything starts) and passed on.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/tfs_fuse.h"
#include "super/super.h"

void tfs_mount_opts_init(struct tfs_mount_opts *o)
{
	bool root = geteuid() == 0;

	memset(o, 0, sizeof(*o));
	tfs_fs_opts_default(&o->fs);
	/*
	 * Root mounts behave like a kernel filesystem: every user sees the
	 * files (default_permissions enforces their modes) and set-ID bits and
	 * device nodes work, as mount(8) gives ext4.  Other users get libfuse's
	 * private, nosuid, nodev mount.
	 */
	o->allow_other = root;
	o->suid_dev = root;
	o->writeback = true;
	o->cache_readdir = true;
	o->entry_timeout = 86400;
	o->attr_timeout = 86400;
	o->negative_timeout = 86400;
	o->max_threads = 16;
	o->poll_us = 200;
	o->low_latency_ms = 20;
	o->max_idle_threads = 8;
	o->clone_fd = true;
	o->write_behind = true;
	o->readdir_ahead = TFS_RDAHEAD_free_cpus;
	o->fuse_opts = PRINTBUF;
}

void tfs_mount_opts_exit(struct tfs_mount_opts *o)
{
	for (unsigned i = 0; i < o->nr_devs; i++)
		free(o->devs[i]);
	free(o->devs);
	free(o->source);
	free(o->mountpoint);
	free(o->log);
	printbuf_exit(&o->fuse_opts);
	memset(o, 0, sizeof(*o));
}

/* libfuse options passed on as they are (mount(8) flags, session, connection). */
static const char *const fuse_flag_opts[] = {
	"exec",
	"noexec",
	"async",
	"sync",
	"dirsync",
	"allow_root",
	"auto_unmount",
	"async_read",
	"sync_read",
	"atomic_o_trunc",
	"no_remote_lock",
	"no_remote_flock",
	"no_remote_posix_lock",
	"splice_write",
	"no_splice_write",
	"splice_move",
	"no_splice_move",
	"splice_read",
	"no_splice_read",
	"auto_inval_data",
	"no_auto_inval_data",
	"async_dio",
	"no_async_dio",
	NULL,
};

/*
 * atime words: the daemon's (lazytime and nolazytime are accepted and
 * change nothing: times are committed with the change that sets them).
 */
static const char *const atime_opts[] = {
	"atime",    "noatime",	  "relatime", "norelatime", "strictatime", "nostrictatime",
	"diratime", "nodiratime", "lazytime", "nolazytime", NULL,
};

static const char *const fuse_value_opts[] = {
	"max_read",
	"max_write",
	"max_readahead",
	"max_background",
	"congestion_threshold",
	"readdirplus",
	"time_gran",
	"fsname",
	NULL,
};

/* fstab and mount(8) words that are not for the filesystem. */
static const char *const ignored_opts[] = {
	"defaults",
	"auto",
	"noauto",
	"user",
	"users",
	"nouser",
	"owner",
	"nofail",
	"_netdev",
	"loop",
	"default_permissions",
	NULL,
};

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

static int parse_double(const char *prog, const char *name, const char *v, double *ret)
{
	char *end;

	errno = 0;
	*ret = strtod(v, &end);
	if (!*v || *end || errno || *ret < 0) {
		fprintf(stderr, "%s: -o %s=%s: expected seconds (a number >= 0)\n", prog, name, v);
		return -EINVAL;
	}
	return 0;
}

static int parse_unsigned(const char *prog, const char *name, const char *v, unsigned long min,
			  unsigned long max, unsigned long *ret)
{
	char *end;

	errno = 0;
	*ret = strtoul(v, &end, 10);
	if (!*v || *end || errno || *ret < min || *ret > max || *v == '-') {
		fprintf(stderr, "%s: -o %s=%s: expected a number in %lu..%lu\n", prog, name, v, min,
			max);
		return -EINVAL;
	}
	return 0;
}

/* Appends one libfuse option to the -o string. */
static void fuse_opt_add(struct tfs_mount_opts *o, const char *opt)
{
	if (o->fuse_opts.pos)
		prt_char(&o->fuse_opts, ',');
	prt_str(&o->fuse_opts, opt);
}

static int parse_one(struct tfs_mount_opts *o, const char *prog, char *opt)
{
	char *v = strchr(opt, '=');
	unsigned long n;

	if (v)
		*v++ = '\0';
#define is(s) (!strcmp(opt, s))
#define flag_only()                                                               \
	do {                                                                      \
		if (v) {                                                          \
			fprintf(stderr, "%s: -o %s takes no value\n", prog, opt); \
			return -EINVAL;                                           \
		}                                                                 \
	} while (0)
#define need_value()                                                                           \
	do {                                                                                   \
		if (!v) {                                                                      \
			fprintf(stderr, "%s: -o %s needs a value (%s=...)\n", prog, opt, opt); \
			return -EINVAL;                                                        \
		}                                                                              \
	} while (0)

	if (!*opt)
		return 0;
	if (in_list(ignored_opts, opt) || !strncmp(opt, "x-", 2) || is("comment"))
		return 0;
	if (is("ro") || is("rw")) {
		flag_only();
		o->fs.read_only = is("ro");
	} else if (is("degraded")) {
		flag_only();
		o->fs.degraded = true;
	} else if (is("errors")) {
		int a;

		need_value();
		/* ext4's name for ro: fstab lines copied from ext4 mount. */
		a = tfs_error_action_parse(strcmp(v, "remount-ro") ? v : "ro");
		if (a < 0) {
			fprintf(stderr,
				"%s: -o errors=%s: expected continue, ro (remount-ro) or panic\n",
				prog, v);
			return -EINVAL;
		}
		o->fs.error_action = a;
	} else if (is("cache_mb")) {
		need_value();
		if (parse_unsigned(prog, opt, v, 1, 1UL << 30, &n))
			return -EINVAL;
		o->fs.cache_budget = (u64)n << 20;
	} else if (is("fsync")) {
		need_value();
		if (!strcmp(v, "flush") || !strcmp(v, "on")) {
			o->fs.fsync_noop = false;
			o->fs.no_post_flush = false;
		} else if (!strcmp(v, "preflush")) {
			o->fs.fsync_noop = false;
			o->fs.no_post_flush = true;
		} else if (!strcmp(v, "none") || !strcmp(v, "off")) {
			o->fs.fsync_noop = true;
		} else {
			fprintf(stderr, "%s: -o fsync=%s: expected flush, preflush or none\n", prog,
				v);
			return -EINVAL;
		}
	} else if (is("verbose")) {
		flag_only();
		o->fs.verbose = true;
	} else if (is("debug")) {
		flag_only();
		o->debug = true;
	} else if (is("log")) {
		need_value();
		free(o->log);
		o->log = strdup(v);
		if (!o->log)
			return -ENOMEM;
	} else if (is("allow_other") || is("noallow_other")) {
		flag_only();
		o->allow_other = is("allow_other");
	} else if (is("suid") || is("nosuid") || is("dev") || is("nodev")) {
		flag_only();
		/* Both or neither: a nosuid or nodev turns our default off. */
		o->suid_dev = false;
		fuse_opt_add(o, opt);
	} else if (is("writeback_cache") || is("no_writeback_cache")) {
		flag_only();
		o->writeback = is("writeback_cache");
	} else if (is("killpriv") || is("nokillpriv")) {
		flag_only();
		o->killpriv = is("killpriv");
	} else if (is("kernel_lseek")) {
		flag_only();
		o->kernel_lseek = true;
	} else if (is("cache_readdir") || is("no_cache_readdir")) {
		flag_only();
		o->cache_readdir = is("cache_readdir");
	} else if (is("attr_timeout") || is("entry_timeout") || is("negative_timeout")) {
		double d;

		need_value();
		if (parse_double(prog, opt, v, &d))
			return -EINVAL;
		if (is("attr_timeout"))
			o->attr_timeout = d;
		else if (is("entry_timeout"))
			o->entry_timeout = d;
		else
			o->negative_timeout = d;
	} else if (is("max_threads") || is("max_idle_threads")) {
		need_value();
		if (parse_unsigned(prog, opt, v, 1, 1024, &n))
			return -EINVAL;
		if (is("max_threads"))
			o->max_threads = (unsigned)n;
		else
			o->max_idle_threads = (unsigned)n;
	} else if (is("host_cache") || is("no_host_cache")) {
		flag_only();
		o->fs.no_host_cache = is("no_host_cache");
	} else if (is("write_behind") || is("no_write_behind")) {
		o->write_behind = is("write_behind");
	} else if (is("readdir_ahead") && v) {
		if (strcmp(v, "always")) {
			fprintf(stderr, "%s: -o readdir_ahead=%s: expected always\n", prog, v);
			return -EINVAL;
		}
		o->readdir_ahead = TFS_RDAHEAD_always;
	} else if (is("readdir_ahead") || is("no_readdir_ahead")) {
		flag_only();
		o->readdir_ahead = is("readdir_ahead") ? TFS_RDAHEAD_free_cpus : TFS_RDAHEAD_off;
	} else if (is("poll_us")) {
		need_value();
		if (parse_unsigned(prog, opt, v, 0, 100000, &n))
			return -EINVAL;
		o->poll_us = (unsigned)n;
	} else if (is("low_latency_ms")) {
		need_value();
		if (parse_unsigned(prog, opt, v, 0, 60000, &n))
			return -EINVAL;
		o->low_latency_ms = (unsigned)n;
	} else if (is("libfuse_loop")) {
		o->libfuse_loop = true;
	} else if (is("clone_fd") || is("noclone_fd")) {
		flag_only();
		o->clone_fd = is("clone_fd");
	} else if (in_list(atime_opts, opt)) {
		flag_only();
		/*
		 * The daemon keeps atime (fuse.c's accessed(); FUSE inodes are
		 * S_NOATIME in the kernel), so these are its own: libfuse 3.14
		 * refuses all but noatime.  As the kernel's mount flags:
		 * relatime unless noatime or strictatime, norelatime and
		 * nostrictatime mean relatime, the last word wins.
		 */
		if (is("noatime") || is("atime") || is("relatime") || is("norelatime") ||
		    is("strictatime") || is("nostrictatime")) {
			o->noatime = is("noatime");
			o->strictatime = is("strictatime");
		}
		if (is("nodiratime") || is("diratime"))
			o->nodiratime = is("nodiratime");
	} else if (in_list(fuse_flag_opts, opt)) {
		flag_only();
		fuse_opt_add(o, opt);
	} else if (in_list(fuse_value_opts, opt)) {
		need_value();
		if (is("fsname"))
			return 0; /* always the member list, so tinyfs stats can find it */
		prt_printf(&o->fuse_opts, "%s%s=%s", o->fuse_opts.pos ? "," : "", opt, v);
	} else {
		fprintf(stderr, "%s: unknown option \"%s\" (see --help)\n", prog, opt);
		return -EINVAL;
	}
	return 0;
#undef is
#undef flag_only
#undef need_value
}

int tfs_mount_opts_parse(struct tfs_mount_opts *o, const char *prog, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *w = strtok_r(copy, ",", &save); w && !ret; w = strtok_r(NULL, ",", &save))
		ret = parse_one(o, prog, w);
	free(copy);
	return ret;
}

int tfs_mount_opts_targets(struct tfs_mount_opts *o, const char *prog, const char *devspec,
			   const char *mountpoint)
{
	struct printbuf src = PRINTBUF;
	char *copy = strdup(devspec), *save = NULL;
	struct stat st;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char **devs = realloc(o->devs, (o->nr_devs + 1) * sizeof(*devs));
		char *path;

		if (!devs) {
			ret = -ENOMEM;
			goto out;
		}
		o->devs = devs;
		path = realpath(d, NULL);
		if (!path || stat(path, &st)) {
			ret = -errno;
			fprintf(stderr, "%s: %s: %s\n", prog, d, strerror(errno));
			free(path);
			goto out;
		}
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
			fprintf(stderr, "%s: %s: not an image file or a block device\n", prog, d);
			free(path);
			ret = -EINVAL;
			goto out;
		}
		/* A member named twice would wait for its own lock, then say "in use". */
		for (unsigned i = 0; i < o->nr_devs; i++) {
			struct stat prev;

			if (!stat(o->devs[i], &prev) &&
			    (S_ISBLK(st.st_mode)
				     ? prev.st_rdev == st.st_rdev
				     : prev.st_dev == st.st_dev && prev.st_ino == st.st_ino)) {
				fprintf(stderr, "%s: %s is given twice (member %u is %s)\n", prog,
					d, i + 1, o->devs[i]);
				free(path);
				ret = -EINVAL;
				goto out;
			}
		}
		o->devs[o->nr_devs++] = path;
		prt_printf(&src, "%s%s", src.pos ? ":" : "", path);
	}
	if (!o->nr_devs) {
		fprintf(stderr, "%s: no device given\n", prog);
		ret = -EINVAL;
		goto out;
	}
	if (src.allocation_failure) {
		ret = -ENOMEM;
		goto out;
	}
	o->source = strdup(printbuf_str(&src));
	o->mountpoint = realpath(mountpoint, NULL);
	if (!o->mountpoint || stat(o->mountpoint, &st)) {
		int e = errno;
		/* ENOTCONN: a FUSE mount there whose daemon died (kill -9, a crash). */
		bool dead = e == ENOTCONN;

		ret = -e;
		fprintf(stderr, "%s: mount point %s: %s%s%s%s\n", prog, mountpoint, strerror(e),
			dead ? " (a mount is there and its daemon is gone: `umount " : "",
			dead ? mountpoint : "", dead ? "` first)" : "");
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		ret = -ENOTDIR;
		fprintf(stderr, "%s: mount point %s: not a directory\n", prog, mountpoint);
		goto out;
	}
out:
	free(copy);
	printbuf_exit(&src);
	return ret;
}

void tfs_mount_opts_to_text(struct printbuf *out, const struct tfs_mount_opts *o)
{
	printbuf_tabstop_push(out, 20);
	prt_printf(out, "source:\t%s\n", o->source ?: "");
	prt_printf(out, "mountpoint:\t%s\n", o->mountpoint ?: "");
	prt_printf(out, "read only:\t%s\n", o->fs.read_only ? "yes" : "no");
	prt_printf(out, "degraded:\t%s\n", o->fs.degraded ? "yes" : "no");
	prt_printf(out, "errors:\t%s\n",
		   o->fs.error_action < 0 ? "(superblock)" :
					    tfs_error_action_str((unsigned)o->fs.error_action) ?: "?");
	prt_printf(out, "cache budget:\t");
	if (o->fs.cache_budget)
		prt_units_u64(out, o->fs.cache_budget);
	else
		prt_str(out, "(default)");
	prt_newline(out);
	prt_printf(out, "fsync:\t%s\n",
		   o->fs.fsync_noop	 ? "none (unsafe)"
		   : o->fs.no_post_flush ? "preflush"
					 : "flush");
	prt_printf(out, "host page cache:\t%s\n",
		   o->fs.no_host_cache ? "no" : "small data and journal writes");
	prt_printf(out, "allow_other:\t%s\n", o->allow_other ? "yes" : "no");
	prt_printf(out, "writeback cache:\t%s\n", o->writeback ? "yes" : "no");
	prt_printf(out, "timeouts:\tentry %g s, attr %g s, negative %g s\n", o->entry_timeout,
		   o->attr_timeout, o->negative_timeout);
	prt_printf(out, "threads:\tmax %u, idle %u, clone_fd %s, loop %s\n", o->max_threads,
		   o->max_idle_threads, o->clone_fd ? "yes" : "no",
		   o->libfuse_loop ? "libfuse" : "leader/followers");
	if (!o->libfuse_loop)
		prt_printf(out, "poll:\t%u us at most\n", o->poll_us);
	if (!o->libfuse_loop)
		prt_printf(out, "low wake-up latency:\t%u ms after a request\n", o->low_latency_ms);
	prt_printf(out, "fuse options:\t%s\n", printbuf_str(&o->fuse_opts));
	printbuf_tabstop_pop(out);
}

void tfs_mount_options_help(FILE *f)
{
	fprintf(f,
		"Options (-o, comma-separated):\n"
		"  ro, rw               read-only (nothing is written, not even journal replay)\n"
		"  degraded             mount with members missing, when replicas allow\n"
		"  errors=continue|ro|panic (remount-ro: ro)\n"
		"                       what a metadata error does (default: the superblock's)\n"
		"  cache_mb=N           memory budget of the node and key caches, MiB\n"
		"  fsync=flush|preflush|none\n"
		"                       flush: one device flush per fsync (a post-flush journal\n"
		"                       entry, checked at replay); preflush: the data flushed\n"
		"                       before the journal write (two); none: fsync only commits\n"
		"                       (unsafe; for benchmarks)\n"
		"  host_cache, no_host_cache\n"
		"                       small data and journal writes to an image file go\n"
		"                       through the host's page cache, written back by the\n"
		"                       flush that follows (default on)\n"
		"  allow_other, noallow_other\n"
		"                       let other users in (default: on when root mounts)\n"
		"  default_permissions  always on: the kernel checks modes as for ext4\n"
		"  suid, nosuid, dev, nodev\n"
		"                       default for root: suid,dev (as mount(8)); else nosuid,nodev\n"
		"  verbose              fs/ says what open and stop do\n"
		"  log=FILE             the daemon's messages once it is in the background\n"
		"  debug                trace every request (libfuse -d; use with -f)\n"
		"  writeback_cache, no_writeback_cache   kernel write-back caching (default on)\n"
		"  attr_timeout=S, entry_timeout=S, negative_timeout=S   kernel caching (86400)\n"
		"  max_threads=N, max_idle_threads=N, clone_fd, noclone_fd   request threads\n"
		"  write_behind, no_write_behind   answer small write-back requests before\n"
		"                       the device write (fsync waits for them; default on)\n"
		"  readdir_ahead, no_readdir_ahead   read a listing's next readdirplus batch\n"
		"                       while the caller takes in the last, when the CPUs are\n"
		"                       not busy (default on); readdir_ahead=always: even then\n"
		"  poll_us=N            the reading thread polls /dev/fuse up to N us (adapted)\n"
		"                       before it sleeps: no wakeup of an idle CPU per request\n"
		"                       (default 200; 0: sleep at once)\n"
		"  low_latency_ms=N     while requests come, and N ms after the last, ask the\n"
		"                       kernel for a 0 us CPU wake-up latency (/dev/cpu_dma_latency:\n"
		"                       idle CPUs poll instead of sleeping; root only; default 20;\n"
		"                       0: never)\n"
		"  libfuse_loop         libfuse's multithreaded loop instead of the daemon's\n"
		"                       leader/followers loop (max_idle_threads and clone_fd\n"
		"                       apply only to it, max_threads to both)\n"
		"  cache_readdir, no_cache_readdir        kernel caching of listings (on)\n"
		"  killpriv             the daemon clears set-ID bits (HANDLE_KILLPRIV v1; off)\n"
		"  kernel_lseek         SEEK_DATA/SEEK_HOLE answered by the kernel (no holes)\n"
		"  relatime (default), strictatime, noatime, nodiratime; atime, norelatime,\n"
		"                       nostrictatime: relatime; diratime; lazytime, nolazytime\n"
		"                       (accepted, no effect)\n"
		"  libfuse's: exec, noexec, sync, dirsync, allow_root,\n"
		"  auto_unmount, max_read=, max_write=, max_readahead=, max_background=,\n"
		"  congestion_threshold=, readdirplus=yes|no|auto (yes), splice_read, splice_write,\n"
		"  splice_move, async_dio, time_gran=, ...\n"
		"  fstab words are ignored: defaults, auto, noauto, user, users, nofail,\n"
		"  _netdev, x-*, comment=\n");
}
