#!/usr/bin/env bash
# The project's real-RDMA test host: boots a Debian 12 guest with Soft-RoCE
# (rdma_rxe) under qemu and runs .ci/guest/checks/*.sh inside it.
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
qemu_pid=
tail_pid=
cleanup() {
  [[ -n "$tail_pid" ]] && kill "$tail_pid" 2>/dev/null || true
  if [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; then kill -KILL "$qemu_pid" 2>/dev/null || true; fi
  if [[ "${UDAH_GUEST_KEEP:-}" == 1 ]]; then log "run directory kept: $run"; else rm -rf "$run"; fi
}
trap cleanup EXIT

share=$run/share
mkdir -p "$share/guest/checks" "$share/bin" "$share/out"
t=$(date +%s)
bash "$GUEST_DIR/build.sh" "$share/bin" || no_run "the host-side build failed"
t_build=$(since "$t")
cp "$GUEST_DIR/guest-init.sh" "$GUEST_DIR/check-lib.sh" "$share/guest/"
shopt -s nullglob
for c in "$GUEST_DIR"/checks/${UDAH_GUEST_ONLY:-*}.sh; do
  [[ -x "$c" ]] && cp -p "$c" "$share/guest/checks/"
done
shopt -u nullglob
echo "${UDAH_CHECK_TIMEOUT:-900}" >"$share/check-timeout"
# The host's CI flag reaches the checks (a check whose input is missing fails
# under CI=true instead of skipping).
printf 'export CI=%q\n' "${CI:-}" >"$share/env"

timeout_s=${UDAH_GUEST_TIMEOUT:-1800}
kvm_probe_s=20

# boot <kvm|tcg>: starts qemu in the background (sets qemu_pid, serial).
boot() {
  local accel=$1 a
  if [[ $accel == kvm ]]; then a=(-enable-kvm -cpu host,-arch-capabilities); else a=(-accel tcg,thread=multi -cpu max); fi
  serial=$run/serial-$accel.log
  : >"$serial"
  "$qemu/run-qemu" "${a[@]}" -machine pc -m 1536 -smp 2 \
    -nodefaults -no-user-config -display none -monitor none -no-reboot \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 earlyprintk=serial,ttyS0 init=/sbin/udah-init panic=-1 loglevel=4" \
    -drive "file=$image/rootfs.ext4,if=virtio,format=raw,snapshot=on" \
    -fsdev "local,id=fs0,path=$share,security_model=none" \
    -device virtio-9p-pci,fsdev=fs0,mount_tag=udah \
    -serial "file:$serial" >"$run/qemu-$accel.log" 2>&1 &
  qemu_pid=$!
  log "qemu ($accel) started, pid $qemu_pid, serial log $serial"
}

# Streams the guest's suite log as it is written.
# (--pid: it also ends with this script, whatever happens.)
tail -n +1 -F --pid=$$ "$share/out/suite.log" 2>/dev/null > >(sed -u 's/^/guest| /') &
tail_pid=$!

t_boot=$(date +%s)
accel=${UDAH_GUEST_ACCEL:-auto}
used=
if [[ $accel == auto || $accel == kvm ]] && [[ -w /dev/kvm ]]; then
  boot kvm
  # KVM on these machines (nested PVM) either aborts at once or hangs in the
  # kernel's decompressor; a kernel that prints its banner has left it.
  for _ in $(seq 1 $((kvm_probe_s * 2))); do
    grep -q 'Linux version' "$serial" 2>/dev/null && break
    kill -0 "$qemu_pid" 2>/dev/null || break
    sleep 0.5
  done
  if grep -q 'Linux version' "$serial" 2>/dev/null && kill -0 "$qemu_pid" 2>/dev/null; then
    used=kvm
  else
    log "KVM did not boot the kernel within ${kvm_probe_s}s ($(head -c 300 "$run/qemu-kvm.log" | tr '\n' ' ')); falling back to TCG"
    kill -KILL "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
fi
if [[ -z "$used" ]]; then
  [[ $accel == kvm ]] && no_run "UDAH_GUEST_ACCEL=kvm but KVM does not boot"
  boot tcg
  used=tcg
fi

deadline=$(( $(date +%s) + timeout_s ))
while kill -0 "$qemu_pid" 2>/dev/null; do
  if (( $(date +%s) > deadline )); then
    log "TIMEOUT: the guest ran longer than ${timeout_s}s; killing qemu"
    kill -KILL "$qemu_pid" 2>/dev/null || true
    break
  fi
  sleep 1
done
wait "$qemu_pid" 2>/dev/null && qrc=0 || qrc=$?
qemu_pid=
t_guest=$(since "$t_boot")
sleep 1
kill "$tail_pid" 2>/dev/null || true
tail_pid=

out=$share/out
if [[ ! -f "$out/DONE" || ! -f "$out/summary" ]]; then
  echo "----- serial console ($used), last 60 lines -----" >&2
  tail -n 60 "$serial" >&2 || true
  echo "----- qemu ($used) -----" >&2
  cat "$run/qemu-$used.log" >&2 || true
  no_run "the guest did not finish (qemu exit $qrc after ${t_guest}s, accel $used)"
fi

echo "===== results (accel $used) ====="
cat "$out/results.txt"
read -r npass nfail <"$out/summary"
log "timings: prepare ${t_prepare}s, host build ${t_build}s, guest ${t_guest}s (rxe0 ACTIVE at $(cat "$out/active-seconds" 2>/dev/null || echo ?)s of guest uptime, suite ended at $(cat "$out/end-seconds" 2>/dev/null || echo ?)s), total $(since "$t_start")s"
echo "$npass passed, $nfail failed"
if (( nfail > 0 || npass == 0 )); then exit 1; fi
