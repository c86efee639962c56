//! Ready-made fabrics: a responder device with an InfiniBand and a RoCE port,
//! and peers of every family talking to it. Used by `udah demo`,
//! `udah serve/ping --hal mock` and the end-to-end tests.

use core::fmt;
use core::str::FromStr;

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
use udah_core::hal::{ErrorKind, Hal};
use udah_core::wire::Gid;
use udah_core::{GidEntry, GidType};

use crate::fabric::{Fabric, Faults, FrontFill, MockAh, PortConfig, PortId, Qpn, Quirks, Received};
use crate::hal::{MockError, MockHal};

/// How a peer reaches the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// InfiniBand, LID-routed, no GRH.
    Ib,
    /// InfiniBand with a GRH.
    IbGrh,
    /// RoCE v1 (link-local GIDs, IB GRH on Ethernet).
    RoceV1,
    /// RoCE v2 over IPv4.
    RoceV2Ipv4,
    /// RoCE v2 over IPv6.
    RoceV2Ipv6,
    /// RoCE v2 over IPv4 on VLAN 100.
    RoceV2Vlan,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 6] =
        [Family::Ib, Family::IbGrh, Family::RoceV1, Family::RoceV2Ipv4, Family::RoceV2Ipv6, Family::RoceV2Vlan];

    /// The family's name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Ib => "ib",
            Family::IbGrh => "ib-grh",
            Family::RoceV1 => "rocev1",
            Family::RoceV2Ipv4 => "rocev2-ipv4",
            Family::RoceV2Ipv6 => "rocev2-ipv6",
            Family::RoceV2Vlan => "rocev2-vlan",
        }
    }

    /// Whether the family runs over Ethernet.
    pub const fn is_roce(self) -> bool {
        !matches!(self, Family::Ib | Family::IbGrh)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown family name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFamily(pub String);

impl fmt::Display for UnknownFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        write!(f, "unknown fabric family {:?} (known: {})", self.0, names.join(", "))
    }
}

impl core::error::Error for UnknownFamily {}

impl FromStr for Family {
    type Err = UnknownFamily;
    fn from_str(s: &str) -> Result<Family, UnknownFamily> {
        Family::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| UnknownFamily(s.to_string()))
    }
}

/// One peer of a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// How it reaches the responder.
    pub family: Family,
    /// Its port.
    pub port: PortId,
    /// Its QP.
    pub qpn: Qpn,
    /// Its AH towards the responder.
    pub ah: MockAh,
    /// The responder port it talks to.
    pub responder_port: PortId,
}

/// A fabric with a two-port responder device (port 1 InfiniBand, port 2
/// RoCE) and peers.
#[derive(Debug)]
pub struct Scenario {
    /// The fabric.
    pub fabric: Fabric,
    /// The responder's InfiniBand port.
    pub ib_port: PortId,
    /// The responder's RoCE port.
    pub roce_port: PortId,
    /// The peers.
    pub peers: Vec<Peer>,
    /// The Q_Key everyone uses.
    pub qkey: u32,
}

/// The responder's addresses.
const RESP_IPV4: [u8; 4] = [10, 0, 0, 1];
const RESP_VLAN_IPV4: [u8; 4] = [10, 0, 100, 1];
const RESP_GUID: u64 = 0x0002_c903_0000_0001;
const RESP_MAC: [u8; 6] = [0x02, 0xd0, 0x0d, 0, 0, 1];

