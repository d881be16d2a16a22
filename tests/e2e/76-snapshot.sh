#!/bin/bash
# snapshot: a fabric snapshot (`pibvm snapshot save`, every node saved at one moment) taken in
# the middle of `ib_write_bw -D 20` between two guests cabled back to back (opensm on node 0; its
# own run directory, as the 7x tests), each with a 16 MiB disk (`--disk`), then loaded twice
# (`pibvm snapshot load`); what is checked is snapshot.sh's, the disk's too (the same with a
# switch and no disk: 78-snapshot-switched).
# e2e-checks: 44
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"
source "$(dirname "$0")/snapshot.sh"

SNAPSHOT_DISK=1
snapshot_run vm-snapshot --nodes 2 --disk 16
finish
