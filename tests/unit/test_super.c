// SPDX-License-Identifier: GPL-2.0
/* Tests for super/super.c: round trips through bdev, copies, fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/faultdev.h"
#include "lib/printbuf.h"
#include "lib/string.h"

#include "super/format.h"
#include "super/super.h"

#define DEV_SIZE (4ULL << 20)
#define MAXDEV 3

struct fixture {
	char dir[64];
	char path[MAXDEV][96];
	struct tfs_sb_handle hs[MAXDEV];
	struct tfs_sb_handle *hps[MAXDEV];
	unsigned nr;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_super.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	for (unsigned i = 0; i < MAXDEV; i++) {
		if (f->hs[i].bdev)
			tfs_bdev_close(f->hs[i].bdev);
		f->hs[i].bdev = NULL;
		tfs_sb_exit(&f->hs[i]);
		if (f->path[i][0])
			unlink(f->path[i]);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Makes nr image files and formats them as one filesystem. */
static void format(struct fixture *f, unsigned nr)
{
	struct tfs_format_opts o = { .time = 1700000000, .label = "round trip" };
	struct tfs_format_dev d[MAXDEV] = { 0 };
	struct printbuf err = PRINTBUF;

	for (unsigned i = 0; i < MAXDEV; i++) {
		if (f->hs[i].bdev)
			tfs_bdev_close(f->hs[i].bdev);
		f->hs[i].bdev = NULL;
		tfs_sb_exit(&f->hs[i]);
	}
	memset(o.uuid, 0x11, 16);
	memset(o.user_uuid, 0x22, 16);
	o.metadata_replicas = (u8)nr;
	for (unsigned i = 0; i < nr; i++) {
		int fd;

		snprintf(f->path[i], sizeof(f->path[i]), "%s/dev%u.img", f->dir, i);
		fd = open(f->path[i], O_CREAT | O_RDWR | O_TRUNC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)(DEV_SIZE * (i + 1))), 0);
		close(fd);
		d[i].size = DEV_SIZE * (i + 1);
		memset(d[i].uuid, 0x30 + i, 16);
		d[i].label = i ? "second" : "first";
		d[i].durability_set = true;
		d[i].durability = (u8)(i + 1);
	}
	f->nr = nr;
	assert_int_equal(tfs_format_plan(&o, d, nr, f->hs, &err), 0);
	for (unsigned i = 0; i < nr; i++) {
		assert_int_equal(tfs_bdev_open(f->path[i], 0, &f->hs[i].bdev), 0);
		f->hps[i] = &f->hs[i];
	}
	assert_int_equal(tfs_format_write(f->hps, nr, &err), 0);
	assert_string_equal(printbuf_str(&err), "");
	printbuf_exit(&err);
}

static void read_dev(struct fixture *f, unsigned i, struct tfs_sb_handle *h)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_sb_open(f->path[i], TFS_BDEV_RDONLY, h, &err);

	if (ret)
		print_error("%s\n", printbuf_str(&err));
	assert_int_equal(ret, 0);
	printbuf_exit(&err);
}

static void test_round_trip_one(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	unsigned nr;

	format(f, 1);
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), 1);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	assert_int_equal(h.copies_bad, 0);
	/* What was written is what is read, byte for byte. */
	assert_int_equal(tfs_sb_bytes(h.sb), tfs_sb_bytes(f->hs[0].sb));
	assert_memory_equal(h.sb, f->hs[0].sb, tfs_sb_bytes(h.sb));
	assert_string_equal(h.sb->label, "round trip");

	u64 *jb;
	const struct tfs_member *m = tfs_sb_this_member(h.sb);

	/* mkfs's journal is one range right after the superblock area. */
	assert_int_equal(tfs_sb_journal_buckets(h.sb, &jb, &nr), 0);
	assert_int_equal(nr, TFS_JOURNAL_MIN_BUCKETS);
	assert_int_equal(tfs_sb_journal_nr_ranges(tfs_sb_journal(h.sb)), 1);
	for (unsigned i = 0; i < nr; i++)
		assert_int_equal(jb[i], le64_to_cpu(m->first_bucket) + i);
	free(jb);
	assert_int_equal(tfs_sb_bucket_size(h.sb), 16384);
	assert_int_equal(le64_to_cpu(m->nbuckets) * 16384, DEV_SIZE);

	/* Change, write, read again: seq bumped, the change kept. */
	u64 b[9] = { 20, 7, 30, 8, 9, 10, 11, 12, 13 };

	assert_int_equal(tfs_sb_set_journal_buckets(&f->hs[0], b, 9), 0);
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_sb_write(&f->hs[0], &err), 0);
	tfs_sb_exit(&h);
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), 2);
	/* Stored as its runs: 20, 7, 30, 8-13; expanded back in ring order. */
	assert_int_equal(tfs_sb_journal_nr_ranges(tfs_sb_journal(h.sb)), 4);
	assert_int_equal(tfs_sb_journal_nr_buckets(h.sb), 9);
	assert_int_equal(tfs_sb_journal_buckets(h.sb, &jb, &nr), 0);
	assert_int_equal(nr, 9);
	for (unsigned i = 0; i < 9; i++)
		assert_int_equal(jb[i], b[i]);
	free(jb);
	printbuf_exit(&err);
	tfs_sb_exit(&h);
}

