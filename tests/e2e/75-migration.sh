#!/bin/bash
# migration: two guests cabled back to back (opensm on node 0; its own run directory, as the 7x
# tests), and live migrations of one of them (`pibvm migrate N`: QEMU's migration into a new
# QEMU process on this host) while RDMA traffic runs between them:
#   - `ib_write_bw -D 30` across a move of node 1, the client, then across a move of node 0, the
#     server, the node whose cable listens and runs the SM (pibvm has node 1's QEMU redial at
#     once, QMP chardev-change), both with the default QP timeout and retries (14 and 7: a QP
#     errs after about half a second without ACKs): both sides exit 0 and report their
#     bandwidth;
#   - `rping -C 2000 -V` (rdma_cm over IPoIB; every ping's data checked by rping) across a move
#     of node 1: both exit 0, all 2000 pings printed;
#   - the ports never left ACTIVE: neither node's link_downs hw_counter moved, each move is one
#     link_recoveries on both nodes (the same port came back on the new cable, include/
#     pib_link.h "Moving"), the LIDs are the ones the SM gave before, and the SM's log (node 0's
#     opensm, which logs every port change at its level 0x02) shows no port change: no link
#     state change trap, no port discovered or dropped, no GID in or out of service; and
#     ibv_asyncwatch in each guest, running through all the moves, saw no port event;
#   - IPoIB: node 0 pings node 1 every 0.1 s across a move of node 1, and the replies go on
#     after it (what the gap lost is reported: UD does not retry);
#   - NVMe over RDMA: fio's verify job on node 0 against node 1's nvmet-rdma target, across a
#     move of node 1, the target: fio exits 0 with every block checked and no I/O error;
#   - the downtime QEMU measured is reported for each move (not asserted: a benchmark figure);
#   - a move that does not complete: `pibvm migrate 1 --timeout 0.01` (a guard far shorter than
#     any copy of the guest's RAM) cancels the migration, fails with a clear error, removes the
#     destination QEMU and its files, and node 1 runs on in its QEMU: the ib_write_bw running
#     across it goes on (node 1 sends 1000 packets more), then moves for real, and the cancelled
#     attempt cost the ports nothing (the checks after the real move count one recovery);
#   - a move into a QEMU that refuses the stream (its pib-hca has recv-dbrec=off, and the
#     device refuses its section, at the stream's end): the migration fails, pibvm says so,
#     and node 1 runs on in its QEMU with its port ACTIVE, under the same ib_write_bw.
# e2e-checks: 89
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

switched_dir vm-migration
switched_up --nodes 2

lids() { echo "$(port_lid 0) $(port_lid 1)"; }
port_lid() { on "$1" cat /sys/class/infiniband/pib_0/ports/1/lid; }
counts() { echo "$(hw_counter "$1" link_downs) $(hw_counter "$1" link_recoveries)"; }
# The port changes opensm logged so far: what a port that goes down and comes back makes it log.
# A peer port reset in a pair (ibportstate LID 1 reset, as 52-link-bounce does): "SM port is
# down", "Entering DISCOVERING state", the GID out of service, "drop_mgr_remove_port: Removed
# port", then "SM port is up"; a cable cut behind a switch: a trap 128 "Link state change",
# "Discovered new port", GID in service.
sm_port_changes() {
  grep -cE 'SM port is|DISCOVERING|GID (in|out of) service|Removed port|drop_mgr|Link state change|Discovered new port' \
    "$PIBVM_DIR/node0.opensm.log"
}
lids0=$(lids)

# The guests' own view: ibv_asyncwatch on each node, from before the first move to the last,
# must see no port event (PORT_ERR, PORT_ACTIVE, LID_CHANGE, SM_CHANGE, ...): ib_core would have
# delivered one for any change of the port.  It runs through every move (its node's too).
declare -a aw awpid
for n in 0 1; do
  aw[$n]=$(mktemp)
  "$PIBVM" exec "$n" --timeout 3000 -- ibv_asyncwatch -d pib_0 >"${aw[$n]}" 2>&1 &
  awpid[$n]=$!
