#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Stage 06's user of the learner's driver, run in the guest by labs/grade.sh.

    python3 objects.py PREFIX [die]

Through rdma-core's pyverbs and pib's provider, on device pibl_0, it makes:
  3 PDs;
  4 MRs on the first PD: 4 KiB (1 page), 1 MiB (256 pages), 8 KiB starting 100 bytes into a
    page (3 pages: the range touches three), 4 MiB (1024 pages);
  3 CQs of at least 1, 100 and 1000 entries (the provider makes their rings 2, 128 and 1024
    CQEs deep: 2 + 2 + 9 pages with the consumer record's page).
Then it creates the file PREFIX.holding and waits for PREFIX.go; the grader compares what the
device holds (qom-get objects-pd, objects-mr, objects-cq, mtt-pages) with the above meanwhile.
On PREFIX.go it frees everything, in reverse, and prints "released".  With "die" it kills
itself with SIGKILL instead, so that ib_uverbs, not the process, frees what it held.

Each step prints "ok WHAT" or "FAIL WHAT: ERROR"; the exit status is 0 only if all were ok.
The wait for PREFIX.go is bounded by a count of looks (a hang guard, not a timing).
"""
import ctypes
import mmap
import os
import signal
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
import pyverbs.enums as e

PAGE = 4096
MRS = [  # (what, bytes, offset into the first page)
    ("4 KiB", 4096, 0),
    ("1 MiB", 1 << 20, 0),
    ("8 KiB starting 100 bytes into a page", 8192, 100),
    ("4 MiB", 4 << 20, 0),
]
CQS = [1, 100, 1000]
GO_LOOKS = 6000  # 0.1 s apart: the grader answers well before


def anon(n):
    """n bytes of page-aligned anonymous memory, touched, and their address."""
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.write(b"\x5a" * n)
    return m, ctypes.addressof(ctypes.c_char.from_buffer(m))


def main():
    prefix = sys.argv[1]
    die = len(sys.argv) > 2 and sys.argv[2] == "die"
    bad = 0
    held = []          # objects to free, in the order made

    def step(what, fn):
        nonlocal bad
        try:
            obj = fn()
        except Exception as err:  # pyverbs raises PyverbsRDMAError with the errno
            bad += 1
            print(f"FAIL {what}: {err}", flush=True)
            return None
        print(f"ok   {what}", flush=True)
        held.append(obj)
        return obj

    ctx = step("open pibl_0 (a user context)", lambda: Context(name="pibl_0"))
    if ctx is None:
        return 1
    pds = [step(f"PD {i + 1}", lambda: PD(ctx)) for i in range(3)]
    keep = []
    if pds[0] is not None:
        access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
        for what, size, off in MRS:
            m, addr = anon(size + off + PAGE)
            keep.append(m)
            mr = step(f"MR {what}", lambda: MR(pds[0], size, access, address=addr + off))
            if mr is not None:
                print(f"     lkey {mr.lkey:#x} rkey {mr.rkey:#x}", flush=True)
    for n in CQS:
        step(f"CQ of {n} entries", lambda: CQ(ctx, n))

    open(prefix + ".holding", "w").close()
    for _ in range(GO_LOOKS):
        if os.path.exists(prefix + ".go"):
            break
        time.sleep(0.1)
    if die:
        print("dying with the objects held", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    for obj in reversed(held):
        try:
            obj.close()
        except Exception as err:
            bad += 1
            print(f"FAIL free {type(obj).__name__}: {err}", flush=True)
    print("released", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
