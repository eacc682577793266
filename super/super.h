/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_SUPER_SUPER_H
#define TFS_SUPER_SUPER_H

/*
 * The superblock: read, validate, change, write.  The format is in
 * super/super_format.h and docs/on-disk-format.md.
 *
 * Invariants:
 *  - A struct tfs_sb_handle that a function here returned 0 for holds a
 *    superblock that passed tfs_sb_validate(); the accessors below rely on it
 *    (a members field exists with nr_devices entries, dev_idx < nr_devices,
 *    journal buckets lie in this device's bucket range).
 *  - Every byte goes through the handle's struct tfs_bdev (lib/bdev.h), tagged
 *    TFS_TAG_sb, so the fault device sees superblock I/O.  The bios are
 *    TFS_BIO_QUIET: a failure is reported once, here, naming the copy.
 *  - Reading tries every copy the layout lists; the valid copy with the
 *    highest seq wins.  A copy whose embedded layout is not byte for byte
 *    the layout in use is bad, so the layout a handle holds, and hence the
 *    set of copies every write updates, is the one every copy used agrees
 *    on.  The layout in use is the (valid) layout sector's, unless no
 *    valid copy carries it and all valid copies carry the same other one:
 *    the sector, written only by mkfs, is then the stale one, and the
 *    copies' layout is used (a warning names the field that differs).  A
 *    bad copy is never fatal while another is valid: a warning naming
 *    the bad copy and the one used goes to stderr.
 *  - Seq only orders copies of one filesystem: a stale copy left on the
 *    device by an older filesystem may have any seq.  The copies of the
 *    current filesystem are those whose uuid is the layout's uuid (the
 *    layout sector names the filesystem, so a foreign copy is ruled out
 *    even when the primary is unreadable) and whose user_uuid is the
 *    reference copy's: the primary when it is valid (every write rewrites
 *    it first), else the valid copy with the highest seq.  Any other valid
 *    copy is bad (-TFS_ERR_invalid_sb_uuid, counted in copies_bad) and
 *    never chosen, whatever its seq; its warning names its offset and the
 *    layout's or the reference's.
 *  - Writing bumps seq and writes every copy on every member: all primaries,
 *    a flush, then all backups, a flush; a device whose primary or flush
 *    failed keeps its old backup (see tfs_sb_write_all()).
 *  - Errors are codes from the "superblock" sections of lib/errcode.h; the
 *    message ("member 2: first_bucket 9 >= nbuckets 8") goes into the
 *    caller's `err` printbuf, prefixed with the device path where one is
 *    known, and is never printed by these functions.
 */

#include <stdbool.h>

#include "lib/types.h"
#include "super/super_format.h"
#include "super/super_types.h"

struct printbuf;
struct tfs_bdev;

/* --- names (x-macro tables); NULL for an unknown value --- */
const char *tfs_member_state_str(unsigned state);
const char *tfs_error_action_str(unsigned action);
const char *tfs_sb_field_type_str(unsigned type);
const char *tfs_clean_entry_type_str(unsigned type);
/* Value by name, or -1. */
int tfs_member_state_parse(const char *name);
int tfs_error_action_parse(const char *name);
int tfs_sb_field_type_parse(const char *name);

/* --- reading --- */

/*
 * Reads the superblock of bdev into h (which the caller zeroed or
 * tfs_sb_exit()ed): the layout sector (or, if it is bad, the default layout
 * -- the primary and the standard backup -- and then the embedded layout of
 * the first valid copy found there; or, if the copies agree on another, the
 * copies' layout), then every copy it lists; keeps the valid one with the
 * highest seq.  h->bdev is set but not owned.  When no copy is valid,
 * returns the primary's code and err lists the layout sector's problem, if
 * any, and every copy with its reason.  Either way h->copies[] says what
 * each copy of the layout in use was (valid with its seq, or the reason),
 * so tfs_sb_exit() h in every case.
 */
int tfs_sb_read(struct tfs_bdev *bdev, struct tfs_sb_handle *h, struct printbuf *err);

/*
 * Opens path (tfs_bdev_open() flags) and reads it; h owns the bdev.  When
 * the open itself fails, tfs_bdev_open() has printed why and err is left
 * as it was.
 */
