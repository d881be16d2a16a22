"""The commands: `pibvm up`, `down`, `kill`, `status`, `exec`, `ssh`, `cp`, `console`, `sm`,
`ipoib` and `guid`, and what they share (starting nodes and switches, waiting for agents and ports)."""

import base64
import os
import select
import signal
import socket
import subprocess
import sys
import termios
import time
import tty

from . import config, fullimage
from .agent import (QgaCommandError, QgaError, exit_status, guest_file_read, guest_file_write,
                    guest_run, guest_wait, qga_ready, qga_request, qmp_quit)
from .config import (ACTIVE_TIMEOUT, BOOT_TIMEOUT, QUIT_TIMEOUT, die, hub_pid, load_state,
                     node_pid, path, save_state, say, switch_pid, wait_gone)
from .image import make_initrd
from .mgmt import start_hub, start_relay
from .qmp import Qmp
from .qemu import (check_qemu, data_socket, disk_path, make_disk, probe_accel, qemu_args,
                   switch_args, switch_listens, switch_socket, tcp_link)
from .topology import (MAX_NODES, MAX_SWITCHES, fabric_node, layout, node_guid, peer_of,
                       port_guid, switch_count, switch_guid, switch_nodes, switch_of,
                       switch_ports, switched)


# ---------------------------------------------------------------------------------------------
# Starting nodes and switches

def check_tcp_link(args):
    """--link-listen / --link-connect: one node per run directory, no switch, a port number."""
    spec = args.link_listen or args.link_connect
    if not spec:
        return
    if args.link_listen and args.link_connect:
        die("--link-listen and --link-connect: one or the other")
    if args.nodes != 1 or args.switches:
        die("--link-listen/--link-connect: the run has one node (--nodes 1), its cable the TCP link")
    host, _, port = spec.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536 or (args.link_connect and not host):
        die(f"{spec}: expected {'HOST:PORT' if args.link_connect else '[HOST:]PORT'}")
    if not 0 <= args.node_base < MAX_NODES:
        die(f"--node-base must be 0..{MAX_NODES - 1}")


def start_switches(state):
    """Start every switch that is not running, in order, so that a switch's listening ports exist
    before the next switch dials them; their port sockets exist when this returns."""
    for s in range(switch_count(state)):
        start_switch(s, state)


def start_switch(s, state, extra=()):
    """Switch S's QEMU, unless it runs; EXTRA: more arguments (a snapshot's -S -incoming)."""
    if switch_pid(s):
        return
    for p, peer in switch_ports(s, *layout(state)).items():
        if not switch_listens(s, peer):
            continue
        try:
            os.unlink(switch_socket(s, p))
        except FileNotFoundError:
            pass
    r = subprocess.run(switch_args(s, state) + list(extra), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"switch{s}: QEMU failed to start (exit {r.returncode}):\n{r.stderr.strip()}")
    say(f"switch{s}: {len(switch_ports(s, *layout(state)))} ports "
        f"(nodes {', '.join(map(str, switch_nodes(s, *layout(state)))) or 'none'}), "
        f"pid {switch_pid(s)}")


def stop_switch(s):
    pid = switch_pid(s)
    if pid:
        os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, QUIT_TIMEOUT):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5)


def node_arg(n):
    state = load_state()
    if state is None:
        die(f"no guests in {config.RUN} (pibvm up)")
    if not 0 <= n < state["nodes"]:
        die(f"no node {n}: this run has nodes 0..{state['nodes'] - 1}")
    return state


def start_node(n, state, extra=()):
    """Start node N's QEMU (EXTRA: more arguments, `-incoming` for one that arrives by
    migration) and its guest-agent relay; the time it started."""
    for f in (f"node{n}.pid", f"node{n}.agent", f"node{n}.log", f"node{n}.qemu.log",
              f"node{n}.relay.log"):
        try:
            os.unlink(path(f))
        except FileNotFoundError:
            pass
    peer = peer_of(n, state["nodes"])
    if state.get("data_net") and peer is not None and n < peer:
        try:        # a stale socket would look like a listening server to wait_data_server
            os.unlink(data_socket(n, peer))
        except FileNotFoundError:
            pass
    r = subprocess.run(qemu_args(n, state) + list(extra), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"node{n}: QEMU failed to start (exit {r.returncode}):\n{r.stderr.strip()}")
    started = time.monotonic()
    start_relay(n)
    wait_data_server(n, state)
    return started


