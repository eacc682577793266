/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_FAULT_ERRLOOP_H
#define TFS_TESTS_FAULT_ERRLOOP_H

/*
 * SQLite's error loop over the filesystem's operations, shared by
 * errloop_io.c (the fault device fails the Nth I/O) and errloop_alloc.c (a
 * fault point fails its Nth hit).
 *
 * One iteration: copy a template image (made once: a few files and
 * directories, written and made durable, the "acknowledged" state), open it,
 * prepare the operation without faults, arm the fault, run the operation,
 * stop the filesystem (the fault still armed: a broken device stays broken
 * at unmount), then reopen without faults and check.  Each operation is
 * followed by an fsync (or syncfs): the operation commits in memory, the
 * sync is where its I/O happens.  The checks:
 *  - the reopen works and fsck finds nothing;
 *  - everything acknowledged by the template is intact (data, sizes, names,
 *    xattrs), apart from what the operation itself changes;
 *  - the operation was honest: when it (and its sync) said success its
 *    effect is there whatever the stop said (unmount: when the stop said
 *    success; mount: when the open and the stop after it did), and when
 *    it failed the target is in its old or its new state, never a third;
 *  - a change made on the same mount after the operation (the fault still
 *    armed), when its fsync said success, is there too;
 *  - a clean stop after the check succeeds.
 * The loop runs N = 1, 2, ... until the operation (for unmount: the stop,
 * for mount: the open) completes without the fault being reached.
 *
 * Each iteration prints one line on stdout before it starts, so a hang
 * shows as the test's timeout after a line naming op, kind and N.
 */

#include "posix_test.h"

#include <stdarg.h>

#include "lib/string.h"

/* --- the acknowledged state (the template) --- */

#define EL_K0_LEN 40000
#define EL_K1_LEN 5000
#define EL_A_LEN 32768
#define EL_U_LEN 8192
/*
 * t: EL_T_EXTENTS extents of 4 KiB, one every 8 KiB (holes between):
 * truncating it takes more than one transaction (fs/io.c's IO_BATCH_KEYS).
 */
#define EL_T_EXTENTS 200
#define EL_T_LEN (EL_T_EXTENTS * 8192ULL)
/* d/ra: the name rename replaces. */
#define EL_RA_LEN 6000
/* mount: files fsynced one by one before the power cut (several journal entries). */
#define EL_M_FILES 12
#define EL_M_LEN 12000
/* Seeds of pt_byte() per file. */
enum {
	EL_SEED_K0 = 1,
	EL_SEED_K1,
	EL_SEED_A,
	EL_SEED_U,
	EL_SEED_T,
	EL_SEED_M,
	EL_SEED_W,
	EL_SEED_F,
	EL_SEED_S,
	EL_SEED_X,
	EL_SEED_RA,
	EL_SEED_U2,
	EL_SEED_AFTER,
};
#define EL_AFTER_LEN 3000
#define EL_W_OFF 16384
/* More than 1 MiB: two transactions (a write is one per MiB). */
#define EL_W_LEN (1056 * 1024)
#define EL_F_LEN 16384
#define EL_S_LEN 10000
/* unmount: small files made (not synced) before the stop. */
#define EL_S_FILES 24
#define EL_S_SMALL 2000
#define EL_TRUNC 5000
#define EL_X_LEN 300

/* Operations. */
/* clang-format off */
#define EL_OPS(x)	\
	x(create)	\
	x(write)	\
	x(fsync)	\
	x(rename)	\
	x(unlink)	\
	x(truncate)	\
	x(mkdir)	\
	x(setxattr)	\
	x(mount)	\
	x(unmount)
/* clang-format on */

enum el_op {
#define x(n) EL_OP_##n,
	EL_OPS(x)
#undef x
	EL_OP_NR
};

static const char *const el_op_names[] = {
#define x(n) #n,
	EL_OPS(x)
#undef x
};

/* One failure injector for an iteration. */
struct el_fault {
	bool io;	   /* the fault device's rule; else a fault point */
	bool persistent;   /* the Nth and every later one fail; else only the Nth */
	const char *point; /* !io: the fault point's name */
	u64 n;
	u64 base; /* io: tfs_faultdev_nr_injected_all() when armed */
};

struct el {
	struct pt t;
	char clean[PT_MAX_DEVS][160], dirty[PT_MAX_DEVS][160];
	/*
	 * Faults go to member 0 only while another member holds a replica of
	 * everything: an operation (and the fsync after it) must succeed.
	 */
	bool healthy_replica;
	unsigned failures; /* iterations whose checks failed */
	bool failed;	   /* the current iteration's checks failed */
	bool xfailed;	   /* it met a documented expected failure */
	char what[128];	   /* the current iteration, for messages */
	struct tfs_file *f;
	/* Called when the operation starts (false) and ends (true). */
	void (*window)(struct el *e, bool end);
};

