/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ktest.h - what the parts of pib_ktest share: the checks and their counts
 * (/sys/module/pib_ktest/parameters/{passed,failed}), polling, connecting RC QPs.
 */
#ifndef KTEST_H
#define KTEST_H

#include <rdma/ib_verbs.h>

extern int kt_passed, kt_failed;

#define CHECK(cond, fmt, ...) do { \
	if (cond) { kt_passed++; pr_info("pib_ktest: PASS " fmt "\n", ##__VA_ARGS__); } \
	else { kt_failed++; pr_err("pib_ktest: FAIL " fmt "\n", ##__VA_ARGS__); } } while (0)

/* Up to n WCs within ms milliseconds: how many came, or a negative errno. */
int kt_poll(struct ib_cq *cq, struct ib_wc *wc, int n, int ms);
int kt_rc_connect_to(struct ib_qp *qp, u16 dlid, u32 dqpn);

/* ktest_frwr.c */
void kt_frwr_loopback(struct ib_device *dev, u16 lid);
void kt_frwr_link(struct ib_device *dev, const char *role);

#endif /* KTEST_H */
