//! The kernel profile: Linux `ib_init_ah_attr_from_wc`
//! (`drivers/infiniband/core/verbs.c`, mainline 2025 with commit
//! `8aaa848eaddd`), bit-exact with the kernel-profile vectors.
//!
//! The rules (SEMANTICS §4): the attribute type comes from the port; on RoCE
//! ports the network type is the driver-reported one
//! (`IB_WC_WITH_NETWORK_HDR_TYPE`) or the kernel's heuristic (RFC checksum,
//! "neither" falls through to the next-header test, every non-UDP next header
//! is RoCE v1); the local GID is matched with the exact GID type and, on
//! RoCE, the VLAN of the completion; a RoCE completion without `IB_WC_GRH` is
//! `-EPROTOTYPE`; on IB a local GID with the SA well-known interface id takes
//! slot 0; flow label and traffic class both come from `W0` (for IPv4 packets
//! from the undefined front of the area); the hop limit is 255 on IB and for
//! link-local RoCE v1 (whose MAC is derived from the GID), and otherwise the
//! route's, which together with the neighbour MAC the kernel resolves through
//! the IP stack. udah does not route: it returns [`HopLimit::Route`] and
//! [`Dmac::Resolve`] and leaves both to the backend at create time, except
//! for the one host-independent failure, an address-family mismatch between
//! the local entry and the remote GID (`-EINVAL`).
//!
//! The failure value carries the attribute as the kernel leaves it.

use super::ProfileError;
use super::attr::{AhType, Dmac, HopLimit, RdmaAhAttr, RdmaGlobalRoute};
use super::wc::{Completion, IB_WC_GRH, IB_WC_WITH_NETWORK_HDR_TYPE, IB_WC_WITH_VLAN, KernelWc};
use crate::attr::{AttrWords, word2, word3};
use crate::error::KernelError;
use crate::gid_table::{GidTable, GidType, LinkLayer};
use crate::wire::gid::SA_WELL_KNOWN_INTERFACE_ID;
use crate::wire::view::{self, View};
use crate::wire::{Area, Classifier, Evidence, Gid, Heuristic, NetworkType, grh};

/// A failed call: the error and the attribute as the kernel leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelFailure {
    /// What went wrong.
    pub error: KernelError,
    /// The partly written attribute (FORMAT-kernel "What is left in ah_attr").
    pub attr: RdmaAhAttr,
}

impl core::fmt::Display for KernelFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.error, f)
    }
}

impl core::error::Error for KernelFailure {}

/// The result of [`init_ah_attr_from_wc`].
pub type KernelResult = Result<RdmaAhAttr, KernelFailure>;

/// The kernel's `ib_get_net_type_by_grh` for a RoCE port (the area read
/// once, [`View`]).
#[inline]
pub fn net_type_by_grh(area: &Area) -> NetworkType {
    let v = View::read(area, Some(Classifier { heuristic: Heuristic::Kernel, evidence: Evidence::None }));
    // Without evidence the heuristic always decides (never `None`).
    net_type_of(&v, Evidence::None).unwrap_or(NetworkType::RoceV1)
}

/// `ib_init_ah_attr_from_wc(dev, port, wc, grh, &attr)` for the port whose
/// GID table is `table` (its port number and link layer are used).
/// `area` `None` stands for a NULL `grh`.
#[inline]
pub fn init_ah_attr_from_wc<const N: usize>(table: &GidTable<N>, wc: &KernelWc, area: Option<&Area>) -> KernelResult {
    init_ah_attr_from_wc_with(table, wc, area, Evidence::None)
}

/// [`init_ah_attr_from_wc`] where, on a RoCE port whose completion does not
/// report the network type, the type comes from `evidence` through the strict
/// [`detect`](crate::wire::detect::detect) instead of the heuristic. `Evidence::None` is exactly
/// the kernel.
pub fn init_ah_attr_from_wc_with<const N: usize>(
    table: &GidTable<N>,
    wc: &KernelWc,
    area: Option<&Area>,
    evidence: Evidence,
) -> KernelResult {
    mirror(table, wc, area.map(|a| read(table, wc, a, evidence)).as_ref(), evidence)
}

/// The area read once, in `wire`, with the header type where the kernel
/// takes it from the bytes: on a RoCE port whose completion does not report
/// the network type.
#[inline(always)]
fn read<const N: usize>(table: &GidTable<N>, wc: &KernelWc, area: &Area, evidence: Evidence) -> View {
    let by_bytes = table.link_layer() == LinkLayer::Ethernet && wc.wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE == 0;
    View::read(area, by_bytes.then_some(Classifier { heuristic: Heuristic::Kernel, evidence }))
}

