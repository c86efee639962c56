//! The AH table (`udah_core::table::AhTable`) against the usual
//! alternatives, in one criterion run with the ratios printed at the end:
//!
//! * **hit**: `get_or_create` on a cached AH plus `release`, at 1 and 2
//!   threads, against a UCX-style `Mutex<HashMap<AhAttr, (ah, refs)>>` and a
//!   `RwLock<HashMap<AhAttr, (ah, AtomicU32 refs)>>` with the same semantics
//!   (take a reference, give it back);
//! * **hit only**: the same look-ups, timed without their releases: each
//!   thread takes [`CHUNK`] references under the clock, then gives them back
//!   with the clock stopped (so refcounts stay ≤ `CHUNK` × threads); the
//!   table also with `get_or_create_prepared` (key and hash computed once per
//!   peer, as a runtime with per-peer state keeps them);
//! * **resolve**: completion + 40-byte area → handle (`AhTable::resolve`)
//!   against `init_ah_from_wc` + the same maps, with its release, and
//!   **resolve only** without (timed as *hit only*);
//! * **session** rows: the same through one `udah_core::table::Session` per
//!   thread (made outside the clock), whose repeated hits are served from
//!   leased references with no locked instruction, and whose releases go
//!   back to the lease;
//! * **miss**: every look-up creates, with a backend that sleeps like a RoCE
//!   create (1 ms), at 1 and 2 threads: the table creates outside its lock,
//!   the mutex baseline (as UCX does) inside.
//!
//! At 2 threads the reported time is per operation *per thread* (both
//! threads run `iters` operations at once); "disjoint" gives each thread its
//! own peers, "shared" makes both threads hit the same 64 AHs. In the *only*
//! rows a thread's untimed releases may overlap the other thread's timed
//! look-ups (in "shared", on the same entries). The summary's last column is
//! the table's total rate over all threads.
//!
//! Instruction counts (no hardware counters needed): with
//! `UDAH_AH_TABLE_ICOUNT_GATE=1` the binary runs itself under
//! `valgrind --tool=callgrind` at two loop counts and checks ΔIr/ΔK (minus
//! the bare loop, the same slice walk as every counted loop) for the
//! single-thread hit (`get_or_create`, reference kept; from an `AhAttr`, a
//! `PreparedAttr` and canonical words, the form a responder hands the
//! table), hit + release and `resolve`, and the same through a `Session`,
//! against gates set at the measured figures plus ~3 % (the hit's at its
//! target, 80 per table hit). The targets (80 per table hit, 250 per
//! `resolve`) are printed beside them:
//!
//! ```text
//! cargo bench -p udah-benches --bench ah_table                                   # criterion + ratios
//! UDAH_AH_TABLE_ICOUNT_GATE=1 cargo bench -p udah-benches --bench ah_table       # instruction gate
//! ```

use core::hint::black_box;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Barrier, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use criterion::Criterion;
use udah_benches::scale::BenchHal;
use udah_benches::{Family, Fixture, SEED};
use udah_core::GidTable;
use udah_core::ah::{AhAttr, AttrWords, IbvWc, PortNum, libibverbs};
use udah_core::attr::CanonicalWords;
use udah_core::hal::Hal;
use udah_core::responder::{Config, Responder};
use udah_core::table::{AhCache, AhTable, PreparedAttr};
use udah_core::wire::{Area, Evidence, Gid};

type Table = AhTable<BenchHal, 256>;
/// A session on [`Table`].
type Sess<'t> = udah_core::table::Session<'t, BenchHal, 256>;

/// The core pipeline of the fixture's port over `cache` (libibverbs
/// profile, no evidence, every completion admitted).
fn responder<C: AhCache>(cache: C, inp: &Inputs) -> Box<Responder<C, 256>> {
    Box::new(Responder::from_snapshot(cache, inp.gids.clone(), Config::default()))
}

/// The libibverbs profile's words for a completion (what the shared-table
/// benchmarks look up from threads that share one table and no pipeline).
#[inline(always)]
fn words(inp: &Inputs, wc: &IbvWc, area: &Area) -> AttrWords {
    libibverbs::words(&inp.gids, wc, area, Evidence::None).unwrap()
}