def wait_data_server(n, state):
    """If N serves a data-network socket, wait until it exists: QEMU 7.2's stream client
    connects only once, so its peer must not start before the server listens."""
    peer = peer_of(n, state["nodes"])
    if not state.get("data_net") or peer is None or n > peer:
        return
    deadline = time.monotonic() + 10
    while not os.path.exists(data_socket(n, peer)):
        if time.monotonic() > deadline:
            die(f"node{n}: no data-network socket {data_socket(n, peer)} after 10 s")
        time.sleep(0.02)
    if node_pid(peer):
        say(f"node{n}: restarted data-network server; node{peer}'s data NIC stays "
            f"disconnected until node{peer} reboots too")


def console_tail(n, lines=30):
    try:
        with open(path(f"node{n}.log"), "rb") as f:
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        return "(no console log)"
    return "\n".join(text.splitlines()[-lines:])


def wait_ready(started, timeout):
    """Wait until each started node's guest agent answers; print each node's boot time."""
    pending = dict(started)
    deadline = time.monotonic() + timeout
    say(f"waiting for the guest agent{'s' if len(pending) > 1 else ''} of "
        f"{', '.join(f'node{n}' for n in pending)} (up to {timeout} s)")
    last_note = time.monotonic()
    while pending:
        for n in sorted(pending):
            if not node_pid(n):
                die(f"node{n}: QEMU exited during boot; console:\n{console_tail(n)}")
            if qga_ready(n, 2):
                say(f"node{n}: ready after {time.monotonic() - pending[n]:.1f} s")
                del pending[n]
        if not pending:
            break
        now = time.monotonic()
        if now > deadline:
            for n in sorted(pending):
                print(f"--- node{n}: console log (tail)\n{console_tail(n)}", file=sys.stderr)
            die(f"timeout: no answer from {', '.join(f'node{n}' for n in pending)} "
                f"after {timeout} s")
        if now - last_note > 15:
            say(f"still booting: {', '.join(f'node{n}' for n in sorted(pending))} "
                f"({now - min(pending.values()):.0f} s)")
            last_note = now
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# up, down, kill, status

