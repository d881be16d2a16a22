#!/bin/bash
# The labs' grader: build a learner's driver for one stage, load it in a pib guest booted
# without pib.ko, and check what the stage asks for against what the device really holds.
#
#   labs/grade.sh NN [DIR]    grade stage NN (01, 02, ...) with the driver sources in DIR
#                             (default: labs/NN-*/skeleton, the learner's working copy);
#                             `make lab STAGE=NN [DRIVER=DIR]` runs this
#   labs/grade.sh --suite     every stage's reference solution (labs/solutions/NN) must pass
#                             and every untouched skeleton must fail, all in one guest boot
#                             (tests/run.sh labs; the last line is "N passed, N failed")
#
# Each check prints "PASS what" or "FAIL what" with a hint; the exit status is 0 only when every
# check of the stage passed.
#
# The guests: `pibvm up --nodes 2 --no-driver --static-lids --sm none` in $PIBVM_DIR (default
# build/vm-lab): two nodes cabled back to back, no pib.ko, each port ACTIVE with its static LID
# as soon as the link trains (no subnet manager needed).  The learner's module is pibl.ko, loaded
# in node 0; node 1 is the far end of the cable (stage 08 loads pibl.ko there too).
# PIBLAB_KEEP=1 leaves the guests up after grading and reuses running ones (quicker while working
# on a stage; `tools/pibvm down` ends them, with the same PIBVM_DIR).  PIB_GUEST_LOCK=FILE: hold
# an flock on FILE while guests run.
#
# Evidence, never the driver's word alone: the registers are read from outside the guest
# (labs/devregs.py: QEMU's monitor reads BAR0), device properties through QMP (qom-get), the
# kernel's view through sysfs, /proc/interrupts and the rdma tool, and the driver's dmesg lines
# are compared with those.  Faults come from the device's inject-* properties (qom-set).
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
source "$TOP/mk/stack.sh"
export PIBVM_DIR=${PIBVM_DIR:-$STACK_OUT/vm-lab}
PIBVM=$TOP/tools/pibvm
DEVREGS=$TOP/labs/devregs.py
QMP=$PIBVM_DIR/node0.qmp
BUILD=$STACK_OUT/labs
# Bounds on the guest commands: a driver that hangs in probe or remove fails, it does not hang
# the grader.  Under TCG a probe that waits for nothing takes well under a second.
LOAD_TIMEOUT=20
UNLOAD_TIMEOUT=20

npass=0 nfail=0
say() { printf '%s\n' "$*"; }
on() { "$PIBVM" exec 0 -- "$@"; }
on_t() { local t=$1; shift; "$PIBVM" exec 0 --timeout "$t" -- "$@"; }

# check WHAT HINT COMMAND...: one graded check.
check() {
  local what=$1 hint=$2; shift 2
  if "$@"; then
    npass=$((npass + 1)); say "  PASS $what"; return 0
  fi
  nfail=$((nfail + 1)); say "  FAIL $what"; say "       hint: $hint"; return 1
}
# expect_eq WHAT HINT GOT WANT
expect_eq() { check "$1 (got '${3}', device holds '${4}')" "$2" test "x$3" = "x$4"; }
# expect_held WHAT HINT HELD WANT: what the device holds (HELD) against what the stage expects.
expect_held() { check "$1 (the device holds '${3}', the stage expects '${4}')" "$2" test "x$3" = "x$4"; }

# reg NAME: a BAR0 register as the device holds it, in decimal ("" if it cannot be read).
declare -A R
read_regs() {
  local name val
  R=()
  while read -r name val; do R[$name]=$((val)); done < <(python3 "$DEVREGS" "$QMP" regs)
}
reg() { read_regs; echo "${R[$1]:-}"; }
qom_get() { python3 "$DEVREGS" "$QMP" qom-get "$1"; }
qom_set() { python3 "$DEVREGS" "$QMP" qom-set "$1" "$2"; }
# irq_late US: every MSI-X message of the device leaves US microseconds late, until set to 0.
irq_late() { qom_set inject-irq-delay-count 0 >/dev/null && qom_set inject-irq-delay-us "$1" >/dev/null; }

# The kernel log after a mark: MARK is written when a stage starts (for no_splats), STEP when
# the driver is loaded (for the lines of that load).
MARK='' STEP=''
new_mark() { local m="pibl-grade-mark $$ $RANDOM$RANDOM"; on sh -c "echo '$m' > /dev/kmsg"; echo "$m"; }
dmesg_mark() { MARK=$(new_mark); STEP=$MARK; }
dmesg_since() { on dmesg | awk -v m="${1:-$MARK}" 'found; index($0, m) {found = 1}'; }
dmesg_step() { dmesg_since "$STEP"; }
step_has() { dmesg_step | grep -qE "$1"; }
step_lacks() { ! step_has "$1"; }
# What no kernel log may say: an oops or warning, or the driver's own complaints.
SPLATS='WARNING:|BUG:|Call Trace|Oops|general protection|refcount_t|list_(add|del) corruption|pibl .*(timed out|nobody waits)'
no_splats() {
  local w
  w=$(dmesg_since | grep -E "$SPLATS")
  [ -z "$w" ] || { say "       kernel log:"; sed 's/^/         /' <<<"$w"; }
  check "no oops, warning or driver error in the kernel log" \
    "read the lines above: an oops names the function; 'nobody waits' means the phase bit was not checked" \
    test -z "$w"
}

