// SPDX-License-Identifier: GPL-2.0
/*
 * Model-based test of the btree engine (fs/btree*.c through fs/btree.h):
 * random inserts, overwrites, deletes, multi-key transactions, lookups and
 * range scans (forward and backward) on every btree, with clustered and
 * scattered positions and small and large values, checked against an
 * in-memory ordered map after every step, fully every so often, and after
 * each stop and reopen (replay).  The engine's counters must show that
 * splits, merges, height growth and height shrink all happened.
 *
 * TFS_LONG=1 runs a much longer sequence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fs/alloc.h"
#include "fs_test.h"
#include "lib/fault_point.h"

/* --- the model: one sorted array per btree --- */

struct mentry {
	struct tfs_bpos pos;
	u16 len; /* value bytes */
	u64 seed;
};

struct mtree {
	struct mentry *e;
	size_t nr, size;
};

static struct mtree model[TFS_BTREE_NR];

static size_t m_lower(const struct mtree *t, struct tfs_bpos pos)
{
	size_t lo = 0, hi = t->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tfs_bpos_cmp(t->e[mid].pos, pos) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void m_set(struct mtree *t, struct tfs_bpos pos, u16 len, u64 seed)
{
	size_t i = m_lower(t, pos);

	if (i < t->nr && tfs_bpos_eq(t->e[i].pos, pos)) {
		t->e[i].len = len;
		t->e[i].seed = seed;
		return;
	}
	if (t->nr == t->size) {
		t->size = t->size ? t->size * 2 : 1024;
		t->e = realloc(t->e, t->size * sizeof(*t->e));
		assert_non_null(t->e);
	}
	memmove(t->e + i + 1, t->e + i, (t->nr - i) * sizeof(*t->e));
	t->e[i] = (struct mentry){ .pos = pos, .len = len, .seed = seed };
	t->nr++;
}

static void m_del(struct mtree *t, struct tfs_bpos pos)
{
	size_t i = m_lower(t, pos);

	if (i < t->nr && tfs_bpos_eq(t->e[i].pos, pos)) {
		memmove(t->e + i, t->e + i + 1, (t->nr - i - 1) * sizeof(*t->e));
		t->nr--;
	}
}

static void m_reset(void)
{
	for (unsigned i = 0; i < TFS_BTREE_NR; i++) {
		free(model[i].e);
		memset(&model[i], 0, sizeof(model[i]));
	}
}

/* --- keys --- */

static u64 rng_state;

static u64 rnd(void)
{
	u64 x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static u64 rnd_below(u64 n)
{
	return n ? rnd() % n : 0;
}

static void fill_val(u8 *v, size_t len, u64 seed)
{
	u64 x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v[i] = (u8)x;
	}
}

static void build_key(struct tfs_bkey_buf *buf, struct tfs_bpos pos, u16 len, u64 seed)
{
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, pos, len);

	assert_non_null(v);
	fill_val(v, len, seed);
}

/* A key as the model says it must be. */
static void check_key(const struct tfs_bkey *k, const struct mentry *e)
{
	struct tfs_bkey_buf want;

	build_key(&want, e->pos, e->len, e->seed);
	if (!tfs_bpos_eq(tfs_bkey_pos(k), e->pos) || tfs_bkey_u64s(k) != tfs_bkey_u64s(&want.k) ||
	    memcmp(k, &want.k, tfs_bkey_bytes(k)))
		fail_msg("key at %llu:%llu: got %llu:%llu u64s %u, want u64s %u",
			 (unsigned long long)e->pos.inode, (unsigned long long)e->pos.offset,
			 (unsigned long long)tfs_bkey_pos(k).inode,
			 (unsigned long long)tfs_bkey_pos(k).offset, tfs_bkey_u64s(k),
			 tfs_bkey_u64s(&want.k));
}

/*
 * A tree for the model: any but the alloc btree, which holds the node space
 * every checkpoint records (fs/alloc.h): keys the model does not know, at
 * positions its cookies must not overwrite.
 */
static unsigned rnd_tree(void)
{
	unsigned id = (unsigned)rnd_below(TFS_BTREE_NR - 1);

	return id >= TFS_BTREE_alloc ? id + 1 : id;
}

/* --- checks --- */

