// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * pib-verbs-test: completion timestamps and CQ event moderation
 * (the program is described in pib_verbs_test.c; what the files share is in pib_verbs.h)
 *
 * Subtests timestamps and cq-moderation, both timed against the device clock.
 */
#define _GNU_SOURCE
#include "pib_verbs.h"

/* =============================================================================================
 * Subtest timestamps
 *
 * The device clock and completion timestamps: ibv_query_rt_values_ex never goes back and keeps
 * time; then a ping-pong of SENDs on extended CQs with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
 * where every completion's timestamp lies between the clock readings taken before the work it
 * completes could have started and after it was polled, and a CQ's timestamps never decrease.
 * Each role only compares timestamps with its own device's clock.
 *
 * The same completions' wall-clock timestamps (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, the
 * machine's real time) were taken with their device-clock ones, and both clocks run at the host's
 * pace, so wall-clock minus device clock is the same for every completion, within
 * TS_WALL_STEADY_NS.  They are real time: within TS_WALL_NEAR_NS of the guest's CLOCK_REALTIME.
 * That bound is loose on purpose: the guest's system time starts from the RTC (whole seconds at
 * boot) and then follows the guest's own clocksource, which under TCG drifts from the host's
 * (a TSC calibrated against emulated timers), and nothing (no NTP) pulls it back.  A device clock
 * counting from the machine's start, or any stamp not taken at the completion, fails one check.
 */

#define TS_ROUNDS 32
#define TS_LEN 64
#define TS_READS 1000
#define TS_WALL_STEADY_NS 10000000ll	/* 10 ms: far above the drift of two host clocks */
#define TS_WALL_NEAR_NS 60000000000ll	/* 60 s: the guest's own clock drifts (see above) */

static int64_t realtime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The device clock in its own ticks (hca_core_clock kHz), or -1 (a failed check). */
static int64_t ts_clock(struct role *r)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int ret = ibv_query_rt_values_ex(r->ctx, &v);

	if (ret || !(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK)) {
		fail(r, "ibv_query_rt_values_ex: %s (comp_mask 0x%x)", strerror(ret), v.comp_mask);
		return -1;
	}
	return (int64_t)v.raw_clock.tv_sec * 1000000000 + v.raw_clock.tv_nsec;
}

/*
 * The device's clock rate, or 0 when it has none (then the subtest has nothing to test); the
 * raw clock reads never go back, and keep pace with the system's clock over a short sleep (at
 * least half of it: the guest may be descheduled, but a device clock cannot run slow).
 */
static uint64_t ts_check_clock(struct role *r)
{
	struct ibv_device_attr_ex attr;
	int64_t t, prev, start, ms0;
	double ms_dev, ms_sys;
	int back = 0, ret;

	ret = ibv_query_device_ex(r->ctx, NULL, &attr);
	if (ret) {
		fail(r, "ibv_query_device_ex: %s", strerror(ret));
		return 0;
	}
	if (!attr.hca_core_clock) {
		skip(r, "the device reports no clock (hca_core_clock 0)");
		return 0;
	}
	info(r, "device clock %" PRIu64 " kHz, timestamp mask 0x%" PRIx64, attr.hca_core_clock,
	     attr.completion_timestamp_mask);
	start = prev = ts_clock(r);
	if (start < 0)
		return 0;
	for (int i = 0; i < TS_READS; i++) {
		t = ts_clock(r);
		if (t < 0)
			return 0;
		back += t < prev;
		prev = t;
	}
	check(r, back == 0 && prev > start, "%d reads of ibv_query_rt_values_ex never go back and "
	      "advance (%d went back; %" PRId64 " ticks in all)", TS_READS, back, prev - start);
	ms0 = now_ms();
	start = ts_clock(r);
	sleep_ms(50);
	t = ts_clock(r);
	ms_sys = (double)(now_ms() - ms0);
	ms_dev = (double)(t - start) / (double)attr.hca_core_clock;
	check(r, start >= 0 && t >= 0 && ms_dev >= ms_sys / 2,
	      "the device clock kept time over a sleep: %.1f ms of it in %.0f ms of the system's",
	      ms_dev, ms_sys);
	return attr.hca_core_clock;
}

