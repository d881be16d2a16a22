#!/bin/bash
# Build the guest image of the stack (mk/stack.sh): <out>/vmlinuz and <out>/initramfs.cpio.gz,
# <out> being build/ (bookworm: Linux 6.1) or build/trixie/ (trixie: Linux 6.12).
#
# The guest is an initramfs and nothing else (no disk).  It holds:
#   - the Debian kernel's modules that pib needs (virtio, the RDMA core, rxe) plus <out>/pib.ko,
#     with a fresh modules.dep so that busybox modprobe resolves dependencies;
#   - busybox (static) for the small tools, but dash as /bin/sh and bash for the console: busybox
#     sh runs its own applets ahead of PATH, so `sh -c "ip ..."` would get busybox's ip;
#   - rdma-core 56.1 with our provider, from build/rdma-root (a DESTDIR install);
#   - a few Debian binaries from this host (qemu-ga, perftest's ib_* tools, libfabric's
#     fi_pingpong and fi_info, ip, rdma), each with the closure of its shared libraries;
#     libraries that rdma-root provides are taken from there, never from the host (the host
#     has rdma-core 44.0, the guest must run 56.1).
#     Both stacks take them from the Debian 12 host: the kernel's user ABI is stable, and the
#     trixie stack is about QEMU 10 and Linux 6.12, not about a newer userland;
#   - Debian 12's opensm and its libraries, unpacked from their .debs (mk/fetch.sh opensm, not
#     installed on the host), running on rdma-root's libibumad;
#   - the same way, Debian 12's nvme-cli (mk/fetch.sh nvme) and the NFS userland: rpc.nfsd,
#     rpc.mountd, exportfs, rpcbind, mount.nfs (mk/fetch.sh nfs), for the kernel's ULPs;
#     fio, built from Debian 12's source without Ceph and Gluster (images/fio.sh)
#     (docs/how-to/ulps.md);
#   - the guest-side test programs, build/guest-tests/* (tests/guest/build.sh), in /usr/bin;
#   - Debian's python3 (the interpreter and a trimmed standard library) with pyverbs and
#     rdma-core's own test suite from rdma-root (/usr/share/doc/rdma-core/tests), for
#     tests/e2e/60-rdma-core-suite.sh;
#   - images/rootfs/ (a minimal /etc) and images/init, the guest's PID 1.
#
# The layout is merged-/usr, like the Debian host: /bin, /sbin, /lib and /lib64 are symlinks
# into /usr, so every path a Debian binary expects exists.
#
# Incremental: a stamp records the inputs (sizes and mtimes, plus the contents of images/); when
# nothing changed the build is skipped.  PIB_FORCE=1 rebuilds anyway.
#
# Environment: PIB_STACK, PIB_CACHE (see mk/fetch.sh), RDMA_ROOT (default build/rdma-root, the
# same for both stacks).
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
source "$TOP/mk/stack.sh"
IMG=$TOP/images
OUT=$STACK_OUT
RDMA_ROOT=${RDMA_ROOT:-$TOP/build/rdma-root}
STAGE=$OUT/initramfs-root
STAMP=$OUT/initramfs.stamp
MULTIARCH=x86_64-linux-gnu

# Modules /init loads, plus what tests load by hand (ib_ipoib, rdma_rxe); modules.dep adds the
# dependencies.  rdma_rxe also needs the kernel's "crc32" hash (crc32_generic), which it asks the
# crypto API for at run time, so modules.dep does not name it.
# The kernel's RDMA storage and file protocols (docs/how-to/ulps.md): NVMe over Fabrics (host and
# target, a null_blk or brd namespace; NVMe/TCP too, which tools/bench compares), NFS over RDMA
# (client and server), SRP (initiator and LIO target with its block backstore on brd, sd_mod
# for the disk it brings); virtio_blk for pibvm's --disk, the storage an NVMe or NFS target
# keeps across its own crash, and ext4 for the NFS server's file system on it (with the
# "crc32c" hash it asks the crypto API for, crc32c_generic, as rdma_rxe's crc32).  vgem, a
# virtual GEM driver, exports dma-bufs for ibv_reg_dmabuf_mr (pib-misuse-test dmabuf; Debian
# 12's kernel has no udmabuf).
MODULES=(virtio_pci virtio_net virtio_console ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm
         rdma_ucm ib_ipoib rdma_rxe crc32_generic
         nvme_rdma nvmet_rdma nvme_tcp nvmet_tcp null_blk brd
         rpcrdma nfsd nfsv4 nfsv3
         ib_srp ib_srpt target_core_iblock sd_mod virtio_blk ext4 crc32c_generic vgem)

