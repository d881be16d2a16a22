#!/bin/bash
# fabric: the two guests are a subnet that opensm (node 0, started by pibvm up) manages, and
# infiniband-diags see it as any InfiniBand fabric:
#   - both ports ACTIVE with distinct LIDs from the SM, which ibstat shows with the SM's LID
#     (node 0's, where opensm runs);
#   - ibnetdiscover from either node finds the 2 CAs and the one link between them;
#   - smpquery nodeinfo, nodedesc and portinfo answer by LID and by directed route (-D 0,1: the
#     node at the other end of port 1), with the fields the SM set; a new node description
#     (sysfs, modify_device) is what the SMA answers next;
#   - saquery has both nodes' records, sminfo names the master SM, iblinkinfo shows the link;
#   - perfquery's counters (the PMA's) grow by at least what ib_write_bw sent, and
#     perfquery -R clears them.
# e2e-checks: 51
source "$(dirname "$0")/lib.sh"

GUID0=$("$PIBVM" guid node 0)    # the node GUIDs pibvm gave the devices (tools/pibvmlib/topology.py)
GUID1=$("$PIBVM" guid node 1)
lid0=$(port_lid 0) lid1=$(port_lid 1)
echo "LIDs: node 0 $lid0, node 1 $lid1"
check "the SM gave both ports LIDs, distinct and nonzero ($lid0, $lid1)" \
  test "$lid0" -gt 0 -a "$lid1" -gt 0 -a "$lid0" != "$lid1"

# --- ibstat: state, LID and the SM's LID -----------------------------------------------------
for n in 0 1; do
  out=$(on $n ibstat pib_0)
  echo "--- node $n: ibstat pib_0"; echo "$out"
  lid=$([ $n = 0 ] && echo "$lid0" || echo "$lid1")
  check "node $n: ibstat: State Active" grep -q 'State: Active' <<<"$out"
  check "node $n: ibstat: Physical state LinkUp" grep -q 'Physical state: LinkUp' <<<"$out"
  check "node $n: ibstat: Base lid $lid" grep -qx "[[:space:]]*Base lid: $lid" <<<"$out"
  check "node $n: ibstat: SM lid $lid0 (node 0's opensm)" grep -qx "[[:space:]]*SM lid: $lid0" <<<"$out"
done

# --- ibnetdiscover: 2 CAs, one link ------------------------------------------------------------
for n in 0 1; do
  out=$(on $n ibnetdiscover)
  echo "--- node $n: ibnetdiscover"; echo "$out"
  check "node $n: ibnetdiscover finds 2 CAs" test "$(grep -c '^Ca' <<<"$out")" -eq 2
  check "node $n: ... and no switch" test "$(grep -c '^Switch' <<<"$out")" -eq 0
  # Each CA's port 1 line names the other end: [1](port GUID) "H-<peer node GUID>"[1]...
  check "node $n: ... node 0's port 1 is cabled to node 1's port 1" \
    grep -q "^\[1\].*\"H-${GUID1#0x}\"\[1\]" <<<"$(sed -n "/^Ca.*\"H-${GUID0#0x}\"/,/^$/p" <<<"$out")"
  check "node $n: ... node 1's port 1 is cabled to node 0's port 1" \
    grep -q "^\[1\].*\"H-${GUID0#0x}\"\[1\]" <<<"$(sed -n "/^Ca.*\"H-${GUID1#0x}\"/,/^$/p" <<<"$out")"
  check "node $n: ... with the node descriptions the guests set" \
    grep -q '"node1 pib_0"' <<<"$out"
done

# --- smpquery: by LID and by directed route --------------------------------------------------
# dotted FIELD TEXT: the value of "FIELD:.....value" in smpquery's output.
dotted() { sed -n "s/^$1:\.*//p" <<<"$2" | head -n 1; }
out=$(on 0 smpquery nodeinfo "$lid1")
echo "--- node 0: smpquery nodeinfo $lid1"; echo "$out"
check "smpquery nodeinfo by LID: node 1's GUID" test "$(dotted Guid "$out")" = "$GUID1"
check "smpquery nodeinfo by LID: a Channel Adapter with 1 port" \
  test "$(dotted NodeType "$out")" = "Channel Adapter" -a "$(dotted NumPorts "$out")" = 1
out=$(on 0 smpquery -D nodeinfo 0,1)
echo "--- node 0: smpquery -D nodeinfo 0,1"; echo "$out"
check "smpquery -D nodeinfo 0,1: node 1's GUID" test "$(dotted Guid "$out")" = "$GUID1"
out=$(on 1 smpquery -D nodeinfo 0,1)
check "from node 1, smpquery -D nodeinfo 0,1: node 0's GUID" \
  test "$(dotted Guid "$out")" = "$GUID0"
