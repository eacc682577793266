#!/usr/bin/env bash
# Fails when any raw C-string call appears in the project's C sources:
# tinyfs builds text with printbuf and copies with tfs_strscpy().
#   no-raw-strings.sh SRCROOT    check the tree
#   no-raw-strings.sh --selftest check that the check itself catches each call
set -u
banned='strcpy|strncpy|strcat|strncat|stpcpy|stpncpy|sprintf|vsprintf|strlcpy|strlcat|gets'
# A banned name used as a call, as a value ("(strcpy)", "= strcpy;") or with
# its "(" on the next line; "->gets(" and ".gets(" are members, not libc.
pattern="(^|[^A-Za-z0-9_>.])(__builtin_)?(${banned})[[:space:]]*(\\(|\\)|;|$)"

scan() {
	local root=$1
	# Every C source and header but build trees, .git and this lint folder.
	find "$root" -mindepth 1 \( -type d \( -path "$root/.git" -o -path "$root/build*" \
		-o -path "$root/tests/lint" \) \) -prune -o \
		-type f \( -name '*.c' -o -name '*.h' \) -print0 |
		xargs -0 -r grep -nHE "$pattern"
	return 0
}

if [ "${1:-}" = --selftest ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	fails=0
	caught() { # CODE: must be flagged
		printf '%s\n' "$1" >"$dir/t.c"
		[ -n "$(scan "$dir")" ] || { echo "selftest: not caught: $1"; fails=$((fails + 1)); }
	}
	for fn in strcpy strncpy strcat strncat stpcpy sprintf vsprintf strlcpy gets; do
		caught "void f(char *d) { $fn (d, \"x\"); }"
	done
	caught 'void f(char *d) { __builtin_strcpy(d, "x"); }'
	caught 'void f(char *d) { (strcpy)(d, "x"); }'
	caught 'char *(*p)(char *, const char *) = strcpy;'
	caught 'void f(char *d) { strcat'
	mkdir -p "$dir/src/buildid"
	printf 'void f(char *d) { strcpy(d, "x"); }\n' >"$dir/src/buildid/b.c"
	[ -n "$(scan "$dir")" ] || { echo "selftest: a folder named build* below the top was skipped"; fails=$((fails + 1)); }
	rm -rf "$dir/src"
	# Allowed look-alikes must pass.
	printf '%s\n' 'void f(char *d) { snprintf(d, 1, "x"); tfs_strscpy(d, "x", 1); fgets(d, 1, 0); io->gets(); s.gets(); }' \
		'/* strcpy, strncpy and gets are banned */' >"$dir/t.c"
	if [ -n "$(scan "$dir")" ]; then
		echo "selftest: an allowed use was flagged:"; scan "$dir"
		fails=$((fails + 1))
	fi
	[ $fails = 0 ] && echo "selftest: all banned calls caught, look-alikes allowed" && exit 0
	exit 1
fi

root=${1:?usage: no-raw-strings.sh SRCROOT | --selftest}
[ -d "$root" ] || { echo "no-raw-strings: $root: not a directory" >&2; exit 2; }
hits=$(scan "$root")
if [ -n "$hits" ]; then
	echo "raw C-string calls found (use printbuf or tfs_strscpy):"
	echo "$hits"
	exit 1
fi
echo "no raw C-string calls in $(find "$root" -name '*.[ch]' -not -path '*/build*/*' | wc -l) files"
