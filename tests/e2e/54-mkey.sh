#!/bin/bash
# mkey: an M_Key-protected port.  opensm (node 0) runs with m_key 0x...cafe and
# m_key_protection_level 1 (opensm.conf): it gives every port that M_Key, and from then on a
# port's SMA takes a Set only with it (IBTA 14.2.4).  From node 0, against node 1's port:
#   - smpquery portinfo without the key is answered, but with the M_Key hidden (level 1);
#     with -y KEY it shows the key;
#   - a PortInfo Set without the key (ibportstate, setting the LID it already has) gets no
#     answer and fails, and node 1's PortInfo:M_KeyViolations grows by the SMPs it sent; the
#     SMA traps it (256, Bad M_Key) to opensm;
#   - the same Set with -y KEY succeeds.
# At the end the key is taken off both ports (ibportstate mkey 0, with the key) and opensm
# runs without one again.
# e2e-checks: 17
source "$(dirname "$0")/lib.sh"

KEY=0x00000000000cafe0
CONF=/tmp/opensm-mkey.conf
RUN_DIR=${PIBVM_DIR:-$TOP/build/vm}
lid0=$(port_lid 0) lid1=$(port_lid 1)
unkey() {
  "$PIBVM" sm stop 0
  on 0 ibportstate -y "$KEY" "$lid1" 1 mkey 0 mkeyprot 0 >/dev/null &&
  on 0 ibportstate -y "$KEY" -D 0 1 mkey 0 mkeyprot 0 >/dev/null
}
cleanup() { unkey >/dev/null 2>&1; "$PIBVM" sm start 0 >/dev/null 2>&1; }
trap cleanup EXIT

# pi FIELD ARG...: one field of smpquery ARG... run on node 0 (-K: show the M_Key, which the
# diags otherwise print as "<not displayed>").
pi() { local f=$1; shift; on 0 smpquery "$@" | sed -n "s/^$f:\.*//p" | head -n 1; }

on 0 sh -c "printf 'm_key $KEY\nm_key_protection_level 1\nm_key_lease_period 0\n' > $CONF"
log_lines=$(wc -l < "$RUN_DIR/node0.opensm.log" 2>/dev/null || echo 0)
check "node 0: opensm stops" "$PIBVM" sm stop 0
check "node 0: opensm with M_Key $KEY, protection level 1" "$PIBVM" sm start 0 -- -F "$CONF"
# protected LID: node LID's port has the key and its protection bits (asked with the key).
protected() { [ "$(pi ProtectBits -y "$KEY" portinfo "$1")" = 1 ]; }
wait_protected() {
  local end=$((SECONDS + $2))
  while [ $SECONDS -le $end ]; do protected "$1" && return 0; sleep 0.5; done
  return 1
}
check "node 1's port is protected (ProtectBits 1)" wait_protected "$lid1" "$SM_ACTIVATE_S"
check "node 0's port is protected" wait_protected "$lid0" "$SM_ACTIVATE_S"

k=$(pi Mkey -K portinfo "$lid1")
check "a Get without the key is answered, the M_Key hidden (got $k)" \
  test "$((k))" -eq 0
k=$(pi Mkey -K -y "$KEY" portinfo "$lid1")
check "a Get with the key shows it (got $k)" test "$((k))" -eq "$((KEY))"

v_before=$(pi MkeyViolations -y "$KEY" portinfo "$lid1")
out=$(on 0 ibportstate -t 1000 "$lid1" 1 lid "$lid1" 2>&1); rc=$?
echo "--- ibportstate $lid1 1 lid $lid1 (no key): exit $rc"; echo "$out"
check "a Set without the key fails (exit $rc)" test "$rc" -ne 0
v_after=$(pi MkeyViolations -y "$KEY" portinfo "$lid1")
dv=$((v_after - v_before))
echo "node 1: M_KeyViolations $v_before -> $v_after"
# libibmad sends an SMP up to 3 times (its retries) before it gives up.
check "node 1: M_KeyViolations counted the unkeyed SMPs (+$dv, 1..3)" test "$dv" -ge 1 -a "$dv" -le 3
check "node 1: port still ACTIVE, LID $lid1" \
  test "$(port_state 1)" = ACTIVE -a "$(port_lid 1)" = "$lid1"
out=$(on 0 ibportstate -y "$KEY" "$lid1" 1 lid "$lid1" 2>&1); rc=$?
echo "--- ibportstate -y KEY $lid1 1 lid $lid1: exit $rc"; echo "$out" | tail -n 5
check "the same Set with the key succeeds (exit $rc)" test "$rc" -eq 0
v_final=$(pi MkeyViolations -y "$KEY" portinfo "$lid1")
check "node 1: ... and is no violation (M_KeyViolations still $v_after, got $v_final)" \
  test "$v_final" = "$v_after"
# The SMA's trap 256 reached opensm, which logs the notices it gets.
log=$(tail -n +$((log_lines + 1)) "$RUN_DIR/node0.opensm.log" 2>/dev/null)
grep -i 'notice\|trap' <<<"$log" | tail -n 5
check "opensm got trap 256 (Bad M_Key) from node 1" grep -qi 'num:256\|Bad M_Key' <<<"$log"

echo "== the key off again"
check "node 0: opensm stops; both ports' M_Key set to 0 with the key" unkey
check "node 0: opensm without M_Key" "$PIBVM" sm start 0
check "node 1's port: ProtectBits 0" \
  sh -c "[ \"\$('$PIBVM' exec 0 -- smpquery portinfo $lid1 | sed -n 's/^ProtectBits:\.*//p')\" = 0 ]"
for n in 0 1; do check "node $n: port ACTIVE" wait_port $n ACTIVE "$SM_ACTIVATE_S"; done
trap - EXIT
finish