/*
 * One completion of an extended CQ, with its timestamp.  1: got it; 0: none within the timeout;
 * -1: poll error.
 */
static int ts_poll(struct ibv_cq_ex *cqx, uint64_t *wr_id, enum ibv_wc_status *status,
		   uint32_t *byte_len, uint64_t *ts, uint64_t *wall, int timeout_ms)
{
	struct ibv_poll_cq_attr attr = {};
	int64_t deadline = now_ms() + timeout_ms;
	int ret;

	while ((ret = ibv_start_poll(cqx, &attr)) == ENOENT) {
		if (now_ms() >= deadline)
			return 0;
		usleep(50);
	}
	if (ret)
		return -1;
	*wr_id = cqx->wr_id;
	*status = cqx->status;
	*byte_len = ibv_wc_read_byte_len(cqx);
	*ts = ibv_wc_read_completion_ts(cqx);
	*wall = ibv_wc_read_completion_wallclock_ns(cqx);
	ibv_end_poll(cqx);
	return 1;
}

/* The tallies of a role's completions: each within its bracket, each CQ non-decreasing. */
struct ts_tally {
	int n, bad_status, outside, back, bad_data, wall_far, wall_unsteady;
	bool have_wall;
	int64_t wall_base;		/* the first completion's wall clock - device clock */
	int64_t wall_max_gap;		/* the largest |wall-clock stamp - CLOCK_REALTIME|, ns */
	int64_t wall_max_step;		/* the largest |(wall - device clock) - wall_base|, ns */
	uint64_t prev_s, prev_r;
	char first_bad[160];
};

static void ts_note(struct ts_tally *t, const char *what, int round, uint64_t ts, int64_t lo,
		    int64_t hi, uint64_t *prev)
{
	bool outside = (int64_t)ts < lo || (int64_t)ts > hi, back = ts < *prev;

	t->n++;
	t->outside += outside;
	t->back += back;
	if ((outside || back) && !t->first_bad[0])
		snprintf(t->first_bad, sizeof(t->first_bad), "round %d %s: %" PRIu64 " not in "
			 "[%" PRId64 ", %" PRId64 "] or below the previous %" PRIu64, round, what,
			 ts, lo, hi, *prev);
	*prev = ts;
}

/* One completion on cqx that must be wr_id, successful; its timestamp tallied. */
static int ts_expect(struct role *r, struct ts_tally *t, struct ibv_cq_ex *cqx, uint64_t wr_id,
		     const char *what, int round, int64_t lo, uint64_t *prev, uint32_t *len)
{
	enum ibv_wc_status st;
	uint64_t id, ts, wall;
	int64_t hi, gap;
	int got = ts_poll(cqx, &id, &st, len, &ts, &wall, r->o->timeout * 1000);

	if (got <= 0)
		return fail(r, "round %d: no %s completion within %d s", round, what,
			    r->o->timeout);
	gap = llabs((int64_t)wall - realtime_ns());
	t->wall_far += gap > TS_WALL_NEAR_NS;
	if (gap > t->wall_max_gap)
		t->wall_max_gap = gap;
	if (!t->have_wall) {
		t->have_wall = true;
		t->wall_base = (int64_t)(wall - ts);
	}
	gap = llabs((int64_t)(wall - ts) - t->wall_base);
	t->wall_unsteady += gap > TS_WALL_STEADY_NS;
	if (gap > t->wall_max_step)
		t->wall_max_step = gap;
	hi = ts_clock(r);
	if (hi < 0)
		return -1;
	if (id != wr_id || st != IBV_WC_SUCCESS)
		t->bad_status++;
	ts_note(t, what, round, ts, lo, hi, prev);
	return 0;
}

