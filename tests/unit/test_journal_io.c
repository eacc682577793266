// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for journal/journal_io.c, on fault devices: err_seq when writes fail
 * out of order, flush_seq before and after the error (forever), replicas
 * (one member failing is no error, all failing halts read-only), corrupt
 * entries reported precisely, and a power cut at every write index of a
 * journal workload replaying to a prefix holding every flushed commit,
 * twice the same, and continuing correctly after recovery.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "journal_test.h"

static u64 writes_submitted(struct tfs_bdev *b)
{
	return __atomic_load_n(&b->counters.ios[TFS_OP_write], __ATOMIC_ACQUIRE);
}

/*
 * Replicas 2/2.  S fails on dev 0 and its dev 1 copy completes late, so S+1
 * completes first; S+2 also fails (and completes before S).  err_seq ends at
 * S, the *_ondisk seqs stay below S, and flush_seq answers the same forever.
 */
static void test_err_seq_out_of_order(void **state)
{
	struct jt t;
	struct tfs_journal_res res;
	u64 seq[3];
	s64 s0;

	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 2;
	t.opts.flush_delay_ms = 1000000;
	t.opts.write_delay_ms = 1;
	assert_int_equal(jt_start_fault(&t), 0);
	s0 = jt_commit(t.j, 0, 0, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s0), 0);
	/*
	 * If the entry closed on age (1 ms) before flush_seq promoted it, an
	 * empty flush entry followed it: count from the newest seq, durable.
	 */
	s0 = tfs_journal_cur_seq(t.j);
	assert_int_equal(tfs_journal_flushed_seq_ondisk(t.j), s0);

	assert_int_equal(jt_add_rule(t.bdev[0], "write tag=journal nth=1 fail=EIO"), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "write tag=journal nth=3 fail=EIO"), 0);
	assert_int_equal(jt_add_rule(t.bdev[1], "write tag=journal nth=1 delay=150"), 0);
	tfs_faultdev_pause(t.bdev[0], true);
	tfs_faultdev_pause(t.bdev[1], true);
	u64 base = writes_submitted(t.bdev[0]);

	for (unsigned k = 0; k < 3; k++) {
		s64 s = jt_commit(t.j, k + 1, k + 1, 0);

		assert_true(s > 0);
		seq[k] = s;
		/* Closed on age and submitted (NO_FLUSH: nothing waits for older ones). */
		while (writes_submitted(t.bdev[0]) < base + k + 1)
			usleep(200);
	}
	assert_int_equal(seq[0], s0 + 1);
	assert_int_equal(seq[2], s0 + 3);
	tfs_faultdev_pause(t.bdev[0], false);
	tfs_faultdev_pause(t.bdev[1], false);

	/* Stop waits for every write to complete; the journal halted. */
	assert_int_equal(tfs_journal_stop(t.j), -TFS_ERR_journal_write);
	assert_int_equal(tfs_faultdev_rule_fired(t.bdev[0], 0), 1);
	assert_int_equal(tfs_faultdev_rule_fired(t.bdev[0], 1), 1);
	assert_int_equal(tfs_faultdev_rule_fired(t.bdev[1], 0), 1);

	assert_int_equal(tfs_journal_err_seq(t.j), seq[0]);
	assert_int_equal(tfs_journal_seq_ondisk(t.j), s0);
	assert_int_equal(tfs_journal_flushed_seq_ondisk(t.j), s0);
	/* A halt does not move it. */
	tfs_journal_halt(t.j);
	assert_int_equal(tfs_journal_err_seq(t.j), seq[0]);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(tfs_journal_flush_seq(t.j, s0), 0);
		for (unsigned k = 0; k < 3; k++)
			assert_int_equal(tfs_journal_flush_seq(t.j, seq[k]),
					 -TFS_ERR_journal_write);
	}
	assert_int_equal(tfs_err_class(-TFS_ERR_journal_write), -EIO);
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3, 0), -TFS_ERR_journal_halted);
	jt_cleanup(&t);
}

/* One member: the flush entry at S fails; S-1 stays durable forever. */
static void test_err_seq_flush_fails(void **state)
{
	struct jt t;
	struct tfs_journal_res res;
	s64 s1, s2, s3;

	jt_images(&t, 1, 8, 64 << 10);
	assert_int_equal(jt_start_fault(&t), 0);
	s1 = jt_commit(t.j, 1, 1, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "fua tag=journal nth=1 fail=EIO"), 0);
	s2 = jt_commit(t.j, 2, 2, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s2), -TFS_ERR_journal_write);
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	assert_int_equal(tfs_journal_seq_ondisk(t.j), s1);
	assert_int_equal(tfs_journal_flushed_seq_ondisk(t.j), s1);
	assert_int_equal(tfs_journal_last_seq_ondisk(t.j), 1);

	/* Nothing more gets in; a halt leaves err_seq alone. */
	assert_int_equal(tfs_journal_res_get(t.j, &res, 3, 0), -TFS_ERR_journal_halted);
	tfs_journal_halt(t.j);
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	s3 = tfs_journal_cur_seq(t.j);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, s2), -TFS_ERR_journal_write);
		assert_int_equal(tfs_journal_flush_seq(t.j, s3), -TFS_ERR_journal_write);
		usleep(1000);
	}
	struct printbuf out = PRINTBUF;

	tfs_journal_to_text(&out, t.j);
	assert_non_null(strstr(printbuf_str(&out), "journal_write"));
	assert_non_null(strstr(printbuf_str(&out), "halted:                 yes"));
	printbuf_exit(&out);
	jt_cleanup(&t);
}

/* Replicas 2, required 1: one member failing is no error; both failing halts. */
static void test_replicas(void **state)
{
	struct jt t;
	struct tfs_journal_read *r;
	struct tfs_journal_res res;
	struct printbuf err = PRINTBUF;
	struct jt_model m = { 0 };
	s64 s = 0;

	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 1;
	assert_int_equal(jt_start_fault(&t), 0);
	assert_int_equal(jt_add_rule(t.bdev[1], "write tag=journal every=1 fail=EIO"), 0);
	for (unsigned i = 0; i < 10; i++) {
		s = jt_commit(t.j, i, i, 0);
		assert_true(s > 0);
		jt_pin_log(&t, s);
		if (i % 3 == 0)
			assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	}
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	assert_true(tfs_faultdev_rule_fired(t.bdev[1], 0) >= 1);
	/* The failed member takes no more journal writes. */
	assert_int_equal(tfs_faultdev_rule_fired(t.bdev[1], 0), 1);

	/* Now the last one fails too: read-only, EROFS for changes. */
	assert_int_equal(jt_add_rule(t.bdev[0], "write tag=journal every=1 fail=EIO"), 0);
	s64 s2 = jt_commit(t.j, 20, 20, 0);

	assert_int_equal(tfs_journal_flush_seq(t.j, s2), -TFS_ERR_journal_write);
	int ret = tfs_journal_res_get(t.j, &res, 3, 0);

	assert_true(tfs_err_matches(ret, EROFS));
	assert_int_equal(tfs_journal_err_seq(t.j), s2);
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	jt_stop(&t);

	/* Everything flushed before is on the surviving member. */
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	assert_int_equal(r->newest_seq, s);
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	assert_int_equal(m.nr_keys, 10);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

static void corrupt_byte(const char *path, u64 offset)
{
	int fd = open(path, O_RDWR);
	u8 c;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, offset), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, offset), 1);
	close(fd);
}

/* A bad copy is reported with where it is; a good replica covers it, else a gap. */
static void test_corrupt_entry(void **state)
{
	for (unsigned nr = 1; nr <= 2; nr++) {
		struct jt t;
		struct tfs_journal_read *r;
		struct printbuf err = PRINTBUF;
		struct jt_model m = { 0 };

		jt_images(&t, nr, 8, 64 << 10);
		t.opts.metadata_replicas = nr;
		assert_int_equal(jt_start(&t), 0);
		for (unsigned i = 0; i < 10; i++) {
			s64 s = jt_commit(t.j, i, i, 0);

			jt_pin_log(&t, s);
			assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
		}
		jt_stop(&t);
		/* Entry k (one block each) is at bucket 1 + (k - 1) blocks; hit seq 5's last_seq. */
		corrupt_byte(t.path[0], (64 << 10) + 4 * 4096 + offsetof(struct jset, last_seq));

		assert_int_equal(jt_open_bdevs(&t), 0);
		int ret = jt_read(&t, &r, &err);

		assert_int_equal(r->nr_corrupt, 1);
		assert_int_equal(r->devs[0].nr_corrupt, 1);
		if (nr == 1) {
			assert_int_equal(ret, -TFS_ERR_journal_gap);
			assert_int_equal(r->nr_gaps, 1);
			assert_non_null(strstr(printbuf_str(&err), "seqs 5..5 missing"));
		} else {
			assert_int_equal(ret, 0);
			assert_int_equal(r->entries[4].seq, 5);
			assert_int_equal(r->entries[4].nr_devs, 1);
			assert_int_equal(r->entries[4].devs[0], 1);
			assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
			assert_int_equal(m.nr_keys, 10);
		}
		/* The validator names the reason. */
		struct tfs_journal_read_entry *e = &r->entries[3];
		struct printbuf why = PRINTBUF;

		e->j->last_seq = cpu_to_le64(7);
		assert_int_equal(tfs_jset_validate(e->j, 4096, tfs_jset_magic(t.opts.uuid), &why),
				 -TFS_ERR_journal_entry_bad_csum);
		assert_non_null(strstr(printbuf_str(&why), "bad checksum"));
		printbuf_exit(&why);
		tfs_journal_read_free(r);
		printbuf_exit(&err);
		jt_cleanup(&t);
	}
}

