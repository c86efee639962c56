//! [`AhTable`]: a fixed-capacity, deduplicating AH cache whose hits take no
//! lock, make no system call and allocate nothing.
//!
//! A UD responder needs one AH per peer it answers. Creating one is a system
//! call (and on RoCE a neighbour resolution that can take milliseconds), and
//! identical attributes should share one hardware AH, as irdma does in the
//! kernel (SEMANTICS §6.5–6.7). `AhTable` keeps the AHs a backend ([`Hal`])
//! created, keyed by the full [`AhAttr`], with a refcount each:
//!
//! * [`get_or_create`](AhTable::get_or_create): a hit takes a reference to the
//!   existing AH; a miss creates it once, however many threads miss at once;
//!   [`try_get_or_create`](AhTable::try_get_or_create) returns
//!   [`TableError::Pending`] instead of waiting for another thread's create;
//! * every look-up takes any key form ([`Lookup`]): an [`AhAttr`], a
//!   [`PreparedAttr`] (key and hash computed once: per-peer state in a
//!   runtime), or a profile's [`AttrWords`] (canonical words are the key);
//! * [`AhCache`]: the table with its backend ([`AhTable::shared`]) or a
//!   [`Session`] as the last stage of [`crate::responder::Responder`]
//!   (work completion + 40-byte area → handle in one call);
//! * [`release`](AhTable::release): entries whose refcount reaches zero stay
//!   cached; they are evicted (CLOCK) when a key's window is full or the
//!   backend reports [`ErrorKind::OutOfResources`];
//! * invalidation: [`retire_gid_change`](AhTable::retire_gid_change) and
//!   [`retire_older_than`](AhTable::retire_older_than) hide entries from new
//!   look-ups; handles already out stay valid, and the backend AH is destroyed
//!   when the last one is released;
//! * [`stats`](AhTable::stats), read without locks in O(1) (hits may lag by
//!   fewer than 256 per slot; [`stats_exact`](AhTable::stats_exact) walks
//!   the slots for the rest);
//! * [`Session`] ([`AhTable::session`]): one thread's view of the table whose
//!   repeated hits are served from references it leased in bulk, with no
//!   locked instruction and no write to shared memory: the hot path of a
//!   receive loop (3.2 ns per hit with a prepared key, 5.5 ns from an
//!   `AhAttr`, against 9.8 and 10.7 ns for the table's own CAS hit; on two
//!   threads they scale, see `benches/RESULTS.md`).
//!
//! # Identity
//!
//! The key is the whole [`AhAttr`] (port, DLID, SL, path bits, rate and the
//! GRH fields). On RoCE the backend's resolved layer-2 facts ([`L2Info`],
//! from [`Hal::resolve_l2`] at create time) are part of the AH's identity too,
//! but a hit must not ask the backend, so they are recorded with the entry
//! rather than probed: at most one *live* entry exists per attribute, built
//! with the L2 facts current at its creation. When those may have changed, the
//! caller retires old entries ([`retire_older_than`](AhTable::retire_older_than));
//! the next miss resolves again and creates a new AH. A retired entry and its
//! replacement can coexist while handles to the old one are out.
//!
//! # Layout
//!
//! `N` slots (a power of two, at most 2²⁴) of one 64-byte cache line each,
//! all the table keeps per entry (2²⁰ entries: 64 MiB): the lifecycle word,
//! the key packed in four `AtomicU64`, the AH as an [`AhToken`], and two
//! words for invalidation: the backend's L2 facts, the low 21 bits of the
//! port's GID generation and the low 32 bits of the table clock at creation
//! (`slot.rs`: how the cut fields compare). The counters are table-wide,
//! each on its own line where hot paths write it: the slow paths count
//! misses, creates, evictions, retirements, relocations and entries as they
//! go, and hits are carried out of the lifecycle words 256 at a time, so
//! [`stats`](AhTable::stats) reads a dozen words whatever `N`. A key lives in one of two windows of
//! [`WINDOW`](AhTable::WINDOW) consecutive slots (at most 8), both chosen by
//! a keyed hash of the key ([`AhTable::with_seed`]): look-ups scan the first
//! window, then the second, so a deleted entry needs no tombstone. A claim
//! takes a free slot of either window; when both are full it moves an
//! unreferenced entry to a free slot of *its* other window (bucketized cuckoo
//! displacement, paths of up to two moves, under the writer lock), and only
//! then evicts (CLOCK over both windows). The table thus stays 98–99 % full
//! before its first eviction whatever the addresses (with one window per
//! key it evicted at 19–41 % with scrambled ones; `tests/table_occupancy.rs`).
//! Only unreferenced entries move (no handle or lease names their slot),
//! the source `BUSY` before the destination is `LIVE`, so at most one live
//! entry holds a key; a reader that looks meanwhile misses and takes the
//! slow path. The lifecycle word packs the low 8 bits
//! of the slot's hit count, a 32-bit generation, a state, a CLOCK bit and a
//! 20-bit refcount (`slot.rs`), so that a hit — reference, CLOCK bit and hit
//! statistic — is one compare-and-swap, the only locked instruction of a hit
//! but for one `fetch_add` on the table's hit counter every 256 hits on a
//! slot, when the hit field wraps.
//!
//! # What waits on what
//!
//! **Readers never wait. Writers serialize only among themselves, on a lock
//! that is never held across a backend call; only a miss on the *same* key
//! waits for that key's create (or returns `Pending`).** Precisely:
//!
//! * A hit (the first step of every look-up, and all of [`get`](AhTable::get))
//!   is atomic loads of at most `WINDOW` slots plus one compare-and-swap, with
//!   no lock, no allocation and no system call. If its CAS loses to a
//!   concurrent change [`MAX_READ_RETRIES`] times it stops: `get` returns
//!   `None` and `get_or_create` takes the slow path. A reader never spins on
//!   a writer.
//! * [`release`](AhTable::release), [`retain`](AhTable::retain), eviction and
//!   retirement are CAS loops on one slot's lifecycle word (lock-free: a failed
//!   CAS means another thread's succeeded).
//! * Inserting takes the writer lock, a spin lock held while scanning the
//!   key's two windows (when both are full, also the other windows of their
//!   entries and of those entries' neighbours: at most 16 + 128 + 1,024 slot
//!   words), moving at most two entries and writing one key (no backend
//!   call, no allocation). Unrelated writers wait for at most that. An
//!   invalidation sweep takes the lock once, at its start, so that no entry
//!   moves past it.
//! * The backend's `create_ah` runs with the new slot in the `CREATING` state
//!   and no lock held. Readers skip such a slot; only misses on the *same*
//!   key wait for it ([`get_or_create`](AhTable::get_or_create), with
//!   [`crossbeam_utils::Backoff`]) or return [`TableError::Pending`]
//!   ([`try_get_or_create`](AhTable::try_get_or_create)). `destroy_ah` also
//!   runs with no lock held.
//!
//! # The read protocol, and why it is sound without `unsafe`
//!
//! The lifecycle word `M` of a slot is both its seqlock stamp and its
//! refcount. A reader:
//!
//! 1. loads `M` (`Acquire`) and goes on only if it is `LIVE`;
//! 2. loads the four key words and the AH token (`Relaxed`);
//! 3. issues `fence(Acquire)`;
//! 4. compare-and-swaps `M` → `M + 1 + 2⁵⁶` (one more reference, one more
//!    hit in the word's top byte, CLOCK bit set), `Acquire` on success *and*
//!    failure: on failure it goes back to step 2 with the value the CAS saw,
//!    at most [`MAX_READ_RETRIES`] times.
//!
//! The key and token of a slot change only while its word is `BUSY`, and a
//! writer makes it `BUSY` with a CAS (which reads the latest `M`), then issues
//! `fence(Release)`, then stores the words. If any word the reader loaded in
//! step 2 came from such a store, the writer's fence synchronises with the
//! reader's fence, so the writer's `BUSY` CAS happens before the reader's CAS,
//! which therefore reads `BUSY` or a later value and fails. So a successful
//! step 4 proves that every word read in step 2 belongs to the entry
//! published as `M`, and it takes the reference atomically with that proof:
//! the entry cannot be evicted or destroyed in between, because those need
//! `M` with refcount 0 and move it away with a CAS too. The 32-bit generation
//! makes `M` unique per incarnation of the slot: ABA would need the slot to
//! come back to the same generation — 2³² − 1 reuses of that one slot, each a
//! backend `create_ah`, between the reader's first load and its CAS — and to
//! the same hit field, refcount and CLOCK bit. (Within one incarnation `M`
//! does repeat — references come and go, the hit field wraps — but the key
//! and token do not change, so a CAS that succeeds on a repeated `M` is
//! right.) Every datum is an atomic: there is no data race to reason about,
//! and the crate has no `unsafe` but one prefetch hint of the batch path
//! (`table/prefetch.rs`), which reads nothing. loom checks the protocol
//! (`tests/loom_table.rs`).
//!
//! The slot's other two words, the L2 facts and the stamp (GID generation,
//! birth time), are not read by hits: they are written while the slot is
//! `CREATING` (by the creating thread, before its `Release` store of `LIVE`)
//! or `BUSY` (a move, under the writer lock), and read by [`l2`](AhTable::l2)
//! under a reference (so the incarnation cannot change) and by sweeps, which
//! also rewrite the stamp's GID generation of a `LIVE` entry (`Restamp`)
//! after checking that its word is unchanged; sweeps are the only writers
//! of a `LIVE` slot's stamp, and two sweeps of one port race on it as they
//! did on the separate word it was before.
//!
//! Releases decrement with `Release`; the thread that takes an entry's word
//! from refcount 0 (eviction, retirement) or from 1 (the last release of a
//! retired entry) to `BUSY` does so with `Acquire`, and only that thread calls
//! `destroy_ah`, exactly once per incarnation.
//!
//! # Handles
//!
//! An [`AhHandle`] carries the AH, the slot and the generation. It is neither
//! `Clone` nor `Copy`, and [`release`](AhTable::release) consumes it, so in
//! safe code a handle cannot be released twice, and its reference keeps its
//! incarnation alive: a handle of this table is never stale. A handle of
//! *another* table gives [`TableError::StaleHandle`] unless its slot and
//! 32-bit generation happen to equal a live incarnation here. Each table's
//! generations start from their own seed, spread over the 32 bits, and a
//! slot moves on by one generation per create in it, so that takes a
//! deliberate forgery or two tables whose slots have drifted by billions of
//! creates into step (with the 40-bit generations before the hit field moved
//! into the word, 256 times less likely).
//! Either way nothing is ever destroyed twice: `destroy_ah` is called only by
//! the one thread that moved an incarnation's word to `BUSY`, and a release
//! never takes a refcount below zero.
//!
//! # Verification
//!
//! * loom, seven models over the real code (atomics via `crate::sync`), two of
//!   them on sessions and one of a cuckoo move (a 16-slot table, two
//!   windows per key) racing a hit on the entry it moves:
//!   `RUSTFLAGS="--cfg loom -C debug-assertions=on" LOOM_MAX_PREEMPTIONS=2
//!   cargo test -p udah-core --release --test loom_table`;
//! * Miri over the unit tests: `MIRIFLAGS="-Zmiri-strict-provenance
//!   -Zmiri-symbolic-alignment-check" cargo +nightly miri test -p udah-core
//!   --lib -- table`;
//! * a model-based property test against a `HashMap` model
//!   (`tests/table_model.rs`, invariants listed there), a 2 × 1,000,000-op
//!   stress test (`tests/table_stress.rs`, `UDAH_TABLE_STRESS_OPS`), both
//!   also through sessions, and a counting-allocator test of the hit path
//!   (`tests/no_alloc.rs`);
//! * `benches/benches/ah_table.rs`: criterion against `Mutex<HashMap>` and
//!   `RwLock<HashMap>`, and a callgrind instruction gate.
//!
//! # Example
//!
//! ```
//! use udah_core::table::AhTable;
//! # use udah_core::ah::{AhAttr, PortNum, Sl};
//! # use udah_core::hal::{Hal, ErrorType, ErrorKind, PortInfo, L2Info};
//! # use udah_core::{GidTable, LinkLayer};
//! # use core::sync::atomic::{AtomicU64, Ordering};
//! # #[derive(Default)] struct Null(AtomicU64);
//! # impl ErrorType for Null { type Error = ErrorKind; }
//! # impl Hal for Null {
//! #     type Ah = u64;
//! #     fn port_info(&self, p: PortNum) -> Result<PortInfo, ErrorKind> { Ok(PortInfo::new(p.get(), LinkLayer::Infiniband, 1)) }
//! #     fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> { Ok(()) }
//! #     fn gid_generation(&self, _: PortNum) -> u64 { 0 }
//! #     fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> { Ok(None) }
//! #     fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> { Ok(self.0.fetch_add(1, Ordering::Relaxed)) }
//! #     fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> { Ok(()) }
//! # }
//! static TABLE: AhTable<Null, 64> = AhTable::new();
//!
//! let hal = Null::default();
//! let attr = AhAttr { port: PortNum::new(1).unwrap(), dlid: 7, sl: Sl::new(0).unwrap(),
//!                     src_path_bits: 0, static_rate: 0, grh: None };
//! let a = TABLE.get_or_create(&hal, &attr).unwrap(); // miss: creates
//! let b = TABLE.get_or_create(&hal, &attr).unwrap(); // hit: shares
//! assert_eq!(a.ah(), b.ah());
//! TABLE.release(&hal, a).unwrap();
//! TABLE.release(&hal, b).unwrap(); // refcount 0: stays cached
//! let s = TABLE.stats_exact(); // stats() is O(1); its hits may lag by < 256 per slot
//! assert_eq!((s.hits, s.creates, s.destroys, s.live), (1, 1, 0, 1));
//! ```

