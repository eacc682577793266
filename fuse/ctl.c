// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon's side of the control channel (fuse/ctl.h): one thread
 * accepting on the socket, answering each request with the section's text.
 * Requests are rare and small; they are served one at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs/alloc.h"
#include "fs/btree.h"
#include "fs/posix.h"
#include "journal/journal.h"
#include "fuse/ctl.h"
#include "fuse/tfs_fuse.h"
#include "lib/shrinker.h"
#include "lib/string.h"

struct tfs_ctl {
	struct tfs_fuse *tf;
	int fd;
	int stop[2]; /* a pipe: written to stop the thread */
	pthread_t thread;
	char *path;
};

/* One heading and its body, indented under it. */
#define SECTION(out, name, body)             \
	do {                                 \
		prt_str(out, name ":\n");    \
		printbuf_indent_add(out, 2); \
		body;                        \
		printbuf_indent_sub(out, 2); \
	} while (0)

/*
 * The text of one section of the running filesystem, each from the object's
 * own *_to_text (the engine's, through fs/posix.h, which the daemon already
 * builds on).
 */
static void section_to_text(struct printbuf *out, struct tfs_fuse *tf, int section)
{
	struct tfs_fs *fs = tf->fs;

	switch (section) {
	case TFS_CTL_fuse:
		tfs_fuse_to_text(out, tf);
		return;
	case TFS_CTL_alloc:
		tfs_alloc_to_text(out, fs);
		return;
	case TFS_CTL_journal:
		SECTION(out, "journal", tfs_journal_to_text(out, tfs_posix_journal(fs)));
		return;
	case TFS_CTL_btree_cache:
		/* The node cache, then each tree it holds nodes of. */
		tfs_btree_cache_to_text(out, fs);
		for (unsigned id = 0; id < TFS_BTREE_NR; id++)
			tfs_btree_to_text(out, fs, id);
		return;
	case TFS_CTL_key_cache:
		/* The POSIX layer's inode table is what caches keys above the trees. */
		SECTION(out, "key_cache", tfs_posix_to_text(out, fs));
		return;
	case TFS_CTL_shrinkers: {
		/*
		 * The registry (budget, PSI trigger and the runs it caused: what
		 * tells whether memory pressure reached the daemon), then the
		 * node cache's scans and what it freed.
		 */
		struct tfs_shrinkers *r = __atomic_load_n(&fs->shrinkers, __ATOMIC_ACQUIRE);

		if (r)
			SECTION(out, "shrinkers", tfs_shrinkers_to_text(out, r));
		tfs_btree_cache_to_text(out, fs);
		return;
	}
	case TFS_CTL_devices:
		for (unsigned i = 0; i < fs->nr_devices; i++) {
			struct tfs_bdev *bdev = tfs_posix_bdev(fs, i);

			prt_printf(out, "member %u:\n", i);
			printbuf_indent_add(out, 2);
			if (bdev)
				tfs_bdev_to_text(out, bdev);
			else
				prt_str(out, "missing");
			prt_newline(out);
			printbuf_indent_sub(out, 2);
		}
		return;
	case TFS_CTL_all:
	default:
		tfs_fs_to_text(out, fs);
		prt_str(out, "fuse:\n");
		printbuf_indent_add(out, 2);
		tfs_fuse_to_text(out, tf);
		printbuf_indent_sub(out, 2);
		return;
	}
}

