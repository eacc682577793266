#!/usr/bin/env bash
# Installs the Debian packages tinyfs needs to build and test, if missing.
# Runs as root on Debian 12; apt-get update runs only when something is missing.
#   scripts/deps.sh [fuzz]    fuzz: also what scripts/fuzz.sh needs
set -euo pipefail

pkgs=(
	build-essential meson ninja-build pkg-config
	libfuse3-dev fuse3 liburing-dev libblkid-dev uuid-dev libcmocka-dev
	libisal-dev liburcu-dev systemtap-sdt-dev liblmdb-dev libsqlite3-dev
	clang-format e2fsprogs util-linux jq python3 xxd psmisc acl
)
# scripts/fuzz.sh: clang and libFuzzer (not needed to build or test).
if [ "${1:-}" = fuzz ]; then
	pkgs+=(clang libclang-rt-14-dev)
fi
# tests/bench/fs_compare.sh also needs these (only with --bench).
[ "${1:-}" = --bench ] && pkgs+=(fio fuse2fs sqlite3)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	if [ "$(id -u)" != 0 ]; then
		echo "deps: need root to install packages (run as root, or install: ${missing[*]})" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
