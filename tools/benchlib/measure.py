"""A whole bench run, as `make bench` makes it: the host's memcpy, the guests booted once, pib and
Soft-RoCE set up, then perftest (measure_all) and NVMe over Fabrics (measure_nvme), every run of
every figure into a Record, and at the end the results file, its report, the chart and the goals.

Every figure is measured --runs times, the transports interleaved (pib, its ceiling sample, rxe)
so that drift in the host's load hits all alike; the tables show the medians.  A transport is
given up for the rest of the run (its figures stay empty, recorded as skipped) when its first
GIVE_UP_AFTER measurements all fail (a transport that does not work yet), or when GIVE_UP_AFTER
in a row time out (a wedged guest or device): either way the bench still finishes in its time
with the other figures.

NVMe over Fabrics: node0 exports a RAM namespace (pib-nvmet, null_blk) over nvme-rdma on pib
(IPoIB's address), over nvme-rdma on Soft-RoCE (the data network's) and over nvme-tcp on the
management network, and node1 connects to each in turn and runs fio (O_DIRECT, io_uring)."""

import json
import os
import re
import signal
import time

from .config import (CLIENT, DATA_MTU, DEVICE, GIVE_UP_AFTER, NVME_CONNECT, NVME_JOBS, NVME_NQN,
                     NVME_TRANSPORTS, OUT, SERVER, TOP, TRANSPORTS, VM_DIR, MeasureError,
                     SetupError, say, tail, unit_of)
from .guests import (Guests, check_pib, crc32_overlay, guest_env, setup_data_net, setup_nvme,
                     setup_rxe)
from .host import (build_hostlimits, cpu_times, host_env, idle_share, link_sndbuf, load_average,
                   measure_ceiling, measure_memcpy)
from .perftest import Bench, make_plan, parse_perftest, pick
from .mpi import measure_mpi
from .plot import write_chart
from .report import write_report
from .results import MARK, Figures, Record, fmt, goal_checks, load_results, write_results