static inline void el_window(struct el *e, bool end)
{
	if (e->window)
		e->window(e, end);
}

/* What byte i of a file written with seed holds (t is sparse). */
static inline u8 el_byte(u64 seed, u64 i)
{
	if (seed == EL_SEED_T && i % 8192 >= 4096)
		return 0;
	return pt_byte(seed, i);
}

static inline bool el_long(void)
{
	const char *s = getenv("TFS_LONG");

	return s && *s && strcmp(s, "0");
}

__attribute__((format(printf, 2, 3))) static inline void el_fail(struct el *e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "errloop FAILED %s: ", e->what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	e->failed = true;
}

static inline int el_write_file(struct pt *t, tfs_ino_t dir, const char *name, u64 len, u64 seed)
{
	static u8 buf[EL_K0_LEN];
	struct tfs_file *f;
	int ret = pt_create(t, dir, name, &f);

	if (ret)
		return ret;
	pt_fill(buf, len, seed, 0);
	if (tfs_write(t->fs, f, buf, len, 0) != (ssize_t)len)
		ret = -EIO;
	ret = ret ?: tfs_fsync(t->fs, f, false);
	tfs_release(t->fs, f);
	return ret;
}

/* t: 4 KiB of data every 8 KiB, the last one ending the file's size. */
static inline int el_write_sparse(struct pt *t, tfs_ino_t dir, const char *name)
{
	static u8 buf[4096];
	struct tfs_file *f;
	int ret = pt_create(t, dir, name, &f);

	for (u64 i = 0; !ret && i < EL_T_EXTENTS; i++) {
		u64 off = i * 8192;

		for (unsigned k = 0; k < sizeof(buf); k++)
			buf[k] = el_byte(EL_SEED_T, off + k);
		if (tfs_write(t->fs, f, buf, sizeof(buf), off) != sizeof(buf))
			ret = -EIO;
	}
	if (!ret) {
		/* The size: the last hole too. */
		struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE, .size = EL_T_LEN };
		struct tfs_stat st;

		ret = tfs_setattr(t->fs, tfs_file_ino(f), f, &sa, &st);
	}
	ret = ret ?: tfs_fsync(t->fs, f, false);
	tfs_release(t->fs, f);
	return ret;
}

/*
 * Reads dir/name whole into buf (at most size bytes); returns its size,
 * -ENOENT, or another code.
 */
static inline s64 el_read(struct el *e, tfs_ino_t dir, const char *name, u8 *buf, size_t size)
{
	struct tfs_file *f;
	struct tfs_stat st;
	s64 done = 0;
	int ret = pt_lookup(&e->t, dir, name, &st);

	if (ret)
		return ret;
	if (!S_ISREG(st.mode) || st.size > size)
		return -EINVAL;
	ret = tfs_open(e->t.fs, st.ino, O_RDONLY, &f);
	if (ret)
		return ret;
	while ((u64)done < st.size) {
		ssize_t n = tfs_read(e->t.fs, f, buf + done, st.size - (u64)done, (u64)done);

		if (n <= 0) {
			done = n < 0 ? n : -EIO;
			break;
		}
		done += n;
	}
	tfs_release(e->t.fs, f);
	return done;
}

/* Checks dir/name is a regular file of len bytes of pt_byte(seed). */
static inline bool el_check_file(struct el *e, tfs_ino_t dir, const char *name, u64 len, u64 seed)
{
	static u8 buf[2 << 20];
	s64 n = el_read(e, dir, name, buf, sizeof(buf));

	if (n < 0) {
		el_fail(e, "%s: %s", name, tfs_err_str((int)n));
		return false;
	}
	if ((u64)n != len) {
		el_fail(e, "%s: size %lld, want %llu", name, (long long)n, (unsigned long long)len);
		return false;
	}
	for (u64 i = 0; i < len; i++)
		if (buf[i] != el_byte(seed, i)) {
			el_fail(e, "%s: byte %llu differs", name, (unsigned long long)i);
			return false;
		}
	return true;
}

static inline bool el_exists(struct el *e, tfs_ino_t dir, const char *name, struct tfs_stat *st)
{
	int ret = pt_lookup(&e->t, dir, name, st);

	if (ret && ret != -ENOENT)
		el_fail(e, "lookup %s: %s", name, tfs_err_str(ret));
	return !ret;
}

