#!/bin/bash
# rdma-rw: RDMA WRITE gathering 3 SGEs and RDMA READ scattering into 2, at odd addresses and
# lengths; the bytes arrive and nothing around them changes.
# Runs `pib-verbs-test rdma-rw` (tests/guest/pib_verbs_test/rc_data.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair rdma-rw
verbs_loopback rdma-rw 1
verbs_no_splats
finish
