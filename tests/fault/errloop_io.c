// SPDX-License-Identifier: GPL-2.0
/*
 * The I/O-error loop (FAULTS.md, issue 13 item 3): for each operation,
 * the fault device fails the Nth I/O (any op: read, write, flush) for
 * N = 1, 2, ... until the operation completes without reaching it, once
 * with a transient error (only the Nth fails) and once with a persistent
 * one (the Nth and every later one); errloop.h says what each iteration
 * checks.  Prints "figure errloop op=OP kind=K iterations=N failed=F".
 *
 * Bounded form: N = 1..16, then every 8th (TFS_LONG=1: every N).
 * TFS_ERRLOOP_OPS=op,op runs only those operations; TFS_ERRLOOP_ACTION=short
 * (any fault-device action) replaces fail=EIO.
 */
#include "errloop.h"

int main(void)
{
	struct el e;
	unsigned failed;

	setvbuf(stdout, NULL, _IOLBF, 0);
	el_init(&e, NULL);
	failed = el_io_loops(&e, "errloop");
	el_exit(&e);
	return failed ? 1 : 0;
}