static inline tfs_ino_t el_ino(struct el *e, tfs_ino_t dir, const char *name)
{
	struct tfs_stat st;

	if (!el_exists(e, dir, name, &st)) {
		el_fail(e, "%s is missing", name);
		return 0;
	}
	return st.ino;
}

/* The template: every file written and fsynced, every name synced. */
static inline int el_populate(struct pt *t)
{
	struct tfs_stat st;
	tfs_ino_t keep;

	int ret = pt_mkdir(t, TFS_ROOT_INO, "keep", &st);
	if (ret)
		return ret;
	keep = st.ino;
	return el_write_file(t, keep, "k0", EL_K0_LEN, EL_SEED_K0)
	       ?: el_write_file(t, keep, "k1", EL_K1_LEN, EL_SEED_K1)
	       ?: tfs_setxattr(t->fs, pt_ino(t, keep, "k0"), "user.k", "kval", 4, 0)
	       ?: el_write_file(t, TFS_ROOT_INO, "a", EL_A_LEN, EL_SEED_A)
	       ?: el_write_file(t, TFS_ROOT_INO, "u", EL_U_LEN, EL_SEED_U)
	       ?: el_write_sparse(t, TFS_ROOT_INO, "t")
	       ?: pt_mkdir(t, TFS_ROOT_INO, "d", NULL)
	       ?: el_write_file(t, pt_ino(t, TFS_ROOT_INO, "d"), "ra", EL_RA_LEN, EL_SEED_RA)
	       ?: tfs_syncfs(t->fs);
}

/*
 * Moves the image to /dev/shm when there is one: the loops open, sync and
 * stop hundreds of times, and each flush of an image on a disk is a real
 * fdatasync (seconds in all on a busy machine).
 */
static inline void el_move_to_shm(struct pt *t)
{
	char dir[sizeof(t->dir)], path[sizeof(t->path[0])];

	if (access("/dev/shm", W_OK))
		return;
	snprintf(dir, sizeof(dir), "/dev/shm/tfs-errloop-XXXXXX");
	scratch_dir_make(dir);
	for (unsigned i = 0; i < t->nr; i++) {
		snprintf(path, sizeof(path), "%s/img%u", dir, i);
		pt_copy_file(t->path[i], path);
		unlink(t->path[i]);
		memcpy(t->path[i], path, sizeof(path));
	}
	scratch_dir_remove(t->dir);
	memcpy(t->dir, dir, sizeof(dir));
}

/*
 * Makes the clean template (the acknowledged state, cleanly stopped) and
 * the dirty one (the same plus "m" and "md", fsynced, then the power cut:
 * the journal must be replayed at the next open).
 */
static inline void el_init(struct el *e, const struct pt_geometry *geometry)
{
	struct pt_geometry g = { .size = 8ULL << 20 };
	struct pt *t = &e->t;
	int ret;

	memset(e, 0, sizeof(*e));
	if (geometry)
		g = *geometry;
	ret = pt_mkfs(t, &g) ?: el_populate(t) ?: pt_stop(t);
	if (ret) {
		fprintf(stderr, "errloop: template: %s\n", tfs_err_str(ret));
		abort();
	}
	el_move_to_shm(t);
	for (unsigned i = 0; i < t->nr; i++) {
		char dir[sizeof(t->dir)];

		/* Through a local: gcc's -Wrestrict sees e into e. */
		memcpy(dir, t->dir, sizeof(dir));
		snprintf(e->clean[i], sizeof(e->clean[i]), "%s/clean%u", dir, i);
		snprintf(e->dirty[i], sizeof(e->dirty[i]), "%s/dirty%u", dir, i);
		pt_copy_file(t->path[i], e->clean[i]);
	}

	ret = pt_open(t) ?: el_write_file(t, TFS_ROOT_INO, "m", EL_M_LEN, EL_SEED_M)
		?: pt_mkdir(t, TFS_ROOT_INO, "md", NULL);
	for (unsigned i = 0; !ret && i < EL_M_FILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "m%u", i);
		ret = el_write_file(t, pt_ino(t, TFS_ROOT_INO, "md"), name, 3000 + i, 100 + i);
	}
	ret = ret ?: tfs_fsyncdir(t->fs, TFS_ROOT_INO, false);
	/* Everything was flushed: each member's cut keeps the same durable state. */
	for (unsigned i = 0; !ret && i < t->nr; i++)
		ret = tfs_faultdev_powercut(pt_bdev(t, i), TFS_POWERCUT_none, 0);
	if (ret) {
		fprintf(stderr, "errloop: dirty template: %s\n", tfs_err_str(ret));
		abort();
	}
	pt_stop(t); /* fails: the device is frozen */
	for (unsigned i = 0; i < t->nr; i++)
		pt_copy_file(t->path[i], e->dirty[i]);
}

