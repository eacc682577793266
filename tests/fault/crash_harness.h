/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_FAULT_CRASH_HARNESS_H
#define TFS_TESTS_FAULT_CRASH_HARNESS_H

/*
 * Recording a workload once and checking every crash image of it (see
 * crash_model.h for what is promised and checked).  Images live in
 * /dev/shm when it exists (flushes cost nothing there).
 *
 * Figures: ch_figures() prints, per workload class and policy,
 *	figure crash workload=CLASS policy=P states=N images=N failed=N
 * (states: cut points checked; images: distinct crash images opened), and
 *	figure crash_fsynced_bytes_lost bytes=N
 *	figure crash_fsck_findings findings=N
 * which scripts/faults-report.sh collects.
 */

#include "crash_model.h"

#define CH_POLICIES 4 /* none prefix random torn: TFS_POWERCUT_* order */
#define CH_CLASSES 8

struct ch_trace {
	struct tfs_fault_trace_entry *e;
	unsigned nr;
};

struct ch_class {
	const char *name;
	u64 states[CH_POLICIES], images[CH_POLICIES], failed[CH_POLICIES];
	u64 workloads;
	/* Passed cuts whose image showed the last state / only older ones (not vacuous). */
	u64 newest, older;
};

struct ch_cache_ent {
	u64 key;
	u64 mask; /* states the image matched; bit 63: fsck or a later step failed */
};

#define CH_CACHE 4096

struct ch {
	struct pt t;
	char tmpl[PT_MAX_DEVS][96], trace_path[PT_MAX_DEVS][96];
	struct cm_state *setup;
	struct cm_run run;
	struct ch_trace tr[PT_MAX_DEVS];
	struct ch_class classes[CH_CLASSES];
	unsigned nr_classes;
	u64 bytes_lost, fsck_findings;
	u8 *tmpl_data[PT_MAX_DEVS];
	bool *tmpl_used[PT_MAX_DEVS];
	u64 tmpl_size[PT_MAX_DEVS];
	struct ch_cache_ent *cache; /* per workload */
	unsigned nr_cache;
	bool quiet_failures;  /* known failures: report once, briefly */
	u64 cut_stride;	      /* check every k-th cut point (1: all) */
	bool rotate_policies; /* one policy per cut point, in turn (else all four) */
	/*
	 * Unflushed writes with these tags (a bit per enum tfs_bio_tag) are
	 * lost at every cut, whatever the policy keeps: e.g. file data lost
	 * while the journal write that commits it survived.
	 */
	u32 drop_tags;
	/* Images whose open dropped / checked a post-flush entry (fs.c). */
	u64 post_flush_dropped, post_flush_verified;
};

static inline u64 ch_mix(u64 x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* True under ASan or TSan: the bounded forms shrink there (3-10x slower). */
static inline bool ch_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return true;
#else
	return false;
#endif
}

/* TSan is the slowest (several threads per filesystem): its bounded forms shrink more. */
static inline bool ch_tsan(void)
{
#if defined(__SANITIZE_THREAD__)
	return true;
#else
	return false;
#endif
}

static inline bool ch_long(void)
{
	return getenv("TFS_LONG") && strcmp(getenv("TFS_LONG"), "0");
}

/* --- templates in memory --- */

#define CH_CHUNK (64 << 10)

/* Keeps member m's template in memory: its size and the chunks that are not zero. */
static inline void ch_template_load(struct ch *h, unsigned m)
{
	int fd = open(h->tmpl[m], O_RDONLY);
	struct stat st;
	static const u8 zero[CH_CHUNK];

	assert_true(fd >= 0 && !fstat(fd, &st));
	h->tmpl_size[m] = (u64)st.st_size;
	h->tmpl_data[m] = malloc(h->tmpl_size[m]);
	h->tmpl_used[m] = calloc(h->tmpl_size[m] / CH_CHUNK + 1, sizeof(bool));
	assert_non_null(h->tmpl_data[m]);
	assert_non_null(h->tmpl_used[m]);
	assert_true(pread(fd, h->tmpl_data[m], h->tmpl_size[m], 0) == (ssize_t)h->tmpl_size[m]);
	close(fd);
	for (u64 c = 0; c * CH_CHUNK < h->tmpl_size[m]; c++)
		h->tmpl_used[m][c] =
			memcmp(h->tmpl_data[m] + c * CH_CHUNK, zero,
			       min_t(u64, CH_CHUNK, h->tmpl_size[m] - c * CH_CHUNK)) != 0;
}