static int count_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *k)
{
	(*(unsigned *)ctx) += tfs_jkey_u64s(k);
	return 0;
}

static int count_entry(void *ctx, u64 seq, const struct jset_entry *e)
{
	(*(unsigned *)ctx)++;
	return 0;
}

/*
 * Bad input: random byte mutations of a valid entry, half of them with the
 * checksum fixed up so they reach the sub-entry checks.  The validator must
 * reject or accept without reading out of bounds (ASan), and whatever it
 * accepts must print and replay within the entry.
 */
static void test_validate_mutations(void **state)
{
	const u64 magic = 0x1234567890abcdefULL;
	const size_t len = 4096;
	u8 *good = calloc(1, len), *buf = malloc(len);
	struct jset *js = (struct jset *)good;
	__le64 *d = js->_data;
	u64 rng = 88172645463325252ULL;
	unsigned accepted = 0, rejected[TFS_ERR_MAX - TFS_ERR_START] = { 0 };

	/* btree_keys with two keys, a btree_root, a usage, a blacklist. */
	struct jset_entry *e = (void *)d;

	e->type = TFS_JSET_ENTRY_btree_keys;
	e->u64s = cpu_to_le16(5);
	e->_data[0] = cpu_to_le64(2);
	e->_data[1] = cpu_to_le64(7);
	e->_data[2] = cpu_to_le64(3);
	e = tfs_jset_entry_next(e);
	e->type = TFS_JSET_ENTRY_btree_root;
	e->u64s = cpu_to_le16(2);
	e->_data[0] = cpu_to_le64(2);
	e = tfs_jset_entry_next(e);
	e->type = TFS_JSET_ENTRY_usage;
	e->u64s = cpu_to_le16(2);
	e = tfs_jset_entry_next(e);
	e->type = TFS_JSET_ENTRY_blacklist;
	e->u64s = cpu_to_le16(2);
	e->_data[0] = cpu_to_le64(2);
	e->_data[1] = cpu_to_le64(3);
	e = tfs_jset_entry_next(e);
	js->u64s = cpu_to_le32((__le64 *)e - d);
	js->magic = cpu_to_le64(magic);
	js->seq = cpu_to_le64(9);
	js->last_seq = cpu_to_le64(4);
	js->version = cpu_to_le32(TFS_JSET_VERSION);
	js->csum = cpu_to_le64(tfs_jset_csum(js));
	struct printbuf err = PRINTBUF;

	assert_int_equal(tfs_jset_validate(js, len, magic, &err), 0);
	/* Sub-entry flags: old_data on btree_keys only; unknown bits are corruption. */
	struct jset_entry *keys = (void *)d, *root = tfs_jset_entry_next(keys);
	static const struct {
		bool root; /* else btree_keys */
		u8 flags;
		bool ok;
	} fl[] = {
		{ false, TFS_JSET_KEYS_old_data, true },
		{ false, 2, false },
		{ false, 0x80, false },
		{ true, TFS_JSET_KEYS_old_data, false },
	};

	for (unsigned i = 0; i < ARRAY_SIZE(fl); i++) {
		struct jset_entry *t = fl[i].root ? root : keys;

		t->flags = fl[i].flags;
		js->csum = cpu_to_le64(tfs_jset_csum(js));
		printbuf_reset(&err);
		assert_int_equal(tfs_jset_validate(js, len, magic, &err) == 0, fl[i].ok);
		t->flags = 0;
	}
	js->csum = cpu_to_le64(tfs_jset_csum(js));
	assert_int_equal(tfs_jset_validate(js, len, magic, &err), 0);
	for (unsigned iter = 0; iter < 20000; iter++) {
		memcpy(buf, good, len);
		unsigned n = 1 + iter % 4;

		for (unsigned k = 0; k < n; k++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			/* Mostly the header and sub-entries, sometimes anywhere. */
			unsigned off = (rng >> 8) % (iter % 8 ? 48 + 8 * 12 : len);

			buf[off] ^= (u8)(rng | 1);
		}
		struct jset *m = (struct jset *)buf;

		if ((iter & 1) && tfs_jset_bytes(le32_to_cpu(m->u64s)) <= len)
			m->csum = cpu_to_le64(tfs_jset_csum(m));
		printbuf_reset(&err);
		int ret = tfs_jset_validate(m, len, magic, &err);

		if (ret) {
			assert_true(tfs_err_matches(ret, TFS_ERR_journal_entry_invalid));
			assert_true(err.pos > 0); /* says why */
			rejected[-ret - TFS_ERR_START]++;
			continue;
		}
		accepted++;
		struct printbuf out = PRINTBUF;

		tfs_jset_to_text(&out, m);
		printbuf_exit(&out);
		/* Replay walks it like a read entry. */
		struct tfs_journal_read_entry re = { .j = m, .seq = le64_to_cpu(m->seq) };
		struct tfs_journal_read r = {
			.entries = &re, .nr = 1, .newest_seq = re.seq, .last_seq = 1
		};
		const struct tfs_journal_replay_ops ops = { .key = count_key,
							    .entry = count_entry };
		unsigned words = 0;

		assert_int_equal(tfs_journal_replay(&r, &ops, &words), 0);
		assert_true(words <= le32_to_cpu(m->u64s));
	}
	printf("validate: %u accepted, rejected: bad_magic %u, bad_csum %u, bad_size %u, "
	       "bad_subentry %u, invalid %u\n",
	       accepted, rejected[TFS_ERR_journal_entry_bad_magic - TFS_ERR_START],
	       rejected[TFS_ERR_journal_entry_bad_csum - TFS_ERR_START],
	       rejected[TFS_ERR_journal_entry_bad_size - TFS_ERR_START],
	       rejected[TFS_ERR_journal_entry_bad_subentry - TFS_ERR_START],
	       rejected[TFS_ERR_journal_entry_invalid - TFS_ERR_START]);
	/* The fixed-up half reaches the deep checks. */
	assert_true(rejected[TFS_ERR_journal_entry_bad_subentry - TFS_ERR_START] > 0);
	assert_true(rejected[TFS_ERR_journal_entry_bad_csum - TFS_ERR_START] > 0);
	printbuf_exit(&err);
	free(good);
	free(buf);
}

/* --- power cut at every write index --- */

#define PC_COMMITS 24
#define PC_PAD 600 /* three commits fill an entry: entries also close on size */

static bool pc_flush_after(unsigned i)
{
	return i == 3 || i == 8 || i == 14 || i == 19 || i == 23;
}

/* Runs the workload; returns how many commits a successful flush covered. */
static unsigned pc_workload(struct jt *t)
{
	struct tfs_journal *j = t->j;
	unsigned acked = 0;

	for (unsigned i = 0; i < PC_COMMITS; i++) {
		s64 s = jt_commit_big(j, i % 8, i, PC_PAD, 0);

		if (s < 0)
			break;
		jt_pin_log(t, s);
		if (pc_flush_after(i)) {
			if (tfs_journal_flush_seq(j, s))
				break;
			acked = i + 1;
		}
	}
	return acked;
}

static void pc_setup(struct jt *t, unsigned nr)
{
	jt_images(t, nr, 8, 64 << 10);
	t->opts.metadata_replicas = nr;
	t->opts.metadata_replicas_required = 1;
	t->opts.write_delay_ms = 10000; /* close on size or demand only */
	t->opts.flush_delay_ms = 1000000;
	assert_int_equal(jt_open_bdevs(t), 0);
	assert_int_equal(jt_wrap_faultdevs(t), 0);
}

/* Replays what is on t's devices into m; checks the prefix rule. */
static void pc_check(struct jt *t, unsigned acked, struct jt_model *m, struct tfs_journal_read **rp)
{
	struct printbuf err = PRINTBUF;
	struct tfs_journal_read *r;
	int ret = jt_read(t, &r, &err);

	if (ret && ret != -TFS_ERR_journal_empty)
		fprintf(stderr, "read: %s: %s\n", tfs_err_str(ret), printbuf_str(&err));
	assert_true(!ret || ret == -TFS_ERR_journal_empty);
	if (ret)
		assert_int_equal(acked, 0);
	memset(m, 0, sizeof(*m));
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, m), 0);
	/* Every acknowledged commit, and nothing but a prefix of history. */
	assert_true(m->nr_order >= acked);
	assert_false(m->out_of_order);
	for (unsigned k = 0; k < m->nr_order; k++)
		if (m->order[k] < 1000) /* the workload's; 1000+ come after recovery */
			assert_int_equal(m->order[k], k);
	printbuf_exit(&err);
	*rp = r;
}

/* Figures over every run, printed at the end: the test must reach these cases. */
static struct {
	unsigned runs, untrusted, beyond_acked, torn_or_corrupt;
} pc_stats;

