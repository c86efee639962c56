//! The classifiers alone, on the mixed input set of the 256-entry fixture:
//! branch-free (`udah_core::ah::libibverbs::classify`) against if/else
//! (`udah_benches::branchy::classify`), in a repeating order (a cycle of
//! 256) and a random one (65,536 uniform draws: 2.6 MB of areas, read
//! sequentially, so the prefetcher hides it),
//! plus the header detectors of `udah_core::wire::detect`.
//!
//! The branch-free classifier runs the same instructions for every packet
//! (more of them: see the instruction counts in `RESULTS.md`); the if/else
//! one runs fewer, but pays for every misprediction when the order is
//! random.

use std::time::SystemTime;

use criterion::{BenchmarkId, Criterion};
use udah_benches::report::{self, fmt};
use udah_benches::{Fixture, Order, SEED, STREAM_LEN, branchy};
use udah_core::ah::{kernel, libibverbs};
use udah_core::wire::{Area, Evidence, detect};

fn cycle<T>(b: &mut criterion::Bencher<'_>, areas: &[Area], f: impl Fn(&Area) -> T) {
    let n = areas.len();
    let mut i = 0usize;
    b.iter(|| {
        let a = &areas[i];
        i += 1;
        if i == n {
            i = 0;
        }
        f(core::hint::black_box(a))
    });
}

fn main() {
    let dir = report::criterion_dir();
    let mut c = Criterion::default().configure_from_args().output_directory(&dir);
    let since = SystemTime::now();
    let fx: Fixture<256> = Fixture::new(SEED);
    let set: Vec<Area> = fx.mixed(Order::Repeating, SEED).iter().map(|k| k.area).collect();
    for order in [Order::Repeating, Order::Random] {
        let areas: Vec<Area> = fx.stream(order, STREAM_LEN, SEED).iter().map(|i| set[usize::from(*i)]).collect();
        let mut g = c.benchmark_group(format!("classify-{}", order.name()));
        g.bench_with_input(BenchmarkId::from_parameter("branchfree"), &areas, |b, a| cycle(b, a, libibverbs::classify));
        g.bench_with_input(BenchmarkId::from_parameter("branchy"), &areas, |b, a| cycle(b, a, branchy::classify));
        g.bench_with_input(BenchmarkId::from_parameter("version_libibverbs"), &areas, |b, a| {
            cycle(b, a, detect::version_libibverbs)
        });
        g.bench_with_input(BenchmarkId::from_parameter("version_kernel"), &areas, |b, a| {
            cycle(b, a, detect::version_kernel)
        });
        g.bench_with_input(BenchmarkId::from_parameter("detect_none"), &areas, |b, a| {
            cycle(b, a, |x| detect::detect(x, Evidence::None))
        });
        g.bench_with_input(BenchmarkId::from_parameter("net_type_by_grh"), &areas, |b, a| {
            cycle(b, a, kernel::net_type_by_grh)
        });
        g.finish();
    }
    c.final_summary();
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let mut t = String::from(
        "\n### Classifiers alone, mixed inputs (ns per call: median, and fastest sample)\n\n| function | repeating | random | repeating, fastest | random, fastest |\n|---|---:|---:|---:|---:|\n",
    );
    for f in ["branchfree", "branchy", "version_libibverbs", "version_kernel", "detect_none", "net_type_by_grh"] {
        let m = |o: &str| fmt(report::median_ns(&dir, &format!("classify-{o}/{f}"), since));
        let q = |o: &str| fmt(report::fastest_ns(&dir, &format!("classify-{o}/{f}"), since));
        t.push_str(&format!("| {f} | {} | {} | {} | {} |\n", m("repeating"), m("random"), q("repeating"), q("random")));
    }
    print!("{t}");
    let _ = std::fs::write(dir.join("udah-summary-classify.md"), t);
}