/* Member m's image back to the template (a fresh sparse file); an fd open for writing. */
static inline int ch_restore(struct ch *h, unsigned m)
{
	int fd = open(h->t.path[m], O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)h->tmpl_size[m]), 0);
	for (u64 c = 0; c * CH_CHUNK < h->tmpl_size[m]; c++) {
		u64 len = min_t(u64, CH_CHUNK, h->tmpl_size[m] - c * CH_CHUNK);

		if (h->tmpl_used[m][c])
			assert_true(pwrite(fd, h->tmpl_data[m] + c * CH_CHUNK, len,
					   (off_t)(c * CH_CHUNK)) == (ssize_t)len);
	}
	return fd;
}

/* --- setup: a template with the setup tree --- */

static const struct cm_op ch_setup_ops[] = {
	{ "", CM_mkdir, "d" },	  { "", CM_mkdir, "e" },
	{ "", CM_create, "a" },	  { "", CM_write, "a", NULL, 0, 12000 },
	{ "", CM_create, "d/b" }, { "", CM_write, "d/b", NULL, 0, 3000 },
	{ "", CM_create, "x" },	  { "", CM_write, "x", NULL, 0, 100 },
	{ "", CM_setxattr, "x" },
};

static inline void ch_run_reset(struct ch *h)
{
	h->run.cur = *h->setup;
	h->run.states[0] = *h->setup;
	h->run.nr_states = 1;
	h->run.durable = 0;
	h->run.nr_ops = 0;
}

