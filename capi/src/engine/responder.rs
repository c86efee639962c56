//! [`Responder`]: an [`Engine`] of the capacity its configuration asks for,
//! behind one virtual call. The calls that take the snapshot mutex or sweep
//! the table are calls in flight for `fork` ([`crate::fork`]) here; the AH
//! calls mark only their windows (a miss, a slot's `BUSY` transition), in
//! [`Engine`], so that a hit stays without a locked instruction of its own.

use super::*;
use std::os::fd::{AsRawFd, RawFd};

/// A responder's settings beyond its context, port and PD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// AH-table slots: one of [`AH_SLOTS`](udah_core::heap::AH_SLOTS).
    pub ah_slots: usize,
    /// Whose completions may create an AH (the AH requests from
    /// completions; an attribute the application gives is its own).
    pub admission: Admission,
}

impl Default for Options {
    fn default() -> Options {
        Options { ah_slots: AH_CAP, admission: Admission::allow_all() }
    }
}

/// What a responder does, whatever its table's capacity: the methods of
/// [`Engine`] (see there).
trait Ops: Send + Sync + core::fmt::Debug {
    fn port(&self) -> u8;
    fn ah_slots(&self) -> usize;
    fn init_ah_from_wc(
        &self,
        wc: &IbvWc,
        area: Option<&Area>,
        profile: Profile,
        evidence: Evidence,
    ) -> (IbvAhAttr, i32);
    fn create_ah_from_wc(&self, wc: &IbvWc, area: &Area) -> Result<AhPtr, AhFailure>;
    fn create_ah(&self, attr: &IbvAhAttr) -> Result<AhPtr, AhFailure>;
    fn create_ah_batch(&self, batch: &[(IbvWc, Option<&Area>)], out: &mut [Result<AhPtr, AhFailure>]);
    fn destroy_ah(&self, ah: AhPtr) -> Result<(), i32>;
    fn is_current(&self, ah: AhPtr) -> Result<bool, i32>;
    fn refresh(&self) -> Result<(), i32>;
    fn handle_event(&self, event_type: u32, port: Option<i32>) -> Result<bool, i32>;
    fn stats(&self) -> Stats;
    fn close(&self) -> Result<(), i32>;
    fn retire_dgid(&self, dgid: &Gid) -> usize;
}

impl<const N: usize> Ops for Engine<N> {
    fn port(&self) -> u8 {
        Engine::port(self)
    }
    fn ah_slots(&self) -> usize {
        N
    }
    fn init_ah_from_wc(
        &self,
        wc: &IbvWc,
        area: Option<&Area>,
        profile: Profile,
        evidence: Evidence,
    ) -> (IbvAhAttr, i32) {
        Engine::init_ah_from_wc(self, wc, area, profile, evidence)
    }
    fn create_ah_from_wc(&self, wc: &IbvWc, area: &Area) -> Result<AhPtr, AhFailure> {
        Engine::create_ah_from_wc(self, wc, area)
    }
    fn create_ah(&self, attr: &IbvAhAttr) -> Result<AhPtr, AhFailure> {
        Engine::create_ah(self, attr)
    }
    fn create_ah_batch(&self, batch: &[(IbvWc, Option<&Area>)], out: &mut [Result<AhPtr, AhFailure>]) {
        Engine::create_ah_batch(self, batch, out)
    }
    fn destroy_ah(&self, ah: AhPtr) -> Result<(), i32> {
        Engine::destroy_ah(self, ah)
    }
    fn is_current(&self, ah: AhPtr) -> Result<bool, i32> {
        Engine::is_current(self, ah)
    }
    fn refresh(&self) -> Result<(), i32> {
        Engine::refresh(self)
    }
    fn handle_event(&self, event_type: u32, port: Option<i32>) -> Result<bool, i32> {
        Engine::handle_event(self, event_type, port)
    }
    fn stats(&self) -> Stats {
        Engine::stats(self)
    }
    fn close(&self) -> Result<(), i32> {
        Engine::close(self)
    }
    fn retire_dgid(&self, dgid: &Gid) -> usize {
        Engine::retire_dgid(self, dgid)
    }
}

