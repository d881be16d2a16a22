"""QEMU command lines: a node's (the guest with its pib-hca, management NIC, guest agent, and
optionally the data NIC and a disk), a switch's, the sockets that join them, and the probes of
the QEMU binary (version, accelerator, pib-hca built in)."""

import os
import subprocess

from . import fullimage
from .config import FIRMWARE, INITRD, KERNEL, QEMU, die, path
from .topology import (fabric_node, layout, node_guid, peer_of, static_lid, switch_guid,
                       switch_of, switch_ports, switched)


def link_socket(a, b):
    return path(f"link-{min(a, b)}-{max(a, b)}.sock")


def data_socket(a, b):
    return path(f"data-{min(a, b)}-{max(a, b)}.sock")


def switch_socket(s, port):
    return path(f"switch{s}-port{port}.sock")


def pib_args(n, state, sfx=""):
    if not state.get("pib", True):
        return []
    nodes = state["nodes"]
    dev = f"pib-hca,id=pib0,node-guid={node_guid(fabric_node(n, state)):#018x}"
    dev += os.environ.get("PIBVM_PIB_PROPS", "")
    if state.get("no_driver"):
        # A driver of one's own (the labs'): the device reports what real hardware would
        # punish silently (qemu-hw/hca/pib-teach.c).
        dev += ",teach=on"
    if state.get("static_lids"):
        # No-SM mode: ACTIVE once the link trains.
        dev += f",lid={static_lid(fabric_node(n, state))}"
    if tcp_link(state):
        return ["-chardev", f"socket,id=pib0,{tcp_link(state)}", "-device", dev + ",chardev=pib0"]
    if switched(state):
        # The switch's port listens; the node dials it, and redials after either restarts.
        port = switch_of(n, *layout(state))
        return ["-chardev", f"socket,id=pib0,path={switch_socket(*port)},{redial_opt()}",
                "-device", dev + ",chardev=pib0"]
    peer = peer_of(n, nodes)
    if peer is None:
        return ["-device", dev]
    sock = link_socket(n, peer)
    if n < peer:
        chardev = f"socket,id=pib0,path={sock}{sfx},server=on,wait=off"
    else:
        chardev = f"socket,id=pib0,path={sock},{redial_opt()}"
    return ["-chardev", chardev, "-device", dev + ",chardev=pib0"]


def tcp_link(state):
    """The chardev options of a run's TCP link (its one node's cable), or None: --link-listen
    [HOST:]PORT listens (HOST 0.0.0.0 by default), --link-connect HOST:PORT dials and redials."""
    # nodelay: QEMU leaves Nagle's algorithm on by default, and a small frame then waits for
    # the peer's delayed ACK (ibv_rc_pingpong: 79 ms per round trip without it).
    if state.get("link_listen"):
        host, _, port = state["link_listen"].rpartition(":")
        return f"host={host or '0.0.0.0'},port={port},server=on,wait=off,nodelay=on"
    if state.get("link_connect"):
        host, _, port = state["link_connect"].rpartition(":")
        return f"host={host},port={port},{redial_opt()},nodelay=on"
    return None


def redial_opt():
    """A client chardev's redial option.  QEMU 9.2 added reconnect-ms and deprecated reconnect
    (seconds); 10.2 removed it."""
    return "reconnect-ms=1000" if qemu_version() >= (9, 2) else "reconnect=1"


def switch_listens(s, peer):
    """Does switch S's port to PEER (switch_ports()) listen?  All do but the one to switch S-1,
    which dials that switch's listening port."""
    return not (peer[0] == "switch" and peer[1] < s)


