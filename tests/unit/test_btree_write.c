// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/btree_write.c (write-back, roots) through the whole engine,
 * on fault devices:
 *
 *  - Crash: a power cut at every write index of a bounded workload (commits
 *    in two btrees, flushes, checkpoints), under every cut policy, on one
 *    and two members (two replicas).  Reopening (replay over the durable
 *    tree) gives the state after some prefix of the commits that contains
 *    every commit a flush or a write-back acknowledged; every btree
 *    validates node by node; stopping and reopening again gives the same.
 *  - A node write failing once: the checkpoint fails, is retried at new
 *    locations and succeeds; nothing is lost.
 *  - Node writes failing persistently: write-back reports the error, and
 *    after a few tries the filesystem stops writing (EROFS for commits);
 *    everything acknowledged before is there after a reopen.
 *  - Small durable commits (a seq each) with journal space to spare write
 *    back no tree: the pin fifo does not fill every few hundred of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "fault_test.h"
#include "fs_test.h"
#include "lib/fault_point.h"
#include "lib/faultdev.h"

/* --- the workload --- */

#define NK 40	    /* keys per btree */
#define NCOMMITS 24 /* bounded: every write index gets a cut */
static const enum tfs_btree_id wl_btrees[2] = { TFS_BTREE_inodes, TFS_BTREE_extents };

/* state[b][k]: the version (commit number) of key k of btree b; 0: absent. */
typedef u64 wl_state[2][NK];
static wl_state prefix_state[NCOMMITS + 1];

static size_t wl_len(u64 version, unsigned k)
{
	return 400 + (version * 131 + k * 17) % 1200;
}

static void wl_key(struct tfs_bkey_buf *buf, unsigned k, u64 version)
{
	size_t len = wl_len(version, k);
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(7, k * 1000), len);

	memcpy(v, &version, 8);
	for (size_t i = 8; i < len; i++)
		v[i] = (u8)(version * 7 + k + i);
}

/* Commit i's updates (applied to st): two keys set, every fourth a delete. */
static void wl_updates(unsigned i, struct tfs_btree_trans *trans, wl_state st)
{
	struct tfs_bkey_buf buf;
	unsigned b = i % 2;
	unsigned k1 = (i * 7) % NK, k2 = (i * 13 + 1) % NK;

	wl_key(&buf, k1, i);
	if (trans)
		assert_int_equal(tfs_trans_update(trans, wl_btrees[b], &buf.k), 0);
	st[b][k1] = i;
	wl_key(&buf, k2, i);
	if (trans)
		assert_int_equal(tfs_trans_update(trans, wl_btrees[!b], &buf.k), 0);
	st[!b][k2] = i;
	if (i % 4 == 0) {
		unsigned k3 = (i * 5 + 3) % NK;

		if (trans)
			assert_int_equal(
				tfs_trans_delete(trans, wl_btrees[b], TFS_POS(7, k3 * 1000)), 0);
		st[b][k3] = 0;
	}
}

static void wl_prefix_states(void)
{
	memset(prefix_state, 0, sizeof(prefix_state));
	for (unsigned i = 1; i <= NCOMMITS; i++) {
		memcpy(prefix_state[i], prefix_state[i - 1], sizeof(wl_state));
		wl_updates(i, NULL, prefix_state[i]);
	}
}

/*
 * Runs the workload until something fails; returns how many commits are
 * acknowledged (a flush or a write-back covering them returned 0).
 */
static unsigned wl_run(struct tfs_fs *fs)
{
	unsigned acked = 0;

	for (unsigned i = 1; i <= NCOMMITS; i++) {
		struct tfs_btree_trans trans;
		wl_state scratch;
		u64 seq;
		int ret;

		tfs_trans_init(&trans, fs);
		wl_updates(i, &trans, scratch);
		ret = tfs_trans_commit(&trans, 0, &seq);
		tfs_trans_exit(&trans);
		if (ret)
			break;
		if (i % 8 == 0) {
			if (tfs_btree_write_all(fs))
				break;
			acked = i;
		} else if (i % 3 == 1) {
			if (tfs_fs_flush_seq(fs, seq))
				break;
			acked = i;
		}
	}
	return acked;
}

