#!/bin/bash
# send-sizes: SEND/RECV of 0, 1, 4095, 4096, 4097, 64 KiB and 1 MiB at path MTU 256 and 4096,
# every byte checked; SEND with immediate carries IBV_WC_WITH_IMM and the value.
# Runs `pib-verbs-test send-sizes` (tests/guest/pib_verbs_test/rc_data.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair send-sizes
verbs_loopback send-sizes 1
verbs_no_splats
finish
