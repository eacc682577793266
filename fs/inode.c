// SPDX-License-Identifier: GPL-2.0
/*
 * Inodes: the inode and orphan key types, the in-memory inode table
 * (locks, cached attributes, last change seqs, error sequences), inode
 * numbers, and removing an inode with everything it owns.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs/extents.h"
#include "fs/posix.h"
#include "lib/bdev.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"

/* --- the inode key --- */

static bool mode_type_valid(u32 mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	}
	return false;
}

static int inode_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_inode *v = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k);
	u32 mode, nlink;

	if (bytes != sizeof(*v)) {
		prt_printf(err, "value of %zu bytes (%zu expected)", bytes, sizeof(*v));
		return -TFS_ERR_bkey_invalid;
	}
	if (!le64_to_cpu(k->inode) || le64_to_cpu(k->offset)) {
		prt_str(err, "position not {ino > 0, 0}");
		return -TFS_ERR_bkey_invalid;
	}
	mode = le32_to_cpu(v->mode);
	nlink = le32_to_cpu(v->nlink);
	if (!mode_type_valid(mode) || (mode & ~(u32)(S_IFMT | 07777))) {
		prt_printf(err, "bad mode 0%o", mode);
		return -TFS_ERR_bkey_invalid;
	}
	if (v->flags || v->pad) {
		prt_printf(err, "unknown flags 0x%x or pad not zero", le32_to_cpu(v->flags));
		return -TFS_ERR_bkey_invalid;
	}
	if (le64_to_cpu(v->size) > TFS_MAX_FILE_SIZE) {
		prt_printf(err, "size %llu > %llu", (unsigned long long)le64_to_cpu(v->size),
			   (unsigned long long)TFS_MAX_FILE_SIZE);
		return -TFS_ERR_bkey_invalid;
	}
	if (nlink > TFS_LINK_MAX) {
		prt_printf(err, "nlink %u > %u", nlink, TFS_LINK_MAX);
		return -TFS_ERR_bkey_invalid;
	}
	if (S_ISDIR(mode)) {
		if (!le64_to_cpu(v->parent)) {
			prt_str(err, "directory without a parent");
			return -TFS_ERR_bkey_invalid;
		}
		if (nlink == 1) {
			prt_str(err, "directory with nlink 1");
			return -TFS_ERR_bkey_invalid;
		}
	} else if (v->parent) {
		prt_str(err, "parent set on a non-directory");
		return -TFS_ERR_bkey_invalid;
	}
	if (v->rdev && !S_ISCHR(mode) && !S_ISBLK(mode)) {
		prt_str(err, "rdev set on a non-device");
		return -TFS_ERR_bkey_invalid;
	}
	if (S_ISLNK(mode) && (!v->size || le64_to_cpu(v->size) > TFS_SYMLINK_MAX)) {
		prt_printf(err, "symlink of size %llu", (unsigned long long)le64_to_cpu(v->size));
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static void inode_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_inode *v = tfs_bkey_val(k);

	if (tfs_bkey_val_bytes(k) < sizeof(*v)) {
		prt_str(out, "(short)");
		return;
	}
	prt_printf(out, "mode 0%o nlink %u uid %u gid %u size %llu blocks %llu gen %llu",
		   le32_to_cpu(v->mode), le32_to_cpu(v->nlink), le32_to_cpu(v->uid),
		   le32_to_cpu(v->gid), (unsigned long long)le64_to_cpu(v->size),
		   (unsigned long long)le64_to_cpu(v->blocks),
		   (unsigned long long)le64_to_cpu(v->generation));
	if (v->parent)
		prt_printf(out, " parent %llu", (unsigned long long)le64_to_cpu(v->parent));
	if (v->rdev)
		prt_printf(out, " rdev 0x%llx", (unsigned long long)le64_to_cpu(v->rdev));
	prt_printf(out, " mtime %lld ctime %lld", (long long)le64_to_cpu(v->mtime),
		   (long long)le64_to_cpu(v->ctime));
}

