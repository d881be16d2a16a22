#!/bin/bash
# Build the host-side hostile link peer: tests/hostile/*.c (pib_hostile.c and hostile_*.c, which
# share hostile.h) -> build/hostile/pib-hostile.
# It includes the hardware contract (include/pib_link.h, include/pib_hw.h) like every other
# layer, and the PASS/FAIL reporter of the test programs (tests/common/pib_report.h); it needs
# nothing but a C compiler.  Incremental: rebuilt only when the source, the
# headers or this script are newer than the binary (PIB_FORCE=1 rebuilds anyway).
#
# Environment: CC (default gcc).
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
SRCS=("$TOP"/tests/hostile/*.c)       # pib_hostile.c and the hostile_*.c it is split into
OUT=$TOP/build/hostile
BIN=$OUT/pib-hostile
CC=${CC:-gcc}

mkdir -p "$OUT"
stale=${PIB_FORCE:-0}
[ -x "$BIN" ] || stale=1
for f in "${SRCS[@]}" "$TOP"/tests/hostile/hostile.h "$0" "$TOP"/include/pib_link.h "$TOP"/include/pib_hw.h "$TOP"/include/pib_mad.h \
         "$TOP"/tests/common/*.h; do
  [ "$f" -nt "$BIN" ] && stale=1
done
if [ "$stale" = 0 ]; then
  printf '[hostile] up to date: build/hostile/pib-hostile\n' >&2
  exit 0
fi
printf '[hostile] cc pib_hostile.c hostile_*.c -> build/hostile/pib-hostile\n' >&2
"$CC" -O2 -g -Wall -Wextra -Werror -std=gnu11 -I"$TOP/include" -I"$TOP/tests/common" -o "$BIN.tmp" "${SRCS[@]}"
mv "$BIN.tmp" "$BIN"
