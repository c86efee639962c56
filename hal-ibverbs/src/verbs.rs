//! Safe RAII wrappers over the verbs: device list, context, PD, CQ, UD QP,
//! MR, AH. With [`crate::ffi`], the only file with `unsafe`.
//!
//! # Ownership
//!
//! Every object keeps what it was created from alive: a [`Pd`] or [`Cq`]
//! holds its [`Context`], an [`AddressHandle`] or [`Mr`] its [`Pd`], a
//! [`UdQp`] its PD and CQs (all reference-counted handles). C objects are thus
//! always destroyed before their parents, whatever order Rust drops the
//! handles in.
//!
//! # Thread safety
//!
//! libibverbs verbs are thread safe (rdma-core `Documentation/libibverbs.md`:
//! "All verbs are thread safe"), so the handles are `Send + Sync`. A memory
//! region's buffer is written through `&mut Mr` only.
//!
//! # Teardown
//!
//! `Drop` never panics: a failed destroy is counted
//! ([`teardown_failures`]) and otherwise ignored. [`AddressHandle::destroy`]
//! reports the error instead.

#![allow(unsafe_code)]

use core::ffi::CStr;
use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as sys;
use udah_core::ah::AhAttr;
use udah_core::wire::Gid;

use crate::enums::{EventType, GidKind, Mtu, PortLinkLayer, PortState, WcOpcode, WcStatus};
use crate::error::{Op, VerbsError, errno, kernel_has_rdma};
use crate::ffi::{
    RawAsyncEvent, ibv_ah, ibv_ah_attr, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry,
    ibv_global_route, ibv_grh, ibv_mr, ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr,
    ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc,
};

static TEARDOWN_FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many destroy/close calls run from `Drop` have failed in this process.
pub fn teardown_failures() -> u64 {
    TEARDOWN_FAILURES.load(Ordering::Relaxed)
}

fn count_teardown(ret: c_int) {
    if ret != 0 {
        TEARDOWN_FAILURES.fetch_add(1, Ordering::Relaxed);
    }
}

/// The calling thread's `errno` (`EIO` if the OS reports none).
fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(errno::EIO)
}

/// A verb's return value: 0 is success, a positive value is the errno, -1
/// means "see errno", and any other negative value is a negated errno.
fn check(op: Op, ret: c_int) -> Result<(), VerbsError> {
    match ret {
        0 => Ok(()),
        -1 => Err(VerbsError::verb(op, last_errno())),
        r if r < 0 => Err(VerbsError::verb(op, r.saturating_neg())),
        r => Err(VerbsError::verb(op, r)),
    }
}

/// Whether `libibverbs.so.1` can be loaded and exports `ibv_get_device_list`
/// (the same lookup rdma-mummy-sys does at start-up).
pub fn library_available() -> bool {
    // SAFETY: `dlopen` is called with a NUL-terminated constant name and
    // valid flags; it has no other preconditions. Loading libibverbs runs its
    // constructors, which rdma-mummy-sys has already run in this process.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: `handle` is the live handle `dlopen` just returned and the name
    // is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"ibv_get_device_list".as_ptr()) };
    // SAFETY: `handle` came from `dlopen` above and is closed exactly once;
    // `sym` is not used after this.
    unsafe { libc::dlclose(handle) };
    !sym.is_null()
}

// ---------------------------------------------------------------------------
// Device list

/// The RDMA devices libibverbs sees (`ibv_get_device_list`). Never empty.
#[derive(Debug)]
pub struct DeviceList {
    list: NonNull<*mut ibv_device>,
    len: usize,
}

// SAFETY: the list is an immutable array owned by this value until
// `ibv_free_device_list`; libibverbs allows it to be read and freed from any
// thread.
unsafe impl Send for DeviceList {}
// SAFETY: shared access only reads the array and calls thread-safe verbs.
unsafe impl Sync for DeviceList {}

