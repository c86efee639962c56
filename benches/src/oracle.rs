//! The real-libibverbs oracle (the repository's `oracle/ibv-oracle`) as a timing
//! anchor: build it if needed, feed it cases, read its `--bench` median.
//!
//! The oracle calls the real `ibv_init_ah_from_wc` of libibverbs 44 against a
//! fake GID source that costs about 28 ns per query (no system call), so the
//! ratio it gives is a lower bound of what udah saves on real hardware
//! (`oracle/README.md`, "Timing anchor").

use core::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use udah_core::GidType;

use crate::{Case, Slot};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The shared reference folder: `$UDAH_SHARED`, else `<workspace>/../shared`.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("UDAH_SHARED").map(PathBuf::from).unwrap_or_else(|| workspace_dir().join("../shared"));
    dir.is_dir().then_some(dir)
}

/// The public libibverbs corpus, if the shared folder is there.
pub fn public_corpus_path() -> Option<PathBuf> {
    let p = shared_dir()?.join("vectors/libibverbs-v44-public.jsonl");
    p.is_file().then_some(p)
}

/// The oracle binary, `<workspace>/target/oracle/ibv-oracle`, built from the
/// repository's own `oracle/` (`make -C <workspace>/oracle
/// OUT=<workspace>/target/oracle`) when missing: it needs no shared folder.
/// The error says why it could not be had.
pub fn oracle_binary() -> Result<PathBuf, String> {
    let out = workspace_dir().join("target/oracle");
    let bin = out.join("ibv-oracle");
    if bin.is_file() {
        return Ok(bin);
    }
    let res = Command::new("make")
        .arg("-C")
        .arg(workspace_dir().join("oracle"))
        .arg(format!("OUT={}", out.display()))
        .output()
        .map_err(|e| format!("cannot run make: {e}"))?;
    if !res.status.success() || !bin.is_file() {
        return Err(format!(
            "make of the oracle failed (needs gcc, make, libibverbs-dev): {}",
            String::from_utf8_lossy(&res.stderr).trim()
        ));
    }
    Ok(bin)
}

/// What `ibv-oracle --bench` reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OracleBench {
    /// Cases it ran.
    pub cases: usize,
    /// Median over five repetitions of the mean ns per call.
    pub median_ns: f64,
    /// The fastest of the five repetitions (ns per call).
    pub fastest_ns: f64,
    /// Mean GID queries per call.
    pub gid_queries_per_call: f64,
}

fn field(json: &str, key: &str) -> Option<f64> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = json.get(at..)?;
    let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
    rest.get(..end)?.trim().parse().ok()
}

fn reps(json: &str) -> Vec<f64> {
    let Some(at) = json.find("\"ns_per_call_reps\":[") else { return Vec::new() };
    let rest = json.get(at + 20..).unwrap_or("");
    let end = rest.find(']').unwrap_or(0);
    rest.get(..end).unwrap_or("").split(',').filter_map(|v| v.trim().parse().ok()).collect()
}

/// Runs `oracle --bench calls` on `jsonl` (one case per line).
pub fn run_bench(oracle: &Path, jsonl: &str, calls: u64) -> Result<OracleBench, String> {
    let mut child = Command::new(oracle)
        .args(["--bench", &calls.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", oracle.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let input = jsonl.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(|e| format!("oracle: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!("oracle failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(OracleBench {
        cases: field(&text, "cases").ok_or("no `cases` in the oracle's output")? as usize,
        median_ns: field(&text, "median_ns_per_call").ok_or("no median in the oracle's output")?,
        fastest_ns: reps(&text).into_iter().reduce(f64::min).unwrap_or(f64::NAN),
        gid_queries_per_call: field(&text, "gid_queries_per_call").unwrap_or(f64::NAN),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The oracle's input line for a fixture case against a table whose entries
/// are `slots` and whose length is `len` (libibverbs profile; `FORMAT.md`).
pub fn case_line(name: &str, len: usize, slots: &[Slot], case: &Case, link_layer: &str) -> String {
    let mut gids = String::new();
    for (k, s) in slots.iter().enumerate() {
        let ty = match s.entry.gid_type {
            GidType::Ib => "ib",
            GidType::RoceV1 => "roce_v1",
            GidType::RoceV2 => "roce_v2",
        };
        let sep = if k == 0 { "" } else { "," };
        let _ = write!(gids, "{sep}{{\"index\":{},\"gid\":\"{}\",\"type\":\"{ty}\"}}", s.index, hex(&s.entry.gid.0));
    }
    let wc = &case.wc;
    format!(
        "{{\"name\":\"{name}\",\"port\":{{\"num\":{},\"link_layer\":\"{link_layer}\",\"gid_tbl_len\":{len},\"gids\":[{gids}]}},\
         \"wc\":{{\"wc_flags\":{},\"slid\":{},\"sl\":{},\"dlid_path_bits\":{},\"src_qp\":{},\"pkey_index\":{}}},\"grh\":\"{}\"}}\n",
        crate::PORT,
        wc.wc_flags,
        wc.slid,
        wc.sl,
        wc.dlid_path_bits,
        wc.src_qp,
        wc.pkey_index,
        hex(&case.area)
    )
}

/// Calls per repetition for cases whose searches make `queries` GID queries
/// on average: about 50 ms per repetition at the README's 28 ns per query.
pub fn calls_for(queries: f64) -> u64 {
    let ns = 5.0 + 28.0 * queries;
    (5.0e7 / ns).clamp(10_000.0, 2_000_000.0) as u64
}
