#!/bin/bash
# cq-overflow: more completions than a CQ holds raise IBV_EVENT_CQ_ERR on that CQ (SEND
# completions on a send CQ, flushed receives on a receive CQ).
# Runs `pib-verbs-test cq-overflow` (tests/guest/pib_verbs_test/rc_errors.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair cq-overflow
verbs_loopback cq-overflow 1
verbs_no_splats
finish
