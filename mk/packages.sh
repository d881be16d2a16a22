#!/bin/bash
# Debian packages of pib, made with Debian's own tooling (debhelper, dh-dkms, lintian) from what
# the project's build has produced (packaging/README.md says what each holds):
#   pib-dkms               the driver's source; DKMS builds pib.ko against the VM's kernel
#   ibverbs-providers-pib  the rdma-core provider, for Debian's own libibverbs1
#   pib-qemu               QEMU with the pib devices, beside Debian's QEMU
#
#   mk/packages.sh         -> $STACK_OUT/packages/*.deb (build/packages/, build/trixie/packages/)
#
# The source package is packaging/debian/.  This script stages it with its inputs in
# $STACK_OUT/packages-build/pib-<version>/, runs dpkg-buildpackage -b there, then lintian, which
# must report no error.  The version is 0.<number of commits>+deb12 (or +deb13):
# it grows with every commit and needs no file to be kept up to date.  The suffix names the
# Debian release the packages are for; +deb13 sorts above +deb12, so that an upgrade from
# Debian 12 to 13 takes them.
#
# PIB_STACK=trixie builds them in the Debian 13 root (mk/root.sh), with Debian 13's debhelper
# and lintian: its QEMU links Debian 13's libraries, whose packages (the t64 names) only that
# root's dpkg knows, for dh_shlibdeps.  pib-dkms and the provider hold the same files for both.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
source "$TOP/mk/stack.sh"
say() { printf '[packages] %s\n' "$*" >&2; }

case $PIB_STACK in
  bookworm) SUFFIX=deb12 SUITE=bookworm QEMU_BIN=$STACK_OUT/qemu-system-x86_64 ;;
  # The binary itself; $STACK_OUT/qemu-system-x86_64 is the host's wrapper (mk/root.sh wrap).
  trixie) SUFFIX=deb13 SUITE=trixie QEMU_BIN=$STACK_OUT/root-bin/qemu-system-x86_64 ;;
esac
VERSION=0.$(git -C "$TOP" rev-list --count HEAD)+$SUFFIX
PROVIDER=$TOP/build/rdma-root        # one provider build serves both stacks (mk/stack.sh)
MULTIARCH=x86_64-linux-gnu
OUT=$STACK_OUT/packages
WORK=$STACK_OUT/packages-build
STAGE=$WORK/pib-$VERSION

for f in "$PROVIDER/usr/lib/$MULTIARCH/libibverbs/libpib-rdmav34.so" \
         "$PROVIDER/etc/libibverbs.d/pib.driver" "$QEMU_BIN"; do
  [ -f "$f" ] || { say "missing $f (make provider qemu)"; exit 1; }
done
# The packaging tools: the host's, or the root's (its package list has them).
[ "$STACK_ROOT" = 1 ] || bash "$TOP/mk/deps.sh" packaging

# contract_headers: the headers of include/ that the driver's sources include, directly or
# through one another (Kbuild's -I$(src)/../include); a header of the driver's own is not one.
contract_headers() {
  local -A seen=()
  local todo=("$TOP"/guest-driver/*.[ch]) f h
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]} todo=("${todo[@]:1}")
    for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
      [ -f "$TOP/guest-driver/$h" ] && continue
      [ -f "$TOP/include/$h" ] || { say "$f includes $h, found in neither guest-driver/ nor include/"; exit 1; }
      [ -n "${seen[$h]:-}" ] && continue
      seen[$h]=1 todo+=("$TOP/include/$h")
      echo "$h"
    done
  done
}

# --- 1. Stage: packaging/debian and the build's outputs -------------------------------------
say "stage pib $VERSION ($PIB_STACK) in $STAGE"
rm -rf "$WORK"
mkdir -p "$STAGE"/stage/{dkms/guest-driver,dkms/include,provider,qemu}
cp -r "$TOP/packaging/debian" "$STAGE/"
# Sources only: a *.mod.c is a build product of kbuild.
for f in "$TOP"/guest-driver/Kbuild "$TOP"/guest-driver/*.[ch]; do
  case $f in *.mod.c) continue ;; esac
  cp "$f" "$STAGE/stage/dkms/guest-driver/"
done
for h in $(contract_headers); do cp "$TOP/include/$h" "$STAGE/stage/dkms/include/"; done
cp "$PROVIDER/usr/lib/$MULTIARCH/libibverbs/libpib-rdmav34.so" "$PROVIDER/etc/libibverbs.d/pib.driver" \
   "$STAGE/stage/provider/"
cp "$QEMU_BIN" "$STAGE/stage/qemu/qemu-system-x86_64"

# The maintainer and the date are those of the commit, so that two runs on one commit make the
# same packages (dpkg-buildpackage takes SOURCE_DATE_EPOCH from the changelog).
maint=${DEBFULLNAME:+$DEBFULLNAME <${DEBEMAIL:-}>}
maint=${maint:-$(git -C "$TOP" log -1 --format='%an <%ae>')}
sed -i "s|@MAINTAINER@|$maint|" "$STAGE/debian/control"
cat > "$STAGE/debian/changelog" <<EOF
pib ($VERSION) $SUITE; urgency=medium

  * Built from commit $(git -C "$TOP" rev-parse --short HEAD) for Debian ${SUFFIX#deb}.

 -- $maint  $(git -C "$TOP" log -1 --format=%cD)
EOF

# --- 2. Build ---------------------------------------------------------------------------------
say "dpkg-buildpackage -b (log: $WORK/build.log)"
# -d: the Debian 13 root has debhelper but not build-essential, which dpkg-checkbuilddeps wants
# of every build; nothing is compiled here (debian/rules installs what the build made), and the
# Build-Depends that matter, debhelper and dh-dkms, are there.
if ! (cd "$STAGE" && stack_run nice dpkg-buildpackage -b -d -us -uc) > "$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/build.log" >&2; say "dpkg-buildpackage failed (log: $WORK/build.log)"; exit 1
fi

# --- 3. Check and publish ---------------------------------------------------------------------
changes=$WORK/pib_${VERSION}_amd64.changes
say "lintian (log: $WORK/lintian.log)"
rc=0
stack_run nice lintian --fail-on error --tag-display-limit 0 "$changes" > "$WORK/lintian.log" 2>&1 || rc=$?
cat "$WORK/lintian.log" >&2
[ "$rc" = 0 ] || { say "lintian reports errors"; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
cp "$WORK"/*.deb "$OUT/"
for d in "$OUT"/*.deb; do say "$(du -h "$d" | cut -f1)  ${d#$TOP/}"; done
say "ok: $OUT ($(grep -c '^W:' "$WORK/lintian.log" || true) lintian warning(s), no error)"