static void test_round_trip_several(void **state)
{
	struct fixture *f = *state;

	format(f, 3);
	for (unsigned i = 0; i < 3; i++) {
		struct tfs_sb_handle h;

		read_dev(f, i, &h);
		assert_int_equal(h.sb->dev_idx, i);
		assert_int_equal(h.sb->nr_devices, 3);
		assert_int_equal(h.sb->metadata_replicas, 3);
		assert_memory_equal(h.sb, f->hs[i].sb, tfs_sb_bytes(h.sb));
		for (unsigned j = 0; j < 3; j++) {
			const struct tfs_member *m = tfs_sb_member(h.sb, j);

			assert_non_null(m);
			assert_int_equal(m->uuid[0], 0x30 + j);
			assert_int_equal(m->durability, j + 1);
			assert_int_equal(le64_to_cpu(m->nbuckets) * le32_to_cpu(m->bucket_size),
					 DEV_SIZE * (j + 1));
		}
		assert_string_equal(tfs_sb_this_member(h.sb)->label, i ? "second" : "first");
		assert_true(tfs_sb_journal_nr_buckets(h.sb) >= TFS_JOURNAL_MIN_BUCKETS);
		tfs_sb_exit(&h);
	}
	/* Writing all bumps every member to the same seq. */
	struct printbuf err = PRINTBUF;

	f->hs[1].sb->seq = cpu_to_le64(7);
	assert_int_equal(tfs_sb_write_all(f->hps, 3, &err), 0);
	for (unsigned i = 0; i < 3; i++) {
		struct tfs_sb_handle h;

		read_dev(f, i, &h);
		assert_int_equal(le64_to_cpu(h.sb->seq), 8);
		tfs_sb_exit(&h);
	}
	printbuf_exit(&err);
}

static void poke(const char *path, u64 off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void peek(const char *path, u64 off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void test_backup_fallback(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	u8 byte = 0xff;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;

	format(f, 1);
	/* A byte of the primary's label: its checksum fails. */
	poke(f->path[0], TFS_SB_OFFSET + 70, &byte, 1);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, backup);
	assert_int_equal(h.copies_bad, 1);
	assert_string_equal(h.sb->label, "round trip");
	tfs_sb_exit(&h);

	/* And the other way round: a bad backup, the primary is used. */
	format(f, 1);
	poke(f->path[0], backup + 70, &byte, 1);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	assert_int_equal(h.copies_bad, 1);
	tfs_sb_exit(&h);
}

static void test_newest_seq_wins(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;
	char *old = malloc(4096);

	format(f, 1);
	peek(f->path[0], TFS_SB_OFFSET, old, 4096);
	assert_int_equal(tfs_sb_write(&f->hs[0], &err), 0);
	/* The primary goes back to seq 1 (as if its write was lost): backup wins. */
	poke(f->path[0], TFS_SB_OFFSET, old, 4096);
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), 2);
	assert_int_equal(h.read_offset, backup);
	assert_int_equal(h.copies_bad, 0);
	tfs_sb_exit(&h);
	free(old);
	printbuf_exit(&err);
}

static void test_bad_layout_sector(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	u8 zero[512] = { 0 }, byte = 0xff;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;

	format(f, 1);
	poke(f->path[0], TFS_SB_LAYOUT_OFFSET, zero, sizeof(zero));
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	tfs_sb_exit(&h);
	/* Layout gone and primary bad: the standard backup offset is still tried. */
	poke(f->path[0], TFS_SB_OFFSET + 70, &byte, 1);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, backup);
	assert_int_equal(h.sb->layout.nr_superblocks, 2);
	tfs_sb_exit(&h);
}

/* A GPT written over the first 17 KiB: the layout and the primary are gone. */
static void test_gpt_over_layout_and_primary(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	void *zero = calloc(1, 17408);
	struct printbuf err = PRINTBUF;
	u64 magic0 = 0, backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;

	format(f, 1);
	poke(f->path[0], 0, zero, 17408);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, backup);
	assert_string_equal(h.sb->label, "round trip");
	tfs_sb_exit(&h);
	/* And without the backup: the error names the layout too. */
	poke(f->path[0], backup + 8, &magic0, 8);
	assert_int_equal(tfs_sb_open(f->path[0], TFS_BDEV_RDONLY, &h, &err),
			 -TFS_ERR_invalid_sb_magic);
	assert_non_null(strstr(printbuf_str(&err), ": layout at 3584: layout: bad magic"));
	assert_non_null(strstr(printbuf_str(&err), ": superblock at 36864: bad magic"));
	printbuf_exit(&err);
	free(zero);
}

/*
 * A copy whose embedded layout differs from the (valid) layout sector is
 * not used: here the primary says nr_superblocks 1, so the backup would
 * never be written again.
 */
