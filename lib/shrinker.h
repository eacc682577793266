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
	unsigned long last_asked, last_freed;
};

/*
 * Creates a registry with a budget in bytes (0: no budget, only pressure
 * and on-demand runs) and starts its thread (and PSI trigger when
 * use_psi).  0 or a code.
 */
int tfs_shrinkers_init(struct tfs_shrinkers **ret, size_t budget, bool use_psi);
/* Stops the thread and frees the registry; shrinkers must be unregistered. */
void tfs_shrinkers_exit(struct tfs_shrinkers *r);

void tfs_shrinker_register(struct tfs_shrinkers *r, struct tfs_shrinker *s);
/* Waits for a scan of s in progress to end. */
void tfs_shrinker_unregister(struct tfs_shrinker *s);

/* A cache's memory grew: wakes the registry's thread if over the budget. */
void tfs_shrinkers_kick(struct tfs_shrinkers *r);

/*
 * Scans now, from the caller's thread, until the caches hold at most
 * target bytes (0: free what can be freed).  Returns bytes freed.
 */
size_t tfs_shrinkers_run(struct tfs_shrinkers *r, size_t target);

size_t tfs_shrinkers_budget(struct tfs_shrinkers *r);
/* Total bytes the registered caches hold. */
size_t tfs_shrinkers_bytes(struct tfs_shrinkers *r);

/* Budget, PSI state, each shrinker's count, bytes, last scan and totals. */
void tfs_shrinkers_to_text(struct printbuf *out, struct tfs_shrinkers *r);

#endif /* TFS_LIB_SHRINKER_H */
