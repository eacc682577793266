#!/usr/bin/env bash
# The main job: install what is missing, build, format an image file, mount
# it, write and read some files, show the live statistics, unmount, mount
# again and show the files are still there, unmount.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release -Db_ndebug=false >/dev/null
ninja -C build >/dev/null

tinyfs=build/tools/tinyfs mkfs=build/tools/mkfs.tinyfs
img=${TFS_DEMO_IMAGE:-/tmp/tinyfs-demo.img}
mnt=${TFS_DEMO_MOUNT:-/tmp/tinyfs-demo}
run() {
	echo "\$ $*"
	"$@"
}

rm -f "$img"
run "$mkfs" --size 256M -L demo "$img"
echo
if ! "$tinyfs" mount --help >/dev/null 2>&1; then
	# This build has no daemon yet (fs/ without its POSIX layer).
	run "$tinyfs" show-super -f all -l "$img"
	exit 0
fi

# Whatever happens below, nothing stays mounted.
daemon_pid() { "$tinyfs" stats "$mnt" fuse 2>/dev/null | awk '$1 == "pid:" { print $2 }'; }
unmount() {
	local pid
	pid=$(daemon_pid)
	umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt"
	# The daemon writes everything back after the kernel lets go; wait for it.
	while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
cleanup() { grep -q " $mnt fuse.tinyfs " /proc/self/mounts && unmount || true; }
trap cleanup EXIT
mkdir -p "$mnt"

run "$tinyfs" mount "$img" "$mnt"
echo
echo "\$ # write and read some files"
mkdir -p "$mnt/docs"
cp README.md "$mnt/docs/"
seq 1 100000 >"$mnt/numbers.txt"
head -c 8M /dev/urandom >"$mnt/random.bin"
ln -s docs/README.md "$mnt/readme-link"
sync
run ls -l "$mnt" "$mnt/docs"
run head -3 "$mnt/readme-link"
run tail -1 "$mnt/numbers.txt"
(cd "$mnt" && md5sum numbers.txt random.bin docs/README.md) >/tmp/tinyfs-demo.md5
run df -h "$mnt"
echo
run "$tinyfs" stats "$mnt" journal
run "$tinyfs" stats "$mnt" fuse
echo
echo "\$ umount $mnt"
unmount
echo
run "$tinyfs" mount "$img" "$mnt"
run ls -l "$mnt"
echo "\$ md5sum -c   # the same bytes after unmount and mount"
(cd "$mnt" && md5sum -c /tmp/tinyfs-demo.md5)
rm -f /tmp/tinyfs-demo.md5
unmount
echo
echo "unmounted; the image is $img"