/* What the trees hold, as a state; every value checked byte for byte. */
static void read_state(struct tfs_fs *fs, wl_state st)
{
	memset(st, 0, sizeof(wl_state));
	for (unsigned b = 0; b < 2; b++) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;
		int ret;

		tfs_btree_iter_init(&iter, fs, wl_btrees[b], TFS_POS_MIN, TFS_POS_MAX);
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			struct tfs_bpos pos = tfs_bkey_pos(k);
			struct tfs_bkey_buf want;
			u64 version;

			assert_int_equal(pos.inode, 7);
			assert_int_equal(pos.offset % 1000, 0);
			assert_true(pos.offset / 1000 < NK);
			memcpy(&version, tfs_bkey_val(k), 8);
			wl_key(&want, (unsigned)(pos.offset / 1000), version);
			assert_int_equal(tfs_bkey_bytes(k), tfs_bkey_bytes(&want.k));
			assert_memory_equal(k, &want.k, tfs_bkey_bytes(k));
			st[b][pos.offset / 1000] = version;
		}
		assert_int_equal(ret, 0);
		tfs_btree_iter_exit(&iter);
		assert_int_equal(tfs_btree_verify(fs, wl_btrees[b]), 0);
	}
}

/* The prefix (>= acked) whose state st is; fails if none. */
static unsigned matching_prefix(wl_state st, unsigned acked)
{
	for (unsigned j = acked; j <= NCOMMITS; j++)
		if (!memcmp(st, prefix_state[j], sizeof(wl_state)))
			return j;
	fail_msg("the state after the crash is no prefix of the commits from %u on", acked);
	return 0;
}

/* Templates: one mkfs per member count, copied for each run. */
static struct ft tmpl[3];

static void copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, n), n);
	close(in);
	close(out);
}

static struct ft *template(unsigned nr)
{
	if (!tmpl[nr].nr) {
		struct ft_geometry g = {
			.nr_devs = nr,
			.size = 8 << 20,
			.bucket_size = 16 << 10,
			.journal_size = 1 << 20,
			.replicas = nr,
			.shm = true,
		};

		assert_int_equal(ft_mkfs(&tmpl[nr], &g), 0);
	}
	return &tmpl[nr];
}

static void template_cleanup(void)
{
	for (unsigned nr = 1; nr <= 2; nr++)
		if (tmpl[nr].nr)
			ft_cleanup(&tmpl[nr]);
	memset(tmpl, 0, sizeof(tmpl));
}

/* A fresh copy of the template in t (its own directory). */
static void fresh_copy(struct ft *t, unsigned nr)
{
	struct ft *m = template(nr);

	*t = *m;
	/* Beside the template (same filesystem). */
	if (strlen(m->dir) + 5 > sizeof(t->dir))
		abort();
	memcpy(t->dir + strlen(m->dir), ".run", 5);
	mkdir(t->dir, 0700);
	for (unsigned i = 0; i < nr; i++) {
		snprintf(t->path[i], sizeof(t->path[i]), "%s.run/img%u", m->dir, i);
		t->paths[i] = t->path[i];
		copy_file(m->path[i], t->path[i]);
	}
	t->fs = NULL;
}

/*
 * A fresh copy of the nr-member template in t, opened; with rule, through a
 * fault device over member 0 that has it (the registry is reset first).
 */
static void open_copy(struct ft *t, unsigned nr, const char *rule)
{
	char spec[256];

	fresh_copy(t, nr);
	tfs_faultdev_registry_reset();
	if (rule) {
		snprintf(spec, sizeof(spec), "dev %s trace=off %s", t->path[0], rule);
		assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	}
	assert_int_equal(ft_open(t), 0);
}

/* Reopens the stopped t without faults: it holds commits 1..n, no more, no less. */
static void reopen_expect(struct ft *t, unsigned n)
{
	wl_state st;

	tfs_faultdev_registry_reset();
	assert_int_equal(ft_open(t), 0);
	read_state(t->fs, st);
	assert_memory_equal(st, prefix_state[n], sizeof(wl_state));
	ft_cleanup(t);
	template_cleanup();
}

static struct {
	unsigned runs, beyond_acked, cut_in_open;
} pc_stats;

