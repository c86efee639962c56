//! WC → AH attribute, end to end (foundation issue, item 9).
//!
//! * `libibverbs/<family>/<entries>`: each family against GID tables of 4,
//!   64 and 256 entries, cycling over 64 cases whose targets are spread over
//!   the table;
//! * `mixed-<order>/<classifier>/<entries>`: all four families mixed, in a
//!   repeating (round-robin, a cycle of 256) and a seeded random order (a
//!   stream of 65,536 uniform draws, no learnable cycle), with the
//!   branch-free core and with the if/else classifier of
//!   `udah_benches::branchy`;
//! * `kernel/<family>/256` and `kernel-mixed/<order>/256`: the kernel profile;
//! * `corpus/libibverbs/public`: the 1,973 non-NULL cases of the public
//!   corpus, each against its own table.
//!
//! After criterion, in the same run, the real-libibverbs oracle's `--bench`
//! runs on the same cases (same tables, same packets; for the random order
//! the 256 cases shuffled, since the oracle cycles through its input), and the
//! summary prints the ratio core ns / oracle ns. Set `UDAH_BENCH_NO_ORACLE=1`
//! to skip that part. Timings include about 1 ns of cycling through the
//! inputs; the oracle's loop has the same.

use std::time::SystemTime;

use criterion::{BenchmarkId, Criterion};
use udah_benches::oracle::{self, OracleBench};
use udah_benches::report::{self, fmt};
use udah_benches::{CASES_PER_FAMILY, Case, Family, Fixture, Order, SEED, STREAM_LEN, TABLE_SIZES, branchy};
use udah_core::ah::{kernel, libibverbs};

/// Criterion iterations run `f` on the inputs in turn. Every result is
/// consumed by reference (`black_box(&r)`): returning it to criterion would
/// copy it, and a copy that reads the 36-byte result back with wide loads
/// right after it was written field by field stalls on store forwarding,
/// which is the harness's cost, not the function's.
fn cycle<T>(b: &mut criterion::Bencher<'_>, cases: &[Case], f: impl Fn(&Case) -> T) {
    let n = cases.len();
    let mut i = 0usize;
    b.iter(|| {
        let c = &cases[i];
        i += 1;
        if i == n {
            i = 0;
        }
        let r = f(core::hint::black_box(c));
        core::hint::black_box(&r);
    });
}

/// Criterion iterations run `f` on `cases[stream[i]]` for i = 0, 1, ….
fn stream<T>(b: &mut criterion::Bencher<'_>, cases: &[Case], stream: &[u16], f: impl Fn(&Case) -> T) {
    let n = stream.len();
    let mut i = 0usize;
    b.iter(|| {
        let c = &cases[usize::from(stream[i])];
        i += 1;
        if i == n {
            i = 0;
        }
        let r = f(core::hint::black_box(c));
        core::hint::black_box(&r);
    });
}

fn per_family<const N: usize>(c: &mut Criterion, fx: &Fixture<N>) {
    let mut g = c.benchmark_group("libibverbs");
    for fam in Family::ALL {
        g.bench_with_input(BenchmarkId::new(fam.name(), N), fx.family(fam), |b, cases| {
            cycle(b, cases, |k| libibverbs::init_ah_from_wc(&fx.roce, 1, &k.wc, Some(&k.area)))
        });
    }
    g.finish();
}

fn mixed<const N: usize>(c: &mut Criterion, fx: &Fixture<N>) {
    let set = fx.mixed(Order::Repeating, SEED);
    for order in [Order::Repeating, Order::Random] {
        let idx = fx.stream(order, STREAM_LEN, SEED);
        let mut g = c.benchmark_group(format!("mixed-{}", order.name()));
        g.bench_function(BenchmarkId::new("branchfree", N), |b| {
            stream(b, &set, &idx, |k| libibverbs::init_ah_from_wc(&fx.roce, 1, &k.wc, Some(&k.area)))
        });
        g.bench_function(BenchmarkId::new("branchy", N), |b| {
            stream(b, &set, &idx, |k| branchy::init_ah_from_wc(&fx.roce, 1, &k.wc, Some(&k.area)))
        });
        g.finish();
    }
}

