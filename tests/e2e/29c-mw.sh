#!/bin/bash
# mw: memory windows.  Type 2: RDMA WRITE through a bound window lands; after LOCAL_INV, or the
# peer's SEND_WITH_INV (IBV_WC_WITH_INV, invalidated_rkey), the rkey fails with REM_ACCESS_ERR
# and the memory is unchanged; WRITEs outside the window or across its end fail too.  Type 1:
# ibv_bind_mw, WRITE, unbind with length 0, WRITE fails.
# Runs `pib-verbs-test mw` (tests/guest/pib_verbs_test/memory.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair mw
verbs_loopback mw 1
verbs_no_splats
finish
