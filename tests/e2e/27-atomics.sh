#!/bin/bash
# atomics: FETCH_ADD and CMP_SWAP on a remote counter return the old values and leave the
# right result; an atomic to a misaligned address fails with REM_INV_REQ_ERR.
# Runs `pib-verbs-test atomics` (tests/guest/pib_verbs_test/rc_data.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair atomics
verbs_loopback atomics 1
verbs_no_splats
finish
