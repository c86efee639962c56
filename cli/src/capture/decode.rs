//! Frame decoding: from one captured frame of a known link type to what the
//! receiving NIC hands a UD consumer ([`UdPacket`]), or the reason the frame
//! is not a UD packet ([`Skip`]) or cannot be decoded ([`FrameError`]).
//!
//! The outer layers (Ethernet, 802.1Q/802.1ad tags, Linux cooked capture,
//! IPv4, IPv6, UDP) are sliced by `etherparse`; the ERF record header is
//! parsed here; the InfiniBand headers (LRH, BTH, DETH) by
//! [`udah_core::wire::lrh`] and [`udah_core::wire::bth`].

use core::fmt;

use etherparse::{EtherType, IpNumber, LaxLinkExtSlice, LaxNetSlice, LaxSlicedPacket, TransportSlice};
use udah_core::ah::{
    IB_WC_GRH, IB_WC_WITH_NETWORK_HDR_TYPE, IB_WC_WITH_VLAN, IBV_WC_GRH, IBV_WC_WITH_IMM, IbvWc, KernelWc,
};
use udah_core::wire::bth::{self, BthMalformed, BthRepr, DethRepr};
use udah_core::wire::lrh::{self, Lnh, LrhMalformed, LrhRepr};
use udah_core::wire::{Area, Gid, NetworkType, grh};

/// pcap/pcapng link types this module decodes.
pub mod linktype {
    /// `LINKTYPE_ETHERNET`.
    pub const ETHERNET: u32 = 1;
    /// `LINKTYPE_LINUX_SLL` (Linux cooked capture v1).
    pub const LINUX_SLL: u32 = 113;
    /// `LINKTYPE_ERF` (Endace Extensible Record Format).
    pub const ERF: u32 = 197;
    /// `LINKTYPE_INFINIBAND`: raw InfiniBand packets starting with the LRH.
    pub const INFINIBAND: u32 = 247;
    /// `LINKTYPE_LINUX_SLL2` (Linux cooked capture v2).
    pub const LINUX_SLL2: u32 = 276;
}

/// The RoCE v2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;
/// The RoCE v1 Ethertype.
pub const ROCE_V1_ETHERTYPE: u16 = 0x8915;

/// ERF record types that matter here.
pub mod erf_type {
    /// `ERF_TYPE_ETH`.
    pub const ETH: u8 = 2;
    /// `ERF_TYPE_COLOR_ETH`.
    pub const COLOR_ETH: u8 = 11;
    /// `ERF_TYPE_DSM_COLOR_ETH`.
    pub const DSM_COLOR_ETH: u8 = 16;
    /// `ERF_TYPE_COLOR_HASH_ETH`.
    pub const COLOR_HASH_ETH: u8 = 20;
    /// `ERF_TYPE_INFINIBAND`: the LRH follows the record header.
    pub const INFINIBAND: u8 = 21;
    /// `ERF_TYPE_INFINIBAND_LINK`: the LRH follows the record header.
    pub const INFINIBAND_LINK: u8 = 25;
    /// `ERF_TYPE_PAD`: a padding record, no packet.
    pub const PAD: u8 = 48;
}

/// Length of the ERF record header.
pub const ERF_HEADER_LEN: usize = 16;

/// How the packet reached the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encap {
    /// Native InfiniBand without a GRH (LNH = 2).
    Ib,
    /// Native InfiniBand with a GRH (LNH = 3).
    IbGrh,
    /// RoCE v1 (Ethertype 0x8915, GRH).
    RoceV1,
    /// RoCE v2 over IPv4 (UDP 4791).
    RoceV2Ipv4,
    /// RoCE v2 over IPv6 (UDP 4791).
    RoceV2Ipv6,
}

impl Encap {
    /// The network type the NIC reports with the completion.
    pub const fn network_type(self) -> NetworkType {
        match self {
            Encap::Ib | Encap::IbGrh => NetworkType::Ib,
            Encap::RoceV1 => NetworkType::RoceV1,
            Encap::RoceV2Ipv4 => NetworkType::Ipv4,
            Encap::RoceV2Ipv6 => NetworkType::Ipv6,
        }
    }

