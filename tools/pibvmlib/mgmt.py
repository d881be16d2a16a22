"""The management network's hub and the guest-agent relays: the daemons `pibvm up` starts,
each by re-running tools/pibvm with an internal subcommand (`pibvm _hub`, `pibvm _relay N`),
detached, logging to the run directory."""

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
    os.replace(path(f"node{n}.agent.tmp"), path(f"node{n}.agent"))
    mine = os.stat(path(f"node{n}.agent")).st_ino
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
    # Remove the socket unless a relay for a rebooted node has already replaced it.
    try:
        if os.stat(path(f"node{n}.agent")).st_ino == mine:
            os.unlink(path(f"node{n}.agent"))
    except FileNotFoundError:
        pass


def cmd_relay(args):
    config.RUN = args.run
    run_relay(args.node)


def start_relay(n):
    log = open(path(f"node{n}.relay.log"), "ab")
    subprocess.Popen([sys.executable, PIBVM, "_relay", str(n), config.RUN],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                     cwd="/")
    deadline = time.monotonic() + 10
    while not os.path.exists(path(f"node{n}.agent")):
        if time.monotonic() > deadline:
            die(f"node{n}: the guest-agent relay did not start (see node{n}.relay.log)")
        time.sleep(0.02)
