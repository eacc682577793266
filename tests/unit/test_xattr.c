// SPDX-License-Identifier: GPL-2.0
/*
 * Tests for fs/xattr.c: namespaces, CREATE/REPLACE, sizes up to what one
 * journal entry carries (values split over chunks), listing, removal with
 * whiteouts, and the VFS limits; all again with every name colliding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "posix_test.h"

static struct pt T;
static tfs_ino_t F;

static u64 collide_hash(u64 seed, const void *name, size_t len)
{
	return 12345;
}

static int setup_with(tfs_name_hash_fn hash)
{
	struct pt_geometry g = { 0 };
	struct tfs_stat st;
	int ret = pt_mkfs(&T, &g);

	if (ret)
		return ret;
	tfs_posix_set_name_hash(T.fs, hash);
	ret = pt_mknod(&T, 1, "f", S_IFREG | 0644, &st);
	F = st.ino;
	return ret;
}

static int setup(void **state)
{
	return setup_with(NULL);
}

static int setup_collide(void **state)
{
	return setup_with(collide_hash);
}

static int teardown(void **state)
{
	pt_cleanup(&T);
	return 0;
}

static void reopen(void)
{
	bool collide = tfs_posix(T.fs)->name_hash == collide_hash;

	assert_int_equal(pt_reopen(&T), 0);
	if (collide)
		tfs_posix_set_name_hash(T.fs, collide_hash);
}

static void test_basic(void **state)
{
	char buf[256];

	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.a", "hello", 5, 0), 0);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", NULL, 0), 5);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", buf, 4), -ERANGE);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.a", "x", 1, TFS_XATTR_CREATE), -EEXIST);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.b", "x", 1, TFS_XATTR_REPLACE), -ENODATA);
	assert_int_equal(
		tfs_setxattr(T.fs, F, "user.a", "x", 1, TFS_XATTR_CREATE | TFS_XATTR_REPLACE),
		-EEXIST);
	assert_int_equal(
		tfs_setxattr(T.fs, F, "user.b", "x", 1, TFS_XATTR_CREATE | TFS_XATTR_REPLACE),
		-ENODATA);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.a", "bye", 3, TFS_XATTR_REPLACE), 0);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.empty", "", 0, TFS_XATTR_CREATE), 0);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.empty", buf, sizeof(buf)), 0);
	/* The namespaces: same suffix, different attributes. */
	assert_int_equal(tfs_setxattr(T.fs, F, "trusted.a", "T", 1, 0), 0);
	assert_int_equal(tfs_setxattr(T.fs, F, "security.a", "S", 1, 0), 0);
	assert_int_equal(tfs_setxattr(T.fs, F, "system.posix_acl_access", "\2\0\0\0", 4, 0), 0);
	assert_int_equal(tfs_setxattr(T.fs, F, "system.posix_acl_default", "\2\0\0\0", 4, 0), 0);
	assert_int_equal(tfs_getxattr(T.fs, F, "trusted.a", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'T');
	/* Bad names. */
	assert_int_equal(tfs_setxattr(T.fs, F, "system.other", "x", 1, 0), -EOPNOTSUPP);
	assert_int_equal(tfs_setxattr(T.fs, F, "other.a", "x", 1, 0), -EOPNOTSUPP);
	assert_int_equal(tfs_setxattr(T.fs, F, "user.", "x", 1, 0), -EINVAL);
	assert_int_equal(tfs_setxattr(T.fs, F, "", "x", 1, 0), -ERANGE);
	assert_int_equal(tfs_getxattr(T.fs, F, "user", buf, 1), -EOPNOTSUPP);
	memset(buf, 'n', sizeof(buf));
	memcpy(buf, "user.", 5);
	buf[255] = 0;
	assert_int_equal(tfs_setxattr(T.fs, F, buf, "x", 1, 0), 0); /* 255 bytes */
	buf[255] = 'n';
	buf[sizeof(buf) - 1] = 0;
	buf[256 - 1] = 0;
	{
		char longer[300];

		memset(longer, 'n', sizeof(longer));
		memcpy(longer, "user.", 5);
		longer[256] = 0;
		assert_int_equal(tfs_setxattr(T.fs, F, longer, "x", 1, 0), -ERANGE);
	}
	assert_int_equal(tfs_setxattr(T.fs, F, "user.f", "x", 1, 4), -EINVAL);
	assert_int_equal(tfs_setxattr(T.fs, 987654, "user.f", "x", 1, 0), -ENOENT);

	/* List. */
	char list[1024];
	ssize_t n = tfs_listxattr(T.fs, F, NULL, 0);

	assert_true(n > 0);
	assert_int_equal(tfs_listxattr(T.fs, F, list, (size_t)n - 1), -ERANGE);
	assert_int_equal(tfs_listxattr(T.fs, F, list, sizeof(list)), n);
	unsigned found = 0;

	for (char *p = list; p < list + n; p += strlen(p) + 1)
		found |= !strcmp(p, "user.a") << 0 | !strcmp(p, "user.empty") << 1 |
			 !strcmp(p, "trusted.a") << 2 | !strcmp(p, "security.a") << 3 |
			 !strcmp(p, "system.posix_acl_access") << 4 |
			 !strcmp(p, "system.posix_acl_default") << 5;
	assert_int_equal(found, 0x3f);

	reopen();
	assert_int_equal(tfs_listxattr(T.fs, F, list, sizeof(list)), n);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "bye", 3);
	assert_int_equal(tfs_removexattr(T.fs, F, "user.a"), 0);
	assert_int_equal(tfs_removexattr(T.fs, F, "user.a"), -ENODATA);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(tfs_getxattr(T.fs, F, "security.a", buf, sizeof(buf)), 1);
	/* On a directory and a symlink too. */
	assert_int_equal(tfs_setxattr(T.fs, 1, "user.dir", "d", 1, 0), 0);
	assert_int_equal(tfs_getxattr(T.fs, 1, "user.dir", buf, sizeof(buf)), 1);
}

