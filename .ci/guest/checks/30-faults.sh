#!/bin/bash
# Real faults under `udah serve --hal ibverbs`, part 1 (part 2, the device
# removed under serve, is 90-device-removed.sh, the last check):
#  an address added and then deleted on the netdev while serve runs: the
#     GID events re-snapshot serve's GID table; requests from and to the new
#     address are answered (N/N, 0 wrong) while it exists; after the delete,
#     the AH serve replied with from that GID is retired, a ping from the
#     deleted GID index is refused with a clear error (no panic) and the old
#     address still works.
set -uo pipefail
# shellcheck source=../check-lib.sh
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
      sleep 1 # let serve see the GID event before the first request to the new address
      # From and TO the new address: serve's reply leaves from the new GID,
      # which it can only find in a re-snapshotted table.
      ping_from "$UDAH_OUT/ping-added.log" "$extra_idx" "$EXTRA_GID"
      ok_summary "$UDAH_OUT/ping-added.log" "$M" && r+=(to-added:ok) || r+=(to-added:FAILED)
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
    elif [[ "${retired:-0}" -lt 1 ]]; then
      fail gid-events "the AH that replied from the deleted GID was not retired (retired ${retired:-?})"
    else
      pass gid-events
    fi
  fi
fi
