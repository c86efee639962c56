#!/bin/bash
# serve at scale: host b writes RoCE v2 UD SENDs from 64, then 10^4, then 64
# again (the control: what the emulator's noise alone makes of the same
# run), source addresses (`udah raw-send`: raw Ethernet frames with a valid ICRC, far more
# senders than rxe's GID table could hold) to `udah serve` on host a, which
# reaches them back through a route via b. Each run: one slow round from every source (the AH creates), then
# the same number of requests in both runs. serve reports its service time
# per request, for polls that created an AH and for those that did not
# (printed as `scale: N sources: ...`, then the ratios 10^4 / 64 and 64 / 64
# against the first 64-source run; not judged: the emulator's timing is too
# noisy for a gate).
#   a: scale:<N>:serve    serve stops on SIGTERM with no failure but replies
#                         dropped while every send slot was busy (UD, under
#                         the flood; counted and shown), at least one request
#                         answered, between 1 and N AHs created (for 10^4:
#                         more than 1024, past any GID table);
#   b: scale:<N>:send     raw-send wrote every frame without an error, and
#                         serve's replies to the N sources came back over the
#                         wire (tcpdump on b, by destination address).
set -uo pipefail
source "$UDAH_CHECK_LIB"

TOTAL=${UDAH_SCALE_REQUESTS:-20000}
PPS=${UDAH_SCALE_PPS:-1000}
WARM_PPS=${UDAH_SCALE_WARM_PPS:-60}
BASE=10.77
RUNS=(64 10000 64)
# Per run: service ns per request in polls without a create (host a).
SERVICE=()

serve_side() { # <run> <N>
  local r=$1 n=$2 name="scale:$2:serve"
  (( r > 1 )) && name+=":again"
  if ! start_serve -g "$(own_gid ipv4 | cut -d' ' -f1)" -n 0 --stats-interval 0 --depth 512 --ah-slots 16384; then
    fail "$name" "serve did not start"; sync_put "sc.$r.qpn" none; return
  fi
  sync_put "sc.$r.qpn" "$SERVE_QPN"
  sync_get "sc.$r.sent" 900 >/dev/null
  sleep 2
  kill -TERM "$SERVE_PID"
  wait_serve 60
  echo "--- $name"
  sed 's/^/  serve| /' "$SERVE_LOG"
  local answered creates service failed
  failed=$(grep -oE 'failed: completion [0-9]+ AH [0-9]+ send [0-9]+ send-error [0-9]+' "$SERVE_LOG" | tail -n1)
  answered=$(grep -oE '^received [0-9]+, answered [0-9]+' "$SERVE_LOG" | tail -n1 | grep -oE '[0-9]+$')
  creates=$(grep -oE '[0-9]+ creates' "$SERVE_LOG" | tail -n1 | grep -oE '^[0-9]+')
  service=$(grep -m1 '^service ' "$SERVE_LOG" || true)
  echo "scale: $n sources: ${service:-no service line} (answered ${answered:-?}, AHs created ${creates:-?})"
  SERVICE[r]=$(grep -oE 'without an AH create: [0-9]+ answered, [0-9.]+ ns/request' <<<"$service" | grep -oE '[0-9.]+ ns' | cut -d' ' -f1)
  sync_put "sc.$r.answered" "${answered:-0}"
  if panicked "$SERVE_LOG"; then fail "$name" "serve panicked"
  elif [[ -z "$answered" || -z "$creates" || -z "$service" || -z "$failed" ]]; then fail "$name" "no statistics"
  elif ! [[ "$failed" =~ ^failed:\ completion\ 0\ AH\ 0\ send\ [0-9]+\ send-error\ 0$ ]]; then fail "$name" "$failed"
  elif [[ $SERVE_RC -ne 0 && ( $SERVE_RC -ne 1 || "$failed" == *" send 0 "* ) ]]; then
    fail "$name" "serve exit $SERVE_RC: $(grep -m1 '^received ' "$SERVE_LOG" || echo 'no statistics')"
  elif (( answered == 0 )); then fail "$name" "no request answered"
  elif (( creates < 1 || creates > n )); then fail "$name" "$creates AHs created for $n sources"
  elif (( n > 1024 && creates <= 1024 )); then fail "$name" "only $creates AHs created for $n sources"
  else pass "$name"
  fi
}

