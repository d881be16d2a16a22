"""What a results file says, in prose and tables: the report next to it (<name>.md: the machine,
the goals, the medians with every run, the ceiling, the failed measurements and why) and the
README's Performance table, both made from the file alone."""

import os
import textwrap

from .config import MBPS, TOP, unit_of
from .results import (MARK, Figures, fmt, goal_checks, load_results, pct, ratio, rfmt, size_name,
                      test_name)


def runs_text(values, unit):
    return ", ".join(fmt(v, unit) for v in values)


def three_way_rows(fig, keys, name):
    """The rows of a pib / rxe / tcp table (NVMe over Fabrics, MPI): medians, ratios, runs."""
    rows = []
    for key in keys:
        unit = unit_of(key[0])
        p, x, t = (fig.median(key, tr) for tr in ("pib", "rxe", "tcp"))
        rows.append(f"| {name(key[0])} | {size_name(key[1])} | {unit} | {fmt(p, unit)} | "
                    f"{fmt(x, unit)} | {fmt(t, unit)} | {rfmt(ratio(p, x))} | "
                    f"{rfmt(ratio(p, t))} | {runs_text(fig.values(key, 'pib'), unit)} | "
                    f"{runs_text(fig.values(key, 'rxe'), unit)} | "
                    f"{runs_text(fig.values(key, 'tcp'), unit)} |")
    return rows


