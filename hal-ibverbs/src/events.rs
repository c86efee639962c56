//! One event engine for a responder on a verbs port: the rtnetlink watcher
//! ([`NetWatch`]) and the context's asynchronous events, behind one file
//! descriptor, turned into what keeps the responder's AHs current.
//!
//! | event | what [`Events::process`] does |
//! | --- | --- |
//! | a neighbour's MAC changed | retires the AHs to that address built for another MAC (only those; the same MAC retires nothing) |
//! | a neighbour went away or stopped resolving | tells the target ([`EventTarget::forget`]) |
//! | port error (`IBV_EVENT_PORT_ERR`) | stops creating: [`Events::creating`] is false (hits are still answered) |
//! | port active (`IBV_EVENT_PORT_ACTIVE`) | re-snapshots the GID table and resumes creating |
//! | GID change, LID/SM/client-reregister events | re-snapshots the GID table |
//! | a local MAC or address changed | re-snapshots the GID table |
//! | device fatal, or the device unregistered | reports it; the backend's [`fault`](IbverbsHal::fault) is set |
//!
//! A re-snapshot bumps the backend's GID generation: the responder re-takes
//! its snapshot at its next request and retires the AHs built on entries
//! that changed. The engine reads the events itself, so the backend's own
//! listener thread ([`IbverbsHal::start_event_listener`]) must not run
//! beside it (both would take the asynchronous events).

use core::net::IpAddr;
use core::time::Duration;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use udah_core::responder::Responder;
use udah_core::table::AhCache;
use udah_core::wire::Gid;

use crate::enums::EventType;
use crate::epoll::Epoll;
use crate::error::VerbsError;
use crate::hal::{DeviceFault, IbverbsHal};
use crate::netevents::{NeighChange, Neighbours, NetEvent, NetWatch, gid_of};

/// What the engine acts on: the responder's AH cache.
pub trait EventTarget {
    /// Retires the AHs to `dgid` built for another MAC than `dmac`; returns
    /// how many.
    fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize;
    /// `dgid`'s neighbour entry went away or stopped resolving (a resolver
    /// that remembers resolved destinations forgets it). Nothing by default.
    fn forget(&mut self, _dgid: &Gid) {}
}

impl<C: AhCache, const G: usize> EventTarget for Responder<C, G> {
    fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize {
        Responder::retire_l2_change(self, dgid, dmac)
    }
}

/// One thing the engine saw and did, for the caller to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    /// A neighbour now resolves to another MAC; `retired` AHs were retired.
    NeighbourMoved {
        /// Its IP address.
        addr: IpAddr,
        /// The MAC it had.
        old: [u8; 6],
        /// The MAC it has.
        new: [u8; 6],
        /// AHs retired.
        retired: usize,
    },
    /// A neighbour first seen at `mac` had AHs built for another MAC, which
    /// were retired (reported only when `retired > 0`).
    NeighbourSeen {
        /// Its IP address.
        addr: IpAddr,
        /// Its MAC.
        mac: [u8; 6],
        /// AHs retired.
        retired: usize,
    },
    /// A link went down or came up (first seen up is no event).
    Link {
        /// Its name, when the message carried it.
        name: Option<String>,
        /// Up (administratively and with carrier).
        up: bool,
    },
    /// The engine's port went down (creating stops) or became active (GID
    /// table re-snapshot, creating resumes).
    Port {
        /// The port.
        port: u8,
        /// Active.
        up: bool,
    },
    /// The GID table changed (a GID, LID, SM or re-register event):
    /// re-snapshot.
    GidChange {
        /// The event.
        event: EventType,
    },
    /// A local MAC or address changed: re-snapshot.
    LocalChange {
        /// The netdev's interface index.
        ifindex: u32,
    },
    /// The device (or a queue on it) can no longer be used.
    Fatal(DeviceFault),
    /// The kernel dropped network events (the socket's buffer was full): a
    /// MAC change may be among them.
    Lost(String),
}

/// What the engine has seen and done since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Neighbour entries that now resolve to another MAC.
    pub mac_changes: u64,
    /// AHs retired because their destination's MAC changed.
    pub retired: u64,
    /// Links that went down or came up.
    pub links: u64,
    /// Port-error events on the engine's port.
    pub port_errors: u64,
    /// Port-active events on the engine's port.
    pub port_actives: u64,
    /// GID-table events (GID change, LID, SM, client re-register).
    pub gid_changes: u64,
    /// Local MAC or address changes.
    pub local_changes: u64,
    /// Asynchronous events read.
    pub async_events: u64,
    /// Network events lost (ENOBUFS) and failed re-snapshots or reads.
    pub errors: u64,
}

