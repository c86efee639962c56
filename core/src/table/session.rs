//! [`Session`]: one thread's view of an [`AhTable`] whose repeated hits take
//! no locked instruction.
//!
//! A hit on the shared table is one compare-and-swap on the entry's lifecycle
//! word: it takes the reference and proves what it read in one step. That
//! locked instruction is most of a hit's cost, and it writes the entry's
//! cache line, which two threads answering the same peers then bounce
//! between them. A session takes references in bulk instead: its first hit
//! on an entry takes [`LEASE`]` + 1` references with the same
//! compare-and-swap, and its next `LEASE` hits on that entry hand them out
//! from the session's own memory. Such a hit scans the key's window as the
//! table's probe does, with plain loads, and loads the table's reclaim
//! epoch; it writes nothing shared, so hits on two threads scale. Handles
//! released through the session go back to its lease.
//!
//! # Why a lease hit is sound
//!
//! A lease is a number of references the session holds on one incarnation
//! (slot and generation) of an entry, taken by a successful compare-and-swap
//! of the probe (which proved the key and AH it read, see [`super`]). While
//! the session holds at least one of them, that incarnation cannot be
//! evicted, destroyed or reused: its key and AH stay as they are. So when the
//! window scan finds the key in a slot on whose current incarnation the
//! session holds a lease with a reference left, what it read of the slot is
//! that incarnation's, whatever the order of the loads. A retired entry must
//! not be found by new look-ups, and the lifecycle word need not be read to
//! know it: a referenced incarnation leaves `LIVE` only by a retirement
//! (eviction and destruction need refcount 0), and every retirement bumps
//! the table's reclaim epoch after its compare-and-swap (the sweeps and
//! `retire_slot`), so a look-up that a retirement happens before sees the
//! new epoch, gives its leases back and goes to the table; one concurrent
//! with it may be served, as it could have been just before. Without such a
//! lease nothing the scan read is trusted: the look-up goes to the table's
//! probe.
//! References are interchangeable: a handle from a session may be released
//! to the table and the other way round.
//!
//! # What a session pins
//!
//! Leased references keep their entries referenced, so the table neither
//! evicts nor destroys them. A session holds at most `L` leases (default
//! 256, two per set, indexed by table slot), and gives them back:
//!
//! * when it is dropped or [`flush`](Session::flush)ed;
//! * when a lease is replaced by a hotter entry (each lease has a "used"
//!   bit, so an entry must miss twice in a row on a set of two recently used
//!   leases to take one of them; a table of at most `L` slots never has two
//!   entries competing for one lease);
//! * at its next operation after the table asked for them: the table bumps a
//!   *reclaim epoch* when it retires an entry (so that the retired entry's
//!   last release destroys its AH) and when a claim or an eviction finds no
//!   room; a session compares the epoch on every look-up;
//! * in part, when releases through the session bring a lease above
//!   `2 × LEASE` references.
//!
//! A session that stops making calls keeps its leases until it is dropped:
//! drop it (or flush it) before a thread goes idle for long.
//!
//! # When leases do not pay
//!
//! A lease hit takes no locked instruction, which saves about 7 ns per
//! completion (hit and release) on one thread, more on two; but it makes
//! about 18 instructions more than the table's hit (96.8 against 78.6 in
//! `benches/benches/ah_table.rs`), and a lease miss costs
//! far more than the table's hit (the session's own scan, then the probe,
//! giving a lease back, taking a new one: about 270 instructions more, and
//! 43 ns when it still made 400, measured at 10³ peers in Zipf order). So a session's leases pay
//! only when its peers repeat a lot: at least `HITS_PER_MISS` (6) lease
//! hits per lease miss (the figures are in its documentation), a hit rate of
//! 86 %, not the 50 % that 10³ peers in Zipf order exceed (71 %) while
//! costing 1.5× the shared path in instructions and 1.3× in time.
//!
//! Every 64 lease misses a session judges: if its look-ups since the last
//! judgement had fewer than 6 lease hits per lease miss (the first 64
//! misses that only fill an empty lease count as neither: a session's
//! warm-up, where every peer misses once), it gives every lease back and
//! makes its next 4,096 look-ups exactly as the shared table does (the same
//! code as [`Shared`](super::Shared)'s, after one test of a counter), then
//! tries leases again; each trial in a row that fails doubles the next
//! bypass, up to 65,536 look-ups, and a trial that pays resets it. A
//! thrashing session thus costs the shared path plus a trial (at most 128
//! lease misses and a flush) per 65,536 look-ups, and a session whose peers
//! repeat keeps its leases (one whose peers start repeating takes leases
//! again within 65,536 look-ups). Measured against the shared path on the
//! same completions, beside a control of the shared path against itself
//! (`UDAH_AH_SCALE_AB=session` in `benches/benches/ah_scale.rs`): a
//! bypassing session takes about 1.5 % more time and 1.01–1.03× the
//! instructions (the test in the look-up, the one in the release, and the
//! register allocation around the latter; `benches/RESULTS.md`).
//!
//! # Statistics
//!
//! Hits served from a lease are counted in the session and published to the
//! table's [`hits`](super::TableStats::hits) when a release through the
//! session finds 256 or more of them on its lease, when the lease is
//! refilled or given back, and on flush, so a snapshot of the table's
//! counters may lag by fewer than 256 + 2 × `LEASE` + 1 hits per lease (a
//! lease serves at most its references between two releases). (The check is
//! in the release, not in the hit: a lease hit is the path a responder
//! waits on.)