    /// Whether the packet came over Ethernet (RoCE).
    pub const fn is_roce(self) -> bool {
        matches!(self, Encap::RoceV1 | Encap::RoceV2Ipv4 | Encap::RoceV2Ipv6)
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encap::Ib => "IB",
            Encap::IbGrh => "IB+GRH",
            Encap::RoceV1 => "RoCEv1",
            Encap::RoceV2Ipv4 => "RoCEv2/IPv4",
            Encap::RoceV2Ipv6 => "RoCEv2/IPv6",
        })
    }
}

/// The sender of a packet, as the receiver can tell: its GID when the
/// packet has a GRH or an IP header, else its LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    /// A GID (an IPv4 source appears as `::ffff:a.b.c.d`).
    Gid(Gid),
    /// A LID (InfiniBand without GRH).
    Lid(u16),
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Gid(g) => match g.ipv4() {
                Some([a, b, c, d]) => write!(f, "{a}.{b}.{c}.{d}"),
                None => write!(f, "{g}"),
            },
            Peer::Lid(l) => write!(f, "LID {l}"),
        }
    }
}

/// Options of the decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeOptions {
    /// What bytes 0..20 of the area hold for RoCE v2 over IPv4, where the
    /// NIC writes nothing (whatever the buffer held before).
    pub ipv4_front: [u8; 20],
}

/// The front of a RoCE v2/IPv4 area that looks like an IPv6 header (version
/// 6, next header UDP, hop limit 64, addresses zero): what a buffer that
/// last held a RoCE v2/IPv6 packet may still contain. It drives the
/// IPv4-checksum path of libibverbs' header detection.
pub const V6PAD_FRONT: [u8; 20] = [0x60, 0, 0, 0, 0, 0, 0x11, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// A UD packet as the receiver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdPacket {
    /// The encapsulation.
    pub encap: Encap,
    /// The 40 bytes the NIC writes in front of the payload: the GRH (IB,
    /// RoCE v1; zero for IB without GRH), the IPv6 header, or the options'
    /// front followed by the IPv4 header.
    pub area: Area,
    /// The completion's libibverbs fields: `wc_flags` (`IBV_WC_GRH`,
    /// `IBV_WC_WITH_IMM`), `slid` and `sl` (from the LRH on IB; `sl` is the
    /// VLAN priority on RoCE), `src_qp` (from the DETH). `dlid_path_bits`
    /// and `pkey_index` are 0: they depend on the receiver's LMC and P_Key
    /// table, which a capture does not show.
    pub wc: IbvWc,
    /// The innermost VLAN id (RoCE over 802.1Q/802.1ad), if tagged.
    pub vlan: Option<u16>,
    /// The BTH partition key.
    pub pkey: u16,
    /// The DETH queue key.
    pub qkey: u32,
    /// The BTH destination QP.
    pub dest_qp: u32,
    /// The LRH destination LID (IB).
    pub dlid: Option<u16>,
    /// The source MAC (RoCE over Ethernet).
    pub smac: Option<[u8; 6]>,
}

impl UdPacket {
    /// The sender.
    pub fn source(&self) -> Peer {
        match self.encap {
            Encap::Ib => Peer::Lid(self.wc.slid),
            Encap::RoceV2Ipv4 => {
                let [.., s0, s1, s2, s3, _, _, _, _] = self.area;
                Peer::Gid(Gid::from_ipv4([s0, s1, s2, s3]))
            }
            _ => Peer::Gid(grh::sgid(&self.area)),
        }
    }

    /// The receiver's own address: the GID its table must hold for the AH to
    /// be built (IPv4 destination as `::ffff:a.b.c.d`, or the GRH / IPv6
    /// destination). `None` for IB without a GRH, where no GID is looked up.
    pub fn destination(&self) -> Option<Gid> {
        match self.encap {
            Encap::Ib => None,
            Encap::RoceV2Ipv4 => {
                let [.., d0, d1, d2, d3] = self.area;
                Some(Gid::from_ipv4([d0, d1, d2, d3]))
            }
            _ => Some(grh::dgid(&self.area)),
        }
    }

