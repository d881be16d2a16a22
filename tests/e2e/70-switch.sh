#!/bin/bash
# switch: a switched fabric of its own.  `pibvm up --nodes 3` in a separate run directory starts
# one pib switch (-machine none -device pib-switch) and cables all three guests to it; opensm
# (node 0) must discover it, program its forwarding table and bring every port ACTIVE:
#   - the three CA ports ACTIVE, with distinct LIDs;
#   - ibnetdiscover sees 1 switch and 3 CAs, the switch with 3 ports, each cabled to a CA;
#   - every switch port ACTIVE too (smpquery portinfo on the switch, by its LID);
#   - ibroute shows the LFT opensm set: each CA's LID routed to its own switch port;
#   - opensm turned partition enforcement on at the switch port of node 0, with node 0's P_Keys;
#   - ibv_rc_pingpong -c crosses the switch between every pair of nodes;
#   - perfquery on the switch's ports (its PMA) counts what crossed;
#   - the enforcement drops: with node 1 alone in a partition (opensm -P), node 1's RC SENDs in
#     it to node 0 die at switch port 1 on their way out (its PortXmitConstraintErrors and the
#     switch's drop-partition grow, node 0 never sees them) and node 1's QP gives up;
#   - QoS: opensm -Q programs the SLtoVL tables of the CAs and of the switch's port pairs and the
#     VL arbitration tables (smpquery sl2vl/vlarb show them); SL1 crosses on VL1, and an SL the
#     switch maps to VL15 dies there, in drop-vl-mapping and the input port's PortRcvErrors;
#   - congestion control: opensm's CC manager (congestion_control TRUE) programs the switch's and
#     the CAs' CC agents without an error; ibccquery reads back what it wrote.
# The suite's own two guests stay up meanwhile (this test boots its own three).
# e2e-timeout: 1500
# e2e-checks: 55
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

NODES=${PIB_SWITCH_NODES:-3}
switched_dir vm-switch
SW_GUID=$("$PIBVM" guid switch 0)   # the switch's node GUID (tools/pibvmlib/topology.py)

switched_up --nodes "$NODES"
ca_lids "$NODES"

# --- ibnetdiscover: 1 switch, N CAs -----------------------------------------------------------
out=$(on 0 ibnetdiscover)
echo "--- node 0: ibnetdiscover"; echo "$out"
check "ibnetdiscover: 1 switch" test "$(grep -c '^Switch' <<<"$out")" -eq 1
check "ibnetdiscover: $NODES CAs" test "$(grep -c '^Ca' <<<"$out")" -eq "$NODES"
check "ibnetdiscover: the switch has $NODES ports and pibvm's GUID" \
  grep -q "^Switch[[:space:]]*$NODES \"S-${SW_GUID#0x}\"" <<<"$out"
swblock=$(sed -n '/^Switch/,/^$/p' <<<"$out")
check "ibnetdiscover: each switch port is cabled to a CA" \
  test "$(grep -c '^\[[0-9]*\].*"H-' <<<"$swblock")" -eq "$NODES"

# --- ibroute: the LFT opensm set ----------------------------------------------------------------
swlid=$(sw_lid "${SW_GUID#0x}")
echo "switch LID: $swlid"
check "ibswitches: the switch has a LID" test "${swlid:-0}" -gt 0
for ((p = 1; p <= NODES; p++)); do
  sw_port_active switch "$swlid" "$p" "node $((p - 1))'s cable"
done
out=$(on 0 ibroute "$swlid")
echo "--- node 0: ibroute $swlid"; echo "$out"
for ((n = 0; n < NODES; n++)); do
  # node N is on switch port N + 1 (pibvm); ibroute prints "0xLID PORT : (Channel Adapter ...)"
  check "ibroute: LID ${lid[$n]} (node $n) leaves by port $((n + 1))" \
    grep -Eq "^$(printf '0x%04x' "${lid[$n]}") 0*$((n + 1)) :" <<<"$out"
done

