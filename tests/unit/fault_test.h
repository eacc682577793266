/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_FAULT_TEST_H
#define TFS_TESTS_UNIT_FAULT_TEST_H

/*
 * What the tests that inject faults share: adding rules with the parser's
 * complaint printed (a typo in a test's rule shows why it failed; for whole
 * specs, tfs_faults_from_opt() does the same), and capturing stderr around
 * a call, to check the messages a failure prints (each printed once, where
 * it is understood).
 *
 * No cmocka here (the fixture headers include it too): the callers assert
 * on the results; a capture that cannot be set up aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/faultdev.h"
#include "lib/printbuf.h"

/*
 * Adds a rule ("write tag=data nth=1 fail=EIO") to fault device b; the
 * rule's index, or the error, printed with why.
 */
static inline int fault_test_add_rule(struct tfs_bdev *b, const char *words)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_faultdev_add_rule_str(b, words, &err);

	if (ret < 0)
		fprintf(stderr, "rule %s: %s\n", words, printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}

/* stderr, redirected to a temporary file between start and end. */
struct stderr_capture {
	int saved, fd;
	char path[64];
};

/* Sends stderr (fd 2) to a new temporary file; aborts if it cannot. */
static inline void stderr_capture_start(struct stderr_capture *c)
{
	snprintf(c->path, sizeof(c->path), "/tmp/tfs-stderr-XXXXXX");
	c->fd = mkstemp(c->path);
	if (c->fd < 0)
		abort();
	fflush(stderr);
	c->saved = dup(2);
	dup2(c->fd, 2);
}

/*
 * Restores stderr and returns what was printed meanwhile (its first 8 KiB,
 * in a static buffer that the next call reuses), echoed to stderr so the
 * test log still shows it.  The file is removed.
 */
static inline char *stderr_capture_end(struct stderr_capture *c)
{
	static char text[8192];
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	n = pread(c->fd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = 0;
	close(c->fd);
	unlink(c->path);
	fputs(text, stderr);
	return text;
}

#endif /* TFS_TESTS_UNIT_FAULT_TEST_H */
