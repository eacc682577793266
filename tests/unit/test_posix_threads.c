// SPDX-License-Identifier: GPL-2.0
/*
 * Threads (fs/fs.h: "every function may be called from any thread at
 * once"): several threads create, link, unlink, rename (across
 * directories, directories into each other, RENAME_EXCHANGE), list, and
 * write and read their own part of one shared file, all at once.  Nothing
 * deadlocks (the test ends), every thread's data is intact, the tree never
 * gets a directory under itself, and the test fsck finds nothing after
 * the run and after a reopen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "posix_test.h"

#define NR_THREADS 4
#define NR_DIRS 3
#define REGION (48 << 10)

static struct pt T;
static tfs_ino_t dirs[NR_DIRS];
static tfs_ino_t shared_ino;
static unsigned steps;

static int noop_fill(void *ctx, const char *name, size_t len, tfs_ino_t ino, unsigned dtype,
		     u64 next)
{
	(*(unsigned *)ctx)++;
	return 0;
}

struct worker {
	unsigned id;
	u64 rng;
	int err;
};

static u64 wrnd(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

/* Codes a racing operation may legitimately get. */
static bool expected_race(int ret)
{
	return ret >= 0 || ret == -ENOENT || ret == -EEXIST || ret == -ENOTEMPTY ||
	       ret == -EINVAL || ret == -ENOTDIR || ret == -EISDIR;
}

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	struct tfs_file *shared;
	u8 *buf = malloc(REGION), *rb = malloc(REGION);
	char a[32], b[32];
	int ret;

	ret = tfs_open(T.fs, shared_ino, O_RDWR, &shared);
	if (ret) {
		w->err = ret;
		goto out;
	}
	for (unsigned s = 0; s < steps && !w->err; s++) {
		unsigned op = (unsigned)(wrnd(w) % 10);
		tfs_ino_t d1 = dirs[wrnd(w) % NR_DIRS], d2 = dirs[wrnd(w) % NR_DIRS];
		struct tfs_stat st;
		unsigned n = 0;

		snprintf(a, sizeof(a), "t%u-%u", w->id, (unsigned)(wrnd(w) % 8));
		snprintf(b, sizeof(b), "%c%u-%u", wrnd(w) % 2 ? 't' : 'd',
			 (unsigned)(wrnd(w) % NR_THREADS), (unsigned)(wrnd(w) % 8));
		switch (op) {
		case 0:
			ret = tfs_mknod(T.fs, &pt_root_ctx, d1, a, strlen(a), S_IFREG | 0644, 0,
					&st);
			break;
		case 1:
			snprintf(a, sizeof(a), "d%u-%u", w->id, (unsigned)(wrnd(w) % 8));
			ret = tfs_mkdir(T.fs, &pt_root_ctx, d1, a, strlen(a), 0755, &st);
			break;
		case 2:
			ret = tfs_unlink(T.fs, d1, a, strlen(a));
			break;
		case 3:
			ret = tfs_rmdir(T.fs, d1, b, strlen(b));
			break;
		case 4:
		case 5:
			ret = tfs_rename(T.fs, d1, b, strlen(b), d2, b, strlen(b),
					 wrnd(w) % 3 ? 0 : TFS_RENAME_EXCHANGE);
			break;
		case 6:
			/* A directory into another one's subtree (or itself): EINVAL when looping. */
			ret = tfs_lookup(T.fs, d2, b, strlen(b), &st);
			if (!ret && S_ISDIR(st.mode))
				ret = tfs_rename(T.fs, d1, b, strlen(b), st.ino, a, strlen(a), 0);
			break;
		case 7:
			ret = tfs_lookup(T.fs, d1, b, strlen(b), &st);
			if (!ret && !S_ISDIR(st.mode))
				ret = tfs_link(T.fs, st.ino, d2, a, strlen(a), &st);
			break;
		case 8:
			ret = tfs_readdir(T.fs, d1, 0, noop_fill, &n);
			break;
		default:
			/* This thread's region of the shared file: write, read back. */
			pt_fill(buf, REGION, w->id * 1000 + s, 0);
			ret = (int)tfs_write(T.fs, shared, buf, REGION, (u64)w->id * REGION);
			if (ret == REGION)
				ret = (int)tfs_read(T.fs, shared, rb, REGION, (u64)w->id * REGION);
			if (ret == REGION && memcmp(rb, buf, REGION))
				ret = -EILSEQ;
			if (ret == REGION && !(s % 4))
				ret = tfs_fsync(T.fs, shared, false);
			break;
		}
		if (!expected_race(ret)) {
			fprintf(stderr, "thread %u step %u op %u: %s\n", w->id, s, op,
				tfs_err_str(ret));
			w->err = ret;
		}
	}
	/* Leave the region with known bytes. */
	pt_fill(buf, REGION, w->id, 0);
	if (!w->err && tfs_write(T.fs, shared, buf, REGION, (u64)w->id * REGION) != REGION)
		w->err = -EIO;
	tfs_release(T.fs, shared);
out:
	free(buf);
	free(rb);
	return NULL;
}

static void check_shared(void)
{
	u8 *buf = malloc(REGION), *want = malloc(REGION);
	struct tfs_file *f;

	assert_int_equal(tfs_open(T.fs, shared_ino, O_RDONLY, &f), 0);
	for (unsigned i = 0; i < NR_THREADS; i++) {
		pt_fill(want, REGION, i, 0);
		assert_int_equal(tfs_read(T.fs, f, buf, REGION, (u64)i * REGION), REGION);
		assert_memory_equal(buf, want, REGION);
	}
	assert_int_equal(tfs_release(T.fs, f), 0);
	free(buf);
	free(want);
}

static void test_threads(void **state)
{
	struct pt_geometry g = { .size = 128ULL << 20 };
	pthread_t th[NR_THREADS];
	struct worker w[NR_THREADS];
	struct tfs_stat st;
	char name[8];

	steps = getenv("TFS_LONG") ? 200000 : 1500;
	assert_int_equal(pt_mkfs(&T, &g), 0);
	for (unsigned i = 0; i < NR_DIRS; i++) {
		snprintf(name, sizeof(name), "D%u", i);
		assert_int_equal(pt_mkdir(&T, 1, name, &st), 0);
		dirs[i] = st.ino;
	}
	assert_int_equal(pt_mknod(&T, 1, "shared", S_IFREG | 0644, &st), 0);
	shared_ino = st.ino;
	for (unsigned i = 0; i < NR_THREADS; i++) {
		w[i] = (struct worker){ .id = i, .rng = 0x1234567ULL * (i + 1) };
		assert_int_equal(pthread_create(&th[i], NULL, worker_fn, &w[i]), 0);
	}
	for (unsigned i = 0; i < NR_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].err, 0);
	}
	check_shared();
	assert_int_equal(pt_fsck(T.fs), 0);
	/* No directory under itself: every directory reaches the root. */
	for (unsigned i = 0; i < NR_DIRS; i++) {
		tfs_ino_t d = dirs[i];

		for (unsigned depth = 0; d != TFS_ROOT_INO; depth++) {
			assert_true(depth < 1000);
			assert_int_equal(tfs_lookup(T.fs, d, "..", 2, &st), 0);
			d = st.ino;
		}
	}
	assert_int_equal(pt_reopen(&T), 0);
	check_shared();
	assert_int_equal(pt_fsck(T.fs), 0);
	pt_cleanup(&T);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads),
	};

	return pt_run_tests(tests);
}
