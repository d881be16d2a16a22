#!/usr/bin/env python3
"""Host unit test of the device model's layering (docs/explanation/design.md, "Layers"):
qemu-hw/ is three parts, and the rule that keeps them apart is checked here, on the sources.

  fabric/  shared by both devices; it includes nothing of hca/ or switch/, and every function
           its headers declare is defined in it
  hca/     the HCA; it includes fabric/ (through fabric/pib-fabric.h), never switch/
  switch/  the switch; it includes fabric/, never hca/

Each part lists its sources in its own meson.build, under its own Kconfig symbol, so that the
switch builds without the HCA's code and the fuzzer (which reads those lists) misses no file.

Run: python3 tests/host/test_layers.py.  The last line is "N passed, N failed".
"""

import os
import re
import sys
import unittest

import hostunit

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
HW = os.path.join(TOP, "qemu-hw")
PARTS = ("fabric", "hca", "switch")
# What each part may include, besides itself: the contract (include/), and the files at the top
# of qemu-hw/ that all parts share (the QEMU-version shim, the trace points).
MAY_INCLUDE = {"fabric": set(), "hca": {"fabric"}, "switch": {"fabric"}}
SHARED = {"pib-compat.h", "trace.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(part, ext=(".c", ".h")):
    d = os.path.join(HW, part)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(ext))


def text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def where(path):
    """The part a file is in: a part's name, 'include' (the contract), 'shared' (qemu-hw/'s own
    files), or None (QEMU's headers, which resolve in QEMU's tree, not here)."""
    rel = os.path.relpath(path, TOP)
    first, _, rest = rel.partition(os.sep)
    if first == "include":
        return "include"
    if first == "qemu-hw":
        part = rest.split(os.sep)[0]
        if part in PARTS:
            return part
        if part in SHARED:
            return "shared"
        if part == "include":       # ../include/ as QEMU's tree has it: the contract
            return "include"
    return None


def includes(path):
    """(name, where) of each quoted include of a file, resolved from the file's folder as the
    compiler does first; in QEMU's tree the contract is at hw/pib/include/, which from a part
    is ../include/, here qemu-hw/include/."""
    out = []
    for name in INCLUDE.findall(text(path)):
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), name))
        out.append((name, where(resolved) if os.path.exists(resolved) or "include/" in name
                    else None))
    return out


class Includes(unittest.TestCase):
    def test_each_part_includes_only_what_it_may(self):
        for part in PARTS:
            for path in sources(part):
                for name, w in includes(path):
                    if w in (None, part, "include", "shared"):
                        continue
                    with self.subTest(file=os.path.relpath(path, TOP), include=name):
                        self.assertIn(w, MAY_INCLUDE[part],
                                      f"{part}/ may include {sorted(MAY_INCLUDE[part])} only")

    def test_quoted_includes_resolve(self):
        # A part's own headers and the shared files must be found beside the including file:
        # an include that resolves nowhere would be served by some -iquote path by chance.
        for part in PARTS:
            for path in sources(part):
                for name, w in includes(path):
                    if "/" in name and not name.startswith("../"):
                        continue            # QEMU's own headers (qemu/, hw/, chardev/, ...)
                    with self.subTest(file=os.path.relpath(path, TOP), include=name):
                        if name.startswith("../include/"):
                            self.assertTrue(os.path.exists(os.path.join(TOP, name[3:])),
                                            "not in the contract, include/")
                        else:
                            self.assertIsNotNone(w, "not found beside the file")

    def test_no_cycle_between_parts(self):
        edges = {p: set() for p in PARTS}
        for part in PARTS:
            for path in sources(part):
                edges[part] |= {w for _, w in includes(path) if w in PARTS and w != part}
        self.assertEqual(edges["fabric"], set())
        self.assertNotIn("switch", edges["hca"])
        self.assertNotIn("hca", edges["switch"])


# A function declaration in a header: a return type, a name, "(", and the line (or the last of
# its continuation lines) ending in ");".  Static inline functions are defined where declared.
DECL = re.compile(r"^(?!static|typedef|#|\s)[A-Za-z_][\w\s\*]*?\b(\w+)\(([^;{]*?)\);", re.M | re.S)


class FabricApi(unittest.TestCase):
    def test_fabric_declarations_defined_in_fabric(self):
        defined = "".join(text(p) for p in sources("fabric", (".c",)))
        names = []
        for h in sources("fabric", (".h",)):
            for m in DECL.finditer(text(h)):
                names.append(m.group(1))
        self.assertGreater(len(names), 30, "the pattern still finds the fabric's functions")
        for name in names:
            with self.subTest(function=name):
                self.assertTrue(re.search(rf"(?m)^[A-Za-z].*\b{name}\([^;]*$", defined),
                                "declared in a fabric/ header, not defined in fabric/")


class Build(unittest.TestCase):
    def test_each_part_builds_its_sources_under_its_symbol(self):
        symbol = {"fabric": "CONFIG_PIB_FABRIC", "hca": "CONFIG_PIB_HCA",
                  "switch": "CONFIG_PIB_SWITCH"}
        for part in PARTS:
            meson = text(os.path.join(HW, part, "meson.build"))
            listed = set(re.findall(r"'(pib[\w-]*\.c)'", meson))
            present = {os.path.basename(p) for p in sources(part, (".c",))}
            with self.subTest(part=part):
                self.assertEqual(listed, present, "meson.build lists exactly the part's .c files")
                self.assertIn(f"when: '{symbol[part]}'", meson)

    def test_kconfig_switch_stands_alone(self):
        k = text(os.path.join(HW, "Kconfig"))
        switch = k[k.index("config PIB_SWITCH"):]
        self.assertIn("select PIB_FABRIC", switch)
        self.assertNotRegex(switch.split("\nconfig ")[0], r"depends on .*PCI",
                            "the switch has no bus: it must not need PCI")


if __name__ == "__main__":
    hostunit.main(__name__)
