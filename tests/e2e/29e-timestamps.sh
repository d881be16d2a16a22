#!/bin/bash
# timestamps: the device clock and completion timestamps.  ibv_query_rt_values_ex reads the
# clock (from the UAR page, no system call): it never goes back and keeps time over a sleep.
# Then a ping-pong of SENDs on ibv_cq_ex CQs with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: every
# completion's timestamp lies between the clock reads before its work could start and after it
# was polled, and never goes back on its CQ; its wall-clock timestamp (the machine's real time)
# was taken with it (wall clock minus device clock steady within 10 ms) and is near the guest's
# CLOCK_REALTIME; every message's bytes arrive as sent.
# Runs `pib-verbs-test timestamps` (tests/guest/pib_verbs_test/cq_timing.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair timestamps
verbs_loopback timestamps 1
verbs_no_splats
finish
