//! Reading callgrind's output: the inclusive instruction count of each
//! function, for the instruction-count gates (`tests/icount_gate.rs`) and
//! the scale bench (`benches/ah_scale.rs`).

use std::collections::BTreeMap;

/// Inclusive `Ir` per function name, from a callgrind output file: the
/// function's own cost lines plus the inclusive cost of every call it makes.
pub fn inclusive_ir(text: &str) -> BTreeMap<String, u64> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut resolve = |spec: &str| -> String {
        // "(id) name" defines, "(id)" refers; uncompressed files have "name".
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix('(') {
            let (id, name) = rest.split_once(')').unwrap_or((rest, ""));
            let name = name.trim();
            if name.is_empty() {
                return names.get(id).cloned().unwrap_or_default();
            }
            names.insert(id.to_owned(), name.to_owned());
            return name.to_owned();
        }
        spec.to_owned()
    };
    let mut out = BTreeMap::new();
    let mut cur = String::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("fn=") {
            cur = resolve(f);
            continue;
        }
        if let Some(f) = line.strip_prefix("cfn=") {
            resolve(f);
            continue;
        }
        // A `calls=` line is followed by a cost line with the call's
        // inclusive cost, which counts for the caller like its own lines.
        let first = line.bytes().next().unwrap_or(b' ');
        if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*') {
            let ir: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            *out.entry(cur.clone()).or_insert(0) += ir;
        }
    }
    out
}
