"""The host: its idle CPU share during a run (TCG is all CPU, so a host with no idle time left is
the limit, not the transport), its ceiling for the link and its memcpy (tools/hostlimits.c,
built into <outputs>/bench/), and its description in the results file.

The ceiling: what the host itself moves through a unix socket used as the pib link uses its own
(`hostlimits link`): the send buffer the device asks for (link-sndbuf, read from the QEMU
binary's pib-hca defaults and PIBVM_PIB_PROPS), non-blocking writev of 64 frames of the size the
link sends for that message size, 256 KiB reads, and for `-b` one socket written both ways at
once.  One sample of perftest's measured window right after each pib bandwidth run of the same
test and size, so that it is taken under the same host load as the figure it bounds."""

import os
import platform
import re
import subprocess

from .config import (BUILD, EXT_HDR, HOSTLIMITS, HOSTLIMITS_SRC, LINK_H, LINK_HDR, LRH_BTH,
                     MEMCPY_SIZES, MTU, OUT, QEMU, STACK, TOP, MeasureError, die, say, tail)
from .results import fmt, size_name


def cpu_times():
    """(idle + iowait, total) jiffies of all the host's CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


def idle_share(before, after):
    """The host's idle share between two cpu_times(), in %."""
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else None


# ---------------------------------------------------------------------------------------------
# The host's limits: the link's ceiling, memcpy

def build_hostlimits():
    if os.path.exists(HOSTLIMITS) and \
            os.path.getmtime(HOSTLIMITS) >= os.path.getmtime(HOSTLIMITS_SRC):
        return
    os.makedirs(OUT, exist_ok=True)
    r = subprocess.run(["gcc", "-O2", "-Wall", "-o", HOSTLIMITS, HOSTLIMITS_SRC],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"cannot build {HOSTLIMITS_SRC}:\n{r.stderr}")


def link_sndbuf():
    """(bytes, where from): the send buffer the guests' pib-hca asks for.  Its default comes
    from the QEMU binary itself (`-device pib-hca,help`), PIBVM_PIB_PROPS may override it as
    pibvm passes it on; failing both, PIB_LINK_SNDBUF in qemu-hw/fabric/pib-link.h."""
    m = re.search(r"(?:^|,)link-sndbuf=(\d+)", os.environ.get("PIBVM_PIB_PROPS", ""))
    if m:
        return int(m.group(1)), "PIBVM_PIB_PROPS"
    try:
        r = subprocess.run([QEMU, "-device", "pib-hca,help"], capture_output=True, text=True,
                           timeout=60)
        m = re.search(r"link-sndbuf=\S+.*?\(default:? (\d+)\)", r.stdout)
        if m:
            return int(m.group(1)), "pib-hca's default in " + os.path.relpath(QEMU, TOP)
    except (OSError, subprocess.TimeoutExpired):
        pass
    with open(LINK_H) as f:
        m = re.search(r"#define PIB_LINK_SNDBUF\s+\((\d+) \* (\d+)\)", f.read())
    return int(m.group(1)) * int(m.group(2)), "PIB_LINK_SNDBUF in qemu-hw/fabric/pib-link.h"


def link_frame(test, size):
    """(payload, frame) bytes of the frames the link sends for one message of SIZE in TEST."""
    if size > MTU:
        return MTU, LINK_HDR + LRH_BTH + MTU
    ext = EXT_HDR.get(test.split("_bw")[0] + "_bw", 0)
    return size, LINK_HDR + LRH_BTH + ext + (size + 3) // 4 * 4


def hostlimits(*args, seconds):
    """One hostlimits run: (MB/s, its output line), or raises MeasureError."""
    try:
        r = subprocess.run([HOSTLIMITS, *map(str, args)], capture_output=True, text=True,
                           timeout=seconds * 10 + 30)
    except subprocess.TimeoutExpired:
        raise MeasureError(f"hostlimits {' '.join(map(str, args))}: no answer", timed_out=True)
    m = re.search(r"MBps=([0-9.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise MeasureError(f"hostlimits {' '.join(map(str, args))}: exit {r.returncode}: "
                           f"{tail(r.stderr + r.stdout)}")
    return float(m.group(1)), r.stdout.strip()


def ceiling_sample(cfg, test, size):
    """The link's ceiling for TEST at SIZE: hostlimits link, in the link's configuration,
    both ways at once for the -b variant.  Returns (MB/s, the send buffer Linux granted)."""
    payload, frame = link_frame(test, size)
    both = ["--both"] if test.endswith("_bidir") else []
    v, line = hostlimits("link", payload, frame, cfg.host_seconds, cfg.sndbuf, *both,
                         seconds=cfg.host_seconds)
    m = re.search(r"sndbuf_got=(-?\d+)", line)
    return v, int(m.group(1)) if m else None


def measure_memcpy(cfg, rec):
    for s in MEMCPY_SIZES:
        for run in range(1, cfg.runs + 1):
            try:
                v, _ = hostlimits("memcpy", s, cfg.host_seconds, seconds=cfg.host_seconds)
            except MeasureError as e:
                say(f"memcpy {s}: FAILED: {e}")
                rec.fail("host_memcpy", s, "memcpy", run, str(e))
                continue
            rec.ok("host_memcpy", s, "memcpy", run, v, None)
            say(f"memcpy {size_name(s)} run {run}: {fmt(v)} MB/s")


def measure_ceiling(cfg, m, run, rec):
    """One sample of the link's ceiling for M's bandwidth figure, with the guests up, as they
    are during the pib run it bounds."""
    test = next(t for t, _ in m.figures if not t.endswith("_msgrate"))
    cpu0 = cpu_times()
    try:
        v, got = ceiling_sample(cfg, test, m.size)
    except MeasureError as e:
        say(f"ceiling {test} {m.size} run {run}: FAILED: {e}")
        rec.fail(test, m.size, "ceiling", run, str(e))
        return
    idle_pct = idle_share(cpu0, cpu_times())
    rec.ok(test, m.size, "ceiling", run, v, idle_pct)
    if got is not None:
        cfg.sndbuf_got = got
    say(f"ceiling {test} {m.size} run {run}: {fmt(v)} MB/s (host idle "
        + (f"{idle_pct:.0f}%" if idle_pct is not None else "?") + ")")


# ---------------------------------------------------------------------------------------------
# The host's description, for the results file

def first_line(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def load_average():
    """The host's load averages (1, 5, 15 min): other work on the host slows the guests (TCG is
    all CPU), so they say how far the absolute figures can be trusted."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def host_env():
    cpu, mem = "unknown", "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
            mem = f"{kib / (1 << 20):.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"host": platform.node(), "cpu": f"{cpu}, {os.cpu_count()} cores",
            "memory": mem, "kernel": f"Linux {platform.release()} ({platform.version()})",
            "load average at the start": load_average(),
            "stack": f"{STACK} (outputs in {os.path.relpath(BUILD, TOP)}/)",
            "QEMU": first_line([QEMU, "--version"])}
