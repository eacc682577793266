# Shared by gen.sh and check.sh: the images, how each is made, and how its
# expected output is produced.  Source with $mkfs and $tinyfs set.
IMAGES="golden bad-magic bad-primary-csum foreign-backup member-count first-bucket truncated empty"
GOLDEN_UUID=6e1c7a52-3f0a-4b8e-9d1c-2a5b7c9e0f11
GOLDEN_TIME=1700000000

# make_images DIR PATCH_PY: every image, uncompressed, in DIR.
make_images() {
	local d=$1 patch=$2
	SOURCE_DATE_EPOCH=$GOLDEN_TIME "$mkfs" -q --size 4M -L golden -U $GOLDEN_UUID "$d/golden.img"
	cp "$d/golden.img" "$d/bad-magic.img" && python3 "$patch" "$d/bad-magic.img" magic
	cp "$d/golden.img" "$d/bad-primary-csum.img" && python3 "$patch" "$d/bad-primary-csum.img" corrupt_primary
	cp "$d/golden.img" "$d/foreign-backup.img" && python3 "$patch" "$d/foreign-backup.img" foreign_backup
	cp "$d/golden.img" "$d/member-count.img" && python3 "$patch" "$d/member-count.img" nr_devices=2
	cp "$d/golden.img" "$d/first-bucket.img" && python3 "$patch" "$d/first-bucket.img" first_bucket=300
	cp "$d/golden.img" "$d/truncated.img" && truncate -s 1M "$d/truncated.img"
	: >"$d/empty.img"
}

# expected NAME (in the image's directory): what show-super prints and returns.
expected() {
	local out err st=0
	out=$("$tinyfs" show-super -f all -l "$1.img" 2>"$1.stderr.tmp") || st=$?
	err=$(cat "$1.stderr.tmp")
	rm -f "$1.stderr.tmp"
	printf '$ tinyfs show-super -f all -l %s.img\nexit %s\n--- stderr\n%s\n--- stdout\n%s\n' \
		"$1" "$st" "$err" "$out"
}
