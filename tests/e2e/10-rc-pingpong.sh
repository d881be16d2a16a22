#!/bin/bash
# The RC data path with an unmodified RDMA program: ibv_rc_pingpong between node 0 and node 1
# through doorbells, DMA and interrupts, with the received data validated (-c) in every run.
# e2e-checks: 20
source "$(dirname "$0")/lib.sh"

run() {  # run NAME ARGS...: one ibv_rc_pingpong pair with ARGS on both sides
  local name=$1; shift
  pair "$name" 18515 ibv_rc_pingpong -d pib_0 -c "$@" -- ibv_rc_pingpong -d pib_0 -c "$@" node0
  check "$name: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
  grep 'iters in' <<<"$pair_out_client" || true
}

run "defaults"
run "-s 1" -s 1
run "-s 65536 -m 4096" -s 65536 -m 4096
run "-s 4096 -m 256 -n 5000" -s 4096 -m 256 -n 5000
run "-e (completion channel)" -e
run "-c -s 1048576" -s 1048576

# -e sleeps on a completion channel: the device's CEQ vector (MSI-X 2, "pib-comp") must have
# delivered interrupts on both nodes.
for n in 0 1; do
  irqs=$(comp_irqs $n)
  check "node $n: completion interrupts taken (pib-comp: $irqs)" test "${irqs:-0}" -gt 0
done
finish
