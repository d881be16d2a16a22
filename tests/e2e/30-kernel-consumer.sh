#!/bin/bash
# Kernel consumers use the same device path: pib_ktest (tests/kernel/) is an in-kernel ULP that
# runs RC and UD loopback traffic, completion events through the CEQ, drain and flush, SRQs,
# invalidation and fast registration (FRWR, in loopback; 32-frwr runs it across the link) on
# pib_0 when it loads, and reports its checks in /sys/module/pib_ktest/parameters/{passed,failed}.
# e2e-checks: 5
source "$(dirname "$0")/lib.sh"

n=1
check "node $n: modprobe pib_ktest" on $n modprobe pib_ktest
passed=$(on $n cat /sys/module/pib_ktest/parameters/passed)
failed=$(on $n cat /sys/module/pib_ktest/parameters/failed)
echo "pib_ktest: $passed passed, $failed failed"
on $n sh -c 'dmesg | grep "pib_ktest: FAIL"' || true
# A full run passes 146 checks, 63 of them fast registration's (ktest_frwr.c in loopback): the
# floor fails a run that skipped them.
check "pib_ktest ran its checks (passed=$passed, at least 140)" test "${passed:-0}" -ge 140
check "pib_ktest: no failed check (failed=$failed)" test "${failed:-1}" -eq 0
check "node $n: rmmod pib_ktest" on $n rmmod pib_ktest
check "node $n: no splat in dmesg" on $n sh -c '! dmesg | grep -qE "WARNING:|BUG:|Call Trace|Oops"'
finish
