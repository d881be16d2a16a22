#!/bin/bash
# snapshot-switched: 76-snapshot's fabric snapshot with a pib switch between the two guests
# (`pibvm up --nodes 2 --switches 1`): the switch's QEMU is saved and loaded with the guests'
# (its tables, its ports' state and counters, its cables' tokens: pib-switch-vmstate.c), and
# after each load its ports are Active and never went down, as the guests' (snapshot.sh).
# Then, in the same fabric, a live migration of node 1 (`pibvm migrate 1`) in the middle of
# another `ib_write_bw -D 20`: the switch port holds its state for the moved HCA (include/
# pib_link.h, "Moving"), the transfer completes, and the same checks hold after the move.
# Last, a live migration of the switch itself (`pibvm migrate sw0`) in the middle of a third
# `ib_write_bw -D 20`: its ports tell both guests' ports it may move, so those hold their state
# while its cables are down; the moved switch's ports hold theirs until the same guests greet
# the new cables (pib-switch-vmstate.c); the same checks hold after the move.
# e2e-checks: 80
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"
source "$(dirname "$0")/snapshot.sh"

SNAPSHOT_SWITCH=$("$PIBVM" guid switch 0)
SNAPSHOT_SWITCH=${SNAPSHOT_SWITCH#0x}    # (as ibswitches lists it: sw_lid)
snapshot_run vm-snapshot-switched --nodes 2 --switches 1

snap_start_bw "node 1's move"
check "pibvm migrate 1 (ib_write_bw running)" "$PIBVM" migrate 1
snap_after "run across node 1's move"

snap_start_bw "the switch's move"
check "pibvm migrate sw0 (ib_write_bw running)" "$PIBVM" migrate sw0
snap_after "run across the switch's move"
finish
