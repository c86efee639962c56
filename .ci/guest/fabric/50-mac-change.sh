#!/bin/bash
# A peer's MAC changes while it is being served: host b pings `udah serve` on
# a over IPv4, changes its NIC's MAC (the kernel announces it: gratuitous ARP
# and unsolicited ND), and pings again. Serve must retire exactly the AHs
# built for b's old MAC (the neighbour event), answer b at its new MAC, and
# keep every other AH; a's capture shows where the replies went.
#   a: mac-change:retired   serve reports b's IPv4 neighbour moved, 1 AH
#                           retired for it, and no other AH retired;
#   a: mac-change:capture   replies to b left for the old MAC before the
#                           change and for the new MAC after it;
#   a: mac-change:serve     serve exits 0 (every request answered);
#   b: mac-change:before, mac-change:after   N/N replies each.
set -uo pipefail
source "$UDAH_CHECK_LIB"

N=${UDAH_PING_COUNT:-20}
OLD=$UDAH_PEER_MAC
[[ $UDAH_ROLE == b ]] && OLD=52:54:00:da:00:02
NEW=52:54:00:da:00:12

serve_side() {
  local own pcap=$UDAH_OUT/a.pcap tpid
  own=$(own_gid ipv4) || { fail mac-change:serve "no RoCE v2 IPv4 GID"; sync_put mc.qpn none; return; }
  tcpdump -i "$UDAH_NETDEV" -U -nn -w "$pcap" udp port 4791 2>"$UDAH_OUT/tcpdump.log" &
  tpid=$!
  sleep 2
  if ! start_serve -g "${own%% *}" -n $((2 * N)) --stats-interval 0; then
    kill "$tpid"; fail mac-change:serve "serve did not start"; sync_put mc.qpn none; return
  fi
  sync_put mc.qpn "$SERVE_QPN"
  sync_get mc.done 600 >/dev/null
  wait_serve 30
  sleep 1
  kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
  sed 's/^/  serve| /' "$SERVE_LOG"
  local moved others
  # "moved OLD -> NEW" when serve saw the old entry, "is at NEW" when the
  # change is the first it hears of this neighbour.
  moved=$(grep -m1 -E "^event: neighbour $UDAH_PEER_IPV4 (moved $OLD -> $NEW|is at $NEW): [0-9]+ AH" "$SERVE_LOG" || true)
  others=$(grep -E '^event: neighbour ' "$SERVE_LOG" | grep -v "^event: neighbour $UDAH_PEER_IPV4 " \
           | grep -oE '[0-9]+ AH' | awk '{s += $1} END {print s + 0}')
  echo "neighbour events: ${moved:-none for $UDAH_PEER_IPV4}; AHs retired for other addresses: $others"
  if [[ "$moved" == *": 1 AH(s) "*retired && "$others" == 0 ]]; then
    pass mac-change:retired
  else
    fail mac-change:retired "want '$UDAH_PEER_IPV4 moved $OLD -> $NEW: 1 AH(s) retired' and 0 others; got '${moved:-nothing}', $others others"
  fi
  # Replies: UDP from our IPv4 to b's, by destination MAC, in capture order.
  local order
  order=$(tcpdump -r "$pcap" -e -nn "src host $UDAH_IPV4 and dst host $UDAH_PEER_IPV4" 2>/dev/null \
          | grep -oE "> ($OLD|$NEW)," | tr -d '>, ' | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' ')
  echo "replies to $UDAH_PEER_IPV4 by destination MAC, in order: $order"
  if [[ "$order" == "${OLD}x$N ${NEW}x$N " ]]; then
    pass mac-change:capture
  else
    fail mac-change:capture "want ${OLD}x$N then ${NEW}x$N, capture shows: ${order:-no replies}"
  fi
  if panicked "$SERVE_LOG" || [[ $SERVE_RC -ne 0 ]]; then
    fail mac-change:serve "serve exit $SERVE_RC"
  else
    pass mac-change:serve
  fi
}

ping_once() { # <verdict> <qpn>
  local own peer log=$UDAH_OUT/ping.$1.log summary
  own=$(own_gid ipv4); peer=$(peer_gid ipv4)
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "${own%% *}" --dest "${peer#* }" \
    --qpn "$2" -n "$N" --timeout-ms 2000 >"$log" 2>&1
  sed 's/^/  ping | /' "$log"
  summary=$(grep -m1 -E '^[0-9]+ sent, ' "$log" || true)
  if [[ "$summary" == "$N sent, $N received, 0 lost, 0 wrong;"* ]]; then pass "mac-change:$1"; else fail "mac-change:$1" "${summary:-no summary}"; fi
}

ping_side() {
  local qpn
  qpn=$(sync_get mc.qpn 300) || { fail mac-change:before "no word from a"; return; }
  [[ "$qpn" == none ]] && { fail mac-change:before "serve on a did not start"; sync_put mc.done 1; return; }
  ping_once before "$qpn"
  # The kernel announces a new MAC itself when told to (arp_notify,
  # ndisc_notify): a gratuitous ARP and an unsolicited neighbour advert.
  echo 1 >"/proc/sys/net/ipv4/conf/$UDAH_NETDEV/arp_notify"
  echo 1 >"/proc/sys/net/ipv6/conf/$UDAH_NETDEV/ndisc_notify"
  ip link set dev "$UDAH_NETDEV" address "$NEW"
  sleep 2
  ping_once after "$qpn"
  sync_put mc.done 1
  # Back to the MAC the later checks expect.
  ip link set dev "$UDAH_NETDEV" address "$OLD"
  sleep 1
}

if [[ $UDAH_ROLE == a ]]; then serve_side; else ping_side; fi