static inline void el_exit(struct el *e)
{
	for (unsigned i = 0; i < e->t.nr; i++) {
		unlink(e->clean[i]);
		unlink(e->dirty[i]);
	}
	pt_cleanup(&e->t);
}

/* --- arming --- */

static inline void el_fault_to_text(struct printbuf *out, const struct el_fault *f)
{
	if (f->io)
		prt_printf(out, "any nth=%llu %s%s", (unsigned long long)f->n,
			   f->persistent ? "every=1 " : "",
			   getenv("TFS_ERRLOOP_ACTION") ?: "fail=EIO");
	else
		prt_printf(out, "point %s %s nth=%llu", f->point,
			   f->persistent ? "always" : "oneshot", (unsigned long long)f->n);
}

static inline void el_arm_point(const struct el_fault *f)
{
	struct tfs_fault_arm arm = {
		.mode = f->persistent ? TFS_FAULT_ALWAYS : TFS_FAULT_ONESHOT,
		.nth = f->n,
	};

	if (tfs_fault_point_arm(f->point, &arm))
		abort();
}

/* Arms f on the open filesystem's device (or the point). */
static inline void el_arm_live(struct el *e, struct el_fault *f)
{
	if (f->io) {
		PRINTBUF_ONSTACK(words, 64);

		el_fault_to_text(&words, f);
		f->base = tfs_faultdev_nr_injected_all();
		if (pt_rule(&e->t, 0, printbuf_str(&words)) < 0)
			abort();
	} else {
		el_arm_point(f);
	}
}

/* Arms f for the next pt_open() (mount). */
static inline void el_arm_open(struct el *e, struct el_fault *f)
{
	if (f->io) {
		PRINTBUF_ONSTACK(words, 64);

		el_fault_to_text(&words, f);
		tfs_strscpy(e->t.rule[0], printbuf_str(&words), sizeof(e->t.rule[0]));
		f->base = tfs_faultdev_nr_injected_all();
	} else {
		el_arm_point(f);
	}
}

static inline bool el_reached(const struct el_fault *f)
{
	if (f->io)
		return tfs_faultdev_nr_injected_all() != f->base;
	return tfs_fault_point_fired(f->point) > 0;
}

static inline void el_disarm(struct el *e, const struct el_fault *f)
{
	if (f->io)
		e->t.rule[0][0] = 0;
	else
		tfs_fault_point_disarm(f->point);
}

/* --- the operations --- */

/* Before arming, on the open filesystem. */
static inline int el_prepare(struct el *e, enum el_op op)
{
	static u8 buf[EL_F_LEN];
	struct pt *t = &e->t;
	int ret;

	e->f = NULL;
	switch (op) {
	case EL_OP_write:
		return pt_open_file(t, TFS_ROOT_INO, "a", O_RDWR, &e->f);
	case EL_OP_unlink:
		return pt_open_file(t, TFS_ROOT_INO, "u", O_RDWR, &e->f);
	case EL_OP_fsync:
		ret = pt_open_file(t, TFS_ROOT_INO, "a", O_RDWR, &e->f);
		if (ret)
			return ret;
		pt_fill(buf, EL_F_LEN, EL_SEED_F, 0);
		return tfs_write(t->fs, e->f, buf, EL_F_LEN, 0) == EL_F_LEN ? 0 : -EIO;
	case EL_OP_unmount: {
		struct tfs_file *f;
		static u8 s[EL_S_LEN];

		ret = pt_create(t, TFS_ROOT_INO, "s", &f);
		if (ret)
			return ret;
		pt_fill(s, EL_S_LEN, EL_SEED_S, 0);
		if (tfs_write(t->fs, f, s, EL_S_LEN, 0) != EL_S_LEN)
			ret = -EIO;
		tfs_release(t->fs, f);
		ret = ret ?: pt_mkdir(t, TFS_ROOT_INO, "sd", NULL);
		/* More dirty state for the stop to write back. */
		for (unsigned i = 0; !ret && i < EL_S_FILES; i++) {
			char name[16];

			snprintf(name, sizeof(name), "s%u", i);
			ret = pt_create(t, pt_ino(t, TFS_ROOT_INO, "sd"), name, &f);
			if (!ret && tfs_write(t->fs, f, s, EL_S_SMALL, 0) != EL_S_SMALL)
				ret = -EIO;
			if (!ret)
				tfs_release(t->fs, f);
		}
		return ret;
	}
	default:
		return 0;
	}
}

