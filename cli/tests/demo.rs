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
