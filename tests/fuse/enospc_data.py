#!/usr/bin/env python3
"""Writes 64 KiB blocks of b"x" into DIR/f until write() fails (at most
LIMIT bytes), closes, drops the file's pages and reads it back.  Prints one
line: accepted=N write_err=ERRNO|0 close_err=ERRNO|0 size=N x=N zero=N
(what write() accepted, the errors, then st_size and the bytes read back)."""
import os
import sys

d, limit = sys.argv[1], int(sys.argv[2])
path = os.path.join(d, "f")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = b"x" * 65536
accepted = write_err = close_err = 0
while accepted < limit:
    try:
        accepted += os.write(fd, buf)
    except OSError as e:
        write_err = e.errno
        break
try:
    os.close(fd)
except OSError as e:
    close_err = e.errno
size = os.stat(path).st_size
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
data = bytearray()
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    data += b
os.close(fd)
print("accepted=%d write_err=%d close_err=%d size=%d x=%d zero=%d" %
      (accepted, write_err, close_err, size, data.count(b"x"), data.count(b"\0")))