/* The operation itself (not mount, unmount); its result. */
static inline int el_run_op(struct el *e, enum el_op op)
{
	static u8 buf[EL_W_LEN];
	struct pt *t = &e->t;
	struct tfs_file *f = NULL;
	int ret;

	switch (op) {
	case EL_OP_create:
		ret = tfs_create(t->fs, &pt_root_ctx, pt_ino(t, TFS_ROOT_INO, "d"), "new", 3, 0644,
				 O_CREAT | O_EXCL | O_RDWR, &f, &(struct tfs_stat){ 0 });
		if (!ret)
			tfs_release(t->fs, f);
		return ret;
	case EL_OP_write: {
		ssize_t n;

		pt_fill(buf, EL_W_LEN, EL_SEED_W, EL_W_OFF);
		n = tfs_write(t->fs, e->f, buf, EL_W_LEN, EL_W_OFF);
		/* A short write is a success of fewer bytes: checked as such. */
		return n == EL_W_LEN ? 0 : n < 0 ? (int)n : 1;
	}
	case EL_OP_fsync:
		ret = tfs_fsync(t->fs, e->f, false);
		tfs_release(t->fs, e->f);
		e->f = NULL;
		return ret;
	case EL_OP_rename:
		return tfs_rename(t->fs, TFS_ROOT_INO, "a", 1, pt_ino(t, TFS_ROOT_INO, "d"), "ra",
				  2, 0);
	case EL_OP_unlink:
		/* Unlinked while open, written, then closed: the orphan's cleanup. */
		ret = tfs_unlink(t->fs, TFS_ROOT_INO, "u", 1);
		if (!ret) {
			pt_fill(buf, 4096, EL_SEED_U2, 0);
			if (tfs_write(t->fs, e->f, buf, 4096, 0) != 4096)
				ret = -EIO;
		}
		tfs_release(t->fs, e->f);
		e->f = NULL;
		return ret;
	case EL_OP_truncate: {
		struct tfs_setattr sa = { .valid = TFS_SETATTR_SIZE, .size = EL_TRUNC };
		struct tfs_stat st;

		return tfs_setattr(t->fs, pt_ino(t, TFS_ROOT_INO, "t"), NULL, &sa, &st);
	}
	case EL_OP_mkdir:
		return pt_mkdir(t, pt_ino(t, TFS_ROOT_INO, "d"), "sub", NULL);
	case EL_OP_setxattr:
		pt_fill(buf, EL_X_LEN, EL_SEED_X, 0);
		return tfs_setxattr(t->fs, pt_ino(t, TFS_ROOT_INO, "a"), "user.new", buf, EL_X_LEN,
				    0);
	default:
		abort();
	}
}

/*
 * The operation, made durable: then fsync (the written file) or syncfs
 * (the others).  Most operations only commit to the journal in memory; the
 * I/O they cause, and its errors, come at the fsync.  (fsync is the
 * operation of its own iteration: a write before it, unsynced.)
 */
static inline int el_run(struct el *e, enum el_op op)
{
	int ret = el_run_op(e, op);

	if (!ret && op == EL_OP_write)
		ret = tfs_fsync(e->t.fs, e->f, false);
	else if (!ret && op != EL_OP_fsync)
		ret = tfs_syncfs(e->t.fs);
	if (e->f)
		tfs_release(e->t.fs, e->f);
	e->f = NULL;
	return ret;
}

