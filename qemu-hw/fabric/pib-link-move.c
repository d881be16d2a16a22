/*
 * pib fabric - a link whose other end moves: MOVE notices, tokens, recovery
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The protocol is include/pib_link.h's, "Moving".  This file is its state machine, for any
 * owner of a PibLink (an HCA's port, a switch port).  What it decides is which stream events
 * the owner hears: a stream that closes after a MOVE notice, and comes back from the same port
 * (its GUID and token) in time, is never reported; the owner's port keeps its state, as an IB
 * port keeps it through a link error recovery.
 *
 *                  MOVE(T, wait) from the peer
 *     NORMAL  ----------------------------------->  NOTICED (until arrival + wait)
 *       ^  ^          MOVE(wait 0) / it expires          |
 *       |  +-------------------------------------------+ | the stream closes
 *       |                                                v
 *       |   the wait ends: owner hears STREAM_DOWN    RECOVERING (until close + wait)
 *       +---- (and STREAM_UP if a stream is open) --- |   a new stream: the owner hears
 *       |                                             |   nothing; we send our HELLO
 *       |   HELLO with the same port GUID and T:      |
 *       +---- recovered (owner: recovered, HELLO) <---+
 *       |   any other HELLO: owner hears
 *       +---- STREAM_DOWN, STREAM_UP, HELLO <---------+
 *
 * A moved port enters RECOVERING from its own side when its machine arrives
 * (pib_link_move_arrived), waiting for its old peer's GUID and token.  A migration stream gave
 * it both, and its own token, which its HELLOs carry from then on.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/guest-random.h"
#include "qemu/timer.h"
#include "migration/vmstate.h"

#include "pib-fabric.h"
#include "../trace.h"

static int64_t move_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static void move_recover_expired(void *opaque)
{
    PibLink *l = opaque;

    if (!l->recovering) {
        return;
    }
    trace_pib_link_move(l->id, "recovery timed out: the port goes down", l->recover_token, 0);
    l->recovering = false;
    l->ops->event(l, PIB_PEV_STREAM_DOWN);
    if (l->stream_open) {
        l->ops->event(l, PIB_PEV_STREAM_UP);
    }
}

void pib_link_move_init(PibLink *l)
{
    do {
        qemu_guest_getrandom_nofail(&l->token, sizeof(l->token));
    } while (!l->token);
    l->recover_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, move_recover_expired, l);
}

void pib_link_move_fini(PibLink *l)
{
    timer_free(l->recover_timer);
    l->recover_timer = NULL;
}

/* Hold the owner's port for the port GUID and token, wait_ms from now. */
static void move_recover(PibLink *l, uint64_t guid, uint64_t token, uint32_t wait_ms)
{
    l->recovering = true;
    l->recover_guid = guid;
    l->recover_token = token;
    timer_mod(l->recover_timer, move_now() + (int64_t)wait_ms * SCALE_MS);
    trace_pib_link_move(l->id, "recovering: the port holds its state", token, wait_ms);
}

/* A MOVE frame of len bytes at buf (its length was checked with the header). */
void pib_link_move_rx(PibLink *l, const uint8_t *buf, uint32_t len)
{
    struct pib_link_move m;
    uint32_t wait_ms;

    memcpy(&m, buf, sizeof(m));
    wait_ms = MIN(be32_to_cpu(m.wait_ms_be), PIB_LINK_MOVE_WAIT_MAX_MS);
    l->notice_token = be64_to_cpu(m.token_be);
    l->notice_wait_ms = wait_ms;
    l->notice_until = wait_ms ? move_now() + (int64_t)wait_ms * SCALE_MS : 0;
    trace_pib_link_move(l->id, wait_ms ? "peer moves" : "peer stays", l->notice_token, wait_ms);
}

/* The stream closed: true if the owner is not to hear of it (a noticed move). */
bool pib_link_move_closed(PibLink *l)
{
    bool noticed = l->notice_until && move_now() < l->notice_until;

    l->notice_until = 0;
    if (l->recovering) {
        return true;            /* a new stream that closed before its HELLO: wait on */
    }
    if (!noticed || !l->peer_port_guid) {
        return false;
    }
    move_recover(l, l->peer_port_guid, l->notice_token, l->notice_wait_ms);
    return true;
}

