/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_POSIX_TEST_H
#define TFS_TESTS_UNIT_POSIX_TEST_H

/*
 * Shared by the POSIX layer's tests: image files under a mkdtemp()
 * directory, formatted as mkfs.tinyfs does (super/format.h), initialized
 * by an open with the format flag (the root directory), then opened
 * through the fault device (every member), so tests add fault rules and
 * cut the power on fs->devs[i].bdev.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/fsck.h"
#include "fs/fs_types.h"
#include "fs/posix.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/faultdev.h"
#include "lib/printbuf.h"
#include "super/format.h"
#include "super/super.h"

#include "fault_test.h"
#include "image_test.h"
#include "scratch_dir.h"

#define PT_MAX_DEVS 4

struct pt_geometry {
	unsigned nr_devs;
	u64 size;	  /* per device; 0: 64 MiB */
	u32 bucket_size;  /* 0: mkfs's choice */
	u64 journal_size; /* 0: mkfs's choice */
	unsigned metadata_replicas, data_replicas, data_replicas_required;
	u8 error_action;
	u32 node_size; /* btree node bytes; 0: mkfs's choice */
};

struct pt {
	char dir[64];
	char path[PT_MAX_DEVS][128];
	const char *paths[PT_MAX_DEVS];
	unsigned nr;
	struct pt_geometry g;
	struct tfs_fs_opts opts;
	bool trace;		     /* fault devices keep a trace (power-cut tests) */
	char rule[PT_MAX_DEVS][128]; /* a fault rule each member's device starts with */
	struct tfs_fs *fs;
};

static const struct tfs_ctx pt_root_ctx = { .uid = 0, .gid = 0, .pid = 1 };

static inline int pt_format(struct pt *t)
{
	const struct pt_geometry *g = &t->g;
	struct tfs_format_opts o = { .time = 1700000000, .label = "posix" };
	struct test_image_geometry ig = {
		.nr_devs = g->nr_devs,
		.size = g->size,
		.bucket_size = g->bucket_size,
		.journal_size = g->journal_size,
		.dev_uuid_base = 0x60,
	};
	const char *paths[PT_MAX_DEVS];

	for (unsigned i = 0; i < 16; i++) {
		o.uuid[i] = (u8)(0x20 + i);
		o.user_uuid[i] = (u8)(0x40 + i);
	}
	o.metadata_replicas = (u8)(g->metadata_replicas ?: 1);
	o.metadata_replicas_required = 1;
	o.data_replicas = (u8)(g->data_replicas ?: 1);
	o.data_replicas_required = (u8)(g->data_replicas_required ?: 1);
	o.error_action = g->error_action;
	o.btree_node_size = g->node_size;
	for (unsigned i = 0; i < g->nr_devs; i++)
		paths[i] = t->path[i];
	return test_image_format(paths, &o, &ig, tfs_bdev_open_uring);
}

/* Every member through a fault device (no rules; a trace when t->trace). */
static inline void pt_register_faultdevs(struct pt *t)
{
	struct printbuf err = PRINTBUF;

	tfs_faultdev_registry_reset();
	for (unsigned i = 0; i < t->nr; i++) {
		struct printbuf spec = PRINTBUF;

		prt_printf(&spec, "dev %s trace=%s %s", t->path[i], t->trace ? "on" : "off",
			   t->rule[i]);
		if (tfs_faults_parse(printbuf_str(&spec), &err)) {
			fprintf(stderr, "fault spec: %s\n", printbuf_str(&err));
			abort();
		}
		printbuf_exit(&spec);
	}
	printbuf_exit(&err);
}

static inline int pt_open(struct pt *t)
{
	int ret;

	pt_register_faultdevs(t);
	ret = tfs_fs_open(t->paths, t->nr, &t->opts, &t->fs);
	if (ret)
		fprintf(stderr, "open: %s\n", tfs_err_str(ret));
	return ret;
}

static inline int pt_stop(struct pt *t)
{
	int ret = tfs_fs_stop(t->fs);

	t->fs = NULL;
	return ret;
}

static inline int pt_reopen(struct pt *t)
{
	return pt_stop(t) ?: pt_open(t);
}

