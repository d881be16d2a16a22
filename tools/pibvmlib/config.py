"""Where pibvm's files are, its limits and timeouts, its messages, and the run directory's state
and pidfiles.  Everything here is read from the environment once, at import."""

import json
import os
import time

from toolmsg import speaker  # tools/, on the path as the package itself is

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
PIBVM = os.path.join(TOP, "tools", "pibvm")  # the entry point, re-run as the hub and relay daemons
STACK = os.environ.get("PIB_STACK") or "bookworm"
BUILD = os.path.join(TOP, "build", *([] if STACK == "bookworm" else [STACK]))
# The daemons (mgmt.py) are told their run directory on the command line and set RUN from it:
# read it as config.RUN, not through a copy of the name.
RUN = os.path.abspath(os.environ.get("PIBVM_DIR", os.path.join(BUILD, "vm")))
QEMU = os.environ.get("PIBVM_QEMU", os.path.join(BUILD, "qemu-system-x86_64"))
KERNEL = os.path.join(BUILD, "vmlinuz")
INITRD = os.path.join(BUILD, "initramfs.cpio.gz")
FIRMWARE = ["-L", "/usr/share/qemu", "-L", "/usr/share/seabios"]

BOOT_TIMEOUT = 180      # seconds for every node's guest agent to answer
REQUEST_TIMEOUT = 60    # seconds for one QGA request/response under TCG load
QUIT_TIMEOUT = 10       # seconds between QMP quit and SIGKILL
ACTIVE_TIMEOUT = 120    # seconds for the subnet manager to bring every cabled port ACTIVE


say, die = speaker("pibvm")     # "pibvm: msg" on stderr; die(msg, code=1) exits


def path(name):
    return os.path.join(RUN, name)


# ---------------------------------------------------------------------------------------------
# Run directory state

def load_state():
    try:
        with open(path("state.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save_state(state):
    tmp = path("state.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path("state.json"))


def live_pid(pidfile):
    """The pid in PIDFILE if that process is alive and is ours (its command line names RUN)."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().split()[0])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, ValueError, IndexError):
        return None
    return pid if RUN.encode() in cmdline and alive(pid) else None


def node_pid(n):
    return live_pid(path(f"node{n}.pid"))


def hub_pid():
    return live_pid(path("hub.pid"))


def switch_pid(s):
    return live_pid(path(f"switch{s}.pid"))


def alive(pid):
    """True while PID runs (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False