static void pc_one(unsigned nr, u64 cut, enum tfs_powercut_policy policy, u64 *nr_writes)
{
	struct jt t;
	struct jt_model m1, m2;
	struct tfs_journal_read *r, *r2;
	char rule[96];

	pc_setup(&t, nr);
	for (unsigned i = 0; i < nr; i++)
		tfs_faultdev_set_seed(t.bdev[i], cut * 31 + policy);
	if (cut) {
		snprintf(rule, sizeof(rule), "write tag=journal nth=%llu powercut=%s",
			 (unsigned long long)cut, tfs_powercut_policy_names[policy]);
		assert_int_equal(jt_add_rule(t.bdev[0], rule), 0);
	}
	assert_int_equal(jt_init_start(&t, NULL), 0);
	unsigned acked = pc_workload(&t);

	tfs_journal_exit(t.j);
	t.j = NULL;
	if (nr_writes)
		*nr_writes = tfs_faultdev_nr_writes(t.bdev[0]);
	/* The cut every member sees: the one the rule made, or one now. */
	for (unsigned i = 0; i < nr; i++)
		if (!tfs_faultdev_frozen(t.bdev[i]))
			assert_int_equal(tfs_faultdev_powercut(t.bdev[i], policy, 0), 0);
	jt_close_bdevs(&t);

	assert_int_equal(jt_open_bdevs(&t), 0);
	pc_check(&t, acked, &m1, &r);
	pc_stats.runs++;
	pc_stats.untrusted += r->blacklist_start != 0;
	pc_stats.beyond_acked += m1.nr_order > acked;
	pc_stats.torn_or_corrupt += r->nr_corrupt != 0;
	/* Replaying again, and reading again, gives the same state. */
	memset(&m2, 0, sizeof(m2));
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m2), 0);
	assert_memory_equal(&m1, &m2, sizeof(m1));
	pc_check(&t, acked, &m2, &r2);
	assert_memory_equal(&m1, &m2, sizeof(m1));
	tfs_journal_read_free(r2);

	/* Recovery: continue after what was read; untrusted seqs stay void. */
	assert_int_equal(jt_init_start(&t, r), 0);
	s64 s = 0;

	for (unsigned k = 0; k < 3; k++)
		s = jt_commit(t.j, 60 + k, 1000 + k, 0);
	assert_true(s > (s64)r->max_seq);
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	jt_stop(&t);
	tfs_journal_read_free(r);

	assert_int_equal(jt_open_bdevs(&t), 0);
	pc_check(&t, 0, &m2, &r2);
	assert_int_equal(m2.nr_order, m1.nr_order + 3);
	assert_memory_equal(m2.order, m1.order, m1.nr_order * sizeof(u64));
	for (unsigned k = 0; k < 3; k++)
		assert_int_equal(m2.order[m1.nr_order + k], 1000 + k);
	tfs_journal_read_free(r2);
	jt_cleanup(&t);
}

static void test_powercut_every_write(void **state)
{
	for (unsigned nr = 1; nr <= 2; nr++) {
		u64 nr_writes = 0;

		/* Record once: how many journal writes the workload makes. */
		pc_one(nr, 0, TFS_POWERCUT_none, &nr_writes);
		assert_true(nr_writes >= 8);
		for (u64 cut = 1; cut <= nr_writes; cut++)
			for (unsigned p = 0; p < TFS_POWERCUT_NR; p++)
				pc_one(nr, cut, p, NULL);
	}
	printf("power cuts: %u runs, %u left untrusted entries, %u replayed more than was "
	       "flushed, %u had torn or corrupt entries\n",
	       pc_stats.runs, pc_stats.untrusted, pc_stats.beyond_acked, pc_stats.torn_or_corrupt);
	assert_true(pc_stats.untrusted > 0);
}

/*
 * One valid, checksummed entry with seq 2^40 and last_seq 1: the read must
 * not walk 2^40 seqs; the span is more than any pin fifo holds, so the entry
 * is reported as corrupt.
 */
static void test_read_absurd_span(void **state)
{
	static u8 blk[4096] __attribute__((aligned(4096)));
	struct jset *js = (void *)blk;
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;

	signal(SIGALRM, SIG_DFL);
	alarm(60); /* a regression fails instead of hanging */
	jt_images(&t, 1, 4, 16 << 10);
	t.opts.max_entry_size = 16 << 10;
	assert_int_equal(jt_open_bdevs(&t), 0);
	memset(blk, 0, sizeof(blk));
	js->magic = cpu_to_le64(tfs_jset_magic(t.opts.uuid));
	js->seq = cpu_to_le64(1ULL << 40);
	js->last_seq = cpu_to_le64(1);
	js->version = cpu_to_le32(TFS_JSET_VERSION);
	js->csum = cpu_to_le64(tfs_jset_csum(js));
	assert_int_equal(tfs_jset_validate(js, sizeof(blk), tfs_jset_magic(t.opts.uuid), &err), 0);
	assert_int_equal(tfs_bdev_write(t.bdev[0], blk, sizeof(blk), t.buckets[0] * (16 << 10), 0,
					TFS_TAG_journal),
			 0);
	int ret = jt_read(&t, &r, &err);

	assert_int_equal(ret, -TFS_ERR_journal_empty);
	assert_int_equal(r->nr, 0);
	assert_int_equal(r->nr_corrupt, 1);
	tfs_journal_read_free(r);
	alarm(0);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/*
 * Starts t (through fault devices with fault) writing entries within 1 ms
 * but flushing only on demand, then makes seq *s1 (key 1, pinned by
 * t->log_pin) durable and seq *s2 (key 2) written but not flushed.
 */
static void start_durable_then_written(struct jt *t, bool fault, s64 *s1, s64 *s2)
{
	t->opts.write_delay_ms = 1;
	t->opts.flush_delay_ms = 1000000;
	assert_int_equal(fault ? jt_start_fault(t) : jt_start(t), 0);
	*s1 = jt_commit_pinned(t, 1, 1, 0);
	assert_int_equal(tfs_journal_flush_seq(t->j, *s1), 0);
	*s2 = jt_commit(t->j, 2, 2, 0);
	assert_true(jt_wait_ondisk(t->j, *s2));
}

/*
 * Replicas 1 over 2 members: a NO_FLUSH entry lands on dev 0, dev 0 goes
 * read-only, and the flush entry on dev 1 must still flush dev 0's cache, or
 * flush_seq's success is a lie after a power cut.
 */
static void test_flush_reaches_unwritable_member(void **state)
{
	struct jt t;
	s64 s1, s2;

	jt_images(&t, 2, 8, 64 << 10);
	start_durable_then_written(&t, true, &s1, &s2);
	assert_true(tfs_faultdev_nr_unflushed(t.bdev[0]) + tfs_faultdev_nr_unflushed(t.bdev[1]) >
		    0);
	assert_int_equal(tfs_journal_dev_set_writable(t.j, 0, false), 0);
	s64 s3 = jt_commit(t.j, 3, 3, 0);

	assert_int_equal(tfs_journal_flush_seq(t.j, s3), 0); /* covers s2 */
	assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[0]), 0);
	assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[1]), 0);
	tfs_journal_halt(t.j);
	tfs_journal_pin_drop(t.j, &t.log_pin);
	tfs_journal_exit(t.j);
	t.j = NULL;
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(tfs_faultdev_powercut(t.bdev[i], TFS_POWERCUT_none, 0), 0);
	jt_close_bdevs(&t);

	jt_reread_expect_ids(&t, 3);
	jt_cleanup(&t);
}

/*
 * A journal read that fails is printed once, by the journal (device, bucket,
 * ring index, offset), not a second time by the device.  The device vanishes
 * at the 4th bucket read, so the reads after it fail in the device itself
 * (an injected failure prints only the fault line), each of them
 * once: every line is the journal's or the fault device's own.
 */
static void test_read_error_printed_once(void **state)
{
	struct jt t;
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	struct stderr_capture cap;
	unsigned journal_lines = 0;

	jt_images(&t, 1, 8, 16 << 10);
	assert_int_equal(jt_start(&t), 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit(t.j, 1, 1, 0)), 0);
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_wrap_faultdevs(&t), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "read tag=journal nth=4 vanish"), 0);
	stderr_capture_start(&cap);
	assert_true(jt_read(&t, &r, &err) < 0);
	char *printed = stderr_capture_end(&cap);

	for (char *l = printed, *nl; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		assert_non_null(nl);
		*nl = 0;
		if (!strncmp(l, "tinyfs: fault:", 14))
			continue;
		/* Nothing but the journal's own line per failed bucket. */
		if (strncmp(l, "journal: dev 0", 14))
			fail_msg("printed by someone else: %s", l);
		assert_non_null(strstr(l, "ring index"));
		journal_lines++;
	}
	assert_int_equal(journal_lines, 5); /* ring indexes 3 to 7 */
	assert_null(r);
	printbuf_exit(&err);
	jt_close_bdevs(&t);
	jt_cleanup(&t);
}

/*
 * A bucket that cannot be read fails the read, naming device and bucket:
 * acknowledged entries in it must not vanish silently (their seqs would be
 * reused).  With replicas 2 the other member's good copies are enough.
 */
