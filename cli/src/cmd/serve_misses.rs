//! `udah serve`'s misses off the receive loop: a request whose destination
//! has not been resolved yet is held in a [`MissQueue`] (bounded per peer
//! and in total; `--pending-per-peer`, `--pending-total`) while a worker
//! thread resolves its MAC (`ibv_resolve_eth_l2_from_gid`, up to seconds for
//! an address that does not answer); requests to resolved destinations and
//! to AHs already in the table are answered meanwhile.

use udah_core::hal::{AhToken, Error as _, ErrorKind, Hal};
use udah_core::wire::{Area, Gid};
use udah_hal_ibverbs::{IbverbsHal, WorkCompletion};

use super::pipeline::{Pipeline, release};
use udah_cli::miss_queue::{Admit, Limits, MissQueue};

/// A request kept until its destination resolves: the completion, its
/// 40-byte area and the payload to echo.
pub(crate) type Held = (WorkCompletion, Area, Vec<u8>);

/// The queue, or none when its thread could not start (misses are then
/// resolved inline, as before).
#[derive(Debug)]
pub(crate) struct Misses {
    q: Option<MissQueue<Held>>,
    done: Vec<(Result<(), String>, Held)>,
}

impl Misses {
    /// Starts the resolver thread on a clone of the backend's context.
    pub(crate) fn start(hal: &IbverbsHal, per_peer: usize, total: usize) -> Misses {
        let ctx = hal.context().clone();
        let resolve = move |attr: &udah_core::ah::AhAttr| match ctx.resolve_eth_l2(attr) {
            Ok(_) => Ok(()),
            // The kernel resolves the neighbour itself in `ibv_create_ah`.
            Err(e) if e.kind() == ErrorKind::Unsupported => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        let q = match MissQueue::new(Limits { per_peer, total }, resolve) {
            Ok(q) => Some(q),
            Err(e) => {
                eprintln!("udah serve: no resolver thread ({e}); misses resolve on the receive loop");
                None
            }
        };
        Misses { q, done: Vec::new() }
    }

    /// Lets a request through when its AH is in the table or its
    /// destination is resolved; else holds or refuses it.
    pub(crate) fn admit<H: Hal>(&mut self, pipeline: &mut Pipeline<'_, H>, item: Held) -> Admit<Held>
    where
        H::Ah: AhToken,
    {
        let Some(q) = self.q.as_mut() else { return Admit::Go(item) };
        // A completion the profile refuses goes on: the answer path reports it.
        let Ok(words) = pipeline.words(&item.0.ibv(), &item.1) else { return Admit::Go(item) };
        let Some(dgid) = words.dgid() else { return Admit::Go(item) };
        if q.is_resolved(&dgid) {
            return Admit::Go(item);
        }
        if let Some(h) = pipeline.cache().table().get(&words) {
            release(pipeline, h);
            return Admit::Go(item);
        }
        match words.to_attr() {
            Ok(attr) => q.admit(&attr, item),
            Err(_) => Admit::Go(item),
        }
    }

    /// Whether `item`'s AH is in the table (or the profile refuses it, which
    /// the answer path reports): what may still be answered while no AH
    /// can be created.
    pub(crate) fn is_hit<H: Hal>(&self, pipeline: &mut Pipeline<'_, H>, item: &Held) -> bool
    where
        H::Ah: AhToken,
    {
        let Ok(words) = pipeline.words(&item.0.ibv(), &item.1) else { return true };
        match pipeline.cache().table().get(&words) {
            Some(h) => {
                release(pipeline, h);
                true
            }
            None => false,
        }
    }

    /// Appends the held requests whose destination resolved to `ready`;
    /// counts (and reports) those whose destination did not.
    pub(crate) fn completed(&mut self, ready: &mut Vec<Held>, unresolved: &mut u64) {
        let Some(q) = self.q.as_mut() else { return };
        if q.completed(&mut self.done) == 0 {
            return;
        }
        for (r, item) in self.done.drain(..) {
            match r {
                Ok(()) => ready.push(item),
                Err(why) => {
                    *unresolved += 1;
                    eprintln!(
                        "udah: request from QPN {:#x} dropped: its address did not resolve ({why})",
                        item.0.src_qp
                    );
                }
            }
        }
    }

    /// A neighbour went away: its next miss resolves again.
    pub(crate) fn forget(&mut self, dgid: &Gid) {
        if let Some(q) = self.q.as_mut() {
            q.forget(dgid);
        }
    }

    /// The summary line.
    pub(crate) fn line(&self, refused: u64, unresolved: u64) -> String {
        let Some(q) = &self.q else { return "misses: resolved on the receive loop (no resolver thread)".into() };
        let s = q.stats();
        format!(
            "misses off the receive loop: {} destination(s) resolved, {} did not; {} request(s) held, {refused} \
             refused ({} peer full, {} queue full), {unresolved} dropped unresolved, {} still held",
            s.resolved,
            s.unresolved,
            s.held,
            s.refused_peer_full,
            s.refused_total_full,
            q.held()
        )
    }
}
