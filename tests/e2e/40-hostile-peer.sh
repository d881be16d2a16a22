#!/bin/bash
# hostile-peer: node 0's pib port survives a hostile link peer.  Node 1 is killed and
# pib-hostile (tests/hostile/) takes its place on the cable: it trains the link and, as the
# port's subnet manager, takes it to ACTIVE (node 0's opensm is stopped for the test: the
# peer plays that part), then sends garbage, broken frames, malformed and misaddressed packets,
# requests outside the PSN window, RDMA with forged rkeys and out-of-range addresses, aimed at
# real RC QPs and MRs that pib-mr-target (tests/guest/) holds on node 0, a doorbell offer that
# is a pipe and the device's link doorbell rung wrong (a START never ENDed, counts that wrap:
# include/pib_link.h, "Doorbell"), malformed,
# truncated and misaddressed MADs to its QP0 and QP1, forged CM messages that node 0's
# ib_cm must reject without a trace (REJ, DREP; no QP appears in the device), and credits
# (include/pib_link.h, "Credits") in its hands: FLOW frames of bad lengths, READs while it
# grants no credit (the responses wait, SMPs are still answered), lying FLOW frames.  For every
# phase:
#   - pib-hostile's own checks pass: the device drops the stream on framing loss, the link
#     retrains, the NAKs and READ responses are the IBTA's, the device keeps to our credits;
#   - each hw_counter of node 0 grows by exactly what pib-hostile says it sent (expect lines),
#     and the rx_drop_* counters together by the number of bad packets: every dropped packet
#     is counted under exactly one reason.  xmit_wait_us counts time, not packets: for it
#     pib-hostile can say only that it grew (expect_grew lines: the device waited for credit).
# At the end pib-mr-target's memory (two MRs and the guard pages around one) is unchanged,
# its QPs are in the states the attacks leave them in with the async events they raise, the
# kernel has no splat, the port comes back ACTIVE with the hostile peer and again with node 1,
# which is booted back (opensm on node 0 again) and runs ibv_rc_pingpong with node 0.
# e2e-checks: 128
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

PHASES=(garbage bad-frames truncated zero-length bad-headers psn read forged doorbell mad cm
        credits)
