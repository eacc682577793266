/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULT_POINT_H
#define TFS_LIB_FAULT_POINT_H

/*
 * Fault points: named places in the code where a test can make a failure
 * happen ("init:fs_alloc", "alloc:printbuf").
 *
 *	if (tfs_fault("init:fs_alloc"))
 *		return -TFS_ERR_ENOMEM_fault_injected;
 *
 * Every tfs_fault() site registers itself statically (a pointer in the
 * "tfs_fault_points" linker section), so the full list is known before any
 * point is reached.  Points are armed by name: a oneshot at the Nth hit,
 * every Nth hit, or with a seeded probability, optionally limited to a number
 * of fires.  While nothing is armed and counting is off, a point costs one
 * predictable branch on a global flag.
 *
 * Every fire prints one line to stderr naming the point, the hit number and
 * the spec that reproduces it.
 *
 * Specs (the TFS_FAULTS environment variable, tools' --fault option, or
 * tfs_faults_parse()) are entries separated by ';'.  A fault-point entry is
 *
 *	point NAME [oneshot|always|nth=N|every=N|prob=P] [seed=S] [times=T]
 *
 * oneshot fires at the next hit, nth=N at the Nth hit after arming (once),
 * every=N at every Nth hit, prob=P (0..1) with probability P from seed S,
 * always at every hit (with nth=N: every hit from the Nth on, a failure that
 * persists from there); times=T stops after T fires.  Other entry kinds (the
 * fault device's "dev" rules) are handed to the parser registered for them.
 */

#include <stdbool.h>

#include "lib/types.h"

struct printbuf;

enum tfs_fault_mode {
	TFS_FAULT_OFF,
	TFS_FAULT_ONESHOT,     /* fire once, at hit number `nth` (1 = next) */
	TFS_FAULT_EVERY_NTH,   /* fire at every nth hit */
	TFS_FAULT_PROBABILITY, /* fire with probability ppm / 1e6 */
	TFS_FAULT_ALWAYS,      /* fire at every hit from hit number `nth` (0, 1: the next) */
};

struct tfs_fault_arm {
	enum tfs_fault_mode mode;
	u64 nth;   /* ONESHOT, EVERY_NTH and ALWAYS; 0 means 1 */
	u32 ppm;   /* PROBABILITY: parts per million */
	u64 seed;  /* PROBABILITY */
	u64 times; /* most fires before disarming; 0: no limit */
};

struct tfs_fault_point {
	const char *name;
	const char *file;
	const char *func;
	unsigned line;
	/* Runtime state; updated under the registry lock. */
	struct tfs_fault_arm arm;
	u64 hits; /* hits while counting or armed */
	u64 hits_since_arm;
	u64 fired;	/* since armed */
	u64 fired_ever; /* since tfs_fault_points_reset(): for tfs_fault_points_never() */
	u64 rng;
};

/* True when some point is armed or counting is on (see below). */
extern bool tfs_fault_points_active;

/* Slow path of tfs_fault(); true when the point fires. */
bool tfs_fault_point_hit(struct tfs_fault_point *p);

#define tfs_fault(_name)                                                                 \
	({                                                                               \
		static struct tfs_fault_point _tfs_fp = {                                \
			.name = (_name),                                                 \
			.file = __FILE__,                                                \
			.func = __func__,                                                \
			.line = __LINE__,                                                \
		};                                                                       \
		static struct tfs_fault_point *_tfs_fp_ptr                               \
			__attribute__((section("tfs_fault_points"), used)) = &_tfs_fp;   \
		(void)_tfs_fp_ptr;                                                       \
		unlikely(__atomic_load_n(&tfs_fault_points_active, __ATOMIC_RELAXED)) && \
			tfs_fault_point_hit(&_tfs_fp);                                   \
	})

/*
 * The seeded generator behind every random choice a fault makes (fault
 * points here, fault devices in lib/faultdev.h): splitmix64, advancing
 * *state; the same seed gives the same choices on every run.
 */
static inline u64 tfs_fault_rand(u64 *state)
{
	u64 z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Arms every site named name.  -TFS_ERR_fault_point_unknown if none. */
int tfs_fault_point_arm(const char *name, const struct tfs_fault_arm *arm);
/* Disarms name; -TFS_ERR_fault_point_unknown if no such point. */
int tfs_fault_point_disarm(const char *name);
/* Disarms everything and zeroes every counter; counting stays as it was. */
void tfs_fault_points_reset(void);
/* Counts hits of every point even when unarmed (for coverage reports). */
void tfs_fault_points_count(bool on);

/*
 * Sum of fires over every site named name since it was last armed; -1 if
 * there is no such point.
 */
s64 tfs_fault_point_fired(const char *name);
/* Sum of hits over every site named name; -1 if there is no such point. */
s64 tfs_fault_point_hits(const char *name);

/* Number of registered sites, and the i-th (stable order). */
unsigned tfs_fault_points_nr(void);
const struct tfs_fault_point *tfs_fault_point_nth(unsigned i);

/* One line per site: name, mode, hits, fired, file:line. */
void tfs_fault_points_to_text(struct printbuf *out);

/*
 * The names (one per line, each once) of the points that never fired since
 * the last tfs_fault_points_reset() (whatever arming came between), or,
 * with by_hits, were never hit (counting on); returns how many.  A harness
 * that must reach every point requires 0.
 */
unsigned tfs_fault_points_never(struct printbuf *out, bool by_hits);

/*
 * A parser for another kind of spec entry ("dev ..."): gets the words after
 * the kind.  It is called twice per entry: first with apply false, to check
 * the entry without acting on it, then (when every entry of the spec was
 * good) with apply true.  Returns 0 or a negative code, writing why into err.
 */
typedef int (*tfs_fault_entry_parser)(char **words, unsigned nr, bool apply, struct printbuf *err);
int tfs_fault_register_kind(const char *kind, tfs_fault_entry_parser parse);

/*
 * Applies a spec (see the top of this file).  On a bad spec nothing is
 * armed, err says what was wrong, and -TFS_ERR_fault_spec_invalid (or
 * -TFS_ERR_fault_point_unknown) is returned.
 */
int tfs_faults_parse(const char *spec, struct printbuf *err);

/*
 * Applies $TFS_FAULTS if set.  Prints the error and returns it when the
 * variable is malformed.
 */
int tfs_faults_from_env(void);

/*
 * tfs_faults_from_env(), unless it already ran in this process (by either
 * name).  tfs_bdev_open() calls it, so every tool and test that opens a
 * device gets $TFS_FAULTS' rules without asking, and a tool that also calls
 * tfs_faults_from_env() itself does not apply them twice.  A malformed
 * variable's error is returned by every call, not only the first, so no
 * later open runs without the faults it asked for.
 */
int tfs_faults_from_env_once(void);

/*
 * For tools' --fault SPEC option: applies spec like tfs_faults_parse() and,
 * when it is bad, prints "PROG: --fault: why" and returns the code (the tool
 * then exits with tfs_err_exit_status()).
 */
int tfs_faults_from_opt(const char *prog, const char *spec);

#endif /* TFS_LIB_FAULT_POINT_H */
