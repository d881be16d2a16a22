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
  3. once the old QEMU's device has written what it had ready for its cables (its MOVE
     notices among it: drain_old), quit it, then give the new one's sockets and pidfile their
     names; a new guest-agent relay connects to it (the old relay ended with the old QEMU).

The cable: a node that dials its peer (or its switch port, or a TCP cable's far end,
--link-connect) dials from the new QEMU at once; the peer's listening socket takes that
connection when the old one closes.  A node that serves its
cable (the lower-numbered one of a pair) listens from the new QEMU, and its peer is told to
dial it at once (redial).  Either way the two ports know each other again on the new cable
and stay ACTIVE (include/pib_link.h, "Moving").

To another host (`--to HOST:PORT`): the QEMU that `pibvm up --nodes 1 --incoming PORT`
started there waits for the stream; this QEMU migrates into it over TCP and quits once it is
done (move_to_host).  No names to swap: the destination has its own run directory.  Only a
node whose cable can follow goes: one that dials over TCP (--link-connect) dials from there.

`pibvm migrate swS` moves switch S the same way: its ports that listen (to its nodes, to switch
S+1) listen from the new QEMU, and each peer is told to dial it at once; its port to switch S-1
dials from the new QEMU.  The switch tells its peers it may move when the migration starts, so
their ports hold their state while the cables are down (pib-switch-vmstate.c)."""

import json
import os
import subprocess
import time

from .agent import qga_ready
from .commands import node_arg, switch_arg
from .config import die, node_pid, path, save_state, say, switch_pid, wait_gone
from .mgmt import start_relay
from .qemu import link_socket, qemu_args, switch_args, switch_listens, switch_socket
from .qmp import Qmp
from .topology import layout, peer_of, switch_ports, switched


def wait_migration(qmp, timeout):
    """Poll query-migrate until it ends; its last answer.  The timeout is a hang guard: a
    migration still running then is cancelled, and its answer is the cancellation's (the
    source runs on; the caller removes the destination)."""
    deadline = time.monotonic() + timeout
    cancelled = False
    while True:
        r = qmp.cmd("query-migrate")
        if r.get("status") in ("completed", "failed", "cancelled"):
            if cancelled and r["status"] == "cancelled":
                r["error-desc"] = f"not completed after {timeout} s"
            return r
        if not cancelled and time.monotonic() > deadline:
            say(f"migration still {r.get('status')} after {timeout} s: cancelling it")
            qmp.cmd("migrate_cancel")
            cancelled = True
            deadline = time.monotonic() + 60
        elif cancelled and time.monotonic() > deadline:
            die(f"migration still {r.get('status')} 60 s after migrate_cancel")
        time.sleep(0.05)


def redial(machine, chardev, sock):
    """Have MACHINE's chardev CHARDEV, a client of the moved machine's listening socket SOCK,
    dial the new QEMU now rather than within a second (its reconnect): QMP chardev-change gives
    the device a new client chardev to the same path, which connects at once.  The peer's link
    holds its port for the moved one meanwhile (include/pib_link.h, "Moving"), whose RC QPs
    wait only half a second (the default ACK timeout and retries) for what was lost in the
    gap."""
    try:
        q = Qmp(path(f"{machine}.qmp"))
        # The option is the peer QEMU's to understand, which may be another version than the
        # destination's (a move between the stacks' QEMUs, PIBVM_QEMU).
        v = q.cmd("query-version")["qemu"]
        again = ({"reconnect-ms": 1000} if (v["major"], v["minor"]) >= (9, 2) else
                 {"reconnect": 1})
        backend = {"type": "socket", "data": {
            "addr": {"type": "unix", "data": {"path": sock}}, "server": False, **again}}
        q.cmd("chardev-change", {"id": chardev, "backend": backend})
        q.close()
    except OSError as e:
        say(f"{machine}: could not redial its cable at once ({e}); it redials within a second")


def redial_peer(n, state):
    """If node N served its cable, its peer dials the new QEMU now (redial)."""
    peer = peer_of(n, state["nodes"])
    if switched(state) or peer is None or n > peer or not node_pid(peer):
        return
    redial(f"node{peer}", "pib0", link_socket(n, peer))


def redial_switch_peers(s, state):
    """Every peer of switch S that dials one of its listening ports dials the new QEMU now: its
    nodes, and switch S+1 (redial)."""
    for p, peer in switch_ports(s, *layout(state)).items():
        if not switch_listens(s, peer):
            continue
        if peer[0] == "node":
            if node_pid(peer[1]):
                redial(f"node{peer[1]}", "pib0", switch_socket(s, p))
        elif switch_pid(peer[1]):
            redial(f"switch{peer[1]}", f"p{peer[2]}", switch_socket(s, p))


def refuse(state):
    """The runs whose machines cannot move."""
    if state.get("data_net"):
        die("migrate: a run with --data-net cannot move a node (QEMU 7.2's stream netdev "
            "does not redial)")
    if state.get("link_listen"):
        # The new QEMU would have to listen on the port while the old one still does: it
        # cannot bind it.  (A node that dials its TCP cable, --link-connect, moves: it dials
        # from the new QEMU, as a node that dials its unix cable does.)
        die("migrate: a node whose TCP cable listens (--link-listen) cannot move on this host: "
            "its new QEMU could not bind the port while the old one listens on it")


def cmd_migrate(args, state):
    """Move node N, or switch S (swS), running, into a new QEMU process on this host (QEMU's
    live migration; a guest keeps running, its pib queue pairs open, and a switch forwarding);
    with --to HOST:PORT, node N into the QEMU another host's `pibvm up --incoming PORT` started.
    Prints the downtime QEMU measured."""
    kind, n = args.node
    if args.to:
        if kind == "switch":
            die("migrate --to: a node only (a switch's ports are this host's sockets)")
        return move_to_host(n, state, args.to, args.timeout)
    if kind == "switch":
        switch_arg(n, state)
        refuse(state)
        old_pid = switch_pid(n)
        if not old_pid:
            die(f"switch sw{n} is not running")
        return move_switch(n, state, old_pid, args.timeout)
    node_arg(n)
    old_pid = node_pid(n)
    if not old_pid:
        die(f"node{n} is not running")
    refuse(state)
    # While this exists, `pibvm exec` on node N waits for the agent instead of failing.
    moving = path(f"node{n}.moving")
    open(moving, "w").close()
    try:
        return move(n, state, old_pid, args.timeout)
    finally:
        os.unlink(moving)


def drain_old(old, device, prop, name):
    """The migrated machine is stopped, but its device still writes the frames it had ready for
    its cables: the MOVE notice that tells each peer to hold its port may wait behind data on a
    busy one.  Quit it only once they are out (the device's PROP is 0), or it would take them
    along and the peers would see their cables close unannounced: a link down.  Looked at
    every 10 ms; 10 s is a hang guard (a peer that stopped reading)."""
    deadline = time.monotonic() + 10
    while True:
        r = old.cmd("qom-get", {"path": f"/machine/peripheral/{device}", "property": prop})
        if r == 0:
            return
        if time.monotonic() > deadline:
            say(f"{name}: {r} frame(s) still unwritten to its cables after 10 s; quitting it")
            return
        time.sleep(0.01)


def return_path(qmp, on):
    """QEMU's return-path migration capability on the source QMP, on or off."""
    qmp.cmd("migrate-set-capabilities",
            {"capabilities": [{"capability": "return-path", "state": on}]})


def run_migration(old, uri, timeout):
    """Migrate the QEMU whose QMP is OLD to URI; QEMU's last query-migrate answer.  The return
    path: the destination tells the source whether it loaded the stream.  Without it a
    destination that refuses the stream (a device configured otherwise, a check of its
    post_load) is "completed" for the source, which quits: the machine would be lost.  With it
    the migration fails and the source runs on.  Off again after a failure (a snapshot's exec:
    stream has no way back)."""
    return_path(old, True)
    old.cmd("migrate", {"uri": uri})
    r = wait_migration(old, timeout)
    if r["status"] != "completed":
        return_path(old, False)
    return r


def quit_old(old, old_pid, name, device, prop):
    """The migration completed: let the old QEMU's DEVICE write what it owes its cables (its
    PROP, drain_old), then quit it."""
    drain_old(old, device, prop, name)
    try:
        old.cmd("quit")
    except OSError:
        pass                    # it quit before answering
    old.close()
    if not wait_gone(old_pid, 30):
        die(f"{name}: the old QEMU (pid {old_pid}) did not quit")


def migrate_to(name, old_pid, argv, own, timeout, device, prop):
    """Steps 1-3 of a move (the module's comment) for machine NAME (node<N>, switch<S>), QEMU
    OLD_PID: start the destination (ARGV, which binds OWN with the suffix .mig<OLD_PID>), migrate
    into it, let the old one's DEVICE write what it owes its cables (its PROP, drain_old), quit
    it and give the new one the names.  QEMU's last query-migrate
    answer, and the seconds the migration took."""
    incoming = path(f"{name}.migrate")
    sfx = f".mig{old_pid}"
    for f in [incoming] + [o + sfx for o in own]:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
    try:                        # the old QEMU's own log (-d guest_errors), kept aside
        os.replace(path(f"{name}.qemu.log"), path(f"{name}.qemu.log.old"))
    except FileNotFoundError:
        pass
    old = Qmp(path(f"{name}.qmp"))
    r = subprocess.run(argv + ["-incoming", f"unix:{incoming}"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{name}: the destination QEMU failed to start (exit {r.returncode}):\n"
            f"{r.stderr.strip()}")
    with open(path(f"{name}.pid") + sfx) as f:
        new_pid = int(f.read().split()[0])
    say(f"{name}: moving from QEMU pid {old_pid} to pid {new_pid}")
    t0 = time.monotonic()
    r = run_migration(old, f"unix:{incoming}", timeout)
    if r["status"] != "completed":
        try:
            os.kill(new_pid, 9)
        except ProcessLookupError:
            pass                        # it quit when it refused the stream
        wait_gone(new_pid, 10)
        for o in own:
            try:
                os.unlink(o + sfx)
            except FileNotFoundError:
                pass
        # The source logs on into its old log: that is <name>.qemu.log again, and the
        # destination's (its error, if it refused the stream) is kept beside it.
        log = path(f"{name}.qemu.log")
        try:
            os.replace(log, log + ".failed")
            os.replace(log + ".old", log)
        except FileNotFoundError:
            pass
        where = (f"; see {name}.qemu.log.failed for the destination's error"
                 if r["status"] == "failed" else "")
        die(f"{name}: migration {r['status']}: {r.get('error-desc', '')} ({name} runs on in "
            f"pid {old_pid}{where})")
    took = time.monotonic() - t0
    quit_old(old, old_pid, name, device, prop)
    for o in own:
        os.replace(o + sfx, o)
    return r, took


def report(name, what, r, took):
    ram = r.get("ram", {})
    say(f"{name}: moved in {took:.2f} s; downtime {r.get('downtime', '?')} ms, "
        f"{ram.get('transferred', 0) >> 20} MiB sent")
    print(json.dumps({**what, "downtime_ms": r.get("downtime"),
                      "total_ms": r.get("total-time"), "setup_ms": r.get("setup-time"),
                      "transferred": ram.get("transferred")}))


def move_switch(s, state, old_pid, timeout):
    own = [path(f"switch{s}.{x}") for x in ("pid", "qmp")]
    own += [switch_socket(s, p) for p, peer in switch_ports(s, *layout(state)).items()
            if switch_listens(s, peer)]
    sfx = f".mig{old_pid}"
    r, took = migrate_to(f"switch{s}", old_pid, switch_args(s, state, sfx), own, timeout,
                         f"sw{s}", "tx-ready")
    redial_switch_peers(s, state)
    report(f"switch{s}", {"switch": s}, r, took)
    return 0


def move(n, state, old_pid, timeout):
    # What the new QEMU binds, under a name of its own until the old one is gone.
    sfx = f".mig{old_pid}"
    own = [path(f"node{n}.{x}") for x in ("pid", "qmp", "console", "qga", "net")]
    peer = peer_of(n, state["nodes"])
    if not switched(state) and peer is not None and n < peer:
        own.append(link_socket(n, peer))
    r, took = migrate_to(f"node{n}", old_pid, qemu_args(n, state, sfx), own, timeout,
                         "pib0", "link-tx-ready")
    redial_peer(n, state)
    start_relay(n)
    # `pibvm exec` on node N forgives a missing agent only while node<N>.moving exists: keep it
    # until the moved guest's agent answers.
    if not qga_ready(n, 60):
        say(f"node{n}: its guest agent does not answer after the move")
    report(f"node{n}", {"node": n}, r, took)
    return 0


def move_to_host(n, state, spec, timeout):
    """`pibvm migrate N --to HOST:PORT`: node N's QEMU migrates over TCP into the QEMU waiting
    there (`pibvm up --nodes 1 --incoming PORT` on that host, with this run's --mem, --node-base
    and cable).  Its cable must be able to follow: one that dials (--link-connect) dials again
    from the destination, and the far end takes the new connection when this one closes; one
    that listens here, or a unix socket of this host, cannot.  On success this QEMU quits and
    the run says where the node went (`pibvm status`); on failure it runs on, as in a move on
    this host."""
    node_arg(n)
    old_pid = node_pid(n)
    if not old_pid:
        die(f"node{n} is not running")
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        die(f"--to {spec}: expected HOST:PORT")
    if state.get("link_listen"):
        die(f"migrate --to: node{n}'s cable listens on this host (--link-listen), and its far "
            "end dials this host: the cable cannot follow the node")
    refuse(state)
    if switched(state) or peer_of(n, state["nodes"]) is not None:
        die(f"migrate --to: node{n}'s cable is a socket of this host (a switch port or a "
            "back-to-back peer); only a node whose cable dials over TCP (--link-connect), or "
            "that has none, can go to another host")
    if state.get("disks", {}).get(str(n)) or state.get("image") == "debian":
        die(f"migrate --to: node{n}'s disk would not travel with it")
    name = f"node{n}"
    moving = path(f"{name}.moving")
    open(moving, "w").close()
    try:
        old = Qmp(path(f"{name}.qmp"))
        say(f"{name}: moving from QEMU pid {old_pid} to {spec}")
        t0 = time.monotonic()
        r = run_migration(old, f"tcp:{spec}", timeout)
        if r["status"] != "completed":
            die(f"{name}: migration {r['status']}: {r.get('error-desc', '')} ({name} runs on in "
                f"pid {old_pid}; the destination's log says why it refused, if it did)")
        took = time.monotonic() - t0
        quit_old(old, old_pid, name, "pib0", "link-tx-ready")
    finally:
        os.unlink(moving)
    state.setdefault("moved", {})[str(n)] = spec
    save_state(state)
    report(name, {"node": n, "to": spec}, r, took)
    return 0
