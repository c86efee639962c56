//! Codegen audit: the classifier and the header detectors compile to
//! straight-line code (foundation issue, item 4).
//!
//! The test builds this crate's library in release mode with `--emit asm`
//! (in its own target directory below the workspace's, so that it never
//! waits for the `cargo test` that runs it), cuts out the body of every
//! wrapper of `src/asm.rs` and of every function of the same file those
//! bodies call, and fails on
//!
//! * any conditional jump (`j<cc>`, `loop*`) that [`ALLOWED`] does not list
//!   with a reason, and
//! * any call to a function outside the file (its branches would be
//!   invisible here).
//!
//! It also compares each body, normalised (no directives, labels renumbered,
//! symbol hashes removed), with the golden file
//! `benches/asm/x86_64/<symbol>.s`, like zerocopy's `tests/codegen.rs`.
//! `BLESS=1 cargo test -p udah-benches --test codegen` rewrites the goldens.
//! The goldens record the rustc version that produced them; with another
//! compiler the golden comparison is skipped (the jump audit still runs).

#![cfg(target_arch = "x86_64")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use udah_benches::asm::SYMBOLS;

/// Conditional jumps that may appear, per function: (symbol, how many, why).
const ALLOWED: &[(&str, usize, &str)] = &[(
    "udah_asm_detect",
    2,
    "dispatch on the `Evidence` variant: the caller's per-queue configuration, not packet data. \
     With constant evidence (udah_asm_detect_none / _network_type / _stamped) it folds away and \
     those bodies have no conditional jump.",
)];

fn workspace_target_dir() -> PathBuf {
    // <target>/<profile>/deps/codegen-<hash>
    let exe = std::env::current_exe().expect("test executable path");
    exe.ancestors().nth(3).expect("target directory above the test executable").to_path_buf()
}

fn build_asm() -> PathBuf {
    let target = workspace_target_dir().join("udah-codegen");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let status = Command::new(cargo)
        .args(["rustc", "--release", "--lib", "--no-default-features", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .args(["--", "--emit", "asm"])
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("run cargo rustc");
    assert!(status.success(), "cargo rustc --emit asm failed");
    let deps = target.join("release/deps");
    std::fs::read_dir(&deps)
        .expect("release/deps")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("udah_benches-") && name.ends_with(".s")
        })
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("udah_benches-*.s in the codegen target directory")
}

