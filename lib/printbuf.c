// SPDX-License-Identifier: GPL-2.0
#include "lib/printbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errcode.h"
#include "lib/fault_point.h"

/* ---- memory ---- */

bool printbuf_make_room(struct printbuf *out, unsigned extra)
{
	u64 need = (u64)out->pos + extra + 1;

	if (need <= out->size)
		return true;
	/* After one failure nothing more is added, so the text stays a
	 * prefix of what was asked for. */
	if (out->allocation_failure)
		return false;
	if (!out->heap_allocated || need > UINT_MAX / 2)
		goto fail;
	if (tfs_fault("alloc:printbuf"))
		goto fail;

	/* Grow geometrically so n appends cost O(n) copies in total. */
	u64 new_size = out->size ? (u64)out->size * 2 : 64;

	while (new_size < need)
		new_size *= 2;
	char *p = realloc(out->buf, new_size);

	if (!p)
		goto fail;
	if (!out->buf)
		p[0] = '\0';
	out->buf = p;
	out->size = (unsigned)new_size;
	return true;
fail:
	out->allocation_failure = true;
	return false;
}

void printbuf_exit(struct printbuf *out)
{
	if (out->heap_allocated) {
		free(out->buf);
		out->buf = NULL;
		out->size = 0;
	}
	printbuf_reset(out);
}

void printbuf_reset(struct printbuf *out)
{
	out->pos = 0;
	out->last_newline = 0;
	out->last_field = 0;
	out->line_indent = 0;
	out->cur_tabstop = 0;
	out->allocation_failure = false;
	if (out->size)
		out->buf[0] = '\0';
}

char *printbuf_detach(struct printbuf *out)
{
	char *s = out->buf;

	if (!out->heap_allocated)
		return NULL;
	if (!s)
		s = calloc(1, 1);
	out->buf = NULL;
	out->size = 0;
	printbuf_reset(out);
	return s;
}

/* Largest text length the buffer can hold right now. */
static unsigned printbuf_capacity(const struct printbuf *out)
{
	return out->size ? out->size - 1 : 0;
}

/*
 * Inserts n copies of c at position at (<= pos), growing if possible.  When
 * the buffer cannot hold everything, text is dropped from the end.  Returns
 * how many copies of c were inserted.
 */
static unsigned printbuf_insert(struct printbuf *out, unsigned at, char c, unsigned n)
{
	/* After a failure nothing more is added, so the text stays a prefix of
	 * what was asked for, even where removing a '\t' freed a byte. */
	if (!n || out->allocation_failure)
		return 0;
	printbuf_make_room(out, n);

	unsigned cap = printbuf_capacity(out);
	unsigned old_pos = out->pos;

	if (at > cap)
		at = cap;
	unsigned fill = min_t(unsigned, n, cap - at);
	unsigned keep = min_t(unsigned, old_pos - at, cap - at - fill);

	if (!out->size)
		goto out;
	memmove(out->buf + at + fill, out->buf + at, keep);
	memset(out->buf + at, c, fill);
	out->pos = at + fill + keep;
	out->buf[out->pos] = '\0';
out:
	if (fill < n || keep < old_pos - at)
		out->allocation_failure = true;
	return fill;
}

static void printbuf_delete(struct printbuf *out, unsigned at, unsigned n)
{
	memmove(out->buf + at, out->buf + at + n, out->pos - at - n);
	out->pos -= n;
	out->buf[out->pos] = '\0';
}

