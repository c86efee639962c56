//! [`IbverbsHal`]: the core's [`Hal`] over one device, with GID-table
//! snapshots kept current by an asynchronous-event listener.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use udah_core::ah::{AhAttr, PortNum};
use udah_core::hal::{AhToken, Error, ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::{GidTable, LinkLayer};

use crate::enums::EventType;
use crate::error::VerbsError;
use crate::ffi::ibv_ah;
use crate::gid::{PortGids, fill_table, read_port_gids};
use crate::slots::{AhSlots, SlotError};
use crate::verbs::{AddressHandle, Context, DeviceList, Pd, PortAttr, Segment, UdDest, UdQp};

/// The most AH slots a backend preallocates (16 bytes each): the device's
/// `max_ah`, capped at this.
pub const MAX_AH_SLOTS: usize = 1 << 16;

/// An AH created by [`IbverbsHal::create_ah`], as a token: a slot index and
/// the slot's generation in the backend's preallocated AH array. The
/// backend keeps the `ibv_ah` itself; a token that is not live (destroyed,
/// stale, or made up) is refused ([`VerbsError::UnknownAh`]), never
/// dereferenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerbsAh(u64);

impl AhToken for VerbsAh {
    fn into_token(self) -> u64 {
        self.0
    }
    fn from_token(token: u64) -> VerbsAh {
        VerbsAh(token)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data
    // inconsistent (each critical section is one insert/remove/replace).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct PortCache {
    port: u8,
    generation: AtomicU64,
    snapshot: Mutex<Option<Arc<(LinkLayer, PortGids)>>>,
}

#[derive(Debug)]
struct Shared {
    ctx: Context,
    ports: Vec<PortCache>,
    total_gid_len: usize,
    events: AtomicU64,
    refreshes: AtomicU64,
    listener_errors: AtomicU64,
    /// The first fault seen ([`IbverbsHal::fault`]).
    fault: Mutex<Option<DeviceFault>>,
    /// Whether `fault` is set (read without the lock on every poll).
    faulted: AtomicBool,
}

/// Why a device (or a queue on it) can no longer be used, as the event
/// listener saw it ([`IbverbsHal::fault`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceFault {
    /// A fatal asynchronous event ([`EventType::is_fatal`]).
    Event(EventType),
    /// The device was unregistered: its uverbs node (this path) is gone
    /// ([`Context::is_registered`]), and no `IBV_EVENT_DEVICE_FATAL` came (a
    /// driver that cannot disassociate a context, like rxe, waits for it to
    /// be closed instead).
    Unregistered(String),
}

impl DeviceFault {
    /// Whether the device itself is gone (rather than one of its queues).
    pub fn is_device_lost(&self) -> bool {
        matches!(self, DeviceFault::Unregistered(_) | DeviceFault::Event(EventType::DeviceFatal))
    }
}

impl core::fmt::Display for DeviceFault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeviceFault::Event(EventType::DeviceFatal) => f.write_str("removed (IBV_EVENT_DEVICE_FATAL)"),
            DeviceFault::Event(e) => write!(f, "fatal asynchronous event IBV_EVENT_{e}"),
            DeviceFault::Unregistered(p) => {
                write!(f, "removed (its uverbs node {p} is gone; the driver sends no IBV_EVENT_DEVICE_FATAL)")
            }
        }
    }
}

impl Shared {
    fn set_fault(&self, fault: DeviceFault) {
        let mut f = lock(&self.fault);
        if f.is_none() {
            *f = Some(fault);
            self.faulted.store(true, Ordering::Release);
        }
    }

    fn cache(&self, port: u8) -> Result<&PortCache, VerbsError> {
        self.ports.iter().find(|c| c.port == port).ok_or_else(|| VerbsError::PortNotFound {
            device: self.ctx.name().to_owned(),
            port,
            ports: u8::try_from(self.ports.len()).unwrap_or(u8::MAX),
        })
    }

    fn read(&self, port: u8) -> Result<Arc<(LinkLayer, PortGids)>, VerbsError> {
        let attr = self.ctx.query_port(port)?;
        let ll = attr.link_layer.to_core().ok_or(VerbsError::UnknownLinkLayer { port, raw: attr.link_layer.into() })?;
        Ok(Arc::new((ll, read_port_gids(&self.ctx, port, &attr, self.total_gid_len)?)))
    }

