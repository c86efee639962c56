#!/bin/bash
# Interop with rdma-core's own tool, unmodified, over IPv4 and IPv6 GIDs:
#   server: `udah serve --ud-pingpong` answers an `ibv_ud_pingpong` client
#           (its TCP address exchange on port 18515, then every request
#           answered from its completion);
#   client: `udah ping --ud-pingpong` drives an `ibv_ud_pingpong` server.
# Both sides must exit 0 with N/N exchanges.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_UD_PINGPONG_COUNT:-200}
SIZE=64
declare -A idx_of=() gid_of=()
while read -r idx type netdev gid; do
  [[ "$type" == v2 ]] || continue
  fam=$(gid_family "$gid" "$netdev")
  [[ -n "${idx_of[$fam]:-}" ]] && continue
  idx_of[$fam]=$idx
  gid_of[$fam]=$gid
done < <(gid_list)

# Waits until TCP port 18515 listens (at most 60 s).
wait_listen() {
  local n=240
  while (( n-- > 0 )); do
    ss -Hltn 2>/dev/null | grep -q ':18515 ' && return 0
    sleep 0.25
  done
  return 1
}

udah_serves() { # <family>
  local fam=$1 name="ud-pingpong:udah-serve:$1" idx=${idx_of[$1]}
  if ! start_serve -g "$idx" -n "$N" --stats-interval 0 --ud-pingpong; then
    fail "$name" "serve did not start"
    return
  fi
  if ! wait_listen; then
    kill "$SERVE_PID" 2>/dev/null
    wait_serve 5
    sed 's/^/  serve| /' "$SERVE_LOG"
    fail "$name" "serve does not listen on TCP 18515"
    return
  fi
  local clog="$UDAH_OUT/ibv_ud_pingpong-client.$fam.log" crc
  timeout 300 ibv_ud_pingpong -d "$UDAH_DEV" -i "${UDAH_PORT:-1}" -g "$idx" -n "$N" -s "$SIZE" 127.0.0.1 >"$clog" 2>&1
  crc=$?
  wait_serve 30
  echo "--- $name (GID index $idx, ${gid_of[$fam]})"
  sed 's/^/  client| /' "$clog"
  sed 's/^/  serve | /' "$SERVE_LOG"
  if panicked "$SERVE_LOG"; then
    fail "$name" "serve panicked"
  elif [[ $crc -ne 0 ]] || ! grep -q "^$N iters in" "$clog"; then
    fail "$name" "ibv_ud_pingpong client exit $crc: $(tail -n1 "$clog")"
  elif [[ $SERVE_RC -ne 0 ]] || ! grep -q "answered $N," "$SERVE_LOG"; then
    fail "$name" "serve exit $SERVE_RC: $(grep -m1 '^received ' "$SERVE_LOG" || echo 'no statistics')"
  elif ! grep -q '^ud-pingpong: 0 request(s) from QPs other than' "$SERVE_LOG"; then
    fail "$name" "requests from an unexpected QP: $(grep -m1 '^ud-pingpong: [0-9]' "$SERVE_LOG")"
  else
    pass "$name"
  fi
}

udah_pings() { # <family>
  local fam=$1 name="ud-pingpong:udah-ping:$1" idx=${idx_of[$1]}
  local slog="$UDAH_OUT/ibv_ud_pingpong-server.$fam.log" plog="$UDAH_OUT/udah-ping.$fam.log" prc src
  ibv_ud_pingpong -d "$UDAH_DEV" -i "${UDAH_PORT:-1}" -g "$idx" -n "$N" -s "$SIZE" >"$slog" 2>&1 &
  local spid=$!
  if ! wait_listen; then
    kill "$spid" 2>/dev/null
    fail "$name" "ibv_ud_pingpong server does not listen: $(tail -n1 "$slog")"
    return
  fi
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "$idx" --ud-pingpong 127.0.0.1 \
    -n "$N" -s "$SIZE" --timeout-ms 2000 >"$plog" 2>&1
  prc=$?
  wait_pid "$spid" 30
  src=$WAIT_RC
  echo "--- $name (GID index $idx, ${gid_of[$fam]})"
  sed 's/^/  server| /' "$slog"
  sed 's/^/  ping  | /' "$plog"
  local summary
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$plog" || true)
  if panicked "$plog"; then
    fail "$name" "ping panicked"
  elif [[ $prc -ne 0 || "$summary" != "$N sent, $N received, 0 lost, 0 wrong;"* ]]; then
    fail "$name" "ping exit $prc: ${summary:-no summary line}"
  elif [[ "$src" -ne 0 ]] || ! grep -q "^$N iters in" "$slog"; then
    fail "$name" "ibv_ud_pingpong server exit $src: $(tail -n1 "$slog")"
  else
    pass "$name"
  fi
}

for fam in ipv4 ipv6; do
  if [[ -z "${idx_of[$fam]:-}" ]]; then
    fail "ud-pingpong:$fam" "$UDAH_DEV has no RoCE v2 $fam GID: $(gid_list | tr '\n' ';')"
    continue
  fi
  udah_serves "$fam"
  udah_pings "$fam"
done
