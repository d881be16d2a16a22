#!/bin/bash
# nfs-rdma: NFS over RDMA on pib, the kernel's own server and client.  Node 1 exports a tmpfs
# (pib-nfsd: Debian's rpcbind, rpc.mountd, exportfs and rpc.nfsd --rdma=20049); node 0 mounts
# it as NFSv4.2 with proto=rdma,port=20049 (Debian's mount.nfs).  RPC-over-RDMA (RFC 8166)
# runs on one RC QP per connection from rdma_cm: calls and replies as SENDs, and the bulk of
# a WRITE or READ moved by the server with RDMA READ/WRITE through the client's FRWR-registered
# chunks.  Checked:
#   - the mount exists with proto=rdma and port=20049 (/proc/mounts) and the server counts the
#     calls (nfsstat on node 1 grows);
#   - a 64 MiB random file written through the mount (O_DIRECT, so each byte crosses the
#     transport) and read back (O_DIRECT) has its sha256; the server's tmpfs has it too;
#   - umount and pib-nfsd down are clean; neither kernel logs an oops, BUG or WARNING.
# Printed for the record: the time the mount takes, the dd write and read rates.
# e2e-checks: 13
source "$(dirname "$0")/lib.sh"

SERVER=10.13.0.2
MNT=/mnt/nfs
MIB=64

cleanup() {
  on 0 umount -f "$MNT" >/dev/null 2>&1
  on 1 pib-nfsd down >/dev/null 2>&1
  "$PIBVM" ipoib down >/dev/null 2>&1
}
trap cleanup EXIT
check "IPoIB datagram up on both nodes" "$PIBVM" ipoib datagram || finish
dmesg_mark 0; dmesg_mark 1

out=$(on_t 1 120 pib-nfsd up 2>&1); rc=$?
echo "--- pib-nfsd up: $out"
check "node 1: pib-nfsd up (exit $rc)" test $rc -eq 0
echo "--- node 1 portlist"; on 1 pib-nfsd status
check "node 1: nfsd listens on rdma_cm port 20049" wait_cm_listen 1 20049

on 0 modprobe rpcrdma
on 0 modprobe nfsv4
on 0 mkdir -p "$MNT"
t0=$(date +%s%N)
out=$(on_t 0 180 mount.nfs "$SERVER:/" "$MNT" -o vers=4.2,proto=rdma,port=20049 2>&1); rc=$?
t1=$(date +%s%N)
echo "--- mount.nfs ($(( (t1 - t0) / 1000000 )) ms): $out"
check "node 0: mount.nfs $SERVER:/ $MNT -o vers=4.2,proto=rdma,port=20049 (exit $rc)" test $rc -eq 0
m=$(on 0 awk -v m="$MNT" '$2 == m' /proc/mounts)
echo "--- /proc/mounts: $m"
check "node 0: /proc/mounts shows $MNT as nfs4 with proto=rdma,port=20049" \
  grep -qE "^$SERVER:/ $MNT nfs4 .*proto=rdma,port=20049" <<<"$m"

calls0=$(on 1 sh -c "awk '\$1 == \"rpc\" {print \$2}' /proc/net/rpc/nfsd")
direct_round_trip 0 "$MNT/pattern" $MIB
srv=$(on_t 1 300 sha256sum /srv/nfs/pattern | cut -d' ' -f1)
calls1=$(on 1 sh -c "awk '\$1 == \"rpc\" {print \$2}' /proc/net/rpc/nfsd")
echo "server   sha256 $srv (node 1's /srv/nfs/pattern)"
echo "nfsd rpc calls: $calls0 -> $calls1"
check "the $MIB MiB file read back over NFS/RDMA has the pattern's sha256" test -n "$rt_want" -a "$rt_got" = "$rt_want"
check "node 1's tmpfs holds the pattern" test "$srv" = "$rt_want"
# Writing and reading 64 MiB takes at least 128 READs and WRITEs even at RPC-over-RDMA's largest
# rsize/wsize (1 MiB); pib's mount gets 128 KiB.
check "node 1's nfsd served at least 128 RPCs for it" test "$((calls1 - calls0))" -ge 128

check "node 0: umount $MNT" on_t 0 120 umount "$MNT"
check "node 1: pib-nfsd down" on_t 1 120 pib-nfsd down
no_splats 0; no_splats 1

finish
