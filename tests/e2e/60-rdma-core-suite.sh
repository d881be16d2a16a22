#!/bin/bash
# rdma-core-suite: rdma-core's own test suite (pyverbs' tests/, the one every provider is measured
# against) on pib_0 in guest 0, each test both sides through the port's loopback.  The image has
# python3, pyverbs and the suite (images/build.sh); tests/e2e/rdma-core-suite.py runs it and prints
# a line per test.  Asserts: the suite ran, no test failed, and every skip is one that
# docs/rdma-core-suite.md lists (vendor-specific, hardware pib does not emulate, or a feature pib
# does not have, with the reason).  Prints tests, passes, failures and skips by reason, and the
# time taken.
#   PIB_SUITE_FILTER=REGEX  run only the tests whose id matches (a quick look at one area)
# The whole suite takes longer than run.sh's 20 minutes for a test under TCG:
# e2e-timeout: 3600
source "$(dirname "$0")/lib.sh"

DEV=${PIB_DEV:-pib_0}
TESTS_DIR=/usr/share/doc/rdma-core/tests
SKIPS_DOC=$TOP/docs/rdma-core-suite.md
PER_TEST=${PIB_SUITE_PER_TEST:-600}

check "node 0: pyverbs and rdma-core's tests are installed" \
  on 0 sh -c "test -f $TESTS_DIR/run_tests.py && python3 -c 'import pyverbs.device'"
# The traffic tests skip themselves, silently for the pass count, on a port that is not up.
check "node 0: $DEV port 1 is ACTIVE" sh -c "\"$PIBVM\" exec 0 -- ibv_devinfo -d $DEV | grep -q PORT_ACTIVE"
# The rdma_cm tests reach the device through the IP address of its net interface (base.py:
# the first address of the netdev under /sys/class/infiniband/DEV/device/net/): IPoIB on ib0.
trap '"$PIBVM" ipoib down >/dev/null 2>&1' EXIT
check "IPoIB datagram up (ib0 is pib_0's net interface for the rdma_cm tests)" "$PIBVM" ipoib datagram
dmesg_mark 0

# The runner writes its lines to a file in the guest, read back afterwards: what ran is known
# even when the run is cut short (a timeout, a hang that faulthandler ended).
runner=$(cat "$TOP/tests/e2e/rdma-core-suite.py")
t0=$SECONDS
"$PIBVM" exec --timeout "${PIB_SUITE_TIMEOUT:-3300}" 0 -- sh -c \
  'python3 -c "$0" "$@" > /tmp/rdma-core-suite.log 2>&1' \
  "$runner" "$TESTS_DIR" "$DEV" "$PER_TEST" ${PIB_SUITE_FILTER:+"$PIB_SUITE_FILTER"}
rc=$?
secs=$((SECONDS - t0))
log=$(on 0 cat /tmp/rdma-core-suite.log)
echo "$log"

summary=$(grep -E '^== suite: ' <<<"$log" | tail -n 1)
check "the suite ran to its end (runner exit $rc, $secs s)" test -n "$summary"
suite_pass=$(grep -c '^PASS  ' <<<"$log")
suite_fail=$(grep -c '^FAIL  ' <<<"$log")
suite_skip=$(grep -c '^SKIP  ' <<<"$log")
check "the suite ran tests ($((suite_pass + suite_fail + suite_skip)))" test $((suite_pass + suite_fail + suite_skip)) -gt 0
check "no test failed ($suite_fail)" test "$suite_fail" -eq 0
check "the runner exits 0 (got $rc)" test "$rc" -eq 0

# The documented skips: rows "| `REGEX` | CATEGORY | why |" of docs/rdma-core-suite.md.
declare -a pat=() cat=()
# A table cell writes | as \|.
while IFS=$'\t' read -r p c; do pat+=("${p//\\|/|}"); cat+=("$c"); done < <(
  sed -n 's/^| `\([^`]*\)` *| *\([a-z-]*\) *|.*/\1\t\2/p' "$SKIPS_DOC")
check "docs/rdma-core-suite.md lists skip reasons (${#pat[@]})" test "${#pat[@]}" -gt 0

# A skip is classified by the first row whose pattern matches "TEST_ID: MESSAGE" (a message the
# suite gives for several causes is told apart by the test), and counted by category and message.
declare -A by_reason=()
undocumented=0
while IFS= read -r line; do
  id=${line#SKIP  }; id=${id%% *}
  reason=${line#*]: }
  c=UNDOCUMENTED
  for i in "${!pat[@]}"; do
    if grep -qE -- "${pat[$i]}" <<<"$id: $reason"; then c=${cat[$i]}; break; fi
  done
  [ "$c" = UNDOCUMENTED ] && { undocumented=$((undocumented + 1)); echo "undocumented skip: $id: $reason"; }
  by_reason[$c$'\t'$reason]=$(( ${by_reason[$c$'\t'$reason]:-0} + 1 ))
done < <(grep '^SKIP  ' <<<"$log")

echo "--- rdma-core suite on $DEV: $((suite_pass + suite_fail + suite_skip)) tests, $suite_pass passed, $suite_fail failed," \
     "$suite_skip skipped, $secs s"
declare -A by_cat=()
for k in "${!by_reason[@]}"; do
  by_cat[${k%%$'\t'*}]=$(( ${by_cat[${k%%$'\t'*}]:-0} + ${by_reason[$k]} ))
done
for c in "${!by_cat[@]}"; do echo "    skipped, $c: ${by_cat[$c]}"; done | sort
echo "--- skips by reason (count, category, message)"
for k in "${!by_reason[@]}"; do
  printf '%5d  %-12s %s\n' "${by_reason[$k]}" "${k%%$'\t'*}" "${k#*$'\t'}"
done | sort -k2,2 -k1,1nr
check "every skip is one docs/rdma-core-suite.md lists ($undocumented are not)" \
  test "$undocumented" -eq 0

no_splats 0
finish
