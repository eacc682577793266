/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_UNIT_JOURNAL_TEST_H
#define TFS_TESTS_UNIT_JOURNAL_TEST_H

/*
 * Shared by the journal's unit tests: image files under a mkdtemp()
 * directory, journals over them, and a tiny key model (a key is two words:
 * u64s=2 and an id in the first, a value in the second).
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/faultdev.h"
#include "lib/printbuf.h"

#include "fault_test.h"
#include "scratch_dir.h"

#define JT_MAX_DEVS 4
#define JT_MAX_BUCKETS 256

struct jt {
	char dir[160];
	char path[JT_MAX_DEVS][200];
	struct tfs_bdev *bdev[JT_MAX_DEVS];
	u64 buckets[JT_MAX_BUCKETS];
	struct tfs_journal_dev devs[JT_MAX_DEVS];
	unsigned nr_devs;
	struct tfs_journal_opts opts;
	struct tfs_journal *j;
	/* Tests that replay everything keep seq 1 pinned (no flush callback). */
	struct tfs_journal_entry_pin log_pin;
};

/* Keeps every seq from seq on replayable: last_seq stays at or below it. */
static inline void jt_pin_log(struct jt *t, u64 seq)
{
	tfs_journal_pin_add(t->j, seq, &t->log_pin, NULL);
}

static inline void jt_opts(struct tfs_journal_opts *o)
{
	tfs_journal_opts_default(o);
	for (unsigned i = 0; i < 16; i++)
		o->uuid[i] = (u8)(0x40 + i);
	o->max_entry_size = 16 << 10;
	o->write_delay_ms = 2;
}

/*
 * Where image files go: $TFS_TEST_DIR, else /dev/shm when there is one (the
 * tests flush a lot; on tmpfs a flush costs nothing, the fault device still
 * models what a flush makes durable), else /tmp.
 */
static inline const char *jt_tmpdir(void)
{
	const char *d = getenv("TFS_TEST_DIR");

	if (d && *d)
		return d;
	return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* nr image files, each with nr_buckets journal buckets of bucket_size from bucket 1. */
static inline void jt_images(struct jt *t, unsigned nr, unsigned nr_buckets, u32 bucket_size)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "%s/tfs-journal-XXXXXX", jt_tmpdir());
	scratch_dir_make(t->dir);
	for (unsigned b = 0; b < nr_buckets; b++)
		t->buckets[b] = b + 1;
	t->nr_devs = nr;
	for (unsigned i = 0; i < nr; i++) {
		snprintf(t->path[i], sizeof(t->path[i]), "%s/img%u", t->dir, i);
		int fd = open(t->path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);

		if (fd < 0 || ftruncate(fd, (off_t)(nr_buckets + 2) * bucket_size))
			abort();
		close(fd);
		t->devs[i] = (struct tfs_journal_dev){
			.dev_idx = i,
			.bucket_size = bucket_size,
			.buckets = t->buckets,
			.nr_buckets = nr_buckets,
			.writable = true,
		};
	}
	jt_opts(&t->opts);
}

static inline int jt_open_bdevs(struct jt *t)
{
	for (unsigned i = 0; i < t->nr_devs; i++) {
		int ret = tfs_bdev_open(t->path[i], TFS_BDEV_BUFFERED, &t->bdev[i]);

		if (ret)
			return ret;
		t->devs[i].bdev = t->bdev[i];
	}
	return 0;
}

/* Stacks a fault device over every opened bdev (owning it). */
static inline int jt_wrap_faultdevs(struct jt *t)
{
	for (unsigned i = 0; i < t->nr_devs; i++) {
		struct tfs_bdev *f;
		int ret = tfs_faultdev_create(t->bdev[i], true, &f);

		if (ret)
			return ret;
		t->bdev[i] = f;
		t->devs[i].bdev = f;
	}
	return 0;
}

