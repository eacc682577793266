// SPDX-License-Identifier: GPL-2.0
/*
 * The key cache (fs/btree_key_cache.h): entries in a cds_lfht, three lists,
 * journal pins, grace periods and the shrinker.
 *
 * Memory ordering for readers (and for ThreadSanitizer, which cannot see
 * liburcu's barriers): an entry's fields are written before its key
 * pointer is stored with release semantics, and every reader loads the key
 * pointer with acquire semantics before it reads anything else of the
 * entry (the hash match function too).  A key that an update replaces is
 * freed by a call_rcu callback; an entry that leaves the hash table is
 * stamped with the grace-period sequence it must wait for.
 *
 * Grace periods: gp_seq is the open "epoch": entries removed now are
 * stamped with it.  Closing an epoch (gp_start_locked) issues one call_rcu
 * after every removal stamped with it, so when its callback runs, no reader
 * that could have seen those entries is left; the callback sets
 * gp_completed to that epoch and, if entries were stamped meanwhile,
 * closes the next one.  An entry with gp_seq <= gp_completed may be freed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/rculfhash.h>

#include "fs/btree_internal.h"
#include "fs/btree_key_cache.h"
#include "journal/journal.h"
#include "lib/errcode.h"
#include "lib/fault_point.h"
#include "lib/printbuf.h"
#include "lib/rcu.h"
#include "lib/shrinker.h"

/* --- types --- */

struct kc_list {
	struct kc_list *next, *prev;
};

enum kc_state {
	KC_CLEAN,
	KC_DIRTY,
	KC_FREED
};

/* A key's memory: the rcu head is used only once the key is unreachable. */
struct kc_key {
	union {
		struct rcu_head rcu;
		struct kc_key *next; /* on a commit's preallocated list */
	};
	u32 alloc_u64s; /* room for a key of this many words */
	u32 pad;
	struct tfs_bkey k; /* followed by its value */
};

/*
 * A journal pin.  Pins are never freed while the cache lives (they go back
 * to a pool): journal reclaim may call a pin's flush callback just after
 * the entry dropped it, so the pin's memory must stay a pin.  e is the
 * dirty entry it belongs to, NULL when in the pool (under the cache lock).
 */
struct kc_pin {
	struct tfs_journal_entry_pin pin;
	struct tfs_btree_key_cache *kc;
	struct kc_entry *e;
	struct kc_pin *next;	 /* pool or a commit's preallocated list */
	struct kc_pin *all_next; /* every pin, for exit */
};

struct kc_entry {
	struct cds_lfht_node hnode;
	struct kc_list list; /* clean, dirty or freed */
	enum tfs_btree_id id;
	struct tfs_bpos pos;
	struct kc_key *k; /* release-stored, acquire-loaded */
	u8 state;	  /* enum kc_state, under the cache lock */
	u8 accessed;	  /* atomic: set by readers, cleared by the scan */
	struct kc_pin *pin;
	u64 journal_seq; /* dirty: the newest seq of an update it holds */
	u64 gp_seq;	 /* freed: the epoch that must complete */
	u64 fill_gen;	 /* the cache's fill_gen when it was filled (under the lock) */
};

struct tfs_btree_key_cache {
	pthread_mutex_t lock;
	pthread_cond_t gp_cond; /* gp_completed advanced */
	struct cds_lfht *ht;
	unsigned ids_mask;
	struct tfs_journal *j;
	struct tfs_btree_key_cache_ops ops;
	struct tfs_shrinkers *shrinkers;
	struct tfs_shrinker shrinker;
	bool shrinker_registered;

	/* Under lock. */
	struct kc_list clean, dirty, freed; /* oldest first */
	u64 nr_clean, nr_dirty, nr_freed;
	unsigned long ht_buckets; /* the size we last asked the table for */
	unsigned long ht_grow;	  /* atomic: a resize to this is due (0: none) */
	size_t freed_bytes;	  /* memory of the freed list: on its way out */
	/*
	 * Fills so far (under lock).  A commit holds only intent from its
	 * prep to its apply, and a reader under read may fill meanwhile: an
	 * entry newer than the commit's prep (fill_gen > prep_gen) had no key
	 * or pin prepared for it, so the apply evicts it (it is clean: the
	 * leaf's key) and updates the leaf instead.
	 */
	u64 fill_gen;
	struct kc_pin *pin_pool, *pins_all;
	u64 gp_seq, gp_inflight, gp_completed;
	bool gp_in_flight, gp_pending;
	struct rcu_head gp_head;

	size_t bytes; /* atomic */
	/* Counters: lookups and hits atomic, the rest under lock. */
	u64 lookups, hits, fills, updates, deletes, flushes, flush_races;
	u64 evicted, second_chances, nr_released, reused, allocated, scans;
};

/* --- lists --- */

static void kc_list_init(struct kc_list *l)
{
	l->next = l->prev = l;
}

static bool kc_list_empty(const struct kc_list *l)
{
	return l->next == l;
}

static void kc_list_del(struct kc_list *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	kc_list_init(l);
}

static void kc_list_add_tail(struct kc_list *l, struct kc_list *head)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static void kc_list_move_tail(struct kc_list *l, struct kc_list *head)
{
	kc_list_del(l);
	kc_list_add_tail(l, head);
}

static struct kc_entry *kc_list_first(struct kc_list *head)
{
	return kc_list_empty(head) ? NULL : container_of(head->next, struct kc_entry, list);
}

/* --- memory --- */

static void kc_account(struct tfs_btree_key_cache *kc, long delta)
{
	__atomic_add_fetch(&kc->bytes, (size_t)delta, __ATOMIC_RELAXED);
}

static size_t kc_key_bytes(unsigned u64s)
{
	return offsetof(struct kc_key, k) + (size_t)u64s * 8;
}

/* What an entry and its key hold (locked, or the entry is ours alone). */
static size_t kc_entry_bytes(const struct kc_entry *e)
{
	return sizeof(*e) + kc_key_bytes(e->k->alloc_u64s);
}

