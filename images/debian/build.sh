#!/bin/bash
# Build the full Debian guest of the stack (mk/stack.sh: Debian 12 for bookworm, Debian 13 for
# trixie), for `tools/pibvm up --image debian`: a disk image made with mmdebstrap from Debian's
# archive, booted with the distribution's own kernel and initramfs (initramfs-tools), systemd,
# sshd, Debian's rdma-core, infiniband-diags, opensm, perftest, OpenMPI and the guest agent, and
# pib installed the way a user installs it: its Debian packages (make packages), with apt.
#
# Two stages, each cached under $PIB_CACHE/images/:
#   1. the Debian system: a tarball from mmdebstrap, keyed by the suite and the package list
#      (the versions it got are listed in its manifest);
#   2. the image: that system, plus images/debian/rootfs/ (the pib-node units and settings), the
#      pib packages installed with `apt-get install ./*.deb` (pib-dkms builds pib.ko for the
#      image's kernel there, as dkms does on a user's machine) and the MPI test program,
#      as an ext4 file system in a qcow2 file; keyed by stage 1, the .debs and those files.
# Every node of a run boots a copy-on-write overlay of the image (tools/pibvmlib/image.py).
#
# Output: <out>/debian/ (<out>: build/, or build/trixie/), links into the cache:
#   image.qcow2  the root file system (/dev/vda, ext4, no partition table)
#   vmlinuz, initrd.img  the image's own kernel and initramfs, for QEMU's -kernel/-initrd
#   manifest     the Debian packages and versions in it, and how long the stages took
#
#   images/debian/build.sh          build what is missing
#   images/debian/build.sh --base   stage 1 only
#   PIB_FORCE=1 images/debian/build.sh   remake stage 2
set -euo pipefail

