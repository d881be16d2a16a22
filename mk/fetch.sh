#!/bin/bash
# Download (once) and verify every outside input of the build into the cache, outside the clone.
#
#   mk/fetch.sh qemu      -> $PIB_CACHE/src/qemu-<ver>/          (Debian source package, patched)
#   mk/fetch.sh rdma-core -> $PIB_CACHE/src/rdma-core-<ver>/     (upstream orig tarball)
#   mk/fetch.sh fio       -> $PIB_CACHE/src/fio-<ver>/           (upstream orig tarball; Debian's
#                            fio .deb links Ceph's and Gluster's libraries, so images/fio.sh
#                            builds it without them)
#   mk/fetch.sh kernel    -> $PIB_CACHE/kernel/<abi>/root/       (linux-image + headers, dpkg -x)
#   mk/fetch.sh kernel-abi -> the current linux-image-amd64 ABI (6.1.0-NN); the Makefile resolves
#                            it once per run and passes it down as PIB_KERNEL_ABI
#   mk/fetch.sh archive-uri -> the Debian archive that the machine's apt configuration uses
#   mk/fetch.sh opensm|nvme|nfs -> $PIB_CACHE/debs/<set>-<ver>-<sum>/root/  (Debian 12's opensm,
#                            nvme-cli, NFS userland and the libraries of theirs the host lacks,
#                            dpkg -x: for the guest image, never the host)
#
# The QEMU version and the kernel follow the stack (PIB_STACK, mk/stack.sh): Debian 12's from
# the host's apt, or Debian 13's from the apt lists of the Debian 13 root (mk/root.sh).
#
# Everything comes through apt: hashes are checked against Debian's signed indexes, and the
# archive address is the one the machine's own apt configuration uses. A directory is only
# trusted when its ".done" stamp (which records the sha256 of its inputs) exists.
set -euo pipefail

source "$(dirname "$0")/stack.sh"
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
QEMU_VER=$STACK_QEMU_VER
RDMA_VER=56.1-1
FIO_VER=3.33-3          # Debian 12's
DL=$CACHE/dl
APTD=$CACHE/apt
mkdir -p "$DL" "$APTD"

say() { printf '[fetch] %s\n' "$*" >&2; }

