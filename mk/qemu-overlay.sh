# Source this: the pib overlay on Debian's QEMU tree (7.2 or 10.0, mk/stack.sh), shared by every
# build of QEMU with our device (qemu-hw/build.sh for the emulator and the qtests,
# tests/fuzz/build-qemu-fuzz.sh for the
# generic-fuzz binary).
#
#   qemu_overlay TOP SRC
#
# takes a lock on the source tree (held on fd 9 until the caller exits, so the build that
# follows sees one checkout's sources), makes SRC/hw/pib/ the device's tree (pib_stage) and
# SRC/tests/qtest/pib-* exactly TOP's qtests (copied only when changed, so ninja stays
# incremental), adds the one-line hooks: hw/meson.build, hw/Kconfig, the
# trace_events_subdirs list, and the qtests (see qtest_hooks), and applies our fixes to QEMU
# itself (qemu_patches).  The caller defines say().

# The configure options of every QEMU build with the device (the emulator and the qtests, the
# link fuzzer's view of the configured tree, make mutate's private tree): x86_64 system
# emulation, no default features, and slirp, for the full Debian guests' ssh port (tools/pibvm
# --image debian: a restricted user-mode NIC whose one forwarded 127.0.0.1 port reaches the
# guest's sshd; the guest reaches nothing through it).
PIB_QEMU_CONFIGURE=(--target-list=x86_64-softmmu --without-default-features --enable-slirp
                    --disable-docs --disable-werror --disable-install-blobs)
# pib_qemu_build_dir SRC: the cached build directory of QEMU tree SRC with those options;
# other options get another directory, so a change of options is a fresh configure.
pib_qemu_build_dir() {
  local key
  key=$(printf '%s\n' "${PIB_QEMU_CONFIGURE[@]}" | sha256sum | cut -c1-8)
  echo "${PIB_CACHE:-$HOME/.cache/pib}/build/qemu-$(basename "$1")-$key"
}

# copy_if_changed SRC DST: keep timestamps stable when nothing changed.
copy_if_changed() { cmp -s "$1" "$2" 2>/dev/null || { mkdir -p "$(dirname "$2")"; cp "$1" "$2"; }; }
# hook FILE LINE: append LINE to FILE once.
hook() { grep -qxF "$2" "$1" || echo "$2" >> "$1"; }
# hook_after FILE ANCHOR LINE: insert LINE after the line equal to ANCHOR, once.  For lists
# that QEMU consumes before the end of the file (trace_events_subdirs).
hook_after() {
  grep -qxF "$3" "$1" && return 0
  grep -qxF "$2" "$1" || { say "hook anchor '$2' not found in $1"; exit 1; }
  awk -v a="$2" -v l="$3" '{ print } $0 == a { print l }' "$1" > "$1.pib-tmp" && mv "$1.pib-tmp" "$1"
}