/* One run: cut at write `cut` of member 0 (0: no cut) with policy; returns writes made. */
static u64 pc_one(unsigned nr, u64 cut, enum tfs_powercut_policy policy)
{
	struct ft t;
	char spec[512];
	wl_state s1, s2;
	unsigned acked, j;
	u64 writes;

	fresh_copy(&t, nr);
	tfs_faultdev_registry_reset();
	if (cut)
		snprintf(spec, sizeof(spec),
			 "dev %s seed=%llu trace=off write nth=%llu powercut=%s", t.path[0],
			 (unsigned long long)(cut * 31 + policy), (unsigned long long)cut,
			 tfs_powercut_policy_names[policy]);
	else
		snprintf(spec, sizeof(spec), "dev %s trace=off", t.path[0]);
	if (nr > 1)
		snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec),
			 "; dev %s seed=%llu trace=off", t.path[1],
			 (unsigned long long)(cut * 17 + policy));
	assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	if (tfs_fs_open(t.paths, t.nr, &t.opts, &t.fs)) {
		/* The cut came during the open (its superblock write): nothing acknowledged. */
		assert_true(cut > 0);
		acked = 0;
		writes = cut;
		pc_stats.cut_in_open++;
	} else {
		acked = wl_run(t.fs);
		writes = tfs_faultdev_nr_writes(t.fs->devs[0].bdev);
		/* The cut every member sees: the one the rule made, or one now. */
		for (unsigned i = 0; i < nr; i++) {
			struct tfs_bdev *b = t.fs->devs[i].bdev;

			if (!tfs_faultdev_frozen(b))
				assert_int_equal(tfs_faultdev_powercut(b, policy, 0), 0);
		}
		ft_stop(&t); /* fails: the devices are gone */
	}
	tfs_faultdev_registry_reset();

	/* Reopen: replay over whatever tree is durable. */
	assert_int_equal(ft_open(&t), 0);
	read_state(t.fs, s1);
	j = matching_prefix(s1, acked);
	pc_stats.runs++;
	pc_stats.beyond_acked += j > acked;
	assert_int_equal(ft_stop(&t), 0);
	/* Twice: the same state (and the tree still validates). */
	assert_int_equal(ft_open(&t), 0);
	read_state(t.fs, s2);
	assert_memory_equal(s1, s2, sizeof(wl_state));
	/* And it goes on working: one more commit, then a clean stop and reopen. */
	{
		struct tfs_btree_trans trans;
		struct tfs_bkey_buf buf;

		tfs_trans_init(&trans, t.fs);
		wl_key(&buf, 0, 999);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_inodes, &buf.k), 0);
		assert_int_equal(tfs_trans_commit(&trans, 0, NULL), 0);
		tfs_trans_exit(&trans);
		s2[0][0] = 999;
	}
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	read_state(t.fs, s1);
	assert_memory_equal(s1, s2, sizeof(wl_state));
	ft_cleanup(&t);
	rmdir(t.dir);
	return writes;
}

static void test_powercut_every_write(void **state)
{
	bool lng = getenv("TFS_LONG") != NULL;

	wl_prefix_states();
	for (unsigned nr = 1; nr <= 2; nr++) {
		/* Record once: how many writes the workload makes on member 0. */
		u64 nr_writes = pc_one(nr, 0, TFS_POWERCUT_none);

		assert_true(nr_writes >= 20);
		for (u64 cut = 1; cut <= nr_writes; cut++)
			for (unsigned p = 0; p < TFS_POWERCUT_NR; p++)
				/* Every index under every policy in the long form; else one policy each, in turn. */
				if (lng || (cut + p) % TFS_POWERCUT_NR == 0)
					pc_one(nr, cut, p);
	}
	printf("power cuts: %u runs, %u recovered more than was acknowledged, %u cut the open\n",
	       pc_stats.runs, pc_stats.beyond_acked, pc_stats.cut_in_open);
	assert_true(pc_stats.beyond_acked > 0);
	template_cleanup();
}

/* --- node writes failing --- */

/* Commits 1..n, each flushed. */
static void commit_flushed(struct tfs_fs *fs, unsigned from, unsigned to)
{
	for (unsigned i = from; i <= to; i++) {
		struct tfs_btree_trans trans;
		wl_state scratch;
		u64 seq;

		tfs_trans_init(&trans, fs);
		wl_updates(i, &trans, scratch);
		assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
		tfs_trans_exit(&trans);
		assert_int_equal(tfs_fs_flush_seq(fs, seq), 0);
	}
}

