// SPDX-License-Identifier: GPL-2.0
/*
 * Mounting and the daemon's life: checks, fork, open, mount, serve, stop.
 *
 * Order, and why:
 *  1. Everything that can be checked without opening the filesystem is
 *     checked in the calling process (options, targets, a mount point or
 *     device already in use), so those failures need no daemon.
 *  2. fork() (unless -f) BEFORE tfs_fs_open(): fs/ starts threads (io_uring
 *     completions, the journal), and threads do not survive a fork.  The
 *     child keeps the caller's stderr until the mount is ready, so fs/'s
 *     messages about a failed open reach the user; a pipe carries the
 *     result to the parent, whose exit status it becomes.
 *  3. tfs_fs_open(), then fuse_session_new() and fuse_session_mount(), the
 *     control socket, then "ready" to the parent; only then is stdio
 *     detached (to /dev/null or -o log=FILE).
 *  4. The session loop serves until the kernel ends the connection
 *     (umount, fusermount3 -u).  SIGTERM, SIGINT and SIGHUP unmount: first
 *     syncfs() through the running daemon, so the kernel's dirty pages are
 *     written while the daemon can still take them, then a lazy unmount.
 *  5. Files the kernel never released are released, then tfs_fs_stop()
 *     writes everything back and the clean section.  A daemon killed with
 *     SIGKILL skips 5: the next mount replays the journal.
 */
#define FUSE_USE_VERSION 312

#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "fuse/ctl.h"
#include "fuse/tfs_fuse.h"
#include "lib/errcode.h"
#include "lib/string.h"

extern char **environ;

/* --- checks before anything starts --- */

/*
 * statfs(2), not stat(2): the kernel answers stat of a FUSE mount's root
 * from the attributes it caches (for a day here) even after the daemon died;
 * statfs always asks the daemon, and a dead one's mount says ENOTCONN.
 */
static bool mount_is_dead(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) && errno == ENOTCONN;
}

/* A mount point in use, or a member already mounted: refused with the reason. */
static int check_free(const struct tfs_mount_opts *o, const char *prog)
{
	struct tfs_mountinfo m;
	int ret;

	ret = tfs_mountinfo_at(o->mountpoint, &m);
	if (ret > 0) {
		bool dead = mount_is_dead(o->mountpoint);

		fprintf(stderr, "%s: %s is busy: %s (%s) is mounted there%s\n", prog, o->mountpoint,
			m.source, m.fstype, dead ? "; its daemon is gone: `umount` it first" : "");
		tfs_mountinfo_exit(&m);
		return -EBUSY;
	}
	for (unsigned i = 0; i < o->nr_devs; i++) {
		ret = tfs_mountinfo_find_source(o->devs[i], &m);
		if (ret > 0) {
			bool dead = mount_is_dead(m.mountpoint);

			fprintf(stderr, "%s: %s is already mounted at %s%s\n", prog, o->devs[i],
				m.mountpoint,
				dead ? " (its daemon is gone: `umount` that mount point first)"
				     : "");
			tfs_mountinfo_exit(&m);
			return -EBUSY;
		}
	}
	return 0;
}

/* What blkid sees on path: "an ext4 filesystem (label "x", uuid ...)", or nothing. */
static bool blkid_describe(const char *path, struct printbuf *out)
{
	const char *type = NULL, *label = NULL, *uuid = NULL, *pttype = NULL;
	blkid_probe pr;
	bool found = false;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	pr = blkid_new_probe();
	if (!pr || blkid_probe_set_device(pr, fd, 0, 0))
		goto out;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL |
						      BLKID_SUBLKS_UUID);
	blkid_probe_enable_partitions(pr, 1);
	if (blkid_do_safeprobe(pr))
		goto out;
	blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
	blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
	blkid_probe_lookup_value(pr, "UUID", &uuid, NULL);
	blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
	if (type) {
		prt_printf(out, "a %s filesystem", type);
		if (label || uuid) {
			prt_str(out, " (");
			if (label)
				prt_printf(out, "label \"%s\"%s", label, uuid ? ", " : "");
			if (uuid)
				prt_printf(out, "uuid %s", uuid);
			prt_char(out, ')');
		}
		found = true;
	} else if (pttype) {
		prt_printf(out, "a %s partition table", pttype);
		found = true;
	}
out:
	if (pr)
		blkid_free_probe(pr);
	close(fd);
	return found;
}

