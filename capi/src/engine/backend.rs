//! The verbs a responder calls on the application's context and PD, and
//! [`PdBackend`], the core's `Hal` over them.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Error for Errno {
    fn kind(&self) -> ErrorKind {
        match self.0 {
            libc::ENOMEM | libc::EOVERFLOW | libc::ENOSPC => ErrorKind::OutOfResources,
            libc::EINVAL => ErrorKind::InvalidArgument,
            libc::ETIMEDOUT => ErrorKind::Timeout,
            libc::EAGAIN => ErrorKind::WouldBlock,
            libc::ENODEV | libc::ENOENT => ErrorKind::NotFound,
            libc::EOPNOTSUPP => ErrorKind::Unsupported,
            libc::EHOSTUNREACH | libc::ENETUNREACH => ErrorKind::Unreachable,
            _ => ErrorKind::Other,
        }
    }
}

/// The calling thread's `errno`.
pub fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `ibv_create_ah` as a function pointer.
pub type CreateAhFn = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah;
/// `ibv_destroy_ah` as a function pointer.
pub type DestroyAhFn = unsafe extern "C" fn(*mut ibv_ah) -> i32;

/// The AH verbs a responder calls. libudah uses libibverbs' own; the
/// preload passes the real library's (`dlvsym(RTLD_NEXT)`), because its own
/// `ibv_destroy_ah` would otherwise be called back.
#[derive(Debug, Clone, Copy)]
pub struct Verbs {
    /// `ibv_create_ah`.
    pub create_ah: CreateAhFn,
    /// `ibv_destroy_ah`.
    pub destroy_ah: DestroyAhFn,
}

impl Verbs {
    /// libibverbs' `ibv_create_ah` and `ibv_destroy_ah` (through `shim.c`).
    pub fn libibverbs() -> Verbs {
        Verbs { create_ah: crate::ffi::udah_shim_create_ah, destroy_ah: crate::ffi::udah_shim_destroy_ah }
    }
}

/// The link layer and GID-table length of `port` (`ibv_query_port`).
///
/// # Safety
/// `ctx` must be a live `ibv_context`.
pub unsafe fn query_port(ctx: *mut ibv_context, port: u8) -> Result<(LinkLayer, u32), Errno> {
    let (mut len, mut ll) = (0u32, 0u8);
    // SAFETY: `ctx` is live (the caller's contract); the out-pointers are
    // valid locals.
    let rc = unsafe { crate::ffi::udah_shim_query_port(ctx, port, &mut len, &mut ll) };
    if rc != 0 {
        return Err(Errno(rc));
    }
    // IBV_LINK_LAYER_ETHERNET = 2; UNSPECIFIED (0) is InfiniBand to libibverbs.
    Ok((if ll == 2 { LinkLayer::Ethernet } else { LinkLayer::Infiniband }, len))
}

/// One GID-table entry (`ibv_query_gid_ex`): `Ok(None)` for an empty slot.
///
/// # Safety
/// `ctx` must be a live `ibv_context`.
pub unsafe fn query_gid(ctx: *mut ibv_context, port: u8, index: u32) -> Result<Option<GidEntry>, Errno> {
    let (mut gid, mut ty, mut ifindex) = ([0u8; 16], 0u32, 0u32);
    // SAFETY: `ctx` is live (the caller's contract); `gid` has the 16 bytes
    // the shim writes, the other out-pointers are valid locals.
    let rc = unsafe { crate::ffi::udah_shim_query_gid(ctx, port, index, gid.as_mut_ptr(), &mut ty, &mut ifindex) };
    match rc {
        0 => {
            let gid = Gid(gid);
            // A type this core does not know reads as empty: libibverbs'
            // search would not match it with either class... except that it
            // maps every kernel type above 1 to RoCE v2; keep that rule.
            let ty = GidType::from_raw(ty).unwrap_or(GidType::RoceV2);
            Ok((gid != Gid::ZERO).then(|| GidEntry::new(gid, ty).with_ifindex(ifindex)))
        }
        e if e == errno::ENODATA => Ok(None),
        e => Err(Errno(e)),
    }
}

/// Snapshots `port`'s GID table: `ibv_query_port`, then one
/// `ibv_query_gid_ex` per slot. A table longer than [`GID_CAP`] is
/// `E2BIG`.
///
/// # Safety
/// `ctx` must be a live `ibv_context`.
pub unsafe fn read_gids(ctx: *mut ibv_context, port: u8, generation: u64) -> Result<Box<Gids>, Errno> {
    // SAFETY: forwarded contract.
    let (ll, len) = unsafe { query_port(ctx, port) }?;
    if len as usize > GID_CAP {
        return Err(Errno(libc::E2BIG));
    }
    let mut t = Box::new(Gids::new(port, ll, len));
    for i in 0..len {
        // SAFETY: forwarded contract.
        if let Some(e) = unsafe { query_gid(ctx, port, i) }? {
            t.set(i, e).map_err(|_| Errno(libc::EINVAL))?;
        }
    }
    t.set_generation(generation);
    Ok(t)
}

