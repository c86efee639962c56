//! The switch: what a send is checked against (route, Q_Key, MAC, VLAN, source GID, P_Key) and the packet and completion it delivers.

use super::*;

pub(super) enum Drop {
    NoRoute,
    Qkey,
    Mac,
    Vlan,
    Sgid,
    Pkey,
}

/// What the switch learned about a send before building the packet.
pub(super) struct Plan {
    src_ll: LinkLayer,
    src_lid: u16,
    src_lmc: u8,
    src_mac: [u8; 6],
    dst_lid: u16,
    dst_mac: [u8; 6],
    dst_lmc: u8,
    quirks: Quirks,
    last_front: [u8; 20],
    stamp: Option<[u8; 20]>,
    sgid: Option<GidEntry>,
    dentry: Option<GidEntry>,
    dst_pkey_index: u16,
}

/// Whether two P_Keys admit each other (IBA 10.9.3): the same 15-bit base,
/// and at least one of them a full member (bit 15).
pub(super) fn pkeys_match(a: u16, b: u16) -> bool {
    a & 0x7fff == b & 0x7fff && (a | b) & 0x8000 != 0
}

pub(super) fn plan(
    s: &State,
    src: Qpn,
    src_port: PortId,
    a: &AhState,
    remote_qpn: Qpn,
    remote_qkey: u32,
) -> Result<Plan, Drop> {
    let sp = s.port(src_port).ok_or(Drop::NoRoute)?;
    if !sp.active {
        return Err(Drop::NoRoute);
    }
    let q = s.qp(remote_qpn).ok_or(Drop::NoRoute)?;
    if q.qkey != remote_qkey {
        return Err(Drop::Qkey);
    }
    let dp = s.port(q.port).ok_or(Drop::NoRoute)?;
    if !dp.active || (dp.cfg.link_layer == LinkLayer::Ethernet) != (sp.cfg.link_layer == LinkLayer::Ethernet) {
        return Err(Drop::NoRoute);
    }
    let src_pkey = s.qp(src).and_then(|sq| sp.cfg.pkeys.get(usize::from(sq.pkey_index))).copied();
    let dst_pkey = dp.cfg.pkeys.get(usize::from(q.pkey_index)).copied();
    match (src_pkey, dst_pkey) {
        (Some(x), Some(y)) if pkeys_match(x, y) => {}
        _ => return Err(Drop::Pkey),
    }
    let sgid = match a.attr.grh {
        Some(g) => Some(sp.table.get(usize::from(g.sgid_index)).copied().flatten().ok_or(Drop::Sgid)?),
        None => None,
    };
    // The destination accepts the packet on an entry with the address on the
    // sender's VLAN; an address configured only on other VLANs is a VLAN drop.
    let dentry = match (a.attr.grh, sgid) {
        (Some(g), Some(sg)) => {
            let mut with_gid = dp.table.iter().flatten().filter(|e| e.gid == g.dgid).peekable();
            if with_gid.peek().is_none() {
                None
            } else {
                Some(with_gid.find(|e| e.vlan == sg.vlan).copied().ok_or(Drop::Vlan)?)
            }
        }
        _ => None,
    };
    Ok(Plan {
        src_ll: sp.cfg.link_layer,
        src_lid: sp.cfg.lid,
        src_lmc: sp.cfg.lmc,
        src_mac: sp.cfg.mac,
        dst_lid: dp.cfg.lid,
        dst_mac: dp.cfg.mac,
        dst_lmc: dp.cfg.lmc,
        quirks: dp.cfg.quirks,
        last_front: q.last_front,
        stamp: q.stamp,
        sgid,
        dentry,
        dst_pkey_index: q.pkey_index,
    })
}

