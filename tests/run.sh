#!/bin/bash
# The test runner behind `make test`, `make qtest`, `make provider-test` and `make e2e`.
#
#   qtest:    the device model alone, driven by QEMU's qtest (no guest): every
#             tests/qtest/pib-*-test.c, one executable each.
#   provider: the provider's unit test on the host, with a fake kernel and device
#             (guest-provider/test/provider-test.c).
#   host:     the host unit tests (tests/host/test_*.py: pibvm's topology, the model's layers).
#   fuzz:     the fuzzers' short fixed-seed run (tests/fuzz/run.sh --short).
#   e2e:      two guests booted once with tools/pibvm; every tests/e2e/NN-*.sh runs against them.
#   labs:     the driver-writing course (labs/grade.sh --suite): in one boot of two guests without
#             pib.ko, every stage's reference solution must pass its grader and every untouched
#             skeleton must fail it.
#   all:      qtest, provider, host, fuzz, e2e, labs.
#
# PIB_GUEST_LOCK=FILE: hold an flock on FILE while guests are up, so that test runs sharing a
# machine never boot their guests at the same time (the builds and the qtests go on meanwhile).
#
# PIB_STACK (mk/stack.sh) picks the QEMU, kernel and image under test: build/ (bookworm) or
# build/trixie/ (trixie), logs in <outputs>/test-logs.  The fuzzers build on QEMU 7.2's tree
# only, so `all` on trixie is qtest and e2e.
#
# Each e2e script is a test: it passes when it exits 0 and made at least the checks its header
# line "# e2e-checks: N" names (tests/e2e/lib.sh counts every `check`).  PIB_E2E_GLOB picks a
# subset: globs separated by spaces (default [0-9]*, e.g. PIB_E2E_GLOB='4[0-9]-*' for the
# robustness tests).  The last line is the plain "N passed, N failed" summary.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
source mk/stack.sh
what=${1:-all}
pass=0 fail=0 skip=0
failed=() skips=()
log_dir=$STACK_OUT/test-logs
mkdir -p "$log_dir"

# Each test case is counted ("ok" or "not ok" in the TAP output), over all the executables.  An
# executable passes only when it exits 0, printed its TAP plan ("1..N") and N "ok" lines: a
# failed g_assert aborts the binary ("Bail out!", no "not ok"), and a hang guard's kill or a
# crash ends it early, so the tests it did not reach count as failed, as do those it failed.
run_qtest() {
  local src name bin tap ok notok plan rc missing
  for src in tests/qtest/pib-*-test.c; do
    name=$(basename "$src" .c)
    bin=$STACK_OUT/qtest/$name
    [ -x "$bin" ] || { echo "qtest binary missing: $bin"; fail=$((fail + 1)); failed+=("$name (not built)"); continue; }
    echo "== qtest ($PIB_STACK): $bin"
    tap=$log_dir/$name.tap
    # The tests pass the firmware paths (-L) themselves.  The limit is a hang guard only.
    QTEST_QEMU_BINARY="$STACK_OUT/qemu-system-x86_64" timeout 600 "$bin" --tap -k 2>&1 | tee "$tap"
    rc=${PIPESTATUS[0]}
    ok=$(grep -c '^ok ' "$tap")
    notok=$(grep -c '^not ok ' "$tap")
    plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$tap" | head -n 1)
    pass=$((pass + ok)); fail=$((fail + notok))
    [ "$notok" -eq 0 ] || failed+=("$name")
    if [ -z "$plan" ]; then
      fail=$((fail + 1)); failed+=("$name (exit $rc, no TAP plan)")
    elif [ $((ok + notok)) -lt "$plan" ]; then
      missing=$((plan - ok - notok))
      fail=$((fail + missing)); failed+=("$name (exit $rc after $((ok + notok)) of $plan tests)")
    elif [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
      fail=$((fail + 1)); failed+=("$name (exit $rc)")
    fi
    [ "$ok" -gt 0 ] || { fail=$((fail + 1)); failed+=("$name ran no test"); }
  done
}

# The provider's unit test counts as one test: it passes when it made checks and none failed.
run_provider() {
  echo "== provider: guest-provider/test/run.sh"
  bash guest-provider/test/run.sh 2>&1 | tee "$log_dir/provider-test.log"
  local rc=${PIPESTATUS[0]} checks
  checks=$(sed -n 's/^provider-test: \([0-9]*\) checks, 0 failures$/\1/p' "$log_dir/provider-test.log")
  if [ "$rc" -eq 0 ] && [ "${checks:-0}" -gt 0 ]; then pass=$((pass + 1))
  else fail=$((fail + 1)); failed+=("provider-test (exit $rc)"); fi
}

# The host unit tests (tests/host/test_*.py, stdlib unittest): each prints a closing
# "N passed, N failed[, N skipped]" line, which is added up (a skip with its SKIP line); a test
# file without one, or that exits non-zero, is a failure of its own.
run_host() {
  local t name line p f s rc
  for t in tests/host/test_*.py; do
    name=$(basename "$t" .py)
    echo "== host: $t"
    python3 "$t" 2>&1 | tee "$log_dir/$name.log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log_dir/$name.log" | tail -n 1)
    p=$(awk '{print $1}' <<<"$line") f=$(awk '{print $3}' <<<"$line")
    s=$(sed -n 's/.*, \([0-9][0-9]*\) skipped$/\1/p' <<<"$line")
    if [ -z "$line" ]; then fail=$((fail + 1)); failed+=("$name (exit $rc, no summary)"); continue; fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + ${s:-0}))
    [ "${s:-0}" -eq 0 ] || skips+=("$(grep '^SKIP ' "$log_dir/$name.log" | cut -c6-)")
    [ "$f" -eq 0 ] || failed+=("$name")
    [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || { fail=$((fail + 1)); failed+=("$name (exit $rc)"); }
  done
}