/// The UCX-style baseline: one mutex around a hash map; creates under it.
#[derive(Default)]
struct MutexMap(Mutex<HashMap<AhAttr, (u64, u32)>>);

impl MutexMap {
    #[inline]
    fn get(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        let mut m = self.0.lock().unwrap();
        if let Some(e) = m.get_mut(a) {
            e.1 += 1;
            return e.0;
        }
        let ah = hal.create_ah(a, None).unwrap();
        m.insert(*a, (ah, 1));
        ah
    }
    #[inline]
    fn release(&self, a: &AhAttr) {
        if let Some(e) = self.0.lock().unwrap().get_mut(a) {
            e.1 -= 1;
        }
    }
}

/// A reader-writer-lock baseline: shared lock plus an atomic refcount.
#[derive(Default)]
struct RwMap(RwLock<HashMap<AhAttr, (u64, AtomicU32)>>);

impl RwMap {
    #[inline]
    fn get(&self, hal: &BenchHal, a: &AhAttr) -> u64 {
        if let Some(e) = self.0.read().unwrap().get(a) {
            e.1.fetch_add(1, Ordering::Relaxed);
            return e.0;
        }
        let mut m = self.0.write().unwrap();
        let e = m.entry(*a).or_insert_with(|| (hal.create_ah(a, None).unwrap(), AtomicU32::new(0)));
        e.1.fetch_add(1, Ordering::Relaxed);
        e.0
    }
    #[inline]
    fn release(&self, a: &AhAttr) {
        if let Some(e) = self.0.read().unwrap().get(a) {
            e.1.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The inputs: the 64 RoCE v2/IPv4 completions of the 256-entry fixture
/// (distinct peers) that resolve, and their attributes.
struct Inputs {
    gids: GidTable<256>,
    cases: Vec<(IbvWc, Area)>,
    attrs: Vec<AhAttr>,
}

impl Inputs {
    fn new() -> Inputs {
        let fx: Fixture<256> = Fixture::new(SEED);
        let mut cases = Vec::new();
        let mut attrs = Vec::new();
        for c in fx.family(Family::RoceV2Ipv4) {
            if let Ok(a) = libibverbs::init_ah_from_wc(&fx.roce, 1, &c.wc, Some(&c.area))
                && let Ok(a) = AhAttr::try_from(&a)
                && !attrs.contains(&a)
            {
                cases.push((c.wc, c.area));
                attrs.push(a);
            }
        }
        assert!(attrs.len() >= 32, "fixture gives {} distinct peers", attrs.len());
        Inputs { gids: fx.roce.clone(), cases, attrs }
    }
}

/// A fresh attribute per `i` (for the miss benchmark).
fn unique_attr(i: u64) -> AhAttr {
    AhAttr::routed(PortNum::new(1).unwrap(), Gid::from_u128(0xfd00_u128 << 112 | u128::from(i)), 1, 64)
}

/// Runs `op(thread, i)` `iters` times on each of `threads` threads at once;
/// returns the wall time (so criterion reports time per op per thread).
fn parallel(threads: usize, iters: u64, op: &(dyn Fn(usize, u64) + Sync)) -> Duration {
    parallel_in(threads, iters, &|| (), &|_, t, i| op(t, i))
}

/// [`parallel`] with per-thread state made by `make` on each thread (a
/// table `Session`), outside the clock.
fn parallel_in<S>(
    threads: usize,
    iters: u64,
    make: &(impl Fn() -> S + Sync),
    op: &(impl Fn(&mut S, usize, u64) + Sync),
) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut st = make();
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        op(&mut st, t, i);
                    }
                    start.elapsed()
                })
            })
            .collect();
        barrier.wait();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

/// How many look-ups a thread times in a row before it releases them
/// untimed (the *only* benchmarks).
const CHUNK: u64 = 256;

