// SPDX-License-Identifier: GPL-2.0
/* Is a target in use by the system (mounted, behind a busy loop device)?  See in_use.h. */
#include "tools/in_use.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/printbuf.h"

/* Loop devices over loop devices: deeper than this is not followed. */
#define LOOP_DEPTH_MAX 4

static bool same_file(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) || S_ISBLK(b->st_mode))
		return S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode) && a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo: undo it in place. */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

struct mount_ent {
	dev_t dev; /* major:minor of the mounted filesystem's device */
	char *dir, *fstype, *source;
};

/*
 * One line of /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT DIR OPTS
 * [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".  False when it does not parse.
 */
static bool parse_mountinfo(char *line, struct mount_ent *m)
{
	char *f[6], *save = NULL, *w;
	unsigned maj, min, n = 0;

	for (w = strtok_r(line, " \n", &save); w && n < 6; w = strtok_r(NULL, " \n", &save))
		f[n++] = w;
	if (n < 6 || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return false;
	while (w && strcmp(w, "-"))
		w = strtok_r(NULL, " \n", &save);
	if (!w)
		return false;
	m->fstype = strtok_r(NULL, " \n", &save);
	m->source = strtok_r(NULL, " \n", &save);
	if (!m->fstype || !m->source)
		return false;
	m->dev = makedev(maj, min);
	m->dir = f[4];
	unescape(m->dir);
	unescape(m->source);
	return true;
}

/*
 * A mount whose device number is dev (when dev_set) or whose source is the
 * file st (an absolute path: "tmpfs" and the like are names, not files):
 * "is mounted on DIR (FSTYPE)" into why.
 */
static bool mounted(bool dev_set, dev_t dev, const struct stat *st, struct printbuf *why)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		struct mount_ent m;
		struct stat sst;

		if (!parse_mountinfo(line, &m))
			continue;
		if ((dev_set && m.dev == dev) ||
		    (st && m.source[0] == '/' && !stat(m.source, &sst) && same_file(st, &sst))) {
			prt_printf(why, "is mounted on %s (%s)", m.dir, m.fstype);
			found = true;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* The first line of a sysfs file, without its newline; false if unreadable. */
static bool read_sysfs(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static bool in_use_rec(const struct stat *st, struct printbuf *why, unsigned depth);

/* Loop device `name` (its sysfs directory) is in use: mounted, held, claimed. */
static bool loop_in_use(const char *name, struct printbuf *why, unsigned depth)
{
	char path[320], buf[64];
	unsigned maj, min;
	struct stat lst;
	DIR *d;
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%s/dev", name);
	if (!read_sysfs(path, buf, sizeof(buf)) || sscanf(buf, "%u:%u", &maj, &min) != 2)
		return false;
	prt_printf(why, "is the backing file of /dev/%s, which ", name);
	if (mounted(true, makedev(maj, min), NULL, why))
		return true;

	snprintf(path, sizeof(path), "/sys/block/%s/holders", name);
	d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.') {
			prt_printf(why, "is held by %s", e->d_name);
			closedir(d);
			return true;
		}
	if (d)
		closedir(d);

	snprintf(path, sizeof(path), "/dev/%s", name);
	if (!stat(path, &lst) && S_ISBLK(lst.st_mode) && lst.st_rdev == makedev(maj, min)) {
		/* A mount, md, dm or another mkfs claims the device exclusively. */
		fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
		if (fd < 0 && errno == EBUSY) {
			prt_str(why, "is in use (held open exclusively)");
			return true;
		}
		if (fd >= 0)
			close(fd);
		/* A loop device over this loop device, in use in turn. */
		if (in_use_rec(&lst, why, depth + 1))
			return true;
	}
	return false;
}

static bool in_use_rec(const struct stat *st, struct printbuf *why, unsigned depth)
{
	struct printbuf tmp = PRINTBUF;
	bool found = false;
	DIR *d;

	if (depth > LOOP_DEPTH_MAX)
		return false;
	if (mounted(S_ISBLK(st->st_mode), st->st_rdev, st, &tmp)) {
		prt_str(why, printbuf_str(&tmp));
		printbuf_exit(&tmp);
		return true;
	}
	d = opendir("/sys/block");
	for (struct dirent *e; !found && d && (e = readdir(d));) {
		char path[320], backing[4096];
		struct stat bst;

		if (strncmp(e->d_name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", e->d_name);
		if (!read_sysfs(path, backing, sizeof(backing)) || stat(backing, &bst) ||
		    !same_file(st, &bst))
			continue;
		printbuf_reset(&tmp);
		if (loop_in_use(e->d_name, &tmp, depth)) {
			prt_str(why, printbuf_str(&tmp));
			found = true;
		}
	}
	if (d)
		closedir(d);
	printbuf_exit(&tmp);
	return found;
}

bool tfs_target_in_use(const char *path, const struct stat *st, struct printbuf *why)
{
	return in_use_rec(st, why, 0);
}
