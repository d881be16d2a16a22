# Helpers of the switched-fabric tests, 70-switch and 71-switch-chain (source after lib.sh).
# Each boots a fabric of its own, pib switches and guests, in a run directory beside the
# suite's, so that the suite's two guests stay up meanwhile; node 0's opensm must bring it up,
# and node 0 asks the switches' SMA and PMA (by their LIDs) how it went.

# switched_dir NAME: this test's run directory is NAME, beside the suite's (SUITE_DIR); whatever
# runs in it goes down when the script exits.
switched_dir() {
  SUITE_DIR=${PIBVM_DIR:-$TOP/build/vm-test}
  export PIBVM_DIR="$(dirname "$SUITE_DIR")/$1"
  trap switched_down EXIT
}
switched_down() { "$PIBVM" down >/dev/null 2>&1 || true; }

# switched_up ARG... [-- ARG...]: `pibvm up` with all the ARGs in the run directory, once what a
# former run left there is down.  Checks its exit status, named by the ARGs before the -- (the
# script ends without it), and prints the time it took and its "ports ACTIVE" lines.
switched_up() {
  local named=() out t0
  while [ $# -gt 0 ] && [ "$1" != -- ]; do named+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  switched_down
  out=$(mktemp)
  t0=$SECONDS
  "$PIBVM" up "${named[@]}" "$@" 2>&1 | tee "$out"
  check "pibvm up ${named[*]}" test "${PIPESTATUS[0]}" -eq 0 || finish
  echo "pibvm up ${named[*]}${*:+ $*}: $((SECONDS - t0)) s in all"
  grep 'ports ACTIVE' "$out" || true
  rm -f "$out"
}

# ca_lids N: checks that the port of each of nodes 0..N-1 is ACTIVE and that the SM gave the N
# of them distinct nonzero LIDs; lid[n] is node n's.
ca_lids() {
  local n
  lid=()
  for ((n = 0; n < $1; n++)); do
    check "node $n: port ACTIVE" test "$(port_state $n)" = ACTIVE
    lid[$n]=$(port_lid $n)
  done
  echo "LIDs: ${lid[*]}"
  check "the SM gave $1 distinct nonzero LIDs (${lid[*]})" \
    test "$(printf '%s\n' "${lid[@]}" | grep -v '^0$' | sort -u | wc -l)" -eq "$1"
}

# sw_lid GUID: the LID of the switch whose node GUID is GUID (hex, without the 0x), as
# ibswitches in node 0 lists it; nothing if it lists no such switch.
sw_lid() { on 0 ibswitches | sed -n "s/.*0x$1 ports .* lid \([0-9]*\) .*/\1/p" | head -n 1; }

# sw_port_active SWITCH LID PORT WHAT: checks that port PORT of the switch at LID (named SWITCH,
# the port's cable WHAT) is LinkState Active, as the switch's SMA says: a CA port's ACTIVE
# says nothing of the switch's side of its cable, nor of a cable between switches.
sw_port_active() {
  local st
  st=$(on 0 smpquery portinfo "$2" "$3" 2>&1 | sed -n 's/^LinkState:\.*//p')
  check "smpquery: $1 port $3 ($4) is LinkState Active (got ${st:-nothing})" test "$st" = Active
}

# sw_counter LID PORT FIELD [OPTION...]: a PortCounters field of port PORT of the switch at LID,
# from its PMA (perfquery in node 0, given the OPTIONs: -x for the 64-bit counters).
sw_counter() { on 0 perfquery "${@:4}" "$1" "$2" | sed -n "s/^$3:\.*//p"; }
