#!/bin/bash
# Build the link fuzzer: the device model's sources (qemu-hw/*/*.c, as listed in the parts'
# meson.build) compiled with clang, libFuzzer, ASan and UBSan against QEMU's headers, linked with
# the stand-in for QEMU in tests/fuzz/qemu-stubs.c and the harness: tests/fuzz/pib-link-fuzz.c (the
# entry points, the input's decoders, the seeds) and tests/fuzz/fuzz-harness.c (the fixture).
# The sources are compiled from $OUT/src/hw/pib/, laid out as in QEMU's tree (mk/qemu-overlay.sh,
# pib_stage), where their "../include/" finds the contract.
#
# Needs: clang, libclang-rt-14-dev (libFuzzer and sanitizer runtimes), glib; the QEMU source tree
# (mk/fetch.sh qemu) and its configured build directory (qemu-hw/build.sh ran once: config-host.h
# and the generated QAPI headers come from there).
# Output: $OUT/fuzz/pib-link-fuzz  (OUT defaults to build/ in the repo)
#
#   build.sh             the fuzzer (libFuzzer + ASan + UBSan)
#   build.sh --coverage  $OUT/fuzz-cov/pib-link-fuzz: no sanitizers, clang source-based coverage
#                        (-fprofile-instr-generate), to measure which lines a corpus reaches
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
MODE=fuzz
[ "${1:-}" = --coverage ] && MODE=cov
OUT=${OUT:-$TOP/build}/$([ $MODE = cov ] && echo fuzz-cov || echo fuzz)
SRC=$("$TOP/mk/fetch.sh" qemu)
CC=${CC_FUZZ:-clang}
say() { printf '[fuzz] %s\n' "$*" >&2; }
source "$TOP/mk/qemu-overlay.sh"
QBLD=$(pib_qemu_build_dir "$SRC")        # qemu-hw/build.sh's configured tree

command -v "$CC" >/dev/null || { say "$CC missing: apt-get install clang libclang-rt-14-dev"; exit 1; }
[ -f "$QBLD/config-host.h" ] || { say "no configured QEMU build in $QBLD: run qemu-hw/build.sh"; exit 1; }
mkdir -p "$OUT/gen/trace" "$OUT/obj"

# Trace points from our trace-events, log backend (enabled at run time by the harness).
python3 "$SRC/scripts/tracetool.py" --backends=log --group=hw_pib --format=h \
  "$TOP/qemu-hw/trace-events" "$OUT/gen/trace/trace-hw_pib.h.tmp"
python3 "$SRC/scripts/tracetool.py" --backends=log --group=hw_pib --format=c \
  "$TOP/qemu-hw/trace-events" "$OUT/gen/trace/trace-hw_pib.c.tmp"
for f in trace-hw_pib.h trace-hw_pib.c; do
  cmp -s "$OUT/gen/trace/$f.tmp" "$OUT/gen/trace/$f" || mv "$OUT/gen/trace/$f.tmp" "$OUT/gen/trace/$f"
  rm -f "$OUT/gen/trace/$f.tmp"
done

# The model as QEMU builds it, and its own source lists, so that a new file there is fuzzed too.
MODEL_DIR=$OUT/src/hw/pib
pib_stage "$TOP" "$MODEL_DIR"
MODEL=()
for part in fabric hca switch; do
  for f in $(grep -o "'pib[a-z-]*\.c'" "$TOP/qemu-hw/$part/meson.build" | tr -d "'"); do
    MODEL+=("$part/$f")
  done
done
[ ${#MODEL[@]} -gt 0 ] || { say "no sources found in qemu-hw/*/meson.build"; exit 1; }

# QEMU's flags that change semantics (-fwrapv: signed overflow is defined in QEMU), its include
# order (generated headers first; "include/pib_hw.h" resolves from the repo's top), glib.
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
COV=-fsanitize=fuzzer-no-link
if [ $MODE = cov ]; then
  SAN=""
  COV="-fprofile-instr-generate -fcoverage-mapping"
fi
CFLAGS=(-std=gnu11 -O1 -g $SAN -fwrapv -fno-strict-aliasing -fno-common
        -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE -DPIB_FUZZ
        -Wall -Wno-unused-function -Wno-initializer-overrides -Wno-gnu-variable-sized-type-not-at-end
        -iquote "$OUT/gen" -iquote "$OUT/src" -iquote "$TOP" -iquote "$QBLD" -iquote "$SRC" -iquote "$SRC/include"
        -iquote "$TOP/tests/fuzz" -isystem "$SRC/linux-headers" -isystem "$QBLD/linux-headers"
        $(pkg-config --cflags glib-2.0))
LIBS=$(pkg-config --libs glib-2.0)

# Coverage instrumentation (what libFuzzer's "cov:" counts and follows) only for the model: the
# stand-in and the harness are sanitized but not instrumented.
objs=()
compile() {   # compile SRC OBJ [extra flags], only when the source or a header changed
  local src=$1 obj=$2; shift 2
  if [ ! -f "$obj" ] || [ "$0" -nt "$obj" ] || [ -n "$(find "$src" "$MODEL_DIR" \
        "$TOP/tests/fuzz" "$OUT/gen" -newer "$obj" -name '*.[ch]' -print -quit 2>/dev/null)" ]; then
    "$CC" "${CFLAGS[@]}" "$@" -c "$src" -o "$obj"
  fi
  objs+=("$obj")
}
for f in "${MODEL[@]}"; do compile "$MODEL_DIR/$f" "$OUT/obj/$(basename "${f%.c}").o" $COV; done
compile "$OUT/gen/trace/trace-hw_pib.c" "$OUT/obj/trace-hw_pib.o"
compile "$SRC/util/bitops.c" "$OUT/obj/bitops.o"           # QEMU's own find_next_bit & co.
compile "$SRC/util/bitmap.c" "$OUT/obj/bitmap.o"           # ... and bitmap_set & co.
compile "$TOP/tests/fuzz/qemu-stubs.c" "$OUT/obj/qemu-stubs.o"
compile "$TOP/tests/fuzz/fuzz-harness.c" "$OUT/obj/fuzz-harness.o"
compile "$TOP/tests/fuzz/pib-link-fuzz.c" "$OUT/obj/pib-link-fuzz.o"
"$CC" $SAN $([ $MODE = cov ] && echo -fprofile-instr-generate) -fsanitize=fuzzer "${objs[@]}" \
  $LIBS -o "$OUT/pib-link-fuzz"
say "ok: $OUT/pib-link-fuzz"
