/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_ERRCODE_H
#define TFS_LIB_ERRCODE_H

/*
 * tinyfs error codes.
 *
 * Functions return 0 or a negative code.  A code is either a plain errno
 * (-EIO) or a tinyfs code (-TFS_ERR_journal_full).  tinyfs codes live above
 * the errno range (TFS_ERR_START) and each has a parent "class": another
 * tinyfs code or an errno.  Walking the parents always ends at an errno, which
 * is what tfs_err_class() returns and what the FUSE boundary and the tools'
 * exit paths hand to the outside world.
 *
 * Messages are not returned: the code that understands a failure prints it
 * once, with context (device, offset, seq), and returns the code.
 *
 * To add a code, add one line to TFS_ERRCODES() in its subsystem's section:
 * x(parent, name), parent being an errno (EIO) or a code
 * already listed (TFS_ERR_invalid_sb).  The enum value TFS_ERR_<name> and its string "name"
 * are generated together, so a code cannot lack a name.
 */

#include <stdbool.h>

// clang-format off
#define TFS_ERRCODES(x)                                                        \
	/* generic */                                                          \
	x(ENOMEM, ENOMEM_printbuf)                                             \
	x(ENOMEM, ENOMEM_fault_injected)                                       \
	x(EINVAL, invalid_argument)                                            \
	x(EINVAL, invalid_option)                                              \
	x(E2BIG, string_truncated)                                             \
	x(EIO, fault_injected)                                                 \
	/* fault points and the fault device */                                \
	x(ENOENT, fault_point_unknown)                                         \
	x(EINVAL, fault_spec_invalid)                                          \
	/* block devices */                                                    \
	x(EIO, bdev_io)                                                        \
	x(TFS_ERR_bdev_io, bdev_short_io)                                      \
	x(ENODEV, bdev_vanished)                                               \
	x(EIO, bdev_powercut)                                                  \
	x(EINVAL, bdev_unaligned)                                              \
	x(ENOSPC, bdev_out_of_range)                                           \
	x(EBUSY, bdev_ring_setup)                                              \
	/* superblock: reading and writing */                                  \
	x(EIO, sb_read)                                                        \
	x(TFS_ERR_sb_read, sb_no_valid_copy)                                   \
	x(EIO, sb_write)                                                       \
	x(ENOSPC, device_too_small)                                            \
	x(EEXIST, device_has_signature)                                        \
	/* superblock: validation (EINVAL class: a bad image is bad input) */  \
	x(EINVAL, invalid_sb)                                                  \
	x(TFS_ERR_invalid_sb, invalid_sb_magic)                                \
	x(TFS_ERR_invalid_sb, invalid_sb_version)                              \
	x(TFS_ERR_invalid_sb, invalid_sb_csum)                                 \
	x(TFS_ERR_invalid_sb, invalid_sb_csum_type)                            \
	x(TFS_ERR_invalid_sb, invalid_sb_size)                                 \
	x(TFS_ERR_invalid_sb, invalid_sb_uuid)                                 \
	x(TFS_ERR_invalid_sb, invalid_sb_block_size)                           \
	x(TFS_ERR_invalid_sb, invalid_sb_layout)                               \
	x(TFS_ERR_invalid_sb, invalid_sb_options)                              \
	x(TFS_ERR_invalid_sb, invalid_sb_nr_devices)                           \
	x(TFS_ERR_invalid_sb, invalid_sb_dev_idx)                              \
	x(TFS_ERR_invalid_sb, invalid_sb_field)                                \
	x(TFS_ERR_invalid_sb, invalid_sb_members)                              \
	x(TFS_ERR_invalid_sb, invalid_sb_journal)                              \
	x(TFS_ERR_invalid_sb, invalid_sb_clean)                                \
	x(TFS_ERR_invalid_sb, invalid_sb_label)                                \
	x(TFS_ERR_invalid_sb, invalid_sb_time)                                 \
	x(TFS_ERR_invalid_sb, invalid_sb_device_size)                          \
	x(TFS_ERR_invalid_sb, invalid_sb_btree_node_size)                      \
	/* journal: reasons a reservation cannot proceed now (waits, never user-visible) */\
	x(EAGAIN, journal_res_get_blocked)                                     \
	x(TFS_ERR_journal_res_get_blocked, journal_blocked)                    \
	x(TFS_ERR_journal_res_get_blocked, journal_full)                       \
	x(TFS_ERR_journal_res_get_blocked, journal_pin_full)                   \
	x(TFS_ERR_journal_res_get_blocked, journal_max_in_flight)              \
	/* journal: hard failures */                                           \
	x(EROFS, erofs_journal)                                                \
	x(TFS_ERR_erofs_journal, insufficient_devices)                         \
	x(TFS_ERR_erofs_journal, journal_halted)                               \
	x(EIO, journal_write)                                                  \
	x(EIO, journal_flush)                                                  \
	x(EIO, journal_read)                                                   \
	x(EINVAL, journal_entry_invalid)                                       \
	x(TFS_ERR_journal_entry_invalid, journal_entry_bad_magic)              \
	x(TFS_ERR_journal_entry_invalid, journal_entry_bad_csum)               \
	x(TFS_ERR_journal_entry_invalid, journal_entry_bad_size)               \
	x(TFS_ERR_journal_entry_invalid, journal_entry_bad_subentry)           \
	x(EINVAL, journal_gap)                                                 \
	x(ENOSPC, journal_entry_too_big)                                       \
	x(ENOENT, journal_empty)                                               \
	x(EIO, journal_seq_untrusted)                                          \
	/* filesystem (fs/) */                                                 \
	x(EIO, btree_node_read)                                                \
	/* corrupt on disk: EUCLEAN, ext4's EFSCORRUPTED, not bad input */    \
	x(EUCLEAN, btree_node_invalid)                                         \
	x(ENOSPC, alloc_no_space)                                              \
	x(EINVAL, fsck_errors_found)                                           \
	x(EINVAL, bkey_invalid)                                                \
	x(EIO, btree_node_write)                                               \
	x(EINVAL, fs_not_initialized)                                          \
	x(EINVAL, fs_members)                                                  \
	x(TFS_ERR_erofs_journal, fs_read_only)                                 \
	x(EAGAIN, key_cache_flush_raced)                                       \
	x(EAGAIN, fsck_raced_writeback)                                        \
	/* the POSIX layer (fs/) */                                            \
	x(EUCLEAN, fs_inconsistent)                                            \
	x(TFS_ERR_fs_inconsistent, inode_invalid)                              \
	x(TFS_ERR_fs_inconsistent, dirent_invalid)                             \
	x(TFS_ERR_fs_inconsistent, extent_invalid)                             \
	x(TFS_ERR_fs_inconsistent, xattr_invalid)                              \
	x(EIO, data_read)                                                      \
	x(EIO, data_checksum)                                                  \
	x(EIO, data_write)                                                     \
	/* the mount's control channel (fuse/ctl.h) */                         \
	x(EINVAL, ctl_request_refused)

