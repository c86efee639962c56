//! A miss that never stalls the receive loop: layer-2 resolution off the
//! receive thread, with bounded holding.
//!
//! On RoCE, the first AH to a destination needs its MAC, and resolving it
//! (`ibv_resolve_eth_l2_from_gid`, an ARP/ND exchange) can take seconds
//! when the address does not answer. Done inline, one such sender stalls
//! every established peer. [`MissQueue`] moves it to a worker thread: the
//! receive loop [`admit`](MissQueue::admit)s a request whose destination has
//! not been resolved yet; the request is held (at most
//! [`Limits::per_peer`] per destination and [`Limits::total`] in all) or
//! refused with a counted [`Refusal`], and the loop goes on answering the
//! others. [`completed`](MissQueue::completed) hands back the held requests
//! once their destination resolved (the AH is then created without waiting)
//! or failed to.
//!
//! Generic over what is held and over the resolver, so that the property
//! is tested without a device (the tests below block the resolver at will).

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use udah_core::ah::AhAttr;
use udah_core::wire::Gid;

/// Bounds on what is held while destinations resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests held per destination (0 holds none: a request to an
    /// unresolved destination is refused, its resolution still starts).
    pub per_peer: usize,
    /// Requests held in all; also the resolution queue's depth.
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { per_peer: 4, total: 256 }
    }
}

/// Why a request was not held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Its destination already has [`Limits::per_peer`] requests waiting.
    PeerFull,
    /// [`Limits::total`] requests (or resolutions) are waiting.
    TotalFull,
}

/// What [`MissQueue::admit`] did with a request.
#[derive(Debug)]
pub enum Admit<T> {
    /// The destination is resolved (or needs no resolution): answer now.
    Go(T),
    /// Held until its destination resolves.
    Held,
    /// Not held, for this reason (given back).
    Refused(T, Refusal),
}

/// Counters of a [`MissQueue`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MissStats {
    /// Requests held.
    pub held: u64,
    /// Requests refused because their destination had its share.
    pub refused_peer_full: u64,
    /// Requests refused because the queue was full.
    pub refused_total_full: u64,
    /// Destinations resolved.
    pub resolved: u64,
    /// Destinations that did not resolve.
    pub unresolved: u64,
    /// Held requests handed back with a failed resolution.
    pub dropped_unresolved: u64,
}

/// The most destinations remembered as resolved; past it the set starts
/// over (a forgotten destination costs one more resolution, off the loop).
const RESOLVED_CAP: usize = 1 << 16;

/// Resolutions off the receive thread and the requests waiting for them.
#[derive(Debug)]
pub struct MissQueue<T> {
    jobs: Option<SyncSender<(Gid, AhAttr)>>,
    done: Receiver<(Gid, Result<(), String>)>,
    worker: Option<JoinHandle<()>>,
    held: HashMap<Gid, Vec<T>>,
    in_flight: HashSet<Gid>,
    resolved: HashSet<Gid>,
    total: usize,
    limits: Limits,
    stats: MissStats,
}

impl<T> MissQueue<T> {
    /// Starts the worker thread, which calls `resolve` for each destination
    /// in turn (it may block for as long as it needs).
    pub fn new<F>(limits: Limits, mut resolve: F) -> std::io::Result<MissQueue<T>>
    where
        F: FnMut(&AhAttr) -> Result<(), String> + Send + 'static,
    {
        let (jobs, rx) = sync_channel::<(Gid, AhAttr)>(limits.total.max(1));
        let (tx, done) = sync_channel(limits.total.max(1));
        let worker = std::thread::Builder::new().name("udah-resolve".into()).spawn(move || {
            for (gid, attr) in rx {
                if tx.send((gid, resolve(&attr))).is_err() {
                    break;
                }
            }
        })?;
        Ok(MissQueue {
            jobs: Some(jobs),
            done,
            worker: Some(worker),
            held: HashMap::new(),
            in_flight: HashSet::new(),
            resolved: HashSet::new(),
            total: 0,
            limits,
            stats: MissStats::default(),
        })
    }

