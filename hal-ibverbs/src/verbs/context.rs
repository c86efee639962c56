//! A device context: attributes, ports, GID table, async events; PDs and CQs are made from it.

use super::*;

#[derive(Debug)]
pub(super) struct ContextInner {
    pub(super) raw: NonNull<ibv_context>,
    pub(super) name: String,
    /// `false` for a context the application owns ([`Context::from_raw_borrowed`]):
    /// never closed here.
    pub(super) owned: bool,
}

// SAFETY: an `ibv_context` may be used from any thread (verbs are thread
// safe); this type only hands the pointer to verbs.
unsafe impl Send for ContextInner {}
// SAFETY: as above; no Rust-side mutable state.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        if !self.owned {
            return; // the application's: it closes it
        }
        // SAFETY: the context was opened by `ibv_open_device` and every child
        // object (PD, CQ, …) holds an `Arc` to this, so all are gone; closed
        // once.
        count_teardown(unsafe { sys::ibv_close_device(self.raw.as_ptr()) });
    }
}

/// An open device (`ibv_context`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Context(pub(super) Arc<ContextInner>);

/// Device facts from `ibv_query_device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttr {
    /// Number of physical ports.
    pub phys_port_cnt: u8,
    /// Maximum number of AHs.
    pub max_ah: i32,
    /// Maximum work requests per queue.
    pub max_qp_wr: i32,
    /// Maximum CQ entries.
    pub max_cqe: i32,
    /// Node GUID, host order.
    pub node_guid: u64,
}

/// Port facts from `ibv_query_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortAttr {
    /// Logical state.
    pub state: PortState,
    /// Physical state (raw `phys_state`: 5 = LinkUp, 3 = Disabled, …).
    pub phys_state: u8,
    /// Link layer.
    pub link_layer: PortLinkLayer,
    /// Base LID.
    pub lid: u16,
    /// LID mask count.
    pub lmc: u8,
    /// SM LID.
    pub sm_lid: u16,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Active MTU.
    pub active_mtu: Mtu,
    /// Maximum MTU.
    pub max_mtu: Mtu,
}

/// One GID-table entry as the device reports it (`struct ibv_gid_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidRecord {
    /// The GID.
    pub gid: Gid,
    /// Its index in the port's table.
    pub index: u32,
    /// Its port.
    pub port: u32,
    /// Its type.
    pub kind: GidKind,
    /// The netdev's ifindex (0 on InfiniBand).
    pub ifindex: u32,
}

impl From<&ibv_gid_entry> for GidRecord {
    fn from(e: &ibv_gid_entry) -> GidRecord {
        // SAFETY: reading `raw` from the union: every 16-byte pattern is a
        // valid `[u8; 16]`, and the entry was zero-initialised before C wrote
        // it, so all 16 bytes are initialised.
        let raw = unsafe { e.gid.raw };
        GidRecord {
            gid: Gid(raw),
            index: e.gid_index,
            port: e.port_num,
            kind: GidKind::from(e.gid_type),
            ifindex: e.ndev_ifindex,
        }
    }
}

/// An asynchronous event, acknowledged already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The event type.
    pub event_type: EventType,
    /// The port, for port events.
    pub port: Option<u8>,
}

pub(super) fn zeroed_entry() -> ibv_gid_entry {
    ibv_gid_entry { gid: ibv_gid { raw: [0; 16] }, gid_index: 0, port_num: 0, gid_type: 0, ndev_ifindex: 0 }
}

