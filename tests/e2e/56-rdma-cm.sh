#!/bin/bash
# rdma-cm: connection setup as most RDMA software does it, by IP address over IPoIB (datagram
# mode): rdma_cm resolves the address (ARP on ib0), asks the SA for a path record, and ib_cm
# exchanges REQ/REP/RTU on QP1.  rdma-core's own tools, from our 56.1 build:
#   - rping: 100 RDMA WRITE/READ round trips, each buffer validated (-V);
#   - ucmatose (RC) and udaddy (UD, AHs from the path): their own data checks, "return status 0";
#   - mckey: a UD multicast group joined through the SA (MCMemberRecord), 10 datagrams each way;
#   - perftest over rdma_cm (-R): ib_send_bw and ib_write_lat;
#   - qperf rc_bw, rc_lat and ud_lat to node1-ib.
source "$(dirname "$0")/lib.sh"

trap '"$PIBVM" ipoib down >/dev/null 2>&1' EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish

# rping: server node 1, client node 0; -V verifies every buffer, -v prints each ping.
cm_pair rping 7174 1 rping -s -a 10.13.0.2 -p 7174 -C 100 -V -- \
  rping -c -a 10.13.0.2 -p 7174 -C 100 -V -v
check "rping: 100 pings printed by the client" \
  test "$(grep -c '^ping data: rdma-ping-' <<<"$pair_out_client")" -eq 100

# ucmatose: an RC connection, 10 messages each way by default.
cm_pair ucmatose 7471 1 ucmatose -b 10.13.0.2 -- ucmatose -s 10.13.0.2
check "ucmatose: the client reports return status 0" grep -q "return status 0" <<<"$pair_out_client"

# udaddy: UD with AHs built from the path record.
cm_pair udaddy 7174 1 udaddy -b 10.13.0.2 -- udaddy -s 10.13.0.2
check "udaddy: the client reports return status 0" grep -q "return status 0" <<<"$pair_out_client"

# mckey: node 1 joins 239.1.1.1 and waits for 10 datagrams; node 0 joins and sends them.
# Then the other way.  The sender starts once the SA holds the receiver's MCMemberRecord for the
# group (saquery -m; the receiver attaches its QP as the join's answer arrives, and mckey's
# sender pauses 3 s after its own join before it sends).
# sa_member NODE_ASKING GID MGID_TAIL: the SA lists GID as a member of a group whose MGID ends
# in MGID_TAIL (the IPv4 group's low 32 bits).
sa_member() {
  on "$1" saquery -m 2>/dev/null | python3 -c '
import ipaddress, sys
gid, tail = ipaddress.ip_address(sys.argv[1]), sys.argv[2]
rec = {}
for line in sys.stdin.read().splitlines() + ["MCMemberRecord"]:
    if line.startswith("MCMemberRecord"):
        if rec.get("MGID", "").endswith(tail) and rec.get("PortGid") and \
           ipaddress.ip_address(rec["PortGid"]) == gid:
            sys.exit(0)
        rec = {}
    elif "..." in line:
        k, v = line.strip().split(".", 1)
        rec[k] = v.strip(".")
sys.exit(1)' "$2" "$3"
}
mckey_way() {
  local rx=$1 tx=$((1 - $1)) slog spid src crc out gid i
  gid=$(on "$rx" cat /sys/class/infiniband/pib_0/ports/1/gids/0)
  slog=$(mktemp)
  "$PIBVM" exec "$rx" --timeout 120 -- mckey -m 239.1.1.1 -b "10.13.0.$((rx + 1))" -C 10 >"$slog" 2>&1 &
  spid=$!
  for ((i = 0; i < 150; i++)); do
    sa_member "$rx" "$gid" "ef01:101" && break
    sleep 0.2
  done
  check "mckey: the SA lists node $rx as a member of 239.1.1.1's group" sa_member "$rx" "$gid" "ef01:101"
  out=$(on "$tx" timeout 120 mckey -m 239.1.1.1 -b "10.13.0.$((tx + 1))" -s -C 10 2>&1); crc=$?
  wait "$spid"; src=$?
  echo "--- mckey receiver (node $rx)"; cat "$slog"
  echo "--- mckey sender (node $tx)"; echo "$out"
  check "mckey node $tx -> node $rx: sender exits 0 (got $crc)" test "$crc" -eq 0
  check "mckey node $tx -> node $rx: receiver got its 10 datagrams, exits 0 (got $src)" \
    test "$src" -eq 0
  check "mckey node $tx -> node $rx: receiver says data transfers complete" \
    grep -q "data transfers complete" "$slog"
  rm -f "$slog"
}
mckey_way 1
mckey_way 0

# perftest over rdma_cm.
cm_pair "ib_send_bw -R" 18515 1 ib_send_bw -R -d pib_0 -n 200 -- \
  ib_send_bw -R -d pib_0 -n 200 10.13.0.2
cm_pair "ib_write_lat -R" 18515 1 ib_write_lat -R -d pib_0 -n 200 -- \
  ib_write_lat -R -d pib_0 -n 200 10.13.0.2

# qperf: its server listens on TCP 19765 (over ib0 here) and stays; the tests go through it.
"$PIBVM" exec 1 --timeout 300 -- qperf >/dev/null 2>&1 &
qpid=$!
if wait_listen 1 19765; then
  out=$(on 0 timeout 240 qperf -t 3 node1-ib rc_bw rc_lat ud_lat 2>&1); rc=$?
  echo "--- qperf node1-ib rc_bw rc_lat ud_lat"; echo "$out"
  check "qperf exits 0 (got $rc)" test "$rc" -eq 0
  for t in rc_bw rc_lat ud_lat; do
    check "qperf $t reports a figure" grep -qE "^$t:" <<<"$out"
  done
else
  check "qperf server listens on 19765" false
fi
on 1 pkill -x qperf >/dev/null 2>&1
wait "$qpid" 2>/dev/null

finish
