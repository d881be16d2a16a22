#!/bin/bash
# misuse: a verbs consumer that gets everything wrong gets the IB answer, and the kernel stays
# healthy.  pib-misuse-test (tests/guest/pib_misuse_test.c, where the cases and what pib does
# with WRs posted in the wrong state are documented) runs in loopback on node 1: bad lkeys and
# SGEs outside their MR (LOC_PROT_ERR), WRs posted in RESET/INIT/ERR, more WRs than the queues
# hold (ENOMEM, bad_wr), a CQ overflow (IBV_EVENT_CQ_ERR), MRs deregistered under a running
# RDMA WRITE/READ (dereg succeeds, the transfer stops with an access error, no byte changes
# afterwards), destroying objects still in use (EBUSY), and importing the device, a PD and an
# MR with handles that are not there (refused) or whose MR is gone (LOC_PROT_ERR), and dma-buf
# MRs (vgem's buffer): a WRITE lands, bad descriptors and ranges are refused; device memory
# misused (bad DM sizes, DM MRs past the DM or not zero-based, a busy DM freed, a WRITE past a
# DM MR: REM_ACCESS_ERR, nothing written).  Then the port is still ACTIVE and both nodes still
# talk.
# e2e-checks: 19
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

n=1
check "node $n: pib-misuse-test is installed" on $n sh -c 'command -v pib-misuse-test >/dev/null'
# The dmabuf case's exporter where the kernel has no udmabuf (Debian 12's).
check "node $n: vgem loaded (a dma-buf exporter)" on $n modprobe vgem
dmesg_mark $n
out=$("$PIBVM" exec $n --timeout 900 -- pib-misuse-test -d pib_0 -t 60 2>&1); rc=$?
echo "$out"
check "pib-misuse-test exits 0 (rc=$rc)" test $rc -eq 0
check "it made checks" grep -q '^PASS' <<<"$out"
check "no FAIL line" bash -c '! grep -q "^FAIL" <<<"$1"' _ "$out"
for c in bad-lkey sge-range wrong-state queue-depth cq-overflow dereg-inflight destroy-busy mcast import dm \
         dmabuf; do
  check "case $c ran" grep -q "^PASS  $c:" <<<"$out"
done
no_splats $n
check "node $n: port still ACTIVE" wait_port $n ACTIVE 10
check "node 0 and node $n still talk (ibv_rc_pingpong)" pingpong 0 $n -n 50
finish