for how in "LID $lid1" "-D 0,1"; do
  if [ "$how" = "-D 0,1" ]; then out=$(on 0 smpquery -D portinfo 0,1)
  else out=$(on 0 smpquery portinfo "$lid1"); fi
  echo "--- node 0: smpquery portinfo ($how)"; echo "$out"
  check "smpquery portinfo ($how): LID $lid1" test "$(dotted Lid "$out")" = "$lid1"
  check "smpquery portinfo ($how): SMLid $lid0" test "$(dotted SMLid "$out")" = "$lid0"
  check "smpquery portinfo ($how): LinkState Active" test "$(dotted LinkState "$out")" = Active
  check "smpquery portinfo ($how): PhysLinkState LinkUp" \
    test "$(dotted PhysLinkState "$out")" = LinkUp
done

# The node description: set through sysfs (modify_device: SET_NODE_DESC), answered by the SMA.
check "node 1: a new node description through sysfs" \
  on 1 sh -c 'printf "node1 renamed" > /sys/class/infiniband/pib_0/node_desc'
out=$(on 0 smpquery nodedesc "$lid1")
echo "--- node 0: smpquery nodedesc $lid1: $out"
check "smpquery nodedesc: the new description" grep -q 'node1 renamed' <<<"$out"
check "node 1: the old one back" \
  on 1 sh -c 'printf "node1 pib_0" > /sys/class/infiniband/pib_0/node_desc'
check "node 1: sysfs shows it" test "$(on 1 cat /sys/class/infiniband/pib_0/node_desc)" = "node1 pib_0"

# --- saquery, sminfo, iblinkinfo ---------------------------------------------------------------
out=$(on 1 saquery)
echo "--- node 1: saquery (NodeRecords)"; echo "$out"
check "saquery: node 0's NodeRecord" grep -qi "${GUID0#0x}" <<<"$out"
check "saquery: node 1's NodeRecord" grep -qi "${GUID1#0x}" <<<"$out"
out=$(on 1 saquery -O "$lid0")
echo "--- node 1: saquery -O $lid0: $out"
check "saquery -O: LID $lid0 is node0" grep -q 'node0 pib_0' <<<"$out"
for n in 0 1; do
  out=$(on $n sminfo)
  echo "--- node $n: sminfo: $out"
  check "node $n: sminfo: the master SM is at LID $lid0" grep -q "sm lid $lid0 .*SMINFO_MASTER" <<<"$out"
done
out=$(on 0 iblinkinfo)
echo "--- node 0: iblinkinfo"; echo "$out"
check "iblinkinfo: the link is 4X, Active/LinkUp" grep -q 'Active/ *LinkUp' <<<"$out"
check "iblinkinfo: between the two nodes" grep -q 'node1 pib_0' <<<"$out"

# --- perfquery: the PMA counts what ib_write_bw sends --------------------------------------
# pq NODE FIELD [OPTION...]: one counter from perfquery's output for the local port.
pq() { local n=$1 f=$2; shift 2; on "$n" perfquery "$@" | sed -n "s/^$f:\.*//p" | head -n 1; }
ITERS=2000 SIZE=65536
bytes=$((ITERS * SIZE))
tx_before=$(pq 1 PortXmitData -x) rx_before=$(pq 0 PortRcvData -x)
tx_pkts_before=$(pq 1 PortXmitPkts -x)
pair ib_write_bw 18515 ib_write_bw -d pib_0 -F -n $ITERS -s $SIZE -- \
  ib_write_bw -d pib_0 -F -n $ITERS -s $SIZE node0
tx_after=$(pq 1 PortXmitData -x) rx_after=$(pq 0 PortRcvData -x)
tx_pkts_after=$(pq 1 PortXmitPkts -x)
echo "--- node 1: perfquery -x"; on 1 perfquery -x
dtx=$((tx_after - tx_before)) drx=$((rx_after - rx_before)) dpk=$((tx_pkts_after - tx_pkts_before))
echo "ib_write_bw sent $bytes bytes ($((bytes / 4)) words); PortXmitData (node 1) +$dtx words, PortRcvData (node 0) +$drx words, PortXmitPkts +$dpk"
check "node 1: PortXmitData grew by at least the $((bytes / 4)) words written (+$dtx)" \
  test "$dtx" -ge $((bytes / 4))
check "node 0: PortRcvData grew by at least the $((bytes / 4)) words written (+$drx)" \
  test "$drx" -ge $((bytes / 4))
check "node 1: PortXmitPkts grew by at least one packet per 4 KiB (+$dpk)" \
  test "$dpk" -ge $((bytes / 4096))
# perfquery -R clears them (opensm's sweeps may add a few SMPs right after).
check "node 1: perfquery -R" on 1 perfquery -R
check "node 1: perfquery -x -R" on 1 perfquery -x -R
out=$(on 1 perfquery)
echo "--- node 1: perfquery after -R"; echo "$out"
d=$(sed -n 's/^PortXmitData:\.*//p' <<<"$out")
check "node 1: PortXmitData after -R is ${d:-?} words: cleared (< 1% of the transfer)" \
  test -n "$d" -a "${d:-1}" -lt $((bytes / 4 / 100))
d=$(pq 1 PortXmitData -x)
check "node 1: extended PortXmitData after -x -R is $d words: cleared" \
  test -n "$d" -a "${d:-1}" -lt $((bytes / 4 / 100))
finish