    /// The completion as the kernel reports it: `IB_WC_GRH`, and on RoCE the
    /// network header type and the VLAN.
    pub fn kernel_wc(&self) -> KernelWc {
        let mut flags = 0;
        if self.wc.wc_flags & IBV_WC_GRH != 0 {
            flags |= IB_WC_GRH;
        }
        if self.encap.is_roce() {
            flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
        }
        if self.vlan.is_some() {
            flags |= IB_WC_WITH_VLAN;
        }
        KernelWc {
            wc_flags: flags,
            slid: u32::from(self.wc.slid),
            sl: self.wc.sl,
            dlid_path_bits: 0,
            vlan_id: self.vlan.unwrap_or(0),
            network_hdr_type: self.encap.network_type() as u8,
            smac: self.smac.unwrap_or([0; 6]),
            src_qp: self.wc.src_qp,
            pkey_index: 0,
        }
    }
}

/// Why a frame is not a UD packet (none of these is an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// Not RDMA traffic (other Ethertype, other UDP port, ARP …).
    NotRdma,
    /// RDMA, but the opcode is not UD SEND only (with immediate).
    NotUd {
        /// The BTH opcode.
        opcode: u8,
    },
    /// A raw InfiniBand packet (LNH 0 or 1: IPv6 or Ethertype, no BTH).
    RawIb,
    /// An ERF record that carries no packet of a known type.
    ErfRecord {
        /// The ERF record type.
        erf_type: u8,
    },
    /// A link type the decoder does not know.
    LinkType(u32),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::NotRdma => f.write_str("not RDMA"),
            Skip::NotUd { opcode } => write!(f, "not UD (opcode {opcode:#04x})"),
            Skip::RawIb => f.write_str("raw IB (no transport header)"),
            Skip::ErfRecord { erf_type } => write!(f, "ERF record type {erf_type}"),
            Skip::LinkType(l) => write!(f, "unsupported link type {l}"),
        }
    }
}

/// The result of decoding one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A UD packet.
    Ud(UdPacket),
    /// Not a UD packet.
    Skipped(Skip),
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// A header is cut short.
    Truncated {
        /// Which header.
        layer: &'static str,
        /// The bytes there are.
        len: usize,
        /// The bytes it needs.
        need: usize,
    },
    /// The outer layers (Ethernet, VLAN, IP, UDP) are malformed.
    Outer(String),
    /// The LRH is malformed.
    Lrh(LrhMalformed),
    /// The BTH or DETH is malformed.
    Bth(BthMalformed),
    /// A RoCE v2 IPv4 header with options (IHL ≠ 5): RoCE v2 carries none.
    Ipv4Options {
        /// The IHL.
        ihl: u8,
    },
    /// A fragmented RoCE v2 packet (the NIC does not reassemble).
    Fragmented,
    /// A RoCE v2 IPv6 packet with extension headers (the 40-byte area can
    /// only hold the fixed header).
    Ipv6Extensions,
    /// The ERF record header is inconsistent.
    Erf(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated { layer, len, need } => write!(f, "{layer} truncated: {len} bytes, need {need}"),
            FrameError::Outer(s) => write!(f, "malformed outer headers: {s}"),
            FrameError::Lrh(e) => fmt::Display::fmt(e, f),
            FrameError::Bth(e) => fmt::Display::fmt(e, f),
            FrameError::Ipv4Options { ihl } => write!(f, "RoCE v2 IPv4 header with options (IHL {ihl})"),
            FrameError::Fragmented => f.write_str("fragmented RoCE v2 packet"),
            FrameError::Ipv6Extensions => f.write_str("RoCE v2 IPv6 packet with extension headers"),
            FrameError::Erf(s) => write!(f, "malformed ERF record: {s}"),
        }
    }
}

impl core::error::Error for FrameError {}

/// Decodes one frame of link type `link_type` (a pcap `LINKTYPE_*` value).
pub fn decode(link_type: u32, data: &[u8], opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    match link_type {
        linktype::ETHERNET => decode_ethernet(data, opts),
        linktype::LINUX_SLL => decode_linux_sll(data, opts),
        linktype::LINUX_SLL2 => decode_linux_sll2(data, opts),
        linktype::INFINIBAND => decode_ib(data),
        linktype::ERF => decode_erf(data, opts),
        other => Ok(Decoded::Skipped(Skip::LinkType(other))),
    }
}

