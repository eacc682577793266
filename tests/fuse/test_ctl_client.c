// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fuse/ctl_client.c's tfs_ctl_request(), against a stand-in
 * daemon (a thread on the control socket under $TFS_RUN_DIR) that answers
 * one request with a canned reply.  No mount needed.
 *
 * The semantics checked: an answer is appended to out and 0 returned; a
 * daemon's refusal (a reply starting TFS_CTL_ERROR) is an error code,
 * -TFS_ERR_ctl_request_refused, with the daemon's reason in err and
 * nothing in out -- not a string the caller has to recognise; no daemon is
 * the connect's errno, with a hint in err.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "fuse/ctl.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "scratch_dir.h"

static char run_dir[64];
static dev_t test_dev;

struct fake_daemon {
	int fd;
	const char *reply;
	char request[128];
	pthread_t thread;
};

static void *fake_daemon_serve(void *p)
{
	struct fake_daemon *d = p;
	int c = accept(d->fd, NULL, NULL);
	size_t len = 0;
	ssize_t n;

	if (c < 0)
		return NULL;
	/* To the end of the line, as the daemon reads (fuse/ctl.c). */
	while (len < sizeof(d->request) - 1 && !strchr(d->request, '\n')) {
		n = read(c, d->request + len, sizeof(d->request) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (write(c, d->reply, strlen(d->reply)) < 0)
		d->request[0] = '\0';
	close(c);
	return NULL;
}

/* Listens on test_dev's control socket; serves one request with reply. */
static void fake_daemon_start(struct fake_daemon *d, const char *reply)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct printbuf path = PRINTBUF;

	memset(d, 0, sizeof(*d));
	d->reply = reply;
	tfs_ctl_socket_path(&path, test_dev);
	assert_true(strlen(printbuf_str(&path)) < sizeof(addr.sun_path));
	memcpy(addr.sun_path, printbuf_str(&path), strlen(printbuf_str(&path)) + 1);
	unlink(addr.sun_path);
	d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(d->fd >= 0);
	assert_int_equal(bind(d->fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(d->fd, 1), 0);
	assert_int_equal(pthread_create(&d->thread, NULL, fake_daemon_serve, d), 0);
	printbuf_exit(&path);
}

static void fake_daemon_stop(struct fake_daemon *d)
{
	struct printbuf path = PRINTBUF;

	assert_int_equal(pthread_join(d->thread, NULL), 0);
	close(d->fd);
	tfs_ctl_socket_path(&path, test_dev);
	unlink(printbuf_str(&path));
	printbuf_exit(&path);
}

static void test_answer(void **state)
{
	struct fake_daemon d;
	struct printbuf out = PRINTBUF, err = PRINTBUF;

	fake_daemon_start(&d, "fs:\n  commits: 3\n");
	assert_int_equal(tfs_ctl_request(test_dev, "stats fs", &out, &err), 0);
	fake_daemon_stop(&d);
	assert_string_equal(d.request, "stats fs\n");
	assert_string_equal(printbuf_str(&out), "fs:\n  commits: 3\n");
	assert_string_equal(printbuf_str(&err), "");
	printbuf_exit(&out);
	printbuf_exit(&err);
}

static void test_refused(void **state)
{
	struct fake_daemon d;
	struct printbuf out = PRINTBUF, err = PRINTBUF;
	int ret;

	fake_daemon_start(&d, TFS_CTL_ERROR "unknown section \"nosuch\"\n");
	ret = tfs_ctl_request(test_dev, "stats nosuch", &out, &err);
	fake_daemon_stop(&d);
	assert_int_equal(ret, -TFS_ERR_ctl_request_refused);
	assert_true(tfs_err_matches(ret, EINVAL));
	assert_string_equal(printbuf_str(&out), "");
	assert_non_null(strstr(printbuf_str(&err), "unknown section \"nosuch\""));
	assert_null(strchr(printbuf_str(&err), '\n'));
	printbuf_exit(&out);
	printbuf_exit(&err);
}

static void test_no_daemon(void **state)
{
	struct printbuf out = PRINTBUF, err = PRINTBUF;

	assert_int_equal(tfs_ctl_request(test_dev, "stats fs", &out, &err), -ENOENT);
	assert_non_null(strstr(printbuf_str(&err), "is the daemon running?"));
	assert_string_equal(printbuf_str(&out), "");
	printbuf_exit(&out);
	printbuf_exit(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_no_daemon),
	};
	int ret;

	test_dev = makedev(250, 7);
	snprintf(run_dir, sizeof(run_dir), "/tmp/tfs-ctl-XXXXXX");
	scratch_dir_make(run_dir);
	setenv("TFS_RUN_DIR", run_dir, 1);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	scratch_dir_remove(run_dir);
	return ret;
}
