//! The C responder's create + destroy, against the locked design it
//! replaced, in the same run: `udah_create_ah_from_wc` then
//! `udah_destroy_ah` (through [`Responder`], the code behind them) on 64
//! peers, 1 and 2 threads, with fake verbs (no kernel AH on the hit path).
//!
//! - `held`: every peer has a reference out for the whole run (a server
//!   with AHs in use): each create is a hit on a slot with references out.
//! - `loop`: nothing else held (the `ah_loop.c` / udaddy pattern): each
//!   create takes the slot's count from 0 to 1 and its destroy back.
//!
//! `locked` is the previous `engine::Responder` (one `Mutex` over the core
//! responder and a `HashMap` of handles, per call) over the same core
//! responder, table and fake verbs: kept here as the baseline only.
//!
//! `cargo bench -p udah-capi --bench responder` prints new/locked ratios.
#![allow(missing_docs, clippy::unwrap_used)]

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Instant, SystemTime};

use criterion::{BenchmarkId, Criterion, criterion_group};
use udah::engine::{AhPtr, GID_CAP, Gids, PdBackend, Responder, Verbs, gids_from_list};
use udah::ffi::{ibv_ah, ibv_ah_attr, ibv_pd};
use udah_benches::report::{criterion_dir, median_ns};
use udah_core::ah::{IBV_WC_GRH, IbvWc};
use udah_core::responder::{Config, Responder as CoreResponder};
use udah_core::table::{AhHandle, AhTable, Shared};
use udah_core::wire::{Area, Gid};
use udah_core::{GidEntry, GidType, LinkLayer};

const PEERS: usize = 64;
const LOCAL: [u8; 4] = [10, 0, 0, 1];
static NEXT: AtomicU64 = AtomicU64::new(0x1000);

/// A fake `ibv_create_ah`: a fresh address (never dereferenced).
unsafe extern "C" fn fake_create(_pd: *mut ibv_pd, _attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    core::ptr::with_exposed_provenance_mut(NEXT.fetch_add(64, Ordering::Relaxed) as usize)
}

/// A fake `ibv_destroy_ah`.
unsafe extern "C" fn fake_destroy(_ah: *mut ibv_ah) -> i32 {
    0
}

fn verbs() -> Verbs {
    Verbs { create_ah: fake_create, destroy_ah: fake_destroy }
}

fn pd() -> *mut ibv_pd {
    core::ptr::NonNull::<ibv_pd>::dangling().as_ptr()
}

fn gids() -> Box<Gids> {
    gids_from_list(1, LinkLayer::Ethernet, 16, [(3, GidEntry::new(Gid::from_ipv4(LOCAL), GidType::RoceV2))]).unwrap()
}

fn area(peer: usize) -> Area {
    let mut a = [0u8; 40];
    let h = [0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0];
    a[20..32].copy_from_slice(&h);
    a[32..36].copy_from_slice(&[10, 0, 1, peer as u8]);
    a[36..40].copy_from_slice(&LOCAL);
    a
}

type Core = CoreResponder<Shared<PdBackend, Box<AhTable<PdBackend, 1024>>>, GID_CAP>;

/// The previous design: one lock per call over the core responder and the
/// handles handed out, by AH address.
struct Locked(Mutex<(Box<Core>, Handles)>);

/// The handles handed out, by AH address.
type Handles = HashMap<u64, Vec<AhHandle<AhPtr>>>;

impl Locked {
    fn new() -> Locked {
        let cache = Shared::new(PdBackend::new(core::ptr::null_mut(), pd(), verbs()), Box::new(AhTable::new()));
        Locked(Mutex::new((Box::new(Core::from_snapshot(cache, *gids(), Config::default())), HashMap::new())))
    }
    fn create(&self, wc: &IbvWc, area: &Area) -> AhPtr {
        let mut g = self.0.lock().unwrap();
        let h = g.0.resolve(wc, area).unwrap();
        let ah = h.ah();
        g.1.entry(ah.0).or_default().push(h);
        ah
    }
    fn destroy(&self, ah: AhPtr) {
        let mut g = self.0.lock().unwrap();
        let v = g.1.get_mut(&ah.0).unwrap();
        let h = v.pop().unwrap();
        if v.is_empty() {
            g.1.remove(&ah.0);
        }
        g.0.release(h).unwrap();
    }
}

trait Api: Sync {
    fn create(&self, wc: &IbvWc, area: &Area) -> AhPtr;
    fn destroy(&self, ah: AhPtr);
}

impl Api for Locked {
    fn create(&self, wc: &IbvWc, area: &Area) -> AhPtr {
        Locked::create(self, wc, area)
    }
    fn destroy(&self, ah: AhPtr) {
        Locked::destroy(self, ah)
    }
}