mod cache;
mod forms;
mod key;
mod lookup;
mod place;
mod prefetch;
mod probe;
mod retire;
pub mod session;
mod slot;

pub use self::forms::{Hashed, Lookup, PreparedAttr};
pub use self::session::{LEASE, Session};

use core::fmt;
use core::marker::PhantomData;

use crossbeam_utils::{Backoff, CachePadded};

pub(crate) use self::cache::fill;
pub use self::cache::{AhCache, CacheAh, CacheError, CacheResult, Prefetch, Shared, Wait};
use self::key::{HashKey, KEY_WORDS, Key, alt_of, home_of, pack_l2, unpack_l2};
use self::slot::{
    BUSY, CREATING, Clock, FREE, GEN_BITS, Gen, HIT_CARRY, HIT_STEP, LIVE, LIVE_BITS, REF_MAX, RETIRED, Refs,
    STATE_MASK, Slot, USED, born_age, clock, generation, gid_matches, hit_field, live_bits, next_generation, rebuild,
    refs, restamp, stamp, state, with_state,
};

use crate::attr::{AhAttr, AttrError, AttrWords, CanonicalWords};
use crate::gid_table::GidTable;
use crate::hal::{AhToken, Error as _, ErrorKind, Hal, L2Info};
use crate::sync::{AtomicBool, AtomicU64, Ordering, fence, wait_step};
use crate::wire::Gid;