const struct tfs_bkey_ops tfs_bkey_ops_inode = {
	.validate = inode_validate,
	.val_to_text = inode_val_to_text,
};

void tfs_inode_pack(struct tfs_bkey_buf *buf, tfs_ino_t ino, const struct tfs_inode_unpacked *ui)
{
	struct tfs_inode *v = tfs_bkey_init(buf, TFS_BKEY_inode, TFS_POS(ino, 0), sizeof(*v));

	v->mode = cpu_to_le32(ui->mode);
	v->nlink = cpu_to_le32(ui->nlink);
	v->uid = cpu_to_le32(ui->uid);
	v->gid = cpu_to_le32(ui->gid);
	v->size = cpu_to_le64(ui->size);
	v->blocks = cpu_to_le64(ui->blocks);
	v->rdev = cpu_to_le64(ui->rdev);
	v->generation = cpu_to_le64(ui->generation);
	v->atime = cpu_to_le64((u64)ui->atime);
	v->mtime = cpu_to_le64((u64)ui->mtime);
	v->ctime = cpu_to_le64((u64)ui->ctime);
	v->btime = cpu_to_le64((u64)ui->btime);
	v->hash_seed = cpu_to_le64(ui->hash_seed);
	v->parent = cpu_to_le64(ui->parent);
	v->flags = cpu_to_le32(ui->flags);
}

int tfs_inode_unpack(struct tfs_fs *fs, const struct tfs_bkey *k, struct tfs_inode_unpacked *ui)
{
	struct printbuf err = PRINTBUF;
	const struct tfs_inode *v = tfs_bkey_val(k);
	int ret = 0;

	if (k->type != TFS_BKEY_inode) {
		prt_printf(&err, "key of type %u where an inode belongs", k->type);
		ret = -TFS_ERR_inode_invalid;
	} else if (inode_validate(k, &err)) {
		ret = -TFS_ERR_inode_invalid;
	}
	if (ret) {
		struct printbuf msg = PRINTBUF;

		prt_str(&msg, "inode ");
		tfs_bpos_to_text(&msg, tfs_bkey_pos(k));
		prt_str(&msg, ": ");
		prt_str(&msg, printbuf_str(&err));
		tfs_posix_inconsistent(fs, printbuf_str(&msg));
		printbuf_exit(&msg);
		printbuf_exit(&err);
		return ret;
	}
	printbuf_exit(&err);

	ui->mode = le32_to_cpu(v->mode);
	ui->nlink = le32_to_cpu(v->nlink);
	ui->uid = le32_to_cpu(v->uid);
	ui->gid = le32_to_cpu(v->gid);
	ui->size = le64_to_cpu(v->size);
	ui->blocks = le64_to_cpu(v->blocks);
	ui->rdev = le64_to_cpu(v->rdev);
	ui->generation = le64_to_cpu(v->generation);
	ui->atime = (s64)le64_to_cpu(v->atime);
	ui->mtime = (s64)le64_to_cpu(v->mtime);
	ui->ctime = (s64)le64_to_cpu(v->ctime);
	ui->btime = (s64)le64_to_cpu(v->btime);
	ui->hash_seed = le64_to_cpu(v->hash_seed);
	ui->parent = le64_to_cpu(v->parent);
	ui->flags = le32_to_cpu(v->flags);
	return 0;
}

static struct timespec ns_to_ts(s64 ns)
{
	struct timespec ts;

	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (ts.tv_nsec < 0) {
		ts.tv_nsec += 1000000000;
		ts.tv_sec--;
	}
	return ts;
}

void tfs_inode_to_stat(struct tfs_fs *fs, tfs_ino_t ino, const struct tfs_inode_unpacked *ui,
		       struct tfs_stat *st)
{
	struct tfs_posix *p = tfs_posix(fs);

