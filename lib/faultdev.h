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
 * Rules.  Each rule matches ops (by op, tag, offset range), counts the ops it
 * matches, and fires on some of them (the nth, every k-th, with a seeded
 * probability; at most `times` times); the first rule that fires on an op
 * acts on it.  Every fire prints one line on stderr with the spec that
 * reproduces it.  One seed per device drives every random choice.
 *
 * Specs (TFS_FAULTS, tools' --fault, tfs_faults_parse(),
 * tfs_faultdev_add_rule_str()): an entry of kind "dev", then the device, then
 * words:
 *
 *	dev DEV [seed=S] [sector=512|4096] [trace=on|off] [tracefile=PATH] [RULE]
 *	RULE := [OPS] [tag=T[,T...]] [range=A-B] [nth=N] [every=K] [prob=P]
 *		[times=T] ACTION
 *	OPS := read|write|flush|fua|discard|any[,...]
 *	ACTION := fail[=ERRNO] | drop | tear[=SECTORS] | corrupt[=BYTE]
 *		| short[=BYTES] | delay=MS | reorder[=K] | vanish
 *		| powercut[=none|prefix|prefix:K|random|torn]
 *
 * DEV is a path (as given to tfs_bdev_open(), or the same file by another
 * name), "#N" for the Nth device tfs_bdev_open() opens in this process (from
 * 0), or "*" for every device.  See README.md, "Fault injection".
 */

#include <stdbool.h>

#include "lib/bdev.h"
#include "lib/types.h"

struct printbuf;

/* clang-format off */
#define TFS_FAULT_ACTIONS(x)	\
	x(none)			\
	x(fail)			\
	x(drop)			\
	x(tear)			\
	x(corrupt)		\
	x(short)		\
	x(delay)		\
	x(reorder)		\
	x(vanish)		\
	x(powercut)

#define TFS_POWERCUT_POLICIES(x)	\
	x(none)			\
	x(prefix)		\
	x(random)		\
	x(torn)
/* clang-format on */

enum tfs_fault_action {
#define x(n) TFS_FAULT_ACT_##n,
	TFS_FAULT_ACTIONS(x)
#undef x
	TFS_FAULT_ACT_NR
};

enum tfs_powercut_policy {
#define x(n) TFS_POWERCUT_##n,
	TFS_POWERCUT_POLICIES(x)
#undef x
	TFS_POWERCUT_NR
};

extern const char *const tfs_fault_action_names[];
extern const char *const tfs_powercut_policy_names[];

/* Bit in tfs_fault_rule.ops for writes with TFS_BIO_FUA ("fua"). */
#define TFS_FAULT_MATCH_FUA (1u << TFS_OP_NR)

struct tfs_fault_rule {
	/* Matching: every given condition must hold. */
	unsigned ops;	/* 1 << TFS_OP_x, TFS_FAULT_MATCH_FUA; 0: any op */
	unsigned tags;	/* 1 << TFS_TAG_x; 0: any tag */
	u64 start, end; /* the op must overlap [start, end); end 0: anywhere */
	/* Firing, among the ops the rule matches (counted from 1). */
	u64 nth;   /* the first op that may fire; 0: 1 (or `every`) */
	u64 every; /* then every k-th after it; 0: only the nth */
	u32 ppm;   /* or: each op from the nth on, with this probability */
	u64 times; /* most fires; 0: no limit (a bare nth fires once) */
	/* Acting. */
	enum tfs_fault_action action;
	int err; /* fail: the errno (positive); 0: EIO */
	/*
	 * tear: sectors written (a prefix; 0: a seeded subset); corrupt: the
	 * byte flipped (0: seeded; else offset + 1); short: bytes done (0:
	 * half the sectors); delay: milliseconds; reorder: how many later
	 * completions overtake this one (0: 1); powercut prefix: writes kept
	 * (0: seeded), given as prefix:K.
	 */
	u64 arg;
	enum tfs_powercut_policy policy;
};

/* A fault rule, as spec words (the part after "dev DEV"). */
void tfs_fault_rule_to_text(struct printbuf *out, const struct tfs_fault_rule *rule);

