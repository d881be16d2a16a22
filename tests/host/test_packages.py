#!/usr/bin/env python3
"""Host test of the Debian packages that `make packages` writes (mk/packages.sh,
packaging/README.md): each package holds exactly what it must, and lintian finds no error.
It reads the .debs with dpkg-deb and builds nothing.

  pib-dkms               dkms.conf, guest-driver/ (Kbuild, every source and header) and the
                         include/ headers the driver includes, under /usr/src/pib-<version>/
  ibverbs-providers-pib  libpib-rdmav34.so where Debian's libibverbs looks, and pib.driver
  pib-qemu               /usr/lib/pib/qemu-system-x86_64 and the /usr/bin wrapper, no clash
                         with Debian's qemu-system-x86

Run: python3 tests/host/test_packages.py.  It reads build/packages/ (build/trixie/packages/
with PIB_STACK=trixie), or PIB_PACKAGES_DIR.  Without packages there it prints a SKIP line and
"0 passed, 0 failed, 1 skipped" (exit 0), unless PIB_TEST_PACKAGES=1: then their absence is a
failure.  The last line is "N passed, N failed"; the exit status is 1 when a test failed.
"""

import glob
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import hostunit  # noqa: E402 (beside this file)

STACK_OUT = os.path.join(TOP, "build", "trixie") if os.environ.get("PIB_STACK") == "trixie" \
    else os.path.join(TOP, "build")
PKG_DIR = os.environ.get("PIB_PACKAGES_DIR") or os.path.join(STACK_OUT, "packages")
MULTIARCH = "x86_64-linux-gnu"


def deb(name):
    """The one .deb of package NAME in PKG_DIR."""
    found = glob.glob(os.path.join(PKG_DIR, f"{name}_*.deb"))
    if len(found) != 1:
        raise AssertionError(f"{PKG_DIR}: {len(found)} {name} packages, want one")
    return found[0]


def field(path, name):
    return subprocess.run(["dpkg-deb", "-f", path, name], check=True, capture_output=True,
                          text=True).stdout.strip()


