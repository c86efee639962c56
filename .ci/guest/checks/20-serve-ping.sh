#!/bin/bash
# `udah serve --hal ibverbs` <-> `udah ping --hal ibverbs` over every RoCE v2
# GID of the device (IPv4, IPv6, link-local, and the VLAN's), once with the
# default receive area and once with `--stamp`. A run passes when ping gets
# N/N replies with 0 wrong (the echo checked byte for byte at the sender's QP)
# and serve, told to stop after N requests, exits 0 without a panic.
# The default run polls an extended CQ where rxe has one (serve's default),
# the --stamp run a plain CQ (`--cq plain`); a third run, `cq-ex`, is
# `--cq ex --check-libibverbs`: it also needs serve's lines "receive CQ:
# extended", "check-libibverbs: P+N compared, 0 mismatches" (the real
# ibv_init_ah_from_wc on the equivalent ibv_wc) and "completion-to-reply
# latency: host clock (from the poll) p50 ...", which it prints.
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-100}
P=3
declare -A seen=()

one() { # <name> <gid index> <gid> <serve flags...>
  local name=$1 idx=$2 gid=$3
  shift 3
  # serve stops by itself after the P probes and the N requests.
  if ! start_serve -g "$idx" -n $((P + N)) --stats-interval 0 "$@"; then
    fail "$name" "serve did not start"
    return
  fi
  local plog="$UDAH_OUT/ping.$name.log" prc
  ping_serve() { # <count> <log>
    "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "$idx" --dest "$gid" \
      --qpn "$SERVE_QPN" -n "$1" --timeout-ms 2000 >"$2" 2>&1
  }
  # A few probes first: a serve that answers nothing fails in seconds, not
  # after N time-outs.
  ping_serve "$P" "$plog.probe"
  if ! grep -qE "^$P sent, [1-9]" "$plog.probe"; then
    kill "$SERVE_PID" 2>/dev/null
    wait_serve 5
    echo "--- $name (GID index $idx, $gid; serve ${*:-default})"
    sed 's/^/  probe| /' "$plog.probe"
    sed 's/^/  serve| /' "$SERVE_LOG"
    fail "$name" "no reply to $P probes ($(grep -m1 -oE '^[0-9]+ sent, [0-9]+ received' "$plog.probe" || echo 'no summary line'));\
 serve: $(grep -m1 '^udah' "$SERVE_LOG" || echo 'no error line')"
    return
  fi
  ping_serve "$N" "$plog"
  prc=$?
  wait_serve 30
  echo "--- $name (GID index $idx, $gid; serve ${*:-default})"
  sed 's/^/  ping | /' "$plog"
  sed 's/^/  serve| /' "$SERVE_LOG"
  local summary
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$plog" || true)
  if panicked "$plog" || panicked "$SERVE_LOG"; then
    fail "$name" "panic (see logs above)"
  elif [[ $prc -ne 0 || "$summary" != "$N sent, $N received, 0 lost, 0 wrong;"* ]]; then
    fail "$name" "ping exit $prc: ${summary:-no summary line}"
  elif [[ $SERVE_RC -ne 0 ]]; then
    fail "$name" "ping ok but serve exit $SERVE_RC (124: still running after $N requests)"
  elif [[ "$name" == *:cq-ex ]] && ! cq_ex_ok; then
    fail "$name" "$CQ_EX_WHY"
  else
    pass "$name"
  fi
}

# The extended-CQ run's own lines (see the top); sets CQ_EX_WHY.
cq_ex_ok() {
  local cq lat chk
  cq=$(grep -m1 '^  receive CQ: ' "$SERVE_LOG" || true)
  lat=$(grep -m1 '^completion-to-reply latency: ' "$SERVE_LOG" || true)
  chk=$(grep -m1 '^check-libibverbs: ' "$SERVE_LOG" || true)
  echo "cq-ex: ${cq:-no CQ line}"
  echo "cq-ex: ${lat:-no latency line}"
  echo "cq-ex: ${chk:-no check-libibverbs line}"
  if [[ "$cq" != "  receive CQ: extended"* ]]; then
    CQ_EX_WHY="serve did not poll an extended CQ: ${cq:-no CQ line}"
  elif [[ "$chk" != "check-libibverbs: $((P + N)) compared, 0 mismatches;"* ]]; then
    CQ_EX_WHY="${chk:-no check-libibverbs line}"
  elif [[ ! "$lat" =~ ^completion-to-reply\ latency:\ host\ clock\ \(from\ the\ poll\)\ p50\ [0-9.]+\ us\ p99 ]]; then
    CQ_EX_WHY="no completion-to-reply latency: ${lat:-no latency line}"
  else
    return 0
  fi
  return 1
}

while read -r idx type netdev gid; do
  [[ "$type" == v2 ]] || continue
  fam=$(gid_family "$gid" "$netdev")
  # A second GID of the same family gets its index in the name.
  tag=$fam
  [[ -n "${seen[$fam]:-}" ]] && tag=$fam-$idx
  seen[$fam]=1
  one "serve-ping:$tag:default" "$idx" "$gid"
  one "serve-ping:$tag:stamp" "$idx" "$gid" --stamp --cq plain
  one "serve-ping:$tag:cq-ex" "$idx" "$gid" --cq ex --check-libibverbs
done < <(gid_list)

# Every family the set-up creates must be there (a missing one is a failure,
# not a smaller suite).
for fam in ipv4 ipv6 link-local vlan-ipv4 vlan-ipv6; do
  [[ -n "${seen[$fam]:-}" ]] || fail "serve-ping:$fam" "$UDAH_DEV has no RoCE v2 $fam GID: $(gid_list | tr '\n' ';')"
done