/* A node write fails once: the write-back is retried elsewhere and succeeds. */
static void test_node_write_fails_once(void **state)
{
	struct ft t;

	wl_prefix_states();
	open_copy(&t, 1, "write tag=btree nth=1 fail=EIO");
	commit_flushed(t.fs, 1, NCOMMITS);
	assert_int_equal(tfs_btree_write_all(t.fs), 0);
	assert_int_equal(tfs_faultdev_rule_fired(t.fs->devs[0].bdev, 0), 1);
	assert_true(ft_btree_counter_sum(t.fs, checkpoint_errors) >= 1);
	assert_int_equal(tfs_journal_error(t.fs->j), 0);
	assert_int_equal(ft_stop(&t), 0);
	reopen_expect(&t, NCOMMITS);
}

/*
 * Every node write fails: write-back reports it, and after a few tries in
 * a row the filesystem stops writing: commits fail with EROFS.  What was
 * flushed before is all there after a reopen.
 */
static void test_node_write_fails_always(void **state)
{
	struct ft t;
	struct tfs_btree_trans trans;
	wl_state st, scratch;
	int ret;

	wl_prefix_states();
	open_copy(&t, 1, "write tag=btree every=1 fail=EIO");
	commit_flushed(t.fs, 1, 6);
	ret = tfs_btree_write_all(t.fs);
	assert_true(ret < 0);
	assert_true(tfs_err_matches(ret, EIO) || tfs_err_matches(ret, EROFS));
	/* Read-only now: a commit fails (EROFS class), nothing half done. */
	tfs_trans_init(&trans, t.fs);
	wl_updates(7, &trans, scratch);
	ret = tfs_trans_commit(&trans, 0, NULL);
	tfs_trans_exit(&trans);
	assert_true(tfs_err_matches(ret, EROFS));
	/* Reads still work, and see every commit. */
	read_state(t.fs, st);
	assert_memory_equal(st, prefix_state[6], sizeof(wl_state));
	assert_true(ft_stop(&t) < 0);
	reopen_expect(&t, 6);
}

/*
 * 1500 single-key commits, each flushed (an fsync each: one seq each), in a
 * journal they fill a third of.  Reclaim has no reason to write a tree
 * back: not space, not memory.  With a pin fifo of 1024 seqs it wrote both
 * trees back every 512 commits (half the fifo), most of the bytes written.
 */
static void test_durable_commits_no_writeback(void **state)
{
	struct ft t;
	struct ft_geometry g = {
		.nr_devs = 1,
		.size = 64 << 20,
		.journal_size = 24 << 20,
		.shm = true,
	};
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	u64 seq;

	assert_int_equal(ft_mkfs(&t, &g), 0);
	assert_int_equal(ft_open(&t), 0);
	u64 before = ft_btree_counter_sum(t.fs, checkpoints);

	tfs_trans_init(&trans, t.fs);
	for (unsigned i = 0; i < 1500; i++) {
		u8 *v = tfs_bkey_init(&buf, TFS_BKEY_cookie, TFS_POS(7, i), 64);

		memset(v, (int)i, 64);
		assert_int_equal(tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k), 0);
		assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
		assert_int_equal(tfs_fs_flush_seq(t.fs, seq), 0);
	}
	tfs_trans_exit(&trans);
	assert_int_equal(ft_btree_counter_sum(t.fs, checkpoints), before);
	assert_int_equal(ft_stop(&t), 0);
	assert_int_equal(ft_open(&t), 0);
	for (unsigned i = 0; i < 1500; i += 37)
		assert_int_equal(tfs_btree_lookup(t.fs, TFS_BTREE_dirents, TFS_POS(7, i), &buf), 0);
	ft_cleanup(&t);
}

/*
 * Two members, two replicas, every node write on member 0 fails: write-back
 * succeeds on member 1's copies (one failing member of two is no error), no
 * read-only stop, and after a reopen with both members every commit is
 * there (reads of member 0's copies fail their checksum and take member
 * 1's).  Before the fix, every checkpoint failed and after a few the
 * filesystem stopped writing.
 */
static void test_node_write_one_replica_fails(void **state)
{
	struct ft t;
	wl_state st;

	wl_prefix_states();
	open_copy(&t, 2, "write tag=btree every=1 fail=EIO");
	for (unsigned round = 0; round < 6; round++) {
		commit_flushed(t.fs, round + 1, round + 1);
		assert_int_equal(tfs_btree_write_all(t.fs), 0);
	}
	commit_flushed(t.fs, 7, NCOMMITS);
	assert_int_equal(tfs_journal_error(t.fs->j), 0);
	assert_true(tfs_faultdev_rule_fired(t.fs->devs[0].bdev, 0) > 0);
	read_state(t.fs, st);
	assert_memory_equal(st, prefix_state[NCOMMITS], sizeof(wl_state));
	ft_stop(&t); /* may fail: member 0's superblock write fails too */
	reopen_expect(&t, NCOMMITS);
}