/// Decodes an Ethernet II frame (with any 802.1Q / 802.1ad tags).
pub fn decode_ethernet(data: &[u8], opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    let p = LaxSlicedPacket::from_ethernet(data).map_err(|e| FrameError::Outer(e.to_string()))?;
    let smac = match &p.link {
        Some(etherparse::LinkSlice::Ethernet2(e)) => Some(e.source()),
        _ => None,
    };
    decode_sliced(&p, smac, opts)
}

/// Decodes a Linux cooked capture (v1) frame.
pub fn decode_linux_sll(data: &[u8], opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    // The 16-byte SLL header: packet type, ARPHRD type, address length,
    // 8 address bytes, protocol.
    let Some(&[_, _, h0, h1, _, alen, a0, a1, a2, a3, a4, a5, _, _, p0, p1]) = data.first_chunk::<16>() else {
        return Err(FrameError::Truncated { layer: "Linux cooked header", len: data.len(), need: 16 });
    };
    let payload = data.get(16..).unwrap_or_default();
    let smac = (u16::from_be_bytes([h0, h1]) == 1 && alen == 6).then_some([a0, a1, a2, a3, a4, a5]);
    decode_ether_payload(u16::from_be_bytes([p0, p1]), payload, smac, opts)
}

/// Decodes a Linux cooked capture v2 frame.
pub fn decode_linux_sll2(data: &[u8], opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    // The 20-byte SLL2 header: protocol, reserved, interface index, ARPHRD
    // type, packet type, address length, 8 address bytes.
    let Some(&[p0, p1, _, _, _, _, _, _, h0, h1, _, alen, a0, a1, a2, a3, a4, a5, _, _]) = data.first_chunk::<20>()
    else {
        return Err(FrameError::Truncated { layer: "Linux cooked v2 header", len: data.len(), need: 20 });
    };
    let payload = data.get(20..).unwrap_or_default();
    let smac = (u16::from_be_bytes([h0, h1]) == 1 && alen == 6).then_some([a0, a1, a2, a3, a4, a5]);
    decode_ether_payload(u16::from_be_bytes([p0, p1]), payload, smac, opts)
}

fn decode_ether_payload(
    ether_type: u16,
    payload: &[u8],
    smac: Option<[u8; 6]>,
    opts: &DecodeOptions,
) -> Result<Decoded, FrameError> {
    let p = LaxSlicedPacket::from_ether_type(EtherType(ether_type), payload);
    decode_sliced(&p, smac, opts)
}

