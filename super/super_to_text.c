// SPDX-License-Identifier: GPL-2.0
/* The superblock as text (aligned columns, human units) and as JSON. */
#include <string.h>
#include <time.h>

#include "lib/checksum.h"
#include "lib/printbuf.h"
#include "lib/string.h"
#include "super/super.h"

typedef unsigned long long ull;

/*
 * Pushes the tabstop that puts values at TFS_SB_TEXT_VALUE_COLUMN: tabstops
 * count from the indent, so a nested to_text pushes a narrower one.
 */
static void value_tabstop_push(struct printbuf *out)
{
	unsigned col = TFS_SB_TEXT_VALUE_COLUMN;

	printbuf_tabstop_push(out, out->indent + 2 < col ? col - out->indent : 2);
}

/* A fixed-width on-disk string, printed up to its NUL. */
static void prt_field_str(struct printbuf *out, const char *s, size_t size)
{
	size_t len = tfs_strnlen_field(s, size);

	if (!len) {
		prt_str(out, "(none)");
		return;
	}
	/* Valid labels print as they are; a control or C1 byte becomes '?'. */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			prt_char(out, '?');
		else if (c == 0xc2 && i + 1 < len && (u8)s[i + 1] >= 0x80 && (u8)s[i + 1] <= 0x9f) {
			prt_char(out, '?');
			i++;
		} else
			prt_char(out, (char)c);
	}
}

/* The last second gmtime() and a four-digit year show: 9999-12-31 23:59:59 UTC. */
#define TIME_SHOWN_MAX 253402300799ULL

/*
 * A time in seconds since the epoch: the date and the number.  0 is the
 * epoch itself unless the field says 0 means "never" (zero_never).  A time
 * past TIME_SHOWN_MAX (negative as a time_t from 2^63 on) is printed as
 * the number, marked out of range.
 */
static void prt_time(struct printbuf *out, u64 secs, bool zero_never)
{
	time_t t = (time_t)secs;
	struct tm tm;
	char buf[64];

	if (!secs && zero_never) {
		prt_str(out, "never");
		return;
	}
	if (secs <= TIME_SHOWN_MAX && gmtime_r(&t, &tm) &&
	    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm))
		prt_printf(out, "%s (%llu)", buf, (ull)secs);
	else
		prt_printf(out, "%llu (out of range)", (ull)secs);
}

static void prt_version(struct printbuf *out, unsigned v)
{
	const char *name = NULL;

	switch (v) {
#define x(n, nr)           \
	case nr:           \
		name = #n; \
		break;
		TFS_SB_VERSIONS(x)
#undef x
	}
	prt_printf(out, "%u (%s)", v, name ?: "unknown");
}

static void prt_name(struct printbuf *out, const char *name)
{
	prt_str(out, name);
	prt_char(out, ':');
	prt_tab(out);
}

static const struct tfs_sb_copy_status *copy_status(const struct tfs_sb_to_text_opts *opts,
						    u64 offset)
{
	for (unsigned i = 0; opts && opts->copies && i < opts->nr_copies; i++)
		if (opts->copies[i].offset == offset)
			return &opts->copies[i];
	return NULL;
}

static void layout_to_text(struct printbuf *out, const struct tfs_sb_layout *l,
			   const struct tfs_sb_to_text_opts *opts)
{
	unsigned nr = min_t(unsigned, l->nr_superblocks, TFS_SB_LAYOUT_MAX_COPIES);

	value_tabstop_push(out);
	prt_name(out, "Layout version");
	prt_printf(out, "%u\n", l->version);
	prt_name(out, "Superblock max size");
	prt_units_u64(out, le32_to_cpu(l->sb_max_size));
	prt_newline(out);
	prt_name(out, "Filesystem UUID");
	prt_uuid(out, l->uuid);
	prt_newline(out);
	prt_name(out, "Copies");
	prt_printf(out, "%u\n", l->nr_superblocks);
	for (unsigned i = 0; i < nr; i++) {
		u64 off = le64_to_cpu(l->sb_offset[i]);
		const struct tfs_sb_copy_status *c = copy_status(opts, off);

		prt_printf(out, "Copy %u:", i);
		prt_tab(out);
		prt_printf(out, "at %llu (", (ull)off);
		prt_units_u64(out, off);
		prt_printf(out, ")%s", i ? "" : ", primary");
		if (c && !c->code)
			prt_printf(out, ": valid, seq %llu%s", (ull)c->seq,
				   off == opts->shown_offset ? ", in use" : "");
		else if (c)
			prt_printf(out, ": bad: %s%s", c->why ?: "(reason lost: out of memory)",
				   off == opts->shown_offset ? "; shown" : "");
		prt_newline(out);
	}
	printbuf_tabstop_pop(out);
}

