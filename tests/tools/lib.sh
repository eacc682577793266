# Shared helpers for the tool tests; source it after setting $1 (BUILD_DIR).
# Sets build, mkfs, tinyfs; makes and enters a temporary directory removed
# at exit; counts failures in $fails.
set -u
build=$(cd "$1" && pwd)
mkfs=$build/tools/mkfs.tinyfs tinyfs=$build/tools/tinyfs
tmp=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run EXPECTED_STATUS CMD...: runs, keeps stdout/stderr in out/err.
run() {
	local want=$1 st=0
	shift
	"$@" >out 2>err || st=$?
	if [ "$st" != "$want" ]; then
		fail "'$*' exited $st, expected $want"
		sed 's/^/  stdout: /' out; sed 's/^/  stderr: /' err
		return 1
	fi
}
# has FILE TEXT / hasnt FILE TEXT: FILE contains TEXT (or not).
has() { grep -qF -- "$2" "$1" || { fail "$1 lacks '$2'"; sed "s/^/  $1: /" "$1"; }; }
hasnt() { ! grep -qF -- "$2" "$1" || { fail "$1 has '$2'"; sed "s/^/  $1: /" "$1"; }; }
