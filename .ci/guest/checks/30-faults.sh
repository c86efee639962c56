#!/bin/bash
# Real faults under `udah serve --hal ibverbs`:
#  1. an address added and then deleted on the netdev while serve runs: the
#     GID events re-snapshot serve's GID table; requests from the new address
#     are answered (N/N, 0 wrong) while it exists; after the delete, a ping
#     from the deleted GID index is refused with a clear error (no panic) and
#     the old addresses still work.
#  2. the device removed under serve (`rdma link delete`): serve exits on its
#     own with a clear error, no panic, no hang, a plain exit code; then the
#     link is added back so that later checks still have rxe0.
set -uo pipefail
source "$UDAH_CHECK_LIB"

M=${UDAH_FAULT_COUNT:-30}
EXTRA_IPV4=198.18.0.99
# sysfs form of ::ffff:198.18.0.99
EXTRA_GID=0000:0000:0000:0000:0000:ffff:c612:0063

gid_index_of() { gid_list | awk -v g="$1" '$4 == g && $2 == "v2" {print $1; exit}'; }
ping_from() { # <log> <local gid index> <dest gid> [count]
  "$UDAH" ping --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" -g "$2" --dest "$3" \
    --qpn "$SERVE_QPN" -n "${4:-$M}" --timeout-ms 2000 >"$1" 2>&1
}
ok_summary() { grep -q "^$2 sent, $2 received, 0 lost, 0 wrong;" "$1"; }
show() { sed "s/^/  $1| /" "$2"; }

# --- 1. address add / delete while serve runs --------------------------------
base_gid=0000:0000:0000:0000:0000:ffff:c612:0001 # ::ffff:$UDAH_IPV4 (198.18.0.1)
base_idx=$(gid_index_of "$base_gid")
if [[ -z "$base_idx" ]]; then
  fail gid-events "no RoCE v2 GID for $UDAH_IPV4: $(gid_list | tr '\n' ';')"
else
  # serve stops by itself after the 3 rounds of M requests below.
  if ! start_serve -g "$base_idx" -n $((3 * M)) --stats-interval 0; then
    fail gid-events "serve did not start"
  else
    r=()
    ping_from "$UDAH_OUT/ping-before.log" "$base_idx" "$base_gid"
    ok_summary "$UDAH_OUT/ping-before.log" "$M" && r+=(before:ok) || r+=(before:FAILED)
    ip addr add "$EXTRA_IPV4/24" dev "$UDAH_NETDEV"
    extra_idx=
    for _ in $(seq 1 40); do extra_idx=$(gid_index_of "$EXTRA_GID"); [[ -n "$extra_idx" ]] && break; sleep 0.25; done
    if [[ -z "$extra_idx" ]]; then
      r+=(added-gid:MISSING)
    else
      sleep 1 # let serve see the GID event before the first request from the new address
      ping_from "$UDAH_OUT/ping-added.log" "$extra_idx" "$base_gid"
      ok_summary "$UDAH_OUT/ping-added.log" "$M" && r+=(from-added:ok) || r+=(from-added:FAILED)
    fi
    ip addr del "$EXTRA_IPV4/24" dev "$UDAH_NETDEV"
    for _ in $(seq 1 40); do [[ -z "$(gid_index_of "$EXTRA_GID")" ]] && break; sleep 0.25; done
    sleep 1
    if [[ -n "$extra_idx" ]]; then
      # The deleted GID's index is empty now: the request must be refused.
      ping_from "$UDAH_OUT/ping-deleted.log" "$extra_idx" "$base_gid" 1
      drc=$?
      if [[ $drc -ne 0 && $drc -lt 100 ]] && grep -q '^udah' "$UDAH_OUT/ping-deleted.log" \
         && ! panicked "$UDAH_OUT/ping-deleted.log"; then
        r+=(from-deleted:refused)
      else
        r+=("from-deleted:NOT-REFUSED(exit $drc)")
      fi
    fi
    ping_from "$UDAH_OUT/ping-after.log" "$base_idx" "$base_gid"
    ok_summary "$UDAH_OUT/ping-after.log" "$M" && r+=(after:ok) || r+=(after:FAILED)
    wait_serve 30
    for f in before added deleted after; do
      [[ -f "$UDAH_OUT/ping-$f.log" ]] && { echo "--- ping $f"; show ping "$UDAH_OUT/ping-$f.log"; }
    done
    echo "--- serve"; show serve "$SERVE_LOG"
    resnap=$(grep -oE '\(([0-9]+) re-snapshots' "$SERVE_LOG" | grep -oE '[0-9]+' | tail -n1)
    retired=$(grep -oE '([0-9]+) retired by GID changes' "$SERVE_LOG" | grep -oE '^[0-9]+' | tail -n1)
    echo "  steps: ${r[*]}; serve exit $SERVE_RC, re-snapshots ${resnap:-?}, retired AHs ${retired:-?}"
    if panicked "$SERVE_LOG"; then
      fail gid-events "serve panicked"
    elif [[ "${r[*]}" == *FAILED* || "${r[*]}" == *MISSING* || "${r[*]}" == *NOT-REFUSED* ]]; then
      fail gid-events "${r[*]}"
    elif [[ $SERVE_RC -ne 0 ]]; then
      fail gid-events "serve exit $SERVE_RC after $((3 * M)) answered requests (124: still running)"
    elif [[ "${resnap:-0}" -lt 1 ]]; then
      fail gid-events "serve did not re-snapshot its GID table on the add/delete (re-snapshots ${resnap:-?})"
    else
      pass gid-events
    fi
  fi
fi

# --- 2. the device removed under serve -------------------------------------------
if ! start_serve -n 0 --stats-interval 0; then
  fail device-removed "serve did not start"
else
  sleep 1
  timeout 60 rdma link delete "$UDAH_DEV" >"$UDAH_OUT/rdma-delete.log" 2>&1 &
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