/* Makes the images, initializes them (mkfs) and opens the filesystem. */
static inline int pt_mkfs(struct pt *t, const struct pt_geometry *g)
{
	int ret;

	memset(t, 0, sizeof(*t));
	t->g = *g;
	if (!t->g.nr_devs)
		t->g.nr_devs = 1;
	if (!t->g.size)
		t->g.size = 64ULL << 20;
	snprintf(t->dir, sizeof(t->dir), "/tmp/tfs-posix-XXXXXX");
	scratch_dir_make(t->dir);
	t->nr = t->g.nr_devs;
	for (unsigned i = 0; i < t->nr; i++) {
		char dir[sizeof(t->dir)], path[sizeof(t->path[i])];

		/* Built in locals, then copied: gcc's -Wrestrict (TSan build) sees t into t. */
		memcpy(dir, t->dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/img%u", dir, i);
		memcpy(t->path[i], path, sizeof(path));
		t->paths[i] = t->path[i];
	}
	tfs_fs_opts_default(&t->opts);
	ret = pt_format(t);
	if (ret)
		return ret;
	t->opts.format = true;
	tfs_faultdev_registry_reset();
	ret = tfs_fs_open(t->paths, t->nr, &t->opts, &t->fs);
	if (ret)
		fprintf(stderr, "mkfs open: %s\n", tfs_err_str(ret));
	ret = ret ?: pt_stop(t);
	t->opts.format = false;
	return ret ?: pt_open(t);
}

static inline void pt_cleanup(struct pt *t)
{
	if (t->fs)
		pt_stop(t);
	tfs_faultdev_registry_reset();
	scratch_dir_remove(t->dir);
}

/* Copies an image file, leaving zeros as holes (images are mostly empty). */
static inline void pt_copy_file(const char *from, const char *to)
{
	static char buf[1 << 16], zero[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	struct stat st;
	off_t off = 0;

	if (in < 0 || out < 0 || fstat(in, &st) || ftruncate(out, st.st_size))
		abort();
	for (;;) {
		ssize_t n = pread(in, buf, sizeof(buf), off);

		if (n < 0)
			abort();
		if (!n)
			break;
		if (memcmp(buf, zero, (size_t)n) && pwrite(out, buf, (size_t)n, off) != n)
			abort();
		off += n;
	}
	close(in);
	close(out);
}

static inline struct tfs_bdev *pt_bdev(struct pt *t, unsigned i)
{
	return t->fs->devs[i].bdev;
}

/* Adds a fault rule ("write tag=data nth=1 fail=EIO") to member i. */
static inline int pt_rule(struct pt *t, unsigned i, const char *words)
{
	return fault_test_add_rule(pt_bdev(t, i), words);
}

/* Convenience wrappers over fs.h with C strings. */
static inline int pt_mknod(struct pt *t, tfs_ino_t dir, const char *name, u32 mode,
			   struct tfs_stat *st)
{
	struct tfs_stat tmp;

	return tfs_mknod(t->fs, &pt_root_ctx, dir, name, strlen(name), mode, 0, st ?: &tmp);
}

static inline int pt_mkdir(struct pt *t, tfs_ino_t dir, const char *name, struct tfs_stat *st)
{
	struct tfs_stat tmp;

	return tfs_mkdir(t->fs, &pt_root_ctx, dir, name, strlen(name), 0755, st ?: &tmp);
}

static inline int pt_lookup(struct pt *t, tfs_ino_t dir, const char *name, struct tfs_stat *st)
{
	struct tfs_stat tmp;

	return tfs_lookup(t->fs, dir, name, strlen(name), st ?: &tmp);
}

static inline tfs_ino_t pt_ino(struct pt *t, tfs_ino_t dir, const char *name)
{
	struct tfs_stat st;

	return pt_lookup(t, dir, name, &st) ? 0 : st.ino;
}

static inline int pt_create(struct pt *t, tfs_ino_t dir, const char *name, struct tfs_file **f)
{
	struct tfs_stat st;

	return tfs_create(t->fs, &pt_root_ctx, dir, name, strlen(name), 0644, O_CREAT | O_RDWR, f,
			  &st);
}

static inline int pt_open_file(struct pt *t, tfs_ino_t dir, const char *name, int flags,
			       struct tfs_file **f)
{
	tfs_ino_t ino = pt_ino(t, dir, name);

	return ino ? tfs_open(t->fs, ino, flags, f) : -ENOENT;
}

/* Deterministic bytes for (seed, offset): what a test wrote where. */
static inline u8 pt_byte(u64 seed, u64 off)
{
	u64 x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ off * 0xbf58476d1ce4e5b9ULL;

	x ^= x >> 29;
	return (u8)(x ^ (x >> 17));
}

static inline void pt_fill(void *buf, size_t len, u64 seed, u64 off)
{
	for (size_t i = 0; i < len; i++)
		((u8 *)buf)[i] = pt_byte(seed, off + i);
}

/* --- fsck: what every test can check after recovery (fs/fsck.h) --- */

/* Checks fs (no repair); returns the number of problems (each printed). */
static inline unsigned pt_fsck(struct tfs_fs *fs)
{
	struct tfs_fsck_result res;
	int ret = tfs_fsck(fs, NULL, &res);

	if (ret) {
		fprintf(stderr, "fsck: %s\n", tfs_err_str(ret));
		return res.found + 1;
	}
	return res.found;
}

/* Runs a cmocka group; TFS_TEST_FILTER=NAME runs only the tests matching it. */
#define pt_run_tests(tests)                                                \
	({                                                                 \
		if (getenv("TFS_TEST_FILTER"))                             \
			cmocka_set_test_filter(getenv("TFS_TEST_FILTER")); \
		cmocka_run_group_tests(tests, NULL, NULL);                 \
	})

#endif /* TFS_TESTS_UNIT_POSIX_TEST_H */
