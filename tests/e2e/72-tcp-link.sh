#!/bin/bash
# tcp-link: two runs of pibvm joined by a TCP cable form one subnet, as two hosts would.  Run A
# (a run directory of its own, one node) listens on 127.0.0.1 (`--link-listen`), run B dials it
# (`--link-connect`, `--node-base 1` so that its node is node 1 of the fabric: its own node GUID,
# host name and IPoIB address).  One subnet manager, opensm in A, manages both.  Checked:
#   - both ports ACTIVE, with distinct LIDs, once A's opensm runs;
#   - ibnetdiscover in A shows both CAs (node descriptions "node0 pib_0" and "node1 pib_0");
#   - sminfo in B names A's port as the master SM: one SM for the joined subnet;
#   - IPoIB datagram on both; ibv_rc_pingpong -c (every buffer checked) from B to A's IPoIB
#     address (the runs' management networks are not joined);
#   - A's node killed (the listening side): B's port goes DOWN; A's node booted again (with
#     opensm) and B redials: both ACTIVE, and ibv_rc_pingpong -c works again;
#   - B's node moved into a new QEMU (`pibvm migrate 0`: it dials the TCP cable from there):
#     both ports stay ACTIVE, neither counts a link down, each counts a link recovery (the
#     other came back on a new cable, recognized), and ibv_rc_pingpong -c works after it;
#     A's node, whose cable listens, is refused a move, with the reason, and runs on;
#   - B's node moved to "another host": run C (its own run directory, as on another machine)
#     waits for it (`pibvm up --nodes 1 --link-connect ... --node-base 1 --incoming PORT`) and
#     B sends it there over TCP (`pibvm migrate 0 --to 127.0.0.1:PORT`): B's QEMU ends and its
#     status says where the node went; C runs it with the same node GUID; both ports stay
#     ACTIVE, no link down (C's counters are B's, carried in the stream), a link recovery each
#     side, and ibv_rc_pingpong -c works between A and C.
# Printed for the record: the time from A's restart to B's port ACTIVE.  The suite's own two
# guests stay up meanwhile.
# e2e-checks: 44
source "$(dirname "$0")/lib.sh"

SUITE_DIR=${PIBVM_DIR:-$TOP/build/vm-test}
DIR_A="$(dirname "$SUITE_DIR")/vm-tcpA"
DIR_B="$(dirname "$SUITE_DIR")/vm-tcpB"
DIR_C="$(dirname "$SUITE_DIR")/vm-tcpC"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
# opensm's start under TCG, then what lib.sh allows a port to reach ACTIVE once its link trains.
SM_START_S=10
A() { PIBVM_DIR=$DIR_A "$@"; }
B() { PIBVM_DIR=$DIR_B "$@"; }
C() { PIBVM_DIR=$DIR_C "$@"; }

cleanup() {
  A "$PIBVM" down >/dev/null 2>&1; B "$PIBVM" down >/dev/null 2>&1; C "$PIBVM" down >/dev/null 2>&1
}
trap cleanup EXIT
cleanup

# pingpong_ab SUFFIX: ibv_rc_pingpong -c between A's node (server) and B's (client, to
# 10.13.0.1); $CLIENT names the client's run (B, or C once B's node went there).
CLIENT=B
pingpong_ab() {
  local slog spid src crc=99 cout
  slog=$(mktemp)
  A "$PIBVM" exec 0 --timeout 200 -- ibv_rc_pingpong -d pib_0 -c -n 200 >"$slog" 2>&1 &
  spid=$!
  if A wait_listen 0 18515; then
    cout=$($CLIENT "$PIBVM" exec 0 --timeout 200 -- ibv_rc_pingpong -d pib_0 -c -n 200 10.13.0.1 2>&1); crc=$?
  fi
  wait "$spid"; src=$?
  echo "--- server (A)"; cat "$slog"; echo "--- client (B)"; echo "$cout"
  rm -f "$slog"
  check "ibv_rc_pingpong -c B -> A$1: both exit 0 ($src, $crc)" test "$src" -eq 0 -a "$crc" -eq 0
  check "ibv_rc_pingpong -c B -> A$1: 200 iters reported" grep -q '200 iters in' <<<"$cout"
}

