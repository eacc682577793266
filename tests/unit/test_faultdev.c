// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for lib/faultdev.c: every rule condition, every action, the
 * volatile-cache model with each power-cut policy checked byte for byte
 * against an in-memory model of what was flushed, the trace and its replay,
 * and the "dev" spec entries (API, TFS_FAULTS, tfs_bdev_open() stacking).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/faultdev.h"
#include "lib/printbuf.h"

#include "fault_test.h"

#define IMG_SIZE (1u << 20)
#define SECT 512

static char dir[64], img[128], img2[128];
static u8 *model; /* what the image must hold */

static void fill(void *buf, size_t len, unsigned seed)
{
	u8 *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (u8)(seed * 37 + i * 13 + (i >> 8));
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, data, len, 0), (ssize_t)len);
	close(fd);
}

static void read_file(const char *path, void *data, size_t len)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, data, len, 0), (ssize_t)len);
	close(fd);
}

/* The image file must equal the model, byte for byte. */
static void check_image(const char *path)
{
	u8 *got = malloc(IMG_SIZE);

	read_file(path, got, IMG_SIZE);
	for (size_t i = 0; i < IMG_SIZE; i++)
		if (got[i] != model[i]) {
			print_error(
				"%s differs from the model at byte %zu (sector %zu): %02x, want %02x\n",
				path, i, i / SECT, got[i], model[i]);
			free(got);
			fail();
		}
	free(got);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/tfs-faultdev-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(img2, sizeof(img2), "%s/img2", dir);
	model = malloc(IMG_SIZE);
	return model ? 0 : -1;
}

static int teardown(void **state)
{
	unlink(img);
	unlink(img2);
	rmdir(dir);
	free(model);
	return 0;
}

/* A fresh starting image, also in the model. */
static void fresh_image(u64 seed)
{
	fill(model, IMG_SIZE, (unsigned)seed + 1);
	write_file(img, model, IMG_SIZE);
}

/* A fresh starting image and a fault device over it. */
static struct tfs_bdev *fresh(u64 seed)
{
	struct tfs_bdev *lower, *f;

	tfs_faultdev_registry_reset();
	fresh_image(seed);
	assert_int_equal(tfs_bdev_open_uring(img, 0, &lower), 0);
	assert_int_equal(tfs_faultdev_create(lower, true, &f), 0);
	assert_true(tfs_bdev_is_faultdev(f));
	assert_ptr_equal(tfs_faultdev_lower(f), lower);
	tfs_faultdev_set_seed(f, seed);
	return f;
}

/* Adds a rule to f; it must parse. */
static void rule(struct tfs_bdev *f, const char *words)
{
	assert_true(fault_test_add_rule(f, words) >= 0);
}

static u8 *buf_new(struct tfs_bdev *f, size_t len, unsigned seed)
{
	u8 *b = tfs_bdev_alloc_buf(f, len);

	fill(b, len, seed);
	return b;
}

/* Writes through f and, on success, into the model. */
static int wr(struct tfs_bdev *f, u64 off, size_t len, unsigned seed, unsigned flags)
{
	u8 *b = buf_new(f, len, seed);
	int ret = tfs_bdev_write(f, b, len, off, flags, TFS_TAG_data);

	if (!ret)
		memcpy(model + off, b, len);
	free(b);
	return ret;
}

static int rd(struct tfs_bdev *f, u64 off, size_t len, u8 *out)
{
	return tfs_bdev_read(f, out, len, off, TFS_TAG_data);
}

/* ---- parsing ---- */

/* Field by field: struct padding is not part of a rule. */
static bool rule_eq(const struct tfs_fault_rule *a, const struct tfs_fault_rule *b)
{
	return a->ops == b->ops && a->tags == b->tags && a->start == b->start && a->end == b->end &&
	       a->nth == b->nth && a->every == b->every && a->ppm == b->ppm &&
	       a->times == b->times && a->action == b->action && a->err == b->err &&
	       a->arg == b->arg && a->policy == b->policy;
}

static void test_rule_parse(void **state)
{
	static const char *const good[][2] = {
		{ "write nth=3 fail=EIO", "write nth=3 fail=EIO" },
		{ "fail", "any fail=EIO" },
		{ "read,fua tag=sb,journal range=0-8192 every=2 times=3 fail=ENOSPC",
		  "read,fua tag=sb,journal range=0-8192 every=2 times=3 fail=ENOSPC" },
		{ "prob=0.25 drop", "any prob=0.250000 drop" },
		{ "tear", "write,fua tear" },
		{ "write tear=2", "write tear=2" },
		{ "corrupt=17", "read,write,fua corrupt=17" },
		{ "short=4096", "read,write,fua short=4096" },
		{ "delay=5", "any delay=5" },
		{ "always reorder=3", "any every=1 reorder=3" },
		{ "flush nth=2 vanish", "flush nth=2 vanish" },
		{ "powercut=prefix:4", "any powercut=prefix:4" },
		{ "powercut", "any powercut=none" },
		{ "write powercut=torn", "write powercut=torn" },
		{ "discard fail=28", "discard fail=ENOSPC" },
	};
	static const char *const bad[] = {
		"write nth=3",		 /* no action */
		"fail drop",		 /* two actions */
		"read tear",		 /* tear acts on writes only */
		"flush corrupt",	 /* corrupt on reads and writes only */
		"flush range=0-10 fail", /* a flush has no offset */
		"fail=EWHAT",
		"prob=2 fail",
		"nth=0 fail",
		"range=10-5 fail",
		"delay fail",
		"powercut=sometimes",
		"powercut=random:3",
		"write bogus fail",
		"tag=metadata fail",
		"tag=any fail", /* "any" is for ops only */
		"tag=, fail",	/* no tag named */
	};

	for (unsigned i = 0; i < ARRAY_SIZE(good); i++) {
		struct tfs_fault_rule r, r2;
		struct printbuf err = PRINTBUF, txt = PRINTBUF;

		assert_int_equal(tfs_fault_rule_parse(good[i][0], &r, &err), 0);
		tfs_fault_rule_to_text(&txt, &r);
		assert_string_equal(printbuf_str(&txt), good[i][1]);
		/* The text form parses back to the same rule: repro lines work. */
		assert_int_equal(tfs_fault_rule_parse(printbuf_str(&txt), &r2, &err), 0);
		assert_true(rule_eq(&r, &r2));
		printbuf_exit(&err);
		printbuf_exit(&txt);
	}
	for (unsigned i = 0; i < ARRAY_SIZE(bad); i++) {
		struct tfs_fault_rule r;
		struct printbuf err = PRINTBUF;

		assert_int_equal(tfs_fault_rule_parse(bad[i], &r, &err),
				 -TFS_ERR_fault_spec_invalid);
		assert_true(err.pos > 0); /* says why */
		printbuf_exit(&err);
	}
}

/* ---- rule conditions ---- */

static void test_nth_of_type_and_overall(void **state)
{
	struct tfs_bdev *f = fresh(1);
	u8 *b = tfs_bdev_alloc_buf(f, 4096);

	rule(f, "write nth=3 fail=EIO");
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	assert_int_equal(rd(f, 0, 4096, b), 0); /* reads do not count */
	assert_int_equal(wr(f, 4096, 4096, 2, 0), 0);
	assert_int_equal(wr(f, 8192, 4096, 3, 0), -EIO);
	assert_int_equal(wr(f, 8192, 4096, 4, 0), 0); /* a bare nth fires once */
	assert_int_equal(tfs_faultdev_rule_fired(f, 0), 1);
	assert_int_equal(tfs_faultdev_rule_matched(f, 0), 4);
	assert_int_equal(tfs_faultdev_rule_fired(f, 1), -1);
	assert_int_equal(f->counters.errors[TFS_OP_write], 1);
	tfs_bdev_close(f);
	check_image(img); /* the failed write left nothing */

	/* "any nth=N": the Nth op overall, whatever it is. */
	f = fresh(1);
	rule(f, "any nth=4 fail=ENOSPC");
	assert_int_equal(rd(f, 0, 4096, b), 0);
	assert_int_equal(wr(f, 0, 4096, 5, 0), 0);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_bdev_discard(f, 0, 4096), -ENOSPC);
	assert_int_equal(rd(f, 0, 4096, b), 0);
	tfs_bdev_close(f);
	free(b);
}