# The fuzzers' short, fixed-seed run (tests/fuzz/run.sh --short): seeds and saved crashes
# replayed, then a deterministic libFuzzer run of the link target.
run_fuzz_short() {
  echo "== fuzz: short fixed-seed run"
  bash tests/fuzz/run.sh --short 2>&1 | tee "$log_dir/fuzz-short.log"
  local line p f s
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log_dir/fuzz-short.log" | tail -n 1)
  p=$(awk '{print $1}' <<<"$line") f=$(awk '{print $3}' <<<"$line")
  s=$(sed -n 's/.*, \([0-9][0-9]*\) skipped$/\1/p' <<<"$line")
  if [ -z "$line" ]; then fail=$((fail + 1)); failed+=("fuzz (no summary)"); return; fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + ${s:-0}))
  [ "${s:-0}" -eq 0 ] || skips+=("$(grep '^SKIP ' "$log_dir/fuzz-short.log" | cut -c6-)")
  [ "$f" -eq 0 ] || failed+=(fuzz)
}

# The labs' suite counts each solution and each skeleton as a test (its "N passed, N failed").
run_labs() {
  echo "== labs: labs/grade.sh --suite"
  PIBVM_DIR=$STACK_OUT/vm-lab bash labs/grade.sh --suite 2>&1 | tee "$log_dir/labs.log"
  local rc=${PIPESTATUS[0]} line p f
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log_dir/labs.log" | tail -n 1)
  p=$(awk '{print $1}' <<<"$line") f=$(awk '{print $3}' <<<"$line")
  if [ -z "$line" ]; then fail=$((fail + 1)); failed+=("labs (exit $rc, no summary)"); return; fi
  pass=$((pass + p)); fail=$((fail + f))
  [ "$f" -eq 0 ] || failed+=(labs)
  [ "$rc" -eq 0 ] || [ "$f" -ne 0 ] || { fail=$((fail + 1)); failed+=("labs (exit $rc)"); }
}

# What a failed script may have left running: the guests of its own run directories (the
# switched tests' and the like, beside the suite's), which would slow every test after it.
e2e_strays() {
  local d
  for d in "$STACK_OUT"/vm-*/; do
    [ "$d" = "$STACK_OUT/vm-test/" ] || PIBVM_DIR=${d%/} tools/pibvm down >/dev/null 2>&1 || true
  done
}