/*
 * Parses the RULE words of a spec (see the top) into rule.  Returns 0,
 * -TFS_ERR_fault_spec_invalid with err saying why.
 */
int tfs_fault_rule_parse(const char *words, struct tfs_fault_rule *rule, struct printbuf *err);

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

/* --- the trace --- */

struct tfs_fault_trace_piece {
	u64 offset;
	u64 len;
	void *data; /* NULL: zeroes (a discard) */
};

struct tfs_fault_trace_entry {
	u64 index;	 /* op number on this device, from 1; 0 for a mark */
	u64 write_index; /* writes and discards so far, this one included */
	enum tfs_bio_op op;
	unsigned flags;
	enum tfs_bio_tag tag;
	u64 offset;
	u64 len;
	u32 csum;   /* crc32c of the data written (as submitted) or read (as returned) */
	int result; /* what end_io got */
	enum tfs_fault_action action; /* injected on this op, or none */
	int rule;		      /* the rule that fired, or -1 */
	char *mark;		      /* non-NULL: a caller's mark, not an op */
	/* What reached the lower device (writes, discards). */
	unsigned nr_pieces;
	struct tfs_fault_trace_piece *pieces;
};

/* Adds a mark to the trace, after every op submitted before it. */
void tfs_faultdev_mark(struct tfs_bdev *bdev, const char *label);
/* Entries so far (ops and marks); the i-th, valid until close. */
unsigned tfs_faultdev_trace_nr(struct tfs_bdev *bdev);
const struct tfs_fault_trace_entry *tfs_faultdev_trace_entry(struct tfs_bdev *bdev, unsigned i);
/* Writes and discards traced so far (the last write_index). */
u64 tfs_faultdev_nr_writes(struct tfs_bdev *bdev);
/* One line per entry: index, device, op, offset, length, flags, tag, csum, result, fault. */
void tfs_faultdev_trace_to_text(struct printbuf *out, struct tfs_bdev *bdev);

/*
 * Replays the traced writes with write_index <= upto (UINT64_MAX: all) onto
 * target, exactly as they reached the lower device (torn, corrupted, short
 * writes included; dropped ones not), then flushes target.  Onto a copy of
 * the starting image this rebuilds the device as it was after that write.
 */
int tfs_faultdev_replay(struct tfs_bdev *bdev, struct tfs_bdev *target, u64 upto);

/*
 * Saves the trace to a file (tracefile=PATH does it at close), so a workload
 * run by another process (mkfs.tinyfs, a FUSE mount) can be replayed.
 */
int tfs_faultdev_trace_save(struct tfs_bdev *bdev, const char *path);
/* tfs_faultdev_replay() from a saved trace. */
int tfs_fault_trace_replay_file(const char *path, struct tfs_bdev *target, u64 upto);

/* --- registered rules (specs), used by tfs_bdev_open() --- */

/*
 * Parses one "dev" entry's words (after the kind) and, with apply, registers
 * it; the parser tfs_faults_parse() calls for kind "dev".
 */
int tfs_faultdev_parse_entry(char **words, unsigned nr, bool apply, struct printbuf *err);

/*
 * Called by tfs_bdev_open() before opening: -TFS_ERR_bdev_vanished (printed)
 * if a fault device over path vanished in this process.
 */
int tfs_faultdev_open_check(const char *path);

/*
 * Called by tfs_bdev_open() with the device it opened: counts the open
 * (for "#N"), and when registered entries match, stacks a fault device
 * owning lower; else *ret = lower.
 */
int tfs_faultdev_stack_registered(struct tfs_bdev *lower, struct tfs_bdev **ret);

/* Remembers that path vanished: tfs_bdev_open() of it fails from now on. */
void tfs_faultdev_mark_vanished(const char *path);

/* Forgets every registered entry, vanished path and the open count. */
void tfs_faultdev_registry_reset(void);
/* The registered entries, one per line, as spec text. */
void tfs_faultdev_registry_to_text(struct printbuf *out);

#endif /* TFS_LIB_FAULTDEV_H */