static void test_op_tag_range_filters(void **state)
{
	struct tfs_bdev *f = fresh(2);
	u8 *b = buf_new(f, 8192, 3);

	rule(f, "fua always fail=EROFS");
	rule(f, "tag=journal always fail=EBUSY");
	rule(f, "range=65536-69632 always fail=ENXIO");
	rule(f, "flush always fail=ETIMEDOUT");
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	assert_int_equal(wr(f, 0, 4096, 1, TFS_BIO_FUA), -EROFS);
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_journal), -EBUSY);
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_btree), 0);
	/* Overlapping the range from either side matches; next to it does not. */
	assert_int_equal(rd(f, 61440, 8192, b), -ENXIO);
	assert_int_equal(rd(f, 69632 - 512, 8192, b), -ENXIO);
	assert_int_equal(rd(f, 61440, 4096, b), 0);
	assert_int_equal(rd(f, 69632, 4096, b), 0);
	assert_int_equal(tfs_bdev_flush(f), -ETIMEDOUT);
	assert_int_equal(tfs_faultdev_nr_injected(f), 5);
	tfs_bdev_close(f);
	free(b);
}

/* The process-wide count goes on over closed devices (an error loop's unmount). */
static void test_nr_injected_all(void **state)
{
	u64 before = tfs_faultdev_nr_injected_all();
	struct tfs_bdev *f = fresh(2);

	rule(f, "write nth=2 fail=EIO");
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	assert_int_equal(wr(f, 0, 4096, 1, 0), -EIO);
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	tfs_bdev_close(f);
	assert_int_equal(tfs_faultdev_nr_injected_all(), before + 1);
	f = fresh(3);
	rule(f, "flush always fail=EIO");
	assert_int_equal(tfs_bdev_flush(f), -EIO);
	tfs_bdev_close(f);
	assert_int_equal(tfs_faultdev_nr_injected_all(), before + 2);
}

static void test_every_times_prob(void **state)
{
	struct tfs_bdev *f = fresh(3);
	u8 *b = tfs_bdev_alloc_buf(f, 512);
	char seq[2][64];

	rule(f, "read every=3 times=2 fail=EIO");
	for (unsigned i = 1; i <= 12; i++)
		assert_int_equal(rd(f, 0, 512, b), i == 3 || i == 6 ? -EIO : 0);
	tfs_bdev_close(f);

	f = fresh(3);
	rule(f, "read nth=2 every=4 fail=EIO");
	for (unsigned i = 1; i <= 12; i++)
		assert_int_equal(rd(f, 0, 512, b), i == 2 || i == 6 || i == 10 ? -EIO : 0);
	tfs_bdev_close(f);

	/* prob: the same seed fires on the same ops; it fires some, not all. */
	for (unsigned run = 0; run < 2; run++) {
		unsigned fired = 0;

		f = fresh(42);
		rule(f, "read prob=0.3 fail=EIO");
		for (unsigned i = 0; i < 63; i++) {
			int ret = rd(f, 0, 512, b);

			seq[run][i] = ret ? 'x' : '.';
			fired += !!ret;
		}
		seq[run][63] = '\0';
		assert_true(fired > 5 && fired < 40);
		assert_int_equal(tfs_faultdev_rule_fired(f, 0), fired);
		tfs_bdev_close(f);
	}
	assert_string_equal(seq[0], seq[1]);
	{
		unsigned same = 1;

		f = fresh(43);
		rule(f, "read prob=0.3 fail=EIO");
		for (unsigned i = 0; i < 63; i++)
			same &= (rd(f, 0, 512, b) ? 'x' : '.') == seq[0][i];
		assert_false(same); /* another seed, another pattern */
		tfs_bdev_close(f);
	}
	free(b);
}

/* ---- actions ---- */

static void test_fail_drop(void **state)
{
	struct tfs_bdev *f = fresh(4);
	u8 *b = tfs_bdev_alloc_buf(f, 4096), *keep = malloc(4096);

	rule(f, "write nth=1 fail=ENOSPC");
	rule(f, "write nth=2 drop");
	rule(f, "read nth=1 drop");
	rule(f, "flush nth=1 drop");
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_data), -ENOSPC);
	/* Dropped: success, nothing written. */
	fill(b, 4096, 99);
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_data), 0);
	memcpy(keep, b, 4096);
	assert_int_equal(rd(f, 0, 4096, b), 0); /* dropped read: buffer untouched */
	assert_memory_equal(b, keep, 4096);
	assert_int_equal(rd(f, 0, 4096, b), 0);
	assert_memory_equal(b, model, 4096);
	/* A dropped flush leaves the cache as it was. */
	assert_int_equal(wr(f, 8192, 4096, 7, 0), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(f), 1);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(f), 1);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(f), 0);
	tfs_bdev_close(f);
	check_image(img);
	free(b);
	free(keep);
}

static void test_tear(void **state)
{
	struct tfs_bdev *f = fresh(5);
	u8 *b = buf_new(f, 8 * SECT, 8), *old = malloc(8 * SECT);

	rule(f, "write nth=1 tear=3");
	rule(f, "write nth=2 tear");
	assert_int_equal(tfs_bdev_write(f, b, 8 * SECT, 0, 0, TFS_TAG_data), 0);
	memcpy(model, b, 3 * SECT); /* a prefix of 3 sectors */
	tfs_bdev_drain(f);
	check_image(img);

	/* A seeded subset: each sector either all new or all old, not all new. */
	memcpy(old, model + 65536, 8 * SECT);
	assert_int_equal(tfs_bdev_write(f, b, 8 * SECT, 65536, 0, TFS_TAG_data), 0);
	{
		u8 *got = malloc(IMG_SIZE);
		unsigned nr_new = 0;

		read_file(img, got, IMG_SIZE);
		for (unsigned s = 0; s < 8; s++) {
			bool is_new = !memcmp(got + 65536 + s * SECT, b + s * SECT, SECT);

			assert_true(is_new ||
				    !memcmp(got + 65536 + s * SECT, old + s * SECT, SECT));
			if (is_new)
				memcpy(model + 65536 + s * SECT, b + s * SECT, SECT);
			nr_new += is_new;
		}
		assert_true(nr_new < 8);
		free(got);
	}
	check_image(img);
	tfs_bdev_close(f);
	free(b);
	free(old);
}

static void test_corrupt(void **state)
{
	struct tfs_bdev *f = fresh(6);
	u8 *b = buf_new(f, 4096, 9), *copy = malloc(4096);

	rule(f, "write nth=1 corrupt=100");
	rule(f, "read nth=1 corrupt");
	memcpy(copy, b, 4096);
	assert_int_equal(tfs_bdev_write(f, b, 4096, 4096, 0, TFS_TAG_data), 0);
	assert_memory_equal(b, copy, 4096); /* the caller's buffer is untouched */
	memcpy(model + 4096, b, 4096);
	model[4096 + 100] ^= 0xff;
	tfs_bdev_drain(f);
	check_image(img);

	/* A corrupted read: exactly one byte differs from the image. */
	assert_int_equal(rd(f, 0, 4096, b), 0);
	{
		unsigned diff = 0;

		for (unsigned i = 0; i < 4096; i++)
			diff += b[i] != model[i];
		assert_int_equal(diff, 1);
	}
	assert_int_equal(rd(f, 0, 4096, b), 0);
	assert_memory_equal(b, model, 4096);
	tfs_bdev_close(f);
	check_image(img);
	free(b);
	free(copy);
}

static void test_short(void **state)
{
	struct tfs_bdev *f = fresh(7);
	u8 *b = buf_new(f, 4096, 10), *r = tfs_bdev_alloc_buf(f, 4096);

	rule(f, "write nth=1 short=1024");
	rule(f, "read nth=1 short");
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_data), -TFS_ERR_bdev_short_io);
	memcpy(model, b, 1024);
	memset(r, 0xee, 4096);
	assert_int_equal(rd(f, 0, 4096, r), -TFS_ERR_bdev_short_io);
	assert_memory_equal(r, model, 2048); /* half was read */
	assert_int_equal(r[2048], 0xee);
	tfs_bdev_close(f);
	check_image(img);
	free(b);
	free(r);
}

