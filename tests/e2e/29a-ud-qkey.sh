#!/bin/bash
# ud-qkey: a UD SEND with the receiver's Q_Key is delivered (bytes after the 40-byte GRH space,
# src_qp and slid in the CQE); one with a wrong Q_Key is dropped: no completion, the receive
# stays posted for the next SEND, and the port counts it (qkey_viol_cntr, and on pib
# hw_counters/rx_drop_qkey, exactly +1).
# Runs `pib-verbs-test ud-qkey` (tests/guest/pib_verbs_test/ud.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
#
# rx_drop_qkey is pib's counter: other devices lack the file and the subtest SKIPs that one
# check.  So on pib nothing may be skipped (verbs_pair, verbs_loopback); elsewhere that SKIP,
# and no other, is allowed.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

T=ud-qkey

# skips_ok WHAT LOG...: the logs skip nothing but the rx_drop_qkey check.
skips_ok() {
  local what=$1; shift
  check "$what: nothing skipped but the rx_drop_qkey check" \
    sh -c '! grep -h "^SKIP" "$@" | grep -qv "rx_drop_qkey"' sh "$@"
}

verbs_setup
if [[ $VERBS_DEV == pib* ]]; then
  verbs_pair $T
  verbs_loopback $T 1
else
  slog=$(mktemp) clog=$(mktemp)
  on 0 pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" $T >"$slog" 2>&1 &
  spid=$!
  on 1 pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" $T node0 >"$clog" 2>&1
  crc=$?
  wait $spid
  src=$?
  echo "--- $T: node 0 (server)"; cat "$slog"
  echo "--- $T: node 1 (client)"; cat "$clog"
  check "$T: server on node 0 exits 0 (got $src)" test $src -eq 0
  check "$T: client on node 1 exits 0 (got $crc)" test $crc -eq 0
  check "$T: server made checks" grep -q '^PASS' "$slog"
  check "$T: client made checks" grep -q '^PASS' "$clog"
  skips_ok "$T" "$slog" "$clog"
  if [ "${PIB_VERBS_NO_LOOPBACK:-0}" != 1 ]; then
    on 1 pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" -l $T >"$slog" 2>&1
    rc=$?
    echo "--- $T: loopback on node 1"; cat "$slog"
    check "$T: loopback on node 1 exits 0 (got $rc)" test $rc -eq 0
    check "$T: loopback made checks" grep -q '^PASS' "$slog"
    skips_ok "$T: loopback" "$slog"
  fi
  rm -f "$slog" "$clog"
fi
verbs_no_splats
finish