# --- partition enforcement: opensm copies node 0's P_Keys onto its switch port and enforces them
out=$(on 0 smpquery portinfo "$swlid" 1)
echo "--- node 0: smpquery portinfo $swlid 1"; echo "$out" | grep -Ei 'PartEnf|FilterRaw'
check "smpquery: switch port 1 (node 0's cable) enforces partitions both ways" \
  bash -c 'grep -Eq "^PartEnf[A-Za-z]*Inb:\.*1\$" <<<"$1" && grep -Eq "^PartEnf[A-Za-z]*Outb:\.*1\$" <<<"$1"' _ "$out"
out=$(on 0 smpquery pkeys "$swlid" 1)
echo "--- node 0: smpquery pkeys $swlid 1"; echo "$out"
check "smpquery: switch port 1's P_KeyTable holds the default partition (0xffff)" \
  grep -qi "0xffff" <<<"$out"

# --- ibv_rc_pingpong across the switch, every pair ----------------------------------------------
xpair() {   # xpair SERVER CLIENT: ibv_rc_pingpong -c between two nodes through the switch
  local sn=$1 cn=$2 slog src crc cout
  slog=$(mktemp)
  "$PIBVM" exec "$sn" -- ibv_rc_pingpong -d pib_0 -c -n 200 >"$slog" 2>&1 &
  local spid=$!
  if wait_listen "$sn" 18515; then
    cout=$("$PIBVM" exec "$cn" -- ibv_rc_pingpong -d pib_0 -c -n 200 "node$sn" 2>&1); crc=$?
  else
    cout="server did not listen"; crc=99
  fi
  wait "$spid"; src=$?
  echo "--- node $sn <- node $cn"; cat "$slog"; echo "$cout"
  check "rc_pingpong node $cn -> node $sn: both exit 0 ($src, $crc)" test "$src" -eq 0 -a "$crc" -eq 0
  check "rc_pingpong node $cn -> node $sn: throughput reported" grep -q 'bytes in .* seconds' <<<"$cout"
  rm -f "$slog"
}
before=$(sw_counter "$swlid" 1 PortXmitPkts -x 2>/dev/null)
for ((s = 0; s < NODES; s++)); do
  for ((c = 0; c < NODES; c++)); do
    [ $s -lt $c ] && xpair $s $c
  done
done

# --- the switch's PMA ------------------------------------------------------------------------
out=$(on 0 perfquery -x "$swlid" 1)
echo "--- node 0: perfquery -x $swlid 1 (switch port 1, node 0's cable)"; echo "$out"
after=$(sed -n 's/^PortXmitPkts:\.*//p' <<<"$out")
check "perfquery: switch port 1 sent at least the 2 x 200 pingpong messages to node 0 (${before:-?} -> ${after:-?})" \
  test "${after:-0}" -ge $(( ${before:-0} + 400 ))

# --- partition enforcement drops what a port's table does not hold -----------------------------
# opensm again, with a partition "only1" (P_Key 0x0003) of node 1's port alone.  It puts 0x8003
# into node 1's P_Key table and, enforcing, onto switch port 2 (node 1's cable); switch port 1
# (node 0's) keeps 0xffff only.  ib_send_bw from node 1 with --pkey_index on 0x8003 to node 0
# (0xffff): every SEND passes switch port 2's inbound check and is refused at port 1 on its
# way out (pib-switch.c, sw_partition_ok), so node 0's CA never sees it (its own P_Key check,
# rx_drop_pkey, stays where it was) and node 1's QP runs out of retries.
PGUID1=$("$PIBVM" guid node 1 --port)   # node 1's port GUID
CONF=/tmp/partitions.conf
# until_ok SECONDS CMD...: CMD, again every 0.5 s until it succeeds, for at most SECONDS.
until_ok() {
  local end=$((SECONDS + $1)); shift
  while ! "$@"; do [ $SECONDS -le $end ] || return 1; sleep 0.5; done
}
sw_pkeys() { on 0 smpquery pkeys "$swlid" "$1" 2>/dev/null; }
has_pkey() { [ -n "$(pkey_index "$1" "$2")" ]; }        # has_pkey NODE PKEY
sw_has_pkey() { sw_pkeys "$1" | grep -qi "$2"; }        # sw_has_pkey PORT PKEY
# sw_drop NAME: one of the switch's drop counters (drop-partition ...), by QMP qom-get on its device.
sw_drop() { qom "$PIBVM_DIR/switch0.qmp" /machine/peripheral/sw0 "$1"; }

