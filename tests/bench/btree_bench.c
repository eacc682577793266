// SPDX-License-Identifier: GPL-2.0
/*
 * btree_bench: the tinyfs btree against LMDB and SQLite, side by side in one
 * run, with files in one directory (the same disk), 16-byte keys and
 * 64-byte values.  Built, never run by `meson test`: it prints figures and
 * asserts nothing about speed (it does check that every engine returns what
 * was stored).
 *
 *	btree_bench [-d DIR] [-n KEYS] [-c COMMITS] [-m CACHE_MiB] [-i] [-t THREADS] [-T]
 *
 * Workloads, each timed on its own:
 *  - insert: KEYS (default 1M) random keys in transactions of 100.  Not
 *    durable per transaction in any engine -- tinyfs commits without a
 *    journal flush, LMDB with MDB_NOSYNC, SQLite in WAL mode with
 *    synchronous=NORMAL -- and each ends with one sync (tfs_fs_flush_seq,
 *    mdb_env_sync, a WAL checkpoint), which is timed too;
 *  - lookup: KEYS point lookups of existing keys in random order, warm
 *    (everything was just written or read);
 *  - scan: every key in order;
 *  - durable: COMMITS (default 10k) transactions of one new key, each
 *    durable before the next starts (tfs_fs_flush_seq of the commit's seq;
 *    LMDB's synced commit; SQLite synchronous=FULL).
 * tinyfs's keys go in the dirents btree (not cached by the key cache: this
 * measures the btree itself); -i repeats the lookups on the inodes btree,
 * through the key cache.  The tinyfs image is DIR/tinyfs.img (1 GiB, every
 * byte written once first, like journal_bench's images: no hole), formatted
 * as mkfs.tinyfs does; CACHE_MiB (default 512) is opts.cache_budget.
 *
 * Memory: the resident set is printed before the tinyfs run (the key
 * arrays and libraries: the fixed part) and at its peak, with the shrinker
 * registry's to_text (the caches' shared count and its highest value).
 *
 * -t THREADS adds a parallel phase on the tinyfs dirents btree after the
 * others: for 1, 2, 4 ... THREADS threads, 2 s each of 9 point lookups to 1
 * single-key commit (not durable), like the FUSE daemon's workers on one
 * directory; prints ops/s, how often and how long the tree's six lock
 * made a thread wait in each mode (read: lookups; intent: commits, before
 * they plan; write: commits, waiting for readers to leave;
 * tfs_btree_to_text's lock waits) and the commits' restarts.
 * -T runs tinyfs only (no LMDB, no SQLite).
 */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../unit/fs_test.h"
#include "fs/btree_key_cache.h"

#define VAL_BYTES 64
#define TXN_KEYS 100

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keys: two random words, stored big-endian for LMDB and SQLite (memcmp order). */
struct key {
	u64 a, b;
};

static u64 rng = 0x9e3779b97f4a7c15ULL;

static u64 rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void key_bytes(const struct key *k, u8 out[16])
{
	for (unsigned i = 0; i < 8; i++) {
		out[i] = (u8)(k->a >> (56 - 8 * i));
		out[8 + i] = (u8)(k->b >> (56 - 8 * i));
	}
}

static void val_bytes(const struct key *k, u8 out[VAL_BYTES])
{
	for (unsigned i = 0; i < VAL_BYTES / 8; i++) {
		u64 v = k->a * (i + 1) ^ k->b;

		memcpy(out + 8 * i, &v, 8);
	}
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "btree_bench: %s: %s\n", what, why);
	exit(1);
}

enum {
	W_INSERT,
	W_SYNC,
	W_LOOKUP,
	W_SCAN,
	W_DURABLE,
	W_LOOKUP_KC,
	W_NR
};
static const char *const w_names[W_NR] = {
	"insert (txn of 100) keys/s", "  then one sync (s)",
	"lookup (warm) keys/s",	      "scan keys/s",
	"durable commits/s",	      "lookup inodes (key cache)/s",
};

enum {
	E_TINYFS,
	E_LMDB,
	E_SQLITE,
	E_NR
};

static double result[E_NR][W_NR];

struct opts {
	const char *dir;
	unsigned nr, commits, threads;
	u64 cache;
	bool inodes, tinyfs_only;
};

