//! Helpers shared by the integration tests: where `shared/` is, and the
//! skip-or-fail rule when it is missing.

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

/// The shared directory, or `None` after [`skip_or_fail`].
pub fn shared_or_skip(test: &str) -> Option<PathBuf> {
    match shared_dir() {
        Ok(d) => Some(d),
        Err(why) => {
            skip_or_fail(test, &why);
            None
        }
    }
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