static void ts_report(struct role *r, struct ts_tally *t)
{
	check(r, t->bad_status == 0 && t->bad_data == 0,
	      "%d ping-pong completions successful, every message's bytes as sent "
	      "(%d bad statuses, %d bad messages)", t->n, t->bad_status, t->bad_data);
	check_why(r, t->outside == 0 && t->back == 0,
		  "every completion timestamp lies between the clock reads around its work, and "
		  "none goes back on its CQ", "%d outside, %d went back; first: %s", t->outside,
		  t->back, t->first_bad);
	check(r, t->wall_unsteady == 0, "every wall-clock timestamp was taken with its device-clock "
	      "one: wall clock minus device clock moved at most %.3f ms (bound %lld ms; %d beyond)",
	      (double)t->wall_max_step / 1e6, TS_WALL_STEADY_NS / 1000000, t->wall_unsteady);
	check(r, t->wall_far == 0, "every wall-clock timestamp is real time: within %lld s of the "
	      "system's when polled (%d are not; the largest gap is %.1f ms)",
	      TS_WALL_NEAR_NS / 1000000000, t->wall_far, (double)t->wall_max_gap / 1e6);
}

int timestamps_server(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ts_tally t = { 0 };
	struct buf rb, sb;
	uint32_t len;
	int64_t lo;
	struct conn c;

	if (!ts_check_clock(r))
		return chan_sync(r, "end");
	p.timestamps = true;
	if (buf_alloc(r, &rb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &sb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) || conn_open(r, &c, &p, NULL) ||
	    post_recv(r, &c, 0, rb.p, TS_LEN, rb.mr->lkey))
		return -1;
	/* The client's first SEND comes after this sync, so after lo. */
	lo = ts_clock(r);
	if (lo < 0 || chan_sync(r, "ready"))
		return -1;
	for (int i = 0; i < TS_ROUNDS; i++) {
		if (ts_expect(r, &t, c.rcqx, i, "RECV", i, lo, &t.prev_r, &len))
			return -1;
		t.bad_data += len != TS_LEN || find_pattern_mismatch(rb.p, TS_LEN, i) >= 0;
		if (i + 1 < TS_ROUNDS && post_recv(r, &c, i + 1, rb.p, TS_LEN, rb.mr->lkey))
			return -1;
		/* The reply, and (after it arrives) the client's next SEND, come after lo. */
		fill_pattern(sb.p, TS_LEN, 1000 + i);
		lo = ts_clock(r);
		if (lo < 0 || post_send(r, &c, i, IBV_WR_SEND, sb.p, TS_LEN, sb.mr->lkey, 0, 0) ||
		    ts_expect(r, &t, c.scqx, i, "SEND", i, lo, &t.prev_s, &len))
			return -1;
	}
	ts_report(r, &t);
	if (chan_sync(r, "done"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &rb);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

int timestamps_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct ts_tally t = { 0 };
	struct buf rb, sb;
	uint32_t len;
	int64_t lo;
	struct conn c;

	if (!ts_check_clock(r))
		return chan_sync(r, "end");
	p.timestamps = true;
	if (buf_alloc(r, &rb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    buf_alloc(r, &sb, TS_LEN, IBV_ACCESS_LOCAL_WRITE) || conn_open(r, &c, &p, NULL) ||
	    chan_sync(r, "ready"))
		return -1;
	for (int i = 0; i < TS_ROUNDS; i++) {
		/* SEND i and the reply to it: both complete after lo. */
		if (post_recv(r, &c, i, rb.p, TS_LEN, rb.mr->lkey))
			return -1;
		fill_pattern(sb.p, TS_LEN, i);
		lo = ts_clock(r);
		if (lo < 0 || post_send(r, &c, i, IBV_WR_SEND, sb.p, TS_LEN, sb.mr->lkey, 0, 0) ||
		    ts_expect(r, &t, c.scqx, i, "SEND", i, lo, &t.prev_s, &len) ||
		    ts_expect(r, &t, c.rcqx, i, "RECV", i, lo, &t.prev_r, &len))
			return -1;
		t.bad_data += len != TS_LEN || find_pattern_mismatch(rb.p, TS_LEN, 1000 + i) >= 0;
	}
	ts_report(r, &t);
	if (chan_sync(r, "done"))
		return -1;
	conn_close(r, &c);
	buf_free(r, &rb);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}

/* =============================================================================================
 * Subtest cq-moderation
 *
 * Completion event moderation (ibv_modify_cq): the device reports its limits (cq_mod_caps of
 * ibv_query_device_ex), takes values up to them and period 0 (no moderation), and refuses an
 * attr_mask bit it does not know.  Then rounds of SENDs to the server's receive CQ, which is on
 * a completion channel and timestamps its completions, so that an event can be timed against
 * the device clock: a clock read as the event arrives against the timestamps of the CQEs it
 * covers (taken as each CQE was written).
 *   - period (count 0, CQM_PERIOD_US): the event for one SEND cannot come before the period has
 *     passed since its CQE.  The round before it, without moderation, prints the same delay.
 *   - count (CQM_COUNT, the longest period): the client sends CQM_COUNT - 1 SENDs, pauses
 *     CQM_PAUSE_MS, then sends the last.  When the event comes, CQM_COUNT CQEs have been
 *     written or the period has passed; an event at the first CQE, as without moderation, is
 *     neither.
 *   - a burst of CQM_BURST SENDs without moderation, then with it (CQM_BURST_COUNT,
 *     CQM_BURST_PERIOD_US), reaped as an event-driven consumer does (wait for the event, ack,
 *     re-arm, poll until empty).  The events a burst took are printed, not checked: how a burst
 *     spreads over time depends on how fast the guests run.
 * Every message carries its index and a pattern of its own, checked on arrival.  The timing
 * checks are one-sided bounds: a slow guest can make an event later, never earlier.
 */

#define CQM_LEN 64
#define CQM_PERIOD_US 50000	/* 50 ms: far above an event's latency without moderation */
#define CQM_COUNT 8
#define CQM_PAUSE_MS 50		/* within the count round's period, 65.5 ms */
#define CQM_BURST 64
#define CQM_BURST_COUNT 16
#define CQM_BURST_PERIOD_US 2000

/*
 * The rounds, in this order on both sides.  The timed ones come first: re-arming a CQ that
 * still holds CQEs raises an event at once, so a burst may leave one behind, which would time
 * the next event too early.
 */
static const struct cqm_round {
	const char *name;
	uint16_t count, period;	/* the server's receive CQ's moderation */
	int n;			/* SENDs */
	int pause_at;		/* the client pauses CQM_PAUSE_MS before this SEND (0: never) */
	bool burst;		/* reaped as an event loop; else one event, then every CQE */
} cqm_rounds[] = {
	{ .name = "unmoderated", .n = 1 },
	{ .name = "period", .period = CQM_PERIOD_US, .n = 1 },
	{ .name = "count", .count = CQM_COUNT, .period = UINT16_MAX, .n = CQM_COUNT,
	  .pause_at = CQM_COUNT - 1 },
	{ .name = "burst", .n = CQM_BURST, .burst = true },
	{ .name = "moderated-burst", .count = CQM_BURST_COUNT, .period = CQM_BURST_PERIOD_US,
	  .n = CQM_BURST, .burst = true },
};

/* The server's side: its receive CQ and what it received into. */
struct cqm_srv {
	struct ibv_comp_channel *ch;
	struct ibv_cq_ex *cqx;	/* the receive CQ: on ch, with completion timestamps */
	struct ibv_cq *cq;
	struct conn c;
	struct buf rb;		/* CQM_BURST slots of CQM_LEN bytes */
	uint64_t khz;		/* the device clock's rate */
	int bad;		/* messages of the round that did not arrive as sent */
};

/*
 * Whether the device moderates completion events as far as the rounds need (a count of
 * CQM_BURST_COUNT, the longest period ibv_modify_cq can say) and has a clock to time them by;
 * without that there is nothing to test.  *lim gets its limits, *khz the clock's rate.
 */
static bool cqm_caps(struct role *r, struct ibv_cq_moderation_caps *lim, uint64_t *khz)
{
	struct ibv_device_attr_ex attr = {};
	int ret = ibv_query_device_ex(r->ctx, NULL, &attr);

	if (ret) {
		fail(r, "ibv_query_device_ex: %s", strerror(ret));
		return false;
	}
	*lim = attr.cq_mod_caps;
	if (lim->max_cq_count < CQM_BURST_COUNT || lim->max_cq_period < UINT16_MAX) {
		skip(r, "the device's CQ moderation (up to %u completions, %u us) is short of the "
		     "rounds' %u and %u", lim->max_cq_count, lim->max_cq_period, CQM_BURST_COUNT,
		     UINT16_MAX);
		return false;
	}
	if (!attr.hca_core_clock) {
		skip(r, "the device reports no clock to time events by (hca_core_clock 0)");
		return false;
	}
	*khz = attr.hca_core_clock;
	return true;
}

/* ibv_modify_cq at the device's limits, back to period 0, and with an unknown attr_mask bit. */
static void cqm_modify_checks(struct role *r, struct ibv_cq *cq,
			      const struct ibv_cq_moderation_caps *lim)
{
	struct ibv_modify_cq_attr mod = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = lim->max_cq_count, .cq_period = lim->max_cq_period },
	};
	int ret = ibv_modify_cq(cq, &mod);

	check(r, !ret, "ibv_modify_cq(count %u, period %u us: the device's limits) succeeds (%s)",
	      lim->max_cq_count, lim->max_cq_period, ret ? strerror(ret) : "it does");
	mod.moderate.cq_period = 0;
	ret = ibv_modify_cq(cq, &mod);
	check_why(r, !ret, "ibv_modify_cq(period 0: no moderation) succeeds", "%s", strerror(ret));
	mod.attr_mask = IBV_CQ_ATTR_MODERATE | IBV_CQ_ATTR_RESERVED;
	ret = ibv_modify_cq(cq, &mod);
	check(r, ret == EINVAL, "ibv_modify_cq with an unknown attr_mask bit (0x%x) fails with "
	      "EINVAL (got %s)", IBV_CQ_ATTR_RESERVED, ret ? strerror(ret) : "success");
}

