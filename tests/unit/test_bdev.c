// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for lib/bdev.c: the io_uring device over image files (and, run with
 * --loop, over a loop device, alone and under the fault device; exits 77
 * when losetup cannot attach one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <liburing.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/faultdev.h"
#include "lib/printbuf.h"

#define IMG_SIZE (4u << 20)

static char dir[64];
static char img[128];

static void fill(void *buf, size_t len, unsigned seed)
{
	u8 *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (u8)(seed * 131 + i * 7 + (i >> 9));
}

static int setup(void **state)
{
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/tfs-bdev-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(img, sizeof(img), "%s/img", dir);
	fd = open(img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, IMG_SIZE))
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	unlink(img);
	rmdir(dir);
	return 0;
}

static struct tfs_bdev *open_img(unsigned flags)
{
	struct tfs_bdev *b;

	assert_int_equal(tfs_bdev_open(img, flags, &b), 0);
	assert_non_null(b);
	return b;
}

static void test_open_geometry(void **state)
{
	struct tfs_bdev *b = open_img(0);
	struct printbuf out = PRINTBUF;

	assert_int_equal(b->size, IMG_SIZE);
	assert_false(b->is_blockdev);
	assert_false(b->read_only);
	assert_true(b->logical_block_size >= 512);
	assert_int_equal(b->logical_block_size & (b->logical_block_size - 1), 0);
	assert_string_equal(b->ops->name, "uring");
	tfs_bdev_to_text(&out, b);
	assert_false(out.allocation_failure);
	assert_non_null(strstr(printbuf_str(&out), img));
	assert_non_null(strstr(printbuf_str(&out), b->direct ? "direct" : "buffered"));
	printbuf_exit(&out);
	tfs_bdev_close(b);

	b = open_img(TFS_BDEV_BUFFERED);
	assert_false(b->direct);
	tfs_bdev_to_text(&out, b);
	assert_non_null(strstr(printbuf_str(&out), "buffered"));
	printbuf_exit(&out);
	tfs_bdev_close(b);
}

static void test_open_errors(void **state)
{
	struct tfs_bdev *b = (void *)1;
	char path[160];

	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(tfs_bdev_open(path, 0, &b), -ENOENT);
	assert_null(b);
	{
		/* The message is printed after the failure: printing must not change the code. */
		pid_t pid = fork();
		int st;

		assert_true(pid >= 0);
		if (!pid) {
			close(2); /* the message's write fails with EBADF */
			_exit(tfs_bdev_open(path, 0, &b) == -ENOENT ? 0 : 1);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_true(tfs_err_matches(tfs_bdev_open(dir, 0, &b), EINVAL));
	assert_null(b);
}

/* What the file holds, read behind bdev's back. */
static void check_file(u64 off, const void *want, size_t len)
{
	void *got = malloc(len);
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, len, (off_t)off), (ssize_t)len);
	assert_memory_equal(got, want, len);
	close(fd);
	free(got);
}

static void test_sync_roundtrip(void **state)
{
	unsigned modes[] = { 0, TFS_BDEV_BUFFERED };

	for (unsigned m = 0; m < 2; m++) {
		struct tfs_bdev *b = open_img(modes[m]);
		size_t len = 64 << 10;
		void *w = tfs_bdev_alloc_buf(b, len), *r = tfs_bdev_alloc_buf(b, len);

		fill(w, len, 1 + m);
		assert_int_equal(tfs_bdev_write(b, w, len, 8192, 0, TFS_TAG_data), 0);
		assert_int_equal(tfs_bdev_read(b, r, len, 8192, TFS_TAG_data), 0);
		assert_memory_equal(w, r, len);
		/* FUA and PREFLUSH writes land too; flush succeeds. */
		fill(w, len, 3 + m);
		assert_int_equal(tfs_bdev_write(b, w, 4096, 0, TFS_BIO_FUA, TFS_TAG_sb), 0);
		assert_int_equal(tfs_bdev_write(b, (char *)w + 4096, 4096, 4096,
						TFS_BIO_PREFLUSH | TFS_BIO_FUA, TFS_TAG_journal),
				 0);
		assert_int_equal(tfs_bdev_flush(b), 0);
		check_file(0, w, 8192);
		/* The last block of the device is reachable. */
		assert_int_equal(tfs_bdev_write(b, w, 4096, IMG_SIZE - 4096, 0, TFS_TAG_data), 0);
		assert_int_equal(tfs_bdev_read(b, r, 4096, IMG_SIZE - 4096, TFS_TAG_data), 0);
		assert_memory_equal(w, r, 4096);

		assert_int_equal(b->counters.ios[TFS_OP_write], 4);
		assert_int_equal(b->counters.ios[TFS_OP_read], 2);
		assert_int_equal(b->counters.ios[TFS_OP_flush], 1);
		assert_int_equal(b->counters.bytes[TFS_OP_write], len + 3 * 4096);
		assert_int_equal(b->counters.fua, 2);
		assert_int_equal(b->counters.errors[TFS_OP_write], 0);
		free(w);
		free(r);
		tfs_bdev_close(b);
	}
}

