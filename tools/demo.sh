#!/bin/bash
# `make demo`: boot two guests linked by a socket and show the pib HCA in each.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIBVM_DIR=${PIBVM_DIR:-$PWD/build/vm}
tools/pibvm down >/dev/null 2>&1 || true
trap 'tools/pibvm down >/dev/null 2>&1 || true' EXIT
tools/pibvm up --nodes 2
for n in 0 1; do
  echo "=== node $n: ibv_devinfo"
  tools/pibvm exec "$n" -- ibv_devinfo -d pib_0
done
