// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "sb_read": the whole superblock read path, tfs_sb_read(),
 * over a memory device: the layout sector, every copy it lists, the
 * fallback to the default layout and the adoption of a copy's layout, the
 * choice of the newest copy of one filesystem.
 *
 * Input: a mode byte, a policy byte, then one superblock copy C (as for
 * target "sb").  The device is built from C: the layout sector at 3584 is
 * C's embedded layout (the default layout when C is shorter than the fixed
 * part), and the copies sit where that layout says (the default layout's
 * places when it is invalid), each C or C changed as the policy says.
 *	mode bit 0	FUZZ_FIX: C repaired (fuzz_fix_sb()), and every copy
 *			derived from it checksummed again
 *	mode bits 1-3	device size: 2^(17 + 2s) bytes (128 KiB .. 2 GiB)
 *	mode bit 4	logical block size 4096 (else 512)
 *	policy bits 0-2	the backups: 0 zero; 1 C; 2 C with seq - 1; 3 C with
 *			seq + 1; 4 C of another filesystem (uuid), seq + 1;
 *			5 C with another user_uuid, seq + 1; 6 C whose layout
 *			lists one copy fewer; 7 C torn (its first half only)
 *	policy bits 3-4	the primary: 0 C; 1 zero; 2 C torn; 3 C of another
 *			filesystem with seq + 1 (a new mkfs whose backups
 *			were never written)
 *	policy bit 5	the layout sector is zeroed (the read falls back)
 *	policy bit 6	the layout sector lists only the primary
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

enum backup_policy {
	B_ZERO,
	B_SAME,
	B_OLDER,
	B_NEWER,
	B_OTHER_FS,
	B_OTHER_USER_UUID,
	B_FEWER_COPIES,
	B_TORN,
};

enum primary_policy {
	P_SAME,
	P_ZERO,
	P_TORN,
	P_OTHER_FS
};

/*
 * Places copy i: C changed as the policy says (and repaired again with
 * FUZZ_FIX), or nothing.
 */
static void place_copy(struct tfs_bdev *bdev, u64 off, unsigned i, unsigned policy, bool fix,
		       const struct tfs_sb *c, size_t bytes)
{
	unsigned what = i ? policy & 7 : (policy >> 3) & 3;
	bool torn = i ? what == B_TORN : what == P_TORN;
	struct tfs_sb *sb;

	if (i ? what == B_ZERO : what == P_ZERO)
		return;
	sb = fuzz_dup(c, bytes);
	if (bytes >= sizeof(*sb)) {
		if (i ? what == B_OLDER : false)
			sb->seq = cpu_to_le64(le64_to_cpu(sb->seq) - 1);
		if (i ? what >= B_NEWER && what <= B_OTHER_USER_UUID : what == P_OTHER_FS)
			sb->seq = cpu_to_le64(le64_to_cpu(sb->seq) + 1);
		if (i ? what == B_OTHER_FS : what == P_OTHER_FS)
			sb->uuid[0] ^= 0x80;
		if (i && what == B_OTHER_USER_UUID)
			sb->user_uuid[15] ^= 0x01;
		if (i && what == B_FEWER_COPIES && sb->layout.nr_superblocks > 1 &&
		    sb->layout.nr_superblocks <= TFS_SB_LAYOUT_MAX_COPIES)
			sb->layout.sb_offset[--sb->layout.nr_superblocks] = 0;
		if (fix)
			fuzz_fix_sb(sb, bytes);
	}
	/* A torn write: the first half, in 512-byte sectors, reached the device. */
	fuzz_membdev_put(bdev, off, sb, torn ? round_down(bytes / 2, 512) : bytes);
	free(sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;

	unsigned mode = data[0], policy = data[1], lbs = mode & 0x10 ? 4096 : 512;
	bool fix = mode & FUZZ_FIX;
	u64 dev_size = 1ULL << (17 + 2 * ((mode >> 1) & 7));
	size_t bytes = size - 2;
	struct tfs_sb *c = fuzz_dup(data + 2, bytes);
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
	if (policy & 0x40) {
		memset(sector.sb_offset + 1, 0,
		       sizeof(sector.sb_offset) - sizeof(sector.sb_offset[0]));
		sector.nr_superblocks = 1;
		sector.csum = cpu_to_le32(tfs_sb_layout_csum(&sector));
	}
	if (policy & 0x20)
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
