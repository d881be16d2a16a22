#!/bin/bash
# sm-failover: two subnet managers.  opensm runs on both nodes, on node 0 with priority 10 and
# on node 1 with priority 5: node 0's is MASTER and node 1's STANDBY, as sminfo says.  While
# ib_write_bw runs from node 1 to node 0, the master is killed (SIGKILL, as a crash).
# Asserted: node 1's tx_bytes grew between a sample just before the kill and one just after
# it (data was moving at the kill); node 1's opensm becomes MASTER, in node 1's own clock, no
# sooner than TAKEOVER_MIN_MS and no later than TAKEOVER_MAX_MS after the kill (the polling
# bound, below); at that moment ib_write_bw still runs and tx_bytes has grown again; both
# ports then name node 1 as their SM, keep their LIDs and stay ACTIVE; ib_write_bw completes
# (both sides exit 0) and ibv_rc_pingpong works.  At the end node 0 runs the fabric's one SM
# again.
# e2e-checks: 31
source "$(dirname "$0")/lib.sh"

POLL_MS=1000 POLL_RETRIES=2     # given to both opensms (opensm.conf): a takeover in seconds
CONF=/tmp/opensm-failover.conf
# The polling bound.  opensm's standby (osm_sm_state_mgr_polling_callback, 3.3.23) wakes every
# sminfo_polling_timeout (T); each wake sends the master an SMInfo Get and counts it, the
# master's answer sets the count back to 0, and a wake that finds the count above
# polling_retry_number (R) starts the takeover: the state goes to DISCOVERING and a heavy sweep
# begins, which turns it MASTER once it has found no SM of higher priority.  So the takeover
# begins R + 2 wakes after the master's last answer: (R + 1) * T to (R + 2) * T after the kill,
# less the round trip of a poll sent just before it (milliseconds; T / 2 is far more).  On top
# of the upper end, TAKEOVER_SLACK_MS: the discovery part of that sweep (a NodeInfo, PortInfo
# and SMInfo Get or so per port; opensm's transaction timeout is 1 s, pib-sm's -t 1000, and
# none of them times out, node 0's port no longer saying IsSM) and the watcher's poll period
# (an sminfo every 100 ms), under TCG.  (The SMP transaction timeout and retries, -t and
# SM_RETRIES, do not enter the bound: the poller does not wait for a poll's answer.)
TAKEOVER_MIN_MS=$(( (POLL_RETRIES + 1) * POLL_MS - POLL_MS / 2 ))
TAKEOVER_SLACK_MS=2000
TAKEOVER_MAX_MS=$(( (POLL_RETRIES + 2) * POLL_MS + TAKEOVER_SLACK_MS ))
cleanup() {
  "$PIBVM" sm stop 1 >/dev/null 2>&1
  "$PIBVM" sm stop 0 >/dev/null 2>&1
  "$PIBVM" sm start 0 >/dev/null 2>&1
}
trap cleanup EXIT

lid0=$(port_lid 0) lid1=$(port_lid 1)
for n in 0 1; do
  on $n sh -c "printf 'sminfo_polling_timeout $POLL_MS\npolling_retry_number $POLL_RETRIES\n' > $CONF"
done
check "node 0: the default SM stops" "$PIBVM" sm stop 0
check "node 0: opensm, priority 10" "$PIBVM" sm start 0 -- -p 10 -F "$CONF"
check "node 1: opensm, priority 5" "$PIBVM" sm start 1 -- -p 5 -F "$CONF"

# sm_state NODE LID: what sminfo on NODE says of the SM at LID ("SMINFO_MASTER", ...).
sm_state() { on "$1" sminfo "$2" 2>/dev/null | grep -o 'SMINFO_[A-Z]*'; }
# wait_sm NODE LID STATE SECONDS
wait_sm() {
  local end=$((SECONDS + $4))
  while [ $SECONDS -le $end ]; do
    [ "$(sm_state "$1" "$2")" = "$3" ] && return 0
    sleep 0.5
  done
  return 1
}
# wait_sm_lid NODE LID SECONDS: NODE's port names LID as its master SM.
wait_sm_lid() {
  local end=$((SECONDS + $3)) l
  while [ $SECONDS -le $end ]; do
    l=$(on "$1" cat /sys/class/infiniband/pib_0/ports/1/sm_lid 2>/dev/null)
    [ -n "$l" ] && [ "$((l))" = "$2" ] && return 0
    sleep 0.5
  done
  return 1
}
check "node 0's opensm is MASTER" wait_sm 1 "$lid0" SMINFO_MASTER "$SM_ACTIVATE_S"
check "node 1's opensm is STANDBY" wait_sm 0 "$lid1" SMINFO_STANDBY "$SM_ACTIVATE_S"
for n in 0 1; do
  out=$(on $n sminfo); echo "node $n: sminfo: $out"
  check "node $n: sminfo: master at LID $lid0, priority 10" \
    grep -q "sm lid $lid0 .*priority 10 .*SMINFO_MASTER" <<<"$out"
done
out=$(on 0 sminfo "$lid1"); echo "node 0: sminfo $lid1: $out"
check "sminfo $lid1: priority 5, STANDBY" grep -q "priority 5 .*SMINFO_STANDBY" <<<"$out"