static struct kc_key *kc_key_alloc(struct tfs_btree_key_cache *kc, unsigned u64s)
{
	struct kc_key *k = tfs_fault("alloc:key_cache") ? NULL : malloc(kc_key_bytes(u64s));

	if (!k)
		return NULL;
	k->alloc_u64s = u64s;
	kc_account(kc, (long)kc_key_bytes(u64s));
	return k;
}

static void kc_key_free(struct tfs_btree_key_cache *kc, struct kc_key *k)
{
	if (!k)
		return;
	kc_account(kc, -(long)kc_key_bytes(k->alloc_u64s));
	free(k);
}

static void kc_key_free_rcu(struct rcu_head *head)
{
	tfs_rcu_callback_begin();
	free(container_of(head, struct kc_key, rcu));
}

/* An unreachable key: freed after a grace period (accounted as gone now). */
static void kc_key_free_deferred(struct tfs_btree_key_cache *kc, struct kc_key *k)
{
	kc_account(kc, -(long)kc_key_bytes(k->alloc_u64s));
	tfs_rcu_call(&k->rcu, kc_key_free_rcu);
}

static void kc_entry_release(struct tfs_btree_key_cache *kc, struct kc_entry *e)
{
	kc_key_free(kc, e->k);
	kc_account(kc, -(long)sizeof(*e));
	free(e);
}

/* --- grace periods --- */

static void kc_gp_done(struct rcu_head *head);

static void kc_gp_start_locked(struct tfs_btree_key_cache *kc)
{
	kc->gp_in_flight = true;
	kc->gp_inflight = kc->gp_seq++;
	kc->gp_pending = false;
	tfs_rcu_call(&kc->gp_head, kc_gp_done);
}

static void kc_gp_done(struct rcu_head *head)
{
	struct tfs_btree_key_cache *kc = container_of(head, struct tfs_btree_key_cache, gp_head);

	tfs_rcu_callback_begin();
	pthread_mutex_lock(&kc->lock);
	kc->gp_completed = kc->gp_inflight;
	kc->gp_in_flight = false;
	if (kc->gp_pending)
		kc_gp_start_locked(kc);
	pthread_cond_broadcast(&kc->gp_cond);
	pthread_mutex_unlock(&kc->lock);
}

/* Stamps e (just removed from the hash table) with the open epoch. */
static void kc_gp_stamp_locked(struct tfs_btree_key_cache *kc, struct kc_entry *e)
{
	e->gp_seq = kc->gp_seq;
	kc->gp_pending = true;
	if (!kc->gp_in_flight)
		kc_gp_start_locked(kc);
}

void tfs_btree_key_cache_wait_gp(struct tfs_btree_key_cache *kc)
{
	pthread_mutex_lock(&kc->lock);
	/* Every stamp handed out so far: the open epoch if used, else the last closed one. */
	u64 target = kc->gp_pending ? kc->gp_seq : kc->gp_seq - 1;

	while (kc->gp_completed < target)
		pthread_cond_wait(&kc->gp_cond, &kc->lock);
	pthread_mutex_unlock(&kc->lock);
}

/* --- the hash table --- */

struct kc_match_key {
	enum tfs_btree_id id;
	struct tfs_bpos pos;
};

static unsigned long kc_hash(enum tfs_btree_id id, struct tfs_bpos pos)
{
	u64 h = pos.inode * 0x9e3779b97f4a7c15ULL;

	h ^= (pos.offset + ((u64)id << 56)) * 0xc2b2ae3d27d4eb4fULL;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	return (unsigned long)h;
}

static int kc_match(struct cds_lfht_node *node, const void *key)
{
	struct kc_entry *e = caa_container_of(node, struct kc_entry, hnode);
	const struct kc_match_key *mk = key;

	/* Acquire first: the fields below were written before the key was published. */
	if (!__atomic_load_n(&e->k, __ATOMIC_ACQUIRE))
		return 0;
	return e->id == mk->id && tfs_bpos_eq(e->pos, mk->pos);
}

/* The entry at (id, pos); the caller is in a read-side section. */
static struct kc_entry *kc_find(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
				struct tfs_bpos pos)
{
	struct kc_match_key mk = { .id = id, .pos = pos };
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_lookup(kc->ht, kc_hash(id, pos), kc_match, &mk, &iter);
	node = cds_lfht_iter_get_node(&iter);
	return node ? caa_container_of(node, struct kc_entry, hnode) : NULL;
}

/*
 * The table's size.  cds_lfht's automatic resize runs lazily in a worker
 * and lags far behind a stream of fills (a million entries in 1024 buckets
 * made lookups 100x slower), so the cache also grows it itself, 4x at a
 * time once there are two entries per bucket (amortized O(1)).  A fill
 * notes that it is due; the next lookup does it, holding no lock, since a
 * resize waits for grace periods.  Shrinking is left to the automatic
 * resize; ht_buckets follows it down so that growing again resizes.
 */
#define KC_HT_MIN_BUCKETS 1024

/* Locked: after the number of hashed entries changed. */
static void kc_size_check_locked(struct tfs_btree_key_cache *kc)
{
	u64 nr = kc->nr_clean + kc->nr_dirty;

	if (nr > 2 * kc->ht_buckets) {
		kc->ht_buckets *= 4;
		__atomic_store_n(&kc->ht_grow, kc->ht_buckets, __ATOMIC_RELAXED);
	} else if (kc->ht_buckets > KC_HT_MIN_BUCKETS && nr < kc->ht_buckets / 8) {
		kc->ht_buckets /= 4;
	}
}

static void kc_maybe_grow(struct tfs_btree_key_cache *kc)
{
	unsigned long want = __atomic_exchange_n(&kc->ht_grow, 0, __ATOMIC_RELAXED);

	if (want)
		cds_lfht_resize(kc->ht, want);
}

