#!/bin/bash
# switch-chain: two pib switches in a line.  `pibvm up --nodes N --switches 2` in a run directory
# of its own cables the first half of the guests to switch0 and the rest to switch1, which dials
# switch0's last port.  opensm (node 0) must route across both:
#   - every CA port ACTIVE, with distinct LIDs (the sweep time is printed);
#   - ibnetdiscover: 2 switches (pibvm's GUIDs) and N CAs, the switches cabled to each other;
#   - every port of both switches ACTIVE, the two ends of the inter-switch cable included
#     (smpquery portinfo on each switch, by its LID);
#   - ibtracert from node 0 to the last node: out through switch0, then switch1;
#   - ibv_rc_pingpong -c (data checked) from the last node to node 0, across both switches;
#   - mckey: node 0 sends to a group with one member on its own switch and one behind switch1;
#   - ib_write_bw, 64 KiB: through one switch here, back to back on the suite's two guests;
#   - kill the last node: its switch1 port goes DOWN in the SM's view (smpquery), opensm gets
#     trap 128, and nodes on both switches keep talking; `pibvm up --node` brings it back ACTIVE
#     and it talks again;
#   - kill switch1: its nodes go DOWN; `pibvm up --node sw1` restarts it, opensm programs it
#     again, and traffic crosses both switches once more.
# The suite's own two guests stay up meanwhile (this test boots its own).
# e2e-timeout: 1800
# e2e-checks: 56
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

