"""The two guests (node0 the server, node1 the client) in <outputs>/vm-bench, driven through
tools/pibvm, and what the bench sets up in them: pib checked ACTIVE; Soft-RoCE (rdma_rxe) on the
data network's NIC (`pibvm up --data-net`), MTU 9000 so that its IB MTU is 4096 as pib's; the NVMe
over Fabrics target on node0 and the host modules on node1; the guests' description for the
results file."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

from .config import (CLIENT, DATA_MAC, DATA_MTU, DATA_NET, LOGS, NVME_CONNECT, NVME_MIB, OUT,
                     PIBVM, SERVER, TOP, VM_DIR, SetupError, say, tail)
from .host import first_line


class Guests:
    """Two guests in <outputs>/vm-bench (RUN_DIR), driven through tools/pibvm; IMAGE "debian":
    the full Debian guests.  Every child process this starts is tracked, so that an interrupted
    bench can stop them before `pibvm down`."""

    def __init__(self, run_dir=VM_DIR, image=None):
        self.env = dict(os.environ, PIBVM_DIR=run_dir)
        self.image = image
        self.children = set()

    def pibvm(self, *args, timeout=None, log=None):
        """Run `pibvm ARGS`; returns (exit status, stdout + stderr)."""
        p = self.popen(*args)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(p)
            out, _ = p.communicate()
            out += f"\nbench: pibvm {' '.join(args)}: no answer in {timeout} s\n"
            p.returncode = 124
        self.children.discard(p)    # not on an exception: down() stops what is left
        if log:
            with open(os.path.join(LOGS, log), "a") as f:
                f.write(f"$ pibvm {' '.join(args)}\n{out}[exit {p.returncode}]\n")
        return p.returncode, out

    def popen(self, *args):
        p = subprocess.Popen([sys.executable, PIBVM, *args], env=self.env, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        self.children.add(p)
        return p

    def stop(self, p, grace=15):
        """Stop a `pibvm exec`: SIGINT makes it kill its guest process first."""
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.children.discard(p)

    def sh(self, node, script, timeout=60, log="setup.log"):
        """Run a shell script in NODE; returns (exit status, output)."""
        return self.pibvm("exec", str(node), "--timeout", str(timeout), "--", "sh", "-c", script,
                          timeout=timeout + 30, log=log)

    def up(self, overlay):
        args = ["up", "--nodes", "2", "--data-net", "--force"]
        if overlay:
            args += ["--overlay", overlay]
        if self.image:
            args += ["--image", self.image, "--mem", "1536"]
        rc, out = self.pibvm(*args, timeout=600, log="pibvm-up.log")
        return rc == 0, out

    def down(self):
        for p in list(self.children):
            self.stop(p, grace=5)
        self.pibvm("down", timeout=120, log="pibvm-up.log")


def crc32_overlay():
    """rdma_rxe needs the kernel's "crc32" hash (crc32_generic), which the guest image may lack.
    Provide the module from the kernel tree in an overlay; the guest loads it only if modprobe
    cannot find its own.  Returns the overlay directory, or None."""
    r = subprocess.run(["bash", os.path.join(TOP, "mk", "fetch.sh"), "kernel"],
                       capture_output=True, text=True)
    kdir = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    try:
        with open(os.path.join(kdir, "abi")) as f:
            abi = f.read().strip() + "-amd64"
    except OSError:
        say("no kernel tree (mk/fetch.sh kernel); rxe depends on the image's crc32_generic")
        return None
    base = os.path.join(kdir, "root", "lib", "modules", abi, "kernel", "crypto", "crc32_generic")
    overlay = os.path.join(OUT, "overlay")
    dest = os.path.join(overlay, "usr", "lib", "pib-bench", "crc32_generic.ko")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    for ext, unpack in ((".ko", None), (".ko.xz", ["xz", "-dc"]), (".ko.zst", ["zstd", "-qdc"])):
        if os.path.exists(base + ext):
            if unpack:
                with open(dest, "wb") as f:
                    subprocess.run(unpack + [base + ext], stdout=f, check=True)
            else:
                shutil.copyfile(base + ext, dest)
            return overlay
    say(f"no crc32_generic module under {os.path.dirname(base)}")
    return None


def setup_data_net(g, node):
    """Address node's data-network NIC (found by its MAC) and raise it."""
    mac = DATA_MAC.format(node + 1)
    rc, out = g.sh(node, f"""
        set -e
        for d in /sys/class/net/*; do
            [ "$(cat $d/address)" = {mac} ] && ifname=${{d##*/}}
        done
        [ -n "$ifname" ] || {{ echo "no NIC with MAC {mac}"; exit 1; }}
        ip link set "$ifname" mtu {DATA_MTU}
        ip addr add {DATA_NET}.{node + 1}/24 dev "$ifname"
        ip link set "$ifname" up
        echo "ifname=$ifname"
    """)
    m = re.search(r"ifname=(\S+)", out)
    if rc != 0 or not m:
        raise SetupError(f"node{node}: data NIC: {out.strip()}")
    return m.group(1)