impl DeviceList {
    /// The devices. Fails with [`VerbsError::LibraryMissing`] when
    /// libibverbs cannot be loaded and with [`VerbsError::NoDevices`] when it
    /// finds no device.
    pub fn new() -> Result<DeviceList, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid `int` to write the count to. The function
        // returns NULL or a NULL-terminated array that stays valid until it
        // is passed to `ibv_free_device_list`, which `Drop` does.
        let raw = unsafe { sys::ibv_get_device_list(&mut n) };
        let Some(list) = NonNull::new(raw) else {
            let e = last_errno();
            if !library_available() {
                return Err(VerbsError::LibraryMissing);
            }
            if e == errno::ENOSYS || !kernel_has_rdma() {
                return Err(VerbsError::NoDevices { kernel_support: kernel_has_rdma(), errno: Some(e) });
            }
            return Err(VerbsError::verb(Op::GetDeviceList, e));
        };
        let list = DeviceList { list, len: usize::try_from(n).unwrap_or(0) };
        if list.len == 0 {
            return Err(VerbsError::NoDevices { kernel_support: kernel_has_rdma(), errno: None });
        }
        Ok(list)
    }

    fn raw(&self) -> &[*mut ibv_device] {
        // SAFETY: `ibv_get_device_list` returned an array of `len` device
        // pointers (plus a NULL terminator), valid and unchanged until `Drop`
        // frees it; the slice borrows `self`.
        unsafe { core::slice::from_raw_parts(self.list.as_ptr(), self.len) }
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false` (an empty list is [`VerbsError::NoDevices`]).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The devices.
    pub fn iter(&self) -> impl Iterator<Item = Device<'_>> + '_ {
        self.raw().iter().filter_map(|p| NonNull::new(*p)).map(|raw| Device { raw, _list: PhantomData })
    }

    /// The device names.
    pub fn names(&self) -> Vec<String> {
        self.iter().map(|d| d.name()).collect()
    }

    /// Opens the device called `name`.
    pub fn open(&self, name: &str) -> Result<Context, VerbsError> {
        match self.iter().find(|d| d.name() == name) {
            Some(d) => d.open(),
            None => Err(VerbsError::DeviceNotFound { name: name.to_owned(), available: self.names() }),
        }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the array came from `ibv_get_device_list` and is freed once.
        // Contexts opened from it stay valid (libibverbs refcounts devices).
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

/// One device of a [`DeviceList`].
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    raw: NonNull<ibv_device>,
    _list: PhantomData<&'a DeviceList>,
}

impl Device<'_> {
    /// The device name (`mlx5_0`, `rxe0`, …).
    pub fn name(&self) -> String {
        // SAFETY: `raw` is a device of a live list (the borrow of the list);
        // the function returns its name field or NULL.
        let p = unsafe { sys::ibv_get_device_name(self.raw.as_ptr()) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: a non-NULL name is a NUL-terminated string inside the
        // device struct, alive as long as the list.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The node GUID, host order.
    pub fn guid(&self) -> u64 {
        // SAFETY: `raw` is a device of a live list.
        u64::from_be(unsafe { sys::ibv_get_device_guid(self.raw.as_ptr()) })
    }

    /// Opens the device.
    pub fn open(&self) -> Result<Context, VerbsError> {
        let name = self.name();
        // SAFETY: `raw` is a device of a live list; the returned context is
        // owned by the `Context` built below and closed once in its `Drop`.
        let raw = unsafe { sys::ibv_open_device(self.raw.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| VerbsError::verb(Op::OpenDevice, last_errno()).on_device(&name))?;
        Ok(Context(Arc::new(ContextInner { raw, name, owned: true })))
    }
}

// ---------------------------------------------------------------------------
// Context

#[derive(Debug)]
struct ContextInner {
    raw: NonNull<ibv_context>,
    name: String,
    /// `false` for a context the application owns ([`Context::from_raw_borrowed`]):
    /// never closed here.
    owned: bool,
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
pub struct Context(Arc<ContextInner>);

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

fn zeroed_entry() -> ibv_gid_entry {
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

    fn ptr(&self) -> *mut ibv_context {
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

// ---------------------------------------------------------------------------
// PD

#[derive(Debug)]
struct PdInner {
    raw: NonNull<ibv_pd>,
    ctx: Context,
    /// `false` for the application's PD ([`Pd::from_raw_borrowed`]): never
    /// deallocated here.
    owned: bool,
}

// SAFETY: a PD may be used from any thread; only verbs touch the pointer.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        if !self.owned {
            return; // the application's: it deallocates it
        }
        // SAFETY: the PD came from `ibv_alloc_pd`; every AH, MR and QP on it
        // holds an `Arc` to this, so they are gone; deallocated once. The
        // context is still open (`self.ctx` drops after this).
        count_teardown(unsafe { sys::ibv_dealloc_pd(self.raw.as_ptr()) });
    }
}

/// A protection domain. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Pd(Arc<PdInner>);

impl Pd {
    /// A protection domain the application allocated and owns, on `ctx`:
    /// udah creates AHs, QPs and MRs on it and never deallocates it. Fails
    /// with [`VerbsError::PdContextMismatch`] when the PD's own context is
    /// not `ctx` (an AH must live on the PD, and so the context, of the QP
    /// that sends with it).
    ///
    /// # Safety
    ///
    /// `raw` is a live `ibv_pd` (from `ibv_alloc_pd`) and stays allocated
    /// until every clone of the returned `Pd` and every object made on it
    /// through udah has been dropped.
    pub unsafe fn from_raw_borrowed(ctx: &Context, raw: NonNull<sys::ibv_pd>) -> Result<Pd, VerbsError> {
        // SAFETY: the caller guarantees a live PD; `context` is a plain
        // pointer field set by libibverbs when it allocated the PD.
        let owner = unsafe { (*raw.as_ptr()).context };
        if owner != ctx.ptr() {
            return Err(VerbsError::PdContextMismatch { device: ctx.name().to_owned() });
        }
        Ok(Pd(Arc::new(PdInner { raw, ctx: ctx.clone(), owned: false })))
    }

    /// The `ibv_pd` pointer. Valid while this value lives.
    pub fn as_raw(&self) -> *mut sys::ibv_pd {
        self.0.raw.as_ptr()
    }

    /// Whether udah deallocates this PD when the last clone drops.
    pub fn is_owned(&self) -> bool {
        self.0.owned
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// Registers a new zeroed buffer of `len` bytes for local writes.
    pub fn reg_mr(&self, len: usize) -> Result<Mr, VerbsError> {
        let buf: Box<[u8]> = vec![0u8; len.max(1)].into_boxed_slice();
        let len = buf.len();
        let ptr = NonNull::from(Box::leak(buf)).cast::<u8>();
        let access = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        // SAFETY: `ptr..ptr+len` is a live heap allocation owned by the `Mr`
        // built below, freed only after `ibv_dereg_mr` in its `Drop`; the PD
        // is alive. `access` is a valid flag set.
        let raw = unsafe {
            sys::ibv_reg_mr(
                self.0.raw.as_ptr(),
                ptr.as_ptr().cast::<c_void>(),
                len,
                c_int::try_from(access).unwrap_or(1),
            )
        };
        match NonNull::new(raw) {
            Some(raw) => Ok(Mr { raw, buf: ptr, len, pd: self.clone() }),
            None => {
                let e = VerbsError::verb(Op::RegMr, last_errno()).on_device(self.context().name());
                // SAFETY: `ptr`/`len` are the `Box<[u8]>` leaked above, not
                // registered, and reclaimed once.
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len)) });
                Err(e)
            }
        }
    }
}

// ---------------------------------------------------------------------------
// MR

/// A registered memory region and its buffer.
///
/// The buffer is read and written by copying ([`read`](Mr::read),
/// [`write`](Mr::write)); no Rust reference to it is ever created, because
/// the NIC writes it behind the compiler's back. A range posted for receive
/// holds unspecified bytes until its completion is polled.
#[derive(Debug)]
pub struct Mr {
    raw: NonNull<ibv_mr>,
    buf: NonNull<u8>,
    len: usize,
    pd: Pd,
}

// SAFETY: the buffer is owned; writes need `&mut Mr`, reads copy out; the
// `ibv_mr` is only passed to verbs, which are thread safe.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only allows copying out of the buffer and reading `lkey`.
unsafe impl Sync for Mr {}

impl Mr {
    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: reading a plain field of the live `ibv_mr`.
        unsafe { (*self.raw.as_ptr()).lkey }
    }

    /// The buffer length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: at least one byte is registered).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    fn range(&self, offset: usize, len: usize) -> Result<*mut u8, VerbsError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.buf.as_ptr().wrapping_add(offset)),
            _ => Err(VerbsError::OutOfBounds { offset, len, size: self.len }),
        }
    }

    /// The address of `offset`, for a scatter/gather entry.
    fn addr(&self, offset: usize, len: usize) -> Result<u64, VerbsError> {
        Ok(self.range(offset, len)? as usize as u64)
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), VerbsError> {
        let src = self.range(offset, out.len())?;
        // SAFETY: `src..src+out.len()` lies in the owned buffer (checked by
        // `range`) and cannot overlap `out`, which is a distinct Rust
        // allocation; `u8` has no alignment or validity requirement.
        unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` to `offset`.
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<(), VerbsError> {
        let dst = self.range(offset, data.len())?;
        // SAFETY: as in `read`, with `&mut self` excluding concurrent Rust
        // access to the buffer.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: the MR came from `ibv_reg_mr` and is deregistered once;
        // after this returns the NIC no longer accesses the buffer.
        count_teardown(unsafe { sys::ibv_dereg_mr(self.raw.as_ptr()) });
        // SAFETY: `buf`/`len` are the `Box<[u8]>` leaked in `reg_mr`,
        // reclaimed exactly once, after deregistration.
        drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(self.buf.as_ptr(), self.len)) });
    }
}

