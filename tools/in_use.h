/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TOOLS_IN_USE_H
#define TFS_TOOLS_IN_USE_H

/*
 * Is a target mkfs would write in use by the system?  mkfs refuses such a
 * target whatever --force says: writing it destroys a live filesystem.
 *
 * In use means any of:
 *  - a block device that is mounted (/proc/self/mountinfo, by device number);
 *  - a file or block device that is the source of a mount, by identity
 *    (st_dev/st_ino), as a FUSE filesystem records its image;
 *  - a file or block device behind a loop device
 *    (/sys/block/loop*\/loop/backing_file, by identity) that is mounted,
 *    has holders (/sys/block/loopN/holders: dm, md), or is held open
 *    exclusively (open(O_EXCL) fails with EBUSY).
 * A loop device attached to the file but otherwise unused is not "in use".
 * The caller's own O_EXCL open of a block device catches exclusive holders
 * of the target itself.
 */

#include <stdbool.h>
#include <sys/stat.h>

struct printbuf;

/*
 * True when the target (its path and fstat()) is in use; why then says by
 * what ("is the backing file of /dev/loop0, which is mounted on /mnt (ext4)").  What
 * cannot be read (no /proc, no /sys) is taken as not in use.
 */
bool tfs_target_in_use(const char *path, const struct stat *st, struct printbuf *why);

#endif /* TFS_TOOLS_IN_USE_H */
