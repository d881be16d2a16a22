#!/bin/bash
# Build rdma-core 56.1 with the pib provider and install it into build/rdma-root/.
#
#   guest-provider/build.sh
#
# The provider is built in-tree, as providers/pib next to providers/efa: this script copies
# guest-provider/ and the shared include/pib-abi.h, pib_hw.h, pib_wqe.h into the cached rdma-core
# source, hooks the directory into rdma-core's top CMakeLists.txt, configures once, builds
# with ninja and installs with DESTDIR.  Files are copied only when they differ and the
# install is redone only when the build changed, so a run with nothing to do takes seconds.
#
# Output: build/rdma-root/ (usr/lib/x86_64-linux-gnu/libibverbs/libpib-rdmav34.so,
# etc/libibverbs.d/pib.driver, libibverbs, librdmacm, the verbs/rdmacm examples, the diags,
# and pyverbs with rdma-core's own test suite: usr/lib/python3/dist-packages/pyverbs/ and
# usr/share/doc/rdma-core/tests/, which tests/e2e/60-rdma-core-suite.sh runs in a guest).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
SRC=$(bash "$ROOT/mk/fetch.sh" rdma-core)
DEST=$ROOT/build/rdma-root
PDIR=$SRC/providers/pib
MULTIARCH=x86_64-linux-gnu     # the guest is Debian amd64, whatever builds it

say() { printf '[rdma-core] %s\n' "$*"; }

# The source and build trees in the cache are shared by every checkout (worktrees, CI clones):
# hold a lock on them from the overlay to the install, so two builds never mix their files.
exec 9>"$SRC.lock"
flock 9

