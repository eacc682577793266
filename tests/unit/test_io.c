// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/io.c and fs/extents.c: file data.  Reads and writes of any
 * size and alignment, holes, truncate, fallocate's modes, SEEK_DATA and
 * SEEK_HOLE against a byte-and-block model (an fsx-like random run),
 * offsets at the 2^63 limit, checksums catching a flipped byte on disk,
 * copy-on-write never overwriting live data, ENOSPC, and whole-block
 * writes racing each other and truncate (their I/O runs unlocked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <linux/falloc.h>
#include <pthread.h>

#include "fs/extents.h"
#include "posix_test.h"

static struct pt T;

static int setup(void **state)
{
	struct pt_geometry g = { 0 };

	return pt_mkfs(&T, &g);
}

static int setup_small(void **state)
{
	struct pt_geometry g = { .size = 24ULL << 20 };

	return pt_mkfs(&T, &g);
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

static struct tfs_file *new_file(const char *name)
{
	struct tfs_file *f;

	assert_int_equal(pt_create(&T, TFS_ROOT_INO, name, &f), 0);
	return f;
}

static u64 fsize(struct tfs_file *f)
{
	struct tfs_stat st;

	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	return st.size;
}

static void truncate_to(struct tfs_file *f, u64 size, int want)
{
	struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE, .size = size };
	struct tfs_stat st;

	assert_int_equal(tfs_setattr(T.fs, 0, f, &sa, &st), want);
}

/* --- a model of one file --- */

#define M_MAX (1U << 20)
#define BS 4096

enum {
	M_HOLE,
	M_UNWRITTEN,
	M_DATA
};

struct model {
	u8 data[M_MAX];
	u8 state[M_MAX / BS];
	u64 size;
};

static struct model M;

static void m_write(u64 off, const u8 *buf, size_t len)
{
	memcpy(M.data + off, buf, len);
	for (u64 b = off / BS; b < DIV_ROUND_UP(off + len, BS); b++)
		M.state[b] = M_DATA;
	M.size = max_t(u64, M.size, off + len);
}

/* Zeroing [off, end): whole blocks lose their space, partial data blocks stay data. */
static void m_punch(u64 off, u64 end)
{
	memset(M.data + off, 0, end - off);
	for (u64 b = DIV_ROUND_UP(off, BS); (b + 1) * BS <= end; b++)
		M.state[b] = M_HOLE;
}

static void m_truncate(u64 size)
{
	if (size < M.size) {
		m_punch(size, M_MAX);
		/* The EOF block keeps what it had (its tail zeroed). */
	}
	M.size = size;
}

static void m_falloc(u64 off, u64 end, bool keep)
{
	for (u64 b = off / BS; b < DIV_ROUND_UP(end, BS); b++)
		if (M.state[b] == M_HOLE)
			M.state[b] = M_UNWRITTEN;
	if (!keep)
		M.size = max_t(u64, M.size, end);
}

static void m_zero(u64 off, u64 end, bool keep)
{
	m_punch(off, end);
	for (u64 b = DIV_ROUND_UP(off, BS); (b + 1) * BS <= end; b++)
		M.state[b] = M_UNWRITTEN;
	if (!keep)
		M.size = max_t(u64, M.size, end);
}

static s64 m_seek(u64 off, int whence)
{
	u64 nb = DIV_ROUND_UP(M.size, BS);

	if (off >= M.size)
		return -ENXIO;
	for (u64 b = off / BS; b < nb; b++) {
		bool data = M.state[b] == M_DATA;

		if (whence == SEEK_DATA && data)
			return (s64)max_t(u64, off, b * BS);
		if (whence == SEEK_HOLE && !data)
			return (s64)max_t(u64, off, b * BS);
	}
	return whence == SEEK_DATA ? -ENXIO : (s64)M.size;
}

static u64 m_blocks(void)
{
	u64 n = 0;

	for (u64 b = 0; b < M_MAX / BS; b++)
		n += M.state[b] != M_HOLE;
	return n;
}

static u8 RB[M_MAX];

static void m_check(struct tfs_file *f)
{
	struct tfs_stat st;

	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, M.size);
	assert_int_equal(st.blocks, m_blocks() * (BS / 512));
	memset(RB, 0xee, M.size);
	assert_int_equal(tfs_read(T.fs, f, RB, M_MAX, 0), M.size);
	for (u64 i = 0; i < M.size; i++)
		if (RB[i] != M.data[i])
			fail_msg("byte %llu: 0x%02x, expected 0x%02x", (unsigned long long)i, RB[i],
				 M.data[i]);
}

static u64 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random offsets, clustered around block edges often. */
static u64 rnd_off(u64 *s, u64 max)
{
	u64 r = rnd(s);

	if (r % 3 == 0)
		return min_t(u64, max, (rnd(s) % (max / BS + 1)) * BS + (rnd(s) % 3) - 1) %
		       (max + 1);
	return rnd(s) % (max + 1);
}

