#!/bin/bash
# Build QEMU 7.2 (x86_64-softmmu) with the pib device overlaid from qemu-hw/.
#
# The QEMU tree is Debian's source package, unpacked by mk/fetch.sh into the cache.  Our files
# are copied (only when changed, so ninja stays incremental) into hw/pib/ and tests/qtest/, and
# three one-line hooks are added: hw/meson.build, hw/Kconfig and tests/qtest/meson.build.
# Output: $OUT/qemu-system-x86_64 and $OUT/qtest/pib-test, copied out of the shared build tree,
# so that another checkout building into the same cache cannot change them under running tests.
# A lock serializes checkouts that build at the same time.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$TOP/build}
SRC=$("$TOP/mk/fetch.sh" qemu)
BLD=${PIB_CACHE:-$HOME/.cache/pib}/build/qemu-$(basename "$SRC")
say() { printf '[qemu] %s\n' "$*" >&2; }

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

mkdir -p "$(dirname "$BLD")"
exec 9>"$BLD.lock"
flock 9

# hw/pib/ holds exactly this checkout's files: remove what another checkout left there.
if [ -d "$SRC/hw/pib" ]; then
  for f in "$SRC"/hw/pib/*; do
    [ -f "$f" ] || continue
    [ -e "$TOP/qemu-hw/$(basename "$f")" ] || rm -f "$f"
  done
fi
for f in "$TOP"/qemu-hw/*; do
  case $(basename "$f") in build.sh|README.md) continue ;; esac
  copy_if_changed "$f" "$SRC/hw/pib/$(basename "$f")"
done
for f in "$TOP"/include/*.h; do copy_if_changed "$f" "$SRC/hw/pib/include/$(basename "$f")"; done
if [ -f "$SRC/hw/pib/meson.build" ]; then
  hook "$SRC/hw/meson.build" "subdir('pib')"
  hook "$SRC/hw/Kconfig" "source pib/Kconfig"
  # hw/pib/trace-events -> trace/trace-hw_pib.h (included by hw/pib/trace.h)
  hook_after "$SRC/meson.build" "    'hw/nvme'," "    'hw/pib',"
fi
if [ -f "$TOP/tests/qtest/pib-test.c" ]; then
  copy_if_changed "$TOP/tests/qtest/pib-test.c" "$SRC/tests/qtest/pib-test.c"
  # must precede the foreach that turns qtests_<arch> into executables
  hook_after "$SRC/tests/qtest/meson.build" "qtests_x86_64 = qtests_i386" "qtests_x86_64 += ['pib-test']"
fi

if [ ! -f "$BLD/build.ninja" ]; then
  say "configure (once) in $BLD"
  mkdir -p "$BLD"
  (cd "$BLD" && "$SRC/configure" --target-list=x86_64-softmmu --without-default-features \
      --disable-docs --disable-werror --disable-install-blobs >&2)
fi
targets=(qemu-system-x86_64)
[ -f "$SRC/tests/qtest/pib-test.c" ] && targets+=(tests/qtest/pib-test)
say "ninja ${targets[*]} (first build: ~1500 steps, a few minutes)"
# Show errors and warnings in full, progress every 100 steps.  ninja's own exit status decides
# (PIPESTATUS), not a dry run: qemu-version.h is always stale, so "-n" never says "no work".
set +e
ninja -C "$BLD" "${targets[@]}" |
  awk '/^\[[0-9]+\/[0-9]+\]/ {n++; if (n % 100 == 0) {print; fflush()}; next} {print; fflush()}' >&2
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { say "build failed (ninja exit $rc)"; exit 1; }
mkdir -p "$OUT/qtest"
# install_if_changed SRC DST: copy to a temporary name and rename, so a QEMU already running
# from DST keeps its (old) file.
install_if_changed() {
  [ -L "$2" ] && rm -f "$2"
  cmp -s "$1" "$2" 2>/dev/null || { cp "$1" "$2.tmp" && mv -f "$2.tmp" "$2"; }
}
install_if_changed "$BLD/qemu-system-x86_64" "$OUT/qemu-system-x86_64"
[ -f "$BLD/tests/qtest/pib-test" ] && install_if_changed "$BLD/tests/qtest/pib-test" "$OUT/qtest/pib-test"
say "ok: $OUT/qemu-system-x86_64"
