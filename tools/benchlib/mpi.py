"""MPI over pib, over Soft-RoCE and over TCP, in the same two full Debian guests (pibvm up --image
debian --data-net): tests/mpi/pib_mpi_test.c, started by mpirun from node0 over ssh as a cluster
job is, on UCX over pib_0, on UCX over rxe0 (the data network, as perftest's Soft-RoCE), and on
Open MPI's TCP transport over the management network.  The program checks its data; its 8-byte
ping-pong latency (half a round trip) and 1 MiB bandwidth (MB = 2^20 bytes) are the figures."""

import re

from .config import (CLIENT, MPI_ARGS, MPI_COMMON, MPI_TESTS, MPI_TRANSPORTS, MPI_VM_DIR, SERVER,
                     SetupError, say, tail)
from .guests import Guests, setup_data_net, setup_rxe
from .host import cpu_times, idle_share

MPI_TIMEOUT = 600       # seconds: a hang guard for one job (one takes about 20 s under TCG)


def mpi_run(g, t, seq):
    """One job over transport T: {CSV test: value}; raises SetupError when it fails."""
    cmd = ["ssh", str(SERVER), "--", "timeout", str(MPI_TIMEOUT), "mpirun", "--allow-run-as-root",
           "--host", "node0,node1", "-np", "2", *MPI_COMMON, *MPI_ARGS[t], "pib-mpi-test"]
    rc, out = g.pibvm(*cmd, timeout=MPI_TIMEOUT + 60, log=f"{seq:03d}-{t}-mpi.txt")
    if rc != 0 or "pib-mpi-test: all checks passed" not in out:
        # The first line that says what went wrong (UCX's "Fatal:", a FAIL check), else the end.
        why = next((l.strip() for l in out.splitlines() if re.search(r"Fatal:|^FAIL|rror", l)),
                   tail(out))
        raise SetupError(f"mpirun over {t} (exit {rc}): {why}")
    got = {}
    for test, (_, figure) in MPI_TESTS.items():
        m = re.search(rf"^FIGURE {figure} ([0-9.]+) ", out, re.M)
        if not m:
            raise SetupError(f"mpirun over {t}: no {figure} in its output")
        got[test] = float(m.group(1))
    return got


def measure_mpi(cfg, rec):
    """Boot the Debian guests, set up Soft-RoCE, run every transport cfg.runs times in turn."""
    g = Guests(MPI_VM_DIR, image="debian")
    available = {t: True for t in MPI_TRANSPORTS}
    try:
        say(f"MPI: booting two full Debian guests in {MPI_VM_DIR} (pibvm up --image debian)")
        ok, out = g.up(None)
        if not ok:
            raise SetupError(f"pibvm up --image debian failed:\n{tail(out, 15)}")
        try:
            setup_rxe(g, {n: setup_data_net(g, n) for n in (SERVER, CLIENT)})
        except SetupError as e:
            available["rxe"] = str(e)
            say(f"MPI over rxe unavailable: {e}")
        seq = 0
        for run in range(1, cfg.runs + 1):
            for t in MPI_TRANSPORTS:
                if available[t] is not True:
                    for test, (size, _) in MPI_TESTS.items():
                        rec.skip(test, size, t, run, available[t])
                    continue
                seq += 1
                before = cpu_times()
                try:
                    got = mpi_run(g, t, seq)
                except SetupError as e:
                    say(f"MPI run {run} {t}: {e}")
                    for test, (size, _) in MPI_TESTS.items():
                        rec.fail(test, size, t, run, str(e))
                    continue
                idle = idle_share(before, cpu_times())
                for test, (size, _) in MPI_TESTS.items():
                    rec.ok(test, size, t, run, got[test], idle)
                say(f"MPI run {run} {t}: {got['mpi_pingpong_lat']:.1f} us at 8 B, "
                    f"{got['mpi_pingpong_bw']:.1f} MB/s at 1 MiB")
    except SetupError as e:
        say(str(e))
        rec.fail("mpi_setup", 0, "mpi", 0, str(e))
    finally:
        g.down()