static uint32_t cqm_seed(int round, int i)
{
	return (uint32_t)(round + 1) << 16 | (uint32_t)i;
}

/* Message i of a round: its index, then a pattern of its own. */
static void cqm_fill(uint8_t *p, int round, int i)
{
	uint32_t idx = htonl(i);

	memcpy(p, &idx, sizeof(idx));
	fill_pattern(p + sizeof(idx), CQM_LEN - sizeof(idx), cqm_seed(round, i));
}

/* Whether receive completion i of a round, into slot i, brought message i whole. */
static bool cqm_msg_ok(const struct cqm_srv *s, int round, int i, uint64_t wr_id,
		       enum ibv_wc_status st, uint32_t len)
{
	const uint8_t *p = s->rb.p + (size_t)i * CQM_LEN;
	uint32_t idx;

	memcpy(&idx, p, sizeof(idx));
	return st == IBV_WC_SUCCESS && wr_id == (uint64_t)i && len == CQM_LEN &&
	       ntohl(idx) == (uint32_t)i &&
	       find_pattern_mismatch(p + sizeof(idx), CQM_LEN - sizeof(idx),
				     cqm_seed(round, i)) < 0;
}

/*
 * The channel's next completion event, acked: 1, or 0 when none came within ms (the fd is
 * non-blocking: with ms 0, only one already there).  -1: a failed check.
 */
