#!/bin/bash
# srp: the SCSI RDMA Protocol on pib, the kernel's own initiator and target.  Node 1 runs
# ib_srpt under LIO (pib-srpt, over configfs) with a 128 MiB RAM disk (brd through LIO's block
# backstore) as LUN 0, open to node 0's port GUID.  Node 0 finds the target the way a real
# host does, with rdma-core's ibsrpdm (srp_daemon -c -o): an SA query for the ports whose
# CapabilityMask says IsDeviceManagementSupported (ib_srpt sets it through modify_port), then the
# DM class's IOUnitInfo, IOControllerProfile and ServiceEntries MADs to that port's GSI, answered
# by ib_srpt's MAD agent.  Its target string goes to ib_srp's add_target, which logs in through
# ib_cm (an SA path record, a CM REQ to ib_srpt's service ID, SRP_LOGIN_REQ in the private data)
# and scans the SCSI host.  Commands travel as SENDs; ib_srpt moves the data with RDMA READ and
# WRITE (rdma_rw) through rkeys ib_srp registers with FRWR.  Checked:
#   - node 1's port advertises device management (PortInfo CapabilityMask bit 19);
#   - ibsrpdm on node 0 finds node 1's I/O controller (its node GUID as ioc_guid, its port GID);
#   - add_target logs in: an SRP remote port, a SCSI disk from ib_srp with LIO's INQUIRY
#     identity and the target's 128 MiB, and a session for node 0's ACL on the target;
#   - a 64 MiB random pattern written with O_DIRECT and read back the same way has the
#     pattern's sha256, and the target's RAM disk has it too; LIO's statistics for node 0's
#     ACL count the megabytes written and read;
#   - deleting the remote port removes the disk; pib-srpt down is clean;
#   - neither kernel logs an oops, BUG or WARNING.
# Printed for the record: the discovery and login times, the dd write and read rates.
# e2e-checks: 21
source "$(dirname "$0")/lib.sh"

MIB=64
SIZE_MIB=128
SRP=/sys/class/infiniband_srp/srp-pib_0-1

cleanup() {
  on 0 sh -c 'for p in /sys/class/srp_remote_ports/port-*; do [ -e $p/delete ] && echo 1 > $p/delete; done' \
    >/dev/null 2>&1
  on 1 pib-srpt down >/dev/null 2>&1
}
trap cleanup EXIT
dmesg_mark 0; dmesg_mark 1

# Port GUIDs in ib_srpt's spelling (xxxx:xxxx:xxxx:xxxx), node 1's GID and node GUID in hex.
guid0=$(on 0 cut -d: -f5-8 /sys/class/infiniband/pib_0/ports/1/gids/0)
gid1=$(on 1 cat /sys/class/infiniband/pib_0/ports/1/gids/0 | tr -d :)
nguid1=$(on 1 cat /sys/class/infiniband/pib_0/node_guid | tr -d :)
echo "node 0 port GUID $guid0; node 1 GID $gid1, node GUID $nguid1"

out=$(on_t 1 120 pib-srpt up $SIZE_MIB "$guid0" 2>&1); rc=$?
echo "--- pib-srpt up: $out"
check "node 1: pib-srpt up $SIZE_MIB $guid0 (exit $rc)" test $rc -eq 0
echo "--- pib-srpt status: $(on 1 pib-srpt status 2>&1)"
# IsDeviceManagementSupported is bit 19 of PortInfo.CapabilityMask (IB_PORT_DEVICE_MGMT_SUP).
caps=$(on 1 cat /sys/class/infiniband/pib_0/ports/1/cap_mask)
check "node 1: pib_0 port 1 advertises device management (cap_mask $caps)" \
  test $(( caps & 0x80000 )) -ne 0

# sd_mod binds the disk: the guest has no udev to load it on the SCSI device's modalias.
on 0 modprobe ib_srp
on 0 modprobe sd_mod
check "node 0: ib_srp registered pib_0 port 1 ($SRP)" on 0 test -e $SRP/add_target

