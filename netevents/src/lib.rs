//! The network events that make a RoCE address handle stale, from the
//! kernel's routing socket (rtnetlink): neighbour entries (a peer's IP
//! address and the MAC it resolves to), links (up/down, the local MAC) and
//! local addresses.
//!
//! A RoCE AH carries the destination MAC resolved when it was created; the
//! GID table does not change when a peer's MAC does, so only the neighbour
//! table says that an AH now points at the wrong station. [`NetWatch`] is a
//! non-blocking `NETLINK_ROUTE` socket subscribed to the neighbour, link and
//! IPv4/IPv6 address groups; [`NetWatch::read`] turns what is waiting into
//! [`NetEvent`]s. [`Neighbours`] keeps the last MAC seen per address and
//! tells a changed MAC ([`NeighChange::Changed`]) from a refresh that
//! changes nothing ([`NeighChange::Same`]), so that a responder retires only
//! the AHs whose destination really moved.
//!
//! The messages are parsed by the rust-netlink crates
//! (`netlink-packet-route`, the parser behind `rtnetlink`); no `unsafe`
//! here.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use netlink_packet_core::{NLM_F_DUMP, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use udah_core::wire::Gid;

/// `RTMGRP_LINK`: link (netdev) changes.
const RTMGRP_LINK: u32 = 0x1;
/// `RTMGRP_NEIGH`: neighbour-table changes.
const RTMGRP_NEIGH: u32 = 0x4;
/// `RTMGRP_IPV4_IFADDR`: IPv4 addresses.
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
/// `RTMGRP_IPV6_IFADDR`: IPv6 addresses.
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

/// One network event, as the kernel reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetEvent {
    /// A neighbour entry was added, updated (`gone: false`) or deleted
    /// (`gone: true`). `lladdr` is the MAC it resolves to, when it has one
    /// (entries being resolved or that failed have none).
    Neighbour {
        /// The netdev's interface index.
        ifindex: u32,
        /// The neighbour's IP address.
        addr: IpAddr,
        /// Its link-layer address, when the entry has one.
        lladdr: Option<[u8; 6]>,
        /// The entry's state is `FAILED` or `INCOMPLETE` (the address does
        /// not resolve).
        unresolved: bool,
        /// The entry was deleted.
        gone: bool,
    },
    /// A link changed: its administrative/operational state or its MAC.
    Link {
        /// The netdev's interface index.
        ifindex: u32,
        /// The netdev's name, when the message carries it.
        name: Option<String>,
        /// `IFF_UP` and `IFF_LOWER_UP` (the carrier) are both set.
        up: bool,
        /// Its MAC, when it has a 6-byte one.
        lladdr: Option<[u8; 6]>,
        /// The link was deleted.
        gone: bool,
    },
    /// A local address was added or removed.
    Address {
        /// The netdev's interface index.
        ifindex: u32,
        /// The address.
        addr: IpAddr,
        /// It was removed.
        gone: bool,
    },
}

/// A non-blocking rtnetlink socket subscribed to neighbour, link and address
/// changes. Poll its file descriptor ([`AsRawFd`]) for readability, then
/// [`read`](Self::read).
#[derive(Debug)]
pub struct NetWatch {
    sock: Socket,
    buf: Vec<u8>,
}

impl NetWatch {
    /// Opens the socket and joins the neighbour, link, IPv4- and
    /// IPv6-address groups.
    pub fn open() -> io::Result<NetWatch> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind(&SocketAddr::new(0, RTMGRP_LINK | RTMGRP_NEIGH | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR))?;
        sock.set_non_blocking(true)?;
        Ok(NetWatch { sock, buf: vec![0; 64 * 1024] })
    }

    /// Asks the kernel for its whole neighbour table (every family): the
    /// entries arrive on this socket as [`NetEvent::Neighbour`]s, which
    /// [`read`](Self::read) returns with the rest, so that a [`Neighbours`]
    /// map learns the MACs of entries that existed before the watch opened
    /// (and a later change of one of them reads as
    /// [`NeighChange::Changed`], not as a first sighting).
    pub fn request_neighbours(&mut self) -> io::Result<()> {
        let mut msg = NetlinkMessage::from(RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()));
        msg.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.sock.send(&buf, 0).map(drop)
    }

    /// Reads every message waiting (never blocks), appending the events to
    /// `out`; returns how many were appended. `ENOBUFS` (the kernel dropped
    /// messages because the socket's buffer was full) is returned as an
    /// error of kind [`io::ErrorKind::Other`] with that errno: the caller has
    /// missed events and should treat every neighbour as changed.
    pub fn read(&mut self, out: &mut Vec<NetEvent>) -> io::Result<usize> {
        let before = out.len();
        loop {
            match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(0) => break,
                Ok(n) => {
                    let got = self.buf.get(..n).unwrap_or(&[]);
                    parse(got, out);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out.len() - before)
    }
}

impl AsRawFd for NetWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

