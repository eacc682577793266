/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FUSE_CTL_H
#define TFS_FUSE_CTL_H

/*
 * The control channel of a mounted tinyfs, and finding mounts.  Nothing
 * here needs libfuse: `tinyfs stats` links it alone.
 *
 * The channel is a Unix stream socket named by the mount's device number
 * (what stat(2) reports as st_dev inside the mount, and mountinfo as
 * MAJOR:MINOR):  $TFS_RUN_DIR/MAJOR:MINOR.sock, where TFS_RUN_DIR defaults
 * to /run/tinyfs for root and $XDG_RUNTIME_DIR/tinyfs (else /tmp/tinyfs-UID)
 * for other users.  A device number names one live mount at a time, so a
 * stale socket left by a killed daemon is replaced by the next daemon that
 * gets the number.  The socket is mode 0600: its owner is whoever mounted.
 *
 * Protocol: the client sends one line, "stats SECTION\n"; the daemon
 * answers with the section's text (the filesystem's *_to_text) and closes.
 * An answer starting with "error: " is a failure with its reason.
 */

#include <stdbool.h>
#include <sys/types.h>

struct printbuf;

// clang-format off
#define TFS_CTL_SECTIONS(x)	\
	x(journal)		\
	x(btree_cache)		\
	x(key_cache)		\
	x(shrinkers)		\
	x(alloc)		\
	x(devices)		\
	x(fuse)			\
	x(all)
// clang-format on

enum tfs_ctl_section {
#define x(n) TFS_CTL_##n,
	TFS_CTL_SECTIONS(x)
#undef x
	TFS_CTL_NR
};

extern const char *const tfs_ctl_section_names[];

/* The section named s, or -1. */
int tfs_ctl_section_parse(const char *s);

/* The socket's directory (created by the daemon, 0755). */
void tfs_ctl_run_dir(struct printbuf *out);
/* The socket path of the mount with device number dev. */
void tfs_ctl_socket_path(struct printbuf *out, dev_t dev);

/* One line of /proc/self/mountinfo, unescaped. */
struct tfs_mountinfo {
	dev_t dev;
	char *mountpoint;
	char *fstype;
	char *source;
};

void tfs_mountinfo_exit(struct tfs_mountinfo *m);

/*
 * Finds the mount whose mount point is path (canonical), the last one when
 * several are stacked there.  1 found, 0 none, negative errno when
 * mountinfo cannot be read.
 */
int tfs_mountinfo_at(const char *path, struct tfs_mountinfo *m);

/*
 * Finds a tinyfs mount (fstype fuse.tinyfs) whose source lists dev among
 * its members (colon-separated).  1 found, 0 none, negative errno.
 */
int tfs_mountinfo_find_source(const char *dev, struct tfs_mountinfo *m);

/* What a daemon's answer starts with when it refuses a request: the reason follows. */
#define TFS_CTL_ERROR "error: "

/*
 * Sends "stats SECTION" to the daemon of the mount with device number dev
 * and appends the answer to out.  0, or a negative code with the reason in
 * err: an errno when the daemon cannot be reached ("cannot reach the
 * daemon at ... (is the daemon running?)"), -TFS_ERR_ctl_request_refused
 * when it answered TFS_CTL_ERROR (out is left as it was).
 */
int tfs_ctl_request(dev_t dev, const char *request, struct printbuf *out, struct printbuf *err);

/*
 * Turns *_to_text output into JSON: "key: value" (or "key<TAB>value"
 * columns aligned by tabstops) become members, numbers stay numbers, a
 * "key:" line with more-indented lines under it becomes a nested object,
 * and lines without a key go to a "text" array of their object.
 */
void tfs_text_to_json(struct printbuf *out, const char *text);

#endif /* TFS_FUSE_CTL_H */