NODES=${PIB_CHAIN_NODES:-6}
switched_dir vm-chain           # sets SUITE_DIR, the suite's run directory
# The switches' node GUIDs and port 0 GUIDs as pibvm gives them (tools/pibvmlib/topology.py),
# without the 0x, as ibnetdiscover prints them.
SW0=$("$PIBVM" guid switch 0) SW1=$("$PIBVM" guid switch 1)
SW0P=$("$PIBVM" guid switch 0 --port) SW1P=$("$PIBVM" guid switch 1 --port)
SW0=${SW0#0x} SW1=${SW1#0x} SW0P=${SW0P#0x} SW1P=${SW1P#0x}
LAST=$((NODES - 1))
HALF=$(( (NODES + 1) / 2 ))                 # nodes 0..HALF-1 on switch0, the rest on switch1

# --- ib_write_bw, for the figures --------------------------------------------------------------
# wbw SERVER CLIENT: ib_write_bw -s 65536 in the current run; prints the BW average (MB/s).
wbw() {
  local sn=$1 cn=$2 slog spid src crc out
  slog=$(mktemp)
  "$PIBVM" exec "$sn" --timeout 300 -- ib_write_bw -d pib_0 -F -s 65536 -n 500 >"$slog" 2>&1 &
  spid=$!
  if wait_listen "$sn" 18515; then
    out=$("$PIBVM" exec "$cn" --timeout 300 -- ib_write_bw -d pib_0 -F -s 65536 -n 500 "node$sn" 2>&1); crc=$?
  else
    out="server did not listen"; crc=99
  fi
  wait "$spid"; src=$?
  echo "--- ib_write_bw node $cn -> node $sn ($PIBVM_DIR)" >&2; cat "$slog" >&2; echo "$out" >&2
  rm -f "$slog"
  [ "$src" -eq 0 ] && [ "$crc" -eq 0 ] || return 1
  awk '$1 == 65536 && NF >= 5 {print $4; f=1} END {exit !f}' <<<"$out"
}
# --- the chain ---------------------------------------------------------------------------------
switched_up --nodes "$NODES" --switches 2 -- --ipoib datagram
"$PIBVM" status
ca_lids "$NODES"

# --- ibnetdiscover: 2 switches, N CAs, the switches cabled to each other -----------------------
out=$(on 0 ibnetdiscover)
echo "--- node 0: ibnetdiscover"; echo "$out"
check "ibnetdiscover: 2 switches" test "$(grep -c '^Switch' <<<"$out")" -eq 2
check "ibnetdiscover: $NODES CAs" test "$(grep -c '^Ca' <<<"$out")" -eq "$NODES"
check "ibnetdiscover: switch0 with $((HALF + 1)) ports" grep -q "^Switch[[:space:]]*$((HALF + 1)) \"S-$SW0\"" <<<"$out"
check "ibnetdiscover: switch1 with $((NODES - HALF + 1)) ports" \
  grep -q "^Switch[[:space:]]*$((NODES - HALF + 1)) \"S-$SW1\"" <<<"$out"
sw0block=$(sed -n "/^Switch.*S-$SW0/,/^\$/p" <<<"$out")
check "ibnetdiscover: switch0's port $((HALF + 1)) is cabled to switch1's port $((NODES - HALF + 1))" \
  grep -q "^\[$((HALF + 1))\][[:space:]]*\"S-$SW1\"\[$((NODES - HALF + 1))\]" <<<"$sw0block"

# --- every switch port ACTIVE: the CAs' ACTIVE says nothing of the switches' side of a cable,
# nor of the cable between the switches --------------------------------------------------------
sw0lid=$(sw_lid "$SW0") sw1lid=$(sw_lid "$SW1")
echo "switch0 LID ${sw0lid:-?}, switch1 LID ${sw1lid:-?}"
check "ibswitches: both switches have a LID" test "${sw0lid:-0}" -gt 0 -a "${sw1lid:-0}" -gt 0
# switch0: its nodes on ports 1..HALF, switch1 on HALF + 1; switch1: its nodes, then switch0.
for sp in "0 $sw0lid $((HALF + 1))" "1 $sw1lid $((NODES - HALF + 1))"; do
  read -r s slid np <<<"$sp"
  for ((p = 1; p <= np; p++)); do
    [ $p -eq "$np" ] && what="the other switch" || what="node $(( s == 0 ? p - 1 : HALF + p - 1 ))"
    sw_port_active "switch$s" "$slid" "$p" "$what"
  done
done

# --- ibtracert: node 0 -> the last node crosses switch0, then switch1 --------------------------
out=$(on 0 ibtracert "${lid[0]}" "${lid[$LAST]}")
echo "--- node 0: ibtracert ${lid[0]} ${lid[$LAST]}"; echo "$out"
check "ibtracert: two switch hops" test "$(grep -c -- '-> switch port' <<<"$out")" -eq 2
check "ibtracert: switch0 first, then switch1" \
  test "$(grep -o -- '-> switch port {0x[0-9a-f]*}' <<<"$out" | tr -d '\n')" = \
       "-> switch port {0x$SW0P}-> switch port {0x$SW1P}"
check "ibtracert: it ends at node $LAST's CA (LID ${lid[$LAST]})" \
  grep -Eq -- "-> ca port .* lid ${lid[$LAST]}-${lid[$LAST]} " <<<"$out"

# --- ibv_rc_pingpong across the chain ----------------------------------------------------------
xpair() {   # xpair SERVER CLIENT: ibv_rc_pingpong -c (every buffer checked) between two nodes
  local sn=$1 cn=$2 slog src crc cout spid
  slog=$(mktemp)
  "$PIBVM" exec "$sn" --timeout 200 -- ibv_rc_pingpong -d pib_0 -c -n 200 >"$slog" 2>&1 &
  spid=$!
  if wait_listen "$sn" 18515; then
    cout=$("$PIBVM" exec "$cn" --timeout 200 -- ibv_rc_pingpong -d pib_0 -c -n 200 "node$sn" 2>&1); crc=$?
  else
    cout="server did not listen"; crc=99
  fi
  wait "$spid"; src=$?
  echo "--- node $sn <- node $cn"; cat "$slog"; echo "$cout"
  check "rc_pingpong -c node $cn -> node $sn$3: both exit 0 ($src, $crc)" test "$src" -eq 0 -a "$crc" -eq 0
  check "rc_pingpong -c node $cn -> node $sn$3: 200 iters reported" grep -q '200 iters in' <<<"$cout"
  rm -f "$slog"
}
xpair 0 "$LAST" " (two switches)"

# --- mckey: one sender, a member on its switch and one behind the other ------------------------
# sa_members NODE MGID_TAIL: the group's member records.  Only a trusted query (opensm's SM_Key,
# 1 by default) lists one per member port; an untrusted one gets one record per group.
sa_members() { on "$1" saquery -m --smkey 1 2>/dev/null | grep -c "^[[:space:]]*MGID\.*ff12:4001:.*:$2\$"; }
mc_rx() { hw_counter "$1" rx_mcast_packets 2>/dev/null || echo 0; }
grp=239.1.1.7 tail=f01:107
declare -A mlog mpid mbefore
for rx in 1 "$LAST"; do
  mbefore[$rx]=$(mc_rx "$rx")
  mlog[$rx]=$(mktemp)
  "$PIBVM" exec "$rx" --timeout 200 -- timeout 180 mckey -m "$grp" -b "10.13.0.$((rx + 1))" -C 10 \
    >"${mlog[$rx]}" 2>&1 &
  mpid[$rx]=$!
done
# Both receivers' joins answered: the SA holds a member record for each, so both ports are in
# the group before the sender joins.  mckey's sender then
# waits 3 s after its own join, the time opensm has to put the group's tree in the switches.
for ((i = 0; i < 60; i++)); do [ "$(sa_members 0 "$tail")" -ge 2 ] && break; sleep 1; done
n=$(sa_members 0 "$tail")
check "mckey: the SA has $grp's group with both receivers as members ($n member records)" test "$n" -ge 2
out=$(on 0 timeout 120 mckey -m "$grp" -b 10.13.0.1 -s -C 10 2>&1); crc=$?
echo "--- mckey sender (node 0)"; echo "$out"
check "mckey sender (node 0) exits 0 (got $crc)" test "$crc" -eq 0
for rx in 1 "$LAST"; do
  wait "${mpid[$rx]}"; src=$?
  echo "--- mckey receiver (node $rx)"; cat "${mlog[$rx]}"
  after=$(mc_rx "$rx")
  check "mckey: node $rx received the 10 datagrams and exits 0 (got $src)" test "$src" -eq 0
  check "mckey: node $rx's device took at least 10 multicast packets (${mbefore[$rx]} -> $after)" \
    test "${after:-0}" -ge $(( ${mbefore[$rx]:-0} + 10 ))
  rm -f "${mlog[$rx]}"
done

# --- ib_write_bw through one switch, and back to back on the suite's two guests -----------------
# Both while every guest is up, so that both share the two host cores alike.
sw=$(wbw 0 1); rc=$?
check "ib_write_bw 64 KiB through switch0: exit 0 and a result (${sw:-none} MB/s)" test "$rc" -eq 0 -a -n "$sw"
b2b=$(PIBVM_DIR=$SUITE_DIR wbw 0 1); rc=$?
check "ib_write_bw 64 KiB back to back (suite's guests): exit 0 and a result (${b2b:-none} MB/s)" \
  test "$rc" -eq 0 -a -n "$b2b"
echo "ib_write_bw 64 KiB: back to back ${b2b:-?} MB/s, through one switch ${sw:-?} MB/s"

# --- kill the last node: trap 128, port DOWN, the rest carries on ------------------------------
port=$((LAST - HALF + 1))       # the last node's port on switch1
echo "switch1 LID ${sw1lid:-?}; node $LAST is on its port $port"
log="$PIBVM_DIR/node0.opensm.log"
log_lines=$(wc -l <"$log" 2>/dev/null || echo 0)
check "pibvm kill $LAST" "$PIBVM" kill "$LAST"
down= end=$((SECONDS + SM_ACTIVATE_S))
while [ $SECONDS -le $end ]; do
  pout=$(on 0 smpquery portinfo "$sw1lid" "$port" 2>&1)
  down=$(sed -n 's/^LinkState:\.*//p' <<<"$pout")
  [ "$down" = Down ] && break
  sleep 0.5
done
echo "--- node 0: smpquery portinfo $sw1lid $port"; echo "$pout"
check "smpquery: switch1 port $port (node $LAST) is LinkState Down in the SM's view (got ${down:-nothing})" test "$down" = Down
new=$(tail -n +$((log_lines + 1)) "$log" 2>/dev/null)
grep -i 'num:128\|trap' <<<"$new" | tail -n 5
check "opensm got trap 128 (link state change) from switch1" grep -q 'num:128' <<<"$new"
xpair 0 $((HALF)) " (while node $LAST is down)"

t0=$SECONDS
check "pibvm up --node $LAST" "$PIBVM" up --node "$LAST"
echo "node $LAST back: $((SECONDS - t0)) s to boot and ACTIVE"
check "node $LAST: port ACTIVE again" test "$(port_state "$LAST")" = ACTIVE
check "pibvm ipoib datagram $LAST" "$PIBVM" ipoib datagram "$LAST"
xpair "$LAST" 0 " (node $LAST rebooted)"

# --- kill switch1: its nodes' links go DOWN; `pibvm up --node sw1` restarts it with the same ports,
# its nodes and switch0 redial it, and opensm programs it again ---------------------------------------
check "pibvm kill sw1" "$PIBVM" kill sw1
check "node $LAST: port DOWN once switch1 is gone" wait_port "$LAST" DOWN "$SM_ACTIVATE_S"
t0=$SECONDS
check "pibvm up --node sw1 (every running node ACTIVE again)" "$PIBVM" up --node sw1
echo "switch1 back: $((SECONDS - t0)) s until every port was ACTIVE"
for ((n = 0; n < NODES; n++)); do
  check "node $n: port ACTIVE after switch1's restart" test "$(port_state $n)" = ACTIVE
done
xpair 0 "$LAST" " (switch1 restarted)"
finish
