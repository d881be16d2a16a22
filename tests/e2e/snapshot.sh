# The body of the fabric-snapshot tests, 76-snapshot (two guests back to back) and
# 78-snapshot-switched (two guests on a pib switch); source after lib.sh and switched.sh.
#
# snapshot_run DIR ARG...: in a run directory DIR of its own, `pibvm up ARG...` (opensm on node
# 0), then a fabric snapshot (`pibvm snapshot save`) taken in the middle of
# `ib_write_bw -D 20` from node 1 to node 0, then two loads of it (`pibvm snapshot load`):
#   - the run that was saved goes on: both sides of ib_write_bw exit 0 and report a bandwidth;
#   - after each load, the guests are back in the middle of the transfer (its results are gone
#     again: they are written after the moment saved), and it completes again the same way, on
#     the QPs that were open at the save;
#   - after each, the ports are ACTIVE with the LIDs the SM gave, link_downs is what it was at
#     the save (the loaded ports held their state for each other), and a new ibv_rc_pingpong
#     with its data check (-c) runs between the guests;
#   - with a switch (SNAPSHOT_SWITCH set: its node GUID), the switch is saved and loaded with the
#     guests: after each load it has the LID the SM gave it, its two ports are LinkState Active
#     (its SMA, asked by smpquery), and their LinkDownedCounter (its PMA, perfquery) is what it
#     was at the save: no port of the fabric went down.
#   - with a disk (SNAPSHOT_DISK set: the run has `--disk`), node 1's disk is put back to the
#     moment saved: a mark it wrote (and synced) before the save is what it reads from the disk
#     after each load (its page cache dropped), though it wrote another mark after the save and
#     after the first load.
# ib_write_bw runs detached in the guests (its output and exit status in files), since a command
# that waits through the guest agent at the save runs again in the loaded guests, for no one.
# Checks: 35, 13 more with a switch, 9 more with a disk.

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

snap_lids() { echo "$(port_lid 0) $(port_lid 1)"; }

# disk_mark WORD: node 1 writes WORD at the start of its disk (/dev/vda) and syncs it.
disk_mark() { on 1 sh -c "printf '%-16s' '$1' | dd of=/dev/vda bs=16 count=1 2>/dev/null && sync"; }
# disk_read: the mark on node 1's disk, read from the disk itself (the page cache dropped).
disk_read() { on 1 sh -c "echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/vda bs=16 count=1 2>/dev/null" | tr -d ' '; }
# disk_later WHAT: node 1 writes another mark, "later", and reads it back.
disk_later() {
  check "$1: node 1 writes 'later' on its disk" disk_mark later
  check "$1: node 1's disk reads 'later'" test "$(disk_read)" = later
}
# snap_sw_downs: the switch's ports 1 and 2 LinkDownedCounter, from its PMA.
snap_sw_downs() { echo "$(sw_counter "$sw_lid0" 1 LinkDownedCounter) $(sw_counter "$sw_lid0" 2 LinkDownedCounter)"; }

# snap_after WHAT: the checks of a run of the saved moment to its end.
snap_after() {
  local what=$1 src crc p
  src=$(rc_of 0 bws) crc=$(rc_of 1 bwc)
  echo "--- ib_write_bw client (node 1), $what"; on 1 cat /tmp/bwc.log
  check "$what: ib_write_bw server exits 0 (got $src)" test "$src" = 0
  check "$what: ib_write_bw client exits 0 (got $crc)" test "$crc" = 0
  check "$what: the client reports its bandwidth" on 1 grep -Eq '^ *65536 +[0-9]+ ' /tmp/bwc.log
  check "$what: node 0 port ACTIVE" test "$(port_state 0)" = ACTIVE
  check "$what: node 1 port ACTIVE" test "$(port_state 1)" = ACTIVE
  check "$what: the LIDs are the SM's first ones ($lids0)" test "$(snap_lids)" = "$lids0"
  check "$what: link_downs as at the save ($downs0 $downs1)" \
    test "$(hw_counter 0 link_downs) $(hw_counter 1 link_downs)" = "$downs0 $downs1"
  if [ -n "${SNAPSHOT_SWITCH:-}" ]; then
    check "$what: the switch has the LID the SM gave it ($sw_lid0)" \
      test "$(sw_lid "$SNAPSHOT_SWITCH")" = "$sw_lid0"
    for p in 1 2; do
      sw_port_active switch0 "$sw_lid0" "$p" "node $((p - 1))"
    done
    check "$what: the switch ports' LinkDownedCounter as at the save ($sw_downs0)" \
      test "$(snap_sw_downs)" = "$sw_downs0"
  fi
  pair "ibv_rc_pingpong -c after the $what" 18515 ibv_rc_pingpong -d pib_0 -c -n 100 \
    -- ibv_rc_pingpong -d pib_0 -c -n 100 node0
}

# snap_start_bw BEFORE: ib_write_bw -D 20 from node 1 to node 0, detached, until node 1 has sent
# 2000 packets (a hang guard of 300 looks); link_downs as they are then, for snap_after.
snap_start_bw() {
  detach 0 bws "ib_write_bw -d pib_0 -F -D 20"
  check "ib_write_bw: the server listens" wait_listen 0 18515
  detach 1 bwc "ib_write_bw -d pib_0 -F -D 20 node0"
  check_sending 1 2000 "$1"
  downs0=$(hw_counter 0 link_downs) downs1=$(hw_counter 1 link_downs)
}

# snapshot_run DIR ARG...: the test above; the caller then calls finish (or goes on).
snapshot_run() {
  local dir=$1 load
  shift
  switched_dir "$dir"
  switched_up "$@"
  lids0=$(snap_lids)
  if [ -n "${SNAPSHOT_SWITCH:-}" ]; then
    sw_lid0=$(sw_lid "$SNAPSHOT_SWITCH")
    check "the SM gave the switch a LID (${sw_lid0:-none})" test -n "$sw_lid0"
    sw_downs0=$(snap_sw_downs)
    echo "switch LID $sw_lid0, ports 1 and 2 LinkDownedCounter: $sw_downs0"
  fi

  [ -z "${SNAPSHOT_DISK:-}" ] || check "node 1 writes 'saved' on its disk" disk_mark saved
  snap_start_bw "the snapshot"
  check "pibvm snapshot save mid" "$PIBVM" snapshot save mid

  snap_after "run that was saved"
  [ -z "${SNAPSHOT_DISK:-}" ] || disk_later "the run that was saved"
  for load in 1 2; do
    check "pibvm snapshot load mid (load $load)" "$PIBVM" snapshot load mid
    check "load $load: the guests are back before the transfer's end (no result yet)" \
      on 1 test ! -e /tmp/bwc.rc
    snap_after "load $load"
    if [ -n "${SNAPSHOT_DISK:-}" ]; then
      check "load $load: node 1's disk reads 'saved', as at the save (got '$(disk_read)')" \
        test "$(disk_read)" = saved
      disk_later "load $load"
    fi
  done
}
