//! The thin layer between the C entry points and the core: the C
//! [`Responder`] owns a [`udah_core::responder::Responder`] (the GID-table
//! snapshot of one (context, port), the libibverbs profile, an open
//! admission policy, and the shared AH table over the application's
//! protection domain as its cache, with [`PdBackend`] as the core's `Hal`),
//! and adds what C needs around it: the C attribute of either profile, the
//! lock-free hit path (per-thread snapshot copies, references out counted
//! per table slot, found from the `struct ibv_ah *` C gives back), and the
//! counters of `struct udah_stats`.
//!
//! The verbs it needs from a context the application owns (borrowed: never
//! closed or freed here) are the four of [`Verbs`], so that a borrowed-context
//! constructor of `udah-hal-ibverbs` can replace them without touching the
//! callers.

use core::cell::{RefCell, UnsafeCell};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use udah_core::ah::{AhAttr, IbvAhAttr, IbvWc, KernelWc, Profile, ProfileError, kernel, libibverbs};
use udah_core::attr::{CanonicalWords, PortNum};
use udah_core::error::errno;
use udah_core::hal::{AhToken, Error, ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::responder::{Admission, Config, Refreshed, ResolveError, Responder as CoreResponder, STAGE};
use udah_core::table::{AhHandle, AhTable, Lookup, Shared, TableError};
use udah_core::wire::{Area, Evidence, Gid};
use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

use crate::ffi::{ibv_ah, ibv_ah_attr, ibv_context, ibv_pd};

/// Capacity of a GID snapshot (rxe's table has 1024 slots; mlx5 RoCE 255).
pub const GID_CAP: usize = 1024;
/// A responder's AH-table capacity unless its configuration asks for
/// another.
pub const AH_CAP: usize = 1024;
/// The largest AH table a responder takes: the last of
/// [`AH_SLOTS`](udah_core::heap::AH_SLOTS) (2²¹ slots, 128 MiB).
pub const MAX_AH_SLOTS: usize = udah_core::heap::AH_SLOTS[udah_core::heap::AH_SLOTS.len() - 1];

/// One port's GID-table snapshot.
pub type Gids = GidTable<GID_CAP>;

/// A failure as an errno value (what the C API reports).
mod backend;
mod events;
mod responder;
#[cfg(test)]
mod tests;

pub use backend::*;
pub use events::EventCounts;
pub use responder::{Options, Responder};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a critical section (caught at the C boundary) happens
    // before the handle map is touched or after it is consistent again, and
    // the core responder keeps its own invariants: the data stays usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counters of a responder that the core's do not cover (for
/// [`Stats`]; the table's and the re-snapshots come from the core).
#[derive(Debug, Default)]
struct Counters {
    init_calls: AtomicU64,
    init_failures: AtomicU64,
    create_calls: AtomicU64,
    create_failures: AtomicU64,
    destroy_calls: AtomicU64,
    refused: AtomicU64,
    events: AtomicU64,
    refresh_failures: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A snapshot of a responder's counters: the C struct itself (one
/// definition, in `lib.rs`, which cbindgen reads).
pub use crate::udah_stats as Stats;

/// Why an AH request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AhFailure {
    /// The attribute computation failed: its errno.
    Attr(i32),
    /// The AH table or the backend failed: its errno.
    Table(i32),
    /// The admission policy refused the completion's source (`EACCES`).
    Refused,
}

impl AhFailure {
    /// The errno to report.
    pub fn errno(self) -> i32 {
        match self {
            AhFailure::Attr(e) | AhFailure::Table(e) => e,
            AhFailure::Refused => libc::EACCES,
        }
    }
}

fn table_failure(e: TableError<Errno>) -> AhFailure {
    AhFailure::Table(match e {
        // An attribute the cache cannot turn into an AH (an SL above 15).
        TableError::InvalidAttr(_) => return AhFailure::Attr(libc::EINVAL),
        TableError::Backend(Errno(e)) => e,
        TableError::Full | TableError::RefcountOverflow => libc::ENOMEM,
        TableError::Pending | TableError::Contended => libc::EAGAIN,
        TableError::StaleHandle => libc::EINVAL,
        _ => libc::EIO,
    })
}

fn resolve_failure(e: ResolveError<Errno>) -> AhFailure {
    match e {
        ResolveError::Profile(ProfileError::Libibverbs(f)) => AhFailure::Attr(f.error.errno()),
        ResolveError::Profile(ProfileError::Kernel(f)) => AhFailure::Attr(f.error.errno()),
        ResolveError::Profile(_) => AhFailure::Attr(libc::EINVAL),
        ResolveError::Refused(_) => AhFailure::Refused,
        ResolveError::Table(t) => table_failure(t),
        _ => AhFailure::Table(libc::EIO),
    }
}

/// The AH table of a C responder of `N` slots.
type Table<const N: usize> = AhTable<PdBackend, N>;

/// The AH cache of a C responder: the core's shared table over the
/// application's PD (see [`Responder`] for why not a [`Session`](udah_core::table::Session)),
/// both also held by the [`Responder`] for its lock-free hits.
type Cache<const N: usize> = Shared<Arc<PdBackend>, Arc<Table<N>>>;

/// The core pipeline of a C responder: snapshot, libibverbs profile, open
/// admission, the shared cache.
type Core<const N: usize> = CoreResponder<Cache<N>, GID_CAP>;

/// The C references handed out on one table slot, with the one table
/// reference (the anchor) that keeps the slot's entry while any is out.
///
/// `word` is `seq << 33 | BUSY | count`: `count` C references are out
/// (each `udah_create_ah*` adds one, each `udah_destroy_ah` takes one), and
/// while `count > 0` the slot holds `anchor`, the [`AhHandle`] of the first
/// of them, and `token`, its AH. The transitions 0 → 1 and 1 → 0 set `BUSY`
/// for the few stores that write or take the anchor (whoever sees `BUSY`
/// waits); `seq` moves at each 0 → 1, so that a give-back that read the
/// token of one incarnation cannot take a reference of the next.
#[repr(align(64))]
struct Out {
    word: AtomicU64,
    token: AtomicU64,
    anchor: UnsafeCell<Option<AhHandle<AhPtr>>>,
}

// SAFETY: `anchor` is only read or written by the thread that set `BUSY` in
// `word` (one at a time, `Acquire`/`Release` on `word`); the handle inside is
// plain data (`Send`).
unsafe impl Sync for Out {}

const BUSY: u64 = 1 << 32;
const COUNT: u64 = BUSY - 1;
const SEQ_ONE: u64 = 1 << 33;
const SEQ: u64 = !(SEQ_ONE - 1);

impl Out {
    fn new() -> Out {
        Out { word: AtomicU64::new(0), token: AtomicU64::new(0), anchor: UnsafeCell::new(None) }
    }

    fn outstanding(&self) -> u64 {
        self.word.load(Ordering::Acquire) & COUNT
    }

    /// The word once `BUSY` is clear (spinning, then yielding: the holder
    /// may have been preempted in its three stores).
    fn settled(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let w = self.word.load(Ordering::Acquire);
            if w & BUSY == 0 {
                return w;
            }
            spins = spins.wrapping_add(1);
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Slots of the AH-to-slot hint map per table slot.
const HINTS_PER_SLOT: usize = 4;

/// The hint-map slot of `ah` in a map of `hints` slots (a power of two).
fn hint_of(ah: AhPtr, hints: usize) -> usize {
    // Fibonacci hashing of the address (allocations are 16-byte aligned).
    ((ah.0 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - hints.trailing_zeros())) as usize
}

/// A thread's copy of a responder's GID snapshot: `epoch` is the responder's
/// [`Responder::epoch`] when it was copied.
struct LocalGids {
    id: u64,
    epoch: u64,
    gids: Box<Gids>,
}

/// How many responders' snapshots a thread keeps (least recently added out).
const LOCAL_GIDS: usize = 4;

std::thread_local! {
    static LOCAL: RefCell<Vec<LocalGids>> = const { RefCell::new(Vec::new()) };
}

/// A random hash seed for a responder's AH table: the senders a responder
/// answers choose their source GIDs, and with a known seed they could craft
/// GIDs that all land in the same windows and push the other peers out
/// ([`AhTable::with_seed`]). `RandomState`'s keys come from the OS's random
/// source once per thread and move for each new state.
fn random_seed() -> u64 {
    use core::hash::BuildHasher;
    std::hash::RandomState::new().hash_one(0x7564_6168_u64)
}

/// Attempts of a request on a fresh snapshot copy while re-snapshots race
/// it, before it takes the core responder's mutex.
const STALE_RETRIES: usize = 3;

/// Responder ids, for the threads' snapshot copies (never reused).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A C responder: a [`udah_core::responder::Responder`] (one port's GID
/// snapshot, the libibverbs profile, the AH cache of one PD) plus what C
/// needs around it: the references handed out per table slot, and the
/// counters. Thread safe.
///
/// Thread safety. A hit takes no lock. The core responder resolves through
/// `&mut self` (it owns the GID snapshot and swaps it on a refresh), so it
/// sits behind a [`Mutex`], and only misses, refreshes, `close` and `stats`
/// take it. A hit computes the words against the calling thread's copy of
/// the snapshot (re-copied under the mutex when the responder's `epoch`,
/// moved by every re-snapshot, differs from the copy's), looks them up in the
/// shared [`AhTable`] with its lock-free [`get`](AhTable::get), and checks
/// the epoch again: if a refresh ran in between, the reference goes back and
/// the request takes the locked path, so no AH is built from a snapshot that
/// a refresh replaced. (An entry created after a refresh is only reached
/// through the creator's release of the slot word, which the hit's `Acquire`
/// reads, so the second check sees that refresh's epoch.) Anything the hit
/// does not finish (a profile failure, a miss, an entry in creation) goes to
/// the core responder under the mutex, as every call did before: the result
/// and errno are the core's.
///
/// The cache is the [`Shared`] table, not a per-thread
/// [`Session`](udah_core::table::Session): the C ABI has no per-thread
/// object to keep a session in, and an AH handed out on one thread may be
/// given back (or the responder destroyed) on another.
///
/// C gives back only the `struct ibv_ah *`: the references out are counted
/// per table slot ([`Out`]), found from the AH through a hint map (AH
/// address → slot, written on hand-out; a stale or overwritten hint falls
/// back to a scan of the slots' AHs, as does an AH this responder never
/// handed out, which gives `EINVAL`).
pub struct Engine<const N: usize> {
    port: u8,
    /// Made over a context: events and refreshes re-read the GID table.
    refreshable: bool,
    /// This responder's id for the threads' snapshot copies.
    id: u64,
    /// Moves (under the mutex) with every re-snapshot.
    epoch: AtomicU64,
    table: Arc<Table<N>>,
    backend: Arc<PdBackend>,
    /// Per table slot: the C references out.
    out: Box<[Out]>,
    /// AH address → slot + 1 (0: none), a hint checked against `out`.
    hints: Box<[AtomicU32]>,
    inner: Mutex<Box<Core<N>>>,
    /// The core responder's admission policy (a copy, read without its
    /// mutex).
    admission: Admission,
    counters: Counters,
}

impl<const N: usize> core::fmt::Debug for Engine<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Responder").field("port", &self.port).field("ah_slots", &N).finish_non_exhaustive()
    }
}

/// A new table of `N` slots with a random seed (`ENOMEM` when it cannot be
/// built).
fn new_table<const N: usize>() -> Result<Arc<Table<N>>, Errno> {
    udah_core::heap::boxed_table::<PdBackend, N>(random_seed()).map(Arc::from).map_err(|_| Errno(libc::ENOMEM))
}

impl<const N: usize> Engine<N> {
    /// A responder over the application's context and PD (both borrowed).
    /// `pd` may be null: the responder then only computes attributes.
    ///
    /// # Safety
    /// `ctx` must be a live context and `pd` null or a live PD of it; both
    /// must outlive the responder.
    pub unsafe fn open(
        ctx: *mut ibv_context,
        port: u8,
        pd: *mut ibv_pd,
        verbs: Verbs,
        admission: Admission,
    ) -> Result<Engine<N>, Errno> {
        if ctx.is_null() {
            return Err(Errno(libc::EINVAL));
        }
        let Some(port_num) = PortNum::new(port) else { return Err(Errno(libc::EINVAL)) };
        let (backend, table) = (Arc::new(PdBackend::new(ctx, pd, verbs)), new_table::<N>()?);
        // The first snapshot: `PdBackend::snapshot_gids`.
        let config = Config { admission, ..Config::default() };
        let core = Box::new(Core::new(Shared::new(backend.clone(), table.clone()), port_num, config)?);
        Ok(Engine::with_core(core, backend, table, true))
    }

    /// A responder over a fixed snapshot (no context: events and refreshes
    /// are refused); with a null `pd` it only computes attributes.
    ///
    /// # Safety
    /// `pd` must be null or a live PD that outlives the responder.
    pub unsafe fn from_gids(
        gids: Box<Gids>,
        pd: *mut ibv_pd,
        verbs: Verbs,
        admission: Admission,
    ) -> Result<Engine<N>, Errno> {
        let backend = Arc::new(PdBackend::new(core::ptr::null_mut(), pd, verbs));
        let table = new_table::<N>()?;
        let config = Config { admission, ..Config::default() };
        let core = Box::new(Core::from_snapshot(Shared::new(backend.clone(), table.clone()), *gids, config));
        Ok(Engine::with_core(core, backend, table, false))
    }

    fn with_core(core: Box<Core<N>>, backend: Arc<PdBackend>, table: Arc<Table<N>>, refreshable: bool) -> Engine<N> {
        Engine {
            admission: core.config().admission,
            port: core.port(),
            refreshable,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            epoch: AtomicU64::new(1),
            table,
            backend,
            out: (0..N).map(|_| Out::new()).collect(),
            hints: (0..N * HINTS_PER_SLOT).map(|_| AtomicU32::new(0)).collect(),
            inner: Mutex::new(core),
            counters: Counters::default(),
        }
    }

    /// `f` over the calling thread's copy of the snapshot (re-copied under
    /// the mutex when a refresh moved the epoch) and the copy's epoch. The
    /// mutex is not held while `f` runs.
    fn with_gids<R>(&self, mut f: impl FnMut(&Gids, u64) -> R) -> R {
        let now = self.epoch.load(Ordering::Acquire);
        let local =
            LOCAL.try_with(|cell| cell.try_borrow_mut().ok().and_then(|mut v| self.on_local(&mut v, now, &mut f)));
        if let Ok(Some(r)) = local {
            return r;
        }
        // The thread is exiting (its locals are gone), or this is a nested
        // call (a create that came back into libudah): a copy of its own.
        let (copy, epoch) = {
            let _call = crate::fork::enter();
            let g = lock(&self.inner);
            (Box::new(g.gids().clone()), self.epoch.load(Ordering::Acquire))
        };
        f(&copy, epoch)
    }

    fn on_local<R>(&self, v: &mut Vec<LocalGids>, now: u64, f: &mut impl FnMut(&Gids, u64) -> R) -> Option<R> {
        let i = match v.iter().position(|l| l.id == self.id) {
            Some(i) => i,
            None => {
                if v.len() >= LOCAL_GIDS {
                    v.remove(0);
                }
                let _call = crate::fork::enter();
                let g = lock(&self.inner);
                let epoch = self.epoch.load(Ordering::Acquire);
                v.push(LocalGids { id: self.id, epoch, gids: Box::new(g.gids().clone()) });
                v.len().wrapping_sub(1)
            }
        };
        let l = v.get_mut(i)?;
        if l.epoch != now {
            let _call = crate::fork::enter();
            let g = lock(&self.inner);
            *l.gids = g.gids().clone();
            l.epoch = self.epoch.load(Ordering::Acquire);
        }
        Some(f(&l.gids, l.epoch))
    }

    /// The port.
    pub fn port(&self) -> u8 {
        self.port
    }

    /// `ibv_init_ah_from_wc` with `profile` and `evidence` against the core
    /// responder's snapshot (the calling thread's copy of it: no lock): the
    /// attribute as the C struct, and 0 or the errno. The attribute is what
    /// the profile's C code leaves, also on failure (which the core's word
    /// form does not carry; hence [`compute`] rather than
    /// [`CoreResponder::words`]).
    pub fn init_ah_from_wc(
        &self,
        wc: &IbvWc,
        area: Option<&Area>,
        profile: Profile,
        evidence: Evidence,
    ) -> (IbvAhAttr, i32) {
        bump(&self.counters.init_calls);
        let r = self.with_gids(|g, _| compute(g, self.port, wc, area, profile, evidence));
        if r.1 != 0 {
            bump(&self.counters.init_failures);
        }
        r
    }

    /// A deduplicated, referenced AH for a completion, as the core
    /// responder's [`resolve`](CoreResponder::resolve) with the C
    /// responder's configuration (`Config::default()`: the libibverbs
    /// profile without evidence, as `ibv_create_ah_from_wc`; an open
    /// admission policy), and without its mutex: the words from the calling
    /// thread's snapshot copy, then the shared table, whose miss creates the
    /// AH with no lock held (see [`Engine`]).
    pub fn create_ah_from_wc(&self, wc: &IbvWc, area: &Area) -> Result<AhPtr, AhFailure> {
        bump(&self.counters.create_calls);
        for _ in 0..STALE_RETRIES {
            if let Some(r) = self.with_gids(|g, epoch| self.resolve_on(g, epoch, wc, area)) {
                return self.keep(r);
            }
        }
        // Re-snapshots kept racing this request: the core responder under
        // its mutex (a create there holds it; this takes a refresh storm).
        let _call = crate::fork::enter();
        let r = lock(&self.inner).resolve(wc, area).map_err(resolve_failure);
        self.keep(r)
    }

    /// `create_ah_from_wc` against the snapshot copy `gids` of epoch
    /// `epoch`: `None` when a re-snapshot or a retirement moved the epoch
    /// meanwhile (the request is to be made again on a fresh copy).
    fn resolve_on(
        &self,
        gids: &Gids,
        epoch: u64,
        wc: &IbvWc,
        area: &Area,
    ) -> Option<Result<AhHandle<AhPtr>, AhFailure>> {
        let words = match libibverbs::words(gids, wc, area, Evidence::None) {
            Ok(w) => w,
            Err(f) => return Some(Err(AhFailure::Attr(f.error.errno()))),
        };
        if !self.admission.is_open() && self.admission.check(&words, wc).is_err() {
            bump(&self.counters.refused);
            return Some(Err(AhFailure::Refused));
        }
        let h = match self.get_or_create(&words) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if self.epoch.load(Ordering::Acquire) == epoch {
            return Some(Ok(h));
        }
        let _call = crate::fork::enter();
        // A refresh ran since the copy was taken. If the entry was created
        // from the copy after the refresh's sweep, it is built on a GID
        // entry that may have changed: retire whatever the copy and the
        // current snapshot disagree on (a no-op when only a retirement
        // moved the epoch), give the reference back, and ask again.
        let _ = self.table.release(&self.backend, h);
        let g = lock(&self.inner);
        self.table.retire_gid_change(&self.backend, gids, g.gids());
        None
    }

    /// [`create_ah_from_wc`](Self::create_ah_from_wc) for each completion
    /// of a polled batch (`None` area: `EFAULT`), results in `out` (as many
    /// as both slices hold). On a table too large to stay in a core's
    /// caches ([`AhTable::PREFETCH`]), in groups of [`STAGE`]: each
    /// completion's words on the thread's snapshot copy and its slots
    /// prefetched, then the group's look-ups, so that their cache and TLB
    /// misses overlap instead of coming one after the other (the core
    /// responder's staged batch, `resolve_batch`, over this engine's table).
    /// A smaller table takes the completions one by one.
    pub fn create_ah_batch(&self, batch: &[(IbvWc, Option<&Area>)], out: &mut [Result<AhPtr, AhFailure>]) {
        let one = |(wc, area): &(IbvWc, Option<&Area>)| match area {
            Some(a) => self.create_ah_from_wc(wc, a),
            None => {
                bump(&self.counters.create_calls);
                self.keep(Err(AhFailure::Attr(libc::EFAULT)))
            }
        };
        if !Table::<N>::PREFETCH {
            for (o, req) in out.iter_mut().zip(batch) {
                *o = one(req);
            }
            return;
        }
        for (group, outs) in batch.chunks(STAGE).zip(out.chunks_mut(STAGE)) {
            let mut got: [Option<Result<AhHandle<AhPtr>, AhFailure>>; STAGE] = [const { None }; STAGE];
            let current = self.with_gids(|gids, epoch| {
                let mut staged = [None; STAGE];
                for (st, (wc, area)) in staged.iter_mut().zip(group) {
                    *st = area
                        .and_then(|a| libibverbs::words(gids, wc, a, Evidence::None).ok())
                        .filter(|w| self.admission.is_open() || self.admission.check(w, wc).is_ok())
                        .and_then(CanonicalWords::new)
                        .map(|w| self.table.prefetch(w));
                }
                for (g, st) in got.iter_mut().zip(&staged) {
                    *g = st.as_ref().map(|h| self.get_or_create(h));
                }
                let current = self.epoch.load(Ordering::Acquire) == epoch;
                if !current {
                    // As in `resolve_on`: what the stale copy built goes.
                    let _call = crate::fork::enter();
                    let core = lock(&self.inner);
                    self.table.retire_gid_change(&self.backend, gids, core.gids());
                }
                current
            });
            for ((o, g), req) in outs.iter_mut().zip(got).zip(group) {
                *o = match g {
                    Some(r) if current => {
                        bump(&self.counters.create_calls);
                        self.keep(r)
                    }
                    Some(r) => {
                        // A re-snapshot raced the group: asked again.
                        if let Ok(h) = r {
                            let _ = self.table.release(&self.backend, h);
                        }
                        one(req)
                    }
                    // A failure, a refusal, or a form the canonical words
                    // do not take: the single path says which.
                    None => one(req),
                };
            }
        }
    }

    /// A reference to the table's AH for `key`: a lock-free hit, or a miss
    /// that creates with no lock held, as a call in flight for `fork` (a
    /// hit opens no window a fork could split: see [`crate::fork`]).
    fn get_or_create(&self, key: &impl Lookup) -> Result<AhHandle<AhPtr>, AhFailure> {
        if let Some(h) = self.table.get(key) {
            return Ok(h);
        }
        let _call = crate::fork::enter();
        self.table.get_or_create(&self.backend, key).map_err(table_failure)
    }

    /// A deduplicated, referenced AH for an attribute, from the same cache
    /// (an attribute equal to a completion's shares its AH); a miss creates
    /// with no lock held.
    pub fn create_ah(&self, attr: &IbvAhAttr) -> Result<AhPtr, AhFailure> {
        bump(&self.counters.create_calls);
        let r = match AhAttr::try_from(attr) {
            Ok(a) => self.get_or_create(&a),
            Err(_) => Err(AhFailure::Attr(libc::EINVAL)),
        };
        self.keep(r)
    }

    fn keep(&self, r: Result<AhHandle<AhPtr>, AhFailure>) -> Result<AhPtr, AhFailure> {
        let r = r.and_then(|h| self.hand_out(h));
        if r.is_err() {
            bump(&self.counters.create_failures);
        }
        r
    }

    /// Counts a reference out on the handle's slot: the first becomes the
    /// slot's anchor, a further one goes back to the table at once (the
    /// anchor keeps the entry).
    fn hand_out(&self, h: AhHandle<AhPtr>) -> Result<AhPtr, AhFailure> {
        let (ah, slot) = (h.ah(), h.slot());
        let Some(out) = self.out.get(slot) else {
            let _ = self.table.release(&self.backend, h);
            return Err(AhFailure::Table(libc::EIO));
        };
        let mut w = out.word.load(Ordering::Acquire);
        loop {
            if w & BUSY != 0 {
                w = out.settled();
            }
            if w & COUNT == 0 {
                // 0 → 1: this handle becomes the anchor, in a `BUSY` window
                // that a fork must not split.
                let _call = crate::fork::enter();
                let next = (w & SEQ).wrapping_add(SEQ_ONE) | BUSY | 1;
                match out.word.compare_exchange_weak(w, next, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        out.token.store(ah.0, Ordering::Relaxed);
                        // SAFETY: this thread set `BUSY`: it alone touches
                        // the anchor until the store below clears it.
                        unsafe { *out.anchor.get() = Some(h) };
                        out.word.store(next & !BUSY, Ordering::Release);
                        if let Some(hint) = self.hints.get(hint_of(ah, self.hints.len())) {
                            hint.store(slot as u32 + 1, Ordering::Relaxed);
                        }
                        return Ok(ah);
                    }
                    Err(cur) => w = cur,
                }
            } else {
                // The anchor holds a reference to this slot, so the slot
                // holds the handle's entry (a slot is reused only once its
                // last reference is gone).
                if w & COUNT == COUNT {
                    let _ = self.table.release(&self.backend, h);
                    return Err(AhFailure::Table(libc::ENOMEM));
                }
                match out.word.compare_exchange_weak(w, w.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        // Not the last table reference (the anchor's is
                        // out): cannot destroy, cannot fail but for a bug.
                        return match self.table.release(&self.backend, h) {
                            Ok(()) => Ok(ah),
                            Err(e) => Err(table_failure(e)),
                        };
                    }
                    Err(cur) => w = cur,
                }
            }
        }
    }

    /// Gives back one reference to `ah`; `EINVAL` for an AH this responder
    /// did not hand out (or handed out fewer times).
    pub fn destroy_ah(&self, ah: AhPtr) -> Result<(), i32> {
        bump(&self.counters.destroy_calls);
        let hinted = self.hints.get(hint_of(ah, self.hints.len())).map(|h| h.load(Ordering::Relaxed)).unwrap_or(0);
        if let Some(out) = (hinted as usize).checked_sub(1).and_then(|s| self.out.get(s))
            && let Some(r) = self.give_back(out, ah)
        {
            return r;
        }
        // No hint, or another AH's: every slot (a miss here is `EINVAL`).
        for out in self.out.iter() {
            if out.token.load(Ordering::Relaxed) == ah.0
                && let Some(r) = self.give_back(out, ah)
            {
                return r;
            }
        }
        Err(libc::EINVAL)
    }

    /// Whether `ah`, handed out by this responder and not yet given back,
    /// is still the current AH of its peer: `Ok(false)` once retired (a GID
    /// change or eviction replaced it; the handle stays valid until given
    /// back), `EINVAL` for an AH this responder has not out.
    pub fn is_current(&self, ah: AhPtr) -> Result<bool, i32> {
        let hinted = self.hints.get(hint_of(ah, self.hints.len())).map(|h| h.load(Ordering::Relaxed)).unwrap_or(0);
        if let Some(out) = (hinted as usize).checked_sub(1).and_then(|s| self.out.get(s))
            && let Some(r) = self.anchor_current(out, ah)
        {
            return Ok(r);
        }
        for out in self.out.iter() {
            if out.token.load(Ordering::Relaxed) == ah.0
                && let Some(r) = self.anchor_current(out, ah)
            {
                return Ok(r);
            }
        }
        Err(libc::EINVAL)
    }

    /// Whether the anchor of `out` is current, when `out` holds references
    /// to `ah` (`None` otherwise). Sets `BUSY` for the read, as the
    /// transitions that write the anchor do, and restores the word after.
    fn anchor_current(&self, out: &Out, ah: AhPtr) -> Option<bool> {
        let mut w = out.word.load(Ordering::Acquire);
        loop {
            if w & BUSY != 0 {
                w = out.settled();
            }
            if w & COUNT == 0 || out.token.load(Ordering::Relaxed) != ah.0 {
                return None;
            }
            // A `BUSY` window: a call in flight for `fork`.
            let _call = crate::fork::enter();
            match out.word.compare_exchange_weak(w, w | BUSY, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    // SAFETY: this thread set `BUSY`: it alone touches the
                    // anchor until the store below clears it.
                    let current = unsafe { (*out.anchor.get()).as_ref().map(|h| self.table.is_current(h)) };
                    out.word.store(w, Ordering::Release);
                    return current;
                }
                Err(cur) => w = cur,
            }
        }
    }

    /// One reference to `ah` back to `out`: `None` when `out` has none of it.
    fn give_back(&self, out: &Out, ah: AhPtr) -> Option<Result<(), i32>> {
        let mut w = out.word.load(Ordering::Acquire);
        loop {
            if w & BUSY != 0 {
                w = out.settled();
            }
            // The token of `w`'s incarnation (stored before `w` was
            // released; a newer one has another `seq`, and the CAS fails).
            if w & COUNT == 0 || out.token.load(Ordering::Relaxed) != ah.0 {
                return None;
            }
            let last = w & COUNT == 1;
            let next = if last { (w & SEQ) | BUSY } else { w.wrapping_sub(1) };
            // The last give-back opens a `BUSY` window and may destroy the
            // AH: a call in flight for `fork`.
            let _call = last.then(crate::fork::enter);
            match out.word.compare_exchange_weak(w, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) if last => {
                    // SAFETY: this thread set `BUSY`: it alone touches the
                    // anchor until the store below clears it.
                    let anchor = unsafe { (*out.anchor.get()).take() };
                    out.token.store(0, Ordering::Relaxed);
                    out.word.store(w & SEQ, Ordering::Release);
                    return Some(match anchor {
                        Some(h) => self.table.release(&self.backend, h).map_err(|e| table_failure(e).errno()),
                        None => Err(libc::EIO),
                    });
                }
                Ok(_) => return Some(Ok(())),
                Err(cur) => w = cur,
            }
        }
    }

    /// Re-reads the GID table now and retires the AHs whose local GID
    /// changed (handles out stay valid until given back): the core's
    /// [`refresh`](CoreResponder::refresh), after moving the backend's
    /// generation (libibverbs has no GID generation to read, so a refresh
    /// is what says the table may have changed). A new snapshot moves the
    /// epoch, so that threads re-copy it and hits in flight re-check.
    pub fn refresh(&self) -> Result<(), i32> {
        if !self.refreshable {
            return Err(libc::EOPNOTSUPP);
        }
        let mut g = lock(&self.inner);
        g.backend().bump_generation();
        match g.refresh() {
            Ok(Refreshed::Current) => Ok(()),
            Ok(_) => {
                self.epoch.fetch_add(1, Ordering::Release);
                Ok(())
            }
            Err(Errno(e)) => {
                bump(&self.counters.refresh_failures);
                Err(e)
            }
        }
    }

    /// `ibv_get_async_event`'s event for this responder: refreshes on a GID,
    /// port, LID, SM or re-register event of its port (or of no port).
    /// `Ok(true)` when the snapshot was re-read.
    pub fn handle_event(&self, event_type: u32, port: Option<i32>) -> Result<bool, i32> {
        use crate::ffi::*;
        bump(&self.counters.events);
        let relevant = matches!(
            event_type,
            IBV_EVENT_GID_CHANGE
                | IBV_EVENT_PORT_ACTIVE
                | IBV_EVENT_PORT_ERR
                | IBV_EVENT_LID_CHANGE
                | IBV_EVENT_PKEY_CHANGE
                | IBV_EVENT_SM_CHANGE
                | IBV_EVENT_CLIENT_REREGISTER
        );
        if !relevant || port.is_some_and(|p| p != i32::from(self.port)) {
            return Ok(false);
        }
        self.refresh().map(|()| true)
    }

    fn outstanding(&self) -> u64 {
        self.out.iter().map(Out::outstanding).sum()
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let g = lock(&self.inner);
        let s = g.stats();
        let t = s.table;
        Stats {
            init_calls: ld(&c.init_calls),
            init_failures: ld(&c.init_failures),
            create_calls: ld(&c.create_calls),
            create_failures: ld(&c.create_failures),
            destroy_calls: ld(&c.destroy_calls),
            ah_hits: ld(&c.create_calls).saturating_sub(ld(&c.create_failures)).saturating_sub(t.creates),
            kernel_ahs_created: t.creates,
            kernel_ahs_destroyed: t.destroys,
            kernel_ahs_live: t.live,
            ahs_outstanding: self.outstanding(),
            events: ld(&c.events),
            refreshes: s.resnapshots,
            refresh_failures: ld(&c.refresh_failures),
            gid_generation: g.gids().generation(),
            ah_slots: N as u64,
            refused: ld(&c.refused).saturating_add(s.refused.total()),
            ..Stats::default()
        }
    }

    /// Destroys every cached AH. `EBUSY` (and nothing destroyed) while AHs
    /// handed out have not been given back.
    pub fn close(&self) -> Result<(), i32> {
        let _g = lock(&self.inner);
        if self.out.iter().any(|o| o.word.load(Ordering::Acquire) & (BUSY | COUNT) != 0) {
            return Err(libc::EBUSY);
        }
        self.table.retire_all(&self.backend);
        Ok(())
    }

    /// Retires the AHs of this responder's port whose destination GID is
    /// `dgid` (its peer's link-layer address changed); handles out stay
    /// valid until given back and [`is_current`](Self::is_current) answers
    /// `false` for them. Moves the epoch, so that hits in flight re-check.
    /// Returns how many were retired.
    pub fn retire_dgid(&self, dgid: &Gid) -> usize {
        let n = self.table.retire_dgid(&self.backend, self.port, dgid);
        if n > 0 {
            self.epoch.fetch_add(1, Ordering::Release);
        }
        n
    }
}

