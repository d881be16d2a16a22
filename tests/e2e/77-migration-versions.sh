#!/bin/bash
# migration-versions: a guest moved between QEMU 7.2 and QEMU 10.0, the two stacks' builds of
# pib's QEMU, and back, while RDMA runs: two guests cabled back to back (opensm on node 0; its own
# run directory), on machine type pc-q35-7.2, which both QEMUs have (PIBVM_MACHINE); during
# `ib_write_bw -D 30` node 1 (the client, whose cable dials) is moved into the other stack's QEMU
# and back into this stack's, then node 0 (the server and the SM, whose cable listens: pibvm
# has the peer redial, with the option the peer's QEMU version takes) the same:
#   - each move succeeds, and the node then runs in the QEMU it was moved into;
#   - ib_write_bw's both sides exit 0 and report their bandwidth;
#   - the ports stay ACTIVE, neither node's link_downs moves, each move is one link recovery;
#   - an ibv_rc_pingpong with its data check (-c) runs after.
# It needs both stacks built (make, and make PIB_STACK=trixie); with one of them missing it is
# skipped, saying so (CI runs it in its trixie step, after both builds).
# e2e-checks: 22
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

q72=$TOP/build/qemu-system-x86_64
q10=$TOP/build/trixie/qemu-system-x86_64
for q in "$q72" "$q10"; do
  [ -x "$q" ] || skip_script "needs both stacks' QEMU: $q is not built (make; make PIB_STACK=trixie)"
done
if [ "${PIB_STACK:-bookworm}" = bookworm ]; then here=$q72 there=$q10; else here=$q10 there=$q72; fi
export PIBVM_MACHINE=pc-q35-7.2

switched_dir vm-migration-versions
switched_up --nodes 2

counts() { echo "$(hw_counter "$1" link_downs) $(hw_counter "$1" link_recoveries)"; }
# node_runs N BINARY: node N's QEMU process (its pidfile's) runs BINARY (one of its arguments
# is that path: a binary built in the Debian 13 root runs as an argument of that root's loader).
node_runs() { tr '\0' '\n' <"/proc/$(cut -d' ' -f1 "$PIBVM_DIR/node$1.pid")/cmdline" | grep -qxF "$2"; }
# binary_of Q: the binary QEMU Q runs: Q, or for the wrapper of a QEMU built in the Debian 13
# root (mk/root.sh), the one under root-bin/ it runs with that root's loader.
binary_of() {
  if [ "$(head -c 2 "$1")" = '#!' ]; then echo "$(dirname "$1")/root-bin/qemu-system-x86_64"
  else readlink -f "$1"; fi
}
c0=$(counts 0) c1=$(counts 1)

slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 0 --timeout 300 -- ib_write_bw -d pib_0 -F -D 30 >"$slog" 2>&1 &
spid=$!
check "ib_write_bw: the server listens" wait_listen 0 18515
"$PIBVM" exec 1 --timeout 300 -- ib_write_bw -d pib_0 -F -D 30 node0 >"$clog" 2>&1 &
cpid=$!
check_sending 1 1000 "it moves"
for n in 1 0; do
  for q in "$there" "$here"; do
    ver=$("$q" --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')
    check "pibvm migrate $n into QEMU $ver" env PIBVM_QEMU="$q" "$PIBVM" migrate "$n"
    check "node $n runs in QEMU $ver ($(binary_of "$q"))" node_runs "$n" "$(binary_of "$q")"
  done
done
wait "$cpid"; crc=$?
wait "$spid"; src=$?
echo "--- ib_write_bw client (node 1)"; cat "$clog"
check "ib_write_bw across the moves: server exits 0 (got $src)" test "$src" -eq 0
check "ib_write_bw across the moves: client exits 0 (got $crc)" test "$crc" -eq 0
check "ib_write_bw across the moves: the client reports its bandwidth" grep -Eq '^ *65536 +[0-9]+ ' "$clog"
rm -f "$slog" "$clog"
b=("$c0" "$c1")
for m in 0 1; do
  read -r d r <<<"${b[$m]}"
  check "node $m: port ACTIVE after the moves" test "$(port_state $m)" = ACTIVE
  check "node $m: link_downs unchanged ($d)" test "$(hw_counter $m link_downs)" = "$d"
  check "node $m: four link recoveries ($r -> $(hw_counter $m link_recoveries))" \
    test "$(hw_counter $m link_recoveries)" -eq $((r + 4))
done
pair "ibv_rc_pingpong -c after the moves" 18515 ibv_rc_pingpong -d pib_0 -c -n 100 \
  -- ibv_rc_pingpong -d pib_0 -c -n 100 node0
finish
