//! Fuzzing entry points and the reference model they check against.
//!
//! Not part of the public API: compiled only with the private `fuzzing`
//! feature (off by default, no semver promise) and `#[doc(hidden)]`. The
//! fuzz targets in `fuzz/fuzz_targets/` (whose crate enables the feature)
//! are one-line calls into the `fuzz_*` functions here (the rustls
//! `internal::fuzzing` pattern), and `core/tests/corpus_replay.rs` (through
//! udah-core's dev-dependency on itself with the feature) runs the same
//! functions over the checked-in seeds on stable.
//!
//! Each entry point decodes its input with a tiny [`Cursor`] (reads past the
//! end yield zero bytes, so every input, including the empty one, is a valid
//! case) and **panics only when it detects a bug**: a difference between the
//! core and [`mod@reference`], a broken round trip, or a broken invariant. It
//! never panics because of the input itself.
//!
//! Input layouts (all integers little-endian) are documented on each entry
//! point and in `fuzz/README.md`; `fuzz/gen_corpus.py` writes seeds in them.

// This module exists to panic on detected bugs, and the reference model is
// written for obviousness (plain indexing and arithmetic on fixed-size
// arrays with constant bounds) rather than in the panic-free style the rest
// of the crate is held to. The lints are relaxed here and only here.
#![allow(
    clippy::indexing_slicing,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used
)]

pub mod reference;

use core::fmt::{self, Write as _};

use crate::ah::attr::{AhAttr, IbvAhAttr};
use crate::ah::wc::{IbvWc, KernelWc};
use crate::ah::{kernel, libibverbs};
use crate::error::{GidTableError, errno};
use crate::gid_table::{GidEntry, GidTable, GidType, LinkLayer};
use crate::wire::{self, Area, Evidence, Gid, GrhRepr, Ipv4Repr, NetworkType, Stamp, detect, grh, ipv4};

/// A byte reader that never fails: past the end it yields zeros.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor over `data`.
    pub fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, or 0.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next `K` bytes (zero-padded).
    pub fn bytes<const K: usize>(&mut self) -> [u8; K] {
        let mut out = [0u8; K];
        for b in out.iter_mut() {
            *b = self.u8();
        }
        out
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
}

/// The completion fields both profiles read, decoded once and turned into
/// each profile's work-completion type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WcFields {
    /// Raw flag bits (userspace and kernel bits differ above bit 1; each
    /// profile reads its own).
    pub wc_flags: u32,
    /// Source LID (libibverbs keeps the low 16 bits).
    pub slid: u32,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
    /// VLAN id (kernel, with `IB_WC_WITH_VLAN`).
    pub vlan_id: u16,
    /// Network type (kernel, with `IB_WC_WITH_NETWORK_HDR_TYPE`).
    pub network_hdr_type: u8,
}

impl WcFields {
    /// 13 bytes: flags u32, slid u32, sl, dlid_path_bits, vlan_id u16,
    /// network_hdr_type.
    pub fn decode(c: &mut Cursor<'_>) -> WcFields {
        WcFields {
            wc_flags: c.u32(),
            slid: c.u32(),
            sl: c.u8(),
            dlid_path_bits: c.u8(),
            vlan_id: c.u16(),
            network_hdr_type: c.u8(),
        }
    }

    /// The userspace completion.
    pub fn ibv(&self) -> IbvWc {
        IbvWc {
            wc_flags: self.wc_flags,
            slid: self.slid as u16,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            src_qp: 0,
            pkey_index: 0,
        }
    }

    /// The kernel completion.
    pub fn kernel(&self) -> KernelWc {
        KernelWc {
            wc_flags: self.wc_flags,
            slid: self.slid,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            vlan_id: self.vlan_id,
            network_hdr_type: self.network_hdr_type,
            ..KernelWc::default()
        }
    }
}

/// Decodes the evidence from a control value (`kind` in 0..4) and its payload
/// (network-type byte, 20 stamp bytes): 0 none, 1 a network type (`nt & 3`),
/// 2 the default stamp, 3 a custom stamp (the default one if its first nibble
/// is 6).
pub fn decode_evidence(kind: u8, nt: u8, stamp: [u8; 20]) -> Evidence {
    match kind & 3 {
        1 => Evidence::NetworkType(NetworkType::from_raw(nt & 3).unwrap_or(NetworkType::Ib)),
        2 => Evidence::Stamped(Stamp::DEFAULT),
        3 => Evidence::Stamped(Stamp::new(stamp).unwrap_or(Stamp::DEFAULT)),
        _ => Evidence::None,
    }
}