static void check_range(struct tfs_fs *fs, unsigned id, struct tfs_bpos a, struct tfs_bpos b,
			bool backward)
{
	struct mtree *t = &model[id];
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	size_t i = m_lower(t, a), n = 0;

	tfs_btree_iter_init(&iter, fs, id, a, b);
	assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
	while (k) {
		assert_true(i < t->nr && tfs_bpos_cmp(t->e[i].pos, b) <= 0);
		check_key(k, &t->e[i]);
		i++;
		n++;
		assert_int_equal(tfs_btree_iter_next(&iter, &k), 0);
	}
	assert_true(i == t->nr || tfs_bpos_cmp(t->e[i].pos, b) > 0);
	if (backward) {
		/* From past the end back to the start: the same keys, reversed. */
		size_t left = n;

		assert_int_equal(tfs_btree_iter_prev(&iter, &k), 0);
		while (k) {
			assert_true(left > 0);
			check_key(k, &t->e[i - (n - left) - 1]);
			left--;
			assert_int_equal(tfs_btree_iter_prev(&iter, &k), 0);
		}
		assert_int_equal(left, 0);
	}
	tfs_btree_iter_exit(&iter);
}

static void check_all(struct tfs_fs *fs)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		if (id == TFS_BTREE_alloc) {
			assert_int_equal(tfs_btree_verify(fs, id), 0);
			continue; /* not the model's (rnd_tree()) */
		}
		check_range(fs, id, TFS_POS_MIN, TFS_POS_MAX, false);
		assert_int_equal(tfs_btree_verify(fs, id), 0);
		assert_int_equal(fs->btrees[id].nr_keys, model[id].nr);
	}
}

static void check_lookup(struct tfs_fs *fs, unsigned id, struct tfs_bpos pos)
{
	struct mtree *t = &model[id];
	size_t i = m_lower(t, pos);
	struct tfs_bkey_buf buf;
	int ret = tfs_btree_lookup(fs, id, pos, &buf);

	if (i < t->nr && tfs_bpos_eq(t->e[i].pos, pos)) {
		assert_int_equal(ret, 0);
		check_key(&buf.k, &t->e[i]);
	} else {
		assert_int_equal(ret, -ENOENT);
	}
}

/* --- the workload --- */

/* extents get large values (tall trees quickly), the others small ones. */
static u16 val_len(unsigned id)
{
	if (id == TFS_BTREE_extents)
		return (u16)(1024 + rnd_below(2048));
	if (rnd_below(50) == 0)
		return (u16)rnd_below(TFS_BKEY_MAX_VAL_BYTES / 4);
	return (u16)rnd_below(200);
}

static u64 append_offset[16];

static struct tfs_bpos pick_pos(unsigned id)
{
	struct mtree *t = &model[id];

	switch (rnd_below(5)) {
	case 0: /* an existing key: overwrites and deletes */
		if (t->nr)
			return t->e[rnd_below(t->nr)].pos;
		/* fallthrough */
	case 1: { /* clustered, appending */
		unsigned ino = (unsigned)rnd_below(16);

		return TFS_POS(ino + 1, append_offset[ino]++);
	}
	case 2: /* clustered, random offsets */
		return TFS_POS(rnd_below(8) + 1, rnd_below(4096));
	case 3: /* scattered */
		return TFS_POS(rnd() >> rnd_below(64), rnd());
	default: /* the edges */
		switch (rnd_below(4)) {
		case 0:
			return TFS_POS_MIN;
		case 1:
			return TFS_POS_MAX;
		case 2:
			return TFS_POS(0, rnd_below(3));
		default:
			return TFS_POS(UINT64_MAX, UINT64_MAX - rnd_below(3));
		}
	}
}

struct pending {
	unsigned id;
	struct tfs_bpos pos;
	bool del;
	u16 len;
	u64 seed;
};

static u64 next_seed = 1;

/*
 * One transaction of nr updates (inserts and overwrites, deletes with
 * probability del_pct), possibly several to one position; committed and
 * applied to the model; then every touched key is looked up.
 */
