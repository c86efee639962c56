//! The libibverbs profile: `ibv_init_ah_from_wc` of rdma-core 44 (the text is
//! identical at rdma-core HEAD), bit-exact on x86-64.
//!
//! What is reproduced (SEMANTICS §3), including the quirks:
//!
//! * `flow_label = W0 & 0xfffff`, `dlid = wc.slid`, `sl = wc.sl` (unmasked),
//!   `src_path_bits = wc.dlid_path_bits` and `port_num` are written before
//!   anything else, also without `IBV_WC_GRH` and also for RoCE v2/IPv4,
//!   where `W0` lies in the undefined front of the area (Q2, Q3, Q17);
//! * header detection with the single-fold little-endian checksum (Q5, Q6);
//! * IPv4: a class D destination is `EINVAL`; the local GID is searched as
//!   `::ffff:daddr` of class RoCE v2 only (Q19); `hop_limit` = TTL and
//!   `traffic_class` = TOS (Q20);
//! * IPv6/GRH: a `ff00::/8` destination is `EINVAL`; `dgid` is written
//!   before the next-header check, so it survives the failures after it
//!   (Q15); next header 17 searches class RoCE v2, `0x1B` class IB/RoCE v1
//!   (Q10), anything else is `EPROTONOSUPPORT`;
//! * the GID search semantics of [`GidTable::find_libibverbs`] (Q9, Q11,
//!   Q13) and the truncation of the index to 8 bits (Q12).
//!
//! What differs, on purpose: a missing area returns
//! [`IbvError::MissingGrh`] where C crashes (Q1), and the search is a hash
//! probe instead of two system calls per table entry. `errno` after a
//! successful call (Q14) is not modelled: success returns no errno.
//!
//! The failure value carries the attribute as C leaves it written
//! ([`IbvFailure::attr`]).
//!
//! # The hot path
//!
//! [`init_ah_from_wc`] is built for the common case, a packet from a peer
//! whose destination is one of the port's own addresses, and finishes it in
//! about 120 instructions (`benches/gates.toml`): the generic fields, the
//! `IBV_WC_GRH` test, one read of the area in `wire` ([`View`], the header
//! type included), a lean branch-free selection of the fields (those of
//! [`classify`] without the failure detail), one probe of the table's
//! stored entries (its chain's head, rarely the slot after it) and one
//! write of the attribute; nothing after the read goes back to the area.
//! Anything else goes out of line (reading the area again, so that the hot
//! path keeps none of it alive across the search), where the full
//! classification (that of [`classify_with`], from the same selection) and
//! [`GidTable::find_libibverbs`] decide: every failure, a search for the zero GID (which only empty slots
//! match), and any packet when the table holds a multicast GID. That last
//! rule is what lets the hot path skip libibverbs' multicast test: with no
//! multicast entry in the table, a multicast destination cannot be found,
//! so the search fails and the slow path reports `EINVAL` exactly as C does.
//! A port's real GID table never holds one.

use core::hint::select_unpredictable;

use super::attr::{IbvAhAttr, IbvGlobalRoute};
use super::wc::{IBV_WC_GRH, IbvWc};
use crate::attr::{self, AttrWords, CanonicalWords, PortNum, word2, word3};
use crate::error::IbvError;
use crate::gid_table::GidTable;
use crate::wire::view::View;
use crate::wire::{Area, Classifier, Evidence, Gid, Heuristic, grh};

/// A failed call: the error and the attribute as the C function leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IbvFailure {
    /// What went wrong.
    pub error: IbvError,
    /// The partly written attribute (SEMANTICS §3.3).
    pub attr: IbvAhAttr,
}

impl core::fmt::Display for IbvFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.error, f)
    }
}

impl core::error::Error for IbvFailure {}

/// The result of [`init_ah_from_wc`].
pub type IbvResult = Result<IbvAhAttr, IbvFailure>;

/// What the area says before the GID search, as the C code would act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Verdict {
    /// Search the GID table for [`Classified::local`].
    Search = 0,
    /// Header version "neither" (`EPROTONOSUPPORT`).
    UnknownVersion = 1,
    /// Multicast destination (`EINVAL`).
    Multicast = 2,
    /// Next header neither `0x1B` nor 17 (`EPROTONOSUPPORT`).
    UnknownNextHeader = 3,
    /// Evidence contradicts the bytes (only with evidence).
    Ambiguous = 4,
}