static inline int jt_init_start(struct jt *t, const struct tfs_journal_read *r)
{
	struct printbuf err = PRINTBUF;
	int ret = tfs_journal_init(&t->j, t->devs, t->nr_devs, &t->opts, &err)
			  ?: tfs_journal_start(t->j, r);

	tfs_journal_pin_init(&t->log_pin);
	if (ret)
		fprintf(stderr, "jt_init_start: %s: %s\n", tfs_err_str(ret), printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}

/* Opens the bdevs, each under a fault device, and a fresh, started journal. */
static inline int jt_start_fault(struct jt *t)
{
	return jt_open_bdevs(t) ?: jt_wrap_faultdevs(t) ?: jt_init_start(t, NULL);
}

/* Opens the bdevs and a fresh, started journal. */
static inline int jt_start(struct jt *t)
{
	struct printbuf err = PRINTBUF;
	int ret = jt_open_bdevs(t) ?: tfs_journal_init(&t->j, t->devs, t->nr_devs, &t->opts, &err)
						  ?: tfs_journal_start(t->j, NULL);

	tfs_journal_pin_init(&t->log_pin);
	if (ret)
		fprintf(stderr, "jt_start: %s: %s\n", tfs_err_str(ret), printbuf_str(&err));
	printbuf_exit(&err);
	return ret;
}

static inline void jt_close_bdevs(struct jt *t)
{
	for (unsigned i = 0; i < t->nr_devs; i++) {
		if (t->bdev[i])
			tfs_bdev_close(t->bdev[i]);
		t->bdev[i] = NULL;
		t->devs[i].bdev = NULL;
	}
}

static inline void jt_stop(struct jt *t)
{
	tfs_journal_exit(t->j);
	t->j = NULL;
	jt_close_bdevs(t);
}

static inline void jt_cleanup(struct jt *t)
{
	jt_stop(t);
	scratch_dir_remove(t->dir);
}

/* Commits one key (id, value); returns its seq, or a negative code. */
static inline s64 jt_commit(struct tfs_journal *j, u64 id, u64 value, unsigned flags)
{
	struct tfs_journal_res res;
	int ret = tfs_journal_res_get(j, &res, tfs_jset_entry_u64s(2), flags);

	if (ret)
		return ret;
	__le64 *k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 2);

	k[0] = cpu_to_le64(2 | (id << 32));
	k[1] = cpu_to_le64(value);
	tfs_journal_res_put(j, &res);
	return (s64)res.seq;
}

/* Commits one key of 2 + pad words (id, value, padding). */
static inline s64 jt_commit_big(struct tfs_journal *j, u64 id, u64 value, unsigned pad,
				unsigned flags)
{
	struct tfs_journal_res res;
	int ret = tfs_journal_res_get(j, &res, tfs_jset_entry_u64s(2 + pad), flags);

	if (ret)
		return ret;
	__le64 *k = tfs_journal_res_add_entry(j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 2 + pad);

	k[0] = cpu_to_le64((2 + pad) | (id << 32));
	k[1] = cpu_to_le64(value);
	for (unsigned i = 0; i < pad; i++)
		k[2 + i] = cpu_to_le64(value * 7 + i);
	tfs_journal_res_put(j, &res);
	return (s64)res.seq;
}

/* Waits (bounded) until seq_ondisk reaches s; false if it never does. */
static inline bool jt_wait_ondisk(struct tfs_journal *j, u64 s)
{
	for (int i = 0; i < 50000 && tfs_journal_seq_ondisk(j) < s; i++)
		usleep(100);
	return tfs_journal_seq_ondisk(j) >= s;
}

/* Arms one fault rule on a fault device; the rule text must parse. */
static inline int jt_add_rule(struct tfs_bdev *b, const char *words)
{
	int ret = fault_test_add_rule(b, words);

	return ret < 0 ? ret : 0;
}

/*
 * Commits a key of 2 + pad words and pins its seq with t->log_pin (no flush
 * callback) while the reservation is still held, as an object would.
 */
