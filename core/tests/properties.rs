//! Property tests (proptest) over structured random inputs:
//!
//! 1. both profiles of the core equal the plain reference model
//!    (`udah_core::fuzzing::reference`), with and without evidence;
//! 2. `GidTable`'s hash look-ups equal a linear scan after arbitrary
//!    set/clear sequences;
//! 3. every public function of udah-core that takes data returns (`Ok`/`Err`,
//!    or a value) instead of panicking on arbitrary input — the list is in
//!    [`every_public_function_is_total`].
//!
//! The same checks run unstructured under cargo-fuzz (`fuzz/`); here they run
//! on stable in `cargo test`, and proptest shrinks a failure to a small case.

#![allow(clippy::std_instead_of_core)]

use proptest::prelude::*;
use udah_core::ah::attr::{AhAttr, IbvAhAttr};
use udah_core::ah::{AttrWords, FlowLabel, PortNum, Profile, ProfileError, Sl, kernel, libibverbs};
use udah_core::error::errno;
use udah_core::fuzzing::{self, ModelTable, WcFields};
use udah_core::wire::{self, Area, Evidence, Gid, GrhRepr, Ipv4Repr, NetworkType, Stamp, detect, grh, ipv4};
use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

// ---------------------------------------------------------------------------
// Strategies

fn arb_area_raw() -> impl Strategy<Value = Area> {
    prop::collection::vec(any::<u8>(), 40).prop_map(|v| <Area>::try_from(v.as_slice()).unwrap())
}

/// Areas that look like real headers much more often than random bytes do.
fn arb_area() -> impl Strategy<Value = Area> {
    let grh = (arb_area_raw(), prop_oneof![Just(0x1bu8), Just(17u8), any::<u8>()], any::<bool>()).prop_map(
        |(mut a, nh, mc)| {
            a[0] = 0x60 | (a[0] & 0x0f);
            a[6] = nh;
            if mc {
                a[24] = 0xff;
            }
            a
        },
    );
    let ipv4 = (arb_area_raw(), 0u8..4, any::<[u8; 4]>(), any::<[u8; 4]>(), any::<u8>(), any::<u8>(), 0u8..3).prop_map(
        |(mut a, front, src, dst, ttl, tos, csum)| {
            match front {
                0 => a[..20].fill(0),
                1 => a[0] = 0x60 | (a[0] & 0x0f), // stale IPv6 prefix
                2 => wire::detect::stamp(&mut a, &Stamp::DEFAULT),
                _ => {}
            }
            let r = Ipv4Repr { tos, total_len: 60, ident: 0, flags_frag: 0x4000, ttl, protocol: 17, src, dst };
            r.emit(&mut a);
            if csum == 1 {
                a[31] ^= 1; // bad checksum
            }
            a
        },
    );
    prop_oneof![arb_area_raw(), grh, ipv4]
}

fn arb_evidence() -> impl Strategy<Value = Evidence> {
    prop_oneof![
        Just(Evidence::None),
        (0u8..4).prop_map(|t| Evidence::NetworkType(NetworkType::from_raw(t).unwrap())),
        Just(Evidence::Stamped(Stamp::DEFAULT)),
        any::<[u8; 20]>().prop_map(|b| Evidence::Stamped(Stamp::new(b).unwrap_or_default())),
    ]
}

fn arb_wc() -> impl Strategy<Value = WcFields> {
    let flags = prop_oneof![(0u32..128), any::<u32>(), Just(1u32), Just(1 | 32), Just(1 | 64), Just(1 | 32 | 64),];
    (flags, any::<u32>(), any::<u8>(), any::<u8>(), prop_oneof![Just(100u16), Just(0), any::<u16>()], 0u8..6).prop_map(
        |(wc_flags, slid, sl, dlid_path_bits, vlan_id, network_hdr_type)| WcFields {
            wc_flags,
            slid,
            sl,
            dlid_path_bits,
            vlan_id,
            network_hdr_type,
        },
    )
}

fn arb_link() -> impl Strategy<Value = LinkLayer> {
    prop_oneof![Just(LinkLayer::Infiniband), Just(LinkLayer::Ethernet), Just(LinkLayer::Opa)]
}

