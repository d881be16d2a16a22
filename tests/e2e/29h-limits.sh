#!/bin/bash
# limits: the queue depths a real HCA has (mlx5's), reported and taken at their word
# (docs/reference/hardware.md, "Limits").
#   - ibv_devinfo -v on node 0 reports max_cqe 4194303, max_qp_wr 32768, max_srq_wr 32768,
#     max_cq 4096, max_mr 65535, max_pd 65536, max_srq 4096 and max_ah 2147483647;
#   - `pib-verbs-test limits` (tests/guest/pib_verbs_test/limits.c, where the checks are) between
#     node 0 (server) and node 1 (client): an SQ of max_qp_wr SENDs into an SRQ of max_srq_wr
#     receives, every message once; min(max_ah, 4096) AHs; one past each limit refused; then the
#     server fills a CQ of max_cqe CQEs (128 MiB of ring in the process) from RQs of max_qp_wr
#     receives flushed to it, reads every one back in order, and takes the ring past its end.
#     Both must exit 0.
# e2e-checks: 19
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

verbs_setup
attrs=$(on 0 ibv_devinfo -d "$VERBS_DEV" -v)
for kv in max_cqe=4194303 max_qp_wr=32768 max_srq_wr=32768 max_cq=4096 max_mr=65535 \
          max_pd=65536 max_srq=4096 max_ah=2147483647; do
  check "ibv_devinfo: ${kv%=*} ${kv#*=} (got $(field "$attrs" "${kv%=*}"))" \
    test "$(field "$attrs" "${kv%=*}")" = "${kv#*=}"
done
verbs_pair limits
verbs_no_splats
finish
