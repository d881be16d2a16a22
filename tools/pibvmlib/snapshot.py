"""`pibvm snapshot save NAME` and `pibvm snapshot load NAME`: the whole fabric of a run saved at
one moment, and put back to it, any number of times (docs/explanation/migration.md).

A snapshot is a directory, <run>/snapshots/NAME/, with one QEMU migration stream per node
(node<N>.vmstate: the machine, its RAM and its pib-hca, QPs open), one per switch
(switch<S>.vmstate: its pib-switch, the tables the SM set and its ports' state) and the run's
state.json.

save: every node is stopped, then every switch (QMP `stop`, one after the other: the stopped
      ones' links hold what the others still send, a stopped switch forwards nothing), each
      stopped machine is migrated into its file (`exec:cat`), then all run on (`cont`).  A
      node that runs on where it was withdraws the notice "I may move" its device gave its
      peer when the migration started.
load: every switch's and node's QEMU is replaced by a new one that loads its file
      (`-incoming exec:cat`, `-S`: it stays stopped once loaded), the switches first, whose
      ports the nodes dial; once all are loaded, all run at once.  Each loaded port holds its
      state until the same peer greets it on the new cable, with the tokens both saved
      (include/pib_link.h, "Moving"), so the ports stay ACTIVE, the SM sees no change, and RC
      QPs resend what the snapshot's moment had in flight (what a switch had queued is lost
      with it, as a switch's buffers are).  The guests' agents come back as they were: a
      command they ran at the save runs again from there.

Disks: a stream holds a machine's RAM and devices, not its disk, which goes on changing after
the save.  So the save also copies every node's disk files (the full image's root overlay
node<N>.root.qcow2, a --disk's node<N>.disk) into the snapshot while every machine is stopped
(QEMU's `stop` has drained and flushed them), and the load copies them back before the new
QEMUs start: the disks are put back to the same moment as the RAM.

Not yet: a --data-net run, TCP cables (a cable to another host's node, whose run is not in
the snapshot)."""

import json
import os
import shutil
import subprocess
import time

from .agent import qga_ready
from .commands import start_switch
from .config import die, node_pid, path, say, switch_pid, wait_gone
from .fullimage import root_disk
from .mgmt import start_hub, start_relay
from .migrate import wait_migration
from .qemu import disk_path, qemu_args
from .qmp import Qmp
from .topology import switch_count

# What makes the machines: a stream loads only into the machine it was saved from.
MACHINE_KEYS = ("nodes", "mem", "accel", "pib", "initrd", "overlay", "image", "node_base",
                "sm", "static_lids", "no_driver", "switch", "switches", "disks")


def snapshot_dir(name):
    if not name or "/" in name or name.startswith("."):
        die(f"snapshot: '{name}' is not a snapshot name (no '/', not starting with '.')")
    return path(os.path.join("snapshots", name))


def fabric_nodes(state, what):
    """The run's nodes, all running (and its switches); a fabric pibvm cannot snapshot is
    refused."""
    if state.get("data_net"):
        die(f"snapshot {what}: a run with --data-net cannot be saved (QEMU 7.2's stream netdev "
            "does not redial)")
    if state.get("link_listen") or state.get("link_connect"):
        die(f"snapshot {what}: a node with a TCP cable is not supported yet")
    nodes = list(range(state["nodes"]))
    down = [n for n in nodes if not node_pid(n)]
    if down and what == "save":
        die(f"snapshot save: node{down[0]} is not running")
    down = [s for s in range(switch_count(state)) if not switch_pid(s)]
    if down and what == "save":
        die(f"snapshot save: switch{down[0]} is not running (`pibvm up --node sw{down[0]}` "
            "restarts it)")
    return nodes


def disk_files(state):
    """The disk files of the run's nodes (their names in the run directory): the full image's
    root overlays and the --disk disks.  A snapshot holds a copy of each."""
    files = []
    for n in range(state["nodes"]):
        if state.get("image") == "debian":
            files.append(os.path.basename(root_disk(n)))
        if state.get("disks", {}).get(str(n)):
            files.append(os.path.basename(disk_path(n)))
    return files


def copy_disk(src, dst):
    """A disk file's copy, its holes kept (a --disk is mostly zeros)."""
    r = subprocess.run(["cp", "--sparse=always", "--reflink=auto", src, dst],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"snapshot: copying {src} to {dst} failed: {r.stderr.strip()}")


def machines(state):
    """Every machine of the fabric, as (name, QMP socket): the nodes, then the switches."""
    return ([(f"node{n}", path(f"node{n}.qmp")) for n in range(state["nodes"])] +
            [(f"switch{s}", path(f"switch{s}.qmp")) for s in range(switch_count(state))])