	memset(st, 0, sizeof(*st));
	st->ino = ino;
	st->generation = ui->generation;
	st->mode = ui->mode;
	st->nlink = ui->nlink;
	st->uid = ui->uid;
	st->gid = ui->gid;
	st->rdev = ui->rdev;
	st->size = ui->size;
	st->blocks = ui->blocks << (p->block_bits - 9);
	st->blksize = p->block_size;
	/*
	 * A directory's names live in the dirents btree, so it has no size of
	 * its own: it reports the size of one block, as an empty ext4 directory
	 * (a size of 0 reads as broken or empty to some tools), but no blocks
	 * (it holds none: du agrees with statfs).
	 */
	if (S_ISDIR(ui->mode) && !ui->size)
		st->size = p->block_size;
	st->atime = ns_to_ts(ui->atime);
	st->mtime = ns_to_ts(ui->mtime);
	st->ctime = ns_to_ts(ui->ctime);
	st->btime = ns_to_ts(ui->btime);
}

s64 tfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (s64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

unsigned tfs_mode_to_dtype(u32 mode)
{
	return (mode & S_IFMT) >> 12; /* DT_x == S_IFx >> 12 on Linux */
}

/* --- a symlink's target (inline_data in the extents btree) --- */

static int inline_data_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const u8 *v = tfs_bkey_val(k);
	size_t bytes = tfs_bkey_val_bytes(k), len = strnlen((const char *)v, bytes);

	if (!len || bytes > round_up(TFS_SYMLINK_MAX, 8) || bytes != round_up(len, 8)) {
		prt_printf(err, "target of %zu bytes in a value of %zu", len, bytes);
		return -TFS_ERR_bkey_invalid;
	}
	if (le64_to_cpu(k->offset) || !le64_to_cpu(k->inode)) {
		prt_str(err, "position not {ino > 0, 0}");
		return -TFS_ERR_bkey_invalid;
	}
	for (size_t i = len; i < bytes; i++)
		if (v[i]) {
			prt_str(err, "NUL inside the target");
			return -TFS_ERR_bkey_invalid;
		}
	return 0;
}

static void inline_data_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const char *v = tfs_bkey_val(k);

	prt_strn(out, v, strnlen(v, tfs_bkey_val_bytes(k)));
}

const struct tfs_bkey_ops tfs_bkey_ops_inline_data = {
	.validate = inline_data_validate,
	.val_to_text = inline_data_val_to_text,
};

void tfs_symlink_pack(struct tfs_bkey_buf *buf, tfs_ino_t ino, const char *target, size_t len)
{
	char *v = tfs_bkey_init(buf, TFS_BKEY_inline_data, TFS_POS(ino, 0), len);

	memcpy(v, target, len);
}

/* --- the orphan key --- */

static int orphan_validate(const struct tfs_bkey *k, struct printbuf *err)
{
	const struct tfs_orphan *v = tfs_bkey_val(k);
	u64 known = 0;

#define x(n, b) known |= TFS_ORPHAN_##n;
	TFS_ORPHAN_FLAGS(x)
#undef x
	if (tfs_bkey_val_bytes(k) != sizeof(*v)) {
		prt_printf(err, "value of %zu bytes (%zu expected)", tfs_bkey_val_bytes(k),
			   sizeof(*v));
		return -TFS_ERR_bkey_invalid;
	}
	if (!le64_to_cpu(k->inode) || le64_to_cpu(k->offset)) {
		prt_str(err, "position not {ino > 0, 0}");
		return -TFS_ERR_bkey_invalid;
	}
	if (!v->flags || (le64_to_cpu(v->flags) & ~known)) {
		prt_printf(err, "flags 0x%llx", (unsigned long long)le64_to_cpu(v->flags));
		return -TFS_ERR_bkey_invalid;
	}
	return 0;
}