static int cqm_event(struct role *r, struct ibv_comp_channel *ch, int ms)
{
	int64_t deadline = now_ms() + ms;
	struct ibv_cq *cq;
	void *cq_ctx;

	for (;;) {
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int left = (int)(deadline - now_ms());

		if (!ibv_get_cq_event(ch, &cq, &cq_ctx)) {
			ibv_ack_cq_events(cq, 1);
			return 1;
		}
		if (errno != EAGAIN)
			return fail(r, "ibv_get_cq_event: %s", strerror(errno));
		if (left <= 0)
			return 0;
		poll(&pfd, 1, left);
	}
}

/*
 * A timed round: one event, the device clock read as it arrives, then the round's CQEs.  With
 * a period, the event cannot have come before count CQEs were written (count > 0) or before
 * the period had passed since the first.
 */
static int cqm_reap_timed(struct role *r, struct cqm_srv *s, const struct cqm_round *k,
			  int round)
{
	int64_t t_evt, waited, period_ticks = (int64_t)k->period * (int64_t)s->khz / 1000;
	uint64_t id, ts, wall, first = 0;
	enum ibv_wc_status st;
	int by_evt = 0, ret;
	uint32_t len;
	double ms;

	ret = cqm_event(r, s->ch, r->o->timeout * 1000);
	if (ret <= 0)
		return ret ? -1 : fail(r, "round %s: no completion event within %d s", k->name,
				       r->o->timeout);
	t_evt = ts_clock(r);
	if (t_evt < 0)
		return -1;
	for (int i = 0; i < k->n; i++) {
		if (ts_poll(s->cqx, &id, &st, &len, &ts, &wall, r->o->timeout * 1000) <= 0)
			return fail(r, "round %s: receive %d did not complete within %d s", k->name,
				    i, r->o->timeout);
		s->bad += !cqm_msg_ok(s, round, i, id, st, len);
		if (!i)
			first = ts;
		by_evt += (int64_t)ts <= t_evt;
	}
	waited = t_evt - (int64_t)first;
	ms = (double)waited / (double)s->khz;
	if (!k->period) {
		info(r, "round %s: the event came %.3f ms after its CQE", k->name, ms);
		return 0;
	}
	if (!k->count) {
		check(r, waited >= period_ticks, "round %s: the event waited out the %.1f ms period "
		      "(it came %.3f ms after its CQE)", k->name, k->period / 1000.0, ms);
		return 0;
	}
	check(r, by_evt >= k->count || waited >= period_ticks, "round %s: the event waited for %u "
	      "CQEs or the %.1f ms period (%d of %d written by then, %.3f ms after the first)",
	      k->name, k->count, k->period / 1000.0, by_evt, k->n, ms);
	return 0;
}