static void test_copy_layout_mismatch(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF;
	struct tfs_sb *sb = malloc(TFS_SB_MAX_SIZE_DEFAULT);
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;

	format(f, 1);
	memcpy(sb, f->hs[0].sb, TFS_SB_MAX_SIZE_DEFAULT);
	sb->layout.nr_superblocks = 1;
	sb->layout.sb_offset[1] = 0;
	sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&sb->layout));
	sb->seq = cpu_to_le64(5);
	sb->csum = cpu_to_le32(tfs_sb_csum(sb));
	poke(f->path[0], TFS_SB_OFFSET, sb, 4096);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, backup);
	assert_int_equal(h.copies_bad, 1);
	assert_int_equal(le64_to_cpu(h.sb->seq), 1);
	/* Writing from it updates both copies the layout lists. */
	tfs_bdev_close(h.bdev);
	assert_int_equal(tfs_bdev_open(f->path[0], 0, &h.bdev), 0);
	assert_int_equal(tfs_sb_write(&h, &err), 0);
	tfs_sb_exit(&h);
	/* Seq 2: the rejected copy's seq 5 counts for nothing. */
	peek(f->path[0], TFS_SB_OFFSET, sb, 4096);
	assert_int_equal(le64_to_cpu(sb->seq), 2);
	assert_int_equal(sb->layout.nr_superblocks, 2);
	peek(f->path[0], backup, sb, 4096);
	assert_int_equal(le64_to_cpu(sb->seq), 2);
	read_dev(f, 0, &h);
	assert_int_equal(h.copies_bad, 0);
	tfs_sb_exit(&h);
	free(sb);
	printbuf_exit(&err);
}

/*
 * mkfs of another filesystem (uuid and user_uuid bytes as given) on path,
 * then `writes` superblock writes: its copies get seq writes + 1.
 */
static void mkfs_other(const char *path, u8 uuid, u8 user_uuid, unsigned writes)
{
	struct tfs_format_opts o = { .time = 1600000000, .label = "older" };
	struct tfs_format_dev d = { .size = DEV_SIZE };
	struct tfs_sb_handle h = { 0 }, *hp = &h;
	struct printbuf err = PRINTBUF;
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)DEV_SIZE), 0);
	close(fd);
	memset(o.uuid, uuid, 16);
	memset(o.user_uuid, user_uuid, 16);
	memset(d.uuid, 0x77, 16);
	assert_int_equal(tfs_format_plan(&o, &d, 1, &h, &err), 0);
	assert_int_equal(tfs_bdev_open(path, 0, &h.bdev), 0);
	h.owns_bdev = true;
	assert_int_equal(tfs_format_write(&hp, 1, &err), 0);
	for (unsigned i = 0; i < writes; i++)
		assert_int_equal(tfs_sb_write(&h, &err), 0);
	assert_string_equal(printbuf_str(&err), "");
	tfs_sb_exit(&h);
	printbuf_exit(&err);
}

/* Reads device i into h with stderr captured into *out (malloc()ed). */
static void read_dev_stderr(struct fixture *f, unsigned i, struct tfs_sb_handle *h, char **out)
{
	char path[128];
	int saved, fd;
	off_t len;

	snprintf(path, sizeof(path), "%s/stderr.txt", f->dir);
	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	assert_true(saved >= 0 && fd >= 0);
	assert_true(dup2(fd, 2) >= 0);
	read_dev(f, i, h);
	fflush(stderr);
	assert_true(dup2(saved, 2) >= 0);
	close(saved);
	len = lseek(fd, 0, SEEK_END);
	*out = calloc(1, (size_t)len + 1);
	assert_non_null(*out);
	assert_int_equal(pread(fd, *out, (size_t)len, 0), len);
	close(fd);
	unlink(path);
}

/*
 * The layout sector, still valid, disagrees with the superblock copies,
 * which agree with each other (a stale or hand-edited sector): the copies
 * win, the warning names the field that differs, and every copy they list
 * is read.
 */
static void layout_sector_differs(struct fixture *f, void (*edit)(struct tfs_sb_layout *l),
				  const char *field)
{
	struct tfs_sb_handle h;
	struct tfs_sb_layout l;
	struct printbuf want = PRINTBUF;
	char *warn;

	format(f, 1);
	l = f->hs[0].sb->layout;
	edit(&l);
	l.csum = cpu_to_le32(tfs_sb_layout_csum(&l));
	poke(f->path[0], TFS_SB_LAYOUT_OFFSET, &l, sizeof(l));
	read_dev_stderr(f, 0, &h, &warn);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	assert_int_equal(h.copies_bad, 0);
	assert_memory_equal(&h.sb->layout, &f->hs[0].sb->layout, sizeof(l));
	prt_printf(&want,
		   "warning: %s: layout at 3584: %s; using the layout of the superblock copies\n",
		   f->path[0], field);
	assert_string_equal(warn, printbuf_str(&want));
	free(warn);
	tfs_sb_exit(&h);
	printbuf_exit(&want);
}

/*
 * A damaged (zeroed) or stale (valid, but not the copies' layout) layout
 * sector is rewritten by the next superblock write, and only it: the rest
 * of its block is left as it was.  Read again: no warning, the sector is
 * the copies' layout byte for byte.
 */
