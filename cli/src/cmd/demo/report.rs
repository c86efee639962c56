//! The demo's summary as a person reads it, and the maximum RSS it reports.

use super::*;

/// The process's maximum resident set so far, bytes: `VmHWM` of
/// `/proc/self/status` (Linux); `None` elsewhere.
pub(super) fn max_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

pub(super) fn print_summary(s: &Summary) {
    let mut o = std::io::stdout().lock();
    let rows: Vec<(&str, String)> = vec![
        ("profile / evidence / quirks", format!("{:?} / {:?} / {:?}", s.profile, s.evidence, s.quirks)),
        ("peers / families", format!("{} / {}", s.peers, s.families.join(","))),
        ("end to end: requests", s.e2e_requests.to_string()),
        ("end to end: answered", s.e2e_answered.to_string()),
        ("end to end: replies at the sender's QP", s.e2e_replies.to_string()),
        ("end to end: replies at a wrong QP", s.e2e_misdelivered.to_string()),
        ("end to end: replies dropped by the fabric", s.e2e_dropped.to_string()),
        (
            "end to end: refused",
            if s.e2e_refused.is_empty() {
                "0".into()
            } else {
                s.e2e_refused.iter().map(|(r, n)| format!("{n} × {r}")).collect::<Vec<_>>().join("; ")
            },
        ),
        ("hot path: distinct completions", s.corpus.to_string()),
        ("hot path: completions resolved", format!("{} ({} refused)", s.messages, s.refused)),
        (
            "hot path: threads",
            format!("{}{}", s.threads, if s.steered { " (each polls its own peers' completions)" } else { "" }),
        ),
        ("hot path: AH table path", format!("{:?}", s.table_path).to_lowercase()),
        ("hot path: completions / s", format!("{:.2} M", s.completions_per_sec / 1e6)),
        ("hot path: ns / completion p50", format!("{:.1}", s.ns_p50)),
        ("hot path: ns / completion p99", format!("{:.1}", s.ns_p99)),
        ("AH table: hits / misses", format!("{} / {}", s.hits, s.misses)),
        ("AH table: creates / evictions / live", format!("{} / {} / {}", s.creates, s.evictions, s.live_ahs)),
        (
            "AH table: capacity / load factor / memory",
            format!(
                "{} slots / {:.4} ({} entries) / {:.1} MiB",
                s.table_capacity,
                s.load_factor,
                s.table_entries,
                s.table_bytes as f64 / f64::from(1 << 20)
            ),
        ),
        ("AH table: hash seed", format!("{:#018x}", s.table_seed)),
        (
            "backend create latency / time",
            format!(
                "{} µs{} / {:.2} ms",
                s.create_latency_us,
                if s.create_latency_default {
                    format!(" (default for {} peers: at most {} s of creates)", s.peers, DEFAULT_CREATES_US / 1_000_000)
                } else {
                    String::new()
                },
                s.backend_create_ms
            ),
        ),
        (
            "maximum resident set",
            s.max_rss_bytes.map_or_else(|| "unknown".into(), |b| format!("{:.1} MiB", b as f64 / f64::from(1 << 20))),
        ),
        ("heap allocations on the hot path", s.hot_path_allocations.to_string()),
    ];
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let _ = writeln!(o, "udah demo — completion → address handle on the mock fabric");
    for (k, v) in rows {
        let _ = writeln!(o, "  {k:<w$}  {v}");
    }
    if s.profile == ProfileArg::Libibverbs && s.e2e_dropped > 0 {
        let _ = writeln!(
            o,
            "note: libibverbs ignores VLANs and answers VLAN peers from the untagged duplicate of the \
             address (SEMANTICS Q11), so the fabric drops those replies; --profile kernel matches the VLAN."
        );
    }
}
