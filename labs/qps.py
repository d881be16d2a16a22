#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Stage 07's user of the learner's driver, run in the guest by labs/grade.sh.

    python3 qps.py PREFIX

Through rdma-core's pyverbs and pib's provider, on device pibl_0 (port 1, ACTIVE with its LID):
  1. a PD, a CQ, a 64 KiB MR, an RC QP and a UD QP;
  2. the RC QP asked for RESET -> RTS, which IB forbids: it must be refused with EINVAL;
  3. both QPs through INIT, RTR and RTS (the RC QP connected to itself: its own LID and QPN),
     each state read back with ibv_query_qp;
  4. one SEND of 4 KiB from the RC QP to itself, its bytes checked at the receive;
then it creates PREFIX.holding and waits for PREFIX.go (the grader compares what the device
holds and traced meanwhile, and arms a fault: the RC QP's next send WQE fails); then
  5. a second SEND, which the device fails: an error completion, and the QP in ERR, which
     ibv_query_qp must say (the device moved it, not the driver);
  6. the RC QP from ERR to RESET and INIT again, and everything freed.

Each step prints "ok WHAT" or "FAIL WHAT: ERROR"; the exit status is 0 only if all were ok.
Waits are bounded by counts of looks (hang guards, not timings).
"""
import errno
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

SIZE = 4096
LOOKS = 6000        # 0.1 s apart for PREFIX.go; CQ polls are counted separately
POLLS = 2000000
STATE = {e.IBV_QPS_RESET: "RESET", e.IBV_QPS_INIT: "INIT", e.IBV_QPS_RTR: "RTR",
         e.IBV_QPS_RTS: "RTS", e.IBV_QPS_SQD: "SQD", e.IBV_QPS_SQE: "SQE",
         e.IBV_QPS_ERR: "ERR"}

bad = 0


def say(ok, what, err=None):
    global bad
    if ok:
        print(f"ok   {what}", flush=True)
    else:
        bad += 1
        print(f"FAIL {what}" + (f": {err}" if err is not None else ""), flush=True)
    return ok


def step(what, fn):
    try:
        r = fn()
    except Exception as err:    # pyverbs raises PyverbsRDMAError with the errno
        say(False, what, err)
        return None
    say(True, what)
    return r if r is not None else True


def state_of(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return STATE.get(attr.qp_state, str(attr.qp_state))


def modify(qp, name, state, mask, **fields):
    attr = QPAttr(qp_state=state)
    for k, v in fields.items():
        setattr(attr, k, v)
    if step(f"{name}: modify to {STATE[state]}", lambda: qp.modify(attr, mask | e.IBV_QP_STATE)):
        got = step(f"{name}: ibv_query_qp", lambda: state_of(qp))
        say(got == STATE[state], f"{name}: the state read back is {STATE[state]} (got {got})")


def poll(cq, n):
    """n completions, or what came before the count of polls ran out."""
    wcs = []
    for _ in range(POLLS):
        got, more = cq.poll(n - len(wcs))
        wcs += more
        if len(wcs) == n:
            break
    return wcs


# An RC QP's way to RTS, connected to itself (the RESET -> RTS refusal uses RTS and RTS_MASK).
INIT_MASK = e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
RTR_MASK = (e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
            e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
RTS = dict(sq_psn=0x123, timeout=14, retry_cnt=7, rnr_retry=7, max_rd_atomic=1)
RTS_MASK = (e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
            e.IBV_QP_MAX_QP_RD_ATOMIC)


def connect_self(rc, lid, access):
    """RC QP rc through INIT, RTR and RTS, its destination itself (LID lid, its own QPN)."""
    modify(rc, "RC", e.IBV_QPS_INIT, INIT_MASK | e.IBV_QP_ACCESS_FLAGS, pkey_index=0,
           port_num=1, qp_access_flags=access)
    modify(rc, "RC", e.IBV_QPS_RTR, RTR_MASK, path_mtu=e.IBV_MTU_1024, dest_qp_num=rc.qp_num,
           rq_psn=0x123, max_dest_rd_atomic=1, min_rnr_timer=12,
           ah_attr=AHAttr(dlid=lid, port_num=1))
    modify(rc, "RC", e.IBV_QPS_RTS, RTS_MASK, **RTS)


def hold(prefix):
    """Say so (PREFIX.holding), then wait for the grader's PREFIX.go, a bounded count of looks."""
    open(prefix + ".holding", "w").close()
    for _ in range(LOOKS):
        if os.path.exists(prefix + ".go"):
            break
        time.sleep(0.1)


def free(objs):
    """Close each (object, name) in turn; the rest are still closed if one fails."""
    for obj, name in objs:
        step(f"free the {name}", obj.close)
    print("released", flush=True)


def open_pd():
    """The device, its port's LID and a PD: (ctx, lid, pd), ctx None if it cannot be opened."""
    ctx = step("open pibl_0", lambda: Context(name="pibl_0"))
    if not ctx:
        return None, 0, None
    return ctx, ctx.query_port(1).lid, step("PD", lambda: PD(ctx))


def main():
    prefix = sys.argv[1]
    ctx, lid, pd = open_pd()
    if not ctx:
        return 1
    cq = step("CQ of 16 entries", lambda: CQ(ctx, 16))
    access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    mr = step("MR of 64 KiB", lambda: MR(pd, 16 * SIZE, access))
    if not (pd and cq and mr):
        return 1
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=2)
    rc = step("RC QP", lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)))
    ud = step("UD QP", lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap)))
    if not (rc and ud):
        return 1
    print(f"     RC QPN {rc.qp_num} UD QPN {ud.qp_num} LID {lid}", flush=True)
    say(rc.qp_num >= 2 and ud.qp_num >= 2 and rc.qp_num != ud.qp_num,
        f"the QPNs are the device's, 2 or more and distinct ({rc.qp_num}, {ud.qp_num})")

    # IB forbids RESET -> RTS (a QP goes through INIT and RTR): the driver refuses it with
    # EINVAL before the device sees it.  (ib_uverbs passes it on: nothing in it is wrong but
    # the transition itself.)
    try:
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        for k, v in RTS.items():
            setattr(attr, k, v)
        rc.modify(attr, RTS_MASK | e.IBV_QP_STATE)
        say(False, "RC: RESET -> RTS is refused", "it was taken")
    except Exception as err:
        code = getattr(err, "error_code", None)
        say(code == errno.EINVAL, f"RC: RESET -> RTS is refused with EINVAL (errno {code})")
    got = state_of(rc)
    say(got == "RESET", f"RC: still RESET after the refusal (got {got})")

    connect_self(rc, lid, access)
    modify(ud, "UD", e.IBV_QPS_INIT, INIT_MASK | e.IBV_QP_QKEY, pkey_index=0, port_num=1,
           qkey=0x11111111)
    modify(ud, "UD", e.IBV_QPS_RTR, 0)
    modify(ud, "UD", e.IBV_QPS_RTS, e.IBV_QP_SQ_PSN, sq_psn=0x456)

    # One SEND to itself: 4 KiB from offset 0 of the MR into offset 32 KiB.
    pattern = bytes((i * 7 + 3) & 0xff for i in range(SIZE))
    mr.write(pattern, SIZE, 0)
    mr.write(b"\0" * SIZE, SIZE, 8 * SIZE)
    recv = RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf + 8 * SIZE, SIZE, mr.lkey)])
    send = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)],
                  send_flags=e.IBV_SEND_SIGNALED)
    if step("RC: post a receive and a SEND to itself", lambda: (rc.post_recv(recv), rc.post_send(send))):
        wcs = poll(cq, 2)
        st = sorted((wc.wr_id, wc.status) for wc in wcs)
        say(st == [(1, e.IBV_WC_SUCCESS), (2, e.IBV_WC_SUCCESS)],
            f"RC: both completions, successful ((wr_id, status): {st})")
        say(mr.read(SIZE, 8 * SIZE) == pattern, "RC: the 4 KiB arrived, every byte right")

    hold(prefix)

    # The grader armed a fault: this SEND fails in the device, which moves the QP to ERR.
    send = SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)],
                  send_flags=e.IBV_SEND_SIGNALED)
    recv = RecvWR(wr_id=4, num_sge=1, sg=[SGE(mr.buf + 8 * SIZE, SIZE, mr.lkey)])
    if step("RC: a second SEND (the grader made it fail)", lambda: (rc.post_recv(recv), rc.post_send(send))):
        wcs = poll(cq, 2)
        st = {wc.wr_id: wc.status for wc in wcs}
        say(st.get(3) not in (None, e.IBV_WC_SUCCESS), f"RC: the SEND completed in error (statuses {st})")
        got = state_of(rc)
        say(got == "ERR", f"RC: ibv_query_qp says ERR, where the device put it (got {got})")
    modify(rc, "RC", e.IBV_QPS_RESET, 0)
    modify(rc, "RC", e.IBV_QPS_INIT, INIT_MASK | e.IBV_QP_ACCESS_FLAGS, pkey_index=0,
           port_num=1, qp_access_flags=access)

    free(((ud, "UD QP"), (rc, "RC QP"), (mr, "MR"), (cq, "CQ"), (pd, "PD"), (ctx, "context")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
