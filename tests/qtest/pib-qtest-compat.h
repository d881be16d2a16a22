/*
 * QTest testcase for the pib InfiniBand HCA: what differs between the QEMU
 * versions the qtests build on (7.2 and 10.0; the device's own list is
 * hw/pib/pib-compat.h).  Each entry names the release that forced it.
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef PIB_QTEST_COMPAT_H
#define PIB_QTEST_COMPAT_H

/* 10.0: include/qapi/qmp/ (QDict, QList, ...) moved to include/qobject/. */
#if __has_include("qobject/qdict.h")
#include "qobject/qdict.h"
#include "qobject/qlist.h"
#else
#include "qapi/qmp/qdict.h"
#include "qapi/qmp/qlist.h"
#endif

/*
 * 9.2: a socket chardev's reconnect interval is reconnect-ms=; reconnect=
 * (seconds) is deprecated then, and gone in 10.2.  The link tests redial
 * every second.
 */
#if QEMU_VERSION_MAJOR > 9 || (QEMU_VERSION_MAJOR == 9 && QEMU_VERSION_MINOR >= 2)
#define PIB_CHR_RECONNECT_1S "reconnect-ms=1000"
#else
#define PIB_CHR_RECONNECT_1S "reconnect=1"
#endif

#endif /* PIB_QTEST_COMPAT_H */