/// How many times a hit retries its compare-and-swap on one slot when it
/// loses to a concurrent change before it gives up (and the caller takes the
/// slow path).
pub const MAX_READ_RETRIES: u32 = 4;

/// How many slow-path rounds (claim, wait for another thread's create,
/// acquire) a look-up makes before [`TableError::Contended`].
const MAX_ROUNDS: u32 = 64;

/// A reference to an AH in an [`AhTable`].
///
/// Carries the backend AH (for posting sends), the slot and the slot
/// generation it was taken from. Not `Clone`: get another reference with
/// [`AhTable::retain`], give it back with [`AhTable::release`]. Dropping a
/// handle without releasing it leaks its reference (the entry is then never
/// evicted nor destroyed); it is never undefined behaviour.
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a handle holds a reference: give it back with AhTable::release"]
pub struct AhHandle<A> {
    ah: A,
    slot: u32,
    generation: u32,
}

impl<A: Copy> AhHandle<A> {
    /// The backend AH.
    #[inline]
    pub fn ah(&self) -> A {
        self.ah
    }

    /// The slot index.
    #[inline]
    pub fn slot(&self) -> usize {
        self.slot as usize
    }

    /// The slot generation (32 bits).
    #[inline]
    pub fn generation(&self) -> u64 {
        u64::from(self.generation)
    }
}

