#!/bin/bash
# rereg: ibv_rereg_mr keeps the MR's keys and changes what they grant.  A peer's RDMA WRITE
# through the same rkey lands on page A; after access without REMOTE_WRITE it fails
# (REM_ACCESS_ERR) and memory is unchanged; after a translation to page B it lands on B and a
# WRITE to A fails; with the MR in another PD it fails, with the PD back it lands.
# Runs `pib-verbs-test rereg` (tests/guest/pib_verbs_test/memory.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair rereg
verbs_loopback rereg 1
verbs_no_splats
finish
