#!/bin/bash
# pib in a user's own libvirt VM: two domains made from tools/libvirt/pib-domain.xml (the
# device and its cable added to QEMU's command line with <qemu:commandline>), defined and
# started with virsh on Debian 12's libvirt 9.0, their pib ports ACTIVE, and ibv_rc_pingpong
# between them with its data checked, every guest command run through libvirt's own
# guest-agent channel (virsh qemu-agent-command).  No pibvm: libvirt starts and stops the QEMUs.
#
# The libvirt daemon is the test's own: libvirtd runs in a private mount namespace in which
# /run/libvirt, /etc/libvirt and libvirt's /var directories are the test's directories under
# build/, so it neither sees nor touches a libvirt of the host's.  The guests are pib's
# initramfs guests (their kernel and initrd in <os>), so the test needs no disk image.
# e2e-checks: 16
source "$(dirname "$0")/lib.sh"

W=$TOP/build/libvirt-test
if [ "${PIB_LIBVIRT_NS:-}" != 1 ]; then
  for t in libvirtd virsh; do
    command -v "$t" >/dev/null || { echo "  FAIL $t is not installed (mk/deps.sh libvirt)"; exit 1; }
  done
  rm -rf "$W"
  mkdir -p "$W"/{run,etc,lib,log,cache}
  export PIB_LIBVIRT_NS=1
  exec unshare --mount --propagation private -- bash "$0" "$@"
fi
# --- Inside the namespace --------------------------------------------------------------------
source "$(dirname "$0")/../../mk/stack.sh"
mount --bind "$W/run" /run/libvirt 2>/dev/null || { mkdir -p /run/libvirt && mount --bind "$W/run" /run/libvirt; }
mkdir -p /etc/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
mount --bind "$W/etc" /etc/libvirt
mount --bind "$W/lib" /var/lib/libvirt
mount --bind "$W/log" /var/log/libvirt
mount --bind "$W/cache" /var/cache/libvirt
# The libvirt-qemu user and group that Debian's libvirt expects (libvirt-daemon-system's
# postinst makes them; the test installs only the daemon): in this namespace's own copy of
# /etc/passwd and /etc/group.  libvirtd resolves that user before it reads qemu.conf.
for f in passwd group; do
  cp "/etc/$f" "$W/$f"
  grep -q '^libvirt-qemu:' "$W/$f" || case $f in
    passwd) echo 'libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin' >> "$W/$f" ;;
    group) echo 'libvirt-qemu:x:64055:' >> "$W/$f" ;;
  esac
  mount --bind "$W/$f" "/etc/$f"
done
# QEMU runs as root, with no security driver (no AppArmor here); its stdio goes to a file
# (no virtlogd).
cat > /etc/libvirt/qemu.conf <<EOF
user = "root"
group = "root"
security_driver = "none"
dynamic_ownership = 0
remember_owner = 0
namespaces = [ ]
stdio_handler = "file"
EOF
: > /etc/libvirt/libvirtd.conf
libvirtd -d -p "$W/libvirtd.pid"
VIRSH=(virsh -c qemu:///system)
cleanup() {
  local d
  for d in pib-lv0 pib-lv1; do
    "${VIRSH[@]}" destroy "$d" >/dev/null 2>&1
    "${VIRSH[@]}" undefine "$d" >/dev/null 2>&1
  done
  [ -f "$W/libvirtd.pid" ] && kill "$(cat "$W/libvirtd.pid")" 2>/dev/null
}
trap cleanup EXIT
# (`virsh version` would ask for a default emulator, /usr/bin/qemu-system-x86_64: there is none
# here, each domain names its own.)
for ((i = 0; i < 100; i++)); do "${VIRSH[@]}" list --all >/dev/null 2>&1 && break; sleep 0.2; done
check "libvirtd answers ($(libvirtd --version))" "${VIRSH[@]}" list --all || finish

# The emulator: a wrapper like the pib-qemu package's, around this build's QEMU.
cat > "$W/pib-qemu" <<EOF
#!/bin/sh
exec $STACK_OUT/qemu-system-x86_64 -L /usr/share/qemu -L /usr/share/seabios "\$@"
EOF
chmod 755 "$W/pib-qemu"

# domain N: the template with node N's values.
domain() {
  local n=$1 cable
  if [ "$n" = 0 ]; then cable="path=$W/cable.sock,server=on,wait=off"
  else cable="path=$W/cable.sock,reconnect=1"; fi
  sed -e "s|@NAME@|pib-lv$n|" -e "s|@EMULATOR@|$W/pib-qemu|" \
      -e "s|@KERNEL@|$STACK_OUT/vmlinuz|" -e "s|@INITRD@|$STACK_OUT/initramfs.cpio.gz|" \
      -e "s|@CMDLINE@|console=ttyS0 pibvm.node=$n quiet|" \
      -e "s|@MAC@|52:54:00:00:00:0$((n + 1))|" \
      -e "s|@UDP_LOCAL@|$((47100 + n))|" -e "s|@UDP_REMOTE@|$((47101 - n))|" \
      -e "s|@CABLE@|$cable|" -e "s|@LID@|$((n + 1))|" -e "s|@AGENT@|$W/agent$n.sock|" \
      "$TOP/tools/libvirt/pib-domain.xml" > "$W/pib-lv$n.xml"
}

# agent N JSON: a guest-agent command through libvirt; its "return", as JSON.
agent() { "${VIRSH[@]}" qemu-agent-command "pib-lv$1" --timeout 60 "$2" 2>/dev/null; }
# guest_start N CMD...: start CMD in domain N through the agent; prints its guest pid.
guest_start() {
  local n=$1; shift
  agent "$n" "$(python3 -c 'import json, sys; print(json.dumps({"execute": "guest-exec",
    "arguments": {"path": sys.argv[1], "arg": sys.argv[2:], "capture-output": True}}))' "$@")" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["return"]["pid"])'
}
# guest_wait N PID [TRIES]: wait for it (at most TRIES asks, 600 by default, 0.5 s apart);
# sets g_rc (255 if it never exited) and g_out (its stdout and stderr).
guest_wait() {
  local n=$1 pid=$2 tries=${3:-600} st i
  g_rc=255 g_out=
  [ -n "$pid" ] || return
  for ((i = 0; i < tries; i++)); do
    st=$(agent "$n" "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":$pid}}")
    if python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["return"]["exited"] else 1)' "$st" 2>/dev/null; then
      g_rc=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["return"].get("exitcode", 255))' "$st")
      g_out=$(python3 -c 'import base64, json, sys; r = json.loads(sys.argv[1])["return"]
print(base64.b64decode(r.get("out-data", "")).decode(errors="replace") + base64.b64decode(r.get("err-data", "")).decode(errors="replace"))' "$st")
      return
    fi
    sleep 0.5
  done
}
# guest N CMD...: run CMD in domain N and wait for it; sets g_rc, g_out.
guest() { local n=$1; shift; guest_wait "$n" "$(guest_start "$n" "$@")"; }