/* Appends len bytes as they are; returns how many fit. */
static unsigned printbuf_append_raw(struct printbuf *out, const void *data, size_t len)
{
	if (out->allocation_failure)
		return 0;
	if (len > UINT_MAX / 4) {
		out->allocation_failure = true;
		len = UINT_MAX / 4;
	}

	/* Appending our own text: growing may move it, so keep an offset. */
	const char *src = data;
	bool own = out->buf && src >= out->buf && src < out->buf + out->size;
	size_t own_off = own ? (size_t)(src - out->buf) : 0;

	printbuf_make_room(out, (unsigned)len);
	if (own)
		data = out->buf + own_off;

	unsigned n = min_t(unsigned, (unsigned)len, printbuf_capacity(out) - out->pos);

	if (n < len)
		out->allocation_failure = true;
	if (!out->size)
		return 0;
	memcpy(out->buf + out->pos, data, n);
	out->pos += n;
	out->buf[out->pos] = '\0';
	return n;
}

/* ---- layout ---- */

/* Column of byte i on the current line, measured from the line's indent. */
static unsigned printbuf_column(const struct printbuf *out, unsigned i)
{
	unsigned col = i - out->last_newline;

	return col > out->line_indent ? col - out->line_indent : 0;
}

/* True when the current line holds nothing but its indent. */
static bool printbuf_line_empty(const struct printbuf *out)
{
	return out->pos == out->last_newline + out->line_indent;
}

/*
 * Gives '\n', '\t' and '\r' in text[from, pos) their meanings: newline with
 * indent, pad to the next stop, right-justify to the next stop.
 */
static void printbuf_expand(struct printbuf *out, unsigned i)
{
	while (i < out->pos) {
		char c = out->buf[i];

		if (c != '\n' && c != '\t' && c != '\r') {
			i++;
			continue;
		}

		if (c == '\n') {
			i++;
			out->last_newline = i;
			out->cur_tabstop = 0;
			out->line_indent = printbuf_insert(out, i, ' ', out->indent);
			i += out->line_indent;
			out->last_field = i;
			continue;
		}

		printbuf_delete(out, i, 1);

		bool have_stop = out->cur_tabstop < out->nr_tabstops;
		unsigned stop = have_stop ? out->tabstops[out->cur_tabstop] : 0;
		unsigned col = printbuf_column(out, i);

		if (c == '\t') {
			/* Reaching or passing the stop still separates fields. */
			unsigned pad = have_stop && stop > col ? stop - col : 1;

			i += printbuf_insert(out, i, ' ', pad);
		} else if (have_stop && stop > col) {
			/* Right-justify: pad before the field, not after. */
			unsigned at = out->last_field;

			if (at < out->last_newline)
				at = out->last_newline;
			i += printbuf_insert(out, at, ' ', stop - col);
		}
		/* An overflowing rjust field is left whole, unpadded. */

		if (i > out->pos)
			i = out->pos;
		out->last_field = i;
		if (have_stop)
			out->cur_tabstop++;
	}
}

void printbuf_indent_add(struct printbuf *out, unsigned n)
{
	unsigned room = out->indent < PRINTBUF_MAX_INDENT ? PRINTBUF_MAX_INDENT - out->indent : 0;

	n = min_t(unsigned, n, room);
	out->indent += n;
	if (printbuf_line_empty(out)) {
		out->line_indent += printbuf_insert(out, out->pos, ' ', n);
		out->last_field = out->pos;
	}
}

void printbuf_indent_sub(struct printbuf *out, unsigned n)
{
	n = min_t(unsigned, n, out->indent);
	out->indent -= n;
	/* Only indent spaces are taken back, never text. */
	if (printbuf_line_empty(out) && out->size) {
		unsigned drop = min_t(unsigned, n, out->line_indent);

		out->pos -= drop;
		out->line_indent -= drop;
		out->buf[out->pos] = '\0';
		out->last_field = out->pos;
	}
}

int printbuf_tabstop_push(struct printbuf *out, unsigned width)
{
	if (out->nr_tabstops >= PRINTBUF_MAX_TABSTOPS || width > PRINTBUF_MAX_INDENT)
		return -EINVAL;

	unsigned prev = out->nr_tabstops ? out->tabstops[out->nr_tabstops - 1] : 0;

	out->tabstops[out->nr_tabstops++] = prev + width;
	return 0;
}