# The HCA's PCI address in the guest (0000:00:03.0 under pibvm).
BDF=
find_bdf() {
  BDF=$(on sh -c 'for d in /sys/bus/pci/devices/*; do
                    [ "$(cat $d/vendor)$(cat $d/device)" = 0x1af40x10f0 ] && basename $d; done' | head -n1)
}

# ------------------------------------------------------------------------------------------
# Build, load, unload
# ------------------------------------------------------------------------------------------

KROOT='' KDIR=''
kernel_tree() {
  KROOT=$("$TOP/mk/fetch.sh" kernel) || return 1
  KDIR=$KROOT/root/usr/src/linux-headers-$(cat "$KROOT/abi")-amd64
}

kbuild() { stack_run make -C "$KDIR" M="$1" PIB_INCLUDE="$TOP/include" W=1 modules >"$2" 2>&1; }

# build DIR TAG: build pibl.ko from DIR's Kbuild and sources in a copy ($BUILD/TAG), as
# mk/kbuild.sh builds pib.ko; sets KO.
KO=
build() {
  local src=$1 out=$BUILD/$2 log
  KO=
  rm -rf "$out"; mkdir -p "$out"
  # Sources only: a *.mod.c is what a `make` in DIR left (modpost's output), not a source.
  local f
  for f in "$src"/Kbuild "$src"/*.[ch]; do
    case $f in *.mod.c) continue ;; esac
    [ -f "$f" ] && cp "$f" "$out"/
  done
  log=$out/build.log
  if ! check "the driver in ${src#"$TOP"/} builds" "the compiler's messages are in $log" \
       kbuild "$out" "$log"; then
    grep -E 'error|warning' "$log" | head -n 20 | sed 's/^/       /'
    return 1
  fi
  check "it builds without compiler warnings" "see $log; a warning is often a real bug" \
    bash -c "! grep -q 'warning:' '$log'"
  KO=$out/pibl.ko
  check "the module is named pibl (pibl.ko)" "Kbuild: obj-m := pibl.o" test -f "$KO" || return 1
  "$PIBVM" cp "$KO" 0:/root/pibl.ko >/dev/null 2>&1
}

# load PARAMS...: insmod pibl.ko in node 0; sets LOAD_RC and LOAD_OUT.
LOAD_RC='' LOAD_OUT=''
load() {
  LOAD_OUT=$(on_t "$LOAD_TIMEOUT" insmod /root/pibl.ko "$@" 2>&1); LOAD_RC=$?
}
loaded() { on grep -q '^pibl ' /proc/modules; }
unload() { on_t "$UNLOAD_TIMEOUT" rmmod pibl >/dev/null 2>&1; }

# check_load WHAT PARAMS...: load, and check that it loaded and bound to the HCA.
check_load() {
  local what=$1; shift
  STEP=$(new_mark)
  load "$@"
  check "$what: insmod pibl.ko $* succeeds" \
    "exit status $LOAD_RC ($LOAD_OUT): probe returned an error (dmesg says which), or took over $LOAD_TIMEOUT s" \
    test "$LOAD_RC" -eq 0 || return 1
  check "$what: pibl is bound to the HCA at $BDF" \
    "the PCI ID table must name 1af4:10f0 and probe must return 0 (the driver's own lines are below, if any)" \
    on test -e "/sys/bus/pci/drivers/pibl/$BDF" && return 0
  dmesg_step | grep -E 'pibl|probe' | tail -n 8 | sed 's/^/         /'
  return 1
}

# check_unload WHAT: rmmod, and the device let go of.
check_unload() {
  local what=$1 st
  check "$what: rmmod pibl succeeds" \
    "remove() must not block, and nothing may hold the module" unload || return 1
  check "$what: the module is gone and the HCA has no driver" \
    "rmmod returned but pibl is still listed, or still bound to $BDF" \
    bash -c "! '$PIBVM' exec 0 -- grep -q '^pibl ' /proc/modules &&
             ! '$PIBVM' exec 0 -- test -e /sys/bus/pci/devices/$BDF/driver"
  st=$(on cat "/sys/bus/pci/devices/$BDF/enable")
  check "$what: the PCI function is disabled again (enable = $st)" \
    "remove() must undo probe: pci_disable_device() (and pci_release_region() before it)" \
    test "$st" = 0
}

# A module left loaded by a failed check would spoil the next one.
cleanup_module() {
  "$PIBVM" exec 1 -- rmmod pibl >/dev/null 2>&1   # stage 08 loads it in node 1 too
  loaded 2>/dev/null || return 0
  unload || { say "  (pibl cannot be unloaded: the guests are restarted)"; GUESTS_DIRTY=1; }
}

# dmesg_value REGEX: the first capture of REGEX (sed -E) in the kernel log of the last load.
dmesg_value() { dmesg_step | sed -nE "s/.*$1.*/\\1/p" | head -n1; }

hex32() { printf '0x%08x' "$1"; }

# ------------------------------------------------------------------------------------------
# Stage 01: probe
# ------------------------------------------------------------------------------------------

stage_01() {
  local s v line m ver caps uars errs0
  s=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  errs0=$(reg ERR_COUNT)
  dmesg_mark
  check_load "load" "scratch=$s" || return
  read_regs
  line=$(dmesg_step | grep -E 'pibl [0-9a-f:.]+: magic ' | head -n1)
  check "dmesg has the identity line 'pibl $BDF: magic ... version ... caps ... num_uars ...'" \
    "dev_info(&pdev->dev, \"magic %#010x version %u.%u caps %#010x num_uars %u\\n\", ...)" \
    test -n "$line"
  m=$(sed -nE 's/.*magic (0x[0-9a-f]+).*/\1/p' <<<"$line")
  ver=$(sed -nE 's/.*version ([0-9]+\.[0-9]+).*/\1/p' <<<"$line")
  caps=$(sed -nE 's/.*caps (0x[0-9a-f]+).*/\1/p' <<<"$line")
  uars=$(sed -nE 's/.*num_uars ([0-9]+).*/\1/p' <<<"$line")
  expect_eq "MAGIC printed as read" "read MAGIC (offset PIB_REG_MAGIC) with readl() from BAR0" \
    "$m" "$(hex32 "${R[MAGIC]}")"
  expect_eq "VERSION printed as major.minor" "VERSION is [31:16] major, [15:0] minor" \
    "$ver" "$((R[VERSION] >> 16)).$((R[VERSION] & 0xffff))"
  expect_eq "CAPS printed as read" "read CAPS (PIB_REG_CAPS) with readl()" "$caps" "$(hex32 "${R[CAPS]}")"
  expect_eq "NUM_UARS printed as read" "read NUM_UARS (PIB_REG_NUM_UARS) with readl()" "$uars" "${R[NUM_UARS]}"
  expect_eq "SCRATCH holds the scratch= parameter (a write reached the device)" \
    "writel(scratch, regs + PIB_REG_SCRATCH) after mapping BAR0" \
    "$(hex32 "${R[SCRATCH]}")" "$(hex32 "$s")"
  v=$(on cat "/sys/bus/pci/devices/$BDF/enable")
  check "the PCI function is enabled (enable = $v)" "pci_enable_device() in probe" test "$v" = 1
  errs_check "$errs0"
  check_unload "unload"
  # The trap: a remove() that forgets pci_release_region() (or iounmap) lets the first load
  # work and makes the second fail with -EBUSY.
  check_load "load again" "scratch=$((s ^ 0xffff))" &&
    check_unload "unload again"
  no_splats
}

# errs_check BEFORE: the device saw no guest error since (ERR_COUNT did not grow; a reset by
# the driver sets it back to 0, and then it must be 0), and its teach mode reported nothing
# since the stage began (teach-reports: what real hardware would punish silently).
errs_check() {
  local before=$1 now last teach
  read_regs
  now=${R[ERR_COUNT]} last=${R[ERR_LAST]}
  if [ "$now" -lt "$before" ]; then before=0; fi
  check "the device counted no guest error (ERR_COUNT $before -> $now, ERR_LAST $last)" \
    "ERR_LAST is a PIB_GERR_* code (include/pib_hw.h, PIB_GUEST_ERRORS): 1 BAD_ACCESS is a register access that is not 32 bits wide, or a write to a read-only register" \
    test "$now" -eq "$before"
  teach=$(qom_get teach-reports)
  check "the device's teach mode reported nothing (teach-reports $TEACH0 -> $teach)" \
    "labs/README.md, \"The device teaches\", says what each rule means; the last reports: $(teach_lines)" \
    test "x$teach" = "x$TEACH0"
}
# teach_lines: the device's last two teach reports (its QEMU log, -d guest_errors), on one line.
teach_lines() {
  grep -a '^pib: teach: ' "$PIBVM_DIR/node0.qemu.log" 2>/dev/null | tail -n 2 |
    sed 's/^pib: teach: //' | paste -sd ';' -
}

# ------------------------------------------------------------------------------------------
# Stage 02: reset and the admin queue
# ------------------------------------------------------------------------------------------

# aq_checks WHAT: the admin queue registers against the driver's line.
aq_checks() {
  local what=$1 line depth sq cq
  read_regs
  check "$what: STATUS is READY and not FATAL (STATUS ${R[STATUS]})" \
    "program AQ_*, AEQ_* (CEQ_DEPTH 0) then CONTROL.ENABLE; if READY stays 0, ERR_LAST says why (2 BAD_CONFIG)" \
    test "${R[STATUS]}" -eq 1
  line=$(dmesg_step | grep -E 'pibl [0-9a-f:.]+: admin queue depth ' | head -n1)
  check "$what: dmesg has 'admin queue depth D sq 0x... cq 0x...'" \
    "dev_info(dev, \"admin queue depth %u sq %pad cq %pad\\n\", ...) after ENABLE" test -n "$line" || return
  depth=$(sed -nE 's/.*depth ([0-9]+).*/\1/p' <<<"$line")
  sq=$(sed -nE 's/.* sq (0x[0-9a-f]+).*/\1/p' <<<"$line")
  cq=$(sed -nE 's/.* cq (0x[0-9a-f]+).*/\1/p' <<<"$line")
  expect_eq "$what: AQ_DEPTH is the depth printed" "write AQ_DEPTH before ENABLE" "$depth" "${R[AQ_DEPTH]}"
  expect_eq "$what: AQ_SQ_HI:LO is the command ring's DMA address" \
    "AQ_SQ_LO = lower_32_bits(dma), AQ_SQ_HI = upper_32_bits(dma) of dma_alloc_coherent()'s handle" \
    "$((sq))" "$(( R[AQ_SQ_HI] << 32 | R[AQ_SQ_LO] ))"
  expect_eq "$what: AQ_CQ_HI:LO is the completion ring's DMA address" "as AQ_SQ, for the completion ring" \
    "$((cq))" "$(( R[AQ_CQ_HI] << 32 | R[AQ_CQ_LO] ))"
  check "$what: the depth is a power of two from 2 to 256 (the grader's wrap test runs 2 x depth NOPs)" \
    "PIB_QUEUE_MIN_DEPTH..256; 64 fills one page of commands" \
    bash -c "[ '$depth' -ge 2 ] && [ '$depth' -le 256 ] && [ \$(( $depth & ($depth - 1) )) -eq 0 ]"
  AQ_DEPTH_SEEN=$depth
}

# nops_check WHAT COUNT VALUE: the driver's NOP summary line.
nops_check() {
  local what=$1 n=$2 v=$3 got
  got=$(dmesg_value "pibl [0-9a-f:.]+: ([0-9]+ NOPs completed, last echoed 0x[0-9a-f]+)")
  expect_eq "$what: every NOP completed with its own value echoed" \
    "NOP i carries nop_value + i in in.nop.value; wait for completion i by its phase bit (pib_ring_owned()) and compare result0; print \"%u NOPs completed, last echoed %#010x\"" \
    "$got" "$n NOPs completed, last echoed $(hex32 $(( (v + n - 1) & 0xffffffff )))"
}

# ready_cleared WHAT: after rmmod the device must not run its queues any more.
ready_cleared() {
  local st
  st=$(reg STATUS)
  check "$1: the device was stopped before its rings were freed (STATUS $st, READY clear)" \
    "remove() must write CONTROL.RESET (and wait for READY to clear) before dma_free_coherent(): a running device writes into memory the kernel reuses" \
    test $(( st & 1 )) -eq 0
}

AQ_DEPTH_SEEN=0
stage_02() {
  local v n
  v=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  dmesg_mark
  check_load "load" "nop_value=$v" "nop_count=1" || return
  aq_checks "load"
  nops_check "load" 1 "$v"
  errs_check 0
  check_unload "unload" && ready_cleared "unload"
  # The trap: a second pass over the completion ring.  Its slots still hold the first pass's
  # completions, phase bit 1; the second pass writes 0.  A driver that takes "phase bit set"
  # for "new" reads stale completions (and their old echoes).
  [ "$AQ_DEPTH_SEEN" -ge 2 ] 2>/dev/null || AQ_DEPTH_SEEN=64
  n=$(( 2 * AQ_DEPTH_SEEN + 3 ))
  v=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  if check_load "wrap" "nop_value=$v" "nop_count=$n"; then
    nops_check "wrap ($n NOPs, 2 passes over the ring and a bit)" "$n" "$v"
    errs_check 0
    check_unload "wrap: unload"
  fi
  no_splats
}

# ------------------------------------------------------------------------------------------
# Stage 03: interrupts
# ------------------------------------------------------------------------------------------

# irqs NAME: interrupts taken by the handler named NAME in /proc/interrupts ("" without a line).
irqs() {
  on awk -v n="$1" '$NF == n {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; f = 1}
                    END {if (f) print s + 0}' /proc/interrupts
}

stage_03() {
  local v a b ev want lid link
  v=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  qom_set inject-irq-delay-us 0 >/dev/null
  dmesg_mark
  check_load "load" "nop_value=$v" "nop_count=8" || return
  nops_check "load" 8 "$v"
  a=$(irqs pibl-admin) b=$(irqs pibl-async)
  check "an MSI-X handler named pibl-admin took the admin completions (${a:-no line} interrupts)" \
    "pci_alloc_irq_vectors(..., PCI_IRQ_MSIX), request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ADMIN), ..., \"pibl-admin\", ...)" \
    test "${a:-0}" -ge 1
  check "no admin command needed the fall-back to polling on time-kept interrupts" \
    "the admin IRQ handler must take the completions (by phase bit) and wake the waiter" \
    step_lacks 'pibl .*admin completion without interrupt'
  check "an MSI-X handler named pibl-async took the port's event (${b:-no line} interrupts)" \
    "request_irq(pci_irq_vector(pdev, PIB_MSIX_VEC_ASYNC), ..., \"pibl-async\", ...) before ENABLE" \
    test "${b:-0}" -ge 1
  # What ENABLE posted: PORT_ACTIVE if the port is ACTIVE (link up, static LID), LINK_UP if only
  # the link is up, nothing if it is down (hardware.md, "Async event queue").
  link=$(reg LINK_STATE) lid=$(qom_get lid)
  if [ "$link" = 1 ] && [ "$lid" != 0 ]; then want=0x01; elif [ "$link" = 1 ]; then want=0x04; else want=; fi
  ev=$(dmesg_value "pibl [0-9a-f:.]+: async event (0x[0-9a-f]+ obj [0-9]+)")
  expect_eq "the AEQ handler logged the event ENABLE posted ('async event TYPE obj PORT')" \
    "walk the AEQ by phase bit, print \"async event %#04x obj %u data %#llx\", then write the consumer index to AEQ_DB" \
    "$ev" "${want:+$want obj 1}"
  errs_check 0
  check_unload "unload" && ready_cleared "unload"
  # The trap: every interrupt comes 60 s late (the device's most).  The completions are in the
  # ring on time; a driver that waits for the interrupt alone needs 60 s per command (4 NOPs),
  # one that looks at the ring after its own timeout (2 s) goes on, and says once that its
  # interrupts are missing.  The 30 s bound on the load is a hang guard far from both.
  v=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  check "late MSI-X: the device holds every interrupt back 60 s (inject-irq-delay-us)" \
    "the grader could not set the device's error injection (QMP qom-set)" \
    irq_late 60000000
  if LOAD_TIMEOUT=30 check_load "late MSI-X (60 s)" "nop_value=$v" "nop_count=4"; then
    nops_check "late MSI-X" 4 "$v"
    check "late MSI-X: the driver said it found the completion without an interrupt" \
      "after wait_for_completion_timeout() expires, look at the ring; if the completion is there, warn \"admin completion without interrupt\" and poll from then on" \
      step_has 'pibl .*admin completion without interrupt'
    check_unload "late MSI-X: unload"
  fi
  qom_set inject-irq-delay-us 0 >/dev/null
  no_splats
}

# ------------------------------------------------------------------------------------------
# Stage 04: an ib_device
# ------------------------------------------------------------------------------------------

# wait_link 0|1: until the device's LINK_STATE is that (at most 60 s: node 1 boots meanwhile).
wait_link() {
  local i
  for ((i = 0; i < 300; i++)); do [ "$(reg LINK_STATE)" = "$1" ] && return 0; sleep 0.2; done
  return 1
}

# guid_sysfs N: a 64-bit number as sysfs writes a GUID (xxxx:xxxx:xxxx:xxxx).
guid_sysfs() { printf '%016x' "$1" | sed -E 's/(....)(....)(....)(....)/\1:\2:\3:\4/'; }

stage_04() {
  local v ib p guid lid link st
  v=$(( (RANDOM << 16 | RANDOM) & 0xffffffff ))
  dmesg_mark
  check_load "load" "nop_value=$v" || return
  ib=/sys/class/infiniband/pibl_0
  check "ib_core has the device pibl_0, parent $BDF" \
    "ib_alloc_device(), the ops, ib_register_device(ibdev, \"pibl_%d\", &pdev->dev)" \
    on sh -c "[ \"\$(basename \$(readlink -f $ib/device))\" = $BDF ]" || { cleanup_module; return; }
  guid=$(qom_get node-guid)
  expect_eq "node_guid is the device's (QUERY_DEVICE node_guid)" \
    "ibdev->node_guid is big-endian (__be64): cpu_to_be64(attr.node_guid)" \
    "$(on cat $ib/node_guid)" "$(guid_sysfs "$guid")"
  p=$ib/ports/1
  link=$(reg LINK_STATE) lid=$(qom_get lid)
  if [ "$link" = 1 ] && [ "$lid" != 0 ]; then st="4: ACTIVE"; elif [ "$link" = 1 ]; then st="2: INIT"; else st="1: DOWN"; fi
  expect_eq "port 1 state (QUERY_PORT state)" "query_port copies pib_port_attr.state" "$(on cat $p/state)" "$st"
  expect_eq "port 1 physical state" "query_port copies phys_state" "$(on cat $p/phys_state)" \
    "$([ "$link" = 1 ] && echo "5: LinkUp" || echo "2: Polling")"
  expect_eq "port 1 LID" "query_port copies lid" "$(on cat $p/lid)" "$(printf '0x%x' "$lid")"
  expect_eq "port 1 rate" "query_port copies active_width and active_speed (IBTA encodings, as ib_core's)" \
    "$(on cat $p/rate)" "40 Gb/sec (4X QDR)"
  expect_eq "port 1 link layer" "get_link_layer returns IB_LINK_LAYER_INFINIBAND" \
    "$(on cat $p/link_layer)" "InfiniBand"
  expect_eq "GID 0 is the subnet prefix and the port GUID (node GUID + 1)" \
    "query_gid: QUERY_GID writes the 16 bytes in wire order into gid->raw (resp_addr, resp_len 16)" \
    "$(on cat $p/gids/0)" "fe80:0000:0000:0000:$(guid_sysfs $((guid + 1)))"
  expect_eq "P_Key 0 is the default 0xffff" "query_pkey: QUERY_PKEY's result0" \
    "$(on cat $p/pkeys/0)" "0xffff"
  check "the rdma tool (netlink, ib_core) shows pibl_0/1 ACTIVE and LINK_UP" \
    "rdma link show asks ib_core, which asks query_port" \
    bash -c "'$PIBVM' exec 0 -- rdma link show pibl_0/1 | grep -q 'state ACTIVE physical_state LINK_UP'"
  # The trap: the port goes down under the loaded driver (node 1's QEMU is killed, as in a
  # crash), then comes back (node 1 boots again).  A driver that answers from what it learned
  # at probe still says ACTIVE.
  if "$PIBVM" kill 1 >/dev/null 2>&1; then
    wait_link 0
    expect_eq "far end gone: port 1 state" "query_port must ask the device (QUERY_PORT) every time" \
      "$(on cat $p/state)" "1: DOWN"
    "$PIBVM" up --node 1 >"$BUILD/pibvm-up-node1.log" 2>&1 || GUESTS_DIRTY=1
    wait_link 1
    expect_eq "far end back: port 1 state" "query_port must ask the device every time" \
      "$(on cat $p/state)" "4: ACTIVE"
  else
    check "node 1 could be killed for the port-down check" "a grader problem: pibvm kill 1" false
  fi
  errs_check 0
  check_unload "unload" && {
    check "unload: pibl_0 is gone from /sys/class/infiniband" "remove(): ib_unregister_device() first" \
      on sh -c "! test -e $ib"
    ready_cleared "unload"
  }
  no_splats
}

# ------------------------------------------------------------------------------------------
# Stage 05: a user context
# ------------------------------------------------------------------------------------------

# devinfo_field TEXT KEY: the value after "KEY:" in ibv_devinfo's output (first match).
devinfo_field() { awk -v k="$2:" '$1 == k {$1 = ""; sub(/^ +/, ""); print; exit}' <<<"$1"; }

stage_05() {
  local out rc guid lid n uars
  dmesg_mark
  check_load "load" || return
  check "ib_uverbs made a uverbs device for pibl_0 with ABI version 1" \
    "ib_uverbs creates /dev/infiniband/uverbsN only for a driver with alloc_ucontext; ops.uverbs_abi_ver = PIB_UVERBS_ABI_VERSION" \
    on sh -c 'for u in /sys/class/infiniband_verbs/uverbs*; do
                [ "$(cat $u/ibdev)" = pibl_0 ] && [ "$(cat $u/abi_version)" = 1 ] && exit 0; done; exit 1' ||
    { cleanup_module; return; }
  out=$(on_t 20 ibv_devinfo -d pibl_0 2>&1); rc=$?
  check "ibv_devinfo -d pibl_0 opens the device through pib's provider (exit $rc)" \
    "the provider's alloc_context: your alloc_ucontext (ALLOC_UAR, an mmap entry for the page, struct pib_ibv_alloc_ucontext_resp) and mmap (rdma_user_mmap_io, non-cached)" \
    test "$rc" -eq 0 || { sed 's/^/         /' <<<"$out" | head -n 8; }
  guid=$(qom_get node-guid) lid=$(qom_get lid)
  expect_eq "ibv_devinfo: hca_id" "the device's name" "$(devinfo_field "$out" hca_id)" "pibl_0"
  expect_eq "ibv_devinfo: node_guid" "as in stage 04" "$(devinfo_field "$out" node_guid)" "$(guid_sysfs "$guid")"
  expect_eq "ibv_devinfo: port 1 state" "query_port, through uverbs" "$(devinfo_field "$out" state)" "PORT_ACTIVE (4)"
  expect_eq "ibv_devinfo: port_lid" "query_port, through uverbs" "$(devinfo_field "$out" port_lid)" "$lid"
  # The trap: a context that does not give its UAR page back.  NUM_UARS - 1 pages serve user
  # contexts; open and close the device more times than that.
  uars=$(reg NUM_UARS); n=$(( ${uars:-256} + 4 ))
  out=$(on_t 300 sh -c "i=0; while [ \$i -lt $n ]; do ibv_devinfo -d pibl_0 >/dev/null 2>&1 || { echo \$i; exit 1; }; i=\$((i + 1)); done"); rc=$?
  check "ibv_devinfo $n times in a row (more than the device's $uars UAR pages)" \
    "failed at run ${out:-?}: dealloc_ucontext must remove the mmap entry and DEALLOC_UAR the page" \
    test "$rc" -eq 0
  errs_check 0
  check_unload "unload" && ready_cleared "unload"
  no_splats
}

# ------------------------------------------------------------------------------------------
# Stage 06: PDs, MRs and CQs
# ------------------------------------------------------------------------------------------

# What the device holds: "PDS MRS CQS MTT" (qom-get objects-pd, objects-mr, objects-cq,
# mtt-pages).
held() { echo "$(qom_get objects-pd) $(qom_get objects-mr) $(qom_get objects-cq) $(qom_get mtt-pages)"; }

# holder_run SCRIPT [MODE]: labs/SCRIPT (objects.py, qps.py) in node 0, in the background; waits
# until it holds what it made (it creates $HOLD.holding) or has ended, bounded by a count of
# looks.  Sets HOLD_PID.  The script goes on when $HOLD.go appears (holder_end).
HOLD=/tmp/pibl-holder HOLD_PID=''
holder_run() {
  local i
  "$PIBVM" cp "$TOP/labs/$1" "0:/root/$1" >/dev/null 2>&1
  on rm -f "$HOLD.holding" "$HOLD.go" "$HOLD.out"
  # Its output goes to a file in the guest: the guest agent hands over a command's output only
  # when it ends, and the grader reads it while the objects are held.
  "$PIBVM" exec 0 --timeout 600 -- sh -c "python3 /root/$1 $HOLD ${2:-} > $HOLD.out 2>&1" &
  HOLD_PID=$!
  for ((i = 0; i < 600; i++)); do
    on test -e "$HOLD.holding" && return 0
    kill -0 "$HOLD_PID" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
# holder_out LOG: what it printed so far, into LOG (on the host).
holder_out() { on cat "$HOLD.out" >"$1" 2>/dev/null; }
# holder_end LOG: tell it to go on, wait for it, its output into LOG; returns its exit status.
holder_end() { local rc; on touch "$HOLD.go"; wait "$HOLD_PID"; rc=$?; holder_out "$1"; return $rc; }
# fails LOG: the script's FAIL lines, indented under the check that failed.
fails() { sed -n 's/^FAIL/         FAIL/p' "$1"; }

stage_06() {
  local base now log=$BUILD/objects.log rc pd0 mr0 cq0 mtt0 pd mr cq mtt
  dmesg_mark
  check_load "load" || return
  base=$(held); read -r pd0 mr0 cq0 mtt0 <<<"$base"
  check "the device holds no PD, MR or CQ of pibl's own after the load (got $pd0 $mr0 $cq0)" \
    "this stage makes objects for user space only: alloc_pd and create_cq refuse the kernel's callers (udata NULL)" \
    test "$pd0 $mr0 $cq0" = "0 0 0"
  holder_run objects.py
  holder_out "$log"
  check "pyverbs opens pibl_0 and makes 3 PDs, 4 MRs and 3 CQs (labs/objects.py)" \
    "the lines below say which failed and with which errno (a CQ: query_device's max_cqe must let the provider ask; dmesg shows your driver's messages)" \
    bash -c "grep -q '^ok   CQ of 1000' '$log' && ! grep -q '^FAIL' '$log'" || fails "$log"
  now=$(held); read -r pd mr cq mtt <<<"$now"
  expect_held "PDs the device holds" "alloc_pd: CREATE_PD, its PDN kept for dealloc_pd" "$pd" 3
  expect_held "MRs the device holds" "reg_user_mr: ib_umem_get, a page list, REG_MR" "$mr" 4
  expect_held "CQs the device holds" "create_cq: the provider's request (struct pib_ibv_create_cq), ib_umem_get of its ring, CREATE_CQ" "$cq" 3
  # 1 + 256 + 3 + 1024 pages of MRs, 2 + 2 + 9 of CQ rings.
  expect_held "page list entries the device holds (mtt-pages $mtt0 -> $mtt)" \
    "one entry per 4 KiB page each range touches: ib_umem_num_dma_blocks(umem, SZ_4K), not length / 4096 (the 8 KiB MR starts 100 bytes into a page: 3 pages)" \
    "$((mtt - mtt0))" 1297
  holder_end "$log"; rc=$?
  check "the process frees them all (exit $rc)" \
    "dereg_mr: DEREG_MR, then ib_umem_release; destroy_cq: DESTROY_CQ, then ib_umem_release; dealloc_pd: DESTROY_PD" \
    bash -c "[ $rc -eq 0 ] && grep -q '^released' '$log'" || fails "$log"
  expect_held "what the device holds after the process freed it (PDs MRs CQs pages)" \
    "every destroy must reach the device: a missing command leaves the object in it" "$(held)" "$base"
  # The trap: a process that dies holding everything.  ib_uverbs frees what it held, through
  # the same dealloc/dereg/destroy calls, in its own order; the device must end up empty.
  holder_run objects.py die
  holder_out "$BUILD/objects-die.log"
  check "a second process makes them again" "see $BUILD/objects-die.log" \
    bash -c "grep -q '^ok   CQ of 1000' '$BUILD/objects-die.log' && ! grep -q '^FAIL' '$BUILD/objects-die.log'"
  holder_end "$BUILD/objects-die.log"; rc=$?
  check "it dies by SIGKILL holding them (exit $rc)" "a grader problem if not: see $BUILD/objects-die.log" \
    test "$rc" -eq 137
  expect_held "what the device holds after ib_uverbs cleaned up for the dead process" \
    "ib_uverbs calls your destroy functions when the process dies: each must work without the process (udata is not the process's)" \
    "$(held)" "$base"
  errs_check 0
  check_unload "unload" && ready_cleared "unload"
  no_splats
}

# ------------------------------------------------------------------------------------------
# Stage 07: QPs and their state machine
# ------------------------------------------------------------------------------------------

# The device's own account of MODIFY_QP: its trace points pib_qp_modify ("QP n MODIFY A -> B")
# and pib_qp_modify_reject, in node 0's QEMU log since the byte offset TRACE0.
TRACE0=0
trace_start() {
  TRACE0=$(stat -c %s "$PIBVM_DIR/node0.qemu.log" 2>/dev/null || echo 0)
  python3 "$DEVREGS" "$QMP" trace on 'pib_qp_modify*'
}
trace_stop() { python3 "$DEVREGS" "$QMP" trace off 'pib_qp_modify*'; }
traced() { tail -c +$((TRACE0 + 1)) "$PIBVM_DIR/node0.qemu.log" 2>/dev/null | grep -a '^pib_qp_modify'; }
# traced_moves QPN "A -> B" ...: the MODIFY_QPs the device traced for QP QPN, exactly these, in
# this order (A: the state the device held, B: the one asked for).
traced_moves() {
  local qpn=$1 want got; shift
  want=$(printf '%s\n' "$@")
  got=$(traced | sed -nE "s/^pib_qp_modify QP $qpn MODIFY ([A-Z]+ -> [A-Z]+) .*/\1/p")
  [ "$got" = "$want" ] || { say "       the device traced for QP $qpn:"; sed 's/^/         /' <<<"${got:-(nothing)}"; return 1; }
}
# none_refused: the device refused no MODIFY_QP since trace_start.
none_refused() { ! traced | grep -q '^pib_qp_modify_reject'; }

stage_07() {
  local log=$BUILD/qps.log rc qrc qud
  dmesg_mark
  check_load "load" || return
  trace_start
  holder_run qps.py
  holder_out "$log"
  check "pyverbs makes a PD, a CQ, an MR, an RC and a UD QP, and moves them to RTS (labs/qps.py)" \
    "the lines below say which step failed and with which errno; dmesg shows your driver's messages" \
    bash -c "grep -q '^ok   UD: the state read back is RTS' '$log' && ! grep -q '^FAIL' '$log'" || fails "$log"
  read -r qrc qud < <(sed -nE 's/.*RC QPN ([0-9]+) UD QPN ([0-9]+).*/\1 \2/p' "$log")
  expect_held "QPs the device holds" "create_qp: the provider's rings (struct pib_ibv_create_qp) pinned, CREATE_QP through the mailbox" \
    "$(qom_get objects-qp)" 2
  check "a SEND from the RC QP to itself delivered every byte" \
    "the data path is the provider's and the device's: a failure here is in the QP's attributes (INIT's access, RTR's path) or in stage 06's MR and CQ" \
    grep -q '^ok   RC: the 4 KiB arrived' "$log"
  check "the device took the RC QP (QPN ${qrc:-?}) RESET -> INIT -> RTR -> RTS" \
    "modify_qp: MODIFY_QP with struct pib_qp_attr in the mailbox (in.mbox.obj = the QPN)" \
    traced_moves "${qrc:-x}" "RESET -> INIT" "INIT -> RTR" "RTR -> RTS"
  check "the device took the UD QP (QPN ${qud:-?}) RESET -> INIT -> RTR -> RTS" \
    "UD: INIT with the Q_Key, RTR with nothing, RTS with the SQ PSN" \
    traced_moves "${qud:-x}" "RESET -> INIT" "INIT -> RTR" "RTR -> RTS"
  # The first trap: RESET -> RTS is not an IB transition.  The driver refuses it, EINVAL,
  # before the device is asked: the device never refuses a MODIFY_QP.
  check "the forbidden RESET -> RTS never reached the device (no 'MODIFY refused' traced)" \
    "modify_qp must check ib_modify_qp_is_ok(cur, next, type, mask) first and answer -EINVAL; the device's refusal (BAD_STATE) would be an EIO" \
    none_refused
  # The second trap: the RC QP's next send WQE (index 1) fails in the device, which moves the
  # QP to ERR by itself.  query_qp must say what the device holds.
  [ -z "$qrc" ] || qom_set inject-wr-error "\"$qrc:1:REM_ACCESS_ERR\"" >/dev/null
  holder_end "$log"; rc=$?
  check "the SEND the device failed completed in error" "a grader problem if not: see $log" \
    grep -q '^ok   RC: the SEND completed in error' "$log"
  check "ibv_query_qp says ERR after the device moved the QP there" \
    "query_qp must ask the device (QUERY_QP) every time, not answer with the last state modify_qp set" \
    grep -q '^ok   RC: ibv_query_qp says ERR' "$log"
  check "the device took the RC QP from ERR, where it had put it, to RESET and INIT" \
    "from ERR, RESET is always allowed; modify_qp's current state is the device's (QUERY_QP), not a copy" \
    traced_moves "${qrc:-x}" "RESET -> INIT" "INIT -> RTR" "RTR -> RTS" "ERR -> RESET" "RESET -> INIT"
  check "the process frees everything (exit $rc)" \
    "destroy_qp: DESTROY_QP, then ib_umem_release of both rings" \
    bash -c "[ $rc -eq 0 ] && grep -q '^released' '$log' && ! grep -q '^FAIL' '$log'" || fails "$log"
  expect_held "what the device holds after the process ended (QPs, then PDs MRs CQs pages)" \
    "every destroy must reach the device" "$(qom_get objects-qp) $(held)" "0 0 0 0 0"
  trace_stop
  errs_check 0
  check_unload "unload" && ready_cleared "unload"
  no_splats
}

# ------------------------------------------------------------------------------------------
# Guests and driving
# ------------------------------------------------------------------------------------------

GUESTS_DIRTY=0 LOCKED=0
guests_up() {
  if [ -n "${PIB_GUEST_LOCK:-}" ] && [ "$LOCKED" = 0 ]; then
    exec 8>"$PIB_GUEST_LOCK"; flock 8; LOCKED=1
  fi
  if [ "${PIBLAB_KEEP:-0}" = 1 ] && [ "$GUESTS_DIRTY" = 0 ] && "$PIBVM" exec 0 -- true >/dev/null 2>&1 &&
     grep -q '"no_driver": true' "$PIBVM_DIR/state.json" 2>/dev/null; then
    # Guests kept from an earlier run: usable unless a driver is stuck in them.
    find_bdf
    cleanup_module
    [ "$GUESTS_DIRTY" = 1 ] || return 0
  fi
  "$PIBVM" down >/dev/null 2>&1
  say "== booting the lab guests (pibvm up --nodes 2 --no-driver --static-lids --sm none)"
  "$PIBVM" up --nodes 2 --no-driver --static-lids --sm none >"$BUILD/pibvm-up.log" 2>&1 ||
    { cat "$BUILD/pibvm-up.log"; return 1; }
  GUESTS_DIRTY=0
  find_bdf
  # The port comes up when the link trains, without a driver; wait for it (bounded).
  wait_link 1
}
guests_down() {
  [ "${PIBLAB_KEEP:-0}" = 1 ] && [ "$GUESTS_DIRTY" = 0 ] || "$PIBVM" down >/dev/null 2>&1
  [ "$LOCKED" = 0 ] || { exec 8>&-; LOCKED=0; }
}

# ------------------------------------------------------------------------------------------
# Stage 08: the kernel's own queues and the management datagrams
# ------------------------------------------------------------------------------------------

# Node 1 runs the learner's driver too: a MAD to node 1 needs its QP1 (and an SMP its QP0).
qom1_get() { python3 "$DEVREGS" "$PIBVM_DIR/node1.qmp" qom-get "$1"; }
# smp_guid NODE ARGS...: the node GUID smpquery nodeinfo prints (run on NODE), as 0x%016x.
smp_guid() {
  local n=$1; shift
  "$PIBVM" exec "$n" -- smpquery "$@" 2>/dev/null | sed -nE 's/^Guid:\.*(0x[0-9a-f]+)$/\1/p'
}
# comp_irqs NODE: the interrupts the kernel took on the "pibl-comp" vector, all CPUs.
comp_irqs() {
  "$PIBVM" exec "$1" -- awk '/pibl-comp/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i}
                             END {print n + 0}' /proc/interrupts
}
# listening NODE PORT: a TCP socket listens on PORT in guest NODE (/proc/net/tcp{,6}, 0A).
listening() {
  local hex; hex=$(printf '%04X' "$2")
  "$PIBVM" exec "$1" -- awk -v p=":$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p {f=1}
                                        END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# pingpong LOG ARGS...: ibv_rc_pingpong ARGS between the guests (server node 0, client node 1),
# both on pibl_0; both outputs into LOG; 0 when both ended well after 100 iterations.
pingpong() {
  local log=$1 spid src crc i; shift
  "$PIBVM" exec 0 --timeout 300 -- ibv_rc_pingpong -d pibl_0 -n 100 "$@" >"$log.server" 2>&1 &
  spid=$!
  for ((i = 0; i < 300; i++)); do listening 0 18515 && break; sleep 0.2; done
  "$PIBVM" exec 1 --timeout 300 -- ibv_rc_pingpong -d pibl_0 -n 100 "$@" node0 >"$log" 2>&1; crc=$?
  wait "$spid"; src=$?
  cat "$log.server" >>"$log"; rm -f "$log.server"
  [ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && [ "$(grep -c '100 iters in' "$log")" -eq 2 ]
}
# node1_err_count: node 1's device's ERR_COUNT.
node1_err_count() { python3 "$DEVREGS" "$PIBVM_DIR/node1.qmp" regs | awk '$1 == "ERR_COUNT" {print $2 + 0}'; }
# sma_trace on|off: the firmware's SMA trace points in both devices' logs (node*.qemu.log).
sma_trace() { local i; for i in 0 1; do python3 "$DEVREGS" "$PIBVM_DIR/node$i.qmp" trace "$1" 'pib_sma*' >/dev/null; done; }
# node1_errs_check BEFORE TEACH_BEFORE: node 1's device saw no guest error and no teach report.
node1_errs_check() {
  local now teach
  now=$(node1_err_count)
  teach=$(qom1_get teach-reports)
  check "node 1: no guest error, nothing from teach mode (ERR_COUNT $1 -> $now, teach-reports $2 -> $teach)" \
    "the driver in node 1 did what node 0's did: its device's log is $PIBVM_DIR/node1.qemu.log" \
    test "x$now $teach" = "x$1 $2"
}

stage_08() {
  local g0 g1 lid0 lid1 err1 teach1 log=$BUILD/stage-08 n0 i rc
  dmesg_mark
  "$PIBVM" cp "$KO" 1:/root/pibl.ko >/dev/null 2>&1
  err1=$(node1_err_count)
  teach1=$(qom1_get teach-reports)
  check_load "load (node 0)" || return
  check "load (node 1): insmod pibl.ko succeeds" \
    "the same module in node 1: its QP0/QP1 answer node 0's MADs" \
    "$PIBVM" exec 1 --timeout "$LOAD_TIMEOUT" -- insmod /root/pibl.ko || return
  check "the kernel's MAD layer is on the port (/dev/infiniband/umad0 in node 0)" \
    "ib_core hands the device to its kernel clients only when every kernel verb is there (get_dma_mr, poll_cq, req_notify_cq, post_send, post_recv), and the MAD layer wants RDMA_CORE_PORT_IBA_IB and max_mad_size" \
    bash -c "'$PIBVM' exec 0 -- modprobe ib_umad && '$PIBVM' exec 1 -- modprobe ib_umad &&
             '$PIBVM' exec 0 -- test -e /dev/infiniband/umad0" || return
  g0=$(printf '0x%016x' "$(qom_get node-guid)") g1=$(printf '0x%016x' "$(qom1_get node-guid)")
  lid0=$(qom_get lid) lid1=$(qom1_get lid)
  expect_eq "smpquery -D nodeinfo 0 on node 0: answered by its own firmware (process_mad)" \
    "a local directed-route SMP never leaves: ib_core calls process_mad, which must pass it to MAD_IFC and answer REPLY" \
    "$(smp_guid 0 -D nodeinfo 0)" "$g0"
  expect_eq "smpquery -D nodeinfo 0,1 on node 0: answered by node 1 over QP0" \
    "the SMP goes out on node 0's QP0 (post_send with the AH), node 1 receives it on QP0 (post_recv, poll_cq, the CEQ), process_mad answers; the reply comes back the same way" \
    "$(smp_guid 0 -D nodeinfo 0,1)" "$g1"
  check "perfquery on node 0 to node 1 (LID $lid1): the PMA answers over QP1" \
    "a GMP: QP1, the AH from the LID, and query_ah (the MAD layer matches the response to its request with it)" \
    bash -c "'$PIBVM' exec 0 -- perfquery $lid1 1 | grep -q PortXmitData"
  sma_trace on     # the sweep's MADs, for a failure's hint
  check "opensm on node 0 sweeps the subnet" "see $PIBVM_DIR/node0.opensm.log" \
    "$PIBVM" sm start 0
  check "sminfo on node 1 names node 0's port (LID $lid0) the master SM" \
    "opensm's SMInfo and the sweep's SMPs cross both drivers' QP0" \
    bash -c "'$PIBVM' exec 1 -- sminfo | grep -q 'sm lid $lid0 .*SMINFO_MASTER'"
  check "saquery on node 1 lists both nodes (the SA answers over QP1)" \
    "a GMP to the SA's LID and QP1, its answer an RMPP-less response" \
    bash -c "[ \$('$PIBVM' exec 1 -- saquery -t 20 NodeRecord | grep -c 'NodeRecord dump') -eq 2 ]"
  sma_trace off
  check "ibv_rc_pingpong between the guests, both on pibl" \
    "stage 07's user QPs, with the LIDs the SM gave: see $log.pingpong" \
    pingpong "$log.pingpong"

  # Trap: one interrupt, several events.  Every interrupt of node 0's device 20 ms late while
  # the MAD layer's CQ (perfquery in a loop) and a process's (-e: it sleeps on events) are armed.
  irq_late 20000
  "$PIBVM" exec 0 --timeout 200 -- sh -c \
    "i=0; while [ \$i -lt 40 ]; do perfquery $lid1 1 >/dev/null || exit 1; i=\$((i+1)); done" \
    >"$log.perfquery" 2>&1 &
  n0=$!
  check "trap: ibv_rc_pingpong -e while perfquery runs, interrupts 20 ms late" \
    "one interrupt came for several CEQEs: walk the CEQ to its end on every interrupt (see \"The traps\"); $log.pingpong-e" \
    pingpong "$log.pingpong-e" -e
  wait "$n0"; rc=$?
  check "trap: 40 perfquery meanwhile, each answered" \
    "the MAD layer's CQ had an event that was never handled: walk the CEQ to its end on every interrupt; $log.perfquery" \
    test "$rc" -eq 0
  irq_late 0
  # opensm's sweeps would bring MADs, whose interrupts could take the one delay below.
  "$PIBVM" sm stop 0 >/dev/null 2>&1

  # Trap: a late event for a CQ that is gone.  The next interrupt 2 s late (virtual time); the
  # process arms its CQ, completes a SEND on it and destroys the CQ before the interrupt.
  "$PIBVM" cp "$TOP/labs/qps.py" 0:/root/qps.py >/dev/null 2>&1
  if check "trap: a process holds an RC QP connected to itself (labs/late_event.py)" \
       "stage 07's user QPs; its output: $log.late" holder_run late_event.py; then
    n0=$(comp_irqs 0)
    qom_set inject-irq-delay-count 1 >/dev/null && qom_set inject-irq-delay-us 2000000 >/dev/null
    holder_end "$log.late"; rc=$?
    check "trap: its CQ armed, a SEND completed, the CQ destroyed before its interrupt" \
      "$(fails "$log.late")" test "$rc" -eq 0
    for ((i = 0; i < 200; i++)); do [ "$(comp_irqs 0)" -gt "$n0" ] && break; sleep 0.1; done
    check "trap: the late interrupt came (pibl-comp $n0 -> $(comp_irqs 0)), for a CQ that is gone" \
      "the device sent it after the CQ was destroyed; if the count did not move, the handler or its vector is missing" \
      test "$(comp_irqs 0)" -gt "$n0"
    check "trap: and the driver still works (smpquery -D nodeinfo 0,1)" \
      "the handler must look the CQ up by its CQN and ignore one that is gone" \
      test "$(smp_guid 0 -D nodeinfo 0,1)" = "$g1"
  fi
  irq_late 0

  for i in 0 1; do "$PIBVM" exec "$i" -- dmesg >"$log.dmesg$i" 2>&1; done
  errs_check 0
  node1_errs_check "$err1" "$teach1"
  check "unload (node 1): rmmod pibl succeeds" "remove() with the MAD layer's QPs open" \
    "$PIBVM" exec 1 --timeout "$UNLOAD_TIMEOUT" -- rmmod pibl
  check_unload "unload (node 0)" && ready_cleared "unload (node 0)"
  no_splats
  check "node 1: no oops, warning or driver error in its kernel log" \
    "node 1's dmesg" bash -c "! '$PIBVM' exec 1 -- dmesg | grep -qE '$SPLATS'"
}

# grade NN DIR TAG: one stage for one driver; prints its verdict, returns 0 when all passed.
grade() {
  local nn=$1 dir=$2 tag=$3
  npass=0 nfail=0
  say "== stage $nn: ${dir#"$TOP"/}"
  if [ "$GUESTS_DIRTY" = 1 ]; then guests_up || return 2; fi
  [ -n "$BDF" ] || find_bdf
  TEACH0=$(qom_get teach-reports)
  if build "$dir" "$tag"; then
    "stage_$nn"
    cleanup_module
  fi
  # No fault outlives its stage (a skeleton may end before the fault it armed fired).
  qom_set inject-irq-delay-us 0 >/dev/null 2>&1
  qom_set inject-irq-delay-count 0 >/dev/null 2>&1
  qom_set inject-wr-error '""' >/dev/null 2>&1
  say "stage $nn: $npass passed, $nfail failed"
  [ "$nfail" -eq 0 ] && [ "$npass" -gt 0 ]
}

stage_dir() { ls -d "$TOP"/labs/"$1"-*/ 2>/dev/null | head -n1 | sed 's:/$::'; }

main() {
  mkdir -p "$BUILD"
  kernel_tree || { say "no guest kernel headers (make driver first)"; exit 2; }
  if [ "${1:-}" = --suite ]; then
    local nn sd ok=0 bad=0 failed=() t0=$SECONDS
    guests_up || exit 2
    for sd in "$TOP"/labs/[0-9][0-9]-*/; do
      nn=$(basename "$sd"); nn=${nn%%-*}
      if grade "$nn" "$TOP/labs/solutions/$nn" "solution-$nn"; then
        ok=$((ok + 1)); say "PASS stage $nn: the solution passes"
      else
        bad=$((bad + 1)); failed+=("solution-$nn"); say "FAIL stage $nn: the solution fails"
      fi
      if grade "$nn" "${sd%/}/skeleton" "skeleton-$nn" >"$BUILD/skeleton-$nn.log" 2>&1; then
        bad=$((bad + 1)); failed+=("skeleton-$nn"); cat "$BUILD/skeleton-$nn.log"
        say "FAIL stage $nn: the untouched skeleton passes its own grader"
      else
        ok=$((ok + 1))
        say "PASS stage $nn: the untouched skeleton fails ($(tail -n1 "$BUILD/skeleton-$nn.log"); log $BUILD/skeleton-$nn.log)"
      fi
    done
    guests_down
    [ ${#failed[@]} -eq 0 ] || say "failed: ${failed[*]}"
    say "labs suite: $((SECONDS - t0)) s"
    say "$ok passed, $bad failed"
    [ "$bad" -eq 0 ]; exit
  fi
  local nn=${1:-} dir=${2:-} sd rc
  case $nn in [0-9][0-9]) ;; *) say "usage: $0 NN [DRIVER_DIR] | --suite"; exit 2 ;; esac
  sd=$(stage_dir "$nn")
  [ -n "$sd" ] || { say "no stage $nn in labs/"; exit 2; }
  dir=${dir:-$sd/skeleton}
  dir=$(cd "$dir" && pwd) || exit 2
  guests_up || exit 2
  grade "$nn" "$dir" "stage-$nn"; rc=$?
  guests_down
  [ "$rc" -eq 0 ] && say "stage $nn: all checks passed" || say "stage $nn: not yet (see the hints above)"
  exit "$rc"
}

main "$@"