use super::key::{Key, alt_of, home_of};
use super::slot::USED;
use super::{AhHandle, AhTable, Lookup, Probe, RawHandle, TableError, raw};
use crate::attr::{AhAttr, AttrWords};
use crate::hal::{AhToken, Error as _, ErrorKind, Hal};
use crate::sync::Ordering;

/// References a [`Session`] takes on an entry at once, besides the one it
/// returns: one locked instruction on the shared table per `LEASE + 1` hits
/// of a peer.
pub const LEASE: u32 = 64;

/// From how many unpublished lease hits a release through a session
/// publishes them to the table's counter.
const PUBLISH: u32 = 256;

/// Lease misses after which a session judges whether its leases pay.
const JUDGE_MISSES: u32 = 64;

/// Lease hits a session needs per lease miss for its leases to pay: what a
/// lease miss costs more than the table's hit, over what a lease hit saves
/// against it (see the module documentation, "When leases do not pay").
///
/// Measured (`benches/RESULTS.md`, the issue's table, one thread, resolve +
/// release per completion, main at c661cbc): at 64 peers every look-up is a
/// lease hit, and a session takes 23.3 ns against the shared path's 30.6
/// (21.9 against 28.6 in Zipf order), so a lease hit and its release save
/// about 7 ns (the two locked instructions), for 19.6 instructions more
/// (276.2 against 256.6). At 10³ peers in Zipf order, 71 % of the look-ups
/// are lease hits (256 leases, two per set; a simulation of the replacement
/// over the same stream) and the session took 33.3 ns against 25.9, 388.6
/// instructions against 256.9: a lease miss (the session's scan, the probe
/// after it, a lease given back and one taken) cost the shared path plus
/// (7.4 + 0.71 × 7.0) / 0.29 ≈ 43 ns and (131.7 − 0.71 × 19.6) / 0.29 ≈
/// 406 instructions. 43 / 7 ≈ 6: leases pay in time when there are at
/// least 6 hits per miss (a hit rate of 6/7 ≈ 86 %), never in instructions.
/// (On two threads a hit saves more where the shared path's lines bounce,
/// 15 ns at 64 peers; the rule keeps to one thread's figures, the lower
/// saving.) Since then a lease miss no longer converts and hashes the key
/// again, and a hit no longer checks its publication: with leases forced
/// (a 1:1 rule) the 10³ Zipf row is 343.3 instructions against 256.6 and
/// the 64-peer row 267.0 against 256.3, a miss about 273 instructions more
/// than the table's hit and a hit 10.7; the miss's time was not measured
/// again, so 6 may now be conservative (4 if time followed instructions).
const HITS_PER_MISS: u32 = 6;

/// Look-ups a session whose leases did not pay makes on the shared path
/// (with no lease) before it tries leases again.
const BYPASS: u32 = 64 * JUDGE_MISSES;

/// How many times a bypass doubles while trials keep failing (`BYPASS << 4`
/// = 65,536 look-ups).
const MAX_BACKOFF: u32 = 4;

/// An empty lease's slot (no slot index reaches it: capacities are ≤ 2²⁴).
const NO_SLOT: u32 = u32::MAX;