/* VmRSS of this process now, in MiB (0 if /proc cannot say). */
static double rss_mib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kib = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtod(line + 6, NULL);
	fclose(f);
	return kib / 1024;
}

/* --- tinyfs --- */

static void tfs_key(struct tfs_bkey_buf *buf, const struct key *k)
{
	u8 *v = tfs_bkey_init(buf, TFS_BKEY_cookie, TFS_POS(k->a, k->b), VAL_BYTES);

	val_bytes(k, v);
}

static void tfs_check(int ret, const char *what)
{
	if (ret)
		die(what, tfs_err_str(ret));
}

static void tfs_insert(struct tfs_fs *fs, enum tfs_btree_id id, const struct key *keys, unsigned nr,
		       u64 *last_seq)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;

	tfs_trans_init(&trans, fs);
	for (unsigned i = 0; i < nr; i += TXN_KEYS) {
		for (unsigned j = i; j < nr && j < i + TXN_KEYS; j++) {
			tfs_key(&buf, &keys[j]);
			tfs_check(tfs_trans_update(&trans, id, &buf.k), "tinyfs update");
		}
		tfs_check(tfs_trans_commit(&trans, 0, last_seq), "tinyfs commit");
	}
	tfs_trans_exit(&trans);
}

static void tfs_lookups(struct tfs_fs *fs, enum tfs_btree_id id, const struct key *keys,
			const unsigned *order, unsigned nr)
{
	struct tfs_bkey_buf buf;
	u8 v[VAL_BYTES];

	for (unsigned i = 0; i < nr; i++) {
		const struct key *k = &keys[order[i]];

		tfs_check(tfs_btree_lookup(fs, id, TFS_POS(k->a, k->b), &buf), "tinyfs lookup");
		val_bytes(k, v);
		if (memcmp(tfs_bkey_val(&buf.k), v, VAL_BYTES))
			die("tinyfs lookup", "wrong value");
	}
}

/* --- the parallel phase (-t) --- */

struct par_thread {
	pthread_t tid;
	struct tfs_fs *fs;
	const struct key *keys;
	unsigned nr, id;
	volatile bool *stop;
	u64 ops;
};

static void *par_worker(void *arg)
{
	struct par_thread *p = arg;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	u64 x = 0x2545f4914f6cdd1dULL * (p->id + 1);

	tfs_fs_thread_init();
	tfs_trans_init(&trans, p->fs);
	while (!*p->stop) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (x % 10) {
			const struct key *k = &p->keys[x % p->nr];

			tfs_check(tfs_btree_lookup(p->fs, TFS_BTREE_dirents, TFS_POS(k->a, k->b),
						   &buf),
				  "tinyfs parallel lookup");
		} else {
			/* A new key of this thread's own (even a, unlike the loaded keys). */
			struct key k = { (x | 1) ^ 1, p->ops };

			tfs_key(&buf, &k);
			tfs_check(tfs_trans_update(&trans, TFS_BTREE_dirents, &buf.k)
					  ?: tfs_trans_commit(&trans, 0, NULL),
				  "tinyfs parallel commit");
		}
		p->ops++;
	}
	tfs_trans_exit(&trans);
	return NULL;
}