/* ---- completion order: delay and reorder ---- */

struct order {
	pthread_mutex_t lock;
	unsigned nr;
	int ids[16];
	int results[16];
};

static void order_end_io(struct tfs_bio *bio)
{
	struct order *o = bio->private;

	pthread_mutex_lock(&o->lock);
	o->results[o->nr] = bio->result;
	o->ids[o->nr++] = (int)bio->offset / 4096;
	pthread_mutex_unlock(&o->lock);
}

/* A 4096-byte bio of block i (buf: its data) whose completion o records. */
static struct tfs_bio order_bio(struct tfs_bdev *f, enum tfs_bio_op op, unsigned i, u8 *buf,
				struct order *o)
{
	return (struct tfs_bio){
		.bdev = f,
		.op = op,
		.offset = (u64)i * 4096,
		.buf = buf,
		.len = 4096,
		.end_io = order_end_io,
		.private = o,
	};
}

static void submit_reads(struct tfs_bdev *f, struct tfs_bio *bios, u8 *buf, unsigned nr,
			 struct order *o)
{
	for (unsigned i = 0; i < nr; i++) {
		bios[i] = order_bio(f, TFS_OP_read, i, buf + i * 4096, o);
		tfs_bio_submit(&bios[i]);
	}
}

static void test_reorder_delay(void **state)
{
	struct tfs_bdev *f = fresh(8);
	struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct tfs_bio bios[4];
	u8 *buf = tfs_bdev_alloc_buf(f, 4 * 4096);

	/* The first read is overtaken by the next two. */
	rule(f, "read nth=1 reorder=2");
	tfs_faultdev_pause(f, true);
	submit_reads(f, bios, buf, 4, &o);
	tfs_faultdev_pause(f, false);
	tfs_bdev_drain(f);
	assert_int_equal(o.nr, 4);
	assert_int_equal(o.ids[0], 1);
	assert_int_equal(o.ids[1], 2);
	assert_int_equal(o.ids[2], 0);
	assert_int_equal(o.ids[3], 3);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(o.results[i], 0);
	assert_memory_equal(buf, model, 4 * 4096);
	tfs_bdev_close(f);

	/* A delayed completion comes after the ones behind it. */
	f = fresh(8);
	o.nr = 0;
	rule(f, "read nth=1 delay=1000");
	tfs_faultdev_pause(f, true);
	submit_reads(f, bios, buf, 3, &o);
	tfs_faultdev_pause(f, false);
	tfs_bdev_drain(f);
	assert_int_equal(o.nr, 3);
	assert_int_equal(o.ids[2], 0);
	tfs_bdev_close(f);

	/* A synchronous caller is never stuck behind a reorder with nothing after it. */
	f = fresh(8);
	rule(f, "read nth=1 reorder=5");
	assert_int_equal(rd(f, 0, 4096, buf), 0);
	tfs_bdev_close(f);
	free(buf);
}

/* ---- vanish ---- */

static void test_vanish(void **state)
{
	struct tfs_bdev *f = fresh(9), *again;
	u8 *b = tfs_bdev_alloc_buf(f, 4096);
	char other_name[160];

	rule(f, "write nth=2 vanish");
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	assert_int_equal(wr(f, 4096, 4096, 2, 0), -TFS_ERR_bdev_vanished);
	assert_true(tfs_faultdev_frozen(f));
	assert_int_equal(rd(f, 0, 4096, b), -TFS_ERR_bdev_vanished);
	assert_int_equal(tfs_bdev_flush(f), -TFS_ERR_bdev_vanished);
	assert_true(tfs_err_matches(-TFS_ERR_bdev_vanished, ENODEV));
	tfs_bdev_close(f);
	/* Absent when reopened, by the same path or another name for it. */
	assert_int_equal(tfs_bdev_open(img, 0, &again), -TFS_ERR_bdev_vanished);
	assert_null(again);
	snprintf(other_name, sizeof(other_name), "%s/./img", dir);
	assert_int_equal(tfs_bdev_open(other_name, 0, &again), -TFS_ERR_bdev_vanished);
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_bdev_open(img, 0, &again), 0);
	assert_string_equal(again->ops->name, "uring");
	tfs_bdev_close(again);
	free(b);
}

/* ---- volatile cache and power cuts ---- */

struct uwrite {
	u64 off;
	size_t len;
	unsigned flags;
};

/* Unflushed writes after a flush point; #3 overlaps #0, #4 is FUA, #5 overlaps #4. */
static const struct uwrite unflushed[] = {
	{ 8192, 4096, 0 },
	{ 65536, 3 * SECT, 0 },
	{ 131072, 8192, 0 },
	{ 8192 + 1024, 2048, 0 },
	{ 200704, 4096, TFS_BIO_FUA },
	{ 200704 + 512, 1024, 0 },
	{ 300000 & ~511u, 8 * SECT, 0 },
};
#define NR_UNFLUSHED ARRAY_SIZE(unflushed)

static u8 *durable;

/*
 * Writes a flushed prefix, then the unflushed writes, checking that they
 * read back; returns the device, with `durable` = the image at the flush
 * and the data of each unflushed write in datas[].
 */
static struct tfs_bdev *cache_workload(u64 seed, u8 **datas)
{
	struct tfs_bdev *f = fresh(seed);
	u8 *r = tfs_bdev_alloc_buf(f, 8192);

	assert_int_equal(wr(f, 0, 8192, 100, 0), 0);
	assert_int_equal(wr(f, 131072, 4096, 101, 0), 0);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(f), 0);
	memcpy(durable, model, IMG_SIZE);
	for (unsigned i = 0; i < NR_UNFLUSHED; i++) {
		const struct uwrite *u = &unflushed[i];

		datas[i] = buf_new(f, u->len, 200 + i);
		assert_int_equal(
			tfs_bdev_write(f, datas[i], u->len, u->off, u->flags, TFS_TAG_data), 0);
		/* Readable before it is durable. */
		assert_int_equal(rd(f, u->off, u->len, r), 0);
		assert_memory_equal(r, datas[i], u->len);
	}
	assert_int_equal(tfs_faultdev_nr_unflushed(f),
			 NR_UNFLUSHED - 1); /* the FUA one is durable */
	free(r);
	return f;
}

/* model = durable + the kept writes (and FUA ones), in order; torn one by sectors. */
static void build_model(const struct tfs_faultdev_crash *c, u8 **datas)
{
	memcpy(model, durable, IMG_SIZE);
	assert_int_equal(c->nr_unflushed, NR_UNFLUSHED);
	for (unsigned i = 0; i < NR_UNFLUSHED; i++) {
		const struct uwrite *u = &unflushed[i];

		if (c->kept[i])
			memcpy(model + u->off, datas[i], u->len);
		if ((int)i == c->torn)
			for (unsigned s = 0; s < c->nr_torn_sectors; s++)
				if (c->torn_sectors[s])
					memcpy(model + u->off + s * SECT, datas[i] + s * SECT,
					       SECT);
	}
}

static void free_datas(u8 **datas)
{
	for (unsigned i = 0; i < NR_UNFLUSHED; i++)
		free(datas[i]);
}

static void after_cut_fails(struct tfs_bdev *f)
{
	u8 *b = tfs_bdev_alloc_buf(f, 4096);

	assert_true(tfs_faultdev_frozen(f));
	assert_int_equal(rd(f, 0, 4096, b), -TFS_ERR_bdev_powercut);
	assert_int_equal(tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_data), -TFS_ERR_bdev_powercut);
	assert_int_equal(tfs_bdev_flush(f), -TFS_ERR_bdev_powercut);
	free(b);
}

static void test_powercut_none(void **state)
{
	u8 *datas[NR_UNFLUSHED];
	struct tfs_bdev *f = cache_workload(10, datas);
	struct tfs_faultdev_crash c;

	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_none, 0), 0);
	after_cut_fails(f);
	tfs_faultdev_crash_info(f, &c);
	assert_true(c.happened);
	assert_int_equal(c.torn, -1);
	for (unsigned i = 0; i < NR_UNFLUSHED; i++)
		assert_int_equal(c.kept[i], unflushed[i].flags & TFS_BIO_FUA ? 1 : 0);
	/* Hand-built: the flushed image plus only the FUA write. */
	memcpy(model, durable, IMG_SIZE);
	memcpy(model + unflushed[4].off, datas[4], unflushed[4].len);
	check_image(img);
	build_model(&c, datas);
	tfs_bdev_close(f);
	check_image(img);
	free_datas(datas);
}

