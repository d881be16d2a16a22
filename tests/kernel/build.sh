#!/bin/bash
# Build the kernel-side test module (pib_ktest.ko: an in-kernel ULP on pib's kernel data
# path) for the stack's guest kernel, into build/pib_ktest.ko (build/trixie/ on trixie).  The
# image builder puts <out>/pib_*.ko into the guest's /lib/modules/<abi>/extra.  mk/kbuild.sh
# does the work; a compiler warning fails the build.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$TOP/mk/kbuild.sh" tests/kernel pib_ktest
