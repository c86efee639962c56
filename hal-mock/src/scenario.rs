//! Ready-made fabrics: a responder device with an InfiniBand and a RoCE port,
//! and peers of every family talking to it. Used by `udah demo`,
//! `udah serve/ping --hal mock` and the end-to-end tests.

use core::fmt;
use core::str::FromStr;

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
use udah_core::hal::Hal;
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
        let mut out = Vec::with_capacity(peers);
        let families = if families.is_empty() { &Family::ALL[..] } else { families };
        for k in 0..peers as u32 {
            let family = families[k as usize % families.len()];
            let mac = [0x02, 0xee, (k >> 16) as u8, (k >> 8) as u8, k as u8, 0x10];
            let v4 = [10, 0, (k >> 8) as u8 + 1, k as u8];
            let (cfg, sgid_index, dgid, responder_port, dlid) = match family {
                Family::Ib | Family::IbGrh => {
                    // LIDs 8, 12, 16, … (LMC 2: each peer answers four LIDs).
                    let lid = 8 + 4 * k as u16;
                    let cfg = PortConfig::ib(lid, 0x0002_c903_0001_0000 + u64::from(k)).with_lmc(2);
                    let grh = (family == Family::IbGrh).then_some(ib_gid);
                    (cfg, 0, grh, ib_port, 1 + (k % 4) as u16)
                }
                Family::RoceV1 => (PortConfig::roce(mac), 0, Some(Gid::link_local_from_mac(RESP_MAC)), roce_port, 0),
                Family::RoceV2Ipv4 => {
                    (PortConfig::roce(mac).with_ipv4(v4), 3, Some(Gid::from_ipv4(RESP_IPV4)), roce_port, 0)
                }
                Family::RoceV2Ipv6 => {
                    (PortConfig::roce(mac).with_address(peer_ipv6(k), None), 3, Some(resp_ipv6()), roce_port, 0)
                }
                Family::RoceV2Vlan => {
                    let v4 = [10, 0, 100, 2 + (k % 250) as u8];
                    (
                        PortConfig::roce(mac).with_vlan_ipv4(v4, 100),
                        3,
                        Some(Gid::from_ipv4(RESP_VLAN_IPV4)),
                        roce_port,
                        0,
                    )
                }
            };
            let port = fabric.add_port(cfg.with_quirks(quirks));
            let hal = MockHal::new(&fabric, port.device);
            let attr = AhAttr {
                port: PortNum::new(1).unwrap_or_else(|| unreachable!()),
                dlid,
                sl: Sl::new((k % 8) as u8).unwrap_or_default(),
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
        let mut n = 0;
        for r in 0..rounds {
            for (i, p) in self.peers.iter().enumerate() {
                let dst = if p.family.is_roce() { roce_qp } else { ib_qp };
                let payload = request_payload(i, r);
                if self.fabric.post_send(p.qpn, p.ah, dst, self.qkey, &payload).is_ok() {
                    n += 1;
                }
            }
        }
        n
    }

    /// Drains the replies every peer received; returns (replies, replies
    /// whose payload was not one of that peer's requests).
    pub fn collect_replies(&self) -> (usize, usize) {
        let mut got = 0;
        let mut wrong = 0;
        for (i, p) in self.peers.iter().enumerate() {
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
