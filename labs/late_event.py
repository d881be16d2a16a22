#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Stage 08's trap "a late event for a CQ that is gone", run in the guest by labs/grade.sh.

    python3 late_event.py PREFIX

Through pyverbs and pib's provider, on device pibl_0 (uses qps.py's helpers, copied beside it):
  1. a PD, a completion channel, a CQ on it, a 64 KiB MR, an RC QP connected to itself;
then it creates PREFIX.holding and waits for PREFIX.go (the grader makes the device hold the
next interrupt back); then
  2. the CQ armed (ibv_req_notify_cq), one SEND of 4 KiB to itself, both completions polled
     (the device writes a CEQE for the armed CQ, and its interrupt waits);
  3. the QP and the CQ destroyed at once, before the interrupt comes, and the rest freed.
The interrupt arrives later for a CQ number the driver no longer has.  Each step prints "ok
WHAT" or "FAIL WHAT: ERROR"; the exit status is 0 only if all were ok.
"""
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

import qps
from qps import SIZE, poll, say, step


def main():
    prefix = sys.argv[1]
    ctx, lid, pd = qps.open_pd()
    if not ctx:
        return 1
    ch = step("completion channel", lambda: CompChannel(ctx))
    cq = step("CQ of 16 entries on the channel", lambda: CQ(ctx, 16, None, ch, 0))
    access = e.IBV_ACCESS_LOCAL_WRITE
    mr = step("MR of 64 KiB", lambda: MR(pd, 16 * SIZE, access))
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    rc = pd and cq and step("RC QP", lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq,
                                                                 rcq=cq, cap=cap)))
    if not (ch and mr and rc):
        return 1
    qps.connect_self(rc, lid, access)
    if qps.bad:
        return 1

    qps.hold(prefix)

    mr.write(b"\x5a" * SIZE, SIZE, 0)
    send = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)],
                  send_flags=e.IBV_SEND_SIGNALED)
    recv = RecvWR(wr_id=2, num_sge=1, sg=[SGE(mr.buf + 8 * SIZE, SIZE, mr.lkey)])
    if step("arm the CQ, then a SEND to itself",
            lambda: (cq.req_notify(), rc.post_recv(recv), rc.post_send(send))):
        wcs = poll(cq, 2)
        st = {wc.wr_id: wc.status for wc in wcs}
        say(st == {1: e.IBV_WC_SUCCESS, 2: e.IBV_WC_SUCCESS},
            f"both completions polled, successful (statuses {st})")
        say(mr.read(SIZE, 8 * SIZE) == b"\x5a" * SIZE, "the bytes arrived")
    # The CQ goes before the interrupt for its event arrives.
    qps.free(((rc, "RC QP"), (cq, "CQ (its event still on the way)"), (mr, "MR"),
              (ch, "channel"), (pd, "PD"), (ctx, "context")))
    return 1 if qps.bad else 0


if __name__ == "__main__":
    sys.exit(main())