fn decode_sliced(p: &LaxSlicedPacket<'_>, smac: Option<[u8; 6]>, opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    // The innermost tag is the one the receiving netdev sees.
    let (vlan, pcp) = p
        .link_exts
        .iter()
        .filter_map(|e| match e {
            LaxLinkExtSlice::Vlan(v) => Some((Some(v.vlan_identifier().value()), v.priority_code_point().value())),
            LaxLinkExtSlice::Macsec(_) => None,
        })
        .next_back()
        .unwrap_or((None, 0));
    let stop = |layer: &'static str| -> FrameError {
        match &p.stop_err {
            Some((e, _)) => FrameError::Outer(e.to_string()),
            None => FrameError::Outer(format!("{layer} missing")),
        }
    };
    match &p.net {
        None => {
            let Some(ep) = p.ether_payload() else {
                return match &p.stop_err {
                    Some((e, _)) => Err(FrameError::Outer(e.to_string())),
                    None => Ok(Decoded::Skipped(Skip::NotRdma)),
                };
            };
            if ep.ether_type.0 != ROCE_V1_ETHERTYPE {
                // An IP packet whose header etherparse could not slice is malformed.
                if matches!(ep.ether_type, EtherType::IPV4 | EtherType::IPV6) && p.stop_err.is_some() {
                    return Err(stop("IP header"));
                }
                return Ok(Decoded::Skipped(Skip::NotRdma));
            }
            let Some((area, rest)) = ep.payload.split_first_chunk::<40>() else {
                return Err(FrameError::Truncated { layer: "RoCE v1 GRH", len: ep.payload.len(), need: 40 });
            };
            transport(Encap::RoceV1, *area, rest, IBV_WC_GRH, 0, pcp, vlan, None, smac)
        }
        Some(LaxNetSlice::Arp(_)) => Ok(Decoded::Skipped(Skip::NotRdma)),
        Some(LaxNetSlice::Ipv4(ip)) => {
            if ip.payload().ip_number != IpNumber::UDP {
                return Ok(Decoded::Skipped(Skip::NotRdma));
            }
            let Some(udp_payload) = roce_v2_payload(p, ip.payload().payload)? else {
                return Ok(Decoded::Skipped(Skip::NotRdma));
            };
            let h = ip.header();
            if h.ihl() != 5 {
                return Err(FrameError::Ipv4Options { ihl: h.ihl() });
            }
            if ip.is_payload_fragmented() {
                return Err(FrameError::Fragmented);
            }
            let mut area = [0u8; 40];
            let (front, back) = area.split_at_mut(20);
            front.copy_from_slice(&opts.ipv4_front);
            let hdr = h.slice().get(..20).ok_or(FrameError::Truncated {
                layer: "IPv4 header",
                len: h.slice().len(),
                need: 20,
            })?;
            back.copy_from_slice(hdr);
            transport(Encap::RoceV2Ipv4, area, udp_payload, IBV_WC_GRH, 0, pcp, vlan, None, smac)
        }
        Some(LaxNetSlice::Ipv6(ip)) => {
            if ip.payload().ip_number != IpNumber::UDP {
                return Ok(Decoded::Skipped(Skip::NotRdma));
            }
            let Some(udp_payload) = roce_v2_payload(p, ip.payload().payload)? else {
                return Ok(Decoded::Skipped(Skip::NotRdma));
            };
            if ip.is_payload_fragmented() {
                return Err(FrameError::Fragmented);
            }
            if ip.header().next_header() != IpNumber::UDP {
                return Err(FrameError::Ipv6Extensions);
            }
            let area: [u8; 40] = ip.header().slice().try_into().map_err(|_| FrameError::Truncated {
                layer: "IPv6 header",
                len: ip.header().slice().len(),
                need: 40,
            })?;
            transport(Encap::RoceV2Ipv6, area, udp_payload, IBV_WC_GRH, 0, pcp, vlan, None, smac)
        }
    }
}

/// The UDP payload of a RoCE v2 packet, `None` when the UDP destination port
/// is not 4791.
fn roce_v2_payload<'a>(p: &LaxSlicedPacket<'a>, ip_payload: &'a [u8]) -> Result<Option<&'a [u8]>, FrameError> {
    match &p.transport {
        Some(TransportSlice::Udp(u)) => Ok((u.destination_port() == ROCE_V2_PORT).then(|| u.payload())),
        Some(_) => Ok(None),
        None => {
            // etherparse stopped before UDP: a cut-off header. Only a RoCE v2
            // packet is an error; anything else is just not RDMA.
            match ip_payload.get(2..4) {
                Some(&[a, b]) if u16::from_be_bytes([a, b]) == ROCE_V2_PORT => {
                    Err(FrameError::Truncated { layer: "UDP header", len: ip_payload.len(), need: 8 })
                }
                _ => Ok(None),
            }
        }
    }
}

/// Decodes the BTH and DETH that follow the network header.
#[allow(clippy::too_many_arguments)]
fn transport(
    encap: Encap,
    area: Area,
    rest: &[u8],
    wc_flags: u32,
    slid: u16,
    sl: u8,
    vlan: Option<u16>,
    dlid: Option<u16>,
    smac: Option<[u8; 6]>,
) -> Result<Decoded, FrameError> {
    let b = BthRepr::parse(rest).map_err(FrameError::Bth)?;
    if !b.is_ud_send() {
        return Ok(Decoded::Skipped(Skip::NotUd { opcode: b.opcode }));
    }
    let d = DethRepr::parse(rest.get(bth::HEADER_LEN..).unwrap_or_default()).map_err(FrameError::Bth)?;
    let imm = if b.ud_with_immediate() { IBV_WC_WITH_IMM } else { 0 };
    Ok(Decoded::Ud(UdPacket {
        encap,
        area,
        wc: IbvWc { wc_flags: wc_flags | imm, slid, sl, dlid_path_bits: 0, src_qp: d.src_qp, pkey_index: 0 },
        vlan,
        pkey: b.pkey,
        qkey: d.qkey,
        dest_qp: b.dest_qp,
        dlid,
        smac,
    }))
}

