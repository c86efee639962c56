//! `udah demo` end to end: small runs of the real binary under each profile,
//! evidence and quirk set, checked through its JSON summary.

use std::process::Command;

fn demo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_udah"))
        .args(["demo", "--json", "--messages", "20000", "--create-latency-us", "0"])
        .args(args)
        .output()
        .expect("run udah demo");
    assert!(out.status.success(), "udah demo {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON summary")
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn kernel_profile_answers_every_request_at_the_right_qp() {
    for quirks in ["realistic", "zero", "random", "irdma"] {
        let v = demo(&["--profile", "kernel", "--quirks", quirks]);
        let sent = n(&v, "e2e_requests");
        assert!(sent > 0);
        assert_eq!(n(&v, "e2e_answered"), sent, "{quirks}: {v}");
        assert_eq!(n(&v, "e2e_replies"), sent, "{quirks}: {v}");
        assert_eq!(n(&v, "e2e_misdelivered"), 0);
        assert_eq!(n(&v, "hot_path_allocations"), 0);
        assert_eq!(n(&v, "messages"), 20000);
        assert_eq!(n(&v, "refused"), 0, "{quirks}: {v}");
    }
}

#[test]
fn libibverbs_profile_loses_exactly_the_vlan_replies() {
    for (evidence, quirks) in [("none", "zero"), ("stamp", "realistic"), ("mlx5", "mlx5"), ("stamp", "irdma")] {
        let v = demo(&["--profile", "libibverbs", "--evidence", evidence, "--quirks", quirks, "--peers", "60"]);
        let sent = n(&v, "e2e_requests");
        assert_eq!(n(&v, "e2e_answered"), sent, "{evidence}/{quirks}: {v}");
        assert_eq!(n(&v, "e2e_misdelivered"), 0);
        // 60 peers, six families, one on a VLAN: its replies leave untagged (Q11).
        assert_eq!(n(&v, "e2e_replies") + n(&v, "e2e_dropped"), sent);
        assert_eq!(n(&v, "e2e_dropped"), sent / 6, "{evidence}/{quirks}: {v}");
        assert_eq!(n(&v, "hot_path_allocations"), 0);
    }
}

#[test]
fn two_threads_share_the_table() {
    for path in ["session", "shared"] {
        let v = demo(&["--threads", "2", "--mix", "rocev2-ipv4,rocev2-ipv6", "--peers", "32", "--table-path", path]);
        assert_eq!(v["table_path"], path);
        // Each worker polls its own peers' completions.
        assert_eq!(v["steered"], true, "{v}");
        assert_eq!(n(&v, "messages"), 20000);
        assert_eq!(n(&v, "hot_path_allocations"), 0);
        assert_eq!(n(&v, "e2e_misdelivered"), 0);
        // Warm table: every AH was created once, during the end-to-end phase.
        assert!(n(&v, "creates") <= n(&v, "e2e_requests"));
        // Every look-up counted once, the sessions' lease hits included
        // (they are published when the sessions end).
        let lookups = n(&v, "messages") + 2 * n(&v, "e2e_requests");
        assert_eq!(n(&v, "hits") + n(&v, "misses"), lookups, "{path}: {v}");
    }
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_udah")).args(["demo", "--mix", "token-ring"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown fabric family"));
    let out = Command::new(env!("CARGO_BIN_EXE_udah")).args(["demo", "--peers", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Past the old 1,024-peer bound: 20,000 peers (a third of them InfiniBand,
/// past the 12,286 base LIDs of one subnet) get a 2¹⁶-slot table, one entry
/// each, no eviction, and every reply reaches its sender.
#[test]
fn twenty_thousand_peers_fit_a_table_sized_for_them() {
    let peers = 20_000u64;
    let v = demo(&["--profile", "kernel", "--peers", "20000", "--rounds", "1", "--table-path", "shared"]);
    let cap = n(&v, "table_capacity");
    assert_eq!(cap, 1 << 16, "{v}");
    assert_eq!(n(&v, "e2e_requests"), peers);
    assert_eq!(n(&v, "e2e_replies"), peers, "{v}");
    assert_eq!(n(&v, "e2e_misdelivered"), 0);
    // Distinct addresses: one AH per peer, none evicted.
    assert_eq!(n(&v, "creates"), peers, "{v}");
    assert_eq!(n(&v, "table_entries"), peers, "{v}");
    assert_eq!(n(&v, "evictions"), 0, "{v}");
    assert_eq!(n(&v, "live_ahs"), peers);
    assert_eq!(f(&v, "load_factor"), peers as f64 / cap as f64);
    // 64 B a slot, plus the table's counters.
    let bytes = n(&v, "table_bytes");
    assert!(bytes >= 64 * cap && bytes < 64 * cap + 4096, "{bytes} bytes for {cap} slots");
    assert_eq!(n(&v, "hot_path_allocations"), 0);
}

#[test]
fn the_summary_prints_capacity_load_factor_evictions_and_memory() {
    let out = Command::new(env!("CARGO_BIN_EXE_udah"))
        .args(["demo", "--no-progress", "--messages", "2000", "--create-latency-us", "0", "--peers", "100"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |label: &str| {
        text.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in {text}"))
    };
    assert!(row("AH table: creates / evictions / live").ends_with("100 / 0 / 100"), "{text}");
    // 100 of 16384 slots, 64 B each.
    let r = row("AH table: capacity / load factor / memory");
    assert!(r.contains("16384 slots / 0.0061 (100 entries) / 1.0 MiB"), "{r}");
    assert!(row("AH table: hash seed").contains("0x"), "{text}");
}

#[test]
fn the_table_seed_follows_the_seed() {
    let seed = |s: &str| n(&demo(&["--peers", "12", "--seed", s]), "table_seed");
    assert_eq!(seed("7"), seed("7"));
    assert_ne!(seed("7"), seed("8"));
}
