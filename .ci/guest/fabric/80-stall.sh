#!/bin/bash
# One unresolvable sender must not stall the others. b pings `udah serve` on
# a from its IPv4 GID (the established peer) alone, then again while 100
# other source addresses of b each send one request and vanish: they sit on
# b's VLAN with ARP replies off there (arp_ignore=8) and are deleted after,
# so a's resolution of each goes unanswered for seconds.
#   b: stall:established   N/N replies during the flood, 0 lost;
#   b: stall:p99           the established peer's RTT p99 during the flood
#                          within 2x + 100 ms of the run alone (b's own CPU
#                          runs the 100 senders beside it under emulation; a
#                          resolution on serve's loop stalls it 1-3 s);
#   a: stall:counted       serve counts all 100 as refused, dropped unresolved
#                          or still held; none answered; memory stays bounded.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_STALL_COUNT:-200}
FLOOD=${UDAH_STALL_FLOOD:-100}

serve_side() {
  local own
  own=$(own_gid ipv4) || { fail stall:counted "no RoCE v2 IPv4 GID"; sync_put st.qpn none; return; }
  if ! start_serve -g "${own%% *}" -n 0 --stats-interval 0; then
    fail stall:counted "serve did not start"; sync_put st.qpn none; return
  fi
  sync_put st.qpn "$SERVE_QPN"
  local hwm0 hwm1
  hwm0=$(awk '/VmHWM/ {print $2}' "/proc/$SERVE_PID/status")
  sync_get st.done 900 >/dev/null
  hwm1=$(awk '/VmHWM/ {print $2}' "/proc/$SERVE_PID/status")
  kill -TERM "$SERVE_PID"
  wait_serve 30
  sed 's/^/  serve| /' "$SERVE_LOG" | grep -v 'dropped: its address did not resolve' | head -50
  local m refused dropped still answered_flood
  m=$(grep -m1 '^misses off the receive loop:' "$SERVE_LOG" || true)
  refused=$(grep -oE '[0-9]+ refused' <<<"$m" | grep -oE '^[0-9]+')
  dropped=$(grep -oE '[0-9]+ dropped unresolved' <<<"$m" | grep -oE '^[0-9]+')
  still=$(grep -oE '[0-9]+ still held' <<<"$m" | grep -oE '^[0-9]+')
  echo "serve: $m; VmHWM ${hwm0} kB at start, ${hwm1} kB after the flood"
  local sum=$(( ${refused:-0} + ${dropped:-0} + ${still:-0} ))
  if panicked "$SERVE_LOG"; then
    fail stall:counted "serve panicked"
  elif [[ -z "$m" ]]; then
    fail stall:counted "no misses line from serve"
  elif [[ $sum -ne $FLOOD ]]; then
    fail stall:counted "refused $refused + dropped $dropped + still held $still = $sum, want $FLOOD"
  elif (( hwm1 > hwm0 + 65536 )); then
    fail stall:counted "serve's peak RSS grew ${hwm0} -> ${hwm1} kB"
  else
    pass stall:counted
  fi
}

p99_of() { grep -m1 -oE 'rtt min/avg/p50/p99/max = [0-9./]+' "$1" | cut -d= -f2 | cut -d/ -f4; }

ping_side() {
  local qpn own peer vpeer vnd=$UDAH_VLAN_NETDEV base=$UDAH_OUT/alone.log during=$UDAH_OUT/during.log
  qpn=$(sync_get st.qpn 300) || { fail stall:established "no word from a"; sync_put st.done 1; return; }
  [[ "$qpn" == none ]] && { fail stall:established "serve on a did not start"; sync_put st.done 1; return; }
  own=$(own_gid ipv4); peer=$(peer_gid ipv4); vpeer=$(peer_gid vlan-ipv4)
  established() { # <count> <log>
    "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
      --qpn "$qpn" -n "$1" --interval-ms 20 --timeout-ms 2000 >"$2" 2>&1
  }
  established "$N" "$base"
  sed 's/^/  alone | /' "$base"
  # The flood's addresses: on the VLAN, where b answers no ARP.
  echo 8 >"/proc/sys/net/ipv4/conf/$vnd/arp_ignore"
  local i
  for ((i = 0; i < FLOOD; i++)); do ip addr add "198.18.7.$((100 + i))/32" dev "$vnd"; done
  sleep 2
  declare -A idx_of=()
  while read -r idx type nd gid; do
    [[ "$nd" == "$vnd" && "$gid" == 0000:0000:0000:0000:0000:ffff:* ]] && idx_of[$gid]=$idx
  done < <(gid_list)
  established $((N * 3)) "$during" &
  local epid=$! sent=0 g hex
  for ((i = 0; i < FLOOD; i++)); do
    hex=$(printf 'c612:07%02x' $((100 + i)))
    g=0000:0000:0000:0000:0000:ffff:$hex
    [[ -n "${idx_of[$g]:-}" ]] || { echo "no GID for 198.18.7.$((100 + i))"; continue; }
    "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${idx_of[$g]}" --dest "${vpeer#* }" \
      --qpn "$qpn" -n 1 --timeout-ms 100 >/dev/null 2>&1
    sent=$((sent + 1))
    ip addr del "198.18.7.$((100 + i))/32" dev "$vnd"
  done
  echo "flood: $sent of $FLOOD source addresses sent one request each"
  wait_pid "$epid" 600
  echo 0 >"/proc/sys/net/ipv4/conf/$vnd/arp_ignore"
  sync_put st.done 1
  sed 's/^/  during| /' "$during"
  local s b d
  s=$(grep -m1 -E '^[0-9]+ sent, ' "$during" || true)
  b=$(p99_of "$base"); d=$(p99_of "$during")
  echo "established peer RTT p99: alone ${b:-?} us, during the flood ${d:-?} us"
  if [[ $sent -ne $FLOOD ]]; then
    fail stall:established "only $sent of $FLOOD flood addresses had a GID"
  elif [[ "$s" == "$((N * 3)) sent, $((N * 3)) received, 0 lost, 0 wrong;"* ]]; then
    pass stall:established
  else
    fail stall:established "during the flood: ${s:-no summary}"
  fi
  if [[ -n "$b" && -n "$d" ]] && awk -v b="$b" -v d="$d" 'BEGIN {exit !(d <= 2 * b + 100000)}'; then
    pass stall:p99
  else
    fail stall:p99 "p99 alone ${b:-?} us, during the flood ${d:-?} us (bound 2x + 100000 us)"
  fi
}

if [[ $UDAH_ROLE == a ]]; then serve_side; else ping_side; fi