def write_report(csv_path):
    """The .md next to a results file, from the file alone."""
    meta, rows = load_results(csv_path)
    fig = Figures(rows)
    name = os.path.basename(csv_path)
    lines = [f"# pib bench: {meta.get('started', '?')}, {meta.get('host', '?')}, "
             f"stack {meta.get('stack', '?').split()[0]}", "",
             f"Made by `tools/bench` from [{name}]({name}), which holds every run of every "
             f"figure; `tools/bench --report {os.path.relpath(csv_path, TOP)}` remakes this "
             "file.", ""]
    if meta.get("interrupted") == "yes":
        lines += ["**Interrupted: partial results.**", ""]
    lines += ["## Machine", ""]
    lines += [f"- {k}: {meta[k]}" for k in ("cpu", "memory", "kernel", "load average at the start",
                                           "load average at the end", "stack", "QEMU",
                                           "guests", "guest kernel", "perftest",
                                           "link socket buffer", "started", "took", "note")
              if k in meta]
    lines += ["", "## Goals", "", "| goal | result | figures |", "|---|---|---|"]
    for text, met, figures in goal_checks(fig):
        lines.append(f"| {text} | **{MARK[met]}** | {figures} |")
    lines += ["", "## Results", "",
              f"Medians of {meta.get('runs', '?')} runs, and every run in run order.  Latency is "
              "perftest's t_typical (µs, lower is better); bandwidth its BW average (MB/s, "
              "MB = 2^20 bytes); message rate its MsgRate (Mmsg/s).  The ceiling of a bandwidth "
              "row is `tools/hostlimits.c link`: a unix socket used as the pib link uses its "
              "own, sampled right after each pib run of that row (the `-b` row: one socket "
              "written both ways, the two directions summed).  pib/rxe above 1 means pib is "
              "faster for bandwidth and rate, slower for latency.  The idle columns are the "
              "host's idle CPU share during the runs (median, %): near 0 means the host was "
              "starved.", "",
              "| test | size | unit | pib | rxe | ceiling | pib/rxe | pib/ceiling | pib runs "
              "| rxe runs | ceiling runs | idle pib | idle rxe | idle ceiling |",
              "|---|---:|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|"]
    for key in fig.keys:
        test, size = key
        if test.startswith(("host_", "nvme_", "mpi_")) or test in ("setup", "nvme_setup"):
            continue
        unit = unit_of(test)
        p, x, c = (fig.median(key, t) for t in ("pib", "rxe", "ceiling"))
        lines.append(f"| {test_name(test)} | {size_name(size)} | {unit} | {fmt(p, unit)} | "
                     f"{fmt(x, unit)} | {fmt(c, unit)} | {rfmt(ratio(p, x))} | "
                     f"{rfmt(ratio(p, c))} | {runs_text(fig.values(key, 'pib'), unit)} | "
                     f"{runs_text(fig.values(key, 'rxe'), unit)} | "
                     f"{runs_text(fig.values(key, 'ceiling'), unit)} | "
                     f"{pct(fig.idle_median(key, 'pib'))} | {pct(fig.idle_median(key, 'rxe'))} "
                     f"| {pct(fig.idle_median(key, 'ceiling'))} |")
    nvme = [k for k in fig.keys if k[0].startswith("nvme_")]
    if nvme:
        lines += ["", "NVMe over Fabrics (fio, O_DIRECT, io_uring; node1 to node0's RAM "
                  "namespace): nvme-rdma over pib, nvme-rdma over Soft-RoCE, nvme-tcp over the "
                  "management virtio-net.  Sequential: 128 KiB at queue depth 4 (MB/s); random: "
                  f"4 KiB reads at queue depth 16 (kIOPS); {meta.get('fio seconds', '?')} s each "
                  "after 1 s of ramp.", "",
                  "| fio job | block | unit | NVMe/RDMA on pib | on rxe | NVMe/TCP | pib/rxe "
                  "| pib/tcp | pib runs | rxe runs | tcp runs |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---|---|---|"]
        lines += three_way_rows(fig, nvme, lambda test: test[5:])
    mpi = [k for k in fig.keys if k[0].startswith("mpi_") and k[0] != "mpi_setup"]
    if mpi:
        lines += ["", "MPI (tests/mpi/pib_mpi_test.c, Open MPI started by mpirun over ssh, in two "
                  "full Debian guests): UCX over pib, UCX over Soft-RoCE, Open MPI's TCP over the "
                  "management virtio-net.  Latency: half a ping-pong round trip at 8 B (µs); "
                  "bandwidth: ping-pong at 1 MiB, both ways counted (MB/s, MB = 2^20 bytes).", "",
                  "| test | size | unit | pib | rxe | tcp | pib/rxe | pib/tcp | pib runs "
                  "| rxe runs | tcp runs |",
                  "|---|---:|---|---:|---:|---:|---:|---:|---|---|---|"]
        lines += three_way_rows(fig, mpi, lambda test: test)
    mem = [k for k in fig.keys if k[0] == "host_memcpy"]
    if mem:
        lines += ["", "The host's memcpy (MB/s), before the guests booted:", "",
                  "| size | median | runs |", "|---:|---:|---|"]
        for key in mem:
            lines.append(f"| {size_name(key[1])} | {fmt(fig.median(key, 'memcpy'))} | "
                         f"{runs_text(fig.values(key, 'memcpy'), MBPS)} |")
    lines += ["", "## Failed and skipped measurements", ""]
    bad = [r for r in rows if r["status"] != "ok"]
    counts = {}
    for r in bad:
        counts[(r["transport"], r["status"])] = counts.get((r["transport"], r["status"]), 0) + 1
    lines.append(f"{sum(1 for r in rows if r['status'] == 'ok')} measurements succeeded, "
                 f"{sum(1 for r in bad if r['status'] == 'failed')} failed, "
                 f"{sum(1 for r in bad if r['status'] == 'skipped')} were skipped"
                 + (": " + ", ".join(f"{t} {n} {s}" for (t, s), n in counts.items())
                    if counts else "") + ".")
    if bad:
        lines += ["", "Why (the perftest outputs were in the bench's logs/):", ""]
        reasons = {}
        for r in bad:
            k = (r["transport"], r["status"], r["note"] if r["status"] == "skipped" else None)
            reasons.setdefault(k, []).append(r)
        for (t, status, note), rs in reasons.items():
            if status == "skipped":
                lines.append(f"- {t}: {len(rs)} skipped: {note}")
            else:
                lines += [f"- {t} {test_name(r['test'])} {size_name(r['size'])} run {r['run']}: "
                          f"{r['note']}" for r in rs]
    lines += ["", "## How it was measured", ""]
    lines += [f"- {k}: {meta[k]}" for k in ("perftest runs", "bandwidth", "latency", "rxe",
                                           "ceiling", "order", "mpi") if k in meta]
    with open(os.path.splitext(csv_path)[0] + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


# The README's rows: {(test, size)}, in order.  A short table: the goals' three figures and a few
# more; the results file's report (.md) has every figure.
README_ROWS = (("ib_send_lat", 2), ("ib_write_lat", 2), ("ib_write_bw", 65536),
               ("ib_write_bw", 1048576), ("ib_write_bw_q8", 65536), ("ib_read_bw", 1048576),
               ("nvme_seqread", 131072))


def readme_table(csv_path):
    """The README's Performance table and goals, from one results file."""
    meta, rows = load_results(csv_path)
    fig = Figures(rows)
    rel = os.path.relpath(os.path.abspath(csv_path), TOP)
    out = ["| test | size | pib | Soft-RoCE | pib/rxe | link ceiling | pib/ceiling |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for key in README_ROWS:
        test, size = key
        unit = unit_of(test)
        name = test_name(test) if not test.startswith("nvme_") else \
            {"nvme_seqwrite": "NVMe/RDMA seq. write QD 4", "nvme_seqread":
             "NVMe/RDMA seq. read QD 4", "nvme_randread": "NVMe/RDMA rand. read QD 16"}[test]
        p, x, c = (fig.median(key, t) for t in ("pib", "rxe", "ceiling"))
        out.append(f"| {name} ({unit}) | {size_name(size)} | {fmt(p, unit)} | {fmt(x, unit)} | "
                   f"{rfmt(ratio(p, x))} | {fmt(c, unit)} | {rfmt(ratio(p, c))} |")
    out += ["", f"Medians of {meta.get('runs', '?')} runs, {meta.get('started', '?')}, "
            f"{meta.get('cpu', '?')}, stack {meta.get('stack', '?').split()[0]}; every run, "
            "the machine "
            f"and the failed measurements are in [{rel}]({rel}) and "
            f"[{os.path.splitext(rel)[0]}.md]({os.path.splitext(rel)[0]}.md)."
            + (f"  Note on this run: {meta['note']}." if meta.get("note") else ""), ""]
    for text, met, figures in goal_checks(fig):
        out.append(f"- {text}: **{MARK[met]}** ({figures})")
    # Prose wrapped as the README is; table rows stay one line each.
    print("\n".join(l if l.startswith("|") else
                    textwrap.fill(l, 100, subsequent_indent="  " if l.startswith("- ") else "",
                                  break_long_words=False, break_on_hyphens=False)
                    for l in out))