static void test_checks(void **state)
{
	struct tfs_bdev *b = open_img(0);
	size_t bs = b->logical_block_size;
	char *buf = tfs_bdev_alloc_buf(b, 3 * bs);

	assert_int_equal(tfs_bdev_write(b, buf, bs, 1, 0, TFS_TAG_data), -TFS_ERR_bdev_unaligned);
	assert_int_equal(tfs_bdev_write(b, buf, bs - 1, 0, 0, TFS_TAG_data),
			 -TFS_ERR_bdev_unaligned);
	assert_int_equal(tfs_bdev_read(b, buf + 1, bs, 0, TFS_TAG_data), -TFS_ERR_bdev_unaligned);
	assert_int_equal(tfs_bdev_read(b, buf, bs, IMG_SIZE, TFS_TAG_data),
			 -TFS_ERR_bdev_out_of_range);
	assert_int_equal(tfs_bdev_read(b, buf, 2 * bs, IMG_SIZE - bs, TFS_TAG_data),
			 -TFS_ERR_bdev_out_of_range);
	/* offset + len would wrap around */
	assert_int_equal(tfs_bdev_read(b, buf, bs, UINT64_MAX - bs + 1, TFS_TAG_data),
			 -TFS_ERR_bdev_out_of_range);
	assert_int_equal(tfs_bdev_read(b, buf, 0, 0, TFS_TAG_data), -TFS_ERR_invalid_argument);
	assert_int_equal(tfs_bdev_discard(b, 1, bs), -TFS_ERR_bdev_unaligned);
	assert_int_equal(tfs_bdev_discard(b, 0, IMG_SIZE + bs), -TFS_ERR_bdev_out_of_range);
	assert_int_equal(b->counters.errors[TFS_OP_write], 2);
	assert_int_equal(b->counters.errors[TFS_OP_read], 5);
	assert_int_equal(b->counters.errors[TFS_OP_discard], 2);
	free(buf);
	tfs_bdev_close(b);

	/* Read-only: reads work, writes and discards are refused. */
	b = open_img(TFS_BDEV_RDONLY);
	buf = tfs_bdev_alloc_buf(b, bs);
	assert_true(b->read_only);
	assert_int_equal(tfs_bdev_read(b, buf, bs, 0, TFS_TAG_sb), 0);
	assert_int_equal(tfs_bdev_write(b, buf, bs, 0, 0, TFS_TAG_sb), -EROFS);
	assert_int_equal(tfs_bdev_discard(b, 0, bs), -EROFS);
	assert_int_equal(tfs_bdev_flush(b), 0);
	free(buf);
	tfs_bdev_close(b);
}

static unsigned long to_text_number(struct tfs_bdev *b, const char *field);

/*
 * A discard punches a hole; with TFS_BDEV_HOST_CACHE the write before it
 * is still a dirty page of the host's cache: the punch must drop it, so
 * neither the read nor a flush after it brings the bytes back (the range
 * stays a hole in the image).
 */
static void test_discard(void **state)
{
	static const unsigned flags[] = { 0, TFS_BDEV_HOST_CACHE };

	for (unsigned k = 0; k < 2; k++) {
		struct tfs_bdev *b = open_img(flags[k]);
		size_t len = 128 << 10;
		u8 *w = tfs_bdev_alloc_buf(b, len), *r = tfs_bdev_alloc_buf(b, len);
		u8 *zero = calloc(1, len);
		int fd;

		memset(w, 0xa5, len);
		assert_int_equal(tfs_bdev_write(b, w, len, 1 << 20, 0, TFS_TAG_data), 0);
		if (flags[k])
			assert_int_equal(to_text_number(b, "host-cached writes"), 1);
		assert_int_equal(tfs_bdev_discard(b, (1 << 20) + 4096, 64 << 10), 0);
		assert_int_equal(tfs_bdev_read(b, r, len, 1 << 20, TFS_TAG_data), 0);
		assert_memory_equal(r, w, 4096);
		assert_memory_equal(r + 4096, zero, 64 << 10);
		assert_memory_equal(r + 4096 + (64 << 10), w, len - 4096 - (64 << 10));
		assert_int_equal(b->counters.ios[TFS_OP_discard], 1);
		assert_int_equal(b->counters.bytes[TFS_OP_discard], 64 << 10);
		assert_int_equal(tfs_bdev_flush(b), 0);
		tfs_bdev_close(b);
		check_file((1 << 20) + 4096, zero, 64 << 10);
		fd = open(img, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(lseek(fd, (1 << 20) + 4096, SEEK_HOLE), (1 << 20) + 4096);
		close(fd);
		assert_int_equal(truncate(img, 0), 0); /* the next round starts sparse */
		assert_int_equal(truncate(img, IMG_SIZE), 0);
		free(w);
		free(r);
		free(zero);
	}
}

/* ---- asynchronous ---- */

struct async_ctx {
	pthread_mutex_t lock;
	unsigned completed, errors, wrong_thread, chained;
	pthread_t submitter;
	struct tfs_bdev *bdev;
	struct tfs_bio *chain; /* bios an end_io submits */
	void *chain_buf;
};

static void async_end_io(struct tfs_bio *bio)
{
	struct async_ctx *c = bio->private;

	pthread_mutex_lock(&c->lock);
	c->completed++;
	c->errors += bio->result != 0;
	c->wrong_thread += pthread_equal(pthread_self(), c->submitter);
	pthread_mutex_unlock(&c->lock);
}

/* A bio of len bytes at offset, completed by async_end_io() into c. */
static struct tfs_bio async_bio(struct tfs_bdev *b, enum tfs_bio_op op, enum tfs_bio_tag tag,
				u64 offset, void *buf, size_t len, struct async_ctx *c)
{
	return (struct tfs_bio){
		.bdev = b,
		.op = op,
		.tag = tag,
		.offset = offset,
		.buf = buf,
		.len = len,
		.end_io = async_end_io,
		.private = c,
	};
}

#define NR_BIOS 300 /* several times the queue depth */

struct submitter_arg {
	struct async_ctx *c;
	struct tfs_bio *bios;
	u8 *bufs;
	unsigned first, nr;
};

static void *submitter(void *p)
{
	struct submitter_arg *a = p;

	for (unsigned i = a->first; i < a->first + a->nr; i++) {
		struct tfs_bio *bio = &a->bios[i];

		*bio = (struct tfs_bio){
			.bdev = a->c->bdev,
			.op = TFS_OP_write,
			.tag = TFS_TAG_data,
			.offset = (u64)i * 8192,
			.buf = a->bufs + (size_t)i * 8192,
			.len = 8192,
			.end_io = async_end_io,
			.private = a->c,
		};
		fill(bio->buf, 8192, i);
		tfs_bio_submit(bio);
	}
	return NULL;
}

static void test_async_many_threads(void **state)
{
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };
	struct tfs_bio *bios = calloc(NR_BIOS, sizeof(*bios));
	u8 *bufs, *r;
	pthread_t t[3];
	struct submitter_arg args[3];

	c.bdev = open_img(0);
	bufs = tfs_bdev_alloc_buf(c.bdev, (size_t)NR_BIOS * 8192);
	r = tfs_bdev_alloc_buf(c.bdev, (size_t)NR_BIOS * 8192);
	for (unsigned i = 0; i < 3; i++) {
		args[i] = (struct submitter_arg){ &c, bios, bufs, i * (NR_BIOS / 3), NR_BIOS / 3 };
		assert_int_equal(pthread_create(&t[i], NULL, submitter, &args[i]), 0);
	}
	for (unsigned i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	tfs_bdev_drain(c.bdev);
	assert_int_equal(c.completed, NR_BIOS);
	assert_int_equal(c.errors, 0);
	assert_int_equal(c.wrong_thread, 0);
	assert_int_equal(tfs_bdev_read(c.bdev, r, (size_t)NR_BIOS * 8192, 0, TFS_TAG_data), 0);
	assert_memory_equal(r, bufs, (size_t)NR_BIOS * 8192);

	/* Errors found at submission also complete on the completion thread. */
	c.completed = 0;
	bios[0].offset = 3;
	tfs_bio_submit(&bios[0]);
	tfs_bdev_drain(c.bdev);
	assert_int_equal(c.completed, 1);
	assert_int_equal(c.errors, 1);
	assert_int_equal(bios[0].result, -TFS_ERR_bdev_unaligned);
	assert_int_equal(c.wrong_thread, 0);

	tfs_bdev_close(c.bdev);
	free(bios);
	free(bufs);
	free(r);
}

/* An end_io that submits the next bio of a chain, with the queue full. */
static void chain_end_io(struct tfs_bio *bio)
{
	struct async_ctx *c = bio->private;
	unsigned i = (unsigned)(bio - c->chain);

	pthread_mutex_lock(&c->lock);
	c->completed++;
	c->errors += bio->result != 0;
	pthread_mutex_unlock(&c->lock);
	if (i + 100 < NR_BIOS) {
		struct tfs_bio *next = &c->chain[i + 100];

		*next = *bio;
		next->offset = (u64)(i + 100) * 4096;
		next->buf = (u8 *)c->chain_buf + (size_t)(i + 100) * 4096;
		tfs_bio_submit(next);
	}
}

static void test_end_io_submits(void **state)
{
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };

	c.bdev = open_img(0);
	c.chain = calloc(NR_BIOS, sizeof(*c.chain));
	c.chain_buf = tfs_bdev_alloc_buf(c.bdev, (size_t)NR_BIOS * 4096);
	fill(c.chain_buf, (size_t)NR_BIOS * 4096, 9);
	for (unsigned i = 0; i < 100; i++) {
		c.chain[i] = (struct tfs_bio){
			.bdev = c.bdev,
			.op = TFS_OP_write,
			.tag = TFS_TAG_journal,
			.offset = (u64)i * 4096,
			.buf = (u8 *)c.chain_buf + (size_t)i * 4096,
			.len = 4096,
			.end_io = chain_end_io,
			.private = &c,
		};
		tfs_bio_submit(&c.chain[i]);
	}
	tfs_bdev_drain(c.bdev);
	assert_int_equal(c.completed, NR_BIOS);
	assert_int_equal(c.errors, 0);
	tfs_bdev_close(c.bdev);
	check_file(0, c.chain_buf, (size_t)NR_BIOS * 4096);
	free(c.chain);
	free(c.chain_buf);
}