static void test_read_error_fails_read(void **state)
{
	enum {
		PAD = 1800
	}; /* one entry per 16 KiB bucket */
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	struct jt_model m = { 0 };

	jt_images(&t, 1, 8, 16 << 10);
	t.opts.max_entry_size = 16 << 10;
	assert_int_equal(jt_start(&t), 0);
	for (u64 k = 1; k <= 4; k++) {
		s64 s = k == 1 ? jt_commit_pinned(&t, k, k, PAD) : jt_commit_big(t.j, k, k, PAD, 0);

		assert_int_equal(tfs_journal_flush_seq(t.j, s), 0); /* acknowledged */
	}
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_wrap_faultdevs(&t), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "read tag=journal nth=4 fail=EIO"), 0);
	r = NULL;
	assert_int_equal(jt_read(&t, &r, &err), -TFS_ERR_journal_read);
	assert_null(r);
	assert_non_null(strstr(printbuf_str(&err), "dev 0"));
	assert_non_null(strstr(printbuf_str(&err), "ring index 3"));
	jt_close_bdevs(&t);
	jt_cleanup(&t);

	/* Two members, every entry on both: one unreadable bucket is covered. */
	printbuf_reset(&err);
	jt_images(&t, 2, 8, 16 << 10);
	t.opts.max_entry_size = 16 << 10;
	t.opts.metadata_replicas = 2;
	assert_int_equal(jt_start(&t), 0);
	for (u64 k = 1; k <= 4; k++) {
		s64 s = k == 1 ? jt_commit_pinned(&t, k, k, PAD) : jt_commit_big(t.j, k, k, PAD, 0);

		assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	}
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_wrap_faultdevs(&t), 0);
	assert_int_equal(jt_add_rule(t.bdev[0], "read tag=journal nth=4 fail=EIO"), 0);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	for (u64 k = 1; k <= 4; k++)
		assert_int_equal(m.val[k], k);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/* --- issue 8: flush ordering across members, replicas, untrusted seqs --- */

static u64 flushes_submitted(struct tfs_bdev *b)
{
	return __atomic_load_n(&b->counters.ios[TFS_OP_flush], __ATOMIC_ACQUIRE);
}

/*
 * Replicas 1 over two or three members.  seq 2 (NO_FLUSH) opens a second
 * bucket on dev 0, so the flush entry seq 3 goes to dev 1 (most free
 * buckets), and dev 0 needs its own flush for seq 2.  Power dies on dev 1
 * after its write of seq 3 could have completed, and on dev 0 at its flush:
 * seq 3 must not be durable while seq 2 is lost, so the journal still reads
 * (no gap) and replays a prefix.  Before the fix the flush entry went out
 * together with dev 0's flush, and the read failed with "seqs 2..2 missing".
 */
static void test_flush_entry_after_member_flushes(void **state)
{
	enum {
		PAD = 1400 /* 12 KiB entries: a second one does not fit a 16 KiB bucket */
	};

	for (unsigned nr = 2; nr <= 3; nr++) {
		struct jt t;
		struct jt_flusher f;
		static struct jt_model m;
		struct tfs_journal_read *r;
		struct printbuf err = PRINTBUF;

		jt_images(&t, nr, 4, 16 << 10);
		t.opts.write_delay_ms = 100000; /* close on demand only */
		t.opts.flush_delay_ms = 1000000;
		assert_int_equal(jt_start_fault(&t), 0);
		s64 s1 = jt_commit_pinned(&t, 1, 1, PAD);

		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		s64 s2 = jt_commit_big(t.j, 2, 2, PAD, 0);

		jt_close_entry(t.j);
		assert_true(jt_wait_ondisk(t.j, s2));
		assert_true(tfs_faultdev_nr_unflushed(t.bdev[0]) > 0);
		for (unsigned i = 1; i < nr; i++)
			assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[i]), 0);

		/* dev 0 holds its flush back; the others run. */
		tfs_faultdev_pause(t.bdev[0], true);
		u64 w1 = tfs_faultdev_nr_writes(t.bdev[1]), f0 = flushes_submitted(t.bdev[0]);
		s64 s3 = jt_commit(t.j, 3, 3, 0);

		jt_flusher_start(&f, t.j, s3);
		assert_true(jt_poll(flushes_submitted(t.bdev[0]) > f0, 10000));
		/* Give a (wrongly) concurrent write of seq 3 time to complete. */
		jt_poll(tfs_faultdev_nr_writes(t.bdev[1]) > w1, 300);
		for (unsigned i = 1; i < nr; i++)
			assert_int_equal(tfs_faultdev_powercut(t.bdev[i], TFS_POWERCUT_none, 0), 0);
		assert_int_equal(jt_add_rule(t.bdev[0], "flush nth=1 powercut=none"), 0);
		tfs_faultdev_pause(t.bdev[0], false);
		/* Never acknowledged: seq 2 is gone. */
		assert_true(jt_flusher_join(&f) < 0);
		tfs_journal_halt(t.j);
		tfs_journal_pin_drop(t.j, &t.log_pin);
		jt_stop(&t);

		assert_int_equal(jt_open_bdevs(&t), 0);
		int ret = jt_read(&t, &r, &err);

		if (ret)
			fail_msg("%u members: read: %s: %s", nr, tfs_err_str(ret),
				 printbuf_str(&err));
		memset(&m, 0, sizeof(m));
		assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
		/* A prefix: seq 1's key (acknowledged), then maybe 2's, never 3's without 2's. */
		assert_false(m.out_of_order);
		assert_true(m.nr_order >= 1);
		for (unsigned k = 0; k < m.nr_order; k++)
			assert_int_equal(m.order[k], k + 1);
		assert_true(r->newest_seq < (u64)s3);
		tfs_journal_read_free(r);
		printbuf_exit(&err);
		jt_cleanup(&t);
	}
}

/*
 * Replicas 2, required 1, two or three members.  seq 2 (NO_FLUSH) reaches
 * dev 0 and dev 1; dev 0 vanishes at its write of seq 3 (which dev 1
 * takes).  The flush entry seq 4 goes to the others, which hold every
 * older entry: dev 0's flush is not needed, and its failure is no error.
 * Before the fix: "write of seq 4 reached 2 of 1 required replicas, a device
 * flush failed ... journal halted".
 */
static void test_unneeded_member_flush_fails(void **state)
{
	for (unsigned nr = 2; nr <= 3; nr++) {
		struct jt t;

		jt_images(&t, nr, 8, 64 << 10);
		t.opts.metadata_replicas = 2;
		t.opts.metadata_replicas_required = 1;
		t.opts.write_delay_ms = 100000;
		t.opts.flush_delay_ms = 1000000;
		assert_int_equal(jt_start_fault(&t), 0);
		s64 s1 = jt_commit_pinned(&t, 1, 1, 0);

		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		assert_int_equal(jt_add_rule(t.bdev[0], "write tag=journal nth=2 vanish"), 0);
		for (u64 k = 2; k <= 3; k++) {
			s64 s = jt_commit(t.j, k, k, 0);

			jt_close_entry(t.j);
			assert_true(jt_wait_ondisk(t.j, s));
		}
		assert_int_equal(tfs_faultdev_rule_fired(t.bdev[0], 0), 1);
		s64 s4 = jt_commit(t.j, 4, 4, 0);

		assert_int_equal(tfs_journal_flush_seq(t.j, s4), 0);
		assert_int_equal(tfs_journal_err_seq(t.j), 0);
		assert_int_equal(tfs_journal_flushed_seq_ondisk(t.j), s4);
		tfs_journal_pin_drop(t.j, &t.log_pin);
		jt_stop(&t);
		tfs_faultdev_registry_reset(); /* dev 0's image may be opened again */
		jt_reread_expect_ids(&t, 4);
		jt_cleanup(&t);
	}
}

/*
 * After recovery, seqs the read did not trust (after the newest flush
 * entry; blacklisted) were never durable: flush_seq of them fails, in the
 * run that blacklists them and in later runs, while trusted seqs succeed.
 * Before the fix start set flushed_seq_ondisk to the highest seq read.
 */
static void test_flush_seq_untrusted_after_recovery(void **state)
{
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	s64 s1, s2;

	jt_images(&t, 1, 8, 64 << 10);
	start_durable_then_written(&t, false, &s1, &s2);
	s64 s3 = jt_commit(t.j, 3, 3, 0);

	assert_true(jt_wait_ondisk(t.j, s3));
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)s2);
	tfs_journal_halt(t.j); /* a crash: s2, s3 stay NO_FLUSH */
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);

	for (unsigned run = 2; run <= 3; run++) {
		assert_int_equal(jt_open_bdevs(&t), 0);
		assert_int_equal(jt_read(&t, &r, &err), 0);
		if (run == 2) {
			assert_int_equal(r->newest_seq, s1);
			assert_int_equal(r->max_seq, s3);
			assert_int_equal(r->blacklist_start, s2);
		}
		assert_int_equal(jt_init_start(&t, r), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		for (s64 s = s2; s <= s3; s++) {
			int ret = tfs_journal_flush_seq(t.j, s);

			assert_int_equal(ret, -TFS_ERR_journal_seq_untrusted);
			assert_int_equal(tfs_err_class(ret), -EIO);
		}
		if (run == 2) {
			assert_true(tfs_journal_flushed_seq_ondisk(t.j) < (u64)s2);
			assert_true(tfs_journal_seq_ondisk(t.j) < (u64)s2);
		}
		/* New seqs work as usual; the untrusted ones keep failing. */
		s64 s = jt_commit(t.j, 10 + run, 10 + run, 0);

		assert_true(s > (s64)r->max_seq);
		assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, s2), -TFS_ERR_journal_seq_untrusted);
		assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
		assert_int_equal(tfs_journal_error(t.j), 0);
		tfs_journal_read_free(r);
		jt_stop(&t);
	}
	printbuf_exit(&err);
	jt_cleanup(&t);
}

