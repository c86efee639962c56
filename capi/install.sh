#!/usr/bin/env bash
# Builds libudah and libudah-preload with cargo alone and installs them:
#   capi/install.sh --prefix DIR
# DIR/lib: libudah.so.0.1.0, libudah.so.0 and libudah.so (symlinks),
# libudah.a, libudah-preload.so (its soname: no symlinks);
# DIR/lib/pkgconfig/udah.pc (from udah.pc.in); DIR/include/udah.h and
# DIR/include/udah-preload.h (udah_preload_stats).
set -euo pipefail
prefix=
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    *) echo "usage: $0 --prefix DIR" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "usage: $0 --prefix DIR" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cargo build --release -p udah-capi -p udah-preload
target=${CARGO_TARGET_DIR:-$repo/target}/release
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
prefix=$(cd "$prefix" && pwd)
install -m 0755 "$target/libudah.so" "$prefix/lib/libudah.so.$version"
ln -sf "libudah.so.$version" "$prefix/lib/libudah.so.0"
ln -sf libudah.so.0 "$prefix/lib/libudah.so"
install -m 0644 "$target/libudah.a" "$prefix/lib/libudah.a"
install -m 0755 "$target/libudah_preload.so" "$prefix/lib/libudah-preload.so"
install -m 0644 include/udah.h "$prefix/include/udah.h"
install -m 0644 include/udah-preload.h "$prefix/include/udah-preload.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" capi/udah.pc.in >"$prefix/lib/pkgconfig/udah.pc"
echo "installed libudah $version into $prefix"
