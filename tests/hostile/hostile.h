// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pib-hostile: what its files share (the program is described in pib_hostile.c).
 *
 *   pib_hostile.c     output and the expectations for the guest, the signals, hold, main
 *   hostile_link.c    the link: framing on the unix socket; what pib-mr-target exposes
 *   hostile_pkt.c     IB packets: building requests, parsing responses; sending to the QPs
 *   hostile_session.c MADs and the session with the target port (we are its SM)
 *   hostile_attacks.c the attacks on the link and the transport (garbage ... forged, doorbell)
 *   hostile_mad.c     the attacks with MADs: malformed SMPs/GMPs, forged CM messages
 *   hostile_credits.c credits (link flow control): bad FLOW frames, no credit granted, lies
 *   hostile_relay.c   relay: a transparent cable with a cutter
 */
#ifndef PIB_HOSTILE_H
#define PIB_HOSTILE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pib_link.h"
#include "pib_mad.h"
#define PIB_REPORT_SHARED      /* one PASS/FAIL count for all the files (pib_hostile.c has it) */
#include "pib_report.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Our identity in HELLO: a GUID no pibvm node uses (pibvm's are 0x001af4000000NN00). */
#define HOSTILE_NODE_GUID 0x001af4ffff00e600ull

/* Target QPs, by their index in pib-mr-target's list (see target_roles in the usage text). */
#define QP_CONTROL 0 /* header checks, sync probes: never moves its PSN, stays RTS */
#define QP_PSN     1 /* PSN window checks: stays RTS */
#define QP_READ    2 /* valid READs (positive control): stays RTS */
#define QP_FORGED  3 /* first of the QPs the forged RDMA requests break, one each */
#define QP_CREDITS 13 /* READs that wait for the credits we grant: stays RTS */
#define MAX_QPS    64

/* Bytes every forged WRITE carries: no byte of the pattern is guaranteed to differ, but 64 of
 * them in a row would be a coincidence of 1 in 2^512. */
#define POISON 0xee

/* One line per check, named after the command (tests/common/pib_report.h). */
#define check(ok, ...)	report_check(cmd_name, ok, __VA_ARGS__)
#define info(...)	report_info(cmd_name, __VA_ARGS__)

/* MADs (hostile_session.c, hostile_mad.c) */
#define QP1_QKEY        0x80010000u	/* IBTA: QP1's Q_Key */
#define CM_CLASS        0x07		/* IBTA 16.7: the communication manager's class */
#define HOSTILE_TID_HI  0x4853544cu	/* "HSTL": the high half of our transaction IDs */
#define MAD_QUIET_MS 1500		/* no answer within this: none is coming (TCG) */

/* pib_hostile.c: the command running, and what the guest should count; hostile_session.c:
 * our MADs' transaction IDs and the traps the port sent; the signals (hold, relay). */
extern const char *cmd_name;
extern const char *const counter_names[PIB_CNT_MAX];
extern bool expect_set[PIB_CNT_MAX];
extern uint64_t expect_n[PIB_CNT_MAX];
extern int expect_drops;
extern uint32_t next_tid;
extern unsigned traps_seen[512];
extern volatile sig_atomic_t stop, arm;

