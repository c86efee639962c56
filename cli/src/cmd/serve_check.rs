//! `serve --check-libibverbs`: udah's attribute against the real
//! `ibv_init_ah_from_wc`, per completion, compared field by field and timed.

use std::time::Instant;

use udah_core::GidTable;
use udah_core::ah::{IbvAhAttr, libibverbs};
use udah_core::wire::{Area, Gid};
use udah_hal_ibverbs::{Context, WorkCompletion};

use super::pipeline::GIDS;

/// `--check-libibverbs`: udah's attribute against the real
/// `ibv_init_ah_from_wc`, per completion.
#[derive(Debug, Default)]
pub(crate) struct LibCheck {
    compared: u64,
    /// Completions on which the two disagreed.
    pub(crate) mismatches: u64,
    udah_ns: u128,
    lib_ns: u128,
}

impl LibCheck {
    /// udah's profile is timed over this many runs per completion (its one
    /// run is close to the clock's resolution); libibverbs' once.
    const REPS: u32 = 8;
    /// Mismatches printed in full (the rest are counted).
    const SHOWN: u64 = 5;

    /// Compares (and times) both for one completion.
    pub(crate) fn check(&mut self, ctx: &Context, gids: &GidTable<GIDS>, port: u8, wc: &WorkCompletion, area: &Area) {
        use core::hint::black_box;
        let ibv = wc.ibv();
        let t = Instant::now();
        let mut ours = libibverbs::init_ah_from_wc(gids, port, &ibv, Some(area));
        for _ in 1..Self::REPS {
            ours = black_box(libibverbs::init_ah_from_wc(black_box(gids), port, black_box(&ibv), Some(area)));
        }
        self.udah_ns += t.elapsed().as_nanos() / u128::from(Self::REPS);
        let t = Instant::now();
        let theirs = ctx.init_ah_from_wc(port, wc, area);
        self.lib_ns += t.elapsed().as_nanos();
        let theirs = theirs.map_err(|e| e.errno().unwrap_or(0));
        self.record(wc.src_qp, &ours, &theirs);
    }

    /// Counts one comparison; prints the first few mismatches.
    fn record(&mut self, src_qp: u32, ours: &libibverbs::IbvResult, theirs: &Result<IbvAhAttr, i32>) {
        self.compared += 1;
        let diff = result_diff(ours, theirs);
        if !diff.is_empty() {
            self.mismatches += 1;
            if self.mismatches <= Self::SHOWN {
                eprintln!("check-libibverbs: request from QPN {src_qp:#x}: {}", diff.join(", "));
            }
        }
    }

    /// The summary line (COORD.md's format; the ratio is libibverbs' time
    /// over udah's).
    pub(crate) fn line(&self) -> String {
        let n = self.compared.max(1) as f64;
        let (x, y) = (self.udah_ns as f64 / n, self.lib_ns as f64 / n);
        format!(
            "check-libibverbs: {} compared, {} mismatches; udah {x:.0} ns/WC, libibverbs {y:.0} ns/WC, ratio {:.1}",
            self.compared,
            self.mismatches,
            y / x.max(1.0)
        )
    }
}

/// The fields in which two `ibv_ah_attr`s differ, as `name udah=… libibverbs=…`.
fn attr_diff(a: &IbvAhAttr, b: &IbvAhAttr) -> Vec<String> {
    let mut d = Vec::new();
    let mut f = |name: &str, x: String, y: String| {
        if x != y {
            d.push(format!("{name} udah={x} libibverbs={y}"));
        }
    };
    f("dgid", Gid(a.grh.dgid).to_string(), Gid(b.grh.dgid).to_string());
    f("flow_label", format!("{:#x}", a.grh.flow_label), format!("{:#x}", b.grh.flow_label));
    f("sgid_index", a.grh.sgid_index.to_string(), b.grh.sgid_index.to_string());
    f("hop_limit", a.grh.hop_limit.to_string(), b.grh.hop_limit.to_string());
    f("traffic_class", a.grh.traffic_class.to_string(), b.grh.traffic_class.to_string());
    f("dlid", format!("{:#x}", a.dlid), format!("{:#x}", b.dlid));
    f("sl", a.sl.to_string(), b.sl.to_string());
    f("src_path_bits", a.src_path_bits.to_string(), b.src_path_bits.to_string());
    f("static_rate", a.static_rate.to_string(), b.static_rate.to_string());
    f("is_global", a.is_global.to_string(), b.is_global.to_string());
    f("port_num", a.port_num.to_string(), b.port_num.to_string());
    d
}

/// How udah's result differs from libibverbs' (attribute fields on success,
/// the errno on failure); empty when they agree.
fn result_diff(ours: &libibverbs::IbvResult, theirs: &Result<IbvAhAttr, i32>) -> Vec<String> {
    match (ours, theirs) {
        (Ok(a), Ok(b)) => attr_diff(a, b),
        (Err(f), Err(e)) if f.error.errno() == *e => Vec::new(),
        (Err(f), Err(e)) => vec![format!("errno udah={} libibverbs={e}", f.error.errno())],
        (Ok(_), Err(e)) => vec![format!("udah succeeded, libibverbs failed with errno {e}")],
        (Err(f), Ok(_)) => vec![format!("udah failed ({}), libibverbs succeeded", f.error)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "ibverbs")]
    fn libibverbs_comparison_names_every_differing_field() {
        let a = IbvAhAttr { dlid: 3, sl: 1, is_global: 1, port_num: 1, ..IbvAhAttr::default() };
        let mut b = a;
        assert!(result_diff(&Ok(a), &Ok(b)).is_empty());
        b.grh.sgid_index = 2;
        b.grh.hop_limit = 64;
        let d = result_diff(&Ok(a), &Ok(b));
        assert_eq!(d, ["sgid_index udah=0 libibverbs=2", "hop_limit udah=0 libibverbs=64"]);
        let fail = libibverbs::IbvFailure { error: udah_core::IbvError::GidNotFound, attr: a };
        assert!(result_diff(&Err(fail), &Err(22)).is_empty(), "same errno (EINVAL)");
        assert_eq!(result_diff(&Err(fail), &Err(95)), ["errno udah=22 libibverbs=95"]);
        assert_eq!(result_diff(&Ok(a), &Err(22)).len(), 1);
        assert_eq!(result_diff(&Err(fail), &Ok(a)).len(), 1);
        let mut c = LibCheck { udah_ns: 2_000, lib_ns: 50_000, ..LibCheck::default() };
        c.record(7, &Ok(a), &Ok(a));
        c.record(7, &Ok(a), &Ok(b));
        assert_eq!(
            c.line(),
            "check-libibverbs: 2 compared, 1 mismatches; udah 1000 ns/WC, libibverbs 25000 ns/WC, ratio 25.0"
        );
    }
}