static void stale_layout_rewritten(struct fixture *f, void (*edit)(struct tfs_sb_layout *l))
{
	struct tfs_sb_handle h = { 0 };
	struct tfs_sb_layout l, got;
	struct printbuf err = PRINTBUF;
	u8 mark = 0x5a, back;
	char *warn;

	format(f, 1);
	memset(&l, 0, sizeof(l));
	if (edit) {
		l = f->hs[0].sb->layout;
		edit(&l);
		l.csum = cpu_to_le32(tfs_sb_layout_csum(&l));
	}
	poke(f->path[0], TFS_SB_LAYOUT_OFFSET, &l, sizeof(l));
	poke(f->path[0], 100, &mark, 1); /* not the layout's: kept */
	assert_int_equal(tfs_sb_open(f->path[0], 0, &h, &err), 0);
	assert_true(h.layout_stale);
	assert_int_equal(tfs_sb_write(&h, &err), 0);
	assert_string_equal(printbuf_str(&err), "");
	assert_false(h.layout_stale);
	tfs_sb_exit(&h);

	peek(f->path[0], TFS_SB_LAYOUT_OFFSET, &got, sizeof(got));
	assert_memory_equal(&got, &f->hs[0].sb->layout, sizeof(got));
	peek(f->path[0], 100, &back, 1);
	assert_int_equal(back, mark);
	read_dev_stderr(f, 0, &h, &warn);
	assert_string_equal(warn, "");
	assert_false(h.layout_stale);
	free(warn);
	tfs_sb_exit(&h);
	printbuf_exit(&err);
}

static void edit_nr(struct tfs_sb_layout *l)
{
	l->nr_superblocks = 1;
	l->sb_offset[1] = 0;
}

static void edit_max(struct tfs_sb_layout *l)
{
	l->sb_max_size = cpu_to_le32(16384);
}

static void edit_backup(struct tfs_sb_layout *l)
{
	l->sb_offset[1] = cpu_to_le64(69632);
}

static void edit_uuid(struct tfs_sb_layout *l)
{
	memset(l->uuid, 0x99, 16);
}

static void test_stale_layout_rewritten(void **state)
{
	stale_layout_rewritten(*state, NULL);
	stale_layout_rewritten(*state, edit_nr);
	stale_layout_rewritten(*state, edit_uuid);
}

static void test_layout_sector_differs(void **state)
{
	/* A sector of another filesystem, two copies of ours that agree: ours. */
	layout_sector_differs(*state, edit_uuid,
			      "uuid 99999999-9999-9999-9999-999999999999 differs from "
			      "11111111-1111-1111-1111-111111111111 in the superblock copies at "
			      "4096 and 36864");
	/* Only the primary is listed: the one copy read says two. */
	layout_sector_differs(*state, edit_nr,
			      "nr_superblocks 1 differs from 2 in the superblock copy at 4096");
	/* Both copies read, both valid, both say 32 KiB. */
	layout_sector_differs(
		*state, edit_max,
		"sb_max_size 16384 differs from 32768 in the superblock copies at 4096 and 36864");
	/* The backup is not where the sector says: the primary knows. */
	layout_sector_differs(
		*state, edit_backup,
		"sb_offset[1] 69632 differs from 36864 in the superblock copy at 4096");
}

/*
 * A stale backup of another filesystem (another mkfs on the device, a
 * higher seq, a valid checksum) is ignored with a warning naming both
 * offsets; the current filesystem's primary is used, and the next write
 * replaces the stale copy.
 */
static void graft_backup(struct fixture *f, u8 uuid, u8 user_uuid, const char *what,
			 const char *theirs, const char *ours)
{
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF, want = PRINTBUF;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;
	struct tfs_sb *sb = malloc(TFS_SB_MAX_SIZE_DEFAULT);
	char *warn;

	format(f, 1);
	snprintf(f->path[1], sizeof(f->path[1]), "%s/other.img", f->dir);
	mkfs_other(f->path[1], uuid, user_uuid, 4);
	peek(f->path[1], backup, sb, TFS_SB_MAX_SIZE_DEFAULT);
	/* On its own the grafted copy is valid, and newer. */
	assert_int_equal(le64_to_cpu(sb->seq), 5);
	assert_int_equal(tfs_sb_validate(sb, TFS_SB_MAX_SIZE_DEFAULT, DEV_SIZE, &err), 0);
	poke(f->path[0], backup, sb, TFS_SB_MAX_SIZE_DEFAULT);

	read_dev_stderr(f, 0, &h, &warn);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	assert_int_equal(le64_to_cpu(h.sb->seq), 1);
	assert_int_equal(h.sb->uuid[0], 0x11);
	assert_int_equal(h.sb->user_uuid[0], 0x22);
	assert_string_equal(h.sb->label, "round trip");
	assert_int_equal(h.copies_bad, 1);
	/* The internal uuid is in the layout sector; the user_uuid only in the copies. */
	prt_printf(&want,
		   "warning: %s: superblock at 36864: %s %s (seq 5) differs from %s %s of the %s: "
		   "another filesystem's copy, ignored; using the copy at 4096 (seq 1)\n",
		   f->path[0], what, theirs, what, ours,
		   strcmp(what, "uuid") ? "copy at 4096" : "layout at 3584");
	assert_string_equal(warn, printbuf_str(&want));
	free(warn);

	/* Writing from it: seq 2 (the stale seq 5 counts for nothing), both copies ours. */
	tfs_bdev_close(h.bdev);
	assert_int_equal(tfs_bdev_open(f->path[0], 0, &h.bdev), 0);
	assert_int_equal(tfs_sb_write(&h, &err), 0);
	tfs_sb_exit(&h);
	read_dev_stderr(f, 0, &h, &warn);
	assert_string_equal(warn, "");
	assert_int_equal(h.copies_bad, 0);
	assert_int_equal(le64_to_cpu(h.sb->seq), 2);
	peek(f->path[0], backup, sb, 4096);
	assert_int_equal(le64_to_cpu(sb->seq), 2);
	assert_int_equal(sb->uuid[0], 0x11);
	free(warn);
	tfs_sb_exit(&h);
	free(sb);
	printbuf_exit(&err);
	printbuf_exit(&want);
}

