//! `udah serve`'s misses off the receive loop: a request whose destination
//! has not been resolved yet is held in a [`MissQueue`] (bounded per peer
//! and in total; `--pending-per-peer`, `--pending-total`) while a worker
//! thread resolves its MAC (`ibv_resolve_eth_l2_from_gid`, up to seconds for
//! an address that does not answer); requests to resolved destinations and
//! to AHs already in the table are answered meanwhile.

use udah_core::ah::{AhAttr, IbvWc};
use udah_core::hal::{AhToken, Hal};
#[cfg(feature = "ibverbs")]
use udah_core::hal::{Error as _, ErrorKind};
use udah_core::wire::{Area, Gid};
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::{IbverbsHal, WorkCompletion};

use super::pipeline::{Pipeline, release};
#[cfg(test)]
use udah_cli::miss_queue::MissStats;
use udah_cli::miss_queue::{Admit, Limits, MissQueue};

/// A completion as the pipeline reads it.
pub(crate) trait AsIbvWc {
    /// libibverbs' view of it.
    fn ibv(&self) -> IbvWc;
}

#[cfg(feature = "ibverbs")]
impl AsIbvWc for WorkCompletion {
    fn ibv(&self) -> IbvWc {
        WorkCompletion::ibv(self)
    }
}

impl AsIbvWc for IbvWc {
    fn ibv(&self) -> IbvWc {
        *self
    }
}

/// A request kept until its destination resolves: the completion, its
/// 40-byte area and the payload to echo.
pub(crate) type Held<W> = (W, Area, Vec<u8>);

/// The queue, or none when its thread could not start (misses are then
/// resolved inline, as before). Generic over the completion type, so that
/// the same code runs on the mock in tests.
#[derive(Debug)]
pub(crate) struct Misses<W> {
    q: Option<MissQueue<Held<W>>>,
    done: Vec<(Result<(), String>, Held<W>)>,
}

#[cfg(feature = "ibverbs")]
impl AsIbvWc for super::verbs_port::Stamped {
    fn ibv(&self) -> IbvWc {
        self.wc.ibv()
    }
}

#[cfg(feature = "ibverbs")]
impl<W: AsIbvWc> Misses<W> {
    /// Starts the resolver thread on a clone of the backend's context.
    pub(crate) fn start(hal: &IbverbsHal, per_peer: usize, total: usize) -> Misses<W> {
        let ctx = hal.context().clone();
        let resolve = move |attr: &udah_core::ah::AhAttr| match ctx.resolve_eth_l2(attr) {
            Ok(_) => Ok(()),
            // The kernel resolves the neighbour itself in `ibv_create_ah`.
            Err(e) if e.kind() == ErrorKind::Unsupported => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        Misses::with_resolver(resolve, per_peer, total)
    }
}

impl<W: AsIbvWc> Misses<W> {
    /// Starts the resolver thread with `resolve` (which may block for as
    /// long as the destination takes).
    pub(crate) fn with_resolver<F>(resolve: F, per_peer: usize, total: usize) -> Misses<W>
    where
        F: FnMut(&AhAttr) -> Result<(), String> + Send + 'static,
    {
        let q = match MissQueue::new(Limits { per_peer, total }, resolve) {
            Ok(q) => Some(q),
            Err(e) => {
                eprintln!("udah serve: no resolver thread ({e}); misses resolve on the receive loop");
                None
            }
        };
        Misses { q, done: Vec::new() }
    }

    /// The queue's counters and the requests held now.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> Option<(MissStats, usize)> {
        self.q.as_ref().map(|q| (q.stats(), q.held()))
    }

    /// Lets a request through when its AH is in the table or its
    /// destination is resolved; else holds or refuses it.
    pub(crate) fn admit<H: Hal, const N: usize>(
        &mut self,
        pipeline: &mut Pipeline<'_, H, N>,
        item: Held<W>,
    ) -> Admit<Held<W>>
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

