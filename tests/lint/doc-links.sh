#!/usr/bin/env bash
# The README and docs/ stand alone in any clone:
#   1. every relative link in README.md and docs/*.md points at a file or
#      folder inside the repository;
#   2. every fault point the README names (`point NAME`) is registered in
#      the source (tfs_fault("NAME"));
#   3. a folder in the README's layers table that holds no C source yet is
#      described as "being built".
#   doc-links.sh SRCDIR
set -u
root=$(cd "$1" && pwd)
st=0
fail() { echo "FAIL: $*"; st=1; }

for doc in "$root"/README.md "$root"/docs/*.md; do
	dir=$(dirname "$doc")
	# [text](target) with a relative target (no scheme, no #anchor-only).
	while IFS= read -r target; do
		target=${target%%#*}
		[ -z "$target" ] && continue
		case $target in *://* | mailto:*) continue ;; esac
		path=$(realpath -m "$dir/$target")
		case $path in
		"$root" | "$root"/*) [ -e "$path" ] || fail "${doc#$root/}: link to $target: no such file" ;;
		*) fail "${doc#$root/}: link to $target leaves the repository" ;;
		esac
	done < <(grep -o '\]([^)]*)' "$doc" | sed 's/^](//; s/)$//')
done

while IFS= read -r p; do
	grep -rqF "tfs_fault(\"$p\")" "$root"/lib "$root"/super "$root"/journal "$root"/fs \
		"$root"/fuse "$root"/tools 2>/dev/null || fail "README: fault point $p does not exist"
done < <(grep -o 'point [a-z_]*:[a-z_]*' "$root/README.md" | awk '{ print $2 }' | sort -u)

while IFS= read -r row; do
	folder=$(sed 's/^| `\([a-z]*\)\/` |.*/\1/' <<<"$row")
	# The code layers; tests/ and images/ are not "built".
	case $folder in lib | super | journal | fs | fuse | tools) ;; *) continue ;; esac
	if ! find "$root/$folder" -name '*.c' 2>/dev/null | grep -q .; then
		grep -q "being built" <<<"$row" ||
			fail "README: $folder/ holds no source yet but is not described as being built"
	fi
done < <(grep '^| `[a-z]*/` |' "$root/README.md")

[ $st = 0 ] && echo "README and docs stand alone"
exit $st