done
# (Its output comes back only when it ends: wait for the process itself.)
for n in 0 1; do
  for ((i = 0; i < 600; i++)); do on "$n" pidof ibv_asyncwatch >/dev/null && break; sleep 0.1; done
done

# migrate_during N LOG: move node N once node 1 has sent 1000 packets more than now; the
# downtime goes to the log.
migrate_during() {
  local n=$1 out
  check_sending 1 1000 "node $n moves"
  sm_before=$(sm_port_changes)
  out=$("$PIBVM" migrate "$n" 2>&1)
  check "pibvm migrate $n" test $? -eq 0
  echo "$out"
  echo "node $n: $(grep -o '"downtime_ms": [0-9]*' <<<"$out")" >> "$2"
}

# moved N BEFORE0 BEFORE1: the checks after a move of node N; BEFOREn is node n's "link_downs
# link_recoveries" before it.
moved() {
  local n=$1 b=("$2" "$3") m d r
  for m in 0 1; do
    read -r d r <<<"${b[$m]}"
    check "node $m: port ACTIVE after node $n moved" test "$(port_state $m)" = ACTIVE
    check "node $m: link_downs unchanged ($d)" test "$(hw_counter $m link_downs)" = "$d"
    check "node $m: one link recovery ($r -> $(hw_counter $m link_recoveries))" \
      test "$(hw_counter $m link_recoveries)" -eq $((r + 1))
  done
  check "the LIDs are the SM's first ones ($lids0)" test "$(lids)" = "$lids0"
  check "the SM logged no port change across node $n's move ($sm_before before, $(sm_port_changes) after)" \
    test "$(sm_port_changes)" -eq "$sm_before"
}

# failed_move N HOW WANT [ENV...] -- [ARGS...]: pibvm migrate N ARGS, with ENV ("VAR=value"
# words), fails as HOW says: its message is WANT (a grep pattern) then "(nodeN runs on in pid P",
# P the QEMU before.  Asserted: exit 1, that message, no destination QEMU or its suffixed files
# left, node N's QEMU the one before, its port ACTIVE.
failed_move() {
  local n=$1 how=$2 want=$3 out rc pid0
  local -a env=()
  shift 3
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  pid0=$(cat "$PIBVM_DIR/node$n.pid")
  check_sending 1 1000 "node $n's $how move"
  out=$(env "${env[@]}" "$PIBVM" migrate "$n" "$@" 2>&1); rc=$?
  echo "$out"
  check "pibvm migrate $n ($how): fails (exit $rc)" test "$rc" -eq 1
  check "pibvm migrate $n ($how): says so, node $n runs on" \
    grep -q "$want(node$n runs on in pid $pid0" <<<"$out"
  check "no destination QEMU or its files left (node$n.*.mig*)" \
    bash -c '! pgrep -f "node$1.pid.mig" >/dev/null && ! compgen -G "$2/node$1.*.mig*" >/dev/null' \
    _ "$n" "$PIBVM_DIR"
  check "node $n: the same QEMU (pid $pid0) runs" kill -0 "$pid0"
  check "node $n: its port is ACTIVE" test "$(port_state "$n")" = ACTIVE
}

# cancelled_move N: a move whose hang guard (0.01 s) runs out: pibvm cancels it.
cancelled_move() {
  failed_move "$1" cancelled \
    'migration cancelled: not completed after 0.01 s ' -- --timeout 0.01
}

# refused_move N: a move whose destination refuses the stream: its pib-hca offers no receive
# doorbell records (recv-dbrec=off), which the guest's driver was told it had.  The RAM loads;
# the device refuses its own section, at the end of the stream (pib-vmstate.c), when the source
# has sent everything and stopped.  Only the return path tells the source, which then runs on
# where it was (without it the source would count the move completed and quit).
refused_move() {
  failed_move "$1" refused 'migration failed: .*' \
    PIBVM_PIB_PROPS=",recv-dbrec=off" --
}

