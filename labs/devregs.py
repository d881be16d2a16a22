#!/usr/bin/env python3
"""devregs.py: what the pib HCA of a running guest really holds, read from outside the guest.

    devregs.py QMP_SOCKET regs              every BAR0 register, one "NAME 0xVALUE" a line
    devregs.py QMP_SOCKET qom-set PROP JSON a QOM property of the HCA (/machine/peripheral/pib0)
    devregs.py QMP_SOCKET qom-get PROP
    devregs.py QMP_SOCKET trace on|off PATTERN
                                            QEMU's trace points matching PATTERN (pib_qp_modify*),
                                            written to QEMU's standard error (pibvm: nodeN.qemu.log)

The grader (labs/grade.sh) compares what the learner's driver printed with these values.  The
registers are read through QEMU's monitor (`xp`, a read of guest-physical memory, which reaches
BAR0 as one 32-bit MMIO read per register, from no CPU): no guest driver takes part, and none of the registers
read has a side effect.  BAR0's address is the one the guest's firmware assigned (query-pci).
The register names and their order come from PIB_REGS in include/pib_hw.h, one 32-bit register
each, in address order, as the header's static assert guarantees."""
import json
import os
import re
import sys

TOP = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..")
sys.path.insert(0, os.path.join(TOP, "tools"))
from pibvmlib.qmp import Qmp  # noqa: E402  (the one QMP client, pibvm's)

HW_H = os.path.join(TOP, "include", "pib_hw.h")
DEV = "/machine/peripheral/pib0"


def reg_names():
    text = open(HW_H).read()
    block = re.search(r"#define PIB_REGS\(X\)(.*?)\n\n", text, re.S).group(1)
    return re.findall(r"X\((\w+),", block)


def bar0(q):
    for bus in q.cmd("query-pci"):
        for d in bus["devices"]:
            if d["id"]["vendor"] == 0x1af4 and d["id"]["device"] == 0x10f0:
                for r in d["regions"]:
                    if r["bar"] == 0:
                        return r["address"]
    sys.exit("devregs: no pib HCA with a BAR0 on the guest's PCI bus")


def main():
    try:
        run(Qmp(sys.argv[1], timeout=20), sys.argv[2])
    except OSError as e:                    # QmpError, or no QEMU there
        sys.exit(f"devregs: {e}")


def run(q, what):
    if what == "regs":
        base = bar0(q)
        # One register per xp: a longer dump is read in 16-byte lines, an access size BAR0
        # refuses (and counts as the guest's error).
        for i, name in enumerate(reg_names()):
            out = q.cmd("human-monitor-command",
                        {"command-line": f"xp /1wx {base + 4 * i:#x}"})
            m = re.match(r"^[0-9a-f]+: (0x[0-9a-f]{8})\s*$", out.strip())
            if not m:
                sys.exit(f"devregs: xp of {name} said: {out!r}")
            print(name, m.group(1))
    elif what == "qom-set":
        q.cmd("qom-set", {"path": DEV, "property": sys.argv[3],
                          "value": json.loads(sys.argv[4])})
    elif what == "qom-get":
        print(q.cmd("qom-get", {"path": DEV, "property": sys.argv[3]}))
    elif what == "trace":
        q.cmd("trace-event-set-state", {"name": sys.argv[4], "enable": sys.argv[3] == "on"})
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
