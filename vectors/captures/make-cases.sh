#!/usr/bin/env bash
# Writes the *.cases.jsonl beside the hand-built captures: one case per UD
# packet (`udah replay --emit-cases`: the receiver table, completion and area),
# whose `expect` is then replaced by what the REAL libibverbs answers
# (oracle/ibv-oracle, built from the repository). Needs gcc, make,
# libibverbs-dev and python3. Run from the repository root:
#
#   bash vectors/captures/make-cases.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
make -s -C oracle OUT="$target/oracle"
oracle="$target/oracle/ibv-oracle"
cargo build -q -p udah-cli
udah="$target/debug/udah"
d=vectors/captures
for spec in "rocev2-ud.pcap zero rocev2-ud.pcap.cases.jsonl" \
            "rocev2-ud.pcap v6pad rocev2-ud.pcap.v6pad.cases.jsonl" \
            "ib-ud.pcap zero ib-ud.pcap.cases.jsonl"; do
    set -- $spec
    tmp="$(mktemp)"
    "$udah" replay --no-progress --ipv4-front "$2" --emit-cases "$tmp" "$d/$1" >/dev/null
    python3 - "$oracle" "$tmp" "$d/$3" <<'PY'
import json, subprocess, sys
oracle, src, dst = sys.argv[1:]
cases = [json.loads(l) for l in open(src) if l.strip()]
inputs = "".join(json.dumps({k: v for k, v in c.items() if k != "expect"}) + "\n" for c in cases)
answers = subprocess.run([oracle], input=inputs, capture_output=True, text=True, check=True).stdout.splitlines()
assert len(answers) == len(cases), (len(answers), len(cases))
with open(dst, "w") as f:
    for c, a in zip(cases, answers):
        a = json.loads(a)
        assert a.pop("name") == c["name"] and "error" not in a, a
        a.pop("port_queries", None)
        c["expect"] = a
        f.write(json.dumps(c, separators=(",", ":")) + "\n")
print(f"{dst}: {len(cases)} cases, expect from the real libibverbs")
PY
    rm -f "$tmp"
done
