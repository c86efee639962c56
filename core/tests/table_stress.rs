//! Stress test: 2 threads × `UDAH_TABLE_STRESS_OPS` random operations each
//! (default 1,000,000, the figure; CI runs the default, in debug
//! too) on one shared table, in a hit-heavy and a churn-heavy mix, against
//! the counting backend.
//!
//! Checked on every operation: a handle's AH is alive and belongs to the
//! handle's key. Checked at the end: no AH destroyed twice; created −
//! destroyed = live backend AHs = the table's `live`; hits + misses = look-ups;
//! after releasing every handle and `retire_all`, nothing is alive. Each mix
//! runs twice: on the table, and through one `Session` per thread. No timing
//! assertion.

mod common;

use core::sync::atomic::Ordering;

use common::{CountingHal, attr};
use udah_core::table::{AhHandle, AhTable, TableError};

fn ops() -> u64 {
    std::env::var("UDAH_TABLE_STRESS_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

/// xorshift64*: deterministic per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

struct Mix {
    /// Distinct keys.
    keys: u32,
    /// Out of 1000: the share of operations that release a held handle.
    release: u64,
    /// Out of 1000: the share that retires (all, or by age).
    retire: u64,
    /// Handles a thread holds at most.
    hold: usize,
    /// Backend AH limit (0: none).
    limit: usize,
}

fn run<const N: usize>(mix: &Mix, seed: u64, sessions: bool) {
    let n = ops();
    let hal = CountingHal::new(usize::try_from(2 * n + 1024).unwrap());
    hal.limit.store(mix.limit, Ordering::Relaxed);
    let table: AhTable<CountingHal, N> = AhTable::new();
    let lookups: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2u64)
            .map(|t| {
                let (hal, table) = (&hal, &table);
                s.spawn(move || {
                    let mut lookups = 0u64;
                    let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let mut held: Vec<(AhHandle<u64>, u32)> = Vec::with_capacity(mix.hold + 1);
                    // With `sessions`, look-ups go through this thread's
                    // session and half the releases too (references are
                    // interchangeable); the session is dropped at the end.
                    let mut sess = sessions.then(|| table.session(hal));
                    for i in 0..n {
                        let r = rng.next();
                        let dice = r % 1000;
                        if dice < mix.retire {
                            if dice.is_multiple_of(2) {
                                table.retire_all(hal);
                            } else {
                                table.advance_clock(i);
                                table.retire_older_than(hal, 1000);
                            }
                        } else if dice < mix.retire + mix.release || held.len() >= mix.hold {
                            if !held.is_empty() {
                                let (h, k) = held.swap_remove((r >> 20) as usize % held.len());
                                assert_eq!(hal.owner(h.ah()), Some(k), "referenced entry destroyed");
                                match sess.as_mut() {
                                    Some(s) if r & 1 == 0 => s.release(h).unwrap(),
                                    _ => table.release(hal, h).unwrap(),
                                }
                            }
                        } else {
                            let k = ((r >> 32) % u64::from(mix.keys)) as u32;
                            lookups += 1;
                            let res = match (sess.as_mut(), dice.is_multiple_of(7)) {
                                (Some(s), true) => s.try_get_or_create(&attr(k)),
                                (Some(s), false) => s.get_or_create(&attr(k)),
                                (None, true) => table.try_get_or_create(hal, &attr(k)),
                                (None, false) => table.get_or_create(hal, &attr(k)),
                            };
                            match res {
                                Ok(h) => {
                                    assert_eq!(hal.owner(h.ah()), Some(k), "handle reads another entry's AH");
                                    held.push((h, k));
                                }
                                Err(TableError::Full | TableError::Pending | TableError::Contended) => {}
                                Err(TableError::Backend(_)) => {}
                                Err(e) => panic!("{e:?}"),
                            }
                        }
                    }
                    for (h, k) in held {
                        assert_eq!(hal.owner(h.ah()), Some(k));
                        table.release(hal, h).unwrap();
                    }
                    drop(sess);
                    lookups
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let (c, d) = (hal.creates.load(Ordering::Relaxed), hal.destroys.load(Ordering::Relaxed));
    assert_eq!(hal.bad_destroys.load(Ordering::Relaxed), 0, "double destroy");
    assert_eq!(c - d, hal.live() as u64);
    assert_eq!(hal.live(), hal.live_scan());
    let st = table.stats_exact();
    assert_eq!((st.creates, st.destroys, st.live), (c, d, c - d));
    assert_eq!(st.hits + st.misses, lookups, "every look-up is one hit or one miss");
    table.retire_all(&hal);
    assert_eq!(hal.live(), 0, "retire_all with no handle out destroys everything");
    let st = table.stats_exact();
    assert_eq!((st.live, st.entries), (0, 0));
    eprintln!("{st:?}");
}

#[test]
fn hit_heavy() {
    // 16 keys in 256 slots, rare retirement: almost every look-up is a hit.
    run::<256>(&Mix { keys: 16, release: 480, retire: 1, hold: 8, limit: 0 }, 0x1234, false);
}

#[test]
fn hit_heavy_sessions() {
    // The same through `Session`s: most hits served from leases.
    run::<256>(&Mix { keys: 16, release: 480, retire: 1, hold: 8, limit: 0 }, 0x4321, true);
}

#[test]
fn churn_heavy() {
    // 200 keys in 32 slots, a backend limit of 24 AHs, frequent retirement:
    // misses, evictions (window full and OutOfResources), retirements.
    run::<32>(&Mix { keys: 200, release: 450, retire: 20, hold: 6, limit: 24 }, 0x5678, false);
}

#[test]
fn churn_heavy_sessions() {
    // The same through `Session`s, whose leases pin entries: more `Full` and
    // out-of-resources results, leases given back on every retirement.
    run::<32>(&Mix { keys: 200, release: 450, retire: 20, hold: 6, limit: 24 }, 0x8765, true);
}