static void test_foreign_backup_uuid(void **state)
{
	graft_backup(*state, 0x55, 0x66, "uuid", "55555555-5555-5555-5555-555555555555",
		     "11111111-1111-1111-1111-111111111111");
}

/* Same internal uuid (mkfs --uuid reuse), another user_uuid: still another filesystem. */
static void test_foreign_backup_user_uuid(void **state)
{
	graft_backup(*state, 0x11, 0x66, "user_uuid", "66666666-6666-6666-6666-666666666666",
		     "22222222-2222-2222-2222-222222222222");
}

/* With the primary bad the reference is the newest valid copy, whatever its uuid. */
/*
 * The primary unreadable and the backup another filesystem's (an older
 * mkfs's, here with a higher seq): the layout sector names our filesystem,
 * so the backup is ruled out and the read fails saying why, rather than
 * read another filesystem.  A copy that shares our internal uuid (mkfs
 * --uuid reused) but not the user_uuid cannot be told apart without the
 * primary: it is used.
 */
static void test_foreign_backup_primary_bad(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;
	void *buf = malloc(TFS_SB_MAX_SIZE_DEFAULT);
	u8 byte = 0xff;

	format(f, 1);
	snprintf(f->path[1], sizeof(f->path[1]), "%s/other.img", f->dir);
	mkfs_other(f->path[1], 0x55, 0x66, 3);
	peek(f->path[1], backup, buf, TFS_SB_MAX_SIZE_DEFAULT);
	poke(f->path[0], backup, buf, TFS_SB_MAX_SIZE_DEFAULT);
	poke(f->path[0], TFS_SB_OFFSET + 70, &byte, 1);
	assert_int_equal(tfs_sb_open(f->path[0], TFS_BDEV_RDONLY, &h, &err),
			 -TFS_ERR_invalid_sb_csum);
	assert_null(h.sb);
	assert_non_null(strstr(printbuf_str(&err),
			       ": superblock at 36864: uuid 55555555-5555-5555-5555-555555555555 "
			       "(seq 4) differs from uuid 11111111-1111-1111-1111-111111111111 of "
			       "the layout at 3584: another filesystem's copy, ignored"));
	printbuf_exit(&err);

	format(f, 1);
	mkfs_other(f->path[1], 0x11, 0x66, 3);
	peek(f->path[1], backup, buf, TFS_SB_MAX_SIZE_DEFAULT);
	poke(f->path[0], backup, buf, TFS_SB_MAX_SIZE_DEFAULT);
	poke(f->path[0], TFS_SB_OFFSET + 70, &byte, 1);
	read_dev(f, 0, &h);
	assert_int_equal(h.read_offset, backup);
	assert_int_equal(h.sb->user_uuid[0], 0x66);
	tfs_sb_exit(&h);
	free(buf);
}

static void test_no_valid_copy(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF, want = PRINTBUF;
	u64 zero = 0;
	u64 backup = TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT;

	format(f, 1);
	poke(f->path[0], TFS_SB_OFFSET + 8, &zero, 8);
	poke(f->path[0], backup + 8, &zero, 8);
	assert_int_equal(tfs_sb_open(f->path[0], TFS_BDEV_RDONLY, &h, &err),
			 -TFS_ERR_invalid_sb_magic);
	prt_printf(
		&want,
		"%s: superblock at 4096: bad magic 0x0000000000000000 (expected 0x3142535346594e54)\n"
		"%s: superblock at 36864: bad magic 0x0000000000000000 (expected 0x3142535346594e54)",
		f->path[0], f->path[0]);
	assert_string_equal(printbuf_str(&err), printbuf_str(&want));
	assert_null(h.sb);
	printbuf_exit(&err);
	printbuf_exit(&want);
}

