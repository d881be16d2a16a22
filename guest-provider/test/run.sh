#!/bin/bash
# Build and run the provider's host-side unit test (provider-test.c); `make test` runs it
# through tests/run.sh.
#
#   guest-provider/test/run.sh
#
# The test links the provider's own cq.c, qp.c, qp_ex.c, srq.c, verbs.c and wq.c with a fake
# kernel and a fake device, against the libibverbs of the rdma-core build that
# guest-provider/build.sh makes (run first, incrementally), with the same warnings and -Werror as
# the provider.
#
# Everything of ours comes from this checkout, not from the rdma-core tree in the cache (which
# another checkout may overlay at any time): the sources, the shared headers, and the kernel
# ABI wrapper that rdma-core's make_abi_structs.py makes from include/pib-abi.h.  Only
# rdma-core's own headers and libibverbs come from the cache.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bash "$ROOT/guest-provider/build.sh" >/dev/null
SRC=$(bash "$ROOT/mk/fetch.sh" rdma-core)
BLD=$(readlink -f "$ROOT/build/rdma-core-build")     # made by guest-provider/build.sh
OUT=$ROOT/build/provider-test
GEN=$ROOT/build/provider-test.include

mkdir -p "$GEN/kernel-abi"
python3 "$SRC/buildlib/make_abi_structs.py" "$ROOT/include/pib-abi.h" "$GEN/kernel-abi/pib-abi.h"
P=$ROOT/guest-provider
cc -std=gnu11 -O2 -g -Wall -Wextra -Wno-sign-compare -Wno-unused-parameter -Wshadow \
   -Wmissing-prototypes -Wstrict-prototypes -Werror \
   -I"$GEN" -I"$P" -I"$ROOT/include" -I"$BLD/include" \
   -o "$OUT" "$P/test/provider-test.c" "$P/cq.c" "$P/qp.c" "$P/qp_ex.c" "$P/srq.c" "$P/verbs.c" \
   "$P/wq.c" \
   -L"$BLD/lib" -Wl,-rpath,"$BLD/lib" -libverbs -lpthread
"$OUT"
