/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the guest test programs in tests/guest: a monotonic clock in
 * milliseconds and the TCP side channel two test programs use to swap QP numbers, keys and
 * addresses, the way perftest and ibv_rc_pingpong do.  Header-only (static inline), so that
 * every file of a program may include it.
 */
#ifndef PIB_TEST_UTIL_H
#define PIB_TEST_UTIL_H

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One TCP connection accepted on PORT (IPv6 and IPv4, or IPv4 only) within TIMEOUT_S, or -1. */
static inline int tcp_listen_accept(int port, int timeout_s)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	struct pollfd pfd;
	int one = 1, zero = 0, ls, fd;

	ls = socket(AF_INET6, SOCK_STREAM, 0);
	if (ls < 0) {
		/* No IPv6 in this kernel: IPv4 only. */
		struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port) };

		ls = socket(AF_INET, SOCK_STREAM, 0);
		if (ls < 0)
			return -1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&a4, sizeof(a4)))
			goto err;
	} else {
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(ls, (struct sockaddr *)&a, sizeof(a)))
			goto err;
	}
	if (listen(ls, 1))
		goto err;
	pfd = (struct pollfd){ .fd = ls, .events = POLLIN };
	if (poll(&pfd, 1, timeout_s * 1000) <= 0) {
		errno = ETIMEDOUT;
		goto err;
	}
	fd = accept(ls, NULL, NULL);
	close(ls);
	return fd;
err:
	close(ls);
	return -1;
}

/* Connect to HOST:PORT, retrying for TIMEOUT_S (the peer may not listen yet); -1 if never. */
static inline int tcp_connect(const char *host, int port, int timeout_s)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int64_t deadline = now_ms() + timeout_s * 1000LL;
	char service[16];
	int fd = -1, err;

	snprintf(service, sizeof(service), "%d", port);
	err = getaddrinfo(host, service, &hints, &res);
	if (err) {
		fprintf(stderr, "%s: %s\n", host, gai_strerror(err));
		return -1;
	}
	while (fd < 0) {
		for (ai = res; ai && fd < 0; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
				close(fd);
				fd = -1;
			}
		}
		if (fd < 0) {
			if (now_ms() >= deadline)
				break;
			usleep(200 * 1000);
		}
	}
	freeaddrinfo(res);
	return fd;
}

#endif /* PIB_TEST_UTIL_H */