static unsigned long to_text_number(struct tfs_bdev *b, const char *field)
{
	struct printbuf out = PRINTBUF;
	const char *at;
	unsigned long n = 0;

	tfs_bdev_to_text(&out, b);
	at = strstr(printbuf_str(&out), field);
	assert_non_null(at);
	assert_int_equal(sscanf(at + strlen(field), " %lu", &n), 1);
	printbuf_exit(&out);
	return n;
}

/* A batch enters the kernel once; one larger than the queue still completes. */
static void test_batch(void **state)
{
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };
	struct tfs_bio *bios = calloc(NR_BIOS, sizeof(*bios)),
		       **list = calloc(NR_BIOS, sizeof(*list));
	u8 *buf, *r;
	unsigned long before;

	c.bdev = open_img(0);
	buf = tfs_bdev_alloc_buf(c.bdev, (size_t)NR_BIOS * 4096);
	r = tfs_bdev_alloc_buf(c.bdev, (size_t)NR_BIOS * 4096);
	fill(buf, (size_t)NR_BIOS * 4096, 17);
	for (unsigned i = 0; i < NR_BIOS; i++) {
		bios[i] = (struct tfs_bio){
			.bdev = c.bdev,
			.op = TFS_OP_write,
			/* FUA and PREFLUSH mixed in, as the journal does */
			.flags = i % 7 == 3   ? TFS_BIO_FUA | TFS_BIO_PREFLUSH
				 : i % 5 == 1 ? TFS_BIO_FUA
					      : 0,
			.offset = (u64)i * 4096,
			.buf = buf + (size_t)i * 4096,
			.len = 4096,
			.end_io = async_end_io,
			.private = &c,
		};
		list[i] = &bios[i];
	}
	before = to_text_number(c.bdev, "submissions");
	tfs_bio_submit_batch(list, 32);
	tfs_bdev_drain(c.bdev);
	assert_int_equal(to_text_number(c.bdev, "submissions"), before + 1);
	assert_int_equal(c.completed, 32);

	tfs_bio_submit_batch(list + 32, NR_BIOS - 32);
	tfs_bdev_drain(c.bdev);
	assert_int_equal(c.completed, NR_BIOS);
	assert_int_equal(c.errors, 0);
	assert_int_equal(c.wrong_thread, 0);
	assert_int_equal(tfs_bdev_read(c.bdev, r, (size_t)NR_BIOS * 4096, 0, TFS_TAG_data), 0);
	assert_memory_equal(r, buf, (size_t)NR_BIOS * 4096);
	tfs_bdev_close(c.bdev);
	free(bios);
	free(list);
	free(buf);
	free(r);
}

/* Closing with bios in flight drains them first. */
static void test_close_drains(void **state)
{
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };
	struct tfs_bio bios[32];
	u8 *buf;

	c.bdev = open_img(0);
	buf = tfs_bdev_alloc_buf(c.bdev, 32 * 4096);
	fill(buf, 32 * 4096, 5);
	for (unsigned i = 0; i < 32; i++) {
		bios[i] = (struct tfs_bio){
			.bdev = c.bdev,
			.op = i == 31 ? TFS_OP_flush : TFS_OP_write,
			.offset = (u64)i * 4096,
			.buf = buf + i * 4096,
			.len = i == 31 ? 0 : 4096,
			.end_io = async_end_io,
			.private = &c,
		};
		tfs_bio_submit(&bios[i]);
	}
	tfs_bdev_close(c.bdev);
	assert_int_equal(c.completed, 32);
	assert_int_equal(c.errors, 0);
	check_file(0, buf, 31 * 4096);
	free(buf);
}

