// SPDX-License-Identifier: GPL-2.0
/*
 * mkfs.tinyfs: make a tinyfs on one or several member devices or image files.
 *
 * Order matters for "a failed mkfs leaves an existing image untouched":
 * parse everything; open every target (block devices with O_EXCL, so a
 * mounted one is refused; a target in use -- mounted, or an image behind a
 * loop device that is -- is refused even with --force, see in_use.h;
 * missing image files are created) and keep the fds
 * to the end; probe every target (refusing existing signatures without
 * --force); plan every superblock in memory; extend image files and open
 * the bdevs.  Only when all of that succeeded are signatures wiped (through
 * the held fds) and the filesystem written.  Before that point a failure
 * removes created files and restores extended ones' sizes.
 */
#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid.h>

#include "fs/fs.h"
#include "lib/bdev.h"
#include "lib/checksum.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/format.h"
#include "super/super.h"
#include "tools/in_use.h"
#include "tools/util.h"

#define PROG "mkfs.tinyfs"

struct target {
	const char *path;
	struct tfs_format_dev d;
	u64 want_size; /* --size; 0: the device's size */
	bool exists, is_blk, created, extended;
	u64 orig_size;
	bool has_signature;
	int fd; /* held from the first open to the end; -1: not open */
	struct stat st;
	struct tfs_bdev *bdev;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [OPTIONS] DEV|IMG [[DEVICE OPTIONS] DEV|IMG...]\n"
		"Makes a tinyfs filesystem whose members are the given block devices or image files.\n"
		"\n"
		"Filesystem options:\n"
		"  -L, --label LABEL             filesystem label (up to 32 bytes)\n"
		"  -U, --uuid UUID               user-visible uuid (default: random); with\n"
		"                                SOURCE_DATE_EPOCH the output is reproducible:\n"
		"                                the internal and member uuids are derived from\n"
		"                                it, so reusing a UUID gives identical ones\n"
		"      --block-size SIZE         block size (default 4 KiB)\n"
		"      --btree-node-size SIZE    btree node size: a power of two, 16 KiB to\n"
		"                                256 KiB, dividing every bucket size (default\n"
		"                                64 KiB, or the smallest bucket if smaller)\n"
		"      --metadata-replicas N     copies of metadata (default 1)\n"
		"      --metadata-replicas-required N\n"
		"      --data-replicas N         copies of data (default 1)\n"
		"      --data-replicas-required N\n"
		"      --error-action ACTION     continue, ro (default) or panic\n"
		"  -f, --force                   overwrite existing filesystems and partition tables\n"
		"  -q, --quiet                   print nothing but errors\n"
		"      --fault SPEC              arm fault rules (see TFS_FAULTS in the README)\n"
		"  -h, --help                    this text\n"
		"  -V, --version                 print the version and the format version\n"
		"\n"
		"Device options (apply to every device named after them):\n"
		"      --size SIZE               use SIZE bytes; creates or extends an image file\n"
		"      --bucket-size SIZE        bucket size (default: from the device size)\n"
		"      --journal-size SIZE       journal size (default 1/64 of the device,\n"
		"                                8 to 1024 buckets, at most 1 GiB; given, up\n"
		"                                to half the device)\n"
		"      --durability N            0 (cache) to 4 (default 1)\n"
		"      --dev-label LABEL         member label\n"
		"      --discard                 discard the device and freed buckets\n"
		"\n"
		"SIZE takes a unit: 512, 4k, 64M, 1G, 1T, 1P, 1E or KiB ... EiB (powers of 1024),\n"
		"kB ... EB (powers of 1000); case does not matter (64m = 64M = 64MiB).\n"
		"Exit status: 0, 1 on failure, 2 on usage errors.\n");
}

