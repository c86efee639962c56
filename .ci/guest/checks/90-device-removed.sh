#!/bin/bash
# Real faults under `udah serve --hal ibverbs`, part 2: the device removed
# under serve (`rdma link delete rxe0`). serve must exit on its own with a
# clear error: no panic, no hang, a plain exit code. (rxe cannot disassociate
# a user context, so the delete itself waits until serve closes its device.)
# Runs last (90-) since it removes the device; it adds the link back so that
# any check after it still has rxe0.
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"
show() { sed "s/^/  $1| /" "$2"; }

if ! start_serve -n 0 --stats-interval 0; then
  fail device-removed "serve did not start"
else
  sleep 1
  timeout 120 rdma link delete "$UDAH_DEV" >"$UDAH_OUT/rdma-delete.log" 2>&1 &
  del_pid=$!
  wait_serve 30
  wait "$del_pid"
  del_rc=$?
  echo "--- serve (rdma link delete $UDAH_DEV: exit $del_rc)"; show serve "$SERVE_LOG"
  show rdma "$UDAH_OUT/rdma-delete.log"
  if [[ $SERVE_RC -eq 124 ]]; then
    fail device-removed "serve still running 30 s after rdma link delete (killed; the delete exited $del_rc)"
  elif panicked "$SERVE_LOG"; then
    fail device-removed "serve panicked"
  elif [[ $SERVE_RC -gt 100 ]]; then
    fail device-removed "serve died with exit $SERVE_RC (signal or panic)"
  elif [[ $SERVE_RC -ne 0 ]] && ! grep -qiE '^udah.*(device|fatal|removed|event)' "$SERVE_LOG"; then
    fail device-removed "serve exit $SERVE_RC without a clear error line"
  elif [[ $del_rc -ne 0 ]]; then
    fail device-removed "rdma link delete exited $del_rc"
  else
    pass device-removed
  fi
fi
# Put the device back for any later check.
if ! ibv_devinfo -d "$UDAH_DEV" >/dev/null 2>&1; then
  rdma link add "$UDAH_DEV" type rxe netdev "$UDAH_NETDEV" && wait_active 60 \
    || fail device-readded "could not add $UDAH_DEV back"
fi
