#!/bin/bash
# The CLI edges that need a real device:
#   family:   ping --dest <IPv4> -g <IPv6 GID index> is refused up front
#             (exit 2, a message naming both families), not the kernel's EINVAL;
#   mtu:      ping --size above the port's active MTU is refused (exit 2);
#   sigterm / sigint: serve --count 0 stops on the signal, prints its final
#             statistics and exits 0.
set -uo pipefail
source "$UDAH_CHECK_LIB"

v4= v6=
while read -r idx type netdev gid; do
  [[ "$type" == v2 ]] || continue
  case $(gid_family "$gid" "$netdev") in
    ipv4) v4=${v4:-$idx} ;;
    ipv6) v6=${v6:-$idx} ;;
  esac
done < <(gid_list)

if [[ -z "$v4" || -z "$v6" ]]; then
  fail "cli:family" "$UDAH_DEV needs an IPv4 and an IPv6 RoCE v2 GID: $(gid_list | tr '\n' ';')"
else
  out=$("$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "$UDAH_IPV4" -g "$v6" --qpn 0x11 -n 1 2>&1)
  rc=$?
  echo "$out" | sed 's/^/  ping| /'
  if [[ $rc -eq 2 && "$out" == *"(IPv6) but the destination"*"is IPv4"* ]]; then pass "cli:family"; else fail "cli:family" "exit $rc: $out"; fi
  out=$("$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "fd00:da::1" -g "$v4" --qpn 0x11 -n 1 2>&1)
  rc=$?
  if [[ $rc -eq 2 && "$out" == *"(IPv4) but the destination"*"is IPv6"* ]]; then pass "cli:family-reverse"; else fail "cli:family-reverse" "exit $rc: $out"; fi
fi

out=$("$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "$UDAH_IPV4" --qpn 0x11 -n 1 -s 100000 2>&1)
rc=$?
echo "$out" | sed 's/^/  ping| /'
if [[ $rc -eq 2 && "$out" == *"above the port's active MTU"* ]]; then pass "cli:mtu"; else fail "cli:mtu" "exit $rc: $out"; fi

for sig in TERM INT; do
  name="cli:serve-sig${sig,,}"
  if ! start_serve -n 0 --stats-interval 0; then
    fail "$name" "serve did not start"
    continue
  fi
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "$UDAH_IPV4" ${v4:+-g "$v4"} --qpn "$SERVE_QPN" -n 3 \
    --timeout-ms 2000 >"$UDAH_OUT/ping.$sig.log" 2>&1
  kill "-$sig" "$SERVE_PID"
  wait_serve 30
  sed 's/^/  serve| /' "$SERVE_LOG"
  if panicked "$SERVE_LOG"; then
    fail "$name" "panic"
  elif [[ $SERVE_RC -eq 0 ]] && grep -q '^stopped by a signal' "$SERVE_LOG" && grep -q '^received 3, answered 3,' "$SERVE_LOG"; then
    pass "$name"
  else
    fail "$name" "serve exit $SERVE_RC after SIG$sig: $(tail -n1 "$SERVE_LOG")"
  fi
done
