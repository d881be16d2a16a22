#!/bin/bash
# incast: a lossless fabric under overload.  `pibvm up --nodes 4` on one pib switch (its own run
# directory, as 70-switch); credit-based flow control runs on every link (include/pib_link.h,
# "Credits").  Nodes 1, 2 and 3 each run `ib_write_bw -D 10` into node 0 at once, three flows
# into one switch port:
#   - every run completes, all six perftest processes exit 0 and the three clients report;
#   - the switch dropped nothing: PortXmitDiscards on every switch port stay (its PMA), and so
#     do its drop-txq-full and drop-credit-overrun counters (QMP);
#   - no HCA retransmitted or saw a sequence error (hw_counters retransmits, seq_naks_sent,
#     seq_naks_rcvd) and none dropped for credit or room: nothing was lost on the way.  The QPs'
#     ACK timeout (-u 20, 4 s) is longer than the queueing delay three flows into one port
#     can build up on this 2-core TCG host, so a retransmission would mean a lost packet;
#   - the congested port waited for credit: PortXmitWait of switch port 1 (node 0's cable)
#     grew.
# Printed, for the record: one flow alone in the same boot, the three rates and their sum, and
# the host's idle share during each (so that the cost of sharing the port can be told from the
# cost of sharing two CPUs).
# e2e-timeout: 1800
# e2e-checks: 29
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

NODES=4
switched_dir vm-incast
SW_GUID=$("$PIBVM" guid switch 0)
QMPS=$PIBVM_DIR/switch0.qmp

switched_up --nodes "$NODES"
ca_lids "$NODES"
swlid=$(sw_lid "${SW_GUID#0x}")
check "ibswitches: the switch has a LID" test "${swlid:-0}" -gt 0 || finish
for ((p = 1; p <= NODES; p++)); do
  sw_port_active switch "$swlid" "$p" "node $((p - 1))'s cable"
done

# cpu_mark; ...; cpu_idle: the host's idle share (percent of both CPUs) since the mark.
cpu_now() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
cpu_mark() { cpu_at=$(cpu_now); }
cpu_idle() {
  awk -v a="$cpu_at" -v b="$(cpu_now)" 'BEGIN {split(a, x); split(b, y);
    printf "%.0f", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0}'
}
# flows PORTBASE NODE...: ib_write_bw -D 10 from each NODE into node 0 at once, server k on
# port PORTBASE+k; sets rate[NODE] (MB/s average) and rcs (the exit statuses, in order).
flows() {
  local base=$1 k=0 n spids=() cpids=() slogs=() clogs=()
  shift
  for n in "$@"; do
    slogs[$k]=$(mktemp) clogs[$k]=$(mktemp)
    "$PIBVM" exec 0 --timeout 240 -- ib_write_bw -d pib_0 -F -D 10 -u 20 -p $((base + k)) \
      >"${slogs[$k]}" 2>&1 &
    spids[$k]=$!
    wait_listen 0 $((base + k))
    k=$((k + 1))
  done
  k=0
  for n in "$@"; do
    "$PIBVM" exec "$n" --timeout 240 -- ib_write_bw -d pib_0 -F -D 10 -u 20 -p $((base + k)) \
      node0 >"${clogs[$k]}" 2>&1 &
    cpids[$k]=$!
    k=$((k + 1))
  done
  rcs=""
  k=0
  for n in "$@"; do
    wait "${cpids[$k]}"; rcs+=" $?"
    wait "${spids[$k]}"; rcs+=" $?"
    echo "--- ib_write_bw node $n -> node 0 (port $((base + k)))"; cat "${slogs[$k]}" "${clogs[$k]}"
    rate[$n]=$(awk '$1 == 65536 && NF >= 5 {print $4}' "${clogs[$k]}")
    rm -f "${slogs[$k]}" "${clogs[$k]}"
    k=$((k + 1))
  done
}
# hca_sum COUNTER: the counter summed over the four HCAs.
hca_sum() { local n s=0; for ((n = 0; n < NODES; n++)); do s=$((s + $(hw_counter $n "$1"))); done; echo $s; }
snapshot() {     # snapshot: the switch's and the HCAs' loss counters, one line each
  local p
  for ((p = 1; p <= NODES; p++)); do echo "swport$p-xmit_discards $(sw_counter "$swlid" $p PortXmitDiscards)"; done
  echo "sw-drop-txq-full $(qom "$QMPS" /machine/peripheral/sw0 drop-txq-full)"
  echo "sw-drop-credit-overrun $(qom "$QMPS" /machine/peripheral/sw0 drop-credit-overrun)"
  for c in retransmits seq_naks_sent seq_naks_rcvd rx_drop_credit rx_drop_rxq_full tx_drop_txq_full; do
    echo "hca-$c $(hca_sum $c)"
  done
}
val() { awk -v k="$1" '$1 == k {print $2}' <<<"$2"; }

# --- one flow alone, for the record ----------------------------------------------------------
declare -a rate
cpu_mark
flows 18600 1
alone_idle=$(cpu_idle)
check "one flow alone (node 1 -> node 0): both exit 0 (${rcs# })" test "$rcs" = " 0 0"
alone=${rate[1]}

# --- three at once --------------------------------------------------------------------------
before=$(snapshot) xw0=$(sw_counter "$swlid" 1 PortXmitWait)
echo "--- before the incast"; echo "$before"; echo "switch port 1 PortXmitWait $xw0"
cpu_mark
flows 18700 1 2 3
incast_idle=$(cpu_idle)
after=$(snapshot) xw1=$(sw_counter "$swlid" 1 PortXmitWait)
echo "--- after the incast"; echo "$after"; echo "switch port 1 PortXmitWait $xw1"
for n in 1 2 3; do
  check "incast: node $n's ib_write_bw reported a rate (${rate[$n]:-none} MB/s)" test -n "${rate[$n]}"
done
sum=$(awk -v a="${rate[1]:-0}" -v b="${rate[2]:-0}" -v c="${rate[3]:-0}" 'BEGIN {printf "%.2f", a + b + c}')
echo "incast: ${rate[1]:-?} + ${rate[2]:-?} + ${rate[3]:-?} = $sum MB/s into node 0 (host idle ${incast_idle:-?}%);" \
     "one flow alone ${alone:-?} MB/s (host idle ${alone_idle:-?}%)"
for key in $(awk '{print $1}' <<<"$after"); do
  check "incast: $key stayed ($(val "$key" "$before") -> $(val "$key" "$after"))" \
    test -n "$(val "$key" "$after")" -a "$(val "$key" "$after")" = "$(val "$key" "$before")"
done
check "incast: switch port 1 (node 0's cable) waited for credit: PortXmitWait $xw0 -> $xw1" \
  test "${xw1:-0}" -gt "${xw0:-0}"
check "incast: all six ib_write_bw exit 0 (${rcs# })" test "$rcs" = " 0 0 0 0 0 0"
finish