/*
 * Every member cut at one instant, at a random moment: one, two and three
 * members, replicas 1 and 2.  Threads commit to objects whose pins are
 * written back (after flush_seq of their seq, so the "btree" never runs
 * ahead of the journal) and flush some commits.  At a seeded moment every
 * member is paused and then cut (seeded policy per member).  Whatever each
 * member's cache kept, the journal reads without gaps and every
 * acknowledged value comes back (replay, else the written-back copy);
 * nothing newer than committed appears; then the journal continues after
 * what was read.
 */
#define RC_NT 3
#define RC_PER 4
#define RC_NOBJS (RC_NT * RC_PER)

struct rc_obj {
	pthread_mutex_t lock;
	struct tfs_journal_entry_pin pin;
	u64 value, seq, btree, acked;
};

static struct {
	struct tfs_journal *j;
	struct rc_obj objs[RC_NOBJS];
	int stop, failed;
	unsigned seed;
} rc;

static int rc_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct rc_obj *o = container_of(pin, struct rc_obj, pin);

	pthread_mutex_lock(&o->lock);
	u64 s = o->seq, v = o->value;

	pthread_mutex_unlock(&o->lock);
	int ret = tfs_journal_flush_seq(j, s);

	if (ret)
		return ret;
	pthread_mutex_lock(&o->lock);
	if (o->seq == s) {
		o->btree = v;
		tfs_journal_pin_drop(j, &o->pin);
	}
	pthread_mutex_unlock(&o->lock);
	return 0;
}

static void *rc_worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, rnd = rc.seed * 131 + t * 7919 + 1;

	while (!__atomic_load_n(&rc.stop, __ATOMIC_RELAXED)) {
		rnd = rnd * 1103515245 + 12345;
		unsigned id = t * RC_PER + (rnd >> 16) % RC_PER;
		struct rc_obj *o = &rc.objs[id];
		unsigned pad = (rnd >> 4) % 400;
		struct tfs_journal_res res;
		int r = tfs_journal_res_get(rc.j, &res, tfs_jset_entry_u64s(2 + pad), 0);

		if (r) {
			if (tfs_err_class(r) != -EROFS) {
				fprintf(stderr, "cut seed %u: reservation: %s\n", rc.seed,
					tfs_err_str(r));
				__atomic_store_n(&rc.failed, 1, __ATOMIC_RELAXED);
			}
			break;
		}
		pthread_mutex_lock(&o->lock);
		u64 v = ++o->value;
		__le64 *k = tfs_journal_res_add_entry(rc.j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0,
						      2 + pad);

		k[0] = cpu_to_le64((2 + pad) | ((u64)id << 32));
		k[1] = cpu_to_le64(v);
		for (unsigned i = 0; i < pad; i++)
			k[2 + i] = cpu_to_le64(i);
		tfs_journal_pin_update(rc.j, res.seq, &o->pin, rc_flush);
		o->seq = res.seq;
		pthread_mutex_unlock(&o->lock);
		tfs_journal_res_put(rc.j, &res);
		if ((rnd >> 12) % 6 == 0) {
			r = tfs_journal_flush_seq(rc.j, res.seq);
			if (!r) {
				pthread_mutex_lock(&o->lock);
				o->acked = max_t(u64, o->acked, v);
				pthread_mutex_unlock(&o->lock);
			} else if (tfs_err_class(r) != -EIO && tfs_err_class(r) != -EROFS) {
				fprintf(stderr, "cut seed %u: flush_seq: %s\n", rc.seed,
					tfs_err_str(r));
				__atomic_store_n(&rc.failed, 1, __ATOMIC_RELAXED);
			}
		}
	}
	return NULL;
}

struct rc_replay {
	u64 val[RC_NOBJS];
	bool seen[RC_NOBJS];
};

static int rc_replay_key(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *k)
{
	struct rc_replay *r = ctx;
	unsigned id = (le64_to_cpu(k[0]) >> 32) % RC_NOBJS;

	r->val[id] = le64_to_cpu(k[1]);
	r->seen[id] = true;
	return 0;
}

static struct {
	unsigned runs, acked_runs, untrusted, torn;
} rc_stats;

static void rc_one(unsigned nr, unsigned replicas, unsigned seed)
{
	const struct tfs_journal_replay_ops ops = { .key = rc_replay_key };
	struct jt t;
	struct tfs_journal_read *r;
	struct printbuf err = PRINTBUF;
	struct rc_replay rp = { 0 };
	pthread_t th[RC_NT];
	u64 rnd = seed * 0x9e3779b97f4a7c15ULL + nr * 31 + replicas;

	memset(&rc, 0, sizeof(rc));
	rc.seed = seed;
	/* Small buckets: members fill unevenly, so entries go to different members. */
	jt_images(&t, nr, 12, 16 << 10);
	t.opts.metadata_replicas = replicas;
	t.opts.metadata_replicas_required = 1;
	t.opts.pin_fifo_size = 64;
	t.opts.write_delay_ms = 1;
	t.opts.flush_delay_ms = 20;
	assert_int_equal(jt_open_bdevs(&t), 0);
	assert_int_equal(jt_wrap_faultdevs(&t), 0);
	for (unsigned i = 0; i < nr; i++)
		tfs_faultdev_set_seed(t.bdev[i], seed * 3 + i);
	assert_int_equal(jt_init_start(&t, NULL), 0);
	rc.j = t.j;
	for (unsigned i = 0; i < RC_NOBJS; i++) {
		pthread_mutex_init(&rc.objs[i].lock, NULL);
		tfs_journal_pin_init(&rc.objs[i].pin);
	}
	for (unsigned i = 0; i < RC_NT; i++)
		assert_int_equal(pthread_create(&th[i], NULL, rc_worker, (void *)(uintptr_t)i), 0);
	rnd ^= rnd >> 29, rnd *= 0xbf58476d1ce4e5b9ULL, rnd ^= rnd >> 32;
	usleep(2000 + rnd % 60000);
	/*
	 * One instant: nothing more runs on any member (queued ops included:
	 * the next op a member runs is its power cut), then every member is
	 * cut, whatever it had in its cache (policy seeded per member).
	 */
	for (unsigned i = 0; i < nr; i++)
		tfs_faultdev_pause(t.bdev[i], true);
	for (unsigned i = 0; i < nr; i++) {
		char rule[48];

		snprintf(rule, sizeof(rule), "any nth=1 powercut=%s",
			 tfs_powercut_policy_names[(rnd >> (8 + 2 * i)) % TFS_POWERCUT_NR]);
		assert_int_equal(jt_add_rule(t.bdev[i], rule), 0);
	}
	for (unsigned i = 0; i < nr; i++)
		tfs_faultdev_pause(t.bdev[i], false);
	/*
	 * A member that had nothing queued is cut now (nothing ran since); one
	 * whose rule fired meanwhile answers that the power is off already.
	 */
	for (unsigned i = 0; i < nr; i++) {
		int ret =
			tfs_faultdev_powercut(t.bdev[i], (rnd >> (8 + 2 * i)) % TFS_POWERCUT_NR, 0);

		assert_true(!ret || ret == -TFS_ERR_bdev_powercut);
		assert_true(tfs_faultdev_frozen(t.bdev[i]));
	}
	__atomic_store_n(&rc.stop, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < RC_NT; i++)
		pthread_join(th[i], NULL);
	assert_false(rc.failed);
	tfs_journal_halt(t.j);
	for (unsigned i = 0; i < RC_NOBJS; i++)
		tfs_journal_pin_drop(t.j, &rc.objs[i].pin);
	jt_stop(&t);

	bool acked = false;

	assert_int_equal(jt_open_bdevs(&t), 0);
	int ret = jt_read(&t, &r, &err);

	for (unsigned i = 0; i < RC_NOBJS; i++)
		acked |= rc.objs[i].acked != 0;
	if (ret && !(ret == -TFS_ERR_journal_empty && !acked))
		fail_msg("cut %u members, replicas %u, seed %u: read: %s: %s", nr, replicas, seed,
			 tfs_err_str(ret), printbuf_str(&err));
	assert_int_equal(tfs_journal_replay(r, &ops, &rp), 0);
	for (unsigned i = 0; i < RC_NOBJS; i++) {
		struct rc_obj *o = &rc.objs[i];
		u64 v = rp.seen[i] ? rp.val[i] : o->btree;

		if (v < o->acked || v > o->value)
			fail_msg("cut %u members, replicas %u, seed %u: object %u: recovered %llu "
				 "(replay %llu, btree %llu), acked %llu, committed %llu",
				 nr, replicas, seed, i, (unsigned long long)v,
				 (unsigned long long)rp.val[i], (unsigned long long)o->btree,
				 (unsigned long long)o->acked, (unsigned long long)o->value);
	}
	rc_stats.runs++;
	rc_stats.acked_runs += acked;
	rc_stats.untrusted += r->blacklist_start != 0;
	rc_stats.torn += r->nr_corrupt != 0;

	/*
	 * Recovery: continue after what was read, once replay is applied (the
	 * model took it): until replay_done() its seqs stay pinned, and a ring
	 * full of them rightly has no room for anything new.
	 */
	assert_int_equal(jt_init_start(&t, r), 0);
	tfs_journal_replay_done(t.j);
	s64 s = jt_commit(t.j, 0, 1, 0);

	assert_true(s > (s64)r->max_seq);
	assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
	tfs_journal_read_free(r);
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);
	printbuf_reset(&err);
	assert_int_equal(jt_read(&t, &r, &err), 0);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
	jt_cleanup(&t);
}

