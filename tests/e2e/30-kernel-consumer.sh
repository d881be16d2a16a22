#!/bin/bash
# Kernel consumers use the same device path: pib_ktest (tests/kernel/) is an in-kernel ULP that
# runs RC and UD loopback traffic, completion events through the CEQ, drain and flush on pib_0
# when it loads, and reports its checks in /sys/module/pib_ktest/parameters/{passed,failed}.
source "$(dirname "$0")/lib.sh"

n=1
check "node $n: modprobe pib_ktest" on $n modprobe pib_ktest
passed=$(on $n cat /sys/module/pib_ktest/parameters/passed)
failed=$(on $n cat /sys/module/pib_ktest/parameters/failed)
echo "pib_ktest: $passed passed, $failed failed"
on $n sh -c 'dmesg | grep "pib_ktest: FAIL"' || true
check "pib_ktest ran its checks (passed=$passed)" test "${passed:-0}" -ge 30
check "pib_ktest: no failed check (failed=$failed)" test "${failed:-1}" -eq 0
check "node $n: rmmod pib_ktest" on $n rmmod pib_ktest
check "node $n: no splat in dmesg" on $n sh -c '! dmesg | grep -qE "WARNING:|BUG:|Call Trace|Oops"'
finish