static inline s64 jt_commit_pinned(struct jt *t, u64 id, u64 value, unsigned pad)
{
	struct tfs_journal_res res;
	int ret = tfs_journal_res_get(t->j, &res, tfs_jset_entry_u64s(2 + pad), 0);

	if (ret)
		return ret;
	tfs_journal_pin_add(t->j, res.seq, &t->log_pin, NULL);
	__le64 *k = tfs_journal_res_add_entry(t->j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 2 + pad);

	k[0] = cpu_to_le64((2 + pad) | (id << 32));
	k[1] = cpu_to_le64(value);
	for (unsigned i = 0; i < pad; i++)
		k[2 + i] = cpu_to_le64(value * 7 + i);
	tfs_journal_res_put(t->j, &res);
	return (s64)res.seq;
}

/* Reads the journal on t's (re)opened devices. */
static inline int jt_read(struct jt *t, struct tfs_journal_read **r, struct printbuf *err)
{
	return tfs_journal_read(t->devs, t->nr_devs, &t->opts, r, err);
}

/* Replay model: value per id, plus the seq of the last key applied. */
#define JT_MAX_IDS 64
struct jt_model {
	u64 val[JT_MAX_IDS];
	u64 last_seq_applied;
	u64 nr_keys;
	bool out_of_order;
	u64 order[4096]; /* values, in replay order */
	u64 order_seq[4096];
	unsigned nr_order;
};

static inline int jt_model_key(void *ctx, u64 seq, unsigned btree_id, unsigned level,
			       const __le64 *k)
{
	struct jt_model *m = ctx;
	u64 id = le64_to_cpu(k[0]) >> 32;

	if (seq < m->last_seq_applied)
		m->out_of_order = true;
	m->last_seq_applied = seq;
	m->val[id % JT_MAX_IDS] = le64_to_cpu(k[1]);
	m->nr_keys++;
	if (m->nr_order < 4096) {
		m->order_seq[m->nr_order] = seq;
		m->order[m->nr_order++] = le64_to_cpu(k[1]);
	}
	return 0;
}

static const struct tfs_journal_replay_ops jt_model_ops = { .key = jt_model_key };

/*
 * Reopens t's devices, reads and replays the journal into a fresh model, and
 * checks that ids 1..n hold the values they were committed with (value = id).
 */
static inline void jt_reread_expect_ids(struct jt *t, unsigned n)
{
	static struct jt_model m; /* large: not on the stack */
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	int ret;

	memset(&m, 0, sizeof(m));
	assert_int_equal(jt_open_bdevs(t), 0);
	ret = jt_read(t, &r, &err);
	if (ret)
		fail_msg("journal read: %s: %s", tfs_err_str(ret), printbuf_str(&err));
	assert_int_equal(tfs_journal_replay(r, &jt_model_ops, &m), 0);
	for (unsigned i = 1; i <= n; i++)
		assert_int_equal(m.val[i], i);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
}

/* flush_seq() on another thread, so the test can act while it waits. */
struct jt_flusher {
	struct tfs_journal *j;
	u64 seq;
	int ret, done;
	pthread_t thread;
};

static inline void *jt_flusher_fn(void *arg)
{
	struct jt_flusher *f = arg;

	f->ret = tfs_journal_flush_seq(f->j, f->seq);
	__atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static inline void jt_flusher_start(struct jt_flusher *f, struct tfs_journal *j, u64 seq)
{
	*f = (struct jt_flusher){ .j = j, .seq = seq };
	if (pthread_create(&f->thread, NULL, jt_flusher_fn, f))
		abort();
}

static inline int jt_flusher_join(struct jt_flusher *f)
{
	pthread_join(f->thread, NULL);
	return f->ret;
}

/* Closes the open entry without asking for a flush (it goes out NO_FLUSH). */
static inline void jt_close_entry(struct tfs_journal *j)
{
	tfs_journal_block(j);
	tfs_journal_unblock(j);
}

/* Polls cond (an expression) every 100 us, at most `ms` milliseconds. */
#define jt_poll(cond, ms)                                               \
	({                                                              \
		for (unsigned __i = 0; __i < (ms)*10 && !(cond); __i++) \
			usleep(100);                                    \
		(bool)(cond);                                           \
	})

#endif /* TFS_TESTS_UNIT_JOURNAL_TEST_H */