def payload(path):
    """{path without the leading ./: bytes} of the package's regular files and symlinks."""
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", path], check=True,
                         capture_output=True).stdout
    files = {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        for m in t.getmembers():
            if m.isfile():
                files[m.name[2:]] = (t.extractfile(m).read(), m.mode)
            elif m.issym():
                files[m.name[2:]] = (b"-> " + m.linkname.encode(), m.mode)
    return files


def docs(name, man=()):
    """What debhelper adds to every package: the changelog and the copyright file."""
    return {f"usr/share/doc/{name}/changelog.gz", f"usr/share/doc/{name}/copyright", *man}


def driver_sources():
    """The driver's source files in the clone and the include/ headers it reaches through
    Kbuild's -I$(src)/../include, as paths relative to the top of the clone."""
    drv = sorted(os.path.relpath(f, TOP) for f in glob.glob(os.path.join(TOP, "guest-driver", "*.[ch]"))
                 if not f.endswith(".mod.c"))
    todo, headers = list(drv), set()
    while todo:
        with open(os.path.join(TOP, todo.pop())) as f:
            for h in re.findall(r'^#include "([^"]+)"', f.read(), re.M):
                if os.path.exists(os.path.join(TOP, "guest-driver", h)) or f"include/{h}" in headers:
                    continue
                headers.add(f"include/{h}")
                todo.append(f"include/{h}")
    return ["guest-driver/Kbuild"] + drv + sorted(headers)


class DkmsPackage(unittest.TestCase):
    def setUp(self):
        self.deb = deb("pib-dkms")
        self.version = field(self.deb, "Version")
        self.src = f"usr/src/pib-{self.version}/"
        self.files = payload(self.deb)

    def test_exactly_the_driver_source_and_dkms_conf(self):
        want = {self.src + "dkms.conf"} | {self.src + f for f in driver_sources()} | docs("pib-dkms")
        self.assertEqual(set(self.files), want)

    def test_every_object_kbuild_names_has_its_source(self):
        kbuild = self.files[self.src + "guest-driver/Kbuild"][0].decode()
        objs = re.search(r"^pib-y\s*:=(.*)$", kbuild, re.M).group(1).split()
        self.assertIn("pib_main.o", objs)
        for o in objs:
            c = self.src + "guest-driver/" + o[:-2] + ".c"
            self.assertTrue(c in self.files, f"Kbuild names {o}, {c} is not in the package")
        # The contract headers are found beside guest-driver/, as in the clone.
        self.assertRegex(kbuild, r"ccflags-y\s*:=\s*-I\$\(src\)/\.\./include")

    def test_every_quoted_include_resolves_in_the_package(self):
        for path, (text, _) in self.files.items():
            if not path.startswith(self.src) or not path.endswith((".c", ".h")):
                continue
            for h in re.findall(r'^#include "([^"]+)"', text.decode(), re.M):
                self.assertTrue({self.src + "guest-driver/" + h, self.src + "include/" + h} & set(self.files),
                                f"{path} includes {h}, not in the package")

    def test_dkms_conf(self):
        conf = dict(re.findall(r'^(\w+(?:\[0\])?)="([^"]*)"', self.files[self.src + "dkms.conf"][0].decode(), re.M))
        self.assertEqual(conf.get("PACKAGE_NAME"), "pib")
        self.assertEqual(conf.get("PACKAGE_VERSION"), self.version)     # dh_dkms -V filled it in
        self.assertEqual(conf.get("BUILT_MODULE_NAME[0]"), "pib")
        self.assertEqual(conf.get("BUILT_MODULE_LOCATION[0]"), "guest-driver/")
        self.assertIn("/build/guest-driver modules", conf.get("MAKE[0]", ""))
        self.assertEqual(conf.get("AUTOINSTALL"), "yes")

    def test_dkms_runs_at_install(self):
        self.assertRegex(field(self.deb, "Depends"), r"\bdkms\b")
        self.assertEqual(field(self.deb, "Architecture"), "all")
        ctl = subprocess.run(["dpkg-deb", "-I", self.deb, "postinst"], check=True, capture_output=True,
                             text=True).stdout
        self.assertIn("/usr/lib/dkms/common.postinst", ctl)


class ProviderPackage(unittest.TestCase):
    SO = f"usr/lib/{MULTIARCH}/libibverbs/libpib-rdmav34.so"
    DRIVER = "etc/libibverbs.d/pib.driver"

    def setUp(self):
        self.deb = deb("ibverbs-providers-pib")
        self.files = payload(self.deb)

    def test_exactly_the_provider_and_its_driver_file(self):
        self.assertEqual(set(self.files), {self.SO, self.DRIVER} | docs("ibverbs-providers-pib"))

    def test_driver_file_names_pib(self):
        self.assertEqual(self.files.get(self.DRIVER, (None,))[0], b"driver pib\n")
        conffiles = subprocess.run(["dpkg-deb", "-I", self.deb, "conffiles"], capture_output=True,
                                   text=True).stdout.split()
        self.assertIn("/" + self.DRIVER, conffiles)

    def test_provider_abi_and_dependency(self):
        # The provider ABI is the symbol version IBVERBS_PRIVATE_34, in libibverbs1 of Debian 12
        # (44.0) and 13 (56.1): packaging/README.md.
        with tempfile.NamedTemporaryFile(suffix=".so") as so:
            so.write(self.files[self.SO][0])
            so.flush()
            dynsym = subprocess.run(["objdump", "-T", so.name], check=True, capture_output=True,
                                    text=True).stdout
        private = set(re.findall(r"\b(IBVERBS_PRIVATE_\d+)\b", dynsym))
        self.assertEqual(private, {"IBVERBS_PRIVATE_34"})
        self.assertRegex(dynsym, r"IBVERBS_PRIVATE_34\)?\s+verbs_register_driver_34")
        self.assertRegex(field(self.deb, "Depends"), r"\blibibverbs1 \(>= 44\.0\)")


class QemuPackage(unittest.TestCase):
    BIN = "usr/lib/pib/qemu-system-x86_64"
    WRAPPER = "usr/bin/pib-qemu-system-x86_64"

    def setUp(self):
        self.deb = deb("pib-qemu")
        self.files = payload(self.deb)

    def test_exactly_the_binary_and_wrapper(self):
        self.assertEqual(set(self.files), {self.BIN, self.WRAPPER} | docs(
            "pib-qemu", ["usr/share/man/man1/pib-qemu-system-x86_64.1.gz"]))
        for f in (self.BIN, self.WRAPPER):
            self.assertEqual(self.files[f][1] & 0o111, 0o111, f"{f} is not executable")
        self.assertEqual(self.files[self.BIN][0][:4], b"\x7fELF")

    def test_wrapper_runs_the_binary_with_debians_firmware(self):
        text = self.files[self.WRAPPER][0].decode()
        self.assertRegex(text, r'(?m)^exec /usr/lib/pib/qemu-system-x86_64 '
                               r'-L /usr/share/qemu -L /usr/share/seabios "\$@"$')
        depends = field(self.deb, "Depends")
        for p in ("qemu-system-data", "seabios"):
            self.assertRegex(depends, rf"(^|, ){p}(,|$| )")


class Lintian(unittest.TestCase):
    def test_no_error(self):
        debs = sorted(glob.glob(os.path.join(PKG_DIR, "*.deb")))
        r = subprocess.run(["lintian", "--fail-on", "error", *debs], capture_output=True, text=True)
        errors = [line for line in r.stdout.splitlines() if line.startswith("E:")]
        self.assertEqual(errors, [])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    if not glob.glob(os.path.join(PKG_DIR, "*.deb")):
        if os.environ.get("PIB_TEST_PACKAGES") == "1":
            print(f"FAIL test_packages: no .deb in {PKG_DIR} (make packages)")
            print("0 passed, 1 failed")
            sys.exit(1)
        print(f"SKIP test_packages: no .deb in {PKG_DIR} (make packages; "
              "PIB_TEST_PACKAGES=1 makes this a failure)")
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(0)
    hostunit.main(__name__)
