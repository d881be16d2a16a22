#!/bin/bash
# Install the Debian 12 packages the build and the launcher need, only those missing.
# Run as root on the build host. Idempotent: a second run does nothing.
#   mk/deps.sh            what the build, the tests and the launcher need
#   mk/deps.sh packaging  Debian's packaging tools, for make packages only
#   mk/deps.sh bench      the bench's plotting stack, for make bench only
#   mk/deps.sh test       libvirt, for the tests only
set -euo pipefail

PKGS=(
  # toolchain and packaging tools
  gcc make dpkg-dev pkg-config python3 cpio kmod xz-utils zstd ca-certificates
  # QEMU 7.2 build
  ninja-build meson libglib2.0-dev libpixman-1-dev flex bison libfdt-dev zlib1g-dev
  # slirp: the full Debian guests' ssh port (mk/qemu-overlay.sh, PIB_QEMU_CONFIGURE)
  libslirp-dev
  # QEMU firmware (we do not build it)
  qemu-system-data seabios
  # PIB_STACK=trixie: the Debian 13 build root (mk/root.sh)
  mmdebstrap
  # rdma-core 56.1 build, with pyverbs (its Cython bindings, for rdma-core's own test suite)
  cmake libnl-3-dev libnl-route-3-dev libudev-dev cython3 python3-dev
  # fuzzing: clang with libFuzzer and the sanitizer runtimes, llvm-cov/symbolizer
  clang libclang-rt-14-dev llvm
  # guest userland taken from Debian 12 binaries
  busybox-static qemu-guest-agent perftest iproute2
  # ... qperf (RDMA and IPoIB latency/bandwidth, on rdma_cm), iperf3 (IPoIB throughput) and
  # ethtool (IPoIB's interrupt coalescing)
  qperf iperf3 ethtool
  # ... libfabric's fi_pingpong and fi_info, its verbs;ofi_rxm provider over pib
  # (tests/e2e/13-libfabric.sh)
  libfabric-bin
  # ... and a library of the guest's opensm (libwrap0 needs it; mk/fetch.sh opensm)
  libnsl2
  # the full Debian guest (images/debian/build.sh): qemu-img for its disks; pibvm's ssh key
  qemu-utils openssh-client
)
# `make packages` (mk/packages.sh) alone installs Debian's packaging tools: mk/deps.sh packaging;
# `make bench` alone its chart's plotting stack (matplotlib brings scipy's and sympy's size,
# which neither the demo nor the tests use): mk/deps.sh bench.
[ "${1:-}" = packaging ] && PKGS=(debhelper dh-dkms dkms lintian)
[ "${1:-}" = bench ] && PKGS=(python3-matplotlib)
# The tests (make test, make e2e) alone libvirt's daemon and virsh, for tests/e2e/81-libvirt.sh.
[ "${1:-}" = test ] && PKGS=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Debian's package lists may be absent on a fresh machine.
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