// ---------------------------------------------------------------------------
// CQ

#[derive(Debug)]
struct CqInner {
    raw: NonNull<ibv_cq>,
    ctx: Context,
}

// SAFETY: CQs may be polled from any thread (providers lock internally).
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_cq`; QPs using it hold an `Arc`, so
        // they are destroyed; destroyed once while the context is open.
        count_teardown(unsafe { sys::ibv_destroy_cq(self.raw.as_ptr()) });
    }
}

/// A completion queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Cq(Arc<CqInner>);

/// A work completion (`struct ibv_wc`), with its enums converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkCompletion {
    /// The work request id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Vendor error.
    pub vendor_err: u32,
    /// Bytes received (GRH area included for UD receives).
    pub byte_len: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Remote QP number.
    pub src_qp: u32,
    /// `ibv_wc_flags`.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level (mlx5 reports packet-type bits here on RoCE).
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
}

impl WorkCompletion {
    /// The fields the core's libibverbs profile reads.
    pub fn ibv(&self) -> udah_core::ah::IbvWc {
        udah_core::ah::IbvWc {
            wc_flags: self.wc_flags,
            slid: self.slid,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            src_qp: self.src_qp,
            pkey_index: self.pkey_index,
        }
    }
}

impl WorkCompletion {
    /// Back to the C struct (the fields this type keeps; the rest zero).
    fn to_c(self) -> ibv_wc {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut w: ibv_wc = unsafe { core::mem::zeroed() };
        w.wr_id = self.wr_id;
        w.status = self.status.into();
        w.opcode = self.opcode.into();
        w.vendor_err = self.vendor_err;
        w.byte_len = self.byte_len;
        w.qp_num = self.qp_num;
        w.src_qp = self.src_qp;
        w.wc_flags = self.wc_flags;
        w.pkey_index = self.pkey_index;
        w.slid = self.slid;
        w.sl = self.sl;
        w.dlid_path_bits = self.dlid_path_bits;
        w
    }
}

impl From<&ibv_wc> for WorkCompletion {
    fn from(w: &ibv_wc) -> WorkCompletion {
        WorkCompletion {
            wr_id: w.wr_id,
            status: WcStatus::from(w.status),
            opcode: WcOpcode::from(w.opcode),
            vendor_err: w.vendor_err,
            byte_len: w.byte_len,
            qp_num: w.qp_num,
            src_qp: w.src_qp,
            wc_flags: w.wc_flags,
            pkey_index: w.pkey_index,
            slid: w.slid,
            sl: w.sl,
            dlid_path_bits: w.dlid_path_bits,
        }
    }
}

impl Cq {
    /// Polls up to 16 completions, appending them to `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<WorkCompletion>) -> Result<usize, VerbsError> {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut wcs: [ibv_wc; 16] = unsafe { core::mem::zeroed() };
        // SAFETY: the CQ is alive; `wcs` has room for the 16 entries the call
        // may write (layout of `ibv_wc` pinned in `ffi`). The provider's
        // `poll_cq` op is always set for a CQ it created.
        let n = unsafe { sys::ibv_poll_cq(self.0.raw.as_ptr(), 16, wcs.as_mut_ptr()) };
        let n = usize::try_from(n).map_err(|_| VerbsError::verb(Op::PollCq, n.saturating_neg()))?;
        out.extend(wcs.iter().take(n).map(WorkCompletion::from));
        Ok(n)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }
}

