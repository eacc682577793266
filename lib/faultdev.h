/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULTDEV_H
#define TFS_LIB_FAULTDEV_H

/*
 * The fault device: a struct tfs_bdev stacked over another bdev (its
 * "lower"), which injects the faults tinyfs is tested against.  The kernel
 * here has no device-mapper: every device fault comes from here.
 *
 * Execution model.  One worker thread per fault device takes bios in
 * submission order and runs each to completion against the lower device
 * (synchronously), then calls end_io (unless a delay or reorder rule holds
 * the completion back).  Execution is therefore sequential and
 * deterministic: the trace, the volatile-cache log and every seeded choice
 * come out the same on every run of the same workload with the same seed.
 * Submission never blocks (the queue is unbounded; the lower one is
 * bounded).
 *
 * Volatile cache.  A completed write is on the lower device, so it can be
 * read back, but it is not durable: the fault device logs it (its old and
 * new contents) until a FLUSH completes, a PREFLUSH write starts, or, for a
 * FUA write, never (it is durable when it completes).  A power cut rewrites
 * the lower device to the crash image: the durable image plus the logged
 * writes a policy keeps, in completion order; the sector (512 or 4096 bytes,
 * never smaller than the lower's logical block size) is the unit of
 * atomicity: sectors are aligned to the device's start, and a tear, a short
 * write or a torn power cut keeps or loses each aligned sector a bio touches
 * (clipped to the bio) as a whole.  The device is then frozen: every later op
 * fails with -TFS_ERR_bdev_powercut.
 *
 * A write the lower fails (an error, or short after some bytes went down) is
 * logged too, never durable (FUA or not): its bytes may or may not be on the
 * media, so a power cut undoes it and re-applies it only if the policy keeps
 * it, like any unflushed write, with its new data being the sectors it sent
 * down, the failed run included (as submitted).  A write whose pre-image
 * cannot be read fails before anything reaches the lower.
 *
 * Rules (lib/fault_rule.h) say which ops get which fault; the first rule
 * that fires on an op acts on it, and every fire prints the spec that
 * reproduces it.  One seed per device drives every random choice.
 *
 * The API is in four headers, all included here: this one (the device),
 * lib/fault_rule.h (rules and their spec words), lib/fault_trace.h (the
 * trace, its replay and its file) and lib/fault_registry.h (the "dev" spec
 * entries of TFS_FAULTS that tfs_bdev_open() applies).
 */

#include <stdbool.h>

#include "lib/bdev.h"
#include "lib/fault_registry.h"
#include "lib/fault_rule.h"
#include "lib/fault_trace.h"
#include "lib/types.h"

struct printbuf;

/* --- the device --- */

/*
 * Stacks a fault device over lower; with own_lower, closing it closes
 * lower.  Size, block size and path are the lower's.  Seed 0, sector size
 * the larger of 512 and the lower's block size, tracing on, no rules.
 */
int tfs_faultdev_create(struct tfs_bdev *lower, bool own_lower, struct tfs_bdev **ret);

/* True if bdev is a fault device; the others below take only those. */
bool tfs_bdev_is_faultdev(const struct tfs_bdev *bdev);
/* The device below. */
struct tfs_bdev *tfs_faultdev_lower(struct tfs_bdev *bdev);

void tfs_faultdev_set_seed(struct tfs_bdev *bdev, u64 seed);
/* 512 or 4096 (raised to the lower's block size); -EINVAL otherwise. */
int tfs_faultdev_set_sector_size(struct tfs_bdev *bdev, unsigned size);
/* Tracing keeps every op and the data that reached the lower device. */
void tfs_faultdev_set_trace(struct tfs_bdev *bdev, bool on);
/* Turns tracing on and saves the trace to path at close (NULL: do not). */
int tfs_faultdev_set_trace_file(struct tfs_bdev *bdev, const char *path);

/* Appends a rule (its counters start at 0); returns its index. */
int tfs_faultdev_add_rule(struct tfs_bdev *bdev, const struct tfs_fault_rule *rule);
/* Same, from spec words ("write nth=3 fail=EIO"); err says what was bad. */
int tfs_faultdev_add_rule_str(struct tfs_bdev *bdev, const char *words, struct printbuf *err);
/* Removes every rule. */
void tfs_faultdev_clear_rules(struct tfs_bdev *bdev);
/* How often rule i fired / matched; -1 if there is no rule i. */
s64 tfs_faultdev_rule_fired(struct tfs_bdev *bdev, unsigned i);
s64 tfs_faultdev_rule_matched(struct tfs_bdev *bdev, unsigned i);
/* Faults injected so far, over every rule. */
u64 tfs_faultdev_nr_injected(struct tfs_bdev *bdev);
/*
 * Faults injected so far by every fault device this process made, closed
 * ones included (an error loop learns whether an operation that ends by
 * closing the devices, tfs_fs_stop(), reached its fault).
 */
u64 tfs_faultdev_nr_injected_all(void);

/*
 * Pauses the worker: bios queue up and nothing runs until unpaused.  Tests
 * use it to have several bios queued at once (reorder, batches).
 */
void tfs_faultdev_pause(struct tfs_bdev *bdev, bool paused);

/*
 * Cuts the power now: runs what was queued before (even when paused), then
 * rewrites the lower device to the crash image chosen by policy (keep: writes kept for
 * prefix; 0: seeded) and freezes the device.  Returns the lower's error if
 * the image could not be written.
 */
int tfs_faultdev_powercut(struct tfs_bdev *bdev, enum tfs_powercut_policy policy, u64 keep);
/* True once the power was cut, or the device vanished. */
bool tfs_faultdev_frozen(struct tfs_bdev *bdev);

/* What the last power cut kept. */
struct tfs_faultdev_crash {
	bool happened;
	enum tfs_powercut_policy policy;
	unsigned nr_unflushed;	/* writes in the volatile cache at the cut */
	const bool *kept;	/* [nr_unflushed]: in the crash image (FUA ones always) */
	const u64 *write_index; /* [nr_unflushed]: each one's trace write index */
	int torn;		/* index of the torn write, or -1 */
	/* [the aligned sectors the torn write touches, clipped to it]: written */
	const bool *torn_sectors;
	unsigned nr_torn_sectors;
};
/* Valid until the device is closed. */
void tfs_faultdev_crash_info(struct tfs_bdev *bdev, struct tfs_faultdev_crash *info);
/* Writes (and bytes) in the volatile cache now: completed, not durable. */
unsigned tfs_faultdev_nr_unflushed(struct tfs_bdev *bdev);

/* Adds a mark to the trace, after every op submitted before it. */
void tfs_faultdev_mark(struct tfs_bdev *bdev, const char *label);

#endif /* TFS_LIB_FAULTDEV_H */
