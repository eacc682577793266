/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_FAULT_RULE_H
#define TFS_LIB_FAULT_RULE_H

/*
 * Fault rules: what a fault device (lib/faultdev.h) does to an op, and when.
 * A rule is plain data; the device that holds it keeps its counters and
 * seed, so the same rule on two devices fires independently.
 *
 * Matching and firing.  Each rule matches ops (by op, tag, offset range),
 * counts the ops it matches, and fires on some of them (the nth, every k-th,
 * with a seeded probability; at most `times` times); the first rule that
 * fires on an op acts on it.  Every fire prints one line on stderr with the
 * spec that reproduces it.  One seed per device drives every random choice.
 *
 * Spec words (the RULE part of a "dev" entry, lib/fault_registry.h;
 * tfs_faultdev_add_rule_str()):
 *
 *	RULE := [OPS] [tag=T[,T...]] [range=A-B] [nth=N] [every=K] [prob=P]
 *		[times=T] ACTION
 *	OPS := read|write|flush|fua|discard|any[,...]
 *	ACTION := fail[=ERRNO] | drop | tear[=SECTORS] | corrupt[=BYTE]
 *		| short[=BYTES] | delay=MS | reorder[=K] | vanish
 *		| powercut[=none|prefix|prefix:K|random|torn]
 *
 * tfs_fault_rule_to_text() prints a rule as these words and
 * tfs_fault_rule_parse() reads them back to the same rule (a round trip).
 */

#include "lib/bdev.h"
#include "lib/types.h"

struct printbuf;

/* clang-format off */
#define TFS_FAULT_ACTIONS(x)	\
	x(none)			\
	x(fail)			\
	x(drop)			\
	x(tear)			\
	x(corrupt)		\
	x(short)		\
	x(delay)		\
	x(reorder)		\
	x(vanish)		\
	x(powercut)

#define TFS_POWERCUT_POLICIES(x)	\
	x(none)			\
	x(prefix)		\
	x(random)		\
	x(torn)
/* clang-format on */

enum tfs_fault_action {
#define x(n) TFS_FAULT_ACT_##n,
	TFS_FAULT_ACTIONS(x)
#undef x
	TFS_FAULT_ACT_NR
};

enum tfs_powercut_policy {
#define x(n) TFS_POWERCUT_##n,
	TFS_POWERCUT_POLICIES(x)
#undef x
	TFS_POWERCUT_NR
};

extern const char *const tfs_fault_action_names[];
extern const char *const tfs_powercut_policy_names[];

/* Bit in tfs_fault_rule.ops for writes with TFS_BIO_FUA ("fua"). */
#define TFS_FAULT_MATCH_FUA (1u << TFS_OP_NR)

struct tfs_fault_rule {
	/* Matching: every given condition must hold. */
	unsigned ops;	/* 1 << TFS_OP_x, TFS_FAULT_MATCH_FUA; 0: any op */
	unsigned tags;	/* 1 << TFS_TAG_x; 0: any tag */
	u64 start, end; /* the op must overlap [start, end); end 0: anywhere */
	/* Firing, among the ops the rule matches (counted from 1). */
	u64 nth;   /* the first op that may fire; 0: 1 (or `every`) */
	u64 every; /* then every k-th after it; 0: only the nth */
	u32 ppm;   /* or: each op from the nth on, with this probability */
	u64 times; /* most fires; 0: no limit (a bare nth fires once) */
	/* Acting. */
	enum tfs_fault_action action;
	int err; /* fail: the errno (positive); 0: EIO */
	/*
	 * tear: sectors written (a prefix; 0: a seeded subset); corrupt: the
	 * byte flipped (0: seeded; else offset + 1); short: bytes done (0:
	 * half the sectors); delay: milliseconds; reorder: how many later
	 * completions overtake this one (0: 1); powercut prefix: writes kept
	 * (0: seeded), given as prefix:K.
	 */
	u64 arg;
	enum tfs_powercut_policy policy;
};

/* A fault rule, as spec words (the part after "dev DEV"). */
void tfs_fault_rule_to_text(struct printbuf *out, const struct tfs_fault_rule *rule);

/*
 * Parses the RULE words of a spec (see the top) into rule.  Returns 0,
 * -TFS_ERR_fault_spec_invalid with err saying why.  A rule without OPS is given
 * the ops its action can act on; one whose OPS its action cannot act on, or
 * a flush with a range, is refused.
 */
int tfs_fault_rule_parse(const char *words, struct tfs_fault_rule *rule, struct printbuf *err);

/*
 * A spec number: the whole of s, unsigned, in C syntax (decimal, 0x hex, 0
 * octal).  Returns 0, or -EINVAL (*v undefined) for a NULL, empty, negative,
 * partly numeric or out-of-range s.
 */
int tfs_fault_parse_num(const char *s, u64 *v);

#endif /* TFS_LIB_FAULT_RULE_H */