/* "a" is its old content, or (write) each byte old or new. */
static inline void el_check_a(struct el *e, enum el_op op, bool done, bool fsynced)
{
	static u8 buf[2 << 20];
	s64 n;

	if (op == EL_OP_rename)
		return;
	if (op != EL_OP_write && op != EL_OP_fsync) {
		el_check_file(e, TFS_ROOT_INO, "a", EL_A_LEN, EL_SEED_A);
		return;
	}
	n = el_read(e, TFS_ROOT_INO, "a", buf, sizeof(buf));
	if (n < 0) {
		el_fail(e, "a: %s", tfs_err_str((int)n));
		return;
	}
	if (op == EL_OP_write) {
		u64 end = EL_W_OFF + EL_W_LEN;

		if ((u64)n < EL_A_LEN || (u64)n > end || (done && (u64)n != end)) {
			el_fail(e, "a: size %lld after the write (done %d)", (long long)n, done);
			return;
		}
		for (u64 i = 0; i < (u64)n; i++) {
			bool old = i < EL_A_LEN && buf[i] == pt_byte(EL_SEED_A, i);
			bool new = i >= EL_W_OFF &&buf[i] == pt_byte(EL_SEED_W, i);
			bool hole = i >= EL_A_LEN && !buf[i];

			if (done ? (i < EL_W_OFF ? !old : !new) : !old && !new && !hole) {
				el_fail(e, "a: byte %llu is neither old nor new (done %d)",
					(unsigned long long)i, done);
				return;
			}
		}
		return;
	}
	/* fsync: the write before it was not acknowledged unless fsync said 0. */
	if (n != EL_A_LEN) {
		el_fail(e, "a: size %lld after fsync", (long long)n);
		return;
	}
	for (u64 i = 0; i < EL_A_LEN; i++) {
		bool old = buf[i] == pt_byte(EL_SEED_A, i);
		bool new = i < EL_F_LEN &&buf[i] == pt_byte(EL_SEED_F, i);

		if (fsynced ? i < EL_F_LEN && !new : !old && !new) {
			el_fail(e, "a: byte %llu after fsync (returned %s)", (unsigned long long)i,
				fsynced ? "0" : "an error");
			return;
		}
	}
}

/*
 * The acknowledged state and the operation's effect.  done: the operation
 * and the stop after it said success (mount: the open did); fsynced: fsync
 * said success.
 */
static inline void el_check(struct el *e, enum el_op op, bool done, bool fsynced)
{
	struct pt *t = &e->t;
	struct tfs_stat st;
	tfs_ino_t keep = el_ino(e, TFS_ROOT_INO, "keep"), d = el_ino(e, TFS_ROOT_INO, "d");
	bool a, ra;

	if (keep) {
		char v[8];
		tfs_ino_t k0 = el_ino(e, keep, "k0");
		ssize_t n = k0 ? tfs_getxattr(t->fs, k0, "user.k", v, sizeof(v)) : 0;

		el_check_file(e, keep, "k0", EL_K0_LEN, EL_SEED_K0);
		el_check_file(e, keep, "k1", EL_K1_LEN, EL_SEED_K1);
		if (k0 && (n != 4 || memcmp(v, "kval", 4)))
			el_fail(e, "k0's xattr: %zd", n);
	}
	el_check_a(e, op, done, fsynced);

	/* rename a over d/ra: both old, or a gone and d/ra holding a's content. */
	a = el_exists(e, TFS_ROOT_INO, "a", &st);
	ra = d && el_exists(e, d, "ra", &st);
	if (!ra || (a ? op == EL_OP_rename && done : op != EL_OP_rename))
		el_fail(e, "a %d, d/ra %d (done %d)", a, ra, done);
	else if (a)
		el_check_file(e, d, "ra", EL_RA_LEN, EL_SEED_RA);
	else
		el_check_file(e, d, "ra", EL_A_LEN, EL_SEED_A);
	if (a && op == EL_OP_rename)
		el_check_file(e, TFS_ROOT_INO, "a", EL_A_LEN, EL_SEED_A);

	/* unlink */
	if (el_exists(e, TFS_ROOT_INO, "u", &st)) {
		if (op == EL_OP_unlink && done)
			el_fail(e, "u exists after its unlink succeeded");
		el_check_file(e, TFS_ROOT_INO, "u", EL_U_LEN, EL_SEED_U);
	} else if (op != EL_OP_unlink) {
		el_fail(e, "u is missing");
	}

	/* truncate: 5000 or the old size, the prefix intact */
	if (el_exists(e, TFS_ROOT_INO, "t", &st)) {
		if (op == EL_OP_truncate && (st.size == EL_TRUNC || !done) && st.size != EL_T_LEN)
			el_check_file(e, TFS_ROOT_INO, "t", EL_TRUNC, EL_SEED_T);
		else if (op == EL_OP_truncate && done)
			el_fail(e, "t: size %llu after its truncate succeeded",
				(unsigned long long)st.size);
		else
			el_check_file(e, TFS_ROOT_INO, "t", EL_T_LEN, EL_SEED_T);
	} else {
		el_fail(e, "t is missing");
	}

	/* create, mkdir: in d */
	if (d && el_exists(e, d, "new", &st)) {
		if (op != EL_OP_create || !S_ISREG(st.mode) || st.size)
			el_fail(e, "d/new: mode %o size %llu", st.mode,
				(unsigned long long)st.size);
	} else if (op == EL_OP_create && done) {
		el_fail(e, "d/new is missing after its create succeeded");
	}
	if (d && el_exists(e, d, "sub", &st)) {
		if (op != EL_OP_mkdir || !S_ISDIR(st.mode) || st.nlink != 2)
			el_fail(e, "d/sub: mode %o nlink %u", st.mode, st.nlink);
	} else if (op == EL_OP_mkdir && done) {
		el_fail(e, "d/sub is missing after its mkdir succeeded");
	}

	/* setxattr on a (or d/ra) */
	if (op == EL_OP_setxattr) {
		static u8 v[EL_X_LEN + 1], want[EL_X_LEN];
		tfs_ino_t ino = a ? pt_ino(t, TFS_ROOT_INO, "a") : 0;
		ssize_t n = ino ? tfs_getxattr(t->fs, ino, "user.new", v, sizeof(v)) : -ENOENT;

		pt_fill(want, EL_X_LEN, EL_SEED_X, 0);
		if (n == -ENODATA ? done : n != EL_X_LEN || memcmp(v, want, EL_X_LEN))
			el_fail(e, "user.new: %zd (done %d)", n, done);
	}

	/* mount: what was fsynced before the power cut */
	if (op == EL_OP_mount) {
		el_check_file(e, TFS_ROOT_INO, "m", EL_M_LEN, EL_SEED_M);
		if (!el_exists(e, TFS_ROOT_INO, "md", &st) || !S_ISDIR(st.mode)) {
			el_fail(e, "md is missing after replay");
		} else {
			tfs_ino_t md = st.ino;

			for (unsigned i = 0; i < EL_M_FILES; i++) {
				char name[16];

				snprintf(name, sizeof(name), "m%u", i);
				el_check_file(e, md, name, 3000 + i, 100 + i);
			}
		}
	}

	/* unmount: what was not synced before the stop; there if it said 0 */
	if (op == EL_OP_unmount) {
		if (el_exists(e, TFS_ROOT_INO, "s", &st)) {
			if (st.size || done)
				el_check_file(e, TFS_ROOT_INO, "s", EL_S_LEN, EL_SEED_S);
		} else if (done) {
			el_fail(e, "s is missing after a clean stop");
		}
		if (el_exists(e, TFS_ROOT_INO, "sd", &st)) {
			tfs_ino_t sd = st.ino;

			for (unsigned i = 0; i < EL_S_FILES; i++) {
				char name[16];

				snprintf(name, sizeof(name), "s%u", i);
				if (el_exists(e, sd, name, &st)) {
					if (st.size || done)
						el_check_file(e, sd, name, EL_S_SMALL, EL_SEED_S);
				} else if (done) {
					el_fail(e, "sd/%s is missing after a clean stop", name);
				}
			}
		} else if (done) {
			el_fail(e, "sd is missing after a clean stop");
		}
	}
}