static void test_powercut_prefix(void **state)
{
	for (unsigned keep = 1; keep <= NR_UNFLUSHED; keep += 2) {
		u8 *datas[NR_UNFLUSHED];
		struct tfs_bdev *f = cache_workload(11, datas);
		struct tfs_faultdev_crash c;

		assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_prefix, keep), 0);
		after_cut_fails(f);
		tfs_faultdev_crash_info(f, &c);
		memcpy(model, durable, IMG_SIZE);
		for (unsigned i = 0; i < NR_UNFLUSHED; i++)
			if (i < keep || (unflushed[i].flags & TFS_BIO_FUA))
				memcpy(model + unflushed[i].off, datas[i], unflushed[i].len);
		check_image(img);
		for (unsigned i = 0; i < NR_UNFLUSHED; i++)
			assert_int_equal(c.kept[i], i < keep || (unflushed[i].flags & TFS_BIO_FUA));
		tfs_bdev_close(f);
		free_datas(datas);
	}
}

static void test_powercut_random(void **state)
{
	bool first[NR_UNFLUSHED];
	unsigned differ = 0;

	for (u64 seed = 20; seed < 28; seed++) {
		for (unsigned run = 0; run < (seed == 20 ? 2 : 1); run++) {
			u8 *datas[NR_UNFLUSHED];
			struct tfs_bdev *f = cache_workload(seed, datas);
			struct tfs_faultdev_crash c;

			assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_random, 0), 0);
			tfs_faultdev_crash_info(f, &c);
			assert_int_equal(c.torn, -1);
			assert_true(c.kept[4]); /* FUA */
			if (seed == 20 && run == 0)
				memcpy(first, c.kept, sizeof(first));
			else if (seed == 20)
				assert_memory_equal(first, c.kept, sizeof(first)); /* same seed */
			else
				differ += !!memcmp(first, c.kept, sizeof(first));
			build_model(&c, datas);
			tfs_bdev_close(f);
			check_image(img);
			free_datas(datas);
		}
	}
	assert_true(differ > 0);
}

static void test_powercut_torn(void **state)
{
	u8 *datas[NR_UNFLUSHED];
	struct tfs_bdev *f = cache_workload(30, datas);
	struct tfs_faultdev_crash c;
	unsigned written = 0;

	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_torn, 0), 0);
	tfs_faultdev_crash_info(f, &c);
	assert_int_equal(c.torn, NR_UNFLUSHED - 1);
	assert_int_equal(c.nr_torn_sectors, unflushed[NR_UNFLUSHED - 1].len / SECT);
	for (unsigned i = 0; i < NR_UNFLUSHED - 1; i++)
		assert_true(c.kept[i]);
	for (unsigned s = 0; s < c.nr_torn_sectors; s++)
		written += c.torn_sectors[s];
	assert_true(written < c.nr_torn_sectors);
	build_model(&c, datas);
	tfs_bdev_close(f);
	check_image(img);
	free_datas(datas);
}

/* Sector 4096: a torn write tears in 4096-byte units. */
static void test_sector_4096(void **state)
{
	struct tfs_bdev *f = fresh(31);
	u8 *b = buf_new(f, 16384, 3), *got = malloc(IMG_SIZE);
	unsigned nr_new = 0;

	assert_int_equal(tfs_faultdev_set_sector_size(f, 4096), 0);
	assert_int_equal(tfs_faultdev_set_sector_size(f, 1024), -EINVAL);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_bdev_write(f, b, 16384, 0, 0, TFS_TAG_data), 0);
	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_torn, 0), 0);
	tfs_bdev_close(f);
	read_file(img, got, IMG_SIZE);
	for (unsigned s = 0; s < 4; s++) {
		bool is_new = !memcmp(got + s * 4096, b + s * 4096, 4096);

		assert_true(is_new || !memcmp(got + s * 4096, model + s * 4096, 4096));
		nr_new += is_new;
	}
	assert_true(nr_new < 4);
	free(b);
	free(got);
}

/* PREFLUSH makes what came before durable; a powercut rule cuts at its op. */
static void test_preflush_and_powercut_rule(void **state)
{
	struct tfs_bdev *f = fresh(32);
	struct tfs_faultdev_crash c;

	rule(f, "write nth=4 powercut=none");
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	memcpy(durable, model, IMG_SIZE); /* the start plus the first write */
	assert_int_equal(wr(f, 8192, 4096, 2, TFS_BIO_PREFLUSH), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(f), 1);
	assert_int_equal(wr(f, 12288, 4096, 3, 0), 0);
	assert_int_equal(wr(f, 16384, 4096, 4, 0), -TFS_ERR_bdev_powercut);
	after_cut_fails(f);
	tfs_faultdev_crash_info(f, &c);
	assert_int_equal(c.nr_unflushed, 2);
	tfs_bdev_close(f);
	memcpy(model, durable, IMG_SIZE);
	check_image(img);
}

/* ---- trace and replay ---- */