/// Why an AH-table operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TableError<E> {
    /// The backend failed (`resolve_l2`, or `create_ah` after eviction did not
    /// help; on release, `destroy_ah`, after which the AH is gone anyway).
    Backend(E),
    /// Every slot of the key's window holds a referenced entry or a create in
    /// progress.
    Full,
    /// Another thread is creating this AH (only from the `try_` variants).
    Pending,
    /// The look-up kept losing races (more than an internal bound of rounds).
    Contended,
    /// The entry already holds the maximum number of references (2²⁰ − 1).
    RefcountOverflow,
    /// The handle does not refer to a live reference of this table.
    StaleHandle,
    /// The attribute words are not a valid attribute (an SL above 15, port
    /// 0, a flow label above 20 bits): the profile wrote what the C code
    /// writes, which no AH can be created from.
    InvalidAttr(AttrError),
}

impl<E: fmt::Debug> fmt::Display for TableError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Backend(e) => write!(f, "backend error: {e:?}"),
            TableError::Full => f.write_str("AH table window full of referenced entries"),
            TableError::Pending => f.write_str("another thread is creating this AH"),
            TableError::Contended => f.write_str("AH table look-up kept losing races"),
            TableError::RefcountOverflow => f.write_str("AH refcount overflow"),
            TableError::StaleHandle => f.write_str("stale or foreign AH handle"),
            TableError::InvalidAttr(e) => write!(f, "invalid AH attribute: {e}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for TableError<E> {}

/// A snapshot of the table's counters, read without locks (each counter is
/// exact; the snapshot is not atomic as a whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct TableStats {
    /// Look-ups answered by the lock-free fast path (each look-up counts
    /// once, as a hit or as a miss). From [`AhTable::stats`] (O(1)): the
    /// hits carried out of the slots, 256 at a time, and those sessions
    /// published, so up to 255 hits per slot (and a session's unpublished
    /// ones, [`Session::unpublished_hits`]) are not in it yet. From
    /// [`AhTable::stats_exact`]: exact for every look-up that has returned;
    /// while look-ups run, a snapshot may miss up to 255 hits of a slot whose
    /// 256th hit is between its CAS and its carry (so two snapshots taken
    /// during a run may even decrease).
    pub hits: u64,
    /// Look-ups that went to the slow path (including those that then found
    /// the entry another thread had just created).
    pub misses: u64,
    /// Backend AHs created.
    pub creates: u64,
    /// Backend AHs destroyed (including failed destroys: the AH is gone).
    pub destroys: u64,
    /// Unreferenced entries evicted to make room.
    pub evictions: u64,
    /// Entries retired (GID change, age, [`AhTable::retire_all`]).
    pub retirements: u64,
    /// Backend AHs alive: `creates − destroys`.
    pub live: u64,
    /// Slots holding an entry (live, cached or retired) or a create in progress.
    pub entries: u64,
    /// Backend calls that failed (`resolve_l2`, `create_ah`, `destroy_ah`).
    pub backend_failures: u64,
    /// Look-ups that found another thread's create in progress.
    pub pending: u64,
    /// Unreferenced entries moved to their other window to make room for a
    /// new key (cuckoo displacement; not evictions: the AH stays).
    pub relocations: u64,
}

