"""pibvmlib, the package behind tools/pibvm: boot, drive and stop the pib test guests (QEMU under
TCG) from the host.

Every guest ("node" N = 0, 1, ...) is one daemonized QEMU booting build/vmlinuz and
build/initramfs.cpio.gz (images/build.sh).  All state lives in one run directory
(build/vm, or $PIBVM_DIR): sockets, pidfiles, logs and state.json.  Who connects to what:

    node0 QEMU                                              node1 QEMU
    pib-hca --chardev (server) ---- link-0-1.sock ---- (client, reconnect=1) chardev-- pib-hca
    virtio-net --dgram-- node0.net <--> hub.net  [pibvm _hub]  <--> node1.net --dgram-- virtio-net
    virtio-net --stream (server) -- data-0-1.sock -- (client) stream-- virtio-net  (up --data-net)
    virtio-serial port org.qemu.guest_agent.0 -- node0.qga <- [pibvm _relay 0] <- node0.agent
                                                                      <- pibvm exec, up (sync)
    virtio-serial port org.pib.opensm.log     -- node0.opensm.log (file, appended)
    QMP                                       -- node0.qmp   <- pibvm down (quit)
    serial ttyS0                              -- node0.console <- pibvm console; log: node0.log

The fabric is managed as a real one is: `pibvm up` starts a subnet manager, Debian 12's opensm
(through the guest's pib-sm script, images/rootfs/usr/sbin/pib-sm), on node 0 (`--sm NODE` moves
it), which gives the ports their LIDs and takes them from INIT to ACTIVE, and returns once every
cabled port is ACTIVE.  opensm logs to a virtio-serial port that QEMU writes to node<N>.opensm.log.
`--sm none` starts none: the ports stay in INIT, without LIDs, until someone runs one
(`pibvm sm start N`).  `--static-lids` gives each device a LID of its own (`lid` property: node N
has LID N+1), which puts the port in its no-SM mode: ACTIVE as soon as the link trains.

The InfiniBand link: nodes are paired (0,1), (2,3), ...; each pair shares one socket chardev,
which the pib device model uses as its cable.  The lower-numbered node is the server: QEMU
creates link-A-B.sock and accepts; the higher one is a client that retries every second
(reconnect=1).  Either side can therefore be killed and rebooted on its own (`pibvm up --node K`):
a restarted server recreates the socket and the surviving client reconnects to it; a restarted
client simply connects again.  An odd last node gets a pib device with no cable: its link stays
DOWN.

More than 2 nodes (or `--switches K`) are a switched fabric instead: `pibvm up` first starts
the pib switches switch0..switch<K-1> (each the same QEMU binary with `-machine none -device
pib-switch`, docs/how-to/switch.md), chained in a line.  The nodes are spread evenly, in order: each
switch has a port per node of its own (node order, from port 1), then a port to the previous
switch and a port to the next.  Every switch port listens on switch<S>-port<P>.sock; a node dials
its port (reconnect=1) as it would dial a peer, and a switch dials the previous switch's port to
it.  opensm programs the switches like any other; `pibvm down` stops them last.  A switch is
named sw<S> where a node number is expected (`pibvm kill sw1`, `pibvm up --node sw1`).

The management network (10.11.0.N+1/24 in the guest, names node0..node15 in its /etc/hosts) is
an Ethernet hub: each QEMU sends its frames as unix datagrams to hub.net, and the hub process
(`pibvm _hub`, started by `pibvm up`) repeats every frame to the other nodes' sockets.  Only
unix datagram sockets are used; nothing touches the host's IP networking.

The data network (`pibvm up --data-net`, off by default) gives each cabled pair a second
virtio-net NIC (MAC 52:54:00:01:00:NN, NN = node + 1, in hex) joined point to point by a unix
stream socket, the same socket type between the same two QEMU processes as the pib link, so
that Soft-RoCE (rdma_rxe) over it can be compared with pib on equal terms (tools/bench).  The
guest leaves that NIC unconfigured; whoever uses it assigns addresses (tools/bench: 10.12.0.N+1).
As with the pib link, the lower node is the server.  QEMU 7.2's stream netdev has no reconnect
option, so the client connects once, at start-up: `pibvm up` starts it only once the server is
listening, and a rebooted client connects again, but a rebooted server leaves the surviving
client's data NIC without a carrier (reboot both: `pibvm up --node` for each, server first).

A disk (`pibvm up --disk MIB`, every node; `up --node K --disk MIB`, node K only) is a
raw file, node<N>.disk in the run directory, on a virtio-blk device (/dev/vda in the guest),
written back to the host's page cache: it outlives its guest, so `pibvm kill K` then
`pibvm up --node K` finds what K wrote before it died (tests/e2e/61-nvme-target-kill.sh).
A full `pibvm up` starts every disk empty; `up --node K` keeps K's.

Commands are run through the QEMU guest agent (QGA): JSON lines over node<N>.qga.  A relay
process per node (`pibvm _relay N`) keeps that one connection open for the guest's whole life,
because qemu-ga slows to a crawl whenever its host side is disconnected (see mgmt.py), and
passes clients through from node<N>.agent one at a time.  Every request/response is one short
client connection, serialized per node by an flock on node<N>.qga.lock; a long command is a
guest-exec followed by guest-exec-status polls, so many commands can run at once on one node.

The software stack (PIB_STACK, mk/stack.sh) picks the build outputs: build/ for bookworm (the
default: QEMU 7.2, Linux 6.1), build/trixie/ for trixie (QEMU 10.0, Linux 6.12); the run
directory is <outputs>/vm.

Developer knobs (environment): PIBVM_DIR (run directory), PIBVM_QEMU (QEMU binary, default
<outputs>/qemu-system-x86_64; for `pibvm migrate`, the destination's), PIBVM_MACHINE (machine
type, default q35; pc-q35-7.2 lets a guest move between QEMU 7.2 and 10.0), PIBVM_NO_PIB=1 (boot without the pib-hca device, for a QEMU built
without it), PIBVM_TRACE=PATTERN[,PATTERN...] (enable QEMU trace points, e.g. 'pib_*', into
node<N>.qemu.log), PIBVM_PIB_PROPS=,name=value... (more pib-hca properties for every node, e.g.
',link-doorbell=off').

The package (tools/pibvm is its entry point: the command line, nothing else):

    config.py     paths (PIB_STACK, PIBVM_DIR, PIBVM_QEMU), timeouts, messages, state.json, pids
    topology.py   GUIDs, static LIDs, cable peers, the switches' ports: pure functions, unit-
                  tested on the host (tests/host/test_topology.py), printed by `pibvm guid`
    qemu.py       the QEMU command lines of nodes and switches, their sockets, QEMU probes
    image.py      the initrd, with an --overlay of host files
    mgmt.py       the daemons: the management-network hub and the guest-agent relays
    agent.py      the guest agent (QGA) and QMP clients; running a command in a guest
    commands.py   up, down, kill, status, exec, console, sm, ipoib, guid
    migrate.py    migrate: a running node into a new QEMU process (live migration)
    snapshot.py   snapshot save, snapshot load: every node of a run at one moment
"""
