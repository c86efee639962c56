#!/bin/bash
# The hal-ibverbs hardware tests (hal-ibverbs/tests/hardware*.rs, all
# #[ignore]d on machines without a device) against rxe0: one verdict per
# test, from libtest's own "test NAME ... ok|FAILED" lines.
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"

shopt -s nullglob
exes=("$UDAH_BIN"/test-hardware*)
if [[ ${#exes[@]} -eq 0 ]]; then
  fail hardware-tests "no test-hardware* executable in $UDAH_BIN"
  exit 1
fi
for exe in "${exes[@]}"; do
  t=${exe##*/test-}
  log="$UDAH_OUT/$t.log"
  UDAH_TEST_DEVICE=$UDAH_DEV UDAH_TEST_PORT=${UDAH_PORT:-1} RUST_BACKTRACE=1 \
    "$exe" --ignored --test-threads=1 >"$log" 2>&1
  rc=$?
  cat "$log"
  n=0
  while read -r _ name _ result; do
    n=$((n + 1))
    if [[ "$result" == ok ]]; then pass "$t::$name"; else fail "$t::$name" "$result (see $t.log)"; fi
  done < <(grep -E '^test .* \.\.\. ' "$log" | sed -E 's/^test (.*) \.\.\. (.*)$/test \1 x \2/')
  [[ $n -gt 0 ]] || fail "$t" "ran no test (exit $rc)"
  # A crash after the last test line (e.g. a segfault in a destructor).
  [[ $rc -eq 0 ]] || grep -q '^test result: FAILED' "$log" || fail "$t" "exited $rc"
done