/* Formats nr members (replicas as given) and builds the template with the setup tree. */
static inline void ch_init(struct ch *h, unsigned nr, unsigned meta_replicas,
			   unsigned data_replicas)
{
	struct pt *t = &h->t;
	int ret;

	memset(h, 0, sizeof(*h));
	h->cut_stride = 1;
	h->setup = calloc(1, sizeof(*h->setup));
	h->run.states = calloc(CM_MAXSTATES, sizeof(struct cm_state));
	h->cache = calloc(CH_CACHE, sizeof(*h->cache));
	assert_non_null(h->setup);
	assert_non_null(h->run.states);
	assert_non_null(h->cache);
	t->g = (struct pt_geometry){ .nr_devs = nr,
				     .size = 16ULL << 20,
				     .metadata_replicas = meta_replicas,
				     .data_replicas = data_replicas };
	snprintf(t->dir, sizeof(t->dir), "%s/tfs-crash-XXXXXX",
		 !access("/dev/shm", W_OK) ? "/dev/shm" : "/tmp");
	scratch_dir_make(t->dir);
	t->nr = nr;
	for (unsigned i = 0; i < nr; i++) {
		char dir[sizeof(t->dir)], path[96];

		/* Built in locals, then copied: -Wrestrict sees h into h. */
		memcpy(dir, t->dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/img%u", dir, i);
		memcpy(t->path[i], path, sizeof(path));
		t->paths[i] = t->path[i];
		snprintf(path, sizeof(path), "%s/tmpl%u", dir, i);
		memcpy(h->tmpl[i], path, sizeof(h->tmpl[i]));
		snprintf(path, sizeof(path), "%s/trace%u", dir, i);
		memcpy(h->trace_path[i], path, sizeof(h->trace_path[i]));
	}
	tfs_fs_opts_default(&t->opts);
	assert_int_equal(pt_format(t), 0);
	t->opts.format = true;
	tfs_faultdev_registry_reset();
	assert_int_equal(tfs_fs_open(t->paths, t->nr, &t->opts, &t->fs), 0);
	assert_int_equal(pt_stop(t), 0);
	t->opts.format = false;
	assert_int_equal(pt_open(t), 0);

	memset(h->setup, 0, sizeof(*h->setup));
	h->setup->i[0].kind = CM_DIR;
	ch_run_reset(h);
	for (unsigned i = 0; i < ARRAY_SIZE(ch_setup_ops); i++) {
		ret = cm_fs_apply(t->fs, &ch_setup_ops[i], 0, i);
		if (ret)
			fail_msg("setup op %u: %s", i, tfs_err_str(ret));
		cm_model_apply(&h->run, &ch_setup_ops[i], 0, i);
	}
	*h->setup = h->run.cur;
	for (unsigned i = 0; i < CM_MAXI; i++)
		h->setup->i[i].touch = h->setup->i[i].dtouch = 0;
	assert_int_equal(tfs_syncfs(t->fs), 0);
	assert_int_equal(pt_stop(t), 0);
	for (unsigned i = 0; i < nr; i++) {
		pt_copy_file(t->path[i], h->tmpl[i]);
		ch_template_load(h, i);
	}
}

static inline void ch_traces_free(struct ch *h)
{
	for (unsigned i = 0; i < PT_MAX_DEVS; i++) {
		tfs_fault_trace_free(h->tr[i].e, h->tr[i].nr);
		h->tr[i] = (struct ch_trace){ 0 };
	}
}

static inline void ch_exit(struct ch *h)
{
	ch_traces_free(h);
	for (unsigned i = 0; i < h->t.nr; i++) {
		free(h->tmpl_data[i]);
		free(h->tmpl_used[i]);
		unlink(h->tmpl[i]);
		unlink(h->trace_path[i]);
	}
	pt_cleanup(&h->t);
	free(h->setup);
	free(h->run.states);
	free(h->cache);
}

static inline struct ch_class *ch_class(struct ch *h, const char *name)
{
	for (unsigned i = 0; i < h->nr_classes; i++)
		if (!strcmp(h->classes[i].name, name))
			return &h->classes[i];
	assert_true(h->nr_classes < CH_CLASSES);
	h->classes[h->nr_classes].name = name;
	return &h->classes[h->nr_classes++];
}

static inline void ch_figures(struct ch *h)
{
	for (unsigned i = 0; i < h->nr_classes; i++)
		for (unsigned p = 0; p < CH_POLICIES; p++)
			printf("figure crash workload=%s policy=%s states=%llu images=%llu "
			       "failed=%llu\n",
			       h->classes[i].name, tfs_powercut_policy_names[p],
			       (unsigned long long)h->classes[i].states[p],
			       (unsigned long long)h->classes[i].images[p],
			       (unsigned long long)h->classes[i].failed[p]);
	printf("figure crash_fsynced_bytes_lost bytes=%llu\n", (unsigned long long)h->bytes_lost);
	printf("figure crash_fsck_findings findings=%llu\n", (unsigned long long)h->fsck_findings);
	fflush(stdout);
}

/*
 * CH_GROUP_FIXTURES(h) defines ch_group_setup() and ch_group_teardown(),
 * the cmocka group fixtures of a file whose tests share the struct ch h:
 * one member, unreplicated, set up once; its figures printed at the end.
 */
#define CH_GROUP_FIXTURES(h)                       \
	static int ch_group_setup(void **state)    \
	{                                          \
		(void)state;                       \
		ch_init(&(h), 1, 1, 1);            \
		return 0;                          \
	}                                          \
                                                   \
	static int ch_group_teardown(void **state) \
	{                                          \
		(void)state;                       \
		ch_figures(&(h));                  \
		ch_exit(&(h));                     \
		return 0;                          \
	}

/* --- recording --- */

/* A workload's name: its operations joined by '+'. */
static inline void ch_name(char *buf, size_t size, const unsigned *ops, unsigned nr)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < nr && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "+" : "", cm_ops[ops[i]].name);
}

/*
 * Runs ops[0..nr) once on a fresh copy of the template, every member
 * tracing; the model's states in h->run, the traces in h->tr.  Operations
 * that do not apply are skipped.  Returns the operations run.
 */
