// SPDX-License-Identifier: GPL-2.0
/*
 * What every fuzz target shares: the memory device, the FUZZ_FIX repairs,
 * small helpers.  See fuzz.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/btree_format.h"
#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tests/fuzz/fuzz.h"

const u8 fuzz_uuid[16] = { 0x7f, 0x2a, 0x11, 0x0e, 0xc4, 0x5b, 0x4d, 0x8a,
			   0x9b, 0x36, 0x52, 0xe1, 0x0d, 0xf0, 0x3c, 0x77 };

void fuzz_fail(const char *file, int line, const char *cond, const char *what)
{
	fprintf(stderr, "%s:%d: fuzz check failed: %s: %s\n", file, line, cond, what);
	abort();
}

void *fuzz_dup(const void *data, size_t len)
{
	void *p = malloc(len ?: 1);

	if (!p)
		abort();
	if (len)
		memcpy(p, data, len);
	return p;
}

/* --- the memory device --- */

struct mem_extent {
	u64 off;
	size_t len;
	u8 *data;
};

struct membdev {
	struct tfs_bdev bdev;
	pthread_mutex_t lock; /* extents: writes may come from any thread */
	struct mem_extent *ext;
	unsigned nr_ext;
	u64 fail_off, fail_len;
	int fail_err;
};

static struct membdev *to_mem(struct tfs_bdev *bdev)
{
	return bdev->private;
}

static void mem_read(struct membdev *m, struct tfs_bio *bio)
{
	u64 start = bio->offset, end = bio->offset + bio->len;

	memset(bio->buf, 0, bio->len);
	/* In put order, so later puts win. */
	for (unsigned i = 0; i < m->nr_ext; i++) {
		const struct mem_extent *e = &m->ext[i];
		u64 lo = max_t(u64, start, e->off), hi = min_t(u64, end, e->off + e->len);

		if (lo < hi)
			memcpy((u8 *)bio->buf + (lo - start), e->data + (lo - e->off), hi - lo);
	}
}

/* Appends a copy of data as the newest extent (locked). */
static void mem_put_locked(struct membdev *m, u64 off, const void *data, size_t len)
{
	struct mem_extent *ext = realloc(m->ext, (m->nr_ext + 1) * sizeof(*ext));

	if (!ext)
		abort();
	m->ext = ext;
	ext[m->nr_ext++] =
		(struct mem_extent){ .off = off, .len = len, .data = fuzz_dup(data, len) };
}

static void mem_submit(struct tfs_bdev *bdev, struct tfs_bio *bio)
{
	struct membdev *m = to_mem(bdev);
	int ret;

	tfs_bdev_count_submit(bdev, bio);
	ret = tfs_bio_check(bio);
	pthread_mutex_lock(&m->lock);
	if (!ret && bio->op == TFS_OP_read) {
		if (m->fail_len && bio->offset < m->fail_off + m->fail_len &&
		    m->fail_off < bio->offset + bio->len)
			ret = m->fail_err;
		else
			mem_read(m, bio);
	} else if (!ret && bio->op == TFS_OP_write) {
		mem_put_locked(m, bio->offset, bio->buf, bio->len);
	}
	pthread_mutex_unlock(&m->lock);
	/* Flushes and discards succeed (a discard leaves the bytes: allowed). */
	bio->result = ret;
	if (ret)
		tfs_bdev_count_error(bdev, bio);
	bio->end_io(bio);
}

static void mem_drain(struct tfs_bdev *bdev)
{
	/* Every bio completed inside submit. */
}