/// The body of [`init_ah_attr_from_wc_with`], on the area's [`View`]
/// (`None`: a NULL `grh`) read with `evidence`.
fn mirror<const N: usize>(table: &GidTable<N>, wc: &KernelWc, view: Option<&View>, evidence: Evidence) -> KernelResult {
    let ah_type = match table.link_layer() {
        LinkLayer::Ethernet => AhType::Roce,
        LinkLayer::Infiniband => AhType::Ib,
        LinkLayer::Opa => AhType::Opa,
    };
    let roce = ah_type == AhType::Roce;
    let mut attr = RdmaAhAttr {
        ah_type,
        dlid: (!roce).then_some(0),
        src_path_bits: (!roce).then_some(0),
        roce: roce.then_some(Dmac::Mac([0; 6])),
        ..RdmaAhAttr::default()
    };
    let fail = |error: KernelError, attr: RdmaAhAttr| Err(KernelFailure { error, attr });

    // Step 2: network type (a driver may report values above 3).
    let net_type = if !roce {
        NetworkType::Ib
    } else if wc.wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE != 0 {
        match NetworkType::from_raw(wc.network_hdr_type) {
            Some(t) => t,
            // Step 3's first test.
            None => return fail(KernelError::InvalidNetworkType(wc.network_hdr_type), attr),
        }
    } else {
        let Some(v) = view else { return fail(KernelError::MissingGrh, attr) };
        match net_type_of(v, evidence) {
            Some(t) => t,
            None => return fail(KernelError::AmbiguousHeader, attr),
        }
    };
    let gid_type = gid_type_of(net_type);

    // Step 3: the two GIDs (remote = packet source, local = packet destination).
    let Some(v) = view else { return fail(KernelError::MissingGrh, attr) };
    let (remote, local) = if net_type == NetworkType::Ipv4 { (v.src4, v.dst4) } else { (v.sgid, v.dgid) };
    let (remote, local) = (Gid::from_words(remote.0, remote.1), Gid::from_words(local.0, local.1));

    // Step 4.
    attr.sl = wc.sl;
    attr.port_num = u32::from(table.port_num());
    let grh_filled = |index: u32| RdmaGlobalRoute {
        dgid: remote,
        flow_label: v.flow_label(),
        sgid_index: index as u8,
        hop_limit: HopLimit::Value(0xff),
        traffic_class: v.traffic_class(),
        sgid_attr_index: Some(index),
    };

    if roce {
        // Step 5.
        let vlan = if wc.wc_flags & IB_WC_WITH_VLAN != 0 { wc.vlan_id } else { 0xffff };
        if wc.wc_flags & IB_WC_GRH == 0 {
            return fail(KernelError::NoGrhOnRoce, attr);
        }
        let Some(index) = table.find_kernel(&local, gid_type, Some(vlan)) else {
            return fail(KernelError::GidNotFound, attr);
        };
        attr.ah_flags = 1;
        attr.grh = grh_filled(index);
        if remote.is_link_local() && gid_type == GidType::RoceV1 {
            attr.roce = Some(Dmac::Mac(remote.link_local_mac()));
            return Ok(attr);
        }
        if local.is_ipv4_mapped() != remote.is_ipv4_mapped() {
            attr.grh.sgid_attr_index = None;
            return fail(KernelError::AddressFamilyMismatch, attr);
        }
        attr.grh.hop_limit = HopLimit::Route;
        attr.roce = Some(Dmac::Resolve);
        Ok(attr)
    } else {
        // Step 6.
        attr.dlid = Some(if ah_type == AhType::Ib { wc.slid & 0xffff } else { wc.slid });
        attr.src_path_bits = Some(wc.dlid_path_bits);
        if wc.wc_flags & IB_WC_GRH == 0 {
            return Ok(attr);
        }
        let index = if local.interface_id() == SA_WELL_KNOWN_INTERFACE_ID {
            if table.is_empty() {
                return fail(KernelError::NoGidSlots, attr);
            }
            if table.get(0).is_none() {
                return fail(KernelError::WellKnownSlotEmpty, attr);
            }
            0
        } else {
            match table.find_kernel(&local, GidType::Ib, None) {
                Some(i) => i,
                None => return fail(KernelError::GidNotFound, attr),
            }
        };
        attr.ah_flags = 1;
        attr.grh = grh_filled(index);
        Ok(attr)
    }
}

/// The network type of a RoCE completion that does not report one, from
/// the area's view: for [`Evidence::None`] the kernel's heuristic
/// ([`net_type_by_grh`]: IPv4, else the next header decides, also for the
/// version "neither"); else the strict
/// [`detect`](crate::wire::detect::detect) with `evidence` (`None`: the
/// evidence and the bytes disagree, or nothing fits).
#[inline(always)]
fn net_type_of(v: &View, evidence: Evidence) -> Option<NetworkType> {
    let by_nh =
        core::hint::select_unpredictable(v.next_header == grh::NEXT_HDR_UDP, NetworkType::Ipv6, NetworkType::RoceV1);
    if v.is4 {
        Some(NetworkType::Ipv4)
    } else if v.is6 | matches!(evidence, Evidence::None) {
        Some(by_nh)
    } else {
        None
    }
}