check "run A: pibvm up --nodes 1 --link-listen 127.0.0.1:$PORT --sm none" \
  A "$PIBVM" up --nodes 1 --link-listen "127.0.0.1:$PORT" --sm none
check "run B: pibvm up --nodes 1 --link-connect 127.0.0.1:$PORT --node-base 1 --sm none" \
  B "$PIBVM" up --nodes 1 --link-connect "127.0.0.1:$PORT" --node-base 1 --sm none
check "run A: opensm started on its node" A "$PIBVM" sm start 0
check "A's port ACTIVE" A wait_port 0 ACTIVE $((SM_START_S + SM_ACTIVATE_S))
check "B's port ACTIVE" B wait_port 0 ACTIVE "$SM_ACTIVATE_S"
lid_a=$(A port_lid 0) lid_b=$(B port_lid 0)
echo "A's LID $lid_a, B's LID $lid_b"
check "distinct LIDs ($lid_a, $lid_b)" test "${lid_a:-0}" -gt 0 -a "${lid_b:-0}" -gt 0 -a "$lid_a" != "$lid_b"

disc=$(A on 0 ibnetdiscover 2>&1)
echo "--- A: ibnetdiscover"; echo "$disc"
check "ibnetdiscover in A: 2 CAs" test "$(grep -c '^Ca' <<<"$disc")" -eq 2
check "ibnetdiscover in A: A's node (node0 pib_0)" grep -q '"node0 pib_0"' <<<"$disc"
check "ibnetdiscover in A: B's node (node1 pib_0)" grep -q '"node1 pib_0"' <<<"$disc"
# A's port GUID as sminfo prints it (0x%PRIx64: no leading zeros).
guid_a=$(A on 0 cat /sys/class/infiniband/pib_0/ports/1/gids/0 | cut -d: -f5-8 | tr -d : | sed 's/^0*//')
smi=$(B on 0 sminfo 2>&1)
echo "--- B: sminfo: $smi"
check "sminfo in B: the master SM is A's port (LID $lid_a, GUID 0x$guid_a)" \
  grep -q "sm lid $lid_a sm guid 0x$guid_a.*SMINFO_MASTER" <<<"$smi"

check "IPoIB datagram in A (10.13.0.1)" A "$PIBVM" ipoib datagram
check "IPoIB datagram in B (10.13.0.2)" B "$PIBVM" ipoib datagram
pingpong_ab ""

# The listening side crashes and comes back; the dialler redials (reconnect=1).
check "run A: pibvm kill 0" A "$PIBVM" kill 0
check "B's port DOWN once the cable is gone" B wait_port 0 DOWN "$SM_ACTIVATE_S"
t0=$SECONDS
check "run A: pibvm up --node 0" A "$PIBVM" up --node 0
check "run A: opensm started again" A "$PIBVM" sm start 0
check "A's port ACTIVE again" A wait_port 0 ACTIVE $((SM_START_S + SM_ACTIVATE_S))
check "B's port ACTIVE again" B wait_port 0 ACTIVE "$SM_ACTIVATE_S"
echo "A's node restarted: both ports ACTIVE $((SECONDS - t0)) s after its boot began"
check "IPoIB datagram in A again" A "$PIBVM" ipoib datagram
pingpong_ab " (A rebooted)"

# hw NAME: a hw_counter of the run's one node (its port 1).
hw() { on 0 cat "/sys/class/infiniband/pib_0/ports/1/hw_counters/$1"; }
downs_a=$(A hw link_downs) downs_b=$(B hw link_downs)
rec_a=$(A hw link_recoveries) rec_b=$(B hw link_recoveries)
pid_b=$(cat "$DIR_B/node0.pid")
check "run B: pibvm migrate 0 (its node dials the TCP cable from the new QEMU)" \
  B "$PIBVM" migrate 0
check "run B: a new QEMU runs the node (pid $pid_b before, $(cat "$DIR_B/node0.pid") now)" \
  test "$(cat "$DIR_B/node0.pid")" != "$pid_b"
