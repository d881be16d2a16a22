"""perftest between the guests: the plan (which perftest runs make which figures), one run
(server on node0, client on node1 naming `node0`, so that its TCP side channel goes over the
management network; a fresh port per run), and the figures read from its output.

Latency is perftest's t_typical (the median), bandwidth its "BW average" and the message rate its
MsgRate column.  Bandwidth runs are time-bound (-D, so that a slow transport cannot stretch the
bench), latency runs count iterations (-n: t_typical needs them).  Besides one QP one way,
ib_write_bw runs with 8 QPs (`-q 8`) and both ways at once (`-b`, the sum of the two directions)
at 64 KiB.  Every run has a timeout; its outputs go to the scratch directory's logs/."""

import math
import os
import re
import subprocess
import time

from .config import (BW_TESTS, BW_VARIANTS, CLIENT, LAT_TESTS, LOGS, MSGRATE_SIZE, PERFTEST_PORT,
                     SERVER, VARIANT_SIZE, MeasureError, tail)


# ---------------------------------------------------------------------------------------------
# perftest output
#
# perftest 4.5 (Debian's 4.5+0.17, "Version: 6.06") prints one table, a header line starting
# with "#bytes" and one data line per size, e.g.
#    #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
#    65536      200              40.86              38.28              0.000612
#    #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec] ...
# Column names may hold one space ("BW average[MB/sec]", "99% percentile[usec]") and may be
# separated by only one ("#bytes #iterations"), so names are found by their shape: "#word", or
# text ending in a bracketed unit.

COLUMN_RE = re.compile(r"#\w+|[^\s\[\]#][^\[\]#]*?\[[^\]]*\]")


def number(field):
    """A table cell as a float; perftest prints "-nan" for a stdev it could not compute."""
    try:
        return float(field)
    except ValueError:
        return None


def parse_perftest(text):
    """The result rows of a perftest report: a list of {column name: float}."""
    rows, columns = [], None
    for line in text.splitlines():
        if line.strip().startswith("#bytes"):
            columns = [c.strip() for c in COLUMN_RE.findall(line)]
            continue
        if columns is None:
            continue
        values = [number(f) for f in line.split()]
        if len(values) == len(columns) and None not in values:
            rows.append(dict(zip(columns, values)))
    return rows


def pick(rows, size, column):
    for row in rows:
        if row.get("#bytes") == size and math.isfinite(row.get(column, math.nan)):
            return row[column]
    return None


# ---------------------------------------------------------------------------------------------
# The plan: which perftest runs make which figures

class Measurement:
    """One perftest invocation (one tool, one size) and the figures it yields:
    {(test name in the CSV, size): perftest column}."""

    def __init__(self, tool, size, args, figures, timeout, bandwidth=False):
        self.tool, self.size, self.args, self.figures, self.timeout = \
            tool, size, args, figures, timeout
        self.bandwidth = bandwidth      # a bandwidth figure: the link's ceiling bounds it


def make_plan(cfg):
    plan = []
    lat_timeout = 120 if cfg.quick else 180
    for tool, sizes in LAT_TESTS.items():
        for size in sizes:
            args = ["-n", str(cfg.lat_iters)]
            if tool != "ib_atomic_lat":        # atomics are 8 bytes, perftest's only size
                args += ["-s", str(size)]
            plan.append(Measurement(tool, size, args, {(tool, size): "t_typical[usec]"},
                                    lat_timeout))
    for tool in BW_TESTS:
        for size in cfg.sizes:
            figures = {(tool, size): "BW average[MB/sec]"}
            if size == MSGRATE_SIZE and tool in ("ib_write_bw", "ib_send_bw"):
                figures[(f"{tool}_msgrate", size)] = "MsgRate[Mpps]"
            args = ["-s", str(size), "-D", str(cfg.duration), "-f", str(cfg.margin)]
            plan.append(Measurement(tool, size, args, figures, cfg.duration + 90, True))
    for name in BW_VARIANTS:
        args = ["-s", str(VARIANT_SIZE), "-D", str(cfg.duration), "-f", str(cfg.margin)]
        plan.append(Measurement(name, VARIANT_SIZE, args,
                                {(name, VARIANT_SIZE): "BW average[MB/sec]"},
                                cfg.duration + 90, True))
    return plan


# ---------------------------------------------------------------------------------------------
# One perftest run

class Bench:
    """perftest between the guests: a server on node0, a client on node1, over a transport's
    device; every output into the scratch directory's logs/, one numbered pair per run."""

    def __init__(self, g, cfg, device_args):
        self.g = g
        self.cfg = cfg
        self.device_args = device_args      # {transport: {node: [perftest options]}}
        self.next_port = PERFTEST_PORT
        self.seq = 0

    def port(self):
        """A fresh TCP port per run, so a server left behind by a failed run is never in the
        way of the next one."""
        p = self.next_port
        self.next_port = PERFTEST_PORT + (self.next_port - PERFTEST_PORT + 1) % 1000
        return p

    def wait_listening(self, server, port, deadline):
        """Wait until the server guest listens on PORT (so the client's one connect attempt
        succeeds); False if the server exits first or DEADLINE passes."""
        want = f":{port:04X} "
        while time.monotonic() < deadline:
            if server.poll() is not None:
                return False
            rc, out = self.g.pibvm("exec", str(SERVER), "--timeout", "20", "--",
                                   "cat", "/proc/net/tcp", "/proc/net/tcp6", timeout=50)
            for line in out.splitlines():
                f = line.split()
                if len(f) > 3 and (f[1] + " ").endswith(want) and f[3] == "0A":
                    return True
            time.sleep(0.3)
        return False

    def run(self, transport, m):
        """Run measurement M between the guests over TRANSPORT; returns the client's output."""
        self.seq += 1
        port = self.port()
        tool, args, timeout = m.tool, m.args, m.timeout
        tag = f"{self.seq:03d}-{transport}-{tool}-{m.size}"

        def cmd(node):
            return [tool, *self.device_args[transport][node], "-F", "-p", str(port), *args]

        # The variants are ib_write_bw with more options.
        if tool in BW_VARIANTS:
            args = BW_VARIANTS[tool] + args
            tool = "ib_write_bw"

        server = self.g.popen("exec", str(SERVER), "--timeout", str(timeout), "--", *cmd(SERVER))
        try:
            if not self.wait_listening(server, port, time.monotonic() + 60):
                hung = server.poll() is None
                self.g.stop(server)
                out = server.communicate()[0]
                self.log(tag, "server", out)
                raise MeasureError(f"server did not start: {tail(out)}", timed_out=hung)
            rc, out = self.g.pibvm("exec", str(CLIENT), "--timeout", str(timeout), "--",
                                   *cmd(CLIENT), "node0", timeout=timeout + 30)
            self.log(tag, "client", out)
            try:
                server.wait(20 if rc == 0 else 2)
            except subprocess.TimeoutExpired:
                pass
            self.g.stop(server)
            self.log(tag, "server", server.communicate()[0])
        finally:
            self.g.stop(server)
        if rc == 124:
            raise MeasureError(f"timeout after {timeout} s: {tail(out)}", timed_out=True)
        if rc != 0:
            raise MeasureError(f"exit {rc}: {tail(out)}")
        return out

    def log(self, tag, side, text):
        with open(os.path.join(LOGS, f"{tag}.{side}.txt"), "w") as f:
            f.write(text or "")