static void fsx(u64 seed, unsigned steps, bool reopen_sometimes)
{
	struct tfs_file *f = new_file("fsx");
	tfs_ino_t ino = tfs_file_ino(f);
	static u8 buf[M_MAX];
	u64 s = seed * 2654435761ULL + 1;

	memset(&M, 0, sizeof(M));
	for (unsigned i = 0; i < steps; i++) {
		unsigned op = (unsigned)(rnd(&s) % 100);
		u64 off = rnd_off(&s, M_MAX - 1), len, end;
		int ret;

		len = 1 + rnd(&s) % (rnd(&s) % 4 ? 3 * BS : M_MAX / 4);
		if (off + len > M_MAX)
			len = M_MAX - off;
		end = off + len;
		if (op < 40) {
			pt_fill(buf, len, seed + i, off);
			assert_int_equal(tfs_write(T.fs, f, buf, len, off), (ssize_t)len);
			m_write(off, buf, len);
		} else if (op < 55) {
			u64 size = rnd_off(&s, M_MAX - 1);

			truncate_to(f, size, 0);
			m_truncate(size);
		} else if (op < 65) {
			ret = tfs_fallocate(T.fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					    off, len);
			assert_int_equal(ret, 0);
			m_punch(off, end);
		} else if (op < 75) {
			bool keep = rnd(&s) & 1;

			assert_int_equal(
				tfs_fallocate(T.fs, f, keep ? FALLOC_FL_KEEP_SIZE : 0, off, len),
				0);
			m_falloc(off, end, keep);
		} else if (op < 85) {
			bool keep = rnd(&s) & 1;

			assert_int_equal(tfs_fallocate(T.fs, f,
						       FALLOC_FL_ZERO_RANGE |
							       (keep ? FALLOC_FL_KEEP_SIZE : 0),
						       off, len),
					 0);
			m_zero(off, end, keep);
		} else if (op < 95) {
			int whence = rnd(&s) & 1 ? SEEK_DATA : SEEK_HOLE;
			u64 o = rnd_off(&s, M.size + BS);

			assert_int_equal(tfs_lseek(T.fs, f, o, whence), m_seek(o, whence));
		} else if (reopen_sometimes && op < 97) {
			assert_int_equal(tfs_release(T.fs, f), 0);
			assert_int_equal(pt_reopen(&T), 0);
			assert_int_equal(tfs_open(T.fs, ino, O_RDWR, &f), 0);
		} else {
			/* A read at a random place. */
			ssize_t want = off >= M.size ? 0 : (ssize_t)min_t(u64, len, M.size - off);

			assert_int_equal(tfs_read(T.fs, f, buf, len, off), want);
			assert_memory_equal(buf, M.data + off, (size_t)want);
		}
		if (i % 8 == 0 || op >= 95)
			m_check(f);
	}
	m_check(f);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(tfs_open(T.fs, ino, O_RDWR, &f), 0);
	m_check(f);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "fsx", 3), 0);
}

static void test_fsx(void **state)
{
	unsigned steps = getenv("TFS_LONG") ? 20000 : 600;

	fsx(1, steps, true);
	fsx(2, steps, false);
}

/* --- directed --- */

static void test_unaligned_rw(void **state)
{
	struct tfs_file *f = new_file("u");
	u8 w[3 * BS + 100], r[3 * BS + 100];

	/* Writes inside one block, across blocks, at odd places; each merges with what is there. */
	pt_fill(w, sizeof(w), 1, 0);
	assert_int_equal(tfs_write(T.fs, f, w, 10, 5), 10);
	assert_int_equal(fsize(f), 15);
	assert_int_equal(tfs_write(T.fs, f, w + 10, sizeof(w) - 10, BS - 3), sizeof(w) - 10);
	assert_int_equal(tfs_read(T.fs, f, r, 15, 0), 15);
	assert_memory_equal(r + 5, w, 10);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(r[i], 0);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(w) - 10, BS - 3), sizeof(w) - 10);
	assert_memory_equal(r, w + 10, sizeof(w) - 10);
	/* Reads past EOF: short, then 0. */
	assert_int_equal(tfs_read(T.fs, f, r, 100, fsize(f) - 10), 10);
	assert_int_equal(tfs_read(T.fs, f, r, 100, fsize(f)), 0);
	assert_int_equal(tfs_read(T.fs, f, r, 100, fsize(f) + 12345), 0);
	assert_int_equal(tfs_read(T.fs, f, r, 0, 0), 0);
	assert_int_equal(tfs_write(T.fs, f, w, 0, 0), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

static void test_sparse_and_limits(void **state)
{
	struct tfs_file *f = new_file("sparse");
	struct tfs_stat st;
	u8 w[64], r[64];
	u64 far = 5ULL << 40; /* 5 TiB into the file */

	pt_fill(w, sizeof(w), 2, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), far), sizeof(w));
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, far + sizeof(w));
	assert_int_equal(st.blocks, BS / 512);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), far - 32), sizeof(r));
	for (unsigned i = 0; i < 32; i++)
		assert_int_equal(r[i], 0);
	assert_memory_equal(r + 32, w, 32);
	assert_int_equal(tfs_lseek(T.fs, f, 0, SEEK_DATA), (s64)far);
	assert_int_equal(tfs_lseek(T.fs, f, 0, SEEK_HOLE), 0);
	assert_int_equal(tfs_lseek(T.fs, f, far + 1, SEEK_HOLE), (s64)(far + sizeof(w)));
	assert_int_equal(tfs_lseek(T.fs, f, far + sizeof(w), SEEK_DATA), -ENXIO);

	/* The 2^63 - 1 limit. */
	u64 max = TFS_MAX_FILE_SIZE;

	assert_int_equal(tfs_write(T.fs, f, w, 20, max - 10), 10); /* short, up to the limit */
	assert_int_equal(fsize(f), max);
	assert_int_equal(tfs_read(T.fs, f, r, 20, max - 10), 10);
	assert_memory_equal(r, w, 10);
	assert_int_equal(tfs_write(T.fs, f, w, 1, max), -EFBIG);
	assert_int_equal(tfs_write(T.fs, f, w, 1, max + 1), -EINVAL); /* a negative off_t */
	assert_int_equal(tfs_write(T.fs, f, w, 1, UINT64_MAX), -EINVAL);
	assert_int_equal(tfs_read(T.fs, f, r, 1, max), 0);
	assert_int_equal(tfs_read(T.fs, f, r, 1, UINT64_MAX), -EINVAL);
	assert_int_equal(tfs_fallocate(T.fs, f, 0, max - 5, 10), -EFBIG);
	assert_int_equal(tfs_fallocate(T.fs, f, 0, UINT64_MAX, 10), -EINVAL);
	assert_int_equal(tfs_fallocate(T.fs, f, 0, 0, 0), -EINVAL);
	assert_int_equal(tfs_fallocate(T.fs, f, FALLOC_FL_PUNCH_HOLE, 0, 10), -EOPNOTSUPP);
	assert_int_equal(tfs_fallocate(T.fs, f, 0x100, 0, 10), -EOPNOTSUPP);
	assert_int_equal(tfs_lseek(T.fs, f, UINT64_MAX, SEEK_DATA), -ENXIO);
	assert_int_equal(tfs_lseek(T.fs, f, 0, SEEK_SET + 77), -EINVAL);
	truncate_to(f, max + 1, -EFBIG);
	truncate_to(f, max, 0);
	/* Down from 2^63 - 1 to 10 bytes: everything past goes. */
	truncate_to(f, 10, 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, 10);
	assert_int_equal(st.blocks, 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "sparse", &st), 0);
	assert_int_equal(st.size, 10);
	assert_int_equal(st.blocks, 0);
}

