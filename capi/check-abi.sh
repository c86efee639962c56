#!/usr/bin/env bash
# Checks a built libudah.so: soname libudah.so.0, and every exported udah_*
# function in version node UDAH_0.1; and the preload beside it
# (libudah_preload.so, or the second argument): soname libudah-preload.so
# (its own, not libudah's: cargo hands a dependency's cdylib link arguments
# to its dependents' cdylibs, see capi/build.rs), no DT_NEEDED on libudah,
# exactly its four exports.
# Usage: capi/check-abi.sh [libudah.so [libudah_preload.so]]
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
[ -f "$pre" ] || { echo "$pre: missing (cargo build --release -p udah-capi -p udah-preload)" >&2; exit 1; }
soname=$(readelf -d "$pre" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libudah-preload.so ] || { echo "$pre: soname is '$soname', not libudah-preload.so" >&2; exit 1; }
! readelf -d "$pre" | grep -q 'NEEDED.*\[libudah\.so' || { echo "$pre: needs libudah.so (it carries the engine itself)" >&2; exit 1; }
echo "$pre: soname libudah-preload.so"
{
  want='ibv_create_ah_from_wc@@IBVERBS_1.1
ibv_destroy_ah@@IBVERBS_1.1
ibv_init_ah_from_wc@@IBVERBS_1.1
udah_preload_stats@@UDAH_PRELOAD_0.1'
  have=$(nm -D --defined-only "$pre" | awk '{print $NF}' | sort)
  [ "$have" = "$want" ] || { echo "$pre: exports differ from the expected four:" >&2; diff <(echo "$want") <(echo "$have") >&2; exit 1; }
  echo "$pre: exports exactly the three ibv_*@@IBVERBS_1.1 and udah_preload_stats@@UDAH_PRELOAD_0.1"
}
