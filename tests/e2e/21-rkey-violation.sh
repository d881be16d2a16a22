#!/bin/bash
# rkey-violation: RDMA WRITEs with a wrong rkey, past the end of the MR, and to an MR without
# REMOTE_WRITE complete with REM_ACCESS_ERR and leave the target's memory unchanged.
# Runs `pib-verbs-test rkey-violation` (tests/guest/pib_verbs_test/rc_errors.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair rkey-violation
verbs_loopback rkey-violation 1
verbs_no_splats
finish
