// SPDX-License-Identifier: GPL-2.0
/*
 * Six locks (lib/six.h): one 32-bit state word changed by compare-and-swap,
 * a mutex and a condition variable only for sleeping.
 *
 * state: bits 0..27 count readers; SIX_INTENT is set while intent is held;
 * SIX_WRITE from the moment the intent holder starts taking write until it
 * releases it (readers cannot get in once it is set, so write is held as
 * soon as the reader count reaches zero); SIX_SLEEPERS while some thread
 * sleeps (or is about to) on `wait`.
 *
 * No lost wake-up: a sleeper sets SIX_SLEEPERS with an atomic RMW while
 * holding wait_lock, then checks its condition from the state that RMW
 * returned, and only then waits (which releases wait_lock).  A releaser
 * changes the state with an RMW; both RMWs are ordered on the one word, so
 * either the sleeper sees the release, or the releaser sees SIX_SLEEPERS
 * and broadcasts under wait_lock, which it can only take once the sleeper
 * is waiting.  Every sleeper is woken by every broadcast and checks again.
 */
#include <time.h>

#include "lib/printbuf.h"
#include "lib/six.h"

#define SIX_READERS_MASK ((1U << 28) - 1)
#define SIX_INTENT (1U << 28)
#define SIX_WRITE (1U << 29)
#define SIX_SLEEPERS (1U << 30)

static const char *const six_mode_names[] = {
#define x(n) #n,
	TFS_SIX_LOCK_MODES()
#undef x
};

const char *tfs_six_lock_mode_str(enum tfs_six_lock_mode mode)
{
	return (unsigned)mode < TFS_SIX_LOCK_NR ? six_mode_names[mode] : "(unknown)";
}

void tfs_six_lock_init(struct tfs_six_lock *lock)
{
	*lock = (struct tfs_six_lock){ 0 };
	pthread_mutex_init(&lock->wait_lock, NULL);
	pthread_cond_init(&lock->wait, NULL);
}

void tfs_six_lock_exit(struct tfs_six_lock *lock)
{
	pthread_mutex_destroy(&lock->wait_lock);
	pthread_cond_destroy(&lock->wait);
}

static u32 six_state(const struct tfs_six_lock *lock)
{
	return __atomic_load_n(&lock->state, __ATOMIC_ACQUIRE);
}

/* --- trylocks: the whole fast path --- */