def cmd_up(args):
    """Boot nodes 0..N-1 and wait for their guest agents. Two nodes are cabled back to back.
    More than two (or --switches K) are cabled to pib switches switch0..switch<K-1> (default
    K = 1) chained in a line, the nodes spread evenly over them in order; a switch is named swS
    where a node number is expected (`up --node sw1`, `kill sw1`)."""
    if not 1 <= args.nodes <= MAX_NODES:
        die(f"--nodes must be 1..{MAX_NODES}")
    if args.mem < 128:
        die("--mem: at least 128 MiB")
    if len(path("node15.agent.tmp")) >= 108:     # sizeof(sockaddr_un.sun_path)
        die(f"run directory path too long for unix sockets: {config.RUN}")
    os.makedirs(config.RUN, exist_ok=True)
    check_qemu()
    state = load_state()
    if args.node is not None:
        if args.node[0] == "switch":
            return up_switch(args.node[1], args, state)
        return up_one(args, state)

    running = [n for n in range(state["nodes"]) if node_pid(n)] if state else []
    if running and not args.force:
        die(f"guests are already up in {config.RUN} (nodes {', '.join(map(str, running))}); "
            "use `pibvm down` first, or `pibvm up --force`")
    if state:
        down(state)
    for name in os.listdir(config.RUN):        # logs of an earlier run
        if name.endswith(".log"):
            os.unlink(path(name))
    sm = None if args.sm == "none" else int(args.sm)
    if sm is not None and not 0 <= sm < args.nodes:
        die(f"--sm {args.sm}: no such node (nodes 0..{args.nodes - 1}, or none)")
    state = {"nodes": args.nodes, "mem": args.mem, "accel": probe_accel(),
             "pib": os.environ.get("PIBVM_NO_PIB") != "1", "data_net": args.data_net,
             "initrd": make_initrd(args.overlay),
             "overlay": os.path.abspath(args.overlay) if args.overlay else None,
             "sm": sm, "static_lids": args.static_lids, "no_driver": args.no_driver,
             "switch": args.nodes > 2 or bool(args.switches),
             "switches": args.switches or (1 if args.nodes > 2 else 0),
             "disks": {str(n): args.disk for n in range(args.nodes)} if args.disk else {},
             "image": args.image}
    if not 0 <= state["switches"] <= MAX_SWITCHES:
        die(f"--switches must be 1..{MAX_SWITCHES}")
    check_tcp_link(args)
    check_incoming(args)
    state.update(node_base=args.node_base, link_listen=args.link_listen,
                 link_connect=args.link_connect)
    if state["switch"] and args.static_lids:
        die("--static-lids: a switch needs a subnet manager to program its forwarding table")
    if state["switch"] and args.data_net:
        die("--data-net: only for back-to-back pairs (2 nodes)")
    if args.disk is not None and args.disk < 1:
        die("--disk: at least 1 MiB")
    for n in range(args.nodes):
        try:
            os.unlink(disk_path(n))
        except FileNotFoundError:
            pass
        if args.disk:
            make_disk(n, args.disk, True)
    if args.image == "debian":
        if args.overlay:
            die("--overlay: only for the initramfs guest (the Debian guest has a disk: pibvm cp)")
        if args.no_driver:
            die("--no-driver: only for the initramfs guest")
        fullimage.prepare(state)
    save_state(state)
    say(f"booting {args.nodes} node(s) in {config.RUN} (accel {state['accel']}, "
        f"{args.mem} MiB each, image {args.image})")
    start_hub(args.nodes)
    start_switches(state)
    if args.incoming:
        return up_incoming(args.incoming, state)
    started = {}
    for n in range(args.nodes):
        started[n] = start_node(n, state)
    t0 = min(started.values())
    wait_ready(started, BOOT_TIMEOUT)
    say("all nodes ready")
    if args.image == "debian":
        fullimage.after_boot(range(args.nodes))
    if not state["pib"] or args.no_driver:
        # Without pib.ko there is no pib_0 to wait for and no port an SM could reach.
        return 0
    if sm is not None and args.image != "debian":      # the Debian guest: opensm.service
        sm_start(sm, [])
    bring_up(state, cabled_nodes(state), t0)
    if args.ipoib:
        if sm is None:
            die("--ipoib needs a subnet manager (the broadcast group comes from the SA)")
        ipoib_up(cabled_nodes(state), args.ipoib)
    return 0


def check_incoming(args):
    """--incoming: one node, which can follow its move: its cable dials (--link-connect) or it
    has none; nothing of the run's own that the stream does not carry (a disk, the data NIC)."""
    if not args.incoming:
        return
    if args.nodes != 1 or args.switches:
        die("--incoming: the run has one node (--nodes 1), the one that arrives")
    if args.link_listen:
        die("--incoming: the node that arrives must dial its cable (--link-connect): a cable "
            "that listened on the source host cannot follow it")
    if args.disk or args.data_net or args.image != "initramfs":
        die("--incoming: a disk (--disk, the Debian image's root) or the data NIC does not "
            "travel with the migration; only the initramfs guest, without them")
    host, _, port = args.incoming.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        die(f"--incoming {args.incoming}: expected [HOST:]PORT")


def up_incoming(spec, state, timeout=BOOT_TIMEOUT):
    """`pibvm up --nodes 1 --incoming [HOST:]PORT`: node 0's QEMU waits for the migration
    stream on PORT; once QEMU has loaded it and runs the guest, its agent answers and this
    returns.  A stream QEMU refuses ends that QEMU: an error, with its log."""
    host, _, port = spec.rpartition(":")
    t0 = start_node(0, state, ["-incoming", f"tcp:{host or '0.0.0.0'}:{port}"])
    say(f"node0: waiting for a migration on {host or '0.0.0.0'}:{port} "
        f"(`pibvm migrate N --to HOST:{port}` on the source)")
    deadline = time.monotonic() + timeout
    while True:
        pid = node_pid(0)
        if not pid:
            try:
                with open(path("node0.qemu.log")) as f:
                    log = f.read().strip()
            except FileNotFoundError:
                log = ""
            die(f"node0: the incoming QEMU ended without a machine (it refused the stream, or "
                f"the source cancelled); its log:\n{log[-2000:]}")
        try:
            with Qmp(path("node0.qmp")) as q:
                status = q.cmd("query-status")["status"]
        except OSError:
            status = "?"
        if status == "running":
            break
        if time.monotonic() > deadline:
            die(f"node0: no migration arrived within {timeout} s (status {status}); QEMU pid "
                f"{pid} still waits: `pibvm down` ends it")
        time.sleep(0.2)
    say(f"node0: arrived by migration after {time.monotonic() - t0:.1f} s of waiting")
    wait_ready({0: time.monotonic()}, 60)
    return 0