void tfs_sb_layout_to_text(struct printbuf *out, const struct tfs_sb_layout *l)
{
	layout_to_text(out, l, NULL);
}

void tfs_member_to_text(struct printbuf *out, const struct tfs_member *m, unsigned idx)
{
	u32 bs = le32_to_cpu(m->bucket_size);
	u64 nb = le64_to_cpu(m->nbuckets);
	const char *state = tfs_member_state_str(m->state);

	prt_printf(out, "Device %u:\n", idx);
	printbuf_indent_add(out, 2);
	value_tabstop_push(out);
	prt_name(out, "UUID");
	prt_uuid(out, m->uuid);
	prt_newline(out);
	prt_name(out, "Label");
	prt_field_str(out, m->label, sizeof(m->label));
	prt_newline(out);
	prt_name(out, "State");
	if (state)
		prt_str(out, state);
	else
		prt_printf(out, "unknown (%u)", m->state);
	prt_newline(out);
	prt_name(out, "Size");
	prt_units_u64(out, nb * bs);
	prt_newline(out);
	prt_name(out, "Bucket size");
	prt_units_u64(out, bs);
	prt_newline(out);
	prt_name(out, "Buckets");
	prt_printf(out, "%llu\n", (ull)nb);
	prt_name(out, "First bucket");
	prt_printf(out, "%llu\n", (ull)le64_to_cpu(m->first_bucket));
	prt_name(out, "Durability");
	prt_printf(out, "%u\n", m->durability);
	prt_name(out, "Discard");
	prt_str(out, m->discard ? "yes\n" : "no\n");
	prt_name(out, "Last mount");
	prt_time(out, le64_to_cpu(m->last_mount), true);
	prt_newline(out);
	printbuf_tabstop_pop(out);
	printbuf_indent_sub(out, 2);
}

void tfs_sb_members_to_text(struct printbuf *out, const struct tfs_sb *sb,
			    const struct tfs_sb_field_members *f)
{
	prt_printf(out, "Members (%u):\n", sb->nr_devices);
	printbuf_indent_add(out, 2);
	for (unsigned i = 0; i < sb->nr_devices; i++) {
		const struct tfs_member *m = tfs_sb_member(sb, i);

		if (m)
			tfs_member_to_text(out, m, i);
	}
	printbuf_indent_sub(out, 2);
}

/* Ranges as runs: "1-8 12 20-23". */
static void prt_ranges(struct printbuf *out, const struct tfs_sb_field_journal *f)
{
	for (unsigned i = 0; i < tfs_sb_journal_nr_ranges(f); i++) {
		u64 start = le64_to_cpu(f->ranges[i].start), nr = le64_to_cpu(f->ranges[i].nr);

		if (i)
			prt_char(out, ' ');
		if (nr == 1)
			prt_u64(out, start);
		else
			prt_printf(out, "%llu-%llu", (ull)start, (ull)(start + nr - 1));
	}
}

void tfs_sb_journal_to_text(struct printbuf *out, const struct tfs_sb *sb,
			    const struct tfs_sb_field_journal *f)
{
	u64 nr = 0;
	u32 bs = tfs_sb_bucket_size(sb);

	for (unsigned i = 0; i < tfs_sb_journal_nr_ranges(f); i++)
		nr += le64_to_cpu(f->ranges[i].nr);
	prt_printf(out, "Journal:\n");
	printbuf_indent_add(out, 2);
	value_tabstop_push(out);
	prt_name(out, "Buckets");
	prt_printf(out, "%llu\n", (ull)nr);
	prt_name(out, "Size");
	prt_units_u64(out, nr * bs);
	prt_newline(out);
	prt_name(out, "Bucket list");
	prt_ranges(out, f);
	prt_newline(out);
	printbuf_tabstop_pop(out);
	printbuf_indent_sub(out, 2);
}

