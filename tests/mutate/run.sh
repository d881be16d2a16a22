#!/bin/bash
# `make mutate`: does the test suite catch the bugs a user would hit?  Each entry of
# tests/mutate/mutations.txt is a one-line bug in the device model, the provider or the driver.
# For each, this script applies it to a scratch copy of the tree, rebuilds what the file feeds,
# runs the tests the entry names (in order, until one fails) and reports KILLED (a test
# failed) or SURVIVED.  A survivor passes only with a written reason ("survives:" in the list).
#
#   tests/mutate/run.sh [ID...]      every entry, or those named
#   PIB_MUTATE_LIST=FILE run.sh ...  entries from another list of the same form (e.g. a copy
#                                    whose entries name every qtest binary, to find a killer)
#
# Nothing here touches the checkout, its build/, or the shared QEMU and rdma-core trees in the
# cache, which other runs build and test from at the same time:
#   - the scratch tree is $PIB_CACHE/mutate/tree, copied afresh from the checkout's files (git's
#     list, with the working changes) at every run;
#   - the device model builds in a private copy of the QEMU source and a private build directory
#     ($PIB_CACHE/mutate/qemu-*, build-qemu-*), made once (a full QEMU build, some minutes),
#     then incremental: a mutant costs one object file, the link and the qtests;
#   - the provider's unit test compiles the scratch tree's sources against the checkout's
#     rdma-core build, read-only (its build.sh, which overlays the shared rdma-core tree, is
#     replaced by a no-op in the scratch tree);
#   - a driver mutant builds pib.ko and the guest image into the scratch tree's build/ and boots
#     its guests under the guest lock ($PIB_GUEST_LOCK, default /tmp/pib-guest.lock).
# Before any mutant, every test the selected entries name runs once on the unmutated tree and
# must pass: a test that fails (or, for a qtest path, runs nothing) there could kill nothing.
# Logs: $PIB_CACHE/mutate/logs/.  The last line is the plain "N passed, N failed" (an entry
# passes when it is killed, or survives with a reason).  Device model on the bookworm stack only.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
LIST=${PIB_MUTATE_LIST:-$TOP/tests/mutate/mutations.txt}
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
WORK=$CACHE/mutate
TREE=$WORK/tree
LOGS=$WORK/logs
GUEST_LOCK=${PIB_GUEST_LOCK:-/tmp/pib-guest.lock}
QTEST_LIMIT=900         # hang guard per qtest run: a mutant that hangs a test is killed by it
E2E_LIMIT=1200
say() { printf '[mutate] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }
[ "${PIB_STACK:-bookworm}" = bookworm ] || die "the mutation run builds QEMU 7.2 (PIB_STACK=bookworm)"
export PIB_STACK=bookworm

# --- The list ------------------------------------------------------------------------------
# One line per entry, fields separated by \x1f: id file from to tests survives bug.
parse_list() {
  python3 - "$LIST" <<'EOF'
import sys
keys = ("id", "file", "from", "to", "tests", "survives", "bug")
for block in open(sys.argv[1]).read().split("\n\n"):
    e = {}
    for line in block.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        e[k.strip()] = v.strip()
    if "id" in e:
        for k in ("file", "from", "to", "tests"):
            if not e.get(k):
                sys.exit(f"mutations.txt: entry {e['id']} has no {k}")
        print("\x1f".join(e.get(k, "") for k in keys))
EOF
}

# apply FILE FROM TO: replace the one occurrence of FROM; exit 3 if it is not there exactly once.
apply() {
  python3 - "$@" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(3)
open(path, "w").write(text.replace(old, new, 1))
EOF
}

declare -A F_FILE F_FROM F_TO F_TESTS F_WHY F_BUG
IDS=()
while IFS=$'\x1f' read -r id file from to tests why bug; do
  [ -z "${F_FILE[$id]:-}" ] || die "duplicate id $id"
  IDS+=("$id"); F_FILE[$id]=$file; F_FROM[$id]=$from; F_TO[$id]=$to
  F_TESTS[$id]=$tests; F_WHY[$id]=$why; F_BUG[$id]=$bug
done < <(parse_list)
[ ${#IDS[@]} -gt 0 ] || die "no entries in $LIST"
if [ $# -gt 0 ]; then
  for id in "$@"; do [ -n "${F_FILE[$id]:-}" ] || die "no entry $id"; done
  IDS=("$@")
fi

# --- The scratch tree --------------------------------------------------------------------------
say "scratch tree $TREE"
rm -rf "$TREE" "$LOGS"
mkdir -p "$TREE/build" "$LOGS"
(cd "$TOP" && git ls-files -z -c -o --exclude-standard |
   while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
   tar --null -T - -cf -) | tar -C "$TREE" -xf - || die "cannot copy the tree"
printf 'exit 0\n' > "$TREE/guest-provider/build.sh"
[ -e "$TOP/build/rdma-core-build" ] &&
  ln -s "$(readlink -f "$TOP/build/rdma-core-build")" "$TREE/build/rdma-core-build"

# Every entry's original text must be in the tree exactly once (else the list is stale).
stale=()
for id in "${IDS[@]}"; do
  f=$TREE/${F_FILE[$id]}
  cp "$f" "$LOGS/probe" 2>/dev/null && apply "$LOGS/probe" "${F_FROM[$id]}" "${F_TO[$id]}" ||
    stale+=("$id")
done
rm -f "$LOGS/probe"
if [ ${#stale[@]} -gt 0 ]; then
  for id in "${stale[@]}"; do
    say "STALE $id: its original text is not in ${F_FILE[$id]} exactly once: update the list"
  done
  echo "0 passed, ${#stale[@]} failed"
  exit 1
fi

# What the selected entries need built.
need_qemu=0 need_provider=0 need_driver=0
for id in "${IDS[@]}"; do
  case ${F_FILE[$id]} in
    qemu-hw/*) need_qemu=1 ;;
    guest-provider/*) need_provider=1 ;;
    guest-driver/*) need_driver=1 ;;
    *) die "$id: no rebuild rule for ${F_FILE[$id]}" ;;
  esac
  for t in ${F_TESTS[$id]}; do
    case $t in pib-*) need_qemu=1 ;; provider) need_provider=1 ;; e2e:*) need_driver=1 ;; esac
  done
done
# A guest boots the private QEMU, built from the scratch tree (driver_build).
[ "$need_driver" = 0 ] || need_qemu=1

# --- Builds ------------------------------------------------------------------------------------
QTESTS=()
qemu_setup() {
  local src
  src=$(bash "$TOP/mk/fetch.sh" qemu) || die "mk/fetch.sh qemu failed"
  QSRC=$WORK/$(basename "$src")
  if [ ! -d "$QSRC" ]; then
    say "private copy of $src (once)"
    rm -rf "$QSRC.tmp"
    (exec 9>"$src.lock"; flock 9; cp -a "$src" "$QSRC.tmp") && mv "$QSRC.tmp" "$QSRC" ||
      die "cannot copy $src"
  fi
  # shellcheck source=../../mk/qemu-overlay.sh
  source "$TREE/mk/qemu-overlay.sh"
  # The same options as the shared build, keyed the same way (another set: a fresh configure).
  QBLD=$WORK/$(basename "$(pib_qemu_build_dir "$src")")
  QTESTS=($(pib_qtests "$TREE"))
  qemu_overlay "$TREE" "$QSRC"
  if [ ! -f "$QBLD/build.ninja" ]; then
    say "configure the private QEMU build in $QBLD (once; the first build takes minutes)"
    mkdir -p "$QBLD"
    (cd "$QBLD" && "$QSRC/configure" "${PIB_QEMU_CONFIGURE[@]}") > "$LOGS/configure.log" 2>&1 ||
      die "configure failed (log: $LOGS/configure.log)"
  fi
}
# qemu_build LOG: the scratch tree's qemu-hw/ into the private tree, then ninja.
qemu_build() {
  qemu_overlay "$TREE" "$QSRC"
  ninja -C "$QBLD" qemu-system-x86_64 "${QTESTS[@]/#/tests/qtest/}" > "$1" 2>&1
}

driver_setup() {
  local f
  # What the image takes besides pib.ko, from the checkout's build (read, never written).
  for f in rdma-root guest-tests pib_ktest.ko hostile; do
    [ -e "$TOP/build/$f" ] && cp -a "$TOP/build/$f" "$TREE/build/"
  done
  [ -d "$TREE/build/rdma-root" ] || die "no build/rdma-root: run make first"
}
# driver_build LOG: pib.ko and the image from the scratch tree, the QEMU beside them unmutated.
driver_build() {
  {
    qemu_build "$1.qemu" &&
    cp "$QBLD/qemu-system-x86_64" "$TREE/build/qemu-system-x86_64" &&
    (cd "$TREE" && bash guest-driver/build.sh && bash images/build.sh)
  } > "$1" 2>&1
}

# --- Tests -------------------------------------------------------------------------------------
# run_test SPEC LOG: 0 when the test passes, 1 when it fails (with why in $FAILED_BY).
run_test() {
  local spec=$1 log=$2 bin path rc ok notok checks
  case $spec in
    provider)
      rm -f "$TREE/build/provider-test"
      bash "$TREE/guest-provider/test/run.sh" > "$log" 2>&1
      rc=$?
      [ -x "$TREE/build/provider-test" ] || { FAILED_BY="provider (build failed)"; return 2; }
      checks=$(sed -n 's/^provider-test: \([0-9]*\) checks, 0 failures$/\1/p' "$log")
      [ "$rc" -eq 0 ] && [ "${checks:-0}" -gt 0 ] && return 0
      FAILED_BY="provider (exit $rc)"; return 1 ;;
    e2e:*)
      local name=${spec#e2e:}
      [ -f "$TREE/tests/e2e/$name.sh" ] || { FAILED_BY="$spec (no such script)"; return 1; }
      # One set of guests on the machine at a time: the lock covers boot, test and shutdown.
      ( cd "$TREE" && export PIBVM_DIR=$TREE/build/vm-test &&
        flock "$GUEST_LOCK" bash -c '
          tools/pibvm down >/dev/null 2>&1
          # 90: the guests did not come up (pibvm up failed); whatever did is brought down.
          tools/pibvm up --nodes 2 || { tools/pibvm down >/dev/null 2>&1; exit 90; }
          timeout '"$E2E_LIMIT"' bash tests/e2e/'"$name"'.sh; rc=$?
          tools/pibvm down >/dev/null 2>&1
          exit $rc' ) > "$log" 2>&1
      rc=$?
      [ "$rc" -eq 0 ] && return 0
      FAILED_BY="$spec (exit $rc)"; return 1 ;;
    pib-*)
      bin=${spec%%:*}; path=
      [[ $spec == *:* ]] && path=${spec#*:}
      [ -x "$QBLD/tests/qtest/$bin" ] || { FAILED_BY="$bin (not built)"; return 1; }
      QTEST_QEMU_BINARY=$QBLD/qemu-system-x86_64 timeout "$QTEST_LIMIT" \
        "$QBLD/tests/qtest/$bin" --tap ${path:+-p "/x86_64$path"} > "$log" 2>&1
      rc=$?
      ok=$(grep -c '^ok ' "$log"); notok=$(grep -c '^not ok ' "$log")
      # A path that matched no test runs nothing: that cannot catch anything.
      [ "$rc" -eq 0 ] && [ "$notok" -eq 0 ] && [ "$ok" -gt 0 ] && return 0
      FAILED_BY="$spec (exit $rc, $ok ok, $notok not ok)"
      [ "$rc" -eq 124 ] && FAILED_BY="$spec (hang guard: killed after ${QTEST_LIMIT} s)"
      return 1 ;;
    *) FAILED_BY="$spec (unknown kind of test)"; return 1 ;;
  esac
}

t_start=$SECONDS
[ "$need_qemu" = 1 ] && qemu_setup
[ "$need_driver" = 1 ] && driver_setup

# --- Baseline: the unmutated tree passes every test named ------------------------------------
# baseline SPEC...: each test not yet run unmutated must pass there first.
declare -A seen=()
baseline() {
  local t log
  for t in "$@"; do
    [ -z "${seen[$t]:-}" ] || continue
    seen[$t]=1
    say "baseline: $t"
    log=$LOGS/baseline-$(tr -c 'A-Za-z0-9.-' '_' <<<"$t").log
    run_test "$t" "$log" || die "baseline fails: $FAILED_BY (log: $log); no mutant can be judged"
  done
}
say "baseline build"
if [ "$need_qemu" = 1 ]; then
  qemu_build "$LOGS/baseline-qemu.log" || die "QEMU build failed (log: $LOGS/baseline-qemu.log)"
fi
# Guest time is scarce and waits for the lock: the entries that need guests go last, so the
# host-only ones are judged first, whatever the queue for the guests.
host_ids=() guest_ids=()
for id in "${IDS[@]}"; do
  if [[ ${F_FILE[$id]} == guest-driver/* || " ${F_TESTS[$id]}" == *" e2e:"* ]]; then
    guest_ids+=("$id")
  else
    host_ids+=("$id")
  fi
done
for id in "${host_ids[@]}"; do baseline ${F_TESTS[$id]}; done

# --- The mutants -------------------------------------------------------------------------------
declare -A RESULT DETAIL
# mutate ID: apply, rebuild, test, restore; sets RESULT[ID] and DETAIL[ID].
mutate() {
  local id=$1 f t0 built n t
  f=$TREE/${F_FILE[$id]}
  cp "$f" "$LOGS/$id.orig"
  apply "$f" "${F_FROM[$id]}" "${F_TO[$id]}"
  t0=$SECONDS
  say "$id: ${F_FILE[$id]}: ${F_BUG[$id]}"
  built=0
  case ${F_FILE[$id]} in
    qemu-hw/*) qemu_build "$LOGS/$id-build.log" && built=1 ;;
    guest-driver/*) driver_build "$LOGS/$id-build.log" && built=1 ;;
    guest-provider/*) built=1 ;;       # compiled by its test
  esac
  RESULT[$id]=SURVIVED; DETAIL[$id]="every test passed"
  if [ "$built" = 0 ]; then
    RESULT[$id]=BUILD-FAILED; DETAIL[$id]="log: $LOGS/$id-build.log"
  else
    n=0
    for t in ${F_TESTS[$id]}; do
      n=$((n + 1))
      run_test "$t" "$LOGS/$id-$n.log"
      case $? in
        0) continue ;;
        1) RESULT[$id]=KILLED; DETAIL[$id]="by $FAILED_BY" ;;
        *) RESULT[$id]=BUILD-FAILED; DETAIL[$id]="$FAILED_BY, log: $LOGS/$id-$n.log" ;;
      esac
      break
    done
  fi
  if [ "${RESULT[$id]}" = SURVIVED ] && [ -n "${F_WHY[$id]}" ]; then
    DETAIL[$id]="explained: ${F_WHY[$id]}"
  fi
  cp "$LOGS/$id.orig" "$f"
  say "$id: ${RESULT[$id]} (${DETAIL[$id]}; $((SECONDS - t0)) s)"
}
for id in "${host_ids[@]}"; do mutate "$id"; done
if [ ${#guest_ids[@]} -gt 0 ]; then
  [ "$need_driver" = 1 ] && { driver_build "$LOGS/baseline-driver.log" ||
    die "driver/image build failed (log: $LOGS/baseline-driver.log)"; }
  for id in "${guest_ids[@]}"; do baseline ${F_TESTS[$id]}; done
  for id in "${guest_ids[@]}"; do mutate "$id"; done
fi
# Leave the private build unmutated, so the next run's baseline starts from there.
[ "$need_qemu" = 1 ] && qemu_build "$LOGS/final-qemu.log"

# --- Report ------------------------------------------------------------------------------------
pass=0 fail=0 killed=0
printf '\n%-34s %-12s %s\n' "mutation" "result" "detail"
for id in "${IDS[@]}"; do
  printf '%-34s %-12s %s\n' "$id" "${RESULT[$id]}" "${DETAIL[$id]}"
  case ${RESULT[$id]} in
    KILLED) killed=$((killed + 1)); pass=$((pass + 1)) ;;
    SURVIVED) if [ -n "${F_WHY[$id]}" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi ;;
    *) fail=$((fail + 1)) ;;
  esac
done
echo
echo "kill rate: $killed of ${#IDS[@]} ($((100 * killed / ${#IDS[@]}))%), in $((SECONDS - t_start)) s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