impl Context {
    /// A context the application opened and owns: udah uses it and never
    /// closes it (dropping every clone of the returned value leaves it
    /// open).
    ///
    /// # Safety
    ///
    /// * `raw` is an open `ibv_context` (from `ibv_open_device`, or
    ///   `rdma_cm`'s `id->verbs`);
    /// * it stays open until every clone of the returned `Context`, and
    ///   every object made through it (PDs, CQs, QPs, MRs, AHs, an
    ///   [`IbverbsHal`](crate::IbverbsHal)), has been dropped;
    /// * nobody else reads its asynchronous events while an event listener
    ///   started on it runs (the listener would take them).
    pub unsafe fn from_raw_borrowed(raw: NonNull<sys::ibv_context>) -> Context {
        // SAFETY: the caller guarantees an open context; its `device` field
        // is the device it was opened from, alive while the context is.
        let dev = unsafe { (*raw.as_ptr()).device };
        let name = if dev.is_null() {
            String::new()
        } else {
            // SAFETY: `dev` is the context's live device; the function
            // returns its name field or NULL.
            let p = unsafe { sys::ibv_get_device_name(dev) };
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: a non-NULL name is a NUL-terminated string inside
                // the device struct, alive as long as the context.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        Context(Arc::new(ContextInner { raw, name, owned: false }))
    }

    /// The `ibv_context` pointer (for C callers and `ibv_*` calls udah does
    /// not wrap). Valid while this value lives.
    pub fn as_raw(&self) -> *mut sys::ibv_context {
        self.ptr()
    }

    /// Whether udah closes this context when the last clone drops (`false`
    /// for [`from_raw_borrowed`](Self::from_raw_borrowed)).
    pub fn is_owned(&self) -> bool {
        self.0.owned
    }

    pub(super) fn ptr(&self) -> *mut ibv_context {
        self.0.raw.as_ptr()
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The device's uverbs sysfs directory (`/sys/class/infiniband_verbs/uverbsN`,
    /// the `dev_path` of its `ibv_device`); empty when libibverbs did not say.
    pub fn uverbs_path(&self) -> String {
        // SAFETY: the context is open; its `device` field is the device it
        // was opened from, alive while the context is.
        let dev = unsafe { (*self.ptr()).device };
        if dev.is_null() {
            return String::new();
        }
        // SAFETY: `dev` is live (above); `dev_path` is a char array inside
        // it, read as bytes up to its first NUL (or its end).
        let raw = unsafe { &(*dev).dev_path };
        let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Whether the device is still registered with the kernel's uverbs: its
    /// [`uverbs_path`](Self::uverbs_path) still names this device (`ibdev`).
    /// The kernel removes that node first when the device is unregistered
    /// (`rdma link delete`, a driver unload); a driver that cannot
    /// disassociate an open context (rxe) then waits for the context to be
    /// closed and sends no `IBV_EVENT_DEVICE_FATAL`, so this is how such a
    /// removal is seen. `true` when it cannot tell (no path, or an error
    /// other than "not found").
    pub fn is_registered(&self) -> bool {
        let path = self.uverbs_path();
        if path.is_empty() {
            return true;
        }
        match std::fs::read_to_string(format!("{path}/ibdev")) {
            Ok(name) => name.trim_end() == self.name(),
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        }
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> Result<DeviceAttr, VerbsError> {
        // SAFETY: `ibv_device_attr` is plain integers and char arrays, for
        // which all-zero is a valid value.
        let mut attr: ibv_device_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open (we hold it) and `attr` is a valid,
        // writable `ibv_device_attr` (layout pinned in `ffi`).
        let ret = unsafe { sys::ibv_query_device(self.ptr(), &mut attr) };
        check(Op::QueryDevice, ret).map_err(|e| e.on_device(self.name()))?;
        Ok(DeviceAttr {
            phys_port_cnt: attr.phys_port_cnt,
            max_ah: attr.max_ah,
            max_qp_wr: attr.max_qp_wr,
            max_cqe: attr.max_cqe,
            node_guid: u64::from_be(attr.node_guid),
        })
    }

    /// `ibv_query_port`.
    pub fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        // SAFETY: `ibv_port_attr` is plain integers; all-zero is valid.
        let mut a: ibv_port_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open and `a` is a valid, writable
        // `ibv_port_attr`; the rdma-mummy-sys wrapper passes its size to the
        // provider (or uses the compat entry point, which writes a prefix).
        let ret = unsafe { sys::ibv_query_port(self.ptr(), port, &mut a) };
        check(Op::QueryPort, ret).map_err(|e| e.on_device(self.name()).on_port(port))?;
        Ok(PortAttr {
            state: PortState::from(a.state),
            phys_state: a.phys_state,
            link_layer: PortLinkLayer::from(a.link_layer),
            lid: a.lid,
            lmc: a.lmc,
            sm_lid: a.sm_lid,
            gid_tbl_len: u32::try_from(a.gid_tbl_len).unwrap_or(0),
            pkey_tbl_len: a.pkey_tbl_len,
            active_mtu: Mtu::from(a.active_mtu),
            max_mtu: Mtu::from(a.max_mtu),
        })
    }

    /// `ibv_query_gid_table`: every valid entry of every port in one call.
    /// `max_entries` must be at least the number of valid entries (the sum
    /// of the ports' `gid_tbl_len` always is).
    pub fn query_gid_table(&self, max_entries: usize) -> Result<Vec<GidRecord>, VerbsError> {
        let mut entries = vec![zeroed_entry(); max_entries.max(1)];
        // SAFETY: the context is open; `entries` holds `entries.len()`
        // writable `ibv_gid_entry` values and the wrapper passes
        // `size_of::<ibv_gid_entry>()` as the entry size (layout pinned).
        let ret = unsafe { sys::ibv_query_gid_table(self.ptr(), entries.as_mut_ptr(), entries.len(), 0) };
        let n = match usize::try_from(ret) {
            Ok(n) => n,
            Err(_) => {
                let e =
                    if ret == -1 { last_errno() } else { i32::try_from(ret.saturating_neg()).unwrap_or(errno::EIO) };
                return Err(VerbsError::verb(Op::QueryGidTable, e).on_device(self.name()));
            }
        };
        Ok(entries.iter().take(n).map(GidRecord::from).collect())
    }

    /// `ibv_query_gid_ex` for one index: `Ok(None)` for an empty slot
    /// (`ENODATA`).
    pub fn query_gid_ex(&self, port: u8, index: u32) -> Result<Option<GidRecord>, VerbsError> {
        let mut entry = zeroed_entry();
        // SAFETY: the context is open and `entry` is a writable
        // `ibv_gid_entry`; the wrapper passes its size.
        let ret = unsafe { sys::ibv_query_gid_ex(self.ptr(), u32::from(port), index, &mut entry, 0) };
        match check(Op::QueryGidEx, ret) {
            Ok(()) => Ok(Some(GidRecord::from(&entry))),
            Err(e) if e.errno() == Some(errno::ENODATA) => Ok(None),
            Err(e) => Err(e.on_device(self.name()).on_port(port).at_gid_index(index)),
        }
    }

    /// The file descriptor the context's asynchronous events arrive on
    /// (readable when one waits); poll it, then
    /// [`wait_async_event`](Self::wait_async_event)`(0)`.
    pub fn async_fd(&self) -> std::os::fd::RawFd {
        // SAFETY: reading a plain `int` field of the open context.
        unsafe { (*self.ptr()).async_fd }
    }

    /// Makes the asynchronous-event fd non-blocking (`O_NONBLOCK`), so that
    /// a read with nothing waiting returns instead of blocking: for a
    /// caller that polls the fd in its own loop.
    pub fn set_async_nonblocking(&self) -> Result<(), VerbsError> {
        let fd = self.async_fd();
        // SAFETY: `fcntl(F_GETFL)` on the context's open fd reads its flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(VerbsError::verb(Op::GetAsyncEvent, last_errno()).on_device(self.name()));
        }
        // SAFETY: `fcntl(F_SETFL)` on the same fd with its flags plus
        // `O_NONBLOCK`; no memory is passed.
        let r = unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
        if r < 0 {
            return Err(VerbsError::verb(Op::GetAsyncEvent, last_errno()).on_device(self.name()));
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` for an asynchronous event, then reads and
    /// acknowledges it (`ibv_get_async_event` + `ibv_ack_async_event`).
    /// `Ok(None)` on timeout or signal.
    pub fn wait_async_event(&self, timeout_ms: i32) -> Result<Option<AsyncEvent>, VerbsError> {
        let fd = self.async_fd();
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is one valid `pollfd`, and the count says 1.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            let e = last_errno();
            return if e == errno::EINTR {
                Ok(None)
            } else {
                Err(VerbsError::verb(Op::GetAsyncEvent, e).on_device(self.name()))
            };
        }
        if r == 0 || pfd.revents & libc::POLLIN == 0 {
            return Ok(None);
        }
        let mut ev = RawAsyncEvent::zeroed();
        // SAFETY: the context is open; `RawAsyncEvent` has the size, alignment
        // and field offsets of `struct ibv_async_event` (asserted in `ffi`),
        // with a `u32` where the C enum is, so whatever value the kernel
        // writes is valid. The fd is readable, so the call does not block.
        let ret = unsafe { sys::ibv_get_async_event(self.ptr(), (&raw mut ev).cast()) };
        check(Op::GetAsyncEvent, ret).map_err(|e| e.on_device(self.name()))?;
        let event_type = EventType::from(ev.event_type);
        let port = if event_type.is_port_event() {
            // SAFETY: the union was zero-initialised and the kernel wrote
            // `port_num` for port events; any `int` value is valid.
            let p = unsafe { ev.element.port_num };
            u8::try_from(p).ok()
        } else {
            None
        };
        // SAFETY: `ev` is the event `ibv_get_async_event` just returned; it is
        // acknowledged exactly once, with the same layout argument as above.
        unsafe { sys::ibv_ack_async_event((&raw mut ev).cast()) };
        Ok(Some(AsyncEvent { event_type, port }))
    }

    /// `ibv_resolve_eth_l2_from_gid`: the destination MAC and VLAN id of a
    /// RoCE attribute (a netlink neighbour look-up of up to 3 s).
    pub fn resolve_eth_l2(&self, attr: &AhAttr) -> Result<([u8; 6], u16), VerbsError> {
        let mut c = ah_attr_to_c(attr);
        let mut mac = [0u8; 6];
        let mut vid: u16 = 0;
        // SAFETY: the context is open; `c` is a valid `ibv_ah_attr`, `mac`
        // has the 6 bytes (`ETHERNET_LL_SIZE`) the function writes, `vid` is a
        // writable `u16`.
        let ret = unsafe { sys::ibv_resolve_eth_l2_from_gid(self.ptr(), &mut c, mac.as_mut_ptr(), &mut vid) };
        check(Op::ResolveL2, ret).map_err(|e| e.on_device(self.name()).on_port(attr.port.get()))?;
        Ok((mac, vid))
    }

    /// The real libibverbs `ibv_init_ah_from_wc` on this context (its GID
    /// search queries the device on every call), for a receive completion
    /// and its 40-byte GRH area: udah's reference. On failure the errno is
    /// in [`VerbsError::errno`].
    pub fn init_ah_from_wc(
        &self,
        port: u8,
        wc: &WorkCompletion,
        area: &[u8; 40],
    ) -> Result<udah_core::ah::IbvAhAttr, VerbsError> {
        let mut w = wc.to_c();
        // SAFETY: `ibv_grh` is integers and GID unions; all-zero is valid.
        let mut grh: ibv_grh = unsafe { core::mem::zeroed() };
        const { assert!(size_of::<ibv_grh>() == 40) };
        // SAFETY: `area` is 40 readable bytes, `grh` 40 writable bytes (size
        // asserted above) of a distinct object; every byte pattern is a valid
        // `ibv_grh` (integers and byte unions).
        unsafe { core::ptr::copy_nonoverlapping(area.as_ptr(), (&raw mut grh).cast::<u8>(), 40) };
        // SAFETY: `ibv_ah_attr` is integers and a byte union; all-zero is
        // valid.
        let mut out: ibv_ah_attr = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open; `w`, `grh` and `out` are valid,
        // writable structs of the pinned layouts, alive for the call.
        let ret = unsafe { sys::ibv_init_ah_from_wc(self.ptr(), port, &mut w, &mut grh, &mut out) };
        check(Op::InitAhFromWc, ret).map_err(|e| e.on_device(self.name()).on_port(port))?;
        // SAFETY: reading the byte view of the GID union, all 16 bytes
        // initialised (zeroed, then written by C).
        let dgid = unsafe { out.grh.dgid.raw };
        Ok(udah_core::ah::IbvAhAttr {
            grh: udah_core::ah::IbvGlobalRoute {
                dgid,
                flow_label: out.grh.flow_label,
                sgid_index: out.grh.sgid_index,
                hop_limit: out.grh.hop_limit,
                traffic_class: out.grh.traffic_class,
                reserved: 0,
            },
            dlid: out.dlid,
            sl: out.sl,
            src_path_bits: out.src_path_bits,
            static_rate: out.static_rate,
            is_global: out.is_global,
            port_num: out.port_num,
            reserved: 0,
        })
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, VerbsError> {
        // SAFETY: the context is open; the PD is owned by the returned `Pd`,
        // which keeps the context alive and deallocates the PD once.
        let raw = unsafe { sys::ibv_alloc_pd(self.ptr()) };
        let raw =
            NonNull::new(raw).ok_or_else(|| VerbsError::verb(Op::AllocPd, last_errno()).on_device(self.name()))?;
        Ok(Pd(Arc::new(PdInner { raw, ctx: self.clone(), owned: true })))
    }

    /// Creates a completion queue with at least `cqe` entries.
    pub fn create_cq(&self, cqe: u32) -> Result<Cq, VerbsError> {
        let n = c_int::try_from(cqe).unwrap_or(c_int::MAX);
        // SAFETY: the context is open; no completion channel and no CQ
        // context are passed (NULL is allowed for both); the CQ is owned by
        // the returned `Cq` and destroyed once.
        let raw = unsafe { sys::ibv_create_cq(self.ptr(), n, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
        let raw =
            NonNull::new(raw).ok_or_else(|| VerbsError::verb(Op::CreateCq, last_errno()).on_device(self.name()))?;
        Ok(Cq(Arc::new(CqInner { raw, ctx: self.clone() })))
    }
}
