#!/usr/bin/env bash
# Smoke-runs every fuzz target for a fixed short time (rustls-style CI fuzz
# smoke). Exit status 0 when no target found anything.
#
#   bash fuzz/smoke.sh                 # 20 s per target, two at a time on 2+ cores
#   SMOKE_SECONDS=60 SMOKE_JOBS=1 bash fuzz/smoke.sh
#   SMOKE_ASAN=0 bash fuzz/smoke.sh    # without AddressSanitizer (faster build and runs)
#
# cargo-fuzz is NOT needed: the targets are built with plain `cargo build`
# and the flags `cargo fuzz build` passes (cargo-fuzz 0.12/0.13,
# src/project.rs: sancov-module with level 4, inline 8-bit counters, PC table,
# trace-compares and stack-depth, no branch folding, `--cfg fuzzing`,
# link-dead-code, -Zsanitizer=address, --release with debug info, an explicit
# --target so that build scripts and proc macros are not instrumented).
# Left out: cargo-fuzz's `-Ccodegen-units=1`, which makes fuzzing faster but
# the build much slower, the wrong trade for 20 s runs. `cargo fuzz run`
# works on the same targets when cargo-fuzz is installed.
#
# New inputs go to a temporary corpus; the checked-in seeds under
# fuzz/corpus/<target>/ are read, never written. A finding is left in
# fuzz/artifacts/<target>/ (gitignored) and makes the script fail; add it to
# fuzz/regressions/<target>/ so that core/tests/corpus_replay.rs keeps it.
#
# Toolchain: nightly if rustup has one; otherwise the current toolchain with
# RUSTC_BOOTSTRAP=1 (the sanitizer and the fuzzing flags are -Z flags).
# SMOKE_BUILD_ONLY=1 builds and stops; SMOKE_RUN_ONLY=1 runs what was built.
set -euo pipefail

cd "$(dirname "$0")"
SECONDS_PER_TARGET="${SMOKE_SECONDS:-20}"
JOBS="${SMOKE_JOBS:-$(( $(nproc) < 2 ? 1 : 2 ))}"
TARGETS=(grh_area ah_from_wc_diff gid_table ah_table_ops ah_session_ops capture_parse)

if cargo +nightly --version >/dev/null 2>&1; then
    CARGO=(cargo +nightly)
    RUSTC=(rustc +nightly)
else
    echo "smoke.sh: no nightly toolchain; using the current one with RUSTC_BOOTSTRAP=1" >&2
    export RUSTC_BOOTSTRAP=1
    CARGO=(cargo)
    RUSTC=(rustc)
fi
host="$("${RUSTC[@]}" -vV | sed -n 's/^host: //p')"
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
bin_dir="$target_dir/$host/release"

flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-simplifycfg-branch-fold-threshold=0"
flags+=" --cfg fuzzing -Clink-dead-code"
case "$host" in *-linux-*) flags+=" -Cllvm-args=-sanitizer-coverage-stack-depth" ;; esac
if [ "${SMOKE_ASAN:-1}" != 0 ]; then
    flags+=" -Zsanitizer=address"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"
fi

if [ "${SMOKE_RUN_ONLY:-0}" = 0 ]; then
    # What `cargo fuzz build` runs (cargo-fuzz also sets CARGO_FUZZ=1).
    CARGO_FUZZ=1 RUSTFLAGS="$flags ${RUSTFLAGS:-}" "${CARGO[@]}" build --manifest-path Cargo.toml \
        --target "$host" --release --config profile.release.debug=true --bins --target-dir "$target_dir"
fi
[ "${SMOKE_BUILD_ONLY:-0}" = 0 ] || exit 0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Runs target $1, writes its log and an exit-status file.
run_one() {
    local t="$1"
    mkdir -p "$work/$t" "artifacts/$t"
    if "$bin_dir/$t" "-artifact_prefix=artifacts/$t/" -max_total_time="$SECONDS_PER_TARGET" \
        -print_final_stats=1 "$work/$t" "corpus/$t" >"$work/$t.log" 2>&1; then
        echo 0 >"$work/$t.rc"
    else
        echo $? >"$work/$t.rc"
    fi
}

echo "=== ${#TARGETS[@]} targets, ${SECONDS_PER_TARGET}s each, $JOBS at a time ===" >&2
running=0
for t in "${TARGETS[@]}"; do
    [ -x "$bin_dir/$t" ] || { echo "smoke.sh: $bin_dir/$t was not built" >&2; exit 1; }
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

status=0
for t in "${TARGETS[@]}"; do
    if [ "$(cat "$work/$t.rc")" != 0 ]; then
        echo "smoke.sh: $t FAILED (exit $(cat "$work/$t.rc")); last lines of its log:" >&2
        tail -n 60 "$work/$t.log" >&2
        status=1
    else
        echo "$t: $(grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units)' "$work/$t.log" | tr '\n' ' ')" >&2
    fi
done
exit "$status"
