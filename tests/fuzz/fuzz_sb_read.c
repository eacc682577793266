// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "sb_read": the whole superblock read path, tfs_sb_read(),
 * over a memory device: the layout sector, every copy it lists, the
 * fallback to the default layout and the adoption of a copy's layout, the
 * choice of the newest copy of one filesystem.
 *
 * Input: a mode byte, then one superblock copy C (as for target "sb").
 * The device is built from C: the layout sector at 3584 is C's embedded
 * layout (the default layout when C is shorter than the fixed part), and
 * the copies sit where that layout says (the default layout's places when
 * it is invalid), filled by policy.
 *	bit 0		FUZZ_FIX: C repaired (fuzz_fix_sb()), and every copy
 *			derived from it checksummed again
 *	bits 1-2	policy: 0 the primary is C, backups zero; 1 every copy
 *			is C; 2 the primary is C, backups C with seq - 1 (an
 *			interrupted write); 3 the primary zero, backups C
 *	bit 3		the layout sector is zeroed (the read falls back)
 *	bits 4-6	device size: 2^(17 + 2s) bytes (128 KiB .. 2 GiB)
 *	bit 7		logical block size 4096 (else 512)
 *
 * What must hold: a failure names its reason; a success holds a copy that
 * validates again at the handle's size, with sb_bytes its layout's
 * sb_max_size and read_offset one of the layout's copies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tests/fuzz/fuzz.h"

enum {
	POLICY_PRIMARY,
	POLICY_ALL,
	POLICY_OLDER_BACKUP,
	POLICY_BACKUP_ONLY
};

/* Places copy i (C, or C changed by the policy) at its offset. */
static void place_copy(struct tfs_bdev *bdev, u64 off, unsigned i, unsigned policy, bool fix,
		       const struct tfs_sb *c, size_t bytes)
{
	if (i == 0 ? policy == POLICY_BACKUP_ONLY : policy == POLICY_PRIMARY)
		return;
	if (i && policy == POLICY_OLDER_BACKUP && bytes >= sizeof(*c)) {
		struct tfs_sb *old = fuzz_dup(c, bytes);

		old->seq = cpu_to_le64(le64_to_cpu(old->seq) - 1);
		if (fix)
			fuzz_fix_sb(old, bytes);
		fuzz_membdev_put(bdev, off, old, bytes);
		free(old);
		return;
	}
	fuzz_membdev_put(bdev, off, c, bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;

	unsigned mode = data[0], policy = (mode >> 1) & 3, lbs = mode & 0x80 ? 4096 : 512;
	bool fix = mode & FUZZ_FIX;
	u64 dev_size = 1ULL << (17 + 2 * ((mode >> 4) & 7));
	size_t bytes = size - 1;
	struct tfs_sb *c = fuzz_dup(data + 1, bytes);
	struct tfs_bdev *bdev = fuzz_membdev_create("fuzz-sb", dev_size, lbs);
	struct tfs_sb_layout layout, sector;
	struct printbuf err = PRINTBUF;
	struct tfs_sb_handle h = { 0 };
	int ret;

	if (fix)
		fuzz_fix_sb(c, bytes);
	tfs_sb_layout_init_default(&layout);
	if (bytes >= sizeof(*c))
		memcpy(&layout, &c->layout, sizeof(layout));
	sector = layout;
	if (mode & 8)
		memset(&sector, 0, sizeof(sector));
	fuzz_membdev_put(bdev, TFS_SB_LAYOUT_OFFSET, &sector, sizeof(sector));

	PRINTBUF_ONSTACK(why, 256);
	if (tfs_sb_layout_validate(&layout, &why))
		tfs_sb_layout_init_default(&layout);
	for (unsigned i = 0; i < layout.nr_superblocks; i++)
		place_copy(bdev, le64_to_cpu(layout.sb_offset[i]), i, policy, fix, c, bytes);

	ret = tfs_sb_read(bdev, &h, &err);
	fuzz_report(ret, &err);
	fuzz_check_printbuf(&err);
	fuzz_check(ret <= 0, "a positive return");
	fuzz_check(!ret || ret == -ENOMEM || err.pos, "a failure without a reason");
	if (!ret) {
		const struct tfs_sb_layout *l = &h.sb->layout;
		bool listed = false;

		fuzz_check(h.sb && h.bdev == bdev && !h.owns_bdev, "the handle is not filled in");
		fuzz_check(h.sb_bytes == le32_to_cpu(l->sb_max_size),
			   "sb_bytes is not the layout's sb_max_size");
		for (unsigned i = 0; i < l->nr_superblocks; i++)
			listed |= h.read_offset == le64_to_cpu(l->sb_offset[i]);
		fuzz_check(listed, "read_offset is none of the layout's copies");
		printbuf_reset(&err);
		ret = tfs_sb_validate(h.sb, h.sb_bytes, bdev->size, &err);
		if (ret)
			fuzz_fail(__FILE__, __LINE__, printbuf_str(&err),
				  "the copy read does not validate again");
		fuzz_check(tfs_sb_this_member(h.sb), "no member for this device");
	}
	tfs_sb_exit(&h);
	tfs_bdev_close(bdev);
	printbuf_exit(&err);
	free(c);
	return 0;
}
