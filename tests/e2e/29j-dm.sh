#!/bin/bash
# dm: device memory.  Each side allocates a DM (ibv_alloc_dm) and registers it (ibv_reg_dm_mr,
# zero-based); the client RDMA WRITEs from its DM into the server's, READs the server's into
# its own, FETCH_ADDs a u64 of the server's DM, and WRITEs past the server's DM MR
# (REM_ACCESS_ERR).  After each round the server reads its DM back (ibv_memcpy_from_dm) and
# finds exactly the bytes it expects; unaligned and out-of-range copies, and a DM over
# max_dm_size, are refused.
# Runs `pib-verbs-test dm` (tests/guest/pib_verbs_test/dm.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair dm
verbs_loopback dm 1
verbs_no_splats
finish
