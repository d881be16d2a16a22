#!/usr/bin/env python3
"""Host unit test of pibvm's topology module (tools/pibvmlib/topology.py): GUIDs, static LIDs,
back-to-back pairing and the switched layout, checked for every size `pibvm up` accepts.

Run: python3 tests/host/test_topology.py.  The last line is "N passed, N failed"; the exit
status is 1 when a test failed.
"""

import argparse
import os
import subprocess
import sys
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tools"))
from pibvmlib import topology as t  # noqa: E402 (needs the path above)
import hostunit  # noqa: E402 (beside this file)

# What the GUIDs are made of, as docs/how-to/switch.md states them: the OUI 00:1a:f4 (Red Hat/QEMU) in
# the top 24 bits, node N at (N + 1) << 8, switch S at 0xff0000 + (S << 8).
OUI = 0x001af4
SIZES = [(n, k) for n in range(1, t.MAX_NODES + 1) for k in range(1, t.MAX_SWITCHES + 1)]


class Guids(unittest.TestCase):
    def test_node_guids(self):
        guids = [t.node_guid(n) for n in range(t.MAX_NODES)]
        for n, g in enumerate(guids):
            self.assertEqual(g, OUI << 40 | (n + 1) << 8, f"node {n}")
            self.assertEqual(g & 0xff, 0, f"node {n}: the low byte is left to its ports")
        self.assertEqual(len(set(guids)), len(guids))

    def test_port_guid_is_node_guid_plus_one(self):
        # What the device reports (pib_port_guid in qemu-hw/hca/pib-main.c,
        # qemu-hw/switch/pib-switch.c) and the e2e tests read.
        self.assertEqual(t.port_guid(t.node_guid(0)), OUI << 40 | 0x101)
        self.assertEqual(t.port_guid(t.switch_guid(1)), OUI << 40 | 0xff0101)

    def test_switch_guids(self):
        guids = [t.switch_guid(s) for s in range(t.MAX_SWITCHES)]
        for s, g in enumerate(guids):
            self.assertEqual(g, OUI << 40 | 0xff0000 | s << 8, f"switch {s}")
        nodes = {t.node_guid(n) for n in range(t.MAX_NODES)}
        every = nodes | {t.port_guid(g) for g in nodes}
        sw = set(guids) | {t.port_guid(g) for g in guids}
        self.assertEqual(len(sw), 2 * t.MAX_SWITCHES)
        self.assertFalse(sw & every, "a switch GUID clashes with a node's")

    def test_static_lids(self):
        lids = [t.static_lid(f) for f in range(t.MAX_NODES)]
        self.assertEqual(lids, list(range(1, t.MAX_NODES + 1)))    # LID 0 is reserved

    def test_fabric_node(self):
        self.assertEqual(t.fabric_node(0, {"nodes": 1}), 0)
        self.assertEqual(t.fabric_node(0, {"nodes": 1, "node_base": 3}), 3)
        self.assertEqual(t.node_guid(t.fabric_node(0, {"node_base": 1})), t.node_guid(1))


class BackToBack(unittest.TestCase):
    def test_pairs(self):
        expected = {1: [None], 2: [1, 0], 3: [None] * 3, 4: [None] * 4}
        for nodes, peers in expected.items():
            self.assertEqual([t.peer_of(n, nodes) for n in range(nodes)], peers, f"{nodes} nodes")

    def test_switch_count(self):
        self.assertEqual(t.switch_count({"nodes": 2}), 0)
        self.assertEqual(t.switch_count({"nodes": 2, "switch": False, "switches": 0}), 0)
        self.assertEqual(t.switch_count({"nodes": 4, "switch": True}), 1)  # a run from before K
        self.assertEqual(t.layout({"nodes": 7, "switch": True, "switches": 3}), (7, 3))