def cabled_nodes(state):
    """The nodes whose pib port has a cable (a link partner, or the switch)."""
    if switched(state) or tcp_link(state):
        return list(range(state["nodes"]))
    return [n for n in range(state["nodes"]) if peer_of(n, state["nodes"]) is not None]


def bring_up(state, nodes, t0):
    """With a subnet manager (or static LIDs), wait until the ports of NODES are ACTIVE and say
    how long that took since T0; without, say that they wait in INIT."""
    if not nodes:
        return
    if state.get("sm") is None and not state.get("static_lids"):
        say("no subnet manager (--sm none): the ports stay in INIT until one runs "
            "(pibvm sm start N)")
        return
    wait_active(nodes, ACTIVE_TIMEOUT)
    lids = ", ".join(f"node{n} LID {int(port_attr(n, 'lid') or '0', 0)}" for n in nodes)
    say(f"ports ACTIVE {time.monotonic() - t0:.1f} s after the start ({lids})")


def port_attr(n, name):
    """pib_0 port 1's sysfs attribute NAME in guest N ("" if it cannot be read)."""
    rc, out, _ = guest_run(n, ["cat", f"/sys/class/infiniband/pib_0/ports/1/{name}"], 30)
    return out.decode(errors="replace").strip() if rc == 0 else ""


def wait_active(nodes, timeout):
    """Wait until the pib port of every node in NODES is ACTIVE."""
    pending = set(nodes)
    deadline = time.monotonic() + timeout
    while pending:
        for n in sorted(pending):
            if port_attr(n, "state").endswith("ACTIVE"):
                pending.discard(n)
        if not pending:
            return
        if time.monotonic() > deadline:
            states = ", ".join(f"node{n} {port_attr(n, 'state') or '?'}" for n in sorted(pending))
            die(f"timeout: ports not ACTIVE after {timeout} s ({states}); see the "
                f"node<N>.opensm.log files in {config.RUN}")
        time.sleep(0.5)


def up_one(args, state):
    """`pibvm up --node K`: (re)boot node K of the current run with the same wiring."""
    if state is None:
        die(f"no run in {config.RUN}: `pibvm up` first")
    n = args.node[1]
    if not 0 <= n < state["nodes"]:
        die(f"no node {n}: this run has nodes 0..{state['nodes'] - 1}")
    if state.get("moved", {}).pop(str(n), None):
        save_state(state)               # booted here again: no longer elsewhere
    pid = node_pid(n)
    if pid:
        if not args.force:
            die(f"node{n} is running (pid {pid}); `pibvm kill {n}` first, or --force")
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 10)
    if args.disk is not None:
        if args.disk < 1:
            die("--disk: at least 1 MiB")
        make_disk(n, args.disk, False)
        state.setdefault("disks", {})[str(n)] = args.disk
        save_state(state)
    debian = state.get("image") == "debian"
    if debian and not os.path.exists(fullimage.root_disk(n)):
        fullimage.make_root_disk(n)     # a reboot keeps the node's disk, as a machine's
    start_hub(state["nodes"])
    start_switches(state)
    t0 = start_node(n, state)
    wait_ready({n: t0}, BOOT_TIMEOUT)
    if debian:
        fullimage.after_boot([n])
    if not state.get("pib", True) or state.get("no_driver"):
        return 0
    if state.get("sm") == n and not debian:
        sm_start(n, [])
    if switched(state):
        bring_up(state, [n], t0)
        return 0
    peer = peer_of(n, state["nodes"])
    if peer is not None and node_pid(peer):
        bring_up(state, [n, peer], t0)
    return 0


def switch_arg(s, state):
    if state is None:
        die(f"no run in {config.RUN}: `pibvm up` first")
    if not 0 <= s < switch_count(state):
        die(f"no switch sw{s}: this run has " +
            (f"sw0..sw{switch_count(state) - 1}" if switched(state) else "no switch"))