static void test_too_small(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF, want = PRINTBUF;
	int fd;

	snprintf(f->path[0], sizeof(f->path[0]), "%s/empty.img", f->dir);
	fd = open(f->path[0], O_CREAT | O_RDWR | O_TRUNC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(tfs_sb_open(f->path[0], TFS_BDEV_RDONLY, &h, &err),
			 -TFS_ERR_device_too_small);
	prt_printf(&want, "%s: device is 0 B, too small to hold a superblock", f->path[0]);
	assert_string_equal(printbuf_str(&err), printbuf_str(&want));
	printbuf_exit(&err);
	printbuf_exit(&want);
}

static void test_field_resize(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle *h = &f->hs[0];
	struct tfs_sb_field *fl;
	struct printbuf err = PRINTBUF;
	unsigned before, nr;
	int ret;

	format(f, 1);
	before = le32_to_cpu(h->sb->u64s);
	/* Grow members: journal moves and stays intact. */
	u64 first = le64_to_cpu(tfs_sb_journal(h->sb)->ranges[0].start);

	fl = tfs_sb_field_resize(
		h, TFS_SB_FIELD_members,
		le32_to_cpu(tfs_sb_field_get(h->sb, TFS_SB_FIELD_members)->u64s) + 4, &ret);
	assert_non_null(fl);
	assert_int_equal(ret, 0);
	assert_int_equal(le32_to_cpu(h->sb->u64s), before + 4);
	assert_int_equal(le64_to_cpu(tfs_sb_journal(h->sb)->ranges[0].start), first);
	/* Too big for sb_max_size. */
	assert_null(tfs_sb_field_resize(h, TFS_SB_FIELD_clean, 5000, &ret));
	assert_int_equal(ret, -TFS_ERR_invalid_sb_size);
	/* Removing a field. */
	assert_null(tfs_sb_field_resize(h, TFS_SB_FIELD_journal, 0, &ret));
	assert_int_equal(ret, 0);
	u64 *jb = (u64 *)1;

	assert_int_equal(tfs_sb_journal_buckets(h->sb, &jb, &nr), 0);
	assert_null(jb);
	assert_int_equal(nr, 0);
	h->sb->csum = cpu_to_le32(tfs_sb_csum(h->sb));
	/* A rw member needs its journal; a spare one does not. */
	assert_int_equal(tfs_sb_validate(h->sb, h->sb_bytes, 0, &err), -TFS_ERR_invalid_sb_journal);
	printbuf_reset(&err);
	tfs_sb_this_member(h->sb)->state = TFS_MEMBER_spare;
	h->sb->csum = cpu_to_le32(tfs_sb_csum(h->sb));
	assert_int_equal(tfs_sb_validate(h->sb, h->sb_bytes, 0, &err), 0);
	printbuf_exit(&err);
}

static void test_to_text(void **state)
{
	struct fixture *f = *state;
	struct printbuf out = PRINTBUF;
	struct tfs_sb_to_text_opts opts = { .layout = true };

	format(f, 2);
	tfs_sb_to_text(&out, f->hs[1].sb, &opts);
	assert_false(out.allocation_failure);
	/* Every value in column 26, however deep its name is nested. */
	assert_non_null(strstr(printbuf_str(&out), "\nDevice index:             1\n"));
	assert_non_null(
		strstr(printbuf_str(&out), "\n  Copy 1:                 at 36864 (36.0 KiB)\n"));
	assert_non_null(strstr(printbuf_str(&out), "\n    Label:                second\n"));
	assert_non_null(strstr(printbuf_str(&out), "\n    Size:                 8.0 MiB\n"));
	printbuf_reset(&out);
	opts.fields = 1U << TFS_SB_FIELD_journal;
	tfs_sb_to_text(&out, f->hs[1].sb, &opts);
	assert_null(strstr(printbuf_str(&out), "Members"));
	assert_non_null(strstr(printbuf_str(&out), "Journal:\n"));
	printbuf_exit(&out);
}

/*
 * The value printed after "name:" on the first line of text that starts
 * (after indent) with it, in buf; asserts there is one.
 */
static const char *line_value(const char *text, const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *p = l;

		while (*p == ' ')
			p++;
		if (strncmp(p, name, n) || p[n] != ':')
			continue;
		p += n + 1;
		while (*p == ' ')
			p++;
		size_t len = strcspn(p, "\n");

		assert_true(len < size);
		memcpy(buf, p, len);
		buf[len] = '\0';
		return buf;
	}
	fail_msg("no line \"%s:\" in:\n%s", name, text);
	return NULL;
}

/*
 * Times: 0 is the epoch for creation and writing, "never" only for a
 * member's last mount; a time gmtime() cannot show, or past 9999, or one
 * that is negative as a time_t, is printed as out of range, never as 1969.
 */
static void test_to_text_times(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb *sb;
	struct printbuf out = PRINTBUF;
	char v[128];

	format(f, 1);
	sb = f->hs[0].sb;
	sb->time_created = 0;
	sb->time_written = cpu_to_le64(1ULL << 62);
	tfs_sb_this_member(sb)->last_mount = 0;
	tfs_sb_to_text(&out, sb, NULL);
	assert_string_equal(line_value(printbuf_str(&out), "Created", v, sizeof(v)),
			    "1970-01-01 00:00:00 UTC (0)");
	assert_string_equal(line_value(printbuf_str(&out), "Written", v, sizeof(v)),
			    "4611686018427387904 (out of range)");
	assert_string_equal(line_value(printbuf_str(&out), "Last mount", v, sizeof(v)), "never");

	printbuf_reset(&out);
	sb->time_created = cpu_to_le64(1ULL << 63);
	sb->time_written = cpu_to_le64(UINT64_MAX);
	tfs_sb_this_member(sb)->last_mount = cpu_to_le64(253402300800ULL); /* 10000-01-01 */
	tfs_sb_to_text(&out, sb, NULL);
	assert_string_equal(line_value(printbuf_str(&out), "Created", v, sizeof(v)),
			    "9223372036854775808 (out of range)");
	assert_string_equal(line_value(printbuf_str(&out), "Written", v, sizeof(v)),
			    "18446744073709551615 (out of range)");
	assert_string_equal(line_value(printbuf_str(&out), "Last mount", v, sizeof(v)),
			    "253402300800 (out of range)");

	printbuf_reset(&out);
	sb->time_created = cpu_to_le64(253402300799ULL);
	tfs_sb_this_member(sb)->last_mount = cpu_to_le64(1700000000);
	tfs_sb_to_text(&out, sb, NULL);
	assert_string_equal(line_value(printbuf_str(&out), "Created", v, sizeof(v)),
			    "9999-12-31 23:59:59 UTC (253402300799)");
	assert_string_equal(line_value(printbuf_str(&out), "Last mount", v, sizeof(v)),
			    "2023-11-14 22:13:20 UTC (1700000000)");
	printbuf_exit(&out);
}