/* A stream opened: true if the owner is not to hear of it (we are recovering). */
bool pib_link_move_opened(PibLink *l)
{
    return l->recovering;
}

/*
 * The peer's HELLO, its GUID and token in l->peer_*: false if the owner is to hear the whole
 * retraining first (STREAM_DOWN, STREAM_UP; the caller then reports the HELLO either way).
 */
bool pib_link_move_hello(PibLink *l)
{
    if (!l->recovering) {
        return true;
    }
    l->recovering = false;
    timer_del(l->recover_timer);
    if (l->peer_port_guid == l->recover_guid && l->peer_token == l->recover_token &&
        l->recover_token) {
        l->recoveries++;
        trace_pib_link_move(l->id, "recovered: the same port came back", l->peer_token, 0);
        if (l->ops->recovered) {
            l->ops->recovered(l);
        }
        return true;
    }
    trace_pib_link_move(l->id, "another port came: the link retrains", l->peer_token, 0);
    return false;
}

/* Recovery ends without the peer: the link is taken down on purpose, or lost framing. */
void pib_link_move_abort(PibLink *l)
{
    l->notice_until = 0;
    if (l->recovering) {
        l->recovering = false;
        timer_del(l->recover_timer);
    }
}

/* Tell the peer our machine is about to move (wait_ms), or (0) that it stayed. */
void pib_link_move_announce(PibLink *l, uint32_t wait_ms)
{
    struct pib_link_move m = {
        .token_be = cpu_to_be64(l->token),
        .wait_ms_be = cpu_to_be32(wait_ms),
    };
    PibPacket *p;

    if (!l->stream_open) {
        return;
    }
    p = pib_link_packet_new(l, sizeof(m));
    p->data[1] = PIB_FRAME_MOVE;
    memcpy(pib_packet_ib(p), &m, sizeof(m));
    trace_pib_link_move(l->id, wait_ms ? "announcing a move" : "withdrawing the move",
                        l->token, wait_ms);
    pib_link_enqueue(l, p);
    pib_link_tx_flush(l);
}

/*
 * Our machine arrived from a migration: our token is token, and if the port was up, it waits
 * wait_ms for its old peer (peer_guid, peer_token) instead of going down.
 */
void pib_link_move_arrived(PibLink *l, uint64_t token, uint64_t peer_guid,
                           uint64_t peer_token, uint32_t wait_ms)
{
    if (token) {
        l->token = token;
    }
    if (peer_guid && wait_ms) {
        move_recover(l, peer_guid, peer_token, wait_ms);
    }
}

/*
 * Migration: what a port's link leaves in the stream, and what it does with it on arrival
 */

const VMStateDescription vmstate_pib_link_move = {
    .name = "pib-link-move",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT32(port_sm, PibLinkMoveSaved),
        VMSTATE_UINT64(token, PibLinkMoveSaved),
        VMSTATE_UINT64(peer_guid, PibLinkMoveSaved),
        VMSTATE_UINT64(peer_token, PibLinkMoveSaved),
        VMSTATE_END_OF_LIST()
    },
};

/* At the save: the owner's port is in state sm. */
void pib_link_move_save(PibLink *l, PibPortSmState sm, PibLinkMoveSaved *m)
{
    m->port_sm = sm;
    m->token = l->token;
    m->peer_guid = pib_port_sm_link_up(sm) ? l->peer_port_guid : 0;
    m->peer_token = l->peer_token;
}

/*
 * At the load (m->port_sm checked by the caller, < PIB_PSM__MAX): true if the owner's port
 * takes its saved state, m->port_sm, and keeps it while the link waits PIB_LINK_MOVE_HOLD_MS
 * for the old peer; that peer's HELLO brings the link back without a change, and none in time
 * takes the port down then.  False (a port that was not up, or a peer without a token): the
 * new link decides, as a new cable would.
 */
