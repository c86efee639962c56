#!/bin/bash
# Real faults, part 2 with traffic: the device removed under a serve that
# holds a cached AH (it answered 2 pings). serve must stop on its own, say
# `udah serve: device ... removed`, retire every AH before it closes the
# device (`shutdown: N AH(s) retired, 0 left alive`), and exit 3 (device
# lost); the delete (which waits for serve to close the device on rxe) must
# then finish. The device is added back afterwards.
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"
name=device-removed:with-ah

if ! start_serve -n 0 --stats-interval 0; then
  fail "$name" "serve did not start"
else
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --dest "$UDAH_IPV4" --qpn "$SERVE_QPN" -n 2 \
    --timeout-ms 2000 >"$UDAH_OUT/ping.removed.log" 2>&1
  timeout 120 rdma link delete "$UDAH_DEV" >"$UDAH_OUT/rdma-delete-2.log" 2>&1 &
  del_pid=$!
  wait_serve 30
  wait "$del_pid"
  del_rc=$?
  sed 's/^/  serve| /' "$SERVE_LOG"
  if [[ $SERVE_RC -eq 124 ]]; then
    fail "$name" "serve still running 30 s after rdma link delete (killed)"
  elif panicked "$SERVE_LOG"; then
    fail "$name" "serve panicked"
  elif [[ $SERVE_RC -ne 3 ]]; then
    fail "$name" "serve exit $SERVE_RC (expected 3): $(tail -n1 "$SERVE_LOG")"
  elif ! grep -qE "^udah serve: device $UDAH_DEV removed" "$SERVE_LOG"; then
    fail "$name" "no 'udah serve: device $UDAH_DEV removed' line"
  elif ! grep -qE '^received 2, answered 2,.* 1 creates 1 live' "$SERVE_LOG"; then
    fail "$name" "serve did not hold one AH when the device went: $(grep '^received' "$SERVE_LOG")"
  elif ! grep -qE '^shutdown: 1 AH\(s\) retired, 0 left alive' "$SERVE_LOG"; then
    fail "$name" "the AH was not retired before closing"
  elif [[ $del_rc -ne 0 ]]; then
    fail "$name" "rdma link delete exited $del_rc"
  else
    pass "$name"
  fi
fi
if ! ibv_devinfo -d "$UDAH_DEV" >/dev/null 2>&1; then
  rdma link add "$UDAH_DEV" type rxe netdev "$UDAH_NETDEV" && wait_active 60 \
    || fail device-readded "could not add $UDAH_DEV back"
fi