on 0 sh -c "printf '%s\n' 'Default=0x7fff : ALL=full ;' 'only1=0x0003 : $PGUID1=full ;' > $CONF"
check "node 0: opensm stops" "$PIBVM" sm stop 0
check "node 0: opensm with $CONF (node 1 alone in 0x8003)" "$PIBVM" sm start 0 -- -P "$CONF"
check "node 1: P_Key 0x8003 in its table" until_ok "$SM_ACTIVATE_S" has_pkey 1 0x8003
check "smpquery: switch port 2 (node 1's cable) holds 0x8003" until_ok "$SM_ACTIVATE_S" sw_has_pkey 2 0x8003
out=$(sw_pkeys 1)
echo "--- node 0: smpquery pkeys $swlid 1"; echo "$out"
check "smpquery: switch port 1 (node 0's cable) does not hold 0x8003" \
  bash -c '[ -n "$1" ] && ! grep -qi 0x8003 <<<"$1"' _ "$out"
only1=$(pkey_index 1 0x8003)

xc0=$(sw_counter "$swlid" 1 PortXmitConstraintErrors)
rc0=$(sw_counter "$swlid" 2 PortRcvConstraintErrors)
dp0=$(sw_drop drop-partition) pk0=$(hw_counter 0 rx_drop_pkey)
refused_send_bw --pkey_index="$only1"
echo "--- ib_send_bw client (node 1, P_Key 0x8003 at index $only1)"; cat "$clog"
xc1=$(sw_counter "$swlid" 1 PortXmitConstraintErrors)
rc1=$(sw_counter "$swlid" 2 PortRcvConstraintErrors)
dp1=$(sw_drop drop-partition) pk1=$(hw_counter 0 rx_drop_pkey)
echo "switch port 1 PortXmitConstraintErrors $xc0 -> $xc1, port 2 PortRcvConstraintErrors" \
     "$rc0 -> $rc1, switch drop-partition $dp0 -> $dp1, node 0 rx_drop_pkey $pk0 -> $pk1"
check "node 1: ib_send_bw in 0x8003 fails (exit $crc) with a transport retry error" \
  bash -c '[ "$1" -ne 0 ] && [ "$1" -ne 124 ] && grep -q "Completion with error\|status 12\|RETRY_EXC" "$2"' \
  _ "$crc" "$clog"
# An RC SEND and its 7 retries at least.  (The PMA counter has 8 bits; nothing before this
# test was refused, so it starts at 0.)
check "perfquery: switch port 1's PortXmitConstraintErrors grew by 8 at least (${xc0:-?} -> ${xc1:-?})" \
  test "${xc1:-0}" -ge $(( ${xc0:-255} + 8 ))
check "the switch's drop-partition grew by 8 at least (${dp0:-?} -> ${dp1:-?})" \
  test "${dp1:-0}" -ge $(( ${dp0:-10**9} + 8 ))
check "switch port 2 let them in: its PortRcvConstraintErrors stayed (${rc0:-?} -> ${rc1:-?})" \
  test -n "$rc0" -a "$rc1" = "$rc0"
check "node 0's CA never saw them: its rx_drop_pkey stayed (${pk0:-?} -> ${pk1:-?})" \
  test -n "$pk0" -a "$pk1" = "$pk0"
rm -f "$clog"

# --- QoS: opensm programs the SLtoVL and VL arbitration tables ----------------------------------
# opensm again, with QoS on (IBTA 7.6, opensm's qos_* options): SLs 0-3 on VLs 0-3 everywhere;
# the CAs send SL4 on VL0, and the switch's external ports map SL4 to VL15, which no data may
# use.  So SL1 crosses the fabric on VL1, and an SL4 SEND from node 1 leaves its CA and dies at
# the switch (pib-switch.c, sw_map_vl), counted in drop-vl-mapping and in switch port 2's
# PortRcvErrors (IBTA counts PortVLMappingErrors there), while node 1's own tx_drop_vl stays.
QCONF=/tmp/opensm-qos.conf
on 0 sh -c "printf '%s\n' 'qos TRUE' 'qos_max_vls 4' 'qos_high_limit 0' 'qos_vlarb_high 0:0' \
  'qos_vlarb_low 0:64,1:16,2:32,3:8' 'qos_sl2vl 0,1,2,3,0,0,0,0,0,0,0,0,0,0,0,0' \
  'qos_swe_sl2vl 0,1,2,3,15,0,0,0,0,0,0,0,0,0,0,0' > $QCONF"