static int count_loc(void *ctx, const struct tfs_btree_ptr *ptr)
{
	(*(u64 *)ctx)++;
	return 0;
}

static void *locations_loop(void *arg)
{
	struct tfs_fs *fs = arg;
	u64 nr = 0;

	tfs_fs_thread_init();
	for (unsigned i = 0; i < 400; i++)
		for (unsigned id = 0; id < TFS_BTREE_NR; id++)
			if (tfs_btree_node_locations(fs, id, count_loc, &nr))
				return (void *)1;
	return NULL;
}

/*
 * fsck lists node locations (the root key included) while checkpoints log
 * new roots.  The root key is set under roots_lock, and was read under the
 * tree's lock only: a data race that TSan reported from the error loop's
 * fsck (tests/fault/errloop_io).  Meaningful under TSan.
 */
static void test_locations_during_checkpoints(void **state)
{
	struct ft t;
	pthread_t th;
	void *res;

	wl_prefix_states();
	open_copy(&t, 1, NULL);
	assert_int_equal(pthread_create(&th, NULL, locations_loop, t.fs), 0);
	for (unsigned i = 1; i <= NCOMMITS; i++) {
		commit_flushed(t.fs, i, i);
		assert_int_equal(tfs_btree_write_all(t.fs), 0);
	}
	assert_int_equal(pthread_join(th, &res), 0);
	assert_null(res);
	assert_int_equal(ft_stop(&t), 0);
	ft_cleanup(&t);
	template_cleanup();
}

/*
 * Journal reclaim writes back every tree that pins the oldest seq, and each
 * write-back needs a root entry from the journal's reserve (the last
 * reserved_buckets of each member, which only reclaim may use).  Those root
 * entries must share one journal entry: when each took (and flushed) an
 * entry of its own, reclaim needed a block of the reserve per tree to free
 * one bucket, and once the alloc btree made a sixth tree pinned by every
 * data write, the reserve (6 blocks with 16 KiB buckets) could run out
 * before the oldest bucket was freed: the last checkpoint's root entry got
 * journal_full, forever, and every commit waited for space
 * (tests/fault/errloop_io hung in its template about 1 run in 8).
 */
static void test_reclaim_root_entries_share_an_entry(void **state)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	struct tfs_journal *j;
	struct ft t;
	u64 seq, before, after;

	open_copy(&t, 1, NULL);
	j = t.fs->j;
	/* Every tree pins one seq, which is durable. */
	tfs_trans_init(&trans, t.fs);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		wl_key(&buf, id, 1);
		assert_int_equal(tfs_trans_update(&trans, id, &buf.k), 0);
	}
	assert_int_equal(tfs_trans_commit(&trans, 0, &seq), 0);
	tfs_trans_exit(&trans);
	assert_int_equal(tfs_fs_flush_seq(t.fs, seq), 0);

	pthread_mutex_lock(&j->lock);
	before = j->nr_entries;
	pthread_mutex_unlock(&j->lock);
	/* Reclaim writes back all of them (the roots pin too, if that old). */
	assert_int_equal(tfs_journal_flush_pins(j, seq), 0);
	pthread_mutex_lock(&j->lock);
	after = j->nr_entries;
	pthread_mutex_unlock(&j->lock);
	/*
	 * Every tree is clean but the alloc btree, which the others'
	 * write-backs dirtied again (their btree alloc keys) at a seq past the
	 * one reclaim freed.
	 */
	for (unsigned id = 0; id < TFS_BTREE_NR; id++)
		if (id != TFS_BTREE_alloc)
			assert_int_equal(t.fs->btrees[id].nr_dirty, 0);
		else if (t.fs->btrees[id].nr_dirty)
			assert_true(__atomic_load_n(&t.fs->btrees[id].pin.seq, __ATOMIC_ACQUIRE) >
				    seq);
	/* One root entry for all of them, and at most one more (a progress entry). */
	if (after - before > 2)
		fail_msg("reclaim wrote back %u trees in %llu journal entries", TFS_BTREE_NR,
			 (unsigned long long)(after - before));
	assert_int_equal(ft_stop(&t), 0);
	/* Everything is there after a reopen. */
	assert_int_equal(ft_open(&t), 0);
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		const struct tfs_bkey *k;
		struct tfs_btree_iter iter;

		wl_key(&buf, id, 1);
		tfs_btree_iter_init(&iter, t.fs, id, tfs_bkey_pos(&buf.k), tfs_bkey_pos(&buf.k));
		assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
		assert_non_null(k);
		assert_memory_equal(k, &buf.k, tfs_bkey_bytes(&buf.k));
		tfs_btree_iter_exit(&iter);
	}
	assert_int_equal(ft_stop(&t), 0);
	ft_cleanup(&t);
	template_cleanup();
}