fn arb_type() -> impl Strategy<Value = GidType> {
    prop_oneof![Just(GidType::Ib), Just(GidType::RoceV1), Just(GidType::RoceV2)]
}

fn arb_vlan() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![Just(None), Just(Some(100u16)), Just(Some(0)), (0u16..5000).prop_map(Some)]
}

/// Which GID an entry holds: 0..=5 derive it from the area (so that searches
/// hit), anything else is random.
#[derive(Debug, Clone, Copy)]
enum GidPick {
    FromArea(u8),
    Raw([u8; 16]),
}

fn arb_pick() -> impl Strategy<Value = GidPick> {
    prop_oneof![3 => (0u8..6).prop_map(GidPick::FromArea), 1 => any::<[u8; 16]>().prop_map(GidPick::Raw)]
}

fn resolve(p: GidPick, a: &Area) -> Gid {
    let v4 = |at: usize| Gid::from_ipv4([a[at], a[at + 1], a[at + 2], a[at + 3]]);
    match p {
        GidPick::FromArea(0) => grh::dgid(a),
        GidPick::FromArea(1) => v4(36),
        GidPick::FromArea(2) => grh::sgid(a),
        GidPick::FromArea(3) => v4(32),
        GidPick::FromArea(4) => {
            let mut g = grh::dgid(a);
            g.0[8..].copy_from_slice(&wire::gid::SA_WELL_KNOWN_INTERFACE_ID);
            g
        }
        GidPick::FromArea(_) => Gid::ZERO,
        GidPick::Raw(g) => Gid(g),
    }
}

#[derive(Debug, Clone)]
struct TableSpec {
    port: u8,
    link: LinkLayer,
    len: u32,
    entries: Vec<(u32, GidPick, GidType, Option<u16>)>,
}

fn arb_table() -> impl Strategy<Value = TableSpec> {
    // Lengths and indices around 256 too, so that sgid_index wraps (Q12).
    let len = prop_oneof![4 => 0u32..70, 1 => 64u32..70_000, 1 => 250u32..320];
    let index = prop_oneof![4 => 0u32..72, 1 => 240u32..310];
    (0u8..4, arb_link(), len, prop::collection::vec((index, arb_pick(), arb_type(), arb_vlan()), 0..24))
        .prop_map(|(port, link, len, entries)| TableSpec { port, link, len, entries })
}

fn build(spec: &TableSpec, area: &Area) -> GidTable<300> {
    let mut t = GidTable::new(spec.port, spec.link, spec.len);
    for &(i, pick, ty, vlan) in &spec.entries {
        let mut e = GidEntry::new(resolve(pick, area), ty);
        if let Some(v) = vlan {
            e = e.with_vlan(v);
        }
        let _ = t.set(i, e); // out of range, zero GID, bad VLAN: refused, fine
    }
    t
}

