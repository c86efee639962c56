#!/bin/bash
# PID 1 of the Soft-RoCE guest (exec'd by /sbin/udah-init from the image,
# read from the 9p share so that changing the suite needs no new image).
# Sets up the netdevs and rxe0, runs every executable checks/*.sh in name
# order, writes the results to the share and powers the guest off.
# Not `set -e`: PID 1 must always reach the power-off at the end.
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
SHARE=/mnt/udah
OUT=$SHARE/out
mkdir -p "$OUT"
exec > >(tee -a "$OUT/suite.log" >/dev/console) 2>&1

T0=$(cut -d' ' -f1 /proc/uptime)
up() { awk -v t0="$T0" '{printf "%.1f", $1}' /proc/uptime; }
say() { echo "udah-guest [$(up)s] $*"; }
poweroff_now() {
  sync
  umount "$SHARE" 2>/dev/null
  echo o >/proc/sysrq-trigger
  sleep 30
}
setup_fail() {
  # A failure of the set-up is one FAIL line, so the host never sees a pass.
  echo "FAIL guest-setup: $*" | tee -a "$OUT/results.txt"
  echo "0 1" >"$OUT/summary"
  say "set-up failed: $*"
  [[ -n "${SYNC:-}" ]] && mountpoint -q "$SYNC" && echo "$*" >"$SYNC/$ROLE.gone"
  echo finished >"$OUT/DONE"
  poweroff_now
}

say "UDAH-GUEST-INIT: kernel $(uname -r), init reached"
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mountpoint -q /dev/pts || { mkdir -p /dev/pts; mount -t devpts devpts /dev/pts; }
hostname udah-guest
ip link set lo up

# --- network ------------------------------------------------------------------
# role single: a dummy netdev (every packet loops back inside this guest);
# role a / b:  one host of the two-host fabric, its virtio NIC (MAC
#              52:54:00:da:00:01 / :02) on the wire to the other, renamed
#              to the same name, with host number 1 / 2 in every subnet.
ROLE=$(cat "$SHARE/role" 2>/dev/null || echo single)
NETDEV=udah0
VLAN_ID=7
VLAN_NETDEV=$NETDEV.$VLAN_ID
case "$ROLE" in
  single | a) me=1 peer=2 ;;
  b) me=2 peer=1 ;;
  *) setup_fail "unknown role '$ROLE' in $SHARE/role" ;;
esac
IPV4=198.18.0.$me
IPV6=fd00:da::$me
VLAN_IPV4=198.18.7.$me
VLAN_IPV6=fd00:da:7::$me
for m in dummy 8021q rdma_rxe; do modprobe "$m" || setup_fail "modprobe $m"; done
if [[ "$ROLE" == single ]]; then
  ip link add "$NETDEV" type dummy || setup_fail "ip link add $NETDEV"
else
  hostname "udah-$ROLE"
  modprobe virtio_net || setup_fail "modprobe virtio_net"
  mac=52:54:00:da:00:0$me
  nic=
  for _ in $(seq 1 40); do
    for d in /sys/class/net/*; do
      [[ "$(cat "$d/address" 2>/dev/null)" == "$mac" ]] && nic=${d##*/}
    done
    [[ -n "$nic" ]] && break
    sleep 0.25
  done
  [[ -n "$nic" ]] || setup_fail "no NIC with MAC $mac: $(ls /sys/class/net | tr '\n' ' ')"
  ip link set dev "$nic" name "$NETDEV" || setup_fail "ip link set $nic name $NETDEV"
  SYNC=/mnt/sync
  mkdir -p "$SYNC"
  mount -t 9p -o trans=virtio,version=9p2000.L,cache=none sync "$SYNC" || setup_fail "mount the 9p share 'sync'"
  export UDAH_ROLE=$ROLE UDAH_SYNC=$SYNC UDAH_PEER_ROLE=$([[ $ROLE == a ]] && echo b || echo a) \
    UDAH_PEER_MAC=52:54:00:da:00:0$peer UDAH_PEER_IPV4=198.18.0.$peer UDAH_PEER_IPV6=fd00:da::$peer \
    UDAH_PEER_VLAN_IPV4=198.18.7.$peer UDAH_PEER_VLAN_IPV6=fd00:da:7::$peer
fi
# Static IPv6 addresses survive a link going down (a port-flap check).
echo 1 >/proc/sys/net/ipv6/conf/all/keep_addr_on_down
ip link set "$NETDEV" up
ip addr add "$IPV4/24" dev "$NETDEV"
ip -6 addr add "$IPV6/64" dev "$NETDEV" nodad
ip link add link "$NETDEV" name "$VLAN_NETDEV" type vlan id "$VLAN_ID" || setup_fail "ip link add $VLAN_NETDEV"
ip link set "$VLAN_NETDEV" up
ip addr add "$VLAN_IPV4/24" dev "$VLAN_NETDEV"
ip -6 addr add "$VLAN_IPV6/64" dev "$VLAN_NETDEV" nodad