// clang-format on

/* First tinyfs code; everything below is an errno. */
#define TFS_ERR_START 2048

enum tfs_errcode {
	TFS_ERR_START_ = TFS_ERR_START - 1,
#define x(class, name) TFS_ERR_##name,
	TFS_ERRCODES(x)
#undef x
	TFS_ERR_MAX
};

/*
 * Name of any error code, positive or negative: a tinyfs code's name
 * ("journal_full") or an errno's strerror text ("Input/output error").
 * Never NULL; the result is a static string.
 */
const char *tfs_err_str(int err);

/*
 * The errno a code stands for, as a negative number: -ENOSPC for
 * -TFS_ERR_journal_entry_too_big, -EIO for -EIO, 0 for 0.  An unknown code
 * above the errno range maps to -EIO.
 */
int tfs_err_class(int err);

/*
 * True when err is class, or class is one of err's ancestors.  Both may be
 * given positive or negative; class may be an errno or a tinyfs code.
 * tfs_err_matches(-TFS_ERR_journal_full, TFS_ERR_journal_res_get_blocked)
 * and tfs_err_matches(-TFS_ERR_journal_full, EAGAIN) are both true.
 */
bool tfs_err_matches(int err, int class);

/* The code's direct parent (positive), or 0 for errnos and 0. */
int tfs_err_parent(int err);

/* Process exit status for a tool that failed with err: 1 for every error. */
static inline int tfs_err_exit_status(int err)
{
	return err ? 1 : 0;
}

#endif /* TFS_LIB_ERRCODE_H */