#[derive(Debug)]
struct Counters {
    misses: AtomicU64,
    /// Slots holding an entry or a create: +1 when a claim takes a free
    /// slot, −1 when a slot goes back to `FREE` (a move between windows
    /// does both).
    entries: AtomicU64,
    creates: AtomicU64,
    destroys: AtomicU64,
    evictions: AtomicU64,
    retirements: AtomicU64,
    backend_failures: AtomicU64,
    pending: AtomicU64,
    relocations: AtomicU64,
}

impl Counters {
    crate::sync::maybe_const_fn! {
        fn new() -> Counters {
            Counters {
                misses: AtomicU64::new(0),
                entries: AtomicU64::new(0),
                creates: AtomicU64::new(0),
                destroys: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                retirements: AtomicU64::new(0),
                backend_failures: AtomicU64::new(0),
                pending: AtomicU64::new(0),
                relocations: AtomicU64::new(0),
            }
        }
    }
}

#[inline]
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Whether the word `m` of a slot that is not `LIVE` is `CREATING`: the
/// probe's rare case, out of line so that the hit path tests `LIVE` first.
#[cold]
#[inline(never)]
fn not_live_is_creating(m: u64) -> bool {
    state(m) == CREATING
}

/// Whether `next`, a slot's word plus `HIT_STEP + extra` (one reference,
/// one hit, `extra` more references), is `LIVE` with a refcount of `1 +
/// extra ..= REF_MAX`: one range test of its state and refcount fields,
/// since a refcount overflow carries into the state. (`extra` < `REF_MAX`.)
#[inline(always)]
fn live_with_room(next: u64, extra: u64) -> bool {
    (next & (STATE_MASK | REF_MAX)).wrapping_sub(LIVE_BITS.wrapping_add(1).wrapping_add(extra))
        < REF_MAX.wrapping_sub(extra)
}