    /// The destination resolved (the AH can be created without waiting).
    pub fn is_resolved(&self, dgid: &Gid) -> bool {
        self.resolved.contains(dgid)
    }

    /// Forgets a destination (its neighbour entry went away): the next miss
    /// to it resolves again, off the loop.
    pub fn forget(&mut self, dgid: &Gid) {
        self.resolved.remove(dgid);
    }

    /// A request whose AH is not in the table: go on if its destination is
    /// resolved (or has no GRH, as on InfiniBand), else hold it and start
    /// the resolution, or refuse it.
    pub fn admit(&mut self, attr: &AhAttr, item: T) -> Admit<T> {
        let Some(dgid) = attr.grh.map(|g| g.dgid) else {
            return Admit::Go(item);
        };
        if self.resolved.contains(&dgid) {
            return Admit::Go(item);
        }
        if !self.in_flight.contains(&dgid) {
            let Some(jobs) = &self.jobs else {
                return self.refuse(item, Refusal::TotalFull);
            };
            match jobs.try_send((dgid, *attr)) {
                Ok(()) => {
                    self.in_flight.insert(dgid);
                }
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    return self.refuse(item, Refusal::TotalFull);
                }
            }
        }
        let waiting = self.held.get(&dgid).map_or(0, Vec::len);
        if waiting >= self.limits.per_peer {
            return self.refuse(item, Refusal::PeerFull);
        }
        if self.total >= self.limits.total {
            return self.refuse(item, Refusal::TotalFull);
        }
        self.held.entry(dgid).or_default().push(item);
        self.total += 1;
        self.stats.held += 1;
        Admit::Held
    }

    fn refuse(&mut self, item: T, why: Refusal) -> Admit<T> {
        match why {
            Refusal::PeerFull => self.stats.refused_peer_full += 1,
            Refusal::TotalFull => self.stats.refused_total_full += 1,
        }
        Admit::Refused(item, why)
    }

    /// Hands back, without waiting, the requests whose destination finished
    /// resolving: `Ok` ones to answer now, `Err` ones (with the reason) to
    /// drop. Returns how many were appended to `out`.
    pub fn completed(&mut self, out: &mut Vec<(Result<(), String>, T)>) -> usize {
        let before = out.len();
        while let Ok((dgid, r)) = self.done.try_recv() {
            self.in_flight.remove(&dgid);
            match &r {
                Ok(()) => {
                    if self.resolved.len() >= RESOLVED_CAP {
                        self.resolved.clear();
                    }
                    self.resolved.insert(dgid);
                    self.stats.resolved += 1;
                }
                Err(_) => self.stats.unresolved += 1,
            }
            for item in self.held.remove(&dgid).unwrap_or_default() {
                self.total -= 1;
                if r.is_err() {
                    self.stats.dropped_unresolved += 1;
                }
                out.push((r.clone(), item));
            }
        }
        out.len() - before
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        self.total
    }

    /// Destinations being resolved now.
    pub fn resolving(&self) -> usize {
        self.in_flight.len()
    }

    /// The counters.
    pub fn stats(&self) -> MissStats {
        self.stats
    }
}

