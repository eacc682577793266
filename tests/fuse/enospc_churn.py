#!/usr/bin/env python3
# ENOSPC churn: PROCS processes (6) for SECONDS create files (written, some
# fsync'ed, some through a shared mapping), directories with an xattr and
# long symlinks in DIR until the filesystem is full, free a few on ENOSPC and
# go on; every error but ENOSPC is a failure (EROFS: the filesystem gave up),
# and at the end every file kept must read back as written.  Prints one
# "FAIL ..." line per problem, and "ok" when there was none.
#   enospc_churn.py DIR [SECONDS] [PROCS]
import os, sys, errno, random, mmap, time
from multiprocessing import Process, Queue
D = sys.argv[1]
T = float(sys.argv[2]) if len(sys.argv) > 2 else 15
P = int(sys.argv[3]) if len(sys.argv) > 3 else 6
def worker(i, q):
    rnd = random.Random(i); errs = {}; files = {}
    end = time.time() + T
    n = 0
    while time.time() < end:
        n += 1
        name = f"{D}/w{i}_{n}"
        kind = rnd.random()
        try:
            if kind < 0.5:
                size = rnd.choice([100, 5000, 100000, 1<<20, 3<<20])
                data = bytes([n % 251]) * size
                with open(name, "wb") as f:
                    f.write(data)
                    if rnd.random() < 0.3: os.fsync(f.fileno())
                files[name] = data
            elif kind < 0.6:
                size = rnd.choice([4096, 65536, 1<<20])
                fd = os.open(name, os.O_CREAT|os.O_RDWR, 0o644)
                try:
                    os.ftruncate(fd, size)
                    m = mmap.mmap(fd, size); m[:] = bytes([n % 251]) * size; m.flush(); m.close()
                finally:
                    os.close(fd)
                files[name] = bytes([n % 251]) * size
            elif kind < 0.7:
                os.mkdir(name); os.setxattr(name, "user.a", b"v" * rnd.choice([10, 1000, 3000]))
                files[name] = None
            elif kind < 0.8:
                os.symlink("x" * rnd.randint(1, 4000), name); files[name] = None
            else:
                if files:
                    k = rnd.choice(list(files))
                    if files[k] is None:
                        (os.rmdir if os.path.isdir(k) and not os.path.islink(k) else os.unlink)(k)
                    else:
                        os.unlink(k)
                    del files[k]
        except OSError as e:
            errs[e.errno] = errs.get(e.errno, 0) + 1
            if e.errno not in (errno.ENOSPC,):
                q.put(("unexpected", i, name, e.errno, str(e))); return
            # ENOSPC: free something
            for k in list(files)[:3]:
                try:
                    if files[k] is None and os.path.isdir(k) and not os.path.islink(k): os.rmdir(k)
                    else: os.unlink(k)
                except OSError as e2:
                    q.put(("unexpected-del", i, k, e2.errno, str(e2))); return
                del files[k]
            if os.path.exists(name):
                try:
                    if os.path.isdir(name) and not os.path.islink(name): os.rmdir(name)
                    else: os.unlink(name)
                except OSError: pass
    # verify contents
    bad = 0
    for k, v in files.items():
        if v is not None:
            try:
                if open(k, "rb").read() != v: bad += 1
            except OSError as e: bad += 1
    q.put(("done", i, errs, bad, len(files)))
os.makedirs(D, exist_ok=True)
q = Queue()
ps = [Process(target=worker, args=(i, q)) for i in range(P)]
[p.start() for p in ps]
res = [q.get() for _ in ps]
[p.join() for p in ps]
fails = 0
nospc = 0
for r in res:
    if r[0] != "done":
        print("FAIL", r); fails += 1
    else:
        nospc += r[2].get(errno.ENOSPC, 0)
        if r[3]:
            print("FAIL process %d: %d files read back wrong" % (r[1], r[3])); fails += 1
if not nospc and not fails:
    print("FAIL the filesystem never filled up (no ENOSPC): the test tests nothing"); fails += 1
print("ok" if not fails else "%d failure(s)" % fails, "(%d ENOSPC met)" % nospc)
sys.exit(1 if fails else 0)