/* Deterministic uuids from the user uuid, so --uuid output is reproducible. */
static void derive_uuid(const u8 *user, u32 tag, u8 *out)
{
	for (u32 k = 0; k < 4; k++) {
		u32 in[5], crc;

		memcpy(in, user, 16);
		in[4] = tag;
		crc = tfs_crc32c(~k, in, sizeof(in));
		memcpy(out + 4 * k, &crc, 4);
	}
	out[6] = (out[6] & 0x0f) | 0x40;
	out[8] = (out[8] & 0x3f) | 0x80;
}

/*
 * blkid's view of the target (through its fd): 1 (and a description in out)
 * when it holds something, 0 when nothing, negative when probing failed.
 */
static int blkid_describe(const struct target *t, struct printbuf *out)
{
	blkid_probe pr = blkid_new_probe();
	const char *type = NULL, *label = NULL, *uuid = NULL, *pttype = NULL;
	int r, found = 0;

	if (!pr || blkid_probe_set_device(pr, t->fd, 0, 0)) {
		prt_printf(out, "cannot probe: %s", strerror(errno ?: EIO));
		if (pr)
			blkid_free_probe(pr);
		return -EIO;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL |
						      BLKID_SUBLKS_UUID);
	blkid_probe_enable_partitions(pr, 1);
	r = blkid_do_safeprobe(pr);
	if (r == -1) {
		/* A probe error is not "nothing found": refuse rather than overwrite. */
		prt_printf(out, "probing for signatures failed: %s", strerror(errno ?: EIO));
		found = -EIO;
	} else if (r == -2) {
		prt_str(out, "several conflicting signatures");
		found = 1;
	} else if (r == 0) {
		blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
		blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
		blkid_probe_lookup_value(pr, "UUID", &uuid, NULL);
		blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
		if (type) {
			prt_printf(out, "an existing %s filesystem", type);
			if (label)
				prt_printf(out, " (label \"%s\"", label);
			prt_printf(out, "%s", label ? ", " : " (");
			prt_printf(out, "uuid %s)", uuid ?: "none");
			found = 1;
		} else if (pttype) {
			const char *ptuuid = NULL;

			blkid_probe_lookup_value(pr, "PTUUID", &ptuuid, NULL);
			prt_printf(out, "a %s partition table (uuid %s)", pttype, ptuuid ?: "none");
			found = 1;
		}
	}
	blkid_free_probe(pr);
	return found;
}

/*
 * Wipes every signature blkid finds, through the fd held since the start
 * (only with --force, after everything else succeeded).
 */
static int blkid_wipe(struct target *t, bool quiet)
{
	blkid_probe pr = blkid_new_probe();
	int ret = 0;

	if (!pr || blkid_probe_set_device(pr, t->fd, 0, 0)) {
		fprintf(stderr, PROG ": %s: cannot probe to wipe signatures\n", t->path);
		ret = -EIO;
		goto out;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_MAGIC | BLKID_SUBLKS_TYPE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	while (blkid_do_probe(pr) == 0) {
		const char *type = NULL, *off = NULL;

		if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL))
			blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL);
		if (blkid_probe_lookup_value(pr, "SBMAGIC_OFFSET", &off, NULL))
			blkid_probe_lookup_value(pr, "PTMAGIC_OFFSET", &off, NULL);
		if (blkid_do_wipe(pr, 0)) {
			fprintf(stderr, PROG ": %s: wiping the %s signature failed\n", t->path,
				type ?: "unknown");
			ret = -EIO;
			goto out;
		}
		if (!quiet)
			printf("%s: wiped the %s signature at offset %s\n", t->path,
			       type ?: "unknown", off ?: "?");
	}
	if (fsync(t->fd)) {
		fprintf(stderr, PROG ": %s: fsync after wiping failed: %s\n", t->path,
			strerror(errno));
		ret = -errno;
	}
out:
	if (pr)
		blkid_free_probe(pr);
	return ret;
}

/*
 * A target the system uses (tools/in_use.h) is refused whatever --force
 * says: writing it would destroy a live filesystem.  True when refused.
 */
