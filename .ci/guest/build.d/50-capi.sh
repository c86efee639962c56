#!/usr/bin/env bash
# Host-side build for checks/50-udaddy-preload.sh, 52-fork.sh and
# 55-capi-cq-ex.sh (capi): the C loop program udah-ah-loop (plain
# libibverbs, compiled with gcc), udah-capi-check and udah-cq-ex-check (the C
# API against udah.h and libudah.so, found beside them through $ORIGIN; the
# second polls an extended CQ) and libudah-preload.so under its documented
# name (cargo names the cdylib libudah_preload.so).
# Env from build.sh: UDAH_BIN, CARGO_TARGET_DIR.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
gcc -std=gnu11 -O2 -Wall -Wextra -Werror "$repo/capi/tests/c/ah_loop.c" -libverbs -o "$UDAH_BIN/udah-ah-loop"
(cd "$repo" && cargo build --release -p udah-preload -p udah-capi)
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$repo/include" "$repo/capi/tests/c/responder_check.c" \
  -L "$CARGO_TARGET_DIR/release" -ludah -libverbs -Wl,-rpath,'$ORIGIN' -o "$UDAH_BIN/udah-capi-check"
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$repo/include" "$repo/capi/tests/c/cq_ex_check.c" \
  -L "$CARGO_TARGET_DIR/release" -ludah -libverbs -Wl,-rpath,'$ORIGIN' -o "$UDAH_BIN/udah-cq-ex-check"
cp "$CARGO_TARGET_DIR/release/libudah.so" "$UDAH_BIN/libudah.so"
# The soname the program was linked against (NEEDED libudah.so.0).
cp "$CARGO_TARGET_DIR/release/libudah.so" "$UDAH_BIN/libudah.so.0"
cp "$CARGO_TARGET_DIR/release/libudah_preload.so" "$UDAH_BIN/libudah-preload.so"
# checks/52-fork.sh: the fork test on the device (libudah's API, and plain
# verbs under the preload).
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I "$repo/include" "$repo/capi/tests/c/fork_ah.c" \
  -L "$CARGO_TARGET_DIR/release" -ludah -libverbs -lpthread -ldl -Wl,-rpath,'$ORIGIN' -o "$UDAH_BIN/udah-fork-ah"
