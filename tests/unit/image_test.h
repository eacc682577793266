/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_IMAGE_TEST_H
#define TFS_TESTS_UNIT_IMAGE_TEST_H

/*
 * Image files formatted as mkfs.tinyfs would, for the test fixtures
 * (fs_test.h, posix_test.h): what differs between them -- the format
 * options, the seed of the member uuids, how a device is opened -- is a
 * parameter.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/format.h"
#include "super/super.h"

#define TEST_IMAGE_MAX_DEVS 4

struct test_image_geometry {
	unsigned nr_devs; /* <= TEST_IMAGE_MAX_DEVS */
	u64 size;	  /* per device */
	u32 bucket_size;  /* 0: mkfs's choice */
	u64 journal_size; /* 0: mkfs's choice */
	u8 dev_uuid_base; /* member i's uuid bytes: base + 16 * i + k */
	/*
	 * Every byte written once (zeros) before mkfs: no holes, as on a
	 * disk.  On a file system a durable write into a hole also allocates
	 * (a metadata commit of its own): benchmarks want this.
	 */
	bool written;
};

/*
 * Creates paths[0 .. nr_devs) (g->size each) and formats them with
 * o, opening each device with open_dev; 0 or the first error (printed).
 */
static inline int test_image_format(const char *const *paths, const struct tfs_format_opts *o,
				    const struct test_image_geometry *g,
				    int (*open_dev)(const char *, unsigned, struct tfs_bdev **))
{
	struct tfs_format_dev d[TEST_IMAGE_MAX_DEVS];
	struct tfs_sb_handle hs[TEST_IMAGE_MAX_DEVS];
	struct tfs_sb_handle *hps[TEST_IMAGE_MAX_DEVS];
	struct printbuf err = PRINTBUF;
	int ret;

	if (g->nr_devs > TEST_IMAGE_MAX_DEVS)
		abort();
	memset(d, 0, sizeof(d));
	memset(hs, 0, sizeof(hs));
	for (unsigned i = 0; i < g->nr_devs; i++) {
		int fd = open(paths[i], O_CREAT | O_RDWR | O_TRUNC, 0600);

		if (fd < 0 || ftruncate(fd, (off_t)g->size))
			abort();
		if (g->written) {
			static const u8 zero[1 << 16];

			for (u64 off = 0; off < g->size; off += sizeof(zero))
				if (pwrite(fd, zero, min_t(u64, sizeof(zero), g->size - off),
					   (off_t)off) < 0)
					abort();
			if (fsync(fd))
				abort();
		}
		close(fd);
		d[i].name = paths[i];
		d[i].size = g->size;
		d[i].logical_block_size = 512;
		d[i].bucket_size = g->bucket_size;
		d[i].journal_size = g->journal_size;
		for (unsigned k = 0; k < 16; k++)
			d[i].uuid[k] = (u8)(g->dev_uuid_base + 16 * i + k);
	}
	ret = tfs_format_plan(o, d, g->nr_devs, hs, &err);
	for (unsigned i = 0; !ret && i < g->nr_devs; i++) {
		ret = open_dev(paths[i], 0, &hs[i].bdev);
		hs[i].owns_bdev = true;
		hps[i] = &hs[i];
	}
	if (!ret)
		ret = tfs_format_write(hps, g->nr_devs, &err);
	if (ret)
		fprintf(stderr, "format: %s: %s\n", tfs_err_str(ret), printbuf_str(&err));
	for (unsigned i = 0; i < g->nr_devs; i++)
		tfs_sb_exit(&hs[i]);
	printbuf_exit(&err);
	return ret;
}

#endif /* TFS_TESTS_UNIT_IMAGE_TEST_H */