# ibsrpdm on pib_0 port 1's umad device.  opensm learns of the new capability from the port's
# trap 144 or at its next sweep; until then the SA lists no DM port: retry for as long as the
# SM takes to act on a port change (lib.sh's SM_ACTIVATE_S).
umad=$(on 0 sh -c 'for d in /sys/class/infiniband_mad/umad*; do
                     [ "$(cat $d/ibdev)" = pib_0 ] && [ "$(cat $d/port)" = 1 ] && basename $d; done')
t0=$(date +%s%N) end=$((SECONDS + SM_ACTIVATE_S)) tgt=
while :; do
  dm=$(on_t 0 60 ibsrpdm -c -d "/dev/infiniband/$umad" 2>&1)
  tgt=$(grep -m1 "ioc_guid=$nguid1" <<<"$dm")
  [ -n "$tgt" ] || [ $SECONDS -ge $end ] && break
  sleep 1
done
t1=$(date +%s%N)
echo "--- ibsrpdm -c -d /dev/infiniband/$umad ($(( (t1 - t0) / 1000000 )) ms): $dm"
check "node 0: ibsrpdm finds node 1's I/O controller (ioc_guid $nguid1)" test -n "$tgt"
check "node 0: its target string names node 1's port GID and P_Key ffff" \
  grep -q "dgid=$gid1,pkey=ffff," <<<"$tgt"

t0=$(date +%s%N)
out=$(on_t 0 120 sh -c "echo '$tgt' > $SRP/add_target" 2>&1); rc=$?
t1=$(date +%s%N)
echo "--- add_target ($(( (t1 - t0) / 1000000 )) ms): $out"
check "node 0: add_target logs in to node 1 (exit $rc)" test $rc -eq 0
rport=$(on 0 sh -c 'ls -d /sys/class/srp_remote_ports/port-* 2>/dev/null' | head -n1)
check "node 0: an SRP remote port ($rport) in state running" \
  test -n "$rport" -a "$(on 0 cat "$rport/state" 2>/dev/null)" = running

# The SCSI disk whose host is ib_srp's.  The scan runs after add_target returns: wait a few s.
dev=
for ((i = 0; i < 50; i++)); do
  dev=$(on 0 sh -c 'for b in /sys/block/sd*; do
                      h=$(readlink -f $b/device | sed -n "s|.*/\(host[0-9]*\)/.*|\1|p")
                      [ "$(cat /sys/class/scsi_host/$h/proc_name 2>/dev/null)" = ib_srp ] &&
                        basename $b; done 2>/dev/null' | head -n1)
  [ -n "$dev" ] && on 0 test -b "/dev/$dev" && break
  dev=; sleep 0.2
done
check "node 0: ib_srp's SCSI disk exists (/dev/$dev)" test -n "$dev"
vendor=$(on 0 cat "/sys/block/$dev/device/vendor" 2>/dev/null | tr -d ' ')
model=$(on 0 cat "/sys/block/$dev/device/model" 2>/dev/null | sed 's/ *$//')
echo "--- /dev/$dev: vendor '$vendor', model '$model'"
check "node 0: /dev/$dev is LIO's (INQUIRY vendor LIO-ORG, got '$vendor')" test "$vendor" = LIO-ORG
size=$(on 0 cat "/sys/class/block/$dev/size" 2>/dev/null)
check "node 0: /dev/$dev has the target's $SIZE_MIB MiB (got $((${size:-0} / 2048)) MiB)" \
  test "${size:-0}" -eq $((SIZE_MIB * 2048))
# LIO's per-ACL statistics of LUN 0 (SCSI-MIB's scsiAuthIntrTable and scsiAttIntrPortTable):
# node 0's session, then the data it moved.
wwn=$(on 1 cut -d: -f5-8 /sys/class/infiniband/pib_0/ports/1/gids/0)
STAT=/sys/kernel/config/target/srpt/$wwn/tpgt_1/acls/$guid0/lun_0/statistics
acl_stat() { on 1 cat "$STAT/$1" 2>/dev/null; }
ident=$(acl_stat scsi_att_intr_port/port_ident)
echo "--- node 1: ACL $guid0: $(acl_stat scsi_auth_intr/att_count) session(s), port_ident $ident"
check "node 1: LIO has node 0's session on its ACL (port_ident $ident)" \
  test "$(acl_stat scsi_auth_intr/att_count)" = 1 -a "${ident%%+*}" = "$guid0"

# The round trip, and the target's copy (O_DIRECT on the RAM disk: no stale page cache).
direct_round_trip 0 "/dev/$dev" $MIB
tgt_sum=$(on_t 1 300 sh -c "dd if=/dev/ram0 bs=1M count=$MIB iflag=direct 2>/dev/null | sha256sum" |
          cut -d' ' -f1)
echo "target   sha256 $tgt_sum (node 1's /dev/ram0)"
check "the $MIB MiB read back over SRP has the pattern's sha256" test -n "$rt_want" -a "$rt_got" = "$rt_want"
check "node 1's RAM disk holds the pattern" test "$tgt_sum" = "$rt_want"
wmb=$(acl_stat scsi_auth_intr/write_mbytes) rmb=$(acl_stat scsi_auth_intr/read_mbytes)
echo "node 1: LIO counted for node 0: $(acl_stat scsi_auth_intr/num_cmds) commands, $wmb MB written, $rmb MB read"
# direct_round_trip writes the pattern once and reads it twice.
check "node 1: LIO counted node 0's $MIB MiB written and 2 x $MIB MiB read (got $wmb, $rmb)" \
  test "${wmb:-0}" -ge $MIB -a "${rmb:-0}" -ge $((2 * MIB))

check "node 0: deleting $rport logs out" on_t 0 120 sh -c "echo 1 > $rport/delete"
gone=1
for ((i = 0; i < 50; i++)); do
  on 0 test -e "/sys/block/$dev" || { gone=0; break; }
  sleep 0.2
done
check "node 0: /dev/$dev is gone" test $gone -eq 0
check "node 1: pib-srpt down" on_t 1 120 pib-srpt down
check "node 1: ib_srpt unloaded" on 1 sh -c '! grep -q "^ib_srpt " /proc/modules'
no_splats 0; no_splats 1

finish