static void run_parallel(const struct opts *o, struct tfs_fs *fs, const struct key *keys)
{
	struct tfs_btree *b = &fs->btrees[TFS_BTREE_dirents];
	const double secs = 2;

	printf("parallel: 9 lookups to 1 commit on the dirents btree, %.0f s each\n", secs);
	printf("%8s %10s %9s %9s %9s %9s %9s %9s %9s %9s\n", "threads", "ops/s", "rd wt/s", "rd ms",
	       "int wt/s", "int ms", "wr wt/s", "wr ms", "restart/s", "waiting %");
	for (unsigned nt = 1; nt <= o->threads; nt *= 2) {
		struct par_thread *th = calloc(nt, sizeof(*th));
		volatile bool stop = false;
		u64 w0[TFS_SIX_LOCK_NR], ns0[TFS_SIX_LOCK_NR], r0 = 0, r1 = 0, ops = 0;
		double t0 = now(), dt, wait_ns = 0;

		if (!th)
			die("parallel", "out of memory");
		for (unsigned m = 0; m < TFS_SIX_LOCK_NR; m++) {
			w0[m] = __atomic_load_n(&b->lock.waits[m], __ATOMIC_RELAXED);
			ns0[m] = __atomic_load_n(&b->lock.wait_ns[m], __ATOMIC_RELAXED);
		}
		for (unsigned r = 0; r < TFS_BTREE_RESTART_NR; r++)
			r0 += __atomic_load_n(&b->c.restarts[r], __ATOMIC_RELAXED);
		for (unsigned i = 0; i < nt; i++) {
			th[i] = (struct par_thread){
				.fs = fs, .keys = keys, .nr = o->nr, .id = i, .stop = &stop
			};
			if (pthread_create(&th[i].tid, NULL, par_worker, &th[i]))
				die("parallel", "pthread_create");
		}
		while (now() - t0 < secs)
			usleep(10000);
		stop = true;
		for (unsigned i = 0; i < nt; i++) {
			pthread_join(th[i].tid, NULL);
			ops += th[i].ops;
		}
		dt = now() - t0;
		for (unsigned r = 0; r < TFS_BTREE_RESTART_NR; r++)
			r1 += __atomic_load_n(&b->c.restarts[r], __ATOMIC_RELAXED);
		printf("%8u %10.0f", nt, ops / dt);
		for (unsigned m = 0; m < TFS_SIX_LOCK_NR; m++) {
			double ns =
				(double)(__atomic_load_n(&b->lock.wait_ns[m], __ATOMIC_RELAXED) -
					 ns0[m]);

			printf(" %9.0f %9.1f",
			       (__atomic_load_n(&b->lock.waits[m], __ATOMIC_RELAXED) - w0[m]) / dt,
			       ns / 1e6);
			wait_ns += ns;
		}
		printf(" %9.0f %9.1f\n", (r1 - r0) / dt, 100 * wait_ns / 1e9 / (dt * nt));
		free(th);
	}
}

static void run_tinyfs(const struct opts *o, const struct key *keys, const unsigned *order,
		       const struct key *extra)
{
	/*
	 * Written once first, as journal_bench's images are: a durable commit
	 * into a hole of the image file would also pay the host file system's
	 * allocation (a metadata commit of its own).
	 */
	struct ft_geometry g = { .nr_devs = 1, .size = 1ULL << 30, .written = true };
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;
	struct ft t;
	u64 seq = 0, n = 0;
	double t0;

	memset(&t, 0, sizeof(t));
	snprintf(t.dir, sizeof(t.dir), "%s", o->dir);
	snprintf(t.path[0], sizeof(t.path[0]), "%s/tinyfs.img", o->dir);
	t.paths[0] = t.path[0];
	t.nr = 1;
	tfs_fs_opts_default(&t.opts);
	unlink(t.path[0]);
	tfs_check(ft_format(&t, &g), "tinyfs format");
	t.opts.format = true;
	tfs_check(ft_open(&t) ?: ft_stop(&t), "tinyfs init");
	t.opts.format = false;
	t.opts.cache_budget = o->cache;
	tfs_check(ft_open(&t), "tinyfs open");

	t0 = now();
	tfs_insert(t.fs, TFS_BTREE_dirents, keys, o->nr, &seq);
	result[E_TINYFS][W_INSERT] = o->nr / (now() - t0);
	t0 = now();
	tfs_check(tfs_fs_flush_seq(t.fs, seq), "tinyfs flush");
	result[E_TINYFS][W_SYNC] = now() - t0;

	t0 = now();
	tfs_lookups(t.fs, TFS_BTREE_dirents, keys, order, o->nr);
	result[E_TINYFS][W_LOOKUP] = o->nr / (now() - t0);

	t0 = now();
	tfs_btree_iter_init(&iter, t.fs, TFS_BTREE_dirents, TFS_POS_MIN, TFS_POS_MAX);
	for (int ret = tfs_btree_iter_peek(&iter, &k); k; ret = tfs_btree_iter_next(&iter, &k)) {
		tfs_check(ret, "tinyfs scan");
		n++;
	}
	tfs_btree_iter_exit(&iter);
	result[E_TINYFS][W_SCAN] = n / (now() - t0);
	if (n != o->nr)
		die("tinyfs scan", "wrong number of keys");

	t0 = now();
	for (unsigned i = 0; i < o->commits; i++) {
		tfs_insert(t.fs, TFS_BTREE_dirents, &extra[i], 1, &seq);
		tfs_check(tfs_fs_flush_seq(t.fs, seq), "tinyfs durable commit");
	}
	result[E_TINYFS][W_DURABLE] = o->commits / (now() - t0);

	if (o->inodes) {
		tfs_insert(t.fs, TFS_BTREE_inodes, keys, o->nr, &seq);
		tfs_lookups(t.fs, TFS_BTREE_inodes, keys, order, o->nr); /* fills */
		t0 = now();
		tfs_lookups(t.fs, TFS_BTREE_inodes, keys, order, o->nr);
		result[E_TINYFS][W_LOOKUP_KC] = o->nr / (now() - t0);
	}

	if (o->threads)
		run_parallel(o, t.fs, keys);

	struct printbuf out = PRINTBUF;

	tfs_btree_cache_to_text(&out, t.fs);
	if (t.fs->key_cache)
		tfs_btree_key_cache_to_text(&out, t.fs->key_cache);
	if (t.fs->shrinkers) {
		prt_str(&out, "shrinkers (one budget for both caches):\n");
		printbuf_indent_add(&out, 2);
		tfs_shrinkers_to_text(&out, t.fs->shrinkers);
		printbuf_indent_sub(&out, 2);
	}
	printf("tinyfs caches after the run:\n%s", printbuf_str(&out));
	printbuf_exit(&out);
	tfs_check(ft_stop(&t), "tinyfs stop");
	unlink(t.path[0]);
}

