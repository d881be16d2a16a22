#!/bin/bash
# pib where users live: two full Debian guests (tools/pibvm up --image debian; Debian 13 with
# PIB_STACK=trixie), each booted from the image images/debian/build.sh makes with mmdebstrap:
# the distribution's kernel and initramfs, systemd, sshd, Debian's rdma-core, opensm, perftest
# and OpenMPI, and pib from its Debian packages, installed with apt (make packages).
#
# It checks what a user would: the packages installed and DKMS's pib.ko for the running
# kernel, loaded from its PCI modalias; a boot with no failed unit, rdma-core's own units run;
# the port ACTIVE under opensm.service on node 0 only; the provider loaded by Debian's
# libibverbs (ibv_devinfo; a package without pib.driver fails here); ssh from the host and
# between the nodes by name, pibvm cp both ways; ibv_rc_pingpong and ib_write_bw with data
# checked; an MPI job started by mpirun from node 0 over ssh, on UCX over pib_0 only, whose
# ping-pong and allreduce check their data, the pib port's counters showing it went there;
# last, a fabric snapshot saved and loaded, the root disks with it.
#
# It boots its own two nodes in a run directory beside the suite's, whose guests stay up.
# e2e-checks: 53
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/switched.sh"      # switched_dir / switched_up: a run of its own

switched_dir vm-debian
switched_up --image debian --nodes 2 --mem 1536

for n in 0 1; do
  echo "--- node $n"
  # The boot is done when systemd says so: "running", or "degraded" with a failed unit.
  st=$(on_t "$n" 300 systemctl is-system-running --wait)
  failed=$(on "$n" systemctl --failed --plain --no-legend)
  check "node $n: systemd finished booting: running (got ${st:-nothing}; failed: ${failed:-none})" \
    test "$st" = running
  for p in pib-dkms ibverbs-providers-pib; do
    check "node $n: $p installed by apt (dpkg: $(on "$n" dpkg-query -W -f='${Status} ${Version}' "$p" 2>&1))" \
      test "$(on "$n" dpkg-query -W -f='${Status}' "$p")" = "install ok installed"
  done
  kver=$(on "$n" uname -r)
  dkms=$(on "$n" dkms status -m pib -k "$kver")
  echo "dkms status: $dkms"
  check "node $n: dkms built and installed pib for the running kernel $kver" \
    grep -q "^pib/.*, $kver, x86_64: installed" <<<"$dkms"
  modpath=$(on "$n" modinfo -n pib)
  check "node $n: pib.ko is DKMS's ($modpath)" grep -q "^/lib/modules/$kver/updates/dkms/pib.ko" <<<"$modpath"
  check "node $n: pib loaded (from the PCI modalias, by udev)" \
    on "$n" sh -c 'grep -q "^pib " /proc/modules'
  for u in rdma-load-modules@infiniband.service rdma-ndd.service; do
    res=$(on "$n" systemctl show -p Result --value "$u")
    act=$(on "$n" systemctl show -p ActiveState --value "$u")
    check "node $n: rdma-core's $u ran (ActiveState $act, Result $res)" \
      test "$res" = success -a "$act" = active
  done
  desc=$(on "$n" cat /sys/class/infiniband/pib_0/node_desc)
  check "node $n: rdma-ndd set the node description (\"$desc\")" test "$desc" = "node$n pib_0"
  sm=$(on "$n" systemctl show -p ActiveState --value opensm.service)
  if [ "$n" = 0 ]; then
    check "node 0: opensm.service runs the subnet manager (ActiveState $sm)" test "$sm" = active
    check "node 0: opensm@ runs for the pib port" on 0 sh -c 'systemctl is-active "opensm@*" | grep -qx active'
  else
    cond=$(on "$n" systemctl show -p ConditionResult --value opensm.service)
    check "node $n: no opensm here (ActiveState $sm, ConditionResult $cond)" test "$sm" != active -a "$cond" = no
  fi
  check "node $n: port ACTIVE" test "$(port_state "$n")" = ACTIVE
  devinfo=$(on "$n" ibv_devinfo -d pib_0)
  echo "$devinfo" | head -n 20
  check "node $n: Debian's libibverbs loads the pib provider (ibv_devinfo -d pib_0)" \
    grep -q 'transport:.*InfiniBand' <<<"$devinfo"
  check "node $n: ... and sees the port ACTIVE" grep -q 'state:.*PORT_ACTIVE' <<<"$devinfo"
done