/// Header classification and field extraction for the libibverbs profile:
/// everything `ibv_init_ah_from_wc` derives from the area before it searches
/// the GID table. Produced by straight-line code ([`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Classified {
    /// What to do next.
    pub verdict: Verdict,
    /// The IPv4 branch was taken.
    pub is_ipv4: bool,
    /// The local GID to search for (our address: IPv4 destination as
    /// `::ffff:a.b.c.d`, or the GRH destination GID).
    pub local: Gid,
    /// Search class RoCE v2 (else IB/RoCE v1).
    pub want_v2: bool,
    /// The reply's destination GID (the packet's source).
    pub remote: Gid,
    /// Whether C has written `dgid = remote` before a failure of the search
    /// or of the next-header check (the IPv6 branch after its multicast test).
    pub remote_written_early: bool,
    /// Hop limit for the reply (IPv4 TTL or GRH hop limit).
    pub hop_limit: u8,
    /// Traffic class for the reply (IPv4 TOS or GRH traffic class).
    pub traffic_class: u8,
}

/// The profile's header classifier, with `evidence`.
#[inline(always)]
const fn classifier(evidence: Evidence) -> Classifier {
    Classifier { heuristic: Heuristic::Libibverbs, evidence }
}

/// [`Classified`] from the hot path's [`Route`], which holds every field
/// it needs; `evidence_given`: the header type came from evidence, so that
/// "neither" is [`Verdict::Ambiguous`] rather than the heuristic's unknown
/// version.
#[inline]
fn classify_route(r: &Route, evidence_given: bool) -> Classified {
    // Each flag is computed without a jump. The local GID is the packet's
    // destination: for IPv4 the mapped address, whose first byte is the
    // upper half's lowest (area[36]); else the GRH's DGID.
    let (is4, is6) = (r.is4, r.is6);
    let ambiguous = evidence_given & !is4 & !is6;
    let d0 = (r.local.1 >> 32) as u8;
    let mc4 = d0 & 0xf0 == 0xe0;
    let mc6 = r.local.0 as u8 == 0xff;
    let nh_v2 = r.next_header == grh::NEXT_HDR_UDP;
    let nh_v1 = r.next_header == grh::NEXT_HDR_IBA;

    // The four failure flags exclude each other, so the verdict is their sum.
    let multicast = (is4 & mc4) | (is6 & mc6);
    let bad_nh = is6 & !mc6 & !(nh_v1 | nh_v2);
    let neither = !is4 & !is6 & !ambiguous;
    let code = u8::from(neither)
        | (u8::from(multicast) << 1)
        | (u8::from(bad_nh).wrapping_mul(3))
        | (u8::from(ambiguous) << 2);
    let verdict = match code {
        0 => Verdict::Search,
        1 => Verdict::UnknownVersion,
        2 => Verdict::Multicast,
        3 => Verdict::UnknownNextHeader,
        _ => Verdict::Ambiguous,
    };
    Classified {
        verdict,
        is_ipv4: is4,
        local: Gid::from_words(r.local.0, r.local.1),
        want_v2: r.want_v2,
        remote: Gid::from_words(r.remote.0, r.remote.1),
        remote_written_early: is6 & !mc6,
        hop_limit: r.hop_limit,
        traffic_class: r.traffic_class,
    }
}

/// `a` if `is4`, else `b`: a GID in word form, without a jump.
#[inline(always)]
fn select_words(is4: bool, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (select_unpredictable(is4, a.0, b.0), select_unpredictable(is4, a.1, b.1))
}

/// What the hot path needs from the area: [`classify`] without the
/// verdict's detail (only whether the search goes ahead), computed in
/// registers. GIDs are (first, second) 8-byte halves in memory order.
#[derive(Clone, Copy)]
struct Route {
    /// The verdict is [`Verdict::Search`], or [`Verdict::Multicast`] (which
    /// the hot path leaves to the search: see [`GidTable::holds_multicast`]).
    search: bool,
    want_v2: bool,
    /// The header flags (for the cold path's error detail).
    is4: bool,
    is6: bool,
    local: (u64, u64),
    remote: (u64, u64),
    hop_limit: u8,
    traffic_class: u8,
    /// What the cold path takes from the view besides: the flow label and
    /// the next header.
    flow_label: u32,
    next_header: u8,
}

