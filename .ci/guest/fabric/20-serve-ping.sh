#!/bin/bash
# `udah serve` on host a answers `udah ping` from host b across the wire, over
# every RoCE v2 GID family (IPv4, IPv6, link-local and the VLAN's), with
# serve's attributes compared against the real `ibv_init_ah_from_wc` on each
# request (`--check-libibverbs`).
#   b: serve-ping:<family>:ping    N/N replies, 0 lost, 0 wrong;
#   a: serve-ping:<family>:serve   serve exits 0 after N, 0 mismatches.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-100}
FAMILIES=(ipv4 ipv6 link-local vlan-ipv4 vlan-ipv6 vlan-link-local)

serve_one() { # <family>
  local fam=$1 name="serve-ping:$1:serve" own
  if ! own=$(own_gid "$fam"); then
    fail "$name" "no RoCE v2 $fam GID here"; sync_put "sp.$fam.qpn" none; return
  fi
  if ! start_serve -g "${own%% *}" -n "$N" --stats-interval 0 --check-libibverbs; then
    fail "$name" "serve did not start"; sync_put "sp.$fam.qpn" none; return
  fi
  sync_put "sp.$fam.qpn" "$SERVE_QPN"
  sync_get "sp.$fam.done" 600 >/dev/null
  wait_serve 30
  echo "--- $name (GID $own)"
  sed 's/^/  serve| /' "$SERVE_LOG"
  local check
  check=$(grep -m1 -E '^check-libibverbs: ' "$SERVE_LOG" || true)
  if panicked "$SERVE_LOG"; then
    fail "$name" "serve panicked"
  elif [[ $SERVE_RC -ne 0 ]]; then
    fail "$name" "serve exit $SERVE_RC (124: still running): $(grep -m1 '^received ' "$SERVE_LOG" || echo 'no statistics')"
  elif [[ "$check" != "check-libibverbs: $N compared, 0 mismatches"* ]]; then
    fail "$name" "${check:-no check-libibverbs line}"
  else
    pass "$name"
  fi
}

ping_one() { # <family>
  local fam=$1 name="serve-ping:$1:ping" own peer qpn plog prc summary
  qpn=$(sync_get "sp.$fam.qpn" 300) || { fail "$name" "host a published no serve QPN"; return; }
  if [[ "$qpn" == none ]]; then fail "$name" "serve on host a did not start"; sync_put "sp.$fam.done" 1; return; fi
  own=$(own_gid "$fam") || { fail "$name" "no RoCE v2 $fam GID here"; sync_put "sp.$fam.done" 1; return; }
  peer=$(peer_gid "$fam")
  plog="$UDAH_OUT/ping.$fam.log"
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
    --qpn "$qpn" -n "$N" --timeout-ms 2000 >"$plog" 2>&1
  prc=$?
  sync_put "sp.$fam.done" 1
  echo "--- $name (from $own to $peer, QPN $qpn)"
  sed 's/^/  ping | /' "$plog"
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$plog" || true)
  if panicked "$plog"; then
    fail "$name" "ping panicked"
  elif [[ $prc -ne 0 || "$summary" != "$N sent, $N received, 0 lost, 0 wrong;"* ]]; then
    fail "$name" "ping exit $prc: ${summary:-no summary line}"
  else
    pass "$name"
  fi
}

for fam in "${FAMILIES[@]}"; do
  if [[ "$UDAH_ROLE" == a ]]; then serve_one "$fam"; else ping_one "$fam"; fi
done
