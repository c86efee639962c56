#!/bin/bash
# Real faults under `udah serve --hal ibverbs`, part 3: its QP forced into the
# error state (`--fault-qp-after N`: `ibv_modify_qp` to IBV_QPS_ERR after N
# answers, the state a provider moves a failed QP to). serve must see its
# work requests flushed, say so on a line starting with `udah`, print its
# final statistics with every AH retired, and exit 4: not hang, not panic.
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"

for after in 0 2; do
  name="qp-error:after-$after"
  if ! start_serve -n 0 --stats-interval 0 --fault-qp-after "$after"; then
    fail "$name" "serve did not start"
    continue
  fi
  if (( after > 0 )); then
    "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "$UDAH_IPV4" --qpn "$SERVE_QPN" -n "$after" \
      --timeout-ms 2000 >"$UDAH_OUT/ping.qp-error.log" 2>&1
  fi
  wait_serve 30
  sed 's/^/  serve| /' "$SERVE_LOG"
  if [[ $SERVE_RC -eq 124 ]]; then
    fail "$name" "serve still running 30 s after its QP went to the error state (killed)"
  elif panicked "$SERVE_LOG"; then
    fail "$name" "serve panicked"
  elif [[ $SERVE_RC -ne 4 ]]; then
    fail "$name" "serve exit $SERVE_RC (expected 4): $(tail -n1 "$SERVE_LOG")"
  elif ! grep -qE '^udah serve: QP 0x[0-9a-f]+ on device .* is in the error state' "$SERVE_LOG"; then
    fail "$name" "no 'udah serve: QP ... is in the error state' line"
  elif ! grep -qE "^received $after, answered $after," "$SERVE_LOG"; then
    fail "$name" "final statistics do not show $after answered request(s)"
  elif ! grep -qE '^shutdown: [0-9]+ AH\(s\) retired, 0 left alive' "$SERVE_LOG"; then
    fail "$name" "an AH was left alive at shutdown"
  else
    pass "$name"
  fi
done