/* An ACL entry in the xattr format (little-endian tag, perm, id). */
static size_t acl_entry(u8 *p, unsigned tag, unsigned perm, u32 id)
{
	p[0] = (u8)tag;
	p[1] = (u8)(tag >> 8);
	p[2] = (u8)perm;
	p[3] = 0;
	p[4] = (u8)id;
	p[5] = (u8)(id >> 8);
	p[6] = (u8)(id >> 16);
	p[7] = (u8)(id >> 24);
	return 8;
}

static u32 perm_of(tfs_ino_t ino)
{
	struct tfs_stat st;

	assert_int_equal(tfs_getattr(T.fs, ino, &st), 0);
	return st.mode & 07777;
}

/*
 * Setting an access ACL sets the permission bits, as on ext4: `cp -a`
 * creates a file 0600 and gives it the source's mode as a minimal ACL
 * (the mode was left 0600 before).  A minimal ACL is not stored; one
 * with named entries is, and the group bits show its mask.
 */
static void test_acl_mode(void **state)
{
	u8 acl[64] = { 2, 0, 0, 0 }, buf[64];
	struct tfs_stat st;
	size_t n = 4;

	assert_int_equal(pt_mknod(&T, 1, "g", S_IFREG | 04600, &st), 0);
	n += acl_entry(acl + n, 0x01, 6, ~0U); /* user::rw- */
	n += acl_entry(acl + n, 0x04, 4, ~0U); /* group::r-- */
	n += acl_entry(acl + n, 0x20, 4, ~0U); /* other::r-- */
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n, 0), 0);
	assert_int_equal(perm_of(st.ino), 04644); /* set-ID bits stay */
	assert_int_equal(tfs_getxattr(T.fs, st.ino, "system.posix_acl_access", buf, sizeof(buf)),
			 -ENODATA);
	assert_int_equal(tfs_listxattr(T.fs, st.ino, (char *)buf, sizeof(buf)), 0);

	/* Named entries: stored, group bits from the mask. */
	n = 4;
	n += acl_entry(acl + n, 0x01, 7, ~0U);
	n += acl_entry(acl + n, 0x02, 7, 1000); /* user:1000:rwx */
	n += acl_entry(acl + n, 0x04, 4, ~0U);
	n += acl_entry(acl + n, 0x10, 5, ~0U); /* mask::r-x */
	n += acl_entry(acl + n, 0x20, 0, ~0U);
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n, 0), 0);
	assert_int_equal(perm_of(st.ino), 04750);
	assert_int_equal(tfs_getxattr(T.fs, st.ino, "system.posix_acl_access", buf, sizeof(buf)),
			 (ssize_t)n);
	assert_memory_equal(buf, acl, n);
	reopen();
	assert_int_equal(perm_of(st.ino), 04750);

	/* Back to a minimal one: the stored ACL goes. */
	n = 4;
	n += acl_entry(acl + n, 0x01, 6, ~0U);
	n += acl_entry(acl + n, 0x04, 0, ~0U);
	n += acl_entry(acl + n, 0x20, 0, ~0U);
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n, 0), 0);
	assert_int_equal(perm_of(st.ino), 04600);
	assert_int_equal(tfs_getxattr(T.fs, st.ino, "system.posix_acl_access", NULL, 0), -ENODATA);
	reopen();
	assert_int_equal(perm_of(st.ino), 04600);
	assert_int_equal(tfs_getxattr(T.fs, st.ino, "system.posix_acl_access", NULL, 0), -ENODATA);

	/* Not an ACL: refused, nothing changed. */
	acl[0] = 1;
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n, 0), -EINVAL);
	acl[0] = 2;
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n - 1, 0),
			 -EINVAL);
	n = 4;
	n += acl_entry(acl + n, 0x01, 6, ~0U);
	n += acl_entry(acl + n, 0x02, 6, 1000); /* a named entry without a mask */
	n += acl_entry(acl + n, 0x04, 0, ~0U);
	n += acl_entry(acl + n, 0x20, 0, ~0U);
	assert_int_equal(tfs_setxattr(T.fs, st.ino, "system.posix_acl_access", acl, n, 0), -EINVAL);
	assert_int_equal(perm_of(st.ino), 04600);
}