fn kernel_profile(c: &mut Criterion, fx: &Fixture<256>) {
    let mut g = c.benchmark_group("kernel");
    for fam in Family::ALL {
        let table = fx.kernel_table(fam);
        g.bench_with_input(BenchmarkId::new(fam.name(), 256), fx.family(fam), |b, cases| {
            cycle(b, cases, |k| kernel::init_ah_attr_from_wc(table, &k.kwc, Some(&k.area)))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernel-mixed");
    let set = fx.mixed(Order::Repeating, SEED);
    for order in [Order::Repeating, Order::Random] {
        let idx = fx.stream(order, STREAM_LEN, SEED);
        g.bench_function(BenchmarkId::new(order.name(), 256), |b| {
            stream(b, &set, &idx, |k| kernel::init_ah_attr_from_wc(fx.kernel_table(k.family), &k.kwc, Some(&k.area)))
        });
    }
    g.finish();
}

fn corpus(c: &mut Criterion) -> Option<usize> {
    let cases = match udah_benches::corpus::load_public()? {
        Ok((cases, _)) => cases,
        Err(e) => {
            println!("public corpus not loaded: {e}");
            return None;
        }
    };
    let n = cases.len();
    let mut g = c.benchmark_group("corpus");
    g.bench_function(BenchmarkId::new("libibverbs", "public"), |b| {
        let mut i = 0usize;
        b.iter(|| {
            let k = core::hint::black_box(&cases[i]);
            i += 1;
            if i == n {
                i = 0;
            }
            let r = k.table.init_ah_from_wc(k.port, &k.wc, &k.area);
            core::hint::black_box(&r);
        })
    });
    g.finish();
    Some(n)
}

/// The oracle's figure for the given cases against a fixture table.
fn oracle_on<const N: usize>(bin: &std::path::Path, fx: &Fixture<N>, cases: &[Case]) -> Result<OracleBench, String> {
    let mut jsonl = String::new();
    let mut queries = 0.0;
    for (i, c) in cases.iter().enumerate() {
        jsonl.push_str(&oracle::case_line(&format!("fx{N}-{i}"), N, &fx.roce_slots, c, "ethernet"));
        queries += c.index.map_or(0.0, |x| 2.0 * f64::from(x) + 2.0);
    }
    oracle::run_bench(bin, &jsonl, oracle::calls_for(queries / cases.len() as f64))
}

struct Row {
    what: String,
    core: Option<f64>,
    core_fastest: Option<f64>,
    oracle: Option<OracleBench>,
}

fn speedup(ratio: Option<f64>) -> String {
    ratio.map_or("-".to_owned(), |x| if x > 0.1 { format!("{:.2}×", 1.0 / x) } else { format!("{:.0}×", 1.0 / x) })
}

fn print_rows(title: &str, rows: &[Row], out: &mut String) {
    let mut t = format!(
        "\n### {title}\n\n| case | core ns (median) | oracle ns (median) | GID queries/call | ratio core/oracle | speed-up | core fastest sample | oracle fastest rep | speed-up (fastest) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in rows {
        let o = r.oracle.map(|o| o.median_ns);
        let of = r.oracle.map(|o| o.fastest_ns);
        let ratio = r.core.zip(o).map(|(c, o)| c / o);
        let ratio_fast = r.core_fastest.zip(of).map(|(c, o)| c / o);
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.what,
            fmt(r.core),
            fmt(o),
            r.oracle.map_or("-".to_owned(), |o| format!("{:.1}", o.gid_queries_per_call)),
            ratio.map_or("-".to_owned(), |x| format!("{x:.4}")),
            speedup(ratio),
            fmt(r.core_fastest),
            fmt(of),
            speedup(ratio_fast),
        ));
    }
    print!("{t}");
    out.push_str(&t);
}

fn main() {
    let dir = report::criterion_dir();
    let mut c = Criterion::default().configure_from_args().output_directory(&dir);
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let since = SystemTime::now();
    let fx4: Fixture<4> = Fixture::new(SEED);
    let fx64: Fixture<64> = Fixture::new(SEED);
    let fx256: Fixture<256> = Fixture::new(SEED);

    per_family(&mut c, &fx4);
    per_family(&mut c, &fx64);
    per_family(&mut c, &fx256);
    mixed(&mut c, &fx4);
    mixed(&mut c, &fx64);
    mixed(&mut c, &fx256);
    kernel_profile(&mut c, &fx256);
    let corpus_cases = corpus(&mut c);
    c.final_summary();
    if !bench_mode {
        return;
    }

    // Summary, with the oracle on the same cases.
    let median = |id: &str| report::median_ns(&dir, id, since);
    let fastest = |id: &str| report::fastest_ns(&dir, id, since);
    let oracle_bin = if std::env::var_os("UDAH_BENCH_NO_ORACLE").is_some() {
        Err("UDAH_BENCH_NO_ORACLE is set".to_owned())
    } else {
        oracle::oracle_binary()
    };
    let run = |f: &dyn Fn(&std::path::Path) -> Result<OracleBench, String>| -> Option<OracleBench> {
        let bin = oracle_bin.as_ref().ok()?;
        f(bin).map_err(|e| println!("oracle: {e}")).ok()
    };
    if let Err(e) = &oracle_bin {
        println!("\nThe oracle is not available, ratios are not computed: {e}");
    }
    let mut md = String::from("## WC → AH, libibverbs profile vs the real libibverbs (oracle `--bench`)\n");

    let mut rows = Vec::new();
    for fam in Family::ALL {
        for n in TABLE_SIZES {
            let id = format!("libibverbs/{}/{n}", fam.name());
            let (core, core_fastest) = (median(&id), fastest(&id));
            let oracle = match n {
                4 => run(&|b| oracle_on(b, &fx4, fx4.family(fam))),
                64 => run(&|b| oracle_on(b, &fx64, fx64.family(fam))),
                _ => run(&|b| oracle_on(b, &fx256, fx256.family(fam))),
            };
            rows.push(Row { what: format!("{} / {n} entries", fam.name()), core, core_fastest, oracle });
        }
    }
    print_rows(&format!("Per family ({CASES_PER_FAMILY} cases each, targets spread over the table)"), &rows, &mut md);

    let mut rows = Vec::new();
    for order in [Order::Repeating, Order::Random] {
        for n in TABLE_SIZES {
            let id = format!("mixed-{}/branchfree/{n}", order.name());
            let (core, core_fastest) = (median(&id), fastest(&id));
            let oracle = match n {
                4 => run(&|b| oracle_on(b, &fx4, &fx4.mixed(order, SEED))),
                64 => run(&|b| oracle_on(b, &fx64, &fx64.mixed(order, SEED))),
                _ => run(&|b| oracle_on(b, &fx256, &fx256.mixed(order, SEED))),
            };
            rows.push(Row { what: format!("mixed, {} order / {n} entries", order.name()), core, core_fastest, oracle });
        }
    }
    print_rows("Mixed families (256 inputs)", &rows, &mut md);

    if let (Some(n), Some(path)) = (corpus_cases, oracle::public_corpus_path()) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let (core, core_fastest) = (median("corpus/libibverbs/public"), fastest("corpus/libibverbs/public"));
        let oracle = run(&|b| oracle::run_bench(b, &text, 100_000));
        let rows = [Row { what: format!("public corpus ({n} cases)"), core, core_fastest, oracle }];
        print_rows("Public corpus (libibverbs-v44-public.jsonl)", &rows, &mut md);
    }

    let mut t = String::from(
        "\n### Branch-free vs if/else classifier, repeating vs random order (ns per WC: median / fastest sample)\n\n| entries | branch-free repeating | branch-free random | branchy repeating | branchy random |\n|---:|---:|---:|---:|---:|\n",
    );
    for n in TABLE_SIZES {
        let m = |o: &str, k: &str| {
            let id = format!("mixed-{o}/{k}/{n}");
            format!("{} / {}", fmt(median(&id)), fmt(fastest(&id)))
        };
        t.push_str(&format!(
            "| {n} | {} | {} | {} | {} |\n",
            m("repeating", "branchfree"),
            m("random", "branchfree"),
            m("repeating", "branchy"),
            m("random", "branchy")
        ));
    }
    t.push_str(
        "\n### Kernel profile, 256 entries (ns per WC)\n\n| case | median | fastest sample |\n|---|---:|---:|\n",
    );
    for fam in Family::ALL {
        let id = format!("kernel/{}/256", fam.name());
        t.push_str(&format!("| {} | {} | {} |\n", fam.name(), fmt(median(&id)), fmt(fastest(&id))));
    }
    for order in [Order::Repeating, Order::Random] {
        t.push_str(&format!(
            "| mixed, {} order | {} | {} |\n",
            order.name(),
            fmt(median(&format!("kernel-mixed/{}/256", order.name()))),
            fmt(fastest(&format!("kernel-mixed/{}/256", order.name())))
        ));
    }
    print!("{t}");
    md.push_str(&t);
    let file = dir.join("udah-summary.md");
    if std::fs::write(&file, &md).is_ok() {
        println!("\n(summary written to {})", file.display());
    }
}