static inline unsigned ch_record(struct ch *h, const unsigned *ops, unsigned nr)
{
	struct pt *t = &h->t;
	char name[512];
	unsigned step = 0;

	ch_traces_free(h);
	ch_run_reset(h);
	for (unsigned i = 0; i < t->nr; i++) {
		char rule[sizeof(t->rule[i])];

		close(ch_restore(h, i));
		snprintf(rule, sizeof(rule), "tracefile=%s", h->trace_path[i]);
		memcpy(t->rule[i], rule, sizeof(rule)); /* not h into h: -Wrestrict */
	}
	t->trace = true;
	assert_int_equal(pt_open(t), 0);
	for (unsigned i = 0; i < nr; i++) {
		const struct cm_op *op = &cm_ops[ops[i]];
		int ret;

		if (!cm_valid(&h->run.cur, op)) {
			h->run.skipped++;
			continue;
		}
		assert_true(step < CM_MAXOPS);
		ret = cm_fs_apply(t->fs, op, step + 1, ops[i]);
		if (ret) {
			ch_name(name, sizeof(name), ops, nr);
			fail_msg("workload %s: %s failed: %s", name, op->name, tfs_err_str(ret));
		}
		cm_model_apply(&h->run, op, step + 1, ops[i]);
		h->run.states[h->run.nr_states++] = h->run.cur;
		h->run.dur_after[step] = h->run.durable;
		char label[16];

		snprintf(label, sizeof(label), "e%u", step);
		for (unsigned m = 0; m < t->nr; m++)
			tfs_faultdev_mark(pt_bdev(t, m), label);
		step++;
	}
	h->run.nr_ops = step;
	assert_int_equal(pt_stop(t), 0);
	t->trace = false;
	for (unsigned i = 0; i < t->nr; i++) {
		t->rule[i][0] = 0;
		assert_int_equal(tfs_fault_trace_load(h->trace_path[i], &h->tr[i].e, &h->tr[i].nr),
				 0);
		unlink(h->trace_path[i]);
	}
	/* Nothing else may stay in the registry: the checks open without tracing. */
	tfs_faultdev_registry_reset();
	return step;
}

/* The index of the operation named name[0..len) in cm_ops, or -1. */
static inline int ch_op_index(const char *name, size_t len)
{
	for (unsigned i = 0; i < CM_NR_OPS; i++)
		if (strlen(cm_ops[i].name) == len && !memcmp(cm_ops[i].name, name, len))
			return (int)i;
	return -1;
}

/* Parses "op+op+..." into ops; the count, or 0 if a name is unknown. */
static inline unsigned ch_parse_workload(const char *s, unsigned *ops, unsigned max)
{
	unsigned n = 0;

	while (*s && n < max) {
		const char *plus = strchr(s, '+');
		size_t len = plus ? (size_t)(plus - s) : strlen(s);
		int i = ch_op_index(s, len);

		if (i < 0)
			return 0;
		ops[n++] = (unsigned)i;
		s += len + (plus != NULL);
	}
	return n;
}

/* --- crash images --- */

static inline bool ch_is_cut_point(const struct tfs_fault_trace_entry *e)
{
	return !e->mark &&
	       (e->op == TFS_OP_write || e->op == TFS_OP_discard || e->op == TFS_OP_flush);
}

static inline bool ch_is_write(const struct tfs_fault_trace_entry *e)
{
	return !e->mark && (e->op == TFS_OP_write || e->op == TFS_OP_discard);
}

#define CH_SECTOR 512

/*
 * Writes member m's crash image for a cut at stamp `cut` (every entry with
 * a smaller stamp ran) under policy, choices from rng; returns its key
 * (which entries it holds, torn sectors included).
 */