/// A snapshot from an explicit list (tests, or a caller with its own GID
/// source). Entries must have distinct indices below `len`.
pub fn gids_from_list(
    port: u8,
    link_layer: LinkLayer,
    len: u32,
    entries: impl IntoIterator<Item = (u32, GidEntry)>,
) -> Result<Box<Gids>, Errno> {
    if len as usize > GID_CAP {
        return Err(Errno(libc::E2BIG));
    }
    let mut t = Box::new(Gids::new(port, link_layer, len));
    for (i, e) in entries {
        if t.get(i).is_some() {
            return Err(Errno(libc::EEXIST));
        }
        t.set(i, e).map_err(|_| Errno(libc::EINVAL))?;
    }
    t.set_generation(1);
    Ok(t)
}

/// A backend AH: the `struct ibv_ah *` address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AhPtr(pub u64);

impl AhToken for AhPtr {
    fn into_token(self) -> u64 {
        self.0
    }
    fn from_token(token: u64) -> AhPtr {
        AhPtr(token)
    }
}

impl AhPtr {
    /// The pointer.
    pub fn ptr(self) -> *mut ibv_ah {
        core::ptr::with_exposed_provenance_mut(self.0 as usize)
    }
}

/// The core's [`Hal`] over the application's PD (borrowed).
#[derive(Debug)]
pub struct PdBackend {
    pub(super) ctx: *mut ibv_context,
    pub(super) pd: *mut ibv_pd,
    pub(super) verbs: Verbs,
    /// The GID generation: libibverbs has none to read, so it moves when
    /// the responder is told the table may have changed
    /// ([`Responder::refresh`]); a snapshot carries the value read before
    /// its first query.
    pub(super) generation: AtomicU64,
}

impl PdBackend {
    /// The backend of `ctx` (null: no GID queries) and `pd` (null: no AHs).
    pub fn new(ctx: *mut ibv_context, pd: *mut ibv_pd, verbs: Verbs) -> PdBackend {
        PdBackend { ctx, pd, verbs, generation: AtomicU64::new(1) }
    }

    /// Says that the GID table may have changed.
    pub fn bump_generation(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: the pointers are only passed to libibverbs, whose verbs are thread
// safe; the backend never dereferences them itself.
unsafe impl Send for PdBackend {}
// SAFETY: as for `Send`: shared use only calls thread-safe verbs.
unsafe impl Sync for PdBackend {}

impl ErrorType for PdBackend {
    type Error = Errno;
}

impl Hal for PdBackend {
    type Ah = AhPtr;

    fn port_info(&self, port: PortNum) -> Result<PortInfo, Errno> {
        if self.ctx.is_null() {
            return Err(Errno(libc::ENODEV));
        }
        // SAFETY: a non-null `ctx` is live for the responder's lifetime
        // (udah_responder_open's contract).
        let (ll, len) = unsafe { query_port(self.ctx, port.get()) }?;
        Ok(PortInfo::new(port.get(), ll, len))
    }

    /// `ibv_query_port`, then one `ibv_query_gid_ex` per slot; a table
    /// longer than `N` is `E2BIG`. On failure `table` is left as it was.
    fn snapshot_gids<const N: usize>(&self, port: PortNum, table: &mut GidTable<N>) -> Result<(), Errno> {
        let generation = self.generation.load(Ordering::Relaxed);
        let (ll, len) = self.port_info(port).map(|p| (p.link_layer, p.gid_tbl_len))?;
        if len as usize > N {
            return Err(Errno(libc::E2BIG));
        }
        let mut t = GidTable::<N>::new(port.get(), ll, len);
        for i in 0..len {
            // SAFETY: `port_info` succeeded, so `ctx` is non-null and live.
            if let Some(e) = unsafe { query_gid(self.ctx, port.get(), i) }? {
                t.set(i, e).map_err(|_| Errno(libc::EINVAL))?;
            }
        }
        t.set_generation(generation);
        *table = t;
        Ok(())
    }

    fn gid_generation(&self, _port: PortNum) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    fn resolve_l2(&self, _attr: &AhAttr) -> Result<Option<L2Info>, Errno> {
        // The kernel resolves the neighbour inside `ibv_create_ah`.
        Ok(None)
    }

    fn create_ah(&self, attr: &AhAttr, _l2: Option<&L2Info>) -> Result<AhPtr, Errno> {
        if self.pd.is_null() {
            return Err(Errno(libc::EINVAL));
        }
        let mut c = ibv_ah_attr { attr: IbvAhAttr::from(attr) };
        // SAFETY: `pd` is the application's live PD (udah_responder_open's
        // contract); `c` is a valid `struct ibv_ah_attr` for the call.
        let ah = unsafe { (self.verbs.create_ah)(self.pd, &mut c) };
        if ah.is_null() { Err(Errno(last_errno())) } else { Ok(AhPtr(ah.expose_provenance() as u64)) }
    }

    fn destroy_ah(&self, ah: AhPtr) -> Result<(), Errno> {
        // SAFETY: the AH table destroys each AH it created exactly once.
        let rc = unsafe { (self.verbs.destroy_ah)(ah.ptr()) };
        if rc == 0 { Ok(()) } else { Err(Errno(if rc > 0 { rc } else { last_errno() })) }
    }
}