static void do_trans(struct tfs_fs *fs, unsigned nr, unsigned del_pct, int only_id)
{
	struct pending p[32];
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	size_t bytes = 0;
	u64 seq;

	tfs_trans_init(&trans, fs);
	for (unsigned i = 0; i < nr; i++) {
		unsigned id = only_id >= 0 ? (unsigned)only_id : rnd_tree();

		p[i].id = id;
		p[i].pos = i && rnd_below(6) == 0 ? p[rnd_below(i)].pos : pick_pos(id);
		if (i && tfs_bpos_eq(p[i].pos, p[i - 1].pos))
			p[i].id = p[i - 1].id;
		p[i].del = rnd_below(100) < del_pct;
		p[i].len = val_len(p[i].id);
		p[i].seed = next_seed++;
		/* Keep the journal entry (16 KiB buckets: 16 KiB entries) within bounds. */
		if (bytes + p[i].len + 64 > 12 * 1024) {
			nr = i;
			break;
		}
		bytes += p[i].len + 64;
		if (p[i].del) {
			assert_int_equal(tfs_trans_delete(&trans, p[i].id, p[i].pos), 0);
		} else {
			build_key(&buf, p[i].pos, p[i].len, p[i].seed);
			assert_int_equal(tfs_trans_update(&trans, p[i].id, &buf.k), 0);
		}
	}
	int ret = tfs_trans_commit(&trans, 0, &seq);

	if (ret)
		fail_msg("commit: %s", tfs_err_str(ret));
	assert_true(seq > 0 || !nr);
	tfs_trans_exit(&trans);
	for (unsigned i = 0; i < nr; i++) {
		if (p[i].del)
			m_del(&model[p[i].id], p[i].pos);
		else
			m_set(&model[p[i].id], p[i].pos, p[i].len, p[i].seed);
	}
	for (unsigned i = 0; i < nr; i++)
		check_lookup(fs, p[i].id, p[i].pos);
}

/* Counters summed over every run of the filesystem (they restart at each open). */
static u64 tot_splits, tot_merges, tot_grows, tot_shrinks, max_height, tot_evicted, tot_read;

static void note_counters(struct tfs_fs *fs)
{
	tot_splits += ft_btree_counter_sum(fs, splits);
	tot_merges += ft_btree_counter_sum(fs, merges);
	tot_grows += ft_btree_counter_sum(fs, height_grows);
	tot_shrinks += ft_btree_counter_sum(fs, height_shrinks);
	tot_evicted += fs->cache.nr_scan_freed;
	tot_read += ft_btree_counter_sum(fs, nodes_read);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (fs->btrees[id].c.max_height > max_height)
			max_height = fs->btrees[id].c.max_height;
}

static void one_step(struct tfs_fs *fs, unsigned phase)
{
	unsigned id = rnd_tree();
	unsigned r = (unsigned)rnd_below(100);
	/* Phase 0 grows (extents above all), 1 deletes most, 2 mixes. */
	unsigned del_pct = phase == 0 ? 10 : phase == 1 ? 85 : 35;

	if (r < 45) {
		do_trans(fs, 1, del_pct, phase == 0 && rnd_below(2) ? TFS_BTREE_extents : -1);
	} else if (r < 60) {
		/* Deleting what exists: merges need emptied leaves. */
		struct mtree *t = &model[id];

		if (t->nr) {
			struct tfs_btree_trans trans;
			struct tfs_bpos pos = t->e[rnd_below(t->nr)].pos;

			tfs_trans_init(&trans, fs);
			assert_int_equal(tfs_trans_delete(&trans, id, pos), 0);
			assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
			tfs_trans_exit(&trans);
			m_del(t, pos);
			check_lookup(fs, id, pos);
		}
	} else if (r < 75) {
		do_trans(fs, 2 + (unsigned)rnd_below(14), del_pct, -1);
	} else if (r < 85) {
		for (unsigned i = 0; i < 4; i++)
			check_lookup(fs, id, pick_pos(id));
	} else {
		struct tfs_bpos a = pick_pos(id), b = pick_pos(id);

		if (tfs_bpos_cmp(a, b) > 0) {
			struct tfs_bpos c = a;

			a = b;
			b = c;
		}
		check_range(fs, id, a, b, r >= 95);
	}
}

static bool lng(void)
{
	return getenv("TFS_LONG") != NULL;
}

