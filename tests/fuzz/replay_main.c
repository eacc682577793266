// SPDX-License-Identifier: GPL-2.0
/*
 * The main() of a fuzz target outside libFuzzer: runs the target's
 * LLVMFuzzerTestOneInput() once over each file given, or each file of each
 * directory given (sorted by name, dot files skipped), so `meson test`
 * replays the seed and regression corpora in every build, gcc ones too.
 *
 *	fuzz_TARGET_replay PATH...
 *
 * A crash (or a sanitizer report) in the target fails the run; a path that
 * cannot be read fails it too, so a misspelt corpus is not a silent pass.
 * Prints how many inputs ran.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/printbuf.h"
#include "tests/fuzz/fuzz.h"

/* Optional in a target, as in libFuzzer. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	u8 *buf;

	if (!f || fstat(fileno(f), &st)) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(st.st_size ?: 1);
	if (!buf || fread(buf, 1, st.st_size, f) != (size_t)st.st_size) {
		fprintf(stderr, "%s: cannot read %lld bytes\n", path, (long long)st.st_size);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* An exact-size copy, as libFuzzer gives: ASan sees reads past it. */
	u8 *data = fuzz_dup(buf, st.st_size);

	free(buf);
	fprintf(stderr, "replaying %s (%lld bytes)\n", path, (long long)st.st_size);
	LLVMFuzzerTestOneInput(data, st.st_size);
	free(data);
	return 0;
}

static int skip_dots(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int main(int argc, char **argv)
{
	unsigned nr = 0;
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent **names;
		int n;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			ret = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			ret |= run_file(argv[i]) ? 1 : 0;
			nr++;
			continue;
		}
		n = scandir(argv[i], &names, skip_dots, alphasort);
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			ret = 1;
			continue;
		}
		for (int k = 0; k < n; k++) {
			struct printbuf path = PRINTBUF;

			prt_printf(&path, "%s/%s", argv[i], names[k]->d_name);
			ret |= run_file(printbuf_str(&path)) ? 1 : 0;
			nr++;
			printbuf_exit(&path);
			free(names[k]);
		}
		free(names);
	}
	printf("%u inputs replayed\n", nr);
	return ret;
}
