/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_PRINTBUF_H
#define TFS_LIB_PRINTBUF_H

/*
 * printbuf: the one way tinyfs builds text.
 *
 * Invariants (modelled on git's strbuf and bcachefs's printbuf):
 *  - buf[pos] is always '\0' once anything has been written, and pos is the
 *    length of the text; printbuf_str() is always a valid C string.
 *  - Nothing is ever written past buf[size - 1].
 *  - A heap printbuf (PRINTBUF) grows as needed.  When growing fails, output
 *    is lost from the end and allocation_failure is set.  The flag is sticky,
 *    so a long series of calls needs a single check at the end.
 *  - A fixed printbuf (printbuf_extern()) writes into the caller's buffer,
 *    never allocates (usable where allocation is not allowed) and truncates
 *    safely: text that does not fit is dropped and allocation_failure is set.
 *  - The printbuf has no read position: a reader keeps its own.
 *
 * Layout:
 *  - '\n' (or prt_newline()) starts a line and applies the current indent;
 *    printbuf_indent_add()/sub() change it for every following line.
 *  - Tabstops are columns, pushed with printbuf_tabstop_push(out, width)
 *    (each relative to the previous).  '\t' (or prt_tab()) pads the current
 *    field with spaces up to the next stop; '\r' (or prt_tab_rjust())
 *    right-justifies the current field so it ends at the next stop.  A field
 *    that reaches or overflows its stop is followed by exactly one space, so
 *    fields never run together.  A newline resets to the first stop.
  *  - '\t', '\r' and '\n' have these meanings in every prt_* call that takes
 *    text (prt_str, prt_printf, prt_char); prt_bytes() and prt_chars() copy
 *    bytes as they are, and a '\n' among them does not start a line for
 *    indent or tabstops.
 *  - After a truncation, later calls add nothing (the text is a prefix of
 *    what was asked for); a field cut short loses its tab or right-justify.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/types.h"

#define PRINTBUF_MAX_TABSTOPS 16
/* Bound on the indent and on each tabstop width, so sums cannot wrap. */
#define PRINTBUF_MAX_INDENT 4096

struct printbuf {
	char *buf;
	unsigned size;	       /* bytes available at buf, including the NUL */
	unsigned pos;	       /* length of the text */
	unsigned last_newline; /* pos of the first byte of the current line */
	unsigned last_field;   /* pos of the first byte of the current field */
	unsigned indent;       /* spaces applied after every newline */
	unsigned line_indent;  /* indent spaces written on the current line */
	unsigned nr_tabstops;
	unsigned cur_tabstop;			  /* index of the next stop on this line */
	unsigned tabstops[PRINTBUF_MAX_TABSTOPS]; /* absolute columns */
	bool heap_allocated;			  /* buf is ours: grow and free it */
	bool allocation_failure;		  /* some output was lost (sticky) */
	bool si_units;				  /* prt_units_*: powers of 1000, not 1024 */
	bool raw_units;				  /* prt_units_*: plain numbers, no units */
};

/* A heap-backed printbuf; release it with printbuf_exit(). */
#define PRINTBUF ((struct printbuf){ .heap_allocated = true })

/* A printbuf over the caller's buffer (size bytes, including the NUL). */
static inline struct printbuf printbuf_extern(char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	return (struct printbuf){ .buf = buf, .size = (unsigned)size };
}

