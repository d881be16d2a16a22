"""The management network's hub and the guest-agent relays: the daemons `pibvm up` starts,
each by re-running tools/pibvm with an internal subcommand (`pibvm _hub`, `pibvm _relay N`),
detached, logging to the run directory."""

import contextlib
import fcntl
import os
import select
import signal
import socket
import subprocess
import sys
import time

from . import config
from .config import PIBVM, die, hub_pid, path


# ---------------------------------------------------------------------------------------------
# The management-network hub (runs as `pibvm _hub NODES`, detached)

def run_hub(nodes):
    """Repeat every datagram that arrives on hub.net to every other node's socket.  A node that
    is down (no socket, nobody reading) or has a full queue just misses the frame, as on a
    real hub."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    hub = path("hub.net")
    try:
        os.unlink(hub)
    except FileNotFoundError:
        pass
    sock.bind(hub)
    with open(path("hub.pid.tmp"), "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(path("hub.pid.tmp"), path("hub.pid"))
    ports = [path(f"node{n}.net") for n in range(nodes)]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        frame, sender = sock.recvfrom(1 << 17)
        for port in ports:
            if sender.startswith(port):     # (node<N>.net.mig<pid>: a node being migrated)
                continue
            try:
                sock.sendto(frame, socket.MSG_DONTWAIT, port)
            except OSError:
                pass


def cmd_hub(args):
    config.RUN = args.run
    run_hub(args.nodes)


def start_hub(nodes):
    if hub_pid():
        return
    log = open(path("hub.log"), "ab")
    subprocess.Popen([sys.executable, PIBVM, "_hub", str(nodes), config.RUN],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                     cwd="/")
    deadline = time.monotonic() + 10
    while not hub_pid():
        if time.monotonic() > deadline:
            die("the network hub did not start (see hub.log)")
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------
# The guest-agent relay (runs as `pibvm _relay N`, detached, one per node)
#
# qemu-ga on a virtio-serial port naps 100 ms in its main loop whenever no host client is
# connected, and that stalls everything else it does, including draining the output of running
# commands (4 MiB of output took 20 s instead of under 1 s).  So one connection to node<N>.qga
# stays open for the life of the guest, held by this relay, and clients come in through
# node<N>.agent, one at a time.



@contextlib.contextmanager
def relay_lock(n):
    """Held while a relay puts its socket in place or takes it away, so an old relay that
    ends late cannot remove its successor's."""
    with open(path(f"node{n}.relay.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_relay(n):
    agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    agent.connect(path(f"node{n}.qga"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(path(f"node{n}.agent"))
    except FileNotFoundError:
        pass
    listener.bind(path(f"node{n}.agent.tmp"))
    listener.listen(16)
    with relay_lock(n):
        os.replace(path(f"node{n}.agent.tmp"), path(f"node{n}.agent"))
        with open(path(f"node{n}.relay.pid.tmp"), "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(path(f"node{n}.relay.pid.tmp"), path(f"node{n}.relay.pid"))
    client = None
    while True:
        ready, _, _ = select.select([agent, client or listener], [], [])
        if agent in ready:
            data = agent.recv(1 << 20)
            if not data:
                break               # QEMU is gone: so is this guest's relay
            if client:
                try:
                    client.sendall(data)
                except OSError:
                    client.close()
                    client = None
            # With no client, the bytes are a reply nobody waits for any more: dropped.
        elif client in ready:
            try:
                data = client.recv(1 << 20)
            except OSError:
                data = b""
            if data:
                agent.sendall(data)
            else:
                client.close()
                client = None
        elif listener in ready:
            client, _ = listener.accept()
    # Remove the socket unless a relay for the node's next QEMU (a reboot, a move) has
    # already replaced it.
    with relay_lock(n):
        if relay_pid(n) == os.getpid():
            for f in (f"node{n}.agent", f"node{n}.relay.pid"):
                try:
                    os.unlink(path(f))
                except FileNotFoundError:
                    pass


def cmd_relay(args):
    config.RUN = args.run
    run_relay(args.node)


def relay_pid(n):
    """The pid in node<N>.relay.pid, the last relay to announce its socket, or None."""
    try:
        with open(path(f"node{n}.relay.pid")) as f:
            return int(f.read().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def start_relay(n):
    """Start node N's relay and wait until it serves node<N>.agent.  After a move or a reboot,
    the socket there can still be the old relay's (it goes only once that relay has seen its
    QEMU's end), so the wait is for the new relay's pid in node<N>.relay.pid, which a relay
    writes once its socket is in place."""
    log = open(path(f"node{n}.relay.log"), "ab")
    relay = subprocess.Popen([sys.executable, PIBVM, "_relay", str(n), config.RUN],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True, cwd="/")
    deadline = time.monotonic() + 10
    while relay_pid(n) != relay.pid:
        if time.monotonic() > deadline or relay.poll() is not None:
            die(f"node{n}: the guest-agent relay did not start (see node{n}.relay.log)")
        time.sleep(0.02)