def up_switch(s, args, state):
    """`pibvm up --node swS`: restart switch S with the same ports.  Its nodes and neighbours
    redial it; with an SM, wait until every running node's port is ACTIVE again."""
    switch_arg(s, state)
    if switch_pid(s):
        if not args.force:
            die(f"switch sw{s} is running (pid {switch_pid(s)}); `pibvm kill sw{s}` first, "
                "or --force")
        stop_switch(s)
    t0 = time.monotonic()
    start_switch(s, state)
    if state.get("pib", True):
        bring_up(state, [n for n in range(state["nodes"]) if node_pid(n)], t0)
    return 0


def kill_switch(s):
    state = load_state()
    switch_arg(s, state)
    pid = switch_pid(s)
    if not pid:
        die(f"switch sw{s} is not running")
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10)
    say(f"switch sw{s} killed (pid {pid})")
    return 0


def down(state):
    nodes = state["nodes"]
    pids = {n: node_pid(n) for n in range(nodes)}
    for n, pid in pids.items():
        if pid:
            qmp_quit(n)
    for n, pid in pids.items():
        if pid and not wait_gone(pid, QUIT_TIMEOUT):
            say(f"node{n}: no exit after QMP quit; SIGKILL")
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5)
    for s in range(switch_count(state)):
        stop_switch(s)
    pid = hub_pid()
    if pid:
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid, 5)
    # Logs stay for post-mortems; sockets, pidfiles and state go.
    for name in os.listdir(config.RUN):
        if name.endswith((".sock", ".net", ".qga", ".agent", ".qmp", ".console", ".pid",
                          ".lock")) or \
                name in ("state.json", "initrd-overlay.img"):
            try:
                os.unlink(path(name))
            except FileNotFoundError:
                pass


def cmd_down(args):
    state = load_state()
    if state is None:
        say(f"nothing to stop in {config.RUN}")
        return 0
    down(state)
    say("all nodes stopped")
    return 0


def cmd_kill(args):
    kind, n = args.node
    if kind == "switch":
        return kill_switch(n)
    node_arg(n)
    pid = node_pid(n)
    if not pid:
        die(f"node{n} is not running")
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10)
    say(f"node{n} killed (pid {pid})")
    return 0


def cmd_status(args):
    state = load_state()
    if state is None:
        print(f"no guests ({config.RUN})")
        return 1
    nodes = state["nodes"]
    sm = state.get("sm")
    print(f"run dir {config.RUN}: {nodes} node(s), accel {state['accel']}, {state['mem']} MiB, "
          f"overlay {state.get('overlay') or 'none'}, "
          f"data network {'on' if state.get('data_net') else 'off'}, "
          f"subnet manager {'none' if sm is None else f'node{sm}'}, "
          f"{'static LIDs' if state.get('static_lids') else 'LIDs from the SM'}")
    hp = hub_pid()
    print(f"hub:   {'running, pid %d' % hp if hp else 'NOT running'}")
    for sw in range(switch_count(state)):
        sp = switch_pid(sw)
        links = ", ".join(f"port {p} node{peer[1]}" if peer[0] == "node" else
                          f"port {p} switch{peer[1]}"
                          for p, peer in switch_ports(sw, *layout(state)).items())
        print(f"switch{sw}: {'running, pid %d' % sp if sp else 'NOT running'} ({links})")
    for n in range(nodes):
        pid = node_pid(n)
        peer = peer_of(n, nodes)
        link = f"link to node{peer}" if peer is not None else "no link peer"
        if switched(state):
            link = "link to switch%d port %d" % switch_of(n, *layout(state))
        if not state.get("pib", True):
            link = "no pib device"
        if pid:
            agent = "agent up" if qga_ready(n, 5) else "agent not answering"
            print(f"node{n}: running, pid {pid}, {agent}, {link}")
        elif str(n) in state.get("moved", {}):
            print(f"node{n}: moved to {state['moved'][str(n)]} (pibvm migrate --to), {link}")
        else:
            print(f"node{n}: stopped, {link}")
    return 0


# ---------------------------------------------------------------------------------------------
# Running a command in a guest

