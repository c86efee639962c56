#!/bin/bash
# libudah's configuration and network events on rxe0 (capi/tests/c/events_check.c):
#  events-open        udah_responder_open_ex with 65536 AH slots and an
#                     allow-list (udah_stats.ah_slots says 65536)
#  events-allow-list  a completion from outside the allow-list: EACCES
#  events-fd          udah_responder_event_fd, the same fd twice
#  events-create      AHs to two peers with permanent neighbour entries
#  events-same-mac    the entry replaced with the same MAC: nothing retired
#  events-mac-change  the peer's MAC changed: exactly its AH retired
#                     (udah_ah_is_current 0), the other peer's still current
#  events-new-ah      the next request for the peer gets a new AH
#  events-give-back   the retired, held AH is given back like any other; the
#                     responder and PD are destroyed
set -uo pipefail
source "$UDAH_CHECK_LIB"

bin=$UDAH_BIN/udah-events-check
ALL=(events-open events-allow-list events-fd events-create events-same-mac events-mac-change events-new-ah events-give-back)
if [[ ! -x "$bin" ]]; then
  for v in "${ALL[@]}"; do fail "$v" "missing: $bin"; done
  exit 0
fi
# A peer on udah0's subnet that nothing else uses.
"$bin" "$UDAH_DEV" "$UDAH_PORT" "$UDAH_NETDEV" "$UDAH_IPV4" 198.18.0.77 2>&1 | tee "$UDAH_OUT/events-check.txt"
rc=${PIPESTATUS[0]}
for v in "${ALL[@]}"; do
  grep -q "^\(PASS\|FAIL\) $v\b" "$UDAH_OUT/events-check.txt" || fail "$v" "no verdict (udah-events-check exited $rc)"
done
exit 0