/*
 * A read that the file no longer fully backs: the first part arrives
 * (short completion, continued), then no progress: short_io, with the bytes
 * that were there read correctly.
 */
static void test_short_read(void **state)
{
	struct tfs_bdev *b = open_img(TFS_BDEV_BUFFERED);
	size_t len = 64 << 10;
	u8 *w = tfs_bdev_alloc_buf(b, len), *r = tfs_bdev_alloc_buf(b, len);
	struct printbuf out = PRINTBUF;

	fill(w, len, 11);
	assert_int_equal(tfs_bdev_write(b, w, len, IMG_SIZE - len, 0, TFS_TAG_data), 0);
	assert_int_equal(truncate(img, IMG_SIZE - len / 2), 0);
	assert_int_equal(tfs_bdev_read(b, r, len, IMG_SIZE - len, TFS_TAG_data),
			 -TFS_ERR_bdev_short_io);
	assert_memory_equal(r, w, len / 2);
	assert_true(tfs_err_matches(-TFS_ERR_bdev_short_io, EIO));
	tfs_bdev_to_text(&out, b);
	{
		const char *sc = strstr(printbuf_str(&out), "short completions");
		unsigned long n = 0;

		assert_non_null(sc);
		assert_int_equal(sscanf(sc + strlen("short completions"), " %lu", &n), 1);
		assert_true(n >= 1); /* the first, partial, completion was continued */
	}
	printbuf_exit(&out);
	assert_int_equal(truncate(img, IMG_SIZE), 0);
	free(w);
	free(r);
	tfs_bdev_close(b);
}

static void test_names(void **state)
{
	assert_string_equal(tfs_bio_op_names[TFS_OP_discard], "discard");
	assert_string_equal(tfs_bio_tag_names[TFS_TAG_btree], "btree");
	assert_null(tfs_bio_op_names[TFS_OP_NR]);
	assert_null(tfs_bio_tag_names[TFS_TAG_NR]);
}

/* ---- loop device (--loop) ---- */

static char loopdev[64];

