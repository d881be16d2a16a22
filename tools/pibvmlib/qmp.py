"""A QMP client: one connection to a QEMU's monitor socket, kept open.

pibvm (migrate, quitting a node), the labs' grader (labs/devregs.py) and the e2e tests' `qom`
(tests/e2e/lib.sh) all talk QMP through this class, which speaks the protocol as QEMU documents
it (docs/interop/qmp-spec): the greeting, `qmp_capabilities`, then one command at a time, each
answered by a "return" or an "error"; events may come between them and are set aside."""

import json
import socket


class QmpError(OSError):
    """The connection failed or closed, or QEMU answered a command with an error."""


class Qmp:
    def __init__(self, sock_path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        try:
            self.s.connect(sock_path)
            self.f = self.s.makefile("rwb")
            self.events = []
            self.f.readline()                           # the greeting
            self.cmd("qmp_capabilities")
        except (OSError, ValueError):
            # Closed, or QEMU would take no other client while this one stays connected.
            self.close()
            raise

    def cmd(self, name, args=None):
        """Run one command; its "return" value.  QmpError if QEMU says no, or goes away."""
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.f.write(json.dumps(msg).encode() + b"\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise QmpError(f"QMP connection closed during {name}")
            r = json.loads(line)
            if "event" in r:
                self.events.append(r)
            elif "error" in r:
                raise QmpError(f"QMP {name}: {r['error'].get('desc', r['error'])}")
            else:
                return r.get("return")

    def close(self):
        """Close the connection.  The socket's file object too: the socket stays open while
        one is (socket.makefile), and QEMU serves one QMP client at a time, so a connection
        left open makes the next one wait for its greeting until it times out."""
        f = getattr(self, "f", None)
        if f:
            f.close()
        self.s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
