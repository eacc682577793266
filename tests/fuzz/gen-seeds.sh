#!/usr/bin/env bash
# Regenerates tests/fuzz/seeds/ from real on-disk structures: superblocks of
# mkfs.tinyfs images (a few sizes and member counts) and journals the
# journal writes itself (fuzz_gen_seeds).  The superblock seeds are byte for
# byte reproducible (fixed uuid, SOURCE_DATE_EPOCH); where the journal puts
# entry boundaries and reclaim's empty flush entries depends on timing, so
# journal seeds may differ between runs.  Run after a deliberate format
# change, then commit.
#   tests/fuzz/gen-seeds.sh BUILDDIR
set -euo pipefail
build=$(realpath "${1:?usage: gen-seeds.sh BUILDDIR}")
here=$(cd "$(dirname "$0")" && pwd)
mkfs=$build/tools/mkfs.tinyfs
gen=$build/tests/fuzz/fuzz_gen_seeds
ninja -C "$build" tools/mkfs.tinyfs tests/fuzz/fuzz_gen_seeds >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SOURCE_DATE_EPOCH=1700000000
uuid=7f2a110e-c45b-4d8a-9b36-52e10df03c77 # fuzz_uuid in fuzz_util.c
mk() { "$mkfs" -q -U "$uuid" "$@"; }

mk --size 1M "$tmp/small.img"
mk -L data --block-size 512 --error-action panic --size 64M "$tmp/b512.img"
mk -L big --size 1G "$tmp/big.img"
mk -L pair --metadata-replicas 2 --size 16M --durability 2 --dev-label ssd "$tmp/pair-0.img" \
	--durability 1 --dev-label hdd "$tmp/pair-1.img"
mk -L trio --data-replicas 2 --size 8M --bucket-size 16k "$tmp/trio-0.img" \
	--size 4M --journal-size 256k "$tmp/trio-1.img" --size 32M --discard "$tmp/trio-2.img"

# A filesystem for the image and btree_node seeds (one member).
mk --size 1M "$tmp/fs1m.fsimg"

for t in sb sb_read jset journal_read journal_restart btree_node image; do
	rm -rf "${here:?}/seeds/$t"
	mkdir -p "$here/seeds/$t"
done
"$gen" "$here/seeds" "$tmp"/*.img --fs "$tmp"/*.fsimg
du -sh "$here/seeds"/*
