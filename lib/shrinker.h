/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_SHRINKER_H
#define TFS_LIB_SHRINKER_H

/*
 * Shrinkers: caches (the btree node cache, the key cache) register how to
 * count and free their memory, and one registry decides when to ask them.
 *
 * A registry has a memory budget (bytes).  Caches report what they hold
 * with tfs_shrinker_account(); when the total passes the budget, the
 * registry's thread asks each shrinker to scan, in proportion to what it
 * holds (and inversely to its seeks: what an object costs to recreate),
 * until the total is back under the budget or nothing more can be freed.
 * It also runs on memory pressure (a PSI trigger on /proc/pressure/memory
 * where the kernel has one; where it has not, the registry says so once in
 * its to_text and relies on the budget) and on demand (tfs_shrinkers_run()).
 *
 * Invariants:
 *  - scan() is called from one thread at a time per shrinker, never with a
 *    registry lock held, so it may take the cache's own locks.
 *  - A scan that frees nothing is not an error (dirty or locked objects
 *    stay); the registry does not loop on a shrinker that made no progress.
 *  - Each shrinker's last scan (asked, freed) and totals show in to_text.
 *
 * How much each shrinker is asked (one "run"): the bytes to free (total
 * minus target) are shared among the shrinkers in proportion to
 * bytes / seeks, and each share is turned into objects as
 * count * share / bytes (rounded up, at least 1, at most count).  A
 * shrinker whose scan freed nothing is not asked again in that run.  While
 * the total stays above the target, each further round doubles the asks of
 * the shrinkers still making progress (objects that cannot be freed, dirty
 * ones, inflate bytes but not count), but no shrinker frees more in a run
 * than its first-round share (unless the target is 0): what one cache
 * cannot free (dirty nodes) is not taken out of another cache's working
 * set; the run ends over the target and the cache with dirty objects writes
 * them back.  A run ends
 * when the total is at or
 * below the target, when no shrinker made progress, or after
 * TFS_SHRINKER_MAX_ROUNDS rounds.
 *
 * One budget for every cache (direct reclaim): a cache about to allocate
 * calls tfs_shrinkers_reserve() first; when what the caches hold plus the
 * new allocation would pass the budget, the caller runs the shrinkers
 * itself (the same shares as above) down to the low watermark less the new
 * allocation (and, if a cache could not give its share, a second run
 * without the cap frees just the new allocation's room), so the caches together stay within the budget however fast
 * they grow, and the one growing takes memory from the others when it is
 * their turn (the oldest of each, by their scans' rules).  The highest
 * total a reserve let through is kept (max_held, in the stats): with every
 * cache reserving before it grows and objects to free, it never passes the
 * budget.  A reserve measures the total (the caches' bytes(), which may
 * take their locks) only when an estimate -- the last measured total plus
 * every reserve since -- would pass the budget, or every 64th reserve (for
 * growth that reserves nothing); otherwise it is two atomics.
 * A reserve that cannot make room (every object dirty or locked)
 * lets the allocation go over and counts it (over_budget): the caches'
 * own write-back brings them back.
 *
 * When the thread runs: a kick (or tfs_shrinker_account() growing) finding
 * the total above the budget shrinks to the low watermark, 7/8 of the
 * budget, so a cache growing by one object does not scan on every
 * allocation.  A PSI event (the kernel saw tasks stall on memory) frees an
 * eighth of what the caches hold, whatever the budget.
 *
 * PSI: the trigger is "some 150000 1000000" (150 ms of stall in 1 s); the
 * kernel only allows windows that are multiples of 2 s to a process
 * without CAP_SYS_RESOURCE, so on EINVAL or EPERM the registry retries
 * with "some 300000 2000000".  Where neither works (no PSI in the kernel,
 * no /proc/pressure), to_text says so and only the budget triggers scans.
 *
 * Locking: the registry lock is never held across a callback (count, scan,
 * bytes), and tfs_shrinkers_kick() and tfs_shrinker_account() take no lock,
 * so a cache may call them with its own locks held.  Unregister waits for a
 * callback of that shrinker in progress, so a cache must not unregister
 * while holding a lock its own scan takes.
 */

#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"

struct printbuf;
struct tfs_shrinkers;

struct tfs_shrinker {
	const char *name;
	/* Objects that could be freed now (a cheap estimate). */
	unsigned long (*count)(struct tfs_shrinker *s);
	/* Tries to free nr_to_scan objects; returns how many it freed. */
	unsigned long (*scan)(struct tfs_shrinker *s, unsigned long nr_to_scan);
	/* Bytes the cache holds now (for the budget). */
	size_t (*bytes)(struct tfs_shrinker *s);
	unsigned seeks; /* cost to recreate an object; 2 is the default */
	void *private;

