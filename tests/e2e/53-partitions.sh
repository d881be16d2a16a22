#!/bin/bash
# partitions: opensm's partitions.conf decides who may talk to whom.  Three partitions besides
# the default one: "shared" (P_Key 0x0001) with both ports, "only0" (0x0002) with node 0's and
# "only1" (0x0003) with node 1's, all full members.  opensm writes them into the ports' P_Key
# tables (node 0: 0xffff, 0x8001, 0x8002; node 1: 0xffff, 0x8001, 0x8003, in some order), and
# ib_core sees the change.  Then, with perftest's --pkey_index choosing each QP's partition:
#   - in "shared" on both sides, ib_send_bw works and no packet is dropped for its P_Key;
#   - node 1 in "only1" sending to node 0 in "only0" gets nowhere.  With opensm stopped (the
#     tables stay as it set them), the only packets on the wire are the sender QP's: node 0
#     drops each one at its P_Key check (silently, as IBTA has it: no NAK), and counts each in
#     its rx_drop_pkey hw_counter and in PortInfo:P_KeyViolations alike: both grow by exactly
#     node 1's tx_packets, and by at least retry_cnt + 1 = 8 (the first try and its 7
#     retries); node 0's rx_packets by at least as much (its own traps to itself, the SM's
#     LID, arrive too: a few more).  With no ACK coming, the sender's QP times out retry_cnt
#     + 1 times and its SEND fails with RETRY_EXC_ERR: perftest prints "Failed status 12".
# At the end opensm runs again without the file and the tables lose the three partitions.
# e2e-checks: 25
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

PGUID0=$("$PIBVM" guid node 0 --port)   # the port GUIDs pibvm gave the devices
PGUID1=$("$PIBVM" guid node 1 --port)
CONF=/tmp/partitions.conf
cleanup() {
  "$PIBVM" sm stop 0 >/dev/null 2>&1
  "$PIBVM" sm start 0 >/dev/null 2>&1
}
trap cleanup EXIT

# wait_pkey NODE PKEY SECONDS [absent]: until PKEY is in (or, with "absent", gone from) the table.
wait_pkey() {
  local end=$((SECONDS + $3)) i
  while [ $SECONDS -le $end ]; do
    i=$(pkey_index "$1" "$2")
    if [ "${4:-}" = absent ]; then [ -z "$i" ] && return 0; else [ -n "$i" ] && return 0; fi
    sleep 0.5
  done
  return 1
}
# pkey_violations NODE: PortInfo:P_KeyViolations of NODE's port, through its own SMA.
pkey_violations() { on "$1" smpquery -D portinfo 0 | sed -n 's/^PkeyViolations:\.*//p'; }

# (pibvm exec passes no standard input: the file is written by printf in the guest.)
on 0 sh -c "printf '%s\n' 'Default=0x7fff, ipoib : ALL=full ;' \
  'shared=0x0001 : $PGUID0=full, $PGUID1=full ;' 'only0=0x0002 : $PGUID0=full ;' \
  'only1=0x0003 : $PGUID1=full ;' > $CONF"
echo "--- $CONF"; on 0 cat "$CONF"
check "node 0: opensm stops" "$PIBVM" sm stop 0
check "node 0: opensm with $CONF" "$PIBVM" sm start 0 -- -P "$CONF"
for p in 0x8001 0x8002; do check "node 0: P_Key $p in the table" wait_pkey 0 $p "$SM_ACTIVATE_S"; done
for p in 0x8001 0x8003; do check "node 1: P_Key $p in the table" wait_pkey 1 $p "$SM_ACTIVATE_S"; done
check "node 0: not P_Key 0x8003" test -z "$(pkey_index 0 0x8003)"
check "node 1: not P_Key 0x8002" test -z "$(pkey_index 1 0x8002)"
for n in 0 1; do
  echo "--- node $n: P_Key table"
  on $n sh -c 'cd /sys/class/infiniband/pib_0/ports/1/pkeys && grep -v "^0x0000$" * | sort -n'
  check "node $n: port still ACTIVE" test "$(port_state $n)" = ACTIVE
