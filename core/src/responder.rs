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
use crate::wire::{Area, Evidence, Gid, NetworkType, Stamp};

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

/// How many rules each dimension of an [`Admission`] policy holds.
pub const MAX_RULES: usize = 8;

/// Why [`Admission`] refused a completion: no AH is created for it, and no
/// entry is evicted for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The source GID is in none of the allowed prefixes.
    GidPrefix,
    /// GID prefixes are restricted and the completion has no GRH (no
    /// source GID to check).
    NoGrh,
    /// The completion's VLAN (or its being untagged) is not allowed.
    Vlan,
    /// The completion's P_Key index is not allowed.
    PkeyIndex,
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Refusal::GidPrefix => "source GID not in an allowed prefix",
            Refusal::NoGrh => "no GRH: source GID unknown and GID prefixes are restricted",
            Refusal::Vlan => "VLAN not allowed",
            Refusal::PkeyIndex => "P_Key index not allowed",
        })
    }
}

impl core::error::Error for Refusal {}

/// Refused completions, by [`Refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct RefusalCounts {
    /// [`Refusal::GidPrefix`].
    pub gid_prefix: u64,
    /// [`Refusal::NoGrh`].
    pub no_grh: u64,
    /// [`Refusal::Vlan`].
    pub vlan: u64,
    /// [`Refusal::PkeyIndex`].
    pub pkey_index: u64,
}

impl RefusalCounts {
    fn count(&mut self, r: Refusal) {
        let c = match r {
            Refusal::GidPrefix => &mut self.gid_prefix,
            Refusal::NoGrh => &mut self.no_grh,
            Refusal::Vlan => &mut self.vlan,
            Refusal::PkeyIndex => &mut self.pkey_index,
        };
        *c = c.saturating_add(1);
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.gid_prefix.saturating_add(self.no_grh).saturating_add(self.vlan).saturating_add(self.pkey_index)
    }
}

/// Why an [`Admission`] rule could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdmissionError {
    /// That dimension already holds [`MAX_RULES`] rules.
    TooManyRules,
    /// A GID prefix longer than 128 bits (or an IPv4 one longer than 32).
    PrefixTooLong(u8),
}

impl core::fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AdmissionError::TooManyRules => write!(f, "at most {MAX_RULES} rules per dimension"),
            AdmissionError::PrefixTooLong(n) => write!(f, "prefix length {n} is too long"),
        }
    }
}

impl core::error::Error for AdmissionError {}

/// One dimension of an admission policy: unrestricted, or a short list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Rules<T> {
    any: bool,
    len: u8,
    items: [T; MAX_RULES],
}

impl<T: Copy + PartialEq> Rules<T> {
    const fn new(any: bool, zero: T) -> Rules<T> {
        Rules { any, len: 0, items: [zero; MAX_RULES] }
    }

    fn push(mut self, item: T) -> Result<Rules<T>, AdmissionError> {
        let slot = self.items.get_mut(usize::from(self.len)).ok_or(AdmissionError::TooManyRules)?;
        *slot = item;
        self.len = self.len.wrapping_add(1);
        self.any = false;
        Ok(self)
    }

    fn allows(&self, f: impl Fn(&T) -> bool) -> bool {
        self.any || self.items.iter().take(usize::from(self.len)).any(f)
    }
}

/// Who may make the responder create an AH: an allow-list of source GID
/// prefixes (IPv4 subnets are IPv4-mapped prefixes), VLANs and P_Key
/// indices, checked after the profile and before the cache, so that
/// strangers never create AHs nor evict known peers.
///
/// A completion is admitted when each of the three dimensions allows it. A
/// dimension is either unrestricted or a list of up to [`MAX_RULES`] rules;
/// adding a rule to an unrestricted dimension restricts it to that rule.
/// [`allow_all`](Self::allow_all) (the default) leaves all three
/// unrestricted; [`deny_all`](Self::deny_all), a gateway's choice, restricts
/// all three to nothing, so that only what is allowed in every dimension
/// gets through ([`any_vlan`](Self::any_vlan) and friends lift one again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Admission {
    /// All three dimensions unrestricted: nothing to check.
    open: bool,
    /// (prefix value, mask), big-endian `u128`s.
    prefixes: Rules<(u128, u128)>,
    /// `None`: untagged.
    vlans: Rules<Option<u16>>,
    pkeys: Rules<u16>,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission::allow_all()
    }
}

