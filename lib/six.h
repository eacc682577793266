/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_SIX_H
#define TFS_LIB_SIX_H

/*
 * Six locks (shared / intent / exclusive), after bcachefs's: a reader/writer
 * lock with a third mode, intent, for a thread that will modify what the
 * lock protects but first wants to look at it (and prepare) without keeping
 * readers out.
 *
 * Modes and what they allow at the same time (x: may be held together by
 * different threads):
 *
 *             read   intent   write
 *    read      x       x
 *    intent    x
 *    write
 *
 * Invariants:
 *  - Any number of readers, at most one intent holder, and write is held
 *    only by the intent holder (tfs_six_lock_write() upgrades intent to
 *    write; tfs_six_unlock_write() downgrades back to intent).  Write
 *    excludes everything; intent excludes only intent (and so write).
 *  - seq counts write locks and unlocks: it is incremented when write is
 *    taken and when it is released, so it is odd exactly while write is
 *    held, and unchanged means nothing was modified under write.  A thread
 *    that drops its lock keeps seq (tfs_six_lock_seq()) and relocks with
 *    tfs_six_relock_read() / _intent(), which succeed only if seq is still
 *    the same: then whatever it saw before is still true.
 *  - Writer preference: once the intent holder starts taking write, new
 *    readers wait (and read trylocks fail) until write is released, so a
 *    stream of readers cannot starve a commit.  Hence read is not
 *    recursive: a thread holding read that takes read again may deadlock
 *    with a writer waiting between the two.  Nor may a thread take write
 *    while it holds read on the same lock.
 *  - Lock order is the caller's business: the lock detects no cycles.
 *    Users take several six locks in a fixed order, or trylock the ones
 *    out of order and on failure drop everything and restart (what
 *    btree commits do: fs/btree_update.c).
 *  - Acquisition, when not had at once, is counted per mode with the time
 *    waited (tfs_six_lock_to_text()).  The uncontended path is one
 *    compare-and-swap; blocking waits sleep on a condition variable.
 *
 * Memory ordering: taking a lock is an acquire, releasing it a release, so
 * what a writer did is visible to every later holder of any mode, and what
 * readers read happened before a later write (ThreadSanitizer sees both).
 */

#include <pthread.h>
#include <stdbool.h>

#include "lib/types.h"

struct printbuf;

#define TFS_SIX_LOCK_MODES() x(read) x(intent) x(write)

enum tfs_six_lock_mode {
#define x(n) TFS_SIX_LOCK_##n,
	TFS_SIX_LOCK_MODES()
#undef x
	TFS_SIX_LOCK_NR
};

/* "read", "intent", "write". */
const char *tfs_six_lock_mode_str(enum tfs_six_lock_mode mode);

struct tfs_six_lock {
	/* Readers (low bits), intent held, write held or being taken, sleepers: lib/six.c. */
	u32 state;
	u32 seq;
	pthread_mutex_t wait_lock; /* only for sleeping */
	pthread_cond_t wait;
	unsigned nr_sleepers; /* under wait_lock */
	/* Acquisitions that had to wait, and the time waited (ns), per mode (atomic). */
	u64 waits[TFS_SIX_LOCK_NR];
	u64 wait_ns[TFS_SIX_LOCK_NR];
};

void tfs_six_lock_init(struct tfs_six_lock *lock);
/* The lock must not be held. */
void tfs_six_lock_exit(struct tfs_six_lock *lock);

/* Takes read if no write is held or being taken: true on success.  Never sleeps. */
bool tfs_six_trylock_read(struct tfs_six_lock *lock);
/* Takes intent if no one holds it: true on success.  Never sleeps. */
bool tfs_six_trylock_intent(struct tfs_six_lock *lock);
/* With intent held: takes write if there is no reader.  Never sleeps. */
bool tfs_six_trylock_write(struct tfs_six_lock *lock);

/* Blocking forms: the trylock, else sleep until it succeeds (counted). */
void tfs_six_lock_read(struct tfs_six_lock *lock);
void tfs_six_lock_intent(struct tfs_six_lock *lock);
/* With intent held: blocks new readers, then waits for the readers in to leave. */
void tfs_six_lock_write(struct tfs_six_lock *lock);

void tfs_six_unlock_read(struct tfs_six_lock *lock);
/* Write must have been released first. */
void tfs_six_unlock_intent(struct tfs_six_lock *lock);
/* Back to intent (the caller still holds it); seq moves on. */
void tfs_six_unlock_write(struct tfs_six_lock *lock);

/* By mode (the x-macro's). */
bool tfs_six_trylock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode);
void tfs_six_lock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode);
void tfs_six_unlock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode);

/* The lock's seq now (odd: write held). */
static inline u32 tfs_six_lock_seq(const struct tfs_six_lock *lock)
{
	return __atomic_load_n(&lock->seq, __ATOMIC_ACQUIRE);
}

/*
 * Takes read (trylock) and keeps it only if seq is still `seq`: true means
 * the lock is held and nothing was written since seq was read.  Never
 * sleeps: a writer in the way means something is changing.
 */
bool tfs_six_relock_read(struct tfs_six_lock *lock, u32 seq);
/* The same for intent. */
bool tfs_six_relock_intent(struct tfs_six_lock *lock, u32 seq);

/* Holders now (a snapshot, for tests and assertions): readers, intent, write. */
unsigned tfs_six_lock_readers(const struct tfs_six_lock *lock);
bool tfs_six_lock_intent_held(const struct tfs_six_lock *lock);
bool tfs_six_lock_write_held(const struct tfs_six_lock *lock);

/* The waits: "read 3 (12 us), intent 0 (0 us), write 1 (40 us)". */
void tfs_six_lock_to_text(struct printbuf *out, const struct tfs_six_lock *lock);

#endif /* TFS_LIB_SIX_H */
