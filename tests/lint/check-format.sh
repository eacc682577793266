#!/usr/bin/env bash
# Fails when a C file differs from what .clang-format makes of it.
#   check-format.sh SRCROOT CLANG_FORMAT
set -u
root=$1 cf=$2
cd "$root" || exit 1
bad=0
while IFS= read -r -d '' f; do
	if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run: $cf -i $f)"
		bad=$((bad + 1))
	fi
done < <(find . -mindepth 1 \( -type d \( -path ./.git -o -path './build*' \) \) -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print0)
[ $bad = 0 ] && echo "all C files formatted" && exit 0
exit 1