/*
 * After the operation, on the same mount, the fault still armed: another
 * change and its fsync.  The filesystem must stay usable or fail honestly:
 * if the fsync says success, the file is there after the reopen.
 */
static inline int el_follow_up(struct pt *t)
{
	return el_write_file(t, TFS_ROOT_INO, "after", EL_AFTER_LEN, EL_SEED_AFTER);
}

static inline void el_check_follow_up(struct el *e, bool done)
{
	struct tfs_stat st;

	if (el_exists(e, TFS_ROOT_INO, "after", &st)) {
		if (st.size || done)
			el_check_file(e, TFS_ROOT_INO, "after", EL_AFTER_LEN, EL_SEED_AFTER);
	} else if (done) {
		el_fail(e, "\"after\" is missing though its fsync said success");
	}
}

/*
 * One iteration: returns whether the fault was reached by the operation
 * (the loop goes on while it is).  Failed checks set e->failed.
 */
static inline bool el_iteration(struct el *e, enum el_op op, struct el_fault *f)
{
	struct pt *t = &e->t;
	bool reached = false, done, fsynced = false;
	int op_ret = 0, stop_ret = 0, follow_ret = -1, ret;

	{
		PRINTBUF_ONSTACK(what, 128);

		prt_printf(&what, "op=%s kind=%s n=%llu (", el_op_names[op],
			   f->persistent ? "persistent" : "transient", (unsigned long long)f->n);
		el_fault_to_text(&what, f);
		prt_char(&what, ')');
		tfs_strscpy(e->what, printbuf_str(&what), sizeof(e->what));
	}
	printf("errloop %s %s\n", f->io ? "io" : "alloc", e->what);
	fflush(stdout);
	e->failed = false;
	e->xfailed = false;

	for (unsigned i = 0; i < t->nr; i++) {
		pt_copy_file(op == EL_OP_mount ? e->dirty[i] : e->clean[i], t->path[i]);
		t->rule[i][0] = 0;
	}
	if (op == EL_OP_mount) {
		el_arm_open(e, f);
		el_window(e, false);
		op_ret = pt_open(t);
		el_window(e, true);
		reached = el_reached(f);
		if (!op_ret) {
			follow_ret = el_follow_up(t);
			stop_ret = pt_stop(t);
		}
	} else {
		ret = pt_open(t) ?: el_prepare(e, op);
		if (ret) {
			el_fail(e, "open or prepare without faults: %s", tfs_err_str(ret));
			el_disarm(e, f);
			if (t->fs)
				pt_stop(t);
			return false;
		}
		el_arm_live(e, f);
		el_window(e, false);
		if (op == EL_OP_unmount) {
			op_ret = pt_stop(t);
			el_window(e, true);
			reached = el_reached(f);
		} else {
			op_ret = el_run(e, op);
			el_window(e, true);
			reached = el_reached(f);
			if (e->f)
				tfs_release(t->fs, e->f);
			e->f = NULL;
			follow_ret = el_follow_up(t);
			stop_ret = pt_stop(t);
		}
	}
	el_disarm(e, f);
	/*
	 * Every operation but unmount and mount ends with an fsync: its
	 * success is durable whatever the stop says.
	 */
	done = op == EL_OP_unmount ? !op_ret : op == EL_OP_mount ? !op_ret && !stop_ret : !op_ret;
	fsynced = op == EL_OP_fsync && !op_ret;

	ret = pt_open(t);
	if (ret) {
		el_fail(e, "reopen without faults: %s (op %s, stop %s)", tfs_err_str(ret),
			tfs_err_str(op_ret), tfs_err_str(stop_ret));
		return reached;
	}
	ret = (int)pt_fsck(t->fs);
	if (ret)
		el_fail(e, "fsck: %d findings (op %s, stop %s)", ret, tfs_err_str(op_ret),
			tfs_err_str(stop_ret));
	el_check(e, op, done, fsynced);
	el_check_follow_up(e, !follow_ret);
	ret = pt_stop(t);
	if (ret)
		el_fail(e, "clean stop after the check: %s", tfs_err_str(ret));
	if (!reached && op_ret)
		el_fail(e, "returned %s without reaching the fault", tfs_err_str(op_ret));
	/* The stop too: its superblock writes need metadata_replicas_required members only. */
	if (e->healthy_replica && op != EL_OP_mount &&
	    (op_ret || (op != EL_OP_unmount && follow_ret))) {
		el_fail(e, "an error with a healthy replica: %s, then %s", tfs_err_str(op_ret),
			tfs_err_str(follow_ret));
	}
	return reached;
}