def switch_args(s, state, sfx=""):
    """Switch S: the same QEMU binary, no machine, a chardev per port.  Ports to nodes and to the
    next switch listen; the port to the previous switch dials that switch's listening port.
    SFX: as qemu_args's, for the sockets it listens on and its pidfile (`pibvm migrate swS`)."""
    args = [QEMU, "-name", f"switch{s}", "-machine", "none", "-nodefaults", "-no-user-config",
            "-display", "none", *FIRMWARE,
            "-daemonize", "-pidfile", path(f"switch{s}.pid") + sfx,
            "-D", path(f"switch{s}.qemu.log"),
            "-qmp", f"unix:{path(f'switch{s}.qmp')}{sfx},server=on,wait=off"]
    ports = switch_ports(s, *layout(state))
    for p, peer in ports.items():
        if not switch_listens(s, peer):
            chardev = f"socket,id=p{p},path={switch_socket(peer[1], peer[2])},{redial_opt()}"
        else:
            chardev = f"socket,id=p{p},path={switch_socket(s, p)}{sfx},server=on,wait=off"
        args += ["-chardev", chardev]
    args += ["-device", f"pib-switch,id=sw{s},ports={len(ports)},"
                        f"node-guid={switch_guid(s):#018x},"
                        + ",".join(f"port{p}=p{p}" for p in ports)]
    trace = os.environ.get("PIBVM_TRACE")
    if trace:
        for pattern in filter(None, trace.split(",")):
            args += ["-trace", pattern]
        args += ["-msg", "timestamp=on"]
    return args


def data_net_args(n, state):
    """The data-network NIC of node N (`up --data-net`): virtio-net over a unix stream socket
    shared with N's cable peer.  An unpaired node gets none."""
    peer = peer_of(n, state["nodes"])
    if not state.get("data_net") or peer is None:
        return []
    server = "on" if n < peer else "off"
    return ["-netdev", f"stream,id=data,server={server},addr.type=unix,"
                       f"addr.path={data_socket(n, peer)}",
            "-device", f"virtio-net-pci,netdev=data,mac=52:54:00:01:00:{n + 1:02x},romfile="]


def disk_path(n):
    return path(f"node{n}.disk")


def disk_args(n, state):
    """Node N's disk, if it has one: a raw file on virtio-blk, cached by the host (writeback), so
    that what a completed write put there survives a SIGKILL of the guest's QEMU."""
    if not state.get("disks", {}).get(str(n)):
        return []
    return ["-blockdev", f"driver=file,node-name=disk,filename={disk_path(n)},"
                         "cache.direct=off,cache.no-flush=off",
            "-device", "virtio-blk-pci,drive=disk,ioeventfd=off"]


def make_disk(n, mib, fresh):
    """Give node N a MIB-MiB disk file: a new, zeroed one if FRESH or if it has another size."""
    f = disk_path(n)
    if fresh or not os.path.exists(f) or os.path.getsize(f) != mib << 20:
        with open(f, "wb") as fd:
            fd.truncate(mib << 20)


def boot_args(n, state):
    """What node N boots: the initramfs guest (images/build.sh), or the full Debian guest's own
    kernel and initramfs and its root disk (fullimage.py)."""
    if state.get("image") == "debian":
        return fullimage.node_args(n, state, fabric_node(n, state))
    # --no-driver: the kernel itself refuses pib.ko, whoever asks for it (the image's init
    # modprobes it), so the HCA waits for a driver of the user's own.
    nodrv = " module_blacklist=pib" if state.get("no_driver") else ""
    return ["-kernel", KERNEL, "-initrd", state["initrd"],
            "-append", f"console=ttyS0 pibvm.node={fabric_node(n, state)} quiet log_buf_len=4M"
                       f"{nodrv}"]


