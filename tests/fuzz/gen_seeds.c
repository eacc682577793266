// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz_gen_seeds: writes the seed corpora of the fuzz targets from real
 * on-disk structures (scripts: tests/fuzz/gen-seeds.sh).
 *
 *	fuzz_gen_seeds OUTDIR [IMG...] [--fs FSIMG...]
 *
 * For each IMG (made by mkfs.tinyfs): its superblock copy, for targets sb
 * and sb_read (several modes), and the same copy with a clean field added
 * through tfs_sb_set_clean().  Then journals written by the journal itself,
 * in image files of the journal_read target's geometry (block 512, bucket
 * 2 KiB, 4 buckets per member), over a few scenarios (flushes, a NO_FLUSH
 * tail, a ring that wrapped, a restart with a blacklist, two members): the
 * buckets become journal_read (and journal_restart) seeds and the entries
 * in them jset seeds.
 * For each FSIMG (one member, made by mkfs.tinyfs, so initialized): image
 * seeds (target image) of it as made, after keys were added to several
 * btrees and a clean stop, after enough keys for a two-level tree, and
 * after keys committed and flushed by a process that then exits without
 * stopping (the roots and keys are in the journal only); and the btree
 * nodes of those images as btree_node seeds (with fuzz_uuid's magic).
 * OUTDIR/TARGET/ must exist; files are named after what they hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/btree.h"
#include "fs/btree_format.h"
#include "fs/fs.h"
#include "fs/fs_types.h"

#include "journal/journal.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tests/fuzz/fuzz.h"

static const char *outdir;
static unsigned nr_written;

/* Writes OUTDIR/target/name: the mode byte (or header), then data. */
static void write_seed(const char *target, const char *name, const void *hdr, size_t hdr_len,
		       const void *data, size_t len)
{
	struct printbuf path = PRINTBUF;
	FILE *f;

	prt_printf(&path, "%s/%s/%s", outdir, target, name);
	f = fopen(printbuf_str(&path), "wb");
	if (!f || fwrite(hdr, 1, hdr_len, f) != hdr_len ||
	    (len && fwrite(data, 1, len, f) != len) || fclose(f)) {
		fprintf(stderr, "fuzz_gen_seeds: %s: %s\n", printbuf_str(&path), strerror(errno));
		exit(1);
	}
	nr_written++;
	printbuf_exit(&path);
	/* journal_restart reads the same members as journal_read. */
	if (!strcmp(target, "journal_read"))
		write_seed("journal_restart", name, hdr, hdr_len, data, len);
}

/* --- superblocks --- */

/* The smallest size selector s with base << (step * s) >= size, at most 7. */
static unsigned size_sel(u64 size, unsigned base_shift, unsigned step)
{
	unsigned s = 0;

	while (s < 7 && (1ULL << (base_shift + step * s)) < size)
		s++;
	return s;
}

/* Seeds of copy sb: two for target sb, two of the four sb_read policies (by nr). */
static void sb_seeds(const char *name, const struct tfs_sb *sb, u64 dev_size, unsigned nr)
{
	size_t bytes = tfs_sb_bytes(sb);
	unsigned s_sb = size_sel(dev_size, 18, 3) + 1; /* target sb: 2^(15 + 3s) */
	unsigned s_read = size_sel(dev_size, 17, 2);   /* target sb_read: 2^(17 + 2s) */
	struct printbuf n = PRINTBUF;
	u8 mode;

	mode = 0;
	prt_printf(&n, "%s", name);
	write_seed("sb", printbuf_str(&n), &mode, 1, sb, bytes);
	mode = FUZZ_FIX | s_sb << 1;
	printbuf_reset(&n);
	prt_printf(&n, "%s-fix-size", name);
	write_seed("sb", printbuf_str(&n), &mode, 1, sb, bytes);

	/* sb_read (mode, policy): see fuzz_sb_read.c. */
	static const struct {
		const char *what;
		u8 mode, policy;
	} reads[] = {
		{ "all", 0, 1 },
		{ "older-backup", FUZZ_FIX, 2 },
		{ "backup-only", FUZZ_FIX, 1 | 1 << 3 },
		{ "no-layout", 0, 1 | 0x20 },
		{ "torn-primary", FUZZ_FIX, 1 | 2 << 3 },
		{ "other-fs-backup", FUZZ_FIX, 4 },
		{ "fewer-copies", FUZZ_FIX, 6 },
		{ "torn-backup", 0, 7 },
	};
	for (unsigned k = 0; k < 2; k++) {
		unsigned i = (nr + 4 * k) % ARRAY_SIZE(reads);
		u8 hdr[2] = { reads[i].mode | s_read << 1, reads[i].policy };

		printbuf_reset(&n);
		prt_printf(&n, "%s-%s", name, reads[i].what);
		write_seed("sb_read", printbuf_str(&n), hdr, 2, sb, bytes);
	}
	printbuf_exit(&n);
}

static int image_seeds(const char *path, unsigned nr)
{
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct printbuf name = PRINTBUF;
	int ret = tfs_sb_open(path, TFS_BDEV_RDONLY | TFS_BDEV_BUFFERED, &h, &err);

	if (ret) {
		fprintf(stderr, "fuzz_gen_seeds: %s\n", printbuf_str(&err));
		printbuf_exit(&err);
		return ret;
	}
	prt_printf(&name, "%.*s", (int)strcspn(base, "."), base);
	sb_seeds(printbuf_str(&name), h.sb, h.bdev->size, nr);
	/* The first two images also as after a clean unmount. */
	if (nr >= 2)
		goto out;

	/* A clean unmount's copy: two btree roots of 3 and 2 words. */
	__le64 entries[5] = { 0 };
	struct tfs_clean_entry *e = (void *)entries;

	e->u64s = cpu_to_le16(3);
	e->type = TFS_CLEAN_btree_root;
	e->btree_id = 1;
	entries[1] = cpu_to_le64(2);
	entries[2] = cpu_to_le64(0x1000);
	e = (void *)&entries[3];
	e->u64s = cpu_to_le16(2);
	e->type = TFS_CLEAN_btree_root;
	e->btree_id = 2;
	e->level = 1;
	entries[4] = cpu_to_le64(1);
	ret = tfs_sb_set_clean(&h, 77, entries, ARRAY_SIZE(entries));
	if (!ret) {
		h.sb->layout.csum = cpu_to_le32(tfs_sb_layout_csum(&h.sb->layout));
		h.sb->csum = cpu_to_le32(tfs_sb_csum(h.sb));
		prt_str(&name, "-clean");
		sb_seeds(printbuf_str(&name), h.sb, h.bdev->size, nr + 1);
	}
out:
	printbuf_exit(&name);
	printbuf_exit(&err);
	tfs_sb_exit(&h);
	return ret;
}

/* --- journals --- */

#define J_BLOCK 512
#define J_BUCKET 2048
#define J_NR_BUCKETS 4

struct jscen {
	char dir[64];
	char path[2][128];
	struct tfs_bdev *bdev[2];
	u64 buckets[J_NR_BUCKETS];
	struct tfs_journal_dev devs[2];
	unsigned nr_devs;
	struct tfs_journal_opts opts;
	struct tfs_journal *j;
	/* Held from the first pinned commit on: last_seq stays there. */
	struct tfs_journal_entry_pin pin;
};

static void die(const char *what, int ret, struct printbuf *err)
{
	fprintf(stderr, "fuzz_gen_seeds: %s: %s%s%s\n", what, tfs_err_str(ret),
		err && err->pos ? ": " : "", err ? printbuf_str(err) : "");
	exit(1);
}

static void jscen_init(struct jscen *s, unsigned nr_devs, unsigned replicas)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/tfs-fuzz-seeds-XXXXXX");
	if (!mkdtemp(s->dir))
		die("mkdtemp", -errno, NULL);
	for (unsigned b = 0; b < J_NR_BUCKETS; b++)
		s->buckets[b] = b + 1;
	s->nr_devs = nr_devs;
	for (unsigned i = 0; i < nr_devs; i++) {
		snprintf(s->path[i], sizeof(s->path[i]), "%s/j%u", s->dir, i);
		int fd = open(s->path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);

		if (fd < 0 || ftruncate(fd, (J_NR_BUCKETS + 1) * J_BUCKET))
			die(s->path[i], -errno, NULL);
		close(fd);
		s->devs[i] = (struct tfs_journal_dev){
			.dev_idx = i,
			.bucket_size = J_BUCKET,
			.buckets = s->buckets,
			.nr_buckets = J_NR_BUCKETS,
			.writable = true,
		};
	}
	tfs_journal_opts_default(&s->opts);
	memcpy(s->opts.uuid, fuzz_uuid, sizeof(s->opts.uuid));
	s->opts.block_size = J_BLOCK;
	s->opts.max_entry_size = 2 * J_BLOCK;
	s->opts.metadata_replicas = replicas;
	s->opts.write_delay_ms = 1;
	s->opts.flush_delay_ms = 1000000;
}

