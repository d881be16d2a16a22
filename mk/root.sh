#!/bin/bash
# The Debian 13 build root of the trixie stack (mk/stack.sh): a Debian 13 system in a directory
# of the cache, made once with mmdebstrap from Debian's archive.  The trixie stack builds in it
# what the Debian 12 host cannot:
#   - pib.ko and pib_ktest.ko for Linux 6.12, whose headers were configured for gcc 14
#     (-fmin-function-alignment, unknown to Debian 12's gcc 12);
#   - QEMU 10.0, whose build wants meson >= 1.5 (Debian 12 has 1.0.1), with Debian 13's gcc,
#     glib and meson, as Debian 13 builds it.
# The host stays Debian 12; it only needs mmdebstrap (mk/deps.sh).
#
#   mk/root.sh path              create the root if it is missing; print its directory
#   mk/root.sh exists            exit 0 if the root has been made (creates nothing)
#   mk/root.sh run CMD...        run CMD inside it, in the current directory
#   mk/root.sh wrap BIN WRAPPER  write WRAPPER, a script that runs BIN (built in the root) on
#                                the host with the root's loader and libraries
#
# The root is keyed by suite and package list ($PIB_CACHE/root/trixie-<hash>): another list
# makes another root.  Its apt lists are kept, and they pick the Debian 13 kernel that the
# trixie stack boots (mk/fetch.sh kernel), so one root always yields the same kernel.
# First creation on the project's machine: 92 MB downloaded, 55-75 s.
#
# `run` gives CMD the host's /dev, its own /proc and /tmp, the clone and the cache at their host
# paths (bind mounts in a private mount namespace, gone when CMD exits), and a clean environment.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
SUITE=trixie
# Kernel modules: gcc (14), make, perl (W=1 runs kernel-doc), pahole (BTF), and the libraries of
# linux-kbuild's host programs.
# QEMU 10.0: the build dependencies of a --without-default-features x86_64-softmmu build, with
# slirp (mk/qemu-overlay.sh, PIB_QEMU_CONFIGURE).
# make packages: Debian 13's debhelper, dh-dkms and lintian (mk/packages.sh), and libibverbs1,
# which dh_shlibdeps reads for the provider's dependency.
# apt: the kernel is downloaded from inside the root (mk/fetch.sh kernel).
PKGS=(apt gcc make perl pahole libc6-dev libelf1t64 libssl3t64
      pkg-config python3 python3-venv meson ninja-build python3-pycotap
      libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev flex bison libslirp-dev
      debhelper dh-dkms lintian libibverbs1)
KEY=$(printf '%s\n' "$SUITE" "${PKGS[@]}" | sha256sum | cut -c1-12)
ROOT=$CACHE/root/$SUITE-$KEY

say() { printf '[root] %s\n' "$*" >&2; }

make_root() {
  [ -f "$ROOT/.done" ] && return 0
  mkdir -p "$CACHE/root"
  exec 8>"$ROOT.lock"
  flock 8
  [ -f "$ROOT/.done" ] && return 0
  command -v mmdebstrap >/dev/null || { say "mmdebstrap is missing (mk/deps.sh installs it)"; exit 1; }
  local uri t0 dl
  uri=$(bash "$TOP/mk/fetch.sh" archive-uri)
  say "create the Debian 13 build root $ROOT (once: ~92 MB from $uri, about a minute)"
  t0=$(date +%s)
  rm -rf "$ROOT" "$ROOT.tmp"
  # Documentation is left out; the package lists and the downloaded .debs are kept until the
  # size is taken, then the .debs go.
  if ! nice mmdebstrap --mode=root --variant=essential --components=main \
        --include="$(IFS=,; echo "${PKGS[*]}")" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --skip=cleanup/apt/lists --skip=cleanup/apt/cache \
        "$SUITE" "$ROOT.tmp" "deb $uri $SUITE main" >"$CACHE/root/$SUITE-$KEY.log" 2>&1; then
    tail -n 30 "$CACHE/root/$SUITE-$KEY.log" >&2
    say "mmdebstrap failed (log: $CACHE/root/$SUITE-$KEY.log)"
    exit 1
  fi
  dl=$(du -sm "$ROOT.tmp/var/cache/apt/archives" | cut -f1)
  find "$ROOT.tmp/var/cache/apt/archives" -name '*.deb' -delete
  chroot "$ROOT.tmp" dpkg-query -W -f='${Package} ${Version}\n' > "$ROOT.tmp/.packages"
  mv "$ROOT.tmp" "$ROOT"
  printf 'suite %s\ndownloaded_mb %s\nseconds %s\n' "$SUITE" "$dl" "$(( $(date +%s) - t0 ))" > "$ROOT/.done"
  say "root ready: ${dl} MB downloaded, $(( $(date +%s) - t0 )) s ($(du -sh "$ROOT" | cut -f1) on disk)"
}

# run_in_root CMD...: CMD inside the root, in the current directory.
run_in_root() {
  local mounts=() d
  # The clone and the cache, parents first, so that one inside the other stays visible.
  while IFS= read -r d; do mounts+=("$d"); done < <(realpath "$TOP" "$CACHE" | awk '{print length, $0}' | sort -n | cut -d' ' -f2-)
  unshare --mount --propagation private -- /bin/bash -euc '
    R=$1 dir=$2 n=$3; shift 3
    mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
    for ((; n > 0; n--)); do mkdir -p "$R$1"; mount --bind "$1" "$R$1"; shift; done
    exec chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$dir" "$@"
  ' bash "$ROOT" "$PWD" "${#mounts[@]}" "${mounts[@]}" "$@"
}

# wrap BIN WRAPPER: the root's glibc and libraries are newer than the host's, so a program
# built in the root runs on the host through the root's dynamic loader.  The host's view of
# the file system stays whole (sockets, the clone, /usr/share/qemu), unlike in a chroot.
wrap() {
  local bin=$1 out=$2
  cat > "$out.tmp" <<EOF
#!/bin/sh
# Generated by mk/root.sh: $(basename "$bin") was built in the Debian 13 root $ROOT;
# run it with that root's loader and libraries.
exec "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \\
  --library-path "$ROOT/usr/lib/x86_64-linux-gnu" "$bin" "\$@"
EOF
  chmod 755 "$out.tmp"
  cmp -s "$out.tmp" "$out" 2>/dev/null && rm -f "$out.tmp" || mv -f "$out.tmp" "$out"
}

case ${1:-} in
  path) make_root; echo "$ROOT" ;;
  exists) [ -f "$ROOT/.done" ] ;;
  run) shift; make_root; run_in_root "$@" ;;
  wrap) shift; make_root; wrap "$@" ;;
  *) echo "usage: $0 path|exists|run CMD...|wrap BIN WRAPPER" >&2; exit 2 ;;
esac
