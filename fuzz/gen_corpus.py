#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from the repository's vectors.

Usage (from the repository root or anywhere):

    python3 fuzz/gen_corpus.py [--vectors PATH]

PATH defaults to the repository's own vectors/ directory: the public and
hand-checked vectors, and the cases of the repository's hand-built captures
(vectors/captures/*.cases.jsonl). Nothing is read from outside the
repository. A capture case's seed is named after its cases file (the file
name without ".cases.jsonl") and packet number, e.g.
lib-rocev2-ud.pcap.v6pad_3.bin from vectors/captures/rocev2-ud.pcap.v6pad.cases.jsonl.
The outputs are checked in; re-running the
script reproduces them byte for byte (it clears the three corpus directories
first). Standard library only.

The byte layouts are those documented in core/src/fuzzing/mod.rs. Besides
the seeds it writes fuzz/seeds-manifest.tsv: for every ah_from_wc_diff seed
taken from a vector, the outcome the vector expects ("ok", an errno name, or
EFAULT for a NULL-area fault) for the profile the vector belongs to, under a
"# from vectors/..." comment line naming the file the rows below it came from.
core/tests/corpus_replay.rs checks that the core reproduces it, which proves
that this encoder and the Rust decoder agree.
"""

import argparse
import json
import os
import re
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

LINK = {"infiniband": 0, "ethernet": 1, "opa": 2, "unspecified": 0}
GID_TYPE = {"ib": 0, "roce_v1": 1, "roce_v2": 2}


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def area_of(case):
    g = case.get("grh")
    return bytes.fromhex(g) if g is not None else None


def wc_bytes(wc):
    return struct.pack(
        "<IIBBHB",
        wc["wc_flags"] & 0xFFFFFFFF,
        wc.get("slid", 0) & 0xFFFFFFFF,
        wc.get("sl", 0),
        wc.get("dlid_path_bits", 0),
        wc.get("vlan_id", 0),
        wc.get("network_hdr_type", 0),
    )


def entry_bytes(e):
    ty = GID_TYPE[e["type"]]
    vlan = e.get("vlan")
    if vlan is not None:
        ty |= 0x80
    return struct.pack("<HBHB", e["index"], ty, vlan or 0, 0) + bytes.fromhex(e["gid"])


def ah_case(case):
    """fuzz_ah_from_wc_diff layout."""
    port = case["port"]
    area = area_of(case)
    big = port["gid_tbl_len"] > 16 or any(e["index"] >= 16 for e in port["gids"])
    ctl = LINK[port["link_layer"]] | (4 if area is None else 0) | (8 if big else 0)
    out = struct.pack("<BBBI", ctl, port["num"], port["num"], port["gid_tbl_len"])
    out += area if area is not None else bytes(40)
    out += wc_bytes(case["wc"])
    out += bytes(21)  # evidence payload (unused: evidence none)
    for e in port["gids"]:
        out += entry_bytes(e)
    return out


def expected(case):
    ex = case["expect"]
    if ex.get("signal"):
        return "EFAULT"
    if ex["ret"] == 0:
        return "ok"
    return ex["errno"]


def grh_area_case(area, link, wc, ctl_extra=0, nt=0, stamp=bytes(20)):
    """fuzz_grh_area layout (reprs to emit left to the zero padding)."""
    ctl = (LINK[link] << 4) | ctl_extra
    return area + bytes([ctl, nt]) + stamp + wc_bytes(wc)


def gid_table_case(port, local):
    """fuzz_gid_table layout: store the vector's table, look its local GID up."""
    n = port["gid_tbl_len"]
    sel = 3 if n > 16 or any(e["index"] >= 16 for e in port["gids"]) else 2
    if n > 0xFFFF:
        sel |= 4
        out = struct.pack("<BBBI", sel, port["num"], LINK[port["link_layer"]], n)
    else:
        out = struct.pack("<BBBH", sel, port["num"], LINK[port["link_layer"]], n)
    for e in port["gids"]:
        ty = GID_TYPE[e["type"]]
        vlan = e.get("vlan")
        if vlan is not None:
            ty |= 0x80
        out += struct.pack("<BHBHB", 0, 0x8000 | e["index"], ty, vlan or 0, 0xFF) + bytes.fromhex(e["gid"])
    for k in range(min(len(port["gids"]), 8)):
        out += struct.pack("<BBHB", 4, k, 0xFFFF, 0)
    if local is not None:
        out += bytes([5]) + local
    return out


def pick(cases, limit):
    """The first case of each family (name without its number), up to limit."""
    seen, out = set(), []
    for c in cases:
        fam = "-".join(re.sub(r"^\d+-", "", c["name"]).split("-")[:3])
        if fam not in seen:
            seen.add(fam)
            out.append(c)
    return out[:limit]


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", default=os.path.join(REPO, "vectors"))
    args = ap.parse_args()
    vec = args.vectors

    def sourced(rel, cases):
        for c in cases:
            c["source"] = "vectors/" + rel
        return cases

    lib = sourced("libibverbs-v44-public.jsonl", pick(load(os.path.join(vec, "libibverbs-v44-public.jsonl")), 60))
    lib += sourced("handcheck.jsonl", load(os.path.join(vec, "handcheck.jsonl")))
    for cap in sorted(os.listdir(os.path.join(vec, "captures"))):
        if cap.endswith(".cases.jsonl"):
            stem = cap[: -len(".cases.jsonl")]
            cases = sourced("captures/" + cap, load(os.path.join(vec, "captures", cap)))
            for c in cases:
                # "rocev2-ud.pcap#3" in both rocev2-ud.pcap{,.v6pad}.cases.jsonl:
                # name the seed after the cases file so that neither overwrites the other.
                c["name"] = stem + "#" + c["name"].rsplit("#", 1)[1]
            lib += cases
    ker = sourced("kernel-public.jsonl", pick(load(os.path.join(vec, "kernel-public.jsonl")), 60))
    ker += sourced("kernel-handcheck.jsonl", load(os.path.join(vec, "kernel-handcheck.jsonl")))

    corpus = os.path.join(HERE, "corpus")
    files = {t: {} for t in ("grh_area", "ah_from_wc_diff", "gid_table")}
    manifest = []
    for profile, cases in (("lib", lib), ("kernel", ker)):
        for c in cases:
            name = f"{profile}-{safe(c['name'])}.bin"
            files["ah_from_wc_diff"][name] = ah_case(c)
            manifest.append((c["source"], (name, profile, expected(c))))
            area = area_of(c)
            if area is not None:
                files["grh_area"][name] = grh_area_case(area, c["port"]["link_layer"], c["wc"])
    # The tables: a handful from each profile, with a look-up of the local GID.
    for profile, cases in (("lib", lib[:25]), ("kernel", ker[:25])):
        for c in cases:
            area = area_of(c)
            local = area[24:40] if area is not None else None
            files["gid_table"][f"{profile}-{safe(c['name'])}.bin"] = gid_table_case(c["port"], local)

    # Hand-made seeds (named like smoltcp's fuzz/corpus/packet_parser/*.bin).
    v4 = bytes.fromhex("450000 3c00004000 4011b742 c0a80114 c0a8010a".replace(" ", ""))
    ib_grh = bytes.fromhex(
        "60000000 00401b40 fe800000000000000002c90300112233 fe800000000000000002c90300445566".replace(" ", "")
    )
    v6 = bytes.fromhex(
        "628abcde 0064113f 20010db8000000000000000000000020 20010db8000000000000000000000010".replace(" ", "")
    )
    wc_grh = {"wc_flags": 1}
    g = files["grh_area"]
    g["ib_grh.bin"] = grh_area_case(ib_grh, "infiniband", wc_grh)
    g["rocev1_grh.bin"] = grh_area_case(ib_grh, "ethernet", wc_grh)
    g["rocev2_ipv6.bin"] = grh_area_case(v6, "ethernet", wc_grh)
    g["rocev2_ipv4.bin"] = grh_area_case(bytes(20) + v4, "ethernet", wc_grh)
    bad = bytearray(bytes(20) + v4)
    bad[31] ^= 1
    g["rocev2_ipv4_bad_csum.bin"] = grh_area_case(bytes(bad), "ethernet", wc_grh)
    # SEMANTICS §2.3 worked example: valid header, libibverbs' single fold says no.
    fold = bytes.fromhex("4500003cb842400040 11feffc0a80114c0a8010a".replace(" ", ""))
    g["rocev2_ipv4_fold_overflow_stale6.bin"] = grh_area_case(b"\x60" + bytes(19) + fold, "ethernet", wc_grh)
    # Stamped area (control: evidence kind 2 = default stamp, bit 2 = stamp it).
    g["rocev2_ipv4_stamped.bin"] = grh_area_case(bytes(20) + v4, "ethernet", wc_grh, ctl_extra=2 | 4)
    # Driver-reported network type IPv4 (kind 1, nt 2) on a stale IPv6 prefix.
    stale = bytearray(ib_grh[:20]) + v4
    stale[6] = 17
    g["rocev2_ipv4_stale6_nettype.bin"] = grh_area_case(bytes(stale), "ethernet", wc_grh, ctl_extra=1, nt=2)
    # Kernel-side flags: VLAN 100 and a network-type flag.
    g["rocev2_ipv4_vlan_nht.bin"] = grh_area_case(
        bytes(20) + v4, "ethernet", {"wc_flags": 1 | 32 | 64, "vlan_id": 100, "network_hdr_type": 2}
    )

    t = files["gid_table"]
    # Set/clear churn on a 4-slot table with one GID everywhere, then clear all.
    gid = bytes.fromhex("00000000000000000000ffffc0a8010a")
    ops = b""
    for i in range(4):
        ops += struct.pack("<BHBHB", 0, 0x8000 | i, i % 3, 0, 0xFF) + gid
    ops += struct.pack("<BH", 3, 0x8000 | 1) + struct.pack("<BBHB", 4, 0, 0xFFFF, 0)
    ops += struct.pack("<BH", 3, 0x8000 | 0) + struct.pack("<BBHB", 4, 0, 0xFFFF, 0)
    ops += bytes([6]) + struct.pack("<BBHB", 4, 0, 0xFFFF, 0) + bytes([7]) + bytes(range(8))
    t["churn_4slots.bin"] = struct.pack("<BBBH", 1, 1, 1, 4) + ops
    # A table longer than its capacity (16 slots of 65536): zero-GID rule at index N.
    full = b"".join(
        struct.pack("<BHBHB", 0, 0x8000 | i, 1, 0, 0xFF) + bytes(15) + bytes([i + 1]) for i in range(16)
    )
    t["over_capacity_16of65536.bin"] = struct.pack("<BBBI", 2 | 4, 1, 1, 65536) + full + bytes([5]) + bytes(16)

    for target, fs in files.items():
        d = os.path.join(corpus, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in sorted(fs.items()):
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
    with open(os.path.join(HERE, "seeds-manifest.tsv"), "w") as f:
        f.write("# file in corpus/ah_from_wc_diff\tprofile\texpected outcome (written by gen_corpus.py)\n")
        last = None
        for source, row in manifest:
            if source != last:
                f.write(f"# from {source}\n")
                last = source
            f.write("\t".join(row) + "\n")
    for target, fs in files.items():
        print(f"{target}: {len(fs)} seeds, {sum(map(len, fs.values()))} bytes")


if __name__ == "__main__":
    main()
