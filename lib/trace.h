/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_TRACE_H
#define TFS_LIB_TRACE_H

/*
 * Trace points: USDT probes (provider "tinyfs") at the places the seeds
 * care about: a journal reservation that has to wait (and why), a journal
 * write that failed, a halt, a block-device error, a shrinker scan
 * (shrinker_scan(name, nr_to_scan, freed), lib/shrinker.c).  They cost a nop when no
 * tracer is attached, and show in `readelf -n` as stapsdt notes, so perf,
 * bpftrace and systemtap can attach to them:
 *
 *	perf probe -x build/tools/tinyfs sdt_tinyfs:journal_res_wait
 *	bpftrace -e 'usdt:build/tools/tinyfs:tinyfs:journal_write_error { ... }'
 *
 * Counters, shown by each object's to_text, are the other half: tests
 * assert on those.  Without <sys/sdt.h> (systemtap-sdt-dev) the probes
 * compile to nothing.
 */

#if defined(__has_include) && __has_include(<sys/sdt.h>)
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
#define tfs_trace(name, ...) STAP_PROBEV(tinyfs, name, ##__VA_ARGS__)
#else
#define tfs_trace(name, ...) \
	do {                 \
	} while (0)
#endif

#endif /* TFS_LIB_TRACE_H */