/// One thread's share of an *only* benchmark: `acquire(order[p])` for `iters`
/// positions `p` cycling through `order`, timed in chunks of [`CHUNK`]; each
/// chunk's results are then given to `release` with the clock stopped.
/// Returns the timed total. Generic, not `dyn`, so that the look-up is
/// inlined into the timed loop, and the key order is computed before, so that
/// the loop has no division in it.
#[inline(always)]
fn chunked<S, X>(
    iters: u64,
    order: &[usize; CHUNK as usize],
    held: &mut Vec<X>,
    st: &mut S,
    acquire: &(impl Fn(&mut S, usize) -> X + Sync),
    release: &(impl Fn(&mut S, X) + Sync),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let len = left.min(CHUNK) as usize;
        let start = Instant::now();
        for &k in &order[..len] {
            held.push(acquire(st, k));
        }
        total += start.elapsed();
        for x in held.drain(..) {
            release(st, x);
        }
        left -= len as u64;
    }
    total
}

/// [`chunked`] on each of `threads` threads at once, thread `t` looking up
/// the keys `key(t, 0)`, …, `key(t, CHUNK − 1)` over and over (the [`pick`]
/// sequence itself when the number of keys divides `CHUNK`); returns the
/// largest timed total (so criterion reports time per look-up per thread).
fn parallel_only<X: Send>(
    threads: usize,
    iters: u64,
    key: &(impl Fn(usize, u64) -> usize + Sync),
    acquire: &(impl Fn(usize) -> X + Sync),
    release: &(impl Fn(X) + Sync),
) -> Duration {
    parallel_only_in(threads, iters, key, &|| (), &|_, k| acquire(k), &|_, x| release(x))
}

/// [`parallel_only`] with per-thread state made by `make` on each thread (a
/// table `Session`), outside the clock.
fn parallel_only_in<S, X: Send>(
    threads: usize,
    iters: u64,
    key: &(impl Fn(usize, u64) -> usize + Sync),
    make: &(impl Fn() -> S + Sync),
    acquire: &(impl Fn(&mut S, usize) -> X + Sync),
    release: &(impl Fn(&mut S, X) + Sync),
) -> Duration {
    let order = |t: usize| -> [usize; CHUNK as usize] { core::array::from_fn(|p| key(t, p as u64)) };
    if threads == 1 {
        let mut st = make();
        return chunked(iters, &order(0), &mut Vec::with_capacity(CHUNK as usize), &mut st, acquire, release);
    }
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, order) = (&barrier, order(t));
                s.spawn(move || {
                    let mut held = Vec::with_capacity(CHUNK as usize);
                    let mut st = make();
                    barrier.wait();
                    chunked(iters, &order, &mut held, &mut st, acquire, release)
                })
            })
            .collect();
        barrier.wait();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

/// Key `i` of thread `t`: disjoint halves, or all keys for both.
#[inline]
fn pick(attrs_len: usize, shared: bool, t: usize, i: u64) -> usize {
    if shared {
        (i as usize) % attrs_len
    } else {
        let half = attrs_len / 2;
        t * half + (i as usize) % half
    }
}

/// A backend, the table and both baselines, each holding every peer of
/// `inp` cached (refcount 0), so that look-ups hit.
fn warmed(inp: &Inputs) -> (BenchHal, Table, MutexMap, RwMap) {
    let hal = BenchHal::new(None);
    let table = Table::new();
    let mutex = MutexMap::default();
    let rw = RwMap::default();
    for a in &inp.attrs {
        let h = table.get_or_create(&hal, a).unwrap();
        table.release(&hal, h).unwrap();
        mutex.get(&hal, a);
        mutex.release(a);
        rw.get(&hal, a);
        rw.release(a);
    }
    (hal, table, mutex, rw)
}

