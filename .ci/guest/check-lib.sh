# Helpers for the guest's check scripts: `source "$UDAH_CHECK_LIB"`.
# (Not a check itself: it lives beside checks/, not in it.)
# The env contract is in .ci/guest/README.md.

UDAH="$UDAH_BIN/udah"

# Verdict lines, the only lines the runner counts.
pass() { echo "PASS $1"; }
fail() { local n=$1; shift; echo "FAIL $n: $*"; }

# Non-empty GIDs of $UDAH_DEV port $UDAH_PORT, one per line:
#   <index> <type: v1|v2> <netdev> <gid in sysfs form>
gid_list() {
  # Builtins only (no cat per entry): the table has 1024 slots and a fork
  # costs ~10 ms under emulation.
  local d=/sys/class/infiniband/$UDAH_DEV/ports/${UDAH_PORT:-1} g i t nd gid
  for g in "$d"/gids/*; do
    i=${g##*/}
    read -r gid <"$g" 2>/dev/null || continue
    [[ "$gid" == 0000:0000:0000:0000:0000:0000:0000:0000 ]] && continue
    t=unknown nd=-
    read -r t <"$d/gid_attrs/types/$i" 2>/dev/null
    read -r nd <"$d/gid_attrs/ndevs/$i" 2>/dev/null
    case "$t" in *v2*) t=v2 ;; *v1*) t=v1 ;; *) t=unknown ;; esac
    echo "$i $t $nd $gid"
  done | sort -n
}

# The family of a GID: ipv4 (::ffff:a.b.c.d), link-local (fe80::/10) or ipv6,
# with a "vlan-" prefix when its netdev is the VLAN sub-interface.
gid_family() { # <gid> <netdev>
  local f
  case "$1" in
    0000:0000:0000:0000:0000:ffff:*) f=ipv4 ;;
    fe80:*) f=link-local ;;
    *) f=ipv6 ;;
  esac
  [[ "$2" == "${UDAH_VLAN_NETDEV:-}" ]] && f=vlan-$f
  echo "$f"
}

# Waits until $UDAH_DEV's port is ACTIVE (at most $1 seconds, default 60).
wait_active() {
  local n=$(( ${1:-60} * 2 ))
  while (( n-- > 0 )); do
    ibv_devinfo -d "$UDAH_DEV" 2>/dev/null | grep -q PORT_ACTIVE && return 0
    sleep 0.5
  done
  return 1
}

# Starts `udah serve --hal ibverbs <args>` in the background, output in
# $SERVE_LOG; waits for its "QPN 0x..." line. Sets SERVE_PID and SERVE_QPN.
# Returns non-zero (after showing the log) if it does not come up in 60 s.
start_serve() {
  SERVE_LOG=$(mktemp "$UDAH_OUT/serve.XXXX.log")
  "$UDAH" serve --hal ibverbs --device "$UDAH_DEV" --port "${UDAH_PORT:-1}" "$@" >"$SERVE_LOG" 2>&1 &
  SERVE_PID=$!
  SERVE_QPN=
  local n=240
  while (( n-- > 0 )); do
    SERVE_QPN=$(grep -m1 -oE 'QPN 0x[0-9a-fA-F]+' "$SERVE_LOG" | cut -d' ' -f2 || true)
    [[ -n "$SERVE_QPN" ]] && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.25
  done
  echo "udah serve $* did not come up:"; sed 's/^/  serve| /' "$SERVE_LOG"
  kill "$SERVE_PID" 2>/dev/null
  return 1
}

# Waits at most $2 seconds for pid $1, a child of this shell; sets WAIT_RC
# to its exit code (124: still running, then killed). Not in a `$(...)`
# subshell: there `wait` cannot reap a child that exits during the loop (the
# parent shell does) and returns -1 although the process exited 0.
wait_pid() {
  local n=$(( $2 * 4 ))
  while (( n-- > 0 )) && kill -0 "$1" 2>/dev/null; do sleep 0.25; done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    WAIT_RC=124
  else
    wait "$1"
    WAIT_RC=$?
  fi
}

# Waits at most $1 seconds for SERVE_PID to exit; sets SERVE_RC (124: still
# running, then killed).
wait_serve() {
  wait_pid "$SERVE_PID" "${1:-30}"
  SERVE_RC=$WAIT_RC
}

# True if a log contains a Rust panic.
panicked() { grep -qE "panicked at|RUST_BACKTRACE" "$1"; }

# --- the two-host fabric (UDAH_ROLE a or b; see README.md) -----------------
# The hosts meet through files on the shared 9p directory $UDAH_SYNC (read
# uncached, so one host's write is the other's next read).

# sync_put <key> [value]: publishes a value (stdin without one), atomically.
sync_put() {
  local f=$UDAH_SYNC/$1
  if (( $# > 1 )); then printf '%s\n' "$2" >"$f.tmp.$UDAH_ROLE"; else cat >"$f.tmp.$UDAH_ROLE"; fi
  mv -f "$f.tmp.$UDAH_ROLE" "$f"
}

# sync_get <key> [seconds, default 300]: waits for a key and prints it.
# Returns 1 on time-out, 2 at once if the peer has gone (set-up failed or
# its suite ended), so a dead peer costs no time-out.
sync_get() {
  local f=$UDAH_SYNC/$1 n=$(( ${2:-300} * 4 ))
  while (( n-- > 0 )); do
    [[ -f "$f" ]] && { cat "$f"; return 0; }
    [[ -f "$UDAH_SYNC/$UDAH_PEER_ROLE.gone" ]] && return 2
    sleep 0.25
  done
  return 1
}

# sync_barrier <name> [seconds]: both hosts reach <name> before either goes on.
sync_barrier() {
  sync_put "$UDAH_ROLE.at.$1" 1
  sync_get "$UDAH_PEER_ROLE.at.$1" "${2:-300}" >/dev/null
}

# The peer's GID of a family (as gid_family names them), "<index> <gid>".
peer_gid() { # <family>
  local idx type netdev gid nd
  while read -r idx type netdev gid; do
    [[ "$type" == v2 ]] || continue
    # The peer's netdev names are ours (the same set-up on both hosts).
    [[ "$(gid_family "$gid" "$netdev")" == "$1" ]] && { echo "$idx $gid"; return 0; }
  done < <(sync_get "$UDAH_PEER_ROLE.gids" 1)
  return 1
}

# Our own GID of a family, "<index> <gid>".
own_gid() { # <family>
  local idx type netdev gid
  while read -r idx type netdev gid; do
    [[ "$type" == v2 ]] || continue
    [[ "$(gid_family "$gid" "$netdev")" == "$1" ]] && { echo "$idx $gid"; return 0; }
  done < <(gid_list)
  return 1
}