def qemu_args(n, state, sfx=""):
    """Node N's QEMU.  SFX is added to the names of what it binds (its pidfile, QMP, console,
    guest-agent and hub sockets, a cable it serves): `pibvm migrate` starts the new QEMU with a
    suffix while the old one still holds the names (migrate.py)."""
    args = [QEMU, "-name", f"node{n}", "-M", os.environ.get("PIBVM_MACHINE", "q35"),
            "-accel", state["accel"],
            "-m", str(state["mem"]), "-smp", "1", "-nodefaults", "-no-user-config",
            "-display", "none", *FIRMWARE, *boot_args(n, state),
            "-daemonize", "-pidfile", path(f"node{n}.pid") + sfx,
            "-D", path(f"node{n}.qemu.log"), "-d", "guest_errors",
            # Serial console: a socket for `pibvm console`, everything logged.
            # (appended to: a migrated node's new QEMU goes on with the same log)
            "-chardev", f"socket,id=ser,path={path(f'node{n}.console')}{sfx},server=on,wait=off,"
                        f"logfile={path(f'node{n}.log')},logappend=on",
            "-serial", "chardev:ser",
            "-qmp", f"unix:{path(f'node{n}.qmp')}{sfx},server=on,wait=off",
            # The main loop's poll set is kept small: every file descriptor in it is looked at on
            # every pass, and the pib link gets at most 4 KiB (a chardev read) per pass.  With
            # virtio-serial's default 31 ports and ioeventfds the loop polled 89 descriptors and
            # ib_write_bw at 64 KiB ran at 250 MB/s; with 2 ports and no ioeventfds it polls 25
            # and runs at 410 MB/s (TCG, 2 cores).  The NICs keep their ioeventfds: without,
            # a virtio-net link over `-netdev stream` was seen to stall under load.
            # Guest agent, and opensm's log (a file chardev: no descriptor in the poll set).
            "-device", "virtio-serial-pci,max_ports=3,ioeventfd=off",
            "-chardev", f"socket,id=qga,path={path(f'node{n}.qga')}{sfx},server=on,wait=off",
            "-device", "virtserialport,chardev=qga,name=org.qemu.guest_agent.0",
            "-chardev", f"file,id=smlog,path={path(f'node{n}.opensm.log')},append=on",
            "-device", "virtserialport,chardev=smlog,name=org.pib.opensm.log",
            # Management network through the hub.
            "-netdev", f"dgram,id=mgmt,local.type=unix,local.path={path(f'node{n}.net')}{sfx},"
                       f"remote.type=unix,remote.path={path('hub.net')}",
            "-device", f"virtio-net-pci,netdev=mgmt,mac=52:54:00:00:00:{n + 1:02x},romfile=",
            *pib_args(n, state, sfx), *data_net_args(n, state), *disk_args(n, state)]
    trace = os.environ.get("PIBVM_TRACE")
    if trace:
        # Each trace line gets "TID@seconds.microseconds:" (the QEMU thread that traced it: a vCPU
        # or the main loop), for timing a packet's way.
        # Several patterns, comma-separated, are one -trace option each.
        for pattern in filter(None, trace.split(",")):
            args += ["-trace", pattern]
        args += ["-msg", "timestamp=on"]
    return args


_qemu_version = None


def qemu_version():
    """(major, minor) of QEMU, from --version (asked once)."""
    global _qemu_version
    if _qemu_version is None:
        r = subprocess.run([QEMU, "--version"], capture_output=True, text=True)
        words = r.stdout.split()
        ver = words[words.index("version") + 1] if "version" in words else "0.0"
        _qemu_version = tuple(int(x) for x in ver.split(".")[:2])
    return _qemu_version


def probe_accel():
    """'kvm' if QEMU can really start a KVM machine here, else 'tcg'."""
    try:
        r = subprocess.run([QEMU, "-M", "none", "-accel", "kvm", "-nodefaults", "-display", "none",
                            "-qmp", "stdio"], input=b'{"execute":"qmp_capabilities"}\n'
                           b'{"execute":"quit"}\n', capture_output=True, timeout=30)
        return "kvm" if r.returncode == 0 else "tcg"
    except (OSError, subprocess.TimeoutExpired):
        return "tcg"


def check_qemu():
    if not os.access(QEMU, os.X_OK):
        die(f"no QEMU at {QEMU} (build it with qemu-hw/build.sh, or set PIBVM_QEMU)")
    for f in (KERNEL, INITRD):
        if not os.path.exists(f):
            die(f"no {f} (build it with images/build.sh)")
    if os.environ.get("PIBVM_NO_PIB") != "1":
        r = subprocess.run([QEMU, "-device", "help"], capture_output=True, text=True)
        if '"pib-hca"' not in r.stdout:
            die(f"{QEMU} has no pib-hca device (rebuild with qemu-hw/build.sh, "
                "or set PIBVM_NO_PIB=1 to boot without it)")
