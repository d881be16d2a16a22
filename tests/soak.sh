#!/bin/bash
# make soak: run the fault tests and the RC tests again and again, to find the races that one
# run of `make test` can miss.  A test that fails once in thirty runs is broken.
#
#   tests/soak.sh [--count N] [--seconds S] [--tests 'GLOB ...'] [--cuts N] [--no-guests]
#
#   1. The guest-less soak: the /pib/soak/link-cuts qtest relays the link between two devices in
#      one QEMU and cuts it --cuts times (default 10000) with RC traffic in flight; every QP must
#      complete its work, or fail it with RETRY_EXC_ERR, within its retry bound.
#   2. Two guests boot once; then each iteration runs every e2e test named by --tests (default:
#      the hostile peer, the link faults and the RC tests), in order.  It stops after --count
#      iterations (default 30) or once --seconds have passed, whichever comes first, and at the
#      first failure: that test's log, the guests' serial and QEMU logs and the counters stay in
#      build/soak/ (printed at the end).
#
# Each iteration prints one line; the last line is the plain "N passed, N failed" summary.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"

count=${SOAK_COUNT:-30}
seconds=${SOAK_SECONDS:-0}
tests=${SOAK_TESTS:-"40-hostile-peer 41-link-fault 10-rc-pingpong 2[0-7]-*"}
cuts=${SOAK_CUTS:-10000}
guests=1
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --cuts) cuts=$2; shift 2 ;;
    --no-guests) guests=0; shift ;;
    *) echo "usage: $0 [--count N] [--seconds S] [--tests 'GLOB ...'] [--cuts N] [--no-guests]" >&2
       exit 2 ;;
  esac
done

out=$TOP/build/soak
rm -rf "$out"
mkdir -p "$out"
pass=0 fail=0
start=$SECONDS
say() { printf '[soak] %s\n' "$*"; }

# Keep what a failure needs to be understood, then stop.
keep_and_stop() {
  local what=$1 log=$2
  fail=$((fail + 1))
  say "FAIL $what: log $log"
  if [ "$guests" = 1 ] && [ -d "${PIBVM_DIR:-}" ]; then
    mkdir -p "$out/guests"
    cp "$PIBVM_DIR"/node*.log "$out/guests/" 2>/dev/null
    for n in 0 1; do
      tools/pibvm exec "$n" --timeout 30 -- sh -c \
        'cd /sys/class/infiniband/pib_0/ports/1/hw_counters && grep -H . *' \
        >"$out/guests/node$n.counters" 2>&1
      tools/pibvm exec "$n" --timeout 30 -- dmesg >"$out/guests/node$n.dmesg" 2>&1
    done
    tools/pibvm down >/dev/null 2>&1
  fi
  say "kept: $out"
  echo "$pass passed, $fail failed"
  exit 1
}

# 1. Guest-less: thousands of link cuts with traffic in flight.
qlog=$out/link-cuts.tap
say "guest-less: /pib/soak/link-cuts with $cuts cuts"
PIB_SOAK_CUTS=$cuts QTEST_QEMU_BINARY=$TOP/build/qemu-system-x86_64 \
  timeout $((600 + cuts / 4)) build/qtest/pib-soak-test --tap -k -p /x86_64/pib/soak/link-cuts \
  >"$qlog" 2>&1
grep -E '^# soak:' "$qlog" | sed 's/^# /[soak] /'
if grep -q '^ok ' "$qlog" && ! grep -q '^not ok' "$qlog"; then
  pass=$((pass + 1))
  say "PASS link-cuts ($cuts cuts)"
else
  keep_and_stop "link-cuts" "$qlog"
fi
[ "$guests" = 1 ] || { echo "$pass passed, $fail failed"; exit 0; }

# 2. Two guests, the e2e tests in a loop.
export PIBVM_DIR=$TOP/build/vm-soak
tools/pibvm down >/dev/null 2>&1 || true
say "booting two guests"
tools/pibvm up --nodes 2 >"$out/pibvm-up.log" 2>&1 || keep_and_stop "pibvm up" "$out/pibvm-up.log"
trap 'tools/pibvm down >/dev/null 2>&1' EXIT

list=()
for g in $tests; do
  for t in tests/e2e/$g.sh; do [ -f "$t" ] && list+=("$t"); done
done
[ ${#list[@]} -gt 0 ] || { say "no test matches '$tests'"; exit 2; }
say "each iteration: $(for t in "${list[@]}"; do basename "$t" .sh; done | paste -sd' ')"

i=0
while [ "$i" -lt "$count" ]; do
  if [ "$seconds" -gt 0 ] && [ $((SECONDS - start)) -ge "$seconds" ]; then
    say "time is up after $i iterations"
    break
  fi
  i=$((i + 1))
  dir=$out/iter-$(printf '%03d' "$i")
  mkdir -p "$dir"
  line="iteration $i/$count:"
  for t in "${list[@]}"; do
    name=$(basename "$t" .sh)
    t0=$SECONDS
    timeout 1200 bash "$t" >"$dir/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      say "$line ... $name FAILED (exit $rc, $((SECONDS - t0)) s)"
      grep -E '^  FAIL' "$dir/$name.log" | head -n 20
      keep_and_stop "$name in iteration $i" "$dir/$name.log"
    fi
    pass=$((pass + 1))
    line="$line $name ok ($((SECONDS - t0)) s)"
  done
  say "$line"
  # A passing iteration's logs are not needed: keep the disk small over hundreds of runs.
  rm -rf "$dir"
done
say "$i iterations in $((SECONDS - start)) s, no failure"
echo "$pass passed, $fail failed"