check "node 0: opensm stops" "$PIBVM" sm stop 0
check "node 0: opensm with QoS ($QCONF)" "$PIBVM" sm start 0 -- -Q -F "$QCONF"
ca_sl2vl() { on 0 smpquery sl2vl "${lid[1]}" 2>/dev/null | grep -q '| 0| 1| 2| 3| 0|'; }
sw_sl2vl() { on 0 smpquery sl2vl "$swlid" 2 2>/dev/null | grep -q '| 0| 1| 2| 3|15|'; }
check "smpquery sl2vl: node 1's CA maps SL0-4 to VL 0,1,2,3,0" until_ok 60 ca_sl2vl
check "smpquery sl2vl: the switch maps SL4 to VL15 towards port 2" until_ok 60 sw_sl2vl
out=$(on 0 smpquery sl2vl "$swlid" 2)
echo "--- node 0: smpquery sl2vl $swlid 2"; echo "$out"
out=$(on 0 smpquery vlarb "${lid[1]}")
echo "--- node 0: smpquery vlarb ${lid[1]}"; echo "$out"
check "smpquery vlarb: node 1's low-priority table has opensm's weights 64,16,32,8 on VLs 0-3" \
  bash -c 'grep -Eiq "WEIGHT *: *\|0x40 *\|0x10 *\|0x20 *\|0x8 " <<<"$1"' _ "$out"
pair "ib_send_bw on SL1 (VL1) across the switch" 18515 ib_send_bw -d pib_0 -F -n 200 --sl=1 -- \
  ib_send_bw -d pib_0 -F -n 200 --sl=1 node0
vl0=$(sw_drop drop-vl-mapping) re0=$(sw_counter "$swlid" 2 PortRcvErrors)
tx0=$(hw_counter 1 tx_drop_vl)
refused_send_bw --sl=4
echo "--- ib_send_bw client (node 1, SL4)"; cat "$clog"
vl1=$(sw_drop drop-vl-mapping) re1=$(sw_counter "$swlid" 2 PortRcvErrors)
tx1=$(hw_counter 1 tx_drop_vl)
echo "switch drop-vl-mapping $vl0 -> $vl1, port 2 PortRcvErrors $re0 -> $re1, node 1 tx_drop_vl $tx0 -> $tx1"
check "node 1: ib_send_bw on SL4 fails (exit $crc) with a transport retry error" \
  bash -c '[ "$1" -ne 0 ] && [ "$1" -ne 124 ] && grep -q "Completion with error\|status 12\|RETRY_EXC" "$2"' \
  _ "$crc" "$clog"
check "the switch's drop-vl-mapping grew by 8 at least (${vl0:-?} -> ${vl1:-?})" \
  test "${vl1:-0}" -ge $(( ${vl0:-10**9} + 8 ))
check "perfquery: switch port 2's PortRcvErrors grew by 8 at least (${re0:-?} -> ${re1:-?})" \
  test "${re1:-0}" -ge $(( ${re0:-255} + 8 ))
check "node 1's CA sent them (SL4 is VL0 there): its tx_drop_vl stayed (${tx0:-?} -> ${tx1:-?})" \
  test -n "$tx0" -a "$tx1" = "$tx0"
rm -f "$clog"