# Debian binaries taken from the host (perftest's tools are listed by dpkg below); ethtool sets
# IPoIB's interrupt coalescing (the CQ's event moderation).  libfabric's (libfabric-bin; Debian
# has no fabtests) link libfabric.so.1, whose verbs provider runs on rdma-root's libibverbs and
# librdmacm like everything else here.
HOST_BINS=(/usr/sbin/qemu-ga /usr/sbin/ip /usr/bin/rdma /usr/bin/dash /usr/bin/bash /usr/bin/ldd
           /usr/bin/getent /usr/bin/qperf /usr/bin/iperf3 /usr/sbin/ethtool
           /usr/bin/fi_pingpong /usr/bin/fi_info)

# Python: the host's interpreter, for which pyverbs was built (guest-provider/build.sh), and its
# standard library without what a test run never imports: the static libpython and build files
# (config-*), the interpreter's own tests, the IDE, Tk, 2to3, pip's bootstrap, and the extension
# modules that would bring in large libraries (Tcl/Tk and X11, SQLite, Berkeley DB, curses).
PY=python3.11
PY_STDLIB=/usr/lib/$PY
PY_EXCLUDE=(config-3.11-x86_64-linux-gnu test idlelib tkinter turtledemo lib2to3 ensurepip
            pydoc_data site-packages dist-packages sqlite3 curses dbm
            'lib-dynload/_tkinter.*' 'lib-dynload/_sqlite3.*' 'lib-dynload/_dbm.*'
            'lib-dynload/_gdbm.*' 'lib-dynload/_curses*' 'lib-dynload/readline.*'
            'lib-dynload/_test*' 'lib-dynload/xx*' 'lib-dynload/_xx*' 'lib-dynload/_ctypes_test.*'
            'lib-dynload/nis.*' 'lib-dynload/ossaudiodev.*' 'lib-dynload/audioop.*')
PYVERBS=usr/lib/python3/dist-packages/pyverbs
RDMA_TESTS=usr/share/doc/rdma-core/tests

# Libraries that must come from rdma-root: the host's copies are rdma-core 44.0.
RDMA_LIBS_RE='^lib(ibverbs|rdmacm|ibumad|ibmad|ibnetdisc|mlx[45]|efa|hns|mana)\.so'

