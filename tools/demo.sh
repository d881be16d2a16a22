#!/bin/bash
# `make demo`: boot two guests linked by a socket, show the pib HCA in each, and run an RDMA
# ping-pong (ibv_rc_pingpong, unmodified) between them through doorbells, DMA and interrupts.
set -euo pipefail
cd "$(dirname "$0")/.."
source mk/stack.sh        # PIB_STACK: the stack's outputs, STACK_OUT
export PIBVM_DIR=${PIBVM_DIR:-$STACK_OUT/vm}
log=$STACK_OUT/demo-server.log
tools/pibvm down >/dev/null 2>&1 || true
trap 'tools/pibvm down >/dev/null 2>&1 || true' EXIT
tools/pibvm up --nodes 2
for n in 0 1; do
  echo "=== node $n: ibv_devinfo"
  tools/pibvm exec "$n" -- ibv_devinfo -d pib_0
done

echo "=== ibv_rc_pingpong: server on node0, client on node1 (4 KiB messages, data checked)"
source tests/e2e/lib.sh   # on, wait_listen
on 0 ibv_rc_pingpong -d pib_0 -s 4096 -n 1000 -c > "$log" 2>&1 &
server=$!
wait_listen 0 18515 || { echo "the server on node0 did not start:"; cat "$log"; exit 1; }
on 1 ibv_rc_pingpong -d pib_0 -s 4096 -n 1000 -c node0
wait "$server" || { echo "server failed:"; cat "$log"; exit 1; }
echo "--- server side"
cat "$log"