static inline bool wanted(enum el_op op)
{
	const char *s = getenv("TFS_ERRLOOP_OPS");
	size_t len = strlen(el_op_names[op]);

	if (!s)
		return true;
	for (const char *p = s; (p = strstr(p, el_op_names[op])); p += len)
		if ((p == s || p[-1] == ',') && (!p[len] || p[len] == ','))
			return true;
	return false;
}

/*
 * The I/O-error loops over every operation (TFS_ERRLOOP_OPS: some), each
 * transient and persistent; prints "figure NAME op=OP kind=K iterations=N
 * failed=F" per pair and returns the failed iterations.  Bounded form:
 * N = 1..16, then every 8th (TFS_LONG=1: every N).
 */
static inline unsigned el_io_loops(struct el *e, const char *figure)
{
	unsigned total_failed = 0;

	for (unsigned op = 0; op < EL_OP_NR; op++) {
		if (!wanted(op))
			continue;
		for (int persistent = 0; persistent < 2; persistent++) {
			struct el_fault f = { .io = true, .persistent = persistent };
			unsigned iterations = 0, failed = 0, xfailed = 0;

			for (f.n = 1;; f.n += f.n < 16 || el_long() ? 1 : 8) {
				bool reached = el_iteration(e, op, &f);

				iterations++;
				failed += e->failed;
				xfailed += e->xfailed && !e->failed;
				if (!reached)
					break;
				if (f.n > 100000) {
					fprintf(stderr, "errloop: %s never completes\n", e->what);
					failed++;
					break;
				}
			}
			printf("figure %s op=%s kind=%s iterations=%u failed=%u xfail=%u\n", figure,
			       el_op_names[op], persistent ? "persistent" : "transient", iterations,
			       failed, xfailed);
			total_failed += failed;
		}
	}
	return total_failed;
}

#endif /* TFS_TESTS_FAULT_ERRLOOP_H */