static bool refuse_in_use(const char *path, const struct stat *st)
{
	struct printbuf why = PRINTBUF;
	bool ret = tfs_target_in_use(path, st, &why);

	if (ret)
		fprintf(stderr,
			PROG ": %s %s; will not make a filesystem here, not even with --force\n",
			path, printbuf_str(&why));
	printbuf_exit(&why);
	return ret;
}

/*
 * Opens the target read-write and keeps the fd to the end: O_EXCL, so a
 * block device that is mounted or in use fails here with EBUSY (and nobody
 * can mount it while mkfs runs); a missing image file is created (with
 * --size), to be removed again if mkfs fails.  No data is written.
 */
static int open_target(struct target *t)
{
	t->fd = open(t->path, O_RDWR | O_CLOEXEC | O_EXCL);
	if (t->fd < 0 && errno == ENOENT) {
		if (!t->want_size) {
			fprintf(stderr,
				PROG ": %s: no such file (give --size to create an image file)\n",
				t->path);
			return TFS_EXIT_FAILURE;
		}
		t->fd = open(t->path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL, 0644);
		t->created = t->fd >= 0;
	}
	if (t->fd < 0) {
		int e = errno;
		struct stat st;

		if (e == EBUSY && !stat(t->path, &st) && refuse_in_use(t->path, &st))
			return TFS_EXIT_FAILURE;
		if (e == EBUSY)
			fprintf(stderr,
				PROG ": %s: device is busy (mounted or in use); not touched\n",
				t->path);
		else
			fprintf(stderr, PROG ": %s: cannot open: %s\n", t->path, strerror(e));
		return TFS_EXIT_FAILURE;
	}
	if (fstat(t->fd, &t->st)) {
		fprintf(stderr, PROG ": %s: %s\n", t->path, strerror(errno));
		return TFS_EXIT_FAILURE;
	}
	/* Before anything is probed or planned: this one is never --force'd. */
	if (!t->created && refuse_in_use(t->path, &t->st))
		return TFS_EXIT_FAILURE;
	if (!S_ISREG(t->st.st_mode) && !S_ISBLK(t->st.st_mode)) {
		fprintf(stderr, PROG ": %s: not a regular file or a block device\n", t->path);
		return TFS_EXIT_FAILURE;
	}
	t->exists = !t->created;
	t->is_blk = S_ISBLK(t->st.st_mode);
	t->orig_size = (u64)t->st.st_size;
	return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) || S_ISBLK(b->st_mode))
		return S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode) && a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * A tinyfs whose superblock copies all fail validation is invisible to
 * blkid and to tfs_sb_read(), but it is still somebody's filesystem, to be
 * repaired or copied out: a tinyfs magic where the layout sector or a copy
 * of the default layout lives says so.  The byte offset found, or 0.
 */
static u64 damaged_tinyfs_magic(const struct target *t)
{
	static const struct {
		u64 off, magic;
	} where[] = {
		{ TFS_SB_LAYOUT_OFFSET + offsetof(struct tfs_sb_layout, magic),
		  TFS_SB_LAYOUT_MAGIC },
		{ TFS_SB_OFFSET + offsetof(struct tfs_sb, magic), TFS_SB_MAGIC },
		{ TFS_SB_OFFSET + TFS_SB_MAX_SIZE_DEFAULT + offsetof(struct tfs_sb, magic),
		  TFS_SB_MAGIC },
	};

	for (unsigned i = 0; i < ARRAY_SIZE(where); i++) {
		__le64 m;

		if (pread(t->fd, &m, sizeof(m), (off_t)where[i].off) == (ssize_t)sizeof(m) &&
		    le64_to_cpu(m) == where[i].magic)
			return where[i].off;
	}
	return 0;
}