def run(cfg, out_csv, t0, started):
    """The whole run, from the memcpy figures to the results file OUT_CSV, the report and the
    chart; the guests are always shut down, also on errors and Ctrl-C (SIGTERM raises it too).
    T0 (time.monotonic()) and STARTED (the UTC time, as written) are when the bench began.
    Returns the exit status: 130 when interrupted, 1 when the guests did not boot."""
    meta = {"format": "tools/bench results 2: one row per run", "started": started}
    meta.update(host_env())
    build_hostlimits()
    cfg.sndbuf, where = link_sndbuf()
    cfg.sndbuf_got = None
    rec = Record()
    say(f"memcpy ({cfg.runs} x {cfg.host_seconds} s per size)")
    measure_memcpy(cfg, rec)

    available = {t: True for t in TRANSPORTS}
    if cfg.only:
        for t in TRANSPORTS:
            if t != cfg.only:
                available[t] = "not requested (--only)"
    interrupted = False
    g = Guests()
    booted = cfg.mpi_only
    try:
        if cfg.mpi_only:
            raise MpiOnly
        say(f"booting two guests in {VM_DIR} (pibvm up --data-net)")
        ok, out = g.up(crc32_overlay())
        if not ok:
            raise SetupError(f"pibvm up failed:\n{tail(out, 15)}")
        booted = True
        meta.update(guest_env(g))
        device_args = {"pib": {n: ["-d", DEVICE["pib"], "-i", "1"] for n in (SERVER, CLIENT)},
                       "rxe": {}}
        if available["pib"] is True:
            try:
                check_pib(g)
            except SetupError as e:
                available["pib"] = str(e)
                say(f"pib unavailable: {e}")
        if available["rxe"] is True:
            try:
                ifnames = {n: setup_data_net(g, n) for n in (SERVER, CLIENT)}
                gids = setup_rxe(g, ifnames)
                device_args["rxe"] = {n: ["-d", DEVICE["rxe"], "-i", "1", "-x", str(gids[n])]
                                      for n in (SERVER, CLIENT)}
                say(f"rxe0 on {ifnames[SERVER]}/{ifnames[CLIENT]}, GID index "
                    f"{gids[SERVER]}/{gids[CLIENT]}")
            except SetupError as e:
                available["rxe"] = str(e)
                say(f"rxe unavailable: {e}")
        measure_all(Bench(g, cfg, device_args), cfg, make_plan(cfg), available, rec)
        if not cfg.no_nvme:
            nvme_available = {"pib": available["pib"], "rxe": available["rxe"], "tcp": True}
            try:
                say("NVMe over Fabrics: target on node0, fio on node1")
                setup_nvme(g, nvme_available)
                measure_nvme(g, cfg, nvme_available, rec)
            except SetupError as e:
                say(f"NVMe over Fabrics unavailable: {e}")
                rec.fail("nvme_setup", 0, "nvme", 0, str(e))
    except MpiOnly:
        pass
    except SetupError as e:
        say(str(e))
        rec.fail("setup", 0, "all", 0, str(e))
    except KeyboardInterrupt:
        say("interrupted; stopping the guests")
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # let the clean-up finish
        if not cfg.mpi_only:
            g.down()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    # MPI boots guests of its own, the full Debian ones, once these are down.
    if not cfg.no_mpi and not interrupted:
        try:
            measure_mpi(cfg, rec)
        except KeyboardInterrupt:
            say("interrupted during MPI")
            interrupted = True

    took = time.monotonic() - t0
    meta["load average at the end"] = load_average()
    meta["took"] = f"{took / 60:.1f} min"
    meta["link socket buffer"] = (f"{cfg.sndbuf} B asked ({where}), "
                                  + (f"{cfg.sndbuf_got} B granted (getsockopt; Linux doubles "
                                     "what it grants)" if cfg.sndbuf_got is not None
                                     else "granted: not measured"))
    meta.update(method_meta(cfg))
    if cfg.note:
        meta["note"] = cfg.note
    if interrupted:
        meta["interrupted"] = "yes"
    write_results(out_csv, meta, rec)
    write_report(out_csv)
    chart = os.path.join(OUT, "bandwidth.png")
    write_chart(out_csv, chart)
    fig = Figures(load_results(out_csv)[1])
    for text, met, figures in goal_checks(fig):
        say(f"goal: {text}: {MARK[met]} ({figures})")
    nfail = sum(1 for r in rec.rows if r["status"] == "failed")
    nskip = sum(1 for r in rec.rows if r["status"] == "skipped")
    say(f"done in {took / 60:.1f} min: {os.path.relpath(out_csv, TOP)} and .md, {chart}"
        f" ({nfail} failed, {nskip} skipped measurements)")
    if interrupted:
        return 130
    return 0 if booted else 1


class MpiOnly(Exception):
    """--mpi-only: no perftest guests."""


# ---------------------------------------------------------------------------------------------
# perftest, with the link's ceiling

def measure_all(bench, cfg, plan, available, rec):
    """Run the plan RUNS times, transports interleaved so that drift in the host's load hits
    both alike, and a sample of the link's ceiling right after each pib bandwidth run.  Every
    run goes into REC, with the host's idle share (%) during it."""
    timeouts_in_a_row = {t: 0 for t in TRANSPORTS}
    failed_from_start = {t: 0 for t in TRANSPORTS}      # reset for good by the first success
    total = cfg.runs * len(plan) * len(TRANSPORTS)
    done = 0
    for run in range(1, cfg.runs + 1):
        for m in plan:
            for t in TRANSPORTS:
                done += 1
                where = f"[{done}/{total}] run {run} {m.tool} {m.size} {t}"
                if available[t] is not True:
                    for test, size in m.figures:
                        rec.skip(test, size, t, run, available[t])
                else:
                    measure_one(bench, m, t, run, where, rec, available, timeouts_in_a_row,
                                failed_from_start)
                if t == "pib" and m.bandwidth:
                    measure_ceiling(cfg, m, run, rec)