    /// Re-reads `port`'s GID table and bumps its generation.
    fn refresh(&self, port: u8) -> Result<(), VerbsError> {
        let cache = self.cache(port)?;
        let fresh = self.read(port);
        let mut snap = lock(&cache.snapshot);
        // On failure the cache is dropped, so the next snapshot reads again.
        *snap = fresh.as_ref().ok().cloned();
        cache.generation.fetch_add(1, Ordering::AcqRel);
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        fresh.map(|_| ())
    }

    fn on_event(&self, ev: EventType, port: Option<u8>) {
        self.events.fetch_add(1, Ordering::Relaxed);
        if ev.is_fatal() {
            self.set_fault(DeviceFault::Event(ev));
        }
        if !ev.invalidates_gids() {
            return;
        }
        let ports: Vec<u8> = match port {
            Some(p) => vec![p],
            None => self.ports.iter().map(|c| c.port).collect(),
        };
        for p in ports {
            if self.refresh(p).is_err() {
                self.listener_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The asynchronous-event listener thread ([`IbverbsHal::start_event_listener`]).
#[derive(Debug)]
struct Listener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // The thread's body does not panic; if it did, there is nothing
            // to propagate from a destructor.
            let _ = t.join();
        }
    }
}

/// Counters of the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HalStats {
    /// AHs alive.
    pub live_ahs: usize,
    /// Asynchronous events received.
    pub events: u64,
    /// GID-table snapshots rebuilt because of events (or [`IbverbsHal::refresh`]).
    pub refreshes: u64,
    /// Listener failures (a failed event read or re-snapshot).
    pub listener_errors: u64,
}

/// The udah backend over one libibverbs device.
///
/// * [`Hal::snapshot_gids`] fills the core's [`GidTable`] from a cached
///   snapshot of the port's GID table (one `ibv_query_gid_table`, or
///   `ibv_query_gid_ex` per index), stamped with the port's generation;
/// * the listener ([`start_event_listener`](IbverbsHal::start_event_listener))
///   reads `ibv_get_async_event`; on a GID change or a port, LID or SM event
///   it rebuilds the port's snapshot and bumps its generation, so a consumer
///   that compares [`Hal::gid_generation`] with its table's re-snapshots and
///   the AH table retires AHs built against the old one. Without the
///   listener the snapshot is read once and kept until
///   [`refresh`](IbverbsHal::refresh);
/// * AHs live in the backend, in a preallocated slot array
///   ([`ah_capacity`](IbverbsHal::ah_capacity) slots), named by
///   [`VerbsAh`] tokens; those still alive when the backend is dropped are
///   destroyed then.
///
/// # No lock on the send path
///
/// [`post_send`](IbverbsHal::post_send) turns its token back into the
/// `ibv_ah` with one compare-and-swap on the token's slot (checking it is
/// live and pinning it) and one atomic decrement after the post: no lock,
/// and senders on any AHs run in parallel. [`Hal::create_ah`] claims a free
/// slot by compare-and-swap and runs `ibv_create_ah` outside any lock;
/// [`Hal::destroy_ah`] unpublishes the slot, waits for the senders already
/// inside it (one post each), then runs `ibv_destroy_ah`. A full slot array
/// is [`VerbsError::AhSlotsFull`] (kind `OutOfResources`: the AH table
/// evicts and retries).
#[derive(Debug)]
pub struct IbverbsHal {
    shared: Arc<Shared>,
    pd: Pd,
    ahs: AhSlots<ibv_ah>,
    listener: Mutex<Option<Listener>>,
}

impl IbverbsHal {
    /// Opens `device` (the first device when `None`).
    pub fn open(device: Option<&str>) -> Result<IbverbsHal, VerbsError> {
        let list = DeviceList::new()?;
        let ctx = match device {
            Some(name) => list.open(name)?,
            None => match list.iter().next() {
                Some(d) => d.open()?,
                None => {
                    return Err(VerbsError::NoDevices { kernel_support: crate::error::kernel_has_rdma(), errno: None });
                }
            },
        };
        drop(list);
        IbverbsHal::from_context(ctx)
    }

    /// Opens `device` and checks that `port` exists and is active.
    pub fn open_port(device: Option<&str>, port: u8) -> Result<IbverbsHal, VerbsError> {
        let hal = IbverbsHal::open(device)?;
        let attr = hal.port_attr(port)?;
        if !attr.state.is_active() {
            return Err(VerbsError::PortDown { device: hal.device().to_owned(), port, state: attr.state });
        }
        Ok(hal)
    }

