#!/bin/bash
# cq-moderation: completion event moderation (ibv_modify_cq).  The device reports its limits in
# ibv_query_device_ex (cq_mod_caps: 65535 completions, 65535 us on pib), takes values up to them and
# period 0, and refuses an unknown attr_mask bit.  Events on a receive CQ are timed against the
# device clock (completion timestamps, ibv_query_rt_values_ex): with a period alone, the event
# for one SEND comes no sooner than the period after its CQE; with a count and the longest
# period, the event for SENDs split by a pause waits for the count or the period.  Bursts of 64
# SENDs with and without moderation arrive whole, and the events they took are printed.
# Runs `pib-verbs-test cq-moderation` (tests/guest/pib_verbs_test/cq_timing.c, where the checks are)
# between node 0 (server) and node 1 (client), then in loopback on node 1; every run must exit 0.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
verbs_pair cq-moderation
verbs_loopback cq-moderation 1
verbs_no_splats
finish