fn bench_hit(c: &mut Criterion, inp: &Inputs) {
    let (hal, table, mutex, rw) = warmed(inp);
    let n = inp.attrs.len();
    let mut g = c.benchmark_group("ah_table_hit_1t");
    let mut i = 0usize;
    g.bench_function("table", |b| {
        b.iter(|| {
            let a = &inp.attrs[i % n];
            i = i.wrapping_add(1);
            let h = table.get_or_create(&hal, black_box(a)).unwrap();
            black_box(h.ah());
            table.release(&hal, h).unwrap();
        })
    });
    let mut sess = table.session(&hal);
    g.bench_function("table_session", |b| {
        // Through a `Session`: lease hits, releases back to the lease.
        b.iter(|| {
            let a = &inp.attrs[i % n];
            i = i.wrapping_add(1);
            let h = sess.get_or_create(black_box(a)).unwrap();
            black_box(h.ah());
            sess.release(h).unwrap();
        })
    });
    drop(sess);
    g.bench_function("table_get_only", |b| {
        // `get` + `release`: the look-up that never creates.
        b.iter(|| {
            let a = &inp.attrs[i % n];
            i = i.wrapping_add(1);
            let h = table.get(black_box(a)).unwrap();
            black_box(h.ah());
            table.release(&hal, h).unwrap();
        })
    });
    g.bench_function("mutex_hashmap", |b| {
        b.iter(|| {
            let a = &inp.attrs[i % n];
            i = i.wrapping_add(1);
            black_box(mutex.get(&hal, black_box(a)));
            mutex.release(a);
        })
    });
    g.bench_function("rwlock_hashmap", |b| {
        b.iter(|| {
            let a = &inp.attrs[i % n];
            i = i.wrapping_add(1);
            black_box(rw.get(&hal, black_box(a)));
            rw.release(a);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("ah_table_hit_2t");
    for shared in [false, true] {
        let sfx = if shared { "shared" } else { "disjoint" };
        g.bench_function(format!("table_{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel(2, iters, &|t, i| {
                    let a = &inp.attrs[pick(n, shared, t, i)];
                    let h = table.get_or_create(&hal, black_box(a)).unwrap();
                    black_box(h.ah());
                    table.release(&hal, h).unwrap();
                })
            })
        });
        g.bench_function(format!("table_session_{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel_in(2, iters, &|| table.session(&hal), &|s, t, i| {
                    let a = &inp.attrs[pick(n, shared, t, i)];
                    let h = s.get_or_create(black_box(a)).unwrap();
                    black_box(h.ah());
                    s.release(h).unwrap();
                })
            })
        });
        g.bench_function(format!("mutex_hashmap_{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel(2, iters, &|t, i| {
                    let a = &inp.attrs[pick(n, shared, t, i)];
                    black_box(mutex.get(&hal, black_box(a)));
                    mutex.release(a);
                })
            })
        });
        g.bench_function(format!("rwlock_hashmap_{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel(2, iters, &|t, i| {
                    let a = &inp.attrs[pick(n, shared, t, i)];
                    black_box(rw.get(&hal, black_box(a)));
                    rw.release(a);
                })
            })
        });
    }
    g.finish();
}

/// *hit only*: the look-ups of `bench_hit` without their releases (timed by
/// [`parallel_only`]), at 1 and 2 threads.
fn bench_hit_only(c: &mut Criterion, inp: &Inputs) {
    let (hal, table, mutex, rw) = warmed(inp);
    let n = inp.attrs.len();
    // The same attributes prepared once (key and hash), as a runtime with
    // per-peer state keeps them.
    let prepared: Vec<PreparedAttr> = inp.attrs.iter().map(PreparedAttr::new).collect();
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("ah_table_hit_only_{threads}t"));
        let modes: &[bool] = if threads == 1 { &[true] } else { &[false, true] };
        for &shared in modes {
            let sfx = match (threads, shared) {
                (1, _) => "",
                (_, false) => "_disjoint",
                (_, true) => "_shared",
            };
            g.bench_function(format!("table{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|k| {
                            let h = table.get_or_create(&hal, black_box(&inp.attrs[k])).unwrap();
                            black_box(h.ah());
                            h
                        },
                        &|h| table.release(&hal, h).unwrap(),
                    )
                })
            });
            g.bench_function(format!("table_prepared{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|k| {
                            let h = table.get_or_create(&hal, black_box(&prepared[k])).unwrap();
                            black_box(h.ah());
                            h
                        },
                        &|h| table.release(&hal, h).unwrap(),
                    )
                })
            });
            g.bench_function(format!("table_session{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only_in(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|| table.session(&hal),
                        &|s, k| {
                            let h = s.get_or_create(black_box(&inp.attrs[k])).unwrap();
                            black_box(h.ah());
                            h
                        },
                        &|s, h| s.release(h).unwrap(),
                    )
                })
            });
            g.bench_function(format!("table_session_prepared{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only_in(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|| table.session(&hal),
                        &|s, k| {
                            let h = s.get_or_create(black_box(&prepared[k])).unwrap();
                            black_box(h.ah());
                            h
                        },
                        &|s, h| s.release(h).unwrap(),
                    )
                })
            });
            g.bench_function(format!("mutex_hashmap{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|k| {
                            black_box(mutex.get(&hal, black_box(&inp.attrs[k])));
                            k
                        },
                        &|k| mutex.release(&inp.attrs[k]),
                    )
                })
            });
            g.bench_function(format!("rwlock_hashmap{sfx}"), |b| {
                b.iter_custom(|iters| {
                    parallel_only(
                        threads,
                        iters,
                        &|t, i| pick(n, shared, t, i),
                        &|k| {
                            black_box(rw.get(&hal, black_box(&inp.attrs[k])));
                            k
                        },
                        &|k| rw.release(&inp.attrs[k]),
                    )
                })
            });
        }
        g.finish();
    }
}

