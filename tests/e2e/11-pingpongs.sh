#!/bin/bash
# The other libibverbs example programs, unmodified, between node 0 and node 1: UC, UD, and an
# SRQ shared by 8 QPs.  Each validates its data with -c.  ibv_xsrq_pingpong needs XRC, which
# pib does not implement (ibv_devinfo does not report it), so it is not run.
source "$(dirname "$0")/lib.sh"

for prog in ibv_uc_pingpong ibv_ud_pingpong; do
  pair "$prog" 18515 $prog -d pib_0 -c -- $prog -d pib_0 -c node0
  check "$prog: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
done
pair "ibv_srq_pingpong -q 8" 18515 ibv_srq_pingpong -d pib_0 -q 8 -c -- \
     ibv_srq_pingpong -d pib_0 -q 8 -c node0
check "ibv_srq_pingpong: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
pair "ibv_ud_pingpong -e" 18515 ibv_ud_pingpong -d pib_0 -e -- ibv_ud_pingpong -d pib_0 -e node0
finish
