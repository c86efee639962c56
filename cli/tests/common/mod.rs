//! Helpers shared by the integration tests: the repository's vectors (always
//! required), where the optional `shared/` is, and the skip-or-fail rule for
//! a missing system prerequisite.

#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// The workspace root (the parent of `cli/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Whether we run in CI (`CI` set to anything but empty/`false`/`0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Reports a missing prerequisite: a test failure in CI, a skip message
/// otherwise. Returns normally only outside CI.
pub fn skip_or_fail(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: {why} (CI is set, so this is a failure, not a skip)");
    }
    // Straight to the process's stderr, past the test harness's capture, so
    // that the skip is visible in a normal `cargo test` run.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// `$UDAH_SHARED`, or `<workspace root>/../shared`, if it is a directory.
pub fn shared_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("UDAH_SHARED") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("..").join("shared"),
    };
    if dir.join("vectors").is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "shared reference directory not found at {} (set UDAH_SHARED to the folder holding vectors/, oracle/, spec/)",
            dir.display()
        ))
    }
}

/// The optional shared directory, which can only add inputs to what the
/// repository holds: `None` (with a note) when it is absent, unless
/// `UDAH_SHARED` names it explicitly, in which case its absence fails.
pub fn shared_extra(test: &str) -> Option<PathBuf> {
    match shared_dir() {
        Ok(d) => Some(d),
        Err(why) => {
            assert!(std::env::var_os("UDAH_SHARED").is_none(), "{test}: UDAH_SHARED is set but {why}");
            let _ = writeln!(
                std::io::stderr(),
                "note: {test}: no extra inputs ({why}); the repository's own are checked by the other tests"
            );
            None
        }
    }
}

/// `<workspace root>/vectors`: the test vectors the repository holds.
pub fn repo_vectors() -> PathBuf {
    workspace_root().join("vectors")
}

/// The files in `dir` ending with `suffix`, at least `min` of them (else a
/// failure: the repository's inputs are never optional).
pub fn required_files(dir: &Path, suffix: &str, min: usize) -> Vec<PathBuf> {
    let v = files_ending(dir, suffix);
    assert!(v.len() >= min, "expected at least {min} *{suffix} files in {}, found {}", dir.display(), v.len());
    v
}

/// The files in `dir` whose names end with `suffix`, sorted.
pub fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    v.sort();
    v
}