static inline u64 ch_build(struct ch *h, unsigned m, u64 cut, unsigned policy, u64 *rng,
			   bool write_it)
{
	const struct ch_trace *tr = &h->tr[m];
	unsigned *unfl = calloc(tr->nr + 1, sizeof(unsigned));
	bool *keep = calloc(tr->nr + 1, sizeof(bool));
	unsigned n = 0, end = 0;
	int torn = -1;
	u64 torn_mask = 0, key = ch_mix(m + 1);

	assert_non_null(unfl);
	assert_non_null(keep);
	/* The volatile cache at the cut (as lib/faultdev.c keeps it). */
	for (; end < tr->nr && tr->e[end].stamp < cut; end++) {
		const struct tfs_fault_trace_entry *e = &tr->e[end];

		if (e->mark)
			continue;
		if (ch_is_write(e)) {
			if (e->op == TFS_OP_write && (e->flags & TFS_BIO_PREFLUSH))
				n = 0;
			if (!(e->op == TFS_OP_write && (e->flags & TFS_BIO_FUA) && !e->result))
				unfl[n++] = end;
			else
				keep[end] = true;
		} else if (e->op == TFS_OP_flush && !e->result) {
			n = 0;
		}
	}
	/* Before the cache: durable. */
	{
		unsigned first = n ? unfl[0] : end;

		for (unsigned i = 0; i < first; i++)
			keep[i] = true;
		for (unsigned i = first; i < end; i++)
			if (ch_is_write(&tr->e[i]) && tr->e[i].op == TFS_OP_write &&
			    (tr->e[i].flags & TFS_BIO_FUA) && !tr->e[i].result)
				keep[i] = true;
	}
	switch (policy) {
	case TFS_POWERCUT_none:
		break;
	case TFS_POWERCUT_prefix: {
		u64 k = (*rng = ch_mix(*rng)) % (n + 1);

		for (unsigned i = 0; i < k; i++)
			keep[unfl[i]] = true;
		break;
	}
	case TFS_POWERCUT_random:
		for (unsigned i = 0; i < n; i++)
			keep[unfl[i]] = (*rng = ch_mix(*rng)) & 1;
		break;
	case TFS_POWERCUT_torn:
		for (unsigned i = 0; i < n; i++)
			keep[unfl[i]] = true;
		if (n) {
			const struct tfs_fault_trace_entry *e = &tr->e[unfl[n - 1]];
			u64 s0 = e->offset / CH_SECTOR;
			u64 ns = (e->offset + e->len + CH_SECTOR - 1) / CH_SECTOR - s0;

			torn = (int)unfl[n - 1];
			keep[torn] = false;
			for (u64 s = 0; s < ns && s < 64; s++)
				torn_mask |= ((*rng = ch_mix(*rng)) & 1) << s;
			/* Torn means not whole: at least one sector stays old. */
			torn_mask &= ~(1ULL << ((*rng = ch_mix(*rng)) % min_t(u64, ns, 64)));
		}
		break;
	}
	for (unsigned i = 0; i < n; i++)
		if (h->drop_tags & (1u << tr->e[unfl[i]].tag)) {
			keep[unfl[i]] = false;
			if ((int)unfl[i] == torn)
				torn = -1;
		}
	/* The image is the kept writes: two cuts keeping the same ones are one image. */
	for (unsigned i = 0; i < end; i++)
		if (ch_is_write(&tr->e[i]) && keep[i])
			key = ch_mix(key ^ i);
	key = ch_mix(key ^ ((u64)torn << 32) ^ torn_mask);

	if (write_it) {
		int fd;

		fd = ch_restore(h, m);
		for (unsigned i = 0; i < end; i++) {
			const struct tfs_fault_trace_entry *e = &tr->e[i];

			if (!ch_is_write(e) || (!keep[i] && (int)i != torn))
				continue;
			for (unsigned p = 0; p < e->nr_pieces; p++) {
				const struct tfs_fault_trace_piece *pc = &e->pieces[p];
				static const u8 zero[CH_SECTOR];

				for (u64 off = pc->offset; off < pc->offset + pc->len;) {
					u64 s = off / CH_SECTOR;
					u64 next = min_t(u64, (s + 1) * CH_SECTOR,
							 pc->offset + pc->len);
					u64 si = s - e->offset / CH_SECTOR;
					const u8 *src =
						pc->data ? (const u8 *)pc->data + (off - pc->offset)
							 : zero;

					if ((int)i != torn || (si < 64 && (torn_mask >> si) & 1))
						assert_true(
							pwrite(fd, src, next - off, (off_t)off) ==
							(ssize_t)(next - off));
					off = next;
				}
			}
		}
		close(fd);
	}
	free(unfl);
	free(keep);
	return key;
}

/* Every member's image for a cut at stamp `cut`; the images' key. */
static inline u64 ch_build_all(struct ch *h, u64 cut, unsigned policy, u64 seed, bool write_it)
{
	u64 key = 0;

	for (unsigned m = 0; m < h->t.nr; m++) {
		/* Each member's cache kept what it kept: its own choices (a policy each in check 6). */
		u64 rng = ch_mix(seed ^ (m * 0x1234567ULL));
		unsigned p =
			policy < CH_POLICIES ? policy : (unsigned)(ch_mix(seed + m) % CH_POLICIES);

		key = ch_mix(key ^ ch_build(h, m, cut, p, &rng, write_it));
	}
	return key;
}

/* The states a cut at stamp `cut` may show: [*lo, *hi]. */
static inline void ch_range(struct ch *h, u64 cut, unsigned *lo, unsigned *hi)
{
	int last = -1; /* the last operation acknowledged before the cut */

	for (unsigned m = 0; m < h->t.nr; m++)
		for (unsigned i = 0; i < h->tr[m].nr && h->tr[m].e[i].stamp < cut; i++) {
			const char *mk = h->tr[m].e[i].mark;

			if (mk && mk[0] == 'e')
				last = max_t(int, last, atoi(mk + 1));
		}
	*lo = last < 0 ? 0 : h->run.dur_after[last];
	/* State last + 1 is after operation last; one more may be in progress. */
	*hi = min_t(unsigned, (unsigned)(last + 2), h->run.nr_states - 1);
	/* No cut: the clean stop made everything durable. */
	if (cut == UINT64_MAX)
		*lo = *hi = h->run.nr_states - 1;
}