# --- rxe0 on that netdev ---------------------------------------------------------
DEV=rxe0
rdma link add "$DEV" type rxe netdev "$NETDEV" || setup_fail "rdma link add $DEV type rxe netdev $NETDEV"
active=
for _ in $(seq 1 120); do
  if ibv_devinfo -d "$DEV" 2>/dev/null | grep -q PORT_ACTIVE; then active=1; break; fi
  sleep 0.5
done
[[ -n "$active" ]] || setup_fail "$DEV never reached PORT_ACTIVE: $(ibv_devinfo -d "$DEV" 2>&1 | tr '\n' ' ')"
# Link-local addresses (and so their GIDs) come after DAD: wait for one on each netdev.
for nd in "$NETDEV" "$VLAN_NETDEV"; do
  for _ in $(seq 1 40); do
    ip -6 addr show dev "$nd" scope link | grep -q 'inet6 fe80' && ! ip -6 addr show dev "$nd" | grep -q tentative && break
    sleep 0.25
  done
done
say "UDAH-GUEST-ACTIVE: $DEV PORT_ACTIVE"
up >"$OUT/active-seconds"
# The checks' environment (the contract in .ci/guest/README.md).
export UDAH_BIN=$SHARE/bin UDAH_DEV=$DEV UDAH_PORT=1 UDAH_NETDEV=$NETDEV UDAH_IPV4=$IPV4 UDAH_IPV6=$IPV6 \
  UDAH_VLAN_ID=$VLAN_ID UDAH_VLAN_NETDEV=$VLAN_NETDEV UDAH_VLAN_IPV4=$VLAN_IPV4 UDAH_VLAN_IPV6=$VLAN_IPV6 \
  UDAH_CHECK_LIB=$SHARE/guest/check-lib.sh
# shellcheck source=/dev/null
source "$SHARE/env" # CI=<the host's CI>
# shellcheck source=check-lib.sh
source "$UDAH_CHECK_LIB"
say "GID table of $DEV port 1 (index type netdev gid):"
gid_list | sed 's/^/  /'
if [[ "$ROLE" != single ]]; then
  # Each host publishes its GID table; the checks read the peer's.
  gid_list | sync_put "$ROLE.gids"
  sync_get "$UDAH_PEER_ROLE.gids" 600 >/dev/null || setup_fail "host $UDAH_PEER_ROLE never came up (no $SYNC/$UDAH_PEER_ROLE.gids after 600 s)"
  say "host $UDAH_PEER_ROLE is up; its GID table:"
  sync_get "$UDAH_PEER_ROLE.gids" 1 | sed 's/^/  /'
fi

# --- the checks ------------------------------------------------------------------
CHECK_TIMEOUT=$(cat "$SHARE/check-timeout" 2>/dev/null || echo 900)
: >"$OUT/results.txt"
for check in "$SHARE"/guest/checks/*.sh; do
  [[ -f "$check" && -x "$check" ]] || continue
  name=$(basename "$check" .sh)
  export UDAH_OUT=$OUT/$name
  mkdir -p "$UDAH_OUT"
  if [[ "$ROLE" != single ]] && ! sync_barrier "check.$name" 900; then
    echo "FAIL $name: host $UDAH_PEER_ROLE did not reach this check within 900 s" | tee -a "$OUT/results.txt"
    continue
  fi
  say "=== check $name"
  t=$(up)
  # Every line goes to the log; PASS/FAIL lines are the verdicts.
  timeout -k 10 "$CHECK_TIMEOUT" bash "$check" </dev/null 2>&1 | tee "$UDAH_OUT/output.log"
  rc=${PIPESTATUS[0]}
  verdicts=$(grep -E '^(PASS|FAIL) ' "$UDAH_OUT/output.log")
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    verdicts+=$'\n'"FAIL $name: timed out after ${CHECK_TIMEOUT}s"
  elif [[ -z "$verdicts" ]]; then
    verdicts="FAIL $name: exited $rc without a PASS/FAIL line"
  elif [[ $rc -ne 0 ]] && ! grep -q '^FAIL ' <<<"$verdicts"; then
    verdicts+=$'\n'"FAIL $name: exited $rc after only PASS lines"
  fi
  grep -E '^(PASS|FAIL) ' <<<"$verdicts" | tee -a "$OUT/results.txt" >/dev/null
  say "=== check $name done in $(awk -v a="$t" -v b="$(up)" 'BEGIN{printf "%.1f", b-a}')s (exit $rc)"
done
# Neither host of the fabric powers off while the other still runs a check.
if [[ "$ROLE" != single ]]; then
  sync_barrier done 900 || say "host $UDAH_PEER_ROLE did not finish within 900 s"
  echo done >"$SYNC/$ROLE.gone"
fi
pass=$(grep -c '^PASS ' "$OUT/results.txt")
fail=$(grep -c '^FAIL ' "$OUT/results.txt")
echo "$pass $fail" >"$OUT/summary"
up >"$OUT/end-seconds"
say "UDAH-GUEST-DONE: $pass passed, $fail failed"
echo finished >"$OUT/DONE"
poweroff_now