/*
 * A burst, reaped the event-driven way.  Re-arming before polling misses no completion, and on
 * a CQ that still holds CQEs it raises the next event at once: the count includes those.
 */
static int cqm_reap_burst(struct role *r, struct cqm_srv *s, const struct cqm_round *k,
			  int round)
{
	int got = 0, events = 0, ret = 0;
	uint64_t id, ts, wall;
	enum ibv_wc_status st;
	uint32_t len;

	while (got < k->n) {
		ret = cqm_event(r, s->ch, r->o->timeout * 1000);
		if (ret <= 0)
			return ret ? -1 : fail(r, "round %s: %d of %d SENDs arrived, then no "
					       "completion event within %d s", k->name, got, k->n,
					       r->o->timeout);
		events++;
		ret = ibv_req_notify_cq(s->cq, 0);
		if (ret)
			return fail(r, "ibv_req_notify_cq: %s", strerror(ret));
		while (got < k->n && (ret = ts_poll(s->cqx, &id, &st, &len, &ts, &wall, 0)) > 0) {
			s->bad += !cqm_msg_ok(s, round, got, id, st, len);
			got++;
		}
		if (ret < 0)
			return fail(r, "round %s: ibv_start_poll failed", k->name);
	}
	info(r, "round %s: %d SENDs in %d completion events (count %u, period %u us)", k->name,
	     k->n, events, k->count, k->period);
	return 0;
}

static int cqm_serve_round(struct role *r, struct cqm_srv *s, int round)
{
	const struct cqm_round *k = &cqm_rounds[round];
	struct ibv_modify_cq_attr mod = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = k->count, .cq_period = k->period },
	};
	int ret = ibv_modify_cq(s->cq, &mod);

	if (ret)
		return fail(r, "round %s: ibv_modify_cq(count %u, period %u us): %s", k->name,
			    k->count, k->period, strerror(ret));
	memset(s->rb.p, 0, s->rb.len);
	for (int i = 0; i < k->n; i++)
		if (post_recv(r, &s->c, i, s->rb.p + (size_t)i * CQM_LEN, CQM_LEN,
			      s->rb.mr->lkey))
			return -1;
	/* An event the last burst left behind goes now, not into this round's. */
	while ((ret = cqm_event(r, s->ch, 0)) > 0)
		;
	if (ret < 0)
		return -1;
	ret = ibv_req_notify_cq(s->cq, 0);
	if (ret)
		return fail(r, "ibv_req_notify_cq: %s", strerror(ret));
	s->bad = 0;
	/* The client sends after this. */
	if (chan_sync(r, k->name) ||
	    (k->burst ? cqm_reap_burst(r, s, k, round) : cqm_reap_timed(r, s, k, round)))
		return -1;
	check(r, !s->bad, "round %s: %d SENDs arrived in order, each with its index and bytes "
	      "(%d did not)", k->name, k->n, s->bad);
	return 0;
}

