//! Every vector the repository holds (`vectors/`: the public libibverbs and
//! kernel sets, the hand checks, the edge-case document under both profiles,
//! the hand-built captures' cases) must pass through the core with no
//! mismatch; `../shared`, when present, adds its files on top.

mod common;

use std::path::Path;

use udah_cli::vectors::{self, Profile};

/// Runs every case of `path` (under `profile` if given); returns the number
/// of cases per profile and panics with every mismatch if there is one.
fn assert_all_pass(path: &Path, profile: Option<Profile>) -> (usize, usize) {
    let cases = vectors::load_file(path, profile).unwrap_or_else(|e| panic!("{e}"));
    assert!(!cases.is_empty(), "{}: no cases", path.display());
    let mut problems = Vec::new();
    let (mut ibv, mut kernel) = (0, 0);
    for lc in &cases {
        match lc.case.profile() {
            Profile::Libibverbs => ibv += 1,
            Profile::Kernel => kernel += 1,
        }
        match lc.case.check() {
            Ok(m) => problems.extend(m.iter().map(ToString::to_string)),
            Err(e) => problems.push(format!("ERROR line {} {}: {e}", lc.line, lc.case.name())),
        }
    }
    let shown: Vec<&String> = problems.iter().take(50).collect();
    assert!(
        problems.is_empty(),
        "{}: {} problems in {} cases, first ones:\n{}",
        path.display(),
        problems.len(),
        cases.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
    (ibv, kernel)
}

#[test]
fn repo_hand_check_vectors() {
    let dir = common::repo_vectors();
    assert_eq!(assert_all_pass(&dir.join("handcheck.jsonl"), None), (19, 0));
    assert_eq!(assert_all_pass(&dir.join("kernel-handcheck.jsonl"), None), (0, 17));
}

#[test]
fn repo_public_vector_sets() {
    let dir = common::repo_vectors();
    // The counts are the meta files' (`*.meta.json`, written by the generators).
    for (file, meta, want) in [
        ("libibverbs-v44-public.jsonl", "libibverbs-v44-public.meta.json", (2000, 0)),
        ("kernel-public.jsonl", "kernel-public.meta.json", (0, 1500)),
    ] {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(meta)).unwrap()).expect("meta JSON");
        assert_eq!(m["count"].as_u64(), Some((want.0 + want.1) as u64), "{meta}");
        assert_eq!(assert_all_pass(&dir.join(file), None), want, "{file}");
    }
}

#[test]
fn every_repo_vector_file_passes() {
    // Whatever else is added under vectors/ is checked too.
    let dir = common::repo_vectors();
    let files = common::required_files(&dir, ".jsonl", 4);
    let (mut ibv, mut kernel) = (0, 0);
    for f in &files {
        let (i, k) = assert_all_pass(f, None);
        ibv += i;
        kernel += k;
    }
    assert!(ibv >= 2019 && kernel >= 1517, "libibverbs {ibv}, kernel {kernel} cases");
}

#[test]
fn repo_edge_cases_both_profiles() {
    let path = common::repo_vectors().join("ah_from_wc_edge_cases.json");
    let (ibv, kernel) = assert_all_pass(&path, None);
    assert!(ibv > 0 && kernel > 0, "libibverbs {ibv}, kernel {kernel}");
    assert_eq!(assert_all_pass(&path, Some(Profile::Libibverbs)), (ibv, 0));
    assert_eq!(assert_all_pass(&path, Some(Profile::Kernel)), (0, kernel));
}

#[test]
fn repo_capture_cases() {
    let files = common::required_files(&common::repo_vectors().join("captures"), ".cases.jsonl", 2);
    for f in &files {
        assert_all_pass(f, None);
    }
}

#[test]
fn shared_vector_files() {
    let Some(shared) = common::shared_extra("shared_vector_files") else { return };
    for f in &common::files_ending(&shared.join("vectors"), ".jsonl") {
        assert_all_pass(f, None);
    }
    let hand = shared.join("oracle/handcheck.jsonl");
    if hand.is_file() {
        assert_all_pass(&hand, None);
    }
    let edge = shared.join("spec/ah_from_wc_edge_cases.json");
    if edge.is_file() {
        assert_all_pass(&edge, Some(Profile::Libibverbs));
        assert_all_pass(&edge, Some(Profile::Kernel));
    }
}

#[test]
fn shared_capture_cases() {
    let Some(shared) = common::shared_extra("shared_capture_cases") else { return };
    for f in &common::files_ending(&shared.join("data/captures"), ".cases.jsonl") {
        assert_all_pass(f, None);
    }
}