/* Sizes and signatures of one opened target; no writes.  Returns an exit status. */
static int probe_target(struct target *t, bool force)
{
	struct printbuf what = PRINTBUF;
	int found;

	if (t->created) {
		t->d.size = t->want_size;
		t->d.logical_block_size = 512;
		return 0;
	}

	found = blkid_describe(t, &what);
	if (found < 0) {
		fprintf(stderr, PROG ": %s: %s\n", t->path, printbuf_str(&what));
		printbuf_exit(&what);
		return TFS_EXIT_FAILURE;
	}

	struct tfs_bdev *bdev;
	int ret = tfs_bdev_open(t->path, TFS_BDEV_RDONLY, &bdev);

	if (ret) {
		printbuf_exit(&what);
		return TFS_EXIT_FAILURE;
	}
	if (!found && bdev->size >= TFS_SB_OFFSET + sizeof(struct tfs_sb)) {
		struct tfs_sb_handle h;
		struct printbuf err = PRINTBUF;
		u64 magic_at;

		if (!tfs_sb_read(bdev, &h, &err)) {
			prt_str(&what, "an existing tinyfs filesystem (label \"");
			prt_bytes(&what, h.sb->label,
				  tfs_strnlen_field(h.sb->label, TFS_LABEL_SIZE));
			prt_str(&what, "\", uuid ");
			prt_uuid(&what, h.sb->user_uuid);
			prt_str(&what, ")");
			found = 1;
		} else if ((magic_at = damaged_tinyfs_magic(t))) {
			prt_printf(
				&what,
				"a damaged tinyfs filesystem (a tinyfs magic at byte %llu, but no "
				"valid superblock; `tinyfs show-super -l` says why)",
				(unsigned long long)magic_at);
			found = 1;
		}
		tfs_sb_exit(&h);
		printbuf_exit(&err);
	}
	t->d.logical_block_size = bdev->logical_block_size;
	if (t->is_blk) {
		if (t->want_size > bdev->size) {
			fprintf(stderr,
				PROG ": %s: --size %llu is larger than the device (%llu bytes)\n",
				t->path, (unsigned long long)t->want_size,
				(unsigned long long)bdev->size);
			tfs_bdev_close(bdev);
			printbuf_exit(&what);
			return TFS_EXIT_FAILURE;
		}
		t->d.size = t->want_size ?: bdev->size;
	} else {
		t->d.size = t->want_size ?: t->orig_size;
	}
	tfs_bdev_close(bdev);

	if (found) {
		t->has_signature = true;
		if (!force) {
			fprintf(stderr, PROG ": %s: contains %s; use --force to overwrite it\n",
				t->path, printbuf_str(&what));
			printbuf_exit(&what);
			return TFS_EXIT_FAILURE;
		}
	}
	printbuf_exit(&what);
	return 0;
}

/* Extends an image file to its planned size (through the held fd). */
static int prepare_file(struct target *t)
{
	if (t->is_blk || t->orig_size >= t->d.size)
		return 0;
	t->extended = t->exists;
	if (ftruncate(t->fd, (off_t)t->d.size)) {
		int e = errno;

		struct printbuf sz = PRINTBUF;

		prt_units_u64(&sz, t->d.size);
		fprintf(stderr, PROG ": %s: cannot set the size to %s: %s\n", t->path,
			printbuf_str(&sz), strerror(e));
		printbuf_exit(&sz);
		return -e;
	}
	return 0;
}

/* After a failure: remove what we created, shrink what we extended. */
static void undo_file(struct target *t)
{
	if (t->created && unlink(t->path))
		fprintf(stderr, PROG ": %s: cannot remove: %s\n", t->path, strerror(errno));
	if (t->extended && ftruncate(t->fd, (off_t)t->orig_size))
		fprintf(stderr, PROG ": %s: cannot restore the size: %s\n", t->path,
			strerror(errno));
	t->created = t->extended = false;
}

enum {
	OPT_SIZE = 256,
	OPT_BLOCK_SIZE,
	OPT_BUCKET_SIZE,
	OPT_JOURNAL_SIZE,
	OPT_META_REPL,
	OPT_META_REPL_REQ,
	OPT_DATA_REPL,
	OPT_DATA_REPL_REQ,
	OPT_DURABILITY,
	OPT_DEV_LABEL,
	OPT_DISCARD,
	OPT_ERROR_ACTION,
	OPT_FAULT,
	OPT_BTREE_NODE_SIZE,
};