static void test_trace_replay(void **state)
{
	struct tfs_bdev *f = fresh(40), *target;
	u8 *start = malloc(IMG_SIZE), **snaps = calloc(16, sizeof(u8 *));
	u8 *r = tfs_bdev_alloc_buf(f, 4096);
	struct printbuf out = PRINTBUF;
	unsigned nr_writes = 0;
	char tracepath[160];

	memcpy(start, model, IMG_SIZE);
	rule(f, "write nth=3 tear=2");
	rule(f, "write nth=5 corrupt=7");
	rule(f, "write nth=6 drop");
	tfs_faultdev_mark(f, "start");
	for (unsigned i = 0; i < 8; i++) {
		assert_int_equal(wr(f, (u64)(i % 5) * 3072, 4096, 50 + i, i == 2 ? TFS_BIO_FUA : 0),
				 0);
		/* The image after each write or discard, as the lower device has it. */
		snaps[nr_writes] = malloc(IMG_SIZE);
		read_file(img, snaps[nr_writes++], IMG_SIZE);
		assert_int_equal(rd(f, 0, 4096, r), 0);
		if (i == 4) {
			assert_int_equal(tfs_bdev_discard(f, 32768, 8192), 0);
			snaps[nr_writes] = malloc(IMG_SIZE);
			read_file(img, snaps[nr_writes++], IMG_SIZE);
		}
		if (i == 5)
			assert_int_equal(tfs_bdev_flush(f), 0);
		assert_int_equal(tfs_faultdev_nr_writes(f), nr_writes);
	}
	tfs_faultdev_mark(f, "end");
	tfs_bdev_drain(f);
	assert_int_equal(nr_writes, 9);

	tfs_faultdev_trace_to_text(&out, f);
	assert_non_null(strstr(printbuf_str(&out), "mark "));
	assert_non_null(strstr(printbuf_str(&out), " start\n"));
	assert_non_null(strstr(printbuf_str(&out), "fault=tear(rule 0)"));
	assert_non_null(strstr(printbuf_str(&out), "fault=drop(rule 2)"));
	assert_non_null(strstr(printbuf_str(&out), " discard 32768+8192"));
	assert_non_null(strstr(printbuf_str(&out), " fua "));
	{
		const struct tfs_fault_trace_entry *e0 = tfs_faultdev_trace_entry(f, 0);
		const struct tfs_fault_trace_entry *e1 = tfs_faultdev_trace_entry(f, 1);

		assert_string_equal(e0->mark, "start");
		assert_int_equal(e1->op, TFS_OP_write);
		assert_int_equal(e1->index, 1);
		assert_int_equal(e1->write_index, 1);
		assert_int_equal(e1->len, 4096);
		assert_int_equal(e1->result, 0);
		/* The checksum is of the data as submitted. */
		{
			u8 *d = buf_new(f, 4096, 50);

			assert_int_equal(e1->csum, tfs_crc32c(0, d, 4096));
			free(d);
		}
	}
	printbuf_exit(&out);

	/*
	 * Replaying up to each write index onto a copy of the start rebuilds
	 * each image, from memory and from a saved trace.
	 */
	snprintf(tracepath, sizeof(tracepath), "%s/trace", dir);
	assert_int_equal(tfs_faultdev_trace_save(f, tracepath), 0);
	/* Loaded back, the saved trace is the trace: ops, marks, stamps in order, data. */
	{
		struct tfs_fault_trace_entry *le;
		unsigned ln;

		assert_int_equal(tfs_fault_trace_load(tracepath, &le, &ln), 0);
		assert_int_equal(ln, tfs_faultdev_trace_nr(f));
		for (unsigned i = 0; i < ln; i++) {
			const struct tfs_fault_trace_entry *e = tfs_faultdev_trace_entry(f, i);

			assert_int_equal(le[i].index, e->index);
			assert_int_equal(le[i].write_index, e->write_index);
			assert_int_equal(le[i].op, e->op);
			assert_int_equal(le[i].flags, e->flags);
			assert_int_equal(le[i].csum, e->csum);
			assert_int_equal(le[i].stamp, e->stamp);
			assert_true(!i || le[i].stamp > le[i - 1].stamp);
			assert_int_equal(!!le[i].mark, !!e->mark);
			if (e->mark)
				assert_string_equal(le[i].mark, e->mark);
			assert_int_equal(le[i].nr_pieces, e->nr_pieces);
			for (unsigned p = 0; p < e->nr_pieces; p++) {
				assert_int_equal(le[i].pieces[p].len, e->pieces[p].len);
				assert_int_equal(!!le[i].pieces[p].data, !!e->pieces[p].data);
				if (e->pieces[p].data)
					assert_memory_equal(le[i].pieces[p].data, e->pieces[p].data,
							    e->pieces[p].len);
			}
		}
		tfs_fault_trace_free(le, ln);
	}
	for (unsigned k = 0; k <= nr_writes; k++) {
		memcpy(model, k ? snaps[k - 1] : start, IMG_SIZE);
		for (unsigned from_file = 0; from_file < 2; from_file++) {
			write_file(img2, start, IMG_SIZE);
			assert_int_equal(tfs_bdev_open_uring(img2, 0, &target), 0);
			assert_int_equal(from_file
						 ? tfs_fault_trace_replay_file(tracepath, target, k)
						 : tfs_faultdev_replay(f, target, k),
					 0);
			tfs_bdev_close(target);
			check_image(img2);
		}
	}
	/* A damaged trace is refused. */
	assert_int_equal(truncate(tracepath, 100), 0);
	assert_int_equal(tfs_bdev_open_uring(img2, 0, &target), 0);
	assert_int_equal(tfs_fault_trace_replay_file(tracepath, target, UINT64_MAX), -EIO);
	{
		struct tfs_fault_trace_entry *le;
		unsigned ln;

		assert_int_equal(tfs_fault_trace_load(tracepath, &le, &ln), -EIO);
		assert_null(le);
	}
	assert_int_equal(truncate(tracepath, 4), 0);
	assert_int_equal(tfs_fault_trace_replay_file(tracepath, target, UINT64_MAX),
			 -TFS_ERR_invalid_argument);
	tfs_bdev_close(target);
	unlink(tracepath);
	write_file(img2, start, IMG_SIZE);
	assert_int_equal(tfs_bdev_open_uring(img2, 0, &target), 0);
	assert_int_equal(tfs_faultdev_replay(f, target, UINT64_MAX), 0);
	tfs_bdev_close(target);
	tfs_bdev_close(f);
	read_file(img, model, IMG_SIZE);
	check_image(img2);

	for (unsigned i = 0; i < nr_writes; i++)
		free(snaps[i]);
	free(snaps);
	free(start);
	free(r);
}

/* ---- specs: API, TFS_FAULTS, stacking in tfs_bdev_open() ---- */

static void test_spec_env_stacking(void **state)
{
	struct tfs_bdev *a, *b;
	struct printbuf out = PRINTBUF, err = PRINTBUF;
	char spec[512];
	u8 *buf;

	fresh_image(50);
	write_file(img2, model, IMG_SIZE);
	tfs_faultdev_registry_reset();

	/* By path, from the environment. */
	snprintf(spec, sizeof(spec), "dev %s seed=7 sector=4096 write nth=2 fail=EIO", img);
	setenv("TFS_FAULTS", spec, 1);
	assert_int_equal(tfs_faults_from_env(), 0);
	unsetenv("TFS_FAULTS");
	tfs_faultdev_registry_to_text(&out);
	assert_non_null(strstr(printbuf_str(&out), "seed=7 sector=4096 write nth=2 fail=EIO"));
	printbuf_exit(&out);

	assert_int_equal(tfs_bdev_open(img2, 0, &b), 0); /* not matched: plain */
	assert_string_equal(b->ops->name, "uring");
	assert_int_equal(tfs_bdev_open(img, 0, &a), 0);
	assert_true(tfs_bdev_is_faultdev(a));
	buf = tfs_bdev_alloc_buf(a, 4096);
	assert_int_equal(tfs_bdev_write(a, buf, 4096, 0, 0, TFS_TAG_sb), 0);
	assert_int_equal(tfs_bdev_write(a, buf, 4096, 4096, 0, TFS_TAG_sb), -EIO);
	assert_int_equal(tfs_bdev_write(b, buf, 4096, 4096, 0, TFS_TAG_sb), 0);
	tfs_bdev_to_text(&out, a);
	assert_non_null(strstr(printbuf_str(&out), "fault device over uring"));
	assert_non_null(strstr(printbuf_str(&out), "seed"));
	assert_non_null(strstr(printbuf_str(&out), "(matched 2, fired 1)"));
	printbuf_exit(&out);
	tfs_bdev_close(a);
	tfs_bdev_close(b);

	/* By open order: #1 is the second device opened. */
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_faults_parse("dev #1 read nth=1 fail=EBADMSG", &err), 0);
	assert_int_equal(tfs_bdev_open(img, 0, &a), 0);
	assert_int_equal(tfs_bdev_open(img2, 0, &b), 0);
	assert_false(tfs_bdev_is_faultdev(a));
	assert_true(tfs_bdev_is_faultdev(b));
	assert_int_equal(tfs_bdev_read(a, buf, 4096, 0, TFS_TAG_sb), 0);
	assert_int_equal(tfs_bdev_read(b, buf, 4096, 0, TFS_TAG_sb), -EBADMSG);
	tfs_bdev_close(a);
	tfs_bdev_close(b);

	/* "*" matches every device; device options alone stack a tracing device. */
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_faults_parse("dev * trace=on", &err), 0);
	assert_int_equal(tfs_bdev_open(img, TFS_BDEV_RDONLY, &a), 0);
	assert_true(tfs_bdev_is_faultdev(a));
	assert_true(a->read_only);
	assert_int_equal(tfs_bdev_read(a, buf, 4096, 0, TFS_TAG_sb), 0);
	assert_int_equal(tfs_faultdev_trace_nr(a), 1);
	tfs_bdev_close(a);

	/* tracefile=PATH: the trace is saved at close, replayable by another process. */
	{
		char tp[160], sp[512];
		u8 *w = tfs_bdev_alloc_buf(NULL, 4096);
		struct tfs_bdev *t;

		snprintf(tp, sizeof(tp), "%s/trace2", dir);
		snprintf(sp, sizeof(sp), "dev %s tracefile=%s", img, tp);
		tfs_faultdev_registry_reset();
		assert_int_equal(tfs_faults_parse(sp, &err), 0);
		write_file(img2, model, IMG_SIZE);
		assert_int_equal(tfs_bdev_open(img, 0, &a), 0);
		fill(w, 4096, 77);
		assert_int_equal(tfs_bdev_write(a, w, 4096, 12288, 0, TFS_TAG_data), 0);
		tfs_bdev_close(a);
		assert_int_equal(tfs_bdev_open_uring(img2, 0, &t), 0);
		assert_int_equal(tfs_fault_trace_replay_file(tp, t, UINT64_MAX), 0);
		tfs_bdev_close(t);
		memcpy(model + 12288, w, 4096);
		check_image(img2);
		unlink(tp);
		free(w);
	}

	/* The README's examples. */
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_faults_parse("dev /tmp/a.img tag=sb write nth=2 fail=EIO", &err), 0);
	assert_int_equal(tfs_faults_parse("dev #1 vanish", &err), 0);
	assert_int_equal(tfs_faults_parse("dev * seed=7 write prob=0.01 tear", &err), 0);
	assert_int_equal(tfs_faults_parse("dev #0 read nth=1 corrupt=100", &err), 0);
	tfs_faultdev_registry_to_text(&out);
	assert_string_equal(printbuf_str(&out), "dev /tmp/a.img write tag=sb nth=2 fail=EIO\n"
						"dev #1 any vanish\n"
						"dev * seed=7 write prob=0.010000 tear\n"
						"dev #0 read nth=1 corrupt=100\n");
	printbuf_reset(&out);

	/* A bad spec registers nothing and says what is wrong. */
	tfs_faultdev_registry_reset();
	printbuf_reset(&err);
	assert_int_equal(tfs_faults_parse("dev #0 write nth=1 fail; dev /x write explode", &err),
			 -TFS_ERR_fault_spec_invalid);
	assert_non_null(strstr(printbuf_str(&err), "explode"));
	tfs_faultdev_registry_to_text(&out);
	assert_string_equal(printbuf_str(&out), "");
	printbuf_reset(&err);
	assert_int_equal(tfs_faults_parse("dev", &err), -TFS_ERR_fault_spec_invalid);
	printbuf_reset(&err);
	assert_int_equal(tfs_faults_parse("dev #x fail", &err), -TFS_ERR_fault_spec_invalid);
	printbuf_reset(&err);
	assert_int_equal(tfs_faults_parse("dev /x sector=1000 fail", &err),
			 -TFS_ERR_fault_spec_invalid);
	printbuf_exit(&out);
	printbuf_exit(&err);
	free(buf);
	tfs_faultdev_registry_reset();
}