    #[cfg(feature = "ibverbs")]
    /// Whether `item`'s AH is in the table (or the profile refuses it, which
    /// the answer path reports): what may still be answered while no AH
    /// can be created.
    pub(crate) fn is_hit<H: Hal, const N: usize>(&self, pipeline: &mut Pipeline<'_, H, N>, item: &Held<W>) -> bool
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
    pub(crate) fn completed(&mut self, ready: &mut Vec<Held<W>>, unresolved: &mut u64) {
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
                        item.0.ibv().src_qp
                    );
                }
            }
        }
    }

    #[cfg(feature = "ibverbs")]
    /// A neighbour went away: its next miss resolves again.
    pub(crate) fn forget(&mut self, dgid: &Gid) {
        if let Some(q) = self.q.as_mut() {
            q.forget(dgid);
        }
    }

    #[cfg(feature = "ibverbs")]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::pipeline::tests::v4_area;
    use crate::cmd::pipeline::{REPLY_BATCH, pipeline, reply_ahs};
    use udah_core::ah::{IBV_WC_GRH, PortNum};
    use udah_hal_mock::{Fabric, MockHal, PortConfig};

    const SERVER: [u8; 4] = [10, 0, 0, 1];
    const PEER: [u8; 4] = [10, 0, 0, 2];

    fn request(src: [u8; 4], qpn: u32) -> Held<IbvWc> {
        (IbvWc { wc_flags: IBV_WC_GRH, src_qp: qpn, ..IbvWc::default() }, v4_area(src, SERVER), vec![0; 8])
    }

    /// Answers `items` as serve's loop does; returns how many got an AH.
    fn answer(p: &mut Pipeline<'_, MockHal>, items: &[Held<IbvWc>]) -> usize {
        let mut out: Vec<Option<_>> = (0..REPLY_BATCH).map(|_| None).collect();
        let n = reply_ahs(p, items.iter().map(|(wc, area, _)| (wc, area)), &mut out).unwrap();
        let mut ok = 0;
        for o in out.iter_mut().take(n) {
            if let Some(Ok(h)) = o.take() {
                ok += 1;
                release(p, h);
            }
        }
        ok
    }

    /// Spins (no clock) until the queue hands something back or holds
    /// nothing; `None` after a bound no working queue reaches.
    fn drain(m: &mut Misses<IbvWc>, ready: &mut Vec<Held<IbvWc>>, unresolved: &mut u64, until_empty: bool) -> bool {
        for _ in 0..50_000_000u64 {
            m.completed(ready, unresolved);
            let held = m.stats().map_or(0, |(_, h)| h);
            if (until_empty && held == 0) || (!until_empty && !ready.is_empty()) {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// Issue 27's stall property, deterministically: 100 senders whose
    /// addresses never resolve (hal-mock's `resolve_l2` blocks on them)
    /// interleaved with an established peer, through serve's pipeline and
    /// miss queue. The established peer is answered every time; the 100
    /// are held (bounded) or refused, and dropped once their resolution
    /// fails; nothing else grows.
    #[test]
    fn unresolvable_senders_never_stall_an_established_peer() {
        let fabric = Fabric::new(27);
        let server = fabric.add_port(PortConfig::roce([2, 0, 0, 0, 0, 1]).with_ipv4(SERVER));
        fabric.add_port(PortConfig::roce([2, 0, 0, 0, 0, 2]).with_ipv4(PEER));
        let hal = MockHal::new(&fabric, server.device);
        let mut p = pipeline(&hal, PortNum::new(server.port).unwrap(), None).unwrap();
        let flood: Vec<[u8; 4]> = (0..100u8).map(|k| [10, 0, 1, k]).collect();
        for ip in &flood {
            fabric.stall_resolve(Gid::from_ipv4(*ip));
        }
        let (per_peer, total) = (4, 64);
        let resolver = hal.clone();
        let mut m: Misses<IbvWc> = Misses::with_resolver(
            move |a| resolver.resolve_l2(a).map(|_| ()).map_err(|e| e.to_string()),
            per_peer,
            total,
        );
        let (mut ready, mut unresolved) = (Vec::new(), 0u64);

        // The peer's first request resolves off the loop, then is answered.
        assert!(matches!(m.admit(&mut p, request(PEER, 1)), Admit::Held));
        assert!(drain(&mut m, &mut ready, &mut unresolved, false), "the peer's address never resolved");
        assert_eq!(answer(&mut p, &ready), 1);
        ready.clear();

        let (mut answered, mut held, mut refused, mut max_held) = (0, 0, 0, 0);
        for (k, ip) in flood.iter().enumerate() {
            match m.admit(&mut p, request(*ip, 100 + k as u32)) {
                Admit::Held => held += 1,
                Admit::Refused(..) => refused += 1,
                Admit::Go(_) => panic!("{ip:?} does not resolve: it cannot go"),
            }
            match m.admit(&mut p, request(PEER, 1)) {
                Admit::Go(item) => answered += answer(&mut p, &[item]),
                _ => panic!("the established peer waited behind request {k}"),
            }
            m.completed(&mut ready, &mut unresolved);
            assert!(ready.is_empty(), "nothing of the flood resolves while it is stalled");
            max_held = max_held.max(m.stats().unwrap().1);
        }
        assert_eq!(answered, 100, "the established peer is answered every time");
        assert_eq!(held + refused, 100);
        assert!(max_held <= total, "held {max_held} > the bound {total}");
        let (s, _) = m.stats().unwrap();
        assert_eq!((s.held, s.refused_peer_full + s.refused_total_full), (held as u64 + 1, refused as u64));
        assert!(held > 0 && refused > 0, "held {held}, refused {refused}");

        // Their neighbours never answer: once the resolutions fail, every
        // held request is dropped and counted.
        for ip in &flood {
            fabric.release_resolve(&Gid::from_ipv4(*ip));
        }
        assert!(drain(&mut m, &mut ready, &mut unresolved, true), "held requests never dropped");
        assert!(ready.is_empty());
        assert_eq!(unresolved, held as u64);
        let (s, now) = m.stats().unwrap();
        assert_eq!((s.dropped_unresolved, now), (held as u64, 0));
        assert_eq!(p.cache().table().stats().live, 1, "one AH: the established peer's");
        println!("flood of 100: {held} held then dropped unresolved, {refused} refused; peer answered {answered}/100");
    }
}