fn bench_resolve(c: &mut Criterion, inp: &Inputs) {
    let hal = BenchHal::new(None);
    let table = Table::new();
    let mutex = MutexMap::default();
    let rw = RwMap::default();
    let n = inp.cases.len();
    let baseline = |m: &dyn Fn(&AhAttr) -> u64, wc: &IbvWc, area: &Area| {
        let c = libibverbs::init_ah_from_wc(&inp.gids, 1, wc, Some(area)).unwrap();
        let a = AhAttr::try_from(&c).unwrap();
        (m(&a), a)
    };
    for (wc, area) in &inp.cases {
        let h = table.get_or_create(&hal, &words(inp, wc, area)).unwrap();
        table.release(&hal, h).unwrap();
    }
    let mut g = c.benchmark_group("ah_table_resolve_1t");
    let mut i = 0usize;
    let mut shared = responder(table.shared(&hal), inp);
    g.bench_function("table", |b| {
        b.iter(|| {
            let (wc, area) = &inp.cases[i % n];
            i = i.wrapping_add(1);
            let h = shared.resolve(black_box(wc), black_box(area)).unwrap();
            black_box(h.ah());
            shared.release(h).unwrap();
        })
    });
    drop(shared);
    let mut sess = responder(table.session(&hal), inp);
    g.bench_function("table_session", |b| {
        b.iter(|| {
            let (wc, area) = &inp.cases[i % n];
            i = i.wrapping_add(1);
            let h = sess.resolve(black_box(wc), black_box(area)).unwrap();
            black_box(h.ah());
            sess.release(h).unwrap();
        })
    });
    drop(sess);
    g.bench_function("mutex_hashmap", |b| {
        b.iter(|| {
            let (wc, area) = &inp.cases[i % n];
            i = i.wrapping_add(1);
            let (ah, a) = baseline(&|a| mutex.get(&hal, a), black_box(wc), black_box(area));
            black_box(ah);
            mutex.release(&a);
        })
    });
    g.bench_function("rwlock_hashmap", |b| {
        b.iter(|| {
            let (wc, area) = &inp.cases[i % n];
            i = i.wrapping_add(1);
            let (ah, a) = baseline(&|a| rw.get(&hal, a), black_box(wc), black_box(area));
            black_box(ah);
            rw.release(&a);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("ah_table_resolve_2t");
    g.bench_function("table_disjoint", |b| {
        b.iter_custom(|iters| {
            parallel(2, iters, &|t, i| {
                let (wc, area) = &inp.cases[pick(n, false, t, i)];
                let h = table.get_or_create(&hal, &words(inp, black_box(wc), black_box(area))).unwrap();
                black_box(h.ah());
                table.release(&hal, h).unwrap();
            })
        })
    });
    g.bench_function("table_session_disjoint", |b| {
        b.iter_custom(|iters| {
            parallel_in(2, iters, &|| responder(table.session(&hal), inp), &|s, t, i| {
                let (wc, area) = &inp.cases[pick(n, false, t, i)];
                let h = s.resolve(black_box(wc), black_box(area)).unwrap();
                black_box(h.ah());
                s.release(h).unwrap();
            })
        })
    });
    g.bench_function("mutex_hashmap_disjoint", |b| {
        b.iter_custom(|iters| {
            parallel(2, iters, &|t, i| {
                let (wc, area) = &inp.cases[pick(n, false, t, i)];
                let (ah, a) = baseline(&|a| mutex.get(&hal, a), black_box(wc), black_box(area));
                black_box(ah);
                mutex.release(&a);
            })
        })
    });
    g.finish();

    // Resolve only: the releases untimed (see `parallel_only`).
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("ah_table_resolve_only_{threads}t"));
        let shared = threads == 1;
        let sfx = if threads == 1 { "" } else { "_disjoint" };
        g.bench_function(format!("table{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel_only(
                    threads,
                    iters,
                    &|t, i| pick(n, shared, t, i),
                    &|k| {
                        let (wc, area) = &inp.cases[k];
                        let h = table.get_or_create(&hal, &words(inp, black_box(wc), black_box(area))).unwrap();
                        black_box(h.ah());
                        h
                    },
                    &|h| table.release(&hal, h).unwrap(),
                )
            })
        });
        g.bench_function(format!("table_session{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel_only_in(
                    threads,
                    iters,
                    &|t, i| pick(n, shared, t, i),
                    &|| responder(table.session(&hal), inp),
                    &|s, k| {
                        let (wc, area) = &inp.cases[k];
                        let h = s.resolve(black_box(wc), black_box(area)).unwrap();
                        black_box(h.ah());
                        h
                    },
                    &|s, h| s.release(h).unwrap(),
                )
            })
        });
        g.bench_function(format!("mutex_hashmap{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel_only(
                    threads,
                    iters,
                    &|t, i| pick(n, shared, t, i),
                    &|k| {
                        let (wc, area) = &inp.cases[k];
                        let (ah, a) = baseline(&|a| mutex.get(&hal, a), black_box(wc), black_box(area));
                        black_box(ah);
                        a
                    },
                    &|a| mutex.release(&a),
                )
            })
        });
        g.bench_function(format!("rwlock_hashmap{sfx}"), |b| {
            b.iter_custom(|iters| {
                parallel_only(
                    threads,
                    iters,
                    &|t, i| pick(n, shared, t, i),
                    &|k| {
                        let (wc, area) = &inp.cases[k];
                        let (ah, a) = baseline(&|a| rw.get(&hal, a), black_box(wc), black_box(area));
                        black_box(ah);
                        a
                    },
                    &|a| rw.release(&a),
                )
            })
        });
        g.finish();
    }
}

