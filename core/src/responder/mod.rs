//! [`Responder`]: the whole pipeline of a UD responder's port as one object.
//!
//! A UD responder answers whoever wrote to it, and the only return address
//! is in the receive completion and its 40-byte area. Per completion the
//! pipeline is, in this order, each stage in one module:
//!
//! 1. **evidence** ([`EvidenceSource`] → [`Evidence`], `wire::detect`): how
//!    the header type is told (the profile's heuristic, a pre-stamped
//!    receive area, mlx5's packet-type bits in `wc.sl`);
//! 2. **profile** ([`Profile::words`], `ah`): the attribute libibverbs or the
//!    kernel would build, against the port's GID snapshot (`gid_table`), in
//!    the [word form](AttrWords) of `attr`;
//! 3. **admission** ([`Admission`]): an allow-list of source GID prefixes,
//!    VLANs and P_Key indices; a refused completion creates no AH and evicts
//!    nothing, and is counted by reason ([`Refusal`]);
//! 4. **cache** ([`AhCache`], `table`): the AH for those words, shared with
//!    every other completion from the same peer, created by the backend on
//!    a miss.
//!
//! The responder owns the GID snapshot (so the port it answers on is the
//! snapshot's: no port argument can disagree with it), the evidence source,
//! the profile, the admission policy and the cache (which owns the backend).
//! [`refresh`](Responder::refresh) re-takes the snapshot when the backend's
//! GID generation moved and retires the AHs built on changed entries.
//!
//! ```
//! use udah_core::ah::{AhAttr, IbvWc, IBV_WC_GRH};
//! use udah_core::attr::PortNum;
//! use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
//! use udah_core::responder::{Admission, Config, Refusal, ResolveError, Responder};
//! use udah_core::table::AhTable;
//! use udah_core::wire::{Gid, GrhRepr};
//! use udah_core::{GidEntry, GidTable, GidType, LinkLayer};
//! # use core::sync::atomic::{AtomicU64, Ordering};
//! # const OURS: Gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
//! # #[derive(Default)] struct Port(AtomicU64);
//! # impl ErrorType for Port { type Error = ErrorKind; }
//! # impl Hal for Port {
//! #     type Ah = u64;
//! #     fn port_info(&self, p: PortNum) -> Result<PortInfo, ErrorKind> { Ok(PortInfo::new(p.get(), LinkLayer::Infiniband, 4)) }
//! #     fn snapshot_gids<const N: usize>(&self, p: PortNum, t: &mut GidTable<N>) -> Result<(), ErrorKind> {
//! #         *t = GidTable::new(p.get(), LinkLayer::Infiniband, 4);
//! #         t.set(0, GidEntry::new(OURS, GidType::Ib)).map_err(|_| ErrorKind::InvalidArgument)
//! #     }
//! #     fn gid_generation(&self, _: PortNum) -> u64 { 0 }
//! #     fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> { Ok(None) }
//! #     fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> { Ok(self.0.fetch_add(1, Ordering::Relaxed)) }
//! #     fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> { Ok(()) }
//! # }
//! let hal = Port::default(); // port 1: fe80::1 at GID index 0
//! let table: AhTable<Port, 64> = AhTable::new();
//! let peer = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
//! let stranger = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
//!
//! // A gateway: only fe80::/64, untagged, P_Key index 0.
//! let admission = Admission::deny_all()
//!     .allow_gid_prefix(Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 64).unwrap()
//!     .allow_vlan(None).unwrap()
//!     .allow_pkey_index(0).unwrap();
//! let config = Config { admission, ..Config::default() };
//! let mut r: Responder<_, 8> = Responder::new(table.shared(&hal), PortNum::new(1).unwrap(), config).unwrap();
//!
//! let request = |from: Gid| {
//!     let mut area = [0u8; 40];
//!     GrhRepr { sgid: from, dgid: OURS, hop_limit: 1, next_header: 0x1b, ..GrhRepr::default() }.emit(&mut area);
//!     area
//! };
//! let wc = IbvWc { wc_flags: IBV_WC_GRH, slid: 2, ..IbvWc::default() };
//! let h = r.resolve(&wc, &request(peer)).unwrap(); // the peer's AH, created once
//! r.release(h).unwrap();
//! assert!(matches!(r.resolve(&wc, &request(stranger)), Err(ResolveError::Refused(Refusal::GidPrefix))));
//! assert_eq!((r.refused().gid_prefix, r.stats().table.creates), (1, 1)); // no AH for the stranger
//! ```