/// The engine's state, apart from its file descriptors: what each event
/// does. Kept apart so that it runs on parsed events without a device.
#[derive(Debug)]
pub struct EventState {
    port: u8,
    port_up: bool,
    neighbours: Neighbours,
    link_up: HashMap<u32, bool>,
    link_mac: HashMap<u32, [u8; 6]>,
    counts: EventCounts,
}

/// What an event asks of the backend besides the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Nothing,
    Resnapshot,
}

impl EventState {
    /// The state of a responder on `port`, whose port is active or not.
    pub fn new(port: u8, port_up: bool) -> EventState {
        EventState {
            port,
            port_up,
            neighbours: Neighbours::new(),
            link_up: HashMap::new(),
            link_mac: HashMap::new(),
            counts: EventCounts::default(),
        }
    }

    /// Whether AHs may be created (the port is active).
    pub fn creating(&self) -> bool {
        self.port_up
    }

    /// The counts so far.
    pub fn counts(&self) -> EventCounts {
        self.counts
    }

    /// Applies one network event to `target`; appends what it did to `out`.
    /// Returns whether the GID table should be re-snapshot.
    pub fn on_net(&mut self, ev: &NetEvent, target: &mut dyn EventTarget, out: &mut Vec<Happened>) -> bool {
        self.net(ev, target, out) == Need::Resnapshot
    }

    fn net(&mut self, ev: &NetEvent, target: &mut dyn EventTarget, out: &mut Vec<Happened>) -> Need {
        match (ev, self.neighbours.apply(ev)) {
            (NetEvent::Neighbour { addr, .. }, change @ (NeighChange::New(new) | NeighChange::Changed { new, .. })) => {
                // Also on a first sighting: an AH may have been built before
                // the engine saw this address.
                let retired = target.retire_l2_change(&gid_of(*addr), new);
                self.counts.retired += retired as u64;
                if let NeighChange::Changed { old, .. } = change {
                    self.counts.mac_changes += 1;
                    out.push(Happened::NeighbourMoved { addr: *addr, old, new, retired });
                } else if retired > 0 {
                    out.push(Happened::NeighbourSeen { addr: *addr, mac: new, retired });
                }
                Need::Nothing
            }
            (NetEvent::Neighbour { addr, .. }, NeighChange::Lost { .. }) => {
                target.forget(&gid_of(*addr));
                Need::Nothing
            }
            (NetEvent::Link { ifindex, name, up, lladdr, gone }, _) => {
                let was = self.link_up.insert(*ifindex, *up);
                if was.map_or(!*up, |was| was != *up) {
                    self.counts.links += 1;
                    out.push(Happened::Link { name: name.clone(), up: *up });
                }
                let mac_moved = match (lladdr, gone) {
                    (Some(m), false) => self.link_mac.insert(*ifindex, *m).is_some_and(|old| old != *m),
                    _ => {
                        self.link_mac.remove(ifindex);
                        false
                    }
                };
                if mac_moved {
                    self.counts.local_changes += 1;
                    out.push(Happened::LocalChange { ifindex: *ifindex });
                    Need::Resnapshot
                } else {
                    Need::Nothing
                }
            }
            (NetEvent::Address { ifindex, .. }, _) => {
                self.counts.local_changes += 1;
                out.push(Happened::LocalChange { ifindex: *ifindex });
                Need::Resnapshot
            }
            _ => Need::Nothing,
        }
    }

    /// Applies one asynchronous event; appends what it did to `out`.
    /// (The backend's own handling, the GID re-read and the fault, is
    /// [`IbverbsHal::handle_async_event`]'s.)
    pub fn on_async(&mut self, event: EventType, port: Option<u8>, out: &mut Vec<Happened>) {
        self.counts.async_events += 1;
        let ours = port.is_none_or(|p| p == self.port);
        match event {
            EventType::PortErr if ours => {
                self.counts.port_errors += 1;
                self.port_up = false;
                out.push(Happened::Port { port: self.port, up: false });
            }
            EventType::PortActive if ours => {
                self.counts.port_actives += 1;
                self.port_up = true;
                out.push(Happened::Port { port: self.port, up: true });
            }
            e if e.invalidates_gids() && ours => {
                self.counts.gid_changes += 1;
                out.push(Happened::GidChange { event: e });
            }
            _ => {}
        }
    }
}

/// How often [`Events::process`] checks that the device is still
/// registered (a driver like rxe sends no `IBV_EVENT_DEVICE_FATAL`).
const REGISTERED_EVERY: Duration = Duration::from_millis(100);

