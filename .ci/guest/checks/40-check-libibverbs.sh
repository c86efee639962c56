#!/bin/bash
# Bit-exact on a real device: `udah serve --check-libibverbs` computes every
# request's AH attribute with udah and with the real `ibv_init_ah_from_wc` on
# the same context and port, compares them field by field and times both.
# Per RoCE v2 GID family (and once with --stamp on IPv4): >= 1,000 requests
# from `udah ping`, all answered, and the line
#   check-libibverbs: N compared, 0 mismatches; udah X ns/WC, libibverbs Y ns/WC, ratio Z
# with N >= 1000. The ratio lines are printed for the suite's log (both sides
# run under qemu's emulation: the ratio, not the absolute times, is the figure).
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_CHECK_LIBIBVERBS_COUNT:-1000}
declare -A seen=()

one() { # <name> <gid index> <gid> <serve flags...>
  local name=$1 idx=$2 gid=$3
  shift 3
  if ! start_serve -g "$idx" -n "$N" --stats-interval 0 --check-libibverbs "$@"; then
    fail "$name" "serve did not start"
    return
  fi
  local plog="$UDAH_OUT/ping.$name.log" prc
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "$idx" --dest "$gid" \
    --qpn "$SERVE_QPN" -n "$N" --timeout-ms 2000 >"$plog" 2>&1
  prc=$?
  wait_serve 60
  local line summary
  line=$(grep -m1 '^check-libibverbs: ' "$SERVE_LOG" || true)
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$plog" || true)
  echo "--- $name (GID index $idx, $gid; ${*:-default}): $summary"
  echo "$name: ${line:-no check-libibverbs line}"
  grep -m5 '^check-libibverbs: request' "$SERVE_LOG" | sed 's/^/  serve| /'
  local compared=0
  [[ "$line" =~ ^check-libibverbs:\ ([0-9]+)\ compared,\ ([0-9]+)\ mismatches ]] && compared=${BASH_REMATCH[1]}
  if panicked "$plog" || panicked "$SERVE_LOG"; then
    sed 's/^/  serve| /' "$SERVE_LOG" | tail -20
    fail "$name" "panic"
  elif [[ -z "$line" ]]; then
    sed 's/^/  serve| /' "$SERVE_LOG" | tail -20
    fail "$name" "serve printed no check-libibverbs line (exit $SERVE_RC)"
  elif [[ "$line" != *" compared, 0 mismatches;"* ]]; then
    fail "$name" "$line"
  elif (( compared < N )); then
    fail "$name" "only $compared of $N requests compared ($summary)"
  elif [[ $prc -ne 0 || $SERVE_RC -ne 0 ]]; then
    fail "$name" "ping exit $prc ($summary), serve exit $SERVE_RC"
  else
    pass "$name"
  fi
}

while read -r idx type netdev gid; do
  [[ "$type" == v2 ]] || continue
  fam=$(gid_family "$gid" "$netdev")
  [[ -n "${seen[$fam]:-}" ]] && continue
  seen[$fam]=$idx
  one "check-libibverbs:$fam" "$idx" "$gid"
  [[ "$fam" == ipv4 ]] && one "check-libibverbs:$fam:stamp" "$idx" "$gid" --stamp
done < <(gid_list)

for fam in ipv4 ipv6 link-local; do
  [[ -n "${seen[$fam]:-}" ]] || fail "check-libibverbs:$fam" "$UDAH_DEV has no RoCE v2 $fam GID: $(gid_list | tr '\n' ';')"
done
