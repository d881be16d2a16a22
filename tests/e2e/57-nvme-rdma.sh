#!/bin/bash
# nvme-rdma: NVMe over Fabrics on pib, the kernel's own host and target.  Node 1 exports a
# RAM-backed namespace (null_blk, memory_backed, 128 MiB) through nvmet-rdma (pib-nvmet, over
# configfs) on ib0's address; node 0 connects with Debian's nvme-cli (`nvme connect -t rdma`),
# which makes nvme-rdma resolve the address through rdma_cm (IPoIB, SA path record) and open an
# admin queue and one I/O queue per CPU: RC QPs whose commands travel as SENDs and whose data
# the target moves with RDMA READ/WRITE through FRWR-registered rkeys, invalidated by
# SEND_WITH_INV or LOCAL_INV.  Checked:
#   - the controller shows up with transport rdma (sysfs, `nvme list-subsys`), the namespace in
#     `nvme list`;
#   - a 64 MiB random pattern written with O_DIRECT (the page cache cannot answer the read) and
#     read back the same way has the pattern's sha256, and the target's null_blk has it too;
#   - `nvme disconnect` removes the controller; the target goes down cleanly;
#   - neither kernel logs an oops, BUG or WARNING.
# Printed for the record: the time `nvme connect` takes, the dd write and read rates.
source "$(dirname "$0")/lib.sh"

NQN=nqn.2026-11.org.pib:nvmet-ram
HOSTNQN=nqn.2026-11.org.pib:host-node0
TARGET=10.13.0.2
MIB=64

cleanup() {
  on 0 nvme disconnect -n "$NQN" >/dev/null 2>&1
  on 1 pib-nvmet down >/dev/null 2>&1
  "$PIBVM" ipoib down >/dev/null 2>&1
}
trap cleanup EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish
dmesg_mark 0; dmesg_mark 1

check "node 1: pib-nvmet up (null_blk namespace exported on $TARGET:4420)" on 1 pib-nvmet up 128
on 1 pib-nvmet status
check "node 1: nvmet-rdma listens on rdma_cm port 4420" wait_cm_listen 1 4420

on 0 modprobe nvme_rdma
t0=$(date +%s%N)
out=$(on_t 0 120 nvme connect -t rdma -a "$TARGET" -s 4420 -n "$NQN" --hostnqn="$HOSTNQN" 2>&1); rc=$?
t1=$(date +%s%N)
echo "--- nvme connect ($(( (t1 - t0) / 1000000 )) ms): $out"
check "node 0: nvme connect -t rdma exits 0 (got $rc)" test $rc -eq 0

# The controller whose subsystem is ours, and the namespace's block device: with the kernel's
# native multipath (Debian's default) it hangs off the subsystem, not the controller.  The
# namespace scan runs after connect returns: wait at most a few seconds.
ctrl=$(on 0 sh -c "grep -lx '$NQN' /sys/class/nvme/nvme*/subsysnqn" | head -n1 | cut -d/ -f5)
check "node 0: a controller for $NQN ($ctrl)" test -n "$ctrl"
check "node 0: $ctrl's transport is rdma" test "$(on 0 cat "/sys/class/nvme/$ctrl/transport")" = rdma
check "node 0: $ctrl's address is $TARGET:4420" \
  grep -q "traddr=$TARGET,trsvcid=4420" <<<"$(on 0 cat "/sys/class/nvme/$ctrl/address")"
dev=
for ((i = 0; i < 50; i++)); do
  dev=$(on 0 sh -c "for s in /sys/class/nvme-subsystem/*; do
                      grep -qx '$NQN' \$s/subsysnqn && ls -d \$s/nvme*n* 2>/dev/null; done" |
        head -n1 | xargs -r basename)
  [ -n "$dev" ] && on 0 test -b "/dev/$dev" && break
  dev=; sleep 0.2
done
check "node 0: the namespace's block device exists (/dev/$dev)" test -n "$dev"
echo "--- nvme list-subsys"; lsub=$(on 0 nvme list-subsys 2>&1); echo "$lsub"
check "nvme list-subsys: $NQN over rdma to $TARGET" \
  grep -q "$ctrl rdma traddr=$TARGET,trsvcid=4420 live" <<<"$lsub"
echo "--- nvme list"; list=$(on 0 nvme list 2>&1); echo "$list"
check "nvme list shows /dev/$dev" grep -q "^/dev/$dev " <<<"$list"
size=$(on 0 cat "/sys/class/block/$dev/size")
check "node 0: /dev/$dev has the target's 128 MiB (got $((size / 2048)) MiB)" test "$size" -eq $((128 * 2048))

# The round trip, and the target's copy.
direct_round_trip 0 "/dev/$dev" $MIB
tgt=$(on_t 1 300 sh -c "dd if=/dev/nullb0 bs=1M count=$MIB 2>/dev/null | sha256sum" | cut -d' ' -f1)
echo "target   sha256 $tgt (node 1's /dev/nullb0)"
check "the $MIB MiB read back over NVMe/RDMA has the pattern's sha256" test -n "$rt_want" -a "$rt_got" = "$rt_want"
check "node 1's null_blk holds the pattern" test "$tgt" = "$rt_want"

out=$(on_t 0 120 nvme disconnect -n "$NQN" 2>&1); rc=$?
echo "--- nvme disconnect: $out"
check "node 0: nvme disconnect exits 0 and disconnects 1 controller" \
  test $rc -eq 0 -a -n "$(grep 'disconnected 1 controller' <<<"$out")"
check "node 0: $ctrl is gone" on 0 test ! -e "/sys/class/nvme/$ctrl"
check "node 1: pib-nvmet down" on 1 pib-nvmet down
no_splats 0; no_splats 1

finish
