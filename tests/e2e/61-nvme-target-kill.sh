#!/bin/bash
# nvme-target-kill: NVMe over Fabrics (RDMA) rides out its target's crash.  Node 1 reboots with a
# disk (pibvm's --disk: a raw file on virtio-blk that outlives the guest) and exports it through
# nvmet-rdma (pib-nvmet up --dev /dev/vda, fixed serial and namespace IDs).  Node 0 connects
# with `nvme connect -t rdma --ctrl-loss-tmo --reconnect-delay`, writes a pattern to region A,
# then rewrites region B with O_DIRECT in a loop, each pass with a pattern of its own
# (storage-kill.sh).  While a pass is in flight, node 1's QEMU is SIGKILLed (`pibvm kill 1`, a
# crash: no shutdown, no disconnect).  Node 0's RC QPs give up after their retries (or the
# keep-alive times out), nvme-rdma starts its error recovery, and its requests wait; node 1
# boots again with the same disk, IPoIB and pib-nvmet come back, and nvme-rdma's reconnect
# (every RECONNECT_S, for at most CTRL_LOSS_S) finds the target and resubmits what was in
# flight.  The loop is told to stop right after the kill, so the pass in flight is its last.
# Checked:
#   - node 1's disk is there after its first reboot; the controller connects over rdma;
#   - one pass began before node 1 was gone and ended with dd's exit 0 after the new target
#     started (its I/O waited, it was not failed), it was the loop's last, and no pass failed;
#   - the controller is live again, and node 0's kernel says nvme-rdma reconnected;
#   - region A reads back over NVMe/RDMA (O_DIRECT) with its pattern's sha256; region B holds,
#     byte for byte, the pattern of the pass in flight at the kill, not an older pass's; the
#     target's own disk holds both;
#   - disconnect and target shutdown are clean; no oops, BUG or WARNING in node 0's kernel
#     (through the whole test) or in node 1's (since its second boot).
# Printed for the record: the time from the kill to the controller live again.
# e2e-checks: 24
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"
source "$(dirname "$0")/storage-kill.sh"

NQN=nqn.2026-11.org.pib:nvmet-ram
HOSTNQN=nqn.2026-11.org.pib:host-node0
TARGET=10.13.0.2
DISK_MIB=128
MIB=32                          # each region; A at 0, B at $MIB MiB
CTRL_LOSS_S=180                 # nvme-rdma gives the controller up after this long
RECONNECT_S=1                   # and tries to reconnect this often
loop_pid=

cleanup() {
  on 0 touch /tmp/tk-stop >/dev/null 2>&1
  on_t 0 120 nvme disconnect -n "$NQN" >/dev/null 2>&1
  [ -n "$loop_pid" ] && wait "$loop_pid" 2>/dev/null
  restore_node1 >/dev/null 2>&1
  on 1 pib-nvmet down >/dev/null 2>&1
  pass_cleanup tk
}
trap cleanup EXIT
trap 'exit 1' INT TERM
dmesg_mark 0

# node 1's target: IPoIB, then pib-nvmet on its disk (storage_up).  Sets t_start to node 0's
# uptime before the target starts (it cannot serve anything earlier) and t_up once the host
# sees it listen (by then nvme-rdma may have reconnected already: the host learns it a little
# late).
target_up() {
  t_start=$(on 0 cut -d' ' -f1 /proc/uptime)
  storage_up 4420 on 1 pib-nvmet up --dev /dev/vda
}

disk_reboot $DISK_MIB
size=$(on 1 cat /sys/class/block/vda/size 2>/dev/null)
check "node 1: /dev/vda has $DISK_MIB MiB (got $((${size:-0} / 2048)) MiB)" test "${size:-0}" -eq $((DISK_MIB * 2048))
check "IPoIB datagram up on node 0" "$PIBVM" ipoib datagram 0
check "node 1: IPoIB, pib-nvmet up --dev /dev/vda, listening on 4420" target_up
echo "--- $(on 1 pib-nvmet status 2>&1)"

on 0 modprobe nvme_rdma
out=$(on_t 0 120 nvme connect -t rdma -a "$TARGET" -s 4420 -n "$NQN" --hostnqn="$HOSTNQN" \
        --ctrl-loss-tmo=$CTRL_LOSS_S --reconnect-delay=$RECONNECT_S 2>&1); rc=$?