/// [`Route`] from the area's [`View`]: the same flags as [`classify`],
/// with every choice a `select_unpredictable` and the failure detail left
/// to the cold path; the multicast test is left to the GID search (a table
/// that holds a multicast GID goes the slow way). Straight-line code
/// (`udah_asm_route` in the codegen audit). With a view read by evidence,
/// a GRH or IPv6 header has a known next header, and "neither" does not
/// search.
#[inline(always)]
fn route(v: &View) -> Route {
    let (is4, is6) = (v.is4, v.is6);
    let nh_v2 = v.next_header == grh::NEXT_HDR_UDP;
    let nh_ok = nh_v2 | (v.next_header == grh::NEXT_HDR_IBA);
    // Hop limit and traffic class in one choice.
    let [hop_limit, traffic_class] = select_unpredictable(
        is4,
        u16::from_le_bytes([v.ttl, v.tos]),
        u16::from_le_bytes([v.hop_limit, v.traffic_class()]),
    )
    .to_le_bytes();
    Route {
        search: is4 | (is6 & nh_ok),
        want_v2: is4 | nh_v2,
        is4,
        is6,
        local: v.local(is4),
        remote: select_words(is4, v.src4, v.sgid),
        hop_limit,
        traffic_class,
        flow_label: v.flow_label(),
        next_header: v.next_header,
    }
}

/// [`route`] for the codegen audit and the instruction counts.
#[doc(hidden)]
#[inline]
pub fn route_parts(area: &Area) -> (bool, bool, [u64; 4], u8, u8) {
    let r = route(&View::read(area, Some(classifier(Evidence::None))));
    (r.search, r.want_v2, [r.local.0, r.local.1, r.remote.0, r.remote.1], r.hop_limit, r.traffic_class)
}

/// Classifies the area with libibverbs' own heuristic and extracts every
/// field the reply needs. Straight-line code: no conditional jump.
#[inline]
pub fn classify(area: &Area) -> Classified {
    classify_route(&route(&View::read(area, Some(classifier(Evidence::None)))), false)
}

/// Like [`classify`], but the header type comes from `evidence` through the
/// strict [`detect`](crate::wire::detect::detect); `Evidence::None` is exactly [`classify`].
/// Contradictory evidence gives [`Verdict::Ambiguous`].
#[inline]
pub fn classify_with(area: &Area, evidence: Evidence) -> Classified {
    if matches!(evidence, Evidence::None) {
        return classify(area);
    }
    classify_with_evidence(area, evidence)
}

/// The evidence path of [`classify_with`], kept out of line so that
/// `classify_with(area, Evidence::None)` inlines to [`classify`] alone.
#[inline(never)]
fn classify_with_evidence(area: &Area, evidence: Evidence) -> Classified {
    classify_route(&route(&View::read(area, Some(classifier(evidence)))), true)
}

/// `ibv_init_ah_from_wc(ctx, port_num, wc, grh, &attr)` against the GID-table
/// snapshot `table` (the port's table; a `port_num` other than the table's
/// behaves as a port whose GID queries fail).
///
/// `area` is the 40-byte receive area; `None` stands for a NULL `grh`, where
/// C crashes.
#[inline]
pub fn init_ah_from_wc<const N: usize>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: Option<&Area>,
) -> IbvResult {
    init_impl(table, port_num, wc, area, Evidence::None)
}

/// [`init_ah_from_wc_with`] against the port of `table`, with the
/// attribute in its [word form](AttrWords) (the C struct's memory image, from
/// which the AH cache takes its key without going through the fields): the
/// libibverbs profile's entry point for the pipeline
/// ([`Profile::words`](super::Profile::words)). A constant `evidence` folds
/// away.
#[inline(always)]
pub fn words<const N: usize>(
    table: &GidTable<N>,
    wc: &IbvWc,
    area: &Area,
    evidence: Evidence,
) -> Result<AttrWords, IbvFailure> {
    init_impl(table, table.port_num(), wc, Some(area), evidence)
}