struct link {
	const char *path;
	int fd;
	bool eof;			/* the other end closed the stream */
	uint8_t buf[2 * (PIB_LINK_HDR_LEN + PIB_LINK_MAX_PAYLOAD)];
	size_t len;			/* bytes in buf */
	uint64_t peer_node_guid;
	uint32_t peer_flags;		/* the device's HELLO's PIB_HELLO_F_* */
	unsigned rx_frames, rx_other;	/* frames seen; of them, not meant for what we waited on */
	/* The doorbell (include/pib_link.h): what our HELLO offers, what the device's brought */
	uint32_t hello_flags;		/* PIB_HELLO_F_* in our HELLO */
	bool offer;			/* offer_fd rides with our HELLO (SCM_RIGHTS) */
	int offer_fd;
	int passed_fd;			/* the first descriptor the device sent, from link_dial on; -1 */
	/*
	 * Credits (include/pib_link.h, "Credits"), once both HELLOs offered PIB_HELLO_F_CREDITS
	 * and one asked for them (link_credits):
	 * per data VL, what we sent and what the device granted us, what it sent and what we
	 * granted it.  A well-behaved receiver (withhold false) grants its whole window once the
	 * HELLOs are in and again whenever the device is down to half of it; withhold grants
	 * nothing unless told to (link_grant).  From link_dial on, except withhold.
	 */
	bool withhold;
	struct {
		uint16_t fctbs;		/* blocks we sent, modulo 4096 */
		uint16_t fccl;		/* the credit limit the device's last FLOW frame gave us */
		uint16_t abr;		/* blocks the device sent: its FCTBS, plus what came since */
		uint16_t granted;	/* the credit limit our last FLOW frame gave it */
	} vl[PIB_LINK_DATA_VLS];
	unsigned flow_rx;		/* FLOW frames from the device */
	unsigned flow_odd;		/* of them, entries not VL i with Op Normal at index i */
	unsigned overrun;		/* data packets the device sent beyond what we granted */
	bool lied;			/* our FLOW frames since the last link_grant lied: the
					 * device's limits are not `granted`, overrun not judged */
	uint8_t flow_first[PIB_LINK_DATA_VLS * sizeof(struct pib_link_fc)];
	size_t flow_first_len;		/* the device's first FLOW frame, as it came */
};

struct target {
	uint16_t lid;			/* the guest port's LID: our DLID */
	uint16_t peer_lid;		/* the LID its QPs are connected to: our SLID */
	uint32_t peer_qpn;		/* their QP i is connected to our QPN peer_qpn + i */
	uint32_t psn;			/* every QP's expected PSN (rq_psn) */
	uint32_t mtu;			/* path MTU, bytes */
	int nqp;
	uint32_t qpn[MAX_QPS];
	uint64_t mr_addr, mr_len;	/* the MR: LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ */
	uint32_t mr_rkey;
	uint64_t guard;			/* bytes before and after the MR that it does not cover */
	uint64_t lo_addr, lo_len;	/* a second MR with LOCAL_WRITE only */
	uint32_t lo_rkey;
};

struct pkt {
	uint8_t opcode;
	uint16_t dlid, slid;
	uint16_t pkey;
	uint32_t dqpn, psn;
	bool ackreq;
	uint8_t vl;			/* LRH VL: 0, 15 for SMPs */
	uint8_t lver;			/* LRH LVer: 0 */
	bool lnh_raw;			/* LRH LNH 0 (raw) instead of IBA local/global */
	uint8_t tver;			/* BTH TVer: 0 */
	uint8_t pad_extra;		/* BTH PadCnt beyond what the payload needs */
	bool grh;
	uint8_t grh_ipver;		/* 6 */
	uint8_t dgid[16];
	bool reth;
	uint64_t va;
	uint32_t rkey, dmalen;
	bool aeth;
	uint8_t syndrome;
	uint32_t msn;
	bool deth;			/* UD: a DETH with qkey and sqpn */
	uint32_t qkey, sqpn;
	const void *payload;
	uint32_t paylen;
};

/* A response from the device: an ACK/NAK or READ response, parsed. */
struct resp {
	uint8_t opcode;
	uint8_t vl;
	uint16_t dlid, slid;
	uint16_t pkey;
	uint32_t dqpn, psn;
	bool has_aeth;
	uint8_t syndrome;
	uint32_t msn;
	bool has_deth;			/* UD */
	uint32_t qkey, sqpn;
	const uint8_t *payload;
	uint32_t paylen;
};

struct session {
	struct link l;
	struct target t;
	int timeout_ms;			/* for any one answer */
	unsigned sent;			/* PACKET frames sent on this connection */
};

/* pib_hostile.c */
void __attribute__((format(printf, 1, 2), noreturn)) die(const char *fmt, ...);
int64_t now_ms(void);
void sleep_ms(int ms);
void expect(enum pib_counter c, unsigned n);
void expect_port_counter(const char *name, unsigned n);
void expect_grew(enum pib_counter c);
void print_expectations(void);
void on_stop(int sig);
void on_arm(int sig);
void cmd_hold(struct session *s, int hold_s);