# A private apt configuration with deb-src lines for bookworm and trixie, so we never edit
# the system's sources. The archive URI is read from the system's configuration.
papt() {
  apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$APTD/etc" \
          -o Dir::State::Lists="$APTD/lists" -o Dir::Cache="$APTD/cache" \
          -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
archive_uri() {
  local uri
  uri=$(awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | grep -m1 debian || true)
  [ -n "$uri" ] || uri=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$uri" ] || { say "cannot find the Debian archive in the apt configuration"; exit 1; }
  echo "$uri"
}
papt_setup() {
  [ -f "$APTD/.updated" ] && return 0
  local uri
  uri=$(archive_uri)
  mkdir -p "$APTD/etc" "$APTD/lists/partial" "$APTD/cache/archives/partial"
  cat > "$APTD/etc/pib.sources" <<SRC
Types: deb-src
URIs: $uri
Suites: bookworm trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  say "private apt index update (deb-src bookworm, trixie)"
  papt update -q >&2
  touch "$APTD/.updated"
}

# fetch_uri URI FILE SHA256: download through apt's own helper, which checks the hash.
fetch_uri() {
  local uri=$1 file=$2 sha=$3
  if [ -f "$DL/$file" ] && echo "$sha  $DL/$file" | sha256sum -c --quiet - 2>/dev/null; then return 0; fi
  say "download $file"
  /usr/lib/apt/apt-helper download-file "$uri" "$DL/$file" "SHA256:$sha" >&2
}

# src_uris PKG=VER: print "URI FILE SHA256" for each file of a source package, from the
# signed Sources index (works even where the .dsc itself is not served).
src_uris() {
  papt source --print-uris -qq "$1" 2>/dev/null | tr -d "'" | awk '{sub("SHA256:","",$4); print $1, $2, $4}'
}

fetch_qemu() {
  local ver=${QEMU_VER#*:} dir=$CACHE/src/qemu-${QEMU_VER#*:}
  [ -f "$dir/.done" ] && { echo "$dir"; return; }
  papt_setup
  local uri file sha dsc=
  while read -r uri file sha; do
    fetch_uri "$uri" "$file" "$sha"
    case $file in *.dsc) dsc=$file ;; esac
  done < <(src_uris "qemu=$QEMU_VER")
  [ -n "$dsc" ] || { say "qemu $QEMU_VER not found in the Sources index"; exit 1; }
  say "unpack $dsc (with Debian's patches)"
  rm -rf "$dir" "$dir.tmp"; mkdir -p "$CACHE/src"
  dpkg-source --no-check -x "$DL/$dsc" "$dir.tmp" >&2
  mv "$dir.tmp" "$dir"
  (cd "$DL" && sha256sum "$dsc") > "$dir/.done"
  echo "$dir"
}

# fetch_orig PKG VER: a source package's upstream tarball, unpacked into the cache once.
fetch_orig() {
  local pkg=$1 ver=$2 dir=$CACHE/src/$1-${2%-*}
  [ -f "$dir/.done" ] && { echo "$dir"; return; }
  papt_setup
  local uri file sha orig=
  while read -r uri file sha; do
    case $file in *.orig.tar.gz) fetch_uri "$uri" "$file" "$sha"; orig=$file ;; esac
  done < <(src_uris "$pkg=$ver")
  [ -n "$orig" ] || { say "$pkg $ver not found in the Sources index"; exit 1; }
  say "unpack $orig"
  rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
  tar -xzf "$DL/$orig" -C "$dir.tmp" --strip-components=1
  mv "$dir.tmp" "$dir"
  (cd "$DL" && sha256sum "$orig") > "$dir/.done"
  echo "$dir"
}

# kapt CMD...: apt-get/apt-cache for the stack's kernel: the host's for Debian 12, the Debian 13
# root's (whose lists were taken when the root was made) for Debian 13.
kapt() { stack_run "$@"; }

# The kernel ABI (6.1.0-NN, 6.12.NN+deb13) moves with point releases: resolve it from
# linux-image-amd64.  On trixie, nothing before the root exists (the Makefile asks at parse time).
kernel_abi() {
  [ "$STACK_ROOT" = 1 ] && ! bash "$PIB_TOP/mk/root.sh" exists && return 0
  kapt apt-cache depends linux-image-amd64 2>/dev/null | awk -F'linux-image-' '/Depends: linux-image-[0-9]/ {sub("-amd64","",$2); print $2; exit}'
}

fetch_kernel() {
  [ "$STACK_ROOT" = 1 ] && bash "$PIB_TOP/mk/root.sh" path >/dev/null
  local abi=${PIB_KERNEL_ABI:-$(kernel_abi)}
  [ -n "$abi" ] || [ "$STACK_ROOT" = 1 ] || { apt-get update -q >&2; abi=$(kernel_abi); }
  [ -n "$abi" ] || { say "cannot resolve linux-image-amd64"; exit 1; }
  local dir=$CACHE/kernel/$abi
  [ -f "$dir/.done" ] && { echo "$dir"; return; }
  local kbuild
  kbuild=$(kapt apt-cache depends "linux-headers-$abi-amd64" | awk '/Depends: linux-kbuild-/ {print $2; exit}')
  local pkgs=("linux-image-$abi-amd64" "linux-headers-$abi-amd64" "linux-headers-$abi-common" "$kbuild")
  say "download ${pkgs[*]}"
  mkdir -p "$DL/kernel"
  (cd "$DL/kernel" && kapt apt-get download -q -o APT::Sandbox::User=root "${pkgs[@]}" >&2)   # apt checks the hashes
  rm -rf "$dir"; mkdir -p "$dir/root"
  local p deb
  for p in "${pkgs[@]}"; do
    deb=$(ls "$DL/kernel/${p}_"*.deb | tail -n1)
    say "unpack $(basename "$deb")"
    dpkg-deb -x "$deb" "$dir/root"
  done
  # Debian 13's packages are merged-/usr (usr/lib/modules); depmod -b and the image builder
  # look in lib/modules.
  [ -e "$dir/root/lib" ] || ln -s usr/lib "$dir/root/lib"
  # The headers' Makefile includes the common tree by absolute path; point it into the cache.
  sed -i "s|^include /usr/src/|include $dir/root/usr/src/|" "$dir/root/usr/src/linux-headers-$abi-amd64/Makefile"
  (cd "$DL/kernel" && for p in "${pkgs[@]}"; do sha256sum "${p}_"*.deb; done) > "$dir/.done"
  echo "$abi" > "$dir/abi"
  echo "$dir"
}

