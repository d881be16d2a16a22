# pib: top-level build.  Each layer has its own build script, which is incremental on its own
# (ninja, kbuild, cmake, stamp files); make only orders them.  Downloads and the large builds
# live in $(PIB_CACHE) (default ~/.cache/pib), outside the clone.
#
#   make          build everything (QEMU with pib-hca, pib.ko, rdma-core + provider, guest image)
#   make demo     boot two guests linked by a socket and show the HCA in each
#   make test     qtests of the device model, then end-to-end tests in booted guests
#   make qtest    device-model tests only (no guest)
#   make provider-test  the provider's unit test on the host (fake kernel and device)
#   make e2e      end-to-end tests only (they include the full Debian guests: make debian-image)
#   make test-robust  hostile link peer, link faults and guest misuse (tests/e2e/4x-*)
#   make mutate   does the suite catch one-line bugs?  tests/mutate/mutations.txt, one by one
#   make soak     the fault and RC tests in a loop (SOAK_COUNT, SOAK_SECONDS, SOAK_TESTS), after
#                 a guest-less soak of SOAK_CUTS link cuts (tests/soak.sh)
#   make soak-migrate  a guest moved SOAK_MOVES times (default 30) under an NVMe fio
#                 verify job (SOAK_IO=rdma, or tcp); a row in bench/results/soak-migrate.csv
#   make fuzz     the link and MMIO fuzzers for FUZZ_SECONDS (default 600)
#   make bench    pib against Soft-RoCE and the link's host ceiling: bench/results/<date>-<host>.{csv,md}
#                 (commit them), logs in build/bench/; guests under PIB_GUEST_LOCK
#   make packages Debian packages in build/packages/ (build/trixie/packages/): pib-dkms (the
#                 driver's source for DKMS), ibverbs-providers-pib, pib-qemu; lintian-clean of
#                 errors (mk/packages.sh, packaging/README.md)
#   make debian-image  the full Debian guest for `pibvm up --image debian`, with pib's packages
#                 installed by apt: build/debian/ (images/debian/build.sh; Debian 13 for trixie)
#   make lab STAGE=NN [DRIVER=DIR]  grade your driver for stage NN of the course (labs/README.md):
#                 DIR defaults to labs/NN-*/skeleton, your working copy; guests under
#                 PIB_GUEST_LOCK if set
#   make labs     the labs' suite: every stage's solution passes, every skeleton fails (also in
#                 make test)
#   make clean    remove build/ (the cache stays)
#
# PIB_STACK picks the software stack under test (mk/stack.sh), e.g. `make test PIB_STACK=trixie`:
#   bookworm  (default) Debian 12: QEMU 7.2, Linux 6.1, built on the host; outputs in build/
#   trixie    Debian 13: QEMU 10.0, Linux 6.12, built in a Debian 13 root made in the cache
#             (mk/root.sh); outputs in build/trixie/.  `make test` there is qtest and e2e (the
#             fuzzers build on QEMU 7.2's tree only).

SHELL := /bin/bash
export PIB_CACHE ?= $(HOME)/.cache/pib
export PIB_STACK ?= bookworm
# Debian's kernel ABI (6.1.0-NN) moves with point releases: resolve it once per make run.
export PIB_KERNEL_ABI ?= $(shell PIB_STACK=$(PIB_STACK) bash mk/fetch.sh kernel-abi 2>/dev/null)

.PHONY: lab labs all deps qemu driver provider guest-tests ktest image demo test qtest provider-test e2e test-robust mutate hostile soak soak-migrate fuzz bench packages debian-image clean

all: image qemu

deps:
	@bash mk/deps.sh

qemu: deps
	@bash qemu-hw/build.sh

driver: deps
	@bash guest-driver/build.sh

provider: deps
	@bash guest-provider/build.sh

guest-tests: provider
	@bash tests/guest/build.sh

ktest: deps
	@bash tests/kernel/build.sh

image: driver provider guest-tests ktest
	@bash images/build.sh

demo: all
	@bash tools/demo.sh

qtest: qemu
	@bash tests/run.sh qtest

provider-test: provider
	@bash tests/run.sh provider

e2e: all hostile debian-image
	@bash mk/deps.sh test
	@bash tests/run.sh e2e

hostile:
	@bash tests/hostile/build.sh

test-robust: all hostile
	@PIB_E2E_GLOB='4[0-9]-*' bash tests/run.sh e2e

STAGE ?=
DRIVER ?=
lab: all
	@[ -n "$(STAGE)" ] || { echo "make lab STAGE=NN [DRIVER=DIR] (labs/README.md)"; exit 2; }
	@bash labs/grade.sh $(STAGE) $(DRIVER)

labs: all
	@bash tests/run.sh labs

mutate: all
	@bash tests/mutate/run.sh

test: all hostile debian-image
	@bash mk/deps.sh test
	@bash tests/run.sh all

FUZZ_SECONDS ?= 600
soak: all hostile
	@bash tests/soak.sh

# Live migration again and again under NVMe I/O (SOAK_IO=tcp: over virtio-net, a control); the
# result row goes to bench/results/soak-migrate.csv, the data docs/explanation/migration.md quotes.
SOAK_IO ?= rdma
SOAK_MOVES ?= 30
soak-migrate: all
	@flock $${PIB_GUEST_LOCK:-/tmp/pib-guest.lock} bash tests/soak-migrate.sh \
	  --moves $(SOAK_MOVES) --io $(SOAK_IO) --result bench/results/soak-migrate.csv

fuzz: qemu
	@[ "$(PIB_STACK)" = bookworm ] || { echo "make fuzz: the fuzzers build on QEMU 7.2 (PIB_STACK=bookworm)"; exit 2; }
	@bash tests/fuzz/run.sh --seconds $(FUZZ_SECONDS)

bench: all debian-image
	@bash mk/deps.sh bench
	@PIB_GUEST_LOCK=$${PIB_GUEST_LOCK:-/tmp/pib-guest.lock} python3 tools/bench

# pib-dkms carries the driver's source only: DKMS builds it in the VM.
packages: provider qemu
	@bash mk/packages.sh

debian-image: packages
	@bash mk/deps.sh
	@bash images/debian/build.sh

clean:
	rm -rf build
	-$(MAKE) -s -C guest-driver clean