say() { printf '[images] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# Inputs

KDIR=$(bash "$TOP/mk/fetch.sh" kernel)
ABI=$(cat "$KDIR/abi")-amd64
KROOT=$KDIR/root
VMLINUZ=$KROOT/boot/vmlinuz-$ABI
MODDIR=$KROOT/lib/modules/$ABI
PIB_KO=$OUT/pib.ko
GUEST_TESTS=$TOP/build/guest-tests
[ -f "$VMLINUZ" ] || die "no kernel at $VMLINUZ"
[ -d "$RDMA_ROOT" ] || die "no rdma-core install at $RDMA_ROOT (build the provider first)"
[ -x /bin/busybox ] || die "busybox-static is not installed (mk/deps.sh)"
mapfile -t PERFTEST_BINS < <(dpkg -L perftest | grep -E '^/usr/bin/ib_[a-z_]+$')
OPENSM=$(bash "$TOP/mk/fetch.sh" opensm)/root
NVME=$(bash "$TOP/mk/fetch.sh" nvme)/root
NFS=$(bash "$TOP/mk/fetch.sh" nfs)/root
FIO=$(bash "$TOP/images/fio.sh")
[ ${#PERFTEST_BINS[@]} -gt 0 ] || die "perftest is not installed (mk/deps.sh)"

# The stamp: anything that can change the image.  Host libraries are covered by dpkg's status
# file, which changes whenever a package is installed or upgraded.
input_stamp() {
  {
    echo "abi $ABI rdma-root $RDMA_ROOT"
    cat "$KDIR/.done" "$OPENSM/../.done" "$NVME/../.done" "$NFS/../.done"
    echo "fio $FIO"
    stat -c '%n %s %Y' "$VMLINUZ" /bin/busybox /etc/netconfig /etc/services /etc/protocols /etc/rpc /var/lib/dpkg/status "${HOST_BINS[@]}" \
      "${PERFTEST_BINS[@]}" "/usr/bin/$PY"
    if [ -f "$PIB_KO" ]; then stat -c '%n %s %Y' "$PIB_KO"; else echo "no pib.ko"; fi
    for k in "$OUT"/pib_*.ko; do [ -f "$k" ] && stat -c '%n %s %Y' "$k"; done
    find "$RDMA_ROOT" -printf '%P %s %T@ %l\n' | LC_ALL=C sort
    if [ -d "$GUEST_TESTS" ]; then find "$GUEST_TESTS" -printf '%P %s %T@\n' | LC_ALL=C sort; fi
    find "$IMG" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    find "$IMG" -type f -printf '%P %m\n' | LC_ALL=C sort
  } | sha256sum | cut -d' ' -f1
}

want=$(input_stamp)
if [ "${PIB_FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] &&
   [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initramfs.cpio.gz" ]; then
  say "up to date: $OUT/vmlinuz, $OUT/initramfs.cpio.gz"
  exit 0
fi
rm -f "$STAMP"

# ---------------------------------------------------------------------------------------------
# Skeleton

say "staging in $STAGE"
rm -rf "$STAGE"
mkdir -p "$STAGE" "$OUT"
cd "$STAGE"
mkdir -p usr/bin usr/sbin "usr/lib/$MULTIARCH" usr/lib64 etc dev proc sys run tmp root var/lib
ln -s usr/bin bin
ln -s usr/sbin sbin
ln -s usr/lib lib
ln -s usr/lib64 lib64
ln -s ../run var/run
ln -s ../tmp var/tmp
chmod 1777 tmp
chmod 700 root
# The kernel opens /dev/console for PID 1 before /init can mount devtmpfs.
mknod -m 600 dev/console c 5 1
mknod -m 666 dev/null c 1 3

# ---------------------------------------------------------------------------------------------
# Kernel and modules

say "kernel $ABI"
cp "$VMLINUZ" "$OUT/vmlinuz.tmp"

# modules.dep of the whole tree, computed without writing into the cache (depmod -n prints the
# index files to stdout; modules.dep comes first).
DEPS=$(depmod -n -b "$KROOT" "$ABI" | awk 'stop {next} /^# / {stop = 1; next} /^[^#]*:/ {print}')

# module_path NAME: the modules.dep path (relative to the module dir) of module NAME.
module_path() {
  local re=${1//[-_]/[-_]}
  awk -F: -v re="(^|/)$re\\.ko(\\.[a-z]+)?$" '$1 ~ re {print $1; exit}' <<<"$DEPS"
}

declare -A want_mod=()
for m in "${MODULES[@]}"; do
  p=$(module_path "$m")
  if [ -z "$p" ] && grep -q "/${m//[-_]/[-_]}\.ko\$" "$MODDIR/modules.builtin"; then
    say "$m is built into the kernel"     # 6.12: virtio_pci, virtio_console
    continue
  fi
  [ -n "$p" ] || die "module $m not found in $MODDIR"
  want_mod[$p]=1
done
if [ -f "$PIB_KO" ]; then
  for m in $(modinfo -F depends "$PIB_KO" | tr , ' '); do
    p=$(module_path "$m")
    [ -n "$p" ] || die "pib.ko depends on $m, which is not in $MODDIR"
    want_mod[$p]=1
  done
else
  say "WARNING: $PIB_KO does not exist yet; the image has no pib driver"
fi
# Close over modules.dep (each line already lists the full dependency chain).
for p in "${!want_mod[@]}"; do
  for d in $(awk -F: -v p="$p" '$1 == p {print $2; exit}' <<<"$DEPS"); do want_mod[$d]=1; done
done

GMOD=usr/lib/modules/$ABI
mkdir -p "$GMOD"
cp "$MODDIR"/modules.builtin "$MODDIR"/modules.builtin.modinfo "$MODDIR"/modules.order "$GMOD/"
for p in "${!want_mod[@]}"; do
  mkdir -p "$GMOD/$(dirname "$p")"
  # Compressed modules are stored decompressed: busybox modprobe need not support the format.
  case $p in
    *.ko) cp "$MODDIR/$p" "$GMOD/$p" ;;
    *.ko.xz) xz -dc "$MODDIR/$p" > "$GMOD/${p%.xz}" ;;
    *.ko.zst) zstd -qdc "$MODDIR/$p" > "$GMOD/${p%.zst}" ;;
    *.ko.gz) gzip -dc "$MODDIR/$p" > "$GMOD/${p%.gz}" ;;
    *) die "unknown module format: $p" ;;
  esac
done
# pib.ko, and the kernel-side test modules (build/pib_*.ko, from tests/kernel/).
for k in "$PIB_KO" "$OUT"/pib_*.ko; do
  [ -f "$k" ] || continue
  mkdir -p "$GMOD/extra"
  cp "$k" "$GMOD/extra/"
done
depmod -b "$STAGE" "$ABI"
say "modules: $(find "$GMOD" -name '*.ko' -printf '%f\n' | sed 's/\.ko$//' | sort | paste -sd' ')"

# ---------------------------------------------------------------------------------------------
# Busybox: one static binary, a symlink per applet.  Real binaries copied later replace them.

cp /bin/busybox usr/bin/busybox
while read -r applet; do
  case $applet in
    bin/*|sbin/*) applet=usr/$applet ;;
    usr/*) ;;
    *) continue ;;
  esac
  [ -e "$applet" ] || ln -s /usr/bin/busybox "$applet"
done < <(/bin/busybox --list-full)
say "busybox: $(/bin/busybox --list-full | wc -l) applets"

# install_bin SRC DIR: copy an executable into DIR (usr/bin or usr/sbin), first removing a
# busybox applet of the same name from either directory so that PATH order cannot pick it.
install_bin() {
  local name
  name=$(basename "$1")
  rm -f "usr/bin/$name" "usr/sbin/$name"
  cp -L "$1" "$2/$name"
}

# ---------------------------------------------------------------------------------------------
# rdma-core (ours)

ELFS=()    # every ELF file whose shared-library closure must be present
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

say "rdma-core from $RDMA_ROOT"
for d in usr/bin usr/sbin; do
  [ -d "$RDMA_ROOT/$d" ] || continue
  for f in "$RDMA_ROOT/$d"/*; do
    [ -f "$f" ] || continue
    install_bin "$f" "$d"
    is_elf "$d/$(basename "$f")" && ELFS+=("$d/$(basename "$f")")
  done
done
RLIB=$RDMA_ROOT/usr/lib/$MULTIARCH
if [ -d "$RLIB" ]; then
  # Runtime pieces only: versioned shared objects and the provider directory.
  (cd "$RLIB" && find . -maxdepth 1 -name '*.so.*' -print0 |
     xargs -0 -r cp -P --parents -t "$STAGE/usr/lib/$MULTIARCH")
  [ -d "$RLIB/libibverbs" ] && cp -a "$RLIB/libibverbs" "usr/lib/$MULTIARCH/"
  while IFS= read -r -d '' f; do ELFS+=("$f"); done < <(find "usr/lib/$MULTIARCH" -type f -print0)
fi
for d in etc/libibverbs.d etc/rdma usr/etc/libibverbs.d usr/etc/rdma; do
  [ -d "$RDMA_ROOT/$d" ] || continue
  mkdir -p "$(dirname "$d")"
  cp -a "$RDMA_ROOT/$d" "$(dirname "$d")/"
done
# rdma-root is usually a debug build: keep the symbols, drop the DWARF.
for f in "${ELFS[@]}"; do strip --strip-debug "$f"; done
[ -e "usr/lib/$MULTIARCH/libibverbs.so.1" ] ||
  say "WARNING: rdma-root has no libibverbs.so.1; the host's rdma-core 44.0 will be used"

# ---------------------------------------------------------------------------------------------
# Python, pyverbs and rdma-core's test suite

if [ -d "$RDMA_ROOT/$PYVERBS" ]; then
  say "python: $PY, pyverbs, rdma-core's tests"
  install_bin "/usr/bin/$PY" usr/bin
  ln -sf "$PY" usr/bin/python3
  ELFS+=("usr/bin/$PY")
  excl=()
  for d in "${PY_EXCLUDE[@]}"; do excl+=(--exclude="./$d"); done
  mkdir -p "usr/lib/$PY"
  tar -C "$PY_STDLIB" "${excl[@]}" -cf - . | tar -C "usr/lib/$PY" -xf -
  while IFS= read -r -d '' f; do ELFS+=("$f"); done < <(find "usr/lib/$PY/lib-dynload" -name '*.so' -print0)
  mkdir -p "$(dirname "$PYVERBS")" "$(dirname "$RDMA_TESTS")"
  cp -a "$RDMA_ROOT/$PYVERBS" "$PYVERBS"
  cp -a "$RDMA_ROOT/$RDMA_TESTS" "$RDMA_TESTS"
  while IFS= read -r -d '' f; do strip --strip-debug "$f"; ELFS+=("$f"); done \
    < <(find "$PYVERBS" -name '*.so' -print0)
  # Byte-compiled now, by the same interpreter: the guest would otherwise compile every module
  # on each boot, under TCG.
  "/usr/bin/$PY" -m compileall -q -j 0 -p / "$PYVERBS" "$RDMA_TESTS" >/dev/null
else
  say "WARNING: $RDMA_ROOT has no pyverbs; the image cannot run rdma-core's test suite"
fi

# ---------------------------------------------------------------------------------------------
# Host binaries and the shared-library closure of every ELF

say "host binaries: ${HOST_BINS[*]##*/} ${PERFTEST_BINS[*]##*/}"
for f in "${HOST_BINS[@]}" "${PERFTEST_BINS[@]}"; do
  d=usr/bin; case $f in */sbin/*) d=usr/sbin ;; esac
  install_bin "$f" "$d"
  is_elf "$d/$(basename "$f")" && ELFS+=("$d/$(basename "$f")")
done
rm -f usr/bin/sh
ln -s dash usr/bin/sh

# opensm: its libraries go into the stage first, so that the closure below finds them there.
say "opensm from $OPENSM"
install_bin "$OPENSM/usr/sbin/opensm" usr/sbin
ELFS+=(usr/sbin/opensm)
cp -P "$OPENSM/usr/lib/$MULTIARCH"/lib*.so.* "usr/lib/$MULTIARCH/"
mkdir -p etc/opensm var/cache/opensm var/log

# nvme-cli, and the NFS userland: the server's (rpc.nfsd, rpc.mountd, exportfs, rpcbind) and the
# client's (mount.nfs; busybox mount knows no proto=rdma).  Their own libraries go in first, as
# opensm's.  /var/lib/nfs is the server's state directory (etab, rmtab), /run/rpcbind rpcbind's.
say "nvme-cli from $NVME, NFS userland from $NFS, fio from $FIO"
install_bin "$NVME/usr/sbin/nvme" usr/sbin
install_bin "$FIO" usr/bin
ELFS+=(usr/sbin/nvme usr/bin/fio)
cp -P "$NVME/usr/lib/$MULTIARCH"/lib*.so.* "$NFS/usr/lib/$MULTIARCH"/lib*.so.* "usr/lib/$MULTIARCH/"
cp -a "$NFS/usr/lib/$MULTIARCH/libnfsidmap" "usr/lib/$MULTIARCH/"
for f in usr/sbin/rpc.nfsd usr/sbin/rpc.mountd usr/sbin/exportfs usr/sbin/nfsstat sbin/rpcbind \
         sbin/mount.nfs usr/bin/rpcinfo; do
  d=usr/sbin; case $f in usr/bin/*) d=usr/bin ;; esac
  install_bin "$NFS/$f" "$d"
  ELFS+=("$d/$(basename "$f")")
done
chmod u-s usr/sbin/mount.nfs
ln -sf mount.nfs usr/sbin/mount.nfs4
mkdir -p var/lib/nfs/rpc_pipefs var/lib/nfs/v4recovery etc/nvme
# libtirpc's transports (/etc/netconfig, libtirpc-common) and netbase's service, protocol and
# RPC program names: rpcbind finds no transport without the first, rpc.nfsd no "nfs" port
# without the second.
for f in /etc/netconfig /etc/services /etc/protocols /etc/rpc; do cp "$f" etc/; done

if [ -d "$GUEST_TESTS" ]; then
  for f in "$GUEST_TESTS"/*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    install_bin "$f" usr/bin
    if is_elf "$f"; then
      strip --strip-debug "usr/bin/$(basename "$f")"
      ELFS+=("usr/bin/$(basename "$f")")
    fi
  done
  say "guest tests: $(find "$GUEST_TESTS" -maxdepth 1 -type f -perm -u+x -printf '%f\n' | paste -sd' ')"
fi

# ldd resolves every NEEDED entry recursively.  LD_LIBRARY_PATH puts rdma-root (already copied
# into the stage) ahead of the host, so libibverbs & co. resolve to 56.1.
declare -A have_lib=()
nhost=0
for f in "${ELFS[@]}"; do
  out=$(LD_LIBRARY_PATH=$STAGE/usr/lib/$MULTIARCH ldd "$f" 2>&1) || {
    grep -q 'not a dynamic executable' <<<"$out" && continue
    die "ldd $f: $out"
  }
  ! grep -q 'not found' <<<"$out" || die "$f: missing libraries: $(grep 'not found' <<<"$out")"
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    case $path in "$STAGE"/*) continue ;; esac
    [ -n "${have_lib[$soname]:-}" ] && continue
    have_lib[$soname]=1
    [[ $soname =~ $RDMA_LIBS_RE ]] && say "WARNING: $soname taken from the host ($f): rdma-root lacks it"
    cp -L "$path" "usr/lib/$MULTIARCH/$soname"
    nhost=$((nhost + 1))
  done <<<"$out"
done
# Libraries that glibc dlopen()s rather than links: libgcc_s for pthread_exit/pthread_cancel's
# unwinding (rping's threads end that way; without it glibc aborts the program).
for soname in libgcc_s.so.1; do
  [ -n "${have_lib[$soname]:-}" ] || { cp -L "/lib/$MULTIARCH/$soname" "usr/lib/$MULTIARCH/"; nhost=$((nhost + 1)); }
done
# The dynamic loader, at the path every binary names (PT_INTERP).
cp -L /lib64/ld-linux-x86-64.so.2 "usr/lib/$MULTIARCH/ld-linux-x86-64.so.2"
ln -sf ../lib/$MULTIARCH/ld-linux-x86-64.so.2 usr/lib64/ld-linux-x86-64.so.2
say "host libraries: $nhost"

# ---------------------------------------------------------------------------------------------
# /etc, /init, loader cache, archive

cp -a "$IMG/rootfs/." "$STAGE/"
install -m 755 "$IMG/init" init
# /lib/<multiarch> and /usr/lib/<multiarch> are the loader's built-in search path, so no
# ld.so.conf is needed; ldconfig adds the cache and any missing SONAME links.
: > etc/ld.so.conf
ldconfig -r "$STAGE" 2>&1 | grep -v 'is not a symbolic link' >&2 || true

say "archive ($(du -sh --apparent-size . | cut -f1) uncompressed)"
# "." is archived too: it sets the mode of / (the kernel's rootfs starts out 1777).
chmod 755 .
find . | LC_ALL=C sort |
  cpio --quiet -o -H newc -R 0:0 | gzip -n -6 > "$OUT/initramfs.cpio.gz.tmp"
mv "$OUT/initramfs.cpio.gz.tmp" "$OUT/initramfs.cpio.gz"
mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
echo "$want" > "$STAMP"
say "done: $OUT/vmlinuz, $OUT/initramfs.cpio.gz ($(du -h "$OUT/initramfs.cpio.gz" | cut -f1))"
