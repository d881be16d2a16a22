#!/bin/bash
# libfabric: an RDM endpoint over pib as a new user gets one, libfabric's defaults untouched.
# Debian 12's libfabric 1.17 (libfabric-bin: fi_info and fi_pingpong; Debian has no fabtests),
# its verbs;ofi_rxm provider: RDM emulated over verbs MSG endpoints, RC QPs that rdma_cm
# connects over IPoIB (node1-ib, 10.13.0.2).
#   - fi_info offers verbs;ofi_rxm RDM on pib_0;
#   - fi_pingpong -p "verbs;ofi_rxm" -e rdm -c (every buffer checked), server node 1, client
#     node 0, in msg and in tagged mode: both exit 0 and report 10 round trips of every size,
#     64 B to 1 MiB;
#   - a longer run of 64-byte round trips, during which node 1's fi_pingpong holds a CQ of more
#     than 65535 CQEs (rdma resource show cq): rxm's default MSG CQ, (tx size + rx size) times a
#     universe of 256, which pib refused (fi_enable: EINVAL) while its max_cqe was 65535
#     (docs/reference/hardware.md, "Limits").
# e2e-checks: 17
source "$(dirname "$0")/lib.sh"

FI=(-p "verbs;ofi_rxm" -e rdm)
FI_PORT=47592           # fi_pingpong's control port (-B), a TCP socket the server listens on
SERVER_IB=10.13.0.2

trap '"$PIBVM" ipoib down >/dev/null 2>&1' EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish
dmesg_mark 0
dmesg_mark 1
check "libfabric's defaults: no FI_ variable in the guests' environment" \
  sh -c "! { $PIBVM exec 0 -- env; $PIBVM exec 1 -- env; } | grep -q '^FI_'"
info=$(on 1 fi_info -p "verbs;ofi_rxm" -t FI_EP_RDM 2>&1)
echo "--- fi_info on node 1"; echo "$info"
check "fi_info: verbs;ofi_rxm offers an RDM endpoint on pib_0" \
  bash -c 'grep -q "provider: verbs;ofi_rxm" <<<"$1" && grep -q "domain: pib_0" <<<"$1" &&
           grep -q "type: FI_EP_RDM" <<<"$1"' _ "$info"

# all_sizes OUTPUT: fi_pingpong's table has a line "SIZE 10 =10 ..." for every size it tries.
all_sizes() {
  local s
  for s in 64 256 1k 4k 64k 1m; do
    awk -v s=$s '$1 == s && $2 == 10 && $3 == "=10" {f = 1} END {exit !f}' <<<"$1" || return 1
  done
}

for mode in msg tagged; do
  run_pair wait_listen 1 "fi_pingpong -m $mode" $FI_PORT \
    timeout 180 fi_pingpong "${FI[@]}" -c -m $mode -- \
    timeout 180 fi_pingpong "${FI[@]}" -c -m $mode $SERVER_IB
  check "fi_pingpong -m $mode: the server made 10 round trips of every size, 64 B to 1 MiB" \
    all_sizes "$pair_out_server"
  check "fi_pingpong -m $mode: so did the client" all_sizes "$pair_out_client"
done

# The CQ behind the RDM endpoint, looked at while 10000 round trips go on: the largest CQ a
# fi_pingpong process holds on node 1 (rdma resource show cq: "... cqe N ... comm fi_pingpong").
fi_cqe() {
  on 1 rdma resource show cq dev pib_0 2>/dev/null |
    awk '/comm fi_pingpong/ {for (i = 1; i < NF; i++) if ($i == "cqe") print $(i + 1)}' |
    sort -n | tail -n 1
}
slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 1 --timeout 300 -- timeout 280 fi_pingpong "${FI[@]}" -S 64 -I 10000 >"$slog" 2>&1 &
spid=$!
if wait_listen 1 $FI_PORT; then
  "$PIBVM" exec 0 --timeout 300 -- timeout 280 fi_pingpong "${FI[@]}" -S 64 -I 10000 $SERVER_IB \
    >"$clog" 2>&1 &
  cpid=$!
  # Until the RDM endpoint's CQ shows, while the client runs: the process opens smaller CQs of
  # its own on the way.
  cqe=0
  for ((i = 0; i < 150 && cqe <= 65535; i++)); do
    kill -0 $cpid 2>/dev/null || break
    c=$(fi_cqe)
    [ "${c:-0}" -gt "$cqe" ] && cqe=$c
    [ "$cqe" -gt 65535 ] || sleep 0.2
  done
  wait $cpid; crc=$?
else
  echo "the server did not listen on $FI_PORT" >"$clog"; crc=99 cqe=0
fi
wait $spid; src=$?
echo "--- 10000 round trips of 64 B: server (node 1)"; cat "$slog"
echo "--- client (node 0)"; cat "$clog"
check "10000 round trips: the server exits 0 (got $src)" test $src -eq 0
check "10000 round trips: the client exits 0 (got $crc)" test $crc -eq 0
check "10000 round trips: the client reports them all" \
  awk '$1 == 64 && $2 == "10k" && $3 == "=10k" {f = 1} END {exit !f}' "$clog"
check "the server's RDM endpoint holds a CQ of $cqe CQEs, more than the 65535 pib had" \
  test "$cqe" -gt 65535
rm -f "$slog" "$clog"

no_splats 0
no_splats 1
finish
