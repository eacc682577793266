// SPDX-License-Identifier: GPL-2.0
/*
 * Fault rules (see lib/fault_rule.h): their names, their spec words, and
 * the parser that reads those words back.
 */
#include "lib/fault_rule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/errcode.h"
#include "lib/printbuf.h"

const char *const tfs_fault_action_names[] = {
#define x(n) #n,
	TFS_FAULT_ACTIONS(x)
#undef x
		NULL
};

const char *const tfs_powercut_policy_names[] = {
#define x(n) #n,
	TFS_POWERCUT_POLICIES(x)
#undef x
		NULL
};
/* ---- rules: text ---- */

static const struct {
	const char *name;
	int err;
} errno_names[] = {
	{ "EIO", EIO },		{ "ENOSPC", ENOSPC },	      { "EROFS", EROFS },
	{ "ENOMEM", ENOMEM },	{ "EAGAIN", EAGAIN },	      { "EBUSY", EBUSY },
	{ "ENODEV", ENODEV },	{ "ENXIO", ENXIO },	      { "EINVAL", EINVAL },
	{ "EPERM", EPERM },	{ "EACCES", EACCES },	      { "ETIMEDOUT", ETIMEDOUT },
	{ "EBADMSG", EBADMSG }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EDQUOT", EDQUOT },
	{ "EFBIG", EFBIG },
};

