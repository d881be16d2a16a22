#!/bin/bash
# ipoib: IP over InfiniBand between the two guests, on the fabric opensm manages, in both modes:
#   - datagram (a UD QP): ib0 joins the broadcast group through the SA (its carrier comes on)
#     and `ping -c 10` each way loses nothing.  ARP goes out as the broadcast group's multicast:
#     with IPv6 off on ib0 (its ND and MLD are multicast too) and node 0's neighbour entry
#     flushed before each of ARP_ROUNDS single pings, node 0's tx_mcast_packets and node 1's
#     rx_mcast_packets grow by exactly ARP_ROUNDS (one ARP request each; the reply is unicast).
#     A 1900-byte ping fits the 2044 MTU; an 8000-byte one crosses as 4 IP fragments a packet
#     (node 0's Ip:FragCreates grows by 12 for 3 pings: the control for connected mode);
#   - connected (RC QPs receiving through an SRQ): MTU 65520, ping loses nothing, and an
#     8000-byte ping crosses as one IP packet, one IPoIB-CM SEND: Ip:FragCreates and
#     Ip:ReasmReqds (/proc/net/snmp) stay as they were on both nodes;
#   - iperf3 over ib0 (each mode, and with and without interrupt moderation) moves at least
#     IPERF_MIN_MB, and the receiver got what the sender sent but for what TCP still held in
#     flight when iperf3's server stopped counting (iperf3 -J: sum_sent - sum_received within
#     the send and receive buffers' limits; see iperf below); its rate is printed next to iperf3 over the management virtio-net, for
#     the record, not as a pass mark (the virtio-net run is held to the same byte count);
#   - interrupt coalescing (ethtool -C ib0, the receive CQ's event moderation): see below.
# ib_ipoib is unloaded at the end, whatever happened, so the next test sees the port as before.
# e2e-checks: 28
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
# true if the receiver got at least IPERF_MIN_MB, and no more than was sent nor less than was
# sent less what TCP can hold in flight (the sender's send buffer and the receiver's receive
# buffer at their largest, tcp_wmem and tcp_rmem): iperf3 3.12's server stops counting when
# the client's TEST_END comes over the control connection and closes the data sockets unread
# (iperf_server_api.c), so sum_received falls short of sum_sent by what was still in flight.
# Prints the figures.
# IPERF_MIN_MB: "data moved" in earnest, 8 Mbit/s over the 5 s, a small part of what IPoIB
# moves here under TCG (the run prints it), so a machine several times slower still passes.
IPERF_MIN_MB=5
iperf() {
  local from=$1 host=$2 label=$3 to=$((1 - $1)) out sent rcvd bps wmem rmem
  "$PIBVM" exec "$to" --timeout 60 -- iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  wait_listen "$to" 5201 || { echo "iperf3 server did not listen"; return 1; }
  out=$(on "$from" iperf3 -c "$host" -p 5201 -t 5 -J 2>&1)
  wait
  read -r sent rcvd bps < <(python3 -c 'import json, sys
e = json.load(sys.stdin)["end"]
print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"], int(e["sum_received"]["bits_per_second"]))' <<<"$out" 2>/dev/null)
  wmem=$(on "$from" awk '{print $3}' /proc/sys/net/ipv4/tcp_wmem)
  rmem=$(on "$to" awk '{print $3}' /proc/sys/net/ipv4/tcp_rmem)
  echo "iperf3 $label: ${sent:-?} bytes sent, ${rcvd:-?} received ($(( ${sent:-0} - ${rcvd:-0} )) in flight at the end;" \
       "at most $(( ${wmem:-0} + ${rmem:-0} ))), $(( ${bps:-0} / 1000000 )) Mbit/s"
  [ -n "$rcvd" ] && [ -n "$wmem" ] && [ -n "$rmem" ] && [ "$rcvd" -ge $((IPERF_MIN_MB << 20)) ] &&
    [ "$rcvd" -le "$sent" ] && [ $((sent - rcvd)) -le $((wmem + rmem)) ]
}

# snmp_ip NODE FIELD: FIELD of the Ip: line of NODE's /proc/net/snmp (FragCreates, ...).
snmp_ip() {
  on "$1" awk -v f="$2" '$1 == "Ip:" { if (!h) { for (i = 2; i <= NF; i++) k[i] = $i; h = 1 }
                                      else for (i = 2; i <= NF; i++) if (k[i] == f) print $i }' /proc/net/snmp
}
# frag_counts: "FragCreates ReasmReqds" of both nodes, as one line.  frag_same A B: A holds
# the four counts (the reads worked) and B is the same.
frag_counts() { echo "$(snmp_ip 0 FragCreates) $(snmp_ip 0 ReasmReqds) $(snmp_ip 1 FragCreates) $(snmp_ip 1 ReasmReqds)"; }
frag_same() { [[ $1 =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]] && [ "$2" = "$1" ]; }

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

