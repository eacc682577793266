// SPDX-License-Identifier: GPL-2.0
/*
 * btree_fill: commits keys into a filesystem's btrees through the engine, so
 * the tools' tests have trees to list (the POSIX layer is not there yet).
 *
 *	btree_fill BTREE N [VALUE_BYTES] [nostop] DEV...
 *
 * Commits N cookie keys at positions 1:0 .. 1:N-1 of BTREE (five per
 * transaction), each with VALUE_BYTES (default 8) bytes of value (byte i of
 * key k is k + i), flushes, and stops cleanly; with "nostop" it flushes and
 * exits without stopping (a crash: the keys are only in the journal).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/btree.h"
#include "fs/fs.h"
#include "lib/errcode.h"

int main(int argc, char **argv)
{
	struct tfs_fs_opts opts;
	struct tfs_btree_trans trans;
	struct tfs_bkey_buf buf;
	struct tfs_fs *fs;
	int argi = 3, id, ret = 0;
	unsigned n, val = 8;
	bool nostop = false;
	u64 seq = 0;

	if (argc < 4 || (id = tfs_btree_id_parse(argv[1])) < 0) {
		fprintf(stderr, "usage: btree_fill BTREE N [VALUE_BYTES] [nostop] DEV...\n");
		return 2;
	}
	n = (unsigned)atoi(argv[2]);
	if (argi < argc && argv[argi][0] >= '0' && argv[argi][0] <= '9')
		val = (unsigned)atoi(argv[argi++]);
	if (argi < argc && !strcmp(argv[argi], "nostop")) {
		nostop = true;
		argi++;
	}
	tfs_fs_opts_default(&opts);
	ret = tfs_fs_open((const char *const *)argv + argi, argc - argi, &opts, &fs);
	if (ret) {
		fprintf(stderr, "btree_fill: open: %s\n", tfs_err_str(ret));
		return 1;
	}
	tfs_trans_init(&trans, fs);
	for (unsigned k = 0; k < n && !ret; k++) {
		u8 *v = tfs_bkey_init(&buf, TFS_BKEY_cookie, TFS_POS(1, k), val);

		for (unsigned i = 0; i < val; i++)
			v[i] = (u8)(k + i);
		ret = tfs_trans_update(&trans, id, &buf.k);
		if (!ret && (k % 5 == 4 || k + 1 == n))
			ret = tfs_trans_commit(&trans, 0, &seq);
	}
	tfs_trans_exit(&trans);
	if (!ret)
		ret = tfs_fs_flush_seq(fs, seq);
	if (ret)
		fprintf(stderr, "btree_fill: %s\n", tfs_err_str(ret));
	if (nostop)
		_exit(ret ? 1 : 0); /* no write-back, no clean section: as after a crash */
	ret = tfs_fs_stop(fs) ?: ret;
	return ret ? 1 : 0;
}