/// [`init_ah_from_wc`] with the header type taken from `evidence` (see
/// [`classify_with`]). With `Evidence::None` this is bit-exact libibverbs.
#[inline]
pub fn init_ah_from_wc_with<const N: usize>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: Option<&Area>,
    evidence: Evidence,
) -> IbvResult {
    init_impl(table, port_num, wc, area, evidence)
}

/// The body of both entry points, inlined into each so that a constant
/// `evidence` folds away. The hot path is: generic fields, the GRH flag,
/// the lean classifier ([`route`]) in registers, one probe of the stored
/// entries, one write of the attribute. Everything else (every failure, a
/// zero-GID search, a table holding a multicast GID) goes out of line, to
/// [`cold`] (which reads the area again, then [`miss`] or [`slow`] decide
/// from its [`Route`]).
#[inline(always)]
fn init_impl<const N: usize, T: Output>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: Option<&Area>,
    evidence: Evidence,
) -> Result<T, IbvFailure> {
    let Some(area) = area else {
        return Err(missing_grh());
    };
    // A table holding a multicast GID could match a multicast destination,
    // which libibverbs refuses before it searches: the full path then
    // ([`slow`], through `cold`), which reads the area itself. Real ports have none, and the answer
    // depends on the table alone.
    if table.holds_multicast() {
        return cold(table, port_num, wc, area, evidence, false);
    }
    // The area read once; nothing below on the hot path reads it again.
    let r = match read(port_num, wc, area, evidence) {
        Ok(v) => route(&v),
        Err(words) => return Ok(T::from_words(words)),
    };
    let found = if r.search { table.find_libibverbs_stored(port_num, r.local, r.want_v2) } else { None };
    let Some(index) = found else {
        // Without evidence, no evidence to pass (a constant `evidence`
        // folds this away).
        return match evidence {
            Evidence::None => cold(table, port_num, wc, area, Evidence::None, true),
            _ => cold(table, port_num, wc, area, evidence, true),
        };
    };
    Ok(T::from_words(found_words(port_num, wc, &r, index)))
}

/// Everything the hot path of [`init_impl`] does not finish, out of line:
/// what it left undecided (a failure, a search that found no stored
/// entry; `hot` true) or did not try (`hot` false: a table that holds a
/// multicast GID). The area is read again (so that the hot path keeps
/// nothing of the view alive across the search that only this path
/// needs), then [`miss`], for what the hot path left and without evidence,
/// or else [`slow`], the full classification and search.
#[cold]
#[inline(never)]
fn cold<const N: usize, T: Output>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: &Area,
    evidence: Evidence,
    hot: bool,
) -> Result<T, IbvFailure> {
    let evidence_given = !matches!(evidence, Evidence::None);
    match read(port_num, wc, area, evidence) {
        Ok(v) if hot && !evidence_given => miss(table, port_num, wc, route(&v)),
        Ok(v) => slow(table, port_num, wc, route(&v), evidence_given),
        Err(words) => Ok(T::from_words(words)),
    }
}

/// The area read once, in `wire`: its [`View`] with the header type, or,
/// without `IBV_WC_GRH`, the finished attribute's words (the generic
/// fields and the flow label; bytes 16..24 and 24..32 of the C struct as
/// little-endian words), for which no header type is taken.
#[inline(always)]
fn read(port_num: u8, wc: &IbvWc, area: &Area, evidence: Evidence) -> Result<View, [u64; 4]> {
    let grh = wc.wc_flags & IBV_WC_GRH != 0;
    let v = View::read(area, grh.then_some(classifier(evidence)));
    if grh { Ok(v) } else { Err(no_grh_words(port_num, wc, u64::from(v.flow_label()))) }
}

/// The attribute without `IBV_WC_GRH`: the generic fields and the flow
/// label (bytes 16..24 and 24..32 of the C struct as little-endian words).
#[inline(always)]
fn no_grh_words(port_num: u8, wc: &IbvWc, flow_label: u64) -> [u64; 4] {
    let w3 = word3(wc.slid, wc.sl, wc.dlid_path_bits, 0, false, port_num);
    [0, 0, flow_label, w3]
}

