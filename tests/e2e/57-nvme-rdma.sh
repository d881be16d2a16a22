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
#   - fio's verify: 64 MiB of 4 KiB random writes at queue depth 16, each block checked back;
#   - `nvme disconnect` removes the controller; the target goes down cleanly;
#   - neither kernel logs an oops, BUG or WARNING.
# Printed for the record: the time `nvme connect` takes, the dd write and read rates.
# e2e-checks: 21
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

# The controller whose subsystem is ours, and the namespace's block device (lib.sh).
ctrl=$(nvme_ctrl 0 "$NQN")
check "node 0: a controller for $NQN ($ctrl)" test -n "$ctrl"
check "node 0: $ctrl's transport is rdma" test "$(on 0 cat "/sys/class/nvme/$ctrl/transport")" = rdma
check "node 0: $ctrl's address is $TARGET:4420" \
  grep -q "traddr=$TARGET,trsvcid=4420" <<<"$(on 0 cat "/sys/class/nvme/$ctrl/address")"
dev=$(nvme_ns_dev 0 "$NQN")
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

# fio's own verification, with I/O in flight: 4 KiB random writes at queue depth 16 (io_uring,
# O_DIRECT), each block stamped with its offset and a crc32c, then every block read back and
# checked.  fio exits non-zero on the first bad block (verify_fatal).
out=$(on_t 0 600 fio --name=verify --filename="/dev/$dev" --direct=1 --ioengine=io_uring \
        --iodepth=16 --rw=randwrite --bs=4k --size=${MIB}M --verify=crc32c --do_verify=1 \
        --verify_fatal=1 2>&1); rc=$?
echo "--- fio verify:"; echo "$out" | grep -E "err=|IOPS|READ:|WRITE:|verify"
check "node 0: fio writes $MIB MiB in 4 KiB random blocks at QD 16 and verifies them (exit $rc)" \
  test $rc -eq 0
check "node 0: fio read every block back (a READ group) with no error" \
  bash -c 'grep -q "READ: bw=" <<<"$1" && grep -q "err= 0" <<<"$1" && ! grep -q "err= [1-9]" <<<"$1"' _ "$out"

out=$(on_t 0 120 nvme disconnect -n "$NQN" 2>&1); rc=$?
echo "--- nvme disconnect: $out"
check "node 0: nvme disconnect exits 0 and disconnects 1 controller" \
  test $rc -eq 0 -a -n "$(grep 'disconnected 1 controller' <<<"$out")"
check "node 0: $ctrl is gone" on 0 test ! -e "/sys/class/nvme/$ctrl"
check "node 1: pib-nvmet down" on 1 pib-nvmet down
no_splats 0; no_splats 1

finish
