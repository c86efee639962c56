//! Reading criterion's results back, for the summary tables the benches
//! print at the end of a run (ratios against the oracle, repeating vs
//! random order, branchy vs branch-free).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where the benches tell criterion to write: `$CARGO_TARGET_DIR/criterion`,
/// else `<workspace>/target/criterion`.
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::oracle::workspace_dir().join("target"))
        .join("criterion")
}

/// The median (ns per iteration) criterion estimated for `group/function/param`
/// in this run: `None` if the benchmark did not run after `since` (filtered
/// out, or in test mode).
pub fn median_ns(dir: &Path, id: &str, since: SystemTime) -> Option<f64> {
    let file = dir.join(id).join("new/estimates.json");
    let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok()?;
    if modified < since {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let rest = text.get(text.find("\"median\"")?..)?;
    let at = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let rest = rest.get(at..)?;
    let end = rest.find([',', '}'])?;
    rest.get(..end)?.trim().parse().ok()
}

fn array(text: &str, key: &str) -> Option<Vec<f64>> {
    let at = text.find(&format!("\"{key}\":["))? + key.len() + 4;
    let rest = text.get(at..)?;
    let end = rest.find(']')?;
    rest.get(..end)?.split(',').map(|v| v.trim().parse().ok()).collect()
}

/// The fastest of criterion's samples (ns per iteration) for `id` in this
/// run: on a shared machine, the figure least disturbed by other processes.
pub fn fastest_ns(dir: &Path, id: &str, since: SystemTime) -> Option<f64> {
    let file = dir.join(id).join("new/sample.json");
    let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok()?;
    if modified < since {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let iters = array(&text, "iters")?;
    let times = array(&text, "times")?;
    iters.iter().zip(&times).filter(|(i, _)| **i > 0.0).map(|(i, t)| t / i).reduce(f64::min)
}

/// `x` with one decimal, or `-`.
pub fn fmt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}