static void serve_one(struct tfs_ctl *c, int fd)
{
	struct timeval tv = { .tv_sec = 5 };
	struct printbuf out = PRINTBUF;
	char req[256], *nl;
	size_t len = 0;
	int section;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (len < sizeof(req) - 1) {
		ssize_t n = read(fd, req + len, sizeof(req) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		req[len] = '\0';
		if (memchr(req, '\n', len))
			break;
	}
	req[len] = '\0';
	nl = strchr(req, '\n');
	if (nl)
		*nl = '\0';
	if (strncmp(req, "stats ", 6)) {
		prt_printf(&out, TFS_CTL_ERROR "unknown request \"%s\"\n", req);
	} else if ((section = tfs_ctl_section_parse(req + 6)) < 0) {
		prt_printf(&out, TFS_CTL_ERROR "unknown section \"%s\"\n", req + 6);
	} else {
		section_to_text(&out, c->tf, section);
	}
	if (out.allocation_failure) {
		printbuf_reset(&out);
		prt_str(&out, TFS_CTL_ERROR "out of memory\n");
	}
	for (size_t done = 0; done < out.pos;) {
		ssize_t n = write(fd, out.buf + done, out.pos - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	printbuf_exit(&out);
}

static void *ctl_thread(void *p)
{
	struct tfs_ctl *c = p;
	struct pollfd fds[2] = {
		{ .fd = c->fd, .events = POLLIN },
		{ .fd = c->stop[0], .events = POLLIN },
	};

	for (;;) {
		int fd;

		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[1].revents)
			break;
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve_one(c, fd);
		close(fd);
	}
	return NULL;
}

int tfs_ctl_start(struct tfs_ctl **ret, struct tfs_fuse *tf, dev_t dev)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct printbuf dir = PRINTBUF, path = PRINTBUF;
	struct tfs_ctl *c = calloc(1, sizeof(*c));
	int err = 0;

	*ret = NULL;
	if (!c)
		return -ENOMEM;
	c->tf = tf;
	c->fd = c->stop[0] = c->stop[1] = -1;
	tfs_ctl_run_dir(&dir);
	tfs_ctl_socket_path(&path, dev);
	if (dir.allocation_failure || path.allocation_failure) {
		err = -ENOMEM;
		goto err;
	}
	if (mkdir(printbuf_str(&dir), 0755) && errno != EEXIST) {
		err = -errno;
		fprintf(stderr, "tinyfs: control socket directory %s: %s\n", printbuf_str(&dir),
			strerror(errno));
		goto err;
	}
	if (tfs_strscpy(addr.sun_path, printbuf_str(&path), sizeof(addr.sun_path)) < 0) {
		err = -ENAMETOOLONG;
		fprintf(stderr, "tinyfs: control socket path too long: %s\n", printbuf_str(&path));
		goto err;
	}
	c->path = strdup(addr.sun_path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!c->path || c->fd < 0 || pipe2(c->stop, O_CLOEXEC)) {
		err = c->path ? -errno : -ENOMEM;
		goto err;
	}
	/* A socket left by a daemon that died: the device number is ours now. */
	unlink(addr.sun_path);
	{
		mode_t old = umask(0177);

		if (bind(c->fd, (struct sockaddr *)&addr, sizeof(addr)))
			err = -errno;
		umask(old);
	}
	if (err || listen(c->fd, 8)) {
		err = err ?: -errno;
		fprintf(stderr, "tinyfs: control socket %s: %s\n", addr.sun_path, strerror(-err));
		goto err;
	}
	err = -pthread_create(&c->thread, NULL, ctl_thread, c);
	if (err) {
		unlink(addr.sun_path);
		goto err;
	}
	printbuf_exit(&dir);
	printbuf_exit(&path);
	*ret = c;
	return 0;
err:
	if (c->fd >= 0)
		close(c->fd);
	if (c->stop[0] >= 0) {
		close(c->stop[0]);
		close(c->stop[1]);
	}
	free(c->path);
	free(c);
	printbuf_exit(&dir);
	printbuf_exit(&path);
	return err;
}

void tfs_ctl_stop(struct tfs_ctl *c)
{
	if (!c)
		return;
	if (write(c->stop[1], "x", 1) != 1)
		pthread_cancel(c->thread);
	pthread_join(c->thread, NULL);
	unlink(c->path);
	close(c->fd);
	close(c->stop[0]);
	close(c->stop[1]);
	free(c->path);
	free(c);
}
