// SPDX-License-Identifier: GPL-2.0
/*
 * Error sequences (lib/errseq.h).
 *
 * Layout of the word: bits 0..15 the error code (positive), bit 16 "seen",
 * bits 17..63 a counter bumped when an error is recorded after the previous
 * one was seen.  A value of 0 means no error was ever recorded.
 */
#include "lib/errseq.h"

#define ERRSEQ_ERR_MASK 0xffffULL
#define ERRSEQ_SEEN (1ULL << 16)
#define ERRSEQ_CTR_INC (1ULL << 17)

tfs_errseq_t tfs_errseq_set(tfs_errseq_t *eseq, int err)
{
	tfs_errseq_t old = __atomic_load_n(eseq, __ATOMIC_ACQUIRE), new;

	if (!err)
		return old;
	if (err < 0)
		err = -err;
	if ((u64)err > ERRSEQ_ERR_MASK)
		err = 5; /* EIO: codes never get this large */
	do {
		new = (old & ~(ERRSEQ_ERR_MASK | ERRSEQ_SEEN)) | (u64)err;
		/* Someone saw the previous error: make this one new to them. */
		if (old & ERRSEQ_SEEN)
			new += ERRSEQ_CTR_INC;
		if (new == old)
			return old;
	} while (!__atomic_compare_exchange_n(eseq, &old, new, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return new;
}

tfs_errseq_t tfs_errseq_sample(tfs_errseq_t *eseq)
{
	tfs_errseq_t old = __atomic_load_n(eseq, __ATOMIC_ACQUIRE);

	/* An error nobody saw yet: start before it so this reader sees it too. */
	if (!(old & ERRSEQ_SEEN))
		return 0;
	return old;
}

int tfs_errseq_check(tfs_errseq_t *eseq, tfs_errseq_t since)
{
	tfs_errseq_t cur = __atomic_load_n(eseq, __ATOMIC_ACQUIRE);

	if ((cur | ERRSEQ_SEEN) == (since | ERRSEQ_SEEN) || !(cur & ERRSEQ_ERR_MASK))
		return 0;
	return -(int)(cur & ERRSEQ_ERR_MASK);
}

int tfs_errseq_check_and_advance(tfs_errseq_t *eseq, tfs_errseq_t *since)
{
	tfs_errseq_t old = __atomic_load_n(eseq, __ATOMIC_ACQUIRE);

	do {
		if ((old | ERRSEQ_SEEN) == (*since | ERRSEQ_SEEN) || !(old & ERRSEQ_ERR_MASK))
			return 0;
		if (old & ERRSEQ_SEEN)
			break;
		/* Mark it seen, so the next error recorded bumps the counter. */
	} while (!__atomic_compare_exchange_n(eseq, &old, old | ERRSEQ_SEEN, false,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	*since = old | ERRSEQ_SEEN;
	return -(int)(old & ERRSEQ_ERR_MASK);
}
