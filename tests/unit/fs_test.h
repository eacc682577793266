/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_FS_TEST_H
#define TFS_TESTS_UNIT_FS_TEST_H

/*
 * Shared by the engine's tests: image files under a mkdtemp() directory,
 * formatted as mkfs.tinyfs does (super/format.h), then initialized by an
 * open with the format flag; opening and stopping the filesystem on them.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/btree.h"
#include "fs/fs.h"
#include "fs/fs_types.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/format.h"
#include "super/super.h"

#include "image_test.h"
#include "scratch_dir.h"

#define FT_MAX_DEVS 4

struct ft {
	char dir[64];
	char path[FT_MAX_DEVS][128];
	const char *paths[FT_MAX_DEVS];
	unsigned nr;
	struct tfs_fs_opts opts;
	struct tfs_fs *fs;
};

struct ft_geometry {
	unsigned nr_devs;
	u64 size;	  /* per device */
	u32 bucket_size;  /* 0: mkfs's choice */
	u64 journal_size; /* 0: mkfs's choice */
	unsigned replicas;
	bool shm;     /* images in /dev/shm when it exists */
	bool written; /* no holes (test_image_geometry.written) */
};

/* Formats nr image files as mkfs.tinyfs would; 0 or the first error (printed). */
static inline int ft_format(struct ft *t, const struct ft_geometry *g)
{
	struct tfs_format_opts o = { .time = 1700000000, .label = "engine" };
	struct test_image_geometry ig = {
		.nr_devs = g->nr_devs,
		.size = g->size,
		.bucket_size = g->bucket_size,
		.journal_size = g->journal_size,
		.dev_uuid_base = 0x50,
		.written = g->written,
	};
	const char *paths[FT_MAX_DEVS];

	for (unsigned i = 0; i < 16; i++) {
		o.uuid[i] = (u8)(0x10 + i);
		o.user_uuid[i] = (u8)(0x30 + i);
	}
	o.metadata_replicas = (u8)(g->replicas ?: 1);
	o.metadata_replicas_required = 1;
	for (unsigned i = 0; i < g->nr_devs; i++)
		paths[i] = t->path[i];
	return test_image_format(paths, &o, &ig, tfs_bdev_open);
}

static inline int ft_open(struct ft *t)
{
	int ret = tfs_fs_open(t->paths, t->nr, &t->opts, &t->fs);

	if (ret)
		fprintf(stderr, "open: %s\n", tfs_err_str(ret));
	return ret;
}

static inline int ft_stop(struct ft *t)
{
	int ret = tfs_fs_stop(t->fs);

	t->fs = NULL;
	return ret;
}

/* Makes the images and initializes the filesystem (what mkfs.tinyfs does). */
static inline int ft_mkfs(struct ft *t, const struct ft_geometry *g)
{
	int ret;

	memset(t, 0, sizeof(*t));
	/* /dev/shm where there is one: device flushes cost nothing there. */
	snprintf(t->dir, sizeof(t->dir), "%s/tfs-engine-XXXXXX",
		 g->shm && !access("/dev/shm", W_OK) ? "/dev/shm" : "/tmp");
	scratch_dir_make(t->dir);
	t->nr = g->nr_devs;
	for (unsigned i = 0; i < g->nr_devs; i++) {
		char dir[sizeof(t->dir)];

		memcpy(dir, t->dir, sizeof(dir)); /* not from t into t: -Wrestrict */
		snprintf(t->path[i], sizeof(t->path[i]), "%s/img%u", dir, i);
		t->paths[i] = t->path[i];
	}
	tfs_fs_opts_default(&t->opts);
	ret = ft_format(t, g);
	if (ret)
		return ret;
	t->opts.format = true;
	ret = ft_open(t);
	if (!ret) {
		/* The engine's tests start from empty trees: drop mkfs's root directory. */
		struct tfs_btree_trans trans;

		tfs_trans_init(&trans, t->fs);
		ret = tfs_trans_delete(&trans, TFS_BTREE_inodes, TFS_POS(TFS_ROOT_INO, 0))
			      ?: tfs_trans_commit(&trans, 0, NULL);
		tfs_trans_exit(&trans);
		ret = ft_stop(t) ?: ret;
	}
	t->opts.format = false;
	return ret;
}

static inline void ft_cleanup(struct ft *t)
{
	if (t->fs)
		ft_stop(t);
	scratch_dir_remove(t->dir);
}

/* Sum of a btree counter over every btree. */
#define ft_btree_counter_sum(fs, field)                           \
	({                                                        \
		u64 _s = 0;                                       \
		for (unsigned _id = 0; _id < TFS_BTREE_NR; _id++) \
			_s += (fs)->btrees[_id].c.field;          \
		_s;                                               \
	})

#endif /* TFS_TESTS_UNIT_FS_TEST_H */
