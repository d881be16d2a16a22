"""The bandwidth chart of a results file: MB/s against message size, one panel per bandwidth test,
pib, Soft-RoCE and the link's ceiling (matplotlib, from Debian's python3-matplotlib)."""

import os
import sys

from .config import BENCH, BW_TESTS, say
from .results import Figures, load_results, size_name


def ensure_matplotlib():
    """matplotlib comes from Debian (python3-matplotlib), i.e. for /usr/bin/python3; a python3
    found first on PATH (pyenv, a venv) may not see it, so run under Debian's instead."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        deb = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(deb) and os.access(deb, os.X_OK) \
                and not os.environ.get("PIB_BENCH_REEXEC"):
            os.environ["PIB_BENCH_REEXEC"] = "1"
            os.execv(deb, [deb, BENCH, *sys.argv[1:]])


def write_chart(csv_path, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("no matplotlib (python3-matplotlib, mk/deps.sh): no chart")
        return False
    meta, rows = load_results(csv_path)
    fig_ = Figures(rows)
    if not any(fig_.median(k, "pib") or fig_.median(k, "rxe") for k in fig_.keys
               if k[0] in BW_TESTS):
        say("no bandwidth figures in this run (--mpi-only?): no chart")
        return False
    fig, axes = plt.subplots(1, len(BW_TESTS), figsize=(5 * len(BW_TESTS), 4.5), sharey=True)
    for ax, test in zip(axes, BW_TESTS):
        sizes = sorted({s for t, s in fig_.keys if t == test})
        for tr, style, label in (("pib", "o-", "pib"), ("rxe", "s--", "Soft-RoCE (rxe)"),
                                 ("ceiling", ":", "link ceiling (host)")):
            pts = [(s, fig_.median((test, s), tr)) for s in sizes
                   if fig_.median((test, s), tr)]
            if pts:
                ax.plot(*zip(*pts), style, label=label)
            else:
                ax.plot([], [], style, label=f"{label} (no data)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_name(s).replace(" ", "") for s in sizes], rotation=45)
        ax.set_title(test)
        ax.set_xlabel("message size")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("MB/s (2^20 bytes/s)")
    axes[0].legend(loc="lower right", fontsize="small")
    fig.suptitle(f"pib vs Soft-RoCE under QEMU TCG, median of {meta.get('runs', '?')} "
                 f"({os.path.basename(csv_path)})")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return True
