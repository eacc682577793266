#!/usr/bin/env bash
# Filling the mount with buffered writes (docs/design-notes.md, "ENOSPC
# under the writeback cache"): the ENOSPC is never lost.  With
# -o no_writeback_cache write(2) itself fails with ENOSPC, as on ext4, and
# every byte it accepted reads back after the pages are dropped.  With the
# writeback cache (the default) write(2) cannot know, so close(2) must report
# the ENOSPC.  Both leave fsck clean.
#   test_fuse_enospc_data.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
need_python3
helper=$(dirname "$0")/enospc_data.py
limit=$((160 << 20)) # 2.5 times the image: write() must have stopped before

# run_fill WHAT OPTS: mounts a fresh 64 MiB image with OPTS, fills it, unmounts, fscks.
run_fill() {
	local what=$1 opts=$2
	fresh_image 64M
	mount_or_finish "mount $what" -o "$opts" "$img" "$mnt"
	out=$(python3 "$helper" "$mnt" "$limit") || fail "$what: $helper failed"
	echo "$what: $out"
	tfs_umount "$mnt"
	fsck_clean "$img" "$what: fsck -n"
	eval "$out"
}

run_fill no_writeback_cache "no_writeback_cache,log=$tmp/nowb.log"
[ "$write_err" = 28 ] || fail "no_writeback_cache: write() ended with errno $write_err after $accepted bytes, not ENOSPC"
[ "$close_err" = 0 ] || fail "no_writeback_cache: close() errno $close_err"
[ "$size" = "$accepted" ] && [ "$x" = "$accepted" ] ||
	fail "no_writeback_cache: write() accepted $accepted bytes, size $size, $x read back"

run_fill writeback_cache "log=$tmp/wb.log"
[ "$write_err" = 28 ] || [ "$close_err" = 28 ] ||
	fail "writeback cache: no ENOSPC (write() errno $write_err, close() errno $close_err) after $accepted bytes"
finish
