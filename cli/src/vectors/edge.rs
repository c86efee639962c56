//! The edge-case document (`shared/spec/ah_from_wc_edge_cases.json`):
//! each case has one input and a `libibverbs` and a `kernel` result, some of
//! whose values are prose where the outcome depends on routing. This module
//! rewrites them into the JSON Lines formats.

use serde_json::{Map, Value, json};

use super::{Case, CaseInput, LoadedCase, Profile};

/// Converts the document's cases, both profiles, or only `profile`.
/// Every case gets the line number 1 (the document is one JSON value).
pub fn convert(doc: &Value, profile: Option<Profile>) -> Result<Vec<LoadedCase>, String> {
    let cases = doc.get("cases").and_then(Value::as_array).ok_or("no \"cases\" array")?;
    let mut out = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let id = c.get("id").and_then(Value::as_u64).unwrap_or(k as u64 + 1);
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        let ctx = |e: String| format!("case id {id} ({name}): {e}");
        for p in [Profile::Libibverbs, Profile::Kernel] {
            if profile.is_some_and(|want| want != p) {
                continue;
            }
            let side = match p {
                Profile::Libibverbs => c.get("libibverbs"),
                Profile::Kernel => c.get("kernel"),
            };
            let Some(side) = side.filter(|s| !s.is_null()) else { continue };
            let expect = match p {
                Profile::Libibverbs => libibverbs_expect(side),
                Profile::Kernel => kernel_expect(side),
            }
            .map_err(ctx)?;
            let input = input(c, id, name, p).map_err(ctx)?;
            let case = Case::from_parts(input, Some(expect), Some(p)).map_err(|e| ctx(e.to_string()))?;
            out.push(LoadedCase { line: 1, case });
        }
    }
    Ok(out)
}

fn input(c: &Value, id: u64, name: &str, p: Profile) -> Result<CaseInput, String> {
    let mut v = Map::new();
    v.insert("name".into(), json!(format!("edge-{id:02}-{name}@{}", super::profile_name(p))));
    v.insert("profile".into(), json!(super::profile_name(p)));
    for k in ["port", "wc", "grh"] {
        v.insert(k.into(), c.get(k).cloned().ok_or(format!("no \"{k}\""))?);
    }
    serde_json::from_value(Value::Object(v)).map_err(|e| format!("bad input: {e}"))
}

fn is_crash(side: &Value) -> bool {
    side.get("outcome").and_then(Value::as_str).is_some_and(|o| o.contains("SIGSEGV") || o.contains("NULL"))
}

fn libibverbs_expect(side: &Value) -> Result<Value, String> {
    if is_crash(side) {
        return Ok(json!({"ret": null, "errno": null, "signal": "SIGSEGV"}));
    }
    let mut e = Map::new();
    for k in ["ret", "errno", "ah_attr", "gid_queries"] {
        e.insert(k.into(), side.get(k).cloned().ok_or(format!("libibverbs: no \"{k}\""))?);
    }
    e.insert("signal".into(), Value::Null);
    Ok(Value::Object(e))
}

/// Prose meaning "resolution was required here" (`"route"` / `"resolve"`).
fn prose(v: &Value, starts: &str) -> bool {
    v.as_str().is_some_and(|s| s.starts_with(starts))
}

fn kernel_expect(side: &Value) -> Result<Value, String> {
    if is_crash(side) {
        return Ok(json!({"ret": null, "errno": null, "signal": "SIGSEGV"}));
    }
    let ret = side.get("ret").ok_or("kernel: no \"ret\"")?;
    let ret = match ret {
        Value::Number(_) => ret.clone(),
        // "0 if neighbour resolution succeeds, else its negative errno"
        v if prose(v, "0 if") => json!(0),
        v => return Err(format!("kernel: unexpected ret {v}")),
    };
    let a = side.get("rdma_ah_attr").and_then(Value::as_object).ok_or("kernel: no \"rdma_ah_attr\"")?;
    let mut attr = Map::new();
    for (k, v) in a {
        match k.as_str() {
            "roce_dmac" => {
                let roce = match v {
                    Value::Null => Value::Null,
                    v if v.as_str().is_some_and(|s| s.contains("neighbour") || s == "resolve") => {
                        json!({"dmac": "resolve"})
                    }
                    v => json!({"dmac": v}),
                };
                attr.insert("roce".into(), roce);
            }
            "grh" => {
                let mut g = v.as_object().cloned().ok_or("kernel: grh is not an object")?;
                if let Some(h) = g.get_mut("hop_limit").filter(|h| prose(h, "route")) {
                    *h = json!("route");
                }
                attr.insert(k.clone(), Value::Object(g));
            }
            _ => {
                attr.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(json!({
        "ret": ret,
        "errno": side.get("errno").cloned().unwrap_or(Value::Null),
        "ah_attr": attr,
        "signal": null,
    }))
}