use crate::ah::{Completion, IbvWc, Profile, ProfileError, libibverbs};
use crate::attr::{AttrWords, PortNum};
use crate::gid_table::{GidTable, LinkLayer};
use crate::hal::{ErrorType, Hal};
use crate::table::fill;
use crate::table::{AhCache, AhHandle, CacheAh, CacheError, Hashed, TableError, TableStats, Wait};
use crate::wire::{Area, Evidence, Gid, NetworkType, SourceAddress, Stamp};

/// Where a responder takes the header type of the 40-byte area from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EvidenceSource {
    /// The profile's own heuristic (bit-exact with the C code).
    #[default]
    None,
    /// The receive areas were pre-stamped with this stamp before posting.
    Stamp(Stamp),
    /// mlx5's packet-type bits in `wc.sl` (RoCE ports, the libibverbs
    /// profile: the SL is then taken as 0, since mlx5 reports the packet type
    /// in that field, not an SL). The kernel profile ignores this source: the
    /// kernel reports the type with the completion.
    Mlx5Sl,
}

mod admission;

pub use self::admission::{Admission, AdmissionError, MAX_RULES, Refusal, RefusalCounts};

/// How a [`Responder`] builds and admits attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Config {
    /// Which C implementation's attribute to build.
    pub profile: Profile,
    /// Where the header type comes from.
    pub evidence: EvidenceSource,
    /// The hop limit where the kernel profile leaves it to the route (the
    /// backend's route; 64 is Linux's default).
    pub route_hop_limit: u8,
    /// Who may make the responder create an AH.
    pub admission: Admission,
    /// Whether a completion whose AH another thread is creating waits.
    pub wait: Wait,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            profile: Profile::Libibverbs,
            evidence: EvidenceSource::None,
            route_hop_limit: 64,
            admission: Admission::allow_all(),
            wait: Wait::Block,
        }
    }
}

/// Why a completion got no AH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResolveError<E> {
    /// The profile refused the completion (what the C code refuses).
    Profile(ProfileError),
    /// The admission policy refused the completion.
    Refused(Refusal),
    /// The AH cache (or the backend behind it) failed; an invalid attribute
    /// (an SL above 15 from libibverbs) is [`TableError::InvalidAttr`].
    Table(TableError<E>),
}

impl<E: core::fmt::Debug> core::fmt::Display for ResolveError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ResolveError::Profile(e) => core::fmt::Display::fmt(e, f),
            ResolveError::Refused(e) => write!(f, "refused: {e}"),
            ResolveError::Table(e) => write!(f, "AH table: {e}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for ResolveError<E> {}

impl<E> From<TableError<E>> for ResolveError<E> {
    #[inline(always)]
    fn from(e: TableError<E>) -> ResolveError<E> {
        ResolveError::Table(e)
    }
}

/// One result of [`Responder::resolve`].
pub type ResolveResult<C> = Result<AhHandle<CacheAh<C>>, ResolveError<BackendError<C>>>;

/// The backend error of a cache.
pub type BackendError<C> = <<C as AhCache>::Backend as ErrorType>::Error;

/// What [`Responder::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refreshed {
    /// The GID generation had not moved.
    Current,
    /// A new snapshot was taken, and this many AHs were retired.
    Resnapshot {
        /// Entries retired.
        retired: usize,
    },
}

