#!/usr/bin/env bash
# Host-side build for the guest suite. Usage: build.sh <bin-dir>
# Fills <bin-dir> with what the checks run (the guest is Debian 12 like the
# host, and libibverbs is dlopened at run time, so host binaries run there):
#   udah                 cargo build --release -p udah-cli [--features ibverbs]
#   test-<name>          every test executable of udah-hal-ibverbs (release)
#   libudah*.so          every cdylib of the workspace (release)
# and then runs every executable .ci/guest/build.d/*.sh (extra host builds
# that other checks need) with UDAH_BIN=<bin-dir>.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin=${1:?usage: build.sh <bin-dir>}
mkdir -p "$bin"
cd "$REPO_DIR"
export CARGO_TERM_COLOR=never

meta=$(cargo metadata --no-deps --format-version 1)
target_dir=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$meta")
# The `ibverbs` feature of udah-cli gates the verbs commands; on a tree that
# predates it the commands are always built, so build without the flag.
features=()
if python3 -c 'import json,sys
m=json.load(sys.stdin)
sys.exit(0 if any(p["name"]=="udah-cli" and "ibverbs" in p["features"] for p in m["packages"]) else 1)' <<<"$meta"; then
  features=(--features ibverbs)
fi
log "cargo build --release -p udah-cli ${features[*]}"
cargo build --release -p udah-cli "${features[@]}"
cp "$target_dir/release/udah" "$bin/udah"

log "cargo test --release -p udah-hal-ibverbs --no-run"
cargo test --release -p udah-hal-ibverbs --no-run --message-format=json >"$bin/.cargo-test.json"
python3 -c '
import json, shutil, sys
out = sys.argv[1]
n = 0
for line in open(sys.argv[2]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        t = m["target"]
        if "udah-hal-ibverbs" not in m["package_id"]:
            continue
        name = "lib" if "lib" in t["kind"] else t["name"]
        shutil.copy2(m["executable"], out + "/test-" + name)
        n += 1
if n == 0:
    sys.exit("no test executable of udah-hal-ibverbs found")
' "$bin" "$bin/.cargo-test.json"
rm -f "$bin/.cargo-test.json"

# C API libraries (a capi crate with a cdylib target, when the tree has one).
cdylibs=$(python3 -c 'import json,sys
for p in json.load(sys.stdin)["packages"]:
    if any("cdylib" in t["kind"] for t in p["targets"]): print(p["name"])' <<<"$meta")
for p in $cdylibs; do
  log "cargo build --release -p $p (cdylib)"
  cargo build --release -p "$p"
done
shopt -s nullglob
for so in "$target_dir"/release/libudah*.so; do cp "$so" "$bin/"; done

# Extra host-side builds dropped in by other checks.
for b in "$GUEST_DIR"/build.d/*.sh; do
  [[ -x "$b" ]] || continue
  log "build hook $(basename "$b")"
  UDAH_BIN="$bin" CARGO_TARGET_DIR="$target_dir" bash "$b"
done
log "binaries for the guest: $(cd "$bin" && ls | tr '\n' ' ')"