def cmd_exec(args):
    """Run CMD in the guest through the guest agent; its stdout and stderr come out here and
    its exit status is ours (124 on timeout, 128+N when killed by signal N, 127 when it cannot
    be started, 255 when the agent fails)."""
    node_arg(args.node)
    cmd = args.cmd
    if not cmd:
        die("exec: no command")
    if not node_pid(args.node):
        die(f"node{args.node} is not running", 255)
    try:
        pid = qga_request(args.node, "guest-exec", {"path": cmd[0], "arg": cmd[1:],
                                                    "capture-output": True})["pid"]
    except QgaCommandError as e:
        die(f"exec: {e}", 127)      # the agent could not start it: like a shell's 127
    except (OSError, QgaError) as e:
        die(f"exec: {e}", 255)

    try:
        st = guest_wait(args.node, pid, args.timeout)
    except KeyboardInterrupt:
        return 130
    except (OSError, QgaError) as e:
        die(f"exec: {e}", 255)
    if st is None:
        say(f"exec: timeout after {args.timeout} s; killed guest pid {pid}")
        return 124

    try:
        sys.stdout.buffer.write(base64.b64decode(st.get("out-data", "")))
        sys.stdout.flush()
        sys.stderr.buffer.write(base64.b64decode(st.get("err-data", "")))
        sys.stderr.flush()
    except BrokenPipeError:     # the reader went away (`| head`): the status still counts
        sys.stdout = sys.stderr = None
    if st.get("out-truncated") or st.get("err-truncated"):
        say("exec: output truncated by the guest agent")
    return exit_status(st)


def cmd_ssh(args):
    """Log in to a full Debian guest (pibvm up --image debian) as root with the run's key, or
    run CMD there; ssh's exit status is ours.  The nodes log in to each other the same way,
    under their names (ssh node1)."""
    state = node_arg(args.node)
    os.execvp("ssh", fullimage.ssh_argv(state, args.node, args.cmd))


def cp_endpoint(spec):
    """(node, path) of N:PATH, or (None, path) of a host path."""
    node, sep, rest = spec.partition(":")
    if sep and node.isdigit():
        return int(node), rest
    return None, spec


def cmd_cp(args):
    """Copy a file into a guest (pibvm cp SRC N:DST) or out of one (pibvm cp N:SRC DST), through
    the guest agent: any image, no network needed.  DST is the file's new name (not a folder)."""
    (sn, src), (dn, dst) = cp_endpoint(args.src), cp_endpoint(args.dst)
    if (sn is None) == (dn is None):
        die("cp: exactly one of SRC and DST is N:PATH (a guest's)")
    n = sn if sn is not None else dn
    node_arg(n)
    if not node_pid(n):
        die(f"node{n} is not running")
    try:
        if dn is not None:
            with open(src, "rb") as f:
                data = f.read()
            guest_file_write(n, dst, data)
        else:
            data = guest_file_read(n, src)
            with open(dst, "wb") as f:
                f.write(data)
    except (OSError, QgaError) as e:
        die(f"cp: {e}")
    say(f"cp: {len(data)} bytes, {args.src} -> {args.dst}")
    return 0


# ---------------------------------------------------------------------------------------------
# The subnet manager: opensm in a guest, through the guest's pib-sm script

def sm_start(n, opensm_args):
    """Start opensm in guest N with OPENSM_ARGS after pib-sm's own (-t 1000 -s 1)."""
    rc, out, err = guest_run(n, ["pib-sm", "start", *opensm_args], 60)
    if rc != 0:
        die(f"node{n}: opensm did not start (exit {rc}): "
            f"{(out + err).decode(errors='replace').strip()}")
    say(f"node{n}: opensm {out.decode(errors='replace').strip()} "
        f"(log: {path(f'node{n}.opensm.log')})")


def cmd_sm(args):
    """Run the guest's pib-sm: start opensm on NODE with pib-sm's options (-t 1000 -s 1) and
    then OPENSM-ARGS after '--'; stop it (SIGTERM), kill it (SIGKILL, as a crash) or show it
    (every node without NODE).  Its log is node<N>.opensm.log in the run directory."""
    state = node_arg(args.node) if args.node is not None else load_state()
    if state is None:
        die(f"no guests in {config.RUN} (pibvm up)")
    if args.action == "start":
        if args.node is None:
            die("sm start: which node?")
        sm_start(args.node, args.opensm_args)
        return 0
    if args.opensm_args:
        die(f"sm {args.action}: takes no opensm options")
    nodes = [args.node] if args.node is not None else \
        [n for n in range(state["nodes"]) if node_pid(n)]
    if args.action in ("stop", "kill") and args.node is None:
        die(f"sm {args.action}: which node?")
    rc = 0
    for n in nodes:
        r, out, err = guest_run(n, ["pib-sm", args.action], 60)
        print(f"node{n}: {(out + err).decode(errors='replace').strip()}")
        if args.action != "status" and r != 0:
            rc = 1
    return rc