/* Takes e out of the hash table and onto freed; in a read-side section, locked. */
static void kc_evict_locked(struct tfs_btree_key_cache *kc, struct kc_entry *e)
{
	int ret = cds_lfht_del(kc->ht, &e->hnode);

	if (ret)
		abort(); /* only this cache removes, under its lock: a bug */
	if (e->state == KC_CLEAN)
		kc->nr_clean--;
	else
		kc->nr_dirty--;
	e->state = KC_FREED;
	kc_list_move_tail(&e->list, &kc->freed);
	kc->nr_freed++;
	kc_size_check_locked(kc);
	kc->freed_bytes += kc_entry_bytes(e);
	kc_gp_stamp_locked(kc, e);
}

/* --- pins --- */

static int kc_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq);

/* A pin from the pool or malloc; NULL on ENOMEM.  Locked. */
static struct kc_pin *kc_pin_get_locked(struct tfs_btree_key_cache *kc)
{
	struct kc_pin *p = kc->pin_pool;

	if (p) {
		kc->pin_pool = p->next;
		p->next = NULL;
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	tfs_journal_pin_init(&p->pin);
	p->kc = kc;
	p->all_next = kc->pins_all;
	kc->pins_all = p;
	return p;
}

static void kc_pin_put_locked(struct tfs_btree_key_cache *kc, struct kc_pin *p)
{
	p->e = NULL;
	p->next = kc->pin_pool;
	kc->pin_pool = p;
}

/* Drops a dirty entry's pin (its update is in the btree, or superseded). */
static void kc_entry_unpin_locked(struct tfs_btree_key_cache *kc, struct kc_entry *e)
{
	struct kc_pin *p = e->pin;

	e->pin = NULL;
	if (!p)
		return;
	tfs_journal_pin_drop(kc->j, &p->pin);
	kc_pin_put_locked(kc, p);
}

/* --- init and exit --- */

static unsigned long kc_shrinker_count(struct tfs_shrinker *s)
{
	struct tfs_btree_key_cache *kc = s->private;

	pthread_mutex_lock(&kc->lock);
	unsigned long n = kc->nr_clean + kc->nr_freed;

	pthread_mutex_unlock(&kc->lock);
	return n;
}

static unsigned long kc_shrinker_scan(struct tfs_shrinker *s, unsigned long nr_to_scan)
{
	return tfs_btree_key_cache_scan(s->private, nr_to_scan);
}

/*
 * For the registry: memory held minus the freed list's, which goes as soon
 * as its grace period passes.  So a scan that evicts shows as progress, and
 * a run stops at its target instead of evicting every clean entry while
 * the memory of those evicted waits for a grace period.
 */
static size_t kc_shrinker_bytes(struct tfs_shrinker *s)
{
	struct tfs_btree_key_cache *kc = s->private;

	pthread_mutex_lock(&kc->lock);
	size_t held = __atomic_load_n(&kc->bytes, __ATOMIC_RELAXED);
	size_t b = held > kc->freed_bytes ? held - kc->freed_bytes : 0;

	pthread_mutex_unlock(&kc->lock);
	return b;
}

int tfs_btree_key_cache_init(struct tfs_btree_key_cache **ret, unsigned ids_mask,
			     struct tfs_journal *j, struct tfs_shrinkers *r,
			     const struct tfs_btree_key_cache_ops *ops)
{
	struct tfs_btree_key_cache *kc = calloc(1, sizeof(*kc));

	*ret = NULL;
	if (!kc)
		return -ENOMEM;
	kc->ht = cds_lfht_new_flavor(KC_HT_MIN_BUCKETS, KC_HT_MIN_BUCKETS, 0,
				     CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, &urcu_memb_flavor,
				     NULL);
	if (!kc->ht) {
		free(kc);
		return -ENOMEM;
	}
	pthread_mutex_init(&kc->lock, NULL);
	pthread_cond_init(&kc->gp_cond, NULL);
	kc_list_init(&kc->clean);
	kc_list_init(&kc->dirty);
	kc_list_init(&kc->freed);
	kc->ids_mask = ids_mask;
	kc->j = j;
	kc->ops = *ops;
	kc->gp_seq = 1;
	kc->ht_buckets = KC_HT_MIN_BUCKETS;
	kc->shrinkers = r;
	if (r) {
		kc->shrinker = (struct tfs_shrinker){
			.name = "btree_key_cache",
			.count = kc_shrinker_count,
			.scan = kc_shrinker_scan,
			.bytes = kc_shrinker_bytes,
			.seeks = 2,
			.private = kc,
		};
		tfs_shrinker_register(r, &kc->shrinker);
		kc->shrinker_registered = true;
	}
	*ret = kc;
	return 0;
}

void tfs_btree_key_cache_exit(struct tfs_btree_key_cache *kc)
{
	struct kc_entry *e;
	unsigned nr_dirty = 0;

	if (!kc)
		return;
	if (kc->shrinker_registered)
		tfs_shrinker_unregister(&kc->shrinker);
	kc->shrinker_registered = false;
	tfs_rcu_thread_register();

	/* Every grace-period callback (they chain while stamps are pending), then key frees. */
	pthread_mutex_lock(&kc->lock);
	while (kc->gp_in_flight) {
		pthread_mutex_unlock(&kc->lock);
		tfs_rcu_barrier();
		pthread_mutex_lock(&kc->lock);
	}
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_barrier();

	/* Every entry is on a list: take the hashed ones out of the table, then free all. */
	tfs_rcu_read_lock();
	while ((e = kc_list_first(&kc->dirty)) || (e = kc_list_first(&kc->clean))) {
		if (e->state == KC_DIRTY) {
			nr_dirty++;
			kc_entry_unpin_locked(kc, e);
		}
		cds_lfht_del(kc->ht, &e->hnode);
		kc_list_move_tail(&e->list, &kc->freed);
	}
	tfs_rcu_read_unlock();
	while ((e = kc_list_first(&kc->freed))) {
		kc_list_del(&e->list);
		kc_entry_release(kc, e);
	}
	if (nr_dirty)
		fprintf(stderr,
			"tinyfs: key cache: %u dirty entries dropped at exit (not flushed; the "
			"journal still holds them)\n",
			nr_dirty);
	cds_lfht_destroy(kc->ht, NULL);
	while (kc->pins_all) {
		struct kc_pin *p = kc->pins_all;

		kc->pins_all = p->all_next;
		free(p);
	}
	pthread_cond_destroy(&kc->gp_cond);
	pthread_mutex_destroy(&kc->lock);
	free(kc);
}

bool tfs_btree_key_cache_wants(struct tfs_btree_key_cache *kc, enum tfs_btree_id id)
{
	return kc && (unsigned)id < 32 && (kc->ids_mask & (1U << id));
}

/* --- reading --- */

/* Frees the freed entries whose grace period passed (oldest first). */
static void kc_free_ready(struct tfs_btree_key_cache *kc)
{
	struct kc_entry *e;

	pthread_mutex_lock(&kc->lock);
	while ((e = kc_list_first(&kc->freed)) && e->gp_seq <= kc->gp_completed) {
		kc_list_del(&e->list);
		kc->nr_freed--;
		kc->freed_bytes -= kc_entry_bytes(e);
		kc->nr_released++;
		kc_entry_release(kc, e);
	}
	pthread_mutex_unlock(&kc->lock);
}

/*
 * The freed list's memory is outside the budget's count (kc_shrinker_bytes:
 * it goes as soon as its grace period passes, and new entries reuse it), so
 * it is bounded here instead: when it passes a sixteenth of the budget, a
 * lookup (one in 64 looks) waits for the grace period and frees it.  Never inside a
 * read-side section (the caller checks), which would wait for itself.  The
 * budget itself is kept at allocation (kc_reserve()); when the caches are
 * still an eighth over it (reserves could not make room: dirty objects),
 * shrink here too, from a thread holding no lock.
 */
static void kc_throttle(struct tfs_btree_key_cache *kc)
{
	struct tfs_shrinkers *r = kc->shrinkers;
	size_t budget, freed;

	if (!r || !(budget = tfs_shrinkers_budget(r)))
		return;
	/* Every 64th lookup: the shared total takes each cache's lock. */
	if (__atomic_load_n(&kc->lookups, __ATOMIC_RELAXED) % 64)
		return;
	if (tfs_shrinkers_bytes(r) > budget + budget / 8)
		tfs_shrinkers_run(r, budget - budget / 8);
	pthread_mutex_lock(&kc->lock);
	freed = kc->freed_bytes;
	pthread_mutex_unlock(&kc->lock);
	if (freed > budget / 16) {
		tfs_btree_key_cache_wait_gp(kc);
		kc_free_ready(kc);
	}
}

/*
 * Before a fill allocates: room for it under the budget shared with the
 * node cache (lib/shrinker.h, tfs_shrinkers_reserve()).  No cache lock is
 * held here; the btree's lock may be (the node scan skips that tree).
 */
static void kc_reserve(struct tfs_btree_key_cache *kc, unsigned u64s)
{
	if (kc->shrinkers)
		tfs_shrinkers_reserve(kc->shrinkers, sizeof(struct kc_entry) + kc_key_bytes(u64s));
}

bool tfs_btree_key_cache_lookup(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
				struct tfs_bpos pos, struct tfs_bkey_buf *out)
{
	struct kc_entry *e;
	bool hit = false;