int tfs_sb_open(const char *path, unsigned bdev_flags, struct tfs_sb_handle *h,
		struct printbuf *err);

/*
 * Reads copy idx (0: the primary) of the layout the layout sector gives (the
 * default layout when the sector is bad) into h, which owns nothing: for
 * tools that show one copy.  Returns 0, or the copy's code with err saying
 * "PATH: superblock at OFF: why"; -TFS_ERR_invalid_argument when the layout
 * has no copy idx.  With force, a copy that was read but failed validation
 * is still put in h->sb (u64s cut to what fits in the copy, said in err),
 * so it can be shown after the reason; only the to_text functions may be
 * given it: they stay inside the fields whatever they say.
 */
int tfs_sb_read_copy(struct tfs_bdev *bdev, unsigned idx, bool force, struct tfs_sb_handle *h,
		     struct printbuf *err);

/*
 * Frees h's memory (the superblock, the copies' reasons) and closes its
 * bdev if owned; h is zeroed. Safe twice.
 */
void tfs_sb_exit(struct tfs_sb_handle *h);

/* --- validation --- */

/*
 * Checks the layout sector (magic, checksum, version, copies 4 KiB aligned,
 * in order, not overlapping, none ending past 2^64: sums of offsets and
 * sizes never wrap after this; pad bytes zero).  Returns 0 or -TFS_ERR_invalid_sb_layout.
 */
int tfs_sb_layout_validate(const struct tfs_sb_layout *l, struct printbuf *err);

/*
 * Checks every field of a superblock copy of at most `bytes` bytes (the
 * checksum first, then each field in the order of the struct; for each
 * member and each field type its own checks).  dev_size (0: unknown) is the
 * device's size in bytes: the layout's copies and this device's member must
 * fit in it.  This device's first bucket must start past the last copy; it
 * has a journal field when its state is rw (it may get metadata), and a
 * journal field lists at least TFS_JOURNAL_MIN_BUCKETS buckets (what mkfs
 * enforces), each in [first_bucket, nbuckets), each once.  Every pad
 * and reserved byte (of the fixed part, the layout, the members and clean
 * fields and their entries) must be zero, so later versions may use them;
 * the message names field, byte and offset.  Each known field type appears
 * at most once; fields of unknown types are skipped, any number of each.  Returns 0 or
 * the -TFS_ERR_invalid_sb_* code of the first failure, with one precise line
 * in err.
 */
int tfs_sb_validate(const struct tfs_sb *sb, size_t bytes, u64 dev_size, struct printbuf *err);

/*
 * Index of the first byte of label[0..len) that makes it an unacceptable
 * label, or -1: labels are valid UTF-8 (RFC 3629) without control
 * characters (C0, DEL, C1), so text and JSON output show them as they are.
 */
int tfs_label_bad_byte(const char *label, size_t len);

/* crc32c the superblock's csum field must hold. */
u32 tfs_sb_csum(const struct tfs_sb *sb);
/* crc32c the layout's csum field must hold. */
u32 tfs_sb_layout_csum(const struct tfs_sb_layout *l);

/* Fills l with the layout mkfs writes: the primary at TFS_SB_OFFSET and one
 * backup right after its maximum size, checksummed.  Its uuid is zero: mkfs
 * sets it (and the checksum again); a reader uses the default only to know
 * where to look. */
void tfs_sb_layout_init_default(struct tfs_sb_layout *l);
/* Bytes of the copy: the fixed part plus the fields. */
static inline size_t tfs_sb_bytes(const struct tfs_sb *sb)
{
	return sizeof(*sb) + 8 * (size_t)le32_to_cpu(sb->u64s);
}

/* --- accessors (on a valid superblock) --- */

/* The field of type `type`, or NULL. */
struct tfs_sb_field *tfs_sb_field_get(const struct tfs_sb *sb, enum tfs_sb_field_type type);

/* Member idx (< nr_devices), or NULL. */
struct tfs_member *tfs_sb_member(const struct tfs_sb *sb, unsigned idx);

/* This device's member entry. */
static inline struct tfs_member *tfs_sb_this_member(const struct tfs_sb *sb)
{
	return tfs_sb_member(sb, sb->dev_idx);
}