static void test_truncate_zeroes_tail(void **state)
{
	struct tfs_file *f = new_file("t");
	u8 w[10000], r[20000];

	pt_fill(w, sizeof(w), 3, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	truncate_to(f, 5000, 0);
	truncate_to(f, 20000, 0);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), sizeof(r));
	assert_memory_equal(r, w, 5000);
	for (unsigned i = 5000; i < 20000; i++)
		if (r[i])
			fail_msg("byte %u not zero after truncate down and up", i);
	/* The same through a write past EOF. */
	truncate_to(f, 3000, 0);
	assert_int_equal(tfs_write(T.fs, f, w, 10, 9000), 10);
	assert_int_equal(tfs_read(T.fs, f, r, 9010, 0), 9010);
	assert_memory_equal(r, w, 3000);
	for (unsigned i = 3000; i < 9000; i++)
		if (r[i])
			fail_msg("byte %u not zero after a write past EOF", i);
	/* O_TRUNC. */
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_open_file(&T, 1, "t", O_RDWR | O_TRUNC, &f), 0);
	assert_int_equal(fsize(f), 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/* A large truncate takes several transactions; the result is the same. */
static void test_truncate_many_extents(void **state)
{
	struct tfs_file *f = new_file("many");
	struct tfs_stat st;
	u8 w[BS];

	/* Every other block written: one extent each. */
	for (unsigned i = 0; i < 600; i++) {
		pt_fill(w, sizeof(w), i, 0);
		assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 2ULL * i * BS), sizeof(w));
	}
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.blocks, 600 * BS / 512);
	truncate_to(f, 7 * BS + 1, 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.blocks, 4 * BS / 512); /* blocks 0, 2, 4, 6 */
	assert_int_equal(tfs_read(T.fs, f, w, BS, 6 * BS), BS);
	{
		u8 x[BS];

		pt_fill(x, sizeof(x), 3, 0);
		assert_memory_equal(w, x, BS);
	}
	assert_int_equal(tfs_release(T.fs, f), 0);
	/* No orphan key is left behind. */
	struct tfs_bkey_buf kb;

	assert_int_equal(tfs_btree_lookup(T.fs, TFS_BTREE_orphans, TFS_POS(st.ino, 0), &kb),
			 -ENOENT);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "many", &st), 0);
	assert_int_equal(st.blocks, 4 * BS / 512);
}

/* Waits until the clock passes t (ns): the next change has a later time. */
static struct timespec times_after(const struct timespec *t)
{
	struct timespec now;

	do
		clock_gettime(CLOCK_REALTIME, &now);
	while (now.tv_sec < t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec <= t->tv_nsec));
	return now;
}

static bool ts_after(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/*
 * Every fallocate that succeeds sets mtime and ctime, as ext4 does (kernel
 * 6.18: also with KEEP_SIZE, and where nothing new is allocated).  Through
 * the writeback cache the kernel keeps these times itself; a mount with
 * no_writeback_cache shows fs/'s.
 */
static void test_fallocate_sets_times(void **state)
{
	static const struct {
		int mode;
		u64 off, len;
		const char *what;
	} ops[] = {
		{ 0, 0, 2 * BS, "allocate inside, nothing new" },
		{ FALLOC_FL_KEEP_SIZE, 0, BS, "keep size inside" },
		{ FALLOC_FL_KEEP_SIZE, 8 * BS, 4 * BS, "keep size past EOF" },
		{ FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, BS, BS, "punch" },
		{ FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, BS, BS, "punch a hole" },
		{ FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 2 * BS, BS, "zero range" },
		{ 0, 0, 6 * BS, "allocate, the size grows" },
	};
	struct tfs_file *f = new_file("times");
	struct tfs_stat st, before;
	u8 w[4 * BS];

	pt_fill(w, sizeof(w), 9, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	for (unsigned i = 0; i < ARRAY_SIZE(ops); i++) {
		assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &before), 0);
		times_after(&before.ctime);
		times_after(&before.mtime);
		assert_int_equal(tfs_fallocate(T.fs, f, ops[i].mode, ops[i].off, ops[i].len), 0);
		assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
		if (!ts_after(&st.ctime, &before.ctime) || !ts_after(&st.mtime, &before.mtime))
			fail_msg(
				"%s: mtime %lld.%09ld ctime %lld.%09ld, before %lld.%09ld %lld.%09ld",
				ops[i].what, (long long)st.mtime.tv_sec, st.mtime.tv_nsec,
				(long long)st.ctime.tv_sec, st.ctime.tv_nsec,
				(long long)before.mtime.tv_sec, before.mtime.tv_nsec,
				(long long)before.ctime.tv_sec, before.ctime.tv_nsec);
	}
	/* A refused one changes nothing. */
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &before), 0);
	times_after(&before.ctime);
	assert_int_equal(tfs_fallocate(T.fs, f, FALLOC_FL_PUNCH_HOLE, 0, BS), -EOPNOTSUPP);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_memory_equal(&st.ctime, &before.ctime, sizeof(st.ctime));
	/* And the times are committed: they survive a reopen. */
	before = st;
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "times", &st), 0);
	assert_memory_equal(&st.mtime, &before.mtime, sizeof(st.mtime));
	assert_memory_equal(&st.ctime, &before.ctime, sizeof(st.ctime));
}

