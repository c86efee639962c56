#!/usr/bin/env bash
# Installs with capi/install.sh into a temporary prefix, then: pkg-config
# --modversion udah; a C program built with `pkg-config --cflags --libs udah`
# alone runs; udah.h and udah-preload.h compile as C99/C11 and C++11/17,
# -pedantic -Werror; a C program calls the installed preload's
# udah_preload_stats through dlvsym (with and without LD_PRELOAD, and with
# UDAH_PRELOAD=0) and linked with -ludah-preload.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$repo/capi/install.sh" --prefix "$tmp/prefix"
export PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
echo "pkg-config --modversion udah: $(pkg-config --modversion udah)"
readelf -d "$tmp/prefix/lib/libudah.so" | grep SONAME
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Werror "$repo/capi/tests/install/last_error.c" $(pkg-config --cflags --libs udah) \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/last_error"
"$tmp/last_error"
lib=$tmp/prefix/lib
gcc -std=c11 -Wall -Wextra -Werror -I"$tmp/prefix/include" "$repo/capi/tests/install/preload_stats.c" -ldl -o "$tmp/preload_stats"
gcc -std=c11 -Wall -Wextra -Werror -DLINKED -I"$tmp/prefix/include" "$repo/capi/tests/install/preload_stats.c" \
  -L"$lib" -ludah-preload -Wl,-rpath,"$lib" -o "$tmp/preload_stats_linked"
"$tmp/preload_stats" absent
LD_PRELOAD=$lib/libudah-preload.so "$tmp/preload_stats" enabled=1
UDAH_PRELOAD=off LD_PRELOAD=$lib/libudah-preload.so "$tmp/preload_stats" enabled=0
"$tmp/preload_stats_linked" enabled=1
printf '#include <udah.h>\n#include <udah-preload.h>\nint main(void) { udah_preload_stats_fn f = 0; return UDAH_CHECK_VERSION(0, 1, 0) && !f ? 0 : 1; }\n' >"$tmp/h.c"
cp "$tmp/h.c" "$tmp/h.cc"
inc=$(pkg-config --cflags udah)
for std in c99 c11; do
  # shellcheck disable=SC2086
  gcc -std=$std -pedantic -Werror -Wall $inc -c "$tmp/h.c" -o "$tmp/h-$std.o"
done
for std in c++11 c++17; do
  # shellcheck disable=SC2086
  g++ -std=$std -pedantic -Werror -Wall $inc -c "$tmp/h.cc" -o "$tmp/h-$std.o"
done
echo "udah.h, udah-preload.h: C99, C11, C++11, C++17 with -pedantic -Werror"