void printbuf_tabstop_pop(struct printbuf *out)
{
	if (out->nr_tabstops)
		out->nr_tabstops--;
	if (out->cur_tabstop > out->nr_tabstops)
		out->cur_tabstop = out->nr_tabstops;
}

void printbuf_tabstops_reset(struct printbuf *out)
{
	out->nr_tabstops = 0;
	out->cur_tabstop = 0;
}

/* ---- output ---- */

void prt_strn(struct printbuf *out, const char *str, size_t len)
{
	unsigned start = out->pos;

	printbuf_append_raw(out, str, len);
	printbuf_expand(out, start);
}

void prt_str(struct printbuf *out, const char *str)
{
	prt_strn(out, str, strlen(str));
}

void prt_char(struct printbuf *out, char c)
{
	prt_strn(out, &c, 1);
}

void prt_chars(struct printbuf *out, char c, unsigned n)
{
	printbuf_insert(out, out->pos, c, n);
}

void prt_bytes(struct printbuf *out, const void *data, size_t len)
{
	printbuf_append_raw(out, data, len);
}

void prt_newline(struct printbuf *out)
{
	prt_char(out, '\n');
}

void prt_tab(struct printbuf *out)
{
	prt_char(out, '\t');
}

void prt_tab_rjust(struct printbuf *out)
{
	prt_char(out, '\r');
}

void prt_vprintf(struct printbuf *out, const char *fmt, va_list args)
{
	unsigned start = out->pos;
	unsigned avail = out->size - out->pos; /* includes the NUL's byte */
	va_list args2;

	va_copy(args2, args);
	int len = vsnprintf(out->size ? out->buf + out->pos : NULL, avail, fmt, args2);
	va_end(args2);
	if (len < 0)
		return;

	if ((unsigned)len >= avail) {
		if (printbuf_make_room(out, (unsigned)len)) {
			va_copy(args2, args);
			vsnprintf(out->buf + out->pos, out->size - out->pos, fmt, args2);
			va_end(args2);
		} else {
			/* vsnprintf kept what fit, NUL-terminated. */
			out->allocation_failure = true;
			len = avail ? (int)avail - 1 : 0;
		}
	}
	out->pos += (unsigned)len;
	printbuf_expand(out, start);
}

void prt_printf(struct printbuf *out, const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	prt_vprintf(out, fmt, args);
	va_end(args);
}

void prt_u64(struct printbuf *out, u64 v)
{
	prt_printf(out, "%llu", (unsigned long long)v);
}

void prt_s64(struct printbuf *out, s64 v)
{
	prt_printf(out, "%lld", (long long)v);
}