/* --- LMDB --- */

static void mdb_check(int ret, const char *what)
{
	if (ret)
		die(what, mdb_strerror(ret));
}

static void run_lmdb(const struct opts *o, const struct key *keys, const unsigned *order,
		     const struct key *extra)
{
	char path[512];
	MDB_env *env;
	MDB_dbi dbi;
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val kv, vv;
	u8 kb[16], vb[VAL_BYTES];
	double t0;
	u64 n = 0;

	snprintf(path, sizeof(path), "%s/lmdb", o->dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/lmdb/data.mdb", o->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lmdb/lock.mdb", o->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lmdb", o->dir);
	mdb_check(mdb_env_create(&env), "mdb_env_create");
	mdb_check(mdb_env_set_mapsize(env, 4ULL << 30), "mdb_env_set_mapsize");
	mdb_check(mdb_env_open(env, path, MDB_NOSYNC, 0600), "mdb_env_open");
	mdb_check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
	mdb_check(mdb_dbi_open(txn, NULL, 0, &dbi), "mdb_dbi_open");
	mdb_check(mdb_txn_commit(txn), "mdb_txn_commit");

	t0 = now();
	for (unsigned i = 0; i < o->nr; i += TXN_KEYS) {
		mdb_check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
		for (unsigned j = i; j < o->nr && j < i + TXN_KEYS; j++) {
			key_bytes(&keys[j], kb);
			val_bytes(&keys[j], vb);
			kv = (MDB_val){ 16, kb };
			vv = (MDB_val){ VAL_BYTES, vb };
			mdb_check(mdb_put(txn, dbi, &kv, &vv, 0), "mdb_put");
		}
		mdb_check(mdb_txn_commit(txn), "mdb_txn_commit");
	}
	result[E_LMDB][W_INSERT] = o->nr / (now() - t0);
	t0 = now();
	mdb_check(mdb_env_sync(env, 1), "mdb_env_sync");
	result[E_LMDB][W_SYNC] = now() - t0;

	t0 = now();
	mdb_check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin");
	for (unsigned i = 0; i < o->nr; i++) {
		const struct key *k = &keys[order[i]];

		key_bytes(k, kb);
		val_bytes(k, vb);
		kv = (MDB_val){ 16, kb };
		mdb_check(mdb_get(txn, dbi, &kv, &vv), "mdb_get");
		if (vv.mv_size != VAL_BYTES || memcmp(vv.mv_data, vb, VAL_BYTES))
			die("mdb_get", "wrong value");
	}
	result[E_LMDB][W_LOOKUP] = o->nr / (now() - t0);

	t0 = now();
	mdb_check(mdb_cursor_open(txn, dbi, &cur), "mdb_cursor_open");
	for (int ret = mdb_cursor_get(cur, &kv, &vv, MDB_FIRST); !ret;
	     ret = mdb_cursor_get(cur, &kv, &vv, MDB_NEXT))
		n++;
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	result[E_LMDB][W_SCAN] = n / (now() - t0);
	if (n != o->nr)
		die("lmdb scan", "wrong number of keys");

	/* Durable commits: a synced commit each (the environment's default without NOSYNC). */
	mdb_check(mdb_env_set_flags(env, MDB_NOSYNC, 0), "mdb_env_set_flags");
	t0 = now();
	for (unsigned i = 0; i < o->commits; i++) {
		mdb_check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
		key_bytes(&extra[i], kb);
		val_bytes(&extra[i], vb);
		kv = (MDB_val){ 16, kb };
		vv = (MDB_val){ VAL_BYTES, vb };
		mdb_check(mdb_put(txn, dbi, &kv, &vv, 0), "mdb_put");
		mdb_check(mdb_txn_commit(txn), "mdb_txn_commit");
	}
	result[E_LMDB][W_DURABLE] = o->commits / (now() - t0);
	mdb_env_close(env);
	snprintf(path, sizeof(path), "%s/lmdb/data.mdb", o->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lmdb/lock.mdb", o->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lmdb", o->dir);
	rmdir(path);
}

/* --- SQLite --- */

static void sql_check(sqlite3 *db, int ret, const char *what)
{
	if (ret != SQLITE_OK && ret != SQLITE_DONE && ret != SQLITE_ROW)
		die(what, sqlite3_errmsg(db));
}

static void sql_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		die(sql, err ? err : "?");
}

