//! The preload over the oracle: `oracle/ibv-oracle` (the real
//! libibverbs `ibv_init_ah_from_wc` on a fake context) runs every shared
//! libibverbs vector without and with `LD_PRELOAD=libudah_preload.so`, and
//! the two give the identical `ret`, `ah_attr`, `signal` and (when `ret` is
//! -1) `errno` on every call.
//!
//! Every case is fed twice in a row. The oracle's context is one fake
//! context whose GID table changes from case to case without any event, the
//! worst case for a snapshot: the first call of a case meets the previous
//! case's snapshot (stale: the validation query or the forwarded miss must
//! catch it), the second meets its own table (served by udah). The
//! preload's counters must show that udah served a large share of the
//! calls, so that the comparison cannot pass by forwarding everything.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

fn oracle() -> Option<std::path::PathBuf> {
    // The repository's copy of the oracle; ../shared's where an older tree lacks it.
    let Some(src) =
        ["oracle", "../shared/oracle"].iter().map(|d| repo().join(d)).find(|d| d.join("Makefile").is_file())
    else {
        assert!(!in_ci(), "CI=true and neither oracle/ nor ../shared/oracle is there");
        eprintln!("SKIP: no oracle/ (nor ../shared/oracle)");
        return None;
    };
    let out = profile_dir().join("oracle");
    run(Command::new("make").arg("-s").arg("-C").arg(&src).arg(format!("OUT={}", out.display())));
    Some(out.join("ibv-oracle"))
}

fn run_oracle(bin: &std::path::Path, input: &std::path::Path, env: &[(&str, String)]) -> (Vec<Value>, String) {
    let mut cmd = Command::new(bin);
    cmd.stdin(std::fs::File::open(input).expect("input")).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // The oracle exits 1 only for undecodable lines, which the vectors have none of.
    let out = run(&mut cmd);
    let lines = String::from_utf8(out.stdout).expect("UTF-8");
    let results = lines.lines().map(|l| serde_json::from_str(l).expect("oracle JSON")).collect();
    (results, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `key=value` of the preload's stats line.
fn stat(stderr: &str, key: &str) -> u64 {
    let line = stderr.lines().find(|l| l.starts_with("udah-preload:")).unwrap_or_else(|| panic!("no stats: {stderr}"));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn oracle_gives_identical_results_with_and_without_the_preload() {
    let Some(files) = libibverbs_vector_files() else { return };
    let Some(bin) = oracle() else { return };
    let preload = c_libraries().join("libudah_preload.so");
    assert!(preload.is_file(), "{preload:?} not built");

    let dir = scratch("oracle");
    let input = dir.join("cases.jsonl");
    let mut text = String::new();
    let mut n = 0;
    for f in &files {
        for line in std::fs::read_to_string(f).expect("vectors").lines().filter(|l| !l.trim().is_empty()) {
            text += &format!("{line}\n{line}\n");
            n += 2;
        }
    }
    std::fs::write(&input, text).expect("cases");

    let (real, _) = run_oracle(&bin, &input, &[]);
    let pre = [("LD_PRELOAD", preload.display().to_string()), ("UDAH_PRELOAD_STATS", "1".to_owned())];
    let (with, stderr) = run_oracle(&bin, &input, &pre);
    assert_eq!((real.len(), with.len()), (n, n));

    let mut mismatches = Vec::new();
    for (a, b) in real.iter().zip(&with) {
        let same = a["ret"] == b["ret"]
            && a["ah_attr"] == b["ah_attr"]
            && a["signal"] == b["signal"]
            && (a["ret"] == 0 || a["errno"] == b["errno"]);
        if !same {
            mismatches.push(format!("{}\n  real {a}\n  udah {b}", a["name"]));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {n} calls differ:\n{}",
        mismatches.len(),
        mismatches[..5.min(mismatches.len())].join("\n")
    );

    // udah, not the real library, answered most calls; the rest are
    // accounted for.
    let calls = stat(&stderr, "init_ah_from_wc");
    let served = stat(&stderr, "served");
    eprintln!("{}", stderr.lines().find(|l| l.starts_with("udah-preload:")).unwrap_or_default());
    assert!(calls > 0 && served * 2 > calls, "udah served {served} of {calls}: {stderr}");
    assert!(stat(&stderr, "gid_validations") > 500, "{stderr}");
    let forwarded: u64 = ["not_found", "zero_gid", "validation", "snapshot", "null_argument", "internal"]
        .iter()
        .map(|k| stat(&stderr, &format!("fallback_{k}")))
        .sum();
    assert_eq!(served + forwarded, calls, "{stderr}");
    assert_eq!(stat(&stderr, "fallback_internal"), 0, "{stderr}");

    // UDAH_PRELOAD=off: everything goes to the real library.
    let off = [pre[0].clone(), pre[1].clone(), ("UDAH_PRELOAD", "off".to_owned())];
    let (same, stderr) = run_oracle(&bin, &input, &off);
    assert_eq!(same.len(), n);
    assert_eq!(stat(&stderr, "served"), 0, "{stderr}");
    assert_eq!(stat(&stderr, "fallback_disabled"), stat(&stderr, "init_ah_from_wc"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