/// Decodes a native InfiniBand packet starting with the LRH.
pub fn decode_ib(data: &[u8]) -> Result<Decoded, FrameError> {
    let l = LrhRepr::parse(data).map_err(FrameError::Lrh)?;
    let rest = data.get(lrh::HEADER_LEN..).unwrap_or_default();
    match l.lnh {
        Lnh::Raw | Lnh::RawIpv6 => Ok(Decoded::Skipped(Skip::RawIb)),
        Lnh::IbaLocal => transport(Encap::Ib, [0; 40], rest, 0, l.slid, l.sl, None, Some(l.dlid), None),
        Lnh::IbaGlobal => {
            let Some((area, rest)) = rest.split_first_chunk::<40>() else {
                return Err(FrameError::Truncated { layer: "GRH", len: rest.len(), need: 40 });
            };
            transport(Encap::IbGrh, *area, rest, IBV_WC_GRH, l.slid, l.sl, None, Some(l.dlid), None)
        }
    }
}

/// Decodes one ERF record (pcap link type 197).
///
/// The 16-byte record header is: timestamp (8 bytes, little-endian), type
/// (bit 7: an extension header follows; bits 0..6: the record type), flags,
/// record length `rlen` (big-endian, header included), loss counter or
/// colour (2 bytes), wire length `wlen` (big-endian). Each 8-byte extension
/// header has bit 7 of its first byte set when another follows. Ethernet
/// records then have 2 bytes of padding; InfiniBand records start with the
/// LRH.
pub fn decode_erf(data: &[u8], opts: &DecodeOptions) -> Result<Decoded, FrameError> {
    let Some(&[_, _, _, _, _, _, _, _, ty, _, r0, r1, _, _, w0, w1]) = data.first_chunk::<ERF_HEADER_LEN>() else {
        return Err(FrameError::Truncated { layer: "ERF header", len: data.len(), need: ERF_HEADER_LEN });
    };
    let rlen = usize::from(u16::from_be_bytes([r0, r1]));
    let wlen = usize::from(u16::from_be_bytes([w0, w1]));
    if rlen < ERF_HEADER_LEN {
        return Err(FrameError::Erf("record length shorter than the header"));
    }
    let mut off = ERF_HEADER_LEN;
    let mut more = ty & 0x80 != 0;
    while more {
        let Some(&[e, ..]) = data.get(off..) else {
            return Err(FrameError::Truncated { layer: "ERF extension header", len: data.len(), need: off + 8 });
        };
        if data.len() < off + 8 {
            return Err(FrameError::Truncated { layer: "ERF extension header", len: data.len(), need: off + 8 });
        }
        more = e & 0x80 != 0;
        off += 8;
    }
    // The record may be cut short by the snapshot length; never read past it.
    let end = data.len().min(rlen);
    let body = data.get(off..end).unwrap_or_default();
    let erf_type = ty & 0x7f;
    match erf_type {
        erf_type::INFINIBAND | erf_type::INFINIBAND_LINK => {
            let body = body.get(..wlen.min(body.len())).unwrap_or(body);
            decode_ib(body)
        }
        erf_type::ETH | erf_type::COLOR_ETH | erf_type::DSM_COLOR_ETH | erf_type::COLOR_HASH_ETH => {
            let Some(frame) = body.get(2..) else {
                return Err(FrameError::Truncated { layer: "ERF Ethernet padding", len: body.len(), need: 2 });
            };
            decode_ethernet(frame, opts)
        }
        other => Ok(Decoded::Skipped(Skip::ErfRecord { erf_type: other })),
    }
}