/*
 * show-super --force shows a copy that failed validation: whatever its bytes
 * say (u64s, nr_devices, member_bytes, field sizes, entries), to_text and
 * to_json stay inside the copy (ASan checks the reads) and end.  Each round
 * corrupts a few bytes of the primary, header fields included, at random
 * (seeded: the round number reproduces it).
 */
static void test_forced_copy_any_bytes(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_to_text_opts opts = { .layout = true };
	u8 *good = malloc(TFS_SB_MAX_SIZE_DEFAULT);
	u64 rng = 0x9e3779b97f4a7c15ULL;
	unsigned shown = 0;

	format(f, 2);
	peek(f->path[0], TFS_SB_OFFSET, good, TFS_SB_MAX_SIZE_DEFAULT);
	/* The bytes most likely to send a reader astray, and any byte. */
	static const unsigned hot[] = { 20, 21, 22, 101, 100, 688, 689, 692, 696, 697, 744, 756 };
	size_t used = tfs_sb_bytes((struct tfs_sb *)good);

	for (unsigned round = 0; round < 300; round++) {
		u8 bad[4096];
		struct tfs_sb_handle h;
		struct tfs_bdev *bdev;
		struct printbuf out = PRINTBUF, err = PRINTBUF;

		memcpy(bad, good, sizeof(bad));
		for (unsigned k = 0; k < 1 + round % 4; k++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			size_t at = (rng >> 33) % 2 ? hot[(rng >> 40) % ARRAY_SIZE(hot)]
						    : 8 + (rng >> 40) % (used - 8);
			bad[at] = (u8)(rng >> 20);
		}
		poke(f->path[0], TFS_SB_OFFSET, bad, sizeof(bad));
		assert_int_equal(tfs_bdev_open(f->path[0], TFS_BDEV_RDONLY, &bdev), 0);
		tfs_sb_read_copy(bdev, 0, true, &h, &err);
		if (h.sb) {
			shown++;
			opts.fields = 0;
			tfs_sb_to_text(&out, h.sb, &opts);
			tfs_sb_to_json(&out, h.sb, &opts);
			assert_false(out.allocation_failure);
		}
		tfs_sb_exit(&h);
		tfs_bdev_close(bdev);
		printbuf_exit(&out);
		printbuf_exit(&err);
	}
	/* A copy that fails validation is shown too: not only the lucky ones. */
	assert_true(shown == 300);
	free(good);
}

/*
 * A copy whose write fails is reported with its offset.  A failed primary
 * leaves the backup alone (it is then the valid copy: seq 1); a failed
 * backup comes after the flushed primary (seq 2).
 */
static void write_with_failing_copy(struct fixture *f, const char *rule, u64 bad_off, u64 good_off,
				    u64 seq)
{
	struct tfs_sb_handle h;
	struct tfs_bdev *fd;
	struct printbuf err = PRINTBUF, want = PRINTBUF;

	format(f, 1);
	assert_int_equal(tfs_faultdev_create(f->hs[0].bdev, true, &fd), 0);
	f->hs[0].bdev = fd;
	assert_int_equal(tfs_faultdev_add_rule_str(fd, rule, &err), 0);
	assert_int_equal(tfs_sb_write(&f->hs[0], &err), -TFS_ERR_sb_write);
	assert_int_equal(tfs_faultdev_rule_fired(fd, 0), 1);
	prt_printf(&want, "%s: writing superblock copy %u at %llu (", fd->path,
		   bad_off == TFS_SB_OFFSET ? 0 : 1, (unsigned long long)bad_off);
	assert_true(!strncmp(printbuf_str(&err), printbuf_str(&want), want.pos));
	/* One sb write only when the primary failed: the backup was left alone. */
	assert_int_equal(fd->counters.ios[TFS_OP_write], bad_off == TFS_SB_OFFSET ? 1 : 2);
	tfs_bdev_close(f->hs[0].bdev);
	f->hs[0].bdev = NULL;
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), seq);
	assert_int_equal(h.read_offset, good_off);
	tfs_sb_exit(&h);
	printbuf_exit(&err);
	printbuf_exit(&want);
}

static void test_write_primary_fails(void **state)
{
	write_with_failing_copy(*state, "write tag=sb range=4096-8192 fail=EIO", TFS_SB_OFFSET,
				TFS_SB_OFFSET, 1);
}

static void test_write_backup_fails(void **state)
{
	write_with_failing_copy(*state, "write tag=sb range=36864-40960 fail=EIO",
				TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT, TFS_SB_OFFSET, 2);
}

/*
 * The reviewer's sequence: the primary write tears, the flush after it
 * fails, and the backup write would tear too.  The backup must not be
 * written, so the old superblock (seq 1) stays readable from it.
 */
