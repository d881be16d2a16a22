#!/bin/bash
# rdma-cm: connection setup as most RDMA software does it, by IP address over IPoIB (datagram
# mode): rdma_cm resolves the address (ARP on ib0), asks the SA for a path record, and ib_cm
# exchanges REQ/REP/RTU on QP1.  rdma-core's own tools, from our 56.1 build:
#   - rping: 100 RDMA WRITE/READ round trips, each buffer validated (-V);
#   - ucmatose (RC) and udaddy (UD, AHs from the path): their own data checks, "return status 0";
#   - mckey: a UD multicast group joined through the SA (MCMemberRecord), 10 datagrams each way,
#     counted by the device and by both ports' PMAs (PortMulticastXmitPkts/RcvPkts);
#   - perftest over rdma_cm (-R): ib_send_bw and ib_write_lat;
#   - qperf rc_bw, rc_lat and ud_lat to node1-ib.
# e2e-checks: 32
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

# mckey: node 1 joins an IPv4 group and waits for 10 datagrams; node 0 joins it and sends them.
# Then the other way, on a group of its own.  The sender starts once the SA has the group: the
# receiver, its first member, created it by joining (saquery -m; opensm shows members' PortGids
# only to trusted requesters, so the group's MGID is what tells).  The receiver attaches its QP
# as the join's answer arrives, and mckey's sender pauses 3 s after its own join before sending.
# sa_group NODE MGID_TAIL: the SA has a multicast group whose MGID ends in MGID_TAIL (rdma_cm's
# MGID for an IPv4 group ends in the address's low 28 bits: 239.1.1.1 is ...f01:101).
sa_group() { on "$1" saquery -m 2>/dev/null | grep -q "^[[:space:]]*MGID\.*ff12:4001:.*:$2\$"; }
mc_counters() {
  local c out=
  for c in rx_mcast_packets rx_drop_mcast rx_drop_qkey rx_drop_pkey; do out+="$(hw_counter "$1" $c 2>/dev/null) "; done
  echo "$out"
}
# pma_mcast NODE FIELD: PortMulticastXmitPkts or PortMulticastRcvPkts of the node's port, as
# its PMA answers perfquery -x (PortCountersExtended).
pma_mcast() { on "$1" perfquery -x | sed -n "s/^$2:\.*//p" | head -n 1; }
# mckey_way RX LAST_OCTET: node RX receives on 239.1.1.LAST_OCTET, the other node sends.
mckey_way() {
  local rx=$1 grp=239.1.1.$2 tail=f01:10$2 tx=$((1 - $1)) slog spid src crc out i before after
  local pma_rx0 pma_tx0 pma_rx1 pma_tx1
  slog=$(mktemp)
  before=$(mc_counters "$rx")
  pma_rx0=$(pma_mcast "$rx" PortMulticastRcvPkts) pma_tx0=$(pma_mcast "$tx" PortMulticastXmitPkts)
  "$PIBVM" exec "$rx" --timeout 200 -- timeout 180 mckey -m "$grp" -b "10.13.0.$((rx + 1))" -C 10 >"$slog" 2>&1 &
  spid=$!
  for ((i = 0; i < 60; i++)); do
    sa_group "$rx" "$tail" && break
    sleep 0.2
  done
  check "mckey: the SA has $grp's group, which node $rx's join created" sa_group "$rx" "$tail"
  out=$(on "$tx" timeout 120 mckey -m "$grp" -b "10.13.0.$((tx + 1))" -s -C 10 2>&1); crc=$?
  wait "$spid"; src=$?
  echo "--- mckey receiver (node $rx)"; cat "$slog"
  after=$(mc_counters "$rx")
  echo "node $rx counters (rx_mcast_packets rx_drop_mcast rx_drop_qkey rx_drop_pkey): $before-> $after"
  check "mckey node $tx -> node $rx: the device took at least 10 multicast packets" \
    test "${after%% *}" -ge $(( ${before%% *} + 10 ))
  pma_rx1=$(pma_mcast "$rx" PortMulticastRcvPkts) pma_tx1=$(pma_mcast "$tx" PortMulticastXmitPkts)
  check "mckey node $tx -> node $rx: node $tx's PMA PortMulticastXmitPkts grew by at least 10 ($pma_tx0 -> $pma_tx1)" \
    test "${pma_tx1:-0}" -ge $(( ${pma_tx0:-10**9} + 10 ))
  check "mckey node $tx -> node $rx: node $rx's PMA PortMulticastRcvPkts grew by at least 10 ($pma_rx0 -> $pma_rx1)" \
    test "${pma_rx1:-0}" -ge $(( ${pma_rx0:-10**9} + 10 ))
  echo "--- mckey sender (node $tx)"; echo "$out"
  check "mckey node $tx -> node $rx: sender exits 0 (got $crc)" test "$crc" -eq 0
  check "mckey node $tx -> node $rx: receiver got its 10 datagrams, exits 0 (got $src)" \
    test "$src" -eq 0
  check "mckey node $tx -> node $rx: receiver says data transfers complete" \
    grep -q "data transfers complete" "$slog"
  rm -f "$slog"
}
mckey_way 1 1
mckey_way 0 2

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
# The image has no pkill: the server is found by its name in /proc.
on 1 sh -c 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = qperf ] && kill ${p#/proc/}; done'
wait "$qpid" 2>/dev/null

finish