void tfs_sb_clean_to_text(struct printbuf *out, const struct tfs_sb *sb,
			  const struct tfs_sb_field_clean *f)
{
	const struct tfs_clean_entry *e;
	unsigned idx = 0;

	prt_printf(out, "Clean:\n");
	printbuf_indent_add(out, 2);
	value_tabstop_push(out);
	prt_name(out, "Journal seq");
	prt_printf(out, "%llu\n", (ull)le64_to_cpu(f->journal_seq));
	for_each_clean_entry(f, e)
	{
		const char *type = tfs_clean_entry_type_str(e->type);

		prt_printf(out, "Entry %u:", idx++);
		prt_tab(out);
		if (type)
			prt_str(out, type);
		else
			prt_printf(out, "unknown type %u", e->type);
		prt_printf(out, " btree %u level %u, %u u64s\n", e->btree_id, e->level,
			   le16_to_cpu(e->u64s));
	}
	printbuf_tabstop_pop(out);
	printbuf_indent_sub(out, 2);
}

void tfs_sb_field_to_text(struct printbuf *out, const struct tfs_sb *sb,
			  const struct tfs_sb_field *f)
{
	switch (le32_to_cpu(f->type)) {
	case TFS_SB_FIELD_members:
		tfs_sb_members_to_text(out, sb, (const void *)f);
		break;
	case TFS_SB_FIELD_journal:
		tfs_sb_journal_to_text(out, sb, (const void *)f);
		break;
	case TFS_SB_FIELD_clean:
		tfs_sb_clean_to_text(out, sb, (const void *)f);
		break;
	default:
		prt_printf(out, "Field type %u: %u u64s\n", le32_to_cpu(f->type),
			   le32_to_cpu(f->u64s));
	}
}

static void prt_replicas(struct printbuf *out, unsigned want, unsigned req)
{
	prt_printf(out, "%u (required %u)\n", want, req);
}

static void prt_csum_type(struct printbuf *out, unsigned t)
{
	const char *s = tfs_csum_type_str(t);

	if (s)
		prt_str(out, s);
	else
		prt_printf(out, "unknown (%u)", t);
	prt_newline(out);
}

/* "members (18 u64s), journal (9 u64s), type 50 (2 u64s)", in order. */
static void fields_list(struct printbuf *out, const struct tfs_sb *sb)
{
	const __le64 *p = sb->_data, *end = sb->_data + le32_to_cpu(sb->u64s);
	unsigned idx = 0;

	if (p == end)
		prt_str(out, "none");
	for (; p < end; idx++) {
		const struct tfs_sb_field *f = (const void *)p;
		unsigned u64s = le32_to_cpu(f->u64s), type = le32_to_cpu(f->type);
		const char *name = tfs_sb_field_type_str(type);

		if (idx)
			prt_str(out, ", ");
		if (name)
			prt_str(out, name);
		else
			prt_printf(out, "type %u", type);
		if (!u64s || u64s > (size_t)(end - p)) {
			prt_printf(out, " (u64s %u: not a whole field; the rest is not shown)",
				   u64s);
			break;
		}
		prt_printf(out, " (%u u64s)", u64s);
		p += u64s;
	}
}

static bool field_wanted(const struct tfs_sb_to_text_opts *opts, unsigned type)
{
	return !opts || !opts->fields || (type < 32 && (opts->fields & (1U << type)));
}

