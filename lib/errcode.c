// SPDX-License-Identifier: GPL-2.0
#include "lib/errcode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const tfs_errcode_names[] = {
#define x(class, name) [TFS_ERR_##name - TFS_ERR_START] = #name,
	TFS_ERRCODES(x)
#undef x
};

static const int tfs_errcode_parents[] = {
#define x(class, name) [TFS_ERR_##name - TFS_ERR_START] = class,
	TFS_ERRCODES(x)
#undef x
};

static bool is_tfs_code(int code)
{
	return code >= TFS_ERR_START && code < TFS_ERR_MAX;
}

const char *tfs_err_str(int err)
{
	int code = abs(err);

	if (!code)
		return "success";
	if (is_tfs_code(code))
		return tfs_errcode_names[code - TFS_ERR_START];
	if (code >= TFS_ERR_START)
		return "unknown tinyfs error code";
	/* strerror() is not thread safe in theory; strerrordesc_np() is. */
	const char *s = strerrordesc_np(code);

	return s ? s : "unknown error";
}

int tfs_err_parent(int err)
{
	int code = abs(err);

	return is_tfs_code(code) ? tfs_errcode_parents[code - TFS_ERR_START] : 0;
}

int tfs_err_class(int err)
{
	int code = abs(err);

	while (is_tfs_code(code))
		code = tfs_errcode_parents[code - TFS_ERR_START];
	if (code >= TFS_ERR_START)
		code = EIO;
	return -code;
}

bool tfs_err_matches(int err, int class)
{
	int code = abs(err);

	class = abs(class);
	if (!code)
		return !class;

	while (1) {
		if (code == class)
			return true;
		if (!is_tfs_code(code))
			return false;
		code = tfs_errcode_parents[code - TFS_ERR_START];
	}
}