/// A handle as two words, so that it comes back from an out-of-line slow
/// path in registers: the AH token, and `slot | generation << 32`.
type RawHandle = (u64, u64);

#[inline(always)]
fn raw(slot: u32, generation: u32, token: u64) -> RawHandle {
    (token, u64::from(slot) | u64::from(generation) << 32)
}

/// What the lock-free probe found.
enum Probe {
    /// A reference was taken: slot, generation, AH token.
    Hit(u32, u32, u64),
    /// The key is being created in this slot; its word is the `u64`.
    Pending(usize, u64),
    /// Not found (or a CAS kept failing).
    Miss,
    /// Found, but the refcount is at its maximum.
    Overflow,
}

/// What a claim under the writer lock found or took.
enum Claim {
    /// A live entry with the key: slot and word.
    Existing(usize, u64),
    /// A create in progress for the key: slot and word.
    Creating(usize, u64),
    /// A slot now `CREATING` for the key: slot, its word, and the AH token of
    /// the unreferenced entry it evicted.
    Claimed(usize, u64, Option<u64>),
    /// No free, cached or matching slot in the window.
    Full,
}

/// What an invalidation sweep decides for one live entry.
enum Verdict {
    Keep,
    Retire,
    /// Keep, and record this GID generation.
    Restamp(u64),
}

