#!/bin/bash
# flush-on-destroy: moving a QP to ERR flushes its outstanding receives and SENDs, in order,
# with WR_FLUSH_ERR; the QP and its CQs are then destroyed.
# Runs `pib-verbs-test flush-on-destroy` (tests/guest/pib_verbs_test/rc_errors.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair flush-on-destroy
verbs_loopback flush-on-destroy 1
verbs_no_splats
finish