void tfs_sb_to_text(struct printbuf *out, const struct tfs_sb *sb,
		    const struct tfs_sb_to_text_opts *opts)
{
	const char *action = tfs_error_action_str(sb->error_action);

	value_tabstop_push(out);
	if (opts && opts->device) {
		prt_name(out, "Device");
		prt_str(out, opts->device);
		prt_newline(out);
	}
	prt_name(out, "Magic");
	prt_printf(out, "0x%016llx\n", (ull)le64_to_cpu(sb->magic));
	prt_name(out, "External UUID");
	prt_uuid(out, sb->user_uuid);
	prt_newline(out);
	prt_name(out, "Internal UUID");
	prt_uuid(out, sb->uuid);
	prt_newline(out);
	prt_name(out, "Label");
	prt_field_str(out, sb->label, sizeof(sb->label));
	prt_newline(out);
	prt_name(out, "Version");
	prt_version(out, le16_to_cpu(sb->version));
	prt_newline(out);
	prt_name(out, "Oldest version");
	prt_version(out, le16_to_cpu(sb->version_min));
	prt_newline(out);
	prt_name(out, "Features");
	if (sb->features)
		prt_printf(out, "0x%llx (unknown)\n", (ull)le64_to_cpu(sb->features));
	else
		prt_str(out, "none\n");
	prt_name(out, "Seq");
	prt_printf(out, "%llu\n", (ull)le64_to_cpu(sb->seq));
	prt_name(out, "Created");
	prt_time(out, le64_to_cpu(sb->time_created), false);
	prt_newline(out);
	prt_name(out, "Written");
	prt_time(out, le64_to_cpu(sb->time_written), false);
	prt_newline(out);
	prt_name(out, "Block size");
	prt_units_u64(out, le32_to_cpu(sb->block_size));
	prt_newline(out);
	prt_name(out, "Btree node size");
	prt_units_u64(out, tfs_sb_btree_node_size(sb));
	prt_newline(out);
	prt_name(out, "Superblock size");
	prt_units_u64(out, tfs_sb_bytes(sb));
	prt_str(out, " of ");
	prt_units_u64(out, le32_to_cpu(sb->layout.sb_max_size));
	prt_newline(out);
	prt_name(out, "Checksum");
	prt_printf(out, "crc32c 0x%08x\n", le32_to_cpu(sb->csum));
	prt_name(out, "Clean");
	prt_str(out, le16_to_cpu(sb->flags) & TFS_SB_FLAG_CLEAN ? "yes\n" : "no\n");
	prt_name(out, "Device index");
	prt_printf(out, "%u\n", sb->dev_idx);
	prt_name(out, "Devices");
	prt_printf(out, "%u\n", sb->nr_devices);
	prt_name(out, "Metadata replicas");
	prt_replicas(out, sb->metadata_replicas, sb->metadata_replicas_required);
	prt_name(out, "Data replicas");
	prt_replicas(out, sb->data_replicas, sb->data_replicas_required);
	prt_name(out, "Metadata checksum");
	prt_csum_type(out, sb->metadata_csum_type);
	prt_name(out, "Data checksum");
	prt_csum_type(out, sb->data_csum_type);
	prt_name(out, "Error action");
	if (action)
		prt_str(out, action);
	else
		prt_printf(out, "unknown (%u)", sb->error_action);
	prt_newline(out);
	prt_name(out, "Fields");
	fields_list(out, sb);
	prt_newline(out);
	printbuf_tabstop_pop(out);

	if (opts && opts->layout) {
		prt_str(out, "Layout:\n");
		printbuf_indent_add(out, 2);
		layout_to_text(out, &sb->layout, opts);
		printbuf_indent_sub(out, 2);
	}

	const __le64 *p = sb->_data, *end = sb->_data + le32_to_cpu(sb->u64s);

	/* Only whole fields: a copy shown although invalid may say anything. */
	while (p < end) {
		const struct tfs_sb_field *f = (const void *)p;

		if (!f->u64s || le32_to_cpu(f->u64s) > (size_t)(end - p))
			break;
		if (field_wanted(opts, le32_to_cpu(f->type)))
			tfs_sb_field_to_text(out, sb, f);
		p += le32_to_cpu(f->u64s);
	}
}

/* --- JSON --- */

static void json_key(struct printbuf *out, bool *first, const char *key)
{
	if (!*first)
		prt_char(out, ',');
	*first = false;
	prt_json_str(out, key);
	prt_char(out, ':');
}

static void json_u64(struct printbuf *out, bool *first, const char *key, u64 v)
{
	json_key(out, first, key);
	prt_u64(out, v);
}

static void json_str(struct printbuf *out, bool *first, const char *key, const char *v)
{
	json_key(out, first, key);
	if (v)
		prt_json_str(out, v);
	else
		prt_str(out, "null");
}

static void json_field_str(struct printbuf *out, bool *first, const char *key, const char *s,
			   size_t size)
{
	char buf[TFS_LABEL_SIZE + 1];
	size_t len = min_t(size_t, tfs_strnlen_field(s, size), TFS_LABEL_SIZE);

	memcpy(buf, s, len);
	buf[len] = '\0';
	json_str(out, first, key, buf);
}