static void test_powercut_all_members_random(void **state)
{
	static const struct {
		unsigned nr, replicas;
	} cfg[] = { { 1, 1 }, { 2, 1 }, { 2, 2 }, { 3, 1 }, { 3, 2 } };
	unsigned seeds = getenv("TFS_LONG") ? 60 : 8;

	for (unsigned c = 0; c < ARRAY_SIZE(cfg); c++)
		for (unsigned seed = 1; seed <= seeds; seed++)
			rc_one(cfg[c].nr, cfg[c].replicas, seed);
	printf("all-member cuts: %u runs, %u with acknowledged commits, %u left untrusted "
	       "entries, %u had torn or corrupt entries\n",
	       rc_stats.runs, rc_stats.acked_runs, rc_stats.untrusted, rc_stats.torn);
	assert_true(rc_stats.acked_runs > rc_stats.runs / 2);
}

/* Journal writes in b's trace from index `from` on: how many, with PREFLUSH, with FUA; flushes. */
struct jt_ops {
	unsigned writes, preflush, fua, flushes;
};

static struct jt_ops trace_ops(struct tfs_bdev *b, unsigned from)
{
	struct jt_ops o = { 0 };

	for (unsigned i = from; i < tfs_faultdev_trace_nr(b); i++) {
		const struct tfs_fault_trace_entry *e = tfs_faultdev_trace_entry(b, i);

		if (e->mark || e->tag != TFS_TAG_journal)
			continue;
		if (e->op == TFS_OP_flush)
			o.flushes++;
		if (e->op != TFS_OP_write)
			continue;
		o.writes++;
		o.preflush += !!(e->flags & TFS_BIO_PREFLUSH);
		o.fua += !!(e->flags & TFS_BIO_FUA);
	}
	return o;
}

/*
 * Fails (at the caller's line) unless o counts exactly these journal
 * writes, FUA writes, PREFLUSH writes and flushes.
 */
#define expect_ops(o, writes, fua, preflush, flushes) \
	expect_ops_at(o, writes, fua, preflush, flushes, __FILE__, __LINE__)

static void expect_ops_at(struct jt_ops o, unsigned writes, unsigned fua, unsigned preflush,
			  unsigned flushes, const char *file, int line)
{
	if (o.writes == writes && o.fua == fua && o.preflush == preflush && o.flushes == flushes)
		return;
	print_error("journal ops: writes %u fua %u preflush %u flushes %u, "
		    "expected %u %u %u %u\n",
		    o.writes, o.fua, o.preflush, o.flushes, writes, fua, preflush, flushes);
	_fail(file, line);
}

/*
 * A flush entry issues a PREFLUSH only on members with a write not yet
 * flushed: flush entries back to back (each FUA) need none; after a NO_FLUSH
 * entry the next flush entry has one, on every member that took it.  One
 * and two members.  (Issue 10: one sync commit was a PREFLUSH and a FUA
 * write; the ordering rule still holds, and the power cut tests check it.)
 */
static void test_preflush_only_when_unflushed(void **state)
{
	for (unsigned nr = 1; nr <= 2; nr++) {
		struct jt t;
		unsigned mark[2];
		struct jt_ops o;

		jt_images(&t, nr, 8, 64 << 10);
		t.opts.metadata_replicas = nr;
		t.opts.write_delay_ms = 100000;
		t.opts.flush_delay_ms = 1000000;
		assert_int_equal(jt_start_fault(&t), 0);
		for (unsigned i = 0; i < nr; i++)
			mark[i] = tfs_faultdev_trace_nr(t.bdev[i]);
		assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit_pinned(&t, 1, 1, 0)), 0);
		for (u64 k = 2; k <= 3; k++)
			assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit(t.j, k, k, 0)), 0);
		for (unsigned i = 0; i < nr; i++) {
			o = trace_ops(t.bdev[i], mark[i]);
			expect_ops(o, 3, 3, 0, 0);
			mark[i] = tfs_faultdev_trace_nr(t.bdev[i]);
		}
		/* A NO_FLUSH entry, then a flush entry: that one preflushes. */
		s64 s = jt_commit(t.j, 4, 4, 0);

		jt_close_entry(t.j);
		assert_true(jt_wait_ondisk(t.j, s));
		assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit(t.j, 5, 5, 0)), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit(t.j, 6, 6, 0)), 0);
		for (unsigned i = 0; i < nr; i++) {
			o = trace_ops(t.bdev[i], mark[i]);
			expect_ops(o, 3, 2, 1, 0);
			assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[i]), 0);
		}
		tfs_journal_pin_drop(t.j, &t.log_pin);
		jt_stop(&t);
		jt_reread_expect_ids(&t, 6);
		jt_cleanup(&t);
	}
}

/* The journal's flush entries by kind (under its lock). */
struct pf_counts {
	u64 post, pre, fua, separate;
};

static struct pf_counts pf_counts(struct tfs_journal *j)
{
	struct pf_counts c;

	pthread_mutex_lock(&j->lock);
	c = (struct pf_counts){ j->nr_postflush_entries, j->nr_preflush_entries,
				j->nr_fua_only_entries, j->nr_separate_flushes };
	pthread_mutex_unlock(&j->lock);
	return c;
}

/* A write of one block outside the journal buckets (8 of 64 KiB) of member m, tagged tag. */
static void pf_write(struct jt *t, unsigned m, enum tfs_bio_tag tag)
{
	void *buf = tfs_bdev_alloc_buf(t->bdev[m], 4096);

	assert_non_null(buf);
	memset(buf, 0x5a, 4096);
	assert_int_equal(tfs_bdev_write(t->bdev[m], buf, 4096, 9 * (64 << 10), 0, tag), 0);
	free(buf);
	if (tag == TFS_TAG_data)
		tfs_journal_dev_written(t->j, t->devs[m].dev_idx, 4096);
}

/* Commits one key and waits for it to be durable (a flush entry with one waiter). */
static void pf_commit_flush(struct jt *t, u64 id)
{
	assert_int_equal(tfs_journal_flush_seq(t->j, jt_commit(t->j, id, id, 0)), 0);
}

/*
 * One member on the fault device, post-flush entries on (64 KiB of data),
 * no timer closing or flushing entries: started, one flush entry written.
 */
static void pf_start(struct jt *t)
{
	jt_images(t, 1, 8, 64 << 10);
	t->opts.write_delay_ms = 100000;
	t->opts.flush_delay_ms = 1000000;
	t->opts.post_flush_max_bytes = 64 << 10;
	assert_int_equal(jt_start_fault(t), 0);
	pf_commit_flush(t, 1);
}

/*
 * Post-flush entries (journal_io.c, journal_post_flush_ok()): a flush entry
 * an fsync waits on, after a data write, is written plain and flushed once
 * after -- unless a btree node (or superblock) write or a discard went to
 * the member since its last flush (the entry's last_seq may rest on it and
 * replay cannot check it), or more data than post_flush_max_bytes.  Then
 * the old PREFLUSH+FUA write.  The member's trace shows which ran.
 */