/// Function bodies by symbol: the instructions between the symbol's label
/// and its `.cfi_endproc`, with local labels kept (as `.L…:`).
fn functions(asm: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for raw in asm.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(label) = line.strip_suffix(':') {
            if !label.starts_with(".L") && !label.contains(' ') {
                if let Some((name, body)) = cur.take() {
                    out.insert(name, body);
                }
                cur = Some((label.to_owned(), Vec::new()));
                continue;
            }
            // Local labels: keep the block labels (jump targets) only.
            if label.starts_with(".LBB")
                && let Some((_, body)) = cur.as_mut()
            {
                body.push(format!("{label}:"));
            }
            continue;
        }
        if line == ".cfi_endproc" {
            if let Some((name, body)) = cur.take() {
                out.insert(name, body);
            }
            continue;
        }
        if line.starts_with('.') {
            continue;
        }
        if let Some((_, body)) = cur.as_mut() {
            body.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    if let Some((name, body)) = cur {
        out.insert(name, body);
    }
    out
}

fn is_conditional_jump(ins: &str) -> bool {
    let op = ins.split_whitespace().next().unwrap_or("");
    (op.starts_with('j') && op != "jmp" && op != "jmpq") || op.starts_with("loop")
}

/// The symbol a `call`/`jmp` goes to, if it is a direct one to a global.
fn direct_target(ins: &str) -> Option<&str> {
    let mut it = ins.split_whitespace();
    let op = it.next()?;
    if !matches!(op, "call" | "callq" | "jmp" | "jmpq") {
        return None;
    }
    let t = it.next()?;
    (!t.starts_with(".L") && !t.starts_with('*')).then(|| t.trim_end_matches("@PLT"))
}

/// Labels renumbered in order of appearance, Rust symbol hashes removed.
fn normalise(body: &[String]) -> String {
    let mut labels: BTreeMap<String, usize> = BTreeMap::new();
    for l in body {
        if let Some(label) = l.strip_suffix(':') {
            let n = labels.len();
            labels.entry(label.to_owned()).or_insert(n);
        }
    }
    let mut out = String::new();
    for l in body {
        let mut s = l.clone();
        // Longest labels first, so .LBB1_10 is not rewritten as .LBB1_1 + "0".
        let mut ls: Vec<_> = labels.iter().collect();
        ls.sort_by_key(|(k, _)| core::cmp::Reverse(k.len()));
        for (k, v) in ls {
            s = s.replace(k.as_str(), &format!(".L{v}"));
        }
        if let Some(i) = s.find("17h")
            && s.len() >= i + 20
            && s[i + 3..i + 19].bytes().all(|b| b.is_ascii_hexdigit())
        {
            s.replace_range(i + 3..i + 19, "HASH");
        }
        if !s.ends_with(':') {
            out.push('\t');
        }
        out.push_str(&s);
        out.push('\n');
    }
    out
}

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc).arg("--version").output().expect("rustc --version");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn straight_line_and_golden() {
    let path = build_asm();
    let asm = std::fs::read_to_string(&path).expect("read asm");
    let funcs = functions(&asm);
    let mut failures = Vec::new();
    let mut report = Vec::new();

    for sym in SYMBOLS {
        // The wrapper plus every function of this file it reaches.
        let mut todo = vec![sym.to_owned()];
        let mut seen = BTreeSet::new();
        let mut jumps = Vec::new();
        let mut instructions = 0;
        while let Some(f) = todo.pop() {
            if !seen.insert(f.clone()) {
                continue;
            }
            let Some(body) = funcs.get(&f) else {
                failures.push(format!("{sym}: calls `{f}`, which is not in this file"));
                continue;
            };
            for ins in body.iter().filter(|l| !l.ends_with(':')) {
                instructions += 1;
                if is_conditional_jump(ins) {
                    jumps.push(format!("{f}: {ins}"));
                }
                if let Some(t) = direct_target(ins) {
                    todo.push(t.to_owned());
                }
            }
        }
        let allowed = ALLOWED.iter().find(|(s, _, _)| *s == sym).map_or(0, |(_, n, _)| *n);
        report
            .push(format!("{sym}: {instructions} instructions, {} conditional jumps (allowed {allowed})", jumps.len()));
        if jumps.len() > allowed {
            failures.push(format!(
                "{sym}: {} conditional jumps, {allowed} allowed:\n  {}",
                jumps.len(),
                jumps.join("\n  ")
            ));
        }
    }
    eprintln!("codegen audit of {}:\n  {}", path.display(), report.join("\n  "));
    assert!(failures.is_empty(), "codegen audit failed:\n{}", failures.join("\n"));

    // Golden files.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("asm/x86_64");
    let version = rustc_version();
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut diffs = Vec::new();
    for sym in SYMBOLS {
        let body = funcs.get(sym).map(|b| normalise(b)).unwrap_or_default();
        let text = format!("# {sym}, {version}\n{body}");
        let file = dir.join(format!("{sym}.s"));
        if bless {
            std::fs::create_dir_all(&dir).expect("create golden dir");
            std::fs::write(&file, &text).expect("write golden");
            continue;
        }
        let Ok(golden) = std::fs::read_to_string(&file) else {
            diffs.push(format!("{sym}: no golden file {} (run with BLESS=1)", file.display()));
            continue;
        };
        let golden_version = golden.lines().next().and_then(|l| l.split_once(", ")).map(|(_, v)| v.to_owned());
        if golden_version.as_deref() != Some(version.as_str()) {
            eprintln!("{sym}: golden made by {golden_version:?}, this is {version}: golden comparison skipped");
            continue;
        }
        if golden != text {
            diffs.push(format!("{sym}: assembly differs from {}", file.display()));
            eprintln!("--- golden {sym}\n{golden}\n+++ now {sym}\n{text}");
        }
    }
    assert!(
        diffs.is_empty(),
        "golden assembly changed (review the diff above; BLESS=1 rewrites the goldens):\n{}",
        diffs.join("\n")
    );
}