/*
 * tfs_setxattr_as() by a caller outside the file's group (uid and gid
 * 1000; the files are root's) without CAP_FSETID: the ACL's permission
 * bits go in without S_ISGID, stored ACL or not, file or directory, and
 * so after a restart; other names, tfs_setxattr() (no caller), an ACL
 * that is not set keep it, and so does a caller in the group (its gid or
 * a supplementary one) or with CAP_FSETID.  The group is the file's at
 * the commit: a chown just before counts.
 */
static size_t acl_of(u8 *acl, unsigned u, unsigned n, unsigned g, int m, unsigned o);

static const struct tfs_ctx outsider = { .uid = 1000, .gid = 1000, .pid = 1 };

/* A caller's supplementary groups and CAP_FSETID, for tfs_ctx.keeps_sgid(). */
struct caller_groups {
	const u32 *groups;
	unsigned nr;
	bool fsetid;
};

static bool caller_keeps_sgid(void *arg, u32 gid)
{
	const struct caller_groups *c = arg;

	for (unsigned i = 0; i < c->nr; i++)
		if (c->groups[i] == gid)
			return true;
	return c->fsetid;
}

/* chmod ino to mode and, when gid >= 0, chown it to that group: one setattr. */
static int chmod_chgrp(tfs_ino_t ino, u32 mode, s64 gid)
{
	struct tfs_stat st;

	return tfs_setattr(
		T.fs, ino, NULL,
		&(struct tfs_setattr){ .valid = TFS_SETATTR_MODE | (gid >= 0 ? TFS_SETATTR_GID : 0),
				       .mode = mode,
				       .gid = gid >= 0 ? (u32)gid : 0 },
		&st);
}

static void test_acl_kill_sgid(void **state)
{
	u8 acl[64] = { 2, 0, 0, 0 };
	struct tfs_stat f, d;
	size_t n = 4;
	const char *a = "system.posix_acl_access";

	assert_int_equal(pt_mknod(&T, 1, "sgid", S_IFREG | 06775, &f), 0);
	assert_int_equal(pt_mkdir(&T, 1, "sgid-dir", &d), 0);
	assert_int_equal(chmod_chgrp(d.ino, 02775, -1), 0);
	n += acl_entry(acl + n, 0x01, 7, ~0U);
	n += acl_entry(acl + n, 0x04, 5, ~0U);
	n += acl_entry(acl + n, 0x20, 0, ~0U);
	/* the outsider on a user xattr, or no caller: S_ISGID stays */
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, "user.x", "1", 1, 0), 0);
	assert_int_equal(perm_of(f.ino), 06775);
	assert_int_equal(tfs_setxattr(T.fs, f.ino, a, acl, n, 0), 0);
	assert_int_equal(perm_of(f.ino), 06750);
	/* a minimal ACL (not stored) */
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, a, acl, n, 0), 0);
	assert_int_equal(perm_of(f.ino), 04750);
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, d.ino, a, acl, n, 0), 0);
	assert_int_equal(perm_of(d.ino), 0750);
	/* a stored one (a named user) */
	assert_int_equal(tfs_setxattr(T.fs, f.ino, a, acl, n, 0), 0);
	assert_int_equal(chmod_chgrp(f.ino, 02770, -1), 0);
	n = acl_of(acl, 7, 7, 5, 5, 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, a, acl, n, TFS_XATTR_CREATE), 0);
	assert_int_equal(perm_of(f.ino), 0750);
	reopen();
	assert_int_equal(perm_of(f.ino), 0750);
	assert_int_equal(perm_of(d.ino), 0750);
	/* an ACL refused changes nothing */
	assert_int_equal(chmod_chgrp(f.ino, 02770, -1), 0);
	acl[0] = 1;
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, a, acl, n, 0), -EINVAL);
	assert_int_equal(perm_of(f.ino), 02770);
	acl[0] = 2;

	/* in the group (its gid, a supplementary group) or CAP_FSETID: kept */
	static const u32 sup[] = { 7, 0 };
	struct caller_groups in_sup = { sup, 2 }, fsetid = { .fsetid = true }, other = { sup, 1 };
	const struct tfs_ctx keepers[] = {
		{ .uid = 1000, .gid = 0 },
		{ .uid = 1000,
		  .gid = 1000,
		  .keeps_sgid = caller_keeps_sgid,
		  .keeps_sgid_arg = &in_sup },
		{ .uid = 1000,
		  .gid = 1000,
		  .keeps_sgid = caller_keeps_sgid,
		  .keeps_sgid_arg = &fsetid },
	};

	for (unsigned i = 0; i < ARRAY_SIZE(keepers); i++) {
		assert_int_equal(chmod_chgrp(f.ino, 02770, -1), 0);
		assert_int_equal(tfs_setxattr_as(T.fs, &keepers[i], f.ino, a, acl, n, 0), 0);
		assert_int_equal(perm_of(f.ino), 02750);
	}
	/* a supplementary group other than the file's: cleared */
	assert_int_equal(tfs_setxattr_as(T.fs,
					 &(struct tfs_ctx){ .uid = 1000,
							    .gid = 1000,
							    .keeps_sgid = caller_keeps_sgid,
							    .keeps_sgid_arg = &other },
					 f.ino, a, acl, n, 0),
			 0);
	assert_int_equal(perm_of(f.ino), 0750);

	/* The file's group when the ACL goes in decides: a chown in between counts. */
	assert_int_equal(chmod_chgrp(f.ino, 02770, 1000), 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, a, acl, n, 0), 0);
	assert_int_equal(perm_of(f.ino), 02750);
	assert_int_equal(chmod_chgrp(f.ino, 02770, 5), 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &outsider, f.ino, a, acl, n, 0), 0);
	assert_int_equal(perm_of(f.ino), 0750);
}

