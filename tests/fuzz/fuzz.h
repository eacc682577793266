/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_FUZZ_FUZZ_H
#define TFS_TESTS_FUZZ_FUZZ_H

/*
 * Shared by the fuzz targets, one tests/fuzz/fuzz_TARGET.c each.  A target
 * is a libFuzzer entry point, LLVMFuzzerTestOneInput(): in the clang fuzz
 * build (meson -Dfuzz=true, scripts/fuzz.sh) libFuzzer drives it; in every
 * other build replay_main.c runs it over each file of its corpora
 * (tests/fuzz/seeds/TARGET and tests/fuzz/regress/TARGET), so `meson test`
 * replays them in the plain, ASan and TSan configurations.
 *
 * Invariants:
 *  - The first input byte is the mode.  Bit 0 (FUZZ_FIX) makes the target
 *    repair what a mutation breaks first -- magics, checksums, a size that
 *    runs past the input -- so mutations reach the checks behind them; the
 *    other bits are the target's own (each target's opening comment).  An
 *    empty input does nothing.
 *  - A target never reads outside the input it was given: what it hands
 *    the code under test is a malloc()ed copy of exactly the bytes the
 *    format says, so ASan sees any read past them.
 *  - A target aborts on a broken promise of the API it drives (a validated
 *    object its accessors then reject, to_text output that is not
 *    NUL-terminated): a crash is a bug in the code under test, a return is
 *    not.
 *  - Everything is in memory (struct tfs_bdev over a sparse image, below):
 *    no files, no threads, nothing left behind.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal/journal.h"
#include "lib/types.h"

struct jset;
struct tfs_btree_node;
struct printbuf;
struct tfs_bdev;
struct tfs_sb;

/* The libFuzzer entry points (prototypes for -Wmissing-prototypes). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

enum fuzz_mode {
	FUZZ_FIX = 1 << 0, /* repair magics, checksums and sizes after the mutation */
};

/* The filesystem uuid every generated seed and every target uses. */
extern const u8 fuzz_uuid[16];

/* --- the memory device --- */

/*
 * A struct tfs_bdev of `size` bytes (logical block size lbs) that reads as
 * zeroes except where fuzz_membdev_put() placed bytes; read-only until
 * fuzz_membdev_set_writable().  Bios complete synchronously, in the
 * submitter's thread (end_io runs before submit returns; the synchronous
 * helpers of lib/bdev.h and the journal do not mind).  Close it with
 * tfs_bdev_close().
 */
struct tfs_bdev *fuzz_membdev_create(const char *name, u64 size, unsigned lbs);

/*
 * Places a copy of data[0..len) at off (later puts win where they overlap);
 * bytes past the device's end are dropped.  Aborts on ENOMEM.
 */
void fuzz_membdev_put(struct tfs_bdev *bdev, u64 off, const void *data, size_t len);

/*
 * Lets the device take writes (they replace what they cover; flushes and
 * FUA are no-ops: everything written is durable at once).  Writes may come
 * from any thread.
 */
void fuzz_membdev_set_writable(struct tfs_bdev *bdev);

/* Reads that overlap [off, off + len) fail with err (a negative code). */
void fuzz_membdev_fail_reads(struct tfs_bdev *bdev, u64 off, u64 len, int err);

/* --- journal members from an input (targets journal_read, journal_restart) --- */

#define FUZZ_JOURNAL_HDR 4
#define FUZZ_JOURNAL_MAX_BUCKETS 8

/*
 * One or two journal members on memory devices, described by an input: a
 * 4-byte header h, then the bucket contents: member 0's buckets in ring
 * order, then member 1's (zero past the input's end).  Bucket i of a member
 * is device bucket i + 1 (bucket 0 stays zero, as a superblock area would).
 *	h[0] bit 0	FUZZ_FIX: in every bucket, each block whose magic is
 *			within 8 bits of the right one gets the right magic, a
 *			u64s that fits the bucket and a right checksum, and the
 *			walk goes on after it as the reader's does
 *	h[0] bit 1	two members (else one)
 *	h[0] bit 2	member 1 holds member 0's bytes (a replica) instead of
 *			its own
 *	h[0] bit 3	reads of one bucket fail with EIO (h[3])
 *	h[1]		block size 512 << (h[1] & 3); bucket size block size
 *			<< ((h[1] >> 2) & 3); pin fifo size 2^(h[1] >> 4),
 *			the default (1024) for 0
 *	h[2]		buckets per member: 1 + h[2] % 8
 *	h[3]		the failing bucket: member (h[3] >> 4) & 1, index
 *			(h[3] & 15) % buckets
 * opts are the defaults with fuzz_uuid, the block size and the pin fifo
 * size; magic is the entries' magic.
 */
struct fuzz_journal {
	u32 block_size, bucket_size;
	unsigned nr_devs, nr_buckets;
	struct tfs_bdev *bdevs[2];
	u64 buckets[FUZZ_JOURNAL_MAX_BUCKETS];
	struct tfs_journal_dev devs[2];
	struct tfs_journal_opts opts;
	u64 magic;
};

/*
 * Builds fj from the input (writable memory devices when writable); false,
 * with nothing to free, when the input is shorter than the header.
 */
bool fuzz_journal_build(struct fuzz_journal *fj, const u8 *data, size_t size, bool writable);
/* Closes fj's devices. */
void fuzz_journal_exit(struct fuzz_journal *fj);

/* --- repairs for FUZZ_FIX --- */

/*
 * Makes the superblock copy sb (bytes long) pass the checks that come
 * before its fields: both magics, u64s cut down to what fits in bytes (and
 * in the layout's sb_max_size, if it is sane), the embedded layout's
 * checksum and the copy's.  Nothing when bytes is below the fixed part.
 */
void fuzz_fix_sb(struct tfs_sb *sb, size_t bytes);

/*
 * Makes the entry j (at most len bytes) carry magic, a u64s that fits in
 * len, and a right checksum.  Nothing when len is below the header.
 */
void fuzz_fix_jset(struct jset *j, size_t len, u64 magic);

/*
 * Makes the btree node n (len bytes of input in a node of node_size) carry
 * magic, a u64s that fits both, and a right checksum.  Nothing when len is
 * below the header.
 */
void fuzz_fix_btree_node(struct tfs_btree_node *n, size_t len, u32 node_size, u64 magic);

/* --- helpers --- */

/* Aborts when out's text and pos disagree (a NUL inside, or pos past it). */
void fuzz_check_printbuf(const struct printbuf *out);

/* Whether text is one JSON value (RFC 8259 syntax) and nothing else. */
bool fuzz_json_valid(const char *text);

/* With TFS_FUZZ_VERBOSE set, prints the result of the input: "valid" or the code and err. */
void fuzz_report(int ret, const struct printbuf *err);

/* A copy of data[0..len) in a buffer of exactly len bytes (malloc; aborts on ENOMEM). */
void *fuzz_dup(const void *data, size_t len);

/* Aborts, naming the target and what broke, when cond is false. */
#define fuzz_check(cond, what)                                      \
	do {                                                        \
		if (!(cond))                                        \
			fuzz_fail(__FILE__, __LINE__, #cond, what); \
	} while (0)
__attribute__((noreturn)) void fuzz_fail(const char *file, int line, const char *cond,
					 const char *what);

#endif /* TFS_TESTS_FUZZ_FUZZ_H */