/* This device's bucket size in bytes. */
u32 tfs_sb_bucket_size(const struct tfs_sb *sb);

/* The filesystem's btree node size in bytes (validated: see super_format.h). */
static inline u32 tfs_sb_btree_node_size(const struct tfs_sb *sb)
{
	return le32_to_cpu(sb->btree_node_size);
}

/* This device's journal field, or NULL. */
struct tfs_sb_field_journal *tfs_sb_journal(const struct tfs_sb *sb);
/* Ranges in a journal field (0 for NULL); iterate j->ranges[0..n). */
unsigned tfs_sb_journal_nr_ranges(const struct tfs_sb_field_journal *j);
/* This device's journal buckets, all ranges added up (0: no journal field). */
u64 tfs_sb_journal_nr_buckets(const struct tfs_sb *sb);

/*
 * This device's journal bucket indices, in ring order, expanded from the
 * ranges into a malloc()ed array the caller frees; *nr gets how many.
 * *buckets NULL and *nr 0 when the device has no journal field.  0 or
 * -ENOMEM.
 */
int tfs_sb_journal_buckets(const struct tfs_sb *sb, u64 **buckets, unsigned *nr);

/* The clean field, or NULL. */
struct tfs_sb_field_clean *tfs_sb_clean(const struct tfs_sb *sb);

/* Iterates the entries of a clean field (entries validated by the read). */
#define for_each_clean_entry(_clean, _e)                                                        \
	for (_e = (_clean)->entries;                                                            \
	     (__le64 *)_e < (__le64 *)(_clean) + le32_to_cpu((_clean)->field.u64s) && _e->u64s; \
	     _e = (struct tfs_clean_entry *)((__le64 *)_e + le16_to_cpu(_e->u64s)))

/* --- changing --- */

/*
 * Makes the field of type `type` u64s long (header included), adding it at
 * the end if missing; the payload keeps its old bytes, new ones are zero;
 * later fields move.  u64s 0 removes the field.  Returns the field (NULL when
 * removed), or NULL with *ret = -TFS_ERR_invalid_sb_size when the copy would
 * outgrow sb_max_size, or -ENOMEM.
 */
struct tfs_sb_field *tfs_sb_field_resize(struct tfs_sb_handle *h, enum tfs_sb_field_type type,
					 unsigned u64s, int *ret);

/*
 * Replaces this device's journal bucket list (ring order; stored as the
 * runs of consecutive buckets, one range each).  0 or a code as above.
 */
int tfs_sb_set_journal_buckets(struct tfs_sb_handle *h, const u64 *buckets, unsigned nr);

/*
 * Records a clean unmount: the clean field gets journal_seq and a copy of
 * entries_u64s u64s of entries (struct tfs_clean_entry, back to back), and
 * TFS_SB_FLAG_CLEAN is set.  0, or -TFS_ERR_invalid_sb_size when the field
 * would not fit in the copy (nothing changed).  tfs_sb_clear_clean() removes
 * both (at mount, before the first journal write).
 */
int tfs_sb_set_clean(struct tfs_sb_handle *h, u64 journal_seq, const void *entries,
		     unsigned entries_u64s);
void tfs_sb_clear_clean(struct tfs_sb_handle *h);

/* --- writing --- */

/*
 * Writes the superblocks of every member of a filesystem (one handle each,
 * each with its bdev): seq becomes one more than the highest seq among them,
 * csums are recomputed, then every primary copy is written, every device
 * flushed, then every backup written and every device flushed.
 *
 * The rule: at every moment at least one valid copy per device.  While
 * primaries are written the backups hold the previous superblock intact;
 * once the flush returns the new primaries are durable, so whichever copy a
 * torn write spoils, a reader finds a valid copy whose seq is the old or the
 * new one.  Hence a device whose primary write or flush after it failed
 * gets no backup write at all: its primary may be torn, and the old backup
 * is then its only valid copy.  Other devices still get their backups.
 *
 * Last, on a device whose layout sector tfs_sb_read() found bad or stale
 * (h->layout_stale), the layout sector is rewritten from the layout in use
 * (and flushed), only once everything else succeeded.
 *
 * A failed write is reported in err with device, copy and offset, a failed
 * flush with the device.  Returns 0, or -TFS_ERR_sb_write when any copy or
 * flush failed on any member (tfs_sb_write_members() with every member
 * required, and no failure tolerated).
 */
