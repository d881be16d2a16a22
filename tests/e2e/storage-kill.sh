# Helpers of 61-nvme-target-kill and 62-nfs-server-kill (source after lib.sh and
# tests/hostile/link-e2e.sh): node 1's target on a disk that outlives it, its crash and its
# return, and a writer whose every pass leaves a pattern of its own, so that what the region
# holds after the target's crash names the pass that wrote it.
#
# Pass i writes BASE (MIB MiB of random bytes in the writer's RAM) rotated by i MiB: the
# region's block b gets BASE's block (b + i) mod MIB.  Two passes in a row differ in every
# sector, so a write of the pass in flight at the crash that was lost, or answered but never
# stored, leaves the previous pass's bytes behind, and the read-back sees them.  (Rewriting one
# pattern, as these tests once did, cannot tell: the pass after the recovery writes the
# same bytes again.)  dd's skip and seek do the rotation, so a pass copies nothing first and
# the loop spends nearly all its time inside a pass.

# disk_reboot MIB: node 1 boots again with a disk of MIB MiB (pibvm's --disk: a raw file on
# virtio-blk that outlives the guest, so the target that boots after the crash finds the same
# bytes); checks that, and that both ports are ACTIVE again.
disk_reboot() {
  check "node 1 reboots with a $1 MiB disk" sh -c "'$PIBVM' kill 1 && '$PIBVM' up --node 1 --disk $1"
  check "both ports ACTIVE" restore_node1
}

# storage_up PORT CMD...: node 1's target: IPoIB, then CMD (the host's command that starts the
# target), then until an rdma_cm ID listens on PORT in node 1.  Sets t_up to node 0's uptime
# by then; false if a step fails.
storage_up() {
  local port=$1; shift
  "$PIBVM" ipoib datagram 1 >/dev/null &&
    "$@" &&
    wait_cm_listen 1 "$port" || return 1
  t_up=$(on 0 cut -d' ' -f1 /proc/uptime)
}

# crash_under_loop TAG: the crash.  node 1's QEMU is SIGKILLed under a pass of the loop TAG
# (crash_node: t_kill, t_dead), the loop is told to stop, and node 1 boots again with the same
# disk; from then on node 1's kernel log is its new boot's, all of it (no_splats 1).
crash_under_loop() {
  check "pibvm kill 1 during the writes (SIGKILL)" crash_node 1 0
  # Stop the loop now: it checks before each pass, so the pass in flight, which cannot end
  # before the target is back, is its last.  (Told once the target is up, the host learns of
  # the recovery too late: NVMe passes of a fraction of a second ran on after it.)
  on 0 touch "/tmp/$1-stop"
  check "node 1 boots again (same disk) and both ports are ACTIVE" restore_node1
  dmesg_marks[1]=BOOT
}

# pass_bases TAG MIB: /tmp/TAG-a (written once, before the crash) and /tmp/TAG-b (pass_loop's
# BASE), MIB MiB of random bytes each in node 0's RAM.  Sets sum_a to the first's sha256.
pass_bases() {
  on 0 dd if=/dev/urandom of="/tmp/$1-a" bs=1M count="$2" 2>/dev/null
  on 0 dd if=/dev/urandom of="/tmp/$1-b" bs=1M count="$2" 2>/dev/null
  sum_a=$(on 0 sha256sum "/tmp/$1-a" | cut -d' ' -f1)
}

# pass_cleanup TAG: the last steps of a cleanup: IPoIB down, node 0's files of the loop TAG gone.
pass_cleanup() {
  "$PIBVM" ipoib down >/dev/null 2>&1
  on 0 rm -f "/tmp/$1-stop" "/tmp/$1-passes" "/tmp/$1-a" "/tmp/$1-b" /tmp/region-got >/dev/null 2>&1
}