echo "--- nvme connect: $out"
check "node 0: nvme connect -t rdma (ctrl_loss_tmo $CTRL_LOSS_S s, reconnect_delay $RECONNECT_S s) exits 0" test $rc -eq 0
ctrl=$(nvme_ctrl 0 "$NQN")
dev=$(nvme_ns_dev 0 "$NQN")
check "node 0: controller $ctrl live with a namespace (/dev/$dev)" \
  test -n "$dev" -a "$(on 0 cat "/sys/class/nvme/$ctrl/state" 2>/dev/null)" = live
[ -n "$dev" ] || finish

# Region A's pattern and region B's base (storage-kill.sh), made in node 0's RAM.
pass_bases tk $MIB
check "node 0: region A written (O_DIRECT)" \
  on_t 0 300 dd if=/tmp/tk-a of="/dev/$dev" bs=1M count=$MIB oflag=direct status=none

# Region B, a new pattern every pass until told to stop, and node 1 crashed under a pass.
check "node 0: region B's write loop runs (pass 1 done, pass 2 begun)" \
  pass_loop 0 tk /tmp/tk-b $MIB /dev/$dev $MIB
loop_pid=$pl_pid
crash_under_loop tk
check "node 1: IPoIB, pib-nvmet up --dev /dev/vda again" target_up

# nvme-rdma reconnects every RECONNECT_S until CTRL_LOSS_S after the loss.
state=
end=$((SECONDS + CTRL_LOSS_S))
while [ $SECONDS -le $end ]; do
  state=$(on 0 cat "/sys/class/nvme/$ctrl/state" 2>/dev/null)
  [ "$state" = live ] && break
  sleep 0.5
done
t_live=$(on 0 cut -d' ' -f1 /proc/uptime)
rec=$(awk -v a="$t_kill" -v b="$t_live" 'BEGIN {printf "%.1f", b - a}')
start=$(awk -v a="$t_kill" -v b="$t_start" 'BEGIN {printf "%.1f", b - a}')
up=$(awk -v a="$t_kill" -v b="$t_up" 'BEGIN {printf "%.1f", b - a}')
echo "node 0: kill at $t_kill s (node 1 gone by $t_dead s), target starting at +$start s and" \
     "seen exporting at +$up s, controller live at +$rec s"
check "node 0: $ctrl is live again within ctrl_loss_tmo (state $state)" test "$state" = live
klog=$(dmesg_since 0 | grep -E "nvme|$ctrl")
echo "--- node 0's nvme log since the start:"; echo "$klog"
check "node 0: nvme-rdma logged its reconnect" grep -q "$ctrl: Successfully reconnected" <<<"$klog"

wait "$loop_pid"; lrc=$?; loop_pid=
# The pass in flight: begun before node 1 was gone, ended (exit 0) after the new target started.
pass_verdict tk "$lrc" "$t_start" "the new target started"

got_a=$(on_t 0 300 sh -c "dd if=/dev/$dev bs=1M count=$MIB iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
echo "region A sha256 $sum_a, read back $got_a"
check "region A (written before the crash) reads back intact over NVMe/RDMA" test "$got_a" = "$sum_a"
check "region B holds pass ${last:-none}'s pattern, byte for byte, read over NVMe/RDMA" \
  region_holds 0 /tmp/tk-b $MIB "${last:-0}" if=/dev/$dev skip=$MIB
sum_b=$(pass_sum 0 /tmp/tk-b $MIB "${last:-0}")
tgt_a=$(on_t 1 300 sh -c "dd if=/dev/vda bs=1M count=$MIB iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
tgt_b=$(on_t 1 300 sh -c "dd if=/dev/vda bs=1M count=$MIB skip=$MIB iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
echo "node 1's disk: region A $tgt_a, region B $tgt_b (pass $last's pattern: $sum_b)"
check "node 1's disk holds region A's pattern and pass ${last:-none}'s" test "$tgt_a" = "$sum_a" -a "$tgt_b" = "$sum_b"

out=$(on_t 0 120 nvme disconnect -n "$NQN" 2>&1); rc=$?
check "node 0: nvme disconnect exits 0 ($out)" test $rc -eq 0
check "node 1: pib-nvmet down" on 1 pib-nvmet down
no_splats 0; no_splats 1

finish
