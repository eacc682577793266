// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for tests/unit/scratch_dir.h: a test that fails leaves no image
 * directory behind.  A child process runs a cmocka test that makes a
 * filesystem (fs_test.h's ft_mkfs(), in /dev/shm where there is one) and
 * then fails an assertion, skipping its ft_cleanup(); once the child has
 * exited, its directory must be gone -- unless TFS_KEEP_FAILED=1, when it
 * must still be there (and is removed here).  The child's FAILED lines in
 * the log are expected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/wait.h>

#include "fs_test.h"
#include "scratch_dir.h"

static int child_pipe = -1;

static void failing_test(void **state)
{
	struct ft t;
	struct ft_geometry g = { .nr_devs = 1, .size = 16 << 20, .shm = true };
	ssize_t w;

	assert_int_equal(ft_mkfs(&t, &g), 0);
	assert_int_equal(ft_open(&t), 0);
	w = write(child_pipe, t.dir, sizeof(t.dir));
	assert_int_equal(w, sizeof(t.dir));
	/* Fails here, as a test with a bug would: ft_cleanup() is never reached. */
	assert_int_equal(1, 2);
	ft_cleanup(&t);
}

/* Runs failing_test in a child (keep: TFS_KEEP_FAILED=1); its directory in dir. */
static void run_failing_child(bool keep, char *dir, size_t size)
{
	int fds[2], status;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		const struct CMUnitTest tests[] = { cmocka_unit_test(failing_test) };

		close(fds[0]);
		child_pipe = fds[1];
		if (keep)
			setenv("TFS_KEEP_FAILED", "1", 1);
		else
			unsetenv("TFS_KEEP_FAILED");
		fprintf(stderr, "(a child test that fails on purpose follows)\n");
		exit(cmocka_run_group_tests_name("failing_on_purpose", tests, NULL, NULL) ? 0 : 1);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], dir, size), (ssize_t)size);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* Exit 0: its test failed, as meant. */
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_failed_test_leaves_nothing(void **state)
{
	char dir[sizeof(((struct ft *)0)->dir)];

	run_failing_child(false, dir, sizeof(dir));
	assert_true(dir[0] == '/');
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_keep_failed(void **state)
{
	char dir[sizeof(((struct ft *)0)->dir)], img[sizeof(dir) + 8];

	run_failing_child(true, dir, sizeof(dir));
	snprintf(img, sizeof(img), "%s/img0", dir);
	assert_int_equal(access(img, F_OK), 0);
	scratch_dir_remove(dir);
	assert_int_equal(access(dir, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_test_leaves_nothing),
		cmocka_unit_test(test_keep_failed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
