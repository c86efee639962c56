//! `udah serve`'s network events: the rtnetlink watcher of hal-ibverbs
//! ([`NetWatch`]) read between polls of the receive queue, so that an AH
//! whose peer's MAC changed is retired (and the peer's next request gets a
//! new one) while AHs to every other peer stay.

use udah_core::hal::{AhToken, Hal};
use udah_core::wire::Gid;
use udah_hal_ibverbs::netevents::{NeighChange, Neighbours, NetEvent, NetWatch, gid_of};

use super::pipeline::Pipeline;

/// How many receive-loop turns may pass between two reads of the watcher
/// when the receive queue is never empty (one non-blocking `recv` each).
const EVERY: u32 = 256;

/// The watcher, what it has seen, and what it retired.
#[derive(Debug)]
pub(crate) struct NetEvents {
    watch: Option<NetWatch>,
    neighbours: Neighbours,
    buf: Vec<NetEvent>,
    turns: u32,
    /// Neighbour entries that now resolve to another MAC.
    pub(crate) mac_changes: u64,
    /// AHs retired because their destination's MAC changed.
    pub(crate) retired: u64,
    /// Links that went down or came up.
    pub(crate) links: u64,
    /// The last state seen per interface index (links report other changes
    /// too, which are not events here).
    link_up: std::collections::HashMap<u32, bool>,
}

impl NetEvents {
    /// Opens the watcher; without one (no rtnetlink), says so once and
    /// retires on GID changes only.
    pub(crate) fn open() -> NetEvents {
        let watch = match NetWatch::open() {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("udah serve: network events unavailable ({e}); AHs are retired on GID changes only");
                None
            }
        };
        NetEvents {
            watch,
            neighbours: Neighbours::new(),
            buf: Vec::new(),
            turns: 0,
            mac_changes: 0,
            retired: 0,
            links: 0,
            link_up: std::collections::HashMap::new(),
        }
    }

    /// Reads what is waiting when the receive queue was empty (`idle`) or
    /// every [`EVERY`] turns, and retires the AHs it makes stale.
    /// `forget` hears of every address whose neighbour entry went away or
    /// stopped resolving.
    pub(crate) fn turn<H: Hal>(&mut self, idle: bool, pipeline: &mut Pipeline<'_, H>, forget: &mut dyn FnMut(&Gid))
    where
        H::Ah: AhToken,
    {
        self.turns = self.turns.wrapping_add(1);
        if !idle && !self.turns.is_multiple_of(EVERY) {
            return;
        }
        let Some(w) = self.watch.as_mut() else { return };
        self.buf.clear();
        if let Err(e) = w.read(&mut self.buf) {
            // ENOBUFS: events were dropped; a MAC change may be among them.
            let n = pipeline.cache().table().stats().live;
            eprintln!("udah serve: network events lost ({e}); {n} AH(s) kept until their peer's next neighbour event");
        }
        for ev in self.buf.drain(..) {
            match (&ev, self.neighbours.apply(&ev)) {
                (
                    NetEvent::Neighbour { addr, .. },
                    change @ (NeighChange::New(new) | NeighChange::Changed { new, .. }),
                ) => {
                    // Also on a first sighting: an AH may have been built
                    // before the watcher saw this address.
                    let n = pipeline.retire_l2_change(&gid_of(*addr), new);
                    if let NeighChange::Changed { old, .. } = change {
                        self.mac_changes += 1;
                        println!("event: neighbour {addr} moved {} -> {}: {n} AH(s) retired", mac(old), mac(new));
                    } else if n > 0 {
                        println!("event: neighbour {addr} is at {}: {n} AH(s) built for another MAC retired", mac(new));
                    }
                    self.retired += n as u64;
                }
                (NetEvent::Neighbour { addr, .. }, NeighChange::Lost { .. }) => forget(&gid_of(*addr)),
                (NetEvent::Link { ifindex, name, up, .. }, _) => {
                    // A link first seen up is no event (links report other
                    // changes too); first seen down, or a change, is.
                    let was = self.link_up.insert(*ifindex, *up);
                    if was.map_or(!*up, |was| was != *up) {
                        self.links += 1;
                        println!("event: link {} {}", name.as_deref().unwrap_or("?"), if *up { "up" } else { "down" });
                    }
                }
                _ => {}
            }
        }
    }
}

fn mac(m: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = m;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}