/* The whole model run, with a node cache budget (0: none). */
static void run_model(size_t budget, unsigned rounds, unsigned steps)
{
	struct ft t;
	struct ft_geometry g = {
		.nr_devs = 1,
		.size = (u64)(lng() ? 256 : 64) << 20,
		.bucket_size = 16 << 10, /* 16 KiB nodes: splits and tall trees sooner */
		.journal_size = 24 << 20,
	};
	bool lng = getenv("TFS_LONG") != NULL;

	rng_state = 0x1234567;
	m_reset();
	tot_splits = tot_merges = tot_grows = tot_shrinks = max_height = 0;
	tot_evicted = tot_read = 0;
	assert_int_equal(ft_mkfs(&t, &g), 0);
	t.opts.cache_budget = budget;
	assert_int_equal(ft_open(&t), 0);
	check_all(t.fs);
	for (unsigned round = 0; round < rounds; round++) {
		for (unsigned phase = 0; phase < 3; phase++) {
			for (unsigned s = 0; s < steps; s++) {
				one_step(t.fs, phase);
				if (s % 500 == 499)
					check_all(t.fs);
			}
			/* The grow phase ends with a run of large extents (a tall tree). */
			if (phase == 0)
				for (unsigned s = 0; s < (lng ? 4000 : 2500); s++)
					do_trans(t.fs, 1, 0, TFS_BTREE_extents);
			if (phase == 0 && getenv("TFS_VERBOSE")) {
				struct printbuf o = PRINTBUF;

				tfs_btree_to_text(&o, t.fs, TFS_BTREE_extents);
				printf("%s", printbuf_str(&o));
				printbuf_exit(&o);
			}
			/* The delete phase ends by deleting almost everything. */
			if (phase == 1)
				for (unsigned id = 0; id < TFS_BTREE_NR; id++)
					while (model[id].nr > 20) {
						struct mtree *m = &model[id];
						struct tfs_btree_trans trans;
						struct tfs_bpos pos = m->e[rnd_below(m->nr)].pos;

						tfs_trans_init(&trans, t.fs);
						assert_int_equal(tfs_trans_delete(&trans, id, pos),
								 0);
						assert_int_equal(tfs_trans_commit(&trans, 0, NULL),
								 0);
						tfs_trans_exit(&trans);
						m_del(m, pos);
					}
			check_all(t.fs);
		}
		/* Stop and reopen: replay must rebuild exactly the model. */
		note_counters(t.fs);
		if (getenv("TFS_VERBOSE")) {
			struct tfs_alloc_usage u;

			tfs_alloc_usage(t.fs, &u);
			u64 nodes = 0, pend = 0, dirty = 0;

			for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
				for (unsigned l = 0; l < TFS_BTREE_MAX_DEPTH; l++)
					nodes += t.fs->btrees[id].nr_nodes[l];
				pend += t.fs->btrees[id].pending_free.nr;
				dirty += t.fs->btrees[id].nr_dirty;
			}
			printf("round %u: used %llu waiting %llu free %llu; nodes %llu dirty %llu "
			       "pending %llu\n",
			       round, (unsigned long long)u.used, (unsigned long long)u.waiting,
			       (unsigned long long)u.free, (unsigned long long)nodes,
			       (unsigned long long)dirty, (unsigned long long)pend);
		}
		assert_int_equal(ft_stop(&t), 0);
		assert_int_equal(ft_open(&t), 0);
		check_all(t.fs);
	}
	note_counters(t.fs);
	struct printbuf out = PRINTBUF;

	tfs_fs_to_text(&out, t.fs);
	if (getenv("TFS_VERBOSE"))
		printf("%s", printbuf_str(&out));
	printbuf_exit(&out);
	printf("splits %llu, merges %llu, height grows %llu, shrinks %llu, tallest %llu\n",
	       (unsigned long long)tot_splits, (unsigned long long)tot_merges,
	       (unsigned long long)tot_grows, (unsigned long long)tot_shrinks,
	       (unsigned long long)max_height);
	assert_true(tot_splits > 0);
	assert_true(tot_merges > 0);
	/* A tree three levels tall at least once, and back down. */
	assert_true(max_height >= 3);
	assert_true(tot_grows >= 2);
	assert_true(tot_shrinks >= 1);
	if (budget) {
		/* Nodes were evicted and read back. */
		printf("evicted %llu nodes, read %llu\n", (unsigned long long)tot_evicted,
		       (unsigned long long)tot_read);
		assert_true(tot_evicted > 0);
		assert_true(tot_read > tot_evicted / 2);
	}
	ft_cleanup(&t);
	m_reset();
}

