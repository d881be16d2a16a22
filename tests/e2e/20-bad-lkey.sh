#!/bin/bash
# bad-lkey: a SEND whose SGE has a bad lkey (key byte flipped; a deregistered MR's key) completes
# with LOC_PROT_ERR, the QP is in ERR, and a WR posted after that is flushed (WR_FLUSH_ERR).
# Runs `pib-verbs-test bad-lkey` (tests/guest/pib_verbs_test/rc_errors.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair bad-lkey
verbs_loopback bad-lkey 1
verbs_no_splats
finish
