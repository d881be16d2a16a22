"""The guest image: the initrd a run boots, with an optional overlay of host files."""

import gzip
import os
import stat

from .config import INITRD, die, path, say


def cpio_newc(root):
    """A cpio archive ("newc" format, the one the kernel unpacks) of the tree under ROOT, with
    every file owned by root.  Regular files, directories and symlinks only."""
    out = bytearray()
    ino = 1

    def entry(name, mode, data=b"", nlink=1, mtime=0):
        nonlocal ino
        name_b = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, nlink, mtime, len(data), 0, 0, 0, 0, len(name_b), 0]
        out.extend(b"070701" + b"".join(b"%08X" % v for v in fields) + name_b)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))
        ino += 1

    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) + sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            mtime = int(st.st_mtime)
            if stat.S_ISLNK(st.st_mode):
                entry(rel, st.st_mode, os.readlink(full).encode(), mtime=mtime)
            elif stat.S_ISDIR(st.st_mode):
                entry(rel, st.st_mode, nlink=2, mtime=mtime)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    entry(rel, st.st_mode, f.read(), mtime=mtime)
            else:
                say(f"overlay: skipping {full} (not a file, directory or symlink)")
    entry("TRAILER!!!", 0)
    return bytes(out)


def make_initrd(overlay):
    """The initrd for this run: the image itself, or the image followed by a gzipped cpio of
    OVERLAY (the kernel unpacks concatenated archives in order, so overlay files win)."""
    if not overlay:
        return INITRD
    if not os.path.isdir(overlay):
        die(f"--overlay {overlay}: not a directory")
    combined = path("initrd-overlay.img")
    with open(INITRD, "rb") as f:
        base = f.read()
    with open(combined + ".tmp", "wb") as f:
        f.write(base)
        f.write(gzip.compress(cpio_newc(overlay), compresslevel=6, mtime=0))
    os.replace(combined + ".tmp", combined)
    return combined
