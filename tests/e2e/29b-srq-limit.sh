#!/bin/bash
# srq-limit: two RC QPs share an SRQ armed with a limit; the SENDs that take it below the limit
# raise IBV_EVENT_SRQ_LIMIT_REACHED once (not before), ibv_query_srq then says srq_limit 0, and
# every message arrives intact through its QP.
# Runs `pib-verbs-test srq-limit` (tests/guest/pib_verbs_test/srq_xrc.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair srq-limit
verbs_loopback srq-limit 1
verbs_no_splats
finish