static void jscen_open(struct jscen *s)
{
	for (unsigned i = 0; i < s->nr_devs; i++) {
		int ret = tfs_bdev_open(s->path[i], TFS_BDEV_BUFFERED, &s->bdev[i]);

		if (ret)
			die(s->path[i], ret, NULL);
		s->devs[i].bdev = s->bdev[i];
	}
}

/* Opens the devices and starts the journal: fresh, or after what is on them. */
static void jscen_start(struct jscen *s, bool after)
{
	struct tfs_journal_read *r = NULL;
	struct printbuf err = PRINTBUF;
	int ret;

	jscen_open(s);
	if (after && (ret = tfs_journal_read(s->devs, s->nr_devs, &s->opts, &r, &err)))
		die("journal read", ret, &err);
	ret = tfs_journal_init(&s->j, s->devs, s->nr_devs, &s->opts, &err)
		      ?: tfs_journal_start(s->j, r);
	if (ret)
		die("journal start", ret, &err);
	tfs_journal_pin_init(&s->pin);
	if (r)
		tfs_journal_replay_done(s->j);
	tfs_journal_read_free(r);
	printbuf_exit(&err);
}

static void jscen_close(struct jscen *s)
{
	tfs_journal_exit(s->j);
	s->j = NULL;
	for (unsigned i = 0; i < s->nr_devs; i++) {
		tfs_bdev_close(s->bdev[i]);
		s->bdev[i] = NULL;
	}
}

