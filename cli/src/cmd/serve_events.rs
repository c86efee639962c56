//! `udah serve`'s events: hal-ibverbs' event engine ([`Events`]: rtnetlink
//! and the verbs asynchronous events) read between polls of the receive
//! queue, and what it did printed as `event: …` lines. An AH whose peer's
//! MAC changed is retired (the peer's next request gets a new one) while
//! AHs to every other peer stay; while the port is down no AH is created.

use udah_core::hal::{AhToken, Hal};
use udah_core::wire::Gid;
use udah_hal_ibverbs::IbverbsHal;
use udah_hal_ibverbs::events::{EventCounts, EventTarget, Events, Happened};

use super::pipeline::Pipeline;

/// How many receive-loop turns may pass between two reads of the events
/// when the receive queue is never empty.
const EVERY: u32 = 256;

/// The engine (none when it could not open: the backend's listener thread
/// then keeps the GID snapshot current) and its report buffer.
#[derive(Debug)]
pub(crate) struct NetEvents {
    engine: Option<Events>,
    out: Vec<Happened>,
    turns: u32,
}

/// The pipeline and the miss queue's `forget`, as the engine's target.
struct Target<'p, 'h, H: Hal, F: FnMut(&Gid), const N: usize>
where
    H::Ah: AhToken,
{
    pipeline: &'p mut Pipeline<'h, H, N>,
    forget: F,
}

impl<H: Hal, F: FnMut(&Gid), const N: usize> EventTarget for Target<'_, '_, H, F, N>
where
    H::Ah: AhToken,
{
    fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.pipeline.retire_l2_change(dgid, dmac)
    }
    fn forget(&mut self, dgid: &Gid) {
        (self.forget)(dgid);
    }
}

impl NetEvents {
    /// Opens the engine on `port` of `hal`; says what it cannot watch.
    pub(crate) fn open(hal: &IbverbsHal, port: u8) -> Result<NetEvents, udah_hal_ibverbs::VerbsError> {
        match Events::open(hal, port) {
            Ok((engine, net_error)) => {
                if let Some(e) = net_error {
                    eprintln!("udah serve: network events unavailable ({e}); AHs are retired on GID changes only");
                }
                Ok(NetEvents { engine: Some(engine), out: Vec::new(), turns: 0 })
            }
            Err(e) => {
                eprintln!("udah serve: event engine unavailable ({e}); GID changes only, through the listener");
                hal.start_event_listener()?;
                Ok(NetEvents { engine: None, out: Vec::new(), turns: 0 })
            }
        }
    }

    /// Whether AHs may be created (the port is not down).
    pub(crate) fn creating(&self) -> bool {
        self.engine.as_ref().is_none_or(Events::creating)
    }

    /// The engine's counts.
    pub(crate) fn counts(&self) -> EventCounts {
        self.engine.as_ref().map(Events::counts).unwrap_or_default()
    }

    /// Reads what is waiting when the receive queue was empty (`idle`) or
    /// every [`EVERY`] turns, applies it and prints it. `forget` hears of
    /// every address whose neighbour entry went away or stopped resolving.
    pub(crate) fn turn<H: Hal, const N: usize>(
        &mut self,
        idle: bool,
        hal: &IbverbsHal,
        pipeline: &mut Pipeline<'_, H, N>,
        forget: impl FnMut(&Gid),
    ) where
        H::Ah: AhToken,
    {
        self.turns = self.turns.wrapping_add(1);
        if !idle && !self.turns.is_multiple_of(EVERY) {
            return;
        }
        let Some(engine) = self.engine.as_mut() else { return };
        self.out.clear();
        let live = pipeline.cache().table().stats().live;
        engine.process(hal, &mut Target { pipeline, forget }, &mut self.out);
        for h in self.out.drain(..) {
            match h {
                Happened::NeighbourMoved { addr, old, new, retired } => {
                    println!("event: neighbour {addr} moved {} -> {}: {retired} AH(s) retired", mac(old), mac(new));
                }
                Happened::NeighbourSeen { addr, mac: m, retired } => {
                    println!("event: neighbour {addr} is at {}: {retired} AH(s) built for another MAC retired", mac(m));
                }
                Happened::Link { name, up } => {
                    println!("event: link {} {}", name.as_deref().unwrap_or("?"), if up { "up" } else { "down" });
                }
                Happened::Port { port, up: false } => {
                    println!("event: port {port} down (IBV_EVENT_PORT_ERR): no AH is created until it is active");
                }
                Happened::Port { port, up: true } => {
                    println!("event: port {port} active (IBV_EVENT_PORT_ACTIVE): GIDs re-read, creating again");
                }
                Happened::GidChange { event } => println!("event: IBV_EVENT_{event}: GIDs re-read"),
                Happened::LocalChange { ifindex } => {
                    println!("event: local MAC or address changed on interface {ifindex}: GIDs re-read");
                }
                // serve stops on the backend's fault in its loop.
                Happened::Fatal(_) => {}
                Happened::Lost(e) => {
                    eprintln!(
                        "udah serve: network events lost ({e}); {live} AH(s) kept until their peer's next neighbour event"
                    );
                }
            }
        }
    }
}

fn mac(m: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = m;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}