static void test_fallocate(void **state)
{
	struct tfs_file *f = new_file("fa");
	struct tfs_stat st;
	u8 w[3 * BS], r[3 * BS];

	assert_int_equal(tfs_fallocate(T.fs, f, 0, 100, 10 * BS), 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, 100 + 10 * BS);
	assert_int_equal(st.blocks, 11 * BS / 512);
	/* Unwritten space reads as zeros and is a hole to SEEK_DATA. */
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), sizeof(r));
	for (unsigned i = 0; i < sizeof(r); i++)
		assert_int_equal(r[i], 0);
	assert_int_equal(tfs_lseek(T.fs, f, 0, SEEK_DATA), -ENXIO);
	/* Writing into it uses that space (no new allocation), partial blocks too. */
	struct tfs_alloc_usage u0, u1;

	tfs_alloc_usage(T.fs, &u0);
	pt_fill(w, sizeof(w), 4, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w) - 50, BS + 50), sizeof(w) - 50);
	tfs_alloc_usage(T.fs, &u1);
	assert_int_equal(u1.used, u0.used);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.blocks, 11 * BS / 512);
	assert_int_equal(tfs_lseek(T.fs, f, 0, SEEK_DATA), BS);
	assert_int_equal(tfs_lseek(T.fs, f, BS, SEEK_HOLE), 4 * BS);
	/* KEEP_SIZE past EOF. */
	assert_int_equal(tfs_fallocate(T.fs, f, FALLOC_FL_KEEP_SIZE, 20 * BS, 4 * BS), 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.size, 100 + 10 * BS);
	assert_int_equal(st.blocks, 15 * BS / 512);
	/* Punch: the middle block goes, partial edges are zeroed. */
	assert_int_equal(tfs_fallocate(T.fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       BS + 100, 2 * BS),
			 0);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), BS), sizeof(r));
	for (unsigned i = 0; i < sizeof(r); i++) {
		u8 want = i < 50 ? 0 : i < 100 ? w[i - 50] : i < 100 + 2 * BS ? 0 : w[i - 50];

		if (i >= sizeof(w) - 50 + 50)
			want = 0;
		if (r[i] != want)
			fail_msg("byte %u after punch: %02x, expected %02x", i, r[i], want);
	}
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.blocks, 14 * BS / 512);
	/* Truncate drops the space past EOF too. */
	truncate_to(f, 5 * BS, 0);
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	assert_int_equal(st.blocks, 4 * BS / 512);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/* Overwrites go to new space: the old blocks on disk still hold the old bytes. */
static void test_copy_on_write(void **state)
{
	struct tfs_file *f = new_file("cow");
	struct tfs_bkey_buf kb;
	struct tfs_ext e1, e2;
	u8 w[BS], *r = tfs_bdev_alloc_buf(NULL, BS);
	tfs_ino_t ino = tfs_file_ino(f);

	pt_fill(w, sizeof(w), 5, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_ext_find(T.fs, ino, 0, 1, &kb, &e1), 0);
	pt_fill(w, sizeof(w), 6, 0);
	assert_int_equal(tfs_write(T.fs, f, w, 10, 0), 10);
	assert_int_equal(tfs_ext_find(T.fs, ino, 0, 1, &kb, &e2), 0);
	assert_true(e1.ptrs[0].offset != e2.ptrs[0].offset);
	assert_int_equal(tfs_bdev_read(pt_bdev(&T, 0), r, BS, e1.ptrs[0].offset, TFS_TAG_data), 0);
	pt_fill(w, sizeof(w), 5, 0);
	assert_memory_equal(r, w, BS);
	free(r);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/*
 * Space an overwrite frees is not reused before the commit that freed it is
 * durable: until then a crash would bring back the extent pointing at it.
 */
static void test_freed_space_waits(void **state)
{
	struct tfs_file *f = new_file("w"), *g = new_file("other");
	struct tfs_bkey_buf kb;
	struct tfs_ext e1, e2, eg;
	struct tfs_alloc_usage u;
	u8 w[BS];

	pt_fill(w, sizeof(w), 11, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(f), 0, 1, &kb, &e1), 0);
	/* Overwrite: the old block waits for the overwrite's commit to be durable. */
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(f), 0, 1, &kb, &e2), 0);
	assert_true(e2.ptrs[0].offset != e1.ptrs[0].offset);
	tfs_alloc_usage(T.fs, &u);
	if (tfs_journal_flushed_seq_ondisk(T.fs->j) < f->im->last_seq) {
		assert_true(u.waiting >= BS);
		/* Nothing allocated now lands on it. */
		for (unsigned i = 0; i < 64; i++) {
			assert_int_equal(tfs_write(T.fs, g, w, sizeof(w), (u64)i * BS), sizeof(w));
			assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(g), i, i + 1, &kb, &eg),
					 0);
			assert_true(eg.ptrs[0].offset != e1.ptrs[0].offset);
		}
	}
	/* Once durable it is free again (released by the next allocation that looks). */
	assert_int_equal(tfs_syncfs(T.fs), 0);
	{
		struct tfs_alloc_run run;

		assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &run), BS);
		tfs_alloc_free_now(T.fs, &run);
	}
	tfs_alloc_usage(T.fs, &u);
	assert_int_equal(u.waiting, 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_release(T.fs, g), 0);
}