/// The event engine of a responder on one port of an [`IbverbsHal`]: the
/// rtnetlink watcher and the context's asynchronous-event fd (made
/// non-blocking) in one `epoll` set, whose fd ([`AsRawFd`]) is readable
/// when events wait; [`process`](Self::process) reads and applies them.
#[derive(Debug)]
pub struct Events {
    epoll: Epoll,
    net: Option<NetWatch>,
    state: EventState,
    buf: Vec<NetEvent>,
    checked: Instant,
    fault_seen: bool,
}

/// Why the engine could not open.
#[derive(Debug)]
pub enum EventsError {
    /// The port could not be queried, or the async fd made non-blocking.
    Verbs(VerbsError),
    /// The `epoll` set could not be made.
    Epoll(io::Error),
}

impl core::fmt::Display for EventsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EventsError::Verbs(e) => write!(f, "asynchronous events: {e}"),
            EventsError::Epoll(e) => write!(f, "epoll: {e}"),
        }
    }
}

impl core::error::Error for EventsError {}

impl Events {
    /// Opens the engine for `port` of `hal`. Without rtnetlink (`net_error`
    /// says why) it still handles the asynchronous events.
    pub fn open(hal: &IbverbsHal, port: u8) -> Result<(Events, Option<io::Error>), EventsError> {
        let up = hal.port_attr(port).map_err(EventsError::Verbs)?.state.is_active();
        let epoll = Epoll::new().map_err(EventsError::Epoll)?;
        hal.context().set_async_nonblocking().map_err(EventsError::Verbs)?;
        epoll.add(hal.context().async_fd()).map_err(EventsError::Epoll)?;
        let (net, net_error) = match NetWatch::open() {
            Ok(w) => match epoll.add(w.as_raw_fd()) {
                Ok(()) => (Some(w), None),
                Err(e) => (None, Some(e)),
            },
            Err(e) => (None, Some(e)),
        };
        let events = Events {
            epoll,
            net,
            state: EventState::new(port, up),
            buf: Vec::new(),
            checked: Instant::now(),
            fault_seen: false,
        };
        Ok((events, net_error))
    }

    /// Whether AHs may be created: false from a port error to the next
    /// port-active event. A responder answers hits meanwhile and refuses
    /// misses.
    pub fn creating(&self) -> bool {
        self.state.creating()
    }

    /// The counts so far.
    pub fn counts(&self) -> EventCounts {
        self.state.counts()
    }

    /// Whether events wait (the fd is readable), without blocking.
    pub fn pending(&self) -> bool {
        self.epoll.ready(0).unwrap_or(true)
    }

    /// Reads every event waiting (never blocks) and applies it: to `target`
    /// (retirements), to `hal` (GID re-snapshots, the fault), and to the
    /// engine's port state; appends what happened to `out`. Also checks,
    /// at most every 100 ms, that the device is still registered.
    pub fn process(&mut self, hal: &IbverbsHal, target: &mut dyn EventTarget, out: &mut Vec<Happened>) -> usize {
        let before = out.len();
        let mut resnapshot = false;
        if let Some(w) = self.net.as_mut() {
            self.buf.clear();
            if let Err(e) = w.read(&mut self.buf) {
                self.state.counts.errors += 1;
                out.push(Happened::Lost(e.to_string()));
            }
            for ev in self.buf.drain(..) {
                resnapshot |= self.state.on_net(&ev, target, out);
            }
        }
        loop {
            match hal.context().wait_async_event(0) {
                Ok(Some(ev)) => {
                    hal.handle_async_event(ev.event_type, ev.port);
                    self.state.on_async(ev.event_type, ev.port, out);
                }
                Ok(None) => break,
                Err(e) if e.errno() == Some(crate::error::errno::EAGAIN) => break,
                Err(_) => {
                    self.state.counts.errors += 1;
                    break;
                }
            }
        }
        if resnapshot && hal.refresh(self.state.port).is_err() {
            self.state.counts.errors += 1;
        }
        if self.checked.elapsed() >= REGISTERED_EVERY {
            self.checked = Instant::now();
            hal.check_registered();
        }
        if !self.fault_seen
            && let Some(f) = hal.fault()
        {
            self.fault_seen = true;
            out.push(Happened::Fatal(f));
        }
        out.len() - before
    }
}

