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

static bool wanted(enum el_op op)
{
	const char *s = getenv("TFS_ERRLOOP_OPS");
	size_t len = strlen(el_op_names[op]);

	if (!s)
		return true;
	for (const char *p = s; (p = strstr(p, el_op_names[op])); p += len)
		if ((p == s || p[-1] == ',') && (!p[len] || p[len] == ','))
			return true;
	return false;
}

int main(void)
{
	struct el e;
	unsigned total_failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	el_init(&e);
	for (unsigned op = 0; op < EL_OP_NR; op++) {
		if (!wanted(op))
			continue;
		for (int persistent = 0; persistent < 2; persistent++) {
			struct el_fault f = { .io = true, .persistent = persistent };
			unsigned iterations = 0, failed = 0;

			for (f.n = 1;; f.n += f.n < 16 || el_long() ? 1 : 8) {
				bool reached = el_iteration(&e, op, &f);

				iterations++;
				failed += e.failed;
				if (!reached)
					break;
				if (f.n > 100000) {
					fprintf(stderr, "errloop: %s never completes\n", e.what);
					failed++;
					break;
				}
			}
			printf("figure errloop op=%s kind=%s iterations=%u failed=%u\n",
			       el_op_names[op], persistent ? "persistent" : "transient", iterations,
			       failed);
			total_failed += failed;
		}
	}
	el_exit(&e);
	return total_failed ? 1 : 0;
}
