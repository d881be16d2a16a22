#!/bin/bash
# switch: a switched fabric of its own.  `pibvm up --nodes 3` in a separate run directory starts
# one pib switch (-machine none -device pib-switch) and cables all three guests to it; opensm
# (node 0) must discover it, program its forwarding table and bring every port ACTIVE:
#   - the three CA ports ACTIVE, with distinct LIDs;
#   - ibnetdiscover sees 1 switch and 3 CAs, the switch with 3 ports, each cabled to a CA;
#   - ibroute shows the LFT opensm set: each CA's LID routed to its own switch port;
#   - opensm turned partition enforcement on at the switch port of node 0, with node 0's P_Keys;
#   - ibv_rc_pingpong -c crosses the switch between every pair of nodes;
#   - perfquery on the switch's ports (its PMA) counts what crossed.
# The suite's own two guests stay up meanwhile (this test boots its own three).
# e2e-timeout: 1500
source "$(dirname "$0")/lib.sh"

NODES=${PIB_SWITCH_NODES:-3}
export PIBVM_DIR="$(dirname "${PIBVM_DIR:-$TOP/build/vm-test}")/vm-switch"
SW_GUID=0x001af40000ff0000      # pibvm's SWITCH_GUID

cleanup() { "$PIBVM" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$PIBVM" down >/dev/null 2>&1 || true

t0=$SECONDS
if ! "$PIBVM" up --nodes "$NODES" 2>&1 | tee /tmp/pib-switch-up.$$; then
  check "pibvm up --nodes $NODES" false
  finish
fi
echo "pibvm up --nodes $NODES: $((SECONDS - t0)) s in all"
grep 'ports ACTIVE' /tmp/pib-switch-up.$$ || true
rm -f /tmp/pib-switch-up.$$

declare -a lid
for ((n = 0; n < NODES; n++)); do
  check "node $n: port ACTIVE" test "$(port_state $n)" = ACTIVE
  lid[$n]=$(port_lid $n)
done
echo "LIDs: ${lid[*]}"
check "the SM gave $NODES distinct nonzero LIDs (${lid[*]})" \
  test "$(printf '%s\n' "${lid[@]}" | grep -v '^0$' | sort -u | wc -l)" -eq "$NODES"

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
swlid=$(on 0 ibswitches | sed -n 's/.* lid \([0-9]*\) .*/\1/p' | head -n 1)
echo "switch LID: $swlid"
check "ibswitches: the switch has a LID" test "${swlid:-0}" -gt 0
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
before=$(on 0 perfquery -x "$swlid" 1 2>/dev/null | sed -n 's/^PortXmitPkts:\.*//p')
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
finish
