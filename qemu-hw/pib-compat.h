/*
 * pib - what differs between the QEMU versions the device model builds on
 *
 * Copyright (c) 2026 The pib authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The model is written against the newest API; this header supplies it on
 * older trees.  Tested on QEMU 7.2 (Debian 12) and 10.0 (Debian 13); the
 * 10.1 and 10.2 entries follow upstream's changes and are not built here.
 * Each entry names the release that forced it.  A feature test is used where
 * the headers offer one, the version (config-host.h) otherwise.  The meson
 * side (softmmu_ss, renamed system_ss in 8.1) is in meson.build.
 */
#ifndef HW_PIB_COMPAT_H
#define HW_PIB_COMPAT_H

#define PIB_QEMU_AT_LEAST(major, minor) \
    (QEMU_VERSION_MAJOR > (major) || \
     (QEMU_VERSION_MAJOR == (major) && QEMU_VERSION_MINOR >= (minor)))

/* 8.0: struct PCIDevice moved out of hw/pci/pci.h into hw/pci/pci_device.h. */
#if __has_include("hw/pci/pci_device.h")
#include "hw/pci/pci_device.h"
#else
#include "hw/pci/pci.h"
#endif

/* 10.0: include/sysemu/ became include/system/. */
#if __has_include("system/dma.h")
#include "system/dma.h"
#else
#include "sysemu/dma.h"
#endif

/* 10.0: so did sysemu/runstate.h (the VM's run state: pib-vmstate.c). */
#if __has_include("system/runstate.h")
#include "system/runstate.h"
#else
#include "sysemu/runstate.h"
#endif

/*
 * 9.0: the outgoing migration's events come as a MigrationEvent to a NotifierWithReturn
 * (migration_add_notifier: PRECOPY_SETUP, then PRECOPY_DONE or PRECOPY_FAILED).  Before, a
 * plain Notifier got the MigrationState on every change, and asked it what state it was in.
 * PibMigNotifier is the notifier's type; pib-vmstate.c has one handler for each form.
 */
#include "migration/misc.h"
#if PIB_QEMU_AT_LEAST(9, 0)
#define PIB_MIG_EVENTS 1
typedef NotifierWithReturn PibMigNotifier;
#else
#define PIB_MIG_EVENTS 0
typedef Notifier PibMigNotifier;
#endif

#include "chardev/char-fe.h"
#include "hw/qdev-core.h"
#include "hw/qdev-properties.h"

/*
 * 10.0: Property arrays are const and sized by device_class_set_props()
 * itself; DEFINE_PROP_END_OF_LIST() is gone.  Before, the array was
 * writable and ended with that terminator.  Declare them as
 *     static PIB_PROPERTIES pib_props[] = { ..., PIB_PROP_END };
 */
#ifdef DEFINE_PROP_END_OF_LIST
#define PIB_PROPERTIES  Property
#define PIB_PROP_END    DEFINE_PROP_END_OF_LIST()
#else
#define PIB_PROPERTIES  const Property
#define PIB_PROP_END
#endif

/* 9.2: DeviceClass::reset became legacy_reset, set through this function. */
#if !PIB_QEMU_AT_LEAST(9, 2)
static inline void device_class_set_legacy_reset(DeviceClass *dc,
                                                 DeviceReset dev_reset)
{
    dc->reset = dev_reset;
}
#endif

/* 10.1: TypeInfo::class_init takes its class_data as const void *. */
#if PIB_QEMU_AT_LEAST(10, 1)
typedef const void *PibClassData;
#else
typedef void *PibClassData;
#endif

/* 8.1: qio_channel_readv_full() takes read flags (QIO_CHANNEL_READ_FLAG_*). */
#if PIB_QEMU_AT_LEAST(8, 1)
#define pib_qio_channel_readv_full(ioc, iov, niov, fds, nfds, errp) \
    qio_channel_readv_full(ioc, iov, niov, fds, nfds, 0, errp)
#else
#define pib_qio_channel_readv_full qio_channel_readv_full
#endif

/* 10.2: CharBackend, a device's end of a chardev, was renamed CharFrontend. */
#if !PIB_QEMU_AT_LEAST(10, 2)
typedef CharBackend CharFrontend;
#endif

#endif /* HW_PIB_COMPAT_H */
