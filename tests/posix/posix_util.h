/* SPDX-License-Identifier: GPL-2.0 */
#ifndef TFS_TESTS_POSIX_POSIX_UTIL_H
#define TFS_TESTS_POSIX_POSIX_UTIL_H

/*
 * Helpers the posix proxies (conform, fsx, stress) share.  Plain C and libc
 * only, like the programs themselves: they run on any mount.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* Whether the n bytes at p are all zero. */
static inline bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

/* Whether name is one of the words of list (comma-separated, "a,b,c"). */
static inline bool name_in_list(const char *list, const char *name)
{
	size_t l = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p++)
		if ((p == list || p[-1] == ',') && (!p[l] || p[l] == ','))
			return true;
	return false;
}

/* Removes name (below dfd) and all it holds; by descriptors, as paths may pass PATH_MAX. */
static inline int rm_tree(int dfd, const char *name)
{
	struct dirent *e;
	int fd, r = 0;
	DIR *d;

	if (!unlinkat(dfd, name, 0) || errno == ENOENT)
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r |= rm_tree(dirfd(d), e->d_name);
	closedir(d);
	return r | unlinkat(dfd, name, AT_REMOVEDIR);
}

#endif /* TFS_TESTS_POSIX_POSIX_UTIL_H */
