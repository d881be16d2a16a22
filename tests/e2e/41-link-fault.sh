#!/bin/bash
# link-fault: RC traffic across a link that dies, and across one that drops for a moment.
#
# (a) A peer that dies.  ib_write_bw runs from node 0 (client, the requester) to node 1
#     (server); node 1's QEMU is killed (pibvm kill 1).  Only the requester can tell: its
#     RDMA WRITEs go unacknowledged, and after the retries the QP allows, (retry_cnt + 1) ACK
#     timeouts of 4.096 us * 2^timeout each, they fail with RETRY_EXC_ERR.  (A server of
#     ib_write_bw posts nothing and would just wait on its TCP socket.)  Node 0 measures, in its
#     own clock, from its port going DOWN to perftest's exit: it must exit non-zero within that
#     bound (plus slack for TCG), and ibv_devinfo must show the port DOWN.  Node 1 boots again
#     (pibvm up --node 1) and ibv_rc_pingpong works between them, node 0 never restarted.
#
# (b) A short drop.  Node 1 comes back through a relay (pib-hostile relay, tests/hostile/):
#     node 0's listening socket is renamed, which QEMU does not notice (it keeps listening on the
#     same inode), and the relay listens under the old name, so node 1's dial goes through it.
#     While pib-verbs-test send-sizes runs (SEND/RECV 0 B .. 1 MiB, every byte checked), the
#     relay cuts both sides of the cable after SEND traffic has started; node 0's QEMU listens
#     again at once and node 1's redials a second later (QEMU's reconnect=1), so the link is
#     down for about a second; then both ports are in INIT until the subnet manager (opensm on
#     node 0) takes them to ACTIVE again, within SM_ACTIVATE_S (tests/e2e/lib.sh).  All of it
#     must fit send-sizes' retry budget (-u 19, retry_cnt 7: 8 x 2.1 s).  The RC transport
#     retransmits and every check of send-sizes passes.
#     That is the shortest drop this wiring can make: the client side of a QEMU socket chardev
#     redials only after its reconnect interval, in whole seconds.
#
# At the end the relay goes, the socket gets its name back, node 1 redials node 0 directly and
# ibv_rc_pingpong works again.
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

QP_TIMEOUT=14                   # perftest -u: 4.096 us * 2^14 = 67 ms per try
RETRY_CNT=7                     # perftest's, fixed
SLACK_MS=3000                   # perftest noticing the completion and exiting, under TCG
budget_ms=$(( (RETRY_CNT + 1) * 4096 * (1 << QP_TIMEOUT) / 1000000 ))
SS_TIMEOUT=19                   # pib-verbs-test -u: 2.1 s per try
ss_budget_ms=$(( (7 + 1) * 4096 * (1 << SS_TIMEOUT) / 1000000 ))   # retry_cnt 7
DIRECT=$LINK_RUN/link-0-1.direct.sock
work=$(mktemp -d)
relay_pid=