def ipoib_up(nodes, mode):
    """IPoIB on NODES in MODE (datagram or connected): the guest's pib-ipoib loads ib_ipoib and
    gives ib0 node N's address, 10.13.0.(N+1)/24 (nodeN-ib); then wait until every ib0 has its
    carrier, which ipoib turns on once the SA has let it join the broadcast group."""
    for n in nodes:
        r, out, err = guest_run(n, ["pib-ipoib", "up", mode], 60)
        if r != 0:
            die(f"node{n}: pib-ipoib up {mode} failed: {(out + err).decode(errors='replace').strip()}")
    pending, t0 = set(nodes), time.monotonic()
    while pending:
        for n in sorted(pending):
            r, out, _ = guest_run(n, ["pib-ipoib", "status"], 30)
            f = out.decode(errors="replace").split()
            if r == 0 and len(f) == 3 and f[0] == mode and f[1] == "1":
                pending.discard(n)
        if not pending:
            break
        if time.monotonic() - t0 > ACTIVE_TIMEOUT:
            die(f"timeout: ib0 has no carrier after {ACTIVE_TIMEOUT} s on "
                f"{', '.join(f'node{n}' for n in sorted(pending))} (no broadcast group from the "
                f"SA?); see the node<N>.opensm.log files in {config.RUN}")
        time.sleep(0.5)
    say(f"IPoIB {mode} up {time.monotonic() - t0:.1f} s: " +
        ", ".join(f"node{f}-ib 10.13.0.{f + 1}"
                  for f in (fabric_node(n, load_state() or {}) for n in nodes)))


def cmd_ipoib(args):
    """Load ib_ipoib on NODES (default: every cabled node) in datagram mode (a UD QP, MTU
    2044) or connected mode (RC QPs and an SRQ, MTU 65520), give node N's ib0 10.13.0.N+1/24
    (name nodeN-ib) and wait until each ib0 has joined the broadcast group through the SA; or
    unload ib_ipoib (down)."""
    state = load_state()
    if state is None:
        die(f"no guests in {config.RUN} (pibvm up)")
    nodes = args.nodes or cabled_nodes(state)
    if args.mode == "down":
        for n in nodes:
            r, out, err = guest_run(n, ["pib-ipoib", "down"], 60)
            if r != 0:
                die(f"node{n}: pib-ipoib down: {(out + err).decode(errors='replace').strip()}")
        return 0
    ipoib_up(nodes, args.mode)
    return 0


# ---------------------------------------------------------------------------------------------
# The serial console

def cmd_console(args):
    node_arg(args.node)
    if args.log:
        with open(path(f"node{args.node}.log"), "rb") as f:
            sys.stdout.buffer.write(f.read())
        return 0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path(f"node{args.node}.console"))
    except OSError as e:
        die(f"node{args.node}: cannot attach to the console: {e}")
    print(f"node{args.node} serial console; Ctrl-] quits\r", file=sys.stderr)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    if saved:
        tty.setraw(fd)
    try:
        s.sendall(b"\r")    # get a fresh prompt
        while True:
            ready, _, _ = select.select([fd, s], [], [])
            if s in ready:
                data = s.recv(4096)
                if not data:
                    break
                os.write(sys.stdout.fileno(), data)
            if fd in ready:
                data = os.read(fd, 1024)
                if not data or b"\x1d" in data:
                    break
                s.sendall(data)
    finally:
        if saved:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        s.close()
    print("\ndetached", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------
# Topology facts, for scripts

def cmd_guid(args):
    """Print the node GUID of node N or switch S of the fabric (with --port, the port GUID), in
    hex as ibstat and ibnetdiscover print it, so that scripts ask for GUIDs instead of copying
    them.  N counts from the fabric's first node: node K of a run with --node-base B is N = K+B.
    Needs no run."""
    limit = MAX_NODES if args.kind == "node" else MAX_SWITCHES
    if not 0 <= args.number < limit:
        die(f"guid: no {args.kind} {args.number}: {args.kind}s are 0..{limit - 1}")
    guid = node_guid(args.number) if args.kind == "node" else switch_guid(args.number)
    print(f"{port_guid(guid) if args.port else guid:#018x}")
    return 0