impl Admission {
    /// Everything admitted.
    pub const fn allow_all() -> Admission {
        Admission {
            open: true,
            prefixes: Rules::new(true, (0, 0)),
            vlans: Rules::new(true, None),
            pkeys: Rules::new(true, 0),
        }
    }

    /// Nothing admitted until rules are added in every dimension.
    pub const fn deny_all() -> Admission {
        Admission {
            open: false,
            prefixes: Rules::new(false, (0, 0)),
            vlans: Rules::new(false, None),
            pkeys: Rules::new(false, 0),
        }
    }

    fn reopen(mut self) -> Admission {
        self.open = self.prefixes.any & self.vlans.any & self.pkeys.any;
        self
    }

    /// Also admits source GIDs whose first `len` bits are `prefix`'s.
    pub fn allow_gid_prefix(mut self, prefix: Gid, len: u8) -> Result<Admission, AdmissionError> {
        if len > 128 {
            return Err(AdmissionError::PrefixTooLong(len));
        }
        let mask = u128::MAX.checked_shl(128u32.wrapping_sub(u32::from(len))).unwrap_or(0);
        self.prefixes = self.prefixes.push((prefix.to_u128() & mask, mask))?;
        Ok(self.reopen())
    }

    /// Also admits RoCE v2 / IPv4 sources in `addr/len` (the IPv4-mapped
    /// GID prefix `::ffff:addr/(96 + len)`).
    pub fn allow_ipv4_subnet(self, addr: [u8; 4], len: u8) -> Result<Admission, AdmissionError> {
        if len > 32 {
            return Err(AdmissionError::PrefixTooLong(len));
        }
        self.allow_gid_prefix(Gid::from_ipv4(addr), len.wrapping_add(96))
    }

    /// Also admits completions on VLAN `vlan` (`None`: untagged, which
    /// includes every InfiniBand completion and every completion in the
    /// userspace encoding, which does not report a VLAN).
    pub fn allow_vlan(mut self, vlan: Option<u16>) -> Result<Admission, AdmissionError> {
        self.vlans = self.vlans.push(vlan)?;
        Ok(self.reopen())
    }

    /// Also admits completions with P_Key index `index`.
    pub fn allow_pkey_index(mut self, index: u16) -> Result<Admission, AdmissionError> {
        self.pkeys = self.pkeys.push(index)?;
        Ok(self.reopen())
    }

    /// Any source GID (drops the prefix rules).
    pub fn any_gid(mut self) -> Admission {
        self.prefixes = Rules::new(true, (0, 0));
        self.reopen()
    }

    /// Any VLAN (drops the VLAN rules).
    pub fn any_vlan(mut self) -> Admission {
        self.vlans = Rules::new(true, None);
        self.reopen()
    }

    /// Any P_Key index (drops the P_Key rules).
    pub fn any_pkey_index(mut self) -> Admission {
        self.pkeys = Rules::new(true, 0);
        self.reopen()
    }

    /// Whether everything is admitted.
    #[inline(always)]
    pub const fn is_open(&self) -> bool {
        self.open
    }

