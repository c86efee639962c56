//! udah against the maps a user would pick instead, same run, same job.
//!
//! Per completion: `init_ah_from_wc` → attribute → look up, create the AH on
//! a miss, take a reference; then give the reference back. udah does it
//! through a shared [`AhTable`] (`udah-shared`) and a `Session`
//! (`udah-session`); the baselines key a map on the [`AhAttr`] with an entry
//! `(ah, refcount)`:
//!
//! * `mutex`: `Mutex<hashbrown::HashMap>` with foldhash (one lock to take
//!   the reference, one to give it back);
//! * `rwlock`: `RwLock<hashbrown::HashMap>` with foldhash, the refcount an
//!   atomic under the read lock (the write lock only on a miss);
//! * `dashmap`: `dashmap` 6.1 with foldhash;
//! * `papaya`: `papaya` 0.2 with foldhash (one pin per call);
//! * `mutex-sip`, `rwlock-sip`: the lock-based maps with std's SipHash
//!   (`RandomState`), what the README's older "10×" figures were against.
//!
//! 64 and 10⁵ peers (scrambled addresses, uniform order), every peer
//! created once before measuring (udah's table: 256 and 2¹⁷ slots), on 1
//! and 2 threads (each thread its own responder or map handle over the one
//! table or map, the threads at different points of the same stream; the
//! time is the slowest thread's, per completion per thread).
//!
//! `cargo bench -p udah-benches --bench ah_baselines -- base/ --warm-up-time
//! 0.5 --measurement-time 2` (a row is `base/<impl>-<threads>t/<peers>`);
//! the end of the run prints udah's time as a ratio of each map's.

use core::hash::BuildHasher;
use core::hint::black_box;
use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Barrier, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use criterion::{BenchmarkId, Criterion};
use udah_benches::report::{criterion_dir, fmt, median_ns};
use udah_benches::scale::{BenchHal, Peers, Popularity, Spread, stream};
use udah_core::ah::{AhAttr, IbvWc, libibverbs};
use udah_core::hal::Hal;
use udah_core::responder::{Config, Responder};
use udah_core::table::{AhCache, AhTable};
use udah_core::wire::Area;

/// Length of a peer stream (a power of two).
const STREAM: usize = 1 << 20;

/// Peer counts (udah's table: 2⁸ and 2¹⁷ slots, see `real_main`).
const PEERS: [usize; 2] = [64, 100_000];

/// Thread counts.
const THREADS: [usize; 2] = [1, 2];

/// The implementations, in the order of the rows and of the ratio table.
const IMPLS: [&str; 8] =
    ["udah-shared", "udah-session", "mutex", "rwlock", "dashmap", "papaya", "mutex-sip", "rwlock-sip"];

type Fold = foldhash::fast::RandomState;
type Sip = std::collections::hash_map::RandomState;

/// A map entry: the AH and its references.
struct Entry {
    ah: u64,
    refs: AtomicU32,
}

impl Entry {
    fn new(ah: u64) -> Entry {
        Entry { ah, refs: AtomicU32::new(0) }
    }
}

/// The inputs of one peer count.
struct Scale {
    peers: Peers,
    order: Vec<u32>,
}

impl Scale {
    #[inline(always)]
    fn case(&self, i: usize) -> &(IbvWc, Area) {
        &self.peers.cases[self.order[i & (STREAM - 1)] as usize]
    }

    /// The attribute of completion `i`, as a user computes it.
    #[inline(always)]
    fn attr(&self, i: usize) -> AhAttr {
        let (wc, area) = self.case(i);
        let c = libibverbs::init_ah_from_wc(&self.peers.gids, 1, black_box(wc), Some(black_box(area))).unwrap();
        AhAttr::try_from(&c).unwrap()
    }
}

/// The job a baseline does for one completion: take a reference on the
/// attribute's AH (creating it on a miss), then give it back.
trait Baseline: Sync {
    fn acquire(&self, hal: &BenchHal, a: &AhAttr) -> u64;
    fn release(&self, a: &AhAttr);
}

