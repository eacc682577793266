#!/usr/bin/env python3
"""Patch a field in every superblock copy of a tinyfs image and fix the checksum.

    patch.py IMAGE magic|nr_devices=N|first_bucket=N|corrupt_primary|foreign_backup

foreign_backup makes the backup another filesystem's (its uuid, in the copy
and in its embedded layout, checksums fixed) and spoils the primary: the
layout sector still names ours, so the backup must be refused.

Offsets follow super/super_format.h (docs/on-disk-format.md).
"""
import struct
import sys

COPIES = (4096, 4096 + 32768)
FIXED = 688
LAYOUT = 176  # the embedded layout in a copy; its uuid at +88


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def fix_csum(img, off):
    (u64s,) = struct.unpack_from("<I", img, off + 20)
    end = off + FIXED + 8 * u64s
    struct.pack_into("<I", img, off, crc32c(img[off + 8:end]))


def main():
    path, what = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        img = bytearray(f.read())
    name, _, val = what.partition("=")
    for off in COPIES:
        if name == "magic":
            img[off + 8:off + 16] = bytes(8)
        elif name == "nr_devices":
            img[off + 101] = int(val)
            fix_csum(img, off)
        elif name == "first_bucket":
            # members is the first field: header 8, members header 8, then member 0.
            struct.pack_into("<Q", img, off + FIXED + 16 + 24, int(val))
            fix_csum(img, off)
        elif name == "foreign_backup":
            if off == COPIES[0]:
                img[off + 64] ^= 0xFF
            else:
                for u in (off + 32, off + LAYOUT + 88):
                    img[u:u + 16] = bytes([0x55] * 16)
                lay = off + LAYOUT
                struct.pack_into("<I", img, lay, crc32c(img[lay + 8:lay + 512]))
                fix_csum(img, off)
        elif name == "corrupt_primary":
            if off == COPIES[0]:
                img[off + 64] ^= 0xFF  # a label byte: only the checksum notices
        else:
            sys.exit("unknown patch " + what)
    with open(path, "wb") as f:
        f.write(img)


if __name__ == "__main__":
    main()