/*
 * A caller given as a keeps_sgid() callback (the daemon's, which reads
 * /proc) is asked only where its groups decide: a file with S_ISGID whose
 * group is not the caller's fsgid; and its answer decides there.
 */
struct keeps_sgid_ask {
	unsigned asked;
	u32 gid;
	bool answer;
};

static bool keeps_sgid_cb(void *arg, u32 gid)
{
	struct keeps_sgid_ask *a = arg;

	a->asked++;
	a->gid = gid;
	return a->answer;
}

static void test_acl_keeps_sgid_asked_lazily(void **state)
{
	u8 acl[64] = { 2, 0, 0, 0 };
	struct keeps_sgid_ask ask = { 0 };
	struct tfs_ctx caller = { .uid = 1000, .gid = 1000, .pid = 1 };
	struct tfs_stat f;
	const char *a = "system.posix_acl_access";
	size_t n = acl_of(acl, 7, 0, 5, -1, 0);

	caller.keeps_sgid = keeps_sgid_cb;
	caller.keeps_sgid_arg = &ask;
	assert_int_equal(pt_mknod(&T, 1, "lazy", S_IFREG | 0664, &f), 0);
	/* no S_ISGID: not asked (`cp -a` on every file) */
	assert_int_equal(tfs_setxattr_as(T.fs, &caller, f.ino, a, acl, n, 0), 0);
	assert_int_equal(ask.asked, 0);
	assert_int_equal(perm_of(f.ino), 0750);
	/* S_ISGID, the caller's fsgid is the file's group: not asked, kept */
	assert_int_equal(chmod_chgrp(f.ino, 02770, 1000), 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &caller, f.ino, a, acl, n, 0), 0);
	assert_int_equal(ask.asked, 0);
	assert_int_equal(perm_of(f.ino), 02750);
	/* another group: asked once, with the file's group; "no" clears it */
	assert_int_equal(chmod_chgrp(f.ino, 02770, 5), 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &caller, f.ino, a, acl, n, 0), 0);
	assert_int_equal(ask.asked, 1);
	assert_int_equal(ask.gid, 5);
	assert_int_equal(perm_of(f.ino), 0750);
	/* "yes" (in the group, or CAP_FSETID) keeps it */
	ask.answer = true;
	assert_int_equal(chmod_chgrp(f.ino, 02770, 5), 0);
	assert_int_equal(tfs_setxattr_as(T.fs, &caller, f.ino, a, acl, n, 0), 0);
	assert_int_equal(ask.asked, 2);
	assert_int_equal(perm_of(f.ino), 02750);
}

/*
 * A chown racing an access ACL: one thread sets the file to 02770 and
 * gives it, in turn, the outsider's group and another; the other sets the
 * ACL 0750 as the outsider and reads the mode back.  0750 bits with
 * S_ISGID (02750) come only from an ACL that kept S_ISGID with no setattr
 * since, so the group read with them must be the outsider's: a decision
 * taken on a group read before the inode's lock fails this.
 */
struct acl_race {
	tfs_ino_t ino;
	unsigned rounds;
	bool stop; /* __atomic */
	int err;   /* the chown thread's */
};

static void *acl_race_chown(void *arg)
{
	struct acl_race *r = arg;

	for (unsigned i = 0; !__atomic_load_n(&r->stop, __ATOMIC_RELAXED) && !r->err; i++)
		r->err = chmod_chgrp(r->ino, 02770, i & 1 ? 5 : 1000);
	return NULL;
}

