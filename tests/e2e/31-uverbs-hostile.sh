#!/bin/bash
# The driver against hostile userspace: pib-uverbs-hostile (tests/guest/) sends crafted
# commands through the raw uverbs write() ABI (bad ring sizes and addresses, non-zero reserved
# fields, short buffers, wrapping MR ranges, illegal QP transitions, ...) and checks each is
# refused with the right errno; the kernel must stay healthy.
# e2e-checks: 4
source "$(dirname "$0")/lib.sh"

n=1
out=$(on $n pib-uverbs-hostile); rc=$?
echo "$out"
check "pib-uverbs-hostile exits 0 (rc=$rc)" test $rc -eq 0
check "it made checks" grep -q '^PASS' <<<"$out"
check "no FAIL line" bash -c '! grep -q "^FAIL" <<<"$1"' _ "$out"
check "node $n: no splat in dmesg" on $n sh -c '! dmesg | grep -qE "WARNING:|BUG:|Call Trace|Oops"'
finish