/// A responder's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct ResponderStats {
    /// The AH cache's.
    pub table: TableStats,
    /// Completions the admission policy refused, by reason.
    pub refused: RefusalCounts,
    /// Snapshots re-taken after a GID generation change.
    pub resnapshots: u64,
    /// AH-table entries retired by GID changes.
    pub retired: u64,
}

/// The pipeline of one port: GID snapshot, evidence source, profile,
/// admission policy and AH cache (see the [module documentation](self)).
///
/// `G` is the GID snapshot's capacity. The responder keeps two snapshots
/// (the current one and the one [`refresh`](Self::refresh) fills and swaps
/// in), so that it never builds a table on the stack after
/// [`new`](Self::new); box it when `G` is large.
#[derive(Debug)]
pub struct Responder<C: AhCache, const G: usize> {
    /// The current snapshot.
    gids: GidTable<G>,
    /// The snapshot [`refresh`](Self::refresh) fills, then swaps in.
    spare: GidTable<G>,
    config: Config,
    /// The snapshot's port (it never changes: [`refresh`](Self::refresh)
    /// keeps it) when the configuration is the libibverbs profile without
    /// evidence and with an open admission policy: the common case, whose
    /// whole pipeline is inlined. `None` otherwise, for port 0 (which the
    /// general path refuses) and while the snapshot holds a multicast GID
    /// (which the hot path does not handle; recomputed with each snapshot).
    fast: Option<PortNum>,
    refused: RefusalCounts,
    resnapshots: u64,
    retired: u64,
    cache: C,
}

impl<C: AhCache, const G: usize> Responder<C, G> {
    /// A responder on `port` of the cache's backend, with a first snapshot
    /// of its GID table.
    pub fn new(cache: C, port: PortNum, config: Config) -> Result<Responder<C, G>, BackendError<C>> {
        let mut gids = GidTable::new(port.get(), LinkLayer::Infiniband, 0);
        cache.backend().snapshot_gids(port, &mut gids)?;
        Ok(Responder::from_snapshot(cache, gids, config))
    }

    /// A responder on the port of `gids`, a snapshot the caller took (a
    /// backend without GID queries, a capture's table, a test's).
    /// [`refresh`](Self::refresh) replaces it when the backend's GID
    /// generation differs from the snapshot's.
    pub fn from_snapshot(cache: C, gids: GidTable<G>, config: Config) -> Responder<C, G> {
        let spare = GidTable::new(gids.port_num(), gids.link_layer(), 0);
        let fast = Self::fast_port(&config, &gids);
        Responder { gids, spare, config, fast, refused: RefusalCounts::default(), resnapshots: 0, retired: 0, cache }
    }

    fn fast_port(c: &Config, gids: &GidTable<G>) -> Option<PortNum> {
        let fast = c.profile == Profile::Libibverbs && c.evidence == EvidenceSource::None && c.admission.is_open();
        PortNum::new(gids.port_num()).filter(|_| fast && !gids.holds_multicast())
    }

    /// The current GID snapshot.
    #[inline(always)]
    pub fn gids(&self) -> &GidTable<G> {
        &self.gids
    }

