#!/bin/bash
# ipoib: IP over InfiniBand between the two guests, on the fabric opensm manages, in both modes:
#   - datagram (a UD QP): ib0 joins the broadcast group through the SA (its carrier comes on),
#     ARP goes out as multicast (the device's rx_mcast_packets/tx_mcast_packets grow on both
#     nodes) and `ping -c 10 node1-ib` loses nothing; a 1900-byte ping fits the 2044 MTU;
#   - connected (RC QPs receiving through an SRQ): MTU 65520, ping loses nothing, and an
#     8000-byte ping (which datagram mode could only fragment) crosses in one IPoIB-CM packet;
#   - iperf3 over ib0 in each mode moves data (its figure is printed next to iperf3 over the
#     management virtio-net, for the record, not as a pass mark).
#   - interrupt coalescing (ethtool -C ib0, the receive CQ's event moderation): see below.
# ib_ipoib is unloaded at the end, whatever happened, so the next test sees the port as before.
source "$(dirname "$0")/lib.sh"

trap '"$PIBVM" ipoib down >/dev/null 2>&1' EXIT

# ping_ok FROM TO COUNT SIZE: ping's summary says COUNT sent, COUNT received.
ping_ok() {
  local out
  out=$(on "$1" ping -c "$3" -s "$4" -W 5 "$2" 2>&1)
  echo "--- node $1: ping -c $3 -s $4 $2"; echo "$out" | tail -n 3
  grep -q "^$3 packets transmitted, $3 packets received, 0% packet loss" <<<"$out"
}

# iperf NODE_FROM HOST LABEL: iperf3 for 5 s to HOST (a one-shot server on the other node);
# true if the receiver got data.  Prints the receiver's rate.
iperf() {
  local from=$1 host=$2 label=$3 to=$((1 - $1)) out bps
  "$PIBVM" exec "$to" --timeout 60 -- iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  wait_listen "$to" 5201 || { echo "iperf3 server did not listen"; return 1; }
  out=$(on "$from" iperf3 -c "$host" -p 5201 -t 5 -J 2>&1)
  wait
  bps=$(python3 -c 'import json,sys; print(int(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]))' <<<"$out" 2>/dev/null)
  echo "iperf3 $label: $(( ${bps:-0} / 1000000 )) Mbit/s received"
  [ "${bps:-0}" -gt 0 ]
}

# mode_up MODE MTU: pibvm brings IPoIB up in MODE; both ib0 have their carrier and MTU, and
# 10 pings each way lose nothing.
mode_up() {
  local n st
  echo "== $1 mode"
  "$PIBVM" ipoib down >/dev/null 2>&1
  check "pibvm ipoib $1: both ib0 up with carrier (broadcast group joined)" "$PIBVM" ipoib "$1"
  for n in 0 1; do
    st=$(on $n pib-ipoib status)
    echo "node $n: ib0 $st"
    check "node $n: ib0 $1, carrier 1, MTU $2" test "$st" = "$1 1 $2"
  done
  check "node 0 pings node1-ib 10 times, none lost" ping_ok 0 node1-ib 10 56
  check "node 1 pings node0-ib 10 times, none lost" ping_ok 1 node0-ib 10 56
}

mc_before0=$(hw_counter 0 rx_mcast_packets) mc_before1=$(hw_counter 1 rx_mcast_packets)
mode_up datagram 2044
check "a 1900-byte ping (one 2044-byte datagram) crosses" ping_ok 0 node1-ib 3 1900
mc0=$(hw_counter 0 rx_mcast_packets) mc1=$(hw_counter 1 rx_mcast_packets)
echo "rx_mcast_packets: node 0 $mc_before0 -> $mc0, node 1 $mc_before1 -> $mc1"
check "node 0 received multicast (ARP on the broadcast group)" test "$mc0" -gt "$mc_before0"
check "node 1 received multicast (ARP on the broadcast group)" test "$mc1" -gt "$mc_before1"
check "iperf3 over IPoIB datagram moves data" iperf 0 node1-ib "IPoIB datagram"

# Interrupt coalescing: ethtool -C ib0 on node 1 sets its receive CQ's event moderation
# (ib_modify_cq, the device's MODIFY_CQ).  With rx-usecs 20000 and no frame count, an idle ib0's
# receive waits 20 ms for its interrupt, so pings still all arrive but take at least that long
# (median of 10, in case other traffic woke the poll loop early); rx-usecs 0 turns it off again.
# iperf3 runs with and without a 100-us moderation, and the completion interrupts node 1 took
# for each are printed (figures, not pass marks).
# ping_median FROM TO: 10 pings, none lost; prints the median round trip in microseconds.
ping_median() {
  local out
  out=$(on "$1" ping -c 10 -W 5 "$2" 2>&1)
  grep -q "^10 packets transmitted, 10 packets received, 0% packet loss" <<<"$out" || return 1
  sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' <<<"$out" | sort -n |
    awk '{t[NR] = $1} END {if (NR == 10) printf "%d\n", (t[5] + t[6]) / 2 * 1000; else exit 1}'
}
coalesce_ping() {
  local want=$1 op=$2 us
  us=$(ping_median 0 node1-ib) || { echo "pings lost"; return 1; }
  echo "node 0 -> node1-ib, node 1 rx-usecs $want: median round trip $us us"
  [ "$us" "$op" 20000 ]
}
iperf_irqs() {
  local before after
  on 1 ethtool -C ib0 rx-usecs "$1" rx-frames "$2" || return 1
  before=$(comp_irqs 1)
  iperf 0 node1-ib "IPoIB datagram, node 1 rx-usecs $1 rx-frames $2" || return 1
  after=$(comp_irqs 1)
  echo "  node 1 completion interrupts during it: $((after - before))"
}
echo "== interrupt coalescing (event moderation)"
check "node 1: ethtool -C ib0 rx-usecs 20000 rx-frames 0" on 1 ethtool -C ib0 rx-usecs 20000 rx-frames 0
coal=$(on 1 ethtool -c ib0)
check "node 1: ethtool -c ib0 reads back rx-usecs 20000" grep -Eq "^rx-usecs: +20000$" <<<"$coal"
check "pings with 20 ms moderation: none lost, median round trip >= 20 ms" coalesce_ping 20000 -ge
check "node 1: ethtool -C ib0 rx-usecs 0 (moderation off)" on 1 ethtool -C ib0 rx-usecs 0 rx-frames 0
check "pings without moderation: none lost, median round trip < 20 ms" coalesce_ping 0 -lt
check "iperf3 without moderation moves data" iperf_irqs 0 0
check "iperf3 with rx-usecs 100 rx-frames 64 moves data" iperf_irqs 100 64
on 1 ethtool -C ib0 rx-usecs 0 rx-frames 0 >/dev/null 2>&1

mode_up connected 65520
check "an 8000-byte ping crosses over IPoIB-CM" ping_ok 0 node1-ib 3 8000
check "iperf3 over IPoIB connected moves data" iperf 0 node1-ib "IPoIB connected"
check "iperf3 over the management virtio-net (for comparison)" iperf 0 node1 "virtio-net"

finish