    /// The backend of an open context, with a protection domain of its own.
    pub fn from_context(ctx: Context) -> Result<IbverbsHal, VerbsError> {
        let pd = ctx.alloc_pd()?;
        IbverbsHal::from_parts(ctx, pd)
    }

    /// The backend of an application's own `ibv_context` and `ibv_pd`,
    /// borrowed: udah creates its AHs on `pd` (so they can be used by the
    /// application's QPs on that PD, and udah's QPs on it can use the
    /// application's AHs) and never closes the context nor deallocates the
    /// PD. Checks that `pd` belongs to `ctx` and that `port` exists
    /// ([`VerbsError::PortNotFound`]); the port need not be active. Every
    /// port of the device is served; `port` is the one the caller means to
    /// use.
    ///
    /// The event listener is not started: the application usually reads the
    /// context's asynchronous events itself, and should pass each one to
    /// [`handle_async_event`](Self::handle_async_event) (or call
    /// [`refresh`](Self::refresh)) so that GID changes reach the snapshot.
    /// [`start_event_listener`](Self::start_event_listener) on a borrowed
    /// context takes the events away from the application.
    ///
    /// Dropping the backend destroys the AHs it created (on `pd`), nothing
    /// else of the application's.
    ///
    /// # Safety
    ///
    /// * `ctx` is NULL or an open `ibv_context`, and `pd` NULL or a live
    ///   `ibv_pd` (NULL is refused with [`VerbsError::NullPointer`]);
    /// * both stay valid until this backend and every object obtained
    ///   through it ([`context`](Self::context), [`pd`](Self::pd), and QPs,
    ///   CQs, MRs made from those) have been dropped: close the context and
    ///   deallocate the PD only after that;
    /// * while a listener started on it runs, nobody else calls
    ///   `ibv_get_async_event` on `ctx`.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_borrowed(
        ctx: *mut rdma_mummy_sys::ibv_context,
        pd: *mut rdma_mummy_sys::ibv_pd,
        port: u8,
    ) -> Result<IbverbsHal, VerbsError> {
        let ctx = NonNull::new(ctx).ok_or(VerbsError::NullPointer("the ibv_context"))?;
        let pd = NonNull::new(pd).ok_or(VerbsError::NullPointer("the ibv_pd"))?;
        // SAFETY: the caller's contract: an open context that outlives every
        // clone of the `Context` (all of which this backend and the objects
        // made through it hold).
        let ctx = unsafe { Context::from_raw_borrowed(ctx) };
        // SAFETY: the caller's contract: a live PD that outlives every clone
        // of the `Pd`.
        let pd = unsafe { Pd::from_raw_borrowed(&ctx, pd) }?;
        let hal = IbverbsHal::from_parts(ctx, pd)?;
        hal.port_attr(port)?;
        Ok(hal)
    }

    fn from_parts(ctx: Context, pd: Pd) -> Result<IbverbsHal, VerbsError> {
        let dev = ctx.query_device()?;
        let mut ports = Vec::new();
        let mut total = 0usize;
        for port in 1..=dev.phys_port_cnt {
            total = total.saturating_add(ctx.query_port(port)?.gid_tbl_len as usize);
            ports.push(PortCache { port, generation: AtomicU64::new(1), snapshot: Mutex::new(None) });
        }
        let slots = usize::try_from(dev.max_ah).unwrap_or(0);
        let slots = if slots == 0 { MAX_AH_SLOTS } else { slots.min(MAX_AH_SLOTS) };
        let shared = Arc::new(Shared {
            ctx,
            ports,
            total_gid_len: total,
            events: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            listener_errors: AtomicU64::new(0),
            fault: Mutex::new(None),
            faulted: AtomicBool::new(false),
        });
        Ok(IbverbsHal { shared, pd, ahs: AhSlots::new(slots), listener: Mutex::new(None) })
    }

    /// What the listener does with one asynchronous event, for an
    /// application that reads the context's events itself (a borrowed
    /// context): a GID change, or a port, LID or SM event, re-reads the
    /// port's GID table (every port when `port` is `None`) and bumps its
    /// generation; a fatal one ([`EventType::is_fatal`]) is kept as the
    /// [`fault`](Self::fault); other events are only counted. A failed
    /// re-read is counted in [`HalStats::listener_errors`].
    pub fn handle_async_event(&self, event: EventType, port: Option<u8>) {
        self.shared.on_event(event, port);
    }

    /// The first fault the listener saw (a fatal event, or the device
    /// unregistered), if any: the device's queues, or the device itself
    /// ([`DeviceFault::is_device_lost`]), are unusable, and the application
    /// should destroy what it made on it (its AHs first) and close it.
    /// One atomic load while there is none.
    pub fn fault(&self) -> Option<DeviceFault> {
        if !self.shared.faulted.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.shared.fault).clone()
    }

    /// Checks that the device is still registered ([`Context::is_registered`]),
    /// as the listener does whenever 100 ms pass without an event: when it
    /// is gone, that becomes the [`fault`](Self::fault). For an application
    /// that reads the events itself (no listener). Returns whether it is.
    pub fn check_registered(&self) -> bool {
        let ok = self.shared.ctx.is_registered();
        if !ok {
            self.shared.set_fault(DeviceFault::Unregistered(self.shared.ctx.uverbs_path()));
        }
        ok
    }

    /// The device name.
    pub fn device(&self) -> &str {
        self.shared.ctx.name()
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }

    /// The protection domain AHs are created on.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The port numbers.
    pub fn ports(&self) -> Vec<u8> {
        self.shared.ports.iter().map(|c| c.port).collect()
    }

    /// `ibv_query_port`, with [`VerbsError::PortNotFound`] for a port the
    /// device does not have.
    pub fn port_attr(&self, port: u8) -> Result<PortAttr, VerbsError> {
        self.shared.cache(port)?;
        self.shared.ctx.query_port(port)
    }

    /// The cached GID table of `port` (read on first use).
    pub fn port_gids(&self, port: u8) -> Result<PortGids, VerbsError> {
        Ok(self.snapshot(port)?.1.1.clone())
    }

    fn snapshot(&self, port: u8) -> Result<(u64, Arc<(LinkLayer, PortGids)>), VerbsError> {
        let cache = self.shared.cache(port)?;
        let mut snap = lock(&cache.snapshot);
        let gen_now = cache.generation.load(Ordering::Acquire);
        let s = match &*snap {
            Some(s) => s.clone(),
            None => {
                let s = self.shared.read(port)?;
                *snap = Some(s.clone());
                s
            }
        };
        Ok((gen_now, s))
    }

    /// Re-reads `port`'s GID table now and bumps its generation (what the
    /// listener does on an event).
    pub fn refresh(&self, port: u8) -> Result<(), VerbsError> {
        self.shared.refresh(port)
    }

    /// Starts the asynchronous-event listener thread (idempotent). It stops
    /// when the backend is dropped. Besides the events it checks, whenever
    /// 100 ms pass without one, that the device is still registered
    /// ([`Context::is_registered`]); a fatal event or an unregistered device
    /// becomes the [`fault`](Self::fault).
    pub fn start_event_listener(&self) -> Result<(), VerbsError> {
        let mut l = lock(&self.listener);
        if l.is_some() {
            return Ok(());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, flag) = (self.shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("udah-events-{}", self.device()))
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    match shared.ctx.wait_async_event(100) {
                        Ok(Some(ev)) => shared.on_event(ev.event_type, ev.port),
                        Ok(None) => {
                            // No event for 100 ms: is the device still there?
                            if !shared.ctx.is_registered() {
                                shared.set_fault(DeviceFault::Unregistered(shared.ctx.uverbs_path()));
                            }
                        }
                        Err(_) => {
                            shared.listener_errors.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .map_err(|e| {
                VerbsError::verb(
                    crate::error::Op::GetAsyncEvent,
                    e.raw_os_error().unwrap_or(crate::error::errno::EAGAIN),
                )
            })?;
        *l = Some(Listener { stop, thread: Some(thread) });
        Ok(())
    }

    /// Counters.
    pub fn stats(&self) -> HalStats {
        HalStats {
            live_ahs: self.ahs.live(),
            events: self.shared.events.load(Ordering::Relaxed),
            refreshes: self.shared.refreshes.load(Ordering::Relaxed),
            listener_errors: self.shared.listener_errors.load(Ordering::Relaxed),
        }
    }

    /// How many AHs can be alive at once (the preallocated slots).
    pub fn ah_capacity(&self) -> usize {
        self.ahs.capacity()
    }

    /// Posts a UD send through a live AH of this backend, taking no lock
    /// (the AH cannot be destroyed during the call: a concurrent
    /// [`Hal::destroy_ah`] of it waits for this post). `qp` must be on this
    /// backend's PD ([`pd`](Self::pd)).
    #[allow(unsafe_code)]
    pub fn post_send(
        &self,
        qp: &UdQp,
        ah: VerbsAh,
        dest: UdDest,
        seg: Segment<'_>,
        wr_id: u64,
    ) -> Result<(), VerbsError> {
        self.ahs
            .with(ah.0, |raw| {
                // SAFETY: `AhSlots::with` runs this closure only while the
                // slot is live and pinned: the pointer is an AH created on
                // this backend's PD by `create_ah`, and `destroy_ah`/`Drop`
                // wait for the pin to be released before destroying it
                // (slots.rs, "The slot word").
                unsafe { qp.post_send_raw(raw, None, dest, seg, wr_id) }
            })
            .map_err(|e| slot_error(e, ah.0))?
    }
}

fn slot_error(e: SlotError, token: u64) -> VerbsError {
    match e {
        // `Busy` (2^30 concurrent posts on one AH) cannot happen with real
        // threads; refusing the token is the safe answer.
        SlotError::Unknown | SlotError::Busy => VerbsError::UnknownAh(token),
    }
}

#[allow(unsafe_code)]
fn destroy(raw: NonNull<ibv_ah>, pd: &Pd) -> Result<(), VerbsError> {
    // SAFETY: only `AhSlots::remove` calls this, with the pointer of a slot
    // it has just unpublished after every sender left it: an AH created on
    // `pd` by `create_ah` (`into_raw`), destroyed once, used by nobody else.
    unsafe { AddressHandle::destroy_raw(raw, pd) }
}

impl Drop for IbverbsHal {
    fn drop(&mut self) {
        drop(lock(&self.listener).take());
        for t in self.ahs.tokens() {
            // Best effort: nothing to report from a destructor.
            let _ = self.ahs.remove(t, |raw| destroy(raw, &self.pd));
        }
    }
}

impl ErrorType for IbverbsHal {
    type Error = VerbsError;
}

impl Hal for IbverbsHal {
    type Ah = VerbsAh;

    fn port_info(&self, port: PortNum) -> Result<PortInfo, VerbsError> {
        let port = port.get();
        let a = self.port_attr(port)?;
        let ll = a.link_layer.to_core().ok_or(VerbsError::UnknownLinkLayer { port, raw: a.link_layer.into() })?;
        Ok(PortInfo::new(port, ll, a.gid_tbl_len).with_lid(a.lid, a.lmc).with_active(a.state.is_active()))
    }

    fn snapshot_gids<const N: usize>(&self, port: PortNum, table: &mut GidTable<N>) -> Result<(), VerbsError> {
        let (generation, s) = self.snapshot(port.get())?;
        fill_table(table, s.0, &s.1, generation).map(|_| ())
    }

    fn gid_generation(&self, port: PortNum) -> u64 {
        self.shared.cache(port.get()).map_or(0, |c| c.generation.load(Ordering::Acquire))
    }

    fn resolve_l2(&self, attr: &AhAttr) -> Result<Option<L2Info>, VerbsError> {
        let (_, s) = self.snapshot(attr.port.get())?;
        if s.0 != LinkLayer::Ethernet || attr.grh.is_none() {
            return Ok(None);
        }
        match self.shared.ctx.resolve_eth_l2(attr) {
            Ok((dmac, vid)) => Ok(Some(L2Info { dmac, vlan_tag: (vid <= 4095).then_some(vid), hop_limit: None })),
            // The kernel resolves the neighbour itself in `ibv_create_ah`.
            Err(e) if e.kind() == ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_ah(&self, attr: &AhAttr, _l2: Option<&L2Info>) -> Result<VerbsAh, VerbsError> {
        let capacity = self.ahs.capacity();
        self.ahs
            .insert(
                || AddressHandle::create(&self.pd, attr).map(AddressHandle::into_raw),
                || VerbsError::AhSlotsFull { capacity },
            )
            .map(VerbsAh)
    }

    fn destroy_ah(&self, ah: VerbsAh) -> Result<(), VerbsError> {
        self.ahs.remove(ah.0, |raw| destroy(raw, &self.pd)).map_err(|e| slot_error(e, ah.0))?
    }
}