fn bench_miss(c: &mut Criterion) {
    let hal = BenchHal::new(Some(Duration::from_millis(1)));
    let table = Table::new();
    let mutex = MutexMap::default();
    let next = AtomicU64::new(0);
    let mut g = c.benchmark_group("ah_table_miss_roce_1ms");
    g.sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(200));
    for threads in [1usize, 2] {
        g.bench_function(format!("table_{threads}t"), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, &|_, _| {
                    let a = unique_attr(next.fetch_add(1, Ordering::Relaxed));
                    let h = table.get_or_create(&hal, &a).unwrap();
                    table.release(&hal, h).unwrap();
                })
            })
        });
        g.bench_function(format!("mutex_hashmap_{threads}t"), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, &|_, _| {
                    let a = unique_attr(next.fetch_add(1, Ordering::Relaxed));
                    black_box(mutex.get(&hal, &a));
                    mutex.release(&a);
                })
            })
        });
    }
    g.finish();
}

#[path = "ah_table/icount.rs"]
mod icount;
#[path = "ah_table/summary.rs"]
mod summary;

use icount::{icount_gate, icount_mode};
use summary::summary;

fn main() {
    if let Ok(spec) = std::env::var("UDAH_AH_TABLE_ICOUNT") {
        return icount_mode(&spec);
    }
    if std::env::var_os("UDAH_AH_TABLE_ICOUNT_GATE").is_some() {
        return icount_gate();
    }
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("criterion");
    let since = SystemTime::now();
    let mut c = Criterion::default().configure_from_args().output_directory(&dir);
    let inp = Inputs::new();
    bench_hit(&mut c, &inp);
    bench_hit_only(&mut c, &inp);
    bench_resolve(&mut c, &inp);
    bench_miss(&mut c);
    c.final_summary();
    summary(&dir, since);
}