static u64 jlocked(struct tfs_journal *j, const u64 *field)
{
	u64 v;

	pthread_mutex_lock(&j->lock);
	v = *field;
	pthread_mutex_unlock(&j->lock);
	return v;
}

/* Kicks reclaim until it ran two passes (one whole pass after the kick). */
static void reclaim_pass(struct tfs_journal *j)
{
	u64 runs = jlocked(j, &j->reclaim_runs);

	for (unsigned i = 0; i < 100000 && jlocked(j, &j->reclaim_runs) < runs + 2; i++) {
		tfs_journal_reclaim_kick(j);
		usleep(50);
	}
	assert_true(jlocked(j, &j->reclaim_runs) >= runs + 2);
}

/*
 * Reclaim under a persistent node write fault: commits fill the journal,
 * every write-back reclaim tries fails, and after a few in a row the
 * filesystem stops writing (EROFS).  The node writes stay bounded (a few
 * write-backs' worth), and once halted reclaim tries no write-back at all,
 * however often it is woken (each wake-up here is a reclaim pass, as the
 * reservations waiting for space make).  Before the fix every pass called
 * the failing flush again: one pin flush error per pass.
 */
static void test_reclaim_failing_flush_backs_off(void **state)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	struct tfs_journal *j;
	char spec[256];
	struct ft t;
	int ret = 0;
	u64 errs, writes;

	fresh_copy(&t, 1);
	tfs_faultdev_registry_reset();
	snprintf(spec, sizeof(spec), "dev %s trace=off write tag=btree every=1 fail=EIO",
		 t.path[0]);
	assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	assert_int_equal(ft_open(&t), 0);
	j = t.fs->j;
	tfs_trans_init(&trans, t.fs);
	for (unsigned i = 0; i < 100000 && !ret; i++) {
		u8 *v = tfs_bkey_init(&buf, TFS_BKEY_cookie, TFS_POS(7, i % 500), 512);

		memset(v, (int)i, 512);
		ret = tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k)
			      ?: tfs_trans_commit(&trans, 0, NULL);
	}
	tfs_trans_exit(&trans);
	assert_true(tfs_err_matches(ret, EROFS));
	/* The write-back that halted it may still be returning its error. */
	reclaim_pass(j);
	writes = (u64)tfs_faultdev_rule_matched(t.fs->devs[0].bdev, 0);
	errs = jlocked(j, &j->pin_flush_errors);
	/* At most CKPT_MAX_FAILURES write-backs of the tree (its nodes, and their parents). */
	assert_true(errs >= 1 && errs <= 8);
	for (unsigned i = 0; i < 40; i++)
		reclaim_pass(j);
	assert_int_equal(jlocked(j, &j->pin_flush_errors), errs);
	assert_int_equal((u64)tfs_faultdev_rule_matched(t.fs->devs[0].bdev, 0), writes);
	ft_stop(&t);
	ft_cleanup(&t);
	template_cleanup();
}

/*
 * Two members, two metadata replicas, one required: the clean section's
 * superblock write fails on member 0 at the stop.  Member 1 has it, so the
 * stop succeeds (a warning names member 0), and the reopen with both
 * members has every commit.  Before the fix the stop returned sb_write.
 * With both members required it still fails.
 */