def machine_count(state):
    """'2 nodes', '2 nodes and 1 switch': what a snapshot holds, for messages."""
    n, k = state["nodes"], switch_count(state)
    what = f"{n} node{'s' * (n != 1)}"
    return what + (f" and {k} switch{'es' * (k != 1)}" if k else "")


def cmd_snapshot_save(args, state):
    """Stop every node and switch, save each into <run>/snapshots/NAME/, and let them run on."""
    nodes = fabric_nodes(state, "save")
    d = snapshot_dir(args.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    qmps = {name: Qmp(sock) for name, sock in machines(state)}
    t0 = time.monotonic()
    for q in qmps.values():
        q.cmd("stop")
    try:
        for name, q in qmps.items():
            f = os.path.join(d, f"{name}.vmstate")
            q.cmd("migrate", {"uri": f"exec:cat > '{f}'"})
            r = wait_migration(q, args.timeout)
            if r["status"] != "completed":
                die(f"snapshot save: {name}: {r['status']}: {r.get('error-desc', '')}")
            size = os.path.getsize(f)
            say(f"{name}: saved, " + (f"{size >> 20} MiB" if size >= 1 << 20 else
                                      f"{size >> 10} KiB"))
        for f in disk_files(state):     # (still stopped: the disks at the streams' moment)
            copy_disk(path(f), os.path.join(d, f))
            say(f"{f}: copied")
    finally:
        for q in qmps.values():
            q.cmd("cont")
            q.close()
    with open(path("state.json")) as src, open(os.path.join(d, "state.json"), "w") as dst:
        dst.write(src.read())
    say(f"snapshot {args.name}: {machine_count(state)} stopped for "
        f"{time.monotonic() - t0:.1f} s, saved in {d}")
    return 0


def cmd_snapshot_load(args, state):
    """Put every node and switch back to the moment snapshot NAME was taken."""
    nodes = fabric_nodes(state, "load")
    switches = range(switch_count(state))
    d = snapshot_dir(args.name)
    try:
        with open(os.path.join(d, "state.json")) as f:
            saved = json.load(f)
    except FileNotFoundError:
        die(f"snapshot load: no snapshot '{args.name}' in {path('snapshots')}")
    # The machines must be the ones the streams were saved from.
    for k in MACHINE_KEYS:
        if saved.get(k) != state.get(k):
            die(f"snapshot load: the run's {k} ({state.get(k)}) is not the snapshot's "
                f"({saved.get(k)}): `pibvm up` a run like the one saved")
    for name, _ in machines(state):
        if not os.path.exists(os.path.join(d, f"{name}.vmstate")):
            die(f"snapshot load: {d} has no stream for {name}")
    for f in disk_files(state):
        if not os.path.exists(os.path.join(d, f)):
            die(f"snapshot load: {d} has no copy of {f}")
    # The running machines go (as `pibvm kill` would end them: what they did since is dropped).
    for name, pid in ([(f"node{n}", node_pid(n)) for n in nodes] +
                      [(f"switch{s}", switch_pid(s)) for s in switches]):
        if pid:
            os.kill(pid, 9)
            if not wait_gone(pid, 30):
                die(f"{name}: QEMU pid {pid} did not end")
    t0 = time.monotonic()
    for f in disk_files(state):         # the disks back to the snapshot's moment
        copy_disk(os.path.join(d, f), path(f))
    # The switches first, in order: their listening ports exist when the nodes (and the next
    # switch) dial them.
    for s in switches:
        start_switch(s, state, ["-S", "-incoming",
                                f"exec:cat '{os.path.join(d, f'switch{s}.vmstate')}'"])
    start_hub(len(nodes))       # (a run brought down since keeps its state: the hub went)
    for n in nodes:
        for f in (f"node{n}.pid", f"node{n}.agent"):
            try:
                os.unlink(path(f))
            except FileNotFoundError:
                pass
        f = os.path.join(d, f"node{n}.vmstate")
        argv = qemu_args(n, state) + ["-S", "-incoming", f"exec:cat '{f}'"]
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"node{n}: QEMU failed to start (exit {r.returncode}):\n{r.stderr.strip()}")
    qmps = {name: Qmp(sock) for name, sock in machines(state)}
    for name, q in qmps.items():
        r = wait_migration(q, args.timeout)
        if r["status"] != "completed":
            die(f"snapshot load: {name}: {r['status']}: {r.get('error-desc', '')} "
                f"(see {name}.qemu.log)")
    for q in qmps.values():
        q.cmd("cont")
        q.close()
    for n in nodes:
        start_relay(n)
        if not qga_ready(n, 60):
            say(f"node{n}: its guest agent does not answer after the load")
    say(f"snapshot {args.name}: {machine_count(state)} loaded and running in "
        f"{time.monotonic() - t0:.1f} s")
    return 0