static int run_cmd(const char *cmd, char *out, size_t outlen)
{
	FILE *f = popen(cmd, "r");
	int st;

	if (!f)
		return -1;
	if (out && !fgets(out, (int)outlen, f))
		out[0] = '\0';
	st = pclose(f);
	if (out)
		out[strcspn(out, "\n")] = '\0';
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_loop_device(void **state)
{
	struct tfs_bdev *b;
	u8 *w, *r, *zero;
	size_t len = 64 << 10;
	struct printbuf out = PRINTBUF;

	assert_int_equal(tfs_bdev_open(loopdev, 0, &b), 0);
	assert_true(b->is_blockdev);
	assert_true(b->direct);
	assert_int_equal(b->size, IMG_SIZE);
	assert_true(b->logical_block_size == 512 || b->logical_block_size == 4096);
	tfs_bdev_to_text(&out, b);
	assert_non_null(strstr(printbuf_str(&out), "block device"));
	printbuf_exit(&out);

	w = tfs_bdev_alloc_buf(b, len);
	r = tfs_bdev_alloc_buf(b, len);
	zero = calloc(1, len);
	fill(w, len, 21);
	assert_int_equal(tfs_bdev_write(b, w, len, 0, TFS_BIO_FUA, TFS_TAG_data), 0);
	assert_int_equal(tfs_bdev_flush(b), 0);
	assert_int_equal(tfs_bdev_read(b, r, len, 0, TFS_TAG_data), 0);
	assert_memory_equal(r, w, len);
	assert_int_equal(tfs_bdev_discard(b, 0, len), 0);
	assert_int_equal(tfs_bdev_read(b, r, len, 0, TFS_TAG_data), 0);
	assert_memory_equal(r, zero, len);
	assert_int_equal(tfs_bdev_read(b, r, 4096, IMG_SIZE, TFS_TAG_data),
			 -TFS_ERR_bdev_out_of_range);
	tfs_bdev_close(b);
	free(w);
	free(r);
	free(zero);
}

/* The fault device over the loop device: an unflushed write is lost by a power cut. */
static void test_loop_faultdev(void **state)
{
	struct tfs_bdev *lower, *f;
	size_t len = 8192;
	u8 *a = tfs_bdev_alloc_buf(NULL, len), *c = tfs_bdev_alloc_buf(NULL, len);
	u8 *r = tfs_bdev_alloc_buf(NULL, len);

	fill(a, len, 31);
	fill(c, len, 32);
	assert_int_equal(tfs_bdev_open_uring(loopdev, 0, &lower), 0);
	assert_int_equal(tfs_faultdev_create(lower, true, &f), 0);
	assert_true(f->is_blockdev);
	assert_int_equal(tfs_bdev_write(f, a, len, 65536, 0, TFS_TAG_data), 0);
	assert_int_equal(tfs_bdev_flush(f), 0);
	assert_int_equal(tfs_bdev_write(f, c, len, 65536, 0, TFS_TAG_data), 0);
	assert_int_equal(tfs_bdev_read(f, r, len, 65536, TFS_TAG_data), 0);
	assert_memory_equal(r, c, len); /* readable before durable */
	assert_int_equal(tfs_faultdev_powercut(f, TFS_POWERCUT_none, 0), 0);
	assert_int_equal(tfs_bdev_read(f, r, len, 65536, TFS_TAG_data), -TFS_ERR_bdev_powercut);
	tfs_bdev_close(f);

	assert_int_equal(tfs_bdev_open_uring(loopdev, 0, &lower), 0);
	assert_int_equal(tfs_bdev_read(lower, r, len, 65536, TFS_TAG_data), 0);
	assert_memory_equal(r, a, len);
	tfs_bdev_close(lower);
	free(a);
	free(c);
	free(r);
}

/* ---- synchronous reads in the caller's thread ---- */

struct held {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool in_end_io, release, read_done;
	struct tfs_bdev *bdev;
	u8 *buf;
	int read_ret;
};

/* Keeps the completion thread here until released (bounded: never hangs the test). */
static void held_end_io(struct tfs_bio *bio)
{
	struct held *h = bio->private;
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 20;
	pthread_mutex_lock(&h->lock);
	h->in_end_io = true;
	pthread_cond_broadcast(&h->cond);
	while (!h->release && pthread_cond_timedwait(&h->cond, &h->lock, &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&h->lock);
}

static void *held_reader(void *p)
{
	struct held *h = p;
	int ret = tfs_bdev_write(h->bdev, h->buf, 4096, 16384, 0, TFS_TAG_data)
			  ?: tfs_bdev_read(h->bdev, h->buf, 4096, 8192, TFS_TAG_data);

	pthread_mutex_lock(&h->lock);
	h->read_ret = ret;
	h->read_done = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/*
 * A synchronous read or data write does not go through the completion
 * thread: it completes while that thread is busy in another bio's end_io.
 * Before, it waited for that end_io (and each I/O woke two threads in a
 * row: the completion thread, then the caller).
 */
static void test_read_wait_in_caller(void **state)
{
	struct held h = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	u8 *w, *wbuf;
	struct tfs_bio bio;
	struct timespec deadline;
	pthread_t t;
	bool done;

	h.bdev = open_img(0);
	w = tfs_bdev_alloc_buf(h.bdev, 4096);
	wbuf = tfs_bdev_alloc_buf(h.bdev, 4096);
	h.buf = tfs_bdev_alloc_buf(h.bdev, 4096);
	fill(h.buf, 4096, 22);
	fill(w, 4096, 21);
	assert_int_equal(tfs_bdev_write(h.bdev, w, 4096, 8192, 0, TFS_TAG_data), 0);
	bio = (struct tfs_bio){
		.bdev = h.bdev,
		.op = TFS_OP_write,
		.tag = TFS_TAG_data,
		.offset = 0,
		.buf = wbuf,
		.len = 4096,
		.end_io = held_end_io,
		.private = &h,
	};
	tfs_bio_submit(&bio);
	pthread_mutex_lock(&h.lock);
	while (!h.in_end_io)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);

	assert_int_equal(pthread_create(&t, NULL, held_reader, &h), 0);
	/* Not a timing: a bound, far above a 4 KiB read, so a wait fails instead of hanging. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 5;
	pthread_mutex_lock(&h.lock);
	while (!h.read_done && pthread_cond_timedwait(&h.cond, &h.lock, &deadline) != ETIMEDOUT)
		;
	done = h.read_done;
	h.release = true;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(t, NULL);
	tfs_bdev_drain(h.bdev);
	if (!done)
		print_error("the read waited for the completion thread\n");
	assert_true(done);
	assert_int_equal(h.read_ret, 0);
	assert_memory_equal(h.buf, w, 4096);
	assert_int_equal(h.bdev->counters.ios[TFS_OP_read], 1);
	assert_int_equal(h.bdev->counters.ios[TFS_OP_write], 3);
	/* The setup write, the write and the read; not the held bio. */
	assert_int_equal(to_text_number(h.bdev, "i/o in the caller"), 3);
	tfs_bdev_close(h.bdev);
	fill(w, 4096, 22);
	check_file(16384, w, 4096);
	free(w);
	free(wbuf);
	free(h.buf);
}

/*
 * A real write error in the caller's thread (tfs_bio_in_caller(): a data
 * write, pwrite(2)): the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored)
 * ends the image inside the write, so the first pwrite is short and the
 * next fails with EFBIG, as a full filesystem under the image fails with
 * ENOSPC.  The fault device (tests) keeps the ring's path, so nothing else
 * sends this path a device error: the remainder is continued, the error
 * returned, counted and the short completion counted, as the ring does
 * for the same write submitted asynchronously.
 */
static void test_write_error_in_caller(void **state)
{
	static const unsigned flags[] = { 0, TFS_BDEV_BUFFERED, TFS_BDEV_HOST_CACHE };
	struct rlimit old, lim;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_sa;

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(sigaction(SIGXFSZ, &ign, &old_sa), 0);
	for (unsigned i = 0; i < ARRAY_SIZE(flags); i++) {
		struct tfs_bdev *b = open_img(flags[i]);
		u8 *w = tfs_bdev_alloc_buf(b, 8192);
		struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER,
				       .submitter = pthread_self() };
		struct tfs_bio bio;
		u64 shorts = to_text_number(b, "short completions");
		int ret;

		fill(w, 8192, 31 + i);
		lim = old;
		lim.rlim_cur = 3 * 4096;
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
		/* Synchronous: pwrite in this thread. */
		ret = tfs_bdev_write(b, w, 8192, 8192, 0, TFS_TAG_data);
		/* Asynchronous: the ring's completion. */
		bio = async_bio(b, TFS_OP_write, TFS_TAG_data, 8192, w, 8192, &c);
		tfs_bio_submit(&bio);
		tfs_bdev_drain(b);
		assert_int_equal(c.completed, 1);
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);

		assert_int_equal(ret, -EFBIG);
		assert_int_equal(bio.result, -EFBIG);
		assert_int_equal(b->counters.errors[TFS_OP_write], 2);
		assert_true(to_text_number(b, "short completions") >= shorts + 2);
		assert_int_equal(to_text_number(b, "i/o in the caller"), 1);
		/* The block below the limit was written. */
		tfs_bdev_close(b);
		check_file(8192, w, 4096);
		free(w);
	}
	assert_int_equal(sigaction(SIGXFSZ, &old_sa, NULL), 0);
}

/* ---- small writes through the host's page cache (TFS_BDEV_HOST_CACHE) ---- */

static bool to_text_has(struct tfs_bdev *b, const char *what)
{
	struct printbuf out = PRINTBUF;
	bool has;

	tfs_bdev_to_text(&out, b);
	has = strstr(printbuf_str(&out), what);
	printbuf_exit(&out);
	return has;
}

/*
 * On an image file, a small write of data or of a journal entry without
 * FUA or PREFLUSH goes through the page cache (in the caller, and through
 * the ring), and so does a small read of data; nothing else does.  O_DIRECT reads, of this open and of
 * another, see such writes before any flush; a flush (fdatasync in the
 * caller) covers them.  Read-only opens write nothing and keep no cached
 * descriptor.
 */