run_e2e() {
  if [ -n "${PIB_GUEST_LOCK:-}" ]; then
    local t0=$SECONDS
    exec 8>"$PIB_GUEST_LOCK"
    flock 8
    echo "== e2e: waited $((SECONDS - t0)) s for $PIB_GUEST_LOCK"
  fi
  echo "== e2e ($PIB_STACK): booting two guests"
  export PIBVM_DIR=$STACK_OUT/vm-test
  tools/pibvm down >/dev/null 2>&1 || true
  if ! tools/pibvm up --nodes 2; then
    fail=$((fail + 1)); failed+=("pibvm up"); return
  fi
  local t name rc g globs limit want made pid
  read -ra globs <<<"${PIB_E2E_GLOB:-[0-9]*}"
  for g in "${globs[@]}"; do for t in tests/e2e/$g.sh; do
    [ -f "$t" ] || { fail=$((fail + 1)); failed+=("no e2e test $g"); continue; }
    name=$(basename "$t" .sh)
    echo "== e2e: $name"
    # 20 minutes each, unless the script asks for more on a line "# e2e-timeout: SECONDS";
    # a script that overstays gets SIGTERM (its EXIT trap cleans up), and SIGKILL 2 minutes on
    # if the trap hangs too.
    limit=$(sed -n 's/^# e2e-timeout: \([0-9][0-9]*\)$/\1/p' "$t" | head -n 1)
    # The log is written by the script itself and followed to the terminal until it exits, so
    # that it is whole when its count is read (a tee behind a pipe or a process substitution
    # could still be writing, or be held open by something the script left running).
    : > "$log_dir/$name.log"    # there before tail looks for it
    timeout -k 120 "${limit:-1200}" bash "$t" > "$log_dir/$name.log" 2>&1 &
    pid=$!
    tail --pid="$pid" -n +1 -f "$log_dir/$name.log"
    wait "$pid"; rc=$?
    # The script's own count against its header (tests/e2e/lib.sh, finish).
    want=$(sed -n 's/^# e2e-checks: \([0-9][0-9]*\)$/\1/p' "$t" | head -n 1)
    made=$(sed -n 's/^e2e checks: \([0-9][0-9]*\) made.*/\1/p' "$log_dir/$name.log" | tail -n 1)
    if [ $rc -eq 0 ] && grep -q '^E2E-SKIP ' "$log_dir/$name.log"; then
      # The script said why it cannot run here (tests/e2e/lib.sh, skip_script).
      skip=$((skip + 1)); skips+=("$name: $(sed -n 's/^E2E-SKIP //p' "$log_dir/$name.log" | head -n 1)")
      echo "SKIP $name"; continue
    elif [ $rc -eq 0 ] && [ -z "$want" ]; then
      rc=98; echo "$name has no '# e2e-checks: N' header line"
    elif [ $rc -eq 0 ] && [ "${made:-0}" -lt "$want" ]; then
      rc=97; echo "$name made ${made:-no} checks, fewer than the $want its header names"
    fi
    if [ $rc -eq 0 ]; then pass=$((pass + 1)); echo "PASS $name ($made checks)"
    else fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc)"; e2e_strays; fi
  done; done
  tools/pibvm down || true
  [ -z "${PIB_GUEST_LOCK:-}" ] || exec 8>&-
}

case $what in
  qtest) run_qtest ;;
  provider) run_provider ;;
  e2e) run_e2e ;;
  fuzz) run_fuzz_short ;;
  host) run_host ;;
  labs) run_labs ;;
  # The labs' solutions are written for Linux 6.1 (bookworm's kernel; 6.11 changed create_cq).
  all) run_qtest; run_provider; run_host; [ "$PIB_STACK" = bookworm ] && run_fuzz_short; run_e2e
       [ "$PIB_STACK" = bookworm ] && run_labs ;;
  *) echo "usage: $0 qtest|provider|host|fuzz|e2e|labs|all"; exit 2 ;;
esac

[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
for s in "${skips[@]}"; do echo "skipped: $s"; done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
