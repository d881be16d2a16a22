"""The full Debian guest (`pibvm up --image debian`): what a node of it needs besides what every
node has.  The image is images/debian/build.sh's (Debian 12, or 13 with PIB_STACK=trixie: its
own kernel and initramfs, systemd, sshd, opensm, OpenMPI, pib from its Debian packages).

  disk    each node boots a copy-on-write overlay of the image, made afresh by `up`
  ssh     a second NIC on QEMU's user network, restricted (the guest reaches nothing through
          it), forwards one port of the host's 127.0.0.1 to the guest's sshd; the run's key,
          made by `up`, logs in as root there and between the nodes (under their names)
  sm      opensm.service runs on the node whose kernel command line says pibvm.sm
"""

import os
import shutil
import socket
import subprocess
import time

from .agent import guest_file_write, guest_run
from .config import BUILD, die, path, say

IMAGES = ("initramfs", "debian")
DEBIAN = os.path.join(BUILD, "debian")
DEBIAN_FILES = ("image.qcow2", "vmlinuz", "initrd.img")
SSH_MAC = "52:54:00:02:00:{:02x}"
GUEST_SSH_ADDR = "10.0.2.15"     # the guest's address on its ssh NIC (pib-node in the image)


def check_image():
    for f in DEBIAN_FILES:
        if not os.path.exists(os.path.join(DEBIAN, f)):
            die(f"no {os.path.join(DEBIAN, f)}: build the full Debian guest first "
                "(make packages && bash images/debian/build.sh)")
    for tool in ("qemu-img", "ssh-keygen"):
        if not shutil.which(tool):
            die(f"{tool} is missing (mk/deps.sh installs it)")


def root_disk(n):
    return path(f"node{n}.root.qcow2")


def make_root_disk(n):
    """Node N's root disk: a new overlay on the image (the image itself is never written)."""
    base = os.path.realpath(os.path.join(DEBIAN, "image.qcow2"))
    try:
        os.unlink(root_disk(n))
    except FileNotFoundError:
        pass
    r = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base,
                        root_disk(n)], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"node{n}: qemu-img create failed: {r.stderr.strip()}")


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_args(n, state, fabric_n):
    """The QEMU arguments of node N that the full image adds: its kernel, its root disk, the
    ssh NIC.  FABRIC_N is the node's number in the fabric (its name, nodeN)."""
    sm = " pibvm.sm" if state.get("sm") == n else ""
    port = state["ssh_ports"][str(n)]
    return (["-kernel", os.path.join(DEBIAN, "vmlinuz"),
             "-initrd", os.path.join(DEBIAN, "initrd.img"),
             "-append", f"console=ttyS0 root=/dev/vda rw pibvm.node={fabric_n}{sm} quiet "
                        "log_buf_len=4M",
             "-blockdev", f"driver=qcow2,node-name=root,file.driver=file,"
                          f"file.filename={root_disk(n)}",
             "-device", "virtio-blk-pci,drive=root",
             "-netdev", f"user,id=ssh,restrict=on,hostfwd=tcp:127.0.0.1:{port}-"
                        f"{GUEST_SSH_ADDR}:22",
             "-device", f"virtio-net-pci,netdev=ssh,mac={SSH_MAC.format(fabric_n + 1)},romfile="])


def ssh_key():
    return path("ssh_key")


def make_ssh_key():
    """The run's ssh key (a new one for every `up`)."""
    for f in (ssh_key(), ssh_key() + ".pub"):
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
    r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pibvm",
                        "-f", ssh_key()], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"ssh-keygen failed: {r.stderr.strip()}")


def install_ssh_key(n):
    """Give node N the run's key: root logs in with it, from the host and from the other
    nodes, and uses it to log in to them (mpirun starts its daemons that way)."""
    with open(ssh_key(), "rb") as f:
        private = f.read()
    with open(ssh_key() + ".pub", "rb") as f:
        public = f.read()
    rc, out, err = guest_run(n, ["install", "-d", "-m", "700", "/root/.ssh"], 60)
    if rc != 0:
        die(f"node{n}: cannot make /root/.ssh: {(out + err).decode(errors='replace')}")
    guest_file_write(n, "/root/.ssh/authorized_keys", public)
    guest_file_write(n, "/root/.ssh/id_ed25519", private)
    guest_file_write(n, "/root/.ssh/id_ed25519.pub", public)
    rc, out, err = guest_run(n, ["chmod", "600", "/root/.ssh/id_ed25519",
                                 "/root/.ssh/authorized_keys"], 60)
    if rc != 0:
        die(f"node{n}: chmod failed: {(out + err).decode(errors='replace')}")


def ssh_argv(state, n, cmd):
    """The host's ssh command line into node N as root, running CMD (a login shell without)."""
    port = state.get("ssh_ports", {}).get(str(n))
    if state.get("image") != "debian" or port is None:
        die("pibvm ssh: only the full Debian guests run sshd (pibvm up --image debian); "
            "use pibvm exec or pibvm console")
    return ["ssh", "-i", ssh_key(), "-p", str(port), "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes", "root@127.0.0.1", *cmd]


def prepare(state):
    """Before the nodes start: the image is there, each node gets its disk and ssh port, the
    run its key."""
    check_image()
    state["ssh_ports"] = {str(n): free_port() for n in range(state["nodes"])}
    for n in range(state["nodes"]):
        make_root_disk(n)
    make_ssh_key()


def wait_sshd(n, tries=240):
    """Wait until node N's sshd runs (its host key is made at the first boot): a bounded number
    of asks through the guest agent, each of which takes its own time under TCG."""
    for _ in range(tries):
        rc, out, _ = guest_run(n, ["systemctl", "is-active", "ssh.service"], 60)
        if out.decode(errors="replace").strip() == "active":
            return
        time.sleep(0.5)
    die(f"node{n}: sshd did not start (systemctl is-active ssh.service: "
        f"{out.decode(errors='replace').strip()})")


def after_boot(nodes):
    for n in nodes:
        install_ssh_key(n)
    for n in nodes:
        wait_sshd(n)
    say(f"ssh: pibvm ssh N (key {ssh_key()})")
