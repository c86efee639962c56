#!/bin/bash
# Admission and capacity set from serve's flags: `udah serve --allow
# 198.18.0.0/24 --ah-slots 2097152` on a
# answers b's IPv4 GID and refuses, without creating an AH, b's VLAN IPv4
# GID (198.18.7.2, outside the prefix).
#   b: admission:allowed   N/N replies from 198.18.0.2;
#   b: admission:refused   0 replies from 198.18.7.2;
#   a: admission:serve     serve exits 0 after N answers; every request it
#                          received beyond those N was refused by the prefix
#                          (received - answered = refused, at least N/2 of
#                          the N sent: UD may lose a datagram on the emulated
#                          wire, and a lost one is reported), it created
#                          exactly one AH, in a table of 2^21 slots.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-10}

serve_side() {
  local own
  own=$(own_gid ipv4) || { fail admission:serve "no RoCE v2 IPv4 GID"; sync_put ad.qpn none; return; }
  if ! start_serve -g "${own%% *}" -n "$N" --stats-interval 0 --allow 198.18.0.0/24 --ah-slots 2097152; then
    fail admission:serve "serve did not start"; sync_put ad.qpn none; return
  fi
  sync_put ad.qpn "$SERVE_QPN"
  sync_get ad.done 300 >/dev/null
  wait_serve 30
  sed 's/^/  serve| /' "$SERVE_LOG"
  local adm creates received answered refused outside
  adm=$(grep -m1 '^admission (--allow):' "$SERVE_LOG" || true)
  creates=$(grep -oE '[0-9]+ creates' "$SERVE_LOG" | tail -n1 | grep -oE '^[0-9]+')
  received=$(grep -oE '^received [0-9]+' "$SERVE_LOG" | tail -n1 | grep -oE '[0-9]+$')
  answered=$(grep -oE '^received [0-9]+, answered [0-9]+' "$SERVE_LOG" | tail -n1 | grep -oE '[0-9]+$')
  refused=$(sed -nE 's/^admission \(--allow\): ([0-9]+) request.*/\1/p' <<<"$adm")
  outside=$(sed -nE 's/.*\(([0-9]+) outside the prefixes, 0 without a GRH\)$/\1/p' <<<"$adm")
  if [[ $SERVE_RC -ne 0 ]]; then fail admission:serve "serve exit $SERVE_RC"
  elif [[ -z "$refused" || -z "$received" || -z "$answered" ]]; then fail admission:serve "no statistics (${adm:-no admission line})"
  elif [[ "$answered" != "$N" ]]; then fail admission:serve "$answered answered, want $N"
  elif [[ "$outside" != "$refused" ]]; then fail admission:serve "refused for another reason: $adm"
  elif (( received - answered != refused )); then fail admission:serve "received $received, answered $answered, but $refused refused"
  elif (( refused * 2 < N )); then fail admission:serve "only $refused of the $N requests from outside the prefix arrived"
  elif [[ "$creates" != 1 ]]; then fail admission:serve "$creates AHs created, want 1"
  elif ! grep -q '^  AH table: 2097152 slots' "$SERVE_LOG"; then fail admission:serve "no 2097152-slot AH table (--ah-slots)"
  else
    (( refused < N )) && echo "  note: $(( N - refused )) of the $N requests from outside the prefix never reached serve (lost on the emulated wire)"
    pass admission:serve
  fi
}

ping_from() { # <verdict> <family> <want received>
  local own peer log=$UDAH_OUT/ping.$2.log summary
  own=$(own_gid "$2"); peer=$(peer_gid "$2")
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
    --qpn "$QPN" -n "$N" --timeout-ms "$4" >"$log" 2>&1
  sed "s/^/  ping $2| /" "$log"
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$log" || true)
  if [[ "$summary" == "$N sent, $3 received,"* ]]; then pass "admission:$1"; else fail "admission:$1" "${summary:-no summary} (want $3 received)"; fi
}

ping_side() {
  QPN=$(sync_get ad.qpn 300) || { fail admission:allowed "no word from a"; sync_put ad.done 1; return; }
  [[ "$QPN" == none ]] && { fail admission:allowed "serve on a did not start"; sync_put ad.done 1; return; }
  # The refused ones first: serve stops after N answers.
  ping_from refused vlan-ipv4 0 300
  ping_from allowed ipv4 "$N" 2000
  sync_put ad.done 1
}

if [[ $UDAH_ROLE == a ]]; then serve_side; else ping_side; fi
