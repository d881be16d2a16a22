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
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr
from pyverbs.cq import CQ, CompChannel
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

import qps
from qps import LOOKS, SIZE, modify, poll, say, step


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
    modify(rc, "RC", e.IBV_QPS_INIT, e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS,
           pkey_index=0, port_num=1, qp_access_flags=access)
    modify(rc, "RC", e.IBV_QPS_RTR, e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
           e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER,
           path_mtu=e.IBV_MTU_1024, dest_qp_num=rc.qp_num, rq_psn=0x42, max_dest_rd_atomic=1,
           min_rnr_timer=12, ah_attr=AHAttr(dlid=lid, port_num=1))
    modify(rc, "RC", e.IBV_QPS_RTS, e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
           e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC, sq_psn=0x42, timeout=14,
           retry_cnt=7, rnr_retry=7, max_rd_atomic=1)
    if qps.bad:
        return 1

    open(prefix + ".holding", "w").close()
    for _ in range(LOOKS):
        if os.path.exists(prefix + ".go"):
            break
        time.sleep(0.1)

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
    for obj, name in ((rc, "RC QP"), (cq, "CQ (its event still on the way)"), (mr, "MR"),
                      (ch, "channel"), (pd, "PD"), (ctx, "context")):
        step(f"free the {name}", obj.close)
    print("released", flush=True)
    return 1 if qps.bad else 0


if __name__ == "__main__":
    sys.exit(main())