impl<T> Drop for MissQueue<T> {
    fn drop(&mut self) {
        // Closing the job channel ends the worker after its current
        // resolution; it is not waited for (a resolution may take seconds).
        self.jobs = None;
        drop(self.worker.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    use udah_core::ah::PortNum;

    fn attr(last: u8) -> AhAttr {
        AhAttr::routed(PortNum::new(1).unwrap(), Gid::from_ipv4([198, 18, 0, last]), 1, 64)
    }

    fn wait_completed<T>(q: &mut MissQueue<T>, want: usize) -> Vec<(Result<(), String>, T)> {
        let mut out = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while out.len() < want && Instant::now() < end {
            q.completed(&mut out);
            std::thread::sleep(Duration::from_millis(1));
        }
        out
    }

    /// 100 senders whose resolution hangs (the resolver blocks until the
    /// test lets it go) interleaved with an established peer: the peer is
    /// answered every time, the 100 are held or refused within the bounds,
    /// and once the resolutions fail every held request comes back as
    /// dropped.
    #[test]
    fn a_flood_of_unresolvable_senders_never_delays_an_established_peer() {
        let gate = Arc::new(Mutex::new(()));
        let blocked = gate.lock().unwrap();
        let g = Arc::clone(&gate);
        let limits = Limits { per_peer: 2, total: 16 };
        let mut q: MissQueue<u32> = MissQueue::new(limits, move |a: &AhAttr| {
            let last = a.grh.map_or(0, |g| g.dgid.0[15]);
            if last == 2 {
                return Ok(());
            }
            drop(g.lock().unwrap());
            Err(format!("198.18.0.{last} does not answer ARP"))
        })
        .unwrap();
        // The established peer resolves first.
        assert!(matches!(q.admit(&attr(2), 0), Admit::Held));
        let done = wait_completed(&mut q, 1);
        assert_eq!(done.len(), 1);
        assert!(done[0].0.is_ok());
        let mut answered = 0;
        let (mut held, mut refused) = (0, 0);
        for i in 0..100u32 {
            for _ in 0..3 {
                match q.admit(&attr(100 + i as u8), i) {
                    Admit::Held => held += 1,
                    Admit::Refused(..) => refused += 1,
                    Admit::Go(_) => panic!("an unresolved sender went through"),
                }
            }
            match q.admit(&attr(2), 1000 + i) {
                Admit::Go(_) => answered += 1,
                other => panic!("the established peer was {other:?}"),
            }
            assert!(q.held() <= limits.total, "memory stays bounded");
        }
        assert_eq!(answered, 100, "the established peer lost nothing");
        assert_eq!(held + refused, 300);
        assert!(held <= limits.total);
        let s = q.stats();
        assert_eq!(s.refused_peer_full + s.refused_total_full, refused as u64);
        drop(blocked);
        let back = wait_completed(&mut q, held);
        assert_eq!(back.len(), held);
        assert!(back.iter().all(|(r, _)| r.is_err()));
        assert_eq!(q.held(), 0);
        assert_eq!(q.stats().dropped_unresolved, held as u64);
    }

    #[test]
    fn a_resolved_destination_goes_straight_through_until_forgotten() {
        let mut q: MissQueue<u8> = MissQueue::new(Limits::default(), |_: &AhAttr| Ok(())).unwrap();
        assert!(matches!(q.admit(&attr(7), 1), Admit::Held));
        assert!(matches!(q.admit(&attr(7), 2), Admit::Held), "joins the resolution in flight");
        let back = wait_completed(&mut q, 2);
        assert_eq!(back.iter().map(|b| b.1).collect::<Vec<_>>(), [1, 2]);
        assert!(q.is_resolved(&attr(7).grh.unwrap().dgid));
        assert!(matches!(q.admit(&attr(7), 3), Admit::Go(3)));
        q.forget(&attr(7).grh.unwrap().dgid);
        assert!(matches!(q.admit(&attr(7), 4), Admit::Held));
        let ib = AhAttr { grh: None, ..attr(7) };
        assert!(matches!(q.admit(&ib, 5), Admit::Go(5)), "no GRH: nothing to resolve");
    }

    #[test]
    fn per_peer_zero_refuses_but_still_resolves() {
        let mut q: MissQueue<u8> = MissQueue::new(Limits { per_peer: 0, total: 4 }, |_: &AhAttr| Ok(())).unwrap();
        assert!(matches!(q.admit(&attr(9), 1), Admit::Refused(1, Refusal::PeerFull)));
        let end = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        while !q.is_resolved(&attr(9).grh.unwrap().dgid) && Instant::now() < end {
            q.completed(&mut out);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(matches!(q.admit(&attr(9), 2), Admit::Go(2)));
    }
}