# ssh: from the host with the run's key, and from node 0 to node 1 by name.
check "pibvm ssh 0: hostname node0" test "$("$PIBVM" ssh 0 -- hostname)" = node0
check "node0 -> ssh node1: hostname node1" test "$("$PIBVM" ssh 0 -- ssh node1 hostname)" = node1

# pibvm cp, both ways, through the guest agent.
tmp=$(mktemp -d)
head -c 3000000 /dev/urandom > "$tmp/in"
"$PIBVM" cp "$tmp/in" 1:/root/cp-test && "$PIBVM" cp 1:/root/cp-test "$tmp/out"
check "pibvm cp: 3 MB in and out of node 1, unchanged" cmp -s "$tmp/in" "$tmp/out"
check "pibvm cp: the guest has the same bytes" \
  test "$(on 1 sha256sum /root/cp-test | cut -d' ' -f1)" = "$(sha256sum "$tmp/in" | cut -d' ' -f1)"
rm -rf "$tmp"

# The data path with Debian's own tools.
pair "ibv_rc_pingpong" 18515 ibv_rc_pingpong -d pib_0 -c -s 65536 -n 200 -- \
  ibv_rc_pingpong -d pib_0 -c -s 65536 -n 200 node0
check "ibv_rc_pingpong: client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$pair_out_client"
pair "ib_write_bw" 18515 ib_write_bw -d pib_0 -s 65536 -n 200 -F -- \
  ib_write_bw -d pib_0 -s 65536 -n 200 -F node0
check "ib_write_bw: a result line" grep -Eq '^ *65536 +200 ' <<<"$pair_out_client"

# MPI, as a cluster job: mpirun on node 0 starts the ranks over ssh; UCX on pib_0 only (a
# job that cannot use the port fails rather than falls back to TCP).
before=$(hw_counter 1 rx_packets)
# Open MPI's own connections (its daemons, and a TCP fallback it must not take) stay on the
# management network: every node has the same address on its ssh NIC.
mpi=$("$PIBVM" ssh 0 -- timeout 600 mpirun --allow-run-as-root --host node0,node1 -np 2 \
        --mca oob_tcp_if_include 10.11.0.0/24 --mca btl_tcp_if_include 10.11.0.0/24 \
        --mca pml ucx -x UCX_NET_DEVICES=pib_0:1 -x UCX_TLS=rc,ud,self,sm pib-mpi-test 2>&1)
rc=$?
after=$(hw_counter 1 rx_packets)
echo "$mpi"
check "mpirun over ssh: exit 0 (got $rc)" test "$rc" -eq 0
check "MPI: no check failed" test "$(grep -c '^FAIL' <<<"$mpi")" -eq 0
check "MPI: every ping-pong size checked (12) and the allreduce" \
  test "$(grep -c '^PASS  pingpong' <<<"$mpi")" -eq 12 -a "$(grep -c '^PASS  allreduce' <<<"$mpi")" -eq 1
check "MPI: all checks passed" grep -q '^pib-mpi-test: all checks passed' <<<"$mpi"
check "MPI: the job went over pib (node 1 rx_packets $before -> $after, more than 10,000)" \
  test $((after - before)) -gt 10000
grep '^FIGURE' <<<"$mpi" || true

# A fabric snapshot of full guests: their root disks (qcow2 overlays) are saved and put back with
# their RAM.  A file node 1 wrote (and synced) before the save reads the same after the load,
# from the disk itself, though it was overwritten after the save; ssh, systemd and the port
# come back, and ibv_rc_pingpong checks its data again.
check "node 1 writes /root/mark ('saved')" on 1 sh -c 'echo saved > /root/mark && sync'
check "pibvm snapshot save full" "$PIBVM" snapshot save full
check "node 1 overwrites /root/mark ('later')" on 1 sh -c 'echo later > /root/mark && sync'
check "pibvm snapshot load full" "$PIBVM" snapshot load full
mark=$(on 1 sh -c 'echo 3 > /proc/sys/vm/drop_caches; cat /root/mark')
check "after the load, /root/mark reads 'saved' from node 1's disk (got '$mark')" test "$mark" = saved
check "after the load: pibvm ssh 1 and systemd running" \
  test "$("$PIBVM" ssh 1 -- systemctl is-system-running)" = running
for n in 0 1; do
  check "after the load: node $n port ACTIVE" test "$(port_state "$n")" = ACTIVE
done
pair "ibv_rc_pingpong after the load" 18515 ibv_rc_pingpong -d pib_0 -c -n 100 -- \
  ibv_rc_pingpong -d pib_0 -c -n 100 node0
rm -rf "$PIBVM_DIR/snapshots/full"      # (two RAM streams of full guests: 600 MB)
finish
