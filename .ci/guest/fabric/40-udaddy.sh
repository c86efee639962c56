#!/bin/bash
# rdma-core's udaddy (RDMA-CM UD) across the wire: server on a, client on b,
# without and with libudah's preload under the server (which then builds
# every reply AH from the completion through udah).
#   udaddy:<plain|preload>:server  (a) the server exits 0, the client on b
#                                  did too; under the preload the server's
#                                  statistics count C ibv_create_ah_from_wc
#                                  calls and no internal fall-back;
#   udaddy:<plain|preload>:client  (b) the client exits 0.
set -uo pipefail
source "$UDAH_CHECK_LIB"

C=${UDAH_UDADDY_CONNECTIONS:-4}
PRELOAD=$UDAH_BIN/libudah-preload.so

stat_of() { # <log> <key>: the value of key=... in the preload's stats line
  grep -m1 '^udah-preload:' "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'
}

server() { # <kind> [env...]
  local kind=$1 name="udaddy:$1:server" log=$UDAH_OUT/udaddy.$1.server.log spid src crc
  shift
  env "$@" timeout 300 udaddy -b "$UDAH_IPV4" -c "$C" >"$log" 2>&1 &
  spid=$!
  # udaddy prints nothing before it listens: give it the time TCG needs.
  sleep 3
  sync_put "udaddy.$kind" listening
  crc=$(sync_get "udaddy.$kind.client-rc" 400) || crc="no word from b"
  wait_pid "$spid" 60
  src=$WAIT_RC
  echo "--- $name (server exit $src, client $crc)"
  sed 's/^/  server| /' "$log"
  if [[ $src -ne 0 || "$crc" != 0 ]]; then
    fail "$name" "server exit $src, client on b: $crc"
  elif [[ $kind == preload ]]; then
    local calls internal
    calls=$(stat_of "$log" create_ah_from_wc); internal=$(stat_of "$log" fallback_internal)
    if [[ -z "$calls" ]]; then fail "$name" "no statistics line from the preload"
    elif [[ "$calls" -ne "$C" || "${internal:-0}" -ne 0 ]]; then fail "$name" "calls $calls (want $C), internal fall-backs $internal"
    else pass "$name"; fi
  else
    pass "$name"
  fi
}

client() { # <kind>
  local kind=$1 name="udaddy:$1:client" log=$UDAH_OUT/udaddy.$1.client.log st crc
  st=$(sync_get "udaddy.$kind" 300) || { fail "$name" "no word from host a"; return; }
  timeout 300 udaddy -s "$UDAH_PEER_IPV4" -b "$UDAH_IPV4" -c "$C" -C 10 >"$log" 2>&1
  crc=$?
  sed 's/^/  client| /' "$log"
  sync_put "udaddy.$kind.client-rc" "$crc"
  if [[ $crc -eq 0 ]]; then pass "$name"; else fail "$name" "udaddy client exit $crc: $(tail -n1 "$log")"; fi
}

if [[ "$UDAH_ROLE" == a ]]; then
  if [[ ! -f "$PRELOAD" ]]; then
    fail udaddy:preload:server "missing: $PRELOAD"
    server plain
  else
    server plain
    server preload LD_PRELOAD="$PRELOAD" UDAH_PRELOAD_STATS=1
  fi
else
  client plain
  if [[ -f "$PRELOAD" ]]; then client preload; else fail udaddy:preload:client "missing: $PRELOAD"; fi
fi
