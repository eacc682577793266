// SPDX-License-Identifier: GPL-2.0
/*
 * The I/O-error loop of errloop_io.c on two members with two replicas of
 * data and metadata, the faults on member 0 only (FAULTS.md: "one of two
 * members failing is no error"): every operation and the fsync after it
 * must succeed, and so must the stop (unmount: the node write-back with one
 * copy failing), and what they said is there after the reopen with both
 * members.  Mount may fail (a member that cannot be read at open is
 * reported; degraded opens are not tried).  Prints "figure errloop_replicas op=OP kind=K
 * iterations=N failed=F".  TFS_ERRLOOP_OPS, TFS_ERRLOOP_ACTION and
 * TFS_LONG as errloop_io.
 */
#include "errloop.h"

int main(void)
{
	struct pt_geometry g = {
		.nr_devs = 2,
		.size = 8ULL << 20,
		.metadata_replicas = 2,
		.data_replicas = 2,
		.data_replicas_required = 1,
	};
	struct el e;
	unsigned failed;

	setvbuf(stdout, NULL, _IOLBF, 0);
	el_init(&e, &g);
	e.healthy_replica = true;
	failed = el_io_loops(&e, "errloop_replicas");
	el_exit(&e);
	return failed ? 1 : 0;
}