check "A's port stayed ACTIVE across B's move" test "$(A port_state 0)" = ACTIVE
check "B's port is ACTIVE after its move" test "$(B port_state 0)" = ACTIVE
d_a=$(( $(A hw link_downs) - downs_a )) d_b=$(( $(B hw link_downs) - downs_b ))
check "no link down across the move (A +$d_a, B +$d_b)" test "$d_a" -eq 0 -a "$d_b" -eq 0
r_a=$(( $(A hw link_recoveries) - rec_a )) r_b=$(( $(B hw link_recoveries) - rec_b ))
check "each side recognized the other on the new cable: link_recoveries A +$r_a, B +$r_b" \
  test "$r_a" -eq 1 -a "$r_b" -eq 1
pingpong_ab " (B moved)"
pid_a=$(cat "$DIR_A/node0.pid")
out=$(A "$PIBVM" migrate 0 2>&1); rc=$?
echo "$out"
refused() { [ "$rc" -ne 0 ] && grep -q 'cannot move on this host' <<<"$out"; }
check "run A: pibvm migrate 0 is refused (exit $rc): its cable listens on the port" refused
check "run A: its node runs on in the same QEMU (pid $pid_a)" \
  test "$(cat "$DIR_A/node0.pid")" = "$pid_a" -a "$(A port_state 0)" = ACTIVE

# B's node goes to "another host": run C waits for it, B sends it over TCP.
MPORT=$(free_port)
guid_b=$(B on 0 cat /sys/class/infiniband/pib_0/node_guid)
downs_a=$(A hw link_downs) downs_b=$(B hw link_downs)
rec_a=$(A hw link_recoveries) rec_b=$(B hw link_recoveries)
pid_b=$(cat "$DIR_B/node0.pid")
clog=$(mktemp)
C "$PIBVM" up --nodes 1 --link-connect "127.0.0.1:$PORT" --node-base 1 --sm none \
  --incoming "127.0.0.1:$MPORT" >"$clog" 2>&1 &
cpid=$!
# Its QEMU listens once it says so (a probe of the port would be taken for the stream).
waiting() {
  local i
  for i in $(seq 1 600); do
    grep -q 'waiting for a migration' "$clog" && return 0
    kill -0 "$cpid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
check "run C: pibvm up --incoming 127.0.0.1:$MPORT waits for the node" waiting
mout=$(B "$PIBVM" migrate 0 --to "127.0.0.1:$MPORT" 2>&1); mrc=$?
echo "$mout"
check "run B: pibvm migrate 0 --to 127.0.0.1:$MPORT (exit $mrc)" test "$mrc" -eq 0
wait "$cpid"; crc=$?
cat "$clog"; rm -f "$clog"
check "run C: pibvm up --incoming returns once the node runs there (exit $crc)" test "$crc" -eq 0
# b_moved: no QEMU runs run B's node0 (none has its pidfile on its command line; a quit one
# may linger a moment as a zombie, which kill -0 would still find), and B's status says where
# the node went.
b_moved() {
  ! pgrep -f "$DIR_B/node0.pid" >/dev/null &&
    PIBVM_DIR=$DIR_B "$PIBVM" status | grep -q "node0: moved to 127.0.0.1:$MPORT"
}
check "run B: its QEMU (pid $pid_b) is gone, and its status says where the node went" b_moved
check "run C: the node is B's (node GUID $guid_b)" \
  test "$(C on 0 cat /sys/class/infiniband/pib_0/node_guid)" = "$guid_b"
check "A's port stayed ACTIVE across the move to C" test "$(A port_state 0)" = ACTIVE
check "C's port is ACTIVE" test "$(C port_state 0)" = ACTIVE
d_a=$(( $(A hw link_downs) - downs_a )) d_c=$(( $(C hw link_downs) - downs_b ))
check "no link down across the move (A +$d_a; C's count is B's +$d_c)" \
  test "$d_a" -eq 0 -a "$d_c" -eq 0
r_a=$(( $(A hw link_recoveries) - rec_a )) r_c=$(( $(C hw link_recoveries) - rec_b ))
check "each side recognized the other on C's cable: link_recoveries A +$r_a, C (from B's) +$r_c" \
  test "$r_a" -eq 1 -a "$r_c" -eq 1
CLIENT=C
pingpong_ab " (the node moved to C)"

finish
