#!/bin/bash
# The replay path end to end on a real wire: b captures (tcpdump -w) its
# pings of `udah serve --log-ahs` on a from three GID families (IPv4, IPv6,
# link-local); `udah replay` of that capture, with a's GID table, must give
# for each sender QP exactly the attribute serve built for it.
#   b: capture-replay:ping     N/N replies per family, the capture read;
#   a: capture-replay:match    every `ah:` line of serve is a replay row
#                              (same source QPN, `ok` and the same attribute).
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-10}
FAMILIES=(ipv4 ipv6 link-local)

# This host's GID table in the case format's `port` shape (replay --gid-table).
gid_table_json() {
  local d=/sys/class/infiniband/$UDAH_DEV/ports/${UDAH_PORT:-1} len sep= idx type nd gid
  len=$(ls "$d/gids" | wc -l)
  printf '{"num":%s,"link_layer":"ethernet","gid_tbl_len":%s,"gids":[' "${UDAH_PORT:-1}" "$len"
  while read -r idx type nd gid; do
    printf '%s{"index":%s,"gid":"%s","type":"roce_%s"}' "$sep" "$idx" "${gid//:/}" "$type"
    sep=,
  done < <(gid_list)
  printf ']}\n'
}

serve_side() {
  local own
  own=$(own_gid ipv4) || { fail capture-replay:match "no RoCE v2 IPv4 GID"; sync_put cr.qpn none; return; }
  gid_table_json | sync_put cr.a-table.json
  if ! start_serve -g "${own%% *}" -n $((N * ${#FAMILIES[@]})) --stats-interval 0 --log-ahs; then
    fail capture-replay:match "serve did not start"; sync_put cr.qpn none; return
  fi
  sync_put cr.qpn "$SERVE_QPN"
  local replay
  replay=$(sync_get cr.replay 600) || { fail capture-replay:match "no replay output from b"; kill "$SERVE_PID"; return; }
  wait_serve 30
  sed 's/^/  serve | /' "$SERVE_LOG"
  sed 's/^/  replay| /' <<<"$replay"
  local n=0 bad= qpn desc
  while read -r _ _ qpn desc; do
    n=$((n + 1))
    if ! awk -v q="$qpn" -v want="ok $desc" '$2 == q && index($0, want) && substr($0, length($0) - length(want) + 1) == want {f = 1} END {exit !f}' <<<"$replay"; then
      bad+=" [$qpn $desc]"
    fi
  done < <(grep -E '^ah: QPN ' "$SERVE_LOG")
  echo "serve logged $n attribute(s)"
  if [[ $n -ne ${#FAMILIES[@]} ]]; then
    fail capture-replay:match "serve logged $n attribute(s), want ${#FAMILIES[@]} (one per family's QP)"
  elif [[ -n "$bad" ]]; then
    fail capture-replay:match "not in the replay of b's capture:$bad"
  else
    pass capture-replay:match
  fi
}

ping_side() {
  local qpn fam own peer log pcap=$UDAH_OUT/b.pcap tpid ok=1 why= table
  qpn=$(sync_get cr.qpn 300) || { fail capture-replay:ping "no word from a"; sync_put cr.replay "none"; return; }
  [[ "$qpn" == none ]] && { fail capture-replay:ping "serve on a did not start"; sync_put cr.replay "none"; return; }
  tcpdump -i "$UDAH_NETDEV" -U -nn -w "$pcap" udp port 4791 2>"$UDAH_OUT/tcpdump.log" &
  tpid=$!
  sleep 2
  for fam in "${FAMILIES[@]}"; do
    own=$(own_gid "$fam"); peer=$(peer_gid "$fam")
    log=$UDAH_OUT/ping.$fam.log
    "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
      --qpn "$qpn" -n "$N" --timeout-ms 2000 >"$log" 2>&1
    sed "s/^/  ping $fam| /" "$log"
    grep -q "^$N sent, $N received, 0 lost, 0 wrong;" "$log" || { ok=0; why+=" $fam: $(grep -m1 -E '^[0-9]+ sent' "$log")"; }
  done
  sleep 1
  kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
  table=$UDAH_OUT/a-table.json
  sync_get cr.a-table.json 5 >"$table"
  local out rc
  out=$("$UDAH" replay --gid-table "$table" "$pcap" 2>&1); rc=$?
  sync_put cr.replay "$out"
  echo "replay exit $rc"
  if [[ $ok -ne 1 ]]; then fail capture-replay:ping "$why"
  elif [[ $rc -ne 0 ]]; then fail capture-replay:ping "udah replay exit $rc: $(tail -n1 <<<"$out")"
  else pass capture-replay:ping; fi
}

if [[ $UDAH_ROLE == a ]]; then serve_side; else ping_side; fi
