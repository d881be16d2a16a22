# Helpers for the e2e scripts that attack or break the pib link (tests/e2e/4?-*.sh).
# Source after tests/e2e/lib.sh; the guests are up (tests/run.sh: nodes 0 and 1, cabled).
#
# The cable between node 0 and node 1 is the unix socket $PIBVM_DIR/link-0-1.sock, on which
# node 0's QEMU listens (pibvm: the lower node is the server) and node 1's QEMU dials, again
# every second while it is not connected.  With node 1 killed the socket is free for
# build/hostile/pib-hostile (tests/hostile/) to dial instead: the hostile peer takes node 1's
# place.  `pibvm up --node 1` brings node 1 back on the same cable.

LINK_RUN=${PIBVM_DIR:-$TOP/build/vm}
LINK_SOCK=$LINK_RUN/link-0-1.sock
HOSTILE=$TOP/build/hostile/pib-hostile
HW_COUNTERS=/sys/class/infiniband/pib_0/ports/1/hw_counters

# hostile_build: build the host tool (incremental); a test cannot run without it.
hostile_build() {
  bash "$TOP/tests/hostile/build.sh" && [ -x "$HOSTILE" ] ||
    { echo "cannot build $HOSTILE"; exit 1; }
}

# read_counters NODE ARRAY: ARRAY[name]=value for every hw_counter of pib_0 port 1, and for
# ib_cm's counters of the port, if ib_cm is loaded, as ARRAY[cm_rx_msgs/req] and so on.
read_counters() {
  local -n arr=$2
  local name val
  arr=()
  while IFS=: read -r name val; do
    [ -n "$name" ] && arr[$name]=$val
  done < <(on "$1" sh -c "cd $HW_COUNTERS 2>/dev/null && grep -H . *;
                          cd $HW_COUNTERS/.. && grep -H . cm_*/* 2>/dev/null")
}

# check_one_link_down: both nodes' link_downs grew by exactly 1 from the counters in the
# caller's arrays c0, c1 (read_counters before) to c0b, c1b (after).
check_one_link_down() {
  local n d
  for n in 0 1; do
    local -n before=c$n after=c${n}b
    d=$(( ${after[link_downs]:-0} - ${before[link_downs]:-0} ))
    check "node $n: link_downs grew by 1 (got $d)" test "$d" -eq 1
    unset -n before after
  done
}

# node_running NODE: is NODE's QEMU up (pibvm status)?
node_running() { "$PIBVM" status 2>/dev/null | grep -q "^node$1: running"; }

# restore_node1: boot node 1 again if it is down (pibvm waits until the subnet manager has
# made both ports ACTIVE); true once both ports are ACTIVE.
restore_node1() {
  node_running 1 || "$PIBVM" up --node 1 || return 1
  wait_port 0 ACTIVE "$SM_ACTIVATE_S" && wait_port 1 ACTIVE "$SM_ACTIVATE_S"
}

# pingpong SERVER CLIENT [OPTION...]: ibv_rc_pingpong between the two nodes over pib_0, with
# the received buffers validated (-c); true if both sides exit 0.
pingpong() {
  local s=$1 c=$2 spid src crc=99
  shift 2
  "$PIBVM" exec "$s" --timeout 90 -- ibv_rc_pingpong -d pib_0 -c "$@" \
    >/tmp/pingpong-server.$$ 2>&1 &
  spid=$!
  wait_listen "$s" 18515 &&
    { "$PIBVM" exec "$c" --timeout 60 -- ibv_rc_pingpong -d pib_0 -c "$@" "node$s" \
        >/tmp/pingpong-client.$$ 2>&1; crc=$?; }
  wait "$spid"; src=$?
  echo "--- ibv_rc_pingpong server (node $s), exit $src"; tail -n 3 /tmp/pingpong-server.$$
  echo "--- ibv_rc_pingpong client (node $c), exit $crc"; tail -n 3 /tmp/pingpong-client.$$ 2>/dev/null
  rm -f /tmp/pingpong-server.$$ /tmp/pingpong-client.$$
  [ "$src" -eq 0 ] && [ "$crc" -eq 0 ]
}
