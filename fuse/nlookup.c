// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's lookup counts, per inode number: every reply that hands the
 * kernel a node (lookup, mknod, mkdir, symlink, link, create, readdirplus
 * entries) adds one, forget subtracts what the kernel says.  fs/ does not
 * need them (inode numbers are never reused while mounted), but a count
 * going negative or left over at unmount is a daemon bug, and the totals
 * show in `tinyfs stats MNT fuse`.
 *
 * An entry may also hold a pin: an open file of the inode, taken before a
 * call that may remove its last name (fuse.c), so the inode outlives the
 * name while the kernel can still reach it (an O_PATH descriptor, an open or
 * working directory, a path resolved before a rename replaced it) and asks
 * its attributes or opens it, as on ext4.  The forget that brings the count
 * to zero releases the pin, and that release removes an unlinked inode.
 *
 * A hash table per shard, each under its own mutex, so parallel lookups in
 * different directories rarely meet.
 */
#include <pthread.h>
#include <stdlib.h>

#include "fuse/tfs_fuse.h"

#define NL_SHARDS 64

struct nl_entry {
	u64 ino, n;
	struct tfs_file *pin; /* or NULL */
	struct nl_entry *next;
};

struct nl_shard {
	pthread_mutex_t lock;
	struct nl_entry **buckets;
	size_t nr_buckets, nr;
} __attribute__((aligned(64)));

struct tfs_nlookup {
	struct tfs_fs *fs; /* pins are its files */
	struct nl_shard shards[NL_SHARDS];
};

static inline u64 nl_hash(u64 ino)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdULL;
	ino ^= ino >> 33;
	return ino;
}

static struct nl_shard *nl_shard(struct tfs_nlookup *t, u64 h)
{
	return &t->shards[h % NL_SHARDS];
}

struct tfs_nlookup *tfs_nlookup_alloc(struct tfs_fs *fs)
{
	struct tfs_nlookup *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->fs = fs;
	for (unsigned i = 0; i < NL_SHARDS; i++)
		pthread_mutex_init(&t->shards[i].lock, NULL);
	return t;
}

void tfs_nlookup_free(struct tfs_nlookup *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < NL_SHARDS; i++) {
		struct nl_shard *s = &t->shards[i];

		for (size_t b = 0; b < s->nr_buckets; b++) {
			struct nl_entry *e = s->buckets[b];

			while (e) {
				struct nl_entry *next = e->next;

				if (e->pin)
					tfs_release(t->fs, e->pin);
				free(e);
				e = next;
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(t);
}

/* Doubles the bucket array; on allocation failure the table just stays denser. */
static void nl_grow(struct nl_shard *s)
{
	size_t nr = s->nr_buckets ? s->nr_buckets * 2 : 64;
	struct nl_entry **b = calloc(nr, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < s->nr_buckets; i++) {
		struct nl_entry *e = s->buckets[i];

		while (e) {
			struct nl_entry *next = e->next;
			size_t j = (nl_hash(e->ino) / NL_SHARDS) & (nr - 1);

			e->next = b[j];
			b[j] = e;
			e = next;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nr_buckets = nr;
}

void tfs_nlookup_get(struct tfs_nlookup *t, u64 ino, u64 n)
{
	u64 h = nl_hash(ino);
	struct nl_shard *s = nl_shard(t, h);
	struct nl_entry *e;

	pthread_mutex_lock(&s->lock);
	if (s->nr >= s->nr_buckets)
		nl_grow(s);
	if (!s->nr_buckets)
		goto out; /* no memory: the count is lost, never the reply */
	for (e = s->buckets[(h / NL_SHARDS) & (s->nr_buckets - 1)]; e; e = e->next)
		if (e->ino == ino) {
			e->n += n;
			goto out;
		}
	e = malloc(sizeof(*e));
	if (e) {
		size_t j = (h / NL_SHARDS) & (s->nr_buckets - 1);

		e->ino = ino;
		e->n = n;
		e->pin = NULL;
		e->next = s->buckets[j];
		s->buckets[j] = e;
		s->nr++;
	}
out:
	pthread_mutex_unlock(&s->lock);
}

bool tfs_nlookup_put(struct tfs_nlookup *t, u64 ino, u64 n)
{
	u64 h = nl_hash(ino);
	struct nl_shard *s = nl_shard(t, h);
	struct nl_entry **p;
	struct tfs_file *pin = NULL;
	bool ok = false;

	pthread_mutex_lock(&s->lock);
	if (!s->nr_buckets)
		goto out;
	for (p = &s->buckets[(h / NL_SHARDS) & (s->nr_buckets - 1)]; *p; p = &(*p)->next) {
		struct nl_entry *e = *p;

		if (e->ino != ino)
			continue;
		ok = e->n >= n;
		e->n = ok ? e->n - n : 0;
		if (!e->n) {
			*p = e->next;
			pin = e->pin;
			free(e);
			s->nr--;
		}
		break;
	}
out:
	pthread_mutex_unlock(&s->lock);
	/* Outside the lock: the release of an unlinked inode removes it. */
	if (pin)
		tfs_release(t->fs, pin);
	return ok;
}

/* ino's entry (s locked), or NULL. */
static struct nl_entry *nl_find(struct nl_shard *s, u64 h, u64 ino)
{
	if (!s->nr_buckets)
		return NULL;
	for (struct nl_entry *e = s->buckets[(h / NL_SHARDS) & (s->nr_buckets - 1)]; e; e = e->next)
		if (e->ino == ino)
			return e;
	return NULL;
}

bool tfs_nlookup_wants_pin(struct tfs_nlookup *t, u64 ino)
{
	u64 h = nl_hash(ino);
	struct nl_shard *s = nl_shard(t, h);
	struct nl_entry *e;
	bool ret;

	pthread_mutex_lock(&s->lock);
	e = nl_find(s, h, ino);
	ret = e && !e->pin;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

struct tfs_file *tfs_nlookup_pin(struct tfs_nlookup *t, u64 ino, struct tfs_file *f)
{
	u64 h = nl_hash(ino);
	struct nl_shard *s = nl_shard(t, h);
	struct nl_entry *e;

	pthread_mutex_lock(&s->lock);
	e = nl_find(s, h, ino);
	if (e && !e->pin) {
		e->pin = f;
		f = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return f;
}

void tfs_nlookup_totals(struct tfs_nlookup *t, u64 *inodes, u64 *lookups)
{
	*inodes = *lookups = 0;
	for (unsigned i = 0; i < NL_SHARDS; i++) {
		struct nl_shard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		*inodes += s->nr;
		for (size_t b = 0; b < s->nr_buckets; b++)
			for (struct nl_entry *e = s->buckets[b]; e; e = e->next)
				*lookups += e->n;
		pthread_mutex_unlock(&s->lock);
	}
}
