/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_RCU_H
#define TFS_LIB_RCU_H

/*
 * RCU for tinyfs: liburcu's memb flavour (membarrier-based: read-side
 * critical sections are a counter update, no signals, no quiescent states
 * to report), wrapped so that every thread that reads RCU-protected data is
 * registered, and so that ThreadSanitizer sees the ordering a grace period
 * gives (liburcu itself is not instrumented).
 *
 * Invariants:
 *  - A thread must be registered before its first read-side critical
 *    section or call_rcu.  tfs_rcu_thread_register() is idempotent and
 *    cheap (a thread-local flag), and the thread is unregistered
 *    automatically when it exits (a pthread key destructor), so every entry
 *    point of a cache simply calls it.  Threads the daemon creates (FUSE
 *    workers, each via tfs_rcu_thread_register() at its start) and the
 *    journal's threads (through the caches' entry points and pin flush
 *    callbacks) are therefore registered whenever they touch a cache.
 *    Never call liburcu's rcu_register_thread() directly as well: a thread
 *    registered twice corrupts liburcu's list.
 *  - Read-side critical sections (tfs_rcu_read_lock/unlock) nest, may not
 *    block on anything a grace period waits for, and must not call
 *    tfs_rcu_synchronize() or tfs_rcu_barrier().
 *  - Memory removed from every RCU-visible structure is freed only after a
 *    grace period: from a tfs_rcu_call() callback (which starts with
 *    tfs_rcu_callback_begin()), or once a grace period known to have
 *    started after the removal has ended.
 */

#include <stdbool.h>

/*
 * Without _LGPL_SOURCE: the read-side primitives are calls into liburcu
 * rather than inlined, so all of liburcu's own synchronization stays in the
 * (uninstrumented) library, where ThreadSanitizer is told to ignore it
 * (tests/tsan.supp), instead of half inlined and instrumented.
 */
#include <urcu/urcu-memb.h>

/* Registers the calling thread with liburcu if it is not yet (see above). */
void tfs_rcu_thread_register(void);
/* Unregisters it now (else at thread exit); must be outside read-side sections. */
void tfs_rcu_thread_unregister(void);
/* Whether the calling thread is registered. */
bool tfs_rcu_thread_registered(void);

#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char tfs_rcu_tsan_sync;
#define tfs_rcu_tsan_release() __tsan_release(&tfs_rcu_tsan_sync)
#define tfs_rcu_tsan_acquire() __tsan_acquire(&tfs_rcu_tsan_sync)
#else
#define tfs_rcu_tsan_release() \
	do {                   \
	} while (0)
#define tfs_rcu_tsan_acquire() \
	do {                   \
	} while (0)
#endif

static inline void tfs_rcu_read_lock(void)
{
	urcu_memb_read_lock();
}

static inline void tfs_rcu_read_unlock(void)
{
	/* For TSan: what the section read happens before a later grace period's end. */
	tfs_rcu_tsan_release();
	urcu_memb_read_unlock();
}

/* Whether the calling thread is inside a read-side critical section. */
static inline bool tfs_rcu_read_ongoing(void)
{
	return urcu_memb_read_ongoing();
}

/*
 * Calls fn(head) after a grace period, from liburcu's call_rcu thread.
 * fn must start with tfs_rcu_callback_begin().
 */
static inline void tfs_rcu_call(struct rcu_head *head, void (*fn)(struct rcu_head *head))
{
	urcu_memb_call_rcu(head, fn);
}

/* First thing in every tfs_rcu_call() callback. */
static inline void tfs_rcu_callback_begin(void)
{
	tfs_rcu_tsan_acquire();
}

/* Waits for a grace period (outside any read-side section). */
void tfs_rcu_synchronize(void);
/* Waits for every tfs_rcu_call() callback queued so far to have run. */
void tfs_rcu_barrier(void);

#endif /* TFS_LIB_RCU_H */