static void orphan_val_to_text(struct printbuf *out, const struct tfs_bkey *k)
{
	const struct tfs_orphan *v = tfs_bkey_val(k);
	u64 flags = le64_to_cpu(v->flags);
	bool first = true;

#define x(n, b)                                    \
	if (flags & TFS_ORPHAN_##n) {              \
		prt_str(out, first ? #n : "," #n); \
		first = false;                     \
	}
	TFS_ORPHAN_FLAGS(x)
#undef x
}

const struct tfs_bkey_ops tfs_bkey_ops_orphan = {
	.validate = orphan_validate,
	.val_to_text = orphan_val_to_text,
};

int tfs_orphan_add(struct tfs_btree_trans *trans, tfs_ino_t ino, u64 flags)
{
	struct tfs_bkey_buf buf;
	struct tfs_orphan *v = tfs_bkey_init(&buf, TFS_BKEY_orphan, TFS_POS(ino, 0), sizeof(*v));

	v->flags = cpu_to_le64(flags);
	return tfs_trans_update(trans, TFS_BTREE_orphans, &buf.k);
}

int tfs_orphan_del(struct tfs_btree_trans *trans, tfs_ino_t ino)
{
	return tfs_trans_delete(trans, TFS_BTREE_orphans, TFS_POS(ino, 0));
}

/* --- the inode table --- */

static size_t ino_hash(struct tfs_posix *p, tfs_ino_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 20) & (p->table_size - 1);
}

static void lru_del(struct tfs_posix *p, struct tfs_inode_mem *im)
{
	im->lru_prev->lru_next = im->lru_next;
	im->lru_next->lru_prev = im->lru_prev;
	im->lru_prev = im->lru_next = NULL;
	p->nr_lru--;
}

static void lru_add_tail(struct tfs_posix *p, struct tfs_inode_mem *im)
{
	im->lru_prev = p->lru.lru_prev;
	im->lru_next = &p->lru;
	p->lru.lru_prev->lru_next = im;
	p->lru.lru_prev = im;
	p->nr_lru++;
}

static void table_unhash(struct tfs_posix *p, struct tfs_inode_mem *im)
{
	struct tfs_inode_mem **pp = &p->table[ino_hash(p, im->ino)];

	while (*pp != im)
		pp = &(*pp)->hnext;
	*pp = im->hnext;
	p->nr_cached--;
}

static void inode_mem_free(struct tfs_inode_mem *im)
{
	pthread_rwlock_destroy(&im->lock);
	free(im->target);
	free(im);
}

static void table_grow(struct tfs_posix *p)
{
	size_t old_size = p->table_size, new_size = old_size * 2;
	struct tfs_inode_mem **old = p->table, **t = calloc(new_size, sizeof(*t));

	if (!t)
		return; /* longer chains, still correct */
	p->table = t;
	p->table_size = new_size;
	for (size_t i = 0; i < old_size; i++)
		for (struct tfs_inode_mem *im = old[i], *next; im; im = next) {
			size_t h = ino_hash(p, im->ino);

			next = im->hnext;
			im->hnext = t[h];
			t[h] = im;
		}
	free(old);
}

int tfs_iget(struct tfs_fs *fs, tfs_ino_t ino, struct tfs_inode_mem **ret)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *im, *new = NULL;

	pthread_mutex_lock(&p->table_lock);
	for (;;) {
		for (im = p->table[ino_hash(p, ino)]; im; im = im->hnext)
			if (im->ino == ino)
				break;
		if (im) {
			if (!im->ref && im->lru_next)
				lru_del(p, im);
			im->ref++;
			pthread_mutex_unlock(&p->table_lock);
			if (new)
				inode_mem_free(new);
			*ret = im;
			return 0;
		}
		if (new)
			break;
		/* Allocate without the lock, then look again. */
		pthread_mutex_unlock(&p->table_lock);
		if (tfs_fault("alloc:inode"))
			return -TFS_ERR_ENOMEM_fault_injected;
		new = calloc(1, sizeof(*new));
		if (!new)
			return -ENOMEM;
		new->ino = ino;
		pthread_rwlock_init(&new->lock, NULL);
		pthread_mutex_lock(&p->table_lock);
	}
	/*
	 * Changes of an inode evicted earlier are at or below evicted_seq: an
	 * fsync of the reloaded inode flushes that far, never less.
	 */
	new->last_seq = new->last_data_seq = p->evicted_seq;
	new->ref = 1;
	new->hnext = p->table[ino_hash(p, ino)];
	p->table[ino_hash(p, ino)] = new;
	if (++p->nr_cached > p->table_size * 2)
		table_grow(p);
	pthread_mutex_unlock(&p->table_lock);
	*ret = new;
	return 0;
}

