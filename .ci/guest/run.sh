#!/usr/bin/env bash
# The project's real-RDMA test host: boots a Debian 12 guest with Soft-RoCE
# (rdma_rxe) under qemu and runs .ci/guest/checks/*.sh inside it, then two
# guests joined by one Ethernet wire (rxe on each NIC) and runs
# .ci/guest/fabric/*.sh on both.
#
#   bash .ci/guest/run.sh            build, boot, run the suite, report
#   bash .ci/guest/run.sh --prepare  only get qemu and the (cached) image;
#                                    safe to run in the background while a
#                                    later `run.sh` waits for it (flock)
#
# Ends with one line `N passed, M failed` and exits non-zero if M > 0, if
# N == 0, or if the guest did not boot or timed out. See README.md here.
#
# Env: UDAH_GUEST_TIMEOUT  seconds for the whole guest run (default 1800)
#      UDAH_GUEST_ACCEL    auto (KVM, then TCG) | kvm | tcg   (default auto)
#      UDAH_GUEST_ONLY     glob of the checks to run (default '*')
#      UDAH_CHECK_TIMEOUT  seconds per check (default 900)
#      UDAH_GUEST_CACHE    cache dir (default /var/cache/udah-guest)
#      UDAH_GUEST_KEEP=1   keep the run directory (share, logs) afterwards
#      UDAH_GUEST_FABRIC=0 skip the two-host fabric (fabric/*.sh)
#      UDAH_GUEST_SINGLE=0 skip the single guest (checks/*.sh)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

prepare_only=
[[ "${1:-}" == --prepare ]] && prepare_only=1

t_start=$(date +%s)
since() { echo $(( $(date +%s) - $1 )); }

# Loud failure: the suite could not run. Never a silent pass.
no_run() {
  echo "[guest] THE SOFT-ROCE GUEST SUITE DID NOT RUN: $*" >&2
  echo "0 passed, 1 failed"
  exit 1
}

t=$(date +%s)
qemu=$(bash "$GUEST_DIR/qemu.sh") || no_run "could not provide qemu-system-x86_64"
image=$(bash "$GUEST_DIR/image.sh") || no_run "could not build the guest image"
t_prepare=$(since "$t")
log "qemu: $qemu; image: $image (image build took $(cat "$image/build-seconds")s when it was made); prepare ${t_prepare}s"
[[ -n "$prepare_only" ]] && exit 0

run=$(mktemp -d /tmp/udah-guest.XXXXXX)
declare -A qemu_pid=()
tail_pids=()
cleanup() {
  local p
  for p in "${tail_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${qemu_pid[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true; done
  if [[ "${UDAH_GUEST_KEEP:-}" == 1 ]]; then log "run directory kept: $run"; else rm -rf "$run"; fi
}
trap cleanup EXIT

# One build for every guest: the binaries are hard-linked into each share.
t=$(date +%s)
bash "$GUEST_DIR/build.sh" "$run/bin" || no_run "the host-side build failed"
t_build=$(since "$t")

# make_share <name> <role> <checks dir>: the 9p share of one guest (the
# suite's scripts, the binaries, its checks, its own out/).
make_share() {
  local share=$run/$1/share c
  mkdir -p "$share/guest/checks" "$share/out"
  cp -al "$run/bin" "$share/bin"
  cp "$GUEST_DIR/guest-init.sh" "$GUEST_DIR/check-lib.sh" "$share/guest/"
  shopt -s nullglob
  for c in "$GUEST_DIR/$3"/${UDAH_GUEST_ONLY:-*}.sh; do
    [[ -x "$c" ]] && cp -p "$c" "$share/guest/checks/"
  done
  shopt -u nullglob
  echo "$2" >"$share/role"
  echo "${UDAH_CHECK_TIMEOUT:-900}" >"$share/check-timeout"
  # The host's CI flag reaches the checks (a check whose input is missing
  # fails under CI=true instead of skipping).
  printf 'export CI=%q\n' "${CI:-}" >"$share/env"
  # Streams the guest's suite log as it is written (--pid: it also ends
  # with this script, whatever happens).
  tail -n +1 -F --pid=$$ "$share/out/suite.log" 2>/dev/null > >(sed -u "s/^/guest $1| /") &
  tail_pids+=($!)
}

timeout_s=${UDAH_GUEST_TIMEOUT:-1800}
kvm_probe_s=20

# boot <kvm|tcg> <name> [qemu args...]: starts guest <name> in the
# background on its share (sets qemu_pid[name]; serial log in $run/<name>/).
boot() {
  local accel=$1 name=$2 a
  shift 2
  if [[ $accel == kvm ]]; then a=(-enable-kvm -cpu host,-arch-capabilities); else a=(-accel tcg,thread=multi -cpu max); fi
  local serial=$run/$name/serial-$accel.log
  : >"$serial"
  "$qemu/run-qemu" "${a[@]}" -machine pc -m "${GUEST_MEM:-1536}" -smp 2 \
    -nodefaults -no-user-config -display none -monitor none -no-reboot \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 earlyprintk=serial,ttyS0 init=/sbin/udah-init panic=-1 loglevel=4" \
    -drive "file=$image/rootfs.ext4,if=virtio,format=raw,snapshot=on" \
    -fsdev "local,id=fs0,path=$run/$name/share,security_model=none" \
    -device virtio-9p-pci,fsdev=fs0,mount_tag=udah \
    "$@" -serial "file:$serial" >"$run/$name/qemu-$accel.log" 2>&1 &
  qemu_pid[$name]=$!
  log "guest $name: qemu ($accel) started, pid ${qemu_pid[$name]}, serial log $serial"
}