/// The hot path of [`init_impl`] as an `Option` of the words, for
/// [`words_hot`]: the same steps (generic fields, GRH flag, [`route`], one
/// probe of the stored entries), `None` for everything [`init_impl`] sends
/// to its cold paths. (`init_impl` keeps its own copy of these few lines:
/// its early returns let each path write the C struct directly, which this
/// form's merge would cost it 2 to 9 instructions per call,
/// `benches/gates.toml`. `wc` by value: two registers, no copy in memory.)
#[inline(always)]
fn hot<const N: usize>(table: &GidTable<N>, port_num: u8, wc: IbvWc, area: &Area) -> Option<[u64; 4]> {
    // The area read once, in `wire`; the attribute is built in registers
    // and written as four words. (A table holding a multicast GID could
    // match a multicast destination, which libibverbs refuses before it
    // searches: the caller of `words_hot` takes the full path for such a
    // table.)
    let r = match read(port_num, &wc, area, Evidence::None) {
        Ok(v) => route(&v),
        Err(words) => return Some(words),
    };
    let found = if r.search { table.find_libibverbs_stored(port_num, r.local, r.want_v2) } else { None };
    let index = found?;
    Some(found_words(port_num, &wc, &r, index))
}

/// [`words`] when it is the hot path's (no evidence) and its words are
/// canonical, which the hot path proves with one test (SL ≤ 15; the port is
/// `port`, the table's, nonzero by its type; every other field is canonical
/// by construction, and word 2 is dropped without a GRH, as the canonical
/// form does): `None` for everything else (a failure, a zero-GID search, a
/// table holding a multicast GID, an SL above 15), which [`words`] then
/// decides. An `Option` merges with the cold case in registers, where a
/// `Result` carrying the failure would go through memory.
///
/// Only for a `table` that holds no multicast GID (real ports have none; the
/// answer depends on the table alone, so the caller checks it once per
/// snapshot, as the responder does, rather than once per completion; the
/// port comes as a [`PortNum`] for the same reason).
#[inline(always)]
pub(crate) fn words_hot<const N: usize>(
    table: &GidTable<N>,
    port: PortNum,
    wc: IbvWc,
    area: &Area,
) -> Option<CanonicalWords> {
    debug_assert_eq!(port.get(), table.port_num());
    debug_assert!(!table.holds_multicast());
    match hot(table, port.get(), wc, area) {
        Some([w0, w1, w2, w3]) if wc.sl <= 15 => {
            let global = w3 >> attr::w3::IS_GLOBAL & 1;
            Some(CanonicalWords::proven([w0, w1, w2 & global.wrapping_neg(), w3]))
        }
        _ => None,
    }
}

/// What [`init_impl`] (and its cold paths, so that nothing is copied on
/// the way out) builds: the C struct, or its four words.
trait Output {
    fn from_words(w: [u64; 4]) -> Self;
    fn from_attr(a: IbvAhAttr) -> Self;
}

impl Output for IbvAhAttr {
    #[inline(always)]
    fn from_words(w: [u64; 4]) -> Self {
        IbvAhAttr::from_words(w)
    }
    #[inline(always)]
    fn from_attr(a: IbvAhAttr) -> Self {
        a
    }
}

impl Output for AttrWords {
    #[inline(always)]
    fn from_words(w: [u64; 4]) -> Self {
        AttrWords::from_raw(w)
    }
    #[inline(always)]
    fn from_attr(a: IbvAhAttr) -> Self {
        a.words()
    }
}

/// The attribute of a successful search (`index` found for `r.local`), as
/// its four words.
#[inline(always)]
fn found_words(port_num: u8, wc: &IbvWc, r: &Route, index: u32) -> [u64; 4] {
    let w2 = u64::from(r.flow_label) | word2(0, index as u8, r.hop_limit, r.traffic_class);
    let w3 = word3(wc.slid, wc.sl, wc.dlid_path_bits, 0, true, port_num);
    [r.remote.0, r.remote.1, w2, w3]
}