/* Every injected fault prints a line whose spec reproduces it. */
static void test_repro_line(void **state)
{
	struct tfs_bdev *f = fresh(60), *g;
	struct stderr_capture cap;
	char *line, *repro, *nl, *spec, *end;
	u8 *b = tfs_bdev_alloc_buf(f, 4096);
	struct printbuf err = PRINTBUF;
	unsigned nth;

	rule(f, "write tag=btree prob=0.5 fail=ENOSPC");
	stderr_capture_start(&cap);
	for (nth = 1; nth <= 20; nth++)
		if (tfs_bdev_write(f, b, 4096, 0, 0, TFS_TAG_btree))
			break;
	line = stderr_capture_end(&cap);
	assert_int_equal(tfs_faultdev_nr_injected(f), 1);
	tfs_bdev_close(f);

	/* The line that says how to reproduce the fault. */
	repro = strstr(line, "reproduce with");
	assert_non_null(repro);
	while (repro > line && repro[-1] != '\n')
		repro--;
	line = repro;
	nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	spec = strstr(line, "TFS_FAULTS='");
	assert_non_null(spec);
	spec += strlen("TFS_FAULTS='");
	end = strchr(spec, '\'');
	assert_non_null(end);
	*end = '\0';
	assert_non_null(strstr(line, "op #"));
	assert_non_null(strstr(line, "offset 0 length 4096"));

	/* The spec, applied to a fresh open, fails the same op. */
	fresh_image(60);
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_faults_parse(spec, &err), 0);
	assert_int_equal(tfs_bdev_open(img, 0, &g), 0);
	{
		unsigned n = 0;
		int ret = 0;

		while (!ret && n < 20) {
			ret = tfs_bdev_write(g, b, 4096, 0, 0, TFS_TAG_btree);
			n++;
		}
		assert_int_equal(ret, -ENOSPC);
		assert_int_equal(n, nth);
		assert_int_equal(tfs_faultdev_trace_entry(g, n - 1)->result, -ENOSPC);
	}
	tfs_bdev_close(g);
	tfs_faultdev_registry_reset();
	printbuf_exit(&err);
	free(b);
}

/* Stacked over a stacked device, and async I/O through it. */
static void test_stacked_async(void **state)
{
	struct tfs_bdev *f = fresh(70), *top;
	struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct tfs_bio bios[8];
	u8 *buf = tfs_bdev_alloc_buf(f, 8 * 4096);

	assert_int_equal(tfs_faultdev_create(f, true, &top), 0);
	rule(top, "read nth=3 fail=EIO");
	submit_reads(top, bios, buf, 8, &o);
	tfs_bdev_drain(top);
	assert_int_equal(o.nr, 8);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(o.results[i], o.ids[i] == 2 ? -EIO : 0);
	assert_int_equal(tfs_faultdev_trace_nr(f), 7); /* the failed one never reached f */
	tfs_bdev_close(top);
	free(buf);
}

/*
 * TFS_FAULTS reaches a program that only calls tfs_bdev_open() (as
 * mkfs.tinyfs does).  Runs first, so nothing read the environment yet; the
 * child inherits that.
 */
