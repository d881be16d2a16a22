"""Where the bench's files are (for the stack PIB_STACK picks), what it measures at which sizes
and in which units, its messages and its errors.  Everything here is read once, at import."""

import os
import subprocess
import sys

from toolmsg import speaker  # tools/, on the path as the package itself is

say, die = speaker("bench", "error: ")     # "bench: msg"; die: "bench: error: msg", exit 1

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
STACK = os.environ.get("PIB_STACK") or "bookworm"


def stack_outputs():
    """The stack's output directory, from mk/stack.sh itself (it also rejects an unknown
    stack), so that the bench uses what the build of that stack made."""
    r = subprocess.run(["bash", "-c", '. "$1" && echo "$STACK_OUT"', "-",
                        os.path.join(TOP, "mk", "stack.sh")], capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        say(r.stderr.strip() or "mk/stack.sh failed")
        sys.exit(2)
    return r.stdout.strip()


BUILD = stack_outputs()
OUT = os.path.join(BUILD, "bench")          # scratch: logs, the chart, the hostlimits binary
LOGS = os.path.join(OUT, "logs")
RESULTS = os.path.join(TOP, "bench", "results")     # the committed results files
BENCH = os.path.join(TOP, "tools", "bench")         # the entry point (plot.py re-runs it)
PIBVM = os.path.join(TOP, "tools", "pibvm")
VM_DIR = os.path.join(BUILD, "vm-bench")
QEMU = os.path.join(BUILD, "qemu-system-x86_64")
HOSTLIMITS_SRC = os.path.join(TOP, "tools", "hostlimits.c")
HOSTLIMITS = os.path.join(OUT, "hostlimits")
LINK_H = os.path.join(TOP, "qemu-hw", "fabric", "pib-link.h")

SERVER, CLIENT = 0, 1
PERFTEST_PORT = 18515           # perftest's default; each run takes the next one (see Bench.port)
GIVE_UP_AFTER = 3
DATA_NET = "10.12.0"            # the data network's /24 (node N is .N+1); see pibvm --data-net
DATA_MTU = 9000
DATA_MAC = "52:54:00:01:00:{:02x}"

# The transports, as perftest options.  rxe's GID index (-x) is added once the device exists.
TRANSPORTS = ("pib", "rxe")
DEVICE = {"pib": "pib_0", "rxe": "rxe0"}

# Bandwidth tests and latency tests (the sizes of each; the goals are in results.py).
BW_TESTS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
# ib_write_bw variants at VARIANT_SIZE: {name in the CSV: extra perftest options}.
BW_VARIANTS = {"ib_write_bw_q8": ["-q", "8"], "ib_write_bw_bidir": ["-b"]}
VARIANT_SIZE = 65536
LAT_TESTS = {"ib_send_lat": (2, 4096), "ib_write_lat": (2, 4096), "ib_read_lat": (2, 4096),
             "ib_atomic_lat": (8,)}
MSGRATE_SIZE = 64
FULL_SIZES = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
QUICK_SIZES = (64, 4096, 65536, 1048576)
MEMCPY_SIZES = (1048576, 64 << 20)

# Unit names in the results file.
MBPS, USEC, MMSGS, KIOPS = "MB/s", "us", "Mmsg/s", "kIOPS"

# What the link sends per message (include/pib_link.h): frames of a 4-byte link header and one
# IB packet, LRH (8) + BTH (12) + the opcode's extension header + up to one 4 KiB MTU of
# payload, padded to 4 bytes.  No ICRC/VCRC on the link.  A message of one packet carries the
# extension header of its opcode: RETH (16) on a WRITE, AETH (4) on a READ response, none on a
# SEND; a longer one is mostly MIDDLE packets, which carry none.
LINK_HDR, LRH_BTH, MTU = 4, 8 + 12, 4096
EXT_HDR = {"ib_write_bw": 16, "ib_read_bw": 4, "ib_send_bw": 0}

# NVMe over Fabrics: the target's subsystem (pib-nvmet), how node1 reaches it over each transport
# (nvme connect -t, node0's address), and the fio jobs: {CSV test: (block size, fio options,
# (fio's direction, figure))}.
NVME_NQN = "nqn.2026-11.org.pib:nvmet-ram"
NVME_MIB = 256
NVME_TRANSPORTS = ("pib", "rxe", "tcp")
NVME_CONNECT = {"pib": ("rdma", "10.13.0.1"), "rxe": ("rdma", f"{DATA_NET}.1"),
                "tcp": ("tcp", "10.11.0.1")}
NVME_JOBS = {
    "nvme_seqwrite": (131072, ["--rw=write", "--bs=128k", "--iodepth=4"], ("write", "bw")),
    "nvme_seqread": (131072, ["--rw=read", "--bs=128k", "--iodepth=4"], ("read", "bw")),
    "nvme_randread": (4096, ["--rw=randread", "--bs=4k", "--iodepth=16"], ("read", "iops")),
}


# MPI (benchlib/mpi.py): tests/mpi/pib_mpi_test.c in two full Debian guests, started by mpirun from
# node0 over ssh: {CSV test: (size, the program's FIGURE name)}, and each transport's options.
# UCX is held to the one device (a job that cannot use it fails instead of falling back); Open
# MPI's own TCP stays on the management network (every node has the same ssh-NIC address).
MPI_VM_DIR = os.path.join(BUILD, "vm-bench-mpi")
MPI_TRANSPORTS = ("pib", "rxe", "tcp")
MPI_TESTS = {"mpi_pingpong_lat": (8, "mpi_latency_8B"),
             "mpi_pingpong_bw": (1 << 20, "mpi_bandwidth_1MiB")}
MPI_COMMON = ["--mca", "oob_tcp_if_include", "10.11.0.0/24"]
MPI_ARGS = {
    "pib": ["--mca", "pml", "ucx", "-x", "UCX_NET_DEVICES=pib_0:1", "-x", "UCX_TLS=rc,ud,self,sm"],
    "rxe": ["--mca", "pml", "ucx", "-x", "UCX_NET_DEVICES=rxe0:1", "-x", "UCX_TLS=rc,ud,self,sm"],
    "tcp": ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", "10.11.0.0/24"],
}


def unit_of(test):
    if test == "nvme_randread":
        return KIOPS
    if test.endswith("_msgrate"):
        return MMSGS
    if test.endswith("_lat"):
        return USEC
    return MBPS


class SetupError(Exception):
    """The guests, a transport's device or the NVMe target could not be set up."""


class MeasureError(Exception):
    """One measurement failed; TIMED_OUT when it never answered (a wedged guest or device)."""

    def __init__(self, msg, timed_out=False):
        super().__init__(msg)
        self.timed_out = timed_out


def tail(text, n=3):
    """The last N non-empty lines of a tool's output, on one line: the reason a run failed."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " | ".join(lines[-n:]) or "(no output)"
