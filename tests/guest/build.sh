#!/bin/bash
# Build the guest-side test programs into build/guest-tests/<name>, the name being the source's
# with '_' turned into '-':
#   - every tests/guest/*.c is a program of one file (pib_misuse_test.c -> pib-misuse-test);
#   - every folder tests/guest/*/ is a program of several files: its *.c linked together, its
#     *.h shared by them (pib_verbs_test/ -> pib-verbs-test).
# The image builder copies build/guest-tests/* into the guest's /usr/bin.
#
# They are plain libibverbs programs (pib-guidinfo: libibmad's SMPs), compiled against the rdma-core 56.1 that the guest runs
# (build/rdma-root, a DESTDIR install made by guest-provider/build.sh), never against the host's.
# Both stacks (mk/stack.sh) boot the same programs: the uverbs ABI is stable across kernels.
#
# They report through tests/common/pib_report.h, the PASS/FAIL lines the e2e scripts read.
#
# Incremental, make-style: a program is rebuilt only when one of its sources (a folder's *.c and
# *.h), a tests/guest/*.h or tests/common/*.h, the verbs headers or this script are newer than
# the binary.  PIB_FORCE=1 rebuilds anyway.
#
# Environment: RDMA_ROOT (default build/rdma-root), CC (default gcc).
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$TOP/tests/guest
OUT=$TOP/build/guest-tests
RDMA_ROOT=${RDMA_ROOT:-$TOP/build/rdma-root}
LIBDIR=$RDMA_ROOT/usr/lib/x86_64-linux-gnu
INCDIR=$RDMA_ROOT/usr/include
CC=${CC:-gcc}
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror
        -std=gnu11 -pthread)

say() { printf '[guest-tests] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ -f "$LIBDIR/libibverbs.so" ] || die "no libibverbs at $LIBDIR (build the provider first)"
[ -f "$INCDIR/infiniband/verbs.h" ] || die "no verbs headers at $INCDIR"
# The kernel UAPI headers libc's lack (drm/, for vgem, the dma-buf exporter pib-misuse-test
# uses), from the guest kernel's headers and searched after the system's own.
KUAPI=$(ls -d "$(bash "$TOP/mk/fetch.sh" kernel)"/root/usr/src/linux-headers-*-common/include/uapi |
        head -n 1)
[ -f "$KUAPI/drm/drm.h" ] || die "no drm/drm.h in the guest kernel's headers ($KUAPI)"
mkdir -p "$OUT"

# Everything besides its own source that a program depends on.
deps=("$0" "$INCDIR/infiniband/verbs.h" "$TOP"/include/*.h)
for h in "$SRC"/*.h "$TOP"/tests/common/*.h; do [ -e "$h" ] && deps+=("$h"); done

built=0
for src in "$SRC"/*.c "$SRC"/*/; do
  [ -e "$src" ] || continue
  src=${src%/}
  name=$(basename "$src" .c)
  bin=$OUT/${name//_/-}
  if [ -d "$src" ]; then
    srcs=("$src"/*.c)
    own=("${srcs[@]}")
    for h in "$src"/*.h; do [ -e "$h" ] && own+=("$h"); done
  else
    srcs=("$src")
    own=("$src")
  fi
  stale=${PIB_FORCE:-0}
  [ -x "$bin" ] || stale=1
  for f in "${own[@]}" "${deps[@]}"; do [ "$f" -nt "$bin" ] && stale=1; done
  [ "$stale" = 0 ] && continue
  say "cc ${src#"$SRC"/}$([ -d "$src" ] && echo '/*.c') -> build/guest-tests/$(basename "$bin")"
  # -rpath-link: libibverbs' own dependencies (libnl) resolve from rdma-root first, then the host.
  "$CC" "${CFLAGS[@]}" -I"$INCDIR" -I"$TOP/include" -I"$TOP/tests/common" -I"$SRC" \
    -idirafter "$KUAPI" \
    -o "$bin.tmp" "${srcs[@]}" -L"$LIBDIR" -Wl,-rpath-link,"$LIBDIR" \
    -Wl,--as-needed -libverbs -libmad -libumad
  mv "$bin.tmp" "$bin"
  built=$((built + 1))
done
[ "$built" -gt 0 ] || say "up to date: build/guest-tests/"