/// Both profiles against a snapshot, as the C attribute and 0 / errno.
pub fn compute(
    gids: &Gids,
    port: u8,
    wc: &IbvWc,
    area: Option<&Area>,
    profile: Profile,
    evidence: Evidence,
) -> (IbvAhAttr, i32) {
    match profile {
        Profile::Libibverbs => match libibverbs::init_ah_from_wc_with(gids, port, wc, area, evidence) {
            Ok(a) => (a, 0),
            Err(f) => (f.attr, f.error.errno()),
        },
        Profile::Kernel => {
            // The userspace completion carries no VLAN nor network type: the
            // kernel's flags are IB_WC_GRH alone (the same bit 0).
            let kwc = KernelWc {
                wc_flags: wc.wc_flags & udah_core::ah::IB_WC_GRH,
                slid: u32::from(wc.slid),
                sl: wc.sl,
                dlid_path_bits: wc.dlid_path_bits,
                src_qp: wc.src_qp,
                pkey_index: wc.pkey_index,
                ..KernelWc::default()
            };
            match kernel::init_ah_attr_from_wc_with(gids, &kwc, area, evidence) {
                Ok(a) => match a.to_ah_attr(0xff) {
                    Ok(attr) => (IbvAhAttr::from(&attr), 0),
                    Err(_) => (IbvAhAttr::default(), libc::EINVAL),
                },
                Err(f) => {
                    let attr = f.attr.to_ah_attr(0xff).map(|a| IbvAhAttr::from(&a)).unwrap_or_default();
                    (attr, f.error.errno())
                }
            }
        }
    }
}