// ---------------------------------------------------------------------------
// 1. core == reference model

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Both profiles, with the given evidence and with none; a NULL area
    /// sometimes; the libibverbs call port sometimes not the table's.
    #[test]
    fn profiles_equal_reference_model(
        area in arb_area(),
        spec in arb_table(),
        wc in arb_wc(),
        evidence in arb_evidence(),
        other_port in prop::option::weighted(0.1, any::<u8>()),
        absent in prop::bool::weighted(0.03),
    ) {
        let table = build(&spec, &area);
        let call_port = other_port.unwrap_or(spec.port);
        // Panics (caught by proptest and shrunk) on any difference.
        fuzzing::check_profiles(&table, call_port, &wc, if absent { None } else { Some(&area) }, evidence);
    }

    /// The pipeline's entry point, `Profile::words`, is each profile's C
    /// mirror in word form, with every evidence: for libibverbs the C
    /// struct's words exactly (failures included), for the kernel the words
    /// of its validated attribute (route hop limit 64).
    #[test]
    fn profile_words_equal_the_c_mirrors(
        area in arb_area(),
        spec in arb_table(),
        wc in arb_wc(),
        evidence in arb_evidence(),
    ) {
        let table = build(&spec, &area);
        let (ibv, kwc) = (wc.ibv(), wc.kernel());
        let want = libibverbs::init_ah_from_wc_with(&table, table.port_num(), &ibv, Some(&area), evidence)
            .map(|c| c.words())
            .map_err(ProfileError::Libibverbs);
        prop_assert_eq!(Profile::Libibverbs.words(&table, &ibv, &area, evidence, 64), want);
        let want = kernel::init_ah_attr_from_wc_with(&table, &kwc, Some(&area), evidence)
            .map_err(ProfileError::Kernel)
            .and_then(|a| a.to_ah_attr(64).map_err(ProfileError::Attr))
            .map(|a| AttrWords::from_attr(&a));
        prop_assert_eq!(Profile::Kernel.words(&table, &kwc, &area, evidence, 64), want);
    }

    /// Detection and checksums against the reference on arbitrary areas.
    #[test]
    fn detection_equals_reference_model(area in arb_area(), evidence in arb_evidence()) {
        prop_assert_eq!(detect::detect(&area, evidence), fuzzing::reference::detect(&area, evidence));
        prop_assert_eq!(detect::version_libibverbs(&area), fuzzing::reference::header_version_libibverbs(&area));
        prop_assert_eq!(detect::version_kernel(&area), fuzzing::reference::header_version_kernel(&area));
        prop_assert_eq!(kernel::net_type_by_grh(&area), fuzzing::reference::net_type_by_grh(&area));
        let h = ipv4::header(&area);
        prop_assert_eq!(ipv4::checksum_rfc1071(h), fuzzing::reference::checksum_rfc1071(&area));
        prop_assert_eq!(ipv4::checksum_libibverbs(h), fuzzing::reference::checksum_libibverbs(&area));
    }
}

// ---------------------------------------------------------------------------
// 2. GID table: hash look-ups == linear scan

