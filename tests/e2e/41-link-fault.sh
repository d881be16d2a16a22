#!/bin/bash
# link-fault: RC traffic across a link that dies, and across one that drops for a moment.
#
# (a) A peer that dies.  ib_write_bw runs from node 0 (client, the requester) to node 1
#     (server); node 1's QEMU is killed (pibvm kill 1).  Only the requester can tell: its
#     RDMA WRITEs go unacknowledged, and after the retries the QP allows, (retry_cnt + 1) ACK
#     timeouts of 4.096 us * 2^timeout each, they fail with RETRY_EXC_ERR.  (A server of
#     ib_write_bw posts nothing and would just wait on its TCP socket.)  Node 0 times, in its
#     own clock, its port going DOWN (the PORT_ERR async event) and perftest printing the
#     failed completion.  Asserted:
#     perftest exits non-zero and prints "Failed status 12" (IBV_WC_RETRY_EXC_ERR); the error
#     came no sooner than retry_cnt ACK timeouts after DOWN (the timer that was running at the
#     kill may have been part spent, each retry's is whole) and no later than the retry bound,
#     (retry_cnt + 1) timeouts, plus SLACK_MS; the device's trace (pib_comp_timeout, turned on
#     over QMP) shows the QP's last retry_cnt + 1 ACK timeouts in a row, their retries left
#     counting down retry_cnt .. 0 with no ACK between, and the error completion after them;
#     retry_timeouts grew by that much at least (an ACK late under load may have cost a
#     timeout before the kill, which the ACK then made good), link_downs by 1, and
#     ibv_devinfo shows the port DOWN.  Node 1 boots again
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
# e2e-checks: 30
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

QP_TIMEOUT=14                   # perftest -u: 4.096 us * 2^14 = 67 ms per try
RETRY_CNT=7                     # perftest's, fixed
ack_us=$(( 4096 * (1 << QP_TIMEOUT) / 1000 ))
budget_ms=$(( (RETRY_CNT + 1) * ack_us / 1000 ))    # 536 ms: the retry bound
floor_ms=$(( RETRY_CNT * ack_us / 1000 ))           # 469 ms: retry_cnt whole timeouts
# The count of retries is asserted exactly, by the device's trace (below): the QP's last ACK
# timeouts, retry_cnt + 1 = 8 in a row with the retries left counting down to 0, no more and
# no fewer; that is what catches a retry missed or one too many, on any machine.  (Not by the
# retry_timeouts counter alone: it counts every expiry of the port, and a slow host may delay
# an ACK past 67 ms before the kill, a timeout that the ACK then makes good, resetting the
# retries.)  The time adds that the error came from those timers: no sooner than retry_cnt
# whole periods after DOWN, and no later than the retry bound plus SLACK_MS.  Under TCG
# without icount the guest's clock and QEMU's virtual clock both follow the host's wall clock,
# so a slow host does not stretch the 67 ms periods; it lengthens the work between them: each
# of the 8 expiries goes through QEMU's main loop (the timer callback, then the QP's bottom
# half retransmits and re-arms), and the last CQE through perftest's busy poll and the guest
# shell that stamps its line, on one vCPU shared with the event watcher.  Measured
# on a loaded 2-core host: 50 ms of it (519 ms from DOWN to the error).  SLACK_MS is 20 times
# that, a hang guard for a host stalled by other work, not the measure of the retries.
SLACK_MS=1000
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
# The device traces each ACK timeout of a QP and the error completion that ends its retries.
trace_at=$(stat -c %s "$LINK_RUN/node0.qemu.log")
# comp_trace on|off: node 0's QEMU traces them, or stops.
comp_trace() {
  qemu_trace "$LINK_RUN/node0.qmp" pib_comp_timeout "$1" &&
    qemu_trace "$LINK_RUN/node0.qmp" pib_comp_error "$1"
}
check "node 0: its QEMU traces pib_comp_timeout and pib_comp_error (QMP trace-event-set-state)" \
  comp_trace on
