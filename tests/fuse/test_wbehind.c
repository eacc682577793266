// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fuse/wbehind.c on an engine opened in the process (no mount):
 * what a wait for an inode's writes behind owes the thread that waits.
 *
 * The reading thread of the daemon serves small reads itself with a wait
 * hook set (tfs_bdev_set_wait_hook(), fuse/loop.c): before it would block,
 * it hands the reading of /dev/fuse to another thread.  A read waits for
 * the inode's writes behind first, so that wait must call the hook too:
 * a write queued after the reader found the inode idle would otherwise
 * hold every other request until the device finished it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fuse/tfs_fuse.h"

#include "fault_test.h"
#include "posix_test.h"

static struct pt T;

/* Queueing needs WB_SPACE_MARGIN (256 MiB) free beyond the queue. */
#define IMAGE_SIZE (384ULL << 20)
#define QUEUE_BYTES (1ULL << 20)

static int setup(void **state)
{
	struct pt_geometry g = { .size = IMAGE_SIZE };

	(void)state;
	return pt_mkfs(&T, &g);
}

static int teardown(void **state)
{
	(void)state;
	pt_cleanup(&T);
	return 0;
}

static unsigned hook_calls;
static bool hook_saw_pending;
static struct tfs_wbehind *hook_wb;
static u64 hook_ino;

static void count_wait(void *arg)
{
	(void)arg;
	hook_calls++;
	/* Called before the wait, not after it: the write is still running. */
	hook_saw_pending = tfs_wbehind_busy(hook_wb, hook_ino);
}

static void test_wait_calls_the_wait_hook_first(void **state)
{
	static char data[4096];
	_Atomic u64 eio = 0;
	struct tfs_wbehind *wb;
	struct tfs_file *f;
	u64 ino;

	(void)state;
	assert_int_equal(pt_create(&T, TFS_ROOT_INO, "a", &f), 0);
	ino = tfs_file_ino(f);
	wb = tfs_wbehind_start(T.fs, &eio, QUEUE_BYTES);
	assert_non_null(wb);
	hook_wb = wb;
	hook_ino = ino;

	/* Nothing behind: the hook stays unused (no hand-off for nothing). */
	hook_calls = 0;
	tfs_bdev_set_wait_hook(count_wait, NULL);
	assert_int_equal(tfs_wbehind_wait(wb, ino, false), 0);
	tfs_bdev_set_wait_hook(NULL, NULL);
	assert_int_equal(hook_calls, 0);

	/* A write behind that takes the device 300 ms. */
	assert_int_equal(pt_rule(&T, 0, "write tag=data nth=1 delay=300"), 0);
	memset(data, 'w', sizeof(data));
	assert_true(tfs_wbehind_write(wb, ino, f, data, sizeof(data), 0));
	assert_true(tfs_wbehind_busy(wb, ino));

	hook_calls = 0;
	tfs_bdev_set_wait_hook(count_wait, NULL);
	assert_int_equal(tfs_wbehind_wait(wb, ino, false), 0);
	tfs_bdev_set_wait_hook(NULL, NULL);
	assert_int_equal(hook_calls, 1);
	assert_true(hook_saw_pending);
	/* ... and it still waited for the write. */
	assert_false(tfs_wbehind_busy(wb, ino));
	{
		char back[sizeof(data)];

		assert_int_equal(tfs_read(T.fs, f, back, sizeof(back), 0), sizeof(back));
		assert_memory_equal(back, data, sizeof(data));
	}

	tfs_wbehind_stop(wb);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wait_calls_the_wait_hook_first, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
