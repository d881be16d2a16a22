#!/bin/bash
# Fuzz the pib device model.  Three targets:
#
#   link   tests/fuzz/pib-link-fuzz.c: libFuzzer on what a peer can send over the link (framing,
#          packet parser, responder, completer) interleaved with driver actions, built from the
#          model's sources with ASan + UBSan (tests/fuzz/build.sh).
#   mmio   QEMU's own generic-fuzz target (MMIO writes to the device's BARs, guest memory the
#          device reads by DMA chosen by the fuzzer) in a QEMU built with clang, ASan and UBSan
#          (tests/fuzz/build-qemu-fuzz.sh; its first build takes ~20-40 minutes).
#   vmstate the device's section of a migration stream: a saved stream with seeded random
#          changes, each loaded by a new QEMU (the stack's own build) that must refuse it (exit
#          status 1) or run it and quit cleanly (tests/qtest/pib-migration-test.c,
#          /pib/migration/mutate).
#
# Usage:
#   run.sh [--seconds N]   campaign of N seconds in total (default 600; FUZZ_SECONDS too): builds
#                          both targets, replays the regressions, fuzzes (link 2/3 of the time,
#                          mmio 1/3), prints executions and coverage per target.  The corpora
#                          persist in $PIB_CACHE/fuzz/.  New crashes are saved as hex files in
#                          tests/fuzz/regressions/<target>/ and make the run fail.
#   run.sh --short         for `make test`: bounded by counts, deterministic: replays the regressions
#                          and the seed corpora (link: with every trace point formatted), checks
#                          that the link oracle catches a planted bug, then fuzzes link for a
#                          fixed number of runs from a fixed seed.  mmio is replayed only, and
#                          only if its QEMU is already built (else it is counted as skipped).
#                          vmstate: FUZZ_VMSTATE_RUNS streams (300) from a fixed seed.
#                          Exits non-zero on any crash or sanitizer report.
#
# The last line is "N passed, N failed, N skipped" (one test per step).
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
OUT=$TOP/build/fuzz
REG=$TOP/tests/fuzz/regressions
QFUZZ=$CACHE/build/qemu-fuzz/qemu-fuzz-x86_64
short=0
total=${FUZZ_SECONDS:-600}
while [ $# -gt 0 ]; do
  case $1 in
    --short) short=1 ;;
    --seconds) total=$2; shift ;;
    --seconds=*) total=${1#*=} ;;
    *) echo "usage: $0 [--seconds N] [--short]" >&2; exit 2 ;;
  esac
  shift
done

pass=0 fail=0 skip=0
failed=()
ok() { pass=$((pass + 1)); echo "PASS $*"; }
skipped() { skip=$((skip + 1)); echo "SKIP $*"; }
bad() { fail=$((fail + 1)); failed+=("$1"); echo "FAIL $*"; }
say() { printf '[fuzz] %s\n' "$*"; }