TOP=$(cd "$(dirname "$0")/../.." && pwd)
source "$TOP/mk/stack.sh"
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
OUT=$STACK_OUT/debian
PKGDIR=$STACK_OUT/packages
SUITE=$([ "$PIB_STACK" = trixie ] && echo trixie || echo bookworm)
say() { printf '[debian] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# The guest's Debian packages.  dkms brings the compiler and make for pib-dkms, gcc the plain
# `gcc` that mpicc runs; the kernel's headers must be the kernel's own version
# (linux-headers-amd64 follows linux-image-amd64).
PKGS=(systemd-sysv udev dbus kmod iproute2 netbase procps less
      linux-image-amd64 linux-headers-amd64 initramfs-tools dkms gcc
      openssh-server openssh-client qemu-guest-agent iputils-ping
      rdma-core ibverbs-utils ibverbs-providers infiniband-diags opensm perftest
      openmpi-bin libopenmpi-dev ucx-utils)

command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (mk/deps.sh installs it)"
command -v qemu-img >/dev/null || die "qemu-img is missing (mk/deps.sh installs qemu-utils)"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 is missing (e2fsprogs)"
mkdir -p "$CACHE/images" "$OUT"

# --- 1. The Debian system ----------------------------------------------------------------------
KEY1=$(printf '%s\n' "$SUITE" "${PKGS[@]}" | sha256sum | cut -c1-12)
BASE=$CACHE/images/debian-$SUITE-$KEY1.tar
exec 8>"$BASE.lock"
flock 8
if [ ! -f "$BASE" ]; then
  uri=$(bash "$TOP/mk/fetch.sh" archive-uri)
  say "stage 1: Debian $SUITE with ${#PKGS[@]} packages and their dependencies, from $uri (once per package list)"
  t0=$(date +%s)
  # The suite with its updates and security fixes, as an installed system has them.  No
  # documentation; the apt lists are kept (stage 2 installs the local .debs with apt).
  if ! nice mmdebstrap --mode=root --variant=minbase --components=main \
        --include="$(IFS=,; echo "${PKGS[*]}")" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --skip=cleanup/apt/lists \
        --customize-hook='chroot "$1" dpkg-query -W -f="\${Package} \${Version}\n" > "$1/.debian-packages"' \
        "$SUITE" "${BASE%.tar}.tmp.tar" \
        "deb $uri $SUITE main" "deb $uri $SUITE-updates main" \
        "deb ${uri%/debian}/debian-security $SUITE-security main" \
        > "$BASE.log" 2>&1; then
    tail -n 30 "$BASE.log" >&2
    die "mmdebstrap failed (log: $BASE.log)"
  fi
  mv "${BASE%.tar}.tmp.tar" "$BASE"
  say "stage 1 done in $(( $(date +%s) - t0 )) s: $(du -h "$BASE" | cut -f1)"
fi

[ "${1:-}" = --base ] && exit 0

# --- 2. The image ------------------------------------------------------------------------------
shopt -s nullglob
debs=("$PKGDIR"/pib-dkms_*.deb "$PKGDIR"/ibverbs-providers-pib_*.deb)
[ ${#debs[@]} -eq 2 ] || die "need exactly one pib-dkms and one ibverbs-providers-pib .deb in $PKGDIR (make packages), found ${#debs[@]}"
inputs() {
  echo "$KEY1"
  sha256sum "${debs[@]}" | cut -d' ' -f1
  (cd "$TOP" && find images/debian tests/mpi -type f -print0 | sort -z | xargs -0 sha256sum)
}
KEY2=$(inputs | sha256sum | cut -c1-12)
IMG=$CACHE/images/debian-$SUITE-$KEY2
if [ -f "$IMG/.done" ] && [ "${PIB_FORCE:-0}" != 1 ]; then
  say "image up to date: $IMG"
else
  t0=$(date +%s)
  say "stage 2: the image $IMG"
  rm -rf "$IMG" "$IMG.tmp"
  mkdir -p "$IMG.tmp/root"
  R=$IMG.tmp/root
  tar -C "$R" -xf "$BASE"
  cp -a "$TOP/images/debian/rootfs/." "$R/"
  # What the image's own tools would write on a real machine: the hosts of the run (the same
  # file as the initramfs guests'), no host keys yet (pib-ssh-keys.service makes them per node).
  cp "$TOP/images/rootfs/etc/hosts" "$R/etc/hosts"
  rm -f "$R"/etc/ssh/ssh_host_*
  mkdir -p "$R/root/pib"
  cp "${debs[@]}" "$R/root/pib/"
  cp "$TOP/tests/mpi/"*.c "$R/root/pib/"
  # In the image, as root on a fresh install: the pib packages with apt (pib-dkms builds and
  # installs pib.ko for the image's kernel), the units, the MPI test program.
  unshare --mount --propagation private -- /bin/bash -euc '
    R=$1
    mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs tmpfs "$R/tmp"
    chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive /bin/bash -euc "
        apt-get install -y /root/pib/*.deb
        kver=\$(ls /lib/modules | sort -V | tail -n 1)
        dkms status -k \"\$kver\" | grep -q \"installed\" || { echo \"pib-dkms did not install pib.ko for \$kver\" >&2; dkms status >&2; exit 1; }
        systemctl enable pib-node.service systemd-networkd.service
        # opensm.service is wanted by network-online.target, which no unit here pulls in: the
        # multi-user target wants it (it runs where pibvm.sm says, its drop-in).
        systemctl add-wants multi-user.target opensm.service
        mpicc -O2 -Wall -Werror -o /usr/local/bin/pib-mpi-test /root/pib/pib_mpi_test.c
        rm -rf /root/pib
        passwd -d root >/dev/null
        dpkg-query -W -f=\"\\\${Package} \\\${Version}\\n\" > /.debian-packages
        apt-get clean
      "
  ' bash "$R" > "$IMG.tmp/stage2.log" 2>&1 || { tail -n 40 "$IMG.tmp/stage2.log" >&2; die "stage 2 failed (log: $IMG.tmp/stage2.log)"; }
  kver=$(ls "$R/lib/modules" | sort -V | tail -n 1)
  cp "$R/boot/vmlinuz-$kver" "$IMG.tmp/vmlinuz"
  cp "$R/boot/initrd.img-$kver" "$IMG.tmp/initrd.img"
  # The file system: what is there, plus 2 GiB for the nodes' own writes (each node's overlay
  # holds only what it changed).
  used=$(du -sm "$R" | cut -f1)
  size=$(( used + 2048 ))
  mkfs.ext4 -q -L pib-root -d "$R" "$IMG.tmp/root.raw" "${size}M"
  qemu-img convert -f raw -O qcow2 "$IMG.tmp/root.raw" "$IMG.tmp/image.qcow2"
  {
    echo "# The full Debian guest: Debian $SUITE, kernel $kver"
    echo "# stage 2: $(( $(date +%s) - t0 )) s; file system ${size} MiB (${used} MiB used); qcow2 $(du -m "$IMG.tmp/image.qcow2" | cut -f1) MiB"
    echo "# pib: $(basename -a "${debs[@]}" | tr '\n' ' ')"
    cat "$R/.debian-packages"
  } > "$IMG.tmp/manifest"
  rm -rf "$R" "$IMG.tmp/root.raw"
  touch "$IMG.tmp/.done"
  mv "$IMG.tmp" "$IMG"
  say "stage 2 done: $(sed -n 2p "$IMG/manifest" | cut -c3-)"
fi
for f in image.qcow2 vmlinuz initrd.img manifest; do ln -sfn "$IMG/$f" "$OUT/$f"; done
# Every change of pib's packages makes a new image (about 1.1 GB): keep this one and the one
# made before it (another checkout may still boot that), remove the older ones and what a failed
# stage 2 left.
touch "$IMG"     # the newest: ls -t sorts the directories by this
rm -rf "$CACHE/images/debian-$SUITE"-*.tmp
ls -1dt "$CACHE/images/debian-$SUITE"-*/ 2>/dev/null | tail -n +3 | while read -r old; do
  [ "${old%/}" = "$IMG" ] || { say "removing an older image: ${old%/}"; rm -rf "${old%/}"; }
done
say "ok: $OUT/image.qcow2 ($(sed -n 1p "$IMG/manifest" | cut -c3-))"
