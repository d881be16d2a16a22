# Helpers for end-to-end tests.  Source this; guests are already up (tests/run.sh).
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PIBVM=$TOP/tools/pibvm
nfail=0

# on NODE CMD...: run CMD in guest NODE, output on stdout, guest exit status as ours.
on() { local n=$1; shift; "$PIBVM" exec "$n" -- "$@"; }

# check DESCRIPTION COMMAND...: run a host-side assertion and report it.
check() {
  local what=$1; shift
  if "$@"; then echo "  ok   $what"; else echo "  FAIL $what"; nfail=$((nfail + 1)); fi
}

# field TEXT KEY: the value after "KEY:" in ibv_devinfo-style output (first match).
field() { awk -v k="$2:" '$1 == k {print $2; exit}' <<<"$1"; }

finish() { [ "$nfail" -eq 0 ] && echo "all checks passed" || echo "$nfail check(s) failed"; exit $(( nfail > 0 )); }