static void test_host_cache(void **state)
{
	const size_t big = TFS_BDEV_HOST_CACHE_MAX + 4096;
	struct tfs_bdev *b = open_img(TFS_BDEV_HOST_CACHE), *other;
	u8 *w = tfs_bdev_alloc_buf(b, big), *r = tfs_bdev_alloc_buf(b, big);
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };
	struct tfs_bio bio;
	unsigned long in_caller;

	assert_true(b->direct);
	assert_true(to_text_has(b, "host page cache"));
	fill(w, big, 41);
	assert_int_equal(tfs_bdev_write(b, w, 4096, 0, 0, TFS_TAG_data), 0);
	bio = async_bio(b, TFS_OP_write, TFS_TAG_journal, 65536, w + 4096, 8192, &c);
	tfs_bio_submit(&bio);
	tfs_bdev_drain(b);
	assert_int_equal(c.completed, 1);
	assert_int_equal(c.errors, 0);
	assert_int_equal(to_text_number(b, "host-cached writes"), 2);

	/* Direct: too big, FUA, PREFLUSH, a btree node, a superblock. */
	assert_int_equal(tfs_bdev_write(b, w, big, 1 << 20, 0, TFS_TAG_data), 0);
	assert_int_equal(tfs_bdev_write(b, w, 4096, 2 << 20, TFS_BIO_FUA, TFS_TAG_journal), 0);
	assert_int_equal(
		tfs_bdev_write(b, w, 4096, (2 << 20) + 4096, TFS_BIO_PREFLUSH, TFS_TAG_data), 0);
	assert_int_equal(tfs_bdev_write(b, w, 4096, (2 << 20) + 8192, 0, TFS_TAG_btree), 0);
	assert_int_equal(tfs_bdev_write(b, w, 4096, (2 << 20) + 12288, 0, TFS_TAG_sb), 0);
	assert_int_equal(to_text_number(b, "host-cached writes"), 2);

	/*
	 * Coherent before any flush: this open's reads (a small data read
	 * through the cache, a journal and a big data read direct), and
	 * another open's (all direct).
	 */
	assert_int_equal(tfs_bdev_read(b, r, 4096, 0, TFS_TAG_data), 0);
	assert_memory_equal(r, w, 4096);
	assert_int_equal(to_text_number(b, "host-cached reads"), 1);
	assert_int_equal(tfs_bdev_read(b, r, 8192, 65536, TFS_TAG_journal), 0);
	assert_memory_equal(r, w + 4096, 8192);
	assert_int_equal(tfs_bdev_read(b, r, big, 1 << 20, TFS_TAG_data), 0);
	assert_memory_equal(r, w, big);
	assert_int_equal(to_text_number(b, "host-cached reads"), 1);
	other = open_img(0);
	assert_false(to_text_has(other, "host page cache"));
	assert_int_equal(tfs_bdev_read(other, r, 8192, 65536, TFS_TAG_journal), 0);
	assert_memory_equal(r, w + 4096, 8192);
	assert_int_equal(tfs_bdev_read(other, r, big, 1 << 20, TFS_TAG_data), 0);
	assert_memory_equal(r, w, big);
	tfs_bdev_close(other);

	/* A flush runs in the caller (fdatasync of the file: both descriptors' writes). */
	in_caller = to_text_number(b, "i/o in the caller");
	assert_int_equal(tfs_bdev_flush(b), 0);
	assert_int_equal(to_text_number(b, "i/o in the caller"), in_caller + 1);
	tfs_bdev_close(b);
	check_file(0, w, 4096);
	check_file(65536, w + 4096, 8192);

	b = open_img(TFS_BDEV_HOST_CACHE | TFS_BDEV_RDONLY);
	assert_false(to_text_has(b, "host page cache"));
	tfs_bdev_close(b);
	free(w);
	free(r);
}

/*
 * A host page shared by a cached write and a concurrent direct one (a
 * block size below the host's page size: journal entries and data extents
 * of 512-byte blocks sit side by side in one page).  The cached write
 * reads the page first when it covers only part of it; if that read comes
 * before the direct write lands, the dirty page holds the old bytes of the
 * direct write's blocks, the kernel cannot invalidate it after the direct
 * write, and its write-back puts the old bytes over the new ones.  Neither
 * write may be lost, whatever the order: each round writes fresh patterns
 * to a fresh page and reads both back past the page cache after a flush.
 */
