#!/usr/bin/env python3
"""Seed inputs for QEMU's generic-fuzz target with the pib device (run.sh's "mmio" target).

generic-fuzz reads an input as commands separated by b"FUZZ": an opcode byte, then the command's
C struct as it lies in memory (tests/qtest/fuzz/generic_fuzz.c in the QEMU tree).  MMIO commands
name a region by its index among the fuzzed regions, in address order: with the device alone,
0 is BAR0 (registers), 1 is BAR2 (UAR pages), 2 the MSI-X table, 3 the PBA.  Whatever the
device reads by DMA comes from the DMA patterns the input adds.

Each seed brings the device a step further than random bytes would: the admin queue enabled, a
run of admin commands, UAR doorbells, MSI-X.  The fuzzer mutates from there.

Usage: mmio-seeds.py DIR
"""
import os
import struct
import sys

OP_IN, OP_OUT, OP_READ, OP_WRITE, OP_PCI_READ, OP_PCI_WRITE, OP_DISABLE_PCI, \
    OP_ADD_DMA_PATTERN, OP_CLEAR_DMA_PATTERNS, OP_CLOCK_STEP = range(10)
BYTE, WORD, LONG, QUAD = range(4)
REGS, UAR, MSIX = 0, 1, 2
SEP = b"FUZZ"

# include/pib_hw.h
AQ_DEPTH, AQ_SQ_LO, AQ_SQ_HI, AQ_CQ_LO, AQ_CQ_HI, AQ_DB = 0x14, 0x18, 0x1c, 0x20, 0x24, 0x28
AEQ_DEPTH, AEQ_LO, AEQ_DB, CONTROL, CEQ_DEPTH, CEQ_LO = 0x2c, 0x30, 0x38, 0x10, 0x54, 0x58


def write(base, off, val, size=LONG):
    # struct { u8 size; u8 base; u32 offset; u64 value; }: natural alignment, 16 bytes
    return bytes([OP_WRITE]) + struct.pack("<BBxxIQ", size, base, off, val)


def read(base, off, size=LONG):
    return bytes([OP_READ]) + struct.pack("<BBxxI", size, base, off)


def dma(pattern, index=0, stride=0):
    return bytes([OP_ADD_DMA_PATTERN, index, stride]) + pattern


def step():
    return bytes([OP_CLOCK_STEP])


def enable(depth=16):
    return [write(REGS, AQ_DEPTH, depth), write(REGS, AQ_SQ_LO, 0x100000),
            write(REGS, AQ_SQ_HI, 0), write(REGS, AQ_CQ_LO, 0x110000),
            write(REGS, AEQ_DEPTH, 16), write(REGS, AEQ_LO, 0x120000),
            write(REGS, CEQ_DEPTH, 16), write(REGS, CEQ_LO, 0x130000),
            write(REGS, CONTROL, 1)]


def admin_cmd(opcode, resp_addr=0x140000, resp_len=256, inp=b""):
    # struct pib_admin_cmd: opcode, rsvd, cmd_id, resp_len, resp_addr, in[48]
    return struct.pack("<BBHIQ", opcode, 0, 1, resp_len, resp_addr) + inp.ljust(48, b"\0")


def seeds():
    s = {}
    s["enable-nop"] = enable() + [dma(admin_cmd(0x08, inp=struct.pack("<I", 0x1234))),
                                  write(REGS, AQ_DB, 1), step(), read(REGS, 0xc)]
    # Every admin command once (0x01..0x2a), and the unknown ones between: each DMA fill takes
    # the next pattern, so pattern i is command i.
    s["admin-run"] = enable(64) + [dma(admin_cmd(op, inp=struct.pack("<BxxxI", 1, 0)))
                                   for op in range(0x01, 0x2b)] + \
        [write(REGS, AQ_DB, 0x2a), step()]
    # Data-path commands one at a time: CREATE_PD, REG_MR (its page list comes from the next
    # pattern), CREATE_CQ, MODIFY_CQ (count 4, period 100 us) and an arm of that CQ.
    mr = struct.pack("<IIQQQII", 1, 0xf, 0x1000, 0x2000, 0x150000, 2, 0)
    cq = struct.pack("<IIQII", 2, 2, 0x160000, 0, 0)
    pages = struct.pack("<QQ", 0x170000, 0x171000)
    s["datapath"] = enable() + [
        dma(admin_cmd(0x10)), write(REGS, AQ_DB, 1), step(), bytes([OP_CLEAR_DMA_PATTERNS]),
        dma(admin_cmd(0x12, inp=mr)), dma(pages), write(REGS, AQ_DB, 2), step(),
        bytes([OP_CLEAR_DMA_PATTERNS]),
        dma(admin_cmd(0x14, inp=cq)), dma(pages), write(REGS, AQ_DB, 3), step(),
        bytes([OP_CLEAR_DMA_PATTERNS]),
        dma(admin_cmd(0x2a, inp=struct.pack("<IHH", 1, 4, 100))), write(REGS, AQ_DB, 4), step(),
        write(UAR, 0x10, 1 | 1 << 24, QUAD), step()]
    # Doorbells on the UAR pages: SQ, RQ, CQ, SRQ, for objects that may not exist
    s["uar-doorbells"] = enable() + [write(UAR, 0x1000 * p + r, (i << 32) | o, QUAD)
                                     for p, r, i, o in ((0, 0, 1, 2), (0, 8, 1, 2),
                                                        (0, 0x10, 1, 1 | 1 << 24),
                                                        (1, 0x18, 3, 1), (255, 0, 5, 3))]
    # MSI-X: unmask, enable through config space, then events
    s["msix"] = [bytes([OP_PCI_WRITE]) + struct.pack("<BBBxI", WORD, 0, 0x42, 0x8000)] + \
        [write(MSIX, 16 * v + 12, 0) for v in range(4)] + enable() + \
        [dma(admin_cmd(0x08)), write(REGS, AQ_DB, 1), step(), step()]
    # Registers at every offset and size
    s["registers"] = [write(REGS, off, 0xffffffff, size) for off, size in
                      ((0x0, LONG), (0x11, BYTE), (0x40, WORD), (0x50, QUAD), (0x64, LONG),
                       (0xffc, LONG))] + [read(REGS, o) for o in range(0, 0x68, 4)]
    return s


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, cmds in seeds().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(SEP.join(cmds))


if __name__ == "__main__":
    main()