# pib_stage TOP DEST: make DEST the device's tree as QEMU builds it (hw/pib/): TOP's qemu-hw/
# (its parts fabric/, hca/, switch/ and the files they share; not build.sh and README.md),
# and the contract, TOP's include/*.h, in DEST/include/, where the sources' "../include/"
# finds it.  Exactly those files: what another checkout or an older layout left is removed.
# Files are copied only when changed, so that builds stay incremental.
pib_stage() {
  local top=$1 dest=$2 f rel
  if [ -d "$dest" ]; then
    while IFS= read -r f; do
      rel=${f#"$dest"/}
      case $rel in
        include/*) [ -e "$top/$rel" ] ;;
        *) [ -e "$top/qemu-hw/$rel" ] ;;
      esac || rm -f "$f"
    done < <(find "$dest" -type f)
    find "$dest" -mindepth 1 -type d -empty -delete
  fi
  while IFS= read -r f; do
    rel=${f#"$top"/qemu-hw/}
    case $rel in build.sh|README.md) continue ;; esac
    copy_if_changed "$f" "$dest/$rel"
  done < <(find "$top/qemu-hw" -type f)
  for f in "$top"/include/*.h; do copy_if_changed "$f" "$dest/include/$(basename "$f")"; done
}

# qemu_patches TOP SRC: our fixes to Debian's QEMU tree SRC, TOP/mk/qemu-patches/MAJOR.MINOR/
# *.patch (each says what it fixes and why), applied once each: a patch that reverses cleanly
# is in already.  One that neither applies nor reverses stops the build.
qemu_patches() {
  local v p
  v=$(sed -n '1s/^\([0-9]*\.[0-9]*\).*/\1/p' "$2/VERSION")
  for p in "$1/mk/qemu-patches/$v"/*.patch; do
    [ -f "$p" ] || continue
    patch -d "$2" -p1 -R -f -s --dry-run < "$p" > /dev/null 2>&1 && continue
    say "QEMU $v: applying $(basename "$p")"
    patch -d "$2" -p1 -N -f -s < "$p" >&2 || { say "$p does not apply to $2"; exit 1; }
  done
}

qemu_overlay() {
  local top=$1 src=$2 f
  exec 9>"$src.lock"
  flock 9
  qemu_patches "$top" "$src"
  pib_stage "$top" "$src/hw/pib"
  hook "$src/hw/meson.build" "subdir('pib')"
  hook "$src/hw/Kconfig" "source pib/Kconfig"
  # hw/pib/trace-events -> trace/trace-hw_pib.h (included by hw/pib/trace.h)
  hook_after "$src/meson.build" "    'hw/nvme'," "    'hw/pib',"
  # tests/qtest/pib-* holds exactly this checkout's qtest files.
  for f in "$src"/tests/qtest/pib-*; do
    [ -f "$f" ] || continue
    [ -e "$top/tests/qtest/$(basename "$f")" ] || rm -f "$f"
  done
  for f in "$top"/tests/qtest/pib-*; do copy_if_changed "$f" "$src/tests/qtest/$(basename "$f")"; done
  qtest_hooks "$top" "$src/tests/qtest/meson.build"
}

# pib_qtests TOP: the qtest executables, one per tests/qtest/pib-*.c but the fixture
# pib-qtest.c that they all link.  Those named *-test are `make qtest`'s; pib-bench is not.
pib_qtests() {
  local f
  for f in "$1"/tests/qtest/pib-*.c; do
    f=$(basename "$f" .c)
    [ "$f" = pib-qtest ] || echo "$f"
  done
}

# qtest_hooks TOP MESON_BUILD: two lines in QEMU's tests/qtest/meson.build, rewritten to this
# checkout's list of qtests (another checkout's are dropped): the names, added to
# qtests_x86_64, and the extra source each one links (the `qtests` dictionary, as
# migration-test and qos-test have theirs), both before the loop that makes the executables.
# The file is replaced only when it changes, since any change makes meson reconfigure.
qtest_hooks() {
  local mb=$2 names="" extra="" t
  for t in $(pib_qtests "$1"); do
    names+="${names:+, }'$t'"
    extra+="${extra:+, }'$t': files('pib-qtest.c')"
  done
  grep -qxF "qtests_x86_64 = qtests_i386" "$mb" && grep -qxF "qtest_executables = {}" "$mb" ||
    { say "hook anchors not found in $mb"; exit 1; }
  awk -v names="qtests_x86_64 += [$names]" -v extra="qtests += {$extra}" '
    /^qtests_x86_64 \+= \[.pib-/ || /^qtests \+= \{.pib-/ { next }
    $0 == "qtest_executables = {}" { print extra }
    { print }
    $0 == "qtests_x86_64 = qtests_i386" { print names }
  ' "$mb" > "$mb.pib-tmp"
  if cmp -s "$mb.pib-tmp" "$mb"; then rm -f "$mb.pib-tmp"; else mv "$mb.pib-tmp" "$mb"; fi
}