for n in 0 1; do domain "$n"; done
"${VIRSH[@]}" domxml-to-native qemu-argv "$W/pib-lv0.xml" > "$W/argv0.txt" 2>&1
check "virsh domxml-to-native: QEMU gets the pib-hca and its cable" \
  grep -q -- '-device pib-hca,id=pib0,chardev=pibcable,lid=1,bus=pcie.0,addr=0x10' "$W/argv0.txt"
for n in 0 1; do
  check "virsh define pib-lv$n" "${VIRSH[@]}" define "$W/pib-lv$n.xml"
done
for n in 0 1; do
  check "virsh start pib-lv$n" "${VIRSH[@]}" start "pib-lv$n" || { cat /var/log/libvirt/qemu/pib-lv$n.log 2>/dev/null | tail -n 20; finish; }
done
for n in 0 1; do
  ok=1
  for ((i = 0; i < 360; i++)); do agent "$n" '{"execute":"guest-ping"}' >/dev/null && { ok=0; break; }; sleep 0.5; done
  check "pib-lv$n: its guest agent answers through libvirt" test "$ok" -eq 0
done
for n in 0 1; do
  st=
  for ((i = 0; i < 240; i++)); do
    guest "$n" cat /sys/class/infiniband/pib_0/ports/1/state
    st=$(awk '{print $2}' <<<"$g_out")
    [ "$st" = ACTIVE ] && break
    sleep 0.5
  done
  check "pib-lv$n: pib_0 port 1 ACTIVE with its static LID (state ${st:-?})" test "$st" = ACTIVE
  guest "$n" cat /sys/class/infiniband/pib_0/ports/1/lid
  check "pib-lv$n: LID $((n + 1)) (got $g_out)" test "$((g_out))" -eq $((n + 1))
done
check "domstate: both running" \
  test "$("${VIRSH[@]}" domstate pib-lv0)$("${VIRSH[@]}" domstate pib-lv1)" = "runningrunning"

# ibv_rc_pingpong with its data checked (-c): the server in domain 0, started in the
# background through the agent; the client in domain 1, by name over the UDP link's Ethernet.
spid=$(guest_start 0 ibv_rc_pingpong -d pib_0 -c -n 200)
for ((i = 0; i < 150; i++)); do
  # 18515 = 0x4853, LISTEN = 0A (/proc/net/tcp's local address, remote address, state)
  guest 0 sh -c 'grep -Eq ":4853 [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6'
  [ "$g_rc" = 0 ] && break
  sleep 0.2
done
guest 1 ibv_rc_pingpong -d pib_0 -c -n 200 node0
echo "--- client"; echo "$g_out"
check "ibv_rc_pingpong client (pib-lv1) exits 0 (got $g_rc)" test "$g_rc" = 0
check "ibv_rc_pingpong client reports its throughput" grep -q 'bytes in .* seconds = ' <<<"$g_out"
guest_wait 0 "$spid" 120
check "ibv_rc_pingpong server (pib-lv0) exits 0 (got $g_rc)" test "$g_rc" = 0
finish