def measure_one(bench, m, t, run, where, rec, available, timeouts_in_a_row, failed_from_start):
    started = time.monotonic()
    try:
        cpu0 = cpu_times()
        out = bench.run(t, m)
        idle_pct = idle_share(cpu0, cpu_times())
        rows = parse_perftest(out)
        got = {}
        for key, column in m.figures.items():
            v = pick(rows, m.size, column)
            if v is None:
                raise MeasureError(f"no '{column}' for {m.size} B in the output: {tail(out)}")
            # perftest prints 0.00 when no iteration completed inside the measured window of a
            # -D run (seen with rxe): no figure, not a zero.
            if v <= 0:
                raise MeasureError(f"'{column}' is {v} for {m.size} B: {tail(out)}")
            got[key] = v
    except MeasureError as e:
        say(f"{where}: FAILED ({time.monotonic() - started:.0f} s): {e}")
        for test, size in m.figures:
            rec.fail(test, size, t, run, str(e))
        timeouts_in_a_row[t] = timeouts_in_a_row[t] + 1 if e.timed_out else 0
        if failed_from_start[t] is not None:
            failed_from_start[t] += 1
        if failed_from_start[t] == GIVE_UP_AFTER:
            available[t] = f"{t} failed its first {GIVE_UP_AFTER} measurements; given up"
        elif timeouts_in_a_row[t] == GIVE_UP_AFTER:
            available[t] = f"{t} timed out {GIVE_UP_AFTER} times in a row; given up"
        if available[t] is not True:
            say(available[t])
        return
    timeouts_in_a_row[t] = 0
    failed_from_start[t] = None
    for (test, size), v in got.items():
        rec.ok(test, size, t, run, v, idle_pct)
    say(f"{where}: " + ", ".join(f"{fmt(v, unit_of(k[0]))} {unit_of(k[0])}"
                                 for k, v in got.items())
        + f" ({time.monotonic() - started:.0f} s, host idle "
        + (f"{idle_pct:.0f}%" if idle_pct is not None else "?") + ")")


# ---------------------------------------------------------------------------------------------
# NVMe over Fabrics with fio

def nvme_run(g, cfg, t, seq):
    """Connect node1 to the target over transport T, run the fio jobs, disconnect; returns
    {CSV test: figure}.  Raises MeasureError."""
    tr, addr = NVME_CONNECT[t]
    tag = f"{seq:03d}-{t}-nvme"
    rc, out = g.sh(CLIENT, f"""
        nvme connect -t {tr} -a {addr} -s 4420 -n {NVME_NQN} || exit 1
        for i in $(seq 100); do
            for s in /sys/class/nvme-subsystem/*; do
                grep -qx {NVME_NQN} $s/subsysnqn 2>/dev/null || continue
                for n in $s/nvme*n*; do [ -b /dev/${{n##*/}} ] && echo "dev=${{n##*/}}" && exit 0; done
            done
            sleep 0.1
        done
        echo "no namespace"; exit 1""", timeout=120, log=f"{tag}.connect.txt")
    m = re.search(r"dev=(\S+)", out)
    try:
        if rc != 0 or not m:
            raise MeasureError(f"nvme connect -t {tr} -a {addr}: {tail(out)}", timed_out=rc == 124)
        got = {}
        for test, (_, opts, (direction, figure)) in NVME_JOBS.items():
            rc, out = g.pibvm("exec", str(CLIENT), "--timeout", str(cfg.fio_seconds + 120), "--",
                              "fio", "--name=bench", f"--filename=/dev/{m.group(1)}", "--direct=1",
                              "--ioengine=io_uring", "--time_based", "--ramp_time=1",
                              f"--runtime={cfg.fio_seconds}", "--output-format=json", *opts,
                              timeout=cfg.fio_seconds + 150, log=f"{tag}.{test}.txt")
            if rc != 0:
                raise MeasureError(f"fio {test}: exit {rc}: {tail(out)}", timed_out=rc == 124)
            try:
                job = json.loads(out[out.index("{"):out.rindex("}") + 1])["jobs"][0][direction]
            except (ValueError, KeyError, IndexError) as e:
                raise MeasureError(f"fio {test}: no JSON result ({e}): {tail(out)}")
            # fio's bw is in KiB/s: MB/s with MB = 2^20, as perftest's.
            got[test] = job["bw"] / 1024.0 if figure == "bw" else job["iops"] / 1000.0
        return got
    finally:
        g.sh(CLIENT, f"nvme disconnect -n {NVME_NQN}", timeout=120, log=f"{tag}.connect.txt")