static void mem_close(struct tfs_bdev *bdev)
{
	struct membdev *m = to_mem(bdev);

	for (unsigned i = 0; i < m->nr_ext; i++)
		free(m->ext[i].data);
	free(m->ext);
	free(bdev->path);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void mem_to_text(struct printbuf *out, struct tfs_bdev *bdev)
{
	prt_printf(out, "%s: memory, %llu bytes in %u extents\n", bdev->path,
		   (unsigned long long)bdev->size, to_mem(bdev)->nr_ext);
}

static const struct tfs_bdev_ops mem_ops = {
	.name = "mem",
	.submit = mem_submit,
	.drain = mem_drain,
	.close = mem_close,
	.to_text = mem_to_text,
};

struct tfs_bdev *fuzz_membdev_create(const char *name, u64 size, unsigned lbs)
{
	struct membdev *m = calloc(1, sizeof(*m));

	if (!m || !(m->bdev.path = strdup(name)))
		abort();
	m->bdev.ops = &mem_ops;
	m->bdev.size = size;
	m->bdev.logical_block_size = lbs;
	m->bdev.read_only = true;
	m->bdev.private = m;
	pthread_mutex_init(&m->lock, NULL);
	return &m->bdev;
}

void fuzz_membdev_put(struct tfs_bdev *bdev, u64 off, const void *data, size_t len)
{
	struct membdev *m = to_mem(bdev);

	if (off >= bdev->size)
		return;
	len = min_t(u64, len, bdev->size - off);
	if (!len)
		return;
	pthread_mutex_lock(&m->lock);
	mem_put_locked(m, off, data, len);
	pthread_mutex_unlock(&m->lock);
}

void fuzz_membdev_set_writable(struct tfs_bdev *bdev)
{
	bdev->read_only = false;
}

void fuzz_membdev_fail_reads(struct tfs_bdev *bdev, u64 off, u64 len, int err)
{
	struct membdev *m = to_mem(bdev);

	m->fail_off = off;
	m->fail_len = len;
	m->fail_err = err;
}

/* --- journal members --- */

/* FUZZ_FIX over one bucket, walking it as journal_read_dev() does. */
static void fix_bucket(u8 *b, const struct fuzz_journal *fj)
{
	for (u32 off = 0; off + sizeof(struct jset) <= fj->bucket_size;) {
		struct jset *js = (void *)(b + off);

		if (__builtin_popcountll(le64_to_cpu(js->magic) ^ fj->magic) > 8) {
			off += fj->block_size;
			continue;
		}
		fuzz_fix_jset(js, fj->bucket_size - off, fj->magic);
		off += round_up(tfs_jset_bytes(le32_to_cpu(js->u64s)), fj->block_size);
	}
}

bool fuzz_journal_build(struct fuzz_journal *fj, const u8 *data, size_t size, bool writable)
{
	const u8 *h = data, *in = data + FUZZ_JOURNAL_HDR;
	size_t in_len, pos = 0;
	u8 *b;

	if (size < FUZZ_JOURNAL_HDR)
		return false;
	in_len = size - FUZZ_JOURNAL_HDR;
	memset(fj, 0, sizeof(*fj));
	fj->block_size = 512U << (h[1] & 3);
	fj->bucket_size = fj->block_size << ((h[1] >> 2) & 3);
	fj->nr_devs = h[0] & 2 ? 2 : 1;
	fj->nr_buckets = 1 + h[2] % FUZZ_JOURNAL_MAX_BUCKETS;
	fj->magic = tfs_jset_magic(fuzz_uuid);
	tfs_journal_opts_default(&fj->opts);
	memcpy(fj->opts.uuid, fuzz_uuid, sizeof(fj->opts.uuid));
	fj->opts.block_size = fj->block_size;
	if (h[1] >> 4)
		fj->opts.pin_fifo_size = 1U << (h[1] >> 4);

	b = malloc(fj->bucket_size);
	if (!b)
		abort();
	for (unsigned i = 0; i < fj->nr_buckets; i++)
		fj->buckets[i] = i + 1;
	for (unsigned d = 0; d < fj->nr_devs; d++) {
		fj->bdevs[d] =
			fuzz_membdev_create(d ? "fuzz-j1" : "fuzz-j0",
					    (u64)(fj->nr_buckets + 1) * fj->bucket_size, 512);
		fj->devs[d] = (struct tfs_journal_dev){
			.bdev = fj->bdevs[d],
			.dev_idx = d,
			.bucket_size = fj->bucket_size,
			.buckets = fj->buckets,
			.nr_buckets = fj->nr_buckets,
			.writable = writable,
		};
		if (d && (h[0] & 4))
			pos = 0; /* the replica: member 0's bytes again */
		for (unsigned i = 0; i < fj->nr_buckets; i++) {
			size_t n = pos < in_len ? min_t(size_t, in_len - pos, fj->bucket_size) : 0;

			memset(b, 0, fj->bucket_size);
			memcpy(b, in + pos, n);
			pos += n;
			if (h[0] & FUZZ_FIX)
				fix_bucket(b, fj);
			fuzz_membdev_put(fj->bdevs[d], fj->buckets[i] * fj->bucket_size, b,
					 fj->bucket_size);
		}
		if (writable)
			fuzz_membdev_set_writable(fj->bdevs[d]);
	}
	free(b);
	if (h[0] & 8) {
		unsigned d = (h[3] >> 4) & 1, i = (h[3] & 15) % fj->nr_buckets;

		if (d < fj->nr_devs)
			fuzz_membdev_fail_reads(fj->bdevs[d], fj->buckets[i] * fj->bucket_size,
						fj->bucket_size, -EIO);
	}
	return true;
}

void fuzz_journal_exit(struct fuzz_journal *fj)
{
	for (unsigned d = 0; d < fj->nr_devs; d++)
		tfs_bdev_close(fj->bdevs[d]);
	memset(fj, 0, sizeof(*fj));
}

/* --- repairs --- */

void fuzz_fix_sb(struct tfs_sb *sb, size_t bytes)
{
	struct tfs_sb_layout *l = &sb->layout;
	size_t room = bytes;
	u32 max;

	if (bytes < sizeof(*sb))
		return;
	max = le32_to_cpu(l->sb_max_size);
	sb->magic = cpu_to_le64(TFS_SB_MAGIC);
	l->magic = cpu_to_le64(TFS_SB_LAYOUT_MAGIC);
	l->csum = cpu_to_le32(tfs_sb_layout_csum(l));
	if (IS_POWER_OF_2(max) && max >= TFS_SB_MAX_SIZE_MIN && max < room)
		room = max;
	if (tfs_sb_bytes(sb) > room)
		sb->u64s = cpu_to_le32((u32)((room - sizeof(*sb)) / 8));
	sb->csum = cpu_to_le32(tfs_sb_csum(sb));
}

void fuzz_fix_btree_node(struct tfs_btree_node *n, size_t len, u32 node_size, u64 magic)
{
	size_t room = min_t(size_t, len, node_size);

	if (room < sizeof(*n))
		return;
	n->magic = cpu_to_le64(magic);
	if (sizeof(*n) + (size_t)le32_to_cpu(n->u64s) * 8 > room)
		n->u64s = cpu_to_le32((u32)((room - sizeof(*n)) / 8));
	n->csum = cpu_to_le64(tfs_btree_node_csum(n));
}

void fuzz_fix_jset(struct jset *j, size_t len, u64 magic)
{
	if (len < sizeof(*j))
		return;
	j->magic = cpu_to_le64(magic);
	if (tfs_jset_bytes(le32_to_cpu(j->u64s)) > len)
		j->u64s = cpu_to_le32((u32)((len - sizeof(*j)) / 8));
	j->csum = cpu_to_le64(tfs_jset_csum(j));
}

/* --- checks --- */

void fuzz_check_printbuf(const struct printbuf *out)
{
	fuzz_check(strlen(printbuf_str(out)) == out->pos, "printbuf: pos is not the text's length");
}

/*
 * A recursive-descent check of RFC 8259 syntax: enough to catch a
 * missing comma, a bad escape or a raw control byte in a string.
 */
struct json {
	const char *p;
	unsigned depth;
};

static void json_ws(struct json *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static bool json_value(struct json *j);

static bool json_string(struct json *j)
{
	if (*j->p++ != '"')
		return false;
	for (;;) {
		unsigned char c = (unsigned char)*j->p++;

		if (c == '"')
			return true;
		if (c < 0x20)
			return false; /* the NUL at the end, or a raw control byte */
		if (c != '\\')
			continue;
		c = (unsigned char)*j->p++;
		if (c == 'u') {
			for (unsigned i = 0; i < 4; i++, j->p++)
				if (!strchr("0123456789abcdefABCDEF", *j->p) || !*j->p)
					return false;
		} else if (!c || !strchr("\"\\/bfnrt", c)) {
			return false;
		}
	}
}

static bool json_number(struct json *j)
{
	const char *start = j->p;

	if (*j->p == '-')
		j->p++;
	if (*j->p == '0')
		j->p++;
	else if (*j->p >= '1' && *j->p <= '9')
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	else
		return false;
	if (*j->p == '.') {
		j->p++;
		if (!(*j->p >= '0' && *j->p <= '9'))
			return false;
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (!(*j->p >= '0' && *j->p <= '9'))
			return false;
		while (*j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	return j->p > start;
}

static bool json_list(struct json *j, char close, bool object)
{
	j->p++;
	json_ws(j);
	if (*j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		json_ws(j);
		if (object) {
			if (!json_string(j))
				return false;
			json_ws(j);
			if (*j->p++ != ':')
				return false;
		}
		if (!json_value(j))
			return false;
		json_ws(j);
		if (*j->p == close) {
			j->p++;
			return true;
		}
		if (*j->p++ != ',')
			return false;
	}
}

static bool json_value(struct json *j)
{
	bool ok;

	json_ws(j);
	if (++j->depth > 64)
		return false;
	switch (*j->p) {
	case '{':
		ok = json_list(j, '}', true);
		break;
	case '[':
		ok = json_list(j, ']', false);
		break;
	case '"':
		ok = json_string(j);
		break;
	case 't':
		ok = !strncmp(j->p, "true", 4) && (j->p += 4);
		break;
	case 'f':
		ok = !strncmp(j->p, "false", 5) && (j->p += 5);
		break;
	case 'n':
		ok = !strncmp(j->p, "null", 4) && (j->p += 4);
		break;
	default:
		ok = json_number(j);
	}
	j->depth--;
	return ok;
}

bool fuzz_json_valid(const char *text)
{
	struct json j = { .p = text };

	if (!json_value(&j))
		return false;
	json_ws(&j);
	return !*j.p;
}

void fuzz_report(int ret, const struct printbuf *err)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("TFS_FUZZ_VERBOSE") != NULL;
	if (verbose)
		fprintf(stderr, "  -> %s%s%s\n", ret ? tfs_err_str(ret) : "valid",
			err->pos ? ": " : "", printbuf_str(err));
}
