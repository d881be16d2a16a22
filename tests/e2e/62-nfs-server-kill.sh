#!/bin/bash
# nfs-server-kill: NFS over RDMA rides out its server's crash.  Node 1 reboots with a disk
# (pibvm's --disk), makes an ext2 file system on it and exports it (pib-nfsd up --dev /dev/vda:
# the export, with a fixed fsid, and NFSv4's client records live on the disk).  Node 0 mounts it
# as NFSv4.2 with proto=rdma (a hard mount, the default), writes file A, then rewrites file B
# with O_DIRECT in a loop, each pass with a pattern of its own (storage-kill.sh).  While a pass
# is in flight node 1's QEMU is SIGKILLed; it boots again with the same disk and pib-nfsd up
# --dev starts the server on the same files.  The client's RPC-over-RDMA transport reconnects
# through rdma_cm, retransmits the calls that had no reply, and reclaims its open state in the
# server's grace period.  The loop is told to stop right after the kill, so the pass in flight
# is its last.  Checked:
#   - one pass began before node 1 was gone and ended with dd's exit 0 after the new server
#     was up, it was the loop's last, and no pass failed;
#   - file A reads back over NFS/RDMA (O_DIRECT) with its pattern's sha256; file B holds, byte
#     for byte, the pattern of the pass in flight at the kill, not an older pass's; the
#     server's disk holds both;
#   - umount and server shutdown are clean; no oops, BUG or WARNING in node 0's kernel, or in
#     node 1's since its second boot.
# Printed for the record: the time from the kill to the pass in flight done.
# e2e-checks: 23
source "$(dirname "$0")/lib.sh"
source "$TOP/tests/hostile/link-e2e.sh"
source "$(dirname "$0")/storage-kill.sh"

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
  pass_cleanup nk
}
trap cleanup EXIT
trap 'exit 1' INT TERM
dmesg_mark 0

# node 1's server on its disk: IPoIB, then pib-nfsd (storage_up).  Sets t_up to node 0's uptime
# once nfsd listens on RDMA.
server_up() { storage_up 20049 on_t 1 120 pib-nfsd up --dev /dev/vda; }

disk_reboot $DISK_MIB
check "node 1: an ext2 file system on /dev/vda (busybox mke2fs)" on_t 1 120 mke2fs -q /dev/vda
check "IPoIB datagram up on node 0" "$PIBVM" ipoib datagram 0
check "node 1: IPoIB, pib-nfsd up --dev /dev/vda, listening on RDMA 20049" server_up

on 0 modprobe rpcrdma
on 0 modprobe nfsv4
on 0 mkdir -p "$MNT"
out=$(on_t 0 180 mount.nfs "$SERVER:/" "$MNT" -o vers=4.2,proto=rdma,port=20049 2>&1); rc=$?
check "node 0: mount.nfs -o vers=4.2,proto=rdma,port=20049 (exit $rc) $out" test $rc -eq 0
[ $rc -eq 0 ] || finish

# File A's pattern and file B's base (storage-kill.sh), made in node 0's RAM.
pass_bases nk $MIB
check "node 0: file A written (O_DIRECT)" \
  on_t 0 300 dd if=/tmp/nk-a of="$MNT/a" bs=1M oflag=direct status=none

# File B, a new pattern every pass until told to stop, and node 1 crashed under a pass.
check "node 0: file B's write loop runs (pass 1 done, pass 2 begun)" \
  pass_loop 0 nk /tmp/nk-b $MIB "$MNT/b" 0 conv=notrunc
loop_pid=$pl_pid
crash_under_loop nk
check "node 1: IPoIB, pib-nfsd up --dev /dev/vda again (the same files)" server_up
# The server is back: the pass in flight, the loop's last, ends once the client has
# reconnected, retransmitted and reclaimed its state.  That takes at most the NFSv4 grace period
# (pib-nfsd: 10 s) and the RPC retransmit timeout of a hard mount (timeo=600: 60 s).
end=$((SECONDS + 10 + 60 + TCG_SLACK_S))
while kill -0 "$loop_pid" 2>/dev/null && [ $SECONDS -le $end ]; do sleep 1; done
check "node 0: the write loop ends within the grace period and an RPC timeout of the server's return" \
  bash -c '! kill -0 "$1" 2>/dev/null' _ "$loop_pid" || finish
wait "$loop_pid"; lrc=$?; loop_pid=
# The pass in flight: begun before node 1 was gone, ended (exit 0) after the new server was up.
pass_verdict nk "$lrc" "$t_up" "the new server was up"
rec=$(awk -v a="$t_kill" -v s="$span" 'BEGIN {split(s, f, " "); printf "%.1f", f[4] - a}')
up=$(awk -v a="$t_kill" -v b="$t_up" 'BEGIN {printf "%.1f", b - a}')
echo "node 0: kill at $t_kill s, server exporting again at +$up s, the pass in flight done at +$rec s"
echo "--- node 0's kernel log since the start:"
dmesg_since 0 | grep -iE "nfs|rpcrdma|rdma" | tail -n 15

got_a=$(on_t 0 300 sh -c "dd if=$MNT/a bs=1M iflag=direct 2>/dev/null | sha256sum" | cut -d' ' -f1)
echo "file A sha256 $sum_a, read back $got_a"
check "file A (written before the crash) reads back intact over NFS/RDMA" test "$got_a" = "$sum_a"
check "file B holds pass ${last:-none}'s pattern, byte for byte, read over NFS/RDMA" \
  region_holds 0 /tmp/nk-b $MIB "${last:-0}" if="$MNT/b"
sum_b=$(pass_sum 0 /tmp/nk-b $MIB "${last:-0}")
size_b=$(on 0 stat -c %s "$MNT/b")
check "file B is $MIB MiB long (got ${size_b:-nothing} bytes)" test "${size_b:-0}" -eq $((MIB << 20))
srv=$(on_t 1 300 sh -c 'sha256sum /srv/nfs/a /srv/nfs/b' | cut -d' ' -f1 | tr '\n' ' ')
echo "node 1's disk: $srv(file A $sum_a, pass $last's pattern $sum_b)"
check "node 1's disk holds file A and pass ${last:-none}'s pattern as file B" test "$srv" = "$sum_a $sum_b "

check "node 0: umount $MNT" on_t 0 120 umount "$MNT"
check "node 1: pib-nfsd down" on_t 1 120 pib-nfsd down
no_splats 0; no_splats 1

finish
