#!/bin/bash
# fa-counter: two nodes doing FETCH_AND_ADD +1 on one counter 10,000 times each leave it at
# exactly 20,000: the device's atomics are atomic across all its QPs.
# Runs `pib-fa-counter` (tests/guest/pib_fa_counter.c, where the checks are): the server on
# node 0 holds the counter and hammers it through its own port (an RC loopback QP pair), while
# the client on node 1 hammers it over the link, at the same time.  Both must exit 0, the
# server must report the final count, and neither kernel may splat.
# PIB_DEV=rxe0 runs it over Soft-RoCE instead of pib; PIB_FA_ITERS changes the 10,000.
# e2e-checks: 14
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/guest/verbs-e2e.sh"

iters=${PIB_FA_ITERS:-10000}
port=18600

verbs_setup
for n in 0 1; do
  check "node $n: pib-fa-counter is installed" on $n sh -c 'command -v pib-fa-counter >/dev/null'
done

start=$SECONDS
pair fa-counter $port pib-fa-counter -d "$VERBS_DEV" -p $port -n "$iters" server -- \
  pib-fa-counter -d "$VERBS_DEV" -p $port client node0
echo "--- fa-counter: $((SECONDS - start)) s wall"

total=$((2 * iters))
check "server: the final counter is $total" \
  grep -qE "^PASS +fa-counter/server: final counter $total " <<<"$pair_out_server"
check "server: the old values of both nodes are exactly 0..$((total - 1))" \
  grep -qE "^PASS +fa-counter/server: the $total old values of both requesters are exactly" \
  <<<"$pair_out_server"
check "client: the server's verdict reached it" \
  grep -qE "^PASS +fa-counter/client: the server's checks passed" <<<"$pair_out_client"
no_fail_lines() { ! grep -q '^FAIL' <<<"$pair_out_server"$'\n'"$pair_out_client"; }
check "no FAIL line on either node" no_fail_lines
verbs_no_splats
finish
