#!/usr/bin/env bash
# Host-side build for checks/51-capi-events.sh: udah-events-check (libudah's
# udah_config and network events on rxe0, capi/tests/c/events_check.c),
# linked with libudah.so.0, found beside it through $ORIGIN.
# Env from build.sh: UDAH_BIN, CARGO_TARGET_DIR.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
(cd "$repo" && cargo build --release -p udah-capi)
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$repo/include" "$repo/capi/tests/c/events_check.c" \
  -L "$CARGO_TARGET_DIR/release" -ludah -libverbs -Wl,-rpath,'$ORIGIN' -o "$UDAH_BIN/udah-events-check"
cp "$CARGO_TARGET_DIR/release/libudah.so" "$UDAH_BIN/libudah.so.0"