downtimes=$(mktemp)
for mover in 1 0; do
  c0=$(counts 0) c1=$(counts 1)
  slog=$(mktemp) clog=$(mktemp)
  "$PIBVM" exec 0 --timeout 180 -- ib_write_bw -d pib_0 -F -D 30 >"$slog" 2>&1 &
  spid=$!
  wait_listen 0 18515
  "$PIBVM" exec 1 --timeout 180 -- ib_write_bw -d pib_0 -F -D 30 node0 >"$clog" 2>&1 &
  cpid=$!
  [ "$mover" = 1 ] && cancelled_move 1 && refused_move 1
  migrate_during "$mover" "$downtimes"
  wait "$cpid"; crc=$?
  wait "$spid"; src=$?
  echo "--- ib_write_bw server (node 0)"; cat "$slog"
  echo "--- ib_write_bw client (node 1)"; cat "$clog"
  check "ib_write_bw across node $mover's move: server exits 0 (got $src)" test "$src" -eq 0
  check "ib_write_bw across node $mover's move: client exits 0 (got $crc)" test "$crc" -eq 0
  check "ib_write_bw across node $mover's move: the client reports its bandwidth" \
    grep -Eq '^ *65536 +[0-9]+ ' "$clog"
  rm -f "$slog" "$clog"
  moved "$mover" "$c0" "$c1"
done

trap '"$PIBVM" ipoib down >/dev/null 2>&1; switched_down' EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish
c0=$(counts 0) c1=$(counts 1)
slog=$(mktemp) clog=$(mktemp)
"$PIBVM" exec 0 --timeout 300 -- rping -s -a 10.13.0.1 -p 7174 -C 2000 -V >"$slog" 2>&1 &
spid=$!
check "rping: the server listens" wait_cm_listen 0 7174
"$PIBVM" exec 1 --timeout 300 -- rping -c -a 10.13.0.1 -p 7174 -C 2000 -V -v >"$clog" 2>&1 &
cpid=$!
migrate_during 1 "$downtimes"
wait "$cpid"; crc=$?
wait "$spid"; src=$?
tail -3 "$clog"; tail -3 "$slog"
check "rping across node 1's move: server exits 0 (got $src)" test "$src" -eq 0
check "rping across node 1's move: client exits 0 (got $crc)" test "$crc" -eq 0
check "rping across node 1's move: 2000 pings, data verified" \
  test "$(grep -c '^ping data: rdma-ping-' "$clog")" -eq 2000
rm -f "$slog" "$clog"
moved 1 "$c0" "$c1"