/// Tables of more bytes of slots than this are
/// [prefetched](AhTable::prefetch) by a batch: 8 MiB, a quarter of a
/// last-level cache (one CCX's L3 on AMD EPYC, a whole socket's on many
/// Intel parts), which a responder shares with its receive buffers and
/// everything else it reads. A smaller table's slots stay in the caches
/// under a steady load, and the staging only costs instructions: at 10⁴
/// peers (8 MiB) it took 1.0-1.3x the plain batch's time, at 10⁵-10⁶ peers
/// (64 MiB) 0.35-0.78x (benches/RESULTS.md). A 16 MiB table is past it:
/// `udah demo --peers 100000` (2¹⁸ slots, beside 60 MiB of completions read
/// in arrival order, on a 32 MiB L3) took 41-45 ns per completion (p50)
/// staged against 73-94 unstaged, which the threshold of 32 MiB gave it.
/// [`Prefetch`] overrides it for one cache.
pub const PREFETCH_BYTES: usize = 1 << 23;

/// The AH table: `N` slots (a power of two, 1 ..= 2²⁴) of AHs created by the
/// backend `H`, deduplicated by [`AhAttr`]. `const`-constructible, so it can
/// be a `static`. See the [module documentation](self) for the protocol and
/// what waits on what.
///
/// The table does not own the backend: every method that may create or
/// destroy an AH takes it as `hal`. Use one backend per table.
pub struct AhTable<H, const N: usize> {
    slots: [Slot; N],
    writer: CachePadded<AtomicBool>,
    counters: CachePadded<Counters>,
    /// Hits carried out of the slots' hit fields (256 at a time) and
    /// published by sessions: its own line, written once per 256 hits of a
    /// slot.
    hits: CachePadded<AtomicU64>,
    hand: CachePadded<AtomicU64>,
    /// The first generation of this table's slots (0: not drawn yet).
    seed: AtomicU64,
    clock: CachePadded<AtomicU64>,
    /// Bumped whenever [`Session`]s should give their leases back: an entry
    /// was retired, or a claim found no room.
    reclaim: CachePadded<AtomicU64>,
    /// The keyed hash's key, from the table's seed.
    hash_key: HashKey,
    /// Invalidation sweeps in progress: while there is one, claims do not
    /// move entries between windows (a sweep could pass a moved entry by).
    sweeping: AtomicU64,
    _backend: PhantomData<fn(&H)>,
}

impl<H, const N: usize> fmt::Debug for AhTable<H, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AhTable").field("capacity", &N).field("stats", &self.stats()).finish()
    }
}

impl<H, const N: usize> Default for AhTable<H, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Ends a sweep (`AhTable::sweeping`) on drop.
struct SweepGuard<'a>(&'a AtomicU64);

impl Drop for SweepGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Releases the writer lock on drop.
struct WriterGuard<'a>(&'a AtomicBool);

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// An empty [`AhTable`] with the slots `slots` and the hash seed `seed`:
/// the one field list of both constructors (a `const fn` one with a const
/// slot array, and loom's, whose atomics are not `const`).
macro_rules! empty_table {
    ($slots:expr, $seed:expr) => {
        AhTable {
            slots: $slots,
            writer: CachePadded::new(AtomicBool::new(false)),
            counters: CachePadded::new(Counters::new()),
            hits: CachePadded::new(AtomicU64::new(0)),
            hand: CachePadded::new(AtomicU64::new(0)),
            seed: AtomicU64::new(0),
            clock: CachePadded::new(AtomicU64::new(0)),
            reclaim: CachePadded::new(AtomicU64::new(0)),
            hash_key: HashKey::new($seed),
            sweeping: AtomicU64::new(0),
            _backend: PhantomData,
        }
    };
}

impl<H, const N: usize> AhTable<H, N> {
    const CHECK: () = assert!(N.is_power_of_two() && N <= 1 << 24, "AhTable capacity must be a power of two ≤ 2^24");
    const MASK: usize = N.wrapping_sub(1);
    /// How many consecutive slots a window has: `min(N, 8)`. A key may live
    /// in either of two windows, both chosen by its hash.
    pub const WINDOW: usize = if N < 8 { N } else { 8 };
    /// Whether the two windows of a key can differ (a table of at most
    /// [`WINDOW`](Self::WINDOW) slots has one window).
    const TWO: bool = N > Self::WINDOW;

