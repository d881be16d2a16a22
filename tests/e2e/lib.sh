# Helpers for end-to-end tests.  Source this; guests are already up (tests/run.sh).
#
# Every script names, in a header line "# e2e-checks: N", the number of checks it makes at the
# least; `finish` prints "e2e checks: MADE made, FAILED failed" and tests/run.sh fails a script
# that made fewer than N, so that a check lost to an early exit or a skipped branch is seen.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PIBVM=$TOP/tools/pibvm
nfail=0 nchecks=0

# on NODE CMD...: run CMD in guest NODE, output on stdout, guest exit status as ours.
on() { local n=$1; shift; "$PIBVM" exec "$n" -- "$@"; }
# on_t NODE SECONDS CMD...: on, with CMD killed after SECONDS (exit status 124).
on_t() { local n=$1 t=$2; shift 2; "$PIBVM" exec "$n" --timeout "$t" -- "$@"; }

# check DESCRIPTION COMMAND...: run a host-side assertion, report it and return its verdict
# (so that `check ... || finish` stops a script whose next steps need it).
check() {
  local what=$1; shift
  nchecks=$((nchecks + 1))
  if "$@"; then echo "  ok   $what"; return 0; fi
  echo "  FAIL $what"; nfail=$((nfail + 1)); return 1
}

# qom QMP_SOCKET DEVICE PROPERTY [JSON_VALUE]: a QOM property of a QEMU's device over QMP
# (qom-get; qom-set with a value), printed (a get) or "ok"; exit 1 on a QMP error.  A node's QMP
# is $RUN_DIR/nodeN.qmp and its HCA /machine/peripheral/pib0; a switch's switchS.qmp and sw0.
qom() {
  python3 - "$TOP/tools" "$@" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from pibvmlib.qmp import Qmp
sock, dev, prop = sys.argv[2:5]
args = {"path": dev, "property": prop}
if len(sys.argv) > 5:
    args["value"] = json.loads(sys.argv[5])
try:
    with Qmp(sock, timeout=10) as q:
        r = q.cmd("qom-set" if "value" in args else "qom-get", args)
except OSError as e:               # QmpError, or no QEMU there
    sys.exit(f"qom: {e}")
print("ok" if "value" in args else r)
PY
}

# qemu_trace QMP_SOCKET PATTERN on|off: QEMU's trace events matching PATTERN (pib_comp_*, ...)
# on or off in a running QEMU (QMP trace-event-set-state).  Its trace lines go to the QEMU's log
# (pibvm: nodeN.qemu.log), in the order they happened.
qemu_trace() {
  python3 - "$TOP/tools" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from pibvmlib.qmp import Qmp
sock, pattern, state = sys.argv[2:5]
try:
    with Qmp(sock, timeout=10) as q:
        q.cmd("trace-event-set-state", {"name": pattern, "enable": state == "on"})
except OSError as e:
    sys.exit(f"qemu_trace: {e}")
PY
}

# field TEXT KEY: the value after "KEY:" in ibv_devinfo-style output (first match).
field() { awk -v k="$2:" '$1 == k {print $2; exit}' <<<"$1"; }

# skip_script REASON: this script cannot run here (REASON says why, and what would let it);
# tests/run.sh counts it as skipped, prints the reason, and holds no check count against it.
skip_script() { echo "E2E-SKIP $1"; exit 0; }

# finish: the verdict, and the count tests/run.sh holds against the script's "# e2e-checks: N".
finish() {
  echo "e2e checks: $nchecks made, $nfail failed"
  [ "$nfail" -eq 0 ] && echo "all checks passed" || echo "$nfail check(s) failed"
  exit $(( nfail > 0 ))
}

# The subnet manager: opensm on node 0 (pibvm up), with pib-sm's options (images/rootfs/usr/sbin/
# pib-sm): a sweep every SM_SWEEP_S seconds, SMPs timed out after SM_TIMEOUT_MS and retried
# SM_RETRIES times (opensm's default).  A fabric without switches gets a heavy sweep every time,
# and that is what finds a port in INIT and takes it to ACTIVE.  A sweep that began while the
# link was still down waits out the far port's SMPs.  So once a link trains, its ports are
# ACTIVE within SM_ACTIVATE_S: two sweep intervals and one SMP's retries, plus the time TCG
# takes to run the sweep itself (TCG_SLACK_S).
SM_SWEEP_S=1
SM_TIMEOUT_MS=1000
SM_RETRIES=3
TCG_SLACK_S=5
SM_ACTIVATE_S=$(( 2 * SM_SWEEP_S + (SM_RETRIES + 1) * SM_TIMEOUT_MS / 1000 + TCG_SLACK_S ))

