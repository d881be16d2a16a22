/* SPDX-License-Identifier: GPL-2.0-or-later OR Linux-OpenIB */
/*
 * The PASS/FAIL reporter of the test programs outside QEMU: the guest programs (tests/guest/)
 * and the hostile link peer (tests/hostile/).  One line per event, the tag padded to five
 * columns, then who is speaking (a subtest, a role, a case) and the message:
 *
 *     PASS  rnr-retry/client: SEND completes with SUCCESS once the receive is posted
 *     FAIL  forged: WRITE with a flipped key byte: no NAK in time
 *     XFAIL ud-qkey/server: ...        (a known deviation of another device, not counted)
 *     SKIP  ud-qkey/server: ...        (a check this device cannot make)
 *     info  misuse: ...
 *
 * and at the end one summary line, "== WHO: N passed, N failed".  The e2e scripts read these
 * lines ('^PASS', '^FAIL', '^SKIP', '^PASS  CASE:'): keep the format.
 *
 * Each line is formatted first and written with one call, and the counts are atomic, so that
 * two threads of one program (a loopback test's two roles) can report at once; each line is
 * flushed as it is written.  Header-only: most programs are one source file.
 */
#ifndef PIB_REPORT_H
#define PIB_REPORT_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <unistd.h>

/*
 * The checks so far.  A program may read them, say to send its verdict to its peer.  A program
 * of one file gets its own copy; one of several files defines PIB_REPORT_SHARED before including
 * this in every file, and PIB_REPORT_COUNTERS too in exactly one, which holds the counters all
 * its files count in (tests/hostile, tests/guest/pib_verbs_test/).
 */
#if defined(PIB_REPORT_SHARED) && !defined(PIB_REPORT_COUNTERS)
extern atomic_int report_passed, report_failed;
#elif defined(PIB_REPORT_SHARED)
atomic_int report_passed, report_failed;
#else
static atomic_int report_passed, report_failed;
#endif

static inline void __attribute__((format(printf, 3, 0)))
report_vline(const char *tag, const char *who, const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	printf("%-5s %s: %s\n", tag, who, msg);
	/* Out at once, even into a pipe: the watchdog's exit, or a crash, loses nothing said. */
	fflush(stdout);
}

static inline void __attribute__((format(printf, 3, 4)))
report_line(const char *tag, const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_vline(tag, who, fmt, ap);
	va_end(ap);
}

/* One check: PASS or FAIL, counted.  Returns ok, so that callers can chain on it. */
static inline bool __attribute__((format(printf, 3, 4)))
report_check(const char *who, bool ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_vline(ok ? "PASS" : "FAIL", who, fmt, ap);
	va_end(ap);
	if (ok)
		report_passed++;
	else
		report_failed++;
	return ok;
}

/* A check whose details matter only when it fails: PASS says what; FAIL says what and why. */
static inline bool __attribute__((format(printf, 4, 5)))
report_check_why(const char *who, bool ok, const char *what, const char *why_fmt, ...)
{
	char why[1024];
	va_list ap;

	if (ok)
		return report_check(who, true, "%s", what);
	va_start(ap, why_fmt);
	vsnprintf(why, sizeof(why), why_fmt, ap);
	va_end(ap);
	return report_check(who, false, "%s: %s", what, why);
}

/* A failed step that stops a case or a role (a setup that did not work): counted.  Returns -1. */
static inline int __attribute__((format(printf, 2, 3)))
report_fail(const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_vline("FAIL", who, fmt, ap);
	va_end(ap);
	report_failed++;
	return -1;
}

/*
 * An outcome the IBTA forbids but that a known device (Soft-RoCE) produces: printed, not counted
 * as a failure, so that the rest of a test can still run on that device.
 */
#define report_xfail(who, ...)	report_line("XFAIL", who, __VA_ARGS__)
/* A check that cannot be made here (a counter the device does not have): printed only. */
#define report_skip(who, ...)	report_line("SKIP", who, __VA_ARGS__)
#define report_info(who, ...)	report_line("info", who, __VA_ARGS__)

/* The summary line.  Returns the exit status: 0 if nothing failed, else 1. */
static inline int report_summary(const char *who)
{
	printf("== %s: %d passed, %d failed\n", who, report_passed, report_failed);
	fflush(stdout);
	return report_failed ? 1 : 0;
}

/*
 * The watchdog: a verb that hangs (say, a destroy that never returns) must not hang the test
 * run.  report_watchdog(who, seconds) arms it, again for each step if need be, and 0 seconds
 * disarms it; when it fires it writes one FAIL line and exits 1.
 */
static const char *report_watchdog_who;
static int report_watchdog_seconds;

static inline void report_watchdog_fire(int sig)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "FAIL  %s: watchdog: no result after %d s, giving up\n",
			 report_watchdog_who, report_watchdog_seconds);

	(void)sig;
	if (n > 0 && write(STDOUT_FILENO, msg, n) < 0)
		_exit(1);
	_exit(1);
}

static inline void report_watchdog(const char *who, int seconds)
{
	report_watchdog_who = who;
	report_watchdog_seconds = seconds;
	signal(SIGALRM, report_watchdog_fire);
	alarm(seconds);
}

#endif /* PIB_REPORT_H */