send_side() { # <run> <N>
  local r=$1 n=$2 name="scale:$2:send" qpn log cap tpid rc replies answered
  (( r > 1 )) && name+=":again"
  qpn=$(sync_get "sc.$r.qpn" 600) || { fail "$name" "host a published no serve QPN"; return; }
  if [[ "$qpn" == none ]]; then fail "$name" "serve on host a did not start"; sync_put "sc.$r.sent" 1; return; fi
  log=$UDAH_OUT/raw-send.$r.log cap=$UDAH_OUT/replies.$r.pcap
  tcpdump -i "$UDAH_NETDEV" -nn -s 128 -w "$cap" "udp dst port 4791 and dst net $BASE.0.0/16" 2>/dev/null &
  tpid=$!
  sleep 1
  local send=("$UDAH" raw-send --netdev "$UDAH_NETDEV" --dst-mac "$UDAH_PEER_MAC" --dst-ip "$UDAH_PEER_IPV4"
    --src-base "$BASE.0.0" --sources "$n" --qpn "$qpn")
  # The creates' round, slowly, then the measured requests.
  "${send[@]}" --rounds 1 --pps "$WARM_PPS" >"$log" 2>&1 && sleep 5 &&
    "${send[@]}" --rounds $(( TOTAL / n )) --pps "$PPS" >>"$log" 2>&1
  rc=$?
  sleep 3
  kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
  sync_put "sc.$r.sent" 1
  echo "--- $name"
  sed 's/^/  raw-send| /' "$log"
  replies=$(tcpdump -nn -r "$cap" 2>/dev/null | wc -l)
  answered=$(sync_get "sc.$r.answered" 120 || echo '?')
  echo "  $replies replies to $BASE.0.0/16 seen on the wire; serve answered $answered"
  if panicked "$log"; then fail "$name" "raw-send panicked"
  elif [[ $rc -ne 0 ]]; then fail "$name" "raw-send exit $rc: $(tail -n1 "$log")"
  elif (( replies == 0 )); then fail "$name" "no reply to the $n sources came back"
  else pass "$name"
  fi
}

if [[ "$UDAH_ROLE" == a ]]; then
  # Through b as a gateway: one neighbour entry (b's) for every source.
  # (With one neighbour entry per source, each first AH costs a dump of the
  # whole neighbour table in libibverbs' ibv_resolve_eth_l2_from_gid: about
  # a second per create at 10^4 entries under emulation.)
  ip route replace "$BASE.0.0/16" via "$UDAH_PEER_IPV4" dev "$UDAH_NETDEV" ||
    echo "  could not route $BASE.0.0/16 via $UDAH_PEER_IPV4"
  ip route get "$BASE.1.2" | sed 's/^/  route| /'
fi
for r in "${!RUNS[@]}"; do
  if [[ "$UDAH_ROLE" == a ]]; then serve_side "$r" "${RUNS[r]}"; else send_side "$r" "${RUNS[r]}"; fi
done
if [[ "$UDAH_ROLE" == a && -n "${SERVICE[0]:-}" && -n "${SERVICE[1]:-}" && -n "${SERVICE[2]:-}" ]]; then
  awk -v a="${SERVICE[0]}" -v b="${SERVICE[1]}" -v c="${SERVICE[2]}" 'BEGIN {
    printf "scale: service per request without a create, against the first 64-source run: 10^4 sources %.2f, 64 again (control) %.2f\n", b / a, c / a }'
fi
[[ "$UDAH_ROLE" == a ]] && ip route del "$BASE.0.0/16" dev "$UDAH_NETDEV" 2>/dev/null
exit 0
