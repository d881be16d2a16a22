#!/bin/bash
# Debian's perftest, unmodified, over pib_0 between node 0 (server) and node 1 (client): every
# test in its default RC mode, then all sizes (-a), bidirectional (-b), and UC/UD where perftest
# supports them.  Iteration counts are kept small for -a: guests run under TCG.
# e2e-checks: 72
source "$(dirname "$0")/lib.sh"

pt() {  # pt ARGS...: one perftest pair; the client must print its result table
  pair "$*" 18515 "$@" -d pib_0 -F -- "$@" -d pib_0 -F node0
  check "$*: results printed" grep -qE '^ *#bytes|^ *[0-9]+ +[0-9]+ ' <<<"$pair_out_client"
  grep -E '^ *[0-9]+ +[0-9]+ ' <<<"$pair_out_client" | tail -n 3
}

for t in ib_send_lat ib_send_bw ib_write_lat ib_write_bw ib_read_lat ib_read_bw \
         ib_atomic_lat ib_atomic_bw; do
  pt $t
done
for t in ib_send_lat ib_write_lat ib_read_lat; do pt $t -a -n 50; done
for t in ib_send_bw ib_write_bw ib_read_bw; do pt $t -a -n 20; done
for t in ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw; do pt $t -b; done
for t in ib_send_lat ib_send_bw ib_write_lat ib_write_bw; do pt $t -c UC; done
for t in ib_send_lat ib_send_bw; do pt $t -c UD; done
finish
