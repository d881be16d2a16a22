# Source this: the pib overlay on Debian's QEMU tree (7.2 or 10.0, mk/stack.sh), shared by every build of QEMU with our
# device (qemu-hw/build.sh for the emulator and qtest, tests/fuzz/build-qemu-fuzz.sh for the
# generic-fuzz binary).
#
#   qemu_overlay TOP SRC
#
# takes a lock on the source tree (held on fd 9 until the caller exits, so the build that
# follows sees one checkout's sources), makes SRC/hw/pib/ hold exactly TOP's qemu-hw/ files
# and include/ headers (copied only when changed, so ninja stays incremental), copies the qtest,
# and adds the one-line hooks: hw/meson.build, hw/Kconfig, the trace_events_subdirs list and
# the x86_64 qtest list.  The caller defines say().

# copy_if_changed SRC DST: keep timestamps stable when nothing changed.
copy_if_changed() { cmp -s "$1" "$2" 2>/dev/null || { mkdir -p "$(dirname "$2")"; cp "$1" "$2"; }; }
# hook FILE LINE: append LINE to FILE once.
hook() { grep -qxF "$2" "$1" || echo "$2" >> "$1"; }
# hook_after FILE ANCHOR LINE: insert LINE after the line equal to ANCHOR, once.  For lists
# that QEMU consumes before the end of the file (trace_events_subdirs, qtests_x86_64).
hook_after() {
  grep -qxF "$3" "$1" && return 0
  grep -qxF "$2" "$1" || { say "hook anchor '$2' not found in $1"; exit 1; }
  awk -v a="$2" -v l="$3" '{ print } $0 == a { print l }' "$1" > "$1.pib-tmp" && mv "$1.pib-tmp" "$1"
}

qemu_overlay() {
  local top=$1 src=$2 f
  exec 9>"$src.lock"
  flock 9
  # hw/pib/ holds exactly this checkout's files: remove what another checkout left there.
  if [ -d "$src/hw/pib" ]; then
    for f in "$src"/hw/pib/*; do
      [ -f "$f" ] || continue
      [ -e "$top/qemu-hw/$(basename "$f")" ] || rm -f "$f"
    done
  fi
  for f in "$top"/qemu-hw/*; do
    case $(basename "$f") in build.sh|README.md) continue ;; esac
    copy_if_changed "$f" "$src/hw/pib/$(basename "$f")"
  done
  for f in "$top"/include/*.h; do copy_if_changed "$f" "$src/hw/pib/include/$(basename "$f")"; done
  hook "$src/hw/meson.build" "subdir('pib')"
  hook "$src/hw/Kconfig" "source pib/Kconfig"
  # hw/pib/trace-events -> trace/trace-hw_pib.h (included by hw/pib/trace.h)
  hook_after "$src/meson.build" "    'hw/nvme'," "    'hw/pib',"
  copy_if_changed "$top/tests/qtest/pib-test.c" "$src/tests/qtest/pib-test.c"
  for f in "$top"/tests/qtest/*.h; do copy_if_changed "$f" "$src/tests/qtest/$(basename "$f")"; done
  # must precede the foreach that turns qtests_<arch> into executables
  hook_after "$src/tests/qtest/meson.build" "qtests_x86_64 = qtests_i386" "qtests_x86_64 += ['pib-test']"
}