/* Stops the journal (halted first when tail: what is after the last flush stays NO_FLUSH). */
static void jscen_stop(struct jscen *s, bool halt)
{
	int ret;

	if (halt)
		tfs_journal_halt(s->j);
	tfs_journal_pin_drop(s->j, &s->pin);
	ret = tfs_journal_stop(s->j);
	if (ret && !(halt && ret == -TFS_ERR_journal_halted))
		die("journal stop", ret, NULL);
	jscen_close(s);
}

/*
 * Commits key i (and, when extras, a btree_root and a usage sub-entry);
 * flush waits until it is durable, else until it is written (NO_FLUSH).
 * pin keeps its seq (or an older one already pinned) from being reclaimed,
 * so reclaim writes no flush entry of its own to record a newer last_seq.
 */
static u64 jscen_commit_pin(struct jscen *s, u64 i, bool extras, bool flush, bool pin)
{
	struct tfs_journal_res res;
	unsigned u64s = tfs_jset_entry_u64s(3) + (extras ? 2 * tfs_jset_entry_u64s(2) : 0);
	int ret = tfs_journal_res_get(s->j, &res, u64s, 0);

	if (ret)
		die("journal reservation", ret, NULL);
	if (pin)
		tfs_journal_pin_add(s->j, res.seq, &s->pin, NULL);
	__le64 *k = tfs_journal_res_add_entry(s->j, &res, TFS_JSET_ENTRY_btree_keys, 1, 0, 3);

	k[0] = cpu_to_le64(3 | (i << 32));
	k[1] = cpu_to_le64(i * 0x9e3779b97f4a7c15ULL);
	k[2] = cpu_to_le64(i);
	if (extras) {
		k = tfs_journal_res_add_entry(s->j, &res, TFS_JSET_ENTRY_btree_root, 2, 1, 2);
		k[0] = cpu_to_le64(2);
		k[1] = cpu_to_le64(0x1234 + i);
		struct jset_usage *u = (void *)tfs_journal_res_add_entry(
			s->j, &res, TFS_JSET_ENTRY_usage, 0, 0, sizeof(struct jset_usage) / 8);

		u->kind = cpu_to_le32(1);
		u->dev = 0;
		u->value = cpu_to_le64(4096 * (i + 1));
	}
	tfs_journal_res_put(s->j, &res);
	if (flush && (ret = tfs_journal_flush_seq(s->j, res.seq)))
		die("journal flush", ret, NULL);
	if (!flush)
		for (int w = 0; w < 20000 && tfs_journal_seq_ondisk(s->j) < res.seq; w++)
			usleep(100);
	return res.seq;
}