static void test_post_flush_fallback_meta_write(void **state)
{
	struct jt t;
	struct pf_counts c0, c;
	unsigned mark;
	struct jt_ops o;

	pf_start(&t);

	/* Data, then the commit: one plain journal write, one flush after it. */
	for (unsigned round = 0; round < 2; round++) {
		c0 = pf_counts(t.j);
		mark = tfs_faultdev_trace_nr(t.bdev[0]);
		pf_write(&t, 0, TFS_TAG_data);
		pf_commit_flush(&t, 2 + round);
		o = trace_ops(t.bdev[0], mark);
		c = pf_counts(t.j);
		expect_ops(o, 1, 0, 0, 1);
		assert_int_equal(c.post - c0.post, 1);
		assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[0]), 0);
	}

	/* A node write since the last flush: PREFLUSH + FUA, no flush after. */
	static const enum tfs_bio_tag meta[] = { TFS_TAG_btree, TFS_TAG_sb };

	for (unsigned k = 0; k < ARRAY_SIZE(meta); k++) {
		c0 = pf_counts(t.j);
		mark = tfs_faultdev_trace_nr(t.bdev[0]);
		pf_write(&t, 0, meta[k]);
		pf_write(&t, 0, TFS_TAG_data);
		pf_commit_flush(&t, 10 + k);
		o = trace_ops(t.bdev[0], mark);
		c = pf_counts(t.j);
		expect_ops(o, 1, 1, 1, 0);
		assert_int_equal(c.post, c0.post);
		assert_int_equal(c.pre - c0.pre, 1);
	}
	/* That preflush covered the node write: post-flush again. */
	c0 = pf_counts(t.j);
	pf_write(&t, 0, TFS_TAG_data);
	pf_commit_flush(&t, 20);
	assert_int_equal(pf_counts(t.j).post - c0.post, 1);

	/* More data since the last flush than replay is asked to read back: preflush. */
	c0 = pf_counts(t.j);
	for (unsigned i = 0; i < 17; i++)
		pf_write(&t, 0, TFS_TAG_data);
	pf_commit_flush(&t, 21);
	c = pf_counts(t.j);
	assert_int_equal(c.post, c0.post);
	assert_int_equal(c.pre - c0.pre, 1);

	/* Stop's last flush entry is never a post-flush one (nothing to check at the next start). */
	pf_write(&t, 0, TFS_TAG_data);
	c0 = pf_counts(t.j);
	jt_commit(t.j, 22, 22, 0);
	assert_int_equal(tfs_journal_stop(t.j), 0);
	c = pf_counts(t.j);
	assert_int_equal(c.post, c0.post);
	assert_int_equal(c.pre - c0.pre, 1);
	jt_cleanup(&t);
}

/*
 * tfs_journal_flush_seq_inline() (an fsync's): the post-flush entry it
 * writes has its write and flush run in the waiting thread, and its
 * completion too -- the same I/O as through the completion thread (one
 * plain write, one flush after), the same result, and a failing flush
 * fails the entry as before: err_seq is that seq, the waiter gets the
 * journal's error.  tfs_journal_flush_seq() keeps the completion thread.
 */
static void test_post_flush_inline(void **state)
{
	struct jt t;
	struct pf_counts c0;
	unsigned mark;
	u64 inl, seq;

	pf_start(&t);

	for (unsigned round = 0; round < 2; round++) {
		c0 = pf_counts(t.j);
		inl = t.j->nr_postflush_inline;
		mark = tfs_faultdev_trace_nr(t.bdev[0]);
		pf_write(&t, 0, TFS_TAG_data);
		seq = jt_commit(t.j, 2 + round, 2 + round, 0);
		if (round)
			assert_int_equal(tfs_journal_flush_seq(t.j, seq), 0);
		else
			assert_int_equal(tfs_journal_flush_seq_inline(t.j, seq), 0);
		expect_ops(trace_ops(t.bdev[0], mark), 1, 0, 0, 1);
		assert_int_equal(pf_counts(t.j).post - c0.post, 1);
		assert_int_equal(t.j->nr_postflush_inline - inl, !round);
		assert_true(tfs_journal_flushed_seq_ondisk(t.j) >= seq);
		assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[0]), 0);
	}

	/* Its flush failing: the entry failed, the waiter told, err_seq that seq. */
	assert_int_equal(jt_add_rule(t.bdev[0], "flush nth=1 fail=EIO"), 0);
	inl = t.j->nr_postflush_inline;
	pf_write(&t, 0, TFS_TAG_data);
	seq = jt_commit(t.j, 5, 5, 0);
	assert_int_equal(tfs_journal_flush_seq_inline(t.j, seq), -TFS_ERR_journal_write);
	assert_int_equal(t.j->nr_postflush_inline - inl, 1);
	assert_int_equal(tfs_journal_err_seq(t.j), seq);
	assert_true(tfs_journal_flushed_seq_ondisk(t.j) < seq);
	tfs_journal_stop(t.j);
	jt_cleanup(&t);
}

/*
 * Two members: the post-flush flushes only the entry's member, so it is used
 * only when that member holds every unflushed entry and data write.  Data on
 * the other member (replicas 1): its separate flush first, then FUA.
 * Entries on both members (replicas 2): PREFLUSH on both.
 */
static void test_post_flush_fallback_two_members(void **state)
{
	for (unsigned replicas = 1; replicas <= 2; replicas++) {
		struct jt t;
		struct pf_counts c0, c;
		unsigned mark[2];

		jt_images(&t, 2, 8, 64 << 10);
		t.opts.metadata_replicas = replicas;
		t.opts.write_delay_ms = 100000;
		t.opts.flush_delay_ms = 1000000;
		t.opts.post_flush_max_bytes = 1 << 20;
		assert_int_equal(jt_start_fault(&t), 0);
		pf_commit_flush(&t, 1);

		/* Data on both members (a replicated write). */
		c0 = pf_counts(t.j);
		for (unsigned m = 0; m < 2; m++) {
			mark[m] = tfs_faultdev_trace_nr(t.bdev[m]);
			pf_write(&t, m, TFS_TAG_data);
		}
		pf_commit_flush(&t, 2);
		c = pf_counts(t.j);
		assert_int_equal(c.post, c0.post);
		if (replicas == 1) {
			/* The entry goes to one member; the other is flushed first. */
			assert_int_equal(c.separate - c0.separate, 1);
		} else {
			assert_int_equal(c.pre - c0.pre, 1);
			for (unsigned m = 0; m < 2; m++) {
				expect_ops(trace_ops(t.bdev[m], mark[m]), 1, 1, 1, 0);
			}
		}
		for (unsigned m = 0; m < 2; m++)
			assert_int_equal(tfs_faultdev_nr_unflushed(t.bdev[m]), 0);

		if (replicas == 1) {
			/*
			 * Entries on dev 0 only (dev 1 takes no journal writes):
			 * data there, one flush after the entry does; data on
			 * dev 1, that member is flushed first.
			 */
			assert_int_equal(tfs_journal_dev_set_writable(t.j, 1, false), 0);
			c0 = pf_counts(t.j);
			pf_write(&t, 0, TFS_TAG_data);
			pf_commit_flush(&t, 3);
			c = pf_counts(t.j);
			assert_int_equal(c.post - c0.post, 1);
			pf_write(&t, 1, TFS_TAG_data);
			pf_commit_flush(&t, 4);
			c0 = c;
			c = pf_counts(t.j);
			assert_int_equal(c.post, c0.post);
			assert_int_equal(c.separate - c0.separate, 1);
			assert_int_equal(tfs_journal_dev_set_writable(t.j, 1, true), 0);
		}
		jt_stop(&t);
		jt_cleanup(&t);
	}
}

/* The key id pf_check() calls bad (0: none); how many keys it saw. */
static u64 pf_bad_id;

static int pf_check(void *ctx, u64 seq, unsigned btree_id, unsigned level, const __le64 *k)
{
	unsigned *calls = ctx;

	(*calls)++;
	return (le64_to_cpu(k[0]) >> 32) == pf_bad_id;
}

/*
 * The read side: a post-flush newest entry is kept when the check passes on
 * every key of its window, and dropped (replay ends at the flush entry
 * before it, the rest blacklisted) when one fails.
 */
static void test_post_flush_read_check(void **state)
{
	struct printbuf err = PRINTBUF;
	struct tfs_journal_read *r;
	struct jt t;
	s64 s1, s2;

	jt_images(&t, 1, 8, 64 << 10);
	t.opts.write_delay_ms = 100000;
	t.opts.flush_delay_ms = 1000000;
	t.opts.post_flush_max_bytes = 1 << 20;
	assert_int_equal(jt_start(&t), 0);
	s1 = jt_commit_pinned(&t, 1, 1, 0);
	assert_int_equal(tfs_journal_flush_seq(t.j, s1), 0);
	tfs_journal_dev_written(t.j, 0, 4096);
	s2 = jt_commit(t.j, 2, 2, 0);
	assert_int_equal(jt_commit(t.j, 3, 3, 0), s2);
	assert_int_equal(tfs_journal_flush_seq(t.j, s2), 0);
	assert_int_equal(pf_counts(t.j).post, 1);
	tfs_journal_pin_drop(t.j, &t.log_pin);
	jt_stop(&t);
	assert_int_equal(jt_open_bdevs(&t), 0);

	for (pf_bad_id = 0; pf_bad_id <= 3; pf_bad_id += 3) {
		struct jt_model m = { 0 };
		unsigned calls = 0;

		assert_int_equal(jt_read(&t, &r, &err), 0);
		assert_int_equal(r->newest_seq, s2);
		assert_int_equal(tfs_journal_read_verify_tail(r, pf_check, &calls, &err), 0);
		/* Keys 2 and 3: the window is the entry after s1. */
		assert_int_equal(calls, 2);
		assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
		assert_int_equal(m.val[1], 1);
		if (!pf_bad_id) {
			assert_int_equal(r->post_flush_verified, s2);
			assert_int_equal(r->post_flush_dropped, 0);
			assert_int_equal(m.val[2], 2);
			assert_int_equal(m.val[3], 3);
		} else {
			assert_int_equal(r->post_flush_dropped, s2);
			assert_int_equal(r->newest_seq, s1);
			assert_int_equal(r->blacklist_start, s1 + 1);
			assert_int_equal(m.val[2], 0);
			assert_int_equal(m.val[3], 0);
		}
		tfs_journal_read_free(r);
	}
	printbuf_exit(&err);
	jt_cleanup(&t);
}