// ---------------------------------------------------------------------------
// AH

/// Converts validated attributes to the C struct, by value (the GID is
/// copied into the union's `raw` member, never cast; STYLE pitfall 1).
pub(crate) fn ah_attr_to_c(a: &AhAttr) -> ibv_ah_attr {
    let c = udah_core::ah::IbvAhAttr::from(a);
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: c.grh.dgid },
            flow_label: c.grh.flow_label,
            sgid_index: c.grh.sgid_index,
            hop_limit: c.grh.hop_limit,
            traffic_class: c.grh.traffic_class,
        },
        dlid: c.dlid,
        sl: c.sl,
        src_path_bits: c.src_path_bits,
        static_rate: c.static_rate,
        is_global: c.is_global,
        port_num: c.port_num,
    }
}

/// An address handle (`ibv_ah`).
///
/// Destroy it with [`destroy`](AddressHandle::destroy) to see the result;
/// dropping it destroys it too, counting a failure in
/// [`teardown_failures`] instead of panicking.
#[derive(Debug)]
pub struct AddressHandle {
    raw: NonNull<ibv_ah>,
    attr: AhAttr,
    pd: Pd,
}

// SAFETY: an AH may be used and destroyed from any thread.
unsafe impl Send for AddressHandle {}
// SAFETY: `&AddressHandle` only reads the pointer to pass it to verbs.
unsafe impl Sync for AddressHandle {}