# pass_loop NODE TAG BASE MIB OUT SEEK [DD_OPERAND...]: in NODE, write pass after pass of BASE
# to OUT from 1 MiB block SEEK on (O_DIRECT, plus the DD_OPERANDs) until /tmp/TAG-stop exists:
# the pass that is running when it appears is the last.  /tmp/TAG-passes gets "START i t0" as
# pass i begins and "PASS i rc t0 t1" when it ends (the guest's uptime); a pass that fails ends
# the loop with its status.  Runs in the background (pl_pid: its pibvm exec, whose exit status
# is the loop's).  True once pass 2 has begun (pass 1 is done, so the loop works, and what
# follows is a pass in flight), false if it has not within 60 s.
pass_loop() {
  local n=$1 tag=$2 base=$3 mib=$4 out=$5 seek=$6 i; shift 6
  local loop="rm -f /tmp/$tag-stop; i=0; : > /tmp/$tag-passes
    while [ ! -e /tmp/$tag-stop ]; do
      i=\$((i + 1)); k=\$((i % $mib))
      read t0 _ < /proc/uptime
      echo \"START \$i \$t0\" >> /tmp/$tag-passes
      dd if=$base of=$out bs=1M skip=\$k count=\$(($mib - k)) seek=$seek oflag=direct $* 2>/dev/null &&
        dd if=$base of=$out bs=1M count=\$k seek=\$(($seek + $mib - k)) oflag=direct $* 2>/dev/null
      rc=\$?
      read t1 _ < /proc/uptime
      echo \"PASS \$i \$rc \$t0 \$t1\" >> /tmp/$tag-passes
      [ \$rc -eq 0 ] || exit \$rc
    done"
  "$PIBVM" exec "$n" --timeout 900 -- sh -c "$loop" >/dev/null 2>&1 &
  pl_pid=$!
  for ((i = 0; i < 300; i++)); do
    on "$n" grep -q '^START 2 ' "/tmp/$tag-passes" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# pass_stream BASE MIB I: the guest shell command that prints pass I's pattern.
pass_stream() {
  local k=$(($3 % $2))
  echo "{ dd if=$1 bs=1M skip=$k 2>/dev/null; dd if=$1 bs=1M count=$k 2>/dev/null; }"
}

# pass_sum NODE BASE MIB I: the sha256 of pass I's pattern.
pass_sum() { on_t "$1" 300 sh -c "$(pass_stream "$2" "$3" "$4") | sha256sum" | cut -d' ' -f1; }

# region_holds NODE BASE MIB I DD_OPERAND...: the MIB MiB that `dd DD_OPERANDs` reads in NODE
# (with O_DIRECT, so the page cache cannot answer) are pass I's pattern, byte for byte; cmp
# names the first byte that differs.
region_holds() {
  local n=$1 base=$2 mib=$3 i=$4; shift 4
  on_t "$n" 300 sh -c "dd $* bs=1M count=$mib iflag=direct of=/tmp/region-got 2>/dev/null &&
                       $(pass_stream "$base" "$mib" "$i") | cmp - /tmp/region-got; r=\$?
                       rm -f /tmp/region-got; exit \$r"
}

# pass_span PASSES T_DEAD T_BACK: the pass that began before T_DEAD (crash_node's: the target
# was gone by then) and ended after T_BACK (the new target starting), as "i rc t0 t1"; empty if
# none did.  Its I/O waited through the target's absence.  T_DEAD, not T_KILL, is the bound: a
# pass may begin in the moment between crash_node's reading of T_KILL and the kill itself, and
# at most one pass can meet both bounds.
pass_span() {
  awk -v k="$2" -v b="$3" '$1 == "PASS" && $4 < k && $5 > b {print $2, $3, $4, $5}' <<<"$1"
}

# pass_last PASSES: the number of the last pass that ended.
pass_last() { awk '$1 == "PASS" {i = $2} END {print i}' <<<"$1"; }

# pass_verdict TAG LOOP_RC T_BACK WHAT: the checks on a pass loop in node 0 whose target crashed:
# the loop (exit status LOOP_RC) ended with no pass failed; one pass began before the target was
# gone (t_dead, crash_node's) and ended after T_BACK, when WHAT (the target back); that pass was
# the loop's last.  Sets passes (the log), span ("i rc t0 t1" of the pass in flight) and last
# (the number of the last pass that ended).
pass_verdict() {
  local tag=$1 lrc=$2 t_back=$3 what=$4 bad began
  passes=$(on 0 cat "/tmp/$tag-passes")
  echo "--- the write passes (node 0's uptime):"; echo "$passes"
  bad=$(awk '$1 == "PASS" && $3 != 0' <<<"$passes")
  check "node 0: the write loop exits 0 (got $lrc) and no pass failed" \
    test "$lrc" -eq 0 -a -n "$passes" -a -z "$bad"
  span=$(pass_span "$passes" "$t_dead" "$t_back")
  last=$(pass_last "$passes")
  check "node 0: a pass began before node 1 was gone and ended after $what (pass ${span:-none})" \
    test -n "$span" -a "$(wc -l <<<"$span")" -eq 1
  check "node 0: that pass was the loop's last (last pass ${last:-none})" \
    test -n "$span" -a "${last:-0}" = "${span%% *}"
  began=$(awk -v a="$t_kill" -v s="$span" 'BEGIN {split(s, f, " "); printf "%+.2f", f[3] - a}')
  echo "pass in flight at the kill: ${span%% *} (begun at $began s from the kill);" \
       "the loop's last pass: $last"
}
