#!/usr/bin/env bash
# The C tests under sanitizers, the way a C user of libudah would run them:
# the C programs (capi/tests/c/*.c, examples/udah_example.c, the fork test
# and its fake verbs) are compiled with -fsanitize; libudah.so, libudah.a and
# libudah-preload.so are the ordinary Rust builds, not instrumented (Rust's
# own sanitizer support needs a nightly -Zsanitizer build of std). So these
# runs find errors in the C side and at the boundary (a bad pointer handed
# to udah, memory udah writes that the C side reads, the C side's threads),
# not data races inside the Rust library (its own tests, Miri and loom cover
# that).
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover=all):
#      tests/c_api.rs (vectors.c against libudah.so and libudah.a, and
#      every libibverbs vector; the example) and tests/fork.rs (the fork
#      test with libudah and under the preload).
#      capi/tests/install/*.c (last_error.c; preload_stats.c with and
#      without the preload) against the release libraries.
#   2. ThreadSanitizer: tests/fork.rs (the threaded C program).
# (capi/tests/c/ah_loop.c and responder_check.c need a device: the guest
# suite runs them, not instrumented.)
# The tests compile their C programs with UDAH_TEST_CFLAGS and put
# UDAH_TEST_LD_PRELOAD first in the LD_PRELOAD of the programs they run
# under the preload: the sanitizer runtime must be initialised before the
# preload's constructor runs (otherwise its first intercepted call jumps to
# address 0), and a runtime loaded first also satisfies ASan's check of the
# library order.
# ThreadSanitizer (gcc 12) maps its shadow at fixed addresses that a
# randomised layout with vm.mmap_rnd_bits above 28 can collide with ("FATAL:
# ThreadSanitizer: unexpected memory mapping"); that run goes through
# `setarch -R` (no address randomisation for it) when the kernel allows it
# (a container's seccomp filter may not; Debian 12's default of 28 bits
# works without it).
# Needs gcc with libasan, libubsan and libtsan (Debian 12's gcc-12 brings
# libasan8, libubsan1 and libtsan2).
# Usage: capi/check-sanitizers.sh [ARGS for the test harness, e.g. --skip NAME]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
asan=$(gcc -print-file-name=libasan.so)
tsan=$(gcc -print-file-name=libtsan.so)
for rt in "$asan" "$tsan"; do
  [ -f "$rt" ] || { echo "gcc has no $(basename "$rt") (install gcc's sanitizer runtimes)" >&2; exit 1; }
done
export CI=${CI:-true}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
norand=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
  norand=(setarch "$(uname -m)" -R)
else
  echo "setarch -R is not allowed here; ThreadSanitizer runs with the kernel's address randomisation ($(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo '?') bits)"
fi

# Each sanitizer must catch a planted bug here, or a clean run below would
# mean nothing: a heap overflow, a signed overflow, a data race.
canary() { # NAME FLAGS EXPECTED-TEXT SOURCE
  printf '%s\n' "$4" >"$tmp/$1.c"
  # shellcheck disable=SC2086
  gcc -std=gnu11 -O0 -g $2 "$tmp/$1.c" -lpthread -o "$tmp/$1"
  if "${norand[@]}" "$tmp/$1" >"$tmp/$1.out" 2>&1; then echo "canary $1: not caught" >&2; exit 1; fi
  grep -q "$3" "$tmp/$1.out" || { echo "canary $1: no '$3' in:" >&2; cat "$tmp/$1.out" >&2; exit 1; }
  echo "canary $1: caught ($3)"
}
canary asan "-fsanitize=address,undefined -fno-sanitize-recover=all" heap-buffer-overflow \
  '#include <stdlib.h>
int main(int c, char **v) { (void)v; char *p = malloc(4); p[c + 3] = 1; free(p); return 0; }'
canary ubsan "-fsanitize=address,undefined -fno-sanitize-recover=all" "signed integer overflow" \
  '#include <limits.h>
int main(int c, char **v) { volatile int x = INT_MAX; int y = x + c; (void)v; return y == 7; }'
canary tsan "-fsanitize=thread" "data race" \
  '#include <pthread.h>
static int n;
static void *f(void *a) { (void)a; n++; return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); n++; pthread_join(t, 0); return 0; }'

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: tests/c_api.rs, tests/fork.rs"
UDAH_TEST_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
UDAH_TEST_LD_PRELOAD="$asan" \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  cargo test -p udah-capi --test c_api --test fork -- "$@"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: capi/tests/install/*.c against the release libraries"
cargo build --release -p udah-capi -p udah-preload
rel=${CARGO_TARGET_DIR:-$repo/target}/release
ln -sf "$rel/libudah.so" "$tmp/libudah.so.0"
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
gcc -std=c11 -O1 -g -Wall -Wextra -Werror "${san[@]}" -I include capi/tests/install/last_error.c \
  -L "$rel" -ludah -libverbs -Wl,-rpath,"$tmp" -o "$tmp/last_error"
"$tmp/last_error"
gcc -std=c11 -O1 -g -Wall -Wextra -Werror "${san[@]}" -I include capi/tests/install/preload_stats.c -ldl -o "$tmp/preload_stats"
"$tmp/preload_stats" absent
LD_PRELOAD="$asan $rel/libudah_preload.so" "$tmp/preload_stats" enabled=1

echo "== ThreadSanitizer: tests/fork.rs"
UDAH_TEST_CFLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
UDAH_TEST_LD_PRELOAD="$tsan" \
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  "${norand[@]}" cargo test -p udah-capi --test fork -- "$@"
echo "sanitizers: ASan+UBSan (c_api, fork) and TSan (fork) passed"