/* Declare `name`, a fixed printbuf over `bytes` bytes of stack. */
#define PRINTBUF_ONSTACK(name, bytes) \
	char name##_storage[bytes];   \
	struct printbuf name = printbuf_extern(name##_storage, bytes)

/* Frees a heap printbuf's memory and resets it to empty; safe to repeat. */
void printbuf_exit(struct printbuf *out);

/*
 * Empties the text and clears allocation_failure, keeping memory, tabstops,
 * the indent (applied from the next newline on) and the unit flags.
 */
void printbuf_reset(struct printbuf *out);

/* The text; "" when nothing was written.  Valid until the next prt_*. */
static inline const char *printbuf_str(const struct printbuf *out)
{
	return out->pos ? out->buf : "";
}

/*
 * Makes room for at least extra more bytes of text.  Returns false (and sets
 * allocation_failure) when a heap buffer cannot grow or a fixed one is too
 * small.
 */
bool printbuf_make_room(struct printbuf *out, unsigned extra);

/*
 * Detaches the text from a heap printbuf: the caller frees it.  Check
 * allocation_failure first: the text may be incomplete.  NULL for a fixed
 * printbuf (its buffer is the caller's) or when allocating "" failed.  The
 * printbuf is left empty.
 */
char *printbuf_detach(struct printbuf *out);

/* --- indent and tabstops --- */

/* Adds n spaces of indent (at most PRINTBUF_MAX_INDENT in all); applied now
 * if the current line holds nothing but its indent. */
void printbuf_indent_add(struct printbuf *out, unsigned n);
/* Removes n spaces of indent (never below 0); on a line that holds nothing
 * but its indent, takes back up to n of those spaces (never text). */
void printbuf_indent_sub(struct printbuf *out, unsigned n);

/* Adds a stop `width` columns after the previous one (or after column 0).
 * Returns 0, or -EINVAL when PRINTBUF_MAX_TABSTOPS are already set or width
 * exceeds PRINTBUF_MAX_INDENT. */
int printbuf_tabstop_push(struct printbuf *out, unsigned width);
/* Removes the last stop. */
void printbuf_tabstop_pop(struct printbuf *out);
/* Removes every stop. */
void printbuf_tabstops_reset(struct printbuf *out);

/* Column of the end of the text on the current line. */
static inline unsigned printbuf_linelen(const struct printbuf *out)
{
	return out->pos - out->last_newline;
}

/* --- output --- */

/* Appends a NUL-terminated string (with '\t', '\r', '\n' meanings). */
void prt_str(struct printbuf *out, const char *str);
/* Appends len bytes of str (with '\t', '\r', '\n' meanings). */
void prt_strn(struct printbuf *out, const char *str, size_t len);
/* Appends one character (with '\t', '\r', '\n' meanings). */
void prt_char(struct printbuf *out, char c);
/* Appends n copies of c, verbatim. */
void prt_chars(struct printbuf *out, char c, unsigned n);
/* Appends len raw bytes, verbatim (a NUL byte is kept in the text). */
void prt_bytes(struct printbuf *out, const void *data, size_t len);
/* printf-style append (with '\t', '\r', '\n' meanings).  No argument may
 * point into out's own buffer (growing may move it); prt_str() may. */
__attribute__((format(printf, 2, 3))) void prt_printf(struct printbuf *out, const char *fmt, ...);
__attribute__((format(printf, 2, 0))) void prt_vprintf(struct printbuf *out, const char *fmt,
						       va_list args);

/* Ends the line and indents the next one. */
void prt_newline(struct printbuf *out);
/* Pads the current field with spaces to the next tabstop. */
void prt_tab(struct printbuf *out);
/* Right-justifies the current field to end at the next tabstop. */
void prt_tab_rjust(struct printbuf *out);

/* Decimal numbers. */
void prt_u64(struct printbuf *out, u64 v);
void prt_s64(struct printbuf *out, s64 v);

/*
 * Human-readable size in bytes: "1023 B", "1.0 KiB", "4.0 MiB", "16.0 EiB";
 * one decimal, rounded to nearest, moving to the next unit when rounding
 * reaches 1024 of the current one.  With out->si_units: powers of 1000
 * ("1.0 kB").  With out->raw_units: the plain number of bytes.
 */
void prt_units_u64(struct printbuf *out, u64 bytes);
/* Same for a signed quantity ("-4.0 KiB"). */
void prt_units_s64(struct printbuf *out, s64 bytes);
/*
 * bytes as prt_units_u64() prints it, unless that reads the same as `other`
 * would while the two differ: then the exact "N bytes".  For messages that
 * compare two sizes ("X do not fit in Y"), so they never show equal ones.
 */
void prt_units_u64_vs(struct printbuf *out, u64 bytes, u64 other);

/* Lower-case hex of len bytes; a separator after each group of `group`
 * bytes (group 0: no separators). */
void prt_hex_bytes(struct printbuf *out, const void *data, size_t len, unsigned group,
		   char separator);

/* 16-byte uuid in the canonical 8-4-4-4-12 lower-case form. */
void prt_uuid(struct printbuf *out, const u8 uuid[16]);

/* A string as a JSON string literal, quotes included, escaped as RFC 8259
 * requires (control characters as \u00XX).  The output is always valid
 * UTF-8: valid UTF-8 sequences are copied, and each byte that does not start
 * one (invalid, overlong, surrogate, truncated) becomes \ufffd. */
void prt_json_str(struct printbuf *out, const char *str);

/* Name of the tinyfs or errno code err (see lib/errcode.h). */
void prt_errcode(struct printbuf *out, int err);
/*
 * err for a user: the text of its errno class, and for a tinyfs code its
 * name after it ("No such device (bdev_vanished)"; "Input/output error").
 */
void prt_err_desc(struct printbuf *out, int err);

#endif /* TFS_LIB_PRINTBUF_H */
