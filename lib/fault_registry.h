/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULT_REGISTRY_H
#define TFS_LIB_FAULT_REGISTRY_H

/*
 * The registry of "dev" spec entries: how TFS_FAULTS (and tools' --fault,
 * tfs_faults_parse()) put fault devices under a process that never calls
 * lib/faultdev.h itself.  tfs_faults_parse() hands every "dev" entry to
 * tfs_faultdev_parse_entry(), which registers it; tfs_bdev_open() then asks
 * the registry, for every device it opens, whether to stack a fault device
 * over it and with which settings and rules.
 *
 *	dev DEV [seed=S] [sector=512|4096] [trace=on|off] [tracefile=PATH] [RULE]
 *
 * RULE is a rule's spec words (lib/fault_rule.h).  DEV is a path (as given
 * to tfs_bdev_open(), or the same file by another name: the same inode, or
 * the same block device), "#N" for the Nth device tfs_bdev_open() opens in
 * this process (from 0), or "*" for every device.  Every matching entry
 * applies to the one fault device, in registration order (so several rules
 * stack).  See README.md, "Fault injection".
 *
 * The registry also remembers the paths whose fault device vanished: they
 * cannot be opened again in this process, as a device that left the bus.
 * Everything here is process-wide and thread-safe (one lock).
 */

#include <stdbool.h>

struct printbuf;
struct tfs_bdev;

/*
 * Parses one "dev" entry's words (after the kind) and, with apply, registers
 * it; the parser tfs_faults_parse() calls for kind "dev".  Returns 0, or
 * -TFS_ERR_fault_spec_invalid with err saying why (nothing registered).
 */
int tfs_faultdev_parse_entry(char **words, unsigned nr, bool apply, struct printbuf *err);

/*
 * Called by tfs_bdev_open() before opening: -TFS_ERR_bdev_vanished (printed)
 * if a fault device over path vanished in this process.
 */
int tfs_faultdev_open_check(const char *path);

/*
 * Called by tfs_bdev_open() with the device it opened: counts the open
 * (for "#N"), and when registered entries match, stacks a fault device
 * owning lower; else *ret = lower.  On error *ret = lower and lower stays
 * open (the caller closes it).
 */
int tfs_faultdev_stack_registered(struct tfs_bdev *lower, struct tfs_bdev **ret);

/* Remembers that path vanished: tfs_bdev_open() of it fails from now on. */
void tfs_faultdev_mark_vanished(const char *path);

/* Forgets every registered entry, vanished path and the open count. */
void tfs_faultdev_registry_reset(void);
/* The registered entries, one per line, as spec text. */
void tfs_faultdev_registry_to_text(struct printbuf *out);

#endif /* TFS_LIB_FAULT_REGISTRY_H */
