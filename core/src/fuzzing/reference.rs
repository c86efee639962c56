//! A plain reference model of both profiles, transcribed from
//! `shared/spec/SEMANTICS.md` §2–§4 (and, for the evidence-driven variants,
//! from the documented contract of [`crate::wire::detect::detect`]).
//!
//! It is deliberately written the obvious way and shares no logic with the
//! implementation it checks: every decision is an `if`, the checksums are the
//! textbook loops, and the GID searches are linear scans that read the table
//! only through [`GidTable::get`], [`GidTable::len`],
//! [`GidTable::port_num`], [`GidTable::link_layer`] and
//! [`GidTable::capacity`], one slot at a time, exactly as the C code queries
//! its GID table. Speed is not a goal; being easy to check against the spec
//! is. The only types it borrows from the core are the output and input
//! types, so that results can be compared with `==`.
//!
//! Section references (§) are to SEMANTICS.md.

use crate::ah::attr::{AhType, Dmac, HopLimit, IbvAhAttr, RdmaAhAttr};
use crate::ah::kernel::KernelFailure;
use crate::ah::libibverbs::IbvFailure;
use crate::ah::wc::{IbvWc, KernelWc};
use crate::error::{IbvError, KernelError};
use crate::gid_table::{GidTable, GidType, LinkLayer};
use crate::wire::{Area, Detection, Evidence, HeaderVersion, NetworkType};

// ---------------------------------------------------------------------------
// Byte helpers (§0.2 conventions: B[i], BE32).

/// `BE32(i)`.
fn be32(b: &Area, i: usize) -> u32 {
    (u32::from(b[i]) << 24) | (u32::from(b[i + 1]) << 16) | (u32::from(b[i + 2]) << 8) | u32::from(b[i + 3])
}

/// The 16 bytes `B[start..start + 16]`.
fn sixteen(b: &Area, start: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    for (k, out) in g.iter_mut().enumerate() {
        *out = b[start + k];
    }
    g
}

/// `::ffff:` followed by the IPv4 address `B[start..start + 4]` (§7.4).
fn v4_mapped(b: &Area, start: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12] = b[start];
    g[13] = b[start + 1];
    g[14] = b[start + 2];
    g[15] = b[start + 3];
    g
}

/// Whether a GID is IPv4-mapped: ten zero bytes, then `ff ff` (§7.4).
fn is_v4_mapped(g: &[u8; 16]) -> bool {
    for &x in &g[0..10] {
        if x != 0 {
            return false;
        }
    }
    g[10] == 0xff && g[11] == 0xff
}

// ---------------------------------------------------------------------------
// §2.3 The two checksums over the would-be IPv4 header B[20..40].

