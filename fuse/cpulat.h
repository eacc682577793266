/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_FUSE_CPULAT_H
#define TFS_FUSE_CPULAT_H

/*
 * Low CPU wake-up latency while the mount is busy (fuse/cpulat.c).
 *
 * Every FUSE request is a round trip between the caller and the daemon, and
 * each side sleeps while the other works.  An idle CPU enters an idle state
 * whose exit costs time: on the 2-core KVM guest (cpuidle-haltpoll with
 * guest_halt_poll_ns 0) a halted vCPU takes 15-45 us to wake, more than the
 * daemon's whole work on a create.  The kernel's CPU latency QoS
 * (/dev/cpu_dma_latency, as tuned's latency-performance profile and
 * low-latency daemons use it) lets a process ask for a wake-up latency
 * bound: while a request of 0 us is held, idle CPUs poll (cpuidle's POLL
 * state) and a wake-up is a flag the polling CPU sees at once.
 *
 * The request is held only while FUSE requests come in a burst (less than
 * 1 ms apart): the second of a burst after a quiet spell takes it, and it
 * is dropped hold_ms after the last request of a burst, so an idle mount,
 * or one sent a request now and then, costs no CPU.  Closing the descriptor (the daemon's exit,
 * kill -9 included) drops it too.
 */

#include <stdbool.h>

#include "lib/printbuf.h"

struct tfs_cpulat;

/*
 * Opens path (/dev/cpu_dma_latency; tests pass a regular file) and starts
 * the thread that drops the request hold_ms after the last touch.  Never
 * NULL unless out of memory; when the file cannot be opened (not root, no
 * such device) the returned state is inert and its to_text says why.
 * hold_ms 0: off (inert, no file opened).
 */
struct tfs_cpulat *tfs_cpulat_start(const char *path, unsigned hold_ms);
/* Drops the request, ends the thread, frees c (NULL: nothing). */
void tfs_cpulat_stop(struct tfs_cpulat *c);

/*
 * A request came: if it came within a burst's gap (1 ms) of the touch
 * before, the latency request is held (taken now if it was not) until
 * hold_ms after it.  Lock-free when already held; c may be NULL.
 */
void tfs_cpulat_touch(struct tfs_cpulat *c);

/* Whether the 0 us request is held now. */
bool tfs_cpulat_held(struct tfs_cpulat *c);

/* Settings, state and counters, one line (`tinyfs stats MNT fuse`). */
void tfs_cpulat_to_text(struct printbuf *out, struct tfs_cpulat *c);

#endif /* TFS_FUSE_CPULAT_H */
