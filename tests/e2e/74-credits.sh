#!/bin/bash
# credits: two guests cabled back to back with credit-based flow control asked for
# (link-credits=on: between two CAs it runs only when asked, include/pib_link.h "Credits";
# its own run directory, as the 7x tests), and a receiver that stops granting credit stalls
# its sender without a byte lost.  While node 1 runs `ib_write_bw` to node 0, node 0's HCA
# holds its credits (inject-credit-hold, QMP qom-set):
#   - node 1's writes stop: its xmit_wait_us hw_counter and the PortXmitWait its PMA reports
#     (perfquery) grow while node 0 holds, by at least the half second this waits for;
#   - node 0 lets go and the run completes: both sides exit 0, every iteration reported;
#   - nothing was lost to the stall: node 1 retransmitted nothing (its QP's ACK timeout, -u 20,
#     is 4 s, longer than the stall) and neither node dropped a packet for credit or for lack of
#     room (rx_drop_credit, rx_drop_rxq_full, tx_drop_txq_full);
#   - node 0's own hw_counter shows what the injection did (injected_faults).
# e2e-checks: 13
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

switched_dir vm-credits
PIBVM_PIB_PROPS=,link-credits=on switched_up --nodes 2
QMP0=$PIBVM_DIR/node0.qmp
HCA=/machine/peripheral/pib0
STALL_US=500000         # how long node 1 must have waited for credit before node 0 lets go

counters() {    # counters NODE: "name value" lines of the counters this test reads
  local c
  for c in xmit_wait_us retransmits rx_drop_credit rx_drop_rxq_full tx_drop_txq_full \
           injected_faults; do
    echo "$c $(hw_counter "$1" "$c")"
  done
}
val() { awk -v k="$1" '$1 == k {print $2}' <<<"$2"; }
port_xmit_wait() { on 1 perfquery | sed -n 's/^PortXmitWait:\.*//p'; }

check "node 0: inject-credit-hold is off" test "$(qom "$QMP0" "$HCA" inject-credit-hold)" = False
a0=$(counters 0) b0=$(counters 1) pw0=$(port_xmit_wait)
echo "--- before"; echo "node 0:"; echo "$a0"; echo "node 1:"; echo "$b0"; echo "PortXmitWait $pw0"

slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 0 --timeout 120 -- ib_write_bw -d pib_0 -F -D 8 -u 20 >"$slog" 2>&1 &
spid=$!
wait_listen 0 18515
"$PIBVM" exec 1 --timeout 120 -- ib_write_bw -d pib_0 -F -D 8 -u 20 node0 >"$clog" 2>&1 &
cpid=$!
# Hold once the run is under way (node 1 has sent), until node 1 has waited STALL_US for credit.
# (The polls are bounded by count; the conditions are the outcomes themselves.)
tx0=$(hw_counter 1 tx_packets)
sent() { [ "$(hw_counter 1 tx_packets)" -gt $((tx0 + 1000)) ]; }
for ((i = 0; i < 300; i++)); do sent && break; sleep 0.1; done
check "node 1 is sending" sent
check "node 0: inject-credit-hold on" test "$(qom "$QMP0" "$HCA" inject-credit-hold true)" = ok
w0=$(hw_counter 1 xmit_wait_us)
stalled() { [ "$(hw_counter 1 xmit_wait_us)" -ge $((w0 + STALL_US)) ]; }
for ((i = 0; i < 300; i++)); do stalled && break; sleep 0.1; done
check "node 1 waited for credit at least $STALL_US us ($w0 -> $(hw_counter 1 xmit_wait_us))" stalled
check "node 0: inject-credit-hold off" test "$(qom "$QMP0" "$HCA" inject-credit-hold false)" = ok
wait "$cpid"; crc=$?
wait "$spid"; src=$?
echo "--- ib_write_bw server (node 0)"; cat "$slog"
echo "--- ib_write_bw client (node 1)"; cat "$clog"
check "ib_write_bw: server exits 0 (got $src)" test "$src" -eq 0
check "ib_write_bw: client exits 0 (got $crc)" test "$crc" -eq 0
check "ib_write_bw: the client reports its bandwidth" grep -Eq '^ *65536 +[0-9]+ ' "$clog"
rm -f "$slog" "$clog"

a1=$(counters 0) b1=$(counters 1) pw1=$(port_xmit_wait)
echo "--- after"; echo "node 0:"; echo "$a1"; echo "node 1:"; echo "$b1"; echo "PortXmitWait $pw1"
check "perfquery: node 1's PortXmitWait grew by at least $STALL_US ticks of 1 us ($pw0 -> $pw1)" \
  test "${pw1:-0}" -ge $(( ${pw0:-0} + STALL_US ))
check "node 1 retransmitted nothing ($(val retransmits "$b0") -> $(val retransmits "$b1"))" \
  test "$(val retransmits "$b1")" = "$(val retransmits "$b0")"
lost=0
for n in 0 1; do
  before=$([ $n = 0 ] && echo "$a0" || echo "$b0") after=$([ $n = 0 ] && echo "$a1" || echo "$b1")
  for c in rx_drop_credit rx_drop_rxq_full tx_drop_txq_full; do
    [ "$(val $c "$after")" = "$(val $c "$before")" ] || { echo "node $n: $c grew"; lost=1; }
  done
done
check "no packet dropped for credit or room on either node" test "$lost" -eq 0
check "node 0 counted the injection (injected_faults $(val injected_faults "$a0") -> $(val injected_faults "$a1"))" \
  test "$(val injected_faults "$a1")" -eq $(( $(val injected_faults "$a0") + 1 ))
finish