void prt_units_u64(struct printbuf *out, u64 v)
{
	static const char *const iec[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	static const char *const si[] = { "B", "kB", "MB", "GB", "TB", "PB", "EB" };
	const char *const *units = out->si_units ? si : iec;
	unsigned base = out->si_units ? 1000 : 1024;

	if (out->raw_units) {
		prt_u64(out, v);
		return;
	}
	if (v < base) {
		prt_printf(out, "%llu B", (unsigned long long)v);
		return;
	}

	unsigned u = 0;
	unsigned __int128 div = 1;

	while (u + 1 < ARRAY_SIZE(iec) && v >= div * base) {
		div *= base;
		u++;
	}

	unsigned __int128 tenths = ((unsigned __int128)v * 10 + div / 2) / div;

	/* 1023.96 KiB rounds to 1024.0 KiB: say 1.0 MiB instead. */
	if (tenths >= (unsigned __int128)base * 10 && u + 1 < ARRAY_SIZE(iec)) {
		div *= base;
		u++;
		tenths = ((unsigned __int128)v * 10 + div / 2) / div;
	}
	prt_printf(out, "%llu.%u %s", (unsigned long long)(tenths / 10), (unsigned)(tenths % 10),
		   units[u]);
}

void prt_units_s64(struct printbuf *out, s64 v)
{
	if (v < 0) {
		prt_char(out, '-');
		prt_units_u64(out, (u64)(-(v + 1)) + 1);
	} else {
		prt_units_u64(out, (u64)v);
	}
}

void prt_units_u64_vs(struct printbuf *out, u64 bytes, u64 other)
{
	PRINTBUF_ONSTACK(a, 32);
	PRINTBUF_ONSTACK(b, 32);

	a.si_units = b.si_units = out->si_units;
	a.raw_units = b.raw_units = out->raw_units;
	prt_units_u64(&a, bytes);
	prt_units_u64(&b, other);
	if (bytes != other && !strcmp(printbuf_str(&a), printbuf_str(&b)))
		prt_printf(out, "%llu bytes", (unsigned long long)bytes);
	else
		prt_str(out, printbuf_str(&a));
}

void prt_hex_bytes(struct printbuf *out, const void *data, size_t len, unsigned group,
		   char separator)
{
	static const char digits[] = "0123456789abcdef";
	const u8 *p = data;

	for (size_t i = 0; i < len; i++) {
		char pair[2] = { digits[p[i] >> 4], digits[p[i] & 15] };

		if (group && i && !(i % group))
			printbuf_append_raw(out, &separator, 1);
		printbuf_append_raw(out, pair, 2);
	}
}

void prt_uuid(struct printbuf *out, const u8 uuid[16])
{
	prt_hex_bytes(out, uuid, 4, 0, 0);
	prt_char(out, '-');
	prt_hex_bytes(out, uuid + 4, 2, 0, 0);
	prt_char(out, '-');
	prt_hex_bytes(out, uuid + 6, 2, 0, 0);
	prt_char(out, '-');
	prt_hex_bytes(out, uuid + 8, 2, 0, 0);
	prt_char(out, '-');
	prt_hex_bytes(out, uuid + 10, 6, 0, 0);
}

/*
 * Length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
 * surrogates, at most U+10FFFF) starting at the non-ASCII byte p, or 0.
 */
static unsigned utf8_seq_len(const unsigned char *p)
{
	unsigned n, cp;

	if (*p >= 0xc2 && *p <= 0xdf)
		n = 1, cp = *p & 0x1f;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 2, cp = *p & 0x0f;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 3, cp = *p & 0x07;
	else
		return 0;
	for (unsigned k = 1; k <= n; k++) {
		/* The NUL terminator is not a continuation byte: no overrun. */
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[k] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n + 1;
}

void prt_json_str(struct printbuf *out, const char *str)
{
	printbuf_append_raw(out, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		char esc[8];
		const char *e = NULL;

		switch (*p) {
		case '"':
			e = "\\\"";
			break;
		case '\\':
			e = "\\\\";
			break;
		case '\n':
			e = "\\n";
			break;
		case '\r':
			e = "\\r";
			break;
		case '\t':
			e = "\\t";
			break;
		case '\b':
			e = "\\b";
			break;
		case '\f':
			e = "\\f";
			break;
		default:
			if (*p < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *p);
				e = esc;
			} else if (*p >= 0x80) {
				unsigned n = utf8_seq_len(p);

				/* JSON text must be UTF-8: a bad byte becomes U+FFFD. */
				if (!n) {
					e = "\\ufffd";
				} else {
					printbuf_append_raw(out, p, n);
					p += n - 1;
					continue;
				}
			}
		}
		if (e)
			printbuf_append_raw(out, e, strlen(e));
		else
			printbuf_append_raw(out, p, 1);
	}
	printbuf_append_raw(out, "\"", 1);
}

void prt_errcode(struct printbuf *out, int err)
{
	prt_str(out, tfs_err_str(err));
}

void prt_err_desc(struct printbuf *out, int err)
{
	int class = tfs_err_class(err);

	prt_str(out, tfs_err_str(class));
	if (class != (err > 0 ? -err : err))
		prt_printf(out, " (%s)", tfs_err_str(err));
}