static void sql_insert(sqlite3 *db, sqlite3_stmt *ins, const struct key *k)
{
	u8 kb[16], vb[VAL_BYTES];

	key_bytes(k, kb);
	val_bytes(k, vb);
	sqlite3_bind_blob(ins, 1, kb, 16, SQLITE_TRANSIENT);
	sqlite3_bind_blob(ins, 2, vb, VAL_BYTES, SQLITE_TRANSIENT);
	sql_check(db, sqlite3_step(ins), "insert");
	sqlite3_reset(ins);
}

static void run_sqlite(const struct opts *o, const struct key *keys, const unsigned *order,
		       const struct key *extra)
{
	char path[512], side[600];
	sqlite3 *db;
	sqlite3_stmt *ins, *sel, *scan;
	double t0;
	u64 n = 0;

	snprintf(path, sizeof(path), "%s/sqlite.db", o->dir);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("sqlite3_open", sqlite3_errmsg(db));
	sql_exec(db, "PRAGMA journal_mode=WAL");
	sql_exec(db, "PRAGMA synchronous=NORMAL");
	sql_exec(db, "PRAGMA cache_size=-524288"); /* 512 MiB: warm lookups stay in memory */
	sql_exec(db, "CREATE TABLE t (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID");
	sql_check(db,
		  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO t VALUES (?, ?)", -1, &ins, NULL),
		  "prepare insert");
	sql_check(db, sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?", -1, &sel, NULL),
		  "prepare select");
	sql_check(db, sqlite3_prepare_v2(db, "SELECT k, v FROM t ORDER BY k", -1, &scan, NULL),
		  "prepare scan");

	t0 = now();
	for (unsigned i = 0; i < o->nr; i += TXN_KEYS) {
		sql_exec(db, "BEGIN");
		for (unsigned j = i; j < o->nr && j < i + TXN_KEYS; j++)
			sql_insert(db, ins, &keys[j]);
		sql_exec(db, "COMMIT");
	}
	result[E_SQLITE][W_INSERT] = o->nr / (now() - t0);
	t0 = now();
	sql_exec(db, "PRAGMA wal_checkpoint(FULL)");
	result[E_SQLITE][W_SYNC] = now() - t0;

	t0 = now();
	sql_exec(db, "BEGIN");
	for (unsigned i = 0; i < o->nr; i++) {
		const struct key *k = &keys[order[i]];
		u8 kb[16], vb[VAL_BYTES];

		key_bytes(k, kb);
		val_bytes(k, vb);
		sqlite3_bind_blob(sel, 1, kb, 16, SQLITE_STATIC);
		if (sqlite3_step(sel) != SQLITE_ROW || sqlite3_column_bytes(sel, 0) != VAL_BYTES ||
		    memcmp(sqlite3_column_blob(sel, 0), vb, VAL_BYTES))
			die("sqlite lookup", "missing or wrong value");
		sqlite3_reset(sel);
	}
	sql_exec(db, "COMMIT");
	result[E_SQLITE][W_LOOKUP] = o->nr / (now() - t0);

	t0 = now();
	while (sqlite3_step(scan) == SQLITE_ROW)
		n++;
	sqlite3_reset(scan);
	result[E_SQLITE][W_SCAN] = n / (now() - t0);
	if (n != o->nr)
		die("sqlite scan", "wrong number of keys");

	sql_exec(db, "PRAGMA synchronous=FULL");
	t0 = now();
	for (unsigned i = 0; i < o->commits; i++)
		sql_insert(db, ins, &extra[i]); /* autocommit: one transaction each */
	result[E_SQLITE][W_DURABLE] = o->commits / (now() - t0);

	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	sqlite3_finalize(scan);
	sqlite3_close(db);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

/* --- main --- */

static void print_results(const struct opts *o)
{
	printf("\n%-30s %12s %12s %12s %12s %12s\n", "", "tinyfs", "lmdb", "sqlite", "tinyfs/lmdb",
	       "tinyfs/sqlite");
	for (unsigned w = 0; w < W_NR; w++) {
		if (w == W_LOOKUP_KC && !o->inodes)
			continue;
		printf("%-30s", w_names[w]);
		for (unsigned e = 0; e < E_NR; e++)
			if (result[e][w])
				printf(" %12.1f", result[e][w]);
			else
				printf(" %12s", "-");
		if (w != W_SYNC && result[E_LMDB][w])
			printf(" %12.2f %12.2f", result[E_TINYFS][w] / result[E_LMDB][w],
			       result[E_TINYFS][w] / result[E_SQLITE][w]);
		printf("\n");
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: btree_bench [-d DIR] [-n KEYS] [-c COMMITS] [-m CACHE_MiB] [-i] "
			"[-t THREADS] [-T]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .dir = "/tmp", .nr = 1000000, .commits = 10000, .cache = 512ULL << 20 };
	struct key *keys, *extra;
	unsigned *order;
	struct rusage ru;
	int c;

	while ((c = getopt(argc, argv, "d:n:c:m:it:Th")) != -1) {
		switch (c) {
		case 'd':
			o.dir = optarg;
			break;
		case 'n':
			o.nr = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			o.commits = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			o.cache = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'i':
			o.inodes = true;
			break;
		case 't':
			o.threads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'T':
			o.tinyfs_only = true;
			break;
		default:
			usage();
		}
	}
	if (!o.nr)
		usage();
	tfs_fs_thread_init();

	keys = malloc(o.nr * sizeof(*keys));
	extra = malloc((o.commits + 1) * sizeof(*extra));
	order = malloc(o.nr * sizeof(*order));
	if (!keys || !extra || !order)
		die("malloc", "out of memory");
	/* Random keys; position 0:0 and POS_MAX are avoided (and duplicates are vanishingly rare). */
	for (unsigned i = 0; i < o.nr; i++)
		keys[i] = (struct key){ rnd() | 1, rnd() };
	for (unsigned i = 0; i < o.commits; i++)
		extra[i] = (struct key){ rnd() | 1, rnd() };
	for (unsigned i = 0; i < o.nr; i++)
		order[i] = i;
	for (unsigned i = o.nr; i-- > 1;) {
		unsigned j = (unsigned)(rnd() % (i + 1)), tmp = order[i];

		order[i] = order[j];
		order[j] = tmp;
	}
	printf("btree_bench: %u keys of 16 bytes with %u-byte values, %u durable commits, in %s\n",
	       o.nr, VAL_BYTES, o.commits, o.dir);

	double rss0 = rss_mib();

	run_tinyfs(&o, keys, order, extra);
	getrusage(RUSAGE_SELF, &ru);
	printf("max resident set after tinyfs: %.1f MiB (cache budget %llu MiB; %.1f MiB before "
	       "tinyfs opened: the key arrays and libraries)\n",
	       ru.ru_maxrss / 1024.0, (unsigned long long)(o.cache >> 20), rss0);
	if (!o.tinyfs_only) {
		run_lmdb(&o, keys, order, extra);
		run_sqlite(&o, keys, order, extra);
	}
	print_results(&o);
	free(keys);
	free(extra);
	free(order);
	return 0;
}