INFO=/tmp/pib-mr-target.info
GO=/tmp/pib-mr-target.go
work=$(mktemp -d)
hold_pid= target_pid=
cleanup() {
  [ -n "$hold_pid" ] && kill "$hold_pid" 2>/dev/null
  [ -n "$target_pid" ] && { on 0 touch "$GO"; wait "$target_pid"; } 2>/dev/null
  "$PIBVM" sm status 0 >/dev/null 2>&1 || "$PIBVM" sm start 0 >/dev/null 2>&1
  restore_node1 >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

hostile_build
check "node 0: port ACTIVE before the test" wait_port 0 ACTIVE 30
dmesg_mark 0

echo "== node 1 leaves the cable to the hostile peer, which will be the port's SM"
check "node 0: its subnet manager stops" "$PIBVM" sm stop 0
check "kill node 1" "$PIBVM" kill 1
check "node 0: port DOWN without a peer" wait_port 0 DOWN 15
check "node 0: $HW_COUNTERS exists" on 0 test -d "$HW_COUNTERS"

# The target: started in the background, it writes $INFO and waits for $GO.
on 0 rm -f "$INFO" "$GO"
# 14 QPs: pib-hostile's 0 control, 1 psn, 2 read, 3-12 forged, 13 credits.
on 0 pib-mr-target -d pib_0 -n 14 -o "$INFO" -w "$GO" -t 900 >"$work/target.out" 2>&1 &
target_pid=$!
for i in $(seq 1 60); do
  on 0 cat "$INFO" >"$work/target.info" 2>/dev/null && break
  sleep 0.5
done
echo "--- pib-mr-target info"; cat "$work/target.info"
check "pib-mr-target is ready (its info file)" grep -q '^qpns ' "$work/target.info"

declare -A before after
expect_qps=() expect_events=()
check "node 0: ib_cm is loaded (its counters are the cm phase's)" on 0 modprobe ib_cm
qps_before=$(on 0 rdma resource show qp | grep -c .)
for phase in "${PHASES[@]}"; do
  echo "== phase $phase"
  read_counters 0 before
  timeout 300 "$HOSTILE" -s "$LINK_SOCK" -T "$work/target.info" "$phase" >"$work/$phase.out" 2>&1
  rc=$?
  read_counters 0 after
  cat "$work/$phase.out"
  check "$phase: pib-hostile's checks pass (exit $rc)" test $rc -eq 0
  summary=$(grep -E '^== [a-z-]+: [0-9]+ passed, [0-9]+ failed$' "$work/$phase.out" | tail -n 1)
  check "$phase: pib-hostile made checks and none failed (${summary:-no summary})" \
    awk -v s="$summary" 'BEGIN { exit !(split(s, f, " ") == 6 && f[3] > 0 && f[5] == 0) }'
  while read -r _ name n; do
    d=$(( ${after[$name]:-0} - ${before[$name]:-0} ))
    check "$phase: $name grew by $n (got $d)" test "$d" -eq "$n" -a -n "${after[$name]}"
  done < <(grep '^expect ' "$work/$phase.out")
  while read -r _ name; do
    d=$(( ${after[$name]:-0} - ${before[$name]:-0} ))
    check "$phase: $name grew (by $d)" test "$d" -gt 0 -a -n "${after[$name]}"
  done < <(grep '^expect_grew ' "$work/$phase.out")
  drops=0
  for name in "${!after[@]}"; do
    [[ $name == rx_drop_* ]] && drops=$(( drops + ${after[$name]} - ${before[$name]:-0} ))
  done
  n=$(awk '$1 == "expect_drops" {print $2}' "$work/$phase.out")
  check "$phase: the rx_drop_* counters together grew by the $n bad packets (got $drops)" \
    test "$drops" -eq "${n:--1}"
  mapfile -t -O "${#expect_qps[@]}" expect_qps < <(awk '$1 == "expect_qp" {print $2, $3}' "$work/$phase.out")
  mapfile -t -O "${#expect_events[@]}" expect_events < <(awk '$1 == "expect_event" {print $2, $3}' "$work/$phase.out")
done

qps_after=$(on 0 rdma resource show qp | grep -c .)
check "node 0: the forged CM messages made no QP in the device ($qps_before QPs before, $qps_after after)" \
  test "$qps_after" -eq "$qps_before"

echo "== the port after the attacks"
"$HOSTILE" -s "$LINK_SOCK" -T "$work/target.info" hold >"$work/hold.out" 2>&1 &
hold_pid=$!
check "node 0: port ACTIVE again with the hostile peer on the cable" wait_port 0 ACTIVE 15
kill "$hold_pid"; wait "$hold_pid"; hold_pid=
check "node 0: port DOWN when it hangs up" wait_port 0 DOWN 15

echo "== the target's memory, QPs and events"
on 0 touch "$GO"
wait "$target_pid"; trc=$?; target_pid=
cat "$work/target.out"
check "pib-mr-target: memory unchanged (exit $trc)" test $trc -eq 0
check "pib-mr-target: reports OK" grep -q '^OK memory unchanged' "$work/target.out"
for e in "${expect_qps[@]}"; do
  read -r q st <<<"$e"
  got=$(awk -v q="$q" '$1 == "qp" && $2 == q {print $4}' "$work/target.out")
  check "target QP $q is $st (got ${got:-nothing})" test "$got" = "$st"
done
for e in "${expect_events[@]}"; do
  read -r ev n <<<"$e"
  got=$(awk -v e="$ev" '$1 == "event" && $2 == e {print $3}' "$work/target.out")
  check "target saw $n $ev event(s) (got ${got:-0})" test "${got:-0}" -eq "$n"
done
no_splats 0

echo "== node 1 back on the cable, opensm back on node 0"
check "node 0: its subnet manager starts again" "$PIBVM" sm start 0
check "node 1 boots again and both ports are ACTIVE" restore_node1
check "ibv_rc_pingpong node 1 -> node 0 works, node 0 never restarted" pingpong 0 1 -n 200
no_splats 0
finish
