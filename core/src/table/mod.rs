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
mod key;
mod prefetch;
pub mod session;
mod slot;

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

/// An [`AhAttr`] prepared for repeated look-ups: the attribute with its
/// packed key and the key's hash, computed once. A runtime that keeps
/// per-peer state (an MPI or UCX-style endpoint) prepares each peer's
/// attribute when it learns it, and its hits then start at the probe:
/// [`AhTable::get_or_create`], [`AhTable::get`]. The table's hash is keyed
/// ([`AhTable::with_seed`]): [`AhTable::prepare`] keeps that table's hash,
/// [`PreparedAttr::new`] the hash of the seed-0 tables ([`AhTable::new`]).
/// Any `PreparedAttr` works with any table; a table whose hash it does not
/// keep computes it per look-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedAttr {
    attr: AhAttr,
    key: Key,
    hash: u64,
    /// The first word of the hash key `hash` was computed with.
    keyed: u64,
}

impl PreparedAttr {
    /// Prepares `attr` for the tables of seed 0 ([`AhTable::new`]).
    #[inline]
    pub fn new(attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::keyed(attr, &HashKey::new(0))
    }

    #[inline]
    fn keyed(attr: &AhAttr, k: &HashKey) -> PreparedAttr {
        let key = Key::new(attr);
        PreparedAttr { attr: *attr, key, hash: key.hash(k), keyed: k.0[0] }
    }

    /// The attribute.
    #[inline]
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
}

impl From<&AhAttr> for PreparedAttr {
    #[inline]
    fn from(attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::new(attr)
    }
}

/// [`CanonicalWords`] with their hash in one table, made by
/// [`AhCache::prefetch`] (which also starts loading the first slot their
/// look-up reads): a batch stages a few of these, then looks them up
/// without hashing again. Used with another table, the hash is computed
/// again (the tag is the hash key's first word, as for [`PreparedAttr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashed {
    words: CanonicalWords,
    hash: u64,
    /// The first word of the hash key `hash` was computed with (0 for
    /// [`unhashed`](Self::unhashed): a table whose hash key starts with 0,
    /// one seed in 2⁶⁴, would take hash 0 for the words' own, and its
    /// look-up would miss and find the entry on the slow path, which
    /// hashes again).
    keyed: u64,
}

impl Hashed {
    /// `words` without a hash (a cache that does not prefetch).
    #[inline(always)]
    pub const fn unhashed(words: CanonicalWords) -> Hashed {
        Hashed { words, hash: 0, keyed: 0 }
    }

    /// The words.
    #[inline(always)]
    pub const fn words(&self) -> CanonicalWords {
        self.words
    }
}

/// What a look-up is keyed by: an [`AhAttr`], a [`PreparedAttr`] (key and
/// hash computed once), an attribute's [`AttrWords`] (a profile's output:
/// canonical words are the key itself), or [`CanonicalWords`] (words proven
/// canonical: the key with no check). Sealed: the table's key derivation is
/// internal.
pub trait Lookup: sealed::Sealed {}

mod sealed {
    use super::{
        AhAttr, AhHandle, AhTable, AttrError, AttrWords, CanonicalWords, Hashed, Key, PreparedAttr, Probe, Session,
        TableError,
    };
    use crate::hal::{AhToken, Hal};

    /// The key forms' look-ups: each form goes its own way to the probe (an
    /// attribute packs its key, a prepared one has it, words are it when
    /// canonical), and all meet in the table's slow path.
    pub trait Sealed {
        /// [`AhTable::get`].
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken;
        /// [`AhTable::get_or_create`] (`block`) or [`AhTable::try_get_or_create`],
        /// the error converted to the caller's `X` where it arises, so that
        /// a hit's result is built once, in the caller's type.
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken;
        /// [`Session::get_or_create`] (`block`) or [`Session::try_get_or_create`].
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken;
        /// The attribute, for the slow path.
        fn to_attr(&self) -> Result<AhAttr, AttrError>;
    }

    impl Sealed for AhAttr {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<true>(&Key::new(self), None)
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            t.lookup(hal, &Key::new(self), self, block)
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key::new(self);
            let h = s.table().hash(&k);
            s.lookup(&k, h, self, block)
        }
        #[inline(always)]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            Ok(*self)
        }
    }

    impl Sealed for PreparedAttr {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<true>(&self.key, Some(t.prepared_hash(self)))
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            match t.probe_from::<true>(&self.key, t.prepared_hash(self), 0) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                probe => t.lookup_slow(hal, &self.attr, block, probe).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let h = s.table().prepared_hash(self);
            s.lookup(&self.key, h, &self.attr, block)
        }
        #[inline(always)]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            Ok(self.attr)
        }
    }

    impl Sealed for AttrWords {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            match Key::from_words(*self) {
                Some(k) => t.get_key::<false>(&k, None),
                None => t.get_key::<false>(&Key::new(&self.to_attr().ok()?), None),
            }
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            // The key straight from the words: no attribute is built unless
            // the probe misses.
            let Some(k) = Key::from_words(*self) else {
                return t.lookup_converted(hal, self, block, None).map_err(X::from);
            };
            match t.probe::<false>(&k) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, self, block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            s.lookup_words(Key::from_words(*self), *self, block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            AttrWords::to_attr(*self)
        }
    }
    impl Sealed for CanonicalWords {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            t.get_key::<false>(&Key(self.words().raw()), None)
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            match t.probe::<false>(&Key(self.words().raw())) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, &self.words(), block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            s.lookup_words(Some(Key(self.words().raw())), self.words(), block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            self.words().to_attr()
        }
    }

    impl Sealed for Hashed {
        #[inline(always)]
        fn table_get<H: Hal, const N: usize>(&self, t: &AhTable<H, N>) -> Option<AhHandle<H::Ah>>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            t.get_key::<false>(&k, Some(t.hashed_hash(self, &k)))
        }
        #[inline(always)]
        fn table_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize>(
            &self,
            t: &AhTable<H, N>,
            hal: &H,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            match t.probe_from::<false>(&k, t.hashed_hash(self, &k), 0) {
                Probe::Hit(s, g, tok) => Ok(AhTable::<H, N>::handle(s, g, tok)),
                Probe::Overflow => Err(TableError::RefcountOverflow.into()),
                p => t.lookup_converted(hal, &self.words.words(), block, Some(p)).map_err(X::from),
            }
        }
        #[inline(always)]
        fn session_lookup<H: Hal, X: From<TableError<H::Error>>, const N: usize, const L: usize>(
            &self,
            s: &mut Session<'_, H, N, L>,
            block: bool,
        ) -> Result<AhHandle<H::Ah>, X>
        where
            H::Ah: AhToken,
        {
            let k = Key(self.words.words().raw());
            let h = s.table().hashed_hash(self, &k);
            s.lookup_words_hashed(k, h, self.words.words(), block)
        }
        #[inline]
        fn to_attr(&self) -> Result<AhAttr, AttrError> {
            self.words.words().to_attr()
        }
    }
}

