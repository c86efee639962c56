//! The ratios printed after the criterion run, read from the medians criterion wrote.

use super::*;

/// The median (ns) criterion wrote for `id` in this run, if it ran.
pub(super) fn median_ns(dir: &std::path::Path, id: &str, since: SystemTime) -> Option<f64> {
    let file = dir.join(id).join("new/estimates.json");
    if std::fs::metadata(&file).and_then(|m| m.modified()).ok()? < since {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let rest = text.get(text.find("\"median\"")?..)?;
    let rest = rest.get(rest.find("\"point_estimate\":")? + 17..)?;
    rest.get(..rest.find([',', '}'])?)?.trim().parse().ok()
}

pub(super) fn summary(dir: &std::path::Path, since: SystemTime) {
    let m = |id: &str| median_ns(dir, id, since);
    let f = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
    let r = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:.1}x", b / a),
        _ => "-".to_owned(),
    };
    println!("\nAH table summary (median ns per op; at 2 threads per op per thread; ratio = baseline / table)");
    println!("| benchmark | table | Mutex<HashMap> | ratio | RwLock<HashMap> | ratio | table M op/s, all threads |");
    println!("|---|---|---|---|---|---|---|");
    for (name, threads, t, mx, rw) in [
        (
            "hit only, 1 thread",
            1,
            "ah_table_hit_only_1t/table",
            "ah_table_hit_only_1t/mutex_hashmap",
            "ah_table_hit_only_1t/rwlock_hashmap",
        ),
        (
            "hit only, 2 threads, disjoint",
            2,
            "ah_table_hit_only_2t/table_disjoint",
            "ah_table_hit_only_2t/mutex_hashmap_disjoint",
            "ah_table_hit_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit only, prepared key, 1 thread",
            1,
            "ah_table_hit_only_1t/table_prepared",
            "ah_table_hit_only_1t/mutex_hashmap",
            "ah_table_hit_only_1t/rwlock_hashmap",
        ),
        (
            "hit only, prepared key, 2 threads, disjoint",
            2,
            "ah_table_hit_only_2t/table_prepared_disjoint",
            "ah_table_hit_only_2t/mutex_hashmap_disjoint",
            "ah_table_hit_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit only, 2 threads, shared",
            2,
            "ah_table_hit_only_2t/table_shared",
            "ah_table_hit_only_2t/mutex_hashmap_shared",
            "ah_table_hit_only_2t/rwlock_hashmap_shared",
        ),
        (
            "hit only, session, 1 thread",
            1,
            "ah_table_hit_only_1t/table_session",
            "ah_table_hit_only_1t/mutex_hashmap",
            "ah_table_hit_only_1t/rwlock_hashmap",
        ),
        (
            "hit only, session, 2 threads, disjoint",
            2,
            "ah_table_hit_only_2t/table_session_disjoint",
            "ah_table_hit_only_2t/mutex_hashmap_disjoint",
            "ah_table_hit_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit only, session, 2 threads, shared",
            2,
            "ah_table_hit_only_2t/table_session_shared",
            "ah_table_hit_only_2t/mutex_hashmap_shared",
            "ah_table_hit_only_2t/rwlock_hashmap_shared",
        ),
        (
            "hit only, session + prepared key, 1 thread",
            1,
            "ah_table_hit_only_1t/table_session_prepared",
            "ah_table_hit_only_1t/mutex_hashmap",
            "ah_table_hit_only_1t/rwlock_hashmap",
        ),
        (
            "hit only, session + prepared key, 2 threads, disjoint",
            2,
            "ah_table_hit_only_2t/table_session_prepared_disjoint",
            "ah_table_hit_only_2t/mutex_hashmap_disjoint",
            "ah_table_hit_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit only, session + prepared key, 2 threads, shared",
            2,
            "ah_table_hit_only_2t/table_session_prepared_shared",
            "ah_table_hit_only_2t/mutex_hashmap_shared",
            "ah_table_hit_only_2t/rwlock_hashmap_shared",
        ),
        (
            "hit + release, 1 thread",
            1,
            "ah_table_hit_1t/table",
            "ah_table_hit_1t/mutex_hashmap",
            "ah_table_hit_1t/rwlock_hashmap",
        ),
        (
            "hit + release, 2 threads, disjoint",
            2,
            "ah_table_hit_2t/table_disjoint",
            "ah_table_hit_2t/mutex_hashmap_disjoint",
            "ah_table_hit_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit + release, 2 threads, shared",
            2,
            "ah_table_hit_2t/table_shared",
            "ah_table_hit_2t/mutex_hashmap_shared",
            "ah_table_hit_2t/rwlock_hashmap_shared",
        ),
        (
            "hit + release, session, 1 thread",
            1,
            "ah_table_hit_1t/table_session",
            "ah_table_hit_1t/mutex_hashmap",
            "ah_table_hit_1t/rwlock_hashmap",
        ),
        (
            "hit + release, session, 2 threads, disjoint",
            2,
            "ah_table_hit_2t/table_session_disjoint",
            "ah_table_hit_2t/mutex_hashmap_disjoint",
            "ah_table_hit_2t/rwlock_hashmap_disjoint",
        ),
        (
            "hit + release, session, 2 threads, shared",
            2,
            "ah_table_hit_2t/table_session_shared",
            "ah_table_hit_2t/mutex_hashmap_shared",
            "ah_table_hit_2t/rwlock_hashmap_shared",
        ),
        (
            "resolve only, 1 thread",
            1,
            "ah_table_resolve_only_1t/table",
            "ah_table_resolve_only_1t/mutex_hashmap",
            "ah_table_resolve_only_1t/rwlock_hashmap",
        ),
        (
            "resolve only, 2 threads, disjoint",
            2,
            "ah_table_resolve_only_2t/table_disjoint",
            "ah_table_resolve_only_2t/mutex_hashmap_disjoint",
            "ah_table_resolve_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "resolve + release, 1 thread",
            1,
            "ah_table_resolve_1t/table",
            "ah_table_resolve_1t/mutex_hashmap",
            "ah_table_resolve_1t/rwlock_hashmap",
        ),
        (
            "resolve + release, 2 threads, disjoint",
            2,
            "ah_table_resolve_2t/table_disjoint",
            "ah_table_resolve_2t/mutex_hashmap_disjoint",
            "-",
        ),
        (
            "resolve only, session, 1 thread",
            1,
            "ah_table_resolve_only_1t/table_session",
            "ah_table_resolve_only_1t/mutex_hashmap",
            "ah_table_resolve_only_1t/rwlock_hashmap",
        ),
        (
            "resolve only, session, 2 threads, disjoint",
            2,
            "ah_table_resolve_only_2t/table_session_disjoint",
            "ah_table_resolve_only_2t/mutex_hashmap_disjoint",
            "ah_table_resolve_only_2t/rwlock_hashmap_disjoint",
        ),
        (
            "resolve + release, session, 1 thread",
            1,
            "ah_table_resolve_1t/table_session",
            "ah_table_resolve_1t/mutex_hashmap",
            "ah_table_resolve_1t/rwlock_hashmap",
        ),
        (
            "resolve + release, session, 2 threads, disjoint",
            2,
            "ah_table_resolve_2t/table_session_disjoint",
            "ah_table_resolve_2t/mutex_hashmap_disjoint",
            "-",
        ),
        (
            "miss (1 ms create), 1 thread",
            1,
            "ah_table_miss_roce_1ms/table_1t",
            "ah_table_miss_roce_1ms/mutex_hashmap_1t",
            "-",
        ),
        (
            "miss (1 ms create), 2 threads",
            2,
            "ah_table_miss_roce_1ms/table_2t",
            "ah_table_miss_roce_1ms/mutex_hashmap_2t",
            "-",
        ),
    ] {
        let (t, mx, rw) = (m(t), m(mx), m(rw));
        let rate =
            t.filter(|&v| v > 0.0).map_or_else(|| "-".to_owned(), |v| format!("{:.1}", 1e3 * threads as f64 / v));
        println!("| {name} | {} | {} | {} | {} | {} | {rate} |", f(t), f(mx), r(t, mx), f(rw), r(t, rw));
    }
    println!("(table_get_only, 1 thread: {} ns)", f(m("ah_table_hit_1t/table_get_only")));
}