    /// The verdict on a completion `wc` whose reply attribute is `words`
    /// (its `dgid` is the packet's source GID).
    pub fn check<C: Completion + ?Sized>(&self, words: &AttrWords, wc: &C) -> Result<(), Refusal> {
        if self.open {
            return Ok(());
        }
        let k = wc.kernel();
        if !self.pkeys.allows(|&p| p == k.pkey_index) {
            return Err(Refusal::PkeyIndex);
        }
        let vlan = k.vlan();
        if !self.vlans.allows(|&v| v == vlan) {
            return Err(Refusal::Vlan);
        }
        if !self.prefixes.any {
            let Some(src) = words.dgid() else { return Err(Refusal::NoGrh) };
            let src = src.to_u128();
            if !self.prefixes.allows(|&(value, mask)| src & mask == value) {
                return Err(Refusal::GidPrefix);
            }
        }
        Ok(())
    }
}

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
    /// `wc` with (evidence, profile; no admission, no cache).
    #[inline(always)]
    pub fn words<W: Completion + ?Sized>(&self, wc: &W, area: &Area) -> Result<AttrWords, ProfileError> {
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
        if let Some(port) = self.fast
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
                *st = match libibverbs::words_hot(&self.gids, port, wc.ibv(), area) {
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
mod tests {
    use core::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::ah::{AhAttr, IBV_WC_GRH, IbvWc, KernelWc, kernel};
    use crate::gid_table::{GidEntry, GidType};
    use crate::hal::{ErrorKind, L2Info, PortInfo};
    use crate::table::{AhTable, Prefetch};
    use crate::wire::{GrhRepr, Ipv4Repr};

    /// A backend with one port whose GID table the test edits.
    struct Port {
        gids: Mutex<GidTable<8>>,
        generation: AtomicU64,
        next: AtomicU64,
    }

    impl Port {
        fn new(link_layer: LinkLayer, entries: &[(u32, GidEntry)]) -> Port {
            let mut gids = GidTable::new(1, link_layer, 8);
            for &(i, e) in entries {
                gids.set(i, e).unwrap();
            }
            Port { gids: Mutex::new(gids), generation: AtomicU64::new(1), next: AtomicU64::new(1) }
        }
        fn set(&self, i: u32, e: GidEntry) {
            self.gids.lock().unwrap().set(i, e).unwrap();
            self.generation.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl ErrorType for Port {
        type Error = ErrorKind;
    }

    impl Hal for Port {
        type Ah = u64;
        fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
            Ok(PortInfo::new(port.get(), self.gids.lock().unwrap().link_layer(), 8))
        }
        fn snapshot_gids<const M: usize>(&self, port: PortNum, t: &mut GidTable<M>) -> Result<(), ErrorKind> {
            let src = self.gids.lock().unwrap();
            if port.get() != 1 {
                return Err(ErrorKind::NotFound);
            }
            *t = GidTable::new(port.get(), src.link_layer(), src.len());
            for (i, e) in src.iter() {
                t.set(i, e).map_err(|_| ErrorKind::OutOfResources)?;
            }
            t.set_generation(self.generation.load(Ordering::Relaxed));
            Ok(())
        }
        fn gid_generation(&self, _: PortNum) -> u64 {
            self.generation.load(Ordering::Relaxed)
        }
        fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
            Ok(None)
        }
        fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
            Ok(self.next.fetch_add(1, Ordering::Relaxed))
        }
        fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
            Ok(())
        }
    }

    const OURS_V4: [u8; 4] = [192, 168, 1, 10];

    fn roce_port() -> Port {
        Port::new(LinkLayer::Ethernet, &[(3, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2))])
    }

    /// A RoCE v2 / IPv4 request from `src` to us.
    fn v4_area(src: [u8; 4]) -> Area {
        let mut area = [0u8; 40];
        Ipv4Repr { ttl: 64, protocol: 17, src, dst: OURS_V4, ..Default::default() }.emit(&mut area);
        area
    }

    fn wc() -> IbvWc {
        IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() }
    }

    type T8 = AhTable<Port, 8>;

    /// The AHs (released) or errors of a batch.
    fn drain<C: AhCache<Backend = Port>>(
        r: &mut Responder<C, 8>,
        out: impl IntoIterator<Item = Option<ResolveResult<C>>>,
    ) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
        out.into_iter()
            .flatten()
            .map(|x| {
                x.map(|h| {
                    let ah = h.ah();
                    r.release(h).unwrap();
                    ah
                })
            })
            .collect()
    }

    #[test]
    fn resolve_and_batch_through_both_caches() {
        let hal = roce_port();
        let t = T8::new();
        let p1 = PortNum::new(1).unwrap();
        let area = v4_area([192, 168, 1, 20]);
        let (wc, bad_sl, no_gid) = (wc(), IbvWc { sl: 16, ..wc() }, [0u8; 40]);
        let mut shared: Responder<_, 8> = Responder::new(t.shared(&hal), p1, Config::default()).unwrap();
        assert_eq!(shared.port(), 1);
        let a = shared.resolve(&wc, &area).unwrap();
        assert_eq!(shared.words(&wc, &area).unwrap().dgid(), Some(Gid::from_ipv4([192, 168, 1, 20])));
        let try_config = Config { wait: Wait::Try, ..Config::default() };
        let mut session: Responder<_, 8> = Responder::new(t.session(&hal), p1, try_config).unwrap();
        let batch = [(&wc, &area), (&bad_sl, &area), (&wc, &no_gid), (&wc, &area)];
        for shared_first in [true, false] {
            // One result per completion in order, no more than fit; the rest is left.
            let mut it = batch.into_iter();
            let mut out = [const { None }; 3];
            let got = if shared_first {
                assert_eq!(shared.resolve_batch(it.by_ref(), &mut out), 3);
                drain(&mut shared, out)
            } else {
                assert_eq!(session.resolve_batch(it.by_ref(), &mut out), 3);
                drain(&mut session, out)
            };
            assert_eq!(it.len(), 1, "a full batch must not swallow the next completion");
            assert_eq!(got[0], Ok(a.ah()));
            assert_eq!(
                got[1],
                Err(ResolveError::Table(TableError::InvalidAttr(crate::attr::AttrError::InvalidSl(16))))
            );
            assert!(matches!(got[2], Err(ResolveError::Profile(ProfileError::Libibverbs(_)))));
        }
        for _ in 0..100 {
            let h = session.resolve(&wc, &area).unwrap();
            assert_eq!(h.ah(), a.ah());
            session.release(h).unwrap();
        }
        drop(session);
        shared.release(a).unwrap();
        let st = t.stats_exact();
        // The invalid SL never reaches the probe: 1 + 2 × 1 + 100 look-ups.
        assert_eq!((st.creates, st.hits + st.misses), (1, 103));
    }

    /// The staged batch (hot path and prefetch for a group, then the
    /// look-ups) gives, completion for completion, what `resolve` gives one
    /// at a time, through the shared table and through a session, for any
    /// batch length, and takes no completion it has no room for.
    #[test]
    fn a_staged_batch_resolves_as_one_at_a_time() {
        let areas: std::vec::Vec<Area> = (0..40u8).map(|i| v4_area([10, 0, i % 13, i])).collect();
        let (no_grh, bad_sl, no_gid) = (IbvWc::default(), IbvWc { sl: 16, ..wc() }, [0u8; 40]);
        let good = wc();
        // Hits, misses, an SL the attribute refuses, a local address not in
        // the table and a completion without a GRH, mixed.
        let mut batch: std::vec::Vec<(&IbvWc, &Area)> = areas.iter().map(|a| (&good, a)).collect();
        for (i, odd) in [(3, (&bad_sl, &areas[1])), (9, (&good, &no_gid)), (17, (&no_grh, &areas[2]))] {
            batch.insert(i, odd);
        }
        let repeat: std::vec::Vec<_> = batch.iter().chain(batch.iter().rev()).copied().collect();
        // Every completion through `r`'s batches of `out_len`, released.
        fn batched<C: AhCache<Backend = Port>>(
            r: &mut Responder<C, 8>,
            all: &[(&IbvWc, &Area)],
            out_len: usize,
        ) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
            let (mut got, mut it) = (std::vec::Vec::new(), all.iter().copied());
            loop {
                let mut out: std::vec::Vec<_> = (0..out_len).map(|_| None).collect();
                let n = r.resolve_batch(it.by_ref(), &mut out);
                assert!(n <= out_len && out[n..].iter().all(Option::is_none));
                got.extend(drain(r, out));
                if n < out_len {
                    assert_eq!(it.len(), 0, "a short batch means the completions ended");
                    return got;
                }
            }
        }
        // The same one at a time.
        fn single<C: AhCache<Backend = Port>>(
            r: &mut Responder<C, 8>,
            all: &[(&IbvWc, &Area)],
        ) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
            let mut want = std::vec::Vec::new();
            for (w, a) in all {
                let one = r.resolve(*w, a);
                want.extend(drain(r, [Some(one)]));
            }
            want
        }
        let p1 = PortNum::new(1).unwrap();
        let config = Config::default();
        // Shorter than a group, a group and one either side, several groups.
        for out_len in [1usize, 3, STAGE - 1, STAGE, STAGE + 1, 4 * STAGE] {
            for session in [false, true] {
                let (hal_one, hal_staged) = (roce_port(), roce_port());
                let (t_one, t_staged) = (AhTable::<Port, 64>::with_seed(7), AhTable::<Port, 64>::with_seed(7));
                let (got, want) = if session {
                    let mut staged = Responder::new(Prefetch::<_, true>(t_staged.session(&hal_staged)), p1, config);
                    let mut one = Responder::new(t_one.session(&hal_one), p1, config).unwrap();
                    (batched(staged.as_mut().unwrap(), &repeat, out_len), single(&mut one, &repeat))
                } else {
                    let mut staged = Responder::new(Prefetch::<_, true>(t_staged.shared(&hal_staged)), p1, config);
                    let mut one = Responder::new(t_one.shared(&hal_one), p1, config).unwrap();
                    (batched(staged.as_mut().unwrap(), &repeat, out_len), single(&mut one, &repeat))
                };
                assert_eq!(got.len(), repeat.len());
                assert_eq!(got, want, "out_len {out_len}, session {session}");
                let (a, b) = (t_one.stats_exact(), t_staged.stats_exact());
                assert_eq!((a.hits, a.misses, a.creates), (b.hits, b.misses, b.creates));
            }
        }
    }

    /// A [`Hashed`] made by another table (another seed) still finds its
    /// entry: the hash is computed again.
    #[test]
    fn hashed_words_of_another_table_hash_again() {
        let hal = roce_port();
        let (t, other) = (AhTable::<Port, 64>::with_seed(1), AhTable::<Port, 64>::with_seed(2));
        let p1 = PortNum::new(1).unwrap();
        let mut r: Responder<_, 8> = Responder::new(t.shared(&hal), p1, Config::default()).unwrap();
        let area = v4_area([10, 1, 2, 3]);
        let words = crate::attr::CanonicalWords::new(r.words(&wc(), &area).unwrap()).unwrap();
        let a = r.resolve(&wc(), &area).unwrap();
        let misses = t.stats_exact().misses;
        for h in [other.prefetch(words), Hashed::unhashed(words), t.prefetch(words)] {
            let b = t.shared(&hal).lookup::<_, TableError<ErrorKind>>(h, Wait::Block).unwrap();
            assert_eq!(b.ah(), a.ah());
            t.release(&hal, b).unwrap();
        }
        assert_eq!(t.stats_exact().misses, misses, "a foreign hash is recomputed, not probed");
        r.release(a).unwrap();
    }

    /// Every profile and evidence source resolves through the same word
    /// path, to exactly the attribute of the profile's C-mirror entry point.
    #[test]
    fn every_profile_and_evidence_takes_the_word_path() {
        let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
        let v6 = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let hal = Port::new(
            LinkLayer::Ethernet,
            &[
                (0, GidEntry::new(link_local, GidType::RoceV1)),
                (1, GidEntry::new(link_local, GidType::RoceV2)),
                (2, GidEntry::new(v6, GidType::RoceV2)),
                (3, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2)),
            ],
        );
        let t = T8::new();
        let peer6 = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let grh = |nh: u8, sgid: Gid, dgid: Gid| {
            let mut area = [0u8; 40];
            GrhRepr {
                sgid,
                dgid,
                hop_limit: 9,
                next_header: nh,
                flow_label: 0x123,
                traffic_class: 4,
                ..GrhRepr::default()
            }
            .emit(&mut area);
            area
        };
        let areas = [v4_area([192, 168, 1, 20]), grh(17, peer6, v6), grh(0x1b, peer6, link_local), [0; 40]];
        let stamp = Stamp::DEFAULT;
        for profile in [Profile::Libibverbs, Profile::Kernel] {
            for evidence in [EvidenceSource::None, EvidenceSource::Stamp(stamp), EvidenceSource::Mlx5Sl] {
                let config = Config { profile, evidence, ..Config::default() };
                let r: Responder<_, 8> = Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), config).unwrap();
                for area in &areas {
                    let mut area = *area;
                    if matches!(evidence, EvidenceSource::Stamp(_)) && area[20] >> 4 == 4 {
                        area[..20].copy_from_slice(stamp.bytes());
                    }
                    let ev = match (evidence, profile) {
                        (EvidenceSource::Stamp(s), _) => Evidence::Stamped(s),
                        // mlx5's bits in `sl` (0 here): libibverbs on RoCE only.
                        (EvidenceSource::Mlx5Sl, Profile::Libibverbs) => {
                            NetworkType::from_mlx5_sl(0).map_or(Evidence::None, Evidence::NetworkType)
                        }
                        _ => Evidence::None,
                    };
                    let kwc = KernelWc { wc_flags: crate::ah::IB_WC_GRH, ..KernelWc::default() };
                    let want = match profile {
                        Profile::Libibverbs => libibverbs::init_ah_from_wc_with(r.gids(), 1, &wc(), Some(&area), ev)
                            .map_err(ProfileError::Libibverbs)
                            .map(|c| c.words()),
                        Profile::Kernel => kernel::init_ah_attr_from_wc_with(r.gids(), &kwc, Some(&area), ev)
                            .map_err(ProfileError::Kernel)
                            .and_then(|a| a.to_ah_attr(64).map_err(ProfileError::Attr))
                            .map(|a| AttrWords::from_attr(&a)),
                    };
                    let got = match profile {
                        Profile::Libibverbs => r.words(&wc(), &area),
                        Profile::Kernel => r.words(&kwc, &area),
                    };
                    assert_eq!(got, want, "{profile:?} {evidence:?} {area:?}");
                }
            }
        }
    }

    #[test]
    fn admission_refuses_strangers_before_the_cache() {
        let hal = roce_port();
        let t = AhTable::<Port, 2>::new();
        let admission = Admission::deny_all()
            .allow_ipv4_subnet([192, 168, 1, 0], 24)
            .unwrap()
            .allow_vlan(None)
            .unwrap()
            .allow_pkey_index(0)
            .unwrap();
        let config = Config { admission, ..Config::default() };
        let mut r: Responder<_, 8> = Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), config).unwrap();
        // Two known peers fill the table (2 slots) and stay cached.
        for p in [20, 21] {
            let h = r.resolve(&wc(), &v4_area([192, 168, 1, p])).unwrap();
            r.release(h).unwrap();
        }
        let stranger = v4_area([10, 9, 9, 9]);
        let kwc = |vlan: Option<u16>, pkey_index: u16| KernelWc {
            wc_flags: crate::ah::IB_WC_GRH | vlan.map_or(0, |_| crate::ah::IB_WC_WITH_VLAN),
            vlan_id: vlan.unwrap_or(0),
            pkey_index,
            ..KernelWc::default()
        };
        let known = v4_area([192, 168, 1, 20]);
        let refusals = [
            (r.resolve(&wc(), &stranger).map(|h| h.ah()), Refusal::GidPrefix),
            (r.resolve(&kwc(Some(7), 0), &known).map(|h| h.ah()), Refusal::Vlan),
            (r.resolve(&kwc(None, 3), &known).map(|h| h.ah()), Refusal::PkeyIndex),
        ];
        for (got, why) in refusals {
            assert_eq!(got, Err(ResolveError::Refused(why)));
        }
        for _ in 0..10 {
            assert_eq!(r.resolve(&wc(), &stranger).map(|h| h.ah()), Err(ResolveError::Refused(Refusal::GidPrefix)));
        }
        let c = r.refused();
        assert_eq!((c.gid_prefix, c.vlan, c.pkey_index, c.no_grh, c.total()), (11, 1, 1, 0, 13));
        let st = r.stats().table;
        assert_eq!((st.creates, st.evictions, st.live), (2, 0, 2), "strangers create nothing and evict nothing");
        // No GRH while prefixes are restricted: refused for want of a source.
        let ib = IbvWc { wc_flags: 0, slid: 5, ..IbvWc::default() };
        assert_eq!(r.resolve(&ib, &known).map(|h| h.ah()), Err(ResolveError::Refused(Refusal::NoGrh)));
        // Lifting the dimension admits it; an open policy checks nothing.
        r.set_admission(admission.any_gid());
        assert!(!r.config().admission.is_open());
        assert!(r.resolve(&ib, &known).map(|h| r.release(h)).is_ok());
        assert!(Admission::deny_all().any_gid().any_vlan().any_pkey_index().is_open());
        // Rule building errors are typed.
        assert_eq!(Admission::allow_all().allow_gid_prefix(Gid::ZERO, 129), Err(AdmissionError::PrefixTooLong(129)));
        assert_eq!(Admission::allow_all().allow_ipv4_subnet([10, 0, 0, 0], 33), Err(AdmissionError::PrefixTooLong(33)));
        let mut many = Ok(Admission::deny_all());
        for v in 0..=MAX_RULES as u16 {
            many = many.and_then(|a| a.allow_vlan(Some(v)));
        }
        assert_eq!(many, Err(AdmissionError::TooManyRules));
    }

    #[test]
    fn refresh_leaves_a_port_0_snapshot_alone() {
        let hal = roce_port();
        let t = T8::new();
        let gids = GidTable::new(0, LinkLayer::Ethernet, 8);
        let mut r: Responder<_, 8> = Responder::from_snapshot(t.shared(&hal), gids, Config::default());
        hal.set(5, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2));
        assert_eq!(r.refresh(), Ok(Refreshed::Current));
        assert_eq!((r.port(), r.gids().generation()), (0, 0));
    }

    #[test]
    fn refresh_resnapshots_and_retires_on_a_generation_change() {
        let hal = roce_port();
        let t = T8::new();
        let mut r: Responder<_, 8> =
            Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), Config::default()).unwrap();
        let area = v4_area([192, 168, 1, 20]);
        let h = r.resolve(&wc(), &area).unwrap();
        r.release(h).unwrap();
        assert_eq!(r.refresh(), Ok(Refreshed::Current));
        // Our address moves from index 3 to index 5: the AH built on 3 goes.
        hal.set(5, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2));
        hal.gids.lock().unwrap().clear(3);
        assert_eq!(r.refresh(), Ok(Refreshed::Resnapshot { retired: 1 }));
        assert_eq!(r.gids().generation(), hal.gid_generation(PortNum::new(1).unwrap()));
        assert_eq!(r.words(&wc(), &area).unwrap().sgid_index(), Some(5));
        let h = r.resolve(&wc(), &area).unwrap();
        r.release(h).unwrap();
        let s = r.stats();
        assert_eq!((s.resnapshots, s.retired, s.table.creates), (1, 1, 2));
        // A failed snapshot keeps the current one.
        let other = Responder::<_, 8>::new(t.shared(&hal), PortNum::new(2).unwrap(), Config::default());
        assert_eq!(other.map(|_| ()), Err(ErrorKind::NotFound));
    }

    /// The hot path handles no multicast GID in the snapshot: while one is
    /// there (and only then, across refreshes) the responder answers through
    /// the general path, which refuses a multicast destination as
    /// libibverbs does, and still resolves every other packet.
    #[test]
    fn a_snapshot_with_a_multicast_gid_takes_the_general_path() {
        let hal = roce_port();
        let t = T8::new();
        let mut r: Responder<_, 8> =
            Responder::new(t.session(&hal), PortNum::new(1).unwrap(), Config::default()).unwrap();
        assert!(r.fast.is_some());
        let mcast = Gid([0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut to_mcast = [0u8; 40];
        GrhRepr {
            sgid: Gid([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
            dgid: mcast,
            hop_limit: 1,
            next_header: 17,
            ..GrhRepr::default()
        }
        .emit(&mut to_mcast);
        let unicast = v4_area([192, 168, 1, 20]);
        hal.set(6, GidEntry::new(mcast, GidType::RoceV2));
        assert!(matches!(r.refresh(), Ok(Refreshed::Resnapshot { .. })));
        assert!(r.gids().holds_multicast() && r.fast.is_none());
        let refused = r.resolve(&wc(), &to_mcast).map(|h| h.ah());
        assert_eq!(refused, Err(ResolveError::Profile(r.words(&wc(), &to_mcast).unwrap_err())));
        let h = r.resolve(&wc(), &unicast).unwrap();
        assert_eq!(r.words(&wc(), &unicast).unwrap().dgid(), Some(Gid::from_ipv4([192, 168, 1, 20])));
        r.release(h).unwrap();
        hal.gids.lock().unwrap().clear(6);
        hal.set(7, GidEntry::new(Gid::from_ipv4([10, 9, 9, 9]), GidType::RoceV2));
        assert!(matches!(r.refresh(), Ok(Refreshed::Resnapshot { .. })));
        assert!(r.fast.is_some());
        let h = r.resolve(&wc(), &unicast).unwrap();
        r.release(h).unwrap();
    }
}