# --- 1. Overlay providers/pib ----------------------------------------------------------------
# cp gives a changed file a new mtime, so ninja rebuilds exactly what depends on it; an
# unchanged file keeps its old mtime and costs nothing.
mkdir -p "$PDIR"
shopt -s nullglob
inputs=("$ROOT"/guest-provider/*.c "$ROOT"/guest-provider/*.h "$ROOT/guest-provider/CMakeLists.txt"
        "$ROOT/include/pib-abi.h" "$ROOT/include/pib_hw.h" "$ROOT/include/pib_wqe.h")
declare -A wanted=()
for f in "${inputs[@]}"; do
  b=$(basename "$f")
  wanted[$b]=1
  if ! cmp -s "$f" "$PDIR/$b"; then
    cp "$f" "$PDIR/$b"
    say "update providers/pib/$b"
  fi
done
# A file deleted from the repo must not live on in the build.
for f in "$PDIR"/*; do
  b=$(basename "$f")
  if [ -z "${wanted[$b]:-}" ]; then
    rm -f "$f"
    say "remove stale providers/pib/$b"
  fi
done
shopt -u nullglob

# --- 2. Hook providers/pib into rdma-core ----------------------------------------------------
# Inside the HAVE_COHERENT_DMA block with the other hardware providers: the data path will
# share rings with the device.  Alphabetical, after ocrdma.
TOP=$SRC/CMakeLists.txt
HOOK='add_subdirectory(providers/pib)'
if ! grep -qxF "$HOOK" "$TOP"; then
  sed -i "\|^add_subdirectory(providers/ocrdma)\$|a $HOOK" "$TOP"
  grep -qxF "$HOOK" "$TOP" || { say "cannot find add_subdirectory(providers/ocrdma) in $TOP"; exit 1; }
  say "hooked providers/pib into $TOP"
fi

# --- 3. Configure (once; again only if these flags change) -----------------------------------
# Install paths and build type are Debian's (debian/rules), so the tree can be copied into a
# guest as is.  No global ENABLE_WERROR: at -O3 gcc 12 warns about upstream code (cxgb4);
# providers/pib turns on -Werror for itself instead.  pyverbs is built for Debian's own
# python3 and cython3 (mk/deps.sh), named by path: a python3 earlier in PATH (pyenv) is not the
# one the guest gets.
CMAKE_FLAGS=(
  -GNinja
  -DCMAKE_BUILD_TYPE=Release
  -DENABLE_STATIC=0
  -DNO_MAN_PAGES=1
  -DNO_PYVERBS=0
  -DPYTHON_EXECUTABLE=/usr/bin/python3
  -DCMAKE_INSTALL_PYTHON_ARCH_LIB=/usr/lib/python3/dist-packages
  -DCMAKE_INSTALL_PREFIX=/usr
  -DCMAKE_INSTALL_SYSCONFDIR=/etc
  -DCMAKE_INSTALL_LIBDIR=lib/$MULTIARCH
  -DCMAKE_INSTALL_LIBEXECDIR=/usr/lib
  -DCMAKE_INSTALL_RUNDIR=/run
  -DCMAKE_INSTALL_SHAREDSTATEDIR=/var/lib
  -DCMAKE_INSTALL_UDEV_RULESDIR=/lib/udev/rules.d
  -DCMAKE_INSTALL_SYSTEMD_SERVICEDIR=/lib/systemd/system
)
# The build tree is keyed by the source (its version, through the directory name, and the
# orig tarball's checksum) and by these flags: checkouts that configure differently (an older
# branch without pyverbs) each keep a tree of their own instead of reconfiguring one back and
# forth.
KEY=$( (cat "$SRC/.done"; echo "${CMAKE_FLAGS[*]}") | sha256sum | cut -c1-12)
BLD=$CACHE/build/$(basename "$SRC")-$KEY
mkdir -p "$BLD" "$ROOT/build"
# This checkout's tree, for guest-provider/test/run.sh (rdma-core's headers and libibverbs).
ln -sfn "$BLD" "$ROOT/build/rdma-core-build"
if [ ! -f "$BLD/build.ninja" ] || [ "$(cat "$BLD/.pib-cmake-flags" 2>/dev/null)" != "${CMAKE_FLAGS[*]}" ]; then
  say "configure $BLD (log: $BLD/cmake.log)"
  # A fresh cache, so a flag dropped from the list does not linger in CMakeCache.txt.
  rm -f "$BLD/.pib-cmake-flags" "$BLD/CMakeCache.txt"
  cmake -S "$SRC" -B "$BLD" "${CMAKE_FLAGS[@]}" >"$BLD/cmake.log" 2>&1 \
    || { tail -n 30 "$BLD/cmake.log"; say "cmake failed"; exit 1; }
  echo "${CMAKE_FLAGS[*]}" >"$BLD/.pib-cmake-flags"
fi

# --- 4. Build ---------------------------------------------------------------------------------
# Progress every 200 steps and at the end.  providers/pib builds with -Werror, so any warning
# of ours fails the build and is shown in full; warnings that do not fail the build are
# upstream's (gcc 12 at -O3 flags one in cxgb4) and are only counted.
say "ninja (log: $BLD/ninja.log.txt)"
set +e
ninja -C "$BLD" 2>&1 | tee "$BLD/ninja.log.txt" | awk '
  match($0, /^\[[0-9]+\/[0-9]+\]/) {
    split(substr($0, 2, RLENGTH - 2), n, "/")
    if (n[1] % 200 == 0 || n[1] == n[2]) print "  " substr($0, 1, RLENGTH)
  }'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  sed -n '/^FAILED:/,$p' "$BLD/ninja.log.txt" | head -n 80
  say "ninja failed"
  exit 1
fi
built=1
grep -qx 'ninja: no work to do.' "$BLD/ninja.log.txt" && { built=0; say "nothing to rebuild"; }
warnings=$(grep -c 'warning:' "$BLD/ninja.log.txt" || true)
[ "$warnings" = 0 ] || say "$warnings warning(s) in upstream rdma-core code (see $BLD/ninja.log.txt)"

# --- 5. Install --------------------------------------------------------------------------------
# Into a fresh directory then swapped in, so rdma-root is exactly this build, never a mix of
# old and new files.  The build tree is shared by every checkout on this machine (it lives in
# the cache), so each build gets an identity (.pib-build-id) and each rdma-root records the one
# it holds: another checkout's build of the same tree leaves ninja nothing to do, yet this
# checkout's rdma-root is stale until it is installed again.
if [ "$built" = 1 ] || [ ! -s "$BLD/.pib-build-id" ]; then
  echo "$(date +%s.%N) $$" >"$BLD/.pib-build-id"
fi
WANT=(
  usr/lib/$MULTIARCH/libibverbs/libpib-rdmav34.so
  etc/libibverbs.d/pib.driver
  usr/lib/$MULTIARCH/libibverbs.so.1
  usr/lib/$MULTIARCH/librdmacm.so.1
  usr/bin/ibv_devinfo
  usr/bin/ibv_rc_pingpong
  usr/bin/rping
  usr/sbin/ibstat
  usr/lib/python3/dist-packages/pyverbs/device.cpython-311-x86_64-linux-gnu.so
  usr/share/doc/rdma-core/tests/run_tests.py
)
complete() {
  local f
  cmp -s "$BLD/.pib-build-id" "$DEST/.pib-build-id" || return 1
  for f in "${WANT[@]}"; do [ -e "$DEST/$f" ] || return 1; done
}
if ! complete; then
  say "install into $DEST"
  rm -rf "$DEST.tmp"
  DESTDIR="$DEST.tmp" ninja -C "$BLD" install >"$BLD/install.log" 2>&1 \
    || { tail -n 30 "$BLD/install.log"; say "install failed"; exit 1; }
  cp "$BLD/.pib-build-id" "$DEST.tmp/.pib-build-id"
  rm -rf "$DEST"
  mv "$DEST.tmp" "$DEST"
else
  say "install up to date"
fi

# --- 6. Verify ---------------------------------------------------------------------------------
missing=0
for f in "${WANT[@]}"; do
  [ -e "$DEST/$f" ] || { say "MISSING $f"; missing=1; }
done
[ "$missing" = 0 ] || exit 1
grep -qx 'driver pib' "$DEST/etc/libibverbs.d/pib.driver" \
  || { say "pib.driver does not name the pib provider"; exit 1; }
say "ok: $DEST ($(du -sh "$DEST" | cut -f1))"
