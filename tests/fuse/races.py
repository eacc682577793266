#!/usr/bin/env python3
# Races between processes on one mount, each checked: O_CREAT|O_EXCL by 6
# processes on the same 300 names (exactly one winner each); listings
# while 3 processes create and unlink in the same directory (every entry
# that exists throughout is listed exactly once, no name twice); crossing
# directory renames (A into B while B into A: never a loop, both stay
# reachable); stripes of one file written by 6 processes through write(2),
# a shared mapping and O_DIRECT in turn, each read back through a random
# path.  Prints "FAIL ..." per problem and "ok" when none.
#   races.py DIR [ROUNDS]
import mmap, os, random, sys
from multiprocessing import Process, Queue

D = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
os.makedirs(D, exist_ok=True)
fails = 0


def fail(msg):
    global fails
    print("FAIL", msg)
    fails += 1


def excl(q, i):
    wins = 0
    for n in range(300):
        try:
            fd = os.open(f"{D}/e{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            wins += 1
        except FileExistsError:
            pass
    q.put(wins)


q = Queue()
ps = [Process(target=excl, args=(q, i)) for i in range(6)]
[p.start() for p in ps]
wins = sum(q.get() for _ in ps)
[p.join() for p in ps]
if wins != 300:
    fail(f"O_CREAT|O_EXCL on 300 names by 6 processes: {wins} winners")

os.makedirs(f"{D}/rd")
for n in range(500):
    open(f"{D}/rd/stable{n}", "w").close()


def churn(i):
    for r in range(3):
        for n in range(200):
            open(f"{D}/rd/c{i}_{n}", "w").close()
        for n in range(200):
            os.unlink(f"{D}/rd/c{i}_{n}")


ps = [Process(target=churn, args=(i,)) for i in range(3)]
[p.start() for p in ps]
rounds = 0
while any(p.is_alive() for p in ps) or rounds == 0:
    rounds += 1
    names = [e.name for e in os.scandir(f"{D}/rd")]
    st = [x for x in names if x.startswith("stable")]
    if len(st) != 500 or len(set(st)) != 500:
        fail(f"listing {rounds} during creates and unlinks: {len(set(st))} of 500 stable names, {len(st) - len(set(st))} twice")
    if len(names) != len(set(names)):
        fail(f"listing {rounds}: {len(names) - len(set(names))} names twice")
[p.join() for p in ps]


def renamer(a, b, n):
    for _ in range(n):
        for x, y in ((a, b), (b, a)):
            try:
                os.rename(x, y)
            except OSError:
                pass


for r in range(3):
    L = f"{D}/L{r}"
    os.makedirs(f"{L}/A")
    os.makedirs(f"{L}/B")
    p1 = Process(target=renamer, args=(f"{L}/A", f"{L}/B/A", ROUNDS))
    p2 = Process(target=renamer, args=(f"{L}/B", f"{L}/A/B", ROUNDS))
    p1.start(); p2.start(); p1.join(); p2.join()
    found = sorted(d for _, dirs, _ in os.walk(L) for d in dirs)
    if found != ["A", "B"]:
        fail(f"crossing renames {r}: directories reachable {found}, expected A and B")

F, S, N = f"{D}/shared", 64 * 1024, 6
fd = os.open(F, os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, S * N)
os.close(fd)


def stripe(i):
    rnd = random.Random(i)
    fd = os.open(F, os.O_RDWR)
    dfd = os.open(F, os.O_RDWR | os.O_DIRECT)
    m = mmap.mmap(fd, S * N)
    buf = mmap.mmap(-1, S)
    for r in range(ROUNDS):
        val = bytes([(i * 40 + r) % 256]) * S
        k = rnd.random()
        if k < 0.4:
            os.pwrite(fd, val, i * S)
        elif k < 0.7:
            m[i * S:(i + 1) * S] = val
            if rnd.random() < 0.5:
                m.flush()
        else:
            buf[:] = val
            os.pwritev(dfd, [buf], i * S)
        k = rnd.random()
        if k < 0.4:
            got = os.pread(fd, S, i * S)
        elif k < 0.7:
            got = m[i * S:(i + 1) * S]
        else:
            rb = mmap.mmap(-1, S)
            os.preadv(dfd, [rb], i * S)
            got = rb[:]
        if got != val:
            print(f"FAIL stripe {i} round {r}: {sum(a != b for a, b in zip(got, val))} bytes differ")
            os._exit(1)
    os._exit(0)


ps = [Process(target=stripe, args=(i,)) for i in range(N)]
[p.start() for p in ps]
[p.join() for p in ps]
fails += sum(p.exitcode != 0 for p in ps)
print("ok" if not fails else f"{fails} failure(s)")
sys.exit(1 if fails else 0)
