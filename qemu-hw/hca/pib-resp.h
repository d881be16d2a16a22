/*
 * pib HCA device model - the responder's state machine, shared by its two files
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * pib-resp.c runs the steps (its header lists them); pib-resp-rdatom.c holds
 * the steps and the sender for RDMA READ and atomics.  The packets are those
 * of include/pib_link.h.
 */
#ifndef HW_PIB_RESP_H
#define HW_PIB_RESP_H

#include "pib-internal.h"

#define PIB_AETH_NO_CREDITS     0x1f    /* ACK credit field: not used */

typedef enum PibRespStep {
    RESP_CHK_PSN,
    RESP_CHK_OP_SEQ,
    RESP_CHK_OP_VALID,
    RESP_CHK_RESOURCE,
    RESP_CHK_LENGTH,
    RESP_CHK_RKEY,
    RESP_EXECUTE,
    RESP_COMPLETE,
    RESP_ACKNOWLEDGE,
    RESP_DUPLICATE,
    RESP_NAK_SEQ,
    RESP_RNR,
    RESP_ERR_INVALID,
    RESP_ERR_ACCESS,
    RESP_ERR_OP,
    RESP_ERR_XRC,
    RESP_UC_DROP,
    RESP_DONE,
} PibRespStep;

/* One request packet on its way through the steps. */
typedef struct PibRespCtx {
    PibQp *qp;
    const PibPktInfo *pi;
    uint32_t mask;          /* the opcode's PIB_OPM_* */
    uint8_t rq_status;      /* receive WQE error to complete with, if any */
    PibMr *mr;              /* the MR an RDMA/atomic targets */
    PibSrq *srq;            /* receive WQEs come from here (the QP's SRQ, or the */
                            /* XRC SRQ the request names), or NULL: the RQ */
    uint32_t pdn;           /* the PD its keys must be in (the QP's, or that */
                            /* XRC SRQ's) */
    enum pib_counter drop;  /* why the packet is dropped, if known */
} PibRespCtx;

/* pib-resp.c */
PibPacket *pib_resp_build(PibQp *qp, PibPktFields *f, uint32_t paylen);
void pib_resp_send(PibQp *qp, PibPktFields *f);
void pib_resp_ack(PibQp *qp, uint32_t psn, uint8_t syndrome);
bool pib_resp_pending(PibQp *qp);

/* pib-resp-rdatom.c */
PibRespStep pib_resp_atomic(PibRespCtx *c);
PibRespStep pib_resp_read(PibRespCtx *c);
PibRespStep pib_resp_flush(PibRespCtx *c);
PibRespStep pib_resp_duplicate(PibRespCtx *c);

#endif /* HW_PIB_RESP_H */