impl AsRawFd for Events {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netevents::parse;
    use core::net::Ipv4Addr;
    use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState};

    /// Counts retirements per (GID, MAC); retires one AH per call for a GID
    /// it holds an AH to under another MAC.
    #[derive(Default)]
    struct Table {
        ahs: Vec<(Gid, [u8; 6])>,
        forgotten: Vec<Gid>,
    }

    impl EventTarget for Table {
        fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize {
            let before = self.ahs.len();
            self.ahs.retain(|(g, m)| g != dgid || *m == dmac);
            before - self.ahs.len()
        }
        fn forget(&mut self, dgid: &Gid) {
            self.forgotten.push(*dgid);
        }
    }

    fn neigh(ip: Ipv4Addr, mac: [u8; 6]) -> Vec<NetEvent> {
        let mut n = NeighbourMessage::default();
        n.header.family = netlink_packet_route::AddressFamily::Inet;
        n.header.ifindex = 3;
        n.header.state = NeighbourState::Reachable;
        n.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)));
        n.attributes.push(NeighbourAttribute::LinkLocalAddress(mac.to_vec()));
        let mut msg = NetlinkMessage::new(
            NetlinkHeader::default(),
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(n)),
        );
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        let mut out = Vec::new();
        assert_eq!(parse(&buf, &mut out), 1);
        out
    }

    const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const C: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
    const MAC1: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 2];
    const MAC2: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 0x12];
    const MACC: [u8; 6] = [0x52, 0x54, 0, 0xda, 0, 3];

    fn gid(ip: Ipv4Addr) -> Gid {
        gid_of(IpAddr::V4(ip))
    }

    #[test]
    fn a_mac_change_retires_only_that_peers_ahs_and_a_refresh_nothing() {
        let mut s = EventState::new(1, true);
        let mut t = Table { ahs: vec![(gid(B), MAC1), (gid(C), MACC)], ..Table::default() };
        let mut out = Vec::new();
        for ev in neigh(B, MAC1).iter().chain(&neigh(C, MACC)).chain(&neigh(B, MAC1)) {
            assert!(!s.on_net(ev, &mut t, &mut out));
        }
        assert!(out.is_empty(), "first sightings and a refresh with the same MAC: {out:?}");
        assert_eq!(t.ahs.len(), 2);
        for ev in &neigh(B, MAC2) {
            s.on_net(ev, &mut t, &mut out);
        }
        assert_eq!(out, [Happened::NeighbourMoved { addr: IpAddr::V4(B), old: MAC1, new: MAC2, retired: 1 }]);
        assert_eq!(t.ahs, [(gid(C), MACC)], "C's AH stays");
        assert_eq!((s.counts().mac_changes, s.counts().retired), (1, 1));
        let lost = NetEvent::Neighbour { ifindex: 3, addr: IpAddr::V4(B), lladdr: None, unresolved: true, gone: false };
        s.on_net(&lost, &mut t, &mut out);
        assert_eq!(t.forgotten, [gid(B)]);
    }

    #[test]
    fn port_error_stops_creating_and_port_active_resumes() {
        let mut s = EventState::new(1, true);
        let mut out = Vec::new();
        s.on_async(EventType::PortErr, Some(2), &mut out);
        assert!(s.creating(), "another port's error");
        s.on_async(EventType::PortErr, Some(1), &mut out);
        assert!(!s.creating());
        s.on_async(EventType::PortActive, Some(1), &mut out);
        assert!(s.creating());
        s.on_async(EventType::GidChange, Some(1), &mut out);
        assert_eq!(
            out,
            [
                Happened::Port { port: 1, up: false },
                Happened::Port { port: 1, up: true },
                Happened::GidChange { event: EventType::GidChange }
            ]
        );
        let c = s.counts();
        assert_eq!((c.port_errors, c.port_actives, c.gid_changes, c.async_events), (1, 1, 1, 4));
    }

    #[test]
    fn a_local_mac_or_address_change_asks_for_a_resnapshot() {
        let mut s = EventState::new(1, true);
        let mut t = Table::default();
        let mut out = Vec::new();
        let link =
            |mac, up| NetEvent::Link { ifindex: 4, name: Some("udah0".into()), up, lladdr: Some(mac), gone: false };
        assert!(!s.on_net(&link(MAC1, true), &mut t, &mut out), "first sighting");
        assert!(!s.on_net(&link(MAC1, false), &mut t, &mut out), "down, same MAC");
        assert!(s.on_net(&link(MAC2, true), &mut t, &mut out), "another MAC");
        let addr = NetEvent::Address { ifindex: 4, addr: IpAddr::V4(B), gone: false };
        assert!(s.on_net(&addr, &mut t, &mut out));
        assert_eq!(
            out,
            [
                Happened::Link { name: Some("udah0".into()), up: false },
                Happened::Link { name: Some("udah0".into()), up: true },
                Happened::LocalChange { ifindex: 4 },
                Happened::LocalChange { ifindex: 4 }
            ]
        );
    }
}
