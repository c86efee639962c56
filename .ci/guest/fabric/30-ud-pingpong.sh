#!/bin/bash
# rdma-core's ibv_ud_pingpong, unmodified, across the wire (its TCP address
# exchange and its UD traffic both cross it), over IPv4 and IPv6 GIDs:
#   ud-pingpong:<family>:plain       ibv_ud_pingpong server on a, client on b;
#   ud-pingpong:<family>:udah-serve  `udah serve --ud-pingpong` on a answers
#                                    the unmodified client on b.
# Each side gives its own verdict (`…:server` on a, `…:client` on b): exit 0
# with N/N exchanges.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_UD_PINGPONG_COUNT:-200}
SIZE=64

wait_listen() { # waits until TCP port 18515 listens (at most 120 s)
  local n=480
  while (( n-- > 0 )); do
    ss -Hltn 2>/dev/null | grep -q ':18515 ' && return 0
    sleep 0.25
  done
  return 1
}

server() { # <family> <kind>
  local fam=$1 kind=$2 name="ud-pingpong:$1:$2:server" own idx rc
  own=$(own_gid "$fam") || { fail "$name" "no RoCE v2 $fam GID"; sync_put "upp.$fam.$kind" "none: no RoCE v2 $fam GID on a"; return; }
  idx=${own%% *}
  if [[ $kind == plain ]]; then
    ibv_ud_pingpong -d "$UDAH_DEV" -i "${UDAH_PORT:-1}" -g "$idx" -n "$N" -s "$SIZE" >"$UDAH_OUT/server.$fam.$kind.log" 2>&1 &
    SERVE_PID=$!
    SERVE_LOG=$UDAH_OUT/server.$fam.$kind.log
  else
    start_serve -g "$idx" -n "$N" --stats-interval 0 --ud-pingpong || { fail "$name" "serve did not start"; sync_put "upp.$fam.$kind" "none: serve did not start"; return; }
  fi
  if ! wait_listen; then
    kill "$SERVE_PID" 2>/dev/null
    fail "$name" "does not listen on TCP 18515"
    sync_put "upp.$fam.$kind" "none: the server does not listen on TCP 18515"
    return
  fi
  sync_put "upp.$fam.$kind" listening
  sync_get "upp.$fam.$kind.client-done" 600 >/dev/null
  wait_serve 60
  echo "--- $fam $kind server (exit $SERVE_RC)"
  sed 's/^/  server| /' "$SERVE_LOG"
  rc=$SERVE_RC
  [[ $kind == plain ]] && ! grep -q "^$N iters in" "$SERVE_LOG" && rc=1
  [[ $kind == udah-serve ]] && ! grep -q "answered $N," "$SERVE_LOG" && rc=1
  panicked "$SERVE_LOG" && rc=1
  sync_put "upp.$fam.$kind.server-rc" "$rc"
  if [[ $rc -eq 0 ]]; then pass "$name"; else fail "$name" "exit $SERVE_RC: $(grep -m1 -E '^received |iters in' "$SERVE_LOG" || tail -n1 "$SERVE_LOG")"; fi
}

client() { # <family> <kind>
  local fam=$1 kind=$2 name="ud-pingpong:$1:$2:client" st own clog crc src
  st=$(sync_get "upp.$fam.$kind" 300) || { fail "$name" "no word from host a"; return; }
  if [[ "$st" != listening ]]; then fail "$name" "server on a: $st"; sync_put "upp.$fam.$kind.client-done" 1; return; fi
  own=$(own_gid "$fam")
  clog=$UDAH_OUT/client.$fam.$kind.log
  timeout 300 ibv_ud_pingpong -d "$UDAH_DEV" -i "${UDAH_PORT:-1}" -g "${own%% *}" -n "$N" -s "$SIZE" "$UDAH_PEER_IPV4" >"$clog" 2>&1
  crc=$?
  sync_put "upp.$fam.$kind.client-done" 1
  src=$(sync_get "upp.$fam.$kind.server-rc" 120) || src="no word"
  echo "--- $name (client exit $crc, server $src)"
  sed 's/^/  client| /' "$clog"
  if [[ $crc -ne 0 ]] || ! grep -q "^$N iters in" "$clog"; then
    fail "$name" "ibv_ud_pingpong client exit $crc: $(tail -n1 "$clog")"
  elif [[ "$src" != 0 ]]; then
    fail "$name" "server on a: exit/result $src (its log is in a's output)"
  else
    pass "$name"
  fi
}

for fam in ipv4 ipv6; do
  for kind in plain udah-serve; do
    if [[ "$UDAH_ROLE" == a ]]; then server "$fam" "$kind"; else client "$fam" "$kind"; fi
  done
done
