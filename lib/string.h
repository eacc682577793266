/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_LIB_STRING_H
#define TFS_LIB_STRING_H

/*
 * Bounded string copies.  tinyfs never uses strcpy, strncpy, strcat,
 * strncat, sprintf, vsprintf, strlcpy or gets, and a lint test enforces it:
 * text is built with printbuf, and fixed-size fields are filled with
 * tfs_strscpy().
 */

#include <stddef.h>
#include <sys/types.h>

/*
 * Copies src into dst (size bytes), with the kernel's strscpy semantics:
 * dst is always NUL-terminated when size > 0; returns the length copied
 * (excluding the NUL), or -E2BIG when src did not fit (dst then holds the
 * truncated prefix) or size is 0.
 */
ssize_t tfs_strscpy(char *dst, const char *src, size_t size);

/*
 * Copies src into a fixed-width on-disk field of size bytes: the bytes after
 * the text are zeroed and the field is NUL-terminated only if there is room
 * (a label of exactly size bytes fills the field).  Returns the length, or
 * -E2BIG when src is longer than size.  Nothing is written on -E2BIG.
 */
ssize_t tfs_strpad(char *dst, const char *src, size_t size);

/* Length of a fixed-width field: up to the first NUL, at most size. */
size_t tfs_strnlen_field(const char *field, size_t size);

#endif /* TFS_LIB_STRING_H */