static u64 jscen_commit(struct jscen *s, u64 i, bool extras, bool flush)
{
	return jscen_commit_pin(s, i, extras, flush, false);
}

/* Every bucket of member dev, in ring order, read back from its file. */
static u8 *jscen_buckets(struct jscen *s, unsigned dev)
{
	u8 *buf = malloc(J_NR_BUCKETS * J_BUCKET);
	int fd = open(s->path[dev], O_RDONLY);

	if (!buf || fd < 0)
		die(s->path[dev], -errno, NULL);
	for (unsigned b = 0; b < J_NR_BUCKETS; b++)
		if (pread(fd, buf + b * J_BUCKET, J_BUCKET, s->buckets[b] * J_BUCKET) != J_BUCKET)
			die(s->path[dev], -EIO, NULL);
	close(fd);
	return buf;
}

struct jset_kind {
	u32 flags;
	unsigned types; /* bitmask of sub-entry types */
};

static struct jset_kind jset_kinds[32];
static unsigned nr_jset_kinds;

/* Writes a jset seed for each kind of entry (flags, sub-entry types) not seen yet. */
static void jset_seeds(const char *name, const u8 *buckets, size_t len)
{
	u64 magic = tfs_jset_magic(fuzz_uuid);

	for (size_t off = 0; off + sizeof(struct jset) <= len; off += J_BLOCK) {
		const struct jset *js = (const void *)(buckets + off);
		size_t room = J_BUCKET - off % J_BUCKET;
		struct printbuf err = PRINTBUF;

		if (le64_to_cpu(js->magic) != magic || tfs_jset_validate(js, room, magic, &err)) {
			printbuf_exit(&err);
			continue;
		}
		printbuf_exit(&err);

		struct jset_kind k = { .flags = le32_to_cpu(js->flags) };
		const __le64 *end = js->_data + le32_to_cpu(js->u64s);
		bool seen = false;

		for (const struct jset_entry *e = (const void *)js->_data; (const __le64 *)e < end;
		     e = tfs_jset_entry_next((struct jset_entry *)e))
			k.types |= 1U << e->type;
		for (unsigned i = 0; i < nr_jset_kinds; i++)
			seen |= jset_kinds[i].flags == k.flags && jset_kinds[i].types == k.types;
		if (seen || nr_jset_kinds == ARRAY_SIZE(jset_kinds))
			continue;
		jset_kinds[nr_jset_kinds++] = k;

		struct printbuf n = PRINTBUF;
		u8 mode = nr_jset_kinds % 2 ? FUZZ_FIX : 0;

		prt_printf(&n, "%s-seq%llu", name, (unsigned long long)le64_to_cpu(js->seq));
		write_seed("jset", printbuf_str(&n), &mode, 1, js,
			   tfs_jset_bytes(le32_to_cpu(js->u64s)));
		printbuf_exit(&n);
	}
}

/*
 * Writes the scenario's journal_read seed (both members' buckets, trailing
 * zeros cut) and its jset seeds, then removes its files.
 */
