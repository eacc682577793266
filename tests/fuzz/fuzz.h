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

#include "lib/types.h"

struct jset;
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
 * A read-only struct tfs_bdev of `size` bytes (logical block size lbs) that
 * reads as zeroes except where fuzz_membdev_put() placed bytes.  Bios
 * complete synchronously, in the submitter's thread (the synchronous
 * helpers of lib/bdev.h do not mind).  Close it with tfs_bdev_close().
 */
struct tfs_bdev *fuzz_membdev_create(const char *name, u64 size, unsigned lbs);

/*
 * Places a copy of data[0..len) at off (later puts win where they overlap);
 * bytes past the device's end are dropped.  Aborts on ENOMEM.
 */
void fuzz_membdev_put(struct tfs_bdev *bdev, u64 off, const void *data, size_t len);

/* Reads that overlap [off, off + len) fail with err (a negative code). */
void fuzz_membdev_fail_reads(struct tfs_bdev *bdev, u64 off, u64 len, int err);

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
