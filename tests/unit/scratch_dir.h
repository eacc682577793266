/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_SCRATCH_DIR_H
#define TFS_TESTS_UNIT_SCRATCH_DIR_H

/*
 * The test fixtures' scratch directories (fs_test.h, posix_test.h,
 * journal_test.h, the fault harnesses): where image files go.
 *
 * A failed cmocka assertion jumps out of the test, past the cleanup at its
 * end, and the images (tens of MiB each, in /dev/shm) stayed behind.  So
 * every directory scratch_dir_make() creates is remembered until
 * scratch_dir_remove() removes it (with everything in it), and at exit
 * whatever a failed test left is removed too.  Set TFS_KEEP_FAILED=1 to
 * keep those for debugging: each one kept is printed on stderr ("kept
 * DIR").  Only the process that made a directory removes it at exit (a
 * test's forked child exiting leaves its parent's alone).  A process
 * killed by a signal cmocka does not catch (a meson timeout's SIGTERM,
 * abort()) still leaves its directories.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define SCRATCH_DIRS_MAX 64

static struct {
	pthread_mutex_t lock;
	bool atexit_set;
	pid_t pid[SCRATCH_DIRS_MAX]; /* the maker: a forked child's exit removes none */
	char dir[SCRATCH_DIRS_MAX][128];
} scratch_dirs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static inline int scratch_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		fprintf(stderr, "scratch_dir: removing %s: %s\n", path, strerror(errno));
	return 0;
}

/* Removes dir and everything below it (no error if it is gone). */
static inline void scratch_rm_rf(const char *dir)
{
	if (access(dir, F_OK))
		return;
	nftw(dir, scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir's slot, or -1; under the lock. */
static inline int scratch_dir_find(const char *dir)
{
	for (int i = 0; i < SCRATCH_DIRS_MAX; i++)
		if (scratch_dirs.dir[i][0] && !strcmp(scratch_dirs.dir[i], dir))
			return i;
	return -1;
}

static inline void scratch_dirs_at_exit(void)
{
	const char *keep = getenv("TFS_KEEP_FAILED");
	bool kept = keep && *keep && strcmp(keep, "0");

	pthread_mutex_lock(&scratch_dirs.lock);
	for (unsigned i = 0; i < SCRATCH_DIRS_MAX; i++) {
		if (!scratch_dirs.dir[i][0] || scratch_dirs.pid[i] != getpid())
			continue;
		if (kept)
			fprintf(stderr, "kept %s (TFS_KEEP_FAILED)\n", scratch_dirs.dir[i]);
		else
			scratch_rm_rf(scratch_dirs.dir[i]);
		scratch_dirs.dir[i][0] = 0;
	}
	pthread_mutex_unlock(&scratch_dirs.lock);
}

/*
 * mkdtemp(tmpl) (tmpl ends in XXXXXX, at most 127 bytes), remembered for
 * the removal at exit.  Aborts when it cannot create it: no test can run.
 */
static inline void scratch_dir_make(char *tmpl)
{
	int free_slot = -1;

	if (!mkdtemp(tmpl)) {
		fprintf(stderr, "mkdtemp %s: %s\n", tmpl, strerror(errno));
		abort();
	}
	pthread_mutex_lock(&scratch_dirs.lock);
	if (!scratch_dirs.atexit_set)
		scratch_dirs.atexit_set = !atexit(scratch_dirs_at_exit);
	for (int i = 0; i < SCRATCH_DIRS_MAX && free_slot < 0; i++)
		if (!scratch_dirs.dir[i][0])
			free_slot = i;
	if (free_slot >= 0 && strlen(tmpl) < sizeof(scratch_dirs.dir[0])) {
		snprintf(scratch_dirs.dir[free_slot], sizeof(scratch_dirs.dir[0]), "%s", tmpl);
		scratch_dirs.pid[free_slot] = getpid();
	} else
		fprintf(stderr, "scratch_dir: %s not remembered (too many or too long)\n", tmpl);
	pthread_mutex_unlock(&scratch_dirs.lock);
}

/* Removes dir with everything in it, and forgets it. */
static inline void scratch_dir_remove(const char *dir)
{
	int i;

	scratch_rm_rf(dir);
	pthread_mutex_lock(&scratch_dirs.lock);
	i = scratch_dir_find(dir);
	if (i >= 0)
		scratch_dirs.dir[i][0] = 0;
	pthread_mutex_unlock(&scratch_dirs.lock);
}

#endif /* TFS_TESTS_UNIT_SCRATCH_DIR_H */
