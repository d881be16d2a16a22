"""The results: every run of every figure as a Record, the results file it is written to and read
back from (the file to commit, named for the date, the host and the stack), the Figures of a
file (medians, run by run), and the project's goals checked against them.  How a figure, a size
and a test are written in the tables is here too, so that every output writes them alike."""

import csv
import datetime
import os
import platform
import statistics

from .config import BW_VARIANTS, MMSGS, RESULTS, STACK, USEC, unit_of


def fmt(v, unit=None):
    """A figure for the CSV and the tables: 3 significant digits' worth, or empty."""
    if v is None:
        return ""
    if unit == MMSGS or abs(v) < 1:
        return f"{v:.4g}"
    return f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"


def pct(v):
    return "" if v is None else f"{v:.0f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def rfmt(v):
    return "" if v is None else f"{v:.3g}"


def median(values):
    return statistics.median(values) if values else None


def size_name(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def test_name(test):
    """A test as the tables show it: the variants as the perftest options they add."""
    if test in BW_VARIANTS:
        return "ib_write_bw " + " ".join(BW_VARIANTS[test])
    if test.endswith("_msgrate"):
        return test[:-len("_msgrate")] + " rate"
    return test


# ---------------------------------------------------------------------------------------------
# The record and the results file

class Record:
    """Every measurement, one row each, in the order they were made: the results file."""
    FIELDS = ("test", "size", "transport", "run", "value", "unit", "host_idle", "status", "note")

    def __init__(self):
        self.rows = []

    def add(self, test, size, transport, run, value, idle, status, note=""):
        self.rows.append({"test": test, "size": size, "transport": transport, "run": run,
                          "value": value, "unit": unit_of(test), "host_idle": idle,
                          "status": status, "note": " ".join(note.split())})

    def ok(self, test, size, transport, run, value, idle):
        self.add(test, size, transport, run, value, idle, "ok")

    def fail(self, test, size, transport, run, reason):
        self.add(test, size, transport, run, None, None, "failed", reason)

    def skip(self, test, size, transport, run, reason):
        self.add(test, size, transport, run, None, None, "skipped", reason)


def results_path():
    """bench/results/<date>-<host>[-<stack>].csv, the first of -2, -3, ... not taken yet."""
    day = datetime.date.today().isoformat()
    base = f"{day}-{platform.node() or 'host'}" + ("" if STACK == "bookworm" else f"-{STACK}")
    path, n = os.path.join(RESULTS, base + ".csv"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(RESULTS, f"{base}-{n}.csv")
    return path


def write_results(path, meta, rec):
    """The results file: "# key: value" lines, then the CSV of every run."""
    with open(path, "w", newline="") as f:
        for k, v in meta.items():
            f.write(f"# {k}: {v}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(Record.FIELDS)
        for r in rec.rows:
            w.writerow([r["test"], r["size"], r["transport"], r["run"],
                        fmt(r["value"], r["unit"]), r["unit"], pct(r["host_idle"]),
                        r["status"], r["note"]])


def load_results(path):
    """(meta, rows) of a results file written by write_results."""
    meta, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("# "):
                k, _, v = line[2:].rstrip("\n").partition(": ")
                meta[k] = v
            else:
                lines.append(line)
    rows = []
    for r in csv.DictReader(lines):
        r["size"], r["run"] = int(r["size"]), int(r["run"])
        r["value"] = float(r["value"]) if r["value"] else None
        r["host_idle"] = float(r["host_idle"]) if r["host_idle"] else None
        rows.append(r)
    return meta, rows


# ---------------------------------------------------------------------------------------------
# The figures of a results file, and the goals

class Figures:
    """The figures of a results file: every run's value per (test, size) and transport, in
    run order, and the medians the tables show."""

    def __init__(self, rows):
        self.runs, self.idle, self.keys = {}, {}, []
        for r in rows:
            key = (r["test"], r["size"])
            if key not in self.runs:
                self.keys.append(key)
                self.runs[key], self.idle[key] = {}, {}
            if r["status"] == "ok":
                self.runs[key].setdefault(r["transport"], []).append((r["run"], r["value"]))
                if r["host_idle"] is not None:
                    self.idle[key].setdefault(r["transport"], []).append(r["host_idle"])
        rank = {USEC: 0, MMSGS: 1}
        self.keys.sort(key=lambda k: (k[0].startswith("host_"), k[0].startswith("nvme_"),
                                      k[0] in BW_VARIANTS, rank.get(unit_of(k[0]), 2)))

    def values(self, key, transport):
        return [v for _, v in self.runs.get(key, {}).get(transport, [])]

    def median(self, key, transport):
        return median(self.values(key, transport))

    def idle_median(self, key, transport):
        return median(self.idle.get(key, {}).get(transport, []))

    def paired_shares(self, key):
        """pib over the ceiling, run by run: each pib run against the sample taken right
        after it."""
        ceil = dict(self.runs.get(key, {}).get("ceiling", []))
        return [v / ceil[run] for run, v in self.runs.get(key, {}).get("pib", [])
                if ceil.get(run)]


def goal_checks(fig):
    """The project's goals: (text, met: True/False/None when a figure is missing, figures)."""
    checks = []

    def check(text, key, op, factor, other):
        a, b = fig.median(key, "pib"), fig.median(key, other)
        unit = unit_of(key[0])
        name = {"rxe": "rxe", "ceiling": "link ceiling"}[other]
        figures = f"pib {fmt(a, unit) or 'n/a'} {unit}, {name} {fmt(b, unit) or 'n/a'} {unit}"
        if a is None or not b:
            checks.append((text, None, figures + " (a figure is missing)"))
            return
        met = a >= factor * b if op == ">=" else a <= factor * b
        figures += f": pib/{other} = {a / b:.3g}"
        if other == "ceiling":
            shares = fig.paired_shares(key)
            if shares:
                figures += "; run by run " + ", ".join(f"{s:.3g}" for s in shares)
        checks.append((text, met, figures))

    check("pib ib_write_bw at 64 KiB >= 10x rxe", ("ib_write_bw", 65536), ">=", 10, "rxe")
    check("pib ib_send_lat at 2 B <= 0.2x rxe", ("ib_send_lat", 2), "<=", 0.2, "rxe")
    check("pib ib_write_bw at 1 MiB >= 50% of the link's ceiling", ("ib_write_bw", 1048576),
          ">=", 0.5, "ceiling")
    # Past the socket (issue 39): message rate and the latencies of READ and atomics.
    check("pib ib_send_bw message rate at 64 B >= 20x rxe", ("ib_send_bw_msgrate", 64), ">=",
          20, "rxe")
    check("pib ib_read_lat at 2 B <= 0.1x rxe", ("ib_read_lat", 2), "<=", 0.1, "rxe")
    check("pib ib_atomic_lat at 8 B <= 0.1x rxe", ("ib_atomic_lat", 8), "<=", 0.1, "rxe")
    return checks


MARK = {True: "met", False: "missed", None: "not measured"}