static void stop_sb_write_fails_on_one(unsigned required, int want)
{
	struct printbuf err = PRINTBUF;
	char spec[256];
	u64 injected;
	struct ft t;
	wl_state st;

	wl_prefix_states();
	fresh_copy(&t, 2);
	tfs_faultdev_registry_reset();
	/* Member 0 under a fault device, no rule yet. */
	snprintf(spec, sizeof(spec), "dev %s trace=off", t.path[0]);
	assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	assert_int_equal(ft_open(&t), 0);
	assert_true(tfs_bdev_is_faultdev(t.fs->devs[0].bdev));
	/* The template is formatted with 1 required; as if mkfs had said 2. */
	t.fs->metadata_replicas_required = required;
	commit_flushed(t.fs, 1, NCOMMITS);
	injected = tfs_faultdev_nr_injected_all();
	/* From now on (the stop) every superblock write on member 0 fails. */
	assert_int_equal(tfs_faultdev_add_rule_str(t.fs->devs[0].bdev,
						   "write tag=sb every=1 fail=EIO", &err),
			 0);
	assert_int_equal(ft_stop(&t), want);
	assert_true(tfs_faultdev_nr_injected_all() > injected);
	tfs_faultdev_registry_reset();
	assert_int_equal(ft_open(&t), 0);
	read_state(t.fs, st);
	assert_memory_equal(st, prefix_state[NCOMMITS], sizeof(wl_state));
	assert_int_equal(ft_stop(&t), 0);
	ft_cleanup(&t);
	template_cleanup();
	printbuf_exit(&err);
}

static void test_stop_sb_write_fails_on_one_member(void **state)
{
	stop_sb_write_fails_on_one(1, 0);
	stop_sb_write_fails_on_one(2, -TFS_ERR_sb_write);
}

/*
 * Two members, two replicas, one required: a write-back whose node writes
 * fail on member 0 succeeds with member 1's copies.  The nodes it left with
 * one good copy are written again, every copy, at the tree's next
 * write-back (member 0 works again by then), even with no new commit: after
 * that, every node reads from member 0 alone (member 1's node reads fail).
 * Before the fix the nodes stayed with their one good copy on member 1
 * until they changed, and the reads failed.
 */
static void test_degraded_nodes_rewritten(void **state)
{
	struct ft t;
	char spec[512];
	wl_state st;

	wl_prefix_states();
	fresh_copy(&t, 2);
	tfs_faultdev_registry_reset();
	snprintf(spec, sizeof(spec),
		 "dev %s trace=off write tag=btree every=1 fail=EIO; dev %s trace=off", t.path[0],
		 t.path[1]);
	assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	assert_int_equal(ft_open(&t), 0);
	commit_flushed(t.fs, 1, NCOMMITS);
	assert_int_equal(tfs_btree_write_all(t.fs), 0);
	assert_true(tfs_faultdev_rule_fired(t.fs->devs[0].bdev, 0) > 0);
	/* Member 0 works again; the next write-back has no new commit to write. */
	tfs_faultdev_clear_rules(t.fs->devs[0].bdev);
	assert_int_equal(tfs_btree_write_all(t.fs), 0);
	assert_int_equal(tfs_journal_error(t.fs->j), 0);
	assert_int_equal(ft_stop(&t), 0);

	/* Reopen with member 1's node reads failing: member 0 must hold every node. */
	tfs_faultdev_registry_reset();
	snprintf(spec, sizeof(spec),
		 "dev %s trace=off read tag=btree every=1 fail=EIO; dev %s trace=off", t.path[1],
		 t.path[0]);
	assert_int_equal(tfs_faults_from_opt("test_btree_write", spec), 0);
	assert_int_equal(ft_open(&t), 0);
	read_state(t.fs, st);
	assert_memory_equal(st, prefix_state[NCOMMITS], sizeof(wl_state));
	assert_int_equal(ft_stop(&t), 0);
	tfs_faultdev_registry_reset();
	ft_cleanup(&t);
	template_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_powercut_every_write),
		cmocka_unit_test(test_node_write_fails_once),
		cmocka_unit_test(test_node_write_fails_always),
		cmocka_unit_test(test_durable_commits_no_writeback),
		cmocka_unit_test(test_node_write_one_replica_fails),
		cmocka_unit_test(test_locations_during_checkpoints),
		cmocka_unit_test(test_reclaim_root_entries_share_an_entry),
		cmocka_unit_test(test_reclaim_failing_flush_backs_off),
		cmocka_unit_test(test_stop_sb_write_fails_on_one_member),
		cmocka_unit_test(test_degraded_nodes_rewritten),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
