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
# The preload exports exactly the three libibverbs functions it interposes,
# at libibverbs' version, and its own udah_preload_stats: no copy of
# libudah's udah_* functions, no renamed definition.
pre=${2:-$(dirname "$lib")/libudah_preload.so}
if [ -f "$pre" ]; then
  want='ibv_create_ah_from_wc@@IBVERBS_1.1
ibv_destroy_ah@@IBVERBS_1.1
ibv_init_ah_from_wc@@IBVERBS_1.1
udah_preload_stats@@UDAH_PRELOAD_0.1'
  have=$(nm -D --defined-only "$pre" | awk '{print $NF}' | sort)
  [ "$have" = "$want" ] || { echo "$pre: exports differ from the expected four:" >&2; diff <(echo "$want") <(echo "$have") >&2; exit 1; }
  echo "$pre: exports exactly the three ibv_*@@IBVERBS_1.1 and udah_preload_stats@@UDAH_PRELOAD_0.1"
fi