impl<S: BuildHasher + Sync + Send> Baseline for Mutex<hashbrown::HashMap<AhAttr, (u64, u32), S>> {
    #[inline(always)]
    fn acquire(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        let mut m = self.lock().unwrap();
        let e = m.entry(*a).or_insert_with(|| (hal.create_ah(a, None).unwrap(), 0));
        e.1 += 1;
        e.0
    }
    #[inline(always)]
    fn release(&self, a: &AhAttr) {
        let mut m = self.lock().unwrap();
        if let Some(e) = m.get_mut(a) {
            e.1 -= 1;
        }
    }
}

impl<S: BuildHasher + Sync + Send> Baseline for RwLock<hashbrown::HashMap<AhAttr, Entry, S>> {
    #[inline(always)]
    fn acquire(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        if let Some(e) = self.read().unwrap().get(a) {
            e.refs.fetch_add(1, Ordering::AcqRel);
            return e.ah;
        }
        let mut m = self.write().unwrap();
        let e = m.entry(*a).or_insert_with(|| Entry::new(hal.create_ah(a, None).unwrap()));
        e.refs.fetch_add(1, Ordering::AcqRel);
        e.ah
    }
    #[inline(always)]
    fn release(&self, a: &AhAttr) {
        if let Some(e) = self.read().unwrap().get(a) {
            e.refs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Baseline for dashmap::DashMap<AhAttr, Entry, Fold> {
    #[inline(always)]
    fn acquire(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        if let Some(e) = self.get(a) {
            e.refs.fetch_add(1, Ordering::AcqRel);
            return e.ah;
        }
        let e = self.entry(*a).or_insert_with(|| Entry::new(hal.create_ah(a, None).unwrap()));
        e.refs.fetch_add(1, Ordering::AcqRel);
        e.ah
    }
    #[inline(always)]
    fn release(&self, a: &AhAttr) {
        if let Some(e) = self.get(a) {
            e.refs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Baseline for papaya::HashMap<AhAttr, Entry, Fold> {
    #[inline(always)]
    fn acquire(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        let m = self.pin();
        let e = match m.get(a) {
            Some(e) => e,
            None => m.get_or_insert_with(*a, || Entry::new(hal.create_ah(a, None).unwrap())),
        };
        e.refs.fetch_add(1, Ordering::AcqRel);
        e.ah
    }
    #[inline(always)]
    fn release(&self, a: &AhAttr) {
        if let Some(e) = self.pin().get(a) {
            e.refs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `k` completions from `from` through the baseline `m`.
#[inline(never)]
fn drive_map<B: Baseline>(m: &B, hal: &BenchHal, s: &Scale, from: usize, k: usize) {
    for i in from..from + k {
        let a = s.attr(i);
        black_box(m.acquire(hal, &a));
        m.release(black_box(&a));
    }
}

/// `k` completions from `from` through a responder over `cache`.
#[inline(never)]
fn drive_udah<C: AhCache>(cache: C, s: &Scale, from: usize, k: usize) {
    let mut r = Box::new(Responder::<C, 256>::from_snapshot(cache, s.peers.gids.clone(), Config::default()));
    for i in from..from + k {
        let (wc, area) = s.case(i);
        let h = r.resolve(black_box(wc), black_box(area)).unwrap();
        r.release(black_box(h)).unwrap();
    }
}

/// `k` completions on each of `threads` threads (thread `j` starting a
/// quarter of the stream after thread `j - 1`): the slowest thread's time.
fn on_threads(threads: usize, from: usize, k: usize, job: &(dyn Fn(usize, usize) + Sync)) -> Duration {
    let start = Barrier::new(threads);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|j| {
                let start = &start;
                sc.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    job(from.wrapping_add(j * (STREAM / 4)), k);
                    t0.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn filled<B: Baseline>(m: B, hal: &BenchHal, s: &Scale) -> B {
    for a in &s.peers.attrs {
        m.acquire(hal, a);
        m.release(a);
    }
    m
}

fn bench_peers<const N: usize>(n: usize, c: &mut Criterion) {
    let s = Scale { peers: Peers::new(n, Spread::Scrambled), order: stream(n, Popularity::Uniform, STREAM, 0x0001) };
    let hal = BenchHal::new(None);
    let table: Box<AhTable<BenchHal, N>> = Box::new(AhTable::new());
    {
        let mut r =
            Box::new(Responder::<_, 256>::from_snapshot(table.shared(&hal), s.peers.gids.clone(), Config::default()));
        for (wc, area) in &s.peers.cases {
            if let Ok(h) = r.resolve(wc, area) {
                r.release(h).unwrap();
            }
        }
    }
    let mutex = filled(Mutex::new(hashbrown::HashMap::with_capacity_and_hasher(n, Fold::default())), &hal, &s);
    let rwlock = filled(RwLock::new(hashbrown::HashMap::with_capacity_and_hasher(n, Fold::default())), &hal, &s);
    let dash = filled(dashmap::DashMap::with_capacity_and_hasher(n, Fold::default()), &hal, &s);
    let pap = filled(papaya::HashMap::with_capacity_and_hasher(n, Fold::default()), &hal, &s);
    let mutex_sip = filled(Mutex::new(hashbrown::HashMap::with_capacity_and_hasher(n, Sip::default())), &hal, &s);
    let rwlock_sip = filled(RwLock::new(hashbrown::HashMap::with_capacity_and_hasher(n, Sip::default())), &hal, &s);

    let mut g = c.benchmark_group("base");
    g.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(20);
    for threads in THREADS {
        for name in IMPLS {
            let (t, hal, s) = (&*table, &hal, &s);
            let job: Box<dyn Fn(usize, usize) + Sync> = match name {
                "udah-shared" => Box::new(move |f, k| drive_udah(t.shared(hal), s, f, k)),
                "udah-session" => Box::new(move |f, k| drive_udah(t.session(hal), s, f, k)),
                "mutex" => Box::new(|f, k| drive_map(&mutex, hal, s, f, k)),
                "rwlock" => Box::new(|f, k| drive_map(&rwlock, hal, s, f, k)),
                "dashmap" => Box::new(|f, k| drive_map(&dash, hal, s, f, k)),
                "papaya" => Box::new(|f, k| drive_map(&pap, hal, s, f, k)),
                "mutex-sip" => Box::new(|f, k| drive_map(&mutex_sip, hal, s, f, k)),
                "rwlock-sip" => Box::new(|f, k| drive_map(&rwlock_sip, hal, s, f, k)),
                _ => unreachable!(),
            };
            let mut from = 0usize;
            g.bench_function(BenchmarkId::new(format!("{name}-{threads}t"), n), |b| {
                b.iter_custom(|iters| {
                    let k = iters as usize;
                    let d = on_threads(threads, from, k, &*job);
                    from = from.wrapping_add(k);
                    d
                })
            });
        }
    }
    g.finish();
}

/// udah's median over each map's (ns per completion per thread), for the
/// rows that ran after `since`.
fn ratio_report(since: SystemTime) {
    let dir = criterion_dir();
    let ns = |name: &str, t: usize, n: usize| median_ns(&dir, &format!("base/{name}-{t}t/{n}"), since);
    println!("\nudah time / map time (median ns per completion per thread; < 1: udah faster)");
    println!(
        "{:>7} {:>3} {:>12} {:>8} {:>8} {:>8} {:>13} {:>13}",
        "peers", "thr", "map", "map ns", "shared", "session", "shared/map", "session/map"
    );
    for n in PEERS {
        for t in THREADS {
            let (sh, se) = (ns("udah-shared", t, n), ns("udah-session", t, n));
            for name in &IMPLS[2..] {
                let m = ns(name, t, n);
                let r = |u: Option<f64>| match (u, m) {
                    (Some(u), Some(m)) if m > 0.0 => format!("{:.3}", u / m),
                    _ => "-".to_owned(),
                };
                println!(
                    "{n:>7} {t:>3} {name:>12} {:>8} {:>8} {:>8} {:>13} {:>13}",
                    fmt(m),
                    fmt(sh),
                    fmt(se),
                    r(sh),
                    r(se)
                );
            }
        }
    }
}

fn main() {
    // A table passes through `AhTable::new()`'s return value: give it room
    // in unoptimised builds.
    std::thread::Builder::new().stack_size(512 << 20).spawn(real_main).unwrap().join().unwrap();
}

fn real_main() {
    let since = SystemTime::now();
    let mut c = Criterion::default().configure_from_args().output_directory(&criterion_dir());
    bench_peers::<{ 1 << 8 }>(PEERS[0], &mut c);
    bench_peers::<{ 1 << 17 }>(PEERS[1], &mut c);
    c.final_summary();
    ratio_report(since);
}