/* After a failed open: name what the members hold when it is not tinyfs. */
static void explain_open_failure(const struct tfs_mount_opts *o, const char *prog, int ret)
{
	fprintf(stderr, "%s: cannot mount %s: %s\n", prog, o->source, tfs_err_str(ret));
	/* The open reads every interior node: a lost one (or a lost alloc node) stops it. */
	if (tfs_err_matches(ret, TFS_ERR_btree_node_invalid) ||
	    tfs_err_matches(ret, TFS_ERR_btree_node_read))
		fprintf(stderr,
			"%s: a btree node (named above) cannot be read or trusted: tinyfs fsck -y "
			"replaces it (and salvages what it can)\n",
			prog);
	if (!tfs_err_matches(ret, TFS_ERR_invalid_sb) && !tfs_err_matches(ret, TFS_ERR_sb_read))
		return;
	for (unsigned i = 0; i < o->nr_devs; i++) {
		struct printbuf what = PRINTBUF;

		if (blkid_describe(o->devs[i], &what))
			fprintf(stderr, "%s: %s holds %s, not tinyfs\n", prog, o->devs[i],
				printbuf_str(&what));
		printbuf_exit(&what);
	}
}

/*
 * One lock file per member (by device and inode number) in the run
 * directory, held by the daemon for its whole life.  umount returns before
 * the daemon has written everything back; a mount right after it waits
 * here for that daemon to finish instead of failing on the member's
 * exclusive open.  The holder writes its state into the file ("serving PID
 * MOUNTPOINT", then "stopping PID"): a daemon still serving (the member
 * reached under another name) is refused at once.
 */
#define TFS_MAX_LOCKS 64
static int lock_fds[TFS_MAX_LOCKS];
static unsigned nr_lock_fds;

static void locks_state(const char *state, const struct tfs_mount_opts *o)
{
	struct printbuf s = PRINTBUF;

	prt_printf(&s, "%s %ld %s\n", state, (long)getpid(), o->mountpoint);
	for (unsigned i = 0; i < nr_lock_fds && !s.allocation_failure; i++)
		if (ftruncate(lock_fds[i], 0) || pwrite(lock_fds[i], s.buf, s.pos, 0) < 0) {
			/* Only a hint for the next mount's message. */
		}
	printbuf_exit(&s);
}