# Regressions are kept as hex text ('#' lines are comments): readable in a diff.
hex2bin() { python3 -c '
import sys, binascii
txt = "".join(l.strip() for l in open(sys.argv[1]) if not l.lstrip().startswith("#"))
open(sys.argv[2], "wb").write(binascii.unhexlify(txt))' "$1" "$2"; }
bin2hex() { python3 -c '
import sys, binascii
d = open(sys.argv[1], "rb").read()
h = binascii.hexlify(d).decode()
with open(sys.argv[2], "w") as f:
    f.write("# " + sys.argv[3] + "\n")
    for i in range(0, len(h), 64):
        f.write(h[i:i + 64] + "\n")' "$1" "$2" "$3"; }

# Keep what libFuzzer left in ART as new regressions of target T; returns 1 if there were any.
collect_crashes() {
  local t=$1 art=$2 f name found=0
  mkdir -p "$REG/$t"
  for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    bin2hex "$f" "$REG/$t/$name.hex" "found by tests/fuzz/run.sh ($t) on $(date -u +%F); see its log"
    say "new regression: tests/fuzz/regressions/$t/$name.hex"
    found=1
  done
  return $found
}

# libFuzzer's closing statistics, on one line.
stats() {
  awk '/^stat::number_of_executed_units/ {e = $2} /^stat::average_exec_per_sec/ {r = $2}
       /^stat::new_units_added/ {n = $2}
       /(DONE|INITED|pulse|NEW|REDUCE) +cov:/ {
         for (i = 1; i <= NF; i++) { if ($i == "cov:") c = $(i + 1); if ($i == "ft:") f = $(i + 1);
                                     if ($i == "corp:") k = $(i + 1) } }
       END { printf "%s executions, %s exec/s, %s new inputs; cov %s edges, ft %s features, corpus %s\n",
                    e, r, n, c, f, k }' "$1"
}

LOGS=$TOP/build/fuzz-logs
mkdir -p "$LOGS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# ---- build ------------------------------------------------------------------------------------
say "building the link fuzzer"
if bash "$TOP/tests/fuzz/build.sh" > "$LOGS/build-link.log" 2>&1; then
  ok "build link fuzzer"
else
  tail -30 "$LOGS/build-link.log"; bad build-link "(see $LOGS/build-link.log)"
  echo "$pass passed, $fail failed"; exit 1
fi
LINK=$OUT/pib-link-fuzz
rm -rf "$OUT/seeds"
PIB_FUZZ_GEN=$OUT/seeds "$LINK" > "$LOGS/seeds.log" 2>&1 || { cat "$LOGS/seeds.log"; bad seeds; }

have_mmio=0
if [ $short = 0 ]; then
  say "building QEMU's fuzzer with the device (first time: ~20-40 minutes)"
  if bash "$TOP/tests/fuzz/build-qemu-fuzz.sh" > "$LOGS/build-mmio.log" 2>&1; then
    ok "build mmio fuzzer"; have_mmio=1
  else
    tail -20 "$LOGS/build-mmio.log"; bad build-mmio "(see $LOGS/build-mmio.log)"
  fi
elif [ -x "$QFUZZ" ]; then
  have_mmio=1
fi

# ---- link: regressions and seeds, every trace point formatted ----------------------------------
replay_dir=$(mktemp -d)
trap 'rm -rf "$replay_dir"' EXIT
mkdir -p "$replay_dir/link" "$replay_dir/mmio"
for h in "$REG"/link/*.hex; do [ -f "$h" ] && hex2bin "$h" "$replay_dir/link/$(basename "$h" .hex)"; done
n=$(ls "$replay_dir/link" | wc -l)
say "link: replaying $n regressions and $(ls "$OUT/seeds" | wc -l) seeds"
if PIB_FUZZ_TRACE=1 timeout 300 "$LINK" -runs=0 "$replay_dir/link" "$OUT/seeds" \
     > "$LOGS/link-replay.log" 2>&1; then
  ok "link regressions and seeds ($n regressions)"
else
  grep -m1 -A25 -E 'ERROR|BUG|runtime error' "$LOGS/link-replay.log"
  bad link-replay "(see $LOGS/link-replay.log)"
fi

# The oracle is live: with a planted bug (a writable MR on driver pages), a seed that receives
# into it must be reported.
if PIB_FUZZ_SELFTEST=1 timeout 60 "$LINK" -runs=0 "$OUT/seeds/ud-recv-prot" \
     > "$LOGS/link-selftest.log" 2>&1; then
  bad link-selftest "(the planted bug went unnoticed; see $LOGS/link-selftest.log)"
elif grep -q 'BUG: device DMA write' "$LOGS/link-selftest.log"; then
  ok "link oracle self-test (planted bug reported)"
else
  bad link-selftest "(failed otherwise; see $LOGS/link-selftest.log)"
fi

# ---- link: fuzz --------------------------------------------------------------------------------
art=$OUT/artifacts-link
rm -rf "$art"; mkdir -p "$art"
if [ $short = 1 ]; then
  corpus=$replay_dir/corpus-link
  mkdir -p "$corpus"
  flags=(-seed=1 -reload=0 -runs="${FUZZ_SHORT_RUNS:-20000}")
  # The run is bounded by its count of executions; the limit is a hang guard only, ten times
  # what the slowest machine seen needs (169 executions/s: 20,000 runs in about 2 minutes).
  tlimit=1200
else
  corpus=$CACHE/fuzz/corpus-link
  mkdir -p "$corpus"
  secs=$(( have_mmio ? total * 2 / 3 : total ))
  flags=(-max_total_time="$secs")
  tlimit=$((secs + 300))
fi
say "link: fuzzing (${flags[*]})"
timeout "$tlimit" "$LINK" "${flags[@]}" -max_len=8192 -timeout=20 -rss_limit_mb=3072 \
  -print_final_stats=1 -artifact_prefix="$art/" "$corpus" "$OUT/seeds" > "$LOGS/link-fuzz.log" 2>&1
rc=$?
echo "link: $(stats "$LOGS/link-fuzz.log")"
if collect_crashes link "$art" && [ $rc -eq 0 ]; then
  ok "link fuzz"
else
  grep -m1 -A30 -E 'ERROR|BUG|runtime error' "$LOGS/link-fuzz.log"
  bad link-fuzz "(exit $rc; see $LOGS/link-fuzz.log)"
fi

# Line coverage of the model reached by the corpus (campaign only: it needs another build).
if [ $short = 0 ] && bash "$TOP/tests/fuzz/build.sh" --coverage > "$LOGS/build-cov.log" 2>&1; then
  prof=$LOGS/link.profraw
  rm -f "$prof"
  LLVM_PROFILE_FILE=$prof "$TOP/build/fuzz-cov/pib-link-fuzz" -runs=0 "$corpus" "$OUT/seeds" \
    > /dev/null 2>&1
  if llvm-profdata-14 merge -sparse "$prof" -o "$LOGS/link.profdata" 2>/dev/null; then
    echo "link: line coverage of the model (llvm-cov):"
    llvm-cov-14 report "$TOP/build/fuzz-cov/pib-link-fuzz" -instr-profile="$LOGS/link.profdata" \
      -show-region-summary=false "$TOP"/build/fuzz-cov/src/hw/pib/*/*.c 2>/dev/null |
      awk '/\.c |TOTAL/ { n = split($1, p, "/");
           printf "  %-14s lines %7s of %5s, branches %7s of %5s\n", p[n], $7, $5, $10, $8 }'
  fi
fi

# ---- mmio: QEMU's generic-fuzz -------------------------------------------------------------------
if [ $have_mmio = 1 ]; then
  # The device alone on a q35, its BARs and MSI-X table fuzzed; DMA reads return fuzzer data.
  export QEMU_FUZZ_ARGS="-M q35 -nodefaults -L /usr/share/qemu -L /usr/share/seabios \
-device pib-hca,lid=1,node-guid=0x0002c903000abcd0"
  export QEMU_FUZZ_OBJECTS='pib*'
  rm -rf "$OUT/mmio-seeds"
  python3 "$TOP/tests/fuzz/mmio-seeds.py" "$OUT/mmio-seeds"
  for h in "$REG"/mmio/*.hex; do [ -f "$h" ] && hex2bin "$h" "$replay_dir/mmio/$(basename "$h" .hex)"; done
  n=$(ls "$replay_dir/mmio" | wc -l)
  say "mmio: replaying $n regressions and $(ls "$OUT/mmio-seeds" | wc -l) seeds"
  if timeout 300 "$QFUZZ" --fuzz-target=generic-fuzz -runs=0 "$replay_dir/mmio" "$OUT/mmio-seeds" \
       > "$LOGS/mmio-replay.log" 2>&1; then
    ok "mmio regressions and seeds ($n regressions)"
  else
    grep -m1 -A25 -E 'ERROR|runtime error' "$LOGS/mmio-replay.log"
    bad mmio-replay "(see $LOGS/mmio-replay.log)"
  fi
  # --short replays only: generic-fuzz forks a QEMU per input, and QEMU's own timers make the
  # coverage it feeds back (so the inputs libFuzzer derives) vary from run to run.
  if [ $short = 0 ]; then
    art=$OUT/artifacts-mmio
    rm -rf "$art"; mkdir -p "$art"
    corpus=$CACHE/fuzz/corpus-mmio
    mkdir -p "$corpus"
    secs=$((total / 3))
    say "mmio: fuzzing for $secs s"
    timeout $((secs + 300)) "$QFUZZ" --fuzz-target=generic-fuzz -max_total_time="$secs" \
      -max_len=4096 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$art/" \
      "$corpus" "$OUT/mmio-seeds" > "$LOGS/mmio-fuzz.log" 2>&1
    rc=$?
    echo "mmio: $(stats "$LOGS/mmio-fuzz.log")"
    if collect_crashes mmio "$art" && [ $rc -eq 0 ]; then
      ok "mmio fuzz"
    else
      grep -m1 -A30 -E 'ERROR|runtime error' "$LOGS/mmio-fuzz.log"
      bad mmio-fuzz "(exit $rc; see $LOGS/mmio-fuzz.log)"
    fi
  fi
else
  # Counted in the closing line, so that a run without it cannot pass for a run with it.
  skipped "mmio regressions and seeds: $QFUZZ is not built (tests/fuzz/build-qemu-fuzz.sh, or make fuzz)"
fi

# ---- vmstate: mutated migration streams ----------------------------------------------------------
# Counted, not timed: each stream is one QEMU start and load (about 0.1 s here).  The campaign
# takes a new seed each time; --short always the same one.
if [ $short = 1 ]; then
  vruns=${FUZZ_VMSTATE_RUNS:-300}; vseed=0x5eed0001
else
  vruns=${FUZZ_VMSTATE_RUNS:-$((total * 5))}; vseed=$(date +%s)
fi
say "vmstate: $vruns mutated streams, seed $vseed"
if PIB_MIG_MUTATIONS=$vruns PIB_MIG_SEED=$vseed QTEST_QEMU_BINARY=$TOP/build/qemu-system-x86_64 \
     timeout $((vruns + 600)) "$TOP/build/qtest/pib-migration-test" --tap -p /x86_64/pib/migration/mutate \
     > "$LOGS/vmstate-fuzz.log" 2>&1; then
  grep -m1 'mutated streams' "$LOGS/vmstate-fuzz.log" | sed 's/^# /vmstate: /'
  ok "vmstate fuzz ($vruns streams, seed $vseed)"
else
  grep -m1 -B2 -A10 -E 'ERROR|Bail out' "$LOGS/vmstate-fuzz.log"
  bad vmstate-fuzz "(seed $vseed; the stream that failed is left as /tmp/pib-qtest-*.stream.mut; see $LOGS/vmstate-fuzz.log)"
fi

[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
