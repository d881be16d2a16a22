#!/bin/bash
# xrc: one XRC initiator QP reaches, through one XRC target QP, the XRC SRQs of the target's
# domain that each work request names: SENDs (the legacy and the ibv_qp_ex way) land in the named
# SRQ's buffer and complete on its CQ naming the target QP; RDMA WRITE, READ and FETCH_ADD pass
# the keys of that SRQ's PD; a SEND naming an SRQ of another domain completes with
# REM_INV_RD_REQ_ERR and ends the connection, landing nowhere.
# Runs `pib-verbs-test xrc` (tests/guest/pib_verbs_test/srq_xrc.c, where the checks are) between
# node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair xrc
verbs_loopback xrc 1
verbs_no_splats
finish