/* A flipped byte on disk: EIO naming the inode, never the wrong bytes. */
static void test_checksum(void **state)
{
	struct tfs_file *f = new_file("csum");
	struct tfs_bkey_buf kb;
	struct tfs_ext e;
	u8 w[4 * BS], r[4 * BS], *blk = tfs_bdev_alloc_buf(NULL, BS);
	tfs_ino_t ino = tfs_file_ino(f);

	pt_fill(w, sizeof(w), 7, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_ext_find(T.fs, ino, 2, 3, &kb, &e), 0);
	u64 where = e.ptrs[0].offset + (2 - e.start) * BS;

	assert_int_equal(tfs_bdev_read(pt_bdev(&T, 0), blk, BS, where, TFS_TAG_none), 0);
	blk[1234] ^= 0x40;
	assert_int_equal(tfs_bdev_write(pt_bdev(&T, 0), blk, BS, where, 0, TFS_TAG_none), 0);
	assert_true(tfs_err_matches((int)tfs_read(T.fs, f, r, sizeof(r), 0), EIO));
	assert_true(tfs_err_matches((int)tfs_read(T.fs, f, r, 1, 2 * BS + 5), EIO));
	/* The blocks around it still read. */
	assert_int_equal(tfs_read(T.fs, f, r, 2 * BS, 0), 2 * BS);
	assert_memory_equal(r, w, 2 * BS);
	assert_int_equal(tfs_read(T.fs, f, r, BS, 3 * BS), BS);
	assert_memory_equal(r, w + 3 * BS, BS);
	/* A partial write into the bad block cannot merge it: EIO too, nothing changed. */
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f, w, 10, 2 * BS + 1), EIO));
	/* A whole-block overwrite replaces it. */
	assert_int_equal(tfs_write(T.fs, f, w + 2 * BS, BS, 2 * BS), BS);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), sizeof(r));
	assert_memory_equal(r, w, sizeof(r));
	assert_true(tfs_posix(T.fs)->c.data_csum_errors >= 2);
	free(blk);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/*
 * Big allocations (1 MiB writes, fallocate) on an empty filesystem find a
 * free bucket at once.  Before the fix the allocator asked for runs longer
 * than a bucket, never found one, and looked at every block of the member
 * on every call: a 1 GiB fallocate took 40 s on a mount.
 */
static void test_alloc_search_bounded(void **state)
{
	struct tfs_alloc *a = &T.fs->alloc;
	struct tfs_file *f = new_file("a");
	static u8 w[1 << 20];
	u64 scanned, allocs;

	pt_fill(w, sizeof(w), 4, 0);
	scanned = a->nr_scanned;
	allocs = a->nr_allocs;
	assert_int_equal(tfs_fallocate(T.fs, f, 0, 0, 16 << 20), 0);
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), (32ULL + i) << 20), sizeof(w));
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	allocs = a->nr_allocs - allocs;
	scanned = a->nr_scanned - scanned;
	assert_true(allocs >= 16);
	/* About a bucket each (the first may start mid-bucket), never the member. */
	assert_true(scanned <= allocs * 4 * (T.fs->alloc.devs[0].bucket_size / BS));
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * A copy-on-write overwrite lands in the block the previous overwrite freed
 * once that commit is durable: on an image file that block is written in
 * the host already, so the fsync costs no host allocation (fs/alloc.c).
 * Big writes still take fresh space from the cursor, contiguous.
 */
static void test_small_write_reuses_freed_space(void **state)
{
	struct tfs_file *f = new_file("tail"), *g = new_file("big");
	struct tfs_bkey_buf kb;
	struct tfs_ext e1, e2, e3, eg;
	static u8 w[16 * BS];
	u64 reused = T.fs->alloc.nr_reused;

	pt_fill(w, sizeof(w), 21, 0);
	assert_int_equal(tfs_write(T.fs, f, w, BS, 0), BS);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(f), 0, 1, &kb, &e1), 0);
	assert_int_equal(tfs_write(T.fs, f, w + 1, 100, 0), 100);
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(f), 0, 1, &kb, &e2), 0);
	assert_true(e2.ptrs[0].offset != e1.ptrs[0].offset);
	assert_int_equal(tfs_syncfs(T.fs), 0); /* e1's release is settled */
	assert_int_equal(tfs_write(T.fs, f, w + 2, 100, 0), 100);
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(f), 0, 1, &kb, &e3), 0);
	assert_int_equal(e3.ptrs[0].offset, e1.ptrs[0].offset);
	assert_true(T.fs->alloc.nr_reused > reused);

	/* 16 blocks: one extent from the cursor, not the holes left behind. */
	assert_int_equal(tfs_write(T.fs, g, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_ext_find(T.fs, tfs_file_ino(g), 0, 1, &kb, &eg), 0);
	assert_int_equal(eg.start, 0);
	assert_int_equal(eg.len, 16);
	assert_true(eg.ptrs[0].offset > e2.ptrs[0].offset);

	assert_int_equal(tfs_read(T.fs, f, w, BS, 0), BS);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_release(T.fs, g), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * A run freed by a commit already settled is released at once, even behind
 * runs of later commits: the release skips its scan while the oldest
 * waiting commit is not settled, so it must know which one is oldest.
 */
static void test_alloc_release_out_of_order(void **state)
{
	u64 settled = tfs_journal_settled_seq_ondisk(T.fs->j);
	struct tfs_alloc_run later, now;
	struct tfs_alloc_usage u;
	struct tfs_file *f = new_file("ooo");
	u8 w[BS];

	(void)state;
	tfs_alloc_usage(T.fs, &u);
	assert_int_equal(u.waiting, 0);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &later), BS);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &now), BS);
	tfs_alloc_free_after(T.fs, &later, settled + 1);
	tfs_alloc_free_after(T.fs, &now, settled);
	tfs_alloc_usage(T.fs, &u);
	assert_int_equal(u.waiting, BS);

	/* The later one once a commit past it is settled. */
	pt_fill(w, sizeof(w), 3, 0);
	assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
	assert_int_equal(tfs_fsync(T.fs, f, false), 0);
	assert_int_equal(tfs_syncfs(T.fs), 0);
	assert_true(tfs_journal_settled_seq_ondisk(T.fs->j) > settled);
	tfs_alloc_usage(T.fs, &u);
	assert_int_equal(u.waiting, 0);
	assert_int_equal(tfs_release(T.fs, f), 0);
}