static void test_acl_sgid_chown_race(void **state)
{
	struct acl_race r = { .rounds = 20000 };
	u8 acl[64];
	size_t n = acl_of(acl, 7, 0, 5, -1, 0);
	unsigned kept = 0, cleared = 0;
	struct tfs_stat st;
	pthread_t th;

	assert_int_equal(pt_mknod(&T, 1, "race", S_IFREG | 02770, &st), 0);
	r.ino = st.ino;
	assert_int_equal(pthread_create(&th, NULL, acl_race_chown, &r), 0);
	for (unsigned i = 0; i < r.rounds; i++) {
		assert_int_equal(tfs_setxattr_as(T.fs, &outsider, r.ino, "system.posix_acl_access",
						 acl, n, 0),
				 0);
		assert_int_equal(tfs_getattr(T.fs, r.ino, &st), 0);
		if ((st.mode & 07777) == 02750) {
			kept++;
			if (st.gid != 1000)
				fail_msg("round %u: S_ISGID kept by an ACL in group %u", i, st.gid);
		}
		cleared += (st.mode & 07777) == 0750;
	}
	__atomic_store_n(&r.stop, true, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	assert_int_equal(r.err, 0);
	print_message("acl race: %u rounds, %u kept S_ISGID, %u cleared it\n", r.rounds, kept,
		      cleared);
	assert_true(kept > 0 && cleared > 0); /* both groups were met */
}

/*
 * The ACL, its permission bits and S_ISGID's loss are one commit: a power
 * cut at the journal write that carries it or at the next one (every
 * policy) leaves the file with all three or none (02770, no ACL).
 */
static void test_acl_sgid_power_cut(void **state)
{
	static const char *const policies[] = { "none", "prefix", "random", "torn" };
	u8 acl[64], back[64];
	size_t n = acl_of(acl, 7, 7, 5, 5, 0);
	unsigned after = 0;

	for (unsigned p = 0; p < 8; p++) {
		struct tfs_stat st;
		char name[16], rule[64];
		ssize_t got;

		snprintf(name, sizeof(name), "cut%u", p);
		assert_int_equal(pt_mknod(&T, 1, name, S_IFREG | 02770, &st), 0);
		assert_int_equal(tfs_syncfs(T.fs), 0);
		snprintf(rule, sizeof(rule), "write tag=journal nth=%u powercut=%s", 1 + p / 4,
			 policies[p % 4]);
		tfs_faultdev_set_seed(pt_bdev(&T, 0), p + 1);
		assert_true(pt_rule(&T, 0, rule) >= 0);
		assert_int_equal(tfs_setxattr_as(T.fs, &outsider, st.ino, "system.posix_acl_access",
						 acl, n, 0),
				 0);
		tfs_syncfs(T.fs);
		snprintf(name, sizeof(name), "next%u", p);
		pt_mknod(&T, 1, name, S_IFREG | 0644, NULL);
		tfs_syncfs(T.fs); /* the power went at one of these */
		assert_true(tfs_faultdev_rule_fired(pt_bdev(&T, 0), 0) > 0);
		pt_stop(&T);
		assert_int_equal(pt_open(&T), 0);
		got = tfs_getxattr(T.fs, st.ino, "system.posix_acl_access", back, sizeof(back));
		if (got == (ssize_t)n) {
			assert_memory_equal(back, acl, n);
			assert_int_equal(perm_of(st.ino), 0750);
			after++;
		} else {
			assert_int_equal(got, -ENODATA);
			assert_int_equal(perm_of(st.ino), 02770);
		}
		assert_int_equal(pt_fsck(T.fs), 0);
	}
	print_message("acl power cut: the ACL survived %u of 8 cuts\n", after);
	assert_true(after > 0 && after < 8); /* both sides were seen */
}

/* The ACL user::u, user:1000:n, group::g, mask::m (unless m < 0), other::o. */
static size_t acl_of(u8 *acl, unsigned u, unsigned n, unsigned g, int m, unsigned o)
{
	size_t len = 4;

	acl[0] = 2;
	acl[1] = acl[2] = acl[3] = 0;
	len += acl_entry(acl + len, 0x01, u, ~0U);
	if (m >= 0)
		len += acl_entry(acl + len, 0x02, n, 1000);
	len += acl_entry(acl + len, 0x04, g, ~0U);
	if (m >= 0)
		len += acl_entry(acl + len, 0x10, (unsigned)m, ~0U);
	len += acl_entry(acl + len, 0x20, o, ~0U);
	return len;
}

static void assert_acl(tfs_ino_t ino, const char *name, const u8 *acl, size_t n)
{
	u8 buf[64];

	assert_int_equal(tfs_getxattr(T.fs, ino, name, buf, sizeof(buf)), (ssize_t)n);
	assert_memory_equal(buf, acl, n);
}

/*
 * With FUSE_POSIX_ACL (ctx.posix_acl) creates follow the directory's
 * default ACL as on ext4 (posix_acl_create(); the expected values are
 * ext4's for the same steps) or lose the umask bits without one, and a
 * chmod updates the access ACL (posix_acl_chmod()), in the same commits.
 */
static void test_acl_inherit(void **state)
{
	struct tfs_ctx acl_ctx = { .uid = 0, .gid = 0, .pid = 1, .umask = 022, .posix_acl = true };
	const struct tfs_ctx plain = { .uid = 0, .gid = 0, .pid = 1, .umask = 022 };
	struct tfs_setattr sa = { .valid = TFS_SETATTR_MODE, .mode = 0600 };
	u8 def[64], acl[64];
	size_t dn, n;
	struct tfs_stat d, f, s, l, p;

	/* No default ACL: the umask. */
	assert_int_equal(tfs_mkdir(T.fs, &acl_ctx, 1, "d", 1, 0777, &d), 0);
	assert_int_equal(d.mode & 07777, 0755);
	assert_int_equal(tfs_mknod(T.fs, &acl_ctx, d.ino, "u", 1, S_IFREG | 0666, 0, &f), 0);
	assert_int_equal(f.mode & 07777, 0644);
	/* Without posix_acl the mode is taken as given (the kernel masked it). */
	assert_int_equal(tfs_mknod(T.fs, &plain, d.ino, "v", 1, S_IFREG | 0666, 0, &f), 0);
	assert_int_equal(f.mode & 07777, 0666);

	dn = acl_of(def, 7, 7, 5, 7, 0); /* u::rwx u:1000:rwx g::r-x m::rwx o::--- */
	assert_int_equal(tfs_setxattr(T.fs, d.ino, "system.posix_acl_default", def, dn, 0), 0);
	acl_ctx.umask = 077; /* ignored under a default ACL */
	assert_int_equal(tfs_mknod(T.fs, &acl_ctx, d.ino, "f", 1, S_IFREG | 0666, 0, &f), 0);
	assert_int_equal(tfs_mkdir(T.fs, &acl_ctx, d.ino, "s", 1, 0777, &s), 0);
	assert_int_equal(tfs_symlink(T.fs, &acl_ctx, d.ino, "l", 1, "f", &l), 0);
	assert_int_equal(tfs_mknod(T.fs, &plain, d.ino, "p", 1, S_IFIFO | 0644, 0, &p), 0);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(perm_of(f.ino), 0660);
		n = acl_of(acl, 6, 7, 5, 6, 0);
		assert_acl(f.ino, "system.posix_acl_access", acl, n);
		assert_int_equal(tfs_getxattr(T.fs, f.ino, "system.posix_acl_default", NULL, 0),
				 -ENODATA);
		assert_int_equal(perm_of(s.ino), 0770);
		n = acl_of(acl, 7, 7, 5, 7, 0);
		assert_acl(s.ino, "system.posix_acl_access", acl, n);
		assert_acl(s.ino, "system.posix_acl_default", def, dn);
		assert_int_equal(tfs_listxattr(T.fs, l.ino, NULL, 0), 0);
		assert_int_equal(perm_of(l.ino), 0777);
		assert_int_equal(tfs_listxattr(T.fs, p.ino, NULL, 0), 0);
		assert_int_equal(perm_of(p.ino), 0644);
		assert_int_equal(pt_fsck(T.fs), 0);
		reopen();
	}

	/* A default ACL the mode says all of: no access ACL, the mode masked. */
	dn = acl_of(def, 7, 0, 5, -1, 1); /* u::rwx g::r-x o::--x */
	assert_int_equal(tfs_setxattr(T.fs, d.ino, "system.posix_acl_default", def, dn, 0), 0);
	assert_int_equal(tfs_mknod(T.fs, &acl_ctx, d.ino, "m", 1, S_IFREG | 0666, 0, &f), 0);
	assert_int_equal(f.mode & 07777, 0640);
	assert_int_equal(tfs_getxattr(T.fs, f.ino, "system.posix_acl_access", NULL, 0), -ENODATA);

	/* chmod: owner, mask and other entries follow, the named entry stays. */
	assert_int_equal(tfs_setattr(T.fs, s.ino, NULL, &sa, NULL), 0);
	sa.mode = 0751;
	assert_int_equal(tfs_setattr(T.fs, s.ino, NULL, &sa, NULL), 0);
	n = acl_of(acl, 7, 7, 5, 5, 1);
	assert_acl(s.ino, "system.posix_acl_access", acl, n);
	reopen();
	assert_int_equal(perm_of(s.ino), 0751);
	n = acl_of(acl, 7, 7, 5, 5, 1);
	assert_acl(s.ino, "system.posix_acl_access", acl, n);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/* Values over many chunks; a replaced value leaves no chunk of the old one. */
static void test_large_values(void **state)
{
	static u8 v[TFS_XATTR_SIZE_MAX + 1], r[TFS_XATTR_SIZE_MAX + 1];
	size_t sizes[] = { 4000, 4088, 4089, 9000, 14000, 3, 12000 };
	int ret;

	for (unsigned i = 0; i < ARRAY_SIZE(sizes); i++) {
		pt_fill(v, sizes[i], i, 0);
		assert_int_equal(tfs_setxattr(T.fs, F, "user.big", v, sizes[i], 0), 0);
		assert_int_equal(tfs_getxattr(T.fs, F, "user.big", r, sizeof(r)), sizes[i]);
		assert_memory_equal(r, v, sizes[i]);
	}
	reopen();
	assert_int_equal(tfs_getxattr(T.fs, F, "user.big", r, sizeof(r)), 12000);
	assert_memory_equal(r, v, 12000);
	/* Past the VFS limit, and what no journal entry can carry. */
	assert_int_equal(tfs_setxattr(T.fs, F, "user.big", v, TFS_XATTR_SIZE_MAX + 1, 0), -E2BIG);
	ret = tfs_setxattr(T.fs, F, "user.huge", v, TFS_XATTR_SIZE_MAX, 0);
	assert_true(ret == 0 || ret == -E2BIG);
	if (!ret) {
		assert_int_equal(tfs_getxattr(T.fs, F, "user.huge", r, sizeof(r)),
				 TFS_XATTR_SIZE_MAX);
		assert_memory_equal(r, v, TFS_XATTR_SIZE_MAX);
	} else {
		assert_int_equal(tfs_getxattr(T.fs, F, "user.huge", r, sizeof(r)), -ENODATA);
	}
	/* Shrinking removes the chunks no longer needed. */
	assert_int_equal(tfs_setxattr(T.fs, F, "user.big", "s", 1, 0), 0);
	assert_int_equal(tfs_removexattr(T.fs, F, "user.big"), 0);
	if (!ret)
		assert_int_equal(tfs_removexattr(T.fs, F, "user.huge"), 0);
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;

	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_xattrs, TFS_POS(F, 0), TFS_POS(F, UINT64_MAX));
	assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
	assert_null(k);
	tfs_btree_iter_exit(&iter);
}

