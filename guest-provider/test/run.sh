#!/bin/bash
# Build and run the provider's host-side unit test (provider-test.c).
#
#   guest-provider/test/run.sh
#
# The test links the provider's own cq.c, qp.c, srq.c and verbs.c with a fake kernel and a fake
# device, against the libibverbs of the rdma-core build that guest-provider/build.sh makes
# (run first, incrementally), with the same warnings and -Werror as the provider.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
bash "$ROOT/guest-provider/build.sh" >/dev/null
SRC=$(bash "$ROOT/mk/fetch.sh" rdma-core)
BLD=$CACHE/build/$(basename "$SRC")
OUT=$ROOT/build/provider-test

# The sources as build.sh placed them in providers/pib (with the shared headers beside them).
P=$SRC/providers/pib
cc -std=gnu11 -O2 -g -Wall -Wextra -Wno-sign-compare -Wno-unused-parameter -Wshadow \
   -Wmissing-prototypes -Wstrict-prototypes -Werror \
   -I"$BLD/include" -I"$P" \
   -o "$OUT" "$ROOT/guest-provider/test/provider-test.c" "$P/cq.c" "$P/qp.c" "$P/srq.c" "$P/verbs.c" \
   -L"$BLD/lib" -Wl,-rpath,"$BLD/lib" -libverbs -lpthread
"$OUT"
