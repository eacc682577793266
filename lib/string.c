// SPDX-License-Identifier: GPL-2.0
#include "lib/string.h"

#include <errno.h>
#include <string.h>

ssize_t tfs_strscpy(char *dst, const char *src, size_t size)
{
	size_t len;

	if (!size)
		return -E2BIG;
	len = strnlen(src, size);
	if (len == size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -E2BIG;
	}
	memcpy(dst, src, len + 1);
	return (ssize_t)len;
}

ssize_t tfs_strpad(char *dst, const char *src, size_t size)
{
	size_t len = strnlen(src, size);

	if (len == size && src[len])
		return -E2BIG;
	memcpy(dst, src, len);
	memset(dst + len, 0, size - len);
	return (ssize_t)len;
}

size_t tfs_strnlen_field(const char *field, size_t size)
{
	return strnlen(field, size);
}
