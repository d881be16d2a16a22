/*
 * pib fabric - what every node of the fabric shares: the one header of qemu-hw/fabric/
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * qemu-hw/ holds two QEMU devices, the HCA (hca/, -device pib-hca) and the switch
 * (switch/, -device pib-switch), over this layer.  A node's device includes this header and
 * nothing of the other device; nothing here knows either of them (docs/explanation/design.md,
 * "Layers").  The parts, each with its own header:
 *
 *   pib-port-sm.h  the port state machine (PortState and PortPhysicalState), its names,
 *                  and the one way an SM's PortInfo Set reaches a port
 *   pib-link.h     a port's cable: the chardev, the link frames of include/pib_link.h, the
 *                  transmit queue and the frame buffers (pib-link.c, pib-link-tx.c)
 *   pib-packet.h   the IB packet codec: build and parse LRH, GRH, BTH and the extension
 *                  headers (pib-packet.c)
 *   pib-mgmt.h     the management agents a node runs for its ports: the SMA (pib-sma.c,
 *                  pib-sma-port.c), the PMA (pib-pma.c) and the CC agent (pib-cc.c)
 *
 * The wire and MAD formats themselves are the project's contract, include/pib_link.h and
 * include/pib_mad.h.
 */
#ifndef HW_PIB_FABRIC_H
#define HW_PIB_FABRIC_H

#include "pib-port-sm.h"
#include "pib-link.h"
#include "pib-packet.h"
#include "pib-mgmt.h"

#endif /* HW_PIB_FABRIC_H */
