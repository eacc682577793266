/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULT_TRACE_H
#define TFS_LIB_FAULT_TRACE_H

/*
 * The fault device's trace (lib/faultdev.h): with tracing on, every op a
 * fault device runs and every mark a caller adds (tfs_faultdev_mark())
 * becomes one entry, in execution order, with the data that reached the
 * lower device.  A published entry never changes and lives until the device
 * is closed, so readers hold entries by pointer without a lock.
 *
 * Replaying the writes up to write index N onto a copy of the starting
 * image rebuilds the device as it was after write N (faults included): the
 * crash harnesses (tests/fault/) build their crash images from that.  A
 * trace can be saved to a file and loaded or replayed by another process;
 * the file is in native byte order (replayed on the machine that recorded
 * it) and carries a version in its magic: an old file is refused, not
 * misread.
 */

#include "lib/bdev.h"
#include "lib/fault_rule.h"
#include "lib/types.h"

struct printbuf;

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
	/*
	 * Process-wide order, over every fault device: taken when the op starts
	 * to run (or the mark is reached).  An op submitted after another
	 * completed has a larger stamp, so "the entries of every member with a
	 * stamp below T" is a cut a real instant could have made (a power cut
	 * stopping every member at once, FAULTS.md check 6).
	 */
	u64 stamp;
	/* What reached the lower device (writes, discards). */
	unsigned nr_pieces;
	struct tfs_fault_trace_piece *pieces;
};

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
 * Returns 0, or the error (printed with the path).
 */
int tfs_faultdev_trace_save(struct tfs_bdev *bdev, const char *path);
/*
 * tfs_faultdev_replay() from a saved trace.  -EIO (printed) for a truncated
 * or damaged file: what came before the damage may have been written.
 */
int tfs_fault_trace_replay_file(const char *path, struct tfs_bdev *target, u64 upto);

/*
 * Loads a saved trace (every entry, marks and pieces with their data) into
 * *entries[0..*nr), for a harness that builds its own crash images from it
 * after the device was closed.  Free with tfs_fault_trace_free().
 * -EIO for a truncated or damaged file, -TFS_ERR_invalid_argument for
 * something that is not a trace; on error nothing is returned (*nr 0).
 */
int tfs_fault_trace_load(const char *path, struct tfs_fault_trace_entry **entries, unsigned *nr);
/* Frees what tfs_fault_trace_load() returned (NULL is fine). */
void tfs_fault_trace_free(struct tfs_fault_trace_entry *entries, unsigned nr);

#endif /* TFS_LIB_FAULT_TRACE_H */