class Switched(unittest.TestCase):
    def test_every_node_on_exactly_one_port(self):
        for nodes, k in SIZES:
            with self.subTest(nodes=nodes, switches=k):
                seen = {}
                for s in range(k):
                    for p, peer in t.switch_ports(s, nodes, k).items():
                        if peer[0] == "node":
                            self.assertNotIn(peer[1], seen)
                            seen[peer[1]] = (s, p)
                self.assertEqual(sorted(seen), list(range(nodes)))
                for n, where in seen.items():
                    self.assertEqual(t.switch_of(n, nodes, k), where)
                self.assertRaises(ValueError, t.switch_of, nodes, nodes, k)

    def test_ports_numbered_from_one_nodes_first(self):
        for nodes, k in SIZES:
            with self.subTest(nodes=nodes, switches=k):
                for s in range(k):
                    ports = t.switch_ports(s, nodes, k)
                    self.assertEqual(sorted(ports), list(range(1, len(ports) + 1)))
                    local = t.switch_nodes(s, nodes, k)
                    kinds = [ports[p][0] for p in sorted(ports)]
                    self.assertEqual(kinds, ["node"] * len(local) +
                                     ["switch"] * (len(ports) - len(local)))
                    # The port to the previous switch comes before the port to the next.
                    self.assertEqual([ports[p][1] for p in sorted(ports)][len(local):],
                                     [x for x in (s - 1, s + 1) if 0 <= x < k])

    def test_chain_cabled_both_ways(self):
        for nodes, k in SIZES:
            with self.subTest(nodes=nodes, switches=k):
                links = set()
                for s in range(k):
                    for p, peer in t.switch_ports(s, nodes, k).items():
                        if peer[0] != "switch":
                            continue
                        _, s2, p2 = peer
                        self.assertEqual(abs(s2 - s), 1, "a line: only neighbours are cabled")
                        self.assertEqual(t.switch_ports(s2, nodes, k)[p2], ("switch", s, p))
                        links.add(frozenset([(s, p), (s2, p2)]))
                self.assertEqual(len(links), k - 1)
                for s in range(k - 1):
                    self.assertEqual(t.switch_ports(s, nodes, k)[t.uplink_port(s, nodes, k)],
                                     ("switch", s + 1, t.downlink_port(s + 1, nodes, k)))

    def test_even_spread_in_order(self):
        for nodes, k in SIZES:
            with self.subTest(nodes=nodes, switches=k):
                shares = [t.switch_nodes(s, nodes, k) for s in range(k)]
                self.assertEqual(sum(shares, []), list(range(nodes)))
                sizes = [len(x) for x in shares]
                self.assertLessEqual(max(sizes) - min(sizes), 1)
                self.assertEqual(sizes, sorted(sizes, reverse=True), "the first switches "
                                 "take the extra nodes")

    def test_examples(self):
        # 3 nodes on the one switch; 7 on 3 switches (3, 2, 2 nodes).
        self.assertEqual(t.switch_ports(0, 3, 1), {1: ("node", 0), 2: ("node", 1), 3: ("node", 2)})
        self.assertEqual(t.switch_ports(1, 7, 3), {1: ("node", 3), 2: ("node", 4),
                                                   3: ("switch", 0, 4), 4: ("switch", 2, 3)})


class Targets(unittest.TestCase):
    def test_parse_target(self):
        self.assertEqual(t.parse_target("0"), ("node", 0))
        self.assertEqual(t.parse_target("12"), ("node", 12))
        self.assertEqual(t.parse_target("sw1"), ("switch", 1))
        self.assertEqual(t.parse_target("switch3"), ("switch", 3))
        for bad in ("", "sw", "swx", "sw1x", "node1", "x"):
            with self.subTest(text=bad):
                self.assertRaises(argparse.ArgumentTypeError, t.parse_target, bad)


class GuidCommand(unittest.TestCase):
    """`pibvm guid`, which the e2e tests ask, prints what the module computes (no guest)."""

    def pibvm_guid(self, *args):
        r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "pibvm"), "guid", *args],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^0x[0-9a-f]{16}\n$", "hex as ibstat prints a GUID")
        return int(r.stdout, 16)

    def test_guid(self):
        self.assertEqual(self.pibvm_guid("node", "1"), t.node_guid(1))
        self.assertEqual(self.pibvm_guid("node", "1", "--port"), t.port_guid(t.node_guid(1)))
        self.assertEqual(self.pibvm_guid("switch", "1"), t.switch_guid(1))
        self.assertEqual(self.pibvm_guid("switch", "0", "--port"), t.port_guid(t.switch_guid(0)))
        r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "pibvm"), "guid", "node",
                            str(t.MAX_NODES)], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, "a node beyond MAX_NODES is refused")


if __name__ == "__main__":
    hostunit.main(__name__)