void tfs_iput(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	struct tfs_posix *p = tfs_posix(fs);
	struct tfs_inode_mem *victim = NULL;

	pthread_mutex_lock(&p->table_lock);
	if (--im->ref || im->open_count) {
		pthread_mutex_unlock(&p->table_lock);
		return;
	}
	if (im->deleted || !im->loaded) {
		table_unhash(p, im);
		victim = im;
	} else {
		lru_add_tail(p, im);
		/* Evict the oldest, keeping those with an error someone may not have seen. */
		for (unsigned tries = 0; p->nr_lru > p->lru_max && tries < 8; tries++) {
			struct tfs_inode_mem *old = p->lru.lru_next;

			lru_del(p, old);
			if (__atomic_load_n(&old->wb_err, __ATOMIC_ACQUIRE)) {
				lru_add_tail(p, old);
				continue;
			}
			table_unhash(p, old);
			if (old->last_seq > p->evicted_seq)
				p->evicted_seq = old->last_seq;
			__atomic_fetch_add(&p->c.inodes_evicted, 1, __ATOMIC_RELAXED);
			/* Freed below; only one per put keeps the lock short. */
			victim = old;
			break;
		}
	}
	pthread_mutex_unlock(&p->table_lock);
	if (victim)
		inode_mem_free(victim);
}

static int inode_load(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	struct tfs_bkey_buf buf;
	int ret;

	ret = tfs_btree_lookup(fs, TFS_BTREE_inodes, TFS_POS(im->ino, 0), &buf);
	if (ret == -ENOENT) {
		im->deleted = true;
		return -ENOENT;
	}
	if (ret)
		return ret;
	ret = tfs_inode_unpack(fs, &buf.k, &im->ui);
	if (ret)
		return ret;
	free(im->target);
	im->target = NULL;
	if (S_ISLNK(im->ui.mode)) {
		struct printbuf err = PRINTBUF;

		ret = tfs_btree_lookup(fs, TFS_BTREE_extents, TFS_POS(im->ino, 0), &buf);
		if (ret == -ENOENT ||
		    (!ret &&
		     (buf.k.type != TFS_BKEY_inline_data || inline_data_validate(&buf.k, &err) ||
		      strnlen(tfs_bkey_val(&buf.k), tfs_bkey_val_bytes(&buf.k)) != im->ui.size))) {
			struct printbuf msg = PRINTBUF;

			prt_printf(&msg, "symlink %llu: target missing or bad %s",
				   (unsigned long long)im->ino, printbuf_str(&err));
			tfs_posix_inconsistent(fs, printbuf_str(&msg));
			printbuf_exit(&msg);
			ret = -TFS_ERR_inode_invalid;
		}
		printbuf_exit(&err);
		if (ret)
			return ret;
		im->target = malloc(im->ui.size + 1);
		if (!im->target)
			return -ENOMEM;
		memcpy(im->target, tfs_bkey_val(&buf.k), im->ui.size);
		im->target[im->ui.size] = 0;
	}
	im->loaded = true;
	/* Whatever was known before (a reload after an error): looked at again. */
	__atomic_store_n(&im->xattrs, TFS_INODE_XATTRS_unknown, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tfs_posix(fs)->c.inodes_loaded, 1, __ATOMIC_RELAXED);
	return 0;
}