int cq_moderation_server(struct role *r)
{
	struct ibv_cq_init_attr_ex cx = {
		.cqe = CQM_BURST,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct conn_params p = conn_defaults();
	struct cqm_srv s = { 0 };
	struct ibv_cq_moderation_caps lim;
	int ret;

	if (!cqm_caps(r, &lim, &s.khz))
		return chan_sync(r, "end");
	s.ch = ibv_create_comp_channel(r->ctx);
	if (!s.ch)
		return fail(r, "ibv_create_comp_channel: %s", strerror(errno));
	/* Events are read with a timeout (cqm_event). */
	if (!set_nonblocking(s.ch->fd))
		return fail(r, "cannot make the completion channel non-blocking: %s",
			    strerror(errno));
	cx.channel = s.ch;
	s.cqx = ibv_create_cq_ex(r->ctx, &cx);
	if (!s.cqx)
		return fail(r, "ibv_create_cq_ex(COMPLETION_TIMESTAMP, channel): %s",
			    strerror(errno));
	s.cq = ibv_cq_ex_to_cq(s.cqx);
	cqm_modify_checks(r, s.cq, &lim);

	p.rcq = s.cq;
	if (buf_alloc(r, &s.rb, CQM_BURST * CQM_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    conn_open(r, &s.c, &p, NULL))
		return -1;
	for (int i = 0; i < (int)ARRAY_SIZE(cqm_rounds); i++)
		if (cqm_serve_round(r, &s, i))
			return -1;
	conn_close(r, &s.c);
	/* Every event read was acked; one still unread does not hold the CQ. */
	ret = ibv_destroy_cq(s.cq);
	if (ret)
		fail(r, "ibv_destroy_cq (recv CQ): %s", strerror(ret));
	ret = ibv_destroy_comp_channel(s.ch);
	if (ret)
		fail(r, "ibv_destroy_comp_channel: %s", strerror(ret));
	buf_free(r, &s.rb);
	return chan_sync(r, "end");
}

/* A round's SENDs, posted without waiting for any (but the pause), then their completions. */
static int cqm_send_round(struct role *r, struct conn *c, struct buf *sb, int round)
{
	const struct cqm_round *k = &cqm_rounds[round];
	struct ibv_wc wc;
	int bad = 0;

	for (int i = 0; i < k->n; i++)
		cqm_fill(sb->p + (size_t)i * CQM_LEN, round, i);
	if (chan_sync(r, k->name))
		return -1;
	for (int i = 0; i < k->n; i++) {
		if (k->pause_at && i == k->pause_at)
			sleep_ms(CQM_PAUSE_MS);
		if (post_send(r, c, i, IBV_WR_SEND, sb->p + (size_t)i * CQM_LEN, CQM_LEN,
			      sb->mr->lkey, 0, 0))
			return -1;
	}
	for (int i = 0; i < k->n; i++) {
		if (poll_one(c->scq, &wc, r->o->timeout * 1000) <= 0)
			return fail(r, "round %s: SEND %d did not complete within %d s", k->name, i,
				    r->o->timeout);
		bad += wc.wr_id != (uint64_t)i || wc.status != IBV_WC_SUCCESS;
	}
	check(r, !bad, "round %s: %d SENDs complete successfully, in order (%d did not)", k->name,
	      k->n, bad);
	return 0;
}

int cq_moderation_client(struct role *r)
{
	struct conn_params p = conn_defaults();
	struct conn c;
	struct buf sb;
	struct ibv_cq_moderation_caps lim;
	uint64_t khz;

	if (!cqm_caps(r, &lim, &khz))
		return chan_sync(r, "end");
	if (buf_alloc(r, &sb, CQM_BURST * CQM_LEN, IBV_ACCESS_LOCAL_WRITE) ||
	    conn_open(r, &c, &p, NULL))
		return -1;
	for (int i = 0; i < (int)ARRAY_SIZE(cqm_rounds); i++)
		if (cqm_send_round(r, &c, &sb, i))
			return -1;
	conn_close(r, &c);
	buf_free(r, &sb);
	return chan_sync(r, "end");
}