	if (!tfs_btree_key_cache_wants(kc, id))
		return false;
	tfs_rcu_thread_register();
	if (!tfs_rcu_read_ongoing()) {
		kc_maybe_grow(kc);
		kc_throttle(kc);
	}
	__atomic_add_fetch(&kc->lookups, 1, __ATOMIC_RELAXED);

	tfs_rcu_read_lock();
	e = kc_find(kc, id, pos);
	if (e) {
		const struct kc_key *k = __atomic_load_n(&e->k, __ATOMIC_ACQUIRE);

		tfs_bkey_copy(out, &k->k);
		if (!__atomic_load_n(&e->accessed, __ATOMIC_RELAXED))
			__atomic_store_n(&e->accessed, 1, __ATOMIC_RELAXED);
		hit = true;
	}
	tfs_rcu_read_unlock();
	if (hit)
		__atomic_add_fetch(&kc->hits, 1, __ATOMIC_RELAXED);
	return hit;
}

/*
 * A new entry with room for a key of u64s words: the oldest freed entry
 * whose grace period passed, else new memory.  NULL on ENOMEM.
 */
static struct kc_entry *kc_entry_alloc(struct tfs_btree_key_cache *kc, unsigned u64s)
{
	struct kc_entry *e;

	pthread_mutex_lock(&kc->lock);
	e = kc_list_first(&kc->freed);
	if (e && e->gp_seq <= kc->gp_completed) {
		kc_list_del(&e->list);
		kc->nr_freed--;
		kc->freed_bytes -= kc_entry_bytes(e);
		kc->reused++;
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&kc->lock);