# wait_guests <deadline> <name>...: waits for every guest's qemu to exit
# (killing all of them at the deadline).
wait_guests() {
  local deadline=$1 n live
  shift
  while :; do
    live=0
    for n in "$@"; do kill -0 "${qemu_pid[$n]}" 2>/dev/null && live=1; done
    (( live )) || break
    if (( $(date +%s) > deadline )); then
      log "TIMEOUT: the guests ran longer than ${timeout_s}s; killing qemu"
      for n in "$@"; do kill -KILL "${qemu_pid[$n]}" 2>/dev/null || true; done
      break
    fi
    sleep 1
  done
  for n in "$@"; do wait "${qemu_pid[$n]}" 2>/dev/null || true; unset "qemu_pid[$n]"; done
}

# results <name> <accel> <prefix>: appends the guest's verdicts (names
# prefixed) to $run/results.txt, or one FAIL if it did not finish.
results() {
  local name=$1 accel=$2 prefix=$3 out=$run/$1/share/out
  if [[ ! -f "$out/DONE" || ! -f "$out/summary" ]]; then
    echo "----- guest $name: serial console ($accel), last 60 lines -----" >&2
    tail -n 60 "$run/$name/serial-$accel.log" >&2 || true
    echo "----- guest $name: qemu ($accel) -----" >&2
    cat "$run/$name/qemu-$accel.log" >&2 || true
    echo "FAIL guest-$name: the guest did not finish (accel $accel)" >>"$run/results.txt"
    return
  fi
  sed -E "s/^(PASS|FAIL) /\1 $prefix/" "$out/results.txt" >>"$run/results.txt"
  log "guest $name: rxe0 ACTIVE at $(cat "$out/active-seconds" 2>/dev/null || echo ?)s of guest uptime, suite ended at $(cat "$out/end-seconds" 2>/dev/null || echo ?)s"
}
: >"$run/results.txt"

# --- the single guest: rxe on a dummy netdev (checks/) ---------------------
t_single=0
used=
accel=${UDAH_GUEST_ACCEL:-auto}
if [[ "${UDAH_GUEST_SINGLE:-1}" != 0 ]]; then
  t_boot=$(date +%s)
  mkdir -p "$run/single"
  make_share single single checks
  if [[ $accel == auto || $accel == kvm ]] && [[ -w /dev/kvm ]]; then
    boot kvm single
    # KVM on these machines (nested PVM) either aborts at once or hangs in the
    # kernel's decompressor; a kernel that prints its banner has left it.
    serial=$run/single/serial-kvm.log
    for _ in $(seq 1 $((kvm_probe_s * 2))); do
      grep -q 'Linux version' "$serial" 2>/dev/null && break
      kill -0 "${qemu_pid[single]}" 2>/dev/null || break
      sleep 0.5
    done
    if grep -q 'Linux version' "$serial" 2>/dev/null && kill -0 "${qemu_pid[single]}" 2>/dev/null; then
      used=kvm
    else
      log "KVM did not boot the kernel within ${kvm_probe_s}s ($(head -c 300 "$run/single/qemu-kvm.log" | tr '\n' ' ')); falling back to TCG"
      kill -KILL "${qemu_pid[single]}" 2>/dev/null || true
      wait "${qemu_pid[single]}" 2>/dev/null || true
    fi
  fi
  if [[ -z "$used" ]]; then
    [[ $accel == kvm ]] && no_run "UDAH_GUEST_ACCEL=kvm but KVM does not boot"
    boot tcg single
    used=tcg
  fi
  deadline=$(( $(date +%s) + timeout_s ))
  wait_guests "$deadline" single
  t_single=$(since "$t_boot")
  results single "$used" ""
else
  [[ $accel == kvm ]] && used=kvm || used=tcg
fi

# --- the two-host fabric: rxe on each guest's NIC, one wire (fabric/) -------
# Guest a listens on a TCP socket that carries the Ethernet frames, guest b
# connects to it (qemu's socket netdev); both mount the same sync/ share for
# the checks' rendezvous. 1 GiB each, so that the pair fits where one did.
t_fabric=0
if [[ "${UDAH_GUEST_FABRIC:-1}" != 0 ]]; then
  t=$(date +%s)
  mkdir -p "$run/sync"
  wire_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  sync=(-fsdev "local,id=fs1,path=$run/sync,security_model=none" -device virtio-9p-pci,fsdev=fs1,mount_tag=sync)
  for h in a b; do mkdir -p "$run/$h"; make_share "$h" "$h" fabric; done
  GUEST_MEM=1024 boot "$used" a "${sync[@]}" -netdev "socket,id=wire,listen=127.0.0.1:$wire_port" \
    -device virtio-net-pci,netdev=wire,mac=52:54:00:da:00:01
  # b connects once a listens.
  for _ in $(seq 1 40); do ss -Hltn | grep -q "127.0.0.1:$wire_port " && break; sleep 0.25; done
  GUEST_MEM=1024 boot "$used" b "${sync[@]}" -netdev "socket,id=wire,connect=127.0.0.1:$wire_port" \
    -device virtio-net-pci,netdev=wire,mac=52:54:00:da:00:02
  deadline=$(( $(date +%s) + timeout_s ))
  wait_guests "$deadline" a b
  t_fabric=$(since "$t")
  results a "$used" "a:"
  results b "$used" "b:"
fi

echo "===== results (accel $used) ====="
cat "$run/results.txt"
npass=$(grep -c '^PASS ' "$run/results.txt" || true)
nfail=$(grep -c '^FAIL ' "$run/results.txt" || true)
log "timings: prepare ${t_prepare}s, host build ${t_build}s, single guest ${t_single}s, two-host fabric ${t_fabric}s, total $(since "$t_start")s"
echo "$npass passed, $nfail failed"
if (( nfail > 0 || npass == 0 )); then exit 1; fi
