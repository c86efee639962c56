#!/usr/bin/env bash
# Checks a built libudah.so: soname libudah.so.0, and every exported udah_*
# function in version node UDAH_0.1. Usage: capi/check-abi.sh [libudah.so]
set -euo pipefail
lib=${1:-target/release/libudah.so}
readelf -d "$lib" | grep -q 'Library soname: \[libudah.so.0\]' || { echo "$lib: soname is not libudah.so.0" >&2; exit 1; }
syms=$(objdump -T "$lib" | awk '$NF ~ /^udah_/ && $2 == "g"')
[ -n "$syms" ] || { echo "$lib: exports no udah_ symbol" >&2; exit 1; }
bad=$(echo "$syms" | awk '$(NF-1) != "UDAH_0.1"')
[ -z "$bad" ] || { echo "$lib: unversioned exports:" >&2; echo "$bad" >&2; exit 1; }
other=$(objdump -T "$lib" | awk '$2 == "g" && $4 != "*UND*" && $NF !~ /^udah_/')
[ -z "$other" ] || { echo "$lib: exports other than udah_*:" >&2; echo "$other" >&2; exit 1; }
echo "$lib: soname libudah.so.0, $(echo "$syms" | wc -l) udah_* symbols @@UDAH_0.1"
# The preload exports the libibverbs symbols it interposes and its own
# udah_preload_* entry points, never a copy of libudah's udah_* functions.
pre=${2:-$(dirname "$lib")/libudah_preload.so}
if [ -f "$pre" ]; then
  leak=$(nm -D --defined-only "$pre" | awk '$NF ~ /^udah_/ && $NF !~ /^udah_preload_/')
  [ -z "$leak" ] || { echo "$pre: re-exports libudah symbols:" >&2; echo "$leak" >&2; exit 1; }
  echo "$pre: no udah_* export beyond udah_preload_*"
fi