    /// An empty table with the hash seed 0: [`with_seed`](Self::with_seed)
    /// with a fixed seed, for tables that only trusted senders reach (and
    /// for `static`s, which cannot draw one).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_seed(0)
    }

    /// An empty table whose hash is keyed with `seed`. The seed decides in
    /// which two windows each key may live: a sender who knows it can craft
    /// source GIDs that all land in the same windows and push the other
    /// peers' entries out; without it, crafted addresses spread like any
    /// others. `no_std` code passes whatever entropy it has (a hardware
    /// random number, a boot-time counter); std users pass a random one
    /// (e.g. from `std::hash::RandomState`). Different tables may share a
    /// seed.
    #[cfg(not(loom))]
    pub const fn with_seed(seed: u64) -> Self {
        let () = Self::CHECK;
        empty_table!([const { Slot::new() }; N], seed)
    }

    /// An empty table with the hash seed 0.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_seed(0)
    }

    /// An empty table whose hash is keyed with `seed`.
    #[cfg(loom)]
    pub fn with_seed(seed: u64) -> Self {
        let () = Self::CHECK;
        empty_table!(core::array::from_fn(|_| Slot::new()), seed)
    }

    /// The capacity `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The counters, in O(1): table-wide counters updated by the slow
    /// paths (claim, create, eviction, retirement, destroy), and the hits
    /// carried out of the slots' lifecycle words 256 at a time (a hit
    /// writes nothing shared but its slot's word), so
    /// [`hits`](TableStats::hits) may lag the hits made by up to 255 per slot.
    /// [`stats_exact`](Self::stats_exact) adds them.
    pub fn stats(&self) -> TableStats {
        let c = &*self.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (creates, destroys) = (ld(&c.creates), ld(&c.destroys));
        TableStats {
            hits: ld(&self.hits),
            misses: ld(&c.misses),
            creates,
            destroys,
            evictions: ld(&c.evictions),
            retirements: ld(&c.retirements),
            live: creates.saturating_sub(destroys),
            entries: ld(&c.entries),
            backend_failures: ld(&c.backend_failures),
            pending: ld(&c.pending),
            relocations: ld(&c.relocations),
        }
    }

    /// [`stats`](Self::stats) with [`hits`](TableStats::hits) exact for
    /// every look-up that has returned: the carried hits plus every slot's
    /// hit field (O(N): reads each slot's word). While look-ups run, a
    /// snapshot may still miss up to 255 hits of a slot whose 256th hit is
    /// between its CAS and its carry.
    pub fn stats_exact(&self) -> TableStats {
        // The carried hits first, then the fields: a hit that wraps a field
        // adds its carry after its CAS, so the sum may lag, never lead.
        let mut st = self.stats();
        for s in &self.slots {
            st.hits = st.hits.wrapping_add(hit_field(s.meta.load(Ordering::Relaxed)).0);
        }
        st
    }

    /// Sets the table clock, in whatever unit the caller uses for
    /// [`retire_older_than`](Self::retire_older_than) (the table never reads
    /// a clock itself). New entries are stamped with it.
    pub fn advance_clock(&self, now: u64) {
        self.clock.store(now, Ordering::Relaxed);
    }
}

/// Stores `FREE` (same generation, same hit field) into a `CREATING` slot's
/// word `creating` when dropped; [`AhTable::create`] forgets it once the
/// entry is published.
struct FreeOnDrop<'a> {
    meta: &'a AtomicU64,
    /// The table's entry count, which the freed slot leaves.
    entries: &'a AtomicU64,
    creating: u64,
}

impl Drop for FreeOnDrop<'_> {
    fn drop(&mut self) {
        let m = self.creating;
        self.meta.store(rebuild(m, Gen(generation(m)), FREE, Clock::Clear, Refs(0)), Ordering::Release);
        self.entries.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
