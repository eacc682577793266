// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz target "image": a whole one-member filesystem image opened
 * read-only (tfs_fs_open(): superblock, journal read, roots from the
 * journal or the clean section, root nodes, replay into the btrees,
 * allocator rebuild), every btree walked with an iterator and verified
 * (tfs_btree_verify(): every node read, checked against its parent), then
 * stopped.  Read-only: nothing is written.
 *
 * Input: a mode byte, then records, each a __le32 sector (512 bytes), a
 * __le16 length and that many bytes placed at the sector; the rest of the
 * image is zero (a cut last record places what there is).  The image is a
 * memfd opened through /proc/self/fd: the real device path (io_uring,
 * buffered, as a file that refuses O_DIRECT).
 *	bit 0		FUZZ_FIX: the superblock copies, the journal entries and
 *			the btree nodes repaired: magics, sizes, checksums,
 *			and every pointer to a node (in interior nodes, in the
 *			journal's btree_root entries, in the clean section)
 *			given that node's seq and checksum, bottom up
 *	bits 1-2	image size: 1 MiB << s
 *
 * What must hold: open fails or succeeds (never crashes); on an open
 * filesystem every iterator returns keys in strictly increasing order, each
 * valid for its btree, and stop succeeds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fs/btree.h"
#include "fs/btree_format.h"
#include "fs/fs.h"
#include "fs/fs_types.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/printbuf.h"
#include "super/super.h"
#include "tests/fuzz/fuzz.h"

#define MAX_NODES 512

/* --- FUZZ_FIX over a whole image --- */

struct node_ref {
	u64 off;
	struct tfs_btree_node *n;
};

struct fixer {
	u8 *img;
	size_t size;
	u32 node_size, bucket_size;
	u64 node_magic, jset_magic;
	struct node_ref nodes[MAX_NODES];
	unsigned nr_nodes;
};

static const struct node_ref *fix_node_at(const struct fixer *f, u64 off)
{
	for (unsigned i = 0; i < f->nr_nodes; i++)
		if (f->nodes[i].off == off)
			return &f->nodes[i];
	return NULL;
}

/*
 * Points the btree_ptr key k (at most bytes long) at what is now at its
 * locations: the first location holding a node gives seq and checksum.
 * True when something changed.
 */
static bool fix_ptr(const struct fixer *f, struct tfs_bkey *k, size_t bytes)
{
	struct tfs_btree_ptr *p = tfs_bkey_val(k);

	if (bytes < sizeof(*k) + sizeof(*p) || tfs_bkey_bytes(k) > bytes ||
	    tfs_bkey_val_bytes(k) < sizeof(*p) || k->type != TFS_BKEY_btree_ptr)
		return false;
	for (unsigned i = 0; i < p->nr_ptrs && i < TFS_BTREE_PTR_MAX_REPLICAS &&
			     sizeof(*p) + (i + 1) * sizeof(p->ptrs[0]) <= tfs_bkey_val_bytes(k);
	     i++) {
		const struct node_ref *c = fix_node_at(f, le64_to_cpu(p->ptrs[i].offset));

		if (!c || p->ptrs[i].dev)
			continue;
		if (p->seq == c->n->seq && le32_to_cpu(p->csum) == (u32)le64_to_cpu(c->n->csum))
			return false;
		p->seq = c->n->seq;
		p->csum = cpu_to_le32((u32)le64_to_cpu(c->n->csum));
		return true;
	}
	return false;
}

/* Every pointer of interior nodes to the nodes found, bottom up: a fixpoint. */
static void fix_nodes(struct fixer *f)
{
	for (u64 off = 0; off + f->node_size <= f->size && f->nr_nodes < MAX_NODES;
	     off += f->node_size) {
		struct tfs_btree_node *n = (void *)(f->img + off);

		if (__builtin_popcountll(le64_to_cpu(n->magic) ^ f->node_magic) > 8)
			continue;
		fuzz_fix_btree_node(n, f->node_size, f->node_size, f->node_magic);
		f->nodes[f->nr_nodes++] = (struct node_ref){ .off = off, .n = n };
	}
	for (unsigned round = 0; round <= TFS_BTREE_MAX_DEPTH; round++) {
		bool changed = false;

		for (unsigned i = 0; i < f->nr_nodes; i++) {
			struct tfs_btree_node *n = f->nodes[i].n;
			__le64 *p = n->_data, *end = n->_data + le32_to_cpu(n->u64s);
			bool mine = false;

			if (!n->level)
				continue;
			for (u32 k = 0; k < le32_to_cpu(n->nr_keys) && p < end; k++) {
				struct tfs_bkey *key = (void *)p;

				if (tfs_bkey_u64s(key) < TFS_BKEY_U64s)
					break;
				mine |= fix_ptr(f, key, (size_t)(end - p) * 8);
				p += tfs_bkey_u64s(key);
			}
			if (mine)
				n->csum = cpu_to_le64(tfs_btree_node_csum(n));
			changed |= mine;
		}
		if (!changed)
			break;
	}
}

/* The journal: magics, btree_root pointers, checksums. */
static void fix_journal(struct fixer *f, const struct tfs_sb *sb, u32 block_size)
{
	unsigned nr = 0;
	u64 *jb = NULL;

	if (tfs_sb_journal_buckets(sb, &jb, &nr))
		abort(); /* only -ENOMEM */
	for (unsigned b = 0; jb && b < nr; b++) {
		u64 base = jb[b] * f->bucket_size;

		if (base >= f->size || f->size - base < f->bucket_size)
			continue;
		for (u32 off = 0; off + sizeof(struct jset) <= f->bucket_size;) {
			struct jset *js = (void *)(f->img + base + off);
			size_t room = f->bucket_size - off;

			if (__builtin_popcountll(le64_to_cpu(js->magic) ^ f->jset_magic) > 8) {
				off += block_size;
				continue;
			}
			fuzz_fix_jset(js, room, f->jset_magic);

			__le64 *end = js->_data + le32_to_cpu(js->u64s);

			for (struct jset_entry *e = (void *)js->_data; (__le64 *)e < end;
			     e = tfs_jset_entry_next(e)) {
				__le64 *e_end = e->_data + le16_to_cpu(e->u64s);

				if (e_end > end)
					break;
				if (e->type == TFS_JSET_ENTRY_btree_root)
					fix_ptr(f, (void *)e->_data,
						(size_t)(e_end - e->_data) * 8);
			}
			fuzz_fix_jset(js, room, f->jset_magic);
			off += round_up(tfs_jset_bytes(le32_to_cpu(js->u64s)), block_size);
		}
	}
	free(jb);
}

/* A superblock copy's clean section roots, then its checksums. */
static void fix_sb_copy(struct fixer *f, struct tfs_sb *sb, size_t bytes)
{
	fuzz_fix_sb(sb, bytes);
	if (f->nr_nodes && bytes >= sizeof(*sb)) {
		struct printbuf err = PRINTBUF;

		if (!tfs_sb_validate(sb, bytes, 0, &err)) {
			struct tfs_sb_field_clean *clean = tfs_sb_clean(sb);
			struct tfs_clean_entry *e;

			if (clean)
				for_each_clean_entry(clean, e) if (e->type == TFS_CLEAN_btree_root)
					fix_ptr(f, (void *)e->_data,
						((size_t)le16_to_cpu(e->u64s) - 1) * 8);
		}
		printbuf_exit(&err);
		fuzz_fix_sb(sb, bytes);
	}
}

static void fix_image(u8 *img, size_t size)
{
	struct fixer *f = calloc(1, sizeof(*f));
	struct tfs_sb_layout *l = (void *)(img + TFS_SB_LAYOUT_OFFSET);
	struct printbuf err = PRINTBUF;
	struct tfs_sb *sb;

	if (!f)
		abort();
	f->img = img;
	f->size = size;
	l->magic = cpu_to_le64(TFS_SB_LAYOUT_MAGIC);
	l->csum = cpu_to_le32(tfs_sb_layout_csum(l));
	if (tfs_sb_layout_validate(l, &err))
		tfs_sb_layout_init_default(l);

	u32 max = le32_to_cpu(l->sb_max_size);

	/* The primary tells where the rest is, if it is valid once repaired. */
	sb = (void *)(img + TFS_SB_OFFSET);
	if (TFS_SB_OFFSET + (u64)max <= size) {
		fuzz_fix_sb(sb, max);
		printbuf_reset(&err);
		if (!tfs_sb_validate(sb, max, size, &err)) {
			f->bucket_size = tfs_sb_bucket_size(sb);
			f->node_size = tfs_fs_node_size(sb);
			f->node_magic = tfs_btree_node_magic(sb->uuid);
			f->jset_magic = tfs_jset_magic(sb->uuid);
			fix_nodes(f);
			fix_journal(f, sb, le32_to_cpu(sb->block_size));
		}
	}
	for (unsigned i = 0; i < l->nr_superblocks; i++) {
		u64 off = le64_to_cpu(l->sb_offset[i]);

		if (off < size && size - off >= max)
			fix_sb_copy(f, (void *)(img + off), max);
	}
	printbuf_exit(&err);
	free(f);
}

/* --- the walk --- */

static void walk(struct tfs_fs *fs)
{
	for (unsigned id = 0; id < TFS_BTREE_NR; id++) {
		struct tfs_btree_iter iter;
		const struct tfs_bkey *k;
		struct tfs_bpos prev = TFS_POS_MIN;
		struct printbuf err = PRINTBUF;
		unsigned nr = 0;
		int ret;

		tfs_btree_iter_init(&iter, fs, id, TFS_POS_MIN, TFS_POS_MAX);
		for (ret = tfs_btree_iter_peek(&iter, &k); !ret && k;
		     ret = tfs_btree_iter_next(&iter, &k)) {
			fuzz_check(!nr || tfs_bpos_cmp(prev, tfs_bkey_pos(k)) < 0,
				   "an iterator went backwards or repeated a key");
			printbuf_reset(&err);
			if (tfs_bkey_validate(k, tfs_bkey_bytes(k), id, false, &err))
				fuzz_fail(__FILE__, __LINE__, printbuf_str(&err),
					  "an iterator returned an invalid key");
			prev = tfs_bkey_pos(k);
			/* The largest position ends the walk (next() would stay there). */
			if (tfs_bpos_eq(prev, TFS_POS_MAX))
				break;
			nr++;
		}
		tfs_btree_iter_exit(&iter);
		printbuf_exit(&err);
		/* A node that does not read is a reason, not a crash: verify says which. */
		tfs_btree_verify(fs, id);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;

	unsigned mode = data[0];
	size_t img_size = (size_t)1 << (20 + ((mode >> 1) & 3));
	u8 *img = calloc(1, img_size);
	struct tfs_fs_opts opts;
	struct tfs_fs *fs = NULL;
	char path[64];
	int fd, ret;

	if (!img)
		abort();
	for (size_t pos = 1; pos + 6 <= size;) {
		u32 sector;
		u16 len;

		memcpy(&sector, data + pos, 4);
		memcpy(&len, data + pos + 4, 2);
		pos += 6;
		u64 off = (u64)le32_to_cpu(sector) * 512;
		size_t n = min_t(size_t, le16_to_cpu(len), size - pos);

		if (off < img_size)
			memcpy(img + off, data + pos, min_t(u64, n, img_size - off));
		pos += n;
	}
	if (mode & FUZZ_FIX)
		fix_image(img, img_size);

	fd = memfd_create("fuzz-image", MFD_CLOEXEC);
	if (fd < 0 || pwrite(fd, img, img_size, 0) != (ssize_t)img_size)
		abort();
	free(img);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	const char *devs[] = { path };

	tfs_fs_opts_default(&opts);
	opts.read_only = true;
	ret = tfs_fs_open(devs, 1, &opts, &fs);
	if (getenv("TFS_FUZZ_VERBOSE"))
		fprintf(stderr, "  -> open: %s\n", ret ? tfs_err_str(ret) : "ok");
	fuzz_check(ret <= 0 && !ret == !!fs, "open returned a filesystem and an error, or neither");
	if (!ret) {
		walk(fs);
		ret = tfs_fs_stop(fs);
		fuzz_check(!ret, "a read-only stop failed");
	}
	close(fd);
	return 0;
}
