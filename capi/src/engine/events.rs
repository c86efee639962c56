//! The network events that keep a C responder's AHs current, for programs
//! without an event loop of their own (`udah_responder_event_fd`,
//! `udah_responder_process_events`): the rtnetlink watcher of
//! `udah-netevents`, whose socket is the responder's event fd.
//!
//! | event | what [`NetEngine::apply`] does |
//! | --- | --- |
//! | a neighbour's MAC changed | retires the AHs to that address (only those: a refresh with the same MAC, or a first sighting, retires nothing) |
//! | a local MAC changed, a local address came or went | re-reads the GID table (a responder over a fixed table: nothing) |
//!
//! The engine asks the kernel for its neighbour table when it opens, so that
//! a peer resolved before then is known, and its later MAC change reads as
//! a change. The context's asynchronous events (GID change, port events)
//! stay the application's: it passes them to `udah_handle_async_event`.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use udah_netevents::{NeighChange, Neighbours, NetEvent, NetWatch, gid_of};

use super::Responder;

/// What the events did, for `struct udah_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Network events read.
    pub net_events: u64,
    /// Neighbours that now resolve to another MAC.
    pub mac_changes: u64,
    /// AHs retired because their destination's MAC changed.
    pub retired: u64,
    /// GID-table re-reads asked for by a local MAC or address change.
    pub local_changes: u64,
}

/// A responder's network-event engine.
#[derive(Debug)]
pub(super) struct NetEngine {
    watch: NetWatch,
    neighbours: Neighbours,
    link_mac: HashMap<u32, [u8; 6]>,
    buf: Vec<NetEvent>,
    counts: EventCounts,
}

impl NetEngine {
    /// Opens the rtnetlink watcher and asks for the neighbour table.
    pub(super) fn open() -> io::Result<NetEngine> {
        let mut watch = NetWatch::open()?;
        watch.request_neighbours()?;
        Ok(NetEngine::with_watch(watch))
    }

    fn with_watch(watch: NetWatch) -> NetEngine {
        NetEngine {
            watch,
            neighbours: Neighbours::new(),
            link_mac: HashMap::new(),
            buf: Vec::new(),
            counts: EventCounts::default(),
        }
    }

    /// The counts so far.
    pub(super) fn counts(&self) -> EventCounts {
        self.counts
    }

    /// Reads every event waiting (never blocks) and applies it to `r`;
    /// returns how many were read. `ENOBUFS` (the kernel dropped events:
    /// a MAC change may be among them) is returned after the events that
    /// were read are applied; the caller may retire what it no longer trusts.
    pub(super) fn process(&mut self, r: &Responder) -> io::Result<usize> {
        self.buf.clear();
        let read = self.watch.read(&mut self.buf);
        let events = core::mem::take(&mut self.buf);
        for ev in &events {
            self.apply(ev, r);
        }
        let n = events.len();
        self.buf = events;
        read.map(|_| n)
    }

    /// Applies one event to `r`.
    pub(super) fn apply(&mut self, ev: &NetEvent, r: &Responder) {
        self.counts.net_events += 1;
        match (ev, self.neighbours.apply(ev)) {
            (NetEvent::Neighbour { addr, .. }, NeighChange::Changed { .. }) => {
                self.counts.mac_changes += 1;
                self.counts.retired += r.retire_dgid(&gid_of(*addr)) as u64;
            }
            (NetEvent::Link { ifindex, lladdr, gone, .. }, _) => {
                let moved = match (lladdr, gone) {
                    (Some(m), false) => self.link_mac.insert(*ifindex, *m).is_some_and(|old| old != *m),
                    _ => self.link_mac.remove(ifindex).is_some(),
                };
                if moved {
                    self.resnapshot(r);
                }
            }
            (NetEvent::Address { .. }, _) => self.resnapshot(r),
            _ => {}
        }
    }

    fn resnapshot(&mut self, r: &Responder) {
        self.counts.local_changes += 1;
        // A responder over a fixed table has nothing to re-read
        // (`EOPNOTSUPP`); a failed re-read is counted by the responder and
        // leaves the previous snapshot in use.
        let _ = r.refresh();
    }
}

impl AsRawFd for NetEngine {
    fn as_raw_fd(&self) -> RawFd {
        self.watch.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{v4_area, v4_responder};
    use core::net::{IpAddr, Ipv4Addr};
    use udah_core::ah::{IBV_WC_GRH, IbvWc};

    fn neigh(ip: [u8; 4], mac: u8) -> NetEvent {
        NetEvent::Neighbour {
            ifindex: 2,
            addr: IpAddr::V4(Ipv4Addr::from(ip)),
            lladdr: Some([2, 0, 0, 0, 0, mac]),
            unresolved: false,
            gone: false,
        }
    }

    #[test]
    fn only_a_changed_mac_retires_and_only_that_peers_ahs() {
        let local = [10, 0, 0, 1];
        let r = v4_responder(local);
        let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
        let (b, c) = ([10, 0, 0, 2], [10, 0, 0, 3]);
        let ah_b = r.create_ah_from_wc(&wc, &v4_area(b, local)).unwrap();
        let ah_c = r.create_ah_from_wc(&wc, &v4_area(c, local)).unwrap();
        let mut e = NetEngine::open().unwrap();
        // First sightings (the table dump) and refreshes retire nothing.
        e.apply(&neigh(b, 1), &r);
        e.apply(&neigh(c, 1), &r);
        e.apply(&neigh(b, 1), &r);
        assert_eq!(e.counts().retired, 0);
        assert_eq!((r.is_current(ah_b), r.is_current(ah_c)), (Ok(true), Ok(true)));
        // B moves: B's AH only; the held handle stays valid until given back.
        e.apply(&neigh(b, 2), &r);
        assert_eq!((e.counts().mac_changes, e.counts().retired), (1, 1));
        assert_eq!((r.is_current(ah_b), r.is_current(ah_c)), (Ok(false), Ok(true)));
        let again = r.create_ah_from_wc(&wc, &v4_area(b, local)).unwrap();
        assert_ne!(again, ah_b, "B's next request gets a new AH");
        for ah in [ah_b, ah_c, again] {
            r.destroy_ah(ah).unwrap();
        }
        // A local address change asks for a re-read (refused here: a
        // fixed table), and reading the real socket never blocks.
        e.apply(&NetEvent::Address { ifindex: 2, addr: IpAddr::V4(Ipv4Addr::from(local)), gone: false }, &r);
        assert_eq!(e.counts().local_changes, 1);
        assert!(e.process(&r).is_ok());
        r.close().unwrap();
    }
}