	if (e) {
		/* No reader can see it any more: its old key may be rewritten or freed. */
		if (e->k->alloc_u64s < u64s) {
			kc_key_free(kc, e->k);
			e->k = kc_key_alloc(kc, u64s);
			if (!e->k) {
				kc_account(kc, -(long)sizeof(*e));
				free(e);
				return NULL;
			}
		}
		return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	kc_account(kc, (long)sizeof(*e));
	kc_list_init(&e->list);
	e->k = kc_key_alloc(kc, u64s);
	if (!e->k) {
		kc_account(kc, -(long)sizeof(*e));
		free(e);
		return NULL;
	}
	pthread_mutex_lock(&kc->lock);
	kc->allocated++;
	pthread_mutex_unlock(&kc->lock);
	return e;
}

void tfs_btree_key_cache_fill(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
			      const struct tfs_bkey *k)
{
	struct kc_match_key mk = { .id = id, .pos = tfs_bkey_pos(k) };
	struct cds_lfht_node *node;
	struct kc_entry *e;
	struct kc_key *key;

	if (!tfs_btree_key_cache_wants(kc, id))
		return;
	tfs_rcu_thread_register();
	kc_reserve(kc, tfs_bkey_u64s(k));
	e = kc_entry_alloc(kc, tfs_bkey_u64s(k));
	if (!e)
		return;
	key = e->k;
	memcpy(&key->k, k, tfs_bkey_bytes(k));
	e->id = id;
	e->pos = mk.pos;
	e->state = KC_CLEAN;
	e->accessed = 0;
	e->pin = NULL;
	e->journal_seq = 0;
	e->gp_seq = 0;
	cds_lfht_node_init(&e->hnode);
	/* Publish: every field above is written before a reader can find the entry. */
	__atomic_store_n(&e->k, key, __ATOMIC_RELEASE);

	tfs_rcu_read_lock();
	pthread_mutex_lock(&kc->lock);
	e->fill_gen = ++kc->fill_gen;
	node = cds_lfht_add_unique(kc->ht, kc_hash(id, mk.pos), kc_match, &mk, &e->hnode);
	if (node == &e->hnode) {
		kc_list_add_tail(&e->list, &kc->clean);
		kc->nr_clean++;
		kc->fills++;
		kc_size_check_locked(kc);
		e = NULL;
	}
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_read_unlock();
	if (e) /* already cached: ours was never visible */
		kc_entry_release(kc, e);
	if (kc->shrinkers && tfs_shrinkers_budget(kc->shrinkers) &&
	    __atomic_load_n(&kc->bytes, __ATOMIC_RELAXED) > tfs_shrinkers_budget(kc->shrinkers))
		tfs_shrinkers_kick(kc->shrinkers);
}

bool tfs_btree_key_cache_overlay(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
				 struct tfs_bkey_buf *k, bool locked, u64 cookie,
				 const u64 *mod_seq, bool *stale)
{
	struct kc_entry *e;
	bool found = false;

	if (stale)
		*stale = false;
	if (!tfs_btree_key_cache_wants(kc, id))
		return false;
	tfs_rcu_thread_register();
	tfs_rcu_read_lock();
	e = kc_find(kc, id, tfs_bkey_pos(&k->k));
	if (e) {
		const struct kc_key *key = __atomic_load_n(&e->k, __ATOMIC_ACQUIRE);

		tfs_bkey_copy(k, &key->k);
		found = true;
	}
	tfs_rcu_read_unlock();
	if (!found && !locked && mod_seq && stale &&
	    __atomic_load_n(mod_seq, __ATOMIC_ACQUIRE) != cookie)
		*stale = true;
	return found;
}

int tfs_btree_key_cache_state(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
			      struct tfs_bpos pos)
{
	struct kc_entry *e;
	int ret = -ENOENT;

	if (!tfs_btree_key_cache_wants(kc, id))
		return ret;
	tfs_rcu_thread_register();
	tfs_rcu_read_lock();
	pthread_mutex_lock(&kc->lock);
	e = kc_find(kc, id, pos);
	if (e && e->state != KC_FREED)
		ret = e->state == KC_DIRTY;
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_read_unlock();
	return ret;
}

/* --- commit hooks --- */

static void kc_commit_release(struct tfs_btree_key_cache *kc, struct tfs_key_cache_commit *c)
{
	while (c->keys) {
		struct kc_key *k = c->keys;

		c->keys = k->next;
		kc_key_free(kc, k);
	}
	if (c->pins) {
		pthread_mutex_lock(&kc->lock);
		while (c->pins) {
			struct kc_pin *p = c->pins;

			c->pins = p->next;
			kc_pin_put_locked(kc, p);
		}
		pthread_mutex_unlock(&kc->lock);
	}
}

static bool kc_keys_equal(const struct tfs_bkey *a, const struct tfs_bkey *b)
{
	return tfs_bkey_u64s(a) == tfs_bkey_u64s(b) && !memcmp(a, b, tfs_bkey_bytes(a));
}

int tfs_btree_key_cache_commit_prep(struct tfs_btree_key_cache *kc, struct tfs_key_cache_commit *c,
				    const struct tfs_trans_update *updates, unsigned nr_updates,
				    unsigned trans_flags)
{
	int ret = 0;

	if (!kc)
		return 0;
	kc_commit_release(kc, c);
	c->flush = trans_flags & TFS_TRANS_KEY_CACHE_FLUSH;
	c->nr_cached = 0;
	/* Before looking: every entry filled up to here is seen below. */
	pthread_mutex_lock(&kc->lock);
	c->prep_gen = kc->fill_gen;
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_thread_register();
	tfs_rcu_read_lock();
	for (unsigned i = 0; i < nr_updates && !ret; i++) {
		const struct tfs_trans_update *u = &updates[i];
		struct kc_entry *e;
		bool need_pin;

		if (!tfs_btree_key_cache_wants(kc, u->id))
			continue;
		pthread_mutex_lock(&kc->lock);
		e = kc_find(kc, u->id, tfs_bkey_pos(u->k));
		if (c->flush) {
			/* The btree locks held keep a dirty entry and its key as they are. */
			if (!e || e->state != KC_DIRTY || !kc_keys_equal(&e->k->k, u->k)) {
				kc->flush_races++;
				ret = -TFS_ERR_key_cache_flush_raced;
			}
			pthread_mutex_unlock(&kc->lock);
			continue;
		}
		need_pin = e && !e->pin;
		pthread_mutex_unlock(&kc->lock);
		if (!e || u->k->type == TFS_BKEY_deleted)
			continue;

		struct kc_key *k = kc_key_alloc(kc, tfs_bkey_u64s(u->k));

		if (!k) {
			ret = -ENOMEM;
			break;
		}
		k->next = c->keys;
		c->keys = k;
		if (need_pin) {
			pthread_mutex_lock(&kc->lock);
			struct kc_pin *p = kc_pin_get_locked(kc);

			pthread_mutex_unlock(&kc->lock);
			if (!p) {
				ret = -ENOMEM;
				break;
			}
			p->next = c->pins;
			c->pins = p;
		}
	}
	tfs_rcu_read_unlock();
	if (ret)
		kc_commit_release(kc, c);
	return ret;
}

/*
 * The smallest preallocated key with room for u64s words.  prep made one
 * per update, of its size; apply takes one per applied update.  Taking the
 * smallest that fits always finds one: the sizes left always include those
 * of the updates left (first fit would not: a 1-word update could take the
 * 8-word key another update needs).
 */
static struct kc_key *kc_commit_take_key(struct tfs_key_cache_commit *c, unsigned u64s)
{
	struct kc_key **best = NULL;

