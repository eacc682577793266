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

static bool is_tfs_code(unsigned code)
{
	return code >= TFS_ERR_START && code < TFS_ERR_MAX;
}

/* |err| without abs()'s undefined behaviour at INT_MIN. */
static unsigned err_abs(int err)
{
	return err < 0 ? 0u - (unsigned)err : (unsigned)err;
}

/* Unknown codes above the errno range are treated as EIO everywhere. */
static unsigned err_parent(unsigned code)
{
	if (is_tfs_code(code))
		return (unsigned)tfs_errcode_parents[code - TFS_ERR_START];
	return code >= TFS_ERR_START ? EIO : 0;
}

const char *tfs_err_str(int err)
{
	unsigned code = err_abs(err);

	if (!code)
		return "success";
	if (is_tfs_code(code))
		return tfs_errcode_names[code - TFS_ERR_START];
	if (code >= TFS_ERR_START)
		return "unknown tinyfs error code";
	/* strerror() is not thread safe in theory; strerrordesc_np() is. */
	const char *s = strerrordesc_np((int)code);

	return s ? s : "unknown error";
}

int tfs_err_parent(int err)
{
	return (int)err_parent(err_abs(err));
}

int tfs_err_class(int err)
{
	unsigned code = err_abs(err);

	while (code >= TFS_ERR_START)
		code = err_parent(code);
	return -(int)code;
}

bool tfs_err_matches(int err, int class)
{
	unsigned code = err_abs(err), want = err_abs(class);

	if (!code)
		return !want;

	while (1) {
		if (code == want)
			return true;
		if (code < TFS_ERR_START)
			return false;
		code = err_parent(code);
	}
}