static int bad_value(const char *opt, const char *val, const char *what)
{
	fprintf(stderr, PROG ": --%s \"%s\": %s\n", opt, val, what);
	return TFS_EXIT_USAGE;
}

/* A size option refused: not a size, zero, or above max. */
static int size_err(const char *opt, const char *val, int err, bool zero, u64 max)
{
	if (!err && zero)
		return bad_value(opt, val, "must not be 0");
	return tfs_size_opt_err(PROG, opt, val, err, max);
}

/* Labels must be UTF-8 without control characters (what validation requires). */
static bool bad_label(const char *opt, const char *val)
{
	int bad = tfs_label_bad_byte(val, strlen(val));

	if (bad < 0)
		return false;
	fprintf(stderr,
		PROG ": --%s: byte %d (0x%02x) is not valid UTF-8 or is a control character\n", opt,
		bad, (unsigned char)val[bad]);
	return true;
}

/* One line per member: what mkfs made of it. */
static void summary_to_text(struct printbuf *out, const struct target *t,
			    const struct tfs_sb_handle *h)
{
	const struct tfs_member *m = tfs_sb_this_member(h->sb);
	u64 jnr = tfs_sb_journal_nr_buckets(h->sb);
	u32 bs = le32_to_cpu(m->bucket_size);

	prt_printf(out, "%s: member %u of %u, ", t->path, h->sb->dev_idx, h->sb->nr_devices);
	prt_units_u64(out, le64_to_cpu(m->nbuckets) * bs);
	prt_printf(out, ", %llu buckets of ", (unsigned long long)le64_to_cpu(m->nbuckets));
	prt_units_u64(out, bs);
	prt_printf(out, ", journal %llu buckets (", (unsigned long long)jnr);
	prt_units_u64(out, jnr * bs);
	prt_str(out, ")\n");
}

/*
 * The summary, whole or not at all: an allocation failure prints no cut
 * line but says so, and mkfs then fails (the filesystem is made).
 */
static int print_summary(const struct target *targets, const struct tfs_sb_handle *hs, unsigned nr,
			 const char *label)
{
	struct printbuf out = PRINTBUF;
	int ret = 0;

	for (unsigned i = 0; i < nr; i++)
		summary_to_text(&out, &targets[i], &hs[i]);
	prt_str(&out, "tinyfs uuid ");
	prt_uuid(&out, hs[0].sb->user_uuid);
	prt_printf(&out, ", label \"%s\", block size ", label ?: "");
	prt_units_u64(&out, le32_to_cpu(hs[0].sb->block_size));
	prt_str(&out, ", btree node size ");
	prt_units_u64(&out, tfs_sb_btree_node_size(hs[0].sb));
	prt_newline(&out);
	if (out.allocation_failure) {
		fprintf(stderr,
			PROG ": out of memory printing the summary (the filesystem was made)\n");
		ret = -ENOMEM;
	} else if (fputs(printbuf_str(&out), stdout) == EOF || fflush(stdout)) {
		fprintf(stderr, PROG ": writing the summary failed: %s (the filesystem was made)\n",
			strerror(errno));
		ret = -EIO;
	}
	printbuf_exit(&out);
	return ret;
}

/* Leaves main() through its one cleanup path. */
#define EXIT_WITH(st)          \
	do {                   \
		status = (st); \
		goto out;      \
	} while (0)