    /// The port (the snapshot's).
    pub fn port(&self) -> u8 {
        self.gids().port_num()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the admission policy (the AHs already created stay).
    pub fn set_admission(&mut self, admission: Admission) {
        self.config.admission = admission;
        self.fast = Self::fast_port(&self.config, &self.gids);
    }

    /// The cache.
    pub fn cache(&self) -> &C {
        &self.cache
    }

    /// The cache, mutably (to release handles, flush a session, …).
    pub fn cache_mut(&mut self) -> &mut C {
        &mut self.cache
    }

    /// The backend (the cache's).
    pub fn backend(&self) -> &C::Backend {
        self.cache.backend()
    }

    /// Completions the admission policy refused, by reason.
    pub fn refused(&self) -> RefusalCounts {
        self.refused
    }

    /// The counters (the table's, the refusals, the re-snapshots).
    pub fn stats(&self) -> ResponderStats {
        ResponderStats {
            table: self.cache.stats(),
            refused: self.refused,
            resnapshots: self.resnapshots,
            retired: self.retired,
        }
    }

    /// The attribute, in its word form, that the responder would answer
    /// `wc` with (evidence, profile; no admission, no cache). A completion
    /// that carries its source address ([`Completion::source`]) is read
    /// from the area that address stands for, with its header type as the
    /// evidence, and `area` is ignored: the one front end every profile
    /// shares.
    #[inline(always)]
    pub fn words<W: Completion + ?Sized>(&self, wc: &W, area: &Area) -> Result<AttrWords, ProfileError> {
        match wc.source() {
            Some(s) => self.words_of_source(wc, &s),
            None => self.words_of_area(wc, area),
        }
    }

    /// [`words`](Self::words) for a completion-borne source address.
    #[inline(never)]
    fn words_of_source<W: Completion + ?Sized>(&self, wc: &W, s: &SourceAddress) -> Result<AttrWords, ProfileError> {
        let c = &self.config;
        c.profile.words(&self.gids, wc, &s.to_area(), Evidence::NetworkType(s.network), c.route_hop_limit)
    }

    /// [`words`](Self::words) on the area the profiles read.
    #[inline(always)]
    fn words_of_area<W: Completion + ?Sized>(&self, wc: &W, area: &Area) -> Result<AttrWords, ProfileError> {
        let gids = &self.gids;
        match (self.config.profile, self.config.evidence) {
            // The common case, with the evidence a constant: the
            // libibverbs profile's hot path inlined.
            (Profile::Libibverbs, EvidenceSource::None) => {
                libibverbs::words(gids, &wc.ibv(), area, Evidence::None).map_err(ProfileError::Libibverbs)
            }
            _ => self.words_with_evidence(wc, area),
        }
    }

    /// [`words`](Self::words) for every other profile and evidence source.
    #[inline(never)]
    fn words_with_evidence<W: Completion + ?Sized>(&self, wc: &W, area: &Area) -> Result<AttrWords, ProfileError> {
        let gids = self.gids();
        let c = &self.config;
        let ethernet = gids.link_layer() == LinkLayer::Ethernet;
        let (evidence, mlx5_sl) = match (c.evidence, c.profile) {
            (EvidenceSource::None, _) | (EvidenceSource::Mlx5Sl, Profile::Kernel) => (Evidence::None, false),
            (EvidenceSource::Stamp(s), _) => (Evidence::Stamped(s), false),
            (EvidenceSource::Mlx5Sl, Profile::Libibverbs) if ethernet => {
                (NetworkType::from_mlx5_sl(wc.ibv().sl).map_or(Evidence::None, Evidence::NetworkType), true)
            }
            (EvidenceSource::Mlx5Sl, Profile::Libibverbs) => (Evidence::None, false),
        };
        if mlx5_sl {
            // mlx5 reports the packet type in `sl`, not an SL.
            let ibv = IbvWc { sl: 0, ..wc.ibv() };
            return c.profile.words(gids, &ibv, area, evidence, c.route_hop_limit);
        }
        c.profile.words(gids, wc, area, evidence, c.route_hop_limit)
    }

    /// The AH to answer `wc` (40-byte area `area`) with: evidence, profile,
    /// admission, cache. A hit allocates nothing, takes no lock (with a
    /// [`Session`](crate::table::Session) cache, no locked instruction
    /// either) and makes no system call. The handle holds a reference: give
    /// it back with [`release`](Self::release).
    #[inline(always)]
    pub fn resolve<W: Completion + ?Sized>(&mut self, wc: &W, area: &Area) -> ResolveResult<C> {
        // (A completion-borne source address takes the general path, whose
        // `words` reads the area it stands for; `source` is a constant
        // `None` for the plain completions.)
        if let Some(port) = self.fast
            && wc.source().is_none()
            && let Some(words) = libibverbs::words_hot(&self.gids, port, wc.ibv(), area)
        {
            // The common case in one piece: the libibverbs profile's hot
            // path, then the cache (admission is open).
            return self.cache.lookup(words, self.config.wait);
        }
        self.resolve_general(wc, area)
    }

    /// [`resolve`](Self::resolve) for every other configuration, and for
    /// what the hot path does not finish.
    #[inline(never)]
    fn resolve_general<W: Completion + ?Sized>(&mut self, wc: &W, area: &Area) -> ResolveResult<C> {
        let words = self.words(wc, area).map_err(ResolveError::Profile)?;
        self.lookup(wc, &words)
    }

    /// The last two stages of [`resolve`](Self::resolve) for `words`, the
    /// attribute [`words`](Self::words) gave for `wc`: admission, then the
    /// cache. (For callers that need the attribute too.)
    #[inline(always)]
    pub fn lookup<W: Completion + ?Sized>(&mut self, wc: &W, words: &AttrWords) -> ResolveResult<C> {
        if !self.config.admission.is_open() {
            self.admit(words, wc)?;
        }
        self.cache.lookup(*words, self.config.wait)
    }

    /// The admission check, out of line (an open policy never calls it).
    #[inline(never)]
    fn admit<W: Completion + ?Sized>(
        &mut self,
        words: &AttrWords,
        wc: &W,
    ) -> Result<(), ResolveError<BackendError<C>>> {
        self.config.admission.check(words, wc).map_err(|r| {
            self.refused.count(r);
            ResolveError::Refused(r)
        })
    }

    /// [`resolve`](Self::resolve) over a polled CQ batch: one result per
    /// completion, written to `out` in order, until `completions` or `out`
    /// ends. Returns how many completions were consumed (a completion is
    /// taken only when `out` has room, so `iter.by_ref()` keeps the rest).
    ///
    /// On a table too large to stay in a core's caches
    /// ([`AhCache::PREFETCH`]), the completions go in groups of [`STAGE`]:
    /// the profile's hot path for each and a prefetch of its slot
    /// ([`AhCache::prefetch`]), then the group's look-ups, so that the
    /// group's cache and TLB misses on the table overlap instead of coming
    /// one after the other.
    #[inline]
    pub fn resolve_batch<'a, W: Completion + 'a>(
        &mut self,
        completions: impl IntoIterator<Item = (&'a W, &'a Area)>,
        out: &mut [Option<ResolveResult<C>>],
    ) -> usize {
        let it = completions.into_iter();
        match self.fast {
            Some(port) if C::PREFETCH => self.resolve_staged(port, it, out),
            _ => fill(it, out, |(wc, area)| self.resolve(wc, area)),
        }
    }

    /// [`resolve_batch`](Self::resolve_batch) in groups of [`STAGE`]: each
    /// group's hot-path words hashed and their slots prefetched, then looked
    /// up; a completion the hot path does not finish takes
    /// [`resolve`](Self::resolve)'s general path in its turn.
    #[inline(always)]
    fn resolve_staged<'a, W: Completion + 'a>(
        &mut self,
        port: PortNum,
        mut it: impl Iterator<Item = (&'a W, &'a Area)>,
        out: &mut [Option<ResolveResult<C>>],
    ) -> usize {
        let mut n = 0usize;
        for group in out.chunks_mut(STAGE) {
            let mut staged: [Staged<'a, W>; STAGE] = [Staged::Empty; STAGE];
            let mut m = 0usize;
            for st in staged.iter_mut().take(group.len()) {
                let Some((wc, area)) = it.next() else { break };
                let hot =
                    if wc.source().is_none() { libibverbs::words_hot(&self.gids, port, wc.ibv(), area) } else { None };
                *st = match hot {
                    Some(w) => Staged::Hot(self.cache.prefetch(w)),
                    None => Staged::General(wc, area),
                };
                m = m.wrapping_add(1);
            }
            for (o, st) in group.iter_mut().zip(&staged) {
                *o = Some(match *st {
                    Staged::Hot(h) => self.cache.lookup(h, self.config.wait),
                    Staged::General(wc, area) => self.resolve_general(wc, area),
                    Staged::Empty => break,
                });
            }
            n = n.wrapping_add(m);
            if m < group.len() {
                break;
            }
        }
        n
    }

    /// Gives a handle back to the cache.
    #[inline]
    pub fn release(&mut self, handle: AhHandle<CacheAh<C>>) -> Result<(), CacheError<C>> {
        self.cache.release(handle)
    }

    /// If the backend's GID generation moved: re-takes the snapshot and
    /// retires the AHs built on entries that changed
    /// ([`AhTable::retire_gid_change`](crate::table::AhTable::retire_gid_change)).
    /// A failed snapshot leaves the current one (and every AH) in place. A
    /// snapshot for port 0 (only [`from_snapshot`](Self::from_snapshot) makes
    /// one) is never re-taken: [`Refreshed::Current`].
    pub fn refresh(&mut self) -> Result<Refreshed, BackendError<C>> {
        // A snapshot for port 0 (`from_snapshot` of a table no backend
        // took) names no port a backend has: there is nothing to re-take.
        let Some(port) = PortNum::new(self.port()) else {
            return Ok(Refreshed::Current);
        };
        if self.gids().generation() == self.cache.backend().gid_generation(port) {
            return Ok(Refreshed::Current);
        }
        // The backend fills the whole table (`Hal::snapshot_gids`).
        self.cache.backend().snapshot_gids(port, &mut self.spare)?;
        let retired = self.cache.retire_gid_change(&self.gids, &self.spare);
        core::mem::swap(&mut self.gids, &mut self.spare);
        self.fast = Self::fast_port(&self.config, &self.gids);
        self.resnapshots = self.resnapshots.saturating_add(1);
        self.retired = self.retired.saturating_add(retired as u64);
        Ok(Refreshed::Resnapshot { retired })
    }

    /// A neighbour of this port now resolves to `dmac`: retires the AHs to
    /// `dgid` that were built with another destination MAC
    /// ([`AhTable::retire_l2_change`](crate::table::AhTable::retire_l2_change));
    /// the next request from that peer gets a new AH. Handles still held
    /// stay valid until released. Returns how many were retired.
    pub fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.cache.retire_l2_change(self.port(), dgid, dmac)
    }
}

/// Completions a batch stages (the profile's hot path, the hash and a
/// prefetch of the slot) before it looks them up, on a table too large for
/// the caches ([`Responder::resolve_batch`]): enough misses in flight to
/// hide most of one's latency, few enough to stay in L1.
///
/// 16 (was 8): a polled batch of 16 completions then stages all of them
/// before its first look-up, and each group's fixed costs are paid once.
/// At 10⁵ and 10⁶ peers it took 0.84–0.93 of the time of groups of 8
/// (batch time over the 64-peer batch's, interleaved, one thread, every
/// path and order, two runs of each build: `UDAH_AH_SCALE_AB=scale`,
/// benches/RESULTS.md) and 15 instructions fewer per completion.
pub const STAGE: usize = 16;

/// One staged completion of [`Responder::resolve_batch`].
enum Staged<'a, W> {
    /// No completion (the group ended).
    Empty,
    /// The hot path's words, hashed, their slot prefetched.
    Hot(Hashed),
    /// For the general path.
    General(&'a W, &'a Area),
}

// (By hand: a derive would ask for `W: Copy`.)
impl<W> Clone for Staged<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<W> Copy for Staged<'_, W> {}

#[cfg(all(test, not(loom)))]
mod tests;
