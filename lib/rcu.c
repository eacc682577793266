// SPDX-License-Identifier: GPL-2.0
/*
 * Thread registration with liburcu (lib/rcu.h): a thread-local flag, and a
 * pthread key whose destructor unregisters a registered thread when it
 * exits, so threads created by libraries (FUSE workers) or that come and go
 * never stay on liburcu's list after they are gone (a grace period would
 * then read a dead thread's counter).
 */
#include <pthread.h>
#include <stdlib.h>

#include "lib/rcu.h"
#include "lib/types.h"

#if defined(__SANITIZE_THREAD__)
char tfs_rcu_tsan_sync;
#endif

static __thread bool rcu_registered;
static pthread_key_t rcu_key;
static pthread_once_t rcu_key_once = PTHREAD_ONCE_INIT;

static void rcu_thread_exit(void *arg)
{
	if (rcu_registered) {
		urcu_memb_unregister_thread();
		rcu_registered = false;
	}
}

static void rcu_key_init(void)
{
	if (pthread_key_create(&rcu_key, rcu_thread_exit))
		abort(); /* only fails when out of keys: a bug */
}

void tfs_rcu_thread_register(void)
{
	if (likely(rcu_registered))
		return;
	pthread_once(&rcu_key_once, rcu_key_init);
	urcu_memb_register_thread();
	rcu_registered = true;
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(rcu_key, (void *)1);
}

void tfs_rcu_thread_unregister(void)
{
	if (!rcu_registered)
		return;
	urcu_memb_unregister_thread();
	rcu_registered = false;
	pthread_setspecific(rcu_key, NULL);
}

bool tfs_rcu_thread_registered(void)
{
	return rcu_registered;
}

void tfs_rcu_synchronize(void)
{
	urcu_memb_synchronize_rcu();
	tfs_rcu_tsan_acquire();
}

void tfs_rcu_barrier(void)
{
	urcu_memb_barrier();
	tfs_rcu_tsan_acquire();
}