static int mkfs_init_trees(struct target *targets, unsigned nr)
{
	const char *paths[TFS_MAX_DEVICES];
	struct tfs_fs_opts o;
	struct tfs_fs *fs;
	int ret;

	tfs_fs_opts_default(&o);
	o.format = true;
	for (unsigned i = 0; i < nr; i++)
		paths[i] = targets[i].path;
	for (unsigned i = 0; i < nr; i++) {
		/* The filesystem opens them itself: kernels refuse that while we hold O_EXCL. */
		if (targets[i].is_blk && targets[i].fd >= 0) {
			tfs_bdev_close(targets[i].bdev);
			targets[i].bdev = NULL;
			close(targets[i].fd);
			targets[i].fd = -1;
		}
	}
	ret = tfs_fs_open(paths, nr, &o, &fs) ?: tfs_fs_stop(fs);
	if (ret)
		fprintf(stderr, PROG ": initializing the btrees: %s\n", tfs_err_str(ret));
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "block-size", required_argument, NULL, OPT_BLOCK_SIZE },
		{ "btree-node-size", required_argument, NULL, OPT_BTREE_NODE_SIZE },
		{ "bucket-size", required_argument, NULL, OPT_BUCKET_SIZE },
		{ "journal-size", required_argument, NULL, OPT_JOURNAL_SIZE },
		{ "label", required_argument, NULL, 'L' },
		{ "uuid", required_argument, NULL, 'U' },
		{ "metadata-replicas", required_argument, NULL, OPT_META_REPL },
		{ "metadata-replicas-required", required_argument, NULL, OPT_META_REPL_REQ },
		{ "data-replicas", required_argument, NULL, OPT_DATA_REPL },
		{ "data-replicas-required", required_argument, NULL, OPT_DATA_REPL_REQ },
		{ "durability", required_argument, NULL, OPT_DURABILITY },
		{ "dev-label", required_argument, NULL, OPT_DEV_LABEL },
		{ "discard", no_argument, NULL, OPT_DISCARD },
		{ "error-action", required_argument, NULL, OPT_ERROR_ACTION },
		{ "force", no_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "fault", required_argument, NULL, OPT_FAULT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct tfs_format_opts opts = { .error_action = TFS_ON_ERROR_ro };
	struct target *targets = NULL, cur = { .fd = -1 };
	struct tfs_sb_handle *hs = NULL, **hps = NULL;
	struct printbuf err = PRINTBUF;
	unsigned nr = 0;
	bool force = false, quiet = false, have_uuid = false, dev_opt_pending = false;
	int c, status = TFS_EXIT_FAILURE, ret;
	u64 v;

	if (tfs_faults_from_env())
		return TFS_EXIT_USAGE;

	targets = calloc((size_t)argc, sizeof(*targets));
	if (!targets)
		return TFS_EXIT_FAILURE;

	/* getopt's own messages name argv[0]: the tool, not the path it was run by. */
	argv[0] = (char *)PROG;
	/* "-" first: devices come back in order, so device options apply to later ones. */
	while ((c = getopt_long(argc, argv, "-L:U:fqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 1:
			cur.path = optarg;
			targets[nr++] = cur;
			dev_opt_pending = false;
			continue;
		case OPT_SIZE:
			/* ftruncate() takes an off_t. */
			ret = tfs_parse_size(optarg, &cur.want_size);
			if (ret || !cur.want_size || cur.want_size > INT64_MAX)
				EXIT_WITH(size_err("size", optarg, ret, !cur.want_size, INT64_MAX));
			break;
		case OPT_BLOCK_SIZE:
			ret = tfs_parse_size(optarg, &v);
			if (ret || !v || v > TFS_BLOCK_SIZE_MAX)
				EXIT_WITH(size_err("block-size", optarg, ret, !v,
						   TFS_BLOCK_SIZE_MAX));
			opts.block_size = (u32)v;
			continue;
		case OPT_BTREE_NODE_SIZE:
			ret = tfs_parse_size(optarg, &v);
			if (ret || !v || v > TFS_BTREE_NODE_SIZE_MAX)
				EXIT_WITH(size_err("btree-node-size", optarg, ret, !v,
						   TFS_BTREE_NODE_SIZE_MAX));
			opts.btree_node_size = (u32)v;
			continue;
		case OPT_BUCKET_SIZE:
			ret = tfs_parse_size(optarg, &v);
			if (ret || !v || v > TFS_BUCKET_SIZE_MAX)
				EXIT_WITH(size_err("bucket-size", optarg, ret, !v,
						   TFS_BUCKET_SIZE_MAX));
			cur.d.bucket_size = (u32)v;
			break;
		case OPT_JOURNAL_SIZE:
			ret = tfs_parse_size(optarg, &cur.d.journal_size);
			if (ret || !cur.d.journal_size)
				EXIT_WITH(size_err("journal-size", optarg, ret, !cur.d.journal_size,
						   UINT64_MAX));
			break;
		case 'L':
			if (bad_label("label", optarg))
				EXIT_WITH(TFS_EXIT_USAGE);
			opts.label = optarg;
			continue;
		case 'U':
			if (uuid_parse(optarg, opts.user_uuid))
				EXIT_WITH(bad_value("uuid", optarg, "not a uuid"));
			if (uuid_is_null(opts.user_uuid))
				EXIT_WITH(
					bad_value("uuid", optarg, "the null uuid is not allowed"));
			have_uuid = true;
			continue;
		case OPT_META_REPL:
		case OPT_META_REPL_REQ:
		case OPT_DATA_REPL:
		case OPT_DATA_REPL_REQ: {
			u8 *dst[] = { &opts.metadata_replicas, &opts.metadata_replicas_required,
				      &opts.data_replicas, &opts.data_replicas_required };
			const char *names[] = { "metadata-replicas", "metadata-replicas-required",
						"data-replicas", "data-replicas-required" };

			if (tfs_parse_uint(optarg, 1, TFS_MAX_REPLICAS, &v))
				EXIT_WITH(bad_value(names[c - OPT_META_REPL], optarg,
						    "must be 1 to 4"));
			*dst[c - OPT_META_REPL] = (u8)v;
			continue;
		}
		case OPT_DURABILITY:
			if (tfs_parse_uint(optarg, 0, TFS_MAX_DURABILITY, &v))
				EXIT_WITH(bad_value("durability", optarg, "must be 0 to 4"));
			cur.d.durability_set = true;
			cur.d.durability = (u8)v;
			break;
		case OPT_DEV_LABEL:
			if (bad_label("dev-label", optarg))
				EXIT_WITH(TFS_EXIT_USAGE);
			cur.d.label = optarg;
			break;
		case OPT_DISCARD:
			cur.d.discard = true;
			break;
		case OPT_ERROR_ACTION:
			ret = tfs_error_action_parse(optarg);
			if (ret < 0)
				EXIT_WITH(
					bad_value("error-action", optarg, "continue, ro or panic"));
			opts.error_action = (u8)ret;
			continue;
		case 'f':
			force = true;
			continue;
		case 'q':
			quiet = true;
			continue;
		case OPT_FAULT:
			if (tfs_faults_from_opt(PROG, optarg))
				EXIT_WITH(TFS_EXIT_USAGE);
			continue;
		case 'h':
			usage(stdout);
			EXIT_WITH(TFS_EXIT_OK);
		case 'V':
			tfs_print_version(PROG);
			EXIT_WITH(TFS_EXIT_OK);
		default:
			fprintf(stderr, "Try `" PROG " --help'.\n");
			EXIT_WITH(TFS_EXIT_USAGE);
		}
		/* A device option: it applies to the devices that follow. */
		dev_opt_pending = true;
	}
	if (!nr) {
		fprintf(stderr, PROG ": no device or image given\n");
		usage(stderr);
		EXIT_WITH(TFS_EXIT_USAGE);
	}
	if (dev_opt_pending) {
		fprintf(stderr, PROG ": device options after the last device apply to nothing\n");
		EXIT_WITH(TFS_EXIT_USAGE);
	}

	const char *sde = getenv("SOURCE_DATE_EPOCH");

	if (sde) {
		if (tfs_parse_uint(sde, 0, INT64_MAX, &opts.time)) {
			fprintf(stderr,
				PROG ": SOURCE_DATE_EPOCH \"%s\" is not a number of seconds\n",
				sde);
			EXIT_WITH(TFS_EXIT_USAGE);
		}
	} else {
		opts.time = (u64)time(NULL);
	}
	if (!have_uuid)
		uuid_generate(opts.user_uuid);
	if (have_uuid)
		derive_uuid(opts.user_uuid, 0xffffffff, opts.uuid);
	else
		uuid_generate(opts.uuid);

	struct tfs_format_dev *devs = calloc(nr, sizeof(*devs));

	hs = calloc(nr, sizeof(*hs));
	hps = calloc(nr, sizeof(*hps));
	if (!devs || !hs || !hps) {
		free(devs);
		goto out;
	}

	/*
	 * Nothing is written until every target is open (block devices
	 * exclusively), probed and planned, and every file has its size: a
	 * mkfs that fails before the wipe leaves every target as it was.
	 */
	for (unsigned i = 0; i < nr; i++) {
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(targets[i].path, targets[j].path)) {
				fprintf(stderr, PROG ": %s is named twice\n", targets[i].path);
				free(devs);
				status = TFS_EXIT_USAGE;
				goto undo;
			}
		if (have_uuid)
			derive_uuid(opts.user_uuid, i, targets[i].d.uuid);
		else
			uuid_generate(targets[i].d.uuid);
		status = open_target(&targets[i]);
		if (status) {
			free(devs);
			goto undo;
		}
		/* The same file or device under another name (./x, symlink, hard link). */
		for (unsigned j = 0; j < i; j++)
			if (same_file(&targets[i].st, &targets[j].st)) {
				fprintf(stderr, PROG ": %s and %s are the same %s\n",
					targets[j].path, targets[i].path,
					targets[i].is_blk ? "device" : "file");
				free(devs);
				status = TFS_EXIT_USAGE;
				goto undo;
			}
	}
	for (unsigned i = 0; i < nr; i++) {
		status = probe_target(&targets[i], force);
		if (status) {
			free(devs);
			goto undo;
		}
	}

	for (unsigned i = 0; i < nr; i++) {
		devs[i] = targets[i].d;
		devs[i].name = targets[i].path;
	}
	ret = tfs_format_plan(&opts, devs, nr, hs, &err);
	free(devs);
	if (ret) {
		tfs_print_err(PROG, &err);
		status = tfs_err_matches(ret, TFS_ERR_invalid_option) ? TFS_EXIT_USAGE
								      : TFS_EXIT_FAILURE;
		goto undo;
	}

	status = TFS_EXIT_FAILURE;
	for (unsigned i = 0; i < nr; i++) {
		struct target *t = &targets[i];

		/* The held fd keeps the exclusive claim: the bdev needs none. */
		if (prepare_file(t) || tfs_bdev_open(t->path, 0, &t->bdev))
			goto undo;
		hs[i].bdev = t->bdev;
		hps[i] = &hs[i];
	}
	/* Everything checked: from here on devices are written. */
	for (unsigned i = 0; i < nr; i++)
		if (targets[i].has_signature && blkid_wipe(&targets[i], quiet))
			goto undo;
	ret = tfs_format_write(hps, nr, &err);
	if (ret) {
		tfs_print_err(PROG, &err);
		goto undo;
	}
	/* The empty btrees, recorded, so the filesystem opens (fs/fs.h: format). */
	if (mkfs_init_trees(targets, nr))
		goto undo;
	status = !quiet && print_summary(targets, hs, nr, opts.label) ? TFS_EXIT_FAILURE
								      : TFS_EXIT_OK;
	goto out;
undo:
	for (unsigned i = 0; i < nr; i++) {
		if (targets[i].bdev)
			tfs_bdev_close(targets[i].bdev);
		targets[i].bdev = NULL;
		if (targets[i].fd >= 0)
			undo_file(&targets[i]);
	}
out:
	for (unsigned i = 0; hs && i < nr; i++) {
		if (targets[i].bdev)
			tfs_bdev_close(targets[i].bdev);
		hs[i].bdev = NULL;
		tfs_sb_exit(&hs[i]);
		if (targets[i].fd >= 0)
			close(targets[i].fd);
	}
	free(hs);
	free(hps);
	free(targets);
	printbuf_exit(&err);
	return status;
}