mode_up datagram 2044
# ARP as multicast.  Nothing else may send multicast meanwhile: IPv6 goes off on both ib0 (its
# neighbour discovery and MLD reports are multicast too), and node 0 waits 5 s before it would
# repeat an ARP request, so each resolution is one request, whatever TCG's latency.
ARP_ROUNDS=3
for n in 0 1; do on $n sysctl -qw net.ipv6.conf.ib0.disable_ipv6=1; done
on 0 sysctl -qw net.ipv4.neigh.ib0.retrans_time_ms=5000
mc_tx0=$(hw_counter 0 tx_mcast_packets) mc_rx1=$(hw_counter 1 rx_mcast_packets)
arp_ok=0
for ((i = 0; i < ARP_ROUNDS; i++)); do
  on 0 ip neigh flush dev ib0
  ping_ok 0 node1-ib 1 56 >/dev/null && arp_ok=$((arp_ok + 1))
done
d_tx0=$(( $(hw_counter 0 tx_mcast_packets) - mc_tx0 )) d_rx1=$(( $(hw_counter 1 rx_mcast_packets) - mc_rx1 ))
echo "$ARP_ROUNDS pings, each after a neighbour flush: node 0 tx_mcast_packets +$d_tx0, node 1 rx_mcast_packets +$d_rx1"
check "node 0: $ARP_ROUNDS pings answered, each after a flush of its neighbour table ($arp_ok)" \
  test "$arp_ok" -eq "$ARP_ROUNDS"
check "node 0: sent one multicast per ARP request (tx_mcast_packets +$d_tx0 = $ARP_ROUNDS)" \
  test "$d_tx0" -eq "$ARP_ROUNDS"
check "node 1: received each on the broadcast group (rx_mcast_packets +$d_rx1 = $ARP_ROUNDS)" \
  test "$d_rx1" -eq "$ARP_ROUNDS"
check "a 1900-byte ping (one 2044-byte datagram) crosses" ping_ok 0 node1-ib 3 1900
f0=$(frag_counts)
check "an 8000-byte ping crosses in datagram mode" ping_ok 0 node1-ib 3 8000
f1=$(frag_counts)
echo "Ip: FragCreates ReasmReqds, node 0 and node 1: $f0 -> $f1"
d=$(( $(cut -d' ' -f1 <<<"$f1") - $(cut -d' ' -f1 <<<"$f0") ))
check "... as 4 IP fragments each: node 0's FragCreates +$d = 12" test "$d" -eq 12
check "iperf3 over IPoIB datagram moves >= $IPERF_MIN_MB MB, all but the last in flight received" iperf 0 node1-ib "IPoIB datagram"

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
check "iperf3 without moderation moves >= $IPERF_MIN_MB MB, all but the last in flight received" iperf_irqs 0 0
check "iperf3 with rx-usecs 100 rx-frames 64 moves >= $IPERF_MIN_MB MB, all but the last in flight received" iperf_irqs 100 64
on 1 ethtool -C ib0 rx-usecs 0 rx-frames 0 >/dev/null 2>&1

mode_up connected 65520
f0=$(frag_counts)
check "an 8000-byte ping crosses over IPoIB-CM" ping_ok 0 node1-ib 3 8000
f1=$(frag_counts)
echo "Ip: FragCreates ReasmReqds, node 0 and node 1: $f0 -> $f1"
check "... as one IP packet each way: no fragment made or reassembled on either node" \
  frag_same "$f0" "$f1"
check "iperf3 over IPoIB connected moves >= $IPERF_MIN_MB MB, all but the last in flight received" iperf 0 node1-ib "IPoIB connected"
check "iperf3 over the management virtio-net (for comparison)" iperf 0 node1 "virtio-net"

finish