/// Parses one datagram of rtnetlink messages, appending the events it
/// carries to `out` (messages of other kinds and malformed ones are
/// skipped); returns how many were appended.
pub fn parse(mut buf: &[u8], out: &mut Vec<NetEvent>) -> usize {
    let before = out.len();
    // Each message starts with its 32-bit length (native endian).
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < 16 || len > buf.len() {
            break;
        }
        let (msg, rest) = buf.split_at(len);
        if let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(msg)
            && let NetlinkPayload::InnerMessage(inner) = m.payload
            && let Some(ev) = event(inner)
        {
            out.push(ev);
        }
        // Messages are aligned to 4 bytes.
        let pad = len.next_multiple_of(4).min(buf.len());
        buf = if pad > len { &buf[pad..] } else { rest };
    }
    out.len() - before
}

fn event(m: RouteNetlinkMessage) -> Option<NetEvent> {
    match m {
        RouteNetlinkMessage::NewNeighbour(n) => neighbour(n, false),
        RouteNetlinkMessage::DelNeighbour(n) => neighbour(n, true),
        RouteNetlinkMessage::NewLink(l) => Some(link(l, false)),
        RouteNetlinkMessage::DelLink(l) => Some(link(l, true)),
        RouteNetlinkMessage::NewAddress(a) => address(a, false),
        RouteNetlinkMessage::DelAddress(a) => address(a, true),
        _ => None,
    }
}

fn mac(bytes: &[u8]) -> Option<[u8; 6]> {
    <[u8; 6]>::try_from(bytes).ok()
}

fn neighbour(n: NeighbourMessage, gone: bool) -> Option<NetEvent> {
    let mut addr = None;
    let mut lladdr = None;
    for a in &n.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => addr = Some(IpAddr::V4(*v4)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => addr = Some(IpAddr::V6(*v6)),
            NeighbourAttribute::LinkLocalAddress(b) => lladdr = mac(b),
            _ => {}
        }
    }
    let unresolved = matches!(n.header.state, NeighbourState::Failed | NeighbourState::Incomplete);
    Some(NetEvent::Neighbour { ifindex: n.header.ifindex, addr: addr?, lladdr, unresolved, gone })
}

fn link(l: LinkMessage, gone: bool) -> NetEvent {
    let mut name = None;
    let mut lladdr = None;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Address(b) => lladdr = mac(b),
            _ => {}
        }
    }
    let up = l.header.flags.contains(LinkFlags::Up) && l.header.flags.contains(LinkFlags::LowerUp);
    NetEvent::Link { ifindex: l.header.index, name, up, lladdr, gone }
}

fn address(a: AddressMessage, gone: bool) -> Option<NetEvent> {
    // IFA_LOCAL is the local address on point-to-point links, IFA_ADDRESS
    // elsewhere (where both are the same).
    let mut addr = None;
    for at in &a.attributes {
        match at {
            AddressAttribute::Local(ip) => addr = Some(*ip),
            AddressAttribute::Address(ip) if addr.is_none() => addr = Some(*ip),
            _ => {}
        }
    }
    Some(NetEvent::Address { ifindex: a.header.index, addr: addr?, gone })
}

/// What a neighbour event changed, by [`Neighbours::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighChange {
    /// The first MAC seen for this address.
    New([u8; 6]),
    /// The same MAC as before (a refresh, a state change): nothing to retire.
    Same,
    /// The address now resolves to another MAC: AHs to it are stale.
    Changed {
        /// The MAC it had.
        old: [u8; 6],
        /// The MAC it has now.
        new: [u8; 6],
    },
    /// The entry went away or stopped resolving, after having had `old`.
    /// An AH built with `old` may still reach the peer; whether to retire it
    /// is the caller's policy.
    Lost {
        /// The MAC it had.
        old: [u8; 6],
    },
    /// Nothing known before and nothing now.
    Unknown,
}

/// The last MAC seen for each (interface, IP address): tells a changed
/// link-layer address from a refresh.
#[derive(Debug, Default, Clone)]
pub struct Neighbours {
    by_addr: HashMap<(u32, IpAddr), [u8; 6]>,
}

impl Neighbours {
    /// An empty map.
    pub fn new() -> Neighbours {
        Neighbours::default()
    }

    /// Records a MAC without reporting a change (a responder that resolved
    /// a peer itself when it created the AH).
    pub fn learn(&mut self, ifindex: u32, addr: IpAddr, lladdr: [u8; 6]) {
        self.by_addr.insert((ifindex, canonical(addr)), lladdr);
    }

    /// The MAC last seen for an address.
    pub fn get(&self, ifindex: u32, addr: IpAddr) -> Option<[u8; 6]> {
        self.by_addr.get(&(ifindex, canonical(addr))).copied()
    }

    /// Applies one event; for a neighbour event, what it changed (other
    /// events: [`NeighChange::Unknown`]).
    pub fn apply(&mut self, ev: &NetEvent) -> NeighChange {
        let NetEvent::Neighbour { ifindex, addr, lladdr, unresolved, gone } = *ev else {
            return NeighChange::Unknown;
        };
        let key = (ifindex, canonical(addr));
        match (lladdr, gone || unresolved) {
            (Some(new), false) => match self.by_addr.insert(key, new) {
                None => NeighChange::New(new),
                Some(old) if old == new => NeighChange::Same,
                Some(old) => NeighChange::Changed { old, new },
            },
            _ => match self.by_addr.remove(&key) {
                Some(old) => NeighChange::Lost { old },
                None => NeighChange::Unknown,
            },
        }
    }

