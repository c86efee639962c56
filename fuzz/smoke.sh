#!/usr/bin/env bash
# Smoke-runs every cargo-fuzz target for a fixed short time (rustls-style CI
# fuzz smoke). Exit status 0 when no target found anything.
#
#   bash fuzz/smoke.sh                 # 20 s per target (6 targets: about 2 min + build)
#   SMOKE_SECONDS=60 bash fuzz/smoke.sh
#
# New inputs go to a temporary corpus; the checked-in seeds under
# fuzz/corpus/<target>/ are read, never written. A finding is left in
# fuzz/artifacts/<target>/ (gitignored) and makes the script fail; add it to
# fuzz/regressions/<target>/ so that core/tests/corpus_replay.rs keeps it.
#
# One fuzzing process per target, one target at a time (libFuzzer's default;
# -jobs/-workers would fork and log to fuzz-N.log in the current directory).
#
# Toolchain: nightly if rustup has one; otherwise the stable toolchain with
# RUSTC_BOOTSTRAP=1 (cargo-fuzz passes -Z flags). cargo-fuzz is installed
# from crates.io if missing.
set -euo pipefail

cd "$(dirname "$0")"
SECONDS_PER_TARGET="${SMOKE_SECONDS:-20}"
TARGETS=(grh_area ah_from_wc_diff gid_table ah_table_ops ah_session_ops capture_parse)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "smoke.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

if cargo +nightly --version >/dev/null 2>&1; then
    CARGO=(cargo +nightly)
else
    echo "smoke.sh: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1" >&2
    export RUSTC_BOOTSTRAP=1
    CARGO=(cargo)
fi

"${CARGO[@]}" fuzz build

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for t in "${TARGETS[@]}"; do
    mkdir -p "$work/$t"
    echo "=== $t: ${SECONDS_PER_TARGET}s ===" >&2
    if ! "${CARGO[@]}" fuzz run "$t" "$work/$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
        >"$work/$t.log" 2>&1; then
        echo "smoke.sh: $t FAILED; last lines of its log:" >&2
        tail -n 60 "$work/$t.log" >&2
        status=1
    else
        grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs|stat::number_of_executed_units)' "$work/$t.log" >&2 || true
    fi
done
exit "$status"