# The client's event watcher and perftest run in one guest shell: both times in node 0's clock.
# The port going DOWN is the PORT_ERR async event, as ibv_asyncwatch gets it: a process that
# sleeps until the driver dispatches the event and is woken at once, ahead of perftest's busy
# poll on the guest's one vCPU (a loop polling the port's state in sysfs would share that vCPU
# with it, and could see DOWN late, making the retries look shorter than they were).  The
# watcher has the device open before perftest starts.  perftest's lines are stamped as they
# come (its errors go to stderr, unbuffered), so that the time is that of the failed
# completion, not of perftest's teardown after it.
client='stamp() { while IFS= read -r l; do read t _ < /proc/uptime; echo "$1 $t $l"; done; }
  rm -f /tmp/lf-aw
  ibv_asyncwatch -d pib_0 2>&1 | tee /tmp/lf-aw | stamp EV &
  until grep -q "async event FD" /tmp/lf-aw 2>/dev/null; do sleep 0.1; done
  { ib_write_bw -d pib_0 -F -D 60 -u '$QP_TIMEOUT' node1 2>&1; echo "EXIT $?"; } | stamp AT
  killall ibv_asyncwatch; wait'
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 60 -u $QP_TIMEOUT >"$work/server" 2>&1 &
server_pid=$!
wait_listen 1 18515
"$PIBVM" exec 0 --timeout 120 -- sh -c "$client" >"$work/client" 2>&1 &
client_pid=$!
# Kill once the RDMA WRITEs flow: node 0's tx_packets has moved by 1000 (a count; the time
# limit is a hang guard).
tx0=$(on 0 cat "$HW_COUNTERS/tx_packets")
writes_flow() {
  local i tx
  for i in $(seq 1 240); do
    tx=$(on 0 cat "$HW_COUNTERS/tx_packets")
    [ "${tx:-0}" -gt $(( ${tx0:-0} + 1000 )) ] && return 0
    sleep 0.5
  done
  return 1
}
check "node 0: the RDMA WRITEs flow (tx_packets from ${tx0:-nothing}, 1000 more)" writes_flow
check "kill node 1 while ib_write_bw runs" "$PIBVM" kill 1
t0=$SECONDS
wait "$client_pid"
host_s=$((SECONDS - t0))
wait "$server_pid"
cat "$work/client"
down=$(awk '$1 == "EV" && / event_type .*[(]10[)]/ {print $2; exit}' "$work/client")
failed=$(awk '$1 == "AT" && / Failed status / {print $2; exit}' "$work/client")
rc=$(awk '$1 == "AT" && $3 == "EXIT" {print $4}' "$work/client")
status=$(sed -n 's/.* Failed status \([0-9]*\):.*/\1/p' "$work/client" | head -n 1)
ms=$(awk -v a="$down" -v b="$failed" 'BEGIN { if (a == "" || b == "") print -1; else printf "%d", (b - a) * 1000 }')
echo "node 0: port DOWN at $down s, failed completion (status ${status:-none}) at ${failed:-never} s:" \
     "${ms} ms; $floor_ms .. $budget_ms ms by the timers, overshoot $((ms - budget_ms)) ms" \
     "(slack ${SLACK_MS} ms); perftest exit $rc; ${host_s} s on the host"
check "node 0: ib_write_bw exits non-zero (got ${rc:-nothing})" test "${rc:-0}" -ne 0
check "node 0: the failed WRITE's status is 12, RETRY_EXC_ERR (got ${status:-none})" \
  test "${status:-none}" = 12
check "node 0: it failed after retry_cnt = $RETRY_CNT ACK timeouts at the least: ${ms} >= ${floor_ms} ms" \
  test "$ms" -ge "$floor_ms"
check "node 0: ... and within the retry bound: ${ms} <= ${budget_ms} + ${SLACK_MS} ms" \
  test "$ms" -ge 0 -a "$ms" -le $((budget_ms + SLACK_MS))
check "node 0: ibv_devinfo shows the port DOWN" \
  sh -c "'$PIBVM' exec 0 -- ibv_devinfo -d pib_0 | grep -q 'state:[[:space:]]*PORT_DOWN'"
read_counters 0 c0b
comp_trace off
# The device's own account of the QP's last retries: the ACK timeouts it traced (each with the
# retries it had left) and the error completion after them.
tail -c +$((trace_at + 1)) "$LINK_RUN/node0.qemu.log" | grep -E 'pib_comp_(timeout|error)' \
  >"$work/trace"
qpn=$(sed -n 's/.*pib_comp_error QP \([0-9]*\) .* status \([0-9]*\)$/\1/p' "$work/trace" | tail -n 1)
left=$(grep "pib_comp_timeout QP $qpn " "$work/trace" | tail -n $((RETRY_CNT + 1)) |
       sed 's/.*, \([0-9]*\) retries left$/\1/' | tr '\n' ' ')
echo "node 0: QP ${qpn:-?} traced its last ACK timeouts with retries left: ${left:-none}"
traced=$(grep -c pib_comp_timeout "$work/trace")
echo "        ($traced ACK timeouts traced in all$([ "$traced" -gt $((RETRY_CNT + 1)) ] &&
     echo "; those before the last $((RETRY_CNT + 1)) came before the kill, an ACK made each good"))"
want_left=$(seq "$RETRY_CNT" -1 0 | tr '\n' ' ')
check "node 0: the QP's last ACK timeouts were retry_cnt + 1 = $((RETRY_CNT + 1)) in a row, no ACK between (retries left: ${left:-none})" \
  test "$left" = "$want_left"
check "node 0: ... and the error completion came after the last of them" \
  sh -c "tail -n 1 '$work/trace' | grep -q 'pib_comp_error QP $qpn '"
d=$(( ${c0b[retry_timeouts]:-0} - ${c0[retry_timeouts]:-0} ))
check "node 0: retry_timeouts grew by retry_cnt + 1 = $((RETRY_CNT + 1)) at the least (got $d)" \
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