int tfs_sb_write_all(struct tfs_sb_handle *const *hs, unsigned nr, struct printbuf *err);

/* What tfs_sb_write_members() did on each member. */
struct tfs_sb_write_res {
	int ret[TFS_MAX_DEVICES]; /* by handle index: 0, or the member's first failure */
	unsigned nr_written;	  /* members whose new primary is durable */
};

/*
 * tfs_sb_write_all() for a filesystem that keeps `required` copies of its
 * metadata (metadata_replicas_required; clamped to 1..nr): the same writes
 * in the same order, with each member's result in res.  A member counts as
 * written when its new primary copy is durable (written and flushed; a
 * failed backup or layout sector leaves it with the new superblock, noted
 * in res->ret).  Returns 0 when at least `required` members were written,
 * even if others failed (err then names them: the caller says it as a
 * warning), else -TFS_ERR_sb_write.  -TFS_ERR_invalid_argument for more
 * than TFS_MAX_DEVICES handles.
 */
int tfs_sb_write_members(struct tfs_sb_handle *const *hs, unsigned nr, unsigned required,
			 struct tfs_sb_write_res *res, struct printbuf *err);

/* tfs_sb_write_all() of one device. */
int tfs_sb_write(struct tfs_sb_handle *h, struct printbuf *err);

/*
 * Writes the first 4 KiB of the device: zeroes, and the layout sector from
 * h->sb->layout.  Only mkfs does this: the layout never changes afterwards
 * (tfs_sb_write_all() rewrites a stale layout sector, and only that sector).
 */
int tfs_sb_write_layout(struct tfs_sb_handle *h, struct printbuf *err);

/* --- text --- */

/* The column every "Name:" line's value starts at in tfs_sb_to_text(). */
#define TFS_SB_TEXT_VALUE_COLUMN 26

/* Options for tfs_sb_to_text(): which fields; all by default. */
struct tfs_sb_to_text_opts {
	unsigned fields;    /* bitmask of 1 << enum tfs_sb_field_type; 0: all */
	bool layout;	    /* also print the layout */
	const char *device; /* printed first when set */
	/*
	 * With layout: each copy's state (from tfs_sb_read(), matched by
	 * offset), and the offset of the copy shown ("in use" when valid,
	 * "shown" when it is not).
	 */
	const struct tfs_sb_copy_status *copies;
	unsigned nr_copies;
	u64 shown_offset;
};

/*
 * The superblock as aligned "name<tab>value" lines with human units: the
 * fixed part (with the fields present), the layout when asked, then each
 * selected field through its own to_text.  Every value starts in one
 * column (TFS_SB_TEXT_VALUE_COLUMN) whatever the nesting: nested to_texts
 * set their tabstops from the indent they are called at.  Safe on a copy
 * that failed validation (tfs_sb_read_copy() with force): nothing past the
 * fields is read.
 */
void tfs_sb_to_text(struct printbuf *out, const struct tfs_sb *sb,
		    const struct tfs_sb_to_text_opts *opts);
void tfs_sb_layout_to_text(struct printbuf *out, const struct tfs_sb_layout *l);
void tfs_member_to_text(struct printbuf *out, const struct tfs_member *m, unsigned idx);
/* Any field, by type (members, journal, clean; unknown ones as their size). */
void tfs_sb_field_to_text(struct printbuf *out, const struct tfs_sb *sb,
			  const struct tfs_sb_field *f);
void tfs_sb_members_to_text(struct printbuf *out, const struct tfs_sb *sb,
			    const struct tfs_sb_field_members *f);
void tfs_sb_journal_to_text(struct printbuf *out, const struct tfs_sb *sb,
			    const struct tfs_sb_field_journal *f);
void tfs_sb_clean_to_text(struct printbuf *out, const struct tfs_sb *sb,
			  const struct tfs_sb_field_clean *f);

/* The same as one JSON object (valid RFC 8259), for scripts. */
void tfs_sb_to_json(struct printbuf *out, const struct tfs_sb *sb,
		    const struct tfs_sb_to_text_opts *opts);

#endif /* TFS_SUPER_SUPER_H */