echo "== traffic across the takeover: ib_write_bw for 40 s, node 1 -> node 0"
# ACK timeout 20 (4.3 s a try): a pause of the fabric while the new master sweeps costs
# retransmissions, not the connection.
slog=$(mktemp) clog=$(mktemp) wlog=$(mktemp)
"$PIBVM" exec 0 --timeout 120 -- ib_write_bw -d pib_0 -F -D 40 -u 20 >"$slog" 2>&1 &
spid=$!
wait_listen 0 18515
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 40 -u 20 node0 >"$clog" 2>&1 &
cpid=$!
# The transfer is under way once node 1's tx_bytes moves by a MiB (perftest's setup takes a few
# seconds under TCG); 150 tries of a guest exec are far more than that.
tx_start=$(hw_counter 1 tx_bytes)
for ((i = 0; i < 150; i++)); do
  [ "$(hw_counter 1 tx_bytes)" -gt $((tx_start + (1 << 20))) ] && break
  sleep 0.2
done
# node 1 watches its own opensm: the uptime at which sminfo first says MASTER.
"$PIBVM" exec 1 --timeout 120 -- sh -c "while ! sminfo $lid1 2>/dev/null | grep -q SMINFO_MASTER; do
                                          sleep 0.1; done; cut -d' ' -f1 /proc/uptime" >"$wlog" 2>&1 &
wpid=$!
check "node 1's opensm is still STANDBY before the kill" test "$(sm_state 0 "$lid1")" = SMINFO_STANDBY
tx0=$(hw_counter 1 tx_bytes)
t_before=$(on 1 cut -d' ' -f1 /proc/uptime)
check "kill the master (node 0's opensm, SIGKILL)" "$PIBVM" sm kill 0
t_after=$(on 1 cut -d' ' -f1 /proc/uptime)
tx1=$(hw_counter 1 tx_bytes)
echo "node 1: tx_bytes $tx0 just before the kill, $tx1 just after (+$((tx1 - tx0)))"
check "ib_write_bw was moving data at the kill (node 1's tx_bytes grew across it)" test "$tx1" -gt "$tx0"
wait "$wpid"
t_master=$(grep -E '^[0-9]+\.[0-9]+$' "$wlog" | tail -n 1)
tx2=$(hw_counter 1 tx_bytes)
running=no; kill -0 "$cpid" 2>/dev/null && running=yes
d_before=$(awk -v a="$t_before" -v b="$t_master" 'BEGIN { if (b == "") print -1; else printf "%d", (b - a) * 1000 }')
d_after=$(awk -v a="$t_after" -v b="$t_master" 'BEGIN { if (b == "") print 999999; else printf "%d", (b - a) * 1000 }')
echo "node 1 (its clock): kill between $t_before and $t_after s, its opensm MASTER at ${t_master:-never} s:" \
     "$d_after .. $d_before ms after the kill; bound $TAKEOVER_MIN_MS .. $TAKEOVER_MAX_MS ms" \
     "(polling $(( (POLL_RETRIES + 1) * POLL_MS )) .. $(( (POLL_RETRIES + 2) * POLL_MS )) ms + ${TAKEOVER_SLACK_MS} ms slack)"
check "node 1's opensm took over no sooner than $TAKEOVER_MIN_MS ms after the kill (${d_before} ms)" \
  test "$d_before" -ge "$TAKEOVER_MIN_MS"
check "... and no later than $TAKEOVER_MAX_MS ms (${d_after} ms)" test "$d_after" -le "$TAKEOVER_MAX_MS"
echo "node 1: tx_bytes $tx2 once MASTER (+$((tx2 - tx1)) since the kill); ib_write_bw running: $running"
check "ib_write_bw still ran at the takeover" test "$running" = yes
check "... and kept moving data (node 1's tx_bytes grew since the kill)" test "$tx2" -gt "$tx1"
for n in 0 1; do
  check "node $n: its port names node 1 ($lid1) as its SM" wait_sm_lid $n "$lid1" "$SM_ACTIVATE_S"
  check "node $n: port still ACTIVE" test "$(port_state $n)" = ACTIVE
done
check "node 0 kept LID $lid0" test "$(port_lid 0)" = "$lid0"
check "node 1 kept LID $lid1" test "$(port_lid 1)" = "$lid1"
out=$(on 0 sminfo); echo "node 0: sminfo: $out"
check "node 0: sminfo: master at LID $lid1, priority 5" \
  grep -q "sm lid $lid1 .*priority 5 .*SMINFO_MASTER" <<<"$out"

wait "$cpid"; crc=$?
wait "$spid"; src=$?
echo "--- ib_write_bw server (node 0)"; cat "$slog"
echo "--- ib_write_bw client (node 1)"; cat "$clog"
check "ib_write_bw across the takeover: server exits 0 (got $src)" test $src -eq 0
check "ib_write_bw across the takeover: client exits 0 (got $crc)" test $crc -eq 0
rm -f "$slog" "$clog" "$wlog"
pair ibv_rc_pingpong 18515 ibv_rc_pingpong -d pib_0 -c -n 200 -- \
  ibv_rc_pingpong -d pib_0 -c -n 200 node0

echo "== back to one SM, on node 0"
check "node 1: its opensm stops" "$PIBVM" sm stop 1
check "node 0: opensm again" "$PIBVM" sm start 0
check "node 0's opensm is MASTER again" wait_sm 1 "$lid0" SMINFO_MASTER "$SM_ACTIVATE_S"
for n in 0 1; do
  check "node $n: port ACTIVE" wait_port $n ACTIVE "$SM_ACTIVATE_S"
done
trap - EXIT
finish