static void test_write_torn_primary_keeps_backup(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct tfs_bdev *fd;
	struct printbuf err = PRINTBUF;

	format(f, 1);
	assert_int_equal(tfs_faultdev_create(f->hs[0].bdev, true, &fd), 0);
	f->hs[0].bdev = fd;
	assert_int_equal(tfs_faultdev_set_sector_size(fd, 512), 0);
	assert_true(tfs_faultdev_add_rule_str(fd, "write tag=sb nth=1 tear=1", &err) >= 0);
	assert_true(tfs_faultdev_add_rule_str(fd, "flush nth=1 fail=EIO", &err) >= 0);
	assert_true(tfs_faultdev_add_rule_str(fd, "write tag=sb nth=2 tear=1", &err) >= 0);
	tfs_strpad(tfs_sb_this_member(f->hs[0].sb)->label, "changed", TFS_LABEL_SIZE);
	assert_int_equal(tfs_sb_write(&f->hs[0], &err), -TFS_ERR_sb_write);
	assert_non_null(strstr(printbuf_str(&err), "flush after writing the primary"));
	assert_int_equal(tfs_faultdev_rule_fired(fd, 2), 0);
	tfs_bdev_close(f->hs[0].bdev);
	f->hs[0].bdev = NULL;
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), 1);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT);
	assert_string_equal(tfs_sb_this_member(h.sb)->label, "first");
	tfs_sb_exit(&h);
	printbuf_exit(&err);
}

/* Primary written, flush fails: no backup write either. */
static void test_write_flush_fails_keeps_backup(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_handle h;
	struct tfs_bdev *fd;
	struct printbuf err = PRINTBUF;

	format(f, 1);
	assert_int_equal(tfs_faultdev_create(f->hs[0].bdev, true, &fd), 0);
	f->hs[0].bdev = fd;
	assert_true(tfs_faultdev_add_rule_str(fd, "flush nth=1 fail=EIO", &err) >= 0);
	assert_int_equal(tfs_sb_write(&f->hs[0], &err), -TFS_ERR_sb_write);
	assert_int_equal(fd->counters.ios[TFS_OP_write], 1);
	tfs_bdev_close(f->hs[0].bdev);
	f->hs[0].bdev = NULL;
	read_dev(f, 0, &h);
	/* The primary reached the file (seq 2); the backup still has seq 1. */
	assert_int_equal(le64_to_cpu(h.sb->seq), 2);
	assert_int_equal(h.read_offset, TFS_SB_OFFSET);
	tfs_sb_exit(&h);
	printbuf_exit(&err);
}

/*
 * Two members, every superblock write on the first fails: with one member
 * required the write succeeds, the result names the failed member (and err
 * says what failed there), and the second member has the new superblock;
 * with both required, or through tfs_sb_write_all(), it fails.
 */
static void test_write_members_one_fails(void **state)
{
	struct fixture *f = *state;
	struct tfs_sb_write_res res;
	struct tfs_sb_handle h;
	struct tfs_bdev *fd;
	struct printbuf err = PRINTBUF;
	u64 seq;

	format(f, 2);
	assert_int_equal(tfs_faultdev_create(f->hs[0].bdev, true, &fd), 0);
	f->hs[0].bdev = fd;
	assert_true(tfs_faultdev_add_rule_str(fd, "write tag=sb every=1 fail=EIO", &err) >= 0);
	seq = le64_to_cpu(f->hs[1].sb->seq);

	assert_int_equal(tfs_sb_write_members(f->hps, 2, 1, &res, &err), 0);
	assert_int_equal(res.nr_written, 1);
	assert_true(tfs_err_matches(res.ret[0], EIO));
	assert_int_equal(res.ret[1], 0);
	assert_non_null(strstr(printbuf_str(&err), f->path[0]));
	assert_null(strstr(printbuf_str(&err), f->path[1]));
	printbuf_reset(&err);

	assert_int_equal(tfs_sb_write_members(f->hps, 2, 2, &res, &err), -TFS_ERR_sb_write);
	assert_int_equal(res.nr_written, 1);
	printbuf_reset(&err);
	assert_int_equal(tfs_sb_write_all(f->hps, 2, &err), -TFS_ERR_sb_write);
	/* Required 0 means 1; more than there are means all. */
	assert_int_equal(tfs_sb_write_members(f->hps, 2, 0, &res, &err), 0);
	assert_int_equal(tfs_sb_write_members(f->hps, 2, 5, &res, &err), -TFS_ERR_sb_write);

	/* The second member has each new superblock (four writes); the first, none. */
	read_dev(f, 1, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), seq + 5);
	tfs_sb_exit(&h);
	tfs_bdev_close(f->hs[0].bdev);
	f->hs[0].bdev = NULL;
	read_dev(f, 0, &h);
	assert_int_equal(le64_to_cpu(h.sb->seq), seq);
	tfs_sb_exit(&h);
	printbuf_exit(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip_one, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_members_one_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_round_trip_several, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backup_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newest_seq_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_layout_sector, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gpt_over_layout_and_primary, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_layout_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout_sector_differs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_layout_rewritten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_backup_uuid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_backup_user_uuid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_backup_primary_bad, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_valid_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_small, setup, teardown),
		cmocka_unit_test_setup_teardown(test_field_resize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_to_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_to_text_times, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forced_copy_any_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_primary_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_backup_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_torn_primary_keeps_backup, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_write_flush_fails_keeps_backup, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