/// The GID type the kernel searches for a network type
/// (`ib_network_to_gid_type`).
#[inline(always)]
const fn gid_type_of(net_type: NetworkType) -> GidType {
    match net_type {
        NetworkType::Ipv4 | NetworkType::Ipv6 => GidType::RoceV2,
        NetworkType::RoceV1 => GidType::RoceV1,
        NetworkType::Ib => GidType::Ib,
    }
}

/// [`init_ah_attr_from_wc_with`] in the [word form](AttrWords) the AH cache
/// keys on, with `route_hop_limit` where the kernel leaves the hop limit to
/// the route ([`HopLimit::Route`]), validated as by
/// [`RdmaAhAttr::to_ah_attr`]: the kernel profile's entry point for
/// the pipeline ([`Profile::words`](super::Profile::words)).
///
/// The common case, a completion whose local GID is in the table (and, on
/// RoCE, whose address families agree), is one pass: the area read once
/// ([`View`], the header type included), the network type, one search, the
/// words; nothing after the read goes back to the area. Everything else
/// (every failure, the SA well-known GID, an SL above 15) goes out of line
/// to [`init_ah_attr_from_wc_with`], which decides it from a read of its
/// own (keeping the view alive across the search for it would cost the hot
/// path its registers). Any [`Completion`] ([`KernelWc`], or a backend's
/// completion type): the hot path takes the kernel view of `wc` in
/// registers, and only the cold path takes it again (so that the hot path
/// never writes the completion to memory for it).
#[inline(always)]
pub fn words<C: Completion + ?Sized, const N: usize>(
    table: &GidTable<N>,
    wc: &C,
    area: &Area,
    evidence: Evidence,
    route_hop_limit: u8,
) -> Result<AttrWords, ProfileError> {
    match hot(table, &wc.kernel(), area, evidence, route_hop_limit) {
        Some(w) => Ok(AttrWords::from_raw(w)),
        // Without evidence, no evidence to pass (a constant `evidence`
        // folds the choice away): the hot path does not write it to
        // memory either.
        None => match evidence {
            Evidence::None => cold_words(table, wc, area, Evidence::None, route_hop_limit),
            _ => cold_words(table, wc, area, evidence, route_hop_limit),
        },
    }
}

/// The hot path of [`words`]: the words of a successful call in canonical
/// form, or `None` for everything [`init_ah_attr_from_wc_with`] must decide.
/// Each step is the C mirror's, on register values.
#[inline(always)]
fn hot<const N: usize>(
    table: &GidTable<N>,
    wc: &KernelWc,
    area: &Area,
    evidence: Evidence,
    route_hop_limit: u8,
) -> Option<[u64; 4]> {
    let port = table.port_num();
    // The validation of `RdmaAhAttr::to_words`: a port of 0, an SL above 15.
    if port == 0 || wc.sl > 15 {
        return None;
    }
    // The area read once, in `wire`; the hot path goes on with the view.
    let v = &read(table, wc, area, evidence);
    let grh = wc.wc_flags & IB_WC_GRH != 0;
    match table.link_layer() {
        LinkLayer::Ethernet => {
            if !grh {
                return None;
            }
            let net_type = if wc.wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE != 0 {
                NetworkType::from_raw(wc.network_hdr_type)?
            } else {
                net_type_of(v, evidence)?
            };
            let is4 = net_type == NetworkType::Ipv4;
            let remote = if is4 { v.src4 } else { v.sgid };
            let local = if is4 { v.dst4 } else { v.dgid };
            let vlan = if wc.wc_flags & IB_WC_WITH_VLAN != 0 { wc.vlan_id } else { 0xffff };
            let gid_type = gid_type_of(net_type);
            // Link-local RoCE v1: the kernel derives the MAC from the GID,
            // hop limit 0xff, no family test. Otherwise the two addresses'
            // families must agree (`-EINVAL`, decided out of line); from the
            // IPv4 header both are IPv4-mapped by construction. Decided
            // before the search, without a branch per case.
            let ll = (net_type == NetworkType::RoceV1) & view::words_link_local(remote);
            // In the order of the likely answers: IPv4 (no test), then
            // the same family on both sides.
            if !is4 && view::words_ipv4_mapped(local) != view::words_ipv4_mapped(remote) && !ll {
                return None;
            }
            let index = table.find_kernel_words(local, gid_type, Some(vlan))?;
            let w2 = word2(v.flow_label(), index as u8, if ll { 0xff } else { route_hop_limit }, v.traffic_class());
            Some([remote.0, remote.1, w2, word3(0, wc.sl, 0, 0, true, port)])
        }
        LinkLayer::Infiniband | LinkLayer::Opa => {
            // IB keeps the low 16 bits of the SLID, OPA all 32 of which the
            // attribute's word keeps the same 16.
            let dlid = wc.slid as u16;
            if !grh {
                return Some([0, 0, 0, word3(dlid, wc.sl, wc.dlid_path_bits, 0, false, port)]);
            }
            // The SA well-known interface id takes slot 0: out of line.
            if Gid::from_words(v.dgid.0, v.dgid.1).interface_id() == SA_WELL_KNOWN_INTERFACE_ID {
                return None;
            }
            let index = table.find_kernel_words(v.dgid, GidType::Ib, None)?;
            let w2 = word2(v.flow_label(), index as u8, 0xff, v.traffic_class());
            Some([v.sgid.0, v.sgid.1, w2, word3(dlid, wc.sl, wc.dlid_path_bits, 0, true, port)])
        }
    }
}