/*
 * The reuse list gives back what was released, newest first, but a data
 * allocation that must spare free node runs takes no block of one from it.
 */
static void test_alloc_reuse_list(void **state)
{
	struct tfs_alloc *a = &T.fs->alloc;
	struct tfs_alloc_dev *d = &a->devs[0];
	u64 cb = a->chunk_blocks, settled = tfs_journal_settled_seq_ondisk(T.fs->j);
	struct tfs_alloc_run big, chunk, pair, one, got;

	assert_true(cb > 2);
	assert_int_equal(tfs_alloc(T.fs, 2 * cb * BS, 2 * cb * BS, 1, 0, &big), (s64)(2 * cb * BS));
	assert_int_equal(tfs_alloc(T.fs, 2 * BS, 2 * BS, 1, 0, &pair), 2 * BS);

	/* One block whose neighbour stays in use: never part of a free chunk. */
	one = (struct tfs_alloc_run){ .dev = 0, .offset = pair.offset, .len = BS };
	/* The node-aligned chunk inside big. */
	u64 blk = (big.offset - d->start) / BS, first = round_up(blk, cb);

	chunk = (struct tfs_alloc_run){ .dev = 0, .offset = d->start + first * BS, .len = cb * BS };
	/* Freed by commits already settled: released at once, chunk the newest. */
	tfs_alloc_free_after(T.fs, &one, settled);
	tfs_alloc_free_after(T.fs, &chunk, settled);

	u64 free_chunks = d->free_chunks;

	assert_true(free_chunks > 0);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, TFS_ALLOC_SPARE_NODE_RUNS, &got), BS);
	assert_int_equal(got.offset, one.offset);
	assert_int_equal(d->free_chunks, free_chunks);

	/* Without the flag the chunk is taken from its start, the rest kept for later. */
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &got), BS);
	assert_int_equal(got.offset, chunk.offset);
	assert_int_equal(tfs_alloc(T.fs, 2 * BS, 2 * BS, 1, 0, &got), 2 * BS);
	assert_int_equal(got.offset, chunk.offset + BS);
	/* An entry with fewer free blocks than asked is passed over. */
	assert_int_equal(tfs_alloc(T.fs, cb * BS, cb * BS, 1, 0, &got), (s64)(cb * BS));
	assert_true(got.offset >= chunk.offset + chunk.len || got.offset + got.len <= chunk.offset);

	/*
	 * Taking from the list leaves the cursor alone: space freed behind it
	 * (the never-committed run below) is not searched before fresh space.
	 */
	struct tfs_alloc_run x, behind;

	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &x), BS);
	assert_int_equal(tfs_alloc(T.fs, 2 * cb * BS, 2 * cb * BS, 1, 0, &behind),
			 (s64)(2 * cb * BS));
	tfs_alloc_free_now(T.fs, &behind);
	tfs_alloc_free_after(T.fs, &x, settled);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &got), BS);
	assert_int_equal(got.offset, x.offset);
	assert_int_equal(tfs_alloc(T.fs, cb * BS, cb * BS, 1, 0, &got), (s64)(cb * BS));
	assert_true(got.offset >= behind.offset + behind.len);
}

/*
 * A released run that crosses a bucket boundary (an extent made of two
 * contiguous allocations) is never handed out across it: a btree node
 * there made the alloc keys lose its blocks (fsck: "no alloc key, but a
 * btree node uses blocks of the bucket").
 */
static void test_alloc_reuse_within_bucket(void **state)
{
	struct tfs_alloc_dev *d = &T.fs->alloc.devs[0];
	u64 bucket = d->bucket_size, settled = tfs_journal_settled_seq_ondisk(T.fs->j);
	struct tfs_alloc_run x, y, across, got;

	/* Two whole buckets, then a run across the boundary between them. */
	assert_int_equal(tfs_alloc(T.fs, bucket, bucket, 1, 0, &x), (s64)bucket);
	assert_int_equal(tfs_alloc(T.fs, bucket, bucket, 1, 0, &y), (s64)bucket);
	assert_int_equal(y.offset, x.offset + bucket);
	across = (struct tfs_alloc_run){ .dev = 0, .offset = y.offset - 2 * BS, .len = 4 * BS };
	tfs_alloc_free_after(T.fs, &across, settled);
	assert_int_equal(tfs_alloc(T.fs, 4 * BS, 4 * BS, 1, TFS_ALLOC_METADATA, &got), 4 * BS);
	assert_int_equal((got.offset - d->start) / bucket,
			 (got.offset + got.len - 1 - d->start) / bucket);
	/* Each piece is still reused whole. */
	assert_int_equal(tfs_alloc(T.fs, 2 * BS, 2 * BS, 1, 0, &got), 2 * BS);
	assert_int_equal(got.offset, y.offset);
	assert_int_equal(tfs_alloc(T.fs, 2 * BS, 2 * BS, 1, 0, &got), 2 * BS);
	assert_int_equal(got.offset, y.offset - 2 * BS);
}

/*
 * An allocation that fails, or whose run shrinks to what another replica
 * got, takes nothing from the reuse list: the released run is still the
 * next one handed out, and only allocations served count.  A degraded
 * mount asks for every data replica first (one member: that fails) and
 * then for fewer; the failed attempt used to drop the entry, so overwrites
 * there went to fresh space and the counter said twice what was reused.
 */