/* Many names, removed in a scattered order, with whiteouts under collisions. */
static void test_many(void **state)
{
	enum {
		N = 150
	};
	char name[64], buf[64];
	bool present[N];

	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "user.x%u", i);
		assert_int_equal(tfs_setxattr(T.fs, F, name, name, strlen(name), TFS_XATTR_CREATE),
				 0);
		present[i] = true;
	}
	for (unsigned i = 0; i < N; i += 3) {
		snprintf(name, sizeof(name), "user.x%u", i);
		assert_int_equal(tfs_removexattr(T.fs, F, name), 0);
		present[i] = false;
	}
	reopen();
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "user.x%u", i);
		ssize_t n = tfs_getxattr(T.fs, F, name, buf, sizeof(buf));

		if (present[i]) {
			assert_int_equal(n, strlen(name));
			assert_memory_equal(buf, name, (size_t)n);
		} else {
			assert_int_equal(n, -ENODATA);
		}
	}
	/* Removing the inode removes them all. */
	assert_int_equal(tfs_unlink(T.fs, 1, "f", 1), 0);
	struct tfs_btree_iter iter;
	const struct tfs_bkey *k;

	tfs_btree_iter_init(&iter, T.fs, TFS_BTREE_xattrs, TFS_POS(F, 0), TFS_POS(F, UINT64_MAX));
	assert_int_equal(tfs_btree_iter_peek(&iter, &k), 0);
	assert_null(k);
	tfs_btree_iter_exit(&iter);
}

