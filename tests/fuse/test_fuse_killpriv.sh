#!/usr/bin/env bash
# `-o killpriv` (FUSE HANDLE_KILLPRIV v1: the kernel leaves clearing the
# set-ID bits to the daemon): who clears what must be as on ext4 and as on
# the default mount (where the kernel decides).  Each case below runs on a
# default mount and on a killpriv mount and must give the ext4 answer on
# both.  Found by difftest on killpriv mounts (branch diffopts); before the
# fix a killpriv mount cleared the bits at a truncate by root (CAP_FSETID
# keeps them), at a chown of a directory (only non-directories lose them),
# and not at a write or truncate by a user outside the file's group of a
# set-group-ID file without group exec (Linux 6.2+ drops it).
#   test_fuse_killpriv.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (chown, another user)"
command -v setpriv >/dev/null || skip "setpriv is absent (Debian package util-linux)"
fresh_image 64M
chmod 755 "$tmp" # other users reach the mount

# as USER CMD...: runs CMD as uid/gid USER with no supplementary groups
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"; }
mode() { stat -c %a "$1"; }

# case NAME MODE SETUP... : a new file f (root's, group 0) with MODE, then
# the command; prints NAME=the mode after
check() {
	local opts=$1 name=$2 m=$3 want=$4; shift 4
	rm -rf "$mnt/f"
	if [ "$name" = dir-chown ]; then mkdir "$mnt/f"; else echo data >"$mnt/f"; fi
	# owner-*: the file is user 65534's (group still 0)
	case $name in owner-*) chown 65534 "$mnt/f" ;; esac
	chmod "$m" "$mnt/f"
	"$@" 2>/dev/null
	local got
	got=$(mode "$mnt/f")
	[ "$got" = "$want" ] || fail "-o $opts: $name of a $m file: mode $got, want $want"
}
cases() {
	local o=$1
	# root (CAP_FSETID) keeps the bits at a truncate, a write, an O_TRUNC
	check "$o" root-truncate 6755 6755 truncate -s 100 "$mnt/f"
	check "$o" root-write 6755 6755 sh -c "echo x >>'$mnt/f'"
	check "$o" root-otrunc 2755 2755 sh -c ": >'$mnt/f'"
	# a directory keeps them at a chown (chown_common(): non-directories only)
	check "$o" dir-chown 6777 6777 chown 65534 "$mnt/f"
	# root's chown of a file: S_ISUID goes, S_ISGID if group-executable
	check "$o" root-chown 6755 755 chown 65534 "$mnt/f"
	# another user (no CAP_FSETID, outside group 0): both go, also S_ISGID
	# without group exec (Linux 6.2+)
	check "$o" user-truncate 6777 777 as 65534 truncate -s 100 "$mnt/f"
	check "$o" user-write 6777 777 as 65534 sh -c "echo x >>'$mnt/f'"
	check "$o" user-write-nogx 2767 767 as 65534 sh -c "echo x >>'$mnt/f'"
	check "$o" user-truncate-nogx 2767 767 as 65534 truncate -s 100 "$mnt/f"
	# a member of the file's group keeps S_ISGID without group exec
	check "$o" member-write-nogx 2767 2767 setpriv --reuid=65534 --regid=0 --clear-groups -- \
		sh -c "echo x >>'$mnt/f'"
	# its owner outside group 0 gives it its own group: S_ISUID goes (chown),
	# S_ISGID without group exec too (the old group's rule, fs/ applies it
	# after the chown's own; branch sgidfs)
	check "$o" owner-chgrp-nogx 6740 740 as 65534 chgrp 65534 "$mnt/f"
}
for o in defaults killpriv; do
	mount_or_finish "mount -o $o" -o "$o" "$img" "$mnt"
	cases "$o"
	tfs_umount "$mnt"
done
fsck_clean "$img"
finish
