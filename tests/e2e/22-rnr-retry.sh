#!/bin/bash
# rnr-retry: a SEND that arrives before the receive is posted is retried after RNR NAKs and
# delivered intact (rnr_retry 7); with rnr_retry 0 it fails with RNR_RETRY_EXC_ERR.
# Runs `pib-verbs-test rnr-retry` (tests/guest/pib_verbs_test/rc_errors.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair rnr-retry
verbs_loopback rnr-retry 1
verbs_no_splats
finish
