//! Protection domains and registered memory regions.

use super::*;

#[derive(Debug)]
pub(super) struct PdInner {
    pub(super) raw: NonNull<ibv_pd>,
    pub(super) ctx: Context,
    /// `false` for the application's PD ([`Pd::from_raw_borrowed`]): never
    /// deallocated here.
    pub(super) owned: bool,
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
pub struct Pd(pub(super) Arc<PdInner>);

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
    pub(super) raw: NonNull<ibv_mr>,
    pub(super) buf: NonNull<u8>,
    pub(super) len: usize,
    pub(super) pd: Pd,
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
    pub(super) fn addr(&self, offset: usize, len: usize) -> Result<u64, VerbsError> {
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