def measure_nvme(g, cfg, available, rec):
    """RUNS rounds of every transport in turn; every run's figures into REC."""
    seq = 0
    for run in range(1, cfg.runs + 1):
        for t in NVME_TRANSPORTS:
            seq += 1
            where = f"nvme run {run} {t}"
            if available[t] is not True:
                for test, job in NVME_JOBS.items():
                    rec.skip(test, job[0], t, run, available[t])
                continue
            started = time.monotonic()
            cpu0 = cpu_times()
            try:
                got = nvme_run(g, cfg, t, seq)
            except MeasureError as e:
                say(f"{where}: FAILED ({time.monotonic() - started:.0f} s): {e}")
                for test, job in NVME_JOBS.items():
                    rec.fail(test, job[0], t, run, str(e))
                continue
            idle_pct = idle_share(cpu0, cpu_times())
            for test, v in got.items():
                rec.ok(test, NVME_JOBS[test][0], t, run, v, idle_pct)
            say(f"{where}: " + ", ".join(f"{k} {fmt(v, unit_of(k))} {unit_of(k)}"
                                         for k, v in got.items())
                + f" ({time.monotonic() - started:.0f} s)")


def method_meta(cfg):
    """How it was measured, for the results file."""
    return {
        "perftest runs": "server on node0, client on node1 (`node0` as the server name, TCP "
                         "side channel over the management network), `-F`, a fresh `-p` port "
                         "per run; pib `-d pib_0 -i 1`; rxe `-d rxe0 -i 1 -x <IPv4 GID index>`",
        "bandwidth": f"`-D {cfg.duration} -f {cfg.margin}` per size (time-bound, "
                     f"{cfg.duration - 2 * cfg.margin} s measured); `_q8` adds `-q 8`, "
                     "`_bidir` `-b` (both directions, summed)",
        "latency": f"`-n {cfg.lat_iters}`, t_typical; ib_atomic_lat: fetch-and-add, 8 B",
        "rxe": f"rdma_rxe on a second virtio-net NIC per guest, MTU {DATA_MTU} (IB MTU 4096), "
               "joined by a unix stream socket between the same two QEMU processes as the pib "
               "link (`pibvm up --data-net`, QEMU `-netdev stream`)",
        "ceiling": f"tools/hostlimits.c `link PAYLOAD FRAME {cfg.host_seconds} {cfg.sndbuf}` "
                   "(`--both` for `-b`), one sample right after each pib bandwidth run, guests "
                   "up: a socketpair between two processes, each one thread polling its end; "
                   f"the send buffer the device asks for ({cfg.sndbuf} B, SO_SNDBUFFORCE, else "
                   "SO_SNDBUF) on both ends; non-blocking writev of 64 frames of the link's "
                   "size for the message size (4-byte header, LRH, BTH, the opcode's "
                   "extension header on one-packet messages, up to 4 KiB of payload), POLLOUT "
                   "when full; 256 KiB reads; payload bytes counted",
        "order": "each measurement pib, then its ceiling sample, then rxe, so changes in the "
                 "host's load hit all alike; the absolute figures under TCG follow that load "
                 "(see the load averages), the ratios much less",
        "mpi": "tests/mpi/pib_mpi_test.c (its data checked) in two full Debian guests (pibvm up "
               "--image debian --data-net), started by `mpirun --host node0,node1 -np 2` from "
               "node0 over ssh; pib: UCX on pib_0 only, rxe: UCX on rxe0 only (the data "
               "network), tcp: Open MPI's TCP transport on the management network; 8 B: half "
               "a round trip over 200 round trips, 1 MiB: 20 round trips",
        "fio seconds": str(cfg.fio_seconds),
        "runs": str(cfg.runs),
    }
