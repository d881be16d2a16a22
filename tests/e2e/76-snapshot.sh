#!/bin/bash
# snapshot: a fabric snapshot (`pibvm snapshot save`, every node saved at one moment) taken in
# the middle of `ib_write_bw -D 20` between two guests cabled back to back (opensm on node 0; its
# own run directory, as the 7x tests), then loaded twice (`pibvm snapshot load`):
#   - the run that was saved goes on: both sides of ib_write_bw exit 0 and report a bandwidth;
#   - after each load, the guests are back in the middle of the transfer (its results are gone
#     again: they are written after the moment saved), and it completes again the same way, on
#     the QPs that were open at the save;
#   - after each, the ports are ACTIVE with the LIDs the SM gave, link_downs is what it was at
#     the save (the loaded ports held their state for each other), and a new ibv_rc_pingpong
#     with its data check (-c) runs between the guests.
# ib_write_bw runs detached in the guests (its output and exit status in files), since a command
# that waits through the guest agent at the save runs again in the loaded guests, for no one.
# e2e-checks: 35
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"

switched_dir vm-snapshot
switched_up --nodes 2

lids() { echo "$(port_lid 0) $(port_lid 1)"; }
lids0=$(lids)

# detach NODE NAME CMD: run CMD (one string, no single quote) in guest NODE on its own; its
# output goes to /tmp/NAME.log, its exit status to /tmp/NAME.rc when it ends.
detach() {
  on "$1" sh -c "rm -f /tmp/$2.rc /tmp/$2.log; setsid sh -c '$3 >/tmp/$2.log 2>&1; echo \$? >/tmp/$2.rc' </dev/null >/dev/null 2>&1 &"
}
# rc_of NODE NAME: NAME's exit status once it has one (a hang guard of 600 tries), or "none".
rc_of() {
  local i rc
  for ((i = 0; i < 600; i++)); do
    rc=$(on "$1" cat "/tmp/$2.rc" 2>/dev/null) && [ -n "$rc" ] && { echo "$rc"; return; }
    sleep 1
  done
  echo none
}

detach 0 bws "ib_write_bw -d pib_0 -F -D 20"
check "ib_write_bw: the server listens" wait_listen 0 18515
detach 1 bwc "ib_write_bw -d pib_0 -F -D 20 node0"
tx0=$(hw_counter 1 tx_packets)
for ((i = 0; i < 300; i++)); do
  [ "$(hw_counter 1 tx_packets)" -gt $((tx0 + 2000)) ] && break
  sleep 0.1
done
check "node 1 is sending before the snapshot" test "$(hw_counter 1 tx_packets)" -gt $((tx0 + 2000))
downs0=$(hw_counter 0 link_downs) downs1=$(hw_counter 1 link_downs)
check "pibvm snapshot save mid" "$PIBVM" snapshot save mid

# after WHAT: the checks of a run of the saved moment to its end.
after() {
  local what=$1 src crc
  src=$(rc_of 0 bws) crc=$(rc_of 1 bwc)
  echo "--- ib_write_bw client (node 1), $what"; on 1 cat /tmp/bwc.log
  check "$what: ib_write_bw server exits 0 (got $src)" test "$src" = 0
  check "$what: ib_write_bw client exits 0 (got $crc)" test "$crc" = 0
  check "$what: the client reports its bandwidth" on 1 grep -Eq '^ *65536 +[0-9]+ ' /tmp/bwc.log
  check "$what: node 0 port ACTIVE" test "$(port_state 0)" = ACTIVE
  check "$what: node 1 port ACTIVE" test "$(port_state 1)" = ACTIVE
  check "$what: the LIDs are the SM's first ones ($lids0)" test "$(lids)" = "$lids0"
  check "$what: link_downs as at the save ($downs0 $downs1)" \
    test "$(hw_counter 0 link_downs) $(hw_counter 1 link_downs)" = "$downs0 $downs1"
  pair "ibv_rc_pingpong -c after the $what" 18515 ibv_rc_pingpong -d pib_0 -c -n 100 \
    -- ibv_rc_pingpong -d pib_0 -c -n 100 node0
}

after "run that was saved"
for load in 1 2; do
  check "pibvm snapshot load mid (load $load)" "$PIBVM" snapshot load mid
  check "load $load: the guests are back before the transfer's end (no result yet)" \
    on 1 test ! -e /tmp/bwc.rc
  after "load $load"
done
finish