impl Lookup for AhAttr {}
impl Lookup for PreparedAttr {}
impl Lookup for AttrWords {}
impl Lookup for CanonicalWords {}
impl Lookup for Hashed {}

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
/// [prefetched](AhTable::prefetch) by a batch: 32 MiB, a last-level cache
/// (one CCX's L3 on AMD EPYC, a whole socket's on many Intel parts). A
/// smaller table's slots stay in the caches under a steady load, and the
/// staging only costs instructions: at 10⁴ peers (8 MiB) it took 1.0-1.3x
/// the plain batch's time, at 10⁵-10⁶ peers (64 MiB) 0.35-0.78x
/// (benches/RESULTS.md). [`Prefetch`] overrides it for one cache.
pub const PREFETCH_BYTES: usize = 1 << 25;

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

    /// Whether `slot` holds `key` (four relaxed loads). `CHAIN`: compare
    /// word by word, a branch each, so that LLVM keeps one slot word live at
    /// a time; else the four differences or-ed and tested once. Which one
    /// is cheaper depends on the code around the compare, so each caller
    /// chooses (`probe::<CHAIN>` and the rest pass it on), from instruction
    /// counts (`benches/RESULTS.md`, twelfth session): the chain for a
    /// look-up from an attribute (`AhAttr`, `PreparedAttr`: a table hit 85.9
    /// -> 78.6, prepared 53.9 -> 48.6, in `benches/ah_table.rs`); the or for
    /// words, a responder's form (the chain made its `resolve` 217.1 ->
    /// 219.8 and `ah_scale`'s batches up to 1.7 more per completion, though
    /// a hit from words 65.9 -> 61.6), and for a session's unrolled window
    /// scan (the chain there: a session hit 96.8 -> 97.7, `ah_scale`'s
    /// session batch at 64 peers 299.3 -> 302.1).
    #[inline(always)]
    fn key_matches<const CHAIN: bool>(slot: &Slot, key: &Key) -> bool {
        let [k0, k1, k2, k3] = &slot.key;
        let [w0, w1, w2, w3] = key.0;
        if CHAIN {
            k0.load(Ordering::Relaxed) == w0
                && k1.load(Ordering::Relaxed) == w1
                && k2.load(Ordering::Relaxed) == w2
                && k3.load(Ordering::Relaxed) == w3
        } else {
            ((k0.load(Ordering::Relaxed) ^ w0)
                | (k1.load(Ordering::Relaxed) ^ w1)
                | (k2.load(Ordering::Relaxed) ^ w2)
                | (k3.load(Ordering::Relaxed) ^ w3))
                == 0
        }
    }

    fn read_key(slot: &Slot) -> Key {
        let mut k = [0u64; KEY_WORDS];
        for (d, s) in k.iter_mut().zip(&slot.key) {
            *d = s.load(Ordering::Relaxed);
        }
        Key(k)
    }

    /// The slow path's acquire: takes a reference on slot `idx` if it holds
    /// `key` live, starting from the word `m`, retrying (with backoff) as long
    /// as the entry stays live. Not counted as a hit.
    fn acquire_at(&self, idx: usize, key: &Key, mut m: u64) -> Probe {
        let Some(slot) = self.slots.get(idx) else { return Probe::Miss };
        let backoff = Backoff::new();
        loop {
            if state(m) != LIVE || !Self::key_matches::<true>(slot, key) {
                return Probe::Miss;
            }
            let token = slot.ah.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if refs(m) == REF_MAX {
                return Probe::Overflow;
            }
            // `Acquire` on failure too, as in `probe`.
            match slot.meta.compare_exchange(m, m.wrapping_add(1) | USED, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Probe::Hit(idx as u32, generation(m), token),
                Err(cur) => {
                    m = cur;
                    wait_step(&backoff);
                }
            }
        }
    }

    /// The keyed hash of `key` in this table.
    #[inline(always)]
    fn hash(&self, key: &Key) -> u64 {
        key.hash(&self.hash_key)
    }

    /// The hash of a prepared attribute in this table: the one it keeps if
    /// it was prepared for this table's hash key, else computed. The tag is
    /// the hash key's first word, a bijection of the seed (`HashKey::new`),
    /// so two seeds never share it; and a wrong hash could only make a
    /// look-up miss, whose slow path hashes again, never hit another key.
    #[inline(always)]
    fn prepared_hash(&self, p: &PreparedAttr) -> u64 {
        if p.keyed == self.hash_key.0[0] { p.hash } else { self.hash(&p.key) }
    }

    /// The hash of `h`'s key `k` in this table: the one it carries if it was
    /// made for this table's hash key, else computed (as
    /// [`prepared_hash`](Self::prepared_hash)).
    #[inline(always)]
    fn hashed_hash(&self, h: &Hashed, k: &Key) -> u64 {
        if h.keyed == self.hash_key.0[0] { h.hash } else { self.hash(k) }
    }

    /// Whether a batch should stage its look-ups and
    /// [`prefetch`](Self::prefetch) their slots: the table is larger than
    /// [`PREFETCH_BYTES`], so that a random slot is likely not in the
    /// caches (a smaller table's slots stay there, and the staging would
    /// only cost instructions).
    pub const PREFETCH: bool = N.saturating_mul(core::mem::size_of::<Slot>()) > PREFETCH_BYTES;

    /// From this many entries on (half the slots), [`prefetch`](Self::prefetch)
    /// starts loading both of a key's windows, not only its first slot.
    const DEEP_PREFETCH: u64 = (N / 2) as u64;

    /// `words` hashed for this table ([`Hashed`]), and the slots its
    /// look-up is likely to read starting to load into the cache (prefetch
    /// hints, `table/prefetch.rs`), so that the look-ups a batch stages miss
    /// on the table side by side instead of one after the other. Changes
    /// nothing that any thread reads.
    ///
    /// Which slots depends on how full the table is. Below half full, a
    /// key is nearly always in the first slot of its first window (95 % at
    /// a tenth full, 76 % at half full: `position_histogram` in the table's
    /// tests), and only that slot is loaded. From half full on, every slot
    /// of both windows is: at 95 % full only half the keys are in the first
    /// slot and a fifth are in the second window, behind eight slots of the
    /// first (a look-up reads 3.3 slots on average), and loading just the
    /// first slot left most of the look-up's misses to wait for
    /// (benches/RESULTS.md, batches of completions, both windows loaded
    /// against the first slot only: at 10⁶ peers in 2²⁰ slots, 95 % full,
    /// 0.58-0.66x the time in uniform order, 0.72-0.93x in Zipf order; at
    /// 5·10⁵, 48 % full, 0.86-0.95x uniform but 1.0-1.19x Zipf; at 10⁵, a
    /// tenth full, 1.18-1.55x: hence half full.)
    ///
    /// (A relaxed atomic load of the slot instead of the hint bought
    /// 0.86-1.0 of the plain batch's time at 10⁶ peers: a load waits in the
    /// reorder buffer for its data, and the ~150 instructions of each
    /// completion's profile between two loads fill that buffer, so only
    /// about two misses were in flight; the hint retires at once.)
    #[inline(always)]
    pub fn prefetch(&self, words: CanonicalWords) -> Hashed {
        let k = Key(words.words().raw());
        let hash = self.hash(&k);
        let home = home_of(hash, Self::MASK);
        if self.counters.entries.load(Ordering::Relaxed) >= Self::DEEP_PREFETCH {
            self.prefetch_window(home);
            if Self::TWO {
                self.prefetch_window(alt_of(hash, Self::MASK));
            }
        } else if let Some(slot) = self.slots.get(home) {
            prefetch::slot(slot);
        }
        Hashed { words, hash, keyed: self.hash_key.0[0] }
    }

    /// Prefetch hints for the window that starts at `start`.
    #[inline(always)]
    fn prefetch_window(&self, start: usize) {
        match self.slots.get(start..start.wrapping_add(Self::WINDOW)) {
            Some(window) => window.iter().for_each(prefetch::slot),
            // The window wraps around the end of the table.
            None => Self::window_slots(start, start).take(Self::WINDOW).for_each(|i| {
                if let Some(slot) = self.slots.get(i) {
                    prefetch::slot(slot);
                }
            }),
        }
    }

    /// `attr` prepared for this table's hash ([`PreparedAttr`]).
    #[inline]
    pub fn prepare(&self, attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::keyed(attr, &self.hash_key)
    }

    /// The lock-free probe of `key`'s windows.
    #[inline(always)]
    fn probe<const CHAIN: bool>(&self, key: &Key) -> Probe {
        self.probe_from::<CHAIN>(key, self.hash(key), 0)
    }

    /// The lock-free probe of `key`'s two windows (`h`: its hash); a hit
    /// takes `1 + extra` references (`extra` > 0: a [`Session`]'s lease).
    /// The first window inline, the second out of line: a key goes to its
    /// second window only when the first is full.
    #[inline(always)]
    fn probe_from<const CHAIN: bool>(&self, key: &Key, h: u64, extra: u64) -> Probe {
        match self.probe_window::<CHAIN>(key, home_of(h, Self::MASK), extra) {
            // A copy of the key for the out-of-line call, made here: its
            // stores stay on this cold path (through `key` itself, the key
            // went to memory on every look-up, 4 stores).
            Probe::Miss if Self::TWO => {
                let k = *key;
                self.probe_alt::<CHAIN>(&k, extra)
            }
            p => p,
        }
    }

    /// [`probe_window`](Self::probe_window) of the second window. It hashes
    /// the key again: the hash is not kept live (spilled) on the hit path
    /// for this rare one.
    #[inline(never)]
    fn probe_alt<const CHAIN: bool>(&self, key: &Key, extra: u64) -> Probe {
        self.probe_window::<CHAIN>(key, alt_of(self.hash(key), Self::MASK), extra)
    }

    /// The lock-free probe of every slot of the window that starts at
    /// `home`. (A straight-line try of the first slot before this loop
    /// made a table hit 4 instructions cheaper, 96.2 -> 92.1 with the old
    /// counting loops, but read the first slot twice whenever the try
    /// failed, and the loom models of `tests/loom_table.rs` then ran for
    /// over 25 minutes instead of a few: not kept.)
    #[inline(always)]
    fn probe_window<const CHAIN: bool>(&self, key: &Key, home: usize, extra: u64) -> Probe {
        // The slot's byte offset steps, not its index (from `home + i` each
        // time, the first slot cost a reload and an add more; from the
        // index, a mask, a copy and a shift per slot where the offset needs
        // a mask: `(h >> 34) & 0x3fc0` for the first at 256 slots).
        const SIZE: usize = core::mem::size_of::<Slot>();
        let mut next_off = (home & Self::MASK).wrapping_mul(SIZE);
        for _ in 0..Self::WINDOW {
            let idx = next_off / SIZE;
            next_off = next_off.wrapping_add(SIZE) & Self::MASK.wrapping_mul(SIZE);
            let Some(slot) = self.slots.get(idx) else { continue };
            let mut m = slot.meta.load(Ordering::Acquire);
            let mut tries = 0u32;
            loop {
                // The key first (these loads follow the `Acquire` load of `m`
                // whatever the order of the tests), so that the state test on
                // the hit path is a single compare.
                if !Self::key_matches::<CHAIN>(slot, key) {
                    break;
                }
                // One more reference and one more hit (the hit field wraps
                // off the top of the word; `slot.rs`).
                let next = m.wrapping_add(HIT_STEP.wrapping_add(extra));
                // `LIVE` and no refcount overflow, in one test.
                if !live_with_room(next, extra) {
                    if m & STATE_MASK != LIVE_BITS {
                        if not_live_is_creating(m) {
                            return Probe::Pending(idx, m);
                        }
                        break;
                    }
                    return Probe::Overflow;
                }
                let token = slot.ah.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                // `Acquire` on failure too: the retry reads the key and token
                // again on the strength of `cur` (loom found the `Relaxed`
                // version returning a stale token).
                match slot.meta.compare_exchange(m, next | USED, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        // This hit wrapped the hit field (refcount ≥ 1, so the
                        // word is below `HIT_STEP` exactly when the field is
                        // 0): carry 256 into the table's counter, once per 256
                        // hits.
                        if next < HIT_STEP {
                            self.hits.fetch_add(HIT_CARRY, Ordering::Relaxed);
                        }
                        return Probe::Hit(idx as u32, generation(m), token);
                    }
                    Err(cur) => {
                        tries = tries.wrapping_add(1);
                        if tries >= MAX_READ_RETRIES {
                            return Probe::Miss;
                        }
                        m = cur;
                    }
                }
            }
        }
        Probe::Miss
    }

    /// Waits until slot `idx` no longer has the word `m`.
    fn wait_change(&self, idx: usize, m: u64) {
        let Some(slot) = self.slots.get(idx) else { return };
        let backoff = Backoff::new();
        while slot.meta.load(Ordering::Acquire) == m {
            wait_step(&backoff);
        }
    }

    fn lock(&self) -> WriterGuard<'_> {
        let backoff = Backoff::new();
        loop {
            if self.writer.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return WriterGuard(&self.writer);
            }
            while self.writer.load(Ordering::Relaxed) {
                wait_step(&backoff);
            }
        }
    }

    /// The slots of the windows that start at `a` and `b` (`b`'s only when
    /// the table has two windows per key).
    #[inline]
    fn window_slots(a: usize, b: usize) -> impl Iterator<Item = usize> {
        let ways = if Self::TWO { 2 } else { 1 };
        [a, b].into_iter().take(ways).flat_map(|w| (0..Self::WINDOW).map(move |i| w.wrapping_add(i) & Self::MASK))
    }

    /// Under the writer lock: finds `key` in its windows, or claims a free
    /// slot for it there, making one by moving an unreferenced entry to its
    /// other window (cuckoo displacement, paths of up to two moves), or by
    /// evicting an unreferenced entry (CLOCK).
    fn claim(&self, key: &Key) -> Claim {
        let _guard = self.lock();
        let h = self.hash(key);
        let (a, b) = (home_of(h, Self::MASK), alt_of(h, Self::MASK));
        let mut free = None;
        // Key words change only under this lock (claims), so they are stable here.
        for idx in Self::window_slots(a, b) {
            let Some(slot) = self.slots.get(idx) else { continue };
            let m = slot.meta.load(Ordering::Acquire);
            match state(m) {
                LIVE if Self::key_matches::<true>(slot, key) => return Claim::Existing(idx, m),
                CREATING if Self::key_matches::<true>(slot, key) => return Claim::Creating(idx, m),
                FREE if free.is_none() => free = Some(idx),
                _ => {}
            }
        }
        let free = match free {
            Some(idx) => Some(idx),
            None if Self::TWO && self.sweeping.load(Ordering::Acquire) == 0 => self.make_room(a, b),
            None => None,
        };
        if let Some(idx) = free
            && let Some(slot) = self.slots.get(idx)
        {
            let m = slot.meta.load(Ordering::Acquire);
            // Only claimers, which hold the lock, leave FREE: this cannot fail.
            if state(m) == FREE
                && slot.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return self.publish_claim(idx, m, key, None);
            }
        }
        // CLOCK over the windows: the first sweep gives recently used entries
        // a second chance, the second takes any unreferenced entry.
        for sweep in 0..2 {
            for idx in Self::window_slots(a, b) {
                let Some(slot) = self.slots.get(idx) else { continue };
                let m = slot.meta.load(Ordering::Acquire);
                if state(m) != LIVE || refs(m) != 0 {
                    continue;
                }
                if sweep == 0 && m & USED != 0 {
                    let _ = slot.meta.compare_exchange(m, m & !USED, Ordering::Relaxed, Ordering::Relaxed);
                    continue;
                }
                if slot
                    .meta
                    .compare_exchange(m, with_state(m & !USED, BUSY), Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    let token = slot.ah.load(Ordering::Relaxed);
                    bump(&self.counters.evictions);
                    return self.publish_claim(idx, m, key, Some(token));
                }
            }
        }
        // Sessions may be pinning cached entries: ask them to give them back.
        self.reclaim.fetch_add(1, Ordering::Relaxed);
        Claim::Full
    }

    /// Under the writer lock, no sweep running, both windows (at `a`, `b`)
    /// full: frees a slot in them by moving the unreferenced entry there to
    /// a free slot of its other window, or, one level deeper, by first
    /// moving an unreferenced entry of that window to its own other window.
    /// Returns the freed slot.
    fn make_room(&self, a: usize, b: usize) -> Option<usize> {
        // One move: an entry of our windows to a free slot of its other one.
        for src in Self::window_slots(a, b) {
            let Some(other) = self.movable_other(src) else { continue };
            for dst in Self::window_slots(other, other).take(Self::WINDOW) {
                if self.is_free(dst) && self.relocate(src, dst) {
                    return Some(src);
                }
            }
        }
        // Two moves: make room in that other window first.
        for src in Self::window_slots(a, b) {
            let Some(other) = self.movable_other(src) else { continue };
            for mid in Self::window_slots(other, other).take(Self::WINDOW) {
                let Some(far) = self.movable_other(mid) else { continue };
                for dst in Self::window_slots(far, far).take(Self::WINDOW) {
                    if self.is_free(dst) && self.relocate(mid, dst) {
                        if self.relocate(src, mid) {
                            return Some(src);
                        }
                        // `src` was taken meanwhile (a hit): `mid` stays free
                        // for a later claim; try the next candidate.
                        break;
                    }
                }
            }
        }
        None
    }

    /// Whether slot `idx` is `FREE`.
    fn is_free(&self, idx: usize) -> bool {
        self.slots.get(idx).is_some_and(|s| state(s.meta.load(Ordering::Acquire)) == FREE)
    }

    /// Under the writer lock: the start of the other window of the entry in
    /// slot `idx`, if it is live and unreferenced (the only entries that
    /// move: no handle or lease names their slot).
    fn movable_other(&self, idx: usize) -> Option<usize> {
        let slot = self.slots.get(idx)?;
        let m = slot.meta.load(Ordering::Acquire);
        if state(m) != LIVE || refs(m) != 0 {
            return None;
        }
        let h = self.hash(&Self::read_key(slot));
        let first = home_of(h, Self::MASK);
        let in_first = idx.wrapping_sub(first) & Self::MASK < Self::WINDOW;
        Some(if in_first { alt_of(h, Self::MASK) } else { first })
    }

    /// Under the writer lock: moves the unreferenced live entry of slot
    /// `src` to the free slot `dst` (key, AH, L2 facts and stamps; the hit counts stay
    /// with the slots). `src` is `BUSY` before `dst` is `LIVE`, so at most
    /// one live entry has the key at any time; a reader that looks while
    /// the entry moves misses and takes the slow path, which waits for this
    /// lock. `false` (and nothing changed) if `src` is no longer live and
    /// unreferenced.
    fn relocate(&self, src: usize, dst: usize) -> bool {
        let (Some(s), Some(d)) = (self.slots.get(src), self.slots.get(dst)) else {
            return false;
        };
        let m = s.meta.load(Ordering::Acquire);
        let md = d.meta.load(Ordering::Acquire);
        if src == dst || state(m) != LIVE || refs(m) != 0 || state(md) != FREE {
            return false;
        }
        if s.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        // Only claimers, which hold the lock, leave FREE: this cannot fail.
        if d.meta.compare_exchange(md, with_state(md, BUSY), Ordering::Acquire, Ordering::Relaxed).is_err() {
            // The same word again: a reader's CAS from it is still right, as
            // nothing it could have read changed.
            s.meta.store(m, Ordering::Release);
            return false;
        }
        let generation = if generation(md) == 0 { Gen(self.seed()) } else { next_generation(md) };
        // Orders the BUSY CAS before the stores (the seqlock write side).
        fence(Ordering::Release);
        for (to, from) in d.key.iter().zip(&s.key) {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        d.ah.store(s.ah.load(Ordering::Relaxed), Ordering::Relaxed);
        d.l2.store(s.l2.load(Ordering::Relaxed), Ordering::Relaxed);
        d.stamp.store(s.stamp.load(Ordering::Relaxed), Ordering::Relaxed);
        d.meta.store(rebuild(md, generation, LIVE, clock(m), Refs(0)), Ordering::Release);
        s.meta.store(rebuild(m, Gen(self::generation(m)), FREE, Clock::Clear, Refs(0)), Ordering::Release);
        bump(&self.counters.relocations);
        true
    }

    /// The first generation of a never-used slot, drawn once per table (under
    /// the writer lock) from a process-wide counter, so that the handles of
    /// two tables differ in generation, not only by chance.
    fn seed(&self) -> u32 {
        let s = self.seed.load(Ordering::Relaxed);
        if s != 0 {
            return s as u32;
        }
        let n = crate::sync::TABLE_SEEDS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let s = ((n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32).max(1);
        self.seed.store(u64::from(s), Ordering::Relaxed);
        s
    }

    /// Slot `idx` is `BUSY` (from the word `m`) and ours: writes `key` and
    /// publishes it as `CREATING` with the next generation.
    fn publish_claim(&self, idx: usize, m: u64, key: &Key, victim: Option<u64>) -> Claim {
        let Some(slot) = self.slots.get(idx) else { return Claim::Full };
        let generation = if generation(m) == 0 { Gen(self.seed()) } else { next_generation(m) };
        if victim.is_none() {
            // A free slot becomes an entry (an evicted one stays one).
            bump(&self.counters.entries);
        }
        // Orders the BUSY CAS before the key stores (the seqlock write side).
        fence(Ordering::Release);
        for (d, w) in slot.key.iter().zip(key.0) {
            d.store(w, Ordering::Relaxed);
        }
        // The BUSY word kept `m`'s hit field, and so does this one.
        let creating = rebuild(m, generation, CREATING, Clock::Clear, Refs(0));
        slot.meta.store(creating, Ordering::Release);
        Claim::Claimed(idx, creating, victim)
    }

    /// Every slot: `LIVE` entries for which `judge` says so are retired.
    /// Returns how many were retired.
    fn sweep(&self, hal: &H, judge: impl Fn(&Key, u64, u64) -> Verdict) -> usize
    where
        H: Hal,
        H::Ah: AhToken,
    {
        // No entry moves between windows while this sweep runs (claims check
        // under the lock, and this is counted under it), so none passes it by.
        let _sweep = Self::TWO.then(|| {
            let _guard = self.lock();
            self.sweeping.fetch_add(1, Ordering::AcqRel);
            SweepGuard(&self.sweeping)
        });
        let mut retired = 0usize;
        for (idx, slot) in self.slots.iter().enumerate() {
            let mut m = slot.meta.load(Ordering::Acquire);
            while state(m) == LIVE {
                let key = Self::read_key(slot);
                let st = slot.stamp.load(Ordering::Relaxed);
                let verdict = judge(&key, st, slot.l2.load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                match verdict {
                    Verdict::Keep => break,
                    Verdict::Restamp(g) => {
                        if slot.meta.load(Ordering::Relaxed) == m {
                            slot.stamp.store(restamp(st, g), Ordering::Relaxed);
                        }
                        break;
                    }
                    Verdict::Retire => {}
                }
                let unreferenced = refs(m) == 0;
                let new = if unreferenced { with_state(m & !USED, BUSY) } else { with_state(m, RETIRED) };
                match slot.meta.compare_exchange(m, new, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        bump(&self.counters.retirements);
                        retired = retired.wrapping_add(1);
                        if unreferenced {
                            let token = slot.ah.load(Ordering::Relaxed);
                            let _ = self.destroy_and_free(hal, idx, m, token);
                        }
                        break;
                    }
                    Err(cur) => m = cur,
                }
            }
        }
        if retired > 0 {
            // Sessions give back their leases of retired entries at their
            // next operation, so that the last release destroys the AH.
            self.reclaim.fetch_add(1, Ordering::Relaxed);
        }
        retired
    }
}

impl<H: Hal, const N: usize> AhTable<H, N>
where
    H::Ah: AhToken,
{
    #[inline]
    fn handle(slot: u32, generation: u32, token: u64) -> AhHandle<H::Ah> {
        AhHandle { ah: H::Ah::from_token(token), slot, generation }
    }

    /// A lock-free look-up that never creates: a reference to the live AH for
    /// `key` (an [`AhAttr`], a [`PreparedAttr`] or an attribute's
    /// [`AttrWords`]), or `None` when there is none, when it is being
    /// created, when the probe lost [`MAX_READ_RETRIES`] races in a row (or
    /// the refcount is at its maximum), or when `key` is not a valid
    /// attribute. Never waits, never calls the backend, never allocates.
    #[inline]
    pub fn get(&self, key: &impl Lookup) -> Option<AhHandle<H::Ah>> {
        key.table_get(self)
    }

    /// The probe of `key` (from its hash `hash` when known), as `get`.
    #[inline(always)]
    fn get_key<const CHAIN: bool>(&self, key: &Key, hash: Option<u64>) -> Option<AhHandle<H::Ah>> {
        let h = match hash {
            Some(h) => h,
            None => self.hash(key),
        };
        match self.probe_from::<CHAIN>(key, h, 0) {
            Probe::Hit(s, g, t) => Some(Self::handle(s, g, t)),
            _ => None,
        }
    }

    /// A reference to the AH for `key` (an [`AhAttr`], a [`PreparedAttr`]
    /// or an attribute's [`AttrWords`]), created by `hal` on a miss.
    ///
    /// A hit is lock-free (see the module docs): it starts at the probe for a
    /// [`PreparedAttr`] and for canonical words (their key is the words),
    /// after packing the key for an [`AhAttr`]. A miss takes the writer lock
    /// to claim a slot, then creates the AH with no lock held; concurrent
    /// misses on the same key wait for that one create (spinning with
    /// [`Backoff`]) and share its AH. If the backend is out of AH resources,
    /// unreferenced entries are evicted and the create is retried. Words that
    /// are not a valid attribute give [`TableError::InvalidAttr`].
    #[inline]
    pub fn get_or_create(&self, hal: &H, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        key.table_lookup(self, hal, true)
    }

    /// [`get_or_create`](Self::get_or_create), but returns
    /// [`TableError::Pending`] instead of waiting for another thread's create
    /// of the same AH. A miss with no create in progress still creates (and so
    /// waits for the backend).
    #[inline]
    pub fn try_get_or_create(&self, hal: &H, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        key.table_lookup(self, hal, false)
    }

    /// A look-up that missed (`probed`: what the probe found), or of words
    /// not in canonical form (`None`: not probed yet): the attribute
    /// converted, then the slow path.
    #[inline(never)]
    fn lookup_converted(
        &self,
        hal: &H,
        key: &AttrWords,
        block: bool,
        probed: Option<Probe>,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let attr = key.to_attr().map_err(TableError::InvalidAttr)?;
        match probed {
            Some(p) => self.lookup_slow(hal, &attr, block, p),
            None => self.lookup(hal, &Key::new(&attr), &attr, block),
        }
    }

    // The look-ups of the shared table merge their fast and slow paths as
    // `Result`s, which LLVM may do through memory (narrow stores, then one
    // wide load: a store-forwarding stall). Measured, that costs a hit here
    // nothing (the CAS drains the store buffer anyway) and the register
    // version below costs 5 instructions; a `Session`'s lease hit, which has
    // no locked instruction, went from 9.2 to 3.2 ns with it.
    #[inline(always)]
    fn lookup<X: From<TableError<H::Error>>>(
        &self,
        hal: &H,
        key: &Key,
        attr: &AhAttr,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        match self.probe::<true>(key) {
            Probe::Hit(s, g, t) => Ok(Self::handle(s, g, t)),
            Probe::Overflow => Err(TableError::RefcountOverflow.into()),
            p => self.lookup_slow(hal, attr, block, p).map_err(X::from),
        }
    }

    /// The handle of a [`RawHandle`], or the error the slow path left in
    /// `err`: where a [`Session`]'s fast and slow paths meet, in registers.
    /// (Merging two `Result`s, LLVM built the fast one in memory with narrow
    /// stores and copied it with a wide load, a store-forwarding stall of
    /// several nanoseconds per lease hit.)
    #[inline(always)]
    fn finish<X>(t: u64, sg: u64, err: Option<X>) -> Result<AhHandle<H::Ah>, X> {
        match err {
            Some(e) => Err(e),
            None => Ok(Self::handle(sg as u32, (sg >> 32) as u32, t)),
        }
    }

    /// `r` as a [`RawHandle`], its error (if any) in `err`.
    #[inline]
    fn to_raw<X>(r: Result<AhHandle<H::Ah>, X>, err: &mut Option<X>) -> RawHandle {
        match r {
            Ok(h) => raw(h.slot, h.generation, h.ah.into_token()),
            Err(e) => {
                *err = Some(e);
                (0, 0)
            }
        }
    }

    #[inline(never)]
    fn lookup_slow(
        &self,
        hal: &H,
        attr: &AhAttr,
        block: bool,
        first: Probe,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        bump(&self.counters.misses);
        self.lookup_slow_uncounted(hal, attr, block, first)
    }

    /// [`lookup_slow`](Self::lookup_slow) without counting the miss (a
    /// [`Session`]'s second try of a look-up already counted).
    fn lookup_slow_uncounted(
        &self,
        hal: &H,
        attr: &AhAttr,
        block: bool,
        first: Probe,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        // Recomputed here so that the fast path keeps the key in registers.
        let key = &Key::new(attr);
        if let Probe::Pending(idx, m) = first {
            bump(&self.counters.pending);
            if !block {
                return Err(TableError::Pending);
            }
            self.wait_change(idx, m);
        }
        for _ in 0..MAX_ROUNDS {
            match self.claim(key) {
                Claim::Existing(idx, m) => match self.acquire_at(idx, key, m) {
                    Probe::Hit(s, g, t) => return Ok(Self::handle(s, g, t)),
                    Probe::Overflow => return Err(TableError::RefcountOverflow),
                    _ => {}
                },
                Claim::Creating(idx, m) => {
                    bump(&self.counters.pending);
                    if !block {
                        return Err(TableError::Pending);
                    }
                    self.wait_change(idx, m);
                }
                Claim::Full => return Err(TableError::Full),
                Claim::Claimed(idx, creating, victim) => {
                    if let Some(token) = victim {
                        let _ = self.destroy(hal, token); // counted in the stats; the AH is gone anyway
                    }
                    return self.create(hal, idx, creating, attr);
                }
            }
        }
        Err(TableError::Contended)
    }

    /// Slot `idx` is `CREATING` with the word `creating` and ours: creates the
    /// AH (no lock held) and publishes it with one reference.
    fn create(
        &self,
        hal: &H,
        idx: usize,
        creating: u64,
        attr: &AhAttr,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let Some(slot) = self.slots.get(idx) else {
            return Err(TableError::Full);
        };
        // Frees the slot on every way out but success, including a backend
        // that panics (and unwinds) inside `resolve_l2` or `create_ah`:
        // waiters on the same key then find the slot free and retry instead
        // of waiting for a create that will never finish.
        let guard = FreeOnDrop { meta: &slot.meta, entries: &self.counters.entries, creating };
        let fail = |e: H::Error| {
            bump(&self.counters.backend_failures);
            Err(TableError::Backend(e))
        };
        let port = attr.port;
        let gid_generation = hal.gid_generation(port);
        let l2 = match hal.resolve_l2(attr) {
            Ok(l2) => l2,
            Err(e) => return fail(e),
        };
        let mut evictions_left = N;
        let ah = loop {
            match hal.create_ah(attr, l2.as_ref()) {
                Ok(ah) => break ah,
                Err(e) if e.kind() == ErrorKind::OutOfResources && evictions_left > 0 => {
                    bump(&self.counters.backend_failures);
                    evictions_left = evictions_left.wrapping_sub(1);
                    if !self.evict_one(hal) {
                        return fail(e);
                    }
                }
                Err(e) => return fail(e),
            }
        };
        bump(&self.counters.creates);
        let token = ah.into_token();
        slot.ah.store(token, Ordering::Relaxed);
        let (l0, l1) = pack_l2(l2.as_ref());
        slot.l2.store(l0, Ordering::Relaxed);
        slot.stamp.store(stamp(l1, gid_generation, self.clock.load(Ordering::Relaxed)), Ordering::Relaxed);
        let generation = generation(creating);
        let live = rebuild(creating, Gen(generation), LIVE, Clock::Used, Refs(1));
        core::mem::forget(guard);
        slot.meta.store(live, Ordering::Release);
        if hal.gid_generation(port) != gid_generation {
            // The GIDs changed while we created: a sweep may have missed this
            // entry. Retire it now; our handle stays valid.
            self.retire_slot(hal, idx, live);
        }
        Ok(Self::handle(idx as u32, generation, token))
    }

    /// Retires slot `idx` if it is still the live incarnation `m0` (any
    /// refcount).
    fn retire_slot(&self, hal: &H, idx: usize, m0: u64) {
        let Some(slot) = self.slots.get(idx) else { return };
        let mut m = slot.meta.load(Ordering::Acquire);
        while state(m) == LIVE && generation(m) == generation(m0) {
            let unreferenced = refs(m) == 0;
            let new = if unreferenced { with_state(m & !USED, BUSY) } else { with_state(m, RETIRED) };
            match slot.meta.compare_exchange(m, new, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    bump(&self.counters.retirements);
                    if unreferenced {
                        let token = slot.ah.load(Ordering::Relaxed);
                        let _ = self.destroy_and_free(hal, idx, m, token);
                    } else {
                        // A session may have leased it already.
                        self.reclaim.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                Err(cur) => m = cur,
            }
        }
    }

    /// Destroys the AH `token` (the AH is gone even on error).
    fn destroy(&self, hal: &H, token: u64) -> Result<(), H::Error> {
        bump(&self.counters.destroys);
        let r = hal.destroy_ah(H::Ah::from_token(token));
        if r.is_err() {
            bump(&self.counters.backend_failures);
        }
        r
    }

    /// Slot `idx` is `BUSY` (from the word `m`, whose hit field it kept) and
    /// ours: destroys its AH and frees it.
    fn destroy_and_free(&self, hal: &H, idx: usize, m: u64, token: u64) -> Result<(), H::Error> {
        let r = self.destroy(hal, token);
        if let Some(slot) = self.slots.get(idx) {
            slot.meta.store(rebuild(m, Gen(generation(m)), FREE, Clock::Clear, Refs(0)), Ordering::Release);
            self.counters.entries.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    /// Evicts one unreferenced entry anywhere in the table (CLOCK hand).
    fn evict_one(&self, hal: &H) -> bool {
        for _ in 0..N.saturating_mul(2) {
            let idx = (self.hand.fetch_add(1, Ordering::Relaxed) as usize) & Self::MASK;
            let Some(slot) = self.slots.get(idx) else { continue };
            let m = slot.meta.load(Ordering::Acquire);
            if state(m) != LIVE || refs(m) != 0 {
                continue;
            }
            if m & USED != 0 {
                let _ = slot.meta.compare_exchange(m, m & !USED, Ordering::Relaxed, Ordering::Relaxed);
                continue;
            }
            if slot.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_ok() {
                bump(&self.counters.evictions);
                let token = slot.ah.load(Ordering::Relaxed);
                let _ = self.destroy_and_free(hal, idx, m, token);
                return true;
            }
        }
        self.reclaim.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Gives a reference back. A live entry whose refcount reaches zero stays
    /// cached; the last release of a retired entry destroys its AH (the
    /// returned error is then the backend's, and the AH is gone anyway).
    ///
    /// Lock-free. A handle that does not hold a reference of this table gives
    /// [`TableError::StaleHandle`] and changes nothing.
    pub fn release(&self, hal: &H, handle: AhHandle<H::Ah>) -> Result<(), TableError<H::Error>> {
        let idx = handle.slot as usize;
        let Some(slot) = self.slots.get(idx) else { return Err(TableError::StaleHandle) };
        // The common case, a live entry of the handle's incarnation, in one
        // compare of the word's generation and state; anything else (a
        // retired entry, a stale handle) goes to `release_slow`.
        let live = live_bits(handle.generation);
        let mut m = slot.meta.load(Ordering::Relaxed);
        loop {
            if m & (GEN_BITS | STATE_MASK) != live || refs(m) == 0 {
                return self.release_slow(hal, idx, handle.generation, m, 1, 0);
            }
            match slot.meta.compare_exchange_weak(m, m.wrapping_sub(1), Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(cur) => m = cur,
            }
        }
    }

    /// [`release`](Self::release) of `n` ≥ 1 references to slot `idx`,
    /// generation `generation`, from the word `m`, in every case, or'ing
    /// `used` ([`USED`] or 0) into the word unless it was the last reference
    /// of a retired entry. (`n` > 1, `used` = [`USED`]: a [`Session`] giving
    /// back a lease, and the CLOCK credit for the hits it served.)
    #[inline(never)]
    fn release_slow(
        &self,
        hal: &H,
        idx: usize,
        generation: u32,
        mut m: u64,
        n: u64,
        used: u64,
    ) -> Result<(), TableError<H::Error>> {
        let Some(slot) = self.slots.get(idx) else { return Err(TableError::StaleHandle) };
        loop {
            let st = state(m);
            if self::generation(m) != generation || (st != LIVE && st != RETIRED) || refs(m) < n.max(1) {
                return Err(TableError::StaleHandle);
            }
            let last = st == RETIRED && refs(m) == n;
            let new =
                if last { rebuild(m, Gen(generation), BUSY, Clock::Clear, Refs(0)) } else { m.wrapping_sub(n) | used };
            match slot.meta.compare_exchange_weak(m, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if last => {
                    let token = slot.ah.load(Ordering::Relaxed);
                    return self.destroy_and_free(hal, idx, m, token).map_err(TableError::Backend);
                }
                Ok(_) => return Ok(()),
                Err(cur) => m = cur,
            }
        }
    }

    /// Another reference to the entry of `handle` (live or retired).
    /// Lock-free.
    pub fn retain(&self, handle: &AhHandle<H::Ah>) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let Some(slot) = self.slots.get(handle.slot as usize) else { return Err(TableError::StaleHandle) };
        let mut m = slot.meta.load(Ordering::Relaxed);
        loop {
            let st = state(m);
            if generation(m) != handle.generation || (st != LIVE && st != RETIRED) || refs(m) == 0 {
                return Err(TableError::StaleHandle);
            }
            if refs(m) == REF_MAX {
                return Err(TableError::RefcountOverflow);
            }
            match slot.meta.compare_exchange_weak(m, m.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(AhHandle { ah: handle.ah, slot: handle.slot, generation: handle.generation }),
                Err(cur) => m = cur,
            }
        }
    }

    /// Whether `handle` is still the table's entry for its attribute: `false`
    /// once the entry was retired (a GID, neighbour or age change) or the
    /// handle is stale. A retired handle stays valid to send with until it
    /// is released; a holder that sees `false` re-resolves to get the
    /// current AH.
    pub fn is_current(&self, handle: &AhHandle<H::Ah>) -> bool {
        self.slots.get(handle.slot as usize).is_some_and(|slot| {
            let m = slot.meta.load(Ordering::Acquire);
            generation(m) == handle.generation && state(m) == LIVE
        })
    }

    /// The layer-2 facts the backend resolved for the entry of `handle`
    /// (`Ok(None)` on InfiniBand).
    pub fn l2(&self, handle: &AhHandle<H::Ah>) -> Result<Option<L2Info>, TableError<H::Error>> {
        let idx = handle.slot as usize;
        let Some(slot) = self.slots.get(idx) else {
            return Err(TableError::StaleHandle);
        };
        let m = slot.meta.load(Ordering::Acquire);
        let st = state(m);
        if generation(m) != handle.generation || (st != LIVE && st != RETIRED) || refs(m) == 0 {
            return Err(TableError::StaleHandle);
        }
        // Stable: the handle's reference keeps the slot from being reused.
        Ok(unpack_l2(slot.l2.load(Ordering::Relaxed), slot.stamp.load(Ordering::Relaxed)))
    }

    /// After a GID-table change on `new`'s port: retires every entry of that
    /// port built against an older GID generation whose local GID (the
    /// `sgid_index` slot) differs between `old` and `new`. Entries built
    /// against `old`'s generation whose GID did not change, and entries
    /// without a GRH, are re-stamped with `new`'s generation; entries built
    /// against any other older generation are retired. Returns how many
    /// entries were retired.
    pub fn retire_gid_change<const M: usize>(&self, hal: &H, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        let (port, g_old, g_new) = (new.port_num(), old.generation(), new.generation());
        self.sweep(hal, |key, st, _| {
            if key.port() != port || gid_matches(st, g_new) {
                return Verdict::Keep;
            }
            match key.sgid_index() {
                None => Verdict::Restamp(g_new),
                Some(i) if gid_matches(st, g_old) && old.get(u32::from(i)) == new.get(u32::from(i)) => {
                    Verdict::Restamp(g_new)
                }
                Some(_) => Verdict::Retire,
            }
        })
    }

    /// Retires every entry created at least `max_age` ago by the table clock
    /// ([`advance_clock`](Self::advance_clock)): for RoCE, where the resolved
    /// destination MAC can go stale. Returns how many entries were retired.
    pub fn retire_older_than(&self, hal: &H, max_age: u64) -> usize {
        let now = self.clock.load(Ordering::Relaxed);
        self.sweep(hal, |_, st, _| if born_age(st, now) >= max_age { Verdict::Retire } else { Verdict::Keep })
    }

    /// After a neighbour change on RoCE: retires every entry of `port` whose
    /// destination GID is `dgid` and whose resolved destination MAC is not
    /// `dmac` (the address now resolves to another station); entries already
    /// built with `dmac`, entries without resolved layer-2 facts and other
    /// destinations are kept, so a refresh of the same MAC retires nothing.
    /// A retired entry a holder still references stays valid for that
    /// holder and is destroyed at its last release. Returns how many
    /// entries were retired.
    pub fn retire_l2_change(&self, hal: &H, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.sweep(hal, |key, st, l2| {
            let words = AttrWords::from_raw(key.0);
            if key.port() != port || words.dgid().as_ref() != Some(dgid) {
                return Verdict::Keep;
            }
            match unpack_l2(l2, st) {
                Some(info) if info.dmac != dmac => Verdict::Retire,
                _ => Verdict::Keep,
            }
        })
    }

    /// Retires every entry. Returns how many entries were retired.
    pub fn retire_all(&self, hal: &H) -> usize {
        self.sweep(hal, |_, _, _| Verdict::Retire)
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
