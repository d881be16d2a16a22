#!/bin/bash
# frwr: fast registration (FRWR) between the two guests' kernels.  pib_ktest's FRWR tests
# (tests/kernel/ktest_frwr.c) in two roles: node 0 the owner (frwr=owner), which registers
# scattered pages with ib_map_mr_sg + IB_WR_REG_MR, invalidates them (LOCAL_INV) and checks
# its memory byte for byte; node 1 the peer (frwr=peer:<node 0>), which WRITEs and READs
# through the rkey, invalidates it with SEND_WITH_INV, and finds every invalidated or
# never-registered key refused.  Then the bad registrations: beyond max_num_sg, remote write
# without local write, a page outside memory, re-registering a valid key, invalidating another
# PD's key.  The two keep in step over TCP on the management network.  The same tests run in
# loopback on one node in 30-kernel-consumer.
# e2e-checks: 12
source "$(dirname "$0")/lib.sh"

port=18531      # FR_PORT in ktest_frwr.c
owner_addr=$(on 1 awk '$2 == "node0" {print $1; exit}' /etc/hosts)
check "node 1 knows node 0's address ($owner_addr)" test -n "$owner_addr"

declare -A mark
for n in 0 1; do
  on $n rmmod pib_ktest >/dev/null 2>&1
  mark[$n]=$(on $n dmesg | wc -l)
done

olog=$(mktemp)
on 0 modprobe pib_ktest frwr=owner >"$olog" 2>&1 &
opid=$!
check "node 0: pib_ktest listens on $port" wait_listen 0 $port
on 1 modprobe pib_ktest "frwr=peer:$owner_addr"
prc=$?
wait $opid
orc=$?
cat "$olog"; rm -f "$olog"
check "node 0: modprobe pib_ktest frwr=owner (exit $orc)" test $orc -eq 0
check "node 1: modprobe pib_ktest frwr=peer:$owner_addr (exit $prc)" test $prc -eq 0

# Each role's checks; at least as many as a run where every step got that far.
min=(51 17)
for n in 0 1; do
  echo "--- node $n"
  on $n dmesg | tail -n +$((${mark[$n]} + 1)) | grep 'pib_ktest'
  passed=$(on $n cat /sys/module/pib_ktest/parameters/passed)
  failed=$(on $n cat /sys/module/pib_ktest/parameters/failed)
  echo "node $n: pib_ktest: $passed passed, $failed failed"
  check "node $n: pib_ktest ran its checks (passed=$passed, at least ${min[$n]})" \
    test "${passed:-0}" -ge "${min[$n]}"
  check "node $n: pib_ktest: no failed check (failed=$failed)" test "${failed:-1}" -eq 0
  check "node $n: rmmod pib_ktest" on $n rmmod pib_ktest
  check "node $n: no splat in dmesg" \
    on $n sh -c "! dmesg | tail -n +$((${mark[$n]} + 1)) | grep -qE 'WARNING:|BUG:|Call Trace|Oops'"
done
finish
