#!/bin/bash
# migration: two guests cabled back to back (opensm on node 0; its own run directory, as the 7x
# tests), and live migrations of one of them (`pibvm migrate N`: QEMU's migration into a new
# QEMU process on this host) while RDMA traffic runs between them:
#   - `ib_write_bw -D 30` across a move of node 1, the client, then across a move of node 0, the
#     server, the node whose cable listens and runs the SM (pibvm has node 1's QEMU redial at
#     once, QMP chardev-change), both with the default QP timeout and retries (14 and 7: a QP
#     errs after about half a second without ACKs): both sides exit 0 and report their
#     bandwidth;
#   - `rping -C 2000 -V` (rdma_cm over IPoIB; every ping's data checked by rping) across a move
#     of node 1: both exit 0, all 2000 pings printed;
#   - the ports never left ACTIVE: neither node's link_downs hw_counter moved, each move is one
#     link_recoveries on both nodes (the same port came back on the new cable, include/
#     pib_link.h "Moving"), the LIDs are the ones the SM gave before;
#   - the downtime QEMU measured is reported for each move (not asserted: a benchmark figure).
# e2e-checks: 39
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

switched_dir vm-migration
switched_up --nodes 2

lids() { echo "$(port_lid 0) $(port_lid 1)"; }
port_lid() { on "$1" cat /sys/class/infiniband/pib_0/ports/1/lid; }
counts() { echo "$(hw_counter "$1" link_downs) $(hw_counter "$1" link_recoveries)"; }
lids0=$(lids)

# migrate_during N LOG: move node N once node 1 has sent 1000 packets more than now; the
# downtime goes to the log.
migrate_during() {
  local n=$1 tx0 i out
  tx0=$(hw_counter 1 tx_packets)
  for ((i = 0; i < 300; i++)); do
    [ "$(hw_counter 1 tx_packets)" -gt $((tx0 + 1000)) ] && break
    sleep 0.1
  done
  check "node 1 is sending before node $n moves" test "$(hw_counter 1 tx_packets)" -gt $((tx0 + 1000))
  out=$("$PIBVM" migrate "$n" 2>&1)
  check "pibvm migrate $n" test $? -eq 0
  echo "$out"
  echo "node $n: $(grep -o '"downtime_ms": [0-9]*' <<<"$out")" >> "$2"
}

# moved N BEFORE0 BEFORE1: the checks after a move of node N; BEFOREn is node n's "link_downs
# link_recoveries" before it.
moved() {
  local n=$1 b=("$2" "$3") m d r
  for m in 0 1; do
    read -r d r <<<"${b[$m]}"
    check "node $m: port ACTIVE after node $n moved" test "$(port_state $m)" = ACTIVE
    check "node $m: link_downs unchanged ($d)" test "$(hw_counter $m link_downs)" = "$d"
    check "node $m: one link recovery ($r -> $(hw_counter $m link_recoveries))" \
      test "$(hw_counter $m link_recoveries)" -eq $((r + 1))
  done
  check "the LIDs are the SM's first ones ($lids0)" test "$(lids)" = "$lids0"
}

downtimes=$(mktemp)
for mover in 1 0; do
  c0=$(counts 0) c1=$(counts 1)
  slog=$(mktemp) clog=$(mktemp)
  "$PIBVM" exec 0 --timeout 180 -- ib_write_bw -d pib_0 -F -D 30 >"$slog" 2>&1 &
  spid=$!
  wait_listen 0 18515
  "$PIBVM" exec 1 --timeout 180 -- ib_write_bw -d pib_0 -F -D 30 node0 >"$clog" 2>&1 &
  cpid=$!
  migrate_during "$mover" "$downtimes"
  wait "$cpid"; crc=$?
  wait "$spid"; src=$?
  echo "--- ib_write_bw server (node 0)"; cat "$slog"
  echo "--- ib_write_bw client (node 1)"; cat "$clog"
  check "ib_write_bw across node $mover's move: server exits 0 (got $src)" test "$src" -eq 0
  check "ib_write_bw across node $mover's move: client exits 0 (got $crc)" test "$crc" -eq 0
  check "ib_write_bw across node $mover's move: the client reports its bandwidth" \
    grep -Eq '^ *65536 +[0-9]+ ' "$clog"
  rm -f "$slog" "$clog"
  moved "$mover" "$c0" "$c1"
done

trap '"$PIBVM" ipoib down >/dev/null 2>&1; switched_down' EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish
c0=$(counts 0) c1=$(counts 1)
slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 0 --timeout 300 -- rping -s -a 10.13.0.1 -p 7174 -C 2000 -V >"$slog" 2>&1 &
spid=$!
check "rping: the server listens" wait_cm_listen 0 7174
"$PIBVM" exec 1 --timeout 300 -- rping -c -a 10.13.0.1 -p 7174 -C 2000 -V -v >"$clog" 2>&1 &
cpid=$!
migrate_during 1 "$downtimes"
wait "$cpid"; crc=$?
wait "$spid"; src=$?
tail -3 "$clog"; tail -3 "$slog"
check "rping across node 1's move: server exits 0 (got $src)" test "$src" -eq 0
check "rping across node 1's move: client exits 0 (got $crc)" test "$crc" -eq 0
check "rping across node 1's move: 2000 pings, data verified" \
  test "$(grep -c '^ping data: rdma-ping-' "$clog")" -eq 2000
rm -f "$slog" "$clog"
moved 1 "$c0" "$c1"
echo "--- downtime QEMU measured per move"; cat "$downtimes"; rm -f "$downtimes"
finish
