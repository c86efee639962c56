#!/bin/bash
# fork() while four threads create and destroy AHs on rxe0 (capi, the C fork
# test capi/tests/c/fork_ah.c, also run on the host against fake verbs by
# capi/tests/fork.rs). Each child must create and destroy one more AH (udah
# and plain ibv_create_ah) and exit 0 within its alarm; a blocked child is a
# FAIL, not a hang.
#  fork-udah      libudah's API on the program's own context and PD: the
#                 threads ask udah for the loopback peer's AH, every other
#                 time with a flow label of their own (udah_create_ah: misses
#                 and kernel creates), thread 0 sends IBV_EVENT_GID_CHANGE
#                 every 64 requests (re-reads under the responder's locks);
#                 more than one kernel AH must have been created.
#  fork-preload   plain libibverbs (ibv_create_ah_from_wc + ibv_destroy_ah)
#                 under LD_PRELOAD=libudah-preload.so, with and without
#                 UDAH_PRELOAD_SHARE=1; every call served by udah.
set -uo pipefail
source "$UDAH_CHECK_LIB"

BIN=$UDAH_BIN/udah-fork-ah
PRELOAD=$UDAH_BIN/libudah-preload.so
FORKS=${UDAH_FORK_COUNT:-30}
# TCG is slow and the four threads keep the CPUs busy: a generous alarm.
export UDAH_FORK_ALARM=${UDAH_FORK_ALARM:-60}

missing=
[[ -x "$BIN" ]] || missing+=" $BIN"
[[ -f "$PRELOAD" ]] || missing+=" $PRELOAD"
if [[ -n "$missing" ]]; then
  fail fork-udah "missing:$missing"; fail fork-preload "missing:$missing"
  exit 0
fi

"$BIN" udah "$UDAH_DEV" "${UDAH_PORT:-1}" "$UDAH_IPV4" "$FORKS" >"$UDAH_OUT/fork-udah.log" 2>&1
rc=$?
sed 's/^/  fork udah| /' "$UDAH_OUT/fork-udah.log"
kahs=$(grep -m1 '^responder:' "$UDAH_OUT/fork-udah.log" | grep -oE '[0-9]+ kernel AHs created' | awk '{print $1}')
if [[ $rc -eq 0 && "${kahs:-0}" -gt 1 ]] && grep -q "^fork-ah udah $UDAH_DEV: $FORKS forks, .* 0 failures" "$UDAH_OUT/fork-udah.log"; then
  pass fork-udah
else
  fail fork-udah "exit $rc, ${kahs:-no} kernel AHs: $(grep -m1 -E '^fork [0-9]+:|^thread|failures' "$UDAH_OUT/fork-udah.log")"
fi

bad=
for share in 0 1; do
  log=$UDAH_OUT/fork-preload-share$share.log
  LD_PRELOAD="$PRELOAD" UDAH_PRELOAD_STATS=1 UDAH_PRELOAD_SHARE=$share \
    "$BIN" preload "$UDAH_DEV" "${UDAH_PORT:-1}" "$UDAH_IPV4" "$FORKS" >"$log" 2>&1
  rc=$?
  sed "s/^/  fork preload share=$share| /" "$log"
  line=$(grep -m1 '^udah-preload:' "$log")
  if [[ $rc -ne 0 ]] || ! grep -q "^fork-ah preload $UDAH_DEV: $FORKS forks, .* 0 failures" "$log"; then
    bad+=" share=$share: exit $rc: $(grep -m1 -E '^fork [0-9]+:|^thread|failures' "$log")"
  elif [[ -z "$line" ]] || grep -qE 'fallback_[a-z_]+=[1-9]' <<<"$line" || grep -q ' served=0 ' <<<"$line"; then
    bad+=" share=$share: not every call served by udah: $line"
  fi
done
if [[ -z "$bad" ]]; then pass fork-preload; else fail fork-preload "$bad"; fi