# replies N: how many echo replies node 0's ping has logged.
# (grep -c prints 0 and fails when nothing matched: one number either way)
replies() {
  local n
  n=$(on 0 sh -c 'grep -c "bytes from" /tmp/mig-ping.log || true' 2>/dev/null)
  echo "${n:-0}"
}
# until_replies N: wait for ping's Nth reply, polling (a hang guard of 1200 polls, not a budget).
until_replies() {
  local i
  for ((i = 0; i < 1200; i++)); do
    [ "$(replies)" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# IPoIB (UD QPs of the kernel's ipoib) across a move of node 1, the side pinged: ping every
# 0.1 s from node 0; node 1 moves after the 10th reply; ping stops (SIGINT) at the 20th reply
# after the move.  UD has no retries: what the gap lost is reported, not asserted.
c0=$(counts 0) c1=$(counts 1)
"$PIBVM" exec 0 --timeout 600 -- \
  sh -c 'echo $$ > /tmp/mig-ping.pid; exec ping -i 0.1 10.13.0.2 > /tmp/mig-ping.log 2>&1' &
ppid=$!
check "ping over IPoIB: node 0 has 10 replies from node 1" until_replies 10
out=$("$PIBVM" migrate 1 2>&1)
check "pibvm migrate 1 (ping running)" test $? -eq 0
echo "$out"
echo "node 1: $(grep -o '"downtime_ms": [0-9]*' <<<"$out")" >> "$downtimes"
after=$(replies)
check "ping over IPoIB: 20 replies more after node 1 moved ($after before)" until_replies $((after + 20))
on 0 sh -c 'kill -INT "$(cat /tmp/mig-ping.pid)"'    # the image has no pkill
wait "$ppid"; prc=$?
plog=$(on 0 cat /tmp/mig-ping.log)
tail -4 <<<"$plog"
check "ping exits 0 (got $prc)" test "$prc" -eq 0
sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' <<<"$plog")
got=$(sed -n 's/.* \([0-9]*\) \(packets \)\{0,1\}received.*/\1/p' <<<"$plog")
echo "ping across node 1's move: $sent sent, $got received, $((sent - got)) lost in the gap"
moved 1 "$c0" "$c1"

# NVMe over RDMA across a move of node 1, the target: fio's verify job (4 KiB random writes at
# queue depth 16, every block read back and checked) runs on node 0 while node 1 moves once
# the target has sent 1000 packets more.  The RC QPs ride the gap on their retries; fio must
# see no I/O error and no bad block.
NQN=nqn.2026-11.org.pib:nvmet-ram
nvme_down() { on_t 0 120 nvme disconnect -n "$NQN" >/dev/null 2>&1; on_t 1 120 pib-nvmet down >/dev/null 2>&1; }
trap 'nvme_down; "$PIBVM" ipoib down >/dev/null 2>&1; switched_down' EXIT
check "node 1: pib-nvmet up (null_blk exported on 10.13.0.2:4420)" on 1 pib-nvmet up 128
check "node 1: nvmet-rdma listens on rdma_cm port 4420" wait_cm_listen 1 4420
on 0 modprobe nvme_rdma
check "node 0: nvme connect -t rdma" on_t 0 120 nvme connect -t rdma -a 10.13.0.2 -s 4420 \
  -n "$NQN" --hostnqn=nqn.2026-11.org.pib:host-node0
dev=$(nvme_ns_dev 0 "$NQN")
check "node 0: the namespace's block device (/dev/$dev)" test -n "$dev"
c0=$(counts 0) c1=$(counts 1)
flog=$(mktemp)
"$PIBVM" exec 0 --timeout 900 -- fio --name=verify --filename="/dev/$dev" --direct=1 \
  --ioengine=io_uring --iodepth=16 --rw=randwrite --bs=4k --size=128M --verify=crc32c \
  --do_verify=1 --verify_fatal=1 >"$flog" 2>&1 &
fpid=$!
migrate_during 1 "$downtimes"
check "fio was still running when node 1 had moved" kill -0 "$fpid"
wait "$fpid"; frc=$?
grep -E "err=|IOPS|READ:|WRITE:|verify" "$flog"
check "fio verify across node 1's move exits 0 (got $frc)" test "$frc" -eq 0
check "fio read every block back (a READ group), no I/O error" \
  bash -c 'grep -q "READ: bw=" "$1" && grep -q "err= 0" "$1" && ! grep -q "err= [1-9]" "$1"' _ "$flog"
rm -f "$flog"
moved 1 "$c0" "$c1"
check "node 0: nvme disconnect" on_t 0 120 nvme disconnect -n "$NQN"
check "node 1: pib-nvmet down" on_t 1 120 pib-nvmet down

for n in 0 1; do
  on "$n" sh -c 'kill $(pidof ibv_asyncwatch)' >/dev/null 2>&1
  wait "${awpid[$n]}"
  echo "--- ibv_asyncwatch on node $n"; cat "${aw[$n]}"
  check "node $n: ibv_asyncwatch watched pib_0 through the moves" grep -q '^pib_0: async event FD' "${aw[$n]}"
  check "node $n: no port event in the guest across the moves" \
    bash -c '! grep -q "event_type" "$1"' _ "${aw[$n]}"
  rm -f "${aw[$n]}"
done

echo "--- downtime QEMU measured per move"; cat "$downtimes"; rm -f "$downtimes"
finish
