#!/bin/bash
# Build pib.ko for the stack's guest kernel (Debian's 6.1, or 6.12 with PIB_STACK=trixie;
# headers unpacked by mk/fetch.sh) and put it in build/pib.ko (build/trixie/pib.ko).
# mk/kbuild.sh does the work: kbuild in a per-stack shadow directory, warnings are errors.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$TOP/mk/kbuild.sh" guest-driver pib
