#!/bin/bash
# nfs-server-kill: NFS over RDMA rides out its server's crash.  Node 1 reboots with a disk
# (pibvm's --disk), makes an ext2 file system on it and exports it (pib-nfsd up --dev /dev/vda:
# the export, with a fixed fsid, and NFSv4's client records live on the disk).  Node 0 mounts it
# as NFSv4.2 with proto=rdma (a hard mount, the default), writes file A, then rewrites file B
# with O_DIRECT in a loop.  While a pass is in flight node 1's QEMU is SIGKILLed; it boots again
# with the same disk and pib-nfsd up --dev starts the server on the same files.  The client's
# RPC-over-RDMA transport reconnects through rdma_cm, retransmits the calls that had no reply,
# and reclaims its open state in the server's grace period.  Checked:
#   - the pass in flight at the kill ends with dd's exit 0 after the new server was up, and no
#     pass fails;
#   - files A and B read back over NFS/RDMA (O_DIRECT) with their patterns' sha256, and the
#     server's disk has them too;
#   - umount and server shutdown are clean; no oops, BUG or WARNING in node 0's kernel, or in
#     node 1's since its second boot.
# Printed for the record: the time from the kill to the first pass that finished afterwards.
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"

SERVER=10.13.0.2
MNT=/mnt/nfs
DISK_MIB=128
MIB=16
loop_pid=

cleanup() {
  on 0 touch /tmp/nk-stop >/dev/null 2>&1
  restore_node1 >/dev/null 2>&1
  on 1 pib-nfsd up --dev /dev/vda >/dev/null 2>&1
  [ -n "$loop_pid" ] && wait "$loop_pid" 2>/dev/null
  on 0 umount -f "$MNT" >/dev/null 2>&1
  on 1 pib-nfsd down >/dev/null 2>&1
  "$PIBVM" ipoib down >/dev/null 2>&1
  on 0 rm -f /tmp/nk-stop /tmp/nk-passes /tmp/nk-a /tmp/nk-b >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 1' INT TERM
dmesg_mark 0

# node 1's server on its disk: IPoIB, then pib-nfsd.  Sets t_up to node 0's uptime once nfsd
# listens on RDMA.
server_up() {
  "$PIBVM" ipoib datagram 1 >/dev/null &&
    on_t 1 120 pib-nfsd up --dev /dev/vda &&
    wait_cm_listen 1 20049 || return 1
  t_up=$(on 0 cut -d' ' -f1 /proc/uptime)
}

check "node 1 reboots with a $DISK_MIB MiB disk" sh -c "'$PIBVM' kill 1 && '$PIBVM' up --node 1 --disk $DISK_MIB"
check "both ports ACTIVE" restore_node1
check "node 1: an ext2 file system on /dev/vda (busybox mke2fs)" on_t 1 120 mke2fs -q /dev/vda
check "IPoIB datagram up on node 0" "$PIBVM" ipoib datagram 0
check "node 1: IPoIB, pib-nfsd up --dev /dev/vda, listening on RDMA 20049" server_up

on 0 modprobe rpcrdma
on 0 modprobe nfsv4
on 0 mkdir -p "$MNT"
out=$(on_t 0 180 mount.nfs "$SERVER:/" "$MNT" -o vers=4.2,proto=rdma,port=20049 2>&1); rc=$?
check "node 0: mount.nfs -o vers=4.2,proto=rdma,port=20049 (exit $rc) $out" test $rc -eq 0
[ $rc -eq 0 ] || finish

on 0 dd if=/dev/urandom of=/tmp/nk-a bs=1M count=$MIB 2>/dev/null
on 0 dd if=/dev/urandom of=/tmp/nk-b bs=1M count=$MIB 2>/dev/null
sum_a=$(on 0 sha256sum /tmp/nk-a | cut -d' ' -f1)
sum_b=$(on 0 sha256sum /tmp/nk-b | cut -d' ' -f1)
check "node 0: file A written (O_DIRECT)" \
  on_t 0 300 dd if=/tmp/nk-a of="$MNT/a" bs=1M oflag=direct status=none

# File B, rewritten until told to stop (lib.sh's write_loop), and node 1 crashed under it.
check "node 0: file B's write loop runs (a pass done)" \
  write_loop 0 nk if=/tmp/nk-b of=$MNT/b bs=1M oflag=direct conv=notrunc
loop_pid=$wl_pid
check "pibvm kill 1 during the writes (SIGKILL)" crash_node 1 0
check "node 1 boots again (same disk) and both ports are ACTIVE" restore_node1
dmesg_marks[1]=0        # its new boot's log: all of it
check "node 1: IPoIB, pib-nfsd up --dev /dev/vda again (the same files)" server_up

# The pass in flight finishes once the client has reconnected, retransmitted and reclaimed its
# state: wait for a pass that ends after the server came back, within the NFSv4 grace period
# (pib-nfsd: 10 s) plus the RPC retransmit timeout (timeo=600: 60 s) of a hard mount.
end=$((SECONDS + 10 + 60 + TCG_SLACK_S))
span=
while [ $SECONDS -le $end ]; do
  passes=$(on 0 cat /tmp/nk-passes 2>/dev/null)
  span=$(awk -v k="$t_dead" -v u="$t_up" '$4 < k && $5 > u {print $2 ": " $4 " -> " $5}' <<<"$passes")
  [ -n "$span" ] && break
  sleep 1
done
on 0 touch /tmp/nk-stop
wait "$loop_pid"; lrc=$?; loop_pid=
passes=$(on 0 cat /tmp/nk-passes)
echo "--- the write passes (i rc start end, node 0's uptime):"; echo "$passes"
rec=$(awk -v a="$t_kill" -v s="$span" 'BEGIN {split(s, f, " "); printf "%.1f", f[4] - a}')
up=$(awk -v a="$t_kill" -v b="$t_up" 'BEGIN {printf "%.1f", b - a}')
echo "node 0: kill at $t_kill s, server exporting again at +$up s, the pass in flight done at +$rec s"
bad=$(awk '$3 != 0' <<<"$passes")
check "node 0: the write loop exits 0 (got $lrc) and no pass failed" \
  test "$lrc" -eq 0 -a -n "$passes" -a -z "$bad"
check "node 0: the pass in flight at the kill finished after the new server was up (pass $span)" \
  test -n "$span"
echo "--- node 0's kernel log since the start:"
on 0 dmesg | tail -n +$((${dmesg_marks[0]} + 1)) | grep -iE "nfs|rpcrdma|rdma" | tail -n 15

got_a=$(on_t 0 300 sh -c "dd if=$MNT/a bs=1M iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
got_b=$(on_t 0 300 sh -c "dd if=$MNT/b bs=1M iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
echo "file A sha256 $sum_a, read back $got_a"
echo "file B sha256 $sum_b, read back $got_b"
check "file A (written before the crash) reads back intact over NFS/RDMA" test "$got_a" = "$sum_a"
check "file B (written across the crash) reads back intact over NFS/RDMA" test "$got_b" = "$sum_b"
srv=$(on_t 1 300 sh -c 'sha256sum /srv/nfs/a /srv/nfs/b' | cut -d' ' -f1 | tr '\n' ' ')
check "node 1's disk holds both files" test "$srv" = "$sum_a $sum_b "

check "node 0: umount $MNT" on_t 0 120 umount "$MNT"
check "node 1: pib-nfsd down" on_t 1 120 pib-nfsd down
no_splats 0; no_splats 1

finish
