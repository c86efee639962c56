#!/bin/bash
# A port flap on the serving host: b pings `udah serve` on a, a takes its
# NIC down and up again (rxe0's port goes DOWN, then ACTIVE), b pings again.
#   a: port-flap:serve    serve is still running after the flap, reports the
#                         link going down and coming up, and no panic;
#      port-flap:events   serve's event engine saw the port go down
#                         (IBV_EVENT_PORT_ERR: no AH created until active)
#                         and active again (GIDs re-read, creating again),
#                         and its final line counts 1 error and 1 active;
#   b: port-flap:before, port-flap:after   N/N replies each (after: once
#                         rxe0 on a is ACTIVE again).
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-20}

serve_side() {
  local own
  own=$(own_gid ipv4) || { fail port-flap:serve "no RoCE v2 IPv4 GID"; sync_put pf.qpn none; return; }
  if ! start_serve -g "${own%% *}" -n 0 --stats-interval 0; then
    fail port-flap:serve "serve did not start"; sync_put pf.qpn none; return
  fi
  sync_put pf.qpn "$SERVE_QPN"
  sync_get pf.before-done 300 >/dev/null
  ip link set dev "$UDAH_NETDEV" down
  sleep 3
  ip link set dev "$UDAH_NETDEV" up
  if wait_active 60; then sync_put pf.flapped active; else sync_put pf.flapped "rxe0 not ACTIVE 60 s after up"; fi
  sync_get pf.after-done 300 >/dev/null
  local alive=0
  kill -0 "$SERVE_PID" 2>/dev/null && alive=1
  kill -TERM "$SERVE_PID" 2>/dev/null
  wait_serve 30
  sed 's/^/  serve| /' "$SERVE_LOG"
  if panicked "$SERVE_LOG"; then
    fail port-flap:serve "serve panicked"
  elif [[ $alive -ne 1 ]]; then
    fail port-flap:serve "serve exited during the flap (exit $SERVE_RC): $(grep -m1 '^udah serve:' "$SERVE_LOG" || echo 'no message')"
  elif ! grep -q "^event: link $UDAH_NETDEV down" "$SERVE_LOG" || ! grep -q "^event: link $UDAH_NETDEV up" "$SERVE_LOG"; then
    fail port-flap:serve "serve did not report both link events: $(grep '^event: link' "$SERVE_LOG" | tr '\n' ';')"
  else
    pass port-flap:serve
  fi
  local counts
  counts=$(grep -m1 -oE 'port: [0-9]+ error\(s\), [0-9]+ active, [0-9]+ request\(s\) refused while down' "$SERVE_LOG" || true)
  echo "port events: $(grep -E '^event: port ' "$SERVE_LOG" | tr '\n' ';') ${counts:-no count line}"
  if ! grep -qE '^event: port [0-9]+ down \(IBV_EVENT_PORT_ERR\): no AH is created' "$SERVE_LOG"; then
    fail port-flap:events "serve did not report the port going down"
  elif ! grep -qE '^event: port [0-9]+ active \(IBV_EVENT_PORT_ACTIVE\): GIDs re-read, creating again' "$SERVE_LOG"; then
    fail port-flap:events "serve did not report the port active again"
  elif ! grep -qE '^event: port [0-9]+ active' <(sed -n '/^event: port [0-9]* down/,$p' "$SERVE_LOG"); then
    fail port-flap:events "the port-active line does not follow the port-down line"
  elif [[ "$counts" != "port: 1 error(s), 1 active,"* ]]; then
    fail port-flap:events "counts: ${counts:-none}"
  else
    pass port-flap:events
  fi
}

ping_once() { # <verdict> <qpn>
  local own peer log=$UDAH_OUT/ping.$1.log summary
  own=$(own_gid ipv4); peer=$(peer_gid ipv4)
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
    --qpn "$2" -n "$N" --timeout-ms 2000 >"$log" 2>&1
  sed 's/^/  ping | /' "$log"
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$log" || true)
  if [[ "$summary" == "$N sent, $N received, 0 lost, 0 wrong;"* ]]; then pass "port-flap:$1"; else fail "port-flap:$1" "${summary:-no summary}"; fi
}

ping_side() {
  local qpn st
  qpn=$(sync_get pf.qpn 300) || { fail port-flap:before "no word from a"; return; }
  [[ "$qpn" == none ]] && { fail port-flap:before "serve on a did not start"; sync_put pf.before-done 1; sync_put pf.after-done 1; return; }
  ping_once before "$qpn"
  sync_put pf.before-done 1
  st=$(sync_get pf.flapped 300) || st="no word from a"
  if [[ "$st" != active ]]; then
    fail port-flap:after "$st"
  else
    ping_once after "$qpn"
  fi
  sync_put pf.after-done 1
}

if [[ $UDAH_ROLE == a ]]; then serve_side; else ping_side; fi
