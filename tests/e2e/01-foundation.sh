#!/bin/bash
# Foundation: in each of two guests linked back-to-back, ibv_devinfo shows pib_0 with the port
# ACTIVE, distinct nonzero LIDs (the subnet manager's) and distinct node GUIDs; the kernel log has
# no warnings from the driver or the RDMA core; the module unloads and reloads cleanly and the
# subnet manager brings the port back.
# e2e-checks: 34
source "$(dirname "$0")/lib.sh"

# dmesg_warnings NODE: kernel messages at warning level or worse (<0>..<4>) that concern RDMA or
# pib, plus any WARN/BUG splat anywhere.  The one expected line is the taint notice for an
# out-of-tree module, which the kernel prints for every such module.
dmesg_warnings() {
  on "$1" dmesg -r | grep -vF 'loading out-of-tree module taints kernel' |
    awk '/WARNING:|BUG:|Call Trace|Oops/ {print; next}
         /^<[0-4]>/ && /pib|ib_|infiniband|rdma|uverbs/ {print}'
}

devinfo() { on "$1" ibv_devinfo -v -d pib_0; }

declare -A lid guid
for n in 0 1; do
  out=$(devinfo $n)
  echo "--- node $n: ibv_devinfo -v (head)"; head -n 30 <<<"$out"
  check "node $n: ibv_devinfo lists pib_0" grep -q 'hca_id:[[:space:]]*pib_0' <<<"$out"
  check "node $n: port 1 is PORT_ACTIVE" grep -q 'state:[[:space:]]*PORT_ACTIVE (4)' <<<"$out"
  check "node $n: physical state LINK_UP" grep -q 'phys_state:[[:space:]]*LINK_UP (5)' <<<"$out"
  check "node $n: link layer InfiniBand" grep -q 'link_layer:[[:space:]]*InfiniBand' <<<"$out"
  check "node $n: transport InfiniBand" grep -q 'transport:[[:space:]]*InfiniBand' <<<"$out"
  lid[$n]=$(field "$out" port_lid)
  guid[$n]=$(field "$out" node_guid)
  check "node $n: LID '${lid[$n]}' is nonzero" test -n "${lid[$n]}" -a "${lid[$n]:-0}" != 0
  check "node $n: node GUID '${guid[$n]}' is nonzero" test -n "${guid[$n]}" -a "${guid[$n]}" != 0000:0000:0000:0000
  check "node $n: vendor_part_id is the pib device (4336 = 0x10f0)" grep -q 'vendor_part_id:[[:space:]]*4336' <<<"$out"
done
check "LIDs are distinct (${lid[0]} vs ${lid[1]})" test "${lid[0]}" != "${lid[1]}"
check "node GUIDs are distinct (${guid[0]} vs ${guid[1]})" test "${guid[0]}" != "${guid[1]}"

# The uverbs device exists and the provider opens a context on it: ibv_devinfo did that above
# (it prints nothing for a device whose provider is missing); make it explicit.
for n in 0 1; do
  check "node $n: /dev/infiniband/uverbs0 exists" on $n test -c /dev/infiniband/uverbs0
  check "node $n: sysfs names the driver pib" on $n sh -c 'readlink /sys/class/infiniband/pib_0/device/driver | grep -q /pib$'
done

# Module unload and reload: the device goes away and comes back ACTIVE.  opensm on node 0 holds
# the port's umad and issm devices, so, as on any host, it is stopped before the driver goes and
# started again after; node 1's port it brings back by itself, on its next sweep.
check "node 0: the subnet manager stops" "$PIBVM" sm stop 0
for n in 0 1; do
  check "node $n: rmmod pib" on $n rmmod pib
  check "node $n: pib_0 is gone" on $n sh -c '! test -e /sys/class/infiniband/pib_0'
done
for n in 0 1; do
  check "node $n: modprobe pib" on $n modprobe pib
done
check "node 0: the subnet manager starts again" "$PIBVM" sm start 0
for n in 0 1; do
  check "node $n: port ACTIVE again after reload (within ${SM_ACTIVATE_S} s)" \
    wait_port $n ACTIVE "$SM_ACTIVATE_S"
done

for n in 0 1; do
  w=$(dmesg_warnings $n)
  [ -n "$w" ] && { echo "--- node $n: kernel warnings"; echo "$w"; }
  check "node $n: no RDMA/pib warnings or splats in dmesg" test -z "$w"
done
finish
