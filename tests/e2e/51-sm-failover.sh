#!/bin/bash
# sm-failover: two subnet managers.  opensm runs on both nodes, on node 0 with priority 10 and
# on node 1 with priority 5: node 0's is MASTER and node 1's STANDBY, as sminfo says.  The
# master is killed (SIGKILL, as a crash); the standby polls it every sminfo_polling_timeout
# and after polling_retry_number unanswered polls takes over.  Then node 1's opensm is MASTER,
# both ports name it as their SM, keep their LIDs and stay ACTIVE, and an ib_write_bw that ran
# across the takeover completes.  At the end node 0 runs the fabric's one SM again.
source "$(dirname "$0")/lib.sh"

POLL_MS=1000 POLL_RETRIES=2     # given to both opensms (opensm.conf): a takeover in seconds
CONF=/tmp/opensm-failover.conf
# The standby notices after POLL_RETRIES + 1 polls, then sweeps as master.
TAKEOVER_S=$(( (POLL_RETRIES + 1) * POLL_MS / 1000 + SM_ACTIVATE_S ))
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
slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 0 --timeout 120 -- ib_write_bw -d pib_0 -F -D 40 -u 20 >"$slog" 2>&1 &
spid=$!
wait_listen 0 18515
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 40 -u 20 node0 >"$clog" 2>&1 &
cpid=$!
sleep 5     # the transfer is under way (perftest's setup takes a few seconds under TCG)

check "kill the master (node 0's opensm, SIGKILL)" "$PIBVM" sm kill 0
t0=$SECONDS
check "node 1's opensm takes over within $TAKEOVER_S s" \
  wait_sm 1 "$lid1" SMINFO_MASTER "$TAKEOVER_S"
echo "takeover seen after $((SECONDS - t0)) s"
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
rm -f "$slog" "$clog"
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