/// One hit in a lease's tally: the hits are counted above the references.
const TALLY_HIT: u32 = 1 << 16;
/// The references in a lease's tally.
const TALLY_REFS: u32 = TALLY_HIT - 1;
// A lease holds at most `2 × LEASE + 1` references (`release` sheds above
// `2 × LEASE`) and has fewer than `PUBLISH + 2 × LEASE + 1` unpublished hits
// (a release publishes from `PUBLISH` on, and no more hits than references
// come between two releases): both fit their fields.
const _: () = assert!(2 * LEASE < TALLY_REFS && ((PUBLISH + 2 * LEASE + 1) as u64) << 16 < 1 << 32);

/// References held on one incarnation of an entry.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// The slot ([`NO_SLOT`]: the lease is empty).
    slot: u32,
    generation: u32,
    /// The references held and not handed out (bits 0..16) and the hits
    /// served since the last publication (above, fewer than [`PUBLISH`]` +
    /// 2 × `[`LEASE`]` + 1`):
    /// a hit is one addition, [`TALLY_HIT`]` − 1`.
    tally: u32,
    /// Hit since its set last had to choose a victim.
    used: u32,
}

impl Lease {
    const EMPTY: Lease = Lease { slot: NO_SLOT, generation: 0, tally: 0, used: 0 };

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.slot == NO_SLOT
    }

    /// The references held and not handed out.
    #[inline(always)]
    fn refs(&self) -> u32 {
        self.tally & TALLY_REFS
    }

    /// The hits not yet published.
    #[inline(always)]
    fn hits(&self) -> u32 {
        self.tally >> 16
    }
}

/// What the session's own look-up found.
enum Local {
    /// A handle from a lease.
    Hit(RawHandle),
    /// No lease hit; the key was seen in this slot (not proven: the table's
    /// probe decides).
    Miss(Option<usize>),
}

/// One thread's session on an [`AhTable`]: the same look-ups, but a repeated
/// hit on a peer is served from references the session leased in bulk, with
/// no locked instruction and no write to shared memory (see the [module
/// documentation](self)).
///
/// Made by [`AhTable::session`] (256 leases) or [`Session::new`] (`L` leases,
/// a power of two ≥ 2; 16 bytes each, kept in the session). Leases are
/// indexed by table slot, two per set: a table of at most `L` slots never
/// has two entries competing for one lease. A session is `Send` but not
/// `Sync`: each thread makes its own. It borrows the table and the backend;
/// dropping it gives its leases back.
///
/// ```
/// # use udah_core::ah::{AhAttr, PortNum, Sl};
/// # use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
/// # use udah_core::{GidTable, LinkLayer};
/// # use udah_core::table::AhTable;
/// # use core::sync::atomic::{AtomicU64, Ordering};
/// # #[derive(Default)] struct Null(AtomicU64);
/// # impl ErrorType for Null { type Error = ErrorKind; }
/// # impl Hal for Null {
/// #     type Ah = u64;
/// #     fn port_info(&self, p: PortNum) -> Result<PortInfo, ErrorKind> { Ok(PortInfo::new(p.get(), LinkLayer::Infiniband, 1)) }
/// #     fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> { Ok(()) }
/// #     fn gid_generation(&self, _: PortNum) -> u64 { 0 }
/// #     fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> { Ok(None) }
/// #     fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> { Ok(self.0.fetch_add(1, Ordering::Relaxed)) }
/// #     fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> { Ok(()) }
/// # }
/// let hal = Null::default();
/// let table: AhTable<Null, 256> = AhTable::new();
/// let peer = AhAttr {
///     port: PortNum::new(1).unwrap(), dlid: 7, sl: Sl::new(0).unwrap(),
///     src_path_bits: 0, static_rate: 0, grh: None,
/// };
/// let mut s = table.session(&hal);
/// for _ in 0..1000 {
///     let h = s.get_or_create(&peer).unwrap(); // one CAS per 65 hits
///     // ... post the reply with h.ah() ...
///     s.release(h).unwrap(); // back to the lease: no locked instruction
/// }
/// drop(s); // gives the leased references back
/// let st = table.stats_exact();
/// assert_eq!(st.hits + st.misses, 1000);
/// ```
pub struct Session<'t, H: Hal, const N: usize, const L: usize = 256>
where
    H::Ah: AhToken,
{
    table: &'t AhTable<H, N>,
    hal: &'t H,
    /// The table's reclaim epoch when this session last gave its leases
    /// back (or started).
    epoch: u64,
    /// Look-ups left on the shared path before leases are tried again (> 0,
    /// see the module documentation, "When leases do not pay"), or minus the
    /// look-ups through leases since the last judgement (≤ 0): one counter,
    /// so that a look-up's test of the path is one decrement and a branch on
    /// its sign. (64 bits: a session whose leases never miss counts down for
    /// ever.)
    turn: i64,
    /// Judgements in a row that found the leases not paying, at most
    /// [`MAX_BACKOFF`]: each doubles the next bypass.
    failed: u32,
    /// Of the look-ups through leases since the last judgement, the ones no lease served, but for the fills
    /// ([`free_fill`](Self::free_fill)).
    missed: u32,
    /// Lease misses since the last judgement that only filled an empty
    /// lease and were not counted in `missed` (at most [`JUDGE_MISSES`]).
    filled: u32,
    leases: [Lease; L],
}

