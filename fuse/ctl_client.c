// SPDX-License-Identifier: GPL-2.0
/*
 * The control channel's client side and mountinfo: everything `tinyfs stats`
 * needs, without libfuse.  See fuse/ctl.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuse/ctl.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "lib/string.h"

const char *const tfs_ctl_section_names[] = {
#define x(n) #n,
	TFS_CTL_SECTIONS(x)
#undef x
		NULL
};

int tfs_ctl_section_parse(const char *s)
{
	for (int i = 0; i < TFS_CTL_NR; i++)
		if (!strcmp(s, tfs_ctl_section_names[i]))
			return i;
	return -1;
}

void tfs_ctl_run_dir(struct printbuf *out)
{
	const char *d = getenv("TFS_RUN_DIR");

	if (d && *d) {
		prt_str(out, d);
		return;
	}
	if (geteuid() == 0) {
		prt_str(out, "/run/tinyfs");
		return;
	}
	d = getenv("XDG_RUNTIME_DIR");
	if (d && *d)
		prt_printf(out, "%s/tinyfs", d);
	else
		prt_printf(out, "/tmp/tinyfs-%u", (unsigned)geteuid());
}

void tfs_ctl_socket_path(struct printbuf *out, dev_t dev)
{
	tfs_ctl_run_dir(out);
	prt_printf(out, "/%u:%u.sock", major(dev), minor(dev));
}

void tfs_mountinfo_exit(struct tfs_mountinfo *m)
{
	free(m->mountpoint);
	free(m->fstype);
	free(m->source);
	memset(m, 0, sizeof(*m));
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s)
{
	char *r = malloc(strlen(s) + 1), *p = r;

	if (!r)
		return NULL;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*p++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*p++ = *s++;
		}
	}
	*p = '\0';
	return r;
}

/*
 * Parses one mountinfo line:
 * ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
 */
static int parse_line(char *line, struct tfs_mountinfo *m)
{
	char *f[64], *save = NULL;
	unsigned nr = 0, maj, min, sep;

	for (char *w = strtok_r(line, " \n", &save); w && nr < 64; w = strtok_r(NULL, " \n", &save))
		f[nr++] = w;
	if (nr < 10 || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return -EINVAL;
	for (sep = 6; sep < nr && strcmp(f[sep], "-"); sep++)
		;
	if (sep + 2 >= nr)
		return -EINVAL;
	m->dev = makedev(maj, min);
	m->mountpoint = unescape(f[4]);
	m->fstype = unescape(f[sep + 1]);
	m->source = unescape(f[sep + 2]);
	if (!m->mountpoint || !m->fstype || !m->source) {
		tfs_mountinfo_exit(m);
		return -ENOMEM;
	}
	return 0;
}

/* Calls match(m, arg) on every mount; keeps the last match in *ret. */
static int mountinfo_scan(bool (*match)(const struct tfs_mountinfo *, const void *),
			  const void *arg, struct tfs_mountinfo *ret)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	memset(ret, 0, sizeof(*ret));
	while (getline(&line, &cap, f) > 0) {
		struct tfs_mountinfo m = { 0 };

		if (parse_line(line, &m))
			continue;
		if (match(&m, arg)) {
			tfs_mountinfo_exit(ret);
			*ret = m;
			found = 1;
		} else {
			tfs_mountinfo_exit(&m);
		}
	}
	free(line);
	fclose(f);
	return found;
}

static bool match_mountpoint(const struct tfs_mountinfo *m, const void *path)
{
	return !strcmp(m->mountpoint, path);
}

int tfs_mountinfo_at(const char *path, struct tfs_mountinfo *m)
{
	return mountinfo_scan(match_mountpoint, path, m);
}

static bool match_source(const struct tfs_mountinfo *m, const void *dev)
{
	size_t len = strlen(dev);
	const char *s = m->source;

	if (strcmp(m->fstype, "fuse.tinyfs"))
		return false;
	for (;;) {
		const char *end = strchrnul(s, ':');

		if ((size_t)(end - s) == len && !memcmp(s, dev, len))
			return true;
		if (!*end)
			return false;
		s = end + 1;
	}
}

int tfs_mountinfo_find_source(const char *dev, struct tfs_mountinfo *m)
{
	return mountinfo_scan(match_source, dev, m);
}