# --- Congestion control: opensm's CC manager programs every node's CC agent -----------------------
# opensm with congestion_control TRUE sends SwitchCongestionSetting to the switch and
# CACongestionSetting and the CongestionControlTable to every CA (IBTA Annex A10; its
# osm_congestion_control.c); each must be taken (no ERR C1xx in its log), and ibccquery reads
# back what it wrote.  (What the settings drive on the data path is not built yet.)
CCONF=/tmp/opensm-cc.conf
on 0 sh -c "printf '%s\n' 'congestion_control TRUE' 'cc_sw_cong_setting_control_map 0x15' \
  'cc_sw_cong_setting_victim_mask 0x0e' 'cc_sw_cong_setting_threshold 0x8' \
  'cc_sw_cong_setting_packet_size 8' 'cc_sw_cong_setting_marking_rate 3' \
  'cc_ca_cong_setting_port_control 0x1' 'cc_ca_cong_setting_control_map 0x3' \
  'cc_ca_cong_setting_ccti_timer 0 150' 'cc_ca_cong_setting_ccti_increase 0 2' \
  'cc_ca_cong_setting_trigger_threshold 0 20' 'cc_ca_cong_setting_ccti_min 0 1' \
  'cc_ca_cong_setting_ccti_timer 1 300' 'cc_ca_cong_setting_ccti_increase 1 4' \
  'cc_cct 0:0,0:100,1:200,2:300,3:400' > $CCONF"
cc_log_lines=$(wc -l < "$PIBVM_DIR/node0.opensm.log" 2>/dev/null || echo 0)
check "node 0: opensm stops" "$PIBVM" sm stop 0
check "node 0: opensm with congestion control ($CCONF)" "$PIBVM" sm start 0 -- -F "$CCONF"
sw_cc_set() { on 0 ibccquery SwitchCongestionSetting "$swlid" 2>/dev/null | grep -Eq '^Marking_Rate:\.*3$'; }
check "ibccquery: the switch took opensm's SwitchCongestionSetting" until_ok 60 sw_cc_set
out=$(on 0 ibccquery SwitchCongestionSetting "$swlid")
echo "--- node 0: ibccquery SwitchCongestionSetting $swlid"; echo "$out"
check "ibccquery SwitchCongestionSetting: Threshold 0x8, Packet_Size 8, ControlMap 0x15" \
  bash -c 'grep -Eq "^Threshold:\.*0x0*8$" <<<"$1" && grep -Eq "^Packet_Size:\.*8$" <<<"$1" &&
           grep -Eq "^Control_Map:\.*0x0*15$" <<<"$1"' _ "$out"
ca_cc_set() { on 0 ibccquery CongestionControlTable "${lid[1]}" 2>/dev/null | grep -Eq '^CCTI_Limit:\.*4$'; }
check "ibccquery: node 1's CA took opensm's CongestionControlTable" until_ok 60 ca_cc_set
out=$(on 0 ibccquery CongestionControlTable "${lid[1]}")
echo "--- node 0: ibccquery CongestionControlTable ${lid[1]}"; echo "$out"
check "ibccquery CongestionControlTable: entry 4 is shift 3, multiplier 400" \
  bash -c 'grep -A2 -E "^Entry:\.*4$" <<<"$1" | grep -Eq "CCT_Shift:\.*3$" &&
           grep -A2 -E "^Entry:\.*4$" <<<"$1" | grep -Eq "CCT_Multiplier:\.*400$"' _ "$out"
out=$(on 2 ibccquery CACongestionSetting "${lid[1]}")
echo "--- node 2: ibccquery CACongestionSetting ${lid[1]}"; echo "$out" | head -n 20
check "ibccquery CACongestionSetting: SL-based, SL 0 timer 150 increase 2, SL 1 timer 300" \
  bash -c 'grep -Eq "^Port_Control:\.*0x0*1$" <<<"$1" && grep -Eq "CCTI_Timer:\.*150" <<<"$1" &&
           grep -Eq "CCTI_Increase:\.*2$" <<<"$1" && grep -Eq "CCTI_Timer:\.*300" <<<"$1"' _ "$out"
out=$(on 0 ibccquery CongestionInfo "${lid[2]}")
echo "--- node 0: ibccquery CongestionInfo ${lid[2]}"; echo "$out"
check "ibccquery CongestionInfo: a CA's ControlTableCap is 2 (128 entries)" \
  grep -Eq '^ControlTableCap:\.*2$' <<<"$out"
cc_errs=$(tail -n +$((cc_log_lines + 1)) "$PIBVM_DIR/node0.opensm.log" | grep -c 'ERR C1' || true)
check "opensm's log: no congestion control error (ERR C1xx: $cc_errs)" test "$cc_errs" = 0
finish