impl<H: Hal, const N: usize, const L: usize> core::fmt::Debug for Session<'_, H, N, L>
where
    H::Ah: AhToken,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("leases", &self.leases())
            .field("leased_refs", &self.leased_refs())
            .field("epoch", &self.epoch)
            .field("bypassing", &self.bypassing())
            .finish_non_exhaustive()
    }
}

impl<H: Hal, const N: usize> AhTable<H, N>
where
    H::Ah: AhToken,
{
    /// A [`Session`] on this table for the calling thread, with 256 leases.
    #[inline]
    pub fn session<'t>(&'t self, hal: &'t H) -> Session<'t, H, N> {
        Session::new(self, hal)
    }
}

impl<'t, H: Hal, const N: usize, const L: usize> Session<'t, H, N, L>
where
    H::Ah: AhToken,
{
    const CHECK: () = assert!(L.is_power_of_two() && L >= 2, "Session lease count must be a power of two ≥ 2");
    /// Sets of two leases.
    const SET_MASK: usize = L / 2 - 1;

    /// A session on `table` with `L` leases, creating with `hal`.
    pub fn new(table: &'t AhTable<H, N>, hal: &'t H) -> Self {
        let () = Self::CHECK;
        Session {
            table,
            hal,
            epoch: table.reclaim.load(Ordering::Relaxed),
            turn: 0,
            failed: 0,
            missed: 0,
            filled: 0,
            leases: [Lease::EMPTY; L],
        }
    }

    /// The table.
    #[inline]
    pub fn table(&self) -> &'t AhTable<H, N> {
        self.table
    }

    /// The backend the session creates with.
    #[inline]
    pub fn backend(&self) -> &'t H {
        self.hal
    }

    /// How many entries this session holds leases on.
    pub fn leases(&self) -> usize {
        self.leases.iter().filter(|l| !l.is_empty()).count()
    }

    /// How many references this session holds and has not handed out.
    pub fn leased_refs(&self) -> u64 {
        self.leases.iter().map(|l| u64::from(l.refs())).sum()
    }

    /// Hits this session served from its leases and has not yet added to
    /// the table's [`hits`](super::TableStats::hits) (fewer than 256 + 2 ×
    /// [`LEASE`] + 1 per lease; 0 after [`flush`](Self::flush)).
    pub fn unpublished_hits(&self) -> u64 {
        self.leases.iter().map(|l| u64::from(l.hits())).sum()
    }

    /// Way `way` of slot `idx`'s set.
    #[inline(always)]
    fn way(idx: usize, way: usize) -> usize {
        (idx & Self::SET_MASK).wrapping_mul(2).wrapping_add(way) & L.wrapping_sub(1)
    }

    /// The lease of slot `idx`, if this session holds one.
    #[inline(always)]
    fn lease_of(&self, idx: usize) -> Option<usize> {
        (0..2).map(|w| Self::way(idx, w)).find(|&i| self.leases.get(i).is_some_and(|l| l.slot as usize == idx))
    }

    /// The session's own look-up of `key` (whose hash is `h`): the table's
    /// windows scanned with plain loads, then, where the key is,
    /// a hit from the slot's lease if the table has not asked for leases
    /// back and the lease has a reference left.
    #[inline(always)]
    fn lease_hit(&mut self, key: &Key, h: u64) -> Local {
        // The home window here, as the table's probe scans it, the second
        // window out of line (a key is there only when its first window was
        // full); both give a slot index, in a register, so that the handle
        // is built in one place. (The home slot alone here and the rest of
        // the window out of line cost the 12 % of keys not in their home
        // slot a call: 2.5 to 7 instructions per look-up more.)
        let home = home_of(h, AhTable::<H, N>::MASK);
        let idx = match self.scan(key, home) {
            Some(idx) => idx,
            // A copy of the key for the out-of-line call, on this cold path
            // (as `AhTable::probe_from`'s).
            None if AhTable::<H, N>::TWO => match self.scan_alt(&{ *key }, h) {
                Some(idx) => idx,
                None => return Local::Miss(None),
            },
            None => return Local::Miss(None),
        };
        self.hit_at(idx)
    }

    /// The slot of `key` in the window that starts at `start` (plain loads,
    /// not proven): the slots `AhTable::probe_window` visits, in its order,
    /// by index. (Walking them by byte offset as the probe does, in one
    /// shared loop, cost a lease hit 0.4–3.3 instructions: this loop, its
    /// trip count known, unrolls; session `resolve` 247.9 -> 250.2.)
    #[inline(always)]
    fn scan(&self, key: &Key, start: usize) -> Option<usize> {
        (0..AhTable::<H, N>::WINDOW)
            .map(|i| start.wrapping_add(i) & AhTable::<H, N>::MASK)
            .find(|&idx| self.table.slots.get(idx).is_some_and(|slot| AhTable::<H, N>::key_matches::<false>(slot, key)))
    }

    /// [`scan`](Self::scan) of `key`'s second window (hash `h`), out of line.
    #[inline(never)]
    fn scan_alt(&self, key: &Key, h: u64) -> Option<usize> {
        self.scan(key, alt_of(h, AhTable::<H, N>::MASK))
    }

    /// The key was seen in slot `idx`: a hit from its lease, if this session
    /// holds one on the slot with a reference left and the table has not
    /// asked for leases back. (The lease's references keep its incarnation
    /// in the slot, so the key seen is the lease's; the slot's word need not
    /// be read: a referenced entry leaves `LIVE` only by a retirement, and
    /// every retirement bumps the reclaim epoch after it, see the module
    /// docs.)
    #[inline(always)]
    fn hit_at(&mut self, idx: usize) -> Local {
        let Some(slot) = self.table.slots.get(idx) else { return Local::Miss(None) };
        if self.table.reclaim.load(Ordering::Relaxed) != self.epoch {
            return Local::Miss(Some(idx));
        }
        for w in 0..2 {
            let Some(lease) = self.leases.get_mut(Self::way(idx, w)) else { continue };
            if lease.slot as usize != idx {
                continue;
            }
            let t = lease.tally;
            if t & TALLY_REFS == 0 {
                break;
            }
            // One reference handed out, one hit counted (published by a
            // release, see `lease_release`).
            lease.tally = t.wrapping_add(TALLY_HIT - 1);
            lease.used = 1;
            let token = slot.ah.load(Ordering::Relaxed);
            return Local::Hit(raw(idx as u32, lease.generation, token));
        }
        Local::Miss(Some(idx))
    }

    /// Gives lease `i` back (publishing its hits) and empties it.
    fn give_back(&mut self, i: usize) -> Result<(), TableError<H::Error>> {
        let Some(lease) = self.leases.get_mut(i) else { return Ok(()) };
        if lease.is_empty() {
            return Ok(());
        }
        let l = core::mem::replace(lease, Lease::EMPTY);
        let Some(slot) = self.table.slots.get(l.slot as usize) else { return Err(TableError::StaleHandle) };
        if l.hits() > 0 {
            self.table.hits.fetch_add(u64::from(l.hits()), Ordering::Relaxed);
        }
        if l.refs() == 0 {
            return Ok(());
        }
        let m = slot.meta.load(Ordering::Relaxed);
        self.table.release_slow(self.hal, l.slot as usize, l.generation, m, u64::from(l.refs()), USED)
    }

    /// Gives every lease back (the last release of a retired entry destroys
    /// its AH). Returns the first error, after giving back all the others: a
    /// backend's `destroy_ah` failure (the AH is gone anyway).
    pub fn flush(&mut self) -> Result<(), TableError<H::Error>> {
        self.epoch = self.table.reclaim.load(Ordering::Relaxed);
        let mut first = Ok(());
        for i in 0..L {
            let r = self.give_back(i);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// The lease for slot `idx` that a new lease may take: its own (drained,
    /// or of an older incarnation), an empty way, or a way not used since its
    /// set last chose; `None` when both ways are hot (their used bits are
    /// then cleared: they must earn their place again).
    fn victim(&mut self, idx: usize) -> Option<usize> {
        if let Some(i) = self.lease_of(idx) {
            return Some(i);
        }
        let (a, b) = (Self::way(idx, 0), Self::way(idx, 1));
        let lease = |i: usize| self.leases.get(i).copied().unwrap_or(Lease::EMPTY);
        let (la, lb) = (lease(a), lease(b));
        if la.is_empty() || (la.used == 0 && !lb.is_empty()) {
            return Some(a);
        }
        if lb.is_empty() || lb.used == 0 {
            return Some(b);
        }
        for i in [a, b] {
            if let Some(l) = self.leases.get_mut(i) {
                l.used = 0;
            }
        }
        None
    }

    /// The look-up after a lease miss: gives the leases back if the table
    /// asked for them; then probes the table, taking `LEASE` more references
    /// for a lease when the key was seen in a slot whose set has room, and
    /// returns what the probe found (a hit holds one reference for the
    /// caller either way).
    #[inline(never)]
    fn lease_miss(&mut self, key: &Key, h: u64, seen: Option<usize>) -> Probe {
        if self.table.reclaim.load(Ordering::Relaxed) != self.epoch {
            let _ = self.flush(); // a destroy failure is counted in the stats; the AH is gone anyway
        }
        let Some((idx, v)) = seen.and_then(|idx| Some((idx, self.victim(idx)?))) else {
            return self.table.probe_from::<false>(key, h, 0);
        };
        let _ = self.give_back(v);
        match self.table.probe_from::<false>(key, h, u64::from(LEASE)) {
            Probe::Hit(s, g, t) if s as usize == idx => {
                if let Some(l) = self.leases.get_mut(v) {
                    *l = Lease { slot: s, generation: g, tally: LEASE, used: 1 };
                }
                Probe::Hit(s, g, t)
            }
            Probe::Hit(s, g, t) => {
                // The key is in another slot than the one seen (a race with a
                // writer): give the lease's references back.
                let m = self.table.slots.get(s as usize).map_or(0, |x| x.meta.load(Ordering::Relaxed));
                let _ = self.table.release_slow(self.hal, s as usize, g, m, u64::from(LEASE), USED);
                Probe::Hit(s, g, t)
            }
            // No room for a lease's references: a plain hit.
            Probe::Overflow => self.table.probe_from::<false>(key, h, 0),
            p => p,
        }
    }

    /// A lease miss: [`lease_miss`](Self::lease_miss), then the table's slow
    /// path for `form`'s attribute (converted only there: a lease miss that
    /// the table's probe serves, the common one, needs no attribute); when
    /// the table is full and this session holds leases, it gives them back
    /// and tries once more.
    #[inline(never)]
    fn lookup_miss<K: Lookup>(
        &mut self,
        key: &Key,
        h: u64,
        seen: Option<usize>,
        form: &K,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let p = if !self.free_fill(seen) && self.note_miss() {
            self.table.probe_from::<false>(key, h, 0)
        } else {
            self.lease_miss(key, h, seen)
        };
        let p = match p {
            Probe::Hit(s, g, t) => return Ok(AhTable::<H, N>::handle(s, g, t)),
            Probe::Overflow => return Err(TableError::RefcountOverflow),
            p => p,
        };
        let attr = form.to_attr().map_err(TableError::InvalidAttr)?;
        let r = self.table.lookup_slow(self.hal, &attr, block, p);
        // The table is full, or the backend out of AHs, and this session's
        // leases may be what pins the entries eviction needs: give them back
        // and make the same look-up again (already counted as a miss).
        let no_room = match &r {
            Err(TableError::Full) => true,
            Err(TableError::Backend(e)) => e.kind() == ErrorKind::OutOfResources,
            _ => false,
        };
        if no_room && self.leases() > 0 {
            let _ = self.flush();
            return self.table.lookup_slow_uncounted(self.hal, &attr, block, Probe::Miss);
        }
        r
    }

    /// Whether a lease miss on the key seen in slot `seen` is not counted
    /// against the leases: it only fills an empty way of the slot's set,
    /// and fewer than [`JUDGE_MISSES`] such misses went uncounted since the
    /// last judgement. That is a session's warm-up: every peer misses once
    /// before its lease serves it, so with 64 peers or more in a cycle the
    /// first judgement saw nothing but misses and the session never took a
    /// lease (the shared path's figures were the session's). The fills count
    /// as neither hits nor misses, and the bound keeps a thrashing session
    /// judged within `2 × JUDGE_MISSES` lease misses.
    #[inline]
    fn free_fill(&mut self, seen: Option<usize>) -> bool {
        let Some(idx) = seen else { return false };
        if self.filled >= JUDGE_MISSES || self.lease_of(idx).is_some() {
            return false;
        }
        let fills = (0..2).any(|w| self.leases.get(Self::way(idx, w)).is_some_and(Lease::is_empty));
        self.filled = self.filled.wrapping_add(u32::from(fills));
        fills
    }

    /// Counts a lease miss; every [`JUDGE_MISSES`] of them, judges whether
    /// leases pay: when the look-ups since the last judgement had fewer than
    /// [`HITS_PER_MISS`] lease hits per lease miss, gives every lease back and makes the next
    /// [`BYPASS`] look-ups on the shared path, twice as many after each
    /// judgement in a row that found the same (at most `BYPASS <<
    /// MAX_BACKOFF`). Returns whether it did.
    #[inline]
    fn note_miss(&mut self) -> bool {
        self.missed = self.missed.wrapping_add(1);
        if self.missed < JUDGE_MISSES {
            return false;
        }
        let looked = u32::try_from(self.turn.unsigned_abs()).unwrap_or(u32::MAX);
        let hits = looked.saturating_sub(self.missed).saturating_sub(self.filled);
        let pays = hits >= self.missed.saturating_mul(HITS_PER_MISS);
        (self.turn, self.missed, self.filled) = (0, 0, 0);
        if pays {
            self.failed = 0;
            return false;
        }
        let _ = self.flush(); // a destroy failure is counted in the stats; the AH is gone anyway
        self.turn = i64::from(BYPASS << self.failed);
        self.failed = self.failed.wrapping_add(1).min(MAX_BACKOFF);
        true
    }

    /// Whether this session is making its look-ups on the shared path
    /// because its leases did not pay (see the module documentation).
    pub fn bypassing(&self) -> bool {
        self.turn > 0
    }

    /// [`AhTable::get_or_create`] through this session (any key form:
    /// [`AhAttr`], [`PreparedAttr`](super::PreparedAttr), [`AttrWords`]).
    #[inline(always)]
    pub fn get_or_create(&mut self, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        self.lookup_any(key, true)
    }

    /// [`AhTable::try_get_or_create`] through this session.
    #[inline(always)]
    pub fn try_get_or_create(&mut self, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        self.lookup_any(key, false)
    }

    /// Every look-up of a session: while it bypasses its leases, exactly
    /// the shared table's look-up (the code [`Shared`](super::Shared) runs,
    /// with one counter more); otherwise through the leases.
    #[inline(always)]
    pub(super) fn lookup_any<K: Lookup, X: From<TableError<H::Error>>>(
        &mut self,
        key: &K,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        self.turn = self.turn.wrapping_sub(1);
        if self.turn >= 0 {
            return key.table_lookup(self.table, self.hal, block);
        }
        key.session_lookup(self, block)
    }

    /// The look-up of `words` (`key`: their canonical form, if they have
    /// one): the session's lease hit, then (out of line) the table's probe and slow path. Both paths
    /// give a [`RawHandle`], so that they meet in registers (see
    /// `AhTable::finish`).
    #[inline(always)]
    pub(super) fn lookup_words<X: From<TableError<H::Error>>>(
        &mut self,
        key: Option<Key>,
        words: AttrWords,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        self.lookup_words_with(key, None, words, block)
    }

    /// [`lookup_words`](Self::lookup_words) of canonical words whose key
    /// `key` has the hash `h` in this session's table.
    #[inline(always)]
    pub(super) fn lookup_words_hashed<X: From<TableError<H::Error>>>(
        &mut self,
        key: Key,
        h: u64,
        words: AttrWords,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        self.lookup_words_with(Some(key), Some(h), words, block)
    }

    /// The one body of both: `hash`, the key's hash when known.
    #[inline(always)]
    fn lookup_words_with<X: From<TableError<H::Error>>>(
        &mut self,
        key: Option<Key>,
        hash: Option<u64>,
        words: AttrWords,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        let mut err = None;
        let (t, sg) = match key {
            Some(k) => {
                let h = match hash {
                    Some(h) => h,
                    None => self.table.hash(&k),
                };
                match self.lease_hit(&k, h) {
                    Local::Hit(r) => r,
                    // A copy of the key for the out-of-line call, on this
                    // cold path (as `AhTable::probe_from`'s).
                    Local::Miss(seen) => {
                        let r = self.lookup_miss(&{ k }, h, seen, &words, block);
                        AhTable::<H, N>::to_raw(r.map_err(X::from), &mut err)
                    }
                }
            }
            None => AhTable::<H, N>::to_raw(self.lookup_converted(&words, block).map_err(X::from), &mut err),
        };
        AhTable::<H, N>::finish(t, sg, err)
    }

    /// A look-up of `key` (hash `h`), then the table's slow path for `attr`
    /// on a miss.
    #[inline(always)]
    pub(super) fn lookup<X: From<TableError<H::Error>>>(
        &mut self,
        key: &Key,
        h: u64,
        attr: &AhAttr,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        // Both paths give a `RawHandle`, so that they meet in registers (see
        // `AhTable::finish`).
        let mut err = None;
        let (t, sg) = match self.lease_hit(key, h) {
            Local::Hit(r) => r,
            Local::Miss(seen) => {
                // A copy of the key for the out-of-line call, on this cold
                // path (through `key` itself, the key went to memory on
                // every look-up, 4 stores).
                let r = self.lookup_miss(&{ *key }, h, seen, attr, block);
                AhTable::<H, N>::to_raw(r.map_err(X::from), &mut err)
            }
        };
        AhTable::<H, N>::finish(t, sg, err)
    }

    /// A look-up of words that are not canonical (no key of their own):
    /// converted to the attribute, whose key the session looks up.
    #[inline(never)]
    fn lookup_converted(&mut self, words: &AttrWords, block: bool) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let attr = words.to_attr().map_err(TableError::InvalidAttr)?;
        let k = Key::new(&attr);
        let h = self.table.hash(&k);
        match self.lease_hit(&k, h) {
            Local::Hit((t, sg)) => AhTable::<H, N>::finish(t, sg, None),
            Local::Miss(seen) => self.lookup_miss(&k, h, seen, &attr, block),
        }
    }

    /// Gives a reference back: to its lease when this session holds one on
    /// the handle's incarnation (no locked instruction), otherwise
    /// [`AhTable::release`].
    #[inline(always)]
    pub fn release(&mut self, handle: AhHandle<H::Ah>) -> Result<(), TableError<H::Error>> {
        // On the shared path the session holds no lease (`note_miss` gave
        // them all back, and only the lease path takes one). One result for
        // both paths' success, so that the caller tests it once.
        if self.turn <= 0 && self.lease_release(&handle) {
            return Ok(());
        }
        self.table.release(self.hal, handle)
    }

    /// Gives `handle`'s reference to its lease, if this session holds one on
    /// its incarnation.
    #[inline(always)]
    fn lease_release(&mut self, handle: &AhHandle<H::Ah>) -> bool {
        let idx = handle.slot as usize;
        for w in 0..2 {
            let i = Self::way(idx, w);
            let Some(lease) = self.leases.get_mut(i) else { break };
            if lease.slot == handle.slot && lease.generation == handle.generation {
                let t = lease.tally.wrapping_add(1);
                lease.tally = t;
                if t & TALLY_REFS > 2 * LEASE || t >= PUBLISH << 16 {
                    self.settle(i);
                }
                return true;
            }
        }
        false
    }

    /// Lease `i` holds more than `2 × LEASE` references, or [`PUBLISH`]
    /// unpublished hits or more: gives `LEASE` references back, publishes
    /// the hits. Giving back cannot fail: the lease keeps more than `LEASE`
    /// references, so the entry's incarnation stays (neither stale nor
    /// destroyed).
    #[cold]
    #[inline(never)]
    fn settle(&mut self, i: usize) {
        let Some(lease) = self.leases.get_mut(i) else { return };
        let Some(slot) = self.table.slots.get(lease.slot as usize) else { return };
        if lease.hits() >= PUBLISH {
            self.table.hits.fetch_add(u64::from(lease.hits()), Ordering::Relaxed);
            lease.tally &= TALLY_REFS;
        }
        if lease.refs() > 2 * LEASE {
            lease.tally = lease.tally.wrapping_sub(LEASE);
            let (idx, generation) = (lease.slot as usize, lease.generation);
            let m = slot.meta.load(Ordering::Relaxed);
            let r = self.table.release_slow(self.hal, idx, generation, m, u64::from(LEASE), USED);
            debug_assert!(r.is_ok(), "a lease's references are its incarnation's");
        }
    }
}

impl<H: Hal, const N: usize, const L: usize> Drop for Session<'_, H, N, L>
where
    H::Ah: AhToken,
{
    fn drop(&mut self) {
        let _ = self.flush(); // a destroy failure is counted in the stats; the AH is gone anyway
    }
}