/* --- checking one image --- */

#define CH_BAD (1ULL << 63)

static inline u64 ch_states_mask(struct ch *h)
{
	struct cm_cmp c;
	u64 mask = 0;

	for (unsigned j = 0; j < h->run.nr_states; j++)
		if (cm_matches(h->t.fs, &h->run.states[j], &c))
			mask |= 1ULL << j;
	return mask;
}

static inline bool ch_fsck_clean(struct ch *h, const char *wname, const char *where,
				 const char *when)
{
	unsigned found = pt_fsck(h->t.fs);

	h->fsck_findings += found;
	if (found)
		fprintf(stderr, "%s %s: fsck %s: %u findings\n", wname, where, when, found);
	return !found;
}

/*
 * Checks the crash image: opened read-only (journal replayed in memory,
 * what `tinyfs fsck -n` sees), the states it matches and fsck; then opened
 * for real (replayed onto the disk): the same states, fsck, a short
 * workload, fsck.  Returns the states it matched, CH_BAD if any step
 * failed.
 */
static inline u64 ch_check_image(struct ch *h, const char *wname, unsigned lo, unsigned hi,
				 const char *where)
{
	struct pt *t = &h->t;
	u64 mask = 0, mask2 = 0;
	struct tfs_file *f;
	int ret;

	t->opts.read_only = true;
	ret = pt_open(t);
	t->opts.read_only = false;
	if (ret) {
		fprintf(stderr, "%s %s: the crash image does not open\n", wname, where);
		return CH_BAD;
	}
	mask = ch_states_mask(h);
	h->post_flush_dropped += t->fs->post_flush_dropped != 0;
	h->post_flush_verified += t->fs->post_flush_verified != 0;
	if (!(mask & ((2ULL << hi) - (1ULL << lo)))) {
		struct cm_cmp c;
		u64 lost = cm_bytes_lost(t->fs, h->run.states, lo, hi);

		cm_matches(t->fs, &h->run.states[lo], &c);
		h->bytes_lost += lost;
		if (!h->quiet_failures)
			fprintf(stderr,
				"%s %s: no state from %u to %u matches (matched mask %#llx); vs "
				"state %u: %s; acknowledged bytes lost %llu\n",
				wname, where, lo, hi, (unsigned long long)mask, lo, c.why,
				(unsigned long long)lost);
	}
	if (!ch_fsck_clean(h, wname, where, "after recovery (read-only)"))
		mask |= CH_BAD;
	pt_stop(t);
	if (pt_open(t)) {
		fprintf(stderr, "%s %s: the read-write open failed\n", wname, where);
		return mask | CH_BAD;
	}
	mask2 = ch_states_mask(h);
	if (mask2 != (mask & ~CH_BAD)) {
		fprintf(stderr, "%s %s: opened again, another state (mask %#llx, was %#llx)\n",
			wname, where, (unsigned long long)mask2, (unsigned long long)mask);
		mask |= CH_BAD;
	}
	if (!ch_fsck_clean(h, wname, where, "after recovery"))
		mask |= CH_BAD;
	/* Life goes on: a short workload, then fsck. */
	ret = pt_create(t, TFS_ROOT_INO, "zz", &f);
	if (!ret) {
		ret = tfs_write(t->fs, f, "after", 5, 0) == 5 ? 0 : -EIO;
		ret = ret ?: tfs_fsync(t->fs, f, false);
		ret = tfs_release(t->fs, f) ?: ret;
	}
	ret = ret ?: pt_mkdir(t, TFS_ROOT_INO, "zd", NULL);
	ret = ret
		      ?: tfs_rename(t->fs, TFS_ROOT_INO, "zz", 2, pt_ino(t, TFS_ROOT_INO, "zd"),
				    "zz", 2, 0);
	ret = ret ?: tfs_syncfs(t->fs);
	if (ret) {
		fprintf(stderr, "%s %s: the workload after recovery failed: %s\n", wname, where,
			tfs_err_str(ret));
		mask |= CH_BAD;
	}
	if (!ch_fsck_clean(h, wname, where, "after the workload after recovery"))
		mask |= CH_BAD;
	if (pt_stop(t)) {
		fprintf(stderr, "%s %s: the last stop failed\n", wname, where);
		mask |= CH_BAD;
	}
	return mask;
}