static void test_env_via_open(void **state)
{
	char spec[256];
	pid_t pid;
	int st;

	fresh_image(80);
	snprintf(spec, sizeof(spec), "dev %s tag=sb write nth=2 fail=EROFS", img);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct tfs_bdev *b;
		u8 *buf;

		setenv("TFS_FAULTS", spec, 1);
		if (tfs_bdev_open(img, 0, &b) || !tfs_bdev_is_faultdev(b))
			_exit(1);
		buf = tfs_bdev_alloc_buf(b, 4096);
		if (tfs_bdev_write(b, buf, 4096, 0, 0, TFS_TAG_sb) ||
		    tfs_bdev_write(b, buf, 4096, 4096, 0, TFS_TAG_sb) != -EROFS ||
		    tfs_bdev_write(b, buf, 4096, 8192, 0, TFS_TAG_sb))
			_exit(2);
		tfs_bdev_close(b);
		free(buf);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* A bad TFS_FAULTS makes the open fail, saying why. */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct tfs_bdev *b;

		setenv("TFS_FAULTS", "dev #0 write explode", 1);
		/* Every open, not only the first: a later one must not run without its faults. */
		_exit(tfs_bdev_open(img, 0, &b) == -TFS_ERR_fault_spec_invalid &&
				      tfs_bdev_open(img, 0, &b) == -TFS_ERR_fault_spec_invalid
			      ? 0
			      : 1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- bad input from callers ---- */

static void count_end_io(struct tfs_bio *bio)
{
	struct order *o = bio->private;

	pthread_mutex_lock(&o->lock);
	o->results[o->nr++] = bio->result;
	pthread_mutex_unlock(&o->lock);
}

/* An op no caller may use is refused with a code, whatever its value: never run as internal. */
static void test_unknown_op(void **state)
{
	struct tfs_bdev *f = fresh(90);
	struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	u8 *buf = tfs_bdev_alloc_buf(f, 4096);
	struct tfs_bio *bios = calloc(4, sizeof(*bios));
	int ops[4] = { TFS_OP_NR, TFS_OP_NR + 1, TFS_OP_NR + 2, 1000 };

	for (unsigned i = 0; i < 4; i++) {
		bios[i] = (struct tfs_bio){
			.bdev = f,
			.op = (enum tfs_bio_op)ops[i],
			.buf = buf,
			.len = 4096,
			.end_io = count_end_io,
			.private = &o,
		};
		tfs_bio_submit(&bios[i]);
	}
	tfs_bdev_drain(f);
	assert_int_equal(o.nr, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(o.results[i], -TFS_ERR_invalid_argument);
	assert_false(tfs_faultdev_frozen(f));
	assert_int_equal(wr(f, 0, 4096, 1, 0), 0);
	{
		struct printbuf out = PRINTBUF;

		tfs_faultdev_trace_to_text(&out, f);
		assert_non_null(strstr(printbuf_str(&out), "bad-op"));
		printbuf_exit(&out);
	}
	tfs_bdev_close(f);
	check_image(img);
	free(bios);
	free(buf);
}

/* A fault device over a 512-byte-block lower (buffered), with 4096-byte sectors. */
static struct tfs_bdev *fresh_4096_over_512(u64 seed)
{
	struct tfs_bdev *lower, *f;

	tfs_faultdev_registry_reset();
	fresh_image(seed);
	assert_int_equal(tfs_bdev_open_uring(img, TFS_BDEV_BUFFERED, &lower), 0);
	assert_int_equal(lower->logical_block_size, 512);
	assert_int_equal(tfs_faultdev_create(lower, true, &f), 0);
	tfs_faultdev_set_seed(f, seed);
	assert_int_equal(tfs_faultdev_set_sector_size(f, 4096), 0);
	return f;
}

/*
 * Every aligned 4096-byte sector of [0, 12288) holds either the old image
 * or the image with the whole write applied: the sector is the unit of
 * atomicity, so no fault may split one.  Returns the sectors that are new.
 */
static unsigned check_atomic_sectors(const u8 *old, const u8 *b, u64 off, size_t len)
{
	u8 *got = malloc(IMG_SIZE), *all_new = malloc(IMG_SIZE);
	unsigned nr_new = 0;

	read_file(img, got, IMG_SIZE);
	memcpy(all_new, old, IMG_SIZE);
	memcpy(all_new + off, b, len);
	for (unsigned s = 0; s < 3; s++) {
		bool is_new = !memcmp(got + s * 4096, all_new + s * 4096, 4096);
		bool is_old = !memcmp(got + s * 4096, old + s * 4096, 4096);

		if (!is_new && !is_old)
			print_error("aligned sector %u is torn\n", s);
		assert_true(is_new || is_old);
		nr_new += is_new && !is_old;
	}
	assert_memory_equal(got + 12288, old + 12288, IMG_SIZE - 12288);
	free(got);
	free(all_new);
	return nr_new;
}

/* Tear, short and torn power cuts cut an unaligned bio at aligned sector boundaries. */
static void test_sector_aligned_pieces(void **state)
{
	u8 *old = malloc(IMG_SIZE), *b;
	struct tfs_bdev *f;
	struct tfs_faultdev_crash c;

	/* tear=1: the first piece is [512, 4096), the rest of aligned sector 0. */
	f = fresh_4096_over_512(100);
	memcpy(old, model, IMG_SIZE);
	b = buf_new(f, 8192, 1);
	rule(f, "write nth=1 tear=1");
	assert_int_equal(tfs_bdev_write(f, b, 8192, 512, 0, TFS_TAG_data), 0);
	tfs_bdev_close(f);
	assert_int_equal(check_atomic_sectors(old, b, 512, 8192), 1);

	/* Seeded tears. */
	for (u64 seed = 101; seed < 109; seed++) {
		f = fresh_4096_over_512(seed);
		memcpy(old, model, IMG_SIZE);
		rule(f, "write nth=1 tear");
		assert_int_equal(tfs_bdev_write(f, b, 8192, 512, 0, TFS_TAG_data), 0);
		tfs_bdev_close(f);
		assert_true(check_atomic_sectors(old, b, 512, 8192) < 3);
	}

	/* short=4096: done up to the sector boundary at 4096, not 512 + 4096. */
	f = fresh_4096_over_512(110);
	memcpy(old, model, IMG_SIZE);
	rule(f, "write nth=1 short=4096");
	assert_int_equal(tfs_bdev_write(f, b, 8192, 512, 0, TFS_TAG_data), -TFS_ERR_bdev_short_io);
	tfs_bdev_close(f);
	assert_int_equal(check_atomic_sectors(old, b, 512, 8192), 1);

	/* A torn power cut: three pieces, each whole or not at all. */
	for (u64 seed = 111; seed < 119; seed++) {
		f = fresh_4096_over_512(seed);
		memcpy(old, model, IMG_SIZE);
		assert_int_equal(tfs_bdev_write(f, b, 8192, 512, 0, TFS_TAG_data), 0);
		assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_torn, 0), 0);
		tfs_faultdev_crash_info(f, &c);
		assert_int_equal(c.torn, 0);
		assert_int_equal(c.nr_torn_sectors, 3);
		tfs_bdev_close(f);
		assert_true(check_atomic_sectors(old, b, 512, 8192) < 3);
	}
	free(b);
	free(old);
}

/* Prefix and torn power cuts follow completion order (end_io), not execution order. */
static void test_powercut_completion_order(void **state)
{
	static const enum tfs_powercut_policy policies[] = { TFS_POWERCUT_prefix,
							     TFS_POWERCUT_torn };

	for (unsigned p = 0; p < ARRAY_SIZE(policies); p++) {
		struct tfs_bdev *f = fresh(120);
		struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
		u8 *b = buf_new(f, 8192, 5);
		struct tfs_bio w[2];
		struct tfs_faultdev_crash c;

		memcpy(durable, model, IMG_SIZE);
		rule(f, "write nth=1 reorder");
		tfs_faultdev_pause(f, true);
		for (unsigned i = 0; i < 2; i++) {
			w[i] = order_bio(f, TFS_OP_write, i, b + i * 4096, &o);
			tfs_bio_submit(&w[i]);
		}
		tfs_faultdev_pause(f, false);
		tfs_bdev_drain(f);
		assert_int_equal(o.nr, 2);
		assert_int_equal(o.ids[0], 1); /* W2 completed first */
		assert_int_equal(o.ids[1], 0);

		assert_int_equal(tfs_faultdev_powercut(f, policies[p], 1), 0);
		tfs_faultdev_crash_info(f, &c);
		assert_int_equal(c.nr_unflushed, 2);
		memcpy(model, durable, IMG_SIZE);
		if (policies[p] == TFS_POWERCUT_prefix) {
			/* The first completed is W2: it is the one kept. */
			assert_false(c.kept[0]);
			assert_true(c.kept[1]);
			assert_int_equal(c.torn, -1);
			memcpy(model + 4096, b + 4096, 4096);
		} else {
			/* The last completed is W1: it is the torn one (one sector, lost). */
			assert_int_equal(c.torn, 0);
			assert_true(c.kept[1]);
			memcpy(model + 4096, b + 4096, 4096);
			for (unsigned s = 0; s < c.nr_torn_sectors; s++)
				if (c.torn_sectors[s])
					memcpy(model + s * SECT, b + s * SECT, SECT);
		}
		tfs_bdev_close(f);
		check_image(img);
		free(b);
	}
}

/* ---- readers while the worker runs ---- */

struct monitor {
	struct tfs_bdev *f;
	int stop;
	u64 seen;
};

/* Reads the cache and the newest trace entries (their pieces too) as fast as it can. */
static void *monitor_thread(void *p)
{
	struct monitor *m = p;

	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		struct printbuf out = PRINTBUF;
		unsigned n = tfs_faultdev_trace_nr(m->f);

		m->seen += tfs_faultdev_nr_unflushed(m->f);
		tfs_bdev_to_text(&out, m->f);
		m->seen += out.pos;
		printbuf_exit(&out);
		for (unsigned i = n > 4 ? n - 4 : 0; i < n; i++) {
			const struct tfs_fault_trace_entry *e = tfs_faultdev_trace_entry(m->f, i);

			for (unsigned k = 0; k < e->nr_pieces; k++)
				if (e->pieces[k].data)
					m->seen += ((const u8 *)e->pieces[k].data)[0];
		}
	}
	return NULL;
}

/*
 * The cache log and the trace are read under the lock by other threads
 * while the worker changes them: every change must be under the lock too,
 * and a trace entry must be complete before others can see it (ASan
 * catches the use-after-free of a realloc'd log or piece array).
 */
static void test_readers_during_io(void **state)
{
	struct tfs_bdev *f = fresh(130);
	struct monitor m = { .f = f };
	u8 *b = buf_new(f, 8 * SECT, 1);
	pthread_t t;

	rule(f, "write every=2 tear");
	assert_int_equal(pthread_create(&t, NULL, monitor_thread, &m), 0);
	for (unsigned round = 0; round < 6; round++) {
		for (unsigned i = 0; i < 600; i++)
			assert_int_equal(tfs_bdev_write(f, b, 8 * SECT, (u64)(i % 256) * 4096, 0,
							TFS_TAG_data),
					 0);
		assert_int_equal(tfs_bdev_flush(f), 0);
	}
	__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	assert_true(m.seen > 0);
	assert_int_equal(tfs_faultdev_trace_nr(f), 6 * 601);
	tfs_bdev_close(f);
	free(b);
}

