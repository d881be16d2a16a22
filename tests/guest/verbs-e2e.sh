# Helpers for the e2e scripts that drive pib-verbs-test (tests/e2e/2?-*.sh).
# Source after tests/e2e/lib.sh; the guests are up (tests/run.sh) and have /usr/bin/pib-verbs-test
# (the image builder copies build/guest-tests/* there).
#
# PIB_DEV picks the device, pib_0 by default.  PIB_DEV=rxe0 runs the same tests over Soft-RoCE
# on the guests' eth0 (the management net): that is how the tests themselves are checked, on a
# device whose behaviour is known.
#   PIB_VERBS_TIMEOUT  seconds pib-verbs-test waits for any one completion or message (-t)
#   PIB_VERBS_NO_LOOPBACK=1  skip the single-node loopback runs (said, and short of the
#                            script's check count: see verbs_loopback)

VERBS_DEV=${PIB_DEV:-pib_0}
VERBS_T=${PIB_VERBS_TIMEOUT:-60}

# verbs_setup: the binary is there, the device exists (rxe: created), and where each guest's
# kernel log stands now, for verbs_no_splats.
verbs_setup() {
  local n
  for n in 0 1; do
    check "node $n: pib-verbs-test is installed" on $n sh -c 'command -v pib-verbs-test >/dev/null'
    if [[ $VERBS_DEV == rxe* ]]; then
      # rdma_rxe needs the kernel's "crc32" hash (crc32_generic; there is no udev to load it on
      # demand).  Jumbo frames give rxe an active MTU of 4096, so send-sizes runs at MTU 4096.
      on $n sh -c "test -e /sys/class/infiniband/$VERBS_DEV ||
                   { modprobe crc32_generic; modprobe rdma_rxe && ip link set eth0 mtu 9000 &&
                     rdma link add $VERBS_DEV type rxe netdev eth0; }"
    fi
    check "node $n: device $VERBS_DEV exists" on $n test -e /sys/class/infiniband/$VERBS_DEV
    dmesg_mark $n
  done
}

# verbs_pair SUBTEST [OPTION...]: server on node 0, client on node 1; both must exit 0 and have
# made checks.
verbs_pair() {
  local t=$1; shift
  local slog clog spid src crc
  slog=$(mktemp) clog=$(mktemp)
  on 0 pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" "$@" "$t" >"$slog" 2>&1 &
  spid=$!
  on 1 pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" "$@" "$t" node0 >"$clog" 2>&1
  crc=$?
  wait $spid
  src=$?
  echo "--- $t: node 0 (server)"; cat "$slog"
  echo "--- $t: node 1 (client)"; cat "$clog"
  check "$t: server on node 0 exits 0 (got $src)" test $src -eq 0
  check "$t: client on node 1 exits 0 (got $crc)" test $crc -eq 0
  check "$t: server made checks" grep -q '^PASS' "$slog"
  check "$t: client made checks" grep -q '^PASS' "$clog"
  check "$t: nothing skipped" sh -c "! grep -q '^SKIP' '$slog' '$clog'"
  rm -f "$slog" "$clog"
}

# verbs_loopback SUBTEST NODE [OPTION...]: both roles in one process on NODE, QP to QP through
# the node's own port.
verbs_loopback() {
  local t=$1 n=$2; shift 2
  local log rc
  # Its checks then go missing, and tests/run.sh fails the script for making fewer than its
  # header names: a run without loopback cannot pass for a whole one.
  [ "${PIB_VERBS_NO_LOOPBACK:-0}" = 1 ] && { echo "SKIP $t: loopback on node $n (PIB_VERBS_NO_LOOPBACK=1)"; return 0; }
  log=$(on $n pib-verbs-test -d "$VERBS_DEV" -t "$VERBS_T" -l "$@" "$t" 2>&1)
  rc=$?
  echo "--- $t: loopback on node $n"; echo "$log"
  check "$t: loopback on node $n exits 0 (got $rc)" test $rc -eq 0
  check "$t: loopback made checks" grep -q '^PASS' <<<"$log"
  check "$t: loopback skipped nothing" sh -c '! grep -q "^SKIP"' <<<"$log"
}

# verbs_no_splats: no WARN/BUG/Oops in either kernel log since verbs_setup.
verbs_no_splats() { no_splats 0; no_splats 1; }