/// What the hot path left undecided, without evidence and with a table that
/// holds no multicast GID: the error detail of a refused packet (the same
/// order of tests as C: version, multicast, next header), or a search
/// that found no stored entry (a zero GID may still match an empty slot).
#[cold]
#[inline(never)]
fn miss<const N: usize, T: Output>(table: &GidTable<N>, port_num: u8, wc: &IbvWc, r: Route) -> Result<T, IbvFailure> {
    let nh = r.next_header;
    let remote = Gid::from_words(r.remote.0, r.remote.1).0;
    let local = Gid::from_words(r.local.0, r.local.1);
    // The IPv4 destination's first byte (area[36]), in the mapped GID.
    let d0 = (r.local.1 >> 32) as u8;
    let mc = if r.is4 { d0 & 0xf0 == 0xe0 } else { local.is_multicast() };
    let (error, dgid) = if !(r.is4 | r.is6) {
        (IbvError::UnknownHeaderVersion, [0; 16])
    } else if mc {
        (IbvError::MulticastDestination, [0; 16])
    } else if r.is6 && nh != grh::NEXT_HDR_UDP && nh != grh::NEXT_HDR_IBA {
        (IbvError::UnknownNextHeader(nh), remote)
    } else {
        // The stored entries were searched; only the zero GID (which only
        // empty slots match) can still be found.
        let found = if local == Gid::ZERO { table.find_libibverbs(port_num, &local, r.want_v2) } else { None };
        if let Some(index) = found {
            return Ok(T::from_words(found_words(port_num, wc, &r, index)));
        }
        (IbvError::GidNotFound, if r.is6 { remote } else { [0; 16] })
    };
    Err(IbvFailure { error, attr: grh_base(port_num, wc, r.flow_label, dgid) })
}

/// The attribute with what C writes once `IBV_WC_GRH` is set, before the
/// GID search decides the rest: the generic fields, `is_global` and `dgid`
/// (the packet's source, or zero where C has not written it yet). The cold
/// paths start from it; the hot path builds the same fields as words.
#[inline]
fn grh_base(port_num: u8, wc: &IbvWc, flow_label: u32, dgid: [u8; 16]) -> IbvAhAttr {
    IbvAhAttr {
        grh: IbvGlobalRoute { dgid, flow_label, ..IbvGlobalRoute::default() },
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        is_global: 1,
        port_num,
        ..IbvAhAttr::default()
    }
}

/// Everything after the `IBV_WC_GRH` test that the hot path does not finish
/// (a failure, or a search for the zero GID, which only empty slots match),
/// done the plain way out of line: the view's full classification (as
/// [`classify_with`]), then [`GidTable::find_libibverbs`].
#[cold]
#[inline(never)]
fn slow<const N: usize, T: Output>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    r: Route,
    evidence_given: bool,
) -> Result<T, IbvFailure> {
    let c = classify_route(&r, evidence_given);
    let (error, dgid) = match c.verdict {
        Verdict::Search => match table.find_libibverbs(port_num, &c.local, c.want_v2) {
            Some(index) => {
                let mut attr = grh_base(port_num, wc, r.flow_label, c.remote.0);
                attr.grh.sgid_index = index as u8;
                attr.grh.hop_limit = c.hop_limit;
                attr.grh.traffic_class = c.traffic_class;
                return Ok(T::from_attr(attr));
            }
            None => (IbvError::GidNotFound, early_dgid(&c)),
        },
        Verdict::UnknownVersion => (IbvError::UnknownHeaderVersion, [0; 16]),
        Verdict::Multicast => (IbvError::MulticastDestination, [0; 16]),
        Verdict::UnknownNextHeader => (IbvError::UnknownNextHeader(r.next_header), early_dgid(&c)),
        Verdict::Ambiguous => (IbvError::AmbiguousHeader, [0; 16]),
    };
    Err(IbvFailure { error, attr: grh_base(port_num, wc, r.flow_label, dgid) })
}

/// A NULL `grh`: C has zeroed the attribute, then faults.
#[cold]
#[inline(never)]
fn missing_grh() -> IbvFailure {
    IbvFailure { error: IbvError::MissingGrh, attr: IbvAhAttr::default() }
}

/// The dgid C has written before a failure: the packet's SGID on the IPv6
/// path after its multicast test, else nothing.
#[inline]
fn early_dgid(c: &Classified) -> [u8; 16] {
    if c.remote_written_early { c.remote.0 } else { [0; 16] }
}