static void test_host_cache_shared_page(void **state)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE), stride = 256 << 10;
	const size_t big = TFS_BDEV_HOST_CACHE_MAX + page;
	struct tfs_bdev *b = open_img(TFS_BDEV_HOST_CACHE);
	unsigned bs = b->logical_block_size, bad = 0;
	int ret;
	u8 *small = tfs_bdev_alloc_buf(b, bs), *large = tfs_bdev_alloc_buf(b, big);
	u8 *r = tfs_bdev_alloc_buf(b, page);
	struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER, .submitter = pthread_self() };

	if (bs >= page) {
		tfs_bdev_close(b);
		free(small);
		free(large);
		free(r);
		skip(); /* no page is shared between two blocks here */
	}
	for (unsigned round = 0; round < 400 && !bad; round++) {
		u64 base = (u64)(round % (IMG_SIZE / stride)) * stride;
		struct tfs_bio bios[2];

		fill(small, bs, 2 * round + 1);
		fill(large, big, 2 * round + 2);
		/* A small (cached) write of the page's first block, a large (direct) one after it. */
		bios[0] = (struct tfs_bio){ .bdev = b,
					    .op = TFS_OP_write,
					    .tag = TFS_TAG_data,
					    .offset = base,
					    .buf = small,
					    .len = bs,
					    .end_io = async_end_io,
					    .private = &c };
		bios[1] = (struct tfs_bio){ .bdev = b,
					    .op = TFS_OP_write,
					    .tag = TFS_TAG_data,
					    .offset = base + bs,
					    .buf = large,
					    .len = big - bs,
					    .end_io = async_end_io,
					    .private = &c };
		if (round & 1) {
			tfs_bio_submit(&bios[1]);
			tfs_bio_submit(&bios[0]);
		} else {
			tfs_bio_submit(&bios[0]);
			tfs_bio_submit(&bios[1]);
		}
		tfs_bdev_drain(b);
		assert_int_equal(c.errors, 0);
		/* The kernel fails the next fsync (EIO) when it saw the collision. */
		if ((ret = tfs_bdev_flush(b))) {
			fprintf(stderr, "round %u: flush failed: %s\n", round, tfs_err_str(ret));
			bad++;
		}
		assert_int_equal(tfs_bdev_read(b, r, page, base, TFS_TAG_data), 0);
		if (memcmp(r, small, bs) || memcmp(r + bs, large, page - bs)) {
			fprintf(stderr, "round %u: page at %llu lost a write\n", round,
				(unsigned long long)base);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	tfs_bdev_close(b);
	free(small);
	free(large);
	free(r);
}

/*
 * Makes the host record a write-back error on img (errseq, reported once
 * to each open file's next fsync), the way a failed write-back of a cached
 * page does: part-page buffered writes racing direct writes to the rest of
 * their pages, through a ring of its own, until the kernel reports the
 * collision (EIO, dio_warn_stale_pagecache).  It takes pages written
 * before, so 16 slots of 256 KiB from `from` on, several times over.
 * Returns whether it got one.  With keep_fd, it does not look (a sync
 * would take the error from the next opener) and leaves in *keep_fd an
 * open file whose next fdatasync tells.
 */
static bool inject_wb_error(u64 from, int *keep_fd)
{
	const size_t big = (128 << 10) + 4096, slot = 256 << 10;
	int bfd = open(img, O_RDWR), dfd = open(img, O_RDWR | O_DIRECT);
	void *sb = NULL, *db = NULL;
	struct io_uring ring;
	bool got = false;

	assert_true(bfd >= 0 && dfd >= 0);
	assert_true(from + 16 * slot <= IMG_SIZE);
	assert_int_equal(posix_memalign(&sb, 4096, 4096), 0);
	assert_int_equal(posix_memalign(&db, 4096, big), 0);
	memset(sb, 0x5a, 4096);
	memset(db, 0xa5, big);
	assert_int_equal(io_uring_queue_init(4, &ring, 0), 0);
	for (unsigned round = 0; round < 256 && !got; round++) {
		u64 off = from + (round % 16) * slot;
		bool ok = true;

		for (unsigned k = 0; k < 2; k++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			if ((k == 0) == (round & 1))
				io_uring_prep_write(sqe, dfd, db, big - 512, off + 512);
			else
				io_uring_prep_write(sqe, bfd, sb, 512, off);
			assert_int_equal(io_uring_submit(&ring), 1);
		}
		for (unsigned k = 0; k < 2; k++) {
			struct io_uring_cqe *cqe;

			assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
			ok &= cqe->res > 0;
			io_uring_cqe_seen(&ring, cqe);
		}
		if (!ok)
			break; /* no 512-byte O_DIRECT here */
		if (!keep_fd)
			got = fdatasync(bfd) && errno == EIO;
		else if (round == 63)
			break;
	}
	io_uring_queue_exit(&ring);
	if (keep_fd)
		*keep_fd = dup(bfd);
	close(bfd);
	close(dfd);
	free(sb);
	free(db);
	return got;
}

/*
 * A write-back error of a cached write reaches only the first flush after
 * it (the kernel reports it once per open file): a btree checkpoint's
 * flush may take it, and the journal's next flush would then succeed and
 * count lost data as durable.  With cached writes, every flush after a
 * failed one fails too; without them (no cached descriptor), a flush
 * reports what the host reports.
 */
static void test_host_cache_flush_error_sticks(void **state)
{
	struct tfs_bdev *b = open_img(TFS_BDEV_HOST_CACHE);
	u8 *w = tfs_bdev_alloc_buf(b, 4096);

	if (b->logical_block_size > 512 || sysconf(_SC_PAGESIZE) <= 512) {
		tfs_bdev_close(b);
		free(w);
		skip(); /* the injection needs 512-byte O_DIRECT inside a page */
	}
	fill(w, 4096, 61);
	assert_int_equal(tfs_bdev_write(b, w, 4096, IMG_SIZE - 4096, 0, TFS_TAG_data), 0);
	assert_int_equal(to_text_number(b, "host-cached writes"), 1);
	if (!inject_wb_error(0, NULL)) {
		tfs_bdev_close(b);
		free(w);
		skip(); /* the host never reported the collision */
	}
	assert_int_equal(tfs_bdev_flush(b), -EIO); /* "the checkpoint's" */
	assert_int_equal(tfs_bdev_flush(b), -EIO); /* "the journal's": not durable */
	assert_int_equal(tfs_bdev_write(b, w, 4096, 8192, TFS_BIO_FUA, TFS_TAG_journal), -EIO);
	assert_int_equal(tfs_bdev_write(b, w, 4096, 8192, TFS_BIO_PREFLUSH, TFS_TAG_journal), -EIO);
	tfs_bdev_close(b);
	free(w);
}

/*
 * The host keeps a write-back error nobody has seen for the next open of
 * the file (errseq): a daemon killed between a cached write's failed
 * write-back and its flush leaves one.  Those writes were never flushed,
 * so never counted durable (replay checks what a post-flush entry refers
 * to); a new open must not fail its first flush for them -- with
 * TFS_BDEV_HOST_CACHE that would fail every later flush too.
 */
static void test_host_cache_stale_error_at_open(void **state)
{
	struct tfs_bdev *b = open_img(0);
	int probe = -1;
	bool small = b->logical_block_size <= 512 && sysconf(_SC_PAGESIZE) > 512;

	tfs_bdev_close(b);
	if (!small)
		skip(); /* the injection needs 512-byte O_DIRECT inside a page */
	inject_wb_error(0, &probe);
	assert_true(probe >= 0);
	b = open_img(TFS_BDEV_HOST_CACHE);
	assert_int_equal(tfs_bdev_flush(b), 0);
	assert_int_equal(tfs_bdev_flush(b), 0);
	tfs_bdev_close(b);
	/* The injection worked: a file open before it sees the error. */
	if (!(fdatasync(probe) && errno == EIO)) {
		close(probe);
		skip(); /* the host never reported the collision */
	}
	close(probe);
}

/*
 * tfs_bio_submit_inline(): the I/O and the bio's own end_io (with its
 * private) run in the calling thread -- on the io_uring device (pwrite,
 * fdatasync), and on a device without rw_wait (the fault device), which
 * waits for its completion thread but still calls end_io here.
 */
static void test_submit_inline(void **state)
{
	for (unsigned k = 0; k < 2; k++) {
		struct tfs_bdev *lower, *b;
		u8 *w;
		struct async_ctx c = { .lock = PTHREAD_MUTEX_INITIALIZER,
				       .submitter = pthread_self() };
		struct tfs_bio bio = { 0 };

		assert_int_equal(tfs_bdev_open_uring(img, TFS_BDEV_HOST_CACHE, &lower), 0);
		b = lower;
		if (k)
			assert_int_equal(tfs_faultdev_create(lower, true, &b), 0);
		w = tfs_bdev_alloc_buf(b, 4096);
		fill(w, 4096, 51 + k);
		bio = async_bio(b, TFS_OP_write, TFS_TAG_journal, 12288, w, 4096, &c);
		tfs_bio_submit_inline(&bio);
		assert_int_equal(c.completed, 1);
		assert_int_equal(c.errors, 0);
		assert_int_equal(c.wrong_thread, 1); /* here, not the completion thread */
		assert_ptr_equal(bio.private, &c);
		bio = (struct tfs_bio){
			.bdev = b, .op = TFS_OP_flush, .end_io = async_end_io, .private = &c
		};
		tfs_bio_submit_inline(&bio);
		assert_int_equal(c.completed, 2);
		assert_int_equal(c.errors, 0);
		assert_int_equal(c.wrong_thread, 2);
		tfs_bdev_close(b);
		check_file(12288, w, 4096);
		free(w);
	}
}

/* ---- io_uring_enter failing (seccomp makes it fail in one thread) ---- */

struct enter_fail {
	struct tfs_bdev *bdev;
	struct tfs_bio bio;
	int err;       /* io_uring_enter fails with this in the submitter */
	int installed; /* 1: filter on; -1: seccomp unavailable */
	pthread_t submitter;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, on_submitter;
};

static void enter_fail_end_io(struct tfs_bio *bio)
{
	struct enter_fail *e = bio->private;

	pthread_mutex_lock(&e->lock);
	e->done = true;
	e->on_submitter = pthread_equal(pthread_self(), e->submitter);
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

static void *enter_fail_thread(void *p)
{
	struct enter_fail *e = p;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)e->err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(f), .filter = f };

	/* This thread only: every io_uring_enter it makes fails with e->err. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		e->installed = -1;
		return NULL;
	}
	e->installed = 1;
	tfs_bio_submit(&e->bio);
	return NULL;
}

/*
 * A submission io_uring_enter refuses, transiently (EAGAIN, EINTR:
 * retried, then given up) or for good (EBADF): the bio must still complete,
 * with the error, on the completion thread, and the device keep working for
 * the other threads and close.  Before, the SQE stayed unsubmitted and a
 * synchronous caller, drain or close hung.
 */
static void test_submit_errors(void **state)
{
	static const int errs[] = { EAGAIN, EINTR, EBADF };

	for (unsigned i = 0; i < ARRAY_SIZE(errs); i++) {
		struct enter_fail e = {
			.err = errs[i],
			.lock = PTHREAD_MUTEX_INITIALIZER,
			.cond = PTHREAD_COND_INITIALIZER,
		};
		struct timespec deadline;
		u8 *buf, *r;

		assert_int_equal(tfs_bdev_open_uring(img, 0, &e.bdev), 0);
		buf = tfs_bdev_alloc_buf(e.bdev, 4096);
		r = tfs_bdev_alloc_buf(e.bdev, 4096);
		e.bio = (struct tfs_bio){
			.bdev = e.bdev,
			.op = TFS_OP_read,
			.buf = buf,
			.len = 4096,
			.end_io = enter_fail_end_io,
			.private = &e,
		};
		assert_int_equal(pthread_create(&e.submitter, NULL, enter_fail_thread, &e), 0);
		pthread_join(e.submitter, NULL);
		if (e.installed < 0) {
			tfs_bdev_close(e.bdev);
			free(buf);
			free(r);
			skip(); /* seccomp unavailable here */
		}
		/* Not a timing: a bound so a hang fails instead of waiting for meson. */
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 10;
		pthread_mutex_lock(&e.lock);
		while (!e.done && pthread_cond_timedwait(&e.cond, &e.lock, &deadline) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&e.lock);
		if (!e.done)
			print_error("errno %d: end_io never ran\n", errs[i]);
		assert_true(e.done);
		assert_false(e.on_submitter);
		assert_int_equal(e.bio.result, -errs[i]);
		assert_true(e.bdev->counters.errors[TFS_OP_read] >= 1);

		/* The other threads' I/O still works. */
		assert_int_equal(tfs_bdev_write(e.bdev, buf, 4096, 8192, 0, TFS_TAG_data), 0);
		assert_int_equal(tfs_bdev_read(e.bdev, r, 4096, 8192, TFS_TAG_data), 0);
		tfs_bdev_drain(e.bdev);
		tfs_bdev_close(e.bdev);
		free(buf);
		free(r);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_open_geometry),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_sync_roundtrip),
		cmocka_unit_test(test_checks),
		cmocka_unit_test(test_discard),
		cmocka_unit_test(test_async_many_threads),
		cmocka_unit_test(test_end_io_submits),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_close_drains),
		cmocka_unit_test(test_short_read),
		cmocka_unit_test(test_submit_errors),
		cmocka_unit_test(test_read_wait_in_caller),
		cmocka_unit_test(test_write_error_in_caller),
		cmocka_unit_test(test_host_cache),
		cmocka_unit_test(test_submit_inline),
		cmocka_unit_test(test_host_cache_shared_page),
		cmocka_unit_test(test_host_cache_flush_error_sticks),
		cmocka_unit_test(test_host_cache_stale_error_at_open),
	};
	const struct CMUnitTest loop_tests[] = {
		cmocka_unit_test(test_loop_device),
		cmocka_unit_test(test_loop_faultdev),
	};
	char cmd[256];
	int ret;

	if (argc < 2 || strcmp(argv[1], "--loop"))
		return cmocka_run_group_tests(tests, setup, teardown);

	if (setup(NULL))
		return 1;
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>/dev/null", img);
	if (run_cmd(cmd, loopdev, sizeof(loopdev)) || !loopdev[0]) {
		printf("skip: losetup cannot attach a loop device here\n");
		teardown(NULL);
		return 77;
	}
	ret = cmocka_run_group_tests(loop_tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "losetup -d %s", loopdev);
	run_cmd(cmd, NULL, 0);
	teardown(NULL);
	return ret;
}