impl AddressHandle {
    /// `ibv_create_ah` on `pd`.
    pub fn create(pd: &Pd, attr: &AhAttr) -> Result<AddressHandle, VerbsError> {
        let mut c = ah_attr_to_c(attr);
        // SAFETY: the PD is alive and `c` is a valid `ibv_ah_attr` (layout
        // pinned); the AH is owned by the value returned and destroyed once.
        let raw = unsafe { sys::ibv_create_ah(pd.0.raw.as_ptr(), &mut c) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            let mut e =
                VerbsError::verb(Op::CreateAh, last_errno()).on_device(pd.context().name()).on_port(attr.port.get());
            if let Some(g) = attr.grh {
                e = e.at_gid_index(u32::from(g.sgid_index));
            }
            e
        })?;
        Ok(AddressHandle { raw, attr: *attr, pd: pd.clone() })
    }

    /// The attributes it was created from.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }

    /// A token identifying this AH while it lives (its address).
    pub fn token(&self) -> u64 {
        self.raw.as_ptr() as usize as u64
    }

    /// Gives up ownership: the `ibv_ah` is no longer destroyed by this value
    /// (nor its PD reference kept). The caller destroys it with
    /// [`destroy_raw`](Self::destroy_raw) while the PD is alive.
    pub(crate) fn into_raw(self) -> NonNull<ibv_ah> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this.pd` is read out once and never used again through
        // `this`, which is not dropped; this releases the PD reference.
        drop(unsafe { core::ptr::read(&this.pd) });
        this.raw
    }

    /// `ibv_destroy_ah` of a pointer from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    ///
    /// `raw` came from `into_raw` of an AH created on `pd`, has not been
    /// destroyed yet, and no other thread uses it during or after the call.
    pub(crate) unsafe fn destroy_raw(raw: NonNull<ibv_ah>, pd: &Pd) -> Result<(), VerbsError> {
        // SAFETY: the caller guarantees a live AH that nobody else uses; it
        // is destroyed exactly once, here. Its PD (`pd`) is alive.
        let ret = unsafe { sys::ibv_destroy_ah(raw.as_ptr()) };
        check(Op::DestroyAh, ret).map_err(|e| e.on_device(pd.context().name()))
    }

    /// `ibv_destroy_ah`, reporting failure. The AH is gone either way.
    pub fn destroy(self) -> Result<(), VerbsError> {
        let this = ManuallyDrop::new(self);
        // SAFETY: the AH came from `ibv_create_ah`; `ManuallyDrop` keeps
        // `Drop` from destroying it a second time.
        let ret = unsafe { sys::ibv_destroy_ah(this.raw.as_ptr()) };
        let port = this.attr.port.get();
        let device = this.pd.context().name().to_owned();
        // SAFETY: `this.pd` is read out once and never used again through
        // `this`, which is not dropped; this releases the PD reference.
        drop(unsafe { core::ptr::read(&this.pd) });
        check(Op::DestroyAh, ret).map_err(|e| e.on_device(&device).on_port(port))
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: the AH came from `ibv_create_ah` and is destroyed once (the
        // explicit `destroy` path skips this `Drop`).
        count_teardown(unsafe { sys::ibv_destroy_ah(self.raw.as_ptr()) });
    }
}

// ---------------------------------------------------------------------------
// UD QP

/// Work-queue sizes of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
}

/// A range of a memory region to send from or receive into.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// The region.
    pub mr: &'a Mr,
    /// Offset in the region.
    pub offset: usize,
    /// Length.
    pub len: u32,
}

impl Segment<'_> {
    fn sge(&self) -> Result<ibv_sge, VerbsError> {
        Ok(ibv_sge { addr: self.mr.addr(self.offset, self.len as usize)?, length: self.len, lkey: self.mr.lkey() })
    }
}

/// The destination QP of a UD send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// Remote QP number.
    pub qpn: u32,
    /// Remote Q_Key.
    pub qkey: u32,
}

/// An unreliable-datagram QP.
#[derive(Debug)]
pub struct UdQp {
    raw: NonNull<ibv_qp>,
    pd: Pd,
    _send_cq: Cq,
    _recv_cq: Cq,
}

// SAFETY: QPs may be posted to and modified from any thread (providers lock).
unsafe impl Send for UdQp {}
// SAFETY: as above.
unsafe impl Sync for UdQp {}

impl Drop for UdQp {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_qp` and destroyed once, before the
        // CQs and PD it holds references to.
        count_teardown(unsafe { sys::ibv_destroy_qp(self.raw.as_ptr()) });
    }
}

