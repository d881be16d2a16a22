# Source this: the software stack a build targets, chosen by PIB_STACK, and everything that
# differs between stacks, in one place.  Every build script and the test runner source it.
#
#   bookworm (default)  Debian 12: QEMU 7.2, Linux 6.1, built with the host's own tools.
#                       Outputs in build/.
#   trixie              Debian 13: QEMU 10.0, Linux 6.12, built in a Debian 13 root in the cache
#                       (mk/root.sh: gcc 14 for the 6.12 headers, meson >= 1.5 for QEMU 10).
#                       Outputs in build/trixie/.
#
# Both stacks share the rdma-core 56.1 install with our provider (build/rdma-root), the guest
# test programs (build/guest-tests) and the guest's Debian 12 userland: those run on either
# kernel, whose user ABI is stable.
#
# Defines: PIB_STACK, PIB_TOP (the clone), STACK_OUT (this stack's outputs), STACK_QEMU_VER
# (Debian's source package), STACK_ROOT (1 when the stack builds in the Debian 13 root), and
# stack_run CMD... (run a build command with the stack's toolchain).

PIB_STACK=${PIB_STACK:-bookworm}
PIB_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case $PIB_STACK in
  bookworm)
    STACK_QEMU_VER=1:7.2+dfsg-7+deb12u18
    STACK_OUT=$PIB_TOP/build
    STACK_ROOT=0 ;;
  trixie)
    STACK_QEMU_VER=1:10.0.13+ds-0+deb13u1
    STACK_OUT=$PIB_TOP/build/trixie
    STACK_ROOT=1 ;;
  *)
    echo "PIB_STACK=$PIB_STACK: unknown stack (bookworm or trixie)" >&2
    exit 2 ;;
esac
export PIB_STACK

# stack_run CMD...: run CMD (in the current directory) with the stack's compilers and tools.
stack_run() {
  if [ "$STACK_ROOT" = 1 ]; then bash "$PIB_TOP/mk/root.sh" run "$@"; else "$@"; fi
}