impl Api for Responder {
    fn create(&self, wc: &IbvWc, area: &Area) -> AhPtr {
        self.create_ah_from_wc(wc, area).unwrap()
    }
    fn destroy(&self, ah: AhPtr) {
        self.destroy_ah(ah).unwrap()
    }
}

/// `k` create + destroy pairs per thread on `threads` threads (thread `j`
/// starts at peer `j * 32`): the slowest thread's time.
fn run(api: &dyn Api, areas: &[Area], threads: usize, k: u64) -> Duration {
    let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|j| {
                let (start, wc) = (&start, &wc);
                s.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    let mut p = j * 32;
                    for _ in 0..k {
                        let ah = api.create(black_box(wc), black_box(&areas[p % PEERS]));
                        api.destroy(black_box(ah));
                        p = p.wrapping_add(1);
                    }
                    t0.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

const IMPLS: [&str; 2] = ["new", "locked"];
const MODES: [&str; 2] = ["held", "loop"];
const THREADS: [usize; 2] = [1, 2];

/// `name`'s responder with every peer's AH cached; in `held` mode one
/// reference to each stays out.
fn setup(name: &str, mode: &str, areas: &[Area]) -> Box<dyn Api> {
    let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
    let api: Box<dyn Api> = if name == "new" {
        // SAFETY: the fake verbs never dereference the PD.
        Box::new(unsafe { Responder::from_gids(gids(), pd(), verbs()) }.expect("a responder"))
    } else {
        Box::new(Locked::new())
    };
    let held: Vec<AhPtr> = areas.iter().map(|a| api.create(&wc, a)).collect();
    if mode == "loop" {
        held.iter().for_each(|&ah| api.destroy(ah));
    }
    api
}

fn bench(c: &mut Criterion) {
    let areas: Arc<Vec<Area>> = Arc::new((0..PEERS).map(area).collect());
    let mut g = c.benchmark_group("capi");
    g.warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(20);
    for mode in MODES {
        for name in IMPLS {
            let api = setup(name, mode, &areas);
            for threads in THREADS {
                g.bench_function(BenchmarkId::new(format!("{name}-{mode}-{threads}t"), PEERS), |b| {
                    b.iter_custom(|iters| run(&*api, &areas, threads, iters))
                });
            }
        }
    }
    g.finish();
}

fn report(since: SystemTime) {
    let dir = criterion_dir();
    println!("\nnew / locked (median ns per create+destroy per thread; < 1: new faster)");
    for mode in MODES {
        for t in THREADS {
            let ns = |n: &str| median_ns(&dir, &format!("capi/{n}-{mode}-{t}t/{PEERS}"), since);
            match (ns("new"), ns("locked")) {
                (Some(n), Some(l)) if l > 0.0 => {
                    println!("{mode:>5} {t}t  new {n:8.1}  locked {l:8.1}  ratio {:.3}", n / l)
                }
                _ => println!("{mode:>5} {t}t  -"),
            }
        }
    }
}

/// Instruction counts instead of times (a loaded machine): with
/// `UDAH_CAPI_CALLGRIND=K` set, each of these runs `K` single-thread pairs,
/// for `valgrind --tool=callgrind --toggle-collect='*cg_*'` (inclusive
/// counts per function, divided by `K`).
macro_rules! cg {
    ($($f:ident: $name:literal $mode:literal;)*) => {
        $(
            #[inline(never)]
            fn $f(api: &dyn Api, areas: &[Area], k: u64) {
                // Distinct bodies, so that the linker does not fold them.
                black_box(concat!($name, $mode));
                run_one(api, areas, k);
            }
        )*
        fn callgrind(k: u64) {
            let areas: Vec<Area> = (0..PEERS).map(area).collect();
            $( {
                let api = setup($name, $mode, &areas);
                $f(&*api, &areas, k);
            } )*
        }
    };
}

fn run_one(api: &dyn Api, areas: &[Area], k: u64) {
    let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
    for i in 0..k as usize {
        let ah = api.create(black_box(&wc), black_box(&areas[i % PEERS]));
        api.destroy(black_box(ah));
    }
}

cg! {
    cg_new_held: "new" "held";
    cg_locked_held: "locked" "held";
    cg_new_loop: "new" "loop";
    cg_locked_loop: "locked" "loop";
}

criterion_group!(benches, bench);

fn main() {
    if let Some(k) = std::env::var("UDAH_CAPI_CALLGRIND").ok().and_then(|k| k.parse().ok()) {
        callgrind(k);
        return;
    }
    let since = SystemTime::now();
    benches();
    Criterion::default().configure_from_args().final_summary();
    report(since);
}