/* listxattr's total stays within its VFS limit. */
static void test_list_limit(void **state)
{
	char name[256];
	unsigned i;
	int ret = 0;

	for (i = 0; i < 1000 && !ret; i++) {
		memset(name, 'a' + i % 26, sizeof(name));
		snprintf(name, 16, "user.%05u", i);
		name[10] = 'z';
		name[250] = 0;
		ret = tfs_setxattr(T.fs, F, name, "", 0, 0);
	}
	assert_int_equal(ret, -ENOSPC);
	assert_true(tfs_listxattr(T.fs, F, NULL, 0) <= TFS_XATTR_LIST_MAX);
	assert_true(tfs_listxattr(T.fs, F, NULL, 0) > TFS_XATTR_LIST_MAX - 251);
}

static u64 lookups_skipped(void)
{
	return __atomic_load_n(&tfs_posix(T.fs)->c.xattr_lookups_skipped, __ATOMIC_RELAXED);
}

/*
 * The kernel asks for security.capability before every write: an inode
 * known to have no xattr answers ENODATA without a lookup, and knows it
 * no more once one is set (directly, or after a remount).
 */
static void test_none_known(void **state)
{
	struct tfs_stat st;
	tfs_ino_t g;
	char buf[64];
	u64 c0;

	assert_int_equal(pt_mknod(&T, 1, "g", S_IFREG | 0644, &st), 0);
	g = st.ino;
	assert_int_equal(tfs_getxattr(T.fs, F, "security.capability", buf, sizeof(buf)), -ENODATA);
	c0 = lookups_skipped();
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(tfs_getxattr(T.fs, F, "security.capability", NULL, 0), -ENODATA);
	assert_int_equal(lookups_skipped(), c0 + 3);
	assert_int_equal(tfs_getxattr(T.fs, g, "user.a", buf, sizeof(buf)), -ENODATA);

	/* Set after the inode was known to have none: found. */
	assert_int_equal(tfs_setxattr(T.fs, F, "security.capability", "cap", 3, 0), 0);
	assert_int_equal(tfs_getxattr(T.fs, F, "security.capability", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "cap", 3);
	assert_int_equal(tfs_getxattr(T.fs, F, "user.other", buf, sizeof(buf)), -ENODATA);
	/* A REPLACE that fails adds nothing, and still leaves nothing wrong. */
	assert_int_equal(tfs_setxattr(T.fs, g, "user.a", "x", 1, TFS_XATTR_REPLACE), -ENODATA);
	assert_int_equal(tfs_getxattr(T.fs, g, "user.a", buf, sizeof(buf)), -ENODATA);

	reopen();
	assert_int_equal(tfs_getxattr(T.fs, F, "security.capability", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "cap", 3);
	assert_int_equal(tfs_getxattr(T.fs, g, "user.a", buf, sizeof(buf)), -ENODATA);
	c0 = lookups_skipped();
	assert_int_equal(tfs_getxattr(T.fs, g, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(lookups_skipped(), c0 + 1);
	assert_int_equal(tfs_setxattr(T.fs, g, "user.a", "y", 1, 0), 0);
	assert_int_equal(tfs_getxattr(T.fs, g, "user.a", buf, sizeof(buf)), 1);
	assert_int_equal(lookups_skipped(), c0 + 1);
}

/*
 * A new inode (mknod, mkdir, symlink, create) starts known to have no xattr:
 * its first getxattr is answered without a lookup (ls -l asks two per file,
 * the kernel one before every write).  One whose create queued an inherited
 * ACL starts with some, and finds it.
 */
static void test_none_new_inode(void **state)
{
	struct tfs_ctx acl_ctx = { .uid = 0, .gid = 0, .pid = 1, .umask = 022, .posix_acl = true };
	struct tfs_stat st[3], d, f;
	struct tfs_file *fl;
	tfs_ino_t ino[4];
	u8 def[64], acl[64];
	size_t dn, n;
	u64 c0;

	assert_int_equal(pt_mknod(&T, 1, "n", S_IFREG | 0644, &st[0]), 0);
	assert_int_equal(tfs_mkdir(T.fs, &pt_root_ctx, 1, "d", 1, 0755, &st[1]), 0);
	assert_int_equal(tfs_symlink(T.fs, &pt_root_ctx, 1, "l", 1, "n", &st[2]), 0);
	assert_int_equal(pt_create(&T, 1, "c", &fl), 0);
	for (unsigned i = 0; i < 3; i++)
		ino[i] = st[i].ino;
	ino[3] = tfs_file_ino(fl);
	c0 = lookups_skipped();
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(tfs_getxattr(T.fs, ino[i], "security.selinux", NULL, 0), -ENODATA);
	assert_int_equal(lookups_skipped(), c0 + 4);
	tfs_release(T.fs, fl);

	/* Under a default ACL: the inherited access ACL is there at once. */
	assert_int_equal(tfs_mkdir(T.fs, &acl_ctx, 1, "a", 1, 0777, &d), 0);
	dn = acl_of(def, 7, 7, 5, 7, 0);
	assert_int_equal(tfs_setxattr(T.fs, d.ino, "system.posix_acl_default", def, dn, 0), 0);
	assert_int_equal(tfs_mknod(T.fs, &acl_ctx, d.ino, "f", 1, S_IFREG | 0666, 0, &f), 0);
	n = acl_of(acl, 6, 7, 5, 6, 0);
	assert_acl(f.ino, "system.posix_acl_access", acl, n);
	assert_int_equal(pt_fsck(T.fs), 0);
}

/*
 * The same across a power cut: an xattr set on an inode known to have none,
 * fsynced, survives; an inode that never had one still answers ENODATA.
 */
static void test_none_known_power_cut(void **state)
{
	static const char *const policies[] = { "none", "prefix", "random", "torn" };

	for (unsigned p = 0; p < 4; p++) {
		struct tfs_file *f, *h;
		struct tfs_stat st;
		tfs_ino_t g;
		char buf[64], name[16];
		int ret;

		snprintf(name, sizeof(name), "g%u", p);
		assert_int_equal(pt_create(&T, 1, name, &f), 0);
		assert_int_equal(tfs_getattr(T.fs, tfs_file_ino(f), &st), 0);
		g = st.ino;
		assert_int_equal(tfs_getxattr(T.fs, g, "security.capability", NULL, 0), -ENODATA);
		assert_int_equal(tfs_getxattr(T.fs, F, "user.p", NULL, 0), p ? 1 : -ENODATA);
		assert_int_equal(tfs_setxattr(T.fs, F, "user.p", "v", 1, 0), 0);
		assert_int_equal(tfs_write(T.fs, f, "data", 4, 0), 4);
		assert_int_equal(tfs_fsync(T.fs, f, false), 0);
		assert_int_equal(tfs_fsyncdir(T.fs, F, false), 0);

		/* The power goes at the next device write (whatever was unflushed: policy). */
		snprintf(buf, sizeof(buf), "write nth=1 powercut=%s", policies[p]);
		tfs_faultdev_set_seed(pt_bdev(&T, 0), p + 1);
		assert_true(pt_rule(&T, 0, buf) >= 0);
		snprintf(name, sizeof(name), "h%u", p);
		ret = pt_create(&T, 1, name, &h);
		if (!ret) {
			tfs_write(T.fs, h, "x", 1, 0);
			tfs_fsync(T.fs, h, false);
			tfs_release(T.fs, h);
		}
		assert_true(tfs_faultdev_rule_fired(pt_bdev(&T, 0), 0) > 0);
		tfs_release(T.fs, f);
		pt_stop(&T);
		assert_int_equal(pt_open(&T), 0);

		assert_int_equal(tfs_getxattr(T.fs, F, "user.p", buf, sizeof(buf)), 1);
		assert_memory_equal(buf, "v", 1);
		assert_int_equal(tfs_getxattr(T.fs, F, "user.p", buf, sizeof(buf)), 1);
		assert_int_equal(tfs_getxattr(T.fs, g, "security.capability", NULL, 0), -ENODATA);
		assert_int_equal(tfs_getxattr(T.fs, g, "security.capability", NULL, 0), -ENODATA);
		assert_int_equal(pt_fsck(T.fs), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_basic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_keeps_sgid_asked_lazily, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_kill_sgid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_sgid_chown_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_sgid_power_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_inherit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_acl_inherit, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_none_known, setup, teardown),
		cmocka_unit_test_setup_teardown(test_none_known_power_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_none_new_inode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_basic, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_large_values, setup_collide, teardown),
		cmocka_unit_test_setup_teardown(test_many, setup_collide, teardown),
	};

	return pt_run_tests(tests);
}
