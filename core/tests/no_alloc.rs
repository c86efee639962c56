//! The AH table's hot path allocates nothing: a counting global allocator
//! around hits through `get`, `get_or_create`, a `Responder`'s `resolve` and
//! `resolve_batch` and their releases, and a `Session` made, used and dropped. (The crate is `no_std` without `alloc`, so this holds
//! by construction; the test keeps it honest for the backend calls too: a
//! hit must not reach the backend.)

mod common;

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicU64, Ordering};
use std::alloc::System;

use common::{CountingHal, attr};
use udah_core::ah::{IBV_WC_GRH, IbvWc};
use udah_core::responder::{Config, Responder};
use udah_core::table::{AhCache, AhTable};
use udah_core::{Gid, GidEntry, GidTable, GidType, LinkLayer};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Count only this thread's allocations (the test harness's own threads
    /// may allocate at any time).
    static COUNTING: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

fn count() {
    if COUNTING.with(core::cell::Cell::get) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter has no effect on the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same `layout` the caller gave us, under the same contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout` (above).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; `ptr`/`layout` are the caller's, from us.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A port's GID table holding 192.168.1.10 (RoCE v2) and a RoCE v2 IPv4
/// completion from 192.168.1.20 to it.
fn roce_v2_completion() -> (GidTable<16>, IbvWc, [u8; 40]) {
    let mut gids: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
    gids.set(3, GidEntry::new(Gid::from_ipv4([192, 168, 1, 10]), GidType::RoceV2)).unwrap();
    let mut area = [0u8; 40];
    area[20..]
        .copy_from_slice(&[0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0xb7, 0x42, 192, 168, 1, 20, 192, 168, 1, 10]);
    (gids, IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() }, area)
}

#[test]
fn hits_and_resolve_allocate_nothing() {
    let hal = CountingHal::new(64);
    let table: AhTable<CountingHal, 64> = AhTable::new();

    let (gids, wc, area) = roce_v2_completion();
    let batch = [(&wc, &area); 8];
    let a = attr(7);

    // Warm up: the misses create (the backend may allocate there).
    let h = table.get_or_create(&hal, &a).unwrap();
    table.release(&hal, h).unwrap();
    let mut shared: Responder<_, 16> = Responder::from_snapshot(table.shared(&hal), gids.clone(), Config::default());
    let h = shared.resolve(&wc, &area).unwrap();
    shared.release(h).unwrap();
    let creates = table.stats().creates;

    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    // A session: made, used (lease hits, refills, releases to the lease and
    // the shedding of surplus references) and dropped, all without the heap.
    let mut s: Responder<_, 16> = Responder::from_snapshot(table.session(&hal), gids.clone(), Config::default());
    for _ in 0..10_000 {
        let h = s.cache_mut().get_or_create(&a).unwrap();
        let h2 = s.resolve(&wc, &area).unwrap();
        s.release(h).unwrap();
        s.release(h2).unwrap();
    }
    drop(s);
    for _ in 0..10_000 {
        let h = table.get(&a).unwrap();
        table.release(&hal, h).unwrap();
        let h = table.get_or_create(&hal, &a).unwrap();
        table.release(&hal, h).unwrap();
        let h = shared.resolve(&wc, &area).unwrap();
        shared.release(h).unwrap();
        let mut out = [const { None }; 8];
        assert_eq!(shared.resolve_batch(batch, &mut out), 8);
        for r in out {
            shared.release(r.unwrap().unwrap()).unwrap();
        }
        let _ = table.stats();
        let _ = shared.cache().stats();
    }
    COUNTING.with(|c| c.set(false));
    let after = ALLOCS.load(Ordering::Relaxed);
    assert_eq!(after - before, 0, "the hit path allocated");
    assert_eq!(table.stats().creates, creates, "hits must not create");
}

/// The staged batch on a table large enough to stage (more than
/// `PREFETCH_BYTES`: 2²⁰ slots, 64 MiB) and more than half full, where each
/// completion's prefetch loads both windows of its key: no allocation
/// either, through the shared table and through a session.
#[test]
fn staged_batch_on_a_large_table_allocates_nothing() {
    const N: usize = 1 << 20;
    const FILL: u32 = (N / 2) as u32 + 1;
    type Big = AhTable<CountingHal, N>;
    const { assert!(Big::PREFETCH, "a 2^20-slot table is staged") };
    // 64 MiB, which an unoptimised build moves through the stack a few
    // times: built on a thread whose stack has room for it, then boxed.
    let stack = 4 * core::mem::size_of::<Big>() + (1 << 20);
    let table: Box<Big> =
        std::thread::Builder::new().stack_size(stack).spawn(|| Box::new(Big::new())).unwrap().join().unwrap();
    let hal = CountingHal::new(FILL as usize + 1);
    for i in 0..FILL {
        let h = table.get_or_create(&hal, &attr(i.wrapping_add(1 << 20))).unwrap();
        table.release(&hal, h).unwrap();
    }
    assert!(table.stats().entries > (N / 2) as u64, "more than half full: the deep prefetch");

    let (gids, wc, area) = roce_v2_completion();
    let batch = [(&wc, &area); 8];
    let mut shared: Responder<_, 16> = Responder::from_snapshot(table.shared(&hal), gids.clone(), Config::default());
    let h = shared.resolve(&wc, &area).unwrap();
    shared.release(h).unwrap();
    let creates = table.stats().creates;

    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    let mut session: Responder<_, 16> = Responder::from_snapshot(table.session(&hal), gids.clone(), Config::default());
    for _ in 0..1_000 {
        let mut out = [const { None }; 8];
        assert_eq!(shared.resolve_batch(batch, &mut out), 8);
        for r in out {
            shared.release(r.unwrap().unwrap()).unwrap();
        }
        let mut out = [const { None }; 8];
        assert_eq!(session.resolve_batch(batch, &mut out), 8);
        for r in out {
            session.release(r.unwrap().unwrap()).unwrap();
        }
    }
    drop(session);
    COUNTING.with(|c| c.set(false));
    let after = ALLOCS.load(Ordering::Relaxed);
    assert_eq!(after - before, 0, "the staged batch allocated");
    assert_eq!(table.stats().creates, creates, "hits must not create");
}