	for (struct kc_key **p = &c->keys; *p; p = &(*p)->next)
		if ((*p)->alloc_u64s >= u64s && (!best || (*p)->alloc_u64s < (*best)->alloc_u64s))
			best = p;
	if (!best)
		return NULL;

	struct kc_key *k = *best;

	*best = k->next;
	return k;
}

bool tfs_btree_key_cache_commit_apply(struct tfs_btree_key_cache *kc,
				      struct tfs_key_cache_commit *c, enum tfs_btree_id id,
				      const struct tfs_bkey *k, u64 seq)
{
	struct kc_entry *e;
	bool took = false;

	if (!tfs_btree_key_cache_wants(kc, id))
		return false;
	tfs_rcu_thread_register();
	tfs_rcu_read_lock();
	pthread_mutex_lock(&kc->lock);
	e = kc_find(kc, id, tfs_bkey_pos(k));
	if (!e)
		goto out;
	if (c->flush) {
		/*
		 * The leaf gets the key in this same locked section, and this
		 * commit journals it at seq, after every update of the entry:
		 * the entry's older seqs are no longer needed.
		 */
		kc_list_move_tail(&e->list, &kc->clean);
		e->state = KC_CLEAN;
		kc->nr_dirty--;
		kc->nr_clean++;
		kc->flushes++;
		kc_entry_unpin_locked(kc, e);
		goto out;
	}
	if (e->state == KC_CLEAN && e->fill_gen > c->prep_gen) {
		/* Filled by a reader since prep (see fill_gen): nothing prepared for it. */
		kc_evict_locked(kc, e);
		goto out;
	}
	if (k->type == TFS_BKEY_deleted) {
		/* The delete (at a newer seq) supersedes whatever the entry held. */
		kc_entry_unpin_locked(kc, e);
		kc_evict_locked(kc, e);
		kc->deletes++;
		goto out;
	}

	struct kc_key *nk = kc_commit_take_key(c, tfs_bkey_u64s(k));
	struct kc_key *old = e->k;

	/* prep allocated for every update of an entry not newer than it (fill_gen). */
	if (!nk)
		abort();
	memcpy(&nk->k, k, tfs_bkey_bytes(k));
	__atomic_store_n(&e->k, nk, __ATOMIC_RELEASE);
	kc_key_free_deferred(kc, old);
	if (e->state == KC_CLEAN) {
		struct kc_pin *p = c->pins;

		if (!p)
			abort(); /* prep saw no pin on this entry and made one */
		c->pins = p->next;
		p->next = NULL;
		p->e = e;
		e->pin = p;
		kc_list_move_tail(&e->list, &kc->dirty);
		e->state = KC_DIRTY;
		kc->nr_clean--;
		kc->nr_dirty++;
	}
	/* The entry now holds an update the btree does not: keep its seq. */
	tfs_journal_pin_add(kc->j, seq, &e->pin->pin, kc_pin_flush);
	if (seq > e->journal_seq)
		e->journal_seq = seq;
	__atomic_store_n(&e->accessed, 1, __ATOMIC_RELAXED);
	kc->updates++;
	c->nr_cached++;
	took = true;
out:
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_read_unlock();
	return took;
}

void tfs_btree_key_cache_commit_done(struct tfs_btree_key_cache *kc, struct tfs_key_cache_commit *c)
{
	if (kc)
		kc_commit_release(kc, c);
}

/* --- write-back --- */

/*
 * Copies e's key (e dirty, locked), unlocks, and has the engine commit it.
 * Returns the flush's result; the lock is not held on return.
 */
static int kc_flush_entry_unlock(struct tfs_btree_key_cache *kc, struct kc_entry *e)
{
	struct tfs_bkey_buf buf;
	enum tfs_btree_id id = e->id;

	tfs_bkey_copy(&buf, &e->k->k);
	pthread_mutex_unlock(&kc->lock);
	return kc->ops.flush(kc->ops.ctx, id, &buf.k);
}

#define KC_FLUSH_TRIES 16

static int kc_pin_flush(struct tfs_journal *j, struct tfs_journal_entry_pin *pin, u64 seq)
{
	struct kc_pin *p = container_of(pin, struct kc_pin, pin);
	struct tfs_btree_key_cache *kc = p->kc;
	int ret = 0;

	tfs_rcu_thread_register();
	for (unsigned i = 0; i < KC_FLUSH_TRIES; i++) {
		pthread_mutex_lock(&kc->lock);
		/* The pin may have been dropped (flushed, deleted) or reused since. */
		if (!p->e || p->e->state != KC_DIRTY) {
			pthread_mutex_unlock(&kc->lock);
			return 0;
		}
		ret = kc_flush_entry_unlock(kc, p->e);
		if (ret != -TFS_ERR_key_cache_flush_raced)
			return ret;
	}
	/* Updates keep winning: reclaim sees the pin kept and backs off. */
	return 0;
}

int tfs_btree_key_cache_flush_all(struct tfs_btree_key_cache *kc)
{
	u64 tries;
	int ret;

	if (!kc)
		return 0;
	tfs_rcu_thread_register();
	pthread_mutex_lock(&kc->lock);
	tries = kc->nr_dirty * 2 + KC_FLUSH_TRIES;
	pthread_mutex_unlock(&kc->lock);
	while (tries--) {
		struct kc_entry *e;

		pthread_mutex_lock(&kc->lock);
		e = kc_list_first(&kc->dirty);
		if (!e) {
			pthread_mutex_unlock(&kc->lock);
			return 0;
		}
		ret = kc_flush_entry_unlock(kc, e);
		if (ret && ret != -TFS_ERR_key_cache_flush_raced)
			return ret;
	}
	return -TFS_ERR_key_cache_flush_raced;
}

/* --- fsck --- */

unsigned long tfs_btree_key_cache_drop_range(struct tfs_btree_key_cache *kc, enum tfs_btree_id id,
					     struct tfs_bpos min, struct tfs_bpos max,
					     void (*keep)(void *ctx, const struct tfs_bkey *k),
					     void *ctx)
{
	unsigned long evicted = 0;
	struct kc_list *l, *next;

	if (!kc || !tfs_btree_key_cache_wants(kc, id))
		return 0;
	tfs_rcu_thread_register();
	tfs_rcu_read_lock(); /* for cds_lfht_del */
	pthread_mutex_lock(&kc->lock);
	for (l = kc->clean.next; l != &kc->clean; l = next) {
		struct kc_entry *e = container_of(l, struct kc_entry, list);

		next = l->next;
		if (e->id != id || tfs_bpos_cmp(e->pos, min) < 0 || tfs_bpos_cmp(e->pos, max) > 0)
			continue;
		kc_evict_locked(kc, e);
		kc->evicted++;
		evicted++;
	}
	for (l = kc->dirty.next; l != &kc->dirty; l = l->next) {
		struct kc_entry *e = container_of(l, struct kc_entry, list);

		if (e->id == id && tfs_bpos_cmp(e->pos, min) >= 0 && tfs_bpos_cmp(e->pos, max) <= 0)
			keep(ctx, &e->k->k);
	}
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_read_unlock();
	return evicted;
}

/* --- the shrinker --- */

unsigned long tfs_btree_key_cache_scan(struct tfs_btree_key_cache *kc, unsigned long nr_to_scan)
{
	unsigned long scanned = 0, done = 0;
	struct kc_entry *e;

	tfs_rcu_thread_register();
	tfs_rcu_read_lock(); /* for cds_lfht_del */
	pthread_mutex_lock(&kc->lock);
	kc->scans++;

	/* freed, oldest first, up to the first entry still in its grace period. */
	while (scanned < nr_to_scan && (e = kc_list_first(&kc->freed))) {
		if (e->gp_seq > kc->gp_completed)
			break;
		kc_list_del(&e->list);
		kc->nr_freed--;
		kc->freed_bytes -= kc_entry_bytes(e);
		kc->nr_released++;
		kc_entry_release(kc, e);
		scanned++;
		done++;
	}

	/* clean, oldest first: an accessed entry gets a second chance at the back. */
	for (u64 n = kc->nr_clean; n && scanned < nr_to_scan; n--) {
		e = kc_list_first(&kc->clean);
		scanned++;
		if (__atomic_load_n(&e->accessed, __ATOMIC_RELAXED)) {
			__atomic_store_n(&e->accessed, 0, __ATOMIC_RELAXED);
			kc_list_move_tail(&e->list, &kc->clean);
			kc->second_chances++;
			continue;
		}
		kc_evict_locked(kc, e);
		kc->evicted++;
		done++;
	}
	pthread_mutex_unlock(&kc->lock);
	tfs_rcu_read_unlock();
	return done;
}

size_t tfs_btree_key_cache_bytes(struct tfs_btree_key_cache *kc)
{
	return __atomic_load_n(&kc->bytes, __ATOMIC_RELAXED);
}

void tfs_btree_key_cache_stats(struct tfs_btree_key_cache *kc, struct tfs_btree_key_cache_stats *st)
{
	pthread_mutex_lock(&kc->lock);
	*st = (struct tfs_btree_key_cache_stats){
		.nr_keys = kc->nr_clean + kc->nr_dirty,
		.nr_clean = kc->nr_clean,
		.nr_dirty = kc->nr_dirty,
		.nr_freed = kc->nr_freed,
		.lookups = __atomic_load_n(&kc->lookups, __ATOMIC_RELAXED),
		.hits = __atomic_load_n(&kc->hits, __ATOMIC_RELAXED),
		.fills = kc->fills,
		.updates = kc->updates,
		.deletes = kc->deletes,
		.flushes = kc->flushes,
		.flush_races = kc->flush_races,
		.evicted = kc->evicted,
		.second_chances = kc->second_chances,
		.freed = kc->nr_released,
		.reused = kc->reused,
		.allocated = kc->allocated,
		.gp_seq = kc->gp_seq,
		.gp_completed = kc->gp_completed,
		.bytes = __atomic_load_n(&kc->bytes, __ATOMIC_RELAXED),
	};
	pthread_mutex_unlock(&kc->lock);
}

void tfs_btree_key_cache_to_text(struct printbuf *out, struct tfs_btree_key_cache *kc)
{
	struct tfs_btree_key_cache_stats st;

	tfs_btree_key_cache_stats(kc, &st);
	prt_str(out, "key cache:\n");
	printbuf_indent_add(out, 2);
	printbuf_tabstop_push(out, 20);
	prt_printf(out, "nr_keys:\t%llu (%llu clean)\n", (unsigned long long)st.nr_keys,
		   (unsigned long long)st.nr_clean);
	prt_printf(out, "nr_dirty:\t%llu\n", (unsigned long long)st.nr_dirty);
	prt_printf(out, "nr_freed:\t%llu\n", (unsigned long long)st.nr_freed);
	prt_str(out, "memory:\t");
	prt_units_u64(out, st.bytes);
	prt_printf(out, "\nlookups:\t%llu (%llu hits), %llu fills\n",
		   (unsigned long long)st.lookups, (unsigned long long)st.hits,
		   (unsigned long long)st.fills);
	prt_printf(out, "updates:\t%llu, %llu deletes\n", (unsigned long long)st.updates,
		   (unsigned long long)st.deletes);
	prt_printf(out, "flushes:\t%llu (%llu raced an update)\n", (unsigned long long)st.flushes,
		   (unsigned long long)st.flush_races);
	prt_printf(out, "scan:\t%llu evicted, %llu second chances, %llu freed\n",
		   (unsigned long long)st.evicted, (unsigned long long)st.second_chances,
		   (unsigned long long)st.freed);
	prt_printf(out, "entries:\t%llu allocated, %llu reused\n", (unsigned long long)st.allocated,
		   (unsigned long long)st.reused);
	prt_printf(out, "grace periods:\tseq %llu, completed %llu\n", (unsigned long long)st.gp_seq,
		   (unsigned long long)st.gp_completed);
	pthread_mutex_lock(&kc->lock);
	prt_printf(out, "hash buckets:\t%lu\n", kc->ht_buckets);
	pthread_mutex_unlock(&kc->lock);
	printbuf_tabstop_pop(out);
	printbuf_indent_sub(out, 2);
}

/* --- the filesystem's hooks --- */

static int fs_key_cache_flush(void *ctx, enum tfs_btree_id id, const struct tfs_bkey *k)
{
	struct tfs_fs *fs = ctx;
	struct tfs_btree_trans trans;
	int ret;

	tfs_trans_init(&trans, fs);
	ret = tfs_trans_update(&trans, id, k)
		      ?: tfs_trans_commit(&trans, TFS_TRANS_RESERVED | TFS_TRANS_KEY_CACHE_FLUSH,
					  NULL);
	tfs_trans_exit(&trans);
	return ret;
}

/* The node cache's shrinker (fs/btree.h: its count and scan are in 4 KiB pages). */
static unsigned long fs_node_shrinker_count(struct tfs_shrinker *s)
{
	return tfs_btree_cache_count(s->private);
}

static unsigned long fs_node_shrinker_scan(struct tfs_shrinker *s, unsigned long nr_to_scan)
{
	return tfs_btree_cache_scan(s->private, nr_to_scan);
}

static size_t fs_node_shrinker_bytes(struct tfs_shrinker *s)
{
	return tfs_btree_cache_bytes(s->private);
}

int tfs_fs_key_cache_init(struct tfs_fs *fs)
{
	struct tfs_btree_key_cache_ops ops = { .flush = fs_key_cache_flush, .ctx = fs };
	int ret;

	if (fs->read_only || !fs->j)
		return 0;
	struct tfs_shrinkers *shrinkers;
	struct tfs_btree_key_cache *kc = NULL;

	ret = tfs_shrinkers_init(&shrinkers, fs->opts.cache_budget, true);
	if (ret)
		return ret;
	fs->node_shrinker = (struct tfs_shrinker){
		.name = "btree_cache",
		.count = fs_node_shrinker_count,
		.scan = fs_node_shrinker_scan,
		.bytes = fs_node_shrinker_bytes,
		.seeks = 4, /* a node evicted is a disk read to get back */
		.private = fs,
	};
	tfs_shrinker_register(shrinkers, &fs->node_shrinker);
	ret = tfs_btree_key_cache_init(&kc, 1U << TFS_BTREE_inodes, fs->j, shrinkers, &ops);
	/*
	 * Published whole, with release: journal reclaim already runs
	 * checkpoints that read both (fs/btree_cache.c, TSan in errloop_io).
	 */
	__atomic_store_n(&fs->key_cache, kc, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->shrinkers, shrinkers, __ATOMIC_RELEASE);
	return ret;
}

void tfs_fs_key_cache_exit(struct tfs_fs *fs)
{
	tfs_btree_key_cache_exit(fs->key_cache);
	fs->key_cache = NULL;
	if (fs->shrinkers)
		tfs_shrinker_unregister(&fs->node_shrinker);
	tfs_shrinkers_exit(fs->shrinkers);
	fs->shrinkers = NULL;
}

void tfs_fs_key_cache_iter_overlay(struct tfs_fs *fs, enum tfs_btree_id id, struct tfs_bkey_buf *k,
				   bool locked, u64 cookie)
{
	struct tfs_btree *b = &fs->btrees[id];
	struct tfs_btree_path path;
	bool stale;

	if (!tfs_btree_key_cache_wants(fs->key_cache, id) ||
	    tfs_btree_key_cache_overlay(fs->key_cache, id, k, locked, cookie, &b->mod_seq,
					&stale) ||
	    !stale)
		return;
	/*
	 * The btree changed since k was copied and the entry is gone: a flush
	 * may have put a newer key in the leaf, then the entry was evicted.
	 * Under the lock neither can happen: take the entry or the leaf's key.
	 * (Deleted since: k stays, a key of a change concurrent with us.)
	 */
	tfs_six_lock_read(&b->lock);
	if (!tfs_btree_key_cache_overlay(fs->key_cache, id, k, true, 0, NULL, NULL) &&
	    !tfs_btree_walk(b, tfs_bkey_pos(&k->k), 0, &path, false)) {
		struct tfs_bnode *leaf = path.n[0];
		unsigned idx = path.idx[0];

		if (idx < leaf->nr_keys &&
		    tfs_bpos_eq(tfs_bkey_pos(tfs_bnode_key(leaf, idx)), tfs_bkey_pos(&k->k)))
			tfs_bkey_copy(k, tfs_bnode_key(leaf, idx));
	}
	tfs_six_unlock_read(&b->lock);
}

void tfs_fs_thread_init(void)
{
	tfs_rcu_thread_register();
}