impl UdQp {
    /// `ibv_create_qp` of type UD with one scatter/gather entry per request.
    pub fn create(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<UdQp, VerbsError> {
        // SAFETY: `ibv_qp_init_attr` is pointers and integers; all-zero (NULL
        // pointers, zero sizes) is a valid value.
        let mut init: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
        init.send_cq = send_cq.0.raw.as_ptr();
        init.recv_cq = recv_cq.0.raw.as_ptr();
        init.cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        init.qp_type = sys::ibv_qp_type::IBV_QPT_UD;
        // SAFETY: the PD and both CQs are alive (and kept alive by the QP);
        // `init` is a valid `ibv_qp_init_attr`; the QP is destroyed once.
        let raw = unsafe { sys::ibv_create_qp(pd.0.raw.as_ptr(), &mut init) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| VerbsError::verb(Op::CreateQp, last_errno()).on_device(pd.context().name()))?;
        Ok(UdQp { raw, pd: pd.clone(), _send_cq: send_cq.clone(), _recv_cq: recv_cq.clone() })
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: reading a plain field of the live `ibv_qp`.
        unsafe { (*self.raw.as_ptr()).qp_num }
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: sys::ibv_qp_attr_mask, port: u8) -> Result<(), VerbsError> {
        let mask = c_int::try_from(mask.0).unwrap_or(0);
        // SAFETY: the QP is alive and `attr` is a valid `ibv_qp_attr` with the
        // fields named in `mask` set.
        let ret = unsafe { sys::ibv_modify_qp(self.raw.as_ptr(), attr, mask) };
        check(Op::ModifyQp, ret).map_err(|e| e.on_device(self.pd.context().name()).on_port(port))
    }

    /// RESET → INIT (port, P_Key index, Q_Key) → RTR → RTS (SQ PSN 0).
    pub fn to_rts(&self, port: u8, pkey_index: u16, qkey: u32) -> Result<(), VerbsError> {
        use sys::ibv_qp_attr_mask as m;
        use sys::ibv_qp_state as s;
        // SAFETY: `ibv_qp_attr` is integers and `ibv_ah_attr`s (integers and
        // a byte union); all-zero is a valid value.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = s::IBV_QPS_INIT;
        a.pkey_index = pkey_index;
        a.port_num = port;
        a.qkey = qkey;
        self.modify(&mut a, m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_QKEY, port)?;
        a.qp_state = s::IBV_QPS_RTR;
        self.modify(&mut a, m::IBV_QP_STATE, port)?;
        a.qp_state = s::IBV_QPS_RTS;
        a.sq_psn = 0;
        self.modify(&mut a, m::IBV_QP_STATE | m::IBV_QP_SQ_PSN, port)
    }

    /// Moves the QP to the error state (`ibv_modify_qp` to `IBV_QPS_ERR`):
    /// the provider flushes its posted work requests (completions with
    /// [`WcStatus::WrFlushErr`]), as after a
    /// failure it detects itself. For fault tests (`udah serve
    /// --fault-qp-after`).
    pub fn to_error(&self, port: u8) -> Result<(), VerbsError> {
        // SAFETY: as in `to_rts`: all-zero is a valid `ibv_qp_attr`.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        self.modify(&mut a, sys::ibv_qp_attr_mask::IBV_QP_STATE, port)
    }

    /// Posts one receive into `seg` (a UD receive needs 40 bytes in front
    /// of the payload for the GRH area).
    pub fn post_recv(&self, seg: Segment<'_>, wr_id: u64) -> Result<(), VerbsError> {
        let mut sge = seg.sge()?;
        let mut wr = ibv_recv_wr { wr_id, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: the QP is alive; `wr` is one valid request whose single SGE
        // lies inside the registered region (checked by `addr`); the provider
        // copies the request before returning. The region outlives the
        // receive or is deregistered first (after which the NIC cannot
        // write it).
        let ret = unsafe { sys::ibv_post_recv(self.raw.as_ptr(), &mut wr, &mut bad) };
        check(Op::PostRecv, ret).map_err(|e| e.on_device(self.pd.context().name()))
    }

    /// Posts one signalled UD send of `seg` to `dest` through `ah`.
    pub fn post_send(&self, ah: &AddressHandle, dest: UdDest, seg: Segment<'_>, wr_id: u64) -> Result<(), VerbsError> {
        // SAFETY: `ah` is borrowed for the call, so it is alive and not
        // destroyed until the call returns.
        unsafe { self.post_send_raw(ah.raw, Some(ah.attr.port.get()), dest, seg, wr_id) }
    }

    /// [`post_send`](Self::post_send) through a bare `ibv_ah` pointer
    /// (`port` only labels errors).
    ///
    /// # Safety
    ///
    /// `ah` is a live AH on this QP's PD (or one of the same context) and is
    /// not destroyed before this call returns.
    pub(crate) unsafe fn post_send_raw(
        &self,
        ah: NonNull<ibv_ah>,
        port: Option<u8>,
        dest: UdDest,
        seg: Segment<'_>,
        wr_id: u64,
    ) -> Result<(), VerbsError> {
        let mut sge = seg.sge()?;
        // SAFETY: `ibv_send_wr` is integers, pointers and unions of those;
        // all-zero (NULL pointers) is a valid value.
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        wr.wr.ud = sys::ud_t { ah: ah.as_ptr(), remote_qpn: dest.qpn, remote_qkey: dest.qkey };
        let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
        // SAFETY: the QP is alive (borrowed) and the AH is alive for the call
        // (the caller's contract); `wr` is one valid UD send whose SGE lies
        // inside the registered region; the provider copies the request (and
        // the AH's address vector) before returning.
        let ret = unsafe { sys::ibv_post_send(self.raw.as_ptr(), &mut wr, &mut bad) };
        check(Op::PostSend, ret).map_err(|e| {
            let e = e.on_device(self.pd.context().name());
            match port {
                Some(p) => e.on_port(p),
                None => e,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udah_core::ah::{FlowLabel, GlobalRoute, PortNum, Sl};

    #[test]
    fn check_conventions() {
        assert!(check(Op::ModifyQp, 0).is_ok());
        assert_eq!(check(Op::ModifyQp, 22).unwrap_err().errno(), Some(22));
        assert_eq!(check(Op::QueryGidTable, -95).unwrap_err().errno(), Some(95));
    }

    #[test]
    fn ah_attr_by_value() {
        let a = AhAttr {
            port: PortNum::new(2).unwrap(),
            dlid: 0x1234,
            sl: Sl::new(5).unwrap(),
            src_path_bits: 1,
            static_rate: 3,
            grh: Some(GlobalRoute {
                dgid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
                flow_label: FlowLabel::new(0xabcde).unwrap(),
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x20,
            }),
        };
        let c = ah_attr_to_c(&a);
        // SAFETY: reading the byte view of a union written through `raw`.
        let dgid = unsafe { c.grh.dgid.raw };
        assert_eq!(dgid, a.grh.unwrap().dgid.0);
        assert_eq!((c.dlid, c.sl, c.src_path_bits, c.static_rate, c.is_global, c.port_num), (0x1234, 5, 1, 3, 1, 2));
        assert_eq!((c.grh.flow_label, c.grh.sgid_index, c.grh.hop_limit, c.grh.traffic_class), (0xabcde, 3, 64, 0x20));
        let no_grh = ah_attr_to_c(&AhAttr { grh: None, ..a });
        assert_eq!(no_grh.is_global, 0);
    }

    #[test]
    fn work_completion_from_c_keeps_unknown_values() {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut w: ibv_wc = unsafe { core::mem::zeroed() };
        w.wr_id = 9;
        w.status = 77;
        w.opcode = 200;
        w.byte_len = 104;
        w.src_qp = 0x12;
        w.wc_flags = 1;
        w.slid = 5;
        w.sl = 3;
        let c = WorkCompletion::from(&w);
        assert_eq!((c.status, c.opcode), (WcStatus::Unknown(77), WcOpcode::Unknown(200)));
        assert_eq!((c.wr_id, c.byte_len, c.src_qp, c.slid, c.sl), (9, 104, 0x12, 5, 3));
        let ibv = c.ibv();
        assert_eq!((ibv.wc_flags, ibv.src_qp, ibv.slid, ibv.sl), (1, 0x12, 5, 3));
        w.status = 0;
        w.opcode = 128;
        let ok = WorkCompletion::from(&w);
        assert_eq!((ok.status, ok.opcode), (WcStatus::Success, WcOpcode::Recv));
    }

    #[test]
    fn gid_record_from_c() {
        let e =
            ibv_gid_entry { gid: ibv_gid { raw: [0xab; 16] }, gid_index: 7, port_num: 1, gid_type: 9, ndev_ifindex: 3 };
        let r = GidRecord::from(&e);
        assert_eq!(r, GidRecord { gid: Gid([0xab; 16]), index: 7, port: 1, kind: GidKind::Unknown(9), ifindex: 3 });
    }
}