    /// How many addresses have a MAC.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// No address has a MAC.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// The RoCE v2 GID of an IP address: IPv4-mapped (`::ffff:a.b.c.d`) for
/// IPv4, the address itself for IPv6.
pub fn gid_of(addr: IpAddr) -> Gid {
    Gid(match canonical(addr) {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    })
}

/// The IP address a RoCE v2 GID names (IPv4 for an IPv4-mapped GID).
pub fn addr_of(gid: &Gid) -> IpAddr {
    canonical(IpAddr::V6(Ipv6Addr::from(gid.0)))
}

/// `addr` is IPv4 `0.0.0.0` or IPv6 `::` (no address).
pub fn is_unspecified(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4 == Ipv4Addr::UNSPECIFIED,
        IpAddr::V6(v6) => v6.is_unspecified(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{NetlinkHeader, NetlinkMessage};
    use netlink_packet_route::AddressFamily;
    use netlink_packet_route::neighbour::NeighbourHeader;

    fn neigh_bytes(new: bool, ifindex: u32, addr: Ipv4Addr, mac: Option<[u8; 6]>, state: NeighbourState) -> Vec<u8> {
        let mut n = NeighbourMessage::default();
        n.header = NeighbourHeader { family: AddressFamily::Inet, ifindex, state, ..n.header };
        n.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet(addr)));
        if let Some(m) = mac {
            n.attributes.push(NeighbourAttribute::LinkLocalAddress(m.to_vec()));
        }
        let inner = if new { RouteNetlinkMessage::NewNeighbour(n) } else { RouteNetlinkMessage::DelNeighbour(n) };
        let mut msg = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        buf
    }

    const A: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 2];
    const B: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 0x12];
    const IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    #[test]
    fn a_datagram_of_neighbour_messages_parses_in_order() {
        let mut dgram = neigh_bytes(true, 3, IP, Some(A), NeighbourState::Reachable);
        dgram.extend(neigh_bytes(false, 3, IP, None, NeighbourState::Stale));
        let mut out = Vec::new();
        assert_eq!(parse(&dgram, &mut out), 2);
        assert_eq!(
            out[0],
            NetEvent::Neighbour { ifindex: 3, addr: IpAddr::V4(IP), lladdr: Some(A), unresolved: false, gone: false }
        );
        assert!(matches!(out[1], NetEvent::Neighbour { gone: true, lladdr: None, .. }));
    }

    #[test]
    fn truncated_and_garbage_input_yields_no_event_and_no_panic() {
        let good = neigh_bytes(true, 3, IP, Some(A), NeighbourState::Reachable);
        let mut out = Vec::new();
        for cut in 0..good.len() {
            parse(&good[..cut], &mut out);
        }
        assert!(out.is_empty());
        let mut bad = good.clone();
        bad[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse(&bad, &mut out), 0);
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(parse(&bad, &mut out), 0);
    }

    #[test]
    fn only_a_different_mac_is_a_change() {
        let ev = |mac: Option<[u8; 6]>, state, gone| NetEvent::Neighbour {
            ifindex: 3,
            addr: IpAddr::V4(IP),
            lladdr: mac,
            unresolved: state,
            gone,
        };
        let mut n = Neighbours::new();
        assert_eq!(n.apply(&ev(Some(A), false, false)), NeighChange::New(A));
        assert_eq!(n.apply(&ev(Some(A), false, false)), NeighChange::Same);
        assert_eq!(n.apply(&ev(Some(B), false, false)), NeighChange::Changed { old: A, new: B });
        assert_eq!(n.get(3, IpAddr::V6(IP.to_ipv6_mapped())), Some(B), "IPv4-mapped is the same address");
        assert_eq!(n.apply(&ev(None, true, false)), NeighChange::Lost { old: B });
        assert_eq!(n.apply(&ev(None, false, true)), NeighChange::Unknown);
        assert!(n.is_empty());
        let link = NetEvent::Link { ifindex: 3, name: None, up: true, lladdr: Some(A), gone: false };
        assert_eq!(n.apply(&link), NeighChange::Unknown);
    }

    #[test]
    fn gids_and_addresses_map_both_ways() {
        let g = gid_of(IpAddr::V4(IP));
        assert_eq!(&g.0[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(addr_of(&g), IpAddr::V4(IP));
        let v6: Ipv6Addr = "fd00:da::2".parse().unwrap();
        assert_eq!(addr_of(&gid_of(IpAddr::V6(v6))), IpAddr::V6(v6));
        assert!(is_unspecified(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
    }

    #[test]
    fn the_socket_opens_on_any_linux_kernel() {
        // rtnetlink needs no privilege to listen; nothing is waiting on a
        // fresh socket, and a read does not block.
        let mut w = NetWatch::open().unwrap();
        let mut out = Vec::new();
        w.read(&mut out).unwrap();
        assert!(w.as_raw_fd() >= 0);
    }
}