struct gc_thread {
	struct tfs_journal *j;
	unsigned id, commits;
	int ret;
	pthread_t thread;
};

static void *gc_fn(void *arg)
{
	struct gc_thread *g = arg;

	for (unsigned i = 0; i < g->commits && !g->ret; i++) {
		s64 s = jt_commit(g->j, g->id, i + 1, 0);

		g->ret = s < 0 ? (int)s : tfs_journal_flush_seq(g->j, s);
	}
	return NULL;
}

/*
 * Group commit: four threads each committing and flushing, on members whose
 * flushes are slow, share flush entries: far fewer flush entries than
 * commits.  Counts only.
 */
static void test_group_commit_shares_flushes(void **state)
{
	enum {
		NT = 4,
		COMMITS = 40
	};

	for (unsigned nr = 1; nr <= 2; nr++) {
		struct jt t;
		struct gc_thread g[NT];

		jt_images(&t, nr, 8, 64 << 10);
		t.opts.metadata_replicas = nr;
		t.opts.metadata_replicas_required = nr;
		t.opts.write_delay_ms = 100000;
		t.opts.flush_delay_ms = 1000000;
		assert_int_equal(jt_start_fault(&t), 0);
		for (unsigned i = 0; i < nr; i++)
			assert_int_equal(jt_add_rule(t.bdev[i], "fua tag=journal always delay=2"),
					 0);
		for (unsigned i = 0; i < NT; i++) {
			g[i] = (struct gc_thread){ .j = t.j, .id = i + 1, .commits = COMMITS };
			assert_int_equal(pthread_create(&g[i].thread, NULL, gc_fn, &g[i]), 0);
		}
		for (unsigned i = 0; i < NT; i++) {
			pthread_join(g[i].thread, NULL);
			assert_int_equal(g[i].ret, 0);
		}
		pthread_mutex_lock(&t.j->lock);
		u64 flushes = t.j->nr_flush_entries;
		pthread_mutex_unlock(&t.j->lock);

		printf("%u member(s): %u commits, %llu flush entries\n", nr, NT * COMMITS,
		       (unsigned long long)flushes);
		/* (One flush at a time, alternating, gave about 2 commits each.) */
		assert_true(flushes * 5 <= NT * COMMITS * 2);
		jt_stop(&t);
		jt_reread_expect_ids(&t, 0);
		jt_cleanup(&t);
	}
}

/*
 * A restart flushes every member before writing (what was read may be only
 * in a volatile cache).  A member whose flush fails takes no journal writes:
 * with another member the journal goes on there; with none, reservations
 * answer insufficient_devices (EROFS), nothing fails.
 */
static void test_start_flush_fails(void **state)
{
	for (unsigned nr = 1; nr <= 2; nr++) {
		struct jt t;
		struct tfs_journal_read *r;
		struct tfs_journal_res res;
		struct printbuf err = PRINTBUF;

		jt_images(&t, nr, 8, 64 << 10);
		assert_int_equal(jt_start(&t), 0);
		assert_int_equal(tfs_journal_flush_seq(t.j, jt_commit_pinned(&t, 1, 1, 0)), 0);
		tfs_journal_pin_drop(t.j, &t.log_pin);
		jt_stop(&t);

		assert_int_equal(jt_open_bdevs(&t), 0);
		assert_int_equal(jt_wrap_faultdevs(&t), 0);
		assert_int_equal(jt_add_rule(t.bdev[0], "flush nth=1 fail=EIO"), 0);
		assert_int_equal(jt_read(&t, &r, &err), 0);
		assert_int_equal(jt_init_start(&t, r), 0);
		assert_int_equal(tfs_faultdev_rule_fired(t.bdev[0], 0), 1);
		if (nr == 1) {
			int ret = tfs_journal_res_get(t.j, &res, 3, 0);

			assert_int_equal(ret, -TFS_ERR_insufficient_devices);
			assert_int_equal(tfs_journal_error(t.j), 0);
		} else {
			u64 w0 = tfs_faultdev_nr_writes(t.bdev[0]);
			s64 s = jt_commit(t.j, 2, 2, 0);

			assert_int_equal(tfs_journal_flush_seq(t.j, s), 0);
			assert_int_equal(tfs_faultdev_nr_writes(t.bdev[0]), w0);
		}
		tfs_journal_read_free(r);
		printbuf_exit(&err);
		jt_cleanup(&t);
	}
}

/* The magic mixes all 16 uuid bytes: swapped or equal halves differ. */
static void test_magic_mixes_uuid(void **state)
{
	u8 a[16], swapped[16], zero[16] = { 0 }, ones[16];

	for (unsigned i = 0; i < 16; i++)
		a[i] = (u8)(0x40 + i);
	memcpy(swapped, a + 8, 8);
	memcpy(swapped + 8, a, 8);
	memset(ones, 0x11, sizeof(ones));
	assert_int_not_equal(tfs_jset_magic(a), tfs_jset_magic(swapped));
	assert_int_not_equal(tfs_jset_magic(zero), tfs_jset_magic(ones));
	assert_int_not_equal(tfs_jset_magic(zero), TFS_JSET_MAGIC);
	assert_int_not_equal(tfs_jset_magic(ones), TFS_JSET_MAGIC);
	/* Stable: the on-disk format depends on it (docs/on-disk-format.md). */
	assert_int_equal(tfs_jset_magic(a), tfs_jset_magic(a));
	u32 lo = tfs_crc32c(0, a, 16), hi = tfs_crc32c(lo, a, 16);

	assert_int_equal(tfs_jset_magic(a), TFS_JSET_MAGIC ^ ((u64)hi << 32 | lo));
}

/*
 * The idle flush entry (journal_idle_flush_locked()) comes once after the
 * last NO_FLUSH entries, then the journal stays quiet: with both members,
 * and with one of two failed (replicas 2, required 1), it must not write a
 * flush entry every flush_delay_ms forever.
 */
static void idle_quiet_one(bool fail_member)
{
	struct jt t;
	s64 s = 0;

	jt_images(&t, 2, 8, 64 << 10);
	t.opts.metadata_replicas = 2;
	t.opts.metadata_replicas_required = 1;
	t.opts.flush_delay_ms = 20;
	assert_int_equal(jt_start_fault(&t), 0);
	if (fail_member)
		assert_int_equal(jt_add_rule(t.bdev[1], "write tag=journal every=1 fail=EIO"), 0);
	for (unsigned i = 0; i < 5; i++) {
		s = jt_commit(t.j, i, i, 0);
		assert_true(s > 0);
		jt_pin_log(&t, s);
		usleep(5000);
	}
	/* The idle flush entry makes s durable without anyone asking. */
	assert_true(jt_poll(tfs_journal_flushed_seq_ondisk(t.j) >= (u64)s, 2000));
	usleep(100 * 1000);
	u64 w0 = writes_submitted(t.bdev[0]), seq0 = tfs_journal_seq_ondisk(t.j);

	/* 25 flush_delay_ms of idleness: nothing more to write. */
	usleep(500 * 1000);
	assert_int_equal(writes_submitted(t.bdev[0]), w0);
	assert_int_equal(tfs_journal_seq_ondisk(t.j), seq0);
	assert_int_equal(tfs_journal_err_seq(t.j), 0);
	jt_stop(&t);
	jt_cleanup(&t);
}

static void test_idle_flush_then_quiet(void **state)
{
	idle_quiet_one(false);
	idle_quiet_one(true);
}
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_err_seq_out_of_order),
		cmocka_unit_test(test_err_seq_flush_fails),
		cmocka_unit_test(test_replicas),
		cmocka_unit_test(test_corrupt_entry),
		cmocka_unit_test(test_validate_mutations),
		cmocka_unit_test(test_powercut_every_write),
		cmocka_unit_test(test_magic_mixes_uuid),
		cmocka_unit_test(test_read_error_fails_read),
		cmocka_unit_test(test_read_error_printed_once),
		cmocka_unit_test(test_flush_reaches_unwritable_member),
		cmocka_unit_test(test_read_absurd_span),
		cmocka_unit_test(test_flush_entry_after_member_flushes),
		cmocka_unit_test(test_unneeded_member_flush_fails),
		cmocka_unit_test(test_flush_seq_untrusted_after_recovery),
		cmocka_unit_test(test_powercut_all_members_random),
		cmocka_unit_test(test_preflush_only_when_unflushed),
		cmocka_unit_test(test_post_flush_fallback_meta_write),
		cmocka_unit_test(test_post_flush_fallback_two_members),
		cmocka_unit_test(test_post_flush_inline),
		cmocka_unit_test(test_post_flush_read_check),
		cmocka_unit_test(test_group_commit_shares_flushes),
		cmocka_unit_test(test_start_flush_fails),
		cmocka_unit_test(test_idle_flush_then_quiet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