/* The cut points of the recorded traces: every write, discard and flush's stamp, sorted. */
static inline unsigned ch_cut_points(struct ch *h, u64 **ret)
{
	unsigned n = 0, size = 0;
	u64 *v = NULL;

	for (unsigned m = 0; m < h->t.nr; m++)
		size += h->tr[m].nr;
	v = calloc(size + 1, sizeof(u64));
	assert_non_null(v);
	for (unsigned m = 0; m < h->t.nr; m++)
		for (unsigned i = 0; i < h->tr[m].nr; i++)
			if (ch_is_cut_point(&h->tr[m].e[i]))
				v[n++] = h->tr[m].e[i].stamp;
	/* Insertion sort: merging a few members' sorted traces. */
	for (unsigned i = 1; i < n; i++)
		for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
			u64 x = v[j];

			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	v[n++] = UINT64_MAX; /* no cut: everything, after the clean stop */
	*ret = v;
	return n;
}

/*
 * Checks a cut at stamp `cut` under policy (CH_POLICIES: a seeded policy
 * per member); counts it in class cl.  Returns true if it passed.
 */
static inline bool ch_check_cut(struct ch *h, struct ch_class *cl, const char *wname, u64 cut,
				unsigned policy, u64 seed)
{
	unsigned lo, hi, pi = policy < CH_POLICIES ? policy : (unsigned)(seed % CH_POLICIES);
	u64 key = ch_build_all(h, cut, policy, seed, false), mask;
	struct ch_cache_ent *ce = NULL;
	char where[128];
	bool ok;

	ch_range(h, cut, &lo, &hi);
	cl->states[pi]++;
	for (unsigned i = 0; i < h->nr_cache; i++)
		if (h->cache[i].key == key)
			ce = &h->cache[i];
	snprintf(where, sizeof(where), "cut at stamp %llu, policy %s, seed %llu",
		 (unsigned long long)cut,
		 policy < CH_POLICIES ? tfs_powercut_policy_names[policy] : "mixed",
		 (unsigned long long)seed);
	if (ce) {
		mask = ce->mask;
	} else {
		ch_build_all(h, cut, policy, seed, true);
		mask = ch_check_image(h, wname, lo, hi, where);
		cl->images[pi]++;
		if (h->nr_cache < CH_CACHE) {
			h->cache[h->nr_cache++] = (struct ch_cache_ent){ key, mask };
		}
	}
	ok = !(mask & CH_BAD) && (mask & ((2ULL << hi) - (1ULL << lo)));
	if (!ok && ce && !h->quiet_failures)
		fprintf(stderr, "%s %s: same image as before: states %#llx, may show %u to %u\n",
			wname, where, (unsigned long long)mask, lo, hi);
	cl->failed[pi] += !ok;
	if (ok && (mask >> (h->run.nr_states - 1)) & 1)
		cl->newest++;
	else if (ok)
		cl->older++;
	return ok;
}

/*
 * Records ops[0..nr) once and checks every cut point (every stride-th
 * with h->cut_stride) under every policy (or one per cut, in turn, with
 * h->rotate_policies).  Returns the failed cuts.
 */
static inline u64 ch_workload(struct ch *h, const char *class, const unsigned *ops, unsigned nr,
			      u64 seed)
{
	struct ch_class *cl = ch_class(h, class);
	char name[512];
	u64 *cuts, failed = 0;
	unsigned nr_cuts;

	ch_name(name, sizeof(name), ops, nr);
	ch_record(h, ops, nr);
	cl->workloads++;
	h->nr_cache = 0;
	nr_cuts = ch_cut_points(h, &cuts);
	for (unsigned c = 0; c < nr_cuts; c++) {
		/* The no-cut image (the last) is always checked. */
		if (c % h->cut_stride && c != nr_cuts - 1)
			continue;
		for (unsigned p = 0; p < CH_POLICIES; p++) {
			if (h->rotate_policies && p != (c + seed) % CH_POLICIES)
				continue;
			failed += !ch_check_cut(h, cl, name, cuts[c], p,
						ch_mix(seed ^ ch_mix(c * 4 + p)));
		}
	}
	free(cuts);
	return failed;
}

#endif /* TFS_TESTS_FAULT_CRASH_HARNESS_H */