static void json_uuid(struct printbuf *out, bool *first, const char *key, const u8 *u)
{
	json_key(out, first, key);
	prt_char(out, '"');
	prt_uuid(out, u);
	prt_char(out, '"');
}

void tfs_sb_to_json(struct printbuf *out, const struct tfs_sb *sb,
		    const struct tfs_sb_to_text_opts *opts)
{
	bool first = true, f2;

	prt_char(out, '{');
	if (opts && opts->device)
		json_str(out, &first, "device", opts->device);
	json_key(out, &first, "magic");
	prt_printf(out, "\"0x%016llx\"", (ull)le64_to_cpu(sb->magic));
	json_uuid(out, &first, "user_uuid", sb->user_uuid);
	json_uuid(out, &first, "uuid", sb->uuid);
	json_field_str(out, &first, "label", sb->label, sizeof(sb->label));
	json_u64(out, &first, "version", le16_to_cpu(sb->version));
	json_u64(out, &first, "version_min", le16_to_cpu(sb->version_min));
	json_u64(out, &first, "features", le64_to_cpu(sb->features));
	json_u64(out, &first, "seq", le64_to_cpu(sb->seq));
	json_u64(out, &first, "time_created", le64_to_cpu(sb->time_created));
	json_u64(out, &first, "time_written", le64_to_cpu(sb->time_written));
	json_u64(out, &first, "block_size", le32_to_cpu(sb->block_size));
	json_u64(out, &first, "btree_node_size", tfs_sb_btree_node_size(sb));
	json_u64(out, &first, "sb_bytes", tfs_sb_bytes(sb));
	json_u64(out, &first, "csum", le32_to_cpu(sb->csum));
	json_key(out, &first, "clean");
	prt_str(out, le16_to_cpu(sb->flags) & TFS_SB_FLAG_CLEAN ? "true" : "false");
	json_u64(out, &first, "dev_idx", sb->dev_idx);
	json_u64(out, &first, "nr_devices", sb->nr_devices);
	json_u64(out, &first, "metadata_replicas", sb->metadata_replicas);
	json_u64(out, &first, "metadata_replicas_required", sb->metadata_replicas_required);
	json_u64(out, &first, "data_replicas", sb->data_replicas);
	json_u64(out, &first, "data_replicas_required", sb->data_replicas_required);
	json_str(out, &first, "metadata_csum_type", tfs_csum_type_str(sb->metadata_csum_type));
	json_str(out, &first, "data_csum_type", tfs_csum_type_str(sb->data_csum_type));
	json_str(out, &first, "error_action", tfs_error_action_str(sb->error_action));

	/* Every whole field in order: known types by name, others by number. */
	const __le64 *p = sb->_data, *end = sb->_data + le32_to_cpu(sb->u64s);

	json_key(out, &first, "fields");
	prt_char(out, '[');
	for (unsigned idx = 0; p < end; idx++) {
		const struct tfs_sb_field *f = (const void *)p;
		unsigned u64s = le32_to_cpu(f->u64s), type = le32_to_cpu(f->type);

		if (!u64s || u64s > (size_t)(end - p))
			break;
		f2 = true;
		prt_str(out, idx ? ",{" : "{");
		if (tfs_sb_field_type_str(type))
			json_str(out, &f2, "type", tfs_sb_field_type_str(type));
		else
			json_u64(out, &f2, "type", type);
		json_u64(out, &f2, "u64s", u64s);
		prt_char(out, '}');
		p += u64s;
	}
	prt_char(out, ']');

	if (opts && opts->layout) {
		const struct tfs_sb_layout *l = &sb->layout;

		json_key(out, &first, "layout");
		f2 = true;
		prt_char(out, '{');
		json_u64(out, &f2, "version", l->version);
		json_u64(out, &f2, "sb_max_size", le32_to_cpu(l->sb_max_size));
		json_uuid(out, &f2, "uuid", l->uuid);
		json_key(out, &f2, "sb_offsets");
		prt_char(out, '[');
		for (unsigned i = 0; i < l->nr_superblocks && i < TFS_SB_LAYOUT_MAX_COPIES; i++)
			prt_printf(out, "%s%llu", i ? "," : "", (ull)le64_to_cpu(l->sb_offset[i]));
		prt_char(out, ']');
		if (opts->copies) {
			json_key(out, &f2, "copies");
			prt_char(out, '[');
			for (unsigned i = 0; i < l->nr_superblocks && i < TFS_SB_LAYOUT_MAX_COPIES;
			     i++) {
				u64 off = le64_to_cpu(l->sb_offset[i]);
				const struct tfs_sb_copy_status *c = copy_status(opts, off);
				bool f3 = true;

				prt_str(out, i ? ",{" : "{");
				json_u64(out, &f3, "offset", off);
				json_key(out, &f3, "valid");
				prt_str(out, c && !c->code ? "true" : "false");
				if (c && !c->code) {
					json_u64(out, &f3, "seq", c->seq);
					json_key(out, &f3, "in_use");
				} else {
					json_str(out, &f3, "reason",
						 c ? c->why : "not read: not in the layout read");
					json_key(out, &f3, "shown");
				}
				prt_str(out, off == opts->shown_offset ? "true" : "false");
				prt_char(out, '}');
			}
			prt_char(out, ']');
		}
		prt_char(out, '}');
	}

	if (field_wanted(opts, TFS_SB_FIELD_members)) {
		json_key(out, &first, "members");
		prt_char(out, '[');
		for (unsigned i = 0; i < sb->nr_devices; i++) {
			const struct tfs_member *m = tfs_sb_member(sb, i);

			if (!m)
				break;
			f2 = true;
			prt_str(out, i ? ",{" : "{");
			json_u64(out, &f2, "index", i);
			json_uuid(out, &f2, "uuid", m->uuid);
			json_field_str(out, &f2, "label", m->label, sizeof(m->label));
			json_str(out, &f2, "state", tfs_member_state_str(m->state));
			json_u64(out, &f2, "nbuckets", le64_to_cpu(m->nbuckets));
			json_u64(out, &f2, "first_bucket", le64_to_cpu(m->first_bucket));
			json_u64(out, &f2, "bucket_size", le32_to_cpu(m->bucket_size));
			json_u64(out, &f2, "durability", m->durability);
			json_key(out, &f2, "discard");
			prt_str(out, m->discard ? "true" : "false");
			json_u64(out, &f2, "last_mount", le64_to_cpu(m->last_mount));
			prt_char(out, '}');
		}
		prt_char(out, ']');
	}

	if (field_wanted(opts, TFS_SB_FIELD_journal)) {
		const struct tfs_sb_field_journal *j = tfs_sb_journal(sb);

		json_u64(out, &first, "journal_nr_buckets", tfs_sb_journal_nr_buckets(sb));
		json_key(out, &first, "journal_ranges");
		prt_char(out, '[');
		for (unsigned i = 0; i < tfs_sb_journal_nr_ranges(j); i++) {
			f2 = true;
			prt_str(out, i ? ",{" : "{");
			json_u64(out, &f2, "start", le64_to_cpu(j->ranges[i].start));
			json_u64(out, &f2, "nr", le64_to_cpu(j->ranges[i].nr));
			prt_char(out, '}');
		}
		prt_char(out, ']');
	}

	const struct tfs_sb_field_clean *c = tfs_sb_clean(sb);

	if (c && field_wanted(opts, TFS_SB_FIELD_clean)) {
		const struct tfs_clean_entry *e;
		bool fe = true;

		json_key(out, &first, "clean_field");
		f2 = true;
		prt_char(out, '{');
		json_u64(out, &f2, "journal_seq", le64_to_cpu(c->journal_seq));
		json_key(out, &f2, "entries");
		prt_char(out, '[');
		for_each_clean_entry(c, e)
		{
			bool f3 = true;

			prt_str(out, fe ? "{" : ",{");
			fe = false;
			json_str(out, &f3, "type", tfs_clean_entry_type_str(e->type));
			json_u64(out, &f3, "btree_id", e->btree_id);
			json_u64(out, &f3, "level", e->level);
			json_u64(out, &f3, "u64s", le16_to_cpu(e->u64s));
			prt_char(out, '}');
		}
		prt_str(out, "]}");
	}
	prt_str(out, "}\n");
}
