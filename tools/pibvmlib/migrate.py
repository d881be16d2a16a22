"""`pibvm migrate N`: move a running node into a fresh QEMU process, QEMU's own live migration,
with its pib-hca's queue pairs open (docs/explanation/migration.md).

How, on one host.  The run directory's sockets are paths, and QEMU unlinks a listening socket's
path and its pidfile, by the names it created them with, when it quits; so the new QEMU binds
the same names plus a suffix of its own (".mig<old pid>", never one an older QEMU used) until
the old one is gone:

  1. start the new QEMU with the node's command line, `-incoming unix:node<N>.migrate`, its
     listening sockets (QMP, console, guest agent, the hub's port, a cable it serves) and its
     pidfile under their suffixed names;
  2. `migrate` over the old QEMU's QMP, and wait for "completed" (or "failed": the new QEMU is
     killed, the old one runs on as if nothing happened);
  3. quit the old QEMU, then give the new one's sockets and pidfile their names; a new
     guest-agent relay connects to it (the old relay ended with the old QEMU).

The cable: a node that dials its peer (or its switch port) dials from the new QEMU at once; the
peer's listening socket takes that connection when the old one closes.  A node that serves its
cable (the lower-numbered one of a pair) listens from the new QEMU, and its peer is told to
dial it at once (redial_peer).  Either way the two ports know each other again on the new cable
and stay ACTIVE (include/pib_link.h, "Moving")."""

import json
import os
import subprocess
import time

from .agent import qga_ready
from .config import die, node_pid, path, say, wait_gone
from .mgmt import start_relay
from .qemu import link_socket, qemu_args
from .qmp import Qmp
from .topology import peer_of, switched


def wait_migration(qmp, timeout):
    """Poll query-migrate until it ends; its last answer.  The timeout is a hang guard."""
    deadline = time.monotonic() + timeout
    while True:
        r = qmp.cmd("query-migrate")
        if r.get("status") in ("completed", "failed", "cancelled"):
            return r
        if time.monotonic() > deadline:
            qmp.cmd("migrate_cancel")
            die(f"migration still {r.get('status')} after {timeout} s: cancelled")
        time.sleep(0.05)


def redial_peer(n, state):
    """If node N served its cable, its peer's QEMU would redial within a second (reconnect);
    have it dial the new QEMU now instead: QMP chardev-change gives the peer's pib-hca a new
    client chardev to the same path, which connects at once.  The peer's link holds its port
    for the moved one meanwhile (include/pib_link.h, "Moving"), whose RC QPs wait only half a
    second (the default ACK timeout and retries) for what was lost in the gap."""
    peer = peer_of(n, state["nodes"])
    if switched(state) or peer is None or n > peer or not node_pid(peer):
        return
    try:
        q = Qmp(path(f"node{peer}.qmp"))
        # The option is the peer QEMU's to understand, which may be another version than the
        # destination's (a move between the stacks' QEMUs, PIBVM_QEMU).
        v = q.cmd("query-version")["qemu"]
        redial = ({"reconnect-ms": 1000} if (v["major"], v["minor"]) >= (9, 2) else
                  {"reconnect": 1})
        backend = {"type": "socket", "data": {
            "addr": {"type": "unix", "data": {"path": link_socket(n, peer)}},
            "server": False, **redial}}
        q.cmd("chardev-change", {"id": "pib0", "backend": backend})
        q.close()
    except OSError as e:
        say(f"node{peer}: could not redial its cable at once ({e}); it redials within a second")


def cmd_migrate(args, state):
    """Move node N, running, into a new QEMU process on this host (QEMU's live migration; the
    guest keeps running, its pib queue pairs open).  Prints the downtime QEMU measured."""
    n = args.node
    old_pid = node_pid(n)
    if not old_pid:
        die(f"node{n} is not running")
    if state.get("data_net"):
        die("migrate: a run with --data-net cannot move a node (QEMU 7.2's stream netdev "
            "does not redial)")
    if state.get("link_listen") or state.get("link_connect"):
        die("migrate: a node with a TCP cable (--link-listen/--link-connect) is not supported yet")
    # While this exists, `pibvm exec` on node N waits for the agent instead of failing.
    moving = path(f"node{n}.moving")
    open(moving, "w").close()
    try:
        return move(n, state, old_pid, args.timeout)
    finally:
        os.unlink(moving)


def move(n, state, old_pid, timeout):
    old = Qmp(path(f"node{n}.qmp"))
    incoming = path(f"node{n}.migrate")
    # What the new QEMU binds, under a name of its own until the old one is gone.
    sfx = f".mig{old_pid}"
    own = [path(f"node{n}.{x}") for x in ("pid", "qmp", "console", "qga", "net")]
    peer = peer_of(n, state["nodes"])
    if not switched(state) and peer is not None and n < peer:
        own.append(link_socket(n, peer))
    for f in [incoming] + [o + sfx for o in own]:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
    try:                        # the old QEMU's own log (-d guest_errors), kept aside
        os.replace(path(f"node{n}.qemu.log"), path(f"node{n}.qemu.log.old"))
    except FileNotFoundError:
        pass
    argv = qemu_args(n, state, sfx) + ["-incoming", f"unix:{incoming}"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"node{n}: the destination QEMU failed to start (exit {r.returncode}):\n"
            f"{r.stderr.strip()}")
    with open(path(f"node{n}.pid") + sfx) as f:
        new_pid = int(f.read().split()[0])
    say(f"node{n}: moving from QEMU pid {old_pid} to pid {new_pid}")
    t0 = time.monotonic()
    old.cmd("migrate", {"uri": f"unix:{incoming}"})
    r = wait_migration(old, timeout)
    if r["status"] != "completed":
        os.kill(new_pid, 9)
        wait_gone(new_pid, 10)
        for o in own:
            try:
                os.unlink(o + sfx)
            except FileNotFoundError:
                pass
        die(f"node{n}: migration {r['status']}: {r.get('error-desc', '')} (node{n} runs on in "
            f"pid {old_pid}; see node{n}.qemu.log for the destination's error)")
    took = time.monotonic() - t0
    try:
        old.cmd("quit")
    except OSError:
        pass                    # it quit before answering
    old.close()
    if not wait_gone(old_pid, 30):
        die(f"node{n}: the old QEMU (pid {old_pid}) did not quit")
    for o in own:
        os.replace(o + sfx, o)
    redial_peer(n, state)
    start_relay(n)
    # `pibvm exec` on node N forgives a missing agent only while node<N>.moving exists: keep it
    # until the moved guest's agent answers.
    if not qga_ready(n, 60):
        say(f"node{n}: its guest agent does not answer after the move")
    ram = r.get("ram", {})
    say(f"node{n}: moved in {took:.2f} s; downtime {r.get('downtime', '?')} ms, "
        f"{ram.get('transferred', 0) >> 20} MiB sent")
    print(json.dumps({"node": n, "downtime_ms": r.get("downtime"),
                      "total_ms": r.get("total-time"), "setup_ms": r.get("setup-time"),
                      "transferred": ram.get("transferred")}))
    return 0