done

shared0=$(pkey_index 0 0x8001) shared1=$(pkey_index 1 0x8001)
only0=$(pkey_index 0 0x8002) only1=$(pkey_index 1 0x8003)
echo "indexes: shared $shared0 (node 0) $shared1 (node 1), only0 $only0, only1 $only1"

echo "== the same partition: it works"
declare -A c0 c0b
read_counters 0 c0
pair "ib_send_bw in partition 0x8001" 18515 \
  ib_send_bw -d pib_0 -F -n 1000 --pkey_index="$shared0" -- \
  ib_send_bw -d pib_0 -F -n 1000 --pkey_index="$shared1" node0
read_counters 0 c0b
d=$(( ${c0b[rx_drop_pkey]:-0} - ${c0[rx_drop_pkey]:-0} ))
check "node 0: no packet dropped for its P_Key (rx_drop_pkey +$d)" test "$d" -eq 0

echo "== different partitions: nothing gets through"
# The SM goes first: its sweeps are the only other packets between the ports, so that what
# node 1 sends is the sender QP's alone.  The P_Key tables stay as opensm left them.
check "node 0: opensm stops (the P_Key tables stay)" "$PIBVM" sm stop 0
declare -A c1 c1b
v_before=$(pkey_violations 0)
read_counters 0 c0
read_counters 1 c1
refused_send_bw --pkey_index="$only1" --pkey_index="$only0"
echo "--- client (node 1, P_Key 0x8003)"; cat "$clog"
read_counters 0 c0b
read_counters 1 c1b
v_after=$(pkey_violations 0)
status=$(sed -n 's/.* Failed status \([0-9]*\):.*/\1/p' "$clog" | head -n 1)
check "node 1: ib_send_bw fails (exit $crc)" test "$crc" -ne 0 -a "$crc" -ne 124
check "node 1: its SEND completes with status 12, RETRY_EXC_ERR (got ${status:-none})" \
  test "${status:-none}" = 12
d=$(( ${c0b[rx_drop_pkey]:-0} - ${c0[rx_drop_pkey]:-0} ))
dv=$(( v_after - v_before ))
tx=$(( ${c1b[tx_packets]:-0} - ${c1[tx_packets]:-0} ))
rx=$(( ${c0b[rx_packets]:-0} - ${c0[rx_packets]:-0} ))
rt=$(( ${c1b[retry_timeouts]:-0} - ${c1[retry_timeouts]:-0} ))
echo "node 1: tx_packets +$tx, retry_timeouts +$rt; node 0: rx_packets +$rx, rx_drop_pkey +$d," \
     "P_KeyViolations $v_before -> $v_after (+$dv)"
check "node 1: its QP timed out exactly retry_cnt + 1 = 8 times (retry_timeouts +$rt)" \
  test "$rt" -eq 8
check "node 0: rx_drop_pkey counted the first packet and its 7 retries at least (+$d)" \
  test "$d" -ge 8
check "node 0: every packet node 1 sent arrived (rx_packets +$rx >= tx_packets +$tx)" \
  test "$rx" -ge "$tx"
check "node 0: ... and every one was dropped for its P_Key (rx_drop_pkey +$d = +$tx)" \
  test "$d" -eq "$tx"
check "node 0: PortInfo:P_KeyViolations grew by as much (+$dv)" test "$dv" -eq "$d"
rm -f "$clog"

echo "== opensm without the partitions again"
check "node 0: opensm with the default partition only" "$PIBVM" sm start 0
check "node 0: P_Key 0x8002 gone" wait_pkey 0 0x8002 "$SM_ACTIVATE_S" absent
check "node 1: P_Key 0x8003 gone" wait_pkey 1 0x8003 "$SM_ACTIVATE_S" absent
check "ibv_rc_pingpong in the default partition" pingpong 0 1 -n 100
trap - EXIT
finish