	/* The registry's. */
	struct tfs_shrinkers *registry;
	struct tfs_shrinker *next;
	u64 nr_scans, nr_asked, nr_freed;
	u64 nr_no_progress; /* scans that freed nothing */
	unsigned long last_asked, last_freed;
	size_t accounted; /* tfs_shrinker_account()'s sum (atomic) */
	bool busy;	  /* a callback is running (under the registry lock) */
};

/* Rounds of one run at most (see the top of this file). */
#define TFS_SHRINKER_MAX_ROUNDS 8

struct tfs_shrinkers_opts {
	size_t budget; /* bytes; 0: no budget */
	bool use_psi;
	/* The PSI file (NULL: /proc/pressure/memory); tests point it at
	 * /proc/pressure/cpu, which they can make fire. */
	const char *psi_path;
};

/*
 * Creates a registry with a budget in bytes (0: no budget, only pressure
 * and on-demand runs) and starts its thread (and PSI trigger when
 * use_psi).  0 or a code.
 */
int tfs_shrinkers_init(struct tfs_shrinkers **ret, size_t budget, bool use_psi);
/* The same with every option. */
int tfs_shrinkers_init_opts(struct tfs_shrinkers **ret, const struct tfs_shrinkers_opts *opts);
/* Stops the thread and frees the registry; shrinkers must be unregistered. */
void tfs_shrinkers_exit(struct tfs_shrinkers *r);

/*
 * Adds s (name, count, scan and seeks set; bytes optional) to r.  The
 * registry's fields of s are reset; s->accounted starts at 0.
 */
void tfs_shrinker_register(struct tfs_shrinkers *r, struct tfs_shrinker *s);
/*
 * Removes s; waits for a callback of s in progress (a scan) to end.  No
 * callback of s runs after it returns.  Unregistering an unregistered
 * shrinker does nothing.
 */
void tfs_shrinker_unregister(struct tfs_shrinker *s);

/*
 * For caches without a bytes() callback: the cache's memory changed by
 * delta bytes.  Lock-free; the accounted total of the registry growing past
 * the budget kicks the thread (a cache with a bytes() callback kicks for
 * itself).  Must not race with the unregistering of s.
 */
void tfs_shrinker_account(struct tfs_shrinker *s, long delta);

/*
 * A cache is about to allocate bytes: makes room first if the total would
 * pass the budget (see the top of this file).  True when the total plus
 * bytes fits the budget (always without a budget).  Runs shrinkers from
 * the caller's thread, so the caller must not hold a lock a scan waits for
 * (the node cache's scan only trylocks trees, so a tree lock is fine; the
 * key cache's lock is not).
 */
bool tfs_shrinkers_reserve(struct tfs_shrinkers *r, size_t bytes);

/*
 * A cache's memory grew: wakes the registry's thread, which scans if the
 * total is over the budget.  Lock-free (an atomic and, at most once per
 * wake-up, an eventfd write).
 */
void tfs_shrinkers_kick(struct tfs_shrinkers *r);

/*
 * Waits until the thread has handled every kick made before the call
 * (scanned if the total was over the budget).  For tests and for callers
 * that want memory back before going on.
 */
void tfs_shrinkers_sync(struct tfs_shrinkers *r);

/*
 * Scans now, from the caller's thread, until the caches hold at most
 * target bytes (0: free what can be freed).  Returns bytes freed.
 */
size_t tfs_shrinkers_run(struct tfs_shrinkers *r, size_t target);

size_t tfs_shrinkers_budget(struct tfs_shrinkers *r);
/* Total bytes the registered caches hold (calls their bytes()). */
size_t tfs_shrinkers_bytes(struct tfs_shrinkers *r);

/* Whether the PSI trigger is armed (false: absent, not asked for, or lost). */
bool tfs_shrinkers_psi_active(struct tfs_shrinkers *r);

/* Counters: runs (by the thread for the budget, for PSI events, on demand). */
struct tfs_shrinkers_stats {
	u64 runs_budget, runs_psi, runs_demand, psi_events, kicks;
	u64 reserves;	 /* tfs_shrinkers_reserve() calls */
	u64 runs_direct; /* reserves that had to shrink first */
	u64 over_budget; /* reserves that could not make room */
	u64 max_held;	 /* the highest total + allocation a reserve let through */
};
void tfs_shrinkers_stats(struct tfs_shrinkers *r, struct tfs_shrinkers_stats *st);

/* Budget, PSI state, each shrinker's count, bytes, last scan and totals. */
void tfs_shrinkers_to_text(struct printbuf *out, struct tfs_shrinkers *r);

#endif /* TFS_LIB_SHRINKER_H */
