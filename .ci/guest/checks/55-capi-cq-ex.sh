#!/bin/bash
# libudah's extended-CQ forms on rxe0 (capi/tests/c/cq_ex_check.c, built by
# build.d/50-capi.sh): a UD QP on an extended receive CQ sends to itself from
# every RoCE v2 GID; udah_init_ah_from_cq_ex / udah_create_ah_from_cq_ex,
# called between ibv_start_poll and ibv_end_poll, must equal the ibv_wc forms
# and libibverbs' ibv_init_ah_from_wc on the same completion (and give the
# same deduplicated AH, which carries the reply back); a CQ without
# IBV_WC_EX_WITH_SL gets EINVAL naming the flag. Verdicts: capi-cq-ex:gid<N>
# per GID, capi-cq-ex:missing-flag, capi-cq-ex (exit 0 and the final line).
set -uo pipefail
# shellcheck source=../check-lib.sh
source "$UDAH_CHECK_LIB"

bin=$UDAH_BIN/udah-cq-ex-check
if [[ ! -x "$bin" ]]; then
  fail capi-cq-ex "missing: $bin"
  exit 0
fi
log=$UDAH_OUT/cq-ex-check.log
timeout 300 "$bin" "$UDAH_DEV" "${UDAH_PORT:-1}" >"$log" 2>&1
rc=$?
sed 's/^/  cq-ex| /' "$log"
while read -r _ _ n _; do pass "capi-cq-ex:gid$n"; done < <(grep -E '^cq-ex: gid [0-9]+ ok' "$log")
if grep -q '^cq-ex: missing-flag ok' "$log"; then pass capi-cq-ex:missing-flag; else
  fail capi-cq-ex:missing-flag "not reached or failed"; fi
if [[ $rc -eq 0 ]] && grep -qE '^cq-ex: ok [1-9]' "$log"; then pass capi-cq-ex; else
  fail capi-cq-ex "exit $rc: $(grep -m1 'FAILED' "$log" || tail -1 "$log")"; fi
