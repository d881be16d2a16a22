"""The QEMU guest agent (QGA) client, running commands in a guest through it, and QMP (only to
quit a guest).

QGA protocol: JSON objects over the unix socket node<N>.agent (the relay's, mgmt.py), one
request per connection, serialized per node by an flock on node<N>.qga.lock.  A command in the
guest is a guest-exec followed by guest-exec-status polls."""

import base64
import fcntl
import json
import os
import random
import socket
import time

from .config import REQUEST_TIMEOUT, path
from .qmp import Qmp


class QgaError(Exception):
    """The agent could not be reached or did not answer."""


class QgaCommandError(QgaError):
    """The agent answered with an error."""


class Qga:
    """One short-lived connection to node N's guest agent, held under the node's lock.

        with Qga(n) as qga:
            pid = qga.request("guest-exec", {...})["pid"]
    """

    def __init__(self, n, timeout=REQUEST_TIMEOUT):
        self.n = n
        self.timeout = timeout
        self.buf = bytearray()

    def __enter__(self):
        self.lock = open(path(f"node{self.n}.qga.lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(self.timeout)
            self.sock.connect(path(f"node{self.n}.agent"))
            self.sync()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.sock.close()
        self.lock.close()   # releases the flock

    def read_line(self, deadline):
        """The next line from the agent (without its newline).  A reply can be megabytes of
        base64, so only newly received bytes are searched for the newline."""
        scanned = 0
        while True:
            i = self.buf.find(b"\n", scanned)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                return line
            scanned = len(self.buf)
            left = deadline - time.monotonic()
            if left <= 0:
                raise QgaError(f"node{self.n}: guest agent did not answer in {self.timeout} s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                raise QgaError(f"node{self.n}: guest agent did not answer in {self.timeout} s")
            if not data:
                raise QgaError(f"node{self.n}: guest agent connection closed")
            self.buf += data

    def next_object(self, deadline):
        """The next JSON object from the agent.  A 0xFF delimiter starts a fresh stream, so
        anything before it on the line (the tail of a reply meant for a client that gave up) is
        dropped, and so are lines that do not parse."""
        while True:
            line = self.read_line(deadline).rsplit(b"\xff", 1)[-1].strip()
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj

    def sync(self):
        """guest-sync-delimited with a random id: the agent answers 0xFF and the id.  Replies
        before that one are stale and dropped.  The 0xFF we send first resets the agent's JSON
        parser, in case an earlier client left half a request."""
        token = random.randrange(1, 1 << 31)
        deadline = time.monotonic() + self.timeout
        self.sock.sendall(b"\xff" + json.dumps(
            {"execute": "guest-sync-delimited", "arguments": {"id": token}}).encode() + b"\n")
        while self.next_object(deadline).get("return") != token:
            pass

    def request(self, command, arguments=None):
        msg = {"execute": command}
        if arguments is not None:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        deadline = time.monotonic() + self.timeout
        while True:
            obj = self.next_object(deadline)
            if "error" in obj:
                raise QgaCommandError(f"node{self.n}: {command}: "
                                      f"{obj['error'].get('desc', obj)}")
            if "return" in obj:
                return obj["return"]


def qga_request(n, command, arguments=None, timeout=REQUEST_TIMEOUT):
    with Qga(n, timeout) as qga:
        return qga.request(command, arguments)


def qga_ready(n, timeout):
    """True if node N's guest agent answers a sync within TIMEOUT seconds."""
    try:
        with Qga(n, timeout):
            return True
    except (OSError, QgaError):
        return False


# ---------------------------------------------------------------------------------------------
# Running a command in a guest

def guest_wait(n, pid, timeout):
    """Wait for guest process PID (started by guest-exec); its guest-exec-status, or None when
    it ran longer than TIMEOUT seconds (None: no limit) and was killed."""
    deadline = time.monotonic() + timeout if timeout else None
    interval = 0.05
    try:
        while True:
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)
            try:
                st = qga_request(n, "guest-exec-status", {"pid": pid})
            except (OSError, QgaError):
                # The node is being moved (`pibvm migrate`): its agent is away for a moment,
                # and the command runs on in the guest.  Ask again once it is back.
                if not os.path.exists(path(f"node{n}.moving")):
                    raise
                continue
            if st["exited"]:
                return st
            if deadline and time.monotonic() > deadline:
                guest_kill(n, pid)
                return None
    except KeyboardInterrupt:
        guest_kill(n, pid)
        raise


def exit_status(st):
    """The shell's exit status for a guest-exec-status: 128+N when killed by signal N."""
    if "signal" in st:
        return 128 + st["signal"]
    return st.get("exitcode", 0)


def guest_run(n, argv, timeout):
    """Run ARGV in guest N and wait: (exit status, stdout, stderr); status 124 on timeout, 255
    when the agent fails."""
    try:
        pid = qga_request(n, "guest-exec", {"path": argv[0], "arg": argv[1:],
                                             "capture-output": True})["pid"]
        st = guest_wait(n, pid, timeout)
    except (OSError, QgaError) as e:
        return 255, b"", str(e).encode()
    if st is None:
        return 124, b"", b""
    return (exit_status(st), base64.b64decode(st.get("out-data", "")),
            base64.b64decode(st.get("err-data", "")))


def guest_kill(n, pid):
    """SIGKILL guest process PID (QGA 7.2 has no command for it: run kill through the agent),
    then collect its status so the agent forgets it."""
    try:
        qga_request(n, "guest-exec", {"path": "kill", "arg": ["-KILL", str(pid)]})
        time.sleep(0.5)
        qga_request(n, "guest-exec-status", {"pid": pid})
    except (OSError, QgaError):
        pass


# ---------------------------------------------------------------------------------------------
# Files in a guest (QGA's guest-file-*): `pibvm cp`, and the ssh key of a full Debian guest

FILE_CHUNK = 1 << 20        # bytes per guest-file-read/-write (QGA caps a read at 48 MiB)


def guest_file_write(n, gpath, data):
    """Write DATA (bytes) to GPATH in guest N, replacing what was there."""
    with Qga(n, REQUEST_TIMEOUT) as qga:
        h = qga.request("guest-file-open", {"path": gpath, "mode": "wb"})
        try:
            for off in range(0, len(data), FILE_CHUNK) or [0]:
                chunk = data[off:off + FILE_CHUNK]
                qga.request("guest-file-write",
                            {"handle": h, "buf-b64": base64.b64encode(chunk).decode()})
        finally:
            qga.request("guest-file-close", {"handle": h})


def guest_file_read(n, gpath):
    """The bytes of GPATH in guest N."""
    out = bytearray()
    with Qga(n, REQUEST_TIMEOUT) as qga:
        h = qga.request("guest-file-open", {"path": gpath, "mode": "rb"})
        try:
            while True:
                r = qga.request("guest-file-read", {"handle": h, "count": FILE_CHUNK})
                out += base64.b64decode(r.get("buf-b64", ""))
                if r.get("eof") or not r.get("count"):
                    return bytes(out)
        finally:
            qga.request("guest-file-close", {"handle": h})


# ---------------------------------------------------------------------------------------------
# QMP (only to quit a guest cleanly)

def qmp_quit(n):
    try:
        with Qmp(path(f"node{n}.qmp"), timeout=5) as q:
            q.cmd("quit")
    except (OSError, ValueError):
        pass                    # gone already, or gone before it answered