# Debian 12 packages for the guest image, unpacked, never installed on the host.  Each set is
# the program's packages plus the libraries of theirs that the host does not have (the image's
# library closure takes the others from the host):
#   opensm  the guest's subnet manager, running against the guest's libibumad (rdma-core 56.1,
#           same soname);
#   nvme    nvme-cli, for NVMe over Fabrics (nvme connect -t rdma);
#   nfs     the NFS server's and client's userland (rpc.nfsd, rpc.mountd, exportfs, mount.nfs,
#           rpcbind), for NFS over RDMA.
# The directory is keyed by the first package's version and by the packages' sha256 in the
# signed index, so a rebuilt package with the same version gets a directory of its own.
debs_of() {
  case $1 in
    opensm) echo opensm libopensm9 libosmcomp5 libosmvendor5 libwrap0 ;;
    nvme) echo nvme-cli libnvme1 ;;
    nfs) echo nfs-kernel-server nfs-common rpcbind libnfsidmap1 libwrap0 keyutils ;;
    *) return 1 ;;
  esac
}
fetch_debs() {
  local set=$1 debs ver sum
  read -r -a debs <<<"$(debs_of "$set")"
  ver=$(apt-cache show --no-all-versions "${debs[0]}" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
  [ -n "$ver" ] || { apt-get update -q >&2; ver=$(apt-cache show --no-all-versions "${debs[0]}" | awk '/^Version:/ {print $2; exit}'); }
  [ -n "$ver" ] || { say "${debs[0]} is not in the apt lists"; exit 1; }
  sum=$(apt-cache show --no-all-versions "${debs[@]}" | awk '/^SHA256:/ {print $2}' |
        sha256sum | cut -c1-12)
  local dir=$CACHE/debs/$set-${ver//:/_}-$sum
  [ -f "$dir/.done" ] && { echo "$dir"; return; }
  say "download ${debs[*]}"
  mkdir -p "$DL/debs"
  (cd "$DL/debs" && apt-get download -q -o APT::Sandbox::User=root "${debs[@]}" >&2)   # apt checks the hashes
  rm -rf "$dir"; mkdir -p "$dir/root"
  local p deb
  for p in "${debs[@]}"; do
    deb=$(ls -t "$DL/debs/${p}_"*.deb | head -n1)
    say "unpack $(basename "$deb")"
    dpkg-deb -x "$deb" "$dir/root"
    sha256sum "$deb" >> "$dir/.done.tmp"
  done
  mv "$dir/.done.tmp" "$dir/.done"
  echo "$dir"
}

case ${1:-} in
  archive-uri) archive_uri ;;
  kernel-abi) kernel_abi ;;
  qemu) fetch_qemu ;;
  rdma-core) fetch_orig rdma-core "$RDMA_VER" ;;
  fio) fetch_orig fio "$FIO_VER" ;;
  kernel) fetch_kernel ;;
  opensm|nvme|nfs) fetch_debs "$1" ;;
  *) echo "usage: $0 qemu|rdma-core|fio|kernel|kernel-abi|archive-uri|opensm|nvme|nfs" >&2; exit 2 ;;
esac
