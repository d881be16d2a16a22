#!/bin/bash
# The other libibverbs example programs, unmodified, between node 0 and node 1: UC, UD, an SRQ
# shared by 8 QPs (each validates its data with -c), and XRC: ibv_xsrq_pingpong, whose
# 4 KiB messages (4 packets at its MTU 1024) go through XRC target QPs into one XRC SRQ per
# side, with only one receive posted per client (so RNR NAKs and retries run over XRC too).  It
# checks every completion's status.  With -c 2, two client processes on node 1 share one XRC
# domain (/tmp/xrc_domain) and each one's target QP delivers into the other's SRQ.
# e2e-checks: 19
source "$(dirname "$0")/lib.sh"

for prog in ibv_uc_pingpong ibv_ud_pingpong; do
  pair "$prog" 18515 $prog -d pib_0 -c -- $prog -d pib_0 -c node0
  check "$prog: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
done
pair "ibv_srq_pingpong -q 8" 18515 ibv_srq_pingpong -d pib_0 -q 8 -c -- \
     ibv_srq_pingpong -d pib_0 -q 8 -c node0
check "ibv_srq_pingpong: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
pair "ibv_ud_pingpong -e" 18515 ibv_ud_pingpong -d pib_0 -e -- ibv_ud_pingpong -d pib_0 -e node0
pair ibv_xsrq_pingpong 18515 ibv_xsrq_pingpong -d pib_0 -- ibv_xsrq_pingpong -d pib_0 node0
check "ibv_xsrq_pingpong: server reports success" grep -q '^success' <<<"$pair_out_server"
check "ibv_xsrq_pingpong: client reports success" grep -q '^success' <<<"$pair_out_client"
# Two client processes on node 1, both in the XRC domain of /tmp/xrc_domain: the
# server's messages for one client go through the other client's target QP into the first
# one's SRQ, and complete on the first one's CQ naming a QP it does not own.
pair "ibv_xsrq_pingpong -c 2" 18515 ibv_xsrq_pingpong -d pib_0 -c 2 -- \
     sh -c 'ibv_xsrq_pingpong -d pib_0 node0 & a=$!; ibv_xsrq_pingpong -d pib_0 node0; b=$?
            wait $a; exit $(($? | b))'
check "ibv_xsrq_pingpong -c 2: server reports success" grep -q '^success' <<<"$pair_out_server"
check "ibv_xsrq_pingpong -c 2: both clients report success" \
  test "$(grep -c '^success' <<<"$pair_out_client")" -eq 2
finish