int tfs_ctl_request(dev_t dev, const char *request, struct printbuf *out, struct printbuf *err)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct printbuf path = PRINTBUF, reply = PRINTBUF;
	struct timeval tv = { .tv_sec = 30 };
	char buf[4096];
	ssize_t n;
	int fd = -1, ret = 0;

	tfs_ctl_socket_path(&path, dev);
	if (path.allocation_failure) {
		ret = -ENOMEM;
		goto out;
	}
	if (tfs_strscpy(addr.sun_path, printbuf_str(&path), sizeof(addr.sun_path)) < 0) {
		prt_printf(err, "control socket path too long: %s", printbuf_str(&path));
		ret = -ENAMETOOLONG;
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		prt_printf(err, "socket: %s", strerror(-ret));
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		ret = -errno;
		prt_printf(
			err, "cannot reach the daemon at %s: %s%s", addr.sun_path, strerror(-ret),
			ret == -ENOENT || ret == -ECONNREFUSED ? " (is the daemon running?)" : "");
		goto out;
	}
	{
		size_t len = strlen(request), done = 0;

		while (done < len || done == 0) {
			n = write(fd, request + done, len - done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				ret = n < 0 ? -errno : -EPIPE;
				prt_printf(err, "writing to %s: %s", addr.sun_path, strerror(-ret));
				goto out;
			}
			done += (size_t)n;
			if (done == len)
				break;
		}
		if (write(fd, "\n", 1) != 1) {
			ret = -EPIPE;
			prt_printf(err, "writing to %s failed", addr.sun_path);
			goto out;
		}
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			prt_printf(err, "reading from %s: %s", addr.sun_path, strerror(-ret));
			goto out;
		}
		prt_bytes(&reply, buf, (size_t)n);
	}
	if (reply.allocation_failure) {
		ret = -ENOMEM;
		goto out;
	}
	/* The daemon's refusal ("error: why"): a code here, the why in err. */
	if (!strncmp(printbuf_str(&reply), TFS_CTL_ERROR, strlen(TFS_CTL_ERROR))) {
		const char *why = printbuf_str(&reply) + strlen(TFS_CTL_ERROR);

		prt_printf(err, "the daemon refused \"%s\": %.*s", request, (int)strcspn(why, "\n"),
			   why);
		ret = -TFS_ERR_ctl_request_refused;
		goto out;
	}
	prt_bytes(out, reply.buf, reply.pos);
	if (out->allocation_failure)
		ret = -ENOMEM;
out:
	if (fd >= 0)
		close(fd);
	printbuf_exit(&path);
	printbuf_exit(&reply);
	return ret;
}

/* --- text to JSON --- */

struct jnode {
	char *key;   /* NULL for a "text" line */
	char *value; /* NULL for an object */
	unsigned indent;
	struct jnode *child, *last_child, *next;
};

static void jnode_free(struct jnode *n)
{
	while (n) {
		struct jnode *next = n->next;

		jnode_free(n->child);
		free(n->key);
		free(n->value);
		free(n);
		n = next;
	}
}

static void jnode_add(struct jnode *parent, struct jnode *n)
{
	if (parent->last_child)
		parent->last_child->next = n;
	else
		parent->child = n;
	parent->last_child = n;
}

static char *strndup_trim(const char *s, size_t len)
{
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	return strndup(s, len);
}

static bool is_number(const char *s)
{
	char *end;

	if (!*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	(void)strtod(s, &end);
	/* JSON numbers: no hex, inf, nan, leading '+' or leading zeros like "007". */
	if (*end || errno || strpbrk(s, "xXiInN+") || (s[0] == '0' && isdigit((unsigned char)s[1])))
		return false;
	return true;
}

static void jnode_print(struct printbuf *out, const struct jnode *obj)
{
	bool first = true, have_text = false;

	prt_char(out, '{');
	for (const struct jnode *n = obj->child; n; n = n->next) {
		if (!n->key) {
			have_text = true;
			continue;
		}
		if (!first)
			prt_char(out, ',');
		first = false;
		prt_json_str(out, n->key);
		prt_char(out, ':');
		if (n->value && !n->child) {
			if (is_number(n->value))
				prt_str(out, n->value);
			else
				prt_json_str(out, n->value);
		} else if (n->value) {
			/* "key: value" with lines under it: {"value": ..., children} */
			struct jnode v = { .key = "value", .value = n->value };
			struct jnode wrap = { .child = &v };

			v.next = n->child;
			jnode_print(out, &wrap);
		} else {
			jnode_print(out, n);
		}
	}
	if (have_text) {
		bool tfirst = true;

		if (!first)
			prt_char(out, ',');
		prt_str(out, "\"text\":[");
		for (const struct jnode *n = obj->child; n; n = n->next) {
			if (n->key)
				continue;
			if (!tfirst)
				prt_char(out, ',');
			tfirst = false;
			prt_json_str(out, n->value);
		}
		prt_char(out, ']');
	}
	prt_char(out, '}');
}

void tfs_text_to_json(struct printbuf *out, const char *text)
{
	struct jnode root = { 0 };
	struct jnode *stack[64] = { &root };
	unsigned depth = 0;

	while (*text) {
		const char *eol = strchrnul(text, '\n'), *colon;
		unsigned indent = 0;
		struct jnode *n;

		while (text + indent < eol && text[indent] == ' ')
			indent++;
		if (text + indent == eol) {
			text = *eol ? eol + 1 : eol;
			continue;
		}
		/* Close objects this line is not indented under. */
		while (depth && indent <= stack[depth]->indent)
			depth--;
		n = calloc(1, sizeof(*n));
		if (!n)
			break;
		n->indent = indent;
		colon = memchr(text + indent, ':', (size_t)(eol - text - indent));
		if (colon && colon > text + indent) {
			n->key = strndup_trim(text + indent, (size_t)(colon - text - indent));
			n->value = strndup_trim(colon + 1, (size_t)(eol - colon - 1));
			if (n->value && !*n->value) {
				free(n->value);
				n->value = NULL;
			}
		} else {
			n->value = strndup_trim(text + indent, (size_t)(eol - text - indent));
		}
		jnode_add(stack[depth], n);
		/* A keyed line may own the more-indented lines after it. */
		if (n->key && depth + 1 < 64)
			stack[++depth] = n;
		text = *eol ? eol + 1 : eol;
	}
	/* Objects: keyed nodes with children; keyed leaves keep their value. */
	jnode_print(out, &root);
	jnode_free(root.child);
}