/// A C responder: an [`Engine`] whose AH table has the capacity its
/// [`Options`] ask for (one of [`AH_SLOTS`](udah_core::heap::AH_SLOTS);
/// the capacity is a const parameter of the table, so each is an
/// instantiation, chosen once at open). Thread safe and fork safe
/// ([`crate::fork`]).
#[derive(Debug)]
pub struct Responder {
    engine: Box<dyn Ops>,
    /// The network-event engine, opened by the first
    /// [`event_fd`](Self::event_fd).
    events: Mutex<Option<super::events::NetEngine>>,
}

impl Responder {
    fn new(engine: Box<dyn Ops>) -> Responder {
        Responder { engine, events: Mutex::new(None) }
    }
}

impl Responder {
    /// A responder over the application's context and PD (both borrowed).
    /// `pd` may be null: the responder then only computes attributes.
    /// `EINVAL` for a capacity not in `AH_SLOTS`.
    ///
    /// # Safety
    /// `ctx` must be a live context and `pd` null or a live PD of it; both
    /// must outlive the responder.
    pub unsafe fn open_with(
        ctx: *mut ibv_context,
        port: u8,
        pd: *mut ibv_pd,
        verbs: Verbs,
        options: Options,
    ) -> Result<Responder, Errno> {
        let _call = crate::fork::enter();
        // SAFETY: forwarded contract.
        udah_core::with_ah_slots!(options.ah_slots, N => unsafe { Engine::<N>::open(ctx, port, pd, verbs, options.admission) }
            .map(|e| Responder::new(Box::new(e))))
        .unwrap_or(Err(Errno(libc::EINVAL)))
    }

    /// [`open_with`](Self::open_with) the default [`Options`].
    ///
    /// # Safety
    /// As `open_with`.
    pub unsafe fn open(ctx: *mut ibv_context, port: u8, pd: *mut ibv_pd, verbs: Verbs) -> Result<Responder, Errno> {
        // SAFETY: forwarded contract.
        unsafe { Responder::open_with(ctx, port, pd, verbs, Options::default()) }
    }

    /// A responder over a fixed snapshot (no context: events and refreshes
    /// are refused); with a null `pd` it only computes attributes.
    ///
    /// # Safety
    /// `pd` must be null or a live PD that outlives the responder.
    pub unsafe fn from_gids_with(
        gids: Box<Gids>,
        pd: *mut ibv_pd,
        verbs: Verbs,
        options: Options,
    ) -> Result<Responder, Errno> {
        let _call = crate::fork::enter();
        let mut gids = Some(gids);
        udah_core::with_ah_slots!(options.ah_slots, N => match gids.take() {
            // SAFETY: forwarded contract.
            Some(g) => unsafe { Engine::<N>::from_gids(g, pd, verbs, options.admission) }.map(|e| Responder::new(Box::new(e))),
            None => Err(Errno(libc::EINVAL)),
        })
        .unwrap_or(Err(Errno(libc::EINVAL)))
    }

    /// [`from_gids_with`](Self::from_gids_with) the default [`Options`].
    ///
    /// # Safety
    /// As `from_gids_with`.
    pub unsafe fn from_gids(gids: Box<Gids>, pd: *mut ibv_pd, verbs: Verbs) -> Result<Responder, Errno> {
        // SAFETY: forwarded contract.
        unsafe { Responder::from_gids_with(gids, pd, verbs, Options::default()) }
    }

    /// The port.
    pub fn port(&self) -> u8 {
        self.engine.port()
    }

    /// The AH table's capacity.
    pub fn ah_slots(&self) -> usize {
        self.engine.ah_slots()
    }