static void jscen_seeds(struct jscen *s, const char *name, bool replica)
{
	size_t per_dev = J_NR_BUCKETS * J_BUCKET;
	unsigned nr = replica ? 1 : s->nr_devs;
	u8 *all = malloc(nr * per_dev);
	/* Header: see fuzz_journal_read.c (block 512, bucket 512 << 2, default pin fifo). */
	u8 hdr[4] = { (s->nr_devs > 1 ? 2 : 0) | (replica ? 4 : 0), 2 << 2, J_NR_BUCKETS - 1, 0 };
	size_t len;

	if (!all)
		abort();
	for (unsigned d = 0; d < nr; d++) {
		u8 *b = jscen_buckets(s, d);

		memcpy(all + d * per_dev, b, per_dev);
		jset_seeds(name, b, per_dev);
		free(b);
	}
	for (len = nr * per_dev; len && !all[len - 1]; len--)
		;
	write_seed("journal_read", name, hdr, sizeof(hdr), all, len);
	hdr[0] |= FUZZ_FIX;
	/* The same with the newest bucket unreadable. */
	hdr[0] |= 8;
	hdr[3] = 0;
	{
		struct printbuf n = PRINTBUF;

		prt_printf(&n, "%s-eio", name);
		write_seed("journal_read", printbuf_str(&n), hdr, sizeof(hdr), all, len);
		printbuf_exit(&n);
	}
	free(all);
	for (unsigned i = 0; i < s->nr_devs; i++)
		unlink(s->path[i]);
	rmdir(s->dir);
}

static void journal_seeds(void)
{
	struct jscen s;

	/* Flush entries, the first with a btree_root and a usage sub-entry. */
	jscen_init(&s, 1, 1);
	jscen_start(&s, false);
	for (unsigned i = 0; i < 5; i++)
		jscen_commit(&s, i, !i, true);
	jscen_stop(&s, false);
	jscen_seeds(&s, "j1-flush", false);

	/* A NO_FLUSH tail after the newest flush entry, then a restart: blacklist. */
	jscen_init(&s, 1, 1);
	jscen_start(&s, false);
	for (unsigned i = 0; i < 3; i++)
		jscen_commit_pin(&s, i, !i, true, true);
	for (unsigned i = 3; i < 5; i++)
		jscen_commit_pin(&s, i, false, false, true);
	jscen_stop(&s, true);
	{
		/* The tail as it was left, before the restart rewrites anything. */
		u8 *b = jscen_buckets(&s, 0);
		size_t len = J_NR_BUCKETS * J_BUCKET;
		u8 hdr[4] = { 0, 2 << 2, J_NR_BUCKETS - 1, 0 };

		while (len && !b[len - 1])
			len--;
		write_seed("journal_read", "j1-tail", hdr, sizeof(hdr), b, len);
		jset_seeds("j1-tail", b, J_NR_BUCKETS * J_BUCKET);
		free(b);
	}
	jscen_start(&s, true);
	for (unsigned i = 5; i < 7; i++)
		jscen_commit_pin(&s, i, false, true, true);
	jscen_stop(&s, false);
	jscen_seeds(&s, "j1-restart", false);

	/* More entries than the ring holds: it wraps, last_seq moves on. */
	jscen_init(&s, 1, 1);
	jscen_start(&s, false);
	for (unsigned i = 0; i < 24; i++)
		jscen_commit(&s, i, i % 7 == 0, i % 3 == 2);
	jscen_stop(&s, false);
	jscen_seeds(&s, "j1-wrap", false);

	/* Two members, two replicas: the same entries on both. */
	jscen_init(&s, 2, 2);
	jscen_start(&s, false);
	for (unsigned i = 0; i < 4; i++)
		jscen_commit(&s, i, !i, true);
	jscen_stop(&s, false);
	jscen_seeds(&s, "j2-replicas", true);

	/* Two members, one replica. */
	jscen_init(&s, 2, 1);
	jscen_start(&s, false);
	for (unsigned i = 0; i < 6; i++)
		jscen_commit_pin(&s, i, i == 2, i % 2, i >= 1);
	jscen_stop(&s, false);
	jscen_seeds(&s, "j2-single", false);
}

/* --- filesystems --- */

static u8 *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	u8 *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		die(path, -errno, NULL);
	buf = malloc(n ?: 1);
	if (!buf || fread(buf, 1, n, f) != (size_t)n)
		die(path, -EIO, NULL);
	fclose(f);
	*size = n;
	return buf;
}

struct bytes {
	u8 *p;
	size_t len, size;
};

