//! Every shared vector (both profiles), the hand checks, the edge-case
//! document (both profiles) and the capture cases must pass through the core
//! with no mismatch.

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
    let dir = common::workspace_root().join("vectors");
    assert_eq!(assert_all_pass(&dir.join("handcheck.jsonl"), None), (19, 0));
    assert_eq!(assert_all_pass(&dir.join("kernel-handcheck.jsonl"), None), (0, 17));
}

#[test]
fn shared_vector_files() {
    let Some(shared) = common::shared_or_skip("shared_vector_files") else { return };
    let files = common::files_ending(&shared.join("vectors"), ".jsonl");
    assert!(files.len() >= 3, "expected the libibverbs and kernel vector files in {}", shared.display());
    let (mut ibv, mut kernel) = (0, 0);
    for f in &files {
        let (i, k) = assert_all_pass(f, None);
        ibv += i;
        kernel += k;
    }
    assert!(ibv >= 2000 && kernel >= 1500, "libibverbs {ibv}, kernel {kernel} cases");
}

#[test]
fn shared_oracle_hand_check() {
    let Some(shared) = common::shared_or_skip("shared_oracle_hand_check") else { return };
    assert_eq!(assert_all_pass(&shared.join("oracle/handcheck.jsonl"), None), (19, 0));
}

#[test]
fn shared_edge_cases_both_profiles() {
    let Some(shared) = common::shared_or_skip("shared_edge_cases_both_profiles") else { return };
    let path = shared.join("spec/ah_from_wc_edge_cases.json");
    let (ibv, kernel) = assert_all_pass(&path, None);
    assert!(ibv > 0 && kernel > 0, "libibverbs {ibv}, kernel {kernel}");
    assert_eq!(assert_all_pass(&path, Some(Profile::Libibverbs)), (ibv, 0));
    assert_eq!(assert_all_pass(&path, Some(Profile::Kernel)), (0, kernel));
}

#[test]
fn shared_capture_cases() {
    let Some(shared) = common::shared_or_skip("shared_capture_cases") else { return };
    let files = common::files_ending(&shared.join("data/captures"), ".cases.jsonl");
    assert!(!files.is_empty(), "no *.cases.jsonl in {}/data/captures", shared.display());
    for f in &files {
        assert_all_pass(f, None);
    }
}