/// Everything the hot path of [`words`] leaves: the C mirror, then its
/// validation.
#[cold]
#[inline(never)]
fn cold_words<C: Completion + ?Sized, const N: usize>(
    table: &GidTable<N>,
    wc: &C,
    area: &Area,
    evidence: Evidence,
    route_hop_limit: u8,
) -> Result<AttrWords, ProfileError> {
    let a = init_ah_attr_from_wc_with(table, &wc.kernel(), Some(area), evidence).map_err(ProfileError::Kernel)?;
    a.to_words(route_hop_limit).map_err(ProfileError::Attr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gid_table::GidEntry;
    use crate::wire::{GrhRepr, Ipv4Repr};

    /// The hop-limit and address-family rules of the hot path, case by case
    /// against the C mirror: a link-local RoCE v1 sender skips the family
    /// test (hop limit 0xff, even to an IPv4-mapped GID), other RoCE v1 and
    /// RoCE v2 / IPv6 senders of another family than the GID they wrote to
    /// are refused, RoCE v2 / IPv4 passes.
    #[test]
    fn hot_path_hop_limits_and_families_equal_the_c_mirror() {
        let ll = |b: u8| Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b]);
        let v6 = |b: u8| Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b]);
        let ours4 = [192, 168, 1, 10];
        let mut t: GidTable<8> = GidTable::new(1, LinkLayer::Ethernet, 8);
        for (i, (g, ty)) in [
            (ll(1), GidType::RoceV1),
            (Gid::from_ipv4(ours4), GidType::RoceV1),
            (Gid::from_ipv4(ours4), GidType::RoceV2),
            (v6(1), GidType::RoceV2),
            (v6(1), GidType::RoceV1),
        ]
        .into_iter()
        .enumerate()
        {
            t.set(i as u32, GidEntry::new(g, ty)).unwrap();
        }
        let grh = |nh: u8, sgid: Gid, dgid: Gid| {
            let mut area = [0u8; 40];
            GrhRepr { sgid, dgid, hop_limit: 9, next_header: nh, ..GrhRepr::default() }.emit(&mut area);
            area
        };
        let v4 = {
            let mut area = [0u8; 40];
            Ipv4Repr { ttl: 64, protocol: 17, src: [10, 0, 0, 1], dst: ours4, ..Default::default() }.emit(&mut area);
            area
        };
        let (v1, udp) = (0x1b, 17);
        let cases = [
            ("v1 link-local to v4-mapped", grh(v1, ll(2), Gid::from_ipv4(ours4)), true),
            ("v1 link-local to link-local", grh(v1, ll(2), ll(1)), true),
            ("v1 global to v4-mapped", grh(v1, v6(2), Gid::from_ipv4(ours4)), false),
            ("v1 global to global", grh(v1, v6(2), v6(1)), true),
            ("v1 v4-mapped to global", grh(v1, Gid::from_ipv4([10, 0, 0, 1]), v6(1)), false),
            ("v2/IPv6 v4-mapped to global", grh(udp, Gid::from_ipv4([10, 0, 0, 1]), v6(1)), false),
            ("v2/IPv6 global to global", grh(udp, v6(2), v6(1)), true),
            ("v2/IPv4", v4, true),
        ];
        let wc = KernelWc { wc_flags: IB_WC_GRH, ..KernelWc::default() };
        for (name, area, ok) in cases {
            let want = init_ah_attr_from_wc_with(&t, &wc, Some(&area), Evidence::None)
                .map_err(ProfileError::Kernel)
                .and_then(|a| a.to_words(7).map_err(ProfileError::Attr));
            assert_eq!(want.is_ok(), ok, "{name}: the mirror {want:?}");
            assert_eq!(words(&t, &wc, &area, Evidence::None, 7), want, "{name}");
        }
    }
}
