#!/usr/bin/env bash
# Fails when any raw C-string call appears in the project's C sources:
# tinyfs builds text with printbuf and copies with tfs_strscpy().
#   no-raw-strings.sh SRCROOT    check the tree
#   no-raw-strings.sh --selftest check that the check itself catches each call
set -u
banned='strcpy|strncpy|strcat|strncat|sprintf|vsprintf|strlcpy|gets'
pattern="(^|[^A-Za-z0-9_])(${banned})[[:space:]]*\\("

scan() {
	# Every C source and header except this lint folder; comments count too,
	# so the rule cannot be dodged by a comment-looking line.
	find "$1" \( -name .git -o -name 'build*' -o -path '*/tests/lint' \) -prune -o \
		\( -name '*.c' -o -name '*.h' \) -print0 |
		xargs -0 -r grep -nHE "$pattern" || true
}

if [ "${1:-}" = --selftest ]; then
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	fails=0
	for fn in strcpy strncpy strcat strncat sprintf vsprintf strlcpy gets; do
		printf 'void f(char *d) { %s (d, "x"); }\n' "$fn" >"$dir/t.c"
		if [ -z "$(scan "$dir")" ]; then
			echo "selftest: $fn( was not caught"
			fails=$((fails + 1))
		fi
	done
	# Allowed look-alikes must pass: snprintf, tfs_strscpy, fgets.
	printf 'void f(char *d) { snprintf(d, 1, "x"); tfs_strscpy(d, "x", 1); fgets(d, 1, 0); }\n' >"$dir/t.c"
	if [ -n "$(scan "$dir")" ]; then
		echo "selftest: an allowed call was flagged:"; scan "$dir"
		fails=$((fails + 1))
	fi
	[ $fails = 0 ] && echo "selftest: all banned calls caught" && exit 0
	exit 1
fi

root=${1:?usage: no-raw-strings.sh SRCROOT | --selftest}
hits=$(scan "$root")
if [ -n "$hits" ]; then
	echo "raw C-string calls found (use printbuf or tfs_strscpy):"
	echo "$hits"
	exit 1
fi
echo "no raw C-string calls"