int tfs_ilock(struct tfs_fs *fs, struct tfs_inode_mem *im, bool excl)
{
	int ret;

	for (;;) {
		if (excl) {
			pthread_rwlock_wrlock(&im->lock);
		} else if (pthread_rwlock_tryrdlock(&im->lock)) {
			/* A writer holds it, maybe while it waits for the device. */
			tfs_bdev_will_wait();
			pthread_rwlock_rdlock(&im->lock);
		}
		if (im->deleted) {
			pthread_rwlock_unlock(&im->lock);
			return -ENOENT;
		}
		if (im->loaded)
			return 0;
		if (excl) {
			ret = inode_load(fs, im);
			if (ret)
				pthread_rwlock_unlock(&im->lock);
			return ret;
		}
		/* Loading changes the entry: do it exclusively, then retry shared. */
		pthread_rwlock_unlock(&im->lock);
		pthread_rwlock_wrlock(&im->lock);
		ret = im->loaded || im->deleted ? 0 : inode_load(fs, im);
		pthread_rwlock_unlock(&im->lock);
		if (ret)
			return ret;
	}
}

void tfs_iunlock(struct tfs_inode_mem *im)
{
	pthread_rwlock_unlock(&im->lock);
}

int tfs_iget_locked(struct tfs_fs *fs, tfs_ino_t ino, bool excl, struct tfs_inode_mem **ret)
{
	struct tfs_inode_mem *im;
	int err = tfs_iget(fs, ino, &im);

	if (err)
		return err;
	err = tfs_ilock(fs, im, excl);
	if (err) {
		tfs_iput(fs, im);
		return err;
	}
	*ret = im;
	return 0;
}

void tfs_iput_unlock(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	tfs_iunlock(im);
	tfs_iput(fs, im);
}

int tfs_inew(struct tfs_fs *fs, tfs_ino_t ino, const struct tfs_inode_unpacked *ui,
	     const char *target, struct tfs_inode_mem **ret)
{
	struct tfs_inode_mem *im;
	char *t = NULL;
	int err;

	if (target) {
		t = malloc(ui->size + 1);
		if (!t)
			return -ENOMEM;
		memcpy(t, target, ui->size);
		t[ui->size] = 0;
	}
	err = tfs_iget(fs, ino, &im);
	if (err) {
		free(t);
		return err;
	}
	pthread_rwlock_wrlock(&im->lock);
	/* A lookup of this number before it existed left a negative entry: revive it. */
	im->deleted = false;
	im->links_dropped = false;
	im->loaded = true;
	im->ui = *ui;
	/* A new number: no key of a former inode can be left under it (inodes_scan()). */
	__atomic_store_n(&im->xattrs, TFS_INODE_XATTRS_none, __ATOMIC_RELAXED);
	free(im->target);
	im->target = t;
	*ret = im;
	return 0;
}

tfs_ino_t tfs_ino_alloc(struct tfs_fs *fs)
{
	return __atomic_fetch_add(&tfs_posix(fs)->next_ino, 1, __ATOMIC_RELAXED);
}