bool pib_link_move_load(PibLink *l, PibLinkMoveSaved *m)
{
    if (!pib_port_sm_link_up(m->port_sm)) {
        m->peer_guid = 0;
    }
    pib_link_move_arrived(l, m->token, m->peer_guid, m->peer_token, PIB_LINK_MOVE_HOLD_MS);
    return m->peer_guid != 0;
}

/*
 * The notices a node sends (PibMoveNotice, pib-link.h)
 *
 * The notice goes when an outgoing migration starts, while the machine still runs: the MOVE
 * frame then leaves in the seconds the RAM takes to copy.  Sent only from the save, it could
 * wait behind a socket full of data that the stopped source never sends before it quits (a
 * busy sender's), and the peer would see the old cable close without it: a link down.  The
 * save sends it again, which renews the peer's wait for a migration that took longer than
 * PIB_LINK_MOVE_HOLD_MS.  A migration that fails while the machine still runs withdraws it;
 * one that fails after the stop, when the machine runs again, as does a save that the machine
 * outlives where it was (a snapshot).  A machine that runs after a load has nothing to
 * withdraw: its cables are new.
 *
 *                 migration starts / the save: announce(HOLD)
 *     QUIET  ------------------------------------------------>  ANNOUNCED
 *       ^   the migration fails while running / the machine        |
 *       +-- runs again, not loaded: announce(0) -------------------+
 */

static void move_notice_announce(PibMoveNotice *m)
{
    if (m->announce(m->opaque, PIB_LINK_MOVE_HOLD_MS)) {
        m->announced = true;
    }
}

static void move_notice_withdraw(PibMoveNotice *m)
{
    m->announce(m->opaque, 0);
    m->announced = false;
}

static void move_notice_failed(PibMoveNotice *m)
{
    if (m->announced && !m->stopped) {
        move_notice_withdraw(m);
    }
}

#if PIB_MIG_EVENTS
static int move_notice_event(NotifierWithReturn *n, MigrationEvent *e, Error **errp)
{
    PibMoveNotice *m = container_of(n, PibMoveNotice, notifier);

    if (e->type == MIG_EVENT_PRECOPY_SETUP) {
        move_notice_announce(m);
    } else if (e->type == MIG_EVENT_PRECOPY_FAILED) {
        move_notice_failed(m);
    }
    return 0;
}
#else
static void move_notice_event(Notifier *n, void *data)
{
    PibMoveNotice *m = container_of(n, PibMoveNotice, notifier);
    MigrationState *ms = data;

    if (migration_in_setup(ms)) {
        move_notice_announce(m);
    } else if (migration_has_failed(ms)) {
        move_notice_failed(m);
    }
}
#endif

void pib_move_notice_init(PibMoveNotice *m, bool (*announce)(void *opaque, uint32_t wait_ms),
                          void *opaque)
{
    m->announce = announce;
    m->opaque = opaque;
    m->announced = false;
    m->stopped = !runstate_is_running();
#if PIB_MIG_EVENTS
    migration_add_notifier(&m->notifier, move_notice_event);
#else
    m->notifier.notify = move_notice_event;
    add_migration_state_change_notifier(&m->notifier);
#endif
}

void pib_move_notice_fini(PibMoveNotice *m)
{
#if PIB_MIG_EVENTS
    migration_remove_notifier(&m->notifier);
#else
    remove_migration_state_change_notifier(&m->notifier);
#endif
}

/* The save (the owner's pre_save): the machine may be about to move. */
void pib_move_notice_save(PibMoveNotice *m)
{
    move_notice_announce(m);
}

/* The machine stops, or runs again (loaded: from a migration stream, on new cables). */
void pib_move_notice_run_state(PibMoveNotice *m, bool running, bool loaded)
{
    m->stopped = !running;
    if (!running) {
        return;
    }
    if (m->announced && !loaded) {
        move_notice_withdraw(m);        /* saved, and still here: the move is off */
    }
    m->announced = false;
}