# Put the cable back as pibvm made it: the socket under its name, no relay, node 1 up.
unrelay() {
  [ -S "$DIRECT" ] && mv -f "$DIRECT" "$LINK_SOCK"
  [ -n "$relay_pid" ] && { kill "$relay_pid"; wait "$relay_pid"; } 2>/dev/null
  relay_pid=
}
cleanup() { unrelay; restore_node1 >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

hostile_build
check "both ports ACTIVE before the test" restore_node1
dmesg_mark 0

declare -A c0 c0b c1 c1b
echo "== (a) node 1 dies under ib_write_bw from node 0"
read_counters 0 c0
# The client's port watcher and perftest run in one guest shell: both times in node 0's clock.
client='st=/sys/class/infiniband/pib_0/ports/1/state
  ( while read s < $st; [ "${s#* }" = ACTIVE ]; do :; done; read t _ < /proc/uptime; echo "DOWN $t" ) &
  ib_write_bw -d pib_0 -F -D 60 -u '$QP_TIMEOUT' node1 > /tmp/wbw-client.log 2>&1; rc=$?
  read t _ < /proc/uptime; echo "EXIT $rc $t"; wait; cat /tmp/wbw-client.log'
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 60 -u $QP_TIMEOUT >"$work/server" 2>&1 &
server_pid=$!
wait_listen 1 18515
"$PIBVM" exec 0 --timeout 120 -- sh -c "$client" >"$work/client" 2>&1 &
client_pid=$!
# Kill once the RDMA WRITEs flow: node 0's tx_packets moves (without hw_counters: after 6 s).
tx0=$(on 0 cat "$HW_COUNTERS/tx_packets" 2>/dev/null)
for i in $(seq 1 30); do
  sleep 0.5
  tx1=$(on 0 cat "$HW_COUNTERS/tx_packets" 2>/dev/null)
  [ -n "$tx0" ] && [ "${tx1:-0}" -gt $((tx0 + 1000)) ] && break
  [ -z "$tx0" ] && [ "$i" -ge 10 ] && break
done
check "kill node 1 while ib_write_bw runs" "$PIBVM" kill 1
t0=$SECONDS
wait "$client_pid"
host_s=$((SECONDS - t0))
wait "$server_pid"
cat "$work/client"
down=$(awk '$1 == "DOWN" {print $2}' "$work/client")
read -r _ rc end < <(grep '^EXIT ' "$work/client")
ms=$(awk -v a="$down" -v b="$end" 'BEGIN { if (a == "" || b == "") print -1; else printf "%d", (b - a) * 1000 }')
echo "node 0: port DOWN at $down s, perftest exit $rc at $end s: ${ms} ms; retry bound ${budget_ms} ms (+${SLACK_MS} ms slack); ${host_s} s on the host"
check "node 0: ib_write_bw exits non-zero (got ${rc:-nothing})" test "${rc:-0}" -ne 0
check "node 0: it reports the completion error" grep -q 'Completion with error\|Failed status 12' "$work/client"
check "node 0: it gave up within the retry bound: ${ms} ms <= ${budget_ms} + ${SLACK_MS} ms" \
  test "$ms" -ge 0 -a "$ms" -le $((budget_ms + SLACK_MS))
check "node 0: ... and not before one ACK timeout" test "$ms" -ge $((budget_ms / (RETRY_CNT + 1)))
check "node 0: ibv_devinfo shows the port DOWN" \
  sh -c "'$PIBVM' exec 0 -- ibv_devinfo -d pib_0 | grep -q 'state:[[:space:]]*PORT_DOWN'"
read_counters 0 c0b
d=$(( ${c0b[retry_timeouts]:-0} - ${c0[retry_timeouts]:-0} ))
check "node 0: retry_timeouts grew by at least retry_cnt + 1 = $((RETRY_CNT + 1)) (got $d)" \
  test "$d" -ge $((RETRY_CNT + 1))
d=$(( ${c0b[link_downs]:-0} - ${c0[link_downs]:-0} ))
check "node 0: link_downs grew by 1 (got $d)" test "$d" -eq 1

echo "== node 1 comes back, through a relay"
mv "$LINK_SOCK" "$DIRECT"
"$HOSTILE" relay -l "$LINK_SOCK" -c "$DIRECT" --cut-after 1500 2>"$work/relay" &
relay_pid=$!
sleep 0.3
check "node 1 boots again and both ports are ACTIVE" restore_node1
check "ibv_rc_pingpong node 1 -> node 0 works, node 0 never restarted" pingpong 0 1 -n 200

echo "== (b) a one-second drop under send-sizes"
read_counters 0 c0
read_counters 1 c1
kill -USR1 "$relay_pid"         # cut after 1500 more packets: inside the 64 KiB/1 MiB SENDs
VERBS_T=60
verbs_pair send-sizes -u "$SS_TIMEOUT"
sleep 1
read_counters 0 c0b
read_counters 1 c1b
cat "$work/relay"
check "the relay cut the link during the traffic" grep -q 'CUT both sides' "$work/relay"
restored=$(awk '{ for (i = 1; i < NF; i++) if ($i == "restored") print $(i + 1) }' "$work/relay" |
           tail -n 1)
rms=$(awk -v s="${restored:-99}" 'BEGIN { printf "%d", s * 1000 }')
check "the link was back after ${rms} ms; with the SM's ${SM_ACTIVATE_S} s that is within send-sizes' retry budget of ${ss_budget_ms} ms" \
  test $((rms + SM_ACTIVATE_S * 1000)) -lt "$ss_budget_ms"
check "node 0: port ACTIVE after the drop" wait_port 0 ACTIVE "$SM_ACTIVATE_S"
check "node 1: port ACTIVE after the drop" wait_port 1 ACTIVE "$SM_ACTIVATE_S"
check_one_link_down
d=$(( ${c0b[retransmits]:-0} - ${c0[retransmits]:-0} + ${c1b[retransmits]:-0} - ${c1[retransmits]:-0} ))
check "the RC transport retransmitted across the drop (retransmits grew by $d)" test "$d" -gt 0

echo "== the cable without the relay"
unrelay
check "both ports ACTIVE on the direct cable" restore_node1
check "ibv_rc_pingpong node 1 -> node 0 works" pingpong 0 1 -n 200
no_splats 0
finish