static void test_alloc_reuse_kept_when_not_taken(void **state)
{
	struct tfs_alloc *a = &T.fs->alloc;
	u64 settled = tfs_journal_settled_seq_ondisk(T.fs->j);
	struct tfs_alloc_run x, keep, got[2];
	u64 reused;

	assert_int_equal(tfs_alloc(T.fs, 2 * BS, 2 * BS, 1, 0, &x), 2 * BS);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, &keep), BS);
	tfs_alloc_free_after(T.fs, &x, settled);
	reused = a->nr_reused;

	/* Two replicas on one member: refused, the list untouched. */
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 2, 0, got), -TFS_ERR_alloc_no_space);
	assert_int_equal(a->nr_reused, reused);
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, got), BS);
	assert_int_equal(got[0].offset, x.offset);
	assert_int_equal(a->nr_reused, reused + 1);
	/* What is left of the run comes next. */
	assert_int_equal(tfs_alloc(T.fs, BS, BS, 1, 0, got), BS);
	assert_int_equal(got[0].offset, x.offset + BS);
	assert_int_equal(a->nr_reused, reused + 2);
}

/* --- ENOSPC --- */

static u64 avail_blocks(void)
{
	struct statvfs sv;

	assert_int_equal(tfs_statfs(T.fs, &sv), 0);
	return sv.f_bavail;
}

static void test_enospc_one_file(void **state)
{
	struct tfs_file *f = new_file("big"), *g;
	static u8 w[1 << 20];
	u64 off = 0, before = avail_blocks();
	ssize_t ret;

	assert_int_equal(pt_mknod(&T, 1, "keep", S_IFREG | 0644, NULL), 0);
	assert_int_equal(pt_open_file(&T, 1, "keep", O_RDWR, &g), 0);
	pt_fill(w, 1000, 9, 0);
	assert_int_equal(tfs_write(T.fs, g, w, 1000, 0), 1000);
	/* Big writes until one fails, then single blocks until one fails. */
	for (size_t chunk = sizeof(w); chunk >= BS; chunk = chunk > BS ? BS : 0) {
		for (;;) {
			pt_fill(w, chunk, 8, off);
			ret = tfs_write(T.fs, f, w, chunk, off);
			if (ret < 0)
				break;
			off += (u64)ret;
		}
		assert_true(tfs_err_matches((int)ret, ENOSPC));
	}
	assert_true(tfs_err_matches((int)ret, ENOSPC));
	assert_int_equal(fsize(f), off);
	assert_true(off > (before - 200) * BS / 2);
	/* Every call keeps failing cleanly; other files still read. */
	assert_true(tfs_err_matches((int)tfs_write(T.fs, f, w, BS, off), ENOSPC));
	assert_true(tfs_err_matches((int)tfs_fallocate(T.fs, f, 0, off, 10 * BS), ENOSPC));
	assert_int_equal(tfs_read(T.fs, g, w, 1000, 0), 1000);
	pt_fill(w + 2000, 1000, 9, 0);
	assert_memory_equal(w, w + 2000, 1000);
	/* The data written is all there. */
	for (u64 o = 0; o < off; o += sizeof(w)) {
		size_t n = (size_t)min_t(u64, sizeof(w), off - o);
		static u8 x[1 << 20];

		assert_int_equal(tfs_read(T.fs, f, w, n, o), (ssize_t)n);
		pt_fill(x, n, 8, o);
		assert_memory_equal(w, x, n);
	}
	/*
	 * Deleting frees it: about as much fits again (btree nodes may take
	 * a few blocks more or less than the first time).
	 */
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_unlink(T.fs, 1, "big", 3), 0);
	f = new_file("big2");
	u64 again = 0;

	for (size_t chunk = sizeof(w); chunk >= BS; chunk = chunk > BS ? BS : 0) {
		for (;;) {
			ret = tfs_write(T.fs, f, w, chunk, again);
			if (ret < 0)
				break;
			again += (u64)ret;
		}
		assert_true(tfs_err_matches((int)ret, ENOSPC));
	}
	assert_true(again + (256 << 10) >= off);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(tfs_release(T.fs, g), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "big2", NULL), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