pub(super) fn route(
    s: &mut State,
    src: Qpn,
    src_port: PortId,
    a: &AhState,
    remote_qpn: Qpn,
    remote_qkey: u32,
    payload: &[u8],
) -> Result<(), Drop> {
    let p = plan(s, src, src_port, a, remote_qpn, remote_qkey)?;
    let mut wc = MockWc {
        ibv: IbvWc { src_qp: src.0, pkey_index: p.dst_pkey_index, ..IbvWc::default() },
        byte_len: (payload.len() + 40) as u32,
        ..MockWc::default()
    };
    let mut area: Area = [0; 40];
    // Bytes the NIC does not write: the consumer's stamp, or what the buffer held.
    area[..20].copy_from_slice(&p.stamp.unwrap_or(p.last_front));
    let paylen = (payload.len() + 12 + 4) as u16; // BTH + DETH + ICRC
    // The addresses of a packet with a GRH, for a NIC that reports them.
    let mut source = None;

    if p.src_ll != LinkLayer::Ethernet {
        // InfiniBand: switched by DLID.
        let span = 1u32 << p.dst_lmc;
        let dlid = u32::from(a.attr.dlid);
        if dlid < u32::from(p.dst_lid) || dlid >= u32::from(p.dst_lid) + span {
            return Err(Drop::NoRoute);
        }
        let smask = (1u16 << p.src_lmc) - 1;
        wc.ibv.slid = p.src_lid | (u16::from(a.attr.src_path_bits) & smask);
        wc.ibv.dlid_path_bits = (dlid - u32::from(p.dst_lid)) as u8;
        wc.ibv.sl = a.attr.sl.get();
        if let (Some(g), Some(sgid)) = (a.attr.grh, p.sgid) {
            GrhRepr {
                traffic_class: g.traffic_class,
                flow_label: g.flow_label.get(),
                payload_len: paylen,
                next_header: 0x1b,
                hop_limit: g.hop_limit,
                sgid: sgid.gid,
                dgid: g.dgid,
            }
            .emit(&mut area);
            source = Some(SourceAddress { sgid: sgid.gid, dgid: g.dgid, network: NetworkType::Ib });
            wc.ibv.wc_flags |= IBV_WC_GRH;
            wc.kernel_flags |= IB_WC_GRH;
        }
    } else {
        // RoCE: switched by address, MAC and VLAN.
        let (Some(g), Some(sgid)) = (a.attr.grh, p.sgid) else { return Err(Drop::NoRoute) };
        let dentry = p.dentry.ok_or(Drop::NoRoute)?;
        let l2 = a.l2.unwrap_or_default();
        if l2.dmac != p.dst_mac {
            return Err(Drop::Mac);
        }
        if sgid.vlan != dentry.vlan {
            return Err(Drop::Vlan);
        }
        let hop = l2.hop_limit.unwrap_or(g.hop_limit);
        let v4 = sgid.gid.is_ipv4_mapped() && g.dgid.is_ipv4_mapped();
        let net = if sgid.gid_type != GidType::RoceV2 {
            NetworkType::RoceV1
        } else if v4 {
            NetworkType::Ipv4
        } else {
            NetworkType::Ipv6
        };
        let quirks = p.quirks;
        if net == NetworkType::Ipv4 {
            let front: [u8; 20] = match (p.stamp, quirks.front_fill) {
                _ if quirks.rxe_zero_front => [0; 20],
                (Some(stamp), _) => stamp,
                (None, FrontFill::Zero) => [0; 20],
                (None, FrontFill::Stale) => p.last_front,
                (None, FrontFill::Random | FrontFill::Ipv6Looking) => {
                    let mut f = [0u8; 20];
                    for c in f.chunks_mut(8) {
                        let r = s.next_random().to_le_bytes();
                        c.copy_from_slice(&r[..c.len()]);
                    }
                    if quirks.front_fill == FrontFill::Ipv6Looking {
                        f[0] = 0x60 | (f[0] & 0x0f);
                        f[6] = 17;
                    }
                    f
                }
            };
            area[..20].copy_from_slice(&front);
            s.ident = s.ident.wrapping_add(1);
            Ipv4Repr {
                tos: g.traffic_class,
                total_len: 20 + 8 + paylen,
                ident: s.ident,
                flags_frag: 0x4000,
                ttl: hop,
                protocol: 17,
                src: sgid.gid.ipv4().unwrap_or_default(),
                dst: g.dgid.ipv4().unwrap_or_default(),
            }
            .emit(&mut area);
            if quirks.irdma_zero_ipv4_checksum {
                area[30] = 0;
                area[31] = 0;
            }
        } else {
            GrhRepr {
                traffic_class: g.traffic_class,
                flow_label: g.flow_label.get(),
                payload_len: paylen + if net == NetworkType::Ipv6 { 8 } else { 0 },
                next_header: if net == NetworkType::Ipv6 { 17 } else { 0x1b },
                hop_limit: hop,
                sgid: sgid.gid,
                dgid: g.dgid,
            }
            .emit(&mut area);
        }
        source = Some(SourceAddress { sgid: sgid.gid, dgid: g.dgid, network: net });
        wc.smac = p.src_mac;
        wc.ibv.wc_flags |= IBV_WC_GRH;
        wc.kernel_flags |= IB_WC_GRH | IB_WC_WITH_SMAC;
        if let Some(t) = l2.vlan_tag.filter(|_| sgid.vlan.is_some()) {
            wc.ibv.sl = (t >> 13) as u8;
            if t & 0x0fff != 0 {
                wc.kernel_flags |= IB_WC_WITH_VLAN;
                wc.vlan_id = t & 0x0fff;
            }
        }
        if quirks.mlx5_sl_packet_type {
            wc.ibv.sl = match net {
                NetworkType::Ipv6 => 1,
                NetworkType::Ipv4 => 2,
                _ => 0,
            };
        }
        if quirks.report_network_type {
            wc.kernel_flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
            wc.network_hdr_type = net as u8;
        }
    }
    if p.quirks.gid_in_completion && wc.ibv.wc_flags & IBV_WC_GRH != 0 {
        // The addresses go in the completion; the area is not written.
        area = [GID_IN_COMPLETION_FILL; 40];
    } else {
        source = None;
    }
    let q = s.qp_mut(remote_qpn).ok_or(Drop::NoRoute)?;
    q.last_front.copy_from_slice(&area[..20]);
    q.rq.push_back(Received { wc, area, payload: payload.to_vec(), source });
    Ok(())
}
