//! `udah demo`'s arguments: every bound is checked up front with a clear
//! error (exit status 2, nothing on stdout), and contradicting flags are
//! rejected.

use core::time::Duration;
use std::process::{Command, Output};
use std::time::Instant;

fn demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udah"))
        .arg("demo")
        .arg("--no-progress")
        .args(args)
        .output()
        .expect("run udah demo")
}

/// `args` are refused before anything runs, with a message containing `want`.
fn refused(args: &[&str], want: &str) {
    let t = Instant::now();
    let o = demo(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
    // Refused up front: no fabric was built, no create waited.
    assert!(t.elapsed() < Duration::from_secs(20), "{args:?} took {:?}", t.elapsed());
}

#[test]
fn messages_zero_and_huge_are_refused() {
    refused(&["--messages", "0"], "--messages 0 is outside 1..=1000000000");
    // Was a 2 EiB allocation and an abort (rc 134).
    refused(&["--messages", "18446744073709551615"], "--messages 18446744073709551615 is outside 1..=1000000000");
    refused(&["--messages", "1000000001"], "outside 1..=1000000000");
}

#[test]
fn threads_are_bounded() {
    refused(&["--threads", "100000"], "--threads 100000 is outside 1..=256");
    refused(&["--threads", "0"], "--threads 0 is outside 1..=256");
}

#[test]
fn create_latency_is_bounded() {
    refused(
        &["--create-latency-us", "18446744073709551615"],
        "--create-latency-us 18446744073709551615 is above 100000",
    );
    // 1024 peers × 100 ms of creates.
    refused(&["--create-latency-us", "100000", "--peers", "1024"], "s of AH creates, above 10 s");
}

#[test]
fn peers_and_rounds_are_bounded() {
    refused(&["--peers", "0"], "--peers 0 is outside 1..=1000000");
    refused(&["--peers", "1000001", "--create-latency-us", "0"], "--peers 1000001 is outside 1..=1000000");
    // 20 µs per create is 20 s for 10⁶ peers: the message says what fits.
    refused(&["--peers", "1000000", "--create-latency-us", "20"], "at most 10 µs for 1000000 peers");
    // 10⁶ InfiniBand peers, more than one subnet has distinct addresses for.
    refused(&["--peers", "1000000", "--create-latency-us", "0", "--mix", "ib,ib-grh"], "InfiniBand peers");
    refused(&["--rounds", "0"], "--rounds 0 is outside 1..=1024");
    refused(&["--rounds", "5000"], "--rounds 5000 is outside 1..=1024");
}

#[test]
fn mlx5_evidence_with_irdma_quirks_is_refused() {
    refused(&["--evidence", "mlx5", "--quirks", "irdma"], "--evidence mlx5 reads mlx5's packet-type bits");
}

#[test]
fn the_bounds_themselves_run() {
    // The largest thread count and the smallest message count are accepted.
    let o = demo(&["--threads", "256", "--messages", "1", "--json", "--create-latency-us", "0", "--peers", "8"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
    assert_eq!(v["threads"].as_u64(), Some(256), "{v}");
    // 8 peers cannot give 256 workers a peer each: all share the corpus.
    assert_eq!(v["steered"].as_bool(), Some(false), "{v}");
    assert!(v["messages"].as_u64().is_some_and(|m| m >= 1), "{v}");
    // mlx5 evidence adds the mlx5 bits to the default (realistic) quirks.
    let o = demo(&["--evidence", "mlx5", "--messages", "1000", "--json", "--create-latency-us", "0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn readme_lists_every_demo_flag() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("README.md");
    let help = Command::new(env!("CARGO_BIN_EXE_udah")).args(["demo", "--help"]).output().expect("udah demo --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let flags: Vec<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2 && *w != "--help")
        .map(|w| w.trim_end_matches(','))
        .collect();
    assert!(flags.len() >= 10, "{help}");
    for f in flags {
        assert!(readme.contains(&format!("`{f}")), "README.md's demo flag list lacks `{f}`");
    }
}

#[test]
fn the_defaults_run_for_peer_counts_across_the_table_sizes() {
    // Without --create-latency-us every peer count runs: 20 µs a create up
    // to 10⁵ peers (the latency for more is a unit test of the demo). 1, 64,
    // the last count of the 2¹⁴-slot table and the first of the 2¹⁶-slot one.
    for (peers, slots) in [(1u64, 1u64 << 14), (64, 1 << 14), (8_192, 1 << 14), (8_193, 1 << 16)] {
        let p = peers.to_string();
        let o = demo(&["--peers", &p, "--rounds", "2", "--messages", "5000", "--json"]);
        assert!(o.status.success(), "{peers}: {}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
        assert_eq!(v["create_latency_us"].as_u64(), Some(20), "{v}");
        assert_eq!(v["create_latency_default"].as_bool(), Some(true), "{v}");
        assert_eq!(v["table_capacity"].as_u64(), Some(slots), "{v}");
        assert_eq!(v["creates"].as_u64(), Some(peers), "{v}");
        assert_eq!(v["e2e_requests"].as_u64(), Some(2 * peers), "{v}");
        // Every peer's completions are in the corpus, and the hot path
        // resolved what was asked without allocating.
        assert_eq!(v["corpus"].as_u64(), Some(2 * peers), "{v}");
        assert_eq!(v["messages"].as_u64(), Some(5000), "{v}");
        assert_eq!(v["hot_path_allocations"].as_u64(), Some(0), "{v}");
        assert!(v["max_rss_bytes"].as_u64().is_some_and(|b| b > 0), "{v}");
    }
}

#[test]
fn the_create_latency_is_printed() {
    let o = demo(&["--peers", "64", "--messages", "1000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("20 µs (default for 64 peers"), "{text}");
    assert!(text.contains("maximum resident set"), "{text}");
    // Given, it is used as is and said so.
    let o = demo(&["--peers", "64", "--messages", "1000", "--create-latency-us", "3", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
    assert_eq!(v["create_latency_us"].as_u64(), Some(3), "{v}");
    assert_eq!(v["create_latency_default"].as_bool(), Some(false), "{v}");
}
