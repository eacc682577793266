/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_ERRSEQ_H
#define TFS_LIB_ERRSEQ_H

/*
 * Error sequences (after the kernel's errseq_t): one word that records the
 * latest error of an object (an inode's writeback, a filesystem) so that
 * each of many readers (open files) sees every error once.
 *
 * The word holds the latest error code, a "seen" flag and a counter.
 * Recording an error after the last one was seen bumps the counter, so a
 * reader's sample tells "something happened since" even when the code is
 * the same.  A reader keeps a sample (tfs_errseq_sample(), at open) and
 * asks tfs_errseq_check_and_advance() on every fsync: it returns the error
 * once per recorded error the reader had not seen, then 0.
 *
 * Invariants:
 *  - A reader sampling while an error is recorded but not yet seen by
 *    anyone gets a sample that still reports it (an opener after the
 *    error sees it, if nobody has).
 *  - Errors recorded while nobody looked are folded: a reader sees the
 *    latest one, once.
 *  - Codes are negative (-EIO or a tinyfs code); 0 records nothing.
 *
 * Every function is lock-free and may be called from any thread.
 */

#include <stdbool.h>

#include "lib/types.h"

typedef u64 tfs_errseq_t;

/* Records err (negative; 0 is ignored).  Returns the new value. */
tfs_errseq_t tfs_errseq_set(tfs_errseq_t *eseq, int err);

/* A reader's starting point: 0 when an unseen error is recorded (so it will be reported). */
tfs_errseq_t tfs_errseq_sample(tfs_errseq_t *eseq);

/* Whether an error was recorded after the sample since (no side effects). */
int tfs_errseq_check(tfs_errseq_t *eseq, tfs_errseq_t since);

/*
 * Returns the latest error recorded after *since (0 if none), marks it
 * seen and moves *since to it, so the next call returns 0 until another
 * error is recorded.
 */
int tfs_errseq_check_and_advance(tfs_errseq_t *eseq, tfs_errseq_t *since);

#endif /* TFS_LIB_ERRSEQ_H */