fn resp_ipv6() -> Gid {
    let mut g = [0u8; 16];
    g[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    g[15] = 1;
    Gid(g)
}

fn peer_ipv6(k: u32) -> Gid {
    let mut g = resp_ipv6();
    g.0[12..].copy_from_slice(&(0x1000 + k).to_be_bytes());
    g
}

/// Peers per mock device (each peer has a port of its own).
const PEERS_PER_DEVICE: usize = 128;

/// Base LIDs 8, 12, …, 49148 (with LMC 2 each spans four, up to 0xbfff, the
/// last unicast LID).
const IB_BASE_LIDS: u32 = 12_286;

/// The (SL, path bits) pairs of InfiniBand peers past the first
/// [`IB_BASE_LIDS`]: every pair but the eight (`k % 8`, `k % 4`) of the first
/// ones, so that no two peers send with the same (LID, SL, path bits).
const EXTRA_SL_BITS: u32 = 16 * 4 - 8;

/// The `layer`-th (SL, path bits) pair of [`EXTRA_SL_BITS`].
fn extra_sl_bits(layer: u32) -> (u32, u32) {
    (0..16u32)
        .flat_map(|sl| (0..4u32).map(move |bits| (sl, bits)))
        .filter(|&(sl, bits)| sl >= 8 || bits != sl % 4)
        .nth(layer as usize)
        .unwrap_or((15, 3))
}

/// The most peers a scenario builds (every peer's MAC and addresses stay
/// distinct up to it).
pub const MAX_PEERS: usize = 1 << 22;

/// Whether the InfiniBand peers (`ib`, `ib-grh`) of `peers` peers cycling
/// through `families` (all of them when empty) have distinct addresses in
/// one subnet with LMC 2: those among the first 12,286 peers have a base
/// LID each; the later ones share them, 56 to a LID with different (SL,
/// path bits) pairs, so at most 688,016 of them.
pub fn infiniband_fits(families: &[Family], peers: usize) -> bool {
    let first = infiniband_peers(families, peers.min(IB_BASE_LIDS as usize));
    infiniband_peers(families, peers) - first <= (IB_BASE_LIDS * EXTRA_SL_BITS) as usize
}

/// How many of `peers` peers cycling through `families` (all of them when
/// empty) are InfiniBand peers.
pub fn infiniband_peers(families: &[Family], peers: usize) -> usize {
    let families = if families.is_empty() { &Family::ALL[..] } else { families };
    let ib = |fs: &[Family]| fs.iter().filter(|f| !f.is_roce()).count();
    peers / families.len() * ib(families) + ib(&families[..peers % families.len()])
}

impl Scenario {
    /// Builds the fabric: `peers` peers cycling through `families`, every
    /// port with `quirks`. The responder's RoCE GID table has holes and
    /// duplicate addresses (the IPv4 address untagged and on VLAN 100).
    pub fn build(seed: u64, families: &[Family], peers: usize, quirks: Quirks) -> Result<Scenario, MockError> {
        Scenario::build_with(seed, families, peers, quirks, Faults::default())
    }

    /// [`build`](Scenario::build) with fault injection and a create cost
    /// model on the responder's ports.
    pub fn build_with(
        seed: u64,
        families: &[Family],
        peers: usize,
        quirks: Quirks,
        responder_faults: Faults,
    ) -> Result<Scenario, MockError> {
        let fabric = Fabric::new(seed);
        let resp = fabric.add_device();
        let ib_port = fabric.add_port_to(
            resp,
            PortConfig::ib(1, RESP_GUID).with_lmc(2).with_table_len(128).with_faults(responder_faults.clone()),
        );
        let roce_port = fabric.add_port_to(
            resp,
            PortConfig::roce(RESP_MAC)
                .with_gid(4, GidEntry::new(Gid::from_ipv4(RESP_IPV4), GidType::RoceV1))
                .with_gid(5, GidEntry::new(Gid::from_ipv4(RESP_IPV4), GidType::RoceV2))
                .with_gid(9, GidEntry::new(Gid::from_ipv4(RESP_VLAN_IPV4), GidType::RoceV2))
                .with_gid(10, GidEntry::new(Gid::from_ipv4(RESP_VLAN_IPV4), GidType::RoceV1).with_vlan(100))
                .with_gid(11, GidEntry::new(Gid::from_ipv4(RESP_VLAN_IPV4), GidType::RoceV2).with_vlan(100))
                .with_gid(14, GidEntry::new(resp_ipv6(), GidType::RoceV1))
                .with_gid(15, GidEntry::new(resp_ipv6(), GidType::RoceV2))
                .with_table_len(256)
                .with_quirks(quirks)
                .with_faults(responder_faults),
        );
        let ib_gid = fabric.gids(ib_port).first().map_or(Gid::ZERO, |(_, e)| e.gid);
        let qkey = 0x1111_1111;
        let families = if families.is_empty() { &Family::ALL[..] } else { families };
        if peers > MAX_PEERS || !infiniband_fits(families, peers) {
            return Err(MockError {
                op: "Scenario::build",
                errno: 22, // EINVAL
                kind: ErrorKind::InvalidArgument,
                what: "more peers than distinct addresses (scenario::MAX_PEERS, infiniband_fits)",
            });
        }
        let mut out = Vec::with_capacity(peers);
        // Peers share devices, PEERS_PER_DEVICE ports each (device numbers are 16 bits).
        let mut device = 0u16;
        // InfiniBand peers past the first IB_BASE_LIDS, which share base LIDs.
        let mut ib_extra = 0u32;
        for k in 0..peers as u32 {
            if (k as usize).is_multiple_of(PEERS_PER_DEVICE) {
                device = fabric.add_device();
            }
            let family = families[k as usize % families.len()];
            let mac = [0x02, 0xee, (k >> 16) as u8, (k >> 8) as u8, k as u8, 0x10];
            // 10.0.1.0 – 10.0.99.255, then 10.1.0.0 on (10.0.100.0/24 is the VLAN's).
            let v4 = if k < 99 * 256 {
                [10, 0, (k >> 8) as u8 + 1, k as u8]
            } else {
                [10, 1 + (k >> 16) as u8, (k >> 8) as u8, k as u8]
            };
            let (cfg, sgid_index, dgid, responder_port, dlid, sl) = match family {
                Family::Ib | Family::IbGrh => {
                    // LIDs 8, 12, 16, … (LMC 2: each peer answers four LIDs),
                    // SL and the responder LID (path bits) it sends to from
                    // k; past the LID space, peers share base LIDs with
                    // (SL, path bits) pairs the first ones do not use.
                    let (base, sl, bits) = if k < IB_BASE_LIDS {
                        (k, k % 8, k % 4)
                    } else {
                        let (sl, bits) = extra_sl_bits(ib_extra / IB_BASE_LIDS);
                        ib_extra += 1;
                        ((ib_extra - 1) % IB_BASE_LIDS, sl, bits)
                    };
                    let lid = 8 + 4 * base as u16;
                    let cfg = PortConfig::ib(lid, 0x0002_c903_0001_0000 + u64::from(k)).with_lmc(2);
                    let grh = (family == Family::IbGrh).then_some(ib_gid);
                    (cfg, 0, grh, ib_port, 1 + bits as u16, sl)
                }
                Family::RoceV1 => {
                    (PortConfig::roce(mac), 0, Some(Gid::link_local_from_mac(RESP_MAC)), roce_port, 0, k % 8)
                }
                Family::RoceV2Ipv4 => {
                    (PortConfig::roce(mac).with_ipv4(v4), 3, Some(Gid::from_ipv4(RESP_IPV4)), roce_port, 0, k % 8)
                }
                Family::RoceV2Ipv6 => {
                    (PortConfig::roce(mac).with_address(peer_ipv6(k), None), 3, Some(resp_ipv6()), roce_port, 0, k % 8)
                }
                Family::RoceV2Vlan => {
                    // 10.0.100.2 – 10.0.100.251, then 11.0.0.250 on.
                    let v4 = if k < 250 {
                        [10, 0, 100, 2 + k as u8]
                    } else {
                        [11, (k >> 16) as u8, (k >> 8) as u8, k as u8]
                    };
                    (
                        PortConfig::roce(mac).with_vlan_ipv4(v4, 100),
                        3,
                        Some(Gid::from_ipv4(RESP_VLAN_IPV4)),
                        roce_port,
                        0,
                        k % 8,
                    )
                }
            };
            // A peer's GID table holds its own entries and no empty slots
            // (a million peers hold a million tables).
            let port = fabric.add_port_to(device, cfg.with_table_len(0).with_quirks(quirks));
            let hal = MockHal::new(&fabric, port.device);
            let attr = AhAttr {
                port: PortNum::new(port.port).ok_or(MockError::no_such_port("Scenario::build"))?,
                dlid,
                sl: Sl::new(sl as u8).unwrap_or_default(),
                src_path_bits: 0,
                static_rate: 0,
                grh: dgid.map(|dgid| GlobalRoute {
                    dgid,
                    flow_label: FlowLabel::new(k & 0xfffff).unwrap_or_default(),
                    sgid_index,
                    hop_limit: 64,
                    traffic_class: ((k % 4) * 0x20) as u8,
                }),
            };
            let ah = hal.create_ah(&attr, None)?;
            let qpn = fabric.create_qp(port, qkey).ok_or(MockError::no_such_port("create_qp"))?;
            out.push(Peer { family, port, qpn, ah, responder_port });
        }
        Ok(Scenario { fabric, ib_port, roce_port, peers: out, qkey })
    }

    /// Every peer sends `rounds` requests to the responder QP of its port
    /// (`ib_qp` or `roce_qp`); returns how many were posted.
    pub fn send_requests(&self, ib_qp: Qpn, roce_qp: Qpn, rounds: usize) -> usize {
        (0..rounds).map(|r| self.send_round(ib_qp, roce_qp, r, 0..self.peers.len())).sum()
    }

    /// The peers of `peers` (indices into [`peers`](Scenario::peers), cut to
    /// them) send their request of round `round`, as
    /// [`send_requests`](Scenario::send_requests) does; returns how many
    /// were posted. A fabric with many peers is driven a slice of them at a
    /// time, so that the queues never hold all their messages at once.
    pub fn send_round(&self, ib_qp: Qpn, roce_qp: Qpn, round: usize, peers: core::ops::Range<usize>) -> usize {
        let mut n = 0;
        for i in peers.start.min(self.peers.len())..peers.end.min(self.peers.len()) {
            let p = &self.peers[i];
            let dst = if p.family.is_roce() { roce_qp } else { ib_qp };
            let payload = request_payload(i, round);
            if self.fabric.post_send(p.qpn, p.ah, dst, self.qkey, &payload).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Drains the replies every peer received; returns (replies, replies
    /// whose payload was not one of that peer's requests).
    pub fn collect_replies(&self) -> (usize, usize) {
        self.collect_replies_of(0..self.peers.len())
    }

    /// [`collect_replies`](Scenario::collect_replies) of the peers of
    /// `peers` only (cut to them).
    pub fn collect_replies_of(&self, peers: core::ops::Range<usize>) -> (usize, usize) {
        let mut got = 0;
        let mut wrong = 0;
        for i in peers.start.min(self.peers.len())..peers.end.min(self.peers.len()) {
            let p = &self.peers[i];
            while let Some(m) = self.fabric.poll(p.qpn) {
                got += 1;
                if !is_request_of(&m, i) {
                    wrong += 1;
                }
            }
        }
        (got, wrong)
    }
}

/// The payload of peer `i`'s request in round `r`.
pub fn request_payload(i: usize, r: usize) -> Vec<u8> {
    format!("udah-req peer={i} round={r}").into_bytes()
}

fn is_request_of(m: &Received, i: usize) -> bool {
    m.payload.starts_with(format!("udah-req peer={i} ").as_bytes())
}

/// A default quirk set with random undefined IPv4 bytes (the realistic case).
pub fn realistic_quirks() -> Quirks {
    Quirks { front_fill: FrontFill::Random, report_network_type: true, ..Quirks::default() }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn infiniband_addresses_stay_distinct_past_the_base_lids() {
        // 12,286 peers with a base LID each, then 714 sharing them.
        let s = Scenario::build(1, &[Family::Ib, Family::IbGrh], 13_000, Quirks::default()).unwrap();
        let mut seen = HashSet::new();
        for p in &s.peers {
            let lid = s.fabric.port_info(p.port).unwrap().lid;
            let a = s.fabric.ah_attr(p.ah).unwrap();
            assert!(lid >= 8 && lid + 3 <= 0xbfff, "{lid:#x}");
            assert!(seen.insert((lid, a.sl.get(), a.dlid)), "{lid:#x} {a:?}");
        }
        assert_eq!(s.fabric.devices() as usize, 1 + 13_000_usize.div_ceil(PEERS_PER_DEVICE));
    }

    #[test]
    fn roce_addresses_stay_distinct() {
        // Past 10.0.99.255 and past the 250 VLAN addresses of 10.0.100.0/24.
        let s = Scenario::build(1, &[Family::RoceV2Ipv4, Family::RoceV2Vlan], 60_000, Quirks::default()).unwrap();
        let resp: HashSet<Gid> = s.fabric.gids(s.roce_port).into_iter().map(|(_, e)| e.gid).collect();
        let mut seen = HashSet::new();
        for p in &s.peers {
            let (_, e) = s.fabric.gids(p.port).into_iter().find(|(i, _)| *i == 3).unwrap();
            assert!(!resp.contains(&e.gid), "{:?} is the responder's", e.gid);
            assert!(seen.insert(e.gid), "{:?} twice", e.gid);
        }
    }

    #[test]
    fn infiniband_capacity() {
        let ib = [Family::Ib];
        assert!(infiniband_fits(&ib, 12_286 + 688_016));
        assert!(!infiniband_fits(&ib, 12_286 + 688_017));
        assert!(infiniband_fits(&Family::ALL, 1_000_000));
        assert_eq!(infiniband_peers(&Family::ALL, 1_000_000), 333_334);
        let err = Scenario::build(1, &ib, 12_286 + 688_017, Quirks::default()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
    }
}
