"""The fabric's shape and names: GUIDs, static LIDs, who is cabled to whom.

Pure functions of the node count, the switch count and the node base (a run's state, state.json,
is the plain dict they are read from): no files, no environment, no processes, so that
tests/host/test_topology.py checks them on the host and the e2e tests ask `pibvm guid` for GUIDs
instead of copying them.

Two nodes (or one) are cabled back to back: node N's peer is N ^ 1.  More nodes, or
--switches K, hang off K switches chained in a line, the nodes spread evenly in order: switch S
has a port per node of its own (node order, from port 1), then a port to switch S-1, then a port
to switch S+1.
"""

import argparse
import re

MAX_NODES = 16          # the guests' /etc/hosts names node0..node15
GUID_BASE = 0x001AF40000000000  # OUI 00:1a:f4 (Red Hat/QEMU); node N is BASE + (N+1) << 8
SWITCH_GUID = GUID_BASE + 0xff0000  # switch S: SWITCH_GUID + (S << 8), clear of the nodes'
MAX_SWITCHES = 8


def node_guid(n):
    # Steps of 256 leave room for the port GUID (node GUID + 1) and friends.
    return GUID_BASE + ((n + 1) << 8)


def switch_guid(s):
    return SWITCH_GUID + (s << 8)


def port_guid(guid):
    """The port GUID of the device with node GUID GUID: an HCA's port 1, or a switch's port 0,
    which every port of the switch reports (pib_port_guid in qemu-hw/hca/pib-main.c;
    qemu-hw/switch/pib-switch.c)."""
    return guid + 1


def static_lid(f):
    """Fabric node F's LID under --static-lids (no subnet manager)."""
    return f + 1


def fabric_node(n, state):
    """Node N's number in the whole fabric: N + --node-base, so that run directories joined by a
    TCP link (--link-listen, --link-connect) have distinct GUIDs, host names and addresses."""
    return n + state.get("node_base", 0)


def peer_of(n, nodes):
    """The node at the other end of N's InfiniBand cable, or None for an odd last node.
    With more than 2 nodes every node is cabled to the switch instead (switched())."""
    if nodes > 2:
        return None
    p = n ^ 1
    return p if p < nodes else None


def switched(state):
    """More than 2 nodes, or --switches: pib switches (QEMU processes of their own, -machine none)
    chained in a line, the nodes spread across them (switch_nodes(), docs/how-to/switch.md)."""
    return state.get("switch", False)


def switch_count(state):
    """K, the number of switches (a run from before --switches has one)."""
    return state.get("switches", 1) if switched(state) else 0


def layout(state):
    """(nodes, switches): the arguments of the switch functions below for a run."""
    return state["nodes"], switch_count(state)


def switch_nodes(s, nodes, switches):
    """The nodes cabled to switch S: an even share of the nodes, in order (the first
    nodes % K switches take one more)."""
    base, extra = divmod(nodes, switches)
    first = s * base + min(s, extra)
    return list(range(first, first + base + (1 if s < extra else 0)))


def switch_of(n, nodes, switches):
    """(switch, port) of node N's cable."""
    for s in range(switches):
        local = switch_nodes(s, nodes, switches)
        if n in local:
            return s, local.index(n) + 1
    raise ValueError(n)


def switch_ports(s, nodes, switches):
    """Switch S's ports: {port: ("node", N) | ("switch", S', port on S')}.  Its nodes come first,
    then the port to switch S-1, then the port to switch S+1."""
    ports = {i + 1: ("node", n) for i, n in enumerate(switch_nodes(s, nodes, switches))}
    if s > 0:
        ports[len(ports) + 1] = ("switch", s - 1, uplink_port(s - 1, nodes, switches))
    if s < switches - 1:
        ports[len(ports) + 1] = ("switch", s + 1, downlink_port(s + 1, nodes, switches))
    return ports


def downlink_port(s, nodes, switches):
    """The port of switch S (S > 0) that goes to switch S-1."""
    return len(switch_nodes(s, nodes, switches)) + 1


def uplink_port(s, nodes, switches):
    """The port of switch S (S < K-1) that goes to switch S+1."""
    return len(switch_nodes(s, nodes, switches)) + (2 if s > 0 else 1)


def parse_target(text):
    """A node number, or sw<S> for switch S: ('node', N) or ('switch', S)."""
    m = re.fullmatch(r"sw(?:itch)?(\d+)", text)
    if m:
        return ("switch", int(m.group(1)))
    try:
        return ("node", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a node number, or sw<S> for switch S")