static void test_enospc_many_files(void **state)
{
	static u8 w[64 << 10];
	char name[32];
	unsigned nr = 0;
	int ret;

	pt_fill(w, sizeof(w), 10, 0);
	for (;; nr++) {
		struct tfs_file *f;

		snprintf(name, sizeof(name), "f%u", nr);
		ret = pt_create(&T, 1, name, &f);
		if (ret)
			break;
		ssize_t n = tfs_write(T.fs, f, w, sizeof(w), 0);

		assert_int_equal(tfs_release(T.fs, f), 0);
		if (n != (ssize_t)sizeof(w)) {
			ret = (int)n;
			break;
		}
	}
	assert_true(tfs_err_matches(ret, ENOSPC));
	assert_true(nr > 100);
	/* Every complete file reads back. */
	for (unsigned i = 0; i < nr; i++) {
		struct tfs_file *f;
		static u8 r[64 << 10];

		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(pt_open_file(&T, 1, name, O_RDONLY, &f), 0);
		assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), sizeof(r));
		assert_memory_equal(r, w, sizeof(r));
		assert_int_equal(tfs_release(T.fs, f), 0);
	}
	/* Delete half: new files fit. */
	for (unsigned i = 0; i < nr; i += 2) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(tfs_unlink(T.fs, 1, name, strlen(name)), 0);
	}
	for (unsigned i = 0; i < nr / 3; i++) {
		struct tfs_file *f;

		snprintf(name, sizeof(name), "g%u", i);
		assert_int_equal(pt_create(&T, 1, name, &f), 0);
		assert_int_equal(tfs_write(T.fs, f, w, sizeof(w), 0), sizeof(w));
		assert_int_equal(tfs_release(T.fs, f), 0);
	}
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_lookup(&T, 1, "g0", NULL), 0);
	assert_int_equal(pt_lookup(&T, 1, "f1", NULL), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * Appends read nothing back: the bytes of a partial last block past EOF
 * read as zeros, so a write reaching EOF has nothing there to merge (the
 * kernel's write-back of the last page sends it from its start to EOF).
 * A write ending before EOF still merges what follows it.
 */
static void test_append_reads_nothing(void **state)
{
	struct tfs_file *f = new_file("append");
	struct tfs_posix *p = tfs_posix(T.fs);
	u8 w[BS], r[3 * BS], want[3 * BS];
	u64 rmw0;

	memset(want, 0, sizeof(want));
	rmw0 = p->c.data_blocks_rmw;
	for (unsigned i = 1; i <= 40; i++) {
		/* As the write-back cache sends it: the dirty pages, from the first's start. */
		u64 size = (u64)i * 200, start = (size - 200) / BS * BS;

		pt_fill(want + size - 200, 200, i, 0);
		assert_int_equal(tfs_write(T.fs, f, want + start, size - start, start),
				 size - start);
	}
	assert_int_equal(p->c.data_blocks_rmw, rmw0);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), 8000);
	assert_memory_equal(r, want, 8000);
	/* A write inside the file merges the bytes after it from disk. */
	pt_fill(w, 100, 99, 0);
	memcpy(want + 4096, w, 100);
	assert_int_equal(tfs_write(T.fs, f, w, 100, 4096), 100);
	assert_int_equal(p->c.data_blocks_rmw, rmw0 + 1);
	assert_int_equal(tfs_read(T.fs, f, r, sizeof(r), 0), 8000);
	assert_memory_equal(r, want, 8000);
	assert_int_equal(tfs_release(T.fs, f), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * Whole-block writes do their I/O without the inode lock and commit under
 * it: writers racing over the same chunks and a truncating thread must
 * leave every chunk holding exactly one write's bytes (or zeros past a
 * truncate), the size and st_blocks consistent, and fsck clean.
 */
#define RACE_CHUNK (64U << 10)
#define RACE_CHUNKS 16
#define RACE_WRITERS 4
#define RACE_WRITES 48

struct race_arg {
	struct tfs_file *f;
	unsigned id;
};

static void *race_writer(void *p)
{
	struct race_arg *a = p;
	u64 *buf = malloc(RACE_CHUNK);
	unsigned seed = a->id * 7919 + 1;

	for (unsigned i = 0; buf && i < RACE_WRITES; i++) {
		u64 token = ((u64)(a->id + 1) << 32) | (i + 1);
		unsigned c = (seed = seed * 1103515245 + 12345) >> 16;

		for (size_t k = 0; k < RACE_CHUNK / 8; k++)
			buf[k] = token;
		if (a->id == RACE_WRITERS) {
			/* The truncating thread: down to a chunk boundary. */
			struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE,
						  .size = (u64)(c % RACE_CHUNKS) * RACE_CHUNK };
			struct tfs_stat st;

			if (tfs_setattr(T.fs, 0, a->f, &sa, &st))
				break;
			continue;
		}
		if (tfs_write(T.fs, a->f, buf, RACE_CHUNK, (u64)(c % RACE_CHUNKS) * RACE_CHUNK) !=
		    RACE_CHUNK)
			break;
	}
	free(buf);
	return NULL;
}

static void test_whole_block_race(void **state)
{
	struct tfs_file *f = new_file("race");
	pthread_t th[RACE_WRITERS + 1];
	struct race_arg args[RACE_WRITERS + 1];
	u64 *buf = malloc(RACE_CHUNK);
	struct tfs_stat st;
	u64 size, blocks = 0;

	assert_non_null(buf);
	for (unsigned i = 0; i <= RACE_WRITERS; i++) {
		args[i] = (struct race_arg){ .f = f, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, race_writer, &args[i]), 0);
	}
	for (unsigned i = 0; i <= RACE_WRITERS; i++)
		pthread_join(th[i], NULL);

	size = fsize(f);
	assert_int_equal(size % RACE_CHUNK, 0);
	for (u64 off = 0; off < size; off += RACE_CHUNK) {
		bool zero;

		assert_int_equal(tfs_read(T.fs, f, buf, RACE_CHUNK, off), RACE_CHUNK);
		zero = !buf[0];
		/* One write's token throughout, or a hole (truncated, then extended past). */
		for (size_t k = 1; k < RACE_CHUNK / 8; k++)
			assert_true(buf[k] == buf[0]);
		if (!zero) {
			assert_true(buf[0] >> 32 >= 1 && buf[0] >> 32 <= RACE_WRITERS);
			blocks += RACE_CHUNK / BS;
		}
	}
	assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
	/* st_blocks (512-byte units) counts exactly the chunks holding data. */
	assert_int_equal(st.blocks, blocks * (BS / 512));
	assert_int_equal(tfs_release(T.fs, f), 0);
	free(buf);
	assert_int_equal(pt_fsck(T.fs), 0);
	assert_int_equal(pt_reopen(&T), 0);
	assert_int_equal(pt_fsck(T.fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unaligned_rw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_and_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_zeroes_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_many_extents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallocate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallocate_sets_times, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_on_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_freed_space_waits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checksum, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_search_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_write_reuses_freed_space, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_alloc_reuse_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_release_out_of_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_reuse_within_bucket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_alloc_reuse_kept_when_not_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fsx, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc_one_file, setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_enospc_many_files, setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_whole_block_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_reads_nothing, setup, teardown),
	};

	return pt_run_tests(tests);
}