/// The stamp bytes of an evidence, if it is a stamp.
fn stamp_of(ev: Evidence) -> Option<[u8; 20]> {
    match ev {
        Evidence::Stamped(s) => Some(*s.bytes()),
        _ => None,
    }
}

/// The link layer of a selector value: 0 InfiniBand, 1 and 3 Ethernet, 2 OPA.
pub fn decode_link_layer(v: u8) -> LinkLayer {
    match v & 3 {
        0 => LinkLayer::Infiniband,
        2 => LinkLayer::Opa,
        _ => LinkLayer::Ethernet,
    }
}

/// A GID chosen by selector byte, so that the fuzzer finds table hits easily:
/// 1 the area's DGID, 2 `::ffff:` + the IPv4 destination, 3 the area's SGID,
/// 4 `::ffff:` + the IPv4 source, 5 the DGID with the SA well-known interface
/// id, 6 the zero GID, 7 the DGID with its last byte flipped; anything else
/// (0 in particular) takes the next 16 bytes raw.
pub fn decode_gid(c: &mut Cursor<'_>, area: &Area) -> Gid {
    let v4 = |at: usize| Gid::from_ipv4([area[at], area[at + 1], area[at + 2], area[at + 3]]);
    match c.u8() {
        1 => grh::dgid(area),
        2 => v4(36),
        3 => grh::sgid(area),
        4 => v4(32),
        5 => {
            let mut g = grh::dgid(area);
            g.0[8..16].copy_from_slice(&wire::gid::SA_WELL_KNOWN_INTERFACE_ID);
            g
        }
        6 => Gid::ZERO,
        7 => {
            let mut g = grh::dgid(area);
            g.0[15] ^= 1;
            g
        }
        _ => Gid(c.bytes()),
    }
}

/// A GID-table entry: index u16, type byte (`& 3`: 0 IB, 1 RoCE v1, 2 RoCE v2,
/// 3 IB; bit 7: the VLAN is present), VLAN u16, then a [`decode_gid`] GID.
pub fn decode_entry(c: &mut Cursor<'_>, area: &Area) -> (u32, GidEntry) {
    let index = u32::from(c.u16());
    let ty = c.u8();
    let vlan = c.u16();
    let gid = decode_gid(c, area);
    let gid_type = match ty & 3 {
        1 => GidType::RoceV1,
        2 => GidType::RoceV2,
        _ => GidType::Ib,
    };
    let mut e = GidEntry::new(gid, gid_type);
    if ty & 0x80 != 0 {
        e = e.with_vlan(vlan);
    }
    (index, e)
}

/// Most entries one case stores (keeps an execution fast).
const MAX_ENTRIES: usize = 1024;

/// A `fmt::Write` that discards everything (exercises `Display` without
/// allocating).
struct Sink;

impl fmt::Write for Sink {
    fn write_str(&mut self, _: &str) -> fmt::Result {
        Ok(())
    }
}

/// Runs both profiles of the core and of [`mod@reference`] on one case, with
/// `evidence` and with `Evidence::None`, and panics on any difference.
/// The libibverbs call uses `call_port`; the kernel one the table's port.
pub fn check_profiles<const N: usize>(
    table: &GidTable<N>,
    call_port: u8,
    wc: &WcFields,
    area: Option<&Area>,
    evidence: Evidence,
) {
    let ibv = wc.ibv();
    let kwc = wc.kernel();
    let evidences = [evidence, Evidence::None];
    let count = if matches!(evidence, Evidence::None) { 1 } else { 2 };
    for &ev in &evidences[..count] {
        let core = libibverbs::init_ah_from_wc_with(table, call_port, &ibv, area, ev);
        let model = reference::libibverbs_init_ah_from_wc(table, call_port, &ibv, area, ev);
        if core != model {
            panic!(
                "libibverbs profile differs from the reference model\n  core:  {core:?}\n  model: {model:?}\n  \
                 port {call_port}, table {table:?}\n  wc {ibv:?}\n  evidence {ev:?}\n  area {area:02x?}"
            );
        }
        if matches!(ev, Evidence::None) {
            let plain = libibverbs::init_ah_from_wc(table, call_port, &ibv, area);
            assert!(plain == core, "init_ah_from_wc != init_ah_from_wc_with(.., Evidence::None)");
        }
        check_ibv_result_invariants(&core);

        let core = kernel::init_ah_attr_from_wc_with(table, &kwc, area, ev);
        let model = reference::kernel_init_ah_attr_from_wc(table, &kwc, area, ev);
        if core != model {
            panic!(
                "kernel profile differs from the reference model\n  core:  {core:?}\n  model: {model:?}\n  \
                 table {table:?}\n  wc {kwc:?}\n  evidence {ev:?}\n  area {area:02x?}"
            );
        }
        if matches!(ev, Evidence::None) {
            let plain = kernel::init_ah_attr_from_wc(table, &kwc, area);
            assert!(plain == core, "init_ah_attr_from_wc != init_ah_attr_from_wc_with(.., Evidence::None)");
        }
        // The conversions and formatting never panic.
        match core {
            Ok(a) => {
                let _ = a.to_ah_attr(64);
            }
            Err(f) => {
                let _ = write!(Sink, "{f} {}", errno::name(f.error.errno()));
            }
        }
    }
}