void tfs_ino_alloc_past(struct tfs_fs *fs, tfs_ino_t ino)
{
	u64 *next = &tfs_posix(fs)->next_ino, cur = __atomic_load_n(next, __ATOMIC_RELAXED);

	while (cur <= ino && !__atomic_compare_exchange_n(next, &cur, ino + 1, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

int tfs_inode_update(struct tfs_btree_trans *trans, struct tfs_inode_mem *im,
		     const struct tfs_inode_unpacked *ui)
{
	struct tfs_bkey_buf buf;

	tfs_inode_pack(&buf, im->ino, ui);
	return tfs_trans_update(trans, TFS_BTREE_inodes, &buf.k);
}

static void atomic_max(u64 *v, u64 new)
{
	u64 old = __atomic_load_n(v, __ATOMIC_RELAXED);

	while (old < new && !__atomic_compare_exchange_n(v, &old, new, false, __ATOMIC_RELEASE,
							 __ATOMIC_RELAXED))
		;
}

/* tfs_inode_changes(): one counter for the process, so tfs_inode_mem needs no fs pointer. */
static u64 inode_changes;

u64 tfs_inode_changes(void)
{
	return __atomic_load_n(&inode_changes, __ATOMIC_ACQUIRE);
}

void tfs_inode_committed(struct tfs_inode_mem *im, const struct tfs_inode_unpacked *ui, u64 seq,
			 bool times_only)
{
	if (ui && ui->blocks != im->ui.blocks)
		__atomic_fetch_add(&im->blocks_changes, 1, __ATOMIC_RELEASE);
	if (ui)
		im->ui = *ui;
	/* After the new attributes, under the inode's lock: see tfs_inode_changes(). */
	__atomic_fetch_add(&inode_changes, 1, __ATOMIC_RELEASE);
	atomic_max(&im->last_seq, seq);
	if (!times_only)
		atomic_max(&im->last_data_seq, seq);
}

static int cmp_im(const void *a, const void *b)
{
	const struct tfs_inode_mem *x = *(struct tfs_inode_mem *const *)a;
	const struct tfs_inode_mem *y = *(struct tfs_inode_mem *const *)b;

	if (!x || !y)
		return !x - !y;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

int tfs_ilock_many(struct tfs_fs *fs, struct tfs_inode_mem **ims, unsigned nr)
{
	struct tfs_inode_mem *sorted[8];
	unsigned n = 0;
	int ret = 0;

	for (unsigned i = 0; i < nr; i++) {
		bool dup = false;

		if (!ims[i])
			continue;
		for (unsigned j = 0; j < n; j++)
			dup |= sorted[j] == ims[i];
		if (!dup)
			sorted[n++] = ims[i];
	}
	qsort(sorted, n, sizeof(sorted[0]), cmp_im);
	for (unsigned i = 0; i < n; i++) {
		ret = tfs_ilock(fs, sorted[i], true);
		if (ret) {
			while (i--)
				tfs_iunlock(sorted[i]);
			return ret;
		}
	}
	return 0;
}

void tfs_iunlock_many(struct tfs_inode_mem **ims, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++) {
		bool dup = false;

		if (!ims[i])
			continue;
		for (unsigned j = 0; j < i; j++)
			dup |= ims[j] == ims[i];
		if (!dup)
			tfs_iunlock(ims[i]);
	}
}

/* --- removing an inode --- */

int tfs_inode_remove(struct tfs_fs *fs, struct tfs_inode_mem *im)
{
	struct tfs_btree_trans trans;
	u64 seq;
	int ret = 0;

	/*
	 * The orphan key is in place (the commit that dropped nlink to 0 put
	 * it there): a crash anywhere below finishes the removal at open.
	 * The data and xattrs go first, the inode and its orphan key last.
	 */
	if (S_ISREG(im->ui.mode)) {
		struct tfs_bkey_buf kb;
		struct tfs_ext e;

		/* No extent at all (an empty file): no transaction for its data. */
		ret = tfs_ext_find(fs, im->ino, 0, UINT64_MAX, &kb, &e);
		if (!ret)
			ret = tfs_data_remove_all(fs, im);
		else if (ret == -ENOENT)
			ret = 0;
	} else if (S_ISDIR(im->ui.mode))
		ret = tfs_dirents_remove_all(fs, im->ino);
	ret = ret ?: tfs_xattr_remove_all(fs, im->ino);
	if (ret)
		return ret;

	tfs_posix_trans_init(&trans, fs);
	/* A symlink's target goes with its inode. */
	ret = (S_ISLNK(im->ui.mode) ? tfs_trans_delete(&trans, TFS_BTREE_extents, TFS_POS(im->ino, 0))
				    : 0) ?:
	      tfs_trans_delete(&trans, TFS_BTREE_inodes, TFS_POS(im->ino, 0)) ?:
	      tfs_orphan_del(&trans, im->ino) ?: tfs_posix_commit(&trans, &seq);
	tfs_trans_exit(&trans);
	if (ret)
		return ret;
	tfs_inode_committed(im, NULL, seq, false);
	im->deleted = true;
	__atomic_fetch_sub(&tfs_posix(fs)->nr_inodes, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tfs_posix(fs)->c.orphans_reclaimed, 1, __ATOMIC_RELAXED);
	return 0;
}