# ---------------------------------------------------------------------------------------------
# Set-up: the data network, Soft-RoCE, pib, the NVMe target

def ipv4_gid(addr):
    """The GID rxe derives from an IPv4 address (IPv4-mapped IPv6), as sysfs prints it."""
    a, b, c, d = map(int, addr.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a << 8 | b:04x}:{c << 8 | d:04x}"


def setup_rxe(g, ifnames):
    """Soft-RoCE device rxe0 on each node's data NIC; returns {node: GID index of its IPv4
    address}, the GID perftest must use (RoCE v2 over IPv4)."""
    rc, out = g.sh(CLIENT, f"ping -c 3 -W 5 {DATA_NET}.{SERVER + 1}")
    if rc != 0:
        raise SetupError(f"the data network does not carry traffic:\n{out.strip()}")
    gid_idx = {}
    for n in (SERVER, CLIENT):
        rc, out = g.sh(n, f"""
            modprobe crc32_generic 2>/dev/null || insmod /usr/lib/pib-bench/crc32_generic.ko ||
                echo "no crc32_generic: rdma_rxe will not register devices"
            modprobe rdma_rxe || exit 1
            rdma link add rxe0 type rxe netdev {ifnames[n]} || exit 1
            for i in $(seq 50); do
                ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && break
                sleep 0.2
            done
            ibv_devinfo -d rxe0 | grep -E 'state|active_mtu'
            # One grep over the GID table (1024 entries: a cat each is a minute under TCG).
            f=$(grep -lx {ipv4_gid(f"{DATA_NET}.{n + 1}")} /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null | head -n 1)
            [ -n "$f" ] && echo "gid_index=${{f##*/}}"
            true
        """)
        m = re.search(r"gid_index=(\d+)", out)
        if rc != 0 or "PORT_ACTIVE" not in out or not m:
            raise SetupError(f"node{n}: rxe0: {out.strip()}")
        gid_idx[n] = int(m.group(1))
    return gid_idx


def check_pib(g):
    for n in (SERVER, CLIENT):
        rc, out = g.sh(n, "ibv_devinfo -d pib_0")
        if rc != 0 or "PORT_ACTIVE" not in out:
            raise SetupError(f"node{n}: pib_0 not active: {out.strip()[-400:]}")


def setup_nvme(g, available):
    """IPoIB on both nodes (nvme-rdma over pib resolves IPoIB addresses), the target on node0
    with a port per usable transport, the host modules on node1.  Marks a transport unavailable
    in AVAILABLE when its part of the set-up fails."""
    rc, out = g.pibvm("ipoib", "datagram", timeout=300, log="setup.log")
    if rc != 0:
        available["pib"] = f"IPoIB did not come up: {tail(out)}"
    rc, out = g.sh(SERVER, f"pib-nvmet up {NVME_MIB}", timeout=120)
    if rc != 0:
        raise SetupError(f"node0: pib-nvmet up: {out.strip()}")
    for port, t in ((2, "rxe"), (3, "tcp")):
        if available[t] is True:
            tr, addr = NVME_CONNECT[t]
            rc, out = g.sh(SERVER, f"pib-nvmet port {port} {tr} {addr}", timeout=60)
            if rc != 0:
                available[t] = f"node0: pib-nvmet port {port} {tr} {addr}: {out.strip()}"
    rc, out = g.sh(CLIENT, "modprobe nvme_rdma && modprobe nvme_tcp", timeout=60)
    if rc != 0:
        raise SetupError(f"node1: nvme host modules: {out.strip()}")


# ---------------------------------------------------------------------------------------------
# The guests' description, for the results file

def guest_env(g):
    env = {}
    try:
        with open(os.path.join(VM_DIR, "state.json")) as f:
            state = json.load(f)
        env["guests"] = (f"2 guests, accel {state['accel'].upper()}, 1 vCPU and "
                         f"{state['mem']} MiB each (-smp 1)")
    except (OSError, ValueError, KeyError):
        pass
    # perftest's --version exits with status 1.
    rc, out = g.sh(SERVER, "uname -r; ib_write_bw --version; true")
    m = re.search(r"^(\S+)\n.*?Version: (\S+)", out, re.S)
    if rc == 0 and m:
        env["guest kernel"] = f"Linux {m.group(1)}"
        env["perftest"] = (f"{m.group(2)} (Debian package "
                           f"{first_line(['dpkg-query', '-W', '-f', '${Version}', 'perftest'])}"
                           "), on rdma-core 56.1 with the pib provider")
    return env