/// Structural facts about every libibverbs result.
fn check_ibv_result_invariants(r: &libibverbs::IbvResult) {
    let a: &IbvAhAttr = match r {
        Ok(a) => a,
        Err(f) => {
            let _ = write!(Sink, "{f} {}", errno::name(f.error.errno()));
            &f.attr
        }
    };
    assert!(a.reserved == 0 && a.grh.reserved == 0 && a.static_rate == 0, "padding or static_rate written: {a:?}");
    assert!(a.is_global <= 1 && a.grh.flow_label <= 0xf_ffff, "bad is_global/flow_label: {a:?}");
    if let Ok(a) = r
        && a.is_global == 1
    {
        // The validated form round-trips when it exists. (Without a GRH it
        // has no flow label, so Q2's flow label is dropped by design.)
        if let Ok(v) = AhAttr::try_from(a) {
            let back = IbvAhAttr::from(&v);
            assert!(back == *a, "AhAttr round trip changed the attribute: {a:?} -> {back:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// fuzz_grh_area

/// Arbitrary 40-byte area, evidence and completion: header parsing, the
/// detectors and both profiles never panic and agree with [`mod@reference`];
/// [`GrhRepr`] and [`Ipv4Repr`] round-trip.
///
/// Layout: area (40), control (bits 0–1 evidence kind, bit 2 stamp the area
/// first, bits 4–5 link layer), network-type byte, stamp (20), completion
/// (13, see [`WcFields::decode`]), then a GRH repr (tc, flow u32, paylen u16,
/// nh, hop, sgid 16, dgid 16) and an IPv4 repr (tos, len u16, id u16, frag
/// u16, ttl, proto, src 4, dst 4) to emit.
pub fn fuzz_grh_area(data: &[u8]) {
    // wire::area on the raw input: Ok exactly when it is at least 40 bytes.
    match wire::area(data) {
        Ok(a) => assert!(data.len() >= 40 && a[..] == data[..40], "wire::area returned the wrong bytes"),
        Err(t) => assert!(data.len() < 40 && t.len == data.len(), "wire::area: bad Truncated {t:?}"),
    }

    check_link_headers(data);

    let mut c = Cursor::new(data);
    let mut area: Area = c.bytes();
    let ctl = c.u8();
    let nt = c.u8();
    let stamp_bytes: [u8; 20] = c.bytes();
    let evidence = decode_evidence(ctl, nt, stamp_bytes);
    if ctl & 4 != 0
        && let Some(s) = stamp_of(evidence)
    {
        area[..20].copy_from_slice(&s);
    }
    let link = decode_link_layer(ctl >> 4);
    let wc = WcFields::decode(&mut c);

    check_area(&area, evidence);

    // A small table holding the area's own addresses, so that both profiles
    // get past the search (index 5 onward; index 0..5 empty for the
    // libibverbs zero-GID rule).
    let mut table: GidTable<16> = GidTable::new(1, link, 16);
    let v4 = |at: usize| Gid::from_ipv4([area[at], area[at + 1], area[at + 2], area[at + 3]]);
    let cands = [
        (grh::dgid(&area), GidType::Ib),
        (grh::dgid(&area), GidType::RoceV1),
        (grh::dgid(&area), GidType::RoceV2),
        (v4(36), GidType::RoceV2),
        (v4(36), GidType::RoceV1),
    ];
    for (k, (g, t)) in cands.iter().enumerate() {
        let mut e = GidEntry::new(*g, *t);
        if wc.vlan_id & 0x0fff == wc.vlan_id && k % 2 == 1 {
            e = e.with_vlan(wc.vlan_id);
        }
        let r = table.set(5 + k as u32, e);
        assert!(r.is_ok() || *g == Gid::ZERO, "set into a fresh table failed: {r:?}");
    }
    check_profiles(&table, 1, &wc, Some(&area), evidence);

    // Emit arbitrary reprs and parse them back.
    let g = GrhRepr {
        traffic_class: c.u8(),
        flow_label: c.u32(),
        payload_len: c.u16(),
        next_header: c.u8(),
        hop_limit: c.u8(),
        sgid: Gid(c.bytes()),
        dgid: Gid(c.bytes()),
    };
    let mut out = area;
    g.emit(&mut out);
    let back = GrhRepr::parse(&out);
    assert!(
        back == Ok(GrhRepr { flow_label: g.flow_label & 0xf_ffff, ..g }),
        "GrhRepr emit -> parse changed it: {g:?} -> {back:?}"
    );
    let r = Ipv4Repr {
        tos: c.u8(),
        total_len: c.u16(),
        ident: c.u16(),
        flags_frag: c.u16(),
        ttl: c.u8(),
        protocol: c.u8(),
        src: c.bytes(),
        dst: c.bytes(),
    };
    let mut out = area;
    r.emit(&mut out);
    assert!(out[..20] == area[..20], "Ipv4Repr::emit wrote into the undefined front");
    let back = Ipv4Repr::parse(&out);
    assert!(back == Ok(r), "Ipv4Repr emit -> parse changed it: {r:?} -> {back:?}");
    assert!(detect::version_kernel(&out) == wire::HeaderVersion::Ipv4, "emitted IPv4 header not IPv4 for the kernel");
    check_area(&out, evidence);
}

/// The capture-replay headers (`wire::lrh`, `wire::bth`) on the raw input at
/// a few offsets: parsing any length never panics, a short buffer is
/// `Truncated` with its length, and parse → emit → parse is stable.
fn check_link_headers(data: &[u8]) {
    use crate::wire::bth::{self, BthMalformed, BthRepr, DethRepr};
    use crate::wire::lrh::{self, LrhMalformed, LrhRepr};
    for off in [0usize, 8, 20, 28, 40] {
        let buf = data.get(off..).unwrap_or(&[]);
        match LrhRepr::parse(buf) {
            Ok(r) => {
                let mut out = [0u8; lrh::HEADER_LEN];
                r.emit(&mut out);
                assert!(LrhRepr::parse(&out) == Ok(r), "LrhRepr parse -> emit -> parse changed {r:?}");
                let _ = (r.is_multicast(), r.byte_len());
            }
            Err(LrhMalformed::Truncated { len }) => assert!(len == buf.len() && len < lrh::HEADER_LEN, "LRH Truncated"),
            Err(e) => {
                let _ = write!(Sink, "{e}");
            }
        }
        match BthRepr::parse(buf) {
            Ok(r) => {
                let mut out = [0u8; bth::HEADER_LEN];
                r.emit(&mut out);
                assert!(BthRepr::parse(&out) == Ok(r), "BthRepr parse -> emit -> parse changed {r:?}");
                let _ = (r.transport(), r.is_ud_send(), r.ud_with_immediate());
            }
            Err(BthMalformed::Truncated { len, need }) => {
                assert!(len == buf.len() && len < need && need == bth::HEADER_LEN, "BTH Truncated")
            }
            Err(e) => {
                let _ = write!(Sink, "{e}");
            }
        }
        match DethRepr::parse(buf) {
            Ok(r) => {
                let mut out = [0u8; bth::DETH_LEN];
                r.emit(&mut out);
                assert!(DethRepr::parse(&out) == Ok(r), "DethRepr parse -> emit -> parse changed {r:?}");
            }
            Err(e) => assert!(buf.len() < bth::DETH_LEN, "DethRepr refused {} bytes: {e:?}", buf.len()),
        }
    }
}

/// Everything that can be said about one area on its own: detectors and
/// checksums against [`mod@reference`], parse → emit → parse round trips,
/// field accessors.
fn check_area(area: &Area, evidence: Evidence) {
    let h = ipv4::header(area);
    assert!(
        ipv4::checksum_rfc1071(h) == reference::checksum_rfc1071(area),
        "checksum_rfc1071 differs from the reference on {area:02x?}"
    );
    assert!(
        ipv4::checksum_libibverbs(h) == reference::checksum_libibverbs(area),
        "checksum_libibverbs differs from the reference on {area:02x?}"
    );
    // §2.3: the single fold is right, or off by exactly one.
    let rfc_le = ipv4::checksum_rfc1071(h).swap_bytes();
    let lib = ipv4::checksum_libibverbs(h);
    assert!(lib == rfc_le || lib == rfc_le.wrapping_add(1), "checksums unrelated: rfc {rfc_le:#x} lib {lib:#x}");
    assert!(
        detect::version_libibverbs(area) == reference::header_version_libibverbs(area),
        "version_libibverbs differs from the reference on {area:02x?}"
    );
    assert!(
        detect::version_kernel(area) == reference::header_version_kernel(area),
        "version_kernel differs from the reference on {area:02x?}"
    );
    assert!(
        kernel::net_type_by_grh(area) == reference::net_type_by_grh(area),
        "net_type_by_grh differs from the reference on {area:02x?}"
    );
    for ev in [
        evidence,
        Evidence::None,
        Evidence::NetworkType(NetworkType::Ib),
        Evidence::NetworkType(NetworkType::RoceV1),
        Evidence::NetworkType(NetworkType::Ipv4),
        Evidence::NetworkType(NetworkType::Ipv6),
        Evidence::Stamped(Stamp::DEFAULT),
    ] {
        let d = detect::detect(area, ev);
        let m = reference::detect(area, ev);
        assert!(d == m, "detect({ev:?}) = {d:?}, reference {m:?}, on {area:02x?}");
        let cl = libibverbs::classify_with(area, ev);
        let _ = write!(Sink, "{cl:?}");
    }
    assert!(libibverbs::classify(area) == libibverbs::classify_with(area, Evidence::None), "classify != classify_with");

    // GRH: parse -> emit -> identical bytes -> parse.
    match GrhRepr::parse(area) {
        Ok(r) => {
            let mut out = [0x5au8; 40];
            r.emit(&mut out);
            assert!(out == *area, "GrhRepr parse -> emit changed the bytes");
            assert!(GrhRepr::parse(&out) == Ok(r), "GrhRepr reparse differs");
            assert!(
                r.flow_label == grh::flow_label(area)
                    && r.traffic_class == grh::traffic_class(area)
                    && u32::from(r.traffic_class) == (grh::word0(area) >> 20) & 0xff,
                "GrhRepr fields disagree with the accessors"
            );
        }
        Err(e) => assert!(grh::version(area) != 6, "GrhRepr::parse refused version 6: {e:?}"),
    }
    // IPv4: parse -> emit -> identical header bytes, front untouched -> parse.
    match Ipv4Repr::parse(area) {
        Ok(r) => {
            let mut out = *area;
            out[20..].fill(0xa5);
            r.emit(&mut out);
            assert!(out == *area, "Ipv4Repr parse -> emit changed the bytes");
            assert!(Ipv4Repr::parse(&out) == Ok(r), "Ipv4Repr reparse differs");
            assert!(area[20] == 0x45 && ipv4::verify_rfc1071(h), "Ipv4Repr accepted a bad header");
        }
        Err(_) => assert!(area[20] != 0x45 || !ipv4::verify_rfc1071(h), "Ipv4Repr refused a good header"),
    }
    let _ = (grh::payload_len(area), grh::hop_limit(area), grh::next_header(area), ipv4::stored_checksum(h));
    let s = grh::sgid(area);
    let _ = (s.is_ipv4_mapped(), s.ipv4(), s.is_multicast_any(), s.is_link_local(), s.link_local_mac());
    let _ = (s.subnet_prefix(), s.interface_id(), Gid::from_u128(s.to_u128()) == s);
    let _ = write!(Sink, "{s} {s:?}");
}

// ---------------------------------------------------------------------------
// fuzz_ah_from_wc_diff

/// The core against [`mod@reference`] on both profiles, with and without
/// evidence. Any difference panics with both results and the case.
///
/// Layout:
///
/// | bytes | what |
/// |---|---|
/// | 0 | control: bits 0–1 link layer (0 IB, 1/3 Ethernet, 2 OPA), bit 2 no area (NULL `grh`), bit 3 capacity 1024 (else 16), bits 4–5 evidence kind ([`decode_evidence`]), bit 6 stamp the area with the evidence's stamp, bit 7 the libibverbs call uses byte 2 as its port (else the table's) |
/// | 1 | the table's port |
/// | 2 | the libibverbs call's port (with control bit 7) |
/// | 3..7 | `gid_tbl_len`, u32 |
/// | 7..47 | the area |
/// | 47..60 | completion ([`WcFields::decode`]) |
/// | 60 | network-type byte of the evidence |
/// | 61..81 | stamp bytes of the evidence |
/// | 81.. | GID-table entries ([`decode_entry`]) until the input ends |
pub fn fuzz_ah_from_wc_diff(data: &[u8]) {
    match data.first() {
        Some(ctl) if ctl & 8 != 0 => {
            let c = AhCase::<1024>::decode(data);
            check_profiles(&c.table, c.call_port, &c.wc, c.area(), c.evidence);
        }
        _ => {
            let c = AhCase::<16>::decode(data);
            check_profiles(&c.table, c.call_port, &c.wc, c.area(), c.evidence);
        }
    }
}

/// What the core's two profiles answer on a [`fuzz_ah_from_wc_diff`] input
/// (with the decoded evidence): `"ok"` or the errno name of the failure
/// (`"EFAULT"` for a missing area), as `(libibverbs, kernel)`. The corpus
/// replay test compares it with the vectors the seeds came from.
pub fn ah_case_outcomes(data: &[u8]) -> (&'static str, &'static str) {
    fn name<T, E>(r: &Result<T, E>, errno_of: impl Fn(&E) -> i32) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(e) => errno::name(errno_of(e)),
        }
    }
    fn run<const N: usize>(data: &[u8]) -> (&'static str, &'static str) {
        let c = AhCase::<N>::decode(data);
        let l = libibverbs::init_ah_from_wc_with(&c.table, c.call_port, &c.wc.ibv(), c.area(), c.evidence);
        let k = kernel::init_ah_attr_from_wc_with(&c.table, &c.wc.kernel(), c.area(), c.evidence);
        (name(&l, |f| f.error.errno()), name(&k, |f| f.error.errno()))
    }
    match data.first() {
        Some(ctl) if ctl & 8 != 0 => run::<1024>(data),
        _ => run::<16>(data),
    }
}

/// A decoded [`fuzz_ah_from_wc_diff`] input.
#[derive(Debug, Clone)]
pub struct AhCase<const N: usize> {
    /// The port's GID table.
    pub table: GidTable<N>,
    /// The port the libibverbs call is made with.
    pub call_port: u8,
    /// The completion.
    pub wc: WcFields,
    /// The area (ignored when `area_absent`).
    pub area: Area,
    /// A NULL `grh`.
    pub area_absent: bool,
    /// The evidence.
    pub evidence: Evidence,
}

impl<const N: usize> AhCase<N> {
    /// Decodes the layout documented on [`fuzz_ah_from_wc_diff`] (the
    /// capacity bit of the control byte is the caller's business).
    pub fn decode(data: &[u8]) -> AhCase<N> {
        let mut c = Cursor::new(data);
        let ctl = c.u8();
        let table_port = c.u8();
        let own_port = c.u8();
        let call_port = if ctl & 0x80 != 0 { own_port } else { table_port };
        let len = c.u32();
        let mut area: Area = c.bytes();
        let wc = WcFields::decode(&mut c);
        let nt = c.u8();
        let stamp_bytes: [u8; 20] = c.bytes();
        let evidence = decode_evidence(ctl >> 4, nt, stamp_bytes);
        if ctl & 0x40 != 0
            && let Some(s) = stamp_of(evidence)
        {
            area[..20].copy_from_slice(&s);
        }
        let mut table: GidTable<N> = GidTable::new(table_port, decode_link_layer(ctl), len);
        let mut n = 0;
        while !c.is_empty() && n < MAX_ENTRIES {
            let (index, entry) = decode_entry(&mut c, &area);
            let _ = table.set(index, entry);
            n += 1;
        }
        AhCase { table, call_port, wc, area, area_absent: ctl & 4 != 0, evidence }
    }

    /// The area as the profiles take it.
    pub fn area(&self) -> Option<&Area> {
        if self.area_absent { None } else { Some(&self.area) }
    }
}

// ---------------------------------------------------------------------------
// fuzz_gid_table

/// The obviously-correct GID-table model: one `Option<GidEntry>` per slot.
#[derive(Debug, Clone)]
pub struct ModelTable<const N: usize> {
    /// Port number.
    pub port: u8,
    /// Table length (`gid_tbl_len`).
    pub len: u32,
    /// Slots `0..N`.
    pub slots: [Option<GidEntry>; N],
}

impl<const N: usize> ModelTable<N> {
    /// An empty model.
    pub fn new(port: u8, len: u32) -> ModelTable<N> {
        ModelTable { port, len, slots: [None; N] }
    }

    /// What `GidTable::set` must do.
    pub fn set(&mut self, index: u32, e: GidEntry) -> Result<(), GidTableError> {
        if index >= self.len {
            return Err(GidTableError::IndexOutOfRange { index, len: self.len });
        }
        if index as usize >= N {
            return Err(GidTableError::OverCapacity { index, capacity: N });
        }
        if e.gid == Gid::ZERO {
            return Err(GidTableError::ZeroGid);
        }
        if let Some(v) = e.vlan
            && v > 4095
        {
            return Err(GidTableError::InvalidVlan(v));
        }
        self.slots[index as usize] = Some(e);
        Ok(())
    }

    /// What `GidTable::clear` must do.
    pub fn clear(&mut self, index: u32) {
        if index < self.len && (index as usize) < N {
            self.slots[index as usize] = None;
        }
    }

    /// What `GidTable::get` must return.
    pub fn get(&self, index: u32) -> Option<GidEntry> {
        if index < self.len && (index as usize) < N { self.slots[index as usize] } else { None }
    }

    /// Linear-scan `ibv_find_gid_index` (§3.2): empty slots are (zero GID,
    /// IB/RoCE v1), slots past `N` are empty, the scan ends at `len`.
    pub fn find_libibverbs(&self, port: u8, gid: &Gid, want_v2: bool) -> Option<u32> {
        if port == 0 || port != self.port {
            return None;
        }
        let mut i: u32 = 0;
        while i < self.len {
            let (g, v2) = match self.get(i) {
                Some(e) => (e.gid, e.gid_type == GidType::RoceV2),
                None => (Gid::ZERO, false),
            };
            if g == *gid && v2 == want_v2 {
                return Some(i);
            }
            if i as usize >= N {
                return None; // all later slots are empty too
            }
            i += 1;
        }
        None
    }

    /// Linear-scan kernel look-up (§4.2).
    pub fn find_kernel(&self, gid: &Gid, ty: GidType, vlan: Option<u16>) -> Option<u32> {
        (0..self.len.min(N as u32)).find(|&i| match self.get(i) {
            Some(e) => e.gid == *gid && e.gid_type == ty && vlan.is_none_or(|v| e.vlan.unwrap_or(0xffff) == v),
            None => false,
        })
    }

    /// The number of valid entries.
    pub fn entries(&self) -> u32 {
        self.slots.iter().filter(|s| s.is_some()).count() as u32
    }
}

/// Compares every observable of `t` with the model.
pub fn check_table_matches<const N: usize>(t: &GidTable<N>, m: &ModelTable<N>) {
    assert!(t.entries() == m.entries(), "entries(): table {} model {}", t.entries(), m.entries());
    assert!(t.len() == m.len && t.port_num() == m.port && t.capacity() == N, "table header changed");
    assert!(t.is_empty() == (m.len == 0), "is_empty()");
    let upto = m.len.min(N as u32).saturating_add(2);
    for i in 0..upto {
        assert!(t.get(i) == m.get(i), "get({i}): table {:?} model {:?}", t.get(i), m.get(i));
    }
    let mut it = t.iter();
    for i in 0..m.len.min(N as u32) {
        if let Some(e) = m.get(i) {
            let got = it.next();
            assert!(got == Some((i, e)), "iter(): expected {:?}, got {got:?}", (i, e));
        }
    }
    assert!(it.next().is_none(), "iter() yields more than the model");
    // The zero GID (empty slots) as the libibverbs scan sees it.
    for want_v2 in [false, true] {
        let a = t.find_libibverbs(m.port, &Gid::ZERO, want_v2);
        let b = m.find_libibverbs(m.port, &Gid::ZERO, want_v2);
        assert!(a == b, "find_libibverbs(zero, v2={want_v2}): table {a:?} model {b:?}");
    }
}

/// Checks one look-up of every kind for `gid` against the model.
pub fn check_lookups<const N: usize>(t: &GidTable<N>, m: &ModelTable<N>, port: u8, gid: &Gid, vlan: Option<u16>) {
    for want_v2 in [false, true] {
        let a = t.find_libibverbs(port, gid, want_v2);
        let b = m.find_libibverbs(port, gid, want_v2);
        assert!(a == b, "find_libibverbs(port {port}, {gid:?}, v2={want_v2}): table {a:?} model {b:?}\n{m:?}");
        // §3.2 query counts: 2 per index examined, plus 1 for a failing end.
        let q = t.libibverbs_query_count(port, a);
        let expect = match b {
            Some(i) => 2 * u64::from(i) + 2,
            None if port == 0 || port != m.port => 1,
            None => 2 * u64::from(m.len) + 1,
        };
        assert!(q == expect, "libibverbs_query_count: {q} != {expect}");
    }
    for ty in [GidType::Ib, GidType::RoceV1, GidType::RoceV2] {
        for v in [None, vlan, Some(0xffff)] {
            let a = t.find_kernel(gid, ty, v);
            let b = m.find_kernel(gid, ty, v);
            assert!(a == b, "find_kernel({gid:?}, {ty:?}, {v:?}): table {a:?} model {b:?}\n{m:?}");
        }
    }
}

/// Arbitrary GID-table contents, set/clear sequences and look-ups against
/// [`ModelTable`].
///
/// Layout: capacity selector (`& 3`: 1, 4, 16, 300), port, link layer,
/// `gid_tbl_len` u16 (control bit 2 of the capacity byte: u32 instead),
/// then operations until the input ends, each an opcode byte (`% 8`): 0–2
/// set (index, entry as in [`decode_entry`] but the GID selector picks from
/// recently used GIDs), 3 clear (index), 4 look up a recent GID, 5 look up a
/// raw GID, 6 clear all, 7 bump the generation. Index bytes: u16; values up
/// to `len + 2` are folded in range so that edges are hit often.
pub fn fuzz_gid_table(data: &[u8]) {
    let mut c = Cursor::new(data);
    let sel = c.u8();
    match sel & 3 {
        0 => table_ops::<2>(sel, c),
        1 => table_ops::<4>(sel, c),
        2 => table_ops::<16>(sel, c),
        _ => table_ops::<300>(sel, c),
    }
}

fn table_ops<const N: usize>(sel: u8, mut c: Cursor<'_>) {
    let port = c.u8();
    let link = decode_link_layer(c.u8());
    let len = if sel & 4 != 0 { c.u32() } else { u32::from(c.u16()) };
    let mut t: GidTable<N> = GidTable::new(port, link, len);
    let mut m: ModelTable<N> = ModelTable::new(port, len);
    assert!(t.link_layer() == link && t.generation() == 0, "fresh table header");
    let mut recent = [Gid::ZERO; 8];
    let mut next_recent = 0usize;
    let pick_index = |c: &mut Cursor<'_>| -> u32 {
        let raw = u32::from(c.u16());
        // Small raw values index near the edges of the table and capacity.
        let span = len.min(N as u32).saturating_add(3);
        if raw & 0x8000 != 0 { raw & 0x7fff } else { raw % span }
    };
    let mut ops = 0;
    while !c.is_empty() && ops < 4096 {
        ops += 1;
        match c.u8() % 8 {
            0..=2 => {
                let index = pick_index(&mut c);
                let ty = c.u8();
                let vlan = c.u16();
                let g = match c.u8() {
                    s @ 0..=7 => recent[s as usize],
                    _ => Gid(c.bytes()),
                };
                let gid_type = match ty & 3 {
                    1 => GidType::RoceV1,
                    2 => GidType::RoceV2,
                    _ => GidType::Ib,
                };
                let mut e = GidEntry::new(g, gid_type).with_ifindex(u32::from(ty));
                if ty & 0x80 != 0 {
                    e = e.with_vlan(vlan);
                }
                let a = t.set(index, e);
                let b = m.set(index, e);
                assert!(a == b, "set({index}, {e:?}): table {a:?} model {b:?}");
                if a.is_ok() {
                    recent[next_recent % 8] = g;
                    next_recent += 1;
                }
            }
            3 => {
                let index = pick_index(&mut c);
                t.clear(index);
                m.clear(index);
            }
            4 => {
                let g = recent[usize::from(c.u8() % 8)];
                let vlan = c.u16();
                let p = if c.u8() & 1 != 0 { port.wrapping_add(1) } else { port };
                check_lookups(&t, &m, p, &g, Some(vlan));
            }
            5 => {
                let g = Gid(c.bytes());
                check_lookups(&t, &m, port, &g, None);
            }
            6 => {
                t.clear_all();
                m.slots = [None; N];
            }
            _ => {
                let g = c.u64();
                t.set_generation(g);
                assert!(t.generation() == g, "set_generation");
            }
        }
        check_table_matches(&t, &m);
    }
    for g in recent {
        check_lookups(&t, &m, port, &g, Some(0xffff));
    }
    let _ = write!(Sink, "{t:?}");
}