static void bytes_add(struct bytes *b, const void *data, size_t len)
{
	if (b->len + len > b->size) {
		b->size = max_t(size_t, 2 * b->size, b->len + len);
		b->p = realloc(b->p, b->size);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static bool sector_zero(const u8 *p)
{
	for (unsigned i = 0; i < 512; i++)
		if (p[i])
			return false;
	return true;
}

/* An image seed: the runs of nonzero 512-byte sectors as records (fuzz_image.c). */
static void image_seed(const char *name, const u8 *img, size_t size)
{
	struct bytes out = { 0 };
	u8 mode = 0;

	/* Image size 1 MiB << s, in bits 1-2. */
	while (((size_t)1 << (20 + mode / 2)) < size && mode < 6)
		mode += 2;
	for (size_t s = 0; s < size / 512;) {
		size_t e = s;

		while (e < size / 512 && !sector_zero(img + e * 512))
			e++;
		if (e == s) {
			s++;
			continue;
		}
		while (s < e) {
			size_t n = min_t(size_t, e - s, 65535 / 512);
			__le32 sector = cpu_to_le32((u32)s);
			__le16 len = cpu_to_le16((u16)(n * 512));

			bytes_add(&out, &sector, 4);
			bytes_add(&out, &len, 2);
			bytes_add(&out, img + s * 512, n * 512);
			s += n;
		}
	}
	write_seed("image", name, &mode, 1, out.p, out.len);
	free(out.p);
}

/* btree_node seeds: every node of the image, re-magicked for fuzz_uuid. */
static void node_seeds(const char *name, const u8 *img, size_t size, const struct tfs_sb *sb)
{
	u32 node_size = tfs_fs_node_size(sb);
	u64 magic = tfs_btree_node_magic(sb->uuid);
	unsigned nr = 0;

	for (size_t off = 0; off + node_size <= size; off += node_size) {
		struct tfs_btree_node *n = (void *)(img + off);
		struct printbuf nm = PRINTBUF;
		/* FUZZ_FIX, the pointer check, the node's own range; 16 KiB << s. */
		u8 hdr[2] = { FUZZ_FIX | 2 | 4, 0 };

		if (le64_to_cpu(n->magic) != magic || !n->nr_keys)
			continue;
		while (((u32)TFS_BTREE_NODE_SIZE_MIN << (hdr[0] >> 3 & 3)) < node_size)
			hdr[0] += 8;
		struct tfs_btree_node *c = fuzz_dup(n, node_size);

		c->magic = cpu_to_le64(tfs_btree_node_magic(fuzz_uuid));
		c->csum = cpu_to_le64(tfs_btree_node_csum(c));
		if (nr % 2)
			hdr[0] &= ~FUZZ_FIX;
		prt_printf(&nm, "%s-%s-l%u-%llx", name, tfs_btree_id_str(n->btree_id) ?: "?",
			   n->level, (unsigned long long)off);
		write_seed("btree_node", printbuf_str(&nm), hdr, 2, c,
			   sizeof(*c) + (size_t)le32_to_cpu(c->u64s) * 8);
		free(c);
		printbuf_exit(&nm);
		nr++;
	}
}

static void fs_open_or_die(const char *path, bool read_only, struct tfs_fs **fs)
{
	struct tfs_fs_opts opts;
	const char *devs[] = { path };
	int ret;

	tfs_fs_opts_default(&opts);
	opts.read_only = read_only;
	ret = tfs_fs_open(devs, 1, &opts, fs);
	if (ret)
		die(path, ret, NULL);
}

/* Commits nr keys into btree id from key first on, value val_bytes long. */
static u64 fs_add_keys(struct tfs_fs *fs, enum tfs_btree_id id, enum tfs_bkey_type type,
		       unsigned first, unsigned nr, size_t val_bytes)
{
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	u64 seq = 0;
	int ret = 0;

	tfs_trans_init(&trans, fs);
	for (unsigned i = first; i < first + nr && !ret; i++) {
		u8 *v = tfs_bkey_init(&buf, type, TFS_POS(4096 + i / 4, i % 4 * 512), val_bytes);

		for (size_t b = 0; b < val_bytes; b++)
			v[b] = (u8)(i * 31 + b);
		ret = tfs_trans_update(&trans, id, &buf.k);
		if (!ret && (i % 16 == 15 || i == first + nr - 1))
			ret = tfs_trans_commit(&trans, 0, &seq);
	}
	tfs_trans_exit(&trans);
	if (ret)
		die("commit", ret, NULL);
	return seq;
}

/* Writes the image seed of path, and its nodes' seeds. */
static void fs_seeds(const char *name, const char *path, bool nodes)
{
	size_t size;
	u8 *img = read_file(path, &size);
	struct tfs_sb_handle h;
	struct printbuf err = PRINTBUF;

	image_seed(name, img, size);
	if (nodes) {
		if (tfs_sb_open(path, TFS_BDEV_RDONLY | TFS_BDEV_BUFFERED, &h, &err))
			die(path, -EINVAL, &err);
		node_seeds(name, img, size, h.sb);
		tfs_sb_exit(&h);
	}
	printbuf_exit(&err);
	free(img);
}

static void copy_file(const char *from, const char *to)
{
	size_t size;
	u8 *b = read_file(from, &size);
	FILE *f = fopen(to, "wb");

	if (!f || fwrite(b, 1, size, f) != size || fclose(f))
		die(to, -EIO, NULL);
	free(b);
}

static void fs_image_seeds(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct printbuf name = PRINTBUF, work = PRINTBUF;
	struct tfs_fs *fs;
	int status;
	pid_t pid;

	prt_printf(&name, "%.*s", (int)strcspn(base, "."), base);
	prt_printf(&work, "%s.work", path);
	const char *w = printbuf_str(&work);

	/* As mkfs made it. */
	printbuf_reset(&name);
	prt_printf(&name, "%.*s-mkfs", (int)strcspn(base, "."), base);
	fs_seeds(printbuf_str(&name), path, false);

	/* Keys in three btrees, a clean stop. */
	copy_file(path, w);
	fs_open_or_die(w, false, &fs);
	fs_add_keys(fs, TFS_BTREE_inodes, TFS_BKEY_inode, 0, 20, 40);
	fs_add_keys(fs, TFS_BTREE_dirents, TFS_BKEY_dirent, 0, 12, 24);
	fs_add_keys(fs, TFS_BTREE_xattrs, TFS_BKEY_xattr, 0, 5, 64);
	if (tfs_fs_stop(fs))
		die("stop", -EIO, NULL);
	printbuf_reset(&name);
	prt_printf(&name, "%.*s-keys", (int)strcspn(base, "."), base);
	fs_seeds(printbuf_str(&name), w, true);

	/* Keys committed and flushed, then the process exits without a stop. */
	pid = fork();
	if (pid < 0)
		die("fork", -errno, NULL);
	if (!pid) {
		fs_open_or_die(w, false, &fs);
		u64 seq = fs_add_keys(fs, TFS_BTREE_extents, TFS_BKEY_extent, 0, 6, 32);

		fs_add_keys(fs, TFS_BTREE_inodes, TFS_BKEY_inode, 100, 3, 40);
		seq = fs_add_keys(fs, TFS_BTREE_dirents, TFS_BKEY_dirent, 100, 2, 24);
		_exit(tfs_fs_flush_seq(fs, seq) ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		die("the process that crashes", -EIO, NULL);
	printbuf_reset(&name);
	prt_printf(&name, "%.*s-journal", (int)strcspn(base, "."), base);
	fs_seeds(printbuf_str(&name), w, false);

	/* A two-level tree. */
	copy_file(path, w);
	fs_open_or_die(w, false, &fs);
	fs_add_keys(fs, TFS_BTREE_inodes, TFS_BKEY_inode, 0, 250, 48);
	if (tfs_fs_stop(fs))
		die("stop", -EIO, NULL);
	printbuf_reset(&name);
	prt_printf(&name, "%.*s-deep", (int)strcspn(base, "."), base);
	fs_seeds(printbuf_str(&name), w, true);

	unlink(w);
	printbuf_exit(&name);
	printbuf_exit(&work);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fuzz_gen_seeds OUTDIR [IMG...] [--fs FSIMG...]\n");
		return 2;
	}
	outdir = argv[1];
	int i = 2;

	for (; i < argc && strcmp(argv[i], "--fs"); i++)
		if (image_seeds(argv[i], i - 2))
			return 1;
	journal_seeds();
	for (i++; i < argc; i++)
		fs_image_seeds(argv[i]);
	printf("%u seeds written to %s\n", nr_written, outdir);
	return 0;
}