/// The RFC 1071 checksum of `B[20..40]` with the checksum field `B[30..32]`
/// taken as zero, fully folded (the kernel's `ip_fast_csum`).
pub fn checksum_rfc1071(b: &Area) -> u16 {
    let mut sum: u32 = 0;
    for word in 0..10 {
        if word == 5 {
            continue; // the checksum field
        }
        let hi = u32::from(b[20 + 2 * word]);
        let lo = u32::from(b[20 + 2 * word + 1]);
        sum += (hi << 8) | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// libibverbs' `ipv4_calc_hdr_csum` on x86-64: little-endian words, one fold.
pub fn checksum_libibverbs(b: &Area) -> u16 {
    let mut sum: u32 = 0;
    for word in 0..10 {
        if word == 5 {
            continue;
        }
        let first = u32::from(b[20 + 2 * word]);
        let second = u32::from(b[20 + 2 * word + 1]);
        sum += first | (second << 8);
    }
    let folded = (sum & 0xffff) + (sum >> 16);
    (!folded & 0xffff) as u16
}

/// §2.2 `get_grh_header_version`.
pub fn header_version_libibverbs(b: &Area) -> HeaderVersion {
    if b[0] >> 4 != 6 {
        if b[20] >> 4 == 4 { HeaderVersion::Ipv4 } else { HeaderVersion::Neither }
    } else if b[20] & 0x0f != 5 {
        HeaderVersion::Ipv6
    } else {
        // Compared with the stored field read the same (little-endian) way.
        let stored = u16::from(b[30]) | (u16::from(b[31]) << 8);
        if checksum_libibverbs(b) == stored { HeaderVersion::Ipv4 } else { HeaderVersion::Ipv6 }
    }
}

/// Whether the stored checksum (big-endian) equals the RFC value bit-exactly.
fn rfc_checksum_ok(b: &Area) -> bool {
    let stored = (u16::from(b[30]) << 8) | u16::from(b[31]);
    checksum_rfc1071(b) == stored
}

/// §2.4 `ib_get_rdma_header_version`: same structure, RFC checksum, "neither"
/// is the value 0.
pub fn header_version_kernel(b: &Area) -> HeaderVersion {
    if b[0] >> 4 != 6 {
        if b[20] >> 4 == 4 { HeaderVersion::Ipv4 } else { HeaderVersion::Neither }
    } else if b[20] & 0x0f != 5 {
        HeaderVersion::Ipv6
    } else if rfc_checksum_ok(b) {
        HeaderVersion::Ipv4
    } else {
        HeaderVersion::Ipv6
    }
}

/// §2.4 `ib_get_net_type_by_grh` on a RoCE port.
pub fn net_type_by_grh(b: &Area) -> NetworkType {
    if header_version_kernel(b) == HeaderVersion::Ipv4 {
        NetworkType::Ipv4
    } else if b[6] == 17 {
        NetworkType::Ipv6
    } else {
        NetworkType::RoceV1
    }
}

/// The strict detection with evidence, transcribed from the table in the
/// documentation of [`crate::wire::detect::detect`] (as amended by commit
/// ae16f4c: with evidence an IPv4 header needs only its shape).
pub fn detect(b: &Area, evidence: Evidence) -> Detection {
    let version6 = b[0] >> 4 == 6;
    let grh_fits = version6 && b[6] == 0x1b;
    let ip6_fits = version6 && b[6] == 17;
    // An IPv4 header "fits" with version 4 and IHL 5; without evidence it
    // must also carry a correct RFC 1071 checksum. With evidence the shape is
    // enough (commit ae16f4c: irdma writes a zero checksum field).
    let ip4_fits = if matches!(evidence, Evidence::None) { b[20] == 0x45 && rfc_checksum_ok(b) } else { b[20] == 0x45 };
    match evidence {
        Evidence::None => {
            if (grh_fits || ip6_fits) && ip4_fits {
                Detection::Ambiguous
            } else if ip4_fits {
                Detection::Ipv4
            } else if grh_fits {
                Detection::Grh
            } else if ip6_fits {
                Detection::Ipv6
            } else {
                Detection::Unrecognized
            }
        }
        Evidence::NetworkType(NetworkType::Ib) | Evidence::NetworkType(NetworkType::RoceV1) => {
            if grh_fits {
                Detection::Grh
            } else {
                Detection::Ambiguous
            }
        }
        Evidence::NetworkType(NetworkType::Ipv6) => {
            if ip6_fits {
                Detection::Ipv6
            } else {
                Detection::Ambiguous
            }
        }
        Evidence::NetworkType(NetworkType::Ipv4) => {
            if ip4_fits {
                Detection::Ipv4
            } else {
                Detection::Ambiguous
            }
        }
        Evidence::Stamped(stamp) => {
            let mut intact = true;
            for (k, &x) in stamp.bytes().iter().enumerate() {
                if b[k] != x {
                    intact = false;
                }
            }
            // A front the NIC zeroed (rxe) is no GRH/IPv6 header: IPv4
            // evidence, as an intact stamp.
            let zeroed = b[..20].iter().all(|&x| x == 0);
            if intact || zeroed {
                if ip4_fits { Detection::Ipv4 } else { Detection::Ambiguous }
            } else if grh_fits {
                Detection::Grh
            } else if ip6_fits {
                Detection::Ipv6
            } else {
                Detection::Ambiguous
            }
        }
    }
}

// ---------------------------------------------------------------------------
// §1.3 / §3.2 libibverbs' view of the GID table and its search.

/// One `ibv_query_gid` + `ibv_query_gid_type` pair (§1.3): `None` when the
/// query fails (port 0 or not the table's port, or index at or past the table
/// length), else the GID and whether the sysfs type is RoCE v2 (IB and RoCE v1
/// both read as `IB_ROCE_V1`). An empty slot reads as the zero GID with type
/// IB/RoCE v1.
pub fn ibv_query_gid<const N: usize>(table: &GidTable<N>, port: u8, index: u32) -> Option<([u8; 16], bool)> {
    if port == 0 || port != table.port_num() {
        return None;
    }
    if index >= table.len() {
        return None;
    }
    match table.get(index) {
        Some(entry) => Some((entry.gid.0, entry.gid_type == GidType::RoceV2)),
        None => Some(([0u8; 16], false)),
    }
}

/// §3.2 `ibv_find_gid_index`: index 0, 1, 2, … until a match or a failing
/// query. The returned index is untruncated.
///
/// One shortcut keeps it fast on huge `gid_tbl_len` values: from index
/// `capacity()` on, every slot of the snapshot is empty (it cannot hold
/// them), so the rest of the scan either matches at once (a zero GID searched
/// as IB/RoCE v1) or runs to the end of the table without a match.
pub fn ibv_find_gid_index<const N: usize>(table: &GidTable<N>, port: u8, gid: &[u8; 16], want_v2: bool) -> Option<u32> {
    let mut i: u32 = 0;
    loop {
        let (slot_gid, slot_v2) = ibv_query_gid(table, port, i)?;
        if slot_gid == *gid && slot_v2 == want_v2 {
            return Some(i);
        }
        if i as usize >= table.capacity() {
            // Slot i was empty and did not match; so will every later one.
            return None;
        }
        i += 1;
    }
}

/// §3.1 `ibv_init_ah_from_wc`, with the header type taken from `evidence`
/// through [`detect`] when it is not `Evidence::None` (`Ipv4` → IPv4 branch,
/// `Grh`/`Ipv6` → IPv6 branch, anything else → `AmbiguousHeader` with
/// `is_global` set and nothing else written). A missing area is
/// `MissingGrh` with an all-zero attribute (C memsets, then faults).
pub fn libibverbs_init_ah_from_wc<const N: usize>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: Option<&Area>,
    evidence: Evidence,
) -> Result<IbvAhAttr, IbvFailure> {
    // Step 1: zero.
    let mut attr = IbvAhAttr::default();
    let Some(b) = area else {
        return Err(IbvFailure { error: IbvError::MissingGrh, attr });
    };
    // Step 2: generic fields, before the flag is looked at.
    attr.grh.flow_label = be32(b, 0) & 0x000f_ffff;
    attr.dlid = wc.slid;
    attr.sl = wc.sl;
    attr.src_path_bits = wc.dlid_path_bits;
    attr.port_num = port_num;
    // Step 3.
    if wc.wc_flags & 1 == 0 {
        return Ok(attr);
    }
    // Step 4.
    attr.is_global = 1;
    // Step 5.
    let ipv4 = match evidence {
        Evidence::None => match header_version_libibverbs(b) {
            HeaderVersion::Ipv4 => true,
            HeaderVersion::Ipv6 => false,
            HeaderVersion::Neither => {
                return Err(IbvFailure { error: IbvError::UnknownHeaderVersion, attr });
            }
        },
        _ => match detect(b, evidence) {
            Detection::Ipv4 => true,
            Detection::Grh | Detection::Ipv6 => false,
            Detection::Ambiguous | Detection::Unrecognized => {
                return Err(IbvFailure { error: IbvError::AmbiguousHeader, attr });
            }
        },
    };
    if ipv4 {
        // Step 6.1: class D destination.
        if b[36] & 0xf0 == 0xe0 {
            return Err(IbvFailure { error: IbvError::MulticastDestination, attr });
        }
        // Step 6.2.
        let local = v4_mapped(b, 36);
        let Some(index) = ibv_find_gid_index(table, port_num, &local, true) else {
            return Err(IbvFailure { error: IbvError::GidNotFound, attr });
        };
        // Step 6.3.
        attr.grh.dgid = v4_mapped(b, 32);
        attr.grh.sgid_index = index as u8;
        attr.grh.hop_limit = b[28];
        attr.grh.traffic_class = b[21];
        Ok(attr)
    } else {
        // Step 7.1.
        if b[24] == 0xff {
            return Err(IbvFailure { error: IbvError::MulticastDestination, attr });
        }
        // Step 7.2: written before the next checks.
        attr.grh.dgid = sixteen(b, 8);
        // Step 7.3.
        let want_v2 = if b[6] == 0x11 {
            true
        } else if b[6] == 0x1b {
            false
        } else {
            return Err(IbvFailure { error: IbvError::UnknownNextHeader(b[6]), attr });
        };
        // Step 7.4.
        let local = sixteen(b, 24);
        let Some(index) = ibv_find_gid_index(table, port_num, &local, want_v2) else {
            return Err(IbvFailure { error: IbvError::GidNotFound, attr });
        };
        // Step 7.5.
        attr.grh.sgid_index = index as u8;
        attr.grh.hop_limit = b[7];
        attr.grh.traffic_class = ((be32(b, 0) >> 20) & 0xff) as u8;
        Ok(attr)
    }
}

// ---------------------------------------------------------------------------
// §4 The kernel.

/// §4.2 `rdma_find_gid_by_filter` / `rdma_find_gid_by_port`: the lowest valid
/// entry with this GID, exactly this type and, with `vlan` `Some`, this
/// VLAN id (an entry not on a VLAN reports 0xFFFF). Empty slots are skipped.
pub fn kernel_find_gid<const N: usize>(
    table: &GidTable<N>,
    gid: &[u8; 16],
    gid_type: GidType,
    vlan: Option<u16>,
) -> Option<u32> {
    let mut i: u32 = 0;
    while i < table.len() && (i as usize) < table.capacity() {
        if let Some(entry) = table.get(i) {
            let vlan_ok = match vlan {
                None => true,
                Some(v) => entry.vlan.unwrap_or(0xffff) == v,
            };
            if entry.gid.0 == *gid && entry.gid_type == gid_type && vlan_ok {
                return Some(i);
            }
        }
        i += 1;
    }
    None
}

/// §4.1 `ib_init_ah_attr_from_wc` for the port described by `table`.
///
/// On a RoCE port whose completion lacks `IB_WC_WITH_NETWORK_HDR_TYPE` and
/// when `evidence` is not `Evidence::None`, the network type comes from
/// [`detect`] (`Ipv4` → IPV4, `Ipv6` → IPV6, `Grh` → ROCE_V1, anything else →
/// `AmbiguousHeader` with only `type` written). A missing area where the
/// kernel would read it is `MissingGrh` with only `type` written.
/// Route-dependent results are symbolic (`HopLimit::Route`, `Dmac::Resolve`),
/// except the host-independent address-family check (§4.3).
pub fn kernel_init_ah_attr_from_wc<const N: usize>(
    table: &GidTable<N>,
    wc: &KernelWc,
    area: Option<&Area>,
    evidence: Evidence,
) -> Result<RdmaAhAttr, KernelFailure> {
    const IB_WC_GRH: u32 = 1;
    const IB_WC_WITH_VLAN: u32 = 32;
    const IB_WC_WITH_NETWORK_HDR_TYPE: u32 = 64;

    // Step 1: zero, then the type from the port.
    let mut attr = RdmaAhAttr::default();
    let roce = table.link_layer() == LinkLayer::Ethernet;
    attr.ah_type = match table.link_layer() {
        LinkLayer::Ethernet => AhType::Roce,
        LinkLayer::Infiniband => AhType::Ib,
        LinkLayer::Opa => AhType::Opa,
    };
    // The zeroed union: IB/OPA have a dlid and path bits, RoCE a MAC.
    if roce {
        attr.roce = Some(Dmac::Mac([0; 6]));
    } else {
        attr.dlid = Some(0);
        attr.src_path_bits = Some(0);
    }

    // Step 2: network type and GID type.
    let net_type: u8 = if !roce {
        0 // RDMA_NETWORK_IB
    } else if wc.wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE != 0 {
        wc.network_hdr_type
    } else {
        let Some(b) = area else {
            return Err(KernelFailure { error: KernelError::MissingGrh, attr });
        };
        match evidence {
            Evidence::None => net_type_by_grh(b) as u8,
            _ => match detect(b, evidence) {
                Detection::Ipv4 => 2,
                Detection::Ipv6 => 3,
                Detection::Grh => 1,
                Detection::Ambiguous | Detection::Unrecognized => {
                    return Err(KernelFailure { error: KernelError::AmbiguousHeader, attr });
                }
            },
        }
    };
    let gid_type = if net_type == 2 || net_type == 3 {
        GidType::RoceV2
    } else if net_type == 1 {
        GidType::RoceV1
    } else {
        GidType::Ib
    };

    // Step 3: the two GIDs (commit 8aaa848eaddd: above 3 is -EINVAL first).
    if net_type > 3 {
        return Err(KernelFailure { error: KernelError::InvalidNetworkType(net_type), attr });
    }
    let Some(b) = area else {
        return Err(KernelFailure { error: KernelError::MissingGrh, attr });
    };
    let (remote, local) =
        if net_type == 2 { (v4_mapped(b, 32), v4_mapped(b, 36)) } else { (sixteen(b, 8), sixteen(b, 24)) };

    // Step 4.
    attr.sl = wc.sl;
    attr.port_num = u32::from(table.port_num());
    let w0 = be32(b, 0);

    if roce {
        // Step 5.1.
        let vlan = if wc.wc_flags & IB_WC_WITH_VLAN != 0 { wc.vlan_id } else { 0xffff };
        // Step 5.2.
        if wc.wc_flags & IB_WC_GRH == 0 {
            return Err(KernelFailure { error: KernelError::NoGrhOnRoce, attr });
        }
        // Step 5.3.
        let Some(index) = kernel_find_gid(table, &local, gid_type, Some(vlan)) else {
            return Err(KernelFailure { error: KernelError::GidNotFound, attr });
        };
        let Some(entry) = table.get(index) else {
            panic!("reference model: kernel_find_gid returned empty slot {index}");
        };
        // Step 5.4.
        attr.grh.dgid.0 = remote;
        attr.grh.flow_label = w0 & 0x000f_ffff;
        attr.grh.traffic_class = ((w0 >> 20) & 0xff) as u8;
        attr.grh.hop_limit = HopLimit::Value(0xff);
        attr.grh.sgid_index = index as u8;
        attr.grh.sgid_attr_index = Some(index);
        attr.ah_flags = 1;
        // Step 5.5 / §4.3.1: link-local RoCE v1 shortcut.
        let link_local = remote[0] == 0xfe && remote[1] == 0x80 && remote[2..8] == [0, 0, 0, 0, 0, 0];
        if link_local && entry.gid_type == GidType::RoceV1 {
            attr.roce = Some(Dmac::Mac([remote[8] ^ 0x02, remote[9], remote[10], remote[13], remote[14], remote[15]]));
            return Ok(attr);
        }
        // §4.3.2: the address-family check of rdma_resolve_ip.
        if is_v4_mapped(&entry.gid.0) != is_v4_mapped(&remote) {
            attr.grh.sgid_attr_index = None;
            return Err(KernelFailure { error: KernelError::AddressFamilyMismatch, attr });
        }
        attr.grh.hop_limit = HopLimit::Route;
        attr.roce = Some(Dmac::Resolve);
        Ok(attr)
    } else {
        // Step 6.1.
        attr.dlid = Some(if table.link_layer() == LinkLayer::Infiniband { wc.slid & 0xffff } else { wc.slid });
        attr.src_path_bits = Some(wc.dlid_path_bits);
        // Step 6.2.
        if wc.wc_flags & IB_WC_GRH == 0 {
            return Ok(attr);
        }
        // Step 6.3.
        let index = if local[8..16] == [0x02, 0, 0, 0, 0, 0, 0, 0x02] {
            let slots: u32 = table.len();
            if slots == 0 {
                return Err(KernelFailure { error: KernelError::NoGidSlots, attr });
            }
            if table.get(0).is_none() {
                return Err(KernelFailure { error: KernelError::WellKnownSlotEmpty, attr });
            }
            0
        } else {
            match kernel_find_gid(table, &local, GidType::Ib, None) {
                Some(i) => i,
                None => return Err(KernelFailure { error: KernelError::GidNotFound, attr }),
            }
        };
        // Step 6.4.
        attr.grh.dgid.0 = remote;
        attr.grh.flow_label = w0 & 0x000f_ffff;
        attr.grh.traffic_class = ((w0 >> 20) & 0xff) as u8;
        attr.grh.hop_limit = HopLimit::Value(0xff);
        attr.grh.sgid_index = index as u8;
        attr.grh.sgid_attr_index = Some(index);
        attr.ah_flags = 1;
        Ok(attr)
    }
}