# port_state NODE: the word of pib_0 port 1's state ("ACTIVE", "DOWN", "INIT", ...).
port_state() { on "$1" cat /sys/class/infiniband/pib_0/ports/1/state 2>/dev/null | awk '{print $2}'; }

# wait_port NODE STATE SECONDS: true once the port is in STATE, false after SECONDS.
wait_port() {
  local n=$1 want=$2 end=$((SECONDS + $3))
  while [ $SECONDS -le $end ]; do
    [ "$(port_state "$n")" = "$want" ] && return 0
    sleep 0.3
  done
  return 1
}

# port_lid NODE: pib_0 port 1's LID, in decimal (sysfs says 0x...).
port_lid() { printf '%d' "$(on "$1" cat /sys/class/infiniband/pib_0/ports/1/lid)"; }

# wait_listen NODE PORT [TRIES]: wait until a TCP socket listens on PORT in guest NODE (IPv4 or
# IPv6), polling /proc/net/tcp{,6} (state 0A is LISTEN).  Servers such as ibv_rc_pingpong and
# perftest take a moment under TCG before they accept, and their clients do not retry.
wait_listen() {
  local n=$1 port=$2 tries=${3:-150} hex i
  hex=$(printf '%04X' "$port")
  for ((i = 0; i < tries; i++)); do
    on "$n" awk -v p=":$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p {f=1}
                              END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# pair NAME PORT SERVER_CMD... -- CLIENT_ARGS...: run SERVER_CMD on node 0, wait for PORT, then
# the same program with CLIENT_ARGS on node 1 (its last argument is normally node0).  Both
# outputs are printed; both must exit 0.  Sets pair_out_server / pair_out_client.
pair() { run_pair wait_listen 0 "$@"; }

# run_pair WAIT SERVER_NODE NAME PORT SERVER_CMD... -- CLIENT_CMD...: pair's engine.  SERVER_CMD
# runs in SERVER_NODE, WAIT NODE PORT says when it listens, CLIENT_CMD then runs in the other
# node (pibvm exec's timeout bounds each).
run_pair() {
  local wait=$1 sn=$2 name=$3 port=$4; shift 4
  local cn=$((1 - sn)) srv=() cli=() slog clog spid src crc
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  slog=$(mktemp) clog=$(mktemp)
  # A server whose client never reached it (refused, or failed before connecting) would wait
  # for ever: the hang guard ends it, generously after any client's run.
  "$PIBVM" exec "$sn" --timeout 900 -- "${srv[@]}" >"$slog" 2>&1 &
  spid=$!
  if "$wait" "$sn" "$port"; then
    "$PIBVM" exec "$cn" -- "${cli[@]}" >"$clog" 2>&1; crc=$?
  else
    echo "server did not listen on $port" >"$clog"; crc=99
  fi
  wait "$spid"; src=$?
  pair_out_server=$(cat "$slog") pair_out_client=$(cat "$clog")
  echo "--- $name: server (node $sn)"; echo "$pair_out_server"
  echo "--- $name: client (node $cn)"; echo "$pair_out_client"
  check "$name: server exits 0 (got $src)" test "$src" -eq 0
  check "$name: client exits 0 (got $crc)" test "$crc" -eq 0
  rm -f "$slog" "$clog"
}

# wait_cm_listen NODE PORT [TRIES]: wait until an rdma_cm ID listens on PORT in guest NODE, as
# `rdma resource show cm_id` reports it (state LISTEN, src-addr ...:PORT).  rdma_cm servers
# (rping, ucmatose, perftest -R) listen on no TCP socket, and their clients do not retry a
# connection that the far CM rejects.
wait_cm_listen() {
  local n=$1 port=$2 tries=${3:-150} i
  for ((i = 0; i < tries; i++)); do
    on "$n" rdma resource show cm_id 2>/dev/null |
      grep -q "state LISTEN .*src-addr [^ ]*:$port\b" && return 0
    sleep 0.2
  done
  return 1
}

# cm_pair NAME PORT SERVER_NODE SERVER_CMD... -- CLIENT_CMD...: pair for rdma_cm programs:
# the server runs in SERVER_NODE and listens on rdma_cm PORT.
cm_pair() { local name=$1 port=$2 sn=$3; shift 3; run_pair wait_cm_listen "$sn" "$name" "$port" "$@"; }

# hw_counter NODE NAME: one of pib_0 port 1's device counters (rdma statistic / hw_counters).
hw_counter() { on "$1" cat "/sys/class/infiniband/pib_0/ports/1/hw_counters/$2"; }

# check_sending NODE N WHAT: checks that NODE's port sends N packets more than it had when
# called (its tx_packets), polled with a hang guard of 300 looks 0.1 s apart: a transfer started
# in the background is under way (before WHAT: a move, a snapshot).
check_sending() {
  local i tx0
  tx0=$(hw_counter "$1" tx_packets)
  for ((i = 0; i < 300; i++)); do
    [ "$(hw_counter "$1" tx_packets)" -gt $((tx0 + $2)) ] && break
    sleep 0.1
  done
  check "node $1 is sending before $3" test "$(hw_counter "$1" tx_packets)" -gt $((tx0 + $2))
}

# pkey_index NODE PKEY: the index of PKEY (0x8001 ...) in NODE's P_Key table, or nothing.
pkey_index() {
  on "$1" sh -c "cd /sys/class/infiniband/pib_0/ports/1/pkeys &&
                 for i in \$(ls | sort -n); do [ \"\$(cat \$i)\" = $2 ] && { echo \$i; exit; }; done"
}

# refused_send_bw CLIENT_OPTION [SERVER_OPTION...]: ib_send_bw (100 SENDs, local ACK timeout
# -u 14) from node 1 with CLIENT_OPTION (--pkey_index=N: its QP in that partition; --sl=N: on
# that service level) to a server in node 0 (ib_send_bw with the SERVER_OPTIONs) that the
# client's packets must not reach (53-partitions, 70-switch).  Sets crc, the client's exit
# status, and clog, a file with its output, which the caller removes.
refused_send_bw() {
  local slog spid
  slog=$(mktemp) clog=$(mktemp)
  # The server waits for messages that never come: pibvm ends it.
  "$PIBVM" exec 0 --timeout 40 -- ib_send_bw -d pib_0 -F -n 100 -u 14 "${@:2}" >"$slog" 2>&1 &
  spid=$!
  wait_listen 0 18515
  "$PIBVM" exec 1 --timeout 60 -- ib_send_bw -d pib_0 -F -n 100 -u 14 "$1" \
    node0 >"$clog" 2>&1
  crc=$?
  wait "$spid"
  rm -f "$slog"
}

# comp_irqs NODE: completion interrupts NODE's pib has taken (its CEQ vector, MSI-X 2,
# "pib-comp" in /proc/interrupts), summed over the CPUs; 0 without the line.
comp_irqs() {
  on "$1" awk '/pib-comp/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i}
               END {print s + 0}' /proc/interrupts
}

# dmesg_mark NODE: write a mark into NODE's kernel log (dmesg_marks[NODE]=BOOT instead: the
# whole log of a guest booted during the test).  dmesg_since NODE: the log after the mark; it
# fails if the mark is gone.  no_splats NODE: a check that NODE's kernel logged no oops, BUG,
# WARNING, call trace or list/refcount corruption after the mark.
# The mark is a line of the log itself, not a line count: the guests live through every script,
# and once the kernel's ring wraps a count points past the end.  A mark the ring has already
# dropped fails the check, as the lines after it cannot be read whole.
declare -A dmesg_marks
dmesg_mark() {
  dmesg_marks[$1]="pib-e2e-mark $(basename "$0" .sh) $$ $RANDOM$RANDOM"
  on "$1" sh -c "echo '${dmesg_marks[$1]}' > /dev/kmsg"
}
dmesg_since() {
  local m=${dmesg_marks[$1]:-} log
  log=$(on "$1" dmesg) || return 1
  [ "$m" = BOOT ] && { printf '%s\n' "$log"; return 0; }
  [ -n "$m" ] && grep -qF "$m" <<<"$log" || return 1
  awk -v m="$m" 'found; index($0, m) {found = 1}' <<<"$log"
}
no_splats() {
  local n=$1 log w
  if ! log=$(dmesg_since "$n"); then
    check "node $n: the kernel log still holds the test's mark (${dmesg_marks[$n]:-none set})" false
    return
  fi
  w=$(grep -E 'WARNING:|BUG:|Call Trace|Oops|general protection|refcount_t|list_(add|del) corruption' <<<"$log")
  [ -n "$w" ] && { echo "--- node $n: kernel splats"; echo "$w"; }
  check "node $n: no kernel splat in dmesg during the test" test -z "$w"
}

# guest_timed NODE SECONDS CMD: run shell command CMD in NODE (timeout SECONDS) between two reads
# of the guest's /proc/uptime; prints CMD's output, then a last line "elapsed S" (guest time,
# 10 ms resolution).  Exit status CMD's.
guest_timed() {
  on_t "$1" "$2" sh -c "t0=\$(cut -d' ' -f1 /proc/uptime); $3
                        r=\$?; t1=\$(cut -d' ' -f1 /proc/uptime)
                        echo elapsed \$(awk -v a=\$t0 -v b=\$t1 'BEGIN {printf \"%.2f\", b - a}'); exit \$r"
}

# direct_round_trip NODE TARGET MIB: MIB MiB of random bytes made in NODE's RAM, written to TARGET
# (a block device or a file) and read back, both with O_DIRECT so that the page cache cannot
# answer the read.  Checks the write; sets rt_want (the pattern's sha256) and rt_got (the read's);
# prints both and the write and read rates (guest time; the timed read goes to /dev/null, as
# busybox's sha256sum under TCG is slower than the transports).
direct_round_trip() {
  local n=$1 dst=$2 mib=$3 pat=/tmp/round-trip-pattern wout rout wsec rsec
  on "$n" dd if=/dev/urandom of=$pat bs=1M count="$mib" 2>/dev/null
  rt_want=$(on "$n" sha256sum $pat | cut -d' ' -f1)
  wout=$(guest_timed "$n" 600 "dd if=$pat of=$dst bs=1M count=$mib oflag=direct"); local wrc=$?
  check "node $n: dd writes $mib MiB to $dst with O_DIRECT (exit $wrc)" test $wrc -eq 0
  rt_got=$(on_t "$n" 600 sh -c "dd if=$dst bs=1M count=$mib iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
  rout=$(guest_timed "$n" 600 "dd if=$dst of=/dev/null bs=1M count=$mib iflag=direct")
  on "$n" rm -f $pat
  wsec=$(awk '$1 == "elapsed" {print $2}' <<<"$wout") rsec=$(awk '$1 == "elapsed" {print $2}' <<<"$rout")
  echo "pattern  sha256 $rt_want"
  echo "readback sha256 $rt_got"
  echo "dd write: $mib MiB in $wsec s, $(rate_mb "$mib" "$wsec") (O_DIRECT, 1 MiB blocks)"
  echo "dd read:  $mib MiB in $rsec s, $(rate_mb "$mib" "$rsec") (O_DIRECT, 1 MiB blocks)"
}
# crash_node NODE WATCHER: SIGKILL NODE's QEMU (`pibvm kill`, a crash); t_kill and t_dead are
# WATCHER's uptime just before and once NODE is gone, so a pass of a write loop in WATCHER
# that started before t_dead was in flight at the kill.
crash_node() {
  t_kill=$(on "$2" cut -d' ' -f1 /proc/uptime)
  "$PIBVM" kill "$1" || return 1
  t_dead=$(on "$2" cut -d' ' -f1 /proc/uptime)
}

# nvme_ctrl NODE NQN: the NVMe controller (nvmeN) in NODE whose subsystem is NQN.
nvme_ctrl() { on "$1" sh -c "grep -lx '$2' /sys/class/nvme/nvme*/subsysnqn" | head -n1 | cut -d/ -f5; }

# nvme_ns_dev NODE NQN: the block device (nvmeXnY) of subsystem NQN's namespace in NODE, once it
# exists (the namespace scan runs after `nvme connect` returns: wait at most 10 s).  With the
# kernel's native multipath (Debian's default) it hangs off the subsystem, not the controller.
nvme_ns_dev() {
  local n=$1 nqn=$2 i dev
  for ((i = 0; i < 50; i++)); do
    dev=$(on "$n" sh -c "for s in /sys/class/nvme-subsystem/*; do
                           grep -qx '$nqn' \$s/subsysnqn && ls -d \$s/nvme*n* 2>/dev/null; done" |
          head -n1 | xargs -r basename)
    [ -n "$dev" ] && on "$n" test -b "/dev/$dev" && { echo "$dev"; return 0; }
    sleep 0.2
  done
  return 1
}

rate_mb() { awk -v m="$1" -v s="$2" 'BEGIN {if (s > 0) printf "%.1f MB/s", m / s; else print "? MB/s"}'; }