#[derive(Debug, Clone)]
enum Op {
    Set(u32, usize, GidType, Option<u16>),
    SetRaw(u32, [u8; 16], GidType),
    Clear(u32),
    ClearAll,
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..20, 0usize..4, arb_type(), arb_vlan()).prop_map(|(i, g, t, v)| Op::Set(i, g, t, v)),
        1 => (0u32..20, any::<[u8; 16]>(), arb_type()).prop_map(|(i, g, t)| Op::SetRaw(i, g, t)),
        3 => (0u32..20).prop_map(Op::Clear),
        1 => Just(Op::ClearAll),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// A small pool of GIDs (including the zero GID) stored under all types
    /// and VLANs, with clears in between, in a 16-slot table whose length is
    /// below, at or above the capacity: after every operation, every look-up
    /// of every pool GID equals the model's linear scan.
    #[test]
    fn gid_table_lookups_equal_linear_scan(
        port in 0u8..3,
        len in prop_oneof![0u32..20, Just(16u32), 17u32..100_000],
        pool in prop::array::uniform4(any::<[u8; 16]>()),
        ops in prop::collection::vec(arb_op(), 0..60),
    ) {
        let mut pool: [Gid; 4] = pool.map(Gid);
        pool[3] = Gid::ZERO;
        let mut t: GidTable<16> = GidTable::new(port, LinkLayer::Ethernet, len);
        let mut m: ModelTable<16> = ModelTable::new(port, len);
        for op in ops {
            match op {
                Op::Set(i, g, ty, vlan) => {
                    let mut e = GidEntry::new(pool[g], ty);
                    if let Some(v) = vlan { e = e.with_vlan(v); }
                    prop_assert_eq!(t.set(i, e), m.set(i, e));
                }
                Op::SetRaw(i, g, ty) => {
                    let e = GidEntry::new(Gid(g), ty);
                    prop_assert_eq!(t.set(i, e), m.set(i, e));
                }
                Op::Clear(i) => { t.clear(i); m.clear(i); }
                Op::ClearAll => { t.clear_all(); m.slots = [None; 16]; }
            }
            fuzzing::check_table_matches(&t, &m);
            for g in &pool {
                for p in [port, port.wrapping_add(1)] {
                    fuzzing::check_lookups(&t, &m, p, g, Some(100));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 3. No public function panics on arbitrary input

/// Calls, on arbitrary input, every public function and method of udah-core
/// that takes data (the HAL traits have no implementation in the core and
/// are exercised by the backends' own tests):
///
/// * `wire::area`; `wire::grh::{word0, version, traffic_class, flow_label,
///   payload_len, next_header, hop_limit, sgid, dgid}`, `GrhRepr::{parse,
///   emit}`; `wire::ipv4::{header, header_mut, checksum_rfc1071,
///   checksum_libibverbs, stored_checksum, verify_rfc1071,
///   verify_libibverbs}`, `Ipv4Repr::{parse, emit}`;
/// * `wire::lrh::LrhRepr::{parse, emit, is_multicast, byte_len}`,
///   `wire::bth::BthRepr::{parse, emit, transport, is_ud_send,
///   ud_with_immediate}`, `wire::bth::DethRepr::{parse, emit}`;
/// * `wire::detect::{version_libibverbs, version_kernel, detect, stamp}`,
///   `Stamp::{new, bytes, is_intact}`, `NetworkType::{from_raw,
///   from_mlx5_sl}`;
/// * `Gid::{from_ipv4, is_ipv4_mapped, ipv4, is_multicast,
///   is_multicast_any, is_link_local, subnet_prefix, interface_id,
///   link_local_mac, link_local_from_mac, to_u128, from_u128}`, `Display`,
///   `Debug`, the `From` conversions;
/// * `GidType::from_raw`; `GidEntry::{new, with_vlan, with_ifindex}`;
///   `GidTable::{new, port_num, link_layer, len, is_empty, capacity,
///   entries, generation, set_generation, set, clear, clear_all, get, iter,
///   find_libibverbs, libibverbs_query_count, find_kernel}`;
/// * `ah::libibverbs::{classify, classify_with, init_ah_from_wc,
///   init_ah_from_wc_with}`; `ah::kernel::{net_type_by_grh,
///   init_ah_attr_from_wc, init_ah_attr_from_wc_with}`;
/// * `Sl::new`, `FlowLabel::{new, udp_sport}`, `PortNum::new`,
///   `AhAttr::try_from(&IbvAhAttr)`, `IbvAhAttr::from(&AhAttr)`,
///   `RdmaAhAttr::to_ah_attr`;
/// * `error::errno::name`, `IbvError::errno`, `KernelError::errno`, and
///   `Display` of every error type.
#[allow(clippy::too_many_arguments)]
fn every_public_function_is_total(
    buf: &[u8],
    area: &Area,
    wc: &WcFields,
    evidence: Evidence,
    spec: &TableSpec,
    index: u32,
    x: u32,
    y: u8,
    b16: [u8; 16],
) {
    // wire
    let _ = wire::area(buf);
    let _ = (grh::word0(area), grh::version(area), grh::traffic_class(area), grh::flow_label(area));
    let _ = (grh::payload_len(area), grh::next_header(area), grh::hop_limit(area), grh::sgid(area), grh::dgid(area));
    let mut out = *area;
    if let Ok(r) = GrhRepr::parse(area) {
        r.emit(&mut out);
    }
    GrhRepr { flow_label: x, ..GrhRepr::default() }.emit(&mut out);
    let h = ipv4::header(area);
    let _ = (ipv4::checksum_rfc1071(h), ipv4::checksum_libibverbs(h), ipv4::stored_checksum(h));
    let _ = (ipv4::verify_rfc1071(h), ipv4::verify_libibverbs(h));
    ipv4::header_mut(&mut out)[0] = y;
    if let Ok(r) = Ipv4Repr::parse(area) {
        r.emit(&mut out);
    }
    let _ = format!("{:?}", Ipv4Repr::parse(&out));
    let _ = (detect::version_libibverbs(area), detect::version_kernel(area), detect::detect(area, evidence));
    let mut stamp_bytes = [0u8; 20];
    stamp_bytes.copy_from_slice(&area[20..]);
    if let Some(s) = Stamp::new(stamp_bytes) {
        let _ = (s.bytes(), s.is_intact(area));
        wire::detect::stamp(&mut out, &s);
    }
    let _ = (NetworkType::from_raw(y), NetworkType::from_mlx5_sl(y));
    // Link and transport headers (capture replay)
    for off in [0, 4, 8, 12] {
        let b = buf.get(off..).unwrap_or(&[]);
        if let Ok(r) = wire::lrh::LrhRepr::parse(b) {
            let mut o = [0u8; wire::lrh::HEADER_LEN];
            r.emit(&mut o);
            let _ = (r.is_multicast(), r.byte_len());
        }
        if let Ok(r) = wire::bth::BthRepr::parse(b) {
            let mut o = [0u8; wire::bth::HEADER_LEN];
            r.emit(&mut o);
            let _ = (r.transport(), r.is_ud_send(), r.ud_with_immediate());
        }
        if let Ok(r) = wire::bth::DethRepr::parse(b) {
            let mut o = [0u8; wire::bth::DETH_LEN];
            r.emit(&mut o);
        }
        let _ = format!(
            "{:?} {:?}",
            wire::lrh::LrhRepr::parse(b).map_err(|e| e.to_string()),
            wire::bth::BthRepr::parse(b).map_err(|e| e.to_string())
        );
    }
    // Gid
    let g = Gid(b16);
    let _ = (g.is_ipv4_mapped(), g.ipv4(), g.is_multicast(), g.is_multicast_any(), g.is_link_local());
    let _ = (g.subnet_prefix(), g.interface_id(), g.link_local_mac(), Gid::from_u128(g.to_u128()));
    let _ = (Gid::from_ipv4([y; 4]), Gid::link_local_from_mac([y; 6]), format!("{g} {g:?}"));
    let _ = (<[u8; 16]>::from(g), std::net::Ipv6Addr::from(g), Gid::from(std::net::Ipv4Addr::from(x)));
    // GidTable
    let _ = GidType::from_raw(x);
    let mut t = build(spec, area);
    let _ = (t.port_num(), t.link_layer(), t.len(), t.is_empty(), t.capacity(), t.entries(), t.generation());
    t.set_generation(u64::from(x));
    let _ = t.set(index, GidEntry::new(g, GidType::RoceV2).with_vlan(u16::from(y)).with_ifindex(x));
    let _ = t.get(index);
    let _ = t.iter().count();
    let found = t.find_libibverbs(y, &g, x & 1 != 0);
    let _ = t.libibverbs_query_count(y, found);
    let _ = t.find_kernel(&g, GidType::RoceV1, Some(u16::from(y)));
    t.clear(index);
    // Profiles
    let _ = (libibverbs::classify(area), libibverbs::classify_with(area, evidence));
    for a in [Some(area), None] {
        for r in [
            libibverbs::init_ah_from_wc(&t, y, &wc.ibv(), a),
            libibverbs::init_ah_from_wc_with(&t, y, &wc.ibv(), a, evidence),
        ] {
            match r {
                Ok(attr) => {
                    if let Ok(v) = AhAttr::try_from(&attr) {
                        let _ = IbvAhAttr::from(&v);
                    }
                }
                Err(f) => {
                    let _ = format!("{f} {:?} {}", f.error, errno::name(f.error.errno()));
                }
            }
        }
        for r in [
            kernel::init_ah_attr_from_wc(&t, &wc.kernel(), a),
            kernel::init_ah_attr_from_wc_with(&t, &wc.kernel(), a, evidence),
        ] {
            match r {
                Ok(attr) => {
                    let _ = attr.to_ah_attr(y).map_err(|e| e.to_string());
                }
                Err(f) => {
                    let _ = format!("{f} {:?} {}", f.error, errno::name(f.error.errno()));
                }
            }
        }
    }
    let _ = kernel::net_type_by_grh(area);
    t.clear_all();
    // Attribute newtypes
    let _ = (Sl::new(y), FlowLabel::new(x).map(FlowLabel::udp_sport), PortNum::new(y), errno::name(x as i32));
    let _ = format!("{:?}", udah_core::GidTableError::InvalidVlan(x as u16).to_string());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn public_functions_never_panic(
        buf in prop::collection::vec(any::<u8>(), 0..64),
        area in arb_area(),
        wc in arb_wc(),
        evidence in arb_evidence(),
        spec in arb_table(),
        index in prop_oneof![0u32..80, any::<u32>()],
        x in any::<u32>(),
        y in any::<u8>(),
        b16 in any::<[u8; 16]>(),
    ) {
        every_public_function_is_total(&buf, &area, &wc, evidence, &spec, index, x, y, b16);
    }
}