/* hostile_link.c */
void link_close(struct link *l);
int link_train(struct link *l, int timeout_ms);
uint8_t pattern_byte(uint64_t i);
int link_dial(struct link *l, int timeout_ms);
int send_all(int fd, const void *p, size_t n);
int send_frame(struct link *l, uint8_t type, const void *payload, size_t len);
int send_hello(struct link *l);
int recv_frame(struct link *l, uint8_t *type, uint8_t *p, size_t *len, int timeout_ms);
int wait_hello(struct link *l, int timeout_ms);
int wait_eof(struct link *l, int timeout_ms);
bool link_credits(const struct link *l);
uint16_t fc_blocks(size_t len);
int link_flow_send(struct link *l, const struct pib_link_fc *fc, unsigned n);
int link_grant(struct link *l);
void link_flow_rx(struct link *l, const uint8_t *p, size_t n);
void link_rx_data(struct link *l, const uint8_t *ib, size_t n);
void target_load(struct target *t, const char *file);

/* hostile_pkt.c */
void send_bytes(struct session *s, const uint8_t *b, size_t len);
size_t pkt_build(uint8_t *b, const struct pkt *p);
int resp_parse(const uint8_t *b, size_t len, struct resp *r);
const char *aeth_str(uint8_t syn);
uint32_t psn_add(uint32_t psn, int32_t n);
struct pkt req_to(const struct session *s, int i, uint8_t opcode, uint32_t psn);
void send_pkt(struct session *s, const struct pkt *p);

/* hostile_session.c */
void smp_init(struct pib_smp *smp, bool dr, uint8_t method, uint16_t attr, uint32_t mod);
void send_smp(struct session *s, const struct pib_smp *smp);
bool mad_trap(struct session *s, const struct resp *r);
bool mad_request_to_us(const struct resp *r);
uint32_t probe_send(struct session *s);
void sync_probe(struct session *s, const char *what);
void session_close(struct session *s);
void mad_hdr_init(struct pib_mad_hdr *h, uint8_t mgmt_class, uint8_t class_version,
		  uint8_t method, uint16_t attr, uint32_t mod);
struct pkt mad_pkt(const struct session *s, uint32_t qpn, bool dr, const void *mad,
		   size_t len);
const struct pib_mad_hdr *resp_mad(const struct resp *r);
int next_frame(struct session *s, int64_t deadline, struct resp *r, uint8_t *buf);
int next_packet(struct session *s, int64_t deadline, struct resp *r, uint8_t *buf);
int wait_mad(struct session *s, const struct pib_mad_hdr *req, int ms, struct resp *r,
	     uint8_t *buf);
int port_info(struct session *s, bool dr, uint8_t method, struct pib_port_info *pi);
int sm_activate(struct session *s);
int wait_resp(struct session *s, int i, struct resp *r, uint8_t *buf);
bool quiet(struct session *s, int ms);
void expect_ack(struct session *s, int i, uint8_t syndrome, uint32_t psn, const char *what);
int session_open(struct session *s);

/* hostile_attacks.c */
void cmd_garbage(struct session *s);
void cmd_bad_frames(struct session *s);
void cmd_truncated(struct session *s);
void cmd_zero_length(struct session *s);
void cmd_bad_headers(struct session *s);
void cmd_psn(struct session *s);
uint32_t read_send(struct session *s, int i, uint32_t psn, uint64_t off, uint32_t len);
bool read_expect(struct session *s, int i, uint32_t psn, uint64_t off, uint32_t len,
		 const char *what);
void cmd_read(struct session *s);
void cmd_forged(struct session *s);
void cmd_doorbell(struct session *s);

/* hostile_credits.c */
void cmd_credits(struct session *s);

/* hostile_mad.c */
void mad_expect_status(struct session *s, const char *what, struct pkt *p, uint16_t want);
void mad_expect_silence(struct session *s, const char *what, struct pkt *p,
			const struct pib_mad_hdr *req);
void expect_any_drop(void);
void mad_good_smp(struct session *s, const char *what);
void cmd_mad(struct session *s);
void cmd_cm(struct session *s);

/* hostile_relay.c */
int cmd_relay(const char *listen_path, const char *connect_path, unsigned cut_after,
	      int down_ms);

#endif /* PIB_HOSTILE_H */