struct adder {
	struct tfs_bdev *f;
	int stop;
};

static void *adder_thread(void *p)
{
	struct adder *a = p;
	struct tfs_fault_rule never = { .ops = 1u << TFS_OP_discard, .action = TFS_FAULT_ACT_drop };
	struct tfs_fault_rule w = { .ops = 1u << TFS_OP_write,
				    .every = 1,
				    .action = TFS_FAULT_ACT_drop };

	for (unsigned i = 0; !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE); i++) {
		tfs_faultdev_add_rule(a->f, &never);
		if (i % 64 == 63) {
			tfs_faultdev_clear_rules(a->f);
			tfs_faultdev_add_rule(a->f, &w);
		}
	}
	return NULL;
}

/* Rules added while rules fire: the reproduction line must not read the rule array unlocked. */
static void test_add_rules_during_io(void **state)
{
	struct tfs_bdev *f = fresh(140);
	struct tfs_fault_rule w = { .ops = 1u << TFS_OP_write,
				    .every = 1,
				    .action = TFS_FAULT_ACT_drop };
	struct adder a = { .f = f };
	u8 *b = buf_new(f, SECT, 1);
	pthread_t t;

	tfs_faultdev_set_trace(f, false);
	assert_int_equal(tfs_faultdev_add_rule(f, &w), 0);
	assert_int_equal(pthread_create(&t, NULL, adder_thread, &a), 0);
	for (unsigned i = 0; i < 3000; i++)
		assert_int_equal(tfs_bdev_write(f, b, SECT, 0, 0, TFS_TAG_data), 0);
	__atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	assert_true(tfs_faultdev_nr_injected(f) > 0);
	tfs_bdev_close(f);
	free(b);
}

/* A power cut on a paused device runs what is queued before it, then cuts: it never waits forever. */
static void test_powercut_paused(void **state)
{
	struct tfs_bdev *f = fresh(150);
	struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	u8 *b = buf_new(f, 4096, 3);
	struct tfs_bio w = order_bio(f, TFS_OP_write, 1, b, &o);

	tfs_faultdev_pause(f, true);
	tfs_bio_submit(&w);
	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_none, 0), 0);
	assert_true(tfs_faultdev_frozen(f));
	tfs_bdev_drain(f);
	assert_int_equal(o.nr, 1);
	assert_int_equal(o.results[0], 0); /* ran before the cut, then lost */
	tfs_bdev_close(f);
	check_image(img);
	free(b);
}

/* A completion held back (delay) past a power cut reports the cut: the write was never acknowledged. */
static void test_held_after_powercut(void **state)
{
	struct tfs_bdev *f = fresh(160);
	struct order o = { .lock = PTHREAD_MUTEX_INITIALIZER };
	u8 *b = buf_new(f, 4096, 4);
	struct tfs_bio w = order_bio(f, TFS_OP_write, 1, b, &o);

	rule(f, "write nth=1 delay=100000");
	tfs_bio_submit(&w);
	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_none, 0), 0);
	tfs_bdev_drain(f);
	assert_int_equal(o.nr, 1);
	assert_int_equal(o.results[0], -TFS_ERR_bdev_powercut);
	tfs_bdev_close(f);
	check_image(img);
	free(b);
}

/*
 * A write the lower fails after part of it went down (short; a FUA one too)
 * stays in the volatile cache: a power cut with policy none gives the
 * flushed image byte for byte, one keeping everything gives the writes as
 * submitted.
 */
static void test_failed_write_undone(void **state)
{
	static const u64 offs[] = { 16384, 65536 };

	for (unsigned keep = 0; keep <= 2; keep += 2) {
		struct tfs_bdev *f = fresh(170), *top;
		struct tfs_faultdev_crash c;
		u8 *b, *got = tfs_bdev_alloc_buf(f, 8192);

		assert_int_equal(tfs_faultdev_create(f, true, &top), 0);
		assert_int_equal(wr(top, 0, 8192, 1, 0), 0);
		assert_int_equal(wr(top, 65536, 4096, 2, 0), 0);
		assert_int_equal(tfs_bdev_flush(top), 0);
		memcpy(durable, model, IMG_SIZE);
		/* The lower's next two writes: 2048 bytes land, then short. */
		rule(f, "write every=1 times=2 short=2048");
		b = buf_new(top, 8192, 3);
		for (unsigned i = 0; i < 2; i++) {
			assert_int_equal(tfs_bdev_write(top, b, 8192, offs[i], i ? TFS_BIO_FUA : 0,
							TFS_TAG_data),
					 -TFS_ERR_bdev_short_io);
			/* Part of it is on the media, or this tests nothing. */
			assert_int_equal(rd(f, offs[i], 8192, got), 0);
			assert_memory_equal(got, b, 2048);
			assert_memory_equal(got + 2048, durable + offs[i] + 2048, 8192 - 2048);
		}
		assert_int_equal(tfs_faultdev_rule_fired(f, 0), 2);
		assert_int_equal(tfs_faultdev_nr_unflushed(top), 2); /* the FUA one too */

		assert_int_equal(tfs_faultdev_powercut(
					 top, keep ? TFS_POWERCUT_prefix : TFS_POWERCUT_none, keep),
				 0);
		tfs_faultdev_crash_info(top, &c);
		assert_int_equal(c.nr_unflushed, 2);
		memcpy(model, durable, IMG_SIZE);
		for (unsigned i = 0; i < 2; i++) {
			assert_int_equal(c.kept[i], keep != 0);
			if (keep)
				memcpy(model + offs[i], b, 8192);
		}
		check_image(img);
		tfs_bdev_close(top);
		check_image(img);
		free(b);
		free(got);
	}
}

/*
 * The backing file shrank under the device: the pre-image read of a write
 * fails.  That is the caller's write failing, said once, as a write.
 */
static void test_preimage_failure_reported_once(void **state)
{
	struct tfs_bdev *f = fresh(31);
	struct stderr_capture cap;

	assert_int_equal(truncate(img, IMG_SIZE / 2), 0);
	stderr_capture_start(&cap);
	int ret = wr(f, IMG_SIZE - 4096, 4096, 5, 0);
	char *text = stderr_capture_end(&cap);

	assert_true(ret < 0);
	assert_true(text[0]);
	unsigned lines = 0;
	for (char *c = text; *c; c++)
		lines += *c == '\n';
	if (lines != 1 || !strstr(text, "write at offset 1044480 length 4096 failed"))
		fail_msg("want one line naming the write, got:\n%s", text);
	tfs_bdev_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_via_open),
		cmocka_unit_test(test_rule_parse),
		cmocka_unit_test(test_nth_of_type_and_overall),
		cmocka_unit_test(test_op_tag_range_filters),
		cmocka_unit_test(test_nr_injected_all),
		cmocka_unit_test(test_every_times_prob),
		cmocka_unit_test(test_fail_drop),
		cmocka_unit_test(test_tear),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_reorder_delay),
		cmocka_unit_test(test_vanish),
		cmocka_unit_test(test_powercut_none),
		cmocka_unit_test(test_powercut_prefix),
		cmocka_unit_test(test_powercut_random),
		cmocka_unit_test(test_powercut_torn),
		cmocka_unit_test(test_sector_4096),
		cmocka_unit_test(test_preflush_and_powercut_rule),
		cmocka_unit_test(test_trace_replay),
		cmocka_unit_test(test_spec_env_stacking),
		cmocka_unit_test(test_repro_line),
		cmocka_unit_test(test_stacked_async),
		cmocka_unit_test(test_unknown_op),
		cmocka_unit_test(test_sector_aligned_pieces),
		cmocka_unit_test(test_powercut_completion_order),
		cmocka_unit_test(test_readers_during_io),
		cmocka_unit_test(test_add_rules_during_io),
		cmocka_unit_test(test_powercut_paused),
		cmocka_unit_test(test_held_after_powercut),
		cmocka_unit_test(test_failed_write_undone),
		cmocka_unit_test(test_preimage_failure_reported_once),
	};

	int ret;

	durable = malloc(IMG_SIZE);
	ret = cmocka_run_group_tests(tests, setup, teardown);
	free(durable);
	return ret;
}
