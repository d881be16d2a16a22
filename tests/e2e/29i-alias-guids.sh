#!/bin/bash
# alias-guids: the port's GID table has 8 entries (include/pib_hw.h): entry 0 is the port GID,
# 1..7 are subnet_prefix:alias GUID, for the alias GUIDs an SM assigns with SubnSet(GUIDInfo)
# (IBTA 14.2.5.5), empty until then.  Node 0 (the SM's node) plays the SM's part with
# pib-guidinfo (tests/guest/pib_guidinfo.c, libibmad): infiniband-diags reads GUIDInfo but
# cannot set it.  Checked:
#   - 8 GID entries in sysfs, index 1 empty (zeros), `smpquery GUIDInfo` lists the port GUID and
#     7 empty entries; ib_core's GID table (`ibv_devinfo -v`) holds index 0 only;
#   - an alias assigned to each node becomes its GID index 1 (the device's GID_CHANGE event
#     makes ib_core reread the table), `smpquery GUIDInfo` shows it, and entry 0 stays the port
#     GUID whatever the Set says;
#   - ibv_rc_pingpong and ibv_ud_pingpong with -g 1 (a GRH from and to the alias GIDs) pass
#     between the nodes, and no packet was dropped for its DGID;
#   - an alias set back to 0 empties the entry again.
# e2e-checks: 18
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

A0=0x0002c90300aa0100   # node 0's alias GUID
A1=0x0002c90300aa0101   # node 1's
ZERO=0000:0000:0000:0000:0000:0000:0000:0000
gid_of() { on "$1" cat "/sys/class/infiniband/pib_0/ports/1/gids/$2"; }
# The GID an alias GUID makes with the default subnet prefix, as sysfs writes it.
alias_gid() { printf 'fe80:0000:0000:0000:%s:%s:%s:%s' "${1:2:4}" "${1:6:4}" "${1:10:4}" "${1:14:4}"; }
# until_gid NODE INDEX WANT: poll until sysfs shows it (a hang guard of 100 looks).
until_gid() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$(gid_of "$1" "$2")" = "$3" ] && return 0
    sleep 0.1
  done
  return 1
}
trap 'on 0 pib-guidinfo "$lid0" 1 0 >/dev/null 2>&1; on 0 pib-guidinfo "$lid1" 1 0 >/dev/null 2>&1' EXIT
lid0=$(port_lid 0) lid1=$(port_lid 1)
pguid1=$(gid_of 1 0 | cut -d: -f5-8 | tr -d :)     # node 1's port GUID, 16 hex digits
dmesg_mark 0; dmesg_mark 1

check "node 1: 8 GID entries in sysfs" test "$(on 1 ls /sys/class/infiniband/pib_0/ports/1/gids | wc -l)" -eq 8
check "node 1: GID index 1 is empty" test "$(gid_of 1 1)" = "$ZERO"
out=$(on 0 smpquery GUIDInfo "$lid1" 2>&1); echo "--- smpquery GUIDInfo $lid1"; echo "$out"
check "smpquery GUIDInfo: capacity 8, node 1's port GUID ($pguid1), 7 empty entries" \
  bash -c 'grep -q "^8 guids capacity" <<<"$1" && grep -qi "0x$2" <<<"$1" &&
           test "$(grep -Eoi "0x0{16}" <<<"$1" | wc -l)" -eq 7' _ "$out" "$pguid1"
v=$(on 1 ibv_devinfo -v -d pib_0)
check "ibv_devinfo -v: ib_core holds GID index 0 only" \
  bash -c 'grep -q "GID\[  0\]" <<<"$1" && ! grep -q "GID\[  1\]" <<<"$1"' _ "$v"

out=$(on 0 pib-guidinfo "$lid1" 0 0x1111 1 "$A1" 2>&1); rc=$?
echo "--- pib-guidinfo $lid1 0 0x1111 1 $A1"; echo "$out"
check "node 0 assigns node 1's alias GUID 1 (exit $rc)" test "$rc" -eq 0
check "  ... the answer keeps entry 0 (read-only) and holds the alias" \
  bash -c 'grep -q "^1 $2\$" <<<"$1" && ! grep -q "^0 0x0000000000001111" <<<"$1"' _ "$out" "$A1"
check "node 1: GID index 1 is the alias GID ($(alias_gid $A1))" until_gid 1 1 "$(alias_gid $A1)"
v=$(on 1 ibv_devinfo -v -d pib_0)
check "ibv_devinfo -v: ib_core reread the table (GID index 1)" grep -q "GID\[  1\]" <<<"$v"
out=$(on 0 smpquery GUIDInfo "$lid1" 2>&1)
check "smpquery GUIDInfo shows the alias" grep -qi "${A1#0x}" <<<"$out"
check "node 0 assigns its own alias GUID 1" on 0 pib-guidinfo "$lid0" 1 "$A0"
check "node 0: GID index 1 is the alias GID" until_gid 0 1 "$(alias_gid $A0)"

drops0=$(hw_counter 0 rx_drop_dlid) drops1=$(hw_counter 1 rx_drop_dlid)
check "ibv_rc_pingpong -g 1 (GRH between the alias GIDs)" pingpong 0 1 -g 1 -n 100
pair "ibv_ud_pingpong -g 1" 18515 ibv_ud_pingpong -d pib_0 -g 1 -n 100 -- \
  ibv_ud_pingpong -d pib_0 -g 1 -n 100 node0
check "no packet dropped for its DGID (rx_drop_dlid $drops0 $drops1)" \
  test "$(hw_counter 0 rx_drop_dlid) $(hw_counter 1 rx_drop_dlid)" = "$drops0 $drops1"

check "node 0 takes node 1's alias back (GUID 0)" on 0 pib-guidinfo "$lid1" 1 0
check "node 1: GID index 1 is empty again" until_gid 1 1 "$ZERO"
no_splats 1
finish