    /// [`Engine::init_ah_from_wc`].
    pub fn init_ah_from_wc(
        &self,
        wc: &IbvWc,
        area: Option<&Area>,
        profile: Profile,
        evidence: Evidence,
    ) -> (IbvAhAttr, i32) {
        self.engine.init_ah_from_wc(wc, area, profile, evidence)
    }

    /// [`Engine::create_ah_from_wc`].
    pub fn create_ah_from_wc(&self, wc: &IbvWc, area: &Area) -> Result<AhPtr, AhFailure> {
        self.engine.create_ah_from_wc(wc, area)
    }

    /// [`Engine::create_ah`].
    pub fn create_ah(&self, attr: &IbvAhAttr) -> Result<AhPtr, AhFailure> {
        self.engine.create_ah(attr)
    }

    /// [`Engine::create_ah_batch`].
    pub fn create_ah_batch(&self, batch: &[(IbvWc, Option<&Area>)], out: &mut [Result<AhPtr, AhFailure>]) {
        self.engine.create_ah_batch(batch, out)
    }

    /// [`Engine::destroy_ah`].
    pub fn destroy_ah(&self, ah: AhPtr) -> Result<(), i32> {
        self.engine.destroy_ah(ah)
    }

    /// [`Engine::is_current`].
    pub fn is_current(&self, ah: AhPtr) -> Result<bool, i32> {
        self.engine.is_current(ah)
    }

    /// [`Engine::refresh`].
    pub fn refresh(&self) -> Result<(), i32> {
        let _call = crate::fork::enter();
        self.engine.refresh()
    }

    /// [`Engine::handle_event`].
    pub fn handle_event(&self, event_type: u32, port: Option<i32>) -> Result<bool, i32> {
        let _call = crate::fork::enter();
        self.engine.handle_event(event_type, port)
    }

    /// [`Engine::stats`], with the network events' counts.
    pub fn stats(&self) -> Stats {
        let e = self.event_counts();
        let _call = crate::fork::enter();
        Stats {
            net_events: e.net_events,
            mac_changes: e.mac_changes,
            retired_by_events: e.retired,
            ..self.engine.stats()
        }
    }

    /// [`Engine::close`].
    pub fn close(&self) -> Result<(), i32> {
        let _call = crate::fork::enter();
        self.engine.close()
    }

    /// The responder's event fd: readable when network events wait (poll
    /// it, then [`process_events`](Self::process_events)). Opened at the
    /// first call (the rtnetlink socket, and a request for the neighbour
    /// table); the same fd afterwards, closed with the responder.
    pub fn event_fd(&self) -> Result<RawFd, i32> {
        // The events mutex is a window for `fork`; the retirements and
        // re-reads under it are nested windows.
        let _call = crate::fork::enter();
        let mut g = lock(&self.events);
        if let Some(e) = g.as_ref() {
            return Ok(e.as_raw_fd());
        }
        let e = super::events::NetEngine::open().map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let fd = e.as_raw_fd();
        *g = Some(e);
        Ok(fd)
    }

    /// Reads and applies every network event waiting (never blocks): the
    /// number read, 0 when none (or the event fd was never asked for), or
    /// the errno of a failed read (`ENOBUFS`: the kernel dropped events).
    pub fn process_events(&self) -> Result<usize, i32> {
        // The events mutex is a window for `fork`; the retirements and
        // re-reads under it are nested windows.
        let _call = crate::fork::enter();
        let mut g = lock(&self.events);
        match g.as_mut() {
            Some(e) => e.process(self).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO)),
            None => Ok(0),
        }
    }

    /// What the network events did so far.
    pub fn event_counts(&self) -> super::events::EventCounts {
        // The events mutex is a window for `fork`; the retirements and
        // re-reads under it are nested windows.
        let _call = crate::fork::enter();
        lock(&self.events).as_ref().map(|e| e.counts()).unwrap_or_default()
    }

    /// [`Engine::retire_dgid`].
    pub fn retire_dgid(&self, dgid: &Gid) -> usize {
        let _call = crate::fork::enter();
        self.engine.retire_dgid(dgid)
    }
}