static void prt_errno_name(struct printbuf *out, int err)
{
	for (unsigned i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (errno_names[i].err == err) {
			prt_str(out, errno_names[i].name);
			return;
		}
	prt_printf(out, "%d", err);
}

static const char *const match_op_names[] = { "read", "write", "flush", "discard", "fua" };

void tfs_fault_rule_to_text(struct printbuf *out, const struct tfs_fault_rule *r)
{
	bool first = true;

	for (unsigned i = 0; i < ARRAY_SIZE(match_op_names); i++)
		if (r->ops & (1u << i)) {
			prt_printf(out, "%s%s", first ? "" : ",", match_op_names[i]);
			first = false;
		}
	if (first)
		prt_str(out, "any");
	if (r->tags) {
		first = true;
		prt_str(out, " tag=");
		for (unsigned i = 0; i < TFS_TAG_NR; i++)
			if (r->tags & (1u << i)) {
				prt_printf(out, "%s%s", first ? "" : ",", tfs_bio_tag_names[i]);
				first = false;
			}
	}
	if (r->end)
		prt_printf(out, " range=%llu-%llu", (unsigned long long)r->start,
			   (unsigned long long)r->end);
	if (r->nth)
		prt_printf(out, " nth=%llu", (unsigned long long)r->nth);
	if (r->every)
		prt_printf(out, " every=%llu", (unsigned long long)r->every);
	if (r->ppm)
		prt_printf(out, " prob=%u.%06u", r->ppm / 1000000, r->ppm % 1000000);
	if (r->times)
		prt_printf(out, " times=%llu", (unsigned long long)r->times);
	prt_printf(out, " %s", tfs_fault_action_names[r->action]);
	switch (r->action) {
	case TFS_FAULT_ACT_fail:
		prt_char(out, '=');
		prt_errno_name(out, r->err ?: EIO);
		break;
	case TFS_FAULT_ACT_corrupt:
		if (r->arg)
			prt_printf(out, "=%llu", (unsigned long long)(r->arg - 1));
		break;
	case TFS_FAULT_ACT_tear:
	case TFS_FAULT_ACT_short:
	case TFS_FAULT_ACT_delay:
	case TFS_FAULT_ACT_reorder:
		if (r->arg)
			prt_printf(out, "=%llu", (unsigned long long)r->arg);
		break;
	case TFS_FAULT_ACT_powercut:
		prt_printf(out, "=%s", tfs_powercut_policy_names[r->policy]);
		if (r->policy == TFS_POWERCUT_prefix && r->arg)
			prt_printf(out, ":%llu", (unsigned long long)r->arg);
		break;
	default:
		break;
	}
}

int tfs_fault_parse_num(const char *s, u64 *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

static int parse_errno(const char *s, int *err)
{
	u64 v;

	for (unsigned i = 0; i < ARRAY_SIZE(errno_names); i++)
		if (!strcasecmp(s, errno_names[i].name)) {
			*err = errno_names[i].err;
			return 0;
		}
	if (tfs_fault_parse_num(s, &v) || !v || v >= 4096)
		return -EINVAL;
	*err = (int)v;
	return 0;
}

/*
 * "a,b,...": true and *mask set (bit i for names[i]) if every item is one of
 * names[0..nr), or "any" (no bit) when any_ok.
 */
static bool parse_name_list(const char *s, const char *const *names, unsigned nr, bool any_ok,
			    unsigned *mask)
{
	char *copy = strdup(s), *save = NULL;
	bool ok = copy != NULL;
	unsigned m = 0;

	for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok;
	     t = strtok_r(NULL, ",", &save)) {
		unsigned i;

		if (any_ok && !strcmp(t, "any"))
			continue;
		for (i = 0; i < nr; i++)
			if (!strcmp(t, names[i]))
				break;
		if (i == nr)
			ok = false;
		else
			m |= 1u << i;
	}
	free(copy);
	if (ok)
		*mask = m;
	return ok;
}

/* "read,fua": true and *mask set if every item is an op name (or "any"). */
static bool parse_ops(const char *w, unsigned *mask)
{
	return parse_name_list(w, match_op_names, ARRAY_SIZE(match_op_names), true, mask);
}

/* "btree,journal": true and *mask set if every item is a tag name, and there is one. */
static bool parse_tags(const char *s, unsigned *mask)
{
	return parse_name_list(s, tfs_bio_tag_names, TFS_TAG_NR, false, mask) && *mask;
}

static int parse_action(struct tfs_fault_rule *r, const char *name, const char *val,
			struct printbuf *err)
{
	u64 v = 0;
	unsigned i;

	for (i = 1; i < TFS_FAULT_ACT_NR; i++)
		if (!strcmp(name, tfs_fault_action_names[i]))
			break;
	if (i == TFS_FAULT_ACT_NR)
		return 1; /* not an action */
	if (r->action) {
		prt_printf(err, "two actions ('%s' and '%s')", tfs_fault_action_names[r->action],
			   name);
		return -TFS_ERR_fault_spec_invalid;
	}
	r->action = i;
	switch (r->action) {
	case TFS_FAULT_ACT_fail:
		r->err = EIO;
		if (val && parse_errno(val, &r->err))
			goto bad;
		return 0;
	case TFS_FAULT_ACT_drop:
	case TFS_FAULT_ACT_vanish:
		if (val)
			goto bad;
		return 0;
	case TFS_FAULT_ACT_corrupt:
		if (val && tfs_fault_parse_num(val, &v))
			goto bad;
		r->arg = val ? v + 1 : 0;
		return 0;
	case TFS_FAULT_ACT_delay:
		if (!val || tfs_fault_parse_num(val, &v) || !v)
			goto bad;
		r->arg = v;
		return 0;
	case TFS_FAULT_ACT_tear:
	case TFS_FAULT_ACT_short:
	case TFS_FAULT_ACT_reorder:
		if (val && tfs_fault_parse_num(val, &v))
			goto bad;
		r->arg = v;
		return 0;
	case TFS_FAULT_ACT_powercut: {
		const char *colon = val ? strchr(val, ':') : NULL;
		size_t n = colon ? (size_t)(colon - val) : (val ? strlen(val) : 0);

		r->policy = TFS_POWERCUT_none;
		if (!val)
			return 0;
		for (i = 0; i < TFS_POWERCUT_NR; i++)
			if (strlen(tfs_powercut_policy_names[i]) == n &&
			    !strncmp(val, tfs_powercut_policy_names[i], n))
				break;
		if (i == TFS_POWERCUT_NR)
			goto bad;
		r->policy = i;
		if (colon && (i != TFS_POWERCUT_prefix || tfs_fault_parse_num(colon + 1, &r->arg)))
			goto bad;
		return 0;
	}
	default:
		break;
	}
bad:
	prt_printf(err, "bad value for '%s': '%s'", name, val ?: "(none)");
	return -TFS_ERR_fault_spec_invalid;
}

static const char rule_words_help[] =
	"want OPS (read,write,flush,fua,discard,any), tag=T, range=A-B, nth=N, every=K, prob=P, times=T, always, "
	"and one action: fail[=ERRNO], drop, tear[=SECTORS], corrupt[=BYTE], short[=BYTES], delay=MS, "
	"reorder[=K], vanish, powercut[=none|prefix[:K]|random|torn]";

static int parse_rule_word(struct tfs_fault_rule *r, char *w, struct printbuf *err)
{
	char *val = strchr(w, '=');
	u64 v;
	int ret;

	if (!val && parse_ops(w, &r->ops))
		return 0;
	if (val)
		*val++ = '\0';
	ret = parse_action(r, w, val, err);
	if (ret <= 0)
		return ret;

	if (!strcmp(w, "always") && !val) {
		r->every = 1;
	} else if (!strcmp(w, "tag") && val && parse_tags(val, &r->tags)) {
	} else if (!strcmp(w, "nth") && !tfs_fault_parse_num(val, &v) && v) {
		r->nth = v;
	} else if (!strcmp(w, "every") && !tfs_fault_parse_num(val, &v) && v) {
		r->every = v;
	} else if (!strcmp(w, "times") && !tfs_fault_parse_num(val, &v)) {
		r->times = v;
	} else if (!strcmp(w, "prob") && val) {
		char *end;
		double p = strtod(val, &end);

		if (*end || !(p > 0 && p <= 1)) {
			prt_printf(err, "prob=%s is not a number in (0, 1]", val);
			return -TFS_ERR_fault_spec_invalid;
		}
		r->ppm = (u32)(p * 1000000 + 0.5) ?: 1;
	} else if (!strcmp(w, "range") && val) {
		char *dash = strchr(val, '-');

		if (!dash)
			goto bad;
		*dash = '\0';
		if (tfs_fault_parse_num(val, &r->start) || tfs_fault_parse_num(dash + 1, &r->end) ||
		    r->end <= r->start) {
			*dash = '-';
			goto bad;
		}
	} else {
		goto bad;
	}
	return 0;
bad:
	prt_printf(err, "bad rule word '%s%s%s' (%s)", w, val ? "=" : "", val ?: "",
		   rule_words_help);
	return -TFS_ERR_fault_spec_invalid;
}

/* Ops an action can act on; a rule without ops gets these. */
static unsigned action_ops(enum tfs_fault_action a)
{
	switch (a) {
	case TFS_FAULT_ACT_tear:
		return 1u << TFS_OP_write | TFS_FAULT_MATCH_FUA;
	case TFS_FAULT_ACT_corrupt:
	case TFS_FAULT_ACT_short:
		return 1u << TFS_OP_read | 1u << TFS_OP_write | TFS_FAULT_MATCH_FUA;
	default:
		return ~0u;
	}
}

int tfs_fault_rule_parse(const char *words, struct tfs_fault_rule *rule, struct printbuf *err)
{
	struct tfs_fault_rule r = {};
	char *copy = strdup(words), *save = NULL;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, " \t\n", &save); t && !ret;
	     t = strtok_r(NULL, " \t\n", &save))
		ret = parse_rule_word(&r, t, err);
	free(copy);
	if (ret)
		return ret;
	if (!r.action) {
		prt_printf(err, "rule '%s' has no action (%s)", words, rule_words_help);
		return -TFS_ERR_fault_spec_invalid;
	}
	if (!r.ops && action_ops(r.action) != ~0u)
		r.ops = action_ops(r.action);
	if (r.ops & ~action_ops(r.action)) {
		prt_printf(err, "rule '%s': %s acts only on", words,
			   tfs_fault_action_names[r.action]);
		for (unsigned i = 0; i < ARRAY_SIZE(match_op_names); i++)
			if (action_ops(r.action) & (1u << i))
				prt_printf(err, " %s", match_op_names[i]);
		return -TFS_ERR_fault_spec_invalid;
	}
	if (r.end && r.ops & (1u << TFS_OP_flush)) {
		prt_printf(err, "rule '%s': a flush has no offset, so it cannot match a range",
			   words);
		return -TFS_ERR_fault_spec_invalid;
	}
	*rule = r;
	return 0;
}