bool tfs_six_trylock_read(struct tfs_six_lock *lock)
{
	u32 old = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);

	do {
		if (old & SIX_WRITE)
			return false;
	} while (!__atomic_compare_exchange_n(&lock->state, &old, old + 1, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

bool tfs_six_trylock_intent(struct tfs_six_lock *lock)
{
	u32 old = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);

	do {
		if (old & SIX_INTENT)
			return false;
	} while (!__atomic_compare_exchange_n(&lock->state, &old, old | SIX_INTENT, true,
					      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
	return true;
}

/* Write taken (the reader count reached zero with SIX_WRITE set): seq goes odd. */
static void six_write_taken(struct tfs_six_lock *lock)
{
	__atomic_add_fetch(&lock->seq, 1, __ATOMIC_RELEASE);
}

bool tfs_six_trylock_write(struct tfs_six_lock *lock)
{
	u32 old = __atomic_load_n(&lock->state, __ATOMIC_RELAXED);

	do {
		if (old & SIX_READERS_MASK)
			return false;
	} while (!__atomic_compare_exchange_n(&lock->state, &old, old | SIX_WRITE, true,
					      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
	six_write_taken(lock);
	return true;
}

/* --- sleeping --- */

static u64 six_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

/* Wakes every sleeper if the state a release left (v) says there are any. */
static void six_wake(struct tfs_six_lock *lock, u32 v)
{
	if (!(v & SIX_SLEEPERS))
		return;
	pthread_mutex_lock(&lock->wait_lock);
	pthread_cond_broadcast(&lock->wait);
	pthread_mutex_unlock(&lock->wait_lock);
}

/*
 * Sleeps until ready(state) holds or try() succeeds: try is attempted each
 * time the state may have changed.  For write, try is "no readers left" (the
 * SIX_WRITE bit is already set).  Counted once per acquisition.
 */
static void six_slowpath(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode,
			 bool (*try)(struct tfs_six_lock *))
{
	u64 t0 = six_clock_ns();

	__atomic_add_fetch(&lock->waits[mode], 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&lock->wait_lock);
	lock->nr_sleepers++;
	while (1) {
		/* Published before the last try: a release after it sees us. */
		__atomic_fetch_or(&lock->state, SIX_SLEEPERS, __ATOMIC_SEQ_CST);
		if (try(lock))
			break;
		pthread_cond_wait(&lock->wait, &lock->wait_lock);
	}
	if (!--lock->nr_sleepers)
		__atomic_fetch_and(&lock->state, ~SIX_SLEEPERS, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock->wait_lock);
	__atomic_add_fetch(&lock->wait_ns[mode], six_clock_ns() - t0, __ATOMIC_RELAXED);
}

void tfs_six_lock_read(struct tfs_six_lock *lock)
{
	if (!tfs_six_trylock_read(lock))
		six_slowpath(lock, TFS_SIX_LOCK_read, tfs_six_trylock_read);
}

void tfs_six_lock_intent(struct tfs_six_lock *lock)
{
	if (!tfs_six_trylock_intent(lock))
		six_slowpath(lock, TFS_SIX_LOCK_intent, tfs_six_trylock_intent);
}

static bool six_readers_gone(struct tfs_six_lock *lock)
{
	return !(six_state(lock) & SIX_READERS_MASK);
}

void tfs_six_lock_write(struct tfs_six_lock *lock)
{
	/* Readers out first (they see SIX_WRITE and wait), then the ones in to leave. */
	u32 old = __atomic_fetch_or(&lock->state, SIX_WRITE, __ATOMIC_ACQUIRE);

	if (old & SIX_READERS_MASK)
		six_slowpath(lock, TFS_SIX_LOCK_write, six_readers_gone);
	six_write_taken(lock);
}

void tfs_six_unlock_read(struct tfs_six_lock *lock)
{
	u32 v = __atomic_sub_fetch(&lock->state, 1, __ATOMIC_SEQ_CST);

	/* Only a writer waits for readers to leave. */
	if (!(v & SIX_READERS_MASK) && (v & SIX_WRITE))
		six_wake(lock, v);
}

void tfs_six_unlock_intent(struct tfs_six_lock *lock)
{
	six_wake(lock, __atomic_and_fetch(&lock->state, ~SIX_INTENT, __ATOMIC_SEQ_CST));
}

void tfs_six_unlock_write(struct tfs_six_lock *lock)
{
	__atomic_add_fetch(&lock->seq, 1, __ATOMIC_RELEASE);
	six_wake(lock, __atomic_and_fetch(&lock->state, ~SIX_WRITE, __ATOMIC_SEQ_CST));
}

bool tfs_six_trylock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode)
{
	switch (mode) {
	case TFS_SIX_LOCK_read:
		return tfs_six_trylock_read(lock);
	case TFS_SIX_LOCK_intent:
		return tfs_six_trylock_intent(lock);
	default:
		return tfs_six_trylock_write(lock);
	}
}

void tfs_six_lock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode)
{
	switch (mode) {
	case TFS_SIX_LOCK_read:
		tfs_six_lock_read(lock);
		break;
	case TFS_SIX_LOCK_intent:
		tfs_six_lock_intent(lock);
		break;
	default:
		tfs_six_lock_write(lock);
	}
}

void tfs_six_unlock(struct tfs_six_lock *lock, enum tfs_six_lock_mode mode)
{
	switch (mode) {
	case TFS_SIX_LOCK_read:
		tfs_six_unlock_read(lock);
		break;
	case TFS_SIX_LOCK_intent:
		tfs_six_unlock_intent(lock);
		break;
	default:
		tfs_six_unlock_write(lock);
	}
}

bool tfs_six_relock_read(struct tfs_six_lock *lock, u32 seq)
{
	if (!tfs_six_trylock_read(lock))
		return false;
	if (tfs_six_lock_seq(lock) == seq)
		return true;
	tfs_six_unlock_read(lock);
	return false;
}

bool tfs_six_relock_intent(struct tfs_six_lock *lock, u32 seq)
{
	if (!tfs_six_trylock_intent(lock))
		return false;
	/* Write is taken only by the intent holder (us now): seq cannot move under us. */
	if (tfs_six_lock_seq(lock) == seq)
		return true;
	tfs_six_unlock_intent(lock);
	return false;
}

unsigned tfs_six_lock_readers(const struct tfs_six_lock *lock)
{
	return six_state(lock) & SIX_READERS_MASK;
}

bool tfs_six_lock_intent_held(const struct tfs_six_lock *lock)
{
	return six_state(lock) & SIX_INTENT;
}

bool tfs_six_lock_write_held(const struct tfs_six_lock *lock)
{
	u32 s = six_state(lock);

	return (s & SIX_WRITE) && !(s & SIX_READERS_MASK);
}

void tfs_six_lock_to_text(struct printbuf *out, const struct tfs_six_lock *lock)
{
	for (unsigned m = 0; m < TFS_SIX_LOCK_NR; m++)
		prt_printf(
			out, "%s%s %llu (%llu us)", m ? ", " : "", six_mode_names[m],
			(unsigned long long)__atomic_load_n(&lock->waits[m], __ATOMIC_RELAXED),
			(unsigned long long)__atomic_load_n(&lock->wait_ns[m], __ATOMIC_RELAXED) /
				1000);
}