static void test_model(void **state)
{
	run_model(0, lng() ? 12 : 3, lng() ? 20000 : 1500);
}

/* The same with a node cache of 1 MiB: nodes are evicted and read back all the time. */
static void test_model_small_cache(void **state)
{
	run_model(2 << 20, lng() ? 6 : 1, lng() ? 10000 : 600);
}

/* An empty transaction commits nothing; a second open of the same images is refused. */
static void test_empty_and_busy(void **state)
{
	struct ft t, t2;
	struct ft_geometry g = { .nr_devs = 1, .size = 32 << 20 };
	struct tfs_btree_trans trans;
	u64 seq = 99;

	assert_int_equal(ft_mkfs(&t, &g), 0);
	assert_int_equal(ft_open(&t), 0);
	tfs_trans_init(&trans, t.fs);
	assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
	assert_int_equal(seq, 0);
	tfs_trans_exit(&trans);
	t2 = t;
	t2.fs = NULL;
	assert_int_equal(tfs_fs_open(t2.paths, t2.nr, &t2.opts, &t2.fs), -EBUSY);
	ft_cleanup(&t);
}

/* Without the format flag, an image mkfs left uninitialized is refused, clearly. */
static void test_not_initialized(void **state)
{
	struct ft t;
	struct ft_geometry g = { .nr_devs = 1, .size = 32 << 20 };

	memset(&t, 0, sizeof(t));
	snprintf(t.dir, sizeof(t.dir), "/tmp/tfs-engine-XXXXXX");
	scratch_dir_make(t.dir);
	t.nr = 1;
	{
		char dir[sizeof(t.dir)];

		memcpy(dir, t.dir, sizeof(dir));
		snprintf(t.path[0], sizeof(t.path[0]), "%s/img0", dir);
	}
	t.paths[0] = t.path[0];
	tfs_fs_opts_default(&t.opts);
	assert_int_equal(ft_format(&t, &g), 0);
	assert_int_equal(tfs_fs_open(t.paths, 1, &t.opts, &t.fs), -TFS_ERR_fs_not_initialized);
	/* Formatting twice is refused too. */
	t.opts.format = true;
	assert_int_equal(ft_open(&t), 0);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(tfs_fs_open(t.paths, 1, &t.opts, &t.fs), -TFS_ERR_invalid_argument);
	ft_cleanup(&t);
}

/* The open's fault points: the open fails with the code, changes nothing, and opens after. */
static void test_open_fault_points(void **state)
{
	static const struct {
		const char *name;
		int err;
	} points[] = {
		{ "init:fs_alloc", -TFS_ERR_ENOMEM_fault_injected },
		{ "init:fs_start", -TFS_ERR_fault_injected },
	};
	struct ft t;
	struct ft_geometry g = { .nr_devs = 1, .size = 32 << 20 };
	struct tfs_fault_arm arm = { .mode = TFS_FAULT_ONESHOT };

	assert_int_equal(ft_mkfs(&t, &g), 0);
	for (unsigned i = 0; i < ARRAY_SIZE(points); i++) {
		struct stat before, after;

		assert_int_equal(stat(t.path[0], &before), 0);
		assert_int_equal(tfs_fault_point_arm(points[i].name, &arm), 0);
		assert_int_equal(tfs_fs_open(t.paths, t.nr, &t.opts, &t.fs), points[i].err);
		assert_null(t.fs);
		assert_int_equal(tfs_fault_point_fired(points[i].name), 1);
		assert_int_equal(stat(t.path[0], &after), 0);
		assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
		assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
		tfs_fault_points_reset();
		assert_int_equal(ft_open(&t), 0);
		assert_int_equal(ft_stop(&t), 0);
	}
	ft_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_model_small_cache),
		cmocka_unit_test(test_empty_and_busy),
		cmocka_unit_test(test_not_initialized),
		cmocka_unit_test(test_open_fault_points),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