static int lock_members(const struct tfs_mount_opts *o, const char *prog)
{
	struct printbuf dir = PRINTBUF;
	int ret = 0;

	tfs_ctl_run_dir(&dir);
	if (dir.allocation_failure || (mkdir(printbuf_str(&dir), 0755) && errno != EEXIST))
		goto out; /* no run directory: no waiting, tfs_fs_open() still refuses */
	for (unsigned i = 0; i < o->nr_devs && !ret; i++) {
		struct printbuf path = PRINTBUF;
		struct stat st;
		int fd = -1;

		if (stat(o->devs[i], &st))
			continue;
		prt_printf(&path, "%s/member-%llx-%llx.lock", printbuf_str(&dir),
			   (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
		if (!path.allocation_failure)
			fd = open(printbuf_str(&path), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		printbuf_exit(&path);
		if (fd < 0)
			continue;
		for (unsigned tries = 0;; tries++) {
			char state[PATH_MAX + 64] = "";
			ssize_t n;

			if (!flock(fd, LOCK_EX | LOCK_NB)) {
				/* kept until the daemon exits */
				if (nr_lock_fds < TFS_MAX_LOCKS)
					lock_fds[nr_lock_fds++] = fd;
				break;
			}
			int err = errno;

			n = pread(fd, state, sizeof(state) - 1, 0);
			state[n > 0 ? n : 0] = '\0';
			if (err != EWOULDBLOCK || tries == 600 || !strncmp(state, "serving ", 8)) {
				fprintf(stderr, "%s: %s is in use by another tinyfs daemon%s%s",
					prog, o->devs[i], *state ? ": " : "\n", state);
				close(fd);
				ret = -EBUSY;
				break;
			}
			if (tries == 10)
				fprintf(stderr,
					"%s: waiting for the daemon that served %s to finish writing back\n",
					prog, o->devs[i]);
			usleep(100 * 1000);
		}
	}
out:
	printbuf_exit(&dir);
	return ret;
}

/* --- signals: unmount cleanly --- */

struct sig_ctx {
	const struct tfs_mount_opts *o;
	sigset_t set;
	atomic_bool done; /* the daemon is ending: a signal now only wakes the thread */
};

/*
 * SIGTERM/SIGINT/SIGHUP: write the kernel's dirty pages through the
 * still-running daemon, then detach the mount; the session loop ends when
 * the kernel lets go of the connection (at once unless files are open).
 */
static void *sig_thread(void *p)
{
	struct sig_ctx *s = p;
	int sig, fd;

	if (sigwait(&s->set, &sig) || atomic_load(&s->done))
		return NULL;
	fprintf(stderr, "tinyfs: signal %d: unmounting %s\n", sig, s->o->mountpoint);
	fd = open(s->o->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
	if (geteuid() == 0) {
		if (umount2(s->o->mountpoint, 0) && umount2(s->o->mountpoint, MNT_DETACH))
			fprintf(stderr, "tinyfs: umount %s: %s\n", s->o->mountpoint,
				strerror(errno));
	} else {
		char *argv[] = { "fusermount3", "-u", "-z", s->o->mountpoint, NULL };
		pid_t pid;

		if (!posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ))
			waitpid(pid, NULL, 0);
	}
	return NULL;
}

/* --- the daemon --- */

/* The device number of our mount, from mountinfo (the kernel's anonymous dev). */
static int own_dev(const struct tfs_mount_opts *o, dev_t *dev)
{
	struct tfs_mountinfo m;
	int ret = tfs_mountinfo_at(o->mountpoint, &m);

	if (ret <= 0)
		return ret ?: -ENOENT;
	ret = strcmp(m.fstype, "fuse.tinyfs") ? -ENOENT : 0;
	*dev = m.dev;
	tfs_mountinfo_exit(&m);
	return ret;
}

/* Tells the parent the outcome (0 ready, else failed); -1: no parent. */
static void notify(int *fd, int status)
{
	if (*fd < 0)
		return;
	if (write(*fd, &status, sizeof(status)) != sizeof(status)) {
		/* The parent is gone; nobody is left to tell. */
	}
	close(*fd);
	*fd = -1;
}

/*
 * A daemon in the background without log=: stderr (the FILE every message
 * is printed to, libfuse's too) becomes a stream whose lines go to syslog
 * (LOG_DAEMON, LOG_ERR, "tinyfs[PID]"); file descriptor 2 is /dev/null.
 * Tests point it at a datagram socket of their own, TFS_TEST_SYSLOG=PATH:
 * a datagram a line, "<PRI>tinyfs[PID]: message", as syslog(3) sends to
 * /dev/log.  A longer line than the buffer goes in pieces.
 */
struct syslog_stream {
	int sock; /* TFS_TEST_SYSLOG's, else -1: syslog(3) */
	struct sockaddr_un addr;
	size_t len;
	char line[1024];
};

static void syslog_line(struct syslog_stream *s)
{
	char msg[sizeof(s->line) + 64];
	int n;

	if (!s->len)
		return;
	s->line[s->len] = '\0';
	s->len = 0;
	if (s->sock < 0) {
		syslog(LOG_ERR, "%s", s->line);
		return;
	}
	n = snprintf(msg, sizeof(msg), "<%d>tinyfs[%d]: %s", LOG_DAEMON | LOG_ERR, (int)getpid(),
		     s->line);
	if (sendto(s->sock, msg, min_t(size_t, (size_t)n, sizeof(msg) - 1), MSG_DONTWAIT,
		   (struct sockaddr *)&s->addr, sizeof(s->addr)) < 0) {
		/* Nowhere left to say so. */
	}
}

/* Called under the stream's lock (stdio's): one writer at a time. */
static ssize_t syslog_write(void *cookie, const char *buf, size_t size)
{
	struct syslog_stream *s = cookie;

	for (size_t i = 0; i < size; i++) {
		if (buf[i] == '\n') {
			syslog_line(s);
			continue;
		}
		if (s->len == sizeof(s->line) - 1)
			syslog_line(s);
		s->line[s->len++] = buf[i];
	}
	return (ssize_t)size;
}

/* A stream for stderr that writes to syslog, or NULL (then /dev/null). */
static FILE *syslog_stream_open(void)
{
	static struct syslog_stream s = { .sock = -1 };
	const char *path = getenv("TFS_TEST_SYSLOG");
	FILE *f;

	if (path && tfs_strscpy(s.addr.sun_path, path, sizeof(s.addr.sun_path)) >= 0) {
		s.addr.sun_family = AF_UNIX;
		s.sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	}
	if (s.sock < 0)
		openlog("tinyfs", LOG_PID, LOG_DAEMON);
	f = fopencookie(&s, "w", (cookie_io_functions_t){ .write = syslog_write });
	if (f)
		setvbuf(f, NULL, _IOLBF, 0);
	return f;
}

/* stdin and stdout to /dev/null; stderr to log=FILE, else to syslog. */
static void detach_stdio(const struct tfs_mount_opts *o)
{
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = o->log ? open(o->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)
			 : open("/dev/null", O_WRONLY | O_CLOEXEC);
	FILE *sl = o->log ? NULL : syslog_stream_open();

	fflush(stderr);
	if (in >= 0) {
		dup2(in, STDIN_FILENO);
		close(in);
	}
	if (out >= 0) {
		dup2(out, STDOUT_FILENO);
		dup2(out, STDERR_FILENO);
		close(out);
	}
	/* glibc's stderr is a variable (stdio(3)); the old stream stays valid (fd 2). */
	if (sl)
		stderr = sl;
}

/* Escapes ',' and '\' for libfuse's option parser. */
static void prt_opt_escaped(struct printbuf *out, const char *s)
{
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			prt_char(out, '\\');
		prt_char(out, *s);
	}
}

static int serve(struct tfs_mount_opts *o, const char *prog, int notify_fd)
{
	struct printbuf fopts = PRINTBUF;
	struct fuse_loop_config *cfg = NULL;
	struct fuse_session *se = NULL;
	struct tfs_ctl *ctl = NULL;
	struct sig_ctx sig = { .o = o };
	struct tfs_fs *fs = NULL;
	struct tfs_fuse tf;
	pthread_t sig_tid;
	bool sig_started = false;
	dev_t dev;
	int ret, status = 1;

	/*
	 * Block the unmount signals before any thread exists, so every thread
	 * fs/ and libfuse start inherits the mask and sig_thread alone takes them.
	 */
	sigemptyset(&sig.set);
	sigaddset(&sig.set, SIGTERM);
	sigaddset(&sig.set, SIGINT);
	sigaddset(&sig.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sig.set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * Each write request of up to 1 MiB gets an aligned buffer of its
	 * size (fs/io.c), freed after the write.  glibc gave the thread
	 * arenas' freed tops back to the kernel (and mmapped the first ones):
	 * every MiB written then faulted its 256 pages in again, zeroed by the
	 * kernel (a sequential write: 250 page faults per MiB, a third of the
	 * daemon's CPU).  Kept up to 64 MiB per arena instead, which the
	 * requests in flight (max_background of 1 MiB writes) reuse.  Before
	 * any thread: the settings are the process's.
	 */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);

	if (lock_members(o, prog)) {
		notify(&notify_fd, 1);
		return 1;
	}
	ret = tfs_fs_open((const char *const *)o->devs, o->nr_devs, &o->fs, &fs);
	if (ret) {
		explain_open_failure(o, prog, ret);
		notify(&notify_fd, 1);
		return 1;
	}
	tfs_fuse_init_state(&tf, fs, o);
	tf.nlookup = tfs_nlookup_alloc(fs);
	if (!tf.nlookup) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto stop;
	}

	prt_str(&fopts, "subtype=tinyfs,fsname=");
	prt_opt_escaped(&fopts, o->source);
	prt_str(&fopts, ",default_permissions");
	/*
	 * Every listing brings the attributes (libfuse's default, auto, does
	 * so only for a directory's first batch): a stat or `ls -l` after it
	 * costs no lookup round trip.  A later -o readdirplus= overrides.
	 */
	prt_str(&fopts, ",readdirplus=yes");
	if (o->allow_other)
		prt_str(&fopts, ",allow_other");
	if (o->suid_dev)
		prt_str(&fopts, ",suid,dev");
	if (o->fs.read_only)
		prt_str(&fopts, ",ro");
	/* The daemon's atime rule; noatime shows in /proc/mounts too. */
	if (o->noatime)
		prt_str(&fopts, ",noatime");
	if (o->fuse_opts.pos)
		prt_printf(&fopts, ",%s", printbuf_str(&o->fuse_opts));
	if (fopts.allocation_failure) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto stop;
	}
	{
		char *argv[] = { (char *)prog, "-o", (char *)printbuf_str(&fopts),
				 o->debug ? "-d" : NULL, NULL };
		struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);

		tf.conn_opts = fuse_parse_conn_info_opts(&args);
		se = fuse_session_new(&args, &tfs_fuse_ops, sizeof(tfs_fuse_ops), &tf);
		fuse_opt_free_args(&args);
	}
	if (!se) {
		fprintf(stderr, "%s: libfuse refused the options \"%s\"\n", prog,
			printbuf_str(&fopts));
		goto stop;
	}
	tf.se = se;
	if (fuse_session_mount(se, o->mountpoint)) {
		fprintf(stderr, "%s: mounting on %s failed (see above)\n", prog, o->mountpoint);
		goto destroy;
	}
	if (!pthread_create(&sig_tid, NULL, sig_thread, &sig))
		sig_started = true;
	/* The control channel is a convenience: a mount works without it. */
	if (!own_dev(o, &dev))
		tfs_ctl_start(&ctl, &tf, dev);
	else
		fprintf(stderr, "%s: %s not found in mountinfo: no control socket\n", prog,
			o->mountpoint);

	if (o->fs.verbose) {
		struct printbuf t = PRINTBUF;

		tfs_mount_opts_to_text(&t, o);
		fprintf(stderr, "%s: mounted\n%s", prog, printbuf_str(&t));
		printbuf_exit(&t);
	}
	locks_state("serving", o);
	notify(&notify_fd, 0);
	if (!o->foreground) {
		if (chdir("/")) {
			/* Nothing relative is used from here on. */
		}
		detach_stdio(o);
	}

	cfg = fuse_loop_cfg_create();
	if (!cfg) {
		fprintf(stderr, "%s: out of memory\n", prog);
		ret = -ENOMEM;
	} else {
		fuse_loop_cfg_set_clone_fd(cfg, o->clone_fd);
		fuse_loop_cfg_set_max_threads(cfg, o->max_threads);
		fuse_loop_cfg_set_idle_threads(cfg, o->max_idle_threads);
		ret = o->libfuse_loop ? fuse_session_loop_mt(se, cfg)
				      : tfs_fuse_loop(se, o->max_threads, tfs_fuse_ino_busy,
						      tfs_fuse_write_queues, &tf, &tf.poll);
		fuse_loop_cfg_destroy(cfg);
	}
	status = ret ? 1 : 0;
	if (ret)
		fprintf(stderr, "%s: session loop ended with %d\n", prog, ret);
	locks_state("stopping", o);
	tfs_ctl_stop(ctl);
	fuse_session_unmount(se);
destroy:
	fuse_session_destroy(se);
stop:
	if (sig_started) {
		/* Wakes sig_thread if no signal came (not pthread_cancel: see git log). */
		atomic_store(&sig.done, true);
		pthread_kill(sig_tid, SIGHUP);
		pthread_join(sig_tid, NULL);
	}
	if (tf.nr_files)
		fprintf(stderr, "%s: releasing %llu files the kernel did not release\n", prog,
			(unsigned long long)tf.nr_files);
	tfs_fuse_release_all(&tf);
	if (tf.nlookup) {
		u64 inodes, lookups;

		tfs_nlookup_totals(tf.nlookup, &inodes, &lookups);
		if (o->fs.verbose && inodes)
			fprintf(stderr, "%s: %llu inodes still had kernel lookups at unmount\n",
				prog, (unsigned long long)inodes);
		tfs_nlookup_free(tf.nlookup);
	}
	ret = tfs_fs_stop(fs);
	if (ret) {
		fprintf(stderr, "%s: stopping %s: %s\n", prog, o->source, tfs_err_str(ret));
		status = 1;
	}
	if (tf.conn_opts)
		free(tf.conn_opts);
	tfs_fuse_exit_state(&tf);
	printbuf_exit(&fopts);
	notify(&notify_fd, status ?: 1);
	return status;
}

int tfs_mount_run(struct tfs_mount_opts *o, const char *prog)
{
	int p[2], status = 1;
	pid_t pid;
	ssize_t n;

	if (check_free(o, prog))
		return 1;
	if (o->foreground)
		return serve(o, prog, -1);

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		close(p[0]);
		close(p[1]);
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		/* Out of the caller's session: a closing terminal must not stop the mount. */
		setsid();
		_exit(serve(o, prog, p[1]));
	}
	close(p[1]);
	do {
		n = read(p[0], &status, sizeof(status));
	} while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n != sizeof(status)) {
		int ws;

		waitpid(pid, &ws, 0);
		fprintf(stderr, "%s: the daemon died before the mount was ready (%s %d)\n", prog,
			WIFSIGNALED(ws) ? "signal" : "exit status",
			WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
		return 1;
	}
	if (status) {
		waitpid(pid, NULL, 0);
		return 1;
	}
	return 0;
}
