#!/bin/bash
# make soak-migrate: move a guest again and again while it serves block I/O, to find what one
# move in `make test` (e2e 75) can miss.  It found QEMU 7.2's lost guest stores
# (docs/explanation/migration.md).
#
#   tests/soak-migrate.sh [--moves N] [--io rdma|tcp] [--result FILE]
#
# Two guests boot, cabled back to back (opensm on node 0).  Node 1 exports a null_blk namespace
# with nvmet; node 0 connects to it with NVMe over RDMA (pib), or with --io tcp NVMe over TCP on
# the management network (virtio-net; pib idle: a control for faults outside pib), and runs
# fio's verify job on it (4 KiB random writes at queue depth 16, every block read back and
# checked, looping until the moves are done).  Meanwhile node 1 is moved --moves times (default 30), each 0 to 4 s after
# the I/O came back from the last.
#
# A move counts as clean when `pibvm migrate` exits 0 and node 0 then sees 2000 packets more on
# the path the I/O takes (pib's rx_packets, or eth0's): the I/O came back.  A move after which
# it does not within 300 s (a hang guard, far past any RC retry bound) stops the soak as stuck,
# with both guests' dmesg kept.  At the end fio, stopped, must report no I/O error and no bad
# block.
#
# The last line is "N moves, N clean; fio exit N; verdict", and with --result it is appended
# to FILE as a CSV row (date, stack, io, moves, clean, fio exit, mean downtime in ms, verdict):
# the figures docs quote are committed as data (bench/results/).
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
moves=${SOAK_MOVES:-30}
io=rdma
result=
while [ $# -gt 0 ]; do
  case $1 in
    --moves) moves=$2; shift 2 ;;
    --io) io=$2; shift 2 ;;
    --result) result=$2; shift 2 ;;
    *) echo "usage: $0 [--moves N] [--io rdma|tcp] [--result FILE]" >&2; exit 2 ;;
  esac
done
case $io in rdma|tcp) ;; *) echo "soak-migrate: --io is rdma or tcp" >&2; exit 2 ;; esac

source "$TOP/tests/e2e/lib.sh"
source "$TOP/tests/e2e/switched.sh"
say() { printf '[soak-migrate] %s\n' "$*"; }

out=$TOP/build/soak-migrate
rm -rf "$out"
mkdir -p "$out"
switched_dir vm-soak-migrate
NQN=nqn.2026-11.org.pib:nvmet-ram
teardown() {
  [ -n "${fpid:-}" ] && kill "$fpid" 2>/dev/null
  on_t 0 120 nvme disconnect -n "$NQN" >/dev/null 2>&1
  on_t 1 120 pib-nvmet down >/dev/null 2>&1
  "$PIBVM" ipoib down >/dev/null 2>&1
  switched_down
}
trap teardown EXIT
switched_up --nodes 2 || { say "the guests did not come up"; exit 1; }

# nvmet-rdma listens on node 1's IPoIB address (rdma_cm), nvmet-tcp on its eth0's.
"$PIBVM" ipoib datagram >/dev/null || { say "IPoIB did not come up"; exit 1; }
on 1 pib-nvmet up 128 || { say "pib-nvmet up failed"; exit 1; }
if [ "$io" = rdma ]; then
  wait_cm_listen 1 4420 || { say "nvmet-rdma does not listen"; exit 1; }
  on 0 modprobe nvme_rdma
  on_t 0 120 nvme connect -t rdma -a 10.13.0.2 -s 4420 -n "$NQN" \
    --hostnqn=nqn.2026-11.org.pib:host-node0 || { say "nvme connect failed"; exit 1; }
  traffic() { hw_counter 0 rx_packets; }
else
  on 1 pib-nvmet port 2 tcp 10.11.0.2 || { say "nvmet-tcp port failed"; exit 1; }
  on 0 modprobe nvme_tcp
  on_t 0 120 nvme connect -t tcp -a 10.11.0.2 -s 4420 -n "$NQN" \
    --hostnqn=nqn.2026-11.org.pib:host-node0 || { say "nvme connect failed"; exit 1; }
  traffic() { on 0 cat /sys/class/net/eth0/statistics/rx_packets; }
fi
dev=$(nvme_ns_dev 0 "$NQN")
[ -n "$dev" ] || { say "no namespace block device on node 0"; exit 1; }

# fio loops far longer than the moves take; it is stopped once they are done.
"$PIBVM" exec 0 --timeout 0 -- fio --name=verify --filename="/dev/$dev" --direct=1 \
  --ioengine=io_uring --iodepth=16 --rw=randwrite --bs=4k --size=128M --verify=crc32c \
  --do_verify=1 --verify_fatal=1 --loops=100000 >"$out/fio.log" 2>&1 &
fpid=$!

# progress_after A: wait until traffic() passes A + 2000; 0 when it did.
progress_after() {
  local a=$1 i
  for ((i = 0; i < 3000; i++)); do
    [ "$(traffic)" -gt $((a + 2000)) ] && return 0
    kill -0 "$fpid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

clean=0 downs=()
progress_after "$(traffic)" || { say "fio's I/O never started"; exit 1; }
for ((k = 1; k <= moves; k++)); do
  sleep "$((RANDOM % 4)).$((RANDOM % 10))"
  a=$(traffic)
  mo=$("$PIBVM" migrate 1 2>&1); mrc=$?
  d=$(grep -o '"downtime_ms": [0-9]*' <<<"$mo" | grep -o '[0-9]*$')
  if [ $mrc -ne 0 ]; then
    say "move $k: pibvm migrate exit $mrc"; echo "$mo"; break
  fi
  if ! progress_after "$a"; then
    say "move $k: STUCK, no I/O after it (downtime ${d:-?} ms)"
    for n in 0 1; do on_t "$n" 60 dmesg >"$out/node$n.dmesg" 2>&1; done
    break
  fi
  clean=$((clean + 1)); downs+=("${d:-0}")
  say "move $k: clean, downtime ${d:-?} ms"
done

# Stop fio: SIGINT ends its loop; it still reports, and exits 128 (its status for a stop by a
# signal) when no I/O failed and no block was bad, 1 or more past that otherwise.
on 0 sh -c 'kill -INT $(pidof fio)' >/dev/null 2>&1     # the image has no pkill
wait "$fpid"; frc=$?
fpid=
grep -E "err=|READ:|WRITE:|verify" "$out/fio.log" | head -8
bad=0
grep -q "err= 0" "$out/fio.log" || bad=1
grep -q "err= [1-9]\|verify: bad\|verify failed" "$out/fio.log" && bad=1
sum=0; for d in "${downs[@]}"; do sum=$((sum + d)); done
mean=$(( ${#downs[@]} ? sum / ${#downs[@]} : 0 ))
verdict=clean
[ "$clean" -eq "$moves" ] && [ "$frc" -eq 128 ] && [ $bad -eq 0 ] || verdict=FAILED
line="$moves moves, $clean clean; fio exit $frc; mean downtime $mean ms; $verdict"
say "$line"
if [ -n "$result" ]; then
  [ -s "$result" ] || echo "date,stack,io,moves,clean,fio_exit,mean_downtime_ms,verdict" >"$result"
  echo "$(date -u +%F),${PIB_STACK:-bookworm},$io,$moves,$clean,$frc,$mean,$verdict" >>"$result"
fi
[ "$verdict" = clean ]
