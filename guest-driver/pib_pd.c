// SPDX-License-Identifier: GPL-2.0
/*
 * pib_pd.c - the two kinds of domain: protection domains and XRC domains (the device's
 * qemu-hw/hca/pib-pd.c).  The device numbers both and counts what is made in them; the
 * driver only asks for one and gives it back.
 *
 * Verbs reach the device only through pib_com_cmd.c.
 */
#include "pib.h"
#include "pib_com_cmd.h"

/* ------------------------------------------------------------------------------------------
 * Protection domains: numbered by the device, which checks that an MR and a QP that meet
 * in a work request belong to the same one.
 * ------------------------------------------------------------------------------------------ */

int pib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibpd->device);

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "alloc_pd: unknown request bytes\n");
		return -EINVAL;
	}
	return pib_cmd_create_pd(&dev->com, &to_ppd(ibpd)->pdn);
}

int pib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibpd->device);
	u32 pdn = to_ppd(ibpd)->pdn;

	return pib_destroy_status(dev, "PD", pdn, pib_cmd_destroy_pd(&dev->com, pdn));
}

/* ------------------------------------------------------------------------------------------
 * XRC domains (IBTA 9.8): numbered by the device, which lets an XRC target QP take receive
 * WQEs only from the XRC SRQs of its own domain.  ib_core shares one domain among the
 * processes that open it through the same file (ibv_open_xrcd); the driver sees it once.
 * ------------------------------------------------------------------------------------------ */

int pib_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibxrcd->device);

	if (!pib_udata_in_cleared(udata)) {
		ibdev_dbg(&dev->ibdev, "alloc_xrcd: unknown request bytes\n");
		return -EINVAL;
	}
	return pib_cmd_alloc_xrcd(&dev->com, &to_pxrcd(ibxrcd)->xrcdn);
}

int pib_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct pib_dev *dev = to_pdev(ibxrcd->device);
	u32 xrcdn = to_pxrcd(ibxrcd)->xrcdn;

	return pib_destroy_status(dev, "XRCD", xrcdn, pib_cmd_dealloc_xrcd(&dev->com, xrcdn));
}
