#!/bin/bash
# link-bounce: a link that drops and comes back is brought back to ACTIVE by the subnet manager,
# with nobody's help.  Node 0 resets node 1's port (ibportstate LID 1 reset: a PortInfo Set of
# PortPhysicalState POLLING through node 1's SMA), which takes the link down and lets it
# retrain: both ports go DOWN, then INIT, and opensm (node 0) finds them on a sweep and takes
# them to ACTIVE with their LIDs, within SM_ACTIVATE_S (tests/e2e/lib.sh) of INIT.  The Set's
# own answer is lost with the link it took down, so ibportstate reports a failure; the port
# states say what happened.  A watcher in each guest logs the port's states with the guest's
# clock.  An ib_write_bw that runs across the bounce (ACK timeout 20: 4.3 s a try, 8 tries)
# completes: its QPs, connected before the link dropped, carry on once the ports are ACTIVE.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

lid0=$(port_lid 0) lid1=$(port_lid 1)
work=$(mktemp -d)
watchers=()
cleanup() {
  for n in 0 1; do on $n touch /tmp/bounce.stop 2>/dev/null; done
  [ ${#watchers[@]} -gt 0 ] && wait "${watchers[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The watcher: every state change of the port, with /proc/uptime, until /tmp/bounce.stop.
watch='f=/sys/class/infiniband/pib_0/ports/1/state; last=; rm -f /tmp/bounce.stop
  while [ ! -e /tmp/bounce.stop ]; do
    read s < $f
    if [ "$s" != "$last" ]; then read t _ < /proc/uptime; echo "$t $s"; last=$s; fi
    sleep 0.02
  done'
for n in 0 1; do
  "$PIBVM" exec $n --timeout 300 -- sh -c "$watch" >"$work/watch$n" 2>&1 &
  watchers+=($!)
done
declare -A c0 c0b c1 c1b
read_counters 0 c0
read_counters 1 c1

slog=$work/server clog=$work/client
"$PIBVM" exec 0 --timeout 120 -- ib_write_bw -d pib_0 -F -D 30 -u 20 >"$slog" 2>&1 &
spid=$!
wait_listen 0 18515
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 30 -u 20 node0 >"$clog" 2>&1 &
cpid=$!
sleep 6     # under way

echo "== node 0 resets node 1's port"
out=$(on 0 ibportstate "$lid1" 1 reset 2>&1); echo "$out" | tail -n 3
for n in 0 1; do
  check "node $n: port ACTIVE again (opensm)" wait_port $n ACTIVE "$SM_ACTIVATE_S"
done

wait "$cpid"; crc=$?
wait "$spid"; src=$?
for n in 0 1; do on $n touch /tmp/bounce.stop; done
wait "${watchers[@]}"; watchers=()
echo "--- ib_write_bw server (node 0)"; cat "$slog"
echo "--- ib_write_bw client (node 1)"; cat "$clog"
check "ib_write_bw across the bounce: server exits 0 (got $src)" test $src -eq 0
check "ib_write_bw across the bounce: client exits 0 (got $crc)" test $crc -eq 0

for n in 0 1; do
  echo "--- node $n: port states (guest uptime, state)"; cat "$work/watch$n"
  seq=$(awk '{print $3}' "$work/watch$n" | paste -sd' ')
  check "node $n: ACTIVE, DOWN, INIT, ACTIVE in that order (got: $seq)" \
    grep -Eq '^ACTIVE( [A-Z]+)* DOWN( [A-Z]+)* INIT( ARMED)? ACTIVE$' <<<"$seq"
  # From the last INIT to the last ACTIVE, in the guest's clock.
  ms=$(awk '$3 == "INIT" {i = $1} $3 == "ACTIVE" {a = $1}
            END { if (i == "" || a == "") print -1; else printf "%d", (a - i) * 1000 }' \
           "$work/watch$n")
  check "node $n: INIT to ACTIVE took $ms ms, within ${SM_ACTIVATE_S} s" \
    test "$ms" -ge 0 -a "$ms" -le $((SM_ACTIVATE_S * 1000))
done
check "node 0 kept LID $lid0" test "$(port_lid 0)" = "$lid0"
check "node 1 kept LID $lid1" test "$(port_lid 1)" = "$lid1"

read_counters 0 c0b
read_counters 1 c1b
check_one_link_down
d=$(( ${c1b[retransmits]:-0} - ${c1[retransmits]:-0} ))
check "node 1 (the writer) retransmitted across the bounce (retransmits +$d)" test "$d" -gt 0
check "ibv_rc_pingpong after the bounce" pingpong 0 1 -n 200
trap - EXIT
rm -rf "$work"
finish
